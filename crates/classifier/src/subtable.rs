//! One subtable: every rule with one mask, in a hash table keyed by the masked value, plus
//! one index per stage for staged lookup.
//!
//! The hash of a key is computed word by word over the mask's non-zero words only, in stage
//! order, so the running hash after stage `k` is the hash of the key's stages `0..=k`. For
//! every stage but the last, a stage index counts the cells whose values' stages `0..=k`
//! hash to each value. A lookup that misses the final table with wildcard tracking on finds
//! the first stage whose partial hash no rule has: the packet misses at that stage, and only
//! that stage's bits (and the earlier ones') were needed to know it.
//!
//! The cells and stage indices are shared by the classifier's two versions and written in
//! place ([`crate::shared`]); each version keeps its own arena of entries beside the cells, at
//! the same positions: a cell whose position is empty in a version's arena does not exist for
//! it. A hit usually reads one cell and the arena slot beside it (both found from the hash and
//! the small, cached tags alone, so neither load waits on the other); a batch of lookups
//! prefetches every key's home cell and arena slot before comparing any (see
//! [`RuleSet::lookup_batch`](crate::RuleSet::lookup_batch)).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use packet::key::{FlowKey, KeyField, KEY_WORDS};

use crate::hint::prefetch;
use crate::rule::{finish, mix_at, mix_with, Mask, Rule};
use crate::ruleset::RECYCLE_MAX;
use crate::shared::{SharedCells, SharedIndex, MIN_CELLS, N_INLINE};
use crate::trie::{prefix_mask, TrieMatch, Walk};
use crate::PrefixField;

/// Tables of at least this many cells (320 KB of cells) are touched ahead by batch lookups;
/// smaller ones stay in cache, and the extra pass would only cost. A rule set of several
/// subtables none of which is that large is looked up key by key (fewer cells in tests, so
/// that the proptests' small rule sets take both ways).
const TOUCH_CELLS: usize = if cfg!(test) { 16 } else { 4096 };

/// How many keys ahead of its find a one-subtable batch prefetches a key's lines
/// ([`Subtable::touch_ahead`]).
const TOUCH_AHEAD: usize = 4;

/// Tables of at least this many cells (400 KB with their tags and arena slots, a fifth of this
/// host's L2) check their home cell first ([`SharedCells::find`]; fewer in tests, so that the
/// proptests take both ways). Measured with a runtime switch in one process against the per-cell
/// probe of before: hits at 262,144 exact rules 0.98x, misses 1.21x; at 16,384 rules of OVS's set
/// 0.98x; below it, without the home first, exact 1,000-rule hits 1.06x, misses 1.16x, and
/// 1.48x without tracking, OVS's 1,000-rule set 1.43x without tracking and 1.12x with.
const HOME_FIRST_CELLS: usize = if cfg!(test) { 32 } else { 8192 };

/// The rules of one masked value in one version, best first.
#[derive(Debug)]
pub(crate) struct Entry<T> {
    head: Arc<Rule<T>>,
    /// Rules with the same match but lower priority, best first (rare, so boxed: an entry
    /// is 16 bytes).
    #[allow(clippy::box_collection)] // One thin pointer instead of a three-word `Vec`.
    rest: Option<Box<Vec<Arc<Rule<T>>>>>,
}

impl<T> Clone for Entry<T> {
    fn clone(&self) -> Self {
        Entry {
            head: self.head.clone(),
            rest: self.rest.clone(),
        }
    }
}

impl<T> Entry<T> {
    fn new(rule: Arc<Rule<T>>) -> Self {
        Entry {
            head: rule,
            rest: None,
        }
    }

    fn rest(&self) -> &[Arc<Rule<T>>] {
        self.rest.as_deref().map_or(&[], |v| v.as_slice())
    }

    fn rest_mut(&mut self) -> &mut Vec<Arc<Rule<T>>> {
        self.rest.get_or_insert_with(Box::default)
    }

    /// Adds `rule` (a rank not present) in rank order.
    fn add(&mut self, rule: Arc<Rule<T>>) {
        if rule.rank > self.head.rank {
            let old = std::mem::replace(&mut self.head, rule);
            self.rest_mut().insert(0, old);
        } else {
            let at = self.rest().partition_point(|r| r.rank > rule.rank);
            self.rest_mut().insert(at, rule);
        }
    }
}

/// `key`'s value of `field`, left-aligned in 128 bits (as a trie walks it).
#[inline]
pub(crate) fn left_aligned(key: &FlowKey, field: KeyField) -> u128 {
    key.get(field) << (128 - u32::from(field.width))
}

/// A trie that rules a subtable out ([`TrieCtx::ruling_trie`]): its field, and in `add` the
/// leading bits of the field the proof needs, in the field's position.
#[derive(Debug, Clone, Copy)]
struct Ruling {
    field: KeyField,
    add: u128,
}

/// Lazily computed trie walks for one lookup, one per prefix field.
#[derive(Debug)]
pub(crate) struct TrieCtx<'a> {
    prefixes: &'a [PrefixField],
    tries: &'a [crate::trie::TrieView],
    /// The tries walked from their roots (see [`RuleSet`](crate::RuleSet)'s `small_tries`).
    small: u8,
    walks: [Walk; crate::rule::MAX_PREFIXES],
}

impl<'a> TrieCtx<'a> {
    /// The context of a lookup in tries `tries` over fields `prefixes`; no walk begun.
    #[inline]
    pub(crate) fn new(
        prefixes: &'a [PrefixField],
        tries: &'a [crate::trie::TrieView],
        small: u8,
    ) -> Self {
        TrieCtx {
            prefixes,
            tries,
            small,
            walks: Default::default(),
        }
    }

    /// Walk of trie `t` for `key`, advanced (if needed) far enough to answer for prefix
    /// length `plen`.
    ///
    /// A walk that starts from its jump table (a trie of a thousand nodes or more, and an
    /// address under its root) first begins every other walk not yet begun
    /// ([`TrieView::begin`](crate::trie::TrieView::begin)): each asks for its first nodes'
    /// lines at once, so that the misses of a lookup's walks overlap instead of following one
    /// another (mixed masks at 262,144 rules: a fifth more lookups a second with the first
    /// node's line, a tenth more again with the lines of its subtree).
    #[inline]
    fn walk(&mut self, t: usize, key: &FlowKey, plen: u8) -> TrieMatch {
        if !self.walks[t].knows(plen) {
            let field = self.prefixes[t].field;
            let bits = left_aligned(key, field);
            // `walks_from_jump` first: a small trie's walk pays nothing here (OVS's 1,000-rule
            // set: 3% slower without the check).
            let trie = &self.tries[t];
            if !self.walks[t].started()
                && trie.walks_from_jump()
                && trie.begin(&mut self.walks[t], bits)
            {
                self.begin_others(key, t);
            }
            trie.advance(&mut self.walks[t], bits, field.width, plen);
        }
        self.walks[t].m()
    }

    /// Begins the walk of every trie but `t` not begun yet, where it starts from a jump table.
    #[inline]
    fn begin_others(&mut self, key: &FlowKey, t: usize) {
        for (i, ((w, trie), pf)) in self
            .walks
            .iter_mut()
            .zip(self.tries)
            .zip(self.prefixes)
            .enumerate()
        {
            if i != t && !w.started() && trie.walks_from_jump() {
                trie.begin(w, left_aligned(key, pf.field));
            }
        }
    }

    /// If a trie of `set` (bit `t` for trie `t`) rules the subtable with mask `m` out, ORs
    /// the address bits the decision needed into `wc` and returns `true`.
    #[inline(always)]
    fn skip_set(&mut self, m: &Mask, set: u8, key: &FlowKey, wc: &mut FlowKey) -> bool {
        match self.ruling_trie(m, set, key) {
            Some(r) => {
                wc.set(r.field, wc.get(r.field) | r.add);
                true
            }
            None => false,
        }
    }

    /// The first trie of `set` (bit `t` for trie `t`) that rules the subtable with mask `m`
    /// out, walking as far as needed, and the leading bits of its field the proof needs. Out of
    /// line: inlined, with the walk in it, into both of its callers, it made the explanation a
    /// quarter slower on OVS's 1,000-rule set (run 20).
    #[inline(never)]
    fn ruling_trie(&mut self, m: &Mask, mut set: u8, key: &FlowKey) -> Option<Ruling> {
        while set != 0 {
            let t = set.trailing_zeros() as usize;
            set &= set - 1;
            let (plen, pf) = (m.trie_plens[t], &self.prefixes[t]);
            let res = self.walk(t, key, plen);
            if !res.has_len(plen) {
                let n = res.examined.min(plen);
                return Some(Ruling {
                    field: pf.field,
                    add: prefix_mask(n) >> (128 - u32::from(pf.field.width)),
                });
            }
        }
        None
    }
}

