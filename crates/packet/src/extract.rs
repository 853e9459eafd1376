//! `FlowKey` extraction: the bytes of an Ethernet frame into the L2..L4 words of a
//! [`FlowKey`], with the semantics of Open vSwitch's `miniflow_extract` (`lib/flow.c`).
//!
//! # Contract
//!
//! [`extract`] never panics, whatever the input. It first clears the L2, L3 and L4 words of
//! the key (the caller presets the metadata words: `in_port`, `recirc_id`, tunnel fields, …,
//! and they are left alone), then fills every field it can parse. Parsing is lax, as in
//! OVS: a truncated or unknown header ends extraction, the fields parsed so far stay, and
//! [`ExtractInfo::stop`] records where and why it stopped. The pipeline still sees the
//! packet with a partial key.
//!
//! # OVS semantics kept bit for bit
//!
//! Traces are compared with OVS's, so the quirks of `miniflow_extract` are reproduced, not
//! fixed:
//!
//! - A frame shorter than 14 bytes yields an all-zero L2..L4 key.
//! - At most two VLAN tags (TPID 0x8100 or 0x88a8) are parsed; the stored TCI has the CFI bit
//!   (0x1000, OVS `VLAN_CFI`) set to mark "tag present", which hides the wire DEI bit. A third tag
//!   is not parsed: `dl_type` becomes its TPID. A tag with fewer than 6 bytes behind its TPID is
//!   not parsed either.
//! - A type/length field below 0x600 is an IEEE 802.3 length: with an LLC/SNAP header of OUI
//!   00-00-00 `dl_type` is the SNAP protocol id, otherwise [`DL_TYPE_NONE`] (0x05ff).
//! - MPLS: up to 3 label stack entries are stored, the stack is skipped up to the bottom of stack,
//!   and nothing beneath is parsed.
//! - IPv4: the version field is not checked. A header with IHL < 5, a total length shorter than the
//!   header or longer than the data fails `ipv4_sanity_check`: no L3 field is set. Bytes beyond the
//!   total length are L2 padding and never parsed.
//! - IPv6: a payload length longer than the data fails; the extension headers hop-by-hop, routing,
//!   destination options, AH and fragment are walked. If the walk runs out of data, the addresses
//!   stay set but label, TOS, TTL, protocol and fragment bits do not (OVS pushes them after the
//!   walk). A non-first fragment gets `nw_proto` = 44 (`IPPROTO_FRAGMENT`), not the fragment's next
//!   header.
//! - `nw_frag`: 0x1 ([`FRAG_ANY`]) for any fragment, 0x2 ([`FRAG_LATER`]) when the offset is
//!   non-zero; later fragments have no L4 fields. An IPv6 fragment header whose 16-bit offset/flags
//!   word is non-zero (even only the reserved bits) counts as a fragment.
//! - ARP and RARP are parsed only for Ethernet/IPv4 (htype 1, ptype 0x0800, hlen 6, plen 4); the
//!   opcode goes into `nw_proto` only if it is at most 255.
//! - L4 headers that do not fit in the IP payload leave the L4 fields zero. TCP needs a data offset
//!   of at least 5 words, all present. ICMP and IGMP need 8 bytes, SCTP 12. ICMPv4/ICMPv6/IGMP type
//!   and code go into `tp_src`/`tp_dst`. The L4 protocol is chosen by `nw_proto` alone: an ICMPv6
//!   header inside IPv4 is parsed as ICMPv6.
//! - Neighbor Discovery (ICMPv6 type 135/136, code 0): `nd_target`, the source link-layer address
//!   option into `arp_sha` and the target link-layer option into `arp_tha` (for both NS and NA),
//!   and the type of the first such option into `tcp_flags` (OVS `nd_options_type`, which shares
//!   the `tcp_flags` slot). Options of a length other than 8 bytes are skipped; an option of length
//!   0 or running past the data ends the walk, keeping what was found; a repeated option (a second
//!   SLL or TLL after a non-zero one) discards `nd_target`, `arp_sha` and `arp_tha` but keeps the
//!   option type.
//!
//! # Example
//!
//! ```
//! use packet::builder::PacketBuilder;
//! use packet::extract::{extract, FRAG_ANY};
//! use packet::FlowKey;
//!
//! let frame = PacketBuilder::ethernet([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
//!     .ipv4([10, 0, 0, 1], [10, 0, 0, 2])
//!     .tcp(1234, 80)
//!     .payload(b"hello")
//!     .build();
//! let mut key = FlowKey::default();
//! key.set_in_port(7);
//! let info = extract(&frame, &mut key);
//! assert_eq!(key.in_port(), 7);
//! assert_eq!(key.dl_type(), 0x0800);
//! assert_eq!(key.nw_src(), 0x0a00_0001);
//! assert_eq!((key.tp_src(), key.tp_dst()), (1234, 80));
//! assert_eq!(key.nw_frag() & FRAG_ANY, 0);
//! assert_eq!((info.l3, info.l4), (Some(14), Some(34)));
//! assert!(info.stop.is_none());
//! ```

