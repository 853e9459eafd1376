//! Translation: one packet on one bridge → datapath actions plus the wildcard mask of the
//! megaflow the datapath may install (the analogue of OVS's `ofproto-dpif-xlate.c`).
//!
//! # Stage
//!
//! - **Reads:** the packet's [`FlowKey`] with `in_port` holding the OpenFlow port of the bridge it
//!   arrived on; the switch's tables and layout (`&Switch`, never changed, except rule counters and
//!   the drop counters, which are atomics).
//! - **Writes:** [`XlateOutput`]: the [`DpAction`]s (datapath ports from the layout), the wildcard
//!   mask, the packet-ins (CONTROLLER) to send, the drops that happened; optionally a [`Walk`] for
//!   `trace`.
//! - **Next:** the datapath installs `(key & wc, actions)` as a megaflow and executes the actions.
//!
//! # Semantics (OVS's)
//!
//! - The walk starts in table 0; `goto_table` and `resubmit(port,table)` continue it. `resubmit` to
//!   a table not after the current one, and crossing a patch port, deepen the recursion; past
//!   [`MAX_DEPTH`] (64) levels or [`MAX_RESUBMITS`] lookups the translation stops and the packet is
//!   dropped, counted as `drop_resubmit_depth` / `drop_resubmit_limit` (never a stack overflow: the
//!   depth bounds the Rust recursion).
//! - A table miss drops (no controller connection exists here; OVS's default miss config).
//! - `write_actions`/`clear_actions` build the action set, executed when the walk ends, in
//!   OpenFlow's order (pop VLAN, pop/push MPLS, push VLAN, dec_ttl, every set/move, queue, then
//!   group, output or resubmit: only the last of each singleton kind).
//! - Field writes (`set_field`, `load`, `move`, `mod_*`, VLAN push/pop/modify, `dec_ttl`) change
//!   only the translation's copy of the key; they become datapath actions lazily, just before the
//!   packet is sent somewhere (OVS `commit_odp_actions`, in `xlate/commit.rs`).
//! - `dec_ttl` on TTL ≤ 1 sends a packet-in with reason `invalid_ttl` (for every controller id
//!   given, id 0 by default) and stops the current action list (`drop_invalid_ttl`).
//! - Output: to a port of the bridge (skipped, as in OVS, if it is the input port: use `IN_PORT`),
//!   `IN_PORT`, `FLOOD` (every port but the input port and `no-flood` ports), `ALL`, `LOCAL`,
//!   `TABLE`, `CONTROLLER` (a `userspace(...)` action plus a [`ControllerEvent`]), `NORMAL`. A
//!   `no-forward` port is never sent to (`drop_no_forward`); a missing port is skipped
//!   (`drop_no_port`). A port with `no-receive` drops what it receives (`drop_no_receive`).
//! - **NORMAL is a stub for now:** it floods like `FLOOD` (no MAC learning, no VLAN port modes, no
//!   mirrors). Real NORMAL comes with the next part of the pipeline issue.
//! - A patch port continues the same translation on the peer bridge, with `in_port` = the peer's
//!   OpenFlow port and metadata, registers, tunnel and conntrack fields cleared, a fresh action
//!   set, and everything restored afterwards (the peer's packet changes are undone by later
//!   commits, as OVS inlines reversible actions). A chain of N bridges costs one translation; a
//!   loop ends at the depth limit.
//!
//! # Wildcards
//!
//! The mask starts with what OVS always matches (`in_port`, `dl_type`, `recirc_id`, VLAN tag
//! presence, `nw_frag` for IP) and ORs in every bit a classifier lookup consulted and every
//! bit an action read or wrote. At the end the non-packet fields (metadata, registers,
//! `actset_output`) are cleared, ICMP type/code masks are cut to 8 bits and later fragments
//! lose their port masks (OVS `xlate_wc_finish`). **Megaflow soundness** is property-tested:
//! any packet equal to the translated one on the mask bits gets the same datapath actions.
//!
//! # Threads
//!
//! Translation takes `&Switch` and may run in any number of threads ([`Switch`] is `Send +
//! Sync`): counters are atomics and the MAC tables sit behind a mutex taken only by NORMAL.
//!
//! Maturity: experimental. Not yet translated (skipped with a `drop_unsupported_action`
//! count): groups, MPLS, conntrack, bundles, multipath, learn, sample; `output_trunc`
//! outputs untruncated.

mod commit;
pub mod normal;
#[cfg(test)]
mod tests;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use commit::commit;
pub use commit::vlan_tags;
use openflow::action::{Action, FieldWrite, OfVersion, PacketInReason};
use openflow::field::{Field, FieldId, Prereq};
use openflow::ofctl::actions::format_actions as format_of_actions;
use openflow::ofctl::match_fmt::format_match;
use openflow::ofctl::value::{format_port, OFPP_CONTROLLER, OFPP_IN_PORT, OFPP_NONE};
use openflow::subfield::Subfield;
use openflow::Match;
use packet::key::{fields, FlowKey, KeyField};

use crate::bridge::{PortKind, PortLayout};
use crate::odp::{DpAction, VLAN_CFI};
use crate::switch::{
    patch_peer, OfRule, Switch, OFPP_ALL, OFPP_FLOOD, OFPP_NORMAL, OFPP_TABLE, OFPP_UNSET,
};
use crate::trace::Walk;

/// Most nested resubmits / patch-port crossings (OVS `MAX_DEPTH`).
pub const MAX_DEPTH: u32 = 64;
/// Most table lookups in one translation (OVS `MAX_RESUBMITS`).
pub const MAX_RESUBMITS: u32 = MAX_DEPTH * MAX_DEPTH;

const ETH_TYPE_IP: u16 = 0x0800;
const ETH_TYPE_IPV6: u16 = 0x86dd;
const FRAG_ANY: u8 = 1;
const FRAG_LATER: u8 = 2;

/// Why translation dropped a packet (or part of its actions). Each has a counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// Resubmits or patch ports nested deeper than [`MAX_DEPTH`].
    ResubmitDepth,
    /// More than [`MAX_RESUBMITS`] table lookups.
    ResubmitLimit,
    /// A table lookup found no rule (at the start of the walk this drops the packet; a missed
    /// `resubmit` or `goto_table` ends only that branch).
    TableMiss,
    /// The input port has `no-receive`.
    NoReceive,
    /// An output to a port with `no-forward`.
    NoForward,
    /// An output to a port that does not exist.
    NoPort,
    /// `dec_ttl` on a TTL of 0 or 1.
    InvalidTtl,
    /// An action this pipeline does not implement yet (groups, MPLS, conntrack...).
    Unsupported,
    /// NORMAL: a VLAN the input port does not carry, a partial tag, or no input port.
    InvalidVlan,
    /// A packet received on a mirror output port, or NORMAL's learned port is one.
    MirrorPort,
    /// NORMAL: an IEEE 802.1D reserved destination address.
    ReservedMac,
    /// NORMAL: the destination was learned on the input port.
    LearnedInPort,
}

