//! Replay → null end to end: exact per-flow accounting, and several threads sharing ports
//! (each with its own pool, rx queue and tx queue).

use std::sync::Arc;

use datapath::flows::{flow_index, flows_pcap};
use datapath::netdev::null::{five_tuple_classifier, FlowClassifier, NullNetdev};
use datapath::netdev::pcap_replay::{PcapReplay, ReplayConfig};
use datapath::netdev::Netdev;
use datapath::pcap::Capture;
use datapath::{Batch, Packet, Pool, BATCH_SIZE};

fn by_flow_index() -> FlowClassifier {
    Arc::new(|p: &Packet| flow_index(p.data()).map(u64::from))
}

#[test]
fn replay_null_loops_count_every_flow_exactly() {
    for (n_flows, wire_len) in [
        (1u32, 64usize),
        (31, 128),
        (33, 1518),
        (257, 64),
        (100, 9004),
    ] {
        let capture = Capture::parse(&flows_pcap(n_flows, wire_len)).unwrap();
        let config = ReplayConfig {
            n_rxq: 1,
            loops: Some(5),
        };
        let rx = PcapReplay::new("p0", capture, config).unwrap();
        let sink = NullNetdev::new("p1", 1).with_flow_classifier(by_flow_index());
        let pool = Pool::default();
        let mut batch = Batch::new();
        while rx.recv(0, &pool, &mut batch) > 0 {
            sink.send(0, &mut batch);
        }
        let counts = sink.flow_counts();
        assert_eq!(counts.flows.len(), n_flows as usize);
        let frame_len = (wire_len - 4) as u64;
        for i in 0..n_flows {
            let c = counts.flows[&u64::from(i)];
            assert_eq!((c.packets, c.bytes), (5, 5 * frame_len), "flow {i}");
        }
        assert_eq!(counts.unclassified.packets, 0);
        assert_eq!(sink.stats().tx_packets, 5 * u64::from(n_flows));
        assert_eq!(rx.stats().drops.total() + sink.stats().drops.total(), 0);
    }
}

#[test]
fn replay_null_five_tuple_sees_every_flow() {
    let capture = Capture::parse(&flows_pcap(1000, 64)).unwrap();
    let rx = PcapReplay::new(
        "p0",
        capture,
        ReplayConfig {
            n_rxq: 1,
            loops: Some(2),
        },
    )
    .unwrap();
    let sink = NullNetdev::new("p1", 1).with_flow_classifier(five_tuple_classifier());
    let pool = Pool::default();
    let mut batch = Batch::new();
    while rx.recv(0, &pool, &mut batch) > 0 {
        sink.send(0, &mut batch);
    }
    let counts = sink.flow_counts();
    assert_eq!(counts.flows.len(), 1000);
    assert!(counts.flows.values().all(|c| c.packets == 2));
}

#[test]
fn replay_null_threads_share_ports_by_queue() {
    const THREADS: usize = 2;
    const BATCHES: usize = 200;
    let capture = Capture::parse(&flows_pcap(64, 64)).unwrap();
    let config = ReplayConfig {
        n_rxq: THREADS,
        loops: None,
    };
    let rx: Arc<dyn Netdev> = Arc::new(PcapReplay::new("p0", capture, config).unwrap());
    let sink = Arc::new(NullNetdev::new("p1", THREADS).with_flow_classifier(by_flow_index()));
    let handles: Vec<_> = (0..THREADS)
        .map(|q| {
            let rx = Arc::clone(&rx);
            let sink = Arc::clone(&sink);
            std::thread::spawn(move || {
                let pool = Pool::default();
                let mut batch = Batch::new();
                for _ in 0..BATCHES {
                    assert_eq!(rx.recv(q, &pool, &mut batch), BATCH_SIZE);
                    assert!(batch.iter().all(|p| usize::from(p.meta().rx_queue) == q));
                    sink.send(q, &mut batch);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let total = (THREADS * BATCHES * BATCH_SIZE) as u64;
    for q in 0..THREADS {
        assert_eq!(rx.rxq_stats(q).rx_packets, total / THREADS as u64);
        assert_eq!(sink.txq_stats(q).tx_packets, total / THREADS as u64);
    }
    // 64 flows, 200 * 32 packets per queue: every flow exactly 100 times per queue.
    let counts = sink.flow_counts();
    assert_eq!(counts.flows.len(), 64);
    assert!(counts.flows.values().all(|c| c.packets == 200));
}
