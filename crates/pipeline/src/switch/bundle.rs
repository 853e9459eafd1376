//! Flow_mod bundles: each flow_mod is checked against a *draft* of the tables it touches,
//! and the drafts are applied at the end, one classifier batch per table.
//!
//! # The draft
//!
//! A draft does not copy the table. It is an overlay over the live rules: a *slot* per rule
//! identity (match and OpenFlow priority) the bundle touched, holding the live rule of that
//! identity (if any) and the versions the bundle made of it. Everything else is the live
//! table, read through [`classifier::Classifier::find`] (one hash probe). So an add, and a
//! strict modify or delete, cost a few hash probes; a non-strict modify or delete scans the
//! live table once (as OVS's `collect_rules_loose` does).
//!
//! A slot does not copy a match either: its identity is the match of the flow_mod that made
//! it (the bundle's flow_mods stay alive until the commit; only their actions move into
//! the rules) or, for a slot made for a live rule that a non-strict modify or delete
//! selected, the live rule's (rebuilt from the classifier rule when needed). Every version
//! of a slot has its match, so the classifier's checks run once per slot, and are
//! remembered per mask and per the prerequisites the value satisfies (on which alone they
//! depend): a batch of rules of one shape validates the shape once.
//!
//! The draft keeps the order the previous implementation had (a list of every rule): the live
//! rules first, in dump order, then the rules the bundle added, in the order of their last
//! add. That order decides the classifier's insertion order (and so `dump-flows`) of the rules
//! a bundle (re)inserts.
//!
//! # OVS's subtable order
//!
//! OVS's classifier looks subtables up in the order of its `pvector`, which decides between
//! overlapping rules of equal priority; we encode that order in the classifier priority
//! (`priority << 16 | rank`, rank 65535 for the first subtable). [`TableMeta`] keeps, per
//! table, every mask with its number of rules per priority, and the pvector as OVS updates
//! it at each published flow_mod: an emptied subtable is removed (the last entry takes its
//! place), a new one is appended, one whose highest priority changed keeps its place, then
//! the vector is sorted by priority, stably. A flow_mod that changes no mask's highest
//! priority leaves it as it is, so the update costs O(1) for most flow_mods, O(subtables)
//! otherwise. Rules of a subtable whose rank changed move (same counters).
//!
//! A draft takes its table's [`TableMeta`] from the bridge rather than a copy of it, and
//! journals what it changes (the counts of each mask it counts in, the pvector, the masks it
//! appends) so that a failed bundle puts it back as it was: a bundle of one flow_mod costs
//! no copy of the table's masks.
//!
//! Rule expiry removes rules outside bundles and leaves the pvector as it was (it used to be
//! updated at the next flow_mod that drafts the table): [`TableMeta::removed_outside`] keeps
//! the counts right and marks the table stale, and the first flow_mod that drafts it updates
//! every subtable as before.

use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, OnceLock};

use classifier::{Ops, Rule};
use openflow::action::Action;
use openflow::flow::FlowFlags;
use openflow::Match;
use packet::key::FlowKey;

use super::{
    check_flow, check_gotos, overlaps, selects, Bridge, FlowMod, FlowModCommand, FlowModOutcome,
    OfRule, OfTable, Selectable, SwitchError, N_TABLES,
};

type LiveRule = Arc<Rule<Arc<OfRule>>>;

/// No slot (end of a hash chain).
const NONE: u32 = u32::MAX;

/// FxHash's step over whole words, for maps keyed by masks or by hashes we made ourselves.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct WordHasher(u64);

#[inline]
fn mix(h: u64, w: u64) -> u64 {
    (h.rotate_left(5) ^ w).wrapping_mul(0x517c_c1b7_2722_0a95)
}

