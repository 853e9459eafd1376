//! The OpenFlow field registry: every field a flow can match or an action can write, with
//! its ovs-ofctl name, NXM/OXM names, width, maskability, prerequisites, text format and
//! where it lives in a [`FlowKey`](packet::key::FlowKey).
//!
//! This is the analogue of OVS's `mf_field` table (meta-flow). The facts (names, widths,
//! maskability, prerequisites, the protocols that can express each field) follow OVS's
//! `meta-flow.h` field by field, because flows are pasted from OVS material and must mean
//! the same thing here.
//!
//! A field's storage is a [`KeyField`]: a bit range of one key word, or two whole words for
//! 128-bit fields. Several OpenFlow fields share storage, as in OVS: `tcp_src`, `udp_src`,
//! `sctp_src` and (in its low 8 bits) `icmp_type` are all `tp_src`; `arp_spa` is `nw_src`;
//! `nd_sll` is `arp_sha`; `ip_dscp` and `nw_ecn` are the high 6 and low 2 bits of `nw_tos`.
//! Prerequisites keep such fields apart.
//!
//! # Example
//! ```
//! use openflow::field::{Field, FieldId};
//! let f = Field::by_name("nw_src").unwrap();
//! assert_eq!(f.id, FieldId::Ipv4Src);
//! assert_eq!(f.name, "ip_src");
//! assert_eq!(Field::by_name("NXM_NX_REG3").unwrap().name, "reg3");
//! ```

use std::collections::HashMap;
use std::sync::LazyLock;

use packet::key::{fields, KeyField};

pub use crate::protocols::Protocols;

/// What a field needs matched before it may be matched (OVS `enum mf_prereqs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Prereq {
    /// No prerequisite.
    None,
    /// Any Ethernet packet (always true for us).
    Ethernet,
    /// `dl_type` 0x0806 (ARP) or 0x8035 (RARP).
    Arp,
    /// A VLAN tag present (`vlan_tci` CFI bit matched as 1).
    VlanVid,
    /// `dl_type=0x0800`.
    Ipv4,
    /// `dl_type=0x86dd`.
    Ipv6,
    /// `dl_type` 0x0800 or 0x86dd.
    IpAny,
    /// `dl_type` 0x8847 or 0x8848.
    Mpls,
    /// IPv4 or IPv6 with `nw_proto=6`.
    Tcp,
    /// IPv4 or IPv6 with `nw_proto=17`.
    Udp,
    /// IPv4 or IPv6 with `nw_proto=132`.
    Sctp,
    /// IPv4 with `nw_proto=1`.
    Icmpv4,
    /// IPv6 with `nw_proto=58`.
    Icmpv6,
    /// ICMPv6 with `icmp_type` 135 or 136 and `icmp_code=0`.
    Nd,
    /// ICMPv6 with `icmp_type=135` and `icmp_code=0`.
    NdSolicit,
    /// ICMPv6 with `icmp_type=136` and `icmp_code=0`.
    NdAdvert,
    /// Connection tracking state matched as tracked and not invalid.
    Ct,
}

/// How a field's value is written in ovs-ofctl text (OVS `enum mf_string`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// Decimal (hex accepted on input with `0x`).
    Decimal,
    /// Hexadecimal with `0x`.
    Hex,
    /// `xx:xx:xx:xx:xx:xx`.
    Ethernet,
    /// Dotted quad.
    Ipv4,
    /// RFC 5952.
    Ipv6,
    /// OpenFlow 1.0 port number or name (`LOCAL`, `IN_PORT`, ...).
    OfpPort,
    /// OpenFlow 1.1+ 32-bit port number or name; stored in the key as the 16-bit form.
    OfpPortOxm,
    /// `no`, `yes`, `first`, `later`, `not_later`.
    Frag,
    /// Tunnel flags (`+oam` ...).
    TunnelFlags,
    /// TCP flags (`+syn-ack` or hex).
    TcpFlags,
    /// Conntrack state (`+trk-new` ...).
    CtState,
}

