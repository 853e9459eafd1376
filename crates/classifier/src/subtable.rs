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

use packet::key::{FlowKey, KeyField};

use crate::hint::prefetch;
use crate::rule::{finish, mix_at, Mask, Rule};
use crate::ruleset::RECYCLE_MAX;
use crate::shared::{Cell, SharedCells, SharedIndex, SharedWide, MIN_CELLS, N_INLINE};
use crate::trie::{prefix_mask, TrieMatch, Walk};
use crate::PrefixField;

/// Tables of at least this many cells (320 KB of cells) are touched ahead by batch lookups;
/// smaller ones stay in cache, and the extra pass would only cost. A rule set of several
/// subtables none of which is that large is looked up key by key (fewer cells in tests, so
/// that the proptests' small rule sets take both ways).
const TOUCH_CELLS: usize = if cfg!(test) { 16 } else { 4096 };

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
fn left_aligned(key: &FlowKey, field: KeyField) -> u128 {
    key.get(field) << (128 - u32::from(field.width))
}

/// Lazily computed trie walks for one lookup, one per prefix field.
#[derive(Debug)]
pub(crate) struct TrieCtx<'a> {
    prefixes: &'a [PrefixField],
    tries: &'a [crate::trie::TrieView],
    walks: [Walk; crate::rule::MAX_PREFIXES],
}

