//! The OVS trace cases (`testdata/ovs-trace-cases.jsonl`): their serde types and their
//! replay on a reference OVS.
//!
//! Each line of the file is one [`TraceCase`]: a bridge/port layout built by ordered
//! [`SetupStep`]s, one `ofproto/trace` input and the expected `Datapath actions:` line,
//! compared by the case's [`CompareMode`]. The format is described in
//! `testdata/README.md` (the file is `testdata/ovs-trace-cases.jsonl`, from shared/acceptance).
//!
//! [`replay_on_ovs`] resets an [`OvsReference`], replays the setup, runs the trace and returns
//! a [`CaseOutcome`]. A case whose `reference_check.agrees` is false records a known
//! difference between the expectation (OVS master) and Debian's OVS 3.1: when OVS 3.1 gives
//! exactly the answer recorded there, the verdict is [`Verdict::KnownVersionDifference`], not a
//! failure.
//!
//! Raw commands in the setup (`vsctl`, `ofctl`, `appctl` steps and `start`'s `vsctl_args`)
//! are split into words by [`split_words`], a small POSIX-shell word splitter (quotes and
//! backslashes, no expansion), and run without a shell.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::compare::{actions_match, CompareMode};
use crate::ovs::{OvsError, OvsReference, TraceResult};

/// What went wrong loading or replaying a trace case.
#[derive(Debug, thiserror::Error)]
pub enum CaseError {
    /// The case file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A line is not a valid case.
    #[error("{path}:{line}: not a trace case: {source}")]
    Parse {
        /// The file.
        path: String,
        /// The 1-based line number.
        line: usize,
        /// The JSON error.
        source: serde_json::Error,
    },
    /// A raw setup command could not be split into words or names an unexpected program.
    #[error("bad setup command `{cmd}`: {reason}")]
    BadCommand {
        /// The command.
        cmd: String,
        /// Why.
        reason: String,
    },
    /// The reference OVS failed or rejected a step.
    #[error("case {id}: {source}")]
    Ovs {
        /// The case id.
        id: String,
        /// The OVS error.
        source: OvsError,
    },
}

/// A bridge as the case summarises it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BridgeInfo {
    /// `secure` or `standalone`.
    pub fail_mode: String,
}

/// A value that OVSDB prints as a scalar when the set has one element.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany<T> {
    /// One value.
    One(T),
    /// Several values.
    Many(Vec<T>),
}

impl<T: Clone> OneOrMany<T> {
    /// The values as a list.
    pub fn to_vec(&self) -> Vec<T> {
        match self {
            Self::One(v) => vec![v.clone()],
            Self::Many(v) => v.clone(),
        }
    }
}

/// An OpenFlow port number as the case prints it: a number or `LOCAL`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum OfPortRef {
    /// A numbered port.
    Number(u32),
    /// A named port such as `LOCAL`.
    Name(String),
}

/// One port of a bridge, read from the reference OVS after setup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BridgePort {
    /// The bridge.
    pub bridge: String,
    /// The port name (`p1`, `br0`, `patch10`).
    pub name: String,
    /// The OpenFlow port.
    pub ofport: OfPortRef,
    /// The datapath port; `None` for patch ports.
    pub dp_port: Option<u32>,
    /// The interface type (`dummy`, `dummy-internal`, `patch`).
    #[serde(rename = "type")]
    pub port_type: String,
    /// Interface options as OVS prints them (`peer=patch20`).
    #[serde(default)]
    pub options: Option<String>,
    /// Access VLAN.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<u16>,
    /// Trunk VLANs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trunks: Option<OneOrMany<u16>>,
    /// `access`, `trunk`, `native-tagged`, `native-untagged` or `dot1q-tunnel`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan_mode: Option<String>,
    /// Customer VLANs of a `dot1q-tunnel` port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cvlans: Option<OneOrMany<u16>>,
    /// The Port row's `other_config`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_config: Option<BTreeMap<String, String>>,
}

