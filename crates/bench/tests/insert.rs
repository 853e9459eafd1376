//! Rule insertion under traffic, small: every established packet still reaches its port while
//! thousands of rules are inserted in bundles, and the established megaflows survive.

use bench::insert::{run_insert, InsertOptions};

#[test]
fn insertion_under_traffic_loses_and_misdirects_nothing() {
    let r = run_insert(&InsertOptions {
        established: 64,
        rules: 4000,
        bundle: 500,
        baseline_secs: 0.3,
        warmup_secs: 0.3,
        pmd_core: None,
        inserter_core: None,
    })
    .expect("runs");
    assert!(r.received > 0);
    // Nothing lost: no drop by the PMD or by the replay port, every received packet delivered.
    assert_eq!((r.dropped, r.rx_dropped), (0, 0), "{r:#?}");
    assert_eq!(r.delivered, r.received, "{r:#?}");
    // Nothing misdirected: none to the new rules' port, every flow within one replay pass.
    assert_eq!(r.wrong_port, 0, "{r:#?}");
    assert!(r.per_flow_max - r.per_flow_min <= 1, "{r:#?}");
    assert!(r.is_clean(), "{r:#?}");
    assert_eq!(r.flows_seen, 64);
    assert_eq!(r.megaflows, 64, "the established megaflows survive: {r:#?}");
    assert_eq!(r.retranslated, 0, "no inserted rule overlaps them: {r:#?}");
}
