//! The benchmark matrix: points (frame length x flows x rule set), the options of a run and the
//! result every system reports for a point.
//!
//! The matrix is the one of `shared/peers/ovs-dpdk`: frames of 64 B and 1518 B on the wire
//! (60 B and 1514 B in the pcap), 1K, 8K, 64K and 256K flows (flow `i` as in
//! `datapath::flows`), and the rule sets `single`, `single-udp` and `exact` ([`Ruleset`]). The
//! rule sets `mixed` and `masks8` (ours, outside the default matrix) make megaflows of two and
//! of eight or more masks.
//!
//! [`Hits`] are *counts* of packets over the measurement window (not fractions): the packets
//! served by each cache level. [`Hits::percent`] turns them into shares of [`Hits::total`].

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

/// A rule set, spelled as in `gen_rules.py --mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Ruleset {
    /// `priority=0,actions=output:p1`: one rule without a match (OVS serves its megaflow from
    /// the PMD's simple-match table).
    Single,
    /// `priority=1,udp,actions=output:p1`: one rule, one megaflow that also matches the IP
    /// protocol, so every packet goes through the caches.
    SingleUdp,
    /// One exact 5-tuple rule per flow (priority 100) plus `priority=0,actions=drop`.
    Exact,
    /// Not in `gen_rules.py` and not in the default matrix: two kinds of rules, so the
    /// translations produce megaflows of more than one mask (the case the exact-match cache is
    /// for). Even flows have their exact 5-tuple rule (priority 100); odd flows are forwarded by
    /// `priority=10,udp,nw_src=198.18.0.0/16`, with `priority=0,actions=drop` below.
    Mixed,
    /// Not in `gen_rules.py` and not in the default matrix: one rule per flow, an exact match on
    /// one of eight combinations of the 5-tuple's fields with its own priority
    /// (`datapath::flows::masks8_rule`), so megaflows come in at least eight masks.
    Masks8,
}

impl Ruleset {
    /// Every rule set, in matrix order.
    pub const ALL: [Ruleset; 3] = [Ruleset::Single, Ruleset::SingleUdp, Ruleset::Exact];

    /// The name used on the command line, in JSON and by `gen_rules.py`.
    pub fn as_str(self) -> &'static str {
        match self {
            Ruleset::Single => "single",
            Ruleset::SingleUdp => "single-udp",
            Ruleset::Exact => "exact",
            Ruleset::Mixed => "mixed",
            Ruleset::Masks8 => "masks8",
        }
    }
}

impl fmt::Display for Ruleset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A point filter on the command line that does not parse.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FilterError {
    /// Not one of `single`, `single-udp`, `exact`.
    #[error("unknown rule set '{0}' (expected single, single-udp or exact)")]
    Ruleset(String),
    /// Not a flow count such as `1000` or `1K`.
    #[error("bad flow count '{0}' (expected e.g. 1000, 8K, 64k, 256K; K = 1000)")]
    Flows(String),
    /// Not a frame length in bytes.
    #[error("bad frame length '{0}' (expected a wire length in bytes, 64..=9018)")]
    FrameLen(String),
}

impl FromStr for Ruleset {
    type Err = FilterError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "single" => Ok(Ruleset::Single),
            "single-udp" | "single_udp" => Ok(Ruleset::SingleUdp),
            "exact" => Ok(Ruleset::Exact),
            "mixed" => Ok(Ruleset::Mixed),
            "masks8" => Ok(Ruleset::Masks8),
            other => Err(FilterError::Ruleset(other.to_owned())),
        }
    }
}

/// Parses a flow count: `1000`, `1K` or `1k` (K = 1000, as in the peers' matrix), `1M`.
pub fn parse_flows(s: &str) -> Result<u32, FilterError> {
    let t = s.trim();
    let err = || FilterError::Flows(s.to_owned());
    let (digits, scale) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1_000),
        Some((i, 'm' | 'M')) => (&t[..i], 1_000_000),
        _ => (t, 1),
    };
    let n: u32 = digits.parse().map_err(|_| err())?;
    let n = n.checked_mul(scale).ok_or_else(err)?;
    if n == 0 {
        return Err(err());
    }
    Ok(n)
}

/// Parses a frame length (bytes on the wire, FCS included).
pub fn parse_frame_len(s: &str) -> Result<usize, FilterError> {
    let n: usize = s
        .trim()
        .parse()
        .map_err(|_| FilterError::FrameLen(s.to_owned()))?;
    if !(64..=9018).contains(&n) {
        return Err(FilterError::FrameLen(s.to_owned()));
    }
    Ok(n)
}

