//! Error injection at every I/O call site (docs/reliability.md T5, redb's countdown sweep).
//!
//! A model workload (puts, deletes, batches, sync writes, `sync_wal`, flushes, a reopen,
//! compactions with blob separation and relocation) runs once with every operation of both simulated tiers
//! traced, which counts the operations and lists the engine call sites they come from. Then it
//! runs again and again with one operation failing: the i-th operation of the slow file system
//! (EIO, ENOSPC, a short write or a corrupted read), the i-th directory operation, persist or
//! write of the fast tier. After each failure the process "crashes" (an image of both tiers, no
//! clean close) and the database is reopened with the fault gone: it must open, hold every
//! acknowledged write and at most the one write that failed (all or nothing), and pass `verify`;
//! no thread may panic. The test prints the call sites reached by an injected fault out of those
//! the workload passes through, grouped by phase (flush, column compaction, L1+ compaction,
//! blob write, blob GC, manifest write and switch, WAL append and switch, recovery).
//!
//! The faulty runs aim at the first operation of every (phase, call site) of the traced run,
//! plus `MATRIXKV_SWEEP_RUNS=<n>` samples stratified over each kind of operation (default 24; a
//! value at least the operation count sweeps every operation); `MATRIXKV_SWEEP_SEED` seeds
//! the samples. Background threads make the operation order vary a little from run to run, so
//! the report counts the sites where a fault actually fired.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use matrixkv::tier::{CrashPolicy, Fault, FaultKind, FaultOp, FsCrashMode, MemFs, SimFastTier};
use matrixkv::{Db, L0Layout, Options, Tiers, WriteBatch, WriteOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;
type Ops = Vec<(Vec<u8>, Option<Vec<u8>>)>;

static PANICS: AtomicUsize = AtomicUsize::new(0);

#[derive(Debug, Clone, Copy)]
enum Config {
    /// Matrix container, column compaction, values separated into small blob files.
    Columns,
    /// L0 SSTables on the fast tier, all-to-all compaction.
    Tables,
    /// As `Columns`, with values of 1200 bytes or more separated as they are written
    /// (`separate_at_write`, `separate_at_write_min_bytes`): faults also land in the writer's
    /// appends to the memtable's blob file and in the flush that finishes it.
    SeparateAtWrite,
}

fn options(fs: &MemFs, fast: &SimFastTier, config: Config) -> Options {
    let mut o = Options::new("/db");
    o.write_buffer_bytes = 64 << 10;
    o.l0_compaction_trigger = 2;
    o.l1_target_bytes = 1 << 20;
    o.target_file_bytes = 64 << 10;
    o.table.block_bytes = 1024;
    o.container_bytes = 512 << 10;
    o.column_lower_bytes = Some(64 << 10);
    o.column_upper_bytes = Some(128 << 10);
    o.no_space_timeout = std::time::Duration::from_millis(200);
    match config {
        Config::Columns | Config::SeparateAtWrite => {
            o.min_blob_bytes = Some(300);
            o.blob_file_bytes = 32 << 10;
            o.blob_gc_ratio = 0.3;
            // Blob GC jobs run whenever garbage passes a tenth of the live records.
            o.blob_space_budget = 1.1;
            o.direct_writes = true;
            if matches!(config, Config::SeparateAtWrite) {
                o.separate_at_write = true;
                // Values of 600..1200 bytes are logged in the WAL and separated by the flush,
                // longer ones go to the value file: faults land in both paths of one memtable.
                o.separate_at_write_min_bytes = Some(1200);
            }
        }
        Config::Tables => {
            o.l0_layout = L0Layout::Tables;
            o.min_blob_bytes = None;
        }
    }
    o.tiers = Some(Tiers {
        slow_fs: Arc::new(fs.clone()),
        fast_fs: Arc::new(fs.clone()),
        fast: Arc::new(fast.clone()),
    });
    o
}

/// What one run of the workload acknowledged, and the write that failed, if any.
struct Outcome {
    model: Model,
    failed_write: Option<Ops>,
    error: Option<String>,
}

const OPS: u64 = 1200;

/// Runs the workload until it ends or an operation fails.
fn workload(fs: &MemFs, fast: &SimFastTier, config: Config) -> Outcome {
    let mut rng = StdRng::seed_from_u64(42);
    let mut out = Outcome {
        model: Model::new(),
        failed_write: None,
        error: None,
    };
    let o = options(fs, fast, config);
    let mut db = match Db::open(o.clone()) {
        Ok(db) => db,
        Err(e) => {
            out.error = Some(format!("open: {e}"));
            return out;
        }
    };
    for step in 0..OPS {
        let key = |r: &mut StdRng| format!("key{:04}", r.gen_range(0..1500)).into_bytes();
        let value = |r: &mut StdRng, step: u64| {
            let len = if r.gen_range(0..3) == 0 {
                40
            } else {
                600 + r.gen_range(0..1400)
            };
            let mut v = format!("{step}:").into_bytes();
            v.resize(len as usize, (step % 251) as u8);
            v
        };
        let wo = WriteOptions {
            sync: rng.gen_range(0..25) == 0,
        };
        let mut ops: Ops = Vec::new();
        let result = match rng.gen_range(0..10) {
            0 => {
                let k = key(&mut rng);
                ops.push((k.clone(), None));
                db.delete_opt(&k, &wo)
            }
            1 => {
                let mut b = WriteBatch::new();
                for _ in 0..1 + rng.gen_range(0..5) {
                    let k = key(&mut rng);
                    let v = value(&mut rng, step);
                    b.put(&k, &v);
                    ops.push((k, Some(v)));
                }
                db.write_opt(b, &wo)
            }
            _ => {
                let (k, v) = (key(&mut rng), value(&mut rng, step));
                ops.push((k.clone(), Some(v.clone())));
                db.put_opt(&k, &v, &wo)
            }
        };
        if let Err(e) = result {
            out.failed_write = Some(ops);
            out.error = Some(format!("step {step}: {e}"));
            return out;
        }
        for (k, v) in ops {
            match v {
                Some(v) => out.model.insert(k, v),
                None => out.model.remove(&k),
            };
        }
        let extra = if step % 300 == 299 {
            db.flush().map_err(|e| format!("flush at {step}: {e}"))
        } else if step % 97 == 96 {
            // A durability point without a sync write (the server's `appendfsync everysec`).
            db.sync_wal()
                .map_err(|e| format!("sync_wal at {step}: {e}"))
        } else if step == OPS / 2 {
            // A clean reopen in the middle: recovery is part of the sweep.
            let closed = db.close().map_err(|e| format!("close at {step}: {e}"));
            match (closed, Db::open(o.clone())) {
                (Ok(()), Ok(d)) => {
                    db = d;
                    Ok(())
                }
                (Err(e), _) => {
                    out.error = Some(e);
                    return out;
                }
                (_, Err(e)) => {
                    out.error = Some(format!("reopen at {step}: {e}"));
                    return out;
                }
            }
        } else {
            Ok(())
        };
        if let Err(e) = extra {
            out.error = Some(e);
            return out;
        }
    }
    if let Err(e) = db.wait_for_compactions() {
        out.error = Some(format!("wait_for_compactions: {e}"));
        return out;
    }
    if let Err(e) = db.close() {
        out.error = Some(format!("close: {e}"));
    }
    out
}

/// Reopens the crash image of both tiers with no fault and checks the model.
fn check_after(fs: &MemFs, fast: &SimFastTier, config: Config, out: &Outcome, ctx: &str) {
    let (fs2, fast2) = fs.crash_with(FsCrashMode::KeepAll, 1, || fast.crash(CrashPolicy::KeepAll));
    let db = Db::open(options(&fs2, &fast2, config))
        .unwrap_or_else(|e| panic!("{ctx}: reopen after the fault failed: {e}"));
    let mut got = Model::new();
    let mut it = db.iter().expect("iter");
    it.seek_to_first().expect("seek");
    while it.valid() {
        got.insert(it.key().to_vec(), it.value().to_vec());
        it.next().expect("next");
    }
    if got != out.model {
        let mut with_failed = out.model.clone();
        for (k, v) in out.failed_write.iter().flatten() {
            match v {
                Some(v) => with_failed.insert(k.clone(), v.clone()),
                None => with_failed.remove(k),
            };
        }
        assert!(
            out.failed_write.is_some() && got == with_failed,
            "{ctx}: after reopen the database holds {} keys, the acknowledged writes {} \
             (error: {:?})",
            got.len(),
            out.model.len(),
            out.error
        );
    }
    db.verify()
        .unwrap_or_else(|e| panic!("{ctx}: verify after reopen: {e}"));
    db.close().expect("close");
}

/// The engine call site of a traced operation: the first frame outside the tiers, as
/// `function (file:line)`, and the phase of the engine it ran in.
fn site_of(backtrace: &std::backtrace::Backtrace) -> (String, &'static str) {
    let text = backtrace.to_string();
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let mut site = None;
    let mut symbols = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some((_, sym)) = line.split_once(": ") else {
            continue;
        };
        if line.starts_with("at ") || !line.chars().next().is_some_and(|c| c.is_ascii_digit()) {
            continue;
        }
        symbols.push(sym);
        if site.is_none()
            && sym.contains("matrixkv::")
            && !sym.contains("matrixkv::tier::")
            && !sym.contains("matrixkv_pmem")
        {
            let at = lines
                .get(i + 1)
                .and_then(|l| l.strip_prefix("at "))
                .map(|l| match l.find("src/") {
                    Some(p) => &l[p..],
                    None => l,
                })
                .map(|l| l.rsplit_once(':').map_or(l, |(a, _)| a))
                .unwrap_or("?");
            site = Some(format!("{sym} ({at})"));
        }
    }
    let has = |needle: &str| symbols.iter().any(|s| s.contains(needle));
    let phase = if symbols
        .iter()
        .any(|s| *s == "matrixkv::engine::recovery::open" || s.ends_with("recovery::open"))
    {
        "recovery (open)"
    } else if has("roll_manifest") || has("manifest::set_current") {
        "manifest switch"
    } else if has("ManifestWriter") {
        "manifest write"
    } else if has("run_blob_gc") {
        "blob GC"
    } else if has("separate_values") || has("sync_value_files") {
        "value file append and sync (separate_at_write)"
    } else if has("blob::writer") || has("BlobWriter") {
        "blob write and relocation"
    } else if has("run_column") {
        "column compaction"
    } else if has("run_compaction") {
        "L1+ (all-to-all) compaction"
    } else if has("run_flush") || has("flush_one") {
        "flush"
    } else if has("switch_memtable") || has("create_wal") {
        "WAL switch"
    } else if has("commit_group") || has("wal::writer") {
        "WAL append and sync"
    } else if has("delete_obsolete_files") {
        "obsolete-file deletion"
    } else if has("verify") || has("DbIterator") || has("engine::read") {
        "reads"
    } else {
        "other"
    };
    (site.unwrap_or_else(|| "unknown".to_owned()), phase)
}

