//! [`RuleSet`]: one version of the classifier's rules, the structure lookups run on.
//!
//! A rule set is a list of subtables (one per distinct mask) ordered by their highest
//! priority, plus a handle on one prefix trie per configured prefix field. It is changed only
//! by the writer, through primitive operations ([`Prim`]), and only while no reader can see it;
//! the arrays its subtables share with the other version, and the tries, are written in place
//! under the protocols of [`crate::shared`] and [`crate::trie`].

use std::collections::HashMap;
use std::sync::Arc;

use packet::key::FlowKey;

use crate::compiled::{Compiled, Uncompiled, COMPILED_MAX_TABLES, COMPILE_MAX_RULES};
use crate::plan::{below, Plan};
use crate::rule::{rank_priority, Mask, Rule};
use crate::subtable::{LogBufs, Raw, SubLog, Subtable, TrieCtx, Walked, WriteHashes};
use crate::trie::{prefix_mask, Trie, TrieView};
use crate::PrefixField;

/// Most keys [`RuleSet::lookup_batch`] takes through the subtables together (a PMD's
/// receive batch); longer slices are looked up in chunks of this size.
pub const BATCH: usize = 32;

/// Largest vectors a replayed log gives back for the next batch's ([`RuleSet::recycle`]).
pub(crate) const RECYCLE_MAX: usize = 64;

/// Most trie changes per trie whose list a version keeps for the next batch (bundles of a
/// thousand rules reuse theirs; a larger batch's list is freed after it).
const KEEP_TRIE_CHANGES: usize = 4096;

/// Files the net change `n` of one prefix: a rise in `adds`, a fall in `gone`.
fn file_net(n: (u128, u8, i64), adds: &mut Vec<(u128, u8, i64)>, gone: &mut Vec<(u128, u8, i64)>) {
    match n.2.cmp(&0) {
        std::cmp::Ordering::Greater => adds.push(n),
        std::cmp::Ordering::Less => gone.push(n),
        std::cmp::Ordering::Equal => {}
    }
}

/// Most operations a batch prefetches for at once ([`RuleSet::touch_hashed`]).
pub(crate) const TOUCH_GROUP: usize = 32;

/// The most node positions a trie may have for lookups without tracking to walk it
/// ([`RuleSet`]'s `cached_tries`): 16,384 16-byte nodes, 256 KB, a quarter of this guest's L2.
/// (Tests use a small limit, so that both ways are tested.)
const CACHED_TRIE_NODES: usize = if cfg!(test) { 64 } else { 1 << 14 };

/// How many probes of a lookup without tracking miss before it walks tries too large for the
/// caches ([`RuleSet::lookup_nowc`]).
/// Mixed masks (20 subtables), misses and hits a second against never walking: at 16,384
/// rules 2.2x and 0.96x, at 262,144 rules 2.2x and 1.0x; after 4 misses, hits there read 0.76x.
const NOWC_WALK_AFTER: u32 = 6;

/// The best rule a lookup found so far, with bounds on its priority taken from the priorities
/// of the subtable it came from: a rule's rank is a cache miss in a table larger than the
/// caches, and the bounds settle most decisions without it (subtables in priority bands of
/// their own, as an ACL's, need it only when two bands meet).
#[derive(Debug)]
struct Best<'a, T> {
    rule: &'a Arc<Rule<T>>,
    /// `lo <= rule.priority <= hi`.
    lo: u32,
    hi: u32,
}

impl<T> Clone for Best<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Best<'_, T> {}

impl<'a, T> Best<'a, T> {
    /// Rule `rule`, found in a subtable whose priorities are `range`.
    #[inline]
    fn new(rule: &'a Arc<Rule<T>>, range: (u32, u32)) -> Self {
        Best {
            rule,
            lo: range.0,
            hi: range.1,
        }
    }

    /// The rule's priority, read from its rank, and known exactly from now on.
    #[inline]
    fn priority(&mut self) -> u32 {
        let p = rank_priority(self.rule.rank);
        (self.lo, self.hi) = (p, p);
        p
    }

    /// True if no rule of a subtable whose highest priority is `max` can beat this one.
    #[inline]
    fn beats_all(&mut self, max: u32) -> bool {
        if max < self.lo {
            true
        } else if max >= self.hi {
            false
        } else {
            max < self.priority()
        }
    }

    /// Takes `rule`, found in a subtable whose priorities are `range`, into `best` if there is
    /// none yet or it beats the one there.
    #[inline]
    fn found(best: &mut Option<Self>, rule: &'a Arc<Rule<T>>, range: (u32, u32)) {
        match best {
            None => *best = Some(Best::new(rule, range)),
            Some(b) => b.offer(rule, range),
        }
    }

    /// Takes `rule`, found in a subtable whose priorities are `range`, if it beats this one.
    #[inline]
    fn offer(&mut self, rule: &'a Arc<Rule<T>>, range: (u32, u32)) {
        if range.1 < self.lo {
            // Lower priority.
        } else if range.0 > self.hi {
            *self = Best::new(rule, range);
        } else if rule.rank > self.rule.rank {
            *self = Best::new(rule, range);
            self.priority();
        } else {
            self.priority();
        }
    }
}

/// A change the writer has resolved against the current rules; it cannot fail.
#[derive(Debug)]
pub(crate) enum Prim<T> {
    Insert(Arc<Rule<T>>),
    Remove(Arc<Rule<T>>),
    /// Replace the rule with the same match and rank by this one.
    Replace {
        old: Arc<Rule<T>>,
        new: Arc<Rule<T>>,
    },
}

impl<T> Clone for Prim<T> {
    fn clone(&self) -> Self {
        match self {
            Prim::Insert(r) => Prim::Insert(r.clone()),
            Prim::Remove(r) => Prim::Remove(r.clone()),
            Prim::Replace { old, new } => Prim::Replace {
                old: old.clone(),
                new: new.clone(),
            },
        }
    }
}

impl<T> Prim<T> {
    /// The rule an operation of this primitive gives back: the one inserted or removed, or
    /// the new one of a replacement.
    pub(crate) fn rule(&self) -> &Arc<Rule<T>> {
        match self {
            Prim::Insert(r) | Prim::Remove(r) | Prim::Replace { new: r, .. } => r,
        }
    }

    /// [`Prim::rule`], taken.
    pub(crate) fn into_rule(self) -> Arc<Rule<T>> {
        match self {
            Prim::Insert(r) | Prim::Remove(r) | Prim::Replace { new: r, .. } => r,
        }
    }

    pub(crate) fn inverse(&self) -> Prim<T> {
        match self {
            Prim::Insert(r) => Prim::Remove(r.clone()),
            Prim::Remove(r) => Prim::Insert(r.clone()),
            Prim::Replace { old, new } => Prim::Replace {
                old: new.clone(),
                new: old.clone(),
            },
        }
    }
}

