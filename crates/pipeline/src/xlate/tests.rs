//! Translation tests: one or more per action family, counted drops, and the megaflow
//! soundness property.

use proptest::prelude::*;

use super::*;
use crate::trace::TraceInput;

/// A switch with `br0` and ports p1..p4 (OpenFlow = datapath numbers), and `flows` added
/// with OpenFlow 1.3 enabled.
fn switch(flows: &[&str]) -> Switch {
    let mut sw = Switch::new();
    sw.vsctl(
        "add-br br0 -- add-port br0 p1 -- add-port br0 p2 -- add-port br0 p3 -- add-port br0 p4",
    )
    .expect("valid setup");
    sw.add_flows_text("br0", flows, ALL_VERSIONS)
        .expect("valid flows");
    sw
}

const ALL_VERSIONS: &str = "-O OpenFlow10,OpenFlow11,OpenFlow12,OpenFlow13,OpenFlow14,OpenFlow15";

fn odp(sw: &Switch, key: &str) -> String {
    sw.trace(TraceInput::Datapath(key), XlateOptions::default())
        .expect("valid trace")
        .datapath_actions()
}

const IP1: &str = "in_port(1),eth(src=50:54:00:00:00:05,dst=50:54:00:00:00:07),eth_type(0x0800),\
                   ipv4(src=192.168.0.1,dst=192.168.0.2,proto=6,tos=0,ttl=64,frag=no),tcp(src=8,dst=80)";
const TAGGED1: &str = "in_port(1),eth(src=50:54:00:00:00:05,dst=50:54:00:00:00:07),\
                       eth_type(0x8100),vlan(vid=10,pcp=0),encap(eth_type(0x1234))";

#[test]
fn output_ports_and_input_port_skipped() {
    let sw = switch(&["in_port=1,actions=output:2,output:1,in_port,LOCAL,output:9"]);
    assert_eq!(odp(&sw, IP1), "2,1,100");
    assert_eq!(sw.counters.get(DropReason::NoPort), 1);
}

#[test]
fn flood_all_respect_port_flags() {
    let mut sw = switch(&["in_port=1,actions=FLOOD", "in_port=2,actions=ALL"]);
    sw.mod_port("br0", "3", &["noflood"]).expect("port exists");
    sw.mod_port("br0", "p4", &["noforward"])
        .expect("port exists");
    assert_eq!(odp(&sw, IP1), "100,2");
    assert_eq!(
        odp(&sw, &IP1.replace("in_port(1)", "in_port(2)")),
        "100,1,3"
    );
    sw.mod_port("br0", "p1", &["noreceive"])
        .expect("port exists");
    let before = sw.counters.get(DropReason::NoReceive);
    assert_eq!(odp(&sw, IP1), "drop");
    assert_eq!(sw.counters.get(DropReason::NoReceive), before + 1);
}

#[test]
fn resubmit_and_goto_table() {
    let sw = switch(&[
        "table=0,in_port=1,actions=output:2,resubmit(3,1),goto_table:2",
        "table=1,in_port=3,actions=output:3",
        "table=1,in_port=1,actions=output:4",
        "table=2,actions=output:4",
    ]);
    assert_eq!(odp(&sw, IP1), "2,3,4");
}

#[test]
fn resubmit_loop_ends_in_counted_drop() {
    let sw = switch(&["in_port=1,actions=output:2,resubmit(,0)"]);
    let before = sw.counters.get(DropReason::ResubmitDepth);
    let r = sw
        .trace(TraceInput::Datapath(IP1), XlateOptions::default())
        .expect("valid trace");
    assert_eq!(r.datapath_actions(), "drop");
    assert_eq!(r.output.error, Some(DropReason::ResubmitDepth));
    assert_eq!(sw.counters.get(DropReason::ResubmitDepth), before + 1);
    assert!(r.to_text().contains("over max translation depth 64"));
}

