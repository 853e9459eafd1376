//! TCP headers (RFC 9293 § 3.1), with option bytes and the 12 flag bits OVS matches on.
//!
//! [`Packet::new_checked`] validates once that the buffer holds the fixed header, that the
//! data offset is at least 5 words, and that the options fit; after that no accessor panics.
//! The buffer of a view is the whole segment (header and payload): the checksum covers it.

use super::ip::{self, Protocol};
use super::{get16, get32, put16, put32, ChecksumCaps, Error, Result};
use crate::checksum;

/// Length of the header without options.
pub const HEADER_LEN: usize = 20;
/// Largest options length (data offset 15).
pub const MAX_OPTIONS_LEN: usize = 40;

/// The 12 bits after the data offset: reserved bits, then NS/AE, CWR, ECE, URG, ACK, PSH,
/// RST, SYN, FIN (RFC 9293 § 3.1, RFC 3540, RFC 3168). This is OVS's `tcp_flags`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Flags(pub u16);

impl Flags {
    /// FIN.
    pub const FIN: Flags = Flags(0x001);
    /// SYN.
    pub const SYN: Flags = Flags(0x002);
    /// RST.
    pub const RST: Flags = Flags(0x004);
    /// PSH.
    pub const PSH: Flags = Flags(0x008);
    /// ACK.
    pub const ACK: Flags = Flags(0x010);
    /// URG.
    pub const URG: Flags = Flags(0x020);
    /// ECE (RFC 3168).
    pub const ECE: Flags = Flags(0x040);
    /// CWR (RFC 3168).
    pub const CWR: Flags = Flags(0x080);
    /// NS (RFC 3540, historic; AE in AccECN).
    pub const NS: Flags = Flags(0x100);

    /// True if every bit of `other` is set.
    pub fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl core::ops::BitOr for Flags {
    type Output = Flags;
    fn bitor(self, rhs: Flags) -> Flags {
        Flags(self.0 | rhs.0)
    }
}

/// A view of a TCP segment.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer, checking the header and options length.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks the fixed header, the data offset and the options length.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let hlen = self.header_len();
        if hlen < HEADER_LEN {
            return Err(Error::Malformed("TCP data offset below 5"));
        }
        if len < hlen {
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

    /// Sequence number.
    pub fn seq_number(&self) -> u32 {
        get32(self.buffer.as_ref(), 4)
    }

    /// Acknowledgment number.
    pub fn ack_number(&self) -> u32 {
        get32(self.buffer.as_ref(), 8)
    }

    /// Header length in bytes (data offset × 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[12] >> 4) * 4
    }

    /// The 12 flag bits.
    pub fn flags(&self) -> Flags {
        Flags(get16(self.buffer.as_ref(), 12) & 0x0fff)
    }

    /// Window size.
    pub fn window_len(&self) -> u16 {
        get16(self.buffer.as_ref(), 14)
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        get16(self.buffer.as_ref(), 16)
    }

    /// Urgent pointer.
    pub fn urgent_at(&self) -> u16 {
        get16(self.buffer.as_ref(), 18)
    }

