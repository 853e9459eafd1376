//! The cached datapath end to end, in memory: extraction, EMC, megaflows, upcalls through the
//! real pipeline, action execution, revalidation after flow-table changes, statistics
//! credited to rules, every drop reason of the PMD, batch edges and frame sizes, and
//! property tests that the caches agree with a full translation: the same frames, byte for
//! byte and copy for copy, out of the same ports.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use datapath::netdev::memory::MemoryNetdev;
use datapath::ofproto::OfDatapath;
use datapath::upcall::{Translation, Upcall, UpcallError, UpcallRequest};
use datapath::{
    exec, Datapath, DpPort, DropReason, Pmd, PmdConfig, PmdStats, PmdThreads, Pool, PoolConfig,
};
use packet::builder::PacketBuilder;
use packet::key::{fields, FlowKey};
use pipeline::odp::{DpAction, SetField};
use pipeline::switch::Switch;
use pipeline::xlate::XlateDeps;
use proptest::prelude::*;

const A: [u8; 6] = [2, 0, 0, 0, 0, 1];
const B: [u8; 6] = [2, 0, 0, 0, 0, 2];

fn udp(src: u32, dport: u16, len: usize) -> Vec<u8> {
    let head = 14 + 20 + 8;
    PacketBuilder::ethernet(A, B)
        .ipv4(src.to_be_bytes(), [10, 0, 0, 2])
        .udp(1000, dport)
        .payload(&vec![0x5a; len.saturating_sub(head)])
        .build()
}

/// A switch with one bridge and its ports as memory netdevs, keyed by port name.
struct Rig {
    of: OfDatapath,
    ports: BTreeMap<String, Arc<MemoryNetdev>>,
    pmd: Pmd,
}

fn mem(name: &str) -> Arc<MemoryNetdev> {
    Arc::new(MemoryNetdev::new(name, common::queues(1, 1)))
}

fn rig_with(flows: &[&str], cfg: PmdConfig) -> Rig {
    rig_of(
        "add-br br0 -- add-port br0 p1 -- add-port br0 p2 -- add-port br0 p3",
        flows,
        cfg,
    )
}

/// A rig whose bridge `br0` (ports p1, p2, p3 at least) `vsctl` makes.
fn rig_of(vsctl: &str, flows: &[&str], cfg: PmdConfig) -> Rig {
    let mut sw = Switch::new();
    sw.vsctl(vsctl).expect("valid");
    let layout: Vec<(String, u32)> = sw
        .ports("br0")
        .expect("bridge")
        .iter()
        .filter_map(|p| Some((p.name.clone(), p.dp_port?)))
        .collect();
    let of = OfDatapath::new(sw);
    if !flows.is_empty() {
        of.add_flows_text("br0", flows).expect("valid flows");
    }
    let mut ports = BTreeMap::new();
    for (name, dp) in layout {
        let nd = mem(&name);
        of.datapath().add_port(DpPort {
            dp_port: dp,
            netdev: nd.clone(),
            vlan_limit: 1,
        });
        ports.insert(name, nd);
    }
    let pmd = Pmd::new(of.datapath().clone(), 0, 1, cfg);
    Rig { of, ports, pmd }
}

fn rig(flows: &[&str]) -> Rig {
    rig_with(flows, PmdConfig::default())
}

impl Rig {
    fn send(&mut self, port: &str, frames: &[Vec<u8>]) {
        for f in frames {
            assert!(self.ports[port].inject(0, f));
        }
        while self.ports[port].rx_pending(0) > 0 {
            self.pmd.run_once();
        }
    }

    /// Frames each port transmitted since the last call.
    fn taken(&self) -> BTreeMap<String, Vec<Vec<u8>>> {
        self.ports
            .iter()
            .map(|(n, p)| (n.clone(), p.take_all_tx()))
            .filter(|(_, v)| !v.is_empty())
            .collect()
    }

