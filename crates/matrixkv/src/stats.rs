//! Per-instance counters (never global: two databases in one process never share them).
//!
//! Counters are `Relaxed` atomics: they are statistics and synchronize nothing.
//! [`Db::stats`](crate::Db::stats) returns a [`Stats`] snapshot.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crate::lock_order::{Mutex, MutexGuard, Rank};

/// Why a writer waited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StallCause {
    /// Every memtable was full and the flush had not finished.
    MemtableFull,
    /// L0 reached the slowdown trigger: the write was delayed in proportion.
    L0Slowdown,
    /// L0 reached the stop trigger: the write waited for compaction.
    L0Stop,
    /// The matrix container passed its slowdown ratio: the write was delayed in proportion.
    ContainerSlowdown,
}

/// The live counters of one database.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub user_bytes: AtomicU64,
    pub user_ops: AtomicU64,
    pub write_groups: AtomicU64,
    pub wal_bytes: AtomicU64,
    pub persistent_memtable_bytes: AtomicU64,
    pub index_bytes_written: AtomicU64,
    pub index_misses: AtomicU64,
    pub index_fallbacks: AtomicU64,
    pub selective_compactions: AtomicU64,
    pub partition_compactions: AtomicU64,
    pub partition_splits: AtomicU64,
    pub scan_candidates: AtomicU64,
    pub index_scans: AtomicU64,
    pub wal_syncs: AtomicU64,
    pub wal_segments_created: AtomicU64,
    pub wal_segments_recycled: AtomicU64,
    pub fast_sst_bytes_written: AtomicU64,
    pub slow_bytes_written: AtomicU64,
    pub manifest_bytes_written: AtomicU64,
    pub flushes: AtomicU64,
    pub flush_bytes: AtomicU64,
    pub flush_micros: AtomicU64,
    pub compactions: AtomicU64,
    pub compaction_input_bytes: AtomicU64,
    pub compaction_output_bytes: AtomicU64,
    pub compaction_micros: AtomicU64,
    pub l0_compactions: AtomicU64,
    pub l0_compaction_input_bytes: AtomicU64,
    pub trivial_moves: AtomicU64,
    pub stalls: AtomicU64,
    pub stall_memtable_micros: AtomicU64,
    pub stall_l0_slowdown_micros: AtomicU64,
    pub stall_l0_stop_micros: AtomicU64,
    pub gets: AtomicU64,
    pub get_hits_memtable: AtomicU64,
    pub get_hits_l0: AtomicU64,
    pub get_hits_levels: AtomicU64,
    pub background_errors: AtomicU64,
    pub no_space_errors: AtomicU64,
    pub no_space_rejections: AtomicU64,
    pub manifest_rolls: AtomicU64,
    pub role_switches: AtomicU64,
    pub row_searches: AtomicU64,
    pub hinted_row_searches: AtomicU64,
    pub finger_row_searches: AtomicU64,
    pub covered_gets_by_source: AtomicU64,
    pub row_filter_skips: AtomicU64,
    pub stall_container_micros: AtomicU64,
    pub blob_bytes_written: AtomicU64,
    pub blob_bytes_at_write: AtomicU64,
    pub blob_relocated_bytes: AtomicU64,
    pub value_files_relocated: AtomicU64,
    pub blob_gc_jobs: AtomicU64,
    pub blob_gc_relocated_bytes: AtomicU64,
    pub blob_gc_table_bytes: AtomicU64,
    pub merge_failures: AtomicU64,
    pub flush_dropped_versions: AtomicU64,
    pub filtered_entries: AtomicU64,
    pub filter_failures: AtomicU64,
    pub range_del_dropped_files: AtomicU64,
    pub range_del_collected: AtomicU64,
    /// Flush phases: the sum over all flushes, and the phases of the slowest flush.
    pub flush_phases: FlushPhaseTotals,
}

/// The flush phases' sum and slowest flush, behind their lock.
#[derive(Debug)]
pub(crate) struct FlushPhaseTotals(Mutex<(FlushPhases, FlushPhases)>);

