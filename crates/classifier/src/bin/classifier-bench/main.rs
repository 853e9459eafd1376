//! `classifier-bench`: lookup, insertion, deletion, batch-commit and memory figures for the
//! classifier, with OVS's own classifier benchmark run in the same command as the baseline.
//!
//! ```text
//! taskset -c 1 cargo run --release -p classifier --bin classifier-bench -- \
//!     --rules 1000,16384,262144 --reps 5 --with-ovs PATH/TO/ovstest
//! ```
//!
//! Options: `--rules N,..` (default 1000,16384,262144), `--sets exact,mixed,ovs` (default
//! all), `--masks N` (mixed set, default 20), `--lookups N` per repetition (default
//! 2000000), `--reps N` (default 5; medians are printed), `--with-ovs PATH` (OVS's `ovstest
//! test-classifier benchmark` on its own rule set: the `ovs` and `ovs-pair` lines),
//! `--with-ovs-cls PATH` (the `ovs-cls` lines, below), `--no-insert`,
//! `--no-lookup` (only the build, insert, delete and batch lines), `--no-tries` (no prefix tries;
//! default `nw_dst,nw_src`), `--small-pages` (the daemon's memory policy without its transparent
//! huge pages: `glibc.malloc.hugetlb` left out), `--malloc-default` (glibc's default malloc
//! policy instead of the daemon's: by default the tool re-runs itself with the daemon's
//! `GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=...:glibc.malloc.hugetlb=1`,
//! as `datapath::mem::retain_freed_memory` does, and the OVS child inherits it; `--hugepages`,
//! the default since run 29, is still accepted), `--api
//! single|batch|both` (default both: one `lookup` per key, or one `lookup_batch` per 32 keys),
//! `--commit-with` (the `batch` line commits through `Classifier::commit_with`, operations
//! given one at a time as the pipeline's bundles do, instead of a `Batch`), `--reader-cpu N`
//! (the `batch` line's reader thread runs on CPU `N`, as a PMD thread on its own
//! core; the writer stays where `taskset` put the process), `--reserve-mb N` (grow the heap by
//! `N` MiB at start, touch it and free it, `mempolicy::reserve_heap`, so that commits that
//! take the tables to a new peak fault nothing; default 0). Lookups run in batches of 32 keys per
//! snapshot, as a PMD thread would. Pin the process (`taskset`) for stable numbers: the OVS child
//! inherits the pinning. Every line is the median of `--reps` repetitions; the `ovs-pair`
//! lines pair each OVS run with ferrovs's lookups right after it and give the median and
//! lowest ratio of the pairs, and the `scaling-pair` lines pair lookups of the smallest point's
//! table with lookups of each larger one the same way.
//!
//! `--with-ovs-cls PATH` gives the `exact` and `mixed` sets, which OVS's own benchmark cannot
//! build, a baseline from OVS 3.1's classifier itself: `PATH` is the harness
//! `crates/classifier/ovs-harness/ovs_cls.c`, linked against an OVS tree by
//! `scripts/build-ovs-harness.sh` (into `target/ovs-cls`). For each point of those sets the
//! workload (rules, hit and miss keys; [`ovs_cls::write_workload`]) goes to a temporary file, the
//! harness builds its classifier from it (prefix tries on `nw_dst` and `nw_src`, as ferrovs's)
//! and stays up, and each of `--reps` repetitions runs OVS's four timings (hit and miss keys,
//! wildcard tracking off and on, the keys in the same order as ferrovs's) and then
//! ferrovs's, per API. Lines: `ovs-cls ... ovs rules=` (both sides' rule and subtable counts,
//! how many hit and miss keys each matched, and in how many keys the matched priorities
//! differ: ties are broken differently, so priorities are compared, not rules), `ovs-cls
//! ... keys=` (the medians of both sides and their ratio, ferrovs over OVS), `ovs-cls-pair`
//! (the median and lowest ratio of the repetitions' pairs) and `ovs-cls-wc` (un-wildcarded
//! bits per lookup with tracking, one single lookup a key: over the fields the workload
//! carries, per field, and outside them; OVS un-wildcards ports through its ports trie,
//! ferrovs has none). `--no-tries` leaves the harness's prefix tries out too. The harness
//! inherits the pinning and the memory policy.
//!
//! Where the `insert` lines run (not `--no-insert`; `--no-lookup` keeps them), `--with-ovs-cls`
//! also has OVS insert the same rules ([`ovs_cls::insert_lines`]: `ovs_cls --insert`, once
//! ferrovs's figures are done, `--reps` repetitions of its own, each from a classifier built
//! afresh). OVS adds rules as ofproto does: `single`, one flow_mod each (`handle_flow_mod__`:
//! `cls_rule_init_from_minimatch` from the decoded flow_mod's minimatch, `classifier_insert`
//! in the next version with the subtable vector published at once, then that version made
//! the lookups'); `batched`, one bundle (`do_bundle_commit`: `classifier_defer`, every rule
//! inserted in the next version, `classifier_publish`, the version made the lookups'; the
//! rules were made when the bundle's messages were added, outside the commit, as ferrovs's
//! `Batch` is filled outside it). Lines: `ovs-cls-insert` (into an empty table and the 10,000
//! rules into the full one: OVS's and ferrovs's `single` and `batched` rules/s and the ratio
//! ferrovs/OVS) and `ovs-cls-batch` (the 100,000-rule atomic batch as one bundle: OVS's
//! median commit and each repetition's, the seconds its rules took to make at bundle-add,
//! ferrovs's median commit, and the ratio OVS/ferrovs; both ratios read "ferrovs is that
//! many times faster"). OVS's commit has no reader thread beside it.

