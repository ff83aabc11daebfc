//! The fjall peer (feature `fjall`: crate `fjall` 3.x, the pure-Rust LSM with key-value
//! separation), engine `fjall`: one keyspace with fjall's key-value separation on, configured
//! from the shared flags as far as fjall has the knob (the table below is also what
//! [`Engine::describe`] prints; docs/bench.md has it too):
//!
//! | flag | fjall setting |
//! |---|---|
//! | `--min_blob_size` | `KvSeparationOptions::separation_threshold` |
//! | `--blob_file_size` | `KvSeparationOptions::file_target_size` |
//! | `--blob_gc_ratio` | `KvSeparationOptions::staleness_threshold` (garbage share from which GC picks a blob file) |
//! | `--write_buffer_size` | `max_memtable_size` |
//! | `--target_file_size_base` | leveled `with_table_target_size` |
//! | `--level0_file_num_compaction_trigger` | leveled `with_l0_threshold` |
//! | `--max_bytes_for_level_multiplier` | leveled `with_level_ratio_policy` |
//! | `--compression_type` | data, index and blob compression, and the journal's |
//! | `--bloom_bits` | `FilterPolicy::all(Bloom(BitsPerKey))` |
//! | `--cache_size` | `Database::builder().cache_size` |
//! | `--max_background_jobs` | `worker_threads` (flushes and compactions share the pool) |
//! | `--sync` | `persist(PersistMode::SyncAll)` after every write, else `PersistMode::Buffer` |
//!
//! fjall has no knob for: L1's size (it is `table size × L0 threshold`), the number of levels
//! (7), memtables in flight (writers halt at 4 sealed memtables), the L0 slowdown and stop
//! triggers (fixed at 20 and 30 L0 runs), or the journal's directory. The journal lives in the
//! database's root directory; to put it on the fast tier as RocksDB-L0-fast's WAL, the root is
//! the fast-tier directory and its `keyspaces` folder (every table, blob file and manifest) is
//! a symbolic link to `<slow_dir>/keyspaces`. fjall only ever renames files within a keyspace's
//! folder, so nothing crosses the two file systems.
//!
//! fjall counts no bytes written, flushes or stalls. Bytes are measured with the kernel's
//! per-thread I/O accounting (`/proc/self/task/<tid>/io`, `wchar`: bytes passed to write
//! system calls): the slow tier's bytes are what fjall's worker threads (`fjall:worker`, which
//! run every flush and compaction) wrote; the journal's are what the rest of the process wrote
//! while the engine was open (the benchmark's threads write only the journal; the harness's
//! progress line on stderr is the only other writer, well under 1 KiB/s). The level layout,
//! blob files and disk space come from fjall's current version. Some of these accessors are
//! `#[doc(hidden)]` in fjall 3 (`tree`, `current_version`, `rotate_memtable_and_wait`,
//! `outstanding_flushes`, `active_compactions`), hence the version pinned in Cargo.lock.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{Context, Result};
use fjall::compaction::Leveled;
use fjall::config::{BloomConstructionPolicy, CompressionPolicy, FilterPolicy, FilterPolicyEntry};
use fjall::{
    AbstractTree, CompressionType, Database, Iter, Keyspace, KeyspaceCreateOptions,
    KvSeparationOptions, PersistMode, Readable, Snapshot, UserKey, UserValue,
};

use super::args::BenchArgs;
use super::engine::{BatchOp, Cursor, Engine, EngineStats, Placement};
use super::metrics::ProcIo;

/// The name of fjall's worker threads (flushes, compactions, journal rotation).
const WORKER_THREAD_NAME: &str = "fjall:worker";

/// The keyspace the benchmark uses.
const KEYSPACE: &str = "bench";

/// The fjall 3 version this engine was written against (Cargo.lock pins it).
const FJALL_VERSION: &str = "3.1.13";

fn compression(name: &str) -> Result<CompressionType> {
    Ok(match name {
        "none" => CompressionType::None,
        "lz4" => CompressionType::Lz4,
        o => anyhow::bail!("compression `{o}` is not available for fjall (none or lz4)"),
    })
}

/// The ids of this process's threads.
fn thread_ids() -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

fn thread_name(tid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/comm"))
        .ok()
        .map(|s| s.trim_end().to_owned())
}

/// Cumulative I/O of a fixed set of threads; a thread that has exited keeps its last reading.
struct ThreadIo {
    last: Mutex<HashMap<u32, (u64, u64)>>,
}

