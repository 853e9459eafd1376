//! The MAC learning table that NORMAL uses: which port a (VLAN, Ethernet address) was last
//! seen on, with aging, a size limit, static entries (`fdb/add`), and OVS's gratuitous-ARP
//! lock.
//!
//! Time is injected: every call takes `now` in seconds from any fixed origin, so tests and
//! simulations drive the clock themselves (no wall-clock reads here).
//!
//! Semantics follow OVS's `lib/mac-learning.c`:
//! - an entry idle longer than the aging time is gone (lookups ignore it; [`MacTable::expire`]
//!   removes it);
//! - a static entry never ages, and learning never moves it;
//! - when the table is full, learning a new address evicts the least recently used dynamic entry (a
//!   full table of static entries refuses new addresses);
//! - an address learned from a gratuitous ARP is locked to its port for [`GRAT_ARP_LOCK_SECS`]:
//!   during that time, a non-gratuitous-ARP packet from another port does not move it (this keeps a
//!   bond's reflected broadcasts from moving a VM).
//!
//! # Example
//! ```
//! use pipeline::mac_learning::{Learned, MacTable};
//! let mut t = MacTable::new(300, 2048);
//! assert_eq!(t.learn(0, 0x5054_0000_0005, 1, 10, false), Learned::New);
//! assert_eq!(t.lookup(0, 0x5054_0000_0005, 20), Some(1));
//! assert_eq!(t.learn(0, 0x5054_0000_0005, 2, 30, false), Learned::Moved { from: 1 });
//! assert_eq!(t.lookup(0, 0x5054_0000_0005, 400), None); // aged out
//! ```

use std::collections::HashMap;

/// How long an address learned from a gratuitous ARP is locked to its port (OVS: 5 s).
pub const GRAT_ARP_LOCK_SECS: u64 = 5;

/// What [`MacTable::learn`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Learned {
    /// A new entry.
    New,
    /// The entry existed on this port; its age was refreshed.
    Refreshed,
    /// The entry moved from another port.
    Moved {
        /// The previous port.
        from: u16,
    },
    /// Nothing changed: a static entry, or a gratuitous-ARP lock.
    Kept,
    /// The table is full of static entries.
    TableFull,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    port: u16,
    last_used: u64,
    is_static: bool,
    grat_arp_lock_until: u64,
}

/// A MAC learning table.
#[derive(Debug, Clone)]
pub struct MacTable {
    entries: HashMap<(u16, u64), Entry>,
    aging_secs: u64,
    max_entries: usize,
}

impl MacTable {
    /// A table whose entries age out after `aging_secs` and that holds at most
    /// `max_entries` addresses.
    pub fn new(aging_secs: u32, max_entries: u32) -> Self {
        MacTable {
            entries: HashMap::new(),
            aging_secs: u64::from(aging_secs),
            max_entries: usize::try_from(max_entries).unwrap_or(usize::MAX).max(1),
        }
    }

    fn live(&self, e: &Entry, now: u64) -> bool {
        e.is_static || now.saturating_sub(e.last_used) <= self.aging_secs
    }

    /// The port `mac` was last seen on in `vlan`, if the entry is live.
    pub fn lookup(&self, vlan: u16, mac: u64, now: u64) -> Option<u16> {
        self.entries
            .get(&(vlan, mac))
            .filter(|e| self.live(e, now))
            .map(|e| e.port)
    }

    /// Records that `mac` was seen on `port` in `vlan` at `now`. `grat_arp` says whether the
    /// packet was a gratuitous ARP (which locks the entry for [`GRAT_ARP_LOCK_SECS`]).
    pub fn learn(&mut self, vlan: u16, mac: u64, port: u16, now: u64, grat_arp: bool) -> Learned {
        let aging = self.aging_secs;
        if let Some(e) = self.entries.get_mut(&(vlan, mac)) {
            let live = e.is_static || now.saturating_sub(e.last_used) <= aging;
            if e.is_static {
                return Learned::Kept;
            }
            if live && e.port != port && !grat_arp && now < e.grat_arp_lock_until {
                return Learned::Kept;
            }
            let result = if !live {
                Learned::New
            } else if e.port == port {
                Learned::Refreshed
            } else {
                Learned::Moved { from: e.port }
            };
            e.port = port;
            e.last_used = now;
            if grat_arp {
                e.grat_arp_lock_until = now + GRAT_ARP_LOCK_SECS;
            }
            return result;
        }
        if self.entries.len() >= self.max_entries {
            self.expire(now);
        }
        if self.entries.len() >= self.max_entries && !self.evict_lru() {
            return Learned::TableFull;
        }
        let lock = if grat_arp {
            now + GRAT_ARP_LOCK_SECS
        } else {
            0
        };
        self.entries.insert(
            (vlan, mac),
            Entry {
                port,
                last_used: now,
                is_static: false,
                grat_arp_lock_until: lock,
            },
        );
        Learned::New
    }

