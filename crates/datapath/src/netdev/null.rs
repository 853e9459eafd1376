//! `null`: a sink that counts what it is sent and frees the buffers (DPDK `net_null` with
//! `no-rx=1`).
//!
//! It has no rx queue. Besides the usual per-queue counters it can count per flow, keyed by
//! a [`FlowClassifier`]: a caller-supplied function from a packet to a flow id, or
//! [`five_tuple_classifier`], a 64-bit hash of the IP 5-tuple. Benchmarks use the per-flow
//! counts to assert that no packet of an established flow was dropped or misdirected while
//! the tables changed. Counting per flow costs a hash-map update per packet; without a
//! classifier the sink only adds to four counters per batch.
//!
//! Config keys: `n_txq`, and in code the optional flow classifier. Maturity: stable.
//!
//! # Example
//!
//! ```
//! use datapath::batch::Batch;
//! use datapath::netdev::null::{five_tuple_classifier, NullNetdev};
//! use datapath::netdev::Netdev;
//! use datapath::pool::Pool;
//!
//! let pool = Pool::default();
//! let sink = NullNetdev::new("sink", 1).with_flow_classifier(five_tuple_classifier());
//! let mut batch = Batch::new();
//! batch.push(pool.alloc_copy(&[0; 60]).expect("free buffer")).expect("room");
//! sink.send(0, &mut batch);
//! let flows = sink.flow_counts();
//! assert_eq!(flows.unclassified.packets, 1); // not an IP packet
//! ```

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use super::{Netdev, QueueCell};
use crate::batch::Batch;
use crate::buffer::Packet;
use crate::pool::Pool;
use crate::stats::QueueStats;

/// Maps a packet to a flow id, or `None` for a packet that belongs to no flow.
pub type FlowClassifier = Arc<dyn Fn(&Packet) -> Option<u64> + Send + Sync>;

/// Packets and bytes of one flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlowCount {
    /// Packets.
    pub packets: u64,
    /// Bytes.
    pub bytes: u64,
}

impl FlowCount {
    #[inline]
    fn add(&mut self, len: usize) {
        self.packets += 1;
        self.bytes += len as u64;
    }

    fn merge(&mut self, other: &FlowCount) {
        self.packets += other.packets;
        self.bytes += other.bytes;
    }
}

/// Per-flow counts of a [`NullNetdev`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FlowCounts {
    /// Counts by flow id.
    pub flows: HashMap<u64, FlowCount>,
    /// Packets the classifier gave no flow id.
    pub unclassified: FlowCount,
}

impl FlowCounts {
    fn merge(&mut self, other: &FlowCounts) {
        for (id, c) in &other.flows {
            self.flows.entry(*id).or_default().merge(c);
        }
        self.unclassified.merge(&other.unclassified);
    }
}

#[derive(Debug, Default)]
struct SinkQueue {
    stats: QueueStats,
    flows: FlowCounts,
}

/// A counting sink.
pub struct NullNetdev {
    name: String,
    txqs: Vec<QueueCell<SinkQueue>>,
    classifier: Option<FlowClassifier>,
}

impl NullNetdev {
    /// A sink with `n_txq` tx queues (at least 1) that counts per queue only.
    pub fn new(name: impl Into<String>, n_txq: usize) -> NullNetdev {
        NullNetdev {
            name: name.into(),
            txqs: (0..n_txq.max(1)).map(|_| QueueCell::default()).collect(),
            classifier: None,
        }
    }

    /// Also counts per flow, keyed by `classifier`.
    pub fn with_flow_classifier(mut self, classifier: FlowClassifier) -> NullNetdev {
        self.classifier = Some(classifier);
        self
    }

    /// Per-flow counts summed over the tx queues (empty without a classifier).
    pub fn flow_counts(&self) -> FlowCounts {
        let mut total = FlowCounts::default();
        for cell in &self.txqs {
            total.merge(&cell.lock().flows);
        }
        total
    }

    /// Clears the per-flow counts (the per-queue counters keep counting).
    pub fn clear_flow_counts(&self) {
        for cell in &self.txqs {
            cell.lock().flows = FlowCounts::default();
        }
    }
}

impl fmt::Debug for NullNetdev {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NullNetdev")
            .field("name", &self.name)
            .field("n_txq", &self.txqs.len())
            .field("per_flow", &self.classifier.is_some())
            .finish()
    }
}

