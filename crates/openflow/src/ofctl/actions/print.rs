//! Printing actions as ovs-ofctl does for a protocol version.
//!
//! OVS prints actions after encoding them for the chosen OpenFlow version and decoding
//! them back. [`encode_list`] models that round trip: it returns the actions the decoder
//! would produce (for example `mod_nw_src` becomes a [`Action::SetField`] on `ip_src`
//! under OpenFlow 1.2+, `enqueue` becomes `set_queue,output,pop_queue` under 1.1+, and
//! OpenFlow 1.0 drops `write_actions`). [`format_list`] then prints each action in its
//! one canonical spelling.
//!
//! For every list `a` and version `v`, parsing `format_list(&encode_list(a, v), v)` with
//! the same match yields `encode_list(a, v)` again (checked by a property test), and
//! `encode_list` is idempotent.

use std::fmt::Write as _;
use std::net::Ipv6Addr;

use super::parse::{is_experimenter, OFPVID12_PRESENT};
use crate::action::{
    Action, Bundle, Controller, Ct, CtZone, FieldWrite, Multipath, Nat, NatAddrs, NatKind,
    OfVersion, PacketInReason, Sample, SampleDirection, SampleId,
};
use crate::field::{Field, FieldId, Format};
use crate::ofctl::value::{
    format_mac, format_port, format_value, format_value_mask, OFPP_CONTROLLER, OFPP_IN_PORT,
    OFPP_MAX, OFPP_NONE,
};
use crate::subfield::Subfield;

/// The actions OVS would decode after encoding `actions` for `version`.
pub fn encode_list(actions: &[Action], version: OfVersion) -> Vec<Action> {
    let mut out = Vec::with_capacity(actions.len());
    for a in actions {
        encode(a, version, &mut out);
    }
    out
}

/// Prints decoded actions (see [`encode_list`]) separated by commas, or `drop`.
pub fn format_list(actions: &[Action], version: OfVersion) -> String {
    if actions.is_empty() {
        return "drop".to_string();
    }
    let mut s = String::new();
    for (i, a) in actions.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        format_one(a, version, &mut s);
    }
    s
}

/// A subfield after a trip through OVS's 16-bit `ofs_nbits` encoding (`ofs << 6 |
/// (n_bits - 1)`), which mangles subfields wider than 64 bits exactly as OVS does: a whole
/// `xxreg` comes back as bits `1..64`.
fn ofs_nbits(sf: Subfield) -> Subfield {
    let enc = (u32::from(sf.ofs) << 6) | (u32::from(sf.n_bits).saturating_sub(1));
    #[allow(clippy::cast_possible_truncation)] // The encoding is 16 bits wide.
    let enc = enc as u16;
    Subfield {
        field: sf.field,
        ofs: enc >> 6,
        n_bits: (enc & 63) + 1,
    }
}

fn field(id: FieldId) -> &'static Field {
    Field::by_id(id)
}

fn set_field(id: FieldId, value: u128) -> Action {
    let f = field(id);
    let mask = super::parse::set_field_max(f);
    Action::SetField(FieldWrite {
        field: f,
        value,
        mask,
        flow_has_vlan: false,
    })
}

fn whole_mask(f: &Field) -> u128 {
    super::parse::set_field_max(f)
}

/// The contiguous runs of set bits of `mask`, each at most 64 bits (OVS
/// `next_load_segment`), as `(ofs, n_bits)`.
fn segments(mask: u128, n_bits: u16) -> Vec<(u16, u16)> {
    let mut out = Vec::new();
    let mut i = 0u16;
    while i < n_bits && i < 128 {
        if mask >> i & 1 == 1 {
            let start = i;
            while i < n_bits && i < 128 && i - start < 64 && mask >> i & 1 == 1 {
                i += 1;
            }
            out.push((start, i - start));
        } else {
            i += 1;
        }
    }
    out
}

/// OVS `set_field_to_nxast`: `load`s, or a `set_field` (`NXAST_REG_LOAD2`) for fields
/// without a classic header.
fn to_nxast(w: &FieldWrite, out: &mut Vec<Action>) {
    if is_experimenter(w.field) {
        out.push(Action::SetField(*w));
        return;
    }
    for (ofs, n) in segments(w.mask, w.field.n_bits) {
        let m = if n >= 128 {
            u128::MAX
        } else {
            (1u128 << n) - 1
        } << ofs;
        out.push(Action::Load(FieldWrite {
            field: w.field,
            value: w.value & m,
            mask: m,
            flow_has_vlan: false,
        }));
    }
}

