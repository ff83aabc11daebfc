//! The benchmarks: db_bench's fillrandom, fillseq, overwrite, deleterandom, mergerandom,
//! readrandom, deleterange (range tombstones of 100 keys at random places),
//! readseq, seekrandom, and YCSB's load and run phases, each written once against the
//! [`Engine`] trait and timed by [`runner::run_phase`]; and the conversion of what was
//! measured into a [`BenchResult`].
//!
//! Called by `mod.rs` once per (engine, benchmark). The per-engine [`RunState`] is shared by
//! the worker threads (atomics only; a lock for what the last writing benchmark wrote).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, RwLock};
use std::time::Duration;

use anyhow::{Result, bail};

use super::args::BenchArgs;
use super::engine::{BatchOp, Engine, EngineStats, dir_bytes};
use super::keys::{Chooser, Distribution, Permutation, RecordKeys, Rng, ValueGen, make_key};
use super::metrics::{BenchResult, Latency, ProcIo, latency_cdf, series_stats};
use super::runner::{self, Measured, OpOutcome, Plan};
use super::ycsb::{Workload, YcsbOp};

/// State carried from one benchmark to the next on the same engine.
#[derive(Debug, Default)]
pub struct RunState {
    /// YCSB records inserted so far (load, then inserts of workloads D and E).
    pub ycsb_records: AtomicU64,
    /// db_bench key numbers (`make_key`) put and not deleted since the engine was created.
    pub live_keys: LiveKeys,
    /// YCSB record numbers (`RecordKeys`) put since the engine was created.
    pub live_records: LiveKeys,
    /// What the last benchmark that wrote user bytes wrote, for the settling steps after it.
    pub last_written: Mutex<Option<Written>>,
}

/// The user bytes a benchmark wrote and the bytes the engine wrote for them, on both tiers
/// with the WAL.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    pub benchmark: String,
    pub user_bytes: u64,
    pub engine_bytes: u64,
}

/// What a settling step (`flush`, `waitforcompaction`) wrote (`d`, the engine's counters
/// across it), and the preceding writing benchmark's WA on all tiers without and with it:
/// compaction and blob GC an engine defers past a fill are part of what the fill costs.
pub fn settle_line(step: &str, d: &EngineStats, last: Option<&Written>) -> String {
    let mib = |b: u64| b as f64 / 1_048_576.0;
    let own = d.bytes_written();
    let mut line = format!(
        "{step} wrote {:.1} MiB: slow tier {:.1} MiB, fast-tier tables {:.1} MiB, WAL {:.1} MiB",
        mib(own),
        mib(d.slow_bytes),
        mib(d.fast_table_bytes),
        mib(d.wal_bytes)
    );
    if let Some(w) = last.filter(|w| w.user_bytes > 0) {
        let u = w.user_bytes as f64;
        line.push_str(&format!(
            "; {}'s WA all tiers {:.2} without it, {:.2} with it",
            w.benchmark,
            w.engine_bytes as f64 / u,
            (w.engine_bytes + own) as f64 / u
        ));
    }
    line
}

impl RunState {
    /// Bytes of the live keys and values (every key is `key_size` bytes, every value
    /// `value_size`): exact, from the bitsets. None for an existing database, whose earlier
    /// keys the harness does not know.
    pub fn live_user_bytes(&self, a: &BenchArgs) -> Option<u64> {
        (!a.use_existing_db).then(|| {
            (self.live_keys.count() + self.live_records.count())
                * (a.key_size + a.value_size) as u64
        })
    }
}

/// A set of key numbers (a bitset, grown on demand), updated by the worker threads.
#[derive(Debug, Default)]
pub struct LiveKeys {
    words: RwLock<Vec<AtomicU64>>,
}

impl LiveKeys {
    /// Makes room for key numbers below `n` (so that the workers only take the read lock).
    pub fn reserve(&self, n: u64) {
        let words = usize::try_from(n.div_ceil(64)).unwrap_or(usize::MAX);
        let mut w = self
            .words
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if w.len() < words {
            w.resize_with(words, || AtomicU64::new(0));
        }
    }

