//! Flags of `matrixkv bench`: db_bench's names and defaults where db_bench has the flag, the
//! reference configuration of docs/benchmarks.md otherwise. Flags are spelled with underscores as
//! db_bench's are; `main.rs` also accepts the kebab-case spellings (see
//! [`normalize_flag_spelling`]). Pure data, no I/O.

use std::ffi::OsString;
use std::path::PathBuf;

/// Arguments of `matrixkv bench`.
#[derive(clap::Args, Debug, Clone)]
#[command(
    rename_all = "snake_case",
    args_conflicts_with_subcommands = true,
    args_override_self = true
)]
pub struct BenchArgs {
    /// `report DIR...`: regenerate plots and a side-by-side report from results directories.
    #[command(subcommand)]
    pub command: Option<BenchCommand>,

    /// Comma-separated benchmarks, run in order on one database: fillrandom, fillseq,
    /// overwrite, readrandom, multireadrandom, readseq, seekrandom, deleterandom, deleterange
    /// (range tombstones of 100 keys), mergerandom (u64-add counters), ycsb_load, ycsba..ycsbf, and the
    /// unmeasured steps flush and waitforcompaction.
    #[arg(long, default_value = "fillrandom,readrandom")]
    pub benchmarks: String,
    /// Comma-separated engines, each run on its own fresh database: matrixkv,
    /// matrixkv-separate-at-write and matrixkv-values-in-wal (matrixkv with every separable
    /// value separated as it is written, `--separate_at_write=true
    /// --separate_at_write_min_bytes=0`, and with `--separate_at_write=false`), matrixkv-values-in-wal-pread (`=false` and
    /// `--mmap_blob_reads=false`: the defaults before decisions 0028 and 0029), the design modes
    /// matrixkv-xengine, matrixkv-novelsm, matrixkv-slmdb, matrixkv-lightkv, rocksdb-ssd
    /// (alias rocksdb), rocksdb-l0-fast, rocksdb-blob (RocksDB-SSD with its integrated BlobDB,
    /// same --min_blob_size and --blob_file_size as matrixkv), rocksdb-best (the strongest
    /// setup for this load and hardware, see docs/bench.md; the four need the `rocksdb`
    /// feature), fjall (fjall 3 with its key-value separation, same --min_blob_size and
    /// --blob_file_size; needs the `fjall` feature), db_bench (Debian's RocksDB 7.8.3
    /// db_bench, run as a process: the cross-check).
    #[arg(long, alias = "engine", default_value = "matrixkv")]
    pub engines: String,
    /// Operations of each write benchmark per thread (db_bench: --num), the key range of the
    /// read benchmarks, and the YCSB record count (total over the threads).
    #[arg(long, default_value_t = 1_000_000)]
    pub num: u64,
    /// Operations of each read benchmark per thread, and of each YCSB run phase in total
    /// (default: num).
    #[arg(long)]
    pub reads: Option<u64>,
    /// Key size in bytes.
    #[arg(long, default_value_t = 16)]
    pub key_size: usize,
    /// Value size in bytes.
    #[arg(long, default_value_t = 4096)]
    pub value_size: usize,
    /// Key range of mergerandom (db_bench's --merge_keys; default: num): fewer keys than
    /// merges makes every counter collect many operands.
    #[arg(long)]
    pub merge_keys: Option<u64>,
    /// Random seed (the same seed gives every engine the same keys).
    #[arg(long, default_value_t = 301)]
    pub seed: u64,
    /// Runs of the whole engine list. Run k starts at the k-th engine of --engines and goes round
    /// (A B C, B C A, C A B, ...), so no engine always runs first on a warm or cold machine; the
    /// report gives each ratio's median and range over the runs, paired run by run.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeat: u32,
    /// Threads running each benchmark; each does --num (or --reads) operations, as in db_bench.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Stop each benchmark after this many seconds (0: run all operations).
    #[arg(long, default_value_t = 0)]
    pub duration: u64,
    /// Open loop: issue operations at this fixed total rate (ops/s, spread over the threads);
    /// latency is measured from each operation's intended start, so queueing behind a slow
    /// operation counts (no coordinated omission). 0: closed loop.
    #[arg(long, default_value_t = 0.0)]
    pub rate: f64,
    /// Open loop: how a worker waits for its next operation's start. `sleep` (default): asleep
    /// with 1 ns timer slack, as a client waiting for a request; `yield`: the pacer of earlier
    /// versions, which spins on sched_yield for the last 300 µs (kept to reproduce their
    /// figures: it hands the CPU to background threads at every yield).
    #[arg(long, default_value = "sleep", value_parser = ["sleep", "yield"])]
    pub open_loop_pacer: String,
    /// fillrandom writes each key of [0, num) exactly once, in random order (db_bench's
    /// fillrandom draws with replacement).
    #[arg(long, default_value_t = false)]
    pub unique: bool,
    /// seekrandom: entries read after each seek (db_bench's --seek_nexts).
    #[arg(long, default_value_t = 0)]
    pub seek_nexts: usize,
    /// Operations per write batch in write benchmarks, keys per call in multireadrandom
    /// (db_bench's --batch_size).
    #[arg(long, default_value_t = 1)]
    pub batch_size: usize,
    /// YCSB workload E: maximum scan length (uniform in 1..=this).
    #[arg(long, default_value_t = 100)]
    pub ycsb_max_scan_length: usize,
    /// YCSB: override the request distribution of every workload (uniform, zipfian, latest).
    #[arg(long)]
    pub ycsb_distribution: Option<String>,

