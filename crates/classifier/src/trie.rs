//! Prefix tries: which prefix lengths of one address field can match a packet, and how many
//! of the packet's address bits it took to know.
//!
//! One trie per configured prefix field (OVS `prefixes`, by default `nw_dst` and `nw_src`)
//! holds the prefix of every rule whose mask on that field is a CIDR prefix, with a count per
//! prefix (rules of several subtables may share one). A lookup walks the trie along the
//! packet's address once and returns:
//!
//! - the set of prefix lengths at which some rule's prefix equals the packet's address prefix, and
//! - `examined`, the number of leading address bits the walk read.
//!
//! A subtable whose rules all have prefix length `P` on the field, with `P` not in the set,
//! holds no rule the packet can match, so the lookup skips it. What the skip consulted is
//! the first `min(examined, P)` bits of the address: any packet that agrees on the first
//! `examined` bits takes the same walk, and any packet that agrees on the first `P` bits has
//! the same `P`-bit prefix, which no rule holds. That is how a lookup un-wildcards only the
//! address bits that decide between rules instead of whole /32s (OVS `check_tries`).
//!
//! The trie is path-compressed and stores absolute prefixes (left-aligned in a `u128`, bits
//! past the length zero), so removing a node only relinks its parent. Nodes live in an array
//! indexed by `u32`.
//!
//! ## One trie for both versions
//!
//! Both versions of the rules read the same node array ([`TrieView`], an `Arc` of atomics),
//! and the writer ([`Trie`]) changes it in place while readers walk it, as the subtables'
//! cells are shared ([`crate::shared`]):
//!
//! - **A node's prefix and length never change while a walk can reach it.** An insertion writes its
//!   new nodes, then links them with one release store (a split links a new fork in place of the
//!   old link, the fork pointing at the old node); a walk sees the trie before or after the link,
//!   never a half-made node. A removal relinks the parent past the node (prefixes are absolute, so
//!   the node's child is linked as it is).
//! - **The trie holds a superset of each version's prefixes.** A batch adds its rules' prefixes
//!   before it is published; the prefixes of the rules it removes leave only at the next replay,
//!   when no version holds those rules any more (the replay runs after the wait for the spare's
//!   readers). A walk may then report a prefix length no rule of its version has: the lookup probes
//!   that subtable and consults more bits, never fewer. Every prefix of its version lies on its
//!   path in every state a walk may see, so what a walk rules out and the bits it says it read hold
//!   for its version (see [`Walk`]).
//! - **An unlinked node is reused only when no walk can be on it.** It waits in limbo, tagged with
//!   the number of versions published so far; it is freed at the first replay after the next
//!   publication, whose wait for the spare's readers outlasts every walk that began before the
//!   unlink ([`Trie::reclaim`]).
//! - **A re-layout or rebuild writes a new array** ([`Trie::relayout`], [`Trie::rebuild_with`]),
//!   which the spare takes at once and the other version at its replay; the old one is no longer
//!   written and stays whole for the readers still on it.
//!
//! ## The jump table
//!
//! Walks from the root cost one cache miss a node at 256K prefixes (about 18 nodes to a leaf in a
//! trie of 256K random /32s). Each array has a table ([`Jump`]), indexed by the address bits below
//! the root's prefix, of nodes on the way and, for fields of at most 32 bits, of the live prefix
//! lengths above them. The writer's insertions start there, three or four nodes above where they
//! link; readers' walks start there too and learn what a walk from the root would. The table is
//! made with every new array (a re-layout or rebuild, in the pass that writes the array), copied
//! with an array grown in place, and made again, as a new view of the same array, once the trie
//! has doubled. Its nodes are only ever valid, its lengths exact (see [`Jump`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::hint::{prefetch, zeroed, Zeroable};

/// No node.
const NIL: u32 = u32::MAX;

/// The sentinel at position 0 of every non-empty node array: its first child is the root.
const SENTINEL: u32 = 0;

/// Fewest net prefix changes for which [`Trie::apply`] builds the trie again rather than
/// changing it in place (smaller in tests and under the fuzzer, so that their small batches
/// take both paths).
const REBUILD_MIN: usize = if cfg!(any(test, fuzzing)) { 4 } else { 64 };

#[cfg(test)]
thread_local! {
    /// Tests: how many times this thread's [`Trie::apply`] calls rebuilt a trie and changed
    /// one in place, so that a test can check it took both paths.
    pub(crate) static APPLIED: std::cell::Cell<(usize, usize)> = const { std::cell::Cell::new((0, 0)) };
}

/// Tests: counts one [`Trie::apply`] that rebuilt (or else changed in place).
#[cfg(test)]
fn count_applied(rebuilt: bool) {
    APPLIED.with(|a| {
        let (r, p) = a.get();
        a.set(if rebuilt { (r + 1, p) } else { (r, p + 1) });
    });
}

/// A node as the writer builds it.
#[derive(Debug, Clone, Copy)]
struct Parts {
    /// The node's prefix, left-aligned; bits past `len` are zero.
    bits: u128,
    /// Prefix length in bits (1..=128; the root of a trie may also be shorter).
    len: u8,
    /// Rules whose prefix is exactly this one.
    count: u32,
    /// Children by the bit at position `len`.
    child: [u32; 2],
}

/// A node position not in use.
const EMPTY: Parts = Parts {
    bits: 0,
    len: 0,
    count: 0,
    child: [NIL; 2],
};

/// One node in a trie's array. A trie over a field of at most 32 bits (IPv4 addresses) keeps
/// 16-byte nodes ([`Narrow`]): the prefix's 32 bits, its length and a live flag in one word,
/// both children in the other. Wider fields keep 32-byte nodes ([`Wide`]): the prefix in two
/// words, then the length and the live flag, then the children. In both, the meta word has the
/// length in bits 8-15 and the live flag (some rule has exactly this prefix) in bit 0; readers
/// need only that flag, the counts are the writer's ([`Trie`]).
trait Repr: Zeroable + Sized + Send + Sync + std::fmt::Debug {
    /// The prefix and the meta word (relaxed).
    fn load(&self) -> (u128, u64);
    fn meta_word(&self) -> &AtomicU64;
    fn kids_word(&self) -> &AtomicU64;
    /// Writer: takes `p` (no walk can reach the node).
    fn store(&self, p: Parts);
    /// Writer: takes `from`'s words as they are (for a new array, no reader's yet).
    fn copy_from(&self, from: &Self);
    /// A walk's address (left-aligned) in the arithmetic of this layout: the top 32 bits for
    /// narrow nodes. A walk's cost is its node step's dependent chain (load, length, address
    /// bit, child), mostly in cache, and 128-bit shifts and compares made narrow walks 10 to
    /// 15% longer (full walks of 1K- and 256K-prefix tries).
    type Addr: Copy;
    fn addr(bits: u128) -> Self::Addr;
    /// The node's prefix length and meta word, and how many leading bits of `a` its prefix
    /// shares (at most its length).
    fn meet(&self, a: Self::Addr) -> (u8, u64, u8);
    /// The child on `a`'s path below the node's `len` bits (`len` below the field's width).
    fn next(&self, a: Self::Addr, len: u8) -> u32;
}

/// A node of a trie over a field of at most 32 bits (see [`Repr`]).
#[derive(Debug)]
pub(crate) struct Narrow {
    /// The prefix's 32 bits above the length (bits 8-15) and the live flag (bit 0).
    meta: AtomicU64,
    kids: AtomicU64,
}

/// A node of a trie over a wider field (see [`Repr`]).
#[derive(Debug)]
pub(crate) struct Wide {
    hi: AtomicU64,
    lo: AtomicU64,
    meta: AtomicU64,
    kids: AtomicU64,
}

/// The length and the live flag of `p`, as the meta word has them.
fn len_live(p: &Parts) -> u64 {
    u64::from(p.len) << 8 | u64::from(p.count > 0)
}

#[allow(clippy::cast_possible_truncation)] // The prefix's top 32 bits, on purpose.
fn narrow_meta(p: &Parts) -> u64 {
    debug_assert!(
        p.len <= 32,
        "a narrow trie holds prefixes of at most 32 bits"
    );
    u64::from((p.bits >> 96) as u32) << 32 | len_live(p)
}

impl Repr for Narrow {
    #[inline]
    fn load(&self) -> (u128, u64) {
        let m = self.meta.load(Ordering::Relaxed);
        (u128::from(m >> 32) << 96, m)
    }

    #[inline]
    fn meta_word(&self) -> &AtomicU64 {
        &self.meta
    }

    #[inline]
    fn kids_word(&self) -> &AtomicU64 {
        &self.kids
    }

    fn store(&self, p: Parts) {
        self.meta.store(narrow_meta(&p), Ordering::Relaxed);
        self.kids.store(pack(p.child), Ordering::Relaxed);
    }

