//! ICMPv6 messages (RFC 4443 § 2.1) and Neighbor Discovery solicitations and
//! advertisements with their link-layer address options (RFC 4861 § 4.3, § 4.4, § 4.6.1).
//!
//! [`Packet::new_checked`] validates the 4-byte header plus the 4 type-specific bytes once;
//! after that no accessor panics. The checksum covers the IPv6 pseudo-header and the whole
//! message (the view's buffer). [`NdRepr`] parses NS/NA bodies; [`NdOptionIter`] walks ND
//! options strictly (a zero or overlong option length is an error).

use std::net::Ipv6Addr;

use super::ethernet::Address as EthernetAddress;
use super::ip::{self, Protocol};
use super::{enum_with_unknown, get16, put16, ChecksumCaps, Error, Result};
use crate::checksum;

/// Length of the header: type, code, checksum and the 4 type-specific bytes.
pub const HEADER_LEN: usize = 8;
/// Length of an NS/NA message without options: header and target address.
pub const ND_LEN: usize = 24;
/// ND option type: source link-layer address (RFC 4861 § 4.6.1).
pub const ND_OPT_SOURCE_LLADDR: u8 = 1;
/// ND option type: target link-layer address.
pub const ND_OPT_TARGET_LLADDR: u8 = 2;
/// NA flag: router (RFC 4861 § 4.4).
pub const NA_FLAG_ROUTER: u8 = 0x80;
/// NA flag: solicited.
pub const NA_FLAG_SOLICITED: u8 = 0x40;
/// NA flag: override.
pub const NA_FLAG_OVERRIDE: u8 = 0x20;

enum_with_unknown! {
    /// ICMPv6 message types (RFC 4443, RFC 4861, RFC 2710, RFC 3810).
    pub enum Message(u8) {
        /// Destination unreachable.
        DstUnreachable = 1,
        /// Packet too big.
        PktTooBig = 2,
        /// Time exceeded.
        TimeExceeded = 3,
        /// Parameter problem.
        ParamProblem = 4,
        /// Echo request.
        EchoRequest = 128,
        /// Echo reply.
        EchoReply = 129,
        /// MLD query.
        MldQuery = 130,
        /// MLDv1 report.
        MldReport = 131,
        /// MLDv1 done.
        MldDone = 132,
        /// Router solicitation.
        RouterSolicit = 133,
        /// Router advertisement.
        RouterAdvert = 134,
        /// Neighbor solicitation.
        NeighborSolicit = 135,
        /// Neighbor advertisement.
        NeighborAdvert = 136,
        /// Redirect.
        Redirect = 137,
        /// MLDv2 report.
        MldV2Report = 143,
    }
}

/// A view of an ICMPv6 message.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer, checking that it holds the 8-byte header.
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

    /// The 4 type-specific bytes (NA flags, echo id/seq, MTU, …).
    pub fn rest_of_header(&self) -> [u8; 4] {
        let b = self.buffer.as_ref();
        [b[4], b[5], b[6], b[7]]
    }

    /// The bytes after the 8-byte header (the ND target and options for NS/NA).
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }

    /// True if the message is an NS or NA with code 0 (what OVS treats as ND).
    pub fn is_nd(&self) -> bool {
        self.msg_code() == 0
            && matches!(
                self.msg_type(),
                Message::NeighborSolicit | Message::NeighborAdvert
            )
    }

    /// True if the checksum verifies over the pseudo-header and the message.
    pub fn verify_checksum(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
        let b = self.buffer.as_ref();
        let len = u32::try_from(b.len()).unwrap_or(u32::MAX);
        checksum::verify(
            ip::pseudo_header(&(*src).into(), &(*dst).into(), Protocol::Icmpv6, len)
                + checksum::sum(b),
        )
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

    /// Computes and writes the checksum.
    pub fn fill_checksum(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        self.set_checksum(0);
        let b = self.buffer.as_ref();
        let len = u32::try_from(b.len()).unwrap_or(u32::MAX);
        let c = checksum::finish(
            ip::pseudo_header(&(*src).into(), &(*dst).into(), Protocol::Icmpv6, len)
                + checksum::sum(b),
        );
        self.set_checksum(c);
    }
}

