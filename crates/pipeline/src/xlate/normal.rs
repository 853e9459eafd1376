//! NORMAL (the learning switch) and mirrors, as OVS's `xlate_normal` and `mirror_packet`.
//!
//! # NORMAL
//!
//! Every port is a bundle with a VLAN mode (`bridge::VlanMode`). A packet's VLANs are read
//! from its tags (`xvlan_extract`), checked against the input port's mode
//! (`input_vid_is_valid`: an access port takes only untagged or priority-tagged frames, a
//! trunk only its `trunks`, a native port its native VLAN untagged, a dot1q-tunnel port only its
//! `cvlans`) and translated to the bridge-internal VLANs (`xvlan_input_translate`: an access
//! port's frames are in its `tag`, a dot1q-tunnel port pushes its outer tag). The source
//! address is learned in that VLAN (only when the translation may have side effects: a real
//! upcall or `trace -generate`), the destination looked up: a known address goes to its port
//! (unless that is the input port), an unknown one is flooded to every port that carries the
//! VLAN and has no `no-flood`, except the input port and mirror output ports. On output, the
//! VLANs are translated for the output port (`xvlan_output_translate`: stripped for access
//! ports, the native VLAN untagged on native-untagged ports, the outer tag popped on
//! dot1q-tunnel ports; `priority-tags` keeps a priority tag).
//!
//! Wildcards: Ethernet source and destination and the outer VLAN id are always consulted.
//!
//! # Mirrors
//!
//! A mirror selects packets received on (`select_src_port`) or sent to (`select_dst_port`) some
//! ports, or all (`select_all`), optionally only in some VLANs (`select_vlan`), and sends a
//! copy to a port (`output_port`, with that port's VLAN translation) or floods it in a VLAN
//! (`output_vlan`, RSPAN). Ingress mirroring happens before the tables run; egress mirroring
//! right after each output. A packet is mirrored to each destination at most once per
//! version: as in OVS master, modifying the packet (VLAN, addresses, TTL...) allows mirroring
//! the new version again. A port that is a mirror's output receives nothing else and drops
//! what it receives.
//!
//! Configuration (see [`crate::bridge`]): Port `tag`, `trunks`, `vlan_mode`, `cvlans`,
//! `other_config:priority-tags`, `other_config:qinq-ethtype`; Bridge
//! `other_config:mac-aging-time`, `other_config:mac-table-size`, `mirrors`; Mirror
//! `select_all`, `select_src_port`, `select_dst_port`, `select_vlan`, `output_port`,
//! `output_vlan`. Not implemented: bonds, multicast snooping, STP/RSTP, `protected` ports,
//! mirror `snaplen` and `filter`. Maturity: experimental.

use openflow::ofctl::value::{OFPP_CONTROLLER, OFPP_NONE};
use packet::key::{fields, FlowKey};

use super::{exact, Ctx, DropReason};
use crate::bridge::{MirrorConfig, PortLayout, PriorityTags, VlanMode};
use crate::mac_learning::Learned;
use crate::odp::VLAN_CFI;

const VID_MASK: u16 = 0x0fff;
const PCP_MASK: u16 = 0xe000;

/// One VLAN header as NORMAL sees it (OVS `struct xvlan_single`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct XVlan {
    tpid: u16,
    vid: u16,
    /// The priority bits in place (`tci & 0xe000`).
    pcp: u16,
}

type XVlans = [XVlan; 2];

/// The input bundle: a port, or the "none" bundle of packets from the controller.
#[derive(Debug, Clone)]
enum InBundle {
    Port(PortLayout),
    None,
}

fn is_vlan_tpid(t: u16) -> bool {
    t == 0x8100 || t == 0x88a8
}

fn xvlan_extract(flow: &FlowKey) -> XVlans {
    let mut x = XVlans::default();
    let tags = [
        (flow.vlan_tpid(), flow.vlan_tci()),
        (flow.vlan_tpid1(), flow.vlan_tci1()),
    ];
    for (i, (tpid, tci)) in tags.into_iter().enumerate() {
        if !is_vlan_tpid(tpid) || tci & VLAN_CFI == 0 {
            break;
        }
        x[i] = XVlan {
            tpid,
            vid: tci & VID_MASK,
            pcp: tci & PCP_MASK,
        };
    }
    x
}