/// Identity of a field, for code that treats fields specially.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum FieldId {
    DpHash,
    RecircId,
    TunId,
    TunSrc,
    TunDst,
    TunFlags,
    TunTtl,
    TunTos,
    TunGbpId,
    TunGbpFlags,
    Metadata,
    InPort,
    InPortOxm,
    ActsetOutput,
    SkbPriority,
    PktMark,
    CtState,
    CtZone,
    CtMark,
    CtLabel,
    CtNwProto,
    CtNwSrc,
    CtNwDst,
    CtTpSrc,
    CtTpDst,
    /// `reg0`..`reg31`.
    Reg(u8),
    /// `xreg0`..`xreg15`.
    XReg(u8),
    /// `xxreg0`..`xxreg7`.
    XXReg(u8),
    EthSrc,
    EthDst,
    EthType,
    VlanTci,
    DlVlan,
    VlanVid,
    DlVlanPcp,
    VlanPcp,
    MplsLabel,
    MplsTc,
    MplsBos,
    MplsTtl,
    Ipv4Src,
    Ipv4Dst,
    Ipv6Src,
    Ipv6Dst,
    Ipv6Label,
    IpProto,
    /// `nw_tos`: the DSCP bits in place (OVS `MFF_IP_DSCP`).
    NwTos,
    /// `ip_dscp`: the DSCP shifted down (OVS `MFF_IP_DSCP_SHIFTED`).
    IpDscp,
    IpEcn,
    IpTtl,
    IpFrag,
    ArpOp,
    ArpSpa,
    ArpTpa,
    ArpSha,
    ArpTha,
    TcpSrc,
    TcpDst,
    TcpFlags,
    UdpSrc,
    UdpDst,
    SctpSrc,
    SctpDst,
    Icmpv4Type,
    Icmpv4Code,
    Icmpv6Type,
    Icmpv6Code,
    NdTarget,
    NdSll,
    NdTll,
}

/// One OpenFlow field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// Identity.
    pub id: FieldId,
    /// The ovs-ofctl name (what ovs-ofctl prints).
    pub name: &'static str,
    /// Another accepted name (`dl_src` for `eth_src`, `nw_src` for `ip_src`).
    pub alias: Option<&'static str>,
    /// The Nicira extensible match name, if any (`NXM_OF_IP_SRC`).
    pub nxm: Option<&'static str>,
    /// The OXM name, if any (`OXM_OF_IPV4_SRC`).
    pub oxm: Option<&'static str>,
    /// Width in bits on the wire (may exceed the storage width, e.g. `arp_op`).
    pub n_bits: u16,
    /// Where the value lives in the key.
    pub key: KeyField,
    /// True if arbitrary bitwise masks are allowed (OVS `MFM_FULLY`).
    pub maskable: bool,
    /// Text format.
    pub format: Format,
    /// Prerequisite.
    pub prereq: Prereq,
    /// Protocols that can express an exact match, a CIDR-style mask, an arbitrary mask.
    pub usable: [Protocols; 3],
    /// True if actions may write it (`set_field`, `load`, `move` destination).
    pub writable: bool,
    /// True if prefix tracking (tries) may be configured on it.
    pub prefix_lookup: bool,
}

/// A sub-range of a key field: `width` bits starting `shift` bits above the field's own
/// least significant bit.
const fn sub(f: KeyField, shift: u8, width: u8) -> KeyField {
    KeyField {
        name: f.name,
        word: f.word,
        shift: f.shift + shift,
        width,
    }
}

#[allow(clippy::too_many_arguments)]
const fn f(
    id: FieldId,
    name: &'static str,
    alias: Option<&'static str>,
    nxm: Option<&'static str>,
    oxm: Option<&'static str>,
    n_bits: u16,
    key: KeyField,
    maskable: bool,
    format: Format,
    prereq: Prereq,
    usable: [Protocols; 3],
    writable: bool,
    prefix_lookup: bool,
) -> Field {
    Field {
        id,
        name,
        alias,
        nxm,
        oxm,
        n_bits,
        key,
        maskable,
        format,
        prereq,
        usable,
        writable,
        prefix_lookup,
    }
}

