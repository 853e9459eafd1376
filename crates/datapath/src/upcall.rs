//! The seam between the datapath and the pipeline: [`Upcall`] (a key in; datapath actions and
//! a wildcard mask out) and the flow-table [`Change`]s that make cached translations stale.
//!
//! The datapath executes the pipeline's datapath-action type ([`DpAction`]) and keeps, per
//! megaflow, what its translation depended on ([`XlateDeps`]). The pipeline's own
//! implementation of the trait is [`crate::ofproto::SwitchUpcall`]; tests plug in fakes.
//!
//! Upcalls are rationed per ingress port by an [`UpcallBudget`], a token bucket that every PMD
//! thread polling one of the port's rx queues shares.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use openflow::Match;
use packet::key::FlowKey;
use pipeline::odp::DpAction;
use pipeline::xlate::XlateDeps;

/// One translation request.
#[derive(Debug, Clone, Copy)]
pub struct UpcallRequest<'a> {
    /// The packet's key as the datapath extracted it (`in_port` = datapath port), normalized.
    pub key: &'a FlowKey,
    /// The packet's length (for rule counters when `credit`).
    pub packet_len: usize,
    /// The datapath clock.
    pub now_ms: u64,
    /// A real packet: NORMAL may learn, and (with `credit`) matched rules count it.
    pub learn: bool,
    /// Count this packet on the rules it matches (when no megaflow will count it).
    pub credit: bool,
}

/// What a translation returns.
#[derive(Debug, Clone)]
pub struct Translation {
    /// Datapath actions (empty = drop).
    pub actions: Vec<DpAction>,
    /// The megaflow mask: every key that agrees with the request's key on these bits gets the
    /// same actions. `in_port` is always exact.
    pub mask: FlowKey,
    /// The bridge of the input port.
    pub bridge: Arc<str>,
    /// The input port's OpenFlow number in that bridge.
    pub of_in_port: u16,
    /// What the translation depended on.
    pub deps: XlateDeps,
}

/// Why a translation could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpcallError {
    /// The flow tables are being changed right now (the datapath never waits for the control
    /// plane: the packet is dropped and counted, the next one will find the new tables).
    #[error("the flow tables are being changed")]
    Busy,
    /// The translation failed (no such port, no such bridge).
    #[error("{0}")]
    Failed(String),
}

/// A translator of keys into datapath actions.
pub trait Upcall: Send + Sync + fmt::Debug {
    /// Translates one key.
    fn translate(&self, req: &UpcallRequest<'_>) -> Result<Translation, UpcallError>;

    /// A number that changes whenever NORMAL's MAC tables change (megaflows whose
    /// translation ran NORMAL are revalidated then). 0 if there are none.
    fn mac_epoch(&self) -> u64 {
        0
    }
}

/// Milli-tokens per token: the bucket counts thousandths of a token, so a refill after `dt` ms
/// adds exactly `rate * dt` of them and a rate below 1,000 per second is not rounded away by
/// refills a millisecond apart.
const MILLI: u64 = 1000;

/// The upcall budget of one ingress port: a token bucket of `burst` upcalls refilled at `rate`
/// upcalls per second, shared by every PMD thread that polls one of the port's rx queues (see
/// [`crate::dpif::Datapath::upcall_budget`]).
///
/// One bucket per port, not one per rx queue or per PMD: a port with `n` queues gets the
/// configured rate, not `n` times it, and a storm on one port cannot spend another port's
/// budget. The bucket is shared rather than split between the PMDs that poll the port's
/// queues, because a split gives a PMD whose queue receives most of the port's new flows (RSS
/// is rarely even) only its fraction of the rate while the others' shares go unused. Sharing
/// costs an atomic read-modify-write per upcall, next to a translation that costs
/// microseconds; cached packets never touch the bucket.
///
/// # Thread safety
///
/// [`UpcallBudget::try_take`] and [`UpcallBudget::refill`] are lock-free and may be called
/// from any number of threads: each millisecond of elapsed time is credited once, by whichever
/// thread moves `last_ms` past it, however many PMDs call `refill` with the same clock.
///
/// # Example
///
/// ```
/// use datapath::upcall::UpcallBudget;
///
/// let b = UpcallBudget::new(500, 2, 0); // 500 upcalls/s, bursts of 2, made at t = 0 ms
/// assert!(b.try_take() && b.try_take());
/// assert!(!b.try_take()); // spent
/// b.refill(1); // half a token
/// assert!(!b.try_take());
/// b.refill(2); // one
/// assert!(b.try_take());
/// ```
#[derive(Debug)]
pub struct UpcallBudget {
    /// Tokens per second.
    rate: u32,
    /// Tokens at most.
    burst: u32,
    /// Thousandths of a token available.
    milli_tokens: AtomicU64,
    /// The clock reading up to which refills have been credited.
    last_ms: AtomicU64,
}

impl UpcallBudget {
    /// A full bucket of `burst` tokens refilled at `rate` per second from `now_ms` on.
    pub fn new(rate: u32, burst: u32, now_ms: u64) -> UpcallBudget {
        UpcallBudget {
            rate,
            burst,
            milli_tokens: AtomicU64::new(u64::from(burst) * MILLI),
            last_ms: AtomicU64::new(now_ms),
        }
    }