/// One consistent version of the rules. Readers get it through a
/// [`Snapshot`](crate::Snapshot); see the crate documentation for the lookup contract.
#[derive(Debug)]
pub struct RuleSet<T> {
    subtables: Vec<Option<Subtable<T>>>,
    free: Vec<u32>,
    /// Subtable index by the address of its interned mask.
    by_mask: HashMap<usize, u32, crate::rule::WordBuildHasher>,
    /// Non-empty subtables as (highest priority, index), highest first.
    order: Vec<(u32, u32)>,
    /// The order's subtables by their prefix lengths, for lookups that walk every trie first
    /// (made with the order).
    plan: Arc<Plan>,
    /// This version's handles on the tries, which both versions and the writer share (the
    /// writer's side, [`Trie`], is the classifier's; see [`crate::trie`]).
    tries: Vec<TrieView>,
    /// Bit `t` set if trie `t`'s readers walk from its root, not from a jump table (a trie of
    /// fewer than a thousand or so nodes): [`Subtable::explain_miss`] may probe a stage's index
    /// before walking such tries.
    small_tries: u8,
    /// True if every trie's node array is small enough to stay in the caches
    /// ([`CACHED_TRIE_NODES`]): lookups without tracking then walk the tries too.
    cached_tries: bool,
    /// Trie changes of the current batch, per trie, as (prefix, length, +1/-1), applied
    /// sorted by [`RuleSet::finish_batch`] so that consecutive walks share their upper path in
    /// cache.
    trie_pending: Vec<Vec<(u128, u8, i8)>>,
    /// The net removals among the last batch's trie changes, per trie, in prefix order (its
    /// additions went into the shared tries before it was published): they wait for the replay
    /// of that batch onto the other version ([`RuleSet::replay`]), when no version has those
    /// rules. Only the removals: a list of every change of a 262,144-rule batch, kept in each
    /// version, was a third of the table's memory.
    last_gone: Vec<Vec<(u128, u8, i64)>>,
    /// Subtables the current batch changed (their own logs say how), for the replay onto
    /// the other version.
    touched: Vec<u32>,
    /// The additions among the last batch's net trie changes while they are applied (kept for its
    /// capacity, if small).
    trie_adds: Vec<(u128, u8, i64)>,
    /// A replayed log's list, kept for its capacity ([`RuleSet::recycle`]).
    log_buf: Vec<(u32, Option<SubLog<T>>)>,
    /// The lists of the subtables' logs replayed onto this version, for its next batch's
    /// logs ([`Subtable::recycle_log`]).
    log_bufs: LogBufs,
    prefixes: Arc<[PrefixField]>,
    seed: u64,
    n_rules: usize,
    /// This version compiled into merged tuples ([`crate::Classifier::compile`]), which its
    /// lookups then use; dropped by any change to the version.
    compiled: Option<Arc<Compiled<T>>>,
}

/// What one batch changed in the version it was applied to, per subtable (by index, with
/// its [`Subtable`]'s log; none if the batch removed the subtable): what the replay onto the
/// other version copies.
#[derive(Debug)]
pub(crate) struct Log<T>(Vec<(u32, Option<SubLog<T>>)>);

impl<T> Default for Log<T> {
    fn default() -> Self {
        Log(Vec::new())
    }
}

impl<T> Log<T> {
    /// True if the batch changed nothing.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Most trie removals per trie a replay's walks are prefetched for
/// ([`RuleSet::warm_removals`]): a larger batch's go on from a finger.
const WARM_REMOVALS: usize = 4;

/// How many rules' values [`RuleSet::consulted_bits`] looks up (three keys each): about a tenth
/// of a millisecond, against the compile's 0.3 to 0.8 ms.
const CONSULT_SAMPLE: usize = 256;

impl<T> RuleSet<T> {
    /// Prefetches what the replay of this (published) version's batch reads first in each
    /// trie to remove the prefixes of its removed rules, if they are few: the [`Jump`]
    /// entries (`nodes` false, at the publication), or the nodes below them (`nodes` true, at
    /// the next commit's start, the entries in cache by then). The removal's walk then finds
    /// them there (single deletes of 262,144 random 5-tuples: the jump node's load was a
    /// third of the removal; 10 to 15% more deletes a second with this). Returns true if it
    /// prefetched anything.
    ///
    /// [`Jump`]: crate::trie
    pub(crate) fn warm_removals(&self, tries: &[Trie], nodes: bool) -> bool {
        let mut any = false;
        for (trie, gone) in tries.iter().zip(&self.last_gone) {
            if gone.len() > WARM_REMOVALS {
                continue;
            }
            for &(bits, len, _) in gone {
                any = true;
                if nodes {
                    trie.warm_nodes(len, || bits);
                } else {
                    trie.warm_entry(len, || bits);
                }
            }
        }
        any
    }

    pub(crate) fn new(prefixes: Arc<[PrefixField]>, seed: u64) -> Self {
        RuleSet {
            subtables: Vec::new(),
            free: Vec::new(),
            by_mask: HashMap::default(),
            order: Vec::new(),
            plan: Arc::default(),
            tries: prefixes.iter().map(|_| TrieView::default()).collect(),
            small_tries: u8::MAX,
            cached_tries: true,
            trie_pending: prefixes.iter().map(|_| Vec::new()).collect(),
            last_gone: prefixes.iter().map(|_| Vec::new()).collect(),
            touched: Vec::new(),
            log_buf: Vec::new(),
            log_bufs: LogBufs::default(),
            trie_adds: Vec::new(),
            prefixes,
            seed,
            n_rules: 0,
            compiled: None,
        }
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.n_rules
    }

    /// True if there are no rules.
    pub fn is_empty(&self) -> bool {
        self.n_rules == 0
    }

    /// Number of subtables (distinct masks).
    pub fn n_subtables(&self) -> usize {
        self.order.len()
    }

    /// Every rule, in no particular order.
    pub fn rules(&self) -> impl Iterator<Item = &Arc<Rule<T>>> {
        self.subtables.iter().flatten().flat_map(|s| s.rules())
    }

    /// The highest-priority rule `key` matches (ties: the earliest inserted), and, if `wc`
    /// is given, ORs into it the bits this lookup consulted. Every packet that agrees with
    /// `key` on the bits of `wc` gets the same rule.
    #[inline]
    pub fn lookup(&self, key: &FlowKey, wc: Option<&mut FlowKey>) -> Option<&Arc<Rule<T>>> {
        match wc {
            None => self.lookup_nowc(key),
            Some(wc) => self.lookup_wc(key, wc),
        }
    }

