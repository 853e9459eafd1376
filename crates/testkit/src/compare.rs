//! Comparison of `Datapath actions:` strings, the way the OVS trace cases ask for it.
//!
//! A datapath action list is printed by OVS as comma-separated top-level items, for example
//! `set(ipv4(src=10.0.0.1,ttl=63)),2,push_vlan(vid=10,pcp=0),3`. Commas inside parentheses
//! belong to one item; [`split_actions`] respects that. Three modes exist ([`CompareMode`]):
//!
//! - `exact`: string equality (after trimming).
//! - `unordered`: the two lists are equal as multisets of items. `drop` is the empty list.
//! - `normalized`: what `ovs-dpctl normalize-actions` checks in the OVS tests. Each output is
//!   paired with the *version* of the packet it sends: the VLAN stack (starting from the input
//!   packet's tags, which is why this mode needs the trace input) and the fields set so far. The
//!   two lists are equal if they send the same multiset of (version, port) pairs. So the order
//!   among copies of the same packet version does not matter, and a
//!   `push_vlan`/`pop_vlan`/`set(...)` must come before exactly the outputs that need it:
//!   `pop_vlan,2,push_vlan(vid=10,pcp=0),5` on a packet tagged 10 equals `5,pop_vlan,2`. Actions
//!   other than outputs, VLAN pushes/pops and sets (`userspace(...)`, `ct(...)`, `recirc(...)`…)
//!   count as outputs of the current version and also become part of every later version, so their
//!   order relative to the rest still matters.
//!
//! [`segmented`] is a stricter variant that does not need the input packet: it cuts both
//! lists at every non-output action and compares the pieces in order, outputs as multisets.
//! It implies `normalized` but not the reverse: OVS 3.1 passes 6 of the 12 `normalized`
//! trace cases only under the packet-version rule (the VLAN-handling rows, where flooding
//! interleaves `pop_vlan`/`push_vlan` differently from the expected text).
//!
//! Every function here is pure; the ferrovs side of the differential tester reuses them.
//!
//! # Example
//! ```
//! use testkit::compare::{actions_match, split_actions, CompareMode};
//! assert_eq!(split_actions("set(ipv4(src=1.2.3.4,ttl=3)),2"), ["set(ipv4(src=1.2.3.4,ttl=3))", "2"]);
//! let tagged = "in_port(4),eth(src=50:54:00:00:00:01,dst=ff:ff:ff:ff:ff:ff),\
//!               eth_type(0x8100),vlan(vid=10,pcp=0),encap(eth_type(0xabcd))";
//! assert!(actions_match(CompareMode::Unordered, "1,2,3", "3,1,2", tagged));
//! assert!(actions_match(CompareMode::Normalized, "5,pop_vlan,2", "pop_vlan,2,push_vlan(vid=10,pcp=0),5", tagged));
//! assert!(!actions_match(CompareMode::Normalized, "2,pop_vlan,3", "3,pop_vlan,2", tagged));
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// How two `Datapath actions:` strings are compared (the `compare` field of a trace case).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum CompareMode {
    /// String equality after trimming.
    #[default]
    Exact,
    /// Multiset equality of the top-level items.
    Unordered,
    /// Same non-output actions in the same order; outputs between them as multisets.
    Normalized,
}

impl CompareMode {
    /// The mode's name as the case files spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Exact => "exact",
            Self::Unordered => "unordered",
            Self::Normalized => "normalized",
        }
    }
}

