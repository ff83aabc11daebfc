//! The operations a stress thread draws, each checked against the expected state: writes
//! (put, delete, merge, delete_range, batches across both keyspaces), point reads,
//! multi_get, long-lived iterators and snapshots (kept open over later operations, flushes
//! and compactions, then checked against the state captured when they were made), admin
//! operations (flush, compact_range, sync_wal), checkpoints and backups (restored), and jumps of the TTL clock.
//!
//! Reads lock the slots they check, so a read sees no write in flight to them and the check
//! is exact; views (iterators, snapshots) lock their range only while they are made. Views
//! stay open over other threads' writes, flushes and compactions.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use matrixkv::{DbIterator, ReadOptions, Snapshot};

use super::harness::{Harness, PlanOp, range_end};
use super::rng::Rng;
use super::values::{Val, base_with_class};
use super::verify::{check_point, check_range, scan};

/// A view kept open by a thread: a range of one keyspace and its values when the view was
/// made, read later through an iterator or a snapshot.
struct View {
    ks: usize,
    lo: usize,
    hi: usize,
    expected: Vec<Val>,
    /// The TTL clock when the view was made: a view of the TTL keyspace is not checked after
    /// a jump (reads would see the values expire).
    clock_ms: u64,
    reader: Reader,
    /// Operations of the thread left before the view is checked.
    ops_left: u32,
}

enum Reader {
    Iter(Box<DbIterator>),
    Snap(Snapshot),
}

/// One stress thread: draws and checks operations until the harness stops.
pub fn run_thread(h: &Harness, id: usize, seed: u64) {
    let mut rng = Rng::fork(seed, 1000 + id as u64);
    let mut views: Vec<View> = Vec::new();
    let mut last_checkpoint = Instant::now();
    let mut last_jump = Instant::now();
    while !h.stopped() {
        let r = step(
            h,
            id,
            &mut rng,
            &mut views,
            &mut last_checkpoint,
            &mut last_jump,
        );
        if let Err(e) = r {
            h.fail(format!("thread {id}: {e:#}"));
        }
    }
}

fn step(
    h: &Harness,
    id: usize,
    rng: &mut Rng,
    views: &mut Vec<View>,
    last_checkpoint: &mut Instant,
    last_jump: &mut Instant,
) -> Result<()> {
    if let Some(i) = views.iter().position(|v| v.ops_left == 0) {
        let v = views.swap_remove(i);
        return check_view(h, rng, v);
    }
    for v in views.iter_mut() {
        v.ops_left -= 1;
    }
    if id == 0 {
        if let Some(dir) = &h.checkpoint_dir
            && last_checkpoint.elapsed() > Duration::from_secs(3)
        {
            let kind = super::verify::copy(h, dir, rng.next_u64())?;
            h.count(kind);
            *last_checkpoint = Instant::now();
            return Ok(());
        }
        if h.ttl_ms.is_some() && h.history.is_none() && last_jump.elapsed() > Duration::from_secs(2)
        {
            *last_jump = Instant::now();
            return jump_clock(h);
        }
    }
    // Odd threads read and hold views; even threads write, read and run admin operations.
    // A view pins the versions it reads (matrix container pages among them), so a thread
    // blocked in a write stall while holding one could keep the stall from ever clearing.
    let dice = if id % 2 == 1 {
        rng.range(48, 87)
    } else {
        match rng.below(88) {
            76.. => 88,
            d => d,
        }
    };
    match dice {
        0..25 => put(h, rng),
        25..30 => delete(h, rng),
        30..38 => merge(h, rng),
        38..40 => delete_range(h, rng),
        40..48 => batch(h, rng),
        48..68 => get(h, rng),
        68..76 => multi_get(h, rng),
        76..88 => {
            if views.len() < 2 {
                views.push(make_view(h, rng)?);
            }
            Ok(())
        }
        _ => admin(h, rng),
    }
}

fn sync(h: &Harness, rng: &mut Rng) -> bool {
    rng.one_in(h.sync_one_in)
}

/// A random base in a size class drawn by the run's weights.
fn base(h: &Harness, rng: &mut Rng) -> u32 {
    let total: u64 = h.size_weights.iter().sum();
    let mut x = rng.below(total.max(1));
    let mut class = 0;
    for (i, w) in h.size_weights.iter().enumerate() {
        if x < *w {
            class = i;
            break;
        }
        x -= w;
    }
    base_with_class(rng.next_u64() as u32, class as u32)
}

