//! The datapath as the control plane sees it: ports, the translator, the generation of the
//! flow tables, and the PMD threads' published state.
//!
//! # Flow-table changes and their acknowledgement
//!
//! Whoever changes what translations depend on (the flow tables, the ports) calls
//! [`Datapath::publish`] while the change is already visible to translations, which bumps the
//! generation and records a [`Change`]. Each PMD thread compares the generation with the one
//! it has revalidated against at the top of every poll iteration (one atomic load) and, when
//! it moved, revalidates its megaflows against the recorded changes before it forwards
//! another packet. [`Datapath::wait_ack`] returns once every running PMD thread has done so:
//! after that, no packet is forwarded by a decision the change made stale. A PMD driven by
//! hand ([`crate::pmd::Pmd::run_once`], tests) revalidates at the start of its next call.
//! A running PMD that does not acknowledge within [`Datapath::ack_timeout`] (stuck, or
//! descheduled for that long) makes `wait_ack` return an [`AckTimeout`]: the change is in
//! force for translations, but that PMD may still forward by stale megaflows.
//!
//! The change log keeps the last [`MAX_CHANGES`] changes; a PMD further behind revalidates
//! everything.
//!
//! # Upcall budgets
//!
//! The datapath keeps one [`UpcallBudget`] per port ([`Datapath::upcall_budget`]), shared by
//! the PMD threads that poll the port's rx queues, so the upcall rate is per ingress port
//! however its queues are spread over threads.
//!
//! # Clock
//!
//! [`Datapath::now_ms`] is the clock of idle expiry and budget refills: real time by default,
//! or a clock that only moves when told ([`Datapath::with_manual_clock`]), so that tests of
//! expiry and refills neither sleep nor depend on how fast they run.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use crate::netdev::Netdev;
use crate::pmd::PmdStats;
use crate::upcall::{Change, Upcall, UpcallBudget};

/// Changes kept for PMD threads that are behind.
pub const MAX_CHANGES: usize = 64;

/// How long [`Datapath::wait_ack`] waits for the PMD threads before giving up on them, unless
/// [`Datapath::set_ack_timeout`] says otherwise.
pub const ACK_TIMEOUT: Duration = Duration::from_secs(10);

/// Running PMD threads did not do what they were asked (revalidate, or credit their
/// statistics) within the acknowledgement timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{pending} PMD thread(s) did not acknowledge within {timeout:?}")]
pub struct AckTimeout {
    /// The running PMD threads that had not acknowledged when the time ran out.
    pub pending: usize,
    /// How long they were waited for.
    pub timeout: Duration,
}

/// A port of the datapath.
#[derive(Debug, Clone)]
pub struct DpPort {
    /// Datapath port number (what `in_port` and `Output` say).
    pub dp_port: u32,
    /// Its I/O.
    pub netdev: Arc<dyn Netdev>,
    /// VLAN tags parsed into the key (the bridge's `vlan-limit`, 0 = no limit).
    pub vlan_limit: u32,
}

/// What a PMD thread publishes for the others.
#[derive(Debug, Default)]
pub struct PmdShared {
    /// The generation it has revalidated against.
    pub seen_gen: AtomicU64,
    /// The statistics request it has served.
    pub stats_seen: AtomicU64,
    /// Polling in its own thread (only those are waited for).
    pub running: AtomicBool,
    /// Its counters as of its last housekeeping.
    pub stats: Mutex<PmdStats>,
}

/// Where [`Datapath::now_ms`] reads the time.
#[derive(Debug)]
enum Clock {
    /// Milliseconds since this instant (when the datapath was made).
    Real(Instant),
    /// Milliseconds as set by [`Datapath::advance_ms`].
    Manual(AtomicU64),
}

/// One datapath: ports, translator, generation.
#[derive(Debug)]
pub struct Datapath {
    upcall: Arc<dyn Upcall>,
    ports: RwLock<Vec<DpPort>>,
    port_gen: AtomicU64,
    gen: AtomicU64,
    changes: Mutex<VecDeque<(u64, Arc<Change>)>>,
    pmds: Mutex<Vec<Arc<PmdShared>>>,
    stats_req: AtomicU64,
    /// The upcall budget of each port that a PMD polls, by datapath port number.
    budgets: Mutex<HashMap<u32, Arc<UpcallBudget>>>,
    clock: Clock,
    /// How long acknowledgements are waited for, in milliseconds.
    ack_timeout_ms: AtomicU64,
}

fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Datapath {
    /// A datapath without ports that translates with `upcall`, on the real clock.
    pub fn new(upcall: Arc<dyn Upcall>) -> Arc<Datapath> {
        Datapath::with_clock(upcall, Clock::Real(Instant::now()))
    }

    /// A datapath whose clock stands at 0 ms and moves only by [`Datapath::advance_ms`]: idle
    /// expiry and upcall-budget refills happen exactly when a test says time has passed.
    pub fn with_manual_clock(upcall: Arc<dyn Upcall>) -> Arc<Datapath> {
        Datapath::with_clock(upcall, Clock::Manual(AtomicU64::new(0)))
    }

    fn with_clock(upcall: Arc<dyn Upcall>, clock: Clock) -> Arc<Datapath> {
        Arc::new(Datapath {
            upcall,
            ports: RwLock::new(Vec::new()),
            port_gen: AtomicU64::new(0),
            gen: AtomicU64::new(0),
            changes: Mutex::new(VecDeque::new()),
            pmds: Mutex::new(Vec::new()),
            stats_req: AtomicU64::new(0),
            budgets: Mutex::new(HashMap::new()),
            clock,
            ack_timeout_ms: AtomicU64::new(duration_ms(ACK_TIMEOUT)),
        })
    }

    /// The translator.
    pub fn upcall(&self) -> &Arc<dyn Upcall> {
        &self.upcall
    }

    /// Milliseconds since the datapath was made (or as set, on a manual clock).
    pub fn now_ms(&self) -> u64 {
        match &self.clock {
            Clock::Real(epoch) => duration_ms(epoch.elapsed()),
            Clock::Manual(ms) => ms.load(Ordering::Acquire),
        }
    }

    /// Moves a manual clock `ms` milliseconds forward; false (and nothing done) on the real
    /// clock. PMDs see the new time at their next housekeeping.
    pub fn advance_ms(&self, ms: u64) -> bool {
        match &self.clock {
            Clock::Real(_) => false,
            Clock::Manual(now) => {
                now.fetch_add(ms, Ordering::AcqRel);
                true
            }
        }
    }

    /// The upcall budget of port `dp_port`, `rate` upcalls per second in bursts of `burst`:
    /// one per port, shared by every PMD thread that polls one of its rx queues (they share
    /// one configuration, [`crate::pmd::PmdThreads::spawn`]). Asking with another rate or
    /// burst (PMD threads started again with a new configuration) replaces it with a full one.
    pub fn upcall_budget(&self, dp_port: u32, rate: u32, burst: u32) -> Arc<UpcallBudget> {
        let mut budgets = lock(&self.budgets);
        match budgets.get(&dp_port) {
            Some(b) if b.rate() == rate && b.burst() == burst => b.clone(),
            _ => {
                let b = Arc::new(UpcallBudget::new(rate, burst, self.now_ms()));
                budgets.insert(dp_port, b.clone());
                b
            }
        }
    }

    /// Adds (or replaces) a port. PMD threads pick it up at their next housekeeping; rx
    /// queues are assigned when a PMD is made.
    pub fn add_port(&self, port: DpPort) {
        let mut ports = self.ports.write().unwrap_or_else(PoisonError::into_inner);
        ports.retain(|p| p.dp_port != port.dp_port);
        ports.push(port);
        ports.sort_by_key(|p| p.dp_port);
        self.port_gen.fetch_add(1, Ordering::Release);
    }

    /// Removes a port; false if there was none. Megaflows that output to it drop
    /// (`drop_no_port`) until they are revalidated.
    pub fn remove_port(&self, dp_port: u32) -> bool {
        let mut ports = self.ports.write().unwrap_or_else(PoisonError::into_inner);
        let before = ports.len();
        ports.retain(|p| p.dp_port != dp_port);
        lock(&self.budgets).remove(&dp_port);
        self.port_gen.fetch_add(1, Ordering::Release);
        before != ports.len()
    }

    /// The ports, sorted by number.
    pub fn ports(&self) -> Vec<DpPort> {
        self.ports
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Changes whenever a port is added or removed.
    pub fn port_generation(&self) -> u64 {
        self.port_gen.load(Ordering::Acquire)
    }

    /// The current flow-table generation.
    #[inline]
    pub fn generation(&self) -> u64 {
        self.gen.load(Ordering::Acquire)
    }

    /// Records a change that translations already see, and returns its generation (pass it
    /// to [`Datapath::wait_ack`]).
    pub fn publish(&self, change: Change) -> u64 {
        let mut log = lock(&self.changes);
        let g = self.gen.load(Ordering::Relaxed) + 1;
        log.push_back((g, Arc::new(change)));
        while log.len() > MAX_CHANGES {
            log.pop_front();
        }
        self.gen.store(g, Ordering::Release);
        g
    }

    /// The changes after generation `seen`, oldest first; `None` if some of them are no
    /// longer kept (then everything must be revalidated).
    pub fn changes_since(&self, seen: u64) -> Option<Vec<Arc<Change>>> {
        let log = lock(&self.changes);
        let now = self.gen.load(Ordering::Acquire);
        if now == seen {
            return Some(Vec::new());
        }
        let first = log.front().map(|(g, _)| *g)?;
        if first > seen + 1 {
            return None;
        }
        Some(
            log.iter()
                .filter(|(g, _)| *g > seen)
                .map(|(_, c)| c.clone())
                .collect(),
        )
    }

    /// Registers a PMD's shared state.
    pub(crate) fn register_pmd(&self, shared: Arc<PmdShared>) {
        lock(&self.pmds).push(shared);
    }

    /// Forgets a PMD that stopped.
    pub(crate) fn unregister_pmd(&self, shared: &Arc<PmdShared>) {
        lock(&self.pmds).retain(|p| !Arc::ptr_eq(p, shared));
    }

    /// How long [`Datapath::wait_ack`] and [`Datapath::sync_stats`] wait for the PMD threads
    /// ([`ACK_TIMEOUT`] unless set).
    pub fn ack_timeout(&self) -> Duration {
        Duration::from_millis(self.ack_timeout_ms.load(Ordering::Relaxed))
    }

    /// Sets how long [`Datapath::wait_ack`] and [`Datapath::sync_stats`] wait for the PMD
    /// threads (whole milliseconds).
    pub fn set_ack_timeout(&self, timeout: Duration) {
        self.ack_timeout_ms
            .store(duration_ms(timeout), Ordering::Relaxed);
    }

    /// Waits until every running PMD thread has revalidated against generation `gen`; an
    /// error if some did not within [`Datapath::ack_timeout`] (calling again waits again).
    pub fn wait_ack(&self, gen: u64) -> Result<(), AckTimeout> {
        self.wait_for_pmds(|p| p.seen_gen.load(Ordering::Acquire) >= gen)
    }

    /// Asks every PMD to credit its megaflows' statistics to the rules that made them, and
    /// waits until the running ones did (a PMD driven by hand does it at its next
    /// housekeeping); an error if some did not within [`Datapath::ack_timeout`].
    pub fn sync_stats(&self) -> Result<(), AckTimeout> {
        let req = self.stats_req.fetch_add(1, Ordering::AcqRel) + 1;
        self.wait_for_pmds(|p| p.stats_seen.load(Ordering::Acquire) >= req)
    }

    /// Waits until `done` holds for every running PMD thread (or it stops), for at most
    /// [`Datapath::ack_timeout`].
    fn wait_for_pmds(&self, done: impl Fn(&PmdShared) -> bool) -> Result<(), AckTimeout> {
        let pmds: Vec<Arc<PmdShared>> = lock(&self.pmds).clone();
        let timeout = self.ack_timeout();
        // A timeout too long to add to the clock waits for as long as it takes.
        let deadline = Instant::now().checked_add(timeout);
        let waiting = |p: &PmdShared| p.running.load(Ordering::Acquire) && !done(p);
        for p in &pmds {
            while waiting(p) {
                if deadline.is_some_and(|d| Instant::now() > d) {
                    let pending = pmds.iter().filter(|p| waiting(p)).count();
                    return Err(AckTimeout { pending, timeout });
                }
                std::thread::yield_now();
            }
        }
        Ok(())
    }

    /// The statistics request number (PMDs compare it with the one they served).
    pub(crate) fn stats_request(&self) -> u64 {
        self.stats_req.load(Ordering::Acquire)
    }

    /// Every registered PMD's counters as of its last housekeeping.
    pub fn pmd_stats(&self) -> Vec<PmdStats> {
        lock(&self.pmds)
            .iter()
            .map(|p| lock(&p.stats).clone())
            .collect()
    }
}
