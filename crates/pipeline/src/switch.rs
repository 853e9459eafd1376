//! The switch: every bridge of one datapath, with its OpenFlow tables, and the one Rust API
//! through which configuration changes and flow-table changes (flow_mods) are applied.
//!
//! A [`Switch`] owns a validated [`SwitchConfig`] with its [`SwitchLayout`] (port numbers,
//! VLAN modes, flags) and, per bridge, up to [`N_TABLES`] OpenFlow tables. A table is a
//! [`Classifier`] of [`OfRule`]s, created when its first rule arrives. Translation
//! ([`crate::xlate`]) reads the switch through `&self`; changes take `&mut self`.
//!
//! # Atomic changes
//!
//! Every change is checked completely before anything is applied, and an error leaves the
//! switch exactly as it was:
//!
//! - [`Switch::set_config`] (and [`Switch::vsctl`], [`Switch::mod_port`]) validate the new
//!   configuration first (a patch port without a peer, a mirror naming a missing port...).
//! - [`Switch::flow_mods`] applies a list of flow_mods as one bundle: every flow is checked (table
//!   numbers, `goto_table` targets, prerequisites, `check_overlap`) against the state the earlier
//!   flow_mods of the list leave, and only then are the tables changed. [`Switch::replace_flows`]
//!   is `ovs-ofctl replace-flows`: delete everything and add the given flows, as one bundle.
//!
//! # Cost of a bundle
//!
//! A bundle drafts only what it touches (the `bundle` submodule: a slot per rule identity over
//! the live table, and the subtable order kept incrementally from per-mask rule counts), so
//! an add or a strict modify or delete costs a few hash probes plus its share of one
//! classifier commit per table; a non-strict modify or delete scans the tables it names once.
//! `examples/insert_rate.rs` loads 256K exact 5-tuple rules into a table of 1,004 rules in
//! batches. In CPU time (2026-11-23, shared 2-vCPU guest under load, median of six runs of
//! three fresh switches each, in brackets the first switch of a process, which writes to
//! fresh pages): batches of 8,192 at 0.72M rules/s (0.58M), of 65,536 at 0.73M/s, of 1,024
//! at 0.91M/s, single flow_mods at 0.43M calls/s. When each rule kept a whole `FlowEntry`
//! (836 bytes, written to fresh pages, then copied) and a bundle walked 255 table drafts
//! and copied the metadata of each table it drafted, the same runs gave 0.55M/s (0.42M), 0.60M/s,
//! 0.64M/s and 0.13M/s; the implementation before the drafts did about 400 rules/s (it copied every
//! rule of the table per call and recomputed the subtable order over all rules per flow_mod). About
//! four fifths of what remains at 8,192 is the classifier's commit, which applies every batch twice
//! (left-right versions); the draft's own share is about 0.2 µs per added rule: one probe
//! of the draft's index, one [`Classifier::find`] for a live rule of the same identity, and
//! one small allocation (the rule).
//!
//! # OVS semantics kept here
//!
//! - A rule is identified by table, match and priority: an add with the same ones replaces the rule
//!   (fresh counters).
//! - Modify and delete are *strict* (same match and priority) or *non-strict* (every rule whose
//!   match is at least as specific as the flow_mod's), optionally restricted by cookie and mask,
//!   and (delete) by `out_port`. A table of `None` (or 255) means all tables. A non-strict modify
//!   that matches no rule adds the flow when `modify_may_add` is set (OpenFlow 1.0 and 1.1,
//!   ovs-ofctl's default).
//! - Flows may name ports that do not exist (`in_port=9`, `output:9`): OVS accepts both; a packet
//!   output to a missing port is simply not sent.
//! - `fail_mode=standalone` adds the flow `priority=0,actions=NORMAL` to table 0 when the bridge is
//!   created or its fail mode changes, as OVS's connection manager does with no controller
//!   configured; a fail-mode change flushes every flow first (OVS `connmgr_set_fail_mode`). The
//!   flow is an ordinary, visible flow: `del-flows` removes it.
//! - Per-rule packet and byte counters live in the classifier's rule stats; idle and hard timeouts
//!   are enforced by [`Switch::expire_flows`] on an injected clock.
//!
//! # Example
//! ```
//! use pipeline::switch::{FlowMod, Switch};
//! let mut sw = Switch::new();
//! sw.vsctl("add-br br0 -- add-port br0 p1 -- set Interface p1 ofport_request=1").unwrap();
//! sw.add_flows_text("br0", &["in_port=1,actions=output:2"], "").unwrap();
//! assert_eq!(sw.dump_flows("br0").unwrap().len(), 1);
//! // A bad flow leaves the tables as they were.
//! assert!(sw.add_flows_text("br0", &["actions=goto_table:0"], "-O OpenFlow13").is_err());
//! assert_eq!(sw.dump_flows("br0").unwrap().len(), 1);
//! let _ = FlowMod::add;
//! ```
//!
//! Maturity: experimental.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use classifier::{Classifier, Rule};
use openflow::action::{Action, OfVersion};
use openflow::flow::{FlowEntry, FlowFlags, FlowStats, OFPG_ANY};
use openflow::ofctl::value::{OFPP_MAX, OFPP_NONE};
use openflow::ofctl::{parse_flow, ParseOptions};
use openflow::Match;

use crate::bridge::{ConfigError, FailMode, PortKind, PortLayout, SwitchConfig, SwitchLayout};
use crate::mac_learning::MacTable;
use crate::xlate::Counters;

mod bundle;
#[cfg(test)]
mod bundle_tests;
#[cfg(test)]
mod reference;

/// Number of OpenFlow tables per bridge (0..=254; 255 means "all tables" in a request).
pub const N_TABLES: usize = 255;

/// Errors of switch changes. Each says what failed; the switch is unchanged after any of them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SwitchError {
    /// The configuration does not validate.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The named bridge does not exist.
    #[error("no bridge named {0}")]
    NoSuchBridge(String),
    /// A port named in a command does not exist on the bridge.
    #[error("bridge {bridge}: no port {port}")]
    NoSuchPort {
        /// Bridge.
        bridge: String,
        /// Port name or number as given.
        port: String,
    },
    /// A flow's text does not parse (ovs-ofctl's message).
    #[error("{0}")]
    Parse(String),
    /// A flow_mod names a table beyond 254.
    #[error("table {0} does not exist (tables are 0 to 254) (OFPBRC_BAD_TABLE_ID)")]
    BadTable(u8),
    /// A `goto_table` that does not go forward, or beyond the last table.
    #[error("table {table}: goto_table:{goto} must name a later table no higher than 254 (OFPBIC_BAD_TABLE_ID)")]
    BadGotoTable {
        /// The flow's table.
        table: u8,
        /// The target.
        goto: u8,
    },
    /// An output to a port number that is neither a valid port nor a reserved port.
    #[error("output to port {0} is invalid (OFPBAC_BAD_OUT_PORT)")]
    BadOutPort(u16),
    /// `check_overlap` found an overlapping flow of the same priority.
    #[error(
        "table {table}: flow overlaps an existing flow of priority {priority} (OFPFMFC_OVERLAP)"
    )]
    Overlap {
        /// Table.
        table: u8,
        /// Priority.
        priority: u16,
    },
    /// The classifier refused a rule (mask or prerequisites).
    #[error("flow {index}: {msg}")]
    Rule {
        /// Index of the flow_mod in the bundle.
        index: usize,
        /// The classifier's message.
        msg: String,
    },
    /// An `ovs-ofctl mod-port` word that is not a port flag.
    #[error("{0}: unknown port config (expected up, down, flood, noflood, forward, noforward, receive, noreceive, packet-in or nopacket-in)")]
    BadPortConfig(String),
}

/// A rule's packet and byte counters and last use. The first version of a rule holds them,
/// and every later version (a modify, or a move to another classifier priority) shares them.
#[derive(Debug, Default)]
pub struct RuleCounters {
    n_packets: AtomicU64,
    n_bytes: AtomicU64,
    last_used_ms: AtomicU64,
}

