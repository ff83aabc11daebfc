//! The `matrixkv` command line: a demo, a db_bench-style benchmark, inspection commands, and
//! the crash-test writer used by the `kill -9` tests.
#![recursion_limit = "256"] // the JSON summary is one large serde_json::json! literal

mod bench;
mod crash;
mod dump;
mod flags;
mod locate;
mod paper;
mod stats;
mod stress;

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{CommandFactory, Parser, Subcommand};
use matrixkv::{Db, Options};

#[derive(Parser)]
#[command(
    name = "matrixkv",
    version,
    about = "matrixkv: a two-tier LSM key-value store",
    after_help = flags::SPELLING_NOTE
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Writes random keys, then reads random keys, on a database with its fast tier under
    /// /dev/shm (sized to the room there, or in a local folder when /dev/shm is too small) and
    /// its slow tier in ./bench-data; prints what it measured and deletes the database.
    Demo {
        /// Number of writes.
        #[arg(long, default_value_t = 200_000)]
        num: u64,
        /// Value size in bytes.
        #[arg(long, default_value_t = 1024)]
        value_size: usize,
        /// Also print the engine's detail: its options, db_bench's result lines, latency
        /// percentiles, CPU time, stalls, flushes and compactions.
        #[arg(long)]
        verbose: bool,
    },
    /// db_bench-style benchmarks and YCSB on matrixkv (and RocksDB, db_bench), with reports
    /// (see `matrixkv bench --help`, docs/bench.md).
    #[command(after_help = flags::SPELLING_NOTE)]
    Bench(Box<bench::BenchArgs>),
    /// Draws the comparison figures of the MatrixKV paper (Fig. 2/12, 10a–d, 11, 13–17, Tables
    /// 2–3, the cross-row hint experiment) and of the seed designs' papers, with the engine's
    /// designs and RocksDB as the series, one invocation per figure.
    Paper(paper::PaperArgs),
    /// Prints what one file of a database holds (sst, wal, blob) or its manifest, through the
    /// engine's readers; nothing is written.
    #[command(subcommand)]
    Dump(dump::DumpCommand),
    /// Serves a database over the Redis protocol (the same flags as `matrixkv-server`).
    Server(matrixkv_server::ServerArgs),
    /// Draws the levels and the matrix container's rows of a database, from its manifest.
    Layout {
        /// The database directory (slow tier in `<db>/slow`, or `<db>` itself for a
        /// `matrixkv bench` database).
        #[arg(long)]
        db: PathBuf,
        /// The slow tier's directory, if not the one found from `--db`.
        #[arg(long)]
        slow_dir: Option<PathBuf>,
        #[command(flatten)]
        show: dump::Show,
    },
    /// Prints what a database holds: its design, levels and their sizes, the matrix
    /// container's use, blob files and their garbage, an estimate of the keys.
    Stats {
        #[command(flatten)]
        db: DbArgs,
        /// Also print the counters of this open (flushes, compactions, stalls, reads, ...),
        /// which a read-only open starts at zero.
        #[arg(long)]
        counters: bool,
    },
    /// Reads every table completely and checks every checksum and invariant.
    Verify(DbArgs),
    /// Prints a property (`matrixkv.levelstats`, ...); `--list` prints every name.
    Property {
        /// Database directory (found as `--db` of the other commands: `<db>/fast` and
        /// `<db>/slow`, or a `matrixkv bench` database).
        #[arg(long, required_unless_present = "list")]
        db: Option<PathBuf>,
        /// Fast-tier directory.
        #[arg(long)]
        fast_dir: Option<PathBuf>,
        /// The property name.
        #[arg(required_unless_present = "list")]
        name: Option<String>,
        /// Lists the property names with what each means (no database needed).
        #[arg(long)]
        list: bool,
        #[command(flatten)]
        keyspaces: KeyspaceOptionArgs,
    },
    /// Compacts a key range (or everything) down to the deepest level and waits for it. In a
    /// keyspace other than `default`, the range is of its keys (or the whole keyspace); in
    /// `default`, no range compacts the whole database, every keyspace.
    Compact {
        #[command(flatten)]
        db: DbArgs,
        #[command(flatten)]
        keyspace: KeyspaceArg,
        /// First key of the range (inclusive; default: the first key).
        #[arg(long)]
        from: Option<String>,
        /// Last key of the range (inclusive; default: the last key).
        #[arg(long)]
        to: Option<String>,
    },
    /// Incremental backups of a database into a directory: create, list, verify, restore,
    /// purge.
    #[command(subcommand)]
    Backup(BackupCommand),
    /// Writes an openable, consistent copy of a database (every write acknowledged before the
    /// command; tables and blob files hard-linked where possible, the container's live rows
    /// exported). Open it with `--db <to>` (and `--fast-dir <to-fast-dir>` if given).
    Checkpoint {
        #[command(flatten)]
        db: DbArgs,
        /// Directory of the checkpoint (slow tier in `<to>/slow`; must not exist or be empty).
        #[arg(long)]
        to: PathBuf,
        /// Fast-tier directory of the checkpoint (default `<to>/fast`).
        #[arg(long)]
        to_fast_dir: Option<PathBuf>,
    },
    /// Prints the value of a key.
    Get {
        #[command(flatten)]
        db: DbArgs,
        #[command(flatten)]
        keyspace: KeyspaceArg,
        /// The key.
        key: String,
    },
    /// Sets a key (synced).
    Put {
        #[command(flatten)]
        db: DbArgs,
        #[command(flatten)]
        keyspace: KeyspaceArg,
        /// The key.
        key: String,
        /// The value.
        value: String,
    },
    /// Merges an operand into a key (synced) with `--merge-operator` (`u64add` takes a decimal
    /// number and stores it as an 8-byte counter increment; `append` appends the text); in a
    /// keyspace other than `default`, with its `--keyspace-merge-operator NAME=OPERATOR`.
    Merge {
        #[command(flatten)]
        db: DbArgs,
        #[command(flatten)]
        keyspace: KeyspaceArg,
        /// The key.
        key: String,
        /// The operand.
        operand: String,
    },
    /// Deletes a key (synced).
    Delete {
        #[command(flatten)]
        db: DbArgs,
        #[command(flatten)]
        keyspace: KeyspaceArg,
        /// The key.
        key: String,
    },
    /// Deletes every key in [FROM, TO) with one range tombstone (synced).
    DeleteRange {
        #[command(flatten)]
        db: DbArgs,
        #[command(flatten)]
        keyspace: KeyspaceArg,
        /// First key deleted.
        from: String,
        /// First key kept after the range (exclusive).
        to: String,
    },
    /// Prints keys and values in order.
    Scan {
        #[command(flatten)]
        db: DbArgs,
        #[command(flatten)]
        keyspace: KeyspaceArg,
        /// First key (inclusive).
        #[arg(long)]
        from: Option<String>,
        /// Maximum number of entries.
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Prints the write batches committed from a sequence number on, read from the WAL: one
    /// line per batch with its first sequence number, its operation count and its operations
    /// (`put "key"`, `delete "key"`, `merge "key"`, `delete-range "from" "to"`, keys escaped;
    /// an operation in a keyspace other than `default` names its id, `put@1 "key"`, and the
    /// deletion of a dropped keyspace's keys reads `drop-keyspace@1`). Writers committed
    /// together share a line.
    Updates {
        #[command(flatten)]
        db: DbArgs,
        /// First sequence number wanted (the line of the batch holding it comes first).
        #[arg(long)]
        since: u64,
        /// Most batches printed (default: all).
        #[arg(long)]
        limit: Option<usize>,
        /// Obsolete WAL segments kept at this open (`Options::wal_retention_segments`). The
        /// default keeps every one the database retained, so looking drops no history.
        #[arg(long, default_value_t = matrixkv::MAX_WAL_RETENTION_SEGMENTS)]
        wal_retention_segments: usize,
    },
    /// Creates, drops and lists keyspaces (RocksDB's column families): named sets of keys with
    /// their own merge operator and TTL, which the key commands reach with `--keyspace NAME`.
    #[command(subcommand)]
    Keyspace(KeyspaceCommand),
    /// Writes keys in a loop and prints each acknowledged write (crash tests).
    #[command(hide = true)]
    CrashWriter(crash::CrashWriterArgs),
    /// Stress test with random options and a crash driver (db_stress/db_crashtest): threads
    /// write and read, every answer checked against an expected state that survives kill -9.
    Stress(stress::StressArgs),
}

