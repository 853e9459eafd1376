//! What IPv4 and IPv6 share: protocol numbers and addresses for pseudo-header checksums.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::enum_with_unknown;
use crate::checksum;

enum_with_unknown! {
    /// IP protocol / IPv6 next header numbers (IANA "Assigned Internet Protocol Numbers").
    pub enum Protocol(u8) {
        /// IPv6 hop-by-hop options (RFC 8200 § 4.3).
        HopByHop = 0,
        /// ICMP (RFC 792).
        Icmp = 1,
        /// IGMP (RFC 3376).
        Igmp = 2,
        /// IPv4 in IP (RFC 2003).
        IpIp = 4,
        /// TCP (RFC 9293).
        Tcp = 6,
        /// UDP (RFC 768).
        Udp = 17,
        /// IPv6 in IP (RFC 2473).
        Ipv6 = 41,
        /// IPv6 routing header (RFC 8200 § 4.4).
        Ipv6Route = 43,
        /// IPv6 fragment header (RFC 8200 § 4.5).
        Ipv6Frag = 44,
        /// GRE (RFC 2784).
        Gre = 47,
        /// ESP (RFC 4303).
        Esp = 50,
        /// Authentication header (RFC 4302).
        Ah = 51,
        /// ICMPv6 (RFC 4443).
        Icmpv6 = 58,
        /// IPv6 no next header (RFC 8200 § 4.7).
        Ipv6NoNxt = 59,
        /// IPv6 destination options (RFC 8200 § 4.6).
        Ipv6Opts = 60,
        /// SCTP (RFC 9260).
        Sctp = 132,
    }
}

impl Protocol {
    /// True for the IPv6 extension headers walked by [`super::ipv6::walk`].
    pub fn is_ipv6_extension(self) -> bool {
        matches!(
            self,
            Protocol::HopByHop
                | Protocol::Ipv6Route
                | Protocol::Ipv6Frag
                | Protocol::Ah
                | Protocol::Ipv6Opts
        )
    }
}

/// An IPv4 or IPv6 address, for code (L4 checksums) that serves both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Address {
    /// IPv4.
    V4(Ipv4Addr),
    /// IPv6.
    V6(Ipv6Addr),
}

impl From<Ipv4Addr> for Address {
    fn from(a: Ipv4Addr) -> Self {
        Address::V4(a)
    }
}

impl From<Ipv6Addr> for Address {
    fn from(a: Ipv6Addr) -> Self {
        Address::V6(a)
    }
}

/// Unfolded pseudo-header sum for an upper-layer packet of `length` bytes between `src` and
/// `dst` (RFC 793 § 3.1, RFC 8200 § 8.1). Mixed families sum each address as it is.
pub fn pseudo_header(src: &Address, dst: &Address, protocol: Protocol, length: u32) -> u64 {
    let addr_sum = |a: &Address| match a {
        Address::V4(v) => checksum::sum(&v.octets()),
        Address::V6(v) => checksum::sum(&v.octets()),
    };
    addr_sum(src)
        + addr_sum(dst)
        + checksum::sum(&length.to_be_bytes())
        + u64::from(u8::from(protocol))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_unknown_round_trips() {
        for v in 0..=255u8 {
            assert_eq!(u8::from(Protocol::from(v)), v);
        }
        assert_eq!(Protocol::from(6), Protocol::Tcp);
        assert_eq!(Protocol::from(200), Protocol::Unknown(200));
        assert!(Protocol::Ah.is_ipv6_extension() && !Protocol::Tcp.is_ipv6_extension());
    }

    #[test]
    fn pseudo_header_matches_checksum_helpers() {
        let (s, d) = (Ipv4Addr::new(1, 2, 3, 4), Ipv4Addr::new(5, 6, 7, 8));
        assert_eq!(
            checksum::fold(pseudo_header(&s.into(), &d.into(), Protocol::Udp, 20)),
            checksum::fold(checksum::pseudo_header_v4(s, d, 17, 20))
        );
        let (s, d) = (Ipv6Addr::LOCALHOST, Ipv6Addr::UNSPECIFIED);
        assert_eq!(
            pseudo_header(&s.into(), &d.into(), Protocol::Tcp, 70_000),
            checksum::pseudo_header_v6(s, d, 6, 70_000)
        );
    }
}
