//! IPv4 headers (RFC 791 § 3.1), with options and fragments.
//!
//! [`Packet::new_checked`] validates once that the buffer holds the fixed header, that the
//! IHL is at least 5 and the header fits, and that the total length covers the header and
//! fits in the buffer. After that no accessor panics; [`Packet::payload`] stops at the total
//! length (bytes beyond it are link-layer padding).

use std::net::Ipv4Addr;

use super::ip::Protocol;
use super::{get16, len16, put16, ChecksumCaps, Error, Result};
use crate::checksum;

/// Length of the header without options.
pub const HEADER_LEN: usize = 20;
/// Largest options length (IHL 15).
pub const MAX_OPTIONS_LEN: usize = 40;
/// Don't-fragment flag in the flags/offset word (RFC 791 § 3.1).
pub const FLAG_DF: u16 = 0x4000;
/// More-fragments flag.
pub const FLAG_MF: u16 = 0x2000;
/// Fragment offset mask (8-byte units).
pub const OFFSET_MASK: u16 = 0x1fff;

/// A view of an IPv4 packet.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer, checking the lengths (see the module documentation).
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks the header and total lengths against each other and the buffer.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let hlen = self.header_len();
        if hlen < HEADER_LEN {
            return Err(Error::Malformed("IHL below 5"));
        }
        if len < hlen {
            return Err(Error::Truncated);
        }
        let total = usize::from(self.total_len());
        if total < hlen {
            return Err(Error::Malformed("total length below header length"));
        }
        if len < total {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Returns the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Version (4 for IPv4).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }

    /// Header length in bytes (IHL × 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[0] & 0x0f) * 4
    }

    /// Type of service byte (DSCP << 2 | ECN).
    pub fn tos(&self) -> u8 {
        self.buffer.as_ref()[1]
    }

    /// Differentiated services code point (RFC 2474).
    pub fn dscp(&self) -> u8 {
        self.tos() >> 2
    }

    /// Explicit congestion notification (RFC 3168).
    pub fn ecn(&self) -> u8 {
        self.tos() & 3
    }

    /// Total length (header and payload).
    pub fn total_len(&self) -> u16 {
        get16(self.buffer.as_ref(), 2)
    }

    /// Identification.
    pub fn ident(&self) -> u16 {
        get16(self.buffer.as_ref(), 4)
    }

    /// Don't-fragment flag.
    pub fn dont_frag(&self) -> bool {
        get16(self.buffer.as_ref(), 6) & FLAG_DF != 0
    }

    /// More-fragments flag.
    pub fn more_frags(&self) -> bool {
        get16(self.buffer.as_ref(), 6) & FLAG_MF != 0
    }

    /// Fragment offset in 8-byte units.
    pub fn frag_offset(&self) -> u16 {
        get16(self.buffer.as_ref(), 6) & OFFSET_MASK
    }

    /// True for any fragment (MF set or a non-zero offset).
    pub fn is_fragment(&self) -> bool {
        get16(self.buffer.as_ref(), 6) & (FLAG_MF | OFFSET_MASK) != 0
    }

    /// Time to live.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[8]
    }

    /// Protocol of the payload.
    pub fn protocol(&self) -> Protocol {
        Protocol::from(self.buffer.as_ref()[9])
    }

    /// Header checksum field.
    pub fn checksum(&self) -> u16 {
        get16(self.buffer.as_ref(), 10)
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv4Addr {
        let b = self.buffer.as_ref();
        Ipv4Addr::new(b[12], b[13], b[14], b[15])
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv4Addr {
        let b = self.buffer.as_ref();
        Ipv4Addr::new(b[16], b[17], b[18], b[19])
    }

    /// Option bytes (between the fixed header and the payload).
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }

    /// True if the header checksum verifies (RFC 791 § 3.1, RFC 1071).
    pub fn verify_checksum(&self) -> bool {
        checksum::verify(checksum::sum(&self.buffer.as_ref()[..self.header_len()]))
    }

    /// The payload, up to the total length.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..usize::from(self.total_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets version and header length (`header_len` in bytes, a multiple of 4).
    pub fn set_version_and_header_len(&mut self, version: u8, header_len: usize) {
        let ihl = u8::try_from(header_len / 4).unwrap_or(15) & 0x0f;
        self.buffer.as_mut()[0] = (version << 4) | ihl;
    }

    /// Sets the TOS byte.
    pub fn set_tos(&mut self, v: u8) {
        self.buffer.as_mut()[1] = v;
    }

    /// Sets the total length.
    pub fn set_total_len(&mut self, v: u16) {
        put16(self.buffer.as_mut(), 2, v);
    }

    /// Sets the identification.
    pub fn set_ident(&mut self, v: u16) {
        put16(self.buffer.as_mut(), 4, v);
    }

    /// Sets flags and fragment offset (8-byte units) together.
    pub fn set_frag(&mut self, dont_frag: bool, more_frags: bool, offset: u16) {
        let mut w = offset & OFFSET_MASK;
        if dont_frag {
            w |= FLAG_DF;
        }
        if more_frags {
            w |= FLAG_MF;
        }
        put16(self.buffer.as_mut(), 6, w);
    }

    /// Sets the TTL.
    pub fn set_hop_limit(&mut self, v: u8) {
        self.buffer.as_mut()[8] = v;
    }

    /// Sets the protocol.
    pub fn set_protocol(&mut self, v: Protocol) {
        self.buffer.as_mut()[9] = v.into();
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buffer.as_mut(), 10, v);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[12..16].copy_from_slice(&a.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[16..20].copy_from_slice(&a.octets());
    }

    /// Option bytes, mutably.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }

    /// Computes and writes the header checksum.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::checksum(&self.buffer.as_ref()[..self.header_len()]);
        self.set_checksum(c);
    }

    /// The payload up to the total length, mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (start, end) = (self.header_len(), usize::from(self.total_len()));
        &mut self.buffer.as_mut()[start..end]
    }
}

