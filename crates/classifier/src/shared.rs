//! The arrays a subtable's two versions share: its cells, its stage indices and the value
//! words of wide masks. The writer changes them in place while readers of the published
//! version probe them; every word is an atomic (on x86-64 a relaxed or acquire load is a
//! plain load, so a probe costs what it cost in a private array).
//!
//! What a version sees is decided by that version alone: a cell holds a value, and the entry
//! (the rules with that value) lives at the cell's position in each version's own arena
//! ([`Subtable`](crate::subtable::Subtable)), an array beside the cells. A cell whose arena
//! slot is empty in a version is invisible to it. So an insert writes its cell and its stage
//! indices once, for both versions, and the replay of a batch onto the other version only
//! copies arena slots (see the crate documentation). A lookup loads the cell and the arena
//! slot at the same position together: neither load waits on the other.
//!
//! Protocol (one writer, readers of the published version):
//!
//! - **Cells.** The writer fills a cell's words, then publishes its tag with release (tags are kept
//!   eight to a word, and the writer stores the whole word); a reader loads the tags' word, and
//!   where a tag matches, fences with acquire before reading the words. A cell's value never
//!   changes while some version's arena uses its position: a removal empties the arena slot in one
//!   version, the replay in the other, and only then does the cell become a tombstone (`TOMB`),
//!   free for reuse. A reader that meets a cell being reused may read a mix of the old value and
//!   the new one, but the arena slot at that position is empty in its version (emptied in both
//!   before the burial, filled again only in the spare), and a probe that finds a value whose arena
//!   slot is empty goes on probing: a torn read costs at most a longer probe.
//! - **Probes stop only at `EMPTY`.** Cells are never emptied in place: growth copies the live
//!   cells (and drops tombstones) into a new array, which the spare takes at once (its arena moved
//!   along) and the published version at the next replay (its arena moved the same way, from the
//!   growth's record of where each cell went). The writer writes only the newest array; readers of
//!   the old version keep reading the old, frozen one, which holds every cell their version can
//!   see.
//! - **Stage indices** count, per partial hash, the live cells (not the visible entries) with it: a
//!   count rises when a cell is made, before the version that sees it is published, and falls when
//!   the cell becomes a tombstone, after no version sees it. An index is thus a superset of what
//!   any reader's version holds: it may say "present" for a value a reader cannot see (the lookup
//!   then consults one stage more, as an index of 32-bit hashes may anyway), never "absent" for one
//!   it can. Keys whose count fell to zero stay in place (so that probes past them still find what
//!   follows) until the next growth drops them. Readers see a live flag per key; the counts sit in
//!   an array of their own, which only the writer reads and writes.
//! - **Wide values** (masks of more than `N_INLINE` words): a cell keeps the first `N_INLINE`
//!   words, and the rest sit in the cell's *row*, whole cache lines in an array beside the cells at
//!   the cell's position. A row is written with its cell, before the tag, and follows the same
//!   protocol: a lookup finds the cell and its row from the position alone, so their loads go out
//!   together, as the arena slot's does.

use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use crate::hint::{prefetch, zeroed};

/// The tag of `hash`: eight bits the home position does not use, with the top bit set (never
/// `EMPTY`, `TOMB` or any other value below `0x80` that a table may give a meaning).
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

/// Value words kept in a cell, so that a lookup compares them without touching the rule (one
/// cache miss fewer); an exact 5-tuple has four.
pub(crate) const N_INLINE: usize = 4;

/// Every byte's lowest bit, and every byte's highest.
const LOW_BYTES: u64 = 0x0101_0101_0101_0101;
const HIGH_BITS: u64 = 0x8080_8080_8080_8080;

/// The highest bit of each byte of `v` that equals the same byte of `want`, no other bit
/// (exact: no carry crosses a byte).
#[inline(always)]
fn byte_is(v: u64, want: u64) -> u64 {
    let x = v ^ want;
    // A byte's highest bit after the sum is set iff one of its low seven bits is.
    !(((x & !HIGH_BITS) + !HIGH_BITS) | x) & HIGH_BITS
}

