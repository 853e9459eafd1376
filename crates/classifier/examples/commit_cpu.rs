//! Batched commits of exact 5-tuple rules, timed in wall-clock and in this thread's CPU time
//! (the machine is shared: CPU time moves less with the load). For A/B runs of the commit
//! path: build this example at two commits and alternate them.
//!
//! ```text
//! cargo build --release -p classifier --example commit_cpu
//! taskset -c 1 target/release/examples/commit_cpu --reps 5
//! ```
//!
//! Points: 262,144 rules into an empty classifier as one `Batch`, the same through
//! `commit_with`, and a 100,000-rule batch into a table of 162,144 rules (the commit, then
//! its replay onto the other version at the next commit). One line each: the median of
//! `--reps` fresh classifiers. `--random` takes random 5-tuples (as `classifier-bench`'s
//! `exact` set) instead of `flowdef.py`'s; `--only-batch` runs only the 100,000-rule batch;
//! `--bundles N` instead
//! commits all 262,144 rules in commits of N, as `ferrovs-bench insert` does; `--batch N` makes it
//! N rules (into a table of 362,144 - 2N rules, at most 162,144); `--into N --add M` loads N
//! rules as one batch, then times M more as single commits (`insert`, then on a fresh load
//! `commit_with`) and, on a fresh load, as one batch
//! (as `classifier-bench`'s "into" line; `--into 262144` is where the cells double; with
//! `--only-batch`, the batch alone); `--churn N` loads 262,144 rules, then commits one batch
//! that removes `N` of them and adds `N` new ones (a `replace-flows` that changes that many),
//! and times that commit and its replay at the next one.

#![allow(missing_docs)]

use std::time::Instant;

use classifier::{Batch, Classifier};
use openflow::Match;
use packet::key::{fields, FlowKey};

/// CPU time of this thread in seconds (`/proc/thread-self/schedstat`), 0 if unknown.
fn cpu() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0.0, |ns| ns as f64 / 1e9)
}

/// Flow `i` of `shared/peers/ovs-dpdk/flowdef.py` as an exact UDP 5-tuple match.
fn rule(i: u32) -> Match {
    let mut m = Match::catch_all();
    m.set_exact(fields::DL_TYPE, 0x0800);
    m.set_exact(fields::NW_PROTO, 17);
    m.set_exact(
        fields::NW_SRC,
        u128::from((198 << 24) | (18 << 16) | (i % 65_536)),
    );
    m.set_exact(
        fields::NW_DST,
        u128::from((198 << 24) | (19 << 16) | (i / 65_536)),
    );
    m.set_exact(fields::TP_SRC, u128::from(1024 + i % 64_000));
    m.set_exact(fields::TP_DST, u128::from(1024 + i / 64_000));
    m
}

/// A random exact 5-tuple (as `classifier-bench`'s `exact` set: addresses in 10/8, random
/// source ports), distinct for distinct `i` with high probability.
fn random_rule(rng: &mut rand::rngs::SmallRng) -> Match {
    use rand::Rng;
    let mut m = Match::catch_all();
    m.set_exact(fields::DL_TYPE, 0x0800);
    m.set_exact(fields::NW_PROTO, [6u128, 17][rng.gen_range(0..2)]);
    m.set_exact(
        fields::NW_SRC,
        u128::from(0x0a00_0000 | (rng.gen::<u32>() & 0x00ff_ffff)),
    );
    m.set_exact(
        fields::NW_DST,
        u128::from(0x0a00_0000 | (rng.gen::<u32>() & 0x00ff_ffff)),
    );
    m.set_exact(fields::TP_SRC, u128::from(rng.gen_range(1024..u16::MAX)));
    m.set_exact(
        fields::TP_DST,
        [80u128, 443, 53, 22, 8080][rng.gen_range(0..5)],
    );
    m
}

