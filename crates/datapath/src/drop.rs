//! Why the datapath dropped a packet.
//!
//! A drop in the data path is not an error: it is a disposition with a reason, and every one
//! is counted (style.md § 4, OVS `datapath_drop_*`, VPP `foreach_*_error`). Counters are kept
//! per queue (see [`crate::stats`]) and indexed by [`DropReason`], and read by name as
//! `drop_<reason>` ([`DropReason::counter_name`]).
//!
//! The netdev layer's reasons come first, then those of the caches, upcalls and action
//! execution; each variant has a test asserting that its counter moves (`tests/drops.rs`,
//! `tests/cached.rs`).

/// Why a packet was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropReason {
    /// The rx path found no free buffer of the size class it needed in the caller's pool.
    NoBuffer,
    /// The frame is longer than the largest buffer ([`crate::buffer::MAX_FRAME_LEN`]).
    TooLong,
    /// A bounded rx queue was full when a frame arrived (a NIC ring overflow).
    RxQueueFull,
    /// A bounded tx queue was full: the packet is dropped, the sender never blocks.
    TxQueueFull,
    /// The port cannot transmit (a pcap replay has no tx side, like DPDK's `tx_drop`).
    TxUnsupported,
    /// A cache miss found its ingress port's upcall budget spent (a storm of new flows).
    UpcallLimit,
    /// A cache miss arrived while the flow tables were being changed.
    UpcallBusy,
    /// The translation of a cache miss failed (no such port or bridge).
    UpcallFailed,
    /// The flow's actions drop the packet (an empty action list: an explicit drop).
    FlowDrop,
    /// An output to a datapath port that does not exist.
    NoPort,
    /// The packet's only destination is the controller, whose channel does not exist yet.
    Userspace,
    /// An action this datapath does not execute yet (recirculation).
    Unsupported,
    /// A VLAN push/pop or header rewrite did not fit the packet's bytes.
    HeaderRewrite,
}

impl DropReason {
    /// Number of reasons, the length of a per-reason counter array.
    pub const COUNT: usize = 13;

    /// Every reason, in counter order.
    pub const ALL: [DropReason; DropReason::COUNT] = [
        DropReason::NoBuffer,
        DropReason::TooLong,
        DropReason::RxQueueFull,
        DropReason::TxQueueFull,
        DropReason::TxUnsupported,
        DropReason::UpcallLimit,
        DropReason::UpcallBusy,
        DropReason::UpcallFailed,
        DropReason::FlowDrop,
        DropReason::NoPort,
        DropReason::Userspace,
        DropReason::Unsupported,
        DropReason::HeaderRewrite,
    ];

    /// The reason in snake case, as used in traces and logs (`"no_buffer"`).
    pub const fn as_str(self) -> &'static str {
        match self {
            DropReason::NoBuffer => "no_buffer",
            DropReason::TooLong => "too_long",
            DropReason::RxQueueFull => "rx_queue_full",
            DropReason::TxQueueFull => "tx_queue_full",
            DropReason::TxUnsupported => "tx_unsupported",
            DropReason::UpcallLimit => "upcall_limit",
            DropReason::UpcallBusy => "upcall_busy",
            DropReason::UpcallFailed => "upcall_failed",
            DropReason::FlowDrop => "explicit",
            DropReason::NoPort => "no_port",
            DropReason::Userspace => "userspace",
            DropReason::Unsupported => "unsupported_action",
            DropReason::HeaderRewrite => "header_rewrite",
        }
    }

    /// The counter's name, `drop_<reason>` (`"drop_no_buffer"`).
    pub const fn counter_name(self) -> &'static str {
        match self {
            DropReason::NoBuffer => "drop_no_buffer",
            DropReason::TooLong => "drop_too_long",
            DropReason::RxQueueFull => "drop_rx_queue_full",
            DropReason::TxQueueFull => "drop_tx_queue_full",
            DropReason::TxUnsupported => "drop_tx_unsupported",
            DropReason::UpcallLimit => "drop_upcall_limit",
            DropReason::UpcallBusy => "drop_upcall_busy",
            DropReason::UpcallFailed => "drop_upcall_failed",
            DropReason::FlowDrop => "drop_explicit",
            DropReason::NoPort => "drop_no_port",
            DropReason::Userspace => "drop_userspace",
            DropReason::Unsupported => "drop_unsupported_action",
            DropReason::HeaderRewrite => "drop_header_rewrite",
        }
    }

    /// Index of the reason in a per-reason counter array.
    pub const fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for DropReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_indexes_match_position() {
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
        }
    }

    #[test]
    fn counter_name_is_drop_prefixed_as_str() {
        for r in DropReason::ALL {
            assert_eq!(r.counter_name(), format!("drop_{}", r.as_str()));
        }
    }
}