/// OVS `set_field_to_legacy_openflow` for OpenFlow 1.0 and 1.1, followed by decoding.
#[allow(clippy::cast_possible_truncation)] // Values are within their field's width.
fn to_legacy(w: &FieldWrite, v: OfVersion, out: &mut Vec<Action>) {
    let of10 = v == OfVersion::Of10;
    let value = w.value;
    match w.field.id {
        FieldId::VlanTci => {
            let tci = value as u16;
            if tci & 0x1000 != 0 {
                if !of10 && !w.flow_has_vlan {
                    out.push(Action::PushVlan { ethertype: 0x8100 });
                }
                out.push(Action::SetVlanVid {
                    vid: tci & 0xfff,
                    push_if_needed: of10,
                    flow_has_vlan: true,
                });
                out.push(Action::SetVlanPcp {
                    pcp: (tci >> 13) as u8,
                    push_if_needed: of10,
                    flow_has_vlan: true,
                });
            } else {
                out.push(Action::PopVlan);
            }
        }
        FieldId::VlanVid | FieldId::DlVlan => out.push(Action::SetVlanVid {
            vid: value as u16 & 0xfff,
            push_if_needed: of10,
            flow_has_vlan: true,
        }),
        FieldId::VlanPcp | FieldId::DlVlanPcp => out.push(Action::SetVlanPcp {
            pcp: value as u8 & 7,
            push_if_needed: of10,
            flow_has_vlan: true,
        }),
        FieldId::EthSrc => out.push(Action::SetEthSrc(value as u64)),
        FieldId::EthDst => out.push(Action::SetEthDst(value as u64)),
        FieldId::Ipv4Src => out.push(Action::SetIpv4Src(value as u32)),
        FieldId::Ipv4Dst => out.push(Action::SetIpv4Dst(value as u32)),
        FieldId::NwTos => out.push(Action::SetIpDscp(value as u8)),
        FieldId::IpDscp => out.push(Action::SetIpDscp((value as u8) << 2)),
        FieldId::IpEcn => encode(&Action::SetIpEcn(value as u8), v, out),
        FieldId::TcpSrc | FieldId::UdpSrc => out.push(Action::SetL4SrcPort {
            port: value as u16,
            ip_proto: 0,
        }),
        FieldId::TcpDst | FieldId::UdpDst => out.push(Action::SetL4DstPort {
            port: value as u16,
            ip_proto: 0,
        }),
        _ => to_nxast(w, out),
    }
}

fn push_vlan_if_needed(push_if_needed: bool, flow_has_vlan: bool, out: &mut Vec<Action>) {
    if push_if_needed && !flow_has_vlan {
        out.push(Action::PushVlan { ethertype: 0x8100 });
    }
}

fn l4_field(ip_proto: u8, src: bool) -> Option<FieldId> {
    match (ip_proto, src) {
        (6, true) => Some(FieldId::TcpSrc),
        (6, false) => Some(FieldId::TcpDst),
        (17, true) => Some(FieldId::UdpSrc),
        (17, false) => Some(FieldId::UdpDst),
        (132, true) => Some(FieldId::SctpSrc),
        (132, false) => Some(FieldId::SctpDst),
        _ => None,
    }
}

