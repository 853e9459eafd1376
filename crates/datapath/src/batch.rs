//! [`Batch`]: up to [`BATCH_SIZE`] packets that travel through the datapath together.
//!
//! # Contract
//!
//! - A stage is a function over `&mut Batch` (style.md § 5). It reads and writes the packets'
//!   metadata and decides what happens to each packet.
//! - A batch never holds more than [`BATCH_SIZE`] packets: [`Batch::push`] on a full batch hands
//!   the packet back instead of growing. The packet storage is allocated once, when the batch is
//!   created; batches are reused, so steady state allocates nothing.
//! - Whoever is given a `&mut Batch` to *send* drains it, whatever the outcome
//!   ([`crate::netdev::Netdev::send`]): afterwards the batch is empty and every packet was either
//!   transmitted or counted as a drop.
//! - Dropping a batch, or [`Batch::clear`], returns its buffers to their pool.
//!
//! # Example
//!
//! ```
//! use datapath::batch::{Batch, BATCH_SIZE};
//! use datapath::pool::Pool;
//!
//! let pool = Pool::default();
//! let mut batch = Batch::new();
//! while !batch.is_full() {
//!     let pkt = pool.alloc_copy(&[0; 60]).expect("free buffer");
//!     batch.push(pkt).expect("not full");
//! }
//! assert_eq!(batch.len(), BATCH_SIZE);
//! assert_eq!(batch.n_bytes(), 60 * BATCH_SIZE);
//! for pkt in batch.drain() {
//!     drop(pkt); // a sink: the buffer goes back to the pool
//! }
//! assert!(batch.is_empty());
//! ```

use crate::buffer::Packet;

/// Most packets in one batch (OVS `NETDEV_MAX_BURST`, VPP `VLIB_FRAME_SIZE` is 256).
pub const BATCH_SIZE: usize = 32;

/// Up to [`BATCH_SIZE`] packets.
#[derive(Debug)]
pub struct Batch {
    /// Never longer than `BATCH_SIZE`; its capacity is reserved once, in `new`.
    pkts: Vec<Packet>,
}

impl Batch {
    /// An empty batch (the one allocation a batch ever makes).
    pub fn new() -> Batch {
        Batch {
            pkts: Vec::with_capacity(BATCH_SIZE),
        }
    }

    /// Number of packets.
    #[inline]
    pub fn len(&self) -> usize {
        self.pkts.len()
    }

    /// Whether the batch holds no packet.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.pkts.is_empty()
    }

    /// Whether the batch holds [`BATCH_SIZE`] packets.
    #[inline]
    pub fn is_full(&self) -> bool {
        self.pkts.len() >= BATCH_SIZE
    }

    /// How many more packets fit.
    #[inline]
    pub fn room(&self) -> usize {
        BATCH_SIZE - self.pkts.len()
    }

    /// Appends `pkt`, or hands it back if the batch is full.
    #[inline]
    pub fn push(&mut self, pkt: Packet) -> Result<(), Packet> {
        if self.is_full() {
            return Err(pkt);
        }
        self.pkts.push(pkt);
        Ok(())
    }

    /// Appends `pkt` without the capacity check, for receive loops that checked
    /// [`Batch::room`] first. Never UB: on a full batch (a caller bug) the batch grows past
    /// [`BATCH_SIZE`] and allocates, which a debug build reports.
    #[inline]
    pub(crate) fn push_unchecked(&mut self, pkt: Packet) {
        debug_assert!(!self.is_full(), "push_unchecked on a full batch");
        self.pkts.push(pkt);
    }

    /// The packets, in order.
    #[inline]
    pub fn packets(&self) -> &[Packet] {
        &self.pkts
    }

    /// The packets, in order, writable.
    #[inline]
    pub fn packets_mut(&mut self) -> &mut [Packet] {
        &mut self.pkts
    }

    /// Iterates over the packets.
    pub fn iter(&self) -> std::slice::Iter<'_, Packet> {
        self.pkts.iter()
    }

    /// Iterates over the packets, writable.
    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, Packet> {
        self.pkts.iter_mut()
    }

    /// Removes every packet, in order, leaving the batch empty (and its storage in place).
    /// Packets the iterator does not yield are dropped when it is.
    #[inline]
    pub fn drain(&mut self) -> std::vec::Drain<'_, Packet> {
        self.pkts.drain(..)
    }

    /// Keeps only the packets for which `keep` returns true, in order; the others are
    /// dropped (their buffers go back to the pool). The caller counts them.
    pub fn retain(&mut self, keep: impl FnMut(&mut Packet) -> bool) {
        self.pkts.retain_mut(keep);
    }

    /// Drops every packet.
    pub fn clear(&mut self) {
        self.pkts.clear();
    }

    /// Sum of the frame lengths.
    pub fn n_bytes(&self) -> usize {
        self.pkts.iter().map(Packet::len).sum()
    }
}

