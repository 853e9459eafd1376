//! The Internet checksum (RFC 1071), its incremental update (RFC 1624), the TCP/UDP
//! pseudo-header sums for IPv4 and IPv6, and CRC32c for SCTP.
//!
//! A checksum is computed in two steps: [`sum`] accumulates the ones' complement sum of
//! 16-bit big-endian words into a wide accumulator (partial sums of several pieces, such as a
//! pseudo-header and a segment, are simply added), and [`finish`] folds the accumulator to 16
//! bits and complements it. A checksum field holding the result makes the whole sum verify:
//! [`verify`] of the covered bytes (plus the pseudo-header) returns `true`.
//!
//! ```
//! use packet::checksum;
//! // RFC 1071 § 3 example bytes.
//! let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
//! assert_eq!(checksum::fold(checksum::sum(&data)), 0xddf2);
//! assert_eq!(checksum::checksum(&data), !0xddf2);
//! ```

use std::net::{Ipv4Addr, Ipv6Addr};

/// Ones' complement sum of `data` as 16-bit big-endian words, unfolded (RFC 1071 § 4.1).
/// An odd trailing byte is padded with a zero byte on the right.
pub fn sum(data: &[u8]) -> u64 {
    let mut acc = 0u64;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u64::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        acc += u64::from(u16::from_be_bytes([*last, 0]));
    }
    acc
}

/// Folds an accumulated sum to 16 bits with end-around carry (RFC 1071 § 2 (B)).
pub fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    // The loop above leaves at most 16 bits.
    #[allow(clippy::cast_possible_truncation)]
    let folded = acc as u16;
    folded
}

/// The checksum field value for an accumulated sum: the complement of the folded sum.
pub fn finish(acc: u64) -> u16 {
    !fold(acc)
}

/// The Internet checksum of `data` (RFC 1071): what goes into a zeroed checksum field.
pub fn checksum(data: &[u8]) -> u16 {
    finish(sum(data))
}

/// True if an accumulated sum that includes its checksum field verifies (folds to 0xffff).
pub fn verify(acc: u64) -> bool {
    fold(acc) == 0xffff
}

/// Incrementally updates checksum `hc` for a 16-bit field changing from `old` to `new`
/// (RFC 1624 § 3, eqn. 3: `HC' = ~(~HC + ~m + m')`).
pub fn update16(hc: u16, old: u16, new: u16) -> u16 {
    let acc = u64::from(!hc) + u64::from(!old) + u64::from(new);
    !fold(acc)
}

/// Incrementally updates checksum `hc` for a 32-bit field (two 16-bit words) changing
/// from `old` to `new` (RFC 1624 § 3).
pub fn update32(hc: u16, old: u32, new: u32) -> u16 {
    let mut acc = u64::from(!hc);
    for (o, n) in old
        .to_be_bytes()
        .chunks_exact(2)
        .zip(new.to_be_bytes().chunks_exact(2))
    {
        acc += u64::from(!u16::from_be_bytes([o[0], o[1]]));
        acc += u64::from(u16::from_be_bytes([n[0], n[1]]));
    }
    !fold(acc)
}

/// Incrementally updates checksum `hc` for a 128-bit field (an IPv6 address) changing
/// from `old` to `new` (RFC 1624 § 3).
pub fn update128(hc: u16, old: u128, new: u128) -> u16 {
    let mut acc = u64::from(!hc);
    for (o, n) in old
        .to_be_bytes()
        .chunks_exact(2)
        .zip(new.to_be_bytes().chunks_exact(2))
    {
        acc += u64::from(!u16::from_be_bytes([o[0], o[1]]));
        acc += u64::from(u16::from_be_bytes([n[0], n[1]]));
    }
    !fold(acc)
}

/// Unfolded sum of the IPv4 pseudo-header for TCP/UDP (RFC 793 § 3.1, RFC 768):
/// source, destination, zero + protocol, upper-layer length.
pub fn pseudo_header_v4(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, length: u16) -> u64 {
    sum(&src.octets()) + sum(&dst.octets()) + u64::from(protocol) + u64::from(length)
}

/// Unfolded sum of the IPv6 pseudo-header (RFC 8200 § 8.1): source, destination, 32-bit
/// upper-layer length, zero + next header.
pub fn pseudo_header_v6(src: Ipv6Addr, dst: Ipv6Addr, next_header: u8, length: u32) -> u64 {
    sum(&src.octets()) + sum(&dst.octets()) + sum(&length.to_be_bytes()) + u64::from(next_header)
}

