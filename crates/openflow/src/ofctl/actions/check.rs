//! Consistency of actions with the flow's match (OVS `ofpacts_check`).
//!
//! Most actions that need a prerequisite the match does not guarantee (`mod_nw_src`
//! without `ip`, `pop_vlan` without a VLAN match) are allowed but make the flow usable
//! only with OpenFlow 1.0, which does not check consistency (OVS `inconsistent_match`).
//! A few are hard errors (`set_field`/`load`/`move` on a field whose prerequisites are
//! missing, `ct` without `ip`, an output to an invalid port).
//!
//! The check walks the list with a small model of the packet (`FlowState`) that actions
//! update as they go: after `push_mpls` the packet is MPLS, after `push_vlan` it is
//! tagged.

use super::check_error;
use crate::action::{Action, CtZone, NatAddrs};
use crate::field::{Field, FieldId, Prereq, Protocols};
use crate::flow_match::Match;
use crate::ofctl::value::{OFPP_IN_PORT, OFPP_LOCAL, OFPP_MAX, OFPP_NONE};
use crate::subfield::Subfield;
use crate::Error;

const ETH_TYPE_IP: u16 = 0x0800;
const ETH_TYPE_IPV6: u16 = 0x86dd;
const ETH_TYPE_ARP: u16 = 0x0806;
const ETH_TYPE_RARP: u16 = 0x8035;
const VLAN_CFI: u16 = 0x1000;
const CS_NEW: u32 = 0x01;
const CS_ESTABLISHED: u32 = 0x02;
const CS_RELATED: u32 = 0x04;
const CS_REPLY_DIR: u32 = 0x08;
const CS_INVALID: u32 = 0x10;
const CS_TRACKED: u32 = 0x20;
const CS_SRC_NAT: u32 = 0x40;
const CS_DST_NAT: u32 = 0x80;
const FLOW_NW_FRAG_LATER: u8 = 0x2;
/// OVS `OFPM13_MAX`.
const OFPM13_MAX: u32 = 0xffff_0000;

/// The parts of the flow the checks read (values as matched; wildcarded bits are 0).
#[derive(Debug, Clone)]
pub(crate) struct FlowState {
    pub(crate) dl_type: u16,
    pub(crate) nw_proto: u8,
    pub(crate) nw_frag: u8,
    pub(crate) vlan_tci: u16,
    pub(crate) vlan_tci1: u16,
    pub(crate) tp_src: u16,
    pub(crate) tp_dst: u16,
    pub(crate) ct_state: u32,
    pub(crate) ct_state_mask: u32,
}

impl FlowState {
    /// The flow of a match that matches everything.
    pub(crate) fn catch_all() -> Self {
        FlowState::from_match(&Match::catch_all())
    }

    pub(crate) fn from_match(m: &Match) -> Self {
        let v = m.value();
        FlowState {
            dl_type: v.dl_type(),
            nw_proto: v.nw_proto(),
            nw_frag: v.nw_frag(),
            vlan_tci: v.vlan_tci(),
            vlan_tci1: v.vlan_tci1(),
            tp_src: v.tp_src(),
            tp_dst: v.tp_dst(),
            ct_state: v.ct_state(),
            ct_state_mask: m.mask().ct_state(),
        }
    }

    fn is_ip_any(&self) -> bool {
        self.dl_type == ETH_TYPE_IP || self.dl_type == ETH_TYPE_IPV6
    }

    fn is_mpls(&self) -> bool {
        self.dl_type == 0x8847 || self.dl_type == 0x8848
    }

    /// OVS `is_ct_valid` on a match: some bit that implies a valid connection is
    /// matched, or tracked and explicitly not invalid.
    fn is_ct_valid_match(&self) -> bool {
        self.ct_state
            & (CS_NEW | CS_ESTABLISHED | CS_RELATED | CS_REPLY_DIR | CS_SRC_NAT | CS_DST_NAT)
            != 0
            || (self.ct_state & CS_TRACKED != 0
                && self.ct_state_mask & CS_INVALID != 0
                && self.ct_state & CS_INVALID == 0)
    }