/// IPv4 options, stored inline (at most 40 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    bytes: [u8; MAX_OPTIONS_LEN],
    len: u8,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            bytes: [0; MAX_OPTIONS_LEN],
            len: 0,
        }
    }
}

impl Options {
    /// Options from bytes; `None` if longer than 40 or not a multiple of 4.
    pub fn new(data: &[u8]) -> Option<Options> {
        if data.len() > MAX_OPTIONS_LEN || data.len() % 4 != 0 {
            return None;
        }
        let mut bytes = [0; MAX_OPTIONS_LEN];
        bytes[..data.len()].copy_from_slice(data);
        Some(Options {
            bytes,
            len: u8::try_from(data.len()).ok()?,
        })
    }

    /// The option bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// An IPv4 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Source address.
    pub src_addr: Ipv4Addr,
    /// Destination address.
    pub dst_addr: Ipv4Addr,
    /// Protocol of the payload.
    pub protocol: Protocol,
    /// Payload length (total length minus header length).
    pub payload_len: usize,
    /// Time to live.
    pub hop_limit: u8,
    /// TOS byte (DSCP and ECN).
    pub tos: u8,
    /// Identification.
    pub ident: u16,
    /// Don't fragment.
    pub dont_frag: bool,
    /// More fragments.
    pub more_frags: bool,
    /// Fragment offset in 8-byte units.
    pub frag_offset: u16,
    /// Options.
    pub options: Options,
}

