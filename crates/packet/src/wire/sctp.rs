//! SCTP common headers (RFC 9260 § 3.1): ports, verification tag, CRC32c checksum.
//!
//! [`Packet::new_checked`] validates the 12-byte header once; after that no accessor
//! panics. The checksum is CRC32c over the whole packet with the checksum field zeroed
//! (RFC 9260 App. B), stored least significant byte first as Linux and OVS do.

use super::{get16, get32, put16, put32, ChecksumCaps, Error, Result};
use crate::checksum;

/// Length of the common header.
pub const HEADER_LEN: usize = 12;

/// A view of an SCTP packet.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer, checking that it holds the common header.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks that the buffer holds 12 bytes.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
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

    /// Verification tag.
    pub fn verification_tag(&self) -> u32 {
        get32(self.buffer.as_ref(), 4)
    }

    /// The CRC32c as a number (the field read least significant byte first).
    pub fn checksum(&self) -> u32 {
        let b = self.buffer.as_ref();
        u32::from_le_bytes([b[8], b[9], b[10], b[11]])
    }

    /// The chunks after the common header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }

    fn compute(&self) -> u32 {
        let b = self.buffer.as_ref();
        let mut v = b.to_vec();
        v[8..12].fill(0);
        checksum::crc32c(&v)
    }

    /// True if the CRC32c verifies.
    pub fn verify_checksum(&self) -> bool {
        self.compute() == self.checksum()
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

    /// Sets the verification tag.
    pub fn set_verification_tag(&mut self, v: u32) {
        put32(self.buffer.as_mut(), 4, v);
    }

    /// Computes and writes the CRC32c.
    pub fn fill_checksum(&mut self) {
        let c = self.compute();
        self.buffer.as_mut()[8..12].copy_from_slice(&c.to_le_bytes());
    }

    /// The chunks, mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }
}

/// An SCTP common header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Verification tag.
    pub verification_tag: u32,
}

impl Repr {
    /// Parses a checked packet, verifying the CRC32c if `caps.sctp` asks for it.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>, caps: &ChecksumCaps) -> Result<Repr> {
        p.check_len()?;
        if caps.sctp.rx() && !p.verify_checksum() {
            return Err(Error::Checksum);
        }
        Ok(Repr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            verification_tag: p.verification_tag(),
        })
    }

    /// Length of the emitted header (12).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header; the CRC32c (if `caps.sctp` fills it) covers the chunks already in
    /// the buffer.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>, caps: &ChecksumCaps) {
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_verification_tag(self.verification_tag);
        if caps.sctp.tx() {
            p.fill_checksum();
        } else {
            p.buffer.as_mut()[8..12].fill(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn packet_deconstruct_and_checksum() {
        let mut buf = [0u8; 16];
        buf[..8].copy_from_slice(&[0x0b, 0x59, 0x0b, 0x5a, 0xde, 0xad, 0xbe, 0xef]);
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.fill_checksum();
        let p = Packet::new_checked(&buf[..]).expect("sctp");
        assert_eq!((p.src_port(), p.dst_port()), (2905, 2906));
        assert_eq!(p.verification_tag(), 0xdead_beef);
        assert!(p.verify_checksum());
        assert_eq!(p.payload().len(), 4);
    }

    #[test]
    fn packet_truncated_and_bad_checksum_are_rejected() {
        assert_eq!(
            Packet::new_checked(&[0u8; 11][..]).err(),
            Some(Error::Truncated)
        );
        let buf = [0u8; 12];
        let p = Packet::new_checked(&buf[..]).expect("sctp");
        assert_eq!(
            Repr::parse(&p, &ChecksumCaps::default()),
            Err(Error::Checksum)
        );
        assert!(Repr::parse(&p, &ChecksumCaps::ignored()).is_ok());
    }

    proptest! {
        #[test]
        fn repr_parse_emit_round_trip(sp: u16, dp: u16, tag: u32, chunks in proptest::collection::vec(any::<u8>(), 0..32)) {
            let r = Repr { src_port: sp, dst_port: dp, verification_tag: tag };
            let mut buf = vec![0u8; HEADER_LEN + chunks.len()];
            buf[HEADER_LEN..].copy_from_slice(&chunks);
            r.emit(&mut Packet::new_unchecked(&mut buf[..]), &ChecksumCaps::default());
            let p = Packet::new_checked(&buf[..]).expect("sctp");
            prop_assert_eq!(Repr::parse(&p, &ChecksumCaps::default()), Ok(r));
        }
    }
}
