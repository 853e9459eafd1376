//! Verification of a parsed action list (OVS `ofpacts_verify`): `conjunction` exclusivity,
//! what may nest inside `ct`, `clone` and `write_actions`, and OpenFlow 1.1's instruction
//! order.

use super::parse::Outer;
use crate::action::Action;
use crate::field::{Field, FieldId};
use crate::Error;

fn err(msg: impl Into<String>) -> Error {
    Error::Parse(msg.into())
}

/// OVS `ofpact_name`: the name OVS uses for an action in messages.
pub(crate) fn action_name(a: &Action) -> &'static str {
    match a {
        Action::Output { .. } => "output",
        Action::OutputReg { .. } => "output_reg",
        Action::OutputTrunc { .. } => "output_trunc",
        Action::Controller(_) => "controller",
        Action::Enqueue { .. } => "enqueue",
        Action::SetQueue { .. } => "set_queue",
        Action::PopQueue => "pop_queue",
        Action::Group { .. } => "group",
        Action::Resubmit { .. } => "resubmit",
        Action::Bundle(_) => "bundle",
        Action::Multipath(_) => "multipath",
        Action::SetVlanVid { .. } => "set_vlan_vid",
        Action::SetVlanPcp { .. } => "set_vlan_pcp",
        Action::PopVlan => "strip_vlan",
        Action::PushVlan { .. } => "push_vlan",
        Action::SetEthSrc(_) => "mod_dl_src",
        Action::SetEthDst(_) => "mod_dl_dst",
        Action::SetIpv4Src(_) => "mod_nw_src",
        Action::SetIpv4Dst(_) => "mod_nw_dst",
        Action::SetIpDscp(_) => "mod_nw_tos",
        Action::SetIpEcn(_) => "mod_nw_ecn",
        Action::SetIpTtl(_) => "mod_nw_ttl",
        Action::SetL4SrcPort { .. } => "mod_tp_src",
        Action::SetL4DstPort { .. } => "mod_tp_dst",
        Action::SetField(_) | Action::Load(_) => "set_field",
        Action::Move { .. } => "move",
        Action::StackPush(_) => "push",
        Action::StackPop(_) => "pop",
        Action::DebugRecirc => "debug_recirc",
        Action::DebugSlow => "debug_slow",
        Action::DecTtl { .. } => "dec_ttl",
        Action::SetMplsLabel(_) => "set_mpls_label",
        Action::SetMplsTc(_) => "set_mpls_tc",
        Action::SetMplsTtl(_) => "set_mpls_ttl",
        Action::DecMplsTtl => "dec_mpls_ttl",
        Action::PushMpls { .. } => "push_mpls",
        Action::PopMpls { .. } => "pop_mpls",
        Action::SetTunnel { .. } => "set_tunnel",
        Action::FinTimeout { .. } => "fin_timeout",
        Action::Conjunction { .. } => "conjunction",
        Action::Note(_) => "note",
        Action::Exit => "exit",
        Action::Sample(_) => "sample",
        Action::Ct(_) => "ct",
        Action::CtClear => "ct_clear",
        Action::Clone(_) => "clone",
        Action::CheckPktLarger { .. } => "check_pkt_larger",
        Action::Learn(_) => "learn",
        Action::Meter { .. } => "meter",
        Action::ClearActions => "clear_actions",
        Action::WriteActions(_) => "write_actions",
        Action::WriteMetadata { .. } => "write_metadata",
        Action::GotoTable { .. } => "goto_table",
    }
}

/// The field an action writes, if it writes one (OVS `ofpact_get_mf_dst`).
fn mf_dst(a: &Action) -> Option<&'static Field> {
    match a {
        Action::SetField(w) | Action::Load(w) => Some(w.field),
        Action::Move { dst, .. } => Some(dst.field),
        _ => None,
    }
}

fn requires_ct(f: &Field) -> bool {
    matches!(f.id, FieldId::CtMark | FieldId::CtLabel)
}

fn outer_name(o: Outer) -> &'static str {
    match o {
        Outer::None => "",
        Outer::WriteActions => "write_actions",
        Outer::Ct => "ct",
        Outer::Clone => "clone",
    }
}

/// OVS `ofpacts_verify`: conjunction exclusivity, nesting rules and instruction order,
/// action by action (so the first offending action decides the error).
pub(crate) fn verify(
    actions: &[Action],
    allow_instructions: bool,
    outer: Outer,
) -> Result<(), Error> {
    let mut inst = 0u8;
    for (i, a) in actions.iter().enumerate() {
        if matches!(a, Action::Conjunction { .. }) {
            return match actions
                .iter()
                .find(|a| !matches!(a, Action::Conjunction { .. } | Action::Note(_)))
            {
                Some(other) => Err(err(format!(
                    "\"conjunction\" actions may be used along with \"note\" but not any other kind of action (such as the \"{}\" action used here)",
                    action_name(other)
                ))),
                None => Ok(()),
            };
        }
        verify_nested(a, outer)?;
        let next = instruction_type(a);
        if i > 0 && (if inst == 1 { next < inst } else { next <= inst }) {
            let (name, next_name) = (instruction_name(inst), instruction_name(next));
            return Err(err(if next == inst {
                format!("duplicate {name} instruction not allowed, for OpenFlow 1.1+ compatibility")
            } else {
                format!(
                    "invalid instruction ordering: {next_name} must appear before {name}, for OpenFlow 1.1+ compatibility"
                )
            }));
        }
        if !allow_instructions && next > 1 {
            return Err(err(format!(
                "{} instruction not allowed here",
                instruction_name(next)
            )));
        }
        inst = next;
    }
    Ok(())
}

/// OVS `ofpacts_verify_nested`.
fn verify_nested(a: &Action, outer: Outer) -> Result<(), Error> {
    let field = mf_dst(a);
    if field.is_some_and(requires_ct) && outer != Outer::Ct {
        return Err(err("cannot set CT fields outside of ct action"));
    }
    if outer == Outer::Ct {
        match field {
            None => {
                return Err(err(format!(
                    "ct action doesn't support nested action {}",
                    action_name(a)
                )))
            }
            Some(f) if !requires_ct(f) => {
                return Err(err(format!(
                    "ct action doesn't support nested modification of {}",
                    f.name
                )))
            }
            Some(_) => {}
        }
    }
    if outer != Outer::None && matches!(a, Action::Meter { .. }) {
        return Err(err(format!(
            "{} action doesn't support nested action meter",
            outer_name(outer)
        )));
    }
    Ok(())
}

/// OVS instruction types, in the order OpenFlow 1.1+ requires (0 meter, 1 apply-actions,
/// 2 clear_actions, 3 write_actions, 4 write_metadata, 5 goto_table).
fn instruction_type(a: &Action) -> u8 {
    match a {
        Action::Meter { .. } => 0,
        Action::ClearActions => 2,
        Action::WriteActions(_) => 3,
        Action::WriteMetadata { .. } => 4,
        Action::GotoTable { .. } => 5,
        _ => 1,
    }
}

fn instruction_name(t: u8) -> &'static str {
    match t {
        0 => "meter",
        1 => "apply_actions",
        2 => "clear_actions",
        3 => "write_actions",
        4 => "write_metadata",
        _ => "goto_table",
    }
}