#[test]
fn resubmit_fanout_hits_total_limit() {
    // Each level resubmits twice into the next table: 2^20 lookups, far over the limit.
    let flows: Vec<String> = (0..20)
        .map(|t| {
            format!(
                "table={t},actions=resubmit(,{}),resubmit(,{})",
                t + 1,
                t + 1
            )
        })
        .collect();
    let flows: Vec<&str> = flows.iter().map(String::as_str).collect();
    let sw = switch(&flows);
    let r = sw
        .trace(TraceInput::Datapath(IP1), XlateOptions::default())
        .expect("valid trace");
    assert_eq!(r.output.error, Some(DropReason::ResubmitLimit));
    assert_eq!(sw.counters.get(DropReason::ResubmitLimit), 1);
}

#[test]
fn table_miss_drops() {
    let sw = switch(&["in_port=2,actions=output:1"]);
    assert_eq!(odp(&sw, IP1), "drop");
    assert_eq!(sw.counters.get(DropReason::TableMiss), 1);
}

#[test]
fn write_and_clear_actions_run_in_openflow_order() {
    let sw = switch(&[
        "table=0,ip,in_port=1,actions=write_actions(output:3,set_field:10.0.0.9->ip_dst,dec_ttl),goto_table:1",
        "table=1,actions=output:2,write_actions(output:4)",
    ]);
    assert_eq!(odp(&sw, IP1), "2,set(ipv4(dst=10.0.0.9,ttl=63)),4");
    let sw = switch(&[
        "table=0,in_port=1,actions=write_actions(output:3),goto_table:1",
        "table=1,actions=clear_actions",
    ]);
    assert_eq!(odp(&sw, IP1), "drop");
}

#[test]
fn registers_metadata_load_move() {
    let sw = switch(&[
        "table=0,tcp,in_port=1,actions=load:2->NXM_NX_REG0[],move:NXM_OF_TCP_DST[]->NXM_NX_REG1[0..15],write_metadata:0x5/0xff,goto_table:1",
        "table=1,reg0=2,reg1=80,metadata=5,actions=output:4",
    ]);
    assert_eq!(odp(&sw, IP1), "4");
    assert_eq!(odp(&sw, &IP1.replace("dst=80", "dst=81")), "drop");
}

#[test]
fn set_fields_are_committed_lazily_and_only_when_changed() {
    let sw = switch(&[
        "tcp,in_port=1,actions=mod_nw_src:192.168.0.1,output:2,mod_tp_dst:443,mod_dl_dst:00:00:00:00:00:01,output:3,mod_tp_dst:80,output:4",
    ]);
    assert_eq!(
        odp(&sw, IP1),
        "2,set(eth(dst=00:00:00:00:00:01)),set(tcp(dst=443)),3,set(tcp(dst=80)),4"
    );
}

#[test]
fn vlan_push_pop_modify() {
    let sw = switch(&["in_port=1,actions=mod_vlan_vid:5,output:2,strip_vlan,output:3"]);
    assert_eq!(odp(&sw, IP1), "push_vlan(vid=5,pcp=0),2,pop_vlan,3");
    // Modifying an existing tag is pop+push.
    assert_eq!(
        odp(&sw, TAGGED1),
        "pop_vlan,push_vlan(vid=5,pcp=0),2,pop_vlan,3"
    );
    // set_vlan_vid (no push) on an untagged packet does nothing.
    let sw =
        switch(&["in_port=1,vlan_tci=0x1000/0x1000,actions=set_field:4101->vlan_vid,output:2"]);
    assert_eq!(odp(&sw, TAGGED1), "pop_vlan,push_vlan(vid=5,pcp=0),2");
    let sw = switch(&["in_port=1,actions=push_vlan:0x88a8,set_field:4103->vlan_vid,output:2"]);
    assert_eq!(odp(&sw, TAGGED1), "push_vlan(tpid=0x88a8,vid=7,pcp=0),2");
}

