//! A seeded generator of differential-test cases, and a minimizer for the ones that fail.
//!
//! A [`DiffCase`] is a small bridge `br0` (fail mode `secure` or `standalone`, 2–6 dummy ports
//! `pN` with OpenFlow and datapath port `N`, some of them VLAN access or trunk ports), 1–20
//! flows in ovs-ofctl syntax over 1–4 tables, and 1–5 packets in OVS datapath flow-key
//! syntax, traced on the datapath (`ovs-dummy`).
//!
//! # Determinism
//! [`generate`] derives the case's own seed from the run seed and the case number
//! ([`case_seed`]) and draws everything from a `StdRng` seeded with it, so a case is
//! reproducible from `(run seed, case number)` alone, or from its printed seed with
//! [`generate_from_seed`]. The stream is stable for a given `rand` version (pinned by
//! `Cargo.lock`).
//!
//! # What is generated
//! - Matches mix `in_port`, `dl_src`/`dl_dst` with and without masks, `dl_vlan`, `vlan_tci` masks,
//!   `dl_vlan_pcp`, `dl_type` (through `ip`, `tcp`, `arp`, `ipv6`…), `nw_src`/`nw_dst` with CIDR
//!   and arbitrary masks, `nw_proto`, `nw_tos`, `tp_src`/`tp_dst` with masks, `tcp_flags`,
//!   `icmp_type`, `arp_spa`/`arp_tpa`, `ipv6_src`/`ipv6_dst`, `metadata` and `reg0`–`reg3`, with
//!   priorities drawn from a small set so ties happen.
//! - Actions: `output:N`, `resubmit(,T)`, `resubmit(N,T)`, `goto_table:T` (only to a later table),
//!   `set_field`/`load` to registers and metadata, `mod_vlan_vid`, `mod_vlan_pcp`, `push_vlan`,
//!   `pop_vlan`, `strip_vlan`, `mod_dl_src`/`mod_dl_dst`, `mod_nw_src`/`mod_nw_dst`, `mod_tp_src`,
//!   `dec_ttl`, `NORMAL`, `FLOOD`, `ALL`, `IN_PORT`, `LOCAL` and `drop`. Action prerequisites hold
//!   (`mod_nw_src` only on IPv4 flows, `mod_tp_src` only on TCP/UDP), and resubmits only go
//!   forward, so translation always terminates.
//! - Half of the cases are loaded with `ovs-ofctl -O OpenFlow13` ([`DiffCase::ofctl_options`]), the
//!   others with ovs-ofctl's default (OpenFlow 1.0 + NXM). Only the former use `push_vlan` and
//!   `goto_table`, which OpenFlow 1.0 cannot express, and in them `pop_vlan`/ `strip_vlan` only act
//!   on packets known to be tagged, as OVS requires of OpenFlow 1.1+ action lists. The system under
//!   test receives the same options, since OVS's meaning of `mod_vlan_vid` (push a tag if needed or
//!   not) depends on them.
//! - Packets draw their addresses, ports, VLANs and protocols from the same small pools as the
//!   flows, and most copy the in-port, VLAN and protocol of a random flow, so rules hit.
//!
//! # Minimizing
//! [`minimize`] removes packets, then flows, by delta debugging (Zeller's ddmin) as long as
//! a caller-supplied predicate ("still mismatches") holds, and returns a 1-minimal case.

use std::fmt::Write as _;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::compare::split_actions;
use crate::ovs::{add_of_port_args, shell_join, shell_quote, DUMMY_DATAPATH, OF_PROTOCOLS};

/// The bridge every generated case uses.
pub const BRIDGE: &str = "br0";

/// The datapath port number of `br0`'s internal port under the dummy datapath.
pub const LOCAL_DP_PORT: u32 = 100;

/// What a bridge does on a table miss.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FailMode {
    /// A miss drops the packet.
    Secure,
    /// A bridge without flows acts as a learning switch (`NORMAL`).
    Standalone,
}

impl FailMode {
    /// `secure` or `standalone`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Secure => "secure",
            Self::Standalone => "standalone",
        }
    }
}

/// A port's VLAN configuration (the Port row's `tag` and `trunks`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PortVlan {
    /// No VLAN configuration: a trunk of all VLANs.
    None,
    /// An access port in this VLAN.
    Access(u16),
    /// A trunk of these VLANs.
    Trunk(Vec<u16>),
}

/// One dummy port `pN`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortSetup {
    /// `N`: the name's digits, the OpenFlow port and the datapath port.
    pub ofport: u32,
    /// Its VLAN configuration.
    pub vlan: PortVlan,
}

/// The bridge of a case.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BridgeSetup {
    /// The fail mode.
    pub fail_mode: FailMode,
    /// The ports, in ascending port order.
    pub ports: Vec<PortSetup>,
}

impl BridgeSetup {
    /// The `ovs-vsctl` words that follow OVS's test-macro `add-br br0` in the same
    /// transaction: the fail mode and the ports (see `OvsReference::add_bridge`).
    pub fn vsctl_args(&self) -> Vec<String> {
        let mut args = vec!["set".to_owned(), "bridge".to_owned(), BRIDGE.to_owned()];
        args.push(format!("fail-mode={}", self.fail_mode.as_str()));
        for port in &self.ports {
            let settings = match &port.vlan {
                PortVlan::None => vec![],
                PortVlan::Access(tag) => vec![format!("tag={tag}")],
                PortVlan::Trunk(vlans) => {
                    let list: Vec<String> = vlans.iter().map(u16::to_string).collect();
                    vec![format!("trunks={}", list.join(","))]
                }
            };
            args.extend(add_of_port_args(BRIDGE, port.ofport, &settings));
        }
        args
    }
}

