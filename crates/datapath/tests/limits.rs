//! The PMD's limits: the upcall budget of each ingress port (shared by its rx queues and the
//! PMDs polling them, refilled at its rate), the megaflow limit with idle expiry, and the
//! per-thread statistics (pinning, cycles per packet, copies that find no buffer).
//!
//! Time moves only when a test says so: the datapaths here run on a manual clock
//! ([`Datapath::with_manual_clock`]), and no test asserts a speed.

mod common;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use datapath::dpif::{AckTimeout, ACK_TIMEOUT};
use datapath::netdev::memory::MemoryNetdev;
use datapath::ofproto::{OfDatapath, OfDatapathError};
use datapath::{
    BufClass, Datapath, DpPort, DropReason, Netdev, Pmd, PmdConfig, PmdStats, PmdThreads,
    PoolConfig,
};
use packet::builder::PacketBuilder;
use pipeline::odp::DpAction;

/// Datapath port numbers of the rigs.
const A: u32 = 1;
const B: u32 = 2;
const OUT: u32 = 3;

/// A UDP frame from IPv4 source `src`.
fn udp(src: u32) -> Vec<u8> {
    PacketBuilder::ethernet([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4(src.to_be_bytes(), [10, 0, 0, 2])
        .udp(1000, 7)
        .payload(&[0x5a; 18])
        .build()
}

/// The IPv4 source of a frame `udp` built.
fn src_of(frame: &[u8]) -> u32 {
    u32::from_be_bytes([frame[26], frame[27], frame[28], frame[29]])
}

/// Ports A and B (with `n_rxq_a` and 1 rx queues) and OUT (2 tx queues, one per PMD of the
/// two-PMD tests), on a manual clock, translating with `actions`.
struct Rig {
    dp: Arc<Datapath>,
    a: Arc<MemoryNetdev>,
    b: Arc<MemoryNetdev>,
    out: Arc<MemoryNetdev>,
}

fn mem(name: &str, n_rxq: usize) -> Arc<MemoryNetdev> {
    Arc::new(MemoryNetdev::new(name, common::queues(n_rxq, 2)))
}

fn rig(actions: Vec<DpAction>, n_rxq_a: usize) -> Rig {
    let dp = Datapath::with_manual_clock(Arc::new(common::PerSource(actions)));
    let (a, b, out) = (mem("a", n_rxq_a), mem("b", 1), mem("out", 1));
    for (n, p) in [(A, &a), (B, &b), (OUT, &out)] {
        dp.add_port(DpPort {
            dp_port: n,
            netdev: p.clone(),
            vlan_limit: 1,
        });
    }
    Rig { dp, a, b, out }
}

fn budget_cfg(rate: u32, burst: u32) -> PmdConfig {
    PmdConfig {
        upcall_rate: rate,
        upcall_burst: burst,
        ..PmdConfig::default()
    }
}

/// Runs `pmds` until none of `ports`' rx queues holds a frame.
fn drain(pmds: &mut [&mut Pmd], ports: &[&MemoryNetdev]) {
    let pending = || {
        ports
            .iter()
            .map(|p| (0..4).map(|q| p.rx_pending(q)).sum::<usize>())
            .sum::<usize>()
    };
    while pending() > 0 {
        for pmd in pmds.iter_mut() {
            pmd.run_once();
        }
    }
}

/// Sends each of `srcs` once on queue `q` of `port` and runs `pmd` until it is all read.
fn send(pmd: &mut Pmd, port: &MemoryNetdev, q: usize, srcs: impl IntoIterator<Item = u32>) {
    for s in srcs {
        assert!(port.inject(q, &udp(s)));
    }
    drain(&mut [pmd], &[port]);
}

/// How many of the frames `out` transmitted came from each of `srcs`, summed.
fn count_from(sent: &[Vec<u8>], srcs: impl Fn(u32) -> bool) -> usize {
    sent.iter().filter(|f| srcs(src_of(f))).count()
}

#[test]
fn upcall_storm_on_one_port_spares_established_flows_and_other_ports() {
    let r = rig(vec![DpAction::Output(OUT)], 1);
    let mut pmd = Pmd::new(r.dp.clone(), 0, 1, budget_cfg(1000, 10));
    let budget_b = r.dp.upcall_budget(B, 1000, 10);
    // The established flow on A spends one of A's 10 tokens.
    send(&mut pmd, &r.a, 0, [1]);
    assert_eq!(pmd.stats().upcalls, 1);
    // A storm of 500 new sources on A, with the established flow's packets in between.
    let mut established = 1;
    for i in 0..500u32 {
        assert!(r.a.inject(0, &udp(1000 + i)));
        if i % 10 == 0 {
            assert!(r.a.inject(0, &udp(1)));
            established += 1;
        }
    }
    drain(&mut [&mut pmd], &[&r.a]);
    let s = pmd.stats();
    assert_eq!(s.upcalls, 10, "A's burst, then no more");
    assert_eq!(s.drops.get(DropReason::UpcallLimit), 500 - 9);
    assert_eq!(s.drops.total(), 500 - 9);
    assert_eq!(
        budget_b.tokens(),
        10,
        "A's storm spent nothing of B's budget"
    );
    // New flows on B get through: B's budget is its own.
    send(&mut pmd, &r.b, 0, 5000..5005);
    let s = pmd.stats();
    assert_eq!(s.upcalls, 15);
    assert_eq!(s.drops.total(), 500 - 9, "no drop on B");
    assert_eq!(budget_b.tokens(), 5);
    let sent = r.out.take_all_tx();
    assert_eq!(
        count_from(&sent, |s| s == 1),
        established,
        "every established packet"
    );
    assert_eq!(count_from(&sent, |s| (1000..1500).contains(&s)), 9);
    assert_eq!(count_from(&sent, |s| (5000..5005).contains(&s)), 5);
}

#[test]
fn upcall_budget_refills_at_its_rate_on_the_datapath_clock() {
    let r = rig(vec![DpAction::Output(OUT)], 1);
    // 500 upcalls a second: one every 2 ms.
    let mut pmd = Pmd::new(r.dp.clone(), 0, 1, budget_cfg(500, 4));
    let mut next = 0u32;
    let mut new_flows = |pmd: &mut Pmd, n: u32| {
        let before = pmd.stats().upcalls;
        send(pmd, &r.a, 0, next..next + n);
        next += n;
        pmd.stats().upcalls - before
    };
    assert_eq!(new_flows(&mut pmd, 10), 4, "the burst");
    assert_eq!(
        new_flows(&mut pmd, 3),
        0,
        "spent, and the clock stands still"
    );
    r.dp.advance_ms(1);
    pmd.housekeeping(false);
    assert_eq!(new_flows(&mut pmd, 3), 0, "half a token");
    r.dp.advance_ms(1);
    pmd.housekeeping(false);
    assert_eq!(new_flows(&mut pmd, 3), 1, "the halves add up to one");
    r.dp.advance_ms(6);
    pmd.housekeeping(false);
    assert_eq!(new_flows(&mut pmd, 5), 3);
    // A long pause refills up to the burst, no further.
    r.dp.advance_ms(60_000);
    pmd.housekeeping(false);
    assert_eq!(new_flows(&mut pmd, 10), 4);
    let s = pmd.stats();
    assert_eq!(s.upcalls, 12);
    assert_eq!(s.drops.get(DropReason::UpcallLimit), 34 - 12);
}

#[test]
fn a_port_with_several_rx_queues_has_one_budget() {
    // One PMD polling both of A's queues.
    let r = rig(vec![DpAction::Output(OUT)], 2);
    let mut pmd = Pmd::new(r.dp.clone(), 0, 1, budget_cfg(0, 10));
    for i in 0..50u32 {
        assert!(r.a.inject(0, &udp(i)));
        assert!(r.a.inject(1, &udp(100 + i)));
    }
    drain(&mut [&mut pmd], &[&r.a]);
    let s = pmd.stats();
    assert_eq!(s.upcalls, 10, "one budget for both queues");
    assert_eq!(s.drops.get(DropReason::UpcallLimit), 90);

    // Two PMDs, each polling one of A's queues (queue j of all ports goes to PMD j % 2).
    let r = rig(vec![DpAction::Output(OUT)], 2);
    let mut p0 = Pmd::new(r.dp.clone(), 0, 2, budget_cfg(0, 10));
    let mut p1 = Pmd::new(r.dp.clone(), 1, 2, budget_cfg(0, 10));
    for i in 0..8u32 {
        assert!(r.a.inject(0, &udp(i)));
        assert!(r.a.inject(1, &udp(100 + i)));
    }
    // PMD 0 reads its 8 first and spends 8 tokens: 2 are left for PMD 1.
    drain(&mut [&mut p0, &mut p1], &[&r.a]);
    let (s0, s1) = (p0.stats(), p1.stats());
    assert_eq!((s0.packets, s1.packets), (8, 8), "one queue each");
    assert_eq!((s0.upcalls, s1.upcalls), (8, 2), "from one budget");
    assert_eq!(s0.drops.get(DropReason::UpcallLimit), 0);
    assert_eq!(s1.drops.get(DropReason::UpcallLimit), 6);
    assert_eq!(r.out.take_all_tx().len(), 10);
}

#[test]
fn a_port_keeps_its_budget_until_the_configuration_changes() {
    let r = rig(vec![DpAction::Output(OUT)], 1);
    let b = r.dp.upcall_budget(A, 100, 10);
    assert!(b.try_take());
    assert!(
        Arc::ptr_eq(&b, &r.dp.upcall_budget(A, 100, 10)),
        "one per port"
    );
    assert!(!Arc::ptr_eq(&b, &r.dp.upcall_budget(B, 100, 10)));
    // PMDs started again with another rate: a new, full budget.
    let c = r.dp.upcall_budget(A, 200, 10);
    assert!(!Arc::ptr_eq(&b, &c));
    assert_eq!((c.rate(), c.tokens()), (200, 10));
    // A removed port's budget goes with it.
    assert!(r.dp.remove_port(A));
    assert!(!Arc::ptr_eq(&c, &r.dp.upcall_budget(A, 200, 10)));
}

#[test]
fn a_batch_of_one_new_flow_spends_one_upcall() {
    let r = rig(vec![DpAction::Output(OUT)], 1);
    // A single token: every packet after the first would be dropped if each spent one.
    let mut pmd = Pmd::new(r.dp.clone(), 0, 1, budget_cfg(0, 1));
    for _ in 0..32 {
        assert!(r.a.inject(0, &udp(7)));
    }
    assert_eq!(pmd.run_once(), 32, "one batch");
    let s = pmd.stats();
    assert_eq!(s.upcalls, 1);
    assert_eq!(
        s.megaflow_hits, 31,
        "the rest find the megaflow the first installed"
    );
    assert_eq!(s.drops.total(), 0);
    assert_eq!(r.dp.upcall_budget(A, 0, 1).tokens(), 0);
    assert_eq!(r.out.take_all_tx().len(), 32);
    // Two new flows interleaved in one batch: two upcalls.
    let r2 = rig(vec![DpAction::Output(OUT)], 1);
    let mut pmd = Pmd::new(r2.dp.clone(), 0, 1, budget_cfg(0, 2));
    for i in 0..32u32 {
        assert!(r2.a.inject(0, &udp(10 + i % 2)));
    }
    assert_eq!(pmd.run_once(), 32);
    let s = pmd.stats();
    assert_eq!((s.upcalls, s.megaflow_hits, s.drops.total()), (2, 30, 0));
    assert_eq!(r2.out.take_all_tx().len(), 32);
}

/// Settings for the megaflow-limit tests: a limit of `limit` megaflows, `max_idle_ms`, and a
/// budget of `burst` upcalls that never refills.
fn limit_cfg(limit: usize, max_idle_ms: u64, burst: u32) -> PmdConfig {
    PmdConfig {
        megaflow_limit: limit,
        max_idle_ms,
        ..budget_cfg(0, burst)
    }
}

/// The IPv4 sources of the PMD's megaflows, sorted.
fn megaflow_srcs(pmd: &Pmd) -> Vec<u32> {
    let mut v: Vec<u32> = pmd.megaflows().iter().map(|m| m.0.nw_src()).collect();
    v.sort_unstable();
    v
}

#[test]
fn at_the_megaflow_limit_established_flows_keep_hitting_and_new_ones_are_forwarded() {
    let r = rig(vec![DpAction::Output(OUT)], 1);
    let mut pmd = Pmd::new(r.dp.clone(), 0, 1, limit_cfg(4, 10_000, 40));
    send(&mut pmd, &r.a, 0, 1..=4);
    assert_eq!(megaflow_srcs(&pmd), [1, 2, 3, 4]);
    let base = pmd.stats();
    // Ten batches of the four established flows and three new ones, four packets each.
    for round in 0..10u32 {
        for _ in 0..4 {
            for s in (1..=4).chain((0..3).map(|x| 1000 + 3 * round + x)) {
                assert!(r.a.inject(0, &udp(s)));
            }
        }
        assert_eq!(pmd.run_once(), 28, "one batch");
    }
    let s = pmd.stats();
    assert_eq!(
        megaflow_srcs(&pmd),
        [1, 2, 3, 4],
        "nothing evicted, nothing added"
    );
    assert_eq!(
        (s.emc_hits + s.megaflow_hits) - (base.emc_hits + base.megaflow_hits),
        160,
        "every established packet hit its megaflow"
    );
    assert_eq!(s.upcalls - base.upcalls, 30, "one per new flow and batch");
    assert_eq!(s.megaflow_limit_hits, 120, "every new flow's packet");
    assert_eq!(s.drops.total(), 0);
    let sent = r.out.take_all_tx();
    assert_eq!(count_from(&sent, |s| (1..=4).contains(&s)), 4 + 160);
    assert_eq!(count_from(&sent, |s| s >= 1000), 120);

    // 6 tokens are left: of ten more new flows, six are forwarded and four dropped, while
    // the established flows still hit.
    let before = pmd.stats();
    send(&mut pmd, &r.a, 0, (1..=4).chain(2000..2010));
    let s = pmd.stats();
    assert_eq!(s.upcalls - before.upcalls, 6);
    assert_eq!(s.megaflow_limit_hits - before.megaflow_limit_hits, 6);
    assert_eq!(s.drops.get(DropReason::UpcallLimit), 4);
    assert_eq!(
        (s.emc_hits + s.megaflow_hits) - (before.emc_hits + before.megaflow_hits),
        4
    );
    let sent = r.out.take_all_tx();
    assert_eq!(count_from(&sent, |s| (1..=4).contains(&s)), 4);
    assert_eq!(count_from(&sent, |s| s >= 2000), 6);
    assert_eq!(megaflow_srcs(&pmd), [1, 2, 3, 4]);
}

#[test]
fn at_the_megaflow_limit_idle_megaflows_expire_and_new_flows_get_megaflows() {
    let r = rig(vec![DpAction::Output(OUT)], 1);
    let mut pmd = Pmd::new(r.dp.clone(), 0, 1, limit_cfg(4, 10_000, 100));
    send(&mut pmd, &r.a, 0, 1..=4);
    send(&mut pmd, &r.a, 0, [50]);
    assert_eq!(megaflow_srcs(&pmd), [1, 2, 3, 4]);
    assert_eq!(pmd.stats().megaflow_limit_hits, 1, "beyond the limit");
    // Flows 1 and 2 go on; 3 and 4 end.
    r.dp.advance_ms(60);
    pmd.housekeeping(false);
    send(&mut pmd, &r.a, 0, [1, 2]);
    r.dp.advance_ms(60);
    pmd.housekeeping(false);
    // At the limit, 120 ms idle is enough (max_idle_ms is 10 s); 60 ms is not.
    assert_eq!(megaflow_srcs(&pmd), [1, 2]);
    assert_eq!(pmd.stats().expired, 2);
    // The room goes to new flows.
    let before = pmd.stats();
    send(&mut pmd, &r.a, 0, [50, 51]);
    assert_eq!(megaflow_srcs(&pmd), [1, 2, 50, 51]);
    send(&mut pmd, &r.a, 0, [50, 51]);
    let s = pmd.stats();
    assert_eq!(s.upcalls - before.upcalls, 2);
    assert_eq!(s.megaflow_limit_hits, before.megaflow_limit_hits);
    assert_eq!(
        (s.emc_hits + s.megaflow_hits) - (before.emc_hits + before.megaflow_hits),
        2
    );
    assert_eq!(s.drops.total(), 0);
}

#[test]
fn below_the_megaflow_limit_megaflows_expire_after_max_idle() {
    let r = rig(vec![DpAction::Output(OUT)], 1);
    let mut pmd = Pmd::new(r.dp.clone(), 0, 1, limit_cfg(4, 1000, 100));
    send(&mut pmd, &r.a, 0, 1..=3);
    r.dp.advance_ms(1000);
    pmd.housekeeping(true);
    assert_eq!(megaflow_srcs(&pmd), [1, 2, 3], "idle 1000 ms, not more");
    r.dp.advance_ms(1);
    pmd.housekeeping(true);
    assert!(megaflow_srcs(&pmd).is_empty());
    assert_eq!(pmd.stats().expired, 3);
}

#[test]
fn at_the_megaflow_limit_packets_sharing_a_translation_are_credited_to_its_rule() {
    let mut sw = pipeline::switch::Switch::new();
    sw.vsctl("add-br br0 -- add-port br0 p1 -- add-port br0 p2")
        .expect("valid");
    let (d1, d2) = (common::dp_port(&sw, "p1"), common::dp_port(&sw, "p2"));
    let of = OfDatapath::new(sw);
    of.add_flows_text("br0", &["udp,actions=output:p2"])
        .expect("valid");
    let (p1, p2) = (mem("p1", 1), mem("p2", 1));
    for (n, p) in [(d1, &p1), (d2, &p2)] {
        of.datapath().add_port(DpPort {
            dp_port: n,
            netdev: p.clone(),
            vlan_limit: 1,
        });
    }
    let mut pmd = Pmd::new(of.datapath().clone(), 0, 1, limit_cfg(0, 10_000, 100));
    // Ten sources in one batch: the rule does not look at the source, so one translation
    // covers them all.
    send(&mut pmd, &p1, 0, 0..10);
    let s = pmd.stats();
    assert_eq!((s.upcalls, s.megaflow_limit_hits, s.megaflows), (1, 10, 0));
    assert_eq!(p2.take_all_tx().len(), 10);
    let flows = of.dump_flows("br0").expect("bridge");
    let rule = flows
        .iter()
        .find(|f| f.entry.priority == 32768)
        .expect("the udp rule");
    assert_eq!(rule.entry.stats.n_packets, 10);
    assert_eq!(rule.entry.stats.n_bytes, 10 * udp(0).len() as u64);
}

#[test]
fn pmd_threads_report_whether_they_are_pinned() {
    let r = rig(vec![DpAction::Output(OUT)], 1);
    let core = core_affinity::get_core_ids()
        .and_then(|ids| ids.first().copied())
        .expect("Linux tells a thread's affinity mask")
        .id;
    // Thread 0 asks for a core it may run on, thread 1 for one that does not exist, thread 2
    // for none.
    let threads = PmdThreads::spawn(&r.dp, 3, &[core, 1 << 20], &PmdConfig::default());
    assert_eq!(threads.pinned(), [Some(core), None, None]);
    let stats = threads.stop();
    let pinned: Vec<Option<usize>> = stats.iter().map(|s| s.pinned).collect();
    assert_eq!(pinned, [Some(core), None, None]);
    assert_eq!(PmdStats::sum(&stats).pinned, None);
}

#[test]
fn cycles_per_packet_is_positive_and_finite_after_forwarding() {
    let r = rig(vec![DpAction::Output(OUT)], 1);
    let mut pmd = Pmd::new(r.dp.clone(), 0, 1, PmdConfig::default());
    assert_eq!(pmd.stats().cycles_per_packet(), 0.0, "no packet yet");
    pmd.run_once();
    assert_eq!(
        pmd.stats().cycles_per_packet(),
        0.0,
        "an empty poll is idle"
    );
    send(&mut pmd, &r.a, 0, (0..100).map(|i| i % 7));
    let s = pmd.stats();
    assert_eq!(s.packets, 100);
    assert!(s.busy_cycles > 0);
    let cpp = s.cycles_per_packet();
    assert!(cpp.is_finite() && cpp > 0.0, "cycles per packet {cpp}");
    // Summed over threads, it is the busy cycles over the packets of all of them.
    let two = PmdStats::sum(&[s.clone(), s.clone()]);
    assert_eq!(two.packets, 200);
    assert_eq!(two.cycles_per_packet(), cpp);
}

#[test]
fn a_flood_copy_without_a_free_buffer_counts_drop_no_buffer() {
    // Every packet goes to B and OUT: the copy for B needs a second buffer.
    let flood = vec![DpAction::Output(B), DpAction::Output(OUT)];
    let tiny = |n_small| PmdConfig {
        pool: PoolConfig {
            n_small,
            n_jumbo: 0,
        },
        ..PmdConfig::default()
    };
    // Four buffers and a batch of four packets: the batch holds them all, no copy is made.
    let r = rig(flood.clone(), 1);
    let mut pmd = Pmd::new(r.dp.clone(), 0, 1, tiny(4));
    send(&mut pmd, &r.a, 0, [1, 1, 2, 2]);
    let s = pmd.stats();
    assert_eq!(s.drops.get(DropReason::NoBuffer), 4);
    assert_eq!(s.drops.total(), 4);
    assert_eq!(r.out.take_all_tx().len(), 4, "the originals still leave");
    assert!(r.b.take_all_tx().is_empty());
    assert_eq!(
        r.a.stats().drop_count(DropReason::NoBuffer),
        0,
        "the port received every packet: the drops are the copies'"
    );
    // Once the batch is sent, its buffers are free again: a batch of two leaves room for
    // both copies.
    send(&mut pmd, &r.a, 0, [1, 2]);
    let s = pmd.stats();
    assert_eq!(s.drops.get(DropReason::NoBuffer), 4);
    assert_eq!(r.out.take_all_tx().len(), 2);
    assert_eq!(r.b.take_all_tx().len(), 2);
    assert_eq!(pmd.pool().available(BufClass::Small), 4, "no buffer leaked");
}

#[test]
fn a_change_a_running_pmd_does_not_acknowledge_is_an_error() {
    let mut sw = pipeline::switch::Switch::new();
    sw.vsctl("add-br br0 -- add-port br0 p1 -- add-port br0 p2")
        .expect("valid");
    let of = OfDatapath::new(sw);
    let dp = of.datapath().clone();
    assert_eq!(dp.ack_timeout(), ACK_TIMEOUT);
    dp.set_ack_timeout(Duration::from_millis(20));
    // A PMD that says it is running but never polls: a stuck thread.
    let mut pmd = Pmd::new(dp.clone(), 0, 1, PmdConfig::default());
    pmd.shared().running.store(true, Ordering::Release);
    let err = of
        .add_flows_text("br0", &["udp,actions=output:p2"])
        .expect_err("the PMD never revalidates");
    let OfDatapathError::Unacknowledged {
        generation,
        timeout,
    } = &err
    else {
        panic!("not a timeout: {err}");
    };
    assert_eq!(*generation, dp.generation());
    assert_eq!(
        *timeout,
        AckTimeout {
            pending: 1,
            timeout: Duration::from_millis(20)
        }
    );
    assert!(err.to_string().contains("did not revalidate"), "{err}");
    assert_eq!(err.waited(), Some(Duration::from_millis(20)));
    // The change is applied all the same.
    assert_eq!(of.dump_flows("br0").expect("bridge").len(), 1);
    assert!(matches!(
        of.vsctl("add-port br0 p3"),
        Err(OfDatapathError::Unacknowledged { .. })
    ));
    // Once the PMD revalidates, waiting again succeeds.
    pmd.run_once();
    assert_eq!(dp.wait_ack(dp.generation()), Ok(()));
    // A refused change is the switch's error, not a timeout.
    let refused = of
        .add_flows_text("no-such-bridge", &["actions=drop"])
        .expect_err("no such bridge");
    assert!(matches!(refused, OfDatapathError::Switch(_)), "{refused}");
    assert_eq!(refused.waited(), None);
}

/// A PMD gets its core even when the thread that spawns it is pinned to another one (as a
/// benchmark's inserting thread is): the kernel, not the spawner's affinity mask, decides.
#[test]
fn a_pmd_is_pinned_even_when_its_spawner_is_pinned_elsewhere() {
    let ids = core_affinity::get_core_ids().expect("Linux tells a thread's affinity mask");
    let [a, b, ..] = ids.as_slice() else {
        eprintln!("one core only: nothing to check");
        return;
    };
    assert!(
        core_affinity::set_for_current(*a),
        "pinning the test thread"
    );
    let r = rig(vec![DpAction::Output(OUT)], 1);
    let threads = PmdThreads::spawn(&r.dp, 1, &[b.id], &PmdConfig::default());
    assert_eq!(threads.pinned(), [Some(b.id)]);
    threads.stop();
}
