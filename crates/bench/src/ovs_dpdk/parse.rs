//! Parsers of the output of OVS (`pmd-stats-show`, `dpctl/show -s`, `dpctl/dump-flows`,
//! `dump-aggregate`, `upcall/show`), dpdk-testpmd's periodic statistics and `/proc`, unit-tested
//! on outputs captured from this runner (`testdata/`).

use std::collections::BTreeMap;

use crate::point::Hits;

/// utime + stime from a `/proc/<pid>/task/<tid>/stat` line.
pub fn parse_stat_ticks(stat: &str) -> Option<u64> {
    let (_, rest) = stat.rsplit_once(')')?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields after the command: state is field 3, utime 14, stime 15.
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// A `kB` value of `/proc/<pid>/status` (`VmRSS`, `HugetlbPages`).
pub fn status_kb(status: &str, key: &str) -> Option<u64> {
    status.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k == key).then(|| v.split_whitespace().next()?.parse().ok())?
    })
}

/// The `pmd thread` section of `dpif-netdev/pmd-stats-show`: name -> first number of each
/// `name: value` line (summed over PMD threads if there are several).
pub fn parse_pmd_stats(out: &str) -> BTreeMap<String, f64> {
    let mut res = BTreeMap::new();
    let mut in_pmd = false;
    for line in out.lines() {
        if line.starts_with("pmd thread") {
            in_pmd = true;
            continue;
        }
        if !line.starts_with(' ') && !line.starts_with('\t') {
            in_pmd = false;
            continue;
        }
        if !in_pmd {
            continue;
        }
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let Some(num) = v
            .split_whitespace()
            .next()
            .and_then(|n| n.parse::<f64>().ok())
        else {
            continue;
        };
        *res.entry(k.trim().to_owned()).or_insert(0.0) += num;
    }
    res
}

/// Packets per cache level from [`parse_pmd_stats`].
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
pub fn hits_from_pmd_stats(pmd: &BTreeMap<String, f64>) -> Hits {
    let g = |k: &str| pmd.get(k).copied().unwrap_or(0.0).max(0.0).round() as u64;
    Hits {
        simple: g("simple match hits"),
        emc: g("emc hits"),
        smc: g("smc hits"),
        megaflow: g("megaflow hits"),
        upcall: g("miss with success upcall") + g("miss with failed upcall"),
    }
}

/// Packet counters of one port in `dpctl/show -s`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortCounters {
    /// `RX packets:`.
    pub rx_packets: u64,
    /// `TX packets:`.
    pub tx_packets: u64,
}