/// One generated differential case.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiffCase {
    /// The case's own seed ([`generate_from_seed`] rebuilds the case from it).
    pub seed: u64,
    /// The bridge.
    pub bridge: BridgeSetup,
    /// Options for `ovs-ofctl add-flows`, e.g. `["-O", "OpenFlow13"]`.
    pub ofctl_options: Vec<String>,
    /// The flows, in ovs-ofctl syntax, added in order.
    pub flows: Vec<String>,
    /// The packets, in OVS datapath flow-key syntax, traced on `ovs-dummy` one by one.
    pub packets: Vec<String>,
}

impl DiffCase {
    /// Where the packets are traced: the dummy datapath.
    pub fn trace_target(&self) -> &'static str {
        DUMMY_DATAPATH
    }

    /// Shell commands that rebuild the case on an OVS started with `--enable-dummy` (with
    /// `OVS_RUNDIR` etc. set) and trace every packet.
    pub fn to_reproducer(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "# ferrovs-difftest case, seed {:#018x}", self.seed);
        let mut vsctl: Vec<String> = [
            "ovs-vsctl",
            "--",
            "add-br",
            BRIDGE,
            "--",
            "set",
            "bridge",
            BRIDGE,
        ]
        .map(str::to_owned)
        .into();
        vsctl.extend(
            [
                "datapath-type=dummy",
                "fail-mode=secure",
                "other-config:datapath-id=fedcba9876543210",
                "other-config:hwaddr=aa:55:aa:55:00:00",
                OF_PROTOCOLS,
                "--",
            ]
            .map(str::to_owned),
        );
        vsctl.extend(self.bridge.vsctl_args());
        let _ = writeln!(
            out,
            "{}",
            shell_join(&vsctl).replace(" -- ", " \\\n    -- ")
        );
        let mut ofctl = vec!["ovs-ofctl".to_owned()];
        ofctl.extend(self.ofctl_options.iter().cloned());
        ofctl.extend(["add-flows", BRIDGE, "-"].map(str::to_owned));
        let _ = writeln!(out, "{} <<'EOF'", shell_join(&ofctl));
        for flow in &self.flows {
            let _ = writeln!(out, "{flow}");
        }
        let _ = writeln!(out, "EOF");
        for packet in &self.packets {
            let _ = writeln!(
                out,
                "ovs-appctl ofproto/trace {} {}",
                self.trace_target(),
                shell_quote(packet)
            );
        }
        out
    }
}

/// The seed of case `case_number` in a run seeded with `run_seed` (SplitMix64 of both).
pub fn case_seed(run_seed: u64, case_number: u64) -> u64 {
    let mut z = run_seed ^ case_number.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Generates case `case_number` of the run seeded with `run_seed`.
pub fn generate(run_seed: u64, case_number: u64) -> DiffCase {
    generate_from_seed(case_seed(run_seed, case_number))
}

/// Generates the case whose own seed is `seed`.
pub fn generate_from_seed(seed: u64) -> DiffCase {
    let mut case = Gen::new(seed).case();
    case.seed = seed;
    case
}

/// The protocol a flow matches on or a packet carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Proto {
    Any,
    Other(u16),
    Ip,
    Tcp,
    Udp,
    Icmp,
    Arp,
    Ipv6,
    Tcp6,
    Udp6,
    Icmp6,
}

impl Proto {
    fn keyword(self) -> Option<String> {
        Some(match self {
            Self::Any => return None,
            Self::Other(t) => format!("dl_type={t:#06x}"),
            Self::Ip => "ip".into(),
            Self::Tcp => "tcp".into(),
            Self::Udp => "udp".into(),
            Self::Icmp => "icmp".into(),
            Self::Arp => "arp".into(),
            Self::Ipv6 => "ipv6".into(),
            Self::Tcp6 => "tcp6".into(),
            Self::Udp6 => "udp6".into(),
            Self::Icmp6 => "icmp6".into(),
        })
    }

    fn is_ipv4(self) -> bool {
        matches!(self, Self::Ip | Self::Tcp | Self::Udp | Self::Icmp)
    }

    fn is_ipv6(self) -> bool {
        matches!(self, Self::Ipv6 | Self::Tcp6 | Self::Udp6 | Self::Icmp6)
    }

    fn has_ports(self) -> bool {
        matches!(self, Self::Tcp | Self::Udp | Self::Tcp6 | Self::Udp6)
    }

    fn is_tcp(self) -> bool {
        matches!(self, Self::Tcp | Self::Tcp6)
    }
}

/// The per-case value pools that flows and packets share.
#[derive(Debug)]
struct Pools {
    ports: Vec<u32>,
    macs: Vec<String>,
    ipv4: Vec<[u8; 4]>,
    ipv6: Vec<String>,
    vlans: Vec<u16>,
    l4: Vec<u16>,
    tos: Vec<u8>,
}

/// A flow's choices that packets copy to hit it.
#[derive(Debug, Clone)]
struct FlowShape {
    proto: Proto,
    in_port: Option<u32>,
    vlan: Option<u16>,
}

#[derive(Debug)]
struct Gen {
    rng: StdRng,
    pools: Pools,
    shapes: Vec<FlowShape>,
}

