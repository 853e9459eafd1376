//! `pcap-replay`: a capture loaded once and replayed in a loop at full speed (DPDK
//! `net_pcap` with `infinite_rx=1`).
//!
//! The file is read and parsed once, when the port is created ([`Capture`]). Each
//! [`Netdev::recv`] then hands out the next frames, wrapping around at the end of the
//! capture, **copying each frame into a buffer of the caller's pool**. The copy is on
//! purpose: OVS-DPDK's `net_pcap` copies every frame into an mbuf on the PMD core, and a
//! fair comparison makes ferrovs pay the same (clarifications, "A fair replay"). The
//! replay→null throughput of this port is the ceiling that switch figures are compared to.
//!
//! Each rx queue replays the whole capture independently; queue `q` of `n` starts at frame
//! `q * len / n`, so that queues polled by different threads offer different flows at any
//! moment. A queue stops after [`ReplayConfig::loops`] passes, if set (tests, exact packet
//! accounting); by default it never stops.
//!
//! When the pool runs out, the frames a burst would have carried are counted as
//! `drop_no_buffer` and the replay moves past them, as a NIC drops frames it has no
//! descriptor for; a frame longer than the largest buffer counts `drop_too_long`. The port
//! cannot transmit: what it is sent is counted as `drop_tx_unsupported` (DPDK's `tx_drop`).
//!
//! Config keys: `pcap` (path), `n_rxq`, `loops` ([`ReplayConfig`]). Maturity: stable, for
//! benchmarks. Only Ethernet captures (link type 1) are accepted.
//!
//! Frames in the capture are packed at 64-byte boundaries, so at 256K flows of 64 B the
//! source is 16 MiB; `net_pcap` keeps one 2 KB mbuf per frame (0.5 GiB). Compare ceilings
//! measured in the same run, not absolute figures.
//!
//! # Example
//!
//! ```
//! use datapath::batch::Batch;
//! use datapath::netdev::pcap_replay::{PcapReplay, ReplayConfig};
//! use datapath::netdev::Netdev;
//! use datapath::pcap::{Capture, PcapWriter, WriterOptions};
//! use datapath::pool::Pool;
//!
//! let mut w = PcapWriter::new(Vec::new(), WriterOptions::default()).expect("in memory");
//! for i in 0..3u8 {
//!     w.write_frame(0, 0, &[i; 60]).expect("in memory");
//! }
//! let capture = Capture::parse(&w.into_inner()).expect("valid");
//! let port = PcapReplay::new("p0", capture, ReplayConfig::default()).expect("Ethernet");
//! let pool = Pool::default();
//! let mut batch = Batch::new();
//! assert_eq!(port.recv(0, &pool, &mut batch), 32); // loops: frame 0, 1, 2, 0, 1, …
//! assert_eq!(batch.packets()[3].data(), &[0; 60]);
//! ```

use std::path::Path;
use std::sync::Arc;

use super::{queue_id, Netdev, NetdevError, QueueCell};
use crate::batch::Batch;
use crate::drop::DropReason;
use crate::pcap::{Capture, LINKTYPE_ETHERNET};
use crate::pool::{AllocError, Pool};
use crate::stats::QueueStats;

/// Shape of a [`PcapReplay`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayConfig {
    /// Rx queues, each replaying the whole capture (at least 1 is created).
    pub n_rxq: usize,
    /// Passes over the capture after which a queue stops; `None` replays forever.
    pub loops: Option<u64>,
}

impl Default for ReplayConfig {
    fn default() -> Self {
        ReplayConfig {
            n_rxq: 1,
            loops: None,
        }
    }
}

#[derive(Debug, Default)]
struct ReplayQueue {
    /// Next frame to hand out.
    next: usize,
    /// Frame the queue started at; a pass ends when `next` comes back to it.
    start: usize,
    /// Completed passes.
    passes: u64,
    /// Whether the queue has completed its `loops` passes.
    done: bool,
    stats: QueueStats,
}

/// A port that replays a capture forever (or `loops` times).
#[derive(Debug)]
pub struct PcapReplay {
    name: String,
    capture: Arc<Capture>,
    loops: Option<u64>,
    rxqs: Vec<QueueCell<ReplayQueue>>,
    txq: QueueCell<QueueStats>,
}

impl PcapReplay {
    /// Loads the capture at `path` and makes a port that replays it.
    pub fn open(
        name: impl Into<String>,
        path: impl AsRef<Path>,
        config: ReplayConfig,
    ) -> Result<PcapReplay, NetdevError> {
        PcapReplay::new(name, Capture::read(path)?, config)
    }