#[inline]
fn fmix(h: u64) -> u64 {
    let h = (h ^ (h >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
    let h = (h ^ (h >> 33)).wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

impl Hasher for WordHasher {
    fn finish(&self) -> u64 {
        fmix(self.0)
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.0 = mix(self.0, u64::from_le_bytes(w));
        }
        for b in chunks.remainder() {
            self.0 = mix(self.0, u64::from(*b));
        }
    }

    fn write_u64(&mut self, i: u64) {
        self.0 = mix(self.0, i);
    }
}

type WordBuild = BuildHasherDefault<WordHasher>;

/// The hash of a rule identity: the constrained words of the match and the priority.
fn ident_hash(m: &Match, priority: u16) -> u64 {
    let mut h = u64::from(priority);
    for ((k, v), i) in m
        .mask()
        .words
        .iter()
        .zip(m.value().words.iter())
        .zip(0u64..)
    {
        if *k != 0 {
            h = mix(h, *k ^ i);
            h = mix(h, *v);
        }
    }
    fmix(h)
}

/// [`ident_hash`] of a match whose mask constrains only words `words` (in key order).
fn ident_hash_at(words: &[u8], m: &Match, priority: u16) -> u64 {
    let (k, v) = (&m.mask().words, &m.value().words);
    let mut h = u64::from(priority);
    for w in words {
        let i = usize::from(*w);
        h = mix(h, k[i] ^ u64::from(*w));
        h = mix(h, v[i]);
    }
    fmix(h)
}

/// The classifier rank of the subtable at position `i` of the pvector.
fn rank_at(i: usize) -> u16 {
    u16::MAX.saturating_sub(u16::try_from(i).unwrap_or(u16::MAX))
}

fn u32_of(n: usize) -> u32 {
    u32::try_from(n).expect("fewer than 4G rules in a draft")
}

/// The classifier's own checks (mask bits, prerequisites), done before any commit.
pub(super) fn validate_match(m: &Match) -> Result<(), String> {
    static VALID: OnceLock<FlowKey> = OnceLock::new();
    let valid = VALID.get_or_init(FlowKey::valid_bits);
    if !m.mask().is_subset_of(valid) {
        return Err("mask sets bits that belong to no field".to_string());
    }
    m.check_prerequisites().map_err(|e| e.to_string())
}

/// One mask of a table.
#[derive(Debug, Clone)]
struct MaskRec {
    key: FlowKey,
    /// Rules per OpenFlow priority (no zero counts).
    counts: BTreeMap<u16, u32>,
    /// The rank the table's committed rules with this mask have (the low 16 bits of their
    /// classifier priority); `None` if the mask is not in the committed pvector.
    rank: Option<u16>,
    /// The mask is the catch-all one.
    catch_all: bool,
    /// The words it constrains, in key order.
    words: Box<[u8]>,
    /// [`validate_match`] of matches with this mask, by [`Match::prereq_bits`] of their value.
    checks: Vec<(u32, bool)>,
    /// The journal holds the counts as they were before the bundle.
    saved: bool,
}

impl MaskRec {
    fn max(&self) -> Option<u16> {
        self.counts.last_key_value().map(|(p, _)| *p)
    }
}

/// Per table: its masks with their rule counts per priority, and OVS's subtable order.
#[derive(Debug, Clone, Default)]
pub(super) struct TableMeta {
    masks: Vec<MaskRec>,
    by_mask: HashMap<FlowKey, u32, WordBuild>,
    /// The pvector: indices into `masks` with the mask's highest priority, in lookup order.
    pv: Vec<(u32, u16)>,
    /// Rules were removed outside a bundle: `pv` may hold emptied masks and stale maxima.
    stale: bool,
    /// The mask looked up last.
    last: Option<u32>,
    /// What a bundle being drafted changed, to undo it if the bundle fails.
    journal: Option<Journal>,
}

/// What a draft changed in a [`TableMeta`] it took from its bridge: enough to put it back as
/// it was (a failed bundle changes nothing), without copying the whole of it per bundle.
#[derive(Debug, Clone, Default)]
struct Journal {
    /// Masks before the bundle (the draft only appends).
    n_masks: usize,
    /// The pvector and staleness before the bundle's first change of them.
    pv: Option<(Vec<(u32, u16)>, bool)>,
    /// The counts of each mask the bundle counted in, before its first change.
    counts: Vec<(u32, BTreeMap<u16, u32>)>,
}

impl TableMeta {
    /// Starts recording changes (see [`TableMeta::roll_back`]).
    fn begin(&mut self) {
        debug_assert!(self.journal.is_none(), "one bundle at a time");
        self.journal = Some(Journal {
            n_masks: self.masks.len(),
            ..Journal::default()
        });
    }

    /// Keeps the changes made since [`TableMeta::begin`].
    fn keep(&mut self) {
        if let Some(j) = self.journal.take() {
            for (i, _) in j.counts {
                self.masks[i as usize].saved = false;
            }
        }
    }

    /// Undoes the changes made since [`TableMeta::begin`]. What it learned stays (the
    /// remembered checks of the masks it had).
    fn roll_back(&mut self) {
        let Some(j) = self.journal.take() else {
            return;
        };
        for (i, counts) in j.counts {
            let rec = &mut self.masks[i as usize];
            rec.counts = counts;
            rec.saved = false;
        }
        for rec in self.masks.drain(j.n_masks..) {
            self.by_mask.remove(&rec.key);
        }
        if let Some((pv, stale)) = j.pv {
            self.pv = pv;
            self.stale = stale;
        }
        self.last = None;
    }

    /// Records mask `i`'s counts before their first change in the bundle.
    fn save_counts(&mut self, i: u32) {
        let rec = &mut self.masks[i as usize];
        if let Some(j) = self.journal.as_mut() {
            if !rec.saved && (i as usize) < j.n_masks {
                rec.saved = true;
                j.counts.push((i, rec.counts.clone()));
            }
        }
    }

    fn find(&mut self, key: &FlowKey) -> Option<u32> {
        if let Some(i) = self.last {
            if self.masks[i as usize].key == *key {
                return Some(i);
            }
        }
        let i = *self.by_mask.get(key)?;
        self.last = Some(i);
        Some(i)
    }

    fn find_or_add(&mut self, key: &FlowKey) -> u32 {
        if let Some(i) = self.find(key) {
            return i;
        }
        let i = u32_of(self.masks.len());
        self.masks.push(MaskRec {
            key: *key,
            counts: BTreeMap::new(),
            rank: None,
            catch_all: key.is_zero(),
            words: (0u8..)
                .zip(key.words.iter())
                .filter(|(_, w)| **w != 0)
                .map(|(i, _)| i)
                .collect(),
            checks: Vec::new(),
            saved: false,
        });
        self.by_mask.insert(*key, i);
        self.last = Some(i);
        i
    }

    /// True if `m`, of mask `mask` (an index into `masks`), passes [`validate_match`];
    /// remembered per mask and [`Match::prereq_bits`].
    fn valid(&mut self, mask: u32, m: &Match) -> bool {
        let bits = m.prereq_bits();
        let checks = &mut self.masks[mask as usize].checks;
        if let Some((_, ok)) = checks.iter().find(|(b, _)| *b == bits) {
            return *ok;
        }
        let ok = validate_match(m).is_ok();
        checks.push((bits, ok));
        ok
    }

    fn inc(&mut self, i: u32, priority: u16, dirty: &mut Vec<u32>) {
        self.save_counts(i);
        let rec = &mut self.masks[i as usize];
        let old = rec.max();
        *rec.counts.entry(priority).or_insert(0) += 1;
        if old.map_or(true, |m| priority > m) {
            dirty.push(i);
        }
    }

    fn dec(&mut self, i: u32, priority: u16, dirty: &mut Vec<u32>) {
        self.save_counts(i);
        let rec = &mut self.masks[i as usize];
        let old = rec.max();
        let Some(c) = rec.counts.get_mut(&priority) else {
            debug_assert!(false, "rule counts out of sync");
            return;
        };
        *c -= 1;
        if *c == 0 {
            rec.counts.remove(&priority);
            if old == Some(priority) {
                dirty.push(i);
            }
        }
    }

    /// Brings the pvector up to date after one flow_mod (OVS publishes each flow_mod): the
    /// masks in `dirty` changed their highest priority, appeared or emptied; with `stale`,
    /// any mask may have.
    fn settle(&mut self, dirty: &mut Vec<u32>) {
        if dirty.is_empty() && !self.stale {
            return;
        }
        if let Some(j) = self.journal.as_mut() {
            if j.pv.is_none() {
                j.pv = Some((self.pv.clone(), self.stale));
            }
        }
        let full = std::mem::take(&mut self.stale);
        let masks = &self.masks;
        if full || dirty.iter().any(|i| masks[*i as usize].counts.is_empty()) {
            let mut i = 0;
            while i < self.pv.len() {
                if masks[self.pv[i].0 as usize].counts.is_empty() {
                    self.pv.swap_remove(i);
                } else {
                    i += 1;
                }
            }
        }
        if full {
            for (m, p) in self.pv.iter_mut() {
                if let Some(max) = masks[*m as usize].max() {
                    *p = max;
                }
            }
        }
        for &d in dirty.iter() {
            if let Some(max) = masks[d as usize].max() {
                match self.pv.iter_mut().find(|(m, _)| *m == d) {
                    Some(e) => e.1 = max,
                    None => self.pv.push((d, max)),
                }
            }
        }
        dirty.clear();
        self.pv.sort_by_key(|(_, p)| Reverse(*p));
    }

    /// A rule of mask `key` and OpenFlow priority `priority` was removed outside a bundle
    /// (expiry); the pvector is brought up to date by the next bundle that drafts the table.
    pub(super) fn removed_outside(&mut self, key: &FlowKey, priority: u16) {
        if let Some(i) = self.find(key) {
            let mut dirty = Vec::new();
            self.dec(i, priority, &mut dirty);
            self.stale = true;
        }
    }

    /// The committed classifier priority of a rule of mask `mask` (an index into `masks`).
    fn class_priority(&self, mask: u32, priority: u16) -> u32 {
        let rank = self.masks[mask as usize].rank.unwrap_or(0);
        (u32::from(priority) << 16) | u32::from(rank)
    }

    /// Gives every mask its rank in the pvector; returns, per mask, whether its committed
    /// rules must move (they had another rank).
    fn rerank(&mut self) -> Vec<bool> {
        let mut new: Vec<Option<u16>> = vec![None; self.masks.len()];
        for (i, (m, _)) in self.pv.iter().enumerate() {
            new[*m as usize] = Some(rank_at(i));
        }
        self.masks
            .iter_mut()
            .zip(new)
            .map(|(rec, n)| {
                let moved = rec.rank.is_some() && n.is_some() && rec.rank != n;
                rec.rank = n;
                moved
            })
            .collect()
    }

    /// Forgets masks without rules once they are most of the map.
    fn compact(&mut self) {
        let n_live = self.masks.iter().filter(|r| !r.counts.is_empty()).count();
        let n_dead = self.masks.len() - n_live;
        if n_dead <= 64 || n_dead <= n_live {
            return;
        }
        let in_pv: Vec<u32> = self.pv.iter().map(|(m, _)| *m).collect();
        let mut remap = vec![NONE; self.masks.len()];
        let mut masks = Vec::with_capacity(n_live);
        for (i, rec) in std::mem::take(&mut self.masks).into_iter().enumerate() {
            if !rec.counts.is_empty() || in_pv.contains(&u32_of(i)) {
                remap[i] = u32_of(masks.len());
                masks.push(rec);
            }
        }
        self.masks = masks;
        for (m, _) in self.pv.iter_mut() {
            *m = remap[*m as usize];
        }
        self.by_mask = self
            .masks
            .iter()
            .enumerate()
            .map(|(i, r)| (r.key, u32_of(i)))
            .collect();
        self.last = None;
    }

    /// The pvector as (mask, highest priority), for tests.
    #[cfg(test)]
    pub(super) fn order(&self) -> Vec<(FlowKey, u16)> {
        self.pv
            .iter()
            .map(|(m, p)| (self.masks[*m as usize].key, *p))
            .collect()
    }
}

/// One version of a rule made by the bundle. Its match is its slot's.
struct Ver {
    /// The rule to commit (taken when the draft is applied). Only the draft holds it.
    rule: Option<Arc<OfRule>>,
    /// Keep the counters and age of the live rule of the same identity.
    keep_counts: bool,
    alive: bool,
    /// Its match fails the classifier's checks.
    invalid: bool,
}

impl Ver {
    fn new(rule: OfRule, keep_counts: bool, invalid: bool) -> Ver {
        Ver {
            rule: Some(Arc::new(rule)),
            keep_counts,
            alive: true,
            invalid,
        }
    }

    fn rule(&self) -> Option<&OfRule> {
        self.rule.as_deref()
    }

    fn rule_mut(&mut self) -> Option<&mut OfRule> {
        self.rule
            .as_mut()
            .map(|r| Arc::get_mut(r).expect("draft rules are unshared until applied"))
    }
}

/// What became of the live rule of a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InPlace {
    /// Unchanged (or there is none).
    Untouched,
    /// Deleted or replaced.
    Dead,
    /// Modified: its new version (which is dead if later deleted).
    Draft(u32),
}

/// Everything the bundle did to one rule identity of one table.
struct Slot {
    /// Next slot with the same identity hash.
    next: u32,
    /// The flow_mod of the bundle whose match is the identity's, or [`NONE`]: the live
    /// rule's (rebuilt from the classifier rule when needed).
    from: u32,
    /// The identity's mask: its index in the draft's [`TableMeta`].
    mask: u32,
    /// The identity's OpenFlow priority.
    priority: u16,
    /// Whether the identity's match fails the classifier's checks, once an add asked.
    invalid: Option<bool>,
    /// The live rule with this identity when the bundle started.
    orig: Option<LiveRule>,
    in_place: InPlace,
    /// The versions: the in-place one (if any) and those pushed by adds, in push order.
    v0: Option<Ver>,
    more: Vec<Ver>,
}

impl Slot {
    fn ver(&self, i: u32) -> &Ver {
        match i {
            0 => self.v0.as_ref().expect("version 0 exists"),
            i => &self.more[i as usize - 1],
        }
    }

    fn ver_mut(&mut self, i: u32) -> &mut Ver {
        match i {
            0 => self.v0.as_mut().expect("version 0 exists"),
            i => &mut self.more[i as usize - 1],
        }
    }

    fn n_vers(&self) -> u32 {
        u32_of(usize::from(self.v0.is_some()) + self.more.len())
    }

    fn push(&mut self, v: Ver) -> u32 {
        if self.v0.is_none() {
            self.v0 = Some(v);
            0
        } else {
            self.more.push(v);
            u32_of(self.more.len())
        }
    }

    /// The identity's match.
    fn flow_match<'m>(&self, mods: &'m [FlowMod]) -> Cow<'m, Match> {
        match (&self.orig, mods.get(self.from as usize)) {
            (_, Some(fm)) => Cow::Borrowed(&fm.entry.flow_match),
            (Some(o), None) => Cow::Owned(o.match_()),
            (None, None) => unreachable!("a slot without a live rule comes from a flow_mod"),
        }
    }

    /// Indices of the versions added by adds (not the in-place one).
    fn pushed(&self) -> impl Iterator<Item = u32> + '_ {
        let skip = match self.in_place {
            InPlace::Draft(v) => v,
            _ => NONE,
        };
        (0..self.n_vers()).filter(move |i| *i != skip)
    }

    /// True if some version of the rule is in the draft.
    fn alive_any(&self) -> bool {
        self.in_place_alive() || self.pushed().any(|v| self.ver(v).alive)
    }

    /// Versions of the rule in the draft.
    fn n_alive(&self) -> usize {
        usize::from(self.in_place_alive()) + self.pushed().filter(|v| self.ver(*v).alive).count()
    }

    fn in_place_alive(&self) -> bool {
        match self.in_place {
            InPlace::Untouched => self.orig.is_some(),
            InPlace::Dead => false,
            InPlace::Draft(v) => self.ver(v).alive,
        }
    }

    /// The version in place of the live rule, if it is in the draft: the live rule itself
    /// or its modified version.
    fn in_place_rule(&self) -> Option<&OfRule> {
        match self.in_place {
            InPlace::Untouched => self.orig.as_ref().map(|o| &**o.payload()),
            InPlace::Dead => None,
            InPlace::Draft(v) => Some(self.ver(v)).filter(|v| v.alive).and_then(Ver::rule),
        }
    }
}