const PRIORITIES: [u16; 7] = [0, 1, 10, 100, 100, 1000, 32768];
const PROTOS: [Proto; 13] = [
    Proto::Any,
    Proto::Any,
    Proto::Ip,
    Proto::Tcp,
    Proto::Tcp,
    Proto::Udp,
    Proto::Icmp,
    Proto::Arp,
    Proto::Ipv6,
    Proto::Tcp6,
    Proto::Udp6,
    Proto::Icmp6,
    Proto::Other(0x1234),
];

impl Gen {
    fn new(seed: u64) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        let n_ports = rng.gen_range(2..=6);
        let mut ports: Vec<u32> = (1..=8)
            .collect::<Vec<_>>()
            .choose_multiple(&mut rng, n_ports)
            .copied()
            .collect();
        ports.sort_unstable();
        let mut macs: Vec<String> = (0..3)
            .map(|_| format!("50:54:00:00:00:{:02x}", rng.gen_range(1..=0x0f)))
            .collect();
        macs.push("ff:ff:ff:ff:ff:ff".into());
        macs.push("01:00:5e:00:00:01".into());
        let ipv4 = (0..4)
            .map(|_| {
                let first = *[10u8, 192, 172].choose(&mut rng).expect("non-empty");
                let second = if first == 192 {
                    168
                } else {
                    rng.gen_range(0..2)
                };
                [first, second, rng.gen_range(0..3), rng.gen_range(1..10)]
            })
            .collect();
        let ipv6 = (0..3)
            .map(|_| {
                let prefix = *["2001:db8::", "2001:db8:0:1::", "fe80::"]
                    .choose(&mut rng)
                    .expect("non-empty");
                format!("{prefix}{:x}", rng.gen_range(1..16))
            })
            .collect();
        let vlans = [10, 20, 30, 100, 4094]
            .choose_multiple(&mut rng, 3)
            .copied()
            .collect();
        let mut l4: Vec<u16> = [22, 53, 80, 443, 8080]
            .choose_multiple(&mut rng, 3)
            .copied()
            .collect();
        l4.push(rng.gen_range(1024..=65535));
        let tos = vec![0, 0x20, 0xb8];
        Self {
            rng,
            pools: Pools {
                ports,
                macs,
                ipv4,
                ipv6,
                vlans,
                l4,
                tos,
            },
            shapes: Vec::new(),
        }
    }

    fn chance(&mut self, p: f64) -> bool {
        self.rng.gen_bool(p)
    }

    fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items
            .choose(&mut self.rng)
            .expect("pools are never empty")
            .clone()
    }

    fn case(mut self) -> DiffCase {
        let fail_mode = if self.chance(0.5) {
            FailMode::Secure
        } else {
            FailMode::Standalone
        };
        let ports = self.pools.ports.clone();
        let port_setups = ports
            .iter()
            .map(|&ofport| {
                let vlan = match self.rng.gen_range(0..10) {
                    0..=5 => PortVlan::None,
                    6..=8 => PortVlan::Access(pick(&mut self.rng, &self.pools.vlans)),
                    _ => {
                        let n = self.rng.gen_range(1..=2);
                        let mut v: Vec<u16> = self
                            .pools
                            .vlans
                            .choose_multiple(&mut self.rng, n)
                            .copied()
                            .collect();
                        v.sort_unstable();
                        PortVlan::Trunk(v)
                    }
                };
                PortSetup { ofport, vlan }
            })
            .collect();
        let n_tables = self.rng.gen_range(1..=4u8);
        let n_flows = self.rng.gen_range(1..=20);
        let of13 = self.chance(0.5);
        let flows: Vec<String> = (0..n_flows)
            .map(|_| {
                let table = self.rng.gen_range(0..n_tables);
                self.flow(table, n_tables, of13)
            })
            .collect();
        let n_packets = self.rng.gen_range(1..=5);
        let packets = (0..n_packets).map(|_| self.packet()).collect();
        let ofctl_options = if of13 {
            vec!["-O".to_owned(), "OpenFlow13".to_owned()]
        } else {
            Vec::new()
        };
        DiffCase {
            seed: 0,
            bridge: BridgeSetup {
                fail_mode,
                ports: port_setups,
            },
            ofctl_options,
            flows,
            packets,
        }
    }

    fn mac_match(&mut self, field: &str) -> String {
        let mac = pick(&mut self.rng, &self.pools.macs);
        match self.rng.gen_range(0..4) {
            0 => format!("{field}={mac}/ff:ff:ff:ff:ff:f0"),
            1 => format!("{field}=01:00:00:00:00:00/01:00:00:00:00:00"),
            2 => format!("{field}=00:00:00:00:00:00/01:00:00:00:00:00"),
            _ => format!("{field}={mac}"),
        }
    }

    fn ipv4_match(&mut self, field: &str) -> String {
        let a = pick(&mut self.rng, &self.pools.ipv4);
        let ip = format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3]);
        match self.rng.gen_range(0..6) {
            0 => format!("{field}={}.0.0.0/8", a[0]),
            1 => format!("{field}={}.{}.0.0/16", a[0], a[1]),
            2 => format!("{field}={}.{}.{}.0/24", a[0], a[1], a[2]),
            3 => format!("{field}={ip}/255.0.0.255"),
            4 => format!("{field}={ip}/{}", self.rng.gen_range(9..=31)),
            _ => format!("{field}={ip}"),
        }
    }

    fn ipv6_match(&mut self, field: &str) -> String {
        let a = pick(&mut self.rng, &self.pools.ipv6);
        match self.rng.gen_range(0..4) {
            0 => format!("{field}=2001:db8::/32"),
            1 => format!("{field}={a}/64"),
            2 => format!("{field}={a}/ffff:ffff::ffff"),
            _ => format!("{field}={a}"),
        }
    }

    fn l4_match(&mut self, field: &str) -> String {
        let port = pick(&mut self.rng, &self.pools.l4);
        match self.rng.gen_range(0..4) {
            0 => format!("{field}={:#x}/0xfff0", port & 0xfff0),
            1 => format!("{field}=0x0/0xfc00"),
            _ => format!("{field}={port}"),
        }
    }

    fn flow(&mut self, table: u8, n_tables: u8, of13: bool) -> String {
        let mut m: Vec<String> = Vec::new();
        if table != 0 || self.chance(0.3) {
            m.push(format!("table={table}"));
        }
        let priority = self.pick(&PRIORITIES);
        if priority != 32768 || self.chance(0.5) {
            m.push(format!("priority={priority}"));
        }
        let proto = self.pick(&PROTOS);
        m.extend(proto.keyword());
        let mut shape = FlowShape {
            proto,
            in_port: None,
            vlan: None,
        };
        if self.chance(0.4) {
            let p = pick(&mut self.rng, &self.pools.ports);
            shape.in_port = Some(p);
            m.push(format!("in_port={p}"));
        }
        if self.chance(0.25) {
            m.push(self.mac_match("dl_src"));
        }
        if self.chance(0.25) {
            m.push(self.mac_match("dl_dst"));
        }
        match self.rng.gen_range(0..10) {
            0 | 1 => {
                let v = pick(&mut self.rng, &self.pools.vlans);
                shape.vlan = Some(v);
                m.push(format!("dl_vlan={v}"));
            }
            2 => m.push("vlan_tci=0x0000/0x1000".into()),
            3 => m.push("vlan_tci=0x1000/0x1000".into()),
            4 => m.push(format!("dl_vlan_pcp={}", self.rng.gen_range(0..8))),
            _ => {}
        }
        if proto.is_ipv4() {
            if self.chance(0.4) {
                m.push(self.ipv4_match("nw_src"));
            }
            if self.chance(0.5) {
                m.push(self.ipv4_match("nw_dst"));
            }
            if proto == Proto::Ip && self.chance(0.3) {
                m.push(format!("nw_proto={}", self.pick(&[1, 6, 17, 47])));
            }
            if self.chance(0.15) {
                m.push(format!("nw_tos={}", pick(&mut self.rng, &self.pools.tos)));
            }
        }
        if proto.is_ipv6() {
            if self.chance(0.4) {
                m.push(self.ipv6_match("ipv6_src"));
            }
            if self.chance(0.4) {
                m.push(self.ipv6_match("ipv6_dst"));
            }
        }
        if proto.has_ports() {
            if self.chance(0.3) {
                m.push(self.l4_match("tp_src"));
            }
            if self.chance(0.4) {
                m.push(self.l4_match("tp_dst"));
            }
        }
        if proto.is_tcp() && self.chance(0.25) {
            m.push(format!(
                "tcp_flags={}",
                self.pick(&["+syn", "+syn-ack", "+ack", "-syn", "0x002/0x012", "+fin"])
            ));
        }
        if proto == Proto::Icmp && self.chance(0.4) {
            m.push(format!("icmp_type={}", self.pick(&[0, 8])));
        }
        if proto == Proto::Icmp6 && self.chance(0.4) {
            m.push(format!("icmp_type={}", self.pick(&[128, 129])));
        }
        if proto == Proto::Arp {
            if self.chance(0.4) {
                m.push(self.ipv4_match("arp_tpa"));
            }
            if self.chance(0.2) {
                m.push(self.ipv4_match("arp_spa"));
            }
            if self.chance(0.3) {
                m.push(format!("arp_op={}", self.pick(&[1, 2])));
            }
        }
        if table > 0 && self.chance(0.3) {
            m.push(self.pick(&[
                "metadata=0x1".to_owned(),
                "metadata=0x1/0x1".to_owned(),
                "metadata=0/0xff".to_owned(),
            ]));
        }
        for r in 0..4 {
            if self.chance(if table > 0 { 0.15 } else { 0.04 }) {
                let v = self.rng.gen_range(0..4u32);
                m.push(if self.chance(0.5) {
                    format!("reg{r}={v}")
                } else {
                    format!("reg{r}={v:#x}/0x3")
                });
            }
        }
        // `dl_vlan_pcp` matches only tagged packets too.
        let tagged = shape.vlan.is_some()
            || m.iter()
                .any(|f| f == "vlan_tci=0x1000/0x1000" || f.starts_with("dl_vlan_pcp="));
        let actions = self.actions(proto, table, n_tables, of13, tagged);
        self.shapes.push(shape);
        format!("{},actions={}", m.join(","), actions)
    }

    /// An action list. Under OpenFlow 1.3 (`of13`), OVS requires actions to be consistent
    /// with the match: `pop_vlan` only on a packet known to be tagged and `push_vlan` only
    /// below two known tags (`tags` counts them from the match, updated as the actions push
    /// and pop). OpenFlow 1.0 has no `push_vlan` or `goto_table`.
    fn actions(
        &mut self,
        proto: Proto,
        table: u8,
        n_tables: u8,
        of13: bool,
        tagged: bool,
    ) -> String {
        let mut tags = u8::from(tagged);
        if self.chance(0.08) {
            return "drop".into();
        }
        let n = self.rng.gen_range(1..=4);
        let mut acts: Vec<String> = Vec::new();
        for _ in 0..n {
            let later_table =
                (table + 1 < n_tables).then(|| self.rng.gen_range(table + 1..n_tables));
            let act = match self.rng.gen_range(0..22) {
                0..=4 => format!("output:{}", pick(&mut self.rng, &self.pools.ports)),
                5 => "NORMAL".into(),
                6 => self.pick(&["FLOOD", "ALL", "IN_PORT", "LOCAL"]).to_owned(),
                7 | 8 => match later_table {
                    Some(t) if self.chance(0.3) => {
                        format!("resubmit({},{t})", pick(&mut self.rng, &self.pools.ports))
                    }
                    Some(t) => format!("resubmit(,{t})"),
                    None => "NORMAL".into(),
                },
                9 => {
                    tags = tags.max(1);
                    format!("mod_vlan_vid:{}", pick(&mut self.rng, &self.pools.vlans))
                }
                10 => {
                    tags = tags.max(1);
                    format!("mod_vlan_pcp:{}", self.rng.gen_range(0..8))
                }
                11 if of13 && tags < 2 => {
                    tags += 1;
                    "push_vlan:0x8100".into()
                }
                11 | 12 if tags > 0 || !of13 => {
                    tags = tags.saturating_sub(1);
                    self.pick(&["pop_vlan", "strip_vlan"]).to_owned()
                }
                13 => format!("mod_dl_src:{}", pick(&mut self.rng, &self.pools.macs[..3])),
                14 => format!("mod_dl_dst:{}", pick(&mut self.rng, &self.pools.macs)),
                15 if proto.is_ipv4() => {
                    let a = pick(&mut self.rng, &self.pools.ipv4);
                    let field = self.pick(&["mod_nw_src", "mod_nw_dst"]);
                    format!("{field}:{}.{}.{}.{}", a[0], a[1], a[2], a[3])
                }
                16 if proto.has_ports() && !proto.is_ipv6() => {
                    format!("mod_tp_src:{}", pick(&mut self.rng, &self.pools.l4))
                }
                17 if proto.is_ipv4() || proto.is_ipv6() => "dec_ttl".into(),
                18 => format!(
                    "set_field:{}->reg{}",
                    self.rng.gen_range(0..4),
                    self.rng.gen_range(0..4)
                ),
                19 => match self.rng.gen_range(0..3) {
                    0 => format!(
                        "load:{:#x}->NXM_NX_REG{}[]",
                        self.rng.gen_range(0..4),
                        self.rng.gen_range(0..4)
                    ),
                    1 => format!(
                        "load:{}->NXM_NX_REG{}[0..1]",
                        self.rng.gen_range(0..4),
                        self.rng.gen_range(0..4)
                    ),
                    _ => format!("set_field:{:#x}->metadata", self.rng.gen_range(0..4)),
                },
                _ => format!("output:{}", pick(&mut self.rng, &self.pools.ports)),
            };
            acts.push(act);
        }
        if of13 && table + 1 < n_tables && self.chance(0.2) {
            acts.push(format!(
                "goto_table:{}",
                self.rng.gen_range(table + 1..n_tables)
            ));
        }
        acts.join(",")
    }

    fn ipv4(&mut self) -> String {
        let a = pick(&mut self.rng, &self.pools.ipv4);
        if self.chance(0.1) {
            return format!(
                "{}.{}.{}.{}",
                a[0],
                a[1],
                a[2],
                self.rng.gen_range(10..=254)
            );
        }
        format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3])
    }

    fn packet(&mut self) -> String {
        let shape = if !self.shapes.is_empty() && self.chance(0.7) {
            Some(pick(&mut self.rng, &self.shapes))
        } else {
            None
        };
        let in_port = match shape.as_ref().and_then(|s| s.in_port) {
            Some(p) if self.chance(0.8) => p,
            _ if self.chance(0.08) => LOCAL_DP_PORT,
            _ => pick(&mut self.rng, &self.pools.ports),
        };
        let vlan = match shape.as_ref().and_then(|s| s.vlan) {
            Some(v) if self.chance(0.8) => Some(v),
            _ if self.chance(0.3) => Some(pick(&mut self.rng, &self.pools.vlans)),
            _ => None,
        };
        let proto = match shape.as_ref().map(|s| s.proto) {
            Some(p) if p != Proto::Any && self.chance(0.85) => p,
            _ => self.pick(&PROTOS[2..]),
        };
        let proto = if proto == Proto::Ip {
            self.pick(&[Proto::Tcp, Proto::Udp, Proto::Icmp, Proto::Ip])
        } else {
            proto
        };
        let proto = if proto == Proto::Ipv6 {
            self.pick(&[Proto::Tcp6, Proto::Udp6, Proto::Icmp6])
        } else {
            proto
        };
        let src = pick(&mut self.rng, &self.pools.macs[..3]);
        let dst = pick(&mut self.rng, &self.pools.macs);
        let inner = self.packet_l3(proto);
        let mut out = format!("in_port({in_port}),eth(src={src},dst={dst}),");
        match vlan {
            Some(vid) => {
                let pcp = if self.chance(0.7) {
                    0
                } else {
                    self.rng.gen_range(1..8)
                };
                let _ = write!(
                    out,
                    "eth_type(0x8100),vlan(vid={vid},pcp={pcp}),encap({inner})"
                );
            }
            None => out.push_str(&inner),
        }
        out
    }

    fn packet_l3(&mut self, proto: Proto) -> String {
        let ttl = self.pick(&[64, 64, 64, 128, 2, 1]);
        let tos = pick(&mut self.rng, &self.pools.tos);
        let l4 = |g: &mut Self, name: &str| {
            let s = pick(&mut g.rng, &g.pools.l4);
            let d = pick(&mut g.rng, &g.pools.l4);
            format!("{name}(src={s},dst={d})")
        };
        match proto {
            Proto::Tcp | Proto::Udp | Proto::Icmp | Proto::Ip => {
                let (num, tail) = match proto {
                    Proto::Tcp => {
                        let mut t = l4(self, "tcp");
                        if self.chance(0.7) {
                            let flags: u16 = self.pick(&[0x002, 0x010, 0x012, 0x011, 0x004, 0x018]);
                            let _ = write!(t, ",tcp_flags({flags:#05x})");
                        }
                        (6, Some(t))
                    }
                    Proto::Udp => (17, Some(l4(self, "udp"))),
                    Proto::Icmp => (1, Some(format!("icmp(type={},code=0)", self.pick(&[0, 8])))),
                    _ => (47, None),
                };
                let (s, d) = (self.ipv4(), self.ipv4());
                let mut out =
                    format!("eth_type(0x0800),ipv4(src={s},dst={d},proto={num},tos={tos},ttl={ttl},frag=no)");
                if let Some(t) = tail {
                    out.push(',');
                    out.push_str(&t);
                }
                out
            }
            Proto::Tcp6 | Proto::Udp6 | Proto::Icmp6 | Proto::Ipv6 => {
                let (num, tail) = match proto {
                    Proto::Udp6 => (17, l4(self, "udp")),
                    Proto::Icmp6 => (
                        58,
                        format!("icmpv6(type={},code=0)", self.pick(&[128, 129])),
                    ),
                    _ => (6, l4(self, "tcp")),
                };
                let s = pick(&mut self.rng, &self.pools.ipv6);
                let d = pick(&mut self.rng, &self.pools.ipv6);
                format!(
                    "eth_type(0x86dd),ipv6(src={s},dst={d},label=0,proto={num},tclass={tos},hlimit={ttl},frag=no),{tail}"
                )
            }
            Proto::Arp => {
                let (s, t) = (self.ipv4(), self.ipv4());
                let op = self.pick(&[1, 2]);
                let sha = pick(&mut self.rng, &self.pools.macs[..3]);
                format!(
                    "eth_type(0x0806),arp(sip={s},tip={t},op={op},sha={sha},tha=00:00:00:00:00:00)"
                )
            }
            Proto::Other(t) => format!("eth_type({t:#06x})"),
            Proto::Any => "eth_type(0x1234)".into(),
        }
    }
}

