//! The ferrovs datapath: netdevs, packet buffers and batches, PMD threads, the exact-match and
//! megaflow caches, upcalls to the pipeline, action execution and revalidation.
//!
//! # What is here
//!
//! The cached fast path (see `ARCHITECTURE.md` for the packet's walk):
//!
//! - [`pmd`]: PMD threads ([`Pmd`], [`PmdThreads`]): extraction, caches, upcalls with per-port
//!   budgets and a megaflow limit, execution, housekeeping, revalidation; [`PmdStats`].
//! - [`emc`] and [`megaflow`]: the exact-match cache and the tuple-space megaflow cache.
//! - [`upcall`]: the [`upcall::Upcall`] seam to the pipeline and the flow-table
//!   [`upcall::Change`]s; [`ofproto`]: the pipeline behind it ([`ofproto::OfDatapath`]: flow_mods
//!   acknowledged after revalidation).
//! - [`dpif`]: the datapath's ports, generation and acknowledgements ([`Datapath`]).
//! - [`exec`]: header rewrites (VLAN push/pop, sets with incremental checksums).
//!
//! The I/O layer under it:
//!
//! - [`pool`] and [`buffer`]: preallocated packet buffers on per-thread free lists, with headroom
//!   for pushed headers and typed [`Metadata`]. No heap allocation per packet in steady state.
//! - [`batch`]: up to [`BATCH_SIZE`] packets; a stage is a function over `&mut Batch`.
//! - [`netdev`]: the [`Netdev`] trait (batches in and out of numbered queues, per-queue counters,
//!   counted drops, never blocking) and the `memory`, `null` and `pcap-replay` ports.
//! - [`pcap`]: the classic pcap reader and writer.
//! - [`drop`](mod@drop) and [`stats`]: drop reasons and per-queue counters.
//! - `flows` (feature `test-utils`): the OVS-DPDK benchmark flows, as frames and pcaps.
//! - [`cycles`]: the TSC, for cycles-per-packet accounting.
//!
//! # Invariants
//!
//! - Every packet is accounted for: received, transmitted, or dropped with a counted reason.
//!   Sending drains the batch, whatever happens.
//! - The data path never blocks and never panics on packet contents.
//! - `unsafe` is allowed only in `netdev` (device rings, later) and `cycles` (`rdtsc`, `prefetch`);
//!   every unsafe block says why it is sound in a `// SAFETY:` comment.
//! - After [`ofproto::OfDatapath::flow_mods`] returns `Ok`, no PMD thread forwards a packet by a
//!   cached decision the change made stale.
//!
//! # Threads
//!
//! A [`Pool`] and the packets and batches it fills belong to one thread. Netdevs are
//! `Send + Sync` and shared; each of their queues has its own lock, uncontended when each
//! queue has one poller. See [`netdev`].
//!
//! # Example: replay → null
//!
//! ```
//! use datapath::netdev::null::NullNetdev;
//! use datapath::netdev::pcap_replay::{PcapReplay, ReplayConfig};
//! use datapath::netdev::Netdev;
//! use datapath::pcap::{Capture, PcapWriter, WriterOptions};
//! use datapath::{Batch, Pool};
//!
//! let mut w = PcapWriter::new(Vec::new(), WriterOptions::default()).expect("in memory");
//! w.write_frame(0, 0, &[0u8; 60]).expect("in memory");
//! let capture = Capture::parse(&w.into_inner()).expect("valid");
//! let rx = PcapReplay::new("p0", capture, ReplayConfig::default()).expect("Ethernet");
//! let sink = NullNetdev::new("p1", 1);
//! let pool = Pool::default();
//! let mut batch = Batch::new();
//! for _ in 0..10 {
//!     rx.recv(0, &pool, &mut batch);
//!     sink.send(0, &mut batch);
//! }
//! assert_eq!(sink.stats().tx_packets, 320);
//! ```

#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod batch;
pub mod buffer;
#[allow(unsafe_code)]
pub mod cycles;
pub mod dpif;
pub mod drop;
pub mod emc;
pub mod exec;
#[cfg(feature = "test-utils")]
pub mod flows;
pub mod megaflow;
pub mod mem;
#[allow(unsafe_code)]
pub mod netdev;
pub mod ofproto;
pub mod pcap;
pub mod pmd;
pub mod pool;
pub mod stats;
pub mod upcall;

pub use batch::{Batch, BATCH_SIZE};
pub use buffer::{BufClass, Metadata, Packet};
pub use dpif::{Datapath, DpPort};
pub use drop::DropReason;
pub use netdev::Netdev;
pub use pmd::{Pmd, PmdConfig, PmdStats, PmdThreads};
pub use pool::{Pool, PoolConfig};
pub use stats::QueueStats;
