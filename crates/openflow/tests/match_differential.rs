//! Differential test of the match side against the real `ovs-ofctl parse-flow`: random
//! matches must give the same usable protocols, the same printed flow (IPv6 compared by
//! value) or the same error. Needs ovs-ofctl on the PATH:
//! `cargo test -p openflow --test match_differential -- --ignored --nocapture`.
//!
//! `testdata/ofctl-match-differential.jsonl` keeps a sample of ovs-ofctl 3.1's answers
//! (recorded with `FERROVS_RECORD=path` and the ignored `record_ovs_answers`), replayed
//! without ovs-ofctl by `recorded_ovs_answers_agree`.

use openflow::cases::same_text;
use openflow::ofctl::{parse_flow, ParseOptions};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{json, Value};

/// What ovs-ofctl said: `Ok((usable, printed))` or `Err(message)`.
fn ovs(flow: &str, options: &str) -> Option<Result<(String, String), String>> {
    let mut cmd = std::process::Command::new("ovs-ofctl");
    cmd.args(options.split_whitespace())
        .arg("parse-flow")
        .arg(flow);
    let out = cmd.output().ok()?;
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    if !out.status.success() {
        let msg = stderr
            .lines()
            .last()
            .unwrap_or("")
            .trim_start_matches("ovs-ofctl: ");
        return Some(Err(msg.to_string()));
    }
    let usable = stdout
        .lines()
        .next()?
        .strip_prefix("usable protocols: ")?
        .to_string();
    let line = stdout.lines().nth(2)?;
    let printed = line
        .split_once(": ADD ")
        .map(|(_, r)| r)?
        .trim_start()
        .to_string();
    Some(Ok((usable, printed)))
}