impl<'a> TrieCtx<'a> {
    /// The context of a lookup in tries `tries` over fields `prefixes`; no walk begun.
    #[inline]
    pub(crate) fn new(prefixes: &'a [PrefixField], tries: &'a [crate::trie::TrieView]) -> Self {
        TrieCtx {
            prefixes,
            tries,
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

    /// True if a trie walk already made for this lookup proves that no rule with mask `m`
    /// matches. Walks no further (a hit must not pay for a walk) and consults nothing by
    /// itself: the caller explains the miss with [`Subtable::explain_miss`].
    #[inline]
    pub(crate) fn rules_out(&self, m: &Mask) -> bool {
        self.walks
            .iter()
            .zip(m.trie_plens.iter())
            .any(|(w, plen)| *plen != 0 && w.knows(*plen) && !w.m().has_len(*plen))
    }

    /// If a trie on a field of stage `stage` rules the subtable with mask `m` out, ORs the
    /// address bits the decision needed into `wc` and returns `true`.
    #[inline]
    fn skip(&mut self, m: &Mask, stage: u8, key: &FlowKey, wc: &mut FlowKey) -> bool {
        match self.skip_bits(m, stage, key) {
            Some((field, add)) => {
                wc.set(field, wc.get(field) | add);
                true
            }
            None => false,
        }
    }

    /// If a trie on a field of stage `stage` rules the subtable with mask `m` out, the field
    /// and the address bits (in the field's position) the decision needed.
    #[inline]
    fn skip_bits(&mut self, m: &Mask, stage: u8, key: &FlowKey) -> Option<(KeyField, u128)> {
        match m.stage_tries[usize::from(stage)] {
            // Most stages have no trie, and cost no call.
            0 => None,
            set => self.ruling_trie(m, set, key),
        }
    }

    /// [`TrieCtx::skip_bits`] over the tries of `set` (bit `t` for trie `t`). Out of line:
    /// inlined, with the walk in it, into both of its callers, it made the explanation a quarter
    /// slower on OVS's 1,000-rule set (run 20).
    #[inline(never)]
    fn ruling_trie(&mut self, m: &Mask, mut set: u8, key: &FlowKey) -> Option<(KeyField, u128)> {
        while set != 0 {
            let t = set.trailing_zeros() as usize;
            set &= set - 1;
            let (plen, pf) = (m.trie_plens[t], &self.prefixes[t]);
            let res = self.walk(t, key, plen);
            if !res.has_len(plen) {
                let n = res.examined.min(plen);
                return Some((
                    pf.field,
                    prefix_mask(n) >> (128 - u32::from(pf.field.width)),
                ));
            }
        }
        None
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

/// What [`Subtable::write_hashes`] hashes a rule by: its match's value, or its masked value
/// words (as the subtable keeps them).
#[derive(Debug, Clone, Copy)]
pub(crate) enum WriteKey<'a> {
    Match(&'a FlowKey),
    Values(&'a [u64]),
}

/// What a write of one rule probes a subtable with ([`Subtable::write_hashes`]).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct WriteHashes {
    partial: Partial,
    hash: u64,
}

/// The hash of masked value words `values` at key words `idx` (for rehashing on growth).
fn rehash(idx: &[u8], values: &[u64], seed: u64) -> u64 {
    let mut h = seed;
    for (i, v) in idx.iter().zip(values) {
        h = mix_at(h, *i, *v);
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
/// the replay copies it from the published version (whose batch changed it last).
#[derive(Debug, Default, Clone)]
struct WriterState {
    /// Wide slots no live cell names (masks of more than `N_INLINE` words).
    free: Vec<u32>,
    /// Wide slots handed out so far.
    n_slots: u32,
    /// Live cells and tombstones in the newest cell array.
    live: usize,
    tombs: usize,
    /// Keys (counted down to zero or not) in the newest array of each stage index.
    ix_keys: [usize; N_INDEX],
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
    /// Each growth of the batch: the new position of each old position (`u32::MAX`: a
    /// tombstone, dropped), and the new array's size.
    moves: Vec<(Vec<u32>, usize)>,
    /// The priority of each rule the batch added (`true`) or removed, in order: the replay
    /// counts them as the batch did instead of copying the counts (a map to allocate).
    prios: Vec<(u32, bool)>,
}

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

impl<T> SubLog<T> {
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
    /// The cells, shared with the other version (see [`crate::shared`]).
    cells: SharedCells,
    /// For masks of more than `N_INLINE` words: the cells' value words, `mask.idx.len()` per
    /// wide slot, so that a lookup compares them in one dense array instead of in rules
    /// scattered over the heap.
    wide: SharedWide,
    /// Partial-hash counts for each touched stage but the last (the first
    /// `mask.stage_ends.len() - 1`; in place, so that a probe reaches each in one pointer).
    index: [SharedIndex; N_INDEX],
    /// The same in both versions' subtables for one mask, different for any other subtable
    /// (one made again for the same mask included).
    id: u64,
    ws: WriterState,
    /// This version's entries, by cell position (as long as `cells`).
    arena: Vec<Option<Entry<T>>>,
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
            cells: SharedCells::default(),
            wide: SharedWide::default(),
            index: Default::default(),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            ws: WriterState::default(),
            arena: Vec::new(),
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
            cells: self.cells.clone(),
            wide: self.wide.clone(),
            index: self.index.clone(),
            id: self.id,
            ws: self.ws.clone(),
            arena: self.arena.clone(),
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

    /// True if the current batch changed nothing here.
    pub(crate) fn log_is_empty(&self) -> bool {
        self.log.is_empty()
    }

    /// Takes what the current batch changed here (before the version is published).
    pub(crate) fn take_log(&mut self) -> SubLog<T> {
        std::mem::take(&mut self.log)
    }

    /// Brings this version up to `published` (the same subtable, see [`Subtable::same_as`]),
    /// to which the batch of `log` was applied: moves this version's entries as the batch's
    /// growths moved the cells, takes the shared arrays, the writer's state, the priorities
    /// and the entries the batch changed. The cells the batch emptied are buried after
    /// ([`Subtable::bury`]).
    pub(crate) fn replay(&mut self, published: &Subtable<T>, log: &SubLog<T>) {
        for (to, len) in &log.moves {
            let mut arena: Vec<Option<Entry<T>>> = Vec::new();
            arena.resize_with(*len, || None);
            // Moved out by value: no `None` written back, and no pass to drop the old array.
            for (from, e) in std::mem::take(&mut self.arena).into_iter().enumerate() {
                if let Some(e) = e {
                    // A cell a growth dropped was a tombstone: no version had an entry there.
                    debug_assert!(to[from] != u32::MAX, "an entry at a dropped cell");
                    arena[to[from] as usize] = Some(e);
                }
            }
            self.arena = arena;
        }
        if !self.cells.same(&published.cells) {
            self.cells = published.cells.clone();
        }
        if !self.wide.same(&published.wide) {
            self.wide = published.wide.clone();
        }
        for (mine, theirs) in self.index.iter_mut().zip(published.index.iter()) {
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
        self.ws.clone_from(&published.ws);
        if self.arena.len() < published.arena.len() {
            self.arena.resize_with(published.arena.len(), || None);
        }
        // A group at a time: first the prefetches of each position's two slots and the loads
        // of the rules whose counts the copies raise (three cache misses a position after a
        // large batch, none waiting on another position's), then the copies.
        for group in log.touched.chunks(REPLAY_GROUP) {
            if group.len() > 1 {
                let x = group.iter().fold(0, |x, &at| {
                    if let Some(slot) = self.arena.get(at as usize) {
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
                self.arena[at] = published.arena[at].clone();
            }
        }
    }

    /// Takes the list of positions of `log` (replayed) for its own next log, if small and if
    /// its own has no room yet.
    pub(crate) fn recycle_log(&mut self, log: SubLog<T>) {
        let (mut touched, mut prios) = (log.touched, log.prios);
        if self.log.touched.capacity() == 0 && touched.capacity() <= RECYCLE_MAX {
            touched.clear();
            self.log.touched = touched;
        }
        if self.log.prios.capacity() == 0 && prios.capacity() <= RECYCLE_MAX {
            prios.clear();
            self.log.prios = prios;
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
            if let Some(slot) = self.arena.get(at as usize) {
                prefetch(slot);
                done += 1;
            }
        }
        done
    }

    /// Buries the cells of the positions `log`'s batch emptied that this version does not use
    /// (after a replay or a roll-back, this version holds what the published one holds): each
    /// becomes a tombstone, its stage-index counts fall and its wide slot is free.
    pub(crate) fn bury(&mut self, log: &SubLog<T>, seed: u64) {
        if log.emptied.is_empty() {
            return;
        }
        let mut ws = std::mem::take(&mut self.ws);
        for (at, rule) in &log.emptied {
            let at = *at as usize;
            if self.arena.get(at).is_some_and(Option::is_some) || !self.cells.is_live(at) {
                // Used again (the value came back), or buried already (emptied twice).
                continue;
            }
            let mut partial = Partial::default();
            self.hashes(rule.values.as_slice(), seed, &mut partial);
            let slot = self.cells.cell(at).slot();
            self.cells.bury(at);
            debug_assert!(ws.live > 0, "live cells miscounted");
            ws.live = ws.live.saturating_sub(1);
            ws.tombs += 1;
            for (j, ph) in partial.0[..partial.1].iter().enumerate() {
                let counted = self.index[j].dec(*ph);
                debug_assert!(counted, "a buried value was not counted");
            }
            if self.mask.idx.len() > N_INLINE {
                ws.free.push(slot);
            }
        }
        self.ws = ws;
    }

    /// After a failed batch was undone (this version holds what the published one holds
    /// again): forgets its changes and buries the cells it made.
    pub(crate) fn bury_rolled_back(&mut self, seed: u64) {
        let mut log = self.take_log();
        self.bury(&log, seed);
        // A growth during the failed batch stays: the published version takes the new array
        // at the next replay, which must then move its entries too.
        self.log.moves = std::mem::take(&mut log.moves);
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
        let m = &*self.mask;
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

    /// This version's entry at position `at`.
    #[inline]
    fn entry(&self, at: usize) -> Option<&Entry<T>> {
        self.arena.get(at)?.as_ref()
    }

    /// True if cell `c` holds masked value words `values`.
    #[inline]
    fn cell_holds(&self, c: &Cell, values: &[u64]) -> bool {
        let n = values.len();
        if n <= N_INLINE {
            c.holds(values)
        } else {
            self.wide.holds(c.slot() as usize * n, values)
        }
    }

    /// The live cell holding `values` (hash `hash`), whether or not this version uses it (a
    /// value has at most one live cell).
    fn cell_of(&self, values: &[u64], hash: u64) -> Option<usize> {
        self.cells.find(hash, |_, c| self.cell_holds(c, values))
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
        let mut partial = Partial::default();
        let hash = self.hashes(rule.values.as_slice(), seed, &mut partial);
        self.count(rule.priority, true);
        self.log.prios.push((rule.priority, true));
        self.n_rules += 1;
        let at = match self.cell_of(rule.values.as_slice(), hash) {
            Some(at) => at,
            None => self.new_cell(rule.values.as_slice(), hash, &partial, seed),
        };
        match self.arena[at].as_mut() {
            Some(e) => e.add(rule),
            None => self.arena[at] = Some(Entry::new(rule)),
        }
        self.note(at, None);
    }

    /// Makes a cell for `values` (hash `hash`, partial hashes `partial`), growing the arrays
    /// as needed; returns its position.
    fn new_cell(&mut self, values: &[u64], hash: u64, partial: &Partial, seed: u64) -> usize {
        let n = values.len();
        let mut ws = std::mem::take(&mut self.ws);
        let slot = if n > N_INLINE {
            let s = ws.free.pop().unwrap_or_else(|| {
                ws.n_slots += 1;
                ws.n_slots - 1
            });
            let end = (s as usize + 1) * n;
            if self.wide.len() < end {
                let want = (end * 2).max(MIN_CELLS * n);
                self.wide = SharedWide::grown(&self.wide, want);
            }
            self.wide.put(s as usize * n, values);
            s
        } else {
            0
        };
        if (ws.live + ws.tombs + 1) * 2 > self.cells.n_cells() {
            self.regrow_cells(&mut ws, seed);
        }
        let (at, tomb) = self.cells.free_cell(hash);
        let slot_word = [u64::from(slot)];
        let inline: &[u64] = if n <= N_INLINE { values } else { &slot_word };
        self.cells.put(at, hash, inline);
        ws.live += 1;
        debug_assert!(ws.tombs >= usize::from(tomb), "tombstones miscounted");
        ws.tombs = ws.tombs.saturating_sub(usize::from(tomb));
        for (j, ph) in partial.0[..partial.1].iter().enumerate() {
            if (ws.ix_keys[j] + 1) * ix_spread(ws.ix_keys[j]) > self.index[j].n_slots() {
                let (new, keys) =
                    self.index[j].regrown((ws.ix_keys[j] + 1) * ix_spread(ws.ix_keys[j]) + 1);
                self.index[j] = new;
                ws.ix_keys[j] = keys;
            }
            if self.index[j].inc(*ph) {
                ws.ix_keys[j] += 1;
            }
        }
        self.ws = ws;
        at
    }

    /// Copies the live cells into a new array with room for twice as many (tombstones
    /// dropped) and moves this version's entries along; the other version takes the array
    /// and moves its entries the same way at its next replay (from the log).
    fn regrow_cells(&mut self, ws: &mut WriterState, seed: u64) {
        // At most half full after the next insert (as a doubling leaves it), tombstones gone.
        let len = ((ws.live + 1) * 2 + 1).next_power_of_two().max(MIN_CELLS);
        let new = SharedCells::with_cells(len);
        let n = self.mask.idx.len();
        let mut to = vec![u32::MAX; self.cells.n_cells()];
        let mut arena: Vec<Option<Entry<T>>> = Vec::new();
        arena.resize_with(len, || None);
        let mut buf = [0u64; N_INLINE];
        let mut wide_buf = Vec::new();
        let mut live = 0;
        // The old entries moved out by value, as the live cells are met (every entry's cell is
        // live): no `None` written back, and no pass to drop the old array.
        let mut old = std::mem::take(&mut self.arena).into_iter().enumerate();
        for from in self.cells.live() {
            let c = self.cells.cell(from);
            let s = c.slot();
            let values: &[u64] = if n <= N_INLINE {
                for (k, v) in buf[..n].iter_mut().enumerate() {
                    *v = c.val(k);
                }
                &buf[..n]
            } else {
                wide_buf.clear();
                wide_buf.extend((0..n).map(|k| self.wide.word(s as usize * n + k)));
                &wide_buf
            };
            let hash = rehash(&self.mask.idx, values, seed);
            let (at, _) = new.free_cell(hash);
            let slot_word = [u64::from(s)];
            let inline: &[u64] = if n <= N_INLINE { values } else { &slot_word };
            new.put(at, hash, inline);
            to[from] = u32::try_from(at).expect("fewer than 4G cells");
            for (i, e) in old.by_ref() {
                if i == from {
                    arena[at] = e;
                    break;
                }
                debug_assert!(e.is_none(), "an entry at a dead cell");
            }
            live += 1;
        }
        debug_assert_eq!(live, ws.live, "live cells miscounted");
        ws.live = live;
        // What the batch recorded so far moves too.
        for at in &mut self.log.touched {
            *at = to[*at as usize];
        }
        for (at, _) in &mut self.log.emptied {
            *at = to[*at as usize];
        }
        self.log.moves.push((to, len));
        self.cells = new;
        self.arena = arena;
        ws.tombs = 0;
    }

    /// The hashes with which inserting, replacing or removing the rule `key` names (a match
    /// value, masked by this subtable's mask, or the masked value words) probes this subtable.
    pub(crate) fn write_hashes(&self, key: WriteKey<'_>, seed: u64) -> WriteHashes {
        let mut masked = [0u64; packet::key::KEY_WORDS];
        let values = match key {
            WriteKey::Values(values) => values,
            WriteKey::Match(value) => {
                let m = &*self.mask;
                for (o, (i, b)) in masked.iter_mut().zip(m.idx.iter().zip(&m.bits)) {
                    *o = value.words[usize::from(*i)] & b;
                }
                &masked[..m.idx.len()]
            }
        };
        let mut partial = Partial::default();
        let hash = self.hashes(values, seed, &mut partial);
        WriteHashes { partial, hash }
    }

    /// Prefetches what the probes of `h` ([`Subtable::write_hashes`]) read first: the home
    /// cell and its tag, the arena slot beside it and each stage index's home slot and count.
    #[inline]
    pub(crate) fn touch_write(&self, h: &WriteHashes) {
        for (ix, ph) in self.index.iter().zip(&h.partial.0[..h.partial.1]) {
            ix.touch(*ph);
        }
        if let Some(at) = self.cells.touch_home(h.hash) {
            if let Some(slot) = self.arena.get(at) {
                prefetch(slot);
            }
        }
    }

    /// Finds the rule with masked value words `values` and priority `priority`.
    pub(crate) fn find_exact(
        &self,
        values: &[u64],
        priority: u32,
        seed: u64,
    ) -> Option<&Arc<Rule<T>>> {
        let hash = self.hashes(values, seed, &mut Partial::default());
        let e = self.entry(self.position(values, hash)?)?;
        std::iter::once(&e.head)
            .chain(e.rest().iter())
            .find(|r| r.priority == priority)
    }

    /// Removes the rule with `rule`'s match and rank; returns it, or `None` if absent.
    pub(crate) fn remove(&mut self, rule: &Rule<T>, seed: u64) -> Option<Arc<Rule<T>>> {
        let hash = self.hashes(rule.values.as_slice(), seed, &mut Partial::default());
        let at = self.position(rule.values.as_slice(), hash)?;
        let e = self.arena[at].as_mut()?;
        let (removed, emptied) = if e.head.rank == rule.rank {
            if e.rest().is_empty() {
                let e = self.arena[at].take()?;
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
    pub(crate) fn replace(&mut self, new: Arc<Rule<T>>, seed: u64) -> Option<Arc<Rule<T>>> {
        let hash = self.hashes(new.values.as_slice(), seed, &mut Partial::default());
        let at = self.position(new.values.as_slice(), hash)?;
        let e = self.arena[at].as_mut()?;
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
        for (i, b) in m.idx.iter().zip(m.bits.iter()) {
            h = mix_at(h, *i, key.words[usize::from(*i)] & b);
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
        let mut hit = None;
        self.cells.find(hash, |at, c| {
            c.holds(&want[..n]) && {
                hit = self.entry(at);
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
        let mut hit = None;
        self.cells.find(hash, |at, c| {
            self.wide.slice(c.slot() as usize * n, n).is_some_and(|ws| {
                ws.iter()
                    .zip(m.idx.iter().zip(m.bits.iter()))
                    .all(|(w, (i, b))| w.load(Ordering::Relaxed) == key.words[usize::from(*i)] & b)
            }) && {
                hit = self.entry(at);
                hit.is_some()
            }
        })?;
        hit.map(|e| &e.head)
    }

    /// Brings in what a hit on `hash` reads first, if its home cell's tag matches: the home
    /// cell and the arena slot beside it, prefetched (for wide masks, the first word of the
    /// cell's wide slot too, which needs the cell: loaded). They depend on no other key's, so
    /// a batch asks for all of them before any comparison waits; returns a word derived from
    /// what it loaded, so that the loads are not optimised away. Prefetches rather than loads
    /// for inline values: 4 to 7% more batch hits a second at 16K and 256K rules (a runtime
    /// switch in one binary, run 18); a load holds up retirement, and 32 keys' worth of
    /// hashing and loads do not all fit in the reorder window.
    #[inline]
    pub(crate) fn touch(&self, hash: u64) -> u64 {
        let Some((at, c)) = self.cells.home_cell(hash) else {
            return 0;
        };
        let n = self.mask.idx.len();
        if n <= N_INLINE {
            prefetch(c);
            if let Some(slot) = self.arena.get(at) {
                prefetch(slot);
            }
            return 0;
        }
        self.wide.word(c.slot() as usize * n)
            ^ self.entry(at).map_or(0, |e| Arc::as_ptr(&e.head) as u64)
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
        for (k, (i, b)) in m.idx.iter().zip(m.bits.iter()).enumerate() {
            h = mix_at(h, *i, key.words[usize::from(*i)] & b);
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

    /// After [`Subtable::find`] missed, or a trie walk ruled the subtable out: ORs into `wc`
    /// the bits that prove the miss for every packet agreeing with `key` on them (tries first,
    /// then stage indices). With `raw`, the hash chain at the stage ends as
    /// [`Subtable::hash_key_staged`] left it for the probe that missed, the stage indices'
    /// hashes are finished from it; without (no probe), the words are hashed stage by stage,
    /// only as far as the stage that proves the miss.
    pub(crate) fn explain_miss(
        &self,
        key: &FlowKey,
        seed: u64,
        raw: Option<&Raw>,
        tries: &mut TrieCtx<'_>,
        wc: &mut FlowKey,
    ) {
        let m = &*self.mask;
        if raw.is_none() && self.ruled_out_adds_nothing(key, tries, wc) {
            return;
        }
        let mut h = seed;
        let mut pos = 0;
        let n = m.stage_ends.len();
        for j in 0..n {
            if tries.skip(m, m.stage_ids[j], key, wc) {
                m.or_into(wc, pos);
                return;
            }
            let end = usize::from(m.stage_ends[j]);
            if j + 1 == n {
                break;
            }
            let ph = match raw {
                Some(r) => finish(r[j]),
                None => {
                    for (i, b) in m.idx[pos..end].iter().zip(&m.bits[pos..end]) {
                        h = mix_at(h, *i, key.words[usize::from(*i)] & b);
                    }
                    finish(h)
                }
            };
            pos = end;
            if !self.index[j].contains(ph) {
                m.or_into(wc, end);
                return;
            }
        }
        m.or_into(wc, m.idx.len());
    }

    /// For a subtable that a trie walk made already rules out: true if
    /// [`Subtable::explain_miss`] could add no bit to `wc`, whatever its stage-index probes
    /// found. It consults at most the stages before the first trie that rules the subtable out,
    /// and that trie's bits, and a lookup's earlier subtables often consulted them all (the
    /// same `dl_type`, the same address bits of the same walk). Subtables probed first are not
    /// asked: with one subtable (OVS's benchmark sets) the check was only a cost.
    #[inline]
    fn ruled_out_adds_nothing(&self, key: &FlowKey, tries: &mut TrieCtx<'_>, wc: &FlowKey) -> bool {
        let m = &*self.mask;
        let mut pos = 0;
        for (&stage, &end) in m.stage_ids.iter().zip(m.stage_ends.iter()) {
            if let Some((field, add)) = tries.skip_bits(m, stage, key) {
                return wc.get(field) & add == add && m.covered_by(wc, pos);
            }
            pos = usize::from(end);
        }
        false
    }

    /// True if this subtable's table is too large to stay in cache, so that a batch gains by
    /// loading its keys' home cells ahead ([`Subtable::touch`]).
    #[inline]
    pub(crate) fn worth_touching(&self) -> bool {
        self.cells.n_cells() >= TOUCH_CELLS
    }

    /// Every rule here.
    pub(crate) fn rules(&self) -> impl Iterator<Item = &Arc<Rule<T>>> {
        self.arena
            .iter()
            .flatten()
            .flat_map(|e| std::iter::once(&e.head).chain(e.rest().iter()))
    }

    /// Bytes held by this version alone (its arena and priorities, not the rules).
    pub(crate) fn own_bytes(&self) -> usize {
        self.arena.capacity() * std::mem::size_of::<Option<Entry<T>>>() + self.priorities.len() * 32
    }

    /// Bytes of the arrays both versions share.
    pub(crate) fn shared_bytes(&self) -> usize {
        self.cells.heap_bytes()
            + self.wide.heap_bytes()
            + self.index.iter().map(|ix| ix.heap_bytes()).sum::<usize>()
    }
}