    /// Marks key number `i` live (`true`, a put) or not (`false`, a delete).
    pub fn set(&self, i: u64, live: bool) {
        let word = usize::try_from(i / 64).unwrap_or(usize::MAX);
        let bit = 1u64 << (i % 64);
        {
            let w = self
                .words
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(w) = w.get(word) {
                if live {
                    w.fetch_or(bit, Relaxed);
                } else {
                    w.fetch_and(!bit, Relaxed);
                }
                return;
            }
        }
        if live {
            self.reserve(i.saturating_add(1));
            self.set(i, live);
        }
    }

    /// Number of live keys.
    pub fn count(&self) -> u64 {
        self.words
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .map(|w| u64::from(w.load(Relaxed).count_ones()))
            .sum()
    }
}

/// The `i`-th put (from 0) of a thread: a sync write every `--sync_every` puts.
fn put(engine: &dyn Engine, a: &BenchArgs, i: u64, key: &[u8], value: &[u8]) -> Result<()> {
    if a.sync_every > 0 && (i + 1).is_multiple_of(a.sync_every) {
        engine.put_sync(key, value)
    } else {
        engine.put(key, value)
    }
}

/// The engine's footprint now: "live user X MiB, slow tier Y MiB on disk (space
/// amplification Z), fast tier W MiB on disk".
pub fn space_line(engine: &dyn Engine, a: &BenchArgs, state: &RunState) -> String {
    let s = engine.stats();
    let mib = |b: u64| b as f64 / 1_048_576.0;
    let live = state.live_user_bytes(a);
    let slow = s.slow_dir.as_deref().map(dir_bytes);
    let fast = s.fast_dir.as_deref().map(dir_bytes);
    let show = |b: Option<u64>| b.map_or("n/a".to_owned(), |b| format!("{:.1} MiB", mib(b)));
    let amp = match (slow, live) {
        (Some(d), Some(l)) if l > 0 => format!("{:.3}", d as f64 / l as f64),
        _ => "n/a".to_owned(),
    };
    format!(
        "live user {}, slow tier {} on disk (space amplification {amp}), fast tier {} on disk",
        show(live),
        show(slow),
        show(fast)
    )
}

/// Every benchmark name `--benchmarks` accepts.
pub const BENCHMARKS: &[&str] = &[
    "fillrandom",
    "fillseq",
    "overwrite",
    "deleterandom",
    "deleterange",
    "mergerandom",
    "readrandom",
    "multireadrandom",
    "readseq",
    "seekrandom",
    "ycsb_load",
    "ycsba",
    "ycsbb",
    "ycsbc",
    "ycsbd",
    "ycsbe",
    "ycsbf",
    "flush",
    "waitforcompaction",
    "stats",
    "reopen",
];

/// Checks every benchmark name before anything runs.
pub fn check_names(names: &[String]) -> Result<()> {
    for n in names {
        if !BENCHMARKS.contains(&n.as_str()) {
            bail!("unknown benchmark `{n}` (one of {})", BENCHMARKS.join(", "));
        }
    }
    Ok(())
}

type Worker<'a> = Box<dyn FnMut(u64) -> Result<OpOutcome> + 'a>;

/// Key numbers one `deleterange` operation deletes (db_bench's default
/// `--range_tombstone_width`); `--num` keys take `--num / RANGE_WIDTH` operations per thread.
const RANGE_WIDTH: u64 = 100;