impl Default for FlushPhaseTotals {
    fn default() -> Self {
        FlushPhaseTotals(Mutex::new(Rank::LeafFlushPhases, Default::default()))
    }
}

impl FlushPhaseTotals {
    /// Takes the lock.
    pub(crate) fn lock(&self) -> MutexGuard<'_, (FlushPhases, FlushPhases)> {
        self.0.lock()
    }
}

/// Where memtable flushes spent their time, phase by phase, in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FlushPhases {
    /// Collecting the memtable's entries (folding merges, dropping shadowed versions).
    pub collect_micros: u64,
    /// Writing and syncing the values separated into blob files.
    pub values_micros: u64,
    /// Waiting for free pages in the matrix container (for column compaction to free some).
    pub pages_wait_micros: u64,
    /// Writing the RowTable (or the L0 table).
    pub table_micros: u64,
    /// Waiting for the manifest lock while another thread installed its edit (in the SLM-DB
    /// design also the global index's commit lock and the index commit itself).
    pub manifest_wait_micros: u64,
    /// Appending the edit to the manifest, syncing it and installing the new version.
    pub install_micros: u64,
}

impl FlushPhases {
    /// The whole flush.
    pub fn total_micros(&self) -> u64 {
        self.collect_micros
            + self.values_micros
            + self.pages_wait_micros
            + self.table_micros
            + self.manifest_wait_micros
            + self.install_micros
    }

    fn add(&mut self, o: &FlushPhases) {
        self.collect_micros += o.collect_micros;
        self.values_micros += o.values_micros;
        self.pages_wait_micros += o.pages_wait_micros;
        self.table_micros += o.table_micros;
        self.manifest_wait_micros += o.manifest_wait_micros;
        self.install_micros += o.install_micros;
    }
}

impl fmt::Display for FlushPhases {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |us: u64| us as f64 / 1e3;
        write!(
            f,
            "collect {:.1} ms, values {:.1} ms, pages wait {:.1} ms, table {:.1} ms, manifest \
             wait {:.1} ms, install {:.1} ms",
            ms(self.collect_micros),
            ms(self.values_micros),
            ms(self.pages_wait_micros),
            ms(self.table_micros),
            ms(self.manifest_wait_micros),
            ms(self.install_micros)
        )
    }
}

/// Measures consecutive phases: each `lap` returns the microseconds since the previous one.
pub(crate) struct Laps(std::time::Instant);

impl Laps {
    pub fn start() -> Laps {
        Laps(std::time::Instant::now())
    }

    pub fn lap(&mut self) -> u64 {
        let now = std::time::Instant::now();
        let us = u64::try_from(now.duration_since(self.0).as_micros()).unwrap_or(u64::MAX);
        self.0 = now;
        us
    }
}

impl Counters {
    /// Adds a finished flush's phases to the sum, and keeps them if it was the slowest.
    pub fn record_flush(&self, p: &FlushPhases) {
        let mut g = self.flush_phases.lock();
        g.0.add(p);
        if p.total_micros() > g.1.total_micros() {
            g.1 = *p;
        }
    }

    pub fn add(c: &AtomicU64, v: u64) {
        c.fetch_add(v, Relaxed);
    }

    pub fn record_stall(&self, cause: StallCause, waited: Duration) {
        let us = u64::try_from(waited.as_micros()).unwrap_or(u64::MAX);
        self.stalls.fetch_add(1, Relaxed);
        let c = match cause {
            StallCause::MemtableFull => &self.stall_memtable_micros,
            StallCause::L0Slowdown => &self.stall_l0_slowdown_micros,
            StallCause::L0Stop => &self.stall_l0_stop_micros,
            StallCause::ContainerSlowdown => &self.stall_container_micros,
        };
        c.fetch_add(us, Relaxed);
    }
}

