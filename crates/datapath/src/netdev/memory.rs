//! `memory`: a port whose wire is a pair of in-memory queues, for tests.
//!
//! A test [injects](MemoryNetdev::inject) frames into an rx queue and
//! [collects](MemoryNetdev::take_tx) what the datapath transmitted. Both directions are
//! bounded like a NIC's rings: injecting into a full rx queue counts `drop_rx_queue_full`,
//! sending to a full tx queue counts `drop_tx_queue_full`. [`Netdev::recv`] copies each
//! frame into a buffer of the caller's pool, exactly like a real copying port, so tests
//! exercise the same buffer accounting (`drop_no_buffer`, `drop_too_long`).
//!
//! Config keys: `n_rxq`, `n_txq`, `rxq_len`, `txq_len` ([`MemoryConfig`]). Maturity: stable,
//! for tests; frames are heap-allocated `Vec<u8>`s, so this port is not for benchmarks.
//!
//! # Example
//!
//! ```
//! use datapath::batch::Batch;
//! use datapath::netdev::memory::{MemoryConfig, MemoryNetdev};
//! use datapath::netdev::Netdev;
//! use datapath::pool::Pool;
//!
//! let pool = Pool::default();
//! let port = MemoryNetdev::new("p0", MemoryConfig::default());
//! assert!(port.inject(0, &[1; 64]));
//! let mut batch = Batch::new();
//! port.recv(0, &pool, &mut batch);
//! port.send(0, &mut batch); // loop it back out
//! assert_eq!(port.take_tx(0), vec![vec![1; 64]]);
//! ```

use std::collections::VecDeque;

use super::{queue_id, Netdev, QueueCell};
use crate::batch::Batch;
use crate::drop::DropReason;
use crate::pool::{AllocError, Pool};
use crate::stats::QueueStats;

/// Shape of a [`MemoryNetdev`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryConfig {
    /// Rx queues.
    pub n_rxq: usize,
    /// Tx queues (at least 1 is created).
    pub n_txq: usize,
    /// Frames an rx queue holds before injection drops.
    pub rxq_len: usize,
    /// Frames a tx queue holds before sending drops.
    pub txq_len: usize,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            n_rxq: 1,
            n_txq: 1,
            rxq_len: 1024,
            txq_len: 1024,
        }
    }
}

#[derive(Debug, Default)]
struct MemQueue {
    frames: VecDeque<Vec<u8>>,
    stats: QueueStats,
}

/// An in-memory port for tests.
#[derive(Debug)]
pub struct MemoryNetdev {
    name: String,
    config: MemoryConfig,
    rxqs: Vec<QueueCell<MemQueue>>,
    txqs: Vec<QueueCell<MemQueue>>,
}

impl MemoryNetdev {
    /// A port with empty queues.
    pub fn new(name: impl Into<String>, config: MemoryConfig) -> MemoryNetdev {
        let config = MemoryConfig {
            n_txq: config.n_txq.max(1),
            ..config
        };
        let queues = |n: usize| (0..n).map(|_| QueueCell::default()).collect();
        MemoryNetdev {
            name: name.into(),
            rxqs: queues(config.n_rxq),
            txqs: queues(config.n_txq),
            config,
        }
    }

    /// Puts a copy of `frame` on rx queue `q % n_rxq` (the wire side). Returns false if
    /// the frame was dropped because the queue is full (counted as `drop_rx_queue_full`)
    /// or the port has no rx queue.
    pub fn inject(&self, q: usize, frame: &[u8]) -> bool {
        let Some(cell) = self.rxqs.get(q.checked_rem(self.rxqs.len()).unwrap_or(0)) else {
            return false;
        };
        let mut queue = cell.lock();
        if queue.frames.len() >= self.config.rxq_len {
            queue.stats.count_drop(DropReason::RxQueueFull, 1);
            return false;
        }
        queue.frames.push_back(frame.to_vec());
        true
    }

    /// Takes every frame transmitted on tx queue `q`, oldest first.
    pub fn take_tx(&self, q: usize) -> Vec<Vec<u8>> {
        self.txqs
            .get(q)
            .map(|cell| cell.lock().frames.drain(..).collect())
            .unwrap_or_default()
    }

    /// Takes every frame transmitted on any tx queue, queue by queue.
    pub fn take_all_tx(&self) -> Vec<Vec<u8>> {
        (0..self.txqs.len()).flat_map(|q| self.take_tx(q)).collect()
    }