impl Netdev for NullNetdev {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> &'static str {
        "null"
    }

    fn n_rxq(&self) -> usize {
        0
    }

    fn n_txq(&self) -> usize {
        self.txqs.len()
    }

    fn recv(&self, _q: usize, _pool: &Pool, _batch: &mut Batch) -> usize {
        0
    }

    fn send(&self, q: usize, batch: &mut Batch) {
        let mut queue = self.txqs[q % self.txqs.len()].lock();
        let queue = &mut *queue;
        match &self.classifier {
            None => {
                let n_bytes = batch.n_bytes();
                queue.stats.tx_packets += batch.len() as u64;
                queue.stats.tx_bytes += n_bytes as u64;
                batch.clear();
            }
            Some(classify) => {
                for pkt in batch.drain() {
                    queue.stats.count_tx(pkt.len());
                    match classify(&pkt) {
                        Some(id) => queue.flows.flows.entry(id).or_default().add(pkt.len()),
                        None => queue.flows.unclassified.add(pkt.len()),
                    }
                }
            }
        }
    }

    fn rxq_stats(&self, _q: usize) -> QueueStats {
        QueueStats::default()
    }

    fn txq_stats(&self, q: usize) -> QueueStats {
        self.txqs.get(q).map(|c| c.lock().stats).unwrap_or_default()
    }
}

/// The IP 5-tuple of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FiveTuple {
    /// Source address (an IPv4 address in the low 32 bits).
    pub src: u128,
    /// Destination address.
    pub dst: u128,
    /// IP protocol.
    pub proto: u8,
    /// Source port (0 if the protocol has none or it was not captured).
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
}

impl FiveTuple {
    /// Parses Ethernet, up to two VLAN tags (802.1Q, 802.1ad), IPv4 or IPv6 (without
    /// walking extension headers), and the ports of TCP, UDP and SCTP. `None` for a frame
    /// that is not IP or is truncated before the addresses. Never panics.
    pub fn parse(frame: &[u8]) -> Option<FiveTuple> {
        let be16 = |at: usize| -> Option<u16> {
            Some(u16::from_be_bytes(frame.get(at..at + 2)?.try_into().ok()?))
        };
        let mut at = 12;
        let mut ethertype = be16(at)?;
        for _ in 0..2 {
            if ethertype == 0x8100 || ethertype == 0x88a8 {
                at += 4;
                ethertype = be16(at)?;
            }
        }
        let l3 = at + 2;
        let (src, dst, proto, l4, later_fragment) = match ethertype {
            0x0800 => {
                let h = frame.get(l3..l3 + 20)?;
                let ihl = usize::from(h[0] & 0x0f) * 4;
                let frag_offset = u16::from_be_bytes([h[6], h[7]]) & 0x1fff;
                let src = u32::from_be_bytes([h[12], h[13], h[14], h[15]]);
                let dst = u32::from_be_bytes([h[16], h[17], h[18], h[19]]);
                (
                    u128::from(src),
                    u128::from(dst),
                    h[9],
                    l3 + ihl,
                    frag_offset != 0,
                )
            }
            0x86dd => {
                let h = frame.get(l3..l3 + 40)?;
                let addr = |o: usize| -> Option<u128> {
                    Some(u128::from_be_bytes(h.get(o..o + 16)?.try_into().ok()?))
                };
                (addr(8)?, addr(24)?, h[6], l3 + 40, false)
            }
            _ => return None,
        };
        let (src_port, dst_port) = match proto {
            6 | 17 | 132 if !later_fragment => (be16(l4).unwrap_or(0), be16(l4 + 2).unwrap_or(0)),
            _ => (0, 0),
        };
        Some(FiveTuple {
            src,
            dst,
            proto,
            src_port,
            dst_port,
        })
    }

    /// A 64-bit hash of the tuple (SplitMix64 finalizer over its words): distinct flows of
    /// a benchmark collide with probability about n²/2⁶⁵.
    #[allow(clippy::cast_possible_truncation)] // Splitting the addresses into 64-bit halves.
    pub fn hash64(&self) -> u64 {
        fn mix(mut z: u64) -> u64 {
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        let ports = (u64::from(self.src_port) << 24)
            | (u64::from(self.dst_port) << 8)
            | u64::from(self.proto);
        [
            self.src as u64,
            (self.src >> 64) as u64,
            self.dst as u64,
            (self.dst >> 64) as u64,
            ports,
        ]
        .iter()
        .fold(0x9e37_79b9_7f4a_7c15, |h, w| mix(h ^ w))
    }
}

/// A classifier keyed by [`FiveTuple::hash64`]; non-IP frames are unclassified.
pub fn five_tuple_classifier() -> FlowClassifier {
    Arc::new(|pkt: &Packet| FiveTuple::parse(pkt.data()).map(|t| t.hash64()))
}

#[cfg(test)]
mod tests {
    use packet::builder::PacketBuilder;

    use super::*;
    use crate::buffer::BufClass;
    use crate::drop::DropReason;

    const A: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const B: [u8; 6] = [2, 0, 0, 0, 0, 2];