/// `dpctl/show -s`: counters per port name, and the datapath's `flows:` count.
pub fn parse_port_stats(out: &str) -> (BTreeMap<String, PortCounters>, Option<u64>) {
    let mut ports = BTreeMap::new();
    let mut cur: Option<String> = None;
    let mut flows = None;
    for line in out.lines() {
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix("flows:") {
            flows = rest.trim().parse().ok();
        } else if let Some(rest) = t.strip_prefix("port ") {
            // "port 2: p1 (dpdk: configured_rx_queues=1, ...)"
            cur = rest
                .split_once(':')
                .and_then(|(_, r)| r.split_whitespace().next())
                .map(str::to_owned);
            if let Some(c) = &cur {
                ports.insert(c.clone(), PortCounters::default());
            }
        } else if let Some(c) = cur.as_ref().and_then(|c| ports.get_mut(c)) {
            let num = |rest: &str| {
                rest.split_whitespace()
                    .next()
                    .and_then(|n| n.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            if let Some(rest) = t.strip_prefix("RX packets:") {
                c.rx_packets = num(rest);
            } else if let Some(rest) = t.strip_prefix("TX packets:") {
                c.tx_packets = num(rest);
            }
        }
    }
    (ports, flows)
}

/// `flow_count=N` of `ovs-ofctl dump-aggregate`.
pub fn parse_flow_count(out: &str) -> Option<u64> {
    out.split_whitespace()
        .find_map(|w| w.strip_prefix("flow_count="))
        .and_then(|n| n.trim_end_matches(',').parse().ok())
}

/// Megaflows in `dpctl/dump-flows` output: lines with `actions:`.
pub fn count_megaflows(out: &str) -> u64 {
    let n = out.lines().filter(|l| l.contains("actions:")).count();
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// The current datapath flow limit of `upcall/show` (`flows : (current 1000) (avg 999) (max
/// 1000) (limit 54000)`).
pub fn parse_upcall_flow_limit(out: &str) -> Option<u64> {
    let i = out.find("(limit ")?;
    out[i + 7..]
        .split(')')
        .next()
        .and_then(|n| n.trim().parse().ok())
}

/// One port's block of testpmd's periodic statistics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TestpmdSample {
    /// The port.
    pub port: u16,
    /// `TX-packets:` (cumulative).
    pub tx_packets: u64,
    /// `Tx-pps:` (since the previous block, computed by testpmd from the TSC).
    pub tx_pps: u64,
}

/// Line-by-line reader of testpmd's periodic `NIC statistics for port N` blocks.
#[derive(Debug, Default)]
pub struct TestpmdStats {
    cur: Option<TestpmdSample>,
}

impl TestpmdStats {
    /// Feeds one line; returns a port's sample at the end of its block.
    pub fn feed(&mut self, line: &str) -> Option<TestpmdSample> {
        let t = line.trim();
        if let Some(i) = t.find("NIC statistics for port") {
            self.cur = t[i + 23..]
                .split_whitespace()
                .next()
                .and_then(|p| p.parse().ok())
                .map(|port| TestpmdSample {
                    port,
                    ..TestpmdSample::default()
                });
            return None;
        }
        let cur = self.cur.as_mut()?;
        let num = |rest: &str| rest.split_whitespace().next().and_then(|n| n.parse().ok());
        if let Some(rest) = t.strip_prefix("TX-packets:") {
            cur.tx_packets = num(rest).unwrap_or(0);
        } else if let Some(rest) = t.strip_prefix("Tx-pps:") {
            cur.tx_pps = num(rest).unwrap_or(0);
        } else if !t.is_empty() && t.bytes().all(|b| b == b'#') {
            return self.cur.take();
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::path::Path;

    use super::*;

    fn sample(name: &str) -> String {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("testdata")
            .join(name);
        fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    #[test]
    fn pmd_stats_show_sample_parses() {
        let pmd = parse_pmd_stats(&sample("pmd-stats-show.txt"));
        assert!(pmd["packets received"] > 0.0);
        assert!(pmd["avg cycles per packet"] > 0.0);
        let hits = hits_from_pmd_stats(&pmd);
        // Every packet received is served by one level (the batch in flight aside).
        let rx = pmd["packets received"].to_string();
        let rx: u64 = rx.parse().unwrap();
        assert!(hits.total().abs_diff(rx) <= 64, "{hits:?} vs {rx}");
        assert_eq!(hits.emc, 52_073_920);
        // The main thread's section is not added to the PMD's.
        assert!(!pmd.contains_key("main thread"));
    }

    #[test]
    fn pmd_stats_show_synthetic_sections() {
        let out = "pmd thread numa_id 0 core_id 1:\n  packets received: 100\n  emc hits: 60\n  \
                   megaflow hits: 30\n  miss with success upcall: 8\n  miss with failed upcall: 2\n  \
                   idle cycles: 5 (0.10%)\n  avg cycles per packet: 153.37 (15337/100)\n\
                   main thread:\n  packets received: 7\n";
        let pmd = parse_pmd_stats(out);
        assert_eq!(pmd["packets received"], 100.0);
        assert_eq!(pmd["idle cycles"], 5.0);
        assert_eq!(pmd["avg cycles per packet"], 153.37);
        let h = hits_from_pmd_stats(&pmd);
        assert_eq!(
            h,
            Hits {
                simple: 0,
                emc: 60,
                smc: 0,
                megaflow: 30,
                upcall: 10
            }
        );
    }

    #[test]
    fn dpctl_show_sample_parses() {
        let (ports, flows) = parse_port_stats(&sample("dpctl-show-s.txt"));
        assert!(flows.is_some());
        assert!(ports["p1"].tx_packets > 0);
        assert!(ports["p0"].rx_packets > 0);
        assert_eq!(ports["p1"].rx_packets, 0);
    }

    #[test]
    fn dump_aggregate_and_dump_flows_parse() {
        assert_eq!(
            parse_flow_count("OFPST_AGGREGATE reply (OF1.3) (xid=0x2): packet_count=0 byte_count=0 flow_count=1001\n"),
            Some(1001)
        );
        assert_eq!(parse_flow_count("garbage"), None);
        // Seven megaflows under a "flow-dump from pmd" line.
        assert_eq!(count_megaflows(&sample("dump-flows.txt")), 7);
    }

    #[test]
    fn upcall_show_sample_parses() {
        assert_eq!(
            parse_upcall_flow_limit(&sample("upcall-show.txt")),
            Some(98_000)
        );
        assert_eq!(
            parse_upcall_flow_limit(
                "  flows         : (current 1000) (avg 999) (max 1000) (limit 54000)\n"
            ),
            Some(54_000)
        );
    }

    #[test]
    fn testpmd_sample_yields_port_1_tx() {
        let mut p = TestpmdStats::default();
        let got: Vec<TestpmdSample> = sample("testpmd-stats.txt")
            .lines()
            .filter_map(|l| p.feed(l))
            .collect();
        let port1: Vec<&TestpmdSample> = got.iter().filter(|s| s.port == 1).collect();
        assert!(port1.len() >= 3, "{got:?}");
        assert!(port1.windows(2).all(|w| w[0].tx_packets <= w[1].tx_packets));
        assert!(port1.iter().any(|s| s.tx_pps > 1_000_000));
        // Port 0 only receives.
        assert!(got
            .iter()
            .filter(|s| s.port == 0)
            .all(|s| s.tx_packets == 0));
    }

    #[test]
    fn proc_parsers() {
        let stat = "1234 (pmd-c01/id:9) R 1 2 3 4 5 6 7 8 9 10 1500 250 0 0 20 0 1 0 100 0 0";
        assert_eq!(parse_stat_ticks(stat), Some(1750));
        assert_eq!(parse_stat_ticks("garbage"), None);
        let status = "Name:\tovs-vswitchd\nVmRSS:\t   51234 kB\nHugetlbPages:\t 1048576 kB\n";
        assert_eq!(status_kb(status, "VmRSS"), Some(51_234));
        assert_eq!(status_kb(status, "HugetlbPages"), Some(1_048_576));
        assert_eq!(status_kb(status, "VmSwap"), None);
    }
}