/// Splits an action list at top-level commas: commas inside parentheses do not separate.
///
/// Items are trimmed and empty items are dropped, so `""` gives an empty list. `drop` is
/// returned as the single item `drop`; see [`action_items`] for the list without it.
pub fn split_actions(actions: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in actions.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                items.push(actions[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(actions[start..].trim());
    items.retain(|s| !s.is_empty());
    items
}

/// The top-level items of an action list, with `drop` (OVS's spelling of "no actions")
/// removed.
pub fn action_items(actions: &str) -> Vec<&str> {
    let mut items = split_actions(actions);
    items.retain(|s| *s != "drop");
    items
}

/// Whether `item` is an output to a datapath port: a bare port number.
pub fn is_output(item: &str) -> bool {
    !item.is_empty() && item.bytes().all(|b| b.is_ascii_digit())
}

/// String equality after trimming.
pub fn exact(expected: &str, got: &str) -> bool {
    expected.trim() == got.trim()
}

/// Multiset equality of the top-level items (`drop` is the empty list).
pub fn unordered(expected: &str, got: &str) -> bool {
    multiset(&action_items(expected)) == multiset(&action_items(got))
}

/// A normalized action list: the non-output actions in order, each followed by the sorted
/// outputs up to the next non-output action. The first segment has no leading action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment<'a> {
    /// The non-output action that opens the segment, `None` for the first segment.
    pub action: Option<&'a str>,
    /// The outputs of the segment, sorted.
    pub outputs: Vec<&'a str>,
}

/// Cuts an action list into [`Segment`]s at each non-output action.
pub fn segments(actions: &str) -> Vec<Segment<'_>> {
    let mut segs = vec![Segment {
        action: None,
        outputs: Vec::new(),
    }];
    for item in action_items(actions) {
        if is_output(item) {
            segs.last_mut()
                .expect("segs starts non-empty and only grows")
                .outputs
                .push(item);
        } else {
            segs.push(Segment {
                action: Some(item),
                outputs: Vec::new(),
            });
        }
    }
    for seg in &mut segs {
        seg.outputs.sort_unstable();
    }
    segs
}

/// Segment-by-segment equality: the same non-output actions in the same order, and the
/// same multiset of outputs between each two of them. Stricter than [`normalized`].
pub fn segmented(expected: &str, got: &str) -> bool {
    segments(expected) == segments(got)
}

/// Packet-version equality (`ovs-dpctl normalize-actions`); see the module documentation.
/// `input` is the traced packet, in datapath (`in_port(1),eth(..),eth_type(0x8100),vlan(..)`)
/// or OpenFlow (`in_port=1,dl_vlan=10`) syntax; only its VLAN tags are read.
pub fn normalized(expected: &str, got: &str, input: &str) -> bool {
    let tags = input_vlan_tags(input);
    versioned_outputs(expected, &tags) == versioned_outputs(got, &tags)
}

/// Compares `got` with `expected` by `mode`; `input` is the traced packet (only
/// [`CompareMode::Normalized`] reads it).
pub fn actions_match(mode: CompareMode, expected: &str, got: &str, input: &str) -> bool {
    match mode {
        CompareMode::Exact => exact(expected, got),
        CompareMode::Unordered => unordered(expected, got),
        CompareMode::Normalized => normalized(expected, got, input),
    }
}

/// One 802.1Q/802.1ad tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VlanTag {
    /// The TPID: 0x8100 or 0x88a8.
    pub tpid: u16,
    /// The VLAN id.
    pub vid: u16,
    /// The priority.
    pub pcp: u8,
}

/// The VLAN tags of a trace input, outermost first. Datapath syntax gives them as
/// `eth_type(0x8100),vlan(vid=10,pcp=0),encap(...)`, possibly nested; OpenFlow syntax as
/// `dl_vlan=`/`dl_vlan_pcp=` or `vlan_tci=` (outer tag only). Unparsable parts are skipped.
pub fn input_vlan_tags(input: &str) -> Vec<VlanTag> {
    let mut tags = Vec::new();
    if input.contains('(') {
        odp_vlan_tags(input, &mut tags);
        return tags;
    }
    let mut vid = None;
    let mut pcp = 0u8;
    for item in input.split(',') {
        match item.trim().split_once('=') {
            Some(("dl_vlan", v)) => vid = parse_num(v).and_then(|v| u16::try_from(v).ok()),
            Some(("dl_vlan_pcp", v)) => {
                pcp = parse_num(v).and_then(|v| u8::try_from(v).ok()).unwrap_or(0)
            }
            Some(("vlan_tci", v)) => {
                let tci = parse_num(v.split('/').next().unwrap_or(v)).unwrap_or(0);
                if tci & 0x1000 != 0 {
                    vid = u16::try_from(tci & 0xfff).ok();
                    pcp = u8::try_from((tci >> 13) & 7).unwrap_or(0);
                }
            }
            _ => {}
        }
    }
    tags.extend(vid.map(|vid| VlanTag {
        tpid: 0x8100,
        vid,
        pcp,
    }));
    tags
}

