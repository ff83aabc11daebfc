//! `Db::updates_since` (RocksDB's `GetUpdatesSince`) and WAL retention
//! (`Options::wal_retention_segments`, docs/decisions/0013): the batches committed from a
//! sequence number on come back exactly, in order and without gaps, across memtable switches,
//! flushes, reopens and crashes; a sequence number the WAL no longer holds is refused; the
//! segments an open iterator needs are neither recycled nor deleted; retained segments are never
//! replayed; and a replica that applies the batches equals the primary.

use std::collections::BTreeMap;

use matrixkv::tier::{CrashPolicy, FastTier, FsCrashMode, MemFs, SimFastTier};
use matrixkv::{BatchOp, Db, Error, Options, SeqNo, WriteBatch, WriteOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

mod common;

/// The operations of a batch: key and new value (`None` = delete).
type Ops = Vec<(Vec<u8>, Option<Vec<u8>>)>;
/// Committed batches: first sequence number and operations.
type History = Vec<(u64, Ops)>;
type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn sim_options(fs: &MemFs, fast: &SimFastTier, retention: usize) -> Options {
    let mut o = common::small_options(std::path::Path::new("/db"));
    o.wal_retention_segments = retention;
    common::on_simulated_tiers(o, fs, fast)
}

fn ops_of(b: &WriteBatch) -> Ops {
    b.iter()
        .map(|op| match op {
            BatchOp::Put { key, value } => (key.to_vec(), Some(value.to_vec())),
            BatchOp::Delete { key } => (key.to_vec(), None),
            other => panic!("unexpected operation {other:?}"),
        })
        .collect()
}

fn batch_of(ops: &Ops) -> WriteBatch {
    let mut b = WriteBatch::new();
    for (k, v) in ops {
        match v {
            Some(v) => b.put(k, v),
            None => b.delete(k),
        }
    }
    b
}

fn apply(model: &mut Model, ops: &Ops) {
    for (k, v) in ops {
        match v {
            Some(v) => model.insert(k.clone(), v.clone()),
            None => model.remove(k),
        };
    }
}

/// Writes `n` random batches of 1–5 operations (puts of 50–400 bytes and some deletes) from
/// one thread, so each is one WAL record, and returns them with their first sequence numbers.
/// Every value is unique (it names `tag` and a counter), so an older value coming back shows.
fn write_batches(db: &Db, rng: &mut StdRng, n: usize, tag: &str, sync: bool) -> History {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let mut ops = Ops::new();
        for j in 0..rng.gen_range(1..=5) {
            let key = format!("key{:04}", rng.gen_range(0..300)).into_bytes();
            if rng.gen_ratio(1, 6) {
                ops.push((key, None));
            } else {
                let mut v = format!("{tag}-{i}-{j}-").into_bytes();
                v.resize(rng.gen_range(50..400), b'a' + (i % 26) as u8);
                ops.push((key, Some(v)));
            }
        }
        db.write_opt(batch_of(&ops), &WriteOptions { sync })
            .expect("write");
        let first = db.last_sequence().0 + 1 - ops.len() as u64;
        out.push((first, ops));
    }
    out
}

/// Everything `updates_since(seq)` returns.
fn updates(db: &Db, seq: u64) -> History {
    db.updates_since(SeqNo(seq))
        .expect("updates_since")
        .map(|r| {
            let (s, b) = r.expect("batch");
            (s.0, ops_of(&b))
        })
        .collect()
}

/// The batches of `history` from the one holding `seq` on.
fn expected_from(history: &[(u64, Ops)], seq: u64) -> History {
    history
        .iter()
        .filter(|(first, ops)| first + ops.len() as u64 > seq)
        .cloned()
        .collect()
}

/// The oldest sequence number the WAL holds, read from the error for sequence number 1 (1 if
/// there is no error).
fn oldest_held(db: &Db) -> u64 {
    match db.updates_since(SeqNo(1)) {
        Ok(_) => 1,
        Err(Error::InvalidArgument(msg)) => msg
            .split("the oldest sequence number it holds is ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no oldest sequence number in: {msg}")),
        Err(e) => panic!("updates_since(1): {e}"),
    }
}

fn wal_segments(fast: &SimFastTier) -> Vec<u64> {
    let mut n: Vec<u64> = fast
        .list()
        .expect("list")
        .iter()
        .filter_map(|name| name.strip_suffix(".wal")?.parse().ok())
        .collect();
    n.sort_unstable();
    n
}

