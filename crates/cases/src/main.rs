//! `ferrovs-cases`: replays OVS case files through ferrovs, shows how a flow normalizes, and
//! runs a small packets-through-a-flow-table demo.
//!
//! - `ferrovs-cases parse FILE`: every ovs-ofctl parse case in FILE (JSON lines); one line per
//!   failing case, then `N passed, M failed`. `--strict` exits non-zero on any failure.
//! - `ferrovs-cases trace FILE`: every OVS trace case in FILE replayed through the pipeline; same
//!   output contract as `parse`.
//! - `ferrovs-cases trace-demo`: one packet traced through two patched bridges, walk printed.
//! - `ferrovs-cases flow TEXT [--options "-O OpenFlow13"]`: the flow in ovs-ofctl's normalized form
//!   per OpenFlow version, with its usable protocols.
//! - `ferrovs-cases demo`: real packets built, parsed into flow keys, and classified against a
//!   small OpenFlow table, printing the matched rule and the megaflow for each.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use classifier::Classifier;
use openflow::action::OfVersion;
use openflow::flow::FlowEntry;
use openflow::ofctl::{format_flow_key, format_match, parse_flow, ParseOptions};
use openflow::Match;
use packet::builder::PacketBuilder;
use packet::extract::extract;
use packet::FlowKey;

