//! `--with-ovs-cls`: OVS 3.1's own classifier as the baseline of the `exact` and `mixed` sets,
//! which OVS's `ovstest test-classifier benchmark` cannot build. The harness
//! `crates/classifier/ovs-harness/ovs_cls.c` (built by `scripts/build-ovs-harness.sh`) runs
//! `lib/classifier.c` over a workload file written here, so that both classifiers hold the same
//! rules, in the same order.
//!
//! Lookups ([`ovs_cls_point`]): the file carries the rules and the hit and miss keys
//! ([`write_workload`]); the harness builds its classifier once and stays up (`--serve`), and
//! each repetition runs OVS's four timings and then ferrovs's, so that a disturbed second on
//! this shared machine moves both sides of a ratio.
//!
//! Insertion ([`insert_lines`]): the file carries the rules the `insert` and `batch` lines
//! insert ([`write_insert_workload`]); the harness (`--insert`) times OVS adding them as
//! ofproto does, one flow_mod at a time and as one bundle, each repetition from a classifier
//! built afresh, and prints its medians, which are set beside ferrovs's. It runs after
//! ferrovs's figures, once, with `--reps` repetitions of its own.
//!
//! The harness inherits the pinning and the memory policy. Nothing here runs in the test
//! suite with the harness: the tests check the files written and the lines parsed.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::Ordering;

use classifier::{Classifier, Reader};
use openflow::Match;
use packet::key::{fields, FlowKey, KeyField};

use crate::gen::Workload;
use crate::{median, median_lowest, mega, Api, Args, InsertFigures, NO_TRIES};

/// The fields of `--with-ovs-cls`'s workload file, by the names `ovs_cls.c` reads (the
/// ovs-ofctl spellings): every field the `exact` and `mixed` sets' rules and keys set.
const OVS_CLS_FIELDS: [KeyField; 8] = [
    fields::IN_PORT,
    fields::DL_TYPE,
    fields::NW_SRC,
    fields::NW_DST,
    fields::NW_PROTO,
    fields::NW_TTL,
    fields::TP_SRC,
    fields::TP_DST,
];

/// The bits of [`OVS_CLS_FIELDS`] in a key.
fn ovs_cls_field_bits() -> FlowKey {
    let mut bits = FlowKey::default();
    for f in OVS_CLS_FIELDS {
        bits.set(f, f.max_value());
    }
    bits
}

/// Writes `w` in the workload format of `crates/classifier/ovs-harness/ovs_cls.c`: one line a
/// rule, `R <priority> <field>=<value>/<mask> ...` (its masked fields), then one line a key,
/// `H <field>=<value> ...` for the hit keys and `M ...` for the miss keys (their non-zero
/// fields), values and masks in hex, as the key holds them. Fails on a rule or key with bits
/// outside [`OVS_CLS_FIELDS`], which OVS would not see.
pub(crate) fn write_workload(w: &Workload, out: &mut impl Write) -> io::Result<()> {
    let carried = ovs_cls_field_bits();
    writeln!(
        out,
        "# classifier-bench workload: rules={} hits={} misses={}",
        w.rules.len(),
        w.hits.len(),
        w.misses.len()
    )?;
    write_rules(out, "R", &w.rules, &carried)?;
    for (kind, keys) in [("H", &w.hits), ("M", &w.misses)] {
        for (i, k) in keys.iter().enumerate() {
            if outside(k, &carried) {
                return Err(unsupported(format!("key {kind} {i}")));
            }
            write!(out, "{kind}")?;
            for f in OVS_CLS_FIELDS {
                let v = k.get(f);
                if v != 0 {
                    write!(out, " {}={v:#x}", f.name)?;
                }
            }
            writeln!(out)?;
        }
    }
    Ok(())
}

