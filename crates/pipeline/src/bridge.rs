//! Bridge configuration: bridges, ports (with their kinds, VLAN modes and flags) and mirrors,
//! validated as a whole.
//!
//! This is the desired state that the control plane (`ovs-vsctl`-style commands, later the
//! daemon's config store) declares. [`SwitchConfig::validate`] checks it completely before
//! anything uses it, so a bad change (a mirror naming a missing port, a patch port without a
//! peer, two ports with one OpenFlow number) gets a clear error and the previous state stays
//! in force: callers edit a copy and swap it in only once it validates.
//!
//! # Port numbers
//!
//! Every port has an OpenFlow number (`ofport`): the requested one (`ofport_request`) or the
//! lowest free number from 1, assigned in the order ports were added. The bridge's own
//! internal port is `LOCAL` (0xfffe). Every non-patch port also has a datapath port number,
//! shared by all bridges (they share one datapath, as in OVS). In test mode
//! ([`DpNumbering::OvsDummy`]) these follow OVS's dummy datapath, so expected outputs from OVS's
//! test suite compare directly: `pN` → N, bridge `brK`'s own port → 100 + K; otherwise numbers
//! are assigned from 1 in order.
//!
//! # Example
//! ```
//! use pipeline::bridge::{BridgeConfig, PortConfig, SwitchConfig, VlanMode};
//! let mut sw = SwitchConfig::default();
//! let mut br = BridgeConfig::new("br0");
//! br.ports.push(PortConfig::new("p1"));
//! let mut p2 = PortConfig::new("p2");
//! p2.tag = Some(10);
//! br.ports.push(p2);
//! sw.bridges.push(br);
//! let layout = sw.validate().unwrap();
//! let p2 = layout.port("br0", "p2").unwrap();
//! assert_eq!(p2.ofport, 2);
//! assert_eq!(p2.vlan_mode, VlanMode::Access);
//! ```

use std::collections::{BTreeMap, BTreeSet};

/// OpenFlow number of a bridge's own internal port (`LOCAL`).
pub const OFPP_LOCAL: u16 = 0xfffe;
/// Largest OpenFlow port number a normal port may have (OpenFlow 1.0 `OFPP_MAX`).
pub const OFPP_MAX: u16 = 0xff00;

/// Configuration errors. Each names what is wrong and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Two bridges share a name.
    #[error("bridge {0} already exists")]
    DuplicateBridge(String),
    /// The named bridge does not exist.
    #[error("no bridge named {0}")]
    NoSuchBridge(String),
    /// Two ports (on any bridges) share a name.
    #[error("port {0} already exists")]
    DuplicatePort(String),
    /// The named port does not exist.
    #[error("no port named {0}")]
    NoSuchPort(String),
    /// Two ports of one bridge request one OpenFlow number.
    #[error("bridge {bridge}: ports {a} and {b} both request OpenFlow port {ofport}")]
    DuplicateOfport {
        /// Bridge.
        bridge: String,
        /// First port.
        a: String,
        /// Second port.
        b: String,
        /// The number.
        ofport: u16,
    },
    /// An OpenFlow port number outside 1..=0xff00.
    #[error("port {port}: ofport_request {ofport} is outside 1..65280")]
    BadOfport {
        /// Port.
        port: String,
        /// The number.
        ofport: u32,
    },
    /// A patch port without `options:peer`.
    #[error("patch port {0} has no peer (set options:peer=PORT)")]
    PatchWithoutPeer(String),
    /// A patch port whose peer is missing or is not a patch port pointing back.
    #[error("patch port {port}: peer {peer} {why}")]
    BadPatchPeer {
        /// Port.
        port: String,
        /// Its configured peer.
        peer: String,
        /// What is wrong with the peer.
        why: &'static str,
    },
    /// A VLAN id outside 0..=4095.
    #[error("port {port}: VLAN {vlan} is outside 0..4095")]
    BadVlan {
        /// Port or mirror.
        port: String,
        /// The VLAN.
        vlan: u32,
    },
    /// A mirror that names a missing port.
    #[error("mirror {mirror}: no port named {port} on bridge {bridge}")]
    MirrorPort {
        /// Mirror.
        mirror: String,
        /// Missing port.
        port: String,
        /// Bridge of the mirror.
        bridge: String,
    },
    /// A mirror with both or neither of output_port and output_vlan.
    #[error("mirror {0}: needs exactly one of output_port and output_vlan")]
    MirrorOutput(String),
    /// Any other invalid value.
    #[error("{0}")]
    Invalid(String),
}