    /// The ports a full translation (no cache) sends `frame` to when it arrives on `port`,
    /// sorted, each once.
    fn translated_ports(&self, port: &str, frame: &[u8]) -> Vec<String> {
        let sw = self.of.switch();
        let dp = sw.layout().port_by_name(port).and_then(|p| p.dp_port);
        let mut k = FlowKey::default();
        packet::extract::extract(frame, &mut k);
        k.set_in_port(dp.expect("the port has a datapath number"));
        let up = sw
            .upcall(&k, pipeline::xlate::XlateOptions::default())
            .expect("port");
        let mut names: Vec<String> = up
            .output
            .actions
            .iter()
            .filter_map(|a| match a {
                DpAction::Output(p) => sw.layout().port_by_dp(*p).map(|l| l.name.clone()),
                _ => None,
            })
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// What a full translation (no cache) of `frame` arriving on `port` sends, executed on the
    /// frame here: one `(port, frame bytes)` per output, sorted. The rules of these tests make
    /// only outputs, VLAN and set actions; each rewrite fits the frame.
    fn translated_outputs(&self, port: &str, frame: &[u8]) -> Vec<(String, Vec<u8>)> {
        let sw = self.of.switch();
        let dp = sw.layout().port_by_name(port).and_then(|p| p.dp_port);
        let mut k = FlowKey::default();
        let info = packet::extract::extract(frame, &mut k);
        let nw_proto = k.nw_proto();
        k.set_in_port(dp.expect("the port has a datapath number"));
        let up = sw
            .upcall(&k, pipeline::xlate::XlateOptions::default())
            .expect("port");
        // One buffer: a default pool's 11 MiB, made for every packet, would be most of the
        // property tests' time.
        let pool = Pool::new(PoolConfig {
            n_small: 1,
            n_jumbo: 0,
        });
        let mut pkt = pool.alloc_copy(frame).expect("a test frame fits a buffer");
        pkt.meta_mut().set_offsets(&info);
        let mut out = Vec::new();
        for a in &up.output.actions {
            match a {
                DpAction::Output(p) => {
                    let name = sw.layout().port_by_dp(*p).map(|l| l.name.clone());
                    out.push((
                        name.expect("an output to a known port"),
                        pkt.data().to_vec(),
                    ));
                }
                DpAction::PushVlan { tpid, tci } => {
                    assert!(exec::push_vlan(&mut pkt, *tpid, *tci));
                }
                DpAction::PopVlan => assert!(exec::pop_vlan(&mut pkt)),
                DpAction::Set(fs) => {
                    for f in fs {
                        assert!(exec::set_field(&mut pkt, f, nw_proto), "{f:?}");
                    }
                }
                other => panic!("no rule of these tests makes {other:?}"),
            }
        }
        out.sort();
        out
    }

    /// What the PMD sends when `frame` arrives on `port`: one `(port, frame bytes)` per
    /// transmitted frame, sorted.
    fn outputs(&mut self, port: &str, frame: &[u8]) -> Vec<(String, Vec<u8>)> {
        self.send(port, &[frame.to_vec()]);
        let mut out: Vec<(String, Vec<u8>)> = self
            .taken()
            .into_iter()
            .flat_map(|(name, frames)| frames.into_iter().map(move |f| (name.clone(), f)))
            .collect();
        out.sort();
        out
    }

    fn out_ports(&mut self, port: &str, frame: &[u8]) -> Vec<String> {
        self.send(port, &[frame.to_vec()]);
        self.taken().into_keys().collect()
    }
}

#[test]
fn forwards_then_hits_the_megaflow() {
    let mut r = rig(&["in_port=p1,udp,actions=output:p2"]);
    assert_eq!(r.out_ports("p1", &udp(1, 1, 64)), ["p2"]);
    assert_eq!(r.out_ports("p1", &udp(2, 2, 64)), ["p2"]);
    let s = r.pmd.stats();
    assert_eq!((s.packets, s.upcalls, s.megaflow_hits), (2, 1, 1));
    assert_eq!(s.megaflows, 1);
}

/// The exact-match cache is consulted once megaflows come in two masks (its first trial
/// starts with it on, whatever it then decides), never with one, and a cached decision still
/// follows a flow-table change.
#[test]
fn the_emc_serves_repeat_packets_once_there_are_two_masks() {
    let rules = [
        "priority=100,udp,nw_src=10.0.0.1,actions=output:p2",
        "priority=10,udp,tp_dst=7,actions=output:p3",
    ];
    let mut r = rig(&rules);
    let (a, b) = (udp(0x0a00_0001, 9, 64), udp(0x0a00_0002, 7, 64));
    for _ in 0..50 {
        let batch: Vec<Vec<u8>> = (0..16).flat_map(|_| [a.clone(), b.clone()]).collect();
        r.send("p1", &batch);
        let out = r.taken();
        assert_eq!(out.get("p2").map(Vec::len), Some(16));
        assert_eq!(out.get("p3").map(Vec::len), Some(16));
        assert!(out["p2"].iter().all(|f| *f == a) && out["p3"].iter().all(|f| *f == b));
    }
    let s = r.pmd.stats();
    assert_eq!(s.subtables, 2);
    assert_eq!(s.upcalls, 2);
    assert!(s.emc_hits > 1000, "emc hits {}", s.emc_hits);
    assert_eq!((s.packets, s.drops.total()), (1600, 0));
    // A rule change: the cached flow takes the new decision.
    r.of.add_flows_text(
        "br0",
        &["priority=200,udp,nw_src=10.0.0.1,actions=output:p3"],
    )
    .expect("valid");
    assert_eq!(r.out_ports("p1", &a), ["p3"]);

    let mut one = rig(&["priority=10,udp,actions=output:p2"]);
    for _ in 0..50 {
        one.send("p1", &[a.clone(), b.clone()]);
    }
    let s = one.pmd.stats();
    assert_eq!((s.subtables, s.emc_hits), (1, 0));
}

#[test]
fn batch_edges_and_frame_sizes() {
    for len in [64usize, 128, 1518, 9000] {
        for n in [0usize, 1, 31, 32, 33, 257] {
            let mut r = rig(&["in_port=p1,actions=output:p2"]);
            let frames: Vec<Vec<u8>> = (0..n)
                .map(|i| udp(u32::try_from(i).unwrap_or(0), 7, len - 4))
                .collect();
            r.send("p1", &frames);
            let out = r.taken();
            let got = out.get("p2").cloned().unwrap_or_default();
            assert_eq!(got.len(), n, "len {len} n {n}");
            assert_eq!(got, frames, "frames come out unchanged and in order");
            let s = r.pmd.stats();
            assert_eq!(s.packets, n as u64);
            assert_eq!(s.drops.total(), 0);
        }
    }
}

/// A table compiled under traffic (`OfDatapath::compile_tables`) forwards as before: its
/// megaflows stay, new flows' upcalls look up through the compiled form, and a change is
/// still seen by the next packet.
#[test]
fn a_compiled_table_forwards_the_same() {
    let mut rules = Vec::new();
    for i in 0..8 {
        rules.push(format!(
            "priority=30,udp,nw_src=10.0.{i}.0/24,actions=output:p2"
        ));
        rules.push(format!(
            "priority=40,udp,nw_src=10.0.{i}.0/24,tp_dst=53,actions=output:p3"
        ));
        rules.push(format!("priority=50,udp,nw_src=10.0.{i}.9,actions=drop"));
    }
    let text: Vec<&str> = rules.iter().map(String::as_str).collect();
    let mut r = rig(&text);
    let frames: Vec<Vec<u8>> = (0..40u32)
        .map(|i| {
            udp(
                0x0a00_0000 | ((i % 10) << 8) | (i % 11),
                [53, 80][i as usize % 2],
                64,
            )
        })
        .collect();
    let before: Vec<Vec<String>> = frames.iter().map(|f| r.out_ports("p1", f)).collect();
    assert!(before.iter().any(|p| p == &["p2"]) && before.iter().any(|p| p == &["p3"]));
    assert!(before.iter().any(Vec::is_empty));
    let megaflows = r.pmd.stats().megaflows;
    assert_eq!(r.of.compile_tables("br0").expect("bridge"), vec![0]);
    assert!(r
        .of
        .switch()
        .bridge("br0")
        .and_then(|b| b.table(0))
        .is_some_and(|t| t.is_compiled()));
    // The same packets, from the megaflows, and new ones through the compiled table.
    let again: Vec<Vec<String>> = frames.iter().map(|f| r.out_ports("p1", f)).collect();
    assert_eq!(again, before);
    assert_eq!(
        r.pmd.stats().megaflows,
        megaflows,
        "nothing revalidated away"
    );
    for (i, f) in frames.iter().enumerate() {
        assert_eq!(r.translated_ports("p1", f), before[i], "frame {i}");
    }
    r.of.add_flows_text(
        "br0",
        &["priority=60,udp,nw_src=10.0.3.0/24,actions=output:p3"],
    )
    .expect("valid");
    assert_eq!(r.out_ports("p1", &udp(0x0a00_0301, 80, 64)), ["p3"]);
}

#[test]
fn a_flow_table_change_is_seen_by_the_next_packet() {
    let mut r = rig(&["priority=10,udp,actions=output:p2"]);
    let f = udp(0x0a00_0001, 5, 64);
    assert_eq!(r.out_ports("p1", &f), ["p2"]);
    assert_eq!(r.out_ports("p1", &f), ["p2"]);
    // A higher-priority rule that overlaps the megaflow.
    r.of.add_flows_text(
        "br0",
        &["priority=20,udp,nw_src=10.0.0.1,actions=output:p3"],
    )
    .expect("valid");
    assert_eq!(r.out_ports("p1", &f), ["p3"]);
    // Modify its actions.
    let mods =
        r.of.switch()
            .parse_flow_mods(
                "br0",
                &["priority=20,udp,nw_src=10.0.0.1,actions=output:p1"],
                "",
                openflow::ofctl::flow::FlowCommand::ModifyStrict,
            )
            .expect("valid");
    r.of.flow_mods("br0", mods).expect("valid");
    assert_eq!(r.out_ports("p2", &f), ["p1"]);
    // Delete it: back to p2.
    r.of.del_flows_text("br0", "udp,nw_src=10.0.0.1")
        .expect("valid");
    assert_eq!(r.out_ports("p1", &f), ["p2"]);
    // Delete everything: drop.
    r.of.del_flows_text("br0", "").expect("valid");
    assert!(r.out_ports("p1", &f).is_empty());
}

#[test]
fn unaffected_megaflows_survive_an_added_rule() {
    let flows: Vec<String> = (1..=4)
        .map(|i| format!("priority=10,udp,nw_src=10.0.0.{i},actions=output:p2"))
        .collect();
    let flows: Vec<&str> = flows.iter().map(String::as_str).collect();
    let mut r = rig(&flows);
    for i in 1..=4 {
        assert_eq!(r.out_ports("p1", &udp(0x0a00_0000 + i, 5, 64)), ["p2"]);
    }
    assert_eq!(r.pmd.n_megaflows(), 4);
    let before = r.pmd.stats();
    r.of.add_flows_text(
        "br0",
        &["priority=20,udp,nw_src=10.0.0.3,actions=output:p3"],
    )
    .expect("valid");
    r.pmd.run_once();
    let after = r.pmd.stats();
    assert_eq!(
        after.retranslated - before.retranslated,
        1,
        "only the overlapping one"
    );
    assert_eq!(after.revalidated_out - before.revalidated_out, 1);
    assert_eq!(r.pmd.n_megaflows(), 3);
    assert_eq!(r.out_ports("p1", &udp(0x0a00_0003, 5, 64)), ["p3"]);
    assert_eq!(r.out_ports("p1", &udp(0x0a00_0004, 5, 64)), ["p2"]);
    assert_eq!(r.pmd.stats().upcalls - after.upcalls, 1);
}

#[test]
fn megaflow_statistics_are_credited_to_rules() {
    let mut r = rig(&[
        "priority=5,udp,actions=output:p2",
        "priority=0,actions=drop",
    ]);
    let frames: Vec<Vec<u8>> = (0..100).map(|i| udp(i, 5, 100)).collect();
    r.send("p1", &frames);
    r.pmd.housekeeping(true);
    assert_credited(&r, 5, &frames);
}

/// The rule of priority `priority` in br0 counts exactly `frames`.
fn assert_credited(r: &Rig, priority: u16, frames: &[Vec<u8>]) {
    let dumped = r.of.dump_flows("br0").expect("bridge");
    let rule = dumped
        .iter()
        .find(|d| d.entry.priority == priority)
        .expect("the rule");
    assert_eq!(rule.entry.stats.n_packets, frames.len() as u64);
    assert_eq!(
        rule.entry.stats.n_bytes,
        frames.iter().map(|f| f.len() as u64).sum::<u64>()
    );
}

/// An added rule that matches `in_port` (an OpenFlow port number, where megaflows hold
/// datapath port numbers) makes the megaflow of that port's packets stale.
#[test]
fn an_added_rule_on_in_port_revalidates_that_ports_megaflow() {
    let mut r = rig_of(
        "add-br br0 -- add-port br0 p1 -- set Interface p1 ofport_request=7 \
         -- add-port br0 p2 -- add-port br0 p3",
        // The in_port rule's subtable exists already (another port's rule at the same
        // priority), so adding one there is an `Added` change checked against each megaflow's
        // key, not a reordering that retranslates every megaflow of the table.
        &[
            "priority=5,udp,actions=output:p2",
            "priority=9,in_port=p3,udp,actions=output:p1",
        ],
        PmdConfig::default(),
    );
    let sw = r.of.switch();
    let p1 = sw.layout().port_by_name("p1").expect("p1");
    assert_ne!(
        p1.dp_port.map(u64::from),
        Some(u64::from(p1.ofport)),
        "the test needs datapath and OpenFlow numbers that differ"
    );
    drop(sw);
    let f = udp(0x0a00_0001, 5, 64);
    assert_eq!(r.out_ports("p1", &f), ["p2"]);
    let retranslated = r.pmd.stats().retranslated;
    r.of.add_flows_text("br0", &["priority=9,in_port=p1,udp,actions=output:p3"])
        .expect("valid");
    assert_eq!(r.out_ports("p1", &f), ["p3"]);
    assert_eq!(r.pmd.stats().retranslated, retranslated + 1);
}

/// A megaflow that revalidation removes credits its packets to the rule that made it first:
/// no sweep runs between the packets and the change, yet the rule's counters hold them.
#[test]
fn a_megaflow_removed_by_revalidation_credits_its_rule() {
    let mut r = rig(&["priority=5,udp,actions=output:p2"]);
    let frames: Vec<Vec<u8>> = (0..40).map(|_| udp(0x0a00_0001, 5, 100)).collect();
    r.send("p1", &frames);
    assert_eq!(r.taken()["p2"].len(), 40);
    assert_eq!(r.pmd.n_megaflows(), 1);
    // A higher-priority rule over the same packets: the megaflow's decision is stale and it
    // goes at the next revalidation (the next packet's iteration).
    r.of.add_flows_text("br0", &["priority=9,udp,actions=output:p3"])
        .expect("valid");
    assert_eq!(r.out_ports("p1", &frames[0]), ["p3"]);
    assert_credited(&r, 5, &frames);
}

#[test]
fn set_field_and_vlan_actions_rewrite_packets() {
    let mut r = rig(&[
        "in_port=p1,udp,actions=mod_nw_src:192.168.1.1,mod_tp_dst:99,mod_vlan_vid:5,output:p2",
    ]);
    r.send("p1", &[udp(0x0a00_0001, 5, 80)]);
    let out = r.taken();
    let f = &out["p2"][0];
    let mut k = FlowKey::default();
    packet::extract::extract(f, &mut k);
    assert_eq!(k.nw_src(), 0xc0a8_0101);
    assert_eq!(k.tp_dst(), 99);
    assert_eq!(k.vlan_tci() & 0xfff, 5);
}

#[test]
fn idle_megaflows_expire() {
    let mut r = rig_with(
        &["actions=output:p2"],
        PmdConfig {
            max_idle_ms: 0,
            ..PmdConfig::default()
        },
    );
    r.send("p1", &[udp(1, 1, 64)]);
    assert_eq!(r.pmd.n_megaflows(), 1);
    std::thread::sleep(std::time::Duration::from_millis(5));
    r.pmd.housekeeping(true);
    assert_eq!(r.pmd.n_megaflows(), 0);
    assert_eq!(r.pmd.stats().expired, 1);
}

#[test]
fn flows_beyond_the_megaflow_limit_are_still_forwarded() {
    let mut r = rig_with(
        &["udp,actions=output:p2"],
        PmdConfig {
            megaflow_limit: 0,
            ..PmdConfig::default()
        },
    );
    let frames: Vec<Vec<u8>> = (0..10).map(|i| udp(i, 1, 64)).collect();
    r.send("p1", &frames);
    assert_eq!(r.taken()["p2"].len(), 10);
    let s = r.pmd.stats();
    assert_eq!(s.megaflow_limit_hits, 10);
    assert_eq!(s.megaflows, 0);
}

/// A translator that answers what it is told to.
#[derive(Debug)]
struct Fake(Result<Vec<DpAction>, UpcallError>);

impl Upcall for Fake {
    fn translate(&self, req: &UpcallRequest<'_>) -> Result<Translation, UpcallError> {
        let actions = self.0.clone()?;
        let mut mask = FlowKey::default();
        mask.set(fields::IN_PORT, u128::MAX);
        mask.set(fields::DL_TYPE, u128::MAX);
        let _ = req;
        Ok(Translation {
            actions,
            mask,
            bridge: Arc::from("br0"),
            of_in_port: 1,
            deps: XlateDeps::default(),
        })
    }
}

fn fake_pmd(
    answer: Result<Vec<DpAction>, UpcallError>,
    cfg: PmdConfig,
) -> (Pmd, Arc<MemoryNetdev>, Arc<MemoryNetdev>) {
    let dp = Datapath::new(Arc::new(Fake(answer)));
    let (p1, p2) = (mem("p1"), mem("p2"));
    dp.add_port(DpPort {
        dp_port: 1,
        netdev: p1.clone(),
        vlan_limit: 1,
    });
    dp.add_port(DpPort {
        dp_port: 2,
        netdev: p2.clone(),
        vlan_limit: 1,
    });
    (Pmd::new(dp, 0, 1, cfg), p1, p2)
}

fn run_fake(
    answer: Result<Vec<DpAction>, UpcallError>,
    cfg: PmdConfig,
    frames: &[Vec<u8>],
) -> PmdStats {
    let (mut pmd, p1, _p2) = fake_pmd(answer, cfg);
    for f in frames {
        p1.inject(0, f);
    }
    while p1.rx_pending(0) > 0 {
        pmd.run_once();
    }
    pmd.stats()
}

#[test]
fn every_pmd_drop_reason_moves_its_counter() {
    let one = vec![udp(1, 1, 64)];
    for reason in DropReason::ALL {
        let (stats, expected) = match reason {
            // The netdev layer's reasons: tests/drops.rs.
            DropReason::NoBuffer
            | DropReason::TooLong
            | DropReason::RxQueueFull
            | DropReason::TxQueueFull
            | DropReason::TxUnsupported => continue,
            DropReason::UpcallLimit => {
                let cfg = PmdConfig {
                    upcall_rate: 0,
                    upcall_burst: 1,
                    ..PmdConfig::default()
                };
                // The first new flow spends the only token; the fake's megaflow matches
                // in_port and dl_type, so a non-IP frame is a new flow and finds none.
                let mut arp = udp(2, 2, 64);
                arp[12] = 0x08;
                arp[13] = 0x06;
                (
                    run_fake(Ok(vec![DpAction::Output(2)]), cfg, &[one[0].clone(), arp]),
                    1,
                )
            }
            DropReason::UpcallBusy => (
                run_fake(Err(UpcallError::Busy), PmdConfig::default(), &one),
                1,
            ),
            DropReason::UpcallFailed => (
                run_fake(
                    Err(UpcallError::Failed("no".into())),
                    PmdConfig::default(),
                    &one,
                ),
                1,
            ),
            DropReason::FlowDrop => (run_fake(Ok(vec![]), PmdConfig::default(), &one), 1),
            DropReason::NoPort => (
                run_fake(Ok(vec![DpAction::Output(77)]), PmdConfig::default(), &one),
                1,
            ),
            DropReason::Userspace => (
                run_fake(
                    Ok(vec![DpAction::Userspace("pid=0".into())]),
                    PmdConfig::default(),
                    &one,
                ),
                1,
            ),
            DropReason::Unsupported => (
                run_fake(
                    Ok(vec![DpAction::Recirc(1), DpAction::Output(2)]),
                    PmdConfig::default(),
                    &one,
                ),
                1,
            ),
            DropReason::HeaderRewrite => {
                // A TCP port rewrite on a frame cut short after its IP header.
                let short = one[0][..34].to_vec();
                (
                    run_fake(
                        Ok(vec![
                            DpAction::Set(vec![SetField::TcpSrc(1)]),
                            DpAction::Output(2),
                        ]),
                        PmdConfig::default(),
                        &[short],
                    ),
                    1,
                )
            }
        };
        for r in DropReason::ALL {
            let want = if r == reason { expected } else { 0 };
            assert_eq!(
                stats.drops.get(r),
                want,
                "{} while testing {}",
                r.counter_name(),
                reason.counter_name()
            );
        }
    }
}

#[test]
fn pmd_threads_wait_for_acknowledgement() {
    let r = rig(&["priority=10,udp,actions=output:p2"]);
    let Rig { of, ports, pmd } = r;
    drop(pmd);
    let threads = PmdThreads::spawn(of.datapath(), 1, &[], &PmdConfig::default());
    let f = udp(0x0a00_0001, 5, 64);
    let deliver = |ports: &BTreeMap<String, Arc<MemoryNetdev>>| -> Vec<String> {
        ports["p1"].inject(0, &f);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let got: Vec<String> = ports
                .iter()
                .filter(|(_, p)| p.tx_pending(0) > 0)
                .map(|(n, _)| n.clone())
                .collect();
            if !got.is_empty() || std::time::Instant::now() > deadline {
                for p in ports.values() {
                    p.take_all_tx();
                }
                return got;
            }
            std::thread::yield_now();
        }
    };
    assert_eq!(deliver(&ports), ["p2"]);
    for round in 0..20 {
        let target = if round % 2 == 0 { "p3" } else { "p2" };
        of.add_flows_text(
            "br0",
            &[format!("priority=20,udp,nw_src=10.0.0.1,actions=output:{target}").as_str()],
        )
        .expect("valid");
        assert_eq!(deliver(&ports), [target], "round {round}");
    }
    // Deletes and re-adds (table changes, not only additions) are acknowledged the same way.
    for round in 0..10 {
        if round % 2 == 0 {
            of.del_flows_text("br0", "udp,nw_src=10.0.0.1")
                .expect("valid");
            assert_eq!(deliver(&ports), ["p2"], "delete round {round}");
        } else {
            of.add_flows_text(
                "br0",
                &["priority=20,udp,nw_src=10.0.0.1,actions=output:p3"],
            )
            .expect("valid");
            assert_eq!(deliver(&ports), ["p3"], "re-add round {round}");
        }
    }
    let stats = threads.stop();
    assert_eq!(stats.len(), 1);
    assert_eq!(stats[0].packets, 31);
}

