//! Replaying OVS's trace cases (`testdata/ovs-trace-cases.jsonl`) against a [`Switch`].
//!
//! Each case gives setup steps (create bridges as OVS's test macro does, add ports, run
//! `ovs-vsctl`/`ovs-ofctl`/`ovs-appctl` commands, add flows, run earlier traces for their
//! side effects), one packet to trace, and the expected `Datapath actions:` text with a
//! comparison mode. This module holds the replay and the comparison without any JSON
//! dependency: callers (the acceptance test, `ferrovs-cases trace FILE`) build a
//! [`TraceCase`] from the JSON fields and call [`replay_trace_case`].
//!
//! # Comparison modes
//!
//! - `exact`: string equality.
//! - `unordered`: the comma-separated actions as multisets (the test sorted them).
//! - `normalized`: OVS's `ovs-dpctl normalize-actions`: which packet version (VLAN tags and set
//!   fields so far) goes to which port matters, not the order of the copies. Each output is paired
//!   with the packet version it sends, and the pairs are compared as multisets.
//!
//! # Example
//! ```
//! use pipeline::cases::{replay_trace_case, CompareMode, SetupStep, TraceCase};
//! let case = TraceCase {
//!     id: "example".into(),
//!     setup: vec![
//!         SetupStep::Start { vsctl_args: String::new() },
//!         SetupStep::AddOfPorts { bridge: "br0".into(), ports: vec![1, 2] },
//!         SetupStep::AddFlows {
//!             bridge: "br0".into(),
//!             ofctl_options: String::new(),
//!             flows: vec!["in_port=1,actions=output:2".into()],
//!             replace: false,
//!         },
//!     ],
//!     trace_bridge: Some("br0".into()),
//!     trace_input: "in_port=1,dl_type=0x1234".into(),
//!     odp_input: false,
//!     expected: "2".into(),
//!     compare: CompareMode::Exact,
//! };
//! let outcome = replay_trace_case(&case);
//! assert!(outcome.passed, "{:?}", outcome.reason);
//! ```

use std::collections::BTreeMap;

use crate::odp::{format_actions, DpAction};
use crate::switch::Switch;
use crate::trace::TraceInput;
use crate::xlate::XlateOptions;

/// How expected and actual datapath actions are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareMode {
    /// String equality.
    Exact,
    /// Same actions as multisets.
    Unordered,
    /// Same (packet version, output) pairs (OVS `normalize-actions`).
    Normalized,
}

impl CompareMode {
    /// Parses `exact`, `unordered` or `normalized`.
    pub fn parse(s: &str) -> Option<CompareMode> {
        match s {
            "exact" => Some(CompareMode::Exact),
            "unordered" => Some(CompareMode::Unordered),
            "normalized" => Some(CompareMode::Normalized),
            _ => None,
        }
    }
}

/// One setup step of a case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetupStep {
    /// Create `br0` as OVS's test macro does (secure), then run `vsctl_args`.
    Start {
        /// Extra `ovs-vsctl` commands, `--`-separated.
        vsctl_args: String,
    },
    /// Add ports `pN` with OpenFlow port N.
    AddOfPorts {
        /// Bridge.
        bridge: String,
        /// Port numbers.
        ports: Vec<u32>,
    },
    /// Create `brN` like `Start`.
    AddOfBr {
        /// N.
        brnum: u32,
    },
    /// A raw `ovs-vsctl ...` command.
    Vsctl {
        /// The command line.
        cmd: String,
    },
    /// A raw `ovs-ofctl ...` command (`mod-port`, `add-flow`, `del-flows`).
    Ofctl {
        /// The command line.
        cmd: String,
    },
    /// A raw `ovs-appctl ...` command (`fdb/add`).
    Appctl {
        /// The command line.
        cmd: String,
    },
    /// `ovs-ofctl add-flows` (or `replace-flows`).
    AddFlows {
        /// Bridge.
        bridge: String,
        /// `-O OpenFlow13`...
        ofctl_options: String,
        /// Flows.
        flows: Vec<String>,
        /// `replace-flows` instead of `add-flows`.
        replace: bool,
    },
    /// `ovs-ofctl del-flows BRIDGE MATCH`.
    DelFlows {
        /// Bridge.
        bridge: String,
        /// Match (empty = all).
        flow_match: String,
    },
    /// An earlier trace run for its side effects (`-generate`).
    TraceGenerate {
        /// Bridge, or `ovs-dummy` for a datapath-syntax packet.
        bridge: String,
        /// The packet.
        flow: String,
    },
}

