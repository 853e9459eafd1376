//! One PMD driven by hand on this thread: pcap replay -> bridge -> null, for profiling the
//! cached path without threads (`perf record` on this process sees only the PMD's work).
//!
//! ```text
//! cargo run --release -p datapath --example pmd_null -- [--flows 1000] [--ruleset exact]
//!     [--frame-len 64] [--seconds 5] [--megaflow-limit N] [--emc ENTRIES]
//! ```
//!
//! Rule sets as `ferrovs-bench datapath`: `single`, `single-udp`, `exact`, `mixed`, `masks8`.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use datapath::flows::{exact_rule, flows_pcap, masks8_rule, mixed_prefix_rule};
use datapath::netdev::null::NullNetdev;
use datapath::netdev::pcap_replay::{PcapReplay, ReplayConfig};
use datapath::netdev::Netdev;
use datapath::ofproto::OfDatapath;
use datapath::pcap::Capture;
use datapath::{cycles, DpPort, Pmd, PmdConfig};
use pipeline::switch::{FlowMod, Switch};

fn rules(ruleset: &str, flows: u32) -> Vec<String> {
    let mut v: Vec<String> = match ruleset {
        "single" => return vec!["priority=0,actions=output:p1".into()],
        "single-udp" => return vec!["priority=1,udp,actions=output:p1".into()],
        "masks8" => (0..flows).map(|i| masks8_rule(i, "p1")).collect(),
        "mixed" => (0..flows)
            .step_by(2)
            .map(|i| exact_rule(i, "p1"))
            .chain([mixed_prefix_rule("p1")])
            .collect(),
        _ => (0..flows).map(|i| exact_rule(i, "p1")).collect(),
    };
    v.push("priority=0,actions=drop".into());
    v
}

/// Nanoseconds this thread has been on a CPU.
fn run_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn main() -> ExitCode {
    let mut flows = 1000u32;
    let mut ruleset = "exact".to_string();
    let mut frame_len = 64usize;
    let mut seconds = 5.0f64;
    let mut cfg = PmdConfig::default();
    let mut it = std::env::args().skip(1);
    while let Some(f) = it.next() {
        let v = it.next().unwrap_or_default();
        match f.as_str() {
            "--flows" => flows = v.parse().unwrap_or(flows),
            "--ruleset" => ruleset = v,
            "--frame-len" => frame_len = v.parse().unwrap_or(frame_len),
            "--seconds" => seconds = v.parse().unwrap_or(seconds),
            "--megaflow-limit" => cfg.megaflow_limit = v.parse().unwrap_or(cfg.megaflow_limit),
            "--emc" => cfg.emc_entries = v.parse().unwrap_or(cfg.emc_entries),
            other => {
                eprintln!("unknown argument {other}");
                return ExitCode::FAILURE;
            }
        }
    }
    let mut sw = Switch::new();
    if let Err(e) = sw.vsctl(
        "add-br br0 -- set bridge br0 fail_mode=secure -- add-port br0 p0 -- set interface p0 ofport_request=1 -- add-port br0 p1 -- set interface p1 ofport_request=2",
    ) {
        eprintln!("{e}");
        return ExitCode::FAILURE;
    }
    let text = rules(&ruleset, flows);
    let refs: Vec<&str> = text.iter().map(String::as_str).collect();
    let entries = match sw.parse_flows("br0", &refs, "", openflow::ofctl::flow::FlowCommand::Add) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let (p0, p1) = {
        let l = sw.layout();
        let dp = |n: &str| l.port_by_name(n).and_then(|p| p.dp_port).unwrap_or(0);
        (dp("p0"), dp("p1"))
    };
    let of = OfDatapath::new(sw);
    let t0 = Instant::now();
    let n_rules = entries.len();
    if let Err(e) = of.flow_mods("br0", entries.into_iter().map(FlowMod::add).collect()) {
        eprintln!("{e}");
        return ExitCode::FAILURE;
    }
    println!(
        "{n_rules} rules in {:.3} s ({:.0} rules/s)",
        t0.elapsed().as_secs_f64(),
        n_rules as f64 / t0.elapsed().as_secs_f64()
    );
    let capture = match Capture::parse(&flows_pcap(flows, frame_len)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let rx = match PcapReplay::new("p0", capture, ReplayConfig::default()) {
        Ok(r) => Arc::new(r),
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let sink = Arc::new(NullNetdev::new("p1", 1));
    let dp = of.datapath();
    dp.add_port(DpPort {
        dp_port: p0,
        netdev: rx,
        vlan_limit: 1,
    });
    dp.add_port(DpPort {
        dp_port: p1,
        netdev: sink.clone(),
        vlan_limit: 1,
    });
    let mut pmd = Pmd::new(dp.clone(), 0, 1, cfg);
    // Warm up: every flow installed.
    let w = Instant::now();
    while w.elapsed().as_secs_f64() < seconds / 2.0 {
        for _ in 0..1024 {
            pmd.run_once();
        }
    }
    let s0 = pmd.stats();
    let run0 = run_ns();
    let tx0 = sink.stats().tx_packets;
    let c0 = cycles::now();
    let t = Instant::now();
    while t.elapsed().as_secs_f64() < seconds {
        for _ in 0..1024 {
            pmd.run_once();
        }
    }
    let secs = t.elapsed().as_secs_f64();
    let c = cycles::now() - c0;
    let run = run_ns().saturating_sub(run0);
    let s1 = pmd.stats();
    let pk = s1.packets - s0.packets;
    println!(
        "{ruleset} {flows} flows {frame_len} B: {:.2} Mpps, {:.1} cycles/packet (busy {:.1}), emc {:.1}% megaflow {:.1}% upcall {:.3}%, megaflows {}, cache {} KiB",
        (sink.stats().tx_packets - tx0) as f64 / secs / 1e6,
        c as f64 / pk.max(1) as f64,
        (s1.busy_cycles - s0.busy_cycles) as f64 / pk.max(1) as f64,
        100.0 * (s1.emc_hits - s0.emc_hits) as f64 / pk.max(1) as f64,
        100.0 * (s1.megaflow_hits - s0.megaflow_hits) as f64 / pk.max(1) as f64,
        100.0 * (s1.upcalls - s0.upcalls) as f64 / pk.max(1) as f64,
        s1.megaflows,
        s1.cache_bytes / 1024,
    );
    println!(
        "drops {} (upcall limit {}), forwarded by translation at the megaflow limit {}",
        s1.drops.total() - s0.drops.total(),
        s1.drops.get(datapath::DropReason::UpcallLimit)
            - s0.drops.get(datapath::DropReason::UpcallLimit),
        s1.megaflow_limit_hits - s0.megaflow_limit_hits
    );
    println!(
        "on-CPU: {:.0}% of the window, {:.1} ns/packet on CPU = {:.2} Mpps per busy core",
        100.0 * run as f64 / 1e9 / secs,
        run as f64 / pk.max(1) as f64,
        pk as f64 / (run as f64 / 1e9) / 1e6
    );
    ExitCode::SUCCESS
}
