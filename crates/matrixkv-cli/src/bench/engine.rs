//! The [`Engine`] trait every benchmarked store implements, the normalized [`EngineStats`] the
//! metrics are computed from, and the matrixkv implementation.
//!
//! The workload code only calls the trait, so key generation, timing, histograms and sampling
//! are the same code for every engine. An engine is shared by the benchmark's worker threads
//! and its once-a-second sampler: implementations must be `Send + Sync`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use matrixkv::{Compression, Db, Options, WriteBatch, WriteOptions};

use super::args::BenchArgs;

/// One operation of a write batch.
#[derive(Debug, Clone, Copy)]
pub enum BatchOp<'a> {
    /// Set a key.
    Put(&'a [u8], &'a [u8]),
    /// Delete a key.
    Delete(&'a [u8]),
    /// Merge an operand into a key (a u64 counter increment, see [`Engine::merge`]).
    Merge(&'a [u8], &'a [u8]),
}

/// A positioned cursor over an engine's keys in order.
pub trait Cursor {
    /// Positions at the first key.
    fn seek_to_first(&mut self) -> Result<()>;
    /// Positions at the first key `>= key`.
    fn seek(&mut self, key: &[u8]) -> Result<()>;
    /// True when positioned at an entry.
    fn valid(&self) -> bool;
    /// The current key (valid cursors only).
    fn key(&self) -> &[u8];
    /// The current value (valid cursors only).
    fn value(&self) -> &[u8];
    /// Moves to the next entry.
    fn next(&mut self) -> Result<()>;
}

/// Counters and shape of an engine, normalized across engines. Counters are cumulative since
/// open; the harness subtracts snapshots to get per-benchmark figures.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EngineStats {
    /// Time writers waited for background work, in microseconds (the engine's own count).
    pub stall_micros: u64,
    /// Number of times a writer waited (0 when the engine does not count them).
    pub stalls: u64,
    /// Bytes appended to the WAL.
    pub wal_bytes: u64,
    /// Whether the WAL lives on the fast tier.
    pub wal_on_fast: bool,
    /// Bytes of tables written to the fast tier (flushes, L0, and for RocksDB-L0-fast the
    /// levels its `db_paths` put there). WAL excluded.
    pub fast_table_bytes: u64,
    /// Bytes written to the slow tier: tables and manifest. WAL excluded.
    pub slow_bytes: u64,
    /// Memtable flushes.
    pub flushes: u64,
    /// Bytes written by flushes.
    pub flush_bytes: u64,
    /// Compactions (including trivial moves where the engine counts them).
    pub compactions: u64,
    /// Bytes read by compactions.
    pub compaction_input_bytes: u64,
    /// Bytes written by compactions.
    pub compaction_output_bytes: u64,
    /// L0→L1 compactions (0 when the engine does not tell them apart).
    pub l0_compactions: u64,
    /// L0 bytes read by L0→L1 compactions.
    pub l0_compaction_input_bytes: u64,
    /// Per level: (tables, bytes).
    pub levels: Vec<(u64, u64)>,
    /// How the figures were obtained, when it needs saying (e.g. approximations).
    pub notes: Vec<String>,
    /// The directory of the engine's fast-tier files (None when unknown): its size on disk
    /// at the end of a benchmark is reported.
    pub fast_dir: Option<PathBuf>,
    /// The directory of the engine's slow-tier files (None when unknown): its size on disk
    /// at the end of a benchmark is the numerator of space amplification.
    pub slow_dir: Option<PathBuf>,
}

impl EngineStats {
    /// Number of L0 tables (0 when the engine reports no levels).
    pub fn l0_files(&self) -> u64 {
        self.levels.first().map_or(0, |l| l.0)
    }

    /// Bytes written to both tiers, WAL included (the numerator of "WA all tiers").
    pub fn bytes_written(&self) -> u64 {
        self.slow_bytes + self.fast_table_bytes + self.wal_bytes
    }

