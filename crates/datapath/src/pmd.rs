//! A poll-mode driver thread: polls its rx queues and runs each batch through extraction,
//! the exact-match cache, the megaflow cache, upcalls and action execution.
//!
//! # Per batch (≤ 32 packets)
//!
//! 1. **Extract** every packet's [`FlowKey`] (`in_port` = datapath port, VLANs normalized as the
//!    bridge's translation expects).
//! 2. **EMC** ([`crate::emc`]) when it pays, then the **megaflow cache** ([`crate::megaflow`]) for
//!    the rest, hashed and prefetched as a batch.
//! 3. **Upcall** for each miss, through a token bucket per ingress port
//!    ([`PmdConfig::upcall_rate`]): a storm of new flows costs counted drops (`drop_upcall_limit`),
//!    not stalls of established flows. The bucket is the port's, not the rx queue's or the PMD's:
//!    every PMD polling one of the port's queues shares it ([`crate::upcall::UpcallBudget`] says
//!    why it is shared rather than split). A miss first looks for a megaflow installed by an
//!    earlier packet of the same batch: a batch of one new flow costs one upcall and one token, not
//!    one per packet. The translation's mask and actions become a megaflow, unless the table is at
//!    [`PmdConfig::megaflow_limit`] (see below).
//! 4. **Execute** each packet's actions: outputs are queued per tx port and each queue is flushed
//!    once per batch (or when it holds 32); a copy is made only for outputs before the last one
//!    (mirrors, floods); header rewrites use incremental checksums.
//!
//! # At the megaflow limit
//!
//! OVS's userspace datapath collapses when the flows outnumber its flow limit (0.34 Mpps at
//! 256K flows): every packet of a flow without a megaflow is an upcall. Here:
//!
//! - **Established megaflows keep hitting.** Nothing is evicted to make room for a new flow, so a
//!   flow set larger than the limit never makes the cache thrash.
//! - **Flows beyond the limit are still forwarded**, by their translation alone, within their
//!   port's upcall budget: each such packet is counted in [`PmdStats::megaflow_limit_hits`] (and in
//!   `upcalls` when it needed a translation of its own), and the rules it matched are credited.
//!   Packets of one batch that a translation covers share it (one token, one upcall); beyond the
//!   budget, packets are dropped and counted (`drop_upcall_limit`), as any miss.
//! - **Idle expiry makes room.** At the limit, megaflows idle for [`PRESSURE_MAX_IDLE_MS`] expire
//!   (if [`PmdConfig::max_idle_ms`] is longer), so flows that ended give their room to new ones,
//!   which get megaflows again.
//!
//! The limit is per PMD thread: each has its own megaflow table.
//!
//! # Housekeeping (about every millisecond)
//!
//! Upcall budgets refill; a slice of the megaflows is swept (idle ones expire after
//! [`PmdConfig::max_idle_ms`], or sooner at the megaflow limit, the others credit their packet and
//! byte counts to the OpenFlow rules their translation matched); subtables are re-ranked by hits
//! every second; counters are published to [`PmdShared`]; NORMAL's MAC changes trigger the
//! revalidation of the megaflows that ran NORMAL.
//!
//! # Revalidation
//!
//! Checked at the top of every iteration (see [`crate::dpif`]): a megaflow is retranslated
//! only if a change can concern it, using what its translation depended on
//! ([`pipeline::xlate::XlateDeps`]): rules added to a table it looked up with its own key
//! must overlap it; other changes to a table it looked up, or any change for a translation
//! that rewrote its key before a lookup, retranslate it. A retranslation that yields the same
//! actions and no wider mask keeps the megaflow; otherwise it is removed (its statistics
//! credited first) and the next packet upcalls.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError};

use packet::extract::extract;
use packet::key::FlowKey;
use pipeline::odp::DpAction;
use pipeline::xlate::{normalize_key, XlateDeps};

use crate::batch::{Batch, BATCH_SIZE};
use crate::buffer::Packet;
use crate::dpif::{Datapath, PmdShared};
use crate::drop::DropReason;
use crate::emc::{key_hash, Emc, EmcMode};
use crate::megaflow::{FlowId, MegaflowTable};
use crate::netdev::Netdev;
use crate::pool::{Pool, PoolConfig};
use crate::stats::DropCounts;
use crate::upcall::{Change, Projections, UpcallBudget, UpcallError, UpcallRequest};
use crate::{cycles, exec};

/// A PMD thread's settings.
#[derive(Debug, Clone)]
pub struct PmdConfig {
    /// Exact-match cache slots (0 turns it off).
    pub emc_entries: usize,
    /// Megaflows at most, in this PMD's table (OVS `flow-limit`). See the module docs for
    /// what happens at the limit.
    pub megaflow_limit: usize,
    /// A megaflow unused this long expires (OVS `max-idle`); at the megaflow limit, one
    /// unused for [`PRESSURE_MAX_IDLE_MS`] (if that is shorter).
    pub max_idle_ms: u64,
    /// Upcalls per second per ingress port (whatever its number of rx queues and the PMDs
    /// polling them); misses beyond it are dropped and counted (`drop_upcall_limit`).
    pub upcall_rate: u32,
    /// Upcalls in a burst per ingress port.
    pub upcall_burst: u32,
    /// Packet buffers of the thread's pool.
    pub pool: PoolConfig,
}

