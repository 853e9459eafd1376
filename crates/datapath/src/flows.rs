//! The benchmark flows, as the OVS-DPDK peer run defines them (`peers/ovs-dpdk/flowdef.py`,
//! `gen_pcap.py`), for tests, benches and examples (feature `test-utils`).
//!
//! Flow `i` of `N` is `198.18.0.0 + (i mod 65536) → 198.19.0.0 + (i div 65536)`, UDP
//! `1024 + (i mod 64000) → 1024 + (i div 64000)`, from 02:00:00:00:00:01 to
//! 02:00:00:00:00:02; the IPv4 identification is `i mod 65536` with DF set, and the payload
//! starts with `i` (big endian). A "64 B frame" is 60 bytes in memory (the FCS is not
//! captured), a 1518 B frame 1514. The bytes equal those of `gen_pcap.py`, so a capture
//! written here replays the same traffic as the OVS-DPDK runs.

use std::net::Ipv4Addr;

use packet::builder::PacketBuilder;

use crate::pcap::{PcapWriter, WriterOptions};

/// Ethernet source of every flow.
pub const SRC_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
/// Ethernet destination of every flow.
pub const DST_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
/// Length of the FCS that wire sizes include and captures do not.
pub const FCS_LEN: usize = 4;
/// Ethernet + IPv4 + UDP headers.
const HEADERS_LEN: usize = 14 + 20 + 8;

/// The 5-tuple of flow `i`: (source, destination, source port, destination port).
pub fn flow_tuple(i: u32) -> (Ipv4Addr, Ipv4Addr, u16, u16) {
    let src = Ipv4Addr::new(198, 18, 0, 0).to_bits() + (i % 65_536);
    let dst = Ipv4Addr::new(198, 19, 0, 0)
        .to_bits()
        .wrapping_add(i / 65_536);
    let port = |v: u32| u16::try_from(1024 + v).unwrap_or(u16::MAX);
    (
        Ipv4Addr::from_bits(src),
        Ipv4Addr::from_bits(dst),
        port(i % 64_000),
        port(i / 64_000),
    )
}

/// The exact 5-tuple rule of flow `i` (priority 100, forwarding to `out_port`) in
/// `ovs-ofctl add-flows` syntax, as `gen_rules.py --mode exact` writes it.
pub fn exact_rule(i: u32, out_port: &str) -> String {
    let (src, dst, sport, dport) = flow_tuple(i);
    format!(
        "priority=100,udp,nw_src={src},nw_dst={dst},tp_src={sport},tp_dst={dport},actions=output:{out_port}"
    )
}

/// The rule that forwards the odd flows of the rule set `mixed` (whose even flows have their
/// [`exact_rule`]), with `{out}` for the output port.
pub fn mixed_prefix_rule(out_port: &str) -> String {
    format!("priority=10,udp,nw_src=198.18.0.0/16,actions=output:{out_port}")
}

/// Flow `i`'s rule in the rule set `masks8`: an exact match on one of eight combinations of
/// the 5-tuple's fields (`i mod 8` picks it, each combination with its own priority, and
/// each includes `nw_src`), so translations make megaflows of at least eight masks.
pub fn masks8_rule(i: u32, out_port: &str) -> String {
    let (s, d, sp, dp) = flow_tuple(i);
    let j = i % 8;
    let fields = match j {
        0 => format!("nw_src={s},nw_dst={d},tp_src={sp},tp_dst={dp}"),
        1 => format!("nw_src={s},nw_dst={d},tp_src={sp}"),
        2 => format!("nw_src={s},nw_dst={d},tp_dst={dp}"),
        3 => format!("nw_src={s},tp_src={sp},tp_dst={dp}"),
        4 => format!("nw_src={s},nw_dst={d}"),
        5 => format!("nw_src={s},tp_src={sp}"),
        6 => format!("nw_src={s},tp_dst={dp}"),
        _ => format!("nw_src={s}"),
    };
    format!(
        "priority={},udp,{fields},actions=output:{out_port}",
        100 - j
    )
}

/// The frame of flow `i`, `wire_len` bytes on the wire (FCS included), so `wire_len - 4`
/// bytes long; at least 46 (an Ethernet/IPv4/UDP header).
pub fn flow_frame(i: u32, wire_len: usize) -> Vec<u8> {
    let frame_len = wire_len.saturating_sub(FCS_LEN).max(HEADERS_LEN);
    let mut payload = vec![0u8; frame_len - HEADERS_LEN];
    if payload.len() >= 4 {
        payload[..4].copy_from_slice(&i.to_be_bytes());
    }
    let (src, dst, sport, dport) = flow_tuple(i);
    PacketBuilder::ethernet(SRC_MAC, DST_MAC)
        .ipv4(src, dst)
        .ident(u16::try_from(i & 0xffff).unwrap_or_default())
        .fragment(0, false, true)
        .udp(sport, dport)
        .payload(&payload)
        .build()
}

/// A capture of flows `0..n_flows`, one frame each, in order: the bytes of the file
/// `gen_pcap.py --flows N --frame-size WIRE_LEN` writes.
pub fn flows_pcap(n_flows: u32, wire_len: usize) -> Vec<u8> {
    let mut w = PcapWriter::new(Vec::new(), WriterOptions::default())
        .expect("writing to a Vec cannot fail");
    for i in 0..n_flows {
        w.write_frame(i / 1_000_000, i % 1_000_000, &flow_frame(i, wire_len))
            .expect("writing to a Vec cannot fail");
    }
    w.into_inner()
}

/// The flow index a frame of [`flow_frame`] carries in its payload.
pub fn flow_index(frame: &[u8]) -> Option<u32> {
    let b = frame.get(HEADERS_LEN..HEADERS_LEN + 4)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netdev::null::FiveTuple;

    #[test]
    fn flow_frame_sizes_and_tuple() {
        for (wire, len) in [(64, 60), (128, 124), (1518, 1514), (9004, 9000)] {
            let f = flow_frame(70_000, wire);
            assert_eq!(f.len(), len);
            assert_eq!(flow_index(&f), Some(70_000));
        }
        let t = FiveTuple::parse(&flow_frame(70_000, 64)).unwrap();
        assert_eq!(t.src, u128::from(Ipv4Addr::new(198, 18, 17, 112).to_bits()));
        assert_eq!(t.dst, u128::from(Ipv4Addr::new(198, 19, 0, 1).to_bits()));
        assert_eq!((t.src_port, t.dst_port, t.proto), (1024 + 6000, 1025, 17));
    }

    #[test]
    fn flows_pcap_matches_gen_pcap_layout() {
        let bytes = flows_pcap(3, 64);
        assert_eq!(bytes.len(), 24 + 3 * (16 + 60));
        // gen_pcap.py: magic, v2.4, snaplen 65535, LINKTYPE_ETHERNET.
        assert_eq!(&bytes[..8], &[0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0]);
        // Flow 0's IPv4 header: DF set, ident 0, TTL 64, UDP.
        assert_eq!(
            &bytes[40 + 14..40 + 24],
            &[0x45, 0, 0, 46, 0, 0, 0x40, 0, 64, 17]
        );
    }
}
