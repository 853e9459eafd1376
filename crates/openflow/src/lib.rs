//! OpenFlow matches, actions and flow entries, with the ovs-ofctl text syntax.
//!
//! Flows reach ferrovs as OVS material: `ovs-ofctl add-flow` lines, test suites, dumps.
//! This crate reads and prints them exactly as ovs-ofctl does, so that a flow means the
//! same thing here as in Open vSwitch and prints back byte for byte.
//!
//! # Pieces
//!
//! - [`field`]: the field registry (OVS `meta-flow`): names, widths, maskability, prerequisites,
//!   the protocols that can express each field, and where it lives in a [`packet::key::FlowKey`].
//! - [`protocols`]: sets of OpenFlow protocol variants (`any`, `NXM,OXM`, `OXM-OpenFlow13`...), as
//!   ovs-ofctl names, narrows and chooses them.
//! - [`Match`] ([`flow_match`]): a value/mask pair over a `FlowKey`, with OVS's field setters
//!   (`mf_set`) and prerequisite check; the classifier's rule type.
//! - [`flow::FlowEntry`]: match, priority, cookie, table, timeouts, flags, actions and counters.
//! - [`action`]: actions and instructions.
//! - [`ofctl`]: the text syntax. [`ofctl::parse_flow`] reads a flow and computes the protocols that
//!   can carry it (what `ovs-ofctl parse-flow` reports as "usable protocols") and the one ovs-ofctl
//!   would choose; [`flow::FlowEntry::to_ofctl_string`] prints it back in ovs-ofctl's normalized
//!   form for that protocol; [`ofctl::format_match`], [`ofctl::parse_match`] do the match alone;
//!   [`ofctl::format_flow_key`] and [`ofctl::parse_flow_key`] print and read a packet's key as
//!   `ofproto/trace` does.
//! - [`cases`]: replays the acceptance cases taken from OVS's own tests.
//!
//! # Invariants
//!
//! - A `Match` value has no bit set outside its mask.
//! - Parsing never panics, whatever the input (property-tested); errors carry ovs-ofctl's message
//!   (`5/1: invalid mask for field nw_ttl`).
//! - Parsing computes usable protocols from the same per-field facts OVS uses, so the chosen
//!   protocol, and with it the printed actions, match ovs-ofctl's.
//!
//! Everything here is plain data: types are `Send + Sync`, and the registry is built once
//! on first use.
//!
//! # Example
//! ```
//! use openflow::field::Protocols;
//! use openflow::ofctl::{parse_flow, ParseOptions};
//!
//! let opts = ParseOptions::from_ofctl_options("").unwrap(); // ovs-ofctl's default: OpenFlow 1.0
//! let p = parse_flow("priority=100,ip,nw_dst=10.0.0.0/8,actions=drop", &opts).unwrap();
//! assert_eq!(p.usable, Protocols::ANY);
//! assert_eq!(p.chosen.name(), Some("OpenFlow10-table_id"));
//! assert_eq!(p.to_ofctl_string(), "priority=100,ip,nw_dst=10.0.0.0/8 actions=drop");
//!
//! let err = parse_flow("ip,nw_ttl=5/1,actions=drop", &opts).unwrap_err();
//! assert_eq!(err.to_string(), "5/1: invalid mask for field nw_ttl");
//!
//! let p = parse_flow("tcp6,tcp_src=80,actions=drop", &opts).unwrap();
//! assert_eq!(p.usable.to_ofctl_string(), "NXM,OXM");
//! assert!(p.flow.flow_match.check_prerequisites().is_ok());
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod action;
pub mod cases;
pub mod field;
pub mod flow;
pub mod flow_match;
pub mod ofctl;
pub mod protocols;
pub mod subfield;

pub use flow_match::Match;

/// Errors of this crate. Messages follow ovs-ofctl's where it has one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A field constrained by a match lacks its prerequisite (OVS `OFPBMC_BAD_PREREQ`).
    #[error("{field}: prerequisites not met (needs {needs}) (OFPBMC_BAD_PREREQ)")]
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
