//! `Match`: a value/mask pair over a [`FlowKey`] (the analogue of OVS's `struct match`).
//!
//! Invariant: `value & mask == value` (bits outside the mask are zero in the value). Every
//! constructor and setter keeps it, so two matches that accept the same packets compare
//! equal.
//!
//! # Setting fields
//!
//! [`Match::set_field`] is OVS's `mf_set`: it takes a field's value and mask in OVS units
//! (see [`crate::ofctl::value`]) and applies the field's own rules, which are not always
//! "write these bits":
//!
//! - `dl_vlan` and `dl_vlan_pcp`/`vlan_pcp` also match the VLAN-present (CFI) bit; `dl_vlan` with
//!   0xffff matches untagged packets; `vlan_vid` is the 12-bit VID plus the present bit.
//! - `nw_tos`, `ip_dscp` and `nw_ecn` are parts of one TOS byte (`ip_dscp` is shifted).
//! - `icmp_type`/`icmp_code` match all 16 bits of `tp_src`/`tp_dst`; `arp_op` is stored in
//!   `nw_proto`.
//! - `ip_frag` and `tun_flags` keep only their meaningful mask bits.
//!
//! It returns the protocols that can express the result (the field's exact, CIDR or
//! bitwise set), which is how ovs-ofctl computes a flow's usable protocols.
//!
//! # Prerequisites
//!
//! [`Match::check_prerequisites`] is OVS's strict `nx_pull_match` check: every constrained
//! bit must belong to a field whose prerequisite holds in the match (`tp_src` needs
//! `dl_type` IPv4/IPv6 and `nw_proto` 6, 17 or 132, ...). Shared storage is accepted if any
//! field living there is allowed (`nw_src` is `ip_src` for IPv4 and `arp_spa` for ARP).
//!
//! # Example
//! ```
//! use openflow::field::{Field, Protocols};
//! use openflow::Match;
//! let mut m = Match::catch_all();
//! let f = |n| Field::by_name(n).unwrap();
//! m.set_field(f("dl_type"), 0x0800, 0xffff);
//! m.set_field(f("nw_proto"), 6, 0xff);
//! assert_eq!(m.set_field(f("tp_src"), 0x20, 0x20), Protocols::NXM_OXM);
//! assert!(m.check_prerequisites().is_ok());
//! ```

use std::sync::LazyLock;

use packet::key::{fields, FlowKey, KeyField};

use crate::field::{Field, FieldId, Prereq, Protocols};

/// `dl_type` of IPv4.
pub const ETH_TYPE_IP: u16 = 0x0800;
/// `dl_type` of IPv6.
pub const ETH_TYPE_IPV6: u16 = 0x86dd;
/// `dl_type` of ARP.
pub const ETH_TYPE_ARP: u16 = 0x0806;
/// `dl_type` of RARP.
pub const ETH_TYPE_RARP: u16 = 0x8035;
/// `dl_type` of MPLS unicast.
pub const ETH_TYPE_MPLS: u16 = 0x8847;
/// `dl_type` of MPLS multicast.
pub const ETH_TYPE_MPLS_MCAST: u16 = 0x8848;
/// The VLAN TCI's "tag present" bit (CFI; OpenFlow's `OFPVID_PRESENT`).
pub const VLAN_CFI: u16 = 0x1000;
/// The VLAN TCI's VID bits.
pub const VLAN_VID_MASK: u16 = 0x0fff;
/// The VLAN TCI's priority bits.
pub const VLAN_PCP_MASK: u16 = 0xe000;
/// `ip_frag` bit: the packet is a fragment.
pub const FRAG_ANY: u8 = 1;
/// `ip_frag` bit: the packet is a fragment other than the first.
pub const FRAG_LATER: u8 = 2;

/// A value/mask pair over a [`FlowKey`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Match {
    value: FlowKey,
    mask: FlowKey,
}

impl Match {
    /// The match that accepts every packet (all bits wildcarded).
    pub fn catch_all() -> Self {
        Match::default()
    }

    /// A match from a value and mask; bits of `value` outside `mask` are cleared.
    pub fn new(value: FlowKey, mask: FlowKey) -> Self {
        Match {
            value: value.masked(&mask),
            mask,
        }
    }

    /// A match on every bit of `key`.
    pub fn exact(key: FlowKey) -> Self {
        Match {
            value: key,
            mask: FlowKey::all_ones(),
        }
    }