impl Default for PmdConfig {
    fn default() -> Self {
        PmdConfig {
            emc_entries: crate::emc::DEFAULT_ENTRIES,
            megaflow_limit: 1 << 20,
            max_idle_ms: 10_000,
            upcall_rate: 100_000,
            upcall_burst: 20_000,
            pool: PoolConfig::default(),
        }
    }
}

/// A PMD thread's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PmdStats {
    /// Which PMD.
    pub pmd: usize,
    /// Packets received and processed.
    pub packets: u64,
    /// Packets whose flow the exact-match cache found.
    pub emc_hits: u64,
    /// Packets whose flow the megaflow cache found.
    pub megaflow_hits: u64,
    /// Packets translated by an upcall.
    pub upcalls: u64,
    /// Packets forwarded by a translation that was not installed because the megaflow table
    /// was at [`PmdConfig::megaflow_limit`] (each packet of an uncached flow, not each
    /// translation: packets of one batch share their flow's translation).
    pub megaflow_limit_hits: u64,
    /// Copies sent to the controller (the OpenFlow channel does not exist yet: counted only).
    pub userspace: u64,
    /// Drops by reason.
    pub drops: DropCounts,
    /// Megaflows now.
    pub megaflows: u64,
    /// Subtables (distinct masks) now.
    pub subtables: u64,
    /// Megaflows removed after idling.
    pub expired: u64,
    /// Revalidation passes.
    pub revalidations: u64,
    /// Megaflows retranslated by revalidation.
    pub retranslated: u64,
    /// Megaflows removed by revalidation.
    pub revalidated_out: u64,
    /// Cycles spent on iterations that received packets.
    pub busy_cycles: u64,
    /// Cycles spent on iterations that received nothing.
    pub idle_cycles: u64,
    /// Poll iterations.
    pub iterations: u64,
    /// Whether the exact-match cache is off because its last trial found that it did not
    /// pay (or it is configured off).
    pub emc_off: bool,
    /// Bytes held by the caches and flows (estimate).
    pub cache_bytes: u64,
    /// The core the thread is pinned to; `None` if it was not asked to pin, or the pin failed
    /// (a core outside the affinity mask, or one that does not exist). Not summed.
    pub pinned: Option<usize>,
}

impl PmdStats {
    /// Busy cycles per packet (0 before the first packet).
    pub fn cycles_per_packet(&self) -> f64 {
        if self.packets == 0 {
            0.0
        } else {
            self.busy_cycles as f64 / self.packets as f64
        }
    }

    /// The counters of several PMDs added up (gauges too: megaflows, subtables, cache bytes;
    /// `pinned` stays `None`).
    pub fn sum(all: &[PmdStats]) -> PmdStats {
        let mut t = PmdStats::default();
        for s in all {
            t.packets += s.packets;
            t.emc_hits += s.emc_hits;
            t.megaflow_hits += s.megaflow_hits;
            t.upcalls += s.upcalls;
            t.megaflow_limit_hits += s.megaflow_limit_hits;
            t.userspace += s.userspace;
            for (r, n) in s.drops.iter() {
                t.drops.add(r, n);
            }
            t.megaflows += s.megaflows;
            t.subtables += s.subtables;
            t.expired += s.expired;
            t.revalidations += s.revalidations;
            t.retranslated += s.retranslated;
            t.revalidated_out += s.revalidated_out;
            t.busy_cycles += s.busy_cycles;
            t.idle_cycles += s.idle_cycles;
            t.iterations += s.iterations;
            t.emc_off |= s.emc_off;
            t.cache_bytes += s.cache_bytes;
        }
        t
    }

    /// The counters as `(name, value)` pairs (`drop_<reason>` for drops).
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        let mut v = vec![
            ("packets", self.packets),
            ("emc_hits", self.emc_hits),
            ("megaflow_hits", self.megaflow_hits),
            ("upcalls", self.upcalls),
            ("megaflow_limit_hits", self.megaflow_limit_hits),
            ("userspace", self.userspace),
            ("megaflows", self.megaflows),
            ("expired", self.expired),
            ("revalidations", self.revalidations),
            ("retranslated", self.retranslated),
            ("revalidated_out", self.revalidated_out),
        ];
        v.extend(self.drops.iter().map(|(r, n)| (r.counter_name(), n)));
        v
    }
}

/// What a packet hit touches of its flow: counters, last use, and the output port when the
/// actions are a single output (then the action list is not read at all). 32 bytes, two per
/// cache line, in an array of their own beside the cold [`FlowData`].
#[derive(Debug, Clone, Copy, Default)]
struct FlowHot {
    packets: u64,
    bytes: u64,
    used_ms: u64,
    /// The port of a single-output action list, or [`NOT_SINGLE`].
    out: u32,
}

/// [`FlowHot::out`] of a flow whose actions are not one output.
const NOT_SINGLE: u32 = u32::MAX;

fn single_out(actions: &[DpAction]) -> u32 {
    match actions {
        [DpAction::Output(p)] if *p != NOT_SINGLE => *p,
        _ => NOT_SINGLE,
    }
}

