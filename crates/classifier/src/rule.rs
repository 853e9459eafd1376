//! Rules, their statistics, and the compiled form of a mask that subtables share.
//!
//! A [`Rule`] is immutable once published: readers hold `Arc<Rule<T>>` handles while the
//! writer prepares the next version. Modifying a rule's payload makes a new `Rule` that keeps
//! the old one's identity (match, priority, insertion order) and shares its [`RuleStats`]
//! (the counters live in the first version of a rule, which the versions `modify` made keep
//! alive).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use openflow::Match;
use packet::key::{FlowKey, KeyField, KEY_WORDS, STAGES};

/// Most prefix fields (tries) one classifier tracks.
pub const MAX_PREFIXES: usize = 4;

/// Per-rule packet and byte counters, credited by the datapath with relaxed atomics.
#[derive(Debug, Default)]
pub struct RuleStats {
    n_packets: AtomicU64,
    n_bytes: AtomicU64,
}

impl RuleStats {
    /// Adds `n_packets` packets of `n_bytes` bytes in total.
    #[inline]
    pub fn credit(&self, n_packets: u64, n_bytes: u64) {
        self.n_packets.fetch_add(n_packets, Ordering::Relaxed);
        self.n_bytes.fetch_add(n_bytes, Ordering::Relaxed);
    }

    /// Packets credited so far.
    pub fn n_packets(&self) -> u64 {
        self.n_packets.load(Ordering::Relaxed)
    }

    /// Bytes credited so far.
    pub fn n_bytes(&self) -> u64 {
        self.n_bytes.load(Ordering::Relaxed)
    }
}

/// A mask compiled for lookup: the words it constrains, grouped by stage, and the prefix
/// length it has on each prefix field. One `Mask` is shared by every rule with that mask and
/// by the subtable holding them (in both versions).
///
/// Aligned to a cache line so that the `Arc`'s counters sit alone in the line before it:
/// the writer clones the `Arc` for every rule it makes, and readers on other cores read the
/// mask for every probe (a shared line would move between the cores at each insert).
#[derive(Debug)]
#[repr(align(64))]
pub(crate) struct Mask {
    /// The mask itself.
    pub(crate) key: FlowKey,
    /// Indices of the non-zero mask words, in key order.
    pub(crate) idx: Box<[u8]>,
    /// The mask words at `idx`.
    pub(crate) bits: Box<[u64]>,
    /// The hash's multiplier of each word at `idx` ([`mix_at`]'s, read here without an index
    /// check: a lookup's hash is most of the instructions of a small table's lookup).
    pub(crate) mults: Box<[u64]>,
    /// For each stage the mask touches, one past its last position in `idx`.
    pub(crate) stage_ends: Box<[u8]>,
    /// For each stage the mask touches, its index in [`STAGES`].
    pub(crate) stage_ids: Box<[u8]>,
    /// Prefix length on each configured prefix field; 0 if the field is wildcarded or its
    /// mask is not a CIDR prefix (the trie cannot help this subtable then).
    pub(crate) trie_plens: [u8; MAX_PREFIXES],
    /// Per stage of [`STAGES`], the tries (bit `t` for prefix field `t`) whose field lies in
    /// that stage and has a prefix length here: the tries a miss consults at that stage.
    pub(crate) stage_tries: [u8; STAGES.len()],
    /// Per prefix field with a length here, the position in `idx` where its stage begins:
    /// the words a miss that its trie rules out consults besides the trie's bits.
    pub(crate) trie_pos: [u8; MAX_PREFIXES],
    /// The tries with a prefix length here (bit `t` for prefix field `t`).
    pub(crate) trie_set: u8,
    /// Per trie with a prefix length `l` here, bit `(l - 1) % 64`: its test in the half of a
    /// walk's lengths that holds it ([`Walked`](crate::subtable::Walked)).
    pub(crate) trie_bit: [u64; MAX_PREFIXES],
    /// The writer's: [`Match::prereq_bits`](openflow::Match::prereq_bits) of matches with this
    /// mask that passed the prerequisite check, which depends on the mask and those bits alone
    /// (bit 32 marks a slot in use). Readers never read it.
    valid_prereqs: [AtomicU64; 4],
}

/// The key words mask `key` constrains, stage by stage (a [`Mask`]'s `idx`, the order of a
/// rule's value words).
pub(crate) fn value_idx(key: &FlowKey) -> Box<[u8]> {
    STAGES
        .iter()
        .flat_map(|stage| stage.start..stage.end)
        .filter(|w| key.words[*w] != 0)
        .map(|w| u8::try_from(w).expect("KEY_WORDS fits in u8"))
        .collect()
}

