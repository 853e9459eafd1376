//! The writer side: [`Classifier`], [`Batch`], and the readers' [`Reader`] and [`Snapshot`].
//!
//! Two versions of the rules exist (the left-right pattern). Readers load the published one
//! through an [`ArcSwap`]. The writer owns the other (the spare): to commit a batch it
//! waits until no reader still holds the spare (at most one lookup or one short snapshot),
//! replays onto it the primitives of the previous commit, applies the new batch, and
//! publishes it with one pointer swap. The old published version becomes the spare. Both
//! versions share the `Arc<Rule>`s, so a rule is stored once.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Arc;

use arc_swap::{ArcSwap, Guard};
use openflow::Match;
use packet::key::{fields, FlowKey, KeyField};

use crate::rule::{
    field_value, rank, value_idx, Mask, Rule, RuleStats, Stats, Values, WordBuildHasher,
    MAX_PREFIXES,
};
use crate::ruleset::{prefix_of, Log, Prim, RuleSet, TOUCH_GROUP};
use crate::subtable::WriteHashes;
use crate::trie::Trie;
use crate::{Error, PrefixField, Uncompiled};

/// One change in a [`Batch`].
#[derive(Debug, Clone)]
pub enum Op<T> {
    /// Adds a rule; a rule with the same match and priority is replaced (its insertion order
    /// is kept, its counters start from zero).
    Insert {
        /// What the rule matches.
        rule_match: Match,
        /// Its priority.
        priority: u32,
        /// The controller's cookie.
        cookie: u64,
        /// Its payload (actions).
        payload: T,
    },
    /// Changes the payload of the rule with this match and priority, keeping its identity,
    /// cookie and counters. Fails with [`Error::NotFound`] if there is none.
    Modify {
        /// The rule's match.
        rule_match: Match,
        /// The rule's priority.
        priority: u32,
        /// The new payload.
        payload: T,
    },
    /// Removes the rule with this match and priority. Fails with [`Error::NotFound`] if there
    /// is none.
    Remove {
        /// The rule's match.
        rule_match: Match,
        /// The rule's priority.
        priority: u32,
    },
    /// Removes every rule (the first half of a `replace-flows`).
    Clear,
}

/// An atomic group of changes: readers see all of it or none of it.
///
/// Each operation's match is kept as a rule keeps it: the position of its mask among the
/// batch's distinct masks and its value words under that mask: 128 bytes an operation with
/// its priority, cookie and payload, against 744 for an [`Op`] with its 720-byte [`Match`]. A
/// 100,000-rule batch so holds 12.8 MB rather than 74, and its commit reads an
/// operation's few words rather than two 360-byte keys from memory (run 24 in the README).
#[derive(Debug, Clone)]
pub struct Batch<T> {
    ops: Vec<BatchOp<T>>,
    masks: Vec<BatchMask>,
    /// Each mask's position in `masks`.
    mask_at: HashMap<FlowKey, u32, WordBuildHasher>,
    /// The position of the last operation's mask ([`NO_MASK`] before the first): operations
    /// in a row mostly share their mask, which is compared with it before it is hashed.
    last: u32,
}

/// A distinct mask of a [`Batch`]'s matches, with the key words it constrains (in the order of
/// [`Mask::idx`], which a rule's value words follow).
#[derive(Debug, Clone)]
struct BatchMask {
    key: FlowKey,
    idx: Box<[u8]>,
}

/// One operation of a [`Batch`]: its match as the position of its mask in the batch's list and
/// its value words under that mask, and [`Match::prereq_bits`], by which the check of the
/// match is remembered.
#[derive(Debug, Clone)]
struct BatchOp<T> {
    what: What<T>,
    mask: u32,
    prereqs: u32,
    priority: u32,
    values: Values,
}

/// What a [`BatchOp`] does (see [`Op`]).
#[derive(Debug, Clone)]
enum What<T> {
    Insert { cookie: u64, payload: T },
    Modify { payload: T },
    Remove,
    Clear,
}

/// No mask (see [`Batch`]).
const NO_MASK: u32 = u32::MAX;

/// Per batch mask, the prerequisite bits of the last few matches of that mask a commit
/// checked (a TCP and a UDP 5-tuple differ in their bits), and the slot the next one takes:
/// the check depends on the mask and those bits alone. When the last four matches of any mask
/// were kept instead, a batch of twenty masks in no order (the mixed set) rebuilt and checked
/// almost every match (a 720-byte `Match` made from its words, its mask compared and hashed: a
/// sixth of a 100,000-rule batch's time).
struct Checked(Vec<([Option<u32>; CHECKED_BITS], usize)>);

/// Prerequisite bits [`Checked`] keeps per mask.
const CHECKED_BITS: usize = 4;

impl Checked {
    fn new(n_masks: usize) -> Checked {
        Checked(vec![([None; CHECKED_BITS], 0); n_masks])
    }

    /// True if a match of batch mask `mask` with prerequisite bits `bits` passed already.
    #[inline]
    fn contains(&self, mask: u32, bits: u32) -> bool {
        self.0
            .get(mask as usize)
            .is_some_and(|(seen, _)| seen.contains(&Some(bits)))
    }

    /// Notes that a match of batch mask `mask` with prerequisite bits `bits` passed.
    fn note(&mut self, mask: u32, bits: u32) {
        if let Some((seen, next)) = self.0.get_mut(mask as usize) {
            seen[*next] = Some(bits);
            *next = (*next + 1) % CHECKED_BITS;
        }
    }
}

impl<T> Default for Batch<T> {
    fn default() -> Self {
        Batch {
            ops: Vec::new(),
            masks: Vec::new(),
            mask_at: HashMap::default(),
            last: NO_MASK,
        }
    }
}

impl<T> Batch<T> {
    /// An empty batch.
    pub fn new() -> Self {
        Batch::default()
    }

    /// Appends [`Op::Insert`]. `rule_match` may be a `Match` or a reference to one (read in
    /// place: a `Match` is 720 bytes).
    pub fn insert(
        &mut self,
        rule_match: impl Borrow<Match>,
        priority: u32,
        cookie: u64,
        payload: T,
    ) -> &mut Self {
        self.add(
            rule_match.borrow(),
            priority,
            What::Insert { cookie, payload },
        )
    }

    /// Appends [`Op::Modify`] (`rule_match` as for [`Batch::insert`]).
    pub fn modify(
        &mut self,
        rule_match: impl Borrow<Match>,
        priority: u32,
        payload: T,
    ) -> &mut Self {
        self.add(rule_match.borrow(), priority, What::Modify { payload })
    }

    /// Appends [`Op::Remove`] (`rule_match` as for [`Batch::insert`]).
    pub fn remove(&mut self, rule_match: impl Borrow<Match>, priority: u32) -> &mut Self {
        self.add(rule_match.borrow(), priority, What::Remove)
    }

    /// Appends [`Op::Clear`].
    pub fn clear(&mut self) -> &mut Self {
        self.ops.push(BatchOp {
            what: What::Clear,
            mask: NO_MASK,
            prereqs: 0,
            priority: 0,
            values: Values::none(),
        });
        self
    }

    /// Appends any operation.
    pub fn push(&mut self, op: Op<T>) -> &mut Self {
        match op {
            Op::Insert {
                rule_match,
                priority,
                cookie,
                payload,
            } => self.insert(rule_match, priority, cookie, payload),
            Op::Modify {
                rule_match,
                priority,
                payload,
            } => self.modify(rule_match, priority, payload),
            Op::Remove {
                rule_match,
                priority,
            } => self.remove(rule_match, priority),
            Op::Clear => self.clear(),
        }
    }

    fn add(&mut self, m: &Match, priority: u32, what: What<T>) -> &mut Self {
        // The match's lines at once (its mask is compared, its value words gathered).
        crate::hint::prefetch_all(m);
        let k = self.mask_of(m.mask());
        let values = Values::gather(m.value(), &self.masks[k as usize].idx);
        self.ops.push(BatchOp {
            what,
            mask: k,
            prereqs: m.prereq_bits(),
            priority,
            values,
        });
        self
    }

