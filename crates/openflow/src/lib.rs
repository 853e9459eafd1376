//! OpenFlow matches, actions and flow entries, with the ovs-ofctl text syntax.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod action;
pub mod cases;
pub mod field;
pub mod flow;
pub mod flow_match;
pub mod ofctl;
pub mod subfield;

pub use flow_match::Match;

/// Errors of this crate. Messages follow ovs-ofctl's where it has one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A field constrained by a match lacks its prerequisite (OVS `OFPBMC_BAD_PREREQ`).
    #[error("{field}: prerequisites not met ({needs})")]
    Prerequisite {
        /// The field whose prerequisite is missing.
        field: &'static str,
        /// What the field needs, in ovs-ofctl terms.
        needs: &'static str,
    },
    /// Any other parse error, with ovs-ofctl's message.
    #[error("{0}")]
    Parse(String),
}
