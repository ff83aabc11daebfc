//! The RocksDB baseline (feature `rocksdb`: crate `rocksdb` 0.25, RocksDB 11.8.1 compiled from
//! source with NDEBUG), configured as docs/benchmarks.md's reference: 64 MiB memtables (at most 2),
//! 64 MiB SSTables, L1 256 MiB (RocksDB's default; fixed level sizes, as db_bench's default),
//! AF 10, no compression, 2 background jobs, WAL on and not synced per write. Two placements:
//!
//! - "RocksDB-SSD" (`rocksdb-ssd`): everything in the slow-tier directory;
//! - "RocksDB-L0-fast" (`rocksdb-l0-fast`): the WAL in the fast-tier directory, and `db_paths`
//!   putting the first `--rocksdb_fast_path_bytes` (800 MiB) of SSTables there too;
//! - "RocksDB-blob" (`rocksdb-blob`): RocksDB-SSD with RocksDB's own key-value separation
//!   (integrated BlobDB: `enable_blob_files`, `--min_blob_size`, `--blob_file_size`, blob GC
//!   on), the fair baseline for matrixkv's key-value separation;
//! - "RocksDB-best" (`rocksdb-best`): the strongest setup we know for this load and hardware:
//!   BlobDB from level 0 (values leave at flush), blob GC with a garbage-forced threshold,
//!   the WAL on the fast tier, buffered flush and compaction (direct I/O measured slower; a flag), dynamic level sizes,
//!   pipelined writes and a delayed-write rate that fits the machine. Each setting and why is
//!   in docs/bench.md ("rocksdb-best").
//!
//! Statistics come from RocksDB's own tickers (stall micros, flush/compaction bytes, WAL
//! bytes) and its live-file list (levels, and which tier each table is on). The engine is
//! shared by the worker threads and the sampler: `DB` is thread-safe, and the record of
//! tables seen on the slow tier sits behind a mutex.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

use anyhow::{Context, Result};
use rocksdb::statistics::{Histogram as RHist, Ticker};
use rocksdb::{
    BlockBasedOptions, Cache, DB, DBCompressionType, DBPath, DBRawIterator, Options,
    WaitForCompactOptions, WriteBatch, WriteOptions,
};

use super::args::BenchArgs;
use super::engine::{BatchOp, Cursor, Engine, EngineStats, Placement};

/// Which RocksDB setup an engine runs (the module doc describes each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RocksSetup {
    /// Everything on the slow tier.
    Ssd,
    /// WAL and the first `--rocksdb_fast_path_bytes` of SSTables on the fast tier.
    L0Fast,
    /// Everything on the slow tier, with RocksDB's integrated BlobDB.
    Blob,
    /// The strongest setup: BlobDB, WAL on the fast tier, dynamic levels.
    Best,
}

impl RocksSetup {
    /// The engine's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            RocksSetup::Ssd => "rocksdb-ssd",
            RocksSetup::L0Fast => "rocksdb-l0-fast",
            RocksSetup::Blob => "rocksdb-blob",
            RocksSetup::Best => "rocksdb-best",
        }
    }
}

/// RocksDB in one of the reference setups.
pub struct RocksEngine {
    db: DB,
    opts: Options,
    wo: WriteOptions,
    name: &'static str,
    /// SSTables may live on the fast tier (`db_paths`).
    l0_fast: bool,
    /// The WAL lives on the fast tier.
    wal_on_fast: bool,
    fast_sst_dir: PathBuf,
    /// Tables seen in the live-file list on the slow tier: name -> size. Tables are
    /// immutable, so a table's size is final once listed.
    seen_slow: Mutex<HashMap<String, u64>>,
    description: String,
}

fn compression(name: &str) -> Result<DBCompressionType> {
    Ok(match name {
        "none" => DBCompressionType::None,
        "lz4" => DBCompressionType::Lz4,
        "zstd" => DBCompressionType::Zstd,
        o => anyhow::bail!("compression `{o}` is not available for RocksDB here"),
    })
}

