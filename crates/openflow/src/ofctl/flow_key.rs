//! A packet's [`FlowKey`] as text, in OVS `flow_format` style (what `ofproto/trace` prints
//! on its `Flow:` line and accepts as an OpenFlow-syntax packet), and back.
//!
//! Printing shows the fields a packet of that kind has (OVS
//! `flow_wildcards_init_for_packet`): always `in_port` (when not 0), the VLAN (up to the
//! first absent tag: `vlan_tci=0x0000`, or `dl_vlan=10,dl_vlan_pcp=0,vlan_tci1=0x0000`),
//! `dl_src`, `dl_dst` and the type; then the L3 and L4 fields of IPv4, IPv6, ARP or MPLS
//! packets, with `nw_tos`, `nw_ecn`, `nw_ttl`, `nw_frag` and `tcp_flags` even when zero.
//! Metadata (`skb_priority`, `pkt_mark`, `recirc_id`, `dp_hash`, conntrack fields) appears
//! only when not zero; registers and `metadata` never do.
//!
//! Parsing takes the same text (or any subset of it): every field not given is zero.
//!
//! # Example
//! ```
//! use openflow::ofctl::{format_flow_key, parse_flow_key};
//! let text = "icmp,in_port=1,vlan_tci=0x0000,dl_src=50:54:00:00:00:05,\
//!             dl_dst=50:54:00:00:00:07,nw_src=192.168.0.1,nw_dst=192.168.0.2,nw_tos=0,\
//!             nw_ecn=0,nw_ttl=128,nw_frag=no,icmp_type=8,icmp_code=0";
//! let key = parse_flow_key(text).unwrap();
//! assert_eq!(key.nw_ttl(), 128);
//! assert_eq!(format_flow_key(&key), text);
//! ```

use packet::key::{fields, FlowKey, KeyField};

use crate::flow_match::{
    Match, ETH_TYPE_ARP, ETH_TYPE_IP, ETH_TYPE_IPV6, ETH_TYPE_MPLS, ETH_TYPE_MPLS_MCAST,
    ETH_TYPE_RARP, FRAG_LATER, VLAN_CFI,
};
use crate::ofctl::flow::{split_key_values, MatchBuilder};
use crate::ofctl::match_fmt::format_match_inner;
use crate::ofctl::value::{parse_flags, parse_int, tun_flag_name};
use crate::Error;

fn on(m: &mut FlowKey, f: KeyField) {
    m.set(f, u128::MAX);
}