impl RuleCounters {
    /// No packets yet, last used at `now_ms`.
    fn fresh(now_ms: u64) -> Self {
        RuleCounters {
            last_used_ms: AtomicU64::new(now_ms),
            ..RuleCounters::default()
        }
    }
}

/// One rule of an OpenFlow table: the flow as added, except its match, with its creation
/// time, counters and (for idle timeouts) last use.
///
/// The match is not kept here: the classifier rule that holds this payload keeps it, in a
/// compressed form (its table's interned mask and the masked words), and
/// [`classifier::Rule::match_`] rebuilds it. [`OfRule::to_flow_entry`] puts the two back
/// together as the flow was added. A rule is 88 bytes here (its counters included, its
/// actions apart); with a whole [`FlowEntry`] (836 bytes, 720 of them the match's value and
/// mask) every added rule cost a kilobyte of fresh memory. Loading 256K exact 5-tuple rules
/// in bundles of 8,192 grows the process by about 620 bytes per rule, the classifier's
/// tables and rules included (1,410 bytes with the whole `FlowEntry`).
#[derive(Debug)]
pub struct OfRule {
    actions: Box<[Action]>,
    cookie: u64,
    /// When it was added, in milliseconds of the switch clock.
    pub created_ms: u64,
    /// The rule's counters, unless `counted_by` holds them.
    counters: RuleCounters,
    /// The earlier version of the rule whose counters this one shares (a modify, or a move
    /// to another classifier priority, keeps them); it never has one itself.
    counted_by: Option<Arc<OfRule>>,
    /// What few flows carry: an `out_group` and counters given with the flow.
    rare: Option<Box<RareFields>>,
    priority: u16,
    idle_timeout: u16,
    hard_timeout: u16,
    importance: u16,
    flags: FlowFlags,
    /// The table it lives in.
    pub table: u8,
    /// Its match is the catch-all one.
    catch_all: bool,
}

/// The fields of a [`FlowEntry`] that an added flow keeps and almost never sets.
#[derive(Debug, Clone, PartialEq, Eq)]
struct RareFields {
    out_group: u32,
    stats: FlowStats,
}

impl OfRule {
    /// The rule an add of `e` (with its `actions`, taken from it) makes in `table` at
    /// `now_ms`, with fresh counters. The match's own parts are not kept (see the type's
    /// docs); the flow_mod's cookie mask and `out_port` select rules and are not part of it.
    /// `catch_all` says whether `e`'s mask is zero.
    fn from_flow(
        e: &FlowEntry,
        actions: Vec<Action>,
        table: u8,
        now_ms: u64,
        catch_all: bool,
    ) -> Self {
        debug_assert_eq!(catch_all, e.flow_match.mask().is_zero());
        let rare = (e.out_group != OFPG_ANY || e.stats != FlowStats::default()).then(|| {
            Box::new(RareFields {
                out_group: e.out_group,
                stats: e.stats,
            })
        });
        OfRule {
            actions: actions.into_boxed_slice(),
            cookie: e.cookie,
            created_ms: now_ms,
            counters: RuleCounters::fresh(now_ms),
            counted_by: None,
            rare,
            priority: e.priority,
            idle_timeout: e.idle_timeout,
            hard_timeout: e.hard_timeout,
            importance: e.importance,
            flags: e.flags,
            table,
            catch_all,
        }
    }

    /// A copy of the flow with fresh counters, created at `now_ms` (a modify's new version).
    fn renewed(&self, now_ms: u64) -> Self {
        OfRule {
            actions: self.actions.clone(),
            cookie: self.cookie,
            created_ms: now_ms,
            counters: RuleCounters::fresh(now_ms),
            counted_by: None,
            rare: self.rare.clone(),
            priority: self.priority,
            idle_timeout: self.idle_timeout,
            hard_timeout: self.hard_timeout,
            importance: self.importance,
            flags: self.flags,
            table: self.table,
            catch_all: self.catch_all,
        }
    }

    /// The same rule (same counters and age) in a new allocation (a rule that moves to
    /// another classifier priority).
    fn same_rule(rule: &Arc<OfRule>) -> Self {
        let mut r = rule.renewed(rule.created_ms);
        r.inherit(rule);
        r
    }

    /// Takes the counters and age of `from`, an earlier version of the rule.
    fn inherit(&mut self, from: &Arc<OfRule>) {
        self.created_ms = from.created_ms;
        self.counters = RuleCounters::default();
        self.counted_by = Some(from.counted_by.clone().unwrap_or_else(|| from.clone()));
    }

    /// The counters: its own or an earlier version's.
    fn counters(&self) -> &RuleCounters {
        self.counted_by
            .as_ref()
            .map_or(&self.counters, |r| &r.counters)
    }

    /// The flow as it was added, with `flow_match` (the classifier rule's
    /// [`classifier::Rule::match_`]): table set, no cookie mask, `out_port` none, and the
    /// counters the flow_mod carried (not the rule's: see [`OfRule::n_packets`]).
    pub fn to_flow_entry(&self, flow_match: Match) -> FlowEntry {
        let (out_group, stats) = self
            .rare
            .as_ref()
            .map_or((OFPG_ANY, FlowStats::default()), |r| (r.out_group, r.stats));
        FlowEntry {
            flow_match,
            priority: self.priority,
            cookie: self.cookie,
            cookie_mask: 0,
            table: Some(self.table),
            idle_timeout: self.idle_timeout,
            hard_timeout: self.hard_timeout,
            importance: self.importance,
            flags: self.flags,
            out_port: OFPP_NONE,
            out_group,
            actions: self.actions.to_vec(),
            stats,
        }
    }

    /// The OpenFlow priority.
    pub fn priority(&self) -> u16 {
        self.priority
    }

    /// The controller's cookie.
    pub fn cookie(&self) -> u64 {
        self.cookie
    }

    /// The actions and instructions (empty = drop).
    pub fn actions(&self) -> &[Action] {
        &self.actions
    }

    /// Idle timeout in seconds (0 = none).
    pub fn idle_timeout(&self) -> u16 {
        self.idle_timeout
    }

    /// Hard timeout in seconds (0 = none).
    pub fn hard_timeout(&self) -> u16 {
        self.hard_timeout
    }

    /// Eviction importance (0 = none).
    pub fn importance(&self) -> u16 {
        self.importance
    }

    /// The flow's flags.
    pub fn flags(&self) -> FlowFlags {
        self.flags
    }

    /// True if the rule's match is the catch-all one (every bit wildcarded).
    pub fn is_catch_all(&self) -> bool {
        self.catch_all
    }

    /// Counts one packet of `n_bytes` bytes.
    pub fn credit(&self, n_bytes: u64) {
        self.credit_many(1, n_bytes);
    }

    /// Counts `n_packets` packets of `n_bytes` bytes in all (the datapath crediting a
    /// megaflow's statistics back to the rules that made it).
    pub fn credit_many(&self, n_packets: u64, n_bytes: u64) {
        self.counters()
            .n_packets
            .fetch_add(n_packets, Ordering::Relaxed);
        self.counters()
            .n_bytes
            .fetch_add(n_bytes, Ordering::Relaxed);
    }

    /// Packets counted.
    pub fn n_packets(&self) -> u64 {
        self.counters().n_packets.load(Ordering::Relaxed)
    }

    /// Bytes counted.
    pub fn n_bytes(&self) -> u64 {
        self.counters().n_bytes.load(Ordering::Relaxed)
    }

    /// Records a use at `now_ms`.
    pub fn touch(&self, now_ms: u64) {
        self.counters()
            .last_used_ms
            .fetch_max(now_ms, Ordering::Relaxed);
    }

    /// When a packet last matched.
    pub fn last_used_ms(&self) -> u64 {
        self.counters().last_used_ms.load(Ordering::Relaxed)
    }
}

/// One OpenFlow table.
pub type OfTable = Classifier<Arc<OfRule>>;