    /// The counters of `self` minus those of `before` (levels and notes are `self`'s).
    pub fn delta(&self, before: &EngineStats) -> EngineStats {
        EngineStats {
            stall_micros: self.stall_micros.saturating_sub(before.stall_micros),
            stalls: self.stalls.saturating_sub(before.stalls),
            wal_bytes: self.wal_bytes.saturating_sub(before.wal_bytes),
            wal_on_fast: self.wal_on_fast,
            fast_table_bytes: self
                .fast_table_bytes
                .saturating_sub(before.fast_table_bytes),
            slow_bytes: self.slow_bytes.saturating_sub(before.slow_bytes),
            flushes: self.flushes.saturating_sub(before.flushes),
            flush_bytes: self.flush_bytes.saturating_sub(before.flush_bytes),
            compactions: self.compactions.saturating_sub(before.compactions),
            l0_compactions: self.l0_compactions.saturating_sub(before.l0_compactions),
            l0_compaction_input_bytes: self
                .l0_compaction_input_bytes
                .saturating_sub(before.l0_compaction_input_bytes),
            compaction_input_bytes: self
                .compaction_input_bytes
                .saturating_sub(before.compaction_input_bytes),
            compaction_output_bytes: self
                .compaction_output_bytes
                .saturating_sub(before.compaction_output_bytes),
            levels: self.levels.clone(),
            notes: self.notes.clone(),
            fast_dir: self.fast_dir.clone(),
            slow_dir: self.slow_dir.clone(),
        }
    }
}

/// Bytes of all files under `dir`, recursively (0 for a missing directory; files that vanish
/// while it is walked are skipped): an engine's footprint on one tier.
pub fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(std::result::Result::ok)
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}

