//! Tests of flow_mod bundles: the draft overlay and the incremental subtable order against
//! the previous implementation ([`super::reference`]), on random bundles, plus the cases the
//! restructuring could break.

use openflow::flow::{FlowEntry, FlowFlags};
use openflow::Match;
use packet::key::fields;
use proptest::prelude::*;

use super::reference::RefBridge;
use super::*;

/// One flow_mod, as small numbers (see [`flow_mod`]).
#[derive(Debug, Clone)]
struct Spec {
    cmd: u8,
    table: u8,
    shape: u8,
    prio: u8,
    cookie: u8,
    cookie_mask: bool,
    out_port: u8,
    act: u8,
    flags: u8,
    may_add: bool,
    hard: bool,
}

/// Flow_mods over `n_shapes` matches and `n_prios` priorities (few of each: many flow_mods of
/// a bundle hit the same rule).
fn spec(n_shapes: u8, n_prios: u8) -> impl Strategy<Value = Spec> {
    (
        (0u8..6, 0u8..4, 0u8..n_shapes, 0u8..n_prios, 0u8..3),
        (
            any::<bool>(),
            0u8..3,
            0u8..12,
            0u8..8,
            any::<bool>(),
            any::<bool>(),
        ),
    )
        .prop_map(
            |(
                (cmd, table, shape, prio, cookie),
                (cookie_mask, out_port, act, flags, may_add, hard),
            )| Spec {
                cmd,
                table,
                shape,
                prio,
                cookie,
                cookie_mask,
                out_port,
                act,
                flags,
                may_add,
                hard,
            },
        )
}

/// Matches of several masks that overlap each other; shape 10 lacks a prerequisite.
fn shape(i: u8) -> Match {
    let mut m = Match::catch_all();
    let ip = |m: &mut Match| m.set_exact(fields::DL_TYPE, 0x0800);
    match i {
        0 => {}
        1 => m.set_exact(fields::IN_PORT, 1),
        2 => m.set_exact(fields::IN_PORT, 2),
        3 => ip(&mut m),
        4 => {
            ip(&mut m);
            m.set_exact(fields::IN_PORT, 1);
        }
        5 => {
            ip(&mut m);
            m.set_masked(fields::NW_SRC, 0x0a00_0000, 0xff00_0000);
        }
        6 => {
            ip(&mut m);
            m.set_masked(fields::NW_SRC, 0x0a01_0000, 0xffff_0000);
        }
        7 => {
            ip(&mut m);
            m.set_exact(fields::NW_SRC, 0x0a01_0203);
        }
        8 => m.set_exact(fields::DL_TYPE, 0x0806),
        9 => {
            m.set_exact(fields::DL_TYPE, 0x0806);
            m.set_exact(fields::IN_PORT, 1);
        }
        10 => m.set_exact(fields::NW_SRC, 0x0a00_0001),
        _ => {
            ip(&mut m);
            m.set_exact(fields::NW_DST, 0x0a00_0001);
        }
    }
    m
}

fn flow_mod(s: &Spec) -> FlowMod {
    let mut e = FlowEntry {
        flow_match: shape(s.shape),
        priority: [0, 5, 10, 32768][usize::from(s.prio)],
        cookie: u64::from(s.cookie),
        cookie_mask: if s.cookie_mask { u64::MAX } else { 0 },
        table: [Some(0), Some(1), Some(2), None][usize::from(s.table)],
        hard_timeout: if s.hard { 10 } else { 0 },
        ..FlowEntry::default()
    };
    e.out_port = [OFPP_NONE, 1, 2][usize::from(s.out_port)];
    e.actions = match s.act {
        0..=3 => vec![Action::Output {
            port: u16::from(s.act % 3 + 1),
            max_len: 0,
        }],
        4..=6 => vec![],
        7..=9 => vec![Action::GotoTable { table: 2 }],
        10 => vec![Action::GotoTable { table: 0 }],
        _ => vec![Action::Output {
            port: 0xff10,
            max_len: 0,
        }],
    };
    if s.flags & 1 != 0 && s.act % 2 == 0 {
        e.flags.0 |= FlowFlags::CHECK_OVERLAP.0;
    }
    if s.flags & 2 != 0 {
        e.flags.0 |= FlowFlags::RESET_COUNTS.0;
    }
    let mut fm = match s.cmd {
        0 | 1 => FlowMod::add(e),
        2 => FlowMod::modify(e, true),
        3 => FlowMod::modify(e, false),
        4 => FlowMod::delete(e, true),
        _ => FlowMod::delete(e, false),
    };
    if matches!(fm.command, FlowModCommand::Modify { .. }) {
        fm.modify_may_add = s.may_add;
    }
    fm
}

#[derive(Debug, Clone)]
enum Step {
    Bundle(Vec<Spec>),
    /// Advance the clock by this many seconds and expire.
    Expire(u8),
    /// Credit every rule.
    Credit,
}

