//! The ferrovs side of `ferrovs-bench datapath`: pcap replay -> bridge -> null on one PMD core,
//! the same points as OVS-DPDK.
//!
//! Not wired in yet: the datapath engineer replaces this stub with the real runner (it must
//! return a [`PointResult`] with `system = "ferrovs"`, its own replay -> null ceiling in
//! `ceiling_mpps`, and the hit counts per cache level).

use anyhow::anyhow;

use crate::point::{Point, PointResult, RunOptions};

/// The system name in results.
pub const SYSTEM: &str = "ferrovs";

/// Measures `point` on ferrovs.
pub fn run_point(point: &Point, opts: &RunOptions) -> anyhow::Result<PointResult> {
    let _ = (point, opts);
    Err(anyhow!(
        "the ferrovs datapath is not wired into ferrovs-bench yet"
    ))
}