#[derive(Parser, Debug)]
#[command(
    name = "ferrovs-cases",
    version,
    about = "Replays OVS case files through ferrovs"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Replays ovs-ofctl parse cases (JSON lines, the format of testdata/ofctl-parse-cases.jsonl).
    Parse {
        /// The case file.
        file: PathBuf,
        /// Print only the summary, not each failing case.
        #[arg(long)]
        quiet: bool,
        /// Exit with status 1 if any case fails.
        #[arg(long)]
        strict: bool,
    },
    /// Replays OVS trace cases (JSON lines, the format of testdata/ovs-trace-cases.jsonl)
    /// through the pipeline.
    Trace {
        /// The case file.
        file: PathBuf,
        /// Print only the summary, not each failing case.
        #[arg(long)]
        quiet: bool,
        /// Exit with status 1 if any case fails.
        #[arg(long)]
        strict: bool,
    },
    /// Traces one packet through a small bridge and prints the walk.
    TraceDemo,
    /// Parses one flow and prints it as ovs-ofctl would, per OpenFlow version.
    Flow {
        /// The flow, in ovs-ofctl syntax.
        text: String,
        /// ovs-ofctl options restricting the protocols (e.g. "-O OpenFlow13").
        #[arg(long, default_value = "")]
        options: String,
    },
    /// Packets through a small flow table, with the matched rule and megaflow of each.
    Demo,
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ferrovs-cases: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Parse {
            file,
            quiet,
            strict,
        } => replay_file(&file, quiet, strict, cases::replay_parse_file),
        Command::Trace {
            file,
            quiet,
            strict,
        } => replay_file(&file, quiet, strict, cases::replay_trace_file),
        Command::TraceDemo => {
            trace_demo()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Flow { text, options } => {
            let opts = ParseOptions::from_ofctl_options(&options)?;
            let parsed = parse_flow(&text, &opts)?;
            println!("usable protocols: {}", parsed.usable.to_ofctl_string());
            println!("chosen protocol:  {}", parsed.chosen.to_ofctl_string());
            for (name, v) in [
                ("OpenFlow10", OfVersion::Of10),
                ("OpenFlow11", OfVersion::Of11),
                ("OpenFlow13", OfVersion::Of13),
            ] {
                println!("{name:<11} {}", parsed.flow.to_ofctl_string(v));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Demo => {
            demo()?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Reads a case file, replays it and prints the report.
fn replay_file(
    file: &std::path::Path,
    quiet: bool,
    strict: bool,
    replay: fn(&str) -> cases::Report,
) -> Result<ExitCode> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let report = replay(&text);
    print!("{}", report.render(!quiet));
    Ok(if strict && report.failed() > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

const DEMO_FLOWS: &[&str] = &[
    "priority=300,tcp,nw_dst=10.0.0.0/8,tp_dst=80,actions=mod_vlan_vid:7,output:2",
    "priority=200,ip,nw_src=192.168.1.0/24,actions=dec_ttl,output:3",
    "priority=100,arp,actions=NORMAL",
    "priority=50,in_port=1,actions=output:4",
    "priority=0,actions=drop",
];

fn demo() -> Result<()> {
    let mut table: Classifier<FlowEntry> = Classifier::new();
    println!("flow table:");
    for text in DEMO_FLOWS {
        let parsed = parse_flow(text, &ParseOptions::default())?;
        println!("  {}", parsed.to_ofctl_string());
        let flow = parsed.flow;
        table.insert(flow.flow_match, u32::from(flow.priority), flow.cookie, flow)?;
    }
    let (a, b) = ([0x50, 0x54, 0, 0, 0, 5], [0x50, 0x54, 0, 0, 0, 7]);
    let full = PacketBuilder::ethernet(a, b)
        .ipv4([192, 168, 1, 5], [10, 1, 2, 3])
        .tcp(40000, 80)
        .build();
    let packets: Vec<(&str, u32, Vec<u8>)> = vec![
        ("HTTP to 10.1.2.3", 1, full.clone()),
        (
            "SSH to 10.1.2.3",
            2,
            PacketBuilder::ethernet(a, b)
                .ipv4([192, 168, 1, 5], [10, 1, 2, 3])
                .tcp(40000, 22)
                .build(),
        ),
        (
            "DNS from 172.16.0.9",
            1,
            PacketBuilder::ethernet(a, b)
                .ipv4([172, 16, 0, 9], [8, 8, 8, 8])
                .udp(5353, 53)
                .build(),
        ),
        (
            "ARP request",
            2,
            PacketBuilder::ethernet(a, [0xff; 6])
                .arp_request(a, [192, 168, 1, 5], [192, 168, 1, 1])
                .build(),
        ),
        (
            "ICMPv6 echo",
            2,
            PacketBuilder::ethernet(a, b)
                .ipv6([0xfe80, 0, 0, 0, 0, 0, 0, 1], [0xfe80, 0, 0, 0, 0, 0, 0, 2])
                .icmpv6(128, 0, &[0, 1, 0, 1])
                .build(),
        ),
        ("HTTP truncated after 40 bytes", 2, full[..40].to_vec()),
    ];
    let reader = table.reader();
    for (what, in_port, frame) in packets {
        let mut key = FlowKey::default();
        key.set_in_port(in_port);
        let info = extract(&frame, &mut key);
        println!("\n{what} ({} bytes, in_port={in_port})", frame.len());
        println!("  Flow:     {}", format_flow_key(&key));
        if let Some(stop) = info.stop {
            println!(
                "  Parse:    stopped at byte {} ({})",
                stop.offset,
                stop.reason.as_str()
            );
        }
        let mut wc = FlowKey::default();
        match reader.lookup(&key, Some(&mut wc)) {
            Some(rule) => {
                rule.stats().credit(1, frame.len() as u64);
                let flow = rule.payload();
                println!("  Rule:     {}", flow.to_ofctl_string(OfVersion::Of10));
                println!("  Megaflow: {}", format_match(&Match::new(key, wc), None));
            }
            None => println!("  Rule:     (table miss: drop)"),
        }
    }
    Ok(())
}

/// Two bridges joined by patch ports, VLAN access ports, a mirror, and a few flows: one
/// packet traced through it all, with the walk printed as `ofproto/trace` does.
fn trace_demo() -> Result<()> {
    use pipeline::switch::Switch;
    use pipeline::trace::TraceInput;

    let mut sw = Switch::new();
    let setup = "add-br br0 -- set bridge br0 fail-mode=secure \
                 -- add-port br0 p1 -- set Interface p1 ofport_request=1 \
                 -- add-port br0 p2 -- set Interface p2 ofport_request=2 \
                 -- add-port br0 patch-a -- set Interface patch-a type=patch options:peer=patch-b ofport_request=10 \
                 -- add-br br1 -- set bridge br1 fail-mode=standalone \
                 -- add-port br1 patch-b -- set Interface patch-b type=patch options:peer=patch-a ofport_request=20 \
                 -- add-port br1 p3 tag=10 -- set Interface p3 ofport_request=3 \
                 -- add-port br1 p4 tag=10 -- set Interface p4 ofport_request=4 \
                 -- add-port br1 p5 tag=20 -- set Interface p5 ofport_request=5";
    println!("$ ovs-vsctl {setup}");
    sw.vsctl(setup)?;
    let flows = [
        "table=0,priority=100,in_port=1,ip,nw_dst=10.0.0.0/8,actions=dec_ttl,resubmit(,1)",
        "table=0,priority=0,actions=drop",
        "table=1,priority=10,ip,actions=mod_vlan_vid:10,output:2,output:10",
    ];
    for f in flows {
        println!("$ ovs-ofctl add-flow br0 '{f}'");
    }
    sw.add_flows_text("br0", &flows, "-O OpenFlow13")?;
    let packet = "in_port(1),eth(src=50:54:00:00:00:05,dst=ff:ff:ff:ff:ff:ff),eth_type(0x0800),\
                  ipv4(src=192.168.0.1,dst=10.1.2.3,proto=6,tos=0,ttl=64,frag=no),tcp(src=40000,dst=80)";
    println!("$ ovs-appctl ofproto/trace '{packet}'\n");
    let report = sw.trace(TraceInput::Datapath(packet), Default::default())?;
    print!("{}", report.to_text());
    Ok(())
}
