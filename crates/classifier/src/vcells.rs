//! A prototype for one shared, versioned table (the crate README's "Next: one shared, versioned
//! table"): one subtable's cells, written in place by the writer while readers probe them,
//! each entry visible from one version until another. The classifier does not use it yet; it
//! is here to be tested under concurrent readers and measured against [`Cells`], before the
//! classifier's two versions are replaced by one table of these.
//!
//! Layout: open addressing with linear probing, a tag byte per cell (`EMPTY`, `TOMB`, or
//! eight bits of the hash with the top bit set) and, per cell, its value words, its visibility
//! (`from << 32 | until`: visible to versions `from..until`) and its payload (a `u32`, the
//! index of the rule in the classifier's arena). Every word is an atomic: on x86-64 a relaxed
//! or acquire load is a plain load, so a probe costs what a probe of [`Cells`] costs.
//!
//! Protocol:
//! - The writer fills a cell's words, then publishes its tag with release; a reader loads the tag
//!   with acquire, then the words.
//! - A commit stamps its inserts `from = v + 1` and its removals `until = v + 1`, then publishes a
//!   snapshot of version `v + 1`: a reader holding version `v` sees none of the batch, one holding
//!   `v + 1` all of it.
//! - An ended entry's cell becomes a tombstone, reusable by inserts, once no reader holds a
//!   snapshot older than its `until` (the retired snapshots' `Arc` counts say so). Until then no
//!   reader that could see it can see anything else in its cell. A reader that finds a cell being
//!   reused reads a mix of the old and new entry, but either visibility word is invisible to it:
//!   the old entry ended at or before its version, the new one starts after.
//! - Probes stop only at `EMPTY`, and cells are never emptied in place: a growth copies the entries
//!   some version may still see into a new array, published with a new snapshot; readers holding
//!   the old snapshot keep reading the old, frozen array.
//!
//! [`Cells`]: crate::cells::Cells

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;

// The tags and home cells of `Cells`: a tag has its top bit set, so never `EMPTY` or `TOMB`.
use crate::cells::{home, tag};

const EMPTY: u8 = 0;
const TOMB: u8 = 1;
/// `until` of an entry no commit has ended.
const OPEN: u32 = u32::MAX;
/// Fewest cells an array has.
const MIN_CELLS: usize = 16;

#[inline]
fn vis(from: u32, until: u32) -> u64 {
    u64::from(from) << 32 | u64::from(until)
}

#[inline]
#[allow(clippy::cast_possible_truncation)] // Unpacking two halves.
fn unvis(w: u64) -> (u32, u32) {
    ((w >> 32) as u32, w as u32)
}

/// One cell: `N` value words, the visibility, the payload.
#[derive(Debug)]
struct Cell<const N: usize> {
    vals: [AtomicU64; N],
    vis: AtomicU64,
    payload: AtomicU64,
}

/// One array of cells.
#[derive(Debug)]
struct Arr<const N: usize> {
    tags: Box<[AtomicU8]>,
    cells: Box<[Cell<N>]>,
}

impl<const N: usize> Arr<N> {
    fn new(len: usize) -> Arr<N> {
        Arr {
            tags: (0..len).map(|_| AtomicU8::new(EMPTY)).collect(),
            cells: (0..len)
                .map(|_| Cell {
                    vals: std::array::from_fn(|_| AtomicU64::new(0)),
                    vis: AtomicU64::new(0),
                    payload: AtomicU64::new(0),
                })
                .collect(),
        }
    }

    #[inline]
    fn mask(&self) -> usize {
        self.tags.len() - 1
    }

    /// Writes an entry into cell `at` (empty or a tombstone) and publishes its tag.
    fn put(&self, at: usize, hash: u64, values: &[u64; N], visibility: u64, payload: u32) {
        let c = &self.cells[at];
        for (w, v) in c.vals.iter().zip(values) {
            w.store(*v, Ordering::Relaxed);
        }
        c.vis.store(visibility, Ordering::Relaxed);
        c.payload.store(u64::from(payload), Ordering::Relaxed);
        self.tags[at].store(tag(hash), Ordering::Release);
    }

    /// The cell on `hash`'s probe sequence holding `values` whose visibility `(from, until)`
    /// satisfies `accept`.
    #[inline]
    fn position(
        &self,
        hash: u64,
        values: &[u64; N],
        accept: impl Fn(u32, u32) -> bool,
    ) -> Option<usize> {
        let mask = self.mask();
        let want = tag(hash);
        let mut b = home(hash, mask);
        loop {
            let t = self.tags[b].load(Ordering::Acquire);
            if t == EMPTY {
                return None;
            }
            if t == want {
                let c = &self.cells[b];
                // Every word loaded, then compared: the loads go out together.
                if c.vals
                    .iter()
                    .zip(values)
                    .fold(true, |eq, (w, v)| eq & (w.load(Ordering::Relaxed) == *v))
                {
                    let (from, until) = unvis(c.vis.load(Ordering::Relaxed));
                    if accept(from, until) {
                        return Some(b);
                    }
                }
            }
            b = (b + 1) & mask;
        }
    }