impl DropReason {
    /// Every reason, in counter order.
    pub const ALL: [DropReason; 12] = [
        DropReason::ResubmitDepth,
        DropReason::ResubmitLimit,
        DropReason::TableMiss,
        DropReason::NoReceive,
        DropReason::NoForward,
        DropReason::NoPort,
        DropReason::InvalidTtl,
        DropReason::Unsupported,
        DropReason::InvalidVlan,
        DropReason::MirrorPort,
        DropReason::ReservedMac,
        DropReason::LearnedInPort,
    ];

    /// The counter's name.
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::ResubmitDepth => "drop_resubmit_depth",
            DropReason::ResubmitLimit => "drop_resubmit_limit",
            DropReason::TableMiss => "drop_table_miss",
            DropReason::NoReceive => "drop_no_receive",
            DropReason::NoForward => "drop_no_forward",
            DropReason::NoPort => "drop_no_port",
            DropReason::InvalidTtl => "drop_invalid_ttl",
            DropReason::Unsupported => "drop_unsupported_action",
            DropReason::InvalidVlan => "drop_invalid_vlan",
            DropReason::MirrorPort => "drop_mirror_port",
            DropReason::ReservedMac => "drop_reserved_mac",
            DropReason::LearnedInPort => "drop_learned_in_port",
        }
    }

    fn index(self) -> usize {
        DropReason::ALL.iter().position(|r| *r == self).unwrap_or(0)
    }
}

/// Drop counters, one per [`DropReason`] (relaxed atomics: translations run in any thread),
/// and the MAC learning epoch.
#[derive(Debug, Default)]
pub struct Counters {
    drops: [AtomicU64; 12],
    mac_changes: AtomicU64,
}

impl Counters {
    /// The count for `reason`.
    pub fn get(&self, reason: DropReason) -> u64 {
        self.drops[reason.index()].load(Ordering::Relaxed)
    }

    fn inc(&self, reason: DropReason) {
        self.drops[reason.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// How many times NORMAL learned a new address or saw one move, ever. A cache of
    /// NORMAL's decisions is stale when this changed since it was filled.
    pub fn mac_epoch(&self) -> u64 {
        self.mac_changes.load(Ordering::Acquire)
    }

    pub(crate) fn mac_changed(&self) {
        self.mac_changes.fetch_add(1, Ordering::Release);
    }

    /// Every counter by name.
    pub fn all(&self) -> Vec<(&'static str, u64)> {
        DropReason::ALL
            .iter()
            .map(|r| (r.as_str(), self.get(*r)))
            .collect()
    }
}

/// A packet-in that translation asks for (the OpenFlow issue sends it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerEvent {
    /// Bridge.
    pub bridge: String,
    /// Reason.
    pub reason: PacketInReason,
    /// Controller id.
    pub controller_id: u16,
    /// Bytes of the packet to send (0xffff = all).
    pub max_len: u16,
    /// Table of the rule that sent it.
    pub table: u8,
    /// Cookie of that rule.
    pub cookie: u64,
    /// Opaque data from `controller(userdata=..)`.
    pub userdata: Vec<u8>,
}

#[allow(dead_code)]
fn assert_send_sync() {
    fn is<X: Send + Sync>() {}
    is::<Switch>();
}

/// Options of one translation.
#[derive(Debug, Clone, Copy, Default)]
pub struct XlateOptions {
    /// Credit matched rules with one packet of this many bytes (a real upcall; `None` for a
    /// plain trace).
    pub credit_bytes: Option<u64>,
    /// The switch clock, for rules' last-use times and MAC aging.
    pub now_ms: u64,
    /// Side effects allowed: NORMAL learns source addresses (a real upcall, `trace
    /// -generate`).
    pub learn: bool,
}

/// The result of a translation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XlateOutput {
    /// Datapath actions (empty = drop).
    pub actions: Vec<DpAction>,
    /// Which bits of the input key the result depends on (the megaflow mask).
    pub wc: FlowKey,
    /// The key as the pipeline left it.
    pub final_flow: FlowKey,
    /// Packet-ins to send.
    pub controller: Vec<ControllerEvent>,
    /// Drops (counted) that happened during the walk.
    pub drops: Vec<DropReason>,
    /// The drop that ended the translation early, if any (the actions are then empty).
    pub error: Option<DropReason>,
    /// What the translation depended on, for the datapath's revalidation and statistics.
    pub deps: XlateDeps,
}

/// What a translation depended on, so that a cache of its result knows when it is stale and
/// whom to credit.
#[derive(Debug, Clone, Default)]
pub struct XlateDeps {
    /// The rules that matched, in walk order (a rule appears once per match).
    pub rules: Vec<Arc<OfRule>>,
    /// Tables of the input bridge that were looked up (bit `t` of word `t / 64`).
    pub tables: [u64; 4],
    /// Every lookup used the input key itself (same bridge, same in_port, no field or
    /// register written before it, no fragment adjustment). Then a rule added to a table can
    /// change this translation only if its match overlaps the megaflow.
    pub lookups_on_input: bool,
    /// NORMAL ran: the result depends on the MAC learning tables
    /// ([`Counters::mac_epoch`]).
    pub used_normal: bool,
}

impl PartialEq for XlateDeps {
    fn eq(&self, other: &Self) -> bool {
        self.tables == other.tables
            && self.lookups_on_input == other.lookups_on_input
            && self.used_normal == other.used_normal
            && self.rules.len() == other.rules.len()
            && self
                .rules
                .iter()
                .zip(&other.rules)
                .all(|(a, b)| Arc::ptr_eq(a, b))
    }
}

impl Eq for XlateDeps {}

impl XlateDeps {
    /// Whether table `t` was looked up.
    pub fn used_table(&self, t: u8) -> bool {
        self.tables[usize::from(t / 64)] & (1 << (t % 64)) != 0
    }
}

/// Translation errors (bad requests, not packet fates).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum XlateError {
    /// The bridge does not exist.
    #[error("no bridge named {0}")]
    NoSuchBridge(String),
    /// No port has this datapath number.
    #[error("no port with datapath number {0}")]
    NoSuchDpPort(u32),
}