    #[inline]
    fn lookup_nowc(&self, key: &FlowKey) -> Option<&Arc<Rule<T>>> {
        if let Some(st) = self.sole_subtable() {
            return st.find(key, self.seed);
        }
        if let Some(c) = &self.compiled {
            return c.lookup(key, None);
        }
        if self.cached_tries && self.plan.on() {
            return self.lookup_plan::<false>(key, None);
        }
        let mut best: Option<Best<'_, T>> = None;
        // Tries in the caches are walked first, as a lookup with tracking walks them, and the
        // subtables they rule out are skipped (mixed masks at 1,000 rules: misses 5x faster,
        // hits the same). Larger tries cost more than the probes they save on a hit, which
        // most often comes within a few subtables (at 262,144 rules a walk is a few misses in
        // memory; hits there read 0.75x with walks first): they are walked only once
        // `NOWC_WALK_AFTER` probes missed, when the lookup is likely a miss.
        let walk_after = if self.cached_tries {
            0
        } else {
            NOWC_WALK_AFTER
        };
        let mut missed = 0;
        let mut walked: Option<Walked> = None;
        for (max_prio, i) in &self.order {
            if let Some(b) = &mut best {
                if b.beats_all(*max_prio) {
                    break;
                }
            }
            let Some(st) = self.subtables[*i as usize].as_ref() else {
                continue;
            };
            if st.mask.trie_set != 0 && missed >= walk_after {
                let w = walked.get_or_insert_with(|| self.walked(key));
                if w.rule_out(&st.mask).is_some() {
                    continue;
                }
            }
            match st.find(key, self.seed) {
                Some(r) => Best::found(&mut best, r, st.priority_range()),
                None => missed += 1,
            }
        }
        best.map(|b| b.rule)
    }

    #[inline]
    fn lookup_wc(&self, key: &FlowKey, wc: &mut FlowKey) -> Option<&Arc<Rule<T>>> {
        // No later subtable asks what the explanation learnt.
        if let Some(st) = self.sole_subtable() {
            return self.lookup_wc_one(st, key, wc);
        }
        if let Some(c) = &self.compiled {
            return c.lookup(key, Some(wc));
        }
        if self.plan.on() {
            return self.lookup_plan::<true>(key, Some(wc));
        }
        let mut best: Option<Best<'_, T>> = None;
        // Made at the first subtable with a prefix length on a trie's field: the tries' walks
        // cost less than the probes they save (mixed masks: 19 of 20 subtables skipped on a
        // miss, 6 of 9.5 on a hit, the first one among them most of the time).
        let mut walked: Option<Walked> = None;
        for (max_prio, i) in &self.order {
            if let Some(b) = &mut best {
                if b.beats_all(*max_prio) {
                    break;
                }
            }
            let Some(st) = self.subtables[*i as usize].as_ref() else {
                continue;
            };
            // A subtable the tries rule out misses: no probe, and its explanation is its
            // earlier stages' words (the tries' bits are ORed once, at the end).
            if st.mask.trie_set != 0 {
                let w = walked.get_or_insert_with(|| self.walked(key));
                if let Some(pos) = w.rule_out(&st.mask) {
                    st.mask.or_into(wc, pos);
                    continue;
                }
            }
            // The probe keeps the hash chain at the stage ends, so that a miss is explained
            // from the stage indices without hashing again.
            let mut raw = Raw::default();
            let hash = st.hash_key_staged(key, self.seed, &mut raw);
            match st.find_hashed(key, hash) {
                Some(r) => {
                    st.mask.or_into(wc, st.mask.idx.len());
                    Best::found(&mut best, r, st.priority_range())
                }
                None => {
                    let w = walked.get_or_insert_with(|| self.walked(key));
                    st.explain_probed(&raw, w, wc);
                }
            }
        }
        if let Some(w) = &walked {
            w.finish(&self.prefixes, wc);
        }
        best.map(|b| b.rule)
    }

    /// A lookup in a rule set with a [`Plan`] (`wc` is used only if `WC`): every trie walked
    /// first, then the subtables no trie rules out probed in order, until no later subtable
    /// can beat the best rule found; the ruled-out subtables passed before that are explained
    /// together at the end ([`Plan::explain`]). The same rule and bits as the loop that tests
    /// each subtable.
    #[inline]
    fn lookup_plan<const WC: bool>(
        &self,
        key: &FlowKey,
        mut wc: Option<&mut FlowKey>,
    ) -> Option<&Arc<Rule<T>>> {
        let plan = &*self.plan;
        let mut w = self.walked(key);
        let ruled = plan.rule_out(&w);
        let n = self.order.len();
        // Positions below `stop` are passed: it moves down to the first position whose
        // subtable cannot beat the best rule, once there is one.
        let mut stop = n;
        let mut best: Option<Best<'_, T>> = None;
        let mut m = ruled.alive;
        while m != 0 {
            let p = m.trailing_zeros() as usize;
            m &= m - 1;
            if p >= stop {
                break;
            }
            let Some(st) = self.subtables[self.order[p].1 as usize].as_ref() else {
                continue;
            };
            let mut raw = Raw::default();
            let hash = if WC {
                st.hash_key_staged(key, self.seed, &mut raw)
            } else {
                st.hash_key(key, self.seed)
            };
            match st.find_hashed(key, hash) {
                Some(r) => {
                    if let Some(wc) = wc.as_deref_mut() {
                        st.mask.or_into(wc, st.mask.idx.len());
                    }
                    Best::found(&mut best, r, st.priority_range());
                    if let Some(b) = &mut best {
                        if let Some(q) = (p + 1..stop).find(|q| b.beats_all(self.order[*q].0)) {
                            stop = q;
                        }
                    }
                }
                None => {
                    if let Some(wc) = wc.as_deref_mut() {
                        st.explain_by_index(&raw, wc);
                    }
                }
            }
        }
        if let Some(wc) = wc {
            plan.explain(&ruled, below(stop), &mut w, wc);
            w.finish(&self.prefixes, wc);
        }
        best.map(|b| b.rule)
    }

    /// Compiles this version ([`Compiled`]) for its lookups, if it has several subtables, at
    /// most [`COMPILE_MAX_RULES`] rules, masks that fit, and the compiled form has fewer
    /// tables than it has subtables and at most [`COMPILED_MAX_TABLES`], and consults no
    /// more bits than the subtables do on a sample of keys ([`RuleSet::consulted_bits`]).
    /// Returns its number of tables, or why not.
    pub(crate) fn compile(&mut self) -> Result<usize, Uncompiled> {
        let n = self.order.len();
        if n < 2 {
            return Err(Uncompiled::OneSubtable);
        }
        if self.n_rules > COMPILE_MAX_RULES {
            return Err(Uncompiled::TooManyRules);
        }
        self.compiled = None;
        let c = Compiled::build(self.rules(), &self.prefixes).ok_or(Uncompiled::WideMasks)?;
        let tables = c.n_tables();
        if tables >= n || tables > COMPILED_MAX_TABLES {
            return Err(Uncompiled::NoGain {
                tables,
                subtables: n,
            });
        }
        let (compiled, subtables) = self.consulted_bits(&c);
        if compiled > subtables {
            return Err(Uncompiled::MoreBits {
                compiled,
                subtables,
            });
        }
        self.compiled = Some(Arc::new(c));
        Ok(tables)
    }

