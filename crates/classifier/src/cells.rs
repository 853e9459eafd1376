//! [`Cells`]: a subtable's hash table, entries stored in place, laid out so that a batch of
//! lookups can load every key's home cell before comparing any.
//!
//! Open addressing with linear probing over a power-of-two array of `Option<E>` (an entry
//! holds an `Arc`, so a cell is no larger than the entry), with one tag byte per cell beside
//! it (`0` for empty, else eight bits of the hash with the top bit set). A hash's home cell is
//! its upper 32 bits modulo the number of cells; the table is at most half full, so most
//! entries sit in their home cell. A probe walks the tags (64 cells' worth per cache line:
//! 512 KB at 256K rules, so mostly cached) and reads a cell only where the tag matches, so a
//! miss rarely reads an entry and a hit usually reads one cell. A batch of lookups first loads,
//! for every key, the home cell whose tag matches ([`Cells::home`]), before any comparison
//! waits on one (the tags are small enough to be cached, the cells are not). A removal shifts
//! the following cells of its run back (no tombstones). The table does not store hashes:
//! growth and removal ask the caller for an entry's hash (`hash_of`), which subtables
//! recompute from the entry's value words without reading the rule.
//!
//! Written by hand rather than with `hashbrown`: hashbrown's entry address depends on its
//! control group's contents, and it offers no way to load a key's entry ahead of its probe.

/// The open-addressing table of one subtable (see the module documentation).
#[derive(Debug, Clone)]
pub(crate) struct Cells<E> {
    cells: Vec<Option<E>>,
    /// One tag per cell: `0` if empty, else [`tag`] of the entry's hash.
    tags: Vec<u8>,
    n: usize,
}

impl<E> Default for Cells<E> {
    fn default() -> Self {
        Cells {
            cells: Vec::new(),
            tags: Vec::new(),
            n: 0,
        }
    }
}

/// Fewest cells a non-empty table has.
const MIN_CELLS: usize = 8;

/// The tag of `hash`: eight bits the home position does not use, with the top bit set (never
/// 0, nor any other value below `0x80` that a table may give a meaning).
#[inline]
#[allow(clippy::cast_possible_truncation)] // Eight bits on purpose.
pub(crate) fn tag(hash: u64) -> u8 {
    (hash >> 24) as u8 | 0x80
}

/// The home cell of `hash` in a table of `mask + 1` cells (a power of two).
#[inline]
#[allow(clippy::cast_possible_truncation)] // Masked to the table size.
pub(crate) fn home(hash: u64, mask: usize) -> usize {
    ((hash >> 32) as usize) & mask
}

/// Stores `e` in `cell`, which its tag says is empty, without reading the cell first.
///
/// `*cell = Some(e)` would load the cell to drop what it held: for a table larger than the
/// caches that load is a cache miss the insert waits on (a fifth of a bundle's commit time,
/// measured), whereas a plain store does not stall. The old value (`None`) is forgotten, so
/// the compiler drops the load.
#[inline]
fn put<E>(cell: &mut Option<E>, e: E) {
    debug_assert!(cell.is_none(), "storing into an occupied cell");
    std::mem::forget(cell.replace(e));
}

impl<E> Cells<E> {
    #[inline]
    fn mask(&self) -> usize {
        self.cells.len().wrapping_sub(1)
    }

    #[inline]
    fn home_of(&self, hash: u64) -> usize {
        home(hash, self.mask())
    }