impl Mask {
    /// Compiles `key` for the configured prefix fields.
    pub(crate) fn compile(key: &FlowKey, prefixes: &[crate::PrefixField]) -> Mask {
        let idx = value_idx(key);
        let bits = idx.iter().map(|w| key.words[usize::from(*w)]).collect();
        // `idx` goes stage by stage: each stage's words are the next run of it.
        let mut stage_ends = Vec::new();
        let mut stage_ids = Vec::new();
        let mut end = 0;
        for (s, stage) in STAGES.iter().enumerate() {
            let n = idx[end..]
                .iter()
                .take_while(|w| (stage.start..stage.end).contains(&usize::from(**w)))
                .count();
            end += n;
            if n > 0 {
                stage_ends.push(u8::try_from(end).expect("KEY_WORDS fits in u8"));
                stage_ids.push(u8::try_from(s).expect("four stages"));
            }
        }
        let mut trie_plens = [0u8; MAX_PREFIXES];
        let mut stage_tries = [0u8; STAGES.len()];
        let mut trie_pos = [0u8; MAX_PREFIXES];
        for (t, (plen, pf)) in trie_plens.iter_mut().zip(prefixes).enumerate() {
            *plen = prefix_len(key, pf.field).unwrap_or(0);
            if *plen != 0 {
                stage_tries[usize::from(pf.stage)] |= 1 << t;
                // The end of the last stage before the field's (the field's stage is here).
                trie_pos[t] = stage_ids
                    .iter()
                    .zip(&stage_ends)
                    .take_while(|(s, _)| **s < pf.stage)
                    .last()
                    .map_or(0, |(_, e)| *e);
            }
        }
        let mults = idx.iter().map(|w| WORD_MULT[usize::from(*w)]).collect();
        Mask {
            key: *key,
            idx,
            bits,
            mults,
            stage_ends: stage_ends.into(),
            stage_ids: stage_ids.into(),
            trie_plens,
            stage_tries,
            trie_pos,
            trie_set: stage_tries.iter().fold(0, |a, s| a | s),
            trie_bit: trie_plens.map(|l| if l == 0 { 0 } else { 1 << ((l - 1) % 64) }),
            valid_prereqs: Default::default(),
        }
    }

    /// True if a match with this mask and prerequisite bits `bits` passed the check before
    /// ([`Mask::note_prereqs`]).
    pub(crate) fn prereqs_checked(&self, bits: u32) -> bool {
        let want = u64::from(bits) | 1 << 32;
        self.valid_prereqs
            .iter()
            .any(|s| s.load(Ordering::Relaxed) == want)
    }

    /// Remembers that a match with this mask and prerequisite bits `bits` passed the check
    /// (in a free slot, or over one of the others).
    pub(crate) fn note_prereqs(&self, bits: u32) {
        let slot = self
            .valid_prereqs
            .iter()
            .find(|s| s.load(Ordering::Relaxed) == 0)
            .unwrap_or(&self.valid_prereqs[bits as usize % 4]);
        slot.store(u64::from(bits) | 1 << 32, Ordering::Relaxed);
    }

    /// ORs the mask words at positions `0..end` of `idx` into `wc`.
    #[inline]
    pub(crate) fn or_into(&self, wc: &mut FlowKey, end: usize) {
        for (i, b) in self.idx[..end].iter().zip(&self.bits[..end]) {
            wc.words[usize::from(*i)] |= *b;
        }
    }
}

/// The CIDR prefix length of `mask` on field `f`, or `None` if the field's mask is not a
/// (non-empty) run of ones from its most significant bit.
pub(crate) fn prefix_len(mask: &FlowKey, f: KeyField) -> Option<u8> {
    let width = u32::from(f.width);
    let m = mask.get(f) << (128 - width);
    let ones = m.leading_ones();
    if ones == 0 || m.trailing_zeros() + ones != 128 {
        return None;
    }
    u8::try_from(ones).ok()
}

/// Value words a rule keeps inline (OVS's benchmark rules constrain ten words), so that the
/// writer compares a rule's match without a second pointer chase. Lookups never read them:
/// subtables keep their entries' words themselves.
const N_VALUES_INLINE: usize = 10;

