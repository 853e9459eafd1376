//! OpenFlow matches, actions and flow entries, with the ovs-ofctl text syntax.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod flow_match;

pub use flow_match::Match;
