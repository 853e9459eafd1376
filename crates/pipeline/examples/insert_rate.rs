//! Rule insertion through the API: `Switch::flow_mods` in batches, the way a controller
//! thread loads 256K exact 5-tuple rules into a table that already holds established rules.
//!
//! ```text
//! cargo build --release -p pipeline --example insert_rate
//! taskset -c 1 target/release/examples/insert_rate --rules 262144 --batches 1024,8192,65536,262144 --reps 3
//! ```
//!
//! Flow `i` is the 5-tuple of `shared/peers/ovs-dpdk/flowdef.py`:
//! `priority=100,udp,nw_src=198.18.x.y,nw_dst=198.19.0.z,tp_src=..,tp_dst=..,actions=output:2`.
//! The lines are parsed once (parsing is not part of the API cost), and every call's
//! `Vec<FlowMod>` is built before the clock starts. One line per batch size: the median
//! rules/s over `--reps` fresh switches, the slowest single call, and (with `--reader`) the
//! lookups/s of a thread looking up established flows in table 0 before and during the load.
//! `--max-secs S` stops a repetition after S seconds and reports the rate over what was done
//! (for old, quadratic code). `--leak` never frees the switches (for profiles).

#![allow(missing_docs)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use openflow::ofctl::flow::FlowCommand;
use packet::key::FlowKey;
use pipeline::switch::{FlowMod, Switch};

struct Args {
    rules: usize,
    batches: Vec<usize>,
    reps: usize,
    max_secs: f64,
    reader: bool,
    leak: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        rules: 262_144,
        batches: vec![1024, 8192, 65_536, 262_144],
        reps: 3,
        max_secs: 60.0,
        reader: false,
        leak: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut val = || it.next().ok_or(format!("{k} needs a value"));
        match k.as_str() {
            "--rules" => a.rules = val()?.parse().map_err(|e| format!("--rules: {e}"))?,
            "--reps" => a.reps = val()?.parse().map_err(|e| format!("--reps: {e}"))?,
            "--max-secs" => a.max_secs = val()?.parse().map_err(|e| format!("--max-secs: {e}"))?,
            "--batches" => {
                a.batches = val()?
                    .split(',')
                    .map(|s| s.parse().map_err(|e| format!("--batches: {e}")))
                    .collect::<Result<_, _>>()?
            }
            "--reader" => a.reader = true,
            "--leak" => a.leak = true,
            _ => return Err(format!("unknown argument {k}")),
        }
    }
    Ok(a)
}

fn ip(x: u32) -> String {
    format!(
        "{}.{}.{}.{}",
        x >> 24,
        (x >> 16) & 255,
        (x >> 8) & 255,
        x & 255
    )
}

/// Flow `i` of flowdef.py as an ovs-ofctl line.
fn rule_line(i: u32) -> String {
    let src = (198 << 24) | (18 << 16) | (i % 65_536);
    let dst = (198 << 24) | (19 << 16) | (i / 65_536);
    format!(
        "priority=100,udp,nw_src={},nw_dst={},tp_src={},tp_dst={},actions=output:2",
        ip(src),
        ip(dst),
        1024 + i % 64_000,
        1024 + i / 64_000
    )
}

/// The established rules: a few wildcarded ones and 1,000 TCP rules in their own mask.
fn established() -> Vec<String> {
    let mut v = vec![
        "priority=0,actions=NORMAL".to_string(),
        "priority=10,in_port=1,actions=output:2".to_string(),
        "priority=50,arp,actions=NORMAL".to_string(),
        "priority=200,ip,nw_dst=10.0.0.0/8,actions=drop".to_string(),
    ];
    for i in 0..1000u32 {
        v.push(format!(
            "priority=100,tcp,nw_dst={},tp_dst=80,actions=output:1",
            ip((10 << 24) | (1 << 16) | i)
        ));
    }
    v
}

fn switch() -> Switch {
    let mut sw = Switch::new();
    sw.vsctl(
        "add-br br0 -- add-port br0 p1 -- set Interface p1 ofport_request=1 \
         -- add-port br0 p2 -- set Interface p2 ofport_request=2",
    )
    .expect("valid setup");
    let est = established();
    let lines: Vec<&str> = est.iter().map(String::as_str).collect();
    sw.add_flows_text("br0", &lines, "").expect("valid flows");
    sw
}

/// Keys of established flows (hits on the TCP rules).
fn established_keys() -> Vec<FlowKey> {
    (0..1000u32)
        .map(|i| {
            let mut k = FlowKey::default();
            k.set_in_port(1);
            k.set_dl_type(0x0800);
            k.set_nw_proto(6);
            k.set_nw_src(0x0b00_0001);
            k.set_nw_dst((10 << 24) | (1 << 16) | i);
            k.set_tp_src(40_000);
            k.set_tp_dst(80);
            k
        })
        .collect()
}

/// CPU time of this thread in seconds (`/proc/thread-self/schedstat`), 0 if unknown: the
/// machine is shared, so wall-clock rates move with the load and CPU-time rates less.
fn thread_cpu_secs() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0.0, |ns| ns as f64 / 1e9)
}

struct Point {
    secs: f64,
    cpu_secs: f64,
    n_done: usize,
    max_call: Duration,
    reader_before: f64,
    reader_during: f64,
}