fn item() -> impl Strategy<Value = String> {
    let mac =
        proptest::array::uniform6(prop_oneof![Just(0u8), Just(0xff), any::<u8>()]).prop_map(|b| {
            b.iter()
                .map(|x| format!("{x:02x}"))
                .collect::<Vec<_>>()
                .join(":")
        });
    let ip = any::<[u8; 4]>().prop_map(|b| format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3]));
    let ip6 = any::<u128>().prop_map(|v| std::net::Ipv6Addr::from(v).to_string());
    prop_oneof![
        (0u16..70).prop_map(|p| format!("in_port={p}")),
        mac.clone().prop_map(|m| format!("dl_src={m}")),
        (mac.clone(), mac).prop_map(|(a, b)| format!("dl_dst={a}/{b}")),
        (0u16..4096).prop_map(|v| format!("dl_vlan={v}")),
        (0u8..8).prop_map(|v| format!("dl_vlan_pcp={v}")),
        (0u8..8).prop_map(|v| format!("vlan_pcp={v}")),
        (any::<u16>(), any::<u16>()).prop_map(|(v, m)| format!("vlan_tci={v:#x}/{m:#x}")),
        (0u16..0x2000).prop_map(|v| format!("vlan_vid={v:#x}")),
        (ip.clone(), 0u32..=32).prop_map(|(a, n)| format!("nw_src={a}/{n}")),
        (ip.clone(), ip.clone()).prop_map(|(a, m)| format!("nw_dst={a}/{m}")),
        (ip6.clone(), 0u32..=128).prop_map(|(a, n)| format!("ipv6_src={a}/{n}")),
        ip6.clone().prop_map(|a| format!("ipv6_dst={a}")),
        (0u32..0x10_0000).prop_map(|v| format!("ipv6_label={v:#x}")),
        prop_oneof![
            Just(1u8),
            Just(6),
            Just(17),
            Just(58),
            Just(132),
            any::<u8>()
        ]
        .prop_map(|v| format!("nw_proto={v}")),
        any::<u8>().prop_map(|v| format!("nw_tos={v}")),
        (0u8..64).prop_map(|v| format!("ip_dscp={v}")),
        (0u8..4).prop_map(|v| format!("nw_ecn={v}")),
        any::<u8>().prop_map(|v| format!("nw_ttl={v}")),
        prop_oneof![
            Just("no"),
            Just("yes"),
            Just("first"),
            Just("later"),
            Just("not_later")
        ]
        .prop_map(|v| format!("ip_frag={v}")),
        (any::<u16>(), any::<u16>()).prop_map(|(v, m)| format!("tp_src={v:#x}/{m:#x}")),
        any::<u16>().prop_map(|v| format!("tp_dst={v}")),
        any::<u16>().prop_map(|v| format!("udp_src={v}")),
        any::<u16>().prop_map(|v| format!("sctp_dst={v}")),
        (0u16..0x1000, 0u16..0x1000).prop_map(|(v, m)| format!("tcp_flags={v:#x}/{m:#x}")),
        prop_oneof![Just("+syn-ack"), Just("syn|ack"), Just("+fin"), Just("0")]
            .prop_map(|v| format!("tcp_flags={v}")),
        any::<u8>().prop_map(|v| format!("icmp_type={v}")),
        any::<u8>().prop_map(|v| format!("icmp_code={v}")),
        any::<u8>().prop_map(|v| format!("icmpv6_type={v}")),
        ip6.prop_map(|a| format!("nd_target={a}")),
        (0u8..16, any::<u32>(), any::<u32>()).prop_map(|(r, v, m)| format!("reg{r}={v:#x}/{m:#x}")),
        (0u8..8, any::<u64>()).prop_map(|(r, v)| format!("xreg{r}={v:#x}")),
        (0u8..4, 0u16..128, any::<bool>())
            .prop_map(|(r, b, v)| format!("xxreg{r}[{b}]={}", u8::from(v))),
        (0u16..16).prop_map(|b| format!("tp_src[{b}]=1")),
        (any::<u64>(), any::<u64>()).prop_map(|(v, m)| format!("metadata={v:#x}/{m:#x}")),
        (any::<u64>(), any::<u64>()).prop_map(|(v, m)| format!("tun_id={v:#x}/{m:#x}")),
        (ip.clone(), 0u32..=32).prop_map(|(a, n)| format!("tun_src={a}/{n}")),
        any::<u32>().prop_map(|v| format!("pkt_mark={v:#x}")),
        prop_oneof![
            Just("+trk-new"),
            Just("+trk+est"),
            Just("trk|rpl"),
            Just("0x21/0x21")
        ]
        .prop_map(|v| format!("ct_state={v}")),
        any::<u16>().prop_map(|v| format!("ct_zone={v}")),
        any::<u128>().prop_map(|v| format!("ct_label={v:#x}")),
        (any::<u32>(), any::<u32>()).prop_map(|(v, m)| format!("ct_mark={v:#x}/{m:#x}")),
        ip.clone().prop_map(|a| format!("arp_spa={a}")),
        (ip, 0u32..=32).prop_map(|(a, n)| format!("arp_tpa={a}/{n}")),
        any::<u16>().prop_map(|v| format!("arp_op={v}")),
        (0u32..0x10_0000).prop_map(|v| format!("mpls_label={v}")),
        (0u8..8).prop_map(|v| format!("mpls_tc={v}")),
        (0u8..2).prop_map(|v| format!("mpls_bos={v}")),
        any::<u8>().prop_map(|v| format!("mpls_ttl={v}")),
        prop_oneof![
            Just("0x800"),
            Just("0x86dd"),
            Just("0x806"),
            Just("0x8847"),
            Just("0x1234")
        ]
        .prop_map(|v| format!("dl_type={v}")),
        (0u8..255).prop_map(|t| format!("table={t}")),
        (0u16..=u16::MAX).prop_map(|p| format!("priority={p}")),
        Just("send_flow_rem".to_string()),
    ]
}

