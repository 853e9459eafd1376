//! Parsers for each action (OVS `parse_*` in `ofp-actions.c`) and the list parser
//! (`ofpacts_parse__`); the list is then verified by [`super::verify`].

use std::net::{Ipv4Addr, Ipv6Addr};

use super::{ActionContext, KeyValues};
use crate::action::{
    Action, Bundle, Controller, Ct, CtZone, FieldWrite, HashFields, Multipath, MultipathAlgorithm,
    Nat, NatAddrs, NatKind, PacketInReason, Sample, SampleDirection, SampleId,
};
use crate::field::{Field, FieldId, Protocols};
use crate::ofctl::value::{
    parse_int, parse_mac, parse_port, parse_uint, parse_value_mask, OFPP_CONTROLLER, OFPP_IN_PORT,
    OFPP_LOCAL, OFPP_MAX, OFPP_NONE,
};
use crate::subfield::Subfield;
use crate::Error;

/// OVS `MAX_OFPACT_PARSE_DEPTH`.
const MAX_DEPTH: usize = 100;
/// OVS `NX_CT_RECIRC_NONE`.
const CT_RECIRC_NONE: u8 = 0xff;
/// OVS `OFPVID12_PRESENT`: the "tag present" bit of OXM `vlan_vid` values.
pub(crate) const OFPVID12_PRESENT: u16 = 0x1000;

/// The action list an action list is nested in (OVS `outer_action`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outer {
    /// Top level.
    None,
    /// `write_actions(...)`.
    WriteActions,
    /// `ct(exec(...))`.
    Ct,
    /// `clone(...)`.
    Clone,
}

fn err(msg: impl Into<String>) -> Error {
    Error::Parse(msg.into())
}

/// Parses an integer as C's `strtoll(s, NULL, 0)` with the whole string consumed:
/// optional sign, `0x` hex, leading-`0` octal, else decimal.
pub(crate) fn c_int(s: &str) -> Option<i128> {
    let t = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let (radix, digits) = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        (16, h)
    } else if t.len() > 1 && t.starts_with('0') {
        (8, &t[1..])
    } else {
        (10, t)
    };
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let v = i128::from_str_radix(digits, radix).ok()?;
    Some(if neg { -v } else { v })
}

/// OVS `str_to_u8`.
fn str_to_u8(s: &str, name: &str) -> Result<u8, Error> {
    c_int(s)
        .and_then(|v| u8::try_from(v).ok())
        .ok_or_else(|| err(format!("invalid {name} \"{s}\"")))
}

/// OVS `str_to_u16`.
fn str_to_u16(s: &str, name: &str) -> Result<u16, Error> {
    c_int(s)
        .and_then(|v| u16::try_from(v).ok())
        .ok_or_else(|| err(format!("invalid {name} \"{s}\"")))
}

/// OVS `str_to_u32`.
fn str_to_u32(s: &str) -> Result<u32, Error> {
    if s.is_empty() {
        return Err(err("missing required numeric argument"));
    }
    c_int(s)
        .and_then(|v| u32::try_from(v).ok())
        .ok_or_else(|| err(format!("invalid numeric format {s}")))
}

/// OVS `str_to_u64`.
fn str_to_u64(s: &str) -> Result<u64, Error> {
    if s.is_empty() {
        return Err(err("missing required numeric argument"));
    }
    c_int(s)
        .and_then(|v| u64::try_from(v).ok())
        .ok_or_else(|| err(format!("invalid numeric format {s}")))
}

/// C's `atoi`: leading digits, 0 if none.
pub(crate) fn atoi(s: &str) -> i64 {
    let t = s.trim_start();
    let (neg, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let mut v: i64 = 0;
    for c in t.bytes().take_while(u8::is_ascii_digit) {
        v = v.saturating_mul(10).saturating_add(i64::from(c - b'0'));
    }
    if neg {
        -v
    } else {
        v
    }
}

/// Parses hex bytes, skipping `.` and white space between them (OVS `ofpbuf_put_hex`).
/// Returns the bytes and whether the whole string was consumed.
fn parse_hex(s: &str) -> (Vec<u8>, bool) {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        while i < b.len() && b" .\t\r\n".contains(&b[i]) {
            i += 1;
        }
        let hi = b.get(i).and_then(|c| (*c as char).to_digit(16));
        let lo = b.get(i + 1).and_then(|c| (*c as char).to_digit(16));
        match (hi, lo) {
            (Some(h), Some(l)) => {
                #[allow(clippy::cast_possible_truncation)] // Two hex digits fit a byte.
                out.push((h * 16 + l) as u8);
                i += 2;
            }
            _ => return (out, i >= b.len()),
        }
    }
}

/// True for fields with only an experimenter OXM header, which `load`, `multipath` and
/// `bundle_load` cannot address with the classic NXM encoding.
pub(crate) fn is_experimenter(f: &Field) -> bool {
    if f.nxm.is_some() {
        return false;
    }
    match f.oxm {
        Some(o) => o.starts_with("NXOXM_ET_") || o.starts_with("ONFOXM_ET_"),
        None => true,
    }
}

/// The bits a `set_field` value may have (OVS `mf_is_value_valid`): `vlan_vid` carries
/// `OFPVID12_PRESENT`, `nw_tos` only its DSCP bits.
pub(crate) fn set_field_valid_bits(f: &Field) -> u128 {
    match f.id {
        FieldId::NwTos => 0xfc,
        _ => set_field_max(f),
    }
}

/// The mask of a whole-field `set_field` (`vlan_vid` carries `OFPVID12_PRESENT`).
pub(crate) fn set_field_max(f: &Field) -> u128 {
    if f.id == FieldId::VlanVid {
        0x1fff
    } else {
        f.max_value()
    }
}

