//! The crate's one `unsafe` use: a cache prefetch hint.
//!
//! A plain load of a word the CPU does not have holds up retirement until the line arrives:
//! issued ahead of the work that needs it, it only moves the stall (run 16 in the README).
//! A prefetch retires at once, so the writer can ask for an operation's lines (its subtable's
//! cell, arena slots and stage-index slots, its tries' jump entries) and go on with other work
//! while they come.

/// Asks the CPU to bring the cache line holding `r` into L1. A hint: it never faults, reads
/// nothing the program sees and changes nothing.
#[inline(always)]
#[cfg(target_arch = "x86_64")]
pub(crate) fn prefetch<T>(r: &T) {
    use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    let p = (r as *const T).cast::<i8>();
    // SAFETY: `_mm_prefetch` is `unsafe` only because it is a `#[target_feature(enable =
    // "sse")]` function; SSE is part of the x86_64 baseline. A prefetch never faults and has
    // no visible effect, and `p` comes from a live reference.
    unsafe { _mm_prefetch::<_MM_HINT_T0>(p) }
}

/// Asks the CPU to bring the cache line holding `r` into L1 (a no-op on this architecture).
#[inline(always)]
#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn prefetch<T>(_r: &T) {}
