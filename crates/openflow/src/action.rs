//! OpenFlow actions and instructions (the analogue of OVS's `ofpact`s).
//!
//! Instructions (goto_table, write_actions, clear_actions, write_metadata, meter) are
//! variants of the same enum, as OVS keeps them in one list: a flow's "actions" is one
//! `Vec<Action>` where instruction variants come after the apply-actions part (the parser
//! enforces OpenFlow 1.1's order: meter, apply-actions, clear_actions, write_actions,
//! write_metadata, goto_table).
//!
//! # One variant per OVS `ofpact`
//!
//! Each variant is what OVS keeps after parsing, not what was typed: `mod_nw_src:1.2.3.4`
//! and `set_field:1.2.3.4->ip_src` are different variants (as `OFPACT_SET_IPV4_SRC` and
//! `OFPACT_SET_FIELD` are in OVS) because they print differently, while `strip_vlan` and
//! `pop_vlan` are one variant, [`Action::PopVlan`], whose spelling depends only on the
//! protocol version it is printed for. A few variants carry facts taken from the flow's
//! match when the action was checked (`flow_has_vlan`, `ip_proto`): OVS needs them to
//! encode the action for OpenFlow 1.1+, and so does the printer
//! ([`crate::ofctl::actions::format_actions`]).
//!
//! Values are host-order integers in the units of the field they write (an IPv4 address
//! is a `u32`, an Ethernet address the low 48 bits of a `u64`), as in [`crate::field`].
//!
//! # Executing
//!
//! Execution belongs to the pipeline; this module only offers the pieces every executor
//! needs the same way: [`FieldWrite::apply`] (what `set_field` and `load` do to a key,
//! including `vlan_vid`'s present bit) and [`read_subfield`] / [`write_subfield`] (`move`,
//! `output:REG`, `push`/`pop`, `multipath`, `bundle_load`).
//!
//! # Not supported yet
//!
//! `encap`, `decap`, `dec_nsh_ttl`, `delete_field` and `unroll_xlate` parse to an error
//! that says so.
//!
//! # Example
//! ```
//! use openflow::action::{Action, OfVersion};
//! use openflow::field::Protocols;
//! use openflow::ofctl::actions::{format_actions, parse_actions, ActionContext};
//! use openflow::Match;
//!
//! let m = Match::catch_all();
//! let ctx = ActionContext::new(&m, Protocols::ANY);
//! let parsed = parse_actions("strip_vlan,resubmit(,3),output:2", &ctx).unwrap();
//! assert_eq!(parsed.actions[0], Action::PopVlan);
//! assert_eq!(
//!     format_actions(&parsed.actions, OfVersion::Of13),
//!     "pop_vlan,resubmit(,3),output:2"
//! );
//! ```

use std::hash::{Hash, Hasher};
use std::net::{Ipv4Addr, Ipv6Addr};

use packet::key::{FlowKey, KeyField};

use crate::field::{Field, FieldId};
use crate::subfield::Subfield;

