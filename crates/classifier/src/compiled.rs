//! A version of a small rule set of several masks compiled into merged tuples
//! ([`crate::Classifier::compile`]): TupleMerge (Daly, Liu and Torng, IEEE/ACM ToN 2019),
//! frozen.
//!
//! Rules whose masks all contain a coarser mask `T` share one hash table keyed by a key's bits
//! under `T`. A bucket lists its rules best first, each with its own mask and value, and a
//! lookup compares them in turn until one matches. A rule set of twenty masks becomes three to
//! eight such tables: a lookup hashes a few words three to eight times instead of walking the
//! tries and probing the subtables they leave (about five on a hit of the bench's mixed set).
//!
//! **Consulted bits.** For each table visited, `T` (an empty bucket proves that no rule of the
//! table matches any packet with the same bits under `T`: every rule of the table whose value
//! agrees with the key under `T` is in the key's bucket), or, for a key that leaves the
//! table's rules' common prefix on an IPv4 address, that address's bits down to where it
//! leaves, with the protocol words ([`Far`], checked before the probe, which it spares); for each
//! rule compared that does not match, the highest bit where the key differs from it under its mask;
//! for the rule that matches, its whole mask. Tables after the one whose best rule no later table
//! can beat are not visited, as subtables are not. A packet that agrees with the key on those bits
//! reaches the same buckets, differs from the same rules and matches the same one.
//!
//! **Versions.** A compiled form belongs to one version of the rule set and is dropped by any
//! change to it ([`crate::RuleSet`]'s `apply` and `replay`): lookups then use the subtables
//! again until the writer compiles the version it publishes next.

use std::collections::HashMap;
use std::sync::Arc;

use packet::key::{fields, FlowKey, KeyField, STAGES};

use crate::rule::{Rank, Rule};
use crate::subtable::left_aligned;
use crate::trie::prefix_mask;
use crate::PrefixField;

/// The most rules a rule set may hold to be compiled: past it, the tables a bucket limit asks
/// for grow in number and their buckets in length, and misses (which the subtables' tries
/// explain with a few address bits) cost more than the subtables' (run 33).
pub const COMPILE_MAX_RULES: usize = 8192;

/// The most tables a compiled form may have: a miss visits every table (but those a [`Far`]
/// check passes over without a probe), and a hit most of them. The bench's mixed set (twenty
/// masks, single lookups alternated with the subtables' in one process, run 34): three tables
/// from 500 to 2,000 rules, hits with tracking 2.3x to 3.4x and misses 2.7x the subtables';
/// six at 4,096 rules, hits 2.2x, misses 1.6x (1.45x without tracking); seven at 8,192, hits
/// 2.1x, misses 1.4x (1.2x). Before the `Far` checks went first (run 33), misses at seven
/// tables ran at 0.8x, and 0.5x without tracking.
pub const COMPILED_MAX_TABLES: usize = 8;

/// Why [`crate::Classifier::try_compile`] left a rule set as it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Uncompiled {
    /// One subtable (or none): its lookup is one probe already.
    #[error("one subtable or none: nothing to merge")]
    OneSubtable,
    /// More rules than [`COMPILE_MAX_RULES`].
    #[error("more than {COMPILE_MAX_RULES} rules")]
    TooManyRules,
    /// A mask of more words than a compiled rule holds, or a table whose rules' masks use
    /// more key words between them.
    #[error("masks of more key words than a compiled table holds")]
    WideMasks,
    /// The compiled form would have as many tables as there are subtables, or more than
    /// [`COMPILED_MAX_TABLES`].
    #[error(
        "{tables} tables (at most {COMPILED_MAX_TABLES}, and fewer than its {subtables} subtables)"
    )]
    NoGain {
        /// Tables of the compiled form.
        tables: usize,
        /// Subtables of the rule set.
        subtables: usize,
    },
    /// Its lookups would consult more bits than the subtables' on the sample of keys: wider
    /// megaflows would cost a datapath more than the faster lookups save.
    #[error("it would consult {compiled} bits where the subtables consult {subtables} on a sample of keys")]
    MoreBits {
        /// Bits the compiled form consulted, over the sample.
        compiled: u64,
        /// Bits the subtables consulted, over the sample.
        subtables: u64,
    },
}

/// The most mask words a compiled rule may have (the mixed sets' masks have five; six rather
/// than eight: a bucket's rule in 80 bytes, not 96, 1 to 2% more hits a second).
const CW: usize = 6;

