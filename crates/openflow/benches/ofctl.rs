//! Criterion benches of the flow language: parsing flows, printing matches, and the
//! prerequisite check the classifier runs on every insertion.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use openflow::ofctl::{format_flow_key, format_match, parse_flow, parse_flow_key, ParseOptions};

const FLOWS: [&str; 4] = [
    "priority=300,tcp,nw_dst=10.0.0.0/8,tp_dst=80,actions=output:2",
    "table=1,priority=200,ip,nw_src=192.168.1.0/24,reg3=0x5/0xff,actions=drop",
    "icmp6,in_port=3,ipv6_src=2001:db8:3c4d:1::1,icmp_type=135,nd_target=fec0::1,actions=drop",
    "arp,dl_src=00:0a:e4:25:6b:b0,arp_op=1,arp_spa=10.0.0.1,actions=NORMAL",
];

fn bench_parse(c: &mut Criterion) {
    let opts = ParseOptions::default();
    c.bench_function("parse_flow", |b| {
        b.iter(|| {
            for f in FLOWS {
                let _ = black_box(parse_flow(black_box(f), &opts));
            }
        })
    });
    let parsed: Vec<_> = FLOWS
        .iter()
        .filter_map(|f| parse_flow(f, &opts).ok())
        .collect();
    c.bench_function("format_match", |b| {
        b.iter(|| {
            for p in &parsed {
                black_box(format_match(
                    black_box(&p.flow.flow_match),
                    Some(p.flow.priority),
                ));
            }
        })
    });
    c.bench_function("check_prerequisites", |b| {
        b.iter(|| {
            for p in &parsed {
                let _ = black_box(black_box(&p.flow.flow_match).check_prerequisites());
            }
        })
    });
    let key = parse_flow_key(
        "tcp,in_port=1,vlan_tci=0x0000,dl_src=50:54:00:00:00:05,dl_dst=50:54:00:00:00:07,\
         nw_src=192.168.0.1,nw_dst=192.168.0.2,nw_tos=0,nw_ecn=0,nw_ttl=128,nw_frag=no,\
         tp_src=8,tp_dst=80,tcp_flags=0",
    )
    .expect("the key parses");
    c.bench_function("format_flow_key", |b| {
        b.iter(|| black_box(format_flow_key(black_box(&key))))
    });
}

criterion_group!(benches, bench_parse);
criterion_main!(benches);
