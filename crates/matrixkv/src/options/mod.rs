//! Options of a database, of a read and of a write. Every field documents its meaning, unit and
//! default; [`Options::validate`] rejects inconsistent values with a message naming the field.

mod designs;
#[cfg(test)]
mod tests;
mod validate;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[cfg(doc)]
use crate::error::Error;
use crate::key::SeqNo;
use crate::sst::TableOptions;
use crate::tier::{DirFastTier, FastTier, FileSystem, StdFs};
use crate::wal::WalRecovery;

pub use designs::{Design, LightKvOptions, NoveLsmOptions, SlmDbOptions, XEngineOptions};

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
