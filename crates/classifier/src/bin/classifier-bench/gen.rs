//! Rule sets and lookup keys for the classifier benchmarks (shared with the criterion
//! benches through `#[path]`).

use std::collections::HashSet;

use openflow::Match;
use packet::key::{fields, FlowKey};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// A rule set and the keys to look up in it.
#[derive(Debug)]
pub struct Workload {
    /// Rules as (match, priority).
    pub rules: Vec<(Match, u32)>,
    /// Keys that match some rule.
    pub hits: Vec<FlowKey>,
    /// Keys that match no rule.
    pub misses: Vec<FlowKey>,
}

/// Number of lookup keys per kind (as OVS's benchmark: twice its 8192 flow values).
pub const N_KEYS: usize = 16384;

/// `rules` as one batch of inserts (rule `i` with payload `i`).
pub fn batch(rules: &[(Match, u32)]) -> classifier::Batch<u64> {
    let mut b = classifier::Batch::new();
    for (i, (m, p)) in rules.iter().enumerate() {
        b.insert(*m, *p, 0, i as u64);
    }
    b
}

/// Commits `rules` into `cls` as one batch (rule `i` with payload `i`).
pub fn fill(cls: &mut classifier::Classifier<u64>, rules: &[(Match, u32)]) {
    cls.commit(batch(rules)).expect("generated rules are valid");
}

/// Matches copied into a small buffer at a time by [`insert_hot`].
pub const HOT_CHUNK: usize = 64;

/// Inserts `rules` into `cls` by single commits (payloads their positions), each chunk of
/// [`HOT_CHUNK`] matches copied into a small buffer first, untimed, so that each match is in
/// the caches when it is committed; returns the seconds the commits took.
pub fn insert_hot(cls: &mut classifier::Classifier<u64>, rules: &[(Match, u32)]) -> f64 {
    let mut buf = Vec::with_capacity(HOT_CHUNK);
    let mut secs = 0.0;
    for (c, chunk) in rules.chunks(HOT_CHUNK).enumerate() {
        buf.clear();
        buf.extend_from_slice(chunk);
        let t = std::time::Instant::now();
        for (i, (m, p)) in buf.iter().enumerate() {
            let payload = (c * HOT_CHUNK + i) as u64;
            cls.insert(m, *p, 0, payload).expect("valid");
        }
        secs += t.elapsed().as_secs_f64();
    }
    secs
}

/// A classifier with the default prefix fields holding `w`'s rules (for the criterion
/// benches and `lookup_pairs`; `classifier-bench` makes its own, with `--no-tries`).
#[allow(dead_code)]
pub fn load(w: &Workload) -> classifier::Classifier<u64> {
    let mut cls = classifier::Classifier::new();
    fill(&mut cls, &w.rules);
    cls
}

fn five_tuple(src: u32, dst: u32, proto: u8, sport: u16, dport: u16) -> FlowKey {
    let mut k = FlowKey::default();
    k.set_dl_type(0x0800);
    k.set_nw_src(src);
    k.set_nw_dst(dst);
    k.set_nw_proto(proto);
    k.set_tp_src(sport);
    k.set_tp_dst(dport);
    k
}

fn five_tuple_mask() -> FlowKey {
    five_tuple(u32::MAX, u32::MAX, u8::MAX, u16::MAX, u16::MAX)
}

/// Keys derived from rules: each rule's value with the bits outside its mask randomised in
/// fields a real packet would carry.
fn keys_in(rng: &mut SmallRng, rules: &[(Match, u32)], n: usize) -> Vec<FlowKey> {
    (0..n)
        .map(|_| {
            let (m, _) = &rules[rng.gen_range(0..rules.len())];
            let mut noise = five_tuple(rng.gen(), rng.gen(), 6, rng.gen(), rng.gen());
            noise.set_in_port(rng.gen_range(1..9));
            noise.set_nw_ttl(64);
            let mut k = *m.value();
            for w in 0..k.words.len() {
                k.words[w] |= noise.words[w] & !m.mask().words[w];
            }
            k
        })
        .collect()
}