/// A random rule set over two fields with output-or-drop actions.
fn arb_rules() -> impl Strategy<Value = Vec<(u16, Option<u8>, Option<u16>, u8)>> {
    proptest::collection::vec(
        (
            0u16..4,
            proptest::option::of(0u8..4),
            proptest::option::of(0u16..4),
            0u8..6,
        ),
        0..8,
    )
}

fn rule_text((prio, src, dport, out): &(u16, Option<u8>, Option<u16>, u8)) -> String {
    let mut s = format!("priority={prio},udp");
    if let Some(v) = src {
        s += &format!(",nw_src=10.0.0.{v}");
    }
    if let Some(p) = dport {
        s += &format!(",tp_dst={p}");
    }
    let act = match out {
        0 => "drop".to_string(),
        1 => "output:p2".to_string(),
        2 => "output:p3".to_string(),
        3 => "output:p2,output:p3".to_string(),
        // Copies to one port, the second rewritten.
        4 => "output:p2,mod_tp_dst:9,output:p2".to_string(),
        // Rewrites with checksum updates before the outputs.
        _ => "mod_nw_src:10.9.9.9,mod_tp_dst:8,output:p3,output:p2".to_string(),
    };
    s + ",actions=" + &act
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    /// Whatever the rules and changes, every packet goes where a full translation of it says,
    /// as many times and rewritten as it says: the frames out of each port are compared byte
    /// for byte with the translation's actions executed on the packet.
    #[test]
    fn caches_agree_with_full_translation(
        phases in proptest::collection::vec((arb_rules(), proptest::collection::vec((0u8..4, 0u16..4), 1..12)), 1..4)
    ) {
        let mut r = rig(&[]);
        for (rules, packets) in phases {
            // A change: replace all rules.
            r.of.del_flows_text("br0", "").expect("valid");
            let texts: Vec<String> = rules.iter().map(rule_text).collect();
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            if !refs.is_empty() {
                r.of.add_flows_text("br0", &refs).expect("valid");
            }
            for (src, dport) in packets {
                let f = udp(0x0a00_0000 + u32::from(src), dport, 64);
                let want = r.translated_outputs("p1", &f);
                let got = r.outputs("p1", &f);
                prop_assert_eq!(got, want);
            }
        }
    }
}

