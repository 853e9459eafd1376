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
//! past the length zero), so removing a node only relinks its parent. Nodes live in a `Vec`
//! arena indexed by `u32`.

/// No node.
const NIL: u32 = u32::MAX;

/// 32 bytes: the prefix is split in two words so that the node needs no 16-byte alignment.
#[derive(Debug, Clone, Copy)]
struct Node {
    /// The node's prefix, left-aligned (high and low halves); bits past `len` are zero.
    bits: [u64; 2],
    /// Prefix length in bits (1..=128; the root of a trie may also be shorter).
    len: u8,
    /// Rules whose prefix is exactly this one.
    count: u32,
    /// Children by the bit at position `len`.
    child: [u32; 2],
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
#[derive(Debug, Clone, Copy)]
pub(crate) struct Walk {
    cur: u32,
    started: bool,
    done: bool,
    /// What the walk learnt so far.
    pub(crate) m: TrieMatch,
}

impl Default for Walk {
    fn default() -> Self {
        Walk {
            cur: NIL,
            started: false,
            done: false,
            m: TrieMatch::default(),
        }
    }
}

impl Walk {
    /// True if the walk has gone far enough to answer for prefix length `plen`: it ended,
    /// or it passed bit `plen` (then every node of length at most `plen` on the path was
    /// seen, and at least `plen` bits were examined).
    #[inline]
    pub(crate) fn knows(&self, plen: u8) -> bool {
        self.done || self.m.examined > plen
    }
}

/// A path-compressed binary trie of prefixes with counts.
#[derive(Debug, Clone)]
pub(crate) struct Trie {
    nodes: Vec<Node>,
    free: Vec<u32>,
    root: u32,
    /// Nodes allocated or freed since the last [`Trie::relayout`].
    n_changes: usize,
}

impl Default for Trie {
    fn default() -> Self {
        Trie {
            nodes: Vec::new(),
            free: Vec::new(),
            root: NIL,
            n_changes: 0,
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

impl Node {
    #[inline]
    fn bits(&self) -> u128 {
        (u128::from(self.bits[0]) << 64) | u128::from(self.bits[1])
    }
}

#[allow(clippy::cast_possible_truncation)] // Splitting a `u128` in halves.
fn split(v: u128) -> [u64; 2] {
    [(v >> 64) as u64, v as u64]
}

impl Trie {
    fn alloc(&mut self, node: Node) -> u32 {
        self.n_changes += 1;
        if let Some(i) = self.free.pop() {
            self.nodes[i as usize] = node;
            i
        } else {
            self.nodes.push(node);
            u32::try_from(self.nodes.len() - 1).expect("fewer than 4G trie nodes")
        }
    }

    fn set_link(&mut self, parent: Option<(u32, usize)>, to: u32) {
        match parent {
            None => self.root = to,
            Some((p, b)) => self.nodes[p as usize].child[b] = to,
        }
    }

    /// Adds one rule with prefix `bits` (left-aligned, masked) of length `len`.
    #[cfg(test)]
    pub(crate) fn insert(&mut self, bits: u128, len: u8) {
        self.insert_at(None, self.root, bits, len, 1);
    }

    /// Adds `n` rules with prefix `bits` of length `len`, walking down from `cur` (linked
    /// from `parent`), which must be where a walk from the root would arrive. Returns the
    /// node that holds the prefix.
    fn insert_at(
        &mut self,
        mut parent: Option<(u32, usize)>,
        mut cur: u32,
        bits: u128,
        len: u8,
        n: u32,
    ) -> u32 {
        loop {
            if cur == NIL {
                let new = self.alloc(Node {
                    bits: split(bits),
                    len,
                    count: n,
                    child: [NIL; 2],
                });
                self.set_link(parent, new);
                return new;
            }
            let node = &self.nodes[cur as usize];
            let c = common_len(node.bits(), bits, node.len.min(len));
            if c == node.len {
                if node.len == len {
                    self.nodes[cur as usize].count += n;
                    return cur;
                }
                let b = bit(bits, node.len);
                parent = Some((cur, b));
                cur = node.child[b];
                continue;
            }
            // The new prefix leaves this node's path at bit `c` (or ends at it).
            if c == len {
                let mut child = [NIL; 2];
                child[bit(node.bits(), len)] = cur;
                let new = self.alloc(Node {
                    bits: split(bits),
                    len,
                    count: n,
                    child,
                });
                self.set_link(parent, new);
                return new;
            }
            {
                let node_bits = node.bits();
                let leaf = self.alloc(Node {
                    bits: split(bits),
                    len,
                    count: n,
                    child: [NIL; 2],
                });
                let mut child = [NIL; 2];
                child[bit(bits, c)] = leaf;
                child[bit(node_bits, c)] = cur;
                let fork = self.alloc(Node {
                    bits: split(bits & prefix_mask(c)),
                    len: c,
                    count: 0,
                    child,
                });
                self.set_link(parent, fork);
                return leaf;
            }
        }
    }

    /// Adds `n` rules for each `(bits, len, n)` of `items`, which should be sorted by
    /// `(bits, len)`: each insertion then starts from the deepest node of the previous
    /// insertion's path that is a prefix of the new one (a finger), instead of the root, so
    /// a sorted batch costs about one node step per prefix. Correct in any order.
    pub(crate) fn insert_sorted(&mut self, items: &[(u128, u8, u32)]) {
        if let [(bits, len, n)] = *items {
            // One prefix (a single-rule commit): no finger to keep.
            self.insert_at(None, self.root, bits, len, n);
            return;
        }
        // Nodes from the root towards the previous prefix, each a prefix of the next (a
        // fork added since may be missing between two of them, which does not matter).
        let mut path: Vec<u32> = Vec::new();
        for &(bits, len, n) in items {
            while let Some(&top) = path.last() {
                let node = &self.nodes[top as usize];
                if node.len <= len && common_len(node.bits(), bits, node.len) == node.len {
                    break;
                }
                path.pop();
            }
            let (parent, cur) = match path.last() {
                None => (None, self.root),
                Some(&p) => {
                    let node = &self.nodes[p as usize];
                    if node.len == len {
                        self.nodes[p as usize].count += n;
                        continue;
                    }
                    let b = bit(bits, node.len);
                    (Some((p, b)), node.child[b])
                }
            };
            let target = self.insert_at(parent, cur, bits, len, n);
            let mut at = match parent {
                None => self.root,
                Some((p, b)) => self.nodes[p as usize].child[b],
            };
            loop {
                path.push(at);
                if at == target {
                    break;
                }
                let node = &self.nodes[at as usize];
                at = node.child[bit(bits, node.len)];
            }
        }
    }

    /// Removes one rule with prefix `bits` of length `len`. Returns `false` if there is
    /// none (an internal inconsistency the caller reports).
    pub(crate) fn remove(&mut self, bits: u128, len: u8) -> bool {
        let mut path: Vec<(u32, usize)> = Vec::new();
        let mut cur = self.root;
        while cur != NIL {
            let node = &self.nodes[cur as usize];
            if node.len > len || common_len(node.bits(), bits, node.len) < node.len {
                return false;
            }
            if node.len == len {
                break;
            }
            let b = bit(bits, node.len);
            path.push((cur, b));
            cur = node.child[b];
        }
        if cur == NIL || self.nodes[cur as usize].count == 0 {
            return false;
        }
        self.nodes[cur as usize].count -= 1;
        // Drop nodes that no longer carry a prefix or a fork, bottom up.
        let mut at = cur;
        loop {
            let node = &self.nodes[at as usize];
            if node.count > 0 {
                break;
            }
            let kids: Vec<u32> = node.child.iter().copied().filter(|c| *c != NIL).collect();
            if kids.len() == 2 {
                break;
            }
            let replacement = kids.first().copied().unwrap_or(NIL);
            let parent = path.pop();
            self.set_link(parent, replacement);
            self.free.push(at);
            self.n_changes += 1;
            match parent {
                Some((p, _)) if replacement == NIL => at = p,
                _ => break,
            }
        }
        true
    }

    /// Rewrites the arena in depth-first order (a node's first child right after it, small
    /// subtrees within a page) once a quarter of the nodes changed since the last time, so
    /// that a walk touches few cache lines and pages. Amortised O(1) per change.
    pub(crate) fn maybe_relayout(&mut self) {
        let live = self.n_live();
        if self.n_changes >= 64 && self.n_changes * 4 >= live {
            self.relayout();
        }
    }

    fn relayout(&mut self) {
        self.n_changes = 0;
        let mut nodes = Vec::with_capacity(self.nodes.len() - self.free.len());
        let mut stack: Vec<(u32, u32, usize)> = Vec::new();
        if self.root != NIL {
            stack.push((self.root, NIL, 0));
        }
        let mut root = NIL;
        while let Some((old, parent, side)) = stack.pop() {
            let node = &self.nodes[old as usize];
            let new = u32::try_from(nodes.len()).expect("fewer than 4G trie nodes");
            // Second child first on the stack, so the first child is laid out next.
            for b in [1, 0] {
                if node.child[b] != NIL {
                    stack.push((node.child[b], new, b));
                }
            }
            nodes.push(Node {
                child: [NIL; 2],
                ..*node
            });
            if parent == NIL {
                root = new;
            } else {
                nodes[parent as usize].child[side] = new;
            }
        }
        self.nodes = nodes;
        self.free.clear();
        self.root = root;
    }

    /// Makes this trie a copy of `other`, in this trie's memory where it is large enough
    /// (a copy of the nodes, without a walk: how a replay takes a trie that a large batch built
    /// again in the other version).
    pub(crate) fn copy_from(&mut self, other: &Trie) {
        self.nodes.clone_from(&other.nodes);
        self.free.clone_from(&other.free);
        self.root = other.root;
        self.n_changes = other.n_changes;
    }

    /// Live nodes (prefixes and forks).
    pub(crate) fn n_live(&self) -> usize {
        self.nodes.len() - self.free.len()
    }

    /// Applies `changes` (net count changes per prefix, sorted by `(bits, len)`, each prefix
    /// once) by building the trie again from the merged, sorted list of its prefixes, laid out
    /// depth-first as [`Trie::relayout`] does: linear in the trie's size plus the changes, and
    /// sequential, where inserting many prefixes one by one costs a walk (a few cache misses)
    /// each. The result is the same trie (path-compressed tries are canonical). The new nodes
    /// go into the old arena's memory (fresh memory costs a page fault per 4 KB). Returns
    /// `false`, and leaves the trie unchanged, if a change would take a prefix's count below
    /// zero (an internal inconsistency the caller reports).
    pub(crate) fn rebuild_with(&mut self, changes: &[(u128, u8, i64)]) -> bool {
        let mut merged: Vec<(u128, u8, u32)> = Vec::with_capacity(self.n_live() + changes.len());
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
        if self.root != NIL {
            stack.push(self.root);
        }
        while let Some(at) = stack.pop() {
            let node = &self.nodes[at as usize];
            if node.count > 0 && !push(node.bits(), node.len, i64::from(node.count)) {
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
        self.nodes.clear();
        self.nodes.reserve(2 * merged.len());
        self.root = if merged.is_empty() {
            NIL
        } else {
            build(&merged, &mut self.nodes)
        };
        self.free.clear();
        self.n_changes = 0;
        true
    }

    /// Walks the trie along `bits` (a left-aligned address of `width` bits) to the end.
    #[cfg(test)]
    pub(crate) fn lookup(&self, bits: u128, width: u8) -> TrieMatch {
        let mut w = Walk::default();
        self.advance(&mut w, bits, width, u8::MAX);
        w.m
    }

    /// Continues walk `w` along `bits` until it knows the answer for prefix length `upto`
    /// (see [`Walk::knows`]): a lookup whose subtables have short prefixes does not pay for
    /// the whole depth of the trie.
    #[inline]
    pub(crate) fn advance(&self, w: &mut Walk, bits: u128, width: u8, upto: u8) {
        if !w.started {
            w.started = true;
            w.cur = self.root;
        }
        while !w.done && w.m.examined <= upto {
            if w.cur == NIL {
                w.done = true;
                break;
            }
            let node = &self.nodes[w.cur as usize];
            let c = common_len(node.bits(), bits, node.len);
            if c < node.len {
                w.m.examined = c + 1;
                w.done = true;
                break;
            }
            if node.count > 0 && node.len > 0 {
                w.m.lens |= 1u128 << (node.len - 1);
            }
            if node.len >= width {
                w.m.examined = width;
                w.done = true;
                break;
            }
            w.m.examined = node.len + 1;
            w.cur = node.child[bit(bits, node.len)];
        }
    }

    /// Bytes held by the node arena.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<Node>()
            + self.free.capacity() * std::mem::size_of::<u32>()
    }
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

/// Appends to `nodes`, in pre-order, the path-compressed trie of `items` (distinct prefixes
/// with counts, sorted by `(bits, len)`, not empty), and returns its root.
fn build(items: &[(u128, u8, u32)], nodes: &mut Vec<Node>) -> u32 {
    // `lcp[i]`: the longest common prefix of items `i - 1` and `i` (as bit strings of their
    // lengths). A byte each, so the scans below stay in cache where the items would not.
    let mut lcp = vec![0u8; items.len()];
    for i in 1..items.len() {
        let (a, la, _) = items[i - 1];
        let (b, lb, _) = items[i];
        lcp[i] = common_len(a, b, la.min(lb));
    }
    build_range(items, &lcp, 0, items.len(), nodes)
}

/// The node for `items[lo..hi]` (see [`build`]) and, below it, its subtrees.
///
/// The node's prefix is the items' longest common prefix, the smallest `lcp` inside the range
/// (for sorted strings, a prefix sorts right before what extends it). Only the first item
/// can end there; the others split by their next bit, and the first item of the 1 side is the
/// one whose `lcp` with its predecessor is that smallest value (inside the 0 side they share
/// one bit more).
fn build_range(
    items: &[(u128, u8, u32)],
    lcp: &[u8],
    lo: usize,
    hi: usize,
    nodes: &mut Vec<Node>,
) -> u32 {
    let (fb, fl, fc) = items[lo];
    let len = lcp[lo + 1..hi].iter().copied().min().unwrap_or(fl);
    let (count, rest) = if fl == len { (fc, lo + 1) } else { (0, lo) };
    let at = u32::try_from(nodes.len()).expect("fewer than 4G trie nodes");
    nodes.push(Node {
        bits: split(fb & prefix_mask(len)),
        len,
        count,
        child: [NIL; 2],
    });
    if rest < hi {
        // Every item of `rest..hi` is longer than `len`, so bit `len` exists.
        let ones = match lcp[rest + 1..hi].iter().rposition(|l| *l == len) {
            Some(p) => rest + 1 + p,
            None if bit(items[rest].0, len) == 0 => hi,
            None => rest,
        };
        for (side, (a, b)) in [(0, (rest, ones)), (1, (ones, hi))] {
            if a < b {
                let c = build_range(items, lcp, a, b, nodes);
                nodes[at as usize].child[side] = c;
            }
        }
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(a: u32, len: u8) -> (u128, u8) {
        ((u128::from(a) << 96) & prefix_mask(len), len)
    }

    #[test]
    fn lookup_reports_matching_lengths_and_examined_bits() {
        let mut t = Trie::default();
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
        let mut t = Trie::default();
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

    proptest::proptest! {
        /// Finger insertion (sorted or not, onto an existing trie) builds the same trie as
        /// one-by-one insertion: same nodes, same answers, and removal empties it.
        #[test]
        fn insert_sorted_agrees_with_insert(
            first in proptest::collection::vec((0u32..64, 1u8..=32), 0..40),
            second in proptest::collection::vec((0u32..64, 1u8..=32, 1u32..3), 0..80),
            sort in proptest::bool::ANY,
            probes in proptest::collection::vec((0u32..64, proptest::num::u32::ANY), 1..30),
        ) {
            let addr = |hi: u32| hi.wrapping_mul(0x0400_0000) | (hi & 7);
            let mut a = Trie::default();
            let mut b = Trie::default();
            for (x, len) in &first {
                let (p, l) = v4(addr(*x), *len);
                a.insert(p, l);
                b.insert(p, l);
            }
            let mut items: Vec<(u128, u8, u32)> = second
                .iter()
                .map(|(x, len, n)| {
                    let (p, l) = v4(addr(*x), *len);
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
            b.insert_sorted(&items);
            proptest::prop_assert_eq!(a.n_live(), b.n_live());
            for (x, noise) in probes {
                let v = u128::from(addr(x) ^ (noise & 0xff)) << 96;
                let (ma, mb) = (a.lookup(v, 32), b.lookup(v, 32));
                proptest::prop_assert_eq!(ma.lens, mb.lens);
                proptest::prop_assert_eq!(ma.examined, mb.examined);
            }
            for (x, len) in &first {
                let (p, l) = v4(addr(*x), *len);
                proptest::prop_assert!(b.remove(p, l));
            }
            for (p, l, n) in &items {
                for _ in 0..*n {
                    proptest::prop_assert!(b.remove(*p, *l));
                }
            }
            proptest::prop_assert_eq!(b.n_live(), 0);
        }

        /// A rebuild with net changes gives the same trie as applying them one by one: same
        /// nodes, same answers (lengths and examined bits), and the same trie after further
        /// incremental changes.
        #[test]
        fn rebuild_with_agrees_with_incremental_changes(
            first in proptest::collection::vec((0u32..64, 1u8..=32), 0..60),
            changes in proptest::collection::vec((0u32..64, 1u8..=32, -2i64..3), 0..60),
            probes in proptest::collection::vec((0u32..64, proptest::num::u32::ANY), 1..30),
        ) {
            let addr = |hi: u32| hi.wrapping_mul(0x0400_0000) | (hi & 7);
            let mut a = Trie::default();
            let mut counts: std::collections::BTreeMap<(u128, u8), i64> = Default::default();
            for (x, len) in &first {
                let (p, l) = v4(addr(*x), *len);
                a.insert(p, l);
                *counts.entry((p, l)).or_default() += 1;
            }
            let mut b = a.clone();
            // Net changes, clamped so that no count goes below zero.
            let mut net: std::collections::BTreeMap<(u128, u8), i64> = Default::default();
            for (x, len, d) in &changes {
                let (p, l) = v4(addr(*x), *len);
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
            proptest::prop_assert_eq!(a.n_live(), b.n_live());
            for (x, noise) in &probes {
                let v = u128::from(addr(*x) ^ (noise & 0xff)) << 96;
                let (ma, mb) = (a.lookup(v, 32), b.lookup(v, 32));
                proptest::prop_assert_eq!(ma.lens, mb.lens);
                proptest::prop_assert_eq!(ma.examined, mb.examined);
            }
            // The rebuilt trie takes further changes like the other.
            for (x, len) in &first {
                let (p, l) = v4(addr(*x), *len);
                proptest::prop_assert_eq!(a.remove(p, l), b.remove(p, l));
            }
            proptest::prop_assert_eq!(a.n_live(), b.n_live());
            // A change below zero is refused and changes nothing.
            let n = b.n_live();
            proptest::prop_assert!(!b.rebuild_with(&[(v4(addr(1), 3).0, 3, -1_000)]));
            proptest::prop_assert_eq!(b.n_live(), n);
        }

        /// The trie agrees with a list of prefixes, and every address that agrees with the
        /// looked-up one on `examined` bits gets the same answer.
        #[test]
        fn lookup_random_prefixes_agrees_with_list(
            ops in proptest::collection::vec((0u32..64, 0u8..=32, proptest::bool::ANY), 0..80),
            probes in proptest::collection::vec((0u32..64, proptest::num::u32::ANY), 1..40),
        ) {
            // Addresses from a small space (high bits from 0..64) so that prefixes overlap.
            let addr = |hi: u32| hi.wrapping_mul(0x0400_0000) | (hi & 7);
            let mut t = Trie::default();
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
                proptest::prop_assert_eq!(w.m.has_len(upto), m.has_len(upto));
                proptest::prop_assert_eq!(w.m.examined.min(upto), m.examined.min(upto));
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
