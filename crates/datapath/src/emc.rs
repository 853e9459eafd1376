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
//! # When it is used: measured, not assumed
//!
//! With our megaflow cache an EMC hit is not always cheaper than the megaflow probes it saves:
//! with one subtable it never is, with two it was slower in `pmd_null` (1K flows, rule set
//! `mixed`: 165 against 149 cycles/packet; 256K: 395 against 271), and with eight masks it
//! was faster at 1K flows and slower at 64K (where most lookups miss the EMC's 65,536 slots
//! anyway). So the cache decides from its own cost, per PMD thread:
//! - it is never consulted while the megaflow cache has at most one subtable;
//! - otherwise it runs a **trial**: [`WARM_BATCHES`] batches with the cache (filling it), then
//!   [`TRIAL_BATCHES`] batches timed with it and as many timed without it, the time being the
//!   cycles of the lookup stage (EMC lookups and offers plus megaflow lookups; upcalls and actions
//!   are not counted). The cache stays on for the next [`DECIDED_BATCHES`] batches if it was at
//!   least [`MIN_GAIN_PERCENT`] % cheaper per packet, off otherwise; then the next trial. Trials
//!   cost about 4 % of the batches, timed with two `rdtsc` each; the decided batches are not timed.
//!
//! # Insertion policy (no thrashing at 256K flows)
//!
//! OVS inserts with probability 1/100 and keeps probing a cache that misses 97 % of the time
//! at 256K flows. Here an entry is replaced on a megaflow hit only when its slot is empty or
//! its flow is gone, or one time in [`REPLACE_EVERY`], so a working set larger than the cache
//! keeps a stable resident part instead of evicting it continuously (and the trial turns the
//! cache off when even that does not pay).
//!
//! # Lookups come in batches
//!
//! [`Emc::lookup_batch`] reads a batch's slots, then the candidate flows' slots in the megaflow
//! table, then their key words, prefetching each level for the whole batch before the next, so
//! the cache misses of 32 packets overlap instead of adding up.

use packet::key::FlowKey;

use crate::cycles::prefetch;
use crate::megaflow::{FlowId, MegaflowTable};
use crate::BATCH_SIZE;

/// Entries by default (a power of two).
pub const DEFAULT_ENTRIES: usize = 1 << 16;
/// Batches with the cache, untimed, that start a trial (they fill it).
pub const WARM_BATCHES: u32 = 512;
/// Timed batches with, then without, the cache in a trial.
pub const TRIAL_BATCHES: u32 = 1024;
/// Batches between two trials.
pub const DECIDED_BATCHES: u32 = 1 << 16;
/// A timed batch above this many cycles was interrupted and is left out of its trial (a
/// lookup stage of 32 packets takes a few thousand).
pub const MAX_BATCH_CYCLES: u64 = 200_000;
/// How much cheaper per packet the lookup stage must be with the cache for it to stay on.
pub const MIN_GAIN_PERCENT: u64 = 3;
/// An occupied slot of a live flow is replaced once in this many chances.
pub const REPLACE_EVERY: u32 = 32;

/// The key hash the cache is indexed by: over `words`, the words some megaflow's mask
/// covers ([`MegaflowTable::used_words`]). Keys that agree there fall into the same megaflow,
/// so hashing the other words would only cost time (17 words in a serial multiply chain were
/// most of an EMC hit's cost); a collision is caught by the megaflow check anyway.
#[inline(always)]
pub fn key_hash(key: &FlowKey, words: &[u8]) -> u32 {
    crate::megaflow::hash_words(key, words, 0x51_7cc1_b727_220a)
}

/// The flow of an occupied slot.
#[inline(always)]
fn slot_flow(v: u64) -> FlowId {
    ((v & 0xffff_ffff) as u32).wrapping_sub(1)
}

/// Whether the cache is consulted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmcMode {
    /// Consulted while its trials say it pays.
    Auto,
    /// Never consulted.
    Off,
}

