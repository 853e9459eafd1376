//! Microbenchmarks of the cached path, one stage at a time (criterion):
//!
//! - `extract/udp64`: a 60-byte UDP frame into a `FlowKey`;
//! - `megaflow/lookup-batch/N`: a batch of 32 keys against N exact 5-tuple megaflows (one
//!   subtable), hashed and prefetched as a batch; `megaflow/lookup-one/N` one key at a time;
//! - `emc/lookup-hit`: a verified EMC hit (two subtables, so the EMC is in use);
//! - `exec/set-ipv4-src`, `exec/push-pop-vlan`: header rewrites with incremental checksums;
//! - `pmd/replay-exact-1K`: a whole PMD iteration (replay rx, extraction, megaflow hit, execution,
//!   null tx) over 1K exact flows, per packet.
//!
//! Speed goals are read from `ferrovs-bench datapath` against the same run's baselines; these
//! say where the cycles of one packet go.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use datapath::emc::{key_hash, Emc, EmcMode};
use datapath::flows::{flow_frame, flow_tuple, flows_pcap};
use datapath::megaflow::MegaflowTable;
use datapath::netdev::null::NullNetdev;
use datapath::netdev::pcap_replay::{PcapReplay, ReplayConfig};
use datapath::ofproto::OfDatapath;
use datapath::pcap::Capture;
use datapath::{exec, DpPort, Pmd, PmdConfig, Pool, BATCH_SIZE};
use packet::extract::extract;
use packet::key::{fields, FlowKey};
use pipeline::odp::SetField;
use pipeline::switch::{FlowMod, Switch};

fn key_of(i: u32) -> FlowKey {
    let mut k = FlowKey::default();
    extract(&flow_frame(i, 64), &mut k);
    k.set_in_port(1);
    k
}

fn exact_mask() -> FlowKey {
    let mut m = FlowKey::default();
    for f in [
        fields::IN_PORT,
        fields::DL_TYPE,
        fields::NW_SRC,
        fields::NW_DST,
        fields::NW_PROTO,
        fields::TP_SRC,
        fields::TP_DST,
    ] {
        m.set(f, u128::MAX);
    }
    m.set(fields::NW_FRAG, 3);
    m
}

fn extraction(c: &mut Criterion) {
    let frame = flow_frame(7, 64);
    let mut key = FlowKey::default();
    c.bench_function("extract/udp64", |b| {
        b.iter(|| black_box(extract(black_box(&frame), &mut key)))
    });
}

fn megaflow(c: &mut Criterion) {
    let mut group = c.benchmark_group("megaflow");
    group.throughput(Throughput::Elements(BATCH_SIZE as u64));
    for n in [1_000u32, 256_000] {
        let mut t = MegaflowTable::new();
        let mask = exact_mask();
        for i in 0..n {
            t.insert(&key_of(i), &mask);
        }
        let keys: Vec<Vec<FlowKey>> = (0..64u32)
            .map(|b| {
                (0..u32::try_from(BATCH_SIZE).unwrap_or(32))
                    .map(|j| key_of((b * 7919 + j * 104_729) % n))
                    .collect()
            })
            .collect();
        let mut out = [None; BATCH_SIZE];
        let mut next = 0usize;
        group.bench_function(BenchmarkId::new("lookup-batch", n), |b| {
            b.iter(|| {
                out.fill(None);
                t.lookup_batch(&keys[next % keys.len()], &mut out);
                next += 1;
                black_box(&out);
            })
        });
        group.bench_function(BenchmarkId::new("lookup-one", n), |b| {
            b.iter(|| {
                for k in &keys[next % keys.len()] {
                    black_box(t.lookup(k));
                }
                next += 1;
            })
        });
    }
    group.finish();
}

