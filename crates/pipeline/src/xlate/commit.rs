//! Committing the packet's pending changes as datapath actions (OVS `commit_odp_actions`).
//!
//! Translation edits a copy of the packet's key (`flow`) freely; `base` is what the packet in
//! the datapath looks like after the actions emitted so far. Before every output (and
//! before anything else that sends the packet somewhere), [`commit`] compares the two and
//! emits, in OVS's order, `set(eth(..))`, `set(ipv4(..))`/`set(ipv6(..))`,
//! `set(tcp|udp|sctp(..))`, then the VLAN changes, and makes `base` equal to `flow`. A `set`
//! carries only the fields that differ; VLAN changes pop every tag of `base` above the
//! deepest tags the two share, then push the tags of `flow` (so a modified tag is
//! `pop_vlan,push_vlan(..)`).
//!
//! Wildcards: a field that is written in the datapath is exact in the megaflow (its new value
//! may depend on the packet's old bits), and a popped tag is exact.

use packet::key::{fields, FlowKey, KeyField};

use crate::odp::{DpAction, SetField, VLAN_CFI};

const ETH_TYPE_IP: u16 = 0x0800;
const ETH_TYPE_IPV6: u16 = 0x86dd;

fn exact(wc: &mut FlowKey, f: KeyField) {
    wc.set(f, u128::MAX);
}

/// If the flow's `f` differs from the datapath packet's (`base`), queues `set` and makes `f`
/// exact in the wildcards (the emitted action depends on it).
fn diff(
    flow: &FlowKey,
    base: &FlowKey,
    f: KeyField,
    set: SetField,
    sets: &mut Vec<SetField>,
    wc: &mut FlowKey,
) {
    if flow.get(f) != base.get(f) {
        sets.push(set);
        exact(wc, f);
    }
}

/// The VLAN tags of `k`, outermost first: `(tpid, tci)`.
pub fn vlan_tags(k: &FlowKey) -> Vec<(u16, u16)> {
    let mut tags = Vec::with_capacity(2);
    if k.vlan_tci() & VLAN_CFI != 0 {
        tags.push((k.vlan_tpid(), k.vlan_tci()));
        if k.vlan_tci1() & VLAN_CFI != 0 {
            tags.push((k.vlan_tpid1(), k.vlan_tci1()));
        }
    }
    tags
}

/// Emits the datapath actions that turn `base` into `flow` (see the module documentation).
/// `orig` is the packet as it entered and `vlans_touched` says whether any action wrote the
/// flow's VLAN fields since (for the VLAN wildcards).
pub(crate) fn commit(
    flow: &FlowKey,
    base: &mut FlowKey,
    orig: &FlowKey,
    vlans_touched: bool,
    wc: &mut FlowKey,
    out: &mut Vec<DpAction>,
) {
    // Ethernet addresses.
    let mut eth = Vec::new();
    diff(
        flow,
        base,
        fields::DL_SRC,
        SetField::EthSrc(flow.dl_src()),
        &mut eth,
        wc,
    );
    diff(
        flow,
        base,
        fields::DL_DST,
        SetField::EthDst(flow.dl_dst()),
        &mut eth,
        wc,
    );
    if !eth.is_empty() {
        out.push(DpAction::Set(eth));
        base.set_dl_src(flow.dl_src());
        base.set_dl_dst(flow.dl_dst());
    }

    // L3: only for packets that really have an IP header (OVS checks `nw_proto`).
    if flow.nw_proto() != 0 {
        let mut l3 = Vec::new();
        match base.dl_type() {
            ETH_TYPE_IP => {
                diff(
                    flow,
                    base,
                    fields::NW_SRC,
                    SetField::Ipv4Src(flow.nw_src()),
                    &mut l3,
                    wc,
                );
                diff(
                    flow,
                    base,
                    fields::NW_DST,
                    SetField::Ipv4Dst(flow.nw_dst()),
                    &mut l3,
                    wc,
                );
                diff(
                    flow,
                    base,
                    fields::NW_TOS,
                    SetField::Ipv4Tos(flow.nw_tos()),
                    &mut l3,
                    wc,
                );
                diff(
                    flow,
                    base,
                    fields::NW_TTL,
                    SetField::Ipv4Ttl(flow.nw_ttl()),
                    &mut l3,
                    wc,
                );
            }
            ETH_TYPE_IPV6 => {
                diff(
                    flow,
                    base,
                    fields::IPV6_SRC,
                    SetField::Ipv6Src(flow.ipv6_src()),
                    &mut l3,
                    wc,
                );
                diff(
                    flow,
                    base,
                    fields::IPV6_DST,
                    SetField::Ipv6Dst(flow.ipv6_dst()),
                    &mut l3,
                    wc,
                );
                diff(
                    flow,
                    base,
                    fields::IPV6_LABEL,
                    SetField::Ipv6Label(flow.ipv6_label()),
                    &mut l3,
                    wc,
                );
                diff(
                    flow,
                    base,
                    fields::NW_TOS,
                    SetField::Ipv6Tclass(flow.nw_tos()),
                    &mut l3,
                    wc,
                );
                diff(
                    flow,
                    base,
                    fields::NW_TTL,
                    SetField::Ipv6Hlimit(flow.nw_ttl()),
                    &mut l3,
                    wc,
                );
            }
            _ => {}
        }
        if !l3.is_empty() {
            exact(wc, fields::NW_PROTO);
            out.push(DpAction::Set(l3));
            for f in [
                fields::NW_SRC,
                fields::NW_DST,
                fields::IPV6_SRC,
                fields::IPV6_DST,
                fields::IPV6_LABEL,
                fields::NW_TOS,
                fields::NW_TTL,
            ] {
                base.set(f, flow.get(f));
            }
        }

        // L4 ports.
        if matches!(base.dl_type(), ETH_TYPE_IP | ETH_TYPE_IPV6) {
            type Mk = fn(u16) -> SetField;
            let mk: Option<(Mk, Mk)> = match flow.nw_proto() {
                6 => Some((SetField::TcpSrc, SetField::TcpDst)),
                17 => Some((SetField::UdpSrc, SetField::UdpDst)),
                132 => Some((SetField::SctpSrc, SetField::SctpDst)),
                _ => None,
            };
            if let Some((src, dst)) = mk {
                let mut l4 = Vec::new();
                diff(flow, base, fields::TP_SRC, src(flow.tp_src()), &mut l4, wc);
                diff(flow, base, fields::TP_DST, dst(flow.tp_dst()), &mut l4, wc);
                if !l4.is_empty() {
                    exact(wc, fields::NW_PROTO);
                    out.push(DpAction::Set(l4));
                    base.set_tp_src(flow.tp_src());
                    base.set_tp_dst(flow.tp_dst());
                }
            }
        }
    }

    commit_vlan(flow, base, orig, vlans_touched, wc, out);
}