/// Rarer fields, odd spellings and invalid values, to compare errors too.
fn odd_item() -> impl Strategy<Value = String> {
    prop_oneof![
        prop_oneof![
            Just("tun_dst=1.2.3.4"),
            Just("tun_gbp_id=5/0xf"),
            Just("tun_gbp_flags=0x3"),
            Just("tun_flags=+oam"),
            Just("tun_flags=oam"),
            Just("tun_flags=1/1"),
            Just("dp_hash=0x5/0xf"),
            Just("recirc_id=3"),
            Just("actset_output=3"),
            Just("ct_nw_src=1.2.3.4"),
            Just("ct_nw_dst=1.2.3.0/24"),
            Just("ct_nw_proto=6"),
            Just("ct_tp_src=80"),
            Just("ct_tp_dst=0x50/0xf0"),
            Just("nd_sll=00:01:02:03:04:05"),
            Just("nd_tll=00:01:02:03:04:05/ff:ff:00:00:00:00"),
            Just("in_port=LOCAL"),
            Just("in_port=controller"),
            Just("in_port_oxm=7"),
            Just("in_port=65534"),
            Just("cookie=0x55"),
            Just("idle_timeout=10"),
            Just("hard_timeout=0x20"),
            Just("importance=3"),
            Just("check_overlap"),
            Just("reset_counts"),
            Just("no_packet_counts"),
            Just("no_byte_counts"),
            Just("nw_src=*"),
            Just("tp_src=*"),
            Just("dl_src="),
            Just("ip_frag=yes"),
            Just("nw_frag=later"),
            Just("tcp_flags=+syn+syn"),
            Just("tcp_flags=+bogus"),
            Just("ct_state=-bogus"),
            Just("nw_ttl=256"),
            Just("dl_vlan=0x1fff"),
            Just("dl_vlan=65535"),
            Just("dl_vlan_pcp=9"),
            Just("ip_dscp=64"),
            Just("nw_ecn=4"),
            Just("reg0=x"),
            Just("reg40=1"),
            Just("reg0[40]=1"),
            Just("reg0[5..2]=1"),
            Just("reg0[0..3]=16"),
            Just("xxreg1[64..127]=0xffffffffffffffff"),
            Just("nw_src=1.2.3"),
            Just("nw_src=1.2.3.4/33"),
            Just("ipv6_src=::1/129"),
            Just("ipv6_src=zz::1"),
            Just("dl_src=01:02:03:04:05"),
            Just("in_port=nosuchport"),
            Just("priority=65536"),
            Just("table=256"),
            Just("cookie=0x1/0x1"),
            Just("metadata=0x1ffffffffffffffff"),
            Just("mpls_label=0x100000"),
            Just("arp_op=0x1ff"),
            Just("icmp_type=0x1ff"),
            Just("tp_dst=0x10000"),
            Just("ip_frag=sometimes"),
            Just("vlan_tci=0x1009/0x1"),
            Just("vlan_vid=0x1000/0x1000"),
            Just("dl_vlan_pcp=3,dl_vlan=0xffff"),
            Just("ct_label=0x1/0x1"),
            Just("ct_mark=0"),
            Just("pkt_mark=0/0"),
            Just("eth_type=0x800"),
            Just("ip_proto=17"),
            Just("tunnel_id=5"),
            Just("out_port=1"),
            Just("duration=3.5s"),
            Just("n_packets=5"),
            Just("skb_priority=1"),
            Just("tun_ttl=1"),
            Just("udp_dst=53"),
            Just("ipv6_label=0x12345/0xf0000"),
            Just("nd_target=fe80::1/64"),
            Just("icmpv6_code=3"),
            Just("arp_tha=00:00:00:00:00:01"),
        ]
        .prop_map(str::to_string),
        item(),
    ]
}

fn proto() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        Just(""),
        Just("ip,"),
        Just("ipv6,"),
        Just("tcp,"),
        Just("tcp6,"),
        Just("udp,"),
        Just("udp6,"),
        Just("icmp,"),
        Just("icmp6,"),
        Just("arp,"),
        Just("rarp,"),
        Just("mpls,"),
        Just("sctp,"),
        Just("sctp6,"),
    ]
}