/// What an upcall returns: the bridge the packet entered and the translation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upcall {
    /// The bridge of the input port.
    pub bridge: String,
    /// The translation; its mask is over the datapath key (`in_port` is always exact).
    pub output: XlateOutput,
}

fn exact(wc: &mut FlowKey, f: KeyField) {
    wc.set(f, u128::MAX);
}

/// Marks the fields `prereq` consults in `wc` and evaluates it (OVS `mf_are_prereqs_ok`
/// with wildcards). `dl_type` is always exact already.
pub(crate) fn prereq_ok_wc(flow: &FlowKey, p: Prereq, wc: &mut FlowKey) -> bool {
    match p {
        Prereq::VlanVid => wc.set(
            fields::VLAN_TCI,
            wc.get(fields::VLAN_TCI) | u128::from(VLAN_CFI),
        ),
        Prereq::Ct => exact(wc, fields::CT_STATE),
        Prereq::Tcp | Prereq::Udp | Prereq::Sctp | Prereq::Icmpv4 | Prereq::Icmpv6 => {
            exact(wc, fields::NW_PROTO)
        }
        Prereq::Nd | Prereq::NdSolicit | Prereq::NdAdvert => {
            exact(wc, fields::NW_PROTO);
            exact(wc, fields::TP_SRC);
            exact(wc, fields::TP_DST);
        }
        _ => {}
    }
    openflow::flow_match::prereq_ok(flow, p)
}

fn is_ip_any(k: &FlowKey) -> bool {
    matches!(k.dl_type(), ETH_TYPE_IP | ETH_TYPE_IPV6)
}

/// The mask every translation starts from (OVS `xlate_wc_init`), plus VLAN tag presence,
/// which OVS's datapath key encodes in its Ethernet type.
fn wc_init(key: &FlowKey) -> FlowKey {
    let mut wc = FlowKey::default();
    exact(&mut wc, fields::IN_PORT);
    exact(&mut wc, fields::DL_TYPE);
    exact(&mut wc, fields::RECIRC_ID);
    exact(&mut wc, fields::VLAN_TPID);
    wc.set(fields::VLAN_TCI, u128::from(VLAN_CFI));
    if key.vlan_tci() & VLAN_CFI != 0 {
        exact(&mut wc, fields::VLAN_TPID1);
        wc.set(fields::VLAN_TCI1, u128::from(VLAN_CFI));
    }
    if is_ip_any(key) {
        wc.set(fields::NW_FRAG, 3);
    }
    wc
}

/// OVS `xlate_wc_finish`.
fn wc_finish(key: &FlowKey, wc: &mut FlowKey) {
    wc.set(fields::METADATA, 0);
    for r in fields::REGS {
        wc.set(r, 0);
    }
    wc.set(fields::ACTSET_OUTPUT, 0);
    let icmp = (key.dl_type() == ETH_TYPE_IP && key.nw_proto() == 1)
        || (key.dl_type() == ETH_TYPE_IPV6 && key.nw_proto() == 58);
    if icmp {
        wc.set(fields::TP_SRC, wc.get(fields::TP_SRC) & 0xff);
        wc.set(fields::TP_DST, wc.get(fields::TP_DST) & 0xff);
    }
    for tci in [fields::VLAN_TCI, fields::VLAN_TCI1] {
        if wc.get(tci) != 0 {
            wc.set(tci, wc.get(tci) | u128::from(VLAN_CFI));
        }
    }
    // Absent tags have no bits to match but their absence (their TCI is always 0).
    if key.vlan_tci() & VLAN_CFI == 0 {
        wc.set(fields::VLAN_TCI, u128::from(VLAN_CFI));
        wc.set(fields::VLAN_TPID1, 0);
        wc.set(fields::VLAN_TCI1, 0);
    } else if key.vlan_tci1() & VLAN_CFI == 0 {
        wc.set(fields::VLAN_TCI1, u128::from(VLAN_CFI));
    }
    if key.nw_frag() & FRAG_LATER != 0 {
        wc.set(fields::TP_SRC, 0);
        wc.set(fields::TP_DST, 0);
    }
}

/// Normalizes an input key: a present VLAN tag without a TPID gets 0x8100, and with a VLAN
/// limit of 1 a second tag is not parsed (its TPID becomes the Ethernet type), as OVS's
/// `vlan-limit`.
pub fn normalize_key(key: &mut FlowKey, vlan_limit: u32) {
    if key.vlan_tci() & VLAN_CFI != 0 && key.vlan_tpid() == 0 {
        key.set_vlan_tpid(0x8100);
    }
    if key.vlan_tci() & VLAN_CFI == 0 {
        key.set_vlan_tci(0);
        key.set_vlan_tpid(0);
        key.set_vlan_tci1(0);
        key.set_vlan_tpid1(0);
    }
    if key.vlan_tci1() & VLAN_CFI != 0 {
        if key.vlan_tpid1() == 0 {
            key.set_vlan_tpid1(0x8100);
        }
        if vlan_limit == 1 {
            key.set_dl_type(key.vlan_tpid1());
            key.set_vlan_tci1(0);
            key.set_vlan_tpid1(0);
        }
    } else {
        key.set_vlan_tpid1(0);
    }
}

struct Ctx<'a> {
    sw: &'a Switch,
    opts: XlateOptions,
    bridge: String,
    flow: FlowKey,
    base: FlowKey,
    /// The packet as it entered.
    orig: FlowKey,
    /// An action wrote the flow's VLAN fields (sticky; see `commit`).
    vlans_touched: bool,
    wc: FlowKey,
    out: Vec<DpAction>,
    depth: u32,
    resubmits: u32,
    table_id: u8,
    action_set: Vec<Action>,
    exit: bool,
    error: Option<DropReason>,
    in_action_set: bool,
    rule_cookie: u64,
    controller: Vec<ControllerEvent>,
    drops: Vec<DropReason>,
    walk: Option<Walk>,
    /// Mirrors this version of the packet was already sent to (OVS `ctx->mirrors`).
    mirrors: u32,
    /// Nesting level of the walk's lines.
    indent: usize,
    /// The rule being executed is a table-miss rule (priority 0, matches everything).
    rule_is_table_miss: bool,
    /// Packet-ins so far (their recirculation ids).
    n_recirc: u32,
    deps: XlateDeps,
    /// Patch ports crossed so far on the current path (0 = in the input bridge).
    patch_depth: u32,
}