/// The tag of an empty cell: 0, so that a zeroed array ([`zeroed`]) is empty.
const EMPTY: u8 = 0;
const TOMB: u8 = 1;
/// Fewest cells (and index slots) a non-empty array has.
pub(crate) const MIN_CELLS: usize = 8;
const _: () = assert!(MIN_CELLS >= 8 && MIN_CELLS.is_power_of_two());

/// One cell: up to `N_INLINE` value words (for wide masks the first `N_INLINE`, the rest in
/// its [`Row`]). 32 bytes: two to a cache line, none across two.
#[derive(Debug, Default)]
#[repr(align(32))]
pub(crate) struct Cell {
    vals: [AtomicU64; N_INLINE],
}

impl Cell {
    /// The value word `k`.
    #[inline]
    pub(crate) fn val(&self, k: usize) -> u64 {
        self.vals[k].load(Ordering::Relaxed)
    }

    /// The first `N` value words, compared with `want`.
    #[inline]
    fn eq_n<const N: usize>(&self, want: &[u64]) -> bool {
        words_eq(self.vals[..N].iter(), want[..N].iter().copied())
    }

    /// True if the cell's first `want.len()` (at most `N_INLINE`) value words are `want`.
    #[inline]
    pub(crate) fn holds(&self, want: &[u64]) -> bool {
        match want.len() {
            0 => true,
            1 => self.eq_n::<1>(want),
            2 => self.eq_n::<2>(want),
            3 => self.eq_n::<3>(want),
            _ => self.eq_n::<4>(want),
        }
    }

    /// The first `N_INLINE` words equal `want`'s first (a wide mask's cell).
    #[inline]
    pub(crate) fn holds_first(&self, want: impl Iterator<Item = u64>) -> bool {
        words_eq(self.vals.iter(), want)
    }
}

/// True if `words` (as far as `want` goes) equal `want`: all loads issued, no early exit (the
/// words share a cache line or two, and a branch per word costs more than the loads).
#[inline(always)]
fn words_eq<'a>(
    words: impl Iterator<Item = &'a AtomicU64>,
    want: impl Iterator<Item = u64>,
) -> bool {
    let mut eq = true;
    for (w, v) in words.zip(want) {
        eq &= w.load(Ordering::Relaxed) == v;
    }
    eq
}

/// Words of a [`Row`].
const ROW_WORDS: usize = 8;

/// A line of a wide mask's row: the value words after a cell's first `N_INLINE`, eight to
/// a cache line (a mask of eleven words, OVS's benchmark's, needs one).
#[derive(Debug, Default)]
#[repr(align(64))]
pub(crate) struct Row {
    vals: [AtomicU64; ROW_WORDS],
}

/// Row lines a cell of a mask of `n` words has: none up to `N_INLINE`.
#[inline]
pub(crate) fn row_lines(n: usize) -> usize {
    n.saturating_sub(N_INLINE).div_ceil(ROW_WORDS)
}

/// A subtable's cells (see the module documentation). A clone shares the arrays (held in
/// place by each version's subtable, so that a probe reaches them in one pointer).
#[derive(Debug, Clone)]
pub(crate) struct SharedCells {
    /// The cells' tags, eight to a word (cell `b`'s in byte `b % 8` of word `b / 8`): a probe
    /// reads eight tags in one load and finds the candidates and the first empty cell among
    /// them with a few word operations ([`byte_is`]) instead of a branch per cell, which a
    /// random hit-or-miss and probe length mispredicted (a miss's probe ends at a random
    /// cell). Only the writer stores them, whole words (see [`SharedCells::set_tag`]).
    tags: Arc<[AtomicU64]>,
    cells: Arc<[Cell]>,
    /// Wide masks: each cell's row, [`row_lines`] lines from the cell's position times that
    /// (none for narrower masks: a growth of their cells allocates no empty array).
    rows: Option<Arc<[Row]>>,
}