/// Parses `FIELD`, `FIELD[]`, `FIELD[BIT]` or `FIELD[START..END]` with OVS's messages
/// (`mf_parse_subfield`).
pub(crate) fn parse_subfield(s: &str) -> Result<Subfield, Error> {
    parse_subfield_shown(s, s)
}

/// [`parse_subfield`] whose messages show `shown` (the rest of the input, as OVS's
/// pointer-advancing parser does: `move:A->B` reports errors in `A` as `A->B: ...`).
pub(crate) fn parse_subfield_shown(s: &str, shown: &str) -> Result<Subfield, Error> {
    let name_len = s.find(['[', '-']).unwrap_or(s.len());
    let name = &s[..name_len];
    let field =
        Field::by_name(name).ok_or_else(|| err(format!("{shown}: unknown field `{name}'")))?;
    let n_bits = i64::from(field.n_bits);
    let rest = &s[name_len..];
    let (start, end, rest) = if let Some(r) = rest.strip_prefix('[') {
        let syntax = || {
            err(format!(
                "{shown}: syntax error expecting [] or [<bit>] or [<start>..<end>]"
            ))
        };
        let close = r.find(']').ok_or_else(syntax)?;
        let inner = &r[..close];
        let num = |t: &str| t.trim().parse::<i64>().map_err(|_| syntax());
        let (a, b) = if inner.is_empty() {
            (0, n_bits - 1)
        } else if let Some((a, b)) = inner.split_once("..") {
            (num(a)?, num(b)?)
        } else {
            let a = num(inner)?;
            (a, a)
        };
        (a, b, &r[close + 1..])
    } else {
        (0, n_bits - 1, rest)
    };
    if start > end {
        return Err(err(format!(
            "{shown}: starting bit {start} is after ending bit {end}"
        )));
    } else if start < 0 || start >= n_bits {
        // A negative start (`[-2..95]`) is refused here as `Subfield::parse_prefix` does (OVS
        // takes it as a huge unsigned offset and fails later, in `mf_check_dst`).
        return Err(err(format!(
            "{shown}: starting bit {start} is not valid because field is only {n_bits} bits wide"
        )));
    } else if end >= n_bits {
        return Err(err(format!(
            "{shown}: ending bit {end} is not valid because field is only {n_bits} bits wide"
        )));
    }
    if !rest.is_empty() {
        return Err(err("unexpected input following field syntax"));
    }
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    // 0 <= start <= end < n_bits.
    Ok(Subfield {
        field,
        ofs: start as u16,
        n_bits: (end - start + 1) as u16,
    })
}

/// OVS `nxm_parse_stack_action`.
fn parse_stack_subfield(s: &str) -> Result<Subfield, Error> {
    let name_len = s.find(['[', '-']).unwrap_or(s.len());
    let end = if s[name_len..].starts_with('[') {
        s[name_len..]
            .find(']')
            .map_or(s.len(), |i| name_len + i + 1)
    } else {
        name_len
    };
    let sf = parse_subfield_shown(&s[..end], s)?;
    if end < s.len() {
        return Err(err(format!(
            "{}: trailing garbage following push or pop",
            &s[end..]
        )));
    }
    Ok(sf)
}

/// Splits `VALUE->KEY` (OVS `set_field_split_str`).
fn split_arrow(arg: &str) -> Result<(&str, &str), Error> {
    let i = arg
        .find("->")
        .ok_or_else(|| err(format!("{arg}: missing `->'")))?;
    let key = &arg[i + 2..];
    if key.is_empty() {
        return Err(err(format!("{arg}: missing field name following `->'")));
    }
    Ok((&arg[..i], key))
}

/// Parser state shared by nested lists.
pub(crate) struct State<'c> {
    ctx: &'c ActionContext<'c>,
    /// Protocols able to express what was parsed so far.
    pub(crate) usable: Protocols,
    depth: usize,
}

impl<'c> State<'c> {
    pub(crate) fn new(ctx: &'c ActionContext<'c>) -> Self {
        State {
            ctx,
            usable: Protocols::ANY,
            depth: 0,
        }
    }

    /// OVS `ofputil_port_from_string` with the context's port names.
    fn port(&self, s: &str) -> Option<u16> {
        if let Ok(p) = parse_port(s) {
            return Some(p);
        }
        self.ctx
            .port_names
            .iter()
            .find(|(n, _)| n == s)
            .map(|(_, p)| *p)
    }

    /// Parses an action list (OVS `ofpacts_parse`).
    pub(crate) fn parse_list(
        &mut self,
        s: &str,
        allow_instructions: bool,
        outer: Outer,
    ) -> Result<Vec<Action>, Error> {
        if self.depth >= MAX_DEPTH {
            return Err(err("Action nested too deeply"));
        }
        self.depth += 1;
        let r = self.parse_list_inner(s, allow_instructions, outer);
        self.depth -= 1;
        r
    }

    fn parse_list_inner(
        &mut self,
        s: &str,
        allow_instructions: bool,
        outer: Outer,
    ) -> Result<Vec<Action>, Error> {
        let mut out = Vec::new();
        let mut drop = false;
        for (key, value) in KeyValues::new(s) {
            let lkey = key.to_ascii_lowercase();
            if lkey == "drop" {
                drop = true;
                continue;
            }
            if lkey == "apply_actions" {
                return Err(err("apply_actions is the default instruction"));
            }
            if lkey == "meter" && !allow_instructions {
                // Meter is an action only in OpenFlow 1.5.
                self.usable = self.usable.and(Protocols::OF15_UP);
            }
            if !self.parse_one(&lkey, key, value, &mut out)? {
                match self.port(key) {
                    Some(port) => out.push(Action::Output { port, max_len: 0 }),
                    None => return Err(err(format!("unknown action {key}"))),
                }
            }
        }
        if drop && !out.is_empty() {
            return Err(err(
                "\"drop\" must not be accompanied by any other action or instruction",
            ));
        }
        super::verify::verify(&out, allow_instructions, outer)?;
        Ok(out)
    }

