//! [`Slots`]: the open-addressing index of a subtable's entries, laid out so that a batch
//! of lookups can load all its keys' first slots before comparing any entry.
//!
//! A slot is one `u64`: `0` when empty, otherwise the upper 32 bits of the entry's hash (its
//! *tag*) above the entry's index plus one. A hash's home slot is its tag modulo the number of
//! slots (a power of two); collisions probe linearly, and a removal shifts the following
//! slots back (no tombstones). The table is at most half full, so a probe usually ends at the
//! home slot, and eight slots share a cache line: a hit reads one slot line and one entry.
//! Written by hand rather than with `hashbrown` for that layout: the home slot's address is
//! known from the hash alone, so [`Slots::home`] is one independent load per key.
//!
//! Growth re-homes the slots from their tags alone, without reading the entries.

/// The open-addressing index of one subtable's entries (see the module documentation).
#[derive(Debug, Default, Clone)]
pub(crate) struct Slots {
    slots: Vec<u64>,
    n: usize,
}

/// Fewest slots a non-empty table has.
const MIN_SLOTS: usize = 8;

#[inline]
fn tag(hash: u64) -> u64 {
    hash >> 32
}

#[inline]
fn slot_value(hash: u64, entry: usize) -> u64 {
    (tag(hash) << 32) | (entry as u64 + 1)
}

/// The entry index of an occupied slot's value.
#[inline]
#[allow(clippy::cast_possible_truncation)] // The low 32 bits hold an index below 2^32.
pub(crate) fn entry_of(v: u64) -> usize {
    (v & 0xffff_ffff) as usize - 1
}

impl Slots {
    #[inline]
    fn mask(&self) -> usize {
        self.slots.len().wrapping_sub(1)
    }

    #[inline]
    #[allow(clippy::cast_possible_truncation)] // Masked to the table size.
    fn home_of(&self, t: u64) -> usize {
        (t as usize) & self.mask()
    }

    /// The value of `hash`'s home slot (`0` if empty or the table has no slots): the first
    /// slot a probe reads. A batch loads it for every key before probing any.
    #[inline]
    pub(crate) fn home(&self, hash: u64) -> u64 {
        if self.slots.is_empty() {
            return 0;
        }
        self.slots[self.home_of(tag(hash))]
    }

    /// True if slot value `v` may belong to `hash` (occupied, same tag).
    #[inline]
    pub(crate) fn may_hold(v: u64, hash: u64) -> bool {
        v != 0 && v >> 32 == tag(hash)
    }

    /// The first entry on `hash`'s probe sequence for which `is` holds.
    #[inline]
    pub(crate) fn find(&self, hash: u64, mut is: impl FnMut(usize) -> bool) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        let t = tag(hash);
        let mask = self.mask();
        let mut b = self.home_of(t);
        loop {
            let v = self.slots[b];
            if v == 0 {
                return None;
            }
            if v >> 32 == t && is(entry_of(v)) {
                return Some(entry_of(v));
            }
            b = (b + 1) & mask;
        }
    }

    /// Adds entry `entry` with hash `hash` (not present yet), growing the table if needed.
    pub(crate) fn insert(&mut self, hash: u64, entry: usize) {
        debug_assert!(entry < u32::MAX as usize, "fewer than 4G entries");
        if (self.n + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let mask = self.mask();
        let mut b = self.home_of(tag(hash));
        while self.slots[b] != 0 {
            b = (b + 1) & mask;
        }
        self.slots[b] = slot_value(hash, entry);
        self.n += 1;
    }

    fn grow(&mut self) {
        let len = (self.slots.len() * 2).max(MIN_SLOTS);
        let old = std::mem::replace(&mut self.slots, vec![0; len]);
        let mask = self.mask();
        for v in old.into_iter().filter(|v| *v != 0) {
            let mut b = self.home_of(v >> 32);
            while self.slots[b] != 0 {
                b = (b + 1) & mask;
            }
            self.slots[b] = v;
        }
    }

    /// The slot holding entry `entry` with hash `hash`.
    fn position(&self, hash: u64, entry: usize) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        let want = slot_value(hash, entry);
        let mask = self.mask();
        let mut b = self.home_of(tag(hash));
        loop {
            match self.slots[b] {
                0 => return None,
                v if v == want => return Some(b),
                _ => b = (b + 1) & mask,
            }
        }
    }

    /// Removes entry `entry` with hash `hash`; false if it was not there.
    pub(crate) fn remove(&mut self, hash: u64, entry: usize) -> bool {
        let Some(mut hole) = self.position(hash, entry) else {
            return false;
        };
        // Backward-shift: move each following slot of the run into the hole if its home
        // does not lie cyclically within (hole, j].
        let mask = self.mask();
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let v = self.slots[j];
            if v == 0 {
                break;
            }
            let home = self.home_of(v >> 32);
            let stays = if hole <= j {
                hole < home && home <= j
            } else {
                hole < home || home <= j
            };
            if !stays {
                self.slots[hole] = v;
                hole = j;
            }
        }
        self.slots[hole] = 0;
        self.n -= 1;
        true
    }

    /// Points the slot of entry `from` (hash `hash`) at entry `to` instead.
    pub(crate) fn renumber(&mut self, hash: u64, from: usize, to: usize) -> bool {
        match self.position(hash, from) {
            Some(b) => {
                self.slots[b] = slot_value(hash, to);
                true
            }
            None => false,
        }
    }

    /// Bytes of the slot array.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.slots.capacity() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random inserts and removes, many hashes sharing a home slot, checked against a map.
    #[test]
    fn slots_random_churn_finds_exactly_the_live_entries() {
        use rand::rngs::SmallRng;
        use rand::{Rng, SeedableRng};
        let mut rng = SmallRng::seed_from_u64(7);
        let mut s = Slots::default();
        let mut live: std::collections::HashMap<usize, u64> = Default::default();
        for step in 0..20_000usize {
            if rng.gen_bool(0.6) || live.is_empty() {
                // Few distinct tags: long runs and wrap-around.
                let h = (rng.gen_range(0..64u64) << 32) | rng.gen::<u32>() as u64;
                s.insert(h, step);
                live.insert(step, h);
            } else {
                let e = *live.keys().nth(rng.gen_range(0..live.len())).unwrap();
                let h = live.remove(&e).unwrap();
                assert!(s.remove(h, e));
                assert!(!s.remove(h, e));
            }
            if step % 997 == 0 {
                for (e, h) in &live {
                    assert_eq!(s.find(*h, |x| x == *e), Some(*e));
                }
            }
        }
        assert_eq!(s.n, live.len());
    }
}