/// A call site in a phase of the engine (one site reached in two phases counts twice).
type Site = (&'static str, String);

#[derive(Default)]
struct Coverage {
    /// Every (phase, site) the fault-free traced run passes through.
    all: BTreeSet<Site>,
    /// Those where an injected fault fired.
    hit: BTreeSet<Site>,
}

impl Coverage {
    fn add_hits(&mut self, bts: impl Iterator<Item = std::backtrace::Backtrace>) {
        for bt in bts {
            let (site, phase) = site_of(&bt);
            self.all.insert((phase, site.clone()));
            self.hit.insert((phase, site));
        }
    }

    fn report(&self, config: Config) {
        let mut by_phase: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
        for key in &self.all {
            let e = by_phase.entry(key.0).or_default();
            e.1 += 1;
            if self.hit.contains(key) {
                e.0 += 1;
            }
        }
        eprintln!(
            "T5 {config:?}: call sites reached by an injected fault: {} of {} the workload \
             passes through",
            self.hit.len(),
            self.all.len()
        );
        for (phase, (hit, all)) in &by_phase {
            eprintln!("  {phase}: {hit}/{all}");
        }
        for key in &self.all {
            let mark = if self.hit.contains(key) {
                "hit "
            } else {
                "MISS"
            };
            eprintln!("  {mark} [{}] {}", key.0, key.1);
        }
    }
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// The faulty runs of one configuration: `runs` operation indices spread over each kind of
/// operation (stratified, so every part of the workload is sampled).
fn sweep(config: Config) {
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        // The engine's background threads (a panic there reaches no caller).
        if std::thread::current()
            .name()
            .is_some_and(|n| n.starts_with("matrixkv:"))
        {
            PANICS.fetch_add(1, Ordering::SeqCst);
        }
        prev(info);
    }));
    // Counting and tracing run.
    let fs = MemFs::new();
    let fast = SimFastTier::new("/db/fast");
    fs.trace_ops(true);
    fast.faults().trace_ops(true);
    let out = workload(&fs, &fast, config);
    assert!(
        out.error.is_none(),
        "fault-free run failed: {:?}",
        out.error
    );
    let slow_ops = fs.op_count(FaultOp::Any);
    let (persists, writes, dir_ops) = fast.faults().op_counts();
    eprintln!(
        "T5 {config:?}: {slow_ops} slow-tier file-system operations, fast tier {dir_ops} \
         directory operations, {persists} persists, {writes} writes"
    );
    // Site-directed targets: the first operation of every (phase, call site) of the traced
    // run, per kind of operation (the traces are in operation order).
    // A target names the thread and the index among that thread's operations of its kind, so
    // that a background job's n-th operation is hit whatever the other threads did first.
    let mut cov = Coverage::default();
    // (kind of operation, index, thread whose operations the index counts; None: all).
    let mut targets: Vec<(&str, u64, Option<String>)> = Vec::new();
    let mut per_thread: BTreeMap<Option<String>, u64> = BTreeMap::new();
    for (i, t) in fs.take_traces().into_iter().enumerate() {
        let (site, phase) = site_of(&t.backtrace);
        let n = per_thread.entry(t.thread.clone()).or_default();
        if cov.all.insert((phase, site)) {
            let index = if t.thread.is_some() { *n } else { i as u64 };
            targets.push(("slow", index, t.thread));
        }
        *n += 1;
    }
    let mut seen: BTreeMap<(usize, Option<String>), u64> = BTreeMap::new();
    for t in fast.faults().take_traces() {
        let (what, n) = match t.op {
            "persist" => ("fast-persist", 0),
            "write" => ("fast-write", 1),
            _ => ("fast-dir", 2),
        };
        let (site, phase) = site_of(&t.backtrace);
        let count = seen.entry((n, t.thread.clone())).or_default();
        if cov.all.insert((phase, site)) {
            targets.push((what, *count, t.thread));
        }
        *count += 1;
    }
    // Plus stratified samples over each kind of operation.
    let runs = env_u64("MATRIXKV_SWEEP_RUNS", 24);
    let mut rng = StdRng::seed_from_u64(env_u64("MATRIXKV_SWEEP_SEED", 7));
    for (what, total, share) in [
        ("slow", slow_ops, runs / 2),
        ("fast-dir", dir_ops, runs / 6),
        ("fast-persist", persists, runs / 6),
        ("fast-write", writes, runs / 6),
    ] {
        for j in 0..share.min(total) {
            let i = if share >= total {
                j
            } else {
                let (lo, hi) = (j * total / share, (j + 1) * total / share);
                lo + rng.gen_range(0..(hi - lo).max(1))
            };
            targets.push((what, i, None));
        }
    }
    let kinds = [
        FaultKind::Eio,
        FaultKind::NoSpace,
        FaultKind::ShortWrite,
        FaultKind::CorruptRead,
    ];
    let mut fired = 0u64;
    let mut done = 0u64;
    for (j, (what, i, thread)) in targets.into_iter().enumerate() {
        let fs = MemFs::new();
        let fast = SimFastTier::new("/db/fast");
        let kind = kinds[j % kinds.len()];
        fast.faults().only_on_thread(thread.clone());
        match what {
            "slow" => {
                let fault = Fault::new(FaultOp::Any, kind).after(i).times(1);
                fs.inject(match &thread {
                    Some(name) => fault.on_thread(name.clone()),
                    None => fault,
                })
            }
            "fast-dir" => {
                let errno = if j % 2 == 0 { 5 } else { 28 };
                fast.faults().fail_dir_op_after(Some(i), errno);
            }
            "fast-persist" => fast.fail_persist_after(Some(i)),
            _ => fast.fail_writes_after(Some(i)),
        }
        let out = workload(&fs, &fast, config);
        let slow_hits = fs.take_traces();
        let fast_hits = fast.faults().take_traces();
        if !slow_hits.is_empty() || fast_hits.iter().any(|t| t.failed) {
            fired += 1;
        }
        // The first failure of the run is the injected one (a fast-tier countdown keeps
        // failing later calls too).
        let first = slow_hits
            .into_iter()
            .find(|t| t.failed)
            .map(|t| t.backtrace)
            .or_else(|| {
                fast_hits
                    .into_iter()
                    .find(|t| t.failed)
                    .map(|t| t.backtrace)
            });
        cov.add_hits(first.into_iter());
        fs.clear_faults();
        fast.fail_persist_after(None);
        fast.fail_writes_after(None);
        fast.faults().fail_dir_op_after(None, 0);
        fast.faults().only_on_thread(None);
        let thread = thread.map_or(String::new(), |t| format!(" of {t}"));
        let ctx = format!("{config:?} {what} op {i}{thread} ({kind:?})");
        check_after(&fs, &fast, config, &out, &ctx);
        done += 1;
    }
    cov.report(config);
    eprintln!("T5 {config:?}: {done} faulty runs, {fired} reached their fault, 0 violations");
    assert_eq!(PANICS.load(Ordering::SeqCst), 0, "a thread panicked");
    assert!(fired * 2 >= done, "most injected faults must be reached");
}

#[test]
fn injected_io_errors_in_the_matrix_layout_lose_no_acknowledged_write() {
    sweep(Config::Columns);
}

#[test]
fn injected_io_errors_with_values_separated_at_write_lose_no_acknowledged_write() {
    sweep(Config::SeparateAtWrite);
}

#[test]
fn injected_io_errors_in_the_sstable_layout_lose_no_acknowledged_write() {
    sweep(Config::Tables);
}

#[test]
fn call_site_of_a_traced_operation_is_the_first_engine_frame() {
    let fs = MemFs::new();
    fs.trace_ops(true);
    use matrixkv::tier::FileSystem;
    fs.create_dir_all(Path::new("/x")).expect("mkdir");
    let t = fs.take_traces();
    assert_eq!(t.len(), 1);
    // Called from the test, not the engine: no engine frame.
    let (site, _) = site_of(&t[0].backtrace);
    assert_eq!(site, "unknown");
}