/// Encodes one action for `v` and appends what decodes back.
#[allow(clippy::too_many_lines)]
fn encode(a: &Action, v: OfVersion, out: &mut Vec<Action>) {
    let of12 = v >= OfVersion::Of12;
    match a {
        Action::OutputReg { src, max_len } => out.push(Action::OutputReg {
            src: ofs_nbits(*src),
            max_len: *max_len,
        }),
        Action::Enqueue { port, queue } if v > OfVersion::Of10 => {
            out.push(Action::SetQueue { queue: *queue });
            // OVS sends max_len 65535 here; it matters only for the controller port,
            // which enqueue cannot name, so keep the canonical 0.
            out.push(Action::Output {
                port: *port,
                max_len: 0,
            });
            out.push(Action::PopQueue);
        }
        Action::Bundle(b) => {
            let mut b = b.clone();
            b.dst = b.dst.map(ofs_nbits);
            out.push(Action::Bundle(b));
        }
        Action::Multipath(m) => {
            let mut m = m.clone();
            m.dst = ofs_nbits(m.dst);
            out.push(Action::Multipath(m));
        }
        Action::SetVlanVid {
            vid,
            push_if_needed,
            flow_has_vlan,
        } => {
            if v > OfVersion::Of10 {
                push_vlan_if_needed(*push_if_needed, *flow_has_vlan, out);
            }
            match v {
                OfVersion::Of10 => out.push(Action::SetVlanVid {
                    vid: *vid,
                    push_if_needed: true,
                    flow_has_vlan: true,
                }),
                OfVersion::Of11 => out.push(Action::SetVlanVid {
                    vid: *vid,
                    push_if_needed: false,
                    flow_has_vlan: true,
                }),
                _ => out.push(set_field(
                    FieldId::VlanVid,
                    u128::from(*vid | OFPVID12_PRESENT),
                )),
            }
        }
        Action::SetVlanPcp {
            pcp,
            push_if_needed,
            flow_has_vlan,
        } => {
            if v > OfVersion::Of10 {
                push_vlan_if_needed(*push_if_needed, *flow_has_vlan, out);
            }
            match v {
                OfVersion::Of10 | OfVersion::Of11 => out.push(Action::SetVlanPcp {
                    pcp: *pcp,
                    push_if_needed: v == OfVersion::Of10,
                    flow_has_vlan: true,
                }),
                _ => out.push(set_field(FieldId::VlanPcp, u128::from(*pcp))),
            }
        }
        Action::PushVlan { .. } if v == OfVersion::Of10 => {}
        Action::SetEthSrc(m) if of12 => out.push(set_field(FieldId::EthSrc, u128::from(*m))),
        Action::SetEthDst(m) if of12 => out.push(set_field(FieldId::EthDst, u128::from(*m))),
        Action::SetIpv4Src(ip) if of12 => out.push(set_field(FieldId::Ipv4Src, u128::from(*ip))),
        Action::SetIpv4Dst(ip) if of12 => out.push(set_field(FieldId::Ipv4Dst, u128::from(*ip))),
        Action::SetIpDscp(tos) if of12 => {
            out.push(set_field(FieldId::IpDscp, u128::from(*tos >> 2)));
        }
        Action::SetIpEcn(ecn) => match v {
            OfVersion::Of10 => to_nxast(
                &FieldWrite {
                    field: field(FieldId::IpEcn),
                    value: u128::from(*ecn),
                    mask: 3,
                    flow_has_vlan: false,
                },
                out,
            ),
            OfVersion::Of11 => out.push(Action::SetIpEcn(*ecn)),
            _ => out.push(set_field(FieldId::IpEcn, u128::from(*ecn))),
        },
        Action::SetIpTtl(ttl) if v == OfVersion::Of10 => to_nxast(
            &FieldWrite {
                field: field(FieldId::IpTtl),
                value: u128::from(*ttl),
                mask: 0xff,
                flow_has_vlan: false,
            },
            out,
        ),
        Action::SetL4SrcPort { port, ip_proto } if of12 && l4_field(*ip_proto, true).is_some() => {
            if let Some(id) = l4_field(*ip_proto, true) {
                out.push(set_field(id, u128::from(*port)));
            }
        }
        Action::SetL4DstPort { port, ip_proto } if of12 && l4_field(*ip_proto, false).is_some() => {
            if let Some(id) = l4_field(*ip_proto, false) {
                out.push(set_field(id, u128::from(*port)));
            }
        }
        Action::SetField(w) => {
            if v >= OfVersion::Of15 {
                out.push(Action::SetField(*w));
            } else if !of12 {
                to_legacy(w, v, out);
            } else if w.mask == whole_mask(w.field) {
                out.push(Action::SetField(*w));
            } else {
                to_nxast(w, out);
            }
        }
        Action::Load(w) => {
            if v >= OfVersion::Of15 {
                out.push(Action::SetField(*w));
            } else {
                to_nxast(w, out);
            }
        }
        Action::SetMplsLabel(l) if of12 => out.push(set_field(FieldId::MplsLabel, u128::from(*l))),
        Action::SetMplsTc(tc) if of12 => out.push(set_field(FieldId::MplsTc, u128::from(*tc))),
        Action::SetTunnel { tun_id, wide } => {
            if of12 {
                out.push(set_field(FieldId::TunId, u128::from(*tun_id)));
            } else {
                out.push(Action::SetTunnel {
                    tun_id: *tun_id,
                    wide: *wide || *tun_id > u64::from(u32::MAX),
                });
            }
        }
        Action::Note(bytes) => {
            // NXAST_NOTE: a 10-byte header, then the bytes, padded to 8.
            let padded = (bytes.len() + 10).div_ceil(8) * 8 - 10;
            let mut b = bytes.clone();
            b.resize(padded, 0);
            out.push(Action::Note(b));
        }
        Action::Ct(ct) => {
            let mut ct = ct.clone();
            if let CtZone::Field(sf) = ct.zone {
                ct.zone = CtZone::Field(ofs_nbits(sf));
            }
            ct.exec = encode_list(&ct.exec, v);
            if let Some(nat) = &mut ct.nat {
                if nat.port_max == 0 {
                    nat.port_max = nat.port_min;
                }
            }
            out.push(Action::Ct(ct));
        }
        Action::Clone(inner) => out.push(Action::Clone(encode_list(inner, v))),
        Action::Meter { .. } if v < OfVersion::Of13 => {}
        Action::ClearActions if v == OfVersion::Of10 => {}
        Action::WriteActions(_) if v == OfVersion::Of10 => {}
        // An empty Write-Actions instruction does not survive decoding.
        Action::WriteActions(inner) if inner.is_empty() => {}
        Action::WriteActions(inner) => out.push(Action::WriteActions(encode_list(inner, v))),
        Action::GotoTable { table } if v == OfVersion::Of10 => out.push(Action::Resubmit {
            in_port: OFPP_IN_PORT,
            table: (*table != 255).then_some(*table),
            ct: false,
        }),
        other => out.push(other.clone()),
    }
}