/// Polls (up to 10 s) until `cond` holds.
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !cond() {
        assert!(std::time::Instant::now() < deadline, "timed out: {what}");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

fn check_model(db: &Db, model: &Model, ctx: &str) {
    let mut it = db.iter().expect("iter");
    it.seek_to_first().expect("seek");
    let mut got = Model::new();
    while it.valid() {
        got.insert(it.key().to_vec(), it.value().to_vec());
        it.next().expect("next");
    }
    assert!(got == *model, "{ctx}: the database differs from the model");
}

#[test]
fn returns_exactly_the_batches_from_a_sequence_number_across_memtable_switches_and_flushes() {
    let fs = MemFs::new();
    let fast = SimFastTier::new("/db/fast");
    let db = Db::open(sim_options(&fs, &fast, 64)).expect("open");
    let mut rng = StdRng::seed_from_u64(0x5eed_0001);
    let mut history = History::new();
    for round in 0..8 {
        history.extend(write_batches(
            &db,
            &mut rng,
            80,
            &format!("r{round}"),
            false,
        ));
        if round % 3 == 2 {
            db.flush().expect("flush");
        }
    }
    let s = db.stats();
    assert!(s.flushes >= 4, "too few flushes to test retention: {s}");
    assert!(wal_segments(&fast).len() >= 5, "{:?}", wal_segments(&fast));
    let last = db.last_sequence().0;
    assert_eq!(
        history.last().map(|(f, o)| f + o.len() as u64 - 1),
        Some(last)
    );
    // Every batch from the first, from batch starts, from inside batches, and past the end.
    let mut starts: Vec<u64> = vec![0, 1, 2, last, last + 1, last + 100];
    starts.extend(history.iter().step_by(37).map(|(f, _)| *f));
    starts.extend(
        history
            .iter()
            .filter(|(_, ops)| ops.len() >= 3)
            .step_by(29)
            .map(|(f, _)| f + 1),
    );
    for seq in starts {
        let got = updates(&db, seq);
        let want = expected_from(&history, seq);
        assert_eq!(got.len(), want.len(), "from {seq}");
        assert!(got == want, "from {seq}: the batches differ");
        if seq <= last {
            // The first batch holds `seq` (and starts before it when `seq` is inside it).
            let (first, ops) = &got[0];
            assert!(*first <= seq.max(1) && seq < first + ops.len() as u64);
        } else {
            assert!(got.is_empty());
        }
    }
    db.close().expect("close");
}

#[test]
fn sequence_numbers_follow_on_without_a_gap_and_end_at_the_last_visible_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut o = common::small_options(dir.path());
    o.wal_retention_segments = 32;
    let db = Db::open(o).expect("open");
    // Concurrent writers: their batches are group-committed into shared WAL records.
    const WRITERS: usize = 4;
    const BATCHES: usize = 250;
    std::thread::scope(|s| {
        for w in 0..WRITERS {
            let db = &db;
            s.spawn(move || {
                for i in 0..BATCHES {
                    let mut b = WriteBatch::new();
                    for j in 0..3 {
                        b.put(format!("w{w}-{i:04}-{j}"), vec![b'x'; 200]);
                    }
                    db.write(b).expect("write");
                }
            });
        }
    });
    let end = db.last_sequence().0;
    assert_eq!(end, (WRITERS * BATCHES * 3) as u64);
    let it = db.updates_since(SeqNo(1)).expect("updates_since");
    // Writes after the iterator was created are not returned.
    db.put("later", "x").expect("put");
    let mut next = 1;
    let mut per_writer: Vec<Vec<String>> = vec![Vec::new(); WRITERS];
    for r in it {
        let (seq, batch) = r.expect("batch");
        assert_eq!(seq.0, next, "a gap or an overlap before {seq}");
        next += batch.len() as u64;
        // Each writer's batch lies whole inside one returned batch, its operations in order.
        let keys: Vec<String> = ops_of(&batch)
            .into_iter()
            .map(|(k, _)| String::from_utf8(k).expect("utf8"))
            .collect();
        assert_eq!(keys.len() % 3, 0);
        for chunk in keys.chunks(3) {
            let w: usize = chunk[0][1..2].parse().expect("writer");
            let stem = &chunk[0][..chunk[0].len() - 1];
            for (j, k) in chunk.iter().enumerate() {
                assert_eq!(*k, format!("{stem}{j}"), "a batch was split: {chunk:?}");
            }
            per_writer[w].push(stem.to_owned());
        }
    }
    assert_eq!(
        next,
        end + 1,
        "the iterator did not end at the last visible write"
    );
    for (w, stems) in per_writer.iter().enumerate() {
        let want: Vec<String> = (0..BATCHES).map(|i| format!("w{w}-{i:04}-")).collect();
        assert!(*stems == want, "writer {w}'s batches out of order");
    }
    db.close().expect("close");
}

