//! The megaflow cache: one PMD thread's tuple-space table of the masked keys that
//! translations produced (OVS `dpcls`).
//!
//! # How
//!
//! A megaflow is a (mask, masked key) pair with its actions. Megaflows with the same mask
//! share a `Subtable`: a hash table keyed by the key's words under the mask. A lookup tries
//! the subtables in rank order (most hits first, re-ranked by [`MegaflowTable::rank`]) and
//! stops at the first hit. Megaflows never overlap with different actions: they all come
//! from one consistent pipeline state, and revalidation removes every megaflow a flow-table
//! change made stale before the change is acknowledged. So the first hit is the answer.
//!
//! Written by hand (not `hashbrown`) because this is the hot path: a subtable hashes only the
//! mask's non-zero words (precomputed index list, like OVS's miniflow map), its buckets are
//! 8-byte `(hash, entry)` pairs (eight per cache line, linear probing, backward-shift
//! deletion), and the masked words of all entries sit in one dense array, so a hit touches
//! one bucket line and one key line. [`MegaflowTable::lookup_batch`] hashes a whole batch
//! first and prefetches the buckets, then the keys, so the misses of 32 packets overlap. A key
//! that agrees, under a subtable's mask, with the key before it takes that key's answer
//! without a hash or a probe: a batch of one megaflow's packets (OVS's `single` rule set, where
//! OVS-DPDK uses its simple-match path) probes once. A subtable where no neighbours agreed
//! stops comparing for the next 15 batches, so that tables of many flows pay for it once in 16.
//!
//! # Invariants
//!
//! - Every live flow sits in exactly one subtable entry, and `flows[id].entry` says where.
//! - A bucket is `0` (empty) or `hash << 32 | (entry + 1)`.
//! - Subtables have at least one flow; an emptied subtable is removed.

use std::collections::HashMap;

use packet::key::{FlowKey, KEY_WORDS};

use crate::cycles::prefetch;

/// A flow's index in its PMD's megaflow table.
pub type FlowId = u32;

/// The hash of a key's words under a mask (a multiply-rotate mix, finished with an avalanche).
#[inline(always)]
pub(crate) fn hash_masked(key: &FlowKey, idx: &[u8], mask: &[u64], basis: u64) -> u32 {
    let h = idx.iter().zip(mask).fold(basis, |h, (i, m)| {
        mix_word(h, key.words[usize::from(*i)] & m)
    });
    finish_hash(h)
}

/// The hash of a key's words `idx` (unmasked; see [`hash_masked`]).
#[inline(always)]
pub(crate) fn hash_words(key: &FlowKey, idx: &[u8], basis: u64) -> u32 {
    let h = idx
        .iter()
        .fold(basis, |h, i| mix_word(h, key.words[usize::from(*i)]));
    finish_hash(h)
}