/// One action or instruction.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Action {
    /// `output:PORT` (OpenFlow 1.0 16-bit port numbers; reserved ports as `OFPP_*`).
    Output {
        /// The port.
        port: u16,
        /// Bytes to send to the controller when `port` is `CONTROLLER` (0 = all).
        max_len: u16,
    },
    /// `output:SUBFIELD`: output to the port number held in a register.
    #[doc(alias = "output_reg")]
    OutputReg {
        /// Where the port number is.
        src: Subfield,
        /// Bytes to send when the port is the controller.
        max_len: u16,
    },
    /// `output(port=P,max_len=N)`: output a packet truncated to `max_len` bytes.
    #[doc(alias = "output_trunc")]
    OutputTrunc {
        /// The port.
        port: u16,
        /// Maximum bytes to send (at least 14).
        max_len: u32,
    },
    /// `controller(...)` with any non-default parameter (a plain `controller` is an
    /// [`Action::Output`] to `CONTROLLER`).
    Controller(Box<Controller>),
    /// `enqueue(PORT,QUEUE)`.
    Enqueue {
        /// The port.
        port: u16,
        /// The queue on that port.
        queue: u32,
    },
    /// `set_queue:QUEUE`.
    SetQueue {
        /// The queue.
        queue: u32,
    },
    /// `pop_queue`: back to the queue the packet came in with.
    PopQueue,
    /// `group:ID`.
    Group {
        /// The group.
        group_id: u32,
    },
    /// `resubmit(PORT,TABLE[,ct])`.
    Resubmit {
        /// The in_port to look up with (`IN_PORT` = unchanged).
        in_port: u16,
        /// The table (`None` = the current one).
        table: Option<u8>,
        /// Look up with the conntrack original direction tuple.
        ct: bool,
    },
    /// `bundle(...)` / `bundle_load(...)`.
    Bundle(Box<Bundle>),
    /// `multipath(...)`.
    Multipath(Box<Multipath>),
    /// `mod_vlan_vid:VID` (`push_if_needed`) or `set_vlan_vid:VID`.
    #[doc(alias = "mod_vlan_vid")]
    SetVlanVid {
        /// The VLAN id (12 bits).
        vid: u16,
        /// Push a tag first if the packet has none (`mod_vlan_vid`).
        push_if_needed: bool,
        /// Whether the flow's match guarantees a tag (filled in by the check).
        flow_has_vlan: bool,
    },
    /// `mod_vlan_pcp:PCP` (`push_if_needed`) or `set_vlan_pcp:PCP`.
    #[doc(alias = "mod_vlan_pcp")]
    SetVlanPcp {
        /// The priority (3 bits).
        pcp: u8,
        /// Push a tag first if the packet has none (`mod_vlan_pcp`).
        push_if_needed: bool,
        /// Whether the flow's match guarantees a tag (filled in by the check).
        flow_has_vlan: bool,
    },
    /// `strip_vlan` (OpenFlow 1.0) / `pop_vlan` (1.1+): pops the outer VLAN tag.
    #[doc(alias = "strip_vlan")]
    PopVlan,
    /// `push_vlan:ETHERTYPE` (0x8100 or 0x88a8).
    PushVlan {
        /// TPID of the new tag.
        ethertype: u16,
    },
    /// `mod_dl_src:MAC`.
    #[doc(alias = "mod_dl_src")]
    SetEthSrc(u64),
    /// `mod_dl_dst:MAC`.
    #[doc(alias = "mod_dl_dst")]
    SetEthDst(u64),
    /// `mod_nw_src:IP`.
    #[doc(alias = "mod_nw_src")]
    SetIpv4Src(u32),
    /// `mod_nw_dst:IP`.
    #[doc(alias = "mod_nw_dst")]
    SetIpv4Dst(u32),
    /// `mod_nw_tos:TOS`: the DSCP bits in place (a multiple of 4).
    #[doc(alias = "mod_nw_tos")]
    SetIpDscp(u8),
    /// `mod_nw_ecn:ECN` (2 bits).
    #[doc(alias = "mod_nw_ecn")]
    SetIpEcn(u8),
    /// `mod_nw_ttl:TTL`.
    #[doc(alias = "mod_nw_ttl")]
    SetIpTtl(u8),
    /// `mod_tp_src:PORT`.
    #[doc(alias = "mod_tp_src")]
    SetL4SrcPort {
        /// The port.
        port: u16,
        /// The flow's `nw_proto` when checked (decides `tcp_src`/`udp_src`/`sctp_src`).
        ip_proto: u8,
    },
    /// `mod_tp_dst:PORT`.
    #[doc(alias = "mod_tp_dst")]
    SetL4DstPort {
        /// The port.
        port: u16,
        /// The flow's `nw_proto` when checked.
        ip_proto: u8,
    },
    /// `set_field:VALUE[/MASK]->FIELD`.
    #[doc(alias = "set_field")]
    SetField(FieldWrite),
    /// `load:VALUE->DST[..]` (OVS's `NXAST_REG_LOAD`; the same write as a
    /// [`Action::SetField`], printed differently).
    #[doc(alias = "load")]
    Load(FieldWrite),
    /// `move:SRC[..]->DST[..]`.
    #[doc(alias = "move")]
    Move {
        /// Source bits.
        src: Subfield,
        /// Destination bits (as wide as `src`).
        dst: Subfield,
    },
    /// `push:SUBFIELD`: pushes the bits on the action stack.
    #[doc(alias = "push")]
    StackPush(Subfield),
    /// `pop:SUBFIELD`: pops the top of the action stack into the bits.
    #[doc(alias = "pop")]
    StackPop(Subfield),
    /// `debug_recirc`: forces a recirculation (testing aid).
    DebugRecirc,
    /// `debug_slow`: forces the slow path (testing aid).
    DebugSlow,
    /// `dec_ttl` or `dec_ttl(ID,...)`.
    DecTtl {
        /// Controller ids to notify when the TTL expires; `None` for plain `dec_ttl`.
        controller_ids: Option<Vec<u16>>,
    },
    /// `set_mpls_label(LABEL)` (20 bits).
    SetMplsLabel(u32),
    /// `set_mpls_tc(TC)` (3 bits).
    SetMplsTc(u8),
    /// `set_mpls_ttl(TTL)`.
    SetMplsTtl(u8),
    /// `dec_mpls_ttl`.
    DecMplsTtl,
    /// `push_mpls:ETHERTYPE`.
    PushMpls {
        /// 0x8847 or 0x8848.
        ethertype: u16,
    },
    /// `pop_mpls:ETHERTYPE`.
    PopMpls {
        /// Ethertype of the payload.
        ethertype: u16,
    },
    /// `set_tunnel:ID` / `set_tunnel64:ID`.
    SetTunnel {
        /// The tunnel id.
        tun_id: u64,
        /// Written as `set_tunnel64`.
        wide: bool,
    },
    /// `fin_timeout(idle_timeout=N,hard_timeout=N)`.
    FinTimeout {
        /// Idle timeout after FIN/RST (0 = unchanged).
        idle_timeout: u16,
        /// Hard timeout after FIN/RST (0 = unchanged).
        hard_timeout: u16,
    },
    /// `conjunction(ID,K/N)`.
    Conjunction {
        /// Conjunction id.
        id: u32,
        /// Clause index, 0-based (printed 1-based).
        clause: u8,
        /// Number of clauses (2..=64).
        n_clauses: u8,
    },
    /// `note:HEX...`: bytes as given (printed padded as OVS does on the wire).
    Note(Vec<u8>),
    /// `exit`.
    Exit,
    /// `sample(...)`.
    Sample(Box<Sample>),
    /// `ct(...)`.
    Ct(Box<Ct>),
    /// `ct_clear`.
    CtClear,
    /// `clone(ACTIONS)`.
    Clone(Vec<Action>),
    /// `learn(...)`: adds or modifies a flow when executed.
    Learn(Box<Learn>),
    /// `check_pkt_larger(LEN)->DST`.
    CheckPktLarger {
        /// Length to compare with.
        pkt_len: u16,
        /// One-bit destination.
        dst: Subfield,
    },
    /// `meter:ID` (an instruction before OpenFlow 1.5).
    Meter {
        /// The meter.
        meter_id: u32,
    },
    /// `clear_actions` instruction.
    ClearActions,
    /// `write_actions(ACTIONS)` instruction.
    WriteActions(Vec<Action>),
    /// `write_metadata:VALUE[/MASK]` instruction.
    WriteMetadata {
        /// New metadata bits.
        value: u64,
        /// Which bits to write.
        mask: u64,
    },
    /// `goto_table:TABLE` instruction.
    GotoTable {
        /// The next table.
        table: u8,
    },
}