/// An ICMPv6 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Type.
    pub msg_type: Message,
    /// Code.
    pub msg_code: u8,
    /// The 4 type-specific bytes.
    pub rest_of_header: [u8; 4],
    /// Length of the data after the header.
    pub data_len: usize,
}

impl Repr {
    /// Parses a checked message, verifying the checksum if `caps.icmpv6` asks for it.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        p: &Packet<&T>,
        src: &Ipv6Addr,
        dst: &Ipv6Addr,
        caps: &ChecksumCaps,
    ) -> Result<Repr> {
        p.check_len()?;
        if caps.icmpv6.rx() && !p.verify_checksum(src, dst) {
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

    /// Writes the header; the checksum (if `caps.icmpv6` fills it) covers the data already
    /// in the buffer.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        p: &mut Packet<T>,
        src: &Ipv6Addr,
        dst: &Ipv6Addr,
        caps: &ChecksumCaps,
    ) {
        p.set_msg_type(self.msg_type);
        p.set_msg_code(self.msg_code);
        p.set_rest_of_header(self.rest_of_header);
        if caps.icmpv6.tx() {
            p.fill_checksum(src, dst);
        } else {
            p.set_checksum(0);
        }
    }
}

/// One ND option: type and the bytes after type and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NdOption<'a> {
    /// Option type.
    pub kind: u8,
    /// Option data (length × 8 − 2 bytes).
    pub data: &'a [u8],
}

impl NdOption<'_> {
    /// The link-layer address of a source/target link-layer option of length 1 (Ethernet).
    pub fn lladdr(&self) -> Option<EthernetAddress> {
        if (self.kind == ND_OPT_SOURCE_LLADDR || self.kind == ND_OPT_TARGET_LLADDR)
            && self.data.len() == 6
        {
            EthernetAddress::from_bytes(self.data)
        } else {
            None
        }
    }
}

/// Walks ND options (RFC 4861 § 4.6): yields `Ok(option)` for each, then `None`; a length of
/// zero or one running past the data yields one `Err(Malformed)` and ends the walk.
#[derive(Debug, Clone)]
pub struct NdOptionIter<'a> {
    data: &'a [u8],
    failed: bool,
}

impl<'a> NdOptionIter<'a> {
    /// Walks the options in `data`.
    pub fn new(data: &'a [u8]) -> Self {
        NdOptionIter {
            data,
            failed: false,
        }
    }
}

impl<'a> Iterator for NdOptionIter<'a> {
    type Item = Result<NdOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.data.is_empty() {
            return None;
        }
        let (kind, len) = match self.data {
            [kind, len, ..] => (*kind, usize::from(*len) * 8),
            _ => (0, 0),
        };
        if len == 0 || len > self.data.len() {
            self.failed = true;
            return Some(Err(Error::Malformed("ND option length")));
        }
        let opt = NdOption {
            kind,
            data: &self.data[2..len],
        };
        self.data = &self.data[len..];
        Some(Ok(opt))
    }
}

/// A Neighbor Solicitation or Advertisement (RFC 4861 § 4.3, § 4.4), with the link-layer
/// address option that matters to switches. Other options are skipped on parse and not
/// emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NdRepr {
    /// Neighbor solicitation.
    NeighborSolicit {
        /// Target address.
        target_addr: Ipv6Addr,
        /// Source link-layer address option.
        lladdr: Option<EthernetAddress>,
    },
    /// Neighbor advertisement.
    NeighborAdvert {
        /// R/S/O flags (top 3 bits).
        flags: u8,
        /// Target address.
        target_addr: Ipv6Addr,
        /// Target link-layer address option.
        lladdr: Option<EthernetAddress>,
    },
}

