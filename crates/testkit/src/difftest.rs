//! The differential tester: generated cases traced by a reference (OVS) and, optionally, a
//! system under test (ferrovs), compared action by action, with minimal reproducers for
//! every mismatch.
//!
//! A system plugs in through [`TraceSystem`]: `load` replaces its state with a case's bridge
//! and flows, `trace` returns the `Datapath actions:` text for one packet. [`OvsReference`]
//! implements it; ferrovs's pipeline will implement it the same way, and [`run`], the
//! comparison ([`crate::compare`]) and the minimizer ([`crate::diffgen::minimize`]) stay as
//! they are.
//!
//! Without a system under test, [`run`] is the generator's self-check: every generated flow
//! and packet must be accepted by OVS, and each refusal is reported as a [`Rejection`].
//!
//! # Example
//! ```no_run
//! use testkit::difftest::{run, RunConfig};
//! use testkit::ovs::OvsReference;
//! let mut ovs = OvsReference::start()?;
//! let report = run(&RunConfig { cases: 100, ..RunConfig::default() }, &mut ovs, None, |_| {})?;
//! assert!(report.rejections.is_empty());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::time::{Duration, Instant};

use crate::compare::{actions_match, CompareMode};
use crate::diffgen::{self, DiffCase, BRIDGE};
use crate::ovs::{OvsError, OvsReference};

/// What went wrong in a [`TraceSystem`].
#[derive(Debug, Clone, thiserror::Error)]
pub enum SystemError {
    /// The system refused its input: a bridge setting, a flow or a packet.
    #[error("{system} rejected {what}: {reason}")]
    Rejected {
        /// The system's name.
        system: String,
        /// What was refused (`flows`, `bridge setup`, `packet ...`).
        what: String,
        /// The system's message.
        reason: String,
    },
    /// The system itself failed (a daemon died, a socket broke).
    #[error("{system} failed: {reason}")]
    Failed {
        /// The system's name.
        system: String,
        /// What happened.
        reason: String,
    },
}

/// A switch that can load a generated case and trace packets through it.
///
/// Contract: `load` replaces all state (bridges, flows, learned MACs) with the case's; after
/// it succeeds, `trace` may be called any number of times and must not change the state
/// (no MAC learning), so the order of traces does not matter.
pub trait TraceSystem {
    /// A short name for reports, e.g. `ovs-vswitchd (Open vSwitch) 3.1.0`.
    fn name(&self) -> String;
    /// Replaces the system's state with `case`'s bridge, ports and flows.
    fn load(&mut self, case: &DiffCase) -> Result<(), SystemError>;
    /// Traces `packet` (OVS datapath flow-key syntax) on `target` (`ovs-dummy` for the
    /// generated cases) and returns the text after `Datapath actions: `.
    fn trace(&mut self, target: &str, packet: &str) -> Result<String, SystemError>;
}

impl OvsReference {
    fn system_error(&self, what: &str, e: OvsError) -> SystemError {
        let system = self.version().to_owned();
        if e.is_rejection() {
            SystemError::Rejected {
                system,
                what: what.to_owned(),
                reason: e.to_string(),
            }
        } else {
            SystemError::Failed {
                system,
                reason: e.to_string(),
            }
        }
    }
}

impl TraceSystem for OvsReference {
    fn name(&self) -> String {
        self.version().to_owned()
    }

    fn load(&mut self, case: &DiffCase) -> Result<(), SystemError> {
        self.reset().map_err(|e| self.system_error("reset", e))?;
        self.add_bridge(0, &case.bridge.vsctl_args())
            .map_err(|e| self.system_error("bridge setup", e))?;
        self.add_flows(BRIDGE, &case.ofctl_options, &case.flows)
            .map_err(|e| self.system_error("flows", e))
    }