    fn copy_from(&self, from: &Self) {
        self.meta
            .store(from.meta.load(Ordering::Relaxed), Ordering::Relaxed);
        self.kids
            .store(from.kids.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    type Addr = u32;

    #[inline]
    #[allow(clippy::cast_possible_truncation)] // The top 32 bits, on purpose.
    fn addr(bits: u128) -> u32 {
        (bits >> 96) as u32
    }

    #[inline]
    #[allow(clippy::cast_possible_truncation)] // Unpacking the meta word.
    fn meet(&self, a: u32) -> (u8, u64, u8) {
        let m = self.meta.load(Ordering::Relaxed);
        let len = (m >> 8) as u8;
        let c = ((((m >> 32) as u32) ^ a).leading_zeros() as u8).min(len);
        (len, m, c)
    }

    #[inline]
    #[allow(clippy::cast_possible_truncation)] // Unpacking the kids word.
    fn next(&self, a: u32, len: u8) -> u32 {
        // `len` < the width <= 32.
        let b = (a >> (31 - u32::from(len))) & 1;
        (self.kids.load(Ordering::Acquire) >> (32 * b)) as u32
    }
}

#[allow(clippy::cast_possible_truncation)] // Splitting the prefix in halves.
impl Repr for Wide {
    #[inline]
    fn load(&self) -> (u128, u64) {
        let bits = u128::from(self.hi.load(Ordering::Relaxed)) << 64
            | u128::from(self.lo.load(Ordering::Relaxed));
        (bits, self.meta.load(Ordering::Relaxed))
    }

    #[inline]
    fn meta_word(&self) -> &AtomicU64 {
        &self.meta
    }

    #[inline]
    fn kids_word(&self) -> &AtomicU64 {
        &self.kids
    }

    fn store(&self, p: Parts) {
        self.hi.store((p.bits >> 64) as u64, Ordering::Relaxed);
        self.lo.store(p.bits as u64, Ordering::Relaxed);
        self.meta.store(len_live(&p), Ordering::Relaxed);
        self.kids.store(pack(p.child), Ordering::Relaxed);
    }

    fn copy_from(&self, from: &Self) {
        for (to, w) in [
            (&self.hi, &from.hi),
            (&self.lo, &from.lo),
            (&self.meta, &from.meta),
            (&self.kids, &from.kids),
        ] {
            to.store(w.load(Ordering::Relaxed), Ordering::Relaxed);
        }
    }

    type Addr = u128;

    #[inline]
    fn addr(bits: u128) -> u128 {
        bits
    }

    #[inline]
    fn meet(&self, a: u128) -> (u8, u64, u8) {
        let (nb, m) = self.load();
        let len = (m >> 8) as u8;
        (len, m, common_len(nb, a, len))
    }

    #[inline]
    fn next(&self, a: u128, len: u8) -> u32 {
        unpack_kids(self.kids.load(Ordering::Acquire))[bit(a, len)]
    }
}

/// A trie's node array, of one layout or the other; never resized once shared.
///
/// Every array is allocated zeroed ([`zeroed`]) and written only up to its last node: the
/// positions past the trie's `next` are all-zero nodes that nothing links (a zero node's
/// children would be the sentinel), and pages the allocator takes fresh from the kernel stay
/// untouched until nodes are written there: a rebuild sizes its array for the most nodes it
/// can make before it knows how many it makes ([`Trie::install_built`]).
#[derive(Debug, Clone)]
enum Arr {
    Narrow(Arc<[Narrow]>),
    Wide(Arc<[Wide]>),
}

impl Arr {
    /// A copy of the array's first `used` positions in a new one of `len` nodes.
    fn grown(&self, used: usize, len: usize) -> Arr {
        match self {
            Arr::Narrow(v) => Arr::Narrow(grown(v, used, len)),
            Arr::Wide(v) => Arr::Wide(grown(v, used, len)),
        }
    }
}

/// The root of a node array (the sentinel's first child), NIL if the array is empty.
#[inline]
fn root_of<R: Repr>(nodes: &[R]) -> u32 {
    nodes.first().map_or(NIL, |s| {
        unpack_kids(s.kids_word().load(Ordering::Acquire))[0]
    })
}

/// Runs `$body` with `$v` bound to the array's nodes, whichever their layout.
macro_rules! with_arr {
    ($arr:expr, $v:ident => $body:expr) => {
        match $arr {
            Arr::Narrow($v) => $body,
            Arr::Wide($v) => $body,
        }
    };
}

/// How many prefixes ahead a batch's insertion prefetches a prefix's jump entry
/// ([`Trie::insert_sorted`]).
const WARM_ENTRY_AHEAD: usize = 8;

/// How many prefixes ahead a batch's insertion prefetches the nodes below a prefix's jump
/// entry.
const WARM_NODES_AHEAD: usize = 4;

/// Cache lines from a jump entry's node on that [`Trie::warm_nodes`] prefetches.
const WARM_LINES: usize = 3;

/// Cache lines from a jump entry's node on that a reader's walk asks for when it begins
/// ([`TrieView::begin`]): a laid-out trie keeps each entry's subtree together after its node
/// (at 262,144 random prefixes about 16 nodes, four lines of 16-byte nodes). Mixed masks at
/// 262,144 rules, same process switched: five lines 9 to 13% more lookups a second than the
/// node's line alone, three lines 1 to 8% fewer than five, eight no more than five.
const READER_LINES: usize = 5;

/// Nodes of layout `R` to a 64-byte cache line (at least one).
#[inline]
fn nodes_per_line<R>() -> usize {
    (64 / std::mem::size_of::<R>()).max(1)
}

/// Prefetches `lines` cache lines of `v` from node `j` on.
#[inline]
fn prefetch_lines<R>(v: &[R], j: usize, lines: usize) {
    let step = nodes_per_line::<R>();
    for n in v
        .get(j..)
        .unwrap_or_default()
        .iter()
        .step_by(step)
        .take(lines)
    {
        prefetch(n);
    }
}

/// [`Trie::warm_path`] in array `v` from node `j`: the nodes [`prefetch_lines`] brought in are
/// read, the first node past them on the path is prefetched.
fn warm_path_in<R: Repr>(v: &[R], j: u32, bits: u128, len: u8) {
    let step = nodes_per_line::<R>();
    let window = j as usize..=j as usize + (WARM_LINES - 1) * step;
    let a = R::addr(bits);
    let mut cur = j;
    while cur != NIL {
        let Some(n) = v.get(cur as usize) else {
            return;
        };
        if !window.contains(&(cur as usize)) {
            prefetch(n);
            return;
        }
        let (nl, _, c) = n.meet(a);
        if nl >= len || c < nl {
            return;
        }
        cur = n.next(a, nl);
    }
}

/// `v`'s first `used` nodes copied into an array of `len` (the rest zero, see [`Arr`]).
fn grown<R: Repr>(v: &[R], used: usize, len: usize) -> Arc<[R]> {
    let v = &v[..used.min(v.len())];
    let out = zeroed::<R>(len.max(v.len()));
    for (to, from) in out.iter().zip(v) {
        to.copy_from(from);
    }
    out
}

/// The live nodes of `old` (from `root`), with their `counts`, copied into a new array of
/// `len` in depth-first order (a node's first child right after it), and their counts by new
/// position, and how many nodes it laid out; `fill` takes every node copied, with its new
/// position (a closure there was not inlined: a call a node, 51 instructions each). One pass
/// that copies node words as they are (only the links change), where a list of [`Parts`]
/// first and the array from it after moved three times the bytes (single commits of random
/// 5-tuples, all their growth included: 11 to 22% more commits a second).
fn relayout_in<R: Repr>(
    old: &[R],
    counts: &[u32],
    root: u32,
    len: usize,
    mut fill: Option<&mut JumpFill>,
) -> (Arc<[R]>, Vec<u32>, usize) {
    // Zeroed, both: the room past the live nodes is not written (see [`Arr`]).
    let out = zeroed::<R>(len);
    let mut cnt = vec![0u32; len];
    out[0].store(EMPTY);
    let mut n = 1;
    // The order the walk below meets the nodes in, when worth knowing beforehand: it then
    // prefetches each node (and its count) `RELAYOUT_AHEAD` nodes before it gets there.
    let order = if counts.len() >= RELAYOUT_INTERLEAVE_MIN {
        preorder(old, root)
    } else {
        Vec::new()
    };
    let mut stack: Vec<(u32, u32, usize)> = Vec::new();
    if root != NIL {
        stack.push((root, SENTINEL, 0));
    }
    while let Some((o, parent, side)) = stack.pop() {
        if let Some(&a) = order.get(n - 1 + RELAYOUT_AHEAD) {
            if let (Some(x), Some(c)) = (old.get(a as usize), counts.get(a as usize)) {
                prefetch(x);
                prefetch(c);
            }
        }
        debug_assert!(
            order.is_empty() || order.get(n - 1) == Some(&o),
            "pre-order"
        );
        let node = &old[o as usize];
        let kids = unpack_kids(node.kids_word().load(Ordering::Relaxed));
        let new = u32::try_from(n).expect("fewer than 4G trie nodes");
        // Second child first on the stack, so the first child is laid out next.
        for b in [1, 0] {
            if kids[b] != NIL {
                stack.push((kids[b], new, b));
            }
        }
        let (bits, meta) = node.load();
        let count = counts[o as usize];
        #[allow(clippy::cast_possible_truncation)] // The length byte of the meta word.
        let p = Parts {
            bits,
            len: (meta >> 8) as u8,
            count,
            child: [NIL; 2],
        };
        if let Some(f) = fill.as_deref_mut() {
            f.add(n, &p);
        }
        let copy = &out[n];
        copy.copy_from(node);
        copy.kids_word().store(pack([NIL; 2]), Ordering::Relaxed);
        cnt[n] = count;
        n += 1;
        // The new array is no reader's yet: plain stores. The link's half set in a register:
        // a store of the half into a copy on the stack and a load of the whole word from it
        // waited on the store.
        let link = out[parent as usize].kids_word();
        let shift = if side == 0 { 0 } else { 32 };
        let w = link.load(Ordering::Relaxed);
        link.store(
            w & !(0xffff_ffff << shift) | u64::from(new) << shift,
            Ordering::Relaxed,
        );
    }
    (out, cnt, n - 1)
}

/// Arrays of at least this many positions are laid out again with their order found first
/// ([`preorder`]); smaller ones mostly sit in the caches. (Small in tests, which then check
/// the order against the walk.)
const RELAYOUT_INTERLEAVE_MIN: usize = if cfg!(any(test, fuzzing)) {
    64
} else {
    1 << 14
};
/// How many nodes ahead of its copy [`relayout_in`] prefetches a node.
const RELAYOUT_AHEAD: usize = 16;
/// Depth below the root at which [`preorder`] cuts the trie into subtrees walked together
/// (up to `2^RELAYOUT_DEPTH` of them).
const RELAYOUT_DEPTH: u32 = 5;

/// The live nodes of `old` below `root` in pre-order (a node, then its first child's subtree,
/// then its second's), as [`relayout_in`] lays them out.
///
/// A walk of a large trie waits on a cache miss at many nodes: the nodes added since the last
/// re-layout (a third of them when the next comes due) sit at the end of the array in the
/// order they came, while the walk meets them in key order. So the trie is cut at depth
/// [`RELAYOUT_DEPTH`] into subtrees whose walks take a step each in turn, every step
/// prefetching the children that walk's next step reads, and the re-layout then copies the
/// nodes in the order found, each prefetched ahead. Measured on the largest re-layout of
/// 400,000 single commits (608,255 positions): this pass 6.2 ms and the copy 6.5 ms, against
/// 17 ms for the copying walk alone, two thirds of whose time was spent waiting on its node
/// loads; a cut at depth 4 or 7 took as long as at 5.
fn preorder<R: Repr>(old: &[R], root: u32) -> Vec<u32> {
    /// A node above the cut (its position), or the subtree of a walk below it (its number).
    enum Item {
        Node(u32),
        Walk(usize),
    }
    let kids_of = |o: u32| {
        old.get(o as usize).map_or([NIL; 2], |x| {
            unpack_kids(x.kids_word().load(Ordering::Relaxed))
        })
    };
    let mut items = Vec::new();
    let mut stacks: Vec<Vec<u32>> = Vec::new();
    // The part above the cut, in pre-order (a stack of nodes and their depths).
    let mut top: Vec<(u32, u32)> = Vec::new();
    if root != NIL {
        top.push((root, 0));
    }
    while let Some((o, depth)) = top.pop() {
        if depth == RELAYOUT_DEPTH {
            items.push(Item::Walk(stacks.len()));
            if let Some(x) = old.get(o as usize) {
                prefetch(x);
            }
            stacks.push(vec![o]);
            continue;
        }
        items.push(Item::Node(o));
        let kids = kids_of(o);
        for b in [1, 0] {
            if kids[b] != NIL {
                top.push((kids[b], depth + 1));
            }
        }
    }
    // The walks, a step each in turn until all are done.
    let mut lists: Vec<Vec<u32>> = vec![Vec::new(); stacks.len()];
    let mut active = stacks.len();
    while active > 0 {
        active = 0;
        for (stack, list) in stacks.iter_mut().zip(lists.iter_mut()) {
            let Some(o) = stack.pop() else {
                continue;
            };
            active += 1;
            list.push(o);
            let kids = kids_of(o);
            for b in [1, 0] {
                if let Some(x) = old.get(kids[b] as usize) {
                    prefetch(x);
                    stack.push(kids[b]);
                }
            }
        }
    }
    let mut order = Vec::with_capacity(items.len() + lists.iter().map(Vec::len).sum::<usize>());
    for item in items {
        match item {
            Item::Node(o) => order.push(o),
            Item::Walk(w) => order.extend_from_slice(&lists[w]),
        }
    }
    order
}

/// A new array of `len` positions (zeroed, see [`Arr`]) holding the sentinel and, from
/// position 1 on in pre-order, the path-compressed trie of `items` (see [`Build::range`]), with
/// their counts written into `counts` at the same positions; and the number of nodes. `len`
/// must exceed twice the number of items.
fn built<R: Repr>(items: &[(u128, u8, u32)], len: usize, counts: &mut [u32]) -> (Arc<[R]>, usize) {
    let out = zeroed::<R>(len);
    let mut root = NIL;
    let mut n = 1;
    if !items.is_empty() {
        // `lcp[i]`: the longest common prefix of items `i - 1` and `i` (as bit strings of
        // their lengths). A byte each, so the scans below stay in cache where the items
        // would not.
        let mut lcp = vec![0u8; items.len()];
        for i in 1..items.len() {
            let (a, la, _) = items[i - 1];
            let (b, lb, _) = items[i];
            lcp[i] = common_len(a, b, la.min(lb));
        }
        let mut b = Build {
            items,
            lcp: &lcp,
            out: &out,
            counts,
            n,
        };
        root = b.range(0, items.len());
        n = b.n;
    }
    out[0].store(Parts {
        child: [root, NIL],
        ..EMPTY
    });
    (out, n - 1)
}

fn pack(k: [u32; 2]) -> u64 {
    u64::from(k[0]) | u64::from(k[1]) << 32
}

#[allow(clippy::cast_possible_truncation)] // Unpacking halves.
fn unpack_kids(k: u64) -> [u32; 2] {
    [k as u32, (k >> 32) as u32]
}

/// What a lookup learnt about one address.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TrieMatch {
    /// Bit `l - 1` is set if some rule's prefix of length `l` matches.
    pub(crate) lens: u128,
    /// Leading address bits the walk read.
    pub(crate) examined: u8,
}

impl TrieMatch {
    /// True if a rule with prefix length `plen` (1..=128) may match.
    #[inline]
    pub(crate) fn has_len(&self, plen: u8) -> bool {
        plen > 0 && self.lens & (1u128 << (plen - 1)) != 0
    }
}

/// A walk along one address, resumable: it goes only as deep as the questions asked so far.
///
/// Over a trie the writer changes under it, what a walk concludes holds for its version:
/// every prefix of the version is in the trie in every state the walk may see, on the
/// address's path (links move, nodes do not), so a length the walk did not meet on the path
/// has no prefix of the version there, and a walk that left the path at bit `c` (a node
/// whose prefix differs there, or no child) was at a node under which, when the walk read its
/// link, every prefix of the version that agrees with the address to past that node lay.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Walk {
    /// What the walk learnt so far ([`Walk::m`]), kept flat: a `TrieMatch` inside would pad
    /// the walk to 48 bytes instead of 32, and a lookup makes four.
    lens: u128,
    cur: u32,
    examined: u8,
    started: bool,
    done: bool,
}

impl Default for Walk {
    fn default() -> Self {
        Walk::NEW
    }
}

impl Walk {
    /// A walk not begun: all zeros (`cur` is read only once the walk has started), so that an
    /// array of them is made with a few vector stores.
    pub(crate) const NEW: Walk = Walk {
        lens: 0,
        cur: 0,
        examined: 0,
        started: false,
        done: false,
    };

    /// What the walk learnt so far.
    #[inline]
    pub(crate) fn m(&self) -> TrieMatch {
        TrieMatch {
            lens: self.lens,
            examined: self.examined,
        }
    }

    /// True once the walk has a node to go on from (or has ended).
    #[inline]
    pub(crate) fn started(&self) -> bool {
        self.started
    }

    /// True if the walk has gone far enough to answer for prefix length `plen`: it ended,
    /// or it passed bit `plen` (then every node of length at most `plen` on the path was
    /// seen, and at least `plen` bits were examined).
    #[inline]
    pub(crate) fn knows(&self, plen: u8) -> bool {
        self.done || self.examined > plen
    }
}

/// A reader's handle on one trie: the node array, shared with the writer and with the other
/// version (see the module documentation).
#[derive(Debug, Clone)]
pub(crate) struct TrieView {
    arr: Arr,
    /// The array's [`Jump`] table (empty for a small trie).
    jump: Arc<Jump>,
}

impl Default for TrieView {
    fn default() -> Self {
        TrieView {
            arr: Arr::Wide(Arc::default()),
            jump: Arc::default(),
        }
    }
}

#[inline]
fn bit(v: u128, i: u8) -> usize {
    usize::from((v >> (127 - u32::from(i))) & 1 == 1)
}

