//! Extraction throughput: a TCP/IPv4 packet, a VLAN-tagged UDP/IPv4 packet and a TCP/IPv6
//! packet with an extension header.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use packet::builder::Ipv6ExtKind;
use packet::{extract, FlowKey, PacketBuilder};

const A: [u8; 6] = [2, 0, 0, 0, 0, 1];
const B: [u8; 6] = [2, 0, 0, 0, 0, 2];

fn frames() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        (
            "tcp-ipv4",
            PacketBuilder::ethernet(A, B)
                .ipv4([10, 0, 0, 1], [10, 0, 0, 2])
                .tcp(40000, 80)
                .payload(&[0; 10])
                .build(),
        ),
        (
            "vlan-udp-ipv4",
            PacketBuilder::ethernet(A, B)
                .vlan(100, 0)
                .ipv4([10, 0, 0, 1], [10, 0, 0, 2])
                .udp(5000, 5001)
                .payload(&[0; 18])
                .build(),
        ),
        (
            "tcp-ipv6-ext",
            PacketBuilder::ethernet(A, B)
                .ipv6(
                    [0x2001, 0xdb8, 0, 0, 0, 0, 0, 1],
                    [0x2001, 0xdb8, 0, 0, 0, 0, 0, 2],
                )
                .ipv6_ext(Ipv6ExtKind::DestinationOptions, &[])
                .tcp(40000, 443)
                .build(),
        ),
    ]
}

fn bench_extract(c: &mut Criterion) {
    let mut group = c.benchmark_group("extract");
    group.throughput(Throughput::Elements(1));
    for (name, frame) in frames() {
        let mut key = FlowKey::default();
        group.bench_function(name, |b| {
            b.iter(|| black_box(extract(black_box(&frame), &mut key)));
        });
    }
    group.finish();
}

criterion_group!(benches, bench_extract);
criterion_main!(benches);