    /// Parses one named action into `out`; returns `false` if `lkey` names no action.
    fn parse_one(
        &mut self,
        lkey: &str,
        key: &str,
        arg: &str,
        out: &mut Vec<Action>,
    ) -> Result<bool, Error> {
        let a = match lkey {
            "output" | "output_reg" => self.parse_output(arg)?,
            "group" => Action::Group {
                group_id: str_to_u32(arg)?,
            },
            "controller" => parse_controller(arg)?,
            "enqueue" => self.parse_enqueue(arg)?,
            "bundle" => self.parse_bundle(arg, false)?,
            "bundle_load" => self.parse_bundle(arg, true)?,
            "set_field" => self.parse_set_field(arg)?,
            "load" => parse_load(arg)?,
            "move" => parse_move(arg)?,
            "set_vlan_vid" | "mod_vlan_vid" => {
                let vid = str_to_u16(arg, "VLAN VID")?;
                if vid & !0xfff != 0 {
                    return Err(err(format!("{arg}: not a valid VLAN VID")));
                }
                Action::SetVlanVid {
                    vid,
                    push_if_needed: lkey == "mod_vlan_vid",
                    flow_has_vlan: false,
                }
            }
            "set_vlan_pcp" | "mod_vlan_pcp" => {
                let pcp = str_to_u8(arg, "VLAN PCP")?;
                if pcp & !7 != 0 {
                    return Err(err(format!("{arg}: not a valid VLAN PCP")));
                }
                Action::SetVlanPcp {
                    pcp,
                    push_if_needed: lkey == "mod_vlan_pcp",
                    flow_has_vlan: false,
                }
            }
            "strip_vlan" | "pop_vlan" => Action::PopVlan,
            "push_vlan" => {
                self.usable = self.usable.and(Protocols::OF11_UP);
                let ethertype = str_to_u16(arg, "ethertype")?;
                if ethertype != 0x8100 && ethertype != 0x88a8 {
                    return Err(err(format!("{arg}: not a valid VLAN ethertype")));
                }
                Action::PushVlan { ethertype }
            }
            "mod_dl_src" | "mod_dl_dst" => {
                let mac =
                    parse_mac(arg).ok_or_else(|| err(format!("invalid mac address {arg}")))?;
                if lkey == "mod_dl_src" {
                    Action::SetEthSrc(mac)
                } else {
                    Action::SetEthDst(mac)
                }
            }
            "mod_nw_src" | "mod_nw_dst" => {
                let ip: Ipv4Addr = arg
                    .parse()
                    .map_err(|_| err(format!("{arg}: could not convert to IP address")))?;
                if lkey == "mod_nw_src" {
                    Action::SetIpv4Src(ip.into())
                } else {
                    Action::SetIpv4Dst(ip.into())
                }
            }
            "mod_nw_tos" => {
                let tos = str_to_u8(arg, "TOS")?;
                if tos & 3 != 0 {
                    return Err(err(format!("{arg}: not a valid TOS")));
                }
                Action::SetIpDscp(tos)
            }
            "mod_nw_ecn" => {
                let ecn = str_to_u8(arg, "ECN")?;
                if ecn & !3 != 0 {
                    return Err(err(format!("{arg}: not a valid ECN")));
                }
                Action::SetIpEcn(ecn)
            }
            "mod_nw_ttl" | "set_nw_ttl" => Action::SetIpTtl(str_to_u8(arg, "TTL")?),
            "mod_tp_src" => Action::SetL4SrcPort {
                port: str_to_u16(arg, "source port")?,
                ip_proto: 0,
            },
            "mod_tp_dst" => Action::SetL4DstPort {
                port: str_to_u16(arg, "destination port")?,
                ip_proto: 0,
            },
            "dec_ttl" => parse_dec_ttl(arg)?,
            "set_mpls_label" => {
                if arg.is_empty() {
                    return Err(err("set_mpls_label: expected label."));
                }
                let label = str_to_u32(arg)?;
                if label & !0xfffff != 0 {
                    return Err(err(format!("{arg}: not a valid MPLS label")));
                }
                Action::SetMplsLabel(label)
            }
            "set_mpls_tc" => {
                if arg.is_empty() {
                    return Err(err("set_mpls_tc: expected tc."));
                }
                let tc = str_to_u8(arg, "MPLS TC")?;
                if tc & !7 != 0 {
                    return Err(err(format!("{arg}: not a valid MPLS TC")));
                }
                Action::SetMplsTc(tc)
            }
            "set_mpls_ttl" => {
                if arg.is_empty() {
                    return Err(err("set_mpls_ttl: expected ttl."));
                }
                Action::SetMplsTtl(str_to_u8(arg, "MPLS TTL")?)
            }
            "dec_mpls_ttl" => Action::DecMplsTtl,
            "push_mpls" => Action::PushMpls {
                ethertype: str_to_u16(arg, "push_mpls")?,
            },
            "pop_mpls" => Action::PopMpls {
                ethertype: str_to_u16(arg, "pop_mpls")?,
            },
            "set_tunnel" | "set_tunnel64" => Action::SetTunnel {
                tun_id: str_to_u64(arg)?,
                wide: lkey == "set_tunnel64",
            },
            "set_queue" => Action::SetQueue {
                queue: str_to_u32(arg)?,
            },
            "pop_queue" => Action::PopQueue,
            "fin_timeout" => parse_fin_timeout(arg)?,
            "resubmit" => self.parse_resubmit(arg)?,
            "conjunction" => parse_conjunction(arg)?,
            "multipath" => parse_multipath(arg)?,
            "note" => {
                let (bytes, ok) = parse_hex(arg);
                if !ok {
                    return Err(err("bad hex digit in `note' argument"));
                }
                Action::Note(bytes)
            }
            "exit" => Action::Exit,
            "sample" => self.parse_sample(arg)?,
            "ct" => self.parse_ct(arg)?,
            "ct_clear" => Action::CtClear,
            "nat" => {
                parse_nat(arg)?;
                return Err(err("Cannot have NAT action outside of \"ct\" action"));
            }
            "output_trunc" => return Err(err(format!("unknown action {arg}"))),
            "clone" => {
                // As OVS (`parse_CLONE` goes through `ofpacts_parse_copy`), the nested
                // parse restarts the usable protocols from "any", forgetting what the
                // actions before `clone` required.
                self.usable = Protocols::ANY;
                Action::Clone(self.parse_list(arg, false, Outer::Clone)?)
            }
            "check_pkt_larger" => parse_check_pkt_larger(arg)?,
            "meter" => {
                self.usable = self.usable.and(Protocols::OF13_UP);
                Action::Meter {
                    meter_id: str_to_u32(arg)?,
                }
            }
            "clear_actions" => Action::ClearActions,
            "write_actions" => {
                Action::WriteActions(self.parse_list(arg, false, Outer::WriteActions)?)
            }
            "write_metadata" => {
                self.usable = self.usable.and(Protocols::NXM_OXM_OF11);
                let (v, m) = match arg.split_once('/') {
                    Some((v, m)) => (v, Some(m)),
                    None => (arg, None),
                };
                let mask = match m {
                    Some(m) => str_to_u64(m)?,
                    None => u64::MAX,
                };
                Action::WriteMetadata {
                    value: str_to_u64(v)?,
                    mask,
                }
            }
            "goto_table" => {
                let table = c_int(arg)
                    .and_then(|v| u8::try_from(v).ok())
                    .ok_or_else(|| err(format!("unknown table \"{arg}\"")))?;
                Action::GotoTable { table }
            }
            "learn" => Action::Learn(Box::new(super::learn::parse_learn(arg)?)),
            "push" | "pop" => {
                let sf = parse_stack_subfield(arg)?;
                if lkey == "push" {
                    Action::StackPush(sf)
                } else {
                    Action::StackPop(sf)
                }
            }
            "debug_recirc" => Action::DebugRecirc,
            "debug_slow" => Action::DebugSlow,
            "encap" | "decap" | "dec_nsh_ttl" | "delete_field" | "unroll_xlate" => {
                return Err(err(format!("{key}: action not supported by ferrovs yet")))
            }
            _ => return Ok(false),
        };
        out.push(a);
        Ok(true)
    }