/// Leading bits `a` and `b` share, at most `max`.
#[inline]
fn common_len(a: u128, b: u128, max: u8) -> u8 {
    let lz = u8::try_from((a ^ b).leading_zeros()).expect("at most 128");
    lz.min(max)
}

/// The first `len` bits set, left-aligned.
#[inline]
pub(crate) fn prefix_mask(len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len))
    }
}

impl TrieView {
    /// True if `other` reads the same array and the same jump table (a table made again for
    /// the same array is a new view: the old one is no longer kept).
    pub(crate) fn same(&self, other: &TrieView) -> bool {
        Arc::ptr_eq(&self.jump, &other.jump)
            && match (&self.arr, &other.arr) {
                (Arr::Narrow(a), Arr::Narrow(b)) => Arc::ptr_eq(a, b),
                (Arr::Wide(a), Arr::Wide(b)) => Arc::ptr_eq(a, b),
                _ => false,
            }
    }

    /// `(bits, len, live)` of node `i`.
    #[inline]
    #[allow(clippy::cast_possible_truncation)] // Unpacking the meta word.
    fn node(&self, i: u32) -> (u128, u8, bool) {
        let (bits, m) = with_arr!(&self.arr, v => v[i as usize].load());
        (bits, (m >> 8) as u8, m & 1 != 0)
    }

    /// The children of node `i`; acquire, so that a child linked since is seen whole.
    #[inline]
    fn kids(&self, i: u32) -> [u32; 2] {
        unpack_kids(with_arr!(&self.arr, v => v[i as usize].kids_word().load(Ordering::Acquire)))
    }

    /// Number of node positions.
    fn n_nodes(&self) -> usize {
        with_arr!(&self.arr, v => v.len())
    }

    #[inline]
    fn root(&self) -> u32 {
        with_arr!(&self.arr, v => root_of(v))
    }

    /// Walks the trie along `bits` (a left-aligned address of `width` bits) to the end.
    #[cfg(test)]
    pub(crate) fn lookup(&self, bits: u128, width: u8) -> TrieMatch {
        let mut w = Walk::default();
        self.advance(&mut w, bits, width, u8::MAX);
        w.m()
    }

    /// Positions in the node array (its live nodes and room to grow).
    pub(crate) fn capacity(&self) -> usize {
        with_arr!(&self.arr, v => v.len())
    }

    /// True if readers' walks start from the jump table ([`TrieView::begin`] may start them).
    #[inline]
    pub(crate) fn walks_from_jump(&self) -> bool {
        self.jump.for_readers()
    }

    /// Starts walk `w` (not begun) along `bits` at its jump-table node, if the table has one
    /// there, and asks for the [`READER_LINES`] lines from that node on (where a laid-out
    /// trie keeps the node's subtree): a lookup begins the walks of all its tries together, so
    /// that their misses overlap instead of following one another. Returns `true` if it
    /// started there; otherwise the walk starts at the root (an address the table does not
    /// cover is not looked up in it again). The one way a walk starts: [`TrieView::advance`]
    /// begins a walk not begun yet.
    #[inline]
    pub(crate) fn begin(&self, w: &mut Walk, bits: u128) -> bool {
        let Some((n, lens)) = self.jump.reader_start(bits) else {
            w.started = true;
            w.cur = self.root();
            return false;
        };
        w.started = true;
        w.cur = n;
        w.lens = u128::from(lens);
        with_arr!(&self.arr, v => prefetch_lines(v, n as usize, READER_LINES));
        true
    }

    /// Continues walk `w` along `bits` until it knows the answer for prefix length `upto`
    /// (see [`Walk::knows`]): a lookup whose subtables have short prefixes does not pay for
    /// the whole depth of the trie.
    #[inline]
    pub(crate) fn advance(&self, w: &mut Walk, bits: u128, width: u8, upto: u8) {
        if !w.started {
            self.begin(w, bits);
        }
        // One loop per node layout.
        with_arr!(&self.arr, v => advance_in(v, w, bits, width, upto));
    }

    /// Advances walk `w` along `bits` to its end, as [`TrieView::advance`] with `upto` the
    /// field's width would. Over 16-byte nodes (fields of at most 32 bits) a loop of its own,
    /// with the walk in registers and its lengths in 64 bits: every lookup of a rule set of
    /// several subtables makes such walks ([`Walked`](crate::subtable::Walked)).
    #[inline]
    pub(crate) fn finish(&self, w: &mut Walk, bits: u128, width: u8) {
        if !w.started {
            self.begin(w, bits);
        }
        match &self.arr {
            Arr::Narrow(v) => finish_narrow(v, w, bits, width),
            Arr::Wide(v) => advance_in(v, w, bits, width, width),
        }
    }

    /// Bytes of the node array and its jump table.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.jump.heap_bytes()
            + match &self.arr {
                Arr::Narrow(v) => v.len() * std::mem::size_of::<Narrow>(),
                Arr::Wide(v) => v.len() * std::mem::size_of::<Wide>(),
            }
    }

    /// Writer: node `i` takes `p` (no walk can reach it).
    fn store(&self, i: u32, p: Parts) {
        with_arr!(&self.arr, v => v[i as usize].store(p));
    }

    /// Writer: node `i`'s live flag (its prefix and length stay).
    fn set_live(&self, i: u32, live: bool) {
        with_arr!(&self.arr, v => {
            let w = v[i as usize].meta_word();
            let m = w.load(Ordering::Relaxed);
            w.store((m & !1) | u64::from(live), Ordering::Relaxed);
        });
    }

    /// Writer: links child `b` of node `i` with a release store (what it points at was
    /// written before).
    fn set_child(&self, i: u32, b: usize, to: u32) {
        let mut k = self.kids(i);
        k[b] = to;
        with_arr!(&self.arr, v => v[i as usize].kids_word().store(pack(k), Ordering::Release));
    }
}

/// [`TrieView::advance`] over nodes of one layout, in its arithmetic ([`Repr::addr`]).
#[inline]
fn advance_in<R: Repr>(nodes: &[R], w: &mut Walk, bits: u128, width: u8, upto: u8) {
    debug_assert!(w.started, "a walk advances once begun");
    let a = R::addr(bits);
    while !w.done && w.examined <= upto {
        if w.cur == NIL {
            w.done = true;
            break;
        }
        let node = &nodes[w.cur as usize];
        let (len, m, c) = node.meet(a);
        if c < len {
            w.examined = c + 1;
            w.done = true;
            break;
        }
        if m & 1 != 0 && len > 0 {
            w.lens |= 1u128 << (len - 1);
        }
        if len >= width {
            w.examined = width;
            w.done = true;
            break;
        }
        w.examined = len + 1;
        w.cur = node.next(a, len);
    }
}

/// [`TrieView::finish`] over 16-byte nodes: [`advance_in`]'s steps with `upto` the width.
#[inline]
fn finish_narrow(nodes: &[Narrow], w: &mut Walk, bits: u128, width: u8) {
    debug_assert!(
        w.started && width <= 32,
        "a narrow walk advances once begun"
    );
    if w.done {
        return;
    }
    let a = Narrow::addr(bits);
    let (mut cur, mut examined) = (w.cur, w.examined);
    // Bit `l` for a rule of length `l` met (0 included, dropped at the end).
    let mut lens = 0u64;
    // `NIL` (no child on the path) is past the array's end.
    while let Some(node) = nodes.get(cur as usize) {
        let (len, m, c) = node.meet(a);
        if c < len {
            examined = c + 1;
            break;
        }
        lens |= (m & 1) << len;
        if len >= width {
            examined = width;
            break;
        }
        examined = len + 1;
        cur = node.next(a, len);
    }
    w.lens |= u128::from(lens >> 1);
    w.examined = examined;
    w.done = true;
}

/// The writer's side of one trie: the newest node array (which the spare reads), the count of
/// rules per node, and where new nodes go.
#[derive(Debug, Default)]
pub(crate) struct Trie {
    view: TrieView,
    /// 16-byte nodes (a field of at most 32 bits), or 32-byte ones.
    narrow: bool,
    /// Rules per node position (a node is live in the array while its count is above zero).
    counts: Vec<u32>,
    /// Nodes free for reuse.
    free: Vec<u32>,
    /// Nodes unlinked while the `u64`-th version was the published one (see
    /// [`Trie::reclaim`]).
    limbo: Vec<(u64, u32)>,
    /// The number of versions published when the writer last said ([`Trie::reclaim`]).
    epoch: u64,
    /// Positions below this one have been handed out (position 0 is the sentinel).
    next: u32,
    n_live: usize,
    /// Nodes allocated or freed since the last [`Trie::relayout`].
    n_changes: usize,
    /// Live nodes when the view's [`Jump`] table was made (see [`Trie::jump_stale`]).
    jump_live: usize,
    /// Live nodes at the last re-layout or rebuild.
    laid_live: usize,
    /// [`Trie::remove_sorted`]'s path (kept empty between calls, for its capacity).
    path: Vec<(u32, usize)>,
    /// The field's width in bits.
    width: u8,
}

/// Fewest live nodes for which a trie keeps a [`Jump`] table (fewer in tests and under the
/// fuzzer, so that their small tries have one).
const JUMP_MIN: usize = if cfg!(any(test, fuzzing)) { 4 } else { 1024 };

/// Fewest index bits of a [`Jump`] table that readers start from: nearly every table a trie has
/// (one of [`JUMP_MIN`] nodes has seven bits, fewer only where the root's prefix leaves fewer
/// address bits below it). A walk from the root of a trie in the caches is still a dozen
/// dependent loads: with 4 here instead of 10 (a trie of about 16K nodes), the same process
/// switched, mixed masks at 1,000 rules gave 1.05-1.08x the single hits a second and at 4,000
/// rules 1.12-1.14x, exact misses at 1,000 rules 0.97-0.98x, OVS's 1,000-rule set (tries too
/// small for a table) the same.
const READER_MIN_K: u8 = if cfg!(any(test, fuzzing)) { 1 } else { 4 };

/// Most index bits of a [`Jump`] table (a table of 8 MB).
const JUMP_MAX_BITS: u8 = 20;

/// The entry of node `node` with prefix lengths `lens` (see [`Jump`]).
fn entry(node: u32, lens: u32) -> u64 {
    u64::from(node) | u64::from(lens) << 32
}

/// The node and the prefix lengths of an entry.
#[allow(clippy::cast_possible_truncation)] // Unpacking halves.
fn unentry(e: u64) -> (u32, u32) {
    (e as u32, (e >> 32) as u32)
}

/// Bit `len - 1`, as an entry's prefix lengths have length `len` (1..=32), else 0.
fn len_bit(len: u8) -> u32 {
    if (1..=32).contains(&len) {
        1 << (len - 1)
    } else {
        0
    }
}

/// A shortcut into a trie, for its writer and its readers. For each value of the `k` address
/// bits that follow the first `base` bits (which every indexed address shares with `bits`), an
/// entry holds:
///
/// - a linked node on the path of every such address, of length at most `base + k`, or `NIL`. An
///   insertion of a prefix at least `base + k` bits long starts there instead of at the root (in a
///   trie of 256K random prefixes a walk from the root visits about 18 nodes, most of them cache
///   misses, a walk from the table three or four), and so does a reader's walk;
/// - for a field of at most 32 bits, the lengths of the live prefixes of at most `base + k` bits
///   that every such address has (bit `len - 1`): what a walk from the root would have learnt above
///   the node, so that a reader's walk may start at the node and end with the same lengths and the
///   same `examined` (below).
///
/// The node is valid, not exact: an insertion links new nodes but never unlinks a node or changes
/// one, so every entry stays on its path (a node linked since, above or below it, is only not used
/// until the table is made again); a removal that unlinks a node points that node's entries at its
/// parent ([`Jump::unlinked`]); a table made again for a trie that doubled is a new one, which
/// versions take as a new view ([`TrieView::same`]). The lengths are exact: a prefix of at most
/// `base + k` bits that becomes live or stops being live sets or clears its bit in every entry of
/// its range ([`Jump::set_len`]), at the moment its live flag changes in the node array, so a
/// reader sees the lengths the trie has as the writer changes it (a superset of its version's, as
/// the trie's own flags). A re-layout or a rebuild (new positions) makes a new table with the new
/// array, and an array grown in place ([`Trie::reserve`]) takes a copy: readers of the old array
/// keep a table that names only nodes of theirs.
///
/// A reader's walk from an entry's node ends as the walk from the root would: every address of
/// the entry reaches that node (its prefix is one of theirs and it is linked), the walk from the
/// root would have passed it with `examined` at most its length (a walk stops early only past the
/// length it was asked for, and then it is asked no more than it knows; a skip consults
/// `min(examined, plen)` bits), and from there both read the same nodes.
#[derive(Debug, Default)]
struct Jump {
    bits: u128,
    base: u8,
    k: u8,
    /// True if entries keep prefix lengths (fields of at most 32 bits).
    lens: bool,
    at: Box<[AtomicU64]>,
}

