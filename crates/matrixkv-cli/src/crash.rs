//! The crash-test writer: writes key `k<n>` = value derived from `n` for n = start, start+1, …
//! and prints `ack <n>` after each acknowledged write, so a parent that kills it with SIGKILL
//! knows which writes must survive (contract C1). Every write also sets the key `latest` to
//! `n`, in the same batch: a lost write or an older write replayed after a newer one (say from
//! a recycled WAL segment) shows as a wrong `latest`. Every write also merges 1 into the u64
//! counter `count` (`U64AddOperator`): after a crash it must equal `latest + 1`, so a merge
//! operand lost, applied twice or folded wrongly by a compaction shows too.
//!
//! Every write also puts `d<n>`, and every 50th (n % 50 == 49) deletes the range
//! `[d<n-49>, d<n-9>)` in the same batch: after a crash exactly the applied ranges are gone.
//! And every write puts `k<n>` = `n` and merges 1 into `count` in the keyspace [`MIRROR`]
//! (its own `U64AddOperator`): the batch spans two keyspaces, atomically.
//!
//! Every 64th write is followed by `Db::sync_wal`, so kills also land in and around it.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use matrixkv::{Db, KeyspaceOptions, Options, WriteBatch, WriteOptions};

/// Arguments of `matrixkv crash-writer`.
#[derive(clap::Args)]
pub struct CrashWriterArgs {
    /// Database directory.
    #[arg(long)]
    db: PathBuf,
    /// First key number to write.
    #[arg(long, default_value_t = 0)]
    start: u64,
    /// Memtable size (small values force flushes and compactions).
    #[arg(long, default_value_t = 256 << 10)]
    write_buffer_bytes: usize,
    /// Value size.
    #[arg(long, default_value_t = 200)]
    value_size: usize,
    /// Sync every write.
    #[arg(long)]
    sync: bool,
    /// The engine's design (`matrixkv`, `xengine`, `novelsm`, `slmdb` or `lightkv`), fixed when
    /// the database is created.
    #[arg(long, default_value = "matrixkv")]
    design: String,
    /// Separate values into blob files at flush (`Options::separate_at_flush`).
    #[arg(long)]
    separate_at_flush: bool,
    /// Separate values into blob files as they are written (`Options::separate_at_write`).
    #[arg(long)]
    separate_at_write: bool,
    /// With `--separate-at-write`, only values of at least this many bytes
    /// (`Options::separate_at_write_min_bytes`); smaller ones are logged in the WAL. Unlike the
    /// library's default (2 KiB), absent means every separable value, so the crash tests' small
    /// values take the write path's appends.
    #[arg(long)]
    separate_at_write_min_bytes: Option<usize>,
}

/// The key every write sets to its number.
pub const LATEST: &str = "latest";

/// The u64 counter every write adds 1 to (a merge).
pub const COUNT: &str = "count";

/// The keyspace every write mirrors its key and counter into.
pub const MIRROR: &str = "mirror";

/// The options of keyspace [`MIRROR`].
pub fn mirror_options() -> KeyspaceOptions {
    KeyspaceOptions {
        merge_operator: Some(std::sync::Arc::new(matrixkv::U64AddOperator)),
        ..KeyspaceOptions::default()
    }
}

/// The range deletion the batch of write `n` carries, if any: `[d<n-49>, d<n-9>)`.
pub fn range_deleted_by(n: u64) -> Option<(String, String)> {
    (n % 50 == 49).then(|| (format!("d{:012}", n - 49), format!("d{:012}", n - 9)))
}

/// The value written for key number `n`.
pub fn value_for(n: u64, size: usize) -> Vec<u8> {
    let mut v = format!("v{n}:").into_bytes();
    while v.len() < size {
        v.push(b'a' + (n % 26) as u8);
    }
    v
}

/// The SLM-DB knobs of the crash writer (and of the test that checks its database).
pub fn slmdb_knobs(write_buffer_bytes: usize) -> matrixkv::SlmDbOptions {
    matrixkv::SlmDbOptions {
        persistent_memtable_bytes: 4 * write_buffer_bytes as u64,
        index_bytes: 64 << 20,
        leaf_scan_threshold: 3,
        candidate_trigger: 3,
        max_merge_tables: 4,
        ..matrixkv::SlmDbOptions::default()
    }
}