    /// The position of `mask` in the batch's list, added if it is new.
    fn mask_of(&mut self, mask: &FlowKey) -> u32 {
        if let Some(last) = self.masks.get(self.last as usize) {
            if last.key == *mask {
                return self.last;
            }
        }
        let masks = &mut self.masks;
        let k = *self.mask_at.entry(*mask).or_insert_with(|| {
            masks.push(BatchMask {
                key: *mask,
                idx: value_idx(mask),
            });
            u32::try_from(masks.len() - 1).expect("fewer than 4G masks")
        });
        self.last = k;
        k
    }

    /// The operations, as [`Op`]s.
    pub fn ops(&self) -> Vec<Op<T>>
    where
        T: Clone,
    {
        self.ops
            .iter()
            .map(|op| {
                let (m, priority) = (|| rule_match(&self.masks, op), op.priority);
                match &op.what {
                    What::Insert { cookie, payload } => Op::Insert {
                        rule_match: m(),
                        priority,
                        cookie: *cookie,
                        payload: payload.clone(),
                    },
                    What::Modify { payload } => Op::Modify {
                        rule_match: m(),
                        priority,
                        payload: payload.clone(),
                    },
                    What::Remove => Op::Remove {
                        rule_match: m(),
                        priority,
                    },
                    What::Clear => Op::Clear,
                }
            })
            .collect()
    }

    /// Number of operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// True if the batch has no operation.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

/// What the writer of an insertion knows of a rule with the same match and priority
/// ([`Classifier::prim_insert`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Existing {
    /// Nothing: it is searched for.
    Search,
    /// Nothing, but the match's hash in its subtable ([`WriteHashes::hash`]), with which it is
    /// searched for.
    Hashed(u64),
    /// There is none ([`Ops::insert_new`]): no search (debug builds check).
    Absent,
}

impl Existing {
    /// The hash to search with, if the caller made it.
    fn hash(self) -> Option<u64> {
        match self {
            Existing::Hashed(h) => Some(h),
            Existing::Search | Existing::Absent => None,
        }
    }
}

/// Checks what can be checked without the table: the mask's bits and the prerequisites.
#[cfg(any(test, feature = "test-utils"))]
pub(crate) fn validate(m: &Match) -> Result<(), Error> {
    validate_mask(m)?;
    m.check_prerequisites().map_err(Error::Prerequisite)
}

/// The first of a match's two checks: no mask bit outside the fields.
fn validate_mask(m: &Match) -> Result<(), Error> {
    static VALID: std::sync::OnceLock<FlowKey> = std::sync::OnceLock::new();
    let valid = VALID.get_or_init(FlowKey::valid_bits);
    for (w, (bits, ok)) in m.mask().words.iter().zip(valid.words.iter()).enumerate() {
        let bad = bits & !ok;
        if bad != 0 {
            return Err(Error::InvalidMask { word: w, bits: bad });
        }
    }
    Ok(())
}

/// The classifier's writer: owns the rules, commits batches, hands out [`Reader`]s.
///
/// There is one writer (it is `Send`, not `Clone`); readers are any number of [`Reader`]s in
/// any threads.
pub struct Classifier<T> {
    shared: Arc<ArcSwap<RuleSet<T>>>,
    spare: Arc<RuleSet<T>>,
    /// An empty rule set that holds the spare's place while the spare is moved out of `self`
    /// ([`Classifier::take_spare_now`]): to be written and published, or replayed onto; the
    /// move then changes no reference count (a clone and a drop are locked instructions).
    /// Never read; `None` only while the spare is out.
    stand_in: Option<Arc<RuleSet<T>>>,
    /// What the last batch changed in the published version and not yet in the spare.
    pending: Log<T>,
    masks: HashMap<FlowKey, Arc<Mask>, WordBuildHasher>,
    /// The mask interned last (also in `masks`).
    last_mask: Option<Arc<Mask>>,
    /// The address of the mask the last map lookup of [`Classifier::interned`] found (an
    /// identity only, never read through).
    last_seen: usize,
    masks_pruned_at: usize,
    /// The masks and [`Match::prereq_bits`] of the last matches whose prerequisites held
    /// (distinct pairs, replaced in turn): the prerequisite check depends on these alone, and
    /// a batch's matches mostly share a few (a set of TCP and UDP rules has two).
    /// (Up to [`N_VALID`], on the heap: a bridge holds 255 tables, most of them never used.)
    valid: Vec<(FlowKey, u32)>,
    /// The entry of `valid` the next new pair replaces.
    valid_next: usize,
    prefixes: Arc<[PrefixField]>,
    next_seq: u64,
    /// The writer's side of the prefix tries, which both versions read (see [`crate::trie`]).
    tries: Vec<Trie>,
    /// Versions published so far (the tries' nodes are reused by this count).
    n_published: u64,
    /// The primitives of a single-operation commit or of a [`Classifier::commit_with`]
    /// (kept empty between commits, for its capacity, if small).
    applied: Vec<Prim<T>>,
    /// [`Ops`]'s held inserts (kept empty between commits, for its capacity).
    held: Vec<Held<T>>,
    /// The published version's few trie removals, which its replay makes, were prefetched
    /// for ([`RuleSet::warm_removals`]).
    warm_gone: bool,
}

impl<T> std::fmt::Debug for Classifier<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Classifier")
            .field("n_rules", &self.shared.load().len())
            .field("prefixes", &self.prefixes)
            .finish_non_exhaustive()
    }
}

impl<T> Default for Classifier<T> {
    fn default() -> Self {
        Classifier::new()
    }
}

impl<T> Classifier<T> {
    /// An empty classifier with OVS's default prefix fields, `nw_dst` and `nw_src`.
    pub fn new() -> Self {
        Classifier::with_prefixes(&[fields::NW_DST, fields::NW_SRC])
            .expect("the default prefix fields are valid")
    }

    /// An empty classifier that keeps prefix tries over `prefixes` (at most
    /// [`MAX_PREFIXES`] distinct fields; none turns prefix tracking off).
    pub fn with_prefixes(prefixes: &[KeyField]) -> Result<Self, Error> {
        if prefixes.len() > MAX_PREFIXES {
            return Err(Error::TooManyPrefixes {
                n: prefixes.len(),
                max: MAX_PREFIXES,
            });
        }
        let mut pfs = Vec::new();
        for (i, f) in prefixes.iter().enumerate() {
            if prefixes[..i].contains(f) {
                return Err(Error::BadPrefixField {
                    field: f.name,
                    why: "listed twice",
                });
            }
            if f.width == 0 || f.width > 128 || (f.width > 64 && f.width != 128) {
                return Err(Error::BadPrefixField {
                    field: f.name,
                    why: "width must be 1 to 64, or 128",
                });
            }
            let stage = packet::key::STAGES
                .iter()
                .position(|s| (s.start..s.end).contains(&usize::from(f.word)))
                .ok_or(Error::BadPrefixField {
                    field: f.name,
                    why: "outside the key",
                })?;
            pfs.push(PrefixField {
                field: *f,
                stage: u8::try_from(stage).expect("four stages"),
            });
        }
        let prefixes: Arc<[PrefixField]> = pfs.into();
        let seed = std::collections::hash_map::RandomState::new().hash_one(0x5eed_u64);
        let a = RuleSet::new(prefixes.clone(), seed);
        let b = RuleSet::new(prefixes.clone(), seed);
        Ok(Classifier {
            shared: Arc::new(ArcSwap::from_pointee(a)),
            spare: Arc::new(b),
            stand_in: Some(Arc::new(RuleSet::new(prefixes.clone(), seed))),
            pending: Log::default(),
            masks: HashMap::default(),
            last_mask: None,
            last_seen: 0,
            masks_pruned_at: 0,
            valid: Vec::new(),
            valid_next: 0,
            tries: prefixes.iter().map(|p| Trie::new(p.field.width)).collect(),
            prefixes,
            next_seq: 0,
            n_published: 0,
            applied: Vec::new(),
            held: Vec::new(),
            warm_gone: false,
        })
    }