/// A cached flow's cold payload: actions and what revalidation and crediting need.
#[derive(Debug)]
struct FlowData {
    actions: Box<[DpAction]>,
    credited_packets: u64,
    credited_bytes: u64,
    bridge: Arc<str>,
    of_in_port: u16,
    deps: XlateDeps,
}

impl FlowData {
    fn credit(&mut self, hot: &FlowHot, now_ms: u64) {
        let dp = hot.packets - self.credited_packets;
        let db = hot.bytes - self.credited_bytes;
        if dp == 0 {
            return;
        }
        for r in &self.deps.rules {
            r.credit_many(dp, db);
            r.touch(hot.used_ms.min(now_ms));
        }
        self.credited_packets = hot.packets;
        self.credited_bytes = hot.bytes;
    }
}

/// One rx queue polled by this PMD.
#[derive(Debug)]
struct RxQueue {
    dp_port: u32,
    netdev: Arc<dyn Netdev>,
    q: usize,
    vlan_limit: u32,
    /// The port's upcall budget, shared with the port's other queues and their PMDs.
    budget: Arc<UpcallBudget>,
}

/// One tx port as this PMD sends to it.
#[derive(Debug)]
struct TxSlot {
    netdev: Arc<dyn Netdev>,
    q: usize,
    batch: Batch,
}

/// A translation made for a packet of the current batch but not installed (megaflow limit):
/// later packets of the batch that it covers use it too.
#[derive(Debug)]
struct Direct {
    /// The translated key under `mask`.
    masked: FlowKey,
    mask: FlowKey,
    actions: Vec<DpAction>,
    /// The rules it matched, credited with each packet that reuses it.
    deps: XlateDeps,
}

/// What happens to one packet of a batch.
#[derive(Debug, Clone, Copy)]
enum Fate {
    Flow(FlowId),
    /// Actions of a translation that did not become a megaflow (index into `direct`).
    Direct(usize),
    Drop(DropReason),
}

/// At the megaflow limit, megaflows unused for this long expire even if
/// [`PmdConfig::max_idle_ms`] is longer, so that room is made for new flows (OVS shortens
/// `max-idle` to 100 ms the same way when the datapath holds more flows than `flow-limit`).
pub const PRESSURE_MAX_IDLE_MS: u64 = 100;

/// Megaflows swept per housekeeping.
const SWEEP: usize = 1024;
/// Iterations between clock reads for housekeeping.
const HOUSEKEEPING_ITERS: u64 = 32;

/// One PMD: its caches, its pool and its queues. Made and run on its own thread (it owns a
/// [`Pool`], which is `!Send`).
#[derive(Debug)]
pub struct Pmd {
    index: usize,
    count: usize,
    dp: Arc<Datapath>,
    cfg: PmdConfig,
    shared: Arc<PmdShared>,
    pool: Pool,
    rxqs: Vec<RxQueue>,
    tx: Vec<Option<TxSlot>>,
    port_gen: u64,
    emc: Emc,
    megaflows: MegaflowTable,
    flows: Vec<Option<FlowData>>,
    hot: Vec<FlowHot>,
    keys: Box<[FlowKey]>,
    /// The rx batch, kept across iterations (it may trade places with a tx batch).
    rx_batch: Option<Batch>,
    fates: [Fate; BATCH_SIZE],
    direct: Vec<Direct>,
    seen_gen: u64,
    mac_epoch: u64,
    stats_seen: u64,
    stats: PmdStats,
    now_ms: u64,
    /// Megaflows installed while processing the current batch.
    batch_installs: usize,
    next_housekeeping: u64,
    last_rank_ms: u64,
    sweep_cursor: usize,
    housekeeping_cycles: u64,
    /// Heap bytes of the flows' action lists and rule lists (kept up to date).
    flow_heap_bytes: u64,
}

/// Heap bytes a flow holds beside its slot.
fn heap_bytes(f: &FlowData) -> u64 {
    (f.actions.len() * std::mem::size_of::<DpAction>() + f.deps.rules.capacity() * 8) as u64
}

impl Pmd {
    /// PMD `index` of `count`: it polls rx queue `j` (counting the queues of all ports in port
    /// order) when `j % count == index`, and sends on tx queue `index` of each port.
    pub fn new(dp: Arc<Datapath>, index: usize, count: usize, cfg: PmdConfig) -> Pmd {
        let shared = Arc::new(PmdShared::default());
        let seen = dp.generation();
        shared.seen_gen.store(seen, Ordering::Release);
        dp.register_pmd(shared.clone());
        let hz_per_ms = (cycles::hz() / 1000).max(1);
        let mut pmd = Pmd {
            index,
            count: count.max(1),
            pool: Pool::new(cfg.pool),
            emc: Emc::new(
                cfg.emc_entries.max(16),
                if cfg.emc_entries == 0 {
                    EmcMode::Off
                } else {
                    EmcMode::Auto
                },
            ),
            cfg,
            shared,
            rxqs: Vec::new(),
            tx: Vec::new(),
            port_gen: u64::MAX,
            megaflows: MegaflowTable::new(),
            flows: Vec::new(),
            hot: Vec::new(),
            keys: vec![FlowKey::default(); BATCH_SIZE].into_boxed_slice(),
            rx_batch: Some(Batch::new()),
            fates: [Fate::Drop(DropReason::FlowDrop); BATCH_SIZE],
            direct: Vec::new(),
            seen_gen: seen,
            mac_epoch: dp.upcall().mac_epoch(),
            stats_seen: dp.stats_request(),
            stats: PmdStats {
                pmd: index,
                ..PmdStats::default()
            },
            now_ms: dp.now_ms(),
            batch_installs: 0,
            next_housekeeping: 0,
            last_rank_ms: dp.now_ms(),
            sweep_cursor: 0,
            housekeeping_cycles: hz_per_ms,
            flow_heap_bytes: 0,
            dp,
        };
        pmd.refresh_ports();
        pmd
    }

