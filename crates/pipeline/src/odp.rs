//! The OVS datapath vocabulary: the flow-key syntax (`in_port(1),eth(src=..),ipv4(..)`) and
//! datapath actions (`2,push_vlan(vid=10,pcp=0),set(ipv4(ttl=63)),3`), parsed and printed
//! the way OVS's `odp-util` does so that ferrovs traces compare directly with OVS's.
//!
//! # Flow keys
//!
//! [`parse_key`] reads the syntax `ovs-appctl ofproto/trace` accepts for a datapath-level
//! trace and returns a [`FlowKey`] with the datapath port in `in_port` (the caller maps it
//! to an OpenFlow port). Fields not given are zero, as in OVS. VLAN tags are written as
//! `eth_type(0x8100),vlan(vid=10,pcp=0),encap(eth_type(0x0800),ipv4(..))`, nested once more
//! for a second tag.
//!
//! # Datapath actions
//!
//! [`DpAction`] is what translation produces and the datapath executes; [`format_actions`]
//! prints a list the way OVS prints `Datapath actions:` (`drop` for an empty list). A set
//! action carries only the fields it changes, and prints only those (OVS's masked set).
//!
//! # Example
//! ```
//! use pipeline::odp::{format_actions, parse_key, DpAction, SetField};
//! let key = parse_key("in_port(1),eth(src=50:54:00:00:00:05,dst=50:54:00:00:00:07),\
//!                      eth_type(0x0800),ipv4(src=192.168.0.1,dst=192.168.0.2,proto=1,\
//!                      tos=0,ttl=64,frag=no),icmp(type=8,code=0)").unwrap();
//! assert_eq!(key.in_port(), 1);
//! assert_eq!(key.nw_ttl(), 64);
//! let acts = vec![
//!     DpAction::Set(vec![SetField::Ipv4Ttl(63)]),
//!     DpAction::Output(2),
//!     DpAction::PushVlan { tpid: 0x8100, tci: 0x1000 | 10 },
//!     DpAction::Output(3),
//! ];
//! assert_eq!(format_actions(&acts), "set(ipv4(ttl=63)),2,push_vlan(vid=10,pcp=0),3");
//! ```

use std::fmt::Write as _;
use std::net::{Ipv4Addr, Ipv6Addr};

use openflow::ofctl::value::{format_mac, parse_mac, parse_uint};
use packet::key::FlowKey;

/// Errors from parsing the datapath syntax.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OdpError {
    /// The text is not well formed; the message says where.
    #[error("datapath flow syntax: {0}")]
    Syntax(String),
}

fn syntax(msg: impl Into<String>) -> OdpError {
    OdpError::Syntax(msg.into())
}

/// `nw_frag` bit: any fragment.
const FRAG_ANY: u8 = 1;
/// `nw_frag` bit: a later (non-first) fragment.
const FRAG_LATER: u8 = 2;
/// The VLAN "tag present" bit that OVS keeps in a stored TCI.
pub const VLAN_CFI: u16 = 0x1000;

/// Splits `s` at commas that are not inside parentheses.
fn split_top(s: &str) -> Result<Vec<&str>, OdpError> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return Err(syntax(format!("unbalanced `)' in `{s}'")));
                }
            }
            ',' if depth == 0 => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(syntax(format!("unbalanced `(' in `{s}'")));
    }
    let last = s[start..].trim();
    if !last.is_empty() {
        out.push(last);
    }
    Ok(out.into_iter().filter(|t| !t.is_empty()).collect())
}

/// Splits `name(args)` into its name and argument text.
fn split_attr(item: &str) -> Result<(&str, &str), OdpError> {
    let open = item
        .find('(')
        .ok_or_else(|| syntax(format!("`{item}': expected name(...)")))?;
    let inner = item[open + 1..]
        .strip_suffix(')')
        .ok_or_else(|| syntax(format!("`{item}': missing `)'")))?;
    Ok((item[..open].trim(), inner))
}

/// Parses `k=v,k=v` into pairs.
fn pairs(args: &str) -> Result<Vec<(&str, &str)>, OdpError> {
    split_top(args)?
        .into_iter()
        .map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.trim(), v.trim()))
                .ok_or_else(|| syntax(format!("`{kv}': expected key=value")))
        })
        .collect()
}

