//! Scratch: insertions in one process, for A/B runs of the writer (`N REPS [exact] [flags]`).
//!
//! - default: single commits into an empty table, matches read from the workload's array (`cold`)
//!   and copied 64 at a time into a buffer first (`hot`), alternated `REPS` times; `hotonly` runs
//!   the hot ones alone, `faults` prints each repetition's minor page faults, `mem` its table bytes
//!   per rule;
//! - `full`: the workload's rules but the last 100,000 (or half) loaded as one batch, then the rest
//!   committed one by one (hot), or with `batch` as one batch; `pause` sleeps 4 s after the load
//!   and after the commits, and `pause2` 3 s between building the batch and its commit, so that
//!   `perf record -D` can sample the commits alone. Exits without dropping the table.
#![allow(missing_docs)]
#[path = "../src/bin/classifier-bench/gen.rs"]
#[allow(dead_code)]
mod gen;
use std::time::{Duration, Instant};

use classifier::{Batch, Classifier};

static START: std::sync::LazyLock<Instant> = std::sync::LazyLock::new(Instant::now);

fn main() {
    let _ = *START;
    let mut a = std::env::args().skip(1);
    let n: usize = a.next().and_then(|v| v.parse().ok()).unwrap_or(262_144);
    let reps: usize = a.next().and_then(|v| v.parse().ok()).unwrap_or(3);
    let flags: Vec<String> = a.collect();
    let has = |f: &str| flags.iter().any(|x| x == f);
    let w = if has("exact") {
        gen::exact(n, 1)
    } else {
        gen::mixed(n, 20, 1)
    };
    if has("full") {
        full(&w, n, &has);
        return;
    }
    let modes: &[&str] = if has("hotonly") {
        &["hot"]
    } else {
        &["cold", "hot"]
    };
    let mut res: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    for _ in 0..reps {
        for (mi, mode) in modes.iter().enumerate() {
            let mut c: Classifier<u64> = Classifier::new();
            let f0 = mempolicy::minor_faults().unwrap_or(0);
            let secs = if *mode == "cold" {
                let t = Instant::now();
                for (i, (m, p)) in w.rules.iter().enumerate() {
                    c.insert(m, *p, 0, i as u64).expect("valid");
                }
                t.elapsed().as_secs_f64()
            } else {
                gen::insert_hot(&mut c, &w.rules)
            };
            res[mi].push(n as f64 / secs / 1e6);
            if has("faults") {
                let f = mempolicy::minor_faults().unwrap_or(0).saturating_sub(f0);
                println!("{mode}: faults {f}");
            }
            if has("mem") {
                let m = c.memory();
                println!("{mode}: table bytes/rule {}", m.table_bytes / n.max(1));
            }
        }
    }
    for (mode, all) in modes.iter().zip(&res) {
        let mut v = all.clone();
        v.sort_by(f64::total_cmp);
        println!(
            "{mode}: median {:.3}M/s best {:.3} all {:?}",
            v[v.len() / 2],
            v[v.len() - 1],
            all.iter()
                .map(|x| (x * 1000.0).round() / 1000.0)
                .collect::<Vec<_>>()
        );
    }
}

/// The `full` mode (see the file's documentation).
fn full(w: &gen::Workload, n: usize, has: &dyn Fn(&str) -> bool) {
    let base = n.saturating_sub(100_000).max(n / 2);
    let mut c = gen::load(&gen::Workload {
        rules: w.rules[..base].to_vec(),
        hits: Vec::new(),
        misses: Vec::new(),
    });
    c.settle();
    let rest = &w.rules[base..];
    eprintln!("loaded at {:?}", START.elapsed());
    if has("pause") {
        std::thread::sleep(Duration::from_secs(4));
    }
    if has("batch") {
        let mut b = Batch::new();
        for (m, p) in rest {
            b.insert(m, *p, 0, 0);
        }
        if has("pause2") {
            eprintln!("built at {:?}", START.elapsed());
            std::thread::sleep(Duration::from_secs(3));
        }
        let t = Instant::now();
        c.commit(b).expect("valid");
        let el = t.elapsed().as_secs_f64();
        println!("batch: {} into {base}: {el:.4}s", rest.len());
    } else {
        let secs = gen::insert_hot(&mut c, rest);
        println!(
            "full: {} into {base}: {:.3}M/s",
            rest.len(),
            rest.len() as f64 / secs / 1e6
        );
    }
    if has("pause") {
        std::thread::sleep(Duration::from_secs(4));
    }
    // The table is left to the exit: its drop is no part of what is measured.
    std::process::exit(0);
}