impl RocksEngine {
    /// Opens (creating) RocksDB at `place` in the given setup.
    pub fn open(a: &BenchArgs, place: &Placement, setup: RocksSetup) -> Result<RocksEngine> {
        let l0_fast = setup == RocksSetup::L0Fast;
        let blob = matches!(setup, RocksSetup::Blob | RocksSetup::Best);
        let best = setup == RocksSetup::Best;
        let wal_on_fast = l0_fast || best;
        std::fs::create_dir_all(&place.slow_dir)
            .with_context(|| format!("creating {}", place.slow_dir.display()))?;
        let fast_sst_dir = place.fast_dir.join("sst");
        let mut o = Options::default();
        o.create_if_missing(true);
        o.enable_statistics();
        o.set_write_buffer_size(a.write_buffer_size);
        o.set_max_write_buffer_number(i32::try_from(a.max_write_buffer_number)?);
        o.set_target_file_size_base(a.target_file_size_base);
        let l1 = a.max_bytes_for_level_base.unwrap_or(256 << 20);
        o.set_max_bytes_for_level_base(l1);
        o.set_max_bytes_for_level_multiplier(a.max_bytes_for_level_multiplier as f64);
        // Fixed level sizes as db_bench's default, except in the best setup: RocksDB 10's
        // default (dynamic) keeps the last level ~90% of the data and so bounds space and WA.
        o.set_level_compaction_dynamic_level_bytes(best && a.rocksdb_dynamic_levels);
        o.set_level_zero_file_num_compaction_trigger(i32::try_from(
            a.level0_file_num_compaction_trigger,
        )?);
        o.set_level_zero_slowdown_writes_trigger(i32::try_from(a.level0_slowdown_writes_trigger)?);
        o.set_level_zero_stop_writes_trigger(i32::try_from(a.level0_stop_writes_trigger)?);
        if let Some(n) = a.num_levels {
            o.set_num_levels(i32::try_from(n)?);
        }
        o.set_compression_type(compression(&a.compression_type)?);
        o.set_max_background_jobs(a.max_background_jobs);
        // mergerandom's counters, as db_bench's --merge_operator=uint64add.
        o.set_merge_operator_associative("uint64add", uint64add);
        let mut t = BlockBasedOptions::default();
        if a.bloom_bits > 0 {
            t.set_bloom_filter(f64::from(a.bloom_bits), false);
        }
        t.set_block_cache(&Cache::new_lru_cache(a.cache_size));
        o.set_block_based_table_factory(&t);
        if wal_on_fast {
            let wal = place.fast_dir.join("wal");
            std::fs::create_dir_all(&wal)?;
            o.set_wal_dir(&wal);
        }
        if l0_fast {
            std::fs::create_dir_all(&fast_sst_dir)?;
            o.set_db_paths(&[
                DBPath::new(&fast_sst_dir, a.rocksdb_fast_path_bytes)?,
                DBPath::new(&place.slow_dir, u64::MAX / 4)?,
            ]);
        }
        if blob {
            // The same separation threshold and file size as matrixkv's; GC on with
            // RocksDB's default age cutoff (0.25).
            o.set_enable_blob_files(true);
            o.set_min_blob_size(a.min_blob_size as u64);
            o.set_blob_file_size(a.blob_file_size);
            o.set_enable_blob_gc(true);
        }
        if best {
            // Blob files always go to the first of `db_paths` (RocksDB places them with
            // `cf_paths.front()`), so the SSTables stay on the slow tier with them; with values
            // separated at flush (blob_file_starting_level 0, RocksDB's default) the SSTables
            // hold only keys and blob references and are small.
            o.set_blob_gc_age_cutoff(a.rocksdb_blob_gc_age_cutoff);
            o.set_blob_gc_force_threshold(a.rocksdb_blob_gc_force_threshold);
            o.set_blob_compaction_readahead_size(2 << 20);
            o.set_use_direct_io_for_flush_and_compaction(a.rocksdb_direct_io);
            o.set_compaction_readahead_size(2 << 20);
            o.set_enable_pipelined_write(true);
            // Start writing each MiB of flush and compaction output back as it is written, so
            // the sync at the end of a file does not wait for all of it (the setting RocksDB's
            // tuning guide recommends; matrixkv's compactions do the same by default).
            o.set_bytes_per_sync(a.bytes_per_sync.unwrap_or(1 << 20));
            // Not in the crate's safe API: set through RocksDB's option-string parser, which
            // copies every option set above (statistics included) into the result.
            o = o
                .get_options_from_string(format!(
                    "delayed_write_rate={};blob_file_starting_level=0",
                    a.rocksdb_delayed_write_rate
                ))
                .context("setting delayed_write_rate")?;
        }
        let name = setup.name();
        let description = format!(
            "{name}: RocksDB 11.8.1 (crate rocksdb 0.25, NDEBUG); db {}{}; write_buffer_size {} \
             max_write_buffer_number {} target_file_size_base {} max_bytes_for_level_base {} \
             multiplier {} dynamic_level_bytes {} l0 triggers {}/{}/{} compression {} \
             bloom_bits {} cache_size {} max_background_jobs {} sync {}{}",
            place.slow_dir.display(),
            if best {
                format!(
                    "; WAL {}; enable_blob_files true min_blob_size {} blob_file_size {} \
                     blob_file_starting_level 0 enable_blob_gc true blob_gc_age_cutoff {} \
                     blob_gc_force_threshold {} use_direct_io_for_flush_and_compaction {} \
                     compaction_readahead_size 2 MiB enable_pipelined_write true \
                     delayed_write_rate {} bytes_per_sync {}",
                    place.fast_dir.join("wal").display(),
                    a.min_blob_size,
                    a.blob_file_size,
                    a.rocksdb_blob_gc_age_cutoff,
                    a.rocksdb_blob_gc_force_threshold,
                    a.rocksdb_direct_io,
                    a.rocksdb_delayed_write_rate,
                    a.bytes_per_sync.unwrap_or(1 << 20)
                )
            } else if l0_fast {
                format!(
                    "; WAL {}; db_paths [{} up to {} B, {}]",
                    place.fast_dir.join("wal").display(),
                    fast_sst_dir.display(),
                    a.rocksdb_fast_path_bytes,
                    place.slow_dir.display()
                )
            } else {
                String::new()
            },
            a.write_buffer_size,
            a.max_write_buffer_number,
            a.target_file_size_base,
            l1,
            a.max_bytes_for_level_multiplier,
            best && a.rocksdb_dynamic_levels,
            a.level0_file_num_compaction_trigger,
            a.level0_slowdown_writes_trigger,
            a.level0_stop_writes_trigger,
            a.compression_type,
            a.bloom_bits,
            a.cache_size,
            a.max_background_jobs,
            a.sync,
            if blob && !best {
                format!(
                    "; enable_blob_files true min_blob_size {} blob_file_size {} \
                     enable_blob_gc true",
                    a.min_blob_size, a.blob_file_size
                )
            } else {
                String::new()
            }
        );
        // The default column family is named with the same options so that its handle
        // exists (batched MultiGet takes one); `DB::open` would not register it.
        let default_cf = rocksdb::ColumnFamilyDescriptor::new("default", o.clone());
        let db = DB::open_cf_descriptors(&o, &place.slow_dir, [default_cf])
            .with_context(|| format!("opening RocksDB at {}", place.slow_dir.display()))?;
        let mut wo = WriteOptions::default();
        wo.set_sync(a.sync);
        Ok(RocksEngine {
            db,
            opts: o,
            wo,
            name,
            l0_fast,
            wal_on_fast,
            fast_sst_dir,
            seen_slow: Mutex::new(HashMap::new()),
            description,
        })
    }
}