/// One point of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Point {
    /// Frame length on the wire, FCS included (64 or 1518 in the matrix).
    pub frame_len: usize,
    /// Number of flows in the pcap (each once, in order).
    pub flows: u32,
    /// The rule set.
    pub ruleset: Ruleset,
}

impl fmt::Display for Point {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} B, {} flows, {}",
            self.frame_len, self.flows, self.ruleset
        )
    }
}

/// The points of the cross product, frame length outermost, then flows, then rule set.
pub fn matrix(frame_lens: &[usize], flows: &[u32], rulesets: &[Ruleset]) -> Vec<Point> {
    let mut points = Vec::new();
    for &frame_len in frame_lens {
        for &n in flows {
            for &ruleset in rulesets {
                points.push(Point {
                    frame_len,
                    flows: n,
                    ruleset,
                });
            }
        }
    }
    points
}

/// How one system measures a point. `run_point` measures one repetition; `main` repeats it
/// (`--reps`) and reports the median.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Length of the measurement window, seconds.
    pub seconds: f64,
    /// Warm-up lasts at least this long (seconds) ...
    pub warmup_min_secs: f64,
    /// ... and at most this long, even if the rate is not stable yet.
    pub warmup_max_secs: f64,
    /// The core the PMD (forwarding) thread is pinned to; `None` leaves it to the system.
    pub pmd_core: Option<usize>,
    /// Where the pcaps live (see `crate::pcap`).
    pub pcap_dir: std::path::PathBuf,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            seconds: 10.0,
            warmup_min_secs: 6.0,
            warmup_max_secs: 150.0,
            pmd_core: Some(1),
            pcap_dir: std::path::PathBuf::from(crate::pcap::DEFAULT_PCAP_DIR),
        }
    }
}

/// Packets served by each cache level over the measurement window (counts).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Hits {
    /// OVS's simple-match table (one megaflow matching only in_port/eth_type/frag).
    pub simple: u64,
    /// The exact-match cache.
    pub emc: u64,
    /// The signature-match cache (OVS, off by default).
    pub smc: u64,
    /// The megaflow classifier (OVS: dpcls).
    pub megaflow: u64,
    /// Misses sent to the slow path (successful and failed upcalls).
    pub upcall: u64,
}

impl Hits {
    /// All packets counted.
    pub fn total(&self) -> u64 {
        self.simple + self.emc + self.smc + self.megaflow + self.upcall
    }

    /// The shares in percent, in the order simple, emc, smc, megaflow, upcall.
    #[allow(clippy::cast_precision_loss)]
    pub fn percent(&self) -> [f64; 5] {
        let t = self.total().max(1) as f64;
        [self.simple, self.emc, self.smc, self.megaflow, self.upcall].map(|v| 100.0 * v as f64 / t)
    }
}

