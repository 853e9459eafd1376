//! Differential test against the real Open vSwitch (needs `ovs-vswitchd` with
//! `--enable-dummy`, see `testkit::ovs`): generated bridges, flows and packets are traced by
//! OVS and by the pipeline, and the datapath actions compared (`normalized`). Ignored by
//! default; run with `cargo test -p pipeline --test difftest_ovs -- --ignored --nocapture`
//! (`DIFFTEST_CASES`, `DIFFTEST_SEED` and `DIFFTEST_FIRST` choose the run).

use pipeline::switch::Switch;
use pipeline::trace::TraceInput;
use pipeline::xlate::XlateOptions;
use testkit::diffgen::DiffCase;
use testkit::difftest::{run, RunConfig, RunEvent, SystemError, TraceSystem};
use testkit::ovs::OvsReference;

/// The pipeline as a [`TraceSystem`].
#[derive(Debug, Default)]
struct Ferrovs {
    sw: Option<Switch>,
}

fn rejected(what: &str, reason: impl ToString) -> SystemError {
    SystemError::Rejected {
        system: "ferrovs".into(),
        what: what.into(),
        reason: reason.to_string(),
    }
}

impl TraceSystem for Ferrovs {
    fn name(&self) -> String {
        "ferrovs pipeline".into()
    }

    fn load(&mut self, case: &DiffCase) -> Result<(), SystemError> {
        let mut sw = Switch::new();
        sw.vsctl("add-br br0 -- set bridge br0 fail-mode=secure")
            .map_err(|e| rejected("bridge setup", e))?;
        let args = case
            .bridge
            .vsctl_args()
            .iter()
            .map(|w| {
                if w == "--" {
                    w.clone()
                } else {
                    format!("'{w}'")
                }
            })
            .collect::<Vec<_>>()
            .join(" ");
        sw.vsctl(&args).map_err(|e| rejected("bridge setup", e))?;
        let flows: Vec<&str> = case.flows.iter().map(String::as_str).collect();
        sw.add_flows_text("br0", &flows, &case.ofctl_options.join(" "))
            .map_err(|e| rejected("flows", e))?;
        self.sw = Some(sw);
        Ok(())
    }

    fn trace(&mut self, _target: &str, packet: &str) -> Result<String, SystemError> {
        let sw = self
            .sw
            .as_ref()
            .ok_or_else(|| rejected("packet", "no case loaded"))?;
        sw.trace(TraceInput::Datapath(packet), XlateOptions::default())
            .map(|r| r.datapath_actions())
            .map_err(|e| rejected(&format!("packet {packet}"), e))
    }
}

/// OVS numbers packet-in continuations from a daemon-wide counter: compare without them.
fn without_recirc_ids(actions: &str) -> String {
    let mut out = String::new();
    let mut rest = actions;
    while let Some(i) = rest.find("recirc_id=") {
        out.push_str(&rest[..i + "recirc_id=".len()]);
        out.push('N');
        rest = &rest[i + "recirc_id=".len()..];
        rest = rest.trim_start_matches(|c: char| c.is_ascii_hexdigit() || c == 'x');
    }
    out.push_str(rest);
    out
}

/// A system whose traces have their recirculation ids hidden.
struct NoRecircIds<'a>(&'a mut dyn TraceSystem);

impl TraceSystem for NoRecircIds<'_> {
    fn name(&self) -> String {
        self.0.name()
    }

    fn load(&mut self, case: &DiffCase) -> Result<(), SystemError> {
        self.0.load(case)
    }

    fn trace(&mut self, target: &str, packet: &str) -> Result<String, SystemError> {
        self.0.trace(target, packet).map(|a| without_recirc_ids(&a))
    }
}

#[test]
#[ignore = "needs ovs-vswitchd (apt-get install openvswitch-switch)"]
fn difftest_against_ovs() {
    let cases = std::env::var("DIFFTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let seed = std::env::var("DIFFTEST_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let first = std::env::var("DIFFTEST_FIRST")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut ovs = OvsReference::start().expect("a private OVS starts");
    let mut ovs = NoRecircIds(&mut ovs);
    let mut ferrovs = Ferrovs::default();
    let mut sut = NoRecircIds(&mut ferrovs);
    let config = RunConfig {
        seed,
        first,
        cases,
        ..RunConfig::default()
    };
    let report = run(&config, &mut ovs, Some(&mut sut), |e| match e {
        RunEvent::Mismatch(m) => println!(
            "MISMATCH case {}: packet {}\n  OVS     {}\n  ferrovs {}\n  flows {:?}\n  bridge {:?}",
            m.case_number, m.packet, m.reference, m.sut, m.minimal.flows, m.minimal.bridge
        ),
        RunEvent::Rejected(r) => println!("REJECTED case {}: {}", r.case_number, r.error),
        RunEvent::CaseDone(_) => {}
    })
    .expect("both systems keep working");
    // A mismatch that does not happen again when its case is re-run is a flake of the
    // harness or the reference, not of ferrovs (whose switch is built fresh per case; seen
    // only under heavy machine load):
    // reported, not failed on. Every reproducible mismatch fails the test.
    let flaky = report
        .mismatches
        .iter()
        .filter(|m| m.sut.ends_with("(not reproducible on a re-run)"))
        .count();
    println!(
        "{} cases, {} packets, {} mismatches ({} not reproducible), {} rejections",
        report.n_cases,
        report.n_packets,
        report.mismatches.len(),
        flaky,
        report.rejections.len()
    );
    assert!(report.mismatches.len() == flaky && report.rejections.is_empty());
}
