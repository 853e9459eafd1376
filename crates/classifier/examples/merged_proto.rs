//! Scratch (run 33): a feasibility prototype of merged tuples (TupleMerge, Daly, Liu and Torng,
//! IEEE/ACM ToN 2019) for mixed-mask lookups with wildcard tracking, frozen (built once from a
//! rule list, no updates), measured against the classifier on the bench's mixed set:
//! `merged_proto N [LOOKUPS] [C]` (`C`: the largest bucket a table may hold, default 8).
//! `OWN=1`: a new table keeps its first mask whole (no coarsening); `SOLO=1`: time the
//! prototype alone, with the classifier dropped. It checks its answers against the
//! classifier's for every key and the consulted-bits contract on a sample (against a linear
//! scan), and prints the tables it built, what a lookup visits, and both rates.
//!
//! Rules whose masks all contain a coarser mask `T` share one hash table keyed by the key's
//! bits under `T`; a bucket lists its rules by priority, and a lookup compares each rule's own
//! mask and value until one matches. The consulted bits: each visited table's `T` (an empty
//! bucket proves that no rule of the table matches any packet with the same bits under `T`),
//! one differing bit for each rule compared that did not match, and the whole mask of the rule
//! that did.
#![allow(missing_docs)]
#![allow(clippy::cast_possible_truncation)] // A scratch: sizes and hashes cut to the widths it stores.
#[path = "../src/bin/classifier-bench/gen.rs"]
#[allow(dead_code)]
mod gen;
use std::collections::HashMap;
use std::hint::black_box;

use openflow::Match;
use packet::key::{fields, FlowKey, KeyField};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const MAXW: usize = 6;

#[derive(Clone, Copy, Default)]
#[repr(align(64))]
struct Cand {
    prio: u32,
    idx: u32,
    mask: u32,
    vals: [u64; MAXW],
}

#[derive(Clone, Copy, Default)]
struct MaskW {
    n: usize,
    at: [usize; MAXW],
    bits: [u64; MAXW],
}

#[derive(Clone, Copy, Default)]
struct Slot {
    hash: u64,
    start: u32,
    len: u32,
}

struct Table {
    words: Vec<(u8, u64)>,
    max_prio: u32,
    slots: Vec<Slot>,
    masks: Vec<MaskW>,
    cands: Vec<Cand>,
}

fn mix(h: u64, w: u64) -> u64 {
    (h ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29)
}