impl Hash for Action {
    // Subfields hold `&'static Field`, which is not `Hash`; the variant is a valid (if
    // coarse) hash because equal actions always share it.
    fn hash<H: Hasher>(&self, state: &mut H) {
        std::mem::discriminant(self).hash(state);
    }
}

impl Action {
    /// True for the OpenFlow 1.1+ instructions (everything else is an apply-action).
    pub fn is_instruction(&self) -> bool {
        matches!(
            self,
            Action::Meter { .. }
                | Action::ClearActions
                | Action::WriteActions(_)
                | Action::WriteMetadata { .. }
                | Action::GotoTable { .. }
        )
    }
}

/// A write of `value` under `mask` to `field` (`set_field` and `load`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldWrite {
    /// The field written.
    pub field: &'static Field,
    /// The new bits; bits outside `mask` are not written (`set_field` keeps them as typed,
    /// as OVS does, because OpenFlow 1.0 and 1.1 send the value without the mask).
    pub value: u128,
    /// Which bits are written.
    pub mask: u128,
    /// Whether the flow's match guarantees a VLAN tag (filled in by the check; OVS needs it
    /// to encode a `vlan_tci` write for OpenFlow 1.1).
    pub flow_has_vlan: bool,
}

impl FieldWrite {
    /// Writes the bits under `mask` into `key` (what `set_field` and `load` do to a
    /// packet). A `vlan_vid` write also carries `OFPVID12_PRESENT` (0x1000), the CFI bit of
    /// `vlan_tci`, as in OVS.
    pub fn apply(&self, key: &mut FlowKey) {
        let kf = if self.field.id == FieldId::VlanVid {
            KeyField {
                width: 13,
                ..packet::key::fields::VLAN_TCI
            }
        } else {
            self.field.key
        };
        let mask = self.mask & kf.max_value();
        let old = key.get(kf);
        key.set(kf, (old & !mask) | (self.value & mask));
    }
}