mod chase;
mod gen;
mod ovs_cls;

use std::hint::black_box;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use classifier::{Batch, Classifier, Reader};
use gen::Workload;
use packet::key::FlowKey;

#[derive(Debug)]
struct Args {
    rules: Vec<usize>,
    sets: Vec<String>,
    masks: usize,
    lookups: usize,
    reps: usize,
    with_ovs: Option<String>,
    with_ovs_cls: Option<String>,
    insert: bool,
    small_pages: bool,
    malloc_default: bool,
    apis: Vec<Api>,
    reader_cpu: Option<usize>,
    commit_with: bool,
    reserve_mb: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        rules: vec![1000, 16384, 262_144],
        sets: vec!["exact".into(), "mixed".into(), "ovs".into()],
        masks: 20,
        lookups: 2_000_000,
        reps: 5,
        with_ovs: None,
        with_ovs_cls: None,
        insert: true,
        small_pages: false,
        malloc_default: false,
        apis: vec![Api::Single, Api::Batch],
        reader_cpu: None,
        commit_with: false,
        reserve_mb: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().ok_or(format!("{flag} needs a value"));
        let num = |s: &str| s.parse::<usize>().map_err(|e| format!("{flag} {s}: {e}"));
        match flag.as_str() {
            "--rules" => a.rules = val()?.split(',').map(num).collect::<Result<_, _>>()?,
            "--sets" => a.sets = val()?.split(',').map(String::from).collect(),
            "--masks" => a.masks = num(&val()?)?,
            "--lookups" => a.lookups = num(&val()?)?,
            "--reps" => a.reps = num(&val()?)?.max(1),
            "--with-ovs" => a.with_ovs = Some(val()?),
            "--with-ovs-cls" => a.with_ovs_cls = Some(val()?),
            "--no-insert" => a.insert = false,
            "--no-lookup" => a.apis.clear(),
            "--no-tries" => NO_TRIES.store(true, Ordering::Relaxed),
            // The default now (the daemon's policy); kept for the command lines of earlier runs.
            "--hugepages" => a.small_pages = false,
            "--small-pages" => a.small_pages = true,
            "--reserve-mb" => a.reserve_mb = num(&val()?)?,
            "--malloc-default" => a.malloc_default = true,
            "--api" => a.apis = Api::parse(&val()?)?,
            "--reader-cpu" => a.reader_cpu = Some(num(&val()?)?),
            "--commit-with" => a.commit_with = true,
            "-h" | "--help" => {
                return Err(
                    "usage: classifier-bench [--rules N,..] [--sets exact,mixed,ovs] [--masks N] \
                            [--lookups N] [--reps N] [--with-ovs OVSTEST] [--with-ovs-cls OVS_CLS] [--no-insert] [--no-lookup] [--no-tries] [--small-pages] [--malloc-default] [--api single|batch|both] [--reader-cpu N] [--commit-with] [--reserve-mb N]"
                        .into(),
                )
            }
            f => return Err(format!("unknown option {f}")),
        }
    }
    Ok(a)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The median and the lowest of the ratios of some pairs (at least one): what the `-pair`
/// lines print.
fn median_lowest(ratios: impl Iterator<Item = f64>) -> (f64, f64) {
    let v: Vec<f64> = ratios.collect();
    let lowest = v.iter().copied().fold(f64::MAX, f64::min);
    (median(v), lowest)
}

fn mega(x: f64) -> String {
    format!("{:.2}M", x / 1e6)
}

/// CPU time of this thread in seconds (`/proc/thread-self/schedstat`), 0 if unknown.
fn cpu_time() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0.0, |ns| ns as f64 / 1e9)
}

/// The CPUs this thread may run on, as the kernel lists them (`Cpus_allowed_list`).
fn allowed_cpus() -> String {
    std::fs::read_to_string("/proc/thread-self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .map(|v| v.trim().to_string())
        })
        .unwrap_or_else(|| "?".into())
}

/// Set by `--no-tries`: classifiers without prefix tries.
static NO_TRIES: AtomicBool = AtomicBool::new(false);

fn new_cls() -> Classifier<u64> {
    if NO_TRIES.load(Ordering::Relaxed) {
        Classifier::with_prefixes(&[]).expect("no prefixes is valid")
    } else {
        Classifier::new()
    }
}

fn build(w: &Workload) -> (Classifier<u64>, Duration) {
    let mut cls = new_cls();
    let b = gen::batch(&w.rules);
    let t = Instant::now();
    cls.commit(b).expect("generated rules are valid");
    let d = t.elapsed();
    // Both versions hold the rules from here on (the replay would come with the next
    // commit): the memory reported is that of the steady state.
    cls.settle();
    (cls, d)
}