/// The fixed (non-register) fields, in OVS's order: one field a line.
#[rustfmt::skip]
static FIXED: &[Field] = &[
    f(FieldId::DpHash, "dp_hash", None, Some("NXM_NX_DP_HASH"), Some("NXOXM_ET_DP_HASH"), 32, fields::DP_HASH, true, Format::Hex, Prereq::None, [Protocols::NXM_OXM, Protocols::NXM_OXM, Protocols::NXM_OXM], false, false),
    f(FieldId::RecircId, "recirc_id", None, Some("NXM_NX_RECIRC_ID"), None, 32, fields::RECIRC_ID, false, Format::Decimal, Prereq::None, [Protocols::NXM_OXM, Protocols::NONE, Protocols::NONE], false, false),
    f(FieldId::TunId, "tun_id", Some("tunnel_id"), Some("NXM_NX_TUN_ID"), Some("OXM_OF_TUNNEL_ID"), 64, fields::TUN_ID, true, Format::Hex, Prereq::None, [Protocols::NXM_OXM, Protocols::NXM_OXM, Protocols::NXM_OXM], true, true),
    f(FieldId::TunSrc, "tun_src", None, Some("NXM_NX_TUN_IPV4_SRC"), None, 32, fields::TUN_SRC, true, Format::Ipv4, Prereq::None, [Protocols::NXM_OXM, Protocols::NXM_OXM, Protocols::NXM_OXM], true, true),
    f(FieldId::TunDst, "tun_dst", None, Some("NXM_NX_TUN_IPV4_DST"), None, 32, fields::TUN_DST, true, Format::Ipv4, Prereq::None, [Protocols::NXM_OXM, Protocols::NXM_OXM, Protocols::NXM_OXM], true, true),
    f(FieldId::TunFlags, "tun_flags", None, Some("NXM_NX_TUN_FLAGS"), None, 1, sub(fields::TUN_FLAGS, 0, 1), true, Format::TunnelFlags, Prereq::None, [Protocols::NXM_OXM, Protocols::NXM_OXM, Protocols::NXM_OXM], true, false),
    f(FieldId::TunTtl, "tun_ttl", None, None, None, 8, fields::TUN_TTL, false, Format::Decimal, Prereq::None, [Protocols::NONE, Protocols::NONE, Protocols::NONE], false, false),
    f(FieldId::TunTos, "tun_tos", None, None, None, 8, fields::TUN_TOS, false, Format::Decimal, Prereq::None, [Protocols::NONE, Protocols::NONE, Protocols::NONE], false, false),
    f(FieldId::TunGbpId, "tun_gbp_id", None, Some("NXM_NX_TUN_GBP_ID"), None, 16, fields::TUN_GBP_ID, true, Format::Decimal, Prereq::None, [Protocols::NXM_OXM, Protocols::NXM_OXM, Protocols::NXM_OXM], true, false),
    f(FieldId::TunGbpFlags, "tun_gbp_flags", None, Some("NXM_NX_TUN_GBP_FLAGS"), None, 8, fields::TUN_GBP_FLAGS, true, Format::Hex, Prereq::None, [Protocols::NXM_OXM, Protocols::NXM_OXM, Protocols::NXM_OXM], true, false),
    f(FieldId::Metadata, "metadata", None, None, Some("OXM_OF_METADATA"), 64, fields::METADATA, true, Format::Hex, Prereq::None, [Protocols::NXM_OXM_OF11, Protocols::NXM_OXM_OF11, Protocols::NXM_OXM_OF11], true, false),
    f(FieldId::InPort, "in_port", None, Some("NXM_OF_IN_PORT"), None, 16, sub(fields::IN_PORT, 0, 16), false, Format::OfpPort, Prereq::None, [Protocols::ANY, Protocols::NONE, Protocols::NONE], true, false),
    f(FieldId::InPortOxm, "in_port_oxm", None, None, Some("OXM_OF_IN_PORT"), 32, sub(fields::IN_PORT, 0, 16), false, Format::OfpPortOxm, Prereq::None, [Protocols::NXM_OXM_OF11, Protocols::NONE, Protocols::NONE], true, false),
    f(FieldId::ActsetOutput, "actset_output", None, None, Some("ONFOXM_ET_ACTSET_OUTPUT"), 32, sub(fields::ACTSET_OUTPUT, 0, 16), false, Format::OfpPortOxm, Prereq::None, [Protocols::NXM_OXM, Protocols::NONE, Protocols::NONE], false, false),
    f(FieldId::SkbPriority, "skb_priority", None, None, None, 32, fields::SKB_PRIORITY, false, Format::Hex, Prereq::None, [Protocols::NONE, Protocols::NONE, Protocols::NONE], false, false),
    f(FieldId::PktMark, "pkt_mark", None, Some("NXM_NX_PKT_MARK"), None, 32, fields::PKT_MARK, true, Format::Hex, Prereq::None, [Protocols::NXM_OXM, Protocols::NXM_OXM, Protocols::NXM_OXM], true, false),
    f(FieldId::CtState, "ct_state", None, Some("NXM_NX_CT_STATE"), None, 32, fields::CT_STATE, true, Format::CtState, Prereq::None, [Protocols::NXM_OXM, Protocols::NXM_OXM, Protocols::NXM_OXM], false, false),
    f(FieldId::CtZone, "ct_zone", None, Some("NXM_NX_CT_ZONE"), None, 16, fields::CT_ZONE, false, Format::Hex, Prereq::None, [Protocols::NXM_OXM, Protocols::NONE, Protocols::NONE], false, false),
    f(FieldId::CtMark, "ct_mark", None, Some("NXM_NX_CT_MARK"), None, 32, fields::CT_MARK, true, Format::Hex, Prereq::None, [Protocols::NXM_OXM, Protocols::NXM_OXM, Protocols::NXM_OXM], true, false),
    f(FieldId::CtLabel, "ct_label", None, Some("NXM_NX_CT_LABEL"), None, 128, fields::CT_LABEL, true, Format::Hex, Prereq::None, [Protocols::NXM_OXM, Protocols::NXM_OXM, Protocols::NXM_OXM], true, false),
    f(FieldId::CtNwProto, "ct_nw_proto", None, Some("NXM_NX_CT_NW_PROTO"), None, 8, fields::CT_NW_PROTO, false, Format::Decimal, Prereq::Ct, [Protocols::NXM_OXM, Protocols::NONE, Protocols::NONE], false, false),
    f(FieldId::CtNwSrc, "ct_nw_src", None, Some("NXM_NX_CT_NW_SRC"), None, 32, fields::CT_NW_SRC, true, Format::Ipv4, Prereq::Ct, [Protocols::NXM_OXM, Protocols::NXM_OXM, Protocols::NXM_OXM], false, true),
    f(FieldId::CtNwDst, "ct_nw_dst", None, Some("NXM_NX_CT_NW_DST"), None, 32, fields::CT_NW_DST, true, Format::Ipv4, Prereq::Ct, [Protocols::NXM_OXM, Protocols::NXM_OXM, Protocols::NXM_OXM], false, true),
    f(FieldId::CtTpSrc, "ct_tp_src", None, Some("NXM_NX_CT_TP_SRC"), None, 16, fields::CT_TP_SRC, true, Format::Decimal, Prereq::Ct, [Protocols::NXM_OXM, Protocols::NXM_OXM, Protocols::NXM_OXM], false, false),
    f(FieldId::CtTpDst, "ct_tp_dst", None, Some("NXM_NX_CT_TP_DST"), None, 16, fields::CT_TP_DST, true, Format::Decimal, Prereq::Ct, [Protocols::NXM_OXM, Protocols::NXM_OXM, Protocols::NXM_OXM], false, false),
    f(FieldId::EthSrc, "eth_src", Some("dl_src"), Some("NXM_OF_ETH_SRC"), Some("OXM_OF_ETH_SRC"), 48, fields::DL_SRC, true, Format::Ethernet, Prereq::Ethernet, [Protocols::ANY, Protocols::NXM_OXM_OF11, Protocols::NXM_OXM_OF11], true, false),
    f(FieldId::EthDst, "eth_dst", Some("dl_dst"), Some("NXM_OF_ETH_DST"), Some("OXM_OF_ETH_DST"), 48, fields::DL_DST, true, Format::Ethernet, Prereq::Ethernet, [Protocols::ANY, Protocols::NXM_OXM_OF11, Protocols::NXM_OXM_OF11], true, false),
    f(FieldId::EthType, "eth_type", Some("dl_type"), Some("NXM_OF_ETH_TYPE"), Some("OXM_OF_ETH_TYPE"), 16, fields::DL_TYPE, false, Format::Hex, Prereq::Ethernet, [Protocols::ANY, Protocols::NONE, Protocols::NONE], false, false),
    f(FieldId::VlanTci, "vlan_tci", None, Some("NXM_OF_VLAN_TCI"), None, 16, fields::VLAN_TCI, true, Format::Hex, Prereq::Ethernet, [Protocols::ANY, Protocols::NXM_OXM, Protocols::NXM_OXM], true, false),
    f(FieldId::DlVlan, "dl_vlan", None, None, None, 12, sub(fields::VLAN_TCI, 0, 12), false, Format::Decimal, Prereq::Ethernet, [Protocols::ANY, Protocols::NONE, Protocols::NONE], true, false),
    f(FieldId::VlanVid, "vlan_vid", None, None, Some("OXM_OF_VLAN_VID"), 12, sub(fields::VLAN_TCI, 0, 12), true, Format::Decimal, Prereq::Ethernet, [Protocols::ANY, Protocols::NXM_OXM, Protocols::NXM_OXM], true, false),
    f(FieldId::DlVlanPcp, "dl_vlan_pcp", None, None, None, 3, sub(fields::VLAN_TCI, 13, 3), false, Format::Decimal, Prereq::Ethernet, [Protocols::ANY, Protocols::NONE, Protocols::NONE], true, false),
    f(FieldId::VlanPcp, "vlan_pcp", None, None, Some("OXM_OF_VLAN_PCP"), 3, sub(fields::VLAN_TCI, 13, 3), false, Format::Decimal, Prereq::VlanVid, [Protocols::ANY, Protocols::NONE, Protocols::NONE], true, false),
    f(FieldId::MplsLabel, "mpls_label", None, None, Some("OXM_OF_MPLS_LABEL"), 20, sub(fields::MPLS_LSE0, 12, 20), false, Format::Decimal, Prereq::Mpls, [Protocols::NXM_OXM_OF11, Protocols::NONE, Protocols::NONE], true, false),
    f(FieldId::MplsTc, "mpls_tc", None, None, Some("OXM_OF_MPLS_TC"), 3, sub(fields::MPLS_LSE0, 9, 3), false, Format::Decimal, Prereq::Mpls, [Protocols::NXM_OXM_OF11, Protocols::NONE, Protocols::NONE], true, false),
    f(FieldId::MplsBos, "mpls_bos", None, None, Some("OXM_OF_MPLS_BOS"), 1, sub(fields::MPLS_LSE0, 8, 1), false, Format::Decimal, Prereq::Mpls, [Protocols::NXM_OXM, Protocols::NONE, Protocols::NONE], false, false),
    f(FieldId::MplsTtl, "mpls_ttl", None, Some("NXM_NX_MPLS_TTL"), None, 8, sub(fields::MPLS_LSE0, 0, 8), false, Format::Decimal, Prereq::Mpls, [Protocols::NXM_OXM, Protocols::NONE, Protocols::NONE], true, false),
    f(FieldId::Ipv4Src, "ip_src", Some("nw_src"), Some("NXM_OF_IP_SRC"), Some("OXM_OF_IPV4_SRC"), 32, fields::NW_SRC, true, Format::Ipv4, Prereq::Ipv4, [Protocols::ANY, Protocols::ANY, Protocols::NXM_OXM_OF11], true, true),
    f(FieldId::Ipv4Dst, "ip_dst", Some("nw_dst"), Some("NXM_OF_IP_DST"), Some("OXM_OF_IPV4_DST"), 32, fields::NW_DST, true, Format::Ipv4, Prereq::Ipv4, [Protocols::ANY, Protocols::ANY, Protocols::NXM_OXM_OF11], true, true),
    f(FieldId::Ipv6Src, "ipv6_src", None, Some("NXM_NX_IPV6_SRC"), Some("OXM_OF_IPV6_SRC"), 128, fields::IPV6_SRC, true, Format::Ipv6, Prereq::Ipv6, [Protocols::NXM_OXM, Protocols::NXM_OXM, Protocols::NXM_OXM], true, true),
    f(FieldId::Ipv6Dst, "ipv6_dst", None, Some("NXM_NX_IPV6_DST"), Some("OXM_OF_IPV6_DST"), 128, fields::IPV6_DST, true, Format::Ipv6, Prereq::Ipv6, [Protocols::NXM_OXM, Protocols::NXM_OXM, Protocols::NXM_OXM], true, true),
    f(FieldId::Ipv6Label, "ipv6_label", None, Some("NXM_NX_IPV6_LABEL"), Some("OXM_OF_IPV6_FLABEL"), 20, fields::IPV6_LABEL, true, Format::Hex, Prereq::Ipv6, [Protocols::NXM_OXM, Protocols::NXM_OXM, Protocols::NXM_OXM], true, false),
    f(FieldId::IpProto, "nw_proto", Some("ip_proto"), Some("NXM_OF_IP_PROTO"), Some("OXM_OF_IP_PROTO"), 8, fields::NW_PROTO, false, Format::Decimal, Prereq::IpAny, [Protocols::ANY, Protocols::NONE, Protocols::NONE], false, false),
    f(FieldId::NwTos, "nw_tos", None, Some("NXM_OF_IP_TOS"), None, 8, fields::NW_TOS, false, Format::Decimal, Prereq::IpAny, [Protocols::ANY, Protocols::NONE, Protocols::NONE], true, false),
    f(FieldId::IpDscp, "ip_dscp", None, None, Some("OXM_OF_IP_DSCP"), 6, sub(fields::NW_TOS, 2, 6), false, Format::Decimal, Prereq::IpAny, [Protocols::ANY, Protocols::NONE, Protocols::NONE], true, false),
    f(FieldId::IpEcn, "nw_ecn", Some("ip_ecn"), Some("NXM_NX_IP_ECN"), Some("OXM_OF_IP_ECN"), 2, sub(fields::NW_TOS, 0, 2), false, Format::Decimal, Prereq::IpAny, [Protocols::NXM_OXM_OF11, Protocols::NONE, Protocols::NONE], true, false),
    f(FieldId::IpTtl, "nw_ttl", None, Some("NXM_NX_IP_TTL"), None, 8, fields::NW_TTL, false, Format::Decimal, Prereq::IpAny, [Protocols::NXM_OXM, Protocols::NONE, Protocols::NONE], true, false),
    f(FieldId::IpFrag, "ip_frag", Some("nw_frag"), Some("NXM_NX_IP_FRAG"), None, 2, sub(fields::NW_FRAG, 0, 2), true, Format::Frag, Prereq::IpAny, [Protocols::NXM_OXM, Protocols::NXM_OXM, Protocols::NXM_OXM], false, false),
    f(FieldId::ArpOp, "arp_op", None, Some("NXM_OF_ARP_OP"), Some("OXM_OF_ARP_OP"), 16, fields::NW_PROTO, false, Format::Decimal, Prereq::Arp, [Protocols::ANY, Protocols::NONE, Protocols::NONE], true, false),
    f(FieldId::ArpSpa, "arp_spa", None, Some("NXM_OF_ARP_SPA"), Some("OXM_OF_ARP_SPA"), 32, fields::NW_SRC, true, Format::Ipv4, Prereq::Arp, [Protocols::ANY, Protocols::ANY, Protocols::NXM_OXM_OF11], true, false),
    f(FieldId::ArpTpa, "arp_tpa", None, Some("NXM_OF_ARP_TPA"), Some("OXM_OF_ARP_TPA"), 32, fields::NW_DST, true, Format::Ipv4, Prereq::Arp, [Protocols::ANY, Protocols::ANY, Protocols::NXM_OXM_OF11], true, false),
    f(FieldId::ArpSha, "arp_sha", None, Some("NXM_NX_ARP_SHA"), Some("OXM_OF_ARP_SHA"), 48, fields::ARP_SHA, true, Format::Ethernet, Prereq::Arp, [Protocols::NXM_OXM, Protocols::NXM_OXM, Protocols::NXM_OXM], true, false),
    f(FieldId::ArpTha, "arp_tha", None, Some("NXM_NX_ARP_THA"), Some("OXM_OF_ARP_THA"), 48, fields::ARP_THA, true, Format::Ethernet, Prereq::Arp, [Protocols::NXM_OXM, Protocols::NXM_OXM, Protocols::NXM_OXM], true, false),
    f(FieldId::TcpSrc, "tcp_src", Some("tp_src"), Some("NXM_OF_TCP_SRC"), Some("OXM_OF_TCP_SRC"), 16, fields::TP_SRC, true, Format::Decimal, Prereq::Tcp, [Protocols::ANY, Protocols::NXM_OXM, Protocols::NXM_OXM], true, false),
    f(FieldId::TcpDst, "tcp_dst", Some("tp_dst"), Some("NXM_OF_TCP_DST"), Some("OXM_OF_TCP_DST"), 16, fields::TP_DST, true, Format::Decimal, Prereq::Tcp, [Protocols::ANY, Protocols::NXM_OXM, Protocols::NXM_OXM], true, false),
    f(FieldId::TcpFlags, "tcp_flags", None, Some("NXM_NX_TCP_FLAGS"), Some("ONFOXM_ET_TCP_FLAGS"), 12, sub(fields::TCP_FLAGS, 0, 12), true, Format::TcpFlags, Prereq::Tcp, [Protocols::NXM_OXM, Protocols::NXM_OXM, Protocols::NXM_OXM], false, false),
    f(FieldId::UdpSrc, "udp_src", None, Some("NXM_OF_UDP_SRC"), Some("OXM_OF_UDP_SRC"), 16, fields::TP_SRC, true, Format::Decimal, Prereq::Udp, [Protocols::ANY, Protocols::NXM_OXM, Protocols::NXM_OXM], true, false),
    f(FieldId::UdpDst, "udp_dst", None, Some("NXM_OF_UDP_DST"), Some("OXM_OF_UDP_DST"), 16, fields::TP_DST, true, Format::Decimal, Prereq::Udp, [Protocols::ANY, Protocols::NXM_OXM, Protocols::NXM_OXM], true, false),
    f(FieldId::SctpSrc, "sctp_src", None, None, Some("OXM_OF_SCTP_SRC"), 16, fields::TP_SRC, true, Format::Decimal, Prereq::Sctp, [Protocols::NXM_OXM_OF11, Protocols::NXM_OXM, Protocols::NXM_OXM], true, false),
    f(FieldId::SctpDst, "sctp_dst", None, None, Some("OXM_OF_SCTP_DST"), 16, fields::TP_DST, true, Format::Decimal, Prereq::Sctp, [Protocols::NXM_OXM_OF11, Protocols::NXM_OXM, Protocols::NXM_OXM], true, false),
    f(FieldId::Icmpv4Type, "icmp_type", None, Some("NXM_OF_ICMP_TYPE"), Some("OXM_OF_ICMPV4_TYPE"), 8, sub(fields::TP_SRC, 0, 8), false, Format::Decimal, Prereq::Icmpv4, [Protocols::ANY, Protocols::NONE, Protocols::NONE], true, false),
    f(FieldId::Icmpv4Code, "icmp_code", None, Some("NXM_OF_ICMP_CODE"), Some("OXM_OF_ICMPV4_CODE"), 8, sub(fields::TP_DST, 0, 8), false, Format::Decimal, Prereq::Icmpv4, [Protocols::ANY, Protocols::NONE, Protocols::NONE], true, false),
    f(FieldId::Icmpv6Type, "icmpv6_type", None, Some("NXM_NX_ICMPV6_TYPE"), Some("OXM_OF_ICMPV6_TYPE"), 8, sub(fields::TP_SRC, 0, 8), false, Format::Decimal, Prereq::Icmpv6, [Protocols::NXM_OXM, Protocols::NONE, Protocols::NONE], true, false),
    f(FieldId::Icmpv6Code, "icmpv6_code", None, Some("NXM_NX_ICMPV6_CODE"), Some("OXM_OF_ICMPV6_CODE"), 8, sub(fields::TP_DST, 0, 8), false, Format::Decimal, Prereq::Icmpv6, [Protocols::NXM_OXM, Protocols::NONE, Protocols::NONE], true, false),
    f(FieldId::NdTarget, "nd_target", None, Some("NXM_NX_ND_TARGET"), Some("OXM_OF_IPV6_ND_TARGET"), 128, fields::ND_TARGET, true, Format::Ipv6, Prereq::Nd, [Protocols::NXM_OXM, Protocols::NXM_OXM, Protocols::NXM_OXM], true, false),
    f(FieldId::NdSll, "nd_sll", None, Some("NXM_NX_ND_SLL"), Some("OXM_OF_IPV6_ND_SLL"), 48, fields::ARP_SHA, true, Format::Ethernet, Prereq::NdSolicit, [Protocols::NXM_OXM, Protocols::NXM_OXM, Protocols::NXM_OXM], true, false),
    f(FieldId::NdTll, "nd_tll", None, Some("NXM_NX_ND_TLL"), Some("OXM_OF_IPV6_ND_TLL"), 48, fields::ARP_THA, true, Format::Ethernet, Prereq::NdAdvert, [Protocols::NXM_OXM, Protocols::NXM_OXM, Protocols::NXM_OXM], true, false),
];