/// A random element of a non-empty slice.
fn pick<T: Clone>(rng: &mut StdRng, items: &[T]) -> T {
    items
        .choose(rng)
        .expect("pools and choice lists are never empty")
        .clone()
}

/// The match keywords (no `=`) the generator and the syntax check know.
const KEYWORDS: [&str; 9] = [
    "ip", "tcp", "udp", "icmp", "arp", "ipv6", "tcp6", "udp6", "icmp6",
];

/// The match fields (`name=value`) the generator and the syntax check know.
const FIELDS: [&str; 27] = [
    "table",
    "priority",
    "in_port",
    "dl_src",
    "dl_dst",
    "dl_vlan",
    "vlan_tci",
    "dl_vlan_pcp",
    "dl_type",
    "nw_src",
    "nw_dst",
    "nw_proto",
    "nw_tos",
    "tp_src",
    "tp_dst",
    "tcp_flags",
    "icmp_type",
    "arp_spa",
    "arp_tpa",
    "arp_op",
    "ipv6_src",
    "ipv6_dst",
    "metadata",
    "reg0",
    "reg1",
    "reg2",
    "reg3",
];

/// A quick syntactic check of one flow in the ovs-ofctl syntax the generator writes: a
/// comma-separated match of known keywords and `field=value` pairs, then `actions=` with a
/// non-empty list of known actions and balanced parentheses, `goto_table` last. This is a
/// self-check of the generator, not an ovs-ofctl parser.
pub fn check_flow_syntax(flow: &str) -> Result<(), String> {
    let (m, actions) = flow.split_once("actions=").ok_or("no `actions=`")?;
    let m = m.strip_suffix(',').unwrap_or(m);
    for item in m.split(',').filter(|s| !s.is_empty()) {
        match item.split_once('=') {
            None if KEYWORDS.contains(&item) => {}
            None => return Err(format!("unknown match keyword `{item}`")),
            Some((field, value)) => {
                if !FIELDS.contains(&field) {
                    return Err(format!("unknown match field `{field}`"));
                }
                if value.is_empty() {
                    return Err(format!("empty value for `{field}`"));
                }
                if matches!(field, "table" | "priority") && value.parse::<u32>().is_err() {
                    return Err(format!("`{field}` needs a number, got `{value}`"));
                }
            }
        }
    }
    let mut depth = 0i32;
    for c in actions.chars() {
        depth += match c {
            '(' => 1,
            ')' => -1,
            _ => 0,
        };
        if depth < 0 {
            return Err("unbalanced `)` in actions".into());
        }
    }
    if depth != 0 {
        return Err("unbalanced `(` in actions".into());
    }
    let items = split_actions(actions);
    if items.is_empty() {
        return Err("empty action list".into());
    }
    for (i, a) in items.iter().enumerate() {
        let ok = match a.split_once(':') {
            Some(("output" | "goto_table", n)) => n.parse::<u32>().is_ok(),
            Some(("mod_vlan_vid" | "mod_vlan_pcp" | "mod_tp_src", n)) => n.parse::<u32>().is_ok(),
            Some(("push_vlan", t)) => t.starts_with("0x"),
            Some(("mod_dl_src" | "mod_dl_dst", mac)) => mac.split(':').count() == 6,
            Some(("mod_nw_src" | "mod_nw_dst", ip)) => ip.parse::<std::net::Ipv4Addr>().is_ok(),
            Some(("set_field" | "load", rest)) => rest.contains("->"),
            Some(_) => false,
            None => {
                matches!(
                    *a,
                    "NORMAL"
                        | "FLOOD"
                        | "ALL"
                        | "IN_PORT"
                        | "LOCAL"
                        | "drop"
                        | "pop_vlan"
                        | "strip_vlan"
                        | "dec_ttl"
                ) || (a.starts_with("resubmit(") && a.ends_with(')'))
            }
        };
        if !ok {
            return Err(format!("unknown action `{a}`"));
        }
        if a.starts_with("goto_table:") && i + 1 != items.len() {
            return Err("`goto_table` must be the last action".into());
        }
        if *a == "drop" && items.len() != 1 {
            return Err("`drop` must be alone".into());
        }
    }
    Ok(())
}