    /// The bits `c`'s lookups and the subtables' (this version uncompiled) consult in all
    /// over a sample of keys: the values of up to [`CONSULT_SAMPLE`] rules spread over the
    /// rule set, as they are (hits), with the lowest bit of their mask's last word flipped (a
    /// near miss) and with the highest bit of its first word flipped (a far one, which tries
    /// rule out in a bit or two). The bits a lookup consults are what a
    /// datapath's megaflow keeps: more of them, more megaflows, so a compiled form that would
    /// un-wildcard more is not taken however fast.
    fn consulted_bits(&self, c: &Compiled<T>) -> (u64, u64) {
        let step = (self.n_rules / CONSULT_SAMPLE).max(1);
        let (mut ours, mut theirs) = (0u64, 0u64);
        for r in self.rules().step_by(step) {
            let hit = *r.match_().value();
            let (mut near, mut far) = (hit, hit);
            let words = || r.mask.key.words.iter().enumerate();
            if let Some((i, w)) = words().rfind(|(_, w)| **w != 0) {
                near.words[i] ^= w & w.wrapping_neg();
            }
            if let Some((i, w)) = words().find(|(_, w)| **w != 0) {
                far.words[i] ^= 1 << (63 - w.leading_zeros());
            }
            for key in [hit, near, far] {
                let (mut a, mut b) = (FlowKey::default(), FlowKey::default());
                self.lookup_wc(&key, &mut a);
                c.lookup(&key, Some(&mut b));
                theirs += u64::from(a.count_ones());
                ours += u64::from(b.count_ones());
            }
        }
        (ours, theirs)
    }

    /// True if lookups use a compiled form of this version ([`crate::Classifier::compile`]).
    pub fn is_compiled(&self) -> bool {
        self.compiled.is_some()
    }

    /// The number of hash tables of this version's compiled form, if it has one.
    pub fn compiled_tables(&self) -> Option<usize> {
        self.compiled.as_ref().map(|c| c.n_tables())
    }

    /// Every trie walked for `key` ([`Walked`]).
    #[inline]
    fn walked(&self, key: &FlowKey) -> Walked {
        Walked::new(&self.prefixes, &self.tries, key)
    }

    /// The subtable of a rule set of one subtable (an exact-match table, OVS's benchmark
    /// sets): its best rule is a lookup's answer.
    #[inline]
    fn sole_subtable(&self) -> Option<&Subtable<T>> {
        match self.order[..] {
            [(_, i)] => self.subtables[i as usize].as_ref(),
            _ => None,
        }
    }

    /// A lookup's trie context: no walk begun, nothing noted.
    #[inline]
    fn trie_ctx(&self) -> TrieCtx<'_> {
        TrieCtx::new(&self.prefixes, &self.tries, self.small_tries)
    }

