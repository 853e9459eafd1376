//! Replays OVS case files through ferrovs.
//!
//! A case file is JSON lines, one case per line, in the format of
//! `testdata/ofctl-parse-cases.jsonl` (see `testdata/README.md`). [`replay_parse_file`]
//! checks every case with [`openflow::cases::replay_parse_case`] and returns a report that
//! prints one line per failing case and ends with `N passed, M failed`, so any file of cases
//! in the same format (OVS has many more) can be checked without recompiling.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::fmt::Write as _;

use openflow::cases::{replay_parse_case, ParseCase};
use serde::Deserialize;

/// One line of a parse-case file. Unknown fields are ignored.
#[derive(Debug, Clone, Deserialize)]
pub struct ParseCaseLine {
    /// Case id, e.g. `ovs-ofctl:241`.
    pub id: String,
    /// `normalize`, `usable_protocols` or `error`.
    pub kind: String,
    /// ovs-ofctl options.
    #[serde(default)]
    pub ofctl_options: String,
    /// Flow text.
    pub input: String,
    /// Expected normalized text (kind `normalize`).
    #[serde(default)]
    pub normalized: Option<String>,
    /// Expected usable protocols (kind `usable_protocols`).
    #[serde(default)]
    pub usable_protocols: Option<String>,
    /// Expected error message (kind `error`).
    #[serde(default)]
    pub expected_error: Option<String>,
    /// The protocol ovs-ofctl chose for the case's file.
    #[serde(default)]
    pub chosen_protocol: Option<String>,
    /// Whether the case is in the common subset (no NXM-only features).
    #[serde(default)]
    pub common: bool,
}

/// The outcome of one case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseOutcome {
    /// Case id.
    pub id: String,
    /// Case kind.
    pub kind: String,
    /// Whether it is in the common subset.
    pub common: bool,
    /// `Err` with a one-line explanation on failure.
    pub result: Result<(), String>,
}

/// The outcome of a whole file.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Every case, in file order.
    pub outcomes: Vec<CaseOutcome>,
}

impl Report {
    /// Number of passing cases.
    pub fn passed(&self) -> usize {
        self.outcomes.iter().filter(|o| o.result.is_ok()).count()
    }

    /// Number of failing cases.
    pub fn failed(&self) -> usize {
        self.outcomes.len() - self.passed()
    }

    /// Passed/total among the cases selected by `pred`.
    pub fn count(&self, pred: impl Fn(&CaseOutcome) -> bool) -> (usize, usize) {
        let sel: Vec<_> = self.outcomes.iter().filter(|o| pred(o)).collect();
        (sel.iter().filter(|o| o.result.is_ok()).count(), sel.len())
    }

    /// The printed report: one line per failing case, a breakdown, and the closing
    /// `N passed, M failed` line.
    pub fn render(&self, show_failures: bool) -> String {
        let mut out = String::new();
        if show_failures {
            for o in self.outcomes.iter().filter(|o| o.result.is_err()) {
                let why = o
                    .result
                    .as_ref()
                    .err()
                    .map(String::as_str)
                    .unwrap_or_default();
                let _ = writeln!(
                    out,
                    "FAIL {} [{}{}]: {why}",
                    o.id,
                    o.kind,
                    if o.common { ", common" } else { "" }
                );
            }
        }
        for kind in ["normalize", "usable_protocols", "error", "trace"] {
            let (p, n) = self.count(|o| o.kind == kind);
            if n > 0 {
                let _ = writeln!(out, "  {kind:<17} {p}/{n}");
            }
        }
        let (p, n) = self.count(|o| o.common);
        if n > 0 {
            let _ = writeln!(out, "  {:<17} {p}/{n}", "common: true");
        }
        let _ = writeln!(out, "{} passed, {} failed", self.passed(), self.failed());
        out
    }
}