/// Writes the rules of the insertion figures in the same format, for `ovs_cls --insert`: `R`
/// lines for the rules inserted into an empty table (`empty`), `B` lines for the full table's
/// (`base`; none when they are the `R` rules, as the generators make them: a larger set
/// begins with the smaller one), `X` lines for the rules inserted into it (`extra`).
pub(crate) fn write_insert_workload(
    empty: &[(Match, u32)],
    base: &[(Match, u32)],
    extra: &[(Match, u32)],
    out: &mut impl Write,
) -> io::Result<()> {
    let carried = ovs_cls_field_bits();
    let same = empty == base;
    writeln!(
        out,
        "# classifier-bench insertion workload: empty={} full={}{} extra={}",
        empty.len(),
        base.len(),
        if same { " (the R rules)" } else { "" },
        extra.len()
    )?;
    write_rules(out, "R", empty, &carried)?;
    if !same {
        write_rules(out, "B", base, &carried)?;
    }
    write_rules(out, "X", extra, &carried)
}

/// Whether `k` has bits outside `carried` (the bits of [`OVS_CLS_FIELDS`]).
fn outside(k: &FlowKey, carried: &FlowKey) -> bool {
    k.words.iter().zip(&carried.words).any(|(a, b)| a & !b != 0)
}

fn unsupported(what: String) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{what} sets a field ovs_cls does not carry"),
    )
}

/// One line a rule, `<kind> <priority> <field>=<value>/<mask> ...`.
fn write_rules(
    out: &mut impl Write,
    kind: &str,
    rules: &[(Match, u32)],
    carried: &FlowKey,
) -> io::Result<()> {
    for (i, (m, p)) in rules.iter().enumerate() {
        if outside(m.mask(), carried) {
            return Err(unsupported(format!("rule {kind} {i}")));
        }
        write!(out, "{kind} {p}")?;
        for f in OVS_CLS_FIELDS {
            let mask = m.mask().get(f);
            if mask != 0 {
                write!(out, " {}={:#x}/{mask:#x}", f.name, m.value().get(f))?;
            }
        }
        writeln!(out)?;
    }
    Ok(())
}

/// What one side's lookups of one kind of key (hit or miss) did, one untimed lookup with
/// tracking a key: the matched priorities and the un-wildcarded bits.
#[derive(Debug, Default)]
struct KeyStats {
    /// Each key's matched priority, -1 for none.
    prios: Vec<i64>,
    /// Un-wildcarded bits per lookup over [`OVS_CLS_FIELDS`]...
    bits: f64,
    /// ... and outside them.
    other: f64,
    /// Per field of [`OVS_CLS_FIELDS`].
    per_field: [f64; 8],
}

impl KeyStats {
    fn matched(&self) -> usize {
        self.prios.iter().filter(|p| **p >= 0).count()
    }
}

/// ferrovs's [`KeyStats`] of `keys`, from single lookups.
fn key_stats(reader: &Reader<u64>, keys: &[FlowKey]) -> KeyStats {
    let carried = ovs_cls_field_bits();
    let snap = reader.snapshot();
    let mut s = KeyStats::default();
    for k in keys {
        let mut wc = FlowKey::default();
        let prio = snap
            .lookup(k, Some(&mut wc))
            .map_or(-1, |r| i64::from(r.priority()));
        s.prios.push(prio);
        for (i, f) in OVS_CLS_FIELDS.iter().enumerate() {
            let b = f64::from(wc.get(*f).count_ones());
            s.per_field[i] += b;
            s.bits += b;
        }
        let other: u32 = wc
            .words
            .iter()
            .zip(&carried.words)
            .map(|(w, c)| (w & !c).count_ones())
            .sum();
        s.other += f64::from(other);
    }
    let n = keys.len().max(1) as f64;
    s.bits /= n;
    s.other /= n;
    for b in &mut s.per_field {
        *b /= n;
    }
    s
}

/// The value of `name=` in a line of `key=value` words.
fn word<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
}

