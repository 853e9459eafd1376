//! One subtable: every rule with one mask, in a hash table keyed by the masked value, plus
//! one index per stage for staged lookup.
//!
//! The hash of a key is computed word by word over the mask's non-zero words only, in stage
//! order, so the running hash after stage `k` is the hash of the key's stages `0..=k`. For
//! every stage but the last, `stage_index[k]` counts the distinct masked values whose
//! stages `0..=k` hash to each value. A lookup that misses the final table with wildcard
//! tracking on finds the first stage whose partial hash no rule has: the packet misses at
//! that stage, and only that stage's bits (and the earlier ones') were needed to know it.
//!
//! Entries sit in place in [`Cells`] (open addressing over the hash's upper bits, at most half
//! full): a hit usually reads one cell, and a batch of lookups loads every key's home cell
//! before comparing any (see [`RuleSet::lookup_batch`](crate::RuleSet::lookup_batch)).

use std::collections::BTreeMap;
use std::sync::Arc;

use hashbrown::HashTable;
use packet::key::FlowKey;

use crate::cells::Cells;
use crate::rule::{finish, mix_at, Mask, Rule};
use crate::trie::{prefix_mask, TrieMatch, Walk};
use crate::PrefixField;

/// Value words kept inline in a hash-table entry, so that a lookup compares them without
/// touching the rule (one cache miss fewer); an exact 5-tuple has four.
const N_INLINE: usize = 4;

/// Tables of at least this many cells (192 KB of cells) are touched ahead by batch lookups;
/// smaller ones stay in cache, and the extra pass would only cost.
const TOUCH_CELLS: usize = 4096;

/// The rules of one masked value, best first.
#[derive(Debug)]
pub(crate) struct Entry<T> {
    /// The value words (zero-padded) if the mask has at most `N_INLINE`; otherwise `vals[0]`
    /// is the entry's slot in its subtable's `wide` array.
    vals: [u64; N_INLINE],
    head: Arc<Rule<T>>,
    /// Rules with the same match but lower priority, best first (rare, so boxed: an entry
    /// is 48 bytes).
    #[allow(clippy::box_collection)] // One thin pointer instead of a three-word `Vec`.
    rest: Option<Box<Vec<Arc<Rule<T>>>>>,
}

impl<T> Entry<T> {
    fn new(rule: Arc<Rule<T>>, wide_slot: Option<usize>) -> Self {
        let mut vals = [0; N_INLINE];
        match wide_slot {
            Some(slot) => vals[0] = slot as u64,
            None => {
                for (o, v) in vals.iter_mut().zip(rule.values.as_slice()) {
                    *o = *v;
                }
            }
        }
        Entry {
            vals,
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
}

/// Lazily computed trie walks for one lookup, one per prefix field.
#[derive(Debug)]
pub(crate) struct TrieCtx<'a> {
    pub(crate) prefixes: &'a [PrefixField],
    pub(crate) tries: &'a [crate::trie::Trie],
    pub(crate) walks: [Walk; crate::rule::MAX_PREFIXES],
}

impl TrieCtx<'_> {
    /// Walk of trie `t` for `key`, advanced (if needed) far enough to answer for prefix
    /// length `plen`.
    #[inline]
    fn walk(&mut self, t: usize, key: &FlowKey, plen: u8) -> TrieMatch {
        let w = &mut self.walks[t];
        if !w.knows(plen) {
            let field = self.prefixes[t].field;
            let bits = key.get(field) << (128 - u32::from(field.width));
            self.tries[t].advance(w, bits, field.width, plen);
        }
        w.m
    }

    /// True if a trie walk already made for this lookup proves that no rule with mask `m`
    /// matches. Walks no further (a hit must not pay for a walk) and consults nothing by
    /// itself: the caller explains the miss with [`Subtable::explain_miss`].
    #[inline]
    pub(crate) fn rules_out(&self, m: &Mask) -> bool {
        self.walks
            .iter()
            .zip(m.trie_plens.iter())
            .any(|(w, plen)| *plen != 0 && w.knows(*plen) && !w.m.has_len(*plen))
    }

