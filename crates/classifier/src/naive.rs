//! A linear reference classifier, for tests: the same semantics as [`Classifier`], written
//! as plainly as possible.
//!
//! Lookup scans every rule and keeps the best by (priority, earliest insertion). Batches are
//! applied to a copy and kept only if every operation succeeds.
//!
//! [`Classifier`]: crate::Classifier

use openflow::Match;
use packet::key::FlowKey;

use crate::writer::{validate, Batch, Op};
use crate::Error;

/// One rule of the reference classifier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NaiveRule<T> {
    /// Its match.
    pub rule_match: Match,
    /// Its priority.
    pub priority: u32,
    /// Insertion order (lower wins ties).
    pub seq: u64,
    /// Its cookie.
    pub cookie: u64,
    /// Its payload.
    pub payload: T,
}

/// The reference classifier.
#[derive(Debug, Clone)]
pub struct Naive<T> {
    rules: Vec<NaiveRule<T>>,
    next_seq: u64,
}

impl<T> Default for Naive<T> {
    fn default() -> Self {
        Naive {
            rules: Vec::new(),
            next_seq: 0,
        }
    }
}

impl<T: Clone> Naive<T> {
    /// An empty classifier.
    pub fn new() -> Self {
        Naive::default()
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// True if there are no rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Every rule.
    pub fn rules(&self) -> &[NaiveRule<T>] {
        &self.rules
    }

    /// The best matching rule.
    pub fn lookup(&self, key: &FlowKey) -> Option<&NaiveRule<T>> {
        self.rules
            .iter()
            .filter(|r| r.rule_match.matches(key))
            .max_by(|a, b| a.priority.cmp(&b.priority).then(b.seq.cmp(&a.seq)))
    }

    /// Applies `batch` atomically, with the same errors as [`crate::Classifier::commit`].
    pub fn commit(&mut self, batch: &Batch<T>) -> Result<(), Error> {
        let ops = batch.ops();
        for (i, op) in ops.iter().enumerate() {
            match op {
                Op::Insert { rule_match, .. }
                | Op::Modify { rule_match, .. }
                | Op::Remove { rule_match, .. } => validate(rule_match).map_err(|e| e.at(i))?,
                Op::Clear => {}
            }
        }
        let mut rules = self.rules.clone();
        let mut next_seq = self.next_seq;
        for (i, op) in ops.iter().enumerate() {
            match op {
                Op::Insert {
                    rule_match,
                    priority,
                    cookie,
                    payload,
                } => {
                    let pos = rules
                        .iter()
                        .position(|r| r.rule_match == *rule_match && r.priority == *priority);
                    match pos {
                        Some(p) => {
                            rules[p].cookie = *cookie;
                            rules[p].payload = payload.clone();
                        }
                        None => {
                            rules.push(NaiveRule {
                                rule_match: *rule_match,
                                priority: *priority,
                                seq: next_seq,
                                cookie: *cookie,
                                payload: payload.clone(),
                            });
                            next_seq += 1;
                        }
                    }
                }
                Op::Modify {
                    rule_match,
                    priority,
                    payload,
                } => {
                    let r = rules
                        .iter_mut()
                        .find(|r| r.rule_match == *rule_match && r.priority == *priority)
                        .ok_or(Error::NotFound {
                            priority: *priority,
                        })
                        .map_err(|e| e.at(i))?;
                    r.payload = payload.clone();
                }
                Op::Remove {
                    rule_match,
                    priority,
                } => {
                    let p = rules
                        .iter()
                        .position(|r| r.rule_match == *rule_match && r.priority == *priority)
                        .ok_or(Error::NotFound {
                            priority: *priority,
                        })
                        .map_err(|e| e.at(i))?;
                    rules.remove(p);
                }
                Op::Clear => rules.clear(),
            }
        }
        self.rules = rules;
        self.next_seq = next_seq;
        Ok(())
    }
}