impl Switch {
    /// The datapath's entry point: translates a packet's key as the datapath extracted it
    /// (`in_port` = the datapath port), on the bridge that port belongs to. The key is
    /// normalized first ([`normalize_key`] with the bridge's VLAN limit; the datapath should
    /// extract with the same limit so that its megaflows match). `learn` and `credit_bytes`
    /// in `opts` make it a real upcall (MAC learning, rule counters).
    pub fn upcall(&self, key: &FlowKey, opts: XlateOptions) -> Result<Upcall, XlateError> {
        let dp = key.in_port();
        let port = self
            .layout()
            .port_by_dp(dp)
            .ok_or(XlateError::NoSuchDpPort(dp))?;
        let limit = self
            .config()
            .bridges
            .iter()
            .find(|b| b.name == port.bridge)
            .map_or(1, |b| b.vlan_limit);
        let mut k = *key;
        k.set_in_port(u32::from(port.ofport));
        normalize_key(&mut k, limit);
        let output = self.translate(&port.bridge, &k, opts, None)?;
        Ok(Upcall {
            bridge: port.bridge.clone(),
            output,
        })
    }

    /// Translates `key` (with `in_port` = an OpenFlow port of `bridge`) into datapath
    /// actions and a megaflow mask. With `walk`, records the walk for `trace`.
    pub fn translate(
        &self,
        bridge: &str,
        key: &FlowKey,
        opts: XlateOptions,
        walk: Option<&mut Walk>,
    ) -> Result<XlateOutput, XlateError> {
        if self.bridge(bridge).is_none() {
            return Err(XlateError::NoSuchBridge(bridge.to_string()));
        }
        let mut ctx = Ctx {
            sw: self,
            opts,
            bridge: bridge.to_string(),
            flow: *key,
            base: *key,
            orig: *key,
            vlans_touched: false,
            wc: wc_init(key),
            out: Vec::new(),
            depth: 0,
            resubmits: 0,
            table_id: 0,
            action_set: Vec::new(),
            exit: false,
            error: None,
            in_action_set: false,
            rule_cookie: 0,
            controller: Vec::new(),
            drops: Vec::new(),
            walk: walk.as_ref().map(|_| Walk::default()),
            mirrors: 0,
            indent: 0,
            rule_is_table_miss: false,
            n_recirc: 0,
            patch_depth: 0,
            deps: XlateDeps {
                lookups_on_input: true,
                ..XlateDeps::default()
            },
        };
        ctx.flow.set_actset_output(u32::from(OFPP_UNSET));
        ctx.note_bridge();
        let in_port = u16::try_from(key.in_port()).unwrap_or(OFPP_NONE);
        let receives = match self.port_by_ofport(bridge, in_port) {
            Some(p) if p.flags.no_receive => {
                ctx.note("OFPPC_NO_RECV set, dropping packet");
                ctx.drop(DropReason::NoReceive);
                false
            }
            _ => true,
        };
        if receives && !ctx.in_port_is_mirror_output() {
            ctx.mirror_ingress();
            ctx.xlate_table(in_port, 0, false, true);
            if ctx.error.is_none() && !ctx.exit {
                ctx.run_action_set();
            }
        }
        if ctx.error.is_some() {
            ctx.out.clear();
        }
        wc_finish(key, &mut ctx.wc);
        if let (Some(w), Some(mine)) = (walk, ctx.walk.take()) {
            *w = mine;
        }
        Ok(XlateOutput {
            actions: ctx.out,
            wc: ctx.wc,
            final_flow: ctx.flow,
            controller: ctx.controller,
            drops: ctx.drops,
            error: ctx.error,
            deps: ctx.deps,
        })
    }
}

