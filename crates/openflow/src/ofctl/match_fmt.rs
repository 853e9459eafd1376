//! Printing a [`Match`] exactly as ovs-ofctl does (OVS `match_format`).
//!
//! The order is OVS's, not the registry's: `priority`, `pkt_mark`, `recirc_id`,
//! `dp_hash`, `skb_priority`, `actset_output`, conntrack fields, the protocol shorthand
//! (`ip`, `tcp6`, `arp`, ...), registers, tunnel fields, `metadata`, `in_port`, VLAN,
//! `dl_src`, `dl_dst`, `dl_type` (when no shorthand covers it), L3 addresses, `nw_proto`,
//! ARP hardware addresses, `nw_tos`, `nw_ecn`, `nw_ttl`, MPLS, `nw_frag`, L4 ports (named
//! `icmp_type`/`icmp_code` for ICMP), ND fields and `tcp_flags`. Each kind of field has its
//! own number style (`reg0=0x3`, `tp_src=0x20/0x20`, `nw_tos=16`, `vlan_tci=0x0000`),
//! copied from OVS so that output compares byte for byte.
//!
//! # Example
//! ```
//! use openflow::ofctl::{format_match, parse_match};
//! let m = parse_match("udp,nw_dst=10.0.0.0/8,tp_dst=53").unwrap();
//! assert_eq!(format_match(&m, None), "udp,nw_dst=10.0.0.0/8,tp_dst=53");
//! ```

use std::fmt::Write;
use std::net::Ipv6Addr;

use packet::key::{fields, FlowKey, KeyField};

use crate::flow::DEFAULT_PRIORITY;
use crate::flow_match::{
    Match, ETH_TYPE_ARP, ETH_TYPE_IP, ETH_TYPE_IPV6, ETH_TYPE_MPLS, ETH_TYPE_MPLS_MCAST,
    ETH_TYPE_RARP, FRAG_ANY, FRAG_LATER, VLAN_CFI, VLAN_PCP_MASK, VLAN_VID_MASK,
};
use crate::ofctl::value::{
    ct_state_name, format_flags, format_flags_masked, format_mac, format_port, tcp_flag_name,
    tun_flag_name,
};

/// C's `%#x`: `0` for zero, else `0x` and the digits.
fn c_hex(v: u128) -> String {
    if v == 0 {
        "0".to_string()
    } else {
        format!("{v:#x}")
    }
}

fn ipv4(v: u128) -> String {
    let b = u32::try_from(v & 0xffff_ffff).unwrap_or(0).to_be_bytes();
    format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3])
}

struct Printer<'a> {
    out: String,
    v: &'a FlowKey,
    m: &'a FlowKey,
}

