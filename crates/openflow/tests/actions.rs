//! Replays the action side of the ovs-ofctl parse cases
//! (`/work/shared/acceptance/ofctl-parse-cases.jsonl`, kind `normalize`): the text after
//! `actions=` is parsed with the case's match and printed for the case's protocol, and
//! must equal the action part of OVS's normalized form.
//!
//! The match comes from [`openflow::ofctl::parse_match`] after removing the flow-level
//! keywords (timeouts, priority, cookie, flags). Every case whose match parses must pass;
//! the test prints how many were replayed.

use std::path::PathBuf;

use openflow::action::OfVersion;
use openflow::field::Protocols;
use openflow::ofctl::actions::{format_actions, parse_actions, ActionContext};
use openflow::ofctl::parse_match;

fn cases_path() -> Option<PathBuf> {
    let p = PathBuf::from("/work/shared/acceptance/ofctl-parse-cases.jsonl");
    if p.exists() {
        return Some(p);
    }
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/ofctl-parse-cases.jsonl");
    p.exists().then_some(p)
}

/// The protocol version ovs-ofctl prints with for these options.
fn version_of(options: &str) -> OfVersion {
    if options.contains("OpenFlow15") {
        OfVersion::Of15
    } else if options.contains("OpenFlow14") {
        OfVersion::Of14
    } else if options.contains("OpenFlow13") {
        OfVersion::Of13
    } else if options.contains("OpenFlow12") {
        OfVersion::Of12
    } else if options.contains("OpenFlow11") {
        OfVersion::Of11
    } else {
        OfVersion::Of10
    }
}

/// Flow keywords that are not part of the match.
const FLOW_KEYWORDS: [&str; 9] = [
    "idle_timeout",
    "hard_timeout",
    "priority",
    "cookie",
    "send_flow_rem",
    "table",
    "importance",
    "check_overlap",
    "reset_counts",
];

/// Splits `input` into its match text (flow keywords removed) and its action text.
fn split(input: &str) -> Option<(String, &str)> {
    // ovs-ofctl accepts `action=` too.
    let at = input.find("action")?;
    let rest = &input[at + "action".len()..];
    let actions = rest.strip_prefix("s=").or_else(|| rest.strip_prefix('='))?;
    let m: Vec<&str> = input[..at]
        .split([',', ' ', '\t'])
        .filter(|t| !t.is_empty())
        .filter(|t| {
            let key = t.split(['=', ':']).next().unwrap_or("");
            !FLOW_KEYWORDS.contains(&key)
        })
        .collect();
    Some((m.join(","), actions))
}

#[test]
fn replay_action_side_of_parse_cases() {
    let Some(path) = cases_path() else {
        panic!("ofctl-parse-cases.jsonl not found");
    };
    let text = std::fs::read_to_string(path).expect("readable cases file");
    let (mut passed, mut skipped) = (0, 0);
    let mut failures = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let case: serde_json::Value = serde_json::from_str(line).expect("valid JSON line");
        if case["kind"] != "normalize" {
            continue;
        }
        let id = case["id"].as_str().unwrap_or("?");
        let input = case["input"].as_str().unwrap_or("");
        let normalized = case["normalized"].as_str().unwrap_or("");
        let options = case["ofctl_options"].as_str().unwrap_or("");
        let Some((match_text, actions)) = split(input) else {
            skipped += 1;
            continue;
        };
        let Some(expected) = normalized.split("actions=").nth(1) else {
            skipped += 1;
            continue;
        };
        let Ok(m) = parse_match(&match_text) else {
            skipped += 1;
            continue;
        };
        let ctx = ActionContext::new(&m, Protocols::ANY);
        match parse_actions(actions, &ctx) {
            Ok(p) => {
                let got = format_actions(&p.actions, version_of(options));
                if got == expected {
                    passed += 1;
                } else {
                    failures.push(format!("{id}: {actions}\n  want {expected}\n  got  {got}"));
                }
            }
            Err(e) => failures.push(format!("{id}: {actions}\n  error {e}")),
        }
    }
    println!("action replay: {passed} passed, {} failed, {skipped} skipped", failures.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(passed >= 100, "only {passed} cases replayed");
}

/// Every flow of the trace cases (`ovs-trace-cases.jsonl`) must have parsable actions,
/// with the bridge's port names.
#[test]
fn trace_case_flow_actions_parse() {
    let p = PathBuf::from("/work/shared/acceptance/ovs-trace-cases.jsonl");
    let p = if p.exists() {
        p
    } else {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/ovs-trace-cases.jsonl")
    };
    let text = std::fs::read_to_string(p).expect("readable trace cases");
    let (mut parsed, mut skipped) = (0, 0);
    let mut failures = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let case: serde_json::Value = serde_json::from_str(line).expect("valid JSON line");
        let names: Vec<(String, u16)> = case["bridge_ports"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| {
                let n = p["name"].as_str()?.to_string();
                let port = u16::try_from(p["ofport"].as_u64()?).ok()?;
                Some((n, port))
            })
            .collect();
        let Some(flows) = case["flows"].as_object() else {
            continue;
        };
        for flow in flows.values().filter_map(|v| v.as_array()).flatten() {
            let Some(flow) = flow.as_str() else { continue };
            let Some((match_text, actions)) = split(flow) else {
                skipped += 1;
                continue;
            };
            // The match parser has no port names: substitute them.
            let match_text: Vec<String> = match_text
                .split(',')
                .map(|t| match t.split_once('=') {
                    Some((k, v)) => match names.iter().find(|(n, _)| n == v) {
                        Some((_, p)) => format!("{k}={p}"),
                        None => t.to_string(),
                    },
                    None => t.to_string(),
                })
                .collect();
            let Ok(m) = parse_match(&match_text.join(",")) else {
                eprintln!("skipped: {flow}");
                skipped += 1;
                continue;
            };
            let mut ctx = ActionContext::new(&m, Protocols::ANY);
            ctx.port_names = &names;
            match parse_actions(actions, &ctx) {
                Ok(_) => parsed += 1,
                Err(e) => failures.push(format!("{flow}: {e}")),
            }
        }
    }
    println!("trace flows: {parsed} parsed, {} failed, {skipped} skipped", failures.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
