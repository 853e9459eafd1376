//! ARP packets (RFC 826), and RARP (RFC 903) which shares the format.
//!
//! [`Packet::new_checked`] validates the 8-byte fixed part and the address lengths it
//! declares; after that no accessor panics. [`Repr`] covers Ethernet/IPv4 ARP only (what
//! switches match on); other hardware or protocol types are [`Error::Malformed`].

use std::net::Ipv4Addr;

use super::ethernet::{Address as EthernetAddress, EtherType};
use super::{enum_with_unknown, get16, put16, Error, Result};

enum_with_unknown! {
    /// ARP hardware types (IANA "Hardware Types").
    pub enum Hardware(u16) {
        /// Ethernet (10Mb).
        Ethernet = 1,
    }
}

enum_with_unknown! {
    /// ARP and RARP operations (RFC 826, RFC 903).
    pub enum Operation(u16) {
        /// ARP request.
        Request = 1,
        /// ARP reply.
        Reply = 2,
        /// RARP request.
        RarpRequest = 3,
        /// RARP reply.
        RarpReply = 4,
    }
}

/// Length of the fixed part: hardware type, protocol type, lengths, operation.
pub const FIXED_LEN: usize = 8;
/// Length of an Ethernet/IPv4 ARP packet.
pub const ETHERNET_IPV4_LEN: usize = 28;

/// A view of an ARP packet.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer, checking the fixed part and the declared address lengths.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks that the buffer holds the fixed part and all four addresses.
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        if b.len() < FIXED_LEN {
            return Err(Error::Truncated);
        }
        let need = FIXED_LEN + 2 * (usize::from(b[4]) + usize::from(b[5]));
        if b.len() < need {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Returns the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Hardware type.
    pub fn hardware_type(&self) -> Hardware {
        Hardware::from(get16(self.buffer.as_ref(), 0))
    }

    /// Protocol type.
    pub fn protocol_type(&self) -> EtherType {
        EtherType::from(get16(self.buffer.as_ref(), 2))
    }

    /// Hardware address length.
    pub fn hardware_len(&self) -> u8 {
        self.buffer.as_ref()[4]
    }

    /// Protocol address length.
    pub fn protocol_len(&self) -> u8 {
        self.buffer.as_ref()[5]
    }

    /// Operation.
    pub fn operation(&self) -> Operation {
        Operation::from(get16(self.buffer.as_ref(), 6))
    }

    fn offsets(&self) -> (usize, usize) {
        (
            usize::from(self.hardware_len()),
            usize::from(self.protocol_len()),
        )
    }

    /// Sender hardware address.
    pub fn source_hardware_addr(&self) -> &[u8] {
        let (h, _) = self.offsets();
        &self.buffer.as_ref()[FIXED_LEN..FIXED_LEN + h]
    }

    /// Sender protocol address.
    pub fn source_protocol_addr(&self) -> &[u8] {
        let (h, p) = self.offsets();
        &self.buffer.as_ref()[FIXED_LEN + h..FIXED_LEN + h + p]
    }

    /// Target hardware address.
    pub fn target_hardware_addr(&self) -> &[u8] {
        let (h, p) = self.offsets();
        &self.buffer.as_ref()[FIXED_LEN + h + p..FIXED_LEN + 2 * h + p]
    }

    /// Target protocol address.
    pub fn target_protocol_addr(&self) -> &[u8] {
        let (h, p) = self.offsets();
        &self.buffer.as_ref()[FIXED_LEN + 2 * h + p..FIXED_LEN + 2 * h + 2 * p]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the hardware type.
    pub fn set_hardware_type(&mut self, v: Hardware) {
        put16(self.buffer.as_mut(), 0, v.into());
    }

    /// Sets the protocol type.
    pub fn set_protocol_type(&mut self, v: EtherType) {
        put16(self.buffer.as_mut(), 2, v.into());
    }

    /// Sets the hardware address length.
    pub fn set_hardware_len(&mut self, v: u8) {
        self.buffer.as_mut()[4] = v;
    }

    /// Sets the protocol address length.
    pub fn set_protocol_len(&mut self, v: u8) {
        self.buffer.as_mut()[5] = v;
    }

    /// Sets the operation.
    pub fn set_operation(&mut self, v: Operation) {
        put16(self.buffer.as_mut(), 6, v.into());
    }

    /// Sets the sender hardware address (`v` must have the declared length).
    pub fn set_source_hardware_addr(&mut self, v: &[u8]) {
        let (h, _) = self.offsets();
        self.buffer.as_mut()[FIXED_LEN..FIXED_LEN + h].copy_from_slice(v);
    }

    /// Sets the sender protocol address.
    pub fn set_source_protocol_addr(&mut self, v: &[u8]) {
        let (h, p) = self.offsets();
        self.buffer.as_mut()[FIXED_LEN + h..FIXED_LEN + h + p].copy_from_slice(v);
    }

    /// Sets the target hardware address.
    pub fn set_target_hardware_addr(&mut self, v: &[u8]) {
        let (h, p) = self.offsets();
        self.buffer.as_mut()[FIXED_LEN + h + p..FIXED_LEN + 2 * h + p].copy_from_slice(v);
    }

    /// Sets the target protocol address.
    pub fn set_target_protocol_addr(&mut self, v: &[u8]) {
        let (h, p) = self.offsets();
        self.buffer.as_mut()[FIXED_LEN + 2 * h + p..FIXED_LEN + 2 * h + 2 * p].copy_from_slice(v);
    }
}

/// An Ethernet/IPv4 ARP or RARP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Operation.
    pub operation: Operation,
    /// Sender hardware address.
    pub source_hardware_addr: EthernetAddress,
    /// Sender protocol address.
    pub source_protocol_addr: Ipv4Addr,
    /// Target hardware address.
    pub target_hardware_addr: EthernetAddress,
    /// Target protocol address.
    pub target_protocol_addr: Ipv4Addr,
}