/// The parts of `r` a flow_mod selects by, with `m` (rebuilt on demand) as its match.
fn selectable<M>(r: &OfRule, m: M) -> Selectable<'_, M> {
    Selectable {
        priority: r.priority(),
        cookie: r.cookie(),
        actions: r.actions(),
        flow_match: m,
    }
}

/// A rule a modify or delete selected.
enum Cand {
    /// A live rule no slot holds yet.
    Live(LiveRule),
    /// The live rule of a slot, or its modified version.
    InPlace(u32),
    /// A version an add pushed.
    Ver(u32, u32),
}

/// The draft of one table.
struct TableDraft<'m> {
    table: u8,
    /// The bundle's flow_mods (their matches are the identities of the slots they made).
    mods: &'m [FlowMod],
    meta: TableMeta,
    slots: Vec<Slot>,
    /// Head of each identity hash's chain of slots.
    index: HashMap<u64, u32, WordBuild>,
    /// Pushed versions as (slot, version), in push order.
    pushed: Vec<(u32, u32)>,
    n_orig_slots: usize,
    n_invalid: usize,
    /// Masks whose highest priority changed in the current flow_mod.
    dirty: Vec<u32>,
}

impl<'m> TableDraft<'m> {
    fn new(table: u8, mods: &'m [FlowMod], meta: TableMeta, capacity: usize) -> Self {
        TableDraft {
            table,
            mods,
            meta,
            slots: Vec::with_capacity(capacity),
            index: HashMap::with_capacity_and_hasher(capacity, WordBuild::default()),
            pushed: Vec::with_capacity(capacity),
            n_orig_slots: 0,
            n_invalid: 0,
            dirty: Vec::new(),
        }
    }