/// One bridge's runtime state: its tables and MAC learning table.
#[derive(Debug)]
pub struct Bridge {
    /// Name.
    pub name: String,
    tables: Vec<Option<OfTable>>,
    /// Per table, its masks with their rule counts and OVS's classifier subtable order (its
    /// `pvector`), kept up to date by every bundle (`switch::bundle`).
    metas: Vec<bundle::TableMeta>,
    /// MAC learning (used by NORMAL; translations learn through `&self`).
    pub mac: Mutex<MacTable>,
}

impl Bridge {
    fn new(name: &str, aging: u32, size: u32) -> Self {
        Bridge {
            name: name.to_string(),
            tables: (0..N_TABLES).map(|_| None).collect(),
            metas: (0..N_TABLES)
                .map(|_| bundle::TableMeta::default())
                .collect(),
            mac: Mutex::new(MacTable::new(aging, size)),
        }
    }

    /// Table `id`, if it has ever held a rule.
    pub fn table(&self, id: u8) -> Option<&OfTable> {
        self.tables.get(usize::from(id)).and_then(|t| t.as_ref())
    }

    fn table_mut(&mut self, id: u8) -> &mut OfTable {
        let slot = &mut self.tables[usize::from(id)];
        slot.get_or_insert_with(Classifier::new)
    }

    /// Every rule with its table, in table order.
    fn rules(&self) -> Vec<(u8, Arc<Rule<Arc<OfRule>>>)> {
        rules_of(&self.tables)
    }
}

/// Every rule of `tables` with its table: in table order, then by priority (highest first)
/// and insertion order.
fn rules_of(tables: &[Option<OfTable>]) -> Vec<(u8, Arc<Rule<Arc<OfRule>>>)> {
    let mut out = Vec::new();
    for (i, t) in tables.iter().enumerate() {
        if let Some(t) = t {
            let id = u8::try_from(i).unwrap_or(u8::MAX);
            let snap = t.snapshot();
            let mut rs: Vec<_> = snap.rules().cloned().collect();
            rs.sort_by_key(|r| (std::cmp::Reverse(r.priority()), r.seq()));
            out.extend(rs.into_iter().map(|r| (id, r)));
        }
    }
    out
}

/// One MAC learning entry as `fdb/show` lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdbEntry {
    /// OpenFlow port.
    pub port: u16,
    /// VLAN.
    pub vlan: u16,
    /// Ethernet address.
    pub mac: u64,
    /// Seconds since last seen.
    pub age_secs: u64,
    /// Added with `fdb/add` (never ages, never moves).
    pub is_static: bool,
}

/// What a flow_mod does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowModCommand {
    /// Add (or replace a rule with the same table, match and priority).
    Add,
    /// Change the actions of matching rules.
    Modify {
        /// Only the rule with the same match and priority.
        strict: bool,
    },
    /// Remove matching rules.
    Delete {
        /// Only the rule with the same match and priority.
        strict: bool,
    },
}

/// One flow-table change (OpenFlow `flow_mod`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowMod {
    /// What to do.
    pub command: FlowModCommand,
    /// The flow: match, priority, table (`None` = 0 for add, all for modify/delete),
    /// cookie and cookie mask, `out_port`, flags and actions.
    pub entry: FlowEntry,
    /// A modify that matches nothing adds the flow (OpenFlow 1.0/1.1 semantics).
    pub modify_may_add: bool,
}

impl FlowMod {
    /// An add.
    pub fn add(entry: FlowEntry) -> Self {
        FlowMod {
            command: FlowModCommand::Add,
            entry,
            modify_may_add: false,
        }
    }

    /// A modify.
    pub fn modify(entry: FlowEntry, strict: bool) -> Self {
        FlowMod {
            command: FlowModCommand::Modify { strict },
            entry,
            modify_may_add: true,
        }
    }

    /// A delete.
    pub fn delete(entry: FlowEntry, strict: bool) -> Self {
        FlowMod {
            command: FlowModCommand::Delete { strict },
            entry,
            modify_may_add: false,
        }
    }
}

/// What a bundle of flow_mods did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlowModOutcome {
    /// Rules added (including replacements).
    pub n_added: usize,
    /// Rules whose actions changed.
    pub n_modified: usize,
    /// Rules removed.
    pub n_deleted: usize,
    /// Tables (bit `t % 64` of word `t / 64`) where rules that were already there changed
    /// their order among equal priorities (an added rule raised its subtable's highest
    /// priority, and OVS's subtable order moved): a packet no added rule matches may now get
    /// another rule, so a cache of translations that looked these tables up is stale.
    pub reordered_tables: [u64; 4],
}

impl FlowModOutcome {
    /// Whether table `t` is in [`FlowModOutcome::reordered_tables`].
    pub fn reordered(&self, t: u8) -> bool {
        self.reordered_tables[usize::from(t / 64)] & (1 << (t % 64)) != 0
    }
}

/// One rule as `dump-flows` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpedFlow {
    /// The flow, with `table` set and `stats` filled in from the counters.
    pub entry: FlowEntry,
}

/// Every bridge of one datapath.
#[derive(Debug)]
pub struct Switch {
    config: SwitchConfig,
    layout: SwitchLayout,
    bridges: BTreeMap<String, Bridge>,
    /// Drop and miss counters of translation.
    pub counters: Counters,
    now_ms: u64,
}

impl Default for Switch {
    fn default() -> Self {
        Switch::new()
    }
}

impl Switch {
    /// A switch without bridges.
    pub fn new() -> Self {
        Switch {
            config: SwitchConfig::default(),
            layout: SwitchLayout::default(),
            bridges: BTreeMap::new(),
            counters: Counters::default(),
            now_ms: 0,
        }
    }

    /// A switch built from `config` (validated first).
    pub fn from_config(config: SwitchConfig) -> Result<Self, SwitchError> {
        let mut sw = Switch::new();
        sw.set_config(config)?;
        Ok(sw)
    }

    /// The configuration in force.
    pub fn config(&self) -> &SwitchConfig {
        &self.config
    }

    /// The validated layout (port numbers, modes, flags).
    pub fn layout(&self) -> &SwitchLayout {
        &self.layout
    }

    /// The switch clock in milliseconds (injected; see [`Switch::set_time`]).
    pub fn now_ms(&self) -> u64 {
        self.now_ms
    }

    /// Sets the switch clock (used for rule creation and use times).
    pub fn set_time(&mut self, now_ms: u64) {
        self.now_ms = self.now_ms.max(now_ms);
    }

    /// A bridge's runtime state.
    pub fn bridge(&self, name: &str) -> Option<&Bridge> {
        self.bridges.get(name)
    }

    /// A bridge's runtime state, mutable (MAC table edits).
    pub fn bridge_mut(&mut self, name: &str) -> Option<&mut Bridge> {
        self.bridges.get_mut(name)
    }

    /// [`Switch::bridge`], or the error naming a bridge that does not exist.
    fn runtime(&self, bridge: &str) -> Result<&Bridge, SwitchError> {
        self.bridge(bridge)
            .ok_or_else(|| SwitchError::NoSuchBridge(bridge.to_string()))
    }

    /// [`Switch::bridge_mut`], or the error naming a bridge that does not exist.
    fn runtime_mut(&mut self, bridge: &str) -> Result<&mut Bridge, SwitchError> {
        self.bridge_mut(bridge)
            .ok_or_else(|| SwitchError::NoSuchBridge(bridge.to_string()))
    }

    /// The ports of bridge `name` (its own `LOCAL` port first).
    pub fn ports(&self, bridge: &str) -> Option<&[PortLayout]> {
        self.layout.bridges.get(bridge).map(|v| v.as_slice())
    }

    /// A port by bridge and OpenFlow number.
    pub fn port_by_ofport(&self, bridge: &str, ofport: u16) -> Option<&PortLayout> {
        self.ports(bridge)?.iter().find(|p| p.ofport == ofport)
    }

    /// Port names of a bridge for flow parsing (`in_port=p1`, `output:p1`).
    pub fn port_names(&self, bridge: &str) -> Vec<(String, u16)> {
        self.ports(bridge)
            .map(|ps| ps.iter().map(|p| (p.name.clone(), p.ofport)).collect())
            .unwrap_or_default()
    }

