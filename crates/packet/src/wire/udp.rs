//! UDP headers (RFC 768).
//!
//! [`Packet::new_checked`] validates once that the buffer holds the 8-byte header, that the
//! length field covers the header and fits in the buffer; after that no accessor panics.
//! [`Packet::payload`] stops at the length field.

use super::ip::{self, Protocol};
use super::{get16, len16, put16, ChecksumCaps, Error, Result};
use crate::checksum;

/// Length of the header.
pub const HEADER_LEN: usize = 8;
/// The IANA VXLAN port (RFC 7348 § 5).
pub const VXLAN_PORT: u16 = 4789;
/// The IANA Geneve port (RFC 8926 § 3.3).
pub const GENEVE_PORT: u16 = 6081;

/// A view of a UDP datagram.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer, checking the header and length field.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks the header and the length field against the buffer.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let field = usize::from(self.len());
        if field < HEADER_LEN {
            return Err(Error::Malformed("UDP length below 8"));
        }
        if len < field {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Returns the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        get16(self.buffer.as_ref(), 0)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        get16(self.buffer.as_ref(), 2)
    }

    /// Length field (header and payload).
    pub fn len(&self) -> u16 {
        get16(self.buffer.as_ref(), 4)
    }

    /// True if the length field says there is no payload.
    pub fn is_empty(&self) -> bool {
        usize::from(self.len()) <= HEADER_LEN
    }

    /// Checksum field (0 means "none" over IPv4).
    pub fn checksum(&self) -> u16 {
        get16(self.buffer.as_ref(), 6)
    }

    /// The payload, up to the length field.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..usize::from(self.len())]
    }

    /// True if the checksum verifies. A zero checksum over IPv4 means none was computed and
    /// verifies (RFC 768); over IPv6 it is invalid (RFC 8200 § 8.1).
    pub fn verify_checksum(&self, src: &ip::Address, dst: &ip::Address) -> bool {
        if self.checksum() == 0 {
            return matches!(src, ip::Address::V4(_));
        }
        let b = &self.buffer.as_ref()[..usize::from(self.len())];
        checksum::verify(
            ip::pseudo_header(src, dst, Protocol::Udp, u32::from(self.len())) + checksum::sum(b),
        )
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the source port.
    pub fn set_src_port(&mut self, v: u16) {
        put16(self.buffer.as_mut(), 0, v);
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, v: u16) {
        put16(self.buffer.as_mut(), 2, v);
    }

    /// Sets the length field.
    pub fn set_len(&mut self, v: u16) {
        put16(self.buffer.as_mut(), 4, v);
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buffer.as_mut(), 6, v);
    }

    /// The payload, mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }

    /// Computes and writes the checksum (a computed 0 is sent as 0xffff, RFC 768).
    pub fn fill_checksum(&mut self, src: &ip::Address, dst: &ip::Address) {
        self.set_checksum(0);
        let len = self.len();
        let b = &self.buffer.as_ref()[..usize::from(len)];
        let mut c = checksum::finish(
            ip::pseudo_header(src, dst, Protocol::Udp, u32::from(len)) + checksum::sum(b),
        );
        if c == 0 {
            c = 0xffff;
        }
        self.set_checksum(c);
    }
}

/// A UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Payload length.
    pub payload_len: usize,
}

impl Repr {
    /// Parses a checked datagram, verifying the checksum if `caps.udp` asks for it.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        p: &Packet<&T>,
        src: &ip::Address,
        dst: &ip::Address,
        caps: &ChecksumCaps,
    ) -> Result<Repr> {
        p.check_len()?;
        if caps.udp.rx() && !p.verify_checksum(src, dst) {
            return Err(Error::Checksum);
        }
        Ok(Repr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            payload_len: p.payload().len(),
        })
    }

    /// Length of the emitted header (8).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header; the checksum (if `caps.udp` fills it) covers the payload already in
    /// the buffer. Fails if the length does not fit in 16 bits.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        p: &mut Packet<T>,
        src: &ip::Address,
        dst: &ip::Address,
        caps: &ChecksumCaps,
    ) -> Result<()> {
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_len(len16(HEADER_LEN + self.payload_len)?);
        if caps.udp.tx() {
            p.fill_checksum(src, dst);
        } else {
            p.set_checksum(0);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};

    use proptest::prelude::*;

    use super::*;

    const SRC: ip::Address = ip::Address::V4(Ipv4Addr::new(192, 168, 1, 10));
    const DST: ip::Address = ip::Address::V4(Ipv4Addr::new(8, 8, 8, 8));

    static DATAGRAM: [u8; 12] = [
        0xcf, 0x84, 0x00, 0x35, 0x00, 0x0c, 0x00, 0x00, 0xde, 0xad, 0xbe, 0xef,
    ];

    #[test]
    fn packet_deconstruct_fixture() {
        let p = Packet::new_checked(&DATAGRAM[..]).expect("udp");
        assert_eq!((p.src_port(), p.dst_port(), p.len()), (53124, 53, 12));
        assert_eq!(p.payload(), &[0xde, 0xad, 0xbe, 0xef]);
        // A zero checksum is "none" over IPv4, invalid over IPv6.
        assert!(p.verify_checksum(&SRC, &DST));
        let v6 = ip::Address::V6(Ipv6Addr::LOCALHOST);
        assert!(!p.verify_checksum(&v6, &v6));
    }

    #[test]
    fn packet_fill_checksum_verifies() {
        let mut buf = DATAGRAM;
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.fill_checksum(&SRC, &DST);
        assert_ne!(p.checksum(), 0);
        assert!(p.verify_checksum(&SRC, &DST));
        p.payload_mut()[0] ^= 1;
        assert!(!p.verify_checksum(&SRC, &DST));
    }

    #[test]
    fn packet_bad_lengths_are_rejected() {
        assert_eq!(
            Packet::new_checked(&DATAGRAM[..7]).err(),
            Some(Error::Truncated)
        );
        assert_eq!(
            Packet::new_checked(&DATAGRAM[..11]).err(),
            Some(Error::Truncated)
        );
        let mut bad = DATAGRAM;
        bad[5] = 7;
        assert!(matches!(
            Packet::new_checked(&bad[..]),
            Err(Error::Malformed(_))
        ));
        // Overlong buffer: the payload stops at the length field.
        let mut long = DATAGRAM.to_vec();
        long.push(0);
        assert_eq!(
            Packet::new_checked(&long[..]).expect("udp").payload().len(),
            4
        );
    }

    proptest! {
        #[test]
        fn repr_parse_emit_round_trip(sp: u16, dp: u16, payload in proptest::collection::vec(any::<u8>(), 0..64)) {
            let r = Repr { src_port: sp, dst_port: dp, payload_len: payload.len() };
            let mut buf = vec![0u8; HEADER_LEN + payload.len()];
            buf[HEADER_LEN..].copy_from_slice(&payload);
            r.emit(&mut Packet::new_unchecked(&mut buf[..]), &SRC, &DST, &ChecksumCaps::default()).expect("emit");
            let p = Packet::new_checked(&buf[..]).expect("udp");
            prop_assert_eq!(Repr::parse(&p, &SRC, &DST, &ChecksumCaps::default()), Ok(r));
        }
    }
}
