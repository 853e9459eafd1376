//! Wire formats as typed views over byte slices, builders for tests, and [`FlowKey`]
//! extraction.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod builder;
pub mod checksum;
pub mod extract;
pub mod key;

pub use extract::{extract, ExtractInfo, ParseStop, StopReason};
pub use key::{FlowKey, KeyField, KEY_WORDS};
pub mod wire;
