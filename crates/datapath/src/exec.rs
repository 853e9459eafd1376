//! Header rewrites of datapath actions on a packet's bytes: VLAN push and pop, and masked
//! sets with incremental checksums (RFC 1624), as OVS's `odp_execute_actions`.
//!
//! Offsets come from the packet's [`crate::Metadata`] (extraction recorded them, and
//! push/pop keep them pointing at the same headers). A rewrite that does not fit the packet's
//! bytes (a header missing or truncated) returns `false`; the caller drops the packet and
//! counts `drop_header_rewrite`. Nothing here panics on packet contents.

use packet::checksum;
use pipeline::odp::SetField;

use crate::buffer::Packet;

const ETH_ADDR_LEN: usize = 6;
const VLAN_HDR_LEN: usize = 4;

fn is_vlan_tpid(t: u16) -> bool {
    t == 0x8100 || t == 0x88a8
}

fn rd16(d: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*d.get(at)?, *d.get(at + 1)?]))
}

fn rd32(d: &[u8], at: usize) -> Option<u32> {
    let b = d.get(at..at + 4)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

fn wr16(d: &mut [u8], at: usize, v: u16) -> Option<()> {
    d.get_mut(at..at + 2)?.copy_from_slice(&v.to_be_bytes());
    Some(())
}

fn wr32(d: &mut [u8], at: usize, v: u32) -> Option<()> {
    d.get_mut(at..at + 4)?.copy_from_slice(&v.to_be_bytes());
    Some(())
}

/// Pushes a VLAN tag (`tpid`, `tci`) after the Ethernet addresses.
pub fn push_vlan(pkt: &mut Packet, tpid: u16, tci: u16) -> bool {
    if pkt.len() < 2 * ETH_ADDR_LEN {
        return false;
    }
    if pkt.push_front(VLAN_HDR_LEN).is_err() {
        return false;
    }
    let d = pkt.data_mut();
    d.copy_within(VLAN_HDR_LEN..VLAN_HDR_LEN + 2 * ETH_ADDR_LEN, 0);
    d[12..14].copy_from_slice(&tpid.to_be_bytes());
    d[14..16].copy_from_slice(&tci.to_be_bytes());
    true
}

/// Pops the outermost VLAN tag; false if there is none.
pub fn pop_vlan(pkt: &mut Packet) -> bool {
    let d = pkt.data_mut();
    if d.len() < 2 * ETH_ADDR_LEN + VLAN_HDR_LEN + 2 || !rd16(d, 12).is_some_and(is_vlan_tpid) {
        return false;
    }
    d.copy_within(0..2 * ETH_ADDR_LEN, VLAN_HDR_LEN);
    pkt.pull_front(VLAN_HDR_LEN);
    true
}

/// Where a TCP/UDP/SCTP/ICMPv6 checksum sits, from the L4 header's start.
fn l4_csum_at(proto: u8) -> Option<usize> {
    match proto {
        6 => Some(16),
        17 => Some(6),
        58 => Some(2),
        _ => None,
    }
}

/// Updates the L4 checksum at `l4 + at` after a 32-bit or 128-bit pseudo-header change.
/// A UDP checksum of 0 means "none" and stays 0.
fn fix_l4(d: &mut [u8], l4: Option<usize>, proto: u8, upd: impl Fn(u16) -> u16) -> Option<()> {
    let (Some(l4), Some(at)) = (l4, l4_csum_at(proto)) else {
        return Some(());
    };
    let Some(old) = rd16(d, l4 + at) else {
        // A truncated L4 header has no checksum to fix.
        return Some(());
    };
    if proto == 17 && old == 0 {
        return Some(());
    }
    let mut new = upd(old);
    if proto == 17 && new == 0 {
        new = 0xffff;
    }
    wr16(d, l4 + at, new)
}

/// Applies one masked set; false if the packet's bytes cannot take it.
pub fn set_field(pkt: &mut Packet, f: &SetField, nw_proto: u8) -> bool {
    let meta = *pkt.meta();
    let l3 = meta.l3_ofs.map(usize::from);
    let l4 = meta.l4_ofs.map(usize::from);
    let d = pkt.data_mut();
    let r = (|| -> Option<()> {
        match *f {
            SetField::EthSrc(m) => d.get_mut(6..12)?.copy_from_slice(&m.to_be_bytes()[2..8]),
            SetField::EthDst(m) => d.get_mut(0..6)?.copy_from_slice(&m.to_be_bytes()[2..8]),
            SetField::Ipv4Src(a) | SetField::Ipv4Dst(a) => {
                let l3 = l3?;
                let at = l3
                    + if matches!(f, SetField::Ipv4Src(_)) {
                        12
                    } else {
                        16
                    };
                let old = rd32(d, at)?;
                let hc = rd16(d, l3 + 10)?;
                wr32(d, at, a)?;
                wr16(d, l3 + 10, checksum::update32(hc, old, a))?;
                fix_l4(d, l4, nw_proto, |c| checksum::update32(c, old, a))?;
            }
            SetField::Ipv4Tos(t) | SetField::Ipv4Ttl(t) => {
                let l3 = l3?;
                // The byte and the 16-bit header word it sits in (for the checksum update).
                let (at, word_at) = if matches!(f, SetField::Ipv4Tos(_)) {
                    (l3 + 1, l3)
                } else {
                    (l3 + 8, l3 + 8)
                };
                let old = rd16(d, word_at)?;
                *d.get_mut(at)? = t;
                let new = rd16(d, word_at)?;
                let hc = rd16(d, l3 + 10)?;
                wr16(d, l3 + 10, checksum::update16(hc, old, new))?;
            }
            SetField::Ipv6Src(a) | SetField::Ipv6Dst(a) => {
                let l3 = l3?;
                let at = l3
                    + if matches!(f, SetField::Ipv6Src(_)) {
                        8
                    } else {
                        24
                    };
                let b = d.get(at..at + 16)?;
                let mut ob = [0u8; 16];
                ob.copy_from_slice(b);
                let old = u128::from_be_bytes(ob);
                d.get_mut(at..at + 16)?.copy_from_slice(&a.to_be_bytes());
                fix_l4(d, l4, nw_proto, |c| checksum::update128(c, old, a))?;
            }
            SetField::Ipv6Label(label) => {
                let l3 = l3?;
                let w = rd32(d, l3)?;
                wr32(d, l3, (w & !0x000f_ffff) | (label & 0x000f_ffff))?;
            }
            SetField::Ipv6Tclass(t) => {
                let l3 = l3?;
                let w = rd32(d, l3)?;
                wr32(d, l3, (w & !0x0ff0_0000) | (u32::from(t) << 20))?;
            }
            SetField::Ipv6Hlimit(h) => *d.get_mut(l3? + 7)? = h,
            SetField::TcpSrc(p) | SetField::UdpSrc(p) | SetField::SctpSrc(p) => {
                set_port(d, l4?, 0, p, f)?
            }
            SetField::TcpDst(p) | SetField::UdpDst(p) | SetField::SctpDst(p) => {
                set_port(d, l4?, 2, p, f)?
            }
            SetField::MplsLse(lse) => wr32(d, usize::from(meta.l2_5_ofs?), lse)?,
        }
        Some(())
    })();
    r.is_some()
}

fn set_port(d: &mut [u8], l4: usize, at: usize, p: u16, f: &SetField) -> Option<()> {
    let old = rd16(d, l4 + at)?;
    wr16(d, l4 + at, p)?;
    match f {
        SetField::SctpSrc(_) | SetField::SctpDst(_) => {
            // SCTP's CRC32c covers the whole packet: recompute it.
            wr32(d, l4 + 8, 0)?;
            let crc = checksum::crc32c(d.get(l4..)?);
            d.get_mut(l4 + 8..l4 + 12)?
                .copy_from_slice(&crc.to_le_bytes());
        }
        _ => {
            let csum_proto = if matches!(f, SetField::TcpSrc(_) | SetField::TcpDst(_)) {
                6
            } else {
                17
            };
            fix_l4(d, Some(l4), csum_proto, |c| checksum::update16(c, old, p))?;
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use packet::builder::PacketBuilder;
    use packet::extract::extract;
    use packet::key::FlowKey;

    use super::*;
    use crate::Pool;

    fn pkt(pool: &Pool, frame: &[u8]) -> Packet {
        let mut p = pool.alloc_copy(frame).expect("fits");
        let mut k = FlowKey::default();
        let info = extract(p.data(), &mut k);
        p.meta_mut().set_offsets(&info);
        p
    }

    const A: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const B: [u8; 6] = [2, 0, 0, 0, 0, 2];

    fn udp_frame() -> Vec<u8> {
        PacketBuilder::ethernet(A, B)
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2])
            .udp(1000, 2000)
            .payload(&[7; 20])
            .build()
    }

    fn tcp_frame() -> Vec<u8> {
        PacketBuilder::ethernet(A, B)
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2])
            .tcp(1000, 2000)
            .payload(&[7; 10])
            .build()
    }

    /// Whether the IPv4 header and TCP/UDP checksums of an untagged or tagged frame verify.
    fn checksums_ok(d: &[u8]) -> bool {
        let mut k = FlowKey::default();
        let info = extract(d, &mut k);
        let (Some(l3), Some(l4)) = (info.l3, info.l4) else {
            return false;
        };
        if checksum::checksum(&d[l3..l4]) != 0 {
            return false;
        }
        let src = std::net::Ipv4Addr::from(k.nw_src());
        let dst = std::net::Ipv4Addr::from(k.nw_dst());
        let len = u16::try_from(d.len() - l4).unwrap_or(0);
        let acc = checksum::pseudo_header_v4(src, dst, k.nw_proto(), len) + checksum::sum(&d[l4..]);
        checksum::verify(acc)
    }

    #[test]
    fn set_ipv4_and_ports_keeps_checksums_valid() {
        let pool = Pool::default();
        for frame in [udp_frame(), tcp_frame()] {
            let mut p = pkt(&pool, &frame);
            let proto = if frame == tcp_frame() { 6 } else { 17 };
            let (src, dst) = if proto == 6 {
                (SetField::TcpSrc(7), SetField::TcpDst(8))
            } else {
                (SetField::UdpSrc(7), SetField::UdpDst(8))
            };
            for f in [
                SetField::Ipv4Src(0x0b00_0001),
                SetField::Ipv4Dst(0x0c00_0002),
                SetField::Ipv4Ttl(9),
                SetField::Ipv4Tos(0x20),
                src,
                dst,
                SetField::EthSrc(0x0200_0000_0099),
            ] {
                assert!(set_field(&mut p, &f, proto), "{f:?}");
            }
            assert!(checksums_ok(p.data()));
            let mut k = FlowKey::default();
            extract(p.data(), &mut k);
            assert_eq!(k.nw_src(), 0x0b00_0001);
            assert_eq!(k.nw_dst(), 0x0c00_0002);
            assert_eq!((k.tp_src(), k.tp_dst()), (7, 8));
            assert_eq!(k.nw_ttl(), 9);
            assert_eq!(k.dl_src(), 0x0200_0000_0099);
        }
    }

    #[test]
    fn push_then_pop_vlan_restores_the_frame() {
        let pool = Pool::default();
        let frame = udp_frame();
        let mut p = pkt(&pool, &frame);
        assert!(push_vlan(&mut p, 0x8100, 0x1000 | 5));
        let mut k = FlowKey::default();
        extract(p.data(), &mut k);
        assert_eq!(k.vlan_tci() & 0xfff, 5);
        // Offsets moved with the headers: a set after the push lands in the right place.
        assert!(set_field(&mut p, &SetField::UdpDst(9), 17));
        assert!(pop_vlan(&mut p));
        assert!(!pop_vlan(&mut p));
        let mut k = FlowKey::default();
        extract(p.data(), &mut k);
        assert_eq!(k.tp_dst(), 9);
        assert!(checksums_ok(p.data()));
        assert_eq!(p.data().len(), frame.len());
    }

    #[test]
    fn rewrites_of_missing_headers_fail_without_panicking() {
        let pool = Pool::default();
        let mut p = pkt(&pool, &udp_frame()[..20]);
        assert!(!set_field(&mut p, &SetField::Ipv4Src(1), 17));
        assert!(!set_field(&mut p, &SetField::UdpSrc(1), 17));
        assert!(!set_field(&mut p, &SetField::MplsLse(1), 17));
        let mut tiny = pool.alloc_copy(&[0u8; 8]).expect("fits");
        assert!(!push_vlan(&mut tiny, 0x8100, 1));
        assert!(!pop_vlan(&mut tiny));
        assert!(!set_field(&mut tiny, &SetField::EthSrc(1), 0));
    }
}