impl Jump {
    /// The table for a trie of `live` nodes over a field of `width` bits, whose root is
    /// `root`, with `node(i)` the prefix, length, live flag and children of node `i` (sized as
    /// [`Jump::sized`] says). Visits only the nodes of at most `base + k` bits
    /// (about as many as the table has entries), each once.
    fn build(
        root: u32,
        live: usize,
        width: u8,
        node: impl Fn(u32) -> (u128, u8, bool, [u32; 2]),
    ) -> Jump {
        if root == NIL {
            return Jump::default();
        }
        let (rb, rl, _, _) = node(root);
        let Some((j, mut at)) = Jump::sized(rb, rl, live, width) else {
            return Jump::default();
        };
        let end = j.base + j.k;
        let bit = |len: u8, live: bool| if j.lens && live { len_bit(len) } else { 0 };
        // Each node takes the parts of its range that no child of at most `base + k` bits
        // holds; the children fill theirs (every entry is written once). With each node on the
        // stack, the lengths above it.
        let mut stack = vec![(root, 0u32)];
        while let Some((i, above)) = stack.pop() {
            let (bits, len, is_live, child) = node(i);
            let Some((lo, hi)) = j.range(bits, len) else {
                continue;
            };
            let lens = above | bit(len, is_live);
            let e = entry(i, lens);
            if len >= end {
                at[lo..hi].fill(e);
                continue;
            }
            let half = (hi - lo) / 2;
            for (b, &c) in child.iter().enumerate() {
                let (slo, shi) = (lo + b * half, lo + (b + 1) * half);
                let shallow = (c != NIL).then(|| node(c)).filter(|n| n.1 <= end);
                match shallow.and_then(|(cb, cl, _, _)| j.range(cb, cl)) {
                    Some((clo, chi)) => {
                        at[slo..clo].fill(e);
                        at[chi..shi].fill(e);
                        stack.push((c, lens));
                    }
                    None => at[slo..shi].fill(e),
                }
            }
        }
        j.with(at)
    }

    /// An empty table for a trie of `live` nodes over a field of `width` bits whose root has
    /// prefix `bits`/`len`, and its entries (all `NIL`) to fill, or `None` if the trie is too
    /// small for one. About a sixteenth as many entries as nodes: making the table with a new
    /// array costs about a node's worth of work for every node of at most `base + k` bits, and
    /// at a quarter (as the writer's own table had before readers used it) that was 2.5 ms
    /// for a trie of 262,144 random /32s, 6 ms of a 100,000-rule batch's 70; at a sixteenth it
    /// is 1 ms, and walks from the table, a node or two longer, were as fast.
    fn sized(bits: u128, len: u8, live: usize, width: u8) -> Option<(Jump, Vec<u64>)> {
        if live < JUMP_MIN {
            return None;
        }
        let want = u8::try_from(usize::BITS - (live / 16).leading_zeros()).unwrap_or(JUMP_MAX_BITS);
        let k = want
            .min(JUMP_MAX_BITS)
            .min(width.saturating_sub(len))
            .min(127u8.saturating_sub(len));
        (k > 0).then(|| {
            let j = Jump {
                bits,
                base: len,
                k,
                lens: width <= 32,
                at: Box::default(),
            };
            (j, vec![entry(NIL, 0); 1 << k])
        })
    }

    /// The table with entries `at`.
    fn with(self, at: Vec<u64>) -> Jump {
        Jump {
            at: at.into_iter().map(AtomicU64::new).collect(),
            ..self
        }
    }

    /// A copy, for a copy of the node array.
    fn copy(&self) -> Jump {
        Jump {
            at: self
                .at
                .iter()
                .map(|e| AtomicU64::new(e.load(Ordering::Relaxed)))
                .collect(),
            ..*self
        }
    }

    /// The entries that addresses under prefix `bits`/`len` index (all of them for a prefix
    /// of the table's own), or `None` if they index none or the prefix is longer than
    /// `base + k`.
    fn range(&self, bits: u128, len: u8) -> Option<(usize, usize)> {
        // `k` is 0 only in a table without entries.
        if self.k == 0 || len > self.base + self.k {
            return None;
        }
        if len <= self.base {
            return (common_len(bits, self.bits, len) == len).then_some((0, 1 << self.k));
        }
        let lo = self.index(bits)?;
        Some((lo, lo + (1 << (self.base + self.k - len))))
    }

    /// The entry of address `bits`, if the table has entries and the address shares its first
    /// `base` bits.
    #[inline]
    #[allow(clippy::cast_possible_truncation)] // At most `JUMP_MAX_BITS` bits.
    fn index(&self, bits: u128) -> Option<usize> {
        (self.k > 0 && common_len(bits, self.bits, self.base) == self.base)
            .then(|| ((bits << self.base) >> (128 - u32::from(self.k))) as usize)
    }

    /// True if readers start their walks here: the table keeps lengths and is large enough.
    #[inline]
    fn for_readers(&self) -> bool {
        self.lens && self.k >= READER_MIN_K
    }

    /// Where a reader's walk along `bits` may start: the entry's node and the live prefix
    /// lengths it has (see [`Jump`]), if the table keeps lengths and has a node there.
    #[inline]
    fn reader_start(&self, bits: u128) -> Option<(u32, u32)> {
        if !self.for_readers() {
            return None;
        }
        let e = self.at.get(self.index(bits)?)?.load(Ordering::Acquire);
        let (n, lens) = unentry(e);
        (n != NIL).then_some((n, lens))
    }

    /// Where an insertion of prefix `bits`/`len` may start: a linked node on its path, of
    /// length at most `len`.
    #[inline]
    fn start(&self, bits: u128, len: u8) -> Option<u32> {
        let n = unentry(self.entry(bits, len)?.load(Ordering::Relaxed)).0;
        (n != NIL).then_some(n)
    }

    /// The entry [`Jump::start`] reads for prefix `bits`/`len`, if it reads one.
    #[inline]
    fn entry(&self, bits: u128, len: u8) -> Option<&AtomicU64> {
        if self.at.is_empty() || len < self.base + self.k {
            return None;
        }
        self.at.get(self.index(bits)?)
    }

    /// The prefix `bits`/`len` became live (`live`) or stopped being live: its length in every
    /// entry of its range.
    fn set_len(&self, bits: u128, len: u8, live: bool) {
        if !self.lens || len == 0 {
            return;
        }
        let Some((lo, hi)) = self.range(bits, len) else {
            return;
        };
        let b = u64::from(len_bit(len)) << 32;
        for e in &self.at[lo..hi] {
            let v = e.load(Ordering::Relaxed);
            e.store(if live { v | b } else { v & !b }, Ordering::Release);
        }
    }

    /// Node `node` (prefix `bits`/`len`) was unlinked from `parent` (the sentinel for the
    /// root): its entries take the parent, which is on the same paths and shorter, and keep
    /// their lengths.
    fn unlinked(&self, node: u32, bits: u128, len: u8, parent: u32) {
        let Some((lo, hi)) = self.range(bits, len) else {
            return;
        };
        let to = if parent == SENTINEL { NIL } else { parent };
        for e in &self.at[lo..hi] {
            let (n, lens) = unentry(e.load(Ordering::Relaxed));
            if n == node {
                e.store(entry(to, lens), Ordering::Release);
            }
        }
    }

    fn heap_bytes(&self) -> usize {
        self.at.len() * 8
    }
}

/// A [`Jump`] table made from nodes in pre-order as a re-layout or a rebuild lays them out (the
/// sentinel, then the root and the rest, at their positions), in the re-layout's pass that
/// writes them into the array, or in a pass over a rebuilt array. A node of at most `base + k` bits
/// writes the part of its range before the next such node below it (its descendants come right
/// after it), and the rest when the pass leaves its subtree: every entry is written once.
struct JumpFill {
    j: Jump,
    at: Vec<u64>,
    /// Open ranges, outermost first: (entry, end of the range, first entry not written).
    open: Vec<(u64, usize, usize)>,
}

impl JumpFill {
    /// For the `live` nodes of the trie in `view` (as it is before a re-layout, or as a
    /// rebuild made it), over a field of `width` bits: sized by its root's prefix; `None` for
    /// an empty trie or one too small for a table.
    fn for_trie(view: &TrieView, live: usize, width: u8) -> Option<JumpFill> {
        let root = view.root();
        if root == NIL {
            return None;
        }
        let (bits, len, _) = view.node(root);
        let (j, at) = Jump::sized(bits, len, live, width)?;
        Some(JumpFill {
            j,
            at,
            open: Vec::new(),
        })
    }

    /// Node `i` is `p` (called for every node in order, the sentinel too). Inlined into the
    /// pass: as a call it took four times as long as the pass itself.
    #[inline(always)]
    fn add(&mut self, i: usize, p: &Parts) {
        if i == 0 || p.len > self.j.base + self.j.k {
            return;
        }
        let Some((lo, hi)) = self.j.range(p.bits, p.len) else {
            return;
        };
        self.close(lo);
        let above = self.open.last_mut().map_or(0, |(e, _, next)| {
            self.at[*next..lo].fill(*e);
            *next = hi;
            unentry(*e).1
        });
        let lens = above
            | if self.j.lens && p.count > 0 {
                len_bit(p.len)
            } else {
                0
            };
        let node = u32::try_from(i).expect("fewer than 4G trie nodes");
        self.open.push((entry(node, lens), hi, lo));
    }

    /// Fills the rest of every open range that ends by `upto` and closes it.
    fn close(&mut self, upto: usize) {
        while let Some(&(e, hi, next)) = self.open.last() {
            if hi > upto {
                break;
            }
            self.at[next..hi].fill(e);
            self.open.pop();
        }
    }

    fn finish(mut self) -> Jump {
        self.close(usize::MAX);
        self.j.with(self.at)
    }
}

/// A deep copy, in a new array (tests compare a trie changed two ways).
#[cfg(test)]
impl Clone for Trie {
    fn clone(&self) -> Self {
        Trie {
            view: TrieView {
                arr: self
                    .view
                    .arr
                    .grown(self.view.n_nodes(), self.view.n_nodes()),
                jump: Arc::new(self.view.jump.copy()),
            },
            narrow: self.narrow,
            counts: self.counts.clone(),
            free: self.free.clone(),
            limbo: self.limbo.clone(),
            epoch: self.epoch,
            next: self.next,
            n_live: self.n_live,
            n_changes: self.n_changes,
            jump_live: self.jump_live,
            laid_live: self.laid_live,
            path: Vec::new(),
            width: self.width,
        }
    }
}

impl Trie {
    /// An empty trie over a field `width` bits wide (16-byte nodes up to 32 bits).
    pub(crate) fn new(width: u8) -> Trie {
        Trie {
            narrow: width <= 32,
            width,
            ..Trie::default()
        }
    }

    /// The newest node array, for the version being written.
    pub(crate) fn view(&self) -> &TrieView {
        &self.view
    }

    /// Node `i` whole.
    fn parts(&self, i: u32) -> Parts {
        let (bits, len, _) = self.view.node(i);
        Parts {
            bits,
            len,
            count: self.counts[i as usize],
            child: self.view.kids(i),
        }
    }

    fn len_of(&self, i: u32) -> u8 {
        self.view.node(i).1
    }

    /// Node `i`'s count becomes `count` (its live flag follows).
    fn set_count(&mut self, i: u32, count: u32) {
        let old = std::mem::replace(&mut self.counts[i as usize], count);
        if (old > 0) != (count > 0) {
            self.view.set_live(i, count > 0);
            let (bits, len, _) = self.view.node(i);
            self.view.jump.set_len(bits, len, count > 0);
        }
    }

    /// `n` more rules have node `i`'s prefix.
    fn add_count(&mut self, i: u32, n: u32) {
        let c = self.counts[i as usize];
        self.set_count(i, c + n);
    }

    /// Live nodes (prefixes and forks).
    #[cfg(test)]
    fn n_live(&self) -> usize {
        self.n_live
    }

    /// Called after each wait for the spare's readers, with the number of versions published
    /// so far: frees the nodes unlinked while an earlier version than the published one was
    /// published (every walk that could be on them has ended: the version those walks read has
    /// been the spare since, and has just been waited for), and tags the next unlinks with
    /// `published`.
    pub(crate) fn reclaim(&mut self, published: u64) {
        self.epoch = published;
        let free = &mut self.free;
        self.limbo.retain(|(e, i)| {
            if *e < published {
                free.push(*i);
                false
            } else {
                true
            }
        });
    }

    /// Positions that can take a new node now.
    fn room(&self) -> usize {
        self.free.len() + self.view.n_nodes().saturating_sub(self.next as usize)
    }

    /// Makes room for `n` new nodes: if there is too little, copies the array as it is (a
    /// sequential copy; positions, the free list and limbo stay valid) into a new one half
    /// again as long or more (readers of the old one keep it, unchanged from here on). By a
    /// quarter, a trie filled by single insertions allocated 112 MB of node arrays over 262,144
    /// random 5-tuples, by half 92 MB.
    fn reserve(&mut self, n: usize) {
        if self.room() >= n {
            return;
        }
        if self.view.n_nodes() == 0 {
            // The first node: an array with the sentinel, of the field's layout (an empty
            // view's array is wide, and re-layouts and growths keep the layout they find).
            self.view.arr = if self.narrow {
                Arr::Narrow(Arc::default())
            } else {
                Arr::Wide(Arc::default())
            };
            self.relayout_with_room(n);
            return;
        }
        let used = self.next as usize;
        let len = array_len(used.saturating_sub(1), n.max(used / 2));
        self.view.arr = self.view.arr.grown(used, len);
        // Positions stay: the table too, in a copy (the old array's readers keep the old one,
        // which names only nodes of their array).
        self.view.jump = Arc::new(self.view.jump.copy());
        // Exactly: `resize` alone may double the capacity, a megabyte too many at 256K nodes.
        self.counts
            .reserve_exact(len.saturating_sub(self.counts.len()));
        self.counts.resize(len, 0);
    }