/// OVS `commit_vlan_action`: pop the tags of `base` that are not shared (from the inside)
/// with `flow`, push those of `flow`.
///
/// Wildcards: VLAN actions move tags around without reading them (`strip_vlan` shifts the
/// inner tag out, NORMAL rebuilds tags from the VLAN and priority it computed), so whether
/// `flow` and `base` share a tag may depend on any bit of the packet's own tags. Once an
/// action wrote the flow's VLAN fields, those are made exact. (OVS marks only popped tags,
/// which misses e.g. a rebuilt tag that equals the original only for some priorities.)
fn commit_vlan(
    flow: &FlowKey,
    base: &mut FlowKey,
    orig: &FlowKey,
    vlans_touched: bool,
    wc: &mut FlowKey,
    out: &mut Vec<DpAction>,
) {
    let b = vlan_tags(base);
    let f = vlan_tags(flow);
    let o = vlan_tags(orig);
    if vlans_touched {
        for (i, _) in o.iter().enumerate() {
            let (tpid, tci) = if i == 0 {
                (fields::VLAN_TPID, fields::VLAN_TCI)
            } else {
                (fields::VLAN_TPID1, fields::VLAN_TCI1)
            };
            exact(wc, tpid);
            exact(wc, tci);
        }
    }
    let (mut bn, mut fn_) = (b.len(), f.len());
    while bn > 0 && fn_ > 0 && b[bn - 1] == f[fn_ - 1] {
        bn -= 1;
        fn_ -= 1;
    }
    for i in (0..bn).rev() {
        out.push(DpAction::PopVlan);
        let (tpid, tci) = if i == 0 {
            (fields::VLAN_TPID, fields::VLAN_TCI)
        } else {
            (fields::VLAN_TPID1, fields::VLAN_TCI1)
        };
        exact(wc, tpid);
        exact(wc, tci);
    }
    for i in (0..fn_).rev() {
        let (tpid, tci) = f[i];
        out.push(DpAction::PushVlan {
            tpid: if tpid == 0 { 0x8100 } else { tpid },
            tci,
        });
    }
    for kf in [
        fields::VLAN_TPID,
        fields::VLAN_TCI,
        fields::VLAN_TPID1,
        fields::VLAN_TCI1,
    ] {
        base.set(kf, flow.get(kf));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::odp::format_actions;

    fn tagged(vid: u16) -> FlowKey {
        let mut k = FlowKey::default();
        k.set_dl_type(0x1234);
        k.set_vlan_tpid(0x8100);
        k.set_vlan_tci(VLAN_CFI | vid);
        k
    }

    #[test]
    fn commit_modified_tag_is_pop_then_push() {
        let mut base = tagged(3);
        let flow = tagged(4);
        let orig = base;
        let (mut wc, mut out) = (FlowKey::default(), Vec::new());
        commit(&flow, &mut base, &orig, true, &mut wc, &mut out);
        assert_eq!(format_actions(&out), "pop_vlan,push_vlan(vid=4,pcp=0)");
        assert_eq!(base, flow);
        assert_eq!(wc.vlan_tci(), 0xffff);
        // Nothing left to commit.
        out.clear();
        commit(&flow, &mut base, &orig, true, &mut wc, &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn commit_sets_only_changed_fields_in_ovs_order() {
        let mut base = FlowKey::default();
        base.set_dl_type(ETH_TYPE_IP);
        base.set_nw_proto(6);
        base.set_nw_ttl(64);
        let mut flow = base;
        flow.set_nw_ttl(63);
        flow.set_tp_src(91);
        flow.set_dl_src(2);
        flow.set_vlan_tpid(0x8100);
        flow.set_vlan_tci(VLAN_CFI | 7);
        let orig = base;
        let (mut wc, mut out) = (FlowKey::default(), Vec::new());
        commit(&flow, &mut base, &orig, true, &mut wc, &mut out);
        assert_eq!(
            format_actions(&out),
            "set(eth(src=00:00:00:00:00:02)),set(ipv4(ttl=63)),set(tcp(src=91)),push_vlan(vid=7,pcp=0)"
        );
        assert_eq!(wc.nw_ttl(), 0xff);
        assert_eq!(wc.nw_dst(), 0);
    }
}
