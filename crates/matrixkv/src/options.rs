//! Options of a database, of a read and of a write. Every field documents its meaning, unit and
//! default; [`Options::validate`] rejects inconsistent values with a message naming the field.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::key::SeqNo;
use crate::sst::TableOptions;
use crate::tier::{DirFastTier, FastTier, FileSystem, StdFs};
use crate::wal::WalRecovery;

/// Largest `Options::wal_retention_segments`.
pub const MAX_WAL_RETENTION_SEGMENTS: usize = 1024;

/// The storage a database runs on: a file system for each tier directory and the mapped
/// fast-tier regions. [`Tiers::os`] is the real one; tests substitute simulated tiers.
#[derive(Clone)]
pub struct Tiers {
    /// File system holding the slow-tier directory (manifest, CURRENT, LOCK, L1+ SSTables).
    pub slow_fs: Arc<dyn FileSystem>,
    /// File system holding file-based artifacts of the fast-tier directory (IDENTITY, L0 tables).
    pub fast_fs: Arc<dyn FileSystem>,
    /// Mapped regions of the fast-tier directory (WAL segments).
    pub fast: Arc<dyn FastTier>,
}

impl Tiers {
    /// The operating system's files, with fast-tier regions mapped from `fast_dir`.
    pub fn os(fast_dir: &Path) -> Tiers {
        Tiers {
            slow_fs: Arc::new(StdFs),
            fast_fs: Arc::new(StdFs),
            fast: Arc::new(DirFastTier::new(fast_dir)),
        }
    }
}

impl fmt::Debug for Tiers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tiers")
            .field("slow_fs", &self.slow_fs)
            .field("fast", &self.fast)
            .finish()
    }
}

/// How L0 is stored on the fast tier. Fixed when the database is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum L0Layout {
    /// The matrix container: RowTables in a page pool, receiver/compactor roles, column
    /// compaction and cross-row hints (MatrixKV).
    #[default]
    Matrix,
    /// SSTables on the fast tier with RocksDB-style all-to-all L0→L1 compaction (the paper's
    /// "RocksDB-L0-NVM" baseline).
    Tables,
}

impl std::fmt::Display for L0Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            L0Layout::Matrix => "matrix",
            L0Layout::Tables => "tables",
        })
    }
}

impl std::str::FromStr for L0Layout {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "matrix" => Ok(L0Layout::Matrix),
            "tables" => Ok(L0Layout::Tables),
            other => Err(format!(
                "unknown L0 layout `{other}` (expected matrix or tables)"
            )),
        }
    }
}

/// Which published design the engine runs (issue 11: the designs MatrixKV is measured
/// against, as modes of one engine). Fixed when the database is created and stored in it.
///
/// Per design: the memtables (a module family each, `memtable::design`) and, for SLM-DB and
/// LightKV, the levels as well: one level of tables mapped by a global index on the fast tier,
/// with its own flush, compaction and point reads (`engine::single_level`), cut into
/// key-range partitions for LightKV (`engine::partitioned`). MatrixKV, X-Engine and NoveLSM
/// share the leveled tree (L0 as the matrix container or as tables, by
/// [`Options::l0_layout`]). Shared by all: group commit, the table and blob-file formats, the
/// manifest, and iterators merging memtables and tables.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Design {
    /// MatrixKV (USENIX ATC 2020): a DRAM memtable holding a copy of each value, the WAL on the
    /// fast tier. The default.
    #[default]
    MatrixKv,
    /// X-Engine on persistent memory (Alibaba): a semi-persistent memtable (each record's
    /// bytes written once, to the WAL on the fast tier; the DRAM index points at them and is
    /// rebuilt at recovery), ROR-style batching of persistent writes, and parallel recovery.
    XEngine(XEngineOptions),
    /// NoveLSM (USENIX ATC 2018): a persistent, mutable memtable on the fast tier (a skiplist
    /// whose nodes live there, committed in place with no WAL, reopened without replay),
    /// alternating with the DRAM memtable: when a DRAM memtable fills, writes go to a
    /// persistent one while it is flushed, and back (docs/decisions/0023-novelsm-mode.md).
    NoveLsm(NoveLsmOptions),
    /// SLM-DB (FAST 2019): every memtable is a persistent skiplist on the fast tier (no WAL),
    /// flushed into a single level of SSTables on the slow tier; a persistent B+-tree on the
    /// fast tier maps every live key to the block holding its newest version, so a point read
    /// costs at most one slow-tier read; selective compaction merges the files its live-key
    /// ratio and leaf-scan triggers pick (docs/decisions/0025-slmdb-mode.md). Needs
    /// [`L0Layout::Tables`].
    SlmDb(SlmDbOptions),
    /// LightKV (MSST 2020): persistent write buffers on the fast tier (no WAL; each an
    /// append-only log indexed by a Radix Hash Tree of its own), flushed into
    /// key-range partitions of SSTables on the slow tier; a Radix Hash Tree on the fast tier
    /// maps every live key to the block holding its newest version; partition-based
    /// compaction merges `compaction_size` tables of the same merge count of one partition
    /// into one table (docs/decisions/0027-lightkv-mode.md). Needs [`L0Layout::Tables`].
    LightKv(LightKvOptions),
}

/// The knobs of [`Design::LightKv`] (not fixed: they may change at every open, except
/// `index_bytes`, which sizes the index region when it is created).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LightKvOptions {
    /// Bytes of log of each persistent write buffer; its region has as many again (at least
    /// 4 MiB) for the buffer's RH-tree. Default 64 MiB.
    pub write_buffer_bytes: u64,
    /// Bytes of the fast-tier region of the RH-tree index, fixed when it is created (its log
    /// takes about 64 bytes per index change of a 16-byte key; a full log is compacted into a
    /// new region). Default 1 GiB (tmpfs and mapped files allocate pages on first touch only).
    pub index_bytes: u64,
    /// The paper's compaction size (CS): a partition merges its tables once it holds this many
    /// of the same merge count, into one table of the next count. Larger: less write
    /// amplification, more tables per range query. Default 4.
    pub compaction_size: u32,
    /// The most partitions the key space is cut into. Default 16.
    pub max_partitions: u32,
    /// A partition holding more table bytes than this splits in two (while fewer than
    /// `max_partitions` exist). Default 1 GiB.
    pub partition_bytes: u64,
}

