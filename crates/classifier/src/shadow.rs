//! A subtable version's entries copied, by their bits, to the positions a growth in progress
//! gives their cells, so that the growth's last step takes them over without moving any
//! ([`crate::subtable`]). The crate's `unsafe` code beside `hint.rs`.
//!
//! A growth fills the next cell array a few positions per insertion, while the version keeps
//! being published with its current cells and entries: its readers need every entry where it
//! is until the version changes arrays. Moving the entries then (both versions' arenas, 16 MB
//! each at 512K cells) was a third of a doubling's cost; cloning them would touch every rule's
//! reference count, a cache miss each. So the writer copies each entry's two pointers to its
//! new position as the growth passes it and again whenever the entry changes; the copies are
//! never dropped or used as owners while the originals live, and at the growth's last step the
//! old array is freed without dropping its elements, the copies becoming the owners.
//!
//! An entry holds only `Arc`s (reference-counted shared pointers, no unique ones), so a
//! bit-for-bit copy is an unregistered alias of shared data: as a raw pointer would be.

use std::mem::ManuallyDrop;

/// Bitwise copies of values owned by another array (see the module documentation). Dropping
/// it drops none of them.
#[derive(Debug)]
pub(crate) struct Shadow<E> {
    slots: Vec<ManuallyDrop<Option<E>>>,
}

impl<E> Shadow<E> {
    /// `len` positions holding nothing.
    pub(crate) fn new(len: usize) -> Self {
        let mut slots = Vec::new();
        slots.resize_with(len, || ManuallyDrop::new(None));
        Shadow { slots }
    }

    /// Number of positions.
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// The copy at `at`.
    pub(crate) fn get(&self, at: usize) -> Option<&E> {
        self.slots.get(at).and_then(|s| s.as_ref())
    }

    /// Makes position `at` a copy of `src` (whatever copy it held is forgotten; a copy of
    /// `None` clears it).
    ///
    /// The copy is of `src` as it is now: the caller copies again after every change to
    /// `src`, and hands the array owning `src` to [`Shadow::take_over`] only when every copy
    /// is current (or `src` is gone and its copy cleared).
    pub(crate) fn copy(&mut self, at: usize, src: &Option<E>) {
        // SAFETY: the copy is held in `ManuallyDrop`, so it is never dropped here; it is only
        // ever read through shared references (`get`), and becomes an owner in `take_over`
        // only when the owning array is freed without dropping its elements, each of which
        // has exactly one current copy then (the caller's contract above).
        self.slots[at] = ManuallyDrop::new(unsafe { std::ptr::read(src) });
    }

    /// Takes over the values of `owner`, each of which has exactly one current copy here (see
    /// [`Shadow::copy`]): `owner` is freed without dropping them, and the copies are returned
    /// as an owning array.
    pub(crate) fn take_over(self, mut owner: Vec<Option<E>>) -> Vec<Option<E>> {
        // SAFETY: length 0 is within the capacity, and no element is dropped: each is owned
        // from here on by its copy (the contract of `copy`), so dropping it too would free it
        // twice.
        unsafe { owner.set_len(0) };
        drop(owner);
        let mut slots = ManuallyDrop::new(self.slots);
        let (ptr, len, cap) = (slots.as_mut_ptr(), slots.len(), slots.capacity());
        // SAFETY: `ManuallyDrop<X>` is `repr(transparent)` over `X`, so the buffer, allocated
        // for `cap` values of `ManuallyDrop<Option<E>>`, has the size and alignment of one for
        // `cap` values of `Option<E>`, its first `len` initialised; `slots` gives the buffer up
        // (never dropped), so the new `Vec` is its only owner.
        unsafe { Vec::from_raw_parts(ptr.cast::<Option<E>>(), len, cap) }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    /// Copies kept current through changes, then taken over: every value is dropped exactly
    /// once (the counts return to one), none early.
    #[test]
    fn take_over_owns_each_value_once() {
        let vals: Vec<Arc<u32>> = (0..8).map(Arc::new).collect();
        let mut owner: Vec<Option<Arc<u32>>> = vals.iter().map(|v| Some(v.clone())).collect();
        owner[3] = None;
        let mut sh = Shadow::new(16);
        for (i, o) in owner.iter().enumerate() {
            sh.copy(15 - i, o);
        }
        // A change after the copy: copied again.
        owner[5] = Some(vals[0].clone());
        sh.copy(10, &owner[5]);
        // Gone after the copy: cleared.
        owner[6] = None;
        sh.copy(9, &owner[6]);
        assert_eq!(Arc::strong_count(&vals[5]), 1);
        assert_eq!(Arc::strong_count(&vals[6]), 1);
        assert_eq!(Arc::strong_count(&vals[0]), 3);
        let got = sh.take_over(owner);
        assert_eq!(got.len(), 16);
        assert_eq!(got[15].as_deref(), Some(&0));
        assert_eq!(got[10].as_deref(), Some(&0));
        assert!(got[12].is_none() && got[9].is_none() && got[0].is_none());
        assert_eq!(Arc::strong_count(&vals[0]), 3);
        assert_eq!(Arc::strong_count(&vals[7]), 2);
        drop(got);
        assert!(vals.iter().all(|v| Arc::strong_count(v) == 1));
    }
}