    fn udp4(sport: u16) -> Vec<u8> {
        PacketBuilder::ethernet(A, B)
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2])
            .udp(sport, 53)
            .payload(&[0; 18])
            .build()
    }

    #[test]
    fn send_counts_and_frees_every_packet() {
        let pool = Pool::default();
        let sink = NullNetdev::new("n0", 2);
        let mut batch = Batch::new();
        for len in [64, 128, 1518, 9000] {
            batch.push(pool.alloc_copy(&vec![0; len]).unwrap()).unwrap();
        }
        sink.send(1, &mut batch);
        assert!(batch.is_empty());
        let s = sink.txq_stats(1);
        assert_eq!((s.tx_packets, s.tx_bytes), (4, 64 + 128 + 1518 + 9000));
        assert_eq!(
            pool.in_use(BufClass::Small) + pool.in_use(BufClass::Jumbo),
            0
        );
        assert_eq!(sink.stats().tx_packets, 4);
        assert_eq!(sink.recv(0, &pool, &mut batch), 0);
        assert_eq!((sink.n_rxq(), sink.n_txq(), sink.kind()), (0, 2, "null"));
    }

    #[test]
    fn send_with_five_tuple_counts_per_flow() {
        let pool = Pool::default();
        let sink = NullNetdev::new("n0", 1).with_flow_classifier(five_tuple_classifier());
        let mut batch = Batch::new();
        for i in 0..30u16 {
            let f = udp4(1000 + i % 3);
            batch.push(pool.alloc_copy(&f).unwrap()).unwrap();
        }
        batch.push(pool.alloc_copy(&[0; 60]).unwrap()).unwrap();
        sink.send(0, &mut batch);
        let counts = sink.flow_counts();
        assert_eq!(counts.flows.len(), 3);
        assert!(counts.flows.values().all(|c| c.packets == 10));
        assert_eq!(counts.unclassified.packets, 1);
        let id = FiveTuple::parse(&udp4(1001)).unwrap().hash64();
        assert_eq!(counts.flows[&id].packets, 10);
        sink.clear_flow_counts();
        assert!(sink.flow_counts().flows.is_empty());
        assert_eq!(sink.stats().tx_packets, 31);
    }

    #[test]
    fn send_with_custom_classifier_uses_its_ids() {
        let pool = Pool::default();
        let by_first_byte: FlowClassifier =
            Arc::new(|p: &Packet| p.data().first().map(|b| u64::from(*b)));
        let sink = NullNetdev::new("n0", 1).with_flow_classifier(by_first_byte);
        let mut batch = Batch::new();
        for i in 0..4u8 {
            batch.push(pool.alloc_copy(&[i % 2; 60]).unwrap()).unwrap();
        }
        sink.send(0, &mut batch);
        let counts = sink.flow_counts();
        assert_eq!(
            counts.flows[&0],
            FlowCount {
                packets: 2,
                bytes: 120
            }
        );
        assert_eq!(counts.flows[&1].packets, 2);
    }

    #[test]
    fn five_tuple_parse_ipv4_vlan_ipv6_and_garbage() {
        let t = FiveTuple::parse(&udp4(7)).unwrap();
        assert_eq!(
            (t.src, t.dst, t.proto, t.src_port, t.dst_port),
            (0x0a00_0001, 0x0a00_0002, 17, 7, 53)
        );
        let tagged = PacketBuilder::ethernet(A, B)
            .vlan(10, 0)
            .vlan(20, 0)
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2])
            .tcp(80, 8080)
            .build();
        let t = FiveTuple::parse(&tagged).unwrap();
        assert_eq!((t.proto, t.src_port, t.dst_port), (6, 80, 8080));
        let v6 = PacketBuilder::ethernet(A, B)
            .ipv6([0xfe80, 0, 0, 0, 0, 0, 0, 1], [0xfe80, 0, 0, 0, 0, 0, 0, 2])
            .udp(1, 2)
            .build();
        let t = FiveTuple::parse(&v6).unwrap();
        assert_eq!((t.src & 0xffff, t.proto, t.src_port), (1, 17, 1));
        for cut in 0..udp4(7).len() {
            let _ = FiveTuple::parse(&udp4(7)[..cut]);
        }
        assert_eq!(FiveTuple::parse(&[0; 60]), None);
        let frag = PacketBuilder::ethernet(A, B)
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2])
            .fragment(10, false, false)
            .udp(1, 2)
            .build();
        assert_eq!(FiveTuple::parse(&frag).unwrap().src_port, 0);
    }

    #[test]
    fn hash64_differs_for_swapped_ports() {
        let a = FiveTuple::parse(&udp4(7)).unwrap();
        let mut b = a;
        std::mem::swap(&mut b.src_port, &mut b.dst_port);
        assert_ne!(a.hash64(), b.hash64());
    }

    #[test]
    fn send_never_counts_drops() {
        let pool = Pool::default();
        let sink = NullNetdev::new("n0", 1);
        let mut batch = Batch::new();
        batch.push(pool.alloc(10).unwrap()).unwrap();
        sink.send(0, &mut batch);
        assert!(DropReason::ALL
            .iter()
            .all(|r| sink.stats().drop_count(*r) == 0));
    }
}
