//! Packet buffers: [`Packet`], its typed [`Metadata`], and the buffer geometry.
//!
//! # Geometry
//!
//! A buffer is one fixed-size allocation taken from a [`Pool`](crate::pool::Pool) and given
//! back to it when the [`Packet`] is dropped. It starts with a 64-byte header (the frame's
//! offset and length, and the [`Metadata`]), then [`HEADROOM`] bytes for pushing headers
//! (VLAN, MPLS, tunnel encapsulation) in place, then the data room; a received frame starts
//! right after the headroom, on a cache-line boundary. A [`Packet`] is a two-pointer handle
//! to its buffer, so batches and stages move handles, not metadata.
//!
//! There are two size classes ([`BufClass`]):
//!
//! - **small**: 64 + [`HEADROOM`] + [`SMALL_ROOM`] = 64 + 128 + 2048 bytes. Holds any standard
//!   frame (1518 B with FCS, 1514 B in memory) with 530 B to spare for pushed headers, like a DPDK
//!   mbuf (`RTE_PKTMBUF_HEADROOM` = 128, 2048-byte data room).
//! - **jumbo**: 64 + [`HEADROOM`] + [`JUMBO_ROOM`] = 64 + 128 + 9216 bytes, for 9000-byte MTUs.
//!
//! Why two classes and not one: almost all traffic is ≤ 1518 B, and a 9.4 KB buffer for a
//! 64 B frame wastes memory and, worse, TLB reach and cache sets once a pool holds thousands
//! of buffers (rx rings, tx queues, packets parked in upcalls). Why not more classes: the
//! allocator picks a class with one comparison; a third class buys little. Frames longer
//! than [`MAX_FRAME_LEN`] are not received (a counted `drop_too_long`).
//!
//! # Metadata
//!
//! [`Metadata`] is a plain typed struct in the buffer's header (style.md § 5: not an opaque
//! byte overlay): ingress port and queue, the header offsets found by extraction, and the
//! flow hash. The 360-byte [`packet::FlowKey`] is not stored per buffer; a stage that needs
//! keys keeps them in a per-batch array, indexed like the batch (as OVS keeps `keys[]` on
//! the PMD stack), so that a buffer's metadata stays on one cache line.
//!
//! # Example
//!
//! ```
//! use datapath::pool::{Pool, PoolConfig};
//!
//! let pool = Pool::new(PoolConfig { n_small: 4, n_jumbo: 1 });
//! let mut pkt = pool.alloc_copy(&[0xaa; 60]).expect("the pool has free buffers");
//! assert_eq!(pkt.len(), 60);
//! // Push a 4-byte VLAN tag in front of the frame, in place.
//! pkt.push_front(4).expect("128 bytes of headroom").copy_from_slice(&[0x81, 0, 0, 10]);
//! assert_eq!(&pkt.data()[..4], &[0x81, 0, 0, 10]);
//! drop(pkt); // The buffer goes back to `pool`.
//! assert_eq!(pool.available(datapath::buffer::BufClass::Small), 4);
//! ```

use std::fmt;
use std::rc::Rc;

use packet::ExtractInfo;

use crate::pool::PoolShared;

/// Bytes reserved in front of a received frame for pushing headers in place.
pub const HEADROOM: usize = 128;
/// Bytes of the header in front of every buffer's headroom (offsets and [`Metadata`]).
pub const BUF_HEADER_LEN: usize = 64;
/// Data room of a small buffer (after the headroom).
pub const SMALL_ROOM: usize = 2048;
/// Data room of a jumbo buffer (after the headroom): a 9000-byte MTU plus Ethernet, two VLAN
/// tags and slack, the usual 9216-byte jumbo limit of switches.
pub const JUMBO_ROOM: usize = 9216;
/// The longest frame a port can receive.
pub const MAX_FRAME_LEN: usize = JUMBO_ROOM;

// Offsets and lengths inside a buffer are kept as `u16`.
const _: () = assert!(HEADROOM + JUMBO_ROOM <= u16::MAX as usize);