impl Printer<'_> {
    fn get(&self, f: KeyField) -> (u128, u128) {
        (self.v.get(f), self.m.get(f))
    }

    fn put(&mut self, s: &str) {
        self.out.push_str(s);
        self.out.push(',');
    }

    /// OVS `format_uint32_masked` / `format_be64_masked`: `%#x`, `/%#x` unless exact.
    fn hex_masked(&mut self, name: &str, f: KeyField) {
        let (v, m) = self.get(f);
        if m == 0 {
            return;
        }
        let mut s = format!("{name}={}", c_hex(v));
        if m != f.max_value() {
            let _ = write!(s, "/{}", c_hex(m));
        }
        self.put(&s);
    }

    /// OVS `format_be16_masked` / `format_uint16_masked`: decimal, or `0x%x/0x%x`.
    fn u16_masked(&mut self, name: &str, v: u128, m: u128) {
        if m == 0 {
            return;
        }
        if m == 0xffff {
            self.put(&format!("{name}={v}"));
        } else {
            self.put(&format!("{name}={v:#x}/{m:#x}"));
        }
    }

    /// OVS `format_be32_masked`: decimal, or `0x%08x/0x%08x`.
    fn u32_masked(&mut self, name: &str, v: u128, m: u128) {
        if m == 0 {
            return;
        }
        if m == 0xffff_ffff {
            self.put(&format!("{name}={v}"));
        } else {
            self.put(&format!("{name}=0x{v:08x}/0x{m:08x}"));
        }
    }

    /// OVS `format_ip_netmask`.
    fn ip_masked(&mut self, name: &str, f: KeyField) {
        let (v, m) = self.get(f);
        if m == 0 {
            return;
        }
        let mut s = format!("{name}={}", ipv4(v));
        if m != 0xffff_ffff {
            match crate::ofctl::value::cidr_len(m, 32) {
                Some(n) => {
                    let _ = write!(s, "/{n}");
                }
                None => {
                    let _ = write!(s, "/{}", ipv4(m));
                }
            }
        }
        self.put(&s);
    }

    /// OVS `format_ipv6_netmask`.
    fn ipv6_masked(&mut self, name: &str, f: KeyField) {
        let (v, m) = self.get(f);
        if m == 0 {
            return;
        }
        let mut s = format!("{name}={}", Ipv6Addr::from(v));
        if m != u128::MAX {
            match crate::ofctl::value::cidr_len(m, 128) {
                Some(n) => {
                    let _ = write!(s, "/{n}");
                }
                None => {
                    let _ = write!(s, "/{}", Ipv6Addr::from(m));
                }
            }
        }
        self.put(&s);
    }

    /// OVS `format_eth_masked`.
    fn eth_masked(&mut self, name: &str, f: KeyField) {
        let (v, m) = self.get(f);
        if m == 0 {
            return;
        }
        let full = (1u128 << 48) - 1;
        #[allow(clippy::cast_possible_truncation)]
        let mut s = format!("{name}={}", format_mac(v as u64));
        if m != full {
            #[allow(clippy::cast_possible_truncation)]
            let _ = write!(s, "/{}", format_mac(m as u64));
        }
        self.put(&s);
    }

    fn vlan(&mut self, suffix: &str, f: KeyField) {
        let (tci, mask) = self.get(f);
        let (tci, mask) = (
            u16::try_from(tci).unwrap_or(0),
            u16::try_from(mask).unwrap_or(0),
        );
        let vid_mask = mask & VLAN_VID_MASK;
        let pcp_mask = mask & VLAN_PCP_MASK;
        let cfi = mask & VLAN_CFI;
        if cfi != 0
            && tci & VLAN_CFI != 0
            && (vid_mask == 0 || vid_mask == VLAN_VID_MASK)
            && (pcp_mask == 0 || pcp_mask == VLAN_PCP_MASK)
            && (vid_mask != 0 || pcp_mask != 0)
        {
            if vid_mask != 0 {
                self.put(&format!("dl_vlan{suffix}={}", tci & VLAN_VID_MASK));
            }
            if pcp_mask != 0 {
                self.put(&format!("dl_vlan_pcp{suffix}={}", tci >> 13));
            }
        } else if mask == 0xffff {
            self.put(&format!("vlan_tci{suffix}=0x{tci:04x}"));
        } else {
            self.put(&format!("vlan_tci{suffix}=0x{tci:04x}/0x{mask:04x}"));
        }
    }
}

/// Prints a match as OVS `match_format` does, with `priority=N` first when `priority` is
/// given and is not the default 32768. An empty string is the catch-all match.
pub fn format_match(mt: &Match, priority: Option<u16>) -> String {
    format_match_inner(mt, priority, false)
}