/// A Mirror row; ports are given by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mirror {
    /// The mirror's name.
    pub name: String,
    /// Mirror every packet.
    #[serde(default)]
    pub select_all: bool,
    /// Mirror packets received on these ports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub select_src_port: Option<OneOrMany<String>>,
    /// Mirror packets sent on these ports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub select_dst_port: Option<OneOrMany<String>>,
    /// Mirror only these VLANs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub select_vlan: Option<OneOrMany<u16>>,
    /// Send the copies to this port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_port: Option<String>,
    /// Send the copies to this VLAN.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_vlan: Option<u16>,
}

/// How the trace input is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InputSyntax {
    /// ovs-ofctl syntax: `in_port=1,dl_src=..`; `in_port` is an OpenFlow port.
    Openflow,
    /// OVS datapath flow-key syntax: `in_port(1),eth(..)`; `in_port` is a datapath port.
    Odp,
}

/// The result recorded from Debian's OVS 3.1.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReferenceCheck {
    /// The version that was checked.
    pub ovs_version: String,
    /// Whether it agreed with `expected_datapath_actions`.
    pub agrees: bool,
    /// Its `Datapath actions:` line.
    pub datapath_actions: Option<String>,
    /// Its `Megaflow:` line.
    #[serde(default)]
    pub megaflow: Option<String>,
}

/// One step of a case's setup, replayed in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum SetupStep {
    /// Create `br0` as OVS's test macro does, then apply `vsctl_args` (ovs-vsctl words,
    /// commands joined by ` -- `).
    Start {
        /// Extra ovs-vsctl commands.
        #[serde(default)]
        vsctl_args: String,
    },
    /// Add ports `pN` with OpenFlow port `N`.
    AddOfPorts {
        /// The bridge.
        bridge: String,
        /// The port numbers.
        ports: Vec<u32>,
    },
    /// Create `brN` like `start` does for `br0`.
    AddOfBr {
        /// N.
        brnum: u32,
        /// Extra ovs-vsctl commands.
        #[serde(default)]
        extra: String,
    },
    /// A raw `ovs-vsctl ...` command.
    Vsctl {
        /// The command line.
        cmd: String,
    },
    /// A raw `ovs-ofctl ...` command.
    Ofctl {
        /// The command line.
        cmd: String,
    },
    /// A raw `ovs-appctl ...` command.
    Appctl {
        /// The command line.
        cmd: String,
    },
    /// `ovs-ofctl [OPTIONS] add-flows BRIDGE`.
    AddFlows {
        /// The bridge.
        bridge: String,
        /// For example `-O OpenFlow13`.
        #[serde(default)]
        ofctl_options: Option<String>,
        /// The flows, in ovs-ofctl syntax.
        flows: Vec<String>,
    },
    /// `ovs-ofctl [OPTIONS] replace-flows BRIDGE`.
    ReplaceFlows {
        /// The bridge.
        bridge: String,
        /// For example `-O OpenFlow13`.
        #[serde(default)]
        ofctl_options: Option<String>,
        /// The flows, in ovs-ofctl syntax.
        flows: Vec<String>,
    },
    /// `ovs-ofctl del-flows BRIDGE [MATCH]`.
    DelFlows {
        /// The bridge.
        bridge: String,
        /// The match; empty deletes every flow.
        #[serde(default, rename = "match")]
        flow_match: Option<String>,
    },
    /// An earlier `ofproto/trace ... -generate` (it learns MACs).
    TraceGenerate {
        /// The bridge or datapath; `None` lets OVS pick.
        #[serde(default)]
        bridge: Option<String>,
        /// The packet.
        flow: String,
    },
}