impl Default for LightKvOptions {
    fn default() -> LightKvOptions {
        LightKvOptions {
            write_buffer_bytes: 64 << 20,
            index_bytes: 1 << 30,
            compaction_size: 4,
            max_partitions: 16,
            partition_bytes: 1 << 30,
        }
    }
}

/// The knobs of [`Design::SlmDb`] (not fixed: they may change at every open, except
/// `index_bytes`, which sizes the index region when it is created).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SlmDbOptions {
    /// Bytes of the fast-tier region of each persistent memtable (the paper's 64 MB
    /// memtable). Default 64 MiB.
    pub persistent_memtable_bytes: u64,
    /// Bytes of the fast-tier region of the B+-tree index, fixed when it is created (a
    /// million 16-byte keys take about 64 MiB). Default 1 GiB (tmpfs and mapped files
    /// allocate pages on first touch only).
    pub index_bytes: u64,
    /// A table whose share of live keys (keys the index maps to it ÷ its entries) falls below
    /// this becomes a compaction candidate (the paper's live-key threshold). Default 0.7.
    pub live_key_ratio: f64,
    /// Each compaction check scans this many tables' worth of index keys, round robin
    /// (the paper scans the average key count of two tables). Default 2. 0 disables the
    /// leaf-scan trigger.
    pub leaf_scan_tables: u32,
    /// A leaf scan that finds keys in more than this many distinct tables adds them to the
    /// candidates (the paper's leaf threshold). Default 10.
    pub leaf_scan_threshold: u32,
    /// Compaction runs once this many tables are candidates (tables without live keys are
    /// dropped at once). Default 8.
    pub candidate_trigger: u32,
    /// At most this many tables are merged by one compaction. Default 8.
    pub max_merge_tables: u32,
    /// The range-query trigger: a forward scan is cut into sub-ranges of this many entries
    /// read from tables (the paper's 30 keys); 0 disables the trigger.
    pub scan_window: u32,
    /// ...and when its most scattered sub-range touched more than this many distinct tables
    /// (the paper's sequentiality threshold, 8), they become candidates.
    pub scan_threshold: u32,
}

impl Default for SlmDbOptions {
    fn default() -> SlmDbOptions {
        SlmDbOptions {
            persistent_memtable_bytes: 64 << 20,
            index_bytes: 1 << 30,
            live_key_ratio: 0.7,
            leaf_scan_tables: 2,
            leaf_scan_threshold: 10,
            candidate_trigger: 8,
            max_merge_tables: 8,
            scan_window: 30,
            scan_threshold: 8,
        }
    }
}

/// The knobs of [`Design::NoveLsm`] (not fixed: they may change at every open).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NoveLsmOptions {
    /// Bytes of the fast-tier region of each persistent memtable. NoveLSM's memtables in
    /// NVM are much larger than DRAM ones. In the matrix layout at most half of
    /// `container_bytes` is used (a flushed memtable becomes one row of the container).
    /// Default 256 MiB.
    pub persistent_memtable_bytes: u64,
    /// Point lookups that miss the memtables search the levels in parallel, one thread per
    /// level (NoveLSM's read parallelism). Default true.
    pub parallel_reads: bool,
}

impl Default for NoveLsmOptions {
    fn default() -> NoveLsmOptions {
        NoveLsmOptions {
            persistent_memtable_bytes: 256 << 20,
            parallel_reads: true,
        }
    }
}

/// The knobs of [`Design::XEngine`] (not fixed: they may change at every open).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct XEngineOptions {
    /// ROR batch size: a commit leader waits until this many writers are queued (or
    /// `ror_wait` has passed) before it appends and persists their records together. 1 (the
    /// default) never waits: the group is whoever queued meanwhile, as in the default design.
    pub ror_batch: usize,
    /// The longest a commit leader waits for its ROR batch to fill. Default 100 µs.
    pub ror_wait: std::time::Duration,
    /// Threads rebuilding the DRAM index from the WAL at open. 0 (the default): one per core;
    /// 1: the serial path.
    pub recovery_threads: usize,
}

impl Default for XEngineOptions {
    fn default() -> XEngineOptions {
        XEngineOptions {
            ror_batch: 1,
            ror_wait: std::time::Duration::from_micros(100),
            recovery_threads: 0,
        }
    }
}

impl Design {
    /// The name stored in the database (fixed option `design`).
    pub fn name(&self) -> &'static str {
        match self {
            Design::MatrixKv => "matrixkv",
            Design::XEngine(_) => "xengine",
            Design::NoveLsm(_) => "novelsm",
            Design::SlmDb(_) => "slmdb",
            Design::LightKv(_) => "lightkv",
        }
    }

    /// The longest user key the design's persistent index takes (the keyspace prefix
    /// included): SLM-DB's B+-tree and LightKV's RH-trees hold keys of at most 1,024 bytes.
    /// `None`: no limit besides [`Options::max_key_bytes`].
    pub fn max_indexed_key_len(&self) -> Option<usize> {
        match self {
            Design::SlmDb(_) => Some(crate::index::pbtree::MAX_KEY_LEN),
            Design::LightKv(_) => Some(crate::index::rhtree::MAX_KEY_LEN),
            Design::MatrixKv | Design::XEngine(_) | Design::NoveLsm(_) => None,
        }
    }
}

impl std::fmt::Display for Design {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Design {
    type Err = String;
    /// `matrixkv`, `xengine`, `novelsm`, `slmdb` or `lightkv` (with default knobs).
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "matrixkv" => Ok(Design::MatrixKv),
            "xengine" => Ok(Design::XEngine(XEngineOptions::default())),
            "novelsm" => Ok(Design::NoveLsm(NoveLsmOptions::default())),
            "slmdb" => Ok(Design::SlmDb(SlmDbOptions::default())),
            "lightkv" => Ok(Design::LightKv(LightKvOptions::default())),
            other => Err(format!(
                "unknown design `{other}` (expected matrixkv, xengine, novelsm, slmdb or lightkv)"
            )),
        }
    }
}