/// `n` distinct exact 5-tuple rules (TCP or UDP), all at priority 100.
pub fn exact(n: usize, seed: u64) -> Workload {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut seen = HashSet::with_capacity(n);
    let mut rules = Vec::with_capacity(n);
    while rules.len() < n {
        let t = (
            0x0a00_0000 | (rng.gen::<u32>() & 0x00ff_ffff),
            0x0a00_0000 | (rng.gen::<u32>() & 0x00ff_ffff),
            [6u8, 17][rng.gen_range(0..2)],
            rng.gen_range(1024..u16::MAX),
            [80u16, 443, 53, 22, 8080][rng.gen_range(0..5)],
        );
        if seen.insert(t) {
            rules.push((
                Match::new(five_tuple(t.0, t.1, t.2, t.3, t.4), five_tuple_mask()),
                100,
            ));
        }
    }
    let hits = keys_in(&mut rng, &rules, N_KEYS);
    let misses = (0..N_KEYS)
        .map(|_| {
            five_tuple(
                0xac10_0000 | rng.gen::<u16>() as u32,
                rng.gen(),
                6,
                rng.gen(),
                80,
            )
        })
        .collect();
    Workload {
        rules,
        hits,
        misses,
    }
}

/// `n` rules over `n_masks` distinct masks with prefixes on `nw_src`/`nw_dst` (every mask has
/// at least one), optional `in_port`, `nw_proto`, `tp_src`, `tp_dst`; each mask has its own
/// priority band, as an ACL would.
pub fn mixed(n: usize, n_masks: usize, seed: u64) -> Workload {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut templates: Vec<(Match, u32)> = Vec::new();
    let mut seen_masks = HashSet::new();
    while templates.len() < n_masks {
        let mut m = Match::catch_all();
        m.set_exact(fields::DL_TYPE, 0x0800);
        let src = [0u32, 8, 16, 24, 32][rng.gen_range(0..5)];
        let dst = if src == 0 {
            [8u32, 16, 20, 24, 28, 32][rng.gen_range(0..6)]
        } else {
            [0u32, 8, 16, 24, 32][rng.gen_range(0..5)]
        };
        let pm = |l: u32| {
            if l == 0 {
                0
            } else {
                u128::from(u32::MAX << (32 - l))
            }
        };
        m.set_masked(fields::NW_SRC, 0, pm(src));
        m.set_masked(fields::NW_DST, 0, pm(dst));
        if rng.gen_bool(0.3) {
            m.set_exact(fields::IN_PORT, 0);
        }
        if rng.gen_bool(0.6) {
            m.set_exact(fields::NW_PROTO, 0);
            if rng.gen_bool(0.7) {
                m.set_exact(fields::TP_DST, 0);
            }
            if rng.gen_bool(0.2) {
                m.set_exact(fields::TP_SRC, 0);
            }
        }
        if seen_masks.insert(*m.mask()) {
            templates.push((m, rng.gen_range(1..30_000)));
        }
    }
    let mut seen = HashSet::with_capacity(n);
    let mut rules = Vec::with_capacity(n);
    while rules.len() < n {
        // Skewed: low-numbered templates get more rules.
        let t = rng.gen_range(0..n_masks).min(rng.gen_range(0..n_masks));
        let (tm, prio) = &templates[t];
        let v = five_tuple(
            0x0a00_0000 | (rng.gen::<u32>() & 0x00ff_ffff),
            0x0a00_0000 | (rng.gen::<u32>() & 0x00ff_ffff),
            [6u8, 17][rng.gen_range(0..2)],
            rng.gen_range(1024..u16::MAX),
            [80u16, 443, 53, 22, 8080][rng.gen_range(0..5)],
        );
        let mut v = v;
        v.set_in_port(rng.gen_range(1..9));
        let m = Match::new(v, *tm.mask());
        let p = prio + rng.gen_range(0..3);
        if seen.insert((m, p)) {
            rules.push((m, p));
        }
    }
    let hits = keys_in(&mut rng, &rules, N_KEYS);
    let misses = (0..N_KEYS)
        .map(|_| {
            let mut k = five_tuple(
                0xac10_0000 | rng.gen::<u16>() as u32,
                0xac20_0000 | rng.gen::<u16>() as u32,
                6,
                rng.gen(),
                80,
            );
            k.set_in_port(rng.gen_range(1..9));
            k
        })
        .collect();
    Workload {
        rules,
        hits,
        misses,
    }
}

