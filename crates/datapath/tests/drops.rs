//! Every [`DropReason`] is counted: for each reason, a scenario that must produce exactly
//! that drop, and an assertion on the counter delta of every reason (style.md § 7, "Counter
//! assertions"). The `match` is exhaustive, so a new reason does not compile until it has a
//! scenario here.

use datapath::buffer::MAX_FRAME_LEN;
use datapath::flows::flows_pcap;
use datapath::netdev::memory::{MemoryConfig, MemoryNetdev};
use datapath::netdev::pcap_replay::{PcapReplay, ReplayConfig};
use datapath::netdev::Netdev;
use datapath::pcap::Capture;
use datapath::{Batch, DropReason, Pool, PoolConfig, QueueStats};

/// Runs `scenario` and asserts that `reason`'s counter (summed over `port`'s queues) moved
/// by `expected` and no other drop counter moved.
fn assert_drop_delta(
    port: &dyn Netdev,
    reason: DropReason,
    expected: u64,
    scenario: impl FnOnce(),
) {
    let before: QueueStats = port.stats();
    scenario();
    let after = port.stats();
    for r in DropReason::ALL {
        let delta = after.drop_count(r) - before.drop_count(r);
        let want = if r == reason { expected } else { 0 };
        assert_eq!(
            delta,
            want,
            "{} while testing {}",
            r.counter_name(),
            reason.counter_name()
        );
    }
}

fn small_port() -> MemoryNetdev {
    MemoryNetdev::new(
        "m0",
        MemoryConfig {
            n_rxq: 1,
            n_txq: 1,
            rxq_len: 4,
            txq_len: 4,
        },
    )
}

#[test]
fn drop_reason_every_reason_moves_its_counter() {
    for reason in DropReason::ALL {
        match reason {
            DropReason::NoBuffer => {
                let port = small_port();
                let pool = Pool::new(PoolConfig {
                    n_small: 1,
                    n_jumbo: 0,
                });
                let mut batch = Batch::new();
                assert_drop_delta(&port, reason, 2, || {
                    for _ in 0..3 {
                        port.inject(0, &[0; 60]);
                    }
                    assert_eq!(port.recv(0, &pool, &mut batch), 1);
                });
            }
            DropReason::TooLong => {
                let port = small_port();
                let pool = Pool::default();
                let mut batch = Batch::new();
                assert_drop_delta(&port, reason, 1, || {
                    port.inject(0, &vec![0; MAX_FRAME_LEN + 1]);
                    assert_eq!(port.recv(0, &pool, &mut batch), 0);
                });
            }
            DropReason::RxQueueFull => {
                let port = small_port();
                assert_drop_delta(&port, reason, 3, || {
                    for _ in 0..7 {
                        port.inject(0, &[0; 60]);
                    }
                });
            }
            DropReason::TxQueueFull => {
                let port = small_port();
                let pool = Pool::default();
                let mut batch = Batch::new();
                assert_drop_delta(&port, reason, 6, || {
                    for _ in 0..10 {
                        batch.push(pool.alloc_copy(&[0; 60]).unwrap()).unwrap();
                    }
                    port.send(0, &mut batch);
                    assert!(batch.is_empty());
                });
            }
            DropReason::TxUnsupported => {
                let capture = Capture::parse(&flows_pcap(4, 64)).unwrap();
                let port = PcapReplay::new("r0", capture, ReplayConfig::default()).unwrap();
                let pool = Pool::default();
                let mut batch = Batch::new();
                port.recv(0, &pool, &mut batch);
                assert_drop_delta(&port, reason, 32, || port.send(0, &mut batch));
            }
            // The PMD's reasons (caches, upcalls, actions): tests/cached.rs.
            DropReason::UpcallLimit
            | DropReason::UpcallBusy
            | DropReason::UpcallFailed
            | DropReason::FlowDrop
            | DropReason::NoPort
            | DropReason::Userspace
            | DropReason::Unsupported
            | DropReason::HeaderRewrite => {}
        }
    }
}