/// Reads the bits of `sf` from `key`, right-aligned (the source of `move`, `output:REG`,
/// `push`, ...).
pub fn read_subfield(key: &FlowKey, sf: &Subfield) -> u128 {
    let v = key
        .get(sf.field.key)
        .checked_shr(u32::from(sf.ofs))
        .unwrap_or(0);
    if sf.n_bits >= 128 {
        v
    } else {
        v & ((1u128 << sf.n_bits) - 1)
    }
}

/// Writes the low `sf.n_bits` bits of `value` into the bits of `sf` in `key`.
pub fn write_subfield(key: &mut FlowKey, sf: &Subfield, value: u128) {
    let bits = if sf.n_bits >= 128 {
        u128::MAX
    } else {
        (1u128 << sf.n_bits) - 1
    };
    let mask = bits.checked_shl(u32::from(sf.ofs)).unwrap_or(0);
    let old = key.get(sf.field.key);
    let shifted = (value & bits).checked_shl(u32::from(sf.ofs)).unwrap_or(0);
    key.set(sf.field.key, (old & !mask) | (shifted & mask));
}

/// `controller(...)` parameters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Controller {
    /// Bytes of the packet to send (65535 = all).
    pub max_len: u16,
    /// Controller connection id (0 = all).
    pub controller_id: u16,
    /// The packet-in reason.
    pub reason: PacketInReason,
    /// Opaque bytes passed to the controller.
    pub userdata: Vec<u8>,
    /// Pause the pipeline until the controller resumes it.
    pub pause: bool,
    /// Meter to apply (`None` = no meter).
    pub meter_id: Option<u32>,
}

/// Packet-in reasons (OVS `enum ofp_packet_in_reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PacketInReason {
    /// `no_match`.
    NoMatch,
    /// `action`.
    Action,
    /// `invalid_ttl`.
    InvalidTtl,
    /// `action_set`.
    ActionSet,
    /// `group`.
    Group,
    /// `packet_out`.
    PacketOut,
}

impl PacketInReason {
    /// ovs-ofctl's name.
    pub fn as_str(self) -> &'static str {
        match self {
            PacketInReason::NoMatch => "no_match",
            PacketInReason::Action => "action",
            PacketInReason::InvalidTtl => "invalid_ttl",
            PacketInReason::ActionSet => "action_set",
            PacketInReason::Group => "group",
            PacketInReason::PacketOut => "packet_out",
        }
    }

    /// Parses ovs-ofctl's name.
    pub fn from_name(s: &str) -> Option<PacketInReason> {
        [
            PacketInReason::NoMatch,
            PacketInReason::Action,
            PacketInReason::InvalidTtl,
            PacketInReason::ActionSet,
            PacketInReason::Group,
            PacketInReason::PacketOut,
        ]
        .into_iter()
        .find(|r| r.as_str() == s)
    }
}

/// Fields hashed by `bundle` and `multipath` (OVS `enum nx_hash_fields`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HashFields {
    /// `eth_src`.
    EthSrc,
    /// `symmetric_l4`.
    SymmetricL4,
    /// `symmetric_l3l4`.
    SymmetricL3L4,
    /// `symmetric_l3l4+udp`.
    SymmetricL3L4Udp,
    /// `nw_src`.
    NwSrc,
    /// `nw_dst`.
    NwDst,
    /// `symmetric_l3`.
    SymmetricL3,
}

impl HashFields {
    const ALL: [HashFields; 7] = [
        HashFields::EthSrc,
        HashFields::SymmetricL4,
        HashFields::SymmetricL3L4,
        HashFields::SymmetricL3L4Udp,
        HashFields::NwSrc,
        HashFields::NwDst,
        HashFields::SymmetricL3,
    ];