/// CRC32c (Castagnoli) table, reflected polynomial 0x82f63b78 (RFC 3309 / RFC 9260 App. B).
// `i` is below 256, so the cast cannot truncate.
#[allow(clippy::cast_possible_truncation)]
const CRC32C_TABLE: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0x82f6_3b78
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

/// CRC32c of `data` (RFC 9260 App. B), as SCTP stores it: the returned value is written to
/// the checksum field in little-endian byte order, computed with that field zeroed.
pub fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for b in data {
        crc = CRC32C_TABLE[usize::from(crc.to_le_bytes()[0] ^ b)] ^ (crc >> 8);
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real IPv4 header (from Wikipedia's IPv4 checksum example), checksum 0xb861.
    const IPV4_HDR: [u8; 20] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7,
    ];

    #[test]
    fn checksum_rfc1071_example() {
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(&data)), 0xddf2);
    }

    #[test]
    fn checksum_ipv4_header_known_value() {
        let mut h = IPV4_HDR;
        assert!(verify(sum(&h)));
        h[10] = 0;
        h[11] = 0;
        assert_eq!(checksum(&h), 0xb861);
    }

    #[test]
    fn checksum_odd_length_pads_right() {
        assert_eq!(sum(&[0x12]), 0x1200);
        assert_eq!(sum(&[0xab, 0xcd, 0x12]), 0xabcd + 0x1200);
    }

    #[test]
    fn checksum_empty_is_ffff() {
        assert_eq!(checksum(&[]), 0xffff);
    }

    #[test]
    fn update16_matches_recompute() {
        let mut h = IPV4_HDR;
        // Decrement the TTL: the TTL/protocol word changes from 0x4011 to 0x3f11.
        h[8] = 0x3f;
        let hc = update16(0xb861, 0x4011, 0x3f11);
        h[10] = 0;
        h[11] = 0;
        assert_eq!(hc, checksum(&h));
    }

    #[test]
    fn update32_matches_recompute() {
        let mut h = IPV4_HDR;
        let old = u32::from_be_bytes([h[12], h[13], h[14], h[15]]);
        let new = 0x0a00_0001u32;
        h[12..16].copy_from_slice(&new.to_be_bytes());
        h[10] = 0;
        h[11] = 0;
        assert_eq!(update32(0xb861, old, new), checksum(&h));
    }

    #[test]
    fn update128_matches_recompute() {
        let src = Ipv6Addr::new(0xfe80, 0, 0, 0, 1, 2, 3, 4);
        let dst = Ipv6Addr::new(0xfe80, 0, 0, 0, 5, 6, 7, 8);
        let new_src = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x99);
        let payload = [1u8, 2, 3, 4, 5, 6, 7, 0];
        let hc = finish(pseudo_header_v6(src, dst, 17, 8) + sum(&payload));
        let want = finish(pseudo_header_v6(new_src, dst, 17, 8) + sum(&payload));
        assert_eq!(update128(hc, u128::from(src), u128::from(new_src)), want);
    }

    #[test]
    fn pseudo_header_v4_udp_known_packet() {
        // A small datagram 192.168.1.10:53124 -> 8.8.8.8:53: the checksum is checked against a
        // hand sum of the pseudo-header and UDP words.
        let src = Ipv4Addr::new(192, 168, 1, 10);
        let dst = Ipv4Addr::new(8, 8, 8, 8);
        let mut udp = [
            0xcf, 0x84, 0x00, 0x35, 0x00, 0x0c, 0x00, 0x00, 0xde, 0xad, 0xbe, 0xef,
        ];
        let c = finish(pseudo_header_v4(src, dst, 17, 12) + sum(&udp));
        udp[6..8].copy_from_slice(&c.to_be_bytes());
        assert!(verify(pseudo_header_v4(src, dst, 17, 12) + sum(&udp)));
        // Hand computation: the pseudo-header words and the UDP words.
        let manual: u64 = [
            0xc0a8u64, 0x010a, 0x0808, 0x0808, 0x0011, 0x000c, 0xcf84, 0x0035, 0x000c, 0xdead,
            0xbeef,
        ]
        .iter()
        .sum();
        assert_eq!(c, !fold(manual));
    }

    #[test]
    fn crc32c_known_vectors() {
        // RFC 3720 § B.4 test vectors.
        assert_eq!(crc32c(&[0u8; 32]), 0x8a91_36aa);
        assert_eq!(crc32c(&[0xffu8; 32]), 0x62a8_ab43);
        let inc: Vec<u8> = (0u8..32).collect();
        assert_eq!(crc32c(&inc), 0x46dd_794e);
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
    }
}