/// The mask of the fields OVS shows for a packet with key `k`.
pub fn packet_fields_mask(k: &FlowKey) -> FlowKey {
    let mut m = FlowKey::default();
    if k.ct_state() != 0 {
        m.set(fields::CT_STATE, 0xff);
    }
    if k.tun_dst() != 0 {
        // FLOW_TNL_F_KEY.
        if k.tun_flags() & 0x8 != 0 {
            on(&mut m, fields::TUN_ID);
        }
        for f in [
            fields::TUN_SRC,
            fields::TUN_DST,
            fields::TUN_FLAGS,
            fields::TUN_TOS,
            fields::TUN_TTL,
            fields::TUN_GBP_ID,
            fields::TUN_GBP_FLAGS,
        ] {
            on(&mut m, f);
        }
    } else if k.tun_id() != 0 {
        on(&mut m, fields::TUN_ID);
    }
    // Context fields show only when set (OVS `flow_format`).
    for f in [
        fields::SKB_PRIORITY,
        fields::PKT_MARK,
        fields::CT_ZONE,
        fields::CT_MARK,
        fields::CT_LABEL,
        fields::RECIRC_ID,
        fields::DP_HASH,
        fields::IN_PORT,
    ] {
        if k.get(f) != 0 {
            on(&mut m, f);
        }
    }
    on(&mut m, fields::DL_DST);
    on(&mut m, fields::DL_SRC);
    on(&mut m, fields::DL_TYPE);
    on(&mut m, fields::VLAN_TCI);
    if k.vlan_tci() != 0 {
        on(&mut m, fields::VLAN_TCI1);
    }
    let ct_valid = k.ct_state() & 0x20 != 0 && k.ct_state() & 0x10 == 0;
    let show_ct = ct_valid && k.ct_nw_proto() != 0;
    let is_nd = k.dl_type() == ETH_TYPE_IPV6
        && k.nw_proto() == 58
        && matches!(k.tp_src(), 135 | 136)
        && k.tp_dst() == 0;
    match k.dl_type() {
        ETH_TYPE_IP => {
            on(&mut m, fields::NW_SRC);
            on(&mut m, fields::NW_DST);
            if show_ct {
                on(&mut m, fields::CT_NW_SRC);
                on(&mut m, fields::CT_NW_DST);
            }
        }
        ETH_TYPE_IPV6 => {
            on(&mut m, fields::IPV6_SRC);
            on(&mut m, fields::IPV6_DST);
            on(&mut m, fields::IPV6_LABEL);
            if is_nd {
                on(&mut m, fields::ARP_SHA);
                on(&mut m, fields::ARP_THA);
                on(&mut m, fields::ND_TARGET);
            }
        }
        ETH_TYPE_ARP | ETH_TYPE_RARP => {
            for f in [
                fields::NW_SRC,
                fields::NW_DST,
                fields::NW_PROTO,
                fields::ARP_SHA,
                fields::ARP_THA,
            ] {
                on(&mut m, f);
            }
            return m;
        }
        ETH_TYPE_MPLS | ETH_TYPE_MPLS_MCAST => {
            for f in [fields::MPLS_LSE0, fields::MPLS_LSE1, fields::MPLS_LSE2] {
                on(&mut m, f);
                if k.get(f) & 0x100 != 0 {
                    break;
                }
            }
            return m;
        }
        _ => return m,
    }
    on(&mut m, fields::NW_TOS);
    on(&mut m, fields::NW_TTL);
    on(&mut m, fields::NW_PROTO);
    m.set(fields::NW_FRAG, 3);
    if show_ct {
        on(&mut m, fields::CT_NW_PROTO);
        on(&mut m, fields::CT_TP_SRC);
        on(&mut m, fields::CT_TP_DST);
    }
    if k.nw_frag() & FRAG_LATER == 0 && matches!(k.nw_proto(), 1 | 58 | 6 | 17 | 132 | 2) {
        on(&mut m, fields::TP_SRC);
        on(&mut m, fields::TP_DST);
        if k.nw_proto() == 6 {
            on(&mut m, fields::TCP_FLAGS);
        }
    }
    m
}

/// Prints a packet's key as OVS `flow_format` does.
pub fn format_flow_key(key: &FlowKey) -> String {
    let tunnelled = key.tun_dst() != 0;
    format_match_inner(&Match::new(*key, packet_fields_mask(key)), None, tunnelled)
}

/// Parses flow-syntax packet text (`tcp,in_port=1,dl_src=...,tp_dst=80`): the fields
/// given are set, every other field is zero. Accepts what [`format_flow_key`] prints
/// (including `vlan_tci1`).
pub fn parse_flow_key(s: &str) -> Result<FlowKey, Error> {
    parse_flow_key_with_ports(s, &[])
}

/// [`parse_flow_key`] with port names (`in_port=p1`).
pub fn parse_flow_key_with_ports(s: &str, port_names: &[(String, u16)]) -> Result<FlowKey, Error> {
    let mut b = MatchBuilder::new(port_names);
    // Key fields that OVS prints but has no match field for.
    let mut extra = Vec::new();
    for (name, value) in split_key_values(s) {
        let kf = match name {
            "vlan_tci1" => Some((fields::VLAN_TCI1, 2)),
            "mpls_lse1" => Some((fields::MPLS_LSE1, 4)),
            "mpls_lse2" => Some((fields::MPLS_LSE2, 4)),
            _ => None,
        };
        // Tunnel fields a key does not store; OVS prints them as zero.
        if matches!(
            name,
            "tun_ipv6_src" | "tun_ipv6_dst" | "tun_erspan_ver" | "gtpu_flags" | "gtpu_msgtype"
        ) {
            continue;
        }
        if name == "tun_flags" {
            // A packet may carry every tunnel flag, not only the matchable `oam`.
            let (v, _) = parse_flags(value, tun_flag_name, "tunnel", 0xf)?;
            extra.push((fields::TUN_FLAGS, v));
            continue;
        }
        if let Some((kf, n_bytes)) = kf {
            let v = parse_int(value, n_bytes)
                .ok_or_else(|| Error::Parse(format!("{value}: bad syntax for {name} value")))?;
            extra.push((kf, v));
            continue;
        }
        if !b.item(name, value)? {
            return Err(Error::Parse(format!("unknown keyword {name}")));
        }
    }
    let mut k = *b.into_match().value();
    for (kf, v) in extra {
        k.set(kf, v);
    }
    Ok(k)
}