    /// OVS `parse_OUTPUT`.
    fn parse_output(&self, arg: &str) -> Result<Action, Error> {
        if arg.contains("port") && arg.contains("max_len") {
            let mut port = None;
            let mut max_len = 0u32;
            for (k, v) in KeyValues::new(arg) {
                match k {
                    "port" => {
                        let p = self
                            .port(v)
                            .ok_or_else(|| err(format!("output to unknown truncate port: {v}")))?;
                        if p > OFPP_MAX && p != OFPP_LOCAL && p != OFPP_IN_PORT {
                            return Err(err(format!("output to unsupported truncate port: {v}")));
                        }
                        port = Some(p);
                    }
                    "max_len" => {
                        max_len = str_to_u32(v)?;
                        if max_len < 14 {
                            return Err(err(format!(
                                "max_len {max_len} is less than the minimum value 14"
                            )));
                        }
                    }
                    _ => return Err(err(format!("invalid key '{k}' in output_trunc argument"))),
                }
            }
            return Ok(Action::OutputTrunc {
                port: port.unwrap_or(0),
                max_len,
            });
        }
        if let Some(port) = self.port(arg) {
            let max_len = if port == OFPP_CONTROLLER { u16::MAX } else { 0 };
            return Ok(Action::Output { port, max_len });
        }
        match parse_subfield(arg) {
            Ok(src) => Ok(Action::OutputReg {
                src,
                max_len: u16::MAX,
            }),
            Err(_) => Err(err(format!("{arg}: output to unknown port"))),
        }
    }

    /// OVS `parse_ENQUEUE`: `PORT:QUEUE`, `PORT,QUEUE` or `PORTqQUEUE`.
    fn parse_enqueue(&self, arg: &str) -> Result<Action, Error> {
        let syntax =
            || err("\"enqueue\" syntax is \"enqueue:PORT:QUEUE\" or \"enqueue(PORT,QUEUE)\"");
        let t = arg.trim_start_matches([':', 'q', ',']);
        let end = t.find([':', 'q', ',']).ok_or_else(syntax)?;
        let port_s = &t[..end];
        let queue_s = t[end..].trim_start_matches([':', 'q', ',']);
        if port_s.is_empty() || queue_s.is_empty() {
            return Err(syntax());
        }
        let port = self
            .port(port_s)
            .ok_or_else(|| err(format!("{port_s}: enqueue to unknown port")))?;
        Ok(Action::Enqueue {
            port,
            queue: str_to_u32(queue_s)?,
        })
    }