/// `matrixkv keyspace ...`.
#[derive(Subcommand)]
enum KeyspaceCommand {
    /// Creates a keyspace. Its options are not stored: every later command on the database
    /// gives them again, `--keyspace-ttl NAME=SECS` (required for a keyspace created with a
    /// TTL) and `--keyspace-merge-operator NAME=OPERATOR`.
    #[command(mut_arg("merge_operator", |a| a.help(
        "Merge operator of the new keyspace: `u64add` (8-byte little-endian counters) or \
         `append` (comma-separated); the default keyspace is opened without one"
    )))]
    Create {
        #[command(flatten)]
        db: DbArgs,
        /// The new keyspace's name.
        name: String,
        /// Time to live of the keyspace's values, in seconds (at least 1). Whether a keyspace
        /// has a TTL is fixed at creation; one with a TTL refuses merges.
        #[arg(long)]
        ttl_secs: Option<u64>,
        /// Compression of the keyspace's SSTable blocks: none, lz4 or zstd (default: the
        /// database's). Give it again as `--keyspace-compression NAME=CODEC` to the commands
        /// that write, or compactions they run write the keyspace's blocks uncompressed.
        #[arg(long)]
        compression: Option<matrixkv::Compression>,
    },
    /// Drops a keyspace: every key of it is deleted (its space is reclaimed as compaction
    /// passes over it) and its name is free again.
    Drop {
        #[command(flatten)]
        db: DbArgs,
        /// The keyspace's name.
        name: String,
    },
    /// Prints the keyspaces, one line each: id and name, `default` (id 0) first, then in
    /// creation order. `updates` names keyspaces by id.
    List(DbArgs),
}