    /// The slot of identity (`m`, `priority`), if the bundle touched it.
    fn lookup(&self, hash: u64, m: &Match, priority: u16) -> Option<u32> {
        let mut s = *self.index.get(&hash)?;
        while s != NONE {
            let slot = &self.slots[s as usize];
            if slot.priority == priority && *slot.flow_match(self.mods) == *m {
                return Some(s);
            }
            s = slot.next;
        }
        None
    }

    fn new_slot(
        &mut self,
        hash: u64,
        orig: Option<LiveRule>,
        from: u32,
        mask: u32,
        priority: u16,
    ) -> u32 {
        let s = u32_of(self.slots.len());
        let next = self.index.insert(hash, s).unwrap_or(NONE);
        self.n_orig_slots += usize::from(orig.is_some());
        self.slots.push(Slot {
            next,
            from,
            mask,
            priority,
            invalid: None,
            orig,
            in_place: InPlace::Untouched,
            v0: None,
            more: Vec::new(),
        });
        s
    }

    /// The live rule with identity (`m`, `priority`), given the index of `m`'s mask in the
    /// draft's meta (none: no live rule has it).
    fn live(
        &self,
        cls: Option<&OfTable>,
        mask: Option<u32>,
        m: &Match,
        priority: u16,
    ) -> Option<LiveRule> {
        let rank = self.meta.masks[mask? as usize].rank?;
        cls?.find(m, (u32::from(priority) << 16) | u32::from(rank))
    }

    /// The slot of the identity of flow_mod `from`: touched before, or made for its live
    /// rule, or (with `create`) made empty.
    fn slot(&mut self, cls: Option<&OfTable>, from: usize, create: bool) -> Option<u32> {
        let e = &self.mods[from].entry;
        let (m, priority) = (&e.flow_match, e.priority);
        let mask = self.meta.find(m.mask());
        let hash = match mask {
            Some(i) => ident_hash_at(&self.meta.masks[i as usize].words, m, priority),
            None => ident_hash(m, priority),
        };
        if let Some(s) = self.lookup(hash, m, priority) {
            return Some(s);
        }
        let orig = self.live(cls, mask, m, priority);
        if orig.is_none() && !create {
            return None;
        }
        let mask = match mask {
            Some(i) => i,
            None => self.meta.find_or_add(m.mask()),
        };
        Some(self.new_slot(hash, orig, u32_of(from), mask, priority))
    }

    fn count(&mut self, mask: u32, priority: u16, up: bool) {
        if up {
            self.meta.inc(mask, priority, &mut self.dirty);
        } else {
            self.meta.dec(mask, priority, &mut self.dirty);
        }
    }