/// C's `%#x`: `0` for zero, else `0x...`.
fn c_hex(v: impl Into<u128>) -> String {
    let v = v.into();
    if v == 0 {
        "0".to_string()
    } else {
        format!("{v:#x}")
    }
}

fn format_port_into(p: u16, s: &mut String) {
    s.push_str(&format_port(p));
}

/// Prints a `set_field` value the way `mf_format` does.
fn format_field_value(w: &FieldWrite) -> String {
    let f = w.field;
    if f.id == FieldId::VlanVid {
        return if w.mask == 0x1fff {
            w.value.to_string()
        } else {
            format!("{:#x}/{:#x}", w.value, w.mask)
        };
    }
    if f.format == Format::Hex {
        // OVS `ds_put_hex`: zero prints as `0`.
        return if w.mask == f.max_value() {
            c_hex(w.value)
        } else {
            format!("{}/{}", c_hex(w.value), c_hex(w.mask))
        };
    }
    if w.mask == f.max_value() {
        format_value(f, w.value)
    } else {
        format_value_mask(f, w.value, w.mask)
    }
}

fn format_hex_dotted(bytes: &[u8], s: &mut String) {
    for (i, b) in bytes.iter().enumerate() {
        if i > 0 {
            s.push('.');
        }
        let _ = write!(s, "{b:02x}");
    }
}

fn format_controller(c: &Controller, s: &mut String) {
    if c.reason == PacketInReason::Action
        && c.controller_id == 0
        && c.userdata.is_empty()
        && !c.pause
        && c.meter_id.is_none()
    {
        let _ = write!(s, "CONTROLLER:{}", c.max_len);
        return;
    }
    s.push_str("controller(");
    let mut parts = Vec::new();
    if c.reason != PacketInReason::Action {
        parts.push(format!("reason={}", c.reason.as_str()));
    }
    if c.max_len != u16::MAX {
        parts.push(format!("max_len={}", c.max_len));
    }
    if c.controller_id != 0 {
        parts.push(format!("id={}", c.controller_id));
    }
    if !c.userdata.is_empty() {
        let mut u = String::from("userdata=");
        format_hex_dotted(&c.userdata, &mut u);
        parts.push(u);
    }
    if c.pause {
        parts.push("pause".to_string());
    }
    if let Some(m) = c.meter_id {
        parts.push(format!("meter_id={m}"));
    }
    s.push_str(&parts.join(","));
    s.push(')');
}