    /// The (already masked) value.
    pub fn value(&self) -> &FlowKey {
        &self.value
    }

    /// The mask: a set bit must equal the value's bit.
    pub fn mask(&self) -> &FlowKey {
        &self.mask
    }

    /// Matches `field` against `value` under `mask` (both as unsigned field values),
    /// replacing any earlier constraint on that field.
    pub fn set_masked(&mut self, field: KeyField, value: u128, mask: u128) {
        self.mask.set(field, mask);
        self.value.set(field, value & mask);
    }

    /// Matches `field` exactly against `value`.
    pub fn set_exact(&mut self, field: KeyField, value: u128) {
        self.set_masked(field, value, field.max_value());
    }

    /// Stops matching on `field`.
    pub fn wildcard(&mut self, field: KeyField) {
        self.set_masked(field, 0, 0);
    }

    /// The value and mask of a key field.
    pub fn get_masked(&self, field: KeyField) -> (u128, u128) {
        (self.value.get(field), self.mask.get(field))
    }

    /// True if no bit of `field` is constrained.
    pub fn is_wild(&self, field: KeyField) -> bool {
        self.mask.get(field) == 0
    }

    /// Sets an OpenFlow field as OVS `mf_set` does: `value` and `mask` in OVS units (see
    /// the module documentation). A mask of all ones over the field's bytes is an exact
    /// match, all zeros stops matching the field. Returns the protocols that can express
    /// the result; a non-maskable field given another mask changes nothing and returns
    /// [`Protocols::NONE`].
    pub fn set_field(&mut self, f: &Field, value: u128, mask: u128) -> Protocols {
        let full = f.full_mask();
        let exact = mask & full == full;
        if exact {
            self.set_field_exact(f, value);
            return f.usable[0];
        }
        if mask & full == 0 {
            self.set_field_wild(f);
            return Protocols::ANY;
        }
        if !f.maskable {
            return Protocols::NONE;
        }
        let m = mask & full;
        match f.id {
            FieldId::VlanVid => {
                let m16 = m & u128::from(VLAN_VID_MASK | VLAN_CFI);
                let (tci, tmask) = self.get_masked(fields::VLAN_TCI);
                let tci = (tci & !u128::from(VLAN_VID_MASK | VLAN_CFI)) | (value & m16);
                let tmask = m16 | (tmask & u128::from(VLAN_PCP_MASK));
                self.set_masked(fields::VLAN_TCI, tci, tmask);
            }
            FieldId::IpFrag => self.set_masked(fields::NW_FRAG, value, m & 3),
            FieldId::TunFlags => self.set_masked(fields::TUN_FLAGS, value, m & 1),
            FieldId::CtState => self.set_masked(fields::CT_STATE, value, m & 0xff),
            FieldId::Ipv6Label if m & 0xfffff == 0xfffff => {
                self.set_masked(fields::IPV6_LABEL, value, 0xfffff);
            }
            _ => self.set_masked(f.key, value, m),
        }
        let cidr_ok = f.usable[1] == f.usable[2] || {
            let bits = u32::from(f.n_bytes()) * 8;
            // OVS tests the first 32 bits of the mask, in network order.
            let m32 = if bits >= 32 { m >> (bits - 32) } else { m };
            crate::ofctl::value::cidr_len(m32, 32).is_some()
        };
        if cidr_ok {
            f.usable[1]
        } else {
            f.usable[2]
        }
    }