fn step(n_shapes: u8, n_prios: u8) -> impl Strategy<Value = Step> {
    prop_oneof![
        8 => prop::collection::vec(spec(n_shapes, n_prios), 1..8).prop_map(Step::Bundle),
        1 => (1u8..8).prop_map(Step::Expire),
        1 => Just(Step::Credit),
    ]
}

/// A table as comparable facts: per rule (classifier priority, insertion order, match,
/// classifier cookie, flow, counters, creation time), in lookup order.
type Facts = Vec<(u32, u64, Match, u64, FlowEntry, u64, u64, u64)>;

fn facts(rules: Vec<(u8, Arc<Rule<Arc<OfRule>>>)>, t: u8) -> Facts {
    rules
        .into_iter()
        .filter(|(rt, _)| *rt == t)
        .map(|(_, r)| {
            let p = r.payload();
            (
                r.priority(),
                r.seq(),
                r.match_(),
                r.cookie(),
                p.to_flow_entry(r.match_()),
                p.n_packets(),
                p.n_bytes(),
                p.created_ms,
            )
        })
        .collect()
}

fn new_switch() -> Switch {
    let mut sw = Switch::new();
    sw.vsctl("add-br br0 -- add-port br0 p1 -- add-port br0 p2 -- add-port br0 p3")
        .expect("valid setup");
    sw
}