impl ThreadIo {
    fn new(tids: &[u32]) -> ThreadIo {
        ThreadIo {
            last: Mutex::new(tids.iter().map(|&t| (t, (0, 0))).collect()),
        }
    }

    fn threads(&self) -> usize {
        self.last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }

    /// (wchar, rchar) summed over the threads.
    fn read(&self) -> (u64, u64) {
        let mut last = self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (tid, v) in last.iter_mut() {
            if let Ok(text) = std::fs::read_to_string(format!("/proc/self/task/{tid}/io")) {
                let rchar = text
                    .lines()
                    .find_map(|l| l.strip_prefix("rchar:"))
                    .and_then(|x| x.trim().parse().ok())
                    .unwrap_or(v.1);
                *v = (ProcIo::parse(&text).wchar.max(v.0), rchar.max(v.1));
            }
        }
        last.values()
            .fold((0, 0), |(w, r), &(tw, tr)| (w + tw, r + tr))
    }
}

/// fjall with key-value separation.
pub struct FjallEngine {
    db: Database,
    ks: Keyspace,
    sync: bool,
    /// fjall's worker threads of this database.
    workers: ThreadIo,
    /// The process's `wchar` when the database was opened.
    wchar_at_open: Option<u64>,
    description: String,
    /// Where the journal (fast tier) and the keyspace files (slow tier) live.
    place: Placement,
}

/// Makes `<fast_dir>/keyspaces` a link to `<slow_dir>/keyspaces` (or checks that it is one).
fn link_keyspaces(place: &Placement) -> Result<PathBuf> {
    let target = place.slow_dir.join("keyspaces");
    std::fs::create_dir_all(&target).with_context(|| format!("creating {}", target.display()))?;
    std::fs::create_dir_all(&place.fast_dir)
        .with_context(|| format!("creating {}", place.fast_dir.display()))?;
    let link = place.fast_dir.join("keyspaces");
    match std::fs::read_link(&link) {
        Ok(t) if t == target => {}
        Ok(t) => anyhow::bail!(
            "{} links to {}, not to {}",
            link.display(),
            t.display(),
            target.display()
        ),
        Err(_) if link.exists() => anyhow::bail!(
            "{} exists and is not a link to the slow tier ({})",
            link.display(),
            target.display()
        ),
        Err(_) => std::os::unix::fs::symlink(&target, &link)
            .with_context(|| format!("linking {} to {}", link.display(), target.display()))?,
    }
    Ok(target)
}