    /// The position the next new node takes ([`Trie::alloc`]): the last freed one, or the
    /// first never used.
    fn next_slot(&self) -> u32 {
        self.free.last().copied().unwrap_or(self.next)
    }

    fn alloc(&mut self, p: Parts) -> u32 {
        self.n_changes += 1;
        self.n_live += 1;
        let i = self.next_slot();
        if self.free.pop().is_none() {
            self.next += 1;
        }
        self.counts[i as usize] = p.count;
        self.view.store(i, p);
        if p.count > 0 {
            self.view.jump.set_len(p.bits, p.len, true);
        }
        i
    }

    /// Links `to` as child `b` of `parent` (the sentinel's child 0 is the root).
    fn set_link(&self, (parent, b): (u32, usize), to: u32) {
        self.view.set_child(parent, b, to);
    }

    /// Adds one rule with prefix `bits` (left-aligned, masked) of length `len`.
    #[cfg(test)]
    pub(crate) fn insert(&mut self, bits: u128, len: u8) {
        self.insert_sorted(&[(bits, len, 1)]);
    }

    /// Adds `n` rules with prefix `bits` of length `len`, from the [`Jump`] table's node where
    /// it has one. Returns the node that holds the prefix. Room for two nodes must be reserved.
    fn insert_one(&mut self, bits: u128, len: u8, n: u32) -> u32 {
        match self.start(bits, len) {
            Ok(at) => {
                self.add_count(at, n);
                at
            }
            Err((parent, cur)) => self.insert_at(parent, cur, bits, len, n),
        }
    }

    /// Prefetches the [`Jump`] entry an insertion of a prefix of `len` bits (`bits()`) reads
    /// first. Without a table (a trie rebuilt by a batch) it does nothing and does not call
    /// `bits`.
    #[inline]
    pub(crate) fn warm_entry(&self, len: u8, bits: impl FnOnce() -> u128) {
        if self.view.jump.at.is_empty() {
            return;
        }
        if let Some(e) = self.view.jump.entry(bits(), len) {
            prefetch(e);
        }
    }

    /// Reads the [`Jump`] entry an insertion of a prefix of `len` bits (`bits()`) starts from
    /// (best prefetched by [`Trie::warm_entry`] a while before) and prefetches the
    /// [`WARM_LINES`] cache lines from its node on: a trie laid out depth-first keeps the
    /// node's subtree there, where the insertion walks down.
    #[inline]
    pub(crate) fn warm_nodes(&self, len: u8, bits: impl FnOnce() -> u128) {
        if self.view.jump.at.is_empty() {
            return;
        }
        if let Some(j) = self.view.jump.start(bits(), len) {
            // And where the insertion's new nodes go.
            let at = self.next_slot() as usize;
            with_arr!(&self.view.arr, v => {
                prefetch_lines(v, j as usize, WARM_LINES);
                if let Some(n) = v.get(at) {
                    prefetch(n);
                }
            });
            if let Some(c) = self.counts.get(at) {
                prefetch(c);
            }
            // A prefix shorter than the field is often there already (a mixed rule set's /8s
            // to /24s), and then only its count is raised: the counts below the entry too
            // (mixed single commits into 262,144: 4% faster; random /32s lost 3% with it).
            if len < self.width {
                if let Some(c) = self.counts.get(j as usize) {
                    prefetch(c);
                }
            }
        }
    }

    /// For an insertion of prefix `bits`/`len` that [`Trie::warm_nodes`] prepared a while
    /// before: follows its path down from the jump entry's node through the nodes whose cache
    /// lines that prefetched, and prefetches the first node past them, if the path goes on
    /// there (a node added since the last re-layout lies elsewhere in the array). Called for
    /// every trie before the first is changed, so that the tries' last misses overlap instead
    /// of following one another.
    #[inline]
    pub(crate) fn warm_path(&self, bits: u128, len: u8) {
        let Some(j) = self.view.jump.start(bits, len) else {
            return;
        };
        with_arr!(&self.view.arr, v => warm_path_in(v, j, bits, len));
    }

    /// Where an insertion of prefix `bits`/`len` starts: `Ok` with the node that already has
    /// exactly this prefix, or `Err` with the link and the node to walk down from ([`Jump`]'s
    /// node's child on the prefix's side, or the root).
    #[allow(clippy::type_complexity)]
    fn start(&self, bits: u128, len: u8) -> Result<u32, ((u32, usize), u32)> {
        if let Some(j) = self.view.jump.start(bits, len) {
            let (nb, nl, _) = self.view.node(j);
            if nl <= len && common_len(nb, bits, nl) == nl {
                if nl == len {
                    return Ok(j);
                }
                let b = bit(bits, nl);
                return Err(((j, b), self.view.kids(j)[b]));
            }
            debug_assert!(
                false,
                "jump entry {j} is not on the path of {bits:#x}/{len}"
            );
        }
        Err(((SENTINEL, 0), self.view.root()))
    }

    /// Adds `n` rules with prefix `bits` of length `len`, walking down from `cur` (linked
    /// from `parent`), which must be where a walk from the root would arrive. Returns the
    /// node that holds the prefix. Room for two nodes must be reserved.
    fn insert_at(
        &mut self,
        mut parent: (u32, usize),
        mut cur: u32,
        bits: u128,
        len: u8,
        n: u32,
    ) -> u32 {
        loop {
            if cur == NIL {
                let new = self.alloc(Parts {
                    bits,
                    len,
                    count: n,
                    child: [NIL; 2],
                });
                self.set_link(parent, new);
                return new;
            }
            // The count is the writer's array, read only where it changes: a walk down
            // reads the node's own words alone.
            let (nb, nl, _) = self.view.node(cur);
            let c = common_len(nb, bits, nl.min(len));
            if c == nl {
                if nl == len {
                    self.add_count(cur, n);
                    return cur;
                }
                let b = bit(bits, nl);
                parent = (cur, b);
                cur = self.view.kids(cur)[b];
                continue;
            }
            // The new prefix leaves this node's path at bit `c` (or ends at it).
            if c == len {
                let mut child = [NIL; 2];
                child[bit(nb, len)] = cur;
                let new = self.alloc(Parts {
                    bits,
                    len,
                    count: n,
                    child,
                });
                self.set_link(parent, new);
                return new;
            }
            let leaf = self.alloc(Parts {
                bits,
                len,
                count: n,
                child: [NIL; 2],
            });
            let mut child = [NIL; 2];
            child[bit(bits, c)] = leaf;
            child[bit(nb, c)] = cur;
            let fork = self.alloc(Parts {
                bits: bits & prefix_mask(c),
                len: c,
                count: 0,
                child,
            });
            self.set_link(parent, fork);
            return leaf;
        }
    }

    /// Applies `changes` (net count changes per prefix, sorted by `(bits, len)`, each prefix
    /// once): a trie with fewer than twice as many nodes as changes is built again from its
    /// merged prefix list ([`Trie::rebuild_with`]: sequential work over the whole trie, but no
    /// walk per prefix and no later re-layout); fewer changes are made in place, the removals
    /// and then the additions each from a finger ([`Trie::remove_sorted`],
    /// [`Trie::insert_sorted`], which cost little when the prefixes are close together), and
    /// may lay the trie out again. Returns `false` if a removal finds no such prefix (an
    /// internal inconsistency the caller reports).
    ///
    /// The line: a change in place makes or frees up to two nodes, and a re-layout comes once
    /// the changes since the last reach half the live nodes ([`Trie::maybe_relayout`]), so
    /// below the line a batch's changes alone do not lay the trie out again. A sorted addition
    /// in place costs about as much as 1.7 prefixes of a rebuild, a re-layout about 0.3 a
    /// node. With the line at an eighth (until run 23), a 100,000-rule batch of random
    /// 5-tuples rebuilt both tries: 0.085 s into 262,144 rules and 0.075 s into 162,144, against
    /// 0.069 and 0.066 s in place.
    pub(crate) fn apply(&mut self, changes: &[(u128, u8, i64)]) -> bool {
        if changes.is_empty() {
            return true;
        }
        let rebuild = changes.len() >= REBUILD_MIN && changes.len() * 2 >= self.n_live;
        #[cfg(test)]
        count_applied(rebuild);
        if rebuild {
            return self.rebuild_with(changes);
        }
        if let [(bits, len, net)] = *changes {
            if net > 0 {
                // One prefix (a single-rule commit): no list to make.
                self.insert_sorted(&[(bits, len, u32::try_from(net).unwrap_or(u32::MAX))]);
                self.maybe_relayout();
                return true;
            }
        }
        let n_adds = changes.iter().filter(|c| c.2 > 0).count();
        let mut adds = Vec::with_capacity(n_adds);
        let mut removes = Vec::with_capacity(changes.len() - n_adds);
        for &(bits, len, net) in changes {
            let n = u32::try_from(net.unsigned_abs()).unwrap_or(u32::MAX);
            if net > 0 {
                adds.push((bits, len, n));
            } else if net < 0 {
                removes.push((bits, len, n));
            }
        }
        let ok = self.remove_sorted(&removes);
        if !adds.is_empty() {
            self.insert_sorted(&adds);
        }
        self.maybe_relayout();
        ok
    }

    /// Adds `n` rules for each `(bits, len, n)` of `items`, which should be sorted by
    /// `(bits, len)`: each insertion then starts from the deepest node of the previous
    /// insertion's path that is a prefix of the new one (a finger), instead of the root, so
    /// a sorted batch costs about one node step per prefix. Correct in any order.
    fn insert_sorted(&mut self, items: &[(u128, u8, u32)]) {
        self.reserve(2 * items.len());
        if let [(bits, len, n)] = *items {
            // One prefix (a single-rule commit): no finger to keep.
            if self.jump_stale() {
                self.remake_jump();
            }
            self.insert_one(bits, len, n);
            return;
        }
        // A batch's first prefix starts from the jump table as it is (from the root if a
        // re-layout or rebuild emptied it), the others from the finger: remaking the table
        // here would cost a pass over the whole trie to save one walk. The next single
        // insertion remakes it.
        // Nodes from the root towards the previous prefix, each a prefix of the next (a
        // fork added since may be missing between two of them, which does not matter).
        let mut path: Vec<u32> = Vec::new();
        for (i, &(bits, len, n)) in items.iter().enumerate() {
            // Prefixes of a batch into a large trie are far apart, and each walks down from
            // its jump entry (the finger is rarely on its path): the entry of the prefix
            // `WARM_ENTRY_AHEAD` on and the nodes of the one `WARM_NODES_AHEAD` on (its entry
            // in cache by then) are prefetched, so that those misses overlap this walk.
            if let Some(&(b, l, _)) = items.get(i + WARM_ENTRY_AHEAD) {
                self.warm_entry(l, || b);
            }
            if let Some(&(b, l, _)) = items.get(i + WARM_NODES_AHEAD) {
                self.warm_nodes(l, || b);
            }
            while let Some(&top) = path.last() {
                let (nb, nl, _) = self.view.node(top);
                if nl <= len && common_len(nb, bits, nl) == nl {
                    break;
                }
                path.pop();
            }
            let (parent, cur) = match path.last() {
                None => match self.start(bits, len) {
                    Ok(at) => {
                        self.add_count(at, n);
                        path.push(at);
                        continue;
                    }
                    Err(((SENTINEL, 0), root)) => ((SENTINEL, 0), root),
                    Err(((j, b), cur)) => {
                        path.push(j);
                        ((j, b), cur)
                    }
                },
                Some(&p) => {
                    let nl = self.len_of(p);
                    if nl == len {
                        self.add_count(p, n);
                        continue;
                    }
                    let b = bit(bits, nl);
                    ((p, b), self.view.kids(p)[b])
                }
            };
            let target = self.insert_at(parent, cur, bits, len, n);
            let mut at = self.view.kids(parent.0)[parent.1];
            loop {
                path.push(at);
                if at == target {
                    break;
                }
                at = self.view.kids(at)[bit(bits, self.len_of(at))];
            }
        }
    }

    /// Removes one rule with prefix `bits` of length `len`. Returns `false` if there is
    /// none (an internal inconsistency the caller reports). Nodes it unlinks wait in limbo.
    #[cfg(test)]
    fn remove(&mut self, bits: u128, len: u8) -> bool {
        self.remove_sorted(&[(bits, len, 1)])
    }

    /// Removes `n` rules for each `(bits, len, n)` of `items`, sorted by `(bits, len)`: each
    /// walk goes on from the deepest node of the previous one's path that is a prefix of the
    /// new one (a finger), not from the root, as [`Trie::insert_sorted`] does. A walk from the
    /// root is about 18 dependent loads at 262,144 random prefixes: the replay of a batch that
    /// removed 100,000 of 262,144 random 5-tuples (and added as many) took 0.087 to 0.091 s
    /// so, against 0.062 to 0.066 s when it rebuilt both tries, and takes 0.054 to 0.057 s
    /// from a finger (`commit_cpu --churn`). Returns `false` if a prefix is not there (an
    /// internal inconsistency the caller reports); the others are removed all the same.
    /// Nodes it unlinks wait in limbo.
    fn remove_sorted(&mut self, items: &[(u128, u8, u32)]) -> bool {
        // The path to the last prefix removed: each node with the side the walk took from
        // it, every one live and a prefix of the last prefix (nodes unlinked leave it). It
        // starts at the sentinel, or at a jump-table node whose ancestors are not on it.
        let mut path = std::mem::take(&mut self.path);
        path.clear();
        let mut ok = true;
        for &(bits, len, n) in items {
            // Back up to the deepest node on the path that is a strict prefix of this one.
            while let Some(&(p, _)) = path.last() {
                if p == SENTINEL {
                    break;
                }
                let (pb, pl, _) = self.view.node(p);
                if pl < len && common_len(pb, bits, pl) == pl {
                    break;
                }
                path.pop();
            }
            let mut cur = match path.last_mut() {
                Some(last) if last.0 != SENTINEL => {
                    last.1 = bit(bits, self.len_of(last.0));
                    self.view.kids(last.0)[last.1]
                }
                _ => self.removal_start(bits, len, &mut path),
            };
            for _ in 0..n {
                if !self.remove_below(&mut path, &mut cur, bits, len) {
                    ok = false;
                    break;
                }
            }
        }
        path.clear();
        self.path = path;
        ok
    }