#[test]
#[ignore = "needs ovs-ofctl"]
fn match_side_agrees_with_ovs_ofctl() {
    assert!(
        ovs("actions=drop", "").is_some(),
        "ovs-ofctl is not runnable"
    );
    let strategy = (
        proto(),
        prop::collection::vec(odd_item(), 0..5),
        prop_oneof![
            Just(""),
            Just("-F nxm"),
            Just("--protocols OpenFlow13"),
            Just("-O OpenFlow11"),
            Just("-O OpenFlow15"),
            Just("-O OpenFlow10,OpenFlow14"),
        ],
    );
    let mut runner = TestRunner::new(Config {
        cases: 1500,
        ..Config::default()
    });
    let (mut agree, mut differ) = (0, 0);
    let mut tree_failures = Vec::new();
    for _ in 0..1500 {
        let (p, items, options) = strategy.new_tree(&mut runner).expect("strategy").current();
        let flow = format!("{p}{},actions=drop", items.join(","));
        let Some(theirs) = ovs(&flow, options) else {
            continue;
        };
        let opts = ParseOptions::from_ofctl_options(options).expect("options");
        let ours = parse_flow(&flow, &opts)
            .map(|pf| (pf.usable.to_ofctl_string(), pf.to_ofctl_string()))
            .map_err(|e| e.to_string());
        let same = match (&ours, &theirs) {
            (Ok((ua, pa)), Ok((ub, pb))) => ua == ub && same_text(pa, pb),
            (Err(a), Err(b)) => a == b,
            _ => false,
        };
        if same {
            agree += 1;
        } else {
            differ += 1;
            println!("DIFF [{options}] {flow}\n  ours:   {ours:?}\n  theirs: {theirs:?}");
            tree_failures.push(flow);
        }
    }
    println!("{agree} agree, {differ} differ");
}

fn ours(flow: &str, options: &str) -> Result<(String, String), String> {
    let opts = ParseOptions::from_ofctl_options(options).map_err(|e| e.to_string())?;
    parse_flow(flow, &opts)
        .map(|pf| (pf.usable.to_ofctl_string(), pf.to_ofctl_string()))
        .map_err(|e| e.to_string())
}

/// Records ovs-ofctl's answers for random flows into `$FERROVS_RECORD`.
#[test]
#[ignore = "needs ovs-ofctl and FERROVS_RECORD"]
fn record_ovs_answers() {
    let Ok(path) = std::env::var("FERROVS_RECORD") else {
        return;
    };
    let strategy = (
        proto(),
        prop::collection::vec(odd_item(), 0..5),
        prop_oneof![
            Just(""),
            Just("-F nxm"),
            Just("--protocols OpenFlow13"),
            Just("-O OpenFlow11"),
            Just("-O OpenFlow15"),
        ],
    );
    let mut runner = TestRunner::new(Config::default());
    let mut out = String::new();
    for _ in 0..600 {
        let (p, items, options) = strategy.new_tree(&mut runner).expect("strategy").current();
        let flow = format!("{p}{},actions=drop", items.join(","));
        let rec = match ovs(&flow, options) {
            Some(Ok((usable, printed))) => {
                json!({"flow": flow, "options": options, "usable": usable, "printed": printed})
            }
            Some(Err(e)) => json!({"flow": flow, "options": options, "error": e}),
            None => continue,
        };
        out.push_str(&rec.to_string());
        out.push('\n');
    }
    std::fs::write(path, out).expect("write the record");
}

/// Replays the recorded ovs-ofctl answers.
#[test]
fn recorded_ovs_answers_agree() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/ofctl-match-differential.jsonl"
    );
    let text = std::fs::read_to_string(path).expect("recorded answers exist");
    let mut failures = Vec::new();
    let mut n = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let r: Value = serde_json::from_str(line).expect("JSON");
        let s = |k: &str| r.get(k).and_then(Value::as_str);
        let (flow, options) = (s("flow").unwrap_or(""), s("options").unwrap_or(""));
        let got = ours(flow, options);
        let ok = match (&got, s("error")) {
            (Err(e), Some(want)) => e == want,
            (Ok((u, p)), None) => {
                Some(u.as_str()) == s("usable") && same_text(p, s("printed").unwrap_or(""))
            }
            _ => false,
        };
        n += 1;
        if !ok {
            failures.push(format!(
                "[{options}] {flow}: got {got:?}, ovs-ofctl said {r}"
            ));
        }
    }
    for f in &failures {
        println!("{f}");
    }
    assert!(n > 0);
    assert!(failures.is_empty(), "{} of {n} differ", failures.len());
}