    /// Frames waiting on rx queue `q`.
    pub fn rx_pending(&self, q: usize) -> usize {
        self.rxqs.get(q).map_or(0, |cell| cell.lock().frames.len())
    }

    /// Frames waiting on tx queue `q` to be collected.
    pub fn tx_pending(&self, q: usize) -> usize {
        self.txqs.get(q).map_or(0, |cell| cell.lock().frames.len())
    }
}

impl Netdev for MemoryNetdev {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> &'static str {
        "memory"
    }

    fn n_rxq(&self) -> usize {
        self.rxqs.len()
    }

    fn n_txq(&self) -> usize {
        self.txqs.len()
    }

    fn recv(&self, q: usize, pool: &Pool, batch: &mut Batch) -> usize {
        let Some(cell) = self.rxqs.get(q) else {
            return 0;
        };
        let mut queue = cell.lock();
        let queue = &mut *queue;
        let mut n = 0;
        for _ in 0..batch.room() {
            let Some(frame) = queue.frames.pop_front() else {
                break;
            };
            match pool.alloc_copy(&frame) {
                Ok(mut pkt) => {
                    pkt.meta_mut().rx_queue = queue_id(q);
                    queue.stats.count_rx(frame.len());
                    batch.push_unchecked(pkt);
                    n += 1;
                }
                Err(AllocError::NoBuffer) => queue.stats.count_drop(DropReason::NoBuffer, 1),
                Err(AllocError::TooLong(_)) => queue.stats.count_drop(DropReason::TooLong, 1),
            }
        }
        n
    }

    fn send(&self, q: usize, batch: &mut Batch) {
        let cell = &self.txqs[q % self.txqs.len()];
        let mut queue = cell.lock();
        let queue = &mut *queue;
        for pkt in batch.drain() {
            if queue.frames.len() >= self.config.txq_len {
                queue.stats.count_drop(DropReason::TxQueueFull, 1);
                continue;
            }
            queue.stats.count_tx(pkt.len());
            queue.frames.push_back(pkt.data().to_vec());
        }
    }

    fn rxq_stats(&self, q: usize) -> QueueStats {
        self.rxqs.get(q).map(|c| c.lock().stats).unwrap_or_default()
    }

    fn txq_stats(&self, q: usize) -> QueueStats {
        self.txqs.get(q).map(|c| c.lock().stats).unwrap_or_default()
    }
}

#[cfg(test)]
#[allow(clippy::cast_possible_truncation)] // Fixtures cast small indices to bytes.
mod tests {
    use super::*;
    use crate::batch::BATCH_SIZE;
    use crate::buffer::{BufClass, MAX_FRAME_LEN};
    use crate::pool::PoolConfig;

    fn frame(i: usize, len: usize) -> Vec<u8> {
        (0..len).map(|b| (b + i) as u8).collect()
    }

    fn port(rxq_len: usize, txq_len: usize) -> MemoryNetdev {
        MemoryNetdev::new(
            "m0",
            MemoryConfig {
                n_rxq: 2,
                n_txq: 2,
                rxq_len,
                txq_len,
            },
        )
    }

    #[test]
    fn recv_batch_edges_and_frame_sizes_loop_back_exactly() {
        for n in [0usize, 1, 31, 32, 33, 257] {
            for len in [64usize, 128, 1518, 9000] {
                let pool = Pool::new(PoolConfig {
                    n_small: 64,
                    n_jumbo: 64,
                });
                let port = port(300, 300);
                let sent: Vec<Vec<u8>> = (0..n).map(|i| frame(i, len)).collect();
                for f in &sent {
                    assert!(port.inject(1, f));
                }
                let mut batch = Batch::new();
                let mut n_batches = 0;
                loop {
                    let got = port.recv(1, &pool, &mut batch);
                    assert!(got <= BATCH_SIZE);
                    assert_eq!(got, batch.len());
                    if got == 0 {
                        break;
                    }
                    assert!(batch.iter().all(|p| p.meta().rx_queue == 1));
                    n_batches += 1;
                    port.send(0, &mut batch);
                    assert!(batch.is_empty());
                }
                assert_eq!(n_batches, n.div_ceil(BATCH_SIZE), "n = {n}");
                assert_eq!(port.take_tx(0), sent, "n = {n}, len = {len}");
                let rx = port.rxq_stats(1);
                assert_eq!((rx.rx_packets, rx.rx_bytes), (n as u64, (n * len) as u64));
                let tx = port.txq_stats(0);
                assert_eq!((tx.tx_packets, tx.tx_bytes), (n as u64, (n * len) as u64));
                assert_eq!(port.stats().drops.total(), 0);
                assert_eq!(
                    pool.in_use(BufClass::Small) + pool.in_use(BufClass::Jumbo),
                    0
                );
            }
        }
    }