impl Ctx<'_> {
    fn note(&mut self, s: &str) {
        let depth = self.indent;
        if let Some(w) = self.walk.as_mut() {
            w.push(depth, s.to_string());
        }
    }

    fn note_bridge(&mut self) {
        let depth = self.indent;
        let name = self.bridge.clone();
        if let Some(w) = self.walk.as_mut() {
            w.push_bridge(depth, &name);
        }
    }

    fn drop(&mut self, r: DropReason) {
        self.sw.counters.inc(r);
        self.drops.push(r);
    }

    fn in_port(&self) -> u16 {
        u16::try_from(self.flow.in_port()).unwrap_or(OFPP_NONE)
    }

    fn port(&self, ofport: u16) -> Option<&PortLayout> {
        self.sw.port_by_ofport(&self.bridge, ofport)
    }

    fn resource_check(&mut self) -> bool {
        let r = if self.depth >= MAX_DEPTH {
            self.note(&format!("over max translation depth {MAX_DEPTH}"));
            DropReason::ResubmitDepth
        } else if self.resubmits >= MAX_RESUBMITS {
            self.note(&format!("over {MAX_RESUBMITS} resubmit actions"));
            DropReason::ResubmitLimit
        } else {
            return true;
        };
        self.drop(r);
        self.error = Some(r);
        false
    }

    /// Looks up `table` with `in_port` and runs the matching rule's actions (OVS
    /// `xlate_table_action`).
    fn xlate_table(&mut self, in_port: u16, table: u8, deepens: bool, last: bool) {
        if !self.resource_check() {
            return;
        }
        let old_table = self.table_id;
        self.table_id = table;
        let mut key = self.flow;
        key.set_in_port(u32::from(in_port));
        if is_ip_any(&key) && key.nw_frag() & FRAG_ANY != 0 {
            // OVS's "normal" fragment handling: the ports of a fragment are unavailable.
            key.set_tp_src(0);
            key.set_tp_dst(0);
        }
        if self.deps.lookups_on_input {
            let mut base = self.orig;
            base.set_actset_output(key.actset_output());
            if key == base && self.patch_depth == 0 {
                self.deps.tables[usize::from(table / 64)] |= 1 << (table % 64);
            } else {
                self.deps.lookups_on_input = false;
            }
        }
        let rule = self
            .sw
            .bridge(&self.bridge)
            .and_then(|b| b.table(table))
            .and_then(|t| t.snapshot().lookup(&key, Some(&mut self.wc)).cloned());
        let depth = self.indent;
        match rule {
            Some(rule) => {
                let p = rule.payload();
                self.deps.rules.push(p.clone());
                if let Some(bytes) = self.opts.credit_bytes {
                    p.credit(bytes);
                    p.touch(self.opts.now_ms);
                }
                if let Some(w) = self.walk.as_mut() {
                    let m = format_match(&rule.match_(), None);
                    let m = if m.is_empty() {
                        String::new()
                    } else {
                        format!("{m}, ")
                    };
                    let cookie = if p.cookie() != 0 {
                        format!(", cookie {:#x}", p.cookie())
                    } else {
                        String::new()
                    };
                    w.push(
                        depth,
                        format!("{table:2}. {m}priority {}{cookie}", p.priority()),
                    );
                }
                self.resubmits += 1;
                let deepen = u32::from(deepens);
                self.depth += deepen;
                let old_cookie = self.rule_cookie;
                self.rule_cookie = p.cookie();
                let old_miss = std::mem::replace(
                    &mut self.rule_is_table_miss,
                    p.priority() == 0 && p.is_catch_all(),
                );
                self.indent += 1;
                // `rule` is an `Arc` held here: its actions outlive the nested walk.
                self.do_actions(rule.payload().actions(), last);
                self.indent -= 1;
                self.rule_cookie = old_cookie;
                self.rule_is_table_miss = old_miss;
                self.depth -= deepen;
            }
            None => {
                if let Some(w) = self.walk.as_mut() {
                    w.push(depth, format!("{table:2}. No match."));
                }
                self.drop(DropReason::TableMiss);
            }
        }
        self.table_id = old_table;
    }

    fn do_actions(&mut self, acts: &[Action], last: bool) {
        let n = acts.len();
        for (i, a) in acts.iter().enumerate() {
            if self.error.is_some() || self.exit {
                break;
            }
            let is_last = last && i + 1 == n;
            if self.walk.is_some() {
                // Each action in its most direct spelling (OpenFlow 1.0's where it has one).
                let version = if a.is_instruction() {
                    OfVersion::Of13
                } else {
                    OfVersion::Of10
                };
                let mut text = format_of_actions(std::slice::from_ref(a), version);
                if text == "drop" {
                    // Not expressible in OpenFlow 1.0 (e.g. `push_vlan`): the 1.3 spelling.
                    text = format_of_actions(std::slice::from_ref(a), OfVersion::Of13);
                }
                self.note(&text);
            }
            if !self.do_action(a, is_last) {
                break;
            }
        }
    }

    /// Runs one action; returns false to stop the current action list.
    fn do_action(&mut self, a: &Action, last: bool) -> bool {
        if self.modifies_packet(a) {
            self.mirrors = 0;
        }
        if writes_vlans(a) {
            self.vlans_touched = true;
        }
        let wc = &mut self.wc;
        let flow = &mut self.flow;
        match a {
            Action::Output { port, max_len } => self.output(*port, *max_len, last),
            Action::OutputTrunc { port, .. } => {
                self.note("truncation is not supported: output untruncated");
                self.output(*port, 0, last);
            }
            Action::Enqueue { port, .. } => self.output(*port, 0, last),
            Action::OutputReg { src, max_len } => {
                let v = read_subfield(flow, wc, src);
                match u16::try_from(v) {
                    Ok(port) => self.output(port, *max_len, last),
                    Err(_) => self.note(&format!("output port {v} is out of range")),
                }
            }
            Action::Controller(c) => {
                let (reason, id, max_len, userdata) =
                    (c.reason, c.controller_id, c.max_len, c.userdata.clone());
                self.controller(reason, id, max_len, userdata);
            }
            Action::SetQueue { .. } | Action::PopQueue => exact(wc, fields::SKB_PRIORITY),
            Action::Resubmit { in_port, table, ct } => {
                if *ct {
                    self.note("resubmit(ct) needs connection tracking: not supported");
                    self.drop(DropReason::Unsupported);
                    return true;
                }
                let in_port = if *in_port == OFPP_IN_PORT {
                    self.in_port()
                } else {
                    *in_port
                };
                let t = match table {
                    Some(t) if *t != 255 => *t,
                    _ => self.table_id,
                };
                let deepens = t <= self.table_id;
                self.xlate_table(in_port, t, deepens, last);
            }
            Action::GotoTable { table } => {
                let in_port = self.in_port();
                self.xlate_table(in_port, *table, *table <= self.table_id, last);
            }
            Action::SetVlanVid {
                vid,
                push_if_needed,
                ..
            } => {
                wc.set(
                    fields::VLAN_TCI,
                    wc.get(fields::VLAN_TCI) | u128::from(0x0fff | VLAN_CFI),
                );
                if flow.vlan_tci() & VLAN_CFI != 0 || *push_if_needed {
                    if flow.vlan_tpid() == 0 {
                        flow.set_vlan_tpid(0x8100);
                    }
                    flow.set_vlan_tci((flow.vlan_tci() & !0x0fff) | (vid & 0x0fff) | VLAN_CFI);
                }
            }
            Action::SetVlanPcp {
                pcp,
                push_if_needed,
                ..
            } => {
                wc.set(
                    fields::VLAN_TCI,
                    wc.get(fields::VLAN_TCI) | u128::from(0xe000 | VLAN_CFI),
                );
                if flow.vlan_tci() & VLAN_CFI != 0 || *push_if_needed {
                    if flow.vlan_tpid() == 0 {
                        flow.set_vlan_tpid(0x8100);
                    }
                    let pcp = u16::from(*pcp & 7) << 13;
                    flow.set_vlan_tci((flow.vlan_tci() & !0xe000) | pcp | VLAN_CFI);
                }
            }
            Action::PopVlan => pop_vlan(flow, wc),
            Action::PushVlan { ethertype } => {
                push_vlan(flow, wc);
                flow.set_vlan_tpid(*ethertype);
                flow.set_vlan_tci(VLAN_CFI);
            }
            Action::SetEthSrc(mac) => {
                exact(wc, fields::DL_SRC);
                flow.set_dl_src(*mac);
            }
            Action::SetEthDst(mac) => {
                exact(wc, fields::DL_DST);
                flow.set_dl_dst(*mac);
            }
            Action::SetIpv4Src(addr) | Action::SetIpv4Dst(addr) => {
                if flow.dl_type() == ETH_TYPE_IP {
                    exact(wc, fields::NW_PROTO);
                    if matches!(a, Action::SetIpv4Src(_)) {
                        exact(wc, fields::NW_SRC);
                        flow.set_nw_src(*addr);
                    } else {
                        exact(wc, fields::NW_DST);
                        flow.set_nw_dst(*addr);
                    }
                }
            }
            Action::SetIpDscp(dscp) => {
                if is_ip_any(flow) {
                    exact(wc, fields::NW_PROTO);
                    wc.set(fields::NW_TOS, wc.get(fields::NW_TOS) | 0xfc);
                    flow.set_nw_tos((flow.nw_tos() & !0xfc) | (dscp & 0xfc));
                }
            }
            Action::SetIpEcn(ecn) => {
                if is_ip_any(flow) {
                    exact(wc, fields::NW_PROTO);
                    wc.set(fields::NW_TOS, wc.get(fields::NW_TOS) | 0x03);
                    flow.set_nw_tos((flow.nw_tos() & !0x03) | (ecn & 0x03));
                }
            }
            Action::SetIpTtl(ttl) => {
                if is_ip_any(flow) {
                    exact(wc, fields::NW_PROTO);
                    exact(wc, fields::NW_TTL);
                    flow.set_nw_ttl(*ttl);
                }
            }
            Action::SetL4SrcPort { port, .. } | Action::SetL4DstPort { port, .. } => {
                if is_ip_any(flow) && flow.nw_frag() & FRAG_LATER == 0 {
                    exact(wc, fields::NW_PROTO);
                    if matches!(a, Action::SetL4SrcPort { .. }) {
                        exact(wc, fields::TP_SRC);
                        flow.set_tp_src(*port);
                    } else {
                        exact(wc, fields::TP_DST);
                        flow.set_tp_dst(*port);
                    }
                }
            }
            Action::SetField(fw) | Action::Load(fw) => self.set_field(fw),
            Action::Move { src, dst } => {
                if prereq_ok_wc(flow, src.field.prereq, wc)
                    && prereq_ok_wc(flow, dst.field.prereq, wc)
                {
                    let v = read_subfield(flow, wc, src);
                    write_subfield(flow, wc, dst, v);
                } else {
                    self.note("unmet prerequisites, move ignored");
                }
            }
            Action::DecTtl { controller_ids } => {
                exact(wc, fields::NW_TTL);
                exact(wc, fields::NW_PROTO);
                if is_ip_any(flow) {
                    if flow.nw_ttl() > 1 {
                        flow.set_nw_ttl(flow.nw_ttl() - 1);
                    } else {
                        let ids = controller_ids.clone().unwrap_or_else(|| vec![0]);
                        for id in ids {
                            self.controller(PacketInReason::InvalidTtl, id, u16::MAX, Vec::new());
                        }
                        let v = if self.flow.dl_type() == ETH_TYPE_IP {
                            4
                        } else {
                            6
                        };
                        self.note(&format!("IPv{v} decrement TTL exception"));
                        self.drop(DropReason::InvalidTtl);
                        return false;
                    }
                }
            }
            Action::SetTunnel { tun_id, .. } => flow.set_tun_id(*tun_id),
            Action::FinTimeout { .. } => exact(wc, fields::NW_PROTO),
            Action::Note(_) | Action::Meter { .. } | Action::Sample(_) => {}
            Action::Conjunction { .. } => self.note("executing no-op conjunction action"),
            Action::Exit => self.exit = true,
            Action::CtClear => {
                for f in [
                    fields::CT_STATE,
                    fields::CT_ZONE,
                    fields::CT_MARK,
                    fields::CT_LABEL,
                    fields::CT_NW_PROTO,
                    fields::CT_NW_SRC,
                    fields::CT_NW_DST,
                    fields::CT_TP_SRC,
                    fields::CT_TP_DST,
                ] {
                    flow.set(f, 0);
                }
            }
            Action::Clone(inner) => {
                if !last {
                    self.commit();
                }
                let saved_flow = self.flow;
                let saved_set = std::mem::take(&mut self.action_set);
                self.do_actions(inner, true);
                if self.error.is_none() && !self.exit {
                    self.run_action_set();
                }
                self.flow = saved_flow;
                self.action_set = saved_set;
            }
            Action::ClearActions => {
                self.action_set.clear();
                flow.set_actset_output(u32::from(OFPP_UNSET));
            }
            Action::WriteActions(inner) => {
                for a in inner {
                    if let Action::Output { port, .. } = a {
                        flow.set_actset_output(u32::from(*port));
                    }
                }
                self.action_set.extend(inner.iter().cloned());
            }
            Action::WriteMetadata { value, mask } => {
                flow.set_metadata((flow.metadata() & !mask) | (value & mask));
            }
            _ => {
                self.note("action not supported yet, skipped");
                self.drop(DropReason::Unsupported);
            }
        }
        true
    }

    /// True if `a` changes the packet, so that a new version may be mirrored again (OVS
    /// master's `reset_mirror_ctx`).
    fn modifies_packet(&self, a: &Action) -> bool {
        let f = &self.flow;
        match a {
            Action::PopVlan
            | Action::PushVlan { .. }
            | Action::SetEthSrc(_)
            | Action::SetEthDst(_)
            | Action::PushMpls { .. }
            | Action::PopMpls { .. }
            | Action::SetMplsLabel(_)
            | Action::SetMplsTc(_)
            | Action::SetMplsTtl(_)
            | Action::DecMplsTtl
            | Action::DecTtl { .. }
            | Action::SetVlanVid { .. }
            | Action::SetVlanPcp { .. } => true,
            Action::SetField(fw) | Action::Load(fw) => {
                usize::from(fw.field.key.word) >= packet::key::STAGES[1].start
                    && openflow::flow_match::prereq_ok(f, fw.field.prereq)
            }
            Action::SetIpv4Src(_) | Action::SetIpv4Dst(_) => f.dl_type() == ETH_TYPE_IP,
            Action::SetIpDscp(_) | Action::SetIpEcn(_) | Action::SetIpTtl(_) => is_ip_any(f),
            Action::SetL4SrcPort { .. } | Action::SetL4DstPort { .. } => {
                is_ip_any(f) && f.nw_frag() & FRAG_LATER == 0
            }
            _ => false,
        }
    }

    /// `set_field`/`load`: OVS `mf_set_flow_value_masked` after the prerequisite check.
    fn set_field(&mut self, fw: &FieldWrite) {
        let f: &Field = fw.field;
        if !prereq_ok_wc(&self.flow, f.prereq, &mut self.wc) {
            let name = f.name;
            self.note(&format!(
                "unmet prerequisites for {name}, set_field ignored"
            ));
            return;
        }
        // The field's own rules (dl_vlan sets the tag-present bit, ip_dscp is shifted...) as
        // key bits: the value and mask a match on the written bits would have.
        let mut m = Match::catch_all();
        m.set_field(f, fw.value, fw.mask);
        let (mut kv, mut km) = (*m.value(), *m.mask());
        if km.is_zero() && fw.mask != 0 {
            // A partial write of a field matches cannot mask: write the raw bits.
            km = FlowKey::default();
            km.set(f.key, fw.mask);
            kv = FlowKey::default();
            kv.set(f.key, fw.value & fw.mask);
        }
        if f.id == FieldId::VlanVid
            && fw.value & u128::from(VLAN_CFI) != 0
            && self.flow.vlan_tpid() == 0
        {
            self.flow.set_vlan_tpid(0x8100);
        }
        for ((w, v), (m, fl)) in self
            .wc
            .words
            .iter_mut()
            .zip(kv.words.iter())
            .zip(km.words.iter().zip(self.flow.words.iter_mut()))
        {
            *w |= m;
            *fl = (*fl & !m) | (v & m);
        }
        if usize::from(f.key.word) >= packet::key::STAGES[2].start {
            exact(&mut self.wc, fields::NW_PROTO);
        }
    }

    fn commit(&mut self) {
        commit(
            &self.flow,
            &mut self.base,
            &self.orig,
            self.vlans_touched,
            &mut self.wc,
            &mut self.out,
        );
    }

    /// OVS `xlate_output_action`.
    fn output(&mut self, port: u16, max_len: u16, last: bool) {
        let in_port = self.in_port();
        match port {
            OFPP_IN_PORT => self.compose_output(in_port, last),
            OFPP_TABLE => self.xlate_table(in_port, 0, true, false),
            OFPP_NORMAL => self.normal(last),
            OFPP_FLOOD => self.flood(false, last),
            OFPP_ALL => self.flood(true, last),
            OFPP_CONTROLLER => {
                let reason = if self.in_action_set {
                    PacketInReason::ActionSet
                } else {
                    PacketInReason::Action
                };
                self.controller(reason, 0, max_len, Vec::new());
            }
            OFPP_NONE => {}
            _ if port == in_port => self.note("skipping output to input port"),
            _ => self.compose_output(port, last),
        }
    }

    /// OVS `compose_output_action__`.
    fn compose_output(&mut self, ofport: u16, last: bool) {
        let Some(p) = self.port(ofport).cloned() else {
            self.note(&format!("Nonexistent output port {}", format_port(ofport)));
            self.drop(DropReason::NoPort);
            return;
        };
        if p.flags.no_forward {
            self.note("OFPPC_NO_FWD set, skipping output");
            self.drop(DropReason::NoForward);
            return;
        }
        if let PortKind::Patch { .. } = p.kind {
            self.patch_output(&p, last);
            return;
        }
        match p.dp_port {
            Some(dp) => {
                self.commit();
                self.out.push(DpAction::Output(dp));
                self.mirror_egress(&p);
            }
            None => {
                self.note("port has no datapath port");
                self.drop(DropReason::NoPort);
            }
        }
    }

    /// OVS `flood_packets`: every port of the bridge but the input port (and, for FLOOD,
    /// ports with `no-flood`), in layout order.
    fn flood(&mut self, all: bool, last: bool) {
        let in_port = self.in_port();
        let ports: Vec<u16> = self
            .sw
            .ports(&self.bridge)
            .unwrap_or(&[])
            .iter()
            .filter(|p| p.ofport != in_port && (all || !p.flags.no_flood))
            .map(|p| p.ofport)
            .collect();
        let n = ports.len();
        for (i, p) in ports.into_iter().enumerate() {
            self.compose_output(p, last && i + 1 == n);
        }
    }

    /// A packet-in: commit, then a `userspace(controller(..))` action and an event.
    fn controller(&mut self, reason: PacketInReason, id: u16, max_len: u16, userdata: Vec<u8>) {
        self.commit();
        let code = match reason {
            PacketInReason::NoMatch => 0,
            // OVS: an action of a table-miss rule is an explicit miss (OFPR_EXPLICIT_MISS).
            PacketInReason::Action if self.rule_is_table_miss => 6,
            PacketInReason::Action => 1,
            PacketInReason::InvalidTtl => 2,
            PacketInReason::ActionSet => 3,
            PacketInReason::Group => 4,
            PacketInReason::PacketOut => 5,
        };
        let cookie = if self.rule_cookie == 0 {
            "0".to_string()
        } else {
            format!("{:#x}", self.rule_cookie)
        };
        // OVS sends nothing for a translation without side effects (a plain trace), and
        // allocates a recirculation id per packet-in state; ids here count from 1.
        let dont_send = u8::from(!self.opts.learn);
        self.n_recirc += 1;
        let recirc = self.n_recirc;
        self.out.push(DpAction::Userspace(format!(
            "pid=0,controller(reason={code},dont_send={dont_send},continuation=0,\
             recirc_id={recirc},rule_cookie={cookie},controller_id={id},max_len={max_len})"
        )));
        self.controller.push(ControllerEvent {
            bridge: self.bridge.clone(),
            reason,
            controller_id: id,
            max_len,
            table: self.table_id,
            cookie: self.rule_cookie,
            userdata,
        });
    }

    /// OVS `patch_port_output`: continue on the peer bridge, then restore.
    fn patch_output(&mut self, p: &PortLayout, last: bool) {
        let Some((peer_bridge, peer_ofport)) = patch_peer(self.sw.layout(), p) else {
            self.note("patch port without a peer");
            self.drop(DropReason::NoPort);
            return;
        };
        if !last {
            self.commit();
        }
        let saved_flow = self.flow;
        let saved_set = std::mem::take(&mut self.action_set);
        let saved_mirrors = self.mirrors;
        if peer_bridge != self.bridge {
            self.mirrors = 0;
        }
        let saved_bridge = std::mem::replace(&mut self.bridge, peer_bridge);
        let saved_tunnel_wc: Vec<u64> = self.wc.words[23..26].to_vec();
        let flow = &mut self.flow;
        flow.set_in_port(u32::from(peer_ofport));
        flow.set_metadata(0);
        for r in fields::REGS {
            flow.set(r, 0);
        }
        for w in 23..26 {
            flow.words[w] = 0;
        }
        flow.set_actset_output(u32::from(OFPP_UNSET));
        for f in [
            fields::CT_STATE,
            fields::CT_ZONE,
            fields::CT_MARK,
            fields::CT_LABEL,
            fields::CT_NW_PROTO,
            fields::CT_NW_SRC,
            fields::CT_NW_DST,
            fields::CT_TP_SRC,
            fields::CT_TP_DST,
        ] {
            flow.set(f, 0);
        }
        self.note_bridge();
        let receives = !self.port(peer_ofport).is_some_and(|q| q.flags.no_receive);
        if receives {
            self.patch_depth += 1;
            self.xlate_table(peer_ofport, 0, true, last);
            if self.error.is_none() && !self.exit {
                self.run_action_set();
            }
            self.patch_depth -= 1;
        } else {
            self.note("OFPPC_NO_RECV set on the peer, dropping packet");
            self.drop(DropReason::NoReceive);
        }
        self.wc.words[23..26].copy_from_slice(&saved_tunnel_wc);
        self.bridge = saved_bridge;
        self.mirrors = saved_mirrors;
        self.flow = saved_flow;
        self.action_set = saved_set;
        // As in OVS, the peer's exit and errors do not propagate back (they were counted).
        self.exit = false;
        self.error = None;
    }

    /// OVS `xlate_action_set`: runs the action set in OpenFlow's order.
    fn run_action_set(&mut self) {
        let set = std::mem::take(&mut self.action_set);
        let list = action_set_order(&set);
        if list.is_empty() {
            return;
        }
        self.note("Executing action set:");
        self.in_action_set = true;
        self.indent += 1;
        self.do_actions(&list, true);
        self.indent -= 1;
        self.in_action_set = false;
    }
}

