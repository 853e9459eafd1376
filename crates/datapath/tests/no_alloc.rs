//! Steady state allocates nothing: replay → null and memory rx/tx loops, counted with a
//! global allocator that counts allocations made by this test's thread.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use datapath::flows::flows_pcap;
use datapath::netdev::null::NullNetdev;
use datapath::netdev::pcap_replay::{PcapReplay, ReplayConfig};
use datapath::netdev::Netdev;
use datapath::pcap::Capture;
use datapath::{Batch, Pool, PoolConfig};

/// Counts allocations per thread, so the test harness's other threads do not interfere.
struct Counting;

thread_local! {
    static N_ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every method forwards to the system allocator with the caller's arguments, so
// `System`'s guarantees carry over; the counter is a thread-local `Cell` that never
// allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = N_ALLOCS.try_with(|n| n.set(n.get() + 1));
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's; `ptr` came from `System.alloc`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = N_ALLOCS.try_with(|n| n.set(n.get() + 1));
        // SAFETY: same contract as the caller's; `ptr` came from `System.alloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocs() -> u64 {
    N_ALLOCS.with(Cell::get)
}

#[test]
fn replay_to_null_steady_state_allocates_nothing() {
    for wire_len in [64, 1518, 9004] {
        let capture = Capture::parse(&flows_pcap(100, wire_len)).unwrap();
        let rx = PcapReplay::new("p0", capture, ReplayConfig::default()).unwrap();
        let sink = NullNetdev::new("p1", 1);
        let pool = Pool::new(PoolConfig {
            n_small: 64,
            n_jumbo: 64,
        });
        let mut batch = Batch::new();
        rx.recv(0, &pool, &mut batch);
        sink.send(0, &mut batch);
        let before = allocs();
        for _ in 0..1000 {
            rx.recv(0, &pool, &mut batch);
            sink.send(0, &mut batch);
        }
        assert_eq!(allocs() - before, 0, "wire_len = {wire_len}");
        assert_eq!(sink.stats().tx_packets, 1001 * 32);
    }
}

#[test]
fn pool_exhaustion_steady_state_allocates_nothing() {
    let capture = Capture::parse(&flows_pcap(10, 64)).unwrap();
    let rx = PcapReplay::new("p0", capture, ReplayConfig::default()).unwrap();
    let pool = Pool::new(PoolConfig {
        n_small: 8,
        n_jumbo: 0,
    });
    let mut held = Batch::new();
    rx.recv(0, &pool, &mut held);
    let mut batch = Batch::new();
    let before = allocs();
    for _ in 0..100 {
        rx.recv(0, &pool, &mut batch);
    }
    assert_eq!(allocs() - before, 0);
    assert_eq!(
        rx.stats().drop_count(datapath::DropReason::NoBuffer),
        24 + 100 * 32
    );
}

#[test]
fn pmd_steady_state_allocates_nothing() {
    use std::sync::Arc;

    use datapath::ofproto::OfDatapath;
    use datapath::{DpPort, Pmd, PmdConfig};
    use pipeline::switch::Switch;

    let mut sw = Switch::new();
    sw.vsctl("add-br br0 -- add-port br0 p0 -- add-port br0 p1 -- add-port br0 p2")
        .unwrap();
    let [p0, p1, p2] = ["p0", "p1", "p2"].map(|n| common::dp_port(&sw, n));
    let of = OfDatapath::new(sw);
    // Single outputs (whole-batch handoff), a rewrite and a copy to two ports.
    of.add_flows_text(
        "br0",
        &[
            "priority=10,udp,tp_src=1024,actions=output:p1",
            "priority=9,udp,tp_src=1025,actions=mod_nw_ttl:9,output:p1,output:p2",
            "priority=1,actions=output:p2",
        ],
    )
    .unwrap();
    let capture = Capture::parse(&flows_pcap(100, 64)).unwrap();
    let rx = Arc::new(PcapReplay::new("p0", capture, ReplayConfig::default()).unwrap());
    let (s1, s2) = (
        Arc::new(NullNetdev::new("p1", 1)),
        Arc::new(NullNetdev::new("p2", 1)),
    );
    for (n, d) in [
        (p0, rx as Arc<dyn Netdev>),
        (p1, s1.clone()),
        (p2, s2.clone()),
    ] {
        of.datapath().add_port(DpPort {
            dp_port: n,
            netdev: d,
            vlan_limit: 1,
        });
    }
    let mut pmd = Pmd::new(of.datapath().clone(), 0, 1, PmdConfig::default());
    // Warm up: every megaflow installed, every buffer and vector at its size.
    for _ in 0..200 {
        pmd.run_once();
    }
    let before = allocs();
    for _ in 0..2000 {
        pmd.run_once();
    }
    assert_eq!(allocs() - before, 0);
    assert!(s1.stats().tx_packets > 0 && s2.stats().tx_packets > 0);
    assert_eq!(pmd.stats().drops.total(), 0);
}