fn odp_vlan_tags(key: &str, tags: &mut Vec<VlanTag>) {
    let mut eth_type = 0x8100u16;
    for item in split_actions(key) {
        if let Some(t) = call_args(item, "eth_type") {
            eth_type = parse_num(t)
                .and_then(|t| u16::try_from(t).ok())
                .unwrap_or(0x8100);
        } else if let Some(args) = call_args(item, "vlan") {
            let kv = key_values(args);
            tags.push(VlanTag {
                tpid: eth_type,
                vid: kv
                    .get("vid")
                    .and_then(|v| parse_num(v))
                    .and_then(|v| u16::try_from(v).ok())
                    .unwrap_or(0),
                pcp: kv
                    .get("pcp")
                    .and_then(|v| parse_num(v))
                    .and_then(|v| u8::try_from(v).ok())
                    .unwrap_or(0),
            });
        } else if let Some(inner) = call_args(item, "encap") {
            odp_vlan_tags(inner, tags);
        }
    }
}

/// The version of a packet as the actions change it, in a canonical form.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Default)]
struct Version {
    /// Tags popped beyond what the input had (only if the input's tags were unknown).
    underflow: usize,
    /// The VLAN stack, outermost first.
    tags: Vec<VlanTag>,
    /// `header.field` → value for every `set(...)` so far; later sets win.
    sets: BTreeMap<String, String>,
    /// Other packet-changing actions so far, in order.
    opaque: Vec<String>,
}

/// The multiset of (packet version, output) of an action list.
fn versioned_outputs(actions: &str, input_tags: &[VlanTag]) -> BTreeMap<(Version, String), usize> {
    let mut version = Version {
        tags: input_tags.to_vec(),
        ..Version::default()
    };
    let mut out = BTreeMap::new();
    for item in action_items(actions) {
        if is_output(item) {
            *out.entry((version.clone(), item.to_owned())).or_insert(0) += 1;
        } else if item == "pop_vlan" {
            if version.tags.is_empty() {
                version.underflow += 1;
            } else {
                version.tags.remove(0);
            }
        } else if let Some(args) = call_args(item, "push_vlan") {
            let kv = key_values(args);
            let num = |k: &str| kv.get(k).and_then(|v| parse_num(v));
            version.tags.insert(
                0,
                VlanTag {
                    tpid: num("tpid")
                        .and_then(|v| u16::try_from(v).ok())
                        .unwrap_or(0x8100),
                    vid: num("vid").and_then(|v| u16::try_from(v).ok()).unwrap_or(0),
                    pcp: num("pcp").and_then(|v| u8::try_from(v).ok()).unwrap_or(0),
                },
            );
        } else if let Some(inner) = call_args(item, "set").or_else(|| call_args(item, "set_masked"))
        {
            let mut parsed = false;
            if let Some((header, rest)) = inner.split_once('(') {
                if let Some(fields) = rest.strip_suffix(')') {
                    for (k, v) in key_values(fields) {
                        version.sets.insert(format!("{header}.{k}"), v.to_owned());
                        parsed = true;
                    }
                }
            }
            if !parsed {
                version.sets.insert(inner.to_owned(), String::new());
            }
        } else {
            *out.entry((version.clone(), item.to_owned())).or_insert(0) += 1;
            version.opaque.push(item.to_owned());
        }
    }
    out
}

/// For `name(args)`, the `args`.
fn call_args<'a>(item: &'a str, name: &str) -> Option<&'a str> {
    item.strip_prefix(name)?
        .strip_prefix('(')?
        .strip_suffix(')')
}

/// `k=v` pairs at the top level of `args` (commas inside parentheses do not separate).
fn key_values(args: &str) -> BTreeMap<&str, &str> {
    split_actions(args)
        .into_iter()
        .filter_map(|kv| kv.split_once('='))
        .collect()
}