fn run(entries: &[openflow::flow::FlowEntry], batch: usize, a: &Args) -> Point {
    let mut sw = switch();
    let calls: Vec<Vec<FlowMod>> = entries
        .chunks(batch)
        .map(|c| c.iter().cloned().map(FlowMod::add).collect())
        .collect();
    let reader = a.reader.then(|| {
        let r = sw
            .bridge("br0")
            .and_then(|b| b.table(0))
            .expect("table 0 holds the established rules")
            .reader();
        let stop = Arc::new(AtomicBool::new(false));
        let count = Arc::new(AtomicU64::new(0));
        let (s2, c2) = (stop.clone(), count.clone());
        let keys = established_keys();
        let h = std::thread::spawn(move || {
            let mut i = 0usize;
            while !s2.load(Ordering::Relaxed) {
                let snap = r.snapshot();
                for _ in 0..32 {
                    let k = &keys[i % keys.len()];
                    std::hint::black_box(snap.lookup(k, None));
                    i += 1;
                }
                drop(snap);
                c2.fetch_add(32, Ordering::Relaxed);
            }
        });
        (stop, count, h)
    });
    let rate = |count: &AtomicU64, d: Duration| {
        let c0 = count.load(Ordering::Relaxed);
        let t0 = Instant::now();
        std::thread::sleep(d);
        (count.load(Ordering::Relaxed) - c0) as f64 / t0.elapsed().as_secs_f64()
    };
    let reader_before = reader
        .as_ref()
        .map_or(0.0, |(_, c, _)| rate(c, Duration::from_millis(300)));
    let c0 = reader
        .as_ref()
        .map_or(0, |(_, c, _)| c.load(Ordering::Relaxed));
    let t0 = Instant::now();
    let cpu0 = thread_cpu_secs();
    let mut n_done = 0;
    let mut max_call = Duration::ZERO;
    for call in calls {
        let n = call.len();
        let t = Instant::now();
        sw.flow_mods("br0", call).expect("valid bundle");
        max_call = max_call.max(t.elapsed());
        n_done += n;
        if t0.elapsed().as_secs_f64() > a.max_secs {
            break;
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let cpu_secs = thread_cpu_secs() - cpu0;
    let reader_during = reader.as_ref().map_or(0.0, |(_, c, _)| {
        (c.load(Ordering::Relaxed) - c0) as f64 / secs
    });
    if let Some((stop, _, h)) = reader {
        stop.store(true, Ordering::Relaxed);
        let _ = h.join();
    }
    let n_rules = sw
        .bridge("br0")
        .and_then(|b| b.table(0))
        .map_or(0, |t| t.len());
    assert_eq!(n_rules, 1004 + n_done, "every rule went in");
    if a.leak {
        // For profiles of the load alone: the switch's teardown never runs.
        std::mem::forget(sw);
    }
    Point {
        secs,
        cpu_secs,
        n_done,
        max_call,
        reader_before,
        reader_during,
    }
}

fn main() {
    let a = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("insert_rate: {e}");
            std::process::exit(2);
        }
    };
    let n = u32::try_from(a.rules).expect("rule count fits in u32");
    let lines: Vec<String> = (0..n).map(rule_line).collect();
    let t = Instant::now();
    let sw = switch();
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let entries = sw
        .parse_flows("br0", &refs, "", FlowCommand::Add)
        .expect("valid flows");
    drop(sw);
    println!(
        "parsed {} rules in {:.2} s (not part of the API cost)",
        entries.len(),
        t.elapsed().as_secs_f64()
    );
    for &b in &a.batches {
        let mut pts: Vec<Point> = (0..a.reps).map(|_| run(&entries, b, &a)).collect();
        // In run order: the first repetition writes to fresh pages, the others reuse freed
        // memory.
        let in_order: Vec<String> = pts
            .iter()
            .map(|p| format!("{:.3}M", p.n_done as f64 / p.cpu_secs / 1e6))
            .collect();
        pts.sort_by(|x, y| {
            let (rx, ry) = (x.n_done as f64 / x.secs, y.n_done as f64 / y.secs);
            rx.total_cmp(&ry)
        });
        let m = &pts[pts.len() / 2];
        let rates: Vec<String> = pts
            .iter()
            .map(|p| format!("{:.3}M", p.n_done as f64 / p.secs / 1e6))
            .collect();
        let mut cpu: Vec<f64> = pts
            .iter()
            .map(|p| p.n_done as f64 / p.cpu_secs / 1e6)
            .collect();
        cpu.sort_by(f64::total_cmp);
        print!(
            "batch {b:>7}: {} rules in {:.3} s = {:.3}M rules/s (reps {}), CPU time {:.3}M rules/s, slowest call {:.1} ms",
            m.n_done,
            m.secs,
            m.n_done as f64 / m.secs / 1e6,
            rates.join(" "),
            cpu[cpu.len() / 2],
            m.max_call.as_secs_f64() * 1e3
        );
        if m.n_done < entries.len() {
            print!(" [stopped after {:.0} s]", a.max_secs);
        }
        print!(", CPU time in run order {}", in_order.join(" "));
        if a.reader {
            print!(
                ", reader {:.2}M -> {:.2}M lookups/s",
                m.reader_before / 1e6,
                m.reader_during / 1e6
            );
        }
        println!();
    }
}