fn format_bundle(b: &Bundle, s: &mut String) {
    let _ = write!(
        s,
        "{}({},{},{},ofport,",
        if b.dst.is_some() {
            "bundle_load"
        } else {
            "bundle"
        },
        b.fields.as_str(),
        b.basis,
        if b.hrw { "hrw" } else { "active_backup" }
    );
    if let Some(d) = &b.dst {
        let _ = write!(s, "{d},");
    }
    s.push_str("members:");
    let members: Vec<String> = b.members.iter().map(|p| format_port(*p)).collect();
    s.push_str(&members.join(","));
    s.push(')');
}

fn format_multipath(m: &Multipath, s: &mut String) {
    let _ = write!(
        s,
        "multipath({},{},{},{},{},{})",
        m.fields.as_str(),
        m.basis,
        m.algorithm.as_str(),
        u32::from(m.max_link) + 1,
        m.arg,
        m.dst
    );
}

fn format_sample(x: &Sample, s: &mut String) {
    let id = |i: &SampleId| match i {
        SampleId::Imm(n) => n.to_string(),
        SampleId::Field(sf) => sf.format(),
    };
    let _ = write!(
        s,
        "sample(probability={},collector_set_id={},obs_domain_id={},obs_point_id={}",
        x.probability,
        x.collector_set_id,
        id(&x.obs_domain_id),
        id(&x.obs_point_id)
    );
    if x.sampling_port != OFPP_NONE {
        let _ = write!(s, ",sampling_port={}", format_port(x.sampling_port));
    }
    match x.direction {
        SampleDirection::Default => {}
        SampleDirection::Ingress => s.push_str(",ingress"),
        SampleDirection::Egress => s.push_str(",egress"),
    }
    s.push(')');
}

fn format_ipv6_bracket(a: &Ipv6Addr, bracket: bool, s: &mut String) {
    if bracket {
        let _ = write!(s, "[{a}]");
    } else {
        let _ = write!(s, "{a}");
    }
}

fn format_nat(n: &Nat, s: &mut String) {
    s.push_str("nat");
    let Some(kind) = n.kind else {
        return;
    };
    s.push('(');
    s.push_str(match kind {
        NatKind::Src => "src",
        NatKind::Dst => "dst",
    });
    if let Some(addrs) = &n.addrs {
        s.push('=');
        match addrs {
            NatAddrs::V4 { min, max } => {
                let _ = write!(s, "{min}");
                if max != min && !max.is_unspecified() {
                    let _ = write!(s, "-{max}");
                }
            }
            NatAddrs::V6 { min, max } => {
                let bracket = n.port_min != 0;
                format_ipv6_bracket(min, bracket, s);
                if max != min && !max.is_unspecified() {
                    s.push('-');
                    format_ipv6_bracket(max, bracket, s);
                }
            }
        }
        if n.port_min != 0 {
            let _ = write!(s, ":{}", n.port_min);
            if n.port_max != 0 && n.port_max != n.port_min {
                let _ = write!(s, "-{}", n.port_max);
            }
        }
        if n.persistent {
            s.push_str(",persistent");
        }
        if n.hash {
            s.push_str(",hash");
        }
        if n.random {
            s.push_str(",random");
        }
    }
    s.push(')');
}

fn format_ct(ct: &Ct, v: OfVersion, s: &mut String) {
    s.push_str("ct(");
    let mut parts: Vec<String> = Vec::new();
    if ct.commit {
        parts.push("commit".into());
    }
    if ct.force {
        parts.push("force".into());
    }
    if let Some(t) = ct.table {
        parts.push(format!("table={t}"));
    }
    match &ct.zone {
        CtZone::Field(sf) => parts.push(format!("zone={sf}")),
        CtZone::Imm(0) => {}
        CtZone::Imm(z) => parts.push(format!("zone={z}")),
    }
    if let Some(nat) = &ct.nat {
        let mut n = String::new();
        format_nat(nat, &mut n);
        parts.push(n);
    }
    if !ct.exec.is_empty() {
        parts.push(format!("exec({})", format_list(&ct.exec, v)));
    }
    match ct.alg {
        0 => {}
        21 => parts.push("alg=ftp".into()),
        69 => parts.push("alg=tftp".into()),
        p => parts.push(format!("alg={p}")),
    }
    s.push_str(&parts.join(","));
    s.push(')');
}