/// Lookups per second over `keys`, `n` lookups, 32 per snapshot in one
/// [`RuleSet::lookup_batch`](classifier::RuleSet::lookup_batch) call each; also the hit count.
fn lookups_batched(reader: &Reader<u64>, keys: &[FlowKey], n: usize, wc: bool) -> (f64, usize) {
    let mut hits = 0;
    let mut i = 0;
    let t = Instant::now();
    let mut done = 0;
    while done < n {
        // The keys sit in one array, as a PMD's extracted batch does.
        let batch = &keys[i..(i + 32).min(keys.len())];
        i += batch.len();
        if i == keys.len() {
            i = 0;
        }
        let snap = reader.snapshot();
        let mut out = [None; 32];
        if wc {
            let mut wcs = [FlowKey::default(); 32];
            snap.lookup_batch(batch, &mut out, Some(&mut wcs));
            black_box(&wcs);
        } else {
            snap.lookup_batch(batch, &mut out, None);
        }
        hits += out.iter().filter(|r| r.is_some()).count();
        done += batch.len();
    }
    (done as f64 / t.elapsed().as_secs_f64(), hits)
}

/// Lookups per second over `keys`, `n` lookups, 32 per snapshot; also the hit count.
fn lookups(reader: &Reader<u64>, keys: &[FlowKey], n: usize, wc: bool) -> (f64, usize) {
    let mut hits = 0;
    let mut i = 0;
    let t = Instant::now();
    let mut done = 0;
    while done < n {
        let snap = reader.snapshot();
        for _ in 0..32 {
            let k = &keys[i];
            i += 1;
            if i == keys.len() {
                i = 0;
            }
            let r = if wc {
                let mut w = FlowKey::default();
                let r = snap.lookup(k, Some(&mut w)).is_some();
                black_box(&w);
                r
            } else {
                snap.lookup(k, None).is_some()
            };
            hits += usize::from(r);
        }
        done += 32;
    }
    (done as f64 / t.elapsed().as_secs_f64(), hits)
}

/// How lookups are issued: one [`RuleSet::lookup`](classifier::RuleSet::lookup) per key or
/// one [`RuleSet::lookup_batch`](classifier::RuleSet::lookup_batch) per 32 keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    Single,
    Batch,
}

impl Api {
    /// Lookups/s of `n` lookups over `keys` through this API, and the hit count.
    fn lookups(self, reader: &Reader<u64>, keys: &[FlowKey], n: usize, wc: bool) -> (f64, usize) {
        match self {
            Api::Single => lookups(reader, keys, n, wc),
            Api::Batch => lookups_batched(reader, keys, n, wc),
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Api::Single => "single",
            Api::Batch => "batch",
        }
    }

    fn parse(s: &str) -> Result<Vec<Api>, String> {
        match s {
            "single" => Ok(vec![Api::Single]),
            "batch" => Ok(vec![Api::Batch]),
            "both" => Ok(vec![Api::Single, Api::Batch]),
            _ => Err(format!("--api {s}: expected single, batch or both")),
        }
    }
}

/// Hit (or, without misses, all-key) lookups/s with wildcard tracking off and on, per API.
fn lookup_points(
    args: &Args,
    set: &str,
    w: &Workload,
    cls: &Classifier<u64>,
) -> Vec<(Api, [f64; 2])> {
    let reader = cls.reader();
    let mut out = Vec::new();
    let kinds: &[(&str, &[FlowKey])] = if w.misses.is_empty() {
        &[("keys", &w.hits)]
    } else {
        &[("hit", &w.hits), ("miss", &w.misses)]
    };
    for &api in &args.apis {
        let mut rates_of_api = [0.0; 2];
        for (kind, keys) in kinds {
            for (j, wc) in [false, true].into_iter().enumerate() {
                let mut rates = Vec::new();
                let mut hits = 0;
                for _ in 0..args.reps {
                    let (r, h) = api.lookups(&reader, keys, args.lookups, wc);
                    rates.push(r);
                    hits = h;
                }
                let m = median(rates);
                if *kind != "miss" {
                    rates_of_api[j] = m;
                }
                let hit_pct = 100.0 * hits as f64 / (args.lookups.div_ceil(32) * 32) as f64;
                println!(
                    "lookup   set={set:<5} rules={:<7} subtables={:<3} api={:<6} keys={kind:<4} wc={:<3} lookups/s={:>8} hit%={hit_pct:.0}",
                    cls.len(),
                    cls.snapshot().n_subtables(),
                    api.as_str(),
                    if wc { "on" } else { "off" },
                    mega(m)
                );
            }
        }
        out.push((api, rates_of_api));
    }
    out
}

