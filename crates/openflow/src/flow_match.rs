//! `Match`: a value/mask pair over a [`FlowKey`] (the analogue of OVS's `struct match`).
//!
//! Invariant: `value & mask == value` (bits outside the mask are zero in the value). Every
//! constructor and setter keeps it, so two matches that accept the same packets compare
//! equal.

use packet::key::{FlowKey, KeyField};

/// A value/mask pair over a [`FlowKey`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Match {
    value: FlowKey,
    mask: FlowKey,
}

impl Match {
    /// The match that accepts every packet (all bits wildcarded).
    pub fn catch_all() -> Self {
        Match::default()
    }

    /// A match from a value and mask; bits of `value` outside `mask` are cleared.
    pub fn new(value: FlowKey, mask: FlowKey) -> Self {
        Match {
            value: value.masked(&mask),
            mask,
        }
    }

    /// A match on every bit of `key`.
    pub fn exact(key: FlowKey) -> Self {
        Match {
            value: key,
            mask: FlowKey::all_ones(),
        }
    }

    /// The (already masked) value.
    pub fn value(&self) -> &FlowKey {
        &self.value
    }

    /// The mask: a set bit must equal the value's bit.
    pub fn mask(&self) -> &FlowKey {
        &self.mask
    }

    /// Matches `field` against `value` under `mask` (both as unsigned field values),
    /// replacing any earlier constraint on that field.
    pub fn set_masked(&mut self, field: KeyField, value: u128, mask: u128) {
        self.mask.set(field, mask);
        self.value.set(field, value & mask);
    }

    /// Matches `field` exactly against `value`.
    pub fn set_exact(&mut self, field: KeyField, value: u128) {
        self.set_masked(field, value, field.max_value());
    }

    /// Stops matching on `field`.
    pub fn wildcard(&mut self, field: KeyField) {
        self.set_masked(field, 0, 0);
    }

    /// Checks the OpenFlow prerequisites of every field this match constrains (for example
    /// `tp_src` needs `ip` or `ipv6` and `nw_proto` in {6, 17, 132}), the way OVS's
    /// `match_validate` does.
    ///
    /// Stub until the ovs-ofctl syntax lands: accepts everything.
    pub fn check_prerequisites(&self) -> Result<(), crate::Error> {
        Ok(())
    }

    /// True if `key` satisfies this match.
    #[inline]
    pub fn matches(&self, key: &FlowKey) -> bool {
        self.value
            .words
            .iter()
            .zip(self.mask.words.iter())
            .zip(key.words.iter())
            .all(|((v, m), k)| k & m == *v)
    }
}

#[cfg(test)]
mod tests {
    use packet::key::fields;

    use super::*;

    #[test]
    fn new_clears_value_bits_outside_mask() {
        let mut v = FlowKey::default();
        v.set_nw_src(0x0a00_00ff);
        let mut m = FlowKey::default();
        m.set(fields::NW_SRC, 0xffff_ff00);
        let mt = Match::new(v, m);
        assert_eq!(mt.value().nw_src(), 0x0a00_0000);
        let mut pkt = FlowKey::default();
        pkt.set_nw_src(0x0a00_0042);
        assert!(mt.matches(&pkt));
        pkt.set_nw_src(0x0b00_0042);
        assert!(!mt.matches(&pkt));
    }
}
