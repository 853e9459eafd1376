//! Per-queue counters of a netdev.
//!
//! Each rx and tx queue keeps one [`QueueStats`], written only by the thread that holds the
//! queue (under the queue's lock) and copied out as a snapshot by readers. Counter names
//! follow style.md: `<dir>_<what>` and `drop_<reason>`; [`QueueStats::counters`] lists them
//! by name for the CLI and metrics.

use crate::drop::DropReason;

/// Drop counters, one per [`DropReason`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DropCounts {
    counts: [u64; DropReason::COUNT],
}

impl DropCounts {
    /// Packets dropped for `reason`.
    pub fn get(&self, reason: DropReason) -> u64 {
        self.counts[reason.index()]
    }

    /// Counts `n` drops for `reason`.
    #[inline]
    pub fn add(&mut self, reason: DropReason, n: u64) {
        self.counts[reason.index()] += n;
    }

    /// Packets dropped for any reason.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// `(reason, count)` for every reason, zeros included.
    pub fn iter(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        DropReason::ALL.iter().map(|r| (*r, self.get(*r)))
    }
}

/// The counters of one queue (or, summed, of a port).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueueStats {
    /// Packets received.
    pub rx_packets: u64,
    /// Bytes received (frame lengths, without FCS).
    pub rx_bytes: u64,
    /// Packets transmitted.
    pub tx_packets: u64,
    /// Bytes transmitted.
    pub tx_bytes: u64,
    /// Packets dropped, by reason.
    pub drops: DropCounts,
}

impl QueueStats {
    /// Counts one received packet of `len` bytes.
    #[inline]
    pub fn count_rx(&mut self, len: usize) {
        self.rx_packets += 1;
        self.rx_bytes += len as u64;
    }

    /// Counts one transmitted packet of `len` bytes.
    #[inline]
    pub fn count_tx(&mut self, len: usize) {
        self.tx_packets += 1;
        self.tx_bytes += len as u64;
    }

    /// Counts `n` drops for `reason`.
    #[inline]
    pub fn count_drop(&mut self, reason: DropReason, n: u64) {
        self.drops.add(reason, n);
    }

    /// Packets dropped for `reason`.
    pub fn drop_count(&self, reason: DropReason) -> u64 {
        self.drops.get(reason)
    }

    /// Adds `other`'s counters to these.
    pub fn merge(&mut self, other: &QueueStats) {
        self.rx_packets += other.rx_packets;
        self.rx_bytes += other.rx_bytes;
        self.tx_packets += other.tx_packets;
        self.tx_bytes += other.tx_bytes;
        for r in DropReason::ALL {
            self.drops.add(r, other.drops.get(r));
        }
    }

    /// Every counter by name (`rx_packets`, …, `drop_no_buffer`, …), zeros included.
    pub fn counters(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        [
            ("rx_packets", self.rx_packets),
            ("rx_bytes", self.rx_bytes),
            ("tx_packets", self.tx_packets),
            ("tx_bytes", self.tx_bytes),
        ]
        .into_iter()
        .chain(self.drops.iter().map(|(r, n)| (r.counter_name(), n)))
    }

    /// The counter called `name`, if there is one.
    pub fn counter(&self, name: &str) -> Option<u64> {
        self.counters().find(|(n, _)| *n == name).map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_lists_every_drop_reason() {
        let mut s = QueueStats::default();
        s.count_drop(DropReason::TxQueueFull, 3);
        assert_eq!(s.counter("drop_tx_queue_full"), Some(3));
        assert_eq!(s.counters().count(), 4 + DropReason::COUNT);
        assert_eq!(s.counter("no_such_counter"), None);
    }

    #[test]
    fn merge_adds_every_counter() {
        let mut a = QueueStats::default();
        a.count_rx(60);
        a.count_drop(DropReason::NoBuffer, 1);
        let mut b = a;
        b.count_tx(100);
        a.merge(&b);
        assert_eq!(
            (a.rx_packets, a.rx_bytes, a.tx_packets, a.tx_bytes),
            (2, 120, 1, 100)
        );
        assert_eq!(a.drops.total(), 2);
    }
}
