//! The exact-match cache: one PMD thread's direct-mapped map from a packet's key hash to the
//! megaflow it fell into last time (the role of OVS's EMC, built like its SMC).
//!
//! # How it differs from OVS's EMC, and why
//!
//! An entry is 8 bytes, `hash << 32 | flow + 1`: no copy of the key. A hit is checked by
//! asking the megaflow cache whether the flow's masked key still covers the packet's key
//! ([`MegaflowTable::covers`]), which is exact (megaflows do not overlap) and costs one key
//! line. So a stale entry (a removed or reused flow id) is harmless: it fails the check.
//! With no key copies, 65,536 entries take 512 KiB, where OVS's 8,192 entries take several
//! megabytes, and no flow is ever copied into the cache.
//!
//! # Insertion policy (no thrashing at 256K flows)
//!
//! OVS inserts with probability 1/100 and keeps probing a cache that misses 97 % of the time
//! at 256K flows. Here the cache watches its own hit ratio per epoch of lookups:
//! - it is consulted only when the megaflow cache has more than one subtable ([`Emc::worth_it`];
//!   with one subtable a megaflow probe costs what an EMC probe costs);
//! - an epoch whose hit ratio falls below [`MIN_HIT_PERMILLE`] turns the cache to *sampling*: only
//!   one batch in [`SAMPLE_EVERY`] looks up and inserts, which is enough to notice when the traffic
//!   becomes cacheable again; an epoch above the threshold turns it back on.
//! - an entry is replaced on a megaflow hit only when its slot is empty or its flow is gone, or one
//!   time in [`REPLACE_EVERY`], so a working set larger than the cache keeps a stable resident part
//!   instead of evicting it continuously.

use packet::key::{FlowKey, KEY_WORDS};

use crate::megaflow::{FlowId, MegaflowTable};

/// Entries by default (a power of two).
pub const DEFAULT_ENTRIES: usize = 1 << 16;
/// Lookups per epoch of the adaptive policy.
pub const EPOCH_LOOKUPS: u64 = 1 << 18;
/// Hit ratio (per mille) below which the cache only samples.
pub const MIN_HIT_PERMILLE: u64 = 100;
/// In sampling mode, one batch in this many uses the cache.
pub const SAMPLE_EVERY: u64 = 16;
/// An occupied slot of a live flow is replaced once in this many chances.
pub const REPLACE_EVERY: u32 = 32;

/// Key words the cache hashes: in_port's word and the packet's L2-L4 words.
const HASHED_WORDS: [u8; 17] = [
    0, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44,
];
const _: () = assert!(KEY_WORDS == 45);
const ALL_BITS: [u64; 17] = [u64::MAX; 17];

/// The key hash the cache is indexed by (the megaflow cache's hash over in_port and the
/// packet's L2-L4 words).
#[inline(always)]
pub fn key_hash(key: &FlowKey) -> u32 {
    crate::megaflow::hash_masked(key, &HASHED_WORDS, &ALL_BITS, 0x51_7cc1_b727_220a)
}

/// The flow of an occupied slot.
#[inline(always)]
fn slot_flow(v: u64) -> FlowId {
    ((v & 0xffff_ffff) as u32).wrapping_sub(1)
}

/// Whether the cache is consulted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmcMode {
    /// Consulted on every batch (while it pays).
    Auto,
    /// Never consulted.
    Off,
}

/// The exact-match cache of one PMD thread.
#[derive(Debug)]
pub struct Emc {
    entries: Box<[u64]>,
    mode: EmcMode,
    sampling: bool,
    batches: u64,
    epoch_lookups: u64,
    epoch_hits: u64,
    replace_tick: u32,
}

impl Emc {
    /// A cache of `entries` slots (rounded up to a power of two, at least 16).
    pub fn new(entries: usize, mode: EmcMode) -> Emc {
        let n = entries.max(16).next_power_of_two();
        Emc {
            entries: vec![0; n].into_boxed_slice(),
            mode,
            sampling: false,
            batches: 0,
            epoch_lookups: 0,
            epoch_hits: 0,
            replace_tick: 0,
        }
    }

    /// Whether this batch should use the cache, given the megaflow table's shape. Call once
    /// per batch.
    #[inline]
    pub fn worth_it(&mut self, megaflows: &MegaflowTable) -> bool {
        self.batches = self.batches.wrapping_add(1);
        self.mode == EmcMode::Auto
            && megaflows.n_subtables() > 1
            && (!self.sampling || self.batches % SAMPLE_EVERY == 0)
    }

    /// Whether the cache is in its sampling mode (the last epoch did not pay).
    pub fn is_sampling(&self) -> bool {
        self.sampling
    }

    #[inline(always)]
    fn slot(&self, hash: u32) -> usize {
        (hash as usize) & (self.entries.len() - 1)
    }