    /// Evicts the least recently used dynamic entry; false if there is none.
    fn evict_lru(&mut self) -> bool {
        let victim = self
            .entries
            .iter()
            .filter(|(_, e)| !e.is_static)
            .min_by_key(|(k, e)| (e.last_used, **k))
            .map(|(k, _)| *k);
        match victim {
            Some(k) => {
                self.entries.remove(&k);
                true
            }
            None => false,
        }
    }

    /// Adds or replaces a static entry (`ovs-appctl fdb/add BRIDGE PORT VLAN MAC`).
    pub fn add_static(&mut self, vlan: u16, mac: u64, port: u16) {
        self.entries.insert(
            (vlan, mac),
            Entry {
                port,
                last_used: 0,
                is_static: true,
                grat_arp_lock_until: 0,
            },
        );
    }

    /// Removes an entry, static or not (`fdb/del`). True if there was one.
    pub fn remove(&mut self, vlan: u16, mac: u64) -> bool {
        self.entries.remove(&(vlan, mac)).is_some()
    }

    /// Forgets every dynamic entry on `port` (the port went away or changed VLANs).
    pub fn flush_port(&mut self, port: u16) {
        self.entries.retain(|_, e| e.is_static || e.port != port);
    }

    /// Forgets every dynamic entry (`fdb/flush`).
    pub fn flush(&mut self) {
        self.entries.retain(|_, e| e.is_static);
    }

    /// Removes entries that aged out by `now`; returns how many.
    pub fn expire(&mut self, now: u64) -> usize {
        let aging = self.aging_secs;
        let before = self.entries.len();
        self.entries
            .retain(|_, e| e.is_static || now.saturating_sub(e.last_used) <= aging);
        before - self.entries.len()
    }

    /// Number of entries (live or not yet expired).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True if empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Entries as (vlan, mac, port, age in seconds, static), sorted, for `fdb/show`.
    pub fn dump(&self, now: u64) -> Vec<(u16, u64, u16, u64, bool)> {
        let mut v: Vec<_> = self
            .entries
            .iter()
            .filter(|(_, e)| self.live(e, now))
            .map(|((vlan, mac), e)| {
                (
                    *vlan,
                    *mac,
                    e.port,
                    now.saturating_sub(e.last_used),
                    e.is_static,
                )
            })
            .collect();
        v.sort_unstable();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: u64 = 0x5054_0000_0001;
    const B: u64 = 0x5054_0000_0002;
    const C: u64 = 0x5054_0000_0003;

    #[test]
    fn learn_is_per_vlan() {
        let mut t = MacTable::new(300, 10);
        t.learn(10, A, 1, 0, false);
        assert_eq!(t.lookup(10, A, 0), Some(1));
        assert_eq!(t.lookup(20, A, 0), None);
    }

    #[test]
    fn learn_static_entry_never_moves_or_ages() {
        let mut t = MacTable::new(300, 10);
        t.add_static(0, A, 1);
        assert_eq!(t.learn(0, A, 2, 5, false), Learned::Kept);
        assert_eq!(t.lookup(0, A, 1_000_000), Some(1));
        t.flush();
        assert_eq!(t.lookup(0, A, 0), Some(1));
    }

    #[test]
    fn learn_full_table_evicts_least_recently_used() {
        let mut t = MacTable::new(300, 2);
        t.learn(0, A, 1, 1, false);
        t.learn(0, B, 2, 2, false);
        t.learn(0, A, 1, 3, false); // A refreshed; B is now the oldest.
        assert_eq!(t.learn(0, C, 3, 4, false), Learned::New);
        assert_eq!(t.lookup(0, B, 4), None);
        assert_eq!(t.lookup(0, A, 4), Some(1));
    }

    #[test]
    fn learn_full_of_static_refuses() {
        let mut t = MacTable::new(300, 1);
        t.add_static(0, A, 1);
        assert_eq!(t.learn(0, B, 2, 0, false), Learned::TableFull);
    }

    #[test]
    fn learn_grat_arp_locks_entry() {
        let mut t = MacTable::new(300, 10);
        t.learn(0, A, 1, 100, true);
        assert_eq!(t.learn(0, A, 2, 102, false), Learned::Kept);
        assert_eq!(t.learn(0, A, 2, 106, false), Learned::Moved { from: 1 });
    }

    #[test]
    fn expire_removes_aged_entries() {
        let mut t = MacTable::new(10, 10);
        t.learn(0, A, 1, 0, false);
        t.learn(0, B, 1, 5, false);
        assert_eq!(t.expire(12), 1);
        assert_eq!(t.dump(12), vec![(0, B, 1, 7, false)]);
        t.flush_port(1);
        assert!(t.is_empty());
    }
}