    /// Adds the flow of flow_mod `index`, with its `actions`, as the rule an add makes; with
    /// `replace`, every rule of the same identity goes first (an add), else they stay (a
    /// modify that adds).
    fn add(
        &mut self,
        cls: Option<&OfTable>,
        index: usize,
        actions: Vec<Action>,
        now: u64,
        replace: bool,
    ) {
        let mods = self.mods;
        let e = &mods[index].entry;
        let s = self.slot(cls, index, true).expect("made on demand");
        let slot = &mut self.slots[s as usize];
        let (mask, p) = (slot.mask, slot.priority);
        let catch_all = self.meta.masks[mask as usize].catch_all;
        let rule = OfRule::from_flow(e, actions, self.table, now, catch_all);
        if replace {
            let mut n_killed = 0;
            if slot.in_place == InPlace::Untouched && slot.orig.is_some() {
                slot.in_place = InPlace::Dead;
                n_killed += 1;
            }
            for v in 0..slot.n_vers() {
                let ver = slot.ver_mut(v);
                if ver.alive {
                    ver.alive = false;
                    n_killed += 1;
                    self.n_invalid -= usize::from(ver.invalid);
                }
            }
            for _ in 0..n_killed {
                self.meta.dec(mask, p, &mut self.dirty);
            }
        }
        self.meta.inc(mask, p, &mut self.dirty);
        let slot = &mut self.slots[s as usize];
        // The versions of a slot share its match: it is checked once.
        let meta = &mut self.meta;
        let invalid = *slot
            .invalid
            .get_or_insert_with(|| !meta.valid(mask, &e.flow_match));
        let v = slot.push(Ver::new(rule, false, invalid));
        self.n_invalid += usize::from(invalid);
        self.pushed.push((s, v));
    }

    /// The rules of the draft that `fm` (flow_mod `index`) selects.
    fn select(&mut self, cls: Option<&OfTable>, index: usize, strict: bool) -> Vec<Cand> {
        let mods = self.mods;
        let fm = &mods[index];
        let mut out = Vec::new();
        let slot_cands = |slot: &Slot, s: u32, out: &mut Vec<Cand>| {
            let sel = |r: &OfRule| selects(fm, strict, selectable(r, || slot.flow_match(mods)));
            if slot.in_place_rule().is_some_and(sel) {
                out.push(Cand::InPlace(s));
            }
            for v in slot.pushed() {
                let ver = slot.ver(v);
                if ver.alive && ver.rule().is_some_and(sel) {
                    out.push(Cand::Ver(s, v));
                }
            }
        };
        if strict {
            if let Some(s) = self.slot(cls, index, false) {
                slot_cands(&self.slots[s as usize], s, &mut out);
            }
            return out;
        }
        for (s, slot) in self.slots.iter().enumerate() {
            slot_cands(slot, u32_of(s), &mut out);
        }
        if let Some(cls) = cls {
            let snap = cls.snapshot();
            for r in snap.rules() {
                let p = r.payload();
                let mut rebuilt = None;
                let sel = selects(
                    fm,
                    false,
                    selectable(p, || {
                        let m = r.match_();
                        rebuilt = Some(m);
                        Cow::Owned(m)
                    }),
                );
                if sel
                    && (self.n_orig_slots == 0 || {
                        let m = rebuilt.unwrap_or_else(|| r.match_());
                        self.lookup(ident_hash(&m, p.priority()), &m, p.priority())
                            .is_none()
                    })
                {
                    out.push(Cand::Live(r.clone()));
                }
            }
        }
        out
    }

    /// The slot of a selected live rule (made now).
    fn own(&mut self, c: Cand) -> Cand {
        match c {
            Cand::Live(r) => {
                let (m, p) = (r.match_(), r.payload().priority());
                let hash = ident_hash(&m, p);
                let mask = self.meta.find_or_add(m.mask());
                Cand::InPlace(self.new_slot(hash, Some(r), NONE, mask, p))
            }
            c => c,
        }
    }

    fn modify(
        &mut self,
        cls: Option<&OfTable>,
        index: usize,
        actions: &[Action],
        strict: bool,
        now: u64,
    ) -> Result<usize, SwitchError> {
        let cands = self.select(cls, index, strict);
        if cands.is_empty() {
            return Ok(0);
        }
        let mods = self.mods;
        let e = &mods[index].entry;
        check_gotos(actions, self.table)?;
        let keep_counts = !e.flags.contains(FlowFlags::RESET_COUNTS);
        let change = |r: &mut OfRule| {
            r.actions = actions.into();
            if e.cookie_mask == 0 && e.cookie != u64::MAX && e.cookie != 0 {
                r.cookie = e.cookie;
            }
        };
        let n = cands.len();
        for c in cands {
            let (s, v) = match self.own(c) {
                Cand::InPlace(s) => {
                    let slot = &mut self.slots[s as usize];
                    match slot.in_place {
                        InPlace::Draft(v) => (s, v),
                        _ => {
                            let o = slot
                                .orig
                                .as_ref()
                                .expect("an untouched slot has a live rule");
                            let mut rule = o.payload().renewed(now);
                            change(&mut rule);
                            let v = slot.push(Ver::new(rule, keep_counts, false));
                            slot.in_place = InPlace::Draft(v);
                            continue;
                        }
                    }
                }
                Cand::Ver(s, v) => (s, v),
                Cand::Live(_) => unreachable!("owned above"),
            };
            let ver = self.slots[s as usize].ver_mut(v);
            if let Some(rule) = ver.rule_mut() {
                change(rule);
            }
            ver.keep_counts = keep_counts;
        }
        Ok(n)
    }

    fn delete(&mut self, cls: Option<&OfTable>, index: usize, strict: bool) -> usize {
        let cands = self.select(cls, index, strict);
        let n = cands.len();
        for c in cands {
            let s = match self.own(c) {
                Cand::InPlace(s) => {
                    let slot = &mut self.slots[s as usize];
                    match slot.in_place {
                        InPlace::Draft(v) => {
                            let ver = slot.ver_mut(v);
                            ver.alive = false;
                            self.n_invalid -= usize::from(ver.invalid);
                        }
                        _ => slot.in_place = InPlace::Dead,
                    }
                    s
                }
                Cand::Ver(s, v) => {
                    let ver = self.slots[s as usize].ver_mut(v);
                    ver.alive = false;
                    self.n_invalid -= usize::from(ver.invalid);
                    s
                }
                Cand::Live(_) => unreachable!("owned above"),
            };
            let slot = &self.slots[s as usize];
            let (mask, p) = (slot.mask, slot.priority);
            self.count(mask, p, false);
        }
        n
    }

