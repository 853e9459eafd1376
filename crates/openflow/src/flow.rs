//! Flow entries: a match with its priority, cookie, table, timeouts, flags and actions (the
//! analogue of OVS's `struct ofputil_flow_mod` plus the counters of a flow-stats reply).
//!
//! A [`FlowEntry`] is what `ovs-ofctl add-flow` sends and what `dump-flows` shows. It prints
//! in both of ovs-ofctl's styles:
//!
//! - [`FlowEntry::to_ofctl_string`]: the flow_mod form that `ovs-ofctl parse-flow` prints after
//!   `OFPT_FLOW_MOD: ADD` (`priority=60000 cookie:0x123 hard:10 actions=...`);
//! - [`FlowEntry::to_dump_flows_string`]: the flow-stats form of `dump-flows` (`cookie=0x123,
//!   duration=1.5s, table=0, n_packets=3, n_bytes=180, priority=60000 actions=...`).
//!
//! Actions print as ovs-ofctl prints them for a given OpenFlow version (OVS encodes them
//! for the chosen protocol and prints what decodes back), so both take the version.

use crate::action::{Action, OfVersion};
use crate::flow_match::Match;
use crate::ofctl::actions::format_actions;
use crate::ofctl::match_fmt::format_match;
use crate::ofctl::value::{format_port, OFPP_NONE};

/// OpenFlow's default flow priority (`OFP_DEFAULT_PRIORITY`).
pub const DEFAULT_PRIORITY: u16 = 0x8000;
/// "Any group" (`OFPG_ANY`), the default `out_group`.
pub const OFPG_ANY: u32 = 0xffff_ffff;

/// Flow flags (OVS `enum ofputil_flow_mod_flags`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FlowFlags(pub u16);

impl FlowFlags {
    /// `send_flow_rem`: send a flow-removed message when the flow expires.
    pub const SEND_FLOW_REM: FlowFlags = FlowFlags(1 << 0);
    /// `check_overlap`: refuse to add a flow that overlaps one of the same priority.
    pub const CHECK_OVERLAP: FlowFlags = FlowFlags(1 << 1);
    /// `reset_counts`: reset the counters of a modified flow (OpenFlow 1.2+).
    pub const RESET_COUNTS: FlowFlags = FlowFlags(1 << 2);
    /// `no_packet_counts`: the switch need not count packets (OpenFlow 1.3+).
    pub const NO_PKT_COUNTS: FlowFlags = FlowFlags(1 << 3);
    /// `no_byte_counts`: the switch need not count bytes (OpenFlow 1.3+).
    pub const NO_BYT_COUNTS: FlowFlags = FlowFlags(1 << 4);

    /// True if every flag of `o` is set.
    pub const fn contains(self, o: FlowFlags) -> bool {
        self.0 & o.0 == o.0
    }

    /// Sets the flags of `o`.
    pub fn insert(&mut self, o: FlowFlags) {
        self.0 |= o.0;
    }

    /// ovs-ofctl's words, each followed by a space (`send_flow_rem check_overlap `).
    fn to_ofctl_words(self, version: OfVersion) -> String {
        let mut s = String::new();
        for (f, name) in [
            (FlowFlags::SEND_FLOW_REM, "send_flow_rem"),
            (FlowFlags::CHECK_OVERLAP, "check_overlap"),
            (FlowFlags::RESET_COUNTS, "reset_counts"),
            (FlowFlags::NO_PKT_COUNTS, "no_packet_counts"),
            (FlowFlags::NO_BYT_COUNTS, "no_byte_counts"),
        ] {
            // OpenFlow 1.0 and 1.1 have no reset_counts flag: OVS does not print one.
            if f == FlowFlags::RESET_COUNTS && version <= OfVersion::Of11 {
                continue;
            }
            if self.contains(f) {
                s.push_str(name);
                s.push(' ');
            }
        }
        s
    }
}

/// A flow's counters, as a flow-stats reply carries them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FlowStats {
    /// Packets matched.
    pub n_packets: u64,
    /// Bytes matched.
    pub n_bytes: u64,
    /// Time since the flow was added, in milliseconds.
    pub duration_ms: u64,
}

/// One flow entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowEntry {
    /// The match.
    pub flow_match: Match,
    /// Priority (default 32768).
    pub priority: u16,
    /// Cookie (the value given with `cookie=`).
    pub cookie: u64,
    /// Cookie mask, for commands that select flows by cookie (`cookie=0x123/-1`); 0 when
    /// the cookie is not matched.
    pub cookie_mask: u64,
    /// Table, if one was given (`table=N`); `None` means table 0 for an add and all
    /// tables for a delete.
    pub table: Option<u8>,
    /// Idle timeout in seconds (0 = none).
    pub idle_timeout: u16,
    /// Hard timeout in seconds (0 = none).
    pub hard_timeout: u16,
    /// Eviction importance (OpenFlow 1.4+; 0 = none).
    pub importance: u16,
    /// Flags.
    pub flags: FlowFlags,
    /// Output port a delete or a stats request is restricted to (`OFPP_ANY` = any).
    pub out_port: u16,
    /// Output group a delete or a stats request is restricted to (`OFPG_ANY` = any).
    pub out_group: u32,
    /// Actions and instructions (empty = drop).
    pub actions: Vec<Action>,
    /// Counters (zero for a flow parsed from text unless `n_packets=`/`n_bytes=` are given).
    pub stats: FlowStats,
}