/// A snapshot of a database's counters and shape.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Stats {
    /// Bytes of keys and values written by the user (puts and deletes).
    pub user_bytes: u64,
    /// Operations written by the user.
    pub user_ops: u64,
    /// Group commits: WAL records written by a leader for itself and the writers queued
    /// behind it (`user_ops / write_groups` is the average number of operations per group).
    pub write_groups: u64,
    /// Bytes appended to the WAL (fast tier).
    pub wal_bytes: u64,
    /// Bytes written into persistent memtables (fast tier; the NoveLSM design, whose writes
    /// to them have no WAL record): nodes and version records.
    pub persistent_memtable_bytes: u64,
    /// Bytes of global-index pages written (fast tier; the SLM-DB design's B+-tree: every
    /// commit writes the pages it changed and the paths above them; the LightKV design's
    /// RH-tree: records, slots, split leaves and directories).
    pub index_bytes_written: u64,
    /// Point lookups the global index answered "absent" without reading a table (SLM-DB,
    /// LightKV).
    pub index_misses: u64,
    /// Point lookups below the memtables the global index could not answer, so that every
    /// table that may hold the key was searched (SLM-DB, LightKV): a read older than the
    /// level's newest version, a merge operand, or (LightKV) a location naming a table a job
    /// has not yet installed in the reader's view.
    pub index_fallbacks: u64,
    /// Selective compactions (SLM-DB; included in `compactions`).
    pub selective_compactions: u64,
    /// Partition compactions: merges of `compaction_size` tables of one merge count
    /// (LightKV; included in `compactions`).
    pub partition_compactions: u64,
    /// Partition splits (LightKV; each rewrites the partition's tables, included in
    /// `compactions`).
    pub partition_splits: u64,
    /// Tables the range-query trigger made compaction candidates (SLM-DB; counted each
    /// time a scan finds them scattered).
    pub scan_candidates: u64,
    /// Scans that read the single level through the global index, one block per key, instead
    /// of merging its tables (SLM-DB, a scan whose snapshot sees every table's versions).
    pub index_scans: u64,
    /// WAL persists requested by sync writes.
    pub wal_syncs: u64,
    /// WAL segments started in a newly created (allocated, zero-filled) region.
    pub wal_segments_created: u64,
    /// WAL segments started in the recycled region of an obsolete segment
    /// (`Options::wal_recycle_segments`).
    pub wal_segments_recycled: u64,
    /// Bytes of L0 tables written to the fast tier by flushes.
    pub fast_sst_bytes_written: u64,
    /// Bytes written to the slow tier: SSTables by compaction plus the manifest.
    pub slow_bytes_written: u64,
    /// Bytes written to the manifest (included in `slow_bytes_written`).
    pub manifest_bytes_written: u64,
    /// Bytes written to blob files (included in `slow_bytes_written`).
    pub blob_bytes_written: u64,
    /// Bytes the write path appended to memtables' blob files (`Options::separate_at_write`;
    /// counted in `blob_bytes_written` too once a flush installs the file or drops it).
    pub blob_bytes_at_write: u64,
    /// Record bytes copied out of mostly-garbage blob files by compaction, and out of
    /// mostly-garbage value files by their flush (included in `blob_bytes_written`).
    pub blob_relocated_bytes: u64,
    /// Memtables' value files (`Options::separate_at_write`) whose flush found at least
    /// `blob_gc_ratio` of their bytes garbage, copied their live values out and dropped them.
    pub value_files_relocated: u64,
    /// Blob GC jobs run (also counted in `compactions`).
    pub blob_gc_jobs: u64,
    /// Record bytes relocated by blob GC jobs (included in `blob_relocated_bytes`).
    pub blob_gc_relocated_bytes: u64,
    /// Table bytes blob GC jobs rewrote (read and written again in place).
    pub blob_gc_table_bytes: u64,
    /// Merges compaction could not fold because the merge operator failed (the operands were
    /// kept; reads of those keys report the error).
    pub merge_failures: u64,
    /// Versions flushes left out: shadowed by a newer version of the same memtable that every
    /// snapshot sees, or merge operands folded into one entry.
    pub flush_dropped_versions: u64,
    /// Values compaction removed or changed by the compaction filter or the TTL.
    pub filtered_entries: u64,
    /// Compaction filter calls that panicked (the entries were kept).
    pub filter_failures: u64,
    /// Values read from blob files (gets, iterators, relocation).
    pub blob_reads: u64,
    /// Live blob files.
    pub blob_files: usize,
    /// Range tombstones in the current version (flushed `Db::delete_range`s not yet
    /// collected).
    pub range_tombstones: usize,
    /// Tables dropped without a rewrite because a range tombstone covered all of them.
    pub range_del_dropped_files: u64,
    /// Range tombstones removed from the version once nothing older was left under them.
    pub range_del_collected: u64,
    /// Record bytes of the live blob files, and how many of them are garbage.
    pub blob_bytes: (u64, u64),
    /// Memtable flushes.
    pub flushes: u64,
    /// Bytes written by flushes.
    pub flush_bytes: u64,
    /// Time spent in flushes.
    pub flush_micros: u64,
    /// Time spent in flushes, phase by phase (sums over all flushes).
    pub flush_phases: FlushPhases,
    /// The phases of the slowest flush.
    pub slowest_flush: FlushPhases,
    /// Compactions (including trivial moves).
    pub compactions: u64,
    /// Bytes read by compactions.
    pub compaction_input_bytes: u64,
    /// Bytes written by compactions.
    pub compaction_output_bytes: u64,
    /// Time spent in compactions.
    pub compaction_micros: u64,
    /// L0→L1 compactions.
    pub l0_compactions: u64,
    /// Bytes of L0 data read by L0→L1 compactions.
    pub l0_compaction_input_bytes: u64,
    /// Compactions that moved a file down without rewriting it.
    pub trivial_moves: u64,
    /// Number of times a writer waited.
    pub stalls: u64,
    /// Time writers waited for a memtable.
    pub stall_memtable_micros: u64,
    /// Time writers were delayed by the L0 slowdown.
    pub stall_l0_slowdown_micros: u64,
    /// Time writers waited at the L0 stop trigger.
    pub stall_l0_stop_micros: u64,
    /// Time writers were delayed because the matrix container was nearly full.
    pub stall_container_micros: u64,
    /// Receiver→compactor role switches.
    pub role_switches: u64,
    /// RowTables searched by point reads.
    pub row_searches: u64,
    /// RowTable searches narrowed by a cross-row hint window.
    pub hinted_row_searches: u64,
    /// RowTable searches of `multi_get` that galloped from the previous key's position
    /// instead of searching the whole row (when its keys are dense in the row).
    pub finger_row_searches: u64,
    /// Point reads of keys under a range tombstone decided by the sequence-number range of the
    /// source holding the key (without an iterator).
    pub covered_gets_by_source: u64,
    /// RowTables a point read skipped because their bloom filter ruled the key out (not
    /// counted in `row_searches`).
    pub row_filter_skips: u64,
    /// Matrix container: pages in use, and in total (0 in the SSTable layout).
    pub container_used_bytes: u64,
    /// Matrix container capacity in bytes.
    pub container_capacity_bytes: u64,
    /// Rows in the receiver and in the compactor.
    pub container_rows: (usize, usize),
    /// Point reads.
    pub gets: u64,
    /// Point reads answered by a memtable.
    pub get_hits_memtable: u64,
    /// Point reads answered by L0.
    pub get_hits_l0: u64,
    /// Point reads answered by L1 or below.
    pub get_hits_levels: u64,
    /// Background jobs that failed.
    pub background_errors: u64,
    /// Background jobs that failed for lack of space (a subset of `background_errors`).
    pub no_space_errors: u64,
    /// Writes (and `flush`/`wait_for_compactions` calls) that gave up with `Error::NoSpace`.
    pub no_space_rejections: u64,
    /// Manifests replaced after a failed manifest write.
    pub manifest_rolls: u64,
    /// Background work is failing for lack of space right now: which tier and why.
    pub no_space: Option<String>,
    /// Per level: (number of tables, bytes). In the matrix layout, L0 counts RowTables and the
    /// container bytes they hold.
    pub levels: Vec<(usize, u64)>,
    /// Bytes held by memtables.
    pub memtable_bytes: u64,
    /// Bytes held by the block cache.
    pub block_cache_bytes: u64,
    /// Heap bytes pinned by open tables (index blocks and bloom filters).
    pub table_memory_bytes: u64,
    /// Block cache lookups that found the block.
    pub block_cache_hits: u64,
    /// Block cache lookups that read the block from storage.
    pub block_cache_misses: u64,
    /// Whether the database refuses writes after a failure, and why.
    pub poisoned: Option<String>,
}

