//! The replay→null ceiling: `pcap-replay` rx (a copy of each frame into a pool buffer)
//! straight into the `null` sink, batches of 32, one thread; no switching. Every switch
//! figure of `ferrovs-bench datapath` is read against this.
//!
//! Points: 64 B and 1518 B frames (60 and 1514 bytes in memory) over 1K flows, and 64 B
//! over 256K flows (a source larger than L2). Throughput is in packets (elements).
//!
//! Also `pool/alloc-copy-free`: the buffer pool alone (a 60-byte copy into a pool buffer,
//! appended to a batch, the batch dropped), the share of the ceiling that is buffer
//! management.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use datapath::flows::flows_pcap;
use datapath::netdev::null::NullNetdev;
use datapath::netdev::pcap_replay::{PcapReplay, ReplayConfig};
use datapath::netdev::Netdev;
use datapath::pcap::Capture;
use datapath::{Batch, Pool, BATCH_SIZE};

/// Batches per criterion iteration.
const BATCHES: usize = 64;

fn replay_null(c: &mut Criterion) {
    let mut group = c.benchmark_group("replay-null");
    group.throughput(Throughput::Elements((BATCHES * BATCH_SIZE) as u64));
    for (wire_len, n_flows) in [(64usize, 1_000u32), (1518, 1_000), (64, 256_000)] {
        let capture = Capture::parse(&flows_pcap(n_flows, wire_len)).expect("generated pcap");
        let rx = PcapReplay::new("p0", capture, ReplayConfig::default()).expect("Ethernet");
        let sink = NullNetdev::new("p1", 1);
        let pool = Pool::default();
        let mut batch = Batch::new();
        let id = BenchmarkId::from_parameter(format!("{wire_len}B-{n_flows}flows"));
        group.bench_function(id, |b| {
            b.iter(|| {
                for _ in 0..BATCHES {
                    black_box(rx.recv(0, &pool, &mut batch));
                    sink.send(0, &mut batch);
                }
            })
        });
        assert_eq!(sink.stats().drops.total() + rx.stats().drops.total(), 0);
    }
    group.finish();
}

fn pool(c: &mut Criterion) {
    let mut group = c.benchmark_group("pool");
    group.throughput(Throughput::Elements((BATCHES * BATCH_SIZE) as u64));
    let pool = Pool::default();
    let mut batch = Batch::new();
    let frame = [0x5au8; 60];
    group.bench_function("alloc-copy-free", |b| {
        b.iter(|| {
            for _ in 0..BATCHES {
                while !batch.is_full() {
                    let pkt = pool.alloc_copy(black_box(&frame)).expect("free buffers");
                    // The batch has room: checked by the loop condition.
                    let _ = batch.push(pkt);
                }
                batch.clear();
            }
        })
    });
    group.finish();
}

criterion_group!(benches, replay_null, pool);
criterion_main!(benches);