/// What a bridge does on a table miss.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailMode {
    /// Drop (OVS `secure`; the default of OVS's test bridges).
    #[default]
    Secure,
    /// Behave as a learning switch: a hidden `priority=0,actions=NORMAL` flow.
    Standalone,
}

/// The kind of a port.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum PortKind {
    /// A test port with no I/O (OVS `dummy`), and the default.
    #[default]
    Dummy,
    /// The bridge's own internal port, or another internal port.
    Internal,
    /// A port on an in-memory netdev (tests).
    Memory,
    /// A Linux interface through AF_XDP.
    AfXdp,
    /// A Linux interface through AF_PACKET.
    AfPacket,
    /// A tap device.
    Tap,
    /// A patch port: output continues on the peer's bridge.
    Patch {
        /// The peer patch port's name (`options:peer`).
        peer: Option<String>,
    },
}

impl PortKind {
    /// Parses an `Interface type=` value.
    pub fn from_type(t: &str) -> Result<PortKind, ConfigError> {
        Ok(match t {
            "" | "dummy" | "system" => PortKind::Dummy,
            "internal" | "dummy-internal" => PortKind::Internal,
            "memory" => PortKind::Memory,
            "afxdp" => PortKind::AfXdp,
            "afpacket" => PortKind::AfPacket,
            "tap" => PortKind::Tap,
            "patch" => PortKind::Patch { peer: None },
            _ => return Err(ConfigError::Invalid(format!("unknown interface type {t}"))),
        })
    }
}

/// VLAN mode of a port (OVS `vlan_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum VlanMode {
    /// Untagged member of `tag`.
    Access,
    /// Tagged member of `trunks` (all VLANs if empty).
    #[default]
    Trunk,
    /// Trunk whose native VLAN `tag` is also sent tagged.
    NativeTagged,
    /// Trunk whose native VLAN `tag` is sent untagged.
    NativeUntagged,
    /// QinQ: every frame gets an outer tag `tag`; `cvlans` limits the customer VLANs.
    Dot1qTunnel,
}

impl VlanMode {
    /// Parses a `vlan_mode=` value.
    pub fn parse(s: &str) -> Result<VlanMode, ConfigError> {
        Ok(match s {
            "access" => VlanMode::Access,
            "trunk" => VlanMode::Trunk,
            "native-tagged" => VlanMode::NativeTagged,
            "native-untagged" => VlanMode::NativeUntagged,
            "dot1q-tunnel" => VlanMode::Dot1qTunnel,
            _ => return Err(ConfigError::Invalid(format!("unknown vlan_mode {s}"))),
        })
    }
}

/// OpenFlow port configuration flags (`ovs-ofctl mod-port`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PortFlags {
    /// Drop packets output to this port (`noforward`).
    pub no_forward: bool,
    /// Leave the port out of FLOOD (`noflood`).
    pub no_flood: bool,
    /// Drop packets received on this port (`noreceive`).
    pub no_receive: bool,
    /// Send no packet-ins for this port (`nopacket_in`).
    pub no_packet_in: bool,
    /// Administratively down (`down`).
    pub down: bool,
}

/// When NORMAL sends priority-tagged frames (`other_config:priority-tags`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PriorityTags {
    /// Never (the default).
    #[default]
    Never,
    /// When the priority is non-zero.
    IfNonzero,
    /// Always.
    Always,
}

