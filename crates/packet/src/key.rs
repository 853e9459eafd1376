//! `FlowKey`: the fixed-layout key of one packet (the analogue of OVS's `struct flow`).
//!
//! # Layout
//!
//! A key is an array of [`KEY_WORDS`] 64-bit words. Every field lives at a fixed bit range
//! inside one word (fields of 128 bits take two whole words, the more significant first).
//! Values are stored in host order as unsigned integers: an IPv4 address is a `u32` whose
//! most significant byte is the first byte on the wire, an Ethernet address is the low 48
//! bits of a `u64` (first wire byte most significant), an IPv6 address is a `u128`.
//!
//! Words are ordered by lookup stage: metadata → L2 → L3 → L4 ([`STAGES`]). A classifier
//! that looks up stage by stage consults the words of one stage at a time, and a masked
//! copy of a key (a wildcard mask is itself a `FlowKey`) is made with word-wise `&`.
//!
//! The same word layout serves the pipeline (registers, metadata), the classifier (a
//! `Match` is a key plus a mask) and the datapath caches; the generic [`KeyField`]
//! descriptors let `set_field`, `load` and `move` address any bit range without knowing
//! the field.
//!
//! # Example
//! ```
//! use packet::key::{fields, FlowKey};
//! let mut key = FlowKey::default();
//! key.set_nw_src(0x0a00_0001);
//! assert_eq!(key.get(fields::NW_SRC), 0x0a00_0001);
//! let mut mask = FlowKey::default();
//! mask.set(fields::NW_SRC, 0xffff_ff00);
//! assert_eq!(key.masked(&mask).nw_src(), 0x0a00_0000);
//! ```

use std::fmt;

/// Number of 64-bit words in a [`FlowKey`].
pub const KEY_WORDS: usize = 45;

/// A lookup stage: a contiguous range of key words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stage {
    /// Stage name as used in traces (`"metadata"`, `"l2"`, `"l3"`, `"l4"`).
    pub name: &'static str,
    /// First word of the stage.
    pub start: usize,
    /// One past the last word of the stage.
    pub end: usize,
}

/// The lookup stages, in order; together they cover every word exactly once.
pub const STAGES: [Stage; 4] = [
    Stage {
        name: "metadata",
        start: 0,
        end: 29,
    },
    Stage {
        name: "l2",
        start: 29,
        end: 34,
    },
    Stage {
        name: "l3",
        start: 34,
        end: 40,
    },
    Stage {
        name: "l4",
        start: 40,
        end: KEY_WORDS,
    },
];

/// The key of one packet, or (as a mask) which bits of a key matter.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(C, align(8))]
pub struct FlowKey {
    /// The raw words; see the module documentation for the layout.
    pub words: [u64; KEY_WORDS],
}

const _: () = assert!(std::mem::size_of::<FlowKey>() % 8 == 0);
const _: () = assert!(std::mem::size_of::<FlowKey>() == KEY_WORDS * 8);

impl Default for FlowKey {
    fn default() -> Self {
        FlowKey {
            words: [0; KEY_WORDS],
        }
    }
}

/// Where one field lives in a [`FlowKey`]: a bit range of one word, or two whole words for
/// 128-bit fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyField {
    /// The field's name in the key (the ovs-ofctl spelling where there is one).
    pub name: &'static str,
    /// Index of the (first) word.
    pub word: u8,
    /// Bit offset of the field's least significant bit inside the word (0 for 128-bit fields).
    pub shift: u8,
    /// Width in bits: 1 to 64, or 128 (two whole words, `word` the more significant).
    pub width: u8,
}

impl KeyField {
    /// All ones over the field's width, as a value (not shifted).
    pub const fn max_value(self) -> u128 {
        if self.width >= 128 {
            u128::MAX
        } else {
            (1u128 << self.width) - 1
        }
    }

    /// The words this field occupies.
    pub const fn words(self) -> std::ops::Range<usize> {
        let w = self.word as usize;
        if self.width > 64 {
            w..w + 2
        } else {
            w..w + 1
        }
    }

    /// Mask of the field's bits inside its word (for fields of at most 64 bits).
    #[inline(always)]
    const fn word_mask(self) -> u64 {
        if self.width >= 64 {
            u64::MAX
        } else {
            ((1u64 << self.width) - 1) << self.shift
        }
    }
}