/// The most rules a bucket may hold.
const BUCKET_LIMIT: usize = 8;

/// The most fields of a mask whose coarsenings are tried (each kept or dropped): more, and the
/// mask's table keeps the mask whole.
const COARSEN_FIELDS: usize = 7;

/// A rule as a bucket lists it: its rank, its mask (by index in its table's list) and its
/// value at its table's words ([`Table::at`]; zero where its mask has no bits).
struct Cand<T> {
    rank: Rank,
    mask: u32,
    vals: [u64; CW],
    rule: Arc<Rule<T>>,
}

/// A mask's bits at its table's words ([`Table::at`]).
type Bits = [u64; CW];

/// A proof that a key far from every rule of a table on a prefix field matches none of them:
/// the rules' leading bits in common there (no longer than their shortest prefix). A key that
/// differs from those at bit `d` differs from every rule of the table at bit `d`, which each
/// rule's prefix covers: the field's bits from its top to `d` prove the table empty for the key,
/// where the table's mask would consult all of its own (a bench miss: one address bit, not the 16
/// or 24 of a table keyed by a prefix), as the subtables' tries do. With them go the words
/// of the stages between the metadata and the field's that all the table's rules match (the
/// address's protocol), so that the megaflow keeps its prerequisites; unlike the subtables'
/// rule-outs, not the metadata's (an `in_port` all the rules match proves nothing here). Fields of
/// at most 64 bits only (IPv4 addresses): a table's IPv6 prefixes are explained by its mask.
///
/// A table whose rules each have a prefix on one of two fields but not all on the same one
/// (some on `nw_src`, the others on `nw_dst`) has a proof in two parts (`also`): the first
/// over the rules with a prefix on the first field, the second over the others on the second
/// field; the key must leave both.
struct Far {
    /// The field's word, the common bits' value and mask there, the field's mask there.
    word: usize,
    value: u64,
    bits: u64,
    field_bits: u64,
    pre: Box<[(u8, u64)]>,
    also: Option<Box<Far>>,
}

/// A bucket: the hash of its bits under the table's mask, and its rules' span in the table's
/// list.
#[derive(Clone, Copy, Default)]
struct Slot {
    hash: u64,
    start: u32,
    len: u32,
}

struct Table<T> {
    /// The table's mask `T`, by words.
    words: Box<[(u8, u64)]>,
    /// The best rank of its rules.
    max_rank: Rank,
    /// The key words its rules' masks use (at most [`CW`]; the rest word 0, with no bits in
    /// any mask), those the table's mask does not cover whole first: a rule of the key's
    /// bucket agrees with the key on the table's bits (but for a hash collision), so a rule
    /// that does not match mostly differs in the others.
    at: [usize; CW],
    /// How many of `at` are used.
    n_at: usize,
    /// Checks that prove the table empty for a key with fewer bits than its mask, and spare the
    /// probe.
    far: Box<[Far]>,
    /// Open addressing, at most half full; a zero hash is an empty slot.
    slots: Box<[Slot]>,
    masks: Box<[Bits]>,
    cands: Box<[Cand<T>]>,
}

/// See the module documentation.
pub(crate) struct Compiled<T> {
    tables: Box<[Table<T>]>,
}

impl<T> std::fmt::Debug for Compiled<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compiled")
            .field("tables", &self.tables.len())
            .finish_non_exhaustive()
    }
}

/// The position of hash `h` in a table of `mask + 1` slots.
#[inline]
#[allow(clippy::cast_possible_truncation)] // The hash's low bits, on purpose.
fn low_bits(h: u64, mask: usize) -> usize {
    (h as usize) & mask
}

/// A word into a running hash.
#[inline]
fn mix(h: u64, w: u64) -> u64 {
    (h ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29)
}

