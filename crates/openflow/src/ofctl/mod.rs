//! The ovs-ofctl text syntax: parse and print flows, matches, actions and field values the
//! way `ovs-ofctl` does (its normalized form).
//!
//! - [`flow`]: flow text → [`crate::flow::FlowEntry`] with usable protocols ([`parse_flow`],
//!   [`parse_match`], [`ParseOptions`]).
//! - [`match_fmt`]: [`crate::Match`] → text ([`format_match`]).
//! - [`flow_key`]: a packet's [`packet::key::FlowKey`] ↔ OVS `flow_format` text, as `ofproto/trace`
//!   prints it on its `Flow:` line.
//! - [`value`]: one field's value and mask.
//! - [`actions`]: the action list.

pub mod actions;
pub mod flow;
pub mod flow_key;
pub mod match_fmt;
pub mod value;

pub use flow::{
    parse_flow, parse_flow_mod_line, parse_match, parse_match_usable, FlowCommand, ParseOptions,
    ParsedFlow,
};
pub use flow_key::{format_flow_key, parse_flow_key};
pub use match_fmt::format_match;
