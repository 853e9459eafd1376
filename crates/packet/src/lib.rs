//! Wire formats as typed views over byte slices, builders for tests, and [`FlowKey`]
//! extraction.
//!
//! (The crate essay is completed as the wire modules land.)

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod key;

pub use key::{FlowKey, KeyField, KEY_WORDS};