impl Default for Batch {
    fn default() -> Self {
        Batch::new()
    }
}

impl<'a> IntoIterator for &'a Batch {
    type Item = &'a Packet;
    type IntoIter = std::slice::Iter<'a, Packet>;

    fn into_iter(self) -> Self::IntoIter {
        self.pkts.iter()
    }
}

impl<'a> IntoIterator for &'a mut Batch {
    type Item = &'a mut Packet;
    type IntoIter = std::slice::IterMut<'a, Packet>;

    fn into_iter(self) -> Self::IntoIter {
        self.pkts.iter_mut()
    }
}

#[cfg(test)]
#[allow(clippy::cast_possible_truncation)] // Fixtures cast small indices to bytes.
mod tests {
    use super::*;
    use crate::buffer::BufClass;
    use crate::pool::{Pool, PoolConfig};

    fn fill(pool: &Pool, batch: &mut Batch, n: usize) -> usize {
        let mut refused = 0;
        for i in 0..n {
            let pkt = pool.alloc_copy(&[i as u8; 64]).unwrap();
            if batch.push(pkt).is_err() {
                refused += 1;
            }
        }
        refused
    }

    #[test]
    fn push_edges_cap_at_batch_size() {
        for (n, kept) in [(0, 0), (1, 1), (31, 31), (32, 32), (33, 32), (257, 32)] {
            let pool = Pool::new(PoolConfig {
                n_small: 300,
                n_jumbo: 0,
            });
            let mut batch = Batch::new();
            let refused = fill(&pool, &mut batch, n);
            assert_eq!(batch.len(), kept, "n = {n}");
            assert_eq!(refused, n - kept, "n = {n}");
            assert_eq!(batch.is_full(), kept == BATCH_SIZE);
            assert_eq!(batch.room(), BATCH_SIZE - kept);
            // Refused packets went back to the pool when dropped.
            assert_eq!(pool.in_use(BufClass::Small), kept);
            batch.clear();
            assert_eq!(pool.in_use(BufClass::Small), 0);
        }
    }

    #[test]
    fn drain_keeps_order_and_empties() {
        let pool = Pool::default();
        let mut batch = Batch::new();
        fill(&pool, &mut batch, 5);
        let firsts: Vec<u8> = batch.drain().map(|p| p.data()[0]).collect();
        assert_eq!(firsts, vec![0, 1, 2, 3, 4]);
        assert!(batch.is_empty());
        assert_eq!(pool.in_use(BufClass::Small), 0);
    }

    #[test]
    fn retain_drops_rejected_packets() {
        let pool = Pool::default();
        let mut batch = Batch::new();
        fill(&pool, &mut batch, 10);
        batch.retain(|p| p.data()[0] % 2 == 0);
        assert_eq!(batch.len(), 5);
        assert_eq!(pool.in_use(BufClass::Small), 5);
        drop(batch);
        assert_eq!(pool.in_use(BufClass::Small), 0);
    }
}
