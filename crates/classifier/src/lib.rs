//! The classifier: priority lookup over masked rules, with wildcard tracking, prefix tries
//! and versioned updates (the analogue of OVS's `lib/classifier.c`).
//!
//! # What it does
//!
//! A rule is an [`openflow::Match`] (a value/mask pair over a [`FlowKey`]), a priority, a
//! cookie, a payload `T` (for the pipeline, its actions) and a [`RuleStats`] handle. A
//! lookup of a packet's key returns the matching rule with the highest priority. Among
//! matching rules of equal priority the earliest inserted wins (OVS leaves this undefined;
//! we fix it so that `naive` and the proptests can compare exactly). A rule is identified
//! by its match and priority, as in OpenFlow: inserting a rule with the same match and
//! priority replaces it in place (same insertion order, fresh counters), and `modify`
//! changes only its payload (same order, cookie and counters).
//!
//! # How
//!
//! **Tuple-space search.** Rules with the same mask share a subtable, a hash table keyed by
//! the masked value. The hash covers only the mask's non-zero words, precomputed per mask
//! like OVS's miniflow maps. A lookup compares the value words without touching the rule:
//! a cell holds up to four inline (an exact 5-tuple has four), and wider masks keep the rest of
//! a cell's words in its row, cache lines in an array beside the cells at the cell's position
//! (so that a probe loads the cell, its row and its entry together). Subtables are sorted by their
//! highest priority, and a lookup stops as soon as no remaining subtable can hold a rule of
//! the best priority found (subtables with that same priority are still probed, for the
//! tie rule). Each subtable keeps the range of its rules' priorities, and a lookup decides
//! from the ranges whenever they settle it (whether to stop, which of two rules wins), reading
//! a rule's rank only when they overlap: in a table larger than the caches, each rule read is a
//! cache miss.
//!
//! A subtable's values sit in place in an open-addressing table of cells (`shared.rs`, at most
//! half full, a tag byte per cell beside it), and each version's entries (the rules of a value)
//! in an array beside the cells, at the same positions: a hit usually reads one cell and the
//! entry beside it, both found from the hash and the (small, cached) tags alone, neither
//! waiting on the other. Past 32,768 rules a subtable is cut into 64 such tables (segments, by
//! the hash's top bits), each at most seven tenths full, with load limits staggered between
//! segments so that each doubles alone, at its own point of the table's growth: an insertion
//! that grows a table copies a sixty-fourth of it, where a doubling of the whole table stalled
//! the writer for tens of milliseconds at 262,144 rules. Its stage indices split the same way.
//! [`RuleSet::lookup_batch`] uses that: it takes up to [`BATCH`] keys through the subtables
//! together and, in each subtable too large for the caches, hashes every key and prefetches every
//! key's home cell and entry before comparing any (`hint.rs` holds the crate's only `unsafe` code:
//! the prefetch, and arrays allocated zeroed), so the cache misses of a batch are in flight
//! together and a table far larger than the caches costs little more per lookup than a small one (a
//! rule set of several subtables that all fit in the caches is looked up key by key: there is no
//! miss to overlap). Results and consulted bits are those of single lookups.
//!
//! **Wildcard tracking.** With `Some(wc)`, a lookup ORs into `wc` every key bit it needed.
//! The contract (checked by proptest): *every packet that agrees with the looked-up packet
//! on the bits of `wc` gets the same rule.* Per subtable visited:
//!
//! - a hit consults the subtable's whole mask;
//! - a miss is explained as narrowly as the structures allow. The **prefix tries** come first: if
//!   no rule prefix of the packet's address has the subtable's prefix length, the subtable misses,
//!   and only the address bits the trie walk needed (plus the words of the stages before the
//!   field's: metadata, L2, L3, L4, [`packet::key::STAGES`]) are consulted, not the whole /32.
//!   Otherwise the **stage indices** (hashes of every rule's stages up to each one) are asked stage
//!   by stage, as OVS does: if no rule has the packet's values there, only the stages so far are
//!   consulted;
//! - subtables skipped because of priority consult nothing.
//!
//! A hit does not pay for the explanation: the lookup probes the full hash first and asks the
//! stage indices only on a miss (the outcome is the same as probing stage by stage), finishing
//! their hashes from the hash chain the probe left at each stage's end instead of hashing the
//! words again. In a rule set of several subtables, every trie is walked to the end of the
//! packet's path at the first subtable with a prefix length on a trie's field (`Walked`), and
//! from then on each subtable a trie rules out is skipped without a probe: a mixed-mask set
//! of twenty subtables skips 19 of them on a miss and 6 of the 9.5 it visits on a hit. The
//! address bits those rule-outs need are nested (a prefix of the walk's path), so the lookup
//! keeps the longest per trie and ORs it in once. With at most 64 subtables the rule set keeps
//! them as bitmaps by prefix length (`plan.rs`): a lookup's rule-outs are then a few ORs over the
//! lengths its walks met, and the ruled-out subtables it passed are explained together at its
//! end. Lookups without tracking walk the tries too where they fit in the caches (the
//! probes they save cost more than the walks there). A rule set of one subtable (an exact-match
//! table) walks its tries lazily instead, at its miss, stage by stage and only as deep as its
//! prefix length asks.

