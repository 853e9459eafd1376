//! The implementation of flow_mod bundles before [`super::bundle`] (it drafted a copy of
//! every touched table and recomputed the subtable order per flow_mod), kept for the tests
//! as the reference the new one must agree with exactly.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use classifier::{Batch, Classifier, Rule};
use openflow::flow::{FlowEntry, FlowFlags};
use openflow::ofctl::value::OFPP_NONE;
use openflow::Match;
use packet::key::FlowKey;

use super::bundle::validate_match;
use super::{
    check_flow, check_gotos, overlaps, selects, FlowMod, FlowModCommand, FlowModOutcome, OfRule,
    OfTable, Selectable, SwitchError, N_TABLES,
};

/// The working copy of one table during a bundle: rule identity → rule.
#[derive(Clone)]
struct Draft {
    rules: Vec<DraftRule>,
}

#[derive(Clone)]
struct DraftRule {
    entry: FlowEntry,
    live: Option<Arc<Rule<Arc<OfRule>>>>,
    keep_counts: bool,
}

/// A bridge's tables as the old implementation kept them.
pub(super) struct RefBridge {
    pub(super) tables: Vec<Option<OfTable>>,
    pub(super) subtables: Vec<Vec<(FlowKey, u16)>>,
}

impl RefBridge {
    pub(super) fn new() -> Self {
        RefBridge {
            tables: (0..N_TABLES).map(|_| None).collect(),
            subtables: (0..N_TABLES).map(|_| Vec::new()).collect(),
        }
    }

    pub(super) fn table(&self, id: u8) -> Option<&OfTable> {
        self.tables.get(usize::from(id)).and_then(|t| t.as_ref())
    }

    fn table_mut(&mut self, id: u8) -> &mut OfTable {
        self.tables[usize::from(id)].get_or_insert_with(Classifier::new)
    }

    pub(super) fn rules(&self) -> Vec<(u8, Arc<Rule<Arc<OfRule>>>)> {
        super::rules_of(&self.tables)
    }

    /// The old `expire_flows`: removes the rules, leaves the subtable order as it was.
    pub(super) fn expire(&mut self, now_ms: u64) -> Vec<FlowEntry> {
        let mut expired = Vec::new();
        for (t, r) in self.rules() {
            let p = r.payload();
            let hard = p.hard_timeout() != 0
                && now_ms >= p.created_ms + 1000 * u64::from(p.hard_timeout());
            let idle = p.idle_timeout() != 0
                && now_ms >= p.last_used_ms() + 1000 * u64::from(p.idle_timeout());
            if (hard || idle) && self.table_mut(t).remove(r.match_(), r.priority()).is_ok() {
                expired.push(p.to_flow_entry(r.match_()));
            }
        }
        expired
    }