/// One trace case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceCase {
    /// Case id (`ofproto-dpif:961`).
    pub id: String,
    /// Setup steps, in order.
    pub setup: Vec<SetupStep>,
    /// Bridge of an OpenFlow-syntax trace.
    pub trace_bridge: Option<String>,
    /// The packet.
    pub trace_input: String,
    /// True if `trace_input` is datapath syntax.
    pub odp_input: bool,
    /// Expected `Datapath actions:` text.
    pub expected: String,
    /// Comparison mode.
    pub compare: CompareMode,
}

/// The result of replaying one case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseOutcome {
    /// Case id.
    pub id: String,
    /// True if the actions compare equal.
    pub passed: bool,
    /// The actions ferrovs produced (empty if setup or trace failed).
    pub got: String,
    /// Why it failed.
    pub reason: Option<String>,
    /// The full trace text, if the trace ran.
    pub trace: Option<String>,
    /// The `Megaflow:` line, if the trace ran.
    pub megaflow: Option<String>,
}

fn strip<'a>(cmd: &'a str, prog: &str) -> &'a str {
    cmd.trim()
        .strip_prefix(prog)
        .map(str::trim)
        .unwrap_or(cmd.trim())
}

fn start_bridge(sw: &mut Switch, name: &str) -> Result<(), String> {
    sw.vsctl(&format!(
        "add-br {name} -- set bridge {name} fail-mode=secure"
    ))
    .map_err(|e| e.to_string())
}