/// True if `a` may write the VLAN fields (word 31 of the key).
fn writes_vlans(a: &Action) -> bool {
    let vlan_word = fields::VLAN_TCI.word;
    match a {
        Action::PopVlan
        | Action::PushVlan { .. }
        | Action::SetVlanVid { .. }
        | Action::SetVlanPcp { .. } => true,
        Action::SetField(fw) | Action::Load(fw) => fw.field.key.word == vlan_word,
        Action::Move { dst, .. } => dst.field.key.word == vlan_word,
        _ => false,
    }
}

/// OVS `ofpacts_execute_action_set`: the action set as an action list.
pub fn action_set_order(set: &[Action]) -> Vec<Action> {
    let last = |pred: &dyn Fn(&Action) -> bool| set.iter().rev().find(|a| pred(a)).cloned();
    let mut out = Vec::new();
    let singles: [&dyn Fn(&Action) -> bool; 6] = [
        &|a| matches!(a, Action::PopVlan),
        &|a| matches!(a, Action::PopMpls { .. }),
        &|a| matches!(a, Action::PushMpls { .. }),
        &|a| matches!(a, Action::PushVlan { .. }),
        &|a| matches!(a, Action::DecTtl { .. }),
        &|a| matches!(a, Action::DecMplsTtl),
    ];
    for p in singles {
        out.extend(last(p));
    }
    out.extend(set.iter().filter(|a| is_set_or_move(a)).cloned());
    out.extend(last(&|a| matches!(a, Action::SetQueue { .. })));
    let term = last(&|a| matches!(a, Action::Group { .. }))
        .or_else(|| last(&|a| matches!(a, Action::Output { .. })))
        .or_else(|| last(&|a| matches!(a, Action::Resubmit { .. })))
        .or_else(|| last(&|a| matches!(a, Action::Ct(_))));
    match term {
        Some(t) => {
            out.push(t);
            out
        }
        None => Vec::new(),
    }
}

