//! `ferrovs-bench`: benchmarks of ferrovs, with the baseline measured in the same run.
//!
//! `ferrovs-bench datapath` reproduces the matrix of `shared/peers/ovs-dpdk` on one PMD core:
//! pcap replay -> bridge -> null, frames of 64 B and 1518 B, 1K/8K/64K/256K flows, rule sets
//! `single`, `single-udp` and `exact`. For each point it prints Mpps, cycles per packet, the
//! hit mix per cache level, the megaflow count, RSS and the replay -> null ceiling of the
//! system; `--with-ovs` runs OVS-DPDK on the same pcaps (see [`ovs_dpdk`]) and prints the
//! ratio ferrovs / OVS. `--json` prints one JSON object a line per point and system.
//!
//! ```text
//! ferrovs-bench datapath --with-ovs --flows 1K --ruleset exact --frame-len 64 --seconds 10
//! ferrovs-bench ovs-cleanup        # after an interrupted run: stop our OVS, give back hugepages
//! ```

#![forbid(unsafe_code)]

use std::fs::File;
use std::io::Write as _;
use std::path::PathBuf;
use std::str::FromStr as _;

use anyhow::Context as _;
use bench::point::{self, Point, PointResult, Ruleset, RunOptions};
use bench::{ferrovs, ovs_dpdk, pcap};
use clap::{Args, Parser, Subcommand};
use serde_json::json;

#[derive(Debug, Parser)]
#[command(
    name = "ferrovs-bench",
    version,
    about = "ferrovs benchmarks against a baseline measured in the same run"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// pcap replay -> bridge -> null on one PMD core, the OVS-DPDK peer matrix.
    Datapath(Box<DatapathArgs>),
    /// Rule insertion under traffic: a PMD forwards established flows while new exact rules
    /// go through the flow_mod API in bundles; prints rules/s and the established rate ratio.
    Insert {
        /// Established flows (each with its own exact rule), replayed by the PMD.
        #[arg(long, default_value_t = 1000)]
        established: u32,
        /// New exact rules to insert (256K = 256000).
        #[arg(long, default_value = "256K", value_parser = parse_flows_list)]
        rules: u32,
        /// Flow_mods per bundle.
        #[arg(long, default_value_t = 8192)]
        bundle: usize,
        /// Baseline window without insertion, seconds.
        #[arg(long, default_value_t = 3.0)]
        baseline: f64,
        /// The PMD's core.
        #[arg(long, default_value_t = 1)]
        pmd_core: usize,
        /// Runs, each on a fresh switch; with more than one, the median rules/s and ratio
        /// follow (these shared machines vary by a third from run to run).
        #[arg(long, default_value_t = 1)]
        reps: usize,
        /// One JSON object per run instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Stop the private OVS-DPDK of an interrupted run and give back its hugepages.
    OvsCleanup {
        /// Root directory of the private OVS-DPDK.
        #[arg(long, default_value = ovs_dpdk::DEFAULT_ROOT)]
        ovs_root: PathBuf,
    },
}