    /// The first cell on `hash`'s probe sequence that an insert may take.
    fn free_from(&self, hash: u64) -> usize {
        let mask = self.mask();
        let mut b = home(hash, mask);
        while self.tags[b].load(Ordering::Relaxed) > TOMB {
            b = (b + 1) & mask;
        }
        b
    }
}

/// What readers load: a version and the array to read it in.
#[derive(Debug)]
pub(crate) struct Snap<const N: usize> {
    version: u32,
    arr: Arc<Arr<N>>,
}

impl<const N: usize> Snap<N> {
    /// The payload of the entry with `values` (hashing to `hash`) visible at this version.
    #[inline]
    pub(crate) fn find(&self, hash: u64, values: &[u64; N]) -> Option<u32> {
        let v = self.version;
        let at = self
            .arr
            .position(hash, values, |from, until| from <= v && v < until)?;
        #[allow(clippy::cast_possible_truncation)] // Stored from a `u32`.
        Some(self.arr.cells[at].payload.load(Ordering::Relaxed) as u32)
    }

    /// The version this snapshot shows.
    pub(crate) fn version(&self) -> u32 {
        self.version
    }
}

/// A handle for readers: cheap to clone, `Send + Sync`.
#[derive(Debug, Clone)]
pub(crate) struct VReader<const N: usize> {
    cur: Arc<ArcSwap<Snap<N>>>,
}

impl<const N: usize> VReader<N> {
    /// The current snapshot; the writer reuses no cell a snapshot may see while it is held.
    #[inline]
    pub(crate) fn snapshot(&self) -> arc_swap::Guard<Arc<Snap<N>>> {
        self.cur.load()
    }
}

/// The writer's side.
#[derive(Debug)]
pub(crate) struct VCells<const N: usize> {
    cur: Arc<ArcSwap<Snap<N>>>,
    arr: Arc<Arr<N>>,
    version: u32,
    /// Cells whose tag is not `EMPTY`.
    used: usize,
    /// Entries visible to the current or the next version.
    live: usize,
    /// Snapshots replaced by later ones, oldest first, that readers may still hold.
    retired: VecDeque<Arc<Snap<N>>>,
    /// Ended entries as (until, cell), in `until` order, not yet tombstones.
    dead: VecDeque<(u32, usize)>,
    /// The hash of an entry's values (for growth).
    hash_of: fn(&[u64]) -> u64,
}

impl<const N: usize> VCells<N> {
    /// An empty table of entries of `N` value words; `hash_of` gives the hash of values.
    pub(crate) fn new(hash_of: fn(&[u64]) -> u64) -> VCells<N> {
        let arr = Arc::new(Arr::new(MIN_CELLS));
        VCells {
            cur: Arc::new(ArcSwap::from_pointee(Snap {
                version: 0,
                arr: arr.clone(),
            })),
            arr,
            version: 0,
            used: 0,
            live: 0,
            retired: VecDeque::new(),
            dead: VecDeque::new(),
            hash_of,
        }
    }

    pub(crate) fn reader(&self) -> VReader<N> {
        VReader {
            cur: self.cur.clone(),
        }
    }

    /// Adds an entry visible from the next commit on (the caller keeps values unique among
    /// open entries).
    pub(crate) fn insert(&mut self, hash: u64, values: &[u64; N], payload: u32) {
        if (self.used + 1) * 2 > self.arr.tags.len() {
            self.regrow();
        }
        let at = self.arr.free_from(hash);
        if self.arr.tags[at].load(Ordering::Relaxed) == EMPTY {
            self.used += 1;
        }
        self.arr
            .put(at, hash, values, vis(self.version + 1, OPEN), payload);
        self.live += 1;
    }

    /// Ends the open entry with `values` at the next commit; false if there is none.
    pub(crate) fn remove(&mut self, hash: u64, values: &[u64; N]) -> bool {
        let Some(at) = self.arr.position(hash, values, |_, until| until == OPEN) else {
            return false;
        };
        let w = &self.arr.cells[at].vis;
        let (from, _) = unvis(w.load(Ordering::Relaxed));
        w.store(vis(from, self.version + 1), Ordering::Relaxed);
        self.dead.push_back((self.version + 1, at));
        self.live -= 1;
        true
    }

    /// Publishes the inserts and removals since the last commit as one new version.
    pub(crate) fn commit(&mut self) {
        self.version += 1;
        self.publish();
        self.reclaim();
    }

