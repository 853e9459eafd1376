//! The pcaps both systems replay: `f{N}_s{S}.pcap` in a directory of ours, written with
//! `datapath::flows::flows_pcap` (the bytes of `gen_pcap.py --flows N --frame-size S`) and
//! reused when a file of the right size is already there.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::point::Point;

/// Where the pcaps go unless `--pcap-dir` says otherwise.
pub const DEFAULT_PCAP_DIR: &str = "/tmp/ferrovs-bench/pcap";

/// pcap global header, per-record header, FCS (not captured).
const GLOBAL_HEADER_LEN: u64 = 24;
const RECORD_HEADER_LEN: u64 = 16;
const FCS_LEN: u64 = 4;

/// The file name of the pcap of `point` in `dir`.
pub fn pcap_path(dir: &Path, point: &Point) -> PathBuf {
    dir.join(format!("f{}_s{}.pcap", point.flows, point.frame_len))
}

/// The size of the pcap of `flows` frames of `frame_len` bytes on the wire.
pub fn pcap_len(flows: u32, frame_len: usize) -> u64 {
    let frame = u64::try_from(frame_len)
        .unwrap_or(u64::MAX)
        .saturating_sub(FCS_LEN);
    GLOBAL_HEADER_LEN + u64::from(flows) * (RECORD_HEADER_LEN + frame)
}

/// Writes the pcap of `point` into `dir` unless a file of the right size is there; returns
/// its path.
pub fn ensure_pcap(dir: &Path, point: &Point) -> anyhow::Result<PathBuf> {
    let path = pcap_path(dir, point);
    let want = pcap_len(point.flows, point.frame_len);
    if fs::metadata(&path).map(|m| m.len()).ok() == Some(want) {
        return Ok(path);
    }
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let bytes = datapath::flows::flows_pcap(point.flows, point.frame_len);
    anyhow::ensure!(
        u64::try_from(bytes.len()).ok() == Some(want),
        "flows_pcap({}, {}) wrote {} bytes, expected {want}",
        point.flows,
        point.frame_len,
        bytes.len()
    );
    let tmp = path.with_extension(format!("pcap.tmp{}", std::process::id()));
    fs::write(&tmp, &bytes).with_context(|| format!("writing {}", tmp.display()))?;
    fs::rename(&tmp, &path).with_context(|| format!("renaming to {}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::point::Ruleset;

    #[test]
    fn pcap_len_counts_headers_without_fcs() {
        // gen_pcap.py --flows 1000 --frame-size 64: 24 + 1000 * (16 + 60).
        assert_eq!(pcap_len(1_000, 64), 76_024);
        assert_eq!(pcap_len(2, 1518), 24 + 2 * (16 + 1514));
    }

    #[test]
    fn ensure_pcap_writes_once_and_reuses() {
        let dir = std::env::temp_dir().join(format!("ferrovs-bench-test-{}", std::process::id()));
        let p = Point {
            frame_len: 64,
            flows: 10,
            ruleset: Ruleset::Single,
        };
        let path = ensure_pcap(&dir, &p).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().len(), pcap_len(10, 64));
        assert_eq!(path.file_name().unwrap(), "f10_s64.pcap");
        assert_eq!(ensure_pcap(&dir, &p).unwrap(), path);
        fs::remove_dir_all(&dir).unwrap();
    }
}