//! Tries are path-compressed binary tries with counts (`trie.rs`), one per field for both
//! versions: the writer changes the node array in place while readers walk it. The prefix fields
//! are OVS's `prefixes`: by default `nw_dst` and `nw_src`; IPv6 addresses and any field up to 64
//! bits work too ([`Classifier::with_prefixes`], at most [`MAX_PREFIXES`]). A batch's trie
//! changes are applied sorted by prefix, and a trie whose nodes changed by half is laid
//! out again depth-first, so walks touch few cache lines. Each node array has a jump table,
//! indexed by the address bits below the root, of nodes a walk from the root would pass, with
//! (for fields of at most 32 bits) the live prefix lengths above them: the writer's insertions
//! and removals and the readers' walks start there (a few nodes from the leaves instead of
//! about 18 at 256K random prefixes) and learn what a walk from the root would; a batch's
//! sorted changes go on from the last one's path where it is a prefix of the next. A batch with as
//! many trie changes as half the trie's nodes builds it again instead, straight into a new array in
//! one sequential pass over the merged sorted prefixes (a change in place costs a walk from the
//! jump table; the pass costs the whole trie, and below that line the changes in place do not
//! lay the trie out again). A trie holds a
//! superset of each version's prefixes: a batch adds its prefixes before it is published, and
//! the prefixes of the rules it removed leave at the next replay, when no version has them.
//!
//! **Versioned updates** (the left-right pattern, in safe Rust on [`arc_swap`]). Two
//! versions of the rule set exist; readers look up in the published one without locks. A
//! [`Batch`] is applied to the other one, then published by a pointer swap: a reader sees
//! all of a batch or none of it. A batch keeps each operation's match as a rule does, its
//! mask's position among the batch's distinct masks and its value words (128 bytes an
//! operation, against 744 for an [`Op`] with its 720-byte [`Match`](openflow::Match)), and
//! its commit checks the matches group by group as it applies them (a bad match is the
//! batch's error even after an operation that failed to apply, as if every match had been
//! checked first). Before the next commit the writer waits until no reader still uses the
//! old version (at most one lookup or [`Snapshot`]) and replays the batch on it.
//! [`Classifier::commit_with`] commits the same way from
//! operations given one at a time (no [`Batch`] is built; a writer that keeps the rules' matches in
//! their payloads passes them by reference). Rules are shared by both versions (`Arc<Rule<T>>`),
//! and so are the large arrays: each subtable's cells (with their rows) and stage indices are
//! written once, in place, while readers of the published version probe them (atomics; see
//! `shared.rs` for the protocol: a version sees a cell only if its own entry array has an entry at
//! the cell's position, so a cell made for the spare is invisible to the published version, and a
//! cell is buried only once neither version has an entry there). The replay onto the other version
//! then copies entries at the positions the batch changed, takes the removed rules' prefixes out
//! of the shared tries and takes the subtable order; only the entry arrays exist twice.
//! [`Classifier::memory`] reports the bytes per rule.
//!
//! **Compiled form** ([`Classifier::compile`], `compiled.rs`). A small rule set of several
//! masks (at most 8,192 rules) can be compiled into merged tuples (TupleMerge): rules whose
//! masks all contain a coarser mask share one hash table keyed by that mask, a bucket lists
//! its rules best first, and a lookup compares them until one matches. The bench's mixed set
//! (twenty masks) becomes three tables up to 2,000 rules, six at 4,096 and seven at 8,192,
//! whose lookups with tracking are 2.1 to 3.4 times the subtables' on hits (12.5M a second at
//! 500 rules, 10.3M at 1,000) and 1.4 to 2.7 times on misses, with fewer bits consulted (86
//! against 115 a hit, 18 against 50 a miss at 1,000 rules). The compiled form is kept only if
//! it has at most eight tables, fewer than the subtables, and consults no more bits than they
//! do on a sample of keys. It belongs to the version it was made for: the next change drops
//! it, and lookups use the subtables until the writer compiles again, so a writer compiles a
//! rule set that has settled.
//!
//! # Invariants
//!
//! - A mask has no bit outside [`FlowKey::valid_bits`], and a rule's match passes
//!   [`Match::check_prerequisites`](openflow::Match::check_prerequisites); a batch that breaks
//!   either, or that modifies or removes a rule that does not exist, fails as a whole with the
//!   index of the failing operation and leaves the rules unchanged.
//! - Both versions hold the same rules after every commit (the spare lags by the changes of exactly
//!   one batch until the next commit replays them).
//! - A live cell's value never changes; a value has at most one live cell per subtable (in the
//!   segment its hash names, once split); a cell becomes a tombstone only when neither version has
//!   an entry at its position, and only the writer's newest arrays are ever written (a version
//!   holding an older array after a growth reads it frozen, until its replay moves it to the new
//!   one).
//! - A stage index counts each live cell's partial hashes: a superset of what either version can
//!   see (it may un-wildcard a stage more than needed, never give a wrong rule).
//! - A trie holds every prefix of either version's rules whose mask on the field is a CIDR prefix
//!   (and, until the next replay, those of rules the last batch removed): a walk may report a
//!   length no rule of its version has (the lookup then probes that subtable and consults more
//!   bits), never miss one it has. A node's prefix never changes while a walk can reach it; an
//!   unlinked node is reused only after the version it was unlinked under has been waited for. A
//!   subtable whose mask on the field is not a prefix never uses that trie.
//!
//! # Limits
//!
//! - Prefix fields are fixed when the classifier is made (OVS can change them at run time).
//! - No ports trie (OVS un-wildcards `tp_src`/`tp_dst` bit by bit with one).
//! - The writer spins (then yields) while a reader holds the previous version; a reader that never
//!   drops its [`Snapshot`] stalls the next commit.
//!
//! # Thread safety
//!
//! [`Classifier`] is the single writer (`&mut self`). [`Reader`] is `Clone + Send + Sync`
//! (for `T: Send + Sync`); lookups never block. A commit waits for readers only until they
//! leave the previous version, so readers must not hold a [`Snapshot`] for long.
//!
//! # Example
//! ```
//! use classifier::Classifier;
//! use openflow::Match;
//! use packet::key::{fields, FlowKey};
//!
//! let mut cls: Classifier<&str> = Classifier::new();
//! let mut m = Match::catch_all();
//! m.set_exact(fields::DL_TYPE, 0x0800);
//! m.set_masked(fields::NW_DST, 0x0a00_0000, 0xff00_0000);
//! cls.insert(m, 10, 0, "to-ten").unwrap();
//! cls.insert(Match::catch_all(), 0, 0, "default").unwrap();
//!
//! let reader = cls.reader();
//! let mut pkt = FlowKey::default();
//! pkt.set_dl_type(0x0800);
//! pkt.set_nw_dst(0xc0a8_0001);
//! let mut wc = FlowKey::default();
//! let rule = reader.lookup(&pkt, Some(&mut wc)).unwrap();
//! assert_eq!(*rule.payload(), "default");
//! // The trie needed only the first bit of nw_dst to rule 10.0.0.0/8 out.
//! assert_eq!(wc.nw_dst(), 0x8000_0000);
//! ```
//!
//! Maturity: experimental. Configuration: the prefix fields
//! ([`Classifier::with_prefixes`]).