fn num<T: TryFrom<u128>>(name: &str, v: &str) -> Result<T, OdpError> {
    // A `/mask` suffix (megaflow syntax) is accepted and ignored: traces take exact keys.
    let v = v.split('/').next().unwrap_or(v);
    parse_uint(v)
        .and_then(|n| T::try_from(n).ok())
        .ok_or_else(|| syntax(format!("{name}={v}: bad number")))
}

fn ipv4(name: &str, v: &str) -> Result<u32, OdpError> {
    let v = v.split('/').next().unwrap_or(v);
    v.parse::<Ipv4Addr>()
        .map(u32::from)
        .map_err(|_| syntax(format!("{name}={v}: bad IPv4 address")))
}

fn ipv6(name: &str, v: &str) -> Result<u128, OdpError> {
    let v = v.split('/').next().unwrap_or(v);
    v.parse::<Ipv6Addr>()
        .map(u128::from)
        .map_err(|_| syntax(format!("{name}={v}: bad IPv6 address")))
}

fn mac(name: &str, v: &str) -> Result<u64, OdpError> {
    let v = v.split('/').next().unwrap_or(v);
    parse_mac(v).ok_or_else(|| syntax(format!("{name}={v}: bad Ethernet address")))
}

fn frag(v: &str) -> Result<u8, OdpError> {
    match v {
        "no" => Ok(0),
        "first" => Ok(FRAG_ANY),
        "later" => Ok(FRAG_ANY | FRAG_LATER),
        _ => Err(syntax(format!("frag={v}: expected no, first or later"))),
    }
}

/// Parses a datapath flow key (OVS `odp_flow_from_string` syntax, exact values).
///
/// `in_port` holds the datapath port number. Unknown attributes are an error, so a typo
/// does not silently trace a different packet.
pub fn parse_key(s: &str) -> Result<FlowKey, OdpError> {
    let mut key = FlowKey::default();
    parse_attrs(s, &mut key, 0)?;
    // An Ethernet frame without an Ethertype is an 802.3 frame: OVS's FLOW_DL_TYPE_NONE.
    if !split_top(s)?.iter().any(|a| a.starts_with("eth_type(")) {
        key.set_dl_type(FLOW_DL_TYPE_NONE);
    }
    Ok(key)
}

/// OVS's `dl_type` for 802.3 frames without SNAP (`FLOW_DL_TYPE_NONE`).
pub const FLOW_DL_TYPE_NONE: u16 = 0x05ff;

