//! Criterion benches: lookups (exact 5-tuple and mixed-mask rule sets at 1K, 16K and 256K
//! rules, and the mixed set compiled at 1K, hits and misses, with and without wildcard
//! tracking, one key at a time and 32 keys per `lookup_batch`) and insertion (batched and single).
//! `classifier-bench` prints the same figures as one-line results with the OVS baseline beside
//! them.

#![allow(missing_docs)]

#[path = "../src/bin/classifier-bench/gen.rs"]
#[allow(dead_code)]
mod gen;

use std::hint::black_box;
use std::time::Duration;

use classifier::{Batch, Classifier};
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use packet::key::FlowKey;

fn lookups(c: &mut Criterion) {
    let mut g = c.benchmark_group("lookup");
    g.measurement_time(Duration::from_secs(2)).sample_size(20);
    // `mixed-compiled`: the mixed set after `Classifier::compile` (small rule sets only).
    for set in ["exact", "mixed", "mixed-compiled"] {
        for n in [1000usize, 16384, 262_144] {
            let compiled = set == "mixed-compiled";
            if compiled && n > classifier::COMPILE_MAX_RULES {
                continue;
            }
            let w = if set == "exact" {
                gen::exact(n, 1)
            } else {
                gen::mixed(n, 20, 1)
            };
            let mut cls = gen::load(&w);
            if compiled {
                assert!(cls.compile(), "the mixed set at {n} rules compiles");
            }
            let reader = cls.reader();
            for (kind, keys) in [("hit", &w.hits), ("miss", &w.misses)] {
                for wc in [false, true] {
                    let wc_s = if wc { "on" } else { "off" };
                    g.throughput(Throughput::Elements(32));
                    let id = format!("{set}/{kind}/wc={wc_s}");
                    g.bench_with_input(BenchmarkId::new(id, n), &n, |b, _| {
                        let mut i = 0;
                        b.iter(|| {
                            // One snapshot per batch of 32 keys, as a PMD thread does.
                            let snap = reader.snapshot();
                            let mut n_hits = 0;
                            for _ in 0..32 {
                                let k = &keys[i];
                                i = (i + 1) % keys.len();
                                let hit = if wc {
                                    let mut m = FlowKey::default();
                                    let hit = snap.lookup(k, Some(&mut m)).is_some();
                                    black_box(&m);
                                    hit
                                } else {
                                    snap.lookup(k, None).is_some()
                                };
                                n_hits += usize::from(hit);
                            }
                            n_hits
                        });
                    });
                    // The same 32 keys in one `lookup_batch` call (hash, slots, entries, then
                    // compare: the batch's cache misses overlap).
                    let id = format!("{set}/{kind}/wc={wc_s}/batch");
                    g.bench_with_input(BenchmarkId::new(id, n), &n, |b, _| {
                        let mut i = 0;
                        b.iter(|| {
                            let snap = reader.snapshot();
                            let chunk = &keys[i..i + 32];
                            i = (i + 32) % keys.len();
                            let mut out = [None; 32];
                            if wc {
                                let mut m = [FlowKey::default(); 32];
                                snap.lookup_batch(chunk, &mut out, Some(&mut m));
                                black_box(&m);
                            } else {
                                snap.lookup_batch(chunk, &mut out, None);
                            }
                            out.iter().filter(|r| r.is_some()).count()
                        });
                    });
                }
            }
        }
    }
    g.finish();
}

fn insertion(c: &mut Criterion) {
    let mut g = c.benchmark_group("insert");
    g.measurement_time(Duration::from_secs(3)).sample_size(10);
    let w = gen::exact(16384, 2);
    g.throughput(Throughput::Elements(w.rules.len() as u64));
    g.bench_function("exact/batched/16384", |b| {
        b.iter_batched(
            || {
                let mut batch = Batch::new();
                for (i, (m, p)) in w.rules.iter().enumerate() {
                    batch.insert(*m, *p, 0, i as u64);
                }
                (Classifier::<u64>::new(), batch)
            },
            |(mut cls, batch)| {
                cls.commit(batch).expect("valid");
                cls
            },
            BatchSize::LargeInput,
        );
    });
    g.bench_function("exact/single/16384", |b| {
        b.iter_batched(
            Classifier::<u64>::new,
            |mut cls| {
                for (i, (m, p)) in w.rules.iter().enumerate() {
                    cls.insert(m, *p, 0, i as u64).expect("valid");
                }
                cls
            },
            BatchSize::LargeInput,
        );
    });
    g.finish();
}

criterion_group!(benches, lookups, insertion);
criterion_main!(benches);
