//! The ferrovs side of `ferrovs-bench datapath`: pcap replay -> bridge -> null on one PMD
//! thread, the same points as OVS-DPDK.
//!
//! Per point: the replay -> null ceiling first (the same pcap copied into pool buffers and
//! sunk, no switch, one thread on the PMD core), then a fresh switch: bridge `br0` with `p0`
//! (OpenFlow port 1, the pcap replay) and `p1` (port 2, a null sink), the rule set loaded
//! through [`OfDatapath::flow_mods`] in bundles (timed: `add_flows_secs`), one PMD thread
//! pinned to the PMD core. Warm-up samples the PMD's counters every second until the last
//! three 1-s rates differ by less than 3 % and less than 0.1 % of the packets upcall (cap:
//! `warmup_max_secs`); the window then reads the sink's tx counter and the PMD's counters
//! twice, `seconds` apart. Cycles per packet are the PMD's busy TSC cycles (rx copy included,
//! as OVS's) over its packets; the PMD's CPU share is its thread's run time over the window.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use datapath::netdev::null::NullNetdev;
use datapath::netdev::pcap_replay::{PcapReplay, ReplayConfig};
use datapath::netdev::Netdev;
use datapath::ofproto::OfDatapath;
use datapath::pcap::Capture;
use datapath::{cycles, Batch, DpPort, PmdConfig, PmdStats, PmdThreads, Pool};
use pipeline::switch::{FlowMod, Switch};

use crate::pcap::ensure_pcap;
use crate::point::{Hits, Point, PointResult, RunOptions};
use crate::rules::rules_text;

/// The system name in results.
pub const SYSTEM: &str = "ferrovs";

/// Flow_mods per bundle when loading a rule set.
const BUNDLE: usize = 16_384;

/// Resident set size of this process, bytes.
pub fn rss_bytes() -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/statm") else {
        return 0;
    };
    let pages: u64 = s
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// Run time (ns) of this process's thread called `name`, from its schedstat.
fn thread_run_ns(name: &str) -> Option<u64> {
    for t in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.trim() == name {
            let s = std::fs::read_to_string(t.path().join("schedstat")).ok()?;
            return s.split_whitespace().next()?.parse().ok();
        }
    }
    None
}

/// The replay -> null rate of `capture` on one thread pinned to `core`, over `secs`.
pub fn ceiling_mpps(capture: &Arc<Capture>, core: Option<usize>, secs: f64) -> anyhow::Result<f64> {
    let capture = capture.clone();
    let h = std::thread::Builder::new().name("ceiling".into()).spawn(
        move || -> anyhow::Result<f64> {
            if let Some(c) = core {
                core_affinity::set_for_current(core_affinity::CoreId { id: c });
            }
            let rx = PcapReplay::new("p0", capture, ReplayConfig::default())?;
            let sink = NullNetdev::new("p1", 1);
            let pool = Pool::default();
            let mut batch = Batch::new();
            // Warm the pool and caches for a tenth of the window first.
            let warm = Instant::now();
            while warm.elapsed().as_secs_f64() < secs / 10.0 {
                rx.recv(0, &pool, &mut batch);
                sink.send(0, &mut batch);
            }
            let before = sink.stats().tx_packets;
            let t0 = Instant::now();
            let dur = Duration::from_secs_f64(secs);
            while t0.elapsed() < dur {
                for _ in 0..64 {
                    rx.recv(0, &pool, &mut batch);
                    sink.send(0, &mut batch);
                }
            }
            let n = sink.stats().tx_packets - before;
            Ok(n as f64 / t0.elapsed().as_secs_f64() / 1e6)
        },
    )?;
    h.join()
        .map_err(|_| anyhow::anyhow!("the ceiling thread panicked"))?
}

/// A switch with `br0`, `p0` (port 1) and `p1` (port 2) and the point's rules loaded;
/// returns it with the seconds the load took.
pub fn build_switch(point: &Point) -> anyhow::Result<(OfDatapath, f64, u64)> {
    let mut sw = Switch::new();
    sw.vsctl(
        "add-br br0 -- set bridge br0 fail_mode=secure -- add-port br0 p0 -- set interface p0 ofport_request=1 \
         -- add-port br0 p1 -- set interface p1 ofport_request=2",
    )
    .map_err(|e| anyhow::anyhow!("building the bridge: {e}"))?;
    let text = rules_text(point.ruleset, point.flows, "p1");
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let entries = sw
        .parse_flows("br0", &lines, "", openflow::ofctl::flow::FlowCommand::Add)
        .map_err(|e| anyhow::anyhow!("parsing the rules: {e}"))?;
    let n = entries.len() as u64;
    let of = OfDatapath::new(sw);
    let t0 = Instant::now();
    let mut it = entries.into_iter().map(FlowMod::add).peekable();
    while it.peek().is_some() {
        let chunk: Vec<FlowMod> = it.by_ref().take(BUNDLE).collect();
        of.flow_mods("br0", chunk)
            .map_err(|e| anyhow::anyhow!("loading the rules: {e}"))?;
    }
    Ok((of, t0.elapsed().as_secs_f64(), n))
}