/// Runs benchmark `name` (the `index`-th of the run) on `engine`; None for maintenance steps.
pub fn run_benchmark(
    engine: &dyn Engine,
    a: &BenchArgs,
    index: u64,
    name: &str,
    state: &RunState,
    progress: bool,
) -> Result<Option<BenchResult>> {
    match name {
        "flush" | "waitforcompaction" => {
            let before = engine.stats();
            engine.settle()?;
            let d = engine.stats().delta(&before);
            let mut last = state
                .last_written
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            println!(
                "  [{}] {}",
                engine.name(),
                settle_line(name, &d, last.as_ref())
            );
            // The next settling step adds to the same benchmark's cost.
            if let Some(w) = last.as_mut() {
                w.engine_bytes += d.bytes_written();
            }
            drop(last);
            println!(
                "  [{}] after {name}: {}",
                engine.name(),
                space_line(engine, a, state)
            );
            return Ok(None);
        }
        "reopen" => bail!("`reopen` is run by the harness, which owns the engine"),
        "stats" => {
            let s = engine.stats();
            println!("stats: {}", describe_levels(&s.levels));
            println!("stats: {}", space_line(engine, a, state));
            return Ok(None);
        }
        _ => {}
    }
    let threads = a.threads.max(1);
    let ycsb = name.starts_with("ycsb");
    let batch = a.batch_size.max(1) as u64;
    let calls_per_thread = match name {
        "fillrandom" | "fillseq" | "overwrite" | "deleterandom" | "mergerandom" => {
            a.num.div_ceil(batch)
        }
        "ycsb_load" => a.num.div_ceil(threads as u64),
        "multireadrandom" => a.reads().div_ceil(batch),
        "deleterange" => a.num.div_ceil(RANGE_WIDTH),
        _ if ycsb => a.reads().div_ceil(threads as u64),
        _ => a.reads(),
    };
    let plan = Plan {
        name: name.to_owned(),
        threads,
        calls_per_thread,
        duration: (a.duration > 0).then(|| Duration::from_secs(a.duration)),
        rate: (a.rate > 0.0).then_some(a.rate),
        yield_pacer: a.open_loop_pacer == "yield",
        progress,
    };
    // Key numbers below these are set without taking the bitsets' write lock.
    state.live_keys.reserve(a.num.max(1) * threads as u64);
    if ycsb {
        state.live_records.reserve(a.num + a.reads());
    }
    let before = engine.stats();
    let io_before = ProcIo::read(None);
    if ycsb && RecordKeys::new(a.key_size, a.seed).capacity() / 2 < a.num + a.reads() {
        bail!(
            "--key_size={} is too small for {} YCSB records",
            a.key_size,
            a.num + a.reads()
        );
    }
    let mut notes = Vec::new();
    let measured = match name {
        "ycsb_load" => {
            let m = runner::run_phase(engine, &plan, |t| ycsb_load_worker(engine, a, t, state))?;
            state
                .ycsb_records
                .store(a.num.div_ceil(threads as u64) * threads as u64, Relaxed);
            m
        }
        _ if ycsb => {
            let Some(w) = Workload::from_benchmark(name) else {
                bail!("unknown YCSB workload `{name}`");
            };
            if state.ycsb_records.load(Relaxed) == 0 {
                // Run phase without a load in this invocation (e.g. --use_existing_db): assume
                // the records of a load of --num.
                state.ycsb_records.store(a.num, Relaxed);
            }
            let dist = match &a.ycsb_distribution {
                Some(d) => d.parse::<Distribution>().map_err(anyhow::Error::msg)?,
                None => w.distribution,
            };
            notes.push(format!(
                "YCSB workload {}: {} requests over {} records",
                w.letter.to_ascii_uppercase(),
                dist.name(),
                state.ycsb_records.load(Relaxed)
            ));
            runner::run_phase(engine, &plan, |t| {
                ycsb_worker(engine, a, index, t, &w, dist, state)
            })?
        }
        _ => runner::run_phase(engine, &plan, |t| {
            db_bench_worker(engine, a, index, name, t, state)
        })?,
    };
    let after = engine.stats();
    // The footprint at the end of the benchmark (before any later settling).
    let live_user_bytes = state.live_user_bytes(a);
    let slow_dir_bytes = after.slow_dir.as_deref().map(dir_bytes);
    let fast_dir_bytes = after.fast_dir.as_deref().map(dir_bytes);
    let io = match (ProcIo::read(None), io_before) {
        (Some(x), Some(b)) => Some(x.delta(&b)),
        _ => None,
    };
    let mut r = to_result(
        engine.name(),
        name,
        threads,
        measured,
        &before,
        &after,
        io,
        plan.rate,
    );
    r.notes.extend(notes);
    if r.user_bytes > 0 {
        *state
            .last_written
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Written {
            benchmark: name.to_owned(),
            user_bytes: r.user_bytes,
            engine_bytes: r.bytes_written(),
        });
    }
    r.live_user_bytes = live_user_bytes;
    r.slow_dir_bytes = slow_dir_bytes;
    r.fast_dir_bytes = fast_dir_bytes;
    Ok(Some(r))
}