/// One line of `ovs-trace-cases.jsonl`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceCase {
    /// `<source file stem>:<line>`, e.g. `ofproto-dpif:961`.
    pub id: String,
    /// The OVS test file.
    pub source_file: String,
    /// The line of the `ofproto/trace` call.
    pub source_line: u32,
    /// The OVS commit the case comes from.
    pub ovs_commit: String,
    /// The OVS test's title.
    pub test_name: String,
    /// The bridges and their fail modes.
    pub bridges: BTreeMap<String, BridgeInfo>,
    /// Every port after setup.
    pub bridge_ports: Vec<BridgePort>,
    /// Mirror rows.
    #[serde(default)]
    pub mirrors: Vec<Mirror>,
    /// The flows in force when the trace runs, per bridge.
    #[serde(default)]
    pub flows: BTreeMap<String, Vec<String>>,
    /// The bridge for a bridge-level trace; `ovs-dummy` or `None` for a datapath-level one.
    pub trace_bridge: Option<String>,
    /// The packet, exactly as the test gives it.
    pub trace_input: String,
    /// The syntax of `trace_input`.
    pub trace_input_syntax: InputSyntax,
    /// The packet in OpenFlow syntax as OVS 3.1 printed it.
    pub trace_input_openflow: String,
    /// Extra trace options such as `-generate`.
    #[serde(default)]
    pub trace_options: Vec<String>,
    /// The text after `Datapath actions: `.
    pub expected_datapath_actions: String,
    /// How to compare.
    pub compare: CompareMode,
    /// The test's `Megaflow:` line, if it had one.
    #[serde(default)]
    pub expected_megaflow: Option<String>,
    /// Feature tags.
    #[serde(default)]
    pub features: Vec<String>,
    /// The ordered setup steps.
    pub setup: Vec<SetupStep>,
    /// Notes on derived or changed cases.
    #[serde(default)]
    pub note: Option<String>,
    /// The result from Debian's OVS 3.1.
    #[serde(default)]
    pub reference_check: Option<ReferenceCheck>,
}

impl TraceCase {
    /// Whether `got` matches the expected actions by the case's compare mode.
    pub fn matches(&self, got: &str) -> bool {
        actions_match(
            self.compare,
            &self.expected_datapath_actions,
            got,
            &self.trace_input,
        )
    }

    /// The answer of Debian's OVS 3.1 if it is recorded to differ from the expectation.
    pub fn known_version_difference(&self) -> Option<&str> {
        self.reference_check
            .as_ref()
            .filter(|r| !r.agrees)
            .and_then(|r| r.datapath_actions.as_deref())
    }

    /// Classifies an answer: a match, a known version difference, or a failure.
    pub fn verdict(&self, got: &str) -> Verdict {
        if self.matches(got) {
            Verdict::Pass
        } else if self
            .known_version_difference()
            .is_some_and(|known| actions_match(self.compare, known, got, &self.trace_input))
        {
            Verdict::KnownVersionDifference
        } else {
            Verdict::Fail
        }
    }
}

/// Parses a JSON-lines case file's text; `path` names it in errors.
pub fn parse_cases(text: &str, path: &str) -> Result<Vec<TraceCase>, CaseError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|source| CaseError::Parse {
                path: path.to_owned(),
                line: i + 1,
                source,
            })
        })
        .collect()
}

/// Reads and parses a JSON-lines case file.
pub fn load_cases(path: &Path) -> Result<Vec<TraceCase>, CaseError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| CaseError::Read {
        path: name.clone(),
        source,
    })?;
    parse_cases(&text, &name)
}

/// How a replayed case ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The actions match the expectation.
    Pass,
    /// They do not, but they are what `reference_check` records for OVS 3.1.
    KnownVersionDifference,
    /// They do not match.
    Fail,
}

impl Verdict {
    /// `PASS`, `KNOWN` or `FAIL`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "PASS",
            Self::KnownVersionDifference => "KNOWN",
            Self::Fail => "FAIL",
        }
    }
}

/// The result of replaying one case.
#[derive(Debug, Clone)]
pub struct CaseOutcome {
    /// The trace as OVS printed it.
    pub trace: TraceResult,
    /// How it compares with the expectation.
    pub verdict: Verdict,
}