fn hash_under(words: &[(u8, u64)], k: &FlowKey) -> u64 {
    let mut h = 0x1234_5678;
    for (i, b) in words {
        h = mix(h, k.words[usize::from(*i)] & b);
    }
    let h = (h ^ (h >> 31)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    (h ^ (h >> 29)) | 1
}

impl Table {
    #[inline(always)]
    fn bucket(&self, h: u64) -> Option<&[Cand]> {
        let m = self.slots.len() - 1;
        let mut p = (h as usize) & m;
        loop {
            let s = &self.slots[p];
            if s.hash == h {
                return self.cands.get(s.start as usize..(s.start + s.len) as usize);
            }
            if s.hash == 0 {
                return None;
            }
            p = (p + 1) & m;
        }
    }
}

struct Merged {
    tables: Vec<Table>,
}

impl Merged {
    /// Tables visited, buckets found, candidates compared.
    fn stats(&self, k: &FlowKey) -> (usize, usize, usize) {
        let mut best: Option<(u32, u32)> = None;
        let (mut tv, mut bf, mut cc) = (0, 0, 0);
        for t in &self.tables {
            if let Some((bp, _)) = best {
                if t.max_prio < bp {
                    break;
                }
            }
            tv += 1;
            let Some(cands) = t.bucket(hash_under(&t.words, k)) else {
                continue;
            };
            bf += 1;
            for c in cands {
                if let Some((bp, bi)) = best {
                    if c.prio < bp || (c.prio == bp && c.idx > bi) {
                        break;
                    }
                }
                cc += 1;
                let mw = &t.masks[c.mask as usize];
                let ok = (0..mw.n).all(|j| (k.words[mw.at[j]] & mw.bits[j]) == c.vals[j]);
                if ok {
                    best = Some((c.prio, c.idx));
                    break;
                }
            }
        }
        (tv, bf, cc)
    }

    #[inline]
    fn lookup(&self, k: &FlowKey, mut wc: Option<&mut FlowKey>) -> Option<u32> {
        let mut best: Option<(u32, u32)> = None;
        for t in &self.tables {
            if let Some((bp, _)) = best {
                if t.max_prio < bp {
                    break;
                }
            }
            if let Some(wc) = wc.as_deref_mut() {
                for (i, b) in &t.words {
                    wc.words[usize::from(*i)] |= b;
                }
            }
            let Some(cands) = t.bucket(hash_under(&t.words, k)) else {
                continue;
            };
            for c in cands {
                if let Some((bp, bi)) = best {
                    if c.prio < bp || (c.prio == bp && c.idx > bi) {
                        break;
                    }
                }
                let mw = &t.masks[c.mask as usize];
                let mut diff = None;
                for j in 0..mw.n {
                    let i = mw.at[j];
                    let d = (k.words[i] & mw.bits[j]) ^ c.vals[j];
                    if d != 0 {
                        diff = Some((i, d & d.wrapping_neg()));
                        break;
                    }
                }
                match diff {
                    Some((i, bit)) => {
                        if let Some(wc) = wc.as_deref_mut() {
                            wc.words[i] |= bit;
                        }
                    }
                    None => {
                        if let Some(wc) = wc.as_deref_mut() {
                            for j in 0..mw.n {
                                wc.words[mw.at[j]] |= mw.bits[j];
                            }
                        }
                        best = Some((c.prio, c.idx));
                        break;
                    }
                }
            }
        }
        best.map(|(_, i)| i)
    }
}

/// A mask's candidate coarsenings: per field it has, drop it or keep it; prefix fields may
/// also be shortened to a multiple of 8.
fn coarsenings(mask: &FlowKey) -> Vec<FlowKey> {
    let mut units: Vec<Vec<Option<(KeyField, u128)>>> = Vec::new();
    for f in fields::ALL {
        let m = mask.get(*f);
        if m == 0 {
            continue;
        }
        let mut opts = vec![None, Some((*f, m))];
        if (*f == fields::NW_SRC || *f == fields::NW_DST) && m != 0 {
            let len = m.count_ones();
            for l in (8..len).step_by(8) {
                opts.push(Some((*f, u128::from(u32::MAX << (32 - l)))));
            }
        }
        units.push(opts);
    }
    let mut out = vec![FlowKey::default()];
    for u in units {
        let mut next = Vec::new();
        for base in &out {
            for o in &u {
                let mut k = *base;
                if let Some((f, m)) = o {
                    k.set(*f, *m);
                }
                next.push(k);
            }
        }
        out = next;
    }
    out.sort_by_key(|k| k.words.iter().map(|w| w.count_ones()).sum::<u32>());
    out
}

fn words_of(mask: &FlowKey) -> Vec<(u8, u64)> {
    mask.words
        .iter()
        .enumerate()
        .filter(|(_, w)| **w != 0)
        .map(|(i, w)| (i as u8, *w))
        .collect()
}

fn subset(a: &FlowKey, b: &FlowKey) -> bool {
    a.words.iter().zip(b.words.iter()).all(|(x, y)| x & !y == 0)
}

fn build(rules: &[(Match, u32)], limit: usize) -> Merged {
    let mut by_mask: HashMap<FlowKey, Vec<usize>> = HashMap::new();
    for (i, (m, _)) in rules.iter().enumerate() {
        by_mask.entry(*m.mask()).or_default().push(i);
    }
    let mut masks: Vec<(FlowKey, Vec<usize>)> = by_mask.into_iter().collect();
    masks.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.words.cmp(&b.0.words)));
    // Per table: its mask and buckets (hash -> rule indices).
    let mut tabs: Vec<(FlowKey, HashMap<u64, Vec<usize>>)> = Vec::new();
    for (mask, idxs) in &masks {
        let fits = |t: &FlowKey, b: &HashMap<u64, Vec<usize>>| {
            let w = words_of(t);
            let mut add: HashMap<u64, usize> = HashMap::new();
            for i in idxs {
                *add.entry(hash_under(&w, rules[*i].0.value())).or_default() += 1;
            }
            add.iter()
                .all(|(h, n)| b.get(h).map_or(0, |v| v.len()) + n <= limit)
        };
        let at = tabs
            .iter()
            .position(|(t, b)| subset(t, mask) && fits(t, b))
            .or_else(|| {
                let t = if std::env::var("OWN").is_ok() {
                    *mask
                } else {
                    coarsenings(mask)
                        .into_iter()
                        .find(|t| fits(t, &HashMap::new()))
                        .unwrap_or(*mask)
                };
                tabs.push((t, HashMap::new()));
                Some(tabs.len() - 1)
            })
            .expect("a table");
        let w = words_of(&tabs[at].0);
        for i in idxs {
            let h = hash_under(&w, rules[*i].0.value());
            tabs[at].1.entry(h).or_default().push(*i);
        }
    }
    let mut tables: Vec<Table> = tabs
        .into_iter()
        .map(|(t, buckets)| {
            let n = (buckets.len() * 2).next_power_of_two().max(8);
            let mut slots = vec![Slot::default(); n];
            let mut cands = Vec::new();
            let mut masks: Vec<MaskW> = Vec::new();
            let mut mask_ids: HashMap<FlowKey, u32> = HashMap::new();
            let mut max_prio = 0;
            for (h, mut v) in buckets {
                v.sort_by(|a, b| rules[*b].1.cmp(&rules[*a].1).then(a.cmp(b)));
                let mut p = (h as usize) & (n - 1);
                while slots[p].hash != 0 {
                    p = (p + 1) & (n - 1);
                }
                slots[p] = Slot {
                    hash: h,
                    start: cands.len() as u32,
                    len: v.len() as u32,
                };
                for i in v {
                    let (m, prio) = &rules[i];
                    max_prio = max_prio.max(*prio);
                    let mid = *mask_ids.entry(*m.mask()).or_insert_with(|| {
                        let mut mw = MaskW::default();
                        for (j, (wi, b)) in words_of(m.mask()).into_iter().enumerate() {
                            mw.at[j] = usize::from(wi);
                            mw.bits[j] = b;
                            mw.n += 1;
                        }
                        masks.push(mw);
                        (masks.len() - 1) as u32
                    });
                    let mw = masks[mid as usize];
                    let mut c = Cand {
                        prio: *prio,
                        idx: i as u32,
                        mask: mid,
                        ..Cand::default()
                    };
                    for j in 0..mw.n {
                        c.vals[j] = m.value().words[mw.at[j]] & mw.bits[j];
                    }
                    cands.push(c);
                }
            }
            Table {
                words: words_of(&t),
                max_prio,
                slots,
                masks,
                cands,
            }
        })
        .collect();
    tables.sort_by_key(|t| std::cmp::Reverse(t.max_prio));
    Merged { tables }
}