impl FlowKey {
    /// A key with every bit set: the mask of an exact match.
    pub const fn all_ones() -> Self {
        FlowKey {
            words: [u64::MAX; KEY_WORDS],
        }
    }

    /// Reads a field as an unsigned value. Always inlined: with a constant field (every
    /// accessor) it folds to a shift and a mask, which extraction needs on its hot path.
    #[inline(always)]
    pub fn get(&self, f: KeyField) -> u128 {
        let w = f.word as usize;
        if f.width > 64 {
            (u128::from(self.words[w]) << 64) | u128::from(self.words[w + 1])
        } else {
            u128::from((self.words[w] & f.word_mask()) >> f.shift)
        }
    }

    /// Writes a field; bits of `value` beyond the field's width are ignored. Always inlined
    /// (see [`FlowKey::get`]).
    #[inline(always)]
    pub fn set(&mut self, f: KeyField, value: u128) {
        let w = f.word as usize;
        if f.width > 64 {
            // Truncation intended: the high and low halves of a 128-bit field.
            #[allow(clippy::cast_possible_truncation)]
            {
                self.words[w] = (value >> 64) as u64;
                self.words[w + 1] = value as u64;
            }
        } else {
            let m = f.word_mask();
            #[allow(clippy::cast_possible_truncation)]
            let v = (value as u64) << f.shift;
            self.words[w] = (self.words[w] & !m) | (v & m);
        }
    }

    /// Reads `n_bits` bits of field `f` starting at bit `ofs` (OVS subfield `f[ofs..ofs+n-1]`).
    /// Returns `None` if the range falls outside the field.
    pub fn get_bits(&self, f: KeyField, ofs: u32, n_bits: u32) -> Option<u128> {
        if n_bits == 0 || ofs + n_bits > u32::from(f.width) {
            return None;
        }
        let v = self.get(f) >> ofs;
        Some(if n_bits >= 128 {
            v
        } else {
            v & ((1u128 << n_bits) - 1)
        })
    }

    /// Writes `n_bits` bits of field `f` starting at bit `ofs`. Returns `false` (and changes
    /// nothing) if the range falls outside the field.
    pub fn set_bits(&mut self, f: KeyField, ofs: u32, n_bits: u32, value: u128) -> bool {
        if n_bits == 0 || ofs + n_bits > u32::from(f.width) {
            return false;
        }
        let m = if n_bits >= 128 {
            u128::MAX
        } else {
            ((1u128 << n_bits) - 1) << ofs
        };
        let old = self.get(f);
        self.set(f, (old & !m) | ((value << ofs) & m));
        true
    }

    /// Word-wise AND: this key with the bits of `mask` kept.
    #[inline]
    pub fn masked(&self, mask: &FlowKey) -> FlowKey {
        let mut out = *self;
        for (o, m) in out.words.iter_mut().zip(mask.words.iter()) {
            *o &= *m;
        }
        out
    }

    /// Word-wise OR into `self` (used to accumulate wildcard masks).
    #[inline]
    pub fn or_with(&mut self, other: &FlowKey) {
        for (o, m) in self.words.iter_mut().zip(other.words.iter()) {
            *o |= *m;
        }
    }

    /// The bits that belong to some field (registers included). A mask with a bit outside
    /// this set is malformed.
    pub fn valid_bits() -> FlowKey {
        let mut k = FlowKey::default();
        for f in fields::ALL.iter().chain(fields::REGS.iter()) {
            k.set(*f, u128::MAX);
        }
        k
    }

    /// The number of bits set (in a consulted-bits key: how many bits a lookup consulted).
    pub fn count_ones(&self) -> u32 {
        self.words.iter().map(|w| w.count_ones()).sum()
    }

    /// True if no bit is set.
    pub fn is_zero(&self) -> bool {
        self.words.iter().all(|w| *w == 0)
    }

    /// True if every bit set in `self` is also set in `other`.
    pub fn is_subset_of(&self, other: &FlowKey) -> bool {
        self.words
            .iter()
            .zip(other.words.iter())
            .all(|(a, b)| a & !b == 0)
    }

    /// Register `i` (0..32). Out-of-range indices read 0.
    pub fn reg(&self, i: usize) -> u32 {
        match fields::REGS.get(i) {
            // The field is 32 bits wide.
            #[allow(clippy::cast_possible_truncation)]
            Some(f) => self.get(*f) as u32,
            None => 0,
        }
    }