impl Default for SharedCells {
    fn default() -> Self {
        SharedCells::with_cells(0, 0)
    }
}

impl SharedCells {
    /// An array of `len` (a power of two, or 0) empty cells for values of `n` words (rows
    /// beside them if `n` is more than `N_INLINE`).
    pub(crate) fn with_cells(len: usize, n: usize) -> Self {
        // A probe reads whole words of eight tags and wraps from the last word to the first:
        // an array's length is a multiple of eight.
        debug_assert!(len == 0 || (len.is_power_of_two() && len >= MIN_CELLS));
        SharedCells {
            // `EMPTY` is 0. Arrays are empty or of at least `MIN_CELLS` (eight) cells.
            tags: zeroed(len.div_ceil(8)),
            cells: zeroed(len),
            rows: (row_lines(n) > 0).then(|| zeroed(len * row_lines(n))),
        }
    }

    /// True if `other` shares these arrays.
    pub(crate) fn same(&self, other: &SharedCells) -> bool {
        Arc::ptr_eq(&self.cells, &other.cells)
    }

    /// Number of cells.
    #[inline]
    pub(crate) fn n_cells(&self) -> usize {
        self.cells.len()
    }

    #[inline]
    fn mask(&self) -> usize {
        self.cells.len().wrapping_sub(1)
    }

    /// True if the words after the first `N_INLINE` of the wide cell at `at` (values of
    /// `want.len() + N_INLINE` words) are `want`'s. False out of range.
    #[inline]
    pub(crate) fn row_holds(&self, at: usize, want: impl ExactSizeIterator<Item = u64>) -> bool {
        self.row(at, want.len().div_ceil(ROW_WORDS))
            .is_some_and(|row| words_eq(row.iter().flat_map(|r| r.vals.iter()), want))
    }

    /// The row of the cell at `at`, of `lines` lines (`None` if out of range or no rows).
    #[inline]
    fn row(&self, at: usize, lines: usize) -> Option<&[Row]> {
        self.rows.as_deref()?.get(at * lines..(at + 1) * lines)
    }

    /// The first line of the row of the wide cell at `at` (values of `n` words), to prefetch.
    #[inline]
    pub(crate) fn row_line(&self, at: usize, n: usize) -> Option<&Row> {
        // Its first line alone, without the row's range (a prefetch per key of a batch).
        self.rows.as_deref()?.get(at * row_lines(n))
    }

    /// The value words of the cell at `at` into `out` (as long as the values: its first
    /// `N_INLINE` from the cell, the rest from its row).
    #[inline]
    pub(crate) fn values(&self, at: usize, out: &mut [u64]) {
        let c = &self.cells[at];
        let (first, rest) = out.split_at_mut(out.len().min(N_INLINE));
        for (k, v) in first.iter_mut().enumerate() {
            *v = c.val(k);
        }
        if rest.is_empty() {
            return;
        }
        let lines = rest.len().div_ceil(ROW_WORDS);
        if let Some(row) = self.row(at, lines) {
            for (v, w) in rest.iter_mut().zip(row.iter().flat_map(|r| r.vals.iter())) {
                *v = w.load(Ordering::Relaxed);
            }
        }
    }

    /// True if the cell at `at` holds the value words `values` (its row too, for a wide
    /// mask).
    #[inline]
    pub(crate) fn holds_at(&self, at: usize, values: &[u64]) -> bool {
        let (first, rest) = values.split_at(values.len().min(N_INLINE));
        self.cells[at].holds(first) && (rest.is_empty() || self.row_holds(at, rest.iter().copied()))
    }