/// Splits a command line into words like a POSIX shell, without any expansion: whitespace
/// separates words, `'...'` is literal, `"..."` allows `\"` and `\\`, and a backslash outside
/// quotes escapes the next character.
pub fn split_words(line: &str) -> Result<Vec<String>, CaseError> {
    let bad = |reason: &str| CaseError::BadCommand {
        cmd: line.to_owned(),
        reason: reason.to_owned(),
    };
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => cur.push(c),
                        None => return Err(bad("unterminated single quote")),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => cur.push(c),
                            Some(c) => {
                                cur.push('\\');
                                cur.push(c);
                            }
                            None => return Err(bad("unterminated double quote")),
                        },
                        Some(c) => cur.push(c),
                        None => return Err(bad("unterminated double quote")),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some(c) => cur.push(c),
                    None => return Err(bad("trailing backslash")),
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

/// Splits `cmd` and checks that its first word is `program`; returns the arguments.
fn command_args(cmd: &str, program: &str) -> Result<Vec<String>, CaseError> {
    let mut words = split_words(cmd)?;
    if words.first().map(String::as_str) != Some(program) {
        return Err(CaseError::BadCommand {
            cmd: cmd.to_owned(),
            reason: format!("expected a `{program}` command"),
        });
    }
    words.remove(0);
    Ok(words)
}

/// Replays one setup step on `ovs`.
pub fn replay_step(ovs: &mut OvsReference, id: &str, step: &SetupStep) -> Result<(), CaseError> {
    let ovs_err = |source| CaseError::Ovs {
        id: id.to_owned(),
        source,
    };
    match step {
        SetupStep::Start { vsctl_args } => ovs
            .add_bridge(0, &split_words(vsctl_args)?)
            .map_err(ovs_err),
        SetupStep::AddOfBr { brnum, extra } => ovs
            .add_bridge(*brnum, &split_words(extra)?)
            .map_err(ovs_err),
        SetupStep::AddOfPorts { bridge, ports } => ovs.add_of_ports(bridge, ports).map_err(ovs_err),
        SetupStep::Vsctl { cmd } => ovs
            .vsctl(&command_args(cmd, "ovs-vsctl")?)
            .map(drop)
            .map_err(ovs_err),
        SetupStep::Ofctl { cmd } => ovs
            .ofctl(&command_args(cmd, "ovs-ofctl")?)
            .map(drop)
            .map_err(ovs_err),
        SetupStep::Appctl { cmd } => ovs
            .appctl(&command_args(cmd, "ovs-appctl")?)
            .map(drop)
            .map_err(ovs_err),
        SetupStep::AddFlows {
            bridge,
            ofctl_options,
            flows,
        } => {
            let opts = split_words(ofctl_options.as_deref().unwrap_or_default())?;
            ovs.add_flows(bridge, &opts, flows).map_err(ovs_err)
        }
        SetupStep::ReplaceFlows {
            bridge,
            ofctl_options,
            flows,
        } => {
            let opts = split_words(ofctl_options.as_deref().unwrap_or_default())?;
            ovs.replace_flows(bridge, &opts, flows).map_err(ovs_err)
        }
        SetupStep::DelFlows { bridge, flow_match } => {
            let mut args = vec!["del-flows", bridge.as_str()];
            args.extend(flow_match.as_deref().filter(|m| !m.trim().is_empty()));
            ovs.ofctl(&args).map(drop).map_err(ovs_err)
        }
        SetupStep::TraceGenerate { bridge, flow } => ovs
            .trace(bridge.as_deref(), flow, &["-generate"])
            .map(drop)
            .map_err(ovs_err),
    }
}