impl FjallEngine {
    /// Opens (creating) fjall at `place` configured from `a`.
    pub fn open(a: &BenchArgs, place: &Placement) -> Result<FjallEngine> {
        let comp = compression(&a.compression_type)?;
        let keyspaces_dir = link_keyspaces(place)?;
        let workers = usize::try_from(a.max_background_jobs).unwrap_or(1).max(1);
        let l0_threshold = u8::try_from(a.level0_file_num_compaction_trigger)
            .ok()
            .filter(|&t| t > 0)
            .context("fjall needs --level0_file_num_compaction_trigger in 1..=255")?;
        let ratio = a.max_bytes_for_level_multiplier as f32;
        let separation_threshold =
            u32::try_from(a.min_blob_size).context("--min_blob_size must fit fjall's u32")?;
        let staleness = a.blob_gc_ratio as f32;
        let filter = if a.bloom_bits > 0 {
            FilterPolicy::all(FilterPolicyEntry::Bloom(
                BloomConstructionPolicy::BitsPerKey(a.bloom_bits as f32),
            ))
        } else {
            FilterPolicy::disabled()
        };
        let strategy = Leveled::default()
            .with_table_target_size(a.target_file_size_base)
            .with_l0_threshold(l0_threshold)
            .with_level_ratio_policy(vec![ratio]);
        let kv = KvSeparationOptions::default()
            .separation_threshold(separation_threshold)
            .file_target_size(a.blob_file_size)
            .staleness_threshold(staleness)
            .compression(comp);
        let age_cutoff = kv.age_cutoff;
        let opts = KeyspaceCreateOptions::default()
            .max_memtable_size(a.write_buffer_size as u64)
            .compaction_strategy(std::sync::Arc::new(strategy))
            .data_block_compression_policy(CompressionPolicy::all(comp))
            .index_block_compression_policy(CompressionPolicy::all(comp))
            .filter_policy(filter)
            .with_kv_separation(Some(kv));

        let description = format!(
            "fjall: fjall {FJALL_VERSION} (pure Rust), keyspace `{KEYSPACE}`; journal in {} \
             (fast tier), tables, blob files and manifests in {} (slow tier, linked from \
             {}/keyspaces); key-value separation on: separation_threshold {} \
             blob file_target_size {} staleness_threshold {} age_cutoff {age_cutoff} (fjall's \
             default) blob compression {}; max_memtable_size {} (memtables in flight: fjall \
             halts writers at 4 sealed, fixed); leveled compaction: table_target_size {} \
             l0_threshold {} level_ratio {} (L1 = table size × L0 threshold = {} B; 7 levels, \
             fixed; write delay from 20 and halt at 30 L0 runs, fixed); data/index/journal \
             compression {}; bloom bits_per_key {} (every level); cache_size {}; \
             worker_threads {} (flushes and compactions share them; with 2 or more, worker 0 \
             leaves compactions to the others); max_journaling_size 512 MiB (fjall's default); \
             data block size 4 KiB (fjall's default); sync {} ({}); no fjall knob, so \
             ignored: max_write_buffer_number {}, max_bytes_for_level_base {:?}, num_levels \
             {:?}, level0 slowdown/stop triggers {}/{}, enable_blob_files {} (separation is \
             always on)",
            place.fast_dir.display(),
            keyspaces_dir.display(),
            place.fast_dir.display(),
            separation_threshold,
            a.blob_file_size,
            staleness,
            a.compression_type,
            a.write_buffer_size,
            a.target_file_size_base,
            l0_threshold,
            ratio,
            a.target_file_size_base
                .saturating_mul(u64::from(l0_threshold)),
            a.compression_type,
            a.bloom_bits,
            a.cache_size,
            workers,
            a.sync,
            if a.sync {
                "journal persisted with PersistMode::SyncAll after every write"
            } else {
                "journal flushed to the OS with PersistMode::Buffer after every write"
            },
            a.max_write_buffer_number,
            a.max_bytes_for_level_base,
            a.num_levels,
            a.level0_slowdown_writes_trigger,
            a.level0_stop_writes_trigger,
            a.enable_blob_files
        );

        let before: Vec<u32> = thread_ids();
        let db = Database::builder(&place.fast_dir)
            .cache_size(a.cache_size as u64)
            .worker_threads(workers)
            .journal_compression(comp)
            .open()
            .with_context(|| format!("opening fjall at {}", place.fast_dir.display()))?;
        let wchar_at_open = ProcIo::read(None).map(|io| io.wchar);
        // A worker names itself once it runs: wait (up to 2 s) until all of them have.
        let mut worker_tids = Vec::new();
        for _ in 0..2000 {
            worker_tids = thread_ids()
                .into_iter()
                .filter(|t| !before.contains(t))
                .filter(|&t| thread_name(t).as_deref() == Some(WORKER_THREAD_NAME))
                .collect();
            if worker_tids.len() >= workers {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let ks = db
            .keyspace(KEYSPACE, || opts)
            .context("opening fjall's keyspace")?;
        Ok(FjallEngine {
            db,
            ks,
            sync: a.sync,
            workers: ThreadIo::new(&worker_tids),
            wchar_at_open,
            description,
            place: place.clone(),
        })
    }

    fn persist(&self) -> Result<()> {
        if self.sync {
            self.db.persist(PersistMode::SyncAll)?;
        }
        Ok(())
    }

    /// True while a flush or compaction is queued or running.
    fn busy(&self) -> bool {
        self.db.outstanding_flushes() > 0
            || self.ks.sealed_memtable_count() > 0
            || self.db.active_compactions() > 0
    }
}

struct FjallCursor<'a> {
    ks: &'a Keyspace,
    snapshot: Snapshot,
    iter: Option<Iter>,
    cur: Option<(UserKey, UserValue)>,
}

impl FjallCursor<'_> {
    fn advance(&mut self) -> Result<()> {
        self.cur = match self.iter.as_mut().and_then(|i| i.next()) {
            Some(g) => Some(g.into_inner()?),
            None => None,
        };
        Ok(())
    }
}