    /// OVS `mf_are_match_prereqs_ok` (`match_ct` true: conntrack validity judged on the
    /// match, as `mf_check_src`/`mf_check_dst` do) or `mf_are_prereqs_ok` (false: on the
    /// flow alone, as the `set_field` check does).
    pub(crate) fn prereqs_ok_with(&self, f: &Field, match_ct: bool) -> bool {
        // OVS: L4 fields also need a non-later fragment (the mask is not checked).
        let l4 = |proto: u8| {
            self.is_ip_any() && self.nw_proto == proto && self.nw_frag & FLOW_NW_FRAG_LATER == 0
        };
        let icmp6 = self.dl_type == ETH_TYPE_IPV6 && self.nw_proto == 58;
        match f.prereq {
            Prereq::None | Prereq::Ethernet => true,
            Prereq::Arp => self.dl_type == ETH_TYPE_ARP || self.dl_type == ETH_TYPE_RARP,
            Prereq::VlanVid => self.vlan_tci & VLAN_CFI != 0,
            Prereq::Ipv4 => self.dl_type == ETH_TYPE_IP,
            Prereq::Ipv6 => self.dl_type == ETH_TYPE_IPV6,
            Prereq::IpAny => self.is_ip_any(),
            Prereq::Mpls => self.is_mpls(),
            Prereq::Tcp => l4(6),
            Prereq::Udp => l4(17),
            Prereq::Sctp => l4(132),
            Prereq::Icmpv4 => self.dl_type == ETH_TYPE_IP && self.nw_proto == 1,
            Prereq::Icmpv6 => icmp6,
            Prereq::Nd => icmp6 && (self.tp_src == 135 || self.tp_src == 136) && self.tp_dst == 0,
            Prereq::NdSolicit => icmp6 && self.tp_src == 135 && self.tp_dst == 0,
            Prereq::NdAdvert => icmp6 && self.tp_src == 136 && self.tp_dst == 0,
            Prereq::Ct if match_ct => self.is_ct_valid_match(),
            Prereq::Ct => self.ct_state & (CS_NEW | CS_ESTABLISHED | CS_REPLY_DIR) != 0,
        }
    }
}

impl FlowState {
    /// OVS `mf_are_match_prereqs_ok`.
    pub(crate) fn prereqs_ok(&self, f: &Field) -> bool {
        self.prereqs_ok_with(f, true)
    }
}

/// OVS `ofpact_check_output_port`.
fn check_output_port(port: u16) -> Result<(), Error> {
    if port == OFPP_NONE || (OFPP_MAX..OFPP_IN_PORT).contains(&port) {
        return Err(check_error("OFPBAC_BAD_OUT_PORT"));
    }
    Ok(())
}

/// OVS `mf_check_src` / `mf_check_dst` (width and prerequisites; the subfield parser
/// already keeps ranges inside the field).
fn check_subfield(sf: &Subfield, flow: &FlowState, dst: bool) -> Result<(), Error> {
    if u32::from(sf.ofs) + u32::from(sf.n_bits) > u32::from(sf.field.n_bits) || sf.n_bits == 0 {
        return Err(check_error("OFPBAC_BAD_SET_LEN"));
    }
    if !flow.prereqs_ok(sf.field) {
        return Err(check_error("OFPBAC_MATCH_INCONSISTENT"));
    }
    if dst && !sf.field.writable {
        return Err(check_error("OFPBAC_BAD_SET_ARGUMENT"));
    }
    Ok(())
}

/// Checks `actions` against `flow`, narrowing `usable` and filling in the match-derived
/// facts some actions carry.
pub(crate) fn check_list(
    actions: &mut [Action],
    flow: &mut FlowState,
    usable: &mut Protocols,
    table_id: Option<u8>,
) -> Result<(), Error> {
    // Actions change the modelled flow only for the rest of this list.
    let mut flow_copy = flow.clone();
    for a in actions.iter_mut() {
        check_one(a, &mut flow_copy, usable, table_id)?;
    }
    Ok(())
}