/// One step of [`hash_masked`] and [`hash_words`]: mixes word `w` into `h`.
#[inline(always)]
fn mix_word(h: u64, w: u64) -> u64 {
    (h.rotate_left(23) ^ w).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// The avalanche that ends [`hash_masked`] and [`hash_words`]; the low 32 bits after it.
#[inline(always)]
fn finish_hash(mut h: u64) -> u32 {
    h ^= h >> 32;
    h = h.wrapping_mul(0xD6E8_FEB8_6659_FD93);
    h ^= h >> 32;
    (h & 0xffff_ffff) as u32
}

/// One mask's megaflows.
#[derive(Debug)]
pub(crate) struct Subtable {
    /// A stable name for the subtable (flows refer to it).
    pub(crate) id: u32,
    pub(crate) mask: FlowKey,
    /// Indices of the mask's non-zero words.
    idx: Box<[u8]>,
    /// The mask's words at `idx`.
    mwords: Box<[u64]>,
    basis: u64,
    /// `hash << 32 | entry + 1`, or 0.
    buckets: Vec<u64>,
    /// Masked key words of every entry, `idx.len()` per entry.
    keys: Vec<u64>,
    /// The flow of every entry.
    flow_of: Vec<FlowId>,
    /// Hits, halved at each ranking (so that older traffic weighs less).
    pub(crate) hits: u64,
    /// Batches left before [`MegaflowTable::lookup_batch`] compares neighbouring keys here
    /// again, after a batch in which no key agreed with the one before it.
    agree_off: u8,
}

/// Batches a subtable skips the neighbouring-key comparison after one in which it never paid
/// (so that a table of many flows, whose neighbouring packets rarely share a megaflow, pays
/// for it one batch in this many).
const AGREE_BACKOFF: u8 = 15;

impl Subtable {
    fn new(id: u32, mask: &FlowKey) -> Subtable {
        let idx: Vec<u8> = (0..KEY_WORDS)
            .filter(|i| mask.words[*i] != 0)
            .map(|i| u8::try_from(i).unwrap_or(u8::MAX))
            .collect();
        let mwords: Vec<u64> = idx.iter().map(|i| mask.words[usize::from(*i)]).collect();
        Subtable {
            id,
            mask: *mask,
            basis: 0x243F_6A88_85A3_08D3 ^ (idx.len() as u64),
            idx: idx.into(),
            mwords: mwords.into(),
            buckets: vec![0; 16],
            keys: Vec::new(),
            flow_of: Vec::new(),
            hits: 0,
            agree_off: 0,
        }
    }

    /// Entries (flows) in the subtable.
    pub(crate) fn len(&self) -> usize {
        self.flow_of.len()
    }

    #[inline(always)]
    fn hash(&self, key: &FlowKey) -> u32 {
        hash_masked(key, &self.idx, &self.mwords, self.basis)
    }

    #[inline(always)]
    fn bucket_of(&self, hash: u32) -> usize {
        (hash as usize) & (self.buckets.len() - 1)
    }

    /// True if `a` and `b` agree on this subtable's mask (then they hash alike and find the
    /// same megaflow, or none).
    #[inline(always)]
    fn agree(&self, a: &FlowKey, b: &FlowKey) -> bool {
        self.idx
            .iter()
            .zip(self.mwords.iter())
            .all(|(i, m)| (a.words[usize::from(*i)] ^ b.words[usize::from(*i)]) & m == 0)
    }

    #[inline(always)]
    fn entry_matches(&self, e: usize, key: &FlowKey) -> bool {
        let n = self.idx.len();
        let words = &self.keys[e * n..e * n + n];
        self.idx
            .iter()
            .zip(self.mwords.iter())
            .zip(words)
            .all(|((i, m), w)| key.words[usize::from(*i)] & m == *w)
    }

    /// Walks the probe sequence of `hash` (linear probing) to the first occupied bucket whose
    /// value satisfies `hit`; `None` at the first empty bucket.
    #[inline(always)]
    fn probe(&self, hash: u32, hit: impl Fn(u64) -> bool) -> Option<usize> {
        let cap = self.buckets.len() - 1;
        let mut b = self.bucket_of(hash);
        loop {
            let v = self.buckets[b];
            if v == 0 {
                return None;
            }
            if hit(v) {
                return Some(b);
            }
            b = (b + 1) & cap;
        }
    }

    /// The entry a bucket value points to.
    #[inline(always)]
    fn entry_of(v: u64) -> usize {
        (v & 0xffff_ffff) as usize - 1
    }

    /// The flow whose masked key equals `key` under this mask, given the key's hash.
    #[inline(always)]
    fn find(&self, key: &FlowKey, hash: u32) -> Option<FlowId> {
        let b = self.probe(hash, |v| {
            (v >> 32) as u32 == hash && self.entry_matches(Self::entry_of(v), key)
        })?;
        Some(self.flow_of[Self::entry_of(self.buckets[b])])
    }

    #[inline(always)]
    fn prefetch_bucket(&self, hash: u32) {
        prefetch(&self.buckets[self.bucket_of(hash)]);
    }

    /// Prefetches the key words of the first entry in `hash`'s bucket.
    #[inline(always)]
    fn prefetch_key(&self, hash: u32) {
        let v = self.buckets[self.bucket_of(hash)];
        if v != 0 {
            let e = Self::entry_of(v);
            if let Some(w) = self.keys.get(e * self.idx.len()) {
                prefetch(w);
            }
        }
    }

    fn grow(&mut self) {
        let mut bigger = vec![0u64; self.buckets.len() * 2];
        let cap = bigger.len() - 1;
        for v in self.buckets.iter().copied().filter(|v| *v != 0) {
            let mut b = ((v >> 32) as usize) & cap;
            while bigger[b] != 0 {
                b = (b + 1) & cap;
            }
            bigger[b] = v;
        }
        self.buckets = bigger;
    }

    /// Adds a flow's entry; returns the entry index.
    fn insert(&mut self, key: &FlowKey, flow: FlowId) -> u32 {
        if (self.flow_of.len() + 1) * 2 > self.buckets.len() {
            self.grow();
        }
        let e = self.flow_of.len();
        for (i, m) in self.idx.iter().zip(self.mwords.iter()) {
            self.keys.push(key.words[usize::from(*i)] & m);
        }
        self.flow_of.push(flow);
        let hash = self.hash(key);
        let cap = self.buckets.len() - 1;
        let mut b = self.bucket_of(hash);
        while self.buckets[b] != 0 {
            b = (b + 1) & cap;
        }
        self.buckets[b] = (u64::from(hash) << 32) | (e as u64 + 1);
        u32::try_from(e).unwrap_or(u32::MAX)
    }

    /// The bucket holding entry `e`.
    fn bucket_of_entry(&self, e: usize) -> Option<usize> {
        let hash = self.hash(&self.entry_key(e));
        self.probe(hash, |v| Self::entry_of(v) == e)
    }

    /// The masked key of entry `e` as a full key.
    fn entry_key(&self, e: usize) -> FlowKey {
        let mut k = FlowKey::default();
        self.entry_key_into(e, &mut k);
        k
    }

    /// [`Subtable::entry_key`] written into `key` (every word outside the mask zeroed).
    fn entry_key_into(&self, e: usize, key: &mut FlowKey) {
        let n = self.idx.len();
        *key = FlowKey::default();
        for (j, i) in self.idx.iter().enumerate() {
            key.words[usize::from(*i)] = self.keys[e * n + j];
        }
    }

    /// Removes entry `e`; returns the flow whose entry moved into `e`'s place, if any.
    fn remove(&mut self, e: usize) -> Option<FlowId> {
        // The entry's bucket always exists (invariant); if it did not, the entry still goes.
        if let Some(mut hole) = self.bucket_of_entry(e) {
            // Backward-shift deletion keeps every probe sequence unbroken.
            let cap = self.buckets.len() - 1;
            self.buckets[hole] = 0;
            let mut b = (hole + 1) & cap;
            while self.buckets[b] != 0 {
                let v = self.buckets[b];
                let home = ((v >> 32) as usize) & cap;
                // Move `v` into the hole if its home is not cyclically within (hole, b].
                let dist_home = b.wrapping_sub(home) & cap;
                let dist_hole = b.wrapping_sub(hole) & cap;
                if dist_home >= dist_hole {
                    self.buckets[hole] = v;
                    self.buckets[b] = 0;
                    hole = b;
                }
                b = (b + 1) & cap;
            }
        }
        // Move the last entry into `e`.
        let last = self.flow_of.len() - 1;
        let n = self.idx.len();
        let moved = if e != last {
            let lb = self.bucket_of_entry(last);
            for j in 0..n {
                self.keys[e * n + j] = self.keys[last * n + j];
            }
            self.flow_of[e] = self.flow_of[last];
            if let Some(lb) = lb {
                self.buckets[lb] = (self.buckets[lb] & !0xffff_ffff) | (e as u64 + 1);
            }
            Some(self.flow_of[e])
        } else {
            None
        };
        self.keys.truncate(last * n);
        self.flow_of.truncate(last);
        moved
    }

    fn memory(&self) -> usize {
        self.buckets.capacity() * 8 + self.keys.capacity() * 8 + self.flow_of.capacity() * 4
    }
}

/// Where a flow's masked key lives.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Slot {
    pub(crate) subtable: u32,
    pub(crate) entry: u32,
}

