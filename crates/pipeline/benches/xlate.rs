//! Criterion benches of translation (the upcall's cost): a packet through three tables of
//! 1K and 16K rules with a resubmit and field writes, NORMAL with a learned destination, and
//! a chain of patched bridges.

#![allow(missing_docs)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use pipeline::odp::parse_key;
use pipeline::switch::Switch;
use pipeline::xlate::XlateOptions;

const PKT: &str = "in_port(1),eth(src=50:54:00:00:00:05,dst=50:54:00:00:00:07),eth_type(0x0800),\
                   ipv4(src=10.0.3.7,dst=10.1.2.9,proto=6,tos=0,ttl=64,frag=no),tcp(src=1234,dst=80)";

fn tables(n: usize) -> Switch {
    let mut sw = Switch::new();
    sw.vsctl("add-br br0 -- add-port br0 p1 -- add-port br0 p2 -- add-port br0 p3")
        .expect("valid setup");
    let mut flows = vec![
        "table=0,priority=1,ip,actions=dec_ttl,resubmit(,1)".to_string(),
        "table=1,priority=1,actions=mod_dl_dst:50:54:00:00:00:09,goto_table:2".to_string(),
        "table=2,priority=1,actions=output:2".to_string(),
    ];
    for i in 0..n {
        let (a, b) = ((i >> 8) & 0xff, i & 0xff);
        flows.push(format!(
            "table={},priority=10,tcp,nw_dst=10.{a}.{b}.0/24,tp_dst={},actions=output:3",
            i % 3,
            1000 + i % 100
        ));
    }
    let flows: Vec<&str> = flows.iter().map(String::as_str).collect();
    sw.add_flows_text("br0", &flows, "-O OpenFlow13")
        .expect("valid flows");
    sw
}

fn translate(c: &mut Criterion) {
    let mut g = c.benchmark_group("translate");
    g.measurement_time(Duration::from_secs(2)).sample_size(20);
    let key = parse_key(PKT).expect("valid key");
    for n in [1000usize, 16384] {
        let sw = tables(n);
        g.bench_with_input(BenchmarkId::new("three-tables", n), &sw, |b, sw| {
            b.iter(|| black_box(sw.upcall(black_box(&key), XlateOptions::default())))
        });
    }
    let mut sw = Switch::new();
    sw.vsctl("add-br br0 -- set bridge br0 fail-mode=standalone -- add-port br0 p1 -- add-port br0 p2 tag=10")
        .expect("valid setup");
    sw.vsctl("set Port p1 tag=10").expect("valid");
    sw.fdb_add("br0", "p2", 10, 0x5054_0000_0007)
        .expect("port exists");
    g.bench_function("normal-learned", |b| {
        b.iter(|| black_box(sw.upcall(black_box(&key), XlateOptions::default())))
    });
    let mut sw = Switch::new();
    let mut cmd = String::from("add-br br0 -- add-port br0 p1");
    for i in 1..=4 {
        cmd.push_str(&format!(
            " -- add-br br{i} -- add-port br{p} patch{p}{i} -- set interface patch{p}{i} type=patch \
             options:peer=patch{i}{p} ofport_request=10 -- add-port br{i} patch{i}{p} \
             -- set interface patch{i}{p} type=patch options:peer=patch{p}{i} ofport_request=20",
            p = i - 1
        ));
    }
    sw.vsctl(&cmd).expect("valid chain");
    sw.vsctl("add-port br4 p5").expect("valid");
    for i in 0..=3 {
        sw.add_flows_text(&format!("br{i}"), &["actions=output:10"], "")
            .expect("valid flow");
    }
    sw.add_flows_text("br4", &["actions=output:p5"], "")
        .expect("valid flow");
    g.bench_function("patch-chain-5", |b| {
        b.iter(|| black_box(sw.upcall(black_box(&key), XlateOptions::default())))
    });
    g.finish();
}

criterion_group!(benches, translate);
criterion_main!(benches);