fn run_step(sw: &mut Switch, step: &SetupStep, now_ms: &mut u64) -> Result<(), String> {
    match step {
        SetupStep::Start { vsctl_args } => {
            start_bridge(sw, "br0")?;
            if !vsctl_args.trim().is_empty() {
                sw.vsctl(vsctl_args).map_err(|e| e.to_string())?;
            }
        }
        SetupStep::AddOfPorts { bridge, ports } => {
            let cmds: Vec<String> = ports
                .iter()
                .map(|n| format!("add-port {bridge} p{n} -- set Interface p{n} type=dummy ofport_request={n}"))
                .collect();
            sw.vsctl(&cmds.join(" -- ")).map_err(|e| e.to_string())?;
        }
        SetupStep::AddOfBr { brnum } => start_bridge(sw, &format!("br{brnum}"))?,
        SetupStep::Vsctl { cmd } => sw
            .vsctl(strip(cmd, "ovs-vsctl"))
            .map_err(|e| e.to_string())?,
        SetupStep::Ofctl { cmd } => {
            let words: Vec<&str> = strip(cmd, "ovs-ofctl").split_whitespace().collect();
            match words.as_slice() {
                ["mod-port", br, port, flags @ ..] => {
                    sw.mod_port(br, port, flags).map_err(|e| e.to_string())?
                }
                ["add-flow", br, flow] => {
                    sw.add_flows_text(br, &[flow], "")
                        .map_err(|e| e.to_string())?;
                }
                ["del-flows", br] => {
                    sw.del_flows_text(br, "").map_err(|e| e.to_string())?;
                }
                ["del-flows", br, m] => {
                    sw.del_flows_text(br, m).map_err(|e| e.to_string())?;
                }
                _ => return Err(format!("unsupported ovs-ofctl command `{cmd}'")),
            }
        }
        SetupStep::Appctl { cmd } => {
            let words: Vec<&str> = strip(cmd, "ovs-appctl").split_whitespace().collect();
            match words.as_slice() {
                ["fdb/add", br, port, vlan, mac] => {
                    let vlan: u16 = vlan
                        .parse()
                        .map_err(|_| format!("fdb/add: bad VLAN {vlan}"))?;
                    let mac = openflow::ofctl::value::parse_mac(mac)
                        .ok_or_else(|| format!("fdb/add: bad MAC {mac}"))?;
                    sw.fdb_add(br, port, vlan, mac).map_err(|e| e.to_string())?;
                }
                _ => return Err(format!("unsupported ovs-appctl command `{cmd}'")),
            }
        }
        SetupStep::AddFlows {
            bridge,
            ofctl_options,
            flows,
            replace,
        } => {
            let flows: Vec<&str> = flows.iter().map(String::as_str).collect();
            if *replace {
                let entries = sw
                    .parse_flows(
                        bridge,
                        &flows,
                        ofctl_options,
                        openflow::ofctl::flow::FlowCommand::Add,
                    )
                    .map_err(|e| e.to_string())?;
                sw.replace_flows(bridge, entries)
                    .map_err(|e| e.to_string())?;
            } else {
                sw.add_flows_text(bridge, &flows, ofctl_options)
                    .map_err(|e| e.to_string())?;
            }
        }
        SetupStep::DelFlows { bridge, flow_match } => {
            sw.del_flows_text(bridge, flow_match)
                .map_err(|e| e.to_string())?;
        }
        SetupStep::TraceGenerate { bridge, flow } => {
            let input = if bridge == "ovs-dummy" {
                TraceInput::Datapath(flow)
            } else {
                TraceInput::Flow { bridge, flow }
            };
            *now_ms += 1000;
            sw.set_time(*now_ms);
            let opts = XlateOptions {
                credit_bytes: Some(64),
                now_ms: *now_ms,
                learn: true,
            };
            sw.trace(input, opts).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// Builds a switch by running `setup` in order (what [`replay_trace_case`] does before its
/// trace); also usable by other harnesses (the differential tester). Returns the switch and
/// its clock (advanced by each `trace_generate`), or the failing step's index and error.
pub fn build_switch(setup: &[SetupStep]) -> Result<(Switch, u64), String> {
    let mut sw = Switch::new();
    let mut now_ms = 0;
    for (i, step) in setup.iter().enumerate() {
        run_step(&mut sw, step, &mut now_ms).map_err(|e| format!("setup step {i}: {e}"))?;
    }
    Ok((sw, now_ms))
}

/// Builds the case's switch, traces its packet and compares the datapath actions.
pub fn replay_trace_case(case: &TraceCase) -> CaseOutcome {
    let fail = |got: String, reason: String, trace: Option<String>| CaseOutcome {
        id: case.id.clone(),
        passed: false,
        got,
        reason: Some(reason),
        trace,
        megaflow: None,
    };
    let (sw, now_ms) = match build_switch(&case.setup) {
        Ok(x) => x,
        Err(e) => return fail(String::new(), e, None),
    };
    let input = if case.odp_input {
        TraceInput::Datapath(&case.trace_input)
    } else {
        TraceInput::Flow {
            bridge: case.trace_bridge.as_deref().unwrap_or("br0"),
            flow: &case.trace_input,
        }
    };
    let opts = XlateOptions {
        credit_bytes: None,
        now_ms: now_ms + 1000,
        learn: false,
    };
    let report = match sw.trace(input, opts) {
        Ok(r) => r,
        Err(e) => return fail(String::new(), format!("trace: {e}"), None),
    };
    let got = report.datapath_actions();
    let text = report.to_text();
    let tags = crate::xlate::vlan_tags(&report.flow);
    if compare_actions_for_input(case.compare, &case.expected, &got, &tags) {
        CaseOutcome {
            id: case.id.clone(),
            passed: true,
            got,
            reason: None,
            trace: Some(text),
            megaflow: Some(report.megaflow()),
        }
    } else {
        let reason = format!("expected `{}', got `{got}'", case.expected);
        CaseOutcome {
            megaflow: Some(report.megaflow()),
            ..fail(got, reason, Some(text))
        }
    }
}

/// Splits datapath actions at commas outside parentheses.
pub fn split_actions(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let (mut depth, mut cur) = (0i32, String::new());
    for c in s.trim().chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out.into_iter()
        .map(|a| a.trim().to_string())
        .filter(|a| !a.is_empty() && a != "drop")
        .collect()
}

/// The (packet version, output) pairs of an action list, sorted. `tags` are the input
/// packet's VLAN tags, outermost first, as `(tpid, tci)`.
fn normalized_outputs(s: &str, tags: &[(u16, u16)]) -> Vec<(String, String)> {
    // The VLAN stack (outermost last) starts with the input's tags, spelled as `push_vlan`
    // arguments, below symbolic unknown ones; set fields by `group.key`.
    let mut vlans: Vec<String> = (0..2).map(|i| format!("orig{i}")).collect();
    for (tpid, tci) in tags.iter().rev() {
        let a = format_actions(&[DpAction::PushVlan {
            tpid: *tpid,
            tci: *tci,
        }]);
        let a = a.strip_prefix("push_vlan(").unwrap_or(&a);
        vlans.push(a.strip_suffix(')').unwrap_or(a).to_string());
    }
    let mut sets: BTreeMap<String, String> = BTreeMap::new();
    let mut out = Vec::new();
    for a in split_actions(s) {
        if a == "pop_vlan" {
            vlans.pop();
        } else if let Some(args) = a.strip_prefix("push_vlan(") {
            vlans.push(args.trim_end_matches(')').to_string());
        } else if let Some(inner) = a.strip_prefix("set(") {
            let inner = inner.strip_suffix(')').unwrap_or(inner);
            let (group, rest) = inner.split_once('(').unwrap_or((inner, ""));
            let rest = rest.strip_suffix(')').unwrap_or(rest);
            for kv in rest.split(',') {
                let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                sets.insert(format!("{group}.{k}"), v.to_string());
            }
        } else {
            let version = format!("{vlans:?}{sets:?}");
            out.push((version, a));
        }
    }
    out.sort();
    out
}

/// Compares expected and actual datapath actions by `mode`, for an input packet without
/// VLAN tags (see [`compare_actions_for_input`]).
pub fn compare_actions(mode: CompareMode, expected: &str, got: &str) -> bool {
    compare_actions_for_input(mode, expected, got, &[])
}

/// Compares expected and actual datapath actions by `mode`; `tags` are the input packet's
/// VLAN tags, outermost first, as `(tpid, tci)` (`normalized` needs them to see that
/// `pop_vlan,push_vlan(..)` of the same tag restores the packet).
pub fn compare_actions_for_input(
    mode: CompareMode,
    expected: &str,
    got: &str,
    tags: &[(u16, u16)],
) -> bool {
    match mode {
        CompareMode::Exact => expected.trim() == got.trim(),
        CompareMode::Unordered => {
            let (mut a, mut b) = (split_actions(expected), split_actions(got));
            a.sort();
            b.sort();
            a == b
        }
        CompareMode::Normalized => {
            normalized_outputs(expected, tags) == normalized_outputs(got, tags)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compare_modes() {
        assert!(compare_actions(CompareMode::Unordered, "1,2,3", "3,1,2"));
        assert!(!compare_actions(CompareMode::Exact, "1,2,3", "3,1,2"));
        assert!(compare_actions(
            CompareMode::Normalized,
            "2,push_vlan(vid=12,pcp=0),1,5",
            "push_vlan(vid=12,pcp=0),5,1,pop_vlan,2"
        ));
        assert!(!compare_actions(
            CompareMode::Normalized,
            "2,push_vlan(vid=12,pcp=0),1",
            "push_vlan(vid=12,pcp=0),1,2"
        ));
        assert!(compare_actions(CompareMode::Normalized, "drop", ""));
        let tags = [(0x8100, 0x1000 | 10)];
        assert!(compare_actions_for_input(
            CompareMode::Normalized,
            "5,pop_vlan,2",
            "pop_vlan,2,push_vlan(vid=10,pcp=0),5",
            &tags
        ));
    }
}

/// Reading case files (JSON lines, the format of `testdata/ovs-trace-cases.jsonl`), behind the
/// `json` feature so that the library itself needs no JSON crate.
#[cfg(feature = "json")]
pub mod json {
    use serde_json::Value;

    use super::{CompareMode, SetupStep, TraceCase};

    /// Parses one line of a case file. Errors name what is wrong; nothing panics.
    pub fn trace_case_from_json(line: &str) -> Result<TraceCase, String> {
        let v: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
        case(&v)
    }

    fn s(v: &Value, k: &str) -> String {
        v.get(k).and_then(Value::as_str).unwrap_or("").to_string()
    }

    fn step(v: &Value) -> Result<SetupStep, String> {
        Ok(match s(v, "op").as_str() {
            "start" => SetupStep::Start {
                vsctl_args: s(v, "vsctl_args"),
            },
            "add_of_ports" => SetupStep::AddOfPorts {
                bridge: s(v, "bridge"),
                ports: v["ports"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|p| p.as_u64())
                            .filter_map(|p| u32::try_from(p).ok())
                            .collect()
                    })
                    .unwrap_or_default(),
            },
            "add_of_br" => SetupStep::AddOfBr {
                brnum: v["brnum"]
                    .as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .unwrap_or(1),
            },
            "vsctl" => SetupStep::Vsctl { cmd: s(v, "cmd") },
            "ofctl" => SetupStep::Ofctl { cmd: s(v, "cmd") },
            "appctl" => SetupStep::Appctl { cmd: s(v, "cmd") },
            op @ ("add_flows" | "replace_flows") => SetupStep::AddFlows {
                bridge: s(v, "bridge"),
                ofctl_options: s(v, "ofctl_options"),
                flows: v["flows"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|f| f.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default(),
                replace: op == "replace_flows",
            },
            "del_flows" => SetupStep::DelFlows {
                bridge: s(v, "bridge"),
                flow_match: s(v, "match"),
            },
            "trace_generate" => SetupStep::TraceGenerate {
                bridge: s(v, "bridge"),
                flow: s(v, "flow"),
            },
            other => return Err(format!("unknown setup op {other}")),
        })
    }

    fn case(v: &Value) -> Result<TraceCase, String> {
        Ok(TraceCase {
            id: s(v, "id"),
            setup: v["setup"]
                .as_array()
                .map(|a| a.iter().map(step).collect::<Result<Vec<_>, _>>())
                .transpose()?
                .unwrap_or_default(),
            trace_bridge: v["trace_bridge"].as_str().map(String::from),
            trace_input: s(v, "trace_input"),
            odp_input: s(v, "trace_input_syntax") == "odp",
            expected: s(v, "expected_datapath_actions"),
            compare: CompareMode::parse(&s(v, "compare"))
                .ok_or_else(|| format!("unknown compare mode {:?}", s(v, "compare")))?,
        })
    }
}