/// Options of a database, given at open.
///
/// ```no_run
/// use matrixkv::{Db, Options};
/// let mut opts = Options::new("/var/lib/myapp/db");
/// opts.fast_dir = "/mnt/pmem0/myapp".into(); // the fast tier (pmem, CXL memory, fast NVMe)
/// opts.write_buffer_bytes = 32 << 20;
/// let db = Db::open(opts)?;
/// # Ok::<(), matrixkv::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Options {
    /// Directory of the fast tier (WAL segments, L0). Default `<path>/fast`.
    ///
    /// tmpfs (`/dev/shm`) is accepted for benchmarks and emulation, but tmpfs survives a crash
    /// of the process, **not a reboot**: a database whose fast tier is on tmpfs loses its WAL and
    /// L0 at reboot and then refuses to open. Never put a database you care about there.
    pub fast_dir: PathBuf,
    /// Directory of the slow tier (SSTables of L1.., manifest). Default `<path>/slow`.
    pub slow_dir: PathBuf,
    /// Create the database if it does not exist. Default true.
    pub create_if_missing: bool,
    /// Fail if the database already exists. Default false.
    pub error_if_exists: bool,
    /// Which design runs (the memtable and its recovery). Fixed when the database is
    /// created. Default [`Design::MatrixKv`].
    pub design: Design,
    /// How L0 is stored. Fixed when the database is created. Default [`L0Layout::Matrix`].
    pub l0_layout: L0Layout,
    /// Size of the matrix container (the fast-tier budget for L0), in bytes; a multiple of
    /// `page_bytes`. Fixed when the database is created. Default 512 MiB.
    pub container_bytes: u64,
    /// Page size of the matrix container, in bytes (512 B to 1 MiB, a power of two). Fixed when
    /// the database is created. Default 4 KiB.
    pub page_bytes: usize,
    /// Share of the container the receiver must hold before it becomes the compactor (when the
    /// compactor is empty). Default 0.6.
    pub receiver_switch_ratio: f64,
    /// Compact L0→L1 by columns (true) or all-to-all, one column spanning the whole key space
    /// (false; the paper's comparison point). Default true.
    pub column_compaction: bool,
    /// A column grows by L1 key ranges until it gathers this many bytes of L0 data. Default
    /// ½·AF·S_sst (`level_multiplier * target_file_bytes / 2`), or 1/20 of `container_bytes`
    /// if that is smaller (at least 64 KiB): a column stays a small slice of the compactor, as
    /// in the paper's 8 GB container (docs/decisions/0005-key-value-separation.md).
    pub column_lower_bytes: Option<u64>,
    /// ...and never grows past this many bytes of L0 data (at least one L1 key range is
    /// always taken). Default twice the lower bound (AF·S_sst with the paper's bound).
    pub column_upper_bytes: Option<u64>,
    /// Worker threads gathering a column from the compactor's rows (k; 1 = the compaction
    /// thread reads the rows itself). Default: half the cores, 1 to 8 (the writer, flush and
    /// compaction threads need the rest; docs/decisions/0005-key-value-separation.md).
    pub column_threads: usize,
    /// Use cross-row hints (forward pointers) to narrow searches in older rows. Default true.
    pub hints: bool,
    /// Container occupancy (share of pages in use) from which writes are delayed, growing with
    /// the square of the overshoot, up to 1 ms per write at a full container. Default 0.7.
    pub container_slowdown_ratio: f64,
    /// Key-value separation: values of at least this many bytes leave the tree for blob files
    /// on the slow tier when their memtable is flushed (`separate_at_flush`) or else when
    /// compaction moves them out of L0, so later compactions move only keys and pointers
    /// (docs/decisions/0005-key-value-separation.md). `None` keeps every value in the tables.
    /// Default `Some(1024)`.
    pub min_blob_bytes: Option<usize>,
    /// Separate values already when a memtable is flushed into the matrix container: the
    /// RowTable keeps keys and blob pointers, and each value is written once to the fast tier
    /// (the WAL) and once to the slow tier (docs/decisions/0022-values-separated-at-flush.md).
    /// With `false` the RowTable holds the values and column compaction separates them (the
    /// MatrixKV paper's container, which holds values). Matrix layout only. Default true.
    pub separate_at_flush: bool,
    /// Separate values already when they are written: a non-sync write group's values of at least
    /// `min_blob_bytes` (and `separate_at_write_min_bytes`) are appended to the active memtable's
    /// blob file on the slow tier (handed to the kernel before the write returns), and the WAL and
    /// the memtable hold pointers, so each such value is written once in all (decision 0028). A
    /// sync group keeps its values in the WAL and first syncs the blob files earlier writes went
    /// to, and so do `Db::sync_wal` and `Db::close`; each then logs a marker, so that recovery
    /// reports a value missing before it as corruption (later ones are a power loss's torn tail,
    /// which ends the recovered history there). The blob file is written through a mapping whose
    /// pages a helper thread faults in ahead of the writer, so an append costs a memory copy; the
    /// flush installs the file with the row instead of copying values. Applies in the MatrixKV
    /// design with the matrix `l0_layout`, `separate_at_flush` and `min_blob_bytes` (see
    /// [`Options::separates_at_write`]); elsewhere every value goes to the WAL. Default true
    /// (decision 0028).
    pub separate_at_write: bool,
    /// With `separate_at_write`, only values of at least this many bytes (and of at least
    /// their keyspace's `min_blob_bytes`) are separated as they are written; smaller values
    /// that reach `min_blob_bytes` are logged in the WAL and separated by the flush, as with
    /// `separate_at_write` off. Small values are cheaper to log on the fast tier's recycled
    /// WAL pages than to write once through the slow tier's freshly prepared mapping; at 2 KiB
    /// the two paths are even on YCSB and writing once wins `fillrandom`, and from 4 KiB
    /// writing once is the large win (decision 0028, item 4). `None` (or `Some(0)`) separates
    /// every value of at least `min_blob_bytes` as it is written. Default `Some(2048)`.
    pub separate_at_write_min_bytes: Option<usize>,
    /// Size at which a flush or a compaction closes its blob file and starts another, in bytes
    /// (at least 4 KiB). Default 256 MiB.
    pub blob_file_bytes: u64,
    /// Garbage share of a blob file from which compactions copy its live values to a new
    /// file (relocation), so the file drains and is deleted; in (0, 1]. A file is deleted
    /// anyway once all its records are garbage. Default 0.5.
    pub blob_gc_ratio: f64,
    /// Space budget of the blob files: when their record bytes exceed this many times their
    /// live record bytes, and no other compaction is due, a blob GC job rewrites the tables
    /// that reference the most garbage-heavy files so that those files drain
    /// (docs/decisions/0009-blob-gc.md). At least 1; `f64::INFINITY` disables the job (garbage
    /// is then reclaimed only by compactions passing by, at `blob_gc_ratio`). Default 1.2.
    pub blob_space_budget: f64,
    /// Nice value of the flush and compaction threads (0 = the process's priority, up to 19):
    /// on a machine with few cores, a positive value lets writers and readers preempt
    /// background work. Default 0.
    pub background_nice: i32,
    /// Write the tables and blob files of flushes and compactions to the slow tier with direct
    /// I/O (`O_DIRECT`), bypassing the page cache: saves the kernel's copy of every output byte
    /// (see docs/decisions/0008-direct-io-writes.md). Where the file system refuses direct I/O
    /// (tmpfs), the files are written through the page cache, with one log line. Default false.
    pub direct_writes: bool,
    /// Read blob files through read-only mappings (`mmap`) instead of one `pread` per value:
    /// a point read or a scan that meets separated values copies them out of the page cache
    /// without a system call each (docs/decisions/0029-mapped-blob-reads.md), the value file
    /// of the active memtable included (`separate_at_write`). An I/O error of the slow tier's
    /// device while reading one then stops the process (`SIGBUS`) instead of returning an
    /// error (no acknowledged write is lost: reads only). Where a file cannot be mapped, it
    /// is read with `pread`, with one log line. Default true.
    pub mmap_blob_reads: bool,
    /// Without `direct_writes`: bytes of a compaction's table or of a blob file after which the
    /// kernel is asked to start writing them back (`sync_file_range`, RocksDB's
    /// `bytes_per_sync`), so that the `fdatasync` ending each output file waits for the last
    /// piece rather than for the whole file (B1's compaction thread spent about a quarter of
    /// its time in that wait; docs/decisions/0021-early-writeback.md). A hint: durability is
    /// unchanged. 0 turns it off. Default 1 MiB.
    pub bytes_per_sync: u64,
    /// Size at which the active memtable becomes immutable, in bytes. Default 64 MiB.
    pub write_buffer_bytes: usize,
    /// Maximum number of memtables (active + immutable); writers stall when all are full.
    /// Default 2, at least 2.
    pub max_write_buffers: usize,
    /// Bytes of a bloom filter over each DRAM memtable's user keys, as a fraction of
    /// `write_buffer_bytes` (RocksDB's `memtable_prefix_bloom_size_ratio` with
    /// `memtable_whole_key_filtering`): a point lookup whose key a memtable's filter rules out
    /// skips that memtable's skiplist search (docs/decisions/0030-memtable-filter.md). The
    /// filter lives in DRAM beside its memtable and is rebuilt with it; persistent memtables
    /// (the NoveLSM, SLM-DB and LightKV designs) have none. 0 turns it off; at most 0.25.
    /// Default 1/64 (1 MiB for a 64 MiB memtable).
    pub memtable_filter_ratio: f64,
    /// Number of obsolete WAL segments whose regions are kept (as `NNNNNN.walfree`) and
    /// recycled by later segments instead of being deleted, so a memtable switch neither
    /// allocates and zero-fills a region nor page-faults it in (see
    /// docs/decisions/0010-wal-recycling.md). The flush thread prepares this many free regions
    /// right after an open, so even the first switches find one. Each costs one segment of
    /// fast-tier space (`write_buffer_bytes` * 1.25 + 1 MiB) from the open on. 0 deletes
    /// obsolete segments and prepares none. Default 2, at most 16.
    pub wal_recycle_segments: usize,
    /// Number of obsolete WAL segments (their memtables flushed) holding records that are kept
    /// readable, neither recycled nor deleted, so that [`crate::Db::updates_since`] can reach
    /// back past flushes: the newest ones are kept, the oldest beyond this number (and the
    /// segments without records) go to recycling
    /// (`wal_recycle_segments`) or are deleted as usual. They are never replayed, and they are
    /// kept across a reopen or a crash (the newest this many found at open). Each costs one
    /// segment of fast-tier space (`write_buffer_bytes` * 1.25 + 1 MiB, or more for a larger
    /// batch). Segments an open `UpdatesIter` still has to read are kept in addition until it
    /// is dropped. 0 keeps none (only the segments of unflushed memtables are readable).
    /// Default 0, at most 1024.
    pub wal_retention_segments: usize,
    /// Number of L0 tables that triggers an L0→L1 compaction. Default 4.
    ///
    /// The three `l0_*` triggers count L0 *tables*: they apply to [`L0Layout::Tables`] only. In
    /// the matrix layout L0 holds no tables; the container is paced by `receiver_switch_ratio`
    /// and `container_slowdown_ratio` instead, and these values are validated but unused.
    pub l0_compaction_trigger: usize,
    /// Number of L0 tables from which writes are delayed, gradually more as L0 grows towards
    /// `l0_stop_writes_trigger`. Default 20. [`L0Layout::Tables`] only.
    pub l0_slowdown_writes_trigger: usize,
    /// Number of L0 tables at which writes wait for compaction. Default 36.
    /// [`L0Layout::Tables`] only.
    pub l0_stop_writes_trigger: usize,
    /// Target size of L1 in bytes. Default 512 MiB, the container size: the flattened tree of
    /// MatrixKV (set it to the container size when changing `container_bytes`).
    pub l1_target_bytes: u64,
    /// Size ratio between adjacent levels (AF). Default 10.
    pub level_multiplier: u64,
    /// Number of levels (L0..L(n-1)), 2 to 7. Fixed when the database is created. Default 7.
    pub num_levels: usize,
    /// Target size of an SSTable written by compaction, in bytes. Default 64 MiB.
    pub target_file_bytes: u64,
    /// SSTable layout: block size, restart interval, bloom bits, compression.
    pub table: TableOptions,
    /// Capacity of the block cache in bytes (0 disables it). Default 64 MiB.
    pub block_cache_bytes: usize,
    /// Maximum number of SSTables kept open. Default 1000.
    pub max_open_tables: usize,
    /// Largest accepted key, in bytes. Default 64 KiB.
    pub max_key_bytes: usize,
    /// Largest accepted value, in bytes. Default 64 MiB.
    pub max_value_bytes: usize,
    /// Largest accepted write batch (encoded), in bytes. Default 256 MiB.
    pub max_batch_bytes: usize,
    /// What recovery does with a damaged WAL tail. Default [`WalRecovery::TolerateTornTail`].
    pub wal_recovery: WalRecovery,
    /// Run background compactions. Default true; false is for tests and experiments. In the
    /// matrix L0 layout nothing then drains the container: once a flush finds it full it
    /// fails with [`crate::Error::NoSpace`] on the fast tier (retried like a full disk), and
    /// writes that need a flush get that error after `no_space_timeout`.
    pub compaction_enabled: bool,
    /// How long a write may wait for background work (flush, compaction) that keeps failing
    /// because a tier is full before it returns [`Error::NoSpace`]. The failing work is
    /// retried with a growing pause; writes resume by themselves once space is freed.
    /// Default 5 s; at least 1 ms.
    pub no_space_timeout: std::time::Duration,
    /// The storage to run on; `None` means the operating system's files.
    pub tiers: Option<Tiers>,
    /// Combines merge operands ([`crate::Db::merge`]) with older values; `None` (the default)
    /// refuses merges. Not fixed at creation: reopen a database that holds operands with an
    /// operator that understands them (reads of such keys fail otherwise).
    pub merge_operator: Option<std::sync::Arc<dyn crate::MergeOperator>>,
    /// Drops or rewrites values during compaction (see [`crate::CompactionFilter`]); `None`
    /// (the default) keeps everything. Not fixed at creation.
    pub compaction_filter: Option<std::sync::Arc<dyn crate::CompactionFilter>>,
    /// Time to live of every value (at least one second): values older than this are
    /// invisible to reads at once and removed by compaction. Whether a database has a TTL is
    /// *fixed* at creation (its values carry their write time, 8 bytes each); the duration may
    /// change between opens. A database with a TTL refuses merges. `None` by default.
    pub ttl: Option<std::time::Duration>,
    /// The clock of every TTL check (this `ttl` and the keyspaces'): write times stamped on
    /// values, expiry at reads and at compaction. Default [`crate::SystemClock`]; a test or
    /// a stress harness substitutes one it advances without sleeping. Not stored: give the
    /// same kind of clock at every open, or values may expire (or reappear) early.
    pub clock: Arc<dyn crate::Clock>,
    /// The options of the keyspaces the database holds (see [`crate::Keyspace`]), by name,
    /// applied when it is opened (a keyspace not named here gets
    /// `KeyspaceOptions::default()`; one created with a TTL must be given one). The default
    /// keyspace takes the fields above. Empty by default.
    pub keyspace_options: std::collections::BTreeMap<String, crate::KeyspaceOptions>,
    /// Test hook: create the database as a build before keyspaces did (keys without a
    /// keyspace id, no `key_encoding` fixed option), to test that such databases still open.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub create_without_keyspaces: bool,
}