/// One PMD thread's megaflow tables: subtables and the flows' positions in them. The flows'
/// payloads live beside it, indexed by [`FlowId`] (see `pmd`).
#[derive(Debug, Default)]
pub struct MegaflowTable {
    subtables: Vec<Subtable>,
    by_mask: HashMap<FlowKey, u32>,
    next_id: u32,
    /// Subtable ids given back by removed subtables (ids stay below the most subtables ever
    /// held at once, so `pos_of` stays small).
    free_ids: Vec<u32>,
    /// Per subtable id: its position in `subtables` (which `rank` reorders).
    pos_of: Vec<u32>,
    /// The key words some subtable's mask covers: the only words that can tell two keys'
    /// megaflows apart (the exact-match cache hashes these).
    used_words: Vec<u8>,
    /// Bumped whenever `used_words` changes.
    used_words_gen: u64,
    /// Per flow id: its slot, or `None` for a free id.
    slots: Vec<Option<Slot>>,
    free: Vec<FlowId>,
    n_flows: usize,
}

impl MegaflowTable {
    /// An empty table.
    pub fn new() -> Self {
        MegaflowTable::default()
    }

    /// Number of megaflows.
    pub fn len(&self) -> usize {
        self.n_flows
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.n_flows == 0
    }

    /// Number of subtables (distinct masks).
    pub fn n_subtables(&self) -> usize {
        self.subtables.len()
    }