use crate::key::{FlowKey, KEY_WORDS, STAGES};

/// `dl_type` of an 802.3 frame without an LLC/SNAP ethertype (OVS `FLOW_DL_TYPE_NONE`).
pub const DL_TYPE_NONE: u16 = 0x05ff;
/// Smallest type/length value that is an ethertype, not an 802.3 length (IEEE 802.3 § 3.2.6).
pub const ETH_TYPE_MIN: u16 = 0x0600;
/// VLAN CFI bit, set in a stored TCI to mean "a tag is present" (OVS `VLAN_CFI`).
pub const VLAN_CFI: u16 = 0x1000;
/// Number of VLAN tags extraction parses (OVS `FLOW_MAX_VLAN_HEADERS`).
pub const MAX_VLAN_HEADERS: usize = 2;
/// Number of MPLS label stack entries kept in the key (OVS `FLOW_MAX_MPLS_LABELS`).
pub const MAX_MPLS_LABELS: usize = 3;
/// `nw_frag` bit: the packet is a fragment (OVS `FLOW_NW_FRAG_ANY`).
pub const FRAG_ANY: u8 = 0x1;
/// `nw_frag` bit: the packet is a fragment with a non-zero offset (OVS `FLOW_NW_FRAG_LATER`).
pub const FRAG_LATER: u8 = 0x2;

const ETH_HEADER_LEN: usize = 14;
const ETH_TYPE_IPV4: u16 = 0x0800;
const ETH_TYPE_ARP: u16 = 0x0806;
const ETH_TYPE_RARP: u16 = 0x8035;
const ETH_TYPE_VLAN_8021Q: u16 = 0x8100;
const ETH_TYPE_VLAN_8021AD: u16 = 0x88a8;
const ETH_TYPE_IPV6: u16 = 0x86dd;
const ETH_TYPE_MPLS: u16 = 0x8847;
const ETH_TYPE_MPLS_MCAST: u16 = 0x8848;
const LLC_SNAP_LEN: usize = 8;
const ARP_ETH_IPV4_LEN: usize = 28;
const IPV4_HEADER_LEN: usize = 20;
const IPV6_HEADER_LEN: usize = 40;
const IPPROTO_HOPOPTS: u8 = 0;
const IPPROTO_ICMP: u8 = 1;
const IPPROTO_IGMP: u8 = 2;
const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;
const IPPROTO_ROUTING: u8 = 43;
const IPPROTO_FRAGMENT: u8 = 44;
const IPPROTO_AH: u8 = 51;
const IPPROTO_ICMPV6: u8 = 58;
const IPPROTO_DSTOPTS: u8 = 60;
const IPPROTO_SCTP: u8 = 132;
const TCP_HEADER_LEN: usize = 20;
const UDP_HEADER_LEN: usize = 8;
const SCTP_HEADER_LEN: usize = 12;
const ICMP_HEADER_LEN: usize = 8;
const ND_NEIGHBOR_SOLICIT: u8 = 135;
const ND_NEIGHBOR_ADVERT: u8 = 136;
const ND_OPT_SOURCE_LINKADDR: u8 = 1;
const ND_OPT_TARGET_LINKADDR: u8 = 2;
const ND_LLA_OPT_LEN: usize = 8;