/// Resets `ovs`, replays the case's setup and trace, and compares the result.
pub fn replay_on_ovs(ovs: &mut OvsReference, case: &TraceCase) -> Result<CaseOutcome, CaseError> {
    let ovs_err = |source| CaseError::Ovs {
        id: case.id.clone(),
        source,
    };
    ovs.reset().map_err(ovs_err)?;
    for step in &case.setup {
        replay_step(ovs, &case.id, step)?;
    }
    // A mismatch is traced again, after a pause, before it counts: OVS applies some setup
    // (a port's `noflood` from `ovs-ofctl mod-port`) to its translation only at a later pass of
    // its main loop, and a trace right after may still see the old port. On a loaded machine the
    // suite saw that once (`ofproto-dpif:2054` with port 6 flooded). A real difference stays.
    let mut tries = 0;
    loop {
        let trace = ovs
            .trace(
                case.trace_bridge.as_deref(),
                &case.trace_input,
                &case.trace_options,
            )
            .map_err(ovs_err)?;
        let verdict = case.verdict(&trace.datapath_actions);
        tries += 1;
        if matches!(verdict, Verdict::Pass | Verdict::KnownVersionDifference)
            || tries == TRACE_TRIES
        {
            return Ok(CaseOutcome { trace, verdict });
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Traces of a case on OVS before a mismatch counts ([`replay_on_ovs`]).
const TRACE_TRIES: u32 = 3;

#[cfg(test)]
mod tests {
    use super::*;

    const CASES: &str = include_str!("../../../testdata/ovs-trace-cases.jsonl");

    #[test]
    fn parse_cases_reads_all_fifty() {
        let cases = parse_cases(CASES, "ovs-trace-cases.jsonl").expect("the shipped file parses");
        assert_eq!(cases.len(), 50);
        let odp = cases
            .iter()
            .filter(|c| c.trace_input_syntax == InputSyntax::Odp)
            .count();
        assert!(odp > 0);
        let known: Vec<_> = cases
            .iter()
            .filter(|c| c.known_version_difference().is_some())
            .map(|c| c.id.as_str())
            .collect();
        assert_eq!(known, ["ofproto-dpif:6103"]);
    }

    #[test]
    fn parse_cases_roundtrip_through_serde() {
        for case in parse_cases(CASES, "x").expect("parses") {
            let text = serde_json::to_string(&case).expect("serializes");
            let back: TraceCase = serde_json::from_str(&text).expect("parses back");
            assert_eq!(back, case);
        }
    }

    #[test]
    fn parse_cases_bad_line_names_line() {
        let err = parse_cases("\n{}\n", "f").expect_err("not a case");
        assert!(err.to_string().starts_with("f:2:"), "{err}");
    }

    #[test]
    fn verdict_known_version_difference() {
        let mut case = parse_cases(CASES, "x")
            .expect("parses")
            .into_iter()
            .find(|c| c.id == "ofproto-dpif:6103")
            .expect("present");
        assert_eq!(
            case.verdict(&case.expected_datapath_actions.clone()),
            Verdict::Pass
        );
        assert_eq!(
            case.verdict("3,push_vlan(vid=17,pcp=0),2"),
            Verdict::KnownVersionDifference
        );
        assert_eq!(case.verdict("2"), Verdict::Fail);
        case.reference_check = None;
        assert_eq!(case.verdict("3,push_vlan(vid=17,pcp=0),2"), Verdict::Fail);
    }

    #[test]
    fn split_words_handles_quotes_and_escapes() {
        assert_eq!(split_words("a  b\tc").expect("ok"), ["a", "b", "c"]);
        assert_eq!(
            split_words(r#"x 'a b' "c \"d\"" e\ f"#).expect("ok"),
            ["x", "a b", r#"c "d""#, "e f"]
        );
        assert_eq!(split_words("''").expect("ok"), [""]);
        assert!(split_words("").expect("ok").is_empty());
        assert!(split_words("'open").is_err());
    }

    #[test]
    fn command_args_checks_program() {
        assert_eq!(
            command_args("ovs-ofctl mod-port br0 5 noforward", "ovs-ofctl").expect("ok"),
            ["mod-port", "br0", "5", "noforward"]
        );
        assert!(command_args("rm -rf /", "ovs-vsctl").is_err());
    }
}