/// Where the cost-based policy stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Filling the cache for a trial: `left` batches with it, untimed.
    Warm { left: u32 },
    /// Timed batches with the cache.
    With { left: u32 },
    /// Timed batches without it.
    Without { left: u32 },
    /// The trial's outcome holds for `left` more batches.
    Decided { on: bool, left: u32 },
}

/// The exact-match cache of one PMD thread.
#[derive(Debug)]
pub struct Emc {
    entries: Box<[u64]>,
    mode: EmcMode,
    phase: Phase,
    /// Cycles and packets of the current trial, with and without the cache.
    with: (u64, u64),
    without: (u64, u64),
    /// Outcome of the last trial (on until the first trial says otherwise).
    last_on: bool,
    /// The megaflow table's `used_words_generation` the entries were hashed under.
    words_gen: u64,
    /// Whether the batch [`Emc::worth_it`] last admitted belongs to a trial (a batch it turned
    /// away because of the megaflow table's shape does not, whatever the phase).
    timed: bool,
    replace_tick: u32,
}

impl Emc {
    /// A cache of `entries` slots (rounded up to a power of two, at least 16).
    pub fn new(entries: usize, mode: EmcMode) -> Emc {
        let n = entries.max(16).next_power_of_two();
        Emc {
            entries: vec![0; n].into_boxed_slice(),
            mode,
            phase: Phase::Warm { left: WARM_BATCHES },
            with: (0, 0),
            without: (0, 0),
            last_on: true,
            words_gen: 0,
            timed: false,
            replace_tick: 0,
        }
    }

    /// Whether this batch should use the cache, given the megaflow table's shape. Call once
    /// per batch, before its lookups; if [`Emc::timing`] then says so, report the lookup
    /// stage's cycles with [`Emc::account`].
    #[inline]
    pub fn worth_it(&mut self, megaflows: &MegaflowTable) -> bool {
        self.timed = false;
        if self.mode == EmcMode::Off || megaflows.n_subtables() <= 1 {
            return false;
        }
        if megaflows.used_words_generation() != self.words_gen {
            // The entries were hashed over other words: they would only miss and hold slots.
            self.words_gen = megaflows.used_words_generation();
            self.clear();
        }
        // Phase changes that a batch count ends happen here, before the batch is admitted, so
        // that `timing` describes the batch being admitted.
        match self.phase {
            Phase::Warm { left: 0 } => {
                self.phase = Phase::With {
                    left: TRIAL_BATCHES,
                }
            }
            Phase::Decided { left: 0, .. } => self.phase = Phase::Warm { left: WARM_BATCHES },
            _ => {}
        }
        self.timed = matches!(self.phase, Phase::With { .. } | Phase::Without { .. });
        match &mut self.phase {
            Phase::Warm { left } => {
                *left -= 1;
                true
            }
            Phase::With { .. } => true,
            Phase::Without { .. } => false,
            Phase::Decided { on, left } => {
                *left -= 1;
                *on
            }
        }
    }

    /// Whether the batch just admitted by [`Emc::worth_it`] is timed (a trial's).
    #[inline]
    pub fn timing(&self) -> bool {
        self.timed
    }

    /// Reports the lookup stage of a timed batch: `cycles` for `packets` packets.
    pub fn account(&mut self, cycles: u64, packets: usize) {
        // A batch that took longer than any lookup stage can was interrupted (another thread
        // took the core): it says nothing about the cache, so it counts as no packets.
        let (cycles, packets) = if cycles > MAX_BATCH_CYCLES {
            (0, 0)
        } else {
            (cycles, packets as u64)
        };
        match &mut self.phase {
            Phase::With { left } => {
                self.with.0 += cycles;
                self.with.1 += packets;
                *left -= 1;
                if *left == 0 {
                    self.phase = Phase::Without {
                        left: TRIAL_BATCHES,
                    };
                }
            }
            Phase::Without { left } => {
                self.without.0 += cycles;
                self.without.1 += packets;
                *left -= 1;
                if *left == 0 {
                    self.decide();
                }
            }
            Phase::Warm { .. } | Phase::Decided { .. } => {}
        }
    }