impl Options {
    /// The default keyspace's options: the database's merge operator, compaction filter, TTL
    /// and separation threshold.
    pub(crate) fn default_keyspace_options(&self) -> crate::keyspace::KeyspaceOptions {
        crate::keyspace::KeyspaceOptions {
            merge_operator: self.merge_operator.clone(),
            compaction_filter: self.compaction_filter.clone(),
            ttl: self.ttl,
            min_blob_bytes: self.min_blob_bytes,
            compression: None,
        }
    }

    /// Default options for a database under `path` (`<path>/fast` and `<path>/slow`).
    pub fn new(path: impl AsRef<Path>) -> Options {
        let path = path.as_ref();
        Options {
            fast_dir: path.join("fast"),
            slow_dir: path.join("slow"),
            create_if_missing: true,
            design: Design::MatrixKv,
            l0_layout: L0Layout::Matrix,
            container_bytes: 512 << 20,
            page_bytes: 4096,
            receiver_switch_ratio: 0.6,
            column_compaction: true,
            column_lower_bytes: None,
            column_upper_bytes: None,
            column_threads: std::thread::available_parallelism()
                .map_or(1, |n| (n.get() / 2).clamp(1, 8)),
            hints: true,
            container_slowdown_ratio: 0.7,
            min_blob_bytes: Some(1024),
            separate_at_flush: true,
            separate_at_write: true,
            separate_at_write_min_bytes: Some(2048),
            blob_file_bytes: 256 << 20,
            blob_gc_ratio: 0.5,
            blob_space_budget: 1.2,
            background_nice: 0,
            direct_writes: false,
            mmap_blob_reads: true,
            bytes_per_sync: 1 << 20,
            error_if_exists: false,
            write_buffer_bytes: 64 << 20,
            max_write_buffers: 2,
            memtable_filter_ratio: 1.0 / 64.0,
            wal_recycle_segments: 2,
            wal_retention_segments: 0,
            l0_compaction_trigger: 4,
            l0_slowdown_writes_trigger: 20,
            l0_stop_writes_trigger: 36,
            l1_target_bytes: 512 << 20,
            level_multiplier: 10,
            num_levels: 7,
            target_file_bytes: 64 << 20,
            table: TableOptions::default(),
            block_cache_bytes: 64 << 20,
            max_open_tables: 1000,
            max_key_bytes: 64 << 10,
            max_value_bytes: 64 << 20,
            max_batch_bytes: 256 << 20,
            wal_recovery: WalRecovery::TolerateTornTail,
            compaction_enabled: true,
            no_space_timeout: std::time::Duration::from_secs(5),
            tiers: None,
            merge_operator: None,
            compaction_filter: None,
            ttl: None,
            clock: Arc::new(crate::SystemClock),
            keyspace_options: std::collections::BTreeMap::new(),
            #[cfg(feature = "testing")]
            create_without_keyspaces: false,
        }
    }