    fn set_field_exact(&mut self, f: &Field, value: u128) {
        let tci_all = u128::from(u16::MAX);
        match f.id {
            FieldId::InPort | FieldId::InPortOxm => {
                self.set_masked(fields::IN_PORT, value & 0xffff, u128::from(u32::MAX));
            }
            FieldId::ActsetOutput => {
                self.set_masked(fields::ACTSET_OUTPUT, value & 0xffff, u128::from(u32::MAX));
            }
            FieldId::DlVlan => {
                let (tci, tmask) = self.get_masked(fields::VLAN_TCI);
                if value == 0xffff {
                    self.set_masked(fields::VLAN_TCI, 0, tci_all);
                } else {
                    let vid = value & u128::from(VLAN_VID_MASK);
                    let tci = (tci & !u128::from(VLAN_VID_MASK)) | u128::from(VLAN_CFI) | vid;
                    let tmask = tmask | u128::from(VLAN_VID_MASK | VLAN_CFI);
                    self.set_masked(fields::VLAN_TCI, tci, tmask);
                }
            }
            FieldId::VlanVid => {
                let (tci, tmask) = self.get_masked(fields::VLAN_TCI);
                let vm = u128::from(VLAN_VID_MASK | VLAN_CFI);
                let tci = (tci & !vm) | (value & vm);
                let tmask = vm | (tmask & u128::from(VLAN_PCP_MASK));
                self.set_masked(fields::VLAN_TCI, tci, tmask);
            }
            FieldId::DlVlanPcp | FieldId::VlanPcp => {
                let (tci, tmask) = self.get_masked(fields::VLAN_TCI);
                let tci =
                    (tci & !u128::from(VLAN_PCP_MASK)) | ((value & 7) << 13) | u128::from(VLAN_CFI);
                let tmask = tmask | u128::from(VLAN_CFI | VLAN_PCP_MASK);
                self.set_masked(fields::VLAN_TCI, tci, tmask);
            }
            FieldId::MplsLabel | FieldId::MplsTc | FieldId::MplsBos | FieldId::MplsTtl => {
                self.set_bits_or(f.key, value);
            }
            FieldId::NwTos => {
                let tos = (value & 0xfc) | (self.value.get(fields::NW_TOS) & 3);
                let m = self.mask.get(fields::NW_TOS) | 0xfc;
                self.set_masked(fields::NW_TOS, tos, m);
            }
            FieldId::IpDscp => {
                let tos = ((value << 2) & 0xfc) | (self.value.get(fields::NW_TOS) & 3);
                let m = self.mask.get(fields::NW_TOS) | 0xfc;
                self.set_masked(fields::NW_TOS, tos, m);
            }
            FieldId::IpEcn => {
                let tos = (value & 3) | (self.value.get(fields::NW_TOS) & 0xfc);
                let m = self.mask.get(fields::NW_TOS) | 3;
                self.set_masked(fields::NW_TOS, tos, m);
            }
            FieldId::IpFrag => {
                let m = self.mask.get(fields::NW_FRAG) | 3;
                self.mask.set(fields::NW_FRAG, m);
                self.value.set(fields::NW_FRAG, value & m);
            }
            FieldId::ArpOp => self.set_masked(fields::NW_PROTO, value & 0xff, 0xff),
            FieldId::Icmpv4Type | FieldId::Icmpv6Type => {
                self.set_masked(fields::TP_SRC, value & 0xff, 0xffff);
            }
            FieldId::Icmpv4Code | FieldId::Icmpv6Code => {
                self.set_masked(fields::TP_DST, value & 0xff, 0xffff);
            }
            FieldId::TunFlags => self.set_masked(fields::TUN_FLAGS, value, 1),
            FieldId::CtState => self.set_masked(fields::CT_STATE, value, 0xff),
            FieldId::TcpFlags => self.set_masked(fields::TCP_FLAGS, value, 0xffff),
            _ => self.set_masked(f.key, value, f.key.max_value()),
        }
    }

    /// Sets the bits of `sub` (a part of a key field) exactly, keeping the rest.
    fn set_bits_or(&mut self, sub: KeyField, value: u128) {
        self.mask.set(sub, u128::MAX);
        self.value.set(sub, value);
    }

    /// Stops matching an OpenFlow field (OVS `mf_set_wild`).
    pub fn set_field_wild(&mut self, f: &Field) {
        match f.id {
            FieldId::InPort | FieldId::InPortOxm => self.wildcard(fields::IN_PORT),
            FieldId::ActsetOutput => self.wildcard(fields::ACTSET_OUTPUT),
            FieldId::DlVlan | FieldId::VlanVid => {
                let (tci, tmask) = self.get_masked(fields::VLAN_TCI);
                if tmask & u128::from(VLAN_PCP_MASK) != 0 {
                    let keep = !u128::from(VLAN_VID_MASK);
                    self.set_masked(fields::VLAN_TCI, tci & keep, tmask & keep);
                } else {
                    self.wildcard(fields::VLAN_TCI);
                }
            }
            FieldId::DlVlanPcp | FieldId::VlanPcp => {
                let (tci, tmask) = self.get_masked(fields::VLAN_TCI);
                if tmask & u128::from(VLAN_VID_MASK) != 0 {
                    let keep = !u128::from(VLAN_PCP_MASK);
                    self.set_masked(fields::VLAN_TCI, tci & keep, tmask & keep);
                } else {
                    self.wildcard(fields::VLAN_TCI);
                }
            }
            FieldId::Icmpv4Type | FieldId::Icmpv6Type => self.wildcard(fields::TP_SRC),
            FieldId::Icmpv4Code | FieldId::Icmpv6Code => self.wildcard(fields::TP_DST),
            FieldId::NwTos => self.wildcard(packet_sub(fields::NW_TOS, 2, 6)),
            FieldId::ArpOp => self.wildcard(fields::NW_PROTO),
            FieldId::IpFrag => self.wildcard(fields::NW_FRAG),
            FieldId::TunFlags => self.wildcard(fields::TUN_FLAGS),
            FieldId::TcpFlags => self.wildcard(fields::TCP_FLAGS),
            _ => self.wildcard(f.key),
        }
    }