/// Converts an offset or length inside a buffer to `u16`. Every caller has checked the value
/// against the buffer's size, which fits in `u16` (asserted above), so nothing is truncated.
#[inline(always)]
#[allow(clippy::cast_possible_truncation)]
const fn buf_u16(v: usize) -> u16 {
    debug_assert!(v <= u16::MAX as usize);
    v as u16
}

/// A buffer size class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BufClass {
    /// [`HEADROOM`] + [`SMALL_ROOM`] bytes.
    Small,
    /// [`HEADROOM`] + [`JUMBO_ROOM`] bytes.
    Jumbo,
}

impl BufClass {
    /// Bytes after the headroom.
    pub const fn room(self) -> usize {
        match self {
            BufClass::Small => SMALL_ROOM,
            BufClass::Jumbo => JUMBO_ROOM,
        }
    }

    /// Bytes of headroom and data room of a buffer of this class (the header not included).
    pub const fn size(self) -> usize {
        HEADROOM + self.room()
    }

    /// The smallest class that holds a frame of `len` bytes after the headroom, if any.
    #[inline]
    pub const fn for_len(len: usize) -> Option<BufClass> {
        if len <= SMALL_ROOM {
            Some(BufClass::Small)
        } else if len <= JUMBO_ROOM {
            Some(BufClass::Jumbo)
        } else {
            None
        }
    }

    /// The class of a buffer whose headroom and data room total `size` bytes.
    #[inline]
    pub(crate) fn of_size(size: usize) -> BufClass {
        if size == BufClass::Small.size() {
            BufClass::Small
        } else {
            BufClass::Jumbo
        }
    }
}

/// What the datapath knows about a packet besides its bytes.
///
/// Offsets are from the first byte of the frame ([`Packet::data`]); [`Packet::push_front`]
/// and [`Packet::pull_front`] keep them pointing at the same headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Metadata {
    /// Datapath port number of the ingress port; set by the poller after rx (a netdev does
    /// not know its port number).
    pub in_port: u32,
    /// Rx queue the packet arrived on.
    pub rx_queue: u16,
    /// Start of the MPLS label stack, if extraction found one (OVS `l2_5_ofs`).
    pub l2_5_ofs: Option<u16>,
    /// Start of the L3 header, if extraction got that far (OVS `l3_ofs`).
    pub l3_ofs: Option<u16>,
    /// Start of the L4 header, if extraction got that far (OVS `l4_ofs`).
    pub l4_ofs: Option<u16>,
    /// Flow hash (RSS from the port, or computed by the cache lookup), if known.
    pub hash: Option<u32>,
}

impl Metadata {
    /// Records the header offsets found by [`packet::extract()`].
    pub fn set_offsets(&mut self, info: &ExtractInfo) {
        let ofs = |o: Option<usize>| o.and_then(|o| u16::try_from(o).ok());
        self.l2_5_ofs = ofs(info.l2_5);
        self.l3_ofs = ofs(info.l3);
        self.l4_ofs = ofs(info.l4);
    }

    /// Forgets the header offsets (after a rewrite that moved headers).
    pub fn reset_offsets(&mut self) {
        self.l2_5_ofs = None;
        self.l3_ofs = None;
        self.l4_ofs = None;
    }

    #[inline]
    fn shift_offsets(&mut self, pushed: usize, pulled: usize) {
        for o in [&mut self.l2_5_ofs, &mut self.l3_ofs, &mut self.l4_ofs] {
            *o = o.and_then(|v| {
                let v = (usize::from(v) + pushed).checked_sub(pulled)?;
                u16::try_from(v).ok()
            });
        }
    }
}

/// The header of a buffer: the frame's place and the metadata, one cache line
/// ([`BUF_HEADER_LEN`]) in front of the headroom.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(64))]
pub(crate) struct BufHeader {
    /// Offset of the first byte of the frame in `data`.
    head: u16,
    /// Length of the frame.
    len: u16,
    /// The packet's metadata.
    meta: Metadata,
}

