//! The packet buffer pool: preallocated buffers on per-thread free lists.
//!
//! A [`Pool`] allocates all of its buffers once, when it is created: `n_small` small and
//! `n_jumbo` jumbo buffers (see [`crate::buffer`] for the geometry). After that, taking a
//! buffer pops a free list and dropping a [`Packet`] pushes it back: no heap allocation per
//! packet, ever, and no atomic operation either.
//!
//! # Thread safety
//!
//! A pool belongs to one thread (it is `!Send`, like the packets it hands out): each PMD
//! thread creates its own pool and its packets never leave that thread. A netdev queue that
//! is polled by one thread and transmitted on by another copies frames in and out of the
//! caller's buffers, so it never holds a foreign pool's buffer. Ports that must hold
//! buffers across calls (AF_XDP zero copy) own their memory (the UMEM) and fill the
//! caller's buffers from it.
//!
//! # Exhaustion
//!
//! When a class runs out, [`Pool::alloc`] returns `None` and the caller counts a drop
//! (`drop_no_buffer`); nothing blocks and nothing panics. A small frame never falls back to
//! a jumbo buffer: jumbo buffers are few, and the fallback would hide a small pool that is
//! too small.
//!
//! # Example
//!
//! ```
//! use datapath::buffer::BufClass;
//! use datapath::pool::{Pool, PoolConfig};
//!
//! let pool = Pool::new(PoolConfig { n_small: 1, n_jumbo: 0 });
//! let a = pool.alloc_copy(&[1; 64]).expect("one small buffer");
//! assert!(pool.alloc(64).is_none()); // exhausted: the caller counts a drop
//! drop(a);
//! assert_eq!(pool.available(BufClass::Small), 1);
//! ```

use std::cell::RefCell;
use std::fmt;
use std::rc::Rc;

use crate::buffer::{buf_class, new_buf, BufBox, BufClass, Packet, BUF_HEADER_LEN, MAX_FRAME_LEN};

/// How many buffers of each class a pool preallocates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolConfig {
    /// Small buffers (64 + 128 + 2048 bytes each).
    pub n_small: usize,
    /// Jumbo buffers (64 + 128 + 9216 bytes each).
    pub n_jumbo: usize,
}

impl PoolConfig {
    /// Bytes of buffer memory a pool of this configuration allocates.
    pub fn memory_len(&self) -> usize {
        self.n_small * (BUF_HEADER_LEN + BufClass::Small.size())
            + self.n_jumbo * (BUF_HEADER_LEN + BufClass::Jumbo.size())
    }
}

impl Default for PoolConfig {
    /// 4096 small buffers (8.75 MiB) and 256 jumbo (2.3 MiB): 128 full batches of small
    /// frames in flight, far more than one PMD thread holds at a time.
    fn default() -> Self {
        PoolConfig {
            n_small: 4096,
            n_jumbo: 256,
        }
    }
}

/// Why [`Pool::alloc_copy`] returned no packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    /// Every buffer of the needed class is in use.
    #[error("no free buffer")]
    NoBuffer,
    /// The frame is longer than the largest buffer class.
    #[error("frame of {0} bytes is longer than the largest buffer")]
    TooLong(usize),
}

/// The free lists, shared (on one thread) by the pool and its packets.
pub(crate) struct PoolShared {
    small: RefCell<Vec<BufBox>>,
    jumbo: RefCell<Vec<BufBox>>,
    config: PoolConfig,
}

impl PoolShared {
    /// Takes a buffer back. The free list was created with room for every buffer of the
    /// pool, so this push never reallocates.
    #[inline]
    pub(crate) fn put(&self, buf: BufBox) {
        match buf_class(&buf) {
            BufClass::Small => self.small.borrow_mut().push(buf),
            BufClass::Jumbo => self.jumbo.borrow_mut().push(buf),
        }
    }

    fn list(&self, class: BufClass) -> &RefCell<Vec<BufBox>> {
        match class {
            BufClass::Small => &self.small,
            BufClass::Jumbo => &self.jumbo,
        }
    }
}

/// A per-thread pool of packet buffers. Cloning a `Pool` gives another handle to the same
/// free lists.
#[derive(Clone)]
pub struct Pool {
    shared: Rc<PoolShared>,
}

impl Pool {
    /// Allocates every buffer of `config` now (the only allocation the pool ever makes).
    pub fn new(config: PoolConfig) -> Pool {
        let make = |class: BufClass, n: usize| {
            let mut list = Vec::with_capacity(n);
            list.extend((0..n).map(|_| new_buf(class)));
            RefCell::new(list)
        };
        Pool {
            shared: Rc::new(PoolShared {
                small: make(BufClass::Small, config.n_small),
                jumbo: make(BufClass::Jumbo, config.n_jumbo),
                config,
            }),
        }
    }