#[derive(Debug, Args)]
struct DatapathArgs {
    /// Also run OVS-DPDK (Debian's openvswitch-switch-dpdk; needs root) on the same pcaps.
    #[arg(long)]
    with_ovs: bool,
    /// Skip the ferrovs side (OVS-DPDK only).
    #[arg(long)]
    no_ferrovs: bool,
    /// Flow counts, comma-separated (1000 or 1K; K = 1000).
    #[arg(long, default_value = "1K,8K,64K,256K", value_delimiter = ',', value_parser = parse_flows_list)]
    flows: Vec<u32>,
    /// Rule sets, comma-separated: single, single-udp, exact (the matrix), mixed (exact rules
    /// for even flows, a prefix rule for odd ones: megaflows of two masks) and masks8 (exact
    /// matches on eight field sets: eight or more masks).
    #[arg(long, default_value = "single,single-udp,exact", value_delimiter = ',', value_parser = parse_rulesets)]
    ruleset: Vec<Ruleset>,
    /// Frame lengths on the wire (FCS included), comma-separated.
    #[arg(long, default_value = "64,1518", value_delimiter = ',', value_parser = parse_frame_lens)]
    frame_len: Vec<usize>,
    /// Measurement window, seconds.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Minimum warm-up, seconds (warm-up goes on until the rate is stable).
    #[arg(long, default_value_t = 6.0)]
    warmup_min: f64,
    /// Maximum warm-up, seconds.
    #[arg(long, default_value_t = 150.0)]
    warmup_max: f64,
    /// Repetitions per point and system; the median (by Mpps) is reported.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    reps: u32,
    /// The core of the PMD thread; everything else runs on core 0.
    #[arg(long, default_value_t = 1)]
    pmd_core: usize,
    /// One JSON object a line per point and system instead of the table.
    #[arg(long)]
    json: bool,
    /// Also write the JSON lines to this file.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Where the pcaps are written (and reused).
    #[arg(long, default_value = pcap::DEFAULT_PCAP_DIR)]
    pcap_dir: PathBuf,
    /// Root directory of the private OVS-DPDK.
    #[arg(long, default_value = ovs_dpdk::DEFAULT_ROOT)]
    ovs_root: PathBuf,
    /// Extra OVS other_config settings, e.g. flow-limit=1000000 (repeatable).
    #[arg(long = "ovs-other-config")]
    ovs_other_config: Vec<String>,
    /// OVS dpdk-socket-mem (MiB); default 1024, 2048 above 64K flows.
    #[arg(long)]
    ovs_socket_mem: Option<u64>,
    /// Do not apt-get install missing OVS-DPDK packages.
    #[arg(long)]
    no_install: bool,
    /// How OVS-DPDK's replay -> null ceiling is measured: `testpmd` (DPDK's own forwarding
    /// of the same pcap, no switch) or `single` (OVS with the `single` rule set).
    #[arg(long, default_value = "testpmd", value_parser = ["testpmd", "single"])]
    ovs_ceiling: String,
}

fn parse_flows_list(s: &str) -> Result<u32, point::FilterError> {
    point::parse_flows(s)
}

fn parse_rulesets(s: &str) -> Result<Ruleset, point::FilterError> {
    Ruleset::from_str(s)
}

fn parse_frame_lens(s: &str) -> Result<usize, point::FilterError> {
    point::parse_frame_len(s)
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // The daemon's memory policy (freed memory is kept, so growing tables do not fault in
    // fresh pages): the benchmarks measure ferrovs as it runs.
    datapath::mem::retain_freed_memory();
    match cli.command {
        Cmd::Datapath(args) => datapath(&args),
        Cmd::OvsCleanup { ovs_root } => ovs_dpdk::cleanup(&ovs_root),
        Cmd::Insert {
            established,
            rules,
            bundle,
            baseline,
            pmd_core,
            reps,
            json,
        } => {
            let opts = bench::insert::InsertOptions {
                established,
                rules,
                bundle,
                baseline_secs: baseline,
                pmd_core: Some(pmd_core),
                inserter_core: Some(if pmd_core == 0 { 1 } else { 0 }),
                ..bench::insert::InsertOptions::default()
            };
            insert(&opts, reps.max(1), json)
        }
    }
}

fn insert(opts: &bench::insert::InsertOptions, reps: usize, json: bool) -> anyhow::Result<()> {
    let mut runs = Vec::with_capacity(reps);
    for _ in 0..reps {
        let r = bench::insert::run_insert(opts)?;
        print_insert(&r, json)?;
        anyhow::ensure!(r.is_clean(), "established packets were lost or misdirected");
        runs.push(r);
    }
    if reps > 1 && !json {
        let sorted = |f: fn(&bench::insert::InsertResult) -> f64| {
            let mut v: Vec<f64> = runs.iter().map(f).collect();
            v.sort_by(f64::total_cmp);
            v
        };
        let rate = sorted(|r| r.rules_per_sec);
        let ratio = sorted(|r| r.ratio);
        println!(
            "median of {reps} runs: {:.0} rules/s ({:.0} to {:.0}); established ratio {:.3} ({:.3} to {:.3}); every run clean",
            rate[reps / 2],
            rate[0],
            rate[reps - 1],
            ratio[reps / 2],
            ratio[0],
            ratio[reps - 1]
        );
    }
    Ok(())
}

