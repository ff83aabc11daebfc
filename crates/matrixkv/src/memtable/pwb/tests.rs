//! Tests of LightKV's write buffer: agreement with a model before and after reopening, a
//! crash at every write and at every persist call, undone batches, a full log, damaged
//! records, headers and RH-trees, concurrent readers, and the golden bytes of
//! docs/format/pwb.md.

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::key;
use crate::tier::{CrashPolicy, SimulatedRegion};

const PATH: &str = "fast/000007.pmt";

/// Versions of each key, oldest first: `(seq, kind, value)`.
type Model = BTreeMap<Vec<u8>, Vec<(u64, ValueKind, Vec<u8>)>>;

/// One operation: key, kind, value (sequence numbers are given in order).
type Op = (Vec<u8>, ValueKind, Vec<u8>);

fn new_buffer(log: u64) -> (Arc<SimulatedRegion>, Arc<Pwb>) {
    let region = Arc::new(SimulatedRegion::new(region_len(log) as usize));
    let pwb = Pwb::create(region.clone(), PATH, 7).unwrap();
    (region, Arc::new(pwb))
}

fn reopen(image: Vec<u8>) -> Result<(Arc<SimulatedRegion>, Arc<Pwb>, Vec<RangeTombstone>)> {
    let region = Arc::new(SimulatedRegion::from_image(image));
    let (pwb, tombstones) = Pwb::open(region.clone(), PATH)?;
    Ok((region, Arc::new(pwb), tombstones))
}

/// Inserts and commits `batch` from sequence number `seq` on; the batch's last number.
fn commit_batch(pwb: &Pwb, seq: u64, batch: &[Op]) -> Result<u64> {
    let mut s = seq;
    for (k, kind, v) in batch {
        pwb.insert(k, SeqNo(s), *kind, v)?;
        s += 1;
    }
    pwb.commit(SeqNo(s - 1))?;
    Ok(s - 1)
}

fn add_to_model(m: &mut Model, seq: u64, batch: &[Op]) {
    for (i, (k, kind, v)) in batch.iter().enumerate() {
        if *kind != ValueKind::RangeDeletion {
            m.entry(k.clone())
                .or_default()
                .push((seq + i as u64, *kind, v.clone()));
        }
    }
}

fn model_get(m: &Model, key: &[u8], snapshot: u64) -> Option<(ValueKind, SeqNo, Vec<u8>)> {
    m.get(key)?
        .iter()
        .rev()
        .find(|(s, ..)| *s <= snapshot)
        .map(|(s, kind, v)| (*kind, SeqNo(*s), v.clone()))
}

fn model_versions(m: &Model, key: &[u8], snapshot: u64) -> crate::key::Versions {
    let mut out = Vec::new();
    for (s, kind, v) in m.get(key).into_iter().flatten().rev() {
        if *s > snapshot {
            continue;
        }
        out.push((*kind, v.clone()));
        if *kind != ValueKind::Merge {
            break;
        }
    }
    out
}

fn model_entries(m: &Model) -> Vec<(Vec<u8>, Vec<u8>)> {
    m.iter()
        .flat_map(|(k, vs)| {
            vs.iter()
                .rev()
                .map(move |(s, kind, v)| (key::make_internal_key(k, SeqNo(*s), *kind), v.clone()))
        })
        .collect()
}

fn scan(pwb: &Arc<Pwb>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = pwb.iter();
    it.seek_to_first().unwrap();
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next().unwrap();
    }
    out
}