    /// Where a removal of prefix `bits`/`len` with nothing on `path` to go on from starts:
    /// the [`Jump`] table's node on its path (a single-rule delete's removal walked about 18
    /// nodes from the root at 262,144 random prefixes: single deletes ran at 0.37M/s against
    /// 0.9M/s for single inserts), `path` holding it with the side taken if the prefix lies
    /// below it; or the root, `path` holding the sentinel. Returns the node to walk down from.
    fn removal_start(&self, bits: u128, len: u8, path: &mut Vec<(u32, usize)>) -> u32 {
        path.clear();
        if let Some(j) = self.view.jump.start(bits, len) {
            let (nb, nl, _) = self.view.node(j);
            if nl <= len && common_len(nb, bits, nl) == nl {
                if nl < len {
                    let b = bit(bits, nl);
                    path.push((j, b));
                    return self.view.kids(j)[b];
                }
                return j;
            }
        }
        path.push((SENTINEL, 0));
        self.view.root()
    }

    /// Fills `path` with the ancestors of the linked node with prefix `bits`/`len`, from the
    /// sentinel, each with the side towards it.
    fn ancestors(&self, bits: u128, len: u8, path: &mut Vec<(u32, usize)>) {
        path.clear();
        path.push((SENTINEL, 0));
        let mut cur = self.view.root();
        while cur != NIL {
            let (_, nl, _) = self.view.node(cur);
            if nl >= len {
                break;
            }
            let b = bit(bits, nl);
            path.push((cur, b));
            cur = self.view.kids(cur)[b];
        }
    }

    /// Removes one rule with prefix `bits` of length `len`, walking down from `cur`: the
    /// child on `bits`' side of the last node of `path` (the sentinel's child: the root), or
    /// with `path` empty a jump-table node on the way ([`Trie::removal_start`]; its ancestors
    /// are found only if it is unlinked). Leaves on `path` only live nodes that are strict
    /// prefixes of `bits`, and in `cur` the
    /// prefix's node (another removal of the same prefix starts there; if this one unlinked
    /// it, its count is 0 and that removal fails, as it should).
    fn remove_below(
        &mut self,
        path: &mut Vec<(u32, usize)>,
        cur: &mut u32,
        bits: u128,
        len: u8,
    ) -> bool {
        while *cur != NIL {
            let (nb, nl, _) = self.view.node(*cur);
            if nl > len || common_len(nb, bits, nl) < nl {
                return false;
            }
            if nl == len {
                break;
            }
            let b = bit(bits, nl);
            path.push((*cur, b));
            *cur = self.view.kids(*cur)[b];
        }
        if *cur == NIL || self.counts[*cur as usize] == 0 {
            return false;
        }
        let c = self.counts[*cur as usize];
        self.set_count(*cur, c - 1);
        // Drop nodes that no longer carry a prefix or a fork, bottom up.
        let mut at = *cur;
        loop {
            if self.counts[at as usize] > 0 {
                break;
            }
            let kids = self.view.kids(at);
            let (a, b) = (kids[0] != NIL, kids[1] != NIL);
            if a && b {
                break;
            }
            let replacement = if a { kids[0] } else { kids[1] };
            if path.is_empty() {
                // The walk began at a jump-table node, which goes too: its ancestors from the
                // root (rare: the node a table entry names is a fork or a prefix above many).
                let (ab, al, _) = self.view.node(at);
                self.ancestors(ab, al, path);
            }
            let Some(&parent) = path.last() else {
                break;
            };
            self.set_link(parent, replacement);
            let (ab, al, _) = self.view.node(at);
            self.view.jump.unlinked(at, ab, al, parent.0);
            self.limbo.push((self.epoch, at));
            self.n_live -= 1;
            self.n_changes += 1;
            if replacement != NIL || parent.0 == SENTINEL {
                break;
            }
            // The parent lost a child: it goes too unless it carries a prefix.
            path.pop();
            at = parent.0;
        }
        true
    }

    /// Lays the trie out again, in a new array, once half as many nodes changed since the
    /// last time as there are, so that a walk touches few cache lines and pages (amortised O(1)
    /// per change). Measured on 262,144 random 5-tuples committed one by one: at a quarter the
    /// commits took 7% longer than at half. A third was kept while readers walked from
    /// the root (at half they were up to 9% slower on a grown trie than on a rebuilt one); since
    /// they walk from the jump table and insertions prefetch the nodes below theirs (run 18), half
    /// fills an empty table 6% faster than a third, as many changes as nodes 6% slower, and
    /// readers of the grown mixed set are as fast at half as at a third.
    fn maybe_relayout(&mut self) {
        if self.n_changes >= 64 && self.n_changes * 2 >= self.n_live {
            self.relayout();
        }
    }

    /// True if the next insertion makes the [`Jump`] table again first: the trie has doubled
    /// since it was made (and wants more entries, and its new nodes in them; a trie too small
    /// for a table gets its first one so).
    fn jump_stale(&self) -> bool {
        self.n_live >= 2 * self.jump_live
    }

    /// Makes the [`Jump`] table again for the trie as it is.
    fn remake_jump(&mut self) {
        let view = &self.view;
        let jump = Jump::build(view.root(), self.n_live, self.width, |i| {
            let (bits, len, live) = view.node(i);
            (bits, len, live, view.kids(i))
        });
        self.view.jump = Arc::new(jump);
        self.jump_live = self.n_live;
    }

    /// [`Trie::relayout_with_room`] with room for an eighth more, or, in a trie that grew by
    /// half since it was last laid out, for half as many nodes again as it has: a trie filled
    /// by single insertions then grows into the room instead of copying its array at each
    /// [`Trie::reserve`] (262,144 single commits of random 5-tuples into an empty table: 65
    /// MB of node arrays allocated instead of 92, commits 0 to 4% faster).
    fn relayout(&mut self) {
        let grew = self.n_live >= self.laid_live + self.laid_live / 2;
        self.relayout_with_room(if grew { self.n_live / 2 } else { 0 });
    }

    /// Writes the trie into a new array in depth-first order (a node's first child right
    /// after it, small subtrees within a page), with room for `extra` more nodes or an eighth
    /// more ([`array_len`]).
    fn relayout_with_room(&mut self, extra: usize) {
        let live = self.n_live;
        let len = array_len(live, extra);
        let root = self.view.root();
        let mut fill = JumpFill::for_trie(&self.view, live, self.width);
        let counts = &self.counts;
        let (arr, counts, laid) = match &self.view.arr {
            Arr::Narrow(v) => {
                let (a, c, n) = relayout_in(v, counts, root, len, fill.as_mut());
                (Arr::Narrow(a), c, n)
            }
            Arr::Wide(v) => {
                let (a, c, n) = relayout_in(v, counts, root, len, fill.as_mut());
                (Arr::Wide(a), c, n)
            }
        };
        debug_assert_eq!(laid, live, "every live node is linked");
        let jump = fill.map_or_else(Jump::default, JumpFill::finish);
        self.take(arr, counts, laid, jump);
    }

    /// Builds the path-compressed trie of `items` (distinct prefixes with counts, sorted by
    /// `(bits, len)`) straight into a new array, in pre-order (the depth-first layout
    /// [`Trie::relayout_with_room`] gives), and takes it with its counts and a [`Jump`] table
    /// made in a pass over it.
    ///
    /// The array is sized for two nodes a prefix (a prefix and a fork, the most there can be)
    /// before the build: zeroed, so the positions it does not use are never written (see
    /// [`Arr`]). Building into a list of [`Parts`] first and copying it into an array of the
    /// right size moved every node's 32 bytes through memory twice more: a 100,000-rule batch
    /// into 162,144 rules, which rebuilt both tries then, took 0.0785 s that way and 0.076 s
    /// this way (medians of six alternated runs).
    fn install_built(&mut self, items: &[(u128, u8, u32)]) {
        let len = array_len(2 * items.len(), 0);
        let mut counts = vec![0u32; len];
        let (arr, live) = if self.narrow {
            let (a, n) = built(items, len, &mut counts);
            (Arr::Narrow(a), n)
        } else {
            let (a, n) = built(items, len, &mut counts);
            (Arr::Wide(a), n)
        };
        // A set with fewer forks than prefixes (nested prefixes) leaves part of the array
        // unused: it goes into one of the usual size (with a quarter's slack kept, the mixed
        // set's 262,144 rules took 5 bytes a rule more).
        let want = array_len(live, 0);
        let arr = if len > want + want / 16 {
            counts.truncate(want);
            counts.shrink_to_fit();
            arr.grown(live + 1, want)
        } else {
            arr
        };
        let jump = {
            let view = TrieView {
                arr: arr.clone(),
                jump: Arc::default(),
            };
            JumpFill::for_trie(&view, live, self.width).map_or_else(Jump::default, |mut f| {
                // Pre-order is array order: one sequential pass.
                for (i, &count) in (1u32..).zip(&counts[1..=live]) {
                    let (bits, len, _) = view.node(i);
                    f.add(
                        i as usize,
                        &Parts {
                            bits,
                            len,
                            count,
                            child: [NIL; 2],
                        },
                    );
                }
                f.finish()
            })
        };
        self.take(arr, counts, live, jump);
    }

    /// Takes `arr` (the sentinel, then `live` nodes, then unused positions), its `counts` and
    /// its `jump` table as the trie.
    fn take(&mut self, arr: Arr, counts: Vec<u32>, live: usize, jump: Jump) {
        self.view.arr = arr;
        self.counts = counts;
        self.next = u32::try_from(live + 1).expect("fewer than 4G trie nodes");
        self.free.clear();
        self.limbo.clear();
        self.n_live = live;
        self.n_changes = 0;
        self.view.jump = Arc::new(jump);
        self.jump_live = live;
        self.laid_live = live;
    }

    /// Applies `changes` (net count changes per prefix, sorted by `(bits, len)`, each prefix
    /// once) by building the trie again, in a new array, from the merged, sorted list of its
    /// prefixes, laid out depth-first as [`Trie::relayout`] does: linear in the trie's size
    /// plus the changes, and sequential, where inserting many prefixes one by one costs a walk
    /// (a few cache misses) each. The result is the same trie (path-compressed tries are
    /// canonical). Returns `false`, and leaves the trie unchanged, if a change would take a
    /// prefix's count below zero (an internal inconsistency the caller reports).
    fn rebuild_with(&mut self, changes: &[(u128, u8, i64)]) -> bool {
        let mut merged: Vec<(u128, u8, u32)> = Vec::with_capacity(self.n_live + changes.len());
        let mut changes = changes.iter().peekable();
        let mut push = |bits: u128, len: u8, mut n: i64| -> bool {
            while let Some(&&(cb, cl, d)) = changes.peek() {
                if (cb, cl) > (bits, len) {
                    break;
                }
                changes.next();
                if (cb, cl) == (bits, len) {
                    n += d;
                } else if !keep(&mut merged, cb, cl, d) {
                    return false;
                }
            }
            keep(&mut merged, bits, len, n)
        };
        // The old prefixes in `(bits, len)` order: a pre-order walk (a node, then its 0 side,
        // then its 1 side) visits them in exactly that order, since a node's prefix,
        // zero-padded, is at most any prefix below it and the 0 side sorts first.
        let mut stack: Vec<u32> = Vec::new();
        let root = self.view.root();
        if root != NIL {
            stack.push(root);
        }
        while let Some(at) = stack.pop() {
            let node = self.parts(at);
            if node.count > 0 && !push(node.bits, node.len, i64::from(node.count)) {
                return false;
            }
            for b in [1, 0] {
                if node.child[b] != NIL {
                    stack.push(node.child[b]);
                }
            }
        }
        // Changes past the last old prefix.
        if !push(u128::MAX, u8::MAX, 0) {
            return false;
        }
        self.install_built(&merged);
        true
    }

    /// Walks the trie along `bits` (a left-aligned address of `width` bits) to the end.
    #[cfg(test)]
    pub(crate) fn lookup(&self, bits: u128, width: u8) -> TrieMatch {
        self.view.lookup(bits, width)
    }

    /// [`TrieView::advance`] on the newest array.
    #[cfg(test)]
    pub(crate) fn advance(&self, w: &mut Walk, bits: u128, width: u8, upto: u8) {
        self.view.advance(w, bits, width, upto);
    }

    /// Bytes the writer holds besides the node array.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.counts.capacity() * 4 + self.free.capacity() * 4 + self.limbo.capacity() * 16
    }
}

/// Length of a node array for `live` nodes (and the sentinel) with room for `extra` more, and
/// for an eighth again as many as there are (a trie that grows past that is copied into a
/// new array, [`Trie::reserve`]).
fn array_len(live: usize, extra: usize) -> usize {
    live + 1 + extra.max(live / 8).max(63)
}