fn parse_attrs(s: &str, key: &mut FlowKey, depth: usize) -> Result<(), OdpError> {
    for item in split_top(s)? {
        let (name, args) = split_attr(item)?;
        match name {
            "in_port" => key.set_in_port(num("in_port", args)?),
            "recirc_id" => key.set_recirc_id(num("recirc_id", args)?),
            "dp_hash" => key.set_dp_hash(num("dp_hash", args)?),
            "skb_priority" => key.set_skb_priority(num("skb_priority", args)?),
            "skb_mark" => key.set_pkt_mark(num("skb_mark", args)?),
            "ct_zone" => key.set_ct_zone(num("ct_zone", args)?),
            "ct_mark" => key.set_ct_mark(num("ct_mark", args)?),
            "eth" => {
                for (k, v) in pairs(args)? {
                    match k {
                        "src" => key.set_dl_src(mac("src", v)?),
                        "dst" => key.set_dl_dst(mac("dst", v)?),
                        _ => return Err(syntax(format!("eth: unknown key `{k}'"))),
                    }
                }
            }
            "eth_type" => key.set_dl_type(num("eth_type", args)?),
            "vlan" => {
                let (mut vid, mut pcp, mut cfi) = (0u16, 0u16, 1u16);
                for (k, v) in pairs(args)? {
                    match k {
                        "vid" => vid = num("vid", v)?,
                        "pcp" => pcp = num("pcp", v)?,
                        "cfi" => cfi = num("cfi", v)?,
                        _ => return Err(syntax(format!("vlan: unknown key `{k}'"))),
                    }
                }
                if vid > 0xfff || pcp > 7 || cfi > 1 {
                    return Err(syntax(format!("vlan({args}): value out of range")));
                }
                let tci = vid | (pcp << 13) | if cfi == 1 { VLAN_CFI } else { 0 };
                // The TPID is the eth_type given just before this tag.
                let tpid = key.dl_type();
                match depth {
                    0 => {
                        key.set_vlan_tci(tci);
                        key.set_vlan_tpid(tpid);
                    }
                    1 => {
                        key.set_vlan_tci1(tci);
                        key.set_vlan_tpid1(tpid);
                    }
                    _ => return Err(syntax("more than two VLAN tags")),
                }
            }
            "encap" => {
                key.set_dl_type(0);
                parse_attrs(args, key, depth + 1)?;
            }
            "ipv4" => {
                for (k, v) in pairs(args)? {
                    match k {
                        "src" => key.set_nw_src(ipv4(k, v)?),
                        "dst" => key.set_nw_dst(ipv4(k, v)?),
                        "proto" => key.set_nw_proto(num(k, v)?),
                        "tos" => key.set_nw_tos(num(k, v)?),
                        "ttl" => key.set_nw_ttl(num(k, v)?),
                        "frag" => key.set_nw_frag(frag(v)?),
                        _ => return Err(syntax(format!("ipv4: unknown key `{k}'"))),
                    }
                }
            }
            "ipv6" => {
                for (k, v) in pairs(args)? {
                    match k {
                        "src" => key.set_ipv6_src(ipv6(k, v)?),
                        "dst" => key.set_ipv6_dst(ipv6(k, v)?),
                        "label" => key.set_ipv6_label(num(k, v)?),
                        "proto" => key.set_nw_proto(num(k, v)?),
                        "tclass" => key.set_nw_tos(num(k, v)?),
                        "hlimit" => key.set_nw_ttl(num(k, v)?),
                        "frag" => key.set_nw_frag(frag(v)?),
                        _ => return Err(syntax(format!("ipv6: unknown key `{k}'"))),
                    }
                }
            }
            "tcp" | "udp" | "sctp" => {
                for (k, v) in pairs(args)? {
                    match k {
                        "src" => key.set_tp_src(num(k, v)?),
                        "dst" => key.set_tp_dst(num(k, v)?),
                        _ => return Err(syntax(format!("{name}: unknown key `{k}'"))),
                    }
                }
            }
            "tcp_flags" => {
                let v: u16 = num("tcp_flags", args)?;
                key.set_tcp_flags(v & 0x0fff);
            }
            "icmp" | "icmpv6" => {
                for (k, v) in pairs(args)? {
                    match k {
                        "type" => key.set_tp_src(num(k, v)?),
                        "code" => key.set_tp_dst(num(k, v)?),
                        _ => return Err(syntax(format!("{name}: unknown key `{k}'"))),
                    }
                }
            }
            "arp" => {
                for (k, v) in pairs(args)? {
                    match k {
                        "sip" => key.set_nw_src(ipv4(k, v)?),
                        "tip" => key.set_nw_dst(ipv4(k, v)?),
                        "op" => {
                            // OVS keeps the ARP opcode in `nw_proto` only when it fits.
                            let op: u16 = num(k, v)?;
                            key.set_nw_proto(u8::try_from(op).unwrap_or(0));
                        }
                        "sha" => key.set_arp_sha(mac(k, v)?),
                        "tha" => key.set_arp_tha(mac(k, v)?),
                        _ => return Err(syntax(format!("arp: unknown key `{k}'"))),
                    }
                }
            }
            "nd" => {
                for (k, v) in pairs(args)? {
                    match k {
                        "target" => key.set_nd_target(ipv6(k, v)?),
                        "sll" => key.set_arp_sha(mac(k, v)?),
                        "tll" => key.set_arp_tha(mac(k, v)?),
                        _ => return Err(syntax(format!("nd: unknown key `{k}'"))),
                    }
                }
            }
            "mpls" => {
                let (mut label, mut tc, mut ttl, mut bos) = (0u32, 0u32, 0u32, 0u32);
                for (k, v) in pairs(args)? {
                    match k {
                        "label" => label = num(k, v)?,
                        "tc" => tc = num(k, v)?,
                        "ttl" => ttl = num(k, v)?,
                        "bos" => bos = num(k, v)?,
                        _ => return Err(syntax(format!("mpls: unknown key `{k}'"))),
                    }
                }
                if label > 0xfffff || tc > 7 || ttl > 255 || bos > 1 {
                    return Err(syntax(format!("mpls({args}): value out of range")));
                }
                key.set_mpls_lse0((label << 12) | (tc << 9) | (bos << 8) | ttl);
            }
            _ => return Err(syntax(format!("unknown attribute `{name}'"))),
        }
    }
    Ok(())
}

