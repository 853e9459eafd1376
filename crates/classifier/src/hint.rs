//! The crate's `unsafe` code: a cache prefetch hint, and shared arrays allocated zeroed.
//!
//! A plain load of a word the CPU does not have holds up retirement until the line arrives:
//! issued ahead of the work that needs it, it only moves the stall (run 16 in the README).
//! A prefetch retires at once, so the writer can ask for an operation's lines (its subtable's
//! cell, arena slots and stage-index slots, its tries' jump entries) and go on with other work
//! while they come.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8};
use std::sync::Arc;

use crate::shared::{Cell, Row};
use crate::trie::{Narrow, Wide};

/// A type of which a value whose bytes are all zero is a valid value (`0` for an atomic
/// integer).
///
/// # Safety
///
/// Only for types for which all-zero bytes are a valid value: integers, atomic integers, and
/// arrays and structs of nothing else.
pub(crate) unsafe trait Zeroable {}

// SAFETY: all-zero bytes are the value 0 of an atomic integer.
unsafe impl Zeroable for AtomicU8 {}
// SAFETY: as above.
unsafe impl Zeroable for AtomicU32 {}
// SAFETY: as above.
unsafe impl Zeroable for AtomicU64 {}
// SAFETY: a cell is an array of `AtomicU64` and nothing else.
unsafe impl Zeroable for Cell {}
// SAFETY: a row line is an array of `AtomicU64` and nothing else.
unsafe impl Zeroable for Row {}
// SAFETY: a trie node of either layout is a struct of `AtomicU64`s and nothing else.
unsafe impl Zeroable for Narrow {}
// SAFETY: as above.
unsafe impl Zeroable for Wide {}

/// An array of `len` values whose bytes are all zero, allocated zeroed: pages the allocator
/// takes fresh from the kernel are not written at all, and the array is written once at
/// most (a `Vec` moved into an `Arc` is copied; collected into it directly, written element by
/// element). A subtable's cells and stage indices are made so when they double, and a trie's
/// node arrays always.
pub(crate) fn zeroed<T: Zeroable>(len: usize) -> Arc<[T]> {
    let a = Arc::<[T]>::new_zeroed_slice(len);
    // SAFETY: every element's bytes are zero, a valid `T` (`T: Zeroable`).
    unsafe { a.assume_init() }
}

/// Asks the CPU to bring the cache line holding `r` into L1. A hint: it never faults, reads
/// nothing the program sees and changes nothing.
#[inline(always)]
pub(crate) fn prefetch<T>(r: &T) {
    prefetch_at((r as *const T).cast::<i8>());
}

/// Asks the CPU to bring every cache line of `r` into L1 (see [`prefetch`]): a value larger than
/// a line, as a 720-byte `Match` whose words a commit reads one after another.
#[inline(always)]
pub(crate) fn prefetch_all<T>(r: &T) {
    let p = (r as *const T).cast::<i8>();
    let size = std::mem::size_of::<T>();
    // The first byte of every line the value touches, and its last byte (`wrapping_add` keeps
    // the addresses inside the value).
    let offsets = (0..size)
        .step_by(64)
        .chain((!size.is_multiple_of(64)).then(|| size - 1));
    for off in offsets {
        prefetch_at(p.wrapping_add(off));
    }
}

/// The prefetch of the line holding address `p`, for [`prefetch`] and [`prefetch_all`].
#[inline(always)]
#[cfg(target_arch = "x86_64")]
fn prefetch_at(p: *const i8) {
    use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    // SAFETY: `_mm_prefetch` is `unsafe` only because it is a `#[target_feature(enable =
    // "sse")]` function; SSE is part of the x86_64 baseline. A prefetch never faults and has
    // no visible effect, whatever the address (the callers' come from live references).
    unsafe { _mm_prefetch::<_MM_HINT_T0>(p) }
}

/// The prefetch of the line holding address `p` (a no-op on this architecture).
#[inline(always)]
#[cfg(not(target_arch = "x86_64"))]
fn prefetch_at(_p: *const i8) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefetching_a_value_of_any_size_changes_nothing() {
        let a = [7u8; 1];
        let b = [8u64; 8];
        let c = [9u8; 65];
        let m = openflow::Match::catch_all();
        let unit = ();
        prefetch_all(&a);
        prefetch_all(&b);
        prefetch_all(&c);
        prefetch_all(&m);
        prefetch_all(&unit);
        assert_eq!(a, [7u8; 1]);
        assert_eq!(b, [8u64; 8]);
        assert_eq!(c, [9u8; 65]);
        assert_eq!(m, openflow::Match::catch_all());
    }
}