    /// Replaces the configuration after validating it. Bridges that stay keep their tables
    /// (a fail-mode change flushes them, as OVS); new bridges start empty (plus the NORMAL
    /// flow when standalone); removed bridges disappear. On error nothing changes.
    pub fn set_config(&mut self, config: SwitchConfig) -> Result<(), SwitchError> {
        let layout = config.validate()?;
        let mut bridges = std::mem::take(&mut self.bridges);
        let mut next = BTreeMap::new();
        let mut standalone = Vec::new();
        for b in &config.bridges {
            let old_mode = self
                .config
                .bridges
                .iter()
                .find(|o| o.name == b.name)
                .map(|o| o.fail_mode);
            let br = match bridges.remove(&b.name) {
                Some(br) if old_mode == Some(b.fail_mode) => br,
                _ => Bridge::new(&b.name, b.mac_aging_secs, b.mac_table_size),
            };
            if old_mode != Some(b.fail_mode) && b.fail_mode == FailMode::Standalone {
                standalone.push(b.name.clone());
            }
            next.insert(b.name.clone(), br);
        }
        // MAC entries of ports that went away, or whose VLAN configuration changed, are
        // forgotten (OVS `bundle_flush_macs`).
        for (name, br) in &next {
            let (Some(old), Some(new)) = (self.layout.bridges.get(name), layout.bridges.get(name))
            else {
                continue;
            };
            let Ok(mut mac) = br.mac.lock() else {
                continue;
            };
            for p in old {
                match new
                    .iter()
                    .find(|q| q.name == p.name && q.ofport == p.ofport)
                {
                    None => {
                        for (vlan, addr, port, _, _) in mac.dump(0) {
                            if port == p.ofport {
                                mac.remove(vlan, addr);
                            }
                        }
                    }
                    Some(q)
                        if (q.vlan_mode, q.tag, &q.trunks, &q.cvlans)
                            != (p.vlan_mode, p.tag, &p.trunks, &p.cvlans) =>
                    {
                        mac.flush_port(p.ofport)
                    }
                    Some(_) => {}
                }
            }
        }
        self.bridges = next;
        self.config = config;
        self.layout = layout;
        for name in standalone {
            let normal = FlowEntry {
                priority: 0,
                actions: vec![Action::Output {
                    port: OFPP_NORMAL,
                    max_len: 0,
                }],
                ..FlowEntry::default()
            };
            // A valid flow on an empty table: this cannot fail.
            let _ = self.flow_mods(&name, vec![FlowMod::add(normal)]);
        }
        Ok(())
    }

    /// `ovs-appctl fdb/add BRIDGE PORT VLAN MAC`: a static MAC entry.
    pub fn fdb_add(
        &self,
        bridge: &str,
        port: &str,
        vlan: u16,
        mac: u64,
    ) -> Result<(), SwitchError> {
        let ofport = self
            .ports(bridge)
            .ok_or_else(|| SwitchError::NoSuchBridge(bridge.to_string()))?
            .iter()
            .find(|p| p.name == port)
            .map(|p| p.ofport)
            .ok_or_else(|| SwitchError::NoSuchPort {
                bridge: bridge.to_string(),
                port: port.to_string(),
            })?;
        if vlan > 4095 {
            return Err(SwitchError::Config(ConfigError::BadVlan {
                port: port.to_string(),
                vlan: u32::from(vlan),
            }));
        }
        self.with_mac(bridge, |t| t.add_static(vlan, mac, ofport))
    }

    /// `ovs-appctl fdb/del BRIDGE VLAN MAC`; true if there was an entry.
    pub fn fdb_del(&self, bridge: &str, vlan: u16, mac: u64) -> Result<bool, SwitchError> {
        self.with_mac(bridge, |t| t.remove(vlan, mac))
    }

    /// `ovs-appctl fdb/flush BRIDGE`: forgets every learned (not static) entry.
    pub fn fdb_flush(&self, bridge: &str) -> Result<(), SwitchError> {
        self.with_mac(bridge, |t| t.flush())
    }

    /// `ovs-appctl fdb/show BRIDGE` at `now_secs`.
    pub fn fdb_show(&self, bridge: &str, now_secs: u64) -> Result<Vec<FdbEntry>, SwitchError> {
        self.with_mac(bridge, |t| {
            t.dump(now_secs)
                .into_iter()
                .map(|(vlan, mac, port, age_secs, is_static)| FdbEntry {
                    port,
                    vlan,
                    mac,
                    age_secs,
                    is_static,
                })
                .collect()
        })
    }

    fn with_mac<R>(
        &self,
        bridge: &str,
        f: impl FnOnce(&mut MacTable) -> R,
    ) -> Result<R, SwitchError> {
        let br = self.runtime(bridge)?;
        // A poisoned lock only means a translation panicked mid-update; the table is still a
        // valid table.
        let mut t = br.mac.lock().unwrap_or_else(|e| e.into_inner());
        Ok(f(&mut t))
    }

    /// Applies `ovs-vsctl` commands (see [`crate::vsctl`]) atomically.
    pub fn vsctl(&mut self, args: &str) -> Result<(), SwitchError> {
        let cfg = crate::vsctl::apply(&self.config, args)?;
        self.set_config(cfg)
    }

    /// `ovs-ofctl mod-port BRIDGE PORT WORD...`: PORT is a name or an OpenFlow number; each
    /// word sets or clears a flag (`noforward`, `flood`, `noreceive`, `down`...).
    pub fn mod_port(
        &mut self,
        bridge: &str,
        port: &str,
        words: &[&str],
    ) -> Result<(), SwitchError> {
        let name = self
            .ports(bridge)
            .ok_or_else(|| SwitchError::NoSuchBridge(bridge.to_string()))?
            .iter()
            .find(|p| p.name == port || p.ofport.to_string() == port)
            .map(|p| p.name.clone())
            .ok_or_else(|| SwitchError::NoSuchPort {
                bridge: bridge.to_string(),
                port: port.to_string(),
            })?;
        let mut cfg = self.config.clone();
        let p = cfg.port_mut(&name)?;
        for w in words {
            let f = &mut p.flags;
            match w.to_ascii_lowercase().as_str() {
                "up" => f.down = false,
                "down" => f.down = true,
                "flood" => f.no_flood = false,
                "noflood" | "no-flood" => f.no_flood = true,
                "forward" => f.no_forward = false,
                "noforward" | "no-forward" => f.no_forward = true,
                "receive" => f.no_receive = false,
                "noreceive" | "no-receive" => f.no_receive = true,
                "packet-in" => f.no_packet_in = false,
                "nopacket-in" | "no-packet-in" => f.no_packet_in = true,
                _ => return Err(SwitchError::BadPortConfig((*w).to_string())),
            }
        }
        self.set_config(cfg)
    }

    /// Parses flows in ovs-ofctl syntax with `ofctl_options` (`-O OpenFlow13`...) and this
    /// bridge's port names, for `command`. The actions are those the switch receives when
    /// ovs-ofctl sends the flow with the protocol it chooses (see [`as_received`]).
    pub fn parse_flows(
        &self,
        bridge: &str,
        flows: &[&str],
        ofctl_options: &str,
        command: openflow::ofctl::flow::FlowCommand,
    ) -> Result<Vec<FlowEntry>, SwitchError> {
        let mut opts = ParseOptions::from_ofctl_options(ofctl_options)
            .map_err(|e| SwitchError::Parse(e.to_string()))?;
        opts.command = command;
        opts.port_names = self.port_names(bridge);
        flows
            .iter()
            .map(|f| {
                parse_flow(f, &opts)
                    .map(|p| {
                        let version = p.version();
                        let mut flow = p.flow;
                        flow.actions = as_received(flow.actions, version);
                        flow
                    })
                    .map_err(|e| SwitchError::Parse(format!("{f}: {e}")))
            })
            .collect()
    }