    /// [`RuleSet::lookup_wc`] in a rule set of the one subtable `st`.
    #[inline]
    fn lookup_wc_one<'a>(
        &'a self,
        st: &'a Subtable<T>,
        key: &FlowKey,
        wc: &mut FlowKey,
    ) -> Option<&'a Arc<Rule<T>>> {
        let mut raw = Raw::default();
        let hash = st.hash_key_staged(key, self.seed, &mut raw);
        self.find_wc_one(st, key, hash, &raw, wc)
    }

    /// The find of [`RuleSet::lookup_wc_one`] (and of a batch's keys, [`RuleSet::batch_one`])
    /// once `key` is hashed (`hash`, and the chain `raw` at its stage ends): the rule, with the
    /// mask's bits ORed into `wc` on a hit and the miss explained otherwise. Always inlined:
    /// a batch calls it from two loops.
    #[inline(always)]
    fn find_wc_one<'a>(
        &'a self,
        st: &'a Subtable<T>,
        key: &FlowKey,
        hash: u64,
        raw: &Raw,
        wc: &mut FlowKey,
    ) -> Option<&'a Arc<Rule<T>>> {
        let found = st.find_hashed(key, hash);
        match found {
            Some(_) => st.mask.or_into(wc, st.mask.idx.len()),
            None => {
                let mut ctx = self.trie_ctx();
                st.explain_miss(key, raw, &mut ctx, wc);
            }
        }
        found
    }

    /// Looks up every key of `keys` as [`RuleSet::lookup`] does: `out[i]` gets the rule of
    /// `keys[i]` and, if `wcs` is given, the bits that lookup consulted are ORed into
    /// `wcs[i]`, exactly as single lookups would (same rules, same bits).
    ///
    /// Faster on large tables: the keys go through the subtables together, up to [`BATCH`]
    /// at a time, and in each subtable too large for the caches every key is hashed and its
    /// home cell and entry prefetched before any key's entry is compared, so the cache misses
    /// of a batch overlap instead of following one another (as the datapath's megaflow cache
    /// does). A rule set of several subtables that all fit in the caches is looked up key by
    /// key, as is one whose tries rule most subtables out (a rule set with a plan), and one of
    /// a single subtable by that subtable's finds alone (`batch_one`).
    ///
    /// # Panics
    ///
    /// If `out`, or `wcs` when given, is shorter than `keys`.
    pub fn lookup_batch<'a>(
        &'a self,
        keys: &[FlowKey],
        out: &mut [Option<&'a Arc<Rule<T>>>],
        mut wcs: Option<&mut [FlowKey]>,
    ) {
        assert!(
            out.len() >= keys.len(),
            "lookup_batch: `out` is shorter than `keys`"
        );
        if let Some(w) = &wcs {
            assert!(
                w.len() >= keys.len(),
                "lookup_batch: `wcs` is shorter than `keys`"
            );
        }
        // One subtable (an exact-match table, OVS's benchmark sets): its finds alone, each
        // key's lines prefetched first if the table is too large for the caches.
        if let Some(st) = self.sole_subtable() {
            for (c, keys) in keys.chunks(BATCH).enumerate() {
                let at = c * BATCH..c * BATCH + keys.len();
                self.batch_one(
                    st,
                    keys,
                    &mut out[at.clone()],
                    wcs.as_deref_mut().map(|w| &mut w[at]),
                );
            }
            return;
        }
        // Several subtables, all small enough for the caches: key by key. Going subtable by
        // subtable overlaps cache misses there are none of, and keeps a whole batch's keys,
        // walks and consulted bits in play (twenty subtables at 1,000 rules: a third slower).
        // A compiled version, too: its lookups touch no subtable.
        if self.compiled.is_some()
            || self.order.len() > 1
                && !self
                    .subtables
                    .iter()
                    .flatten()
                    .any(Subtable::worth_touching)
        {
            match wcs {
                None => {
                    for (o, k) in out.iter_mut().zip(keys) {
                        *o = self.lookup_nowc(k);
                    }
                }
                Some(w) => {
                    for ((o, k), w) in out.iter_mut().zip(keys).zip(w.iter_mut()) {
                        *o = self.lookup_wc(k, w);
                    }
                }
            }
            return;
        }
        for (c, keys) in keys.chunks(BATCH).enumerate() {
            let at = c * BATCH..c * BATCH + keys.len();
            let out = &mut out[at.clone()];
            match wcs.as_deref_mut() {
                // Without tracking too: key by key, each key walking the tries once its
                // probes miss (`lookup_nowc`), where the batch below probes every subtable
                // for a key that misses (mixed masks, run 31, one process: misses 1.7x to
                // 1.9x at 16,384 to 262,144 rules, hits 0.96x to 1.02x).
                None if self.plan.on() => {
                    for (o, k) in out.iter_mut().zip(keys) {
                        *o = self.lookup_nowc(k);
                    }
                }
                None => self.batch::<false>(keys, out, &mut []),
                // With a plan, key by key: each key's walks skip most subtables, and going
                // subtable by subtable overlapped fewer misses than it cost (mixed masks on
                // the Intel guest, run 30: hits 1.1x, misses 1.45x key by key at 16,384 and
                // 262,144 rules, against the same batch with the plan's rule-outs).
                Some(w) if self.plan.on() => {
                    for ((o, k), wc) in out.iter_mut().zip(keys).zip(w[at].iter_mut()) {
                        *o = self.lookup_plan::<true>(k, Some(wc));
                    }
                }
                Some(w) => self.batch::<true>(keys, out, &mut w[at]),
            }
        }
    }

    /// One batch of at most [`BATCH`] keys in a rule set of the one subtable `st`: as
    /// [`RuleSet::lookup_wc_one`] and [`RuleSet::lookup_nowc`] would look each key up, with
    /// every key hashed (and, in a table too large for the caches, its lines prefetched)
    /// before any is compared. Without the priority bookkeeping and per-key trie contexts of
    /// [`RuleSet::batch`], which a single subtable does not need.
    #[inline]
    fn batch_one<'a>(
        &'a self,
        st: &'a Subtable<T>,
        keys: &[FlowKey],
        out: &mut [Option<&'a Arc<Rule<T>>>],
        wcs: Option<&mut [FlowKey]>,
    ) {
        debug_assert!(keys.len() <= BATCH && out.len() == keys.len());
        let mut hashes = [0u64; BATCH];
        match wcs {
            None => {
                for (h, k) in hashes.iter_mut().zip(keys) {
                    *h = st.hash_key(k, self.seed);
                }
                if st.worth_touching() {
                    st.touch_ahead(&hashes[..keys.len()], |i| {
                        out[i] = st.find_hashed(&keys[i], hashes[i]);
                    });
                } else {
                    for ((o, k), h) in out.iter_mut().zip(keys).zip(&hashes) {
                        *o = st.find_hashed(k, *h);
                    }
                }
            }
            Some(wcs) => {
                let mut raws = [Raw::default(); BATCH];
                for ((h, k), r) in hashes.iter_mut().zip(keys).zip(raws.iter_mut()) {
                    *h = st.hash_key_staged(k, self.seed, r);
                }
                if st.worth_touching() {
                    st.touch_ahead(&hashes[..keys.len()], |i| {
                        out[i] = self.find_wc_one(st, &keys[i], hashes[i], &raws[i], &mut wcs[i]);
                    });
                } else {
                    for ((((o, k), h), r), wc) in
                        out.iter_mut().zip(keys).zip(&hashes).zip(&raws).zip(wcs)
                    {
                        *o = self.find_wc_one(st, k, *h, r, wc);
                    }
                }
            }
        }
    }

    /// One batch of at most [`BATCH`] keys; `wcs` is used only if `WC`.
    #[inline]
    fn batch<'a, const WC: bool>(
        &'a self,
        keys: &[FlowKey],
        out: &mut [Option<&'a Arc<Rule<T>>>],
        wcs: &mut [FlowKey],
    ) {
        debug_assert!(keys.len() <= BATCH && out.len() == keys.len());
        let mut best: [Option<Best<'a, T>>; BATCH] = [None; BATCH];
        // Bit `i` is set while key `i` can still find a better rule.
        let mut live: u32 = u32::MAX >> (BATCH - keys.len());
        let mut hashes = [0u64; BATCH];
        // With `WC`, each key's hash chain at its stage ends, for explaining a miss.
        let mut raws = [Raw::default(); BATCH];
        // With `WC`, each key's trie walks, as a single lookup makes them.
        let mut walked: [Option<Walked>; BATCH] = [None; BATCH];
        for (max_prio, si) in &self.order {
            let mut m = live;
            while m != 0 {
                let i = m.trailing_zeros() as usize;
                m &= m - 1;
                if best[i].as_mut().is_some_and(|b| b.beats_all(*max_prio)) {
                    live &= !(1 << i);
                }
            }
            if live == 0 {
                break;
            }
            let Some(st) = self.subtables[*si as usize].as_ref() else {
                continue;
            };
            // Hash every key the tries do not rule out, then (for a table too large for the
            // caches) prefetch every such key's home cell and entry, so that all of a batch's
            // cache misses are in flight together.
            let mut probe = 0u32;
            let mut m = live;
            while m != 0 {
                let i = m.trailing_zeros() as usize;
                m &= m - 1;
                if WC && st.mask.trie_set != 0 {
                    let w = walked[i].get_or_insert_with(|| self.walked(&keys[i]));
                    if let Some(pos) = w.rule_out(&st.mask) {
                        st.mask.or_into(&mut wcs[i], pos);
                        continue;
                    }
                }
                probe |= 1 << i;
                hashes[i] = if WC {
                    st.hash_key_staged(&keys[i], self.seed, &mut raws[i])
                } else {
                    st.hash_key(&keys[i], self.seed)
                };
            }
            if st.worth_touching() {
                let mut m = probe;
                while m != 0 {
                    let i = m.trailing_zeros() as usize;
                    m &= m - 1;
                    st.touch(hashes[i]);
                }
            }
            // Then probe and compare, all in cache now.
            let mut m = probe;
            while m != 0 {
                let i = m.trailing_zeros() as usize;
                m &= m - 1;
                match st.find_hashed(&keys[i], hashes[i]) {
                    Some(r) => {
                        if WC {
                            st.mask.or_into(&mut wcs[i], st.mask.idx.len());
                        }
                        Best::found(&mut best[i], r, st.priority_range())
                    }
                    None if WC => {
                        let w = walked[i].get_or_insert_with(|| self.walked(&keys[i]));
                        st.explain_probed(&raws[i], w, &mut wcs[i]);
                    }
                    None => {}
                }
            }
        }
        if WC {
            for (w, wc) in walked.iter().zip(wcs.iter_mut()) {
                if let Some(w) = w {
                    w.finish(&self.prefixes, wc);
                }
            }
        }
        for (o, b) in out.iter_mut().zip(best) {
            *o = b.map(|b| b.rule);
        }
    }

    /// Finds the rule with mask `mask`, masked value words `values` and priority `priority`.
    /// `hash`: the values' hash, if the caller made it ([`RuleSet::write_hashes`]).
    pub(crate) fn find_exact(
        &self,
        mask: &Arc<Mask>,
        values: &[u64],
        priority: u32,
        hash: Option<u64>,
    ) -> Option<&Arc<Rule<T>>> {
        let i = self.by_mask.get(&mask_id(mask))?;
        self.subtables[*i as usize]
            .as_ref()?
            .find_exact(values, priority, self.seed, hash)
    }

    /// The hashes with which a write of a rule of mask `mask` and masked value words `values`
    /// probes its subtable (both versions hash alike).
    pub(crate) fn write_hashes(&self, mask: &Mask, values: &[u64]) -> WriteHashes {
        WriteHashes::of(mask, values, self.seed)
    }

    /// Prefetches what a write with hashes `h` reads first in the subtable of `mask`, if it
    /// exists and is too large for the caches (see [`Subtable::touch_write`]; a small table
    /// stays in cache, nothing to wait for).
    pub(crate) fn touch_hashed(&self, mask: &Arc<Mask>, h: &WriteHashes) {
        let st = self
            .by_mask
            .get(&mask_id(mask))
            .and_then(|i| self.subtables[*i as usize].as_ref())
            .filter(|st| st.worth_touching());
        if let Some(st) = st {
            st.touch_write(h);
        }
    }

    /// Applies one primitive. The order of subtables is brought up to date by
    /// [`RuleSet::finish_batch`].
    pub(crate) fn apply(&mut self, p: &Prim<T>) {
        self.apply_prim(p.clone(), None);
    }

    /// [`RuleSet::apply`] of `p`, whose rule's hashes the caller made
    /// ([`RuleSet::write_hashes`]).
    pub(crate) fn apply_hashed(&mut self, p: &Prim<T>, h: &WriteHashes) {
        self.apply_prim(p.clone(), Some(h));
    }

    fn apply_prim(&mut self, p: Prim<T>, h: Option<&WriteHashes>) {
        self.compiled = None;
        match p {
            Prim::Insert(r) => {
                let i = self.subtable_for(&r.mask);
                self.trie_update(&r, true);
                let st = self.subtables[i].as_mut().expect("just made");
                if st.first_change(&mut self.log_bufs) {
                    self.touched
                        .push(u32::try_from(i).expect("fewer than 4G subtables"));
                }
                match h {
                    Some(h) => st.insert_hashed(r, self.seed, h),
                    None => st.insert(r, self.seed),
                }
                self.n_rules += 1;
            }
            Prim::Remove(r) => {
                let Some(&i) = self.by_mask.get(&mask_id(&r.mask)) else {
                    debug_assert!(false, "removing a rule of an unknown subtable");
                    return;
                };
                let st = self.subtables[i as usize].as_mut().expect("indexed");
                let fresh = st.first_change(&mut self.log_bufs);
                if st.remove(&r, self.seed, h.map(WriteHashes::hash)).is_none() {
                    debug_assert!(false, "removing an unknown rule");
                    return;
                }
                if fresh {
                    self.touched.push(i);
                }
                let empty = st.n_rules == 0;
                self.n_rules -= 1;
                self.trie_update(&r, false);
                if empty {
                    self.subtables[i as usize] = None;
                    self.by_mask.remove(&mask_id(&r.mask));
                    self.free.push(i);
                }
            }
            Prim::Replace { new, .. } => {
                if let Some(&i) = self.by_mask.get(&mask_id(&new.mask)) {
                    let st = self.subtables[i as usize].as_mut().expect("indexed");
                    if st.first_change(&mut self.log_bufs) {
                        self.touched.push(i);
                    }
                    let old = st.replace(new, self.seed, h.map(WriteHashes::hash));
                    debug_assert!(old.is_some(), "replacing an unknown rule");
                }
            }
        }
    }

    /// Takes what the current batch changed (before the version is published).
    pub(crate) fn take_log(&mut self) -> Log<T> {
        // Each subtable once: a replay that buries lists its subtables before the batch
        // touches them, and a second, empty log would have the other version's replay take
        // the writer's state again after its own burials.
        self.touched.sort_unstable();
        self.touched.dedup();
        let mut log = std::mem::take(&mut self.log_buf);
        log.reserve(self.touched.len());
        for i in self.touched.drain(..) {
            // A subtable can be touched, emptied and made again at the same index: the log
            // of whatever is there now.
            let st = self.subtables[i as usize].as_mut();
            log.push((i, st.map(Subtable::take_log)));
        }
        Log(log)
    }

    /// Prefetches the arena slots (at most `n`) that a replay of `log` onto this version will
    /// write first, in subtables too large for the caches: a writer that publishes a small
    /// batch asks for them then, and they arrive before its next commit replays it.
    pub(crate) fn touch_replay(&self, log: &Log<T>, mut n: usize) {
        for (i, sublog) in &log.0 {
            let (Some(st), Some(sublog)) = (
                self.subtables.get(*i as usize).and_then(Option::as_ref),
                sublog,
            ) else {
                continue;
            };
            if n == 0 {
                return;
            }
            if st.worth_touching() {
                n -= st.touch_replay(sublog, n);
            }
        }
    }

    /// Brings this version up to `published`, to which the batch of `log` was applied last:
    /// each subtable it changed moves its entries as the batch's growths moved the shared
    /// cells and copies the entries the batch changed (the cells, stage indices and wide
    /// values are shared already), subtables it made are copied and subtables it removed
    /// dropped; the order is `published`'s. The shared tries (the writer's `tries`) lose the
    /// prefixes of the rules the batch removed, which neither version has now; this version
    /// takes their newest arrays.
    pub(crate) fn replay(&mut self, published: &RuleSet<T>, log: &Log<T>, tries: &mut [Trie]) {
        debug_assert!(self.touched.is_empty());
        self.compiled = None;
        if self.subtables.len() < published.subtables.len() {
            self.subtables
                .resize_with(published.subtables.len(), || None);
        }
        for (i, sublog) in &log.0 {
            let iu = *i as usize;
            let p = published.subtables.get(iu).and_then(Option::as_ref);
            let st = match (&mut self.subtables[iu], p, sublog) {
                (Some(st), Some(p), Some(sublog)) if st.same_as(p) => {
                    st.replay(p, sublog);
                    st
                }
                (slot, p, _) => {
                    if let Some(old) = slot.take() {
                        if self.by_mask.get(&mask_id(&old.mask)) == Some(i) {
                            self.by_mask.remove(&mask_id(&old.mask));
                        }
                    }
                    let Some(p) = p else {
                        continue;
                    };
                    self.by_mask.insert(mask_id(&p.mask), *i);
                    slot.insert(p.other_version())
                }
            };
            if let Some(sublog) = sublog.as_ref().filter(|l| l.buries()) {
                st.bury(sublog, self.seed);
                // Burials change the writer's state of the shared arrays, which the other
                // version takes at its replay: the next batch's log names this subtable even
                // if the batch leaves it alone.
                self.touched.push(*i);
            }
            #[cfg(any(test, fuzzing))]
            st.assert_cells_used();
        }
        self.free.clone_from(&published.free);
        self.order.clone_from(&published.order);
        if !Arc::ptr_eq(&self.plan, &published.plan) {
            self.plan = published.plan.clone();
        }
        self.n_rules = published.n_rules;
        for (t, trie) in tries.iter_mut().enumerate() {
            debug_assert!(
                self.trie_pending[t].is_empty(),
                "a replay pushes no trie change"
            );
            let ok = trie.apply(&published.last_gone[t]);
            debug_assert!(ok, "trie out of sync");
        }
        self.take_tries(tries);
        for gone in &mut self.last_gone {
            gone.clear();
            if gone.capacity() > KEEP_TRIE_CHANGES {
                *gone = Vec::new();
            }
        }
    }

    /// Takes back the vectors of `log`, replayed onto this version, for the logs of the next
    /// batch applied to it (small ones only): a single-rule commit then allocates none.
    pub(crate) fn recycle(&mut self, log: Log<T>) {
        let mut v = log.0;
        for (_, sublog) in v.drain(..) {
            if let Some(sublog) = sublog {
                Subtable::recycle_log(sublog, &mut self.log_bufs);
            }
        }
        if v.capacity() <= RECYCLE_MAX {
            self.log_buf = v;
        }
    }

    /// Reads the tries' newest arrays from here on (the writer's, see [`crate::trie`]).
    fn take_tries(&mut self, tries: &[Trie]) {
        let mut changed = false;
        for (view, trie) in self.tries.iter_mut().zip(tries) {
            if !view.same(trie.view()) {
                *view = trie.view().clone();
                changed = true;
            }
        }
        // What follows depends on the views alone (most commits change none).
        if changed {
            self.small_tries = small_set(&self.tries);
            self.cached_tries = self.tries.iter().all(|t| t.capacity() <= CACHED_TRIE_NODES);
        }
    }

    /// After a failed batch was undone (this version holds what the published one holds
    /// again): forgets its changes and buries the cells it made.
    ///
    /// The subtables stay listed as changed: a growth in the failed batch stays (the other
    /// version must move its entries at the next replay), and a subtable the batch emptied
    /// and the undo made again is a new one (the other version must take it).
    pub(crate) fn bury_rolled_back(&mut self) {
        for i in &self.touched {
            if let Some(st) = self.subtables[*i as usize].as_mut() {
                st.bury_rolled_back(self.seed);
            }
        }
    }

    /// Re-sorts the subtables by highest priority after a batch of primitives, and adds its
    /// rules' prefixes to the shared tries (`tries`, the writer's).
    pub(crate) fn finish_batch(&mut self, tries: &mut [Trie]) {
        self.apply_trie_pending(tries);
        // The order stands if it names as many subtables as there are, and every subtable the
        // batch changed with its highest priority as it is (the others' did not change): most
        // single-rule commits. No list to make and sort then.
        let live = self.subtables.iter().flatten().count();
        if self.order.len() == live
            && self.touched.iter().all(|&i| {
                self.subtables
                    .get(i as usize)
                    .and_then(Option::as_ref)
                    .is_some_and(|st| self.order.contains(&(st.max_priority(), i)))
            })
        {
            // The order stands; so does the plan, unless a subtable the batch changed has
            // another mask than the plan's at its position (emptied and made again).
            let stale = self.touched.iter().any(|&i| {
                let st = self.subtables.get(i as usize).and_then(Option::as_ref);
                let p = self.order.iter().position(|(_, j)| *j == i);
                matches!((st, p), (Some(st), Some(p)) if !self.plan.holds(p, &st.mask))
            });
            if stale {
                self.make_plan();
            }
            return;
        }
        self.order.clear();
        for (i, st) in self.subtables.iter().enumerate() {
            if let Some(st) = st {
                let i = u32::try_from(i).expect("fewer than 4G subtables");
                self.order.push((st.max_priority(), i));
            }
        }
        // Stable on the index, so both versions order equal-priority subtables alike.
        self.order.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        self.make_plan();
    }

    /// Makes the plan of the current order.
    fn make_plan(&mut self) {
        self.plan = Arc::new(Plan::new(self.order.iter().map(|(_, i)| {
            self.subtables
                .get(*i as usize)
                .and_then(Option::as_ref)
                .map(|st| &st.mask)
        })));
    }

    fn subtable_for(&mut self, mask: &Arc<Mask>) -> usize {
        let id = mask_id(mask);
        if let Some(i) = self.by_mask.get(&id) {
            return *i as usize;
        }
        let st = Some(Subtable::new(mask.clone()));
        let i = match self.free.pop() {
            Some(i) => {
                self.subtables[i as usize] = st;
                i
            }
            None => {
                self.subtables.push(st);
                u32::try_from(self.subtables.len() - 1).expect("fewer than 4G subtables")
            }
        };
        self.by_mask.insert(id, i);
        i as usize
    }

    /// Makes room in the tries' change lists for a batch of `n` operations: a list grown by
    /// doubling copied a large batch's changes about twice over.
    pub(crate) fn reserve_trie_changes(&mut self, n: usize) {
        for pending in &mut self.trie_pending {
            pending.reserve(n);
        }
    }

    fn trie_update(&mut self, r: &Rule<T>, add: bool) {
        let plens = r.mask.trie_plens;
        if plens.iter().all(|p| *p == 0) {
            return;
        }
        for (t, pf) in self.prefixes.iter().enumerate() {
            let plen = plens[t];
            if plen == 0 {
                continue;
            }
            let bits = prefix_bits(r, pf, plen);
            self.trie_pending[t].push((bits, plen, if add { 1 } else { -1 }));
        }
    }

    /// Nets the batch's trie changes out in prefix order and adds the prefixes whose count
    /// rose to the shared tries ([`Trie::apply`]); the removals are kept, for the replay
    /// ([`RuleSet::replay`]).
    fn apply_trie_pending(&mut self, tries: &mut [Trie]) {
        // A single insertion's prefixes: each trie's next miss asked for before any waits.
        for (trie, pending) in tries.iter().zip(&self.trie_pending) {
            if let [(bits, len, d)] = pending[..] {
                if d > 0 {
                    trie.warm_path(bits, len);
                }
            }
        }
        let mut adds = std::mem::take(&mut self.trie_adds);
        for (t, trie) in tries.iter_mut().enumerate() {
            let pending = &mut self.trie_pending[t];
            let gone = &mut self.last_gone[t];
            gone.clear();
            if pending.is_empty() {
                continue;
            }
            if let [(bits, len, d)] = pending[..] {
                if d > 0 {
                    // A single insertion's prefix: nothing to sort or net.
                    pending.clear();
                    let ok = trie.apply(&[(bits, len, i64::from(d))]);
                    debug_assert!(ok, "trie out of sync");
                    continue;
                }
            }
            sort_prefixes(pending, self.prefixes[t].field.width);
            // Net change per (prefix, length), in order: rises to `adds`, falls to `gone`.
            adds.clear();
            adds.reserve(pending.len());
            let mut net: Option<(u128, u8, i64)> = None;
            for (bits, len, d) in pending.drain(..) {
                match &mut net {
                    Some(n) if (n.0, n.1) == (bits, len) => n.2 += i64::from(d),
                    _ => {
                        if let Some(n) = net.replace((bits, len, i64::from(d))) {
                            file_net(n, &mut adds, gone);
                        }
                    }
                }
            }
            if let Some(n) = net {
                file_net(n, &mut adds, gone);
            }
            // A large batch's list goes: a table loaded by one batch would keep it for good.
            if pending.capacity() > KEEP_TRIE_CHANGES {
                *pending = Vec::new();
            }
            let ok = trie.apply(&adds);
            debug_assert!(ok, "trie out of sync");
        }
        if adds.capacity() <= RECYCLE_MAX {
            adds.clear();
            self.trie_adds = adds;
        }
        self.take_tries(tries);
    }

    /// Approximate bytes held by this version's tables (arenas, and the tries, cells and
    /// indices it shares with the other version), not counting the rules.
    pub fn heap_bytes(&self) -> usize {
        self.own_bytes()
            + self.tries.iter().map(TrieView::heap_bytes).sum::<usize>()
            + self
                .subtables
                .iter()
                .flatten()
                .map(Subtable::shared_bytes)
                .sum::<usize>()
    }

    /// [`RuleSet::heap_bytes`] without the arrays shared with the other version.
    pub(crate) fn own_bytes(&self) -> usize {
        let mut n = self.subtables.capacity() * std::mem::size_of::<Option<Subtable<T>>>();
        n += self.order.capacity() * 8 + self.by_mask.capacity() * 16;
        for st in self.subtables.iter().flatten() {
            n += st.own_bytes();
        }
        // The change lists a batch leaves behind (kept for the replay, reused by the next).
        for (pending, gone) in self.trie_pending.iter().zip(&self.last_gone) {
            n += pending.capacity() * std::mem::size_of::<(u128, u8, i8)>();
            n += gone.capacity() * std::mem::size_of::<(u128, u8, i64)>();
        }
        n + self.compiled.as_ref().map_or(0, |c| c.heap_bytes())
    }
}