    /// The first position on `hash`'s probe sequence whose tag is `hash`'s and for which `is`
    /// holds. Stops at an empty cell. `home_first`: the caller's table is larger than the
    /// caches (see below). Always inlined: with a one-subtable shortcut in
    /// `RuleSet::lookup_nowc` (one more caller) the compiler made it a call, and OVS's
    /// 1,000-rule set ran 18.5M instructions more in 400,000 lookups; inlined, exact 5-tuple
    /// lookups run 13% fewer.
    #[inline(always)]
    pub(crate) fn find(
        &self,
        hash: u64,
        home_first: bool,
        mut is: impl FnMut(usize, &Cell) -> bool,
    ) -> Option<usize> {
        if self.cells.is_empty() {
            return None;
        }
        let groups = self.tags.len().wrapping_sub(1);
        let want = u64::from(tag(hash)) * LOW_BYTES;
        let b = home(hash, self.mask());
        let mut g = b >> 3;
        // The first group's cells before the home are not on the probe sequence (they come
        // last, after a wrap that never happens while the table has empty cells).
        let mut from = HIGH_BITS << ((b & 7) * 8);
        // With `home_first`, the home cell is checked alone first, by its tag's byte, so that
        // a hit there (most hits) loads its cell and arena slot at a position computed from
        // the hash, on a predicted branch, together with the tags: in a table larger than the
        // caches one round trip to memory, not two. The rest of the probe skips it.
        let mut skip = 0;
        if home_first {
            if let Some((b, c)) = self.home_cell(hash) {
                if is(b, c) {
                    return Some(b);
                }
            }
            skip = 0x80 << ((b & 7) * 8);
        }
        loop {
            // Relaxed, and an acquire fence only where a tag matches: the same ordering for
            // the cells read (a fence after a load that saw a release store synchronises with
            // it, and every store of a tag word is a release after the writes of its cells).
            let v = self.tags[g].load(Ordering::Relaxed);
            let empty = byte_is(v, u64::from(EMPTY) * LOW_BYTES) & from;
            // The matching tags before the first empty cell, in probe order. Their positions
            // come from the tags' word: in a table in the caches that dependency costs less
            // than a branch per cell, which mispredicted where probes end at random cells.
            let mut hits =
                byte_is(v, want) & from & !skip & (empty & empty.wrapping_neg()).wrapping_sub(1);
            while hits != 0 {
                let at = g * 8 + (hits.trailing_zeros() / 8) as usize;
                fence(Ordering::Acquire);
                if is(at, &self.cells[at]) {
                    return Some(at);
                }
                hits &= hits - 1;
            }
            if empty != 0 {
                return None;
            }
            g = (g + 1) & groups;
            from = HIGH_BITS;
            skip = 0;
        }
    }

    /// The home cell of `hash` and its position, if its tag is `hash`'s (what a hit at home
    /// reads first).
    #[inline]
    pub(crate) fn home_cell(&self, hash: u64) -> Option<(usize, &Cell)> {
        if self.cells.is_empty() {
            return None;
        }
        let b = home(hash, self.mask());
        if self.tag_at(b) != tag(hash) {
            return None;
        }
        fence(Ordering::Acquire);
        Some((b, &self.cells[b]))
    }

    /// Prefetches the tags' word and the cell at `hash`'s home, whatever they hold (the
    /// writer's search or insert of `hash` reads them first, as a batch's hit does). Returns
    /// the home.
    #[inline]
    pub(crate) fn touch_home(&self, hash: u64) -> Option<usize> {
        if self.cells.is_empty() {
            return None;
        }
        let b = home(hash, self.mask());
        prefetch(&self.tags[b >> 3]);
        prefetch(&self.cells[b]);
        Some(b)
    }

    /// Writer: the cell an insert of `hash` takes (the first empty cell or tombstone on its
    /// probe sequence; the array has one), and whether it was a tombstone.
    pub(crate) fn free_cell(&self, hash: u64) -> (usize, bool) {
        let groups = self.tags.len().wrapping_sub(1);
        let b = home(hash, self.mask());
        let mut g = b >> 3;
        let mut from = HIGH_BITS << ((b & 7) * 8);
        loop {
            // Live tags have their highest bit set; `EMPTY` and `TOMB` do not.
            let free = !self.tags[g].load(Ordering::Relaxed) & from;
            if free != 0 {
                let at = g * 8 + (free.trailing_zeros() / 8) as usize;
                return (at, self.tag_at(at) == TOMB);
            }
            g = (g + 1) & groups;
            from = HIGH_BITS;
        }
    }