    /// Bytes held by the subtables and the slot map.
    pub fn memory(&self) -> usize {
        self.subtables.iter().map(Subtable::memory).sum::<usize>()
            + self.slots.capacity() * std::mem::size_of::<Option<Slot>>()
            + self.free.capacity() * 4
    }

    /// The flow that `key` falls into, if any.
    #[inline]
    pub fn lookup(&mut self, key: &FlowKey) -> Option<FlowId> {
        for st in self.subtables.iter_mut() {
            let h = st.hash(key);
            if let Some(f) = st.find(key, h) {
                st.hits += 1;
                return Some(f);
            }
        }
        None
    }

    /// Looks up the keys of `keys` whose `out` entry is `None` and fills in their flows.
    /// Each subtable in turn hashes every unresolved key (but one that agrees under its mask
    /// with the previous unresolved key, see the module documentation), prefetches their
    /// buckets, then their first entries' keys, then probes.
    pub fn lookup_batch(&mut self, keys: &[FlowKey], out: &mut [Option<FlowId>]) {
        let n = keys.len().min(out.len());
        let mut hashes = [0u32; crate::BATCH_SIZE];
        for st in self.subtables.iter_mut() {
            let mut pending = false;
            // Bit `i`: key `i` agrees, under this mask, with the last key before it that is
            // looked up here, so it gets that key's answer without a hash or a probe (a batch
            // of one flow's packets, or of flows that share a megaflow, probes once).
            let mut same: u32 = 0;
            let mut prev: Option<usize> = None;
            let compare = st.agree_off == 0;
            st.agree_off = st.agree_off.saturating_sub(1);
            for i in 0..n {
                if out[i].is_none() {
                    if compare && prev.is_some_and(|p| st.agree(&keys[p], &keys[i])) {
                        same |= 1 << (i % crate::BATCH_SIZE);
                        continue;
                    }
                    let h = st.hash(&keys[i]);
                    hashes[i % crate::BATCH_SIZE] = h;
                    st.prefetch_bucket(h);
                    pending = true;
                    prev = Some(i);
                }
            }
            if compare && same == 0 {
                st.agree_off = AGREE_BACKOFF;
            }
            if !pending {
                return;
            }
            for i in 0..n {
                if out[i].is_none() && same & (1 << (i % crate::BATCH_SIZE)) == 0 {
                    st.prefetch_key(hashes[i % crate::BATCH_SIZE]);
                }
            }
            let mut last: Option<FlowId> = None;
            for i in 0..n {
                if out[i].is_none() {
                    let f = if same & (1 << (i % crate::BATCH_SIZE)) != 0 {
                        last
                    } else {
                        last = st.find(&keys[i], hashes[i % crate::BATCH_SIZE]);
                        last
                    };
                    if let Some(f) = f {
                        st.hits += 1;
                        out[i] = Some(f);
                    }
                }
            }
        }
    }