impl BufHeader {
    const FRESH: BufHeader = BufHeader {
        head: buf_u16(HEADROOM),
        len: 0,
        meta: Metadata {
            in_port: 0,
            rx_queue: 0,
            l2_5_ofs: None,
            l3_ofs: None,
            l4_ofs: None,
            hash: None,
        },
    };
}

const _: () = assert!(std::mem::size_of::<BufHeader>() == BUF_HEADER_LEN);

/// A buffer: its header, then [`HEADROOM`] bytes, then the data room of its class. The pool
/// creates it as `Buf<[u8; N]>` and keeps it as `Buf<[u8]>` (an unsizing coercion), so both
/// classes share one type and one allocation each.
#[repr(C)]
pub(crate) struct Buf<D: ?Sized> {
    hdr: BufHeader,
    data: D,
}

/// A buffer of either class.
pub(crate) type BufBox = Box<Buf<[u8]>>;

/// Allocates one buffer of `class`: the pool's only allocations.
pub(crate) fn new_buf(class: BufClass) -> BufBox {
    fn make<const N: usize>() -> BufBox {
        Box::new(Buf {
            hdr: BufHeader::FRESH,
            data: [0u8; N],
        })
    }
    match class {
        BufClass::Small => make::<{ HEADROOM + SMALL_ROOM }>(),
        BufClass::Jumbo => make::<{ HEADROOM + JUMBO_ROOM }>(),
    }
}

/// The class of a buffer, from its size.
#[inline]
pub(crate) fn buf_class(buf: &Buf<[u8]>) -> BufClass {
    BufClass::of_size(buf.data.len())
}

/// A packet in flight: a handle to a pooled buffer, which holds the frame and its
/// [`Metadata`].
///
/// Owning a `Packet` owns the buffer; dropping it returns the buffer to the pool it came
/// from, without freeing memory. A `Packet` is two pointers wide, so batches move handles,
/// not metadata. It is tied to its pool's thread (it is `!Send`): a PMD thread allocates,
/// forwards and frees on the same free lists, which keeps them free of atomics.
pub struct Packet {
    /// Always `Some` while the packet lives; taken only in `drop`.
    buf: Option<BufBox>,
    /// The pool that gets `buf` back.
    pool: Rc<PoolShared>,
}

/// Why [`Packet::push_front`] or [`Packet::push_back`] could not grow the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no room to grow the frame by {needed} bytes ({available} available)")]
pub struct NoRoom {
    /// Bytes asked for.
    pub needed: usize,
    /// Bytes available on that side.
    pub available: usize,
}

const LIVE: &str = "a live packet always holds its buffer; it is taken only in drop";

impl Packet {
    /// Wraps a buffer taken from `pool`, resetting its header: the frame is empty and
    /// starts after the headroom, the metadata is default.
    #[inline]
    pub(crate) fn from_pool(mut buf: BufBox, pool: Rc<PoolShared>) -> Packet {
        buf.hdr = BufHeader::FRESH;
        Packet {
            buf: Some(buf),
            pool,
        }
    }

    #[inline(always)]
    fn buf(&self) -> &Buf<[u8]> {
        self.buf.as_deref().expect(LIVE)
    }

    #[inline(always)]
    fn buf_mut(&mut self) -> &mut Buf<[u8]> {
        self.buf.as_deref_mut().expect(LIVE)
    }

    /// The packet's metadata.
    #[inline]
    pub fn meta(&self) -> &Metadata {
        &self.buf().hdr.meta
    }

    /// The packet's metadata, writable.
    #[inline]
    pub fn meta_mut(&mut self) -> &mut Metadata {
        &mut self.buf_mut().hdr.meta
    }

    /// The frame's bytes.
    #[inline]
    pub fn data(&self) -> &[u8] {
        let b = self.buf();
        let head = usize::from(b.hdr.head);
        &b.data[head..head + usize::from(b.hdr.len)]
    }