/// The tries' answers for one lookup in a rule set of several subtables: every trie walked to
/// the end of the key's path at once, before the first subtable with a prefix length on a
/// trie's field, so that each subtable is kept or ruled out from its prefix lengths alone,
/// without a probe.
///
/// A subtable a trie rules out is explained by the stages before the trie's field and the
/// leading bits of the field the walk examined up to the subtable's prefix length; those bits
/// are nested (a walk's bits are a prefix of its address), so the lookup keeps the longest per
/// trie and ORs it in once, at its end ([`Walked::finish`]). What a walk concludes about a
/// length is the same whether it walked lazily up to that length or to its end (it ends at the
/// same node or passes the same ones), so these are the bits lazy walks would give.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Walked {
    /// Per trie, bit `l - 1` set if a rule's prefix of length `l` matches the key, in two
    /// halves (a test of a `u128` bit at a variable place is a dozen instructions).
    lens: [[u64; 2]; crate::rule::MAX_PREFIXES],
    /// Per trie, the leading bits of its field its walk examined.
    examined: [u8; crate::rule::MAX_PREFIXES],
    /// Per trie, the leading bits of its field the rule-outs so far need.
    need: [u8; crate::rule::MAX_PREFIXES],
}

impl Walked {
    /// Walks every trie of `tries` (over fields `prefixes`) for `key` to its end. The walks
    /// that start from a jump table are begun together, so that their first misses overlap.
    #[inline(never)]
    pub(crate) fn new(
        prefixes: &[PrefixField],
        tries: &[crate::trie::TrieView],
        key: &FlowKey,
    ) -> Walked {
        let mut walks = [Walk::NEW; crate::rule::MAX_PREFIXES];
        let mut bits = [0u128; crate::rule::MAX_PREFIXES];
        for (((w, b), trie), pf) in walks.iter_mut().zip(&mut bits).zip(tries).zip(prefixes) {
            *b = left_aligned(key, pf.field);
            if trie.walks_from_jump() {
                trie.begin(w, *b);
            }
        }
        let mut out = Walked {
            lens: [[0; 2]; crate::rule::MAX_PREFIXES],
            examined: [0; crate::rule::MAX_PREFIXES],
            need: [0; crate::rule::MAX_PREFIXES],
        };
        for (t, ((w, trie), pf)) in walks.iter_mut().zip(tries).zip(prefixes).enumerate() {
            trie.finish(w, bits[t], pf.field.width);
            let m = w.m();
            #[allow(clippy::cast_possible_truncation)] // The two halves, on purpose.
            {
                out.lens[t] = [m.lens as u64, (m.lens >> 64) as u64];
            }
            out.examined[t] = m.examined;
        }
        out
    }

    /// If a trie rules out every rule with mask `m` for this key, notes the bits the proof
    /// needs on the trie's field and returns the position in `m`'s words where the trie's
    /// stage begins: the words before it are the rest of the proof (the caller ORs them).
    #[inline]
    pub(crate) fn rule_out(&mut self, m: &Mask) -> Option<usize> {
        let mut set = m.trie_set;
        while set != 0 {
            let t = set.trailing_zeros() as usize;
            set &= set - 1;
            let plen = m.trie_plens[t];
            if !self.has_bit(t, usize::from(plen > 64), m.trie_bit[t]) {
                self.note(t, plen);
                return Some(usize::from(m.trie_pos[t]));
            }
        }
        None
    }

    /// True if a rule's prefix on trie `t`'s field matches the key with the length whose bit
    /// is `bit` in half `half` of the lengths (bit `(l - 1) % 64` of half `(l - 1) / 64`).
    #[inline]
    pub(crate) fn has_bit(&self, t: usize, half: usize, bit: u64) -> bool {
        self.lens[t][half] & bit != 0
    }

    /// Notes a rule-out by trie `t` of a subtable with prefix length `plen` on its field: the
    /// field's bits the walk examined, up to `plen`, are part of the proof.
    #[inline]
    pub(crate) fn note(&mut self, t: usize, plen: u8) {
        self.need[t] = self.need[t].max(self.examined[t].min(plen));
    }

    /// ORs into `wc` the bits the rule-outs of this lookup needed on the tries' fields.
    #[inline]
    pub(crate) fn finish(&self, prefixes: &[PrefixField], wc: &mut FlowKey) {
        for (n, pf) in self.need.iter().zip(prefixes) {
            if *n != 0 {
                let add = prefix_mask(*n) >> (128 - u32::from(pf.field.width));
                wc.set(pf.field, wc.get(pf.field) | add);
            }
        }
    }
}

/// Slots per key a stage index of `keys` keys keeps: a quarter full while small, half full
/// once large. Most stage-index probes are misses (that is what they are for), and a miss in a
/// linear-probing table half full reads about 2.5 slots, a quarter full about 1.4: OVS's
/// 1,000-rule benchmark set looks up 4% faster with wildcard tracking at a quarter. Large
/// indices stay at half, where the memory (8 MB at 256K keys) and the growth cost more.
#[inline]
fn ix_spread(keys: usize) -> usize {
    if keys < 4096 {
        4
    } else {
        2
    }
}

/// Segments a large subtable is cut into, by its hashes' top bits (`SEG_BITS` of them).
///
/// A subtable starts as one open-addressing table (positions are its cells' indices). Once that
/// table would grow past [`SPLIT_CELLS`], it is split instead into `1 << SEG_BITS` segments,
/// each its own table with its own entry arrays, which then grow one at a time: a doubling is a
/// segment's (a sixty-fourth of the table's), and the segments' load limits are staggered
/// ([`seg_limit`]), so that their doublings spread over the insertions instead of falling
/// together. The stage indices split the same way ([`IxSegs`]). A position is then the segment's
/// number above [`LOCAL_BITS`] bits of the cell's index in it. Fewer and smaller in tests, so that
/// the proptests' rule sets split and grow segments.
const SEG_BITS: u32 = if cfg!(any(test, fuzzing)) { 2 } else { 6 };
const SEGS: usize = 1 << SEG_BITS;
/// Most cells an unsplit subtable has: 65,536 (32,768 rules; its last doubling copies them in
/// about 2 ms). Split at 4,096 rules, the mixed set's 13,000-rule subtables grew hundreds of
/// small segments at a time, and 10,000 inserts into 262,144 mixed rules as one batch ran a
/// third slower than without the split (at that size no whole table doubles).
const SPLIT_CELLS: usize = if cfg!(any(test, fuzzing)) { 32 } else { 65536 };
/// Bits of a position that index a cell in its segment.
const LOCAL_BITS: u32 = 26;
const LOCAL_MASK: u32 = (1 << LOCAL_BITS) - 1;

/// Load limit of segment `k` of a split subtable, in 65,536ths: from 0.7 for segment 0 down to
/// 0.5, evenly on a log scale. Segments fill at the same rate (the hash spreads rules evenly), so
/// each doubles at its own point of a table's growth: the doublings fall evenly over half of
/// each doubling of the table, none of them together. Limits spread over a whole octave (0.35 to
/// 0.7) would spread them over all of it, but hold about three cells a rule at any size instead
/// of about two and a half, and a 262,144-rule load from empty lost a sixth of its speed to the
/// extra memory (the kernel's page clearing).
fn seg_limit(k: usize) -> u64 {
    #[allow(clippy::cast_precision_loss)] // `k` and `SEGS` are small.
    let f = 0.7 * (0.5f64 / 0.7).powf(k as f64 / SEGS as f64);
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // In (0.5, 0.7].
    let x = (f * 65536.0) as u64;
    x
}

/// The segment of `hash` in a split table (its top `SEG_BITS` bits).
#[inline(always)]
fn seg_no(hash: u64) -> usize {
    #[allow(clippy::cast_possible_truncation)] // `SEG_BITS` bits.
    let k = (hash >> (64 - SEG_BITS)) as usize;
    k
}

/// The table of `hash` and its segment number: `one` while `segs` is empty (unsplit), else
/// its segment.
#[inline(always)]
fn pick<'a, S>(one: &'a S, segs: &'a [S], hash: u64) -> (usize, &'a S) {
    if segs.is_empty() {
        (0, one)
    } else {
        let k = seg_no(hash);
        (k, &segs[k])
    }
}

/// The segment and the index in it of position `at`.
#[inline]
fn unpack(at: u32) -> (usize, usize) {
    ((at >> LOCAL_BITS) as usize, (at & LOCAL_MASK) as usize)
}

/// The position of cell `local` of segment `seg`.
#[inline]
fn pack(seg: usize, local: usize) -> u32 {
    let local = u32::try_from(local)
        .ok()
        .filter(|l| *l <= LOCAL_MASK)
        .expect("fewer than 64M cells a segment");
    // `seg` < `SEGS` <= 64.
    u32::try_from(seg).expect("few segments") << LOCAL_BITS | local
}

#[cfg(test)]
thread_local! {
    /// Tests: the live cells each growth on this thread copied, in order.
    pub(crate) static GROWTHS: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Positions a replay brings in together before copying their entries ([`Subtable::replay`]).
const REPLAY_GROUP: usize = 32;

/// Stage indices a subtable can have: one per stage but the last.
const N_INDEX: usize = packet::key::STAGES.len() - 1;

/// A lookup's hash chain state at the end of each stage but the last
/// ([`Subtable::hash_key_staged`]).
pub(crate) type Raw = [u64; N_INDEX];

/// Partial hashes of a value: one per stage but the last, and how many.
#[derive(Debug, Default, Clone, Copy)]
struct Partial([u64; N_INDEX], usize);

/// What a write of one rule probes a subtable with ([`WriteHashes::of`]).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct WriteHashes {
    partial: Partial,
    hash: u64,
}