/// [`format_match`], and with `tunnel_packet` the tunnel fields a tunnelled packet has but
/// a key does not store (`tun_ipv6_src=::`, `tun_erspan_ver=0`, `gtpu_flags=0`...), as OVS
/// `flow_format` prints them.
pub(crate) fn format_match_inner(mt: &Match, priority: Option<u16>, tunnel_packet: bool) -> String {
    let mut p = Printer {
        out: String::new(),
        v: mt.value(),
        m: mt.mask(),
    };
    let (v, m) = (*mt.value(), *mt.mask());
    if let Some(pr) = priority {
        if pr != DEFAULT_PRIORITY {
            p.put(&format!("priority={pr}"));
        }
    }
    p.hex_masked("pkt_mark", fields::PKT_MARK);
    p.hex_masked("recirc_id", fields::RECIRC_ID);
    p.hex_masked("dp_hash", fields::DP_HASH);
    if m.skb_priority() != 0 {
        p.put(&format!(
            "skb_priority={}",
            c_hex(u128::from(v.skb_priority()))
        ));
    }
    if m.actset_output() != 0 {
        #[allow(clippy::cast_possible_truncation)]
        let port = format_port(v.actset_output() as u16);
        p.put(&format!("actset_output={port}"));
    }
    if m.ct_state() & 0xff != 0 {
        let (cv, cm) = (v.ct_state() & 0xff, m.ct_state() & 0xff);
        let s = if cm == 0xff {
            if cv != 0 {
                format_flags(ct_state_name, cv, '|')
            } else {
                "0".to_string()
            }
        } else {
            format_flags_masked(ct_state_name, cv, cm, 0xff)
        };
        p.put(&format!("ct_state={s}"));
    }
    let (zv, zm) = p.get(fields::CT_ZONE);
    p.u16_masked("ct_zone", zv, zm);
    p.hex_masked("ct_mark", fields::CT_MARK);
    let (lv, lm) = p.get(fields::CT_LABEL);
    if lm != 0 {
        let mut s = format!("ct_label={lv:#x}");
        if lm != u128::MAX {
            let _ = write!(s, "/{lm:#x}");
        }
        p.put(&s);
    }
    p.ip_masked("ct_nw_src", fields::CT_NW_SRC);
    p.ip_masked("ct_nw_dst", fields::CT_NW_DST);
    if m.ct_nw_proto() != 0 {
        p.put(&format!("ct_nw_proto={}", v.ct_nw_proto()));
        let (a, b) = p.get(fields::CT_TP_SRC);
        p.u16_masked("ct_tp_src", a, b);
        let (a, b) = p.get(fields::CT_TP_DST);
        p.u16_masked("ct_tp_dst", a, b);
    }

    // A match on `recirc_id` is a datapath-level (megaflow) match: OVS then shows the
    // packet type, which any L2-and-up field implies.
    if m.recirc_id() != 0
        && m.words[packet::key::STAGES[1].start..]
            .iter()
            .any(|w| *w != 0)
    {
        p.put("eth");
    }
    let dl_type = v.dl_type();
    let mut skip_type = false;
    let mut skip_proto = false;
    if m.dl_type() != 0 {
        skip_type = true;
        let proto_masked = m.nw_proto() != 0;
        let proto = v.nw_proto();
        let name = match dl_type {
            ETH_TYPE_IP => {
                let n = if proto_masked {
                    match proto {
                        1 => Some("icmp"),
                        6 => Some("tcp"),
                        17 => Some("udp"),
                        132 => Some("sctp"),
                        _ => None,
                    }
                } else {
                    None
                };
                skip_proto = n.is_some();
                n.unwrap_or("ip")
            }
            ETH_TYPE_IPV6 => {
                let n = if proto_masked {
                    match proto {
                        58 => Some("icmp6"),
                        6 => Some("tcp6"),
                        17 => Some("udp6"),
                        132 => Some("sctp6"),
                        _ => None,
                    }
                } else {
                    None
                };
                skip_proto = n.is_some();
                n.unwrap_or("ipv6")
            }
            ETH_TYPE_ARP => "arp",
            ETH_TYPE_RARP => "rarp",
            ETH_TYPE_MPLS => "mpls",
            ETH_TYPE_MPLS_MCAST => "mplsm",
            _ => {
                skip_type = false;
                ""
            }
        };
        if skip_type {
            p.put(name);
        }
    }
    for (i, r) in fields::REGS.iter().enumerate() {
        if m.get(*r) != 0 {
            p.hex_masked(&format!("reg{i}"), *r);
        }
    }

    // Tunnel fields (OVS `format_flow_tunnel`).
    p.hex_masked("tun_id", fields::TUN_ID);
    p.ip_masked("tun_src", fields::TUN_SRC);
    p.ip_masked("tun_dst", fields::TUN_DST);
    if tunnel_packet {
        p.put("tun_ipv6_src=::");
        p.put("tun_ipv6_dst=::");
    }
    let (a, b) = p.get(fields::TUN_GBP_ID);
    p.u16_masked("tun_gbp_id", a, b);
    if m.tun_gbp_flags() != 0 {
        p.put(&format!(
            "tun_gbp_flags={}",
            c_hex(u128::from(v.tun_gbp_flags()))
        ));
    }
    if m.tun_tos() != 0 {
        p.put(&format!("tun_tos={:x}", v.tun_tos()));
    }
    if m.tun_ttl() != 0 {
        p.put(&format!("tun_ttl={}", v.tun_ttl()));
    }
    if tunnel_packet {
        p.put("tun_erspan_ver=0");
        p.put("gtpu_flags=0");
        p.put("gtpu_msgtype=0");
    }
    if m.tun_flags() & 0xf != 0 {
        let s = format_flags_masked(
            tun_flag_name,
            u32::from(v.tun_flags() & 0xf),
            u32::from(m.tun_flags() & 0xf),
            0xf,
        );
        p.put(&format!("tun_flags={s}"));
    }
    p.hex_masked("metadata", fields::METADATA);
    if m.in_port() != 0 {
        #[allow(clippy::cast_possible_truncation)]
        let port = format_port(v.in_port() as u16);
        p.put(&format!("in_port={port}"));
    }
    if m.vlan_tci() != 0 {
        p.vlan("", fields::VLAN_TCI);
        if m.vlan_tci1() != 0 {
            p.vlan("1", fields::VLAN_TCI1);
        }
    }
    p.eth_masked("dl_src", fields::DL_SRC);
    p.eth_masked("dl_dst", fields::DL_DST);
    if !skip_type && m.dl_type() != 0 {
        p.put(&format!("dl_type=0x{dl_type:04x}"));
    }
    let is_arp = dl_type == ETH_TYPE_ARP || dl_type == ETH_TYPE_RARP;
    if dl_type == ETH_TYPE_IPV6 {
        p.ipv6_masked("ipv6_src", fields::IPV6_SRC);
        p.ipv6_masked("ipv6_dst", fields::IPV6_DST);
        let (lv, lm) = p.get(fields::IPV6_LABEL);
        if lm != 0 {
            if lm == 0xfffff {
                p.put(&format!("ipv6_label=0x{lv:05x}"));
            } else {
                p.put(&format!("ipv6_label=0x{lv:05x}/0x{lm:05x}"));
            }
        }
    } else if is_arp {
        p.ip_masked("arp_spa", fields::NW_SRC);
        p.ip_masked("arp_tpa", fields::NW_DST);
    } else {
        p.ip_masked("nw_src", fields::NW_SRC);
        p.ip_masked("nw_dst", fields::NW_DST);
    }
    if !skip_proto && m.nw_proto() != 0 {
        let name = if is_arp { "arp_op" } else { "nw_proto" };
        p.put(&format!("{name}={}", v.nw_proto()));
    }
    if is_arp {
        p.eth_masked("arp_sha", fields::ARP_SHA);
        p.eth_masked("arp_tha", fields::ARP_THA);
    }
    if m.nw_tos() & 0xfc != 0 {
        p.put(&format!("nw_tos={}", v.nw_tos() & 0xfc));
    }
    if m.nw_tos() & 3 != 0 {
        p.put(&format!("nw_ecn={}", v.nw_tos() & 3));
    }
    if m.nw_ttl() != 0 {
        p.put(&format!("nw_ttl={}", v.nw_ttl()));
    }
    let (lse, lse_m) = (v.mpls_lse0(), m.mpls_lse0());
    if lse_m & 0xffff_f000 != 0 {
        p.put(&format!("mpls_label={}", lse >> 12));
    }
    if lse_m & 0xe00 != 0 {
        p.put(&format!("mpls_tc={}", (lse >> 9) & 7));
    }
    if lse_m & 0xff != 0 {
        p.put(&format!("mpls_ttl={}", lse & 0xff));
    }
    if lse_m & 0x100 != 0 {
        p.put(&format!("mpls_bos={}", (lse >> 8) & 1));
    }
    let (a, b) = p.get(fields::MPLS_LSE1);
    p.u32_masked("mpls_lse1", a, b);
    let (a, b) = p.get(fields::MPLS_LSE2);
    p.u32_masked("mpls_lse2", a, b);

    let (fv, fm) = (v.nw_frag(), m.nw_frag() & (FRAG_ANY | FRAG_LATER));
    let frag = match fm {
        3 => Some(match (fv & FRAG_ANY != 0, fv & FRAG_LATER != 0) {
            (true, true) => "later",
            (true, false) => "first",
            (false, true) => "<error>",
            (false, false) => "no",
        }),
        FRAG_ANY => Some(if fv & FRAG_ANY != 0 { "yes" } else { "no" }),
        FRAG_LATER => Some(if fv & FRAG_LATER != 0 {
            "later"
        } else {
            "not_later"
        }),
        _ => None,
    };
    if let Some(f) = frag {
        p.put(&format!("nw_frag={f}"));
    }
    let (sv, sm) = p.get(fields::TP_SRC);
    let (dv, dm) = p.get(fields::TP_DST);
    if dl_type == ETH_TYPE_IP && v.nw_proto() == 1 {
        p.u16_masked("icmp_type", sv, sm);
        p.u16_masked("icmp_code", dv, dm);
    } else if dl_type == ETH_TYPE_IPV6 && v.nw_proto() == 58 {
        p.u16_masked("icmp_type", sv, sm);
        p.u16_masked("icmp_code", dv, dm);
        p.ipv6_masked("nd_target", fields::ND_TARGET);
        p.eth_masked("nd_sll", fields::ARP_SHA);
        p.eth_masked("nd_tll", fields::ARP_THA);
    } else {
        p.u16_masked("tp_src", sv, sm);
        p.u16_masked("tp_dst", dv, dm);
    }
    let is_ip = dl_type == ETH_TYPE_IP || dl_type == ETH_TYPE_IPV6;
    if is_ip && v.nw_proto() == 6 && m.tcp_flags() != 0 {
        let s = format_flags_masked(
            tcp_flag_name,
            u32::from(v.tcp_flags()),
            u32::from(m.tcp_flags() & 0x0fff),
            0x0fff,
        );
        p.put(&format!("tcp_flags={s}"));
    }
    if p.out.ends_with(',') {
        p.out.pop();
    }
    p.out
}