    /// Parses flows as [`Switch::parse_flows`] does and makes each the flow_mod `command`
    /// says (`add`, `mod`/`mod --strict`, `del`/`del --strict`).
    pub fn parse_flow_mods(
        &self,
        bridge: &str,
        flows: &[&str],
        ofctl_options: &str,
        command: openflow::ofctl::flow::FlowCommand,
    ) -> Result<Vec<FlowMod>, SwitchError> {
        use openflow::ofctl::flow::FlowCommand;
        let make: fn(FlowEntry) -> FlowMod = match command {
            FlowCommand::Add => FlowMod::add,
            FlowCommand::Modify => |e| FlowMod::modify(e, false),
            FlowCommand::ModifyStrict => |e| FlowMod::modify(e, true),
            FlowCommand::Delete => |e| FlowMod::delete(e, false),
            FlowCommand::DeleteStrict => |e| FlowMod::delete(e, true),
            FlowCommand::Query => {
                return Err(SwitchError::Parse(
                    "a dump-flows match is not a flow_mod".to_string(),
                ))
            }
        };
        let entries = self.parse_flows(bridge, flows, ofctl_options, command)?;
        Ok(entries.into_iter().map(make).collect())
    }

    /// `ovs-ofctl add-flows`: parses and adds `flows` as one bundle.
    pub fn add_flows_text(
        &mut self,
        bridge: &str,
        flows: &[&str],
        ofctl_options: &str,
    ) -> Result<FlowModOutcome, SwitchError> {
        let mods = self.parse_flow_mods(
            bridge,
            flows,
            ofctl_options,
            openflow::ofctl::flow::FlowCommand::Add,
        )?;
        self.flow_mods(bridge, mods)
    }

    /// `ovs-ofctl del-flows BRIDGE [MATCH]` (non-strict).
    pub fn del_flows_text(
        &mut self,
        bridge: &str,
        flow: &str,
    ) -> Result<FlowModOutcome, SwitchError> {
        let mods = self.parse_flow_mods(
            bridge,
            &[flow],
            "",
            openflow::ofctl::flow::FlowCommand::Delete,
        )?;
        self.flow_mods(bridge, mods)
    }

    /// `ovs-ofctl replace-flows`: the bridge's tables hold exactly `flows` afterwards (one
    /// bundle: on error nothing changes).
    pub fn replace_flows(
        &mut self,
        bridge: &str,
        flows: Vec<FlowEntry>,
    ) -> Result<FlowModOutcome, SwitchError> {
        let mut mods = vec![FlowMod::delete(FlowEntry::default(), false)];
        mods.extend(flows.into_iter().map(FlowMod::add));
        self.flow_mods(bridge, mods)
    }

    /// Every rule of a bridge with its counters, by table then priority.
    pub fn dump_flows(&self, bridge: &str) -> Result<Vec<DumpedFlow>, SwitchError> {
        let br = self.runtime(bridge)?;
        Ok(br
            .rules()
            .into_iter()
            .map(|(t, r)| {
                let mut entry = r.payload().to_flow_entry(r.match_());
                entry.table = Some(t);
                entry.stats.n_packets = r.payload().n_packets();
                entry.stats.n_bytes = r.payload().n_bytes();
                entry.stats.duration_ms = self.now_ms.saturating_sub(r.payload().created_ms);
                DumpedFlow { entry }
            })
            .collect())
    }

    /// Removes rules whose idle or hard timeout has passed at `now_ms`; returns them.
    pub fn expire_flows(&mut self, now_ms: u64) -> Vec<FlowEntry> {
        self.set_time(now_ms);
        let mut expired = Vec::new();
        for br in self.bridges.values_mut() {
            for (t, r) in br.rules() {
                let p = r.payload();
                let hard = p.hard_timeout != 0
                    && now_ms >= p.created_ms + 1000 * u64::from(p.hard_timeout);
                let idle = p.idle_timeout != 0
                    && now_ms >= p.last_used_ms() + 1000 * u64::from(p.idle_timeout);
                if hard || idle {
                    let m = r.match_();
                    // The rule exists (just read from the table), so removal cannot fail.
                    if br.table_mut(t).remove(m, r.priority()).is_ok() {
                        br.metas[usize::from(t)].removed_outside(m.mask(), p.priority);
                        expired.push(p.to_flow_entry(m));
                    }
                }
            }
        }
        expired
    }

    /// Applies `mods` to `bridge` as one bundle: all of them or (on error) none.
    ///
    /// The cost is proportional to the bundle for adds and strict modifies and deletes (a few
    /// hash probes each, plus the classifier's batch); a non-strict modify or delete scans
    /// the tables it names once. The `switch::bundle` module docs say how.
    pub fn flow_mods(
        &mut self,
        bridge: &str,
        mods: Vec<FlowMod>,
    ) -> Result<FlowModOutcome, SwitchError> {
        let now = self.now_ms;
        let br = self.runtime_mut(bridge)?;
        bundle::flow_mods(br, mods, now)
    }

    /// Brings every table of `bridge` to rest ([`classifier::Classifier::settle`]): the work
    /// a table's next change would do first for the last one is done now, so that after a
    /// bulk load the next flow_mod does not pay it.
    pub fn settle(&mut self, bridge: &str) -> Result<(), SwitchError> {
        let br = self.runtime_mut(bridge)?;
        for t in br.tables.iter_mut().flatten() {
            t.settle();
        }
        Ok(())
    }

    /// Compiles each table of `bridge` that gains from it
    /// ([`classifier::Classifier::try_compile`]: a small table of several masks, whose
    /// lookups, the upcalls' translations, then run two to three times as fast, consulting no
    /// more bits on a sample of keys, so no more megaflows), until that table's next change:
    /// for tables that have settled (after a controller's bulk load, or a `replace-flows`).
    /// Returns the tables compiled. Lookups give the same rules either way, so the datapath's
    /// megaflows stay valid.
    pub fn compile_tables(&mut self, bridge: &str) -> Result<Vec<u8>, SwitchError> {
        let br = self.runtime_mut(bridge)?;
        let mut compiled = Vec::new();
        for (i, t) in br.tables.iter_mut().enumerate() {
            if let Some(t) = t {
                if t.try_compile().is_ok() {
                    compiled.push(u8::try_from(i).unwrap_or(u8::MAX));
                }
            }
        }
        Ok(compiled)
    }
}

/// The actions a switch decodes from `actions` encoded for OpenFlow `version` (OVS
/// `encode_SET_VLAN_VID`/`_PCP`): from OpenFlow 1.1 on, `mod_vlan_vid`/`mod_vlan_pcp` on a
/// flow whose match does not guarantee a tag travel as `push_vlan:0x8100` plus a plain VLAN
/// write, so they always push a new tag (OpenFlow 1.0's form pushes only if none exists).
pub fn as_received(actions: Vec<Action>, version: OfVersion) -> Vec<Action> {
    if version == OfVersion::Of10 {
        return actions;
    }
    let mut out = Vec::with_capacity(actions.len());
    for a in actions {
        match a {
            Action::SetVlanVid {
                vid,
                push_if_needed,
                flow_has_vlan,
            } => {
                if push_if_needed && !flow_has_vlan {
                    out.push(Action::PushVlan { ethertype: 0x8100 });
                }
                out.push(Action::SetVlanVid {
                    vid,
                    push_if_needed: false,
                    flow_has_vlan: true,
                });
            }
            Action::SetVlanPcp {
                pcp,
                push_if_needed,
                flow_has_vlan,
            } => {
                if push_if_needed && !flow_has_vlan {
                    out.push(Action::PushVlan { ethertype: 0x8100 });
                }
                out.push(Action::SetVlanPcp {
                    pcp,
                    push_if_needed: false,
                    flow_has_vlan: true,
                });
            }
            Action::WriteActions(inner) => {
                out.push(Action::WriteActions(as_received(inner, version)))
            }
            Action::Clone(inner) => out.push(Action::Clone(as_received(inner, version))),
            other => out.push(other),
        }
    }
    out
}

