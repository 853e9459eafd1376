//! Cycle counting: the time-stamp counter on x86_64, a monotonic clock elsewhere.
//!
//! [`now`] reads a cycle counter cheaply (`rdtsc`, about 20 to 40 cycles, not serializing:
//! good for per-batch accounting, where a few instructions of skew do not matter). On other
//! architectures it returns nanoseconds since a process-wide epoch, so a "cycle" there is a
//! nanosecond and [`hz`] is 10⁹.
//!
//! [`hz`] calibrates the counter against the monotonic clock once, on first use (about
//! 20 ms), and caches the result; call it at startup, not on the data path. The x86_64
//! path assumes an invariant TSC (constant rate across cores and power states), which every
//! x86 server CPU of the last decade has.
//!
//! This is one of the two modules of the crate allowed to use `unsafe` (clarifications,
//! "Cycle counting"), for the `rdtsc` intrinsic only.
//!
//! # Example
//!
//! ```
//! let start = datapath::cycles::now();
//! let work: u64 = (0..1000u64).sum();
//! let spent = datapath::cycles::now().wrapping_sub(start);
//! assert_eq!(work, 499_500);
//! let _ns = datapath::cycles::to_ns(spent);
//! ```

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Reads the cycle counter.
#[inline(always)]
#[cfg(target_arch = "x86_64")]
pub fn now() -> u64 {
    // SAFETY: `rdtsc` has no preconditions and touches no memory; every x86_64 CPU has it.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Reads the cycle counter (nanoseconds since a process-wide epoch on this architecture).
#[inline]
#[cfg(not(target_arch = "x86_64"))]
pub fn now() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    let ns = EPOCH.get_or_init(Instant::now).elapsed().as_nanos();
    u64::try_from(ns).unwrap_or(u64::MAX)
}

/// Asks the CPU to bring the cache line holding `r` into L1 (a hint; it never faults).
/// The megaflow cache prefetches a batch's buckets and keys before probing them.
#[inline(always)]
#[cfg(target_arch = "x86_64")]
pub fn prefetch<T>(r: &T) {
    use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    let p = (r as *const T).cast::<i8>();
    // SAFETY: a prefetch is a hint that never faults and has no visible effect; SSE, which the
    // intrinsic needs, is part of the x86_64 baseline; `p` comes from a live reference.
    unsafe { _mm_prefetch::<_MM_HINT_T0>(p) }
}

/// Asks the CPU to bring the cache line holding `r` into L1 (a no-op on this architecture).
#[inline(always)]
#[cfg(not(target_arch = "x86_64"))]
pub fn prefetch<T>(_r: &T) {}

/// How long [`hz`] measures.
const CALIBRATION: Duration = Duration::from_millis(20);

/// Counter ticks per second, measured once.
pub fn hz() -> u64 {
    static HZ: OnceLock<u64> = OnceLock::new();
    *HZ.get_or_init(calibrate)
}

fn calibrate() -> u64 {
    if cfg!(not(target_arch = "x86_64")) {
        return 1_000_000_000;
    }
    let t0 = Instant::now();
    let c0 = now();
    while t0.elapsed() < CALIBRATION {
        std::hint::spin_loop();
    }
    let c1 = now();
    let elapsed = t0.elapsed().as_nanos().max(1);
    let ticks = u128::from(c1.wrapping_sub(c0));
    u64::try_from(ticks * 1_000_000_000 / elapsed)
        .unwrap_or(u64::MAX)
        .max(1)
}

/// Converts a number of counter ticks to nanoseconds.
pub fn to_ns(cycles: u64) -> f64 {
    cycles as f64 * 1e9 / hz() as f64
}

/// Converts a duration to counter ticks.
pub fn from_duration(d: Duration) -> u64 {
    let ticks = d.as_nanos() * u128::from(hz()) / 1_000_000_000;
    u64::try_from(ticks).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_is_monotonic_on_one_thread() {
        let a = now();
        let b = now();
        assert!(b >= a);
    }

    #[test]
    fn hz_is_plausible_and_stable() {
        let h = hz();
        // Between 100 MHz and 10 GHz (or exactly 1 GHz for the clock fallback).
        assert!((100_000_000..=10_000_000_000).contains(&h), "{h}");
        assert_eq!(hz(), h);
        assert!((to_ns(h) - 1e9).abs() < 1.0);
        assert_eq!(from_duration(Duration::from_secs(1)), h);
    }
}
