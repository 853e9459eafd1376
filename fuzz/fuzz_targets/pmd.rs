//! Arbitrary frames through a PMD: extraction, caches, upcalls through the real pipeline
//! (rewrites, VLAN push/pop, multiple outputs, NORMAL) and execution must never panic, and
//! every received frame is transmitted or dropped with a counted reason.
//!
//! Input: frames, each a 2-byte big-endian length and that many bytes; a frame's first byte
//! also picks the input port.
#![no_main]

use std::cell::RefCell;
use std::sync::Arc;

use datapath::netdev::memory::{MemoryConfig, MemoryNetdev};
use datapath::netdev::Netdev;
use datapath::ofproto::OfDatapath;
use datapath::{DpPort, Pmd, PmdConfig};
use libfuzzer_sys::fuzz_target;
use pipeline::switch::Switch;

struct Rig {
    pmd: Pmd,
    ports: Vec<Arc<MemoryNetdev>>,
    _of: OfDatapath,
}

fn rig() -> Rig {
    let mut sw = Switch::new();
    sw.vsctl("add-br br0 -- add-port br0 p1 -- add-port br0 p2 -- add-port br0 p3 tag=5")
        .expect("valid");
    let layout: Vec<(String, u32)> = sw
        .ports("br0")
        .expect("bridge")
        .iter()
        .filter_map(|p| Some((p.name.clone(), p.dp_port?)))
        .collect();
    let of = OfDatapath::new(sw);
    of.add_flows_text(
        "br0",
        &[
            "priority=10,udp,actions=mod_nw_src:1.2.3.4,mod_tp_dst:7,output:p2",
            "priority=9,tcp,actions=mod_vlan_vid:5,output:p3,strip_vlan,output:p2",
            "priority=8,dl_vlan=5,actions=strip_vlan,output:p2",
            "priority=7,ip,actions=dec_ttl,mod_nw_tos:8,output:p2,output:p3",
            "priority=6,ipv6,actions=mod_dl_src:02:00:00:00:00:09,output:p1",
            "priority=5,arp,actions=controller",
            "priority=1,actions=NORMAL",
        ],
    )
    .expect("valid flows");
    let mut ports = Vec::new();
    for (name, dp) in layout {
        let nd = Arc::new(MemoryNetdev::new(
            name,
            MemoryConfig {
                n_rxq: 1,
                n_txq: 1,
                rxq_len: 1024,
                txq_len: 1 << 20,
            },
        ));
        of.datapath().add_port(DpPort {
            dp_port: dp,
            netdev: nd.clone(),
            vlan_limit: 1,
        });
        ports.push(nd);
    }
    let pmd = Pmd::new(of.datapath().clone(), 0, 1, PmdConfig::default());
    Rig { pmd, ports, _of: of }
}

thread_local! {
    static RIG: RefCell<Option<Rig>> = const { RefCell::new(None) };
}

fuzz_target!(|data: &[u8]| {
    RIG.with(|cell| {
        let mut guard = cell.borrow_mut();
        let r = guard.get_or_insert_with(rig);
        let mut rest = data;
        let mut injected = 0u64;
        while rest.len() >= 2 {
            let len = usize::from(u16::from_be_bytes([rest[0], rest[1]])).min(rest.len() - 2);
            let frame = &rest[2..2 + len];
            rest = &rest[2 + len..];
            let port = frame.first().map_or(0, |b| usize::from(*b) % r.ports.len());
            if r.ports[port].inject(0, frame) {
                injected += 1;
            }
        }
        let before = r.pmd.stats();
        while r.ports.iter().any(|p| p.rx_pending(0) > 0) {
            r.pmd.run_once();
        }
        let after = r.pmd.stats();
        assert_eq!(after.packets - before.packets, injected);
        for p in &r.ports {
            p.take_all_tx();
        }
    });
});