#[test]
fn a_storm_of_new_flows_costs_counted_drops_not_established_packets() {
    let dp = Datapath::new(Arc::new(common::PerSource(vec![DpAction::Output(2)])));
    let (p1, p2) = (mem("p1"), mem("p2"));
    for (n, p) in [(1, &p1), (2, &p2)] {
        dp.add_port(DpPort {
            dp_port: n,
            netdev: p.clone(),
            vlan_limit: 1,
        });
    }
    let mut pmd = Pmd::new(
        dp,
        0,
        1,
        PmdConfig {
            upcall_rate: 0,
            upcall_burst: 10,
            ..PmdConfig::default()
        },
    );
    // The established flow.
    p1.inject(0, &udp(1, 1, 64));
    pmd.run_once();
    // A storm of 1,000 new sources with the established flow's packets in between.
    let mut established = 0;
    for i in 0..1000u32 {
        p1.inject(0, &udp(1000 + i, 1, 64));
        if i % 10 == 0 {
            p1.inject(0, &udp(1, 1, 64));
            established += 1;
        }
        if p1.rx_pending(0) >= 32 {
            pmd.run_once();
        }
    }
    while p1.rx_pending(0) > 0 {
        pmd.run_once();
    }
    let s = pmd.stats();
    let sent = p2.take_all_tx();
    let from_established = sent.iter().filter(|f| f[26..30] == [0, 0, 0, 1]).count();
    assert_eq!(
        from_established,
        established + 1,
        "every established packet went through"
    );
    assert_eq!(s.upcalls, 10, "the burst allowance, then no more");
    assert_eq!(s.drops.get(DropReason::UpcallLimit), 1000 - 9);
    assert_eq!(s.drops.total(), 1000 - 9);
}