impl Cursor for FjallCursor<'_> {
    fn seek_to_first(&mut self) -> Result<()> {
        self.iter = Some(self.snapshot.iter(self.ks));
        self.advance()
    }
    fn seek(&mut self, key: &[u8]) -> Result<()> {
        self.iter = Some(self.snapshot.range(self.ks, key..));
        self.advance()
    }
    fn valid(&self) -> bool {
        self.cur.is_some()
    }
    fn key(&self) -> &[u8] {
        self.cur.as_ref().map_or(&[], |c| &c.0)
    }
    fn value(&self) -> &[u8] {
        self.cur.as_ref().map_or(&[], |c| &c.1)
    }
    fn next(&mut self) -> Result<()> {
        self.advance()
    }
}

impl Engine for FjallEngine {
    fn name(&self) -> &str {
        "fjall"
    }
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.ks.insert(key, value)?;
        self.persist()
    }
    fn put_sync(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.ks.insert(key, value)?;
        Ok(self.db.persist(PersistMode::SyncAll)?)
    }
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.ks.get(key)?.map(|v| v.to_vec()))
    }
    fn delete(&self, key: &[u8]) -> Result<()> {
        self.ks.remove(key)?;
        self.persist()
    }
    fn write_batch(&self, ops: &[BatchOp<'_>]) -> Result<()> {
        let mut b = self.db.batch();
        if self.sync {
            b = b.durability(Some(PersistMode::SyncAll));
        }
        for op in ops {
            match *op {
                BatchOp::Put(k, v) => b.insert(&self.ks, k, v),
                BatchOp::Delete(k) => b.remove(&self.ks, k),
                BatchOp::Merge(..) => {
                    anyhow::bail!("fjall has no merge operator (mergerandom needs one)")
                }
            }
        }
        Ok(b.commit()?)
    }
    fn cursor(&self) -> Result<Box<dyn Cursor + '_>> {
        Ok(Box::new(FjallCursor {
            ks: &self.ks,
            snapshot: self.db.snapshot(),
            iter: None,
            cur: None,
        }))
    }
    fn stats(&self) -> EngineStats {
        let version = self.ks.tree.current_version();
        let mut levels: Vec<(u64, u64)> = version
            .iter_levels()
            .map(|l| (l.table_count() as u64, l.size()))
            .collect();
        while levels.len() > 1 && levels.last() == Some(&(0, 0)) {
            levels.pop();
        }
        let blob_files = version.blob_file_count();
        let blob_bytes = version.blob_files.on_disk_size();
        let mut notes = Vec::new();
        let (worker_w, worker_r) = self.workers.read();
        let process_w = ProcIo::read(None).map(|io| io.wchar);
        let (slow, wal) = match (process_w, self.wchar_at_open) {
            (Some(now), Some(open)) if self.workers.threads() > 0 => {
                notes.push(format!(
                    "bytes written: fjall counts none; slow tier = write-call bytes (/proc \
                     wchar) of its {} worker threads (flushes, compactions, blob files, \
                     manifests); journal = the rest of the process's since open (benchmark \
                     threads; includes the harness's progress line)",
                    self.workers.threads()
                ));
                (worker_w, now.saturating_sub(open).saturating_sub(worker_w))
            }
            _ => {
                notes.push(
                    "bytes written: fjall counts none and /proc per-thread I/O is unavailable: \
                     slow-tier and journal bytes are 0 (see kernel WA)"
                        .to_owned(),
                );
                (0, 0)
            }
        };
        notes.push(format!(
            "fjall counts no flushes, compaction bytes or stalls (its write delay at 20 L0 runs \
             and halts at 30 runs or 4 sealed memtables show only in latency); compaction \
             attempts (cumulative, including those that chose nothing): {}, {:.3} s compacting; \
             worker threads read {:.1} MiB (/proc rchar)",
            self.db.compactions_completed(),
            self.db.time_compacting().as_secs_f64(),
            worker_r as f64 / 1048576.0
        ));
        notes.push(format!(
            "blob files (now): {blob_files} holding {:.1} MiB ({:.1} MiB fragmented); \
             journals {} ({:.1} MiB on disk, preallocated in 64 MiB files); disk space {:.1} MiB",
            blob_bytes as f64 / 1048576.0,
            self.ks.fragmented_blob_bytes() as f64 / 1048576.0,
            self.db.journal_count(),
            self.db.journal_disk_space().unwrap_or(0) as f64 / 1048576.0,
            self.db.disk_space().unwrap_or(0) as f64 / 1048576.0
        ));
        EngineStats {
            stall_micros: 0,
            stalls: 0,
            wal_bytes: wal,
            wal_on_fast: true,
            fast_table_bytes: 0,
            slow_bytes: slow,
            flushes: 0,
            flush_bytes: 0,
            compactions: 0,
            compaction_input_bytes: 0,
            compaction_output_bytes: 0,
            l0_compactions: 0,
            l0_compaction_input_bytes: 0,
            levels,
            notes,
            // The keyspaces link in the fast directory is not followed: only the journal counts.
            fast_dir: Some(self.place.fast_dir.clone()),
            slow_dir: Some(self.place.slow_dir.clone()),
        }
    }
    /// Flushes the memtable, then waits until no flush or compaction is queued or running for
    /// 200 ms. fjall has no wait-for-compactions call and schedules compactions only after
    /// flushes (one attempt per worker per flush): settled means the work fjall has scheduled
    /// is done, which can leave a level above its target until the next flush (only a major
    /// compaction, which is not settling, would go further).
    fn settle(&self) -> Result<()> {
        self.ks.rotate_memtable_and_wait()?;
        let mut quiet = 0;
        let mut attempts = self.db.compactions_completed();
        while quiet < 10 {
            std::thread::sleep(Duration::from_millis(20));
            let now = self.db.compactions_completed();
            if self.busy() || now != attempts {
                quiet = 0;
            } else {
                quiet += 1;
            }
            attempts = now;
        }
        Ok(())
    }
    fn describe(&self) -> String {
        self.description.clone()
    }
    fn close(self: Box<Self>) -> Result<()> {
        self.db.persist(PersistMode::SyncAll)?;
        let FjallEngine { db, ks, .. } = *self;
        drop(ks);
        // Dropping the database stops and joins its worker threads.
        drop(db);
        Ok(())
    }
}