    /// The value and mask of an OpenFlow field in OVS units (OVS `mf_get`).
    pub fn get_field(&self, f: &Field) -> (u128, u128) {
        let (v, m) = match f.id {
            FieldId::InPort | FieldId::InPortOxm => self.get_masked(fields::IN_PORT),
            FieldId::ActsetOutput => self.get_masked(fields::ACTSET_OUTPUT),
            FieldId::VlanVid => {
                let (v, m) = self.get_masked(fields::VLAN_TCI);
                let vm = u128::from(VLAN_VID_MASK | VLAN_CFI);
                (v & vm, m & vm)
            }
            FieldId::DlVlan => {
                let (v, m) = self.get_masked(fields::VLAN_TCI);
                let vm = u128::from(VLAN_VID_MASK);
                (v & vm, m & vm)
            }
            FieldId::NwTos => {
                let (v, m) = self.get_masked(fields::NW_TOS);
                (v & 0xfc, m & 0xfc)
            }
            FieldId::Icmpv4Type | FieldId::Icmpv6Type => {
                let (v, m) = self.get_masked(fields::TP_SRC);
                (v & 0xff, m & 0xff)
            }
            FieldId::Icmpv4Code | FieldId::Icmpv6Code => {
                let (v, m) = self.get_masked(fields::TP_DST);
                (v & 0xff, m & 0xff)
            }
            FieldId::TunFlags => self.get_masked(fields::TUN_FLAGS),
            FieldId::TcpFlags => self.get_masked(fields::TCP_FLAGS),
            FieldId::IpFrag => self.get_masked(fields::NW_FRAG),
            _ => self.get_masked(f.key),
        };
        (v & f.full_mask(), m & f.full_mask())
    }

    /// The prerequisites this match's value satisfies, one bit each (in the order of
    /// `Prereq`'s variants). [`Match::check_prerequisites`] depends on the mask and on these
    /// bits alone (it reads the value only through [`prereq_ok`]), so a caller checking many
    /// matches can remember its answers per mask and bits.
    pub fn prereq_bits(&self) -> u32 {
        PREREQS
            .iter()
            .filter(|p| prereq_ok(&self.value, **p))
            .fold(0, |bits, p| bits | prereq_bit(*p))
    }

    /// True if the prerequisite `p` holds for this match's values (OVS
    /// `mf_are_match_prereqs_ok`).
    pub fn prereq_ok(&self, p: Prereq) -> bool {
        prereq_ok(&self.value, p)
    }

    /// Checks the OpenFlow prerequisites of every field this match constrains (for example
    /// `tp_src` needs `ip` or `ipv6` and `nw_proto` in {6, 17, 132}), as OVS does when it
    /// decodes an NXM or OXM match (`OFPBMC_BAD_PREREQ`). Bits that several fields share
    /// are accepted if any of those fields' prerequisites holds.
    pub fn check_prerequisites(&self) -> Result<(), crate::Error> {
        let tables = &*PREREQ_TABLES;
        // Most matches constrain only fields without prerequisites: one pass over the mask.
        let mut need = self.mask.masked(&tables.covered);
        let mut any = false;
        for (n, a) in need.words.iter_mut().zip(tables.always.words.iter()) {
            *n &= !a;
            any |= *n != 0;
        }
        if !any {
            return Ok(());
        }
        let mut allowed = FlowKey::default();
        for (p, storage) in &tables.by_prereq {
            if prereq_ok(&self.value, *p) {
                allowed.or_with(storage);
            }
        }
        let mut bad = need;
        for (b, a) in bad.words.iter_mut().zip(allowed.words.iter()) {
            *b &= !a;
        }
        if bad.is_zero() {
            return Ok(());
        }
        let culprit = Field::all()
            .iter()
            .zip(STORAGE.iter())
            .find(|(_, s)| !bad.masked(s).is_zero())
            .map(|(f, _)| f);
        Err(match culprit {
            Some(f) => crate::Error::Prerequisite {
                field: f.name,
                needs: prereq_text(f.prereq),
            },
            None => crate::Error::Prerequisite {
                field: "match",
                needs: "a known field",
            },
        })
    }

