//! Scratch: mixed-mask single lookups (`N LOOKUPS [miss] [nowc] [ovs|exact] [commit] [compiled]`;
//! `ovs`: OVS's benchmark set, `exact`: the exact 5-tuple set; `commit`: N single commits
//! instead), for callgrind and A/B runs.
#![allow(missing_docs)]
#[path = "../src/bin/classifier-bench/gen.rs"]
#[allow(dead_code)]
mod gen;
use std::hint::black_box;

use packet::key::FlowKey;
fn main() {
    let mut a = std::env::args().skip(1);
    let n: usize = a.next().and_then(|v| v.parse().ok()).unwrap_or(1000);
    let look: usize = a.next().and_then(|v| v.parse().ok()).unwrap_or(200_000);
    let flags: Vec<String> = a.collect();
    let miss = flags.iter().any(|f| f == "miss");
    let track = !flags.iter().any(|f| f == "nowc");
    let w = if flags.iter().any(|f| f == "ovs") {
        gen::ovs_like(n, 16, 1)
    } else if flags.iter().any(|f| f == "exact") {
        gen::exact(n, 1)
    } else {
        gen::mixed(n, 20, 1)
    };
    if flags.iter().any(|f| f == "commit") {
        // Single commits of the set's rules into an empty classifier.
        let mut c: classifier::Classifier<u64> = classifier::Classifier::new();
        let t = std::time::Instant::now();
        for (i, (m, p)) in w.rules.iter().enumerate() {
            c.insert(m, *p, 0, i as u64).expect("a valid rule");
        }
        let el = t.elapsed().as_secs_f64();
        println!("{n} rules: {:.2}M single commits/s", n as f64 / el / 1e6);
        return;
    }
    let mut c = gen::load(&w);
    if flags.iter().any(|f| f == "compiled") {
        println!("compiled: {}", c.compile());
    }
    let r = c.reader();
    let snap = r.snapshot();
    let keys = if miss { &w.misses } else { &w.hits };
    // The consulted bits, counted outside the timed loop (a popcount of 45 words costs more
    // than a lookup without `popcnt`).
    let mut bits = 0u64;
    for k in keys.iter().take(10_000) {
        let mut wc = FlowKey::default();
        snap.lookup(k, Some(&mut wc));
        bits += u64::from(wc.count_ones());
    }
    let sample = keys.len().min(10_000);
    let t = std::time::Instant::now();
    let mut hits = 0usize;
    for i in 0..look {
        let mut wc = FlowKey::default();
        let k = &keys[i % keys.len()];
        hits += usize::from(snap.lookup(k, track.then_some(&mut wc)).is_some());
        black_box(&wc);
    }
    let el = t.elapsed().as_secs_f64();
    println!(
        "{n} rules: {:.2}M/s hits {hits} avg wc bits {:.1}",
        look as f64 / el / 1e6,
        bits as f64 / sample as f64
    );
}