    /// The counters, now.
    pub fn stats(&self) -> PmdStats {
        let mut s = self.stats.clone();
        self.fill_gauges(&mut s);
        s
    }

    fn fill_gauges(&self, s: &mut PmdStats) {
        s.megaflows = self.megaflows.len() as u64;
        s.subtables = self.megaflows.n_subtables() as u64;
        s.emc_off = self.emc.is_off();
        s.cache_bytes = (self.megaflows.memory()
            + self.emc.memory()
            + self.flows.capacity() * std::mem::size_of::<Option<FlowData>>()
            + self.hot.capacity() * std::mem::size_of::<FlowHot>()) as u64
            + self.flow_heap_bytes;
    }

    /// The PMD's shared state.
    pub fn shared(&self) -> &Arc<PmdShared> {
        &self.shared
    }

    /// The PMD's packet pool.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// Number of megaflows.
    pub fn n_megaflows(&self) -> usize {
        self.megaflows.len()
    }

    /// Every megaflow: masked key, mask, actions, packets, bytes.
    pub fn megaflows(&self) -> Vec<(FlowKey, FlowKey, Vec<DpAction>, u64, u64)> {
        self.megaflows
            .ids()
            .filter_map(|id| {
                let (k, m) = self.megaflows.megaflow(id)?;
                let f = self.flows.get(id as usize)?.as_ref()?;
                let h = self.hot.get(id as usize)?;
                Some((k, m, f.actions.to_vec(), h.packets, h.bytes))
            })
            .collect()
    }

    /// Removes every megaflow (crediting their statistics first) and clears the EMC.
    pub fn flush(&mut self) {
        let now = self.now_ms;
        for (f, h) in self.flows.iter_mut().zip(&self.hot) {
            if let Some(f) = f {
                f.credit(h, now);
            }
        }
        self.flows.clear();
        self.hot.clear();
        self.megaflows.clear();
        self.emc.clear();
        self.flow_heap_bytes = 0;
    }

    fn refresh_ports(&mut self) {
        let g = self.dp.port_generation();
        if g == self.port_gen {
            return;
        }
        self.port_gen = g;
        self.flush_tx();
        let ports = self.dp.ports();
        self.rxqs.clear();
        self.tx.clear();
        let mut j = 0usize;
        for p in &ports {
            for q in 0..p.netdev.n_rxq() {
                if j % self.count == self.index {
                    self.rxqs.push(RxQueue {
                        dp_port: p.dp_port,
                        netdev: p.netdev.clone(),
                        q,
                        vlan_limit: p.vlan_limit,
                        budget: self.dp.upcall_budget(
                            p.dp_port,
                            self.cfg.upcall_rate,
                            self.cfg.upcall_burst,
                        ),
                    });
                }
                j += 1;
            }
            let slot = usize::try_from(p.dp_port).unwrap_or(usize::MAX);
            if slot < (1 << 16) {
                if self.tx.len() <= slot {
                    self.tx.resize_with(slot + 1, || None);
                }
                self.tx[slot] = Some(TxSlot {
                    netdev: p.netdev.clone(),
                    q: self.index,
                    batch: Batch::new(),
                });
            }
        }
    }

    /// Polls every rx queue once and processes what arrived; returns the packets received.
    /// Revalidates first if the flow tables changed.
    pub fn run_once(&mut self) -> usize {
        if self.dp.generation() != self.seen_gen {
            self.revalidate();
        }
        let mut total = 0;
        // Taken out of `self` for the iteration (an `Option`, so that no batch is made).
        let mut batch = self.rx_batch.take().unwrap_or_default();
        for r in 0..self.rxqs.len() {
            let t0 = cycles::now();
            let n = {
                let rq = &self.rxqs[r];
                rq.netdev.recv(rq.q, &self.pool, &mut batch)
            };
            if n > 0 {
                self.process(r, &mut batch);
                self.flush_tx();
                self.stats.busy_cycles += cycles::now().wrapping_sub(t0);
            } else {
                self.stats.idle_cycles += cycles::now().wrapping_sub(t0);
            }
            total += n;
        }
        self.rx_batch = Some(batch);
        self.stats.iterations += 1;
        if self.stats.iterations % HOUSEKEEPING_ITERS == 0 {
            let now = cycles::now();
            if now >= self.next_housekeeping {
                self.next_housekeeping = now + self.housekeeping_cycles;
                self.housekeeping(false);
            }
        }
        total
    }

