//! `ferrovs-difftest`: trace parity with the real Open vSwitch.
//!
//! - `ferrovs-difftest ovs-cases FILE` replays OVS trace cases (JSON lines, e.g.
//!   `testdata/ovs-trace-cases.jsonl`) on a private OVS and prints one line per case, then `N
//!   passed, M failed` (known version differences are listed apart, not counted as failures).
//! - `ferrovs-difftest run --cases N --seed S` generates N random cases and traces them on OVS.
//!   Until ferrovs's pipeline plugs in as the system under test this is the generator's self-check:
//!   every flow and packet must be accepted by OVS. `--against-ovs` uses a second OVS as the system
//!   under test, which exercises the comparison end to end.
//! - `ferrovs-difftest show --seed S --case N` prints a case as shell commands.
//!
//! Needs Debian's `openvswitch-switch` (no kernel module; the daemons run privately on unix
//! sockets in a temporary directory).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use testkit::compare::CompareMode;
use testkit::diffgen;
use testkit::difftest::{run_parallel, RunConfig, RunEvent, SystemError, SystemPair, TraceSystem};
use testkit::ovs::OvsReference;
use testkit::trace_case::{load_cases, replay_on_ovs, Verdict};

#[derive(Debug, Parser)]
#[command(
    name = "ferrovs-difftest",
    about = "Trace parity between ferrovs and the real Open vSwitch"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Replay OVS trace cases (JSON lines) on a private OVS.
    OvsCases {
        /// The case file, e.g. testdata/ovs-trace-cases.jsonl.
        file: PathBuf,
        /// Only these case ids (comma-separated).
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
        /// Print the whole trace of failing cases.
        #[arg(short, long)]
        verbose: bool,
    },
    /// Run generated differential cases.
    Run {
        /// Number of cases.
        #[arg(long, default_value_t = 1000)]
        cases: u64,
        /// Run seed (decimal or 0x-hex).
        #[arg(long, default_value = "1", value_parser = parse_u64)]
        seed: u64,
        /// First case number (to rerun one case: --first N --cases 1).
        #[arg(long, default_value_t = 0)]
        first: u64,
        /// Compare with a second private OVS as the system under test.
        #[arg(long)]
        against_ovs: bool,
        /// How actions are compared.
        #[arg(long, value_enum, default_value_t = Mode::Normalized)]
        mode: Mode,
        /// Do not minimize mismatches.
        #[arg(long)]
        no_minimize: bool,
        /// Stop printing after this many reported problems.
        #[arg(long, default_value_t = 20)]
        max_reports: usize,
        /// Parallel workers, each with its own private OVS (and system under test).
        #[arg(long, default_value_t = 1)]
        jobs: usize,
    },
    /// Print one generated case as shell commands.
    Show {
        /// Run seed.
        #[arg(long, default_value = "1", value_parser = parse_u64)]
        seed: u64,
        /// Case number.
        #[arg(long)]
        case: u64,
    },
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Mode {
    Exact,
    Unordered,
    Normalized,
}

impl From<Mode> for CompareMode {
    fn from(m: Mode) -> Self {
        match m {
            Mode::Exact => CompareMode::Exact,
            Mode::Unordered => CompareMode::Unordered,
            Mode::Normalized => CompareMode::Normalized,
        }
    }
}