/// The same rules compiled ([`Classifier::compile`], small rule sets of several masks only):
/// single lookups of hits and misses, with tracking off and on, alternated with the
/// subtables' (`cls`) in one process, medians of the repetitions; the compile's time; and the
/// bits each consults a lookup on average.
fn compiled_points(args: &Args, set: &str, w: &Workload, cls: &Classifier<u64>) {
    // A large table is not loaded twice only to be refused.
    if cls.snapshot().n_subtables() < 2 || cls.len() > classifier::COMPILE_MAX_RULES {
        return;
    }
    let mut cc = load(&w.rules);
    let t = Instant::now();
    let tables = match cc.try_compile() {
        Ok(tables) => tables,
        Err(why) => {
            println!(
                "compiled set={set:<5} rules={:<7} not compiled: {why}",
                cls.len()
            );
            return;
        }
    };
    let took = t.elapsed().as_secs_f64();
    cc.settle();
    let (subs, comp) = (cls.reader(), cc.reader());
    let kinds: &[(&str, &[FlowKey])] = if w.misses.is_empty() {
        &[("keys", &w.hits)]
    } else {
        &[("hit", &w.hits), ("miss", &w.misses)]
    };
    for (kind, keys) in kinds {
        for wc in [false, true] {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            for _ in 0..args.reps {
                a.push(lookups(&subs, keys, args.lookups, wc).0);
                b.push(lookups(&comp, keys, args.lookups, wc).0);
            }
            let (a, b) = (median(a), median(b));
            let bits = |r: &Reader<u64>| {
                let snap = r.snapshot();
                let n = keys.len().min(10_000);
                let total: u64 = keys[..n]
                    .iter()
                    .map(|k| {
                        let mut m = FlowKey::default();
                        snap.lookup(k, Some(&mut m));
                        u64::from(m.count_ones())
                    })
                    .sum();
                total as f64 / n.max(1) as f64
            };
            let bits_note = if wc {
                format!(
                    " consulted bits subtables {:.1} compiled {:.1}",
                    bits(&subs),
                    bits(&comp)
                )
            } else {
                String::new()
            };
            println!(
                "compiled set={set:<5} rules={:<7} tables={tables:<2} compile={took:.4}s api=single keys={kind:<4} wc={:<3} subtables {} compiled {} ratio {:.2}x{bits_note}",
                cls.len(),
                if wc { "on" } else { "off" },
                mega(a),
                mega(b),
                b / a
            );
        }
    }
}

/// Loads `rules` as one batch and replays it onto the other version, so that neither is timed
/// later.
fn load(rules: &[(openflow::Match, u32)]) -> Classifier<u64> {
    let mut cls = new_cls();
    gen::fill(&mut cls, rules);
    cls.commit(Batch::new()).expect("empty batch");
    cls
}

/// Inserts `rules` into `cls` by single commits, each timed: the slowest three and the 99th
/// percentile, in microseconds.
fn slowest<'a>(
    mut cls: Classifier<u64>,
    rules: impl Iterator<Item = (&'a openflow::Match, u32, usize)>,
) -> String {
    let mut times = Vec::new();
    for (m, p, i) in rules {
        let t = Instant::now();
        cls.insert(m, p, 0, i as u64).expect("valid");
        times.push(t.elapsed().as_secs_f64() * 1e6);
    }
    times.sort_by(|a, b| b.total_cmp(a));
    let p99 = times.get(times.len() / 100).copied().unwrap_or(0.0);
    let top: Vec<String> = times.iter().take(3).map(|t| format!("{t:.0}")).collect();
    format!("{}us(p99={p99:.1}us)", top.join("/"))
}

/// Inserts `rules` into `cls` by single commits, each chunk of matches copied into a small
/// buffer first (not timed), as a controller's flow_mod is in the caches when its decoded
/// match is inserted; returns the commits a second. Read from the workload's large array
/// instead, each 720-byte match is a few cache misses of its own (the `single` figure).
fn insert_hot(cls: &mut Classifier<u64>, rules: &[(openflow::Match, u32)]) -> f64 {
    rules.len() as f64 / gen::insert_hot(cls, rules)
}

/// Rules of the larger workload (`big`, the point's rule count and 110,000 more) beyond the
/// full table's, the most of them inserted into it.
const N_EXTRA: usize = 110_000;
/// The rules inserted into the full table by single commits and as one batch.
const N_MORE: usize = 10_000;
/// The rules of the atomic batch (the `batch` line).
const N_BATCH: usize = 100_000;

/// The full table of the insertion figures (`big`'s rules but the last [`N_EXTRA`], or half
/// of them if they are fewer) and the rules after it: the first [`N_MORE`] of those are
/// inserted into it, the first [`N_BATCH`] committed as one batch.
#[allow(clippy::type_complexity)]
fn full_table(big: &Workload) -> (&[(openflow::Match, u32)], &[(openflow::Match, u32)]) {
    big.rules
        .split_at(big.rules.len() - N_EXTRA.min(big.rules.len() / 2))
}

/// ferrovs's medians from [`insertion`], set beside OVS's by `--with-ovs-cls`.
#[derive(Debug, Clone, Copy)]
struct InsertFigures {
    /// Rules/s into an empty table, single commits and one batch.
    empty: [f64; 2],
    /// Rules/s of [`N_MORE`] (at most) more into the full table, the same two ways.
    full: [f64; 2],
    /// Seconds of the atomic batch's commit.
    commit: f64,
}

