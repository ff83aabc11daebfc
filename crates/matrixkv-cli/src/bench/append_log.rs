//! Engine `append-log`: the simplest store that takes its writes to the slow tier, as a
//! reference point, not a competitor. Bitcask's design without its merge: each write (or
//! batch) is appended to one file with one `write(2)` (the page cache and the kernel's
//! writeback take it from there), and its key's position is kept in a `BTreeMap` in memory.
//! No WAL on the fast tier, no memtable, no flush, no compaction, no space reclamation, no
//! recovery (a reopened log is empty); a `put_sync` adds one `fdatasync`.
//!
//! What it is for: it shows what the plainest path into the page cache costs on the machine
//! at hand, with no background work of the engine, beside the engines in one invocation (on
//! this project's VM it fell behind B5's 72K writes/s of 4 KiB in one run of two: each
//! `write(2)` of fresh page-cache pages costs the writer 8–12 µs, where matrixkv copies into
//! pages prepared ahead; docs/bench.md). Its throughput and write amplification (1.0 plus record headers) are not a
//! competitor's: it never reclaims space and keeps every key in memory.
//!
//! Records: `[key length u32 LE][value length u32 LE, u32::MAX for a delete][key][value]`.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::ops::Bound;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Mutex;

use anyhow::{Context, Result};

use super::engine::{BatchOp, Cursor, Engine, EngineStats, Placement};

/// The engine's name in `--engines` and in reports.
pub const NAME: &str = "append-log";

/// The value length that marks a delete record.
const DELETE: u32 = u32::MAX;

/// Bytes of a record's header.
const HEADER: usize = 8;

/// The appended file and the index, under one lock (a write appends and indexes atomically).
struct State {
    file: File,
    /// The file's length: where the next record goes.
    end: u64,
    /// Key → (offset of the value in the file, value length).
    index: BTreeMap<Vec<u8>, (u64, u32)>,
}

/// See the module documentation.
pub struct AppendLog {
    state: Mutex<State>,
    /// A second handle for reads, so a `pread` never waits for the lock.
    reader: File,
    path: PathBuf,
    place: Placement,
}

impl AppendLog {
    /// Creates the log at `<slow_dir>/append.log` (truncating an earlier one).
    pub fn open(place: &Placement) -> Result<AppendLog> {
        std::fs::create_dir_all(&place.slow_dir)
            .with_context(|| format!("creating {}", place.slow_dir.display()))?;
        let path = place.slow_dir.join("append.log");
        let file = OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&path)
            .with_context(|| format!("creating {}", path.display()))?;
        let reader = File::open(&path).with_context(|| format!("opening {}", path.display()))?;
        Ok(AppendLog {
            state: Mutex::new(State {
                file,
                end: 0,
                index: BTreeMap::new(),
            }),
            reader,
            path,
            place: place.clone(),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends `ops` as one `write(2)` and indexes them; with `sync`, then `fdatasync`.
    fn append(&self, ops: &[BatchOp<'_>], sync: bool) -> Result<()> {
        let mut buf = Vec::with_capacity(
            ops.iter()
                .map(|op| match *op {
                    BatchOp::Put(k, v) => HEADER + k.len() + v.len(),
                    BatchOp::Delete(k) => HEADER + k.len(),
                    BatchOp::Merge(..) => 0,
                })
                .sum(),
        );
        // (key, offset of the value within `buf`, value length or DELETE)
        let mut entries = Vec::with_capacity(ops.len());
        for op in ops {
            let (key, value) = match *op {
                BatchOp::Put(k, v) => (k, Some(v)),
                BatchOp::Delete(k) => (k, None),
                BatchOp::Merge(..) => {
                    anyhow::bail!("{NAME} has no merge operator (mergerandom needs one)")
                }
            };
            let klen = u32::try_from(key.len()).context("key longer than 4 GiB")?;
            let vlen = match value {
                Some(v) => u32::try_from(v.len())
                    .ok()
                    .filter(|&l| l != DELETE)
                    .context("value of 4 GiB or longer")?,
                None => DELETE,
            };
            buf.extend_from_slice(&klen.to_le_bytes());
            buf.extend_from_slice(&vlen.to_le_bytes());
            buf.extend_from_slice(key);
            entries.push((key, buf.len() as u64, vlen));
            if let Some(v) = value {
                buf.extend_from_slice(v);
            }
        }
        let mut s = self.state();
        let base = s.end;
        s.file
            .write_all_at(&buf, base)
            .with_context(|| format!("appending to {}", self.path.display()))?;
        s.end += buf.len() as u64;
        for (key, at, vlen) in entries {
            if vlen == DELETE {
                s.index.remove(key);
            } else {
                s.index.insert(key.to_vec(), (base + at, vlen));
            }
        }
        if sync {
            s.file
                .sync_data()
                .with_context(|| format!("syncing {}", self.path.display()))?;
        }
        Ok(())
    }

    fn read_value(&self, at: u64, len: u32) -> Result<Vec<u8>> {
        let mut v = vec![0u8; len as usize];
        self.reader
            .read_exact_at(&mut v, at)
            .with_context(|| format!("reading {} at {at}", self.path.display()))?;
        Ok(v)
    }

    /// The first indexed entry whose key is within `from` (and its position).
    fn first_from(&self, from: Bound<&[u8]>) -> Option<(Vec<u8>, u64, u32)> {
        let s = self.state();
        s.index
            .range::<[u8], _>((from, Bound::Unbounded))
            .next()
            .map(|(k, &(at, len))| (k.clone(), at, len))
    }
}

/// A cursor over the index: each step takes the lock for one lookup, so it sees writes made
/// after it was created (the log has no snapshots).
struct LogCursor<'a> {
    engine: &'a AppendLog,
    cur: Option<(Vec<u8>, Vec<u8>)>,
}

impl LogCursor<'_> {
    fn position(&mut self, from: Bound<&[u8]>) -> Result<()> {
        self.cur = match self.engine.first_from(from) {
            Some((k, at, len)) => Some((k, self.engine.read_value(at, len)?)),
            None => None,
        };
        Ok(())
    }
}

impl Cursor for LogCursor<'_> {
    fn seek_to_first(&mut self) -> Result<()> {
        self.position(Bound::Unbounded)
    }
    fn seek(&mut self, key: &[u8]) -> Result<()> {
        self.position(Bound::Included(key))
    }
    fn valid(&self) -> bool {
        self.cur.is_some()
    }
    fn key(&self) -> &[u8] {
        &self.cur.as_ref().expect("valid cursor").0
    }
    fn value(&self) -> &[u8] {
        &self.cur.as_ref().expect("valid cursor").1
    }
    fn next(&mut self) -> Result<()> {
        let key = self.cur.take().map(|(k, _)| k);
        match key {
            Some(k) => self.position(Bound::Excluded(&k)),
            None => Ok(()),
        }
    }
}