/// Rule `r`'s prefix of `plen` bits on prefix field `pf`, left-aligned.
pub(crate) fn prefix_bits<T>(r: &Rule<T>, pf: &PrefixField, plen: u8) -> u128 {
    prefix_of(r.field_value(pf.field), pf, plen)
}

/// The prefix of `plen` bits of `value`, a value of prefix field `pf`, left-aligned (as the
/// tries hold prefixes).
pub(crate) fn prefix_of(value: u128, pf: &PrefixField, plen: u8) -> u128 {
    (value << (128 - u32::from(pf.field.width))) & prefix_mask(plen)
}

/// Sorts trie changes by `(prefix, length)`. A prefix of a field at most 48 bits wide sits in
/// the top of the upper half of its left-aligned `u128`, so the prefix, its length (bits 8-15)
/// and the change (bits 0-7) pack into one `u64` whose order is the wanted one: sorting those
/// takes a third of the time of sorting the tuples. Wider fields, and fewer than 32 changes,
/// sort the tuples.
fn sort_prefixes(v: &mut [(u128, u8, i8)], width: u8) {
    // A few changes (a single-rule commit) sort in place, without the packed copy.
    if width <= 48 && v.len() >= 32 {
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // Packed on purpose.
        let mut packed: Vec<u64> = v
            .iter()
            .map(|(bits, len, d)| {
                ((*bits >> 64) as u64) | u64::from(*len) << 8 | u64::from(*d as u8)
            })
            .collect();
        packed.sort_unstable();
        for (o, p) in v.iter_mut().zip(&packed) {
            #[allow(clippy::cast_possible_truncation, clippy::cast_possible_wrap)] // Unpacking.
            {
                *o = (
                    u128::from(p & !0xffff) << 64,
                    ((p >> 8) & 0xff) as u8,
                    (p & 0xff) as u8 as i8,
                );
            }
        }
    } else {
        v.sort_unstable_by_key(|(bits, len, _)| (*bits, *len));
    }
}