impl WriteHashes {
    /// The hashes of masked value words `values` (a rule's, of mask `mask`) in any subtable
    /// of that mask: the writer of a single rule makes them once for the prefetch, the search
    /// for the rule and its insertion.
    pub(crate) fn of(mask: &Mask, values: &[u64], seed: u64) -> WriteHashes {
        let mut partial = Partial::default();
        let hash = hashes_in(mask, values, seed, &mut partial);
        WriteHashes { partial, hash }
    }

    /// The full hash.
    pub(crate) fn hash(&self) -> u64 {
        self.hash
    }
}

/// The hash of masked value words `values` at key words `idx` (for rehashing on growth).
fn rehash(idx: &[u8], values: &[u64], seed: u64) -> u64 {
    let mut h = seed;
    for (i, v) in idx.iter().zip(values) {
        h = mix_at(h, *i, *v);
    }
    finish(h)
}

/// The partial hashes of masked value words `values` under `mask` (one per touched stage but
/// the last) and the full one.
fn hashes_in(m: &Mask, values: &[u64], seed: u64, partial: &mut Partial) -> u64 {
    let mut h = seed;
    let mut pos = 0;
    for (j, end) in m.stage_ends.iter().enumerate() {
        let end = usize::from(*end);
        for (i, v) in m.idx[pos..end].iter().zip(&values[pos..end]) {
            h = mix_at(h, *i, *v);
        }
        pos = end;
        if j + 1 < m.stage_ends.len() {
            partial.0[partial.1] = finish(h);
            partial.1 += 1;
        }
    }
    finish(h)
}

/// The lowest and highest priority counted in `counts` (0 and 0 when empty).
fn priority_range(counts: &BTreeMap<u32, u32>) -> (u32, u32) {
    match (counts.first_key_value(), counts.last_key_value()) {
        (Some((lo, _)), Some((hi, _))) => (*lo, *hi),
        _ => (0, 0),
    }
}

/// Counts one rule of priority `priority` more (`add`) or less in `counts`.
fn count_priority(counts: &mut BTreeMap<u32, u32>, priority: u32, add: bool) {
    if add {
        *counts.entry(priority).or_insert(0) += 1;
    } else if let std::collections::btree_map::Entry::Occupied(mut o) = counts.entry(priority) {
        *o.get_mut() -= 1;
        if *o.get() == 0 {
            o.remove();
        }
    }
}

/// What the writer keeps about a subtable's shared arrays. The spare's is the current one;
/// the replay copies it from the published version (whose batch changed it last): the
/// entries that version changed since its own replay ([`Dirty`]), or all of it after a growth.
#[derive(Debug)]
struct WriterState {
    /// Live cells, tombstones and load limit of the newest cell array of each segment (one
    /// for an unsplit subtable).
    counts: Vec<SegCount>,
    /// Keys (counted down to zero or not) and load limit of the newest array of each stage
    /// index's segments.
    ix: [Vec<SegCount>; N_INDEX],
    /// What this version changed since its last replay.
    dirty: Dirty,
}

/// The entries of a [`WriterState`] changed since its version's last replay: a bit per
/// segment of the cells and of each stage index (segments past the 64th, and growths, which
/// make new vectors, mark all). A single commit changes a segment's counts and one of each
/// index; the replay's copy of every segment's counts of the cells and of each index was
/// about 300 instructions of a single commit into 262,144 rules, and copying the marked ones
/// alone saves about 160 of them (callgrind, 2% of the commit).
#[derive(Clone, Copy, Debug, Default)]
struct Dirty {
    all: bool,
    counts: u64,
    ix: [u64; N_INDEX],
}

/// The bit of segment `k` in a [`Dirty`] mask (none past the 64th: those mark all).
fn seg_bit(k: usize) -> Option<u64> {
    1u64.checked_shl(u32::try_from(k).ok()?)
}

impl WriterState {
    /// Segment `k`'s cell counts, to be changed.
    fn counts_mut(&mut self, k: usize) -> &mut SegCount {
        match seg_bit(k) {
            Some(b) => self.dirty.counts |= b,
            None => self.dirty.all = true,
        }
        &mut self.counts[k]
    }

    /// Segment `k` of stage index `j`'s counts, to be changed.
    fn ix_mut(&mut self, j: usize, k: usize) -> &mut SegCount {
        match seg_bit(k) {
            Some(b) => self.dirty.ix[j] |= b,
            None => self.dirty.all = true,
        }
        &mut self.ix[j][k]
    }

    /// The cell counts, all to be changed (a growth).
    fn all_counts_mut(&mut self) -> &mut Vec<SegCount> {
        self.dirty.all = true;
        &mut self.counts
    }

    /// Stage index `j`'s counts, all to be changed (a growth).
    fn all_ix_mut(&mut self, j: usize) -> &mut Vec<SegCount> {
        self.dirty.all = true;
        &mut self.ix[j]
    }

    /// At a replay: takes what `published` changed since its own replay (all of it after a
    /// growth, or where the shapes differ), and starts this version's record of changes.
    fn replay_from(&mut self, published: &WriterState) {
        let d = published.dirty;
        let same_shape = self.counts.len() == published.counts.len()
            && self
                .ix
                .iter()
                .zip(&published.ix)
                .all(|(a, b)| a.len() == b.len());
        if d.all || !same_shape {
            self.counts.clone_from(&published.counts);
            for (mine, theirs) in self.ix.iter_mut().zip(&published.ix) {
                mine.clone_from(theirs);
            }
        } else {
            copy_marked(&mut self.counts, &published.counts, d.counts);
            for ((mine, theirs), bits) in self.ix.iter_mut().zip(&published.ix).zip(d.ix) {
                copy_marked(mine, theirs, bits);
            }
        }
        self.dirty = Dirty::default();
    }
}

/// Copies the entries of `from` whose bits `bits` has set into `to` (of the same length).
fn copy_marked(to: &mut [SegCount], from: &[SegCount], mut bits: u64) {
    while bits != 0 {
        let k = bits.trailing_zeros() as usize;
        bits &= bits - 1;
        if let (Some(t), Some(f)) = (to.get_mut(k), from.get(k)) {
            *t = *f;
        }
    }
}

impl Clone for WriterState {
    fn clone(&self) -> Self {
        WriterState {
            counts: self.counts.clone(),
            ix: self.ix.clone(),
            // A copy (a subtable another version made) has its vectors whole: its next
            // replay may not rely on a record of changes it did not make.
            dirty: Dirty {
                all: true,
                ..Dirty::default()
            },
        }
    }
}

impl Default for WriterState {
    fn default() -> Self {
        WriterState {
            counts: vec![SegCount::default()],
            ix: std::array::from_fn(|_| vec![SegCount::default()]),
            dirty: Dirty::default(),
        }
    }
}

/// The writer's counts for one segment's newest cell array.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct SegCount {
    live: u32,
    tombs: u32,
    /// Live cells and tombstones the array may hold (at most seven tenths of its cells).
    limit: u32,
}

/// One open-addressing table of a subtable: its cells, shared by both versions, and this
/// version's entries beside them (as long as the cells).
#[derive(Debug)]
struct Seg<T> {
    cells: SharedCells,
    arena: Vec<Option<Entry<T>>>,
}

impl<T> Default for Seg<T> {
    fn default() -> Self {
        Seg {
            cells: SharedCells::default(),
            arena: Vec::new(),
        }
    }
}

impl<T> Seg<T> {
    /// This version's entry at cell `l`.
    #[inline]
    fn entry(&self, l: usize) -> Option<&Entry<T>> {
        self.arena.get(l)?.as_ref()
    }

    /// A segment of no cells yet (the replay takes them) and an arena of `len` empty slots.
    fn with_arena(len: usize) -> Self {
        Seg {
            cells: SharedCells::default(),
            arena: nones(len),
        }
    }
}

/// `len` empty arena slots.
fn nones<T>(len: usize) -> Vec<Option<Entry<T>>> {
    let mut v = Vec::new();
    v.resize_with(len, || None);
    v
}

/// Cells (or index slots) for `live` live ones in a segment of load limit `limit` (in
/// 65,536ths): twice the limit's worth (as a doubling leaves it), a power of two.
fn len_for(live: usize, limit: u64) -> usize {
    let want = (live as u64 * 2 * 65536).div_ceil(limit);
    usize::try_from(want)
        .unwrap_or(usize::MAX)
        .next_power_of_two()
        .max(MIN_CELLS)
}

impl<T> Clone for Seg<T> {
    fn clone(&self) -> Self {
        Seg {
            cells: self.cells.clone(),
            arena: self.arena.clone(),
        }
    }
}

/// Most slots of a stage index that [`Subtable::explain_miss`] may probe before the stage's
/// tries.
const SMALL_IX_SLOTS: usize = 8192;

/// A stage index: one while small, cut into `SEGS` segments by its keys' top bits as a
/// subtable's cells are (see [`SEG_BITS`]), so that its doublings too are a segment's.
#[derive(Debug, Clone, Default)]
struct IxSegs {
    /// The index while unsplit (empty once split).
    one: SharedIndex,
    /// Its segments once split (shared by both versions: a growth makes a new array of them).
    segs: Arc<[SharedIndex]>,
}