    /// A handle for lookups from any thread.
    pub fn reader(&self) -> Reader<T> {
        Reader {
            shared: self.shared.clone(),
        }
    }

    /// The published version (what readers see now). It borrows the classifier, so the
    /// writer cannot commit (and wait for itself) while holding it:
    ///
    /// ```compile_fail
    /// let mut cls: classifier::Classifier<u32> = classifier::Classifier::new();
    /// let snap = cls.snapshot();
    /// cls.insert(openflow::Match::catch_all(), 0, 0, 1).unwrap();
    /// drop(snap);
    /// ```
    pub fn snapshot(&self) -> Snapshot<'_, T> {
        Snapshot(self.shared.load(), std::marker::PhantomData)
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.shared.load().len()
    }

    /// True if there are no rules.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The published rule with exactly this match and priority, if any: one hash probe, for
    /// a writer that keeps its own view of the rules (the pipeline's flow_mod bundles).
    pub fn find(&self, rule_match: &Match, priority: u32) -> Option<Arc<Rule<T>>> {
        let mask = match &self.last_mask {
            Some(m) if m.key == *rule_match.mask() => m,
            _ => self.masks.get(rule_match.mask())?,
        };
        let values = Values::new(rule_match.value(), mask);
        self.shared
            .load()
            .find_exact(mask, values.as_slice(), priority, None)
            .cloned()
    }

    /// Memory held by the rules and both versions' tables (allocator overhead not included).
    pub fn memory(&self) -> MemoryStats {
        let published = self.shared.load();
        let table_bytes = published.heap_bytes()
            + self.spare.own_bytes()
            + self.stand_in.as_ref().map_or(0, |s| s.own_bytes())
            + self.tries.iter().map(Trie::heap_bytes).sum::<usize>();
        let mut rule_bytes = 0;
        for r in published.rules() {
            // `ArcInner` adds two counters; the stats live in the rule (or its first version).
            rule_bytes += std::mem::size_of::<Rule<T>>() + 16;
            if let Values::Heap(b) = &r.values {
                rule_bytes += b.len() * 8;
            }
        }
        let mask_bytes = self
            .masks
            .values()
            .map(|m| std::mem::size_of::<Mask>() + 16 + m.idx.len() * 9 + m.stage_ends.len() * 2)
            .sum::<usize>()
            + self.masks.capacity() * (std::mem::size_of::<FlowKey>() + 8);
        MemoryStats {
            n_rules: published.len(),
            table_bytes,
            rule_bytes: rule_bytes + mask_bytes,
        }
    }

    /// Inserts (or replaces) one rule; see [`Op::Insert`]. `rule_match` may be a `Match` or a
    /// reference to one, which is read where it is: passing a `Match` by value copies its 720
    /// bytes first (262,144 single insertions of matches read from a large array, into an
    /// empty table and into 262,144 rules: 4 to 8% faster by reference).
    pub fn insert(
        &mut self,
        rule_match: impl Borrow<Match>,
        priority: u32,
        cookie: u64,
        payload: T,
    ) -> Result<Arc<Rule<T>>, Error> {
        self.commit_insert(rule_match.borrow(), priority, cookie, payload)
    }

    /// [`Classifier::commit_one`] for an insertion of `rule_match`, read where it is: an [`Op`]
    /// built around it and moved from call to call copied its 720 bytes each time (262,144
    /// single insertions into an empty table: 4 to 5% faster without).
    fn commit_insert(
        &mut self,
        rule_match: &Match,
        priority: u32,
        cookie: u64,
        payload: T,
    ) -> Result<Arc<Rule<T>>, Error> {
        let touched = self.touch_match(rule_match);
        self.validate_interned(rule_match, touched.as_ref().map(|t| &t.0))?;
        // The spare moved out of `self` and made mutable once for the replay, the insertion
        // and the publication: each `Arc::get_mut` is a locked instruction (three a commit
        // before).
        let mut taken = self.take_spare();
        let spare = Arc::get_mut(&mut taken).expect("no reader holds the spare (waited for)");
        self.replay_pending(spare);
        let (mask, values, h) = match touched {
            Some(t) => t,
            None => {
                let mask = self.intern(rule_match.mask());
                let values = Values::new(rule_match.value(), &mask);
                let h = spare.write_hashes(&mask, values.as_slice());
                (mask, values, h)
            }
        };
        let prim = prim_insert_in(
            spare,
            &self.tries,
            &self.prefixes,
            &mut self.next_seq,
            (mask, values),
            (priority, cookie, payload),
            Existing::Hashed(h.hash()),
            true,
        );
        spare.apply_hashed(&prim, &h);
        self.finish_spare(spare);
        self.put_published(taken);
        Ok(prim.into_rule())
    }

    /// Changes one rule's payload; see [`Op::Modify`] (`rule_match` as for
    /// [`Classifier::insert`]).
    pub fn modify(
        &mut self,
        rule_match: impl Borrow<Match>,
        priority: u32,
        payload: T,
    ) -> Result<Arc<Rule<T>>, Error> {
        self.commit_one(rule_match.borrow(), priority, Some(payload))
    }

    /// Removes one rule; see [`Op::Remove`] (`rule_match` as for [`Classifier::insert`]).
    pub fn remove(
        &mut self,
        rule_match: impl Borrow<Match>,
        priority: u32,
    ) -> Result<Arc<Rule<T>>, Error> {
        self.commit_one(rule_match.borrow(), priority, None)
    }

    /// Commits the modification of the rule `m` at `priority` to `payload`, or with no payload
    /// its removal, alone, as [`Classifier::commit`] would a batch of it, without the batch's
    /// vectors, and returns its rule. Its error is the operation's own (not
    /// [`Error::InBatch`]).
    fn commit_one(
        &mut self,
        m: &Match,
        priority: u32,
        payload: Option<T>,
    ) -> Result<Arc<Rule<T>>, Error> {
        let touched = self.touch_match(m);
        self.validate_interned(m, touched.as_ref().map(|t| &t.0))?;
        self.sync_spare();
        let mut applied = std::mem::take(&mut self.applied);
        debug_assert!(applied.is_empty());
        let r = match (payload, touched) {
            (Some(payload), Some((mask, values, h))) => self
                .prim_modify((mask, values), priority, payload, Some(&h))
                .map(|prim| self.apply_prim(prim, &mut applied, None, Some(&h))),
            (None, Some((mask, values, h))) => self
                .find_existing(&mask, &values, priority, Some(&h))
                .map(|r| self.apply_prim(Prim::Remove(r), &mut applied, None, Some(&h))),
            // A mask not interned: no rule has it, and the operation fails as it would.
            (payload, None) => {
                let rule_match = *m;
                let op = match payload {
                    Some(payload) => Op::Modify {
                        rule_match,
                        priority,
                        payload,
                    },
                    None => Op::Remove {
                        rule_match,
                        priority,
                    },
                };
                self.apply_op(op, None, true, &mut applied, None)
            }
        };
        self.finish_one(applied, r)
    }

    /// Publishes the one operation of a commit whose primitives are `applied`, if it
    /// succeeded (`r`), or rolls them back, and returns its rule.
    fn finish_one(
        &mut self,
        mut applied: Vec<Prim<T>>,
        r: Result<(), Error>,
    ) -> Result<Arc<Rule<T>>, Error> {
        let r = match r {
            Ok(()) => {
                // The one primitive's rule moved out, not cloned: a clone and the drop of the
                // list's are two locked instructions.
                let rule = if applied.len() == 1 {
                    applied.pop().map(Prim::into_rule)
                } else {
                    applied.first().map(|p| p.rule().clone())
                };
                self.publish();
                Ok(rule.expect("an applied operation gives a primitive"))
            }
            Err(e) => {
                self.roll_back(&applied);
                Err(e)
            }
        };
        self.keep_applied(applied);
        r
    }

    /// Keeps `applied` (emptied) for the next commit's primitives, if small.
    fn keep_applied(&mut self, mut applied: Vec<Prim<T>>) {
        if applied.capacity() <= KEEP_APPLIED {
            applied.clear();
            self.applied = applied;
        }
    }

    /// Applies `batch` atomically and publishes it. Returns, per operation, the rule it
    /// inserted, modified (the new version) or removed ([`Op::Clear`] gives none).
    ///
    /// On error nothing is published and the rules are as before; the error names the
    /// failing operation. Blocks only while a reader still holds the spare version, which
    /// a reader does for one lookup (or one short [`Snapshot`]).
    pub fn commit(&mut self, batch: Batch<T>) -> Result<Vec<Arc<Rule<T>>>, Error> {
        if batch.ops.len() == 1 {
            return self.commit_alone(batch);
        }
        self.warm_replay();
        self.sync_spare();
        let Batch { ops, masks, .. } = batch;
        let n = ops.len();
        // Each of the batch's masks interned, once found.
        let mut found: Vec<Option<Arc<Mask>>> = vec![None; masks.len()];
        // The masks and prerequisite bits of the last matches checked.
        let mut checked = Checked::new(masks.len());
        let mut applied: Vec<Prim<T>> = Vec::with_capacity(n);
        let mut out = Vec::with_capacity(n);
        self.spare_mut().reserve_trie_changes(n);
        // Each group is checked and prefetched where it lies (`as_slice`), then its operations
        // are moved out one by one: copying each group out first was 2% of a large batch.
        let mut rest = ops.into_iter();
        let mut index = 0;
        while !rest.as_slice().is_empty() {
            let group = &rest.as_slice()[..rest.len().min(TOUCH_GROUP)];
            let n = group.len();
            let hashes = match self.touch_ops(group, &masks, &mut found, &mut checked) {
                Ok(hashes) => hashes,
                Err((at, e)) => {
                    self.roll_back(&applied);
                    return Err(e.at(index + at));
                }
            };
            for (op, h) in rest.by_ref().take(n).zip(&hashes) {
                let r = self.apply_batch_op(
                    op,
                    &masks,
                    &mut found,
                    (false, h.as_ref()),
                    &mut applied,
                    &mut out,
                );
                if let Err(e) = r {
                    self.roll_back(&applied);
                    // A later operation's bad match is the batch's error, as if every match
                    // had been checked first.
                    for (later, op) in rest.enumerate() {
                        if !matches!(op.what, What::Clear) {
                            let m = rule_match(&masks, &op);
                            self.validate(&m).map_err(|e| e.at(index + 1 + later))?;
                        }
                    }
                    return Err(e.at(index));
                }
                index += 1;
            }
        }
        self.publish();
        Ok(out)
    }

    /// [`Classifier::commit`] of a batch of one operation.
    fn commit_alone(&mut self, batch: Batch<T>) -> Result<Vec<Arc<Rule<T>>>, Error> {
        let Batch { ops, masks, .. } = batch;
        let mut found: Vec<Option<Arc<Mask>>> = vec![None; masks.len()];
        let mut applied: Vec<Prim<T>> = Vec::with_capacity(1);
        let mut out = Vec::with_capacity(1);
        for op in ops {
            self.warm_replay();
            let mut h = None;
            if !matches!(op.what, What::Clear) {
                let k = op.mask as usize;
                found[k] = self.interned(&masks[k].key);
                if let Some(mask) = &found[k] {
                    let values = op.values.as_slice();
                    h = Some(self.touch_one(mask, values, |f| field_value(mask, values, f)));
                }
                self.validate(&rule_match(&masks, &op))
                    .map_err(|e| e.at(0))?;
            }
            self.sync_spare();
            let r = self.apply_batch_op(
                op,
                &masks,
                &mut found,
                (true, h.as_ref()),
                &mut applied,
                &mut out,
            );
            if let Err(e) = r {
                self.roll_back(&applied);
                return Err(e.at(0));
            }
        }
        self.publish();
        Ok(out)
    }

    /// Checks the matches of `ops` (at most [`TOUCH_GROUP`] of a batch whose masks are
    /// `masks`) and prefetches what applying them will read first in the spare's subtables
    /// ([`RuleSet::touch_hashed`]), for those whose masks are interned already (`found`, by
    /// the batch's mask, filled here as they are found). A batch calls it for each group of
    /// operations before applying them (a single operation has [`Classifier::touch_match`]): at
    /// 256K rules each operation misses the cache on its home cell, its arena slot and a stage
    /// index, and one operation's misses wait on nothing of another's, so asked for together
    /// they overlap. A match is checked unless its mask and prerequisite bits are those of one
    /// of the last few checked (`checked`): the check depends on nothing else. Returns, per
    /// operation, the hashes it prefetched with (those of an operation whose mask is interned,
    /// which its application uses again), or the position in `ops` and the error of the
    /// first bad match; the caller undoes what the batch applied.
    fn touch_ops(
        &mut self,
        ops: &[BatchOp<T>],
        masks: &[BatchMask],
        found: &mut [Option<Arc<Mask>>],
        checked: &mut Checked,
    ) -> Result<[Option<WriteHashes>; TOUCH_GROUP], (usize, Error)> {
        let mut looked = NO_MASK;
        for (at, op) in ops.iter().enumerate() {
            if matches!(op.what, What::Clear) {
                continue;
            }
            if !checked.contains(op.mask, op.prereqs) {
                self.validate(&rule_match(masks, op)).map_err(|e| (at, e))?;
                checked.note(op.mask, op.prereqs);
            }
            let f = &mut found[op.mask as usize];
            // A mask not interned yet (its subtable is new in this batch) is looked for once a
            // group: the group's first insertion interns it.
            if f.is_none() && looked != op.mask {
                looked = op.mask;
                *f = self.interned(&masks[op.mask as usize].key);
            }
        }
        let mut hashes = [None; TOUCH_GROUP];
        for (h, op) in hashes.iter_mut().zip(ops) {
            if matches!(op.what, What::Clear) {
                continue;
            }
            if let Some(mask) = found[op.mask as usize].as_ref() {
                let wh = self.spare.write_hashes(mask, op.values.as_slice());
                self.spare.touch_hashed(mask, &wh);
                *h = Some(wh);
            }
        }
        Ok(hashes)
    }

    /// For a commit of the one operation on `m`: prefetches what applying it reads first in
    /// the spare's subtable ([`RuleSet::touch_hashed`]) and in the tries (their jump entries,
    /// [`Trie::warm_entry`]), if its mask is interned. The checks and the replay of the last
    /// commit then overlap those cache misses (at 256K rules, one each) instead of the
    /// operation waiting on them one after another. Returns the interned mask, the masked
    /// value words and their hashes, which the search for the rule and its insertion or
    /// removal use again (three hashings of the same words were a twentieth of a single
    /// insertion's instructions).
    fn touch_match(&mut self, m: &Match) -> Option<(Arc<Mask>, Values, WriteHashes)> {
        // The match's twelve lines at once, for the reads below (a controller's matches
        // decoded in a batch before they are committed one by one are out of the caches).
        crate::hint::prefetch_all(m);
        self.warm_replay();
        let mask = self.interned(m.mask())?;
        let values = Values::new(m.value(), &mask);
        let h = self.touch_one(&mask, values.as_slice(), |f| m.value().get(f));
        Some((mask, values, h))
    }

    /// [`Classifier::touch_match`] for an operation with mask `mask` on masked value words
    /// `values`, whose field values `value` gives; returns the words' hashes.
    fn touch_one(
        &self,
        mask: &Arc<Mask>,
        values: &[u64],
        value: impl Fn(KeyField) -> u128,
    ) -> WriteHashes {
        let h = self.spare.write_hashes(mask, values);
        self.spare.touch_hashed(mask, &h);
        self.warm_entries(mask, value);
        h
    }

    /// Prefetches the trie jump entries an insertion or removal of a rule of mask `mask`
    /// reads first (its field values given by `value`).
    fn warm_entries(&self, mask: &Arc<Mask>, value: impl Fn(KeyField) -> u128) {
        for ((trie, pf), &plen) in self
            .tries
            .iter()
            .zip(self.prefixes.iter())
            .zip(&mask.trie_plens)
        {
            if plen > 0 {
                trie.warm_entry(plen, || prefix_of(value(pf.field), pf, plen));
            }
        }
    }

    /// Prefetches the trie nodes the replay of the last commit's few removals walks first
    /// ([`RuleSet::warm_removals`]), so that the checks and the subtables' replay overlap
    /// those cache misses.
    fn warm_replay(&self) {
        if self.warm_gone {
            self.shared.load().warm_removals(&self.tries, true);
        }
    }

    /// Undoes `applied` on the spare (a failed batch).
    fn roll_back(&mut self, applied: &[Prim<T>]) {
        let spare = Arc::get_mut(&mut self.spare).expect("spare is synced and unshared");
        for p in applied.iter().rev() {
            spare.apply(&p.inverse());
        }
        spare.finish_batch(&mut self.tries);
        // The spare holds what the published version holds again: nothing to replay, and
        // the cells the batch made are buried now (no version has entries there).
        spare.bury_rolled_back();
    }

    /// Publishes the spare, to which a batch was applied; the version readers leave becomes
    /// the spare.
    fn publish(&mut self) {
        let mut taken = self.take_spare_now();
        let spare = Arc::get_mut(&mut taken).expect("spare is synced and unshared");
        self.finish_spare(spare);
        self.put_published(taken);
    }

    /// The spare's last steps before its publication: the tries' pending changes applied,
    /// its log taken for the replay onto the other version, the removals it will make
    /// noted for their prefetch.
    fn finish_spare(&mut self, spare: &mut RuleSet<T>) {
        spare.finish_batch(&mut self.tries);
        self.pending = spare.take_log();
        self.warm_gone = spare.warm_removals(&self.tries, false);
    }

    /// Publishes `taken`, the spare moved out of `self` (whose place the stand-in holds) and
    /// finished ([`Classifier::finish_spare`]); the version readers leave becomes the spare.
    fn put_published(&mut self, taken: Arc<RuleSet<T>>) {
        let previous = self.shared.swap(taken);
        self.stand_in = Some(std::mem::replace(&mut self.spare, previous));
        self.spare.touch_replay(&self.pending, TOUCH_REPLAY);
        self.n_published += 1;
        self.prune_masks();
    }

    /// The spare, synced but for its replay ([`Classifier::replay_pending`]), moved out of
    /// `self` (the stand-in takes its place) so that a single commit makes it mutable once.
    fn take_spare(&mut self) -> Arc<RuleSet<T>> {
        self.wait_spare();
        self.take_spare_now()
    }

    /// The spare moved out of `self`, the stand-in in its place (no count changes).
    fn take_spare_now(&mut self) -> Arc<RuleSet<T>> {
        let stand_in = self
            .stand_in
            .take()
            .expect("a stand-in between publications");
        std::mem::replace(&mut self.spare, stand_in)
    }

    /// Waits until no reader holds the spare, then brings it up to the published version.
    fn sync_spare(&mut self) {
        self.wait_spare();
        if self.pending.is_empty() {
            return;
        }
        let mut taken = self.take_spare_now();
        let spare = Arc::get_mut(&mut taken).expect("waited for above");
        self.replay_pending(spare);
        self.stand_in = Some(std::mem::replace(&mut self.spare, taken));
    }

    /// Waits until no reader holds the spare.
    fn wait_spare(&mut self) {
        // The count alone, a plain load: no reader can take a new reference to the spare
        // (publishing paid every reader's debt on it), so one is enough, and the acquire fence
        // orders what follows after the last reader's release of it. `Arc::get_mut` is a
        // locked instruction, taken only where the spare is written.
        let mut spins = 0u32;
        while Arc::strong_count(&self.spare) != 1 {
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
            spins = spins.saturating_add(1);
        }
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        // No walk is on a trie node unlinked before the last publication any more.
        for trie in &mut self.tries {
            trie.reclaim(self.n_published);
        }
    }

    /// Replays the last commit's changes (if any) onto `spare`, the synced spare.
    fn replay_pending(&mut self, spare: &mut RuleSet<T>) {
        if self.pending.is_empty() {
            return;
        }
        // A guard, not a full `Arc`: two locked instructions fewer (the count's rise and fall).
        let published = self.shared.load();
        let log = std::mem::take(&mut self.pending);
        spare.replay(&published, &log, &mut self.tries);
        spare.recycle(log);
    }

    /// [`validate_mask`] and [`Match::check_prerequisites`], skipping both checks when the mask and
    /// prerequisite bits are those of a recent match that passed them (the checks cost several
    /// times the comparison), and the prerequisite check when the interned mask remembers those
    /// bits.
    fn validate(&mut self, m: &Match) -> Result<(), Error> {
        self.validate_interned(m, None)
    }

    /// [`Classifier::validate`] of `m`, whose mask the caller found interned as `mask`: no
    /// comparison of masks when the interned one remembers `m`'s prerequisite bits (only a
    /// match that passed both checks leaves them there).
    fn validate_interned(&mut self, m: &Match, mask: Option<&Arc<Mask>>) -> Result<(), Error> {
        let bits = m.prereq_bits();
        if mask.is_some_and(|k| k.prereqs_checked(bits)) {
            return Ok(());
        }
        if self
            .valid
            .iter()
            .any(|(listed, b)| *b == bits && listed == m.mask())
        {
            // The mask passed `validate_mask` when it was listed.
            if let Some(k) = mask {
                k.note_prereqs(bits);
            }
            return Ok(());
        }
        validate_mask(m)?;
        // More masks than the list holds (a mixed rule set): the interned mask remembers its
        // own.
        let mask = self.interned(m.mask());
        if !mask.as_ref().is_some_and(|k| k.prereqs_checked(bits)) {
            m.check_prerequisites().map_err(Error::Prerequisite)?;
            if let Some(k) = &mask {
                k.note_prereqs(bits);
            }
        }
        if self.valid.len() < N_VALID {
            self.valid.push((*m.mask(), bits));
        } else {
            self.valid[self.valid_next] = (*m.mask(), bits);
            self.valid_next = (self.valid_next + 1) % N_VALID;
        }
        Ok(())
    }

    fn intern(&mut self, mask: &FlowKey) -> Arc<Mask> {
        if let Some(m) = self.interned(mask) {
            return m;
        }
        let m = Arc::new(Mask::compile(mask, &self.prefixes));
        self.masks.insert(*mask, m.clone());
        self.last_mask = Some(m.clone());
        m
    }

    /// The interned `mask`, if it is.
    fn interned(&mut self, mask: &FlowKey) -> Option<Arc<Mask>> {
        // Rules of a batch mostly share their mask: try the last one before hashing.
        if let Some(m) = &self.last_mask {
            if m.key == *mask {
                return Some(m.clone());
            }
        }
        let m = self.masks.get(mask)?;
        // The last mask changes on the second lookup in a row of another one: each change is
        // a count raised and one lowered, locked instructions that wait for the commit's
        // earlier loads and stores (about 6 ns each here), which rules of masks in no order
        // (a mixed set committed one by one) paid at every commit.
        let seen = Arc::as_ptr(m) as usize;
        if std::mem::replace(&mut self.last_seen, seen) == seen {
            self.last_mask = Some(m.clone());
        }
        Some(m.clone())
    }

    /// Forgets interned masks no rule uses any more, once the map has doubled.
    fn prune_masks(&mut self) {
        if self.masks.len() > 64 && self.masks.len() > 2 * self.masks_pruned_at {
            self.last_mask = None;
            self.masks.retain(|_, m| Arc::strong_count(m) > 1);
            self.masks_pruned_at = self.masks.len();
        }
    }

    /// Checks `m` (with `check`) and compiles it: the interned mask and the masked value
    /// words.
    fn prepare(&mut self, m: &Match, check: bool) -> Result<(Arc<Mask>, Values), Error> {
        // As `touch_match`: the match's lines at once, for the reads that follow.
        crate::hint::prefetch_all(m);
        self.prepare_with(m, check, None)
    }

    /// [`Classifier::prepare`] with `m`'s interned mask, if the caller found it already.
    fn prepare_with(
        &mut self,
        m: &Match,
        check: bool,
        mask: Option<Arc<Mask>>,
    ) -> Result<(Arc<Mask>, Values), Error> {
        if check {
            self.validate(m)?;
        }
        let mask = match mask {
            Some(mask) => mask,
            None => self.intern(m.mask()),
        };
        let values = Values::new(m.value(), &mask);
        Ok((mask, values))
    }

    fn spare_mut(&mut self) -> &mut RuleSet<T> {
        Arc::get_mut(&mut self.spare).expect("spare is synced and unshared")
    }

    /// The primitive that inserts a rule, or replaces the one of the same match and
    /// priority; `existing`: what the caller knows of that one ([`Existing`]). `alone`: the
    /// insertion is its commit's only operation, and prefetches the trie nodes below its jump
    /// entries
    /// ([`warm_tries`]); a batch's insertions prefetch their own
    /// ([`Trie::warm_nodes`] in the insertion loop), or rebuild the trie.
    fn prim_insert(
        &mut self,
        mv: (Arc<Mask>, Values),
        priority: u32,
        cookie: u64,
        payload: T,
        existing: Existing,
        alone: bool,
    ) -> Prim<T> {
        prim_insert_in(
            &self.spare,
            &self.tries,
            &self.prefixes,
            &mut self.next_seq,
            mv,
            (priority, cookie, payload),
            existing,
            alone,
        )
    }

    fn prim_modify(
        &mut self,
        (mask, values): (Arc<Mask>, Values),
        priority: u32,
        payload: T,
        h: Option<&WriteHashes>,
    ) -> Result<Prim<T>, Error> {
        let old = self.find_existing(&mask, &values, priority, h)?;
        let new = Arc::new(Rule {
            rank: old.rank,
            priority,
            seq: old.seq,
            cookie: old.cookie,
            mask: old.mask.clone(),
            values: old.values.clone(),
            stats: Stats::of(&old),
            payload,
        });
        Ok(Prim::Replace { old, new })
    }

    /// Applies `op` (`mask`: its match's interned mask, if found already; `alone`: the
    /// commit's only operation) to the spare.
    fn apply_op(
        &mut self,
        op: Op<T>,
        mask: Option<Arc<Mask>>,
        alone: bool,
        applied: &mut Vec<Prim<T>>,
        out: Option<&mut Vec<Arc<Rule<T>>>>,
    ) -> Result<(), Error> {
        let prim = match op {
            Op::Insert {
                rule_match,
                priority,
                cookie,
                payload,
            } => self.insert_prim(&rule_match, mask, priority, cookie, payload, alone)?,
            Op::Modify {
                rule_match,
                priority,
                payload,
            } => {
                let mv = self.prepare_with(&rule_match, false, mask)?;
                self.prim_modify(mv, priority, payload, None)?
            }
            Op::Remove {
                rule_match,
                priority,
            } => {
                let (mask, values) = self.prepare_with(&rule_match, false, mask)?;
                Prim::Remove(self.find_existing(&mask, &values, priority, None)?)
            }
            Op::Clear => {
                self.clear_spare(applied);
                return Ok(());
            }
        };
        self.apply_prim(prim, applied, out, None);
        Ok(())
    }

    /// Removes every rule from the spare ([`Op::Clear`]), each removal added to `applied`.
    fn clear_spare(&mut self, applied: &mut Vec<Prim<T>>) {
        let spare = self.spare_mut();
        let all: Vec<Arc<Rule<T>>> = spare.rules().cloned().collect();
        for r in all {
            let p = Prim::Remove(r);
            spare.apply(&p);
            applied.push(p);
        }
    }

    /// Applies `prim` to the spare and adds it to `applied`, and its rule (the new one of a
    /// replacement) to `out`. `h`: the hashes of the primitive's rule, if the caller made them
    /// ([`RuleSet::write_hashes`]).
    fn apply_prim(
        &mut self,
        prim: Prim<T>,
        applied: &mut Vec<Prim<T>>,
        out: Option<&mut Vec<Arc<Rule<T>>>>,
        h: Option<&WriteHashes>,
    ) {
        match h {
            Some(h) => self.spare_mut().apply_hashed(&prim, h),
            None => self.spare_mut().apply(&prim),
        }
        if let Some(out) = out {
            out.push(prim.rule().clone());
        }
        applied.push(prim);
    }

    /// The interned mask of batch mask `m`: `found`, where an earlier operation of the batch
    /// left it, or interned now and left there.
    fn batch_mask(&mut self, m: &BatchMask, found: &mut Option<Arc<Mask>>) -> Arc<Mask> {
        found.get_or_insert_with(|| self.intern(&m.key)).clone()
    }

    /// Applies the batch operation `op` (of a batch whose masks are `masks`, those interned
    /// so far in `found`; `alone`: the commit's only operation) to the spare.
    fn apply_batch_op(
        &mut self,
        op: BatchOp<T>,
        masks: &[BatchMask],
        found: &mut [Option<Arc<Mask>>],
        (alone, h): (bool, Option<&WriteHashes>),
        applied: &mut Vec<Prim<T>>,
        out: &mut Vec<Arc<Rule<T>>>,
    ) -> Result<(), Error> {
        let BatchOp {
            what,
            mask: k,
            priority,
            values,
            ..
        } = op;
        let prim = match what {
            What::Clear => {
                self.clear_spare(applied);
                return Ok(());
            }
            What::Insert { cookie, payload } => {
                let mask = self.batch_mask(&masks[k as usize], &mut found[k as usize]);
                debug_assert_eq!(mask.idx, masks[k as usize].idx, "value words out of order");
                let existing = h.map_or(Existing::Search, |h| Existing::Hashed(h.hash()));
                self.prim_insert((mask, values), priority, cookie, payload, existing, alone)
            }
            What::Modify { payload } => {
                let mask = self.batch_mask(&masks[k as usize], &mut found[k as usize]);
                self.prim_modify((mask, values), priority, payload, h)?
            }
            What::Remove => {
                let mask = self.batch_mask(&masks[k as usize], &mut found[k as usize]);
                Prim::Remove(self.find_existing(&mask, &values, priority, h)?)
            }
        };
        self.apply_prim(prim, applied, Some(out), h);
        Ok(())
    }

    /// The primitive of [`Op::Insert`] of `rule_match` (whose interned mask is `mask`, if the
    /// caller found it); `alone` as for [`Classifier::prim_insert`].
    fn insert_prim(
        &mut self,
        rule_match: &Match,
        mask: Option<Arc<Mask>>,
        priority: u32,
        cookie: u64,
        payload: T,
        alone: bool,
    ) -> Result<Prim<T>, Error> {
        let mv = self.prepare_with(rule_match, false, mask)?;
        Ok(self.prim_insert(mv, priority, cookie, payload, Existing::Search, alone))
    }

    /// `h`: the hashes of `values` in the subtable of `mask`, if the caller made them.
    fn find_existing(
        &mut self,
        mask: &Arc<Mask>,
        values: &Values,
        priority: u32,
        h: Option<&WriteHashes>,
    ) -> Result<Arc<Rule<T>>, Error> {
        self.spare_mut()
            .find_exact(mask, values.as_slice(), priority, h.map(WriteHashes::hash))
            .cloned()
            .ok_or(Error::NotFound { priority })
    }

    /// Compiles the rule set into merged tuples for its lookups (see `compiled.rs`: a rule
    /// set of twenty masks becomes a few hash tables whose buckets list their rules), and
    /// publishes that: the same rules and the same answers, with the consulted-bits contract
    /// kept, faster for a small rule set of several masks (the bench's mixed set at 1,000
    /// rules: hits with tracking 2.8 times as many a second, with fewer bits consulted).
    /// The compiled form lasts until the next change: call this when the rule set has settled
    /// (a daemon, after its tables have been still for a while). Returns the compiled form's
    /// number of tables; or, leaving the rule set as it was, why not ([`Uncompiled`]): one
    /// subtable, more than [`crate::COMPILE_MAX_RULES`] rules, masks too wide, a compiled
    /// form of as many tables as subtables or more than [`crate::COMPILED_MAX_TABLES`], or one
    /// that consults more bits than the subtables on a sample of keys (wider megaflows). Waits,
    /// as a commit does, while a reader still holds the spare version.
    pub fn try_compile(&mut self) -> Result<usize, Uncompiled> {
        self.sync_spare();
        let tables = self.spare_mut().compile()?;
        self.publish();
        Ok(tables)
    }

    /// [`Classifier::try_compile`], reporting only whether it compiled.
    pub fn compile(&mut self) -> bool {
        self.try_compile().is_ok()
    }

    /// True if lookups in the published version use its compiled form
    /// ([`Classifier::compile`]).
    pub fn is_compiled(&self) -> bool {
        self.shared.load().is_compiled()
    }

    /// Brings the spare version up to date now: the replay of the last commit onto it, which
    /// the next commit would do first. After a bulk load, this takes that work out of the
    /// next change's latency (and lets a benchmark count it). Waits, as a commit does, while a
    /// reader still holds the spare.
    pub fn settle(&mut self) {
        self.sync_spare();
    }

    /// Applies the operations `f` gives to an [`Ops`] atomically, and publishes them:
    /// [`Classifier::commit`] without a [`Batch`] (a batch of 100,000 inserts holds 75 MB of
    /// matches, copied several times on their way in). `Ops::insert_by` and `Ops::modify_by`
    /// take the match from the payload itself. Each operation is checked as it comes; after
    /// the first error the others are ignored, the operations applied are undone, nothing
    /// is published, and the error names the failing operation. Returns the number of
    /// operations.
    pub fn commit_with<F>(&mut self, f: F) -> Result<usize, Error>
    where
        F: FnOnce(&mut Ops<'_, T>),
    {
        self.commit_ops(true, f)
    }

    /// [`Classifier::commit_with`] for operations whose matches the caller has checked
    /// already (mask bits and prerequisites, as [`Batch`] operations are checked): they are
    /// not checked again. An unchecked bad match is stored as it is; it never panics.
    pub fn commit_with_unchecked<F>(&mut self, f: F) -> Result<usize, Error>
    where
        F: FnOnce(&mut Ops<'_, T>),
    {
        self.commit_ops(false, f)
    }

    fn commit_ops<F>(&mut self, check: bool, f: F) -> Result<usize, Error>
    where
        F: FnOnce(&mut Ops<'_, T>),
    {
        self.warm_replay();
        let applied = std::mem::take(&mut self.applied);
        let held = std::mem::take(&mut self.held);
        debug_assert!(applied.is_empty() && held.is_empty());
        let mut ops = Ops {
            cls: self,
            applied,
            n: 0,
            failed: None,
            check,
            held,
            synced: false,
        };
        f(&mut ops);
        if ops.failed.is_none() {
            ops.apply_held();
        }
        let Ops {
            applied,
            n,
            failed,
            mut held,
            synced,
            ..
        } = ops;
        if !synced {
            // Failed before anything was applied: the roll-back still wants the spare.
            self.sync_spare();
        }
        let r = match failed {
            Some(e) => {
                self.roll_back(&applied);
                Err(e.at(n))
            }
            None => {
                self.publish();
                Ok(n)
            }
        };
        self.keep_applied(applied);
        // Held inserts not applied (the commit failed) are dropped here.
        held.clear();
        self.held = held;
        r
    }
}

/// Largest list of primitives a commit keeps for the next one.
const KEEP_APPLIED: usize = 1024;

/// Most arena slots a publication prefetches for the next commit's replay
/// ([`RuleSet::touch_replay`]).
const TOUCH_REPLAY: usize = 8;

/// The operations of one [`Classifier::commit_with`], checked as they come and applied in
/// their order. Each returns false if this or an earlier operation failed (the commit then
/// fails as a whole).
pub struct Ops<'a, T> {
    cls: &'a mut Classifier<T>,
    applied: Vec<Prim<T>>,
    n: usize,
    failed: Option<Error>,
    check: bool,
    /// Inserts checked and compiled but not applied yet (an insert cannot fail once its match
    /// is checked): applied [`TOUCH_GROUP`] at a time, after the group's prefetches, as a
    /// `Batch` commit applies its operations ([`Classifier::touch_ops`]). Any other operation,
    /// and the end of the commit, applies them first.
    held: Vec<Held<T>>,
    /// True once the spare was brought up to the published version ([`Classifier::sync_spare`],
    /// which the first application does: a commit's first insert is checked, and its cache
    /// lines asked for, before the replay of the last commit).
    synced: bool,
}

/// An insert [`Ops`] holds.
struct Held<T> {
    mask: Arc<Mask>,
    values: Values,
    /// The values' hashes, made once for the prefetch, the search for the rule and its
    /// insertion (by the commit's first operation, or with its group's prefetches).
    hashes: Option<WriteHashes>,
    priority: u32,
    cookie: u64,
    payload: T,
    known_new: bool,
}

impl<T> std::fmt::Debug for Ops<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ops")
            .field("n", &self.n)
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

impl<T> Ops<'_, T> {
    /// Room for `n` more operations.
    pub fn reserve(&mut self, n: usize) {
        self.applied.reserve(n);
    }

    /// Holds the insert of `r` (a checked and compiled match, or the error that checking it
    /// gave), and applies the held inserts once there are a group of them.
    fn hold(
        &mut self,
        r: Result<(Arc<Mask>, Values), Error>,
        priority: u32,
        cookie: u64,
        payload: T,
        known_new: bool,
    ) -> bool {
        match r {
            Ok((mask, values)) => {
                self.held.push(Held {
                    mask,
                    values,
                    hashes: None,
                    priority,
                    cookie,
                    payload,
                    known_new,
                });
                self.n += 1;
                if self.n == 1 {
                    // The commit's first operation (maybe its only one): its misses overlap
                    // the replay of the last commit, which its application waits for.
                    let h = &mut self.held[0];
                    let values = h.values.as_slice();
                    let wh = self
                        .cls
                        .touch_one(&h.mask, values, |f| field_value(&h.mask, values, f));
                    h.hashes = Some(wh);
                }
                if self.held.len() == TOUCH_GROUP {
                    self.apply_held();
                }
                true
            }
            Err(e) => {
                self.failed = Some(e);
                false
            }
        }
    }

    /// Brings the spare up to date the first time (every operation on the spare comes here
    /// first), then applies the held inserts, in order, after prefetching what they will read
    /// first in the spare (for more than one).
    fn apply_held(&mut self) {
        if !self.synced {
            self.cls.sync_spare();
            self.synced = true;
        }
        if self.held.len() > 1 {
            for h in &mut self.held {
                let spare = &self.cls.spare;
                let wh = *h
                    .hashes
                    .get_or_insert_with(|| spare.write_hashes(&h.mask, h.values.as_slice()));
                spare.touch_hashed(&h.mask, &wh);
            }
        }
        let alone = self.n == 1;
        for h in self.held.drain(..) {
            let wh = h
                .hashes
                .unwrap_or_else(|| self.cls.spare.write_hashes(&h.mask, h.values.as_slice()));
            let prim = self.cls.prim_insert(
                (h.mask, h.values),
                h.priority,
                h.cookie,
                h.payload,
                if h.known_new {
                    Existing::Absent
                } else {
                    Existing::Hashed(wh.hash())
                },
                alone,
            );
            self.cls.spare_mut().apply_hashed(&prim, &wh);
            self.applied.push(prim);
        }
    }

    fn done(&mut self, r: Result<Prim<T>, Error>) -> bool {
        match r {
            Ok(prim) => {
                self.cls.spare_mut().apply(&prim);
                self.applied.push(prim);
                self.n += 1;
                true
            }
            Err(e) => {
                self.failed = Some(e);
                false
            }
        }
    }

    /// [`Op::Insert`].
    pub fn insert(&mut self, rule_match: &Match, priority: u32, cookie: u64, payload: T) -> bool {
        self.insert_match(rule_match, priority, cookie, payload, false)
    }

    /// [`Op::Insert`] of a rule the caller knows to be new: no rule with this match and
    /// priority is in the table or earlier in this commit (a writer that keeps its own view
    /// of the rules, as the pipeline's bundles do). It skips the search for the rule to
    /// replace. Breaking the promise leaves two rules of one identity (a lookup gives one of
    /// them; each removal takes one); debug builds check it.
    pub fn insert_new(
        &mut self,
        rule_match: &Match,
        priority: u32,
        cookie: u64,
        payload: T,
    ) -> bool {
        self.insert_match(rule_match, priority, cookie, payload, true)
    }

    /// [`Ops::insert`], or with `known_new` [`Ops::insert_new`].
    fn insert_match(
        &mut self,
        rule_match: &Match,
        priority: u32,
        cookie: u64,
        payload: T,
        known_new: bool,
    ) -> bool {
        if self.failed.is_some() {
            return false;
        }
        let r = self.cls.prepare(rule_match, self.check);
        self.hold(r, priority, cookie, payload, known_new)
    }

    /// [`Op::Insert`] of a payload that holds its match (`key` finds it).
    pub fn insert_by<K>(&mut self, priority: u32, cookie: u64, payload: T, key: K) -> bool
    where
        K: FnOnce(&T) -> &Match,
    {
        if self.failed.is_some() {
            return false;
        }
        let r = self.cls.prepare(key(&payload), self.check);
        self.hold(r, priority, cookie, payload, false)
    }

    /// [`Op::Modify`].
    pub fn modify(&mut self, rule_match: &Match, priority: u32, payload: T) -> bool {
        if self.failed.is_some() {
            return false;
        }
        self.apply_held();
        let r = self
            .cls
            .prepare(rule_match, self.check)
            .and_then(|mv| self.cls.prim_modify(mv, priority, payload, None));
        self.done(r)
    }

    /// [`Op::Modify`] of a payload that holds its match (`key` finds it).
    pub fn modify_by<K>(&mut self, priority: u32, payload: T, key: K) -> bool
    where
        K: FnOnce(&T) -> &Match,
    {
        if self.failed.is_some() {
            return false;
        }
        self.apply_held();
        let r = self
            .cls
            .prepare(key(&payload), self.check)
            .and_then(|mv| self.cls.prim_modify(mv, priority, payload, None));
        self.done(r)
    }

    /// [`Op::Remove`].
    pub fn remove(&mut self, rule_match: &Match, priority: u32) -> bool {
        if self.failed.is_some() {
            return false;
        }
        self.apply_held();
        let r = self
            .cls
            .prepare(rule_match, self.check)
            .and_then(|(mask, values)| self.cls.find_existing(&mask, &values, priority, None))
            .map(Prim::Remove);
        self.done(r)
    }
}