    pub(super) fn flow_mods(
        &mut self,
        mods: Vec<FlowMod>,
        now: u64,
    ) -> Result<FlowModOutcome, SwitchError> {
        let br = &*self;
        // Drafts of every table, built lazily from the live rules.
        let mut drafts: BTreeMap<u8, Draft> = BTreeMap::new();
        let live = br.rules();
        let draft = |drafts: &mut BTreeMap<u8, Draft>, t: u8| {
            drafts.entry(t).or_insert_with(|| Draft {
                rules: live
                    .iter()
                    .filter(|(lt, _)| *lt == t)
                    .map(|(_, r)| DraftRule {
                        entry: r.payload().to_flow_entry(r.match_()),
                        live: Some(r.clone()),
                        keep_counts: true,
                    })
                    .collect(),
            });
        };
        let mut out = FlowModOutcome::default();
        let mut pvecs: BTreeMap<u8, Vec<(FlowKey, u16)>> = BTreeMap::new();
        for fm in &mods {
            let e = &fm.entry;
            check_flow(&e.actions)?;
            let tables: Vec<u8> = match (fm.command, e.table) {
                (FlowModCommand::Add, Some(t)) if usize::from(t) >= N_TABLES => {
                    return Err(SwitchError::BadTable(t))
                }
                (FlowModCommand::Add, _) => vec![e.table_id()],
                (_, Some(t)) if usize::from(t) < N_TABLES => vec![t],
                _ => (0..=254u8).collect(),
            };
            match fm.command {
                FlowModCommand::Add => {
                    let t = tables[0];
                    check_gotos(&e.actions, t)?;
                    draft(&mut drafts, t);
                    let d = drafts.get_mut(&t).expect("draft just created");
                    if e.flags.contains(FlowFlags::CHECK_OVERLAP)
                        && d.rules.iter().any(|r| {
                            r.entry.priority == e.priority
                                && overlaps(&r.entry.flow_match, &e.flow_match)
                                && r.entry.flow_match != e.flow_match
                        })
                    {
                        return Err(SwitchError::Overlap {
                            table: t,
                            priority: e.priority,
                        });
                    }
                    let mut ne = e.clone();
                    ne.table = Some(t);
                    ne.cookie_mask = 0;
                    ne.out_port = OFPP_NONE;
                    d.rules.retain(|r| {
                        !(r.entry.priority == e.priority && r.entry.flow_match == e.flow_match)
                    });
                    d.rules.push(DraftRule {
                        entry: ne,
                        live: None,
                        keep_counts: false,
                    });
                    out.n_added += 1;
                }
                FlowModCommand::Modify { strict } => {
                    let mut n = 0;
                    for &t in &tables {
                        if br.table(t).is_none() && !drafts.contains_key(&t) {
                            continue;
                        }
                        draft(&mut drafts, t);
                        let d = drafts.get_mut(&t).expect("draft just created");
                        for r in d.rules.iter_mut() {
                            if selects(fm, strict, selectable(&r.entry)) {
                                check_gotos(&e.actions, t)?;
                                r.entry.actions = e.actions.clone();
                                if e.cookie_mask == 0 && e.cookie != u64::MAX && e.cookie != 0 {
                                    r.entry.cookie = e.cookie;
                                }
                                r.keep_counts = !e.flags.contains(FlowFlags::RESET_COUNTS);
                                r.live = None;
                                n += 1;
                            }
                        }
                    }
                    out.n_modified += n;
                    if n == 0 && fm.modify_may_add {
                        let t = e.table_id();
                        check_gotos(&e.actions, t)?;
                        draft(&mut drafts, t);
                        let d = drafts.get_mut(&t).expect("draft just created");
                        let mut ne = e.clone();
                        ne.table = Some(t);
                        ne.cookie_mask = 0;
                        ne.out_port = OFPP_NONE;
                        d.rules.push(DraftRule {
                            entry: ne,
                            live: None,
                            keep_counts: false,
                        });
                        out.n_added += 1;
                    }
                }
                FlowModCommand::Delete { strict } => {
                    for &t in &tables {
                        if br.table(t).is_none() && !drafts.contains_key(&t) {
                            continue;
                        }
                        draft(&mut drafts, t);
                        let d = drafts.get_mut(&t).expect("draft just created");
                        let before = d.rules.len();
                        d.rules
                            .retain(|r| !selects(fm, strict, selectable(&r.entry)));
                        out.n_deleted += before - d.rules.len();
                    }
                }
            }
            // Each flow_mod is published on its own: update the subtable order of the
            // tables it touched.
            for (t, d) in &drafts {
                let pv = pvecs
                    .entry(*t)
                    .or_insert_with(|| br.subtables[usize::from(*t)].clone());
                update_subtables(pv, &d.rules);
            }
        }
        // Check every new rule as the classifier will, so that the commits below cannot fail.
        for d in drafts.values() {
            for r in d.rules.iter().filter(|r| r.live.is_none()) {
                validate_match(&r.entry.flow_match)
                    .map_err(|msg| SwitchError::Rule { index: 0, msg })?;
            }
        }
        // Apply, per table: each rule's classifier priority is its OpenFlow priority above a
        // rank that orders equal priorities as OVS's classifier does (`update_subtables`); a rule
        // whose rank changed moves, keeping its counters.
        let br = self;
        for (t, d) in drafts {
            let old: Vec<_> = live
                .iter()
                .filter(|(lt, _)| *lt == t)
                .map(|(_, r)| r.clone())
                .collect();
            let pv = pvecs.remove(&t).unwrap_or_default();
            let ranks: HashMap<FlowKey, u16> = pv
                .iter()
                .enumerate()
                .map(|(i, (m, _))| {
                    let rank = u16::MAX.saturating_sub(u16::try_from(i).unwrap_or(u16::MAX));
                    (*m, rank)
                })
                .collect();
            br.subtables[usize::from(t)] = pv;
            let want = |e: &FlowEntry| -> u32 {
                let rank = ranks.get(e.flow_match.mask()).copied().unwrap_or(0);
                (u32::from(e.priority) << 16) | u32::from(rank)
            };
            let same = |r: &Rule<Arc<OfRule>>, e: &FlowEntry| {
                r.priority() == want(e) && r.match_() == e.flow_match
            };
            let mut batch = Batch::new();
            for r in &old {
                if !d.rules.iter().any(|n| same(r, &n.entry)) {
                    batch.remove(r.match_(), r.priority());
                }
            }
            for n in &d.rules {
                let prio = want(&n.entry);
                if n.live.as_ref().is_some_and(|l| l.priority() == prio) {
                    continue;
                }
                // The rule's previous version (same OpenFlow identity), if it keeps its state.
                let prev = n.live.clone().or_else(|| {
                    old.iter()
                        .find(|r| {
                            n.keep_counts
                                && r.payload().priority() == n.entry.priority
                                && r.match_() == n.entry.flow_match
                        })
                        .cloned()
                });
                let mut rule = OfRule::from_flow(
                    &n.entry,
                    n.entry.actions.clone(),
                    t,
                    now,
                    n.entry.flow_match.mask().is_zero(),
                );
                if let Some(p) = &prev {
                    rule.inherit(p.payload());
                }
                let rule = Arc::new(rule);
                if old.iter().any(|r| same(r, &n.entry)) {
                    batch.modify(n.entry.flow_match, prio, rule);
                } else {
                    batch.insert(n.entry.flow_match, prio, n.entry.cookie, rule);
                }
            }
            if !batch.is_empty() {
                br.table_mut(t)
                    .commit(batch)
                    .map_err(|e| SwitchError::Rule {
                        index: 0,
                        msg: e.to_string(),
                    })?;
            }
        }
        Ok(out)
    }
}