impl IxSegs {
    /// The segment of partial hash `ph`, and its number.
    #[inline(always)]
    fn of(&self, ph: u64) -> (usize, &SharedIndex) {
        pick(&self.one, &self.segs, ph)
    }

    #[inline]
    fn contains(&self, ph: u64) -> bool {
        self.of(ph).1.contains(ph)
    }

    /// True while the index is unsplit and at most [`SMALL_IX_SLOTS`] slots (64 KB): in the
    /// caches of a core that looks it up often.
    #[inline]
    fn small(&self) -> bool {
        self.segs.is_empty() && self.one.n_slots() <= SMALL_IX_SLOTS
    }

    /// True if `other` shares these arrays.
    fn same(&self, other: &IxSegs) -> bool {
        self.one.same(&other.one) && Arc::ptr_eq(&self.segs, &other.segs)
    }

    fn heap_bytes(&self) -> usize {
        self.one.heap_bytes() + self.segs.iter().map(SharedIndex::heap_bytes).sum::<usize>()
    }
}

/// The segment of a stage index's key: the partial hash's upper half, so the same bits as
/// [`IxSegs::of`] takes from the partial hash.
#[inline]
fn ix_seg_of_key(key: u32) -> usize {
    seg_no(u64::from(key) << 32)
}

/// Load limit of segment `k` of a split stage index, in 65,536ths: from a half (the unsplit
/// index's, once large) down to 0.36, staggered as the cells' ([`seg_limit`]).
fn ix_limit(k: usize) -> u64 {
    seg_limit(k) * 5 / 7
}

/// The count of a segment of `len` cells or slots holding `live`, with load limit `limit` (in
/// 65,536ths).
fn seg_count(live: usize, len: usize, limit: u64) -> SegCount {
    SegCount {
        live: u32::try_from(live).expect("fewer than 4G cells"),
        tombs: 0,
        // Below `len`: a limit is at most seven tenths.
        limit: u32::try_from((len as u64 * limit) >> 16).expect("fewer than 4G cells"),
    }
}

/// One growth of a batch ([`SubLog::moves`]).
#[derive(Debug)]
struct Move {
    /// The segment whose cells moved (0 for an unsplit subtable).
    seg: usize,
    /// True if the unsplit table was split into `SEGS` segments.
    split: bool,
    /// The new position of each old cell of the segment (`u32::MAX`: a tombstone, dropped).
    to: Vec<u32>,
    /// The new arrays' sizes: the segment's, or every segment's after a split.
    lens: Vec<usize>,
    /// Entries of the log's `touched` and `emptied` when it happened: the positions recorded
    /// before it move with it ([`SubLog::settle_emptied`], [`SubLog::touched_now`]).
    marks: (usize, usize),
}

/// Source of [`Subtable::id`]s.
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// What a batch changed in one subtable of the version it was applied to: what the replay
/// onto the other version copies. Positions are in the newest cell array (a growth during the
/// batch moves the ones recorded before it).
#[derive(Debug)]
pub(crate) struct SubLog<T> {
    /// Arena positions whose entry changed.
    touched: Vec<u32>,
    /// Positions whose entry became empty, with a rule that was there (its value finds the
    /// stage-index counts): their cells are buried once no version uses them.
    emptied: Vec<(u32, Arc<Rule<T>>)>,
    /// Each growth of the batch, in order.
    moves: Vec<Move>,
    /// The priority of each rule the batch added (`true`) or removed, in order: the replay
    /// counts them as the batch did instead of copying the counts (a map to allocate).
    prios: Vec<(u32, bool)>,
}

/// Lists of replayed logs a version keeps for its next batch's logs
/// ([`Subtable::recycle_log`]).
#[derive(Debug, Default)]
pub(crate) struct LogBufs {
    touched: Vec<Vec<u32>>,
    prios: Vec<Vec<(u32, bool)>>,
}

/// The most lists of each kind a [`LogBufs`] keeps.
const LOG_BUFS: usize = 4;

impl<T> Default for SubLog<T> {
    fn default() -> Self {
        SubLog {
            touched: Vec::new(),
            emptied: Vec::new(),
            moves: Vec::new(),
            prios: Vec::new(),
        }
    }
}

/// Moves the positions of `list`, recorded in order, with the growths of `moves` after each
/// (`mark`: the list's length at a growth; `by_seg`: each segment's growths, in order).
fn settle_list<'a>(
    list: impl Iterator<Item = &'a mut u32>,
    moves: &[Move],
    by_seg: &[Vec<usize>],
    mark: impl Fn(&Move) -> usize,
) {
    // The first growth after the position (marks rise with the list).
    let mut from = 0;
    for (i, at) in list.enumerate() {
        while from < moves.len() && mark(&moves[from]) <= i {
            from += 1;
        }
        if from == moves.len() {
            // Recorded after every growth, as all the rest are.
            return;
        }
        let mut next = from;
        loop {
            let (s, l) = unpack(*at);
            let segs = &by_seg[s];
            let Some(&j) = segs.get(segs.partition_point(|j| *j < next)) else {
                break;
            };
            *at = moves[j].to[l];
            next = j + 1;
        }
    }
}

impl<T> SubLog<T> {
    /// The moves of each segment, in order (a split and the growths before it are
    /// segment 0's).
    fn moves_by_seg(&self) -> Vec<Vec<usize>> {
        let mut by_seg: Vec<Vec<usize>> = vec![Vec::new(); SEGS];
        for (j, mv) in self.moves.iter().enumerate() {
            by_seg[mv.seg].push(j);
        }
        by_seg
    }

    /// Moves each emptied position with the growths after it, in order: once, when the batch
    /// ends (a large batch grows its segments hundreds of times, and a pass over the whole list
    /// at each growth cost a load from empty a third of its speed).
    fn settle_emptied(&mut self) {
        if self.moves.is_empty() || self.emptied.is_empty() {
            return;
        }
        let by_seg = self.moves_by_seg();
        settle_list(
            self.emptied.iter_mut().map(|(at, _)| at),
            &self.moves,
            &by_seg,
            |mv| mv.marks.1,
        );
    }

    /// The changed positions as they are after the batch's growths. Computed when the replay
    /// needs them, not when the batch ends: a subtable the batch made is copied whole instead,
    /// and a load from empty grows one hundreds of times.
    fn touched_now(&self) -> std::borrow::Cow<'_, [u32]> {
        if self.moves.is_empty() {
            return std::borrow::Cow::Borrowed(&self.touched);
        }
        let mut touched = self.touched.clone();
        settle_list(
            touched.iter_mut(),
            &self.moves,
            &self.moves_by_seg(),
            |mv| mv.marks.0,
        );
        std::borrow::Cow::Owned(touched)
    }

    /// True if the batch emptied entries, whose cells the replay may bury.
    pub(crate) fn buries(&self) -> bool {
        !self.emptied.is_empty()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.touched.is_empty() && self.emptied.is_empty() && self.moves.is_empty()
    }
}

/// Every rule with one mask, in one version.
#[derive(Debug)]
pub(crate) struct Subtable<T> {
    pub(crate) mask: Arc<Mask>,
    /// The table of an unsplit subtable (empty once split).
    one: Seg<T>,
    /// The segments of a split one (empty until split; see [`SEG_BITS`]).
    segs: Vec<Seg<T>>,
    /// Partial-hash counts for each touched stage but the last (the first
    /// `mask.stage_ends.len() - 1`; in place, so that a probe reaches each in one pointer).
    index: [IxSegs; N_INDEX],
    /// The same in both versions' subtables for one mask, different for any other subtable
    /// (one made again for the same mask included).
    id: u64,
    ws: WriterState,
    /// Cells in all segments.
    n_cells: usize,
    /// What the current batch changed here (the spare's only).
    log: SubLog<T>,
    /// Rules per priority, to know the highest.
    priorities: BTreeMap<u32, u32>,
    /// The lowest and highest key of `priorities` (0 and 0 when empty), kept for readers
    /// ([`Subtable::priority_range`]).
    prio_range: (u32, u32),
    pub(crate) n_rules: usize,
}

impl<T> Subtable<T> {
    pub(crate) fn new(mask: Arc<Mask>) -> Self {
        Subtable {
            mask,
            one: Seg::default(),
            segs: Vec::new(),
            index: Default::default(),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            ws: WriterState::default(),
            n_cells: 0,
            log: SubLog::default(),
            priorities: BTreeMap::new(),
            prio_range: (0, 0),
            n_rules: 0,
        }
    }

    /// This subtable as the other version has it: the same shared arrays, a copy of the
    /// entries (for a subtable the last batch made).
    pub(crate) fn other_version(&self) -> Self {
        Subtable {
            mask: self.mask.clone(),
            one: self.one.clone(),
            segs: self.segs.clone(),
            index: self.index.clone(),
            id: self.id,
            ws: self.ws.clone(),
            n_cells: self.n_cells,
            log: SubLog::default(),
            priorities: self.priorities.clone(),
            prio_range: self.prio_range,
            n_rules: self.n_rules,
        }
    }

    /// True if `other` is this subtable in the other version (they share their arrays).
    pub(crate) fn same_as(&self, other: &Subtable<T>) -> bool {
        self.id == other.id
    }