impl Repr {
    /// Parses a checked packet: version 4, and the checksum if `caps.ipv4` verifies.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>, caps: &ChecksumCaps) -> Result<Repr> {
        p.check_len()?;
        if p.version() != 4 {
            return Err(Error::Malformed("IP version is not 4"));
        }
        if caps.ipv4.rx() && !p.verify_checksum() {
            return Err(Error::Checksum);
        }
        Ok(Repr {
            src_addr: p.src_addr(),
            dst_addr: p.dst_addr(),
            protocol: p.protocol(),
            payload_len: usize::from(p.total_len()) - p.header_len(),
            hop_limit: p.hop_limit(),
            tos: p.tos(),
            ident: p.ident(),
            dont_frag: p.dont_frag(),
            more_frags: p.more_frags(),
            frag_offset: p.frag_offset(),
            options: Options::new(p.options()).ok_or(Error::Malformed("options"))?,
        })
    }

    /// Length of the emitted header (with options).
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.options.as_slice().len()
    }

    /// Writes the header; the checksum is filled if `caps.ipv4` fills, else zero. Fails if
    /// the total length does not fit in 16 bits.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        p: &mut Packet<T>,
        caps: &ChecksumCaps,
    ) -> Result<()> {
        let hlen = self.buffer_len();
        p.set_version_and_header_len(4, hlen);
        p.set_tos(self.tos);
        p.set_total_len(len16(hlen + self.payload_len)?);
        p.set_ident(self.ident);
        p.set_frag(self.dont_frag, self.more_frags, self.frag_offset);
        p.set_hop_limit(self.hop_limit);
        p.set_protocol(self.protocol);
        p.set_src_addr(self.src_addr);
        p.set_dst_addr(self.dst_addr);
        p.options_mut().copy_from_slice(self.options.as_slice());
        if caps.ipv4.tx() {
            p.fill_checksum();
        } else {
            p.set_checksum(0);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// 192.168.0.1 -> 192.168.0.199, UDP, total length 0x73 (Wikipedia's checksum example),
    /// header only.
    static HEADER: [u8; 20] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7,
    ];

    fn packet() -> Vec<u8> {
        let mut v = HEADER.to_vec();
        v.resize(0x73, 0xaa);
        v
    }

    #[test]
    fn packet_deconstruct_fixture() {
        let buf = packet();
        let p = Packet::new_checked(&buf[..]).expect("ipv4");
        assert_eq!((p.version(), p.header_len(), p.total_len()), (4, 20, 0x73));
        assert!(p.dont_frag() && !p.more_frags() && !p.is_fragment());
        assert_eq!((p.hop_limit(), p.protocol()), (64, Protocol::Udp));
        assert_eq!(p.src_addr(), Ipv4Addr::new(192, 168, 0, 1));
        assert_eq!(p.dst_addr(), Ipv4Addr::new(192, 168, 0, 199));
        assert!(p.verify_checksum());
        assert_eq!(p.payload().len(), 0x73 - 20);
    }

    #[test]
    fn repr_emit_matches_fixture() {
        let buf = packet();
        let r = Repr::parse(
            &Packet::new_checked(&buf[..]).expect("ipv4"),
            &ChecksumCaps::default(),
        )
        .expect("repr");
        let mut out = [0u8; 0x73];
        r.emit(
            &mut Packet::new_unchecked(&mut out[..]),
            &ChecksumCaps::default(),
        )
        .expect("emit");
        assert_eq!(&out[..20], &HEADER);
    }

    #[test]
    fn packet_padding_is_not_payload() {
        let mut buf = packet();
        buf.extend_from_slice(&[0; 6]);
        let p = Packet::new_checked(&buf[..]).expect("ipv4");
        assert_eq!(p.payload().len(), 0x73 - 20);
    }

    #[test]
    fn packet_bad_lengths_are_rejected() {
        let buf = packet();
        assert_eq!(
            Packet::new_checked(&buf[..19]).err(),
            Some(Error::Truncated)
        );
        assert_eq!(
            Packet::new_checked(&buf[..0x72]).err(),
            Some(Error::Truncated)
        );
        let mut bad = buf.clone();
        bad[0] = 0x44;
        assert!(matches!(
            Packet::new_checked(&bad[..]),
            Err(Error::Malformed(_))
        ));
        let mut bad = buf.clone();
        bad[0] = 0x4f;
        bad[3] = 40;
        assert_eq!(
            Packet::new_checked(&bad[..40]).err(),
            Some(Error::Truncated)
        );
        let mut bad = buf;
        bad[2] = 0;
        bad[3] = 19;
        assert!(matches!(
            Packet::new_checked(&bad[..]),
            Err(Error::Malformed(_))
        ));
    }

    #[test]
    fn repr_bad_checksum_and_version_are_rejected() {
        let mut buf = packet();
        buf[11] ^= 1;
        let p = Packet::new_checked(&buf[..]).expect("ipv4");
        assert_eq!(
            Repr::parse(&p, &ChecksumCaps::default()),
            Err(Error::Checksum)
        );
        assert!(Repr::parse(&p, &ChecksumCaps::ignored()).is_ok());
        buf[0] = 0x65;
        let p = Packet::new_checked(&buf[..]).expect("ipv4");
        assert!(matches!(
            Repr::parse(&p, &ChecksumCaps::ignored()),
            Err(Error::Malformed(_))
        ));
    }

    #[test]
    fn packet_options_and_fragment_fields() {
        let mut buf = [0u8; 24];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_version_and_header_len(4, 24);
        p.set_total_len(24);
        p.set_frag(false, true, 100);
        p.options_mut().copy_from_slice(&[0x94, 4, 0, 0]);
        p.fill_checksum();
        let p = Packet::new_checked(&buf[..]).expect("ipv4");
        assert_eq!(p.options(), &[0x94, 4, 0, 0]);
        assert!(p.more_frags() && p.is_fragment());
        assert_eq!(p.frag_offset(), 100);
        assert!(p.verify_checksum());
    }

    proptest! {
        #[test]
        fn repr_parse_emit_round_trip(
            src: [u8; 4], dst: [u8; 4], proto: u8, payload_len in 0usize..200, ttl: u8, tos: u8,
            ident: u16, df: bool, mf: bool, off in 0u16..0x2000,
            opts in proptest::collection::vec(any::<u8>(), 0..=10),
        ) {
            let opts = &opts[..opts.len() / 4 * 4];
            let r = Repr {
                src_addr: src.into(), dst_addr: dst.into(), protocol: proto.into(), payload_len,
                hop_limit: ttl, tos, ident, dont_frag: df, more_frags: mf, frag_offset: off,
                options: Options::new(opts).expect("options"),
            };
            let mut buf = vec![0u8; r.buffer_len() + payload_len];
            r.emit(&mut Packet::new_unchecked(&mut buf[..]), &ChecksumCaps::default()).expect("emit");
            let p = Packet::new_checked(&buf[..]).expect("ipv4");
            prop_assert_eq!(Repr::parse(&p, &ChecksumCaps::default()), Ok(r));
        }
    }
}