    /// Makes a port that replays `capture` (which may be shared with other ports).
    pub fn new(
        name: impl Into<String>,
        capture: impl Into<Arc<Capture>>,
        config: ReplayConfig,
    ) -> Result<PcapReplay, NetdevError> {
        let name = name.into();
        let capture = capture.into();
        if capture.link_type != LINKTYPE_ETHERNET {
            return Err(NetdevError::LinkType {
                name,
                link_type: capture.link_type,
            });
        }
        if capture.is_empty() {
            return Err(NetdevError::EmptyCapture { name });
        }
        let n_rxq = config.n_rxq.max(1);
        let rxqs = (0..n_rxq)
            .map(|q| {
                let start = q * capture.len() / n_rxq;
                QueueCell::new(ReplayQueue {
                    next: start,
                    start,
                    done: config.loops == Some(0),
                    ..ReplayQueue::default()
                })
            })
            .collect();
        Ok(PcapReplay {
            name,
            capture,
            loops: config.loops,
            rxqs,
            txq: QueueCell::default(),
        })
    }

    /// The capture being replayed.
    pub fn capture(&self) -> &Capture {
        &self.capture
    }

    /// Completed passes of rx queue `q` over the capture.
    pub fn passes(&self, q: usize) -> u64 {
        self.rxqs.get(q).map_or(0, |c| c.lock().passes)
    }

    /// Whether rx queue `q` has finished its `loops` passes (never, without `loops`).
    pub fn is_done(&self, q: usize) -> bool {
        self.rxqs.get(q).map_or(true, |c| c.lock().done)
    }
}