impl Stats {
    /// Total stall time of all causes.
    pub fn stall_micros(&self) -> u64 {
        self.stall_memtable_micros
            + self.stall_l0_slowdown_micros
            + self.stall_l0_stop_micros
            + self.stall_container_micros
    }

    /// Average L0 bytes read per L0→L1 compaction (column or all-to-all).
    pub fn avg_l0_compaction_bytes(&self) -> u64 {
        self.l0_compaction_input_bytes
            .checked_div(self.l0_compactions)
            .unwrap_or(0)
    }

    /// Slow-tier bytes written per user byte (0 before any write).
    pub fn write_amplification(&self) -> f64 {
        if self.user_bytes == 0 {
            0.0
        } else {
            self.slow_bytes_written as f64 / self.user_bytes as f64
        }
    }

    pub(crate) fn from_counters(c: &Counters) -> Stats {
        let g = |a: &AtomicU64| a.load(Relaxed);
        let (flush_phases, slowest_flush) = *c.flush_phases.lock();
        Stats {
            user_bytes: g(&c.user_bytes),
            user_ops: g(&c.user_ops),
            write_groups: g(&c.write_groups),
            wal_bytes: g(&c.wal_bytes),
            persistent_memtable_bytes: g(&c.persistent_memtable_bytes),
            index_bytes_written: g(&c.index_bytes_written),
            index_misses: g(&c.index_misses),
            index_fallbacks: g(&c.index_fallbacks),
            selective_compactions: g(&c.selective_compactions),
            partition_compactions: g(&c.partition_compactions),
            partition_splits: g(&c.partition_splits),
            scan_candidates: g(&c.scan_candidates),
            index_scans: g(&c.index_scans),
            wal_syncs: g(&c.wal_syncs),
            wal_segments_created: g(&c.wal_segments_created),
            wal_segments_recycled: g(&c.wal_segments_recycled),
            fast_sst_bytes_written: g(&c.fast_sst_bytes_written),
            slow_bytes_written: g(&c.slow_bytes_written),
            manifest_bytes_written: g(&c.manifest_bytes_written),
            flushes: g(&c.flushes),
            flush_bytes: g(&c.flush_bytes),
            flush_micros: g(&c.flush_micros),
            flush_phases,
            slowest_flush,
            compactions: g(&c.compactions),
            compaction_input_bytes: g(&c.compaction_input_bytes),
            compaction_output_bytes: g(&c.compaction_output_bytes),
            compaction_micros: g(&c.compaction_micros),
            l0_compactions: g(&c.l0_compactions),
            l0_compaction_input_bytes: g(&c.l0_compaction_input_bytes),
            trivial_moves: g(&c.trivial_moves),
            stalls: g(&c.stalls),
            stall_memtable_micros: g(&c.stall_memtable_micros),
            stall_l0_slowdown_micros: g(&c.stall_l0_slowdown_micros),
            stall_l0_stop_micros: g(&c.stall_l0_stop_micros),
            gets: g(&c.gets),
            get_hits_memtable: g(&c.get_hits_memtable),
            get_hits_l0: g(&c.get_hits_l0),
            get_hits_levels: g(&c.get_hits_levels),
            background_errors: g(&c.background_errors),
            no_space_errors: g(&c.no_space_errors),
            no_space_rejections: g(&c.no_space_rejections),
            manifest_rolls: g(&c.manifest_rolls),
            stall_container_micros: g(&c.stall_container_micros),
            role_switches: g(&c.role_switches),
            row_searches: g(&c.row_searches),
            hinted_row_searches: g(&c.hinted_row_searches),
            finger_row_searches: g(&c.finger_row_searches),
            covered_gets_by_source: g(&c.covered_gets_by_source),
            blob_bytes_written: g(&c.blob_bytes_written),
            blob_bytes_at_write: g(&c.blob_bytes_at_write),
            blob_relocated_bytes: g(&c.blob_relocated_bytes),
            value_files_relocated: g(&c.value_files_relocated),
            blob_gc_jobs: g(&c.blob_gc_jobs),
            blob_gc_relocated_bytes: g(&c.blob_gc_relocated_bytes),
            blob_gc_table_bytes: g(&c.blob_gc_table_bytes),
            merge_failures: g(&c.merge_failures),
            flush_dropped_versions: g(&c.flush_dropped_versions),
            filtered_entries: g(&c.filtered_entries),
            filter_failures: g(&c.filter_failures),
            range_del_dropped_files: g(&c.range_del_dropped_files),
            range_del_collected: g(&c.range_del_collected),
            row_filter_skips: g(&c.row_filter_skips),
            ..Stats::default()
        }
    }
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
        writeln!(
            f,
            "user: {} ops, {:.1} MiB, {} write groups",
            self.user_ops,
            mib(self.user_bytes),
            self.write_groups
        )?;
        writeln!(
            f,
            "fast tier written: WAL {:.1} MiB ({} segments created, {} recycled), L0 tables \
             {:.1} MiB, persistent memtables {:.1} MiB, global index {:.1} MiB",
            mib(self.wal_bytes),
            self.wal_segments_created,
            self.wal_segments_recycled,
            mib(self.fast_sst_bytes_written),
            mib(self.persistent_memtable_bytes),
            mib(self.index_bytes_written)
        )?;
        writeln!(
            f,
            "slow tier written: {:.1} MiB (manifest {:.2} MiB); write amplification {:.2}",
            mib(self.slow_bytes_written),
            mib(self.manifest_bytes_written),
            self.write_amplification()
        )?;
        if self.blob_files > 0 || self.blob_bytes_written > 0 {
            writeln!(
                f,
                "blob files: {} live, {:.1} MiB of records ({:.1} MiB garbage); written {:.1} MiB \
                 (relocated {:.1} MiB; {:.1} MiB by writers, {} of their files dropped at \
                 flush); {} reads",
                self.blob_files,
                mib(self.blob_bytes.0),
                mib(self.blob_bytes.1),
                mib(self.blob_bytes_written),
                mib(self.blob_relocated_bytes),
                mib(self.blob_bytes_at_write),
                self.value_files_relocated,
                self.blob_reads
            )?;
            writeln!(
                f,
                "blob gc: {} jobs, relocated {:.1} MiB, rewrote {:.1} MiB of tables",
                self.blob_gc_jobs,
                mib(self.blob_gc_relocated_bytes),
                mib(self.blob_gc_table_bytes)
            )?;
        }
        if self.range_tombstones > 0 || self.range_del_collected > 0 {
            writeln!(
                f,
                "range deletes: {} tombstones live, {} collected, {} tables dropped whole",
                self.range_tombstones, self.range_del_collected, self.range_del_dropped_files
            )?;
        }
        if self.filtered_entries > 0 || self.filter_failures > 0 {
            writeln!(
                f,
                "compaction filter and TTL: {} entries removed or changed, {} filter panics",
                self.filtered_entries, self.filter_failures
            )?;
        }
        if self.merge_failures > 0 {
            writeln!(
                f,
                "merge failures in compaction: {} (operands kept)",
                self.merge_failures
            )?;
        }
        writeln!(
            f,
            "flushes: {} ({:.1} MiB, {:.2} s); compactions: {} ({} L0->L1, {} moves; in {:.1} MiB, \
             out {:.1} MiB, {:.2} s)",
            self.flushes,
            mib(self.flush_bytes),
            self.flush_micros as f64 / 1e6,
            self.compactions,
            self.l0_compactions,
            self.trivial_moves,
            mib(self.compaction_input_bytes),
            mib(self.compaction_output_bytes),
            self.compaction_micros as f64 / 1e6
        )?;
        if self.flushes > 0 {
            writeln!(f, "flush phases (sum): {}", self.flush_phases)?;
            writeln!(
                f,
                "slowest flush: {:.1} ms ({})",
                self.slowest_flush.total_micros() as f64 / 1e3,
                self.slowest_flush
            )?;
        }
        writeln!(
            f,
            "stalls: {} ({:.3} s: memtable {:.3} s, L0 slowdown {:.3} s, L0 stop {:.3} s, \
             container {:.3} s)",
            self.stalls,
            self.stall_micros() as f64 / 1e6,
            self.stall_memtable_micros as f64 / 1e6,
            self.stall_l0_slowdown_micros as f64 / 1e6,
            self.stall_l0_stop_micros as f64 / 1e6,
            self.stall_container_micros as f64 / 1e6
        )?;
        if self.container_capacity_bytes > 0 {
            writeln!(
                f,
                "matrix container: {:.1} of {:.1} MiB used; {} receiver rows, {} compactor rows; \
                 {} role switches; {} L0->L1 compactions averaging {:.1} MiB of L0 data; row \
                 searches {} ({} hinted, {} from the previous multi_get key), {} rows skipped by \
                 bloom filters",
                mib(self.container_used_bytes),
                mib(self.container_capacity_bytes),
                self.container_rows.0,
                self.container_rows.1,
                self.role_switches,
                self.l0_compactions,
                mib(self.avg_l0_compaction_bytes()),
                self.row_searches,
                self.hinted_row_searches,
                self.finger_row_searches,
                self.row_filter_skips
            )?;
        }
        writeln!(
            f,
            "gets: {} (memtable {}, L0 {}, L1+ {}); block cache {:.1} MiB, {} hits, {} misses",
            self.gets,
            self.get_hits_memtable,
            self.get_hits_l0,
            self.get_hits_levels,
            mib(self.block_cache_bytes),
            self.block_cache_hits,
            self.block_cache_misses
        )?;
        for (i, (n, b)) in self.levels.iter().enumerate() {
            if *n > 0 {
                writeln!(f, "L{i}: {n} tables, {:.1} MiB", mib(*b))?;
            }
        }
        if self.background_errors > 0 {
            writeln!(
                f,
                "background errors: {} ({} for lack of space; {} writes rejected with NoSpace; \
                 {} manifest rolls)",
                self.background_errors,
                self.no_space_errors,
                self.no_space_rejections,
                self.manifest_rolls
            )?;
        }
        if let Some(n) = &self.no_space {
            writeln!(f, "NO SPACE: {n}")?;
        }
        if let Some(p) = &self.poisoned {
            writeln!(f, "POISONED: {p}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_flushes_add_up_and_the_slowest_is_kept_whole() {
        let c = Counters::default();
        let slow = FlushPhases {
            values_micros: 900,
            install_micros: 10,
            ..FlushPhases::default()
        };
        let fast = FlushPhases {
            collect_micros: 5,
            table_micros: 20,
            ..FlushPhases::default()
        };
        c.record_flush(&fast);
        c.record_flush(&slow);
        c.record_flush(&fast);
        let (sum, slowest) = *c.flush_phases.lock();
        assert_eq!(sum.total_micros(), 910 + 2 * 25);
        assert_eq!(sum.collect_micros, 10);
        assert_eq!(slowest, slow);
    }
}