    /// Option bytes.
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }

    /// The payload (everything after the options).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }

    /// True if the checksum over the whole buffer and the pseudo-header verifies.
    pub fn verify_checksum(&self, src: &ip::Address, dst: &ip::Address) -> bool {
        let b = self.buffer.as_ref();
        let len = u32::try_from(b.len()).unwrap_or(u32::MAX);
        checksum::verify(ip::pseudo_header(src, dst, Protocol::Tcp, len) + checksum::sum(b))
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

    /// Sets the sequence number.
    pub fn set_seq_number(&mut self, v: u32) {
        put32(self.buffer.as_mut(), 4, v);
    }

    /// Sets the acknowledgment number.
    pub fn set_ack_number(&mut self, v: u32) {
        put32(self.buffer.as_mut(), 8, v);
    }

    /// Sets data offset (`header_len` bytes, a multiple of 4) and flags together.
    pub fn set_header_len_and_flags(&mut self, header_len: usize, flags: Flags) {
        let off = u16::try_from(header_len / 4).unwrap_or(15) & 0x0f;
        put16(self.buffer.as_mut(), 12, (off << 12) | (flags.0 & 0x0fff));
    }

    /// Sets the window size.
    pub fn set_window_len(&mut self, v: u16) {
        put16(self.buffer.as_mut(), 14, v);
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buffer.as_mut(), 16, v);
    }

    /// Sets the urgent pointer.
    pub fn set_urgent_at(&mut self, v: u16) {
        put16(self.buffer.as_mut(), 18, v);
    }

    /// Option bytes, mutably.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }

    /// The payload, mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.header_len();
        &mut self.buffer.as_mut()[start..]
    }

    /// Computes the checksum over the whole buffer and the pseudo-header, and writes it.
    pub fn fill_checksum(&mut self, src: &ip::Address, dst: &ip::Address) {
        self.set_checksum(0);
        let b = self.buffer.as_ref();
        let len = u32::try_from(b.len()).unwrap_or(u32::MAX);
        let c =
            checksum::finish(ip::pseudo_header(src, dst, Protocol::Tcp, len) + checksum::sum(b));
        self.set_checksum(c);
    }
}

/// TCP options, stored inline (at most 40 bytes, a multiple of 4).
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

/// A TCP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq_number: u32,
    /// Acknowledgment number.
    pub ack_number: u32,
    /// Flags (12 bits).
    pub flags: Flags,
    /// Window size.
    pub window_len: u16,
    /// Urgent pointer.
    pub urgent_at: u16,
    /// Options.
    pub options: Options,
    /// Payload length.
    pub payload_len: usize,
}