#[test]
fn a_sequence_number_older_than_the_wal_holds_is_refused_naming_the_oldest_one() {
    let fs = MemFs::new();
    let fast = SimFastTier::new("/db/fast");
    let db = Db::open(sim_options(&fs, &fast, 1)).expect("open");
    let mut rng = StdRng::seed_from_u64(0x5eed_0002);
    let mut history = History::new();
    for round in 0..4 {
        history.extend(write_batches(
            &db,
            &mut rng,
            150,
            &format!("r{round}"),
            false,
        ));
        db.flush().expect("flush");
    }
    // One retained segment and the active one, once obsolete-file deletion caught up.
    wait_until("retention trimmed to one segment", || {
        wal_segments(&fast).len() == 2
    });
    let oldest = oldest_held(&db);
    assert!(oldest > 1, "nothing was dropped");
    match db.updates_since(SeqNo(oldest - 1)) {
        Err(Error::InvalidArgument(msg)) => {
            assert!(msg.contains(&format!("is {oldest} ")), "{msg}");
            assert!(msg.contains("checkpoint"), "{msg}");
        }
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    let got = updates(&db, oldest);
    assert_eq!(got.first().map(|(f, _)| *f), Some(oldest));
    assert!(got == expected_from(&history, oldest));
    // Without retention, only the unflushed writes are held: after a flush, nothing before
    // the next write; past the last sequence number the iterator is empty.
    db.close().expect("close");
    let db = Db::open(sim_options(&fs, &fast, 0)).expect("reopen");
    db.flush().expect("flush");
    wait_until("no segment retained", || wal_segments(&fast).len() == 1);
    let last = db.last_sequence().0;
    assert_eq!(oldest_held(&db), last + 1);
    assert!(db.updates_since(SeqNo(last)).is_err());
    assert!(updates(&db, last + 1).is_empty());
    let more = write_batches(&db, &mut rng, 5, "after", false);
    assert!(updates(&db, last + 1) == more);
    db.close().expect("close");
}

#[test]
fn segments_an_open_iterator_still_needs_are_neither_recycled_nor_deleted() {
    let fs = MemFs::new();
    let fast = SimFastTier::new("/db/fast");
    // No retention: without the pin the segment would be recycled at the first flush.
    let db = Db::open(sim_options(&fs, &fast, 0)).expect("open");
    let mut rng = StdRng::seed_from_u64(0x5eed_0003);
    // Fewer bytes than a memtable: all in the first segment.
    let early = write_batches(&db, &mut rng, 40, "early", false);
    let pinned = wal_segments(&fast)[0];
    let mut it = db.updates_since(SeqNo(1)).expect("updates_since");
    let first = it.next().expect("a batch").expect("no error");
    assert_eq!((first.0.0, ops_of(&first.1)), early[0].clone());
    // Many memtable switches, flushes and recycled segments later...
    for round in 0..6 {
        write_batches(&db, &mut rng, 120, &format!("r{round}"), false);
        db.flush().expect("flush");
    }
    assert!(
        db.stats().wal_segments_recycled >= 3,
        "no recycling: {}",
        db.stats()
    );
    assert!(
        wal_segments(&fast).contains(&pinned),
        "the pinned segment {pinned} is gone: {:?}",
        wal_segments(&fast)
    );
    // ...the iterator still reads it, and ends where the database was when it was created.
    let rest: History = it
        .map(|r| r.map(|(s, b)| (s.0, ops_of(&b))).expect("batch"))
        .collect();
    assert!(rest == early[1..], "the pinned segment's batches differ");
    // The iterator ended: the segment is let go at the next pass of obsolete-file deletion.
    write_batches(&db, &mut rng, 120, "after", false);
    db.flush().expect("flush");
    wait_until("the released segment goes", || {
        !wal_segments(&fast).contains(&pinned)
    });
    // An iterator dropped before its end lets go too.
    write_batches(&db, &mut rng, 5, "pin", false);
    let held = *wal_segments(&fast).last().expect("the active segment");
    let it = db.updates_since(db.last_sequence()).expect("updates_since");
    write_batches(&db, &mut rng, 300, "more", false);
    db.flush().expect("flush");
    assert!(wal_segments(&fast).contains(&held));
    drop(it);
    write_batches(&db, &mut rng, 120, "last", false);
    db.flush().expect("flush");
    wait_until("the dropped iterator's segment goes", || {
        !wal_segments(&fast).contains(&held)
    });
    db.close().expect("close");
}

#[test]
fn an_iterator_lets_go_of_the_segments_it_has_read() {
    let fs = MemFs::new();
    let fast = SimFastTier::new("/db/fast");
    let db = Db::open(sim_options(&fs, &fast, 2)).expect("open");
    let mut rng = StdRng::seed_from_u64(0x5eed_0004);
    for round in 0..3 {
        write_batches(&db, &mut rng, 150, &format!("r{round}"), false);
        db.flush().expect("flush");
    }
    let tail = write_batches(&db, &mut rng, 10, "tail", false);
    let before = wal_segments(&fast);
    let active = *before.last().expect("a segment");
    assert!(before.len() >= 3, "{before:?}");
    let oldest = oldest_held(&db);
    let mut it = db.updates_since(SeqNo(oldest)).expect("updates_since");
    // Read up to the active segment's batches (the last ten).
    for r in it.by_ref() {
        let (seq, _) = r.expect("batch");
        if seq.0 == tail[0].0 {
            break;
        }
    }
    for round in 0..4 {
        write_batches(&db, &mut rng, 150, &format!("s{round}"), false);
        db.flush().expect("flush");
    }
    // The segments behind the iterator go; the one it reads stays.
    wait_until("the segments read are let go", || {
        wal_segments(&fast).iter().all(|n| *n >= active)
    });
    assert!(wal_segments(&fast).contains(&active));
    let rest: History = it
        .map(|r| r.map(|(s, b)| (s.0, ops_of(&b))).expect("batch"))
        .collect();
    assert!(rest == tail[1..]);
    db.close().expect("close");
}

#[test]
fn a_segment_kept_past_the_retention_for_an_iterator_is_not_offered_to_new_ones() {
    let fs = MemFs::new();
    let fast = SimFastTier::new("/db/fast");
    let db = Db::open(sim_options(&fs, &fast, 1)).expect("open");
    let mut rng = StdRng::seed_from_u64(0x5eed_0005);
    let mut history = History::new();
    history.extend(write_batches(&db, &mut rng, 150, "r0", false));
    db.flush().expect("flush");
    wait_until("retention trimmed to one segment", || {
        wal_segments(&fast).len() == 2
    });
    let old = wal_segments(&fast)[0];
    let from = oldest_held(&db);
    let mut it = db.updates_since(SeqNo(from)).expect("updates_since");
    let end_then = db.last_sequence().0;
    let first = it.next().expect("a batch").expect("no error");
    assert_eq!(first.0.0, from);
    // Newer segments age out past the pinned one: the history has a gap after it.
    for round in 1..5 {
        history.extend(write_batches(
            &db,
            &mut rng,
            150,
            &format!("r{round}"),
            false,
        ));
        db.flush().expect("flush");
    }
    // The segments the last flush made obsolete leave in the background: sample the oldest
    // held once that is done (it stays the same for a while).
    wait_until("retention trimmed past the pinned segment", || {
        let before = oldest_held(&db);
        std::thread::sleep(std::time::Duration::from_millis(100));
        oldest_held(&db) == before
    });
    assert!(wal_segments(&fast).contains(&old));
    let newest = oldest_held(&db);
    assert!(
        newest > end_then + 1,
        "new iterators are offered the segments kept for the old one"
    );
    assert!(db.updates_since(SeqNo(from)).is_err());
    assert!(updates(&db, newest) == expected_from(&history, newest));
    // A crash now, and an open retaining more: the segment beyond the gap is not taken back.
    let (crashed_fs, crashed_fast) =
        fs.crash_with(FsCrashMode::KeepAll, 7, || fast.crash(CrashPolicy::KeepAll));
    // The old iterator still reads its segments whole.
    let rest: History = it
        .map(|r| r.map(|(s, b)| (s.0, ops_of(&b))).expect("batch"))
        .collect();
    let want: History = expected_from(&history, from)
        .into_iter()
        .filter(|(f, ops)| f + ops.len() as u64 - 1 <= end_then)
        .skip(1)
        .collect();
    assert!(!want.is_empty() && rest == want);
    drop(db);
    let db = Db::open(sim_options(&crashed_fs, &crashed_fast, 8)).expect("reopen");
    let after = oldest_held(&db);
    assert!(after > from, "a segment beyond the gap was retained");
    assert!(updates(&db, after) == expected_from(&history, after));
    db.close().expect("close");
}

/// Writes generation `generation` of every key (300 keys, values naming the generation) in
/// batches of 10, returning the batches.
fn write_generation(db: &Db, generation: u32, sync: bool) -> History {
    let mut out = History::new();
    for chunk in (0..300u32).collect::<Vec<_>>().chunks(10) {
        let ops: Ops = chunk
            .iter()
            .map(|k| {
                let mut v = format!("gen{generation:04}-key{k:05}-").into_bytes();
                v.resize(300, b'a' + (generation % 26) as u8);
                (format!("key{k:05}").into_bytes(), Some(v))
            })
            .collect();
        db.write_opt(batch_of(&ops), &WriteOptions { sync })
            .expect("write");
        out.push((db.last_sequence().0 + 1 - ops.len() as u64, ops));
    }
    out
}

#[test]
fn retained_segments_survive_a_reopen_and_are_never_replayed() {
    let fs = MemFs::new();
    let fast = SimFastTier::new("/db/fast");
    let db = Db::open(sim_options(&fs, &fast, 4)).expect("open");
    let mut history = History::new();
    let mut model = Model::new();
    for generation in 0..6 {
        for (f, ops) in write_generation(&db, generation, false) {
            apply(&mut model, &ops);
            history.push((f, ops));
        }
        db.flush().expect("flush");
    }
    wait_until("retention trimmed", || wal_segments(&fast).len() <= 5);
    let oldest = oldest_held(&db);
    let last = db.last_sequence();
    let before = updates(&db, oldest);
    assert!(before == expected_from(&history, oldest));
    assert!(before.len() > 30, "{} batches retained", before.len());
    db.close().expect("close");
    for round in 0..2 {
        let db = Db::open(sim_options(&fs, &fast, 4)).expect("reopen");
        // Not replayed: no older generation resurfaces, no sequence number is reused.
        check_model(&db, &model, &format!("reopen {round}"));
        assert_eq!(db.last_sequence(), last);
        assert_eq!(oldest_held(&db), oldest, "reopen {round}");
        assert!(updates(&db, oldest) == before, "reopen {round}");
        db.close().expect("close");
    }
    // After the reopen the retained segments keep aging out as flushes retire newer ones.
    let db = Db::open(sim_options(&fs, &fast, 4)).expect("reopen");
    for generation in 6..9 {
        for (f, ops) in write_generation(&db, generation, false) {
            apply(&mut model, &ops);
            history.push((f, ops));
        }
        db.flush().expect("flush");
    }
    wait_until("retention trimmed after the reopen", || {
        wal_segments(&fast).len() <= 5
    });
    let newer = oldest_held(&db);
    assert!(newer > oldest);
    assert!(updates(&db, newer) == expected_from(&history, newer));
    check_model(&db, &model, "after more generations");
    db.close().expect("close");
}

#[test]
fn retained_segments_survive_a_crash_and_are_never_replayed() {
    for (mode, policy, sync) in [
        (FsCrashMode::KeepAll, CrashPolicy::KeepAll, false),
        (
            FsCrashMode::DropUnsynced,
            CrashPolicy::DropUnpersisted,
            true,
        ),
        (
            FsCrashMode::RandomTail,
            CrashPolicy::Random { seed: 0x5eed },
            true,
        ),
    ] {
        let mut fs = MemFs::new();
        let mut fast = SimFastTier::new("/db/fast");
        let mut history = History::new();
        let mut generation = 0;
        for round in 0..4u64 {
            let ctx = format!("{mode:?} round {round}");
            let db = Db::open(sim_options(&fs, &fast, 3)).expect("open");
            let recovered = db.last_sequence().0;
            // A power loss may lose a suffix of unsynced writes (none here: every write synced).
            history.retain(|(f, ops)| f + ops.len() as u64 - 1 <= recovered);
            assert_eq!(
                history.last().map_or(0, |(f, o)| f + o.len() as u64 - 1),
                recovered,
                "{ctx}: a synced or acknowledged write was lost"
            );
            let mut model = Model::new();
            for (_, ops) in &history {
                apply(&mut model, ops);
            }
            check_model(&db, &model, &ctx);
            if round > 0 {
                // The retained segments of the run before the crash are still there. The open
                // hands the replayed memtables to the flush thread; each flush retires its
                // segment and may age the oldest retained one out, so the oldest sequence
                // number held moves until they are flushed.
                db.wait_for_compactions()
                    .expect("wait for the replayed memtables' flushes");
                let oldest = oldest_held(&db);
                let got = updates(&db, oldest);
                assert!(got == expected_from(&history, oldest), "{ctx}");
                assert!(got.len() > 30, "{ctx}: only {} batches held", got.len());
            }
            for _ in 0..3 {
                history.extend(write_generation(&db, generation, sync));
                generation += 1;
                db.flush().expect("flush");
            }
            history.extend(write_generation(&db, generation, sync));
            generation += 1;
            // A crash image taken while the database runs (no close).
            let (crashed_fs, crashed_fast) = fs.crash_with(mode, round, || fast.crash(policy));
            drop(db);
            fs = crashed_fs;
            fast = crashed_fast;
        }
    }
}

#[test]
fn a_replica_that_applies_the_updates_equals_the_primary() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut o = common::small_options(&dir.path().join("primary"));
    o.wal_retention_segments = 32;
    let primary = Db::open(o).expect("open primary");
    let replica = Db::open(common::small_options(&dir.path().join("replica"))).expect("replica");
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        for w in 0..2u64 {
            let (primary, done) = (&primary, &done);
            s.spawn(move || {
                let mut rng = StdRng::seed_from_u64(0x5eed_0100 + w);
                for round in 0..6 {
                    write_batches(primary, &mut rng, 100, &format!("w{w}-{round}"), false);
                    if w == 0 {
                        primary.flush().expect("flush");
                    }
                }
                if w == 0 {
                    done.store(true, std::sync::atomic::Ordering::Release);
                }
            });
        }
        // The replication loop: follow the primary from the replica's next sequence number.
        loop {
            let finished = done.load(std::sync::atomic::Ordering::Acquire);
            let from = replica.last_sequence().next();
            for r in primary.updates_since(from).expect("updates_since") {
                let (seq, batch) = r.expect("batch");
                // Whole batches are applied, so the next one starts right after the replica.
                assert_eq!(seq, replica.last_sequence().next());
                replica.write(batch).expect("apply");
            }
            if finished && replica.last_sequence() == primary.last_sequence() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    });
    // The second writer may still have been running: catch up once more.
    for r in primary
        .updates_since(replica.last_sequence().next())
        .expect("updates_since")
    {
        replica.write(r.expect("batch").1).expect("apply");
    }
    assert_eq!(replica.last_sequence(), primary.last_sequence());
    let mut model = Model::new();
    let mut it = primary.iter().expect("iter");
    it.seek_to_first().expect("seek");
    while it.valid() {
        model.insert(it.key().to_vec(), it.value().to_vec());
        it.next().expect("next");
    }
    check_model(&replica, &model, "replica");

    // A replica started from a checkpoint follows from the checkpoint's sequence number.
    let info = primary
        .checkpoint(dir.path().join("ckpt"))
        .expect("checkpoint");
    let mut rng = StdRng::seed_from_u64(0x5eed_0200);
    write_batches(&primary, &mut rng, 200, "after-checkpoint", false);
    let copy = Db::open(common::small_options(&dir.path().join("ckpt"))).expect("open copy");
    assert_eq!(copy.last_sequence(), info.sequence);
    for r in primary
        .updates_since(info.sequence.next())
        .expect("updates_since")
    {
        copy.write(r.expect("batch").1).expect("apply");
    }
    assert_eq!(copy.last_sequence(), primary.last_sequence());
    let mut it = primary.iter().expect("iter");
    it.seek_to_first().expect("seek");
    let mut model = Model::new();
    while it.valid() {
        model.insert(it.key().to_vec(), it.value().to_vec());
        it.next().expect("next");
    }
    check_model(&copy, &model, "replica from a checkpoint");
    copy.close().expect("close");
    replica.close().expect("close");
    primary.close().expect("close");
}
