//! OpenFlow actions and instructions (the analogue of OVS's `ofpact`s).
//!
//! Instructions (goto_table, write_actions, clear_actions, write_metadata, meter) are
//! variants of the same enum, as OVS keeps them in one list: a flow's "actions" is one
//! `Vec<Action>` where instruction variants come after the apply-actions part.
//!
//! NOTE: first version (output and drop); the full vocabulary lands with the ovs-ofctl
//! action syntax.

/// One action or instruction.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Action {
    /// `output:PORT` (OpenFlow 1.0 16-bit port numbers; reserved ports as `OFPP_*`).
    Output {
        /// The port.
        port: u16,
        /// Bytes to send to the controller when `port` is `CONTROLLER` (0 = all).
        max_len: u16,
    },
}

/// An OpenFlow protocol version, which decides how actions print (OVS encodes actions for
/// the chosen version and prints what decodes back).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OfVersion {
    /// OpenFlow 1.0 (also with NXM).
    Of10,
    /// OpenFlow 1.1.
    Of11,
    /// OpenFlow 1.2.
    Of12,
    /// OpenFlow 1.3.
    Of13,
    /// OpenFlow 1.4.
    Of14,
    /// OpenFlow 1.5.
    Of15,
}
