//! Model-based tests: random operation sequences against a `BTreeMap` reference, including
//! reopen, a simulated crash of the process and a simulated power loss (docs/reliability.md T1/T2/T3).
//! Every 50 steps, `updates_since` from a logged write must give back the logged writes.
//! A second keyspace, `side`, takes writes of its own and batches shared with the default
//! keyspace, and is dropped and created again now and then; the model holds its keys under
//! the prefix [`SIDE`], which no default key has.
//!
//! Up to 4 snapshots are alive at once, and every read through them (gets, multi_gets, full
//! scans of both keyspaces, bounded ranges) checks all of them against the model of their
//! time. Up to 3 iterators stay open across writes, flushes, compactions and keyspace drops,
//! moved a few entries at a time (forward, and back and forth), and must yield exactly the
//! state at their creation.
//!
//! The database runs on simulated tiers (`MemFs` + `SimFastTier`) with tiny memtables and
//! tables so that flushes and compactions happen constantly. Each configuration's options are
//! varied per seed ([`Knobs`]: memtable, block, container and column sizes, column threads,
//! hints, memtable filter, compression, value separation and its thresholds). Every run prints
//! its configuration, seed and knobs; rerun one with `MATRIXKV_MODEL_CONFIG=<config>
//! MATRIXKV_MODEL_SEED=<seed>`, or run `MATRIXKV_MODEL_SEEDS=<n>` seeds from each test's
//! first default for a longer campaign.

use std::collections::BTreeMap;
use std::sync::Arc;

