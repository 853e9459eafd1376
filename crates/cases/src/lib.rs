//! Replays OVS case files through ferrovs.

#![forbid(unsafe_code)]
#![warn(missing_docs)]