    /// Number of entries.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.n
    }

    /// The entry in `hash`'s home cell if that cell's tag is `hash`'s: the cell a probe for
    /// `hash` reads first (after the tag) when the entry sits at home.
    #[inline]
    pub(crate) fn home(&self, hash: u64) -> Option<&E> {
        if self.cells.is_empty() {
            return None;
        }
        let b = self.home_of(hash);
        if self.tags[b] != tag(hash) {
            return None;
        }
        self.cells[b].as_ref()
    }

    /// The position of the first entry on `hash`'s probe sequence for which `is` holds. Walks
    /// the tags and reads a cell only where the tag matches.
    #[inline]
    pub(crate) fn find(&self, hash: u64, is: impl FnMut(&E) -> bool) -> Option<usize> {
        if self.cells.is_empty() {
            return None;
        }
        self.find_from(self.home_of(hash), tag(hash), is)
    }

    #[inline]
    fn find_from(&self, mut b: usize, want: u8, mut is: impl FnMut(&E) -> bool) -> Option<usize> {
        let mask = self.mask();
        loop {
            match self.tags[b] {
                0 => return None,
                t if t == want && self.cells[b].as_ref().is_some_and(&mut is) => return Some(b),
                _ => b = (b + 1) & mask,
            }
        }
    }

    /// The entry at position `at` (from [`Cells::find`]).
    #[inline]
    pub(crate) fn get(&self, at: usize) -> Option<&E> {
        self.cells.get(at)?.as_ref()
    }

    /// The entry at position `at`, mutably.
    #[inline]
    pub(crate) fn get_mut(&mut self, at: usize) -> Option<&mut E> {
        self.cells.get_mut(at)?.as_mut()
    }

    /// Adds `e` with hash `hash` (its match is not present yet), growing the table if
    /// needed; `hash_of` gives the hash of an entry already there.
    pub(crate) fn insert(&mut self, hash: u64, e: E, hash_of: impl Fn(&E) -> u64) {
        if (self.n + 1) * 2 > self.cells.len() {
            self.grow(&hash_of);
        }
        let mask = self.mask();
        let mut b = self.home_of(hash);
        while self.tags[b] != 0 {
            b = (b + 1) & mask;
        }
        put(&mut self.cells[b], e);
        self.tags[b] = tag(hash);
        self.n += 1;
    }

    fn grow(&mut self, hash_of: &impl Fn(&E) -> u64) {
        let len = (self.cells.len() * 2).max(MIN_CELLS);
        let mut cells = Vec::with_capacity(len);
        cells.resize_with(len, || None);
        let old = std::mem::replace(&mut self.cells, cells);
        self.tags = vec![0; len];
        let mask = self.mask();
        for e in old.into_iter().flatten() {
            let hash = hash_of(&e);
            let mut b = self.home_of(hash);
            while self.tags[b] != 0 {
                b = (b + 1) & mask;
            }
            put(&mut self.cells[b], e);
            self.tags[b] = tag(hash);
        }
    }

    /// Removes and returns the entry at position `at`; `hash_of` gives the hash of an entry.
    pub(crate) fn remove(&mut self, at: usize, hash_of: impl Fn(&E) -> u64) -> Option<E> {
        let removed = self.cells.get_mut(at)?.take()?;
        self.tags[at] = 0;
        self.n -= 1;
        // Backward shift: move each following entry of the run into the hole unless its home
        // lies cyclically within (hole, j].
        let mask = self.mask();
        let mut hole = at;
        let mut j = at;
        loop {
            j = (j + 1) & mask;
            let Some(e) = &self.cells[j] else {
                break;
            };
            let home = self.home_of(hash_of(e));
            let stays = if hole <= j {
                hole < home && home <= j
            } else {
                hole < home || home <= j
            };
            if !stays {
                self.cells[hole] = self.cells[j].take();
                self.tags[hole] = std::mem::take(&mut self.tags[j]);
                hole = j;
            }
        }
        Some(removed)
    }

    /// Every entry, in table order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &E> {
        self.cells.iter().flatten()
    }

    /// Number of cells.
    #[inline]
    pub(crate) fn n_cells(&self) -> usize {
        self.cells.len()
    }

    /// Bytes of the cell and tag arrays.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.cells.capacity() * std::mem::size_of::<Option<E>>() + self.tags.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random inserts and removes, many hashes sharing a home cell, checked against a map.
    #[test]
    fn cells_random_churn_finds_exactly_the_live_entries() {
        use rand::rngs::SmallRng;
        use rand::{Rng, SeedableRng};
        // Entries are (key, hash); few distinct homes make long runs that wrap around.
        let hash_of = |e: &(u64, u64)| e.1;
        let mut rng = SmallRng::seed_from_u64(7);
        let mut c: Cells<(u64, u64)> = Cells::default();
        let mut live: std::collections::HashMap<u64, u64> = Default::default();
        for step in 0..20_000u64 {
            if rng.gen_bool(0.6) || live.is_empty() {
                let h = (rng.gen_range(0..64u64) << 32) | u64::from(rng.gen::<u32>());
                c.insert(h, (step, h), hash_of);
                live.insert(step, h);
            } else {
                let k = *live.keys().nth(rng.gen_range(0..live.len())).unwrap();
                let h = live.remove(&k).unwrap();
                let at = c.find(h, |e| e.0 == k).unwrap();
                assert_eq!(c.remove(at, hash_of), Some((k, h)));
                assert_eq!(c.find(h, |e| e.0 == k), None);
            }
            if step % 997 == 0 {
                for (k, h) in &live {
                    let at = c.find(*h, |e| e.0 == *k).unwrap();
                    assert_eq!(c.get(at), Some(&(*k, *h)));
                }
            }
        }
        assert_eq!(c.len(), live.len());
        assert_eq!(c.iter().count(), live.len());
    }
}