    /// Takes one token; false (and nothing taken) if the bucket holds less than one.
    #[inline]
    pub fn try_take(&self) -> bool {
        self.milli_tokens
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| {
                t.checked_sub(MILLI)
            })
            .is_ok()
    }

    /// Credits the time from the last refill to `now_ms` (`rate` tokens a second, up to
    /// `burst`). A clock reading not after the last one credits nothing.
    pub fn refill(&self, now_ms: u64) {
        let last = self.last_ms.load(Ordering::Acquire);
        if now_ms <= last
            || self
                .last_ms
                .compare_exchange(last, now_ms, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
        {
            // Nothing elapsed, or another thread credits this interval.
            return;
        }
        let add = u64::from(self.rate).saturating_mul(now_ms - last);
        let cap = u64::from(self.burst) * MILLI;
        // The closure never returns `None`: the update cannot fail.
        let _ = self
            .milli_tokens
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| {
                Some(t.saturating_add(add).min(cap))
            });
    }

    /// Whole tokens available now.
    pub fn tokens(&self) -> u64 {
        self.milli_tokens.load(Ordering::Acquire) / MILLI
    }

    /// Upcalls per second.
    pub fn rate(&self) -> u32 {
        self.rate
    }

    /// Upcalls in a burst.
    pub fn burst(&self) -> u32 {
        self.burst
    }
}

/// A hasher for keys and masks (the std default, SipHash, costs more than the lookups it
/// serves here).
#[derive(Debug, Default, Clone, Copy)]
pub struct KeyHasher(u64);

impl std::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 32;
        h = h.wrapping_mul(0xD6E8_FEB8_6659_FD93);
        h ^ (h >> 29)
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(w));
        }
    }

    fn write_u64(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(23) ^ w).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// The [`std::hash::BuildHasher`] of [`KeyHasher`].
pub type KeyHash = std::hash::BuildHasherDefault<KeyHasher>;

