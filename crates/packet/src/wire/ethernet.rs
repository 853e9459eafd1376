//! Ethernet II frames (IEEE 802.3 § 3.1.1): destination, source, type.
//!
//! [`Frame::new_checked`] validates the 14-byte header once; after that no accessor panics.

use core::fmt;

use super::{enum_with_unknown, get16, put16, Error, Result};

enum_with_unknown! {
    /// EtherType values (IEEE Registration Authority; values below 0x0600 are 802.3
    /// lengths).
    pub enum EtherType(u16) {
        /// IPv4 (RFC 894).
        Ipv4 = 0x0800,
        /// ARP (RFC 826).
        Arp = 0x0806,
        /// Transparent Ethernet bridging (Geneve, GRE).
        TransparentEthernet = 0x6558,
        /// Reverse ARP (RFC 903).
        Rarp = 0x8035,
        /// IEEE 802.1Q customer VLAN tag.
        Vlan = 0x8100,
        /// IPv6 (RFC 2464).
        Ipv6 = 0x86dd,
        /// Slow protocols (LACP).
        Slow = 0x8809,
        /// MPLS unicast (RFC 3032 § 5).
        Mpls = 0x8847,
        /// MPLS multicast (RFC 5332).
        MplsMulticast = 0x8848,
        /// IEEE 802.1ad service VLAN tag.
        QinQ = 0x88a8,
        /// LLDP (IEEE 802.1AB).
        Lldp = 0x88cc,
        /// Network Service Header (RFC 8300).
        Nsh = 0x894f,
    }
}

impl EtherType {
    /// True for the TPIDs extraction treats as VLAN tags (802.1Q and 802.1ad).
    pub fn is_vlan(self) -> bool {
        matches!(self, EtherType::Vlan | EtherType::QinQ)
    }
}

/// A 48-bit Ethernet address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Address(pub [u8; 6]);

impl Address {
    /// The broadcast address ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: Address = Address([0xff; 6]);

    /// Builds an address from the first 6 bytes of `data` (`None` if shorter).
    pub fn from_bytes(data: &[u8]) -> Option<Address> {
        let b: [u8; 6] = data.get(..6)?.try_into().ok()?;
        Some(Address(b))
    }

    /// The address bytes.
    pub fn as_bytes(&self) -> &[u8; 6] {
        &self.0
    }

    /// True for a group (multicast or broadcast) address: the I/G bit (IEEE 802 § 8.2).
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 1 != 0
    }

    /// True for the broadcast address.
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// True for a locally administered address (the U/L bit).
    pub fn is_local(&self) -> bool {
        self.0[0] & 2 != 0
    }

    /// The `FlowKey` form: the low 48 bits of a `u64`, first byte most significant.
    pub fn to_u64(&self) -> u64 {
        crate::key::mac_from_bytes(self.0)
    }

    /// Inverse of [`Address::to_u64`] (bits above 48 are ignored).
    pub fn from_u64(v: u64) -> Address {
        Address(crate::key::mac_to_bytes(v))
    }
}

impl From<[u8; 6]> for Address {
    fn from(b: [u8; 6]) -> Self {
        Address(b)
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl fmt::Debug for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

mod field {
    use core::ops::Range;
    pub const DST: Range<usize> = 0..6;
    pub const SRC: Range<usize> = 6..12;
    pub const TYPE: usize = 12;
    pub const PAYLOAD: usize = 14;
}

/// Length of the Ethernet II header.
pub const HEADER_LEN: usize = field::PAYLOAD;

/// A view of an Ethernet II frame.
#[derive(Debug, Clone)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Frame<T> {
        Frame { buffer }
    }

    /// Wraps a buffer, checking that it holds the header.
    pub fn new_checked(buffer: T) -> Result<Frame<T>> {
        let f = Self::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    /// Checks that the buffer holds the 14-byte header.
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

    /// Destination address.
    pub fn dst_addr(&self) -> Address {
        let mut a = [0; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST]);
        Address(a)
    }

