//! The `learn(...)` action: parse, print and check (OVS `learn.c`).
//!
//! The learned flow's match and actions are written as specs: `dst`, `dst=src` or
//! `dst=VALUE` add a match, `load:...->dst` a load, `output:src` an output. Flow
//! parameters (`table`, timeouts, `priority`, `cookie`, flags, `limit`, `result_dst`) may
//! appear anywhere among them.

use std::fmt::Write as _;

use super::check::FlowState;
use super::parse::{atoi, c_int, is_experimenter, parse_subfield, parse_subfield_shown};
use super::{check_error, KeyValues};
use crate::action::{Learn, LearnSpec};
use crate::field::FieldId;
use crate::ofctl::value::{format_value, parse_int, parse_value};
use crate::subfield::Subfield;
use crate::Error;

/// OVS `OFP_DEFAULT_PRIORITY`.
const DEFAULT_PRIORITY: u16 = 0x8000;

fn err(msg: impl Into<String>) -> Error {
    Error::Parse(msg.into())
}

fn fits(value: u128, n_bits: u16) -> bool {
    n_bits >= 128 || value >> n_bits == 0
}

/// C's `%#x` as OVS's `ds_put_hex` prints it: `0` for zero.
fn hex(v: u128) -> String {
    if v == 0 {
        "0".to_string()
    } else {
        format!("{v:#x}")
    }
}

/// Parses a subfield that `learn` can encode (no experimenter OXM).
fn classic_subfield(orig: &str, s: &str) -> Result<Subfield, Error> {
    let sf = parse_subfield(s)?;
    if is_experimenter(sf.field) {
        return Err(err(format!(
            "{orig}: experimenter OXM field '{s}' not supported"
        )));
    }
    Ok(sf)
}

/// OVS `learn_parse_spec`.
fn parse_spec(orig: &str, name: &str, value: &str) -> Result<LearnSpec, Error> {
    if let Ok(dst) = parse_subfield(name) {
        if is_experimenter(dst.field) {
            return Err(err(format!(
                "{orig}: experimenter OXM field '{name}' not supported"
            )));
        }
        if value.is_empty() {
            return Ok(LearnSpec::MatchField { dst, src: dst });
        }
        match parse_subfield(value) {
            Ok(src) => {
                if src.n_bits != dst.n_bits {
                    return Err(err(format!(
                        "{orig}: bit widths of {name} ({}) and {value} ({}) differ",
                        src.n_bits, dst.n_bits
                    )));
                }
                Ok(LearnSpec::MatchField { dst, src })
            }
            Err(sub_err) => {
                let imm = if dst.is_whole() {
                    parse_value(dst.field, value)
                } else {
                    match parse_int(value, dst.field.n_bytes()) {
                        None => Err(err(format!("{orig}: cannot parse integer value"))),
                        Some(v) if !fits(v, dst.n_bits) => Err(err(format!(
                            "{orig}: value {} does not fit into {} bits",
                            format_value(dst.field, v),
                            dst.n_bits
                        ))),
                        Some(v) => Ok(v),
                    }
                };
                match imm {
                    Ok(v) => Ok(LearnSpec::MatchImm { dst, value: v }),
                    Err(imm_err) => Err(err(format!(
                        "{orig}: {name} value {value} cannot be parsed as a subfield ({sub_err}) or an immediate value ({imm_err})"
                    ))),
                }
            }
        }
    } else if name == "load" {
        let Some(at) = value.find("->") else {
            return Err(err(format!("{name}: missing `->' in `{value}'")));
        };
        if at == 0 {
            return Err(err(format!(
                "{name}: missing source before `->' in `{value}'"
            )));
        }
        let (src_s, dst_s) = (&value[..at], &value[at + 2..]);
        if let Some(v) = parse_int(src_s, 16) {
            let dst = classic_subfield(value, dst_s)?;
            if !fits(v, dst.n_bits) {
                return Err(err(format!(
                    "{value}: value does not fit into {} bits",
                    dst.n_bits
                )));
            }
            return Ok(LearnSpec::LoadImm { dst, value: v });
        }
        let src = parse_subfield_shown(src_s, value)?;
        let dst = parse_subfield(dst_s)?;
        if src.n_bits != dst.n_bits {
            return Err(err(format!(
                "{value}: source field is {} bits wide but destination is {} bits wide",
                src.n_bits, dst.n_bits
            )));
        }
        Ok(LearnSpec::LoadField { dst, src })
    } else if name == "output" {
        Ok(LearnSpec::Output {
            src: parse_subfield(value)?,
        })
    } else {
        Err(err(format!("{orig}: unknown keyword {name}")))
    }
}