    /// Whether flow `id`'s megaflow covers `key` (its masked key equals `key` under its mask).
    #[inline]
    pub fn covers(&self, id: FlowId, key: &FlowKey) -> bool {
        let Some(Some(slot)) = self.slots.get(id as usize) else {
            return false;
        };
        self.subtable_by_id(slot.subtable)
            .is_some_and(|st| st.entry_matches(slot.entry as usize, key))
    }

    /// Prefetches flow `id`'s slot (the first step of [`MegaflowTable::covers`]).
    #[inline(always)]
    pub fn prefetch_slot(&self, id: FlowId) {
        if let Some(s) = self.slots.get(id as usize) {
            prefetch(s);
        }
    }

    /// Prefetches flow `id`'s masked key words (the second step of
    /// [`MegaflowTable::covers`]; its slot should be in cache).
    #[inline(always)]
    pub fn prefetch_flow_key(&self, id: FlowId) {
        if let Some(Some(slot)) = self.slots.get(id as usize) {
            if let Some(st) = self.subtable_by_id(slot.subtable) {
                if let Some(w) = st.keys.get(slot.entry as usize * st.idx.len()) {
                    prefetch(w);
                }
            }
        }
    }

    #[inline(always)]
    fn subtable_by_id(&self, id: u32) -> Option<&Subtable> {
        self.subtables.get(self.subtable_pos(id)?)
    }

    #[inline(always)]
    fn subtable_pos(&self, id: u32) -> Option<usize> {
        let pos = *self.pos_of.get(id as usize)? as usize;
        (self.subtables.get(pos)?.id == id).then_some(pos)
    }

    /// The key words some megaflow's mask covers (keys that agree on them fall into the same
    /// megaflow, or none).
    pub fn used_words(&self) -> &[u8] {
        &self.used_words
    }

    /// A number that changes whenever [`MegaflowTable::used_words`] does.
    pub fn used_words_generation(&self) -> u64 {
        self.used_words_gen
    }

    /// Recomputes `used_words` after a subtable came or went.
    fn update_used_words(&mut self) {
        let used: Vec<u8> = (0..KEY_WORDS)
            .filter(|w| self.subtables.iter().any(|st| st.mask.words[*w] != 0))
            .map(|w| u8::try_from(w).unwrap_or(u8::MAX))
            .collect();
        if used != self.used_words {
            self.used_words = used;
            self.used_words_gen += 1;
        }
    }

    /// Recomputes `pos_of` after `subtables` changed order or length.
    fn reindex(&mut self) {
        for (pos, st) in self.subtables.iter().enumerate() {
            if let Some(p) = self.pos_of.get_mut(st.id as usize) {
                *p = u32::try_from(pos).unwrap_or(u32::MAX);
            }
        }
    }

    /// Adds the megaflow `(key & mask, mask)` and returns its id. The caller checked that no
    /// megaflow covers `key` already.
    pub fn insert(&mut self, key: &FlowKey, mask: &FlowKey) -> FlowId {
        let st_id = match self.by_mask.get(mask) {
            Some(id) => *id,
            None => {
                let id = self.free_ids.pop().unwrap_or_else(|| {
                    let id = self.next_id;
                    self.next_id += 1;
                    self.pos_of.push(u32::MAX);
                    id
                });
                self.subtables.push(Subtable::new(id, mask));
                self.pos_of[id as usize] =
                    u32::try_from(self.subtables.len() - 1).unwrap_or(u32::MAX);
                self.by_mask.insert(*mask, id);
                self.update_used_words();
                id
            }
        };
        let flow = match self.free.pop() {
            Some(f) => f,
            None => {
                self.slots.push(None);
                u32::try_from(self.slots.len() - 1).unwrap_or(u32::MAX)
            }
        };
        let pos = self.subtable_pos(st_id).unwrap_or(0);
        let entry = self.subtables[pos].insert(key, flow);
        self.slots[flow as usize] = Some(Slot {
            subtable: st_id,
            entry,
        });
        self.n_flows += 1;
        flow
    }