    /// The flow cached for `key` (with hash `hash`), checked against the megaflow table.
    #[inline]
    pub fn lookup(
        &mut self,
        hash: u32,
        key: &FlowKey,
        megaflows: &MegaflowTable,
    ) -> Option<FlowId> {
        self.epoch_lookups += 1;
        let v = self.entries[self.slot(hash)];
        let hit = if v != 0 && (v >> 32) as u32 == hash {
            let flow = slot_flow(v);
            megaflows.covers(flow, key).then_some(flow)
        } else {
            None
        };
        if hit.is_some() {
            self.epoch_hits += 1;
        }
        if self.epoch_lookups >= EPOCH_LOOKUPS {
            self.sampling = self.epoch_hits * 1000 < self.epoch_lookups * MIN_HIT_PERMILLE;
            self.epoch_lookups = 0;
            self.epoch_hits = 0;
        }
        hit
    }

    /// Offers `flow` for `key`'s slot after a megaflow hit or an upcall.
    #[inline]
    pub fn offer(&mut self, hash: u32, flow: FlowId, megaflows: &MegaflowTable) {
        let s = self.slot(hash);
        let v = self.entries[s];
        let replace = v == 0 || !megaflows.contains(slot_flow(v)) || {
            self.replace_tick = self.replace_tick.wrapping_add(1);
            self.replace_tick % REPLACE_EVERY == 0
        };
        if replace {
            self.entries[s] = (u64::from(hash) << 32) | (u64::from(flow) + 1);
        }
    }

    /// Forgets every entry (after a revalidation removed flows, entries fail their check
    /// anyway; this only frees the slots).
    pub fn clear(&mut self) {
        self.entries.fill(0);
    }

    /// Bytes held.
    pub fn memory(&self) -> usize {
        self.entries.len() * 8
    }
}

#[cfg(test)]
mod tests {
    use packet::key::fields;

    use super::*;

    fn key(i: u32) -> FlowKey {
        let mut k = FlowKey::default();
        k.set_dl_type(0x0800);
        k.set_nw_src(i);
        k
    }

    fn table_with_two_masks() -> (MegaflowTable, FlowId) {
        let mut t = MegaflowTable::new();
        let mut m = FlowKey::default();
        m.set(fields::DL_TYPE, u128::MAX);
        m.set(fields::NW_SRC, u128::MAX);
        let id = t.insert(&key(1), &m);
        let mut m2 = FlowKey::default();
        m2.set(fields::DL_TYPE, u128::MAX);
        m2.set(fields::NW_DST, u128::MAX);
        let mut k2 = key(0);
        k2.set_nw_dst(9);
        t.insert(&k2, &m2);
        (t, id)
    }

    #[test]
    fn hit_is_checked_against_the_megaflow() {
        let (mut t, id) = table_with_two_masks();
        let mut emc = Emc::new(64, EmcMode::Auto);
        assert!(emc.worth_it(&t));
        let k = key(1);
        let h = key_hash(&k);
        assert_eq!(emc.lookup(h, &k, &t), None);
        emc.offer(h, id, &t);
        assert_eq!(emc.lookup(h, &k, &t), Some(id));
        // A key with the same hash but another address fails the check.
        assert_eq!(emc.lookup(h, &key(2), &t), None);
        // The flow goes away: the entry is stale and misses.
        t.remove(id);
        assert_eq!(emc.lookup(h, &k, &t), None);
    }

    #[test]
    fn one_subtable_is_not_worth_it_and_off_is_off() {
        let mut t = MegaflowTable::new();
        let mut m = FlowKey::default();
        m.set(fields::DL_TYPE, u128::MAX);
        t.insert(&key(1), &m);
        assert!(!Emc::new(64, EmcMode::Auto).worth_it(&t));
        let (t2, _) = table_with_two_masks();
        assert!(!Emc::new(64, EmcMode::Off).worth_it(&t2));
    }

    #[test]
    fn a_cache_that_misses_goes_to_sampling_and_back() {
        let (t, id) = table_with_two_masks();
        let mut emc = Emc::new(16, EmcMode::Auto);
        for i in 0..EPOCH_LOOKUPS {
            let k = key(1000 + u32::try_from(i % 1000).unwrap_or(0));
            emc.lookup(key_hash(&k), &k, &t);
        }
        assert!(emc.is_sampling());
        let used = (0..SAMPLE_EVERY * 4).filter(|_| emc.worth_it(&t)).count();
        assert_eq!(used, 4);
        let k = key(1);
        let h = key_hash(&k);
        emc.offer(h, id, &t);
        for _ in 0..EPOCH_LOOKUPS {
            emc.lookup(h, &k, &t);
        }
        assert!(!emc.is_sampling());
    }
}