/// What [`Classifier::memory`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryStats {
    /// Rules.
    pub n_rules: usize,
    /// Hash tables, stage indices and tries of both versions.
    pub table_bytes: usize,
    /// The rules themselves (shared by both versions), their counters and the masks.
    pub rule_bytes: usize,
}

impl MemoryStats {
    /// Total bytes per rule (0 when empty).
    pub fn bytes_per_rule(&self) -> f64 {
        if self.n_rules == 0 {
            0.0
        } else {
            (self.table_bytes + self.rule_bytes) as f64 / self.n_rules as f64
        }
    }
}

/// Mask and prerequisite-bit pairs [`Classifier::validate`] remembers.
const N_VALID: usize = 4;

/// The match of `op` (not a clear) of a batch whose masks are `masks`.
fn rule_match<T>(masks: &[BatchMask], op: &BatchOp<T>) -> Match {
    let m = &masks[op.mask as usize];
    let mut value = FlowKey::default();
    for (i, w) in m.idx.iter().zip(op.values.as_slice()) {
        value.words[usize::from(*i)] = *w;
    }
    Match::new(value, m.key)
}

/// A lookup handle for reader threads: cheap to clone, `Send + Sync` when `T` is.
pub struct Reader<T> {
    shared: Arc<ArcSwap<RuleSet<T>>>,
}

