//! ICMPv4 messages (RFC 792): type, code, checksum, 4 type-specific bytes, data.
//!
//! [`Packet::new_checked`] validates the 8-byte header once; after that no accessor
//! panics. The checksum covers the whole message (the view's buffer).

use super::{enum_with_unknown, get16, put16, ChecksumCaps, Error, Result};
use crate::checksum;

/// Length of the header (type, code, checksum, 4 bytes).
pub const HEADER_LEN: usize = 8;

enum_with_unknown! {
    /// ICMPv4 message types (RFC 792, IANA "ICMP Type Numbers").
    pub enum Message(u8) {
        /// Echo reply.
        EchoReply = 0,
        /// Destination unreachable.
        DstUnreachable = 3,
        /// Redirect.
        Redirect = 5,
        /// Echo request.
        EchoRequest = 8,
        /// Router advertisement (RFC 1256).
        RouterAdvert = 9,
        /// Router solicitation (RFC 1256).
        RouterSolicit = 10,
        /// Time exceeded.
        TimeExceeded = 11,
        /// Parameter problem.
        ParamProblem = 12,
        /// Timestamp.
        Timestamp = 13,
        /// Timestamp reply.
        TimestampReply = 14,
    }
}

/// A view of an ICMPv4 message.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer, checking that it holds the header.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks that the buffer holds 8 bytes.
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

    /// Message type.
    pub fn msg_type(&self) -> Message {
        Message::from(self.buffer.as_ref()[0])
    }

    /// Code.
    pub fn msg_code(&self) -> u8 {
        self.buffer.as_ref()[1]
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        get16(self.buffer.as_ref(), 2)
    }

    /// The 4 type-specific bytes after the checksum.
    pub fn rest_of_header(&self) -> [u8; 4] {
        let b = self.buffer.as_ref();
        [b[4], b[5], b[6], b[7]]
    }

    /// Echo identifier (echo request/reply).
    pub fn echo_ident(&self) -> u16 {
        get16(self.buffer.as_ref(), 4)
    }

    /// Echo sequence number (echo request/reply).
    pub fn echo_seq_no(&self) -> u16 {
        get16(self.buffer.as_ref(), 6)
    }

    /// The data after the header.
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }

    /// True if the checksum over the message verifies.
    pub fn verify_checksum(&self) -> bool {
        checksum::verify(checksum::sum(self.buffer.as_ref()))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the type.
    pub fn set_msg_type(&mut self, v: Message) {
        self.buffer.as_mut()[0] = v.into();
    }

    /// Sets the code.
    pub fn set_msg_code(&mut self, v: u8) {
        self.buffer.as_mut()[1] = v;
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buffer.as_mut(), 2, v);
    }

    /// Sets the 4 type-specific bytes.
    pub fn set_rest_of_header(&mut self, v: [u8; 4]) {
        self.buffer.as_mut()[4..8].copy_from_slice(&v);
    }

    /// The data, mutably.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }

    /// Computes and writes the checksum over the message.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::checksum(self.buffer.as_ref());
        self.set_checksum(c);
    }
}

/// An ICMPv4 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Type.
    pub msg_type: Message,
    /// Code.
    pub msg_code: u8,
    /// The 4 type-specific bytes (echo identifier and sequence, unused, MTU, …).
    pub rest_of_header: [u8; 4],
    /// Length of the data after the header.
    pub data_len: usize,
}

impl Repr {
    /// Parses a checked message, verifying the checksum if `caps.icmpv4` asks for it.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>, caps: &ChecksumCaps) -> Result<Repr> {
        p.check_len()?;
        if caps.icmpv4.rx() && !p.verify_checksum() {
            return Err(Error::Checksum);
        }
        Ok(Repr {
            msg_type: p.msg_type(),
            msg_code: p.msg_code(),
            rest_of_header: p.rest_of_header(),
            data_len: p.data().len(),
        })
    }

    /// Length of the emitted header (8).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header; the checksum (if `caps.icmpv4` fills it) covers the data already
    /// in the buffer.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>, caps: &ChecksumCaps) {
        p.set_msg_type(self.msg_type);
        p.set_msg_code(self.msg_code);
        p.set_rest_of_header(self.rest_of_header);
        if caps.icmpv4.tx() {
            p.fill_checksum();
        } else {
            p.set_checksum(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// An echo request, id 0x1234, seq 1, data "abcd" (checksum computed by hand).
    static ECHO: [u8; 12] = [
        0x08, 0x00, 0x21, 0x04, 0x12, 0x34, 0x00, 0x01, 0x61, 0x62, 0x63, 0x64,
    ];

    #[test]
    fn packet_deconstruct_fixture() {
        let p = Packet::new_checked(&ECHO[..]).expect("icmp");
        assert_eq!((p.msg_type(), p.msg_code()), (Message::EchoRequest, 0));
        assert_eq!((p.echo_ident(), p.echo_seq_no()), (0x1234, 1));
        assert_eq!(p.data(), b"abcd");
        assert!(p.verify_checksum());
    }

    #[test]
    fn repr_emit_matches_fixture() {
        let r = Repr {
            msg_type: Message::EchoRequest,
            msg_code: 0,
            rest_of_header: [0x12, 0x34, 0, 1],
            data_len: 4,
        };
        let mut buf = [0u8; 12];
        buf[8..].copy_from_slice(b"abcd");
        r.emit(
            &mut Packet::new_unchecked(&mut buf[..]),
            &ChecksumCaps::default(),
        );
        assert_eq!(buf, ECHO);
    }

    #[test]
    fn packet_truncated_and_bad_checksum_are_rejected() {
        assert_eq!(
            Packet::new_checked(&ECHO[..7]).err(),
            Some(Error::Truncated)
        );
        let mut bad = ECHO;
        bad[11] = 0;
        let p = Packet::new_checked(&bad[..]).expect("icmp");
        assert_eq!(
            Repr::parse(&p, &ChecksumCaps::default()),
            Err(Error::Checksum)
        );
        assert_eq!(Message::from(99), Message::Unknown(99));
    }

    proptest! {
        #[test]
        fn repr_parse_emit_round_trip(ty: u8, code: u8, rest: [u8; 4], data in proptest::collection::vec(any::<u8>(), 0..32)) {
            let r = Repr { msg_type: ty.into(), msg_code: code, rest_of_header: rest, data_len: data.len() };
            let mut buf = vec![0u8; HEADER_LEN + data.len()];
            buf[HEADER_LEN..].copy_from_slice(&data);
            r.emit(&mut Packet::new_unchecked(&mut buf[..]), &ChecksumCaps::default());
            let p = Packet::new_checked(&buf[..]).expect("icmp");
            prop_assert_eq!(Repr::parse(&p, &ChecksumCaps::default()), Ok(r));
        }
    }
}