/// The hash of `k`'s bits under `words` (never zero). Not the subtables' (`rule::mix_at` and
/// `rule::finish`): their per-word multiplier is a load from a table, and their finalizer a
/// step longer; a table's mask is one or two words here, where that is most of the hash
/// (compiled hits 0.96x to 0.99x with theirs, three alternations of `prof_mixed 1000 4000000
/// compiled`).
#[inline]
fn hash_under(words: &[(u8, u64)], k: &FlowKey) -> u64 {
    let mut h = 0x1234_5678;
    for (i, b) in words {
        h = mix(h, k.words[usize::from(*i)] & b);
    }
    let h = (h ^ (h >> 31)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    (h ^ (h >> 29)) | 1
}

fn words_of(mask: &FlowKey) -> Vec<(u8, u64)> {
    (0u8..)
        .zip(mask.words.iter())
        .filter(|(_, w)| **w != 0)
        .map(|(i, w)| (i, *w))
        .collect()
}

/// The coarser masks a table for rules of `mask` may have, fewest bits first: each field of
/// the mask kept or dropped, and a prefix field (of `prefixes`) also cut to a multiple of 8
/// bits. Only `mask` itself for a mask of more than [`COARSEN_FIELDS`] fields.
fn coarsenings(mask: &FlowKey, prefixes: &[PrefixField]) -> Vec<FlowKey> {
    let present: Vec<KeyField> = fields::ALL
        .iter()
        .copied()
        .filter(|f| mask.get(*f) != 0)
        .collect();
    if present.len() > COARSEN_FIELDS {
        return vec![*mask];
    }
    let mut out = vec![FlowKey::default()];
    for f in present {
        let m = mask.get(f);
        let mut opts: Vec<Option<u128>> = vec![None, Some(m)];
        let width = u32::from(f.width);
        let full = u128::MAX >> (128 - width);
        let plen = m.count_ones();
        if prefixes.iter().any(|p| p.field == f) && m == (full << (width - plen)) & full {
            for l in (8..plen).step_by(8) {
                opts.push(Some((full << (width - l)) & full));
            }
        }
        let mut next = Vec::with_capacity(out.len() * opts.len());
        for base in &out {
            for o in &opts {
                let mut k = *base;
                if let Some(v) = o {
                    k.set(f, *v);
                }
                next.push(k);
            }
        }
        out = next;
    }
    out.sort_by_key(FlowKey::count_ones);
    out
}

impl<T> Compiled<T> {
    /// Compiles `rules` (tries on `prefixes`); `None` if a rule's mask has more than
    /// [`CW`] words.
    pub(crate) fn build<'a>(
        rules: impl Iterator<Item = &'a Arc<Rule<T>>>,
        prefixes: &[PrefixField],
    ) -> Option<Compiled<T>>
    where
        T: 'a,
    {
        // Each rule's value as a key, and the rules by mask.
        let mut all: Vec<(&Arc<Rule<T>>, FlowKey)> = Vec::new();
        let mut by_mask: HashMap<usize, (FlowKey, Vec<usize>)> = HashMap::new();
        for r in rules {
            if r.mask.idx.len() > CW {
                return None;
            }
            by_mask
                .entry(Arc::as_ptr(&r.mask) as usize)
                .or_insert_with(|| (r.mask.key, Vec::new()))
                .1
                .push(all.len());
            all.push((r, *r.match_().value()));
        }
        let mut masks: Vec<(FlowKey, Vec<usize>)> = by_mask.into_values().collect();
        // The masks with most rules choose their tables first; ties by the mask, so that a
        // rule set compiles the same way every time.
        masks.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.words.cmp(&b.0.words)));
        let mut tabs: Vec<(FlowKey, HashMap<u64, Vec<usize>>)> = Vec::new();
        for (mask, idxs) in &masks {
            let fits = |t: &FlowKey, b: &HashMap<u64, Vec<usize>>, limit: usize| {
                let w = words_of(t);
                let mut add: HashMap<u64, usize> = HashMap::new();
                for i in idxs {
                    *add.entry(hash_under(&w, &all[*i].1)).or_default() += 1;
                }
                add.iter()
                    .all(|(h, n)| b.get(h).map_or(0, Vec::len) + n <= limit)
            };
            let at = match tabs
                .iter()
                .position(|(t, b)| t.is_subset_of(mask) && fits(t, b, BUCKET_LIMIT))
            {
                Some(at) => at,
                None => {
                    // The coarsest mask under which this mask's rules fill no bucket past
                    // half, so that later masks find room there; else past half.
                    let cs = coarsenings(mask, prefixes);
                    let empty = HashMap::new();
                    let t = [BUCKET_LIMIT / 2, BUCKET_LIMIT]
                        .iter()
                        .find_map(|l| cs.iter().find(|t| fits(t, &empty, *l)))
                        .copied()
                        .unwrap_or(*mask);
                    tabs.push((t, HashMap::new()));
                    tabs.len() - 1
                }
            };
            let w = words_of(&tabs[at].0);
            for i in idxs {
                let h = hash_under(&w, &all[*i].1);
                tabs[at].1.entry(h).or_default().push(*i);
            }
        }
        let mut tables: Vec<Table<T>> = tabs
            .into_iter()
            .map(|(t, buckets)| Self::table(&t, buckets, &all, prefixes))
            .collect::<Option<_>>()?;
        tables.sort_by_key(|t| std::cmp::Reverse(t.max_rank));
        Some(Compiled {
            tables: tables.into_boxed_slice(),
        })
    }

    /// A table of mask `t` with `buckets` (hash, rule positions in `all`); `None` if its
    /// rules' masks use more than [`CW`] key words between them.
    fn table(
        t: &FlowKey,
        buckets: HashMap<u64, Vec<usize>>,
        all: &[(&Arc<Rule<T>>, FlowKey)],
        prefixes: &[PrefixField],
    ) -> Option<Table<T>> {
        // The words the rules use, uncovered by `t` first.
        let mut used: Vec<usize> = buckets
            .values()
            .flatten()
            .flat_map(|i| all[*i].0.mask.idx.iter().map(|w| usize::from(*w)))
            .collect();
        used.sort_unstable();
        used.dedup();
        used.sort_by_key(|w| {
            buckets
                .values()
                .flatten()
                .all(|i| all[*i].0.mask.key.words[*w] & !t.words[*w] == 0)
        });
        if used.len() > CW {
            return None;
        }
        let mut at = [0usize; CW];
        at[..used.len()].copy_from_slice(&used);
        let far = far_checks(buckets.values().flatten().map(|i| all[*i].0), prefixes);
        let n = (buckets.len() * 2).next_power_of_two().max(8);
        let mut slots = vec![Slot::default(); n];
        let mut cands: Vec<Cand<T>> = Vec::new();
        let mut masks: Vec<Bits> = Vec::new();
        let mut mask_ids: HashMap<usize, u32> = HashMap::new();
        let mut max_rank = 0;
        let mut buckets: Vec<(u64, Vec<usize>)> = buckets.into_iter().collect();
        buckets.sort_unstable_by_key(|(h, _)| *h);
        for (h, mut v) in buckets {
            v.sort_by(|a, b| all[*b].0.rank.cmp(&all[*a].0.rank));
            let mut p = low_bits(h, n - 1);
            while slots[p].hash != 0 {
                p = (p + 1) & (n - 1);
            }
            slots[p] = Slot {
                hash: h,
                start: u32::try_from(cands.len()).expect("fewer than 4G rules"),
                len: u32::try_from(v.len()).expect("fewer than 4G rules"),
            };
            for i in v {
                let (r, value) = &all[i];
                let mid = *mask_ids
                    .entry(Arc::as_ptr(&r.mask) as usize)
                    .or_insert_with(|| {
                        let mut bits = [0u64; CW];
                        for (b, w) in bits.iter_mut().zip(&used) {
                            *b = r.mask.key.words[*w];
                        }
                        masks.push(bits);
                        u32::try_from(masks.len() - 1).expect("fewer than 4G masks")
                    });
                let bits = &masks[mid as usize];
                let mut vals = [0u64; CW];
                for ((v, w), b) in vals.iter_mut().zip(&used).zip(bits) {
                    *v = value.words[*w] & b;
                }
                max_rank = max_rank.max(r.rank);
                cands.push(Cand {
                    rank: r.rank,
                    mask: mid,
                    vals,
                    rule: Arc::clone(r),
                });
            }
        }
        Some(Table {
            words: words_of(t).into_boxed_slice(),
            max_rank,
            at,
            n_at: used.len(),
            far,
            slots: slots.into_boxed_slice(),
            masks: masks.into_boxed_slice(),
            cands: cands.into_boxed_slice(),
        })
    }

    /// Number of tables.
    pub(crate) fn n_tables(&self) -> usize {
        self.tables.len()
    }

    /// Heap bytes (the rules themselves not counted).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.tables
            .iter()
            .map(|t| {
                t.slots.len() * std::mem::size_of::<Slot>()
                    + t.cands.len() * std::mem::size_of::<Cand<T>>()
                    + t.masks.len() * std::mem::size_of::<Bits>()
                    + t.words.len() * 9
                    + t.far.iter().map(Far::heap_bytes).sum::<usize>()
            })
            .sum::<usize>()
            + self.tables.len() * std::mem::size_of::<Table<T>>()
    }

    /// The best rule `key` matches; with `wc`, the bits it consulted ORed in (see the module
    /// documentation).
    #[inline]
    pub(crate) fn lookup(&self, key: &FlowKey, wc: Option<&mut FlowKey>) -> Option<&Arc<Rule<T>>> {
        match wc {
            Some(wc) => self.find(key, wc),
            None => self.find(key, &mut NoTrack),
        }
    }

    /// [`Compiled::lookup`], made once with tracking and once without (`C`), so that neither
    /// asks at each bit whether it tracks.
    #[inline]
    fn find<C: Consult>(&self, key: &FlowKey, wc: &mut C) -> Option<&Arc<Rule<T>>> {
        let mut best: Option<&Cand<T>> = None;
        // The best rank so far, in a register (0 below every rule's: a rank's high half is its
        // priority plus nothing, its low half `u64::MAX` less its sequence number, and no rule
        // has both at zero).
        let mut best_rank: Rank = 0;
        // Every table's hash first (a kept form has at most eight tables): they depend on the
        // key alone, and computed together they overlap, where each after the last table's
        // compares waited on those (3% more hits a second).
        let mut hashes = [0u64; COMPILED_MAX_TABLES];
        for (h, t) in hashes.iter_mut().zip(self.tables.iter()) {
            *h = hash_under(&t.words, key);
        }
        for (x, t) in self.tables.iter().enumerate() {
            if t.max_rank < best_rank {
                break;
            }
            // A key far from the table's rules on an address needs no probe (and, without
            // tracking, nothing more than the check).
            if t.far.iter().any(|f| f.explains(key, wc)) {
                continue;
            }
            for (i, b) in t.words.iter() {
                wc.or(usize::from(*i), *b);
            }
            let h = match hashes.get(x) {
                Some(h) => *h,
                None => hash_under(&t.words, key),
            };
            let Some(cands) = t.bucket(h) else {
                continue;
            };
            // The key's words the table's rules use, read once for all of them.
            let mut kw = [0u64; CW];
            for (k, w) in kw.iter_mut().zip(&t.at) {
                *k = key.words[*w];
            }
            for c in cands {
                if c.rank < best_rank {
                    break;
                }
                let bits = &t.masks[c.mask as usize];
                let mut diff = None;
                for j in 0..t.n_at {
                    let d = (kw[j] & bits[j]) ^ c.vals[j];
                    if d != 0 {
                        diff = Some((t.at[j], 1 << (63 - d.leading_zeros())));
                        break;
                    }
                }
                match diff {
                    Some((i, bit)) => wc.or(i, bit),
                    None => {
                        for (at, b) in t.at.iter().zip(bits).take(t.n_at) {
                            wc.or(*at, *b);
                        }
                        best = Some(c);
                        best_rank = c.rank;
                        break;
                    }
                }
            }
        }
        best.map(|c| &c.rule)
    }
}