/// Shrinks `case` while `still_fails` holds: first its packets, then its flows, each by
/// delta debugging, then each remaining flow's match fields and actions. The result is
/// 1-minimal in packets and flows: removing any single remaining packet or flow makes the
/// predicate false. `still_fails` is not called on the original case.
///
/// A simplified flow that the reference refuses makes the predicate false (the caller's
/// predicate treats errors as "does not fail"), so the minimal case stays valid input.
pub fn minimize(case: &DiffCase, mut still_fails: impl FnMut(&DiffCase) -> bool) -> DiffCase {
    let mut cur = case.clone();
    let base = cur.clone();
    cur.packets = ddmin(&base.packets, |packets| {
        let mut c = base.clone();
        c.packets = packets.to_vec();
        still_fails(&c)
    });
    let base = cur.clone();
    cur.flows = ddmin(&base.flows, |flows| {
        let mut c = base.clone();
        c.flows = flows.to_vec();
        still_fails(&c)
    });
    for i in 0..cur.flows.len() {
        let Some((fields, actions)) = split_flow(&cur.flows[i]) else {
            continue;
        };
        let base = cur.clone();
        let with_fields = |f: &[String]| {
            let mut c = base.clone();
            c.flows[i] = join_flow(f, &actions);
            c
        };
        let mut fields = ddmin(&fields, |f| still_fails(&with_fields(f)));
        if fields.len() == 1 && still_fails(&with_fields(&[])) {
            fields.clear();
        }
        cur.flows[i] = join_flow(&fields, &actions);
        let base = cur.clone();
        let actions = ddmin(&actions, |a| {
            let mut c = base.clone();
            c.flows[i] = join_flow(&fields, a);
            still_fails(&c)
        });
        cur.flows[i] = join_flow(&fields, &actions);
    }
    cur
}