    /// OVS `parse_RESUBMIT`.
    fn parse_resubmit(&self, arg: &str) -> Result<Action, Error> {
        let mut parts = arg.splitn(3, ',');
        let in_port_s = parts.next().unwrap_or("");
        let table_s = parts.next().unwrap_or("");
        let ct_s = parts.next().unwrap_or("");
        let in_port = if in_port_s.is_empty() {
            OFPP_IN_PORT
        } else {
            self.port(in_port_s)
                .ok_or_else(|| err(format!("{in_port_s}: resubmit to unknown port")))?
        };
        let table = if table_s.is_empty() {
            None
        } else {
            let t = c_int(table_s)
                .and_then(|v| u8::try_from(v).ok())
                .ok_or_else(|| err(format!("{table_s}: resubmit to unknown table")))?;
            (t != 255).then_some(t)
        };
        let ct = if ct_s.is_empty() {
            false
        } else if ct_s == "ct" {
            true
        } else {
            return Err(err(format!("{ct_s}: unknown parameter")));
        };
        if in_port == OFPP_IN_PORT && table.is_none() {
            return Err(err(
                "at least one \"in_port\" or \"table\" must be specified on resubmit",
            ));
        }
        Ok(Action::Resubmit { in_port, table, ct })
    }

    /// OVS `set_field_parse__`.
    fn parse_set_field(&mut self, arg: &str) -> Result<Action, Error> {
        let (value, key) = split_arrow(arg)?;
        let field = Field::by_name(key)
            .ok_or_else(|| err(format!("{key} is not a valid OXM field name")))?;
        if !field.writable {
            return Err(err(format!("{key} is read-only")));
        }
        let (v, mask) = if field.id == FieldId::VlanVid {
            parse_vlan_vid_value(field, value)?
        } else {
            parse_value_mask(field, value)?
        };
        // OVS `mf_is_value_valid`: no bits beyond the field's meaningful width.
        let max = set_field_max(field);
        if v & !set_field_valid_bits(field) != 0 {
            return Err(err(format!("{value} is not a valid value for field {key}")));
        }
        let mask = mask & max;
        let value = v;
        self.usable = self.usable.and(field.usable[0]);
        // As OVS, the value is kept as written: bits outside the mask are ignored when the
        // action runs, but OpenFlow 1.0/1.1 (which cannot mask) send the whole value.
        Ok(Action::SetField(FieldWrite {
            field,
            value,
            mask,
            flow_has_vlan: false,
        }))
    }

    /// OVS `bundle_parse` / `bundle_parse_load`.
    fn parse_bundle(&self, arg: &str, load: bool) -> Result<Action, Error> {
        let not_enough = || err(format!("{arg}: not enough arguments to bundle action"));
        let mut toks = Tokens::new(arg);
        let fields = toks.next(", ");
        let basis = toks.next(", ");
        let algorithm = toks.next(", ");
        let member_type = toks.next(", ");
        let dst = if load { toks.next(", ") } else { None };
        let delim = toks.next(": ");
        let (Some(fields), Some(basis), Some(algorithm), Some(member_type), Some(delim)) =
            (fields, basis, algorithm, member_type, delim)
        else {
            return Err(not_enough());
        };
        if load && dst.is_none() {
            return Err(not_enough());
        }
        if !delim.eq_ignore_ascii_case("members") && !delim.eq_ignore_ascii_case("slaves") {
            return Err(err(format!(
                "{arg}: missing member delimiter, expected `members', got `{delim}'"
            )));
        }
        let mut members = Vec::new();
        while let Some(m) = toks.next(", []") {
            if members.len() >= 2048 {
                break;
            }
            members.push(
                self.port(m)
                    .ok_or_else(|| err(format!("{m}: bad port number")))?,
            );
        }
        let fields = HashFields::from_name(fields)
            .ok_or_else(|| err(format!("{arg}: unknown fields `{fields}'")))?;
        let hrw = if algorithm.eq_ignore_ascii_case("active_backup") {
            false
        } else if algorithm.eq_ignore_ascii_case("hrw") {
            true
        } else {
            return Err(err(format!("{arg}: unknown algorithm `{algorithm}'")));
        };
        if !member_type.eq_ignore_ascii_case("ofport") {
            return Err(err(format!("{arg}: unknown member_type `{member_type}'")));
        }
        let dst = match dst {
            Some(d) => {
                let sf = parse_subfield(d)?;
                if is_experimenter(sf.field) {
                    return Err(err(format!(
                        "{arg}: experimenter OXM field '{d}' not supported"
                    )));
                }
                Some(sf)
            }
            None => None,
        };
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // C's `atoi` into u16.
        let basis = atoi(basis) as u16;
        Ok(Action::Bundle(Box::new(Bundle {
            fields,
            basis,
            hrw,
            dst,
            members,
        })))
    }

    /// OVS `parse_SAMPLE`.
    fn parse_sample(&self, arg: &str) -> Result<Action, Error> {
        let mut s = Sample {
            probability: 0,
            collector_set_id: 0,
            obs_domain_id: SampleId::Imm(0),
            obs_point_id: SampleId::Imm(0),
            sampling_port: OFPP_NONE,
            direction: SampleDirection::Default,
        };
        let sample_id = |key: &str, v: &str| -> Result<SampleId, Error> {
            if let Ok(n) = str_to_u32(v) {
                return Ok(SampleId::Imm(n));
            }
            let sf = parse_subfield(v)?;
            if sf.n_bits > 32 {
                return Err(err(format!(
                    "size of {key} field ({}) exceeds maximum (32)",
                    sf.n_bits
                )));
            }
            Ok(SampleId::Field(sf))
        };
        for (k, v) in KeyValues::new(arg) {
            match k {
                "probability" => {
                    s.probability = str_to_u16(v, "probability")?;
                    if s.probability == 0 {
                        return Err(err(format!("invalid probability value \"{v}\"")));
                    }
                }
                "collector_set_id" => s.collector_set_id = str_to_u32(v)?,
                "obs_domain_id" => s.obs_domain_id = sample_id(k, v)?,
                "obs_point_id" => s.obs_point_id = sample_id(k, v)?,
                "sampling_port" => {
                    s.sampling_port = self
                        .port(v)
                        .ok_or_else(|| err(format!("{v}: unknown port")))?;
                }
                "ingress" => s.direction = SampleDirection::Ingress,
                "egress" => s.direction = SampleDirection::Egress,
                _ => return Err(err(format!("invalid key \"{k}\" in \"sample\" argument"))),
            }
        }
        if s.probability == 0 {
            return Err(err("non-zero \"probability\" must be specified on sample"));
        }
        Ok(Action::Sample(Box::new(s)))
    }