    /// Sets register `i` (0..32). Out-of-range indices are ignored.
    pub fn set_reg(&mut self, i: usize, v: u32) {
        if let Some(f) = fields::REGS.get(i) {
            self.set(*f, u128::from(v));
        }
    }

    /// Ethernet source as bytes.
    pub fn dl_src_bytes(&self) -> [u8; 6] {
        mac_to_bytes(self.dl_src())
    }

    /// Ethernet destination as bytes.
    pub fn dl_dst_bytes(&self) -> [u8; 6] {
        mac_to_bytes(self.dl_dst())
    }
}

/// Converts an Ethernet address to its `u64` key form (first byte most significant).
pub fn mac_from_bytes(b: [u8; 6]) -> u64 {
    b.iter().fold(0u64, |acc, x| (acc << 8) | u64::from(*x))
}

/// Converts the `u64` key form of an Ethernet address back to bytes.
pub fn mac_to_bytes(v: u64) -> [u8; 6] {
    let b = v.to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

impl fmt::Debug for FlowKey {
    /// Prints only the non-zero fields, by name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("FlowKey");
        for kf in fields::ALL {
            let v = self.get(*kf);
            if v != 0 {
                s.field(kf.name, &format_args!("{v:#x}"));
            }
        }
        s.finish()
    }
}