fn format_load(w: &FieldWrite, s: &mut String) {
    for (i, (ofs, n)) in segments(w.mask, w.field.n_bits).into_iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let v = (w.value >> ofs)
            & if n >= 128 {
                u128::MAX
            } else {
                (1u128 << n) - 1
            };
        let sf = Subfield {
            field: w.field,
            ofs,
            n_bits: n,
        };
        let _ = write!(s, "load:{}->{sf}", c_hex(v));
    }
}

/// Prints one decoded action.
#[allow(clippy::too_many_lines)]
fn format_one(a: &Action, v: OfVersion, s: &mut String) {
    match a {
        Action::Output { port, max_len } => {
            if *port < OFPP_MAX {
                s.push_str("output:");
            }
            format_port_into(*port, s);
            if *port == OFPP_CONTROLLER {
                let _ = write!(s, ":{max_len}");
            }
        }
        Action::OutputReg { src, .. } => {
            let _ = write!(s, "output:{src}");
        }
        Action::OutputTrunc { port, max_len } => {
            let _ = write!(s, "output(port={},max_len={max_len})", format_port(*port));
        }
        Action::Controller(c) => format_controller(c, s),
        Action::Enqueue { port, queue } => {
            let _ = write!(s, "enqueue:{}:{queue}", format_port(*port));
        }
        Action::SetQueue { queue } => {
            let _ = write!(s, "set_queue:{queue}");
        }
        Action::PopQueue => s.push_str("pop_queue"),
        Action::Group { group_id } => {
            let _ = write!(s, "group:{group_id}");
        }
        Action::Resubmit { in_port, table, ct } => {
            if *in_port != OFPP_IN_PORT && table.is_none() {
                let _ = write!(s, "resubmit:{}", format_port(*in_port));
            } else {
                s.push_str("resubmit(");
                if *in_port != OFPP_IN_PORT {
                    format_port_into(*in_port, s);
                }
                s.push(',');
                if let Some(t) = table {
                    let _ = write!(s, "{t}");
                }
                if *ct {
                    s.push_str(",ct");
                }
                s.push(')');
            }
        }
        Action::Bundle(b) => format_bundle(b, s),
        Action::Multipath(m) => format_multipath(m, s),
        Action::SetVlanVid {
            vid,
            push_if_needed,
            ..
        } => {
            let name = if *push_if_needed {
                "mod_vlan_vid"
            } else {
                "set_vlan_vid"
            };
            let _ = write!(s, "{name}:{vid}");
        }
        Action::SetVlanPcp {
            pcp,
            push_if_needed,
            ..
        } => {
            let name = if *push_if_needed {
                "mod_vlan_pcp"
            } else {
                "set_vlan_pcp"
            };
            let _ = write!(s, "{name}:{pcp}");
        }
        Action::PopVlan => s.push_str(if v == OfVersion::Of10 {
            "strip_vlan"
        } else {
            "pop_vlan"
        }),
        Action::PushVlan { ethertype } => {
            let _ = write!(s, "push_vlan:{ethertype:#x}");
        }
        Action::SetEthSrc(m) => {
            let _ = write!(s, "mod_dl_src:{}", format_mac(*m));
        }
        Action::SetEthDst(m) => {
            let _ = write!(s, "mod_dl_dst:{}", format_mac(*m));
        }
        Action::SetIpv4Src(ip) => {
            let _ = write!(s, "mod_nw_src:{}", std::net::Ipv4Addr::from(*ip));
        }
        Action::SetIpv4Dst(ip) => {
            let _ = write!(s, "mod_nw_dst:{}", std::net::Ipv4Addr::from(*ip));
        }
        Action::SetIpDscp(tos) => {
            let _ = write!(s, "mod_nw_tos:{tos}");
        }
        Action::SetIpEcn(ecn) => {
            let _ = write!(s, "mod_nw_ecn:{ecn}");
        }
        Action::SetIpTtl(ttl) => {
            let _ = write!(s, "mod_nw_ttl:{ttl}");
        }
        Action::SetL4SrcPort { port, .. } => {
            let _ = write!(s, "mod_tp_src:{port}");
        }
        Action::SetL4DstPort { port, .. } => {
            let _ = write!(s, "mod_tp_dst:{port}");
        }
        Action::SetField(w) => {
            let _ = write!(s, "set_field:{}->{}", format_field_value(w), w.field.name);
        }
        Action::Load(w) => format_load(w, s),
        Action::Move { src, dst } => {
            let _ = write!(s, "move:{src}->{dst}");
        }
        Action::StackPush(sf) => {
            let _ = write!(s, "push:{sf}");
        }
        Action::StackPop(sf) => {
            let _ = write!(s, "pop:{sf}");
        }
        Action::DebugRecirc => s.push_str("debug_recirc"),
        Action::DebugSlow => s.push_str("debug_slow"),
        Action::DecTtl { controller_ids } => {
            s.push_str("dec_ttl");
            if let Some(ids) = controller_ids {
                let ids: Vec<String> = ids.iter().map(u16::to_string).collect();
                let _ = write!(s, "({})", ids.join(","));
            }
        }
        Action::SetMplsLabel(l) => {
            let _ = write!(s, "set_mpls_label({l})");
        }
        Action::SetMplsTc(tc) => {
            let _ = write!(s, "set_mpls_tc({tc})");
        }
        Action::SetMplsTtl(ttl) => {
            let _ = write!(s, "set_mpls_ttl({ttl})");
        }
        Action::DecMplsTtl => s.push_str("dec_mpls_ttl"),
        Action::PushMpls { ethertype } => {
            let _ = write!(s, "push_mpls:0x{ethertype:04x}");
        }
        Action::PopMpls { ethertype } => {
            let _ = write!(s, "pop_mpls:0x{ethertype:04x}");
        }
        Action::SetTunnel { tun_id, wide } => {
            let w = if *wide || *tun_id > u64::from(u32::MAX) {
                "64"
            } else {
                ""
            };
            let _ = write!(s, "set_tunnel{w}:{}", c_hex(*tun_id));
        }
        Action::FinTimeout {
            idle_timeout,
            hard_timeout,
        } => {
            let mut parts = Vec::new();
            if *idle_timeout != 0 {
                parts.push(format!("idle_timeout={idle_timeout}"));
            }
            if *hard_timeout != 0 {
                parts.push(format!("hard_timeout={hard_timeout}"));
            }
            let _ = write!(s, "fin_timeout({})", parts.join(","));
        }
        Action::Conjunction {
            id,
            clause,
            n_clauses,
        } => {
            let _ = write!(
                s,
                "conjunction({id},{}/{n_clauses})",
                u16::from(*clause) + 1
            );
        }
        Action::Note(bytes) => {
            s.push_str("note:");
            format_hex_dotted(bytes, s);
        }
        Action::Exit => s.push_str("exit"),
        Action::Sample(x) => format_sample(x, s),
        Action::Ct(ct) => format_ct(ct, v, s),
        Action::CtClear => s.push_str("ct_clear"),
        Action::Clone(inner) => {
            let _ = write!(s, "clone({})", format_list(inner, v));
        }
        Action::Learn(l) => super::learn::format_learn(l, s),
        Action::CheckPktLarger { pkt_len, dst } => {
            let _ = write!(s, "check_pkt_larger({pkt_len})->{dst}");
        }
        Action::Meter { meter_id } => {
            let _ = write!(s, "meter:{meter_id}");
        }
        Action::ClearActions => s.push_str("clear_actions"),
        Action::WriteActions(inner) => {
            let _ = write!(s, "write_actions({})", format_list(inner, v));
        }
        Action::WriteMetadata { value, mask } => {
            let _ = write!(s, "write_metadata:{}", c_hex(*value));
            if *mask != u64::MAX {
                let _ = write!(s, "/{}", c_hex(*mask));
            }
        }
        Action::GotoTable { table } => {
            let _ = write!(s, "goto_table:{table}");
        }
    }
}
