//! Network devices: the [`Netdev`] trait and the ports that implement it.
//!
//! A netdev is a port's I/O: it receives batches of packets from its rx queues and
//! transmits batches on its tx queues. It knows nothing of flows, bridges or port numbers.
//!
//! | kind | module | what | maturity |
//! |---|---|---|---|
//! | `memory` | [`memory`] | in-memory queues for tests: inject frames, collect what was sent | stable (tests) |
//! | `null` | [`null`] | a sink that counts, optionally per flow, and never receives | stable |
//! | `pcap-replay` | [`pcap_replay`] | a capture loaded once and replayed in a loop at full speed | stable (benchmarks) |
//!
//! Real ports (AF_XDP, AF_PACKET, tap, patch) come with the daemon, through this trait.
//!
//! # Ownership (the contract every port keeps)
//!
//! - [`Netdev::recv`] *appends* at most `batch.room()` packets to the batch, taking their buffers
//!   from the caller's [`Pool`]. A frame that finds no buffer is dropped and counted
//!   (`drop_no_buffer`), as a NIC does when its ring has no descriptor; recv never blocks.
//! - [`Netdev::send`] *drains* the batch, whatever the outcome: each packet is transmitted or
//!   counted as a drop by reason. A full tx queue is a counted drop (`drop_tx_queue_full`), never a
//!   wait (style.md § 4, Snabb `link.transmit`). The port frees the buffers (they go back to the
//!   caller's pool) or, for ports that transmit asynchronously, keeps them until the device is done
//!   with them.
//!
//! # Queues and threads
//!
//! A netdev is `Send + Sync` and shared (in an `Arc`) by the PMD threads. Each rx queue is
//! polled by one thread; each thread transmits on its own tx queue when the port has enough,
//! and a tx queue index beyond [`Netdev::n_txq`] is taken modulo it (OVS's XPS fallback),
//! so threads may share a tx queue. Every queue's state sits behind its own lock on its own
//! cache line: in the normal assignment the lock is uncontended and costs two atomic
//! operations per batch, not per packet. Receiving from a queue index that does not exist
//! gives nothing.
//!
//! # Statistics
//!
//! Each queue counts `rx_packets`, `rx_bytes`, `tx_packets`, `tx_bytes` and `drop_<reason>`
//! ([`QueueStats`]); [`Netdev::stats`] sums them.
//!
//! # Example
//!
//! ```
//! use datapath::batch::Batch;
//! use datapath::netdev::memory::{MemoryConfig, MemoryNetdev};
//! use datapath::netdev::null::NullNetdev;
//! use datapath::netdev::Netdev;
//! use datapath::pool::Pool;
//!
//! let pool = Pool::default();
//! let rx = MemoryNetdev::new("p0", MemoryConfig::default());
//! let sink = NullNetdev::new("p1", 1);
//! rx.inject(0, &[0u8; 60]);
//! let mut batch = Batch::new();
//! assert_eq!(rx.recv(0, &pool, &mut batch), 1);
//! sink.send(0, &mut batch);
//! assert!(batch.is_empty());
//! assert_eq!(sink.stats().tx_packets, 1);
//! ```

use std::fmt;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::batch::Batch;
use crate::pcap::PcapError;
use crate::pool::Pool;
use crate::stats::QueueStats;

pub mod memory;
pub mod null;
pub mod pcap_replay;

/// A port's I/O: batches in from rx queues, batches out to tx queues.
pub trait Netdev: Send + Sync + fmt::Debug {
    /// The port's name (`"p0"`).
    fn name(&self) -> &str;

    /// The port's kind, as in configuration (`"memory"`, `"null"`, `"pcap-replay"`).
    fn kind(&self) -> &'static str;

    /// Number of rx queues (may be 0 for a port that never receives).
    fn n_rxq(&self) -> usize;

    /// Number of tx queues (at least 1).
    fn n_txq(&self) -> usize;

    /// Receives up to `batch.room()` packets from rx queue `q`, appending them to `batch`
    /// with buffers from `pool`; returns how many were appended. Never blocks.
    ///
    /// - Reads: the device's rx queue `q`.
    /// - Writes: the frame and `meta.rx_queue` of each appended packet (the rest of the metadata is
    ///   fresh); `rx_packets`, `rx_bytes` and `drop_*` of rx queue `q`.
    /// - Next: the caller (the PMD sets `meta.in_port`, then extraction).
    fn recv(&self, q: usize, pool: &Pool, batch: &mut Batch) -> usize;

    /// Transmits every packet of `batch` on tx queue `q % n_txq()`, and leaves `batch`
    /// empty: each packet is sent or counted as a drop.
    ///
    /// - Reads: each packet's frame.
    /// - Writes: `tx_packets`, `tx_bytes` and `drop_*` of the tx queue.
    /// - Next: the wire; the buffers return to their pool (or stay with the device until it has
    ///   sent them).
    fn send(&self, q: usize, batch: &mut Batch);

    /// Counters of rx queue `q` (zeros if it does not exist).
    fn rxq_stats(&self, q: usize) -> QueueStats;

    /// Counters of tx queue `q` (zeros if it does not exist).
    fn txq_stats(&self, q: usize) -> QueueStats;

    /// The port's counters: every rx and tx queue summed.
    fn stats(&self) -> QueueStats {
        let mut total = QueueStats::default();
        for q in 0..self.n_rxq() {
            total.merge(&self.rxq_stats(q));
        }
        for q in 0..self.n_txq() {
            total.merge(&self.txq_stats(q));
        }
        total
    }
}

/// Why a netdev could not be created.
#[derive(Debug, thiserror::Error)]
pub enum NetdevError {
    /// The capture to replay could not be read.
    #[error(transparent)]
    Pcap(#[from] PcapError),
    /// The capture to replay holds no frame.
    #[error("{name}: the capture holds no frame to replay")]
    EmptyCapture {
        /// The port.
        name: String,
    },
    /// The capture's link type is not Ethernet.
    #[error("{name}: cannot replay link type {link_type}, only Ethernet (1)")]
    LinkType {
        /// The port.
        name: String,
        /// The capture's link type.
        link_type: u32,
    },
}

/// One queue's state behind its own lock, alone on its cache line(s) so that two threads
/// polling two queues never share a line.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct QueueCell<T>(Mutex<T>);

impl<T> QueueCell<T> {
    pub(crate) fn new(state: T) -> Self {
        QueueCell(Mutex::new(state))
    }

    /// Locks the queue. A poisoned lock (a thread panicked while holding it) is taken over:
    /// the state is counters and frames, consistent at every step.
    #[inline]
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Converts a queue index to the `u16` of [`crate::buffer::Metadata::rx_queue`]; ports have
/// far fewer than 65,536 queues, so the saturation never happens in practice.
#[inline]
pub(crate) fn queue_id(q: usize) -> u16 {
    u16::try_from(q).unwrap_or(u16::MAX)
}