/// (wall seconds, CPU seconds) of `f`.
fn timed(f: impl FnOnce()) -> (f64, f64) {
    let (t, c) = (Instant::now(), cpu());
    f();
    (t.elapsed().as_secs_f64(), cpu() - c)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn usage() -> ! {
    eprintln!(
        "usage: commit_cpu [--reps N] [--random] [--only-batch] [--batch N] [--bundles N] \
         [--into N --add M] [--churn N]"
    );
    std::process::exit(2);
}

/// A classifier holding `rules`, loaded as one batch and replayed onto its other version (so
/// that neither is timed later).
fn loaded(rules: &[Match]) -> Classifier<u64> {
    let mut cls: Classifier<u64> = Classifier::new();
    let mut b = Batch::new();
    for (i, m) in rules.iter().enumerate() {
        b.insert(*m, 100, 0, i as u64);
    }
    cls.commit(b).expect("valid rules");
    cls.commit(Batch::new()).expect("empty batch");
    cls
}

/// All of `rules` into an empty classifier, as one `Batch` (`pts[0]`) and through
/// `commit_with` (`pts[1]`).
fn full_table(rules: &[Match], pts: &mut [Vec<(f64, f64)>; 4]) {
    let mut cls: Classifier<u64> = Classifier::new();
    let mut b = Batch::new();
    for (i, m) in rules.iter().enumerate() {
        b.insert(*m, 100, 0, i as u64);
    }
    pts[0].push(timed(|| {
        cls.commit(b).expect("valid rules");
    }));
    drop(cls);
    let mut cls: Classifier<u64> = Classifier::new();
    pts[1].push(timed(|| {
        cls.commit_with(|ops| {
            ops.reserve(rules.len());
            for (i, m) in rules.iter().enumerate() {
                ops.insert(m, 100, 0, i as u64);
            }
        })
        .expect("valid rules");
    }));
}

fn main() {
    let mut reps = 5;
    let mut random = false;
    let mut only_batch = false;
    let mut batch: Option<u32> = None;
    let mut bundles: Option<usize> = None;
    let mut into: Option<usize> = None;
    let mut add = 10_000usize;
    let mut churn: Option<usize> = None;
    let mut it = std::env::args().skip(1);
    // The number after an option, or the usage.
    fn number<T: std::str::FromStr>(it: &mut impl Iterator<Item = String>) -> T {
        it.next()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| usage())
    }
    while let Some(a) = it.next() {
        match a.as_str() {
            "--random" => random = true,
            "--only-batch" => only_batch = true,
            "--bundles" => bundles = Some(number(&mut it)),
            "--into" => into = Some(number(&mut it)),
            "--add" => add = number(&mut it),
            "--churn" => churn = Some(number(&mut it)),
            "--batch" => batch = Some(number(&mut it)),
            "--reps" => reps = number(&mut it),
            _ => usage(),
        }
    }
    let n_full = 262_144u32;
    let n_batch = batch.unwrap_or(100_000);
    let n_all = (n_full + n_batch)
        .max(u32::try_from(into.unwrap_or(0) + add).unwrap_or(u32::MAX))
        .max(n_full + u32::try_from(churn.unwrap_or(0)).unwrap_or(u32::MAX));
    let rules: Vec<Match> = if random {
        use rand::SeedableRng;
        let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
        (0..n_all).map(|_| random_rule(&mut rng)).collect()
    } else {
        (0..n_all).map(rule).collect()
    };
    let _ = FlowKey::default;
    if let Some(n) = into {
        let load = || loaded(&rules[..n]);
        let more = &rules[n..n + add];
        let (mut single, mut single_ops, mut batched) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..reps {
            if !only_batch {
                let mut cls = load();
                single.push(timed(|| {
                    for m in more {
                        cls.insert(m, 100, 0, 0).expect("valid rules");
                    }
                }));
                let mut cls = load();
                single_ops.push(timed(|| {
                    for m in more {
                        cls.commit_with(|ops| {
                            ops.insert(m, 100, 0, 0);
                        })
                        .expect("valid rules");
                    }
                }));
            }
            let mut cls = load();
            let mut b = Batch::new();
            for m in more {
                b.insert(*m, 100, 0, 0);
            }
            batched.push(timed(|| {
                cls.commit(b).expect("valid rules");
            }));
        }
        for (what, v) in [
            ("single commits", single),
            ("single commit_with", single_ops),
            ("one batch", batched),
        ] {
            if v.is_empty() {
                continue;
            }
            let (w, c) = (
                median(v.iter().map(|p| p.0).collect()),
                median(v.iter().map(|p| p.1).collect()),
            );
            println!(
                "{add} into {n}, {what}: wall {w:.4} s = {:.2}M/s, CPU {c:.4} s = {:.2}M/s",
                add as f64 / w / 1e6,
                add as f64 / c / 1e6
            );
        }
        return;
    }
    if let Some(n) = churn {
        let (base, more) = rules.split_at(n_full as usize);
        let (mut commit, mut replay) = (Vec::new(), Vec::new());
        for _ in 0..reps {
            let mut cls = loaded(base);
            let mut b = Batch::new();
            for m in &base[..n] {
                b.remove(*m, 100);
            }
            for m in &more[..n] {
                b.insert(*m, 100, 0, 1);
            }
            commit.push(timed(|| {
                cls.commit(b).expect("valid rules");
            }));
            replay.push(timed(|| {
                cls.commit(Batch::new()).expect("empty batch");
            }));
        }
        for (what, v) in [("commit", commit), ("its replay", replay)] {
            println!(
                "{n} out and {n} in of {n_full}, {what}: wall {:.4} s, CPU {:.4} s",
                median(v.iter().map(|p| p.0).collect()),
                median(v.iter().map(|p| p.1).collect())
            );
        }
        return;
    }
    if let Some(size) = bundles {
        // 262,144 rules in commits of `size` through `commit_with`, as `ferrovs-bench insert`
        // commits its bundles (without the pipeline and the traffic).
        let mut v = Vec::new();
        for _ in 0..reps {
            let mut cls: Classifier<u64> = Classifier::new();
            v.push(timed(|| {
                for chunk in rules[..n_full as usize].chunks(size.max(1)) {
                    cls.commit_with(|ops| {
                        ops.reserve(chunk.len());
                        for m in chunk {
                            ops.insert(m, 100, 0, 0);
                        }
                    })
                    .expect("valid rules");
                }
            }));
        }
        let (w, c) = (
            median(v.iter().map(|p| p.0).collect()),
            median(v.iter().map(|p| p.1).collect()),
        );
        println!(
            "262144 in commits of {size}: wall {w:.3} s = {:.2}M/s, CPU {c:.3} s = {:.2}M/s",
            f64::from(n_full) / w / 1e6,
            f64::from(n_full) / c / 1e6
        );
        return;
    }
    let mut pts: [Vec<(f64, f64)>; 4] = Default::default();
    for _ in 0..reps {
        if !only_batch {
            full_table(&rules[..n_full as usize], &mut pts);
        }
        let base = (n_full + n_batch) as usize - 200_000.min(2 * n_batch as usize);
        let mut cls = loaded(&rules[..base]);
        let mut b = Batch::new();
        for m in &rules[base..base + n_batch as usize] {
            b.insert(*m, 100, 0, 1);
        }
        pts[2].push(timed(|| {
            cls.commit(b).expect("valid rules");
        }));
        pts[3].push(timed(|| {
            cls.commit(Batch::new()).expect("empty batch");
        }));
    }
    let m = |i: usize| {
        (
            median(pts[i].iter().map(|p| p.0).collect()),
            median(pts[i].iter().map(|p| p.1).collect()),
        )
    };
    let rate = |n: u32, s: f64| f64::from(n) / s / 1e6;
    let into = (n_full + n_batch) as usize - 200_000.min(2 * n_batch as usize);
    println!(
        "rules: {}",
        if random {
            "random 5-tuples"
        } else {
            "flowdef.py 5-tuples"
        }
    );
    if only_batch {
        let (w, c) = m(2);
        println!("{n_batch} into {into}, commit:     wall {w:.3} s, CPU {c:.3} s");
        let (w, c) = m(3);
        println!("  its replay at the next commit: wall {w:.3} s, CPU {c:.3} s");
        return;
    }
    let (w, c) = m(0);
    println!(
        "262144 into empty, Batch:       wall {w:.3} s = {:.2}M/s, CPU {c:.3} s = {:.2}M/s",
        rate(n_full, w),
        rate(n_full, c)
    );
    let (w, c) = m(1);
    println!(
        "262144 into empty, commit_with: wall {w:.3} s = {:.2}M/s, CPU {c:.3} s = {:.2}M/s",
        rate(n_full, w),
        rate(n_full, c)
    );
    let (w, c) = m(2);
    println!("{n_batch} into {into}, commit:     wall {w:.3} s, CPU {c:.3} s");
    let (w, c) = m(3);
    println!("  its replay at the next commit: wall {w:.3} s, CPU {c:.3} s");
}