    /// Removes flow `id`; false if it does not exist.
    pub fn remove(&mut self, id: FlowId) -> bool {
        let Some(Some(slot)) = self.slots.get(id as usize).copied() else {
            return false;
        };
        let Some(pos) = self.subtable_pos(slot.subtable) else {
            return false;
        };
        let st = &mut self.subtables[pos];
        if let Some(moved) = st.remove(slot.entry as usize) {
            if let Some(Some(s)) = self.slots.get_mut(moved as usize) {
                s.entry = slot.entry;
            }
        }
        if st.len() == 0 {
            let st = self.subtables.remove(pos);
            self.by_mask.remove(&st.mask);
            self.free_ids.push(st.id);
            self.reindex();
            self.update_used_words();
        }
        self.slots[id as usize] = None;
        self.free.push(id);
        self.n_flows -= 1;
        true
    }

    /// Flow `id`'s mask and masked key.
    pub fn megaflow(&self, id: FlowId) -> Option<(FlowKey, FlowKey)> {
        let slot = (*self.slots.get(id as usize)?)?;
        let st = self.subtable_by_id(slot.subtable)?;
        Some((st.entry_key(slot.entry as usize), st.mask))
    }

    /// [`MegaflowTable::megaflow`] without copying: writes the flow's key into `key` and
    /// returns its mask in place.
    pub fn megaflow_into(&self, id: FlowId, key: &mut FlowKey) -> Option<&FlowKey> {
        let slot = (*self.slots.get(id as usize)?)?;
        let st = self.subtable_by_id(slot.subtable)?;
        st.entry_key_into(slot.entry as usize, key);
        Some(&st.mask)
    }

    /// Every live flow id.
    pub fn ids(&self) -> impl Iterator<Item = FlowId> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_some())
            .map(|(i, _)| u32::try_from(i).unwrap_or(u32::MAX))
    }

    /// One past the highest flow id ever handed out.
    pub fn id_bound(&self) -> usize {
        self.slots.len()
    }

    /// Whether `id` is a live flow.
    pub fn contains(&self, id: FlowId) -> bool {
        matches!(self.slots.get(id as usize), Some(Some(_)))
    }

    /// Sorts the subtables by hits, most first, and halves the hits, so that the next ranking
    /// weighs the hits since this one over older ones (OVS `dpcls_sort_subtable_vector`).
    pub fn rank(&mut self) {
        self.subtables.sort_by_key(|s| std::cmp::Reverse(s.hits));
        for s in &mut self.subtables {
            s.hits /= 2;
        }
        self.reindex();
    }

    /// The subtables' masks in the order lookups probe them.
    #[cfg(test)]
    fn probe_order(&self) -> Vec<FlowKey> {
        self.subtables.iter().map(|st| st.mask).collect()
    }

    /// Removes every flow.
    pub fn clear(&mut self) {
        let gen = self.used_words_gen + 1;
        *self = MegaflowTable::default();
        self.used_words_gen = gen;
    }
}

#[cfg(test)]
mod tests {
    use packet::key::fields;
    use proptest::prelude::*;

    use super::*;

    fn key(src: u32, dst: u32, port: u16) -> FlowKey {
        let mut k = FlowKey::default();
        k.set_dl_type(0x0800);
        k.set_nw_src(src);
        k.set_nw_dst(dst);
        k.set_nw_proto(17);
        k.set_tp_src(port);
        k
    }

    fn mask_of(fs: &[packet::key::KeyField]) -> FlowKey {
        let mut m = FlowKey::default();
        for f in fs {
            m.set(*f, u128::MAX);
        }
        m
    }