/// Measures `point` on ferrovs.
pub fn run_point(point: &Point, opts: &RunOptions) -> anyhow::Result<PointResult> {
    let path = ensure_pcap(&opts.pcap_dir, point)?;
    let capture =
        Arc::new(Capture::read(&path).with_context(|| format!("reading {}", path.display()))?);
    let ceiling = ceiling_mpps(&capture, opts.pmd_core, opts.seconds.clamp(1.0, 5.0))?;

    let (of, add_secs, n_rules) = build_switch(point)?;
    let dp = of.datapath().clone();
    let (p0_dp, p1_dp) = {
        let sw = of.switch();
        let l = sw.layout();
        let dp_of = |name: &str| {
            l.port_by_name(name)
                .and_then(|p| p.dp_port)
                .ok_or_else(|| anyhow::anyhow!("{name} has no datapath port"))
        };
        (dp_of("p0")?, dp_of("p1")?)
    };
    let sink = Arc::new(NullNetdev::new("p1", 1));
    dp.add_port(DpPort {
        dp_port: p1_dp,
        netdev: sink.clone(),
        vlan_limit: 1,
    });
    let rx = Arc::new(PcapReplay::new("p0", capture, ReplayConfig::default())?);
    let cores: Vec<usize> = opts.pmd_core.into_iter().collect();
    let cfg = PmdConfig::default();
    let threads = PmdThreads::spawn(&dp, 1, &cores, &cfg);
    // Traffic starts when the port appears (as OVS's p0 is added last).
    dp.add_port(DpPort {
        dp_port: p0_dp,
        netdev: rx,
        vlan_limit: 1,
    });

    let sample = || PmdStats::sum(&dp.pmd_stats());
    let warm0 = Instant::now();
    let mut rates: Vec<f64> = Vec::new();
    let mut prev = sample();
    let mut prev_t = Instant::now();
    let mut timed_out = false;
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let s = sample();
        let dt = prev_t.elapsed().as_secs_f64();
        let dpk = s.packets - prev.packets;
        let dup = s.upcalls - prev.upcalls;
        rates.push(dpk as f64 / dt);
        prev = s;
        prev_t = Instant::now();
        let el = warm0.elapsed().as_secs_f64();
        let n = rates.len();
        let stable = n >= 3 && {
            let last = &rates[n - 3..];
            let (lo, hi) = last
                .iter()
                .fold((f64::MAX, 0f64), |(lo, hi), r| (lo.min(*r), hi.max(*r)));
            hi > 0.0 && (hi - lo) / hi < 0.03
        };
        if el >= opts.warmup_min_secs.min(opts.warmup_max_secs) && stable && dup * 1000 <= dpk {
            break;
        }
        if el >= opts.warmup_max_secs {
            timed_out = true;
            break;
        }
    }
    let warmup_secs = warm0.elapsed().as_secs_f64();

    let s0 = sample();
    let tx0 = sink.stats().tx_packets;
    let run0 = thread_run_ns("pmd0");
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(opts.seconds));
    let s1 = sample();
    let tx1 = sink.stats().tx_packets;
    let run1 = thread_run_ns("pmd0");
    let secs = t0.elapsed().as_secs_f64();
    let rss = rss_bytes();
    let final_stats = threads.stop();

    let mut r = PointResult::new(SYSTEM, point);
    let pk = s1.packets - s0.packets;
    r.mpps = (tx1 - tx0) as f64 / secs / 1e6;
    r.mpps_min = r.mpps;
    r.mpps_max = r.mpps;
    r.cycles_per_pkt = if pk == 0 {
        0.0
    } else {
        (s1.busy_cycles - s0.busy_cycles) as f64 / pk as f64
    };
    r.hits = Hits {
        simple: 0,
        emc: s1.emc_hits - s0.emc_hits,
        smc: 0,
        megaflow: s1.megaflow_hits - s0.megaflow_hits,
        upcall: s1.upcalls - s0.upcalls,
    };
    r.megaflows = s1.megaflows;
    r.rss_bytes = rss;
    r.ceiling_mpps = Some(ceiling);
    r.ceiling_source = Some("replay -> null, one thread on the PMD core (datapath::netdev)".into());
    r.ratio_to_ceiling = (ceiling > 0.0).then(|| r.mpps / ceiling);
    r.pmd_cpu_share = match (run0, run1) {
        (Some(a), Some(b)) => Some((b - a) as f64 / 1e9 / secs),
        _ => None,
    };
    r.seconds = secs;
    r.warmup_secs = warmup_secs;
    r.warmup_timeout = timed_out;
    r.of_rules = Some(n_rules);
    r.add_flows_secs = Some(add_secs);
    let mut extra = serde_json::Map::new();
    let drops: u64 = s1.drops.total() - s0.drops.total();
    extra.insert("drops".into(), drops.into());
    extra.insert("cache_bytes".into(), s1.cache_bytes.into());
    extra.insert(
        "megaflow_limit_hits".into(),
        (s1.megaflow_limit_hits - s0.megaflow_limit_hits).into(),
    );
    extra.insert("tsc_hz".into(), cycles::hz().into());
    extra.insert(
        "rules_per_sec".into(),
        serde_json::json!(if add_secs > 0.0 {
            n_rules as f64 / add_secs
        } else {
            0.0
        }),
    );
    if let Some(f) = final_stats.first() {
        extra.insert("emc_off".into(), f.emc_off.into());
    }
    r.extra = extra;
    Ok(r)
}