fn run_both(steps: &[Step]) -> Result<(), TestCaseError> {
    let mut sw = new_switch();
    let mut rf = RefBridge::new();
    let mut now = 0u64;
    for (i, st) in steps.iter().enumerate() {
        match st {
            Step::Bundle(specs) => {
                let mods: Vec<FlowMod> = specs.iter().map(flow_mod).collect();
                // The reference does not say which tables were reordered (the datapath's
                // property tests check what that is for).
                let got = sw.flow_mods("br0", mods.clone()).map(|mut o| {
                    o.reordered_tables = [0; 4];
                    o
                });
                let want = rf.flow_mods(mods, now);
                prop_assert_eq!(got, want, "step {}", i);
            }
            Step::Expire(secs) => {
                now += 1000 * u64::from(*secs);
                let got = sw.expire_flows(now);
                let want = rf.expire(now);
                prop_assert_eq!(got, want, "step {}", i);
            }
            Step::Credit => {
                let br = sw.bridge("br0").expect("exists");
                for (_, r) in br.rules() {
                    r.payload().credit(u64::from(r.payload().priority()) + 1);
                }
                for (_, r) in rf.rules() {
                    r.payload().credit(u64::from(r.payload().priority()) + 1);
                }
            }
        }
        let br = sw.bridge("br0").expect("exists");
        for t in 0..3u8 {
            prop_assert_eq!(
                facts(br.rules(), t),
                facts(rf.rules(), t),
                "table {} after step {}",
                t,
                i
            );
            prop_assert_eq!(
                br.metas[usize::from(t)].order(),
                rf.subtables[usize::from(t)].clone(),
                "subtable order of table {} after step {}",
                t,
                i
            );
            prop_assert_eq!(br.table(t).is_some(), rf.table(t).is_some());
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Random bundles (adds, strict and loose modifies and deletes, cookies, `out_port`,
    /// `check_overlap`, `reset_counts`, `modify_may_add`, bad flows), expiry and counters: the
    /// tables, counters, subtable order and results are exactly the previous implementation's.
    #[test]
    fn bundles_agree_with_the_previous_implementation(
        steps in prop::collection::vec(step(12, 4), 1..12)
    ) {
        run_both(&steps)?;
    }

    /// The same with three matches and two priorities: bundles that add, replace, modify and
    /// delete the same rule several times.
    #[test]
    fn bundles_touching_few_rules_agree_with_the_previous_implementation(
        steps in prop::collection::vec(step(3, 2), 1..12)
    ) {
        run_both(&steps)?;
    }
}

fn add(sw: &mut Switch, flows: &[&str]) {
    sw.add_flows_text("br0", flows, "-O OpenFlow13")
        .expect("valid flows");
}

fn dump(sw: &Switch) -> Vec<(String, u64)> {
    sw.dump_flows("br0")
        .expect("exists")
        .iter()
        .map(|f| {
            (
                f.entry.to_dump_flows_string(OfVersion::Of13, false),
                f.entry.stats.n_packets,
            )
        })
        .collect()
}

#[test]
fn bundle_failing_at_its_last_flow_mod_changes_nothing() {
    let mut sw = new_switch();
    add(
        &mut sw,
        &[
            "priority=5,in_port=1,actions=output:2",
            "priority=5,ip,actions=output:3",
            "table=1,priority=7,actions=drop",
        ],
    );
    for (_, r) in sw.bridge("br0").expect("exists").rules() {
        r.payload().credit(60);
    }
    let before = dump(&sw);
    let order = sw.bridge("br0").expect("exists").metas[0].order();
    let mut mods = Vec::new();
    let e = |sw: &Switch, text: &str| {
        sw.parse_flows("br0", &[text], "-O OpenFlow13", FlowCommand::Add)
            .expect("valid")
            .remove(0)
    };
    // Every kind of change to tables 0 and 1, with a new mask at a new highest priority...
    mods.push(FlowMod::add(e(&sw, "priority=9,arp,actions=output:1")));
    mods.push(FlowMod::add(e(
        &sw,
        "priority=5,in_port=1,actions=output:3",
    )));
    mods.push(FlowMod::modify(e(&sw, "ip,actions=output:1"), false));
    mods.push(FlowMod::delete(e(&sw, "table=1,actions=drop"), false));
    for i in 0..100u32 {
        mods.push(FlowMod::add(e(
            &sw,
            &format!(
                "priority=6,udp,nw_dst=10.0.{}.{},actions=output:2",
                i / 256,
                i % 256
            ),
        )));
    }
    // ...then a flow that fails.
    let mut last = e(&sw, "table=2,actions=drop");
    last.actions = vec![Action::GotoTable { table: 1 }];
    mods.push(FlowMod::add(last));
    assert!(matches!(
        sw.flow_mods("br0", mods),
        Err(SwitchError::BadGotoTable { table: 2, goto: 1 })
    ));
    assert_eq!(dump(&sw), before);
    assert_eq!(sw.bridge("br0").expect("exists").metas[0].order(), order);
    // The same failure found only when the rules are checked (a missing prerequisite).
    let mut bad = e(&sw, "priority=5,actions=drop");
    bad.flow_match.set_exact(fields::NW_SRC, 1);
    let err = sw
        .flow_mods(
            "br0",
            vec![
                FlowMod::add(e(&sw, "priority=9,arp,actions=output:1")),
                FlowMod::add(bad),
            ],
        )
        .expect_err("missing prerequisite");
    assert!(matches!(err, SwitchError::Rule { index: 0, .. }), "{err}");
    assert_eq!(dump(&sw), before);
}

#[test]
fn equal_priorities_follow_ovs_subtable_order_across_bundles() {
    // Two overlapping rules of equal priority in different masks: the mask that reached the
    // priority first is looked up first, whatever the order of later bundles.
    let mut sw = new_switch();
    add(&mut sw, &["priority=10,ip,actions=output:1"]);
    add(&mut sw, &["priority=10,in_port=1,actions=output:2"]);
    let lookup = |sw: &Switch| {
        let mut k = packet::key::FlowKey::default();
        k.set_in_port(1);
        k.set_dl_type(0x0800);
        let br = sw.bridge("br0").expect("exists");
        let r = br
            .table(0)
            .expect("exists")
            .reader()
            .lookup(&k, None)
            .expect("a rule matches");
        r.payload().actions().to_vec()
    };
    let out1 = vec![Action::Output {
        port: 1,
        max_len: 0,
    }];
    assert_eq!(lookup(&sw), out1);
    // Many rules into the in_port mask at a lower priority do not move it ahead.
    let flows: Vec<String> = (0..50)
        .map(|i| format!("priority=3,in_port={},actions=drop", i + 2))
        .collect();
    let flows: Vec<&str> = flows.iter().map(String::as_str).collect();
    add(&mut sw, &flows);
    assert_eq!(lookup(&sw), out1);
    // The ip mask's only rule goes and comes back: it is appended after the in_port mask.
    let e = sw
        .parse_flows("br0", &["priority=10,ip"], "", FlowCommand::DeleteStrict)
        .expect("valid")
        .remove(0);
    sw.flow_mods("br0", vec![FlowMod::delete(e, true)])
        .expect("valid");
    add(&mut sw, &["priority=10,ip,actions=output:1"]);
    assert_eq!(
        lookup(&sw),
        vec![Action::Output {
            port: 2,
            max_len: 0
        }]
    );
}

#[test]
fn modify_of_a_rule_added_in_the_same_bundle_keeps_the_replaced_rules_counters() {
    // The previous implementation's behaviour, kept: an add replaces a rule (fresh counters),
    // but a later modify in the same bundle takes the counters of the rule it replaced.
    let mut sw = new_switch();
    add(&mut sw, &["priority=5,in_port=1,actions=output:2"]);
    for (_, r) in sw.bridge("br0").expect("exists").rules() {
        r.payload().credit(60);
    }
    let e = |text: &str, cmd| {
        sw.parse_flows("br0", &[text], "-O OpenFlow13", cmd)
            .expect("valid")
            .remove(0)
    };
    let mods = vec![
        FlowMod::add(e("priority=5,in_port=1,actions=output:3", FlowCommand::Add)),
        FlowMod::modify(
            e(
                "priority=5,in_port=1,actions=output:1",
                FlowCommand::ModifyStrict,
            ),
            true,
        ),
    ];
    let out = sw.flow_mods("br0", mods).expect("valid");
    assert_eq!((out.n_added, out.n_modified), (1, 1));
    assert_eq!(
        dump(&sw),
        vec![("priority=5,in_port=1 actions=output:1".to_string(), 1)]
    );
}

use openflow::ofctl::flow::FlowCommand;