fn assert_agrees(pwb: &Arc<Pwb>, m: &Model, last: u64, what: &str) {
    let keys: Vec<Vec<u8>> = (0..400u32)
        .map(|i| format!("key{i:03}").into_bytes())
        .collect();
    for k in &keys {
        for snap in [
            0,
            last / 3,
            last / 2,
            last.saturating_sub(1),
            last,
            last + 5,
        ] {
            assert_eq!(
                pwb.newest(k, SeqNo(snap)).unwrap(),
                model_get(m, k, snap),
                "{what}: newest {k:?} at {snap}"
            );
            assert_eq!(
                pwb.versions(k, SeqNo(snap)).unwrap(),
                model_versions(m, k, snap),
                "{what}: versions {k:?} at {snap}"
            );
        }
    }
    let want = model_entries(m);
    assert_eq!(scan(pwb), want, "{what}: scan");
    let mut it = pwb.iter();
    it.seek_to_last().unwrap();
    let mut back = Vec::new();
    while it.valid() {
        back.push((it.key().to_vec(), it.value().to_vec()));
        it.prev().unwrap();
    }
    back.reverse();
    assert_eq!(back, want, "{what}: backward scan");
    for (k, snap) in [
        (&b"key100"[..], last),
        (b"key250", last / 2),
        (b"key000", 0),
        (b"zzz", 1),
    ] {
        let target = key::seek_key(k, SeqNo(snap));
        let first = want
            .iter()
            .find(|(ik, _)| key::compare_internal(ik, &target) != std::cmp::Ordering::Less);
        it.seek(&target).unwrap();
        assert_eq!(
            it.valid().then(|| it.key().to_vec()),
            first.map(|e| e.0.clone()),
            "{what}: seek"
        );
        let before = want
            .iter()
            .rev()
            .find(|(ik, _)| key::compare_internal(ik, &target) != std::cmp::Ordering::Greater);
        it.seek_for_prev(&target).unwrap();
        assert_eq!(
            it.valid().then(|| it.key().to_vec()),
            before.map(|e| e.0.clone()),
            "{what}: seek_for_prev"
        );
    }
    let mut flushed = Vec::new();
    pwb.for_each(|k, s, kind, v| {
        flushed.push((key::make_internal_key(k, s, kind), v.to_vec()));
    })
    .unwrap();
    assert_eq!(flushed, model_entries(m), "{what}: for_each");
}

