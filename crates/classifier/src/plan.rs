//! A rule set's subtables as bitmaps of their prefix lengths, for lookups that walk every
//! trie first ([`Walked`]): which subtables the walks rule out is then a few ORs over the
//! lengths the walks met, not a test per subtable, and the explanation of all the ruled-out
//! subtables a lookup passed is made once, at its end, from the same bitmaps.
//!
//! Bit `p` of a bitmap stands for the subtable at position `p` of the rule set's order (by
//! highest priority). A plan covers at most 64 subtables; a rule set with more, or none with a
//! prefix length on a trie's field, has none, and its lookups test each subtable
//! ([`Walked::rule_out`]). The plan is made whenever the order is, from the subtables' masks
//! (which never change), so both versions of a rule set with the same order have the same one.

use std::sync::Arc;

use packet::key::FlowKey;

use crate::rule::{Mask, MAX_PREFIXES};
use crate::subtable::Walked;

/// See the module documentation.
#[derive(Debug, Clone, Default)]
pub(crate) struct Plan {
    /// The positions of the order; 0 if there is no plan.
    all: u64,
    /// Each position's interned mask (none for a position without a subtable), held so that
    /// its address cannot be another mask's while the plan lives: a subtable emptied and made
    /// again at the same index with another mask and the same highest priority leaves the
    /// order as it was, not the plan ([`Plan::holds`]).
    ids: Vec<Option<Arc<Mask>>>,
    /// Per trie (ascending) and prefix length (longest first), the positions whose mask has
    /// that length on the trie's field.
    lens: Vec<Len>,
    /// Per trie, the positions whose mask has no length on its field (the trie cannot rule
    /// them out).
    free: [u64; MAX_PREFIXES],
    /// The words a rule-out by a trie consults besides the trie's bits (the mask's words of
    /// the stages before the trie's field), grouped: per trie and distinct list of words, the
    /// positions that have that list.
    pre: Vec<(u8, u64, Words)>,
}

/// Mask words as (word index, bits).
type Words = Box<[(u8, u64)]>;

/// The subtables with one prefix length on one trie's field ([`Plan`]'s `lens`).
#[derive(Debug, Clone, Copy)]
struct Len {
    /// The positions.
    bits: u64,
    /// The length's bit in its half of a walk's lengths ([`Walked::has_bit`]).
    bit: u64,
    trie: u8,
    /// 1 if the length is above 64.
    half: u8,
    len: u8,
}

/// Which subtables a lookup's walks rule out ([`Plan::rule_out`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ruled {
    /// Per trie, the positions it rules out that no earlier trie does (the first trie that
    /// rules a subtable out is the one its explanation names, as [`Walked::rule_out`]'s).
    pub(crate) by: [u64; MAX_PREFIXES],
    /// The positions no trie rules out.
    pub(crate) alive: u64,
}

impl Plan {
    /// The plan of an order whose subtables' masks are `masks` (`None` for a position without
    /// a subtable).
    pub(crate) fn new<'a>(masks: impl ExactSizeIterator<Item = Option<&'a Arc<Mask>>>) -> Plan {
        let n = masks.len();
        if n > 64 {
            return Plan::default();
        }
        let mut plan = Plan::default();
        let mut any = false;
        for (p, m) in masks.enumerate() {
            let bit = 1u64 << p;
            plan.all |= bit;
            plan.ids.push(m.cloned());
            let Some(m) = m else {
                plan.free.iter_mut().for_each(|f| *f |= bit);
                continue;
            };
            for (t, plen) in m.trie_plens.iter().enumerate() {
                if *plen == 0 {
                    plan.free[t] |= bit;
                    continue;
                }
                any = true;
                let t8 = u8::try_from(t).expect("MAX_PREFIXES fits in u8");
                match plan
                    .lens
                    .iter_mut()
                    .find(|e| e.trie == t8 && e.len == *plen)
                {
                    Some(e) => e.bits |= bit,
                    None => plan.lens.push(Len {
                        bits: bit,
                        bit: m.trie_bit[t],
                        trie: t8,
                        half: u8::from(*plen > 64),
                        len: *plen,
                    }),
                }
                let upto = usize::from(m.trie_pos[t]);
                let words: Words = m.idx[..upto]
                    .iter()
                    .copied()
                    .zip(m.bits[..upto].iter().copied())
                    .collect();
                match plan
                    .pre
                    .iter_mut()
                    .find(|(tt, _, w)| *tt == t8 && **w == *words)
                {
                    Some((_, bits, _)) => *bits |= bit,
                    None => plan.pre.push((t8, bit, words)),
                }
            }
        }
        if !any {
            return Plan::default();
        }
        plan.lens
            .sort_unstable_by(|a, b| a.trie.cmp(&b.trie).then(b.len.cmp(&a.len)));
        plan
    }

    /// True unless lookups use the plan and its subtable at position `p` has a mask other
    /// than `m`.
    #[inline]
    pub(crate) fn holds(&self, p: usize, m: &Arc<Mask>) -> bool {
        !self.on() || matches!(self.ids.get(p), Some(Some(id)) if Arc::ptr_eq(id, m))
    }

    /// True if lookups use the plan.
    #[inline]
    pub(crate) fn on(&self) -> bool {
        self.all != 0
    }

    /// Which subtables the walks `w` rule out.
    #[inline]
    pub(crate) fn rule_out(&self, w: &Walked) -> Ruled {
        let mut kept = self.free;
        for e in &self.lens {
            let t = usize::from(e.trie);
            // Branch-free: which lengths a walk met is random per key.
            let met = u64::from(w.has_bit(t, usize::from(e.half), e.bit));
            kept[t] |= e.bits & met.wrapping_neg();
        }
        let mut alive = self.all;
        let mut by = [0u64; MAX_PREFIXES];
        for (b, k) in by.iter_mut().zip(kept) {
            *b = alive & !k;
            alive &= k;
        }
        Ruled { by, alive }
    }

    /// ORs into `wc` what proves the misses of the ruled-out subtables at the positions of
    /// `visited` (those a lookup passed before it stopped): per trie, the words of the stages
    /// before its field of each, and the bits of its field the longest of its rule-outs needs
    /// (noted in `w`, which ORs them at [`Walked::finish`]).
    #[inline]
    pub(crate) fn explain(&self, ruled: &Ruled, visited: u64, w: &mut Walked, wc: &mut FlowKey) {
        // Per trie, its longest length among the subtables it ruled out: lengths come longest
        // first, so the first met is it (a `w.note` of a shorter one would change nothing).
        for e in &self.lens {
            let t = usize::from(e.trie);
            if e.bits & ruled.by[t] & visited != 0 {
                w.note(t, e.len);
            }
        }
        for (t, bits, words) in &self.pre {
            if bits & ruled.by[usize::from(*t)] & visited != 0 {
                for (i, b) in words.iter() {
                    wc.words[usize::from(*i)] |= *b;
                }
            }
        }
    }
}

/// The positions below `p` (all 64 for `p` of 64).
#[inline]
pub(crate) fn below(p: usize) -> u64 {
    if p >= 64 {
        u64::MAX
    } else {
        (1u64 << p) - 1
    }
}
