//! The OpenFlow pipeline behind the datapath: [`SwitchUpcall`] translates misses with a
//! [`Switch`], and [`OfDatapath`] changes the switch's flow tables through the datapath, so
//! that a change is acknowledged only once no PMD thread forwards by a decision it made stale.
//!
//! The switch sits behind a read-write lock. Translations take it with `try_read`: while a
//! bundle of flow_mods is being applied (write lock), a miss is dropped and counted
//! (`drop_upcall_busy`) rather than waiting, because the datapath never blocks on the control
//! plane; established flows hit the caches and do not notice.
//!
//! A change returns once every running PMD thread has revalidated against it. If one has not
//! within [`Datapath::ack_timeout`], the change is still applied (translations see it) but the
//! call returns [`OfDatapathError::Unacknowledged`]: that thread may forward by stale megaflows
//! until it catches up, which [`Datapath::wait_ack`] with the error's generation waits for.
//!
//! # Example
//!
//! ```
//! use datapath::ofproto::OfDatapath;
//! use pipeline::switch::Switch;
//!
//! let mut sw = Switch::new();
//! sw.vsctl("add-br br0 -- add-port br0 p1 -- add-port br0 p2").expect("valid");
//! let of = OfDatapath::new(sw);
//! of.add_flows_text("br0", &["in_port=p1,actions=output:p2"]).expect("valid");
//! assert_eq!(of.dump_flows("br0").expect("bridge").len(), 1);
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, TryLockError};
use std::time::Duration;

use openflow::ofctl::flow::FlowCommand;
use pipeline::switch::{DumpedFlow, FlowMod, FlowModCommand, FlowModOutcome, Switch, SwitchError};
use pipeline::xlate::XlateOptions;

use crate::dpif::{AckTimeout, Datapath};
use crate::upcall::{AddedRules, Change, Translation, Upcall, UpcallError, UpcallRequest};

/// [`Upcall`] by a [`Switch`]'s translation.
#[derive(Debug)]
pub struct SwitchUpcall {
    switch: Arc<RwLock<Switch>>,
    /// The MAC epoch as last read (served while the switch is busy).
    mac_epoch: AtomicU64,
}

impl SwitchUpcall {
    /// Translates with `switch`.
    pub fn new(switch: Arc<RwLock<Switch>>) -> SwitchUpcall {
        SwitchUpcall {
            switch,
            mac_epoch: AtomicU64::new(0),
        }
    }

    fn try_read(&self) -> Result<RwLockReadGuard<'_, Switch>, UpcallError> {
        match self.switch.try_read() {
            Ok(g) => Ok(g),
            Err(TryLockError::WouldBlock) => Err(UpcallError::Busy),
            Err(TryLockError::Poisoned(p)) => Ok(p.into_inner()),
        }
    }
}

impl Upcall for SwitchUpcall {
    fn translate(&self, req: &UpcallRequest<'_>) -> Result<Translation, UpcallError> {
        let sw = self.try_read()?;
        let opts = XlateOptions {
            credit_bytes: req.credit.then_some(req.packet_len as u64),
            now_ms: req.now_ms,
            learn: req.learn,
        };
        let up = sw
            .upcall(req.key, opts)
            .map_err(|e| UpcallError::Failed(e.to_string()))?;
        let of_in_port = sw
            .layout()
            .port_by_dp(req.key.in_port())
            .map_or(0, |p| p.ofport);
        Ok(Translation {
            actions: up.output.actions,
            mask: up.output.wc,
            bridge: Arc::from(up.bridge.as_str()),
            of_in_port,
            deps: up.output.deps,
        })
    }

    fn mac_epoch(&self) -> u64 {
        match self.try_read() {
            Ok(sw) => {
                let e = sw.counters.mac_epoch();
                self.mac_epoch.store(e, Ordering::Relaxed);
                e
            }
            Err(_) => self.mac_epoch.load(Ordering::Relaxed),
        }
    }
}