impl Engine for AppendLog {
    fn name(&self) -> &str {
        NAME
    }
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.append(&[BatchOp::Put(key, value)], false)
    }
    fn put_sync(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.append(&[BatchOp::Put(key, value)], true)
    }
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let found = self.state().index.get(key).copied();
        found.map(|(at, len)| self.read_value(at, len)).transpose()
    }
    fn delete(&self, key: &[u8]) -> Result<()> {
        self.append(&[BatchOp::Delete(key)], false)
    }
    fn write_batch(&self, ops: &[BatchOp<'_>]) -> Result<()> {
        self.append(ops, false)
    }
    fn cursor(&self) -> Result<Box<dyn Cursor + '_>> {
        Ok(Box::new(LogCursor {
            engine: self,
            cur: None,
        }))
    }
    fn stats(&self) -> EngineStats {
        let (end, keys) = {
            let s = self.state();
            (s.end, s.index.len())
        };
        EngineStats {
            slow_bytes: end,
            levels: vec![(1, end)],
            notes: vec![format!(
                "{NAME}: a reference point, not a competitor: one file appended with \
                 write(2), an in-memory index of {keys} keys, no compaction or space \
                 reclamation (see docs/bench.md)"
            )],
            slow_dir: Some(self.place.slow_dir.clone()),
            ..EngineStats::default()
        }
    }
    /// Nothing runs in the background; settling writes the file back, as a flush would.
    fn settle(&self) -> Result<()> {
        let s = self.state();
        s.file
            .sync_data()
            .with_context(|| format!("syncing {}", self.path.display()))
    }
    fn describe(&self) -> String {
        format!(
            "{NAME}: one append-only file ({}) written with write(2), keys indexed in memory; \
             no WAL, memtable, compaction or recovery",
            self.path.display()
        )
    }
    fn close(self: Box<Self>) -> Result<()> {
        self.settle()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::engine::exercise_point_and_range_operations;

    #[test]
    fn the_append_log_serves_every_trait_operation_from_its_one_file() {
        let tmp = tempfile::tempdir().unwrap();
        let place = Placement {
            fast_dir: tmp.path().join("fast"),
            slow_dir: tmp.path().join("slow"),
        };
        let e: Box<dyn Engine> = Box::new(AppendLog::open(&place).unwrap());
        exercise_point_and_range_operations(e.as_ref(), 0);
        e.put_sync(b"k1", b"synced").unwrap();
        assert_eq!(e.get(b"k1").unwrap(), Some(b"synced".to_vec()));
        e.settle().unwrap();
        // Every record is in the file: 10 puts of 2 + 3 bytes, the batch's delete (2) and put
        // (2 + 3), a delete (2), the synced put (2 + 6), each with its 8-byte header.
        let expected = 10 * (8 + 5) + (8 + 2) + (8 + 5) + (8 + 2) + (8 + 8);
        assert_eq!(e.stats().slow_bytes, expected);
        assert_eq!(
            std::fs::metadata(place.slow_dir.join("append.log"))
                .unwrap()
                .len(),
            expected
        );
        assert!(e.merge(b"k", &1u64.to_le_bytes()).is_err());
        e.close().unwrap();
    }
}
