//! Rule insertion under traffic: one PMD thread forwards a replay of `established` flows whose
//! rules are never touched, while this thread inserts `rules` new exact rules through the API
//! ([`OfDatapath::flow_mods`], bundles of `bundle`). Reports insertions per second and the
//! established flows' rate during the insertion as a ratio to their rate without it, and
//! checks that no established packet was dropped or took a stale or wrong decision: the
//! replay port dropped none on receive, every packet the PMD received reached
//! `p1` (the established flows' port, counted per flow by the null sink), none reached `p2`
//! (the new rules' port), and each flow's count is within one replay pass of the others.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use datapath::flows::{flow_index, flows_pcap};
use datapath::netdev::null::NullNetdev;
use datapath::netdev::pcap_replay::{PcapReplay, ReplayConfig};
use datapath::netdev::Netdev;
use datapath::ofproto::OfDatapath;
use datapath::pcap::Capture;
use datapath::{DpPort, PmdConfig, PmdStats, PmdThreads};
use pipeline::switch::{FlowMod, Switch};
use serde::Serialize;

use crate::rules::exact_rule;

/// What to run.
#[derive(Debug, Clone)]
pub struct InsertOptions {
    /// Flows of the replay, each with its own exact rule (output to `p1`).
    pub established: u32,
    /// New exact rules to insert (output to `p2`), for flows the replay never sends.
    pub rules: u32,
    /// Flow_mods per bundle.
    pub bundle: usize,
    /// Length of the baseline window (no insertion), seconds.
    pub baseline_secs: f64,
    /// Warm-up before the baseline, seconds.
    pub warmup_secs: f64,
    /// Core of the PMD thread.
    pub pmd_core: Option<usize>,
    /// Core of the inserting thread (this one).
    pub inserter_core: Option<usize>,
}

impl Default for InsertOptions {
    fn default() -> Self {
        InsertOptions {
            established: 1000,
            rules: 256_000,
            bundle: 8192,
            baseline_secs: 3.0,
            warmup_secs: 2.0,
            pmd_core: Some(1),
            inserter_core: Some(0),
        }
    }
}

/// What was measured.
#[derive(Debug, Clone, Serialize)]
pub struct InsertResult {
    /// Established flows.
    pub established: u32,
    /// Rules inserted.
    pub rules: u32,
    /// Flow_mods per bundle.
    pub bundle: usize,
    /// Seconds the insertion took (all bundles, each acknowledged).
    pub insert_secs: f64,
    /// Rules per second.
    pub rules_per_sec: f64,
    /// CPU time the inserting thread spent in the insertion, seconds (below `insert_secs`
    /// when it waited for acknowledgements or another process took its core).
    pub insert_cpu_secs: f64,
    /// Rules per second of the inserting thread's CPU time.
    pub rules_per_cpu_sec: f64,
    /// Minor page faults the inserting thread took during the insertion (first touches of
    /// memory the process had not used before: the tables growing).
    pub insert_page_faults: u64,
    /// Established flows' rate without insertion, Mpps.
    pub baseline_mpps: f64,
    /// Their rate during the insertion, Mpps.
    pub during_mpps: f64,
    /// `during_mpps / baseline_mpps`.
    pub ratio: f64,
    /// Packets the PMD received.
    pub received: u64,
    /// Packets that reached `p1`.
    pub delivered: u64,
    /// Packets that reached `p2` (wrong decisions).
    pub wrong_port: u64,
    /// Packets dropped: by the PMD, any reason, and by the replay port on receive
    /// (`rx_dropped`).
    pub dropped: u64,
    /// Of `dropped`, the packets the replay port dropped on receive (no buffer in the PMD's
    /// pool, or too long for one): they never reached the PMD, so `received` does not count
    /// them.
    pub rx_dropped: u64,
    /// Smallest and largest per-flow count at `p1`.
    pub per_flow_min: u64,
    /// See `per_flow_min`.
    pub per_flow_max: u64,
    /// Flows seen at `p1`.
    pub flows_seen: usize,
    /// Megaflows at the end (the established ones survive the insertion).
    pub megaflows: u64,
    /// Megaflows retranslated by revalidation during the run.
    pub retranslated: u64,
}

impl InsertResult {
    /// Whether no established packet was lost or misdirected.
    pub fn is_clean(&self) -> bool {
        self.wrong_port == 0
            && self.dropped == 0
            && self.received == self.delivered
            && self.per_flow_max - self.per_flow_min <= 1
    }
}

fn pin(core: Option<usize>) {
    if let Some(c) = core {
        core_affinity::set_for_current(core_affinity::CoreId { id: c });
    }
}

/// Seconds this thread has been on a CPU (0 where `/proc` does not say).
fn thread_cpu_secs() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0.0, |ns| ns as f64 / 1e9)
}

/// Minor page faults of the calling thread so far (`/proc/thread-self/stat`, field 10), 0 if
/// unreadable.
fn thread_minor_faults() -> u64 {
    std::fs::read_to_string("/proc/thread-self/stat")
        .ok()
        .and_then(|s| {
            // The command name (field 2) may hold spaces: count from the closing parenthesis.
            let rest = &s[s.rfind(')')? + 1..];
            rest.split_whitespace().nth(7)?.parse().ok()
        })
        .unwrap_or(0)
}

fn total(stats: &[PmdStats]) -> (u64, u64, u64) {
    let t = PmdStats::sum(stats);
    (t.packets, t.drops.total(), t.retranslated)
}