    /// The frame's bytes, writable.
    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        let b = self.buf_mut();
        let head = usize::from(b.hdr.head);
        &mut b.data[head..head + usize::from(b.hdr.len)]
    }

    /// Length of the frame in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        usize::from(self.buf().hdr.len)
    }

    /// Whether the frame is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The buffer's size class.
    pub fn class(&self) -> BufClass {
        buf_class(self.buf())
    }

    /// Bytes free in front of the frame.
    pub fn headroom(&self) -> usize {
        usize::from(self.buf().hdr.head)
    }

    /// Bytes free behind the frame.
    pub fn tailroom(&self) -> usize {
        let b = self.buf();
        b.data.len() - usize::from(b.hdr.head) - usize::from(b.hdr.len)
    }

    /// Replaces the frame with a copy of `frame`, placed after the default headroom.
    ///
    /// Fails, leaving the packet as it was, if `frame` does not fit after the headroom.
    #[inline]
    pub fn set_data(&mut self, frame: &[u8]) -> Result<(), NoRoom> {
        let b = self.buf_mut();
        let Some(dst) = b.data.get_mut(HEADROOM..HEADROOM + frame.len()) else {
            return Err(NoRoom {
                needed: frame.len(),
                available: b.data.len() - HEADROOM,
            });
        };
        dst.copy_from_slice(frame);
        b.hdr.head = buf_u16(HEADROOM);
        b.hdr.len = buf_u16(frame.len());
        Ok(())
    }

    /// Grows the frame by `n` bytes at the front (into the headroom) and returns them, for
    /// the caller to fill. Header offsets in the metadata move with the frame.
    pub fn push_front(&mut self, n: usize) -> Result<&mut [u8], NoRoom> {
        let b = self.buf_mut();
        let available = usize::from(b.hdr.head);
        if n > available {
            return Err(NoRoom {
                needed: n,
                available,
            });
        }
        b.hdr.head -= buf_u16(n);
        b.hdr.len += buf_u16(n);
        b.hdr.meta.shift_offsets(n, 0);
        let head = usize::from(b.hdr.head);
        Ok(&mut b.data[head..head + n])
    }

    /// Removes `n` bytes from the front of the frame (at most its length) and returns how
    /// many were removed. Header offsets that pointed into them become `None`.
    pub fn pull_front(&mut self, n: usize) -> usize {
        let b = self.buf_mut();
        let n = n.min(usize::from(b.hdr.len));
        b.hdr.head += buf_u16(n);
        b.hdr.len -= buf_u16(n);
        b.hdr.meta.shift_offsets(0, n);
        n
    }

    /// Grows the frame by `n` bytes at the back (into the tailroom) and returns them.
    pub fn push_back(&mut self, n: usize) -> Result<&mut [u8], NoRoom> {
        let available = self.tailroom();
        if n > available {
            return Err(NoRoom {
                needed: n,
                available,
            });
        }
        let b = self.buf_mut();
        let end = usize::from(b.hdr.head) + usize::from(b.hdr.len);
        b.hdr.len += buf_u16(n);
        Ok(&mut b.data[end..end + n])
    }

    /// Shortens the frame to `len` bytes; does nothing if it is not longer.
    pub fn truncate(&mut self, len: usize) {
        let b = self.buf_mut();
        if len < usize::from(b.hdr.len) {
            b.hdr.len = buf_u16(len);
        }
    }
}

impl Drop for Packet {
    #[inline]
    fn drop(&mut self) {
        if let Some(buf) = self.buf.take() {
            self.pool.put(buf);
        }
    }
}