fn parse_u64(s: &str) -> Result<u64, String> {
    let r = match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse(),
    };
    r.map_err(|e| format!("`{s}`: {e}"))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Cmd::OvsCases {
            file,
            only,
            verbose,
        } => ovs_cases(&file, &only, verbose),
        Cmd::Run {
            cases,
            seed,
            first,
            against_ovs,
            mode,
            no_minimize,
            max_reports,
            jobs,
        } => {
            let config = RunConfig {
                seed,
                first,
                cases,
                mode: mode.into(),
                minimize: !no_minimize,
            };
            run_generated(&config, against_ovs, max_reports, jobs)
        }
        Cmd::Show { seed, case } => {
            print!("{}", diffgen::generate(seed, case).to_reproducer());
            Ok(true)
        }
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("ferrovs-difftest: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn ovs_cases(file: &std::path::Path, only: &[String], verbose: bool) -> anyhow::Result<bool> {
    let cases = load_cases(file)?;
    let start = Instant::now();
    let mut ovs = OvsReference::start().context("starting the reference OVS")?;
    println!(
        "reference: {} (dummy datapath, {})",
        ovs.version(),
        ovs.dir().display()
    );
    let (mut passed, mut failed, mut known) = (0, 0, Vec::new());
    for case in cases
        .iter()
        .filter(|c| only.is_empty() || only.contains(&c.id))
    {
        match replay_on_ovs(&mut ovs, case) {
            Ok(outcome) => {
                let got = &outcome.trace.datapath_actions;
                match outcome.verdict {
                    Verdict::Pass => {
                        passed += 1;
                        println!("PASS  {:<22} {}", case.id, got);
                    }
                    Verdict::KnownVersionDifference => {
                        known.push(case.id.clone());
                        println!(
                            "KNOWN {:<22} known version difference: expected {} ({}), got {}",
                            case.id,
                            case.expected_datapath_actions,
                            case.compare.as_str(),
                            got
                        );
                    }
                    Verdict::Fail => {
                        failed += 1;
                        println!(
                            "FAIL  {:<22} expected {} ({}), got {}",
                            case.id,
                            case.expected_datapath_actions,
                            case.compare.as_str(),
                            got
                        );
                        if verbose {
                            println!("{}", outcome.trace.raw);
                        }
                    }
                }
            }
            Err(e) => {
                failed += 1;
                println!("FAIL  {:<22} error: {e}", case.id);
            }
        }
    }
    let known_note = if known.is_empty() {
        String::new()
    } else {
        format!(
            " ({} known version difference: {})",
            known.len(),
            known.join(", ")
        )
    };
    println!(
        "{passed} passed, {failed} failed{known_note} in {:.2} s",
        start.elapsed().as_secs_f64()
    );
    Ok(failed == 0)
}

fn run_generated(
    config: &RunConfig,
    against_ovs: bool,
    max_reports: usize,
    jobs: usize,
) -> anyhow::Result<bool> {
    let version = OvsReference::start()
        .context("starting the reference OVS")?
        .name();
    println!(
        "reference: {version}; system under test: {}; seed {:#x}, cases {}..{}, {jobs} worker(s)",
        if against_ovs {
            "a second OVS"
        } else {
            "none (generator self-check: OVS must accept every case)"
        },
        config.seed,
        config.first,
        config.first + config.cases
    );
    let make_systems = || -> Result<SystemPair, SystemError> {
        let start = || {
            OvsReference::start().map_err(|e| SystemError::Failed {
                system: "ovs".into(),
                reason: e.to_string(),
            })
        };
        let reference: Box<dyn TraceSystem + Send> = Box::new(start()?);
        let sut: Option<Box<dyn TraceSystem + Send>> = if against_ovs {
            Some(Box::new(start()?))
        } else {
            None
        };
        Ok((reference, sut))
    };
    let mut reported = 0usize;
    let mut done = 0u64;
    let progress_every = (config.cases / 10).max(1);
    let start = Instant::now();
    let report = run_parallel(config, jobs, make_systems, |event| match event {
        RunEvent::CaseDone(_) => {
            done += 1;
            if done % progress_every == 0 {
                eprintln!(
                    "  {done}/{} cases, {:.1} cases/s",
                    config.cases,
                    done as f64 / start.elapsed().as_secs_f64()
                );
            }
        }
        RunEvent::Rejected(r) if reported < max_reports => {
            reported += 1;
            println!(
                "REJECTED case {} (seed {:#x}): {}",
                r.case_number, r.case.seed, r.error
            );
            println!("{}", r.case.to_reproducer());
        }
        RunEvent::Mismatch(m) if reported < max_reports => {
            reported += 1;
            println!(
                "MISMATCH case {} (seed {:#x})",
                m.case_number, m.minimal.seed
            );
            println!("  packet:    {}", m.packet);
            println!("  reference: {}", m.reference);
            println!("  sut:       {}", m.sut);
            println!("minimal reproducer:\n{}", m.minimal.to_reproducer());
        }
        _ => {}
    })?;
    println!(
        "{} cases, {} packets ({} forwarded, {} dropped by OVS): {} rejected by a system, {} mismatches; {:.1} \
         s, {:.1} cases/s",
        report.n_cases,
        report.n_packets,
        report.n_forwarding,
        report.n_packets - report.n_forwarding,
        report.rejections.len(),
        report.mismatches.len(),
        report.elapsed.as_secs_f64(),
        report.cases_per_sec()
    );
    Ok(report.rejections.is_empty() && report.mismatches.is_empty())
}