/// A rule's masked value words, inline when there are at most [`N_VALUES_INLINE`].
#[derive(Clone, Debug)]
pub(crate) enum Values {
    Inline(u8, [u64; N_VALUES_INLINE]),
    Heap(Box<[u64]>),
}

impl Values {
    pub(crate) fn new(value: &FlowKey, mask: &Mask) -> Values {
        Values::gather(value, &mask.idx)
    }

    /// The words of `value` at `idx` (a mask's [`value_idx`]).
    pub(crate) fn gather(value: &FlowKey, idx: &[u8]) -> Values {
        if idx.len() <= N_VALUES_INLINE {
            let mut a = [0u64; N_VALUES_INLINE];
            for (o, i) in a.iter_mut().zip(idx) {
                *o = value.words[usize::from(*i)];
            }
            Values::Inline(u8::try_from(idx.len()).expect("at most N_VALUES_INLINE"), a)
        } else {
            Values::Heap(idx.iter().map(|i| value.words[usize::from(*i)]).collect())
        }
    }

    /// No words.
    pub(crate) fn none() -> Values {
        Values::Inline(0, [0; N_VALUES_INLINE])
    }

    #[inline]
    pub(crate) fn as_slice(&self) -> &[u64] {
        match self {
            Values::Inline(n, a) => &a[..usize::from(*n)],
            Values::Heap(b) => b,
        }
    }
}

/// The total order of rules: higher priority first, then earlier insertion first.
pub(crate) type Rank = u128;

pub(crate) fn rank(priority: u32, seq: u64) -> Rank {
    (u128::from(priority) << 64) | u128::from(u64::MAX - seq)
}

/// The priority of a rank (its high half): a lookup that reads a rule's rank has its priority
/// from the same load (the `priority` field lies two cache lines further on).
#[inline]
#[allow(clippy::cast_possible_truncation)] // The high half holds a `u32`.
pub(crate) fn rank_priority(rank: Rank) -> u32 {
    (rank >> 64) as u32
}

/// One rule: a match, a priority, a cookie, a payload (the pipeline's actions) and a handle
/// to its statistics.
pub struct Rule<T> {
    pub(crate) rank: Rank,
    pub(crate) priority: u32,
    pub(crate) seq: u64,
    pub(crate) cookie: u64,
    pub(crate) mask: Arc<Mask>,
    pub(crate) values: Values,
    pub(crate) stats: Stats<T>,
    pub(crate) payload: T,
}

/// A rule's counters: its own, in the rule's allocation (one allocation a new rule, not two),
/// or, for a version [`crate::Classifier::modify`] made, those of the rule's first version,
/// which it keeps alive (never a version that is itself `Of` another).
pub(crate) enum Stats<T> {
    Own(RuleStats),
    Of(Arc<Rule<T>>),
}

impl<T> Stats<T> {
    /// The counters of a new version of `rule` (its first version's).
    pub(crate) fn of(rule: &Arc<Rule<T>>) -> Stats<T> {
        match &rule.stats {
            Stats::Own(_) => Stats::Of(rule.clone()),
            Stats::Of(first) => Stats::Of(first.clone()),
        }
    }
}

/// The value of field `f` in masked value words `values` (of mask `mask`, as a rule keeps
/// them).
pub(crate) fn field_value(mask: &Mask, values: &[u64], f: KeyField) -> u128 {
    let word = |w: usize| {
        mask.idx
            .iter()
            .position(|i| usize::from(*i) == w)
            .map_or(0, |p| values[p])
    };
    let w = usize::from(f.word);
    if f.width > 64 {
        (u128::from(word(w)) << 64) | u128::from(word(w + 1))
    } else {
        u128::from(word(w) >> f.shift) & (u128::MAX >> (128 - u32::from(f.width)))
    }
}

impl<T> Rule<T> {
    /// The rule's priority: among the rules a packet matches, the highest wins.
    pub fn priority(&self) -> u32 {
        self.priority
    }

    /// Insertion order: among matching rules of equal priority, the lowest wins. Kept by
    /// `modify` and by an add that replaces a rule with the same match and priority.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The controller's opaque cookie.
    pub fn cookie(&self) -> u64 {
        self.cookie
    }

    /// The payload (for the pipeline, the rule's actions).
    pub fn payload(&self) -> &T {
        &self.payload
    }

    /// The rule's counters; shared by every version of the rule that `modify` makes.
    pub fn stats(&self) -> &RuleStats {
        match &self.stats {
            Stats::Own(s) => s,
            // A first version, whose counters are its own (`Stats::of`).
            Stats::Of(first) => first.stats(),
        }
    }