    /// True when large values are separated as they are written: `separate_at_write` in the
    /// MatrixKV design with what it builds on (the matrix `l0_layout`, `separate_at_flush`,
    /// `min_blob_bytes`). The other designs keep their values in the WAL, as their papers do.
    pub fn separates_at_write(&self) -> bool {
        self.separate_at_write
            && matches!(self.design, Design::MatrixKv)
            && self.l0_layout == L0Layout::Matrix
            && self.separate_at_flush
            && self.min_blob_bytes.is_some()
    }

    /// Bytes of each DRAM memtable's bloom filter (`memtable_filter_ratio` of the write
    /// buffer; below 64, none).
    pub(crate) fn memtable_filter_bytes(&self) -> usize {
        (self.write_buffer_bytes as f64 * self.memtable_filter_ratio) as usize
    }

    /// True when L0 tables live on the fast tier (every design but SLM-DB and LightKV, whose
    /// single level of tables is on the slow tier).
    pub(crate) fn l0_on_fast(&self) -> bool {
        !matches!(self.design, Design::SlmDb(_) | Design::LightKv(_))
    }

    /// Checks every option; the error names the offending field.
    pub fn validate(&self) -> Result<()> {
        fn check(ok: bool, msg: &str) -> Result<()> {
            if ok { Ok(()) } else { Err(Error::invalid(msg)) }
        }
        check(
            !self.fast_dir.as_os_str().is_empty(),
            "fast_dir must not be empty",
        )?;
        check(
            !self.slow_dir.as_os_str().is_empty(),
            "slow_dir must not be empty",
        )?;
        if let Design::XEngine(x) = &self.design {
            check(
                (1..=1024).contains(&x.ror_batch),
                "XEngineOptions::ror_batch must be 1 to 1024",
            )?;
            check(
                x.ror_wait <= std::time::Duration::from_millis(100),
                "XEngineOptions::ror_wait must be at most 100 ms",
            )?;
        }
        if let Design::NoveLsm(n) = &self.design {
            check(
                n.persistent_memtable_bytes >= 1 << 16
                    && n.persistent_memtable_bytes <= usize::MAX as u64,
                "NoveLsmOptions::persistent_memtable_bytes must be at least 64 KiB",
            )?;
        }
        if let Design::SlmDb(d) = &self.design {
            check(
                self.l0_layout == L0Layout::Tables,
                "the slmdb design keeps one level of SSTables on the slow tier and no matrix \
                 container: set l0_layout to tables",
            )?;
            check(
                d.persistent_memtable_bytes >= 1 << 16
                    && d.persistent_memtable_bytes <= usize::MAX as u64,
                "SlmDbOptions::persistent_memtable_bytes must be at least 64 KiB",
            )?;
            check(
                d.index_bytes >= 1 << 16 && d.index_bytes <= usize::MAX as u64,
                "SlmDbOptions::index_bytes must be at least 64 KiB",
            )?;
            check(
                d.live_key_ratio > 0.0 && d.live_key_ratio <= 1.0,
                "SlmDbOptions::live_key_ratio must be in (0, 1]",
            )?;
            check(
                d.candidate_trigger >= 1 && d.max_merge_tables >= 1,
                "SlmDbOptions::candidate_trigger and max_merge_tables must be at least 1",
            )?;
        }
        if let Design::LightKv(d) = &self.design {
            check(
                self.l0_layout == L0Layout::Tables,
                "the lightkv design keeps partitions of SSTables on the slow tier and no matrix \
                 container: set l0_layout to tables",
            )?;
            check(
                d.write_buffer_bytes >= 1 << 16 && d.write_buffer_bytes <= usize::MAX as u64,
                "LightKvOptions::write_buffer_bytes must be at least 64 KiB",
            )?;
            check(
                d.index_bytes >= 1 << 16 && d.index_bytes <= usize::MAX as u64,
                "LightKvOptions::index_bytes must be at least 64 KiB",
            )?;
            check(
                (2..=64).contains(&d.compaction_size),
                "LightKvOptions::compaction_size must be 2 to 64",
            )?;
            check(
                (1..=4096).contains(&d.max_partitions),
                "LightKvOptions::max_partitions must be 1 to 4096",
            )?;
            check(
                d.partition_bytes >= 64 << 10,
                "LightKvOptions::partition_bytes must be at least 64 KiB",
            )?;
        }
        check(
            self.fast_dir != self.slow_dir,
            "fast_dir and slow_dir must be different directories",
        )?;
        check(
            self.write_buffer_bytes >= 64 << 10,
            "write_buffer_bytes must be at least 64 KiB",
        )?;
        check(
            self.write_buffer_bytes <= 4 << 30,
            "write_buffer_bytes must be at most 4 GiB",
        )?;
        check(
            (2..=16).contains(&self.max_write_buffers),
            "max_write_buffers must be between 2 and 16",
        )?;
        check(
            self.wal_recycle_segments <= 16,
            "wal_recycle_segments must be at most 16",
        )?;
        check(
            self.wal_retention_segments <= MAX_WAL_RETENTION_SEGMENTS,
            "wal_retention_segments must be at most 1024",
        )?;
        check(
            self.l0_compaction_trigger >= 1,
            "l0_compaction_trigger must be at least 1",
        )?;
        check(
            self.l0_slowdown_writes_trigger >= self.l0_compaction_trigger,
            "l0_slowdown_writes_trigger must be >= l0_compaction_trigger",
        )?;
        check(
            self.l0_stop_writes_trigger > self.l0_slowdown_writes_trigger,
            "l0_stop_writes_trigger must be > l0_slowdown_writes_trigger",
        )?;
        check(
            self.l1_target_bytes >= 1 << 20,
            "l1_target_bytes must be at least 1 MiB",
        )?;
        check(
            (2..=100).contains(&self.level_multiplier),
            "level_multiplier must be between 2 and 100",
        )?;
        check(
            (2..=7).contains(&self.num_levels),
            "num_levels must be between 2 and 7",
        )?;
        check(
            self.target_file_bytes >= 64 << 10,
            "target_file_bytes must be at least 64 KiB",
        )?;
        check(
            (0..=19).contains(&self.background_nice),
            "background_nice must be between 0 and 19",
        )?;
        check(
            (0.0..=0.25).contains(&self.memtable_filter_ratio),
            "memtable_filter_ratio must be between 0 and 0.25",
        )?;
        check(
            self.no_space_timeout >= std::time::Duration::from_millis(1),
            "no_space_timeout must be at least 1 ms",
        )?;
        check(
            self.ttl
                .is_none_or(|t| t >= std::time::Duration::from_secs(1)),
            "ttl must be at least 1 s",
        )?;
        for (name, ks) in &self.keyspace_options {
            if ks
                .ttl
                .is_some_and(|t| t < std::time::Duration::from_secs(1))
            {
                return Err(Error::invalid(format!(
                    "keyspace_options[{name:?}].ttl must be at least 1 s"
                )));
            }
            if let Some(c) = ks.compression
                && !c.is_supported()
            {
                return Err(Error::invalid(format!(
                    "keyspace_options[{name:?}].compression `{c}` is not available in this \
                     build (enable the `{c}` feature)"
                )));
            }
            if name == crate::DEFAULT_KEYSPACE {
                return Err(Error::invalid(
                    "keyspace_options cannot name the default keyspace: its options are the \
                     database's (merge_operator, compaction_filter, ttl, min_blob_bytes)",
                ));
            }
        }
        check(
            self.blob_file_bytes >= 4 << 10,
            "blob_file_bytes must be at least 4 KiB",
        )?;
        check(
            self.blob_gc_ratio > 0.0 && self.blob_gc_ratio <= 1.0,
            "blob_gc_ratio must be in (0, 1]",
        )?;
        check(
            self.blob_space_budget >= 1.0,
            "blob_space_budget must be at least 1 (or infinity)",
        )?;
        check(
            self.max_open_tables >= 16,
            "max_open_tables must be at least 16",
        )?;
        check(
            (1..=(1 << 20)).contains(&self.max_key_bytes),
            "max_key_bytes must be between 1 and 1 MiB",
        )?;
        check(
            self.max_value_bytes <= 1 << 30,
            "max_value_bytes must be at most 1 GiB",
        )?;
        check(
            self.max_batch_bytes >= self.max_key_bytes + self.max_value_bytes,
            "max_batch_bytes must hold at least one key of max_key_bytes and one value of \
             max_value_bytes",
        )?;
        check(
            self.max_batch_bytes <= 2 << 30,
            "max_batch_bytes must be at most 2 GiB",
        )?;
        check(
            self.page_bytes.is_power_of_two() && (512..=1 << 20).contains(&self.page_bytes),
            "page_bytes must be a power of two between 512 B and 1 MiB",
        )?;
        check(
            self.container_bytes.is_multiple_of(self.page_bytes as u64),
            "container_bytes must be a multiple of page_bytes",
        )?;
        check(
            self.container_bytes >= 4 * self.write_buffer_bytes as u64,
            "container_bytes must hold at least 4 memtables (4 * write_buffer_bytes)",
        )?;
        check(
            self.container_bytes / self.page_bytes as u64 <= u64::from(u32::MAX - 1),
            "container_bytes / page_bytes must fit in 32 bits",
        )?;
        check(
            self.receiver_switch_ratio > 0.0 && self.receiver_switch_ratio < 1.0,
            "receiver_switch_ratio must be between 0 and 1 (exclusive)",
        )?;
        check(
            self.container_slowdown_ratio > 0.0 && self.container_slowdown_ratio < 1.0,
            "container_slowdown_ratio must be between 0 and 1 (exclusive)",
        )?;
        check(
            (1..=8).contains(&self.column_threads),
            "column_threads must be between 1 and 8",
        )?;
        let (lo, hi) = self.column_bounds();
        check(lo >= 1 << 16, "column_lower_bytes must be at least 64 KiB")?;
        check(hi >= lo, "column_upper_bytes must be >= column_lower_bytes")?;
        self.table.validate()
    }