fn naive(rules: &[(Match, u32)], k: &FlowKey) -> Option<u32> {
    let mut best: Option<(u32, u32)> = None;
    for (i, (m, p)) in rules.iter().enumerate() {
        if m.matches(k) && best.is_none_or(|(bp, _)| *p > bp) {
            best = Some((*p, i as u32));
        }
    }
    best.map(|(_, i)| i)
}

fn bits(wc: &FlowKey) -> u32 {
    wc.words.iter().map(|w| w.count_ones()).sum()
}

fn main() {
    let mut a = std::env::args().skip(1);
    let n: usize = a.next().and_then(|v| v.parse().ok()).unwrap_or(1000);
    let look: usize = a.next().and_then(|v| v.parse().ok()).unwrap_or(2_000_000);
    let limit: usize = a.next().and_then(|v| v.parse().ok()).unwrap_or(8);
    let w = gen::mixed(n, 20, 1);
    let t = std::time::Instant::now();
    let mg = build(&w.rules, limit);
    let built = t.elapsed().as_secs_f64();
    let ncands: usize = mg.tables.iter().map(|t| t.cands.len()).sum();
    println!(
        "{n} rules, limit {limit}: {} tables ({ncands} rules) built in {built:.3}s",
        mg.tables.len()
    );
    for t in &mg.tables {
        let buckets = t.slots.iter().filter(|s| s.len > 0).count();
        println!(
            "  table max_prio {:5} rules {:6} buckets {:6} largest {:3} mask bits {:3} words {:?}",
            t.max_prio,
            t.cands.len(),
            buckets,
            t.slots.iter().map(|s| s.len).max().unwrap_or(0),
            t.words.iter().map(|(_, b)| b.count_ones()).sum::<u32>(),
            t.words.iter().map(|(i, _)| *i).collect::<Vec<_>>()
        );
    }
    let c = gen::load(&w);
    let r = c.reader();
    let snap = r.snapshot();
    // Same rule as the classifier for every key; the contract on a sample.
    let mut rng = SmallRng::seed_from_u64(7);
    for (name, keys) in [("hit", &w.hits), ("miss", &w.misses)] {
        let (mut bits_m, mut bits_c, mut bad, mut badwc) = (0u64, 0u64, 0, 0);
        for (x, k) in keys.iter().enumerate() {
            let mut wm = FlowKey::default();
            let mut wcl = FlowKey::default();
            let got = mg.lookup(k, Some(&mut wm));
            let want = snap.lookup(k, Some(&mut wcl)).map(|r| *r.payload() as u32);
            if got != want {
                bad += 1;
            }
            bits_m += u64::from(bits(&wm));
            bits_c += u64::from(bits(&wcl));
            if x < 300 {
                for _ in 0..20 {
                    let mut p = *k;
                    for (pw, m) in p.words.iter_mut().zip(wm.words.iter()) {
                        *pw = (*pw & m) | (rng.gen::<u64>() & !m);
                    }
                    if naive(&w.rules, &p) != got {
                        badwc += 1;
                    }
                }
            }
        }
        let st = keys
            .iter()
            .map(|k| mg.stats(k))
            .fold((0, 0, 0), |a, b| (a.0 + b.0, a.1 + b.1, a.2 + b.2));
        let nk = keys.len() as f64;
        println!(
            "{name}: tables visited {:.2} buckets found {:.2} candidates compared {:.2}",
            st.0 as f64 / nk,
            st.1 as f64 / nk,
            st.2 as f64 / nk
        );
        println!(
            "{name}: {} keys, {bad} answers differ from the classifier's, {badwc} contract breaks; wc bits merged {:.1} classifier {:.1}",
            keys.len(),
            bits_m as f64 / keys.len() as f64,
            bits_c as f64 / keys.len() as f64
        );
    }
    if std::env::var("SOLO").is_ok() {
        drop(snap);
        drop(r);
        drop(c);
        for _ in 0..3 {
            let t = std::time::Instant::now();
            let mut hits = 0usize;
            for i in 0..look {
                let mut wc = FlowKey::default();
                let k = &w.hits[i % w.hits.len()];
                hits += usize::from(mg.lookup(k, Some(&mut wc)).is_some());
                black_box(&wc);
            }
            println!(
                "solo hit wc=on merged {:.2}M/s ({hits})",
                look as f64 / t.elapsed().as_secs_f64() / 1e6
            );
        }
        return;
    }
    for round in 0..3 {
        for (name, keys) in [("hit", &w.hits), ("miss", &w.misses)] {
            for track in [true, false] {
                let t = std::time::Instant::now();
                let mut hits = 0usize;
                for i in 0..look {
                    let mut wc = FlowKey::default();
                    let k = &keys[i % keys.len()];
                    hits += usize::from(mg.lookup(k, track.then_some(&mut wc)).is_some());
                    black_box(&wc);
                }
                let el = t.elapsed().as_secs_f64();
                let t2 = std::time::Instant::now();
                for i in 0..look {
                    let mut wc = FlowKey::default();
                    let k = &keys[i % keys.len()];
                    hits += usize::from(snap.lookup(k, track.then_some(&mut wc)).is_some());
                    black_box(&wc);
                }
                let el2 = t2.elapsed().as_secs_f64();
                println!(
                    "round {round} {name:4} wc={} merged {:6.2}M/s classifier {:6.2}M/s ratio {:.2}x ({hits})",
                    if track { "on " } else { "off" },
                    look as f64 / el / 1e6,
                    look as f64 / el2 / 1e6,
                    el2 / el
                );
            }
        }
    }
}