use matrixkv::tier::{CrashPolicy, FsCrashMode, MemFs, SimFastTier};
use matrixkv::{
    AppendOperator, BatchOp, Db, KeyspaceOptions, Options, ReadOptions, SeqNo, Tiers, WriteBatch,
    WriteOptions,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Where the model keeps the keys of keyspace `side`: `SIDE ++ key` (default keys start with
/// `key`, below 0xff).
const SIDE: &[u8] = b"\xffside/";
/// The first model key after the `side` keyspace's.
const SIDE_END: &[u8] = b"\xffside0";

/// The model key of `key` in keyspace `side`.
fn side_key(key: &[u8]) -> Vec<u8> {
    [SIDE, key].concat()
}

/// The default keyspace's part of the model.
fn default_part(model: &Model) -> Model {
    model
        .range(..b"\xff".to_vec())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The `side` keyspace's part of the model, keys without the prefix.
fn side_part(model: &Model) -> Model {
    model
        .range(SIDE.to_vec()..SIDE_END.to_vec())
        .map(|(k, v)| (k[SIDE.len()..].to_vec(), v.clone()))
        .collect()
}

/// One write: a put, a delete, a merge operand (appended with ",", as the database's
/// `AppendOperator::new(",")` does), or a range delete from the write's key to this end
/// (exclusive).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    Put(Vec<u8>),
    Delete,
    Merge(Vec<u8>),
    DeleteRange(Vec<u8>),
}

/// The writes of one acknowledged operation, in order.
type Ops = Vec<(Vec<u8>, Op)>;

/// Applies one write to the model.
fn apply(model: &mut Model, key: &[u8], op: &Op) {
    match op {
        Op::Put(v) => {
            model.insert(key.to_vec(), v.clone());
        }
        Op::Delete => {
            model.remove(key);
        }
        Op::DeleteRange(end) => {
            let doomed: Vec<Vec<u8>> = model
                .range(key.to_vec()..end.clone())
                .map(|(k, _)| k.clone())
                .collect();
            for k in doomed {
                model.remove(&k);
            }
        }
        Op::Merge(operand) => match model.get_mut(key) {
            Some(v) => {
                v.push(b',');
                v.extend_from_slice(operand);
            }
            None => {
                model.insert(key.to_vec(), operand.clone());
            }
        },
    }
}

/// The configurations every model test runs under.
#[derive(Debug, Clone, Copy)]
enum Config {
    /// Matrix container, column compaction, hints; values separated by column compaction.
    Columns,
    /// Matrix container, all-to-all L0→L1, hints off, values logged in the WAL
    /// (`separate_at_write` off) and separated by the flush.
    AllToAllNoHints,
    /// SSTables on the fast tier as L0.
    Tables,
    /// As `Columns`, with values separated when written (`separate_at_write`, the default; the
    /// other configurations turn it off or do not qualify for it): non-sync
    /// groups' values of 75 bytes or more (`separate_at_write_min_bytes`) go to the memtable's
    /// blob file and the WAL logs pointers, so power losses cut value files as well as the
    /// log; the flush installs the files and separates the logged values of 50..75 bytes.
    SeparateAtWrite,
    /// As `Columns`, in X-Engine's design: values stay in the WAL records, ROR batches of
    /// up to 3 writers, the memtables rebuilt by 3 threads at open; values separated into
    /// blob files by the flush.
    XEngine,
    /// As `Columns`, in NoveLSM's design: DRAM memtables alternate with persistent memtables
    /// of 128 KiB on the fast tier, written without a WAL and reopened without replay.
    NoveLsm,
    /// SLM-DB's design: persistent memtables of 128 KiB only (no WAL), one level of tables on
    /// the slow tier described by a global B+-tree index, selective compaction with triggers
    /// low enough to run it all the time; values of the side keyspace separated by
    /// compaction.
    SlmDb,
    /// LightKV's design: persistent write buffers of 128 KiB (no WAL), key-range partitions
    /// of tables on the slow tier described by an RH-tree index, partition compaction of 2
    /// tables per count and partitions of 64 KiB, so that flushes cut tables at partition
    /// bounds, merges and splits run all the time; an index region of 1 MiB, whose log is
    /// compacted during the run.
    LightKv,
}

const CONFIGS: [Config; 8] = [
    Config::Columns,
    Config::AllToAllNoHints,
    Config::Tables,
    Config::SeparateAtWrite,
    Config::XEngine,
    Config::NoveLsm,
    Config::SlmDb,
    Config::LightKv,
];

impl Config {
    /// Most puts go to three hot keys.
    fn hot_puts(self) -> bool {
        matches!(self, Config::SeparateAtWrite)
    }

    /// Merges are written (the TTL configuration refuses them and writes puts instead).
    fn merges(self) -> bool {
        !matches!(self, Config::Tables)
    }

    /// Every write is in the WAL, so `updates_since` gives the writes back (NoveLSM's
    /// persistent memtables take writes without one, and `updates_since` refuses).
    fn logs_every_write(self) -> bool {
        !matches!(self, Config::NoveLsm | Config::SlmDb | Config::LightKv)
    }

    /// Backups are taken (the SLM-DB design refuses them: its index is not copied, and cannot
    /// be rebuilt from the tables yet; LightKV's restored RH-tree is rebuilt at the first open).
    fn backs_up(self) -> bool {
        !matches!(self, Config::SlmDb)
    }
}

/// Keeps every value (so the model is unchanged) and counts the calls.
struct KeepAll;

static FILTER_CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl matrixkv::CompactionFilter for KeepAll {
    fn name(&self) -> &str {
        "keep-all"
    }

    fn filter(&self, _level: usize, _key: &[u8], _value: &[u8]) -> matrixkv::Decision {
        FILTER_CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        matrixkv::Decision::Keep
    }
}

/// The options a run draws from its seed on top of its configuration's (printed at the start
/// of the run, so that `MATRIXKV_MODEL_SEED` with `MATRIXKV_MODEL_CONFIG` replays a failure).
/// Each is drawn where the configuration supports it; elsewhere the configuration's value
/// stands.
#[derive(Debug, Clone, Copy)]
struct Knobs {
    write_buffer_bytes: usize,
    max_write_buffers: usize,
    block_bytes: usize,
    restart_interval: usize,
    bloom_bits_per_key: u32,
    /// Of the default keyspace's tables (`side` always uses LZ4).
    compression: matrixkv::Compression,
    /// Matrix layout: the container and its columns.
    container_bytes: u64,
    column_upper_bytes: u64,
    column_threads: usize,
    /// Matrix layout, except `AllToAllNoHints` (hints off by definition).
    hints: bool,
    /// DRAM memtables (`AllToAllNoHints` keeps its saturated filter, `Tables` none).
    memtable_filter_ratio: f64,
    /// Configurations that separate values: the threshold and the blob file size.
    min_blob_bytes: usize,
    blob_file_bytes: u64,
    /// `Columns`: values separated at flush (and then, with `separate_at_write`, as written)
    /// or by column compaction.
    separate_at_flush: bool,
    separate_at_write: bool,
    /// `SeparateAtWrite` (and `Columns` when it separates at write).
    separate_at_write_min_bytes: Option<usize>,
}

impl Knobs {
    /// The knobs of `seed` (their own random stream: the operations do not depend on them).
    fn draw(seed: u64) -> Knobs {
        let mut r = StdRng::seed_from_u64(seed ^ 0x6b6e_6f62_7321);
        let mut pick = |choices: &[u64]| choices[r.gen_range(0..choices.len())];
        Knobs {
            write_buffer_bytes: pick(&[64 << 10, 96 << 10, 128 << 10]) as usize,
            max_write_buffers: pick(&[2, 3]) as usize,
            block_bytes: pick(&[256, 512, 4096]) as usize,
            restart_interval: pick(&[1, 4, 16]) as usize,
            bloom_bits_per_key: pick(&[0, 4, 10]) as u32,
            compression: [
                matrixkv::Compression::None,
                matrixkv::Compression::Lz4,
                matrixkv::Compression::Zstd,
            ][pick(&[0, 1, 2]) as usize],
            container_bytes: pick(&[256 << 10, 512 << 10]),
            column_upper_bytes: pick(&[64 << 10, 128 << 10, 256 << 10]),
            column_threads: pick(&[1, 2, 3]) as usize,
            hints: pick(&[0, 1, 1]) == 1,
            memtable_filter_ratio: [0.0, 1.0 / 1024.0, 1.0 / 64.0, 0.25]
                [pick(&[0, 1, 2, 3]) as usize],
            min_blob_bytes: pick(&[30, 50, 90]) as usize,
            blob_file_bytes: pick(&[8 << 10, 16 << 10, 32 << 10]),
            separate_at_flush: pick(&[0, 1]) == 1,
            separate_at_write: pick(&[0, 1]) == 1,
            separate_at_write_min_bytes: [None, Some(75), Some(300)][pick(&[0, 1, 2]) as usize],
        }
    }
}

struct Env {
    fs: MemFs,
    fast: SimFastTier,
    config: Config,
    knobs: Knobs,
}

impl Env {
    fn new(config: Config, knobs: Knobs) -> Env {
        Env {
            fs: MemFs::new(),
            fast: SimFastTier::new("/db/fast"),
            config,
            knobs,
        }
    }

    fn options(&self) -> Options {
        let mut o = Options::new("/db");
        o.write_buffer_bytes = 64 << 10;
        o.l0_compaction_trigger = 2;
        o.l0_slowdown_writes_trigger = 6;
        o.l0_stop_writes_trigger = 10;
        o.l1_target_bytes = 1 << 20;
        o.target_file_bytes = 64 << 10;
        o.table.block_bytes = 512;
        o.block_cache_bytes = 256 << 10;
        // A tiny container (64 pages of 4 KiB) so that role switches and columns happen all the
        // time; columns of 64–128 KiB.
        o.container_bytes = 256 << 10;
        o.l1_target_bytes = 1 << 20;
        o.column_lower_bytes = Some(64 << 10);
        o.column_upper_bytes = Some(128 << 10);
        o.column_threads = 2;
        // Writes stalled by a full disk (the no-space episodes of `run`) give up quickly.
        o.no_space_timeout = std::time::Duration::from_millis(50);
        // Flushed WAL segments stay readable for `updates_since` (more than the writes logged
        // since the last flush ever fill: the log is cleared at every flush).
        o.wal_retention_segments = 8;
        match self.config {
            Config::Columns | Config::XEngine | Config::NoveLsm | Config::SeparateAtWrite => {
                // Most values separated into small blob files that fill with garbage and are
                // relocated often.
                o.min_blob_bytes = Some(50);
                o.blob_file_bytes = 16 << 10;
                o.blob_gc_ratio = 0.3;
                // Blob GC jobs whenever garbage passes a twentieth of the live records.
                o.blob_space_budget = 1.05;
                // Compaction outputs through `FileSystem::create_direct`.
                o.direct_writes = true;
                // Values reach the RowTables and column compaction separates them (the
                // XEngine configuration separates them at flush).
                o.separate_at_flush = false;
                if matches!(self.config, Config::SeparateAtWrite) {
                    o.separate_at_flush = true;
                    o.separate_at_write = true;
                    // Values of 50..75 bytes are logged in the WAL and separated by the
                    // flush, longer ones go to the value file as they are written.
                    o.separate_at_write_min_bytes = Some(75);
                }
            }
            Config::AllToAllNoHints => {
                o.column_compaction = false;
                o.hints = false;
                // One 64-byte block of memtable filter for hundreds of keys: saturated, so
                // lookups of absent keys still search the skiplist (false positives); the
                // other configurations keep the default (about 16 bits a key here) and
                // `Tables` has none.
                o.memtable_filter_ratio = 1.0 / 1024.0;
                // Values logged in the WAL and separated by the flush (the default before
                // decision 0028, item 1).
                o.separate_at_write = false;
            }
            Config::SlmDb => {
                o.l0_layout = matrixkv::L0Layout::Tables;
                o.min_blob_bytes = None;
                // Flush and compaction outputs through `FileSystem::create_direct`.
                o.direct_writes = true;
                o.design = matrixkv::Design::SlmDb(matrixkv::SlmDbOptions {
                    persistent_memtable_bytes: 128 << 10,
                    index_bytes: 2 << 20,
                    live_key_ratio: 0.7,
                    leaf_scan_tables: 2,
                    leaf_scan_threshold: 2,
                    candidate_trigger: 2,
                    max_merge_tables: 4,
                    scan_window: 10,
                    scan_threshold: 2,
                });
            }
            Config::LightKv => {
                o.l0_layout = matrixkv::L0Layout::Tables;
                o.min_blob_bytes = None;
                o.design = matrixkv::Design::LightKv(matrixkv::LightKvOptions {
                    write_buffer_bytes: 128 << 10,
                    // About 500 KiB of log: compacted during the run.
                    index_bytes: 1 << 20,
                    compaction_size: 2,
                    max_partitions: 6,
                    partition_bytes: 64 << 10,
                });
            }
            Config::Tables => {
                o.l0_layout = matrixkv::L0Layout::Tables;
                o.min_blob_bytes = None;
                o.memtable_filter_ratio = 0.0;
                // Every value carries its write time (nothing expires within a run).
                o.ttl = Some(std::time::Duration::from_secs(86_400));
            }
        }
        if matches!(self.config, Config::XEngine) {
            o.separate_at_flush = true;
            o.design = matrixkv::Design::XEngine(matrixkv::XEngineOptions {
                ror_batch: 3,
                ror_wait: std::time::Duration::from_micros(20),
                recovery_threads: 3,
            });
        }
        if matches!(self.config, Config::NoveLsm) {
            o.design = matrixkv::Design::NoveLsm(matrixkv::NoveLsmOptions {
                persistent_memtable_bytes: 128 << 10,
                parallel_reads: true,
            });
        }
        if self.config.merges() {
            o.merge_operator = Some(Arc::new(AppendOperator::new(b",")));
        }
        // A filter that keeps everything but reads every value compaction rewrites (blob
        // values included).
        o.compaction_filter = Some(Arc::new(KeepAll));
        // The seed's knobs, where the configuration supports them.
        let k = self.knobs;
        o.write_buffer_bytes = k.write_buffer_bytes;
        o.max_write_buffers = k.max_write_buffers;
        o.table.block_bytes = k.block_bytes;
        o.table.restart_interval = k.restart_interval;
        o.table.bloom_bits_per_key = k.bloom_bits_per_key;
        o.table.compression = k.compression;
        if o.l0_layout == matrixkv::L0Layout::Matrix {
            o.container_bytes = k.container_bytes;
            o.column_upper_bytes = Some(k.column_upper_bytes);
            o.column_threads = k.column_threads;
            if !matches!(self.config, Config::AllToAllNoHints) {
                o.hints = k.hints;
            }
        }
        // At least 4 memtables (checked in every layout).
        o.container_bytes = o.container_bytes.max(4 * k.write_buffer_bytes as u64);
        if !matches!(self.config, Config::AllToAllNoHints | Config::Tables) {
            o.memtable_filter_ratio = k.memtable_filter_ratio;
        }
        if matches!(
            self.config,
            Config::Columns | Config::XEngine | Config::NoveLsm | Config::SeparateAtWrite
        ) {
            o.min_blob_bytes = Some(k.min_blob_bytes);
            o.blob_file_bytes = k.blob_file_bytes;
        }
        if matches!(self.config, Config::Columns) {
            o.separate_at_flush = k.separate_at_flush;
            o.separate_at_write = k.separate_at_write;
        }
        if matches!(self.config, Config::Columns | Config::SeparateAtWrite) {
            o.separate_at_write_min_bytes = k.separate_at_write_min_bytes;
        }
        o.keyspace_options
            .insert("side".into(), side_options(self.config));
        o.tiers = Some(Tiers {
            slow_fs: Arc::new(self.fs.clone()),
            fast_fs: Arc::new(self.fs.clone()),
            fast: Arc::new(self.fast.clone()),
        });
        o
    }

    fn open(&self) -> Db {
        Db::open(self.options()).expect("open")
    }
}

/// The options of keyspace `side`: those of the default keyspace in `config`, but values below
/// 500 bytes stay in the tables (none is separated in the TTL configuration).
fn side_options(config: Config) -> KeyspaceOptions {
    KeyspaceOptions {
        merge_operator: config
            .merges()
            .then(|| Arc::new(AppendOperator::new(b",")) as Arc<dyn matrixkv::MergeOperator>),
        compaction_filter: Some(Arc::new(KeepAll)),
        ttl: matches!(config, Config::Tables).then(|| std::time::Duration::from_secs(86_400)),
        min_blob_bytes: (!matches!(config, Config::Tables)).then_some(500),
        // Its blocks compressed (the default keyspace's are not): tables mix codecs.
        compression: Some(matrixkv::Compression::Lz4),
    }
}

fn key(rng: &mut StdRng, space: u32) -> Vec<u8> {
    format!("key{:05}", rng.gen_range(0..space)).into_bytes()
}

fn value(rng: &mut StdRng) -> Vec<u8> {
    let len = match rng.gen_range(0..10) {
        0 => 0,
        1 => rng.gen_range(1000..5000),
        _ => rng.gen_range(1..100),
    };
    let b = rng.r#gen::<u8>();
    (0..len).map(|i| b.wrapping_add(i as u8)).collect()
}

fn check_all(db: &Db, model: &Model, ctx: &str) {
    check_scan_in(
        Some((db, "default")),
        &mut db.iter().expect("iter"),
        &default_part(model),
        ctx,
    );
    let side = db.keyspace("side").expect("keyspace side");
    let side_model = side_part(model);
    check_scan_in(
        Some((db, "side")),
        &mut side.iter().expect("iter side"),
        &side_model,
        &format!("{ctx} (keyspace side)"),
    );
    // Backwards too, and point reads.
    let mut it = side.iter().expect("iter side");
    it.seek_to_last().expect("seek_to_last");
    let mut back = Vec::new();
    while it.valid() {
        back.push(it.key().to_vec());
        it.prev().expect("prev");
    }
    back.reverse();
    let keys: Vec<Vec<u8>> = side_model.keys().cloned().collect();
    assert!(back == keys, "{ctx}: side reverse scan differs from model");
    for (k, v) in side_model.iter().take(20) {
        assert_eq!(
            side.get(k).expect("get side").as_ref(),
            Some(v),
            "{ctx}: side get"
        );
    }
}

/// `it` yields exactly `model`; when it does not, where the versions of the first wrong key
/// are (in `db`, keyspace `ks`) is printed.
fn check_scan_in(db: Option<(&Db, &str)>, it: &mut matrixkv::DbIterator, model: &Model, ctx: &str) {
    it.seek_to_first().expect("seek");
    let mut got = Vec::new();
    while it.valid() {
        got.push((it.key().to_vec(), it.value().to_vec()));
        it.next().expect("next");
    }
    let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let first_difference = got
        .iter()
        .zip(&want)
        .position(|(g, w)| g != w)
        .unwrap_or(got.len().min(want.len()));
    let show = |v: Option<&(Vec<u8>, Vec<u8>)>| {
        v.map(|(k, v)| {
            format!(
                "{} = {} ({} bytes, {:02x?})",
                String::from_utf8_lossy(k),
                String::from_utf8_lossy(v.get(..v.len().min(40)).unwrap_or_default()),
                v.len(),
                v.get(..v.len().min(12)).unwrap_or_default()
            )
        })
    };
    if got != want
        && let (Some((db, ks)), Some((k, _))) = (db, got.get(first_difference))
    {
        eprintln!(
            "versions of {}: {}",
            String::from_utf8_lossy(k),
            db.debug_versions(ks, k)
        );
        let again = if ks == "default" {
            db.get(k)
        } else {
            db.keyspace(ks).and_then(|h| h.get(k))
        };
        eprintln!(
            "get now: {:?}",
            again.map(|v| v.map(|v| String::from_utf8_lossy(&v).into_owned()))
        );
    }
    assert!(
        got == want,
        "{ctx}: scan differs from model ({} entries, {} expected); first difference at {}: \
         got {:?}, expected {:?}",
        got.len(),
        want.len(),
        first_difference,
        show(got.get(first_difference)),
        show(want.get(first_difference))
    );
}

/// `got` (the results of a multi_get of `keys`) holds exactly the model's values.
fn check_multi_get(
    got: Vec<matrixkv::Result<Option<Vec<u8>>>>,
    keys: &[Vec<u8>],
    model: &Model,
    ctx: &str,
) {
    let got: Vec<Option<Vec<u8>>> = got
        .into_iter()
        .collect::<matrixkv::Result<_>>()
        .unwrap_or_else(|e| panic!("{ctx}: {e}"));
    let want: Vec<Option<Vec<u8>>> = keys.iter().map(|k| model.get(k).cloned()).collect();
    assert!(got == want, "{ctx}");
}

fn check_range(db: &Db, model: &Model, rng: &mut StdRng, ro: &ReadOptions, ctx: &str) {
    let space = 400;
    let mut lo = key(rng, space);
    let mut hi = key(rng, space);
    if lo > hi {
        std::mem::swap(&mut lo, &mut hi);
    }
    let ro = ReadOptions {
        lower_bound: Some(lo.clone()),
        upper_bound: Some(hi.clone()),
        snapshot: ro.snapshot,
    };
    let want: Vec<_> = model.range(lo.clone()..hi.clone()).collect();
    let mut it = db.iter_opt(&ro).expect("iter");
    // Backward from the upper bound.
    it.seek_to_last().expect("seek_to_last");
    let mut got = Vec::new();
    while it.valid() {
        got.push(it.key().to_vec());
        it.prev().expect("prev");
    }
    got.reverse();
    let want_keys: Vec<_> = want.iter().map(|(k, _)| (*k).clone()).collect();
    assert_eq!(got, want_keys, "{ctx}: reverse bounded scan");
    // A forward seek (hint-accelerated across rows) lands on the first key >= the probe.
    let probe = key(rng, space);
    it.seek(&probe).expect("seek");
    let expect_seek = want_keys.iter().find(|k| **k >= probe).cloned();
    assert_eq!(
        it.valid().then(|| it.key().to_vec()),
        expect_seek,
        "{ctx}: seek"
    );
    if let Some(v) = it.valid().then(|| it.value().to_vec()) {
        assert_eq!(Some(&v), model.get(it.key()), "{ctx}: value after seek");
    }
    // A seek_for_prev then next mixes directions.
    let probe = key(rng, space);
    it.seek_for_prev(&probe).expect("seek_for_prev");
    let expect_prev = want_keys.iter().rev().find(|k| **k <= probe).cloned();
    assert_eq!(
        it.valid().then(|| it.key().to_vec()),
        expect_prev,
        "{ctx}: seek_for_prev"
    );
    if it.valid() {
        it.next().expect("next");
        let expect_next = want_keys.iter().find(|k| **k > probe).cloned();
        assert_eq!(
            it.valid().then(|| it.key().to_vec()),
            expect_next,
            "{ctx}: next after sfp"
        );
    }
}

/// An iterator kept open while the run goes on, with the state it must yield.
struct OpenIter {
    it: matrixkv::DbIterator,
    keyspace: &'static str,
    /// The keyspace's entries when the iterator was created.
    want: Vec<(Vec<u8>, Vec<u8>)>,
    /// The index in `want` of the entry the iterator is at (`want.len()`: past the end).
    pos: usize,
    /// The step that created it.
    born: usize,
    /// The database's flush count then.
    flushes: u64,
}

/// How many flushes the database ran since it was opened.
fn flushes(db: &Db) -> u64 {
    db.stats().flushes
}

impl OpenIter {
    /// The iterator is at `want[pos]` (or invalid past the end).
    fn check(&self, ctx: &str) {
        let got = self
            .it
            .valid()
            .then(|| (self.it.key().to_vec(), self.it.value().to_vec()));
        assert!(
            got.as_ref() == self.want.get(self.pos),
            "{ctx}: iterator over {} opened at step {} is at {:?}, expected entry {} of {}: {:?}",
            self.keyspace,
            self.born,
            got.map(|(k, v)| (String::from_utf8_lossy(&k).into_owned(), v.len())),
            self.pos,
            self.want.len(),
            self.want
                .get(self.pos)
                .map(|(k, v)| (String::from_utf8_lossy(k).into_owned(), v.len()))
        );
    }

    /// Moves back a few entries and forward again now and then, then forward up to 30
    /// entries, checking every position; true once past the end.
    fn advance(&mut self, rng: &mut StdRng, ctx: &str) -> bool {
        let ctx = format!("{ctx}: open iterator");
        if self.pos > 0 && self.pos < self.want.len() && rng.gen_ratio(1, 4) {
            let back = rng.gen_range(1..=self.pos.min(5));
            for _ in 0..back {
                self.it.prev().expect("prev");
                self.pos -= 1;
                self.check(&ctx);
            }
            for _ in 0..back {
                self.it.next().expect("next");
                self.pos += 1;
                self.check(&ctx);
            }
        }
        for _ in 0..rng.gen_range(1..=30) {
            if self.pos == self.want.len() {
                break;
            }
            self.it.next().expect("next");
            self.pos += 1;
            self.check(&ctx);
        }
        self.pos == self.want.len()
    }
}

/// `updates_since` from the first sequence number of `log[i]` gives back exactly the logged
/// writes from there on (one writer: each logged operation is one WAL record).
fn check_updates_since(db: &Db, log: &[(u64, Ops)], i: usize, ctx: &str) {
    let first = |(last, ops): &(u64, Ops)| last + 1 - ops.len() as u64;
    let Some(from) = log.get(i).map(first) else {
        return;
    };
    let got: Vec<(u64, Ops)> = db
        .updates_since(SeqNo(from))
        .unwrap_or_else(|e| panic!("{ctx}: updates_since({from}): {e}"))
        .map(|r| {
            let (seq, batch) = r.unwrap_or_else(|e| panic!("{ctx}: updates_since({from}): {e}"));
            let ops = batch
                .iter_with_keyspace()
                .map(|(keyspace, op)| {
                    // Every keyspace but the default one is a `side` (dropped or live).
                    let k = |key: &[u8]| {
                        if keyspace == 0 {
                            key.to_vec()
                        } else {
                            side_key(key)
                        }
                    };
                    match op {
                        BatchOp::Put { key, value } => (k(key), Op::Put(value.to_vec())),
                        BatchOp::Delete { key } => (k(key), Op::Delete),
                        BatchOp::Merge { key, operand } => (k(key), Op::Merge(operand.to_vec())),
                        // The deletion of the whole keyspace (a drop).
                        BatchOp::DeleteRange { start, end } if keyspace != 0 && end.is_empty() => {
                            assert!(start.is_empty(), "{ctx}");
                            (SIDE.to_vec(), Op::DeleteRange(SIDE_END.to_vec()))
                        }
                        BatchOp::DeleteRange { start, end } => (k(start), Op::DeleteRange(k(end))),
                        other => panic!("{ctx}: unexpected operation {other:?}"),
                    }
                })
                .collect();
            (seq.0, ops)
        })
        .collect();
    let want: Vec<(u64, Ops)> = log[i..].iter().map(|e| (first(e), e.1.clone())).collect();
    assert!(
        got == want,
        "{ctx}: updates_since({from}) differs from the log"
    );
}

/// One random run of `ops` operations. `crash` chooses what a crash does: `None` = only
/// clean reopens.
fn run(config: Config, seed: u64, ops: usize, crash: Option<(FsCrashMode, CrashPolicy)>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let knobs = Knobs::draw(seed);
    eprintln!(
        "model: {config:?} seed {seed} (replay: MATRIXKV_MODEL_CONFIG={config:?} \
         MATRIXKV_MODEL_SEED={seed}), crash {crash:?}, {knobs:?}"
    );
    let mut env = Env::new(config, knobs);
    let mut db = env.open();
    db.create_keyspace("side", side_options(config))
        .expect("create keyspace side");
    let mut side_drops = 0;
    // WAL segments recycled over all the instances of the run (the 64 KiB memtables switch
    // often: recycling is exercised by every operation, reopen and crash below).
    let mut recycled = 0;
    // Bytes the write path separated into blob files, over every instance of the run.
    let mut at_write = 0;
    let mut model: Model = BTreeMap::new();
    // State known durable (at the last open, flush or sync write), and ops since then.
    let mut durable_model = model.clone();
    let mut log: Vec<(u64, Ops)> = Vec::new();
    // Live snapshots with the model as of each, and whether keyspace `side` is still the one
    // the snapshot saw (it is not after a drop and re-creation).
    let mut snapshots: Vec<(matrixkv::Snapshot, Model, bool)> = Vec::new();
    // Iterators kept open across writes, flushes and compactions, read a little at a time.
    let mut iters: Vec<OpenIter> = Vec::new();
    // Open iterators read to their end, and of those, the ones that saw a flush.
    let (mut iters_done, mut iters_across_flush) = (0, 0);
    // Blob GC jobs run by every incarnation of the database.
    let mut gc_jobs = 0;
    // Bytes written into persistent memtables (NoveLSM), over every instance of the run.
    let mut pmt_bytes = 0;
    // Selective compactions and global-index bytes (SLM-DB), over every instance of the run.
    let mut selective = 0;
    let mut index_bytes = 0;
    let mut checkpoints = 0;
    // Backups of every incarnation go to one directory (incremental across them).
    let mut backup_fs = MemFs::new();
    let space = 400;
    for step in 0..ops {
        let ctx = format!("{config:?} seed {seed} step {step}");
        if step == 350 {
            // A no-space episode: the disk fills, every write is acknowledged or refused with
            // NoSpace and then not applied, and space returns. Its own random stream keeps the
            // rest of the run's operations unchanged.
            let mut erng = StdRng::seed_from_u64(seed ^ (step as u64) ^ 0x00f0_11ed);
            env.fs.set_capacity(Some(env.fs.total_bytes() + (8 << 10)));
            for _ in 0..80 {
                let (k, v) = (key(&mut erng, space), value(&mut erng));
                match db.put(&k, &v) {
                    Ok(()) => {
                        model.insert(k.clone(), v.clone());
                        log.push((db.last_sequence().0, vec![(k, Op::Put(v))]));
                    }
                    Err(e) => assert!(e.is_no_space(), "{ctx}: a full disk gave {e}"),
                }
            }
            env.fs.set_capacity(None);
            check_all(&db, &model, &format!("{ctx} after a full disk"));
            // Background work resumes at its next retry (within 2 s): until then a flush may
            // still give up with NoSpace.
            let t = std::time::Instant::now();
            while let Err(e) = db.flush() {
                assert!(e.is_no_space(), "{ctx}: flush after a full disk gave {e}");
                assert!(
                    t.elapsed().as_secs() < 10,
                    "{ctx}: writes did not resume: {e}"
                );
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            durable_model = model.clone();
            log.clear();
        }
        if step % 50 == 25 && !log.is_empty() {
            if config.logs_every_write() {
                // Its own random stream keeps the run's operations unchanged.
                let mut urng = StdRng::seed_from_u64(seed ^ (step as u64) ^ 0x00bd_a7e5);
                let i = urng.gen_range(0..log.len());
                check_updates_since(&db, &log, i, &format!("{ctx}: updates since log[{i}]"));
            } else {
                let e = db
                    .updates_since(SeqNo(log[0].0))
                    .map(|_| ())
                    .expect_err("updates_since refuses without a WAL record of every write");
                assert!(e.to_string().contains("WAL"), "{ctx}: {e}");
            }
        }
        if rng.gen_ratio(1, 150) {
            // A manual compaction of a random range (or everything) changes no value.
            let (mut lo, mut hi) = (key(&mut rng, space), key(&mut rng, space));
            if lo > hi {
                std::mem::swap(&mut lo, &mut hi);
            }
            let whole = rng.gen_ratio(1, 3);
            let (begin, end) = if whole {
                (None, None)
            } else {
                (Some(lo.as_slice()), Some(hi.as_slice()))
            };
            db.compact_range(begin, end).expect("compact_range");
            // It flushed: everything before it is durable.
            durable_model = model.clone();
            log.clear();
            if rng.gen_ratio(1, 4) {
                check_all(&db, &model, &format!("{ctx} after compact_range"));
            }
        }
        if rng.gen_ratio(1, 200) {
            // A checkpoint into tiers of its own holds exactly the model, also after the power
            // loss (or process crash) of its tiers right after the call returns.
            let target = Env {
                fs: MemFs::new(),
                fast: SimFastTier::new("/ckpt/fast"),
                config,
                knobs,
            };
            let mut o = target.options();
            o.fast_dir = "/ckpt/fast".into();
            o.slow_dir = "/ckpt/slow".into();
            db.checkpoint_to(o).expect("checkpoint");
            checkpoints += 1;
            // It flushed: everything before it is durable.
            durable_model = model.clone();
            log.clear();
            let (fs_mode, policy) = crash.unwrap_or((FsCrashMode::KeepAll, CrashPolicy::KeepAll));
            let (fs, fast) = target
                .fs
                .crash_with(fs_mode, seed ^ step as u64, || target.fast.crash(policy));
            let crashed = Env {
                fs,
                fast,
                config,
                knobs,
            };
            let mut o = crashed.options();
            o.fast_dir = "/ckpt/fast".into();
            o.slow_dir = "/ckpt/slow".into();
            let copy = Db::open(o).expect("open checkpoint");
            check_all(&copy, &model, &format!("{ctx} checkpoint"));
            copy.close().expect("close checkpoint");
            // An incremental backup into the run's backup directory survives a power loss of
            // that directory and restores exactly the model.
            'backup: {
                let engine =
                    matrixkv::BackupEngine::open_on(Arc::new(backup_fs.clone()), "/backups")
                        .expect("backup dir");
                if !config.backs_up() {
                    let e = engine
                        .create_backup(&db)
                        .expect_err("no backup in this design");
                    assert!(e.to_string().contains("not supported"), "{ctx}: {e}");
                    break 'backup;
                }
                let info = engine.create_backup(&db).expect("backup");
                drop(engine);
                backup_fs = backup_fs.crash(fs_mode, seed ^ step as u64);
                let engine =
                    matrixkv::BackupEngine::open_on(Arc::new(backup_fs.clone()), "/backups")
                        .expect("backup dir after a crash");
                let list = engine.list().expect("list backups");
                assert_eq!(
                    list.last().map(|b| b.id),
                    Some(info.id),
                    "{ctx}: backups {list:?}"
                );
                let target = Env {
                    fs: MemFs::new(),
                    fast: SimFastTier::new("/restored/fast"),
                    config,
                    knobs,
                };
                let mut o = target.options();
                o.fast_dir = "/restored/fast".into();
                o.slow_dir = "/restored/slow".into();
                engine.restore(info.id, o.clone()).expect("restore");
                let copy = Db::open(o).expect("open restored backup");
                check_all(&copy, &model, &format!("{ctx} restored backup {}", info.id));
                copy.close().expect("close restored backup");
                if list.len() > 3 {
                    engine.purge_old_backups(2).expect("purge");
                }
            }
        }
        if step % 53 == 13 {
            // A range delete from its own random stream (keeps the run's operations
            // unchanged): a short range, sometimes in a batch with a put inside it written
            // after it (which it does not cover).
            let mut drng = StdRng::seed_from_u64(seed ^ (step as u64) ^ 0x0de1_e7e5);
            let lo = drng.gen_range(0..space);
            let len = drng.gen_range(1..12);
            let start = format!("key{lo:05}").into_bytes();
            let end = format!("key{:05}", lo + len).into_bytes();
            let mut ops = vec![(start.clone(), Op::DeleteRange(end.clone()))];
            if drng.gen_ratio(1, 3) {
                let mut b = WriteBatch::new();
                b.delete_range(&start, &end);
                let k = format!("key{:05}", lo + drng.gen_range(0..len)).into_bytes();
                let v = value(&mut drng);
                b.put(&k, &v);
                ops.push((k, Op::Put(v)));
                db.write(b).expect("write with a range delete");
            } else {
                db.delete_range(&start, &end).expect("delete_range");
            }
            for (k, op) in &ops {
                apply(&mut model, k, op);
            }
            log.push((db.last_sequence().0, ops));
        }
        if step % 7 == 3 || step % 210 == 108 {
            // A write to keyspace `side` (alone or in a batch with the default keyspace), or
            // now and then its drop and re-creation, from its own random stream.
            let mut srng = StdRng::seed_from_u64(seed ^ (step as u64) ^ 0x51de_0001);
            let side = db.keyspace("side").expect("keyspace side");
            let k = key(&mut srng, space);
            let choice = if step % 210 == 108 {
                0
            } else {
                srng.gen_range(1..40)
            };
            let ops = match choice {
                0 => {
                    // Snapshots of the dropped keyspace cannot be read through the new one
                    // (their default keyspace still can); its open iterators go.
                    for s in &mut snapshots {
                        s.2 = false;
                    }
                    iters.retain(|i| i.keyspace == "default");
                    db.drop_keyspace("side").expect("drop side");
                    side_drops += 1;
                    assert!(
                        matches!(side.get(&k), Err(matrixkv::Error::KeyspaceDropped { .. })),
                        "{ctx}: a dropped keyspace's handle still reads"
                    );
                    db.create_keyspace("side", side_options(config))
                        .expect("create side again");
                    vec![(SIDE.to_vec(), Op::DeleteRange(SIDE_END.to_vec()))]
                }
                1..=15 => {
                    let v = value(&mut srng);
                    side.put(&k, &v).expect("put side");
                    vec![(side_key(&k), Op::Put(v))]
                }
                16..=21 => {
                    side.delete(&k).expect("delete side");
                    vec![(side_key(&k), Op::Delete)]
                }
                22..=27 if config.merges() => {
                    let operand = format!("s{step}").into_bytes();
                    side.merge(&k, &operand).expect("merge side");
                    vec![(side_key(&k), Op::Merge(operand))]
                }
                28..=30 => {
                    let end = format!("key{:05}", srng.gen_range(0..space)).into_bytes();
                    if k < end {
                        side.delete_range(&k, &end).expect("delete_range side");
                        vec![(side_key(&k), Op::DeleteRange(side_key(&end)))]
                    } else {
                        Vec::new()
                    }
                }
                _ => {
                    // One batch over both keyspaces: all or nothing after a crash.
                    let (v1, v2) = (value(&mut srng), value(&mut srng));
                    let k2 = key(&mut srng, space);
                    let mut b = WriteBatch::new();
                    b.put_cf(&side, &k, &v1);
                    b.put(&k2, &v2);
                    db.write(b).expect("write across keyspaces");
                    vec![(side_key(&k), Op::Put(v1)), (k2, Op::Put(v2))]
                }
            };
            if !ops.is_empty() {
                for (k, op) in &ops {
                    apply(&mut model, k, op);
                }
                log.push((db.last_sequence().0, ops.clone()));
            }
            if ops.first().is_some_and(|(k, _)| k == SIDE) {
                // A drop persists everything before it.
                for (_, ops) in log.drain(..) {
                    for (k, op) in ops {
                        apply(&mut durable_model, &k, &op);
                    }
                }
            }
        }
        if step % 4 == 1 {
            // Open an iterator (when fewer than 3 are) or move one a few entries on, from its
            // own random stream: it yields the state of its creation however much was
            // written, flushed and compacted since.
            let mut irng = StdRng::seed_from_u64(seed ^ (step as u64) ^ 0x0017_e2a7);
            if iters.len() < 3 && irng.gen_bool(0.4) {
                let (ks, it, want) = if irng.gen_bool(0.6) {
                    ("default", db.iter().expect("iter"), default_part(&model))
                } else {
                    let side = db.keyspace("side").expect("keyspace side");
                    ("side", side.iter().expect("iter side"), side_part(&model))
                };
                let mut o = OpenIter {
                    it,
                    keyspace: ks,
                    want: want.into_iter().collect(),
                    pos: 0,
                    born: step,
                    flushes: flushes(&db),
                };
                if irng.gen_bool(0.5) {
                    o.it.seek_to_first().expect("seek_to_first");
                } else {
                    let probe = key(&mut irng, space);
                    o.it.seek(&probe).expect("seek");
                    o.pos = o.want.partition_point(|(k, _)| *k < probe);
                }
                o.check(&format!("{ctx}: new iterator"));
                iters.push(o);
            } else if !iters.is_empty() {
                let i = irng.gen_range(0..iters.len());
                if iters[i].advance(&mut irng, &ctx) {
                    let done = iters.remove(i);
                    iters_done += 1;
                    iters_across_flush += usize::from(done.flushes != flushes(&db));
                }
            }
        }
        let sync = rng.gen_ratio(1, 20);
        // Half of the durability points are a non-sync write followed by `Db::sync_wal`.
        let sync_after = sync && rng.gen_bool(0.5);
        let wo = WriteOptions {
            sync: sync && !sync_after,
        };
        let op = rng.gen_range(0..100);
        let is_write = op < 63;
        match op {
            0..=39 => {
                // Most puts of `SeparateAtWrite` overwrite three hot keys, so that some
                // memtables' value files are mostly garbage at their flush (copied out and
                // dropped) and others are installed.
                let k = if config.hot_puts() && rng.gen_bool(0.7) {
                    key(&mut rng, 3)
                } else {
                    key(&mut rng, space)
                };
                let v = value(&mut rng);
                db.put_opt(&k, &v, &wo).expect("put");
                model.insert(k.clone(), v.clone());
                log.push((db.last_sequence().0, vec![(k, Op::Put(v))]));
            }
            40..=44 => {
                // Short operands: a key's merged value grows with every one.
                let k = key(&mut rng, space);
                let operand = format!("m{step}").into_bytes();
                let op = if config.merges() {
                    db.merge_opt(&k, &operand, &wo).expect("merge");
                    Op::Merge(operand)
                } else {
                    db.put_opt(&k, &operand, &wo).expect("put");
                    Op::Put(operand)
                };
                apply(&mut model, &k, &op);
                log.push((db.last_sequence().0, vec![(k, op)]));
            }
            45..=54 => {
                let k = key(&mut rng, space);
                db.delete_opt(&k, &wo).expect("delete");
                model.remove(&k);
                log.push((db.last_sequence().0, vec![(k, Op::Delete)]));
            }
            55..=62 => {
                let mut b = WriteBatch::new();
                let mut ops = Vec::new();
                for _ in 0..rng.gen_range(1..8) {
                    let k = key(&mut rng, space);
                    match rng.gen_range(0..8) {
                        0 | 1 => {
                            b.delete(&k);
                            ops.push((k, Op::Delete));
                        }
                        2 if config.merges() => {
                            let operand = format!("b{step}").into_bytes();
                            b.merge(&k, &operand);
                            ops.push((k, Op::Merge(operand)));
                        }
                        _ => {
                            let v = value(&mut rng);
                            b.put(&k, &v);
                            ops.push((k, Op::Put(v)));
                        }
                    }
                }
                db.write_opt(b, &wo).expect("write");
                for (k, op) in &ops {
                    apply(&mut model, k, op);
                }
                log.push((db.last_sequence().0, ops));
            }
            63..=74 => {
                let k = key(&mut rng, space);
                assert_eq!(
                    db.get(&k).expect("get"),
                    model.get(&k).cloned(),
                    "{ctx}: get"
                );
            }
            75..=79 => {
                // Several keys at one point in time, duplicates and absent keys included.
                let keys: Vec<Vec<u8>> = (0..rng.gen_range(0..12))
                    .map(|_| key(&mut rng, space))
                    .collect();
                check_multi_get(
                    db.multi_get(&keys),
                    &keys,
                    &model,
                    &format!("{ctx}: multi_get of {} keys", keys.len()),
                );
            }
            80..=83 => {
                // Up to 4 snapshots at once; when full, a random one is released.
                if snapshots.len() >= 4 {
                    snapshots.remove(rng.gen_range(0..snapshots.len()));
                }
                snapshots.push((db.snapshot(), model.clone(), true));
            }
            84..=88 => {
                // Every live snapshot reads the state of its time: gets, multi_gets and full
                // scans of both keyspaces (`side` unless it was dropped since), a bounded range.
                let side = db.keyspace("side").expect("keyspace side");
                let n = snapshots.len();
                for (i, (snap, smodel, side_live)) in snapshots.iter().enumerate() {
                    let sctx = format!("{ctx}: snapshot {i} of {n}");
                    let ro = snap.read_options();
                    let keys = [
                        key(&mut rng, space),
                        key(&mut rng, space),
                        key(&mut rng, space),
                    ];
                    assert_eq!(
                        snap.get(&keys[0]).expect("get"),
                        smodel.get(&keys[0]).cloned(),
                        "{sctx}: get"
                    );
                    check_multi_get(
                        snap.multi_get(&keys),
                        &keys,
                        smodel,
                        &format!("{sctx}: multi_get"),
                    );
                    check_scan_in(
                        Some((&db, "default")),
                        &mut db.iter_opt(&ro).expect("iter"),
                        &default_part(smodel),
                        &format!("{sctx}: scan"),
                    );
                    if *side_live {
                        let side_model = side_part(smodel);
                        assert_eq!(
                            side.get_opt(&keys[0], &ro).expect("get side"),
                            side_model.get(&keys[0]).cloned(),
                            "{sctx}: side get"
                        );
                        check_multi_get(
                            side.multi_get_opt(&keys, &ro),
                            &keys,
                            &side_model,
                            &format!("{sctx}: side multi_get"),
                        );
                        check_scan_in(
                            Some((&db, "side")),
                            &mut side.iter_opt(&ro).expect("iter side"),
                            &side_model,
                            &format!("{sctx}: side scan"),
                        );
                    }
                    check_range(&db, smodel, &mut rng, &ro, &sctx);
                }
            }
            89..=92 => check_range(&db, &model, &mut rng, &ReadOptions::default(), &ctx),
            93..=94 => {
                db.flush().expect("flush");
                durable_model = model.clone();
                log.clear();
            }
            95..=96 => {
                snapshots.clear();
                iters.clear();
                gc_jobs += db.stats().blob_gc_jobs;
                pmt_bytes += db.stats().persistent_memtable_bytes;
                selective += db.stats().selective_compactions + db.stats().partition_compactions;
                index_bytes += db.stats().index_bytes_written;
                recycled += db.stats().wal_segments_recycled;
                at_write += db.stats().blob_bytes_at_write;
                db.close().expect("close");
                if let Some((fs_mode, policy)) = crash
                    && step % 2 == 1
                {
                    // A power loss right after a clean close loses nothing: the close made
                    // every acknowledged write durable.
                    let (fs, fast) = env
                        .fs
                        .crash_with(fs_mode, seed ^ step as u64, || env.fast.crash(policy));
                    env = Env {
                        fs,
                        fast,
                        config,
                        knobs,
                    };
                }
                db = env.open();
                check_all(&db, &model, &format!("{ctx} after reopen"));
                durable_model = model.clone();
                log.clear();
            }
            _ => {
                let Some((fs_mode, policy)) = crash else {
                    continue;
                };
                snapshots.clear();
                iters.clear();
                // Take the crash image while the database is still running (no clean close).
                // One consistent cut of both tiers while the database keeps running.
                let (fs, fast) = env
                    .fs
                    .crash_with(fs_mode, seed ^ step as u64, || env.fast.crash(policy));
                let crashed = Env {
                    fs,
                    fast,
                    config,
                    knobs,
                };
                gc_jobs += db.stats().blob_gc_jobs;
                pmt_bytes += db.stats().persistent_memtable_bytes;
                selective += db.stats().selective_compactions + db.stats().partition_compactions;
                index_bytes += db.stats().index_bytes_written;
                recycled += db.stats().wal_segments_recycled;
                at_write += db.stats().blob_bytes_at_write;
                drop(db);
                env = crashed;
                db = env.open();
                let recovered = db.last_sequence().0;
                // Rebuild the model as of the recovered sequence number: a prefix of history.
                let mut m = durable_model.clone();
                for (seq, ops) in &log {
                    if *seq > recovered {
                        break;
                    }
                    for (k, op) in ops {
                        apply(&mut m, k, op);
                    }
                }
                if matches!(policy, CrashPolicy::KeepAll) && matches!(fs_mode, FsCrashMode::KeepAll)
                {
                    assert_eq!(
                        m, model,
                        "{ctx}: a process crash lost an acknowledged write"
                    );
                }
                model = m;
                check_all(&db, &model, &format!("{ctx} after crash"));
                durable_model = model.clone();
                log.clear();
            }
        }
        if sync_after && is_write {
            db.sync_wal().expect("sync_wal");
        }
        if sync && is_write {
            // Everything up to a synced write (or a `sync_wal` after it) is durable.
            for (_, ops) in log.drain(..) {
                for (k, op) in ops {
                    apply(&mut durable_model, &k, &op);
                }
            }
        }
    }
    check_all(&db, &model, &format!("{config:?} seed {seed} end"));
    let s = db.stats();
    if matches!(
        config,
        Config::Columns
            | Config::AllToAllNoHints
            | Config::XEngine
            | Config::NoveLsm
            | Config::SeparateAtWrite
    ) {
        assert!(
            s.container_capacity_bytes == env.options().container_bytes,
            "{s}"
        );
    }
    if matches!(config, Config::Tables) {
        assert_eq!(s.blob_bytes_written, 0, "{s}");
    }
    at_write += s.blob_bytes_at_write;
    assert_eq!(
        at_write > 0,
        env.options().separates_at_write(),
        "{config:?}: values separated by the write path: {at_write} bytes"
    );
    gc_jobs += s.blob_gc_jobs;
    pmt_bytes += s.persistent_memtable_bytes;
    selective += s.selective_compactions + s.partition_compactions;
    index_bytes += s.index_bytes_written;
    assert_eq!(
        pmt_bytes > 0,
        matches!(config, Config::NoveLsm | Config::SlmDb | Config::LightKv),
        "{config:?}: persistent memtables written: {pmt_bytes} bytes"
    );
    if !matches!(config, Config::Tables | Config::SlmDb | Config::LightKv) {
        assert!(gc_jobs > 0, "blob GC never ran: {s}");
    }
    if matches!(config, Config::SlmDb | Config::LightKv) {
        assert!(
            selective > 0,
            "no selective or partition compaction ran: {s}"
        );
        assert!(index_bytes > 0, "the global index was never written: {s}");
    }
    if ops > 1000 {
        assert!(
            iters_across_flush > 0,
            "{config:?} seed {seed}: of {iters_done} iterators read to the end, none was open \
             across a flush"
        );
    }
    assert!(
        checkpoints > 0,
        "{config:?} seed {seed}: no checkpoint was taken"
    );
    if ops > 108 {
        assert!(
            side_drops > 0,
            "{config:?} seed {seed}: side was never dropped"
        );
    }
    assert!(
        FILTER_CALLS.load(std::sync::atomic::Ordering::Relaxed) > 0,
        "the compaction filter was never called"
    );
    recycled += s.wal_segments_recycled;
    assert!(
        recycled > 0,
        "{config:?} seed {seed}: no WAL segment was recycled"
    );
    db.verify().expect("verify");
    db.close().expect("close");
}

/// The configurations to run: all, or the one `MATRIXKV_MODEL_CONFIG` names (e.g. `SlmDb`).
fn configs() -> Vec<Config> {
    match std::env::var("MATRIXKV_MODEL_CONFIG") {
        Ok(name) => {
            let picked: Vec<Config> = CONFIGS
                .into_iter()
                .filter(|c| format!("{c:?}") == name)
                .collect();
            assert!(!picked.is_empty(), "no configuration is named {name}");
            picked
        }
        Err(_) => CONFIGS.to_vec(),
    }
}

fn seeds(default: &[u64]) -> Vec<u64> {
    if let Ok(s) = std::env::var("MATRIXKV_MODEL_SEED") {
        return vec![s.parse().expect("MATRIXKV_MODEL_SEED must be a number")];
    }
    match std::env::var("MATRIXKV_MODEL_SEEDS") {
        Ok(n) => {
            let n: u64 = n.parse().expect("MATRIXKV_MODEL_SEEDS must be a number");
            // Far from the other tests' defaults: each test's campaign draws its own seeds.
            (0..n).map(|i| default[0] * 1_000_003 + i).collect()
        }
        Err(_) => default.to_vec(),
    }
}

#[test]
fn random_operations_with_reopens_match_the_model() {
    for config in configs() {
        for seed in seeds(&[1, 2]) {
            run(config, seed, 2500, None);
        }
    }
}

#[test]
fn process_crashes_lose_no_acknowledged_write() {
    for config in configs() {
        for seed in seeds(&[11]) {
            run(
                config,
                seed,
                2500,
                Some((FsCrashMode::KeepAll, CrashPolicy::KeepAll)),
            );
        }
    }
}

#[test]
fn power_loss_recovers_a_prefix_including_every_synced_write() {
    for config in configs() {
        for seed in seeds(&[21]) {
            let crash = (FsCrashMode::DropUnsynced, CrashPolicy::DropUnpersisted);
            run(config, seed, 2500, Some(crash));
        }
        for seed in seeds(&[31]) {
            let crash = (FsCrashMode::RandomTail, CrashPolicy::Random { seed });
            run(config, seed, 2500, Some(crash));
        }
    }
}