/// Runs `matrixkv keyspace ...`.
#[allow(clippy::print_stdout)]
fn keyspace(cmd: KeyspaceCommand) -> Result<()> {
    match cmd {
        KeyspaceCommand::Create {
            db,
            name,
            ttl_secs,
            compression,
        } => {
            let opts = matrixkv::KeyspaceOptions {
                merge_operator: db.merge_operator.as_deref().and_then(merge_operator),
                ttl: ttl_secs.map(std::time::Duration::from_secs),
                compression,
                ..matrixkv::KeyspaceOptions::default()
            };
            // `--merge-operator` is the new keyspace's here, not the default keyspace's.
            let db = db.open_with(|o| o.merge_operator = None)?;
            let ks = db
                .create_keyspace(&name, opts)
                .with_context(|| format!("creating keyspace {name:?}"))?;
            println!("keyspace {name:?} created with id {}", ks.id());
            db.close()?;
        }
        KeyspaceCommand::Drop { db, name } => {
            let db = db.open()?;
            db.drop_keyspace(&name)
                .with_context(|| format!("dropping keyspace {name:?}"))?;
            db.close()?;
        }
        KeyspaceCommand::List(db) => {
            let db = db.open_read_only()?;
            for name in db.list_keyspaces() {
                println!("{}\t{name}", db.keyspace(&name)?.id());
            }
            db.close()?;
        }
    }
    Ok(())
}

