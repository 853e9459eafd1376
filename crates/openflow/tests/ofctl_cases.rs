//! Replays `testdata/ofctl-parse-cases.jsonl` (OVS `tests/ovs-ofctl.at`): prints one line
//! per failing case and `N passed, M failed`, and asserts that every `common` case and
//! every `error` case passes.

use openflow::cases::{replay_parse_case, ParseCase};
use serde_json::Value;

#[test]
fn ofctl_parse_cases_replay() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/ofctl-parse-cases.jsonl"
    );
    let text = std::fs::read_to_string(path).expect("testdata/ofctl-parse-cases.jsonl exists");
    let (mut passed, mut failed) = (0, 0);
    let mut must_pass_failures = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let c: Value = serde_json::from_str(line).expect("each line is JSON");
        let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("");
        let kind = s("kind");
        let expected = match kind {
            "normalize" => s("normalized"),
            "usable_protocols" => s("usable_protocols"),
            _ => s("expected_error"),
        };
        let case = ParseCase {
            kind,
            ofctl_options: s("ofctl_options"),
            input: s("input"),
            expected,
            chosen_protocol: c.get("chosen_protocol").and_then(Value::as_str),
        };
        let common = c.get("common").and_then(Value::as_bool).unwrap_or(false);
        match replay_parse_case(&case) {
            Ok(()) => passed += 1,
            Err(why) => {
                failed += 1;
                let tag = if common { "common" } else { "-" };
                println!("FAIL {} [{kind} {tag}] {}: {why}", s("id"), case.input);
                if common || kind == "error" {
                    must_pass_failures.push(s("id").to_string());
                }
            }
        }
    }
    println!("{passed} passed, {failed} failed");
    assert!(
        must_pass_failures.is_empty(),
        "common or error cases failed: {must_pass_failures:?}"
    );
}