#![deny(unsafe_code)]
#![warn(missing_docs)]

mod compiled;
#[allow(unsafe_code)]
mod hint;
#[cfg(any(test, feature = "test-utils"))]
pub mod naive;
mod plan;
mod rule;
mod ruleset;
mod shared;
mod subtable;
mod trie;
mod writer;

#[cfg(test)]
mod tests;

pub use compiled::{Uncompiled, COMPILED_MAX_TABLES, COMPILE_MAX_RULES};
use packet::key::{FlowKey, KeyField};
pub use rule::{Rule, RuleStats, MAX_PREFIXES};
pub use ruleset::{RuleSet, BATCH};
pub use writer::{Batch, Classifier, MemoryStats, Op, Ops, Reader, Snapshot};

/// A configured prefix field and the stage it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PrefixField {
    pub(crate) field: KeyField,
    pub(crate) stage: u8,
}

/// Errors of the classifier's control side.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The mask sets bits that belong to no field.
    #[error("mask word {word} sets bits {bits:#x} that belong to no field")]
    InvalidMask {
        /// Index of the key word.
        word: usize,
        /// The offending bits.
        bits: u64,
    },
    /// A field is matched without its prerequisites (e.g. `tp_dst` without `tcp`).
    #[error(transparent)]
    Prerequisite(openflow::Error),
    /// `modify` or `remove` named a rule (match and priority) that does not exist.
    #[error("no rule with this match at priority {priority}")]
    NotFound {
        /// The priority asked for.
        priority: u32,
    },
    /// More prefix fields than the classifier tracks.
    #[error("{n} prefix fields configured, at most {max} are supported")]
    TooManyPrefixes {
        /// How many were asked for.
        n: usize,
        /// The limit.
        max: usize,
    },
    /// A prefix field cannot have a trie.
    #[error("prefix field {field}: {why}")]
    BadPrefixField {
        /// The field.
        field: &'static str,
        /// Why not.
        why: &'static str,
    },
    /// An operation of a batch failed; nothing of the batch was applied.
    #[error("batch operation {index}: {source}")]
    InBatch {
        /// Index of the failing operation in the batch.
        index: usize,
        /// What went wrong.
        source: Box<Error>,
    },
}

impl Error {
    pub(crate) fn at(self, index: usize) -> Error {
        Error::InBatch {
            index,
            source: Box::new(self),
        }
    }

    /// The error without its batch position.
    pub fn cause(&self) -> &Error {
        match self {
            Error::InBatch { source, .. } => source.cause(),
            e => e,
        }
    }
}

/// Compile-time check that readers can cross threads.
#[allow(dead_code)]
fn assert_send_sync() {
    fn is<X: Send + Sync>() {}
    is::<Reader<u32>>();
    is::<std::sync::Arc<Rule<u32>>>();
    let _ = FlowKey::default;
}