/// `matrixkv backup ...`.
#[derive(Subcommand)]
enum BackupCommand {
    /// Backs up a database (copies only the tables and blob files the directory lacks).
    Create {
        #[command(flatten)]
        db: DbArgs,
        /// The backup directory.
        #[arg(long)]
        backup_dir: PathBuf,
    },
    /// Lists the backups in a directory.
    List {
        /// The backup directory.
        #[arg(long)]
        backup_dir: PathBuf,
    },
    /// Checks every file of a backup (the newest if no id is given) against its checksum.
    Verify {
        /// The backup directory.
        #[arg(long)]
        backup_dir: PathBuf,
        /// The backup's id.
        #[arg(long)]
        id: Option<u64>,
    },
    /// Restores a backup (the newest if no id is given) into empty directories; open the
    /// result with `--db <to>`.
    Restore {
        /// The backup directory.
        #[arg(long)]
        backup_dir: PathBuf,
        /// The backup's id.
        #[arg(long)]
        id: Option<u64>,
        /// Database directory to restore into (slow tier in `<to>/slow`).
        #[arg(long)]
        to: PathBuf,
        /// Fast-tier directory to restore into (default `<to>/fast`).
        #[arg(long)]
        to_fast_dir: Option<PathBuf>,
    },
    /// Deletes all backups but the newest `--keep`.
    Purge {
        /// The backup directory.
        #[arg(long)]
        backup_dir: PathBuf,
        /// Backups to keep.
        #[arg(long)]
        keep: usize,
    },
}

/// Runs `matrixkv backup ...`.
#[allow(clippy::print_stdout)]
fn backup(cmd: BackupCommand) -> Result<()> {
    use matrixkv::BackupEngine;
    let open = |dir: &PathBuf| {
        BackupEngine::open(dir).with_context(|| format!("opening backups in {}", dir.display()))
    };
    let newest = |e: &BackupEngine, id: Option<u64>| -> Result<u64> {
        match id {
            Some(id) => Ok(id),
            None => e
                .list()?
                .last()
                .map(|b| b.id)
                .context("the backup directory holds no backup"),
        }
    };
    match cmd {
        BackupCommand::Create { db, backup_dir } => {
            let engine = open(&backup_dir)?;
            let db = db.open()?;
            let b = engine.create_backup(&db)?;
            println!(
                "backup {} at sequence {} in {:.3} s: {} files, {} bytes, {} bytes new",
                b.id,
                b.sequence.0,
                b.micros as f64 / 1e6,
                b.files,
                b.bytes,
                b.new_bytes
            );
            db.close()?;
        }
        BackupCommand::List { backup_dir } => {
            for b in open(&backup_dir)?.list()? {
                println!(
                    "{}\tsequence {}\tcreated {} ms\t{} files\t{} bytes",
                    b.id, b.sequence.0, b.created_unix_ms, b.files, b.bytes
                );
            }
        }
        BackupCommand::Verify { backup_dir, id } => {
            let engine = open(&backup_dir)?;
            let id = newest(&engine, id)?;
            engine.verify(id)?;
            println!("backup {id}: ok");
        }
        BackupCommand::Restore {
            backup_dir,
            id,
            to,
            to_fast_dir,
        } => {
            let engine = open(&backup_dir)?;
            let id = newest(&engine, id)?;
            let mut target = Options::new(&to);
            if let Some(f) = to_fast_dir {
                target.fast_dir = f;
            }
            let t = std::time::Instant::now();
            engine
                .restore(id, target)
                .with_context(|| format!("restoring backup {id} into {}", to.display()))?;
            println!(
                "backup {id} restored into {} in {:.3} s",
                to.display(),
                t.elapsed().as_secs_f64()
            );
        }
        BackupCommand::Purge { backup_dir, keep } => {
            let purged = open(&backup_dir)?.purge_old_backups(keep)?;
            println!("purged {purged:?}");
        }
    }
    Ok(())
}

/// The keyspace a command reads or writes.
#[derive(clap::Args, Clone)]
struct KeyspaceArg {
    /// Keyspace to read or write (see `matrixkv keyspace`); one the database does not have
    /// is an error naming those it has.
    #[arg(long = "keyspace", value_name = "NAME", default_value = matrixkv::DEFAULT_KEYSPACE)]
    name: String,
}