/// What a system measured at one point (the median repetition).
#[derive(Debug, Clone, Serialize)]
pub struct PointResult {
    /// `"ferrovs"` or `"ovs-dpdk"`.
    pub system: String,
    /// Frame length on the wire.
    pub frame_len: usize,
    /// Number of flows.
    pub flows: u32,
    /// The rule set.
    pub ruleset: Ruleset,
    /// Forwarded frames per second out of the sink port, millions.
    pub mpps: f64,
    /// Lowest and highest Mpps over the repetitions.
    pub mpps_min: f64,
    /// See `mpps_min`.
    pub mpps_max: f64,
    /// Repetitions run.
    pub reps: u32,
    /// TSC cycles the forwarding thread spent per packet (including the pcap replay).
    pub cycles_per_pkt: f64,
    /// Packets per cache level over the window (counts).
    pub hits: Hits,
    /// Datapath flows (megaflows) installed at the end of the window.
    pub megaflows: u64,
    /// Resident set of the switch process at the end of the window (hugepages not included).
    pub rss_bytes: u64,
    /// Hugepage memory mapped by the switch process, if any.
    pub hugetlb_bytes: Option<u64>,
    /// The replay -> null rate of the same system and pcap without a switch, Mpps.
    pub ceiling_mpps: Option<f64>,
    /// How `ceiling_mpps` was measured.
    pub ceiling_source: Option<String>,
    /// `mpps / ceiling_mpps`.
    pub ratio_to_ceiling: Option<f64>,
    /// For ferrovs: `mpps` of ferrovs / `mpps` of OVS-DPDK at the same point.
    pub ratio_to_ovs: Option<f64>,
    /// Share of one core the forwarding thread got during the window (1.0 = all of it).
    pub pmd_cpu_share: Option<f64>,
    /// Length of the measurement window, seconds.
    pub seconds: f64,
    /// Length of the warm-up, seconds.
    pub warmup_secs: f64,
    /// Whether the warm-up hit its cap before the rate was stable.
    pub warmup_timeout: bool,
    /// OpenFlow rules in the table.
    pub of_rules: Option<u64>,
    /// Time to load the rules, seconds.
    pub add_flows_secs: Option<f64>,
    /// Anything else the system wants to report.
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl PointResult {
    /// An empty result of `system` at `point`; the runner fills in the rest.
    pub fn new(system: &str, point: &Point) -> Self {
        PointResult {
            system: system.to_owned(),
            frame_len: point.frame_len,
            flows: point.flows,
            ruleset: point.ruleset,
            mpps: 0.0,
            mpps_min: 0.0,
            mpps_max: 0.0,
            reps: 1,
            cycles_per_pkt: 0.0,
            hits: Hits::default(),
            megaflows: 0,
            rss_bytes: 0,
            hugetlb_bytes: None,
            ceiling_mpps: None,
            ceiling_source: None,
            ratio_to_ceiling: None,
            ratio_to_ovs: None,
            pmd_cpu_share: None,
            seconds: 0.0,
            warmup_secs: 0.0,
            warmup_timeout: false,
            of_rules: None,
            add_flows_secs: None,
            extra: serde_json::Map::new(),
        }
    }
}

/// The repetition with the median Mpps (the lower middle one for an even count), with
/// `mpps_min`, `mpps_max` and `reps` set over all of them. `None` if `runs` is empty.
pub fn median(mut runs: Vec<PointResult>) -> Option<PointResult> {
    if runs.is_empty() {
        return None;
    }
    runs.sort_by(|a, b| a.mpps.total_cmp(&b.mpps));
    let min = runs[0].mpps;
    let max = runs[runs.len() - 1].mpps;
    let n = runs.len();
    let mut m = runs.swap_remove((n - 1) / 2);
    m.mpps_min = min;
    m.mpps_max = max;
    m.reps = u32::try_from(n).unwrap_or(u32::MAX);
    Some(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_flows_accepts_k_suffix_and_plain_numbers() {
        assert_eq!(parse_flows("1K"), Ok(1_000));
        assert_eq!(parse_flows("8k"), Ok(8_000));
        assert_eq!(parse_flows("256K"), Ok(256_000));
        assert_eq!(parse_flows("64000"), Ok(64_000));
        assert_eq!(parse_flows(" 1M "), Ok(1_000_000));
    }

    #[test]
    fn parse_flows_rejects_garbage_zero_and_overflow() {
        for bad in ["", "K", "1.5K", "x", "0", "-1", "5000000M"] {
            assert!(parse_flows(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn parse_frame_len_accepts_wire_lengths() {
        assert_eq!(parse_frame_len("64"), Ok(64));
        assert_eq!(parse_frame_len("1518"), Ok(1518));
        for bad in ["", "12", "jumbo", "10000"] {
            assert!(parse_frame_len(bad).is_err(), "{bad}");
        }
        assert_eq!(
            "bogus".parse::<Ruleset>(),
            Err(FilterError::Ruleset("bogus".into()))
        );
    }

    #[test]
    fn ruleset_round_trips_through_its_name() {
        for r in Ruleset::ALL {
            assert_eq!(r.to_string().parse::<Ruleset>(), Ok(r));
            assert_eq!(
                serde_json::to_value(r).unwrap(),
                serde_json::Value::from(r.as_str())
            );
        }
    }

    #[test]
    fn matrix_is_the_cross_product_in_order() {
        let m = matrix(&[64], &[1_000, 8_000], &Ruleset::ALL);
        assert_eq!(m.len(), 6);
        assert_eq!(
            m[4],
            Point {
                frame_len: 64,
                flows: 8_000,
                ruleset: Ruleset::SingleUdp
            }
        );
    }

    #[test]
    fn median_reports_the_middle_run_and_the_spread() {
        let p = Point {
            frame_len: 64,
            flows: 1_000,
            ruleset: Ruleset::Exact,
        };
        let runs = [3.0, 1.0, 2.0]
            .map(|m| {
                let mut r = PointResult::new("x", &p);
                r.mpps = m;
                r
            })
            .to_vec();
        let m = median(runs).unwrap();
        assert_eq!((m.mpps, m.mpps_min, m.mpps_max, m.reps), (2.0, 1.0, 3.0, 3));
        assert!(median(Vec::new()).is_none());
    }

    #[test]
    fn hits_percent_sums_to_100() {
        let h = Hits {
            emc: 3,
            megaflow: 1,
            ..Hits::default()
        };
        assert_eq!(h.total(), 4);
        assert_eq!(h.percent(), [0.0, 75.0, 0.0, 25.0, 0.0]);
    }
}