/// The LightKV knobs of the crash writer (and of the test that checks its database): small
/// partitions and a compaction size of 2, so kills land in flushes cut at partition bounds,
/// partition merges and splits.
pub fn lightkv_knobs(write_buffer_bytes: usize) -> matrixkv::LightKvOptions {
    matrixkv::LightKvOptions {
        write_buffer_bytes: 4 * write_buffer_bytes as u64,
        index_bytes: 64 << 20,
        compaction_size: 2,
        max_partitions: 8,
        partition_bytes: 2 << 20,
    }
}

/// The crash writer's matrix container size for its memtable size (fixed when the database
/// is created, so the test that checks the database opens it with the same).
pub fn container_bytes(write_buffer_bytes: usize) -> u64 {
    (4u64 << 20).max(4 * write_buffer_bytes as u64)
}

pub fn run(args: &CrashWriterArgs) -> Result<()> {
    let mut o = Options::new(&args.db);
    o.design = args
        .design
        .parse::<matrixkv::Design>()
        .map_err(anyhow::Error::msg)?;
    o.write_buffer_bytes = args.write_buffer_bytes;
    if let matrixkv::Design::NoveLsm(n) = &mut o.design {
        // Persistent memtables that fill and flush within a kill cycle.
        n.persistent_memtable_bytes = 4 * args.write_buffer_bytes as u64;
    }
    if let matrixkv::Design::SlmDb(d) = &mut o.design {
        // Persistent memtables that fill and flush within a kill cycle, and selective
        // compactions that run all the time: kills land in index commits of both.
        *d = slmdb_knobs(args.write_buffer_bytes);
        o.l0_layout = matrixkv::L0Layout::Tables;
    }
    if let matrixkv::Design::LightKv(d) = &mut o.design {
        *d = lightkv_knobs(args.write_buffer_bytes);
        o.l0_layout = matrixkv::L0Layout::Tables;
    }
    o.separate_at_flush = args.separate_at_flush;
    o.separate_at_write = args.separate_at_write;
    o.separate_at_write_min_bytes = args.separate_at_write_min_bytes;
    o.l0_compaction_trigger = 2;
    o.l1_target_bytes = 1 << 20;
    o.target_file_bytes = 256 << 10;
    // A small matrix container so that kills land in role switches and column compactions
    // (it must hold four memtables).
    o.container_bytes = container_bytes(args.write_buffer_bytes);
    o.column_lower_bytes = Some(256 << 10);
    o.column_upper_bytes = Some(1 << 20);
    // The `k` values (200 B by default) are separated into small blob files when they leave
    // L0, the `b` values (8 B) stay inline: kills land in blob writes and relocations too.
    o.min_blob_bytes = Some(100);
    o.blob_file_bytes = 64 << 10;
    o.blob_gc_ratio = 0.3;
    // Blob GC jobs run whenever garbage passes a tenth of the live records: kills land in
    // them too.
    o.blob_space_budget = 1.1;
    // Tables and blob files through O_DIRECT (tier/direct.rs): kills land in its buffered
    // tails and I/O threads too.
    o.direct_writes = true;
    o.merge_operator = Some(std::sync::Arc::new(matrixkv::U64AddOperator));
    o.keyspace_options.insert(MIRROR.into(), mirror_options());
    let db = Db::open(o)?;
    let mirror = match db.keyspace(MIRROR) {
        Ok(m) => m,
        Err(_) => db.create_keyspace(MIRROR, mirror_options())?,
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    writeln!(out, "ready")?;
    out.flush()?;
    let wo = WriteOptions { sync: args.sync };
    let mut n = args.start;
    loop {
        // Every third write has a third key, to check batch atomicity after a crash.
        let mut b = WriteBatch::new();
        b.put(format!("k{n:012}"), value_for(n, args.value_size));
        if n.is_multiple_of(3) {
            b.put(format!("b{n:012}"), value_for(n, 8));
        }
        b.put(format!("d{n:012}"), "x");
        if let Some((start, end)) = range_deleted_by(n) {
            b.delete_range(start, end);
        }
        b.put_cf(&mirror, format!("k{n:012}"), n.to_string());
        b.merge_cf(&mirror, COUNT, 1u64.to_le_bytes());
        b.put(LATEST, n.to_string());
        b.merge(COUNT, 1u64.to_le_bytes());
        db.write_opt(b, &wo)?;
        if n % 64 == 63 {
            db.sync_wal()?;
        }
        writeln!(out, "ack {n}")?;
        out.flush()?;
        n += 1;
    }
}