/// Assembles a [`BenchResult`] from a phase's measurements and the engine's counters.
#[allow(clippy::too_many_arguments)]
pub fn to_result(
    engine: &str,
    name: &str,
    threads: usize,
    m: Measured,
    before: &EngineStats,
    after: &EngineStats,
    io: Option<ProcIo>,
    rate: Option<f64>,
) -> BenchResult {
    let d = after.delta(before);
    let seconds = m.elapsed.as_secs_f64();
    let mib = |b: u64| b as f64 / 1_048_576.0;
    let written = m.written;
    let samples = m
        .samples
        .iter()
        .map(|(t, s)| {
            let x = s.delta(before);
            [
                *t,
                x.stall_micros as f64 / 1e6,
                mib(x.slow_bytes),
                mib(x.fast_table_bytes + if x.wal_on_fast { x.wal_bytes } else { 0 }),
                s.l0_files() as f64,
            ]
        })
        .collect();
    let slow_tier_bytes = d.slow_bytes;
    BenchResult {
        engine: engine.to_owned(),
        benchmark: name.to_owned(),
        threads,
        ops: m.ops,
        bytes: m.bytes,
        seconds,
        thread_seconds: m.thread_seconds,
        found: m.found,
        latency: Latency::from_histogram(&m.hist),
        latency_by_op: m
            .by_kind
            .iter()
            .map(|(k, h)| ((*k).to_owned(), Latency::from_histogram(h)))
            .collect(),
        cdf: latency_cdf(&m.hist),
        series: series_stats(&m.per_second, m.ops, seconds),
        per_second: m.per_second,
        samples,
        stall_seconds: d.stall_micros as f64 / 1e6,
        stalls: d.stalls,
        user_bytes: m.written,
        slow_tier_bytes,
        fast_tier_bytes: d.fast_table_bytes,
        wal_bytes: d.wal_bytes,
        wal_on_fast: d.wal_on_fast,
        proc_io: io,
        cpu: m.cpu,
        flushes: d.flushes,
        compactions: d.compactions,
        compaction_input_bytes: d.compaction_input_bytes,
        compaction_output_bytes: d.compaction_output_bytes,
        l0_compactions: d.l0_compactions,
        l0_compaction_input_bytes: d.l0_compaction_input_bytes,
        levels: after.levels.clone(),
        target_rate: rate,
        live_user_bytes: None,
        slow_dir_bytes: None,
        fast_dir_bytes: None,
        // The engine's remarks concern its write counters: only writing benchmarks carry them.
        notes: if written > 0 {
            after.notes.clone()
        } else {
            Vec::new()
        },
        repeat: 0,
        service: m.service.as_ref().map(Latency::from_histogram),
        slow_service: m.slow_service.clone(),
    }
}

/// "L0 3 files 180.0 MiB, L1 ..." for the non-empty levels.
pub fn describe_levels(levels: &[(u64, u64)]) -> String {
    let parts: Vec<String> = levels
        .iter()
        .enumerate()
        .filter(|(_, (n, _))| *n > 0)
        .map(|(i, (n, b))| format!("L{i} {n} files {:.1} MiB", *b as f64 / 1_048_576.0))
        .collect();
    if parts.is_empty() {
        "empty".to_owned()
    } else {
        parts.join(", ")
    }
}