fn parse_num(s: &str) -> Option<u32> {
    let s = s.trim();
    match s.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

fn multiset<'a>(items: &[&'a str]) -> BTreeMap<&'a str, usize> {
    let mut m = BTreeMap::new();
    for item in items {
        *m.entry(*item).or_insert(0) += 1;
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_actions_keeps_commas_inside_parentheses() {
        assert_eq!(
            split_actions("set(ipv4(src=1.1.1.1,dst=2.2.2.2)),2,push_vlan(vid=10,pcp=0),3"),
            [
                "set(ipv4(src=1.1.1.1,dst=2.2.2.2))",
                "2",
                "push_vlan(vid=10,pcp=0)",
                "3"
            ]
        );
        assert_eq!(split_actions(""), Vec::<&str>::new());
        assert_eq!(split_actions("drop"), ["drop"]);
        assert_eq!(split_actions(" 1 , 2 "), ["1", "2"]);
    }

    #[test]
    fn action_items_drop_is_empty() {
        assert!(action_items("drop").is_empty());
        assert!(action_items("").is_empty());
    }

    #[test]
    fn exact_trims_only() {
        assert!(exact("1,2", " 1,2 "));
        assert!(!exact("1,2", "2,1"));
    }

    #[test]
    fn unordered_is_multiset() {
        assert!(unordered("7,1,4,2,3", "1,2,3,4,7"));
        assert!(!unordered("1,1,2", "1,2,2"));
        assert!(!unordered("1,2", "1,2,2"));
        assert!(unordered("drop", ""));
    }

    #[test]
    fn unordered_commas_inside_parentheses_do_not_split() {
        // Split at every comma, these two would be the same multiset.
        let a = "set(ipv4(src=1.1.1.1,ttl=3)),2";
        let b = "set(ipv4(ttl=3,src=1.1.1.1)),2";
        assert!(!unordered(a, b));
        assert!(unordered(a, "2,set(ipv4(src=1.1.1.1,ttl=3))"));
    }

    const UNTAGGED: &str =
        "in_port(1),eth(src=50:54:00:00:00:01,dst=50:54:00:00:00:02),eth_type(0x1234)";
    const TAGGED10: &str = "in_port(4),eth(src=50:54:00:00:00:01,dst=ff:ff:ff:ff:ff:ff),\
                            eth_type(0x8100),vlan(vid=10,pcp=0),encap(eth_type(0xabcd))";

    #[test]
    fn normalized_outputs_commute_within_a_version() {
        assert!(normalized("100,2,1", "1,2,100", UNTAGGED));
        assert!(normalized("2,3,pop_vlan,4", "3,2,pop_vlan,4", TAGGED10));
    }

    #[test]
    fn normalized_groups_outputs_by_packet_version() {
        // ofproto-dpif:4453: the expected text and OVS 3.1's answer.
        assert!(normalized(
            "5,6,7,8,100,pop_vlan,2,9",
            "7,pop_vlan,9,push_vlan(vid=10,pcp=0),6,8,100,pop_vlan,2,push_vlan(vid=10,pcp=0),5",
            TAGGED10
        ));
        // Without knowing the input was tagged 10, the re-pushed tag is a different version.
        assert!(!normalized(
            "5,pop_vlan,2",
            "pop_vlan,2,push_vlan(vid=10,pcp=0),5",
            UNTAGGED
        ));
        // A different pcp is a different version.
        assert!(!normalized(
            "5,pop_vlan,2",
            "pop_vlan,2,push_vlan(vid=10,pcp=1),5",
            TAGGED10
        ));
    }

    #[test]
    fn normalized_action_must_precede_its_outputs() {
        assert!(!normalized(
            "push_vlan(vid=12,pcp=0),2,3",
            "2,push_vlan(vid=12,pcp=0),3",
            UNTAGGED
        ));
        assert!(!normalized("pop_vlan,2", "2,pop_vlan", TAGGED10));
        assert!(!normalized(
            "set(ipv4(ttl=2)),2,3",
            "2,set(ipv4(ttl=2)),3",
            UNTAGGED
        ));
        assert!(!normalized("pop_vlan,2", "pop_vlan,2,2", TAGGED10));
    }

    #[test]
    fn normalized_later_sets_win() {
        assert!(normalized(
            "set(ipv4(ttl=2)),2,set(ipv4(ttl=1)),3",
            "set(ipv4(ttl=1)),3,set(ipv4(ttl=2)),2",
            UNTAGGED
        ));
        assert!(!normalized(
            "set(ipv4(ttl=2)),2",
            "set(ipv4(ttl=1)),2",
            UNTAGGED
        ));
    }

    #[test]
    fn normalized_commas_inside_parentheses_do_not_split() {
        assert!(normalized(
            "set(eth(src=00:00:00:00:00:01,dst=00:00:00:00:00:02)),3,2",
            "set(eth(dst=00:00:00:00:00:02,src=00:00:00:00:00:01)),2,3",
            UNTAGGED
        ));
        assert!(!normalized(
            "set(eth(src=00:00:00:00:00:01,dst=00:00:00:00:00:02)),3",
            "set(eth(src=00:00:00:00:00:02,dst=00:00:00:00:00:01)),3",
            UNTAGGED
        ));
    }

    #[test]
    fn normalized_opaque_actions_keep_their_place() {
        assert!(normalized(
            "userspace(pid=0,slow_path(controller)),2",
            "userspace(pid=0,slow_path(controller)),2",
            UNTAGGED
        ));
        assert!(!normalized("recirc(0x1),2", "2,recirc(0x1)", UNTAGGED));
    }

    #[test]
    fn normalized_drop_equals_empty() {
        assert!(normalized("drop", "", UNTAGGED));
        assert!(!normalized("drop", "1", UNTAGGED));
    }

    #[test]
    fn input_vlan_tags_reads_both_syntaxes() {
        assert_eq!(
            input_vlan_tags(TAGGED10),
            [VlanTag {
                tpid: 0x8100,
                vid: 10,
                pcp: 0
            }]
        );
        assert!(input_vlan_tags(UNTAGGED).is_empty());
        let qinq = "in_port(1),eth(src=00:11:22:33:44:55,dst=00:22:44:66:88:00),eth_type(0x88a8),\
                    vlan(vid=0x0100,pcp=3),encap(eth_type(0x8100),vlan(vid=2,pcp=0),encap(eth_type(0xabcd)))";
        assert_eq!(
            input_vlan_tags(qinq),
            [
                VlanTag {
                    tpid: 0x88a8,
                    vid: 256,
                    pcp: 3
                },
                VlanTag {
                    tpid: 0x8100,
                    vid: 2,
                    pcp: 0
                }
            ]
        );
        assert_eq!(
            input_vlan_tags("in_port=1,dl_vlan=5,dl_vlan_pcp=2"),
            [VlanTag {
                tpid: 0x8100,
                vid: 5,
                pcp: 2
            }]
        );
        assert_eq!(
            input_vlan_tags("in_port=1,vlan_tci=0x3005"),
            [VlanTag {
                tpid: 0x8100,
                vid: 5,
                pcp: 1
            }]
        );
        assert!(input_vlan_tags("in_port=1,vlan_tci=0x0000").is_empty());
    }

    #[test]
    fn segmented_is_stricter() {
        assert!(segmented("3,1,pop_vlan,2", "1,3,pop_vlan,2"));
        assert!(!segmented(
            "5,pop_vlan,2",
            "pop_vlan,2,push_vlan(vid=10,pcp=0),5"
        ));
        assert!(!segmented(
            "set(eth(src=00:00:00:00:00:01,dst=00:00:00:00:00:02)),3",
            "set(eth(dst=00:00:00:00:00:02,src=00:00:00:00:00:01)),3"
        ));
    }

    #[test]
    fn segments_split_at_non_outputs() {
        let segs = segments("3,1,pop_vlan,2");
        assert_eq!(
            segs,
            [
                Segment {
                    action: None,
                    outputs: vec!["1", "3"]
                },
                Segment {
                    action: Some("pop_vlan"),
                    outputs: vec!["2"]
                },
            ]
        );
    }

    #[test]
    fn actions_match_dispatches_by_mode() {
        assert!(!actions_match(CompareMode::Exact, "1,2", "2,1", UNTAGGED));
        assert!(actions_match(
            CompareMode::Unordered,
            "1,2",
            "2,1",
            UNTAGGED
        ));
        assert!(actions_match(
            CompareMode::Normalized,
            "1,2",
            "2,1",
            UNTAGGED
        ));
        assert!(!actions_match(
            CompareMode::Normalized,
            "1,pop_vlan,2",
            "2,pop_vlan,1",
            TAGGED10
        ));
        assert!(actions_match(
            CompareMode::Unordered,
            "1,pop_vlan,2",
            "2,pop_vlan,1",
            TAGGED10
        ));
    }
}