impl fmt::Debug for Packet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Packet")
            .field("len", &self.len())
            .field("headroom", &self.headroom())
            .field("class", &self.class())
            .field("meta", self.meta())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::{Pool, PoolConfig};

    fn pool() -> Pool {
        Pool::new(PoolConfig {
            n_small: 2,
            n_jumbo: 1,
        })
    }

    #[test]
    fn for_len_picks_smallest_class() {
        assert_eq!(BufClass::for_len(0), Some(BufClass::Small));
        assert_eq!(BufClass::for_len(1518), Some(BufClass::Small));
        assert_eq!(BufClass::for_len(SMALL_ROOM), Some(BufClass::Small));
        assert_eq!(BufClass::for_len(SMALL_ROOM + 1), Some(BufClass::Jumbo));
        assert_eq!(BufClass::for_len(9000), Some(BufClass::Jumbo));
        assert_eq!(BufClass::for_len(MAX_FRAME_LEN + 1), None);
    }

    #[test]
    fn push_front_beyond_headroom_fails_unchanged() {
        let pool = pool();
        let mut p = pool.alloc_copy(&[1, 2, 3]).unwrap();
        assert_eq!(
            p.push_front(HEADROOM + 1).unwrap_err(),
            NoRoom {
                needed: HEADROOM + 1,
                available: HEADROOM
            }
        );
        assert_eq!(p.data(), &[1, 2, 3]);
        p.push_front(HEADROOM).unwrap().fill(9);
        assert_eq!(p.len(), HEADROOM + 3);
        assert_eq!(p.headroom(), 0);
    }

    #[test]
    fn push_pull_front_shift_offsets() {
        let pool = pool();
        let mut p = pool.alloc_copy(&[0; 60]).unwrap();
        p.meta_mut().l3_ofs = Some(14);
        p.meta_mut().l4_ofs = Some(34);
        p.push_front(4).unwrap();
        assert_eq!((p.meta().l3_ofs, p.meta().l4_ofs), (Some(18), Some(38)));
        assert_eq!(p.pull_front(20), 20);
        assert_eq!((p.meta().l3_ofs, p.meta().l4_ofs), (None, Some(18)));
    }

    #[test]
    fn alloc_copy_frame_starts_on_cache_line() {
        let pool = pool();
        for len in [60, 1514, 9000] {
            let p = pool.alloc_copy(&vec![1; len]).unwrap();
            assert_eq!(p.data().as_ptr() as usize % 64, 0);
            assert_eq!(p.headroom(), HEADROOM);
        }
    }

    #[test]
    fn pull_front_past_end_empties_frame() {
        let pool = pool();
        let mut p = pool.alloc_copy(&[0; 10]).unwrap();
        assert_eq!(p.pull_front(100), 10);
        assert!(p.is_empty());
    }

    #[test]
    fn push_back_and_truncate_respect_tailroom() {
        let pool = pool();
        let mut p = pool.alloc_copy(&[0; 2000]).unwrap();
        assert_eq!(p.tailroom(), SMALL_ROOM - 2000);
        assert!(p.push_back(SMALL_ROOM - 2000 + 1).is_err());
        p.push_back(48).unwrap().fill(7);
        assert_eq!(p.len(), 2048);
        assert_eq!(p.data()[2047], 7);
        p.truncate(60);
        assert_eq!(p.len(), 60);
        p.truncate(100);
        assert_eq!(p.len(), 60);
    }

    #[test]
    fn set_data_too_long_fails_unchanged() {
        let pool = pool();
        let mut p = pool.alloc_copy(&[5; 8]).unwrap();
        assert!(p.set_data(&[0; SMALL_ROOM + 1]).is_err());
        assert_eq!(p.data(), &[5; 8]);
    }

    #[test]
    fn set_offsets_copies_extract_info() {
        let mut m = Metadata::default();
        let info = ExtractInfo {
            l2: Some(0),
            l3: Some(14),
            l4: Some(34),
            ..ExtractInfo::default()
        };
        m.set_offsets(&info);
        assert_eq!((m.l2_5_ofs, m.l3_ofs, m.l4_ofs), (None, Some(14), Some(34)));
        m.reset_offsets();
        assert_eq!(m.l3_ofs, None);
    }
}