fn put_op(h: &Harness, rng: &mut Rng, slot: usize) -> PlanOp {
    if h.space.is_counter(slot) {
        PlanOp::Put(slot, (rng.next_u64() as u32) >> 1)
    } else {
        PlanOp::Put(slot, base(h, rng))
    }
}

fn put(h: &Harness, rng: &mut Rng) -> Result<()> {
    h.count("put");
    let slot = rng.index(h.space.slots());
    let op = put_op(h, rng, slot);
    h.write(&[op], sync(h, rng))
}

fn delete(h: &Harness, rng: &mut Rng) -> Result<()> {
    h.count("delete");
    let slot = rng.index(h.space.slots());
    h.write(&[PlanOp::Delete(slot)], sync(h, rng))
}

fn counter_slot(h: &Harness, rng: &mut Rng) -> usize {
    rng.index(h.space.keys.div_ceil(4)) * 4
}

fn merge(h: &Harness, rng: &mut Rng) -> Result<()> {
    h.count("merge");
    let slot = counter_slot(h, rng);
    let delta = u32::try_from(rng.range(1, 1000)).unwrap_or(1);
    h.write(&[PlanOp::Merge(slot, delta)], sync(h, rng))
}

/// A range of at most `max` slots of keyspace `ks`.
fn range(h: &Harness, rng: &mut Rng, ks: usize, max: usize) -> (usize, usize) {
    let len = 1 + rng.index(max.min(h.space.keys));
    let lo = ks * h.space.keys + rng.index(h.space.keys - len + 1);
    (lo, lo + len)
}

fn delete_range(h: &Harness, rng: &mut Rng) -> Result<()> {
    h.count("delete_range");
    let ks = rng.index(2);
    let (lo, hi) = range(h, rng, ks, 16);
    h.write(&[PlanOp::DeleteRange(lo, hi)], sync(h, rng))
}

/// A batch of 2–8 operations over both keyspaces.
fn batch(h: &Harness, rng: &mut Rng) -> Result<()> {
    h.count("batch");
    let n = rng.range(2, 8);
    let mut plan = Vec::new();
    for i in 0..n {
        let ks = usize::from(i % 2 == 1);
        let slot = ks * h.space.keys + rng.index(h.space.keys);
        plan.push(match rng.below(10) {
            0..5 => put_op(h, rng, slot),
            5..7 => PlanOp::Delete(slot),
            7..9 => PlanOp::Merge(counter_slot(h, rng), 1 + (rng.below(100) as u32)),
            _ => {
                let (lo, hi) = range(h, rng, ks, 4);
                PlanOp::DeleteRange(lo, hi)
            }
        });
    }
    h.write(&plan, sync(h, rng))
}

fn get(h: &Harness, rng: &mut Rng) -> Result<()> {
    h.count("get");
    let slot = rng.index(h.space.slots());
    let ks = h.space.keyspace(slot);
    let _gate = h.gate(ks);
    let _l = h.exp.lock(&[slot]);
    let got = h.ks[ks].get(h.space.key(slot)).context("get")?;
    check_point(&h.space, slot, &h.exp.allowed(slot), got.as_deref())
}

fn multi_get(h: &Harness, rng: &mut Rng) -> Result<()> {
    h.count("multi_get");
    let ks = rng.index(2);
    let n = rng.range(2, 8);
    let slots: Vec<usize> = (0..n)
        .map(|_| ks * h.space.keys + rng.index(h.space.keys))
        .collect();
    let _gate = h.gate(ks);
    let _l = h.exp.lock(&slots);
    let keys: Vec<Vec<u8>> = slots.iter().map(|&s| h.space.key(s)).collect();
    let got = h.ks[ks].multi_get(&keys);
    for (&s, g) in slots.iter().zip(got) {
        let g = g.context("multi_get")?;
        check_point(&h.space, s, &h.exp.allowed(s), g.as_deref()).context("multi_get")?;
    }
    Ok(())
}