    /// Polls until `stop` is set, marked as running (so flow-table changes wait for it).
    pub fn run(&mut self, stop: &AtomicBool) {
        self.shared.running.store(true, Ordering::Release);
        while !stop.load(Ordering::Relaxed) {
            self.run_once();
        }
        self.housekeeping(true);
        self.shared.running.store(false, Ordering::Release);
    }

    /// Does the periodic work now: refill, sweep, rank, publish (all of the sweep with `full`).
    pub fn housekeeping(&mut self, full: bool) {
        self.now_ms = self.dp.now_ms();
        self.refresh_ports();
        // Each interval is credited once per budget, whichever queue or PMD refills it first.
        for r in &self.rxqs {
            r.budget.refill(self.now_ms);
        }
        let req = self.dp.stats_request();
        let all = full || req != self.stats_seen;
        self.sweep(if all { usize::MAX } else { SWEEP });
        if all {
            self.stats_seen = req;
            self.shared.stats_seen.store(req, Ordering::Release);
        }
        if self.now_ms.saturating_sub(self.last_rank_ms) >= 1000 {
            self.last_rank_ms = self.now_ms;
            self.megaflows.rank();
        }
        let mac = self.dp.upcall().mac_epoch();
        if mac != self.mac_epoch {
            self.revalidate();
        }
        let mut s = self.stats.clone();
        self.fill_gauges(&mut s);
        *self
            .shared
            .stats
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = s;
    }

    /// Credits and expires up to `n` megaflows from the sweep cursor on.
    fn sweep(&mut self, n: usize) {
        let bound = self.flows.len();
        if bound == 0 {
            return;
        }
        let now = self.now_ms;
        let max_idle = if self.megaflows.len() >= self.cfg.megaflow_limit {
            self.cfg.max_idle_ms.min(PRESSURE_MAX_IDLE_MS)
        } else {
            self.cfg.max_idle_ms
        };
        let n = n.min(bound);
        for _ in 0..n {
            let id = self.sweep_cursor % bound;
            self.sweep_cursor = (id + 1) % bound;
            let Some(f) = self.flows[id].as_mut() else {
                continue;
            };
            let h = self.hot[id];
            f.credit(&h, now);
            if now.saturating_sub(h.used_ms) > max_idle {
                self.remove_flow(u32::try_from(id).unwrap_or(u32::MAX));
                self.stats.expired += 1;
            }
        }
    }

    fn remove_flow(&mut self, id: FlowId) {
        if let Some(mut f) = self.flows.get_mut(id as usize).and_then(Option::take) {
            f.credit(&self.hot[id as usize], self.now_ms);
            self.flow_heap_bytes = self.flow_heap_bytes.saturating_sub(heap_bytes(&f));
        }
        self.megaflows.remove(id);
    }

    fn flush_tx(&mut self) {
        for t in self.tx.iter_mut().flatten() {
            if !t.batch.is_empty() {
                t.netdev.send(t.q, &mut t.batch);
            }
        }
    }