fn is_set_or_move(a: &Action) -> bool {
    matches!(
        a,
        Action::SetField(_)
            | Action::Load(_)
            | Action::Move { .. }
            | Action::SetEthSrc(_)
            | Action::SetEthDst(_)
            | Action::SetIpv4Src(_)
            | Action::SetIpv4Dst(_)
            | Action::SetIpDscp(_)
            | Action::SetIpEcn(_)
            | Action::SetIpTtl(_)
            | Action::SetL4SrcPort { .. }
            | Action::SetL4DstPort { .. }
            | Action::SetMplsLabel(_)
            | Action::SetMplsTc(_)
            | Action::SetMplsTtl(_)
            | Action::SetTunnel { .. }
            | Action::SetVlanVid { .. }
            | Action::SetVlanPcp { .. }
    )
}

/// OVS `flow_pop_vlan`.
fn pop_vlan(flow: &mut FlowKey, wc: &mut FlowKey) {
    if flow.vlan_tci() & VLAN_CFI == 0 {
        return;
    }
    if flow.vlan_tci1() & VLAN_CFI != 0 {
        exact(wc, fields::VLAN_TCI1);
        exact(wc, fields::VLAN_TPID1);
    }
    flow.set_vlan_tci(flow.vlan_tci1());
    flow.set_vlan_tpid(flow.vlan_tpid1());
    flow.set_vlan_tci1(0);
    flow.set_vlan_tpid1(0);
}