    /// True if a rule of the priority of flow_mod `index` with another match overlaps its
    /// match (`check_overlap`).
    fn overlaps_any(&mut self, cls: Option<&OfTable>, index: usize) -> bool {
        let mods = self.mods;
        let e = &mods[index].entry;
        let p = e.priority;
        let em = &e.flow_match;
        let masks: Vec<FlowKey> = self
            .meta
            .masks
            .iter()
            .filter(|r| r.counts.contains_key(&p) && r.key != *em.mask())
            .map(|r| r.key)
            .collect();
        if masks.iter().all(|k| k.is_subset_of(em.mask())) {
            // Each such mask has at most one rule that can overlap: `e`'s value under it.
            return masks.iter().any(|k| {
                let m = Match::new(*em.value(), *k);
                let hash = ident_hash(&m, p);
                match self.lookup(hash, &m, p) {
                    Some(s) => self.slots[s as usize].alive_any(),
                    None => {
                        let mask = self.meta.find(k);
                        self.live(cls, mask, &m, p).is_some()
                    }
                }
            });
        }
        let hit = |m: &Match| overlaps(m, em) && m != em;
        // The versions of a slot share its match and priority.
        if self
            .slots
            .iter()
            .any(|s| s.priority == p && s.alive_any() && hit(&s.flow_match(mods)))
        {
            return true;
        }
        let Some(cls) = cls else {
            return false;
        };
        let snap = cls.snapshot();
        let found = snap.rules().any(|r| {
            if r.payload().priority() != p {
                return false;
            }
            let m = r.match_();
            hit(&m) && (self.n_orig_slots == 0 || self.lookup(ident_hash(&m, p), &m, p).is_none())
        });
        found
    }

    /// The first invalid rule the draft would commit, as the error the bundle fails with.
    fn first_invalid(&self) -> Option<String> {
        if self.n_invalid == 0 {
            return None;
        }
        self.pushed.iter().find_map(|(s, v)| {
            let slot = &self.slots[*s as usize];
            let ver = slot.ver(*v);
            if !(ver.alive && ver.invalid && ver.rule.is_some()) {
                return None;
            }
            validate_match(&slot.flow_match(self.mods)).err()
        })
    }

    /// Applies the draft to the table: one classifier commit, its operations made as the
    /// classifier takes them (removals, then the live rules that move or change in dump
    /// order, then the added rules in draft order).
    ///
    /// Returns whether a rule already in the table changed its classifier priority (OVS's
    /// order of subtables moved): then the order of equal-priority rules may have changed for
    /// packets no added rule matches, and what a cache learnt from this table is stale.
    fn apply(self, br: &mut Bridge) -> Result<bool, SwitchError> {
        let t = self.table;
        let TableDraft {
            mods,
            mut meta,
            mut slots,
            pushed,
            n_orig_slots,
            index,
            ..
        } = self;
        meta.keep();
        let moved = meta.rerank();
        let mut removes: Vec<LiveRule> = Vec::new();
        // Live rules to insert again or modify: (live rule, its new version if modified,
        // the index of its mask).
        let mut in_place: Vec<(LiveRule, Option<Arc<OfRule>>, u32)> = Vec::new();
        if moved.iter().any(|m| *m) {
            if let Some(cls) = br.table(t) {
                let snap = cls.snapshot();
                for r in snap.rules() {
                    let m = r.match_();
                    let Some(i) = meta.find(m.mask()) else {
                        continue;
                    };
                    if !moved[i as usize] {
                        continue;
                    }
                    let in_slot = n_orig_slots > 0 && {
                        let hash = ident_hash(&m, r.payload().priority());
                        let mut s = index.get(&hash).copied().unwrap_or(NONE);
                        while s != NONE
                            && !slots[s as usize]
                                .orig
                                .as_ref()
                                .is_some_and(|o| Arc::ptr_eq(o, r))
                        {
                            s = slots[s as usize].next;
                        }
                        s != NONE
                    };
                    if !in_slot {
                        removes.push(r.clone());
                        in_place.push((r.clone(), None, i));
                    }
                }
            }
        }
        for slot in slots.iter_mut() {
            let Some(o) = slot.orig.clone() else {
                continue;
            };
            let same = meta.class_priority(slot.mask, slot.priority) == o.priority();
            if !same || !slot.alive_any() {
                removes.push(o.clone());
            }
            match slot.in_place {
                InPlace::Untouched if !same => in_place.push((o, None, slot.mask)),
                InPlace::Draft(v) if slot.ver(v).alive => {
                    let mask = slot.mask;
                    let ver = slot.ver_mut(v);
                    let keep = ver.keep_counts;
                    let Some(mut rule) = ver.rule.take() else {
                        continue;
                    };
                    if keep {
                        inherit(&mut rule, &o);
                    }
                    in_place.push((o, Some(rule), mask));
                }
                _ => {}
            }
        }
        in_place.sort_by_key(|(r, _, _)| (Reverse(r.priority()), r.seq()));
        // The versions of one identity become one classifier rule (the last one commits
        // over the others): the committed counts hold it once.
        let mut dirty = Vec::new();
        for slot in slots
            .iter()
            .filter(|s| s.orig.is_some() || !s.more.is_empty())
        {
            let n_alive = slot.n_alive();
            for _ in 1..n_alive {
                meta.dec(slot.mask, slot.priority, &mut dirty);
            }
        }
        debug_assert!(dirty.is_empty(), "a duplicate cannot change a maximum");
        let any_pushed = pushed.iter().any(|(s, v)| slots[*s as usize].ver(*v).alive);
        if removes.is_empty() && in_place.is_empty() && !any_pushed {
            br.metas[usize::from(t)] = meta;
            return Ok(false);
        }
        let reordered = in_place
            .iter()
            .any(|(o, _, mask)| meta.class_priority(*mask, o.payload().priority()) != o.priority());
        // The rules were checked (the live ones when they were added, the others by
        // `first_invalid`): the classifier need not check them again.
        let n_ops = removes.len() + in_place.len() + pushed.len();
        let res = br
            .table_mut(t)
            .commit_with_unchecked(|ops| {
                ops.reserve(n_ops);
                for r in &removes {
                    if !ops.remove(&r.match_(), r.priority()) {
                        return;
                    }
                }
                for (o, rule, mask) in in_place {
                    let p = o.payload();
                    let rule = rule.unwrap_or_else(|| Arc::new(OfRule::same_rule(p)));
                    let priority = meta.class_priority(mask, p.priority());
                    if !put(ops, &o.match_(), priority, rule, Some(&o), false) {
                        return;
                    }
                }
                for (s, v) in pushed {
                    let slot = &mut slots[s as usize];
                    let m = slot.flow_match(mods);
                    let priority = meta.class_priority(slot.mask, slot.priority);
                    // No live rule has this identity (`TableDraft::live`) and no other
                    // version of it commits: the classifier need not look for one.
                    let new = slot.orig.is_none() && slot.n_alive() == 1;
                    let ver = slot.ver_mut(v);
                    if !ver.alive {
                        continue;
                    }
                    let keep = ver.keep_counts;
                    let Some(mut rule) = ver.rule.take() else {
                        continue;
                    };
                    if keep {
                        if let Some(o) = &slot.orig {
                            inherit(&mut rule, o);
                        }
                    }
                    if !put(ops, &m, priority, rule, slot.orig.as_ref(), new) {
                        return;
                    }
                }
            })
            .map_err(|e| SwitchError::Rule {
                index: 0,
                msg: e.to_string(),
            });
        meta.compact();
        br.metas[usize::from(t)] = meta;
        res.map(|_| reordered)
    }
}