fn xvlan_put(flow: &mut FlowKey, x: &XVlans, prio: PriorityTags) {
    for (i, v) in x.iter().enumerate() {
        let mut tci = v.vid | (v.pcp & PCP_MASK);
        let mut tpid = 0;
        if tci != 0 || (prio == PriorityTags::Always && v.tpid != 0) {
            tci |= VLAN_CFI;
            tpid = if v.tpid != 0 { v.tpid } else { 0x8100 };
        }
        if i == 0 {
            flow.set_vlan_tci(tci);
            flow.set_vlan_tpid(tpid);
        } else {
            flow.set_vlan_tci1(tci);
            flow.set_vlan_tpid1(tpid);
        }
    }
}

fn pop(x: &mut XVlans) {
    x[0] = x[1];
    x[1] = XVlan::default();
}

fn push(x: &mut XVlans) {
    x[1] = x[0];
    x[0] = XVlan::default();
}

fn tag(p: &PortLayout) -> u16 {
    p.tag.unwrap_or(0)
}

/// OVS `xbundle_trunks_vlan`, with the effective trunks of native ports (OVS `bundle_set`:
/// a native port always trunks its native VLAN and never VLAN 0).
fn trunks_vlan(p: &PortLayout, vid: u16) -> bool {
    let listed = p.trunks.is_empty() || p.trunks.contains(&vid);
    match p.vlan_mode {
        VlanMode::Access => false,
        VlanMode::Trunk | VlanMode::Dot1qTunnel => listed,
        VlanMode::NativeTagged | VlanMode::NativeUntagged => {
            let native = tag(p);
            let forced = native != 0
                && (p.trunks.is_empty() || !p.trunks.contains(&native) || p.trunks.contains(&0));
            if forced {
                vid != 0 && (listed || vid == native)
            } else {
                listed
            }
        }
    }
}

fn allows_cvlan(p: &PortLayout, vid: u16) -> bool {
    p.cvlans.is_empty() || p.cvlans.contains(&vid)
}

/// OVS `xbundle_includes_vlan`.
fn includes_vlan(p: &PortLayout, x: &XVlans) -> bool {
    match p.vlan_mode {
        VlanMode::Access => x[0].vid == tag(p) && x[1].vid == 0,
        VlanMode::Trunk | VlanMode::NativeUntagged | VlanMode::NativeTagged => {
            trunks_vlan(p, x[0].vid)
        }
        VlanMode::Dot1qTunnel => x[0].vid == tag(p) && allows_cvlan(p, x[1].vid),
    }
}

/// OVS `input_vid_is_valid`.
fn input_vid_is_valid(b: &InBundle, vid: u16) -> bool {
    let InBundle::Port(p) = b else {
        return true;
    };
    match p.vlan_mode {
        VlanMode::Access => vid == 0,
        VlanMode::NativeUntagged | VlanMode::NativeTagged if vid == 0 => true,
        VlanMode::NativeUntagged | VlanMode::NativeTagged | VlanMode::Trunk => trunks_vlan(p, vid),
        VlanMode::Dot1qTunnel => allows_cvlan(p, vid),
    }
}

/// OVS `xvlan_input_translate`.
fn input_translate(b: &InBundle, inx: &XVlans) -> XVlans {
    let InBundle::Port(p) = b else {
        return *inx;
    };
    let tpid_or_default = |t: u16| if t != 0 { t } else { 0x8100 };
    match p.vlan_mode {
        VlanMode::Access => [
            XVlan {
                tpid: tpid_or_default(inx[0].tpid),
                vid: tag(p),
                pcp: inx[0].pcp,
            },
            XVlan::default(),
        ],
        VlanMode::Trunk => *inx,
        VlanMode::NativeUntagged | VlanMode::NativeTagged => {
            let mut x = *inx;
            if inx[0].vid == 0 {
                x[0] = XVlan {
                    tpid: tpid_or_default(inx[0].tpid),
                    vid: tag(p),
                    pcp: inx[0].pcp,
                };
            }
            x
        }
        VlanMode::Dot1qTunnel => {
            let mut x = *inx;
            push(&mut x);
            x[0] = XVlan {
                tpid: if p.qinq_8021q { 0x8100 } else { 0x88a8 },
                vid: tag(p),
                pcp: 0,
            };
            x
        }
    }
}