fn db_bench_worker<'a>(
    engine: &'a dyn Engine,
    a: &'a BenchArgs,
    index: u64,
    name: &str,
    t: usize,
    state: &'a RunState,
) -> Result<Worker<'a>> {
    let live = &state.live_keys;
    let mut rng = Rng::for_thread(a.seed, index, t as u64);
    let mut values = ValueGen::new(a.seed ^ t as u64, a.value_size);
    let (ks, vs) = (a.key_size, a.value_size);
    let kv = (ks + vs) as u64;
    let threads = a.threads.max(1) as u64;
    let num = a.num.max(1);
    let batch = a.batch_size.max(1) as u64;
    let t = t as u64;
    // The key number written by call `i`, entry `j` of its batch.
    let perm = Permutation::new(num * threads, a.seed ^ index);
    let unique = a.unique;
    let key_of = move |kind: &str, i: u64, j: u64, rng: &mut Rng| -> u64 {
        let n = i * batch + j;
        match kind {
            "fillseq" => n * threads + t,
            _ if unique => perm.get(t * num + n),
            _ => rng.below(num),
        }
    };
    let merge_keys = a.merge_keys.unwrap_or(num).max(1);
    let w: Worker<'a> = match name {
        "fillrandom" | "fillseq" | "overwrite" => {
            let kind = if name == "fillseq" {
                "fillseq"
            } else {
                "random"
            };
            if batch == 1 {
                Box::new(move |i| {
                    let n = key_of(kind, i, 0, &mut rng);
                    put(engine, a, i, &make_key(n, ks), values.next(vs))?;
                    live.set(n, true);
                    Ok(OpOutcome::write("write", kv))
                })
            } else {
                Box::new(move |i| {
                    let n = batch.min(num - (i * batch).min(num)).max(1);
                    let numbers: Vec<u64> = (0..n).map(|j| key_of(kind, i, j, &mut rng)).collect();
                    let keys: Vec<Vec<u8>> = numbers.iter().map(|&k| make_key(k, ks)).collect();
                    let vals: Vec<Vec<u8>> = (0..n).map(|_| values.next(vs).to_vec()).collect();
                    let ops: Vec<BatchOp<'_>> = keys
                        .iter()
                        .zip(&vals)
                        .map(|(k, v)| BatchOp::Put(k, v))
                        .collect();
                    engine.write_batch(&ops)?;
                    for &k in &numbers {
                        live.set(k, true);
                    }
                    let mut o = OpOutcome::write("write", kv * n);
                    o.count = n;
                    Ok(o)
                })
            }
        }
        "deleterandom" => Box::new(move |i| {
            if batch == 1 {
                let n = key_of("random", i, 0, &mut rng);
                engine.delete(&make_key(n, ks))?;
                live.set(n, false);
                return Ok(OpOutcome::write("delete", ks as u64));
            }
            let n = batch.min(num - (i * batch).min(num)).max(1);
            let numbers: Vec<u64> = (0..n).map(|j| key_of("random", i, j, &mut rng)).collect();
            let keys: Vec<Vec<u8>> = numbers.iter().map(|&k| make_key(k, ks)).collect();
            let ops: Vec<BatchOp<'_>> = keys.iter().map(|k| BatchOp::Delete(k)).collect();
            engine.write_batch(&ops)?;
            for &k in &numbers {
                live.set(k, false);
            }
            let mut o = OpOutcome::write("delete", ks as u64 * n);
            o.count = n;
            Ok(o)
        }),
        "deleterange" => Box::new(move |_| {
            // A range tombstone over RANGE_WIDTH consecutive key numbers from a random one
            // (keys are zero-padded decimal numbers, so the numbers' order is the keys').
            let from = rng.below(num * threads);
            let to = (from + RANGE_WIDTH).min(num * threads);
            let (start, end) = (make_key(from, ks), make_key(to, ks));
            if start >= end {
                // Numbers longer than --key_size digits wrap around: no range to delete.
                return Ok(OpOutcome::write("delete", 0));
            }
            engine.delete_range(&start, &end)?;
            for n in from..to {
                live.set(n, false);
            }
            Ok(OpOutcome::write("delete", 2 * ks as u64))
        }),
        "mergerandom" => Box::new(move |i| {
            // db_bench's mergerandom with --merge_operator=uint64add: every operation adds 1
            // to the counter of a random key among the first `merge_keys`.
            let one = 1u64.to_le_bytes();
            if batch == 1 {
                let n = rng.below(merge_keys);
                engine.merge(&make_key(n, ks), &one)?;
                live.set(n, true);
                return Ok(OpOutcome::write("merge", (ks + one.len()) as u64));
            }
            let n = batch.min(num - (i * batch).min(num)).max(1);
            let numbers: Vec<u64> = (0..n).map(|_| rng.below(merge_keys)).collect();
            let keys: Vec<Vec<u8>> = numbers.iter().map(|&k| make_key(k, ks)).collect();
            let ops: Vec<BatchOp<'_>> = keys.iter().map(|k| BatchOp::Merge(k, &one)).collect();
            engine.write_batch(&ops)?;
            for &k in &numbers {
                live.set(k, true);
            }
            let mut o = OpOutcome::write("merge", (ks + one.len()) as u64 * n);
            o.count = n;
            Ok(o)
        }),
        "readrandom" => Box::new(move |_| {
            let k = make_key(rng.below(num), ks);
            let v = engine.get(&k)?;
            let bytes = v.as_ref().map_or(0, |v| (ks + v.len()) as u64);
            Ok(OpOutcome::read("read", bytes, v.is_some()))
        }),
        "multireadrandom" => Box::new(move |_| {
            // `batch_size` random keys per call, read at one point in time; each key counts
            // as one operation (as in db_bench).
            let keys: Vec<Vec<u8>> = (0..batch).map(|_| make_key(rng.below(num), ks)).collect();
            let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
            let got = engine.multi_get(&refs)?;
            let bytes = got.iter().flatten().map(|v| (ks + v.len()) as u64).sum();
            let mut o = OpOutcome::read("read", bytes, false);
            o.found = Some(got.iter().filter(|v| v.is_some()).count() as u64);
            o.count = batch;
            Ok(o)
        }),
        "seekrandom" => {
            let nexts = a.seek_nexts;
            Box::new(move |_| {
                let k = make_key(rng.below(num), ks);
                if nexts == 0 {
                    let got = engine.seek(&k)?;
                    let bytes = got
                        .as_ref()
                        .map_or(0, |(key, vlen)| key.len() as u64 + vlen);
                    let found = got.is_some_and(|(key, _)| key == k);
                    return Ok(OpOutcome::read("seek", bytes, found));
                }
                let mut c = engine.cursor()?;
                c.seek(&k)?;
                let found = c.valid() && c.key() == k.as_slice();
                let mut bytes = 0u64;
                let mut read = 0;
                while c.valid() && read <= nexts {
                    bytes += (c.key().len() + c.value().len()) as u64;
                    read += 1;
                    if read <= nexts {
                        c.next()?;
                    }
                }
                Ok(OpOutcome::read("seek", bytes, found))
            })
        }
        "readseq" => {
            let mut c = engine.cursor()?;
            c.seek_to_first()?;
            Box::new(move |_| {
                if !c.valid() {
                    c.seek_to_first()?;
                }
                let ok = c.valid();
                let mut bytes = 0;
                if ok {
                    bytes = (c.key().len() + c.value().len()) as u64;
                    c.next()?;
                }
                Ok(OpOutcome::read("read", bytes, ok))
            })
        }
        other => bail!("`{other}` is not a db_bench workload"),
    };
    Ok(w)
}