#[test]
fn dec_ttl_exception_sends_packet_in_and_stops_table() {
    let sw = switch(&[
        "table=0,in_port=1,actions=dec_ttl,output:2,resubmit(,1),output:4",
        "table=1,actions=dec_ttl,output:3",
    ]);
    assert_eq!(
        odp(&sw, &IP1.replace("ttl=64", "ttl=3")),
        "set(ipv4(ttl=2)),2,set(ipv4(ttl=1)),3,4"
    );
    let r = sw
        .trace(
            TraceInput::Datapath(&IP1.replace("ttl=64", "ttl=2")),
            XlateOptions::default(),
        )
        .expect("valid trace");
    assert_eq!(r.output.controller.len(), 1);
    assert_eq!(r.output.controller[0].reason, PacketInReason::InvalidTtl);
    assert!(r
        .datapath_actions()
        .starts_with("set(ipv4(ttl=1)),2,userspace("));
    assert!(r.datapath_actions().ends_with(",4"));
    assert_eq!(sw.counters.get(DropReason::InvalidTtl), 1);
}

#[test]
fn exit_stops_everything() {
    let sw = switch(&[
        "table=0,in_port=1,actions=output:2,resubmit(,1),output:3",
        "table=1,actions=output:4,exit,output:1",
    ]);
    assert_eq!(odp(&sw, IP1), "2,4");
}

#[test]
fn controller_output_is_recorded() {
    let sw = switch(&["in_port=1,actions=CONTROLLER:100"]);
    let r = sw
        .trace(TraceInput::Datapath(IP1), XlateOptions::default())
        .expect("valid trace");
    assert_eq!(r.output.controller[0].reason, PacketInReason::Action);
    assert_eq!(r.output.controller[0].max_len, 100);
    assert!(r
        .datapath_actions()
        .starts_with("userspace(pid=0,controller(reason=1"));
}

#[test]
fn normal_floods_unknown_destination_on_trunks() {
    let sw = switch(&["actions=NORMAL"]);
    assert_eq!(odp(&sw, IP1), "100,2,3,4");
}

fn patched(br1_flows: &[&str]) -> Switch {
    let mut sw = switch(&["in_port=1,actions=output:10,output:2"]);
    sw.vsctl(
        "add-br br1 -- add-port br0 patch10 -- set interface patch10 type=patch options:peer=patch20 ofport_request=10 \
         -- add-port br1 patch20 -- set interface patch20 type=patch options:peer=patch10 ofport_request=20 \
         -- add-port br1 p5 -- set interface p5 ofport_request=5",
    )
    .expect("valid patch setup");
    sw.add_flows_text("br1", br1_flows, ALL_VERSIONS)
        .expect("valid flows");
    sw
}

#[test]
fn patch_port_continues_on_peer_and_restores() {
    let sw =
        patched(&["in_port=20,reg0=0,actions=load:7->NXM_NX_REG0[],mod_nw_dst:10.1.1.1,output:5"]);
    assert_eq!(
        odp(&sw, IP1),
        "set(ipv4(dst=10.1.1.1)),5,set(ipv4(dst=192.168.0.2)),2"
    );
    let r = sw
        .trace(TraceInput::Datapath(IP1), XlateOptions::default())
        .expect("valid trace");
    assert!(r.to_text().contains("bridge(\"br1\")"));
}

#[test]
fn patch_loop_ends_in_counted_drop() {
    let mut sw = patched(&["in_port=20,actions=output:20"]);
    // br1 sends back to br0 through the patch, br0 sends to br1 again...
    sw.add_flows_text("br0", &["in_port=10,actions=IN_PORT"], "")
        .expect("valid flow");
    sw.add_flows_text("br1", &["in_port=20,actions=IN_PORT"], "")
        .expect("valid flow");
    assert_eq!(odp(&sw, IP1), "2");
    assert_eq!(sw.counters.get(DropReason::ResubmitDepth), 1);
}

