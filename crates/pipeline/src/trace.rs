//! `trace`: translate one packet and show the walk, like `ovs-appctl ofproto/trace`.
//!
//! The input is either OpenFlow flow syntax on a named bridge (`in_port` is an OpenFlow port
//! or a port name: `in_port=p1,icmp,nw_src=...`) or OVS's datapath flow-key syntax
//! (`in_port(1),eth(...),eth_type(0x0800),ipv4(...)`, `in_port` a datapath port, which the
//! layout maps to a bridge and OpenFlow port). The report lists the walk: bridges entered
//! (also through patch ports), every table lookup with the rule it matched (printed in
//! ovs-ofctl syntax) or `No match.`, each action executed, and notes for skipped outputs and
//! drops; then the final flow, the megaflow and the datapath actions:
//!
//! ```text
//! Flow: icmp,in_port=1,vlan_tci=0x0000,dl_src=...
//!
//! bridge("br0")
//! -------------
//!  0. in_port=1, priority 32768
//!     output:2
//!
//! Final flow: unchanged
//! Megaflow: recirc_id=0,eth,icmp,in_port=1,nw_frag=no
//! Datapath actions: 2
//! ```
//!
//! The walk's wording need not match OVS's; the last two lines follow OVS's format.
//!
//! # Example
//! ```
//! use pipeline::switch::Switch;
//! use pipeline::trace::TraceInput;
//! let mut sw = Switch::new();
//! sw.vsctl("add-br br0 -- add-port br0 p1 -- add-port br0 p2").unwrap();
//! sw.add_flows_text("br0", &["in_port=1,actions=output:2"], "").unwrap();
//! let r = sw.trace(TraceInput::Datapath("in_port(1),eth_type(0x1234)"), Default::default()).unwrap();
//! assert_eq!(r.datapath_actions(), "2");
//! assert!(r.to_text().ends_with("Datapath actions: 2\n"));
//! ```

use openflow::ofctl::flow_key::parse_flow_key_with_ports;
use openflow::ofctl::format_flow_key;
use openflow::ofctl::match_fmt::format_match;
use openflow::Match;
use packet::key::{fields, FlowKey};

use crate::odp::{format_actions, parse_key, VLAN_CFI};
use crate::switch::Switch;
use crate::xlate::{normalize_key, XlateOptions, XlateOutput};

/// The recorded walk of one translation: indented lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Walk {
    lines: Vec<(usize, String)>,
}

impl Walk {
    pub(crate) fn push(&mut self, depth: usize, text: String) {
        self.lines.push((depth, text));
    }

    pub(crate) fn push_bridge(&mut self, depth: usize, name: &str) {
        let head = format!("bridge(\"{name}\")");
        let rule = "-".repeat(head.len());
        self.lines.push((depth, head));
        self.lines.push((depth, rule));
    }

    /// The lines with their nesting depth.
    pub fn lines(&self) -> impl Iterator<Item = (usize, &str)> {
        self.lines.iter().map(|(d, s)| (*d, s.as_str()))
    }

    /// The walk as text, four spaces per level.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        for (d, l) in &self.lines {
            s.push_str(&" ".repeat(4 * d));
            s.push_str(l);
            s.push('\n');
        }
        s
    }
}

/// What to trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceInput<'a> {
    /// OpenFlow flow syntax on a bridge.
    Flow {
        /// The bridge.
        bridge: &'a str,
        /// The packet (`in_port=1,tcp,tp_dst=80`).
        flow: &'a str,
    },
    /// OVS datapath flow-key syntax (`in_port` = datapath port).
    Datapath(&'a str),
}

/// Trace errors: the input, not the packet's fate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TraceError {
    /// The packet text does not parse.
    #[error("{0}")]
    Parse(String),
    /// No such bridge.
    #[error("no bridge named {0}")]
    NoSuchBridge(String),
    /// The datapath input port belongs to no bridge.
    #[error("no port with datapath number {0}")]
    NoSuchDpPort(u32),
}

/// The result of a trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceReport {
    /// Bridge the packet entered.
    pub bridge: String,
    /// The packet, `in_port` an OpenFlow port.
    pub flow: FlowKey,
    /// The datapath port it came in on, if it has one.
    pub dp_in_port: Option<u32>,
    /// The translation.
    pub output: XlateOutput,
    /// The walk.
    pub walk: Walk,
}

