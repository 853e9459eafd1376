//! Steady state allocates nothing: replay → null and memory rx/tx loops, counted with a
//! global allocator that counts allocations made by this test's thread.

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