fn ycsb_load_worker<'a>(
    engine: &'a dyn Engine,
    a: &'a BenchArgs,
    t: usize,
    state: &'a RunState,
) -> Result<Worker<'a>> {
    let rk = RecordKeys::new(a.key_size, a.seed);
    let mut values = ValueGen::new(a.seed ^ t as u64, a.value_size);
    let (ks, vs) = (a.key_size, a.value_size);
    let threads = a.threads.max(1) as u64;
    let t = t as u64;
    Ok(Box::new(move |i| {
        let rec = i * threads + t;
        put(engine, a, i, &rk.key(rec, ks), values.next(vs))?;
        state.live_records.set(rec, true);
        Ok(OpOutcome::write("insert", (ks + vs) as u64))
    }))
}

fn ycsb_worker<'a>(
    engine: &'a dyn Engine,
    a: &'a BenchArgs,
    index: u64,
    t: usize,
    w: &Workload,
    dist: Distribution,
    state: &'a RunState,
) -> Result<Worker<'a>> {
    let rk = RecordKeys::new(a.key_size, a.seed);
    let mut rng = Rng::for_thread(a.seed, index, t as u64);
    let mut values = ValueGen::new(a.seed ^ t as u64, a.value_size);
    let (ks, vs) = (a.key_size, a.value_size);
    let records = state.ycsb_records.load(Relaxed);
    // YCSB sizes the Zipfian key space as the records plus twice the expected inserts.
    let expected_inserts = (a.reads() as f64 * w.insert_proportion() * 2.0) as u64;
    let mut chooser = Chooser::new(dist, records, records + expected_inserts);
    let max_scan = a.ycsb_max_scan_length.max(1) as u64;
    let w = w.clone();
    Ok(Box::new(move |_| {
        let op = w.choose(&mut rng);
        let count = state.ycsb_records.load(Relaxed).max(1);
        let out = match op {
            YcsbOp::Read => {
                let k = rk.key(chooser.next(count, &mut rng), ks);
                let v = engine.get(&k)?;
                let bytes = v.as_ref().map_or(0, |v| (ks + v.len()) as u64);
                OpOutcome::read(op.name(), bytes, v.is_some())
            }
            YcsbOp::Update => {
                let rec = chooser.next(count, &mut rng);
                engine.put(&rk.key(rec, ks), values.next(vs))?;
                state.live_records.set(rec, true);
                OpOutcome::write(op.name(), (ks + vs) as u64)
            }
            YcsbOp::Insert => {
                let rec = state.ycsb_records.fetch_add(1, Relaxed);
                engine.put(&rk.key(rec, ks), values.next(vs))?;
                state.live_records.set(rec, true);
                OpOutcome::write(op.name(), (ks + vs) as u64)
            }
            YcsbOp::Scan => {
                let k = rk.key(chooser.next(count, &mut rng), ks);
                let len = 1 + rng.below(max_scan) as usize;
                let (n, bytes) = engine.scan(&k, len)?;
                OpOutcome::read(op.name(), bytes, n > 0)
            }
            YcsbOp::ReadModifyWrite => {
                let rec = chooser.next(count, &mut rng);
                let k = rk.key(rec, ks);
                let v = engine.get(&k)?;
                engine.put(&k, values.next(vs))?;
                state.live_records.set(rec, true);
                let mut o = OpOutcome::write(op.name(), (ks + vs) as u64);
                o.bytes += v.as_ref().map_or(0, |v| (ks + v.len()) as u64);
                o.found = Some(u64::from(v.is_some()));
                o
            }
        };
        Ok(out)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::engine::{MatrixEngine, Placement};

    /// A matrixkv engine in `dir` opened with the benchmark flags `flags`, and the flags.
    fn engine_in(dir: &std::path::Path, flags: &[&str]) -> (BenchArgs, MatrixEngine) {
        let words: Vec<String> = std::iter::once("bench")
            .chain(flags.iter().copied())
            .map(str::to_owned)
            .collect();
        let a = BenchArgs::parse_words(words).unwrap();
        let place = Placement {
            fast_dir: dir.join("fast"),
            slow_dir: dir.join("slow"),
        };
        let engine = MatrixEngine::open(&a, &place).unwrap();
        (a, engine)
    }

    #[test]
    fn a_settling_step_reports_its_bytes_and_adds_them_to_the_preceding_fills_wa() {
        let mib = 1 << 20;
        let d = EngineStats {
            slow_bytes: 30 * mib,
            fast_table_bytes: 8 * mib,
            wal_bytes: 2 * mib,
            ..EngineStats::default()
        };
        let fill = Written {
            benchmark: "fillrandom".into(),
            user_bytes: 100 * mib,
            engine_bytes: 110 * mib,
        };
        assert_eq!(
            settle_line("waitforcompaction", &d, Some(&fill)),
            "waitforcompaction wrote 40.0 MiB: slow tier 30.0 MiB, fast-tier tables 8.0 MiB, \
             WAL 2.0 MiB; fillrandom's WA all tiers 1.10 without it, 1.50 with it"
        );
        // Nothing written before (a read-only run, an existing database): the bytes only.
        assert_eq!(
            settle_line("flush", &EngineStats::default(), None),
            "flush wrote 0.0 MiB: slow tier 0.0 MiB, fast-tier tables 0.0 MiB, WAL 0.0 MiB"
        );
    }

    #[test]
    fn live_keys_are_set_by_puts_cleared_by_deletes_and_grow_on_demand() {
        let live = LiveKeys::default();
        live.reserve(100);
        for i in [0, 5, 63, 64, 99] {
            live.set(i, true);
        }
        live.set(5, true);
        live.set(63, false);
        live.set(1_000, false); // never set: no growth
        assert_eq!(live.count(), 4);
        live.set(10_000, true);
        assert_eq!(live.count(), 5);
    }

    #[test]
    fn sync_every_makes_every_nth_put_of_a_fill_and_a_load_a_sync_write() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, engine) = engine_in(
            tmp.path(),
            &[
                "--num=1000",
                "--value_size=100",
                "--sync_every=100",
                "--progress=never",
            ],
        );
        let state = RunState::default();
        run_benchmark(&engine, &a, 0, "fillrandom", &state, false).unwrap();
        assert_eq!(engine.db().stats().wal_syncs, 10);
        run_benchmark(&engine, &a, 1, "ycsb_load", &state, false).unwrap();
        assert_eq!(engine.db().stats().wal_syncs, 20);
        // Reads and the other writes are untouched.
        run_benchmark(&engine, &a, 2, "readrandom", &state, false).unwrap();
        run_benchmark(&engine, &a, 3, "deleterandom", &state, false).unwrap();
        assert_eq!(engine.db().stats().wal_syncs, 20);
    }

    #[test]
    fn live_user_bytes_match_the_keys_left_in_the_engine_and_the_dirs_are_measured() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, engine) = engine_in(
            tmp.path(),
            &[
                "--num=3000",
                "--value_size=100",
                "--write_buffer_size=262144",
                "--target_file_size_base=262144",
                "--max_bytes_for_level_base=1048576",
                "--progress=never",
            ],
        );
        let state = RunState::default();
        let mut last = None;
        for (i, name) in ["fillrandom", "deleterandom", "overwrite"]
            .iter()
            .enumerate()
        {
            last = run_benchmark(&engine, &a, i as u64, name, &state, false).unwrap();
        }
        let r = last.unwrap();
        let mut c = engine.cursor().unwrap();
        c.seek_to_first().unwrap();
        let mut keys = 0u64;
        while c.valid() {
            keys += 1;
            c.next().unwrap();
        }
        drop(c);
        assert!(keys > 0 && keys < 3000, "{keys}");
        assert_eq!(r.live_user_bytes, Some(keys * 116));
        assert!(r.slow_dir_bytes.unwrap() > 0);
        assert!(r.fast_dir_bytes.unwrap() > 0);
        assert!(r.space_amplification().is_some());
        Box::new(engine).close().unwrap();
    }

    #[test]
    fn deleterange_removes_whole_ranges_and_the_live_keys_follow() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, engine) = engine_in(
            tmp.path(),
            &["--num=3000", "--value_size=100", "--progress=never"],
        );
        let state = RunState::default();
        run_benchmark(&engine, &a, 0, "fillseq", &state, false).unwrap();
        let r = run_benchmark(&engine, &a, 1, "deleterange", &state, false)
            .unwrap()
            .unwrap();
        assert_eq!(r.ops, 30, "--num / 100 range deletes");
        let mut c = engine.cursor().unwrap();
        c.seek_to_first().unwrap();
        let mut keys = 0u64;
        while c.valid() {
            keys += 1;
            c.next().unwrap();
        }
        drop(c);
        assert!(keys < 3000, "{keys}");
        assert_eq!(r.live_user_bytes, Some(keys * 116));
        Box::new(engine).close().unwrap();
    }
}