/// Where a database lives.
#[derive(clap::Args, Clone)]
struct DbArgs {
    /// Database directory: fast tier in `<db>/fast`, slow tier in `<db>/slow`; or a database
    /// `matrixkv bench --use_existing_db` kept, `<bench --db>/<engine>`, whose fast tier it
    /// names.
    #[arg(long)]
    db: PathBuf,
    /// Fast-tier directory, if not the one found from `--db`.
    #[arg(long)]
    fast_dir: Option<PathBuf>,
    /// Slow-tier directory, if not the one found from `--db`.
    #[arg(long)]
    slow_dir: Option<PathBuf>,
    /// Merge operator to open with, for databases that hold merge operands: `u64add` (8-byte
    /// little-endian counters) or `append` (comma-separated).
    #[arg(long, value_parser = MERGE_OPERATORS)]
    merge_operator: Option<String>,
    #[command(flatten)]
    keyspaces: KeyspaceOptionArgs,
}

/// The names `--merge-operator` takes.
const MERGE_OPERATORS: [&str; 2] = ["u64add", "append"];

/// The merge operator named `name` (one of [`MERGE_OPERATORS`]).
fn merge_operator(name: &str) -> Option<std::sync::Arc<dyn matrixkv::MergeOperator>> {
    match name {
        "u64add" => Some(std::sync::Arc::new(matrixkv::U64AddOperator)),
        "append" => Some(std::sync::Arc::new(matrixkv::AppendOperator::new(b","))),
        _ => None,
    }
}

/// The options of the keyspaces a database holds, which the engine does not store: every open
/// gives them again (`Options::keyspace_options`).
#[derive(clap::Args, Clone)]
struct KeyspaceOptionArgs {
    /// Time to live of keyspace NAME's values, in seconds (repeatable). A keyspace created
    /// with a TTL must be given one at every open, by every command (the duration may
    /// change); one created without must not.
    #[arg(long, value_name = "NAME=SECS", value_parser = parse_keyspace_ttl)]
    keyspace_ttl: Vec<(String, u64)>,
    /// Merge operator of keyspace NAME, `u64add` or `append` (repeatable); a keyspace opened
    /// without one refuses merges and cannot read merged keys. `--merge-operator` is the
    /// default keyspace's.
    #[arg(long, value_name = "NAME=OPERATOR", value_parser = parse_keyspace_merge_operator)]
    keyspace_merge_operator: Vec<(String, String)>,
    /// Compression of keyspace NAME's SSTable blocks, `none`, `lz4` or `zstd` (repeatable;
    /// default: the database's).
    #[arg(long, value_name = "NAME=CODEC", value_parser = parse_keyspace_compression)]
    keyspace_compression: Vec<(String, matrixkv::Compression)>,
}

/// Parses `--keyspace-compression NAME=CODEC`.
fn parse_keyspace_compression(s: &str) -> Result<(String, matrixkv::Compression), String> {
    let (name, codec) = keyspace_and_value(s)?;
    let codec = codec
        .parse::<matrixkv::Compression>()
        .map_err(|e| e.to_string())?;
    Ok((name, codec))
}

/// Splits `NAME=VALUE` (the option of a keyspace other than the default one).
fn keyspace_and_value(s: &str) -> Result<(String, &str), String> {
    let (name, value) = s
        .split_once('=')
        .ok_or_else(|| format!("expected NAME=VALUE, got {s:?}"))?;
    if name == matrixkv::DEFAULT_KEYSPACE {
        return Err(
            "the default keyspace takes the database's options (`--merge-operator`)".to_owned(),
        );
    }
    Ok((name.to_owned(), value))
}

/// Parses `--keyspace-ttl NAME=SECS`.
fn parse_keyspace_ttl(s: &str) -> Result<(String, u64), String> {
    let (name, secs) = keyspace_and_value(s)?;
    match secs.parse::<u64>() {
        Ok(secs) if secs >= 1 => Ok((name, secs)),
        _ => Err(format!(
            "the TTL is a whole number of seconds, at least 1, not {secs:?}"
        )),
    }
}