fn insertion(args: &Args, set: &str, w: &Workload, big: &Workload) -> InsertFigures {
    // Into an empty table: single commits (matches read from the workload, then hot), then
    // one batch.
    let (mut single, mut hot, mut batched) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..args.reps {
        let mut cls: Classifier<u64> = new_cls();
        let t = Instant::now();
        for (i, (m, p)) in w.rules.iter().enumerate() {
            cls.insert(m, *p, 0, i as u64).expect("valid");
        }
        single.push(w.rules.len() as f64 / t.elapsed().as_secs_f64());
        drop(cls);
        let mut cls: Classifier<u64> = new_cls();
        hot.push(insert_hot(&mut cls, &w.rules));
        drop(cls);
        let (cls, d) = build(w);
        batched.push(w.rules.len() as f64 / d.as_secs_f64());
        drop(cls);
    }
    // The slowest single commits (a growth stalls the writer), in a run of their own: the
    // clock read around each commit would cost the rates above a few percent.
    let slow = slowest(
        new_cls(),
        w.rules.iter().enumerate().map(|(i, (m, p))| (m, *p, i)),
    );
    let empty = [median(single), median(batched)];
    println!(
        "insert   set={set:<5} into=empty   rules={:<7} single={}/s single-hot={}/s batched={}/s slowest-single={slow}",
        w.rules.len(),
        mega(empty[0]),
        mega(median(hot)),
        mega(empty[1])
    );
    // Into a full table: 10,000 more rules, single and as one batch.
    let (base, extra) = full_table(big);
    let n_more = N_MORE.min(extra.len());
    let (mut single, mut hot, mut batched) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..args.reps {
        let mut cls = load(base);
        let t = Instant::now();
        for (m, p) in &extra[..n_more] {
            cls.insert(m, *p, 0, 0).expect("valid");
        }
        single.push(n_more as f64 / t.elapsed().as_secs_f64());
        drop(cls);
        let mut cls = load(base);
        hot.push(insert_hot(&mut cls, &extra[..n_more]));
        drop(cls);
        let mut cls = load(base);
        let mut b = Batch::new();
        for (m, p) in &extra[..n_more] {
            b.insert(m, *p, 0, 0);
        }
        let t = Instant::now();
        cls.commit(b).expect("valid");
        batched.push(n_more as f64 / t.elapsed().as_secs_f64());
    }
    let slow = slowest(load(base), extra[..n_more].iter().map(|(m, p)| (m, *p, 0)));
    let full = [median(single), median(batched)];
    println!(
        "insert   set={set:<5} into={:<7} rules={n_more:<7} single={}/s single-hot={}/s batched={}/s slowest-single={slow}",
        base.len(),
        mega(full[0]),
        mega(median(hot)),
        mega(full[1])
    );
    // Deletes from the same table: 10,000 of its rules, single and as one batch (each
    // commit's removal is replayed onto the other version at the next, the last one not
    // timed).
    let (mut single, mut batched) = (Vec::new(), Vec::new());
    let gone = &base[..n_more.min(base.len())];
    for _ in 0..args.reps {
        let mut cls = load(base);
        let t = Instant::now();
        for (m, p) in gone {
            cls.remove(m, *p).expect("valid");
        }
        single.push(gone.len() as f64 / t.elapsed().as_secs_f64());
        drop(cls);
        let mut cls = load(base);
        let mut b = Batch::new();
        for (m, p) in gone {
            b.remove(m, *p);
        }
        let t = Instant::now();
        cls.commit(b).expect("valid");
        batched.push(gone.len() as f64 / t.elapsed().as_secs_f64());
    }
    println!(
        "delete   set={set:<5} from={:<7} rules={:<7} single={}/s batched={}/s",
        base.len(),
        gone.len(),
        mega(median(single)),
        mega(median(batched))
    );
    // A 100K-rule atomic batch while a reader thread looks up.
    let n_batch = N_BATCH.min(extra.len());
    let points: Vec<BatchPoint> = (0..args.reps)
        .map(|_| {
            batch_point(
                base,
                &extra[..n_batch],
                &big.hits,
                args.reader_cpu,
                args.commit_with,
            )
        })
        .collect();
    let med = |f: fn(&BatchPoint) -> f64| median(points.iter().map(f).collect());
    let max_gap = points.iter().map(|p| p.max_gap).fold(0.0, f64::max);
    println!(
        "batch    set={set:<5} into={:<7} rules={n_batch:<7} via={} writer-cpus={} reader-cpu={} \
         commit={:.3}s (cpu {:.3}s; min {:.3}s max {:.3}s; each {} with {} page faults) \
         replay-at-next-commit={:.3}s (cpu {:.3}s) \
         reader lookups/s before={} during-commit={} during-replay={} \
         reader max gap median={:.0}us max={:.0}us (before the commit: median={:.0}us max={:.0}us)",
        base.len(),
        if args.commit_with {
            "commit_with"
        } else {
            "Batch"
        },
        allowed_cpus(),
        args.reader_cpu
            .map_or_else(|| "same".to_string(), |c| c.to_string()),
        med(|p| p.commit),
        med(|p| p.commit_cpu),
        points
            .iter()
            .map(|p| p.commit)
            .fold(f64::INFINITY, f64::min),
        points.iter().map(|p| p.commit).fold(0.0, f64::max),
        points
            .iter()
            .map(|p| format!("{:.3}", p.commit))
            .collect::<Vec<_>>()
            .join("/"),
        points
            .iter()
            .map(|p| p.faults.to_string())
            .collect::<Vec<_>>()
            .join("/"),
        med(|p| p.replay),
        med(|p| p.replay_cpu),
        mega(med(|p| p.before)),
        mega(med(|p| p.during_commit)),
        mega(med(|p| p.during_replay)),
        med(|p| p.max_gap) * 1e6,
        max_gap * 1e6,
        med(|p| p.max_gap_before) * 1e6,
        points.iter().map(|p| p.max_gap_before).fold(0.0, f64::max) * 1e6
    );
    InsertFigures {
        empty,
        full,
        commit: med(|p| p.commit),
    }
}

/// One 100K-rule batch commit under a reader thread: wall and CPU seconds of the commit and
/// of its replay at the next commit, the reader's lookups/s and its longest gap (seconds)
/// between two 32-lookup batches.
#[derive(Debug)]
struct BatchPoint {
    commit: f64,
    commit_cpu: f64,
    replay: f64,
    replay_cpu: f64,
    before: f64,
    during_commit: f64,
    during_replay: f64,
    max_gap: f64,
    max_gap_before: f64,
    /// The writer's minor page faults during the commit.
    faults: u64,
}