    /// True if `key` satisfies this match.
    #[inline]
    pub fn matches(&self, key: &FlowKey) -> bool {
        self.value
            .words
            .iter()
            .zip(self.mask.words.iter())
            .zip(key.words.iter())
            .all(|((v, m), k)| k & m == *v)
    }
}

impl std::fmt::Display for Match {
    /// ovs-ofctl's text ([`crate::ofctl::format_match`]); empty for the catch-all match.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&crate::ofctl::format_match(self, None))
    }
}

impl std::str::FromStr for Match {
    type Err = crate::Error;

    /// ovs-ofctl's match text ([`crate::ofctl::parse_match`]).
    fn from_str(s: &str) -> Result<Match, crate::Error> {
        crate::ofctl::parse_match(s)
    }
}

const fn packet_sub(f: KeyField, shift: u8, width: u8) -> KeyField {
    KeyField {
        name: f.name,
        word: f.word,
        shift: f.shift + shift,
        width,
    }
}

/// The whole key field a registry field lives in (`icmp_type` → all of `tp_src`).
fn whole_storage(f: &Field) -> KeyField {
    match f.id {
        FieldId::InPort | FieldId::InPortOxm => fields::IN_PORT,
        FieldId::ActsetOutput => fields::ACTSET_OUTPUT,
        _ => fields::ALL
            .iter()
            .find(|k| k.name == f.key.name && k.word == f.key.word)
            .copied()
            .unwrap_or(f.key),
    }
}

/// Per registry field (same order as [`Field::all`]), the key bits it may constrain.
static STORAGE: LazyLock<Vec<FlowKey>> = LazyLock::new(|| {
    Field::all()
        .iter()
        .map(|f| {
            let mut k = FlowKey::default();
            k.set(whole_storage(f), u128::MAX);
            k
        })
        .collect()
});

/// Precomputed storage unions for [`Match::check_prerequisites`].
struct PrereqTables {
    /// Every key bit some registry field may constrain.
    covered: FlowKey,
    /// The bits of fields without a prerequisite (always allowed).
    always: FlowKey,
    /// Per prerequisite, the bits of the fields that have it.
    by_prereq: Vec<(Prereq, FlowKey)>,
}

static PREREQ_TABLES: LazyLock<PrereqTables> = LazyLock::new(|| {
    let mut t = PrereqTables {
        covered: FlowKey::default(),
        always: FlowKey::default(),
        by_prereq: Vec::new(),
    };
    for (f, s) in Field::all().iter().zip(STORAGE.iter()) {
        t.covered.or_with(s);
        if matches!(f.prereq, Prereq::None | Prereq::Ethernet) {
            t.always.or_with(s);
            continue;
        }
        match t.by_prereq.iter_mut().find(|(p, _)| *p == f.prereq) {
            Some((_, k)) => k.or_with(s),
            None => t.by_prereq.push((f.prereq, *s)),
        }
    }
    t
});

fn is_ip_any(k: &FlowKey) -> bool {
    matches!(k.dl_type(), ETH_TYPE_IP | ETH_TYPE_IPV6)
}

fn is_l4(k: &FlowKey, proto: u8) -> bool {
    is_ip_any(k) && k.nw_proto() == proto && k.nw_frag() & FRAG_LATER == 0
}

fn is_nd(k: &FlowKey) -> bool {
    k.dl_type() == ETH_TYPE_IPV6
        && k.nw_proto() == 58
        && matches!(k.tp_src(), 135 | 136)
        && k.tp_dst() == 0
}

