//! Fuzzes the classifier against its linear reference (`classifier::naive`): rules built from
//! the input (a few fields, prefixes of a few lengths over a few addresses, so that rules
//! collide and share masks; now and then a mask with bits outside every field or a match
//! without its prerequisites) are inserted, modified and removed one at a time and in batches.
//! Every commit must succeed or fail in both alike; after each, packets built from the input
//! must get the same rule from both, with and without wildcard tracking, and a packet that
//! agrees with one on the bits its lookup consulted must get the same rule; looked up together,
//! the packets must get the rules and consulted bits of single lookups. Never a panic.
#![no_main]
use std::sync::Arc;

use classifier::naive::Naive;
use classifier::{Batch, Classifier};
use libfuzzer_sys::fuzz_target;
use openflow::Match;
use packet::key::{fields, FlowKey};

/// The input, read a byte at a time; zeros once it is used up.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }

    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.byte(), self.byte(), self.byte(), self.byte()])
    }

    fn done(&self) -> bool {
        self.0.is_empty()
    }
}

/// One of four addresses in two /8s, its low bits from the input.
fn address(inp: &mut Input<'_>) -> u32 {
    let base = [0x0a00_0000u32, 0x0a01_0000, 0x0b00_0000, 0xc0a8_0000][usize::from(inp.byte() & 3)];
    base | u32::from(inp.byte() & 0x0f)
}

fn prefix_mask(len: u8) -> u128 {
    match len {
        0 => 0,
        l => u128::from(u32::MAX << (32 - u32::from(l.min(32)))),
    }
}

/// A match built from the input.
fn rule_match(inp: &mut Input<'_>) -> Match {
    let kind = inp.byte();
    let mut m = Match::catch_all();
    let ip = kind & 1 != 0;
    if ip {
        m.set_exact(fields::DL_TYPE, 0x0800);
    }
    if kind & 2 != 0 {
        m.set_exact(fields::IN_PORT, u128::from(inp.byte() & 3));
    }
    for (bit, field) in [(4, fields::NW_DST), (8, fields::NW_SRC)] {
        if ip && kind & bit != 0 {
            let len = [8, 16, 24, 28, 32, 31, 1, 12][usize::from(inp.byte() & 7)];
            let mask = prefix_mask(len);
            m.set_masked(field, u128::from(address(inp)) & mask, mask);
        }
    }
    if ip && kind & 16 != 0 {
        m.set_exact(fields::NW_PROTO, [6u128, 17][usize::from(inp.byte() & 1)]);
        if kind & 32 != 0 {
            m.set_exact(fields::TP_DST, u128::from(inp.byte() & 3) + 80);
        }
    }
    if kind & 0xc0 == 0xc0 {
        // Bad input: a port without its protocol, or a mask bit of no field.
        let mut mask = *m.mask();
        let mut value = *m.value();
        if inp.byte() & 1 == 0 {
            mask.set(fields::TP_SRC, 0xffff);
            value.set(fields::TP_SRC, 1);
        } else {
            mask.words[3] |= 0xff00_0000;
        }
        m = Match::new(value, mask);
    }
    m
}

/// A packet built from the input: near a known rule's value half the time.
fn packet(inp: &mut Input<'_>, known: &[Match]) -> FlowKey {
    let mut k = FlowKey::default();
    let near = inp.byte();
    if near & 1 != 0 && !known.is_empty() {
        k = *known[usize::from(near >> 1) % known.len()].value();
    }
    let kind = inp.byte();
    if kind & 1 != 0 {
        k.set(fields::DL_TYPE, 0x0800);
    }
    if kind & 2 != 0 {
        k.set(fields::IN_PORT, u128::from(inp.byte() & 3));
    }
    if kind & 4 != 0 {
        k.set(fields::NW_DST, u128::from(address(inp)));
    }
    if kind & 8 != 0 {
        k.set(fields::NW_SRC, u128::from(address(inp)));
    }
    if kind & 16 != 0 {
        k.set(fields::NW_PROTO, [6u128, 17][usize::from(inp.byte() & 1)]);
    }
    if kind & 32 != 0 {
        k.set(fields::TP_DST, u128::from(inp.byte() & 3) + 80);
    }
    k
}