/// Parses `--keyspace-merge-operator NAME=OPERATOR`.
fn parse_keyspace_merge_operator(s: &str) -> Result<(String, String), String> {
    let (name, op) = keyspace_and_value(s)?;
    if !MERGE_OPERATORS.contains(&op) {
        return Err(format!(
            "the merge operator is one of {MERGE_OPERATORS:?}, not {op:?}"
        ));
    }
    Ok((name, op.to_owned()))
}

impl KeyspaceOptionArgs {
    /// Puts the keyspaces' options into `o`.
    fn apply(&self, o: &mut Options) {
        for (name, secs) in &self.keyspace_ttl {
            o.keyspace_options.entry(name.clone()).or_default().ttl =
                Some(std::time::Duration::from_secs(*secs));
        }
        for (name, op) in &self.keyspace_merge_operator {
            o.keyspace_options
                .entry(name.clone())
                .or_default()
                .merge_operator = merge_operator(op);
        }
        for (name, codec) in &self.keyspace_compression {
            o.keyspace_options
                .entry(name.clone())
                .or_default()
                .compression = Some(*codec);
        }
    }
}

impl DbArgs {
    fn open(&self) -> Result<Db> {
        self.open_with(|_| {})
    }

    /// Opens the database read-only (`Db::open_read_only`): for the commands that only look.
    /// The parameters fixed at creation come from the database (a bench database opens), and
    /// nothing on disk changes.
    fn open_read_only(&self) -> Result<Db> {
        self.open_mode(true, |_| {})
    }

    /// Opens the database with the options `adjust` changes.
    fn open_with(&self, adjust: impl FnOnce(&mut Options)) -> Result<Db> {
        self.open_mode(false, adjust)
    }

    /// Where the tiers are (see `locate`): an error naming what is missing when no database
    /// is there.
    fn locate(&self) -> Result<locate::Located> {
        locate::existing(&self.db, self.fast_dir.as_deref(), self.slow_dir.as_deref())
    }

    fn open_mode(&self, read_only: bool, adjust: impl FnOnce(&mut Options)) -> Result<Db> {
        let at = self.locate()?;
        let mut o = Options::new(&self.db);
        o.fast_dir = at.fast_dir;
        o.slow_dir = at.slow_dir;
        o.merge_operator = self.merge_operator.as_deref().and_then(merge_operator);
        self.keyspaces.apply(&mut o);
        o.create_if_missing = false;
        adjust(&mut o);
        let opened = if read_only {
            Db::open_read_only(o)
        } else {
            Db::open(o)
        };
        // The engine's message says which keyspace; say which flag fixes it.
        let hint = match &opened {
            Err(matrixkv::Error::OptionMismatch {
                option: "keyspace ttl",
                ..
            }) => {
                " (a keyspace created with a TTL is opened with `--keyspace-ttl NAME=SECS`, \
                 one created without it is opened without)"
            }
            _ => "",
        };
        opened.with_context(|| format!("opening {}{hint}", self.db.display()))
    }

    /// The merge operator keyspace `name` is opened with (`--merge-operator` for the default
    /// keyspace, `--keyspace-merge-operator` for the others).
    fn merge_operator_of(&self, name: &str) -> Option<&str> {
        if name == matrixkv::DEFAULT_KEYSPACE {
            return self.merge_operator.as_deref();
        }
        // The last flag for a keyspace is the one `KeyspaceOptionArgs::apply` keeps.
        self.keyspaces
            .keyspace_merge_operator
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, op)| op.as_str())
    }
}