#[cfg(all(test, feature = "fjall"))]
mod tests {
    use super::*;
    use crate::bench::engine::{exercise_point_and_range_operations, open_engine};

    /// The arguments of the tests (the words, so each `#[test]` parses them itself).
    const SMALL_ARGS: [&str; 4] = [
        "bench",
        "--write_buffer_size=1048576",
        "--cache_size=1048576",
        "--min_blob_size=64",
    ];

    #[test]
    fn fjall_engine_serves_every_trait_operation() {
        let small_args = || BenchArgs::parse_words(SMALL_ARGS).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let place = Placement {
            fast_dir: tmp.path().join("fast"),
            slow_dir: tmp.path().join("slow"),
        };
        let e = open_engine("fjall", &small_args(), &place).unwrap();
        assert_eq!(e.name(), "fjall");
        // A value above --min_blob_size goes to a blob file at flush.
        e.put(b"big", &[7u8; 200]).unwrap();
        exercise_point_and_range_operations(e.as_ref(), 1);
        e.settle().unwrap();
        assert_eq!(e.get(b"big").unwrap(), Some(vec![7u8; 200]));
        let s = e.stats();
        assert!(s.wal_on_fast);
        assert!(s.wal_bytes > 0, "{s:?}");
        assert!(s.slow_bytes > 0, "{s:?}");
        assert!(s.levels.iter().map(|l| l.0).sum::<u64>() >= 1, "{s:?}");
        assert!(
            s.notes.iter().any(|n| n.contains("blob files (now): 1 ")),
            "{s:?}"
        );
        let d = e.describe();
        assert!(d.contains("max_memtable_size 1048576"), "{d}");
        assert!(d.contains("separation_threshold 64"), "{d}");
        // The journal is on the fast tier, the tables behind the link on the slow tier.
        assert!(
            std::fs::read_dir(&place.fast_dir).unwrap().any(|f| f
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".jnl"))
        );
        assert!(place.slow_dir.join("keyspaces").read_dir().unwrap().count() >= 2);
        e.close().unwrap();
        // Reopening finds the data (the link is reused).
        let e = open_engine("fjall", &small_args(), &place).unwrap();
        assert_eq!(e.get(b"k9").unwrap(), Some(b"new".to_vec()));
        e.close().unwrap();
    }

    #[test]
    fn the_described_fjall_version_is_the_locked_one() {
        let lock = include_str!("../../../../Cargo.lock");
        assert!(
            lock.contains(&format!(
                "name = \"fjall\"\nversion = \"{FJALL_VERSION}\"\n"
            )),
            "update FJALL_VERSION to Cargo.lock's fjall"
        );
    }

    #[test]
    fn compression_is_none_or_lz4() {
        assert!(compression("none").is_ok());
        assert!(compression("lz4").is_ok());
        assert!(compression("zstd").is_err());
    }
}
