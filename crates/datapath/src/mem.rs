//! The process's memory policy: see the `mempolicy` crate, whose items this module re-exports
//! (`datapath::mem::retain_freed_memory` is what the switch's binaries call first thing in
//! `main`).

pub use mempolicy::*;