/// The [`Far`] checks of a table whose rules are `rules`: one per prefix field on which every
/// rule has a prefix and they share leading bits; failing those, two-part ones over pairs of
/// fields that cover the rules between them.
fn far_checks<'a, T: 'a>(
    rules: impl Iterator<Item = &'a Arc<Rule<T>>>,
    prefixes: &[PrefixField],
) -> Box<[Far]> {
    let all: Vec<&Arc<Rule<T>>> = rules.collect();
    let mut out: Vec<Far> = (0..prefixes.len())
        .filter_map(|t| far_part(&all, t, prefixes))
        .collect();
    if out.is_empty() {
        for t1 in 0..prefixes.len() {
            let on1: Vec<&Arc<Rule<T>>> = all
                .iter()
                .copied()
                .filter(|r| r.mask.trie_plens[t1] > 0)
                .collect();
            if on1.is_empty() {
                continue;
            }
            let rest: Vec<&Arc<Rule<T>>> = all
                .iter()
                .copied()
                .filter(|r| r.mask.trie_plens[t1] == 0)
                .collect();
            for t2 in (0..prefixes.len()).filter(|t2| *t2 != t1) {
                if rest.iter().any(|r| r.mask.trie_plens[t2] == 0) {
                    continue;
                }
                if let (Some(mut a), Some(b)) =
                    (far_part(&on1, t1, prefixes), far_part(&rest, t2, prefixes))
                {
                    a.also = Some(Box::new(b));
                    out.push(a);
                }
            }
        }
    }
    out.into_boxed_slice()
}