/// Puts `rule` with match `m` at classifier priority `priority`: a modify if `orig` (the
/// live rule of the same identity) stays at that priority, else an insert (of a rule the
/// classifier does not hold, if `new`). False if the commit failed.
fn put(
    ops: &mut Ops<'_, Arc<OfRule>>,
    m: &Match,
    priority: u32,
    rule: Arc<OfRule>,
    orig: Option<&LiveRule>,
    new: bool,
) -> bool {
    if orig.is_some_and(|o| o.priority() == priority) {
        return ops.modify(m, priority, rule);
    }
    let cookie = rule.cookie();
    if new {
        ops.insert_new(m, priority, cookie, rule)
    } else {
        ops.insert(m, priority, cookie, rule)
    }
}

/// A new version of a rule keeps the live rule's counters and age.
fn inherit(rule: &mut Arc<OfRule>, from: &LiveRule) {
    let r = Arc::get_mut(rule).expect("draft rules are unshared until applied");
    r.inherit(from.payload());
}

/// The drafts of one bundle.
struct Drafts<'m> {
    mods: &'m [FlowMod],
    /// The tables drafted, in the order the bundle first touched them.
    tables: Vec<TableDraft<'m>>,
    /// Per table, 1 + the index of its draft in `tables` (0: not drafted).
    at: [u8; N_TABLES],
    /// Tables touched by the current flow_mod.
    touched: Vec<u8>,
}

impl<'m> Drafts<'m> {
    fn new(mods: &'m [FlowMod]) -> Self {
        Drafts {
            mods,
            tables: Vec::new(),
            at: [0; N_TABLES],
            touched: Vec::new(),
        }
    }

    /// The draft of table `t`, made (with the table's meta, taken from `metas`) if the
    /// bundle had not touched it.
    fn draft(&mut self, metas: &mut [TableMeta], t: u8, capacity: usize) -> &mut TableDraft<'m> {
        if !self.touched.contains(&t) {
            self.touched.push(t);
        }
        let at = &mut self.at[usize::from(t)];
        if *at == 0 {
            let mut meta = std::mem::take(&mut metas[usize::from(t)]);
            meta.begin();
            self.tables
                .push(TableDraft::new(t, self.mods, meta, capacity));
            *at = u8::try_from(self.tables.len()).expect("at most 255 tables");
        }
        &mut self.tables[usize::from(*at) - 1]
    }

    fn has(&self, t: u8) -> bool {
        self.at[usize::from(t)] != 0
    }

    /// Ends one flow_mod: OVS publishes it, updating its subtable order.
    fn settle(&mut self) {
        for t in self.touched.drain(..) {
            if let Some(i) = usize::from(self.at[usize::from(t)]).checked_sub(1) {
                let d = &mut self.tables[i];
                let mut dirty = std::mem::take(&mut d.dirty);
                d.meta.settle(&mut dirty);
                d.dirty = dirty;
            }
        }
    }
}

/// Applies `mods` to `br` as one bundle (see [`super::Switch::flow_mods`]).
pub(super) fn flow_mods(
    br: &mut Bridge,
    mut mods: Vec<FlowMod>,
    now: u64,
) -> Result<FlowModOutcome, SwitchError> {
    // The actions move into the rules; the matches stay in `mods`, where the drafts find
    // them until the commit.
    let mut actions: Vec<Vec<Action>> = mods
        .iter_mut()
        .map(|fm| std::mem::take(&mut fm.entry.actions))
        .collect();
    let mods = &mods[..];
    let mut ds = Drafts::new(mods);
    let drafted = {
        let Bridge { tables, metas, .. } = &mut *br;
        draft_all(tables, metas, &mut ds, &mut actions, now)
    };
    // Tables are checked and applied in table order.
    ds.tables.sort_unstable_by_key(|d| d.table);
    // Check every new rule as the classifier will, so that the commits below cannot fail.
    let checked =
        drafted.and_then(
            |out| match ds.tables.iter().find_map(TableDraft::first_invalid) {
                Some(msg) => Err(SwitchError::Rule { index: 0, msg }),
                None => Ok(out),
            },
        );
    let mut out = match checked {
        Ok(out) => out,
        Err(e) => {
            restore(br, ds.tables);
            return Err(e);
        }
    };
    // Apply, per table: each rule's classifier priority is its OpenFlow priority above a
    // rank that orders equal priorities as OVS's classifier does; a rule whose rank changed
    // moves, keeping its counters.
    let mut drafts = ds.tables.into_iter();
    while let Some(d) = drafts.next() {
        let t = d.table;
        match d.apply(br) {
            Ok(true) => out.reordered_tables[usize::from(t / 64)] |= 1 << (t % 64),
            Ok(false) => {}
            Err(e) => {
                restore(br, drafts);
                return Err(e);
            }
        }
    }
    Ok(out)
}

