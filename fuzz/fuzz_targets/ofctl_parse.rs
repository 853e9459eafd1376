//! Fuzzes the ovs-ofctl flow parser: any text gets a flow or an error, never a panic, and a
//! flow that parses prints as text that parses again.
#![no_main]
use libfuzzer_sys::fuzz_target;
use openflow::action::OfVersion;
use openflow::ofctl::{parse_flow, ParseOptions};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let opts = ParseOptions::default();
    if let Ok(parsed) = parse_flow(text, &opts) {
        for v in [OfVersion::Of10, OfVersion::Of11, OfVersion::Of13] {
            let printed = parsed.flow.to_ofctl_string(v);
            // Printing must not panic; re-parsing the printed form must not panic either.
            let _ = parse_flow(&printed, &opts);
        }
    }
});
