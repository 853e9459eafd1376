//! IPv6 headers (RFC 8200 § 3) and the common extension headers (§ 4): hop-by-hop options,
//! routing, fragment, destination options, and the authentication header (RFC 4302).
//!
//! [`Packet::new_checked`] validates once that the buffer holds the fixed header and the
//! payload length it declares; after that no accessor panics, and [`Packet::payload`]
//! stops at the payload length. [`ExtHeader`] and [`FragmentHeader`] are views of one
//! extension header each, and [`walk`] follows the chain to the upper-layer protocol,
//! reporting fragment information on the way.

use std::net::Ipv6Addr;

use super::ip::Protocol;
use super::{get16, get32, len16, put16, put32, Error, Result};

/// Length of the fixed header.
pub const HEADER_LEN: usize = 40;
/// Length of a fragment header (RFC 8200 § 4.5).
pub const FRAGMENT_HEADER_LEN: usize = 8;

/// A view of an IPv6 packet.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer, checking the fixed header and payload length.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks that the buffer holds the fixed header and the declared payload.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN || len < HEADER_LEN + usize::from(self.payload_len()) {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// Returns the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Version (6).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }

    /// Traffic class (DSCP << 2 | ECN).
    pub fn traffic_class(&self) -> u8 {
        let b = self.buffer.as_ref();
        (b[0] << 4) | (b[1] >> 4)
    }

    /// Flow label (20 bits).
    pub fn flow_label(&self) -> u32 {
        get32(self.buffer.as_ref(), 0) & 0x000f_ffff
    }

    /// Payload length (extension headers included).
    pub fn payload_len(&self) -> u16 {
        get16(self.buffer.as_ref(), 4)
    }

    /// Next header.
    pub fn next_header(&self) -> Protocol {
        Protocol::from(self.buffer.as_ref()[6])
    }

    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[7]
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv6Addr {
        addr(&self.buffer.as_ref()[8..24])
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv6Addr {
        addr(&self.buffer.as_ref()[24..40])
    }

    /// The payload, up to the payload length.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..HEADER_LEN + usize::from(self.payload_len())]
    }
}

fn addr(b: &[u8]) -> Ipv6Addr {
    let mut a = [0u8; 16];
    a.copy_from_slice(b);
    Ipv6Addr::from(a)
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets version, traffic class and flow label at once.
    pub fn set_version_tc_flow(&mut self, version: u8, traffic_class: u8, flow_label: u32) {
        let w = (u32::from(version & 0x0f) << 28)
            | (u32::from(traffic_class) << 20)
            | (flow_label & 0x000f_ffff);
        put32(self.buffer.as_mut(), 0, w);
    }

    /// Sets the payload length.
    pub fn set_payload_len(&mut self, v: u16) {
        put16(self.buffer.as_mut(), 4, v);
    }

    /// Sets the next header.
    pub fn set_next_header(&mut self, v: Protocol) {
        self.buffer.as_mut()[6] = v.into();
    }

    /// Sets the hop limit.
    pub fn set_hop_limit(&mut self, v: u8) {
        self.buffer.as_mut()[7] = v;
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, a: Ipv6Addr) {
        self.buffer.as_mut()[8..24].copy_from_slice(&a.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, a: Ipv6Addr) {
        self.buffer.as_mut()[24..40].copy_from_slice(&a.octets());
    }

    /// The payload, mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

/// An IPv6 fixed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Source address.
    pub src_addr: Ipv6Addr,
    /// Destination address.
    pub dst_addr: Ipv6Addr,
    /// Next header.
    pub next_header: Protocol,
    /// Payload length (extension headers included).
    pub payload_len: usize,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
}

impl Repr {
    /// Parses a checked packet (version must be 6).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
        p.check_len()?;
        if p.version() != 6 {
            return Err(Error::Malformed("IP version is not 6"));
        }
        Ok(Repr {
            src_addr: p.src_addr(),
            dst_addr: p.dst_addr(),
            next_header: p.next_header(),
            payload_len: usize::from(p.payload_len()),
            hop_limit: p.hop_limit(),
            traffic_class: p.traffic_class(),
            flow_label: p.flow_label(),
        })
    }

    /// Length of the emitted header (40).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header; fails if the payload length does not fit in 16 bits.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) -> Result<()> {
        p.set_version_tc_flow(6, self.traffic_class, self.flow_label);
        p.set_payload_len(len16(self.payload_len)?);
        p.set_next_header(self.next_header);
        p.set_hop_limit(self.hop_limit);
        p.set_src_addr(self.src_addr);
        p.set_dst_addr(self.dst_addr);
        Ok(())
    }
}