    /// True if the current batch changed nothing here yet: the change about to be made is
    /// its first, and the log takes lists from `bufs` for it ([`Subtable::lend_log_bufs`]).
    pub(crate) fn first_change(&mut self, bufs: &mut LogBufs) -> bool {
        let first = self.log.is_empty();
        if first {
            self.lend_log_bufs(bufs);
        }
        first
    }

    /// Takes what the current batch changed here (before the version is published).
    pub(crate) fn take_log(&mut self) -> SubLog<T> {
        let mut log = std::mem::take(&mut self.log);
        log.settle_emptied();
        log
    }

    /// Brings this version up to `published` (the same subtable, see [`Subtable::same_as`]),
    /// to which the batch of `log` was applied: moves this version's entries as the batch's
    /// growths moved the cells, takes the shared arrays, the writer's state, the priorities
    /// and the entries the batch changed. The cells the batch emptied are buried after
    /// ([`Subtable::bury`]).
    pub(crate) fn replay(&mut self, published: &Subtable<T>, log: &SubLog<T>) {
        for mv in &log.moves {
            let old = std::mem::take(&mut self.seg_mut(mv.seg).arena);
            if mv.split {
                self.segs = mv.lens.iter().map(|len| Seg::with_arena(*len)).collect();
            } else {
                self.seg_mut(mv.seg).arena = nones(mv.lens[0]);
            }
            // Moved out by value: no `None` written back, and no pass to drop the old array.
            for (from, e) in old.into_iter().enumerate() {
                if let Some(e) = e {
                    // A cell a growth dropped was a tombstone: no version had an entry there.
                    debug_assert!(mv.to[from] != u32::MAX, "an entry at a dropped cell");
                    *self.slot_mut(mv.to[from] as usize) = Some(e);
                }
            }
        }
        // Only a growth makes new cell arrays.
        if !log.moves.is_empty() {
            for (mine, theirs) in std::iter::once(&mut self.one)
                .chain(&mut self.segs)
                .zip(published.tables())
            {
                if !mine.cells.same(&theirs.cells) {
                    mine.cells = theirs.cells.clone();
                }
            }
            self.n_cells = published.n_cells;
        }
        debug_assert!(
            self.segs.len() == published.segs.len()
                && self
                    .tables()
                    .zip(published.tables())
                    .all(|(a, b)| a.cells.same(&b.cells) && a.arena.len() == b.arena.len()),
            "a growth not replayed"
        );
        for (mine, theirs) in self.index.iter_mut().zip(published.index.iter()) {
            // Equal unless the batch grew the index.
            if !mine.same(theirs) {
                *mine = theirs.clone();
            }
        }
        for &(priority, add) in &log.prios {
            count_priority(&mut self.priorities, priority, add);
        }
        self.prio_range = priority_range(&self.priorities);
        debug_assert!(
            self.priorities == published.priorities,
            "priorities replayed wrong"
        );
        self.n_rules = published.n_rules;
        self.ws.replay_from(&published.ws);
        debug_assert!(
            self.ws.counts == published.ws.counts && self.ws.ix == published.ws.ix,
            "the writer's counts replayed wrong"
        );
        // A group at a time: first the prefetches of each position's two slots and the loads
        // of the rules whose counts the copies raise (three cache misses a position after a
        // large batch, none waiting on another position's), then the copies.
        for group in log.touched_now().chunks(REPLAY_GROUP) {
            if group.len() > 1 {
                let x = group.iter().fold(0, |x, &at| {
                    if let Some(slot) = self.slot(at as usize) {
                        prefetch(slot);
                    }
                    let theirs = published
                        .entry(at as usize)
                        .map_or(0, |e| Arc::strong_count(&e.head) as u64);
                    x ^ theirs
                });
                std::hint::black_box(x);
            }
            for &at in group {
                let at = at as usize;
                *self.slot_mut(at) = published.entry(at).cloned();
            }
        }
    }

    /// Keeps the position and priority lists of `log` (replayed), if small, in `bufs`, for
    /// the next subtable of this version that a batch changes ([`Subtable::lend_log_bufs`]).
    pub(crate) fn recycle_log(log: SubLog<T>, bufs: &mut LogBufs) {
        let (mut touched, mut prios) = (log.touched, log.prios);
        if bufs.touched.len() < LOG_BUFS && touched.capacity() <= RECYCLE_MAX {
            touched.clear();
            bufs.touched.push(touched);
        }
        if bufs.prios.len() < LOG_BUFS && prios.capacity() <= RECYCLE_MAX {
            prios.clear();
            bufs.prios.push(prios);
        }
    }

    /// Takes lists for this subtable's log from `bufs` where it has none (its first change
    /// in a batch): the single commits of a rule set of several subtables change one each, a
    /// different one than the last mostly, so lists kept by the subtable replayed were
    /// mostly dropped and this one's allocated (about once a commit).
    fn lend_log_bufs(&mut self, bufs: &mut LogBufs) {
        if self.log.touched.capacity() == 0 {
            if let Some(v) = bufs.touched.pop() {
                self.log.touched = v;
            }
        }
        if self.log.prios.capacity() == 0 {
            if let Some(v) = bufs.prios.pop() {
                self.log.prios = v;
            }
        }
    }

    /// Prefetches the arena slots a replay of `log` will write first ([`Subtable::replay`]),
    /// at most `n` of them; returns how many it prefetched.
    pub(crate) fn touch_replay(&self, log: &SubLog<T>, n: usize) -> usize {
        if !log.moves.is_empty() {
            return 0;
        }
        let mut done = 0;
        for &at in log.touched.iter().take(n) {
            if let Some(slot) = self.slot(at as usize) {
                prefetch(slot);
                done += 1;
            }
        }
        done
    }

    /// Buries the cells of the positions `log`'s batch emptied that this version does not use
    /// (after a replay or a roll-back, this version holds what the published one holds): each
    /// becomes a tombstone and its stage-index counts fall.
    pub(crate) fn bury(&mut self, log: &SubLog<T>, seed: u64) {
        if log.emptied.is_empty() {
            return;
        }
        for (at, rule) in &log.emptied {
            let (k, l) = unpack(*at);
            let Some(seg) = self.seg(k) else {
                debug_assert!(false, "a position outside the segments");
                continue;
            };
            if seg.arena.get(l).is_some_and(Option::is_some) || !seg.cells.is_live(l) {
                // Used again (the value came back), or buried already (emptied twice).
                continue;
            }
            let mut partial = Partial::default();
            self.hashes(rule.values.as_slice(), seed, &mut partial);
            seg.cells.bury(l);
            let c = self.ws.counts_mut(k);
            debug_assert!(c.live > 0, "live cells miscounted");
            c.live = c.live.saturating_sub(1);
            c.tombs += 1;
            for (j, ph) in partial.0[..partial.1].iter().enumerate() {
                let counted = self.index[j].of(*ph).1.dec(*ph);
                debug_assert!(counted, "a buried value was not counted");
            }
        }
    }

    /// Checks (tests and fuzzing) that every live cell has an entry in this version and that
    /// the writer counts them right: true after a replay and its burials, when this version
    /// holds what the published one holds and every cell a batch emptied is buried.
    #[cfg(any(test, fuzzing))]
    pub(crate) fn assert_cells_used(&self) {
        let segs: Vec<(usize, &Seg<T>)> = if self.segs.is_empty() {
            vec![(0, &self.one)]
        } else {
            assert_eq!(self.one.cells.n_cells(), 0, "cells left unsplit");
            self.segs.iter().enumerate().collect()
        };
        assert_eq!(self.ws.counts.len(), segs.len(), "segments miscounted");
        for (k, seg) in segs {
            let mut live = 0;
            for at in seg.cells.live() {
                assert!(
                    seg.arena.get(at).is_some_and(Option::is_some),
                    "a live cell without an entry (segment {k}, cell {at})"
                );
                live += 1;
            }
            assert_eq!(self.ws.counts[k].live, live, "live cells miscounted");
        }
    }

    /// After a failed batch was undone (this version holds what the published one holds
    /// again): forgets its changes and buries the cells it made.
    pub(crate) fn bury_rolled_back(&mut self, seed: u64) {
        let mut log = self.take_log();
        self.bury(&log, seed);
        // A growth during the failed batch stays: the published version takes the new array
        // at the next replay, which must then move its entries too (and the next batch's
        // positions are all recorded after it).
        self.log.moves = std::mem::take(&mut log.moves);
        for mv in &mut self.log.moves {
            mv.marks = (0, 0);
        }
    }

    /// Highest priority of a rule here (0 when empty).
    pub(crate) fn max_priority(&self) -> u32 {
        self.prio_range.1
    }

    /// Counts one rule of priority `priority` more (`add`) or less, and keeps the range.
    fn count(&mut self, priority: u32, add: bool) {
        let was_empty = self.priorities.is_empty();
        count_priority(&mut self.priorities, priority, add);
        let (lo, hi) = self.prio_range;
        self.prio_range = if add && was_empty {
            (priority, priority)
        } else if add {
            (lo.min(priority), hi.max(priority))
        } else if priority == lo || priority == hi {
            priority_range(&self.priorities)
        } else {
            (lo, hi)
        };
        debug_assert_eq!(
            self.prio_range,
            priority_range(&self.priorities),
            "priority range kept wrong"
        );
    }