/// OVS `learn_parse`.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // C's `atoi` semantics.
pub(crate) fn parse_learn(arg: &str) -> Result<Learn, Error> {
    let mut l = Learn {
        table: 1,
        idle_timeout: 0,
        hard_timeout: 0,
        fin_idle_timeout: 0,
        fin_hard_timeout: 0,
        priority: DEFAULT_PRIORITY,
        cookie: 0,
        send_flow_rem: false,
        delete_learned: false,
        limit: 0,
        result_dst: None,
        specs: Vec::new(),
    };
    for (name, value) in KeyValues::new(arg) {
        match name {
            "table" => {
                let t = c_int(value)
                    .and_then(|t| u8::try_from(t).ok())
                    .ok_or_else(|| err(format!("unknown table \"{value}\"")))?;
                if t == 255 {
                    return Err(err(format!(
                        "{arg}: table id 255 not valid for `learn' action"
                    )));
                }
                l.table = t;
            }
            "priority" => l.priority = atoi(value) as u16,
            "idle_timeout" => l.idle_timeout = atoi(value) as u16,
            "hard_timeout" => l.hard_timeout = atoi(value) as u16,
            "fin_idle_timeout" => l.fin_idle_timeout = atoi(value) as u16,
            "fin_hard_timeout" => l.fin_hard_timeout = atoi(value) as u16,
            "cookie" => {
                l.cookie = c_int(value)
                    .and_then(|v| u64::try_from(v).ok())
                    .unwrap_or(0);
            }
            "send_flow_rem" => l.send_flow_rem = true,
            "delete_learned" => l.delete_learned = true,
            "limit" => l.limit = atoi(value) as u32,
            "result_dst" => {
                let sf = parse_subfield(value)?;
                if !sf.field.writable {
                    return Err(err(format!("{value} is read-only")));
                }
                if sf.n_bits != 1 {
                    return Err(err("result_dst in 'learn' action must be a single bit"));
                }
                l.result_dst = Some(sf);
            }
            _ => l.specs.push(parse_spec(arg, name, value)?),
        }
    }
    Ok(l)
}

/// OVS `learn_format`.
pub(crate) fn format_learn(l: &Learn, s: &mut String) {
    let _ = write!(s, "learn(table={}", l.table);
    if l.idle_timeout != 0 {
        let _ = write!(s, ",idle_timeout={}", l.idle_timeout);
    }
    if l.hard_timeout != 0 {
        let _ = write!(s, ",hard_timeout={}", l.hard_timeout);
    }
    if l.fin_idle_timeout != 0 {
        let _ = write!(s, ",fin_idle_timeout={}", l.fin_idle_timeout);
    }
    if l.fin_hard_timeout != 0 {
        let _ = write!(s, ",fin_hard_timeout={}", l.fin_hard_timeout);
    }
    if l.priority != DEFAULT_PRIORITY {
        let _ = write!(s, ",priority={}", l.priority);
    }
    if l.send_flow_rem {
        s.push_str(",send_flow_rem");
    }
    if l.delete_learned {
        s.push_str(",delete_learned");
    }
    if l.cookie != 0 {
        let _ = write!(s, ",cookie={:#x}", l.cookie);
    }
    if l.limit != 0 {
        let _ = write!(s, ",limit={}", l.limit);
    }
    if let Some(r) = &l.result_dst {
        let _ = write!(s, ",result_dst={r}");
    }
    for spec in &l.specs {
        s.push(',');
        match spec {
            LearnSpec::MatchImm { dst, value } => {
                if dst.is_whole() {
                    let _ = write!(s, "{}={}", dst.field.name, format_value(dst.field, *value));
                } else {
                    let _ = write!(s, "{dst}={}", hex(*value));
                }
            }
            LearnSpec::MatchField { dst, src } => {
                let _ = write!(s, "{dst}");
                if src.field.id != dst.field.id || src.ofs != dst.ofs {
                    let _ = write!(s, "={src}");
                }
            }
            LearnSpec::LoadImm { dst, value } => {
                let _ = write!(s, "load:{}->{dst}", hex(*value));
            }
            LearnSpec::LoadField { dst, src } => {
                let _ = write!(s, "load:{src}->{dst}");
            }
            LearnSpec::Output { src } => {
                let _ = write!(s, "output:{src}");
            }
        }
    }
    s.push(')');
}

/// Updates the model of the learned flow's match with a constant match spec.
#[allow(clippy::cast_possible_truncation)] // Values fit their fields.
fn learned_match_write(m: &mut FlowState, dst: &Subfield, value: u128) {
    let v = value << dst.ofs;
    match dst.field.id {
        FieldId::EthType => m.dl_type = v as u16,
        FieldId::IpProto => m.nw_proto = v as u8,
        FieldId::VlanTci => m.vlan_tci = v as u16,
        FieldId::Icmpv4Type | FieldId::Icmpv6Type => m.tp_src = v as u16,
        FieldId::Icmpv4Code | FieldId::Icmpv6Code => m.tp_dst = v as u16,
        _ => {}
    }
}

/// OVS `learn_check`: sources are checked against the flow's match, destinations against
/// the match the learned flow builds up spec by spec.
pub(crate) fn check_learn(l: &Learn, flow: &FlowState) -> Result<(), Error> {
    let mut learned = FlowState::catch_all();
    let src_ok = |sf: &Subfield, m: &FlowState| -> Result<(), Error> {
        if !m.prereqs_ok(sf.field) {
            return Err(check_error("OFPBAC_MATCH_INCONSISTENT"));
        }
        Ok(())
    };
    for spec in &l.specs {
        match spec {
            LearnSpec::MatchField { dst, src } => {
                src_ok(src, flow)?;
                src_ok(dst, &learned)?;
            }
            LearnSpec::MatchImm { dst, value } => {
                src_ok(dst, &learned)?;
                learned_match_write(&mut learned, dst, *value);
            }
            LearnSpec::LoadImm { dst, .. } => {
                src_ok(dst, &learned)?;
                if !dst.field.writable {
                    return Err(check_error("OFPBAC_BAD_SET_ARGUMENT"));
                }
            }
            LearnSpec::LoadField { dst, src } => {
                src_ok(src, flow)?;
                src_ok(dst, &learned)?;
                if !dst.field.writable {
                    return Err(check_error("OFPBAC_BAD_SET_ARGUMENT"));
                }
            }
            LearnSpec::Output { src } => src_ok(src, flow)?,
        }
    }
    Ok(())
}