/// Why a change through an [`OfDatapath`] failed or is not known to be in force everywhere.
#[derive(Debug, thiserror::Error)]
pub enum OfDatapathError {
    /// The switch refused the change.
    #[error(transparent)]
    Switch(#[from] SwitchError),
    /// The change is applied to the flow tables, but some running PMD thread did not
    /// revalidate against it in time: until it does, it may forward packets by decisions the
    /// change made stale. [`Datapath::wait_ack`] with `generation` waits for it again.
    #[error(
        "the change (generation {generation}) is applied, but {} PMD thread(s) did not \
         revalidate against it within {:?} and may forward by stale megaflows until they do \
         (a stuck PMD thread?)",
        .timeout.pending,
        .timeout.timeout
    )]
    Unacknowledged {
        /// The change's generation (for [`Datapath::wait_ack`]).
        generation: u64,
        /// Which wait ran out.
        timeout: AckTimeout,
    },
}

impl OfDatapathError {
    /// How long the PMD threads were waited for, if that is what failed.
    pub fn waited(&self) -> Option<Duration> {
        match self {
            OfDatapathError::Switch(_) => None,
            OfDatapathError::Unacknowledged { timeout, .. } => Some(timeout.timeout),
        }
    }
}

/// A switch and its datapath: flow-table changes are published to the PMD threads and
/// acknowledged after they revalidated.
#[derive(Debug, Clone)]
pub struct OfDatapath {
    switch: Arc<RwLock<Switch>>,
    dp: Arc<Datapath>,
}

/// The change a bundle of flow_mods makes, as narrowly as it can be told: only adds to one
/// table give [`Change::Added`] (revalidate overlapping megaflows), anything else the tables
/// it touches.
pub fn change_of(bridge: &str, mods: &[FlowMod]) -> Change {
    let bridge: Arc<str> = Arc::from(bridge);
    let mut tables = [0u64; 4];
    let mut set = |t: u8| tables[usize::from(t / 64)] |= 1 << (t % 64);
    let mut only_adds_to: Option<Option<u8>> = None;
    for fm in mods {
        match fm.command {
            FlowModCommand::Add => {
                let t = fm.entry.table_id();
                set(t);
                only_adds_to = match only_adds_to {
                    None => Some(Some(t)),
                    Some(Some(prev)) if prev == t => Some(Some(t)),
                    _ => Some(None),
                };
            }
            FlowModCommand::Modify { .. } | FlowModCommand::Delete { .. } => {
                only_adds_to = Some(None);
                match fm.entry.table {
                    Some(t) if t != 255 => set(t),
                    _ => (0..=254u8).for_each(&mut set),
                }
                if matches!(fm.command, FlowModCommand::Modify { .. }) && fm.modify_may_add {
                    set(fm.entry.table_id());
                }
            }
        }
    }
    match only_adds_to {
        Some(Some(table)) => Change::Added {
            bridge,
            table,
            rules: Arc::new(AddedRules::new(mods.iter().map(|m| &m.entry.flow_match))),
        },
        _ => Change::Tables { bridge, tables },
    }
}

/// `change`, widened to every lookup of the tables whose equal-priority rules the bundle
/// reordered (then an added rule changes decisions for packets it does not match itself, which
/// [`Change::Added`]'s overlap test cannot see).
fn with_reordered(change: Change, out: &FlowModOutcome) -> Change {
    if out.reordered_tables == [0; 4] {
        return change;
    }
    let mut tables = out.reordered_tables;
    let bridge = match change {
        Change::Added { bridge, table, .. } => {
            tables[usize::from(table / 64)] |= 1 << (table % 64);
            bridge
        }
        Change::Tables {
            bridge,
            tables: more,
        } => {
            for (t, m) in tables.iter_mut().zip(more) {
                *t |= m;
            }
            bridge
        }
        Change::Everything => return Change::Everything,
    };
    Change::Tables { bridge, tables }
}

impl OfDatapath {
    /// A datapath translating with `switch` (no ports yet: see [`Datapath::add_port`]).
    pub fn new(switch: Switch) -> OfDatapath {
        let switch = Arc::new(RwLock::new(switch));
        let dp = Datapath::new(Arc::new(SwitchUpcall::new(switch.clone())));
        OfDatapath { switch, dp }
    }