/// Why extraction stopped before the end of the headers it knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StopReason {
    /// A header runs past the end of the data (or of the IP payload).
    Truncated,
    /// The ethertype is not one extraction parses beneath L2.
    UnknownEthertype,
    /// More VLAN tags than [`MAX_VLAN_HEADERS`]; `dl_type` is the next TPID.
    TooManyVlans,
    /// An 802.3 frame without an LLC/SNAP ethertype (`dl_type` is [`DL_TYPE_NONE`]).
    NoEthertype,
    /// MPLS: the payload beneath the label stack is not parsed (OVS does the same).
    MplsPayload,
    /// An IPv4 or IPv6 header with inconsistent lengths (IHL < 5, total length below the
    /// header length).
    BadIpHeader,
    /// ARP for something other than Ethernet/IPv4.
    UnsupportedArp,
    /// A TCP header with a data offset below 5 words.
    BadTcpHeader,
    /// A non-first IP fragment: no L4 header to parse.
    LaterFragment,
    /// An IP protocol extraction does not parse (its payload is not looked at).
    UnknownIpProto,
    /// A Neighbor Discovery option is malformed or repeated.
    BadNdOption,
}

impl StopReason {
    /// Kebab-case name, as used in traces and counters.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Truncated => "truncated",
            StopReason::UnknownEthertype => "unknown-ethertype",
            StopReason::TooManyVlans => "too-many-vlans",
            StopReason::NoEthertype => "no-ethertype",
            StopReason::MplsPayload => "mpls-payload",
            StopReason::BadIpHeader => "bad-ip-header",
            StopReason::UnsupportedArp => "unsupported-arp",
            StopReason::BadTcpHeader => "bad-tcp-header",
            StopReason::LaterFragment => "later-fragment",
            StopReason::UnknownIpProto => "unknown-ip-proto",
            StopReason::BadNdOption => "bad-nd-option",
        }
    }

    /// True if the packet is malformed (as opposed to well formed but carrying something
    /// extraction does not look into).
    pub fn is_malformed(self) -> bool {
        matches!(
            self,
            StopReason::Truncated
                | StopReason::BadIpHeader
                | StopReason::BadTcpHeader
                | StopReason::BadNdOption
        )
    }
}

/// Where and why extraction stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ParseStop {
    /// Byte offset of the header that was not (fully) parsed.
    pub offset: usize,
    /// Why parsing stopped there.
    pub reason: StopReason,
}

/// What [`extract`] learned about the layout of the frame (OVS `l2_5_ofs`, `l3_ofs`,
/// `l4_ofs`, `l2_pad_size`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExtractInfo {
    /// Start of the Ethernet header; `None` if the frame is shorter than one.
    pub l2: Option<usize>,
    /// Start of the MPLS label stack, if any.
    pub l2_5: Option<usize>,
    /// Start of the L3 header (just past the Ethernet header, VLAN tags, LLC/SNAP and MPLS
    /// labels), whatever the ethertype.
    pub l3: Option<usize>,
    /// Start of the L4 header: set when an IPv4 or IPv6 header (with its extension headers)
    /// was parsed, even if the L4 header itself is absent.
    pub l4: Option<usize>,
    /// Bytes after the IP packet's end (its total or payload length): Ethernet padding.
    pub l2_pad_len: usize,
    /// Number of VLAN tags parsed (0 to [`MAX_VLAN_HEADERS`]).
    pub n_vlans: usize,
    /// Where and why parsing stopped early; `None` if every header it knows was parsed.
    pub stop: Option<ParseStop>,
}

impl ExtractInfo {
    fn set_stop(&mut self, offset: usize, reason: StopReason) {
        if self.stop.is_none() {
            self.stop = Some(ParseStop { offset, reason });
        }
    }
}

/// Clears the L2, L3 and L4 words of `key`, leaving the metadata words alone.
pub fn clear_packet_fields(key: &mut FlowKey) {
    let start = STAGES[1].start;
    for w in &mut key.words[start..KEY_WORDS] {
        *w = 0;
    }
}

/// A read-only cursor over the frame; every read is bounds-checked against `end`.
struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
    end: usize,
}

