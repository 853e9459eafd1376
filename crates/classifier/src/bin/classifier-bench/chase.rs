//! The host's memory latency at the moment, for reading a point's lookups: a pointer chase
//! through a random cycle of cache lines in a buffer the size of a large table's working set.
//! On a shared host a neighbour's traffic lengthens the chase as it lengthens a single
//! lookup's cache miss, so a point measured in a disturbed minute says so.

use std::hint::black_box;
use std::time::Instant;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Words of a cache line.
const LINE: usize = 8;

/// A random cycle through the cache lines of a buffer: each line's first word holds the next
/// line's index.
#[derive(Debug)]
pub struct Chase {
    words: Vec<u64>,
    bytes: usize,
}

impl Chase {
    /// A cycle through `bytes` of lines, in a random order (Sattolo's shuffle: one cycle).
    pub fn new(bytes: usize) -> Self {
        let n = (bytes / (LINE * 8)).max(2);
        let mut order: Vec<usize> = (0..n).collect();
        let mut rng = SmallRng::seed_from_u64(7);
        for i in (1..n).rev() {
            let j = rng.gen_range(0..i);
            order.swap(i, j);
        }
        let mut words = vec![0u64; n * LINE];
        for (i, next) in order.iter().enumerate() {
            words[i * LINE] = *next as u64;
        }
        Chase { words, bytes }
    }

    /// Buffer size in MiB.
    pub fn mib(&self) -> usize {
        self.bytes >> 20
    }

    /// Nanoseconds a step of `steps` dependent loads (after a warm-up pass of as many).
    pub fn ns(&self, steps: usize) -> f64 {
        let mut at = 0usize;
        for _ in 0..steps {
            at = usize::try_from(self.words[at * LINE]).unwrap_or(0);
        }
        let t = Instant::now();
        for _ in 0..steps {
            at = usize::try_from(self.words[at * LINE]).unwrap_or(0);
        }
        black_box(at);
        t.elapsed().as_secs_f64() * 1e9 / steps as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chase_visits_every_line_once_a_cycle() {
        let c = Chase::new(64 * 100);
        let mut seen = [false; 100];
        let mut at = 0usize;
        for _ in 0..100 {
            assert!(!seen[at], "line {at} twice in one cycle");
            seen[at] = true;
            at = usize::try_from(c.words[at * LINE]).expect("an index");
        }
        assert_eq!(at, 0, "back at the start after every line");
        assert!(c.ns(1000) > 0.0);
    }
}