    #[test]
    fn insert_lookup_remove() {
        let mut t = MegaflowTable::new();
        let m = mask_of(&[fields::DL_TYPE, fields::NW_SRC]);
        let a = t.insert(&key(1, 2, 3), &m);
        let b = t.insert(&key(5, 2, 3), &m);
        assert_eq!(t.lookup(&key(1, 9, 9)), Some(a));
        assert_eq!(t.lookup(&key(5, 0, 0)), Some(b));
        assert_eq!(t.lookup(&key(6, 0, 0)), None);
        assert!(t.remove(a));
        assert_eq!(t.lookup(&key(1, 9, 9)), None);
        assert_eq!(t.lookup(&key(5, 0, 0)), Some(b));
        assert!(!t.remove(a));
        assert!(t.remove(b));
        assert_eq!(t.n_subtables(), 0);
        assert!(t.is_empty());
    }

    #[test]
    fn used_words_follow_the_subtables() {
        let mut t = MegaflowTable::new();
        assert!(t.used_words().is_empty());
        let g0 = t.used_words_generation();
        let a = t.insert(&key(1, 2, 3), &mask_of(&[fields::DL_TYPE, fields::NW_SRC]));
        let g1 = t.used_words_generation();
        assert_ne!(g0, g1);
        let words = t.used_words().to_vec();
        assert!(!words.is_empty());
        // Another flow of the same mask changes nothing.
        t.insert(&key(9, 2, 3), &mask_of(&[fields::DL_TYPE, fields::NW_SRC]));
        assert_eq!(t.used_words_generation(), g1);
        let b = t.insert(&key(5, 2, 3), &mask_of(&[fields::DL_TYPE, fields::TP_SRC]));
        assert!(t.used_words().len() > words.len());
        let mut both = mask_of(&[fields::DL_TYPE, fields::NW_SRC, fields::TP_SRC]);
        let want: Vec<u8> = (0u8..45)
            .filter(|w| std::mem::take(&mut both.words[usize::from(*w)]) != 0)
            .collect();
        assert_eq!(t.used_words(), &want[..]);
        assert!(t.remove(b));
        assert_eq!(t.used_words(), &words[..]);
        let g2 = t.used_words_generation();
        t.clear();
        assert!(t.used_words().is_empty());
        assert_ne!(t.used_words_generation(), g2);
        assert!(!t.remove(a));
    }

    #[test]
    fn batch_lookup_agrees_with_single() {
        let mut t = MegaflowTable::new();
        let m1 = mask_of(&[fields::DL_TYPE, fields::NW_SRC]);
        let m2 = mask_of(&[fields::DL_TYPE, fields::NW_DST, fields::TP_SRC]);
        for i in 0..100 {
            t.insert(&key(i, 0, 0), &m1);
            t.insert(&key(1000, i, 7), &m2);
        }
        let keys: Vec<FlowKey> = (0..32).map(|i| key(i * 7, i, 7)).collect();
        let mut out = [None; 32];
        t.lookup_batch(&keys, &mut out);
        for (k, o) in keys.iter().zip(out) {
            assert_eq!(t.lookup(k), o);
        }
    }

