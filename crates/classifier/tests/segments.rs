//! The classifier as other crates build it (not under `cfg(test)`, whose subtables split small):
//! a subtable splits into its 64 segments past 32,768 rules, and they grow one at a time. Rules
//! loaded as a batch, by single commits and removed again stay found in both versions.

use classifier::{Batch, Classifier};
use openflow::Match;
use packet::key::{fields, FlowKey};

fn rule(i: u32) -> Match {
    let mut m = Match::catch_all();
    m.set_exact(fields::DL_TYPE, 0x0800);
    m.set_exact(fields::NW_PROTO, 17);
    m.set_exact(
        fields::NW_SRC,
        u128::from(0x0a00_0000 | (i.wrapping_mul(2_654_435_761) & 0x00ff_ffff)),
    );
    m.set_exact(fields::NW_DST, u128::from(0x0b00_0000 | (i & 0xffff)));
    m.set_exact(fields::TP_SRC, u128::from(1024 + i % 50_000));
    m.set_exact(fields::TP_DST, 53);
    m
}

/// A packet that rule `i` matches: its match's value (every field it does not match is 0).
fn packet(i: u32) -> FlowKey {
    *rule(i).value()
}

fn check(cls: &Classifier<u32>, present: &[bool]) {
    for (i, there) in present.iter().enumerate() {
        let i = u32::try_from(i).expect("few rules");
        let got = cls.reader().lookup(&packet(i), None).map(|r| *r.payload());
        assert_eq!(got, there.then_some(i), "rule {i}");
    }
}

#[test]
fn segments_keep_every_rule_through_batches_single_commits_and_removals() {
    const N: u32 = 24_000;
    const MORE: u32 = 56_000;
    const LAST: u32 = 64_000;
    let mut cls: Classifier<u32> = Classifier::new();
    let mut present = vec![false; LAST as usize];
    // A batch past the split, then single commits through several segment growths.
    let mut b = Batch::new();
    for i in 0..10_000 {
        b.insert(rule(i), 7, 0, i);
        present[i as usize] = true;
    }
    cls.commit(b).unwrap();
    for i in 10_000..N {
        cls.insert(rule(i), 7, 0, i).unwrap();
        present[i as usize] = true;
        // Every third rule of the first batch goes again, some in batches with inserts.
        if i % 3 == 0 {
            let gone = (i - 10_000) * 3 / 4;
            if present[gone as usize] {
                cls.remove(rule(gone), 7).unwrap();
                present[gone as usize] = false;
            }
        }
    }
    check(&cls, &present);
    // The other version, brought up to date by an empty batch, agrees.
    cls.commit(Batch::new()).unwrap();
    check(&cls, &present);
    // A batch that removes and adds across segments, with growths inside it.
    let mut b = Batch::new();
    for i in (0..N).step_by(5) {
        if present[i as usize] {
            b.remove(rule(i), 7);
            present[i as usize] = false;
        }
    }
    cls.commit(b).unwrap();
    cls.commit(Batch::new()).unwrap();
    check(&cls, &present);
    // Back again, with new rules that grow most segments inside the batch (the positions it
    // recorded before each growth move with it).
    let mut b = Batch::new();
    for i in (0..N).step_by(5).chain(N..MORE) {
        b.insert(rule(i), 7, 0, i);
        present[i as usize] = true;
    }
    cls.commit(b).unwrap();
    check(&cls, &present);
    cls.commit(Batch::new()).unwrap();
    check(&cls, &present);
    // Single commits into the split table, through segment growths.
    for i in MORE..LAST {
        cls.insert(rule(i), 7, 0, i).unwrap();
        present[i as usize] = true;
    }
    check(&cls, &present);
    cls.commit(Batch::new()).unwrap();
    check(&cls, &present);
    assert_eq!(cls.len(), present.iter().filter(|p| **p).count());
}

/// A reader looking up rules committed before it started never misses one while the writer
/// grows the table through its split and its segments' growths (single commits and batches).
#[test]
fn readers_keep_seeing_old_rules_while_segments_split_and_grow() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    const OLD: u32 = 20_000;
    let mut cls: Classifier<u32> = Classifier::new();
    let mut b = Batch::new();
    for i in 0..OLD {
        b.insert(rule(i), 7, 0, i);
    }
    cls.commit(b).unwrap();
    cls.commit(Batch::new()).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let reader = cls.reader();
    let stop = done.clone();
    let t = std::thread::spawn(move || {
        let mut rounds = 0u32;
        while !stop.load(Ordering::Relaxed) || rounds == 0 {
            for i in (rounds % 7..OLD).step_by(7) {
                let got = reader.lookup(&packet(i), None).map(|r| *r.payload());
                assert_eq!(got, Some(i), "rule {i} in round {rounds}");
            }
            rounds += 1;
        }
        rounds
    });
    // Past the split at 32,768 rules and on through growths: singles, then batches.
    for i in OLD..40_000 {
        cls.insert(rule(i), 7, 0, i).unwrap();
    }
    for chunk in (40_000..60_000).collect::<Vec<u32>>().chunks(2_500) {
        let mut b = Batch::new();
        for &i in chunk {
            b.insert(rule(i), 7, 0, i);
        }
        cls.commit(b).unwrap();
    }
    done.store(true, Ordering::Relaxed);
    let rounds = t.join().expect("the reader saw every old rule");
    assert!(rounds > 0);
    let all = vec![true; 60_000];
    check(&cls, &all);
}
