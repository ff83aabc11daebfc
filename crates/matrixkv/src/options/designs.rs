//! [`Design`]: which published design the engine runs, and the knobs of each.

#[cfg(doc)]
use super::{L0Layout, Options};

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

    /// Bytes of the global index region on the fast tier (`index_bytes`), in the designs
    /// that keep one (SLM-DB, LightKV).
    pub fn index_bytes(&self) -> Option<u64> {
        match self {
            Design::SlmDb(k) => Some(k.index_bytes),
            Design::LightKv(k) => Some(k.index_bytes),
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