/// The number of `name=` in a line of `key=value` words, without its unit (`/s` or `s`).
fn word_num<T: std::str::FromStr>(line: &str, name: &str) -> Result<T, String> {
    word(line, name)
        .and_then(|v| {
            v.strip_suffix("/s")
                .or_else(|| v.strip_suffix('s'))
                .unwrap_or(v)
                .parse()
                .ok()
        })
        .ok_or_else(|| format!("ovs_cls: no {name}= in {line:.200}"))
}

/// OVS's classifier holding one workload, in an `ovs_cls --serve` child: built once, then
/// one repetition of its four timings per request, so that ferrovs's lookups and OVS's
/// alternate without either table rebuilt. The child inherits the pinning.
struct OvsCls {
    child: Child,
    stdin: Option<ChildStdin>,
    out: BufReader<ChildStdout>,
    rules: usize,
    subtables: usize,
    replaced: usize,
    /// Hit keys, then miss keys.
    stats: [KeyStats; 2],
}

impl OvsCls {
    /// Starts `harness` on `workload` and waits for its build and its per-key checks.
    fn start(harness: &str, workload: &Path, lookups: usize) -> Result<OvsCls, String> {
        let mut child = Command::new(harness)
            .arg(workload)
            .args(["--serve", "--prios", "--lookups", &lookups.to_string()])
            .args(NO_TRIES.load(Ordering::Relaxed).then_some("--no-tries"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{harness}: {e}"))?;
        let stdin = child.stdin.take();
        let out = BufReader::new(child.stdout.take().expect("stdout is piped"));
        let mut h = OvsCls {
            child,
            stdin,
            out,
            rules: 0,
            subtables: 0,
            replaced: 0,
            stats: Default::default(),
        };
        loop {
            let line = h.line()?;
            let kind = |l: &str| match word(l, "kind") {
                Some("hit") => Ok(0),
                Some("miss") => Ok(1),
                _ => Err(format!("ovs_cls: no kind in {l:.200}")),
            };
            if line.starts_with("ovs-cls-wc ") {
                let s = &mut h.stats[kind(&line)?];
                s.bits = word_num(&line, "bits")?;
                s.other = word_num(&line, "other")?;
                for (i, f) in OVS_CLS_FIELDS.iter().enumerate() {
                    s.per_field[i] = word_num(&line, f.name)?;
                }
            } else if line.starts_with("ovs-cls-prios ") {
                h.stats[kind(&line)?].prios = line
                    .split_whitespace()
                    .skip(2)
                    .map(|p| p.parse().map_err(|e| format!("ovs_cls: priority {p}: {e}")))
                    .collect::<Result<_, _>>()?;
            } else if line.starts_with("ovs-cls ") {
                h.rules = word_num(&line, "rules")?;
                h.subtables = word_num(&line, "subtables")?;
                h.replaced = word_num(&line, "replaced")?;
                return Ok(h);
            }
        }
    }

    fn line(&mut self) -> Result<String, String> {
        let mut line = String::new();
        match self.out.read_line(&mut line) {
            Ok(0) => Err("ovs_cls ended early (see its message above)".into()),
            Ok(_) => Ok(line.trim_end().to_string()),
            Err(e) => Err(format!("ovs_cls: {e}")),
        }
    }

    /// One repetition: OVS's lookups/s of hit keys wc off, on, then miss keys wc off, on.
    fn rep(&mut self) -> Result<[f64; 4], String> {
        let stdin = self.stdin.as_mut().expect("open until drop");
        writeln!(stdin, "run")
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("ovs_cls: {e}"))?;
        let line = self.line()?;
        Ok([
            word_num(&line, "hits_nowc")?,
            word_num(&line, "hits_wc")?,
            word_num(&line, "misses_nowc")?,
            word_num(&line, "misses_wc")?,
        ])
    }
}

impl Drop for OvsCls {
    fn drop(&mut self) {
        // End of input ends the child; its table is gone before the insertion figures.
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

/// A workload file for the harness in the temporary directory, named for this process and
/// `tag`, written by `write`: its path, and whether it was written.
fn temp_workload(
    tag: &str,
    write: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> (std::path::PathBuf, Result<(), String>) {
    let path =
        std::env::temp_dir().join(format!("classifier-bench-{}-{tag}.txt", std::process::id()));
    let written = File::create(&path)
        .and_then(|f| {
            let mut out = BufWriter::new(f);
            write(&mut out)?;
            out.flush()
        })
        .map_err(|e| format!("{}: {e}", path.display()));
    (path, written)
}

/// The `ovs-cls` lines of one point: OVS 3.1's classifier (`ovs_cls` at `harness`) built
/// from the same rules as `cls` and looking up the same keys in the same order, its
/// repetitions alternated with ferrovs's, then both sides' matched counts and priorities
/// compared key by key, and their un-wildcarded bits per lookup.
pub(crate) fn ovs_cls_point(
    args: &Args,
    harness: &str,
    set: &str,
    w: &Workload,
    cls: &Classifier<u64>,
) -> Result<(), String> {
    let (path, written) = temp_workload(&format!("{set}-{}", w.rules.len()), |out| {
        write_workload(w, out)
    });
    let started = written.and_then(|()| OvsCls::start(harness, &path, args.lookups));
    let _ = std::fs::remove_file(&path);
    let mut ovs = started?;
    let reader = cls.reader();
    let kinds = [("hit", &w.hits), ("miss", &w.misses)];
    let ours = kinds.map(|(_, keys)| key_stats(&reader, keys));

    let mut checks = Vec::new();
    for ((kind, keys), (o, f)) in kinds.iter().zip(ovs.stats.iter().zip(&ours)) {
        if o.prios.len() != keys.len() {
            return Err(format!(
                "ovs_cls: {} {kind} priorities for {} keys",
                o.prios.len(),
                keys.len()
            ));
        }
        let differ: Vec<usize> = (0..keys.len())
            .filter(|&i| o.prios[i] != f.prios[i])
            .collect();
        let first = differ.first().map_or(String::new(), |&i| {
            format!(
                " (first: key {i}, ovs {} ferrovs {})",
                o.prios[i], f.prios[i]
            )
        });
        checks.push(format!(
            "{kind} keys matched ovs {}/{n} ferrovs {}/{n}, priorities differ {}{first}",
            o.matched(),
            f.matched(),
            differ.len(),
            n = keys.len(),
        ));
    }
    println!(
        "ovs-cls  set={set:<5} rules={:<7} subtables={:<3} ovs rules={} subtables={} replaced={} | {}",
        cls.len(),
        cls.snapshot().n_subtables(),
        ovs.rules,
        ovs.subtables,
        ovs.replaced,
        checks.join(" | ")
    );

    // Each repetition: OVS's four timings, then ferrovs's, per API.
    let mut ovs_reps: Vec<[f64; 4]> = Vec::new();
    let mut our_reps: Vec<(Api, Vec<[f64; 4]>)> =
        args.apis.iter().map(|api| (*api, Vec::new())).collect();
    for _ in 0..args.reps {
        ovs_reps.push(ovs.rep()?);
        for (api, reps) in &mut our_reps {
            let rate = |keys: &[FlowKey], wc| api.lookups(&reader, keys, args.lookups, wc).0;
            reps.push([
                rate(&w.hits, false),
                rate(&w.hits, true),
                rate(&w.misses, false),
                rate(&w.misses, true),
            ]);
        }
    }
    let ovs_stats = std::mem::take(&mut ovs.stats);
    drop(ovs);
    let med = |reps: &[[f64; 4]], c: usize| median(reps.iter().map(|r| r[c]).collect());
    for (api, reps) in &our_reps {
        for (j, (kind, _)) in kinds.iter().enumerate() {
            let (c0, c1) = (2 * j, 2 * j + 1);
            let (o0, o1) = (med(&ovs_reps, c0), med(&ovs_reps, c1));
            let (f0, f1) = (med(reps, c0), med(reps, c1));
            println!(
                "ovs-cls  set={set:<5} rules={:<7} keys={kind:<4} ovs lookups/s wc=off {} wc=on {} | ferrovs api={} wc=off {} wc=on {} | ratio wc=off {:.2}x wc=on {:.2}x",
                cls.len(),
                mega(o0),
                mega(o1),
                api.as_str(),
                mega(f0),
                mega(f1),
                f0 / o0,
                f1 / o1
            );
        }
    }
    for (api, reps) in &our_reps {
        for (j, (kind, _)) in kinds.iter().enumerate() {
            let pair =
                |c: usize| median_lowest(reps.iter().zip(&ovs_reps).map(|(f, o)| f[c] / o[c]));
            let ((mid0, low0), (mid1, low1)) = (pair(2 * j), pair(2 * j + 1));
            println!(
                "ovs-cls-pair set={set:<5} rules={:<7} api={:<6} keys={kind:<4} pairs={} ratio wc=off median {mid0:.2}x lowest {low0:.2}x wc=on median {mid1:.2}x lowest {low1:.2}x",
                cls.len(),
                api.as_str(),
                reps.len(),
            );
        }
    }
    for ((kind, _), (o, f)) in kinds.iter().zip(ovs_stats.iter().zip(&ours)) {
        let per_field: Vec<String> = OVS_CLS_FIELDS
            .iter()
            .enumerate()
            .map(|(i, fl)| format!("{}={:.2}/{:.2}", fl.name, o.per_field[i], f.per_field[i]))
            .collect();
        println!(
            "ovs-cls-wc set={set:<5} rules={:<7} keys={kind:<4} un-wildcarded bits per lookup (api=single) ovs {:.2} ferrovs {:.2} ratio {:.2}x (outside the fields: ovs {:.2} ferrovs {:.2}) | per field ovs/ferrovs {}",
            cls.len(),
            o.bits,
            f.bits,
            f.bits / o.bits,
            o.other,
            f.other,
            per_field.join(" ")
        );
    }
    Ok(())
}

/// OVS's insertion figures, the medians of `ovs_cls --insert`'s lines.
#[derive(Debug, Clone, PartialEq)]
struct OvsInsert {
    /// `ovs-cls-insert into=empty`: rules and rules/s, single flow_mods and one bundle.
    empty: (usize, [f64; 2]),
    /// `ovs-cls-insert into=N`: the full table's rules, the rules added, rules/s the same two
    /// ways.
    full: (usize, usize, [f64; 2]),
    /// `ovs-cls-batch`: the full table's rules, the batch's, its commit's seconds, the
    /// seconds of making its rules before the commit, and each repetition's commit.
    batch: (usize, usize, f64, f64, String),
}

impl OvsInsert {
    /// Reads the harness's output (other lines are skipped).
    fn parse(text: &str) -> Result<OvsInsert, String> {
        let (mut empty, mut full, mut batch) = (None, None, None);
        for line in text.lines() {
            let rates = |l| -> Result<[f64; 2], String> {
                Ok([word_num(l, "single")?, word_num(l, "batched")?])
            };
            if line.starts_with("ovs-cls-insert ") {
                if word(line, "into") == Some("empty") {
                    empty = Some((word_num(line, "rules")?, rates(line)?));
                } else {
                    full = Some((
                        word_num(line, "into")?,
                        word_num(line, "rules")?,
                        rates(line)?,
                    ));
                }
            } else if line.starts_with("ovs-cls-batch ") {
                batch = Some((
                    word_num(line, "into")?,
                    word_num(line, "rules")?,
                    word_num(line, "commit")?,
                    word_num(line, "rule-init")?,
                    word(line, "each").unwrap_or("?").to_string(),
                ));
            }
        }
        let missing = |what: &str| format!("ovs_cls --insert printed no {what} line: {text:.300}");
        Ok(OvsInsert {
            empty: empty.ok_or_else(|| missing("into=empty"))?,
            full: full.ok_or_else(|| missing("into=<full table>"))?,
            batch: batch.ok_or_else(|| missing("ovs-cls-batch"))?,
        })
    }
}

/// The `ovs-cls-insert` and `ovs-cls-batch` lines: OVS 3.1's classifier inserting the rules of
/// [`insertion`](crate::insertion)'s `insert` and `batch` lines (`w`'s into an empty table,
/// those after `big`'s full table into it, [`full_table`](crate::full_table)) in an
/// `ovs_cls --insert` child, beside ferrovs's medians (`ours`), with the ratio ferrovs/OVS
/// for rates and OVS/ferrovs for the commit's seconds: how many times faster ferrovs is.
pub(crate) fn insert_lines(
    args: &Args,
    harness: &str,
    set: &str,
    w: &Workload,
    big: &Workload,
    ours: &InsertFigures,
) -> Result<(), String> {
    let (base, extra) = crate::full_table(big);
    let n_more = crate::N_MORE.min(extra.len());
    let n_batch = crate::N_BATCH.min(extra.len());
    let (path, written) = temp_workload(&format!("{set}-{}-insert", w.rules.len()), |out| {
        write_insert_workload(&w.rules, base, &extra[..n_more.max(n_batch)], out)
    });
    let ran = written.and_then(|()| {
        Command::new(harness)
            .arg(&path)
            .arg("--insert")
            .args(["--more", &n_more.to_string()])
            .args(["--batch", &n_batch.to_string()])
            .args(["--reps", &args.reps.to_string()])
            .args(NO_TRIES.load(Ordering::Relaxed).then_some("--no-tries"))
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| format!("{harness}: {e}"))
    });
    let _ = std::fs::remove_file(&path);
    let out = ran?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "ovs_cls --insert failed ({}): {text:.300}",
            out.status
        ));
    }
    let ovs = OvsInsert::parse(&text)?;
    let counts = (
        ovs.empty.0,
        ovs.full.0,
        ovs.full.1,
        ovs.batch.0,
        ovs.batch.1,
    );
    let expected = (w.rules.len(), base.len(), n_more, base.len(), n_batch);
    if counts != expected {
        return Err(format!(
            "ovs_cls --insert inserted (empty, full, more, full, batch) {counts:?}, not {expected:?}"
        ));
    }
    for (into, n, o, f) in [
        ("empty".to_string(), w.rules.len(), ovs.empty.1, ours.empty),
        (base.len().to_string(), n_more, ovs.full.2, ours.full),
    ] {
        println!(
            "ovs-cls-insert set={set:<5} into={into:<7} rules={n:<7} ovs single={}/s batched={}/s | ferrovs single={}/s batched={}/s | ratio single={:.2}x batched={:.2}x",
            mega(o[0]),
            mega(o[1]),
            mega(f[0]),
            mega(f[1]),
            f[0] / o[0],
            f[1] / o[1]
        );
    }
    let (_, _, commit, rule_init, each) = &ovs.batch;
    println!(
        "ovs-cls-batch set={set:<5} into={:<7} rules={n_batch:<7} ovs commit={commit:.3}s (each {each}; its rules made at bundle-add, before the commit: {rule_init:.3}s) | ferrovs commit={:.3}s | ratio {:.2}x",
        base.len(),
        ours.commit,
        commit / ours.commit
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen;

    fn field(name: &str) -> KeyField {
        *OVS_CLS_FIELDS
            .iter()
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("unknown field {name}"))
    }

