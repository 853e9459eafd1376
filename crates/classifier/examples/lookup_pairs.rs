//! Lookups/s at two rule counts measured in alternating short slices, so that the ratio of
//! each pair is taken under the same load (a shared machine's noise drifts slowly); prints the
//! median of each size and of the pairs' ratios, for single and batched lookups (default: hits,
//! wildcard tracking on).
//!
//! ```text
//! cargo build --release -p classifier --example lookup_pairs
//! taskset -c 1 target/release/examples/lookup_pairs [--small 1000] [--large 262144] [--pairs 60] [--set exact|mixed] [--wc on|off] [--keys hit|miss] [--grown on]
//! ```
//!
//! `--grown on` builds the large table by single-rule commits instead of one batch, so that its
//! tries are the ones in-place insertions and re-layouts leave (a batch rebuilds them laid out
//! afresh).

#![allow(missing_docs)]

#[path = "../src/bin/classifier-bench/gen.rs"]
#[allow(dead_code)]
mod gen;

use std::hint::black_box;
use std::time::Instant;

use classifier::Reader;
use packet::key::FlowKey;

fn slice(reader: &Reader<u64>, keys: &[FlowKey], n: usize, batch: bool, wc: bool) -> f64 {
    let mut i = 0;
    let mut hits = 0usize;
    let t = Instant::now();
    let mut done = 0;
    while done < n {
        let chunk = &keys[i..(i + 32).min(keys.len())];
        i = (i + chunk.len()) % keys.len();
        let snap = reader.snapshot();
        let mut wcs = [FlowKey::default(); 32];
        if batch {
            let mut out = [None; 32];
            snap.lookup_batch(chunk, &mut out, wc.then_some(&mut wcs[..]));
            hits += out.iter().filter(|r| r.is_some()).count();
        } else {
            for (k, w) in chunk.iter().zip(wcs.iter_mut()) {
                hits += usize::from(snap.lookup(k, wc.then_some(w)).is_some());
            }
        }
        black_box(&wcs);
        done += chunk.len();
    }
    black_box(hits);
    done as f64 / t.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let mut small = 1000usize;
    let mut large = 262_144usize;
    let mut pairs = 60usize;
    let mut set = String::from("exact");
    let mut wc = true;
    let mut misses = false;
    let mut grown = false;
    let mut it = std::env::args().skip(1);
    let fail = |msg: String| -> ! {
        eprintln!("{msg}");
        std::process::exit(2)
    };
    while let Some(f) = it.next() {
        let v = it.next().unwrap_or_default();
        let num = |v: &str| -> usize {
            v.parse()
                .unwrap_or_else(|e| fail(format!("{f} {v:?}: {e}")))
        };
        match f.as_str() {
            "--small" => small = num(&v),
            "--large" => large = num(&v),
            "--pairs" => pairs = num(&v).max(1),
            "--set" => set = v,
            "--wc" => wc = v == "on",
            "--keys" => misses = v == "miss",
            "--grown" => grown = v == "on",
            _ => fail(format!(
                "unknown option {f}; usage: lookup_pairs [--small N] [--large N] [--pairs N] \
                 [--set exact|mixed] [--wc on|off] [--keys hit|miss] [--grown on]"
            )),
        }
    }
    let gen = |n| {
        if set == "mixed" {
            gen::mixed(n, 20, 1)
        } else {
            gen::exact(n, 1)
        }
    };
    let (ws, wl) = (gen(small), gen(large));
    let cs = gen::load(&ws);
    let cl = if grown {
        let mut c = classifier::Classifier::new();
        for (i, (m, p)) in wl.rules.iter().enumerate() {
            c.insert(*m, *p, 0, i as u64)
                .expect("generated rules are valid");
        }
        c
    } else {
        gen::load(&wl)
    };
    let (rs, rl) = (cs.reader(), cl.reader());
    let n = 131_072;
    for batch in [false, true] {
        let (mut a, mut b, mut r) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..pairs {
            let (ks, kl) = if misses {
                (&ws.misses, &wl.misses)
            } else {
                (&ws.hits, &wl.hits)
            };
            let x = slice(&rs, ks, n, batch, wc);
            let y = slice(&rl, kl, n, batch, wc);
            a.push(x);
            b.push(y);
            r.push(y / x);
        }
        println!(
            "{set} {} wc={} api={:<6} {small}: {:.2}M/s  {large}{}: {:.2}M/s  ratio (median of {pairs} pairs) {:.2}x",
            if misses { "misses" } else { "hits" },
            if wc { "on" } else { "off" },
            if batch { "batch" } else { "single" },
            median(a) / 1e6,
            if grown { " (grown)" } else { "" },
            median(b) / 1e6,
            median(r)
        );
    }
}