    #[test]
    fn rank_probes_the_most_hit_subtable_first() {
        let mut t = MegaflowTable::new();
        let (y, x) = (
            mask_of(&[fields::DL_TYPE, fields::NW_DST]),
            mask_of(&[fields::DL_TYPE, fields::NW_SRC]),
        );
        // Y first: before any ranking, subtables are probed in the order they came.
        let fy = t.insert(&key(0, 1, 0), &y);
        let fx = t.insert(&key(2, 0, 0), &x);
        assert_eq!(t.probe_order(), [y, x]);
        for _ in 0..100 {
            assert_eq!(t.lookup(&key(2, 5, 5)), Some(fx));
        }
        let mut out = [None; 8];
        t.lookup_batch(&[key(2, 7, 7); 8], &mut out);
        assert!(out.iter().all(|o| *o == Some(fx)));
        for _ in 0..5 {
            assert_eq!(t.lookup(&key(9, 1, 9)), Some(fy));
        }
        t.rank();
        assert_eq!(t.probe_order(), [x, y]);
        // The flows are still found where they moved, and can still be removed.
        assert!(t.covers(fx, &key(2, 0, 0)) && t.covers(fy, &key(0, 1, 0)));
        assert_eq!(t.lookup(&key(0, 1, 0)), Some(fy));
        // Ranking follows the traffic: hits since the last ranking outweigh the halved past.
        for _ in 0..200 {
            assert_eq!(t.lookup(&key(9, 1, 9)), Some(fy));
        }
        t.rank();
        assert_eq!(t.probe_order(), [y, x]);
        assert!(t.remove(fx));
        assert_eq!(t.probe_order(), [y]);
        assert_eq!(t.lookup(&key(9, 1, 9)), Some(fy));
    }

    proptest! {
        /// Batches whose neighbouring keys often share a megaflow (the same key, keys that
        /// agree only under one mask, misses) get the answers of single lookups, batch after
        /// batch (so that the comparison's back-off is taken and left again).
        #[test]
        fn batch_lookup_with_repeated_neighbours_agrees_with_single(
            batches in proptest::collection::vec(
                proptest::collection::vec((0u32..6, 0u32..3, 0u16..2), 0..=32),
                1..40,
            ),
        ) {
            let mut t = MegaflowTable::new();
            let m1 = mask_of(&[fields::DL_TYPE, fields::NW_SRC]);
            let m2 = mask_of(&[fields::DL_TYPE, fields::NW_DST, fields::TP_SRC]);
            for src in 0..3 {
                t.insert(&key(src, 0, 0), &m1);
            }
            for dst in 0..2 {
                t.insert(&key(100, dst, 1), &m2);
            }
            for batch in batches {
                // Sources 3 and 4 miss m1 (and hit m2 if dst < 2 and port 1); 5 is mapped to
                // m2's source so that unmasked bits differ between neighbours.
                let keys: Vec<FlowKey> = batch
                    .iter()
                    .map(|(src, dst, port)| key(if *src == 5 { 100 } else { *src }, *dst, *port))
                    .collect();
                let mut out = [None; crate::BATCH_SIZE];
                t.lookup_batch(&keys, &mut out[..keys.len()]);
                for (k, o) in keys.iter().zip(out) {
                    prop_assert_eq!(t.lookup(k), o, "{:?}", k);
                }
            }
        }

        /// Random inserts and removes agree with a plain map from masked key to id.
        #[test]
        fn agrees_with_model(ops in proptest::collection::vec((0u32..64, 0u8..3, any::<bool>()), 1..400)) {
            let masks = [
                mask_of(&[fields::DL_TYPE, fields::NW_SRC]),
                mask_of(&[fields::DL_TYPE, fields::NW_SRC, fields::TP_SRC]),
                mask_of(&[fields::DL_TYPE, fields::NW_SRC, fields::NW_DST]),
            ];
            let mut t = MegaflowTable::new();
            let mut model: Vec<(FlowKey, usize, FlowId)> = Vec::new();
            for (v, mi, add) in ops {
                // Keys of mask `mi` use sources from `64 * mi` so that masks never overlap.
                let k = key(v + u32::from(mi) * 64, 0, 1);
                let m = &masks[usize::from(mi)];
                if add {
                    if t.lookup(&k).is_none() {
                        let id = t.insert(&k, m);
                        model.push((k, usize::from(mi), id));
                    }
                } else if let Some(pos) = model.iter().position(|(mk, _, _)| *mk == k) {
                    let (_, _, id) = model.remove(pos);
                    prop_assert!(t.remove(id));
                }
                prop_assert_eq!(t.len(), model.len());
                if v % 7 == 0 {
                    t.rank();
                }
            }
            for (k, _, id) in &model {
                prop_assert_eq!(t.lookup(k), Some(*id));
                prop_assert!(t.covers(*id, k));
            }
        }
    }
}