impl Cursor<'_> {
    #[inline(always)]
    fn remaining(&self) -> usize {
        self.end.saturating_sub(self.pos)
    }

    #[inline(always)]
    fn bytes(&self, at: usize, len: usize) -> Option<&[u8]> {
        let start = self.pos.checked_add(at)?;
        let stop = start.checked_add(len)?;
        if stop > self.end {
            return None;
        }
        self.data.get(start..stop)
    }

    #[inline(always)]
    fn u8(&self, at: usize) -> Option<u8> {
        self.bytes(at, 1).map(|b| b[0])
    }

    #[inline(always)]
    fn u16(&self, at: usize) -> Option<u16> {
        self.bytes(at, 2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }

    #[inline(always)]
    fn u32(&self, at: usize) -> Option<u32> {
        self.bytes(at, 4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    #[inline(always)]
    fn u128(&self, at: usize) -> Option<u128> {
        let b = self.bytes(at, 16)?;
        let mut a = [0u8; 16];
        a.copy_from_slice(b);
        Some(u128::from_be_bytes(a))
    }

    #[inline(always)]
    fn mac(&self, at: usize) -> Option<u64> {
        self.bytes(at, 6)
            .map(|b| b.iter().fold(0u64, |acc, x| (acc << 8) | u64::from(*x)))
    }

    /// Advances by `len` if that many bytes remain.
    #[inline(always)]
    fn try_pull(&mut self, len: usize) -> bool {
        if len <= self.remaining() {
            self.pos += len;
            true
        } else {
            false
        }
    }
}

/// Extracts the L2..L4 fields of the Ethernet frame `data` into `key` (OVS
/// `miniflow_extract`); see the module documentation for the exact rules. The metadata
/// words of `key` are kept; its L2..L4 words are cleared first. Never panics.
///
/// Inlined into its callers (the datapath calls it once per packet): the [`ExtractInfo`] is
/// then built in place instead of being copied out of a stack frame.
#[inline]
pub fn extract(data: &[u8], key: &mut FlowKey) -> ExtractInfo {
    clear_packet_fields(key);
    let mut info = ExtractInfo::default();
    let mut c = Cursor {
        data,
        pos: 0,
        end: data.len(),
    };
    let Some(dl_type) = parse_l2(&mut c, key, &mut info) else {
        return info;
    };
    key.set_dl_type(dl_type);

    if dl_type == ETH_TYPE_MPLS || dl_type == ETH_TYPE_MPLS_MCAST {
        parse_mpls(&mut c, key, &mut info);
        info.l3 = Some(c.pos);
        return info;
    }
    info.l3 = Some(c.pos);

    let (nw_proto, nw_frag) = match dl_type {
        ETH_TYPE_IPV4 => match parse_ipv4(&mut c, key, &mut info) {
            Some(v) => v,
            None => return info,
        },
        ETH_TYPE_IPV6 => match parse_ipv6(&mut c, key, &mut info) {
            Some(v) => v,
            None => return info,
        },
        ETH_TYPE_ARP | ETH_TYPE_RARP => {
            parse_arp(&c, key, &mut info);
            return info;
        }
        _ => {
            info.set_stop(c.pos, StopReason::UnknownEthertype);
            return info;
        }
    };
    info.l4 = Some(c.pos);
    if nw_frag & FRAG_LATER != 0 {
        info.set_stop(c.pos, StopReason::LaterFragment);
        return info;
    }
    parse_l4(&mut c, nw_proto, key, &mut info);
    info
}

/// Ethernet, VLAN tags and the ethertype (OVS `parse_vlan`, `parse_ethertype`). Returns
/// `None` if the frame is shorter than an Ethernet header.
#[inline]
fn parse_l2(c: &mut Cursor<'_>, key: &mut FlowKey, info: &mut ExtractInfo) -> Option<u16> {
    if c.remaining() < ETH_HEADER_LEN {
        info.set_stop(0, StopReason::Truncated);
        return None;
    }
    info.l2 = Some(0);
    key.set_dl_dst(c.mac(0)?);
    key.set_dl_src(c.mac(6)?);
    c.pos += 12;

    // IEEE 802.1Q § 9.5: a tag is a TPID followed by the 16-bit TCI.
    let mut tpid = c.u16(0)?;
    while tpid == ETH_TYPE_VLAN_8021Q || tpid == ETH_TYPE_VLAN_8021AD {
        if info.n_vlans == MAX_VLAN_HEADERS {
            info.set_stop(c.pos, StopReason::TooManyVlans);
            break;
        }
        // The tag and the ethertype behind it must be present.
        if c.remaining() < 6 {
            info.set_stop(c.pos, StopReason::Truncated);
            break;
        }
        let tci = c.u16(2)? | VLAN_CFI;
        if info.n_vlans == 0 {
            key.set_vlan_tpid(tpid);
            key.set_vlan_tci(tci);
        } else {
            key.set_vlan_tpid1(tpid);
            key.set_vlan_tci1(tci);
        }
        info.n_vlans += 1;
        c.pos += 4;
        tpid = c.u16(0)?;
    }

    // The type/length field.
    c.pos += 2;
    if tpid >= ETH_TYPE_MIN {
        return Some(tpid);
    }
    // IEEE 802.2 LLC with a SNAP header (RFC 1042): AA-AA-03, OUI 00-00-00, ethertype.
    if let Some([0xaa, 0xaa, 0x03, 0x00, 0x00, 0x00, hi, lo]) = c.bytes(0, LLC_SNAP_LEN) {
        let snap_type = u16::from_be_bytes([*hi, *lo]);
        c.pos += LLC_SNAP_LEN;
        if snap_type >= ETH_TYPE_MIN {
            return Some(snap_type);
        }
    }
    info.l3 = Some(c.pos);
    info.set_stop(c.pos, StopReason::NoEthertype);
    Some(DL_TYPE_NONE)
}

/// The MPLS label stack (RFC 3032 § 2.1): up to [`MAX_MPLS_LABELS`] entries are stored, and
/// the stack is skipped up to its bottom.
fn parse_mpls(c: &mut Cursor<'_>, key: &mut FlowKey, info: &mut ExtractInfo) {
    info.l2_5 = Some(c.pos);
    let mut count = 0;
    while let Some(lse) = c.u32(0) {
        match count {
            0 => key.set_mpls_lse0(lse),
            1 => key.set_mpls_lse1(lse),
            2 => key.set_mpls_lse2(lse),
            _ => {}
        }
        count += 1;
        c.pos += 4;
        // RFC 3032 § 2.1: the S (bottom of stack) bit is bit 8 of the entry.
        if lse & 0x100 != 0 {
            info.set_stop(c.pos, StopReason::MplsPayload);
            return;
        }
    }
    info.set_stop(c.pos, StopReason::Truncated);
}

/// IPv4 (RFC 791 § 3.1) with OVS's `ipv4_sanity_check`. Returns the protocol and fragment
/// bits, with the cursor on the L4 header and its end at the packet's total length.
#[inline]
fn parse_ipv4(c: &mut Cursor<'_>, key: &mut FlowKey, info: &mut ExtractInfo) -> Option<(u8, u8)> {
    let size = c.remaining();
    if size < IPV4_HEADER_LEN {
        info.set_stop(c.pos, StopReason::Truncated);
        return None;
    }
    let ip_len = usize::from(c.u8(0)? & 0x0f) * 4;
    if ip_len < IPV4_HEADER_LEN {
        info.set_stop(c.pos, StopReason::BadIpHeader);
        return None;
    }
    let tot_len = usize::from(c.u16(2)?);
    if size < ip_len || tot_len > size {
        info.set_stop(c.pos, StopReason::Truncated);
        return None;
    }
    if ip_len > tot_len || size - tot_len > usize::from(u16::MAX) {
        info.set_stop(c.pos, StopReason::BadIpHeader);
        return None;
    }
    info.l2_pad_len = size - tot_len;
    c.end = c.pos + tot_len;

    key.set_nw_src(c.u32(12)?);
    key.set_nw_dst(c.u32(16)?);
    let tos = c.u8(1)?;
    let ttl = c.u8(8)?;
    let proto = c.u8(9)?;
    // RFC 791 § 3.1: flags (3 bits, MF = 0x2000) and the 13-bit fragment offset.
    let frag_off = c.u16(6)?;
    let mut frag = 0;
    if frag_off & 0x3fff != 0 {
        frag = FRAG_ANY;
        if frag_off & 0x1fff != 0 {
            frag |= FRAG_LATER;
        }
    }
    key.set_nw_tos(tos);
    key.set_nw_ttl(ttl);
    key.set_nw_proto(proto);
    key.set_nw_frag(frag);
    c.pos += ip_len;
    Some((proto, frag))
}

/// IPv6 (RFC 8200 § 3) and its extension headers, with OVS's `ipv6_sanity_check` and
/// `parse_ipv6_ext_hdrs`.
fn parse_ipv6(c: &mut Cursor<'_>, key: &mut FlowKey, info: &mut ExtractInfo) -> Option<(u8, u8)> {
    let size = c.remaining();
    if size < IPV6_HEADER_LEN {
        info.set_stop(c.pos, StopReason::Truncated);
        return None;
    }
    let plen = usize::from(c.u16(4)?);
    if plen + IPV6_HEADER_LEN > size {
        info.set_stop(c.pos, StopReason::Truncated);
        return None;
    }
    if size - (plen + IPV6_HEADER_LEN) > usize::from(u16::MAX) {
        info.set_stop(c.pos, StopReason::BadIpHeader);
        return None;
    }
    info.l2_pad_len = size - (plen + IPV6_HEADER_LEN);
    let tc_flow = c.u32(0)?;
    let hlim = c.u8(7)?;
    let mut proto = c.u8(6)?;
    key.set_ipv6_src(c.u128(8)?);
    key.set_ipv6_dst(c.u128(24)?);
    c.pos += IPV6_HEADER_LEN;
    c.end = c.pos + plen;

    let mut frag = 0;
    if !walk_ipv6_ext_headers(c, &mut proto, &mut frag) {
        info.set_stop(c.pos, StopReason::Truncated);
        return None;
    }
    // RFC 8200 § 3: version (4) | traffic class (8) | flow label (20).
    key.set_ipv6_label(tc_flow & 0x000f_ffff);
    key.set_nw_tos((tc_flow.to_be_bytes()[0] << 4) | (tc_flow.to_be_bytes()[1] >> 4));
    key.set_nw_ttl(hlim);
    key.set_nw_proto(proto);
    key.set_nw_frag(frag);
    Some((proto, frag))
}

/// Walks the IPv6 extension headers (RFC 8200 § 4; AH per RFC 4302 § 2.2) from the cursor,
/// exactly as OVS `parse_ipv6_ext_hdrs__`. Returns `false` if a header runs past the data.
fn walk_ipv6_ext_headers(c: &mut Cursor<'_>, proto: &mut u8, frag: &mut u8) -> bool {
    loop {
        if !matches!(
            *proto,
            IPPROTO_HOPOPTS | IPPROTO_ROUTING | IPPROTO_DSTOPTS | IPPROTO_AH | IPPROTO_FRAGMENT
        ) {
            return true;
        }
        // Every extension header is at least 8 bytes long.
        if c.remaining() < 8 {
            return false;
        }
        let (Some(next), Some(len)) = (c.u8(0), c.u8(1)) else {
            return false;
        };
        let len = usize::from(len);
        match *proto {
            IPPROTO_HOPOPTS | IPPROTO_DSTOPTS | IPPROTO_ROUTING => {
                *proto = next;
                if !c.try_pull((len + 1) * 8) {
                    return false;
                }
            }
            IPPROTO_AH => {
                *proto = next;
                if !c.try_pull((len + 2) * 4) {
                    return false;
                }
            }
            _ => {
                // RFC 8200 § 4.5: offset (13 bits) | res (2) | M (1).
                let Some(offlg) = c.u16(2) else {
                    return false;
                };
                *proto = next;
                if !c.try_pull(8) {
                    return false;
                }
                if offlg != 0 {
                    *frag = FRAG_ANY;
                    if offlg & 0xfff8 != 0 {
                        *frag |= FRAG_LATER;
                        *proto = IPPROTO_FRAGMENT;
                        return true;
                    }
                }
            }
        }
    }
}

/// ARP/RARP for Ethernet/IPv4 (RFC 826).
fn parse_arp(c: &Cursor<'_>, key: &mut FlowKey, info: &mut ExtractInfo) {
    let Some(arp) = c.bytes(0, ARP_ETH_IPV4_LEN) else {
        info.set_stop(c.pos, StopReason::Truncated);
        return;
    };
    if arp[0..6] != [0x00, 0x01, 0x08, 0x00, 6, 4] {
        info.set_stop(c.pos, StopReason::UnsupportedArp);
        return;
    }
    let be32 = |o: usize| u32::from_be_bytes([arp[o], arp[o + 1], arp[o + 2], arp[o + 3]]);
    let mac = |o: usize| {
        arp[o..o + 6]
            .iter()
            .fold(0u64, |acc, x| (acc << 8) | u64::from(*x))
    };
    key.set_nw_src(be32(14));
    key.set_nw_dst(be32(24));
    // OVS matches only the low 8 bits of the opcode, and only if the opcode fits in them.
    if arp[6] == 0 {
        key.set_nw_proto(arp[7]);
    }
    key.set_arp_sha(mac(8));
    key.set_arp_tha(mac(18));
}

/// The L4 header chosen by `proto`, within the IP payload.
#[inline]
fn parse_l4(c: &mut Cursor<'_>, proto: u8, key: &mut FlowKey, info: &mut ExtractInfo) {
    let size = c.remaining();
    let need = match proto {
        IPPROTO_TCP => TCP_HEADER_LEN,
        IPPROTO_UDP => UDP_HEADER_LEN,
        IPPROTO_SCTP => SCTP_HEADER_LEN,
        IPPROTO_ICMP | IPPROTO_IGMP | IPPROTO_ICMPV6 => ICMP_HEADER_LEN,
        _ => {
            info.set_stop(c.pos, StopReason::UnknownIpProto);
            return;
        }
    };
    if size < need {
        info.set_stop(c.pos, StopReason::Truncated);
        return;
    }
    let (Some(w0), Some(w1)) = (c.u16(0), c.u16(2)) else {
        return;
    };
    match proto {
        IPPROTO_TCP => {
            // RFC 9293 § 3.1: data offset (4) | reserved (4) | flags (8); OVS keeps 12 bits.
            let Some(ctl) = c.u16(12) else {
                return;
            };
            let hdr_len = usize::from(ctl >> 12) * 4;
            if hdr_len < TCP_HEADER_LEN {
                info.set_stop(c.pos, StopReason::BadTcpHeader);
                return;
            }
            if size < hdr_len {
                info.set_stop(c.pos, StopReason::Truncated);
                return;
            }
            key.set_tcp_flags(ctl & 0x0fff);
            key.set_tp_src(w0);
            key.set_tp_dst(w1);
        }
        IPPROTO_UDP | IPPROTO_SCTP => {
            key.set_tp_src(w0);
            key.set_tp_dst(w1);
        }
        IPPROTO_ICMP | IPPROTO_IGMP => {
            key.set_tp_src(w0 >> 8);
            key.set_tp_dst(w0 & 0xff);
        }
        _ => {
            key.set_tp_src(w0 >> 8);
            key.set_tp_dst(w0 & 0xff);
            let [icmp_type, icmp_code] = w0.to_be_bytes();
            if icmp_code == 0
                && (icmp_type == ND_NEIGHBOR_SOLICIT || icmp_type == ND_NEIGHBOR_ADVERT)
            {
                c.pos += ICMP_HEADER_LEN;
                parse_nd(c, key, info);
            }
        }
    }
}

/// Neighbor Discovery NS/NA body (RFC 4861 § 4.3, § 4.4) and its link-layer address options
/// (§ 4.6.1), as OVS `parse_icmpv6`.
fn parse_nd(c: &mut Cursor<'_>, key: &mut FlowKey, info: &mut ExtractInfo) {
    let Some(target) = c.u128(0) else {
        info.set_stop(c.pos, StopReason::Truncated);
        return;
    };
    c.pos += 16;
    let mut sll = 0u64;
    let mut tll = 0u64;
    let mut opt_type = 0u8;
    let mut valid = true;
    while c.remaining() >= ND_LLA_OPT_LEN {
        let (Some(ty), Some(len)) = (c.u8(0), c.u8(1)) else {
            break;
        };
        let opt_len = usize::from(len) * 8;
        if opt_len == 0 || opt_len > c.remaining() {
            info.set_stop(c.pos, StopReason::BadNdOption);
            break;
        }
        if opt_len == ND_LLA_OPT_LEN
            && (ty == ND_OPT_SOURCE_LINKADDR || ty == ND_OPT_TARGET_LINKADDR)
        {
            let slot = if ty == ND_OPT_SOURCE_LINKADDR {
                &mut sll
            } else {
                &mut tll
            };
            // A repeated option is an error, unless the first one carried a zero address.
            if *slot != 0 {
                info.set_stop(c.pos, StopReason::BadNdOption);
                valid = false;
                break;
            }
            *slot = c.mac(2).unwrap_or(0);
            if opt_type == 0 {
                opt_type = ty;
            }
        }
        c.pos += opt_len;
    }
    if valid {
        key.set_nd_target(target);
        key.set_arp_sha(sll);
        key.set_arp_tha(tll);
    }
    key.set_tcp_flags(u16::from(opt_type));
}

#[cfg(test)]
mod tests;