/// Replays every trace case of a JSON-lines text (the format of
/// `testdata/ovs-trace-cases.jsonl`) through the pipeline. A line that is not a valid case is
/// a failing case named by its line number.
pub fn replay_trace_file(text: &str) -> Report {
    replay_lines(text, |raw| {
        let case = pipeline::cases::json::trace_case_from_json(raw)?;
        let out = pipeline::cases::replay_trace_case(&case);
        let result = if out.passed {
            Ok(())
        } else {
            Err(out.reason.unwrap_or_else(|| format!("got `{}`", out.got)))
        };
        Ok(CaseOutcome {
            id: case.id,
            kind: "trace".into(),
            common: false,
            result,
        })
    })
}

/// Replays each non-empty line with `replay`; a line it cannot read (`Err`) becomes a
/// failing case named by its line number.
fn replay_lines(text: &str, replay: impl Fn(&str) -> Result<CaseOutcome, String>) -> Report {
    let mut report = Report::default();
    for (n, raw) in text.lines().enumerate() {
        if raw.trim().is_empty() {
            continue;
        }
        let outcome = replay(raw).unwrap_or_else(|e| CaseOutcome {
            id: format!("line {}", n + 1),
            kind: "invalid".into(),
            common: false,
            result: Err(format!("not a case: {e}")),
        });
        report.outcomes.push(outcome);
    }
    report
}

/// Replays one parsed line.
pub fn replay_line(line: &ParseCaseLine) -> CaseOutcome {
    let expected = match line.kind.as_str() {
        "normalize" => line.normalized.as_deref(),
        "usable_protocols" => line.usable_protocols.as_deref(),
        "error" => line.expected_error.as_deref(),
        _ => None,
    };
    let result = match expected {
        None => Err(format!(
            "case of kind {:?} has no expected value",
            line.kind
        )),
        Some(expected) => replay_parse_case(&ParseCase {
            kind: &line.kind,
            ofctl_options: &line.ofctl_options,
            input: &line.input,
            expected,
            chosen_protocol: line.chosen_protocol.as_deref(),
        }),
    };
    CaseOutcome {
        id: line.id.clone(),
        kind: line.kind.clone(),
        common: line.common,
        result,
    }
}

/// Replays every case of a JSON-lines text. A line that is not valid JSON is a failing
/// case named by its line number, not an abort.
pub fn replay_parse_file(text: &str) -> Report {
    replay_lines(text, |raw| {
        serde_json::from_str::<ParseCaseLine>(raw)
            .map(|line| replay_line(&line))
            .map_err(|e| e.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_trace_file_reports_bad_lines_and_wrong_answers() {
        let good = r#"{"id":"t1","setup":[{"op":"start","vsctl_args":""},{"op":"add_of_ports","bridge":"br0","ports":[1,2]},{"op":"add_flows","bridge":"br0","ofctl_options":"","flows":["in_port=1,actions=output:2"]}],"trace_bridge":"br0","trace_input":"in_port=1","trace_input_syntax":"openflow","expected_datapath_actions":"2","compare":"exact"}"#;
        let wrong = good.replace(r#""id":"t1""#, r#""id":"t2""#).replace(
            r#""expected_datapath_actions":"2""#,
            r#""expected_datapath_actions":"3""#,
        );
        let r = replay_trace_file(&format!("{good}\n{wrong}\n{{bad\n"));
        assert_eq!((r.passed(), r.failed()), (1, 2));
        assert!(r.render(true).contains("FAIL t2 [trace]"));
    }

    #[test]
    fn replay_parse_file_counts_and_survives_bad_lines() {
        let text = r#"{"id":"a","kind":"normalize","input":"tcp,tp_src=123,actions=flood","normalized":"tcp,tp_src=123 actions=FLOOD","common":true}
not json
{"id":"b","kind":"error","input":"ip,nw_ttl=5/1,actions=drop","expected_error":"wrong message"}
"#;
        let r = replay_parse_file(text);
        assert_eq!((r.passed(), r.failed()), (1, 2));
        let s = r.render(true);
        assert!(s.ends_with("1 passed, 2 failed\n"), "{s}");
        assert!(s.contains("FAIL line 2"));
        assert!(s.contains("FAIL b [error]"));
    }
}