const REG_NXM: [&str; 16] = [
    "NXM_NX_REG0",
    "NXM_NX_REG1",
    "NXM_NX_REG2",
    "NXM_NX_REG3",
    "NXM_NX_REG4",
    "NXM_NX_REG5",
    "NXM_NX_REG6",
    "NXM_NX_REG7",
    "NXM_NX_REG8",
    "NXM_NX_REG9",
    "NXM_NX_REG10",
    "NXM_NX_REG11",
    "NXM_NX_REG12",
    "NXM_NX_REG13",
    "NXM_NX_REG14",
    "NXM_NX_REG15",
];
const REG_OXM: [&str; 16] = [
    "NXOXM_ET_REG16",
    "NXOXM_ET_REG17",
    "NXOXM_ET_REG18",
    "NXOXM_ET_REG19",
    "NXOXM_ET_REG20",
    "NXOXM_ET_REG21",
    "NXOXM_ET_REG22",
    "NXOXM_ET_REG23",
    "NXOXM_ET_REG24",
    "NXOXM_ET_REG25",
    "NXOXM_ET_REG26",
    "NXOXM_ET_REG27",
    "NXOXM_ET_REG28",
    "NXOXM_ET_REG29",
    "NXOXM_ET_REG30",
    "NXOXM_ET_REG31",
];
const XREG_OXM: [&str; 16] = [
    "OXM_OF_PKT_REG0",
    "OXM_OF_PKT_REG1",
    "OXM_OF_PKT_REG2",
    "OXM_OF_PKT_REG3",
    "OXM_OF_PKT_REG4",
    "OXM_OF_PKT_REG5",
    "OXM_OF_PKT_REG6",
    "OXM_OF_PKT_REG7",
    "OXM_OF_PKT_REG8",
    "OXM_OF_PKT_REG9",
    "OXM_OF_PKT_REG10",
    "OXM_OF_PKT_REG11",
    "OXM_OF_PKT_REG12",
    "OXM_OF_PKT_REG13",
    "OXM_OF_PKT_REG14",
    "OXM_OF_PKT_REG15",
];
const XXREG_NAMES: [&str; 8] = [
    "NXM_NX_XXREG0",
    "NXM_NX_XXREG1",
    "NXM_NX_XXREG2",
    "NXM_NX_XXREG3",
    "NXOXM_ET_XXREG4",
    "NXOXM_ET_XXREG5",
    "NXOXM_ET_XXREG6",
    "NXOXM_ET_XXREG7",
];