/// The workload of OVS's `ovstest test-classifier benchmark N P S` as OVS 3.1 really builds
/// it: 13 fields with 2 values each, all matched exactly (one subtable), priorities from
/// `n_prios`, duplicates skipped; lookup keys are random points of the same 8192-value space.
///
/// Where OVS varies `dl_type` (IP/ARP) we keep `dl_type=ip` and vary `reg0` instead, so every
/// rule passes OpenFlow prerequisites; the shape (13 binary fields, one subtable) is the same.
pub fn ovs_like(n: usize, n_prios: u32, seed: u64) -> Workload {
    let mut rng = SmallRng::seed_from_u64(seed);
    let prios: Vec<u32> = (0..n_prios).map(|i| i * 129).collect();
    let mut seen = HashSet::new();
    let mut rules = Vec::new();
    for _ in 0..n {
        let pat: u32 = rng.gen_range(0..8192);
        let p = prios[rng.gen_range(0..prios.len())];
        let key = ovs_key(pat);
        if seen.insert((pat, p)) {
            rules.push((Match::new(key, ovs_mask()), p));
        }
    }
    let all: Vec<FlowKey> = (0..N_KEYS)
        .map(|_| ovs_key(rng.gen_range(0..8192)))
        .collect();
    Workload {
        rules,
        hits: all,
        misses: Vec::new(),
    }
}

fn ovs_fields(k: &mut FlowKey, pat: u32, mask: bool) {
    let b = |i: u32| (pat >> i) & 1 == 1;
    let pick = |i: u32, a: u128, z: u128| {
        if mask {
            u128::MAX
        } else if b(i) {
            z
        } else {
            a
        }
    };
    k.set(fields::TUN_ID, pick(0, 0, 0xfedc_ba98_7654_3210));
    k.set(fields::METADATA, pick(1, 0, 0xfedc_ba98_7654_3210));
    k.set(fields::NW_SRC, pick(2, 0xc0a8_0001, 0xc0a0_4455));
    k.set(fields::NW_DST, pick(3, 0xc0a8_0002, 0xc0a0_4455));
    k.set(fields::IN_PORT, pick(4, 1, 0xfffe));
    k.set(fields::VLAN_TCI, pick(5, 0x1065, 0));
    k.set(fields::REGS[0], pick(6, 0, 0xdead_beef));
    k.set(fields::TP_SRC, pick(7, 49362, 80));
    k.set(fields::TP_DST, pick(8, 6667, 22));
    k.set(fields::DL_SRC, pick(9, 0x0002_e30f_80a4, 0x5e33_7f5f_1e99));
    k.set(fields::DL_DST, pick(10, 0x4a27_71ae_64c1, 0xffff_ffff_ffff));
    k.set(fields::NW_PROTO, pick(11, 6, 17));
    k.set(
        fields::NW_TOS,
        if mask {
            0xfc
        } else if b(12) {
            0
        } else {
            48 << 2
        },
    );
    k.set(fields::DL_TYPE, if mask { 0xffff } else { 0x0800 });
}

fn ovs_key(pat: u32) -> FlowKey {
    let mut k = FlowKey::default();
    ovs_fields(&mut k, pat, false);
    k
}

fn ovs_mask() -> FlowKey {
    let mut k = FlowKey::default();
    ovs_fields(&mut k, 0, true);
    k
}