impl Repr {
    /// Parses a checked segment, verifying the checksum if `caps.tcp` asks for it.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        p: &Packet<&T>,
        src: &ip::Address,
        dst: &ip::Address,
        caps: &ChecksumCaps,
    ) -> Result<Repr> {
        p.check_len()?;
        if caps.tcp.rx() && !p.verify_checksum(src, dst) {
            return Err(Error::Checksum);
        }
        Ok(Repr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            seq_number: p.seq_number(),
            ack_number: p.ack_number(),
            flags: p.flags(),
            window_len: p.window_len(),
            urgent_at: p.urgent_at(),
            options: Options::new(p.options()).ok_or(Error::Malformed("options"))?,
            payload_len: p.payload().len(),
        })
    }

    /// Length of the emitted header (with options).
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.options.as_slice().len()
    }

    /// Writes the header. The checksum, when `caps.tcp` fills it, covers the whole buffer:
    /// write the payload first (or call [`Packet::fill_checksum`] after writing it).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        p: &mut Packet<T>,
        src: &ip::Address,
        dst: &ip::Address,
        caps: &ChecksumCaps,
    ) {
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_seq_number(self.seq_number);
        p.set_ack_number(self.ack_number);
        p.set_header_len_and_flags(self.buffer_len(), self.flags);
        p.set_window_len(self.window_len);
        p.set_urgent_at(self.urgent_at);
        p.options_mut().copy_from_slice(self.options.as_slice());
        if caps.tcp.tx() {
            p.fill_checksum(src, dst);
        } else {
            p.set_checksum(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use proptest::prelude::*;

    use super::*;

    const SRC: ip::Address = ip::Address::V4(Ipv4Addr::new(192, 168, 122, 1));
    const DST: ip::Address = ip::Address::V4(Ipv4Addr::new(192, 168, 122, 37));

    /// The SYN of the extraction fixture, TCP part only (checksum valid for `SRC` → `DST`).
    static SYN: [u8; 40] = [
        0xaa, 0x0a, 0x00, 0x50, 0x3c, 0x8e, 0x57, 0x1a, 0x00, 0x00, 0x00, 0x00, 0xa0, 0x02, 0xfa,
        0xf0, 0x07, 0x13, 0x00, 0x00, 0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x08, 0x0a, 0x4f, 0x6b,
        0x43, 0x16, 0x00, 0x00, 0x00, 0x00, 0x01, 0x03, 0x03, 0x07,
    ];

    #[test]
    fn packet_deconstruct_fixture() {
        let p = Packet::new_checked(&SYN[..]).expect("tcp");
        assert_eq!((p.src_port(), p.dst_port()), (43530, 80));
        assert_eq!(p.seq_number(), 0x3c8e_571a);
        assert_eq!(p.header_len(), 40);
        assert_eq!(p.flags(), Flags::SYN);
        assert_eq!(p.window_len(), 64240);
        assert_eq!(&p.options()[..4], &[2, 4, 5, 0xb4]);
        assert!(p.payload().is_empty());
        assert!(p.verify_checksum(&SRC, &DST));
    }

    #[test]
    fn repr_emit_matches_fixture() {
        let p = Packet::new_checked(&SYN[..]).expect("tcp");
        let r = Repr::parse(&p, &SRC, &DST, &ChecksumCaps::ignored()).expect("repr");
        let mut out = [0u8; 40];
        r.emit(
            &mut Packet::new_unchecked(&mut out[..]),
            &SRC,
            &DST,
            &ChecksumCaps::default(),
        );
        assert!(Packet::new_checked(&out[..])
            .expect("tcp")
            .verify_checksum(&SRC, &DST));
        assert_eq!(out, SYN);
    }

    #[test]
    fn packet_bad_lengths_are_rejected() {
        assert_eq!(
            Packet::new_checked(&SYN[..19]).err(),
            Some(Error::Truncated)
        );
        assert_eq!(
            Packet::new_checked(&SYN[..39]).err(),
            Some(Error::Truncated)
        );
        let mut bad = SYN;
        bad[12] = 0x40;
        assert!(matches!(
            Packet::new_checked(&bad[..]),
            Err(Error::Malformed(_))
        ));
    }

    #[test]
    fn repr_bad_checksum_is_rejected() {
        let mut buf = [0u8; 24];
        let r = Repr {
            src_port: 1,
            dst_port: 2,
            seq_number: 3,
            ack_number: 4,
            flags: Flags::ACK | Flags::PSH,
            window_len: 5,
            urgent_at: 0,
            options: Options::default(),
            payload_len: 4,
        };
        r.emit(
            &mut Packet::new_unchecked(&mut buf[..]),
            &SRC,
            &DST,
            &ChecksumCaps::default(),
        );
        buf[23] = 1;
        let p = Packet::new_checked(&buf[..]).expect("tcp");
        assert_eq!(
            Repr::parse(&p, &SRC, &DST, &ChecksumCaps::default()),
            Err(Error::Checksum)
        );
        assert!(Flags(0x18).contains(Flags::ACK));
    }

    proptest! {
        #[test]
        fn repr_parse_emit_round_trip(
            sp: u16, dp: u16, seq: u32, ack: u32, flags in 0u16..0x1000, win: u16, urg: u16,
            opts in proptest::collection::vec(any::<u8>(), 0..=40), payload in proptest::collection::vec(any::<u8>(), 0..40),
            v6: bool,
        ) {
            let opts = &opts[..opts.len() / 4 * 4];
            let r = Repr {
                src_port: sp, dst_port: dp, seq_number: seq, ack_number: ack, flags: Flags(flags),
                window_len: win, urgent_at: urg, options: Options::new(opts).expect("options"),
                payload_len: payload.len(),
            };
            let (s, d) = if v6 {
                (ip::Address::V6(std::net::Ipv6Addr::LOCALHOST), ip::Address::V6(std::net::Ipv6Addr::UNSPECIFIED))
            } else {
                (SRC, DST)
            };
            let mut buf = vec![0u8; r.buffer_len() + payload.len()];
            buf[r.buffer_len()..].copy_from_slice(&payload);
            r.emit(&mut Packet::new_unchecked(&mut buf[..]), &s, &d, &ChecksumCaps::default());
            let p = Packet::new_checked(&buf[..]).expect("tcp");
            prop_assert_eq!(Repr::parse(&p, &s, &d, &ChecksumCaps::default()), Ok(r));
        }
    }
}