/// A key-value store under benchmark.
pub trait Engine: Send + Sync {
    /// The engine's name in reports (`matrixkv`, `rocksdb-ssd`, ...).
    fn name(&self) -> &str;
    /// Sets `key` to `value`.
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()>;
    /// Sets `key` to `value` durably: this write and every earlier one survive a power loss
    /// once it returns (`--sync_every`).
    fn put_sync(&self, key: &[u8], value: &[u8]) -> Result<()>;
    /// The value of `key`.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// The values of `keys`, in order: one lookup per key unless the engine has a batched
    /// read (db_bench's `multireadrandom`).
    fn multi_get(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        keys.iter().map(|k| self.get(k)).collect()
    }
    /// Deletes `key`.
    fn delete(&self, key: &[u8]) -> Result<()>;
    /// Merges `operand` (8 bytes, a little-endian u64) into `key` with the engine's u64-add
    /// merge operator (db_bench's `--merge_operator=uint64add`); engines without merge
    /// operators refuse.
    fn merge(&self, key: &[u8], operand: &[u8]) -> Result<()> {
        let _ = (key, operand);
        anyhow::bail!(
            "{} has no merge operator (mergerandom needs one)",
            self.name()
        )
    }
    /// Deletes every key in `[start, end)` with one range tombstone (RocksDB's
    /// `DeleteRange`); engines without range deletes refuse.
    fn delete_range(&self, start: &[u8], end: &[u8]) -> Result<()> {
        let _ = (start, end);
        anyhow::bail!(
            "{} has no range delete (deleterange needs one)",
            self.name()
        )
    }
    /// Applies `ops` atomically.
    fn write_batch(&self, ops: &[BatchOp<'_>]) -> Result<()>;
    /// A cursor over the latest state (unpositioned).
    fn cursor(&self) -> Result<Box<dyn Cursor + '_>>;
    /// A snapshot of the engine's counters and level layout.
    fn stats(&self) -> EngineStats;
    /// Waits until flushes and compactions have nothing left to do.
    fn settle(&self) -> Result<()>;
    /// The engine's own description of its configuration (for the results directory).
    fn describe(&self) -> String;
    /// Closes the engine, reporting errors that a drop would hide.
    fn close(self: Box<Self>) -> Result<()>;

    /// Seeks to `key`; returns the key found there and the length of its value, if any.
    fn seek(&self, key: &[u8]) -> Result<Option<(Vec<u8>, u64)>> {
        let mut c = self.cursor()?;
        c.seek(key)?;
        Ok(c.valid()
            .then(|| (c.key().to_vec(), c.value().len() as u64)))
    }

    /// Seeks to `start` and reads up to `n` entries; returns (entries, bytes of keys and values).
    fn scan(&self, start: &[u8], n: usize) -> Result<(usize, u64)> {
        let mut c = self.cursor()?;
        c.seek(start)?;
        let mut got = 0;
        let mut bytes = 0u64;
        while got < n && c.valid() {
            bytes += (c.key().len() + c.value().len()) as u64;
            got += 1;
            c.next()?;
        }
        Ok((got, bytes))
    }
}

/// Where an engine's files go.
#[derive(Debug, Clone)]
pub struct Placement {
    /// The engine's fast-tier directory (created by the engine).
    pub fast_dir: PathBuf,
    /// The engine's slow-tier directory (created by the engine).
    pub slow_dir: PathBuf,
}

/// Engines `--engines` can name. `db_bench` is run as an external process (see `dbbench.rs`).
pub const ENGINE_NAMES: &[&str] = &[
    "matrixkv",
    "matrixkv-separate-at-write",
    "matrixkv-values-in-wal",
    "matrixkv-values-in-wal-pread",
    "matrixkv-xengine",
    "matrixkv-novelsm",
    "matrixkv-slmdb",
    "matrixkv-lightkv",
    "rocksdb",
    "rocksdb-ssd",
    "rocksdb-l0-fast",
    "rocksdb-blob",
    "rocksdb-best",
    "fjall",
    "append-log",
    "db_bench",
];

/// The canonical name of an engine as written in `--engines` (`rocksdb` means `rocksdb-ssd`).
pub fn canonical_engine(name: &str) -> Result<&'static str> {
    match name {
        "matrixkv" => Ok("matrixkv"),
        "matrixkv-separate-at-write" => Ok("matrixkv-separate-at-write"),
        "matrixkv-values-in-wal" => Ok("matrixkv-values-in-wal"),
        "matrixkv-values-in-wal-pread" => Ok("matrixkv-values-in-wal-pread"),
        "matrixkv-xengine" => Ok("matrixkv-xengine"),
        "matrixkv-novelsm" => Ok("matrixkv-novelsm"),
        "matrixkv-slmdb" => Ok("matrixkv-slmdb"),
        "matrixkv-lightkv" => Ok("matrixkv-lightkv"),
        "rocksdb" | "rocksdb-ssd" => Ok("rocksdb-ssd"),
        "rocksdb-l0-fast" => Ok("rocksdb-l0-fast"),
        "rocksdb-blob" => Ok("rocksdb-blob"),
        "rocksdb-best" => Ok("rocksdb-best"),
        "fjall" => Ok("fjall"),
        "append-log" => Ok("append-log"),
        "db_bench" | "dbbench" => Ok("db_bench"),
        o => anyhow::bail!("unknown engine `{o}` (one of {})", ENGINE_NAMES.join(", ")),
    }
}

/// Whether engine `name` (canonical) is built into this binary (the RocksDB engines need the
/// `rocksdb` feature, fjall the `fjall` feature; db_bench is an external program).
pub fn engine_built_in(name: &str) -> bool {
    let rocksdb = matches!(
        name,
        "rocksdb-ssd" | "rocksdb-l0-fast" | "rocksdb-blob" | "rocksdb-best"
    );
    (cfg!(feature = "rocksdb") || !rocksdb) && (cfg!(feature = "fjall") || name != "fjall")
}

/// Opens the in-process engine `name` (canonical) at `place`.
pub fn open_engine(name: &str, a: &BenchArgs, place: &Placement) -> Result<Box<dyn Engine>> {
    match name {
        "matrixkv" => Ok(Box::new(MatrixEngine::open(a, place)?)),
        // The default design with every separable value separated as it is written (the
        // default separates those of 2 KiB or more, decision 0028, item 4), and with values
        // logged in the WAL and separated by the flush, whatever `--separate_at_write` and
        // `--separate_at_write_min_bytes` say, so one invocation can compare the three.
        "matrixkv-separate-at-write" => Ok(Box::new(MatrixEngine::open_with(
            a,
            place,
            "matrixkv-separate-at-write",
            |o| {
                o.separate_at_write = true;
                o.separate_at_write_min_bytes = None;
            },
        )?)),
        "matrixkv-values-in-wal" => Ok(Box::new(MatrixEngine::open_with(
            a,
            place,
            "matrixkv-values-in-wal",
            |o| o.separate_at_write = false,
        )?)),
        // And with blob files read by `pread` too: the default before decisions 0028 and 0029,
        // the reference of "no regression" for reads.
        "matrixkv-values-in-wal-pread" => Ok(Box::new(MatrixEngine::open_with(
            a,
            place,
            "matrixkv-values-in-wal-pread",
            |o| {
                o.separate_at_write = false;
                o.mmap_blob_reads = false;
            },
        )?)),
        "matrixkv-xengine" => {
            let design = matrixkv::Design::XEngine(matrixkv::XEngineOptions {
                ror_batch: a.ror_batch,
                ror_wait: std::time::Duration::from_micros(a.ror_wait_us),
                recovery_threads: a.recovery_threads,
            });
            Ok(Box::new(MatrixEngine::open_design(
                a,
                place,
                "matrixkv-xengine",
                design,
            )?))
        }
        "matrixkv-novelsm" => {
            let design = matrixkv::Design::NoveLsm(matrixkv::NoveLsmOptions {
                persistent_memtable_bytes: a.persistent_memtable_bytes,
                parallel_reads: a.parallel_reads,
            });
            // NoveLSM is LevelDB with memtables in NVM: L0 is SSTables (on the fast tier
            // here) and values stay with their keys.
            Ok(Box::new(MatrixEngine::open_with(
                a,
                place,
                "matrixkv-novelsm",
                |o| {
                    o.design = design;
                    o.l0_layout = matrixkv::L0Layout::Tables;
                    o.min_blob_bytes = None;
                },
            )?))
        }
        "matrixkv-slmdb" => {
            let design = matrixkv::Design::SlmDb(matrixkv::SlmDbOptions {
                persistent_memtable_bytes: a.slmdb_memtable_bytes,
                index_bytes: a.slmdb_index_bytes,
                live_key_ratio: a.live_key_ratio,
                leaf_scan_tables: a.leaf_scan_tables,
                leaf_scan_threshold: a.leaf_scan_threshold,
                candidate_trigger: a.candidate_trigger,
                max_merge_tables: a.max_merge_tables,
                scan_window: a.scan_window,
                scan_threshold: a.scan_threshold,
            });
            // SLM-DB is LevelDB with its memtable in PM, one level of tables on disk and the
            // B+-tree index; values stay with their keys.
            Ok(Box::new(MatrixEngine::open_with(
                a,
                place,
                "matrixkv-slmdb",
                |o| {
                    o.design = design;
                    o.l0_layout = matrixkv::L0Layout::Tables;
                    o.min_blob_bytes = None;
                },
            )?))
        }
        "matrixkv-lightkv" => {
            let design = matrixkv::Design::LightKv(matrixkv::LightKvOptions {
                write_buffer_bytes: a.lightkv_buffer_bytes,
                index_bytes: a.lightkv_index_bytes,
                compaction_size: a.compaction_size,
                max_partitions: a.max_partitions,
                partition_bytes: a.partition_bytes,
            });
            // LightKV: its write buffer in PM, partitions of tables on disk and the RH-tree
            // index; values stay with their keys.
            Ok(Box::new(MatrixEngine::open_with(
                a,
                place,
                "matrixkv-lightkv",
                |o| {
                    o.design = design;
                    o.l0_layout = matrixkv::L0Layout::Tables;
                    o.min_blob_bytes = None;
                },
            )?))
        }
        #[cfg(feature = "rocksdb")]
        "rocksdb-ssd" | "rocksdb-l0-fast" | "rocksdb-blob" | "rocksdb-best" => {
            use super::rocks::{RocksEngine, RocksSetup};
            let setup = match name {
                "rocksdb-l0-fast" => RocksSetup::L0Fast,
                "rocksdb-blob" => RocksSetup::Blob,
                "rocksdb-best" => RocksSetup::Best,
                _ => RocksSetup::Ssd,
            };
            Ok(Box::new(RocksEngine::open(a, place, setup)?))
        }
        #[cfg(not(feature = "rocksdb"))]
        "rocksdb-ssd" | "rocksdb-l0-fast" | "rocksdb-blob" | "rocksdb-best" => anyhow::bail!(
            "engine `{name}` needs the `rocksdb` feature: cargo build --release -p matrixkv-cli \
             --features rocksdb (see scripts/bench-reference.sh)"
        ),
        #[cfg(feature = "fjall")]
        "fjall" => Ok(Box::new(super::fjall_engine::FjallEngine::open(a, place)?)),
        #[cfg(not(feature = "fjall"))]
        "fjall" => anyhow::bail!(
            "engine `fjall` needs the `fjall` feature: cargo build --release -p matrixkv-cli \
             --features fjall"
        ),
        "append-log" => Ok(Box::new(super::append_log::AppendLog::open(place)?)),
        o => anyhow::bail!("`{o}` is not an in-process engine"),
    }
}

/// The matrixkv options a benchmark run uses: the reference configuration of docs/benchmarks.md,
/// changed by the ablation flags (matrix container size, L0 layout, column compaction and
/// bounds, gathering threads, hints, switch ratio, key-value separation).
pub fn matrixkv_options(a: &BenchArgs, place: &Placement) -> Result<Options> {
    let mut o = Options::new(&place.slow_dir);
    o.fast_dir = place.fast_dir.clone();
    o.slow_dir = place.slow_dir.clone();
    o.write_buffer_bytes = a.write_buffer_size;
    o.max_write_buffers = a.max_write_buffer_number;
    o.target_file_bytes = a.target_file_size_base;
    o.l0_layout = a
        .l0_layout
        .parse::<matrixkv::L0Layout>()
        .map_err(anyhow::Error::msg)?;
    o.container_bytes = a.container_bytes;
    o.page_bytes = a.page_bytes;
    o.receiver_switch_ratio = a.receiver_switch_ratio;
    o.column_compaction = a.column_compaction;
    o.column_lower_bytes = a.column_lower_bytes;
    o.column_upper_bytes = a.column_upper_bytes;
    // The same background budget as RocksDB's max_background_jobs, not the machine's cores.
    o.column_threads = a.column_threads.unwrap_or_else(|| {
        usize::try_from(a.max_background_jobs / 2)
            .unwrap_or(1)
            .max(1)
    });
    o.hints = a.hints;
    o.direct_writes = a.direct_writes;
    o.mmap_blob_reads = a.mmap_blob_reads;
    if let Some(b) = a.bytes_per_sync {
        o.bytes_per_sync = b;
    }
    if let Some(b) = a.separate_at_write {
        o.separate_at_write = b;
    }
    if let Some(n) = a.separate_at_write_min_bytes {
        o.separate_at_write_min_bytes = Some(n);
    }
    if let Some(b) = a.separate_at_flush {
        o.separate_at_flush = b;
    }
    if let Some(n) = a.wal_recycle_segments {
        o.wal_recycle_segments = n;
    }
    if let Some(n) = a.background_nice {
        o.background_nice = n;
    }
    if let Some(r) = a.memtable_filter_ratio {
        o.memtable_filter_ratio = r;
    }
    if let Some(r) = a.container_slowdown_ratio {
        o.container_slowdown_ratio = r;
    }
    o.min_blob_bytes = a.enable_blob_files.then_some(a.min_blob_size);
    o.blob_file_bytes = a.blob_file_size;
    o.blob_gc_ratio = a.blob_gc_ratio;
    if let Some(b) = a.blob_space_budget {
        o.blob_space_budget = b;
    }
    // The flattened tree: L1 as large as the container unless given.
    o.l1_target_bytes = a.max_bytes_for_level_base.unwrap_or(a.container_bytes);
    o.level_multiplier = a.max_bytes_for_level_multiplier;
    o.l0_compaction_trigger = a.level0_file_num_compaction_trigger;
    o.l0_slowdown_writes_trigger = a.level0_slowdown_writes_trigger;
    o.l0_stop_writes_trigger = a.level0_stop_writes_trigger;
    o.table.compression = a
        .compression_type
        .parse::<Compression>()
        .map_err(anyhow::Error::msg)?;
    o.table.bloom_bits_per_key = a.bloom_bits;
    o.block_cache_bytes = a.cache_size;
    if let Some(n) = a.num_levels {
        o.num_levels = n;
    }
    // mergerandom's counters (db_bench's uint64add); unused by the other benchmarks.
    o.merge_operator = Some(std::sync::Arc::new(matrixkv::U64AddOperator));
    o.validate().context("matrixkv options")?;
    Ok(o)
}

/// matrixkv through its public API.
pub struct MatrixEngine {
    /// The engine's name in reports (`matrixkv`, or the design's `matrixkv-<design>`).
    name: &'static str,
    db: Db,
    wo: WriteOptions,
    description: String,
    fast_dir: PathBuf,
    slow_dir: PathBuf,
}

impl MatrixEngine {
    /// Opens (creating) a matrixkv database at `place` configured from `a`.
    pub fn open(a: &BenchArgs, place: &Placement) -> Result<MatrixEngine> {
        MatrixEngine::open_design(a, place, "matrixkv", matrixkv::Design::MatrixKv)
    }