/// OVS `flow_push_vlan_uninit`: makes room for a new outer tag (a third tag is lost, as
/// with OVS's two-tag key).
fn push_vlan(flow: &mut FlowKey, wc: &mut FlowKey) {
    if flow.vlan_tci() & VLAN_CFI != 0 {
        exact(wc, fields::VLAN_TCI);
        exact(wc, fields::VLAN_TPID);
        if flow.vlan_tci1() & VLAN_CFI != 0 {
            exact(wc, fields::VLAN_TCI1);
            exact(wc, fields::VLAN_TPID1);
        }
    }
    flow.set_vlan_tci1(flow.vlan_tci());
    flow.set_vlan_tpid1(flow.vlan_tpid());
    flow.set_vlan_tci(0);
    flow.set_vlan_tpid(0);
}

/// The storage of a subfield's field, and the bit range inside it.
fn subfield_bits(s: &Subfield) -> Option<(KeyField, u32, u32)> {
    let (ofs, n) = (u32::from(s.ofs), u32::from(s.n_bits));
    (ofs + n <= u32::from(s.field.key.width)).then_some((s.field.key, ofs, n))
}

/// Reads a subfield and marks its bits in `wc` (bits outside the field's storage read 0).
fn read_subfield(flow: &FlowKey, wc: &mut FlowKey, s: &Subfield) -> u128 {
    match subfield_bits(s) {
        Some((kf, ofs, n)) => {
            wc.set_bits(kf, ofs, n, u128::MAX);
            flow.get_bits(kf, ofs, n).unwrap_or(0)
        }
        None => 0,
    }
}

/// Writes a subfield and marks its bits in `wc`.
fn write_subfield(flow: &mut FlowKey, wc: &mut FlowKey, s: &Subfield, v: u128) {
    if let Some((kf, ofs, n)) = subfield_bits(s) {
        wc.set_bits(kf, ofs, n, u128::MAX);
        flow.set_bits(kf, ofs, n, v);
    }
}