    /// The column size bounds: (lower, upper) in bytes of L0 data.
    pub fn column_bounds(&self) -> (u64, u64) {
        let af_sst = self.level_multiplier.saturating_mul(self.target_file_bytes);
        let scaled = (af_sst / 2).min(self.container_bytes / 20).max(1 << 16);
        let lower = self.column_lower_bytes.unwrap_or(scaled);
        (
            lower,
            self.column_upper_bytes.unwrap_or(lower.saturating_mul(2)),
        )
    }

    /// Parameters fixed when the database is created, as stored in the manifest.
    pub(crate) fn fixed_options(&self) -> Vec<(String, String)> {
        let mut v = vec![
            ("num_levels".to_owned(), self.num_levels.to_string()),
            ("l0_layout".to_owned(), self.l0_layout.to_string()),
            (DESIGN.to_owned(), self.design.name().to_owned()),
        ];
        v.push(("ttl".to_owned(), self.ttl.is_some().to_string()));
        // Every key starts with its keyspace's id (docs/format/keyspaces.md). Databases
        // created before keyspaces lack this option: their keys are the default keyspace's,
        // unprefixed.
        #[cfg(feature = "testing")]
        let prefixed = !self.create_without_keyspaces;
        #[cfg(not(feature = "testing"))]
        let prefixed = true;
        if prefixed {
            v.push((KEY_ENCODING.to_owned(), KEYSPACE_PREFIX.to_owned()));
        }
        if self.l0_layout == L0Layout::Matrix {
            v.push(("page_bytes".to_owned(), self.page_bytes.to_string()));
            v.push((
                "container_bytes".to_owned(),
                self.container_bytes.to_string(),
            ));
        }
        v
    }
}