/// A 64-bit hash of a sequence of words (multiply-rotate, finished with an avalanche).
fn words_hash(words: impl Iterator<Item = u64>) -> u64 {
    let mut h: u64 = 0x243F_6A88_85A3_08D3;
    for w in words {
        h = (h.rotate_left(23) ^ w).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    h ^= h >> 32;
    h = h.wrapping_mul(0xD6E8_FEB8_6659_FD93);
    h ^ (h >> 29)
}

/// The added rules of one mask: the mask's non-zero words and, per rule, its masked value in
/// those words (a few words a rule, not a whole key), with the set of their hashes.
#[derive(Debug, Clone)]
struct Group {
    mask: FlowKey,
    idx: Box<[u8]>,
    values: Vec<u64>,
    hashes: HashSet<u64, KeyHash>,
}

/// Per (group, megaflow mask): the hashes of the group's values under that mask.
pub type Projections = HashMap<(usize, FlowKey), HashSet<u64, KeyHash>, KeyHash>;

/// Rules added to one table, grouped by mask.
///
/// Membership is tested by hash: a collision can only make [`AddedRules::overlaps`] say yes
/// where the answer is no, which costs a needless retranslation, never a stale megaflow.
#[derive(Debug, Default, Clone)]
pub struct AddedRules {
    groups: Vec<Group>,
    n_rules: usize,
}

impl AddedRules {
    /// Groups `matches` by mask.
    pub fn new<'a>(matches: impl IntoIterator<Item = &'a Match>) -> AddedRules {
        let matches = matches.into_iter();
        let mut by_mask: HashMap<FlowKey, usize, KeyHash> = HashMap::default();
        let mut groups: Vec<Group> = Vec::new();
        let mut n_rules = 0;
        // Rules of a bundle mostly come in runs of one mask: compare with the last one before
        // hashing the whole mask.
        let mut last: Option<usize> = None;
        // The first group is sized for every rule (a bundle of one mask grows nothing);
        // the others grow as they need.
        let mut room = matches.size_hint().0;
        for m in matches {
            let g = match last {
                Some(g) if groups[g].mask == *m.mask() => g,
                _ => *by_mask.entry(*m.mask()).or_insert_with(|| {
                    let idx: Box<[u8]> = (0..m.mask().words.len())
                        .filter(|i| m.mask().words[*i] != 0)
                        .map(|i| u8::try_from(i).unwrap_or(u8::MAX))
                        .collect();
                    let n = std::mem::take(&mut room);
                    groups.push(Group {
                        values: Vec::with_capacity(n * idx.len()),
                        hashes: HashSet::with_capacity_and_hasher(n, KeyHash::default()),
                        mask: *m.mask(),
                        idx,
                    });
                    groups.len() - 1
                }),
            };
            last = Some(g);
            let grp = &mut groups[g];
            let words = grp
                .idx
                .iter()
                .map(|i| m.value().words[usize::from(*i)] & m.mask().words[usize::from(*i)]);
            grp.hashes.insert(words_hash(words.clone()));
            grp.values.extend(words);
            n_rules += 1;
        }
        AddedRules { groups, n_rules }
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.n_rules
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.n_rules == 0
    }

    /// Whether some added rule matches some key of the megaflow `(key, mask)`: they agree on
    /// every bit both masks cover. `projections` caches, per group and megaflow mask, the
    /// group's values under that mask (built the first time a megaflow of that mask asks).
    pub fn overlaps(&self, key: &FlowKey, mask: &FlowKey, projections: &mut Projections) -> bool {
        for (g, grp) in self.groups.iter().enumerate() {
            let inside = grp
                .idx
                .iter()
                .all(|i| grp.mask.words[usize::from(*i)] & !mask.words[usize::from(*i)] == 0);
            let probe = words_hash(grp.idx.iter().map(|i| {
                let i = usize::from(*i);
                key.words[i] & grp.mask.words[i] & mask.words[i]
            }));
            let hit = if inside {
                grp.hashes.contains(&probe)
            } else {
                projections
                    .entry((g, *mask))
                    .or_insert_with(|| {
                        let n = grp.idx.len().max(1);
                        grp.values
                            .chunks(n)
                            .map(|v| {
                                words_hash(
                                    grp.idx
                                        .iter()
                                        .zip(v)
                                        .map(|(i, w)| w & mask.words[usize::from(*i)]),
                                )
                            })
                            .collect()
                    })
                    .contains(&probe)
            };
            if hit {
                return true;
            }
        }
        false
    }
}

/// A flow-table change the caches must account for before it is acknowledged.
#[derive(Debug, Clone)]
pub enum Change {
    /// Rules were added to one table of one bridge (and nothing else changed): only
    /// megaflows whose translation looked that table up with a key overlapping an added
    /// rule can be stale.
    Added {
        /// The bridge.
        bridge: Arc<str>,
        /// The table.
        table: u8,
        /// The rules' matches.
        rules: Arc<AddedRules>,
    },
    /// Rules of these tables of one bridge were modified or deleted: megaflows whose
    /// translation looked one of them up are retranslated.
    Tables {
        /// The bridge.
        bridge: Arc<str>,
        /// Bit `t % 64` of word `t / 64` for table `t`.
        tables: [u64; 4],
    },
    /// Anything else (ports, configuration): every megaflow is retranslated.
    Everything,
}