    /// Ends a trial: on if the cache made the lookup stage cheaper per packet by at least
    /// [`MIN_GAIN_PERCENT`] %.
    fn decide(&mut self) {
        let (wc, wp) = self.with;
        let (nc, np) = self.without;
        // with/wp < without/np * (1 - gain), cross-multiplied (u128: no overflow).
        let on = wp > 0
            && np > 0
            && u128::from(wc) * u128::from(np) * 100
                < u128::from(nc) * u128::from(wp) * u128::from(100 - MIN_GAIN_PERCENT);
        self.last_on = on;
        self.with = (0, 0);
        self.without = (0, 0);
        self.phase = Phase::Decided {
            on,
            left: DECIDED_BATCHES,
        };
    }

    /// Whether the last trial turned the cache off (it did not pay).
    pub fn is_off(&self) -> bool {
        self.mode == EmcMode::Off || !self.last_on
    }

    #[inline(always)]
    fn slot(&self, hash: u32) -> usize {
        (hash as usize) & (self.entries.len() - 1)
    }

    /// The flow cached for `key` (with hash `hash`), checked against the megaflow table.
    #[inline]
    pub fn lookup(&self, hash: u32, key: &FlowKey, megaflows: &MegaflowTable) -> Option<FlowId> {
        self.candidate(hash)
            .filter(|flow| megaflows.covers(*flow, key))
    }

    /// The flow in `hash`'s slot if the slot holds `hash`, not yet checked against the
    /// megaflow table.
    #[inline(always)]
    fn candidate(&self, hash: u32) -> Option<FlowId> {
        let v = self.entries[self.slot(hash)];
        (v != 0 && (v >> 32) as u32 == hash).then(|| slot_flow(v))
    }