impl NdRepr {
    /// Parses an NS or NA (code 0); a repeated link-layer option or a malformed option is an
    /// error (RFC 4861 § 7.1.1 / OVS `parse_icmpv6`).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<NdRepr> {
        p.check_len()?;
        if !p.is_nd() {
            return Err(Error::Malformed(
                "not a neighbor solicitation or advertisement",
            ));
        }
        let data = p.data();
        let target: [u8; 16] = data
            .get(..16)
            .and_then(|b| b.try_into().ok())
            .ok_or(Error::Truncated)?;
        let want = if p.msg_type() == Message::NeighborSolicit {
            ND_OPT_SOURCE_LLADDR
        } else {
            ND_OPT_TARGET_LLADDR
        };
        let mut lladdr = None;
        for opt in NdOptionIter::new(&data[16..]) {
            let opt = opt?;
            if opt.kind == want {
                if let Some(a) = opt.lladdr() {
                    if lladdr.is_some() {
                        return Err(Error::Malformed("repeated ND link-layer option"));
                    }
                    lladdr = Some(a);
                }
            }
        }
        let target_addr = Ipv6Addr::from(target);
        Ok(match p.msg_type() {
            Message::NeighborSolicit => NdRepr::NeighborSolicit {
                target_addr,
                lladdr,
            },
            _ => NdRepr::NeighborAdvert {
                flags: p.rest_of_header()[0] & 0xe0,
                target_addr,
                lladdr,
            },
        })
    }

    /// Length of the emitted message (header, target, option).
    pub fn buffer_len(&self) -> usize {
        let lladdr = match self {
            NdRepr::NeighborSolicit { lladdr, .. } | NdRepr::NeighborAdvert { lladdr, .. } => {
                lladdr
            }
        };
        ND_LEN + if lladdr.is_some() { 8 } else { 0 }
    }

    /// Writes the whole message, checksum included if `caps.icmpv6` fills it.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        p: &mut Packet<T>,
        src: &Ipv6Addr,
        dst: &Ipv6Addr,
        caps: &ChecksumCaps,
    ) {
        let (ty, flags, target, lladdr, opt) = match *self {
            NdRepr::NeighborSolicit {
                target_addr,
                lladdr,
            } => (
                Message::NeighborSolicit,
                0,
                target_addr,
                lladdr,
                ND_OPT_SOURCE_LLADDR,
            ),
            NdRepr::NeighborAdvert {
                flags,
                target_addr,
                lladdr,
            } => (
                Message::NeighborAdvert,
                flags & 0xe0,
                target_addr,
                lladdr,
                ND_OPT_TARGET_LLADDR,
            ),
        };
        p.set_msg_type(ty);
        p.set_msg_code(0);
        p.set_rest_of_header([flags, 0, 0, 0]);
        let d = p.data_mut();
        d[..16].copy_from_slice(&target.octets());
        if let Some(a) = lladdr {
            d[16] = opt;
            d[17] = 1;
            d[18..24].copy_from_slice(&a.0);
        }
        if caps.icmpv6.tx() {
            p.fill_checksum(src, dst);
        } else {
            p.set_checksum(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::builder::PacketBuilder;

    const SRC: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);
    const DST: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 1, 0xff00, 2);
    const MAC: [u8; 6] = [0x52, 0x54, 0, 0x12, 0x34, 0x56];

    fn ns() -> Vec<u8> {
        PacketBuilder::new()
            .ipv6(SRC, DST)
            .icmpv6_ns(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 2), Some(MAC))
            .build()[40..]
            .to_vec()
    }

    #[test]
    fn packet_deconstruct_ns() {
        let buf = ns();
        let p = Packet::new_checked(&buf[..]).expect("icmpv6");
        assert_eq!((p.msg_type(), p.msg_code()), (Message::NeighborSolicit, 0));
        assert!(p.is_nd());
        assert!(p.verify_checksum(&SRC, &DST));
        assert_eq!(
            NdRepr::parse(&p),
            Ok(NdRepr::NeighborSolicit {
                target_addr: Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 2),
                lladdr: Some(EthernetAddress(MAC)),
            })
        );
    }

    #[test]
    fn nd_repr_emit_matches_builder() {
        let buf = ns();
        let p = Packet::new_checked(&buf[..]).expect("icmpv6");
        let r = NdRepr::parse(&p).expect("nd");
        let mut out = vec![0u8; r.buffer_len()];
        r.emit(
            &mut Packet::new_unchecked(&mut out[..]),
            &SRC,
            &DST,
            &ChecksumCaps::default(),
        );
        assert_eq!(out, buf);
    }

    #[test]
    fn nd_repr_rejects_repeated_and_malformed_options() {
        let mut buf = ns();
        buf.extend_from_slice(&[1, 1, 1, 2, 3, 4, 5, 6]);
        let p = Packet::new_checked(&buf[..]).expect("icmpv6");
        assert!(matches!(NdRepr::parse(&p), Err(Error::Malformed(_))));
        let mut buf = ns();
        buf[25] = 0;
        let p = Packet::new_checked(&buf[..]).expect("icmpv6");
        assert!(matches!(NdRepr::parse(&p), Err(Error::Malformed(_))));
        let buf = ns();
        let p = Packet::new_checked(&buf[..20]).expect("icmpv6");
        assert_eq!(NdRepr::parse(&p), Err(Error::Truncated));
    }

    #[test]
    fn nd_option_iter_walks_and_fails_once() {
        let opts = [
            1, 1, 1, 2, 3, 4, 5, 6, 14, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0,
        ];
        let mut it = NdOptionIter::new(&opts);
        let first = it.next().and_then(|o| o.ok()).expect("first option");
        assert_eq!(first.lladdr(), Some(EthernetAddress([1, 2, 3, 4, 5, 6])));
        let second = it.next().and_then(|o| o.ok()).expect("second option");
        assert_eq!(
            (second.kind, second.data.len(), second.lladdr()),
            (14, 14, None)
        );
        assert!(matches!(it.next(), Some(Err(_))));
        assert!(it.next().is_none());
    }

    #[test]
    fn packet_truncated_and_bad_checksum_are_rejected() {
        assert_eq!(
            Packet::new_checked(&[0u8; 7][..]).err(),
            Some(Error::Truncated)
        );
        let mut buf = ns();
        buf[30] ^= 0xff;
        let p = Packet::new_checked(&buf[..]).expect("icmpv6");
        assert_eq!(
            Repr::parse(&p, &SRC, &DST, &ChecksumCaps::default()),
            Err(Error::Checksum)
        );
    }

    proptest! {
        #[test]
        fn repr_parse_emit_round_trip(ty: u8, code: u8, rest: [u8; 4], data in proptest::collection::vec(any::<u8>(), 0..32)) {
            let r = Repr { msg_type: ty.into(), msg_code: code, rest_of_header: rest, data_len: data.len() };
            let mut buf = vec![0u8; HEADER_LEN + data.len()];
            buf[HEADER_LEN..].copy_from_slice(&data);
            r.emit(&mut Packet::new_unchecked(&mut buf[..]), &SRC, &DST, &ChecksumCaps::default());
            let p = Packet::new_checked(&buf[..]).expect("icmpv6");
            prop_assert_eq!(Repr::parse(&p, &SRC, &DST, &ChecksumCaps::default()), Ok(r));
        }

        #[test]
        fn nd_repr_parse_emit_round_trip(na: bool, flags in 0u8..8, target: [u8; 16], mac: Option<[u8; 6]>) {
            let lladdr = mac.map(EthernetAddress);
            let r = if na {
                NdRepr::NeighborAdvert { flags: flags << 5, target_addr: target.into(), lladdr }
            } else {
                NdRepr::NeighborSolicit { target_addr: target.into(), lladdr }
            };
            let mut buf = vec![0u8; r.buffer_len()];
            r.emit(&mut Packet::new_unchecked(&mut buf[..]), &SRC, &DST, &ChecksumCaps::default());
            let p = Packet::new_checked(&buf[..]).expect("icmpv6");
            prop_assert!(p.verify_checksum(&SRC, &DST));
            prop_assert_eq!(NdRepr::parse(&p), Ok(r));
        }
    }
}