    /// Opens (creating) a matrixkv database in `design`, reported as `name`.
    pub fn open_design(
        a: &BenchArgs,
        place: &Placement,
        name: &'static str,
        design: matrixkv::Design,
    ) -> Result<MatrixEngine> {
        MatrixEngine::open_with(a, place, name, |o| o.design = design)
    }

    /// Opens the engine `name` with the benchmark's options changed by `adjust`.
    pub fn open_with(
        a: &BenchArgs,
        place: &Placement,
        name: &'static str,
        adjust: impl FnOnce(&mut Options),
    ) -> Result<MatrixEngine> {
        let mut o = matrixkv_options(a, place)?;
        adjust(&mut o);
        o.validate().context("matrixkv options")?;
        let description = format!(
            "{name} ({:?}): fast_dir {} slow_dir {} write_buffer_bytes {} max_write_buffers {} \
             memtable_filter_ratio {} l0 triggers {}/{}/{} l1_target_bytes {} level_multiplier {} num_levels {} \
             target_file_bytes {} compression {} bloom_bits_per_key {} block_cache_bytes {} \
             sync {}; l0_layout {} container_bytes {} page_bytes {} receiver_switch_ratio {} \
             column_compaction {} column bounds {:?} column_threads {} hints {}; min_blob_bytes \
             {:?} separate_at_flush {} separate_at_write {} separate_at_write_min_bytes {:?} \
             blob_file_bytes {} blob_gc_ratio {} blob_space_budget {}; direct_writes {} \
             bytes_per_sync {} mmap_blob_reads {}",
            o.design,
            o.fast_dir.display(),
            o.slow_dir.display(),
            o.write_buffer_bytes,
            o.max_write_buffers,
            o.memtable_filter_ratio,
            o.l0_compaction_trigger,
            o.l0_slowdown_writes_trigger,
            o.l0_stop_writes_trigger,
            o.l1_target_bytes,
            o.level_multiplier,
            o.num_levels,
            o.target_file_bytes,
            o.table.compression,
            o.table.bloom_bits_per_key,
            o.block_cache_bytes,
            a.sync,
            o.l0_layout,
            o.container_bytes,
            o.page_bytes,
            o.receiver_switch_ratio,
            o.column_compaction,
            o.column_bounds(),
            o.column_threads,
            o.hints,
            o.min_blob_bytes,
            o.separate_at_flush,
            o.separate_at_write,
            o.separate_at_write_min_bytes,
            o.blob_file_bytes,
            o.blob_gc_ratio,
            o.blob_space_budget,
            o.direct_writes,
            o.bytes_per_sync,
            o.mmap_blob_reads
        );
        let (fast_dir, slow_dir) = (o.fast_dir.clone(), o.slow_dir.clone());
        let db = Db::open(o).with_context(|| {
            format!(
                "opening matrixkv with its fast tier in {} and its slow tier in {}",
                place.fast_dir.display(),
                place.slow_dir.display()
            )
        })?;
        // `matrixkv stats --db <slow_dir>` (and the other commands) find the fast tier here.
        crate::locate::record_fast_dir(&slow_dir, &fast_dir)
            .with_context(|| format!("writing the fast tier's path into {}", slow_dir.display()))?;
        Ok(MatrixEngine {
            name,
            db,
            wo: WriteOptions { sync: a.sync },
            description,
            fast_dir,
            slow_dir,
        })
    }
}

struct MatrixCursor(matrixkv::DbIterator);

impl Cursor for MatrixCursor {
    fn seek_to_first(&mut self) -> Result<()> {
        Ok(self.0.seek_to_first()?)
    }
    fn seek(&mut self, key: &[u8]) -> Result<()> {
        Ok(self.0.seek(key)?)
    }
    fn valid(&self) -> bool {
        self.0.valid()
    }
    fn key(&self) -> &[u8] {
        self.0.key()
    }
    fn value(&self) -> &[u8] {
        self.0.value()
    }
    fn next(&mut self) -> Result<()> {
        Ok(self.0.next()?)
    }
}

#[cfg(test)]
impl MatrixEngine {
    /// The database, for tests to read counters the harness does not report.
    pub(crate) fn db(&self) -> &Db {
        &self.db
    }
}

impl Engine for MatrixEngine {
    fn name(&self) -> &str {
        self.name
    }
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.db.put_opt(key, value, &self.wo)?)
    }
    fn put_sync(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.db.put_opt(key, value, &WriteOptions { sync: true })?)
    }
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.db.get(key)?)
    }
    fn multi_get(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        self.db
            .multi_get(keys)
            .into_iter()
            .map(|r| Ok(r?))
            .collect()
    }
    fn delete(&self, key: &[u8]) -> Result<()> {
        Ok(self.db.delete_opt(key, &self.wo)?)
    }
    fn merge(&self, key: &[u8], operand: &[u8]) -> Result<()> {
        Ok(self.db.merge_opt(key, operand, &self.wo)?)
    }
    fn delete_range(&self, start: &[u8], end: &[u8]) -> Result<()> {
        Ok(self.db.delete_range_opt(start, end, &self.wo)?)
    }
    fn write_batch(&self, ops: &[BatchOp<'_>]) -> Result<()> {
        let mut b = WriteBatch::new();
        for op in ops {
            match *op {
                BatchOp::Put(k, v) => b.put(k, v),
                BatchOp::Delete(k) => b.delete(k),
                BatchOp::Merge(k, v) => b.merge(k, v),
            }
        }
        Ok(self.db.write_opt(b, &self.wo)?)
    }
    fn cursor(&self) -> Result<Box<dyn Cursor + '_>> {
        Ok(Box::new(MatrixCursor(self.db.iter()?)))
    }
    fn stats(&self) -> EngineStats {
        let s = self.db.stats();
        EngineStats {
            stall_micros: s.stall_micros(),
            stalls: s.stalls,
            wal_bytes: s.wal_bytes,
            wal_on_fast: true,
            // Persistent memtables (NoveLSM) are fast-tier writes besides the WAL.
            fast_table_bytes: s.fast_sst_bytes_written
                + s.persistent_memtable_bytes
                + s.index_bytes_written,
            slow_bytes: s.slow_bytes_written,
            flushes: s.flushes,
            flush_bytes: s.flush_bytes,
            compactions: s.compactions,
            l0_compactions: s.l0_compactions,
            l0_compaction_input_bytes: s.l0_compaction_input_bytes,
            compaction_input_bytes: s.compaction_input_bytes,
            compaction_output_bytes: s.compaction_output_bytes,
            levels: s.levels.iter().map(|&(n, b)| (n as u64, b)).collect(),
            fast_dir: Some(self.fast_dir.clone()),
            slow_dir: Some(self.slow_dir.clone()),
            notes: vec![
                format!(
                    "stalls by cause (cumulative): memtable {:.3} s, L0 slowdown {:.3} s, L0 stop \
                     {:.3} s, container {:.3} s",
                    s.stall_memtable_micros as f64 / 1e6,
                    s.stall_l0_slowdown_micros as f64 / 1e6,
                    s.stall_l0_stop_micros as f64 / 1e6,
                    s.stall_container_micros as f64 / 1e6
                ),
                format!(
                    "flush phases (cumulative): {}; slowest flush {:.1} ms: {}",
                    s.flush_phases,
                    s.slowest_flush.total_micros() as f64 / 1e3,
                    s.slowest_flush
                ),
                format!(
                    "global index (cumulative): {} lookups answered absent, {} sent to the \
                     slow path; {} partition compactions, {} splits; {:.1} MiB written",
                    s.index_misses,
                    s.index_fallbacks,
                    s.partition_compactions,
                    s.partition_splits,
                    s.index_bytes_written as f64 / 1048576.0
                ),
                format!(
                    "WAL segments (cumulative): {} created, {} recycled",
                    s.wal_segments_created, s.wal_segments_recycled
                ),
                format!(
                    "write groups (cumulative): {} for {} operations ({:.2} per group)",
                    s.write_groups,
                    s.user_ops,
                    s.user_ops as f64 / s.write_groups.max(1) as f64
                ),
                format!(
                    "blob files (cumulative): {} live holding {:.1} MiB ({:.1} MiB garbage); \
                     written {:.1} MiB, relocated {:.1} MiB ({} memtable value files copied \
                     out at flush); {} blob reads",
                    s.blob_files,
                    s.blob_bytes.0 as f64 / 1048576.0,
                    s.blob_bytes.1 as f64 / 1048576.0,
                    s.blob_bytes_written as f64 / 1048576.0,
                    s.blob_relocated_bytes as f64 / 1048576.0,
                    s.value_files_relocated,
                    s.blob_reads
                ),
                format!(
                    "blob GC (cumulative): {} jobs, relocated {:.1} MiB, rewrote {:.1} MiB of \
                     tables",
                    s.blob_gc_jobs,
                    s.blob_gc_relocated_bytes as f64 / 1048576.0,
                    s.blob_gc_table_bytes as f64 / 1048576.0
                ),
            ],
        }
    }
    fn settle(&self) -> Result<()> {
        self.db.flush()?;
        Ok(self.db.wait_for_compactions()?)
    }
    fn describe(&self) -> String {
        self.description.clone()
    }
    fn close(self: Box<Self>) -> Result<()> {
        Ok(self.db.close()?)
    }
}