fn register_fields() -> Vec<Field> {
    let u = [Protocols::NXM_OXM; 3];
    let mut v = Vec::with_capacity(56);
    for (i, kf) in fields::REGS.iter().enumerate() {
        let (nxm, oxm) = if i < 16 {
            (Some(REG_NXM[i]), None)
        } else {
            (None, Some(REG_OXM[i - 16]))
        };
        #[allow(clippy::cast_possible_truncation)]
        v.push(f(
            FieldId::Reg(i as u8),
            kf.name,
            None,
            nxm,
            oxm,
            32,
            *kf,
            true,
            Format::Hex,
            Prereq::None,
            u,
            true,
            false,
        ));
    }
    for (i, kf) in fields::XREGS.iter().enumerate() {
        #[allow(clippy::cast_possible_truncation)]
        v.push(f(
            FieldId::XReg(i as u8),
            kf.name,
            None,
            None,
            Some(XREG_OXM[i]),
            64,
            *kf,
            true,
            Format::Hex,
            Prereq::None,
            u,
            true,
            false,
        ));
    }
    for (i, kf) in fields::XXREGS.iter().enumerate() {
        let (nxm, oxm) = if i < 4 {
            (Some(XXREG_NAMES[i]), None)
        } else {
            (None, Some(XXREG_NAMES[i]))
        };
        #[allow(clippy::cast_possible_truncation)]
        v.push(f(
            FieldId::XXReg(i as u8),
            kf.name,
            None,
            nxm,
            oxm,
            128,
            *kf,
            true,
            Format::Hex,
            Prereq::None,
            u,
            true,
            false,
        ));
    }
    v
}