/// One line of `matrixkv updates`: `<first sequence> <operation count> <operations>`.
fn update_line(seq: matrixkv::SeqNo, batch: &matrixkv::WriteBatch) -> String {
    let mut line = format!("{} {}", seq.0, batch.len());
    for (keyspace, op) in batch.iter_with_keyspace() {
        // The id of the keyspace, for those other than the default one.
        let at = match keyspace {
            0 => String::new(),
            id => format!("@{id}"),
        };
        let (kind, key) = match op {
            matrixkv::BatchOp::Put { key, .. } => ("put", key),
            matrixkv::BatchOp::Delete { key } => ("delete", key),
            matrixkv::BatchOp::Merge { key, .. } => ("merge", key),
            // What `drop_keyspace` writes: no range a user writes is empty.
            matrixkv::BatchOp::DeleteRange { start: [], end: [] } if keyspace != 0 => {
                line.push_str(&format!(" drop-keyspace{at}"));
                continue;
            }
            matrixkv::BatchOp::DeleteRange { start, end } => {
                line.push_str(&format!(
                    " delete-range{at} \"{}\" \"{}\"",
                    start.escape_ascii(),
                    end.escape_ascii()
                ));
                continue;
            }
            other => {
                line.push_str(&format!(" {other:?}{at}"));
                continue;
            }
        };
        line.push_str(&format!(" {kind}{at} \"{}\"", key.escape_ascii()));
    }
    line
}

