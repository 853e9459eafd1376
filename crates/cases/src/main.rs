//! `ferrovs-cases`: replays OVS case files.

fn main() {}
