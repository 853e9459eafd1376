//! The ferrovs side of `ferrovs-bench datapath`, one tiny point in-process (100 flows, the
//! shortest windows: about 3 s): the JSON object `--json` prints for it has every field the
//! reports read, with values that say the point was measured.

use bench::ferrovs::{run_point, SYSTEM};
use bench::point::{Point, Ruleset, RunOptions};
use serde_json::Value;

#[test]
fn one_ferrovs_point_reports_every_json_field() {
    let point = Point {
        frame_len: 64,
        flows: 100,
        ruleset: Ruleset::Exact,
    };
    let opts = RunOptions {
        seconds: 0.5,
        // One 1-s warm-up sample, then the window (the warm-up reports that it timed out).
        warmup_min_secs: 0.0,
        warmup_max_secs: 1.0,
        // Not pinned: the test must not take a core from whatever else runs.
        pmd_core: None,
        pcap_dir: std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("ferrovs-point-pcap"),
    };
    let r = run_point(&point, &opts).expect("the point runs");
    // What `ferrovs-bench datapath --json` prints for a result.
    let v: Value = serde_json::to_value(&r).expect("serializable");
    let line = v.to_string();
    let field = |name: &str| -> &Value {
        v.get(name)
            .unwrap_or_else(|| panic!("no field {name} in {line}"))
    };
    assert_eq!(field("system"), SYSTEM);
    assert_eq!(field("frame_len"), 64);
    assert_eq!(field("flows"), 100);
    assert_eq!(field("ruleset"), "exact");
    let num = |name: &str| {
        field(name)
            .as_f64()
            .unwrap_or_else(|| panic!("{name} is not a number in {line}"))
    };
    assert!(num("mpps") > 0.0, "{line}");
    assert!(num("cycles_per_pkt") > 0.0, "{line}");
    assert!(num("rss_bytes") > 0.0, "{line}");
    // Exact rules: one megaflow per flow, every one established during the warm-up.
    assert_eq!(field("megaflows"), 100, "{line}");
    let hits = field("hits");
    let level = |name: &str| {
        hits.get(name)
            .and_then(Value::as_u64)
            .unwrap_or_else(|| panic!("no hit count {name} in {line}"))
    };
    let levels = ["simple", "emc", "smc", "megaflow", "upcall"].map(level);
    let [simple, _emc, smc, megaflow, upcall] = levels;
    // ferrovs has neither OVS's simple-match table nor its SMC.
    assert_eq!((simple, smc), (0, 0), "{line}");
    assert!(megaflow > 0, "{line}");
    assert_eq!(
        upcall, 0,
        "the flows were all cached before the window: {line}"
    );
    assert_eq!(field("of_rules"), 101, "{line}");
    assert!(
        field("extra")
            .get("drops")
            .and_then(Value::as_u64)
            .is_some_and(|d| d == 0),
        "{line}"
    );
}
