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
    assert!(r.is_clean(), "{r:#?}");
    assert_eq!(r.flows_seen, 64);
    assert_eq!(r.megaflows, 64, "the established megaflows survive: {r:#?}");
    assert_eq!(r.retranslated, 0, "no inserted rule overlaps them: {r:#?}");
}