#[test]
fn mirror_copies_leave_by_the_cached_path_too() {
    let mut r = rig(&["in_port=p1,actions=output:p2"]);
    r.of.vsctl(
        "set Bridge br0 mirrors=@m -- --id=@p1 get Port p1 -- --id=@p3 get Port p3 \
         -- --id=@m create Mirror name=m select_src_port=@p1 output_port=@p3",
    )
    .expect("valid mirror");
    for round in 0..2 {
        let f = udp(7, 7, 64);
        r.send("p1", std::slice::from_ref(&f));
        let out = r.taken();
        assert_eq!(out.get("p2"), Some(&vec![f.clone()]), "round {round}");
        assert_eq!(out.get("p3"), Some(&vec![f]), "round {round}");
    }
    let s = r.pmd.stats();
    assert_eq!((s.upcalls, s.megaflow_hits), (1, 1));
}

fn eth_frame(src: [u8; 6], dst: [u8; 6]) -> Vec<u8> {
    PacketBuilder::ethernet(src, dst)
        .ipv4([10, 0, 0, 1], [10, 0, 0, 2])
        .udp(1, 2)
        .payload(&[0; 22])
        .build()
}

#[test]
fn normal_learning_revalidates_flooding_megaflows() {
    let mut r = rig(&["actions=NORMAL"]);
    let (a, b) = ([2, 0, 0, 0, 0, 0xa], [2, 0, 0, 0, 0, 0xb]);
    // A -> B: B unknown, flooded.
    let mut ports = r.out_ports("p1", &eth_frame(a, b));
    ports.sort();
    assert_eq!(ports, ["br0", "p2", "p3"]);
    // B -> A from p2: A was learned on p1.
    assert_eq!(r.out_ports("p2", &eth_frame(b, a)), ["p1"]);
    // The MAC table changed: the flooding megaflow is revalidated at housekeeping.
    r.pmd.housekeeping(false);
    assert_eq!(r.out_ports("p1", &eth_frame(a, b)), ["p2"]);
}