/// Every prerequisite, in the order of their bits in [`Match::prereq_bits`].
const PREREQS: [Prereq; 17] = [
    Prereq::None,
    Prereq::Ethernet,
    Prereq::Arp,
    Prereq::VlanVid,
    Prereq::Ipv4,
    Prereq::Ipv6,
    Prereq::IpAny,
    Prereq::Mpls,
    Prereq::Tcp,
    Prereq::Udp,
    Prereq::Sctp,
    Prereq::Icmpv4,
    Prereq::Icmpv6,
    Prereq::Nd,
    Prereq::NdSolicit,
    Prereq::NdAdvert,
    Prereq::Ct,
];

/// The bit of `p` in [`Match::prereq_bits`]; this `match` stops the build when `Prereq` gains a
/// variant, so that [`PREREQS`] cannot miss one.
const fn prereq_bit(p: Prereq) -> u32 {
    1 << match p {
        Prereq::None => 0,
        Prereq::Ethernet => 1,
        Prereq::Arp => 2,
        Prereq::VlanVid => 3,
        Prereq::Ipv4 => 4,
        Prereq::Ipv6 => 5,
        Prereq::IpAny => 6,
        Prereq::Mpls => 7,
        Prereq::Tcp => 8,
        Prereq::Udp => 9,
        Prereq::Sctp => 10,
        Prereq::Icmpv4 => 11,
        Prereq::Icmpv6 => 12,
        Prereq::Nd => 13,
        Prereq::NdSolicit => 14,
        Prereq::NdAdvert => 15,
        Prereq::Ct => 16,
    }
}

/// True if the prerequisite `p` holds for the key (or match value) `k`.
pub fn prereq_ok(k: &FlowKey, p: Prereq) -> bool {
    match p {
        Prereq::None | Prereq::Ethernet => true,
        Prereq::Arp => matches!(k.dl_type(), ETH_TYPE_ARP | ETH_TYPE_RARP),
        Prereq::VlanVid => k.vlan_tci() & VLAN_CFI != 0,
        Prereq::Ipv4 => k.dl_type() == ETH_TYPE_IP,
        Prereq::Ipv6 => k.dl_type() == ETH_TYPE_IPV6,
        Prereq::IpAny => is_ip_any(k),
        Prereq::Mpls => matches!(k.dl_type(), ETH_TYPE_MPLS | ETH_TYPE_MPLS_MCAST),
        Prereq::Tcp => is_l4(k, 6),
        Prereq::Udp => is_l4(k, 17),
        Prereq::Sctp => is_l4(k, 132),
        Prereq::Icmpv4 => k.dl_type() == ETH_TYPE_IP && k.nw_proto() == 1,
        Prereq::Icmpv6 => k.dl_type() == ETH_TYPE_IPV6 && k.nw_proto() == 58,
        Prereq::Nd => is_nd(k),
        Prereq::NdSolicit => is_nd(k) && k.tp_src() == 135,
        Prereq::NdAdvert => is_nd(k) && k.tp_src() == 136,
        Prereq::Ct => k.ct_state() & 0x20 != 0 && k.ct_state() & 0x10 == 0,
    }
}

/// What a prerequisite asks for, in ovs-ofctl terms.
pub fn prereq_text(p: Prereq) -> &'static str {
    match p {
        Prereq::None | Prereq::Ethernet => "nothing",
        Prereq::Arp => "arp or rarp",
        Prereq::VlanVid => "a VLAN tag (dl_vlan or vlan_tci with 0x1000)",
        Prereq::Ipv4 => "ip",
        Prereq::Ipv6 => "ipv6",
        Prereq::IpAny => "ip or ipv6",
        Prereq::Mpls => "mpls or mplsm",
        Prereq::Tcp => "tcp or tcp6",
        Prereq::Udp => "udp or udp6",
        Prereq::Sctp => "sctp or sctp6",
        Prereq::Icmpv4 => "icmp",
        Prereq::Icmpv6 => "icmp6",
        Prereq::Nd => "icmp6 with icmp_type 135 or 136 and icmp_code 0",
        Prereq::NdSolicit => "icmp6 with icmp_type=135 and icmp_code=0",
        Prereq::NdAdvert => "icmp6 with icmp_type=136 and icmp_code=0",
        Prereq::Ct => "ct_state with +trk-inv",
    }
}

#[cfg(test)]
mod tests {
    use packet::key::fields;

    use super::*;

    #[test]
    fn prereqs_are_listed_at_their_bits() {
        for (i, p) in PREREQS.iter().enumerate() {
            assert_eq!(prereq_bit(*p), 1 << i, "{p:?}");
        }
    }