/// One field changed by a set action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum SetField {
    EthSrc(u64),
    EthDst(u64),
    Ipv4Src(u32),
    Ipv4Dst(u32),
    Ipv4Tos(u8),
    Ipv4Ttl(u8),
    Ipv6Src(u128),
    Ipv6Dst(u128),
    Ipv6Label(u32),
    Ipv6Tclass(u8),
    Ipv6Hlimit(u8),
    TcpSrc(u16),
    TcpDst(u16),
    UdpSrc(u16),
    UdpDst(u16),
    SctpSrc(u16),
    SctpDst(u16),
    /// The whole outermost MPLS label stack entry.
    MplsLse(u32),
}

impl SetField {
    /// The `set(...)` header group this field prints in, in OVS's order.
    fn group(&self) -> (u8, &'static str) {
        use SetField::*;
        match self {
            EthSrc(_) | EthDst(_) => (0, "eth"),
            MplsLse(_) => (1, "mpls"),
            Ipv4Src(_) | Ipv4Dst(_) | Ipv4Tos(_) | Ipv4Ttl(_) => (2, "ipv4"),
            Ipv6Src(_) | Ipv6Dst(_) | Ipv6Label(_) | Ipv6Tclass(_) | Ipv6Hlimit(_) => (3, "ipv6"),
            TcpSrc(_) | TcpDst(_) => (4, "tcp"),
            UdpSrc(_) | UdpDst(_) => (5, "udp"),
            SctpSrc(_) | SctpDst(_) => (6, "sctp"),
        }
    }

    /// Position inside the group (OVS prints src before dst, etc.).
    fn order(&self) -> u8 {
        use SetField::*;
        match self {
            EthSrc(_) | Ipv4Src(_) | Ipv6Src(_) | TcpSrc(_) | UdpSrc(_) | SctpSrc(_)
            | MplsLse(_) => 0,
            EthDst(_) | Ipv4Dst(_) | Ipv6Dst(_) | TcpDst(_) | UdpDst(_) | SctpDst(_) => 1,
            Ipv6Label(_) => 2,
            Ipv4Tos(_) | Ipv6Tclass(_) => 3,
            Ipv4Ttl(_) | Ipv6Hlimit(_) => 4,
        }
    }

    fn format(&self, out: &mut String) {
        use SetField::*;
        // Writing to a String cannot fail.
        let _ = match self {
            EthSrc(m) => write!(out, "src={}", format_mac(*m)),
            EthDst(m) => write!(out, "dst={}", format_mac(*m)),
            Ipv4Src(a) => write!(out, "src={}", Ipv4Addr::from(*a)),
            Ipv4Dst(a) => write!(out, "dst={}", Ipv4Addr::from(*a)),
            Ipv4Tos(t) | Ipv6Tclass(t) => {
                let name = if matches!(self, Ipv4Tos(_)) {
                    "tos"
                } else {
                    "tclass"
                };
                if *t == 0 {
                    write!(out, "{name}=0")
                } else {
                    write!(out, "{name}={t:#x}")
                }
            }
            Ipv4Ttl(t) => write!(out, "ttl={t}"),
            Ipv6Src(a) => write!(out, "src={}", Ipv6Addr::from(*a)),
            Ipv6Dst(a) => write!(out, "dst={}", Ipv6Addr::from(*a)),
            Ipv6Label(l) => write!(out, "label={l:#x}"),
            Ipv6Hlimit(h) => write!(out, "hlimit={h}"),
            TcpSrc(p) | UdpSrc(p) | SctpSrc(p) => write!(out, "src={p}"),
            TcpDst(p) | UdpDst(p) | SctpDst(p) => write!(out, "dst={p}"),
            MplsLse(l) => write!(
                out,
                "label={},tc={},ttl={},bos={}",
                l >> 12,
                (l >> 9) & 7,
                l & 0xff,
                (l >> 8) & 1
            ),
        };
    }
}

/// One datapath action.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DpAction {
    /// Send a copy to datapath port N.
    Output(u32),
    /// Push an 802.1Q/802.1ad tag; `tci` includes [`VLAN_CFI`] for a normal tag.
    PushVlan {
        /// 0x8100 or 0x88a8.
        tpid: u16,
        /// Tag control information.
        tci: u16,
    },
    /// Pop the outermost VLAN tag.
    PopVlan,
    /// Change header fields (OVS masked set: only the listed fields change).
    Set(Vec<SetField>),
    /// Send to the controller / userspace (recorded; the OpenFlow issue acts on it).
    Userspace(String),
    /// Re-inject the packet with this recirculation id.
    Recirc(u32),
}