#[test]
fn two_pmd_threads_share_the_rx_queues() {
    let mut sw = Switch::new();
    sw.vsctl("add-br br0 -- add-port br0 p1 -- add-port br0 p2")
        .expect("valid");
    let (d1, d2) = (common::dp_port(&sw, "p1"), common::dp_port(&sw, "p2"));
    let of = OfDatapath::new(sw);
    of.add_flows_text("br0", &["in_port=p1,actions=output:p2"])
        .expect("valid");
    let cfg = common::queues(2, 2);
    let p1 = Arc::new(MemoryNetdev::new("p1", cfg));
    let p2 = Arc::new(MemoryNetdev::new("p2", cfg));
    for (n, p) in [(d1, &p1), (d2, &p2)] {
        of.datapath().add_port(DpPort {
            dp_port: n,
            netdev: p.clone(),
            vlan_limit: 1,
        });
    }
    let threads = PmdThreads::spawn(of.datapath(), 2, &[], &PmdConfig::default());
    for i in 0..200u32 {
        p1.inject(usize::try_from(i % 2).unwrap_or(0), &udp(i, 1, 64));
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while p2.tx_pending(0) + p2.tx_pending(1) < 200 && std::time::Instant::now() < deadline {
        std::thread::yield_now();
    }
    let stats = threads.stop();
    assert_eq!(p2.tx_pending(0) + p2.tx_pending(1), 200);
    assert_eq!(stats.len(), 2);
    for s in &stats {
        assert_eq!(
            s.packets, 100,
            "each PMD polls one of the two queues: {s:?}"
        );
        assert_eq!(s.megaflows, 1, "each PMD has its own megaflow cache");
    }
    // Each PMD transmits on its own tx queue.
    assert_eq!((p2.tx_pending(0), p2.tx_pending(1)), (100, 100));
}

/// One incremental flow-table change of the second property test.
#[derive(Debug, Clone)]
enum Step {
    /// Add `table, priority, nw_src, tp_dst, action`.
    Add(u8, u16, Option<u8>, Option<u16>, u8),
    /// Delete (strict) the n-th rule added so far, if any.
    DelStrict(usize),
    /// Delete every rule matching this source (non-strict).
    DelSrc(u8),
    /// Packets (source, destination port) sent after the change.
    Send(Vec<(u8, u16)>),
}

fn arb_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0u8..2, 0u16..4, proptest::option::of(0u8..4), proptest::option::of(0u16..4), 0u8..7)
            .prop_map(|(t, p, s, d, a)| Step::Add(t, p, s, d, a)),
        1 => (0usize..8).prop_map(Step::DelStrict),
        1 => (0u8..4).prop_map(Step::DelSrc),
        4 => proptest::collection::vec((0u8..4, 0u16..4), 1..6).prop_map(Step::Send),
    ]
}