fn batch_point(
    base: &[(openflow::Match, u32)],
    batch: &[(openflow::Match, u32)],
    keys: &[FlowKey],
    reader_cpu: Option<usize>,
    via_ops: bool,
) -> BatchPoint {
    let mut cls = load(base);
    let reader = cls.reader();
    let keys: Vec<FlowKey> = keys.to_vec();
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let max_gap_ns = Arc::new(AtomicU64::new(0));
    let measuring = Arc::new(AtomicBool::new(false));
    let th = {
        let (stop, count, max_gap_ns, measuring) = (
            stop.clone(),
            count.clone(),
            max_gap_ns.clone(),
            measuring.clone(),
        );
        std::thread::spawn(move || {
            // A PMD thread runs on its own core: `--reader-cpu` moves the reader there (the
            // writer stays where `taskset` put the process).
            if let Some(c) = reader_cpu {
                if !core_affinity::set_for_current(core_affinity::CoreId { id: c }) {
                    eprintln!("reader: cannot pin to CPU {c}; it shares the writer's");
                }
            }
            let mut i = 0;
            let mut last = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                let snap = reader.snapshot();
                for _ in 0..32 {
                    let mut w = FlowKey::default();
                    black_box(snap.lookup(&keys[i], Some(&mut w)));
                    i = (i + 1) % keys.len();
                }
                drop(snap);
                let now = Instant::now();
                if measuring.load(Ordering::Relaxed) {
                    count.fetch_add(32, Ordering::Relaxed);
                    let gap = u64::try_from((now - last).as_nanos()).unwrap_or(u64::MAX);
                    max_gap_ns.fetch_max(gap, Ordering::Relaxed);
                }
                last = now;
            }
        })
    };
    let mut b = Batch::new();
    if !via_ops {
        for (m, p) in batch {
            b.insert(m, *p, 0, 1);
        }
    }
    // Reader rate alone, then during the commit and during the replay.
    std::thread::sleep(Duration::from_millis(20));
    measuring.store(true, Ordering::Relaxed);
    let t = Instant::now();
    std::thread::sleep(Duration::from_millis(200));
    let before = count.swap(0, Ordering::Relaxed) as f64 / t.elapsed().as_secs_f64();
    // The longest gap while no writer ran: the machine's own.
    let max_gap_before = max_gap_ns.swap(0, Ordering::Relaxed) as f64 / 1e9;
    let (t, c, f) = (
        Instant::now(),
        cpu_time(),
        mempolicy::minor_faults().unwrap_or(0),
    );
    if via_ops {
        // The operations one at a time, as the pipeline's bundles commit (no `Batch` of
        // `Op`s is built and moved).
        cls.commit_with(|ops| {
            ops.reserve(batch.len());
            for (m, p) in batch {
                ops.insert(m, *p, 0, 1);
            }
        })
        .expect("valid");
    } else {
        cls.commit(b).expect("valid");
    }
    let (commit, commit_cpu) = (t.elapsed().as_secs_f64(), cpu_time() - c);
    let faults = mempolicy::minor_faults().unwrap_or(0).saturating_sub(f);
    let during_commit = count.swap(0, Ordering::Relaxed) as f64 / commit;
    // The next commit replays the batch onto the other version.
    let (t, c) = (Instant::now(), cpu_time());
    cls.commit(Batch::new()).expect("empty batch");
    let (replay, replay_cpu) = (t.elapsed().as_secs_f64(), cpu_time() - c);
    let during_replay = count.swap(0, Ordering::Relaxed) as f64 / replay;
    let max_gap = max_gap_ns.load(Ordering::Relaxed) as f64 / 1e9;
    stop.store(true, Ordering::Relaxed);
    th.join().expect("reader thread");
    BatchPoint {
        commit,
        commit_cpu,
        replay,
        replay_cpu,
        before,
        during_commit,
        during_replay,
        max_gap,
        max_gap_before,
        faults,
    }
}