    /// Runs one received batch through the caches, upcalls and actions.
    fn process(&mut self, r: usize, batch: &mut Batch) {
        let n = batch.len().min(BATCH_SIZE);
        let (dp_port, vlan_limit) = (self.rxqs[r].dp_port, self.rxqs[r].vlan_limit);
        for (i, p) in batch.iter_mut().enumerate().take(n) {
            let k = &mut self.keys[i];
            // Only word 0 (in_port, recirc_id) of the metadata is ever written here.
            k.words[0] = 0;
            let info = extract(p.data(), k);
            let m = p.meta_mut();
            m.set_offsets(&info);
            m.in_port = dp_port;
            k.set_in_port(dp_port);
            // Untagged frames are normal already (extraction leaves the tag fields zero).
            if k.vlan_tci() != 0 || k.vlan_tpid() != 0 {
                normalize_key(k, vlan_limit);
            }
        }
        self.stats.packets += n as u64;
        let mut found: [Option<FlowId>; BATCH_SIZE] = [None; BATCH_SIZE];
        let mut hashes = [0u32; BATCH_SIZE];
        let use_emc = self.emc.worth_it(&self.megaflows);
        let timed = self.emc.timing();
        let t0 = if timed { cycles::now() } else { 0 };
        if use_emc {
            for (h, k) in hashes.iter_mut().zip(&self.keys[..n]) {
                *h = key_hash(k, self.megaflows.used_words());
            }
            self.stats.emc_hits += self.emc.lookup_batch(
                &hashes[..n],
                &self.keys[..n],
                &self.megaflows,
                &mut found[..n],
            ) as u64;
        }
        let mut before = [false; BATCH_SIZE];
        for i in 0..n {
            before[i] = found[i].is_some();
        }
        self.megaflows
            .lookup_batch(&self.keys[..n], &mut found[..n]);
        for i in 0..n {
            if let (false, Some(id)) = (before[i], found[i]) {
                self.stats.megaflow_hits += 1;
                if use_emc {
                    self.emc.offer(hashes[i], id, &self.megaflows);
                }
            }
        }
        if timed {
            self.emc.account(cycles::now().wrapping_sub(t0), n);
        }
        self.direct.clear();
        self.batch_installs = 0;
        for (i, f) in found.iter().copied().enumerate().take(n) {
            self.fates[i] = match f {
                Some(id) => Fate::Flow(id),
                None => {
                    let len = batch.packets().get(i).map_or(0, Packet::len);
                    self.miss(r, i, len)
                }
            };
        }
        let now = self.now_ms;
        // Count every cached packet on its flow, and see whether the whole batch goes to one
        // port by single-output flows: then it is handed to that port's tx batch at once.
        let mut uniform = n == batch.len();
        let mut out_port = NOT_SINGLE;
        for (i, pkt) in batch.packets().iter().enumerate().take(n) {
            match self.fates[i] {
                Fate::Flow(id) => {
                    if let Some(h) = self.hot.get_mut(id as usize) {
                        h.packets += 1;
                        h.bytes += pkt.len() as u64;
                        h.used_ms = now;
                        if h.out == NOT_SINGLE || (out_port != NOT_SINGLE && h.out != out_port) {
                            uniform = false;
                        }
                        out_port = h.out;
                    } else {
                        uniform = false;
                    }
                }
                _ => uniform = false,
            }
        }
        if uniform && out_port != NOT_SINGLE {
            if let Some(Some(slot)) = self.tx.get_mut(out_port as usize) {
                if !slot.batch.is_empty() {
                    slot.netdev.send(slot.q, &mut slot.batch);
                }
                std::mem::swap(&mut slot.batch, batch);
                return;
            }
        }
        for (i, pkt) in batch.drain().enumerate() {
            let fate = if i < n {
                self.fates[i]
            } else {
                Fate::Drop(DropReason::FlowDrop)
            };
            let actions: &[DpAction] = match fate {
                Fate::Flow(id) => {
                    // Counted above.
                    let Some(h) = self.hot.get(id as usize) else {
                        self.stats.drops.add(DropReason::FlowDrop, 1);
                        continue;
                    };
                    if h.out != NOT_SINGLE {
                        send(&mut self.tx, h.out, pkt, &mut self.stats);
                        continue;
                    }
                    match self.flows.get(id as usize).and_then(Option::as_ref) {
                        Some(f) => &f.actions,
                        None => {
                            self.stats.drops.add(DropReason::FlowDrop, 1);
                            continue;
                        }
                    }
                }
                Fate::Direct(d) => self.direct.get(d).map_or(&[], |v| v.actions.as_slice()),
                Fate::Drop(reason) => {
                    self.stats.drops.add(reason, 1);
                    continue;
                }
            };
            let nw_proto = self.keys[i.min(BATCH_SIZE - 1)].nw_proto();
            execute(
                pkt,
                actions,
                nw_proto,
                &mut self.tx,
                &self.pool,
                &mut self.stats,
            );
        }
    }

    /// An upcall for packet `i` of the batch received on rx queue `r`, if its port's budget
    /// has a token left and no earlier packet of the batch installed a megaflow covering it.
    fn miss(&mut self, r: usize, i: usize, len: usize) -> Fate {
        // The table changes only here, within a batch: with nothing installed since the
        // batch's lookup, there is nothing new to find.
        if self.batch_installs > 0 {
            if let Some(id) = self.megaflows.lookup(&self.keys[i]) {
                self.stats.megaflow_hits += 1;
                return Fate::Flow(id);
            }
        }
        // At the limit, a translation made earlier in this batch may cover this packet.
        if let Some(d) = self
            .direct
            .iter()
            .position(|d| self.keys[i].masked(&d.mask) == d.masked)
        {
            self.stats.megaflow_limit_hits += 1;
            // The translation credited its own packet; this one is credited here.
            for rule in &self.direct[d].deps.rules {
                rule.credit_many(1, len as u64);
                rule.touch(self.now_ms);
            }
            return Fate::Direct(d);
        }
        if !self.rxqs[r].budget.try_take() {
            return Fate::Drop(DropReason::UpcallLimit);
        }
        let at_limit = self.megaflows.len() >= self.cfg.megaflow_limit;
        self.stats.upcalls += 1;
        let key = self.keys[i];
        let req = UpcallRequest {
            key: &key,
            packet_len: len,
            now_ms: self.now_ms,
            learn: true,
            credit: at_limit,
        };
        let t = match self.dp.upcall().translate(&req) {
            Ok(t) => t,
            Err(UpcallError::Busy) => return Fate::Drop(DropReason::UpcallBusy),
            Err(UpcallError::Failed(_)) => return Fate::Drop(DropReason::UpcallFailed),
        };
        if at_limit {
            self.stats.megaflow_limit_hits += 1;
            self.direct.push(Direct {
                masked: key.masked(&t.mask),
                mask: t.mask,
                actions: t.actions,
                deps: t.deps,
            });
            return Fate::Direct(self.direct.len() - 1);
        }
        let id = self.megaflows.insert(&key, &t.mask);
        self.batch_installs += 1;
        let slot = id as usize;
        if self.flows.len() <= slot {
            self.flows.resize_with(slot + 1, || None);
            self.hot.resize(slot + 1, FlowHot::default());
        }
        self.hot[slot] = FlowHot {
            packets: 0,
            bytes: 0,
            used_ms: self.now_ms,
            out: single_out(&t.actions),
        };
        let f = FlowData {
            actions: t.actions.into_boxed_slice(),
            credited_packets: 0,
            credited_bytes: 0,
            bridge: t.bridge,
            of_in_port: t.of_in_port,
            deps: t.deps,
        };
        self.flow_heap_bytes += heap_bytes(&f);
        self.flows[slot] = Some(f);
        Fate::Flow(id)
    }

