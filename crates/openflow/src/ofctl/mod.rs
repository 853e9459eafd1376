//! The ovs-ofctl text syntax: parse and print flows, matches, actions and field values the
//! way `ovs-ofctl` does (its normalized form).

pub mod actions;
pub mod value;