#[cfg(test)]
mod tests {
    use packet::key::fields;

    use super::*;

    fn m(src: u32, src_mask: u32) -> Match {
        let mut v = FlowKey::default();
        let mut k = FlowKey::default();
        v.set(fields::DL_TYPE, 0x0800);
        k.set(fields::DL_TYPE, 0xffff);
        v.set(fields::NW_SRC, u128::from(src & src_mask));
        k.set(fields::NW_SRC, u128::from(src_mask));
        Match::new(v, k)
    }

    #[test]
    fn overlap_inside_and_outside_the_megaflow_mask() {
        let added = AddedRules::new(&[m(0x0a00_0001, 0xffff_ffff)]);
        assert_eq!(added.len(), 1);
        let mut proj = HashMap::default();
        // A megaflow that matches nw_src exactly.
        let mut key = FlowKey::default();
        key.set(fields::DL_TYPE, 0x0800);
        key.set(fields::NW_SRC, 0x0a00_0001);
        let mut mask = FlowKey::default();
        mask.set(fields::DL_TYPE, 0xffff);
        mask.set(fields::NW_SRC, 0xffff_ffff);
        assert!(added.overlaps(&key, &mask, &mut proj));
        key.set(fields::NW_SRC, 0x0a00_0002);
        assert!(!added.overlaps(&key, &mask, &mut proj));
        // A megaflow that matches only the /24: the added /32 is inside it.
        mask.set(fields::NW_SRC, 0xffff_ff00);
        key.set(fields::NW_SRC, 0x0a00_0000);
        assert!(added.overlaps(&key, &mask, &mut proj));
        key.set(fields::NW_SRC, 0x0b00_0000);
        assert!(!added.overlaps(&key, &mask, &mut proj));
    }

    fn take_all(b: &UpcallBudget) -> u64 {
        let mut n = 0;
        while b.try_take() {
            n += 1;
        }
        n
    }

    #[test]
    fn budget_starts_full_and_refills_at_its_rate_up_to_its_burst() {
        let b = UpcallBudget::new(1000, 5, 100);
        assert_eq!(take_all(&b), 5);
        assert_eq!(b.tokens(), 0);
        // 1,000 a second: one per millisecond.
        b.refill(103);
        assert_eq!(take_all(&b), 3);
        // A long pause fills the bucket, never beyond the burst.
        b.refill(60_000);
        assert_eq!(b.tokens(), 5);
        assert_eq!(take_all(&b), 5);
    }

    #[test]
    fn budget_below_one_token_per_ms_keeps_the_fractions() {
        // 250 a second is a quarter token a millisecond: refills every millisecond still add
        // up to one token every four.
        let b = UpcallBudget::new(250, 10, 0);
        assert_eq!(take_all(&b), 10);
        let mut got = 0;
        for ms in 1..=40 {
            b.refill(ms);
            got += take_all(&b);
        }
        assert_eq!(got, 10);
    }

    #[test]
    fn budget_refill_credits_each_interval_once() {
        let b = UpcallBudget::new(1000, 100, 0);
        assert_eq!(take_all(&b), 100);
        // Several PMDs refilling with the same clock reading, or an older one.
        b.refill(7);
        b.refill(7);
        b.refill(5);
        assert_eq!(b.tokens(), 7);
    }

    #[test]
    fn budget_shared_by_threads_hands_out_each_token_once() {
        let b = Arc::new(UpcallBudget::new(0, 10_000, 0));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let b = b.clone();
                std::thread::spawn(move || take_all(&b))
            })
            .collect();
        let total: u64 = handles
            .into_iter()
            .map(|h| h.join().expect("no panic"))
            .sum();
        assert_eq!(total, 10_000);
        assert!(!b.try_take());
    }

    #[test]
    fn budget_of_rate_zero_never_refills() {
        let b = UpcallBudget::new(0, 1, 0);
        assert!(b.try_take());
        b.refill(u64::MAX);
        assert!(!b.try_take());
    }
}