    /// Writer: fills cell `at` (empty or a tombstone) with the value words `vals` (the row
    /// too, for a wide mask), then publishes it under `hash`'s tag.
    pub(crate) fn put(&self, at: usize, hash: u64, vals: &[u64]) {
        let c = &self.cells[at];
        for (w, v) in c.vals.iter().zip(vals) {
            w.store(*v, Ordering::Relaxed);
        }
        if let Some(rest) = vals.get(N_INLINE..).filter(|r| !r.is_empty()) {
            let lines = rest.len().div_ceil(ROW_WORDS);
            let row = self.row(at, lines);
            debug_assert!(row.is_some(), "a wide value in cells without rows");
            let words = row.unwrap_or_default().iter().flat_map(|r| r.vals.iter());
            for (w, v) in words.zip(rest) {
                w.store(*v, Ordering::Relaxed);
            }
        }
        self.set_tag(at, tag(hash));
    }

    /// Writer: makes cell `at` a tombstone.
    pub(crate) fn bury(&self, at: usize) {
        self.set_tag(at, TOMB);
    }

    /// True if the cell at `at` is live (not empty, not a tombstone).
    pub(crate) fn is_live(&self, at: usize) -> bool {
        at < self.cells.len() && self.tag_at(at) > TOMB
    }

    /// Writer: the positions of the live cells.
    pub(crate) fn live(&self) -> impl Iterator<Item = usize> + '_ {
        self.tags.iter().enumerate().flat_map(|(g, w)| {
            // Live tags have their highest bit set; `EMPTY` and `TOMB` do not.
            let mut live = w.load(Ordering::Relaxed) & HIGH_BITS;
            std::iter::from_fn(move || {
                (live != 0).then(|| {
                    let at = g * 8 + (live.trailing_zeros() / 8) as usize;
                    live &= live - 1;
                    at
                })
            })
        })
    }

    /// The tag of cell `at`.
    #[inline]
    #[allow(clippy::cast_possible_truncation)] // One byte of the word, on purpose.
    fn tag_at(&self, at: usize) -> u8 {
        (self.tags[at >> 3].load(Ordering::Relaxed) >> ((at & 7) * 8)) as u8
    }

    /// Writer: sets cell `at`'s tag to `t`, storing its whole word with release (after the
    /// cell's words). Only the writer stores tags, so the word it loads is the word's latest.
    fn set_tag(&self, at: usize, t: u8) {
        let w = &self.tags[at >> 3];
        let shift = (at & 7) * 8;
        let v = w.load(Ordering::Relaxed) & !(0xff << shift);
        w.store(v | (u64::from(t) << shift), Ordering::Release);
    }

    /// Bytes of the arrays.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.cells.len() * (std::mem::size_of::<Cell>() + 1)
            + self.rows.as_deref().map_or(0, <[Row]>::len) * std::mem::size_of::<Row>()
    }
}

/// One stage index (see the module documentation): slots of a 32-bit key (the partial
/// hash's upper half) above a live flag (1 while some live cell has the key), `0` empty, a
/// key's home its own low bits; and beside them, in their own array, each key's count of
/// live cells. Readers read only the slots. The count is the writer's: it changes with every
/// cell made or buried, while the slot changes only when its key's count leaves or reaches
/// zero, so a key that most cells share (a stage of `dl_type` only, say) does not move its
/// cache line between the writer's core and the readers' at each insert.
#[derive(Debug, Clone)]
pub(crate) struct SharedIndex {
    slots: Arc<[AtomicU64]>,
    counts: Arc<[AtomicU32]>,
}

impl Default for SharedIndex {
    fn default() -> Self {
        SharedIndex::with_slots(0)
    }
}

/// The key kept for partial hash `ph`: its upper half.
#[inline]
#[allow(clippy::cast_possible_truncation)] // The upper half, on purpose.
fn key_of(ph: u64) -> u32 {
    (ph >> 32) as u32
}