/// One port's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PortConfig {
    /// Name, unique across all bridges.
    pub name: String,
    /// Kind.
    pub kind: PortKind,
    /// Requested OpenFlow number (`ofport_request`).
    pub ofport_request: Option<u32>,
    /// `tag`.
    pub tag: Option<u32>,
    /// `trunks` (empty = all VLANs).
    pub trunks: Vec<u32>,
    /// `vlan_mode`; unset means access with a tag, trunk without.
    pub vlan_mode: Option<VlanMode>,
    /// `cvlans` for dot1q-tunnel (empty = all).
    pub cvlans: Vec<u32>,
    /// `other_config:priority-tags`.
    pub priority_tags: PriorityTags,
    /// `other_config:qinq-ethtype`: true for 802.1Q (0x8100) outer tags, false for 802.1ad.
    pub qinq_8021q: bool,
    /// OpenFlow port flags.
    pub flags: PortFlags,
}

impl PortConfig {
    /// A dummy port with defaults.
    pub fn new(name: &str) -> Self {
        PortConfig {
            name: name.to_string(),
            ..Default::default()
        }
    }
}

/// One mirror's configuration (OVS `Mirror` table).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MirrorConfig {
    /// Name.
    pub name: String,
    /// Mirror every packet.
    pub select_all: bool,
    /// Mirror packets received on these ports.
    pub select_src_port: Vec<String>,
    /// Mirror packets sent to these ports.
    pub select_dst_port: Vec<String>,
    /// Only packets in these VLANs (empty = all).
    pub select_vlan: Vec<u32>,
    /// Send copies out of this port.
    pub output_port: Option<String>,
    /// Send copies to this VLAN (RSPAN).
    pub output_vlan: Option<u32>,
}

/// One bridge's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BridgeConfig {
    /// Name, unique.
    pub name: String,
    /// Table-miss behaviour.
    pub fail_mode: FailMode,
    /// Ports, in the order they were added (the bridge's own port is `local`).
    pub ports: Vec<PortConfig>,
    /// The bridge's own internal port (`LOCAL`, named like the bridge): its VLAN settings
    /// and flags.
    pub local: PortConfig,
    /// Mirrors.
    pub mirrors: Vec<MirrorConfig>,
    /// MAC learning: entries idle longer than this many seconds expire.
    pub mac_aging_secs: u32,
    /// MAC learning table size limit.
    pub mac_table_size: u32,
    /// Most VLAN tags parsed (OVS `other_config:vlan-limit`; 0 = no limit beyond the key's 2).
    pub vlan_limit: u32,
}

impl BridgeConfig {
    /// A bridge with OVS's defaults (secure, 300 s MAC aging, 2048 MAC entries).
    pub fn new(name: &str) -> Self {
        BridgeConfig {
            name: name.to_string(),
            fail_mode: FailMode::Secure,
            ports: Vec::new(),
            local: PortConfig {
                name: name.to_string(),
                kind: PortKind::Internal,
                ..PortConfig::default()
            },
            mirrors: Vec::new(),
            mac_aging_secs: 300,
            mac_table_size: 2048,
            vlan_limit: 1,
        }
    }
}

/// How datapath port numbers are assigned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DpNumbering {
    /// OVS's dummy datapath rule: `pN` → N, `brK` → 100 + K; others from 1000 up.
    #[default]
    OvsDummy,
    /// In order from 1.
    Sequential,
}

/// The whole switch: every bridge (they share one datapath).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SwitchConfig {
    /// Bridges.
    pub bridges: Vec<BridgeConfig>,
    /// Datapath numbering rule.
    pub dp_numbering: DpNumbering,
}

/// A validated port with its resolved numbers and mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortLayout {
    /// Name.
    pub name: String,
    /// Bridge.
    pub bridge: String,
    /// OpenFlow number.
    pub ofport: u16,
    /// Datapath number (`None` for patch ports).
    pub dp_port: Option<u32>,
    /// Kind (patch ports carry their peer).
    pub kind: PortKind,
    /// Resolved VLAN mode.
    pub vlan_mode: VlanMode,
    /// `tag` (the native or access VLAN).
    pub tag: Option<u16>,
    /// `trunks` (empty = all).
    pub trunks: BTreeSet<u16>,
    /// `cvlans` (empty = all).
    pub cvlans: BTreeSet<u16>,
    /// Priority tags.
    pub priority_tags: PriorityTags,
    /// QinQ outer tag 802.1Q instead of 802.1ad.
    pub qinq_8021q: bool,
    /// Flags.
    pub flags: PortFlags,
}