/// Runs `ovstest test-classifier benchmark N P S 1 L` and returns (no-wc, wc) lookups/s.
fn ovs_point(ovstest: &str, n: usize, prios: u32, lookups: usize) -> Result<(f64, f64), String> {
    let out = Command::new(ovstest)
        .args(["test-classifier", "benchmark"])
        .args([
            n.to_string(),
            prios.to_string(),
            prios.to_string(),
            "1".into(),
            lookups.to_string(),
        ])
        .output()
        .map_err(|e| format!("{ovstest}: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Vec<f64> = text
        .lines()
        .filter_map(|l| l.strip_suffix(" lookups/sec"))
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect();
    match v.as_slice() {
        [a, b] => Ok((*a, *b)),
        _ => Err(format!("unexpected ovstest output: {text}")),
    }
}

/// Lookups with tracking of the hit keys of the smallest point (`small`) and of a larger one
/// (`large`), one right after the other, `--reps` times: per API, the larger point's rate over
/// the smallest's in each pair. As with [`ovs_pairs`], a pair's halves run a fraction of a
/// second apart, where the `scaling` line's medians came minutes apart: on this shared machine
/// a disturbed minute otherwise moves one side of the ratio alone.
fn scaling_pairs(
    args: &Args,
    small: (&Workload, &Classifier<u64>),
    large: (&Workload, &Classifier<u64>),
) -> Vec<(Api, Vec<f64>)> {
    let (sr, lr) = (small.1.reader(), large.1.reader());
    let mut out: Vec<(Api, Vec<f64>)> = args.apis.iter().map(|api| (*api, Vec::new())).collect();
    for _ in 0..args.reps {
        for (api, ratios) in &mut out {
            let s = api.lookups(&sr, &small.0.hits, args.lookups, true).0;
            let l = api.lookups(&lr, &large.0.hits, args.lookups, true).0;
            ratios.push(l / s);
        }
    }
    out
}

/// OVS's benchmark of `n` rules and ferrovs's lookups of the same set (`w`, `cls`), one right
/// after the other, `--reps` times: OVS's lookups/s (wc off, wc on) of each run, and per API
/// the ratios of each pair. A pair's halves run seconds apart, where the medians of the whole
/// runs came a minute apart: a noisy minute on this shared machine then moves both halves of
/// a ratio, not one.
#[allow(clippy::type_complexity)]
fn ovs_pairs(
    args: &Args,
    ovstest: &str,
    n: usize,
    w: &Workload,
    cls: &Classifier<u64>,
) -> (Vec<f64>, Vec<f64>, Vec<(Api, Vec<[f64; 2]>)>) {
    let reader = cls.reader();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let mut pairs: Vec<(Api, Vec<[f64; 2]>)> =
        args.apis.iter().map(|api| (*api, Vec::new())).collect();
    for _ in 0..args.reps {
        let (x, y) = match ovs_point(ovstest, n, 16, args.lookups) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("ovs: {e}");
                break;
            }
        };
        a.push(x);
        b.push(y);
        for (api, ratios) in &mut pairs {
            let rate = |wc: bool| api.lookups(&reader, &w.hits, args.lookups, wc).0;
            ratios.push([rate(false) / x, rate(true) / y]);
        }
    }
    (a, b, pairs)
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    // The daemon's memory policy (`mempolicy`, as `datapath::mem::retain_freed_memory` sets
    // it: malloc keeps what is freed, so growing tables reuse it instead of faulting in fresh
    // pages, and backs its heap with transparent huge pages), set through glibc's tunables by
    // running again; the OVS child inherits it. `--malloc-default` keeps glibc's policy,
    // `--small-pages` leaves the huge pages out.
    mempolicy::enforce(mempolicy::Policy {
        keep_freed: !args.malloc_default,
        huge_pages: !args.malloc_default && !args.small_pages,
    });
    // The latency probes' buffers, made once and only if lookups run: 4 MiB stays in the L3 of
    // the guests these runs are made on (32 MiB shared with the host's other guests), 8 MiB is at
    // the edge of what this guest keeps of it (20 ns in one run, 120 ns in the next; about what
    // an exact 262,144-rule single-lookup run touches), 64 MiB is the memory's. Made before the
    // reservation, so as not to take their 76 MiB out of it.
    let chases = (!args.apis.is_empty()).then(|| {
        [
            chase::Chase::new(4 << 20),
            chase::Chase::new(8 << 20),
            chase::Chase::new(64 << 20),
        ]
    });
    // A heap reserved at start (`mempolicy::reserve_heap`, on this thread, the writer's), so
    // that the first commits to a new peak fault nothing.
    let reserved = mempolicy::reserve_heap(args.reserve_mb.saturating_mul(1 << 20));
    println!("# classifier-bench: {args:?}");
    println!(
        "# GLIBC_TUNABLES={} (transparent huge pages for the heap: {})",
        std::env::var("GLIBC_TUNABLES").unwrap_or_default(),
        match mempolicy::huge_pages_taken() {
            Some(true) => "taken",
            Some(false) => "not taken",
            None => "not told",
        }
    );
    if args.reserve_mb > 0 {
        println!(
            "# heap reserved at start: {} MiB (asked {} MiB)",
            reserved >> 20,
            args.reserve_mb
        );
    }
    println!(
        "# lookups in batches of 32 per snapshot; medians of {} repetitions",
        args.reps
    );
    let max_rules = args.rules.iter().copied().max().unwrap_or(0);
    for set in &args.sets {
        let gen_set = |n: usize| -> Workload {
            match set.as_str() {
                "exact" => gen::exact(n, 1),
                "mixed" => gen::mixed(n, args.masks, 1),
                _ => gen::ovs_like(n, 16, 1),
            }
        };
        if !["exact", "mixed", "ovs"].contains(&set.as_str()) {
            eprintln!("unknown set {set}");
            std::process::exit(2);
        }
        let mut first_point: Vec<(Api, [f64; 2])> = Vec::new();
        // The smallest point's table, kept for the `scaling-pair` lines.
        let mut smallest: Option<(Workload, Classifier<u64>)> = None;
        for &n in &args.rules {
            let w = gen_set(n);
            let (cls, d) = build(&w);
            let mem = cls.memory();
            println!(
                "build    set={set:<5} rules={:<7} subtables={:<3} batched-build={:.3}s bytes/rule={:.0} (tables {:.0} + rules {:.0})",
                cls.len(),
                cls.snapshot().n_subtables(),
                d.as_secs_f64(),
                mem.bytes_per_rule(),
                mem.table_bytes as f64 / mem.n_rules.max(1) as f64,
                mem.rule_bytes as f64 / mem.n_rules.max(1) as f64,
            );
            if let Some(chases) = &chases {
                // The host's memory latency now (see `chase`), for reading this point's
                // lookups: a disturbed minute reads higher.
                println!(
                    "latency  set={set:<5} rules={:<7} chase-{}MiB={:.1}ns chase-{}MiB={:.1}ns chase-{}MiB={:.1}ns (a dependent load to a random line of that many MiB now: the L3, its edge and the memory as this point's lookups find them)",
                    cls.len(),
                    chases[0].mib(),
                    chases[0].ns(1 << 20),
                    chases[1].mib(),
                    chases[1].ns(1 << 20),
                    chases[2].mib(),
                    chases[2].ns(1 << 18),
                );
            }
            let points = lookup_points(&args, set, &w, &cls);
            if args.apis.contains(&Api::Single) {
                compiled_points(&args, set, &w, &cls);
            }
            if first_point.is_empty() {
                first_point = points.clone();
            } else {
                for ((api, [_, wc]), (_, [_, first_wc])) in points.iter().zip(&first_point) {
                    println!(
                        "scaling  set={set:<5} rules={:<7} api={:<6} wc=on hit lookups/s vs smallest point: {:.2}x",
                        cls.len(),
                        api.as_str(),
                        wc / first_wc
                    );
                }
            }
            if let Some((sw, scls)) = &smallest {
                for (api, ratios) in scaling_pairs(&args, (sw, scls), (&w, &cls)) {
                    if ratios.is_empty() {
                        continue;
                    }
                    let (mid, lowest) = median_lowest(ratios.iter().copied());
                    println!(
                        "scaling-pair set={set:<5} rules={:<7} api={:<6} pairs={} wc=on hit lookups/s vs smallest point: median {mid:.2}x lowest {lowest:.2}x",
                        cls.len(),
                        api.as_str(),
                        ratios.len(),
                    );
                }
            }
            if set == "ovs" {
                if let Some(ovstest) = &args.with_ovs {
                    let (a, b, pairs) = ovs_pairs(&args, ovstest, n, &w, &cls);
                    if !a.is_empty() {
                        let (oa, ob) = (median(a), median(b));
                        for (api, [nowc, wc]) in &points {
                            println!(
                                "ovs      case={n}:16:16 (OVS 3.1 holds about the same {} rules, 1 subtable) \
                                 ovs lookups/s wc=off {} wc=on {} | ferrovs api={} wc=off {} wc=on {} | ratio wc=off {:.2}x wc=on {:.2}x",
                                cls.len(),
                                mega(oa),
                                mega(ob),
                                api.as_str(),
                                mega(*nowc),
                                mega(*wc),
                                nowc / oa,
                                wc / ob
                            );
                        }
                    }
                    for (api, ratios) in pairs {
                        if ratios.is_empty() {
                            continue;
                        }
                        let (mid0, low0) = median_lowest(ratios.iter().map(|r| r[0]));
                        let (mid1, low1) = median_lowest(ratios.iter().map(|r| r[1]));
                        println!(
                            "ovs-pair case={n}:16:16 api={} pairs={} ratio wc=off median {mid0:.2}x lowest {low0:.2}x wc=on median {mid1:.2}x lowest {low1:.2}x",
                            api.as_str(),
                            ratios.len(),
                        );
                    }
                }
            }
            if let Some(harness) = &args.with_ovs_cls {
                if set == "ovs" {
                    // Its rules match tun_id, metadata, dl_src and others, which the
                    // harness does not carry; `--with-ovs` runs OVS's own benchmark of it.
                    println!("# ovs-cls: set ovs skipped (see --with-ovs)");
                } else if !args.apis.is_empty() {
                    if let Err(e) = ovs_cls::ovs_cls_point(&args, harness, set, &w, &cls) {
                        eprintln!("ovs-cls: {e}");
                    }
                }
            }
            // The smallest point stays for the pairs of the larger ones (not the largest:
            // the insertion figures below measure a heap without it).
            if smallest.is_none() && n != max_rules && !args.apis.is_empty() {
                smallest = Some((w, cls));
                continue;
            }
            drop(cls);
            if args.insert && n == max_rules && set != "ovs" {
                let big = gen_set(n + N_EXTRA);
                let ours = insertion(&args, set, &w, &big);
                if let Some(harness) = &args.with_ovs_cls {
                    // OVS inserting the same rules, after ferrovs (whose tables are gone).
                    if let Err(e) = ovs_cls::insert_lines(&args, harness, set, &w, &big, &ours) {
                        eprintln!("ovs-cls: {e}");
                    }
                }
            }
        }
    }
    // Whether the policy's huge pages took: the kernel's `madvise` mode gives them only where
    // malloc asked, `never` not at all.
    if let Ok(s) = std::fs::read_to_string("/proc/self/smaps_rollup") {
        let kb = |name: &str| {
            s.lines()
                .find_map(|l| {
                    l.strip_prefix(name)?
                        .trim()
                        .strip_suffix("kB")?
                        .trim()
                        .parse::<u64>()
                        .ok()
                })
                .unwrap_or(0)
        };
        println!(
            "# memory at the end: Rss {} MiB, of it in transparent huge pages {} MiB",
            kb("Rss:") >> 10,
            kb("AnonHugePages:") >> 10
        );
    }
}