fn ipv4(b: &[u8]) -> Result<Ipv4Addr> {
    let a: [u8; 4] = b.try_into().map_err(|_| Error::Truncated)?;
    Ok(Ipv4Addr::from(a))
}

impl Repr {
    /// Parses an Ethernet/IPv4 ARP packet.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
        p.check_len()?;
        if p.hardware_type() != Hardware::Ethernet
            || p.protocol_type() != EtherType::Ipv4
            || p.hardware_len() != 6
            || p.protocol_len() != 4
        {
            return Err(Error::Malformed("ARP other than Ethernet/IPv4"));
        }
        Ok(Repr {
            operation: p.operation(),
            source_hardware_addr: EthernetAddress::from_bytes(p.source_hardware_addr())
                .ok_or(Error::Truncated)?,
            source_protocol_addr: ipv4(p.source_protocol_addr())?,
            target_hardware_addr: EthernetAddress::from_bytes(p.target_hardware_addr())
                .ok_or(Error::Truncated)?,
            target_protocol_addr: ipv4(p.target_protocol_addr())?,
        })
    }

    /// Length of the emitted packet (28).
    pub const fn buffer_len(&self) -> usize {
        ETHERNET_IPV4_LEN
    }

    /// Writes the packet.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_hardware_type(Hardware::Ethernet);
        p.set_protocol_type(EtherType::Ipv4);
        p.set_hardware_len(6);
        p.set_protocol_len(4);
        p.set_operation(self.operation);
        p.set_source_hardware_addr(&self.source_hardware_addr.0);
        p.set_source_protocol_addr(&self.source_protocol_addr.octets());
        p.set_target_hardware_addr(&self.target_hardware_addr.0);
        p.set_target_protocol_addr(&self.target_protocol_addr.octets());
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    static REQUEST: [u8; 28] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x21,
        0x22, 0x23, 0x24, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x41, 0x42, 0x43, 0x44,
    ];

    fn request() -> Repr {
        Repr {
            operation: Operation::Request,
            source_hardware_addr: EthernetAddress([0x11, 0x12, 0x13, 0x14, 0x15, 0x16]),
            source_protocol_addr: Ipv4Addr::new(0x21, 0x22, 0x23, 0x24),
            target_hardware_addr: EthernetAddress([0x31, 0x32, 0x33, 0x34, 0x35, 0x36]),
            target_protocol_addr: Ipv4Addr::new(0x41, 0x42, 0x43, 0x44),
        }
    }

    #[test]
    fn packet_deconstruct_fixture() {
        let p = Packet::new_checked(&REQUEST[..]).expect("arp");
        assert_eq!(p.hardware_type(), Hardware::Ethernet);
        assert_eq!(p.protocol_type(), EtherType::Ipv4);
        assert_eq!(p.operation(), Operation::Request);
        assert_eq!(p.target_protocol_addr(), &[0x41, 0x42, 0x43, 0x44]);
        assert_eq!(Repr::parse(&p), Ok(request()));
    }

    #[test]
    fn repr_emit_matches_fixture() {
        let mut buf = [0u8; 28];
        request().emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, REQUEST);
    }

    #[test]
    fn packet_truncated_addresses_are_rejected() {
        assert_eq!(
            Packet::new_checked(&REQUEST[..27]).err(),
            Some(Error::Truncated)
        );
        assert_eq!(
            Packet::new_checked(&REQUEST[..7]).err(),
            Some(Error::Truncated)
        );
        let mut long = REQUEST;
        long[4] = 7;
        assert_eq!(Packet::new_checked(&long[..]).err(), Some(Error::Truncated));
    }

    #[test]
    fn repr_rejects_non_ethernet_ipv4() {
        let mut buf = REQUEST;
        buf[1] = 6;
        let p = Packet::new_checked(&buf[..]).expect("arp");
        assert!(matches!(Repr::parse(&p), Err(Error::Malformed(_))));
    }

    proptest! {
        #[test]
        fn repr_parse_emit_round_trip(op: u16, sha: [u8; 6], spa: [u8; 4], tha: [u8; 6], tpa: [u8; 4]) {
            let r = Repr {
                operation: op.into(),
                source_hardware_addr: EthernetAddress(sha),
                source_protocol_addr: spa.into(),
                target_hardware_addr: EthernetAddress(tha),
                target_protocol_addr: tpa.into(),
            };
            let mut buf = [0u8; ETHERNET_IPV4_LEN];
            r.emit(&mut Packet::new_unchecked(&mut buf[..]));
            prop_assert_eq!(Repr::parse(&Packet::new_checked(&buf[..]).expect("arp")), Ok(r));
        }
    }
}