    /// If a trie on a field of stage `stage` rules the subtable with mask `m` out, ORs the
    /// address bits the decision needed into `wc` and returns `true`.
    #[inline]
    fn skip(&mut self, m: &Mask, stage: u8, key: &FlowKey, wc: &mut FlowKey) -> bool {
        let mut set = m.stage_tries[usize::from(stage)];
        while set != 0 {
            let t = set.trailing_zeros() as usize;
            set &= set - 1;
            let (plen, pf) = (m.trie_plens[t], &self.prefixes[t]);
            let width = pf.field.width;
            let res = self.walk(t, key, plen);
            if !res.has_len(plen) {
                let n = res.examined.min(plen);
                let add = prefix_mask(n) >> (128 - u32::from(width));
                let cur = wc.get(pf.field);
                wc.set(pf.field, cur | add);
                return true;
            }
        }
        false
    }
}

/// Partial hashes of a value: one per stage but the last, and how many.
#[derive(Debug, Default)]
struct Partial([u64; packet::key::STAGES.len() - 1], usize);

/// The value words of entry `e` of a subtable whose mask has `n` words.
#[inline]
fn entry_values<'a, T>(e: &'a Entry<T>, n: usize, wide: &'a [u64]) -> &'a [u64] {
    if n <= N_INLINE {
        &e.vals[..n]
    } else {
        #[allow(clippy::cast_possible_truncation)] // A slot index, below `wide.len()`.
        let slot = e.vals[0] as usize;
        &wide[slot * n..(slot + 1) * n]
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

/// Every rule with one mask.
#[derive(Debug)]
pub(crate) struct Subtable<T> {
    pub(crate) mask: Arc<Mask>,
    /// The entries by hash.
    table: Cells<Entry<T>>,
    /// For masks of more than `N_INLINE` words: every entry's value words, one slot of
    /// `mask.idx.len()` words per entry, so that a lookup compares them in one dense array
    /// instead of in rules scattered over the heap.
    wide: Vec<u64>,
    /// Partial-hash counts for each touched stage but the last.
    stage_index: Box<[HashTable<(u64, u32)>]>,
    /// Rules per priority, to know the highest.
    priorities: BTreeMap<u32, u32>,
    pub(crate) n_rules: usize,
}

impl<T> Subtable<T> {
    pub(crate) fn new(mask: Arc<Mask>) -> Self {
        let n_index = mask.stage_ends.len().saturating_sub(1);
        Subtable {
            mask,
            table: Cells::default(),
            wide: Vec::new(),
            stage_index: (0..n_index).map(|_| HashTable::new()).collect(),
            priorities: BTreeMap::new(),
            n_rules: 0,
        }
    }

    /// Highest priority of a rule here (0 when empty).
    pub(crate) fn max_priority(&self) -> u32 {
        self.priorities.keys().next_back().copied().unwrap_or(0)
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

    /// Adds `rule` (not present yet). One probe of the hash table (and of each stage
    /// index): found, the rule joins the entry; not found, a new entry is made.
    pub(crate) fn insert(&mut self, rule: Arc<Rule<T>>, seed: u64) {
        use hashbrown::hash_table::Entry as Slot;
        let mut partial = Partial::default();
        let hash = self.hashes(rule.values.as_slice(), seed, &mut partial);
        *self.priorities.entry(rule.priority).or_insert(0) += 1;
        self.n_rules += 1;
        let n = self.mask.idx.len();
        let values = rule.values.as_slice();
        let wide = &self.wide;
        if let Some(at) = self
            .table
            .find(hash, |e| entry_values(e, n, wide) == values)
        {
            let e = self.table.get_mut(at).expect("found");
            if rule.rank > e.head.rank {
                let old = std::mem::replace(&mut e.head, rule);
                e.rest_mut().insert(0, old);
            } else {
                let at = e.rest().partition_point(|r| r.rank > rule.rank);
                e.rest_mut().insert(at, rule);
            }
            return;
        }
        let wide_slot = (n > N_INLINE).then(|| {
            self.wide.extend_from_slice(values);
            self.wide.len() / n - 1
        });
        let (idx, wide) = (&self.mask.idx, &self.wide);
        self.table.insert(hash, Entry::new(rule, wide_slot), |e| {
            rehash(idx, entry_values(e, n, wide), seed)
        });
        for (ix, ph) in self.stage_index.iter_mut().zip(partial.0) {
            match ix.entry(ph, |e| e.0 == ph, |e| e.0) {
                Slot::Occupied(mut o) => o.get_mut().1 += 1,
                Slot::Vacant(v) => {
                    v.insert((ph, 1));
                }
            }
        }
    }

    /// The position of the entry holding masked value words `values` (hash `hash`).
    fn position(&self, values: &[u64], hash: u64) -> Option<usize> {
        let n = self.mask.idx.len();
        self.table
            .find(hash, |e| entry_values(e, n, &self.wide) == values)
    }

    /// Finds the rule with masked value words `values` and priority `priority`.
    pub(crate) fn find_exact(
        &self,
        values: &[u64],
        priority: u32,
        seed: u64,
    ) -> Option<&Arc<Rule<T>>> {
        let hash = self.hashes(values, seed, &mut Partial::default());
        let e = self.table.get(self.position(values, hash)?)?;
        std::iter::once(&e.head)
            .chain(e.rest().iter())
            .find(|r| r.priority == priority)
    }

    /// Removes the rule with `rule`'s match and rank; returns it, or `None` if absent.
    pub(crate) fn remove(&mut self, rule: &Rule<T>, seed: u64) -> Option<Arc<Rule<T>>> {
        let mut partial = Partial::default();
        let hash = self.hashes(rule.values.as_slice(), seed, &mut partial);
        let at = self.position(rule.values.as_slice(), hash)?;
        let e = self.table.get_mut(at)?;
        let removed = if e.head.rank == rule.rank {
            if e.rest().is_empty() {
                let entry = self.remove_entry(at, seed)?;
                for (ix, ph) in self.stage_index.iter_mut().zip(partial.0) {
                    if let Ok(mut o) = ix.find_entry(ph, |e| e.0 == ph) {
                        o.get_mut().1 -= 1;
                        if o.get().1 == 0 {
                            o.remove();
                        }
                    }
                }
                entry.head
            } else {
                let next = e.rest_mut().remove(0);
                if e.rest().is_empty() {
                    e.rest = None;
                }
                std::mem::replace(&mut e.head, next)
            }
        } else {
            let at = e.rest().iter().position(|r| r.rank == rule.rank)?;
            let r = e.rest_mut().remove(at);
            if e.rest().is_empty() {
                e.rest = None;
            }
            r
        };
        self.n_rules -= 1;
        if let std::collections::btree_map::Entry::Occupied(mut o) =
            self.priorities.entry(removed.priority)
        {
            *o.get_mut() -= 1;
            if *o.get() == 0 {
                o.remove();
            }
        }
        Some(removed)
    }

    /// Removes the entry at position `at` and gives back its `wide` slot (moving the last
    /// slot into it).
    fn remove_entry(&mut self, at: usize, seed: u64) -> Option<Entry<T>> {
        let n = self.mask.idx.len();
        let (idx, wide) = (&self.mask.idx, &self.wide);
        let entry = self
            .table
            .remove(at, |e| rehash(idx, entry_values(e, n, wide), seed))?;
        if n > N_INLINE {
            let slot = usize::try_from(entry.vals[0]).expect("a slot index");
            let last = self.wide.len() / n - 1;
            if slot != last {
                self.wide.copy_within(last * n..(last + 1) * n, slot * n);
                let hash = rehash(&self.mask.idx, &self.wide[slot * n..(slot + 1) * n], seed);
                let moved = self
                    .table
                    .find(hash, |e| e.vals[0] == last as u64)
                    .expect("every wide slot belongs to an entry");
                self.table.get_mut(moved).expect("found").vals[0] = slot as u64;
            }
            self.wide.truncate(last * n);
        }
        Some(entry)
    }

    /// Replaces the rule with `new`'s match and rank by `new`; returns the old one.
    pub(crate) fn replace(&mut self, new: Arc<Rule<T>>, seed: u64) -> Option<Arc<Rule<T>>> {
        let hash = self.hashes(new.values.as_slice(), seed, &mut Partial::default());
        let at = self.position(new.values.as_slice(), hash)?;
        let e = self.table.get_mut(at)?;
        let slot = std::iter::once(&mut e.head)
            .chain(e.rest.iter_mut().flat_map(|v| v.iter_mut()))
            .find(|r| r.rank == new.rank)?;
        Some(std::mem::replace(slot, new))
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

    /// [`Subtable::find`] with the key's hash already computed.
    #[inline]
    pub(crate) fn find_hashed(&self, key: &FlowKey, hash: u64) -> Option<&Arc<Rule<T>>> {
        let at = self.table.find(hash, |e| self.entry_matches(e, key))?;
        self.table.get(at).map(|e| &e.head)
    }

    /// True if entry `e` holds `key`'s words under this subtable's mask.
    #[inline]
    fn entry_matches(&self, e: &Entry<T>, key: &FlowKey) -> bool {
        let m = &*self.mask;
        entry_values(e, m.idx.len(), &self.wide)
            .iter()
            .zip(m.idx.iter().zip(m.bits.iter()))
            .all(|(v, (i, b))| key.words[usize::from(*i)] & b == *v)
    }

    /// Loads what a hit on `hash` reads first, if its home cell's tag matches: the home
    /// cell's first value word (or, for wide masks, the first word of its `wide` slot) and
    /// its rule pointer. The
    /// load depends on no other key's, so a batch issues all of them before any comparison
    /// waits; returns a word derived from them, so that the loads are not optimised away.
    #[inline]
    pub(crate) fn touch(&self, hash: u64) -> u64 {
        let Some(e) = self.table.home(hash) else {
            return 0;
        };
        let n = self.mask.idx.len();
        let first = if n <= N_INLINE {
            e.vals[0]
        } else {
            #[allow(clippy::cast_possible_truncation)] // A slot index.
            let slot = e.vals[0] as usize;
            self.wide.get(slot * n).copied().unwrap_or(0)
        };
        first ^ (Arc::as_ptr(&e.head) as u64)
    }

    /// After [`Subtable::find`] missed: ORs into `wc` the bits that prove the miss for
    /// every packet agreeing with `key` on them (tries first, then stage indices).
    pub(crate) fn explain_miss(
        &self,
        key: &FlowKey,
        seed: u64,
        tries: &mut TrieCtx<'_>,
        wc: &mut FlowKey,
    ) {
        let m = &*self.mask;
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
            for (i, b) in m.idx[pos..end].iter().zip(&m.bits[pos..end]) {
                h = mix_at(h, *i, key.words[usize::from(*i)] & b);
            }
            pos = end;
            let ph = finish(h);
            if self.stage_index[j].find(ph, |e| e.0 == ph).is_none() {
                m.or_into(wc, end);
                return;
            }
        }
        m.or_into(wc, m.idx.len());
    }

    /// True if this subtable's table is too large to stay in cache, so that a batch gains by
    /// loading its keys' home cells ahead ([`Subtable::touch`]).
    #[inline]
    pub(crate) fn worth_touching(&self) -> bool {
        self.table.n_cells() >= TOUCH_CELLS
    }

    /// Every rule here.
    pub(crate) fn rules(&self) -> impl Iterator<Item = &Arc<Rule<T>>> {
        self.table
            .iter()
            .flat_map(|e| std::iter::once(&e.head).chain(e.rest().iter()))
    }

    /// Bytes held by this subtable's tables (not the rules).
    pub(crate) fn heap_bytes(&self) -> usize {
        let mut n = self.table.heap_bytes() + self.wide.capacity() * 8;
        for ix in self.stage_index.iter() {
            n += ix.capacity() * (std::mem::size_of::<(u64, u32)>() + 1);
        }
        n + self.priorities.len() * 32
    }
}