    /// Base directory of the slow tier; each engine gets `<db>/<engine>`.
    #[arg(long, default_value = "bench-data")]
    pub db: PathBuf,
    /// Base directory of the fast tier; each engine gets `<fast_dir>/<engine>`.
    /// Default: /dev/shm/matrixkv-bench-<pid> (removed at the end).
    #[arg(long)]
    pub fast_dir: Option<PathBuf>,
    /// Keep the databases after the run, and reuse existing ones (default: fresh, deleted).
    #[arg(long, default_value_t = false)]
    pub use_existing_db: bool,

    /// Memtable size in bytes.
    #[arg(long, default_value_t = 64 << 20)]
    pub write_buffer_size: usize,
    /// Maximum number of memtables.
    #[arg(long, default_value_t = 2)]
    pub max_write_buffer_number: usize,
    /// SSTable target size in bytes.
    #[arg(long, default_value_t = 64 << 20)]
    pub target_file_size_base: u64,
    /// L1 target size in bytes (default: matrixkv 800 MiB = the container; RocksDB 256 MiB).
    #[arg(long)]
    pub max_bytes_for_level_base: Option<u64>,
    /// Size ratio between adjacent levels (AF).
    #[arg(long, default_value_t = 10)]
    pub max_bytes_for_level_multiplier: u64,
    /// L0 tables that trigger an L0->L1 compaction.
    #[arg(long, default_value_t = 4)]
    pub level0_file_num_compaction_trigger: usize,
    /// L0 tables from which writes are slowed down.
    #[arg(long, default_value_t = 20)]
    pub level0_slowdown_writes_trigger: usize,
    /// L0 tables at which writes stop.
    #[arg(long, default_value_t = 36)]
    pub level0_stop_writes_trigger: usize,
    /// Number of levels (default: the engine's, 7).
    #[arg(long)]
    pub num_levels: Option<usize>,
    /// matrixkv: L0 layout, `matrix` (RowTables, column compaction) or `tables` (SSTables on
    /// the fast tier, all-to-all L0→L1: the paper's RocksDB-L0-NVM inside our engine).
    #[arg(long, default_value = "matrix")]
    pub l0_layout: String,
    /// matrixkv: matrix container size in bytes (the reference configuration: 800 MiB).
    #[arg(long, default_value_t = 800 << 20)]
    pub container_bytes: u64,
    /// matrixkv: container page size in bytes.
    #[arg(long, default_value_t = 4096)]
    pub page_bytes: usize,
    /// matrixkv: share of the container at which the receiver becomes the compactor.
    #[arg(long, default_value_t = 0.6)]
    pub receiver_switch_ratio: f64,
    /// matrixkv: column compaction (true) or all-to-all L0→L1 (false).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub column_compaction: bool,
    /// matrixkv: lower bound of a column's L0 data (default ½·AF·S_sst or 1/20 of the
    /// container, whichever is smaller).
    #[arg(long)]
    pub column_lower_bytes: Option<u64>,
    /// matrixkv: upper bound of a column's L0 data (default twice the lower bound).
    #[arg(long)]
    pub column_upper_bytes: Option<u64>,
    /// matrixkv: key-value separation: values >= --min_blob_size go to blob files, those of
    /// at least --separate_at_write_min_bytes as they are written and the others when their
    /// memtable is flushed (the defaults; see --separate_at_write and --separate_at_flush).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub enable_blob_files: bool,
    /// matrixkv: smallest value separated into a blob file, in bytes.
    #[arg(long, default_value_t = 1024)]
    pub min_blob_size: usize,
    /// matrixkv: blob file size in bytes.
    #[arg(long, default_value_t = 256 << 20)]
    pub blob_file_size: u64,
    /// matrixkv: garbage share of a blob file from which compaction relocates its live values.
    #[arg(long, default_value_t = 0.5)]
    pub blob_gc_ratio: f64,
    /// matrixkv: blob-file bytes allowed per live blob byte before the blob GC job runs
    /// (default: the engine's; `inf` turns the job off).
    #[arg(long)]
    pub blob_space_budget: Option<f64>,
    /// matrixkv: threads gathering a column from the rows (k). Default: half of
    /// `--max_background_jobs` (at least 1), so matrixkv's background threads follow the same
    /// budget as RocksDB's instead of growing with the machine's cores.
    #[arg(long)]
    pub column_threads: Option<usize>,
    /// matrixkv: container occupancy from which writes are paced (default: the engine's).
    #[arg(long)]
    pub container_slowdown_ratio: Option<f64>,
    /// matrixkv: nice value of the flush and compaction threads (default: the engine's).
    #[arg(long)]
    pub background_nice: Option<i32>,
    /// matrixkv: bytes of each DRAM memtable's bloom filter as a fraction of the write buffer
    /// (`Options::memtable_filter_ratio`; 0 = none; default: the engine's, 1/64).
    #[arg(long)]
    pub memtable_filter_ratio: Option<f64>,
    /// matrixkv: read blob files through read-only mappings (`Options::mmap_blob_reads`).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub mmap_blob_reads: bool,
    /// matrixkv: write compaction outputs (tables, blob files) with O_DIRECT.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    pub direct_writes: bool,
    /// matrixkv and rocksdb-best: bytes of a compaction output after which its writeback is
    /// started (`sync_file_range`; 0 = off). Default: matrixkv's engine default (1 MiB) and
    /// 1 MiB for rocksdb-best (RocksDB's own default, 0, stays on the other RocksDB setups).
    #[arg(long)]
    pub bytes_per_sync: Option<u64>,
    /// matrixkv: separate values into blob files when a memtable is flushed, so that RowTables
    /// hold keys and pointers (`Options::separate_at_flush`; default: the engine's).
    #[arg(long, action = clap::ArgAction::Set)]
    pub separate_at_flush: Option<bool>,
    /// matrixkv: separate large values into the memtable's blob file as they are written, so
    /// the WAL logs pointers and each value is written once (`Options::separate_at_write`,
    /// decision 0028) [default: true].
    #[arg(long, action = clap::ArgAction::Set)]
    pub separate_at_write: Option<bool>,
    /// matrixkv: with separation at write, only values of at least this many bytes go to the
    /// blob file as they are written; smaller ones are logged in the WAL and separated by the
    /// flush (`Options::separate_at_write_min_bytes`; 0: every value of at least
    /// `--min_blob_size`) [default: 2048].
    #[arg(long)]
    pub separate_at_write_min_bytes: Option<usize>,
    /// matrixkv: obsolete WAL segments kept and recycled instead of deleted (0 = always
    /// create new segments; default: the engine's).
    #[arg(long)]
    pub wal_recycle_segments: Option<usize>,
    /// matrixkv-xengine: ROR batch size (writers a commit leader waits for; 1 never waits).
    #[arg(long, default_value_t = 1)]
    pub ror_batch: usize,
    /// matrixkv-xengine: the longest a commit leader waits for its ROR batch, in µs.
    #[arg(long, default_value_t = 100)]
    pub ror_wait_us: u64,
    /// matrixkv-xengine: threads rebuilding the memtables at open (0: one per core).
    #[arg(long, default_value_t = 0)]
    pub recovery_threads: usize,
    /// matrixkv-novelsm: bytes of each persistent memtable's fast-tier region (NoveLSM's
    /// large NVM memtable; the DRAM memtables stay `--write_buffer_size`).
    #[arg(long, default_value_t = 256 << 20)]
    pub persistent_memtable_bytes: u64,
    /// matrixkv-novelsm: point lookups that miss the memtables search the levels in
    /// parallel, a thread per level (NoveLSM's read parallelism).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub parallel_reads: bool,
    /// matrixkv-slmdb: bytes of each persistent memtable (SLM-DB's memtable in PM; the
    /// paper's 64 MB).
    #[arg(long, default_value_t = 64 << 20)]
    pub slmdb_memtable_bytes: u64,
    /// matrixkv-slmdb: bytes of the global index's fast-tier region (sparse).
    #[arg(long, default_value_t = 1 << 30)]
    pub slmdb_index_bytes: u64,
    /// matrixkv-slmdb: live-key ratio below which a table becomes a compaction candidate.
    #[arg(long, default_value_t = 0.7)]
    pub live_key_ratio: f64,
    /// matrixkv-slmdb: tables' worth of index keys each leaf scan covers (0: no leaf scan).
    #[arg(long, default_value_t = 2)]
    pub leaf_scan_tables: u32,
    /// matrixkv-slmdb: distinct tables a leaf scan may meet before they become candidates.
    #[arg(long, default_value_t = 10)]
    pub leaf_scan_threshold: u32,
    /// matrixkv-slmdb: candidates at which selective compaction runs.
    #[arg(long, default_value_t = 8)]
    pub candidate_trigger: u32,
    /// matrixkv-slmdb: tables one selective compaction merges at most.
    #[arg(long, default_value_t = 8)]
    pub max_merge_tables: u32,
    /// matrixkv-slmdb: entries read from tables per sub-range of a scan for the range-query
    /// trigger (0: off).
    #[arg(long, default_value_t = 30)]
    pub scan_window: u32,
    /// matrixkv-slmdb: distinct tables a scan's sub-range may touch before they become
    /// candidates.
    #[arg(long, default_value_t = 8)]
    pub scan_threshold: u32,
    /// matrixkv-lightkv: bytes of each persistent write buffer (LightKV's PWB).
    #[arg(long, default_value_t = 64 << 20)]
    pub lightkv_buffer_bytes: u64,
    /// matrixkv-lightkv: bytes of the RH-tree index's fast-tier region (sparse).
    #[arg(long, default_value_t = 1 << 30)]
    pub lightkv_index_bytes: u64,
    /// matrixkv-lightkv: the paper's compaction size, tables of one merge count that a
    /// partition merges into one.
    #[arg(long, default_value_t = 4)]
    pub compaction_size: u32,
    /// matrixkv-lightkv: the most key-range partitions.
    #[arg(long, default_value_t = 16)]
    pub max_partitions: u32,
    /// matrixkv-lightkv: a partition holding more table bytes than this splits.
    #[arg(long, default_value_t = 1 << 30)]
    pub partition_bytes: u64,
    /// matrixkv: cross-row hint search on/off.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub hints: bool,
    /// Compression: none, lz4, zstd.
    #[arg(long, default_value = "none")]
    pub compression_type: String,
    /// Bloom filter bits per key (0: none).
    #[arg(long, default_value_t = 10)]
    pub bloom_bits: u32,
    /// Block cache capacity in bytes.
    #[arg(long, default_value_t = 64 << 20)]
    pub cache_size: usize,
    /// Sync every write.
    #[arg(long, default_value_t = false)]
    pub sync: bool,
    /// Make every Nth put of each thread of fillrandom, fillseq, overwrite and ycsb_load a
    /// sync write, the others as `--sync` says (0: none). Periodic durability points, as an
    /// application committing every N updates makes; not for db_bench.
    #[arg(long, default_value_t = 0)]
    pub sync_every: u64,
    /// Background thread budget: RocksDB's flushes + compactions (the reference's 2 threads);
    /// matrixkv's column-gathering threads default to half of it.
    #[arg(long, default_value_t = 2)]
    pub max_background_jobs: i32,
    /// RocksDB-L0-fast: bytes of SSTables its first `db_paths` entry (the fast tier) holds.
    #[arg(long, default_value_t = 800 << 20)]
    pub rocksdb_fast_path_bytes: u64,
    /// RocksDB-best: blob GC age cutoff (the oldest share of blob files whose live values
    /// compactions relocate; RocksDB's default is 0.25).
    #[arg(long, default_value_t = 0.25)]
    pub rocksdb_blob_gc_age_cutoff: f64,
    /// RocksDB-best: garbage share of the oldest blob files (within the age cutoff) from which
    /// RocksDB forces the compactions that relocate them (1.0: never forced, RocksDB's default).
    #[arg(long, default_value_t = 0.5)]
    pub rocksdb_blob_gc_force_threshold: f64,
    /// RocksDB-best: the write rate, in bytes per second, RocksDB slows writers to when
    /// compaction falls behind (RocksDB's default is 16 MiB/s without a rate limiter).
    #[arg(long, default_value_t = 128 << 20)]
    pub rocksdb_delayed_write_rate: u64,
    /// RocksDB-best: O_DIRECT for flush and compaction (`use_direct_io_for_flush_and_compaction`).
    /// Off by default: RocksDB's direct writes are synchronous in the flush or compaction
    /// thread, and with them RocksDB-best wrote B1 markedly slower (measured in docs/bench.md).
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    pub rocksdb_direct_io: bool,
    /// RocksDB-best: `level_compaction_dynamic_level_bytes`.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub rocksdb_dynamic_levels: bool,