static ALL: LazyLock<Vec<Field>> = LazyLock::new(|| {
    let mut v = FIXED.to_vec();
    v.extend(register_fields());
    v
});

static BY_NAME: LazyLock<HashMap<&'static str, usize>> = LazyLock::new(|| {
    let mut m = HashMap::new();
    for (i, fld) in ALL.iter().enumerate() {
        for n in [Some(fld.name), fld.alias, fld.nxm, fld.oxm]
            .into_iter()
            .flatten()
        {
            m.entry(n).or_insert(i);
        }
    }
    m
});

impl Field {
    /// Every field: the fixed ones, then `reg0..31`, `xreg0..15`, `xxreg0..7`.
    pub fn all() -> &'static [Field] {
        &ALL
    }

    /// Looks a field up by its ovs-ofctl name, alias, NXM or OXM name (case-sensitive, as
    /// OVS).
    pub fn by_name(name: &str) -> Option<&'static Field> {
        BY_NAME.get(name).map(|i| &ALL[*i])
    }

    /// The field with identity `id`.
    pub fn by_id(id: FieldId) -> &'static Field {
        // Every `FieldId` has exactly one entry (checked by a test).
        ALL.iter().find(|f| f.id == id).unwrap_or(&FIXED[0])
    }

    /// The name OVS prints in `NXM_..[]`-style subfield syntax (`load:...->NXM_NX_REG0[]`):
    /// the NXM name if there is one, else the OXM name, else the plain name.
    pub fn subfield_name(&self) -> &'static str {
        self.nxm.or(self.oxm).unwrap_or(self.name)
    }

    /// All ones over the field's storage width.
    pub fn max_value(&self) -> u128 {
        self.key.max_value()
    }

    /// The field's size in bytes in OVS's `union mf_value` (`mf_field.n_bytes`): the width
    /// a value or mask is parsed into and that an exact mask must fill. It can exceed the
    /// meaningful bits (`mpls_label` is a `be32` with 20 used bits, `tun_flags` a `be16`).
    pub fn n_bytes(&self) -> u16 {
        match self.id {
            FieldId::MplsLabel | FieldId::Ipv6Label => 4,
            FieldId::TunFlags | FieldId::TcpFlags | FieldId::VlanVid => 2,
            _ => self.n_bits.div_ceil(8),
        }
    }

    /// All ones over [`Field::n_bytes`]: the exact-match mask as ovs-ofctl parses it.
    pub fn full_mask(&self) -> u128 {
        let bits = u32::from(self.n_bytes()) * 8;
        if bits >= 128 {
            u128::MAX
        } else {
            (1u128 << bits) - 1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_names_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for fld in Field::all() {
            assert!(seen.insert(fld.name), "duplicate {}", fld.name);
        }
    }

    #[test]
    fn registry_lookup_by_every_name() {
        assert_eq!(
            Field::by_name("dl_src").map(|f| f.id),
            Some(FieldId::EthSrc)
        );
        assert_eq!(
            Field::by_name("NXM_OF_ETH_SRC").map(|f| f.id),
            Some(FieldId::EthSrc)
        );
        assert_eq!(
            Field::by_name("reg31").map(|f| f.id),
            Some(FieldId::Reg(31))
        );
        assert_eq!(
            Field::by_name("NXOXM_ET_REG16").map(|f| f.id),
            Some(FieldId::Reg(16))
        );
        assert_eq!(
            Field::by_name("OXM_OF_PKT_REG7").map(|f| f.id),
            Some(FieldId::XReg(7))
        );
        assert_eq!(
            Field::by_name("NXOXM_ET_XXREG4").map(|f| f.id),
            Some(FieldId::XXReg(4))
        );
        assert_eq!(
            Field::by_name("tp_src").map(|f| f.id),
            Some(FieldId::TcpSrc)
        );
        assert!(Field::by_name("no_such_field").is_none());
    }

    #[test]
    fn registry_storage_fits_width() {
        for fld in Field::all() {
            assert!(u16::from(fld.key.width) <= fld.n_bits, "{}", fld.name);
            assert_eq!(Field::by_id(fld.id).name, fld.name);
        }
    }
}