struct RocksCursor<'a>(DBRawIterator<'a>);

impl Cursor for RocksCursor<'_> {
    fn seek_to_first(&mut self) -> Result<()> {
        self.0.seek_to_first();
        Ok(self.0.status()?)
    }
    fn seek(&mut self, key: &[u8]) -> Result<()> {
        self.0.seek(key);
        Ok(self.0.status()?)
    }
    fn valid(&self) -> bool {
        self.0.valid()
    }
    fn key(&self) -> &[u8] {
        self.0.key().unwrap_or(&[])
    }
    fn value(&self) -> &[u8] {
        self.0.value().unwrap_or(&[])
    }
    fn next(&mut self) -> Result<()> {
        self.0.next();
        Ok(self.0.status()?)
    }
}

/// db_bench's `uint64add` merge operator: the value and the operands are 8-byte
/// little-endian u64s, summed (wrapping); anything else fails the merge.
fn uint64add(
    _key: &[u8],
    existing: Option<&[u8]>,
    operands: &rocksdb::MergeOperands,
) -> Option<Vec<u8>> {
    let read = |b: &[u8]| -> Option<u64> { Some(u64::from_le_bytes(b.try_into().ok()?)) };
    let mut sum = match existing {
        Some(v) => read(v)?,
        None => 0,
    };
    for op in operands {
        sum = sum.wrapping_add(read(op)?);
    }
    Some(sum.to_le_bytes().to_vec())
}