    /// Also write the summary (the docs/benchmarks.md fields) to this JSON file: an object for one
    /// result, an array for several.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Results directory (command, configuration, JSON, CSV series, plots, report).
    /// Default: bench-results/<UTC timestamp>-<benchmarks>.
    #[arg(long)]
    pub results_dir: Option<PathBuf>,
    /// Write no results directory (stdout and --json only).
    #[arg(long, default_value_t = false)]
    pub no_results_dir: bool,
    /// Write no plots into the results directory.
    #[arg(long, default_value_t = false)]
    pub no_plots: bool,
    /// Progress bar on stderr: auto (when stderr is a terminal), always, never.
    #[arg(long, default_value = "auto")]
    pub progress: String,
    /// Print no line per engine and benchmark on stdout (`matrixkv demo` prints its own
    /// summary of the results).
    #[arg(long, default_value_t = false, hide = true)]
    pub quiet: bool,
    /// db_bench binary for the `db_bench` engine.
    #[arg(long, default_value = "db_bench")]
    pub db_bench_path: PathBuf,
    /// Extra flags passed to db_bench verbatim (space-separated).
    #[arg(long, default_value = "")]
    pub db_bench_extra: String,
}

/// Subcommands of `matrixkv bench`.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum BenchCommand {
    /// Merges results directories into one side-by-side report with plots.
    Report {
        /// Results directories written by `matrixkv bench`.
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// Output directory (default: bench-results/<timestamp>-report).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Parses a saved db_bench output into the report format.
    ParseDbBench {
        /// db_bench's stdout+stderr, as saved.
        file: PathBuf,
        /// Output directory (default: bench-results/<timestamp>-db_bench).
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

/// A parser for `BenchArgs` alone (the demo and tests build their arguments with it).
#[derive(clap::Parser, Debug)]
#[command(name = "bench")]
pub struct BenchCli {
    /// The arguments.
    #[command(flatten)]
    pub args: BenchArgs,
}

impl BenchArgs {
    /// Parses `bench` arguments from words (the first word is the program name).
    pub fn parse_words<I, S>(words: I) -> anyhow::Result<BenchArgs>
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString> + Clone,
    {
        use clap::Parser;
        let words: Vec<OsString> = words.into_iter().map(Into::into).collect();
        Ok(BenchCli::try_parse_from(normalize_flag_spelling(words, 0))?.args)
    }

    /// Operations of read benchmarks and YCSB run phases.
    pub fn reads(&self) -> u64 {
        self.reads.unwrap_or(self.num)
    }

    /// The benchmark names, in order.
    pub fn benchmark_list(&self) -> Vec<String> {
        split_list(&self.benchmarks)
    }
}

/// Splits a comma-separated list, dropping empty items.
pub fn split_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Rewrites `--some-flag` as `--some_flag` in the words after position `from` (db_bench spells
/// flags with underscores; the kebab-case spellings that earlier versions of this command
/// accepted keep working). Values and subcommand words are left alone.
pub fn normalize_flag_spelling(words: Vec<OsString>, from: usize) -> Vec<OsString> {
    words
        .into_iter()
        .enumerate()
        .map(|(i, w)| {
            if i < from {
                return w;
            }
            match w.to_str() {
                Some(s) if s.starts_with("--") && s.len() > 2 => {
                    let (name, rest) = match s.find('=') {
                        Some(p) => s.split_at(p),
                        None => (s, ""),
                    };
                    let fixed = format!("--{}{rest}", name[2..].replace('-', "_"));
                    OsString::from(fixed)
                }
                _ => w,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn db_bench_and_kebab_spellings_parse_alike() {
        let a = BenchArgs::parse_words(["bench", "--value_size=100", "--num", "5"]).unwrap();
        let b = BenchArgs::parse_words(["bench", "--value-size=100", "--num=5"]).unwrap();
        assert_eq!(a.value_size, 100);
        assert_eq!(b.value_size, 100);
        assert_eq!(a.num, 5);
        assert_eq!(a.reads(), 5);
        assert!(a.command.is_none());
    }

    #[test]
    fn values_with_dashes_are_kept() {
        let a = BenchArgs::parse_words(["bench", "--db", "my-dir/x-y", "--engine=rocksdb-ssd"])
            .unwrap();
        assert_eq!(a.db, PathBuf::from("my-dir/x-y"));
        assert_eq!(a.engines, "rocksdb-ssd");
    }

    #[test]
    fn report_subcommand_takes_directories() {
        let a = BenchArgs::parse_words(["bench", "report", "d1", "d2", "--out", "o"]).unwrap();
        match a.command {
            Some(BenchCommand::Report { dirs, out }) => {
                assert_eq!(dirs.len(), 2);
                assert_eq!(out, Some(PathBuf::from("o")));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn benchmark_list_drops_blanks() {
        let a = BenchArgs::parse_words(["bench", "--benchmarks= fillseq,,readseq "]).unwrap();
        assert_eq!(a.benchmark_list(), vec!["fillseq", "readseq"]);
    }
}