    fn publish(&mut self) {
        let old = self.cur.swap(Arc::new(Snap {
            version: self.version,
            arr: self.arr.clone(),
        }));
        self.retired.push_back(old);
    }

    /// The oldest version a reader may still hold.
    fn oldest_held(&mut self) -> u32 {
        while self
            .retired
            .front()
            .is_some_and(|s| Arc::strong_count(s) == 1)
        {
            self.retired.pop_front();
        }
        self.retired.front().map_or(self.version, |s| s.version)
    }

    /// Turns into tombstones the cells of entries no held version can see.
    fn reclaim(&mut self) {
        let oldest = self.oldest_held();
        while let Some(&(until, at)) = self.dead.front() {
            if until > oldest {
                break;
            }
            self.dead.pop_front();
            self.arr.tags[at].store(TOMB, Ordering::Release);
        }
    }

    /// Moves the entries the current and next versions can see into a new array (of the same
    /// size if they fill at most three eighths of it, else doubled until they do), published
    /// at once with the current version. Readers of older versions keep the old array, which
    /// no longer changes.
    fn regrow(&mut self) {
        // Ended entries still in the new array: those the next commit ends.
        self.dead.retain(|d| d.0 > self.version);
        let keep = self.live + self.dead.len();
        let mut len = self.arr.tags.len();
        while (keep + 1) * 8 > len * 3 {
            len *= 2;
        }
        let old = self.arr.clone();
        let new = Arr::new(len);
        let mut moved = vec![usize::MAX; old.tags.len()];
        for (b, t) in old.tags.iter().enumerate() {
            if t.load(Ordering::Relaxed) <= TOMB {
                continue;
            }
            let c = &old.cells[b];
            let visibility = c.vis.load(Ordering::Relaxed);
            if unvis(visibility).1 <= self.version {
                continue;
            }
            let values: [u64; N] = std::array::from_fn(|i| c.vals[i].load(Ordering::Relaxed));
            let hash = (self.hash_of)(&values);
            let at = new.free_from(hash);
            #[allow(clippy::cast_possible_truncation)] // Stored from a `u32`.
            new.put(
                at,
                hash,
                &values,
                visibility,
                c.payload.load(Ordering::Relaxed) as u32,
            );
            moved[b] = at;
        }
        for d in &mut self.dead {
            d.1 = moved[d.1];
        }
        self.used = keep;
        self.arr = Arc::new(new);
        self.publish();
    }

    /// Bytes of the current array.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.arr.tags.len() + self.arr.cells.len() * std::mem::size_of::<Cell<N>>()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::atomic::AtomicBool;

    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    use super::*;