#[test]
fn counters_credit_rules() {
    let sw = switch(&["in_port=1,actions=output:2"]);
    let opts = XlateOptions {
        credit_bytes: Some(100),
        now_ms: 5,
        learn: false,
    };
    sw.trace(TraceInput::Datapath(IP1), opts)
        .expect("valid trace");
    sw.trace(TraceInput::Datapath(IP1), opts)
        .expect("valid trace");
    let f = sw.dump_flows("br0").expect("bridge exists");
    assert_eq!(
        (f[0].entry.stats.n_packets, f[0].entry.stats.n_bytes),
        (2, 200)
    );
}

#[test]
fn megaflow_has_consulted_bits_only() {
    let sw = switch(&["in_port=1,ip,nw_dst=192.168.0.0/16,actions=output:2"]);
    let r = sw
        .trace(TraceInput::Datapath(IP1), XlateOptions::default())
        .expect("valid trace");
    assert_eq!(r.output.wc.nw_dst(), 0xffff_0000);
    assert_eq!(r.output.wc.nw_src(), 0);
    assert_eq!(r.output.wc.tp_dst(), 0);
    assert!(r.megaflow().starts_with("recirc_id=0,eth,ip,in_port=1"));
}

// ---- Megaflow soundness ----

fn match_strategy() -> impl Strategy<Value = String> {
    let parts = (
        prop::option::of(1u8..=4),
        prop::option::of((0u8..4, prop::sample::select(vec![8u8, 16, 24, 30, 32]))),
        prop::option::of((0u32..4, 0u32..16)),
        prop::option::of(prop::sample::select(vec![80u16, 443, 22])),
        prop::option::of(0u32..4),
        prop::option::of(prop::sample::select(vec![
            "vlan_tci=0x1000/0x1000",
            "vlan_tci=0",
            "dl_vlan=10",
        ])),
        prop::option::of(0u8..3),
    );
    parts.prop_map(|(in_port, src, dst, tp, reg, vlan, ttl)| {
        let mut m = vec!["tcp".to_string()];
        if let Some(p) = in_port {
            m.push(format!("in_port={p}"));
        }
        if let Some((b, len)) = src {
            m.push(format!("nw_src=10.0.{b}.0/{len}"));
        }
        if let Some((v, mask)) = dst {
            m.push(format!("nw_dst=10.1.0.{v}/0.0.255.{mask}"));
        }
        if let Some(t) = tp {
            m.push(format!("tp_dst={t}"));
        }
        if let Some(r) = reg {
            m.push(format!("reg0={r}/0x3"));
        }
        if let Some(v) = vlan {
            m.push(v.to_string());
        }
        if let Some(t) = ttl {
            m.push(format!("nw_ttl={t}"));
        }
        m.join(",")
    })
}

fn action_strategy(table: u8) -> impl Strategy<Value = String> {
    let next = table + 1;
    prop_oneof![
        (1u8..=4).prop_map(|p| format!("output:{p}")),
        Just("IN_PORT".to_string()),
        Just("FLOOD".to_string()),
        Just(format!("resubmit(,{next})")),
        (1u8..=4).prop_map(move |p| format!("resubmit({p},{next})")),
        (0u32..4).prop_map(|v| format!("load:{v}->NXM_NX_REG0[0..1]")),
        Just("move:NXM_OF_IP_SRC[8..9]->NXM_NX_REG0[0..1]".to_string()),
        Just("move:NXM_OF_IP_DST[0..1]->NXM_OF_TCP_DST[0..1]".to_string()),
        (0u8..4).prop_map(|v| format!("set_field:10.1.0.{v}->ip_dst")),
        (0u8..4).prop_map(|v| format!("mod_nw_src:10.0.{v}.1")),
        (1u16..4).prop_map(|v| format!("mod_vlan_vid:{v}")),
        Just("strip_vlan".to_string()),
        Just("dec_ttl".to_string()),
        Just("mod_nw_tos:8".to_string()),
        Just("exit".to_string()),
    ]
}