    /// Takes an empty packet whose buffer has room for `len` bytes after the headroom.
    /// `None` if that class is exhausted or `len` exceeds [`MAX_FRAME_LEN`].
    #[inline]
    pub fn alloc(&self, len: usize) -> Option<Packet> {
        self.alloc_class(BufClass::for_len(len)?)
    }

    /// Takes an empty packet of the given class, or `None` if the class is exhausted.
    #[inline]
    pub fn alloc_class(&self, class: BufClass) -> Option<Packet> {
        let buf = self.shared.list(class).borrow_mut().pop()?;
        Some(Packet::from_pool(buf, Rc::clone(&self.shared)))
    }

    /// Takes a packet holding a copy of `frame` (the rx path of every copying port).
    #[inline]
    pub fn alloc_copy(&self, frame: &[u8]) -> Result<Packet, AllocError> {
        if frame.len() > MAX_FRAME_LEN {
            return Err(AllocError::TooLong(frame.len()));
        }
        let mut pkt = self.alloc(frame.len()).ok_or(AllocError::NoBuffer)?;
        pkt.set_data(frame)
            .map_err(|_| AllocError::TooLong(frame.len()))?;
        Ok(pkt)
    }

    /// Free buffers of `class`.
    pub fn available(&self, class: BufClass) -> usize {
        self.shared.list(class).borrow().len()
    }

    /// Buffers of `class` the pool owns, free or in use.
    pub fn capacity(&self, class: BufClass) -> usize {
        match class {
            BufClass::Small => self.shared.config.n_small,
            BufClass::Jumbo => self.shared.config.n_jumbo,
        }
    }

    /// Buffers of `class` currently held by packets.
    pub fn in_use(&self, class: BufClass) -> usize {
        self.capacity(class) - self.available(class)
    }
}

impl Default for Pool {
    fn default() -> Self {
        Pool::new(PoolConfig::default())
    }
}

impl fmt::Debug for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("config", &self.shared.config)
            .field("small_available", &self.available(BufClass::Small))
            .field("jumbo_available", &self.available(BufClass::Jumbo))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_exhausted_returns_none_then_recovers() {
        let pool = Pool::new(PoolConfig {
            n_small: 2,
            n_jumbo: 0,
        });
        let a = pool.alloc(60).unwrap();
        let b = pool.alloc(60).unwrap();
        assert!(pool.alloc(60).is_none());
        assert_eq!(pool.alloc_copy(&[0; 60]).unwrap_err(), AllocError::NoBuffer);
        assert_eq!(pool.in_use(BufClass::Small), 2);
        drop(a);
        drop(b);
        assert_eq!(pool.available(BufClass::Small), 2);
        assert!(pool.alloc(60).is_some());
    }

    #[test]
    fn alloc_jumbo_len_uses_jumbo_class_without_fallback() {
        let pool = Pool::new(PoolConfig {
            n_small: 0,
            n_jumbo: 1,
        });
        assert!(pool.alloc(64).is_none());
        let p = pool.alloc_copy(&[3; 9000]).unwrap();
        assert_eq!(p.class(), BufClass::Jumbo);
        assert_eq!(p.data(), &[3; 9000][..]);
        assert!(pool.alloc(9000).is_none());
    }

    #[test]
    fn alloc_copy_too_long_is_error() {
        let pool = Pool::default();
        assert_eq!(
            pool.alloc_copy(&vec![0; MAX_FRAME_LEN + 1]).unwrap_err(),
            AllocError::TooLong(MAX_FRAME_LEN + 1)
        );
    }

    #[test]
    fn alloc_after_drop_reuses_buffer_with_fresh_state() {
        let pool = Pool::new(PoolConfig {
            n_small: 1,
            n_jumbo: 0,
        });
        let mut p = pool.alloc_copy(&[1; 100]).unwrap();
        p.meta_mut().in_port = 9;
        p.push_front(10).unwrap();
        drop(p);
        let q = pool.alloc(0).unwrap();
        assert!(q.is_empty());
        assert_eq!(q.headroom(), crate::buffer::HEADROOM);
        assert_eq!(*q.meta(), crate::buffer::Metadata::default());
    }

    #[test]
    fn packet_outliving_pool_handle_is_freed_safely() {
        let pool = Pool::new(PoolConfig {
            n_small: 1,
            n_jumbo: 0,
        });
        let p = pool.alloc(1).unwrap();
        drop(pool);
        drop(p);
    }
}
