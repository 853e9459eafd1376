//! Every `trace_input_openflow` packet of `testdata/ovs-trace-cases.jsonl` (OVS's own
//! `Flow:` lines) parses into a key that prints back identically.

use openflow::ofctl::{format_flow_key, parse_flow_key};
use serde_json::Value;

#[test]
fn trace_inputs_roundtrip_through_flow_key() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/ovs-trace-cases.jsonl"
    );
    let Ok(text) = std::fs::read_to_string(path) else {
        panic!("{path} is missing");
    };
    let mut n = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let c: Value = serde_json::from_str(line).expect("each line is JSON");
        let Some(flow) = c.get("trace_input_openflow").and_then(Value::as_str) else {
            continue;
        };
        let key = parse_flow_key(flow).unwrap_or_else(|e| panic!("{flow}: {e}"));
        assert_eq!(format_flow_key(&key), flow);
        n += 1;
    }
    assert!(n > 0);
}