    fn hex(s: &str) -> u128 {
        u128::from_str_radix(s.strip_prefix("0x").expect("hex"), 16).expect("hex")
    }

    /// The words after the kind of each line of `kind`, checking every line's kind is one
    /// `ovs_cls.c` reads.
    fn lines_of<'a>(text: &'a str, kind: &'a str) -> impl Iterator<Item = Vec<&'a str>> + 'a {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(move |line| {
                let mut words = line.split_whitespace();
                let k = words.next().expect("a kind");
                assert!(
                    ["R", "H", "M", "B", "X"].contains(&k),
                    "unknown line {line}"
                );
                (k == kind).then(|| words.collect())
            })
    }

    /// Reads the rules of lines of `kind` (`R`, `B` or `X`) back, as `ovs_cls.c` reads them.
    fn read_rules(text: &str, kind: &str) -> Vec<(Match, u32)> {
        lines_of(text, kind)
            .map(|words| {
                let prio = words[0].parse().expect("a priority");
                let (mut v, mut m) = (FlowKey::default(), FlowKey::default());
                for w in &words[1..] {
                    let (name, vm) = w.split_once('=').expect("field=value/mask");
                    let (val, mask) = vm.split_once('/').expect("value/mask");
                    v.set(field(name), hex(val));
                    m.set(field(name), hex(mask));
                }
                (Match::new(v, m), prio)
            })
            .collect()
    }

    /// Reads [`write_workload`]'s format back, as `ovs_cls.c` reads it.
    fn read_workload(text: &str) -> Workload {
        let keys = |kind| {
            lines_of(text, kind)
                .map(|words| {
                    let mut k = FlowKey::default();
                    for w in words {
                        let (name, val) = w.split_once('=').expect("field=value");
                        k.set(field(name), hex(val));
                    }
                    k
                })
                .collect()
        };
        Workload {
            rules: read_rules(text, "R"),
            hits: keys("H"),
            misses: keys("M"),
        }
    }

    fn written(w: &Workload) -> io::Result<String> {
        let mut out = Vec::new();
        write_workload(w, &mut out)?;
        Ok(String::from_utf8(out).expect("text"))
    }

    #[test]
    fn workload_file_round_trips_mixed_and_exact_sets() {
        for w in [gen::mixed(300, 20, 7), gen::exact(100, 7)] {
            let back = read_workload(&written(&w).expect("writable"));
            assert_eq!(back.rules, w.rules);
            assert_eq!(back.hits, w.hits);
            assert_eq!(back.misses, w.misses);
        }
    }

    #[test]
    fn workload_file_lines_name_fields_values_and_masks() {
        let mut m = Match::catch_all();
        m.set_exact(fields::IN_PORT, 3);
        m.set_exact(fields::DL_TYPE, 0x0800);
        m.set_masked(fields::NW_DST, 0x0a01_0203, 0xff00_0000);
        m.set_exact(fields::TP_DST, 80);
        let mut hit = FlowKey::default();
        hit.set_dl_type(0x0800);
        hit.set_nw_dst(0x0a01_0203);
        hit.set_nw_ttl(64);
        let w = Workload {
            rules: vec![(m, 7)],
            hits: vec![hit],
            misses: vec![FlowKey::default()],
        };
        let text = written(&w).expect("writable");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "# classifier-bench workload: rules=1 hits=1 misses=1",
                "R 7 in_port=0x3/0xffffffff dl_type=0x800/0xffff nw_dst=0xa000000/0xff000000 tp_dst=0x50/0xffff",
                "H dl_type=0x800 nw_dst=0xa010203 nw_ttl=0x40",
                "M",
            ]
        );
    }

    #[test]
    fn workload_file_rejects_fields_the_harness_lacks() {
        let mut m = Match::catch_all();
        m.set_exact(fields::TUN_ID, 5);
        let w = Workload {
            rules: vec![(m, 1)],
            hits: Vec::new(),
            misses: Vec::new(),
        };
        let e = written(&w).expect_err("tun_id is not carried");
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        // OVS's own benchmark set matches tun_id, metadata, dl_src and others.
        assert!(written(&gen::ovs_like(100, 16, 1)).is_err());
    }

    #[test]
    fn ovs_cls_lines_parse_by_name() {
        let line = "ovs-cls rules=1000 subtables=20 replaced=0 insert=25424/s hit-keys=2";
        assert_eq!(word_num::<usize>(line, "subtables"), Ok(20));
        assert_eq!(word_num::<f64>(line, "insert"), Ok(25424.0));
        // `hit-keys=` is not `keys=`.
        assert!(word_num::<usize>(line, "keys").is_err());
    }

    fn written_insert(
        empty: &[(Match, u32)],
        base: &[(Match, u32)],
        extra: &[(Match, u32)],
    ) -> String {
        let mut out = Vec::new();
        write_insert_workload(empty, base, extra, &mut out).expect("writable");
        String::from_utf8(out).expect("text")
    }

    #[test]
    fn insert_workload_round_trips_with_the_full_table_only_where_it_differs() {
        let rules = gen::mixed(400, 20, 5).rules;
        // The generators' case: the full table is the rules inserted into an empty one.
        let text = written_insert(&rules[..300], &rules[..300], &rules[300..]);
        assert_eq!(read_rules(&text, "R"), &rules[..300]);
        assert!(read_rules(&text, "B").is_empty());
        assert_eq!(read_rules(&text, "X"), &rules[300..]);
        assert!(text.starts_with(
            "# classifier-bench insertion workload: empty=300 full=300 (the R rules) extra=100\n"
        ));
        // A full table of its own.
        let text = written_insert(&rules[..50], &rules[..300], &rules[300..]);
        assert_eq!(read_rules(&text, "R"), &rules[..50]);
        assert_eq!(read_rules(&text, "B"), &rules[..300]);
        assert_eq!(read_rules(&text, "X"), &rules[300..]);
        // Fields the harness lacks fail, in any kind of line.
        let mut m = Match::catch_all();
        m.set_exact(fields::TUN_ID, 5);
        let mut out = Vec::new();
        let e = write_insert_workload(&rules[..1], &rules[..1], &[(m, 1)], &mut out)
            .expect_err("tun_id is not carried");
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().starts_with("rule X 0 "), "{e}");
    }

    #[test]
    fn full_table_keeps_the_extra_rules_or_half() {
        let big = gen::exact(1000, 3);
        let (base, extra) = crate::full_table(&big);
        assert_eq!((base.len(), extra.len()), (500, 500));
        assert_eq!(base, &big.rules[..500]);
        // A larger set begins with the smaller one: its `R` rules are the full table.
        assert_eq!(gen::exact(500, 3).rules, base);
        assert_eq!(
            gen::mixed(500, 20, 3).rules,
            &gen::mixed(800, 20, 3).rules[..500]
        );
    }

    const INSERT_OUTPUT: &str = "\
ovs-cls-insert into=empty rules=262144 single=438201/s batched=557696/s subtables=1
ovs-cls-insert into=262144 rules=10000 single=284435/s batched=353097/s subtables=1
ovs-cls-batch into=262144 rules=100000 commit=0.055616s rule-init=0.005406s each=0.0577/0.0556/0.0534
";

    #[test]
    fn ovs_cls_insert_lines_parse_by_name() {
        let o = OvsInsert::parse(INSERT_OUTPUT).expect("all three lines");
        assert_eq!(
            o,
            OvsInsert {
                empty: (262_144, [438_201.0, 557_696.0]),
                full: (262_144, 10_000, [284_435.0, 353_097.0]),
                batch: (
                    262_144,
                    100_000,
                    0.055_616,
                    0.005_406,
                    "0.0577/0.0556/0.0534".into()
                ),
            }
        );
        // Each line is needed.
        for skip in 0..3 {
            let text: Vec<&str> = INSERT_OUTPUT
                .lines()
                .enumerate()
                .filter_map(|(i, l)| (i != skip).then_some(l))
                .collect();
            assert!(
                OvsInsert::parse(&text.join("\n")).is_err(),
                "line {skip} left out"
            );
        }
        let bad = INSERT_OUTPUT.replace("commit=0.055616s", "commit=fast");
        assert!(OvsInsert::parse(&bad).is_err());
    }
}