/// A view of a generic extension header: next header, length, data. The length rule
/// depends on the kind: `(len + 1) * 8` for hop-by-hop, routing and destination options
/// (RFC 8200 § 4.3–4.6), `(len + 2) * 4` for AH (RFC 4302 § 2.2), 8 for fragment.
#[derive(Debug, Clone)]
pub struct ExtHeader<T: AsRef<[u8]>> {
    buffer: T,
    kind: Protocol,
}

impl<T: AsRef<[u8]>> ExtHeader<T> {
    /// Wraps a buffer holding an extension header of `kind` without checking it.
    pub const fn new_unchecked(buffer: T, kind: Protocol) -> ExtHeader<T> {
        ExtHeader { buffer, kind }
    }

    /// Wraps a buffer, checking that it holds the whole header.
    pub fn new_checked(buffer: T, kind: Protocol) -> Result<ExtHeader<T>> {
        let h = Self::new_unchecked(buffer, kind);
        h.check_len()?;
        Ok(h)
    }

    /// Checks that the buffer holds 8 bytes and the declared length.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < 8 || len < self.header_len() {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The kind of header.
    pub fn kind(&self) -> Protocol {
        self.kind
    }

    /// Next header.
    pub fn next_header(&self) -> Protocol {
        Protocol::from(self.buffer.as_ref()[0])
    }

    /// Length of the whole header in bytes.
    pub fn header_len(&self) -> usize {
        let raw = usize::from(self.buffer.as_ref()[1]);
        match self.kind {
            Protocol::Ah => (raw + 2) * 4,
            Protocol::Ipv6Frag => FRAGMENT_HEADER_LEN,
            _ => (raw + 1) * 8,
        }
    }

    /// The header's bytes after next header and length.
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[2..self.header_len()]
    }

    /// The bytes after the header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> ExtHeader<&'a T> {
    /// The header's data with the lifetime of the buffer.
    pub fn data_ref(&self) -> &'a [u8] {
        let len = self.header_len();
        &self.buffer.as_ref()[2..len]
    }
}

impl<T: AsRef<[u8]>> ExtHeader<T> {
    /// Routing type (routing headers only, RFC 8200 § 4.4).
    pub fn routing_type(&self) -> u8 {
        self.buffer.as_ref()[2]
    }

    /// Segments left (routing headers only, RFC 8200 § 4.4).
    pub fn segments_left(&self) -> u8 {
        self.buffer.as_ref()[3]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ExtHeader<T> {
    /// Sets the next header.
    pub fn set_next_header(&mut self, v: Protocol) {
        self.buffer.as_mut()[0] = v.into();
    }

    /// Sets the length field from the header's total length in bytes (a multiple of 8, or
    /// of 4 for AH); fails if it has no encoding.
    pub fn set_header_len(&mut self, len: usize) -> Result<()> {
        let raw = match self.kind {
            Protocol::Ah if len % 4 == 0 && len >= 8 => len / 4 - 2,
            Protocol::Ipv6Frag if len == FRAGMENT_HEADER_LEN => 0,
            Protocol::Ah | Protocol::Ipv6Frag => {
                return Err(Error::Malformed("extension header length"))
            }
            _ if len % 8 == 0 && len >= 8 => len / 8 - 1,
            _ => return Err(Error::Malformed("extension header length")),
        };
        self.buffer.as_mut()[1] =
            u8::try_from(raw).map_err(|_| Error::Malformed("extension header too long"))?;
        Ok(())
    }

    /// The header's bytes after next header and length, mutably.
    pub fn data_mut(&mut self) -> &mut [u8] {
        let len = self.header_len();
        &mut self.buffer.as_mut()[2..len]
    }
}

/// A hop-by-hop, routing, destination options or AH extension header, borrowing its data
/// (the bytes after next header and length: options, routing data, SPI and ICV, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtHeaderRepr<'a> {
    /// Which header this is.
    pub kind: Protocol,
    /// Next header.
    pub next_header: Protocol,
    /// The data after next header and length.
    pub data: &'a [u8],
}

impl<'a> ExtHeaderRepr<'a> {
    /// Parses a checked extension header.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(h: &ExtHeader<&'a T>) -> Result<ExtHeaderRepr<'a>> {
        h.check_len()?;
        Ok(ExtHeaderRepr {
            kind: h.kind(),
            next_header: h.next_header(),
            data: h.data_ref(),
        })
    }