impl Default for FlowEntry {
    fn default() -> Self {
        FlowEntry {
            flow_match: Match::catch_all(),
            priority: DEFAULT_PRIORITY,
            cookie: 0,
            cookie_mask: 0,
            table: None,
            idle_timeout: 0,
            hard_timeout: 0,
            importance: 0,
            flags: FlowFlags::default(),
            out_port: OFPP_NONE,
            out_group: OFPG_ANY,
            actions: Vec::new(),
            stats: FlowStats::default(),
        }
    }
}

impl FlowEntry {
    /// The table to install into: the one given, else 0.
    pub fn table_id(&self) -> u8 {
        match self.table {
            Some(255) | None => 0,
            Some(t) => t,
        }
    }

    /// The flow_mod form ovs-ofctl prints (after `OFPT_FLOW_MOD: ADD`) when the flow is
    /// sent with OpenFlow `version`: `[table:N ]MATCH cookie:.. idle:.. hard:..
    /// importance:.. FLAGS actions=...`.
    pub fn to_ofctl_string(&self, version: OfVersion) -> String {
        let mut s = String::new();
        if let Some(t) = self.table {
            if t != 0 && t != 255 {
                s.push_str(&format!("table:{t} "));
            }
        }
        let m = format_match(&self.flow_match, Some(self.priority));
        if !m.is_empty() {
            s.push_str(&m);
            s.push(' ');
        }
        if self.cookie != 0 && self.cookie != u64::MAX {
            s.push_str(&format!("cookie:{:#x} ", self.cookie));
        }
        if self.cookie_mask != 0 {
            s.push_str(&format!(
                "cookie:{:#x}/{:#x} ",
                self.cookie, self.cookie_mask
            ));
        }
        if self.idle_timeout != 0 {
            s.push_str(&format!("idle:{} ", self.idle_timeout));
        }
        if self.hard_timeout != 0 {
            s.push_str(&format!("hard:{} ", self.hard_timeout));
        }
        // Only OpenFlow 1.4 and later carry the importance.
        if self.importance != 0 && version >= OfVersion::Of14 {
            s.push_str(&format!("importance:{} ", self.importance));
        }
        if self.out_port != OFPP_NONE {
            s.push_str(&format!("out_port:{} ", format_port(self.out_port)));
        }
        s.push_str(&self.flags.to_ofctl_words(version));
        s.push_str("actions=");
        s.push_str(&format_actions(&self.actions, version));
        s
    }

    /// The flow-stats form of `ovs-ofctl dump-flows` (OVS `ofputil_flow_stats_format`);
    /// with `show_stats` false, the form of `dump-flows --no-stats`.
    pub fn to_dump_flows_string(&self, version: OfVersion, show_stats: bool) -> String {
        let mut s = String::new();
        if show_stats || self.cookie != 0 {
            s.push_str(&format!("cookie={:#x}, ", self.cookie));
        }
        if show_stats {
            // OVS `ofp_print_duration`: no decimals for whole seconds, else milliseconds.
            let (sec, ms) = (self.stats.duration_ms / 1000, self.stats.duration_ms % 1000);
            if ms == 0 {
                s.push_str(&format!("duration={sec}s, "));
            } else {
                s.push_str(&format!("duration={sec}.{ms:03}s, "));
            }
        }
        if show_stats || self.table_id() != 0 {
            s.push_str(&format!("table={}, ", self.table_id()));
        }
        if show_stats {
            let stat = |v: u64| {
                if v == u64::MAX {
                    "?".to_string()
                } else {
                    v.to_string()
                }
            };
            s.push_str(&format!(
                "n_packets={}, n_bytes={}, ",
                stat(self.stats.n_packets),
                stat(self.stats.n_bytes)
            ));
        }
        if self.idle_timeout != 0 {
            s.push_str(&format!("idle_timeout={}, ", self.idle_timeout));
        }
        if self.hard_timeout != 0 {
            s.push_str(&format!("hard_timeout={}, ", self.hard_timeout));
        }
        s.push_str(&self.flags.to_ofctl_words(OfVersion::Of15));
        if self.importance != 0 {
            s.push_str(&format!("importance={}, ", self.importance));
        }
        let m = format_match(&self.flow_match, Some(self.priority));
        if !m.is_empty() {
            s.push_str(&m);
            s.push(' ');
        }
        s.push_str("actions=");
        s.push_str(&format_actions(&self.actions, version));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dump_flows_prints_like_ovs() {
        let mut f = FlowEntry {
            priority: 10,
            ..FlowEntry::default()
        };
        f.stats.duration_ms = 3000;
        assert_eq!(
            f.to_dump_flows_string(OfVersion::Of10, true),
            "cookie=0x0, duration=3s, table=0, n_packets=0, n_bytes=0, priority=10 actions=drop"
        );
        f.stats.duration_ms = 3042;
        f.stats.n_packets = u64::MAX;
        assert!(f
            .to_dump_flows_string(OfVersion::Of10, true)
            .starts_with("cookie=0x0, duration=3.042s, table=0, n_packets=?, "));
        assert_eq!(
            f.to_dump_flows_string(OfVersion::Of10, false),
            "priority=10 actions=drop"
        );
    }

    #[test]
    fn flow_mod_form_omits_defaults() {
        let f = FlowEntry::default();
        assert_eq!(f.to_ofctl_string(OfVersion::Of13), "actions=drop");
        let f = FlowEntry {
            table: Some(255),
            cookie: u64::MAX,
            ..FlowEntry::default()
        };
        assert_eq!(f.to_ofctl_string(OfVersion::Of13), "actions=drop");
        assert_eq!(f.table_id(), 0);
    }
}