    fn f(n: &str) -> &'static Field {
        Field::by_name(n).expect("field exists")
    }

    #[test]
    fn new_clears_value_bits_outside_mask() {
        let mut v = FlowKey::default();
        v.set_nw_src(0x0a00_00ff);
        let mut m = FlowKey::default();
        m.set(fields::NW_SRC, 0xffff_ff00);
        let mt = Match::new(v, m);
        assert_eq!(mt.value().nw_src(), 0x0a00_0000);
        let mut pkt = FlowKey::default();
        pkt.set_nw_src(0x0a00_0042);
        assert!(mt.matches(&pkt));
        pkt.set_nw_src(0x0b00_0042);
        assert!(!mt.matches(&pkt));
    }

    #[test]
    fn match_display_and_from_str_use_ofctl_text() {
        let m: Match = "tcp,tp_dst=80".parse().expect("parses");
        assert_eq!(m.to_string(), "tcp,tp_dst=80");
        assert_eq!(Match::catch_all().to_string(), "");
        assert!("bogus=1".parse::<Match>().is_err());
    }

    #[test]
    fn set_field_vlan_sets_present_bit() {
        let mut m = Match::catch_all();
        m.set_field(f("dl_vlan"), 9, 0xffff);
        assert_eq!(m.get_masked(fields::VLAN_TCI), (0x1009, 0x1fff));
        m.set_field(f("dl_vlan_pcp"), 7, 0xff);
        assert_eq!(m.get_masked(fields::VLAN_TCI), (0xf009, 0xffff));
        let mut m = Match::catch_all();
        m.set_field(f("dl_vlan"), 0xffff, 0xffff);
        assert_eq!(m.get_masked(fields::VLAN_TCI), (0, 0xffff));
    }

    #[test]
    fn set_field_tos_parts() {
        let mut m = Match::catch_all();
        m.set_field(f("ip_dscp"), 0x3c, 0xff);
        assert_eq!(m.get_masked(fields::NW_TOS), (0xf0, 0xfc));
        m.set_field(f("nw_ecn"), 1, 0xff);
        assert_eq!(m.get_masked(fields::NW_TOS), (0xf1, 0xff));
    }

    #[test]
    fn set_field_usable_follows_mask_kind() {
        let mut m = Match::catch_all();
        assert_eq!(
            m.set_field(f("nw_src"), 0xc0a8_0000, 0xffff_ff00),
            Protocols::ANY
        );
        assert_eq!(
            m.set_field(f("nw_src"), 0xc000_a800, 0xff00_ff00),
            Protocols::NXM_OXM_OF11
        );
        assert_eq!(m.set_field(f("nw_ttl"), 5, 1), Protocols::NONE);
    }

    #[test]
    fn prerequisites_tp_src_needs_l4() {
        let mut m = Match::catch_all();
        m.set_field(f("tp_src"), 80, 0xffff);
        assert!(matches!(
            m.check_prerequisites(),
            Err(crate::Error::Prerequisite {
                field: "tcp_src",
                ..
            })
        ));
        m.set_field(f("dl_type"), 0x0800, 0xffff);
        m.set_field(f("nw_proto"), 17, 0xff);
        assert!(m.check_prerequisites().is_ok());
    }

    #[test]
    fn prerequisites_arp_shares_ip_storage() {
        let mut m = Match::catch_all();
        m.set_field(f("dl_type"), 0x0806, 0xffff);
        m.set_field(f("arp_spa"), 0x0102_0304, 0xffff_ffff);
        m.set_field(f("arp_op"), 1, 0xffff);
        assert!(m.check_prerequisites().is_ok());
        m.set_field(f("dl_type"), 0x1234, 0xffff);
        assert!(m.check_prerequisites().is_err());
    }

    #[test]
    fn prerequisites_nd_and_icmp() {
        let mut m = Match::catch_all();
        m.set_field(f("dl_type"), 0x86dd, 0xffff);
        m.set_field(f("nw_proto"), 58, 0xff);
        m.set_field(f("icmpv6_type"), 135, 0xff);
        m.set_field(f("nd_target"), 1, u128::MAX);
        m.set_field(f("nd_sll"), 5, (1 << 48) - 1);
        assert!(m.check_prerequisites().is_ok());
        m.set_field(f("icmpv6_type"), 136, 0xff);
        assert!(m.check_prerequisites().is_err());
    }
}