impl Netdev for PcapReplay {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> &'static str {
        "pcap-replay"
    }

    fn n_rxq(&self) -> usize {
        self.rxqs.len()
    }

    fn n_txq(&self) -> usize {
        1
    }

    fn recv(&self, q: usize, pool: &Pool, batch: &mut Batch) -> usize {
        let Some(cell) = self.rxqs.get(q) else {
            return 0;
        };
        let mut queue = cell.lock();
        let queue = &mut *queue;
        let capture = &*self.capture;
        let n_frames = capture.len();
        let rx_queue = queue_id(q);
        let mut n = 0;
        for _ in 0..batch.room() {
            if queue.done {
                break;
            }
            let frame = capture.frame(queue.next);
            queue.next += 1;
            if queue.next == n_frames {
                queue.next = 0;
            }
            if queue.next == queue.start {
                queue.passes += 1;
                queue.done = self.loops == Some(queue.passes);
            }
            match pool.alloc_copy(frame) {
                Ok(mut pkt) => {
                    pkt.meta_mut().rx_queue = rx_queue;
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

    fn send(&self, _q: usize, batch: &mut Batch) {
        self.txq
            .lock()
            .count_drop(DropReason::TxUnsupported, batch.len() as u64);
        batch.clear();
    }

    fn rxq_stats(&self, q: usize) -> QueueStats {
        self.rxqs.get(q).map(|c| c.lock().stats).unwrap_or_default()
    }

    fn txq_stats(&self, q: usize) -> QueueStats {
        if q == 0 {
            *self.txq.lock()
        } else {
            QueueStats::default()
        }
    }
}

#[cfg(test)]
#[allow(clippy::cast_possible_truncation)] // Fixtures cast small indices to bytes.
mod tests {
    use super::*;
    use crate::batch::BATCH_SIZE;
    use crate::buffer::{BufClass, MAX_FRAME_LEN};
    use crate::pcap::{PcapWriter, WriterOptions};
    use crate::pool::PoolConfig;

    fn capture(frames: &[Vec<u8>], link_type: u32) -> Capture {
        let opts = WriterOptions {
            link_type,
            ..WriterOptions::default()
        };
        let mut w = PcapWriter::new(Vec::new(), opts).unwrap();
        for f in frames {
            w.write_frame(0, 0, f).unwrap();
        }
        Capture::parse(&w.into_inner()).unwrap()
    }

    fn frames(n: usize, len: usize) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| (0..len).map(|b| (b * 3 + i) as u8).collect())
            .collect()
    }

    fn drain_all(port: &PcapReplay, q: usize, pool: &Pool) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut batch = Batch::new();
        while port.recv(q, pool, &mut batch) > 0 {
            out.extend(batch.drain().map(|p| p.data().to_vec()));
        }
        out
    }

    #[test]
    fn recv_replays_byte_exact_for_batch_edges_and_sizes() {
        for n in [1usize, 31, 32, 33, 257] {
            for len in [64usize, 128, 1518, 9000] {
                let frames = frames(n, len);
                let config = ReplayConfig {
                    n_rxq: 1,
                    loops: Some(3),
                };
                let port = PcapReplay::new("r0", capture(&frames, 1), config).unwrap();
                let pool = Pool::new(PoolConfig {
                    n_small: 64,
                    n_jumbo: 64,
                });
                let got = drain_all(&port, 0, &pool);
                let want: Vec<Vec<u8>> = frames.iter().cycle().take(3 * n).cloned().collect();
                assert_eq!(got, want, "n = {n}, len = {len}");
                assert_eq!(port.passes(0), 3);
                assert!(port.is_done(0));
                let s = port.rxq_stats(0);
                assert_eq!(
                    (s.rx_packets, s.rx_bytes),
                    (3 * n as u64, (3 * n * len) as u64)
                );
                assert_eq!(s.drops.total(), 0);
            }
        }
    }

    #[test]
    fn recv_infinite_fills_every_batch() {
        let port =
            PcapReplay::new("r0", capture(&frames(5, 60), 1), ReplayConfig::default()).unwrap();
        let pool = Pool::default();
        let mut batch = Batch::new();
        for _ in 0..100 {
            assert_eq!(port.recv(0, &pool, &mut batch), BATCH_SIZE);
            batch.clear();
        }
        assert_eq!(port.passes(0), 100 * 32 / 5);
        assert!(!port.is_done(0));
        assert_eq!(pool.in_use(BufClass::Small), 0);
    }

    #[test]
    fn recv_queues_start_staggered() {
        let frames = frames(8, 60);
        let config = ReplayConfig {
            n_rxq: 4,
            loops: Some(1),
        };
        let port = PcapReplay::new("r0", capture(&frames, 1), config).unwrap();
        let pool = Pool::default();
        for q in 0..4 {
            let got = drain_all(&port, q, &pool);
            let want: Vec<Vec<u8>> = frames.iter().cycle().skip(2 * q).take(8).cloned().collect();
            assert_eq!(got, want, "q = {q}");
            assert_eq!(port.rxq_stats(q).rx_packets, 8);
        }
        assert_eq!(port.stats().rx_packets, 32);
        let mut batch = Batch::new();
        assert_eq!(port.recv(4, &pool, &mut batch), 0);
    }

    #[test]
    fn recv_pool_exhausted_counts_drop_no_buffer_and_moves_on() {
        let port =
            PcapReplay::new("r0", capture(&frames(40, 60), 1), ReplayConfig::default()).unwrap();
        let pool = Pool::new(PoolConfig {
            n_small: 10,
            n_jumbo: 0,
        });
        let mut batch = Batch::new();
        assert_eq!(port.recv(0, &pool, &mut batch), 10);
        let s = port.rxq_stats(0);
        assert_eq!(s.rx_packets, 10);
        assert_eq!(s.drop_count(DropReason::NoBuffer), 22);
        // The next burst, with buffers back, starts after the dropped frames.
        batch.clear();
        assert_eq!(port.recv(0, &pool, &mut batch), 10);
        assert_eq!(batch.packets()[0].data(), &frames(40, 60)[32][..]);
    }

    #[test]
    fn recv_oversize_frame_counts_drop_too_long() {
        let mut fs = frames(2, 60);
        fs.push(vec![0; MAX_FRAME_LEN + 1]);
        let config = ReplayConfig {
            n_rxq: 1,
            loops: Some(2),
        };
        let port = PcapReplay::new("r0", capture(&fs, 1), config).unwrap();
        let got = drain_all(&port, 0, &Pool::default());
        assert_eq!(got.len(), 4);
        assert_eq!(port.rxq_stats(0).drop_count(DropReason::TooLong), 2);
    }

    #[test]
    fn send_counts_drop_tx_unsupported() {
        let port =
            PcapReplay::new("r0", capture(&frames(3, 60), 1), ReplayConfig::default()).unwrap();
        let pool = Pool::default();
        let mut batch = Batch::new();
        port.recv(0, &pool, &mut batch);
        port.send(0, &mut batch);
        assert!(batch.is_empty());
        assert_eq!(port.txq_stats(0).drop_count(DropReason::TxUnsupported), 32);
        assert_eq!(port.stats().tx_packets, 0);
        assert_eq!(pool.in_use(BufClass::Small), 0);
    }

    #[test]
    fn new_empty_capture_is_error() {
        let err = PcapReplay::new("r0", capture(&[], 1), ReplayConfig::default()).unwrap_err();
        assert!(matches!(err, NetdevError::EmptyCapture { .. }));
        assert!(err.to_string().contains("r0"));
    }

    #[test]
    fn new_non_ethernet_capture_is_error() {
        let err = PcapReplay::new("r0", capture(&frames(1, 60), 101), ReplayConfig::default())
            .unwrap_err();
        assert!(matches!(err, NetdevError::LinkType { link_type: 101, .. }));
    }

    #[test]
    fn open_malformed_file_is_error() {
        let dir = std::env::temp_dir().join(format!("ferrovs-replay-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bad.pcap");
        std::fs::write(&path, b"this is not a pcap file at all").unwrap();
        let err = PcapReplay::open("r0", &path, ReplayConfig::default()).unwrap_err();
        assert!(matches!(err, NetdevError::Pcap(_)), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn new_zero_loops_receives_nothing() {
        let config = ReplayConfig {
            n_rxq: 1,
            loops: Some(0),
        };
        let port = PcapReplay::new("r0", capture(&frames(3, 60), 1), config).unwrap();
        assert!(drain_all(&port, 0, &Pool::default()).is_empty());
    }
}