    fn hash_of(v: &[u64]) -> u64 {
        let mut h = 0x243F_6A88_85A3_08D3u64;
        for w in v {
            h = (h ^ w).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29);
        }
        h ^ (h >> 31)
    }

    fn vals(k: u64) -> [u64; 4] {
        [k, k ^ 0xff, 6, k.wrapping_mul(3)]
    }

    /// Random inserts and removes over many commits agree with a model at every version, and
    /// snapshots held across commits keep showing their own version.
    #[test]
    fn vcells_versions_agree_with_a_model() {
        let mut rng = SmallRng::seed_from_u64(5);
        let mut t: VCells<4> = VCells::new(hash_of);
        let r = t.reader();
        let mut model: HashMap<u64, u32> = HashMap::new();
        // Snapshots held across commits, with what each must show.
        type Held = (arc_swap::Guard<Arc<Snap<4>>>, HashMap<u64, u32>);
        let mut held: Vec<Held> = Vec::new();
        for round in 0..300u32 {
            for _ in 0..rng.gen_range(1..40) {
                let k = rng.gen_range(0..400u64);
                let v = vals(k);
                if let std::collections::hash_map::Entry::Vacant(e) = model.entry(k) {
                    t.insert(hash_of(&v), &v, round);
                    e.insert(round);
                } else if rng.gen_bool(0.5) {
                    assert!(t.remove(hash_of(&v), &v));
                    model.remove(&k);
                }
            }
            t.commit();
            let snap = r.snapshot();
            assert_eq!(snap.version(), round + 1);
            for k in 0..400u64 {
                let v = vals(k);
                assert_eq!(
                    snap.find(hash_of(&v), &v),
                    model.get(&k).copied(),
                    "key {k}"
                );
            }
            if round % 7 == 0 {
                held.push((snap, model.clone()));
            }
            if held.len() > 3 {
                held.remove(0);
            }
            for (s, m) in &held {
                for k in (0..400u64).step_by(7) {
                    let v = vals(k);
                    assert_eq!(s.find(hash_of(&v), &v), m.get(&k).copied());
                }
            }
        }
        // The table reused its tombstones instead of growing without bound.
        assert!(t.heap_bytes() < 4096 * 6 * 8, "{} bytes", t.heap_bytes());
    }

    /// Readers in threads while the writer commits batches that each replace the whole set:
    /// a snapshot sees exactly one batch's keys, never a mix.
    #[test]
    fn vcells_readers_never_see_a_partial_batch() {
        const K: u64 = 64;
        let mut t: VCells<4> = VCells::new(hash_of);
        for k in 0..K {
            t.insert(hash_of(&vals(k)), &vals(k), 0);
        }
        t.commit();
        let stop = Arc::new(AtomicBool::new(false));
        let checks = Arc::new(AtomicU64::new(0));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let r = t.reader();
                let (stop, checks) = (stop.clone(), checks.clone());
                std::thread::spawn(move || {
                    let mut checked = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let s = r.snapshot();
                        // Batch b holds keys b*K..(b+1)*K with payload b.
                        let b = u64::from(s.version() - 1);
                        for k in 0..K {
                            let v = vals(b * K + k);
                            assert_eq!(s.find(hash_of(&v), &v), Some(s.version() - 1));
                            if b > 0 {
                                let old = vals((b - 1) * K + k);
                                assert_eq!(s.find(hash_of(&old), &old), None);
                            }
                            // The batch being written is invisible to this version.
                            let next = vals((b + 1) * K + k);
                            assert_eq!(s.find(hash_of(&next), &next), None);
                        }
                        checked += 1;
                        checks.fetch_add(1, Ordering::Relaxed);
                    }
                    checked
                })
            })
            .collect();
        // At least 400 batches, and on until the readers have checked 2,000 snapshots between
        // them (a fast writer would otherwise finish before a reader starts).
        let mut b = 0u64;
        while b < 400
            || (checks.load(Ordering::Relaxed) < 2000
                && b < 1_000_000
                && !readers.iter().any(std::thread::JoinHandle::is_finished))
        {
            b += 1;
            for k in 0..K {
                let old = vals((b - 1) * K + k);
                assert!(t.remove(hash_of(&old), &old));
                let v = vals(b * K + k);
                t.insert(hash_of(&v), &v, u32::try_from(b).unwrap());
            }
            t.commit();
        }
        assert!(checks.load(Ordering::Relaxed) >= 2000, "readers barely ran");
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            assert!(r.join().expect("reader panicked") > 0);
        }
    }

    /// Lookups of `VCells` against `Cells` (hits, one thread), 262,144 entries or `VN`:
    /// `VN=1024 cargo test --release -p classifier vcells_lookup_speed -- --ignored --nocapture`.
    #[test]
    #[ignore = "a measurement, not a test"]
    fn vcells_lookup_speed() {
        use crate::cells::Cells;
        let n: u64 = std::env::var("VN")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(262_144);
        let mut rng = SmallRng::seed_from_u64(1);
        let keys: Vec<[u64; 4]> = (0..n).map(|_| vals(rng.gen())).collect();
        let probes: Vec<usize> = (0..4_000_000)
            .map(|_| rng.gen_range(0..keys.len()))
            .collect();
        let t0 = std::time::Instant::now();
        let mut v: VCells<4> = VCells::new(hash_of);
        for (i, k) in keys.iter().enumerate() {
            v.insert(hash_of(k), k, u32::try_from(i).unwrap());
        }
        v.commit();
        let v_insert = t0.elapsed();
        let t0 = std::time::Instant::now();
        let mut c: Cells<([u64; 4], u32)> = Cells::default();
        for (i, k) in keys.iter().enumerate() {
            c.insert(hash_of(k), (*k, u32::try_from(i).unwrap()), |e| {
                hash_of(&e.0)
            });
        }
        let c_insert = t0.elapsed();
        let snap = v.reader().snapshot();
        for _ in 0..3 {
            let t0 = std::time::Instant::now();
            let mut sum = 0u64;
            for &i in &probes {
                let k = &keys[i];
                sum += u64::from(snap.find(hash_of(k), k).unwrap_or(0));
            }
            let tv = t0.elapsed();
            let t0 = std::time::Instant::now();
            let mut sum2 = 0u64;
            for &i in &probes {
                let k = &keys[i];
                let h = hash_of(k);
                sum2 += c
                    .find(h, |e| e.0 == *k)
                    .and_then(|at| c.get(at))
                    .map_or(0, |e| u64::from(e.1));
            }
            let tc = t0.elapsed();
            assert_eq!(sum, sum2);
            println!(
                "{n} hits: VCells {:.1} ns ({} bytes), Cells {:.1} ns ({} bytes) a lookup; inserts {:?} against {:?}",
                tv.as_nanos() as f64 / probes.len() as f64,
                v.heap_bytes(),
                tc.as_nanos() as f64 / probes.len() as f64,
                c.heap_bytes(),
                v_insert,
                c_insert
            );
        }
    }
}