#[allow(clippy::print_stdout)]
fn main() -> Result<()> {
    // `bench` spells flags as db_bench does (underscores), the others with hyphens: each takes
    // both spellings.
    let words = flags::normalize(&Cli::command(), std::env::args_os().collect());
    let cli = Cli::parse_from(words);
    match cli.command {
        Command::Demo {
            num,
            value_size,
            verbose,
        } => bench::demo::run(num, value_size, verbose),
        Command::Bench(args) => bench::run(&args),
        Command::Paper(args) => paper::run(&args),
        Command::Dump(cmd) => dump::run(cmd),
        Command::Server(args) => matrixkv_server::run_blocking(args),
        Command::Layout { db, slow_dir, show } => dump::layout(&db, slow_dir.as_ref(), show),
        Command::Stats { db, counters } => {
            let at = db.locate()?;
            let db = db.open_read_only()?;
            print!("{}", stats::content(&db, &at, counters)?);
            db.close()?;
            Ok(())
        }
        Command::Property {
            db,
            fast_dir,
            name,
            list,
            keyspaces,
        } => {
            if list {
                for n in matrixkv::PROPERTY_NAMES {
                    let what = matrixkv::property::describe(n).unwrap_or_default();
                    println!("{n}\t{what}");
                }
                return Ok(());
            }
            let db = DbArgs {
                db: db.unwrap_or_default(),
                fast_dir,
                slow_dir: None,
                merge_operator: None,
                keyspaces,
            }
            .open_read_only()?;
            let value = db.get_property(name.as_deref().unwrap_or_default())?;
            println!("{}", value.trim_end());
            db.close()?;
            Ok(())
        }
        Command::Compact {
            db,
            keyspace,
            from,
            to,
        } => {
            let db = db.open()?;
            let t = std::time::Instant::now();
            let (from, to) = (
                from.as_deref().map(str::as_bytes),
                to.as_deref().map(str::as_bytes),
            );
            if keyspace.name == matrixkv::DEFAULT_KEYSPACE {
                db.compact_range(from, to)?;
            } else {
                db.keyspace(&keyspace.name)?.compact_range(from, to)?;
            }
            println!(
                "compacted in {:.2} s\n{}",
                t.elapsed().as_secs_f64(),
                db.get_property("matrixkv.levelstats")?.trim_end()
            );
            db.close()?;
            Ok(())
        }
        Command::Backup(cmd) => backup(cmd),
        Command::Keyspace(cmd) => keyspace(cmd),
        Command::Checkpoint {
            db,
            to,
            to_fast_dir,
        } => {
            let db = db.open()?;
            let mut target = Options::new(&to);
            if let Some(f) = to_fast_dir {
                target.fast_dir = f;
            }
            let info = db
                .checkpoint_to(target)
                .with_context(|| format!("checkpoint into {}", to.display()))?;
            println!(
                "checkpoint at sequence {} in {:.3} s: {} files hard-linked, {} copied ({} bytes), \
                 {} container pages exported",
                info.sequence.0,
                info.micros as f64 / 1e6,
                info.linked_files,
                info.copied_files,
                info.copied_bytes,
                info.container_pages
            );
            db.close()?;
            Ok(())
        }
        Command::Verify(db) => {
            let db = db.open_read_only()?;
            let n = db.verify()?;
            println!("ok: {n} tables verified");
            db.close()?;
            Ok(())
        }
        Command::Get { db, keyspace, key } => {
            let counter = db.merge_operator_of(&keyspace.name) == Some("u64add");
            let db = db.open_read_only()?;
            match db.keyspace(&keyspace.name)?.get(key.as_bytes())? {
                // A u64add counter reads as its number.
                Some(v) if counter && v.len() == 8 => {
                    let n = u64::from_le_bytes(v.as_slice().try_into().unwrap_or_default());
                    println!("{n}");
                }
                Some(v) => println!("{}", String::from_utf8_lossy(&v)),
                None => println!("(not found)"),
            }
            db.close()?;
            Ok(())
        }
        Command::Put {
            db,
            keyspace,
            key,
            value,
        } => {
            let db = db.open()?;
            db.keyspace(&keyspace.name)?.put_opt(
                key.as_bytes(),
                value.as_bytes(),
                &matrixkv::WriteOptions { sync: true },
            )?;
            db.close()?;
            Ok(())
        }
        Command::Merge {
            db,
            keyspace,
            key,
            operand,
        } => {
            let bytes = match db.merge_operator_of(&keyspace.name) {
                Some("u64add") => operand
                    .parse::<u64>()
                    .context("u64add takes a decimal number")?
                    .to_le_bytes()
                    .to_vec(),
                Some(_) => operand.into_bytes(),
                None if keyspace.name == matrixkv::DEFAULT_KEYSPACE => {
                    anyhow::bail!("merge needs --merge-operator (u64add or append)")
                }
                None => anyhow::bail!(
                    "merge into keyspace {0:?} needs --keyspace-merge-operator {0}=u64add or \
                     {0}=append",
                    keyspace.name
                ),
            };
            let db = db.open()?;
            db.keyspace(&keyspace.name)?.merge_opt(
                key.as_bytes(),
                &bytes,
                &matrixkv::WriteOptions { sync: true },
            )?;
            db.close()?;
            Ok(())
        }
        Command::Delete { db, keyspace, key } => {
            let db = db.open()?;
            db.keyspace(&keyspace.name)?
                .delete_opt(key.as_bytes(), &matrixkv::WriteOptions { sync: true })?;
            db.close()?;
            Ok(())
        }
        Command::DeleteRange {
            db,
            keyspace,
            from,
            to,
        } => {
            let db = db.open()?;
            db.keyspace(&keyspace.name)?.delete_range_opt(
                from.as_bytes(),
                to.as_bytes(),
                &matrixkv::WriteOptions { sync: true },
            )?;
            db.close()?;
            Ok(())
        }
        Command::Scan {
            db,
            keyspace,
            from,
            limit,
        } => {
            let db = db.open_read_only()?;
            {
                let mut it = db.keyspace(&keyspace.name)?.iter()?;
                match &from {
                    Some(f) => it.seek(f.as_bytes())?,
                    None => it.seek_to_first()?,
                }
                let mut n = 0;
                while it.valid() && n < limit {
                    println!(
                        "{} => {}",
                        String::from_utf8_lossy(it.key()),
                        String::from_utf8_lossy(it.value())
                    );
                    it.next()?;
                    n += 1;
                }
            }
            db.close()?;
            Ok(())
        }
        Command::Updates {
            db,
            since,
            limit,
            wal_retention_segments,
        } => {
            let db = db.open_with(|o| o.wal_retention_segments = wal_retention_segments)?;
            {
                let updates = db
                    .updates_since(matrixkv::SeqNo(since))
                    .with_context(|| format!("updates since sequence number {since}"))?;
                for update in updates.take(limit.unwrap_or(usize::MAX)) {
                    let (seq, batch) = update?;
                    println!("{}", update_line(seq, &batch));
                }
            }
            db.close()?;
            Ok(())
        }
        Command::CrashWriter(args) => crash::run(&args),
        Command::Stress(args) => stress::run(&args),
    }
}