    /// Looks up a batch: `found[i]` becomes the flow cached for `keys[i]` (hash `hashes[i]`)
    /// if its megaflow still covers the key, and is left alone otherwise. Returns the hits.
    /// Each level (slots, then the flows' slots, then their key words) is prefetched for the
    /// whole batch before it is read.
    #[inline]
    pub fn lookup_batch(
        &self,
        hashes: &[u32],
        keys: &[FlowKey],
        megaflows: &MegaflowTable,
        found: &mut [Option<FlowId>],
    ) -> usize {
        let n = hashes
            .len()
            .min(keys.len())
            .min(found.len())
            .min(BATCH_SIZE);
        for &h in &hashes[..n] {
            prefetch(&self.entries[self.slot(h)]);
        }
        let mut cand = [FlowId::MAX; BATCH_SIZE];
        for i in 0..n {
            if let Some(f) = self.candidate(hashes[i]) {
                cand[i] = f;
                megaflows.prefetch_slot(f);
            }
        }
        for &f in cand[..n].iter().filter(|f| **f != FlowId::MAX) {
            megaflows.prefetch_flow_key(f);
        }
        let mut hits = 0;
        for i in 0..n {
            if cand[i] != FlowId::MAX && megaflows.covers(cand[i], &keys[i]) {
                found[i] = Some(cand[i]);
                hits += 1;
            }
        }
        hits
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
        let h = key_hash(&k, t.used_words());
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

    /// Runs one trial in which a timed batch costs `with` cycles with the cache and `without`
    /// without it; returns how many of the next `DECIDED_BATCHES` batches use the cache.
    fn trial(emc: &mut Emc, t: &MegaflowTable, with: u64, without: u64) -> usize {
        for _ in 0..WARM_BATCHES {
            assert!(emc.worth_it(t));
            assert!(!emc.timing());
        }
        for _ in 0..TRIAL_BATCHES {
            assert!(emc.worth_it(t));
            assert!(emc.timing());
            emc.account(with, 32);
        }
        for _ in 0..TRIAL_BATCHES {
            assert!(!emc.worth_it(t));
            assert!(emc.timing());
            emc.account(without, 32);
        }
        (0..DECIDED_BATCHES)
            .filter(|_| {
                let on = emc.worth_it(t);
                assert!(!emc.timing());
                on
            })
            .count()
    }

    #[test]
    fn the_cache_stays_on_only_while_its_trials_say_it_pays() {
        let (t, _) = table_with_two_masks();
        let mut emc = Emc::new(64, EmcMode::Auto);
        assert!(!emc.is_off());
        // 3 % cheaper is not enough; 5 % is.
        assert_eq!(trial(&mut emc, &t, 97 * 32, 100 * 32), 0);
        assert!(emc.is_off());
        assert_eq!(
            trial(&mut emc, &t, 95 * 32, 100 * 32),
            DECIDED_BATCHES as usize
        );
        assert!(!emc.is_off());
        // The traffic changes: the next trial turns it off again.
        assert_eq!(trial(&mut emc, &t, 200 * 32, 150 * 32), 0);
        assert!(emc.is_off());
    }

    #[test]
    fn batches_with_one_subtable_are_not_timed() {
        let (t, _) = table_with_two_masks();
        let mut one = MegaflowTable::new();
        let mut m = FlowKey::default();
        m.set(fields::DL_TYPE, u128::MAX);
        one.insert(&key(1), &m);
        let mut emc = Emc::new(64, EmcMode::Auto);
        for _ in 0..WARM_BATCHES {
            emc.worth_it(&t);
        }
        assert!(emc.worth_it(&t) && emc.timing());
        emc.account(100, 32);
        // The megaflows shrink to one mask mid-trial: those batches are neither used nor timed.
        assert!(!emc.worth_it(&one));
        assert!(!emc.timing());
        assert!(emc.worth_it(&t) && emc.timing());
    }

    #[test]
    fn an_interrupted_batch_does_not_sway_a_trial() {
        let (t, _) = table_with_two_masks();
        let mut emc = Emc::new(64, EmcMode::Auto);
        for _ in 0..WARM_BATCHES {
            emc.worth_it(&t);
        }
        // With the cache: 100 cycles a packet, but one batch was preempted for 10 ms.
        for b in 0..TRIAL_BATCHES {
            assert!(emc.worth_it(&t));
            emc.account(if b == 7 { 30_000_000 } else { 100 * 32 }, 32);
        }
        for _ in 0..TRIAL_BATCHES {
            assert!(!emc.worth_it(&t));
            emc.account(150 * 32, 32);
        }
        assert!(emc.worth_it(&t));
        assert!(!emc.is_off());
    }

    /// A table of `n` live flows, one per IPv4 source `0..n` (and a second mask, so that the
    /// cache would be consulted), with each flow's key and the key's hash.
    fn many_flows(n: u32) -> (MegaflowTable, Vec<(FlowKey, u32, FlowId)>) {
        let (mut t, _) = table_with_two_masks();
        let mut m = FlowKey::default();
        m.set(fields::DL_TYPE, u128::MAX);
        m.set(fields::NW_SRC, u128::MAX);
        // Sources from 100 up: `table_with_two_masks` holds source 1 already.
        let keys: Vec<FlowKey> = (100..100 + n).map(key).collect();
        let ids: Vec<FlowId> = keys.iter().map(|k| t.insert(k, &m)).collect();
        let flows = keys
            .iter()
            .zip(ids)
            .map(|(k, id)| (*k, key_hash(k, t.used_words()), id))
            .collect();
        (t, flows)
    }

    /// One packet of each flow, in order, as the PMD handles them: a lookup, then an offer
    /// after a miss (the megaflow hit). Returns the hits.
    fn pass(emc: &mut Emc, t: &MegaflowTable, flows: &[(FlowKey, u32, FlowId)]) -> usize {
        let mut hits = 0;
        for (k, h, id) in flows {
            match emc.lookup(*h, k, t) {
                Some(found) => {
                    assert_eq!(found, *id);
                    hits += 1;
                }
                None => emc.offer(*h, *id, t),
            }
        }
        hits
    }

    #[test]
    fn four_times_more_flows_than_slots_keep_a_resident_part_hitting() {
        // 256 flows round-robin over 64 slots: about four flows per slot. Replacing on every
        // offer would evict each slot's flow before it comes back (only the few slots that one
        // flow alone maps to would hit); the policy keeps one resident flow per slot, so
        // nearly every occupied slot hits once a pass.
        let (t, flows) = many_flows(256);
        let mut emc = Emc::new(64, EmcMode::Auto);
        let slots: std::collections::HashSet<usize> =
            flows.iter().map(|(_, h, _)| emc.slot(*h)).collect();
        pass(&mut emc, &t, &flows);
        for round in 0..20 {
            let hits = pass(&mut emc, &t, &flows);
            assert!(
                hits * 4 >= slots.len() * 3,
                "round {round}: {hits} hits for {} occupied slots",
                slots.len()
            );
        }
    }

    #[test]
    fn a_new_flow_gets_into_a_full_cache_eventually() {
        let (t, flows) = many_flows(1024);
        let mut emc = Emc::new(64, EmcMode::Auto);
        // Fill every slot with a live flow.
        let (resident, newcomer) = flows.split_at(1000);
        pass(&mut emc, &t, resident);
        assert!(emc.entries.iter().all(|v| *v != 0));
        // A new flow whose slot holds a live flow: each of its packets offers it, and one of
        // the next `REPLACE_EVERY` offers takes the slot.
        let (k, h, id) = newcomer[0];
        let (occupant, _, occupant_id) = *resident
            .iter()
            .find(|(_, rh, _)| emc.slot(*rh) == emc.slot(h) && emc.candidate(*rh).is_some())
            .expect("some resident flow holds the newcomer's slot");
        assert!(t.contains(occupant_id));
        let offers = (1..=REPLACE_EVERY)
            .find(|_| {
                emc.offer(h, id, &t);
                emc.lookup(h, &k, &t).is_some()
            })
            .expect("the new flow got in");
        assert_eq!(emc.lookup(h, &k, &t), Some(id), "after {offers} offers");
        let occupant_hash = key_hash(&occupant, t.used_words());
        assert_eq!(emc.lookup(occupant_hash, &occupant, &t), None);
    }

    #[test]
    fn batch_lookup_agrees_with_single_lookups() {
        let (mut t, id) = table_with_two_masks();
        let mut emc = Emc::new(1 << 16, EmcMode::Auto);
        let k = key(1);
        emc.offer(key_hash(&k, t.used_words()), id, &t);
        // Keys 0..32: key 1 hits; the others miss (empty slot, other hash, or a stale entry
        // whose key differs).
        let keys: Vec<FlowKey> = (0..32).map(key).collect();
        let hashes: Vec<u32> = keys.iter().map(|k| key_hash(k, t.used_words())).collect();
        for (i, h) in hashes.iter().enumerate().skip(2).step_by(3) {
            emc.entries[emc.slot(*h)] = (u64::from(*h) << 32) | (u64::from(id) + 1);
            assert_ne!(keys[i], k);
        }
        let mut found = vec![None; keys.len()];
        assert_eq!(emc.lookup_batch(&hashes, &keys, &t, &mut found), 1);
        for (i, f) in found.iter().enumerate() {
            assert_eq!(*f, emc.lookup(hashes[i], &keys[i], &t), "key {i}");
        }
        assert_eq!(found[1], Some(id));
        // A hit already found by the caller is left alone, and a removed flow misses.
        t.remove(id);
        let mut found = vec![Some(7); keys.len()];
        assert_eq!(emc.lookup_batch(&hashes, &keys, &t, &mut found), 0);
        assert!(found.iter().all(|f| *f == Some(7)));
    }
}