    /// Lowest and highest priority of a rule here (0 and 0 when empty).
    #[inline]
    pub(crate) fn priority_range(&self) -> (u32, u32) {
        self.prio_range
    }

    /// The partial hashes of `values` (one per touched stage but the last) and the full one.
    fn hashes(&self, values: &[u64], seed: u64, partial: &mut Partial) -> u64 {
        hashes_in(&self.mask, values, seed, partial)
    }

    /// The full hash of `values`: `known`, if the caller made it ([`WriteHashes::of`]).
    #[inline]
    fn full_hash(&self, values: &[u64], seed: u64, known: Option<u64>) -> u64 {
        known.unwrap_or_else(|| self.hashes(values, seed, &mut Partial::default()))
    }

    /// Every table here: the unsplit one (empty once split), then the segments.
    fn tables(&self) -> impl Iterator<Item = &Seg<T>> {
        std::iter::once(&self.one).chain(&self.segs)
    }

    /// Segment `k` (the one table of an unsplit subtable, `k` 0).
    #[inline]
    fn seg(&self, k: usize) -> Option<&Seg<T>> {
        if self.segs.is_empty() {
            (k == 0).then_some(&self.one)
        } else {
            self.segs.get(k)
        }
    }

    /// Segment `k`, to change (positions come from this subtable's own cells).
    fn seg_mut(&mut self, k: usize) -> &mut Seg<T> {
        if self.segs.is_empty() {
            debug_assert_eq!(k, 0, "a segment of an unsplit subtable");
            &mut self.one
        } else {
            &mut self.segs[k]
        }
    }

    /// The segment of `hash`, and its number.
    #[inline(always)]
    fn seg_of(&self, hash: u64) -> (usize, &Seg<T>) {
        pick(&self.one, &self.segs, hash)
    }

    /// This version's arena slot at position `at`.
    #[inline]
    fn slot(&self, at: usize) -> Option<&Option<Entry<T>>> {
        #[allow(clippy::cast_possible_truncation)] // Positions are `u32`s.
        let (k, l) = unpack(at as u32);
        self.seg(k)?.arena.get(l)
    }

    /// This version's arena slot at position `at`, to change (a position of its cells).
    fn slot_mut(&mut self, at: usize) -> &mut Option<Entry<T>> {
        #[allow(clippy::cast_possible_truncation)] // Positions are `u32`s.
        let (k, l) = unpack(at as u32);
        &mut self.seg_mut(k).arena[l]
    }

    /// This version's entry at position `at`.
    #[inline]
    fn entry(&self, at: usize) -> Option<&Entry<T>> {
        self.slot(at)?.as_ref()
    }

    /// The live cell holding `values` (hash `hash`), whether or not this version uses it (a
    /// value has at most one live cell).
    fn cell_of(&self, values: &[u64], hash: u64) -> Option<usize> {
        let (k, seg) = self.seg_of(hash);
        let l = seg
            .cells
            .find(hash, false, |at, _| seg.cells.holds_at(at, values))?;
        Some(pack(k, l) as usize)
    }

    /// The position of the entry this version has for `values`, if any.
    fn position(&self, values: &[u64], hash: u64) -> Option<usize> {
        let at = self.cell_of(values, hash)?;
        self.entry(at).map(|_| at)
    }

    /// Records that the entry at `at` changed (or emptied, with `rule` a rule that was there).
    fn note(&mut self, at: usize, emptied: Option<&Arc<Rule<T>>>) {
        let at = u32::try_from(at).expect("fewer than 4G cells");
        self.log.touched.push(at);
        if let Some(r) = emptied {
            self.log.emptied.push((at, r.clone()));
        }
    }

    /// Adds `rule` (no rule with its match and rank is here). Found, the rule joins its
    /// value's entry (or brings back the cell in this version); not found, a new cell is
    /// made, for both versions, and counted in the stage indices.
    pub(crate) fn insert(&mut self, rule: Arc<Rule<T>>, seed: u64) {
        let h = WriteHashes::of(&self.mask, rule.values.as_slice(), seed);
        self.insert_hashed(rule, seed, &h);
    }

    /// [`Subtable::insert`] of a rule whose hashes the caller made
    /// ([`WriteHashes::of`]).
    pub(crate) fn insert_hashed(&mut self, rule: Arc<Rule<T>>, seed: u64, h: &WriteHashes) {
        debug_assert_eq!(
            h.hash,
            WriteHashes::of(&self.mask, rule.values.as_slice(), seed).hash,
            "hashes of another rule"
        );
        let (partial, hash) = (h.partial, h.hash);
        self.count(rule.priority, true);
        self.log.prios.push((rule.priority, true));
        self.n_rules += 1;
        let at = match self.cell_of(rule.values.as_slice(), hash) {
            Some(at) => at,
            None => self.new_cell(rule.values.as_slice(), hash, &partial, seed),
        };
        let slot = self.slot_mut(at);
        match slot.as_mut() {
            Some(e) => e.add(rule),
            None => *slot = Some(Entry::new(rule)),
        }
        self.note(at, None);
    }

    /// Makes a cell for `values` (hash `hash`, partial hashes `partial`), growing the arrays
    /// as needed; returns its position.
    fn new_cell(&mut self, values: &[u64], hash: u64, partial: &Partial, seed: u64) -> usize {
        let (k, _) = self.seg_of(hash);
        let c = self.ws.counts[k];
        if c.live + c.tombs + 1 > c.limit {
            self.regrow(k, seed);
        }
        // Again: a split moves the value to a segment of its own.
        let (k, seg) = self.seg_of(hash);
        let (l, tomb) = seg.cells.free_cell(hash);
        seg.cells.put(l, hash, values);
        let c = self.ws.counts_mut(k);
        c.live += 1;
        debug_assert!(c.tombs >= u32::from(tomb), "tombstones miscounted");
        c.tombs = c.tombs.saturating_sub(u32::from(tomb));
        for (j, ph) in partial.0[..partial.1].iter().enumerate() {
            let (k, ix) = self.index[j].of(*ph);
            let keys = self.ws.ix[j][k].live as usize;
            let full = if self.index[j].segs.is_empty() {
                (keys + 1) * ix_spread(keys) > ix.n_slots()
            } else {
                keys + 1 > self.ws.ix[j][k].limit as usize
            };
            if full {
                self.regrow_index(j, k);
            }
            let (k, ix) = self.index[j].of(*ph);
            if ix.inc(*ph) {
                self.ws.ix_mut(j, k).live += 1;
            }
        }
        pack(k, l) as usize
    }

    /// Copies the keys of segment `k` of stage index `j` (the whole index while unsplit) into
    /// a new array with room for twice as many (keys counted down to zero dropped), or, where
    /// an unsplit index would outgrow [`SPLIT_CELLS`], into `SEGS` segments. The other version
    /// takes the new arrays at its next replay.
    fn regrow_index(&mut self, j: usize, k: usize) {
        let ix = &self.index[j];
        let keys = self.ws.ix[j][k].live as usize;
        if ix.segs.is_empty() {
            let len = ((keys + 1) * ix_spread(keys) + 1)
                .next_power_of_two()
                .max(MIN_CELLS);
            if len <= SPLIT_CELLS {
                let (new, n) = ix.one.regrown(len);
                self.index[j].one = new;
                self.ws.ix_mut(j, 0).live = u32::try_from(n).expect("fewer than 4G keys");
                return;
            }
            let per = ix.one.keys_per(SEGS, ix_seg_of_key);
            let lens: Vec<usize> = per
                .iter()
                .enumerate()
                .map(|(s, n)| len_for(*n, ix_limit(s)))
                .collect();
            let segs: Vec<SharedIndex> = lens.iter().map(|l| SharedIndex::with_slots(*l)).collect();
            let placed = ix.one.copy_into(&segs, ix_seg_of_key);
            *self.ws.all_ix_mut(j) = placed
                .iter()
                .zip(&lens)
                .enumerate()
                .map(|(s, (p, len))| seg_count(*p, *len, ix_limit(s)))
                .collect();
            self.index[j] = IxSegs {
                one: SharedIndex::default(),
                segs: segs.into(),
            };
        } else {
            // A power of two, at least `MIN_CELLS`: `regrown` keeps it.
            let len = len_for(keys, ix_limit(k));
            let (new, placed) = ix.segs[k].regrown(len);
            *self.ws.ix_mut(j, k) = seg_count(placed, len, ix_limit(k));
            let mut segs = ix.segs.to_vec();
            segs[k] = new;
            self.index[j].segs = segs.into();
        }
    }