/// The OpenFlow `NORMAL` port.
pub const OFPP_NORMAL: u16 = 0xfffa;
/// The OpenFlow `FLOOD` port.
pub const OFPP_FLOOD: u16 = 0xfffb;
/// The OpenFlow `ALL` port.
pub const OFPP_ALL: u16 = 0xfffc;
/// The OpenFlow `TABLE` port.
pub const OFPP_TABLE: u16 = 0xfff9;
/// `OFPP_UNSET`: no output in the action set.
pub const OFPP_UNSET: u16 = 0xfff7;

/// Checks what a flow's actions may name: output ports.
fn check_flow(actions: &[Action]) -> Result<(), SwitchError> {
    fn walk(acts: &[Action]) -> Result<(), SwitchError> {
        for a in acts {
            match a {
                // OVS `ofpact_check_output_port`: a port below OFPP_MAX or a reserved port.
                Action::Output { port, .. } | Action::Enqueue { port, .. }
                    if *port >= OFPP_MAX && !(0xfff8..=0xfffe).contains(port) =>
                {
                    return Err(SwitchError::BadOutPort(*port));
                }
                Action::WriteActions(inner) | Action::Clone(inner) => walk(inner)?,
                _ => {}
            }
        }
        Ok(())
    }
    walk(actions)
}

fn check_gotos(acts: &[Action], table: u8) -> Result<(), SwitchError> {
    for a in acts {
        if let Action::GotoTable { table: goto } = a {
            if *goto <= table || usize::from(*goto) >= N_TABLES {
                return Err(SwitchError::BadGotoTable { table, goto: *goto });
            }
        }
    }
    Ok(())
}

/// True if some packet matches both.
fn overlaps(a: &Match, b: &Match) -> bool {
    let both = a.mask().masked(b.mask());
    a.value().masked(&both) == b.value().masked(&both)
}

/// The parts of a rule that a flow_mod selects by. The match comes last, and only if the
/// others select the rule (a rule's match is rebuilt from its classifier rule).
pub(crate) struct Selectable<'a, M> {
    pub(crate) priority: u16,
    pub(crate) cookie: u64,
    pub(crate) actions: &'a [Action],
    pub(crate) flow_match: M,
}

/// True if flow_mod `fm` selects rule `r` (OVS `rule_criteria`).
fn selects<'m, M>(fm: &FlowMod, strict: bool, r: Selectable<'_, M>) -> bool
where
    M: FnOnce() -> std::borrow::Cow<'m, Match>,
{
    let e = &fm.entry;
    if e.cookie_mask != 0 && (r.cookie & e.cookie_mask) != (e.cookie & e.cookie_mask) {
        return false;
    }
    if e.out_port != OFPP_NONE && !outputs_to(r.actions, e.out_port) {
        return false;
    }
    if strict {
        return r.priority == e.priority && *(r.flow_match)() == e.flow_match;
    }
    // Non-strict: the rule is at least as specific as the flow_mod's match (every rule is,
    // if the flow_mod's match is the catch-all one).
    if e.flow_match.mask().is_zero() {
        return e.flow_match.value().is_zero();
    }
    let m = (r.flow_match)();
    e.flow_match.mask().is_subset_of(m.mask())
        && m.value().masked(e.flow_match.mask()) == *e.flow_match.value()
}

/// True if the actions (apply or write) output to `port` (OVS `ofpacts_output_to_port`).
fn outputs_to(acts: &[Action], port: u16) -> bool {
    acts.iter().any(|a| match a {
        Action::Output { port: p, .. } | Action::Enqueue { port: p, .. } => *p == port,
        Action::OutputTrunc { port: p, .. } => *p == port,
        Action::Controller(_) => port == openflow::ofctl::value::OFPP_CONTROLLER,
        Action::WriteActions(inner) | Action::Clone(inner) => outputs_to(inner, port),
        _ => false,
    })
}