impl<T> Clone for Reader<T> {
    fn clone(&self) -> Self {
        Reader {
            shared: self.shared.clone(),
        }
    }
}

impl<T> std::fmt::Debug for Reader<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader").finish_non_exhaustive()
    }
}

impl<T> Reader<T> {
    /// The current version, to run several lookups on one consistent set of rules (a
    /// packet batch). Hold it briefly: the writer's next commit waits for it.
    #[inline]
    pub fn snapshot(&self) -> Snapshot<'_, T> {
        Snapshot(self.shared.load(), std::marker::PhantomData)
    }

    /// One lookup on the current version; see [`RuleSet::lookup`].
    #[inline]
    pub fn lookup(&self, key: &FlowKey, wc: Option<&mut FlowKey>) -> Option<Arc<Rule<T>>> {
        self.shared.load().lookup(key, wc).cloned()
    }
}

/// A consistent version of the rules held by a reader; dereferences to [`RuleSet`].
///
/// The writer's next commit waits until the snapshot is dropped: hold it for one batch of
/// lookups, not across blocking calls.
pub struct Snapshot<'a, T>(Guard<Arc<RuleSet<T>>>, std::marker::PhantomData<&'a ()>);

impl<T> std::ops::Deref for Snapshot<'_, T> {
    type Target = RuleSet<T>;

    #[inline]
    fn deref(&self) -> &RuleSet<T> {
        &self.0
    }
}