/// Puts back the metas of tables whose drafts are not applied, as they were.
fn restore<'m>(br: &mut Bridge, drafts: impl IntoIterator<Item = TableDraft<'m>>) {
    for d in drafts {
        let mut meta = d.meta;
        meta.roll_back();
        br.metas[usize::from(d.table)] = meta;
    }
}

/// Drafts every flow_mod of the bundle: the tables' metas it touches move from `metas` into
/// the drafts (and must go back, rolled back, if the bundle fails).
fn draft_all(
    tables: &[Option<OfTable>],
    metas: &mut [TableMeta],
    ds: &mut Drafts<'_>,
    actions: &mut [Vec<Action>],
    now: u64,
) -> Result<FlowModOutcome, SwitchError> {
    let table = |t: u8| tables.get(usize::from(t)).and_then(Option::as_ref);
    let mods = ds.mods;
    let n_mods = mods.len();
    let mut out = FlowModOutcome::default();
    for (index, fm) in mods.iter().enumerate() {
        let capacity = n_mods - index;
        let acts = std::mem::take(&mut actions[index]);
        check_flow(&acts)?;
        let e = &fm.entry;
        match fm.command {
            FlowModCommand::Add => {
                let t = match e.table {
                    Some(t) if usize::from(t) >= N_TABLES => return Err(SwitchError::BadTable(t)),
                    _ => e.table_id(),
                };
                check_gotos(&acts, t)?;
                let cls = table(t);
                let d = ds.draft(metas, t, capacity);
                if e.flags.contains(FlowFlags::CHECK_OVERLAP) && d.overlaps_any(cls, index) {
                    return Err(SwitchError::Overlap {
                        table: t,
                        priority: e.priority,
                    });
                }
                d.add(cls, index, acts, now, true);
                out.n_added += 1;
            }
            FlowModCommand::Modify { strict } => {
                let mut n = 0;
                for t in tables_of(e.table) {
                    let cls = table(t);
                    if cls.is_none() && !ds.has(t) {
                        continue;
                    }
                    n += ds
                        .draft(metas, t, 0)
                        .modify(cls, index, &acts, strict, now)?;
                }
                out.n_modified += n;
                if n == 0 && fm.modify_may_add {
                    let t = e.table_id();
                    check_gotos(&acts, t)?;
                    let cls = table(t);
                    ds.draft(metas, t, capacity)
                        .add(cls, index, acts, now, false);
                    out.n_added += 1;
                }
            }
            FlowModCommand::Delete { strict } => {
                for t in tables_of(e.table) {
                    let cls = table(t);
                    if cls.is_none() && !ds.has(t) {
                        continue;
                    }
                    out.n_deleted += ds.draft(metas, t, 0).delete(cls, index, strict);
                }
            }
        }
        ds.settle();
    }
    Ok(out)
}

/// The tables a modify or delete with table `table` looks at.
fn tables_of(table: Option<u8>) -> std::ops::RangeInclusive<u8> {
    match table {
        Some(t) if usize::from(t) < N_TABLES => t..=t,
        _ => 0..=254,
    }
}

#[cfg(test)]
mod tests {
    use packet::key::{fields, KeyField};
    use proptest::prelude::*;

    use super::*;

    /// splitmix64.
    fn next(x: &mut u64) -> u64 {
        *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value for `f`, often one that a prerequisite looks for.
    fn value(f: KeyField, x: &mut u64) -> u128 {
        let r = next(x);
        let pick = |vals: &[u128]| vals[usize::try_from(r).unwrap_or(0) % vals.len()];
        match f {
            _ if r % 5 == 0 => u128::from(next(x)),
            _ if f == fields::DL_TYPE => pick(&[0x0800, 0x86dd, 0x0806, 0x8035, 0x8847, 0x8848]),
            _ if f == fields::NW_PROTO => pick(&[1, 6, 17, 58, 132]),
            _ if f == fields::TP_SRC => pick(&[135, 136, 80]),
            _ if f == fields::TP_DST => pick(&[0, 1]),
            _ if f == fields::VLAN_TCI => pick(&[0, 0x1000, 0x1005]),
            _ if f == fields::CT_STATE => pick(&[0, 0x20, 0x21, 0x30]),
            _ => u128::from(next(x)),
        }
    }

    proptest! {
        /// `TableMeta::valid`, remembered per mask and prerequisite bits, says what
        /// `validate_match` says: the check reads the value only through the prerequisites.
        #[test]
        fn remembered_checks_agree_with_validate_match(seed in any::<u64>()) {
            let mut x = seed;
            let masks: Vec<FlowKey> = (0..4)
                .map(|_| {
                    let mut k = FlowKey::default();
                    let sparse = 6 + next(&mut x) % 60;
                    for f in fields::ALL.iter() {
                        let usual = [fields::DL_TYPE, fields::NW_PROTO].contains(f);
                        if next(&mut x) % if usual { 2 } else { sparse } == 0 {
                            k.set(*f, u128::MAX);
                        }
                    }
                    if next(&mut x) % 8 == 0 {
                        // Bits of no field.
                        k.words[usize::try_from(next(&mut x) % 45).expect("small")] |= next(&mut x);
                    }
                    k
                })
                .collect();
            let mut meta = TableMeta::default();
            for _ in 0..200 {
                let mask = masks[usize::try_from(next(&mut x) % 4).expect("small")];
                let mut v = FlowKey::default();
                for f in fields::ALL.iter() {
                    v.set(*f, value(*f, &mut x));
                }
                let m = Match::new(v, mask);
                let i = meta.find_or_add(&mask);
                prop_assert_eq!(meta.valid(i, &m), validate_match(&m).is_ok(), "{:?}", m);
                let p = u16::try_from(next(&mut x) >> 48).expect("16 bits");
                prop_assert_eq!(
                    ident_hash_at(&meta.masks[i as usize].words, &m, p),
                    ident_hash(&m, p)
                );
            }
        }
    }
}
