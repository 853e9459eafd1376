//! Policies of the cached datapath that only a port sees: a PMD groups a batch's outputs per
//! tx port and hands each port one batch per received batch (style.md § 5, "grouped per flow
//! or per output and emitted once"), whether the packets come through an upcall or the caches,
//! go to one port or to several interleaved, or are copied to several ports.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use datapath::netdev::memory::MemoryNetdev;
use datapath::netdev::Netdev;
use datapath::ofproto::OfDatapath;
use datapath::{Batch, DpPort, Pmd, PmdConfig, Pool, QueueStats, BATCH_SIZE};
use packet::builder::PacketBuilder;
use pipeline::switch::Switch;

/// A memory port that counts the calls to [`Netdev::send`] (the flushes of a tx batch).
#[derive(Debug)]
struct CountingNetdev {
    inner: MemoryNetdev,
    n_sends: AtomicUsize,
}

impl CountingNetdev {
    fn new(name: &str) -> CountingNetdev {
        CountingNetdev {
            inner: MemoryNetdev::new(name, common::queues(1, 1)),
            n_sends: AtomicUsize::new(0),
        }
    }

    fn n_sends(&self) -> usize {
        self.n_sends.load(Ordering::Relaxed)
    }
}

impl Netdev for CountingNetdev {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn kind(&self) -> &'static str {
        "counting"
    }

    fn n_rxq(&self) -> usize {
        self.inner.n_rxq()
    }

    fn n_txq(&self) -> usize {
        self.inner.n_txq()
    }

    fn recv(&self, q: usize, pool: &Pool, batch: &mut Batch) -> usize {
        self.inner.recv(q, pool, batch)
    }

    fn send(&self, q: usize, batch: &mut Batch) {
        self.n_sends.fetch_add(1, Ordering::Relaxed);
        self.inner.send(q, batch);
    }

    fn rxq_stats(&self, q: usize) -> QueueStats {
        self.inner.rxq_stats(q)
    }

    fn txq_stats(&self, q: usize) -> QueueStats {
        self.inner.txq_stats(q)
    }
}

/// UDP from `10.0.0.0 + src` to port `dport`, 64 bytes on the wire.
fn udp(src: u32, dport: u16) -> Vec<u8> {
    PacketBuilder::ethernet([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4((0x0a00_0000 + src).to_be_bytes(), [10, 0, 0, 2])
        .udp(1000, dport)
        .payload(&[0x5a; 18])
        .build()
}

/// Bridge `br0` with counting ports `p1`, `p2` and `p3`, `flows` loaded, and one PMD.
fn rig(flows: &[&str]) -> (Pmd, [Arc<CountingNetdev>; 3]) {
    let mut sw = Switch::new();
    sw.vsctl("add-br br0 -- add-port br0 p1 -- add-port br0 p2 -- add-port br0 p3")
        .expect("valid");
    let numbers = ["p1", "p2", "p3"].map(|n| common::dp_port(&sw, n));
    let of = OfDatapath::new(sw);
    of.add_flows_text("br0", flows).expect("valid flows");
    let ports = ["p1", "p2", "p3"].map(|n| Arc::new(CountingNetdev::new(n)));
    for (dp_port, nd) in numbers.into_iter().zip(&ports) {
        of.datapath().add_port(DpPort {
            dp_port,
            netdev: nd.clone(),
            vlan_limit: 1,
        });
    }
    let pmd = Pmd::new(of.datapath().clone(), 0, 1, PmdConfig::default());
    (pmd, ports)
}

const RULES: [&str; 3] = [
    "in_port=p1,udp,tp_dst=1,actions=output:p2",
    "in_port=p1,udp,tp_dst=2,actions=output:p3",
    "in_port=p1,udp,tp_dst=3,actions=output:p2,output:p3",
];

/// Receives one batch of `frames` (at most [`BATCH_SIZE`]) on `p1` and returns the sends on
/// `p2` and `p3` it caused and the frames each transmitted.
fn one_batch(
    pmd: &mut Pmd,
    ports: &[Arc<CountingNetdev>; 3],
    frames: &[Vec<u8>],
) -> [(usize, Vec<Vec<u8>>); 2] {
    assert!(frames.len() <= BATCH_SIZE);
    for f in frames {
        assert!(ports[0].inner.inject(0, f));
    }
    let before = [ports[1].n_sends(), ports[2].n_sends()];
    assert_eq!(pmd.run_once(), frames.len());
    assert_eq!(ports[0].inner.rx_pending(0), 0);
    [1, 2].map(|i| {
        (
            ports[i].n_sends() - before[i - 1],
            ports[i].inner.take_all_tx(),
        )
    })
}

#[test]
fn interleaved_outputs_are_flushed_once_per_tx_port_per_batch() {
    let (mut pmd, ports) = rig(&RULES);
    // Batch 0 misses (32 upcalls), the next ones hit the megaflows: either way each port
    // gets its 16 packets, in order, in one send.
    for round in 0..4u32 {
        let frames: Vec<Vec<u8>> = (0..32u32)
            .map(|i| udp(round * 32 + i, if i % 2 == 0 { 1 } else { 2 }))
            .collect();
        let [(sends2, out2), (sends3, out3)] = one_batch(&mut pmd, &ports, &frames);
        assert_eq!((sends2, sends3), (1, 1), "round {round}");
        let evens: Vec<Vec<u8>> = frames.iter().step_by(2).cloned().collect();
        let odds: Vec<Vec<u8>> = frames.iter().skip(1).step_by(2).cloned().collect();
        assert_eq!(out2, evens, "round {round}");
        assert_eq!(out3, odds, "round {round}");
    }
    let s = pmd.stats();
    assert_eq!((s.upcalls, s.packets, s.drops.total()), (2, 128, 0));
    assert_eq!(ports[0].n_sends(), 0);
}

#[test]
fn copies_and_single_port_batches_are_flushed_once_per_tx_port_per_batch() {
    let (mut pmd, ports) = rig(&RULES);
    for round in 0..3u32 {
        // Every packet copied to both ports.
        let frames: Vec<Vec<u8>> = (0..32u32).map(|i| udp(round * 32 + i, 3)).collect();
        let [(sends2, out2), (sends3, out3)] = one_batch(&mut pmd, &ports, &frames);
        assert_eq!((sends2, sends3), (1, 1), "round {round}");
        assert_eq!((out2, out3), (frames.clone(), frames), "round {round}");
        // Every packet to one port (the batch is handed over whole once cached).
        let frames: Vec<Vec<u8>> = (0..32u32).map(|i| udp(round * 32 + i, 1)).collect();
        let [(sends2, out2), (sends3, out3)] = one_batch(&mut pmd, &ports, &frames);
        assert_eq!((sends2, sends3), (1, 0), "round {round}");
        assert_eq!(out2, frames, "round {round}");
        assert!(out3.is_empty());
        // A batch of one.
        let [(sends2, _), (sends3, out3)] = one_batch(&mut pmd, &ports, &[udp(round, 2)]);
        assert_eq!((sends2, sends3, out3.len()), (0, 1, 1), "round {round}");
    }
}