    /// Length of the emitted header: the data plus 2 bytes.
    pub fn buffer_len(&self) -> usize {
        self.data.len() + 2
    }

    /// Writes the header; fails if [`ExtHeaderRepr::buffer_len`] is not a length the kind
    /// can encode (a multiple of 8 bytes, of 4 for AH).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut ExtHeader<T>) -> Result<()> {
        h.kind = self.kind;
        h.set_next_header(self.next_header);
        h.set_header_len(self.buffer_len())?;
        h.data_mut().copy_from_slice(self.data);
        Ok(())
    }
}

/// A view of a fragment header (RFC 8200 § 4.5).
#[derive(Debug, Clone)]
pub struct FragmentHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> FragmentHeader<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> FragmentHeader<T> {
        FragmentHeader { buffer }
    }

    /// Wraps a buffer, checking that it holds 8 bytes.
    pub fn new_checked(buffer: T) -> Result<FragmentHeader<T>> {
        if buffer.as_ref().len() < FRAGMENT_HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Self::new_unchecked(buffer))
    }

    /// Next header.
    pub fn next_header(&self) -> Protocol {
        Protocol::from(self.buffer.as_ref()[0])
    }

    /// The raw offset/flags word (offset << 3 | res | M).
    pub fn offset_flags(&self) -> u16 {
        get16(self.buffer.as_ref(), 2)
    }

    /// Fragment offset in 8-byte units.
    pub fn frag_offset(&self) -> u16 {
        self.offset_flags() >> 3
    }

    /// More-fragments flag.
    pub fn more_frags(&self) -> bool {
        self.offset_flags() & 1 != 0
    }

    /// Identification.
    pub fn ident(&self) -> u32 {
        get32(self.buffer.as_ref(), 4)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> FragmentHeader<T> {
    /// Sets the next header.
    pub fn set_next_header(&mut self, v: Protocol) {
        self.buffer.as_mut()[0] = v.into();
        self.buffer.as_mut()[1] = 0;
    }

    /// Sets offset (8-byte units) and the M flag.
    pub fn set_offset_more(&mut self, offset: u16, more: bool) {
        put16(
            self.buffer.as_mut(),
            2,
            ((offset & 0x1fff) << 3) | u16::from(more),
        );
    }

    /// Sets the identification.
    pub fn set_ident(&mut self, v: u32) {
        put32(self.buffer.as_mut(), 4, v);
    }
}

/// A fragment header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FragmentRepr {
    /// Next header.
    pub next_header: Protocol,
    /// Offset in 8-byte units (13 bits).
    pub frag_offset: u16,
    /// More fragments.
    pub more_frags: bool,
    /// Identification.
    pub ident: u32,
}

impl FragmentRepr {
    /// Parses a fragment header.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(h: &FragmentHeader<&T>) -> Result<FragmentRepr> {
        if h.buffer.as_ref().len() < FRAGMENT_HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(FragmentRepr {
            next_header: h.next_header(),
            frag_offset: h.frag_offset(),
            more_frags: h.more_frags(),
            ident: h.ident(),
        })
    }

    /// Length of the emitted header (8).
    pub const fn buffer_len(&self) -> usize {
        FRAGMENT_HEADER_LEN
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut FragmentHeader<T>) {
        h.set_next_header(self.next_header);
        h.set_offset_more(self.frag_offset, self.more_frags);
        h.set_ident(self.ident);
    }
}

/// What [`walk`] found in an extension header chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Walk {
    /// The upper-layer protocol (the first non-extension next header; for a non-first
    /// fragment, the fragment's next header).
    pub protocol: Protocol,
    /// Offset of the upper-layer header (or of the fragment data) from the start of the
    /// walked bytes.
    pub offset: usize,
    /// The fragment header, if one was found.
    pub fragment: Option<FragmentRepr>,
    /// Number of extension headers walked.
    pub n_headers: usize,
}

impl Walk {
    /// True if the packet is a fragment with a non-zero offset: the upper-layer header is
    /// not in it.
    pub fn is_later_fragment(&self) -> bool {
        self.fragment.is_some_and(|f| f.frag_offset != 0)
    }
}

