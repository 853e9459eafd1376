//! Priority lookup over masked rules (tuple-space search) with wildcard tracking.

#![forbid(unsafe_code)]
#![warn(missing_docs)]