    /// Brings the megaflows up to the datapath's generation (and MAC epoch); see the module
    /// docs. Leaves the generation unacknowledged if the tables are busy (retried next
    /// iteration).
    pub fn revalidate(&mut self) {
        let gen = self.dp.generation();
        let changes = if gen == self.seen_gen {
            Some(Vec::new())
        } else {
            self.dp.changes_since(self.seen_gen)
        };
        let mac = self.dp.upcall().mac_epoch();
        let mac_changed = mac != self.mac_epoch;
        self.stats.revalidations += 1;
        // One projection cache per change: each caches its own groups' values.
        let n_changes = changes.as_ref().map_or(0, Vec::len);
        let mut projs: Vec<Projections> = (0..n_changes).map(|_| Projections::default()).collect();
        // First the megaflows the changes can concern, each key written into one buffer and
        // its mask read in place (a key is 360 bytes: copies of every megaflow's key and mask
        // were most of a revalidation's cost); then their retranslation.
        let mut stale: Vec<FlowId> = Vec::new();
        let mut kbuf = FlowKey::default();
        for id in self.megaflows.ids() {
            let Some(mmask) = self.megaflows.megaflow_into(id, &mut kbuf) else {
                continue;
            };
            let Some(f) = self.flows.get(id as usize).and_then(Option::as_ref) else {
                continue;
            };
            // Added rules match OpenFlow port numbers (only that change reads the key).
            kbuf.set_in_port(u32::from(f.of_in_port));
            let need = (mac_changed && f.deps.used_normal)
                || match &changes {
                    None => true,
                    Some(cs) => cs
                        .iter()
                        .zip(projs.iter_mut())
                        .any(|(c, proj)| affects(c, f, &kbuf, mmask, proj)),
                };
            if need {
                stale.push(id);
            }
        }
        for id in stale {
            let Some((mkey, mmask)) = self.megaflows.megaflow(id) else {
                continue;
            };
            let Some(f) = self.flows.get(id as usize).and_then(Option::as_ref) else {
                continue;
            };
            self.stats.retranslated += 1;
            let req = UpcallRequest {
                key: &mkey,
                packet_len: 0,
                now_ms: self.now_ms,
                learn: false,
                credit: false,
            };
            match self.dp.upcall().translate(&req) {
                Err(UpcallError::Busy) => return,
                Err(UpcallError::Failed(_)) => {
                    self.remove_flow(id);
                    self.stats.revalidated_out += 1;
                }
                Ok(t) => {
                    let narrower = t
                        .mask
                        .words
                        .iter()
                        .zip(mmask.words.iter())
                        .all(|(n, o)| n & !o == 0);
                    if narrower && *t.actions == *f.actions {
                        if let Some(f) = self.flows.get_mut(id as usize).and_then(Option::as_mut) {
                            f.credit(&self.hot[id as usize], self.now_ms);
                            let old = heap_bytes(f);
                            f.deps = t.deps;
                            self.flow_heap_bytes =
                                self.flow_heap_bytes.saturating_sub(old) + heap_bytes(f);
                        }
                    } else {
                        self.remove_flow(id);
                        self.stats.revalidated_out += 1;
                    }
                }
            }
        }
        self.seen_gen = gen;
        self.mac_epoch = mac;
        self.shared.seen_gen.store(gen, Ordering::Release);
    }
}

/// Whether `change` can make flow `f` (megaflow `key`/`mask`, its `in_port` set to the flow's
/// OpenFlow port number) stale.
fn affects(
    change: &Change,
    f: &FlowData,
    key: &FlowKey,
    mask: &FlowKey,
    proj: &mut Projections,
) -> bool {
    if !f.deps.lookups_on_input {
        return true;
    }
    match change {
        Change::Everything => true,
        Change::Tables { bridge, tables } => {
            **bridge == *f.bridge
                && tables
                    .iter()
                    .zip(f.deps.tables.iter())
                    .any(|(a, b)| a & b != 0)
        }
        Change::Added {
            bridge,
            table,
            rules,
        } => {
            if **bridge != *f.bridge || !f.deps.used_table(*table) {
                return false;
            }
            // `key` has the OpenFlow port number in `in_port` already, as the rules match.
            rules.overlaps(key, mask, proj)
        }
    }
}

