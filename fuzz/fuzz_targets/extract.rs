//! Fuzzes FlowKey extraction: it must never panic on any bytes, and the offsets it reports
//! must lie inside the frame.
#![no_main]
use libfuzzer_sys::fuzz_target;
use packet::extract::extract;
use packet::FlowKey;

fuzz_target!(|data: &[u8]| {
    let mut key = FlowKey::default();
    let info = extract(data, &mut key);
    for off in [info.l2, info.l2_5, info.l3, info.l4].into_iter().flatten() {
        assert!(off <= data.len());
    }
    // Extraction must not depend on what the key held before.
    let mut dirty = FlowKey::all_ones();
    assert_eq!(extract(data, &mut dirty), info);
});