/// The parts of a flow a flow_mod selects by.
fn selectable<'a>(e: &'a FlowEntry) -> Selectable<'a, impl FnOnce() -> Cow<'a, Match>> {
    Selectable {
        priority: e.priority,
        cookie: e.cookie,
        actions: &e.actions,
        flow_match: || Cow::Borrowed(&e.flow_match),
    }
}

fn update_subtables(pv: &mut Vec<(FlowKey, u16)>, rules: &[DraftRule]) {
    let mut max_prio: Vec<(FlowKey, u16)> = Vec::new();
    for r in rules {
        let m = *r.entry.flow_match.mask();
        match max_prio.iter_mut().find(|(k, _)| *k == m) {
            Some((_, p)) => *p = (*p).max(r.entry.priority),
            None => max_prio.push((m, r.entry.priority)),
        }
    }
    let mut i = 0;
    while i < pv.len() {
        if max_prio.iter().any(|(m, _)| *m == pv[i].0) {
            i += 1;
        } else {
            pv.swap_remove(i);
        }
    }
    for (m, p) in max_prio {
        match pv.iter_mut().find(|(k, _)| *k == m) {
            Some(e) => e.1 = p,
            None => pv.push((m, p)),
        }
    }
    pv.sort_by_key(|(_, p)| std::cmp::Reverse(*p));
}