/// Splits a flow into its match items and its top-level actions.
fn split_flow(flow: &str) -> Option<(Vec<String>, Vec<String>)> {
    let (m, a) = flow.split_once("actions=")?;
    let fields = m
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(str::to_owned)
        .collect();
    let actions = split_actions(a).into_iter().map(str::to_owned).collect();
    Some((fields, actions))
}

/// The inverse of [`split_flow`]; an empty action list is `drop`.
fn join_flow(fields: &[String], actions: &[String]) -> String {
    let actions = if actions.is_empty() {
        "drop".to_owned()
    } else {
        actions.join(",")
    };
    if fields.is_empty() {
        format!("actions={actions}")
    } else {
        format!("{},actions={actions}", fields.join(","))
    }
}

/// Zeller's ddmin over removals: returns a 1-minimal subsequence of `items` for which `test`
/// holds, assuming it holds for `items`. It never tests the empty sequence, so a single item
/// is returned as is.
pub fn ddmin<T: Clone>(items: &[T], mut test: impl FnMut(&[T]) -> bool) -> Vec<T> {
    let mut cur = items.to_vec();
    let mut n = 2usize;
    while cur.len() >= 2 {
        let chunk = cur.len().div_ceil(n);
        let mut reduced = false;
        let mut start = 0;
        while start < cur.len() {
            let end = (start + chunk).min(cur.len());
            let complement: Vec<T> = cur[..start].iter().chain(&cur[end..]).cloned().collect();
            if !complement.is_empty() && test(&complement) {
                cur = complement;
                n = (n - 1).max(2);
                reduced = true;
                break;
            }
            start = end;
        }
        if !reduced {
            if n >= cur.len() {
                break;
            }
            n = (2 * n).min(cur.len());
        }
    }
    cur
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generate_is_deterministic_per_seed() {
        for n in 0..50 {
            assert_eq!(generate(7, n), generate(7, n));
        }
        assert_ne!(generate(7, 1), generate(7, 2));
        assert_ne!(generate(7, 1), generate(8, 1));
    }

    #[test]
    fn generate_from_seed_matches_generate() {
        let case = generate(42, 3);
        assert_eq!(case.seed, case_seed(42, 3));
        assert_eq!(generate_from_seed(case.seed), case);
    }

    #[test]
    fn generate_respects_size_bounds() {
        for n in 0..500 {
            let c = generate(1, n);
            assert!((2..=6).contains(&c.bridge.ports.len()), "{c:?}");
            assert!((1..=20).contains(&c.flows.len()));
            assert!((1..=5).contains(&c.packets.len()));
            let uses_of13 = c
                .flows
                .iter()
                .any(|f| f.contains("goto_table") || f.contains("push_vlan"));
            assert!(!uses_of13 || !c.ofctl_options.is_empty(), "{c:?}");
        }
    }

    #[test]
    fn generated_flows_pass_syntax_check() {
        for n in 0..2000 {
            for flow in generate(99, n).flows {
                if let Err(e) = check_flow_syntax(&flow) {
                    panic!("case {n}: `{flow}`: {e}");
                }
            }
        }
    }

    #[test]
    fn generated_packets_are_balanced_datapath_keys() {
        for n in 0..500 {
            for p in generate(5, n).packets {
                assert!(p.starts_with("in_port("), "{p}");
                assert_eq!(p.matches('(').count(), p.matches(')').count(), "{p}");
                assert!(!p.contains(",,") && !p.ends_with(','), "{p}");
            }
        }
    }

    #[test]
    fn generated_resubmits_go_forward() {
        for n in 0..1000 {
            for flow in generate(3, n).flows {
                let table: u32 = flow
                    .split(',')
                    .find_map(|i| i.strip_prefix("table="))
                    .map_or(0, |t| t.parse().expect("numeric table"));
                let actions = flow.split_once("actions=").expect("has actions").1;
                for a in split_actions(actions) {
                    let target = if let Some(r) = a.strip_prefix("resubmit(") {
                        r.trim_end_matches(')')
                            .split(',')
                            .nth(1)
                            .map(|t| t.parse::<u32>().expect("numeric"))
                    } else {
                        a.strip_prefix("goto_table:")
                            .map(|t| t.parse::<u32>().expect("numeric"))
                    };
                    if let Some(t) = target {
                        assert!(t > table, "{flow}");
                    }
                }
            }
        }
    }

    #[test]
    fn check_flow_syntax_rejects_bad_flows() {
        assert!(check_flow_syntax("in_port=1,actions=output:2").is_ok());
        assert!(check_flow_syntax("in_port=1").is_err());
        assert!(check_flow_syntax("in_port=1,actions=").is_err());
        assert!(check_flow_syntax("bogus=1,actions=drop").is_err());
        assert!(check_flow_syntax("ip,actions=resubmit(,1").is_err());
        assert!(check_flow_syntax("ip,actions=goto_table:1,output:1").is_err());
        assert!(check_flow_syntax("ip,actions=output:1,drop").is_err());
        assert!(check_flow_syntax("ip,actions=frobnicate").is_err());
    }

    #[test]
    fn reproducer_lists_every_command() {
        let case = generate(11, 0);
        let text = case.to_reproducer();
        assert!(
            text.starts_with("# ferrovs-difftest case")
                && text.contains("ovs-vsctl \\\n    -- add-br br0")
        );
        assert!(text.contains("add-flows br0 - <<'EOF'"));
        assert_eq!(
            text.matches("ovs-appctl ofproto/trace ovs-dummy").count(),
            case.packets.len()
        );
        for flow in &case.flows {
            assert!(text.contains(flow.as_str()));
        }
    }

    #[test]
    fn ddmin_finds_minimal_subset() {
        let items: Vec<u32> = (0..20).collect();
        let min = ddmin(&items, |s| s.contains(&3) && s.contains(&17));
        assert_eq!(min, [3, 17]);
        let min = ddmin(&items, |s| s.iter().sum::<u32>() >= 19);
        assert_eq!(min.len(), 1, "{min:?}");
        assert_eq!(ddmin(&[1u8], |_| true), [1]);
    }

    #[test]
    fn minimize_drops_irrelevant_flows_and_packets() {
        let case = generate(2, 4);
        let mut big = case.clone();
        big.flows.push("priority=7,actions=output:9".into());
        big.packets.push(
            "in_port(9),eth(src=50:54:00:00:00:01,dst=50:54:00:00:00:02),eth_type(0x1234)".into(),
        );
        let min = minimize(&big, |c| {
            c.flows.iter().any(|f| f.contains("output:9"))
                && c.packets.iter().any(|p| p.starts_with("in_port(9)"))
        });
        assert_eq!(min.flows, ["actions=output:9"]);
        assert_eq!(min.packets.len(), 1);
        assert_eq!(min.bridge, case.bridge);
    }

    #[test]
    fn minimize_simplifies_inside_flows() {
        let mut case = generate(2, 4);
        case.flows =
            vec!["table=0,priority=5,ip,nw_dst=10.0.0.0/8,actions=dec_ttl,output:3,NORMAL".into()];
        let min = minimize(&case, |c| {
            c.flows
                .iter()
                .any(|f| f.contains("nw_dst=10.") && f.contains("NORMAL"))
        });
        assert_eq!(min.flows, ["nw_dst=10.0.0.0/8,actions=NORMAL"]);
    }

    #[test]
    fn split_flow_roundtrips() {
        let flow = "table=1,ip,actions=set_field:1->reg0,resubmit(,2),output:3";
        let (f, a) = split_flow(flow).expect("has actions");
        assert_eq!(f, ["table=1", "ip"]);
        assert_eq!(a, ["set_field:1->reg0", "resubmit(,2)", "output:3"]);
        assert_eq!(join_flow(&f, &a), flow);
        assert_eq!(join_flow(&[], &[]), "actions=drop");
    }
}