/// Walks the extension headers of `payload` (an IPv6 payload whose first header is
/// `next_header`) to the upper-layer protocol. Stops after a fragment header with a
/// non-zero offset (nothing after it can be parsed). Fails with [`Error::Truncated`] if a
/// header runs past the data.
pub fn walk(next_header: Protocol, payload: &[u8]) -> Result<Walk> {
    let mut w = Walk {
        protocol: next_header,
        offset: 0,
        fragment: None,
        n_headers: 0,
    };
    while w.protocol.is_ipv6_extension() {
        let rest = payload.get(w.offset..).ok_or(Error::Truncated)?;
        let h = ExtHeader::new_checked(rest, w.protocol)?;
        let next = h.next_header();
        if w.protocol == Protocol::Ipv6Frag {
            let f = FragmentRepr::parse(&FragmentHeader::new_checked(rest)?)?;
            w.fragment = Some(f);
            w.offset += FRAGMENT_HEADER_LEN;
            w.n_headers += 1;
            w.protocol = next;
            if f.frag_offset != 0 {
                break;
            }
            continue;
        }
        w.offset += h.header_len();
        w.n_headers += 1;
        w.protocol = next;
    }
    Ok(w)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::builder::{Ipv6ExtKind, PacketBuilder};

    fn fixture() -> Vec<u8> {
        // fe80::1 -> ff02::1, TC 0xb8, label 0x12345, UDP, 8 bytes payload.
        let mut v = vec![0x6b, 0x81, 0x23, 0x45, 0x00, 0x08, 0x11, 0x40];
        v.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        v.extend_from_slice(&[0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        v.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        v
    }

    #[test]
    fn packet_deconstruct_fixture() {
        let buf = fixture();
        let p = Packet::new_checked(&buf[..]).expect("ipv6");
        assert_eq!(p.version(), 6);
        assert_eq!(p.traffic_class(), 0xb8);
        assert_eq!(p.flow_label(), 0x12345);
        assert_eq!(p.payload_len(), 8);
        assert_eq!((p.next_header(), p.hop_limit()), (Protocol::Udp, 64));
        assert_eq!(p.src_addr(), Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1));
        assert_eq!(p.dst_addr(), Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1));
        assert_eq!(p.payload(), &[1, 2, 3, 4, 5, 6, 7, 8]);
    }

    #[test]
    fn repr_emit_matches_fixture() {
        let buf = fixture();
        let r = Repr::parse(&Packet::new_checked(&buf[..]).expect("ipv6")).expect("repr");
        let mut out = vec![0u8; 48];
        r.emit(&mut Packet::new_unchecked(&mut out[..]))
            .expect("emit");
        out[40..].copy_from_slice(&buf[40..]);
        assert_eq!(out, buf);
    }

    #[test]
    fn packet_truncated_and_bad_version_are_rejected() {
        let buf = fixture();
        assert_eq!(
            Packet::new_checked(&buf[..39]).err(),
            Some(Error::Truncated)
        );
        assert_eq!(
            Packet::new_checked(&buf[..47]).err(),
            Some(Error::Truncated)
        );
        let mut bad = buf;
        bad[0] = 0x4b;
        let p = Packet::new_checked(&bad[..]).expect("ipv6");
        assert!(matches!(Repr::parse(&p), Err(Error::Malformed(_))));
    }

    #[test]
    fn walk_finds_upper_layer_after_extensions() {
        let pkt = PacketBuilder::new()
            .ipv6([0u16; 8], [0u16; 8])
            .ipv6_ext(Ipv6ExtKind::HopByHop, &[])
            .ipv6_ext(Ipv6ExtKind::Routing, &[0; 14])
            .ipv6_fragment(0, true, 5)
            .ipv6_ext(Ipv6ExtKind::Authentication, &[0; 10])
            .ipv6_ext(Ipv6ExtKind::DestinationOptions, &[])
            .tcp(1, 2)
            .build();
        let p = Packet::new_checked(&pkt[..]).expect("ipv6");
        let w = walk(p.next_header(), p.payload()).expect("walk");
        assert_eq!(w.protocol, Protocol::Tcp);
        assert_eq!(w.offset, 8 + 16 + 8 + 16 + 8);
        assert_eq!(w.n_headers, 5);
        assert_eq!(w.fragment.map(|f| (f.more_frags, f.ident)), Some((true, 5)));
        assert!(!w.is_later_fragment());
    }

    #[test]
    fn walk_stops_at_later_fragment() {
        let pkt = PacketBuilder::new()
            .ipv6([0u16; 8], [0u16; 8])
            .ipv6_fragment(3, false, 5)
            .udp(1, 2)
            .build();
        let p = Packet::new_checked(&pkt[..]).expect("ipv6");
        let w = walk(p.next_header(), p.payload()).expect("walk");
        assert_eq!((w.protocol, w.offset), (Protocol::Udp, 8));
        assert!(w.is_later_fragment());
    }

    #[test]
    fn ext_header_routing_fixture() {
        // Routing header: next TCP, 2 units (24 bytes), type 4 (SRH), 1 segment left.
        let mut buf = vec![6, 2, 4, 1];
        buf.extend_from_slice(&[0; 20]);
        buf.push(0xee);
        let h = ExtHeader::new_checked(&buf[..], Protocol::Ipv6Route).expect("routing");
        assert_eq!((h.next_header(), h.header_len()), (Protocol::Tcp, 24));
        assert_eq!((h.routing_type(), h.segments_left()), (4, 1));
        assert_eq!(h.payload(), &[0xee]);
        assert_eq!(
            ExtHeader::new_checked(&buf[..23], Protocol::Ipv6Route).err(),
            Some(Error::Truncated)
        );
        let bad = ExtHeaderRepr {
            kind: Protocol::HopByHop,
            next_header: Protocol::Tcp,
            data: &[0; 5],
        };
        let mut out = [0u8; 7];
        assert!(bad
            .emit(&mut ExtHeader::new_unchecked(
                &mut out[..],
                Protocol::HopByHop
            ))
            .is_err());
    }

    #[test]
    fn walk_truncated_extension_fails() {
        assert_eq!(
            walk(Protocol::HopByHop, &[6, 1, 0, 0, 0, 0, 0, 0]),
            Err(Error::Truncated)
        );
        assert_eq!(walk(Protocol::Ipv6Frag, &[6, 0, 0]), Err(Error::Truncated));
        assert_eq!(walk(Protocol::Tcp, &[]).map(|w| w.offset), Ok(0));
    }

    proptest! {
        #[test]
        fn repr_parse_emit_round_trip(
            src: [u8; 16], dst: [u8; 16], nh: u8, payload_len in 0usize..100, hl: u8, tc: u8,
            fl in 0u32..(1 << 20),
        ) {
            let r = Repr {
                src_addr: src.into(), dst_addr: dst.into(), next_header: nh.into(), payload_len,
                hop_limit: hl, traffic_class: tc, flow_label: fl,
            };
            let mut buf = vec![0u8; HEADER_LEN + payload_len];
            r.emit(&mut Packet::new_unchecked(&mut buf[..])).expect("emit");
            prop_assert_eq!(Repr::parse(&Packet::new_checked(&buf[..]).expect("ipv6")), Ok(r));
        }

        #[test]
        fn fragment_repr_parse_emit_round_trip(nh: u8, off in 0u16..0x2000, more: bool, ident: u32) {
            let r = FragmentRepr { next_header: nh.into(), frag_offset: off, more_frags: more, ident };
            let mut buf = [0u8; FRAGMENT_HEADER_LEN];
            r.emit(&mut FragmentHeader::new_unchecked(&mut buf[..]));
            let h = FragmentHeader::new_checked(&buf[..]).expect("frag");
            prop_assert_eq!(FragmentRepr::parse(&h), Ok(r));
        }

        #[test]
        fn ext_header_repr_parse_emit_round_trip(
            kind in prop_oneof![Just(0u8), Just(43), Just(60), Just(51)],
            nh: u8, units in 1usize..6, fill: u8,
        ) {
            let kind = Protocol::from(kind);
            let total = if kind == Protocol::Ah { units * 4 + 4 } else { units * 8 };
            let data = vec![fill; total - 2];
            let r = ExtHeaderRepr { kind, next_header: nh.into(), data: &data };
            let mut buf = vec![0u8; r.buffer_len()];
            r.emit(&mut ExtHeader::new_unchecked(&mut buf[..], kind)).expect("emit");
            let h = ExtHeader::new_checked(&buf[..], kind).expect("ext");
            prop_assert_eq!(h.header_len(), total);
            prop_assert_eq!(ExtHeaderRepr::parse(&h), Ok(r));
        }

        #[test]
        fn walk_never_panics(nh: u8, data in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(w) = walk(nh.into(), &data) {
                prop_assert!(w.offset <= data.len());
            }
        }
    }
}