    /// Copies the live cells of segment `k` (the one table of an unsplit subtable) into a new
    /// array with room for twice as many (tombstones dropped), or, where an unsplit table would
    /// outgrow [`SPLIT_CELLS`], into `SEGS` segments; moves this version's entries along. The
    /// other version takes the arrays and moves its entries the same way at its next replay
    /// (from the log).
    fn regrow(&mut self, k: usize, seed: u64) {
        #[cfg(test)]
        GROWTHS.with(|g| g.borrow_mut().push(self.ws.counts[k].live as usize));
        let live = self.ws.counts[k].live as usize;
        let unsplit = self.segs.is_empty();
        // At most half full after the next insert (as a doubling leaves it), tombstones gone.
        let len_one = ((live + 1) * 2 + 1).next_power_of_two().max(MIN_CELLS);
        let split = unsplit && len_one > SPLIT_CELLS;
        let old = std::mem::take(self.seg_mut(k));
        let n = self.mask.idx.len();
        let mut buf = [0u64; KEY_WORDS];
        let values = &mut buf[..n];
        let seg_of = |hash: u64| if split { seg_no(hash) } else { 0 };
        let lens: Vec<usize> = if split {
            let mut per = [0usize; SEGS];
            for from in old.cells.live() {
                old.cells.values(from, values);
                per[seg_of(rehash(&self.mask.idx, values, seed))] += 1;
            }
            per.iter()
                .enumerate()
                .map(|(s, l)| len_for(*l, seg_limit(s)))
                .collect()
        } else if unsplit {
            vec![len_one]
        } else {
            vec![len_for(live, seg_limit(k))]
        };
        let mut new: Vec<Seg<T>> = lens
            .iter()
            .map(|len| Seg {
                cells: SharedCells::with_cells(*len, n),
                arena: nones(*len),
            })
            .collect();
        let mut placed = vec![0u32; new.len()];
        let mut to = vec![u32::MAX; old.cells.n_cells()];
        // The old entries moved out by value, as the live cells are met (every entry's cell is
        // live): no `None` written back, and no pass to drop the old array.
        let mut entries = old.arena.into_iter().enumerate();
        for from in old.cells.live() {
            old.cells.values(from, values);
            let hash = rehash(&self.mask.idx, values, seed);
            let t = seg_of(hash);
            let dst = &mut new[t];
            let (at, _) = dst.cells.free_cell(hash);
            dst.cells.put(at, hash, values);
            to[from] = pack(if split { t } else { k }, at);
            for (i, e) in entries.by_ref() {
                if i == from {
                    dst.arena[at] = e;
                    break;
                }
                debug_assert!(e.is_none(), "an entry at a dead cell");
            }
            placed[t] += 1;
        }
        debug_assert_eq!(
            placed.iter().map(|p| *p as usize).sum::<usize>(),
            live,
            "live cells miscounted"
        );
        // An unsplit table grows at half full.
        let count = |s: usize, live: u32, len: usize| {
            seg_count(
                live as usize,
                len,
                if split || !unsplit {
                    seg_limit(s)
                } else {
                    32768
                },
            )
        };
        self.n_cells = self.n_cells - old.cells.n_cells() + lens.iter().sum::<usize>();
        if split {
            *self.ws.all_counts_mut() = placed
                .iter()
                .zip(&lens)
                .enumerate()
                .map(|(s, (p, len))| count(s, *p, *len))
                .collect();
            self.segs = new;
        } else {
            *self.ws.counts_mut(k) = count(k, placed[0], lens[0]);
            *self.seg_mut(k) = new.pop().expect("one segment");
        }
        // What the batch recorded so far moves with it later ([`SubLog::touched_now`],
        // [`SubLog::settle_emptied`]).
        self.log.moves.push(Move {
            seg: k,
            split,
            to,
            lens,
            marks: (self.log.touched.len(), self.log.emptied.len()),
        });
    }

    /// Prefetches what the probes of `h` ([`WriteHashes::of`]) read first: the home
    /// cell and its tag, the arena slot beside it and each stage index's home slot and count.
    #[inline]
    pub(crate) fn touch_write(&self, h: &WriteHashes) {
        for (ix, ph) in self.index.iter().zip(&h.partial.0[..h.partial.1]) {
            ix.of(*ph).1.touch(*ph);
        }
        let (_, seg) = self.seg_of(h.hash);
        if let Some(at) = seg.cells.touch_home(h.hash) {
            if let Some(slot) = seg.arena.get(at) {
                prefetch(slot);
            }
        }
    }

    /// Finds the rule with masked value words `values` and priority `priority`.
    /// `hash`: the values' hash, if the caller made it ([`WriteHashes::of`]).
    pub(crate) fn find_exact(
        &self,
        values: &[u64],
        priority: u32,
        seed: u64,
        hash: Option<u64>,
    ) -> Option<&Arc<Rule<T>>> {
        let hash = self.full_hash(values, seed, hash);
        let e = self.entry(self.position(values, hash)?)?;
        std::iter::once(&e.head)
            .chain(e.rest().iter())
            .find(|r| r.priority == priority)
    }

    /// Removes the rule with `rule`'s match and rank; returns it, or `None` if absent.
    /// `hash`: the values' hash, if the caller made it ([`WriteHashes::of`]).
    pub(crate) fn remove(
        &mut self,
        rule: &Rule<T>,
        seed: u64,
        hash: Option<u64>,
    ) -> Option<Arc<Rule<T>>> {
        let hash = self.full_hash(rule.values.as_slice(), seed, hash);
        let at = self.position(rule.values.as_slice(), hash)?;
        let slot = self.slot_mut(at);
        let e = slot.as_mut()?;
        let (removed, emptied) = if e.head.rank == rule.rank {
            if e.rest().is_empty() {
                let e = slot.take()?;
                (e.head, true)
            } else {
                let next = e.rest_mut().remove(0);
                if e.rest().is_empty() {
                    e.rest = None;
                }
                (std::mem::replace(&mut e.head, next), false)
            }
        } else {
            let i = e.rest().iter().position(|r| r.rank == rule.rank)?;
            let r = e.rest_mut().remove(i);
            if e.rest().is_empty() {
                e.rest = None;
            }
            (r, false)
        };
        self.note(at, emptied.then_some(&removed));
        self.n_rules -= 1;
        self.count(removed.priority, false);
        self.log.prios.push((removed.priority, false));
        Some(removed)
    }

    /// Replaces the rule with `new`'s match and rank by `new`; returns the old one.
    /// `hash`: the values' hash, if the caller made it ([`WriteHashes::of`]).
    pub(crate) fn replace(
        &mut self,
        new: Arc<Rule<T>>,
        seed: u64,
        hash: Option<u64>,
    ) -> Option<Arc<Rule<T>>> {
        let hash = self.full_hash(new.values.as_slice(), seed, hash);
        let at = self.position(new.values.as_slice(), hash)?;
        let e = self.slot_mut(at).as_mut()?;
        let slot = std::iter::once(&mut e.head)
            .chain(e.rest.iter_mut().flat_map(|v| v.iter_mut()))
            .find(|r| r.rank == new.rank)?;
        let old = std::mem::replace(slot, new);
        self.note(at, None);
        Some(old)
    }

    /// The best rule here that `key` matches, without wildcard tracking.
    #[inline]
    pub(crate) fn find(&self, key: &FlowKey, seed: u64) -> Option<&Arc<Rule<T>>> {
        self.find_hashed(key, self.hash_key(key, seed))
    }

    /// The hash of `key`'s words under this subtable's mask.
    #[inline]
    pub(crate) fn hash_key(&self, key: &FlowKey, seed: u64) -> u64 {
        let m = &*self.mask;
        let mut h = seed;
        for ((i, b), k) in m.idx.iter().zip(m.bits.iter()).zip(m.mults.iter()) {
            h = mix_with(h, *k, key.words[usize::from(*i)] & b);
        }
        finish(h)
    }

    /// [`Subtable::find`] with the key's hash already computed. Cells this version does
    /// not use are passed over (see [`crate::shared`]).
    // Always inlined: the lookup loops call it once per subtable, and as a call it costs
    // about a tenth of a small table's lookups (measured on OVS's benchmark set).
    #[inline(always)]
    pub(crate) fn find_hashed(&self, key: &FlowKey, hash: u64) -> Option<&Arc<Rule<T>>> {
        let m = &*self.mask;
        let n = m.idx.len();
        if n > N_INLINE {
            return self.find_wide(key, hash);
        }
        let mut want = [0u64; N_INLINE];
        for (w, (i, b)) in want.iter_mut().zip(m.idx.iter().zip(m.bits.iter())) {
            *w = key.words[usize::from(*i)] & b;
        }
        // The arena slot's address does not wait on the cell: both come from `at`.
        let (_, seg) = self.seg_of(hash);
        let mut hit = None;
        seg.cells.find(hash, self.home_first(), |at, c| {
            c.holds(&want[..n]) && {
                hit = seg.entry(at);
                hit.is_some()
            }
        })?;
        hit.map(|e| &e.head)
    }

    /// [`Subtable::find_hashed`] for masks of more than `N_INLINE` words.
    #[inline(always)]
    fn find_wide(&self, key: &FlowKey, hash: u64) -> Option<&Arc<Rule<T>>> {
        let m = &*self.mask;
        let n = m.idx.len();
        let masked = |(i, b): (&u8, &u64)| key.words[usize::from(*i)] & b;
        // The cell, its row and the arena slot all at `at`: their loads go out together.
        let (_, seg) = self.seg_of(hash);
        let mut hit = None;
        seg.cells.find(hash, self.home_first(), |at, c| {
            let first = m.idx[..N_INLINE]
                .iter()
                .zip(&m.bits[..N_INLINE])
                .map(masked);
            let rest = m.idx[N_INLINE..n]
                .iter()
                .zip(&m.bits[N_INLINE..n])
                .map(masked);
            c.holds_first(first) && seg.cells.row_holds(at, rest) && {
                hit = seg.entry(at);
                hit.is_some()
            }
        })?;
        hit.map(|e| &e.head)
    }

