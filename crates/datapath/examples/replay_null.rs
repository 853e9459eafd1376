//! Measures the replay→null ceiling: frames replayed from a pcap (copied into pool buffers)
//! and sunk into a null port, one thread, batches of 32. Prints Mpps and cycles/packet.
//!
//! ```text
//! cargo run --release -p datapath --example replay_null -- [--flows N] [--frame-len 64]
//!     [--seconds 5] [--repeat 1] [--pcap FILE] [--write FILE]
//! ```
//!
//! Without `--pcap`, it generates the OVS-DPDK peer's benchmark capture (`gen_pcap.py`
//! flows) in memory; with it, it replays that file (for example the peer's
//! `f1000_s64.pcap`), so both switches' ceilings come from the same bytes. `--write FILE`
//! writes the generated capture (byte for byte what `gen_pcap.py` writes) and exits.
//! `--repeat N` measures N windows and prints their median.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use datapath::flows::flows_pcap;
use datapath::netdev::null::NullNetdev;
use datapath::netdev::pcap_replay::{PcapReplay, ReplayConfig};
use datapath::netdev::Netdev;
use datapath::pcap::Capture;
use datapath::{cycles, Batch, Pool};

struct Args {
    flows: u32,
    frame_len: usize,
    seconds: f64,
    pcap: Option<String>,
    write: Option<String>,
    repeat: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        flows: 1000,
        frame_len: 64,
        seconds: 5.0,
        pcap: None,
        write: None,
        repeat: 1,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--flows" => args.flows = value()?.parse().map_err(|e| format!("--flows: {e}"))?,
            "--frame-len" => {
                args.frame_len = value()?.parse().map_err(|e| format!("--frame-len: {e}"))?
            }
            "--seconds" => {
                args.seconds = value()?.parse().map_err(|e| format!("--seconds: {e}"))?
            }
            "--pcap" => args.pcap = Some(value()?),
            "--write" => args.write = Some(value()?),
            "--repeat" => {
                args.repeat = value()?.parse().map_err(|e| format!("--repeat: {e}"))?;
                args.repeat = args.repeat.max(1);
            }
            "-h" | "--help" => return Err(
                "usage: replay_null [--flows N] [--frame-len BYTES] [--seconds S] [--pcap FILE]"
                    .into(),
            ),
            other => return Err(format!("unknown argument {other}; try --help")),
        }
    }
    Ok(args)
}

/// Nanoseconds this thread has run on a CPU (`/proc/thread-self/schedstat`, Linux), to tell
/// the share of the core the measurement got on a shared machine.
fn thread_run_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// One measurement window.
struct Window {
    packets: u64,
    secs: f64,
    cpu_share: f64,
    mpps_busy: f64,
    cycles_per_packet: f64,
}

/// Runs replay -> null for `seconds` and measures it.
fn measure(
    rx: &PcapReplay,
    sink: &NullNetdev,
    pool: &Pool,
    batch: &mut Batch,
    seconds: f64,
) -> Window {
    let before = sink.stats().tx_packets;
    let run0 = thread_run_ns();
    let t0 = Instant::now();
    let c0 = cycles::now();
    let deadline = Duration::from_secs_f64(seconds);
    while t0.elapsed() < deadline {
        for _ in 0..1024 {
            rx.recv(0, pool, batch);
            sink.send(0, batch);
        }
    }
    let spent_cycles = cycles::now().wrapping_sub(c0);
    let secs = t0.elapsed().as_secs_f64();
    let run_secs = match (run0, thread_run_ns()) {
        (Some(a), Some(b)) => (b - a) as f64 / 1e9,
        _ => secs,
    };
    let packets = sink.stats().tx_packets - before;
    // On a shared machine the thread may not have had the whole core: report the rate per
    // second of CPU actually received beside the wall-clock rate.
    let cpu_share = (run_secs / secs).min(1.0);
    Window {
        packets,
        secs,
        cpu_share,
        mpps_busy: packets as f64 / run_secs / 1e6,
        cycles_per_packet: spent_cycles as f64 * cpu_share / packets.max(1) as f64,
    }
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(path) = &args.write {
        let bytes = flows_pcap(args.flows, args.frame_len);
        if let Err(e) = std::fs::write(path, bytes) {
            eprintln!("cannot write {path}: {e}");
            return ExitCode::FAILURE;
        }
        println!("wrote {path}: {} flows of {} B", args.flows, args.frame_len);
        return ExitCode::SUCCESS;
    }
    let (capture, source) = match &args.pcap {
        Some(path) => match Capture::read(path) {
            Ok(c) => (c, path.clone()),
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::FAILURE;
            }
        },
        None => {
            let bytes = flows_pcap(args.flows, args.frame_len);
            let source = format!("generated {} flows x {} B", args.flows, args.frame_len);
            (
                Capture::parse(&bytes).expect("a generated capture is valid"),
                source,
            )
        }
    };
    let n_frames = capture.len();
    let rx = match PcapReplay::new("p0", capture, ReplayConfig::default()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let sink = NullNetdev::new("p1", 1);
    let pool = Pool::default();
    let mut batch = Batch::new();
    let hz = cycles::hz();

    // Warm up (page faults, caches) for a tenth of the run, then measure.
    let warm = Instant::now();
    while warm.elapsed() < Duration::from_secs_f64(args.seconds / 10.0) {
        rx.recv(0, &pool, &mut batch);
        sink.send(0, &mut batch);
    }
    let mut windows = Vec::with_capacity(args.repeat);
    for _ in 0..args.repeat {
        let w = measure(&rx, &sink, &pool, &mut batch, args.seconds);
        println!(
            "replay->null  source={source} frames={n_frames}  packets={} in {:.2} s  \
             {:.2} Mpps wall  {:.2} Mpps per busy core  {:.1} cycles/pkt on core  \
             (cpu share {:.0} %, TSC {:.2} GHz)",
            w.packets,
            w.secs,
            w.packets as f64 / w.secs / 1e6,
            w.mpps_busy,
            w.cycles_per_packet,
            w.cpu_share * 100.0,
            hz as f64 / 1e9,
        );
        windows.push(w);
    }
    let drops = rx.stats().drops.total() + sink.stats().drops.total();
    if windows.len() > 1 {
        let median = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        println!(
            "replay->null  median of {}: {:.2} Mpps per busy core  {:.1} cycles/pkt on core  \
             drops={drops}",
            windows.len(),
            median(windows.iter().map(|w| w.mpps_busy).collect()),
            median(windows.iter().map(|w| w.cycles_per_packet).collect()),
        );
    } else {
        println!("replay->null  drops={drops}");
    }
    ExitCode::SUCCESS
}