    /// OVS `parse_CT`.
    fn parse_ct(&mut self, arg: &str) -> Result<Action, Error> {
        let mut ct = Ct {
            commit: false,
            force: false,
            table: None,
            zone: CtZone::Imm(0),
            alg: 0,
            nat: None,
            exec: Vec::new(),
        };
        for (k, v) in KeyValues::new(arg) {
            match k {
                "commit" => ct.commit = true,
                "force" => ct.force = true,
                "table" => {
                    let t = c_int(v)
                        .and_then(|t| u8::try_from(t).ok())
                        .ok_or_else(|| err(format!("unknown table {v}")))?;
                    if t == CT_RECIRC_NONE {
                        return Err(err(format!("invalid table {t:#x}")));
                    }
                    ct.table = Some(t);
                }
                "zone" => {
                    ct.zone = match str_to_u16(v, "zone") {
                        Ok(z) => CtZone::Imm(z),
                        Err(_) => CtZone::Field(parse_subfield(v)?),
                    };
                }
                "alg" => {
                    ct.alg = match v {
                        "ftp" => 21,
                        "tftp" => 69,
                        _ => str_to_u16(v, "connection tracking helper")
                            .map_err(|_| err(format!("invalid alg {v}")))?,
                    };
                }
                "nat" => {
                    // Only the first nat counts as "the" nat, as OVS prints only a nat
                    // that comes first in the nested list.
                    let nat = parse_nat(v)?;
                    if ct.nat.is_none() && ct.exec.is_empty() {
                        ct.nat = Some(nat);
                    } else {
                        return Err(err("ct action supports only one nat action, before exec"));
                    }
                }
                "exec" => {
                    let saved = self.usable;
                    self.usable = Protocols::ANY;
                    let inner = self.parse_list(v, false, Outer::Ct);
                    self.usable = saved.and(self.usable);
                    ct.exec.extend(inner?);
                }
                _ => return Err(err(format!("invalid argument to \"ct\" action: `{k}'"))),
            }
        }
        if ct.force && !ct.commit {
            return Err(err("\"force\" flag requires \"commit\" flag."));
        }
        Ok(Action::Ct(Box::new(ct)))
    }
}

/// `strtok_r`-style tokens.
struct Tokens<'a> {
    rest: &'a str,
}

impl<'a> Tokens<'a> {
    fn new(s: &'a str) -> Self {
        Tokens { rest: s }
    }

    fn next(&mut self, delims: &str) -> Option<&'a str> {
        let t = self.rest.trim_start_matches(|c| delims.contains(c));
        if t.is_empty() {
            self.rest = t;
            return None;
        }
        match t.find(|c| delims.contains(c)) {
            Some(i) => {
                self.rest = &t[i + 1..];
                Some(&t[..i])
            }
            None => {
                self.rest = "";
                Some(t)
            }
        }
    }
}

/// `vlan_vid` values in `set_field` carry `OFPVID12_PRESENT` (0x1000), one bit wider than
/// the 12-bit registry field.
fn parse_vlan_vid_value(field: &Field, s: &str) -> Result<(u128, u128), Error> {
    let num = |t: &str| -> Result<u128, Error> {
        match parse_uint(t) {
            Some(v) if v <= 0x1fff => Ok(v),
            Some(_) => Err(err(format!(
                "{t} is not a valid value for field {}",
                field.name
            ))),
            None => Err(err(format!("{t}: invalid value for field {}", field.name))),
        }
    };
    match s.split_once('/') {
        Some((v, m)) => Ok((num(v)?, num(m)?)),
        None => Ok((num(s)?, 0x1fff)),
    }
}

/// OVS `parse_CONTROLLER`.
fn parse_controller(arg: &str) -> Result<Action, Error> {
    let mut c = Controller {
        max_len: u16::MAX,
        controller_id: 0,
        reason: PacketInReason::Action,
        userdata: Vec::new(),
        pause: false,
        meter_id: None,
    };
    let mut has_userdata = false;
    if arg.is_empty() {
    } else if arg.bytes().all(|b| b.is_ascii_digit()) {
        c.max_len = str_to_u16(arg, "max_len")?;
    } else {
        for (k, v) in KeyValues::new(arg) {
            match k {
                "reason" => {
                    c.reason = PacketInReason::from_name(v)
                        .ok_or_else(|| err(format!("unknown reason \"{v}\"")))?;
                }
                "max_len" => c.max_len = str_to_u16(v, "max_len")?,
                "id" => c.controller_id = str_to_u16(v, "id")?,
                "userdata" => {
                    let (bytes, ok) = parse_hex(v);
                    if !ok {
                        return Err(err("bad hex digit in `controller' action `userdata'"));
                    }
                    c.userdata = bytes;
                    has_userdata = true;
                }
                "pause" => c.pause = true,
                // Meter 0 is OVS's `NX_CTLR_NO_METER`.
                "meter_id" => c.meter_id = Some(str_to_u32(v)?).filter(|m| *m != 0),
                _ => {
                    return Err(err(format!(
                        "unknown key \"{k}\" parsing controller action"
                    )))
                }
            }
        }
    }
    if c.reason == PacketInReason::Action
        && c.controller_id == 0
        && !has_userdata
        && !c.pause
        && c.meter_id.is_none()
    {
        return Ok(Action::Output {
            port: OFPP_CONTROLLER,
            max_len: c.max_len,
        });
    }
    Ok(Action::Controller(Box::new(c)))
}