    /// Brings in what a hit on `hash` reads first, if its home cell's tag matches: the home
    /// cell, its row (wide masks) and the arena slot beside it, prefetched. They depend on no
    /// other key's, so a batch asks for all of them before any comparison waits. Prefetches
    /// rather than loads: 4 to 7% more batch hits a second at 16K and 256K rules (a runtime
    /// switch in one binary, run 18); a load holds up retirement, and 32 keys' worth of
    /// hashing and loads do not all fit in the reorder window.
    #[inline]
    pub(crate) fn touch(&self, hash: u64) {
        let (_, seg) = self.seg_of(hash);
        let Some((at, c)) = seg.cells.home_cell(hash) else {
            return;
        };
        prefetch(c);
        self.touch_beside(seg, at);
    }

    /// Prefetches what a hit at cell `at` of `seg` reads beside the cell: its row (wide
    /// masks) and its arena slot.
    #[inline]
    fn touch_beside(&self, seg: &Seg<T>, at: usize) {
        if let Some(r) = seg.cells.row_line(at, self.mask.idx.len()) {
            prefetch(r);
        }
        if let Some(slot) = seg.arena.get(at) {
            prefetch(slot);
        }
    }

    /// For a batch in a rule set of this one subtable, too large for the caches
    /// ([`Subtable::worth_touching`]; the caller's own loop is faster otherwise): calls
    /// `each(i)` for each of `hashes` in turn (the key's find), and prefetches, `TOUCH_AHEAD`
    /// keys before its find, each key's home tags, cell, row and arena slot, whatever the tag
    /// holds, so that the finds' work overlaps the later keys' loads.
    ///
    /// Unlike [`Subtable::touch`], no prefetch waits on a tag's load, and a key whose tag does
    /// not match costs two lines more. Measured with a runtime switch in one process against
    /// `touch` at 262,144 exact rules, all prefetches before the first find: batched hits 1.11x
    /// with tracking and 1.12x without, misses 0.91x; OVS's 16,384-rule set (86% hits) 1.10x.
    /// Four keys ahead instead of all first (run 31): hits with tracking 1.06x more (eight
    /// ahead 1.05x, twelve 1.03x, sixteen 1.03x), misses 0.95x. Rule sets of several
    /// subtables keep `touch`: there most probes of a subtable miss.
    #[inline]
    pub(crate) fn touch_ahead(&self, hashes: &[u64], mut each: impl FnMut(usize)) {
        let touch = |h: u64| {
            let (_, seg) = self.seg_of(h);
            if let Some(at) = seg.cells.touch_home(h) {
                self.touch_beside(seg, at);
            }
        };
        for h in hashes.iter().take(TOUCH_AHEAD) {
            touch(*h);
        }
        for i in 0..hashes.len() {
            if let Some(h) = hashes.get(i + TOUCH_AHEAD) {
                touch(*h);
            }
            each(i);
        }
    }

    /// The hash of `key`'s words under this subtable's mask, as [`Subtable::hash_key`], with
    /// the hash chain's state at the end of each stage but the last left in `raw`: what a
    /// miss's explanation finishes into the stage indices' hashes instead of hashing the words
    /// again ([`Subtable::explain_miss`]).
    #[inline]
    pub(crate) fn hash_key_staged(&self, key: &FlowKey, seed: u64, raw: &mut Raw) -> u64 {
        let m = &*self.mask;
        let mut h = seed;
        // One loop over the words, as `hash_key`'s, noting the chain where a stage ends.
        let mut s = 0;
        let mut next = m.stage_ends.first().map_or(usize::MAX, |e| usize::from(*e));
        for (k, ((i, b), mult)) in m
            .idx
            .iter()
            .zip(m.bits.iter())
            .zip(m.mults.iter())
            .enumerate()
        {
            h = mix_with(h, *mult, key.words[usize::from(*i)] & b);
            if k + 1 == next {
                if let Some(r) = raw.get_mut(s) {
                    *r = h;
                }
                s += 1;
                next = m.stage_ends.get(s).map_or(usize::MAX, |e| usize::from(*e));
            }
        }
        finish(h)
    }

    /// After [`Subtable::find`] missed in a rule set of this one subtable: ORs into `wc` the
    /// bits that prove the miss for every packet agreeing with `key` on them, stage by stage
    /// (at each, its tries first, then its stage index; the same bits, but for an index's hash
    /// collision, where a small stage asks its index first). `raw`: the hash chain at the stage
    /// ends as [`Subtable::hash_key_staged`] left it for the probe that missed, from which the
    /// stage indices' hashes are finished.
    #[allow(clippy::needless_range_loop)] // `j` indexes the stages, their indices and `raw`.
    pub(crate) fn explain_miss(
        &self,
        key: &FlowKey,
        raw: &Raw,
        tries: &mut TrieCtx<'_>,
        wc: &mut FlowKey,
    ) {
        let m = &*self.mask;
        let mut pos = 0;
        let n = m.stage_ends.len();
        for j in 0..n {
            let end = usize::from(m.stage_ends[j]);
            let set = m.stage_tries[usize::from(m.stage_ids[j])];
            if set != 0 {
                // A stage whose tries are all small, and whose index is too, asks the index
                // first: if the index has the key's stage, no trie of the stage can rule the
                // subtable out (a rule there has the key's address bits), and the walks are
                // skipped; if not, the tries still get their say, so the bits are those of the
                // tries-first order (more only where two stages' hashes collide in the index,
                // which consults later stages too). OVS's 1,000-rule set passes its L3 index in
                // two misses of five, and walked both address tries for nothing there; large
                // tries (random addresses, which they rule out at once) keep the tries-first
                // order.
                if j + 1 < n && set & !tries.small == 0 && self.index[j].small() {
                    if self.index[j].contains(finish(raw[j])) {
                        pos = end;
                        continue;
                    }
                    let upto = if tries.skip_set(m, set, key, wc) {
                        pos
                    } else {
                        end
                    };
                    m.or_into(wc, upto);
                    return;
                }
                if tries.skip_set(m, set, key, wc) {
                    m.or_into(wc, pos);
                    return;
                }
            }
            if j + 1 == n {
                break;
            }
            pos = end;
            if !self.index[j].contains(finish(raw[j])) {
                m.or_into(wc, end);
                return;
            }
        }
        m.or_into(wc, m.idx.len());
    }

    /// After a probe of `key` missed in a subtable of a rule set of several: ORs into `wc` the
    /// bits that prove the miss. A trie that rules the subtable out proves it with its stage's
    /// earlier words ([`Walked::rule_out`]); otherwise the stage indices do, their hashes
    /// finished from `raw`, the probe's hash chain at the stage ends: the stages up to the
    /// first whose index lacks the key's values, or the whole mask.
    #[inline]
    pub(crate) fn explain_probed(&self, raw: &Raw, walked: &mut Walked, wc: &mut FlowKey) {
        let m = &*self.mask;
        if let Some(pos) = walked.rule_out(m) {
            m.or_into(wc, pos);
            return;
        }
        self.explain_by_index(raw, wc);
    }

    /// After a probe of `key` missed in a subtable no trie rules out: ORs into `wc` the bits
    /// the stage indices need to prove the miss ([`Subtable::explain_probed`]'s second half).
    #[inline]
    pub(crate) fn explain_by_index(&self, raw: &Raw, wc: &mut FlowKey) {
        let m = &*self.mask;
        let n = m.stage_ends.len();
        for (j, r) in raw.iter().enumerate().take(n.saturating_sub(1)) {
            if !self.index[j].contains(finish(*r)) {
                m.or_into(wc, usize::from(m.stage_ends[j]));
                return;
            }
        }
        m.or_into(wc, m.idx.len());
    }

    /// True if this subtable's table is large enough for a probe to check a match at home
    /// before it knows where the first match is ([`SharedCells::find`]).
    #[inline(always)]
    fn home_first(&self) -> bool {
        self.n_cells >= HOME_FIRST_CELLS
    }

    /// True if this subtable's table is too large to stay in cache, so that a batch gains by
    /// loading its keys' home cells ahead ([`Subtable::touch`]).
    #[inline]
    pub(crate) fn worth_touching(&self) -> bool {
        self.n_cells >= TOUCH_CELLS
    }

    /// Every rule here.
    pub(crate) fn rules(&self) -> impl Iterator<Item = &Arc<Rule<T>>> {
        self.tables()
            .flat_map(|s| s.arena.iter().flatten())
            .flat_map(|e| std::iter::once(&e.head).chain(e.rest().iter()))
    }

    /// Bytes held by this version alone (its arena and priorities, not the rules).
    pub(crate) fn own_bytes(&self) -> usize {
        self.tables()
            .map(|s| s.arena.capacity() * std::mem::size_of::<Option<Entry<T>>>())
            .sum::<usize>()
            + self.segs.capacity() * std::mem::size_of::<Seg<T>>()
            + self.ws.counts.capacity() * std::mem::size_of::<SegCount>()
            + self.priorities.len() * 32
    }

    /// Bytes of the arrays both versions share.
    pub(crate) fn shared_bytes(&self) -> usize {
        self.tables().map(|s| s.cells.heap_bytes()).sum::<usize>()
            + self.index.iter().map(|ix| ix.heap_bytes()).sum::<usize>()
    }
}