impl SharedIndex {
    /// An index of `len` (a power of two, or 0) empty slots.
    pub(crate) fn with_slots(len: usize) -> Self {
        SharedIndex {
            slots: zeroed(len),
            counts: zeroed(len),
        }
    }

    /// True if `other` shares this array.
    pub(crate) fn same(&self, other: &SharedIndex) -> bool {
        Arc::ptr_eq(&self.slots, &other.slots)
    }

    /// Number of slots.
    pub(crate) fn n_slots(&self) -> usize {
        self.slots.len()
    }

    /// The slot value holding `key`, and its position.
    #[inline]
    fn position(&self, key: u32) -> Option<(usize, u64)> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut b = key as usize & mask;
        loop {
            let e = self.slots[b].load(Ordering::Relaxed);
            if e == 0 {
                return None;
            }
            if e >> 32 == u64::from(key) {
                return Some((b, e));
            }
            b = (b + 1) & mask;
        }
    }

    /// True if some live cell's value has partial hash `ph` (or one with the same upper half).
    #[inline]
    pub(crate) fn contains(&self, ph: u64) -> bool {
        self.position(key_of(ph)).is_some_and(|(_, e)| e & 1 != 0)
    }

    /// Writer: prefetches the slot and the count at `ph`'s home (what counting it reads
    /// first).
    #[inline]
    pub(crate) fn touch(&self, ph: u64) {
        if self.slots.is_empty() {
            return;
        }
        let b = key_of(ph) as usize & (self.slots.len() - 1);
        prefetch(&self.slots[b]);
        prefetch(&self.counts[b]);
    }

    /// Writer: counts one more cell with partial hash `ph`. Returns true if it took a new
    /// slot (the caller keeps the index at most half full, a quarter while small).
    pub(crate) fn inc(&self, ph: u64) -> bool {
        let key = key_of(ph);
        let mask = self.slots.len() - 1;
        let mut b = key as usize & mask;
        loop {
            let e = self.slots[b].load(Ordering::Relaxed);
            if e == 0 {
                self.counts[b].store(1, Ordering::Relaxed);
                self.slots[b].store(u64::from(key) << 32 | 1, Ordering::Release);
                return true;
            }
            if e >> 32 == u64::from(key) {
                let n = self.counts[b].load(Ordering::Relaxed);
                debug_assert!(n != u32::MAX, "count overflow");
                self.counts[b].store(n.saturating_add(1), Ordering::Relaxed);
                if n == 0 {
                    self.slots[b].store(e | 1, Ordering::Release);
                }
                return false;
            }
            b = (b + 1) & mask;
        }
    }

    /// Writer: counts one cell with partial hash `ph` out (its key stays, perhaps at zero).
    /// Returns false if no cell had it.
    pub(crate) fn dec(&self, ph: u64) -> bool {
        let Some((b, e)) = self.position(key_of(ph)) else {
            return false;
        };
        let n = self.counts[b].load(Ordering::Relaxed);
        if n == 0 {
            return false;
        }
        self.counts[b].store(n - 1, Ordering::Relaxed);
        if n == 1 {
            self.slots[b].store(e & !1, Ordering::Release);
        }
        true
    }

    /// Writer: a copy in an index of `len` slots (rounded up to a power of two), without the keys
    /// counted down to zero. Returns it and its number of keys.
    pub(crate) fn regrown(&self, len: usize) -> (SharedIndex, usize) {
        let new = SharedIndex::with_slots(len.next_power_of_two().max(MIN_CELLS));
        let n = self.copy_into(std::slice::from_ref(&new), |_| 0);
        (new, n[0])
    }

    /// Writer: the keys counted above zero, by `seg_of` of each key: how many fall in each of
    /// `n` segments.
    pub(crate) fn keys_per(&self, n: usize, seg_of: impl Fn(u32) -> usize) -> Vec<usize> {
        let mut per = vec![0; n];
        for (e, c) in self.slots.iter().zip(self.counts.iter()) {
            if c.load(Ordering::Relaxed) != 0 {
                per[seg_of(key_of(e.load(Ordering::Relaxed)))] += 1;
            }
        }
        per
    }

    /// Writer: copies the keys counted above zero, with their counts, into `into[seg_of(key)]`
    /// (new indices with room for them). Returns how many went into each.
    pub(crate) fn copy_into(
        &self,
        into: &[SharedIndex],
        seg_of: impl Fn(u32) -> usize,
    ) -> Vec<usize> {
        let mut n = vec![0; into.len()];
        for (e, c) in self.slots.iter().zip(self.counts.iter()) {
            let (e, c) = (e.load(Ordering::Relaxed), c.load(Ordering::Relaxed));
            if c == 0 {
                continue;
            }
            let key = key_of(e);
            let t = seg_of(key);
            let new = &into[t];
            let mask = new.slots.len() - 1;
            let mut b = key as usize & mask;
            while new.slots[b].load(Ordering::Relaxed) != 0 {
                b = (b + 1) & mask;
            }
            new.slots[b].store(e, Ordering::Relaxed);
            new.counts[b].store(c, Ordering::Relaxed);
            n[t] += 1;
        }
        n
    }

    /// Bytes of the slot and count arrays.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.slots.len() * 12
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;

    /// `byte_is` marks exactly the bytes equal to the wanted one, whatever the other bytes
    /// hold (no borrow or carry from a neighbour makes or hides a match).
    #[test]
    fn byte_is_marks_exactly_the_equal_bytes() {
        use rand::rngs::SmallRng;
        use rand::{Rng, SeedableRng};
        let mut rng = SmallRng::seed_from_u64(3);
        for want in 0..=255u8 {
            for _ in 0..200 {
                let mut bytes: [u8; 8] = rng.gen();
                // Neighbours that provoke carries: the wanted byte, zero, 0x80, 0xff, one off.
                for b in &mut bytes {
                    match rng.gen_range(0..6) {
                        0 => *b = want,
                        1 => *b = 0,
                        2 => *b = 0x80,
                        3 => *b = 0xff,
                        4 => *b = want.wrapping_add(1),
                        _ => {}
                    }
                }
                let v = u64::from_le_bytes(bytes);
                let got = byte_is(v, u64::from(want) * LOW_BYTES);
                let expect = bytes
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| **b == want)
                    .fold(0u64, |m, (i, _)| m | 0x80 << (i * 8));
                assert_eq!(got, expect, "bytes {bytes:02x?} want {want:02x}");
            }
        }
    }

    /// Random inserts and burials, many hashes sharing a home cell (long runs that cross
    /// groups of tags and wrap around the end) and few tags (candidates the check rejects),
    /// tombstones reused, checked against a map, probing with and without the home first:
    /// every live value is found at its cell, no buried one is, and probes pass over
    /// tombstones.
    #[test]
    fn shared_cells_random_churn_finds_exactly_the_live_values() {
        for home_first in [false, true] {
            shared_cells_churn(home_first);
        }
    }

    fn shared_cells_churn(home_first: bool) {
        use rand::rngs::SmallRng;
        use rand::{Rng, SeedableRng};
        let c = SharedCells::with_cells(1024, 2);
        let mut rng = SmallRng::seed_from_u64(7);
        // value -> (hash, position)
        let mut live: HashMap<u64, (u64, usize)> = HashMap::new();
        let (mut n_live, mut n_tombs) = (0usize, 0usize);
        for step in 0..20_000u64 {
            if (rng.gen_bool(0.55) && (n_live + n_tombs + 1) * 2 <= c.n_cells()) || live.is_empty()
            {
                // Homes in the last 40 cells and the first 24; sixteen tags.
                let h = ((rng.gen_range(0..64u64) + 984) & 1023) << 32
                    | u64::from(rng.gen::<u32>() & 0x0f00_0000);
                let (at, tomb) = c.free_cell(h);
                assert!(!c.is_live(at));
                c.put(at, h, &[step, !step]);
                live.insert(step, (h, at));
                n_live += 1;
                n_tombs -= usize::from(tomb);
            } else {
                let v = *live.keys().nth(rng.gen_range(0..live.len())).unwrap();
                let (h, at) = live.remove(&v).unwrap();
                assert_eq!(
                    c.find(h, home_first, |_, cell| cell.holds(&[v, !v])),
                    Some(at)
                );
                c.bury(at);
                assert!(!c.is_live(at));
                assert_eq!(c.find(h, home_first, |_, cell| cell.holds(&[v, !v])), None);
                n_live -= 1;
                n_tombs += 1;
            }
            if step % 997 == 0 {
                for (v, (h, at)) in &live {
                    let found = c.find(*h, home_first, |_, cell| cell.holds(&[*v, !*v]));
                    assert_eq!(found, Some(*at));
                }
                assert_eq!(c.live().count(), live.len());
            }
        }
    }

    /// Wide values (eleven words, a row of one line; thirteen, of two): a cell and its row
    /// hold the whole value, a cell reused after its burial holds the new value alone, and
    /// values that differ only in the row's words (the first line's, or the second's) are
    /// told apart.
    #[test]
    fn shared_cells_rows_hold_wide_values_and_are_rewritten_on_reuse() {
        for n in [11usize, 13] {
            let c = SharedCells::with_cells(16, n);
            let value = |seed: u64| -> Vec<u64> { (0..n as u64).map(|k| seed * 100 + k).collect() };
            let h = 5u64 << 32 | 0x0300_0000;
            let a = value(1);
            let (at, tomb) = c.free_cell(h);
            assert!(!tomb);
            c.put(at, h, &a);
            assert!(c.holds_at(at, &a));
            let mut out = vec![0; n];
            c.values(at, &mut out);
            assert_eq!(out, a);
            // Differs only in the last word (the row's last line).
            let mut a2 = a.clone();
            a2[n - 1] ^= 1;
            assert!(!c.holds_at(at, &a2));
            assert_eq!(c.find(h, false, |p, _| c.holds_at(p, &a2)), None);
            assert_eq!(c.find(h, true, |p, _| c.holds_at(p, &a)), Some(at));
            c.bury(at);
            let b = value(2);
            let (at2, tomb) = c.free_cell(h);
            assert!(tomb);
            assert_eq!(at2, at);
            c.put(at2, h, &b);
            assert!(c.holds_at(at2, &b));
            assert!(!c.holds_at(at2, &a));
            c.values(at2, &mut out);
            assert_eq!(out, b);
        }
    }

    proptest! {
        /// Random increments and decrements, many keys sharing a home slot, checked against a
        /// map of counts; regrowing keeps exactly the keys counted above zero.
        #[test]
        fn shared_index_agrees_with_a_map(
            ops in proptest::collection::vec((0u8..3, 0u64..40), 1..300),
        ) {
            let mut ix = SharedIndex::with_slots(128);
            let mut model: HashMap<u32, u32> = HashMap::new();
            for (op, k) in ops {
                // Few distinct keys (so that homes collide and runs wrap), and two lower
                // halves per key (which must share its count).
                let ph = ((k * 0x9e37_79b9) & 0xff_ffff) << 32 | (k & 1);
                let key = key_of(ph);
                match op {
                    0 => {
                        ix.inc(ph);
                        *model.entry(key).or_default() += 1;
                    }
                    1 => {
                        let had = model.get(&key).copied().unwrap_or(0);
                        prop_assert_eq!(ix.dec(ph), had > 0);
                        if had > 0 {
                            model.insert(key, had - 1);
                        }
                    }
                    _ => {
                        let (new, n) = ix.regrown(64);
                        prop_assert_eq!(n, model.values().filter(|c| **c > 0).count());
                        ix = new;
                    }
                }
                for k in 0u64..40 {
                    let ph = ((k * 0x9e37_79b9) & 0xff_ffff) << 32;
                    let want = model.get(&key_of(ph)).is_some_and(|c| *c > 0);
                    prop_assert_eq!(ix.contains(ph), want);
                }
            }
        }
    }
}