/// True if `k` carries a VLAN tag.
pub fn has_vlan(k: &FlowKey) -> bool {
    k.vlan_tci() & VLAN_CFI != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    const CASES: [&str; 6] = [
        "arp,in_port=1,vlan_tci=0x0000,dl_src=50:54:00:00:00:06,dl_dst=50:54:00:00:00:05,arp_spa=192.168.0.1,arp_tpa=192.168.0.2,arp_op=1,arp_sha=50:54:00:00:00:05,arp_tha=00:00:00:00:00:00",
        "icmp,in_port=20,dl_vlan=100,dl_vlan_pcp=0,vlan_tci1=0x0000,dl_src=50:54:00:00:00:05,dl_dst=50:54:00:00:00:07,nw_src=192.168.0.1,nw_dst=192.168.0.2,nw_tos=0,nw_ecn=0,nw_ttl=128,nw_frag=no,icmp_type=8,icmp_code=0",
        "icmp6,in_port=1,vlan_tci=0x0000,dl_src=f6:d2:b0:19:5e:7b,dl_dst=d2:49:19:91:78:fe,ipv6_src=1000::3,ipv6_dst=1000::4,ipv6_label=0x00000,nw_tos=0,nw_ecn=0,nw_ttl=0,nw_frag=no,icmp_type=128,icmp_code=0",
        "in_port=1,vlan_tci=0x0000,dl_src=00:00:00:00:00:00,dl_dst=00:00:00:00:00:00,dl_type=0x0000",
        "tcp,in_port=2,vlan_tci=0x0000,dl_src=50:54:00:00:00:07,dl_dst=50:54:00:00:00:05,nw_src=192.168.0.2,nw_dst=192.168.0.1,nw_tos=0,nw_ecn=0,nw_ttl=64,nw_frag=no,tp_src=80,tp_dst=8,tcp_flags=fin|syn|psh|urg|ece|cwr|ns|[200]|[400]|[800]",
        "ip,in_port=1,vlan_tci=0x0000,dl_src=50:54:00:00:00:05,dl_dst=50:54:00:00:00:07,nw_src=192.168.0.1,nw_dst=192.168.0.2,nw_proto=111,nw_tos=0,nw_ecn=0,nw_ttl=3,nw_frag=no",
    ];

    #[test]
    fn flow_key_roundtrips_trace_inputs() {
        for c in CASES {
            let k = parse_flow_key(c).unwrap();
            assert_eq!(format_flow_key(&k), c);
        }
    }

    #[test]
    fn flow_key_unspecified_fields_are_zero() {
        let k = parse_flow_key("tcp,tp_dst=80").unwrap();
        assert_eq!(k.dl_type(), 0x0800);
        assert_eq!(k.nw_ttl(), 0);
        assert_eq!(k.tp_dst(), 80);
        assert!(!has_vlan(&k));
        assert!(parse_flow_key("bogus=1").is_err());
    }

    #[test]
    fn flow_key_tunnel_packet() {
        let text = "tun_id=0x5,tun_src=1.1.1.1,tun_dst=2.2.2.2,tun_ipv6_src=::,\
                    tun_ipv6_dst=::,tun_gbp_id=0,tun_gbp_flags=0,tun_tos=0,tun_ttl=64,\
                    tun_erspan_ver=0,gtpu_flags=0,gtpu_msgtype=0,tun_flags=key,in_port=1,\
                    vlan_tci=0x0000,dl_src=00:00:00:00:00:01,dl_dst=00:00:00:00:00:02,\
                    dl_type=0x1234";
        let k = parse_flow_key(text).unwrap();
        assert_eq!(k.tun_ttl(), 64);
        assert_eq!(format_flow_key(&k), text);
    }

    #[test]
    fn flow_key_port_names() {
        let names = vec![("p1".to_string(), 1u16)];
        let k = parse_flow_key_with_ports("in_port=p1", &names).unwrap();
        assert_eq!(k.in_port(), 1);
    }
}