    #[test]
    fn recv_appends_only_up_to_room() {
        let pool = Pool::default();
        let port = port(100, 100);
        for i in 0..40 {
            port.inject(0, &frame(i, 60));
        }
        let mut batch = Batch::new();
        for _ in 0..30 {
            batch.push(pool.alloc_copy(&[0; 60]).unwrap()).unwrap();
        }
        assert_eq!(port.recv(0, &pool, &mut batch), 2);
        assert!(batch.is_full());
        assert_eq!(port.rx_pending(0), 38);
    }

    #[test]
    fn inject_full_rx_queue_counts_drop_rx_queue_full() {
        let port = port(2, 10);
        assert!(port.inject(0, &[0; 60]));
        assert!(port.inject(0, &[0; 60]));
        assert!(!port.inject(0, &[0; 60]));
        assert_eq!(port.rxq_stats(0).drop_count(DropReason::RxQueueFull), 1);
        assert_eq!(port.rx_pending(0), 2);
    }

    #[test]
    fn send_full_tx_queue_counts_drop_tx_queue_full() {
        let pool = Pool::default();
        let port = port(100, 5);
        let mut batch = Batch::new();
        for i in 0..8 {
            batch.push(pool.alloc_copy(&frame(i, 60)).unwrap()).unwrap();
        }
        port.send(1, &mut batch);
        assert!(batch.is_empty());
        let s = port.txq_stats(1);
        assert_eq!(s.tx_packets, 5);
        assert_eq!(s.drop_count(DropReason::TxQueueFull), 3);
        assert_eq!(port.take_tx(1).len(), 5);
        assert_eq!(pool.in_use(BufClass::Small), 0);
    }

    #[test]
    fn recv_pool_exhausted_counts_drop_no_buffer() {
        let pool = Pool::new(PoolConfig {
            n_small: 3,
            n_jumbo: 0,
        });
        let port = port(100, 100);
        for i in 0..10 {
            port.inject(0, &frame(i, 60));
        }
        let mut batch = Batch::new();
        assert_eq!(port.recv(0, &pool, &mut batch), 3);
        let s = port.rxq_stats(0);
        assert_eq!(s.rx_packets, 3);
        assert_eq!(s.drop_count(DropReason::NoBuffer), 7);
        // Once buffers come back, receiving works again.
        batch.clear();
        port.inject(0, &frame(0, 60));
        assert_eq!(port.recv(0, &pool, &mut batch), 1);
    }

    #[test]
    fn recv_oversize_frame_counts_drop_too_long() {
        let pool = Pool::default();
        let port = port(100, 100);
        port.inject(0, &vec![0; MAX_FRAME_LEN + 1]);
        port.inject(0, &[0; MAX_FRAME_LEN]);
        let mut batch = Batch::new();
        assert_eq!(port.recv(0, &pool, &mut batch), 1);
        assert_eq!(port.rxq_stats(0).drop_count(DropReason::TooLong), 1);
    }

    #[test]
    fn recv_missing_queue_gives_nothing() {
        let pool = Pool::default();
        let port = port(10, 10);
        let mut batch = Batch::new();
        assert_eq!(port.recv(7, &pool, &mut batch), 0);
        assert_eq!(port.rxq_stats(7), QueueStats::default());
    }

    #[test]
    fn send_queue_beyond_count_wraps() {
        let pool = Pool::default();
        let port = port(10, 10);
        let mut batch = Batch::new();
        batch.push(pool.alloc_copy(&[1; 60]).unwrap()).unwrap();
        port.send(3, &mut batch);
        assert_eq!(port.tx_pending(1), 1);
        assert_eq!(port.name(), "m0");
        assert_eq!(port.kind(), "memory");
        assert_eq!((port.n_rxq(), port.n_txq()), (2, 2));
    }

    #[test]
    fn inject_without_rx_queues_is_refused() {
        let port = MemoryNetdev::new(
            "m1",
            MemoryConfig {
                n_rxq: 0,
                n_txq: 0,
                ..MemoryConfig::default()
            },
        );
        assert!(!port.inject(0, &[0; 60]));
        assert_eq!(port.n_txq(), 1);
    }
}