macro_rules! key_fields {
    ($( $(#[doc = $doc:literal])* $konst:ident, $get:ident, $set:ident : $ty:ty = ($word:expr, $shift:expr, $width:expr); )*) => {
        /// Descriptors of every named key field.
        pub mod fields {
            use super::KeyField;
            $(
                $(#[doc = $doc])*
                pub const $konst: KeyField = KeyField {
                    name: stringify!($get),
                    word: $word,
                    shift: $shift,
                    width: $width,
                };
            )*
            /// Registers `reg0` to `reg31` (32 bits each). `xregN` is the whole word holding
            /// `reg(2N)` (high half) and `reg(2N+1)` (low half); `xxregN` is `xreg(2N)`
            /// followed by `xreg(2N+1)`.
            #[allow(clippy::cast_possible_truncation)] // Word indices are below 64.
            pub const REGS: [KeyField; 32] = {
                let mut r = [KeyField { name: "reg", word: 0, shift: 0, width: 32 }; 32];
                let names = [
                    "reg0", "reg1", "reg2", "reg3", "reg4", "reg5", "reg6", "reg7", "reg8",
                    "reg9", "reg10", "reg11", "reg12", "reg13", "reg14", "reg15", "reg16",
                    "reg17", "reg18", "reg19", "reg20", "reg21", "reg22", "reg23", "reg24",
                    "reg25", "reg26", "reg27", "reg28", "reg29", "reg30", "reg31",
                ];
                let mut i = 0;
                while i < 32 {
                    r[i] = KeyField {
                        name: names[i],
                        word: (super::REGS_WORD + i / 2) as u8,
                        shift: if i % 2 == 0 { 32 } else { 0 },
                        width: 32,
                    };
                    i += 1;
                }
                r
            };
            /// `xreg0` to `xreg15` (64 bits each).
            #[allow(clippy::cast_possible_truncation)] // Word indices are below 64.
            pub const XREGS: [KeyField; 16] = {
                let mut r = [KeyField { name: "xreg", word: 0, shift: 0, width: 64 }; 16];
                let names = [
                    "xreg0", "xreg1", "xreg2", "xreg3", "xreg4", "xreg5", "xreg6", "xreg7",
                    "xreg8", "xreg9", "xreg10", "xreg11", "xreg12", "xreg13", "xreg14", "xreg15",
                ];
                let mut i = 0;
                while i < 16 {
                    r[i] = KeyField { name: names[i], word: (super::REGS_WORD + i) as u8, shift: 0, width: 64 };
                    i += 1;
                }
                r
            };
            /// `xxreg0` to `xxreg7` (128 bits each).
            #[allow(clippy::cast_possible_truncation)] // Word indices are below 64.
            pub const XXREGS: [KeyField; 8] = {
                let mut r = [KeyField { name: "xxreg", word: 0, shift: 0, width: 128 }; 8];
                let names = ["xxreg0", "xxreg1", "xxreg2", "xxreg3", "xxreg4", "xxreg5", "xxreg6", "xxreg7"];
                let mut i = 0;
                while i < 8 {
                    r[i] = KeyField { name: names[i], word: (super::REGS_WORD + 2 * i) as u8, shift: 0, width: 128 };
                    i += 1;
                }
                r
            };
            /// Every named field above (registers excluded), in layout order.
            pub const ALL: &[KeyField] = &[$($konst),*];
        }

        impl FlowKey {
            $(
                $(#[doc = $doc])*
                #[inline(always)]
                #[allow(clippy::cast_possible_truncation)]
                pub fn $get(&self) -> $ty {
                    self.get(fields::$konst) as $ty
                }
                #[doc = concat!("Sets `", stringify!($get), "`.")]
                #[inline(always)]
                pub fn $set(&mut self, v: $ty) {
                    self.set(fields::$konst, u128::from(v));
                }
            )*
        }
    };
}

/// First word of the registers (`reg0`/`reg1`).
pub const REGS_WORD: usize = 7;

key_fields! {
    // ---- Metadata stage (words 0..29) ----
    /// Ingress OpenFlow port (`in_port`; 32-bit as in OpenFlow 1.1+, OFPP_* values kept as 16-bit ones by the pipeline).
    IN_PORT, in_port, set_in_port: u32 = (0, 0, 32);
    /// Recirculation id (0 for a packet fresh from a port).
    RECIRC_ID, recirc_id, set_recirc_id: u32 = (0, 32, 32);
    /// Datapath hash (`dp_hash`).
    DP_HASH, dp_hash, set_dp_hash: u32 = (1, 0, 32);
    /// Linux socket-buffer priority (`skb_priority`).
    SKB_PRIORITY, skb_priority, set_skb_priority: u32 = (1, 32, 32);
    /// Packet mark (`pkt_mark`).
    PKT_MARK, pkt_mark, set_pkt_mark: u32 = (2, 0, 32);
    /// Connection-tracking state bits (`ct_state`, OVS `CS_*`: new 0x01, est 0x02, rel 0x04, rpl 0x08, inv 0x10, trk 0x20, snat 0x40, dnat 0x80).
    CT_STATE, ct_state, set_ct_state: u32 = (2, 32, 32);
    /// Connection-tracking zone (`ct_zone`).
    CT_ZONE, ct_zone, set_ct_zone: u16 = (3, 0, 16);
    /// Protocol of the connection's original tuple (`ct_nw_proto`).
    CT_NW_PROTO, ct_nw_proto, set_ct_nw_proto: u8 = (3, 16, 8);
    /// Connection mark (`ct_mark`).
    CT_MARK, ct_mark, set_ct_mark: u32 = (3, 32, 32);
    /// Connection label (`ct_label`, 128 bits).
    CT_LABEL, ct_label, set_ct_label: u128 = (4, 0, 128);
    /// OpenFlow metadata (`metadata`, 64 bits).
    METADATA, metadata, set_metadata: u64 = (6, 0, 64);
    // Words 7..23 hold reg0..reg31 (see `fields::REGS`).
    /// Tunnel id (`tun_id`, VNI/key).
    TUN_ID, tun_id, set_tun_id: u64 = (23, 0, 64);
    /// Tunnel outer IPv4 source (`tun_src`).
    TUN_SRC, tun_src, set_tun_src: u32 = (24, 0, 32);
    /// Tunnel outer IPv4 destination (`tun_dst`).
    TUN_DST, tun_dst, set_tun_dst: u32 = (24, 32, 32);
    /// Tunnel outer TTL (`tun_ttl`).
    TUN_TTL, tun_ttl, set_tun_ttl: u8 = (25, 0, 8);
    /// Tunnel outer TOS (`tun_tos`).
    TUN_TOS, tun_tos, set_tun_tos: u8 = (25, 8, 8);
    /// Tunnel flags (`tun_flags`, OVS `FLOW_TNL_F_*`).
    TUN_FLAGS, tun_flags, set_tun_flags: u16 = (25, 16, 16);
    /// VXLAN group-based-policy id (`tun_gbp_id`).
    TUN_GBP_ID, tun_gbp_id, set_tun_gbp_id: u16 = (25, 32, 16);
    /// VXLAN group-based-policy flags (`tun_gbp_flags`).
    TUN_GBP_FLAGS, tun_gbp_flags, set_tun_gbp_flags: u8 = (25, 48, 8);
    /// Output port chosen by the action set (`actset_output`).
    ACTSET_OUTPUT, actset_output, set_actset_output: u32 = (26, 0, 32);
    /// Connection's original IPv4 source (`ct_nw_src`).
    CT_NW_SRC, ct_nw_src, set_ct_nw_src: u32 = (27, 0, 32);
    /// Connection's original IPv4 destination (`ct_nw_dst`).
    CT_NW_DST, ct_nw_dst, set_ct_nw_dst: u32 = (27, 32, 32);
    /// Connection's original L4 source port (`ct_tp_src`).
    CT_TP_SRC, ct_tp_src, set_ct_tp_src: u16 = (28, 0, 16);
    /// Connection's original L4 destination port (`ct_tp_dst`).
    CT_TP_DST, ct_tp_dst, set_ct_tp_dst: u16 = (28, 16, 16);
    // ---- L2 stage (words 29..34) ----
    /// Ethernet destination (`dl_dst`, 48 bits).
    DL_DST, dl_dst, set_dl_dst: u64 = (29, 0, 48);
    /// Ethertype after all VLAN tags (`dl_type`); for MPLS packets the MPLS ethertype. 0x05ff for 802.3 frames without SNAP, as OVS.
    DL_TYPE, dl_type, set_dl_type: u16 = (29, 48, 16);
    /// Ethernet source (`dl_src`, 48 bits).
    DL_SRC, dl_src, set_dl_src: u64 = (30, 0, 48);
    /// Outer VLAN TCI with the CFI bit (0x1000) set when a tag is present (`vlan_tci`); 0 means no tag.
    VLAN_TCI, vlan_tci, set_vlan_tci: u16 = (31, 0, 16);
    /// Outer VLAN TPID (0x8100 or 0x88a8; 0 when untagged).
    VLAN_TPID, vlan_tpid, set_vlan_tpid: u16 = (31, 16, 16);
    /// Inner VLAN TCI, same encoding (`vlan_tci1`).
    VLAN_TCI1, vlan_tci1, set_vlan_tci1: u16 = (31, 32, 16);
    /// Inner VLAN TPID.
    VLAN_TPID1, vlan_tpid1, set_vlan_tpid1: u16 = (31, 48, 16);
    /// Outermost MPLS label stack entry (label 20 | tc 3 | bos 1 | ttl 8).
    MPLS_LSE0, mpls_lse0, set_mpls_lse0: u32 = (32, 0, 32);
    /// Second MPLS label stack entry.
    MPLS_LSE1, mpls_lse1, set_mpls_lse1: u32 = (32, 32, 32);
    /// Third MPLS label stack entry.
    MPLS_LSE2, mpls_lse2, set_mpls_lse2: u32 = (33, 0, 32);
    // ---- L3 stage (words 34..40) ----
    /// IPv4 source (`nw_src`); ARP sender protocol address (`arp_spa`) for ARP.
    NW_SRC, nw_src, set_nw_src: u32 = (34, 0, 32);
    /// IPv4 destination (`nw_dst`); ARP target protocol address (`arp_tpa`) for ARP.
    NW_DST, nw_dst, set_nw_dst: u32 = (34, 32, 32);
    /// IPv6 source (`ipv6_src`).
    IPV6_SRC, ipv6_src, set_ipv6_src: u128 = (35, 0, 128);
    /// IPv6 destination (`ipv6_dst`).
    IPV6_DST, ipv6_dst, set_ipv6_dst: u128 = (37, 0, 128);
    /// IPv6 flow label (`ipv6_label`, 20 bits).
    IPV6_LABEL, ipv6_label, set_ipv6_label: u32 = (39, 0, 20);
    /// Fragment bits (`ip_frag`): 0x1 any fragment, 0x2 a later (non-first) fragment.
    NW_FRAG, nw_frag, set_nw_frag: u8 = (39, 32, 8);
    /// IPv4 TOS / IPv6 traffic class (`nw_tos`: DSCP in the top 6 bits, ECN in the low 2).
    NW_TOS, nw_tos, set_nw_tos: u8 = (39, 40, 8);
    /// IPv4 TTL / IPv6 hop limit (`nw_ttl`).
    NW_TTL, nw_ttl, set_nw_ttl: u8 = (39, 48, 8);
    /// IP protocol / IPv6 next header (`nw_proto`); the low 8 bits of the ARP opcode (`arp_op`) for ARP.
    NW_PROTO, nw_proto, set_nw_proto: u8 = (39, 56, 8);
    // ---- L4 stage (words 40..45) ----
    /// Neighbor Discovery target address (`nd_target`).
    ND_TARGET, nd_target, set_nd_target: u128 = (40, 0, 128);
    /// ARP sender hardware address (`arp_sha`) or ND source link-layer address (`nd_sll`).
    ARP_SHA, arp_sha, set_arp_sha: u64 = (42, 0, 48);
    /// ARP target hardware address (`arp_tha`) or ND target link-layer address (`nd_tll`).
    ARP_THA, arp_tha, set_arp_tha: u64 = (43, 0, 48);
    /// TCP/UDP/SCTP source port (`tp_src`); ICMP type (`icmp_type`) for ICMPv4/v6.
    TP_SRC, tp_src, set_tp_src: u16 = (44, 0, 16);
    /// TCP/UDP/SCTP destination port (`tp_dst`); ICMP code (`icmp_code`) for ICMPv4/v6.
    TP_DST, tp_dst, set_tp_dst: u16 = (44, 16, 16);
    /// TCP flags (`tcp_flags`, 12 bits).
    TCP_FLAGS, tcp_flags, set_tcp_flags: u16 = (44, 32, 16);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::needless_range_loop)]
    fn fields_do_not_overlap() {
        let mut owner: Vec<[Option<&str>; 64]> = vec![[None; 64]; KEY_WORDS];
        let mut all: Vec<KeyField> = fields::ALL.to_vec();
        all.extend(fields::REGS.iter().copied());
        for f in all {
            for w in f.words() {
                let (lo, hi) = if f.width > 64 {
                    (0, 64)
                } else {
                    (f.shift as usize, (f.shift + f.width) as usize)
                };
                assert!(hi <= 64, "{} overflows its word", f.name);
                for b in lo..hi {
                    assert!(
                        owner[w][b].is_none(),
                        "{} overlaps {:?}",
                        f.name,
                        owner[w][b]
                    );
                    owner[w][b] = Some(f.name);
                }
            }
        }
    }

    #[test]
    fn stages_cover_every_word_once() {
        let mut next = 0;
        for s in STAGES {
            assert_eq!(s.start, next);
            assert!(s.end > s.start);
            next = s.end;
        }
        assert_eq!(next, KEY_WORDS);
    }

    #[test]
    fn get_set_roundtrip_every_field() {
        for f in fields::ALL.iter().chain(fields::REGS.iter()) {
            let mut k = FlowKey::all_ones();
            k.set(*f, 0);
            assert_eq!(k.get(*f), 0, "{}", f.name);
            k.set(*f, u128::MAX);
            assert_eq!(k.get(*f), f.max_value(), "{}", f.name);
            let mut z = FlowKey::default();
            z.set(*f, 0x1234_5678_9abc_def0_1122_3344_5566_7788);
            assert_eq!(
                z.get(*f),
                0x1234_5678_9abc_def0_1122_3344_5566_7788 & f.max_value()
            );
        }
    }

    #[test]
    fn xreg_and_xxreg_follow_ovs_register_order() {
        let mut k = FlowKey::default();
        // xreg15[0..31]=2, xreg15[32..63]=3 -> reg30=3, reg31=2 (OVS ovs-ofctl.at).
        assert!(k.set_bits(fields::XREGS[15], 0, 32, 2));
        assert!(k.set_bits(fields::XREGS[15], 32, 32, 3));
        assert_eq!((k.reg(30), k.reg(31)), (3, 2));
        // xxreg7[96..127]=7 -> reg28=7.
        assert!(k.set_bits(fields::XXREGS[7], 96, 32, 7));
        assert_eq!(k.reg(28), 7);
    }

    #[test]
    fn subfield_outside_field_is_rejected() {
        let mut k = FlowKey::default();
        assert!(!k.set_bits(fields::TP_SRC, 10, 8, 1));
        assert_eq!(k.get_bits(fields::TP_SRC, 16, 1), None);
        assert!(k.set_bits(fields::TP_SRC, 5, 1, 1));
        assert_eq!(k.tp_src(), 0x20);
    }

    #[test]
    fn mac_roundtrip() {
        let m = [0x00, 0x0a, 0xe4, 0x25, 0x6b, 0xb0];
        let mut k = FlowKey::default();
        k.set_dl_src(mac_from_bytes(m));
        assert_eq!(k.dl_src_bytes(), m);
    }
}