fn print_insert(r: &bench::insert::InsertResult, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        println!(
            "inserted {} rules in bundles of {} in {:.3} s: {:.0} rules/s ({:.3} s on the inserting thread's CPU: {:.0} rules/s; {} page faults)",
            r.rules, r.bundle, r.insert_secs, r.rules_per_sec, r.insert_cpu_secs, r.rules_per_cpu_sec, r.insert_page_faults
        );
        println!(
            "established flows ({}): {:.2} Mpps before, {:.2} Mpps during the insertion: ratio {:.3}",
            r.established, r.baseline_mpps, r.during_mpps, r.ratio
        );
        println!(
            "received {}, delivered {}, to the new rules' port {}, dropped {} ({} by the replay port), per-flow counts {}..{} over {} flows, megaflows {}, retranslated {}: {}",
            r.received,
            r.delivered,
            r.wrong_port,
            r.dropped,
            r.rx_dropped,
            r.per_flow_min,
            r.per_flow_max,
            r.flows_seen,
            r.megaflows,
            r.retranslated,
            if r.is_clean() { "nothing lost or misdirected" } else { "LOST OR MISDIRECTED PACKETS" }
        );
    }
    Ok(())
}

fn dedup<T: PartialEq + Copy>(v: &[T]) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for &x in v {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

fn datapath(args: &DatapathArgs) -> anyhow::Result<()> {
    let points = point::matrix(
        &dedup(&args.frame_len),
        &dedup(&args.flows),
        &dedup(&args.ruleset),
    );
    let opts = RunOptions {
        seconds: args.seconds,
        warmup_min_secs: args.warmup_min,
        warmup_max_secs: args.warmup_max,
        pmd_core: Some(args.pmd_core),
        pcap_dir: args.pcap_dir.clone(),
    };
    let mut out_file = match &args.out {
        Some(p) => Some(File::create(p).with_context(|| format!("creating {}", p.display()))?),
        None => None,
    };
    let mut ovs = if args.with_ovs {
        let max_flows = points.iter().map(|p| p.flows).max().unwrap_or(0);
        let mut cfg = ovs_dpdk::OvsConfig::for_max_flows(max_flows);
        cfg.root.clone_from(&args.ovs_root);
        cfg.pmd_core = args.pmd_core;
        cfg.lcore = usize::from(args.pmd_core == 0);
        cfg.other_config.clone_from(&args.ovs_other_config);
        cfg.install = !args.no_install;
        cfg.testpmd_ceiling = args.ovs_ceiling == "testpmd";
        cfg.cleanup_exe = std::env::current_exe().ok();
        if let Some(mb) = args.ovs_socket_mem {
            cfg.socket_mem_mb = mb;
            cfg.hugepages = mb / 2 + 64;
        }
        eprintln!("ovs-dpdk: setting up under {}", cfg.root.display());
        Some(ovs_dpdk::OvsDpdk::setup(cfg).context("setting up OVS-DPDK")?)
    } else {
        None
    };

    if !args.json {
        print_header();
    }
    // (system, ceiling source) pairs seen, and whether a forwarding thread was short of its
    // core, for the notes under the table.
    let mut sources: Vec<(String, String)> = Vec::new();
    let mut contended = false;
    for p in &points {
        let pcap = pcap::ensure_pcap(&opts.pcap_dir, p)?;
        let mut run_f = |rep: u32| {
            eprintln!("ferrovs: {p} (repetition {} of {})", rep + 1, args.reps);
            ferrovs::run_point(p, &opts)
        };
        let mut run_o = |rep: u32| match ovs.as_mut() {
            Some(o) => {
                eprintln!("ovs-dpdk: {p} (repetition {} of {})", rep + 1, args.reps);
                o.run_point(p, &opts, &pcap)
            }
            None => anyhow::bail!("no OVS-DPDK"),
        };
        let mut systems: Vec<&mut dyn FnMut(u32) -> anyhow::Result<PointResult>> = Vec::new();
        if !args.no_ferrovs {
            systems.push(&mut run_f);
        }
        let with_ovs = args.with_ovs;
        if with_ovs {
            systems.push(&mut run_o);
        }
        let mut results = alternate(args.reps, &mut systems).into_iter();
        let mut ferrovs_res = if args.no_ferrovs {
            None
        } else {
            results.next()
        };
        let ovs_res = if with_ovs { results.next() } else { None };
        if let (Some(Ok(f)), Some(Ok(o))) = (ferrovs_res.as_mut(), ovs_res.as_ref()) {
            if o.mpps > 0.0 {
                f.ratio_to_ovs = Some(round3(f.mpps / o.mpps));
            }
        }
        for (system, res) in [(ferrovs::SYSTEM, ferrovs_res), (ovs_dpdk::SYSTEM, ovs_res)] {
            let Some(mut res) = res else { continue };
            if let Ok(r) = res.as_mut() {
                if let (None, Some(c)) = (r.ratio_to_ceiling, r.ceiling_mpps) {
                    if c > 0.0 {
                        r.ratio_to_ceiling = Some(round3(r.mpps / c));
                    }
                }
            }
            if let Ok(r) = &res {
                if let Some(src) = &r.ceiling_source {
                    let pair = (r.system.clone(), src.clone());
                    if !sources.contains(&pair) {
                        sources.push(pair);
                    }
                }
                contended |= r.pmd_cpu_share.is_some_and(|s| s < CONTENDED_SHARE);
            }
            let line = match &res {
                Ok(r) => serde_json::to_value(r)?,
                Err(e) => json!({
                    "system": system, "frame_len": p.frame_len, "flows": p.flows,
                    "ruleset": p.ruleset, "error": format!("{e:#}"),
                }),
            };
            if let Err(e) = &res {
                eprintln!("{system}: {p}: {e:#}");
            }
            if let Some(f) = out_file.as_mut() {
                writeln!(f, "{line}").context("writing --out")?;
            }
            if args.json {
                println!("{line}");
            } else {
                print_row(system, p, &res);
            }
        }
    }
    if let Some(mut o) = ovs.take() {
        o.shutdown()?;
    }
    if !args.json {
        print_notes(&sources, contended);
    }
    Ok(())
}

/// Runs `reps` repetitions of every system, alternating (system 0, 1, 0, 1, ...) so that a
/// slow spell of the shared machine falls on all of them, and returns each system's median.
/// A system stops at its first error, which becomes its result.
fn alternate(
    reps: u32,
    systems: &mut [&mut dyn FnMut(u32) -> anyhow::Result<PointResult>],
) -> Vec<anyhow::Result<PointResult>> {
    let mut runs: Vec<anyhow::Result<Vec<PointResult>>> =
        systems.iter().map(|_| Ok(Vec::new())).collect();
    for rep in 0..reps {
        for (sys, acc) in systems.iter_mut().zip(runs.iter_mut()) {
            if let Ok(v) = acc {
                match sys(rep) {
                    Ok(r) => v.push(r),
                    Err(e) => *acc = Err(e),
                }
            }
        }
    }
    runs.into_iter()
        .map(|r| r.and_then(|v| point::median(v).context("no repetitions")))
        .collect()
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// A forwarding thread that got less of its core than this was contended.
const CONTENDED_SHARE: f64 = 0.97;

fn print_notes(sources: &[(String, String)], contended: bool) {
    println!();
    println!(
        "Mpps: frames/s out of the sink port; ceiling: the same pcap replayed to null without \
         a switch; %ceil = Mpps / ceiling; hits: share of packets per cache level; vs OVS = \
         ferrovs Mpps / OVS-DPDK Mpps."
    );
    for (system, src) in sources {
        println!("ceiling of {system}: {src}");
    }
    if contended {
        println!(
            "pmd% < {:.0}: the forwarding thread did not get its whole core (another process \
             ran on it); those rates are low.",
            CONTENDED_SHARE * 100.0
        );
    }
}

fn print_header() {
    println!(
        "{:<9} {:>5} {:>7} {:<10} {:>7} {:>15} {:>7} {:>6} {:>8} {:<26} {:>9} {:>8} {:>5} {:>7}",
        "system",
        "frame",
        "flows",
        "ruleset",
        "Mpps",
        "min..max",
        "ceiling",
        "%ceil",
        "cyc/pkt",
        "simple/emc/smc/mf/upcall%",
        "megaflows",
        "RSS MiB",
        "pmd%",
        "vs OVS"
    );
}

fn opt(v: Option<f64>, scale: f64, prec: usize) -> String {
    v.map_or_else(|| "-".to_owned(), |x| format!("{:.prec$}", x * scale))
}

#[allow(clippy::cast_precision_loss)]
fn print_row(system: &str, p: &Point, res: &anyhow::Result<PointResult>) {
    let head = format!(
        "{:<9} {:>5} {:>7} {:<10}",
        system, p.frame_len, p.flows, p.ruleset
    );
    match res {
        Err(e) => println!(
            "{head} error: {}",
            format!("{e:#}").lines().next().unwrap_or("")
        ),
        Ok(r) => {
            let hits = r.hits.percent().map(|v| format!("{v:.0}")).join("/");
            println!(
                "{head} {:>7.2} {:>15} {:>7} {:>6} {:>8.1} {:<26} {:>9} {:>8.1} {:>5} {:>7}",
                r.mpps,
                format!("{:.2}..{:.2}", r.mpps_min, r.mpps_max),
                opt(r.ceiling_mpps, 1.0, 2),
                opt(r.ratio_to_ceiling, 100.0, 0),
                r.cycles_per_pkt,
                hits,
                r.megaflows,
                r.rss_bytes as f64 / (1024.0 * 1024.0),
                opt(r.pmd_cpu_share, 100.0, 0),
                opt(r.ratio_to_ovs, 1.0, 2),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(args)
    }

    #[test]
    fn datapath_defaults_are_the_full_matrix() {
        let Cmd::Datapath(a) = parse(&["ferrovs-bench", "datapath"]).unwrap().command else {
            panic!("not datapath");
        };
        assert_eq!(a.flows, vec![1_000, 8_000, 64_000, 256_000]);
        assert_eq!(a.ruleset, Ruleset::ALL.to_vec());
        assert_eq!(a.frame_len, vec![64, 1518]);
        assert!(!a.with_ovs && !a.json);
        assert_eq!(point::matrix(&a.frame_len, &a.flows, &a.ruleset).len(), 24);
    }

    #[test]
    fn datapath_point_filters_parse() {
        let cli = parse(&[
            "ferrovs-bench",
            "datapath",
            "--with-ovs",
            "--flows",
            "1K,8000",
            "--ruleset=single-udp,exact",
            "--frame-len",
            "64",
            "--seconds",
            "5",
            "--reps",
            "3",
            "--json",
        ])
        .unwrap();
        let Cmd::Datapath(a) = cli.command else {
            panic!("not datapath");
        };
        assert_eq!(a.flows, vec![1_000, 8_000]);
        assert_eq!(a.ruleset, vec![Ruleset::SingleUdp, Ruleset::Exact]);
        assert_eq!(a.frame_len, vec![64]);
        assert_eq!(
            (a.seconds, a.reps, a.with_ovs, a.json),
            (5.0, 3, true, true)
        );
    }

    #[test]
    fn datapath_bad_filters_are_errors() {
        assert!(parse(&["ferrovs-bench", "datapath", "--flows", "lots"]).is_err());
        assert!(parse(&["ferrovs-bench", "datapath", "--ruleset", "single,wild"]).is_err());
        assert!(parse(&["ferrovs-bench", "datapath", "--frame-len", "12"]).is_err());
        assert!(parse(&["ferrovs-bench", "datapath", "--reps", "0"]).is_err());
        assert!(parse(&["ferrovs-bench", "datapath", "--flows"]).is_err());
    }

    #[test]
    fn repetitions_alternate_take_the_median_and_stop_at_errors() {
        let p = Point {
            frame_len: 64,
            flows: 1_000,
            ruleset: Ruleset::Exact,
        };
        let order = std::cell::RefCell::new(Vec::new());
        let mut a = |i: u32| {
            order.borrow_mut().push(('a', i));
            let mut r = PointResult::new("a", &p);
            r.mpps = [5.0, 1.0, 3.0][i as usize];
            Ok(r)
        };
        let mut b = |i: u32| {
            order.borrow_mut().push(('b', i));
            anyhow::bail!("no")
        };
        let res = alternate(3, &mut [&mut a, &mut b]);
        assert_eq!(*order.borrow(), [('a', 0), ('b', 0), ('a', 1), ('a', 2)]);
        let r = res[0].as_ref().unwrap();
        assert_eq!((r.mpps, r.mpps_min, r.mpps_max), (3.0, 1.0, 5.0));
        assert!(res[1].is_err());
    }
}