    /// Source address.
    pub fn src_addr(&self) -> Address {
        let mut a = [0; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC]);
        Address(a)
    }

    /// The type/length field.
    pub fn ethertype(&self) -> EtherType {
        EtherType::from(get16(self.buffer.as_ref(), field::TYPE))
    }

    /// The bytes after the header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, a: Address) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&a.0);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, a: Address) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&a.0);
    }

    /// Sets the type/length field.
    pub fn set_ethertype(&mut self, t: EtherType) {
        put16(self.buffer.as_mut(), field::TYPE, t.into());
    }

    /// The bytes after the header, mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD..]
    }
}

/// An Ethernet II header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Source address.
    pub src_addr: Address,
    /// Destination address.
    pub dst_addr: Address,
    /// Type/length field.
    pub ethertype: EtherType,
}

impl Repr {
    /// Parses a checked frame.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(frame: &Frame<&T>) -> Result<Repr> {
        frame.check_len()?;
        Ok(Repr {
            src_addr: frame.src_addr(),
            dst_addr: frame.dst_addr(),
            ethertype: frame.ethertype(),
        })
    }

    /// Length of the emitted header.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header (the buffer must hold [`Repr::buffer_len`] bytes).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut Frame<T>) {
        frame.set_src_addr(self.src_addr);
        frame.set_dst_addr(self.dst_addr);
        frame.set_ethertype(self.ethertype);
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    static FRAME: [u8; 18] = [
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x08, 0x00, 0xaa,
        0xbb, 0xcc, 0xdd,
    ];

    #[test]
    fn frame_deconstruct_fixture() {
        let f = Frame::new_checked(&FRAME[..]).expect("valid frame");
        assert_eq!(f.dst_addr(), Address([1, 2, 3, 4, 5, 6]));
        assert_eq!(f.src_addr(), Address([0x11, 0x12, 0x13, 0x14, 0x15, 0x16]));
        assert_eq!(f.ethertype(), EtherType::Ipv4);
        assert_eq!(f.payload(), &[0xaa, 0xbb, 0xcc, 0xdd]);
    }

    #[test]
    fn frame_construct_matches_fixture() {
        let mut buf = [0u8; 18];
        let mut f = Frame::new_unchecked(&mut buf[..]);
        f.set_dst_addr(Address([1, 2, 3, 4, 5, 6]));
        f.set_src_addr(Address([0x11, 0x12, 0x13, 0x14, 0x15, 0x16]));
        f.set_ethertype(EtherType::Ipv4);
        f.payload_mut().copy_from_slice(&[0xaa, 0xbb, 0xcc, 0xdd]);
        assert_eq!(buf, FRAME);
    }

    #[test]
    fn frame_truncated_is_rejected() {
        assert_eq!(
            Frame::new_checked(&FRAME[..13]).err(),
            Some(Error::Truncated)
        );
        assert!(Frame::new_checked(&FRAME[..14]).is_ok());
    }

    #[test]
    fn ethertype_unknown_round_trips() {
        assert_eq!(EtherType::from(0x1234), EtherType::Unknown(0x1234));
        assert_eq!(u16::from(EtherType::Unknown(0x1234)), 0x1234);
        assert_eq!(u16::from(EtherType::QinQ), 0x88a8);
        assert!(EtherType::from(0x8100).is_vlan());
    }

    #[test]
    fn address_display_and_flags() {
        let a = Address([0x01, 0x00, 0x5e, 0, 0, 0xfb]);
        assert_eq!(a.to_string(), "01:00:5e:00:00:fb");
        assert!(a.is_multicast() && !a.is_broadcast() && !a.is_local());
        assert_eq!(Address::from_u64(a.to_u64()), a);
        assert_eq!(Address::from_bytes(&[1, 2, 3]), None);
    }

    proptest! {
        #[test]
        fn repr_parse_emit_round_trip(src: [u8; 6], dst: [u8; 6], ty: u16) {
            let r = Repr { src_addr: Address(src), dst_addr: Address(dst), ethertype: ty.into() };
            let mut buf = vec![0u8; r.buffer_len()];
            r.emit(&mut Frame::new_unchecked(&mut buf[..]));
            let f = Frame::new_checked(&buf[..]).expect("emitted frame");
            prop_assert_eq!(Repr::parse(&f).expect("parse"), r);
        }
    }
}