/// OVS `xvlan_output_translate`.
fn output_translate(p: &PortLayout, x: &XVlans) -> XVlans {
    match p.vlan_mode {
        VlanMode::Access => XVlans::default(),
        VlanMode::Trunk | VlanMode::NativeTagged => *x,
        VlanMode::NativeUntagged => {
            let mut o = *x;
            if x[0].vid == tag(p) {
                pop(&mut o);
            }
            o
        }
        VlanMode::Dot1qTunnel => {
            let mut o = *x;
            pop(&mut o);
            o
        }
    }
}

/// IEEE 802.1D reserved group addresses 01:80:c2:00:00:0x.
fn is_reserved(mac: u64) -> bool {
    mac & !0xf == 0x0180_c200_0000
}

impl Ctx<'_> {
    fn mirrors_cfg(&self) -> &[MirrorConfig] {
        self.sw
            .config()
            .bridges
            .iter()
            .find(|b| b.name == self.bridge)
            .map_or(&[], |b| b.mirrors.as_slice())
    }

    fn mirror_mask(&self, pred: impl Fn(&MirrorConfig) -> bool) -> u32 {
        self.mirrors_cfg()
            .iter()
            .take(32)
            .enumerate()
            .filter(|(_, m)| pred(m))
            .fold(0, |acc, (i, _)| acc | (1 << i))
    }

    /// Mirrors whose output is port `name`.
    fn mirror_out(&self, name: &str) -> u32 {
        self.mirror_mask(|m| m.output_port.as_deref() == Some(name))
    }

    /// Mirrors that select packets received on `name`.
    pub(super) fn mirror_src(&self, name: &str) -> u32 {
        self.mirror_mask(|m| m.select_all || m.select_src_port.iter().any(|p| p == name))
    }

    /// Mirrors that select packets sent to `name`.
    pub(super) fn mirror_dst(&self, name: &str) -> u32 {
        self.mirror_mask(|m| m.select_all || m.select_dst_port.iter().any(|p| p == name))
    }

    fn bridge_ports(&self) -> Vec<PortLayout> {
        self.sw.ports(&self.bridge).unwrap_or(&[]).to_vec()
    }

    /// True if the input port is a mirror output port (its packets are dropped).
    pub(super) fn in_port_is_mirror_output(&mut self) -> bool {
        let in_port = self.in_port();
        let Some(p) = self.port(in_port).cloned() else {
            return false;
        };
        if self.mirror_out(&p.name) != 0 {
            self.note(&format!(
                "dropping packet received on port {}, which is reserved exclusively for mirroring",
                p.name
            ));
            self.drop(DropReason::MirrorPort);
            return true;
        }
        false
    }

    /// Ingress mirroring (OVS `mirror_ingress_packet`).
    pub(super) fn mirror_ingress(&mut self) {
        if self.mirrors_cfg().is_empty() {
            return;
        }
        if let Some(p) = self.port(self.in_port()).cloned() {
            let m = self.mirror_src(&p.name);
            self.mirror_packet(&InBundle::Port(p), m);
        }
    }

    /// Egress mirroring after an output to `p`.
    pub(super) fn mirror_egress(&mut self, p: &PortLayout) {
        if self.mirrors_cfg().is_empty() {
            return;
        }
        let m = self.mirror_dst(&p.name);
        self.mirror_packet(&InBundle::Port(p.clone()), m);
    }

    /// OVS `mirror_packet`.
    fn mirror_packet(&mut self, b: &InBundle, mirrors: u32) {
        let vm = u128::from(VID_MASK | VLAN_CFI);
        self.wc
            .set(fields::VLAN_TCI, self.wc.get(fields::VLAN_TCI) | vm);
        let inx = xvlan_extract(&self.flow);
        if !input_vid_is_valid(b, inx[0].vid) {
            return;
        }
        let mut x = input_translate(b, &inx);
        let mut mirrors = mirrors & !self.mirrors;
        let cfgs: Vec<MirrorConfig> = self.mirrors_cfg().to_vec();
        while mirrors != 0 {
            let i = mirrors.trailing_zeros() as usize;
            let bit = 1u32 << i;
            let Some(m) = cfgs.get(i) else {
                mirrors &= !bit;
                continue;
            };
            if !m.select_vlan.is_empty() && !m.select_vlan.contains(&u32::from(x[0].vid)) {
                mirrors &= !bit;
                continue;
            }
            // This mirror and every mirror with the same destination are done.
            let dup = self
                .mirror_mask(|o| o.output_port == m.output_port && o.output_vlan == m.output_vlan);
            self.mirrors |= dup | bit;
            self.indent += 1;
            self.note(&format!("mirror {}", m.name));
            if let Some(out) = &m.output_port {
                if let Some(p) = self.bridge_ports().into_iter().find(|p| &p.name == out) {
                    self.output_normal(&p, &x, false);
                }
            } else if let Some(v) = m.output_vlan.and_then(|v| u16::try_from(v).ok()) {
                exact(&mut self.wc, fields::DL_DST);
                if x[0].vid != v && !is_reserved(self.flow.dl_dst()) {
                    let old = x[0].vid;
                    x[0].vid = v;
                    for p in self.bridge_ports() {
                        if includes_vlan(&p, &x) && self.mirror_out(&p.name) == 0 {
                            self.output_normal(&p, &x, false);
                        }
                    }
                    x[0].vid = old;
                }
            }
            self.indent -= 1;
            mirrors &= !self.mirrors;
        }
    }

    /// OVS `output_normal`: output to `p` with the VLANs `x` translated for it.
    fn output_normal(&mut self, p: &PortLayout, x: &XVlans, last: bool) {
        if p.vlan_mode == VlanMode::Dot1qTunnel && !p.cvlans.is_empty() {
            exact(&mut self.wc, fields::VLAN_TCI1);
        }
        // The output tags carry the packet's priority bits (and a priority-only tag exists
        // only if they are non-zero): they are consulted.
        if self.flow.vlan_tci() & VLAN_CFI != 0 {
            let m = self.wc.get(fields::VLAN_TCI) | u128::from(PCP_MASK | VID_MASK | VLAN_CFI);
            self.wc.set(fields::VLAN_TCI, m);
            if self.flow.vlan_tci1() & VLAN_CFI != 0 {
                exact(&mut self.wc, fields::VLAN_TCI1);
            }
        }
        let mut out = output_translate(p, x);
        if p.priority_tags != PriorityTags::Never {
            out[0].pcp = self.flow.vlan_tci() & PCP_MASK;
        }
        let saved: Vec<u128> = [
            fields::VLAN_TCI,
            fields::VLAN_TPID,
            fields::VLAN_TCI1,
            fields::VLAN_TPID1,
        ]
        .iter()
        .map(|f| self.flow.get(*f))
        .collect();
        self.vlans_touched = true;
        xvlan_put(&mut self.flow, &out, p.priority_tags);
        self.compose_output(p.ofport, last);
        for (f, v) in [
            fields::VLAN_TCI,
            fields::VLAN_TPID,
            fields::VLAN_TCI1,
            fields::VLAN_TPID1,
        ]
        .iter()
        .zip(saved)
        {
            self.flow.set(*f, v);
        }
    }

    /// OVS `is_gratuitous_arp`, with its wildcards.
    fn is_gratuitous_arp(&mut self) -> bool {
        if self.flow.dl_type() != 0x0806 {
            return false;
        }
        exact(&mut self.wc, fields::DL_DST);
        if self.flow.dl_dst() != 0xffff_ffff_ffff {
            return false;
        }
        exact(&mut self.wc, fields::NW_PROTO);
        match self.flow.nw_proto() {
            2 => true,
            1 => {
                exact(&mut self.wc, fields::NW_SRC);
                exact(&mut self.wc, fields::NW_DST);
                self.flow.nw_src() == self.flow.nw_dst()
            }
            _ => false,
        }
    }

    /// OVS `xlate_normal`.
    pub(super) fn normal(&mut self, last: bool) {
        self.deps.used_normal = true;
        exact(&mut self.wc, fields::DL_SRC);
        exact(&mut self.wc, fields::DL_DST);
        let vm = u128::from(VID_MASK | VLAN_CFI);
        self.wc
            .set(fields::VLAN_TCI, self.wc.get(fields::VLAN_TCI) | vm);
        let in_port = self.in_port();
        let in_b = match self.port(in_port).cloned() {
            Some(p) => InBundle::Port(p),
            None if in_port == OFPP_CONTROLLER || in_port == OFPP_NONE => InBundle::None,
            None => {
                self.note("no input bundle, dropping");
                self.drop(DropReason::InvalidVlan);
                return;
            }
        };
        if is_vlan_tpid(self.flow.dl_type()) && self.flow.vlan_tci() & VLAN_CFI == 0 {
            self.note("partial VLAN tag, dropping");
            self.drop(DropReason::InvalidVlan);
            return;
        }
        if let InBundle::Port(p) = &in_b {
            if self.mirror_out(&p.name) != 0 {
                self.note("input port is mirror output port, dropping");
                self.drop(DropReason::MirrorPort);
                return;
            }
        }
        let inx = xvlan_extract(&self.flow);
        if !input_vid_is_valid(&in_b, inx[0].vid) {
            self.note("disallowed VLAN VID for this input port, dropping");
            self.drop(DropReason::InvalidVlan);
            return;
        }
        let x = input_translate(&in_b, &inx);
        let vlan = x[0].vid;
        if is_reserved(self.flow.dl_dst()) {
            self.note("packet has reserved destination MAC, dropping");
            self.drop(DropReason::ReservedMac);
            return;
        }
        let grat = self.is_gratuitous_arp();
        let now = self.opts.now_ms / 1000;
        let src = self.flow.dl_src();
        let dst = self.flow.dl_dst();
        let learned = {
            let Some(br) = self.sw.bridge(&self.bridge) else {
                return;
            };
            let Ok(mut mac) = br.mac.lock() else {
                return;
            };
            if self.opts.learn && matches!(in_b, InBundle::Port(_)) && src & (1 << 40) == 0 {
                let learned = mac.learn(vlan, src, in_port, now, grat);
                if matches!(learned, Learned::New | Learned::Moved { .. }) {
                    self.sw.counters.mac_changed();
                }
            }
            mac.lookup(vlan, dst, now)
        };
        match learned {
            Some(port) => match self.port(port).cloned() {
                Some(p) if self.mirror_out(&p.name) != 0 => {
                    self.note("learned port is a mirror port, dropping");
                    self.drop(DropReason::MirrorPort);
                }
                Some(p) if p.ofport == in_port => {
                    self.note("learned port is input port, dropping");
                    self.drop(DropReason::LearnedInPort);
                }
                Some(p) => {
                    self.note(&format!("forwarding to learned port {}", p.name));
                    self.output_normal(&p, &x, last);
                }
                None => {
                    self.note("learned port is unknown, dropping");
                    self.drop(DropReason::NoPort);
                }
            },
            None => {
                self.note("no learned MAC for destination, flooding");
                let ports = self.bridge_ports();
                let targets: Vec<PortLayout> = ports
                    .into_iter()
                    .filter(|p| {
                        p.ofport != in_port
                            && includes_vlan(p, &x)
                            && !p.flags.no_flood
                            && self.mirror_out(&p.name) == 0
                    })
                    .collect();
                let n = targets.len();
                for (i, p) in targets.iter().enumerate() {
                    self.output_normal(p, &x, last && i + 1 == n);
                }
            }
        }
    }
}