/// Makes an iterator or a snapshot over a range, capturing the range's expected values.
fn make_view(h: &Harness, rng: &mut Rng) -> Result<View> {
    let ks = rng.index(2);
    let (lo, hi) = range(h, rng, ks, 64);
    let slots: Vec<usize> = (lo..hi).collect();
    let _gate = h.gate(ks);
    let _l = h.exp.lock(&slots);
    let expected = slots.iter().map(|&s| h.exp.committed(s)).collect();
    let reader = if rng.one_in(2) {
        h.count("iterator");
        let ro = ReadOptions {
            lower_bound: Some(h.space.key(lo)),
            upper_bound: Some(range_end(&h.space, hi)),
            ..ReadOptions::default()
        };
        Reader::Iter(Box::new(h.ks[ks].iter_opt(&ro).context("iterator")?))
    } else {
        h.count("snapshot");
        Reader::Snap(h.db.snapshot())
    };
    Ok(View {
        ks,
        lo,
        hi,
        expected,
        clock_ms: h.exp.clock_ms(),
        reader,
        ops_left: u32::try_from(rng.range(1, 100)).unwrap_or(1),
    })
}

/// Reads a view and checks it against the values captured when it was made.
fn check_view(h: &Harness, rng: &mut Rng, v: View) -> Result<()> {
    let _gate = h.gate(v.ks);
    if v.ks == 1 && h.ttl_ms.is_some() && h.exp.clock_ms() != v.clock_ms {
        return Ok(());
    }
    let allowed = |s: usize| vec![v.expected[s - v.lo]];
    let ks = &h.ks[v.ks];
    let what = match v.reader {
        Reader::Iter(mut it) => {
            let backward = rng.one_in(2);
            let entries = scan(&mut it, backward, v.hi - v.lo)?;
            check_range(&h.space, v.ks, v.lo, v.hi, &entries, &allowed)?;
            "iterator"
        }
        Reader::Snap(snap) => {
            let mut ro = snap.read_options();
            match rng.below(3) {
                0 => {
                    for s in v.lo..v.hi {
                        let got = ks.get_opt(h.space.key(s), &ro)?;
                        check_point(&h.space, s, &allowed(s), got.as_deref())?;
                    }
                }
                1 => {
                    let keys: Vec<Vec<u8>> = (v.lo..v.hi).map(|s| h.space.key(s)).collect();
                    for (s, g) in (v.lo..v.hi).zip(ks.multi_get_opt(&keys, &ro)) {
                        check_point(&h.space, s, &allowed(s), g?.as_deref())?;
                    }
                }
                _ => {
                    ro.lower_bound = Some(h.space.key(v.lo));
                    ro.upper_bound = Some(range_end(&h.space, v.hi));
                    let mut it = ks.iter_opt(&ro)?;
                    let entries = scan(&mut it, rng.one_in(2), v.hi - v.lo)?;
                    check_range(&h.space, v.ks, v.lo, v.hi, &entries, &allowed)?;
                }
            }
            "snapshot"
        }
    };
    h.count(if what == "iterator" {
        "iterator checked"
    } else {
        "snapshot checked"
    });
    Ok(())
}

/// Flush, compaction of a range, or `sync_wal`.
fn admin(h: &Harness, rng: &mut Rng) -> Result<()> {
    match rng.below(40) {
        0 => {
            h.count("flush");
            h.tolerate(
                h.db.flush().context("flush"),
                "flush failed after the fault",
            )
        }
        1 => {
            h.count("compact_range");
            let ks = rng.index(2);
            let (lo, hi) = range(h, rng, ks, h.space.keys);
            let (a, b) = (h.space.key(lo), h.space.key(hi - 1));
            let r = h.ks[ks]
                .compact_range(Some(&a), Some(&b))
                .context("compact_range");
            h.tolerate(r, "compact_range failed after the fault")
        }
        2..6 => {
            h.count("sync_wal");
            h.sync_wal()
        }
        _ => get(h, rng),
    }
}

/// Moves the TTL clock past the TTL: every value of keyspace 1 expires.
fn jump_clock(h: &Harness) -> Result<()> {
    let Some(ttl) = h.ttl_ms else { return Ok(()) };
    h.count("clock jump");
    let _w = h
        .ttl_gate
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let slots: Vec<usize> = (h.space.keys..h.space.slots()).collect();
    let _l = h.exp.lock(&slots);
    // Pending first: a kill before the clock is persisted leaves the values, after it none
    // (one tag: all or none).
    let tag = h.tag();
    for &s in &slots {
        if h.exp.committed(s).base().is_some() {
            h.exp.prepare(s, Val::ABSENT, tag)?;
        }
    }
    let now = h.exp.clock_ms() + ttl + 1000;
    h.exp.set_clock_ms(now)?;
    h.clock.0.store(now, std::sync::atomic::Ordering::Release);
    for &s in &slots {
        if h.exp.pending(s).is_some() {
            h.exp.commit(s, Val::ABSENT)?;
        }
    }
    Ok(())
}