/// Removes `dir` if it exists (a missing directory is not an error).
pub fn remove_dir(dir: &Path) -> Result<()> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("removing {}", dir.display())),
    }
}

/// Test helper for every engine: puts `k0`..`k9`, a batch (delete `k3`, overwrite `k9`), a
/// delete (`k4`), then checks get, seek, scan and a full cursor pass, which must see the 8
/// keys left plus the `extra_keys` the caller wrote before.
#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "a test helper")]
pub(crate) fn exercise_point_and_range_operations(e: &dyn Engine, extra_keys: usize) {
    for i in 0..10u8 {
        e.put(&[b'k', b'0' + i], &[i; 3]).unwrap();
    }
    e.write_batch(&[BatchOp::Delete(b"k3"), BatchOp::Put(b"k9", b"new")])
        .unwrap();
    e.delete(b"k4").unwrap();
    assert_eq!(e.get(b"k3").unwrap(), None);
    assert_eq!(e.get(b"k9").unwrap(), Some(b"new".to_vec()));
    assert_eq!(e.seek(b"k3").unwrap(), Some((b"k5".to_vec(), 3)));
    let (n, bytes) = e.scan(b"k0", 4).unwrap();
    assert_eq!((n, bytes), (4, 4 * 5));
    let mut c = e.cursor().unwrap();
    c.seek_to_first().unwrap();
    let mut keys = 0;
    while c.valid() {
        keys += 1;
        c.next().unwrap();
    }
    drop(c);
    assert_eq!(keys, 8 + extra_keys);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small_args() -> BenchArgs {
        BenchArgs::parse_words([
            "bench",
            "--write_buffer_size=1048576",
            "--cache_size=1048576",
        ])
        .unwrap()
    }

    #[test]
    fn matrixkv_engine_serves_every_trait_operation() {
        let tmp = tempfile::tempdir().unwrap();
        let place = Placement {
            fast_dir: tmp.path().join("fast"),
            slow_dir: tmp.path().join("slow"),
        };
        let e = open_engine("matrixkv", &small_args(), &place).unwrap();
        assert_eq!(e.name(), "matrixkv");
        exercise_point_and_range_operations(e.as_ref(), 0);
        e.settle().unwrap();
        let s = e.stats();
        assert!(s.wal_bytes > 0);
        assert!(s.flushes >= 1);
        assert!(s.levels.iter().map(|l| l.0).sum::<u64>() >= 1);
        assert!(e.describe().contains("write_buffer_bytes 1048576"));
        e.close().unwrap();
    }

    #[test]
    fn column_threads_follow_the_background_job_budget_not_the_cores() {
        let place = Placement {
            fast_dir: "/nonexistent/f".into(),
            slow_dir: "/nonexistent/s".into(),
        };
        let with = |extra: &[&str]| {
            let mut words = vec!["bench"];
            words.extend_from_slice(extra);
            matrixkv_options(&BenchArgs::parse_words(words).unwrap(), &place)
                .unwrap()
                .column_threads
        };
        assert_eq!(with(&[]), 1);
        assert_eq!(with(&["--max_background_jobs=8"]), 4);
        assert_eq!(with(&["--max_background_jobs=1"]), 1);
        assert_eq!(with(&["--max_background_jobs=8", "--column_threads=3"]), 3);
    }

    #[test]
    fn engine_names_are_canonical_and_rocksdb_and_fjall_need_their_features() {
        assert_eq!(canonical_engine("rocksdb").unwrap(), "rocksdb-ssd");
        assert_eq!(canonical_engine("fjall").unwrap(), "fjall");
        assert_eq!(canonical_engine("rocksdb-blob").unwrap(), "rocksdb-blob");
        assert_eq!(canonical_engine("dbbench").unwrap(), "db_bench");
        assert!(canonical_engine("leveldb").is_err());
        if cfg!(not(feature = "rocksdb")) {
            let tmp = tempfile::tempdir().unwrap();
            let place = Placement {
                fast_dir: tmp.path().join("f"),
                slow_dir: tmp.path().join("s"),
            };
            let e = open_engine("rocksdb-ssd", &small_args(), &place)
                .err()
                .unwrap();
            assert!(e.to_string().contains("--features rocksdb"));
        }
        if cfg!(not(feature = "fjall")) {
            let tmp = tempfile::tempdir().unwrap();
            let place = Placement {
                fast_dir: tmp.path().join("f"),
                slow_dir: tmp.path().join("s"),
            };
            let e = open_engine("fjall", &small_args(), &place).err().unwrap();
            assert!(e.to_string().contains("--features fjall"), "{e}");
        }
    }

    #[test]
    fn stats_delta_subtracts_counters_and_keeps_the_layout() {
        let before = EngineStats {
            stall_micros: 10,
            slow_bytes: 100,
            levels: vec![(1, 1)],
            ..EngineStats::default()
        };
        let after = EngineStats {
            stall_micros: 25,
            slow_bytes: 300,
            levels: vec![(2, 5), (1, 9)],
            ..EngineStats::default()
        };
        let d = after.delta(&before);
        assert_eq!(d.stall_micros, 15);
        assert_eq!(d.slow_bytes, 200);
        assert_eq!(d.levels, after.levels);
        assert_eq!(after.l0_files(), 2);
    }
}