    /// The rule's match, rebuilt from its compressed form.
    #[doc(alias = "match")]
    pub fn match_(&self) -> Match {
        Match::new(self.value_key(), self.mask.key)
    }

    /// The rule's (masked) value of field `f`, as `self.value_key().get(f)` without building
    /// the key.
    pub(crate) fn field_value(&self, f: KeyField) -> u128 {
        field_value(&self.mask, self.values.as_slice(), f)
    }

    /// The rule's (masked) value as a full key.
    pub(crate) fn value_key(&self) -> FlowKey {
        let mut k = FlowKey::default();
        for (i, v) in self.mask.idx.iter().zip(self.values.as_slice()) {
            k.words[usize::from(*i)] = *v;
        }
        k
    }
}

impl<T: fmt::Debug> fmt::Debug for Rule<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rule")
            .field("priority", &self.priority)
            .field("seq", &self.seq)
            .field("cookie", &self.cookie)
            .field("match", &self.match_())
            .field("payload", &self.payload)
            .finish()
    }
}

/// Mixes one word into a running hash (FxHash step; [`finish`] spreads the bits).
#[inline]
pub(crate) fn mix(h: u64, w: u64) -> u64 {
    (h.rotate_left(5) ^ w).wrapping_mul(0x517c_c1b7_2722_0a95)
}

/// Per-word odd multipliers for [`mix_at`] (splitmix64 outputs, made odd).
const WORD_MULT: [u64; KEY_WORDS] = {
    let mut m = [0u64; KEY_WORDS];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut i = 0;
    while i < KEY_WORDS {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        m[i] = (z ^ (z >> 31)) | 1;
        i += 1;
    }
    m
};

/// Adds key word `w` at index `word` to a running hash: a multilinear sum with a distinct
/// odd multiplier per word, so the words of a key hash in parallel rather than in one
/// dependent chain, and a running sum over stages `0..=k` is the hash of those stages.
/// [`finish`] spreads the bits.
#[inline]
pub(crate) fn mix_at(h: u64, word: u8, w: u64) -> u64 {
    mix_with(h, WORD_MULT[usize::from(word)], w)
}

/// [`mix_at`] with the word's multiplier given ([`Mask`]'s `mults`).
#[inline]
pub(crate) fn mix_with(h: u64, mult: u64, w: u64) -> u64 {
    h.wrapping_add(w.wrapping_mul(mult))
}

/// Finalizes a running hash (the MurmurHash3 64-bit finalizer).
#[inline]
pub(crate) fn finish(h: u64) -> u64 {
    let h = (h ^ (h >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
    let h = (h ^ (h >> 33)).wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// A `Hasher` over whole words, for maps keyed by a [`FlowKey`] on the writer's side.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct WordHasher(u64);

impl std::hash::Hasher for WordHasher {
    fn finish(&self) -> u64 {
        finish(self.0)
    }

    fn write(&mut self, bytes: &[u8]) {
        // Four independent chains over 32-byte blocks, folded at the end: one chain's
        // multiply waits on the last, and a whole key (360 bytes, as the writer's mask map
        // hashes) took 45 of them in a row.
        let mut blocks = bytes.chunks_exact(32);
        let mut lanes = [self.0, 1, 2, 3];
        for b in &mut blocks {
            for (l, c) in lanes.iter_mut().zip(b.chunks_exact(8)) {
                *l = mix(*l, u64::from_le_bytes(c.try_into().expect("chunks of 8")));
            }
        }
        self.0 = lanes.iter().fold(0, |h, l| mix(h, *l));
        let rest = blocks.remainder();
        let mut chunks = rest.chunks_exact(8);
        for c in &mut chunks {
            let w = u64::from_le_bytes(c.try_into().expect("chunks of 8"));
            self.0 = mix(self.0, w);
        }
        for b in chunks.remainder() {
            self.0 = mix(self.0, u64::from(*b));
        }
    }

    fn write_u64(&mut self, i: u64) {
        self.0 = mix(self.0, i);
    }

    fn write_usize(&mut self, i: usize) {
        self.0 = mix(self.0, i as u64);
    }
}

/// Builds [`WordHasher`]s.
pub(crate) type WordBuildHasher = std::hash::BuildHasherDefault<WordHasher>;

const _: () = assert!(KEY_WORDS <= u8::MAX as usize);