/// The fixed option that names the design (databases created before it are MatrixKV's).
pub(crate) const DESIGN: &str = "design";

/// The fixed option that says how keys are encoded.
pub(crate) const KEY_ENCODING: &str = "key_encoding";
/// Its value for keys that start with their keyspace's id.
pub(crate) const KEYSPACE_PREFIX: &str = "keyspace-prefix";

/// Options of a write.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteOptions {
    /// Persist the WAL record before returning. With `sync = false` an acknowledged write
    /// survives a crash of the process (it is in the mapped WAL) but may be lost, as a suffix of
    /// the history, if the machine loses power. With `sync = true` it survives power loss too
    /// (when the fast tier is real persistent memory or a file system on a durable device).
    pub sync: bool,
}

/// Options of a read.
#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    /// Read as of this snapshot; `None` reads the latest state.
    pub snapshot: Option<SeqNo>,
    /// Inclusive lower bound of an iterator.
    pub lower_bound: Option<Vec<u8>>,
    /// Exclusive upper bound of an iterator.
    pub upper_bound: Option<Vec<u8>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        Options::new("/tmp/x").validate().unwrap();
    }

    #[test]
    fn each_bad_option_is_named_in_the_error() {
        type Case = (fn(&mut Options), &'static str);
        let cases: Vec<Case> = vec![
            (|o| o.write_buffer_bytes = 10, "write_buffer_bytes"),
            (|o| o.max_write_buffers = 1, "max_write_buffers"),
            (|o| o.wal_recycle_segments = 17, "wal_recycle_segments"),
            (
                |o| o.wal_retention_segments = 1025,
                "wal_retention_segments",
            ),
            (|o| o.l0_stop_writes_trigger = 1, "l0_"),
            (|o| o.num_levels = 9, "num_levels"),
            (|o| o.level_multiplier = 1, "level_multiplier"),
            (|o| o.slow_dir = o.fast_dir.clone(), "different"),
            (|o| o.max_key_bytes = 0, "max_key_bytes"),
            (|o| o.page_bytes = 1000, "page_bytes"),
            (
                |o| o.container_bytes = (64 << 20) + 1,
                "multiple of page_bytes",
            ),
            (|o| o.container_bytes = 1 << 20, "at least 4 memtables"),
            (|o| o.receiver_switch_ratio = 1.0, "receiver_switch_ratio"),
            (|o| o.column_threads = 0, "column_threads"),
            (|o| o.background_nice = 20, "background_nice"),
            (|o| o.background_nice = -1, "background_nice"),
            (|o| o.memtable_filter_ratio = 0.5, "memtable_filter_ratio"),
            (
                |o| o.memtable_filter_ratio = f64::NAN,
                "memtable_filter_ratio",
            ),
            (
                |o| o.no_space_timeout = std::time::Duration::ZERO,
                "no_space_timeout",
            ),
            (|o| o.blob_gc_ratio = 0.0, "blob_gc_ratio"),
            (|o| o.blob_gc_ratio = 1.5, "blob_gc_ratio"),
            (|o| o.blob_space_budget = 0.9, "blob_space_budget"),
            (|o| o.blob_space_budget = f64::NAN, "blob_space_budget"),
            (|o| o.blob_file_bytes = 100, "blob_file_bytes"),
            (
                |o| o.column_upper_bytes = Some(1 << 16),
                "column_upper_bytes",
            ),
            (
                |o| o.container_slowdown_ratio = 0.0,
                "container_slowdown_ratio",
            ),
            (
                |o| {
                    o.design = Design::XEngine(XEngineOptions {
                        ror_wait: std::time::Duration::from_secs(1),
                        ..XEngineOptions::default()
                    })
                },
                "ror_wait",
            ),
            (
                |o| {
                    o.design = Design::NoveLsm(NoveLsmOptions {
                        persistent_memtable_bytes: 4096,
                        ..NoveLsmOptions::default()
                    })
                },
                "persistent_memtable_bytes",
            ),
            (
                |o| o.design = Design::SlmDb(SlmDbOptions::default()),
                "l0_layout",
            ),
            (
                |o| {
                    o.l0_layout = L0Layout::Tables;
                    o.design = Design::SlmDb(SlmDbOptions {
                        live_key_ratio: 0.0,
                        ..SlmDbOptions::default()
                    })
                },
                "live_key_ratio",
            ),
            (
                |o| o.design = Design::LightKv(LightKvOptions::default()),
                "l0_layout",
            ),
            (
                |o| {
                    o.l0_layout = L0Layout::Tables;
                    o.design = Design::LightKv(LightKvOptions {
                        compaction_size: 1,
                        ..LightKvOptions::default()
                    })
                },
                "compaction_size",
            ),
        ];
        for (f, needle) in cases {
            let mut o = Options::new("/tmp/x");
            f(&mut o);
            let e = o.validate().unwrap_err().to_string();
            assert!(e.contains(needle), "{e} should mention {needle}");
        }
    }

    #[test]
    fn the_design_is_a_fixed_option_named_as_it_parses() {
        let mut o = Options::new("/tmp/x");
        let stored = |o: &Options| {
            o.fixed_options()
                .into_iter()
                .find(|(n, _)| n == DESIGN)
                .map(|(_, v)| v)
        };
        assert_eq!(stored(&o).as_deref(), Some("matrixkv"));
        o.design = "xengine".parse().unwrap();
        assert_eq!(o.design, Design::XEngine(XEngineOptions::default()));
        assert_eq!(stored(&o).as_deref(), Some("xengine"));
        assert_eq!("matrixkv".parse::<Design>(), Ok(Design::MatrixKv));
        o.design = "novelsm".parse().unwrap();
        assert_eq!(o.design, Design::NoveLsm(NoveLsmOptions::default()));
        assert_eq!(stored(&o).as_deref(), Some("novelsm"));
        o.design = "slmdb".parse().unwrap();
        assert_eq!(o.design, Design::SlmDb(SlmDbOptions::default()));
        assert_eq!(stored(&o).as_deref(), Some("slmdb"));
        o.design = "lightkv".parse().unwrap();
        assert_eq!(o.design, Design::LightKv(LightKvOptions::default()));
        assert_eq!(stored(&o).as_deref(), Some("lightkv"));
        assert!(
            "leveldb"
                .parse::<Design>()
                .unwrap_err()
                .contains("expected")
        );
    }
}