fn random_batch(rng: &mut StdRng) -> Vec<Op> {
    (0..rng.gen_range(1..=5))
        .map(|_| {
            let k = format!("key{:03}", rng.gen_range(0..400u32)).into_bytes();
            let kind = match rng.gen_range(0..10) {
                0 => ValueKind::Deletion,
                1 | 2 => ValueKind::Merge,
                3 => ValueKind::RangeDeletion,
                _ => ValueKind::Value,
            };
            let v = match kind {
                ValueKind::Deletion => Vec::new(),
                ValueKind::RangeDeletion => {
                    format!("key{:03}", rng.gen_range(0..400u32)).into_bytes()
                }
                _ => vec![rng.r#gen::<u8>(); rng.gen_range(0..300)],
            };
            (k, kind, v)
        })
        .collect()
}

#[test]
fn random_batches_agree_with_a_model_before_and_after_reopen() {
    let mut rng = StdRng::seed_from_u64(11);
    let (region, mut pwb) = new_buffer(1 << 20);
    let mut model = Model::new();
    let mut tombstones = Vec::new();
    let mut seq = 1;
    for round in 0..4 {
        for _ in 0..150 {
            let batch = random_batch(&mut rng);
            for (i, (k, kind, v)) in batch.iter().enumerate() {
                if *kind == ValueKind::RangeDeletion {
                    tombstones.push((k.clone(), v.clone(), seq + i as u64));
                }
            }
            let last = commit_batch(&pwb, seq, &batch).unwrap();
            add_to_model(&mut model, seq, &batch);
            seq = last + 1;
            if seq % 37 == 0 {
                // Iterators now and then: the sorted runs grow by tails and merges.
                assert_eq!(scan(&pwb), model_entries(&model), "round {round} at {seq}");
            }
        }
        assert_agrees(&pwb, &model, seq - 1, &format!("round {round}"));
        // The region is shared by every reopened buffer: reopen a crash image of it.
        let image = if round == 0 {
            region.crash_image(CrashPolicy::DropUnpersisted)
        } else {
            pwb.region_image()
        };
        let (_, reopened, got) = reopen(image).unwrap();
        assert_agrees(
            &reopened,
            &model,
            seq - 1,
            &format!("round {round} reopened"),
        );
        let got: Vec<_> = got.into_iter().map(|t| (t.start, t.end, t.seq.0)).collect();
        assert_eq!(got, tombstones);
        assert_eq!(reopened.committed(), SeqNo(seq - 1));
        assert_eq!(reopened.min_seq(), Some(SeqNo(1)));
        pwb = reopened;
    }
    assert!(pwb.index().leaves() > 1, "the RH-tree split");
}

impl Pwb {
    /// The bytes of the region, as a crash keeping every store would leave them.
    fn region_image(&self) -> Vec<u8> {
        let mut b = vec![0u8; self.region.len()];
        self.region.read(0, &mut b).unwrap();
        b
    }
}

#[test]
fn a_batch_is_visible_only_once_committed_and_iterators_keep_their_run() {
    let (_, pwb) = new_buffer(64 << 10);
    commit_batch(&pwb, 1, &[(b"a".to_vec(), ValueKind::Value, b"1".to_vec())]).unwrap();
    let mut early = pwb.iter();
    early.seek_to_first().unwrap();
    pwb.insert(b"a", SeqNo(2), ValueKind::Value, b"2").unwrap();
    pwb.insert(b"b", SeqNo(3), ValueKind::Value, b"3").unwrap();
    assert_eq!(
        pwb.newest(b"a", SeqNo(9)).unwrap(),
        Some((ValueKind::Value, SeqNo(1), b"1".to_vec()))
    );
    assert_eq!(pwb.newest(b"b", SeqNo(9)).unwrap(), None);
    pwb.commit(SeqNo(3)).unwrap();
    assert_eq!(
        pwb.newest(b"a", SeqNo(9)).unwrap(),
        Some((ValueKind::Value, SeqNo(2), b"2".to_vec()))
    );
    assert_eq!(
        pwb.newest(b"a", SeqNo(1)).unwrap(),
        Some((ValueKind::Value, SeqNo(1), b"1".to_vec()))
    );
    // The iterator positioned before the commit keeps the run it took.
    early.next().unwrap();
    assert!(!early.valid());
    assert_eq!(scan(&pwb).len(), 3);
    assert_eq!(pwb.entries(), 3);
}

/// Runs random batches until the region's `plan` fails one; returns the model of the
/// batches acknowledged, the failed batch and its first sequence number.
fn run_until_failure(
    region: &Arc<SimulatedRegion>,
    pwb: &Pwb,
    seed: u64,
) -> (Model, u64, Option<Vec<Op>>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model = Model::new();
    let mut seq = 1;
    for _ in 0..40 {
        let batch = random_batch(&mut rng);
        match commit_batch(pwb, seq, &batch) {
            Ok(last) => {
                add_to_model(&mut model, seq, &batch);
                seq = last + 1;
            }
            Err(_) => return (model, seq, Some(batch)),
        }
    }
    let _ = region;
    (model, seq, None)
}

fn policies(seed: u64) -> [CrashPolicy; 4] {
    [
        CrashPolicy::KeepAll,
        CrashPolicy::DropUnpersisted,
        CrashPolicy::Random { seed },
        CrashPolicy::Random { seed: !seed },
    ]
}

#[test]
fn a_crash_at_every_write_and_persist_keeps_the_acknowledged_batches_and_all_or_nothing_of_the_failed_one()
 {
    // Count the calls of a full run first.
    let (region, pwb) = new_buffer(64 << 10);
    let (_, _, failed) = run_until_failure(&region, &pwb, 5);
    assert!(failed.is_none());
    let (_, persists, writes) = region.fault_plan().op_counts();
    let mut checked = 0;
    for fail_writes in [false, true] {
        let calls = if fail_writes { writes } else { persists };
        for n in (0..calls).step_by(3) {
            let region = Arc::new(SimulatedRegion::new(region_len(64 << 10) as usize));
            let pwb = Pwb::create(region.clone(), PATH, 7).unwrap();
            let after = if fail_writes {
                region.fault_plan().op_counts().2 + n
            } else {
                region.persist_count() + n
            };
            if fail_writes {
                region.fail_writes_after(Some(after));
            } else {
                region.fail_persist_after(Some(after));
            }
            let (model, seq, failed) = run_until_failure(&region, &pwb, 5);
            let Some(failed) = failed else { continue };
            let mut with_failed = model.clone();
            add_to_model(&mut with_failed, seq, &failed);
            for policy in policies(n) {
                let what = format!(
                    "fail {} after {n}, {policy:?}",
                    if fail_writes { "writes" } else { "persists" }
                );
                let (_, got, _) =
                    reopen(region.crash_image(policy)).unwrap_or_else(|e| panic!("{what}: {e}"));
                let last = got.committed().0;
                let want = if last >= seq { &with_failed } else { &model };
                assert_agrees(&got, want, last, &what);
                // The reopened buffer takes writes after the recovered ones.
                let next = last + 1;
                commit_batch(
                    &got,
                    next,
                    &[(b"key000".to_vec(), ValueKind::Value, b"after".to_vec())],
                )
                .unwrap();
                assert_eq!(
                    got.newest(b"key000", SeqNo(next)).unwrap(),
                    Some((ValueKind::Value, SeqNo(next), b"after".to_vec())),
                    "{what}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 20, "{checked} crashes checked");
}

#[test]
fn a_batch_the_tree_named_before_its_commit_word_is_undone_at_open() {
    let (region, pwb) = new_buffer(64 << 10);
    commit_batch(&pwb, 1, &[(b"a".to_vec(), ValueKind::Value, b"1".to_vec())]).unwrap();
    pwb.insert(b"a", SeqNo(2), ValueKind::Value, b"2").unwrap();
    pwb.insert(b"b", SeqNo(3), ValueKind::Value, b"3").unwrap();
    // Every store after the tree's last slot fails: the commit word is never published and
    // the commit's own undo cannot write either.
    let mut w = pwb.writer.lock();
    let from = LOG_START + w.pending[0].offset as usize;
    region
        .persist(from, LOG_START + w.tail as usize - from)
        .unwrap();
    for p in &w.pending {
        pwb.index
            .insert(&p.key, pwb.location(p.offset, u64::from(p.len)))
            .unwrap();
    }
    w.pending.clear();
    drop(w);
    let (_, got, _) = reopen(region.crash_image(CrashPolicy::KeepAll)).unwrap();
    assert_eq!(
        got.newest(b"a", SeqNo(9)).unwrap(),
        Some((ValueKind::Value, SeqNo(1), b"1".to_vec()))
    );
    assert_eq!(got.newest(b"b", SeqNo(9)).unwrap(), None);
    assert_eq!(got.index().len(), 1);
    assert_eq!(got.committed(), SeqNo(1));
    // Its records are overwritten by the next batch.
    commit_batch(&got, 2, &[(b"c".to_vec(), ValueKind::Value, b"x".to_vec())]).unwrap();
    assert_eq!(got.newest(b"b", SeqNo(9)).unwrap(), None);
    assert_eq!(scan(&got).len(), 2);
}

#[test]
fn a_full_log_refuses_the_insert_with_a_distinct_error_and_has_room_says_so_first() {
    let (_, pwb) = new_buffer(4096);
    let mut seq = 1;
    let value = vec![7u8; 500];
    while pwb.has_room(500 + 200) {
        commit_batch(
            &pwb,
            seq,
            &[(
                format!("k{seq}").into_bytes(),
                ValueKind::Value,
                value.clone(),
            )],
        )
        .unwrap();
        seq += 1;
    }
    assert!(seq > 3);
    let big = vec![0u8; 8192];
    let err = pwb
        .insert(b"x", SeqNo(seq), ValueKind::Value, &big)
        .unwrap_err();
    assert!(matches!(err, Error::MemtableFull { .. }), "{err}");
    // Nothing was stored: the next batch commits.
    commit_batch(
        &pwb,
        seq,
        &[(b"y".to_vec(), ValueKind::Value, b"1".to_vec())],
    )
    .unwrap();
    let long = vec![b'k'; rhtree::MAX_KEY_LEN + 1];
    let err = pwb
        .insert(&long, SeqNo(seq + 1), ValueKind::Value, b"v")
        .unwrap_err();
    assert!(err.to_string().contains("longer than"), "{err}");
}

#[test]
fn a_damaged_record_is_reported_at_its_offset_and_a_damaged_tree_is_rebuilt_from_the_log() {
    let (region, pwb) = new_buffer(64 << 10);
    commit_batch(
        &pwb,
        1,
        &[(b"apple".to_vec(), ValueKind::Value, b"red".to_vec())],
    )
    .unwrap();
    commit_batch(
        &pwb,
        2,
        &[(b"berry".to_vec(), ValueKind::Value, b"blue".to_vec())],
    )
    .unwrap();
    let image = region.crash_image(CrashPolicy::KeepAll);
    let second = (LOG_START + record_len(5, 3)) as u64;
    let mut bad = image.clone();
    bad[second as usize + RECORD_HEADER_LEN + 6] ^= 1;
    let err = reopen(bad).unwrap_err();
    match &err {
        Error::Corruption { site, .. } => assert_eq!(site.offset, second, "{err}"),
        e => panic!("{e}"),
    }
    // The RH-tree's header damaged: rebuilt from the log, same answers.
    let mut bad = image.clone();
    let tree = LOG_START + pwb.log_len as usize;
    bad[tree] ^= 0xff;
    let (_, got, _) = reopen(bad).unwrap();
    assert_eq!(
        got.newest(b"berry", SeqNo(9)).unwrap(),
        Some((ValueKind::Value, SeqNo(2), b"blue".to_vec()))
    );
    assert_eq!(got.index().len(), 2);
    // A damaged header is refused.
    let mut bad = image;
    bad[OFF_LOG_LEN] ^= 1;
    assert!(matches!(reopen(bad).unwrap_err(), Error::Corruption { .. }));
}

#[test]
fn readers_see_whole_batches_while_a_writer_commits() {
    let (_, pwb) = new_buffer(1 << 20);
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                while !done.load(Ordering::Relaxed) {
                    let seen = pwb.committed();
                    // Each batch writes "a" and "b" with the same value.
                    let a = pwb.newest(b"a", seen).unwrap();
                    let b = pwb.newest(b"b", seen).unwrap();
                    if let (Some(a), Some(b)) = (a, b) {
                        assert_eq!(a.2, b.2);
                    }
                }
            });
        }
        let mut seq = 1;
        for i in 0..2000u32 {
            let v = i.to_le_bytes().to_vec();
            seq = commit_batch(
                &pwb,
                seq,
                &[
                    (b"a".to_vec(), ValueKind::Value, v.clone()),
                    (b"b".to_vec(), ValueKind::Value, v),
                ],
            )
            .unwrap()
                + 1;
        }
        done.store(true, Ordering::Relaxed);
    });
}