fn rules_strategy() -> impl Strategy<Value = Vec<String>> {
    let table = |t: u8| {
        prop::collection::vec(
            (
                match_strategy(),
                0u16..4,
                prop::collection::vec(action_strategy(t), 0..4),
                prop::bool::weighted(0.2),
                prop::option::weighted(0.3, 1u8..=4),
                prop::bool::weighted(0.3),
            ),
            0..5,
        )
        .prop_map(move |rules| {
            rules
                .into_iter()
                .map(|(m, prio, acts, clear, write, goto)| {
                    let mut acts = acts;
                    if clear {
                        acts.push("clear_actions".to_string());
                    }
                    if let Some(p) = write {
                        acts.push(format!("write_actions(output:{p})"));
                    }
                    if goto && t < 3 {
                        acts.push(format!("goto_table:{}", t + 1));
                    }
                    if acts.is_empty() {
                        acts.push("drop".to_string());
                    }
                    format!("table={t},priority={prio},{m},actions={}", acts.join(","))
                })
                .collect::<Vec<_>>()
        })
    };
    (table(0), table(1), table(2), table(3)).prop_map(|(a, b, c, d)| {
        let mut v = a;
        v.extend(b);
        v.extend(c);
        v.extend(d);
        v
    })
}

fn packet_strategy() -> impl Strategy<Value = FlowKey> {
    (
        1u32..=4,
        0u32..0x0400,
        0u32..0x0400,
        prop::sample::select(vec![80u16, 443, 22, 8080]),
        prop::sample::select(vec![0u8, 1, 2, 64]),
        prop::option::of(prop::sample::select(vec![10u16, 3, 99])),
        prop::sample::select(vec![6u8, 6, 6, 17]),
        0u8..4,
    )
        .prop_map(|(in_port, src, dst, tp, ttl, vlan, proto, tos)| {
            let mut k = FlowKey::default();
            k.set_in_port(in_port);
            k.set_dl_type(ETH_TYPE_IP);
            k.set_dl_src(0x5054_0000_0005);
            k.set_dl_dst(0x5054_0000_0007);
            k.set_nw_src(0x0a00_0000 | src);
            k.set_nw_dst(0x0a01_0000 | dst);
            k.set_nw_proto(proto);
            k.set_nw_ttl(ttl);
            k.set_nw_tos(tos);
            k.set_tp_src(1234);
            k.set_tp_dst(tp);
            if let Some(v) = vlan {
                k.set_vlan_tpid(0x8100);
                k.set_vlan_tci(VLAN_CFI | v);
            }
            k
        })
}

/// `p` on the mask bits, `q` elsewhere; registers and metadata stay 0 (as for any packet
/// fresh from a port), and the result is normalized like an input key.
fn blend(p: &FlowKey, q: &FlowKey, mask: &FlowKey) -> FlowKey {
    let mut k = FlowKey::default();
    for i in 0..k.words.len() {
        k.words[i] = (p.words[i] & mask.words[i]) | (q.words[i] & !mask.words[i]);
    }
    k.set(fields::METADATA, 0);
    for r in fields::REGS {
        k.set(r, 0);
    }
    k.set(fields::ACTSET_OUTPUT, 0);
    normalize_key(&mut k, 1);
    k
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]
    #[test]
    fn megaflow_soundness(
        rules in rules_strategy(),
        packets in prop::collection::vec((packet_strategy(), packet_strategy()), 6),
    ) {
        let rules: Vec<&str> = rules.iter().map(String::as_str).collect();
        let sw = switch(&rules);
        for (p, q) in packets {
            let mut p = p;
            normalize_key(&mut p, 1);
            let a = sw.translate("br0", &p, XlateOptions::default(), None).expect("bridge exists");
            let other = blend(&p, &q, &a.wc);
            let b = sw.translate("br0", &other, XlateOptions::default(), None).expect("bridge exists");
            prop_assert_eq!(
                format_actions_for(&a), format_actions_for(&b),
                "rules {:?}\npacket {:?}\nmask {:?}\nother {:?}", rules, p, a.wc, other
            );
        }
    }
}

fn format_actions_for(o: &XlateOutput) -> String {
    crate::odp::format_actions(&o.actions)
}