/// Runs the scenario.
pub fn run_insert(opts: &InsertOptions) -> anyhow::Result<InsertResult> {
    pin(opts.inserter_core);
    let mut sw = Switch::new();
    sw.vsctl(
        "add-br br0 -- set bridge br0 fail_mode=secure \
         -- add-port br0 p0 -- set interface p0 ofport_request=1 \
         -- add-port br0 p1 -- set interface p1 ofport_request=2 \
         -- add-port br0 p2 -- set interface p2 ofport_request=3",
    )
    .map_err(|e| anyhow::anyhow!("building the bridge: {e}"))?;
    let parse = |sw: &Switch, lines: &[String]| {
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        sw.parse_flows("br0", &refs, "", openflow::ofctl::flow::FlowCommand::Add)
            .map_err(|e| anyhow::anyhow!("parsing rules: {e}"))
    };
    let mut est: Vec<String> = (0..opts.established).map(|i| exact_rule(i, "p1")).collect();
    est.push("priority=0,actions=drop".into());
    let est = parse(&sw, &est)?;
    let new_lines: Vec<String> = (opts.established..opts.established + opts.rules)
        .map(|i| exact_rule(i, "p2"))
        .collect();
    let new_rules = parse(&sw, &new_lines)?;
    drop(new_lines);
    let dp_of = |name: &str| {
        sw.layout()
            .port_by_name(name)
            .and_then(|p| p.dp_port)
            .with_context(|| format!("{name} has no datapath port"))
    };
    let (p0, p1, p2) = (dp_of("p0")?, dp_of("p1")?, dp_of("p2")?);
    let of = OfDatapath::new(sw);
    of.flow_mods("br0", est.into_iter().map(FlowMod::add).collect())
        .map_err(|e| anyhow::anyhow!("loading the established rules: {e}"))?;

    let dp = of.datapath().clone();
    let classify: datapath::netdev::null::FlowClassifier =
        Arc::new(|p: &datapath::Packet| flow_index(p.data()).map(u64::from));
    let sink1 = Arc::new(NullNetdev::new("p1", 1).with_flow_classifier(classify));
    let sink2 = Arc::new(NullNetdev::new("p2", 1));
    for (n, s) in [(p1, sink1.clone()), (p2, sink2.clone())] {
        dp.add_port(DpPort {
            dp_port: n,
            netdev: s,
            vlan_limit: 1,
        });
    }
    let capture = Capture::parse(&flows_pcap(opts.established, 64))?;
    let rx = Arc::new(PcapReplay::new("p0", capture, ReplayConfig::default())?);
    let cores: Vec<usize> = opts.pmd_core.into_iter().collect();
    let threads = PmdThreads::spawn(&dp, 1, &cores, &PmdConfig::default());
    dp.add_port(DpPort {
        dp_port: p0,
        netdev: rx.clone(),
        vlan_limit: 1,
    });
    std::thread::sleep(Duration::from_secs_f64(opts.warmup_secs));

    let tx = || sink1.stats().tx_packets;
    let (b0, t0) = (tx(), Instant::now());
    std::thread::sleep(Duration::from_secs_f64(opts.baseline_secs));
    let baseline_mpps = (tx() - b0) as f64 / t0.elapsed().as_secs_f64() / 1e6;

    // The bundles are made before the clock starts, as the rules were parsed before it: what
    // is timed is the API call (`OfDatapath::flow_mods`), not the copying of its argument.
    let mut it = new_rules.into_iter().map(FlowMod::add).peekable();
    let mut bundles = Vec::new();
    while it.peek().is_some() {
        bundles.push(
            it.by_ref()
                .take(opts.bundle.max(1))
                .collect::<Vec<FlowMod>>(),
        );
    }
    let (d0, t1, c1, f1) = (
        tx(),
        Instant::now(),
        thread_cpu_secs(),
        thread_minor_faults(),
    );
    for chunk in bundles {
        of.flow_mods("br0", chunk)
            .map_err(|e| anyhow::anyhow!("inserting: {e}"))?;
    }
    // The classifier's replay of the last bundle onto its other version would run at the
    // next change: it is done and counted here, so that a single large bundle is not
    // credited with work it only put off.
    of.settle("br0")
        .map_err(|e| anyhow::anyhow!("settling: {e}"))?;
    let insert_secs = t1.elapsed().as_secs_f64();
    let insert_cpu_secs = thread_cpu_secs() - c1;
    let insert_page_faults = thread_minor_faults().saturating_sub(f1);
    let during_mpps = (tx() - d0) as f64 / insert_secs / 1e6;

    // Stop the replay, then the PMD, so that every received packet is accounted for.
    dp.remove_port(p0);
    std::thread::sleep(Duration::from_millis(50));
    let stats = threads.stop();
    let (received, pmd_dropped, retranslated) = total(&stats);
    let rx_dropped = rx.stats().drops.total();
    let counts = sink1.flow_counts();
    let per_flow: Vec<u64> = counts.flows.values().map(|c| c.packets).collect();
    Ok(InsertResult {
        established: opts.established,
        rules: opts.rules,
        bundle: opts.bundle,
        insert_secs,
        rules_per_sec: f64::from(opts.rules) / insert_secs,
        insert_cpu_secs,
        rules_per_cpu_sec: if insert_cpu_secs > 0.0 {
            f64::from(opts.rules) / insert_cpu_secs
        } else {
            0.0
        },
        insert_page_faults,
        baseline_mpps,
        during_mpps,
        ratio: if baseline_mpps > 0.0 {
            during_mpps / baseline_mpps
        } else {
            0.0
        },
        received,
        delivered: sink1.stats().tx_packets,
        wrong_port: sink2.stats().tx_packets,
        dropped: pmd_dropped + rx_dropped,
        rx_dropped,
        per_flow_min: per_flow.iter().copied().min().unwrap_or(0),
        per_flow_max: per_flow.iter().copied().max().unwrap_or(0),
        flows_seen: per_flow.len(),
        megaflows: stats.iter().map(|s| s.megaflows).sum(),
        retranslated,
    })
}