/// The set of tries (bit `t` for `tries[t]`) whose readers walk from the root.
fn small_set(tries: &[TrieView]) -> u8 {
    tries
        .iter()
        .enumerate()
        .filter(|(_, v)| !v.walks_from_jump())
        .fold(0, |s, (t, _)| s | 1 << t)
}

fn mask_id(m: &Arc<Mask>) -> usize {
    Arc::as_ptr(m) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Packed or not, trie changes come out sorted by (prefix, length), none lost.
        #[test]
        fn sort_prefixes_sorts_by_prefix_then_length(
            items in proptest::collection::vec((0u32..8, 0u8..=32, proptest::bool::ANY), 0..200),
            wide in proptest::bool::ANY,
        ) {
            let width = if wide { 128 } else { 32 };
            let mut v: Vec<(u128, u8, i8)> = items
                .iter()
                .map(|(a, len, add)| {
                    let bits = (u128::from(a.wrapping_mul(0x2000_0001)) << 96) & prefix_mask(*len);
                    (bits, *len, if *add { 1 } else { -1 })
                })
                .collect();
            let mut want = v.clone();
            want.sort_unstable();
            sort_prefixes(&mut v, width);
            proptest::prop_assert!(v.windows(2).all(|w| (w[0].0, w[0].1) <= (w[1].0, w[1].1)));
            v.sort_unstable();
            proptest::prop_assert_eq!(v, want);
        }
    }
}