    /// The datapath.
    pub fn datapath(&self) -> &Arc<Datapath> {
        &self.dp
    }

    /// The switch, for reading (trace, dumps, layout).
    pub fn switch(&self) -> RwLockReadGuard<'_, Switch> {
        self.switch.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Applies `mods` to `bridge` as one bundle and returns once every running PMD thread
    /// has revalidated against it; [`OfDatapathError::Unacknowledged`] if one did not within
    /// [`Datapath::ack_timeout`] (the bundle is applied all the same).
    pub fn flow_mods(
        &self,
        bridge: &str,
        mods: Vec<FlowMod>,
    ) -> Result<FlowModOutcome, OfDatapathError> {
        let change = change_of(bridge, &mods);
        let (out, gen) = {
            let mut sw = self.switch.write().unwrap_or_else(PoisonError::into_inner);
            let out = sw.flow_mods(bridge, mods)?;
            let gen = self.dp.publish(with_reordered(change, &out));
            (out, gen)
        };
        self.ack(gen)?;
        Ok(out)
    }

    /// Waits for the PMD threads to revalidate against generation `gen`.
    fn ack(&self, gen: u64) -> Result<(), OfDatapathError> {
        self.dp
            .wait_ack(gen)
            .map_err(|timeout| OfDatapathError::Unacknowledged {
                generation: gen,
                timeout,
            })
    }

    /// [`Switch::settle`] on `bridge` (no flow-table change: nothing to revalidate).
    pub fn settle(&self, bridge: &str) -> Result<(), SwitchError> {
        self.switch
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .settle(bridge)
    }

    /// [`Switch::compile_tables`] on `bridge`: lookups give the same rules, so the
    /// megaflows stay valid and nothing is revalidated. Returns the tables compiled.
    pub fn compile_tables(&self, bridge: &str) -> Result<Vec<u8>, SwitchError> {
        self.switch
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .compile_tables(bridge)
    }

    /// `ovs-ofctl add-flows` through the datapath.
    pub fn add_flows_text(
        &self,
        bridge: &str,
        flows: &[&str],
    ) -> Result<FlowModOutcome, OfDatapathError> {
        let mods = self
            .switch()
            .parse_flow_mods(bridge, flows, "", FlowCommand::Add)?;
        self.flow_mods(bridge, mods)
    }

    /// `ovs-ofctl del-flows BRIDGE [MATCH]` through the datapath.
    pub fn del_flows_text(
        &self,
        bridge: &str,
        flow: &str,
    ) -> Result<FlowModOutcome, OfDatapathError> {
        let mods = self
            .switch()
            .parse_flow_mods(bridge, &[flow], "", FlowCommand::Delete)?;
        self.flow_mods(bridge, mods)
    }

    /// Runs an `ovs-vsctl` command line on the switch; every megaflow is revalidated
    /// ([`OfDatapathError::Unacknowledged`] as for [`OfDatapath::flow_mods`]).
    pub fn vsctl(&self, args: &str) -> Result<(), OfDatapathError> {
        let gen = {
            let mut sw = self.switch.write().unwrap_or_else(PoisonError::into_inner);
            sw.vsctl(args)?;
            self.dp.publish(Change::Everything)
        };
        self.ack(gen)
    }

    /// Every rule of `bridge` with its counters, after the PMD threads credited their
    /// megaflows' statistics. A PMD thread that does not answer within
    /// [`Datapath::ack_timeout`] is not waited for longer: the counters then lack the packets
    /// its megaflows forwarded since its last housekeeping (they are credited later, never
    /// lost), which is better than no dump.
    pub fn dump_flows(&self, bridge: &str) -> Result<Vec<DumpedFlow>, SwitchError> {
        // A late PMD's counts arrive with a later dump (see above).
        let _ = self.dp.sync_stats();
        self.switch().dump_flows(bridge)
    }
}