fn inconsistent(usable: &mut Protocols) {
    *usable = usable.and(Protocols::OF10_ANY);
}

// One arm per action, with its condition inside, reads like OVS's `check_*` functions;
// match guards would split each action's rule across two arms.
#[allow(clippy::collapsible_match)]
fn check_one(
    a: &mut Action,
    flow: &mut FlowState,
    usable: &mut Protocols,
    table_id: Option<u8>,
) -> Result<(), Error> {
    match a {
        Action::Output { port, .. } | Action::OutputTrunc { port, .. } => {
            check_output_port(*port)?;
        }
        Action::Enqueue { port, .. } => {
            if *port >= OFPP_MAX && *port != OFPP_IN_PORT && *port != OFPP_LOCAL {
                return Err(check_error("OFPBAC_BAD_OUT_PORT"));
            }
        }
        Action::OutputReg { src, .. } => check_subfield(src, flow, false)?,
        Action::Bundle(b) => {
            for p in &b.members {
                if *p >= OFPP_MAX && *p != OFPP_IN_PORT && *p != OFPP_LOCAL {
                    return Err(check_error("OFPBAC_BAD_OUT_PORT"));
                }
            }
            if let Some(dst) = &b.dst {
                check_subfield(dst, flow, true)?;
            }
        }
        Action::Multipath(m) => check_subfield(&m.dst, flow, true)?,
        Action::SetVlanVid {
            push_if_needed,
            flow_has_vlan,
            ..
        }
        | Action::SetVlanPcp {
            push_if_needed,
            flow_has_vlan,
            ..
        } => {
            *flow_has_vlan = flow.vlan_tci & VLAN_CFI != 0;
            if !*flow_has_vlan && !*push_if_needed {
                inconsistent(usable);
            }
            flow.vlan_tci |= VLAN_CFI;
        }
        Action::PopVlan => {
            if flow.vlan_tci & VLAN_CFI == 0 {
                inconsistent(usable);
            }
            flow.vlan_tci = flow.vlan_tci1;
            flow.vlan_tci1 = 0;
        }
        Action::PushVlan { .. } => {
            if flow.vlan_tci1 & VLAN_CFI != 0 {
                return Err(check_error("OFPBAC_BAD_TAG"));
            }
            flow.vlan_tci1 = flow.vlan_tci;
            flow.vlan_tci = VLAN_CFI;
        }
        Action::SetIpv4Src(_) | Action::SetIpv4Dst(_) => {
            if flow.dl_type != ETH_TYPE_IP {
                inconsistent(usable);
            }
        }
        Action::SetIpDscp(_)
        | Action::SetIpEcn(_)
        | Action::SetIpTtl(_)
        | Action::DecTtl { .. } => {
            if !flow.is_ip_any() {
                inconsistent(usable);
            }
        }
        Action::SetL4SrcPort { ip_proto, .. } | Action::SetL4DstPort { ip_proto, .. } => {
            if !flow.is_ip_any()
                || flow.nw_frag & FLOW_NW_FRAG_LATER != 0
                || !matches!(flow.nw_proto, 6 | 17 | 132)
            {
                inconsistent(usable);
            }
            *ip_proto = flow.nw_proto;
        }
        Action::SetField(w) | Action::Load(w) => {
            let f = w.field;
            if !flow.prereqs_ok_with(f, false)
                || (f.id == FieldId::VlanVid && flow.vlan_tci & VLAN_CFI == 0)
            {
                return Err(check_error("OFPBAC_MATCH_INCONSISTENT"));
            }
            w.flow_has_vlan = flow.vlan_tci & VLAN_CFI != 0;
            if f.id == FieldId::VlanTci {
                // Only the written bits; the rest keep what the match said.
                #[allow(clippy::cast_possible_truncation)] // vlan_tci is 16 bits.
                let (v, m) = (w.value as u16, w.mask as u16);
                flow.vlan_tci = (flow.vlan_tci & !m) | (v & m);
            }
        }
        Action::Move { src, dst } => {
            check_subfield(src, flow, false)?;
            check_subfield(dst, flow, true)?;
        }
        Action::StackPush(sf) => check_subfield(sf, flow, false)?,
        Action::StackPop(sf) => check_subfield(sf, flow, true)?,
        Action::SetMplsLabel(_)
        | Action::SetMplsTc(_)
        | Action::SetMplsTtl(_)
        | Action::DecMplsTtl => {
            if !flow.is_mpls() {
                inconsistent(usable);
            }
        }
        Action::PushMpls { ethertype } => {
            flow.dl_type = *ethertype;
            flow.nw_proto = 0;
        }
        Action::PopMpls { ethertype } => {
            if !flow.is_mpls() {
                inconsistent(usable);
            }
            flow.dl_type = *ethertype;
        }
        Action::FinTimeout { .. } => {
            if flow.nw_proto != 6 {
                inconsistent(usable);
            }
        }
        Action::Resubmit { ct: true, .. } => {
            if !flow.is_ct_valid_match() {
                return Err(check_error("OFPBAC_MATCH_INCONSISTENT"));
            }
        }
        Action::Ct(ct) => {
            if !flow.is_ip_any()
                || (flow.ct_state & CS_INVALID != 0 && ct.commit)
                || (ct.alg == 21 && flow.nw_proto != 6)
                || (ct.alg == 69 && flow.nw_proto != 17)
            {
                return Err(check_error("OFPBAC_MATCH_INCONSISTENT"));
            }
            if let CtZone::Field(sf) = &ct.zone {
                // As OVS, a zone from a field ends the check of this action.
                return check_subfield(sf, flow, false);
            }
            if let Some(nat) = &ct.nat {
                let bad = match nat.addrs {
                    Some(NatAddrs::V4 { .. }) => flow.dl_type != ETH_TYPE_IP,
                    Some(NatAddrs::V6 { .. }) => flow.dl_type != ETH_TYPE_IPV6,
                    None => false,
                };
                if bad {
                    return Err(check_error("OFPBAC_MATCH_INCONSISTENT"));
                }
            }
            let mut sub = Protocols::ANY;
            check_list(&mut ct.exec, flow, &mut sub, table_id)?;
            *usable = usable.and(sub);
        }
        Action::Learn(l) => super::learn::check_learn(l, flow)?,
        Action::Clone(inner) => {
            let mut sub = Protocols::ANY;
            check_list(inner, flow, &mut sub, table_id)?;
            *usable = usable.and(sub);
        }
        Action::WriteActions(inner) => {
            // An action set cannot be checked for consistency: errors only.
            let mut sub = Protocols::ANY;
            check_list(inner, flow, &mut sub, table_id)?;
        }
        Action::Meter { meter_id } => {
            if *meter_id == 0 || *meter_id > OFPM13_MAX {
                return Err(check_error("OFPMMFC_INVALID_METER"));
            }
        }
        Action::GotoTable { table } => {
            if table_id.is_some_and(|t| *table <= t) {
                return Err(check_error("OFPBIC_BAD_TABLE_ID"));
            }
        }
        _ => {}
    }
    Ok(())
}

/// Rules OVS applies only when decoding (so after every parse-time check): without
/// `commit`, `ct` may only nest a bare `nat`. ovs-ofctl parse-flow prints such a flow as a
/// decode error and a switch rejects it with `OFPBAC_BAD_ARGUMENT`; we reject it up front.
pub(crate) fn decode_rules(actions: &[Action]) -> Result<(), Error> {
    for a in actions {
        match a {
            Action::Ct(ct) => {
                let nat_has_args = ct
                    .nat
                    .as_ref()
                    .is_some_and(|n| n.kind.is_some() || n.persistent || n.hash || n.random);
                if !ct.commit && (nat_has_args || !ct.exec.is_empty()) {
                    return Err(check_error("OFPBAC_BAD_ARGUMENT"));
                }
            }
            // Not inside write_actions: OpenFlow 1.0 drops the instruction before any
            // decoder sees it, and ovs-ofctl accepts the flow.
            Action::Clone(inner) => decode_rules(inner)?,
            _ => {}
        }
    }
    Ok(())
}