fn emc(c: &mut Criterion) {
    let mut t = MegaflowTable::new();
    let mask = exact_mask();
    let ids: Vec<u32> = (0..1000).map(|i| t.insert(&key_of(i), &mask)).collect();
    let mut other = FlowKey::default();
    other.set(fields::IN_PORT, u128::MAX);
    t.insert(&FlowKey::default(), &other);
    let mut emc = Emc::new(1 << 16, EmcMode::Auto);
    let keys: Vec<FlowKey> = (0..1000).map(key_of).collect();
    for (k, id) in keys.iter().zip(&ids) {
        emc.offer(key_hash(k, t.used_words()), *id, &t);
    }
    let mut i = 0usize;
    c.bench_function("emc/lookup-hit", |b| {
        b.iter(|| {
            let k = &keys[i % keys.len()];
            i += 1;
            black_box(emc.lookup(key_hash(k, t.used_words()), k, &t))
        })
    });
    let hashes: Vec<u32> = keys.iter().map(|k| key_hash(k, t.used_words())).collect();
    let mut j = 0usize;
    c.bench_function("emc/lookup-batch32-hit (per batch)", |b| {
        b.iter(|| {
            let at = (j % (keys.len() / 32)) * 32;
            j += 1;
            let mut found = [None; 32];
            let hits = emc.lookup_batch(&hashes[at..at + 32], &keys[at..at + 32], &t, &mut found);
            black_box((hits, found))
        })
    });
}

fn execution(c: &mut Criterion) {
    let pool = Pool::default();
    let frame = flow_frame(3, 64);
    let mut pkt = pool.alloc_copy(&frame).expect("fits");
    let mut k = FlowKey::default();
    let info = extract(pkt.data(), &mut k);
    pkt.meta_mut().set_offsets(&info);
    let mut a = 0u32;
    c.bench_function("exec/set-ipv4-src", |b| {
        b.iter(|| {
            a = a.wrapping_add(1);
            black_box(exec::set_field(&mut pkt, &SetField::Ipv4Src(a), 17))
        })
    });
    c.bench_function("exec/push-pop-vlan", |b| {
        b.iter(|| {
            black_box(exec::push_vlan(&mut pkt, 0x8100, 0x1005));
            black_box(exec::pop_vlan(&mut pkt))
        })
    });
}

fn pmd(c: &mut Criterion) {
    let n = 1000u32;
    let mut sw = Switch::new();
    sw.vsctl("add-br br0 -- add-port br0 p0 -- add-port br0 p1")
        .expect("valid");
    let lines: Vec<String> = (0..n)
        .map(|i| {
            let (s, d, sp, dp) = flow_tuple(i);
            format!(
                "priority=100,udp,nw_src={s},nw_dst={d},tp_src={sp},tp_dst={dp},actions=output:p1"
            )
        })
        .collect();
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let entries = sw
        .parse_flows("br0", &refs, "", openflow::ofctl::flow::FlowCommand::Add)
        .expect("valid");
    let dp_of = |name: &str| {
        sw.layout()
            .port_by_name(name)
            .and_then(|p| p.dp_port)
            .expect("port")
    };
    let (p0, p1) = (dp_of("p0"), dp_of("p1"));
    let of = OfDatapath::new(sw);
    of.flow_mods("br0", entries.into_iter().map(FlowMod::add).collect())
        .expect("valid");
    let capture = Capture::parse(&flows_pcap(n, 64)).expect("pcap");
    let dp = of.datapath().clone();
    dp.add_port(DpPort {
        dp_port: p0,
        netdev: Arc::new(PcapReplay::new("p0", capture, ReplayConfig::default()).expect("pcap")),
        vlan_limit: 1,
    });
    dp.add_port(DpPort {
        dp_port: p1,
        netdev: Arc::new(NullNetdev::new("p1", 1)),
        vlan_limit: 1,
    });
    let mut pmd = Pmd::new(dp, 0, 1, PmdConfig::default());
    for _ in 0..100 {
        pmd.run_once();
    }
    let mut group = c.benchmark_group("pmd");
    group.throughput(Throughput::Elements(BATCH_SIZE as u64));
    group.bench_function("replay-exact-1K", |b| b.iter(|| black_box(pmd.run_once())));
    group.finish();
}

criterion_group!(benches, extraction, megaflow, emc, execution, pmd);
criterion_main!(benches);
