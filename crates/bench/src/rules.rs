//! The OpenFlow rules of a rule set in `ovs-ofctl add-flows` syntax, byte for byte what
//! `shared/peers/ovs-dpdk/gen_rules.py --mode MODE --flows N --out-port PORT` writes.

use std::fmt::Write as _;

pub use datapath::flows::exact_rule;
use datapath::flows::{masks8_rule, mixed_prefix_rule};

use crate::point::Ruleset;

/// The rule file of `ruleset` for `n_flows` flows, forwarding to `out_port` (a port name such
/// as `p1`, which `ovs-ofctl` resolves, or a number). One rule a line, `\n`-terminated.
pub fn rules_text(ruleset: Ruleset, n_flows: u32, out_port: &str) -> String {
    let act = format!("output:{out_port}");
    let rule: fn(u32, &str) -> String = match ruleset {
        Ruleset::Single => return format!("priority=0,actions={act}\n"),
        Ruleset::SingleUdp => return format!("priority=1,udp,actions={act}\n"),
        Ruleset::Exact | Ruleset::Mixed => exact_rule,
        Ruleset::Masks8 => masks8_rule,
    };
    let step = if ruleset == Ruleset::Mixed { 2 } else { 1 };
    let mut s = String::with_capacity(usize::try_from(n_flows).unwrap_or(0) * 100 + 64);
    for i in (0..n_flows).step_by(step) {
        // Writing to a String cannot fail.
        let _ = writeln!(s, "{}", rule(i, out_port));
    }
    if ruleset == Ruleset::Mixed {
        let _ = writeln!(s, "{}", mixed_prefix_rule(out_port));
    }
    s.push_str("priority=0,actions=drop\n");
    s
}

/// How many rules [`rules_text`] writes.
pub fn rule_count(ruleset: Ruleset, n_flows: u32) -> u64 {
    match ruleset {
        Ruleset::Single | Ruleset::SingleUdp => 1,
        Ruleset::Exact | Ruleset::Masks8 => u64::from(n_flows) + 1,
        Ruleset::Mixed => u64::from(n_flows.div_ceil(2)) + 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines 1, 2, 64000, 64001, 65536, 65537, 70000 and 70001 of
    /// `gen_rules.py --flows 70000 --mode exact` (whose file has md5
    /// 278dbb53004a4b459280615b1a0e7854).
    const GEN_RULES_70000: [(usize, &str); 8] = [
        (1, "priority=100,udp,nw_src=198.18.0.0,nw_dst=198.19.0.0,tp_src=1024,tp_dst=1024,actions=output:p1"),
        (2, "priority=100,udp,nw_src=198.18.0.1,nw_dst=198.19.0.0,tp_src=1025,tp_dst=1024,actions=output:p1"),
        (64000, "priority=100,udp,nw_src=198.18.249.255,nw_dst=198.19.0.0,tp_src=65023,tp_dst=1024,actions=output:p1"),
        (64001, "priority=100,udp,nw_src=198.18.250.0,nw_dst=198.19.0.0,tp_src=1024,tp_dst=1025,actions=output:p1"),
        (65536, "priority=100,udp,nw_src=198.18.255.255,nw_dst=198.19.0.0,tp_src=2559,tp_dst=1025,actions=output:p1"),
        (65537, "priority=100,udp,nw_src=198.18.0.0,nw_dst=198.19.0.1,tp_src=2560,tp_dst=1025,actions=output:p1"),
        (70000, "priority=100,udp,nw_src=198.18.17.111,nw_dst=198.19.0.1,tp_src=7023,tp_dst=1025,actions=output:p1"),
        (70001, "priority=0,actions=drop"),
    ];

    #[test]
    fn exact_rules_match_gen_rules_py() {
        let text = rules_text(Ruleset::Exact, 70_000, "p1");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 70_001);
        assert_eq!(
            u64::try_from(lines.len()).unwrap(),
            rule_count(Ruleset::Exact, 70_000)
        );
        for (n, want) in GEN_RULES_70000 {
            assert_eq!(lines[n - 1], want, "line {n}");
        }
        assert!(text.ends_with('\n'));
    }

    #[test]
    fn single_rule_sets_match_gen_rules_py() {
        assert_eq!(
            rules_text(Ruleset::Single, 1_000, "p1"),
            "priority=0,actions=output:p1\n"
        );
        assert_eq!(
            rules_text(Ruleset::SingleUdp, 1_000, "p1"),
            "priority=1,udp,actions=output:p1\n"
        );
        assert_eq!(rule_count(Ruleset::SingleUdp, 1_000), 1);
    }

    #[test]
    fn mixed_has_exact_rules_for_even_flows_and_a_prefix_rule() {
        let text = rules_text(Ruleset::Mixed, 5, "p1");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                exact_rule(0, "p1").as_str(),
                exact_rule(2, "p1").as_str(),
                exact_rule(4, "p1").as_str(),
                "priority=10,udp,nw_src=198.18.0.0/16,actions=output:p1",
                "priority=0,actions=drop",
            ]
        );
        assert_eq!(rule_count(Ruleset::Mixed, 5), 5);
        assert_eq!(rule_count(Ruleset::Mixed, 4), 4);
        assert_eq!(rules_text(Ruleset::Mixed, 4, "p1").lines().count(), 4);
    }

    #[test]
    fn masks8_has_one_rule_per_flow_over_eight_field_sets() {
        let text = rules_text(Ruleset::Masks8, 9, "p1");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 10);
        assert_eq!(
            u64::try_from(lines.len()).unwrap(),
            rule_count(Ruleset::Masks8, 9)
        );
        assert_eq!(lines[0], exact_rule(0, "p1"));
        assert_eq!(
            lines[7],
            "priority=93,udp,nw_src=198.18.0.7,actions=output:p1"
        );
        assert_eq!(
            lines[8],
            "priority=100,udp,nw_src=198.18.0.8,nw_dst=198.19.0.0,tp_src=1032,tp_dst=1024,actions=output:p1"
        );
        let priorities: std::collections::BTreeSet<&str> =
            lines[..8].iter().map(|l| &l[..12]).collect();
        assert_eq!(priorities.len(), 8);
    }

    #[test]
    fn out_port_is_a_parameter() {
        let text = rules_text(Ruleset::Exact, 1, "2");
        assert_eq!(
            text,
            "priority=100,udp,nw_src=198.18.0.0,nw_dst=198.19.0.0,tp_src=1024,tp_dst=1024,actions=output:2\n\
             priority=0,actions=drop\n"
        );
    }
}