/// The worked example of docs/format/pwb.md.
fn golden_buffer() -> (Arc<SimulatedRegion>, Arc<Pwb>) {
    let (region, pwb) = new_buffer(4096);
    commit_batch(
        &pwb,
        1,
        &[
            (b"apple".to_vec(), ValueKind::Value, b"red".to_vec()),
            (b"cherry".to_vec(), ValueKind::Value, b"dark".to_vec()),
        ],
    )
    .unwrap();
    commit_batch(
        &pwb,
        3,
        &[(b"apple".to_vec(), ValueKind::Deletion, Vec::new())],
    )
    .unwrap();
    (region, pwb)
}

#[test]
fn golden_buffer_matches_the_format_doc() {
    let doc = include_str!("../../../../../docs/format/pwb.md");
    let blocks = crate::golden::hex_blocks(doc);
    let (region, pwb) = golden_buffer();
    let image = region.crash_image(CrashPolicy::KeepAll);
    let header = &image[..OFF_COMMITTED + 8];
    let log = &image[LOG_START..LOG_START + pwb.used_bytes() as usize];
    for (i, (got, name)) in [(header, "header"), (log, "log")].into_iter().enumerate() {
        assert_eq!(
            got,
            &blocks[i][..],
            "docs/format/pwb.md is out of date; the {name} now holds:\n{}",
            crate::golden::hex_lines(got)
        );
    }
    assert!(
        image[LOG_START + log.len()..LOG_START + pwb.log_len as usize]
            .iter()
            .all(|&b| b == 0)
    );
    assert_eq!(
        pwb.newest(b"apple", SeqNo(2)).unwrap(),
        Some((ValueKind::Value, SeqNo(1), b"red".to_vec()))
    );
    assert_eq!(
        pwb.newest(b"apple", SeqNo(3)).unwrap(),
        Some((ValueKind::Deletion, SeqNo(3), Vec::new()))
    );
}