/// The one-part [`Far`] check of `rules` on prefix field `t`, if they all have a prefix there
/// and share leading bits, and the field fits in a word.
fn far_part<T>(rules: &[&Arc<Rule<T>>], t: usize, prefixes: &[PrefixField]) -> Option<Far> {
    let pf = prefixes.get(t)?;
    let f = pf.field;
    let (first, rest) = rules.split_first()?;
    if f.width > 64 {
        return None;
    }
    let v0 = left_aligned(first.match_().value(), f);
    let mut len = first.mask.trie_plens[t];
    // The words of the stages after the metadata and before the field's: the protocol.
    let hi = STAGES[usize::from(pf.stage)].start;
    let lo = STAGES[1].start.min(hi);
    let mut pre: Vec<u64> = first.mask.key.words[lo..hi].to_vec();
    for r in rest {
        let v = left_aligned(r.match_().value(), f);
        #[allow(clippy::cast_possible_truncation)] // At most 128.
        let common = (v ^ v0).leading_zeros() as u8;
        len = len.min(r.mask.trie_plens[t]).min(common);
        for (p, w) in pre.iter_mut().zip(&r.mask.key.words[lo..hi]) {
            *p &= w;
        }
    }
    if len == 0 {
        return None;
    }
    // The common bits, shifted down into the field's place in its word.
    let down = |v: u128| {
        #[allow(clippy::cast_possible_truncation)] // The field's bits.
        let w = (v >> (128 - u32::from(f.width))) as u64;
        w << f.shift
    };
    Some(Far {
        word: usize::from(f.word),
        value: down(v0 & prefix_mask(len)),
        bits: down(prefix_mask(len)),
        field_bits: u64::MAX >> (64 - f.width) << f.shift,
        pre: (lo..)
            .zip(pre)
            .filter(|(_, w)| *w != 0)
            .map(|(i, w)| (u8::try_from(i).expect("KEY_WORDS fits in u8"), w))
            .collect(),
        also: None,
    })
}

