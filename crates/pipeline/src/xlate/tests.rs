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
        Just("output:10".to_string()),
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
        compiled in any::<bool>(),
    ) {
        let rules: Vec<&str> = rules.iter().map(String::as_str).collect();
        let mut sw = switch(&rules);
        if compiled {
            // The tables that compile (a few masks each) look up through merged tuples.
            sw.compile_tables("br0").expect("bridge exists");
        }
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

// ---- NORMAL and mirrors ----

/// A standalone bridge built with `vsctl` (ports p1..pN get OpenFlow port N).
fn l2(vsctl: &str) -> Switch {
    let mut sw = Switch::new();
    sw.vsctl(&format!(
        "add-br br0 -- set bridge br0 fail-mode=standalone -- {vsctl}"
    ))
    .expect("valid setup");
    sw
}

fn eth(in_port: u32, src: u8, dst: &str, vlan: Option<u16>) -> String {
    let head = format!("in_port({in_port}),eth(src=50:54:00:00:00:{src:02x},dst={dst}),");
    match vlan {
        Some(v) => format!("{head}eth_type(0x8100),vlan(vid={v},pcp=0),encap(eth_type(0x1234))"),
        None => format!("{head}eth_type(0x1234)"),
    }
}

fn learn(sw: &Switch, key: &str) -> String {
    let opts = XlateOptions {
        learn: true,
        ..XlateOptions::default()
    };
    sw.trace(TraceInput::Datapath(key), opts)
        .expect("valid trace")
        .datapath_actions()
}

const BCAST: &str = "ff:ff:ff:ff:ff:ff";

#[test]
fn normal_learns_and_forwards_to_learned_port() {
    let sw = l2("add-port br0 p1 -- add-port br0 p2 -- add-port br0 p3");
    assert_eq!(learn(&sw, &eth(1, 5, BCAST, None)), "100,2,3");
    assert_eq!(odp(&sw, &eth(2, 6, "50:54:00:00:00:05", None)), "1");
    // Without side effects nothing was learned from p2.
    assert_eq!(odp(&sw, &eth(1, 5, "50:54:00:00:00:06", None)), "100,2,3");
    let before = sw.counters.get(DropReason::LearnedInPort);
    assert_eq!(odp(&sw, &eth(1, 7, "50:54:00:00:00:05", None)), "drop");
    assert_eq!(sw.counters.get(DropReason::LearnedInPort), before + 1);
    // A reserved destination is never forwarded.
    assert_eq!(odp(&sw, &eth(1, 7, "01:80:c2:00:00:00", None)), "drop");
    assert_eq!(sw.counters.get(DropReason::ReservedMac), 1);
}

#[test]
fn normal_vlan_access_and_trunk() {
    let sw = l2(
        "add-port br0 p1 tag=10 -- add-port br0 p2 tag=20 -- add-port br0 p3 trunks=10,20 \
                 -- add-port br0 p4 tag=10",
    );
    assert_eq!(
        odp(&sw, &eth(1, 5, BCAST, None)),
        "push_vlan(vid=10,pcp=0),100,3,pop_vlan,4"
    );
    assert_eq!(odp(&sw, &eth(3, 5, BCAST, Some(20))), "100,pop_vlan,2");
    // A tagged frame on an access port, or a VLAN a trunk does not carry, is dropped.
    assert_eq!(odp(&sw, &eth(1, 5, BCAST, Some(10))), "drop");
    assert_eq!(odp(&sw, &eth(3, 5, BCAST, Some(30))), "drop");
    assert_eq!(sw.counters.get(DropReason::InvalidVlan), 2);
}

#[test]
fn normal_native_and_dot1q_tunnel() {
    let sw = l2(
        "add-port br0 p1 trunks=10,20 -- add-port br0 p2 vlan_mode=native-untagged tag=10 \
                 -- add-port br0 p3 vlan_mode=native-tagged tag=20 \
                 -- add-port br0 p4 vlan_mode=dot1q-tunnel tag=30 other-config:qinq-ethtype=802.1q",
    );
    // VLAN 10 leaves the native-untagged port untagged.
    assert_eq!(
        odp(&sw, &eth(1, 5, BCAST, Some(10))),
        "100,pop_vlan,2,push_vlan(vid=10,pcp=0),3"
    );
    // An untagged frame on a native port is in its native VLAN; a native port with no
    // `trunks` carries every VLAN but 0.
    assert_eq!(
        odp(&sw, &eth(3, 5, BCAST, None)),
        "push_vlan(vid=20,pcp=0),100,1,2"
    );
    // The tunnel port pushes its outer tag; only ports carrying 30 get the frame.
    assert_eq!(
        odp(&sw, &eth(4, 5, BCAST, Some(7))),
        "push_vlan(vid=30,pcp=0),100,2,3"
    );
}

#[test]
fn mirrors_select_and_output() {
    let mut sw = switch(&[
        "in_port=1,actions=output:2",
        "in_port=2,actions=mod_vlan_vid:9,output:1",
    ]);
    sw.vsctl(
        "set Bridge br0 mirrors=@m -- --id=@p1 get Port p1 -- --id=@p3 get Port p3 \
         -- --id=@m create Mirror name=m select_src_port=@p1 output_port=@p3",
    )
    .expect("valid mirror");
    assert_eq!(odp(&sw, IP1), "3,2");
    // Not selected: from p2.
    assert_eq!(
        odp(&sw, &IP1.replace("in_port(1)", "in_port(2)")),
        "push_vlan(vid=9,pcp=0),1"
    );
    // The mirror port receives nothing.
    assert_eq!(odp(&sw, &IP1.replace("in_port(1)", "in_port(3)")), "drop");
    assert_eq!(sw.counters.get(DropReason::MirrorPort), 1);
}

#[test]
fn mirror_to_vlan_and_again_after_modification() {
    let mut sw = switch(&["in_port=1,actions=output:2,mod_vlan_vid:17,output:4"]);
    sw.vsctl(
        "set Bridge br0 mirrors=@m -- --id=@m create Mirror name=m select_all=true output_vlan=12",
    )
    .expect("valid mirror");
    // RSPAN: every port carrying VLAN 12 (all trunks here) gets a tagged copy, once per
    // version of the packet; the modified version is mirrored again.
    assert_eq!(
        odp(&sw, IP1),
        "push_vlan(vid=12,pcp=0),100,1,2,3,4,pop_vlan,2,push_vlan(vid=17,pcp=0),4,\
         pop_vlan,push_vlan(vid=12,pcp=0),100,1,2,3,4"
    );
}

fn l2_switch_strategy() -> impl Strategy<Value = (String, Vec<String>)> {
    let port = prop_oneof![
        Just(String::new()),
        Just("tag=10".to_string()),
        Just("tag=20".to_string()),
        Just("trunks=10,20".to_string()),
        Just("vlan_mode=native-untagged tag=10".to_string()),
        Just("vlan_mode=native-tagged tag=20 trunks=10,20".to_string()),
        Just("vlan_mode=dot1q-tunnel tag=20 cvlans=10".to_string()),
    ];
    let mirror = prop_oneof![
        Just(String::new()),
        Just("select_all=true output_port=@p4".to_string()),
        Just("select_src_port=@p1 output_port=@p4".to_string()),
        Just("select_dst_port=@p2 select_vlan=10 output_port=@p4".to_string()),
        Just("select_all=true output_vlan=20".to_string()),
    ];
    let flows = prop::collection::vec(
        prop_oneof![
            Just("priority=5,in_port=1,actions=NORMAL,mod_vlan_vid:20,NORMAL".to_string()),
            Just("priority=5,dl_vlan=10,actions=strip_vlan,output:3,NORMAL".to_string()),
            Just("priority=4,dl_dst=50:54:00:00:00:02,actions=resubmit(,1)".to_string()),
            Just("table=1,actions=mod_dl_src:50:54:00:00:00:09,NORMAL".to_string()),
            Just("priority=3,in_port=2,actions=FLOOD".to_string()),
            Just("priority=3,vlan_tci=0,actions=output:2,NORMAL".to_string()),
        ],
        0..4,
    );
    (prop::collection::vec(port, 4), mirror, flows).prop_map(|(ports, mirror, flows)| {
        let mut v = String::from("add-br br0 -- set bridge br0 fail-mode=standalone");
        for (i, p) in ports.iter().enumerate() {
            v.push_str(&format!(
                " -- add-port br0 p{n} {p} -- set Interface p{n} ofport_request={n}",
                n = i + 1
            ));
        }
        if !mirror.is_empty() {
            v.push_str(&format!(
                " -- set Bridge br0 mirrors=@m -- --id=@p1 get Port p1 -- --id=@p2 get Port p2 \
                 -- --id=@p4 get Port p4 -- --id=@m create Mirror name=m {mirror}"
            ));
        }
        (v, flows)
    })
}

fn l2_packet_strategy() -> impl Strategy<Value = FlowKey> {
    (
        prop::sample::select(vec![1u32, 2, 3, 4, 0xfffe]),
        0u64..4,
        prop::sample::select(vec![1u64, 2, 3, 0xffff_ffff_ffff, 0x0180_c200_0000]),
        prop::option::of((prop::sample::select(vec![0u16, 10, 20, 30]), 0u16..2)),
        prop::sample::select(vec![0x0800u16, 0x0806, 0x1234]),
    )
        .prop_map(|(in_port, src, dst, vlan, dl_type)| {
            let mut k = FlowKey::default();
            k.set_in_port(in_port);
            k.set_dl_src(0x5054_0000_0000 | src);
            k.set_dl_dst(if dst < 16 {
                0x5054_0000_0000 | dst
            } else {
                dst
            });
            k.set_dl_type(dl_type);
            if let Some((vid, pcp)) = vlan {
                k.set_vlan_tpid(0x8100);
                k.set_vlan_tci(VLAN_CFI | vid | (pcp << 13));
            }
            if dl_type == 0x0806 {
                k.set_nw_proto(1);
                k.set_nw_src(0x0a00_0001);
                k.set_nw_dst(0x0a00_0001 + u32::try_from(src).unwrap_or(0) % 2);
            }
            if dl_type == 0x0800 {
                k.set_nw_proto(17);
                k.set_nw_ttl(64);
            }
            k
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]
    #[test]
    fn megaflow_soundness_normal_vlans_mirrors(
        (setup, flows) in l2_switch_strategy(),
        learned in prop::collection::vec(l2_packet_strategy(), 0..4),
        packets in prop::collection::vec((l2_packet_strategy(), l2_packet_strategy()), 6),
    ) {
        let mut sw = Switch::new();
        sw.vsctl(&setup).expect("valid setup");
        let flows: Vec<&str> = flows.iter().map(String::as_str).collect();
        sw.add_flows_text("br0", &flows, "").expect("valid flows");
        let learn = XlateOptions { learn: true, ..XlateOptions::default() };
        for mut k in learned {
            normalize_key(&mut k, 1);
            sw.translate("br0", &k, learn, None).expect("bridge exists");
        }
        for (p, q) in packets {
            let mut p = p;
            normalize_key(&mut p, 1);
            let a = sw.translate("br0", &p, XlateOptions::default(), None).expect("bridge exists");
            let other = blend(&p, &q, &a.wc);
            let b = sw.translate("br0", &other, XlateOptions::default(), None).expect("bridge exists");
            prop_assert_eq!(
                format_actions_for(&a), format_actions_for(&b),
                "setup {}\nflows {:?}\npacket {:?}\nmask {:?}\nother {:?}", setup, flows, p, a.wc, other
            );
        }
    }
}

#[test]
fn upcall_maps_datapath_port_and_learns() {
    let sw = l2("add-port br0 p1 -- add-port br0 p2 -- add-port br0 p3");
    let mut k = parse_key_for_test(&eth(1, 5, BCAST, None));
    k.set_in_port(1);
    let opts = XlateOptions {
        learn: true,
        credit_bytes: Some(60),
        now_ms: 1000,
    };
    let up = sw.upcall(&k, opts).expect("port 1 exists");
    assert_eq!(up.bridge, "br0");
    assert_eq!(crate::odp::format_actions(&up.output.actions), "100,2,3");
    let back = parse_key_for_test(&eth(2, 6, "50:54:00:00:00:05", None));
    let up = sw.upcall(&back, opts).expect("port 2 exists");
    assert_eq!(crate::odp::format_actions(&up.output.actions), "1");
    k.set_in_port(77);
    assert_eq!(sw.upcall(&k, opts), Err(XlateError::NoSuchDpPort(77)));
    let f = sw.dump_flows("br0").expect("exists");
    assert_eq!(f[0].entry.stats.n_packets, 2);
}

fn parse_key_for_test(s: &str) -> FlowKey {
    crate::odp::parse_key(s).expect("valid key")
}

fn br1_rules_strategy() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(
        (
            match_strategy(),
            0u16..4,
            prop::collection::vec(
                prop_oneof![
                    Just("output:5".to_string()),
                    Just("IN_PORT".to_string()),
                    Just("mod_nw_src:10.0.3.3".to_string()),
                    Just("mod_vlan_vid:7".to_string()),
                    Just("strip_vlan".to_string()),
                    Just("load:1->NXM_NX_REG0[0]".to_string()),
                    Just("dec_ttl".to_string()),
                    Just("NORMAL".to_string()),
                ],
                1..4,
            ),
        ),
        0..4,
    )
    .prop_map(|rules| {
        rules
            .into_iter()
            .map(|(m, prio, acts)| {
                // br1's ports are 5 and 20 (the patch port), not 1..4.
                let m = m
                    .replace("in_port=1", "in_port=20")
                    .replace("in_port=2", "in_port=5");
                let m = m
                    .split(',')
                    .filter(|f| !f.starts_with("in_port=3") && !f.starts_with("in_port=4"))
                    .collect::<Vec<_>>()
                    .join(",");
                format!("priority={prio},{m},actions={}", acts.join(","))
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn megaflow_soundness_across_patch_ports(
        rules in rules_strategy(),
        br1 in br1_rules_strategy(),
        packets in prop::collection::vec((packet_strategy(), packet_strategy()), 6),
    ) {
        let rules: Vec<&str> = rules.iter().map(String::as_str).collect();
        let mut sw = switch(&rules);
        sw.vsctl(
            "add-br br1 -- add-port br0 patch10 -- set interface patch10 type=patch \
             options:peer=patch20 ofport_request=10 -- add-port br1 patch20 \
             -- set interface patch20 type=patch options:peer=patch10 ofport_request=20 \
             -- add-port br1 p5 -- set interface p5 ofport_request=5",
        )
        .expect("valid patch setup");
        let br1: Vec<&str> = br1.iter().map(String::as_str).collect();
        sw.add_flows_text("br1", &br1, ALL_VERSIONS).expect("valid flows");
        for (p, q) in packets {
            let mut p = p;
            normalize_key(&mut p, 1);
            let a = sw.translate("br0", &p, XlateOptions::default(), None).expect("bridge exists");
            let other = blend(&p, &q, &a.wc);
            let b = sw.translate("br0", &other, XlateOptions::default(), None).expect("bridge exists");
            prop_assert_eq!(
                format_actions_for(&a), format_actions_for(&b),
                "rules {:?}\nbr1 {:?}\npacket {:?}\nmask {:?}\nother {:?}", rules, br1, p, a.wc, other
            );
        }
    }
}

#[test]
fn regression_mod_vlan_vid_sent_with_openflow13_always_pushes() {
    // ovs-ofctl sends `mod_vlan_vid` to an OpenFlow 1.1+ switch as push_vlan + set: a tagged
    // packet gets a second tag (what OVS does), while the OpenFlow 1.0 form rewrites the tag.
    let mut sw = switch(&[]);
    sw.add_flows_text(
        "br0",
        &["in_port=1,actions=mod_vlan_vid:20,output:2"],
        "-O OpenFlow13",
    )
    .expect("valid flow");
    assert_eq!(odp(&sw, TAGGED1), "push_vlan(vid=20,pcp=0),2");
    let sw = switch(&["in_port=1,actions=mod_vlan_vid:20,output:2"]);
    assert_eq!(odp(&sw, TAGGED1), "pop_vlan,push_vlan(vid=20,pcp=0),2");
}

#[test]
fn fdb_static_entries_and_flush_on_port_changes() {
    let mut sw = l2("add-port br0 p1 -- add-port br0 p2 -- add-port br0 p3");
    sw.fdb_add("br0", "p2", 0, 0x5054_0000_0009)
        .expect("port exists");
    assert!(sw.fdb_add("br0", "p9", 0, 1).is_err());
    assert_eq!(odp(&sw, &eth(1, 5, "50:54:00:00:00:09", None)), "2");
    // Learning never moves a static entry.
    learn(&sw, &eth(3, 9, BCAST, None));
    assert_eq!(odp(&sw, &eth(1, 5, "50:54:00:00:00:09", None)), "2");
    // A learned entry is forgotten when its port changes VLANs.
    learn(&sw, &eth(3, 7, BCAST, None));
    assert_eq!(odp(&sw, &eth(1, 5, "50:54:00:00:00:07", None)), "3");
    sw.vsctl("set Port p3 tag=5").expect("valid");
    assert_eq!(odp(&sw, &eth(1, 5, "50:54:00:00:00:07", None)), "100,2");
    // Removing a port removes its entries, static ones too.
    sw.vsctl("del-port p2").expect("valid");
    assert_eq!(sw.fdb_show("br0", 0).expect("bridge exists").len(), 0);
}

#[test]
fn regression_trace_walk_spells_push_vlan_not_drop() {
    let mut sw = Switch::new();
    sw.vsctl("add-br br0 -- add-port br0 p1 -- add-port br0 p2")
        .unwrap();
    sw.add_flows_text(
        "br0",
        &["ip,actions=mod_vlan_vid:10,output:2"],
        "-O OpenFlow13",
    )
    .unwrap();
    let r = sw
        .trace(TraceInput::Datapath(IP1), XlateOptions::default())
        .unwrap();
    let walk = r.to_text();
    assert!(walk.contains("push_vlan:0x8100"), "{walk}");
    assert!(!walk.lines().any(|l| l.trim() == "drop"), "{walk}");
    assert_eq!(r.datapath_actions(), "push_vlan(vid=10,pcp=0),2");
}

/// Runs `scenario` and asserts that the drop counter of `reason` moved by `expected` and no
/// other drop counter moved.
fn assert_only_drop(sw: &Switch, reason: DropReason, expected: u64, scenario: impl FnOnce()) {
    let before = sw.counters.all();
    scenario();
    for ((name, b), (_, a)) in before.into_iter().zip(sw.counters.all()) {
        let want = if name == reason.as_str() { expected } else { 0 };
        assert_eq!(a - b, want, "{name} while testing {}", reason.as_str());
    }
}

#[test]
fn output_to_a_no_forward_port_counts_drop_no_forward() {
    let mut sw = switch(&["in_port=1,actions=output:2,output:3"]);
    sw.mod_port("br0", "p2", &["noforward"])
        .expect("port exists");
    assert_only_drop(&sw, DropReason::NoForward, 1, || {
        assert_eq!(odp(&sw, IP1), "3");
    });
}

#[test]
fn unsupported_actions_count_drop_unsupported_action() {
    // An action this pipeline does not implement (a group) is skipped; the rest runs.
    let sw = switch(&["in_port=1,actions=group:1,output:2"]);
    assert_only_drop(&sw, DropReason::Unsupported, 1, || {
        assert_eq!(odp(&sw, IP1), "2");
    });
    // A resubmit through connection tracking is skipped; the actions after it run.
    let sw = switch(&[
        "table=0,ct_state=+trk+est,in_port=1,ip,actions=output:3,resubmit(,1,ct),output:4",
    ]);
    let tracked = TraceInput::Flow {
        bridge: "br0",
        flow: "in_port=1,ct_state=+trk+est,tcp",
    };
    assert_only_drop(&sw, DropReason::Unsupported, 1, || {
        let r = sw
            .trace(tracked, XlateOptions::default())
            .expect("valid trace");
        assert_eq!(r.datapath_actions(), "3,4");
    });
}