impl<T> std::fmt::Debug for Snapshot<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("n_rules", &self.len())
            .finish_non_exhaustive()
    }
}

/// [`Classifier::prim_insert`] with the spare given: a single commit's, moved out of the
/// classifier ([`Classifier::take_spare`]), or the classifier's own.
#[allow(clippy::too_many_arguments)]
fn prim_insert_in<T>(
    spare: &RuleSet<T>,
    tries: &[Trie],
    prefixes: &[PrefixField],
    next_seq: &mut u64,
    (mask, values): (Arc<Mask>, Values),
    (priority, cookie, payload): (u32, u64, T),
    existing: Existing,
    alone: bool,
) -> Prim<T> {
    let seq = *next_seq;
    let probe = Rule {
        rank: rank(priority, seq),
        priority,
        seq,
        cookie,
        mask,
        values,
        stats: Stats::Own(RuleStats::default()),
        payload,
    };
    if alone {
        warm_tries(tries, prefixes, &probe);
    }
    let old = if existing == Existing::Absent {
        debug_assert!(
            spare
                .find_exact(&probe.mask, probe.values.as_slice(), priority, None)
                .is_none(),
            "insert_new of a rule already present"
        );
        None
    } else {
        // Read through a shared reference: `Arc::get_mut` is a locked instruction.
        spare
            .find_exact(
                &probe.mask,
                probe.values.as_slice(),
                priority,
                existing.hash(),
            )
            .cloned()
    };
    match old {
        Some(old) => {
            let new = Arc::new(Rule {
                rank: old.rank,
                seq: old.seq,
                ..probe
            });
            Prim::Replace { old, new }
        }
        None => {
            *next_seq += 1;
            Prim::Insert(Arc::new(probe))
        }
    }
}

/// Prefetches the trie nodes the insertion of `r`'s prefixes will walk first (see
/// [`Trie::warm_nodes`]), so that those cache misses overlap the subtable's instead of
/// following them at the publication.
#[inline]
fn warm_tries<T>(tries: &[Trie], prefixes: &[PrefixField], r: &Rule<T>) {
    let plens = r.mask.trie_plens;
    for ((trie, pf), &plen) in tries.iter().zip(prefixes.iter()).zip(&plens) {
        if plen > 0 {
            trie.warm_nodes(plen, || crate::ruleset::prefix_bits(r, pf, plen));
        }
    }
}