/// The match part of an added rule, and the whole rule.
fn step_rule(t: u8, prio: u16, src: Option<u8>, dport: Option<u16>, act: u8) -> (String, String) {
    let mut m = format!("table={t},priority={prio},udp");
    if let Some(v) = src {
        m += &format!(",nw_src=10.0.0.{v}");
    }
    if let Some(p) = dport {
        m += &format!(",tp_dst={p}");
    }
    // Table 1 never resubmits (no loops); table 0 may go on to table 1, also after rewriting
    // the field table 1 looks at (a translation whose lookups do not use the input key).
    let act = match (t, act) {
        (_, 0) => "drop",
        (_, 1) => "output:p2",
        (_, 2) => "output:p3",
        (_, 3) => "output:p2,output:p3",
        (0, 4) => "resubmit(,1)",
        (0, 5) => "mod_tp_dst:3,resubmit(,1)",
        (0, _) => "output:p3,resubmit(,1)",
        // Copies to one port, the second rewritten; a rewrite with checksum updates.
        (_, 4) => "output:p2,mod_tp_dst:1,output:p2",
        (_, 5) => "mod_nw_src:10.0.0.3,output:p3",
        (_, _) => "output:p2",
    };
    let whole = format!("{m},actions={act}");
    (m, whole)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
    /// Incremental changes (adds that may or may not overlap cached megaflows, strict and
    /// non-strict deletes, two tables with resubmits and rewrites before a lookup): after every
    /// acknowledged change, every packet goes where a full translation says, as many times and
    /// with the bytes it says.
    #[test]
    fn targeted_revalidation_agrees_with_full_translation(
        steps in proptest::collection::vec(arb_step(), 1..24)
    ) {
        let mut r = rig(&[]);
        let mut added: Vec<String> = Vec::new();
        for step in steps {
            match step {
                Step::Add(t, p, s, d, a) => {
                    let (m, whole) = step_rule(t, p, s, d, a);
                    r.of.add_flows_text("br0", &[whole.as_str()]).expect("valid");
                    added.push(m);
                }
                Step::DelStrict(n) => {
                    if let Some(m) = added.get(n).cloned() {
                        let mods = r.of.switch().parse_flow_mods(
                            "br0", &[m.as_str()], "", openflow::ofctl::flow::FlowCommand::DeleteStrict,
                        ).expect("valid");
                        r.of.flow_mods("br0", mods).expect("valid");
                    }
                }
                Step::DelSrc(v) => {
                    r.of.del_flows_text("br0", &format!("udp,nw_src=10.0.0.{v}")).expect("valid");
                }
                Step::Send(packets) => {
                    for (src, dport) in packets {
                        let f = udp(0x0a00_0000 + u32::from(src), dport, 64);
                        let want = r.translated_outputs("p1", &f);
                        let got = r.outputs("p1", &f);
                        prop_assert_eq!(got, want, "packet src {} dport {}", src, dport);
                    }
                }
            }
        }
    }
}