/// The result of validation: every port with its numbers, by bridge.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SwitchLayout {
    /// Ports by bridge name, each bridge's own port (`LOCAL`) first, then in added order.
    pub bridges: BTreeMap<String, Vec<PortLayout>>,
}

impl SwitchLayout {
    /// A port by bridge and name.
    pub fn port(&self, bridge: &str, name: &str) -> Option<&PortLayout> {
        self.bridges.get(bridge)?.iter().find(|p| p.name == name)
    }

    /// The port with datapath number `dp`, on any bridge.
    pub fn port_by_dp(&self, dp: u32) -> Option<&PortLayout> {
        self.bridges
            .values()
            .flatten()
            .find(|p| p.dp_port == Some(dp))
    }

    /// A port by name, on any bridge.
    pub fn port_by_name(&self, name: &str) -> Option<&PortLayout> {
        self.bridges.values().flatten().find(|p| p.name == name)
    }
}

fn vlan(port: &str, v: u32) -> Result<u16, ConfigError> {
    u16::try_from(v)
        .ok()
        .filter(|v| *v <= 4095)
        .ok_or_else(|| ConfigError::BadVlan {
            port: port.to_string(),
            vlan: v,
        })
}

/// The OVS dummy datapath's number for a port name: `pN` → N, `brK` → 100 + K.
fn dummy_dp_number(name: &str, is_bridge: bool) -> Option<u32> {
    let (prefix, base) = if is_bridge { ("br", 100) } else { ("p", 0) };
    let digits = name.strip_prefix(prefix)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u32>().ok().map(|n| n + base)
}

impl SwitchConfig {
    /// The bridge named `name`.
    pub fn bridge_mut(&mut self, name: &str) -> Result<&mut BridgeConfig, ConfigError> {
        self.bridges
            .iter_mut()
            .find(|b| b.name == name)
            .ok_or_else(|| ConfigError::NoSuchBridge(name.to_string()))
    }

    /// The port named `name` on any bridge (a bridge's name names its own port).
    pub fn port_mut(&mut self, name: &str) -> Result<&mut PortConfig, ConfigError> {
        self.bridges
            .iter_mut()
            .flat_map(|b| std::iter::once(&mut b.local).chain(b.ports.iter_mut()))
            .find(|p| p.name == name)
            .ok_or_else(|| ConfigError::NoSuchPort(name.to_string()))
    }