/// Appends `(bits, len, n)` to `merged` if `n` is positive; false if it is negative.
fn keep(merged: &mut Vec<(u128, u8, u32)>, bits: u128, len: u8, n: i64) -> bool {
    if n < 0 {
        return false;
    }
    if n > 0 {
        merged.push((bits, len, u32::try_from(n).unwrap_or(u32::MAX)));
    }
    true
}

/// A trie being built into a new array ([`built`]).
struct Build<'a, R> {
    /// Distinct prefixes with counts, sorted by `(bits, len)`.
    items: &'a [(u128, u8, u32)],
    /// `lcp[i]`: the longest common prefix of items `i - 1` and `i`.
    lcp: &'a [u8],
    out: &'a [R],
    counts: &'a mut [u32],
    /// The next position.
    n: usize,
}

impl<R: Repr> Build<'_, R> {
    /// The node for `items[lo..hi]`, written at the next position, and, below it, its subtrees.
    ///
    /// The node's prefix is the items' longest common prefix, the smallest `lcp` inside the range
    /// (for sorted strings, a prefix sorts right before what extends it). Only the first item
    /// can end there; the others split by their next bit, and the first item of the 1 side is the
    /// one whose `lcp` with its predecessor is that smallest value (inside the 0 side they share
    /// one bit more).
    fn range(&mut self, lo: usize, hi: usize) -> u32 {
        let (items, lcp) = (self.items, self.lcp);
        let (fb, fl, fc) = items[lo];
        let len = lcp[lo + 1..hi].iter().copied().min().unwrap_or(fl);
        let (count, rest) = if fl == len { (fc, lo + 1) } else { (0, lo) };
        let at = self.n;
        self.n += 1;
        // The new array is no reader's yet: plain stores.
        let node = &self.out[at];
        node.store(Parts {
            bits: fb & prefix_mask(len),
            len,
            count,
            child: [NIL; 2],
        });
        self.counts[at] = count;
        if rest < hi {
            // Every item of `rest..hi` is longer than `len`, so bit `len` exists.
            // `memrchr` compares 32 bytes a step (a search byte by byte made a build 3% slower).
            let ones = match memchr::memrchr(len, &lcp[rest + 1..hi]) {
                Some(p) => rest + 1 + p,
                None if bit(items[rest].0, len) == 0 => hi,
                None => rest,
            };
            let mut child = [NIL; 2];
            for (side, (a, b)) in [(0, (rest, ones)), (1, (ones, hi))] {
                if a < b {
                    child[side] = self.range(a, b);
                }
            }
            node.kids_word().store(pack(child), Ordering::Relaxed);
        }
        u32::try_from(at).expect("fewer than 4G trie nodes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl TrieView {
        /// The array's address, whichever its layout.
        fn arr_ptr(&self) -> usize {
            match &self.arr {
                Arr::Narrow(a) => Arc::as_ptr(a).cast::<u8>() as usize,
                Arr::Wide(a) => Arc::as_ptr(a).cast::<u8>() as usize,
            }
        }
    }

    impl Trie {
        /// Every [`Jump`] entry is `NIL` or a node linked in the trie, of at most `base + k`
        /// bits, whose prefix is a prefix of every address that indexes the entry; and its
        /// lengths are those of the live prefixes of at most `base + k` bits every such address
        /// has (none for a wide field).
        fn check_jump(&self) {
            let mut linked = std::collections::HashSet::new();
            let mut stack = vec![self.view.root()];
            while let Some(n) = stack.pop() {
                if n != NIL {
                    linked.insert(n);
                    stack.extend(self.view.kids(n));
                }
            }
            let j = &*self.view.jump;
            let end = j.base + j.k;
            for (e, v) in j.at.iter().enumerate() {
                let (n, lens) = unentry(v.load(Ordering::Relaxed));
                let addr = (j.bits & prefix_mask(j.base))
                    | (e as u128) << (128 - u32::from(j.base) - u32::from(j.k));
                let want = if j.lens {
                    let mut want = 0;
                    for &i in &linked {
                        let (nb, nl, live) = self.view.node(i);
                        if live && nl <= end && common_len(nb, addr, nl) == nl {
                            want |= len_bit(nl);
                        }
                    }
                    want
                } else {
                    0
                };
                assert_eq!(lens, want, "entry {e}: lengths {lens:#x}, want {want:#x}");
                if n == NIL {
                    continue;
                }
                assert!(linked.contains(&n), "entry {e}: node {n} is not linked");
                let (nb, nl, _) = self.view.node(n);
                assert!(nl <= end, "entry {e}: node {n} is {nl} bits long");
                assert_eq!(
                    common_len(nb, addr, nl),
                    nl,
                    "entry {e}: node {n} ({nb:#x}/{nl}) is off the path of {addr:#x}"
                );
            }
        }

        /// Walks along `v` asked for each length in turn, from the jump table and from the
        /// root, learn the same lengths and the same examined bits at every step.
        fn check_walks_from_the_table(&self, v: u128) {
            let root = TrieView {
                arr: self.view.arr.clone(),
                jump: Arc::default(),
            };
            let (mut a, mut b) = (Walk::default(), Walk::default());
            for upto in 0..=self.width {
                self.view.advance(&mut a, v, self.width, upto);
                root.advance(&mut b, v, self.width, upto);
                assert!(a.knows(upto) && b.knows(upto), "{v:#x} upto {upto}");
                let (ma, mb) = (a.m(), b.m());
                let low = if upto >= 128 {
                    u128::MAX
                } else {
                    (1u128 << upto) - 1
                };
                assert_eq!(ma.lens & low, mb.lens & low, "{v:#x} upto {upto}");
                assert_eq!(
                    ma.examined.min(upto),
                    mb.examined.min(upto),
                    "{v:#x} upto {upto}"
                );
            }
        }

        /// Every [`Jump`] entry is the deepest node of at most `base + k` bits on its path (as
        /// a table just made has it).
        fn check_jump_exact(&self) {
            let j = &*self.view.jump;
            let end = j.base + j.k;
            for (e, v) in j.at.iter().enumerate() {
                let n = unentry(v.load(Ordering::Relaxed)).0;
                let addr = (j.bits & prefix_mask(j.base))
                    | (e as u128) << (128 - u32::from(j.base) - u32::from(j.k));
                let (mut cur, mut best) = (self.view.root(), NIL);
                while cur != NIL {
                    let (nb, nl, _) = self.view.node(cur);
                    if nl > end || common_len(nb, addr, nl) < nl {
                        break;
                    }
                    best = cur;
                    cur = self.view.kids(cur)[bit(addr, nl)];
                }
                assert_eq!(n, best, "entry {e} of {addr:#x}");
            }
        }
    }

    fn v4(a: u32, len: u8) -> (u128, u8) {
        ((u128::from(a) << 96) & prefix_mask(len), len)
    }

    /// A batch of changes is made in place below the line (twice as many live nodes as
    /// changes) and builds the trie again at it; both give the same answers.
    #[test]
    fn apply_rebuilds_only_at_the_line() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(3);
        let mut prefixes: Vec<(u128, u8, i64)> = (0..6000)
            .map(|_| {
                let (p, l) = v4(rng.gen(), 32);
                (p, l, 1)
            })
            .collect();
        prefixes.sort_unstable();
        prefixes.dedup_by_key(|(p, l, _)| (*p, *l));
        let (first, rest) = prefixes.split_at(1000);
        let mut t = Trie::new(32);
        assert!(t.apply(first));
        let live = t.n_live();
        assert_eq!(t.n_changes, 0, "built from empty");
        // Fewer changes than half the live nodes: in place.
        let below = &rest[..live / 2 - 1];
        assert!(t.apply(below));
        assert_eq!(t.n_changes, t.n_live() - live, "made in place");
        // As many as half the live nodes: built again.
        let at = &rest[below.len()..below.len() + t.n_live().div_ceil(2)];
        assert!(t.apply(at));
        assert_eq!(t.n_changes, 0, "built again");
        t.check_jump();
        let mut all = Trie::new(32);
        let mut sorted: Vec<_> = first.iter().chain(below).chain(at).copied().collect();
        sorted.sort_unstable();
        assert!(all.apply(&sorted));
        assert_eq!(all.n_live(), t.n_live());
        for (p, _, _) in sorted.iter().step_by(7) {
            let probe = p ^ (u128::from(rng.gen::<u8>()) << 96);
            let (a, b) = (t.lookup(probe, 32), all.lookup(probe, 32));
            assert_eq!((a.lens, a.examined), (b.lens, b.examined));
        }
    }

    #[test]
    fn lookup_reports_matching_lengths_and_examined_bits() {
        for width in [32, 128] {
            lookup_reports_matching_lengths_and_examined_bits_in(Trie::new(width));
        }
    }

    fn lookup_reports_matching_lengths_and_examined_bits_in(mut t: Trie) {
        let (b, l) = v4(0x0a00_0000, 8);
        t.insert(b, l);
        let (b2, l2) = v4(0x0a01_0000, 16);
        t.insert(b2, l2);
        let m = t.lookup(u128::from(0x0a01_0203u32) << 96, 32);
        assert!(m.has_len(8) && m.has_len(16) && !m.has_len(24));
        assert_eq!(m.examined, 17);
        let m = t.lookup(u128::from(0xc0a8_0101u32) << 96, 32);
        assert_eq!(m.lens, 0);
        assert_eq!(m.examined, 1);
    }

    #[test]
    fn remove_restores_empty_trie() {
        for width in [32, 128] {
            remove_restores_empty_trie_in(Trie::new(width));
        }
    }

    fn remove_restores_empty_trie_in(mut t: Trie) {
        let ps = [
            v4(0x0a00_0000, 8),
            v4(0x0a01_0000, 16),
            v4(0x0a01_0000, 16),
            v4(0x0b00_0000, 8),
            v4(0x0a01_0203, 32),
        ];
        for (b, l) in ps {
            t.insert(b, l);
        }
        for (b, l) in ps {
            assert!(t.remove(b, l));
        }
        assert_eq!(t.n_live(), 0);
        assert!(!t.remove(ps[0].0, ps[0].1));
    }

    /// A trie over a field of at most 32 bits has 16-byte nodes however it was made: grown
    /// from empty by insertions (its first array, its growths, its re-layouts), or built from a
    /// list. A wider field has 32-byte nodes.
    #[test]
    fn node_layout_follows_the_field_width_from_the_first_node() {
        let narrow = |t: &Trie| matches!(t.view().arr, Arr::Narrow(_));
        for width in [32, 128] {
            let mut t = Trie::new(width);
            let mut grew = 0;
            let mut laid = 0;
            for a in 0..3000u32 {
                let (b, l) = v4(a.wrapping_mul(0x9e37_79b9), 32);
                let before = (t.view().arr_ptr(), t.n_changes);
                // As a single-rule commit changes it (growths and re-layouts included).
                assert!(t.apply(&[(b, l, 1)]));
                if t.view().arr_ptr() != before.0 {
                    if t.n_changes < before.1 {
                        laid += 1;
                    } else {
                        grew += 1;
                    }
                }
                assert_eq!(narrow(&t), width <= 32, "width {width}, {} prefixes", a + 1);
            }
            assert!(
                grew > 0 && laid > 0,
                "width {width}: {grew} growths, {laid} re-layouts"
            );
            let mut built = Trie::new(width);
            built.rebuild_with(&[(v4(0x0a00_0000, 8).0, 8, 1)]);
            assert_eq!(narrow(&built), width <= 32, "width {width}, built");
        }
    }

    /// The writer's counts take as many slots as the node array has, no more: after a rebuild
    /// (extending an empty vector to the array's length doubled its capacity past it) and after
    /// a growth in place.
    #[test]
    fn counts_are_as_long_as_the_array() {
        let mut t = Trie::new(32);
        let mut first: Vec<(u128, u8, i64)> = (0..5000u32)
            .map(|a| (v4(a.wrapping_mul(0x9e37_79b9), 32).0, 32, 1))
            .collect();
        first.sort_unstable();
        assert!(t.apply(&first));
        assert_eq!(t.counts.capacity(), t.view().n_nodes(), "after a rebuild");
        let arr = t.view().arr_ptr();
        let mut a = 5000u32;
        while t.view().arr_ptr() == arr {
            let (b, l) = v4(a.wrapping_mul(0x9e37_79b9), 32);
            assert!(t.apply(&[(b, l, 1)]));
            a += 1;
        }
        assert_eq!(
            t.counts.capacity(),
            t.view().n_nodes(),
            "after {} more",
            a - 5000
        );
    }

    /// A walk paused on a node that a removal then unlinks finishes as the trie was: the
    /// node is not reused (for a new prefix) until the writer says, with a later count of
    /// published versions, that no walk can be on it.
    #[test]
    fn unlinked_nodes_wait_in_limbo_until_reclaimed() {
        let mut t = Trie::new(32);
        for (a, len) in [(0x0a00_0000, 8), (0x0a01_0000, 16), (0x0a01_0200, 24)] {
            let (b, l) = v4(a, len);
            t.insert(b, l);
        }
        let addr = u128::from(0x0a01_0203u32) << 96;
        let view = t.view().clone();
        let mut w = Walk::default();
        view.advance(&mut w, addr, 32, 8);
        assert!(!w.done && w.m().has_len(8));
        // The /16 goes (its rule is in no version any more); new prefixes need nodes.
        t.reclaim(0);
        let (b16, l16) = v4(0x0a01_0000, 16);
        assert!(t.remove(b16, l16));
        assert_eq!(t.limbo.len(), 1);
        for a in 0..8u32 {
            let (b, l) = v4(0x0ac8_0000 + (a << 8), 24);
            t.insert(b, l);
        }
        assert_eq!(
            t.view().arr_ptr(),
            view.arr_ptr(),
            "no re-layout in this test"
        );
        view.advance(&mut w, addr, 32, 32);
        assert!(
            w.m().has_len(8) && w.m().has_len(24),
            "walk lost its path: {:?}",
            w.m()
        );
        assert_eq!(w.examined, 25);
        // Not before a later publication; then reused.
        t.reclaim(0);
        assert_eq!((t.limbo.len(), t.free.len()), (1, 0));
        t.reclaim(1);
        assert_eq!((t.limbo.len(), t.free.len()), (0, 1));
        let (b, l) = v4(0x0b00_0000, 8);
        t.insert(b, l);
        assert!(t.free.is_empty());
        assert!(t.lookup(u128::from(0x0b01_0203u32) << 96, 32).has_len(8));
    }

    /// Insertions start from the jump table of a large trie of random /32s and give the trie a
    /// walk from the root gives; removals keep every entry linked and on its path.
    #[test]
    fn insertions_from_the_jump_table_agree_with_a_list() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let mut t = Trie::new(32);
        let mut list: Vec<(u128, u8)> = Vec::new();
        let add = |t: &mut Trie, list: &mut Vec<(u128, u8)>, rng: &mut rand::rngs::SmallRng| {
            let len = [32, 32, 32, 24, 20, 16][rng.gen_range(0..6)];
            let (b, l) = v4(0x0a00_0000 | rng.gen_range(0..1u32 << 24), len);
            t.insert(b, l);
            list.push((b, l));
        };
        for _ in 0..3000 {
            add(&mut t, &mut list, &mut rng);
        }
        t.relayout();
        // The table is made with the new array.
        assert!(!t.jump_stale());
        assert!(t.view.jump.k >= 8, "a table of {} bits", t.view.jump.k);
        t.check_jump_exact();
        t.check_jump();
        add(&mut t, &mut list, &mut rng);
        t.check_jump();
        t.remake_jump();
        t.check_jump_exact();
        // A /32 starts below the root (its table entry's node), a /8 at the root.
        let (b, l) = v4(0x0a12_3456, 32);
        assert!(matches!(t.start(b, l), Err(((p, _), _)) if p != SENTINEL));
        let (b, l) = v4(0x0a00_0000, 8);
        assert!(matches!(t.start(b, l), Err(((SENTINEL, 0), _))));
        for round in 0..6 {
            for _ in 0..500 {
                add(&mut t, &mut list, &mut rng);
            }
            for _ in 0..700 {
                let (b, l) = list.swap_remove(rng.gen_range(0..list.len()));
                assert!(t.remove(b, l));
            }
            t.check_jump();
            if round == 3 {
                t.relayout();
                t.remake_jump();
                t.check_jump_exact();
            }
        }
        for _ in 0..2000 {
            let v = u128::from(0x0a00_0000 | rng.gen_range(0..1u32 << 24)) << 96;
            let mut want = 0u128;
            for (b, l) in &list {
                if v & prefix_mask(*l) == *b {
                    want |= 1 << (l - 1);
                }
            }
            assert_eq!(t.lookup(v, 32).lens, want);
            t.check_walks_from_the_table(v);
        }
        // Made again from the trie as it is (not laid out again), exact again.
        t.remake_jump();
        t.check_jump_exact();
        let mut fresh = Trie::new(32);
        for (b, l) in &list {
            fresh.insert(*b, *l);
        }
        assert_eq!(t.n_live(), fresh.n_live());
    }

    /// The address of test prefix `hi`: spread over the top bits, with a few low bits set.
    fn test_addr(hi: u32) -> u32 {
        hi.wrapping_mul(0x0400_0000) | (hi & 7)
    }

    /// A trie (16-byte nodes if `narrow`) holding the prefixes `first` (by [`test_addr`]),
    /// and how many rules each prefix has.
    fn trie_of(
        first: &[(u32, u8)],
        narrow: bool,
    ) -> (Trie, std::collections::BTreeMap<(u128, u8), i64>) {
        let mut t = Trie::new(if narrow { 32 } else { 128 });
        let mut counts = std::collections::BTreeMap::new();
        for (x, len) in first {
            let (p, l) = v4(test_addr(*x), *len);
            t.insert(p, l);
            *counts.entry((p, l)).or_default() += 1;
        }
        (t, counts)
    }

    /// `a` and `b` have as many live nodes and answer every probe (a test prefix's address
    /// with noise in its low byte) alike: the same lengths and examined bits.
    fn same_answers(
        a: &Trie,
        b: &Trie,
        probes: &[(u32, u32)],
    ) -> Result<(), proptest::test_runner::TestCaseError> {
        proptest::prop_assert_eq!(a.n_live(), b.n_live());
        for (x, noise) in probes {
            let v = u128::from(test_addr(*x) ^ (noise & 0xff)) << 96;
            let (ma, mb) = (a.lookup(v, 32), b.lookup(v, 32));
            proptest::prop_assert_eq!(ma.lens, mb.lens);
            proptest::prop_assert_eq!(ma.examined, mb.examined);
        }
        Ok(())
    }

    proptest::proptest! {
        /// Finger insertion (sorted or not, onto an existing trie) builds the same trie as
        /// one-by-one insertion: same nodes, same answers, and removal empties it.
        #[test]
        fn insert_sorted_agrees_with_insert(
            first in proptest::collection::vec((0u32..64, 1u8..=32), 0..40),
            second in proptest::collection::vec((0u32..64, 1u8..=32, 1u32..3), 0..80),
            sort in proptest::bool::ANY,
            probes in proptest::collection::vec((0u32..64, proptest::num::u32::ANY), 1..30),
            narrow in proptest::bool::ANY,
        ) {
            let (mut a, _) = trie_of(&first, narrow);
            let (mut b, _) = trie_of(&first, narrow);
            let mut items: Vec<(u128, u8, u32)> = second
                .iter()
                .map(|(x, len, n)| {
                    let (p, l) = v4(test_addr(*x), *len);
                    (p, l, *n)
                })
                .collect();
            for (p, l, n) in &items {
                for _ in 0..*n {
                    a.insert(*p, *l);
                }
            }
            if sort {
                items.sort_unstable();
            }
            // Laid out again, with a jump table (four nodes or more) for the batch's first
            // prefix to start from.
            b.relayout();
            b.remake_jump();
            b.insert_sorted(&items);
            b.check_jump();
            same_answers(&a, &b, &probes)?;
            for (x, len) in &first {
                let (p, l) = v4(test_addr(*x), *len);
                proptest::prop_assert!(b.remove(p, l));
            }
            for (p, l, n) in &items {
                for _ in 0..*n {
                    proptest::prop_assert!(b.remove(*p, *l));
                }
            }
            proptest::prop_assert_eq!(b.n_live(), 0);
        }

        /// Sorted removals (from a finger, from the jump table, from the root) leave the same
        /// trie as inserting what is left into an empty one: nested and shared prefixes,
        /// several rules of one prefix, a prefix that is not there (reported, the others
        /// removed all the same).
        #[test]
        fn sorted_removals_leave_what_inserting_the_rest_gives(
            first in proptest::collection::vec((0u32..64, 1u8..=32), 1..80),
            picks in proptest::collection::vec((proptest::num::usize::ANY, 1u32..3), 0..40),
            absent in proptest::option::of((0u32..64, 1u8..=32)),
            probes in proptest::collection::vec((0u32..64, proptest::num::u32::ANY), 1..30),
            narrow in proptest::bool::ANY,
        ) {
            let (mut b, counts) = trie_of(&first, narrow);
            let have: Vec<_> = counts.iter().map(|(k, n)| (*k, *n)).collect();
            let mut removes: std::collections::BTreeMap<(u128, u8), i64> = Default::default();
            for (i, n) in &picks {
                let ((p, l), c) = have[i % have.len()];
                let r = removes.entry((p, l)).or_default();
                *r = (*r + i64::from(*n)).min(c);
            }
            let mut expect_ok = true;
            if let Some((x, len)) = absent {
                let (p, l) = v4(test_addr(x) ^ 1 << 31, len);
                if !counts.contains_key(&(p, l)) {
                    removes.insert((p, l), 1);
                    expect_ok = false;
                }
            }
            let list: Vec<(u128, u8, u32)> = removes
                .iter()
                .map(|((p, l), n)| (*p, *l, u32::try_from(*n).unwrap()))
                .collect();
            // What is left, inserted into an empty trie.
            let mut a = Trie::new(b.width);
            for ((p, l), c) in &counts {
                for _ in 0..c - removes.get(&(*p, *l)).copied().unwrap_or(0) {
                    a.insert(*p, *l);
                }
            }
            proptest::prop_assert_eq!(b.remove_sorted(&list), expect_ok);
            b.check_jump();
            same_answers(&a, &b, &probes)?;
        }

        /// A rebuild with net changes gives the same trie as applying them one by one: same
        /// nodes, same answers (lengths and examined bits), and the same trie after further
        /// incremental changes.
        #[test]
        fn rebuild_with_agrees_with_incremental_changes(
            first in proptest::collection::vec((0u32..64, 1u8..=32), 0..60),
            changes in proptest::collection::vec((0u32..64, 1u8..=32, -2i64..3), 0..60),
            probes in proptest::collection::vec((0u32..64, proptest::num::u32::ANY), 1..30),
            narrow in proptest::bool::ANY,
        ) {
            let (mut a, counts) = trie_of(&first, narrow);
            let mut b = a.clone();
            // Net changes, clamped so that no count goes below zero.
            let mut net: std::collections::BTreeMap<(u128, u8), i64> = Default::default();
            for (x, len, d) in &changes {
                let (p, l) = v4(test_addr(*x), *len);
                let have = counts.get(&(p, l)).copied().unwrap_or(0) + net.get(&(p, l)).copied().unwrap_or(0);
                *net.entry((p, l)).or_default() += (*d).max(-have);
            }
            let list: Vec<(u128, u8, i64)> = net.iter().map(|((p, l), d)| (*p, *l, *d)).collect();
            for (p, l, d) in &list {
                for _ in 0..d.unsigned_abs() {
                    if *d > 0 {
                        a.insert(*p, *l);
                    } else {
                        proptest::prop_assert!(a.remove(*p, *l));
                    }
                }
            }
            proptest::prop_assert!(b.rebuild_with(&list));
            b.check_jump();
            same_answers(&a, &b, &probes)?;
            // The rebuilt trie takes further changes like the other.
            for (x, len) in &first {
                let (p, l) = v4(test_addr(*x), *len);
                proptest::prop_assert_eq!(a.remove(p, l), b.remove(p, l));
                b.check_jump();
            }
            proptest::prop_assert_eq!(a.n_live(), b.n_live());
            // A change below zero is refused and changes nothing.
            let n = b.n_live();
            proptest::prop_assert!(!b.rebuild_with(&[(v4(test_addr(1), 3).0, 3, -1_000)]));
            proptest::prop_assert_eq!(b.n_live(), n);
        }

        /// The trie agrees with a list of prefixes, and every address that agrees with the
        /// looked-up one on `examined` bits gets the same answer.
        #[test]
        fn lookup_random_prefixes_agrees_with_list(
            ops in proptest::collection::vec((0u32..64, 0u8..=32, proptest::bool::ANY), 0..80),
            probes in proptest::collection::vec((0u32..64, proptest::num::u32::ANY), 1..40),
            narrow in proptest::bool::ANY,
        ) {
            // Addresses from a small space (high bits from 0..64) so that prefixes overlap.
            let addr = test_addr;
            let mut t = Trie::new(if narrow { 32 } else { 128 });
            let mut list: Vec<(u128, u8)> = Vec::new();
            for (a, len, remove) in ops {
                let len = len.max(1);
                let (b, l) = v4(addr(a), len);
                if remove {
                    let pos = list.iter().position(|p| *p == (b, l));
                    proptest::prop_assert_eq!(t.remove(b, l), pos.is_some());
                    if let Some(p) = pos {
                        list.swap_remove(p);
                    }
                } else {
                    t.insert(b, l);
                    list.push((b, l));
                }
                if a % 7 == 0 {
                    t.relayout();
                }
                t.check_jump();
            }
            for (a, noise) in probes {
                let v = u128::from(addr(a) ^ (noise & 0xff)) << 96;
                let m = t.lookup(v, 32);
                let mut want = 0u128;
                for (b, l) in &list {
                    if v & prefix_mask(*l) == *b {
                        want |= 1 << (l - 1);
                    }
                }
                proptest::prop_assert_eq!(m.lens, want);
                // A walk stopped early answers for its length as the full walk does.
                let upto = u8::try_from(noise % 33).unwrap_or(32).max(1);
                let mut w = Walk::default();
                t.advance(&mut w, v, 32, upto);
                proptest::prop_assert!(w.knows(upto));
                proptest::prop_assert_eq!(w.m().has_len(upto), m.has_len(upto));
                proptest::prop_assert_eq!(w.examined.min(upto), m.examined.min(upto));
                let q = (v & prefix_mask(m.examined)) | (u128::from(noise) << 96 & !prefix_mask(m.examined));
                proptest::prop_assert_eq!(t.lookup(q, 32).lens, m.lens);
            }
            for (b, l) in list {
                proptest::prop_assert!(t.remove(b, l));
            }
            proptest::prop_assert_eq!(t.n_live(), 0);
        }
    }
}