impl Far {
    /// If `key` differs from the table's rules within the common bits (from both groups', for
    /// a proof in two parts), ORs the proof into `wc` and returns true.
    #[inline]
    fn explains<C: Consult>(&self, key: &FlowKey, wc: &mut C) -> bool {
        let x = self.leaves(key);
        if x == 0 {
            return false;
        }
        if let Some(b) = &self.also {
            let y = b.leaves(key);
            if y == 0 {
                return false;
            }
            b.consult(y, wc);
        }
        self.consult(x, wc);
        true
    }

    /// Heap bytes of this check (its part in two included), the `Box` that holds it too.
    fn heap_bytes(&self) -> usize {
        std::mem::size_of::<Far>()
            + self.pre.len() * std::mem::size_of::<(u8, u64)>()
            + self.also.as_ref().map_or(0, |b| b.heap_bytes())
    }

    /// The key's bits that differ from the common ones (zero if it has them).
    #[inline]
    fn leaves(&self, key: &FlowKey) -> u64 {
        (key.words[self.word] ^ self.value) & self.bits
    }

    /// ORs the proof of a key that differs from the common bits at `x` into `wc`: the field's
    /// bits from its top down to the highest that differs, and the words before its stage.
    #[inline]
    fn consult<C: Consult>(&self, x: u64, wc: &mut C) {
        wc.or(
            self.word,
            self.field_bits & (u64::MAX << (63 - x.leading_zeros())),
        );
        for (i, b) in self.pre.iter() {
            wc.or(usize::from(*i), *b);
        }
    }
}

/// Where a lookup puts the bits it consults: a key of them, or nowhere.
trait Consult {
    fn or(&mut self, word: usize, bits: u64);
}

impl Consult for FlowKey {
    #[inline(always)]
    fn or(&mut self, word: usize, bits: u64) {
        self.words[word] |= bits;
    }
}

/// A lookup without tracking.
struct NoTrack;

impl Consult for NoTrack {
    #[inline(always)]
    fn or(&mut self, _: usize, _: u64) {}
}

impl<T> Table<T> {
    /// The rules of the bucket whose hash is `h`, if there is one.
    #[inline]
    fn bucket(&self, h: u64) -> Option<&[Cand<T>]> {
        let m = self.slots.len() - 1;
        let mut p = low_bits(h, m);
        loop {
            let s = self.slots.get(p)?;
            if s.hash == h {
                return self
                    .cands
                    .get(s.start as usize..s.start as usize + s.len as usize);
            }
            if s.hash == 0 {
                return None;
            }
            p = (p + 1) & m;
        }
    }
}