impl TraceReport {
    /// The `Datapath actions:` text.
    pub fn datapath_actions(&self) -> String {
        format_actions(&self.output.actions)
    }

    /// The megaflow as OVS's trace prints it (`in_port` as the OpenFlow port).
    pub fn megaflow(&self) -> String {
        let key = self.flow;
        let mut wc = self.output.wc;
        wc.set(fields::RECIRC_ID, 0);
        // Tag presence is part of OVS's datapath Ethernet type: not printed for untagged
        // packets.
        if key.vlan_tci() & VLAN_CFI == 0 {
            wc.set(fields::VLAN_TPID, 0);
            if wc.vlan_tci() == VLAN_CFI {
                wc.set(fields::VLAN_TCI, 0);
            }
        }
        if key.vlan_tci1() & VLAN_CFI == 0 {
            wc.set(fields::VLAN_TPID1, 0);
            if wc.vlan_tci1() == VLAN_CFI {
                wc.set(fields::VLAN_TCI1, 0);
            }
        }
        let m = format_match(&Match::new(key, wc), None);
        if m.is_empty() {
            "recirc_id=0,eth".to_string()
        } else {
            format!("recirc_id=0,eth,{m}")
        }
    }

    /// The whole report as text, ending with the `Datapath actions:` line.
    pub fn to_text(&self) -> String {
        let mut s = format!("Flow: {}\n\n", format_flow_key(&self.flow));
        s.push_str(&self.walk.to_text());
        s.push('\n');
        let mut final_flow = self.output.final_flow;
        final_flow.set_actset_output(0);
        let mut start = self.flow;
        start.set_actset_output(0);
        if final_flow == start {
            s.push_str("Final flow: unchanged\n");
        } else {
            s.push_str(&format!("Final flow: {}\n", format_flow_key(&final_flow)));
        }
        s.push_str(&format!("Megaflow: {}\n", self.megaflow()));
        s.push_str(&format!("Datapath actions: {}\n", self.datapath_actions()));
        s
    }
}

impl Switch {
    /// Resolves a trace input into (bridge, key with OpenFlow `in_port`, datapath in port).
    pub fn trace_key(
        &self,
        input: TraceInput<'_>,
    ) -> Result<(String, FlowKey, Option<u32>), TraceError> {
        let (bridge, mut key, dp) = match input {
            TraceInput::Flow { bridge, flow } => {
                if self.bridge(bridge).is_none() {
                    return Err(TraceError::NoSuchBridge(bridge.to_string()));
                }
                let key = parse_flow_key_with_ports(flow, &self.port_names(bridge))
                    .map_err(|e| TraceError::Parse(e.to_string()))?;
                let dp = u16::try_from(key.in_port())
                    .ok()
                    .and_then(|of| self.port_by_ofport(bridge, of))
                    .and_then(|p| p.dp_port);
                (bridge.to_string(), key, dp)
            }
            TraceInput::Datapath(text) => {
                let mut key = parse_key(text).map_err(|e| TraceError::Parse(e.to_string()))?;
                let dp = key.in_port();
                let port = self
                    .layout()
                    .port_by_dp(dp)
                    .ok_or(TraceError::NoSuchDpPort(dp))?;
                key.set_in_port(u32::from(port.ofport));
                (port.bridge.clone(), key, Some(dp))
            }
        };
        let limit = self
            .config()
            .bridges
            .iter()
            .find(|b| b.name == bridge)
            .map_or(1, |b| b.vlan_limit);
        normalize_key(&mut key, limit);
        Ok((bridge, key, dp))
    }

    /// Traces one packet (see the module documentation).
    pub fn trace(
        &self,
        input: TraceInput<'_>,
        opts: XlateOptions,
    ) -> Result<TraceReport, TraceError> {
        let (bridge, key, dp_in_port) = self.trace_key(input)?;
        let mut walk = Walk::default();
        let output = self
            .translate(&bridge, &key, opts, Some(&mut walk))
            .map_err(|e| TraceError::NoSuchBridge(e.to_string()))?;
        Ok(TraceReport {
            bridge,
            flow: key,
            dp_in_port,
            output,
            walk,
        })
    }
}