    /// ovs-ofctl's name.
    pub fn as_str(self) -> &'static str {
        match self {
            HashFields::EthSrc => "eth_src",
            HashFields::SymmetricL4 => "symmetric_l4",
            HashFields::SymmetricL3L4 => "symmetric_l3l4",
            HashFields::SymmetricL3L4Udp => "symmetric_l3l4+udp",
            HashFields::NwSrc => "nw_src",
            HashFields::NwDst => "nw_dst",
            HashFields::SymmetricL3 => "symmetric_l3",
        }
    }

    /// Parses ovs-ofctl's name (case-insensitive, as OVS).
    pub fn from_name(s: &str) -> Option<HashFields> {
        HashFields::ALL
            .into_iter()
            .find(|h| h.as_str().eq_ignore_ascii_case(s))
    }
}

/// `bundle(...)` and `bundle_load(...)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bundle {
    /// Hashed fields.
    pub fields: HashFields,
    /// Hash basis.
    pub basis: u16,
    /// `true` for `hrw`, `false` for `active_backup`.
    pub hrw: bool,
    /// Destination of the chosen port (`bundle_load`), or `None` to output (`bundle`).
    pub dst: Option<Subfield>,
    /// Member ports.
    pub members: Vec<u16>,
}

/// Multipath link-selection algorithms (OVS `enum nx_mp_algorithm`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MultipathAlgorithm {
    /// `modulo_n`.
    ModuloN,
    /// `hash_threshold`.
    HashThreshold,
    /// `hrw`.
    Hrw,
    /// `iter_hash`.
    IterHash,
}

impl MultipathAlgorithm {
    /// ovs-ofctl's name.
    pub fn as_str(self) -> &'static str {
        match self {
            MultipathAlgorithm::ModuloN => "modulo_n",
            MultipathAlgorithm::HashThreshold => "hash_threshold",
            MultipathAlgorithm::Hrw => "hrw",
            MultipathAlgorithm::IterHash => "iter_hash",
        }
    }
}

/// `multipath(fields,basis,algorithm,n_links,arg,dst)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Multipath {
    /// Hashed fields.
    pub fields: HashFields,
    /// Hash basis.
    pub basis: u16,
    /// Algorithm.
    pub algorithm: MultipathAlgorithm,
    /// Number of links minus one.
    pub max_link: u16,
    /// Algorithm argument.
    pub arg: u32,
    /// Where the link number goes.
    pub dst: Subfield,
}

/// `learn(...)` parameters (OVS `struct ofpact_learn`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Learn {
    /// Table of the learned flow (default 1).
    pub table: u8,
    /// Idle timeout of the learned flow (0 = none).
    pub idle_timeout: u16,
    /// Hard timeout of the learned flow (0 = none).
    pub hard_timeout: u16,
    /// `fin_idle_timeout`.
    pub fin_idle_timeout: u16,
    /// `fin_hard_timeout`.
    pub fin_hard_timeout: u16,
    /// Priority of the learned flow (default 32768).
    pub priority: u16,
    /// Cookie of the learned flow.
    pub cookie: u64,
    /// `send_flow_rem`.
    pub send_flow_rem: bool,
    /// `delete_learned`: delete learned flows when this one goes.
    pub delete_learned: bool,
    /// Maximum number of learned flows (0 = no limit).
    pub limit: u32,
    /// One bit set to 1 if the flow was learned, 0 if the limit stopped it.
    pub result_dst: Option<Subfield>,
    /// What the learned flow matches and does.
    pub specs: Vec<LearnSpec>,
}

/// One part of a learned flow (OVS `struct ofpact_learn_spec`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LearnSpec {
    /// `dst` or `dst=src`: match `dst` on the value `src` has in this packet.
    MatchField {
        /// Field of the learned match.
        dst: Subfield,
        /// Where the value comes from (equal to `dst` for the short form).
        src: Subfield,
    },
    /// `dst=VALUE`: match `dst` on a constant.
    MatchImm {
        /// Field of the learned match.
        dst: Subfield,
        /// The constant (right-aligned to `dst`'s bits).
        value: u128,
    },
    /// `load:VALUE->dst`: the learned flow loads a constant.
    LoadImm {
        /// Destination of the learned load.
        dst: Subfield,
        /// The constant.
        value: u128,
    },
    /// `load:src->dst`: the learned flow loads the value `src` has in this packet.
    LoadField {
        /// Destination of the learned load.
        dst: Subfield,
        /// Where the value comes from.
        src: Subfield,
    },
    /// `output:src`: the learned flow outputs to the port `src` holds in this packet.
    Output {
        /// Where the port number comes from.
        src: Subfield,
    },
}