/// The port a flow reaches through `kind`, for patch ports.
pub(crate) fn patch_peer(layout: &SwitchLayout, port: &PortLayout) -> Option<(String, u16)> {
    match &port.kind {
        PortKind::Patch { peer: Some(peer) } => layout
            .port_by_name(peer)
            .map(|p| (p.bridge.clone(), p.ofport)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use openflow::ofctl::flow::FlowCommand;
    use packet::key::FlowKey;

    use super::*;
    use crate::xlate::XlateOptions;

    fn sw() -> Switch {
        let mut sw = Switch::new();
        sw.vsctl("add-br br0 -- add-port br0 p1 -- add-port br0 p2 -- add-port br0 p3")
            .expect("valid setup");
        sw
    }

    fn flows(sw: &Switch) -> Vec<String> {
        sw.dump_flows("br0")
            .expect("bridge exists")
            .iter()
            .map(|f| {
                f.entry
                    .to_dump_flows_string(openflow::action::OfVersion::Of13, false)
            })
            .collect()
    }

    fn parse(sw: &Switch, text: &str, cmd: FlowCommand) -> FlowEntry {
        sw.parse_flows("br0", &[text], "-O OpenFlow13", cmd)
            .expect("valid flow")
            .remove(0)
    }

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn of_rule_stays_small() {
        // Every added rule is one of these, in its own allocation (with the `Arc` counts, 104
        // bytes: malloc's 112-byte class).
        assert_eq!(std::mem::size_of::<OfRule>(), 88);
    }

    #[test]
    fn settle_keeps_the_flows_and_names_unknown_bridges() {
        let mut sw = sw();
        sw.add_flows_text(
            "br0",
            &["priority=5,ip,actions=output:1", "table=3,actions=drop"],
            "",
        )
        .expect("valid flows");
        let before = flows(&sw);
        sw.settle("br0").expect("bridge exists");
        assert_eq!(flows(&sw), before);
        // The next change starts from the settled tables.
        sw.add_flows_text("br0", &["priority=6,arp,actions=output:2"], "")
            .expect("valid flow");
        assert_eq!(flows(&sw).len(), before.len() + 1);
        assert!(matches!(
            sw.settle("nope"),
            Err(SwitchError::NoSuchBridge(b)) if b == "nope"
        ));
    }

    #[test]
    fn settled_tables_of_several_masks_compile_and_answer_the_same() {
        let mut sw = sw();
        // Table 0: forty rules of four masks, all within a /24 of their own; table 1: one
        // mask only.
        let mut rules = Vec::new();
        for i in 0..10 {
            rules.push(format!(
                "priority=30,ip,nw_dst=10.0.{i}.0/24,actions=output:2,output:3"
            ));
            rules.push(format!(
                "priority=40,tcp,nw_dst=10.0.{i}.0/24,tp_dst=80,actions=output:3"
            ));
            rules.push(format!(
                "priority=35,udp,nw_dst=10.0.{i}.0/24,tp_dst=53,actions=output:2"
            ));
            rules.push(format!("priority=50,ip,nw_dst=10.0.{i}.7,actions=drop"));
        }
        rules.push("table=1,priority=1,ip,nw_dst=10.9.9.9,actions=output:1".to_string());
        let text: Vec<&str> = rules.iter().map(String::as_str).collect();
        sw.add_flows_text("br0", &text, "").expect("valid flows");
        let keys: Vec<FlowKey> = (0..200u32)
            .map(|i| {
                let mut k = FlowKey::default();
                k.set_in_port(1);
                k.set_dl_type(0x0800);
                k.set_nw_src(0x0a01_0000 | i);
                k.set_nw_dst(0x0a00_0000 | ((i % 12) << 8) | (i % 9));
                k.set_nw_proto([6, 17, 1][i as usize % 3]);
                k.set_tp_dst([80, 53, 22][(i as usize / 3) % 3]);
                k
            })
            .collect();
        let answers = |sw: &Switch| -> Vec<String> {
            keys.iter()
                .map(|k| {
                    let o = sw
                        .translate("br0", k, XlateOptions::default(), None)
                        .expect("bridge exists");
                    crate::odp::format_actions(&o.actions)
                })
                .collect()
        };
        let before = answers(&sw);
        let mut seen = before.clone();
        seen.sort();
        seen.dedup();
        assert!(
            seen.len() >= 4,
            "the keys reach every kind of rule: {seen:?}"
        );
        let table = |sw: &Switch, id| {
            sw.bridge("br0")
                .and_then(|b| b.table(id))
                .map(|t| t.is_compiled())
        };
        assert_eq!(table(&sw, 0), Some(false));
        assert_eq!(sw.compile_tables("br0").expect("bridge exists"), vec![0]);
        assert_eq!(table(&sw, 0), Some(true));
        assert_eq!(table(&sw, 1), Some(false), "one mask: nothing to merge");
        assert_eq!(answers(&sw), before);
        // A change drops the compiled form and is seen at once.
        sw.add_flows_text(
            "br0",
            &["priority=60,ip,nw_dst=10.0.3.0/24,actions=output:3"],
            "",
        )
        .expect("valid flow");
        assert_eq!(table(&sw, 0), Some(false));
        let changed = answers(&sw);
        assert_ne!(changed, before);
        assert_eq!(sw.compile_tables("br0").expect("bridge exists"), vec![0]);
        assert_eq!(answers(&sw), changed);
        assert!(matches!(
            sw.compile_tables("nope"),
            Err(SwitchError::NoSuchBridge(b)) if b == "nope"
        ));
    }

    #[test]
    fn bad_goto_table_is_error_and_changes_nothing() {
        let mut sw = sw();
        sw.add_flows_text("br0", &["table=1,actions=output:1"], "-O OpenFlow13")
            .expect("valid flow");
        let before = flows(&sw);
        let mut e = parse(&sw, "table=3,actions=goto_table:4", FlowCommand::Add);
        e.actions = vec![Action::GotoTable { table: 2 }];
        let err = sw
            .flow_mods("br0", vec![FlowMod::add(e.clone())])
            .expect_err("backwards goto");
        assert!(matches!(
            err,
            SwitchError::BadGotoTable { table: 3, goto: 2 }
        ));
        e.actions = vec![Action::GotoTable { table: 255 }];
        assert!(sw.flow_mods("br0", vec![FlowMod::add(e.clone())]).is_err());
        e.table = Some(255);
        e.actions = vec![];
        assert_eq!(
            sw.flow_mods("br0", vec![FlowMod::add(e)]),
            Err(SwitchError::BadTable(255))
        );
        assert_eq!(flows(&sw), before);
    }

    #[test]
    fn bundle_is_all_or_nothing() {
        let mut sw = sw();
        let good = parse(&sw, "in_port=1,actions=output:2", FlowCommand::Add);
        let mut bad = parse(&sw, "in_port=2,actions=output:1", FlowCommand::Add);
        bad.actions = vec![Action::Output {
            port: 0xff10,
            max_len: 0,
        }];
        assert_eq!(
            sw.flow_mods("br0", vec![FlowMod::add(good), FlowMod::add(bad)]),
            Err(SwitchError::BadOutPort(0xff10))
        );
        assert!(flows(&sw).is_empty());
        assert!(sw
            .add_flows_text(
                "br0",
                &["in_port=1,actions=output:2", "bogus=1,actions=drop"],
                ""
            )
            .is_err());
        assert!(flows(&sw).is_empty());
    }

    #[test]
    fn missing_ports_in_flows_are_accepted_as_in_ovs() {
        let mut sw = sw();
        sw.add_flows_text("br0", &["in_port=9,actions=output:7"], "")
            .expect("OVS accepts unknown ports");
        assert_eq!(flows(&sw).len(), 1);
    }

    #[test]
    fn config_errors_leave_state_intact() {
        let mut sw = sw();
        sw.add_flows_text("br0", &["actions=output:1"], "")
            .expect("valid flow");
        let (cfg, fl) = (sw.config().clone(), flows(&sw));
        let err = sw
            .vsctl("add-port br0 px -- set Interface px type=patch")
            .expect_err("patch without peer");
        assert_eq!(
            err.to_string(),
            "patch port px has no peer (set options:peer=PORT)"
        );
        let err = sw
            .vsctl("set Bridge br0 mirrors=@m -- --id=@m create Mirror name=m select_all=true output_port=p9")
            .expect_err("mirror to a missing port");
        assert!(err.to_string().contains("no port named p9"), "{err}");
        assert!(sw.mod_port("br0", "p7", &["noflood"]).is_err());
        assert!(sw.mod_port("br0", "p1", &["sideways"]).is_err());
        assert_eq!(sw.config(), &cfg);
        assert_eq!(flows(&sw), fl);
    }

    #[test]
    fn add_replaces_same_match_and_priority() {
        let mut sw = sw();
        sw.add_flows_text(
            "br0",
            &["in_port=1,actions=output:2", "in_port=1,actions=output:3"],
            "",
        )
        .expect("valid flows");
        assert_eq!(flows(&sw), vec!["in_port=1 actions=output:3"]);
    }

    #[test]
    fn modify_strict_and_loose_keep_counters() {
        let mut sw = sw();
        sw.add_flows_text(
            "br0",
            &[
                "priority=5,in_port=1,actions=output:2",
                "priority=6,in_port=1,ip,actions=output:2",
                "in_port=2,actions=output:1",
            ],
            "",
        )
        .expect("valid flows");
        for f in sw.bridge("br0").expect("exists").rules() {
            f.1.payload().credit(60);
        }
        let e = parse(&sw, "in_port=1,actions=output:3", FlowCommand::Modify);
        let out = sw
            .flow_mods("br0", vec![FlowMod::modify(e, false)])
            .expect("valid");
        assert_eq!(out.n_modified, 2);
        let d = sw.dump_flows("br0").expect("exists");
        assert!(d.iter().all(|f| f.entry.stats.n_packets == 1));
        assert_eq!(
            flows(&sw)
                .iter()
                .filter(|f| f.ends_with("output:3"))
                .count(),
            2
        );
        let e = parse(
            &sw,
            "priority=5,in_port=1,actions=output:1",
            FlowCommand::ModifyStrict,
        );
        let out = sw
            .flow_mods("br0", vec![FlowMod::modify(e, true)])
            .expect("valid");
        assert_eq!(out.n_modified, 1);
        // A modify that matches nothing adds (OpenFlow 1.0 semantics).
        let e = parse(&sw, "in_port=3,actions=output:1", FlowCommand::Modify);
        let out = sw
            .flow_mods("br0", vec![FlowMod::modify(e, false)])
            .expect("valid");
        assert_eq!((out.n_modified, out.n_added), (0, 1));
        assert_eq!(flows(&sw).len(), 4);
    }

    #[test]
    fn delete_by_cookie_out_port_and_strict() {
        let mut sw = sw();
        sw.add_flows_text(
            "br0",
            &[
                "cookie=0x1,in_port=1,actions=output:2",
                "cookie=0x2,in_port=2,actions=output:3",
                "cookie=0x3,priority=7,in_port=3,actions=output:1",
                "cookie=0x3,in_port=3,ip,actions=output:1",
            ],
            "",
        )
        .expect("valid flows");
        let e = parse(&sw, "cookie=0x2/-1", FlowCommand::Delete);
        assert_eq!(
            sw.flow_mods("br0", vec![FlowMod::delete(e, false)])
                .expect("ok")
                .n_deleted,
            1
        );
        let mut e = parse(&sw, "", FlowCommand::Delete);
        e.out_port = 2;
        assert_eq!(
            sw.flow_mods("br0", vec![FlowMod::delete(e, false)])
                .expect("ok")
                .n_deleted,
            1
        );
        let e = parse(&sw, "priority=7,in_port=3", FlowCommand::DeleteStrict);
        assert_eq!(
            sw.flow_mods("br0", vec![FlowMod::delete(e, true)])
                .expect("ok")
                .n_deleted,
            1
        );
        assert_eq!(
            flows(&sw),
            vec!["cookie=0x3, ip,in_port=3 actions=output:1"]
        );
    }

    #[test]
    fn replace_flows_is_atomic() {
        let mut sw = sw();
        sw.add_flows_text(
            "br0",
            &["in_port=1,actions=output:2", "table=3,actions=drop"],
            "-O OpenFlow13",
        )
        .expect("valid flows");
        let new = sw
            .parse_flows("br0", &["in_port=2,actions=output:1"], "", FlowCommand::Add)
            .expect("valid");
        sw.replace_flows("br0", new).expect("valid");
        assert_eq!(flows(&sw), vec!["in_port=2 actions=output:1"]);
        let mut bad = sw
            .parse_flows("br0", &["in_port=3,actions=output:1"], "", FlowCommand::Add)
            .expect("valid");
        bad[0].actions.push(Action::GotoTable { table: 0 });
        assert!(sw.replace_flows("br0", bad).is_err());
        assert_eq!(flows(&sw), vec!["in_port=2 actions=output:1"]);
    }

    #[test]
    fn check_overlap_refuses_overlapping_flow() {
        let mut sw = sw();
        sw.add_flows_text("br0", &["priority=5,ip,actions=drop"], "")
            .expect("valid");
        let err = sw
            .add_flows_text(
                "br0",
                &["check_overlap,priority=5,in_port=1,actions=drop"],
                "",
            )
            .expect_err("overlaps");
        assert!(matches!(
            err,
            SwitchError::Overlap {
                table: 0,
                priority: 5
            }
        ));
        sw.add_flows_text(
            "br0",
            &["check_overlap,priority=6,in_port=1,actions=drop"],
            "",
        )
        .expect("different priority");
    }

    #[test]
    fn standalone_adds_normal_flow_and_mode_change_flushes() {
        let mut sw = sw();
        sw.add_flows_text("br0", &["in_port=1,actions=output:2"], "")
            .expect("valid");
        sw.vsctl("set-fail-mode br0 standalone").expect("valid");
        assert_eq!(flows(&sw), vec!["priority=0 actions=NORMAL"]);
        sw.vsctl("add-port br0 p4").expect("valid");
        assert_eq!(flows(&sw), vec!["priority=0 actions=NORMAL"]);
        sw.del_flows_text("br0", "").expect("valid");
        assert!(flows(&sw).is_empty());
        sw.vsctl("set-fail-mode br0 secure").expect("valid");
        assert!(flows(&sw).is_empty());
    }

    #[test]
    fn modify_keeps_rule_age() {
        let mut sw = sw();
        sw.set_time(1000);
        sw.add_flows_text("br0", &["hard_timeout=10,in_port=1,actions=drop"], "")
            .expect("valid");
        sw.set_time(5000);
        let e = parse(&sw, "in_port=1,actions=output:2", FlowCommand::Modify);
        sw.flow_mods("br0", vec![FlowMod::modify(e, false)])
            .expect("valid");
        assert_eq!(sw.expire_flows(11_000).len(), 1);
    }

    #[test]
    fn expire_flows_idle_and_hard() {
        let mut sw = sw();
        sw.set_time(1000);
        sw.add_flows_text(
            "br0",
            &[
                "idle_timeout=5,in_port=1,actions=drop",
                "hard_timeout=10,in_port=2,actions=drop",
                "in_port=3,actions=drop",
            ],
            "",
        )
        .expect("valid");
        for (_, r) in sw.bridge("br0").expect("exists").rules() {
            r.payload().touch(4000);
        }
        assert!(sw.expire_flows(8000).is_empty());
        assert_eq!(sw.expire_flows(9000).len(), 1);
        assert_eq!(sw.expire_flows(11_000).len(), 1);
        assert_eq!(flows(&sw), vec!["in_port=3 actions=drop"]);
    }
}

#[cfg(test)]
mod tie_tests {
    use super::*;
    use crate::trace::TraceInput;

    fn actions(sw: &Switch, key: &str) -> String {
        sw.trace(TraceInput::Datapath(key), Default::default())
            .expect("valid trace")
            .datapath_actions()
    }

    const IP4: &str =
        "in_port(4),eth(src=50:54:00:00:00:07,dst=50:54:00:00:00:0e),eth_type(0x0800),\
                       ipv4(src=10.0.1.7,dst=10.0.1.7,proto=47,tos=0,ttl=128,frag=no)";

    #[test]
    fn regression_equal_priorities_break_ties_as_ovs() {
        // The `ip,in_port` rule's mask also holds a priority-32768 rule, so OVS looks it up
        // before the NORMAL catch-all: the goto_table (then a miss) wins over NORMAL.
        let mut sw = Switch::new();
        sw.vsctl(
            "add-br br0 -- set bridge br0 fail-mode=standalone -- add-port br0 p4 tag=30 \
                 -- set Interface p4 ofport_request=4 -- add-port br0 p6",
        )
        .expect("valid setup");
        sw.add_flows_text(
            "br0",
            &[
                "dl_type=0x1234,in_port=4,actions=output:4",
                "priority=0,ip,in_port=4,actions=goto_table:1",
            ],
            "-O OpenFlow13",
        )
        .expect("valid flows");
        assert_eq!(actions(&sw, IP4), "drop");
        // Same maxima: the older mask (the catch-all, from NORMAL) is looked up first.
        let mut sw = Switch::new();
        sw.vsctl(
            "add-br br0 -- set bridge br0 fail-mode=standalone -- add-port br0 p4 \
                 -- set Interface p4 ofport_request=4 -- add-port br0 p1",
        )
        .expect("valid setup");
        sw.add_flows_text(
            "br0",
            &[
                "priority=0,reg0=0,actions=mod_dl_dst:50:54:00:00:00:01",
                "priority=0,actions=output:1",
            ],
            "",
        )
        .expect("valid flows");
        assert_eq!(actions(&sw, IP4), "1");
    }

    #[test]
    fn raised_subtable_stays_behind_equal_ones() {
        // The catch-all subtable (NORMAL, priority 0) rises to 100 after the icmp6 one was
        // added at 100: it keeps its place behind it, so the icmp6 rule wins (OVS's answer).
        let mut sw = Switch::new();
        sw.vsctl(
            "add-br br0 -- set bridge br0 fail-mode=standalone -- add-port br0 p3 \
             -- set Interface p3 ofport_request=3 -- add-port br0 p5 \
             -- set Interface p5 ofport_request=5",
        )
        .expect("valid setup");
        sw.add_flows_text(
            "br0",
            &[
                "priority=100,icmp6,actions=output:5",
                "priority=100,actions=NORMAL",
            ],
            "",
        )
        .expect("valid flows");
        let pkt = "in_port(3),eth(src=50:54:00:00:00:0b,dst=50:54:00:00:00:01),eth_type(0x86dd),\
                   ipv6(src=fe80::f,dst=2001:db8::4,label=0,proto=58,tclass=32,hlimit=128,frag=no),\
                   icmpv6(type=129,code=0)";
        assert_eq!(actions(&sw, pkt), "5");
    }

    #[test]
    fn rule_moved_to_another_rank_keeps_counters() {
        let mut sw = Switch::new();
        sw.vsctl("add-br br0 -- add-port br0 p1")
            .expect("valid setup");
        sw.add_flows_text("br0", &["priority=5,in_port=1,actions=drop"], "")
            .expect("valid flow");
        let before: Vec<u32> = sw
            .bridge("br0")
            .expect("exists")
            .rules()
            .iter()
            .map(|r| r.1.priority())
            .collect();
        for (_, r) in sw.bridge("br0").expect("exists").rules() {
            r.payload().credit(60);
        }
        // A mask with a higher maximum now comes first: the first rule's rank drops.
        sw.add_flows_text("br0", &["priority=9,ip,actions=drop"], "")
            .expect("valid flow");
        let rules = sw.bridge("br0").expect("exists").rules();
        let moved = rules
            .iter()
            .find(|r| r.1.payload().priority() == 5)
            .expect("still there");
        assert_ne!(moved.1.priority(), before[0]);
        assert_eq!(moved.1.payload().n_packets(), 1);
    }
}