impl Engine for RocksEngine {
    fn name(&self) -> &str {
        self.name
    }
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.db.put_opt(key, value, &self.wo)?)
    }
    fn put_sync(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut wo = WriteOptions::default();
        wo.set_sync(true);
        Ok(self.db.put_opt(key, value, &wo)?)
    }
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.db.get(key)?)
    }
    fn multi_get(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        // RocksDB's batched MultiGet (what db_bench's multireadrandom with
        // --multiread_batched runs): one call that sorts the keys and shares block reads.
        let cf = self
            .db
            .cf_handle("default")
            .context("RocksDB has no default column family")?;
        self.db
            .batched_multi_get_cf(cf, keys.iter(), false)
            .into_iter()
            .map(|r| Ok(r?.map(|v| v.to_vec())))
            .collect()
    }
    fn delete(&self, key: &[u8]) -> Result<()> {
        Ok(self.db.delete_opt(key, &self.wo)?)
    }
    fn merge(&self, key: &[u8], operand: &[u8]) -> Result<()> {
        Ok(self.db.merge_opt(key, operand, &self.wo)?)
    }
    fn delete_range(&self, start: &[u8], end: &[u8]) -> Result<()> {
        // The default column family's DeleteRange, through a batch (rust-rocksdb has
        // `delete_range_cf_opt` for named families only).
        let mut b = WriteBatch::default();
        b.delete_range(start, end);
        Ok(self.db.write_opt(b, &self.wo)?)
    }
    fn write_batch(&self, ops: &[BatchOp<'_>]) -> Result<()> {
        let mut b = WriteBatch::default();
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
        Ok(Box::new(RocksCursor(self.db.raw_iterator())))
    }
    fn stats(&self) -> EngineStats {
        let t = |x: Ticker| self.opts.get_ticker_count(x);
        let flush_bytes = t(Ticker::FlushWriteBytes);
        // With integrated BlobDB these tickers count every byte a flush or compaction job
        // writes, blob files included (I/O stats of the job's thread).
        let compact_bytes = t(Ticker::CompactWriteBytes);
        let mut levels: Vec<(u64, u64)> = Vec::new();
        let mut notes = Vec::new();
        let mut slow_seen = 0;
        match self.db.live_files() {
            Ok(files) => {
                let mut seen = self
                    .seen_slow
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                for f in &files {
                    let lv = usize::try_from(f.level).unwrap_or(0);
                    if levels.len() <= lv {
                        levels.resize(lv + 1, (0, 0));
                    }
                    if let Some(l) = levels.get_mut(lv) {
                        l.0 += 1;
                        l.1 += f.size as u64;
                    }
                    let on_fast = self.l0_fast
                        && self
                            .fast_sst_dir
                            .join(f.name.trim_start_matches('/'))
                            .exists();
                    if !on_fast {
                        seen.insert(f.name.clone(), f.size as u64);
                    }
                }
                slow_seen = seen.values().sum::<u64>();
            }
            Err(e) => notes.push(format!("live_files failed: {e}")),
        }
        let total = flush_bytes + compact_bytes;
        let (fast, slow) = if self.l0_fast {
            notes.push(
                "per-tier bytes: tables seen on the slow tier in once-a-second live-file \
                 listings; the rest of RocksDB's flush + compaction bytes is counted on the fast \
                 tier"
                    .to_owned(),
            );
            (total.saturating_sub(slow_seen), slow_seen.min(total))
        } else {
            (0, total)
        };
        EngineStats {
            stall_micros: t(Ticker::StallMicros),
            stalls: 0,
            wal_bytes: t(Ticker::WalFileBytes),
            wal_on_fast: self.wal_on_fast,
            fast_table_bytes: fast,
            slow_bytes: slow,
            flushes: self.opts.get_histogram_data(RHist::FlushTime).count(),
            flush_bytes,
            compactions: self.opts.get_histogram_data(RHist::CompactionTime).count(),
            compaction_input_bytes: t(Ticker::CompactReadBytes),
            compaction_output_bytes: compact_bytes,
            l0_compactions: 0,
            l0_compaction_input_bytes: 0,
            levels,
            notes,
            // The fast-tier tables and the WAL of the L0-fast placement live under this.
            fast_dir: self.fast_sst_dir.parent().map(|p| p.to_path_buf()),
            slow_dir: Some(self.db.path().to_path_buf()),
        }
    }
    fn settle(&self) -> Result<()> {
        self.db.flush()?;
        let mut w = WaitForCompactOptions::default();
        w.set_flush(true);
        Ok(self.db.wait_for_compact(&w)?)
    }
    fn describe(&self) -> String {
        self.description.clone()
    }
    fn close(self: Box<Self>) -> Result<()> {
        self.db.flush_wal(true)?;
        drop(self);
        Ok(())
    }
}