/// Checks `key` in both, and a packet that agrees with it on the consulted bits.
fn check(cls: &Classifier<u32>, naive: &Naive<u32>, key: &FlowKey, inp: &mut Input<'_>) {
    let want = naive.lookup(key).map(|r| (r.priority, r.payload));
    let snap = cls.snapshot();
    let got = snap.lookup(key, None).map(|r| (r.priority(), *r.payload()));
    assert_eq!(got, want, "lookup of {key:?}");
    let mut wc = FlowKey::default();
    let got = snap
        .lookup(key, Some(&mut wc))
        .map(|r| (r.priority(), *r.payload()));
    assert_eq!(got, want, "wildcard-tracking lookup of {key:?}");
    let mut other = *key;
    for w in &mut other.words {
        *w ^= u64::from(inp.u32()) << (inp.byte() & 31);
    }
    for (o, (k, c)) in other.words.iter_mut().zip(key.words.iter().zip(&wc.words)) {
        *o = (k & c) | (*o & !c);
    }
    let got = snap
        .lookup(&other, None)
        .map(|r| (r.priority(), *r.payload()));
    assert_eq!(got, want, "{other:?} agrees with {key:?} on {wc:?}");
}

fuzz_target!(|data: &[u8]| {
    let mut inp = Input(data);
    let mut cls: Classifier<u32> = match inp.byte() % 3 {
        0 => Classifier::new(),
        1 => Classifier::with_prefixes(&[]).expect("no prefixes"),
        _ => Classifier::with_prefixes(&[fields::NW_SRC]).expect("one prefix field"),
    };
    let mut naive: Naive<u32> = Naive::new();
    let mut known: Vec<Match> = Vec::new();
    let mut payload = 0u32;
    let mut steps = 0;
    while !inp.done() && steps < 200 {
        steps += 1;
        let n_ops = match inp.byte() {
            b if b < 200 => 1,
            b => usize::from(b - 198),
        };
        let via = inp.byte() % 3;
        let mut ops: Vec<(u8, Match, u32, u32)> = Vec::with_capacity(n_ops);
        for _ in 0..n_ops {
            let op = inp.byte();
            let m = if op & 0x80 != 0 && !known.is_empty() {
                known[usize::from(inp.byte()) % known.len()]
            } else {
                let m = rule_match(&mut inp);
                if known.len() < 64 {
                    known.push(m);
                }
                m
            };
            let priority = u32::from(inp.byte() & 7);
            payload += 1;
            ops.push((op & 0x0f, m, priority, payload));
        }
        let mut batch = Batch::new();
        for (kind, m, priority, payload) in &ops {
            match kind {
                0..=8 => batch.insert(*m, *priority, 0, *payload),
                9..=11 => batch.remove(*m, *priority),
                12..=14 => batch.modify(*m, *priority, *payload),
                _ => batch.clear(),
            };
        }
        let want = naive.commit(&batch).err();
        let has_clear = ops.iter().any(|o| o.0 > 14);
        match (via, &ops[..]) {
            // One operation through the single-rule API: its own error, not a batch's.
            (1, [(kind, m, priority, payload)]) if *kind <= 14 => {
                let got = match kind {
                    0..=8 => cls.insert(*m, *priority, 0, *payload).err(),
                    9..=11 => cls.remove(*m, *priority).err(),
                    _ => cls.modify(*m, *priority, *payload).err(),
                };
                assert_eq!(
                    got.as_ref(),
                    want.as_ref().map(|e| e.cause()),
                    "the same outcome"
                );
            }
            // Through `commit_with`: the first failing operation in order names the error, so
            // only success is compared.
            (2, _) if !has_clear => {
                let got = cls.commit_with(|o| {
                    for (kind, m, priority, payload) in &ops {
                        match kind {
                            0..=8 => o.insert(m, *priority, 0, *payload),
                            9..=11 => o.remove(m, *priority),
                            _ => o.modify(m, *priority, *payload),
                        };
                    }
                });
                assert_eq!(
                    got.is_ok(),
                    want.is_none(),
                    "the same outcome: {got:?}, {want:?}"
                );
            }
            _ => {
                let got = cls.commit(batch).err();
                assert_eq!(got, want, "the same outcome");
            }
        }
        assert_eq!(cls.len(), naive.len());
        let keys: Vec<FlowKey> = (0..3).map(|_| packet(&mut inp, &known)).collect();
        for key in &keys {
            check(&cls, &naive, key, &mut inp);
        }
        // The same keys as one batch: the rules and consulted bits of single lookups.
        let snap = cls.snapshot();
        let mut out = vec![None; keys.len()];
        let mut wcs = vec![FlowKey::default(); keys.len()];
        snap.lookup_batch(&keys, &mut out, Some(&mut wcs));
        for ((key, got), wc) in keys.iter().zip(&out).zip(&wcs) {
            let mut want_wc = FlowKey::default();
            let want = snap.lookup(key, Some(&mut want_wc));
            assert_eq!(
                got.map(Arc::as_ptr),
                want.map(Arc::as_ptr),
                "batch lookup of {key:?}"
            );
            assert_eq!(*wc, want_wc, "batch lookup's consulted bits for {key:?}");
        }
    }
});