/// OVS `parse_reg_load`.
fn parse_load(arg: &str) -> Result<Action, Error> {
    let (value_s, key) = split_arrow(arg)?;
    let dst = parse_subfield(key)?;
    let value = parse_int(value_s, dst.field.n_bytes())
        .ok_or_else(|| err(format!("{arg}: cannot parse integer value")))?;
    let n = u32::from(dst.n_bits);
    if n < 128 && value >> n != 0 {
        let shown = crate::ofctl::value::format_value(dst.field, value);
        return Err(err(format!(
            "{arg}: value {shown} does not fit into {n} bits"
        )));
    }
    let mask = if n >= 128 {
        u128::MAX
    } else {
        (1u128 << n) - 1
    } << dst.ofs;
    Ok(Action::Load(FieldWrite {
        field: dst.field,
        value: (value << dst.ofs) & mask,
        mask,
        flow_has_vlan: false,
    }))
}

/// OVS `nxm_parse_reg_move`.
fn parse_move(arg: &str) -> Result<Action, Error> {
    let i = arg
        .find("->")
        .ok_or_else(|| err(format!("{arg}: missing `->' following source")))?;
    let src = parse_subfield_shown(&arg[..i], arg)?;
    let dst = parse_subfield(&arg[i + 2..])?;
    if src.n_bits != dst.n_bits {
        return Err(err(format!(
            "{arg}: source field is {} bits wide but destination is {} bits wide",
            src.n_bits, dst.n_bits
        )));
    }
    Ok(Action::Move { src, dst })
}

/// OVS `parse_DEC_TTL`.
fn parse_dec_ttl(arg: &str) -> Result<Action, Error> {
    if arg.is_empty() {
        return Ok(Action::DecTtl {
            controller_ids: None,
        });
    }
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // C's `atoi` into u16.
    let ids: Vec<u16> = arg
        .split([',', ' '])
        .filter(|t| !t.is_empty())
        .map(|t| atoi(t) as u16)
        .collect();
    if ids.is_empty() {
        return Err(err("dec_ttl_cnt_ids: expected at least one controller id."));
    }
    Ok(Action::DecTtl {
        controller_ids: Some(ids),
    })
}

/// OVS `parse_FIN_TIMEOUT`.
fn parse_fin_timeout(arg: &str) -> Result<Action, Error> {
    let (mut idle, mut hard) = (0, 0);
    for (k, v) in KeyValues::new(arg) {
        match k {
            "idle_timeout" => idle = str_to_u16(v, k)?,
            "hard_timeout" => hard = str_to_u16(v, k)?,
            _ => return Err(err(format!("invalid key '{k}' in 'fin_timeout' argument"))),
        }
    }
    Ok(Action::FinTimeout {
        idle_timeout: idle,
        hard_timeout: hard,
    })
}

/// OVS `parse_CONJUNCTION`: `ID,K/N`.
fn parse_conjunction(arg: &str) -> Result<Action, Error> {
    let syntax = || err("\"conjunction\" syntax is \"conjunction(id,i/n)\"");
    let (id_s, rest) = arg.split_once(',').ok_or_else(syntax)?;
    let (k_s, n_s) = rest.split_once('/').ok_or_else(syntax)?;
    let id = c_int(id_s.trim())
        .and_then(|v| u32::try_from(v).ok())
        .ok_or_else(syntax)?;
    let k = k_s.trim().parse::<u8>().map_err(|_| syntax())?;
    let n = n_s.trim().parse::<u8>().map_err(|_| syntax())?;
    if n < 2 {
        return Err(err("conjunction must have at least 2 clauses"));
    } else if n > 64 {
        return Err(err("conjunction must have at most 64 clauses"));
    } else if k < 1 {
        return Err(err("clause index must be positive"));
    } else if k > n {
        return Err(err(
            "clause index must be less than or equal to number of clauses",
        ));
    }
    Ok(Action::Conjunction {
        id,
        clause: k - 1,
        n_clauses: n,
    })
}

/// OVS `multipath_parse`.
fn parse_multipath(arg: &str) -> Result<Action, Error> {
    let mut toks = Tokens::new(arg);
    let parts: Vec<&str> = std::iter::from_fn(|| toks.next(", ")).take(6).collect();
    let [fields, basis, algorithm, n_links, mp_arg, dst] = parts[..] else {
        return Err(err(format!(
            "{arg}: not enough arguments to multipath action"
        )));
    };
    let fields = HashFields::from_name(fields)
        .ok_or_else(|| err(format!("{arg}: unknown fields `{fields}'")))?;
    let algorithm = match algorithm.to_ascii_lowercase().as_str() {
        "modulo_n" => MultipathAlgorithm::ModuloN,
        "hash_threshold" => MultipathAlgorithm::HashThreshold,
        "hrw" => MultipathAlgorithm::Hrw,
        "iter_hash" => MultipathAlgorithm::IterHash,
        _ => return Err(err(format!("{arg}: unknown algorithm `{algorithm}'"))),
    };
    let n_links = atoi(n_links);
    if !(1..=65536).contains(&n_links) {
        return Err(err(format!(
            "{arg}: n_links {n_links} is not in valid range 1 to 65536"
        )));
    }
    let dst_sf = parse_subfield(dst)?;
    if is_experimenter(dst_sf.field) {
        return Err(err(format!(
            "{arg}: experimenter OXM field '{dst}' not supported"
        )));
    }
    if dst_sf.n_bits < 16 && n_links > (1i64 << dst_sf.n_bits) {
        return Err(err(format!(
            "{arg}: {}-bit destination field has {} possible values, less than specified n_links {n_links}",
            dst_sf.n_bits,
            1u32 << dst_sf.n_bits
        )));
    }
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // C's `atoi`.
    Ok(Action::Multipath(Box::new(Multipath {
        fields,
        basis: atoi(basis) as u16,
        algorithm,
        max_link: (n_links - 1) as u16,
        arg: atoi(mp_arg) as u32,
        dst: dst_sf,
    })))
}