impl DpAction {
    fn format(&self, out: &mut String) {
        let _ = match self {
            DpAction::Output(p) => write!(out, "{p}"),
            DpAction::PushVlan { tpid, tci } => {
                out.push_str("push_vlan(");
                if *tpid != 0x8100 {
                    let _ = write!(out, "tpid={tpid:#06x},");
                }
                let _ = write!(out, "vid={},pcp={}", tci & 0xfff, tci >> 13);
                if tci & VLAN_CFI == 0 {
                    out.push_str(",cfi=0");
                }
                write!(out, ")")
            }
            DpAction::PopVlan => write!(out, "pop_vlan"),
            DpAction::Set(fields) => {
                let mut sorted = fields.clone();
                sorted.sort_by_key(|f| (f.group().0, f.order()));
                let mut first_group = true;
                let mut i = 0;
                while i < sorted.len() {
                    let (g, name) = sorted[i].group();
                    if !first_group {
                        out.push(',');
                    }
                    first_group = false;
                    let _ = write!(out, "set({name}(");
                    let mut first = true;
                    while i < sorted.len() && sorted[i].group().0 == g {
                        if !first {
                            out.push(',');
                        }
                        first = false;
                        sorted[i].format(out);
                        i += 1;
                    }
                    out.push_str("))");
                }
                Ok(())
            }
            DpAction::Userspace(s) => write!(out, "userspace({s})"),
            DpAction::Recirc(id) => write!(out, "recirc({id:#x})"),
        };
    }
}

/// Prints a datapath action list as OVS's `Datapath actions:` line does.
pub fn format_actions(actions: &[DpAction]) -> String {
    if actions.is_empty() {
        return "drop".to_string();
    }
    let mut out = String::new();
    for (i, a) in actions.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        a.format(&mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_key_qinq_nests_tags() {
        let k = parse_key(
            "in_port(1),eth(src=00:11:22:33:44:55,dst=00:22:44:66:88:00),eth_type(0x8100),\
             vlan(vid=16,pcp=0),encap(eth_type(0x8100),vlan(vid=17,pcp=0),encap(eth_type(0xabcd)))",
        )
        .unwrap();
        assert_eq!(k.vlan_tci(), 0x1010);
        assert_eq!(k.vlan_tpid(), 0x8100);
        assert_eq!(k.vlan_tci1(), 0x1011);
        assert_eq!(k.dl_type(), 0xabcd);
    }

    #[test]
    fn parse_key_arp_and_tcp_flags() {
        let k = parse_key(
            "in_port(3),eth(src=50:54:00:00:00:05,dst=ff:ff:ff:ff:ff:ff),eth_type(0x0806),\
             arp(sip=192.168.0.1,tip=192.168.0.2,op=1,sha=50:54:00:00:00:05,tha=00:00:00:00:00:00)",
        )
        .unwrap();
        assert_eq!((k.nw_proto(), k.nw_src()), (1, 0xc0a8_0001));
        let k = parse_key(
            "in_port(1),eth_type(0x0800),ipv4(proto=6),tcp(src=8,dst=80),tcp_flags(0xfeb)",
        )
        .unwrap();
        assert_eq!(k.tcp_flags(), 0xfeb);
    }

    #[test]
    fn parse_key_rejects_bad_input() {
        for bad in [
            "in_port(1",
            "eth(src=zz)",
            "bogus(1)",
            "vlan(vid=5000)",
            "ipv4(ttl=300)",
            "in_port",
        ] {
            assert!(parse_key(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn format_actions_matches_ovs_spelling() {
        assert_eq!(format_actions(&[]), "drop");
        let a = [
            DpAction::PopVlan,
            DpAction::PushVlan {
                tpid: 0x88a8,
                tci: VLAN_CFI | 514,
            },
            DpAction::Set(vec![SetField::TcpSrc(91)]),
            DpAction::Set(vec![SetField::EthDst(1), SetField::EthSrc(2)]),
        ];
        assert_eq!(
            format_actions(&a),
            "pop_vlan,push_vlan(tpid=0x88a8,vid=514,pcp=0),set(tcp(src=91)),\
             set(eth(src=00:00:00:00:00:02,dst=00:00:00:00:00:01))"
        );
    }

    proptest::proptest! {
        #[test]
        fn parse_key_never_panics(s in "\\PC{0,80}") {
            let _ = parse_key(&s);
        }
    }
}