/// Executes `actions` on `pkt`, queueing outputs on the tx slots.
#[inline]
fn execute(
    mut pkt: Packet,
    actions: &[DpAction],
    nw_proto: u8,
    tx: &mut [Option<TxSlot>],
    pool: &Pool,
    stats: &mut PmdStats,
) {
    // The common case: one output.
    if let [DpAction::Output(p)] = actions {
        send(tx, *p, pkt, stats);
        return;
    }
    let Some(last_out) = actions
        .iter()
        .rposition(|a| matches!(a, DpAction::Output(_)))
    else {
        let reason = if actions.iter().any(|a| matches!(a, DpAction::Userspace(_))) {
            stats.userspace += 1;
            DropReason::Userspace
        } else if actions.iter().any(|a| matches!(a, DpAction::Recirc(_))) {
            DropReason::Unsupported
        } else {
            DropReason::FlowDrop
        };
        stats.drops.add(reason, 1);
        return;
    };
    for a in &actions[..last_out] {
        let ok = match a {
            DpAction::Output(p) => {
                match pool.alloc_copy(pkt.data()) {
                    Ok(mut c) => {
                        *c.meta_mut() = *pkt.meta();
                        send(tx, *p, c, stats);
                    }
                    Err(_) => stats.drops.add(DropReason::NoBuffer, 1),
                }
                true
            }
            DpAction::PushVlan { tpid, tci } => exec::push_vlan(&mut pkt, *tpid, *tci),
            DpAction::PopVlan => exec::pop_vlan(&mut pkt),
            DpAction::Set(fs) => fs.iter().all(|f| exec::set_field(&mut pkt, f, nw_proto)),
            DpAction::Userspace(_) => {
                stats.userspace += 1;
                true
            }
            DpAction::Recirc(_) => {
                stats.drops.add(DropReason::Unsupported, 1);
                return;
            }
        };
        if !ok {
            stats.drops.add(DropReason::HeaderRewrite, 1);
            return;
        }
    }
    if let DpAction::Output(p) = actions[last_out] {
        send(tx, p, pkt, stats);
    }
}

#[inline(always)]
fn send(tx: &mut [Option<TxSlot>], port: u32, pkt: Packet, stats: &mut PmdStats) {
    match tx.get_mut(port as usize) {
        Some(Some(slot)) => {
            if slot.batch.is_full() {
                slot.netdev.send(slot.q, &mut slot.batch);
            }
            // The batch has room now.
            let _ = slot.batch.push(pkt);
        }
        _ => stats.drops.add(DropReason::NoPort, 1),
    }
}

/// PMD threads of one datapath.
#[derive(Debug)]
pub struct PmdThreads {
    stop: Arc<AtomicBool>,
    handles: Vec<std::thread::JoinHandle<PmdStats>>,
    pinned: Vec<Option<usize>>,
}

/// Highest core number plus one that a CPU set holds (glibc's `CPU_SETSIZE`).
const CPU_SETSIZE: usize = 1024;

/// Pins the calling thread to `core`; the core it is pinned to, or `None` (a core the process
/// may not run on, or one that does not exist: the kernel refuses it).
///
/// The kernel decides, not the spawning thread's affinity mask: that thread may itself be
/// pinned elsewhere (a benchmark's inserting thread on the other core), and the PMD must still
/// get its own core. Only a number past the CPU set is refused here, since `core_affinity`
/// indexes a fixed-size set with it.
fn pin(core: usize) -> Option<usize> {
    (core < CPU_SETSIZE && core_affinity::set_for_current(core_affinity::CoreId { id: core }))
        .then_some(core)
}

impl PmdThreads {
    /// Starts `n` PMD threads; thread `i` is pinned to `cores[i]` when given. Pinning is best
    /// effort: a core the process may not run on (or one that does not exist) leaves the
    /// thread unpinned, which [`PmdThreads::pinned`] and [`PmdStats::pinned`] show.
    /// Returns once every thread polls, so a flow-table change made after this waits for all of
    /// them.
    pub fn spawn(dp: &Arc<Datapath>, n: usize, cores: &[usize], cfg: &PmdConfig) -> PmdThreads {
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let handles = (0..n)
            .map(|i| {
                let dp = dp.clone();
                let cfg = cfg.clone();
                let stop = stop.clone();
                let core = cores.get(i).copied();
                let ready = ready_tx.clone();
                std::thread::Builder::new()
                    .name(format!("pmd{i}"))
                    .spawn(move || {
                        let pinned = core.and_then(pin);
                        let mut pmd = Pmd::new(dp.clone(), i, n, cfg);
                        pmd.stats.pinned = pinned;
                        pmd.shared.running.store(true, Ordering::Release);
                        let _ = ready.send((i, pinned));
                        pmd.run(&stop);
                        dp.unregister_pmd(&pmd.shared);
                        pmd.stats()
                    })
            })
            .filter_map(Result::ok)
            .collect::<Vec<_>>();
        let mut pinned = vec![None; n];
        for _ in 0..handles.len() {
            if let Ok((i, p)) = ready_rx.recv() {
                if let Some(slot) = pinned.get_mut(i) {
                    *slot = p;
                }
            }
        }
        PmdThreads {
            stop,
            handles,
            pinned,
        }
    }

    /// The core each thread is pinned to (by thread index), `None` where it was not asked to
    /// pin or the pin failed.
    pub fn pinned(&self) -> &[Option<usize>] {
        &self.pinned
    }

    /// Stops the threads and returns their final counters.
    pub fn stop(self) -> Vec<PmdStats> {
        self.stop.store(true, Ordering::Release);
        self.handles
            .into_iter()
            .filter_map(|h| h.join().ok())
            .collect()
    }
}