/// OVS `parse_CHECK_PKT_LARGER`: `LEN)->DST` (the key-value splitter leaves the `)`).
fn parse_check_pkt_larger(arg: &str) -> Result<Action, Error> {
    let (value, key) = split_arrow(arg)?;
    let value = value.strip_suffix(')').unwrap_or(value);
    let dst = parse_subfield(key)?;
    if dst.n_bits != 1 {
        return Err(err("Only 1-bit destination field is allowed"));
    }
    let pkt_len = c_int(value)
        .and_then(|v| u16::try_from(v).ok())
        // OVS passes a null name to `str_to_u16` here, which glibc prints as `(null)`.
        .ok_or_else(|| err(format!("invalid (null) \"{value}\"")))?;
    Ok(Action::CheckPktLarger { pkt_len, dst })
}

/// Parses an IPv6 address, bare or in brackets, at the start of `s`; returns it and the
/// length consumed.
fn scan_ipv6(s: &str) -> Option<(Ipv6Addr, usize)> {
    if let Some(rest) = s.strip_prefix('[') {
        let end = rest.find(']')?;
        let a = rest[..end].parse().ok()?;
        return Some((a, end + 2));
    }
    let len = s
        .find(|c: char| !(c.is_ascii_hexdigit() || c == ':' || c == '.'))
        .unwrap_or(s.len());
    // Greedy, as OVS's `%[0-9a-fA-F:.]` scan: a port must follow a bracketed address.
    s[..len].parse().ok().map(|a| (a, len))
}

/// Parses an IPv4 address at the start of `s`; returns it and the length consumed.
fn scan_ipv4(s: &str) -> Option<(Ipv4Addr, usize)> {
    let len = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    s[..len].parse().ok().map(|a| (a, len))
}

/// OVS `str_to_nat_range`.
fn parse_nat_range(s: &str, nat: &mut Nat) -> Result<(), Error> {
    let bad = || err(format!("invalid nat range \"{s}\""));
    let mut n = 0;
    if let Some((min, l)) = scan_ipv4(s) {
        n = l;
        let mut max = min;
        if s[n..].starts_with('-') {
            n += 1;
            let (m, l) = scan_ipv4(&s[n..]).ok_or_else(bad)?;
            if u32::from(m) < u32::from(min) {
                return Err(bad());
            }
            max = m;
            n += l;
        }
        nat.addrs = Some(NatAddrs::V4 { min, max });
    } else if let Some((min, l)) = scan_ipv6(s) {
        n = l;
        let mut max = min;
        if s[n..].starts_with('-') {
            n += 1;
            let (m, l) = scan_ipv6(&s[n..]).ok_or_else(bad)?;
            if m < min {
                return Err(bad());
            }
            max = m;
            n += l;
        }
        nat.addrs = Some(NatAddrs::V6 { min, max });
    }
    if nat.addrs.is_some() && s[n..].starts_with(':') {
        n += 1;
        let digits = s[n..].bytes().take_while(u8::is_ascii_digit).count();
        let min: u16 = s[n..n + digits].parse().map_err(|_| bad())?;
        n += digits;
        let mut max = min;
        if s[n..].starts_with('-') {
            n += 1;
            let digits = s[n..].bytes().take_while(u8::is_ascii_digit).count();
            max = s[n..n + digits].parse().map_err(|_| bad())?;
            n += digits;
            if max < min {
                return Err(bad());
            }
        }
        nat.port_min = min;
        nat.port_max = max;
    }
    if n != s.len() {
        return Err(err(format!(
            "garbage ({}) after nat range \"{s}\" (pos: {n})",
            &s[n..]
        )));
    }
    Ok(())
}

/// OVS `parse_NAT`.
fn parse_nat(arg: &str) -> Result<Nat, Error> {
    let mut nat = Nat::default();
    let mut src = false;
    let mut dst = false;
    for (k, v) in KeyValues::new(arg) {
        match k {
            "src" | "dst" => {
                if k == "src" {
                    src = true;
                } else {
                    dst = true;
                }
                parse_nat_range(v, &mut nat)?;
            }
            "persistent" => nat.persistent = true,
            "hash" => nat.hash = true,
            "random" => nat.random = true,
            _ => return Err(err(format!("invalid key \"{k}\" in \"nat\" argument"))),
        }
    }
    if src && dst {
        return Err(err("May only specify one of \"src\" or \"dst\"."));
    }
    nat.kind = if src {
        Some(NatKind::Src)
    } else if dst {
        Some(NatKind::Dst)
    } else {
        None
    };
    if nat.kind.is_none() {
        if nat.persistent || nat.hash || nat.random {
            return Err(err("Flags allowed only with \"src\" or \"dst\"."));
        }
        if nat.addrs.is_some() {
            return Err(err("Range allowed only with \"src\" or \"dst\"."));
        }
    }
    if nat.hash && nat.random {
        return Err(err("Both \"hash\" and \"random\" are not allowed."));
    }
    Ok(nat)
}