/// An added rule that matches none of the cached packets still changes their decisions when
/// it raises its subtable's highest priority: OVS's subtable order moves, and so does the
/// winner between equal-priority rules of other subtables. Found by the property test above.
#[test]
fn an_added_rule_that_reorders_equal_priorities_revalidates_its_table() {
    let mut r = rig(&[
        "table=0,priority=1,udp,actions=output:p2,output:p3",
        "table=0,priority=2,udp,tp_dst=1,actions=drop",
        "table=0,priority=1,udp,nw_src=10.0.0.2,tp_dst=0,actions=drop",
    ]);
    let (a, b) = (udp(0x0a00_0000, 0, 64), udp(0x0a00_0002, 0, 64));
    assert_eq!(r.out_ports("p1", &a), ["p2", "p3"]);
    let before = r.translated_ports("p1", &b);
    r.of.add_flows_text(
        "br0",
        &["table=0,priority=2,udp,nw_src=10.0.0.0,tp_dst=1,actions=drop"],
    )
    .expect("valid");
    let after = r.translated_ports("p1", &b);
    assert_ne!(
        before, after,
        "the added rule reorders the two priority-1 rules"
    );
    assert_eq!(r.out_ports("p1", &b), after);
}

/// Two changes revalidated in one pass, whose added rules' masks both reach outside the
/// megaflow's mask: each change is tested against its own rules (a projection cache shared
/// between them once made the second change look like the first).
#[test]
fn two_changes_in_one_revalidation_are_each_checked() {
    let mut r = rig(&["table=0,priority=0,udp,nw_src=10.0.0.2,actions=drop"]);
    assert!(r.out_ports("p1", &udp(0x0a00_0003, 0, 64)).is_empty());
    // The megaflow matches nw_src only (not nw_proto); both rules below mask nw_proto.
    r.of.add_flows_text(
        "br0",
        &["table=0,priority=0,udp,nw_src=10.0.0.0,actions=drop"],
    )
    .expect("valid");
    r.of.add_flows_text("br0", &["table=0,priority=0,udp,actions=output:p2"])
        .expect("valid");
    assert_eq!(r.out_ports("p1", &udp(0x0a00_0003, 0, 64)), ["p2"]);
}