    fn trace(&mut self, target: &str, packet: &str) -> Result<String, SystemError> {
        OvsReference::trace(self, Some(target), packet, &[] as &[&str])
            .map(|t| t.datapath_actions)
            .map_err(|e| self.system_error(&format!("packet {packet}"), e))
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The run seed; case `n` is `diffgen::generate(seed, n)`.
    pub seed: u64,
    /// The first case number.
    pub first: u64,
    /// How many cases.
    pub cases: u64,
    /// How the two systems' actions are compared.
    pub mode: CompareMode,
    /// Whether mismatches are minimized.
    pub minimize: bool,
}

impl Default for RunConfig {
    fn default() -> Self {
        Self {
            seed: 1,
            first: 0,
            cases: 1000,
            mode: CompareMode::Normalized,
            minimize: true,
        }
    }
}

/// A case that a system refused.
#[derive(Debug, Clone)]
pub struct Rejection {
    /// The case number in the run.
    pub case_number: u64,
    /// The case.
    pub case: DiffCase,
    /// The refusal.
    pub error: SystemError,
}

/// A packet on which the two systems disagree.
#[derive(Debug, Clone)]
pub struct Mismatch {
    /// The case number in the run.
    pub case_number: u64,
    /// The minimized case (its first packet is the one that disagrees).
    pub minimal: DiffCase,
    /// The packet.
    pub packet: String,
    /// The reference's actions for it in the minimal case.
    pub reference: String,
    /// The system under test's actions (or its error) in the minimal case.
    pub sut: String,
}

/// Progress reported while running.
#[derive(Debug)]
pub enum RunEvent<'a> {
    /// Case `n` is done.
    CaseDone(u64),
    /// A system refused a case.
    Rejected(&'a Rejection),
    /// The systems disagree.
    Mismatch(&'a Mismatch),
}

/// The outcome of a run.
#[derive(Debug, Clone, Default)]
pub struct RunReport {
    /// Cases run.
    pub n_cases: u64,
    /// Packets traced by the reference.
    pub n_packets: u64,
    /// Packets for which the reference output at least one copy (the rest were dropped).
    pub n_forwarding: u64,
    /// Cases that a system refused.
    pub rejections: Vec<Rejection>,
    /// Cases where the systems disagree.
    pub mismatches: Vec<Mismatch>,
    /// Wall-clock time of the run.
    pub elapsed: Duration,
}

impl RunReport {
    /// Cases per second.
    pub fn cases_per_sec(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            self.n_cases as f64 / secs
        } else {
            0.0
        }
    }
}

/// Runs `config.cases` generated cases through `reference` and, if given, `sut`.
///
/// Refusals and mismatches are collected in the report (and passed to `on_event`); only a
/// [`SystemError::Failed`] (a system that stopped working) ends the run early with an error.
pub fn run(
    config: &RunConfig,
    reference: &mut dyn TraceSystem,
    mut sut: Option<&mut dyn TraceSystem>,
    mut on_event: impl FnMut(&RunEvent<'_>),
) -> Result<RunReport, SystemError> {
    let start = Instant::now();
    let mut report = RunReport::default();
    for n in config.first..config.first.saturating_add(config.cases) {
        let case = diffgen::generate(config.seed, n);
        report.n_cases += 1;
        let outcome = trace_all(reference, &case).and_then(|expected| {
            report.n_packets += expected.len() as u64;
            report.n_forwarding += expected
                .iter()
                .filter(|a| {
                    crate::compare::action_items(a)
                        .iter()
                        .any(|i| crate::compare::is_output(i))
                })
                .count() as u64;
            match sut.as_deref_mut() {
                None => Ok(None),
                Some(sut) => Ok(mismatch_against(sut, &case, &expected, config.mode)?
                    .map(|(packet, r, s)| (sut, packet, r, s))),
            }
        });
        match outcome {
            Ok(None) => {}
            Ok(Some((sut, packet, r, s))) => {
                let mismatch = if config.minimize {
                    let first = Mismatch {
                        case_number: n,
                        minimal: case.clone(),
                        packet,
                        reference: r,
                        sut: s,
                    };
                    minimize_mismatch(reference, sut, first, config.mode)
                } else {
                    Mismatch {
                        case_number: n,
                        minimal: case.clone(),
                        packet,
                        reference: r,
                        sut: s,
                    }
                };
                on_event(&RunEvent::Mismatch(&mismatch));
                report.mismatches.push(mismatch);
            }
            Err(error @ SystemError::Rejected { .. }) => {
                let rejection = Rejection {
                    case_number: n,
                    case: case.clone(),
                    error,
                };
                on_event(&RunEvent::Rejected(&rejection));
                report.rejections.push(rejection);
            }
            Err(e @ SystemError::Failed { .. }) => return Err(e),
        }
        on_event(&RunEvent::CaseDone(n));
    }
    report.elapsed = start.elapsed();
    Ok(report)
}

/// A reference and an optional system under test, made once per worker of [`run_parallel`].
pub type SystemPair = (
    Box<dyn TraceSystem + Send>,
    Option<Box<dyn TraceSystem + Send>>,
);

/// [`run`] on `jobs` workers, each with its own systems from `make_systems` and a contiguous
/// share of the case numbers. The report is the same as one [`run`] over all cases (events
/// arrive interleaved; mismatches and rejections are sorted by case number).
pub fn run_parallel(
    config: &RunConfig,
    jobs: usize,
    make_systems: impl Fn() -> Result<SystemPair, SystemError> + Sync,
    on_event: impl FnMut(&RunEvent<'_>) + Send,
) -> Result<RunReport, SystemError> {
    let start = Instant::now();
    let jobs = u64::try_from(jobs.max(1))
        .unwrap_or(1)
        .min(config.cases.max(1));
    let chunk = config.cases.div_ceil(jobs);
    let on_event = std::sync::Mutex::new(on_event);
    let results: Vec<Result<RunReport, SystemError>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..jobs)
            .map(|j| {
                let first = config.first + j * chunk;
                let cases = chunk.min((config.first + config.cases).saturating_sub(first));
                let share = RunConfig {
                    first,
                    cases,
                    ..config.clone()
                };
                let (make_systems, on_event) = (&make_systems, &on_event);
                scope.spawn(move || {
                    let (mut reference, mut sut) = make_systems()?;
                    let sut = sut.as_deref_mut().map(|s| s as &mut dyn TraceSystem);
                    run(&share, reference.as_mut(), sut, |e| {
                        // A worker that panicked while reporting has already failed the run.
                        if let Ok(mut f) = on_event.lock() {
                            f(e);
                        }
                    })
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join().unwrap_or_else(|_| {
                    Err(SystemError::Failed {
                        system: "worker".into(),
                        reason: "a worker thread panicked".into(),
                    })
                })
            })
            .collect()
    });
    let mut report = RunReport::default();
    for r in results {
        let r = r?;
        report.n_cases += r.n_cases;
        report.n_packets += r.n_packets;
        report.n_forwarding += r.n_forwarding;
        report.rejections.extend(r.rejections);
        report.mismatches.extend(r.mismatches);
    }
    report.rejections.sort_by_key(|r| r.case_number);
    report.mismatches.sort_by_key(|m| m.case_number);
    report.elapsed = start.elapsed();
    Ok(report)
}

/// Loads `case` into `system` and traces every packet.
pub fn trace_all(
    system: &mut dyn TraceSystem,
    case: &DiffCase,
) -> Result<Vec<String>, SystemError> {
    system.load(case)?;
    case.packets
        .iter()
        .map(|p| system.trace(case.trace_target(), p))
        .collect()
}

/// The first packet of `case` on which the systems disagree: `(packet, reference's actions,
/// sut's actions or error)`. A refusal by the system under test counts as a disagreement; a
/// refusal by the reference is an error (the case is invalid).
pub fn first_mismatch(
    reference: &mut dyn TraceSystem,
    sut: &mut dyn TraceSystem,
    case: &DiffCase,
    mode: CompareMode,
) -> Result<Option<(String, String, String)>, SystemError> {
    let expected = trace_all(reference, case)?;
    mismatch_against(sut, case, &expected, mode)
}

/// Like [`first_mismatch`], with the reference's answers (`expected`, one per packet) given.
pub fn mismatch_against(
    sut: &mut dyn TraceSystem,
    case: &DiffCase,
    expected: &[String],
    mode: CompareMode,
) -> Result<Option<(String, String, String)>, SystemError> {
    if let Err(e) = sut.load(case) {
        let packet = case.packets.first().cloned().unwrap_or_default();
        let first = expected.first().cloned().unwrap_or_default();
        return match e {
            SystemError::Rejected { .. } => Ok(Some((packet, first, format!("<{e}>")))),
            SystemError::Failed { .. } => Err(e),
        };
    }
    for (packet, want) in case.packets.iter().zip(expected) {
        let want = want.clone();
        let got = match sut.trace(case.trace_target(), packet) {
            Ok(got) => got,
            Err(e @ SystemError::Rejected { .. }) => format!("<{e}>"),
            Err(e) => return Err(e),
        };
        if !actions_match(mode, &want, &got, packet) {
            return Ok(Some((packet.clone(), want, got)));
        }
    }
    Ok(None)
}

/// Minimizes a mismatching case and re-traces its first packet for the report. If the
/// mismatch does not happen again on a re-run, the first observation is reported with the
/// system-under-test answer marked `(not reproducible on a re-run)`.
fn minimize_mismatch(
    reference: &mut dyn TraceSystem,
    sut: &mut dyn TraceSystem,
    first: Mismatch,
    mode: CompareMode,
) -> Mismatch {
    let case = &first.minimal;
    let case_number = first.case_number;
    let minimal = diffgen::minimize(case, |c| {
        matches!(first_mismatch(reference, sut, c, mode), Ok(Some(_)))
    });
    let (packet, r, s) = match first_mismatch(reference, sut, &minimal, mode) {
        Ok(Some(found)) => found,
        // Flaky: it mismatched once but not again. Report the first observation.
        _ => {
            return Mismatch {
                sut: format!("{} (not reproducible on a re-run)", first.sut),
                ..first
            }
        }
    };
    Mismatch {
        case_number,
        minimal,
        packet,
        reference: r,
        sut: s,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// A fake switch: answers from a function of the loaded flows and the packet.
    struct Fake {
        flows: Vec<String>,
        answer: fn(&[String], &str) -> String,
        reject_flows_with: Option<&'static str>,
    }

    impl TraceSystem for Fake {
        fn name(&self) -> String {
            "fake".into()
        }
        fn load(&mut self, case: &DiffCase) -> Result<(), SystemError> {
            if let Some(bad) = self.reject_flows_with {
                if case.flows.iter().any(|f| f.contains(bad)) {
                    return Err(SystemError::Rejected {
                        system: "fake".into(),
                        what: "flows".into(),
                        reason: bad.into(),
                    });
                }
            }
            self.flows = case.flows.clone();
            Ok(())
        }
        fn trace(&mut self, _target: &str, packet: &str) -> Result<String, SystemError> {
            Ok((self.answer)(&self.flows, packet))
        }
    }

    fn count_answer(flows: &[String], _packet: &str) -> String {
        flows.len().to_string()
    }

    /// Disagrees with `count_answer` only when a flow contains `NORMAL`.
    fn normal_blind(flows: &[String], _packet: &str) -> String {
        let n = flows.len() + usize::from(flows.iter().any(|f| f.contains("NORMAL")));
        n.to_string()
    }

    #[test]
    fn run_identical_systems_has_no_mismatch() {
        let mut a = Fake {
            flows: vec![],
            answer: count_answer,
            reject_flows_with: None,
        };
        let mut b = Fake {
            flows: vec![],
            answer: count_answer,
            reject_flows_with: None,
        };
        let config = RunConfig {
            cases: 50,
            ..RunConfig::default()
        };
        let report = run(&config, &mut a, Some(&mut b), |_| {}).expect("fakes do not fail");
        assert_eq!(report.n_cases, 50);
        assert!(report.mismatches.is_empty() && report.rejections.is_empty());
    }

    #[test]
    fn run_mismatch_is_minimized_to_one_flow_and_packet() {
        let mut a = Fake {
            flows: vec![],
            answer: count_answer,
            reject_flows_with: None,
        };
        let mut b = Fake {
            flows: vec![],
            answer: normal_blind,
            reject_flows_with: None,
        };
        // Only "does any flow say NORMAL" matters, so the minimal case has exactly one flow.
        let config = RunConfig {
            cases: 30,
            ..RunConfig::default()
        };
        let report = run(&config, &mut a, Some(&mut b), |_| {}).expect("fakes do not fail");
        assert!(!report.mismatches.is_empty());
        for m in &report.mismatches {
            assert_eq!(m.minimal.packets.len(), 1, "{m:?}");
            assert!(m.minimal.flows.len() <= 2, "{m:?}");
            assert!(
                m.minimal.flows.iter().any(|f| f.contains("NORMAL")),
                "{m:?}"
            );
            assert_ne!(m.reference, m.sut);
        }
    }

    #[test]
    fn run_parallel_covers_every_case_once() {
        let make = || -> Result<SystemPair, SystemError> {
            let a = Fake {
                flows: vec![],
                answer: count_answer,
                reject_flows_with: Some("FLOOD"),
            };
            let b = Fake {
                flows: vec![],
                answer: normal_blind,
                reject_flows_with: None,
            };
            Ok((Box::new(a), Some(Box::new(b))))
        };
        let config = RunConfig {
            cases: 37,
            first: 5,
            minimize: false,
            ..RunConfig::default()
        };
        let mut done = Vec::new();
        let report = run_parallel(&config, 3, make, |e| {
            if let RunEvent::CaseDone(n) = e {
                done.push(*n);
            }
        })
        .expect("fakes do not fail");
        done.sort_unstable();
        assert_eq!(done, (5..42).collect::<Vec<_>>());
        assert_eq!(report.n_cases, 37);
        let mut a = Fake {
            flows: vec![],
            answer: count_answer,
            reject_flows_with: Some("FLOOD"),
        };
        let mut b = Fake {
            flows: vec![],
            answer: normal_blind,
            reject_flows_with: None,
        };
        let serial = run(&config, &mut a, Some(&mut b), |_| {}).expect("fakes do not fail");
        let numbers = |r: &RunReport| {
            (
                r.rejections
                    .iter()
                    .map(|x| x.case_number)
                    .collect::<Vec<_>>(),
                r.mismatches
                    .iter()
                    .map(|x| x.case_number)
                    .collect::<Vec<_>>(),
            )
        };
        assert_eq!(numbers(&report), numbers(&serial));
    }

    #[test]
    fn run_self_check_counts_rejections() {
        let mut a = Fake {
            flows: vec![],
            answer: count_answer,
            reject_flows_with: Some("FLOOD"),
        };
        let config = RunConfig {
            cases: 40,
            ..RunConfig::default()
        };
        let mut seen = HashMap::new();
        let report = run(&config, &mut a, None, |e| {
            if let RunEvent::Rejected(r) = e {
                seen.insert(r.case_number, ());
            }
        })
        .expect("fakes do not fail");
        let expected = (0..40)
            .filter(|n| {
                diffgen::generate(1, *n)
                    .flows
                    .iter()
                    .any(|f| f.contains("FLOOD"))
            })
            .count();
        assert_eq!(report.rejections.len(), expected);
        assert_eq!(seen.len(), expected);
    }
}