    /// Checks the whole configuration and resolves port numbers and VLAN modes.
    pub fn validate(&self) -> Result<SwitchLayout, ConfigError> {
        let mut names = BTreeSet::new();
        for b in &self.bridges {
            if !names.insert(b.name.as_str()) {
                return Err(ConfigError::DuplicateBridge(b.name.clone()));
            }
        }
        for p in self.bridges.iter().flat_map(|b| b.ports.iter()) {
            if !names.insert(p.name.as_str()) {
                return Err(ConfigError::DuplicatePort(p.name.clone()));
            }
        }
        for p in self.bridges.iter().flat_map(|b| b.ports.iter()) {
            if p.kind == (PortKind::Patch { peer: None }) {
                return Err(ConfigError::PatchWithoutPeer(p.name.clone()));
            }
        }
        let mut layout = SwitchLayout::default();
        let mut next_dp = match self.dp_numbering {
            DpNumbering::OvsDummy => 1000,
            DpNumbering::Sequential => 1,
        };
        let mut used_dp = BTreeSet::new();
        let mut assign_dp = |name: &str, is_bridge: bool| -> u32 {
            if self.dp_numbering == DpNumbering::OvsDummy {
                if let Some(n) = dummy_dp_number(name, is_bridge) {
                    if used_dp.insert(n) {
                        return n;
                    }
                }
            }
            while !used_dp.insert(next_dp) {
                next_dp += 1;
            }
            next_dp
        };
        for b in &self.bridges {
            let local = &b.local;
            let local_tag = local.tag.map(|t| vlan(&b.name, t)).transpose()?;
            let mut ports = vec![PortLayout {
                name: b.name.clone(),
                bridge: b.name.clone(),
                ofport: OFPP_LOCAL,
                dp_port: Some(assign_dp(&b.name, true)),
                kind: PortKind::Internal,
                vlan_mode: match local.vlan_mode {
                    Some(m) => m,
                    None if local_tag.is_some() => VlanMode::Access,
                    None => VlanMode::Trunk,
                },
                tag: local_tag,
                trunks: local
                    .trunks
                    .iter()
                    .map(|t| vlan(&b.name, *t))
                    .collect::<Result<BTreeSet<_>, _>>()?,
                cvlans: BTreeSet::new(),
                priority_tags: local.priority_tags,
                qinq_8021q: local.qinq_8021q,
                flags: local.flags,
            }];
            // Requested numbers first, then the lowest free numbers in added order.
            let mut taken: BTreeMap<u16, &str> = BTreeMap::new();
            for p in &b.ports {
                if let Some(req) = p.ofport_request {
                    let of = u16::try_from(req)
                        .ok()
                        .filter(|n| (1..=OFPP_MAX).contains(n))
                        .ok_or_else(|| ConfigError::BadOfport {
                            port: p.name.clone(),
                            ofport: req,
                        })?;
                    if let Some(other) = taken.insert(of, &p.name) {
                        return Err(ConfigError::DuplicateOfport {
                            bridge: b.name.clone(),
                            a: other.to_string(),
                            b: p.name.clone(),
                            ofport: of,
                        });
                    }
                }
            }
            let mut next_of = 1u16;
            for p in &b.ports {
                let ofport = match p.ofport_request.and_then(|r| u16::try_from(r).ok()) {
                    Some(of) => of,
                    None => {
                        while taken.contains_key(&next_of) {
                            next_of += 1;
                        }
                        taken.insert(next_of, &p.name);
                        next_of
                    }
                };
                let tag = p.tag.map(|t| vlan(&p.name, t)).transpose()?;
                let trunks = p
                    .trunks
                    .iter()
                    .map(|t| vlan(&p.name, *t))
                    .collect::<Result<BTreeSet<_>, _>>()?;
                let cvlans = p
                    .cvlans
                    .iter()
                    .map(|t| vlan(&p.name, *t))
                    .collect::<Result<BTreeSet<_>, _>>()?;
                let vlan_mode = match p.vlan_mode {
                    Some(m) => m,
                    None if tag.is_some() => VlanMode::Access,
                    None => VlanMode::Trunk,
                };
                if let PortKind::Patch { peer } = &p.kind {
                    let peer = peer
                        .as_ref()
                        .ok_or_else(|| ConfigError::PatchWithoutPeer(p.name.clone()))?;
                    let other = self
                        .bridges
                        .iter()
                        .flat_map(|b| b.ports.iter())
                        .find(|q| &q.name == peer);
                    match other {
                        None => {
                            return Err(ConfigError::BadPatchPeer {
                                port: p.name.clone(),
                                peer: peer.clone(),
                                why: "does not exist",
                            })
                        }
                        Some(q)
                            if q.kind
                                != (PortKind::Patch {
                                    peer: Some(p.name.clone()),
                                }) =>
                        {
                            return Err(ConfigError::BadPatchPeer {
                                port: p.name.clone(),
                                peer: peer.clone(),
                                why: "is not a patch port whose peer is this port",
                            })
                        }
                        Some(_) => {}
                    }
                }
                let dp_port = match p.kind {
                    PortKind::Patch { .. } => None,
                    _ => Some(assign_dp(&p.name, false)),
                };
                ports.push(PortLayout {
                    name: p.name.clone(),
                    bridge: b.name.clone(),
                    ofport,
                    dp_port,
                    kind: p.kind.clone(),
                    vlan_mode,
                    tag,
                    trunks,
                    cvlans,
                    priority_tags: p.priority_tags,
                    qinq_8021q: p.qinq_8021q,
                    flags: p.flags,
                });
            }
            for m in &b.mirrors {
                let on_bridge = |name: &String| -> Result<(), ConfigError> {
                    if ports.iter().any(|p| &p.name == name) {
                        Ok(())
                    } else {
                        Err(ConfigError::MirrorPort {
                            mirror: m.name.clone(),
                            port: name.clone(),
                            bridge: b.name.clone(),
                        })
                    }
                };
                m.select_src_port
                    .iter()
                    .chain(m.select_dst_port.iter())
                    .try_for_each(on_bridge)?;
                if let Some(out) = &m.output_port {
                    on_bridge(out)?;
                }
                if m.output_port.is_some() == m.output_vlan.is_some() {
                    return Err(ConfigError::MirrorOutput(m.name.clone()));
                }
                for v in m.select_vlan.iter().chain(m.output_vlan.iter()) {
                    vlan(&m.name, *v)?;
                }
            }
            layout.bridges.insert(b.name.clone(), ports);
        }
        Ok(layout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_bridges() -> SwitchConfig {
        let mut sw = SwitchConfig::default();
        let mut br0 = BridgeConfig::new("br0");
        let mut p1 = PortConfig::new("p1");
        p1.ofport_request = Some(1);
        br0.ports.push(p1);
        let mut patch = PortConfig::new("patch10");
        patch.kind = PortKind::Patch {
            peer: Some("patch20".into()),
        };
        patch.ofport_request = Some(10);
        br0.ports.push(patch);
        let mut br1 = BridgeConfig::new("br1");
        let mut patch = PortConfig::new("patch20");
        patch.kind = PortKind::Patch {
            peer: Some("patch10".into()),
        };
        br1.ports.push(patch);
        br1.ports.push(PortConfig::new("p2"));
        sw.bridges = vec![br0, br1];
        sw
    }

    #[test]
    fn validate_assigns_ovs_dummy_numbers() {
        let l = two_bridges().validate().unwrap();
        assert_eq!(l.port("br0", "br0").unwrap().dp_port, Some(100));
        assert_eq!(l.port("br1", "br1").unwrap().dp_port, Some(101));
        assert_eq!(l.port("br1", "p2").unwrap().dp_port, Some(2));
        assert_eq!(l.port("br1", "p2").unwrap().ofport, 2);
        assert_eq!(l.port("br0", "patch10").unwrap().dp_port, None);
        assert_eq!(l.port_by_dp(2).unwrap().name, "p2");
    }

    #[test]
    fn validate_patch_without_peer_is_error() {
        let mut sw = two_bridges();
        sw.port_mut("patch20").unwrap().kind = PortKind::Patch { peer: None };
        assert_eq!(
            sw.validate(),
            Err(ConfigError::PatchWithoutPeer("patch20".into()))
        );
        let mut sw = two_bridges();
        sw.port_mut("patch20").unwrap().kind = PortKind::Patch {
            peer: Some("p1".into()),
        };
        assert!(matches!(
            sw.validate(),
            Err(ConfigError::BadPatchPeer { .. })
        ));
    }

    #[test]
    fn validate_mirror_missing_port_is_error() {
        let mut sw = two_bridges();
        sw.bridges[0].mirrors.push(MirrorConfig {
            name: "m".into(),
            select_all: true,
            output_port: Some("p9".into()),
            ..Default::default()
        });
        assert!(matches!(sw.validate(), Err(ConfigError::MirrorPort { .. })));
    }

    #[test]
    fn validate_duplicate_ofport_and_names_are_errors() {
        let mut sw = two_bridges();
        sw.port_mut("patch10").unwrap().ofport_request = Some(1);
        assert!(matches!(
            sw.validate(),
            Err(ConfigError::DuplicateOfport { .. })
        ));
        let mut sw = two_bridges();
        sw.bridges[1].ports.push(PortConfig::new("p1"));
        assert_eq!(sw.validate(), Err(ConfigError::DuplicatePort("p1".into())));
        let mut sw = two_bridges();
        sw.port_mut("p1").unwrap().tag = Some(4096);
        assert!(matches!(sw.validate(), Err(ConfigError::BadVlan { .. })));
    }
}