/// `sample(...)` parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    /// Packets sampled per 65535.
    pub probability: u16,
    /// IPFIX collector set.
    pub collector_set_id: u32,
    /// Observation domain id.
    pub obs_domain_id: SampleId,
    /// Observation point id.
    pub obs_point_id: SampleId,
    /// Sampling port (`NONE` = unset).
    pub sampling_port: u16,
    /// Direction.
    pub direction: SampleDirection,
}

/// An observation id: a constant or read from a subfield.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleId {
    /// A constant.
    Imm(u32),
    /// Read from a subfield (at most 32 bits).
    Field(Subfield),
}

/// `sample` direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SampleDirection {
    /// Decided by the datapath.
    Default,
    /// `ingress`.
    Ingress,
    /// `egress`.
    Egress,
}

/// `ct(...)` parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ct {
    /// `commit`.
    pub commit: bool,
    /// `force` (needs `commit`).
    pub force: bool,
    /// `table=N`: recirculate to this table.
    pub table: Option<u8>,
    /// `zone=N` or `zone=SUBFIELD`.
    pub zone: CtZone,
    /// `alg=ftp|tftp|PORT` (0 = none).
    pub alg: u16,
    /// `nat(...)`.
    pub nat: Option<Nat>,
    /// `exec(...)`: writes to ct_mark / ct_label.
    pub exec: Vec<Action>,
}

/// A conntrack zone: constant or from a subfield.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CtZone {
    /// A constant zone (0 = default).
    Imm(u16),
    /// Read from a 16-bit subfield.
    Field(Subfield),
}

/// `nat(...)` inside `ct`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Nat {
    /// `src` or `dst` translation, or `None` for plain `nat` (reverse an existing one).
    pub kind: Option<NatKind>,
    /// Address range, if given.
    pub addrs: Option<NatAddrs>,
    /// Port range (0 = none).
    pub port_min: u16,
    /// Upper port (0 = same as `port_min`).
    pub port_max: u16,
    /// `persistent`.
    pub persistent: bool,
    /// `hash`.
    pub hash: bool,
    /// `random`.
    pub random: bool,
}

/// Direction of a NAT.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NatKind {
    /// `src`.
    Src,
    /// `dst`.
    Dst,
}

/// A NAT address range (`max` equal to `min` for one address).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NatAddrs {
    /// IPv4.
    V4 {
        /// First address.
        min: Ipv4Addr,
        /// Last address.
        max: Ipv4Addr,
    },
    /// IPv6.
    V6 {
        /// First address.
        min: Ipv6Addr,
        /// Last address.
        max: Ipv6Addr,
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

#[cfg(test)]
mod tests {
    use packet::key::fields;

    use super::*;

    fn field(name: &str) -> &'static Field {
        Field::by_name(name).expect("known field")
    }

    #[test]
    fn field_write_sets_only_masked_bits() {
        let mut key = FlowKey::default();
        key.set(fields::REGS[0], 0xffff_0000);
        FieldWrite {
            field: field("reg0"),
            value: 0x0000_1234,
            mask: 0x0000_ffff,
            flow_has_vlan: false,
        }
        .apply(&mut key);
        assert_eq!(key.get(fields::REGS[0]), 0xffff_1234);
    }

    #[test]
    fn field_write_vlan_vid_sets_cfi() {
        let mut key = FlowKey::default();
        key.set_vlan_tci(0xe005);
        FieldWrite {
            field: field("vlan_vid"),
            value: 0x1007,
            mask: 0x1fff,
            flow_has_vlan: true,
        }
        .apply(&mut key);
        assert_eq!(key.vlan_tci(), 0xf007);
    }

    #[test]
    fn subfield_read_write_round_trip() {
        let mut key = FlowKey::default();
        let sf = Subfield {
            field: field("reg1"),
            ofs: 4,
            n_bits: 8,
        };
        write_subfield(&mut key, &sf, 0x1ab);
        assert_eq!(key.get(fields::REGS[1]), 0xab0);
        assert_eq!(read_subfield(&key, &sf), 0xab);
        let whole = Subfield {
            field: field("xxreg0"),
            ofs: 0,
            n_bits: 128,
        };
        write_subfield(&mut key, &whole, u128::MAX);
        assert_eq!(read_subfield(&key, &whole), u128::MAX);
    }
}
