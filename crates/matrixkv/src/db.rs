//! [`Db`]: the public handle of a database. A thin facade over `crate::engine`.

mod background;
mod keyspace;
mod snapshot;
mod stats;
#[cfg(feature = "testing")]
mod testing;

use std::sync::Arc;
use std::thread::JoinHandle;

use crate::batch::WriteBatch;
use crate::engine::{self, DbInner};
use crate::error::{Error, Result};
use crate::iter::db_iter::DbIterator;
use crate::key::{SeqNo, ValueKind};
use crate::options::{Options, ReadOptions, WriteOptions};
pub(crate) use background::{compact_engine_range, flush_inner};
pub use keyspace::Keyspace;
pub use snapshot::Snapshot;

/// An open database. `Db` is `Send + Sync`: share it between threads with `Arc<Db>` (or
/// scoped borrows); concurrent writers are group-committed.
///
/// ```
/// # fn main() -> matrixkv::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// use matrixkv::{Db, Options, WriteBatch};
/// let db = Db::open(Options::new(dir.path()))?;
/// db.put(b"apple", b"red")?;
/// let mut batch = WriteBatch::new();
/// batch.put(b"banana", b"yellow");
/// batch.delete(b"apple");
/// db.write(batch)?; // atomic
/// assert_eq!(db.get(b"apple")?, None);
/// assert_eq!(db.get(b"banana")?.as_deref(), Some(&b"yellow"[..]));
/// db.close()?;
/// # Ok(()) }
/// ```
pub struct Db {
    inner: Arc<DbInner>,
    threads: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("fast_dir", &self.inner.tiers.fast.dir())
            .field("slow_dir", &self.inner.opts.slow_dir)
            .finish()
    }
}

impl Db {
    /// The engine behind the handle (backups read through it).
    pub(crate) fn inner(&self) -> &Arc<DbInner> {
        &self.inner
    }

    /// Opens the database described by `opts`, creating it if allowed, and recovers every
    /// acknowledged write from the WAL.
    ///
    /// # Errors
    /// Invalid options, a database locked by another handle or process, a mismatch of a
    /// parameter fixed at creation, tier directories that do not belong together, corruption,
    /// or I/O errors.
    pub fn open(opts: Options) -> Result<Db> {
        let (inner, threads) = engine::open(opts)?;
        Ok(Db { inner, threads })
    }

    /// Opens an existing database for reading only, as RocksDB's `OpenForReadOnly` does
    /// (docs/decisions/0019-read-only-open.md):
    ///
    /// - the parameters fixed at creation (container and page size, levels, L0 layout, design)
    ///   are taken from the database, whatever `opts` says; `opts` gives the directories, the
    ///   tiers, the block cache, and the options of keyspaces with a TTL or merge operator;
    /// - nothing is written, created or deleted on either tier: no lock, no WAL segment, no
    ///   manifest, no zeroed torn tail, no background work. It works while another process
    ///   has the database open read-write;
    /// - it sees the database as of the open: the manifest's version and the writes its WAL
    ///   segments hold, replayed into memtables in memory. Later writes of another process are
    ///   not seen; reopen for a newer view. If that process deletes a file or reuses container
    ///   pages the view still refers to, reads of them fail with a clear error (a missing file,
    ///   or a checksum that names the file and offset) rather than returning other data;
    /// - writes, flushes, compactions, checkpoints and keyspace changes fail with
    ///   [`Error::ReadOnly`](crate::Error::ReadOnly).
    ///
    /// ```
    /// # fn main() -> matrixkv::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = matrixkv::Db::open(matrixkv::Options::new(dir.path()))?;
    /// db.put(b"k", b"v")?;
    /// db.close()?;
    /// let ro = matrixkv::Db::open_read_only(matrixkv::Options::new(dir.path()))?;
    /// assert_eq!(ro.get(b"k")?, Some(b"v".to_vec()));
    /// assert!(matches!(ro.put(b"k", b"w"), Err(matrixkv::Error::ReadOnly { .. })));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// No database at the path (nothing is created), corruption, I/O errors, or keyspace
    /// options missing for a keyspace created with a TTL.
    pub fn open_read_only(opts: Options) -> Result<Db> {
        let inner = engine::open_read_only(opts)?;
        Ok(Db {
            inner,
            threads: Vec::new(),
        })
    }

    /// True for a handle of [`Db::open_read_only`].
    pub fn is_read_only(&self) -> bool {
        self.inner.read_only
    }

    /// Sets `key` to `value` (not synced: see [`WriteOptions::sync`]).
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.put_opt(key, value, &WriteOptions::default())
    }

    /// Sets `key` to `value` with write options.
    pub fn put_opt(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        wo: &WriteOptions,
    ) -> Result<()> {
        let b = engine::single(0, ValueKind::Value, key.as_ref(), value.as_ref());
        self.inner.write(b, wo.sync)
    }

    /// Deletes `key` (a no-op if absent).
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.delete_opt(key, &WriteOptions::default())
    }

    /// Deletes `key` with write options.
    pub fn delete_opt(&self, key: impl AsRef<[u8]>, wo: &WriteOptions) -> Result<()> {
        let b = engine::single(0, ValueKind::Deletion, key.as_ref(), &[]);
        self.inner.write(b, wo.sync)
    }

    /// Deletes every key in `[start, end)` (not synced): RocksDB's `DeleteRange`. One write,
    /// whatever the number of keys in the range: the range tombstone hides the keys' older
    /// versions from reads at once, and compaction drops them later. Keys written after the
    /// call are not affected; snapshots taken before it still see the keys.
    ///
    /// # Errors
    /// `InvalidArgument` if `start >= end` (an empty or inverted range), or the write fails
    /// as any other write does.
    ///
    /// # Example
    ///
    /// ```
    /// # fn main() -> matrixkv::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = matrixkv::Db::open(matrixkv::Options::new(dir.path()))?;
    /// for k in ["a", "b", "c", "d"] {
    ///     db.put(k, "v")?;
    /// }
    /// db.delete_range("b", "d")?; // removes b and c; d is the exclusive end
    /// let keys: Vec<Vec<u8>> = db.iter()?.map(|r| r.map(|(k, _)| k)).collect::<matrixkv::Result<_>>()?;
    /// assert_eq!(keys, vec![b"a".to_vec(), b"d".to_vec()]);
    /// assert!(db.delete_range("z", "a").is_err());
    /// # Ok(()) }
    /// ```
    pub fn delete_range(&self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> Result<()> {
        self.delete_range_opt(start, end, &WriteOptions::default())
    }

    /// [`Db::delete_range`] with write options.
    pub fn delete_range_opt(
        &self,
        start: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
        wo: &WriteOptions,
    ) -> Result<()> {
        let b = engine::single(0, ValueKind::RangeDeletion, start.as_ref(), end.as_ref());
        self.inner.write(b, wo.sync)
    }

    /// Merges `operand` into `key` (not synced): reads then see the database's
    /// [`MergeOperator`](crate::MergeOperator) applied to the key's older value and operands
    /// (RocksDB's `Merge`). No read happens at write time.
    ///
    /// ```
    /// # fn main() -> matrixkv::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let mut opts = matrixkv::Options::new(dir.path());
    /// # opts.container_bytes = 8 << 20;
    /// # opts.write_buffer_bytes = 2 << 20;
    /// opts.merge_operator = Some(std::sync::Arc::new(matrixkv::U64AddOperator));
    /// let db = matrixkv::Db::open(opts)?;
    /// for _ in 0..3 {
    ///     db.merge("hits", 1u64.to_le_bytes())?;
    /// }
    /// let snap = db.snapshot();
    /// db.merge("hits", 10u64.to_le_bytes())?;
    /// assert_eq!(db.get("hits")?, Some(13u64.to_le_bytes().to_vec()));
    /// assert_eq!(snap.get("hits")?, Some(3u64.to_le_bytes().to_vec()));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// `InvalidArgument` when the database has no merge operator (`Options::merge_operator`)
    /// or the key or operand is too large; the write path's errors.
    pub fn merge(&self, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) -> Result<()> {
        self.merge_opt(key, operand, &WriteOptions::default())
    }

    /// Merges `operand` into `key` with write options (see [`Db::merge`]).
    ///
    /// # Errors
    /// As [`Db::merge`].
    pub fn merge_opt(
        &self,
        key: impl AsRef<[u8]>,
        operand: impl AsRef<[u8]>,
        wo: &WriteOptions,
    ) -> Result<()> {
        let b = engine::single(0, ValueKind::Merge, key.as_ref(), operand.as_ref());
        self.inner.write(b, wo.sync)
    }

    /// Applies every operation of `batch` atomically: after a crash, all or none are present.
    pub fn write(&self, batch: WriteBatch) -> Result<()> {
        self.write_opt(batch, &WriteOptions::default())
    }

    /// Applies `batch` atomically with write options.
    pub fn write_opt(&self, batch: WriteBatch, wo: &WriteOptions) -> Result<()> {
        self.inner.write(batch, wo.sync)
    }

    /// The value of `key`, or `None` if it is absent or deleted.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.inner
            .get(&self.inner.default_keyspace, key.as_ref(), None)
    }

    /// The value of `key` with read options (snapshot).
    pub fn get_opt(&self, key: impl AsRef<[u8]>, ro: &ReadOptions) -> Result<Option<Vec<u8>>> {
        self.inner
            .get(&self.inner.default_keyspace, key.as_ref(), ro.snapshot)
    }

    /// The values of `keys`, one result per key in the order given, all read at one point in
    /// time (a write acknowledged before the call is seen by every key, one acknowledged
    /// during it by all or none). Cheaper than a `get` per key: one read view, and the keys
    /// are looked up in key order so they share the blocks and rows each brings into the
    /// caches. Duplicated keys are looked up once. A failure reading one key (corruption, an
    /// I/O error) is that key's result.
    ///
    /// ```
    /// # fn main() -> matrixkv::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = matrixkv::Db::open(matrixkv::Options::new(dir.path()))?;
    /// db.put("a", "1")?;
    /// db.put("c", "3")?;
    /// let got = db.multi_get(["c", "b", "a"]);
    /// let values: Vec<Option<Vec<u8>>> = got.into_iter().collect::<matrixkv::Result<_>>()?;
    /// assert_eq!(values, vec![Some(b"3".to_vec()), None, Some(b"1".to_vec())]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn multi_get<K: AsRef<[u8]>>(
        &self,
        keys: impl IntoIterator<Item = K>,
    ) -> Vec<Result<Option<Vec<u8>>>> {
        self.multi_get_opt(keys, &ReadOptions::default())
    }

    /// [`Db::multi_get`] with read options (snapshot; bounds do not apply to point reads).
    pub fn multi_get_opt<K: AsRef<[u8]>>(
        &self,
        keys: impl IntoIterator<Item = K>,
        ro: &ReadOptions,
    ) -> Vec<Result<Option<Vec<u8>>>> {
        let keys: Vec<K> = keys.into_iter().collect();
        let refs: Vec<&[u8]> = keys.iter().map(AsRef::as_ref).collect();
        self.inner
            .multi_get(&self.inner.default_keyspace, &refs, ro.snapshot)
    }

    /// An iterator over the latest state, unbounded. Position it with a seek first.
    pub fn iter(&self) -> Result<DbIterator> {
        self.inner
            .iter(&self.inner.default_keyspace, &ReadOptions::default())
    }

    /// An iterator with read options (snapshot, bounds).
    pub fn iter_opt(&self, ro: &ReadOptions) -> Result<DbIterator> {
        self.inner.iter(&self.inner.default_keyspace, ro)
    }

    /// A consistent point-in-time view, kept until the [`Snapshot`] is dropped.
    pub fn snapshot(&self) -> Snapshot {
        let mut st = self.inner.state.lock();
        let seq = self.inner.latest_seq();
        *st.snapshots.entry(seq.0).or_insert(0) += 1;
        Snapshot {
            inner: Arc::clone(&self.inner),
            seq,
        }
    }

    /// Creates keyspace `name` with its options and returns its handle (RocksDB's
    /// `CreateColumnFamily`). The creation is durable when this returns. At later opens, give
    /// the keyspace's options in [`Options::keyspace_options`].
    ///
    /// # Errors
    /// `InvalidArgument` if the name is empty, longer than
    /// [`crate::keyspace::MAX_KEYSPACE_NAME_BYTES`], `"default"`, or taken; a TTL under one
    /// second; a database created before keyspaces existed (it has only the default keyspace);
    /// the manifest write's errors.
    pub fn create_keyspace(
        &self,
        name: &str,
        opts: crate::KeyspaceOptions,
    ) -> Result<crate::Keyspace> {
        self.inner.check_writable("create_keyspace")?;
        let settings = self.inner.create_keyspace(name, &opts)?;
        Ok(Keyspace::new(Arc::clone(&self.inner), settings))
    }

    /// The handle of keyspace `name` (`"default"` is the keyspace [`Db`]'s own methods use).
    ///
    /// # Errors
    /// `InvalidArgument` naming the keyspaces there are if none is called `name`.
    pub fn keyspace(&self, name: &str) -> Result<crate::Keyspace> {
        let settings = self
            .inner
            .keyspaces()
            .by_name(name)
            .cloned()
            .ok_or_else(|| self.inner.no_such_keyspace(name))?;
        Ok(Keyspace::new(Arc::clone(&self.inner), settings))
    }

    /// Drops keyspace `name` (RocksDB's `DropColumnFamily`): its handles fail with
    /// [`Error::KeyspaceDropped`] from now on, its name is free again, and every key of it is
    /// deleted by one range deletion, persisted before this returns. The space its keys take
    /// in the matrix container, the levels and blob files is reclaimed in the background once
    /// the deletion is flushed and no snapshot older than the drop remains: tables wholly
    /// inside the keyspace are dropped without being read (or rewritten, when they point into
    /// blob files), the tables at its edges are rewritten, and column compactions drain its
    /// rows; `db.compact_range(None, None)` reclaims everything at once. After a crash during the call the keyspace is either dropped or present
    /// and empty.
    ///
    /// # Errors
    /// `InvalidArgument` for `"default"` or a name no keyspace has; the write's and the
    /// manifest's errors (the keyspace then stays).
    pub fn drop_keyspace(&self, name: &str) -> Result<()> {
        self.inner.check_writable("drop_keyspace")?;
        self.inner.drop_keyspace(name)
    }

    /// The names of the keyspaces, `"default"` first, then in creation order.
    pub fn list_keyspaces(&self) -> Vec<String> {
        self.inner.keyspaces().names()
    }

    /// The name of the keyspace with id `id` ([`crate::Keyspace::id`]), dropped ones included
    /// (`(name, dropped)`): how a consumer of [`Db::updates_since`] names the keyspace of each
    /// operation ([`WriteBatch::iter_with_keyspace`]). Ids are never reused. `None` for an id
    /// no keyspace ever had.
    ///
    /// ```
    /// # fn main() -> matrixkv::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = matrixkv::Db::open(matrixkv::Options::new(dir.path()))?;
    /// let ks = db.create_keyspace("users", matrixkv::KeyspaceOptions::default())?;
    /// assert_eq!(db.keyspace_name(ks.id()), Some(("users".to_owned(), false)));
    /// db.drop_keyspace("users")?;
    /// assert_eq!(db.keyspace_name(ks.id()), Some(("users".to_owned(), true)));
    /// assert_eq!(db.keyspace_name(0), Some(("default".to_owned(), false)));
    /// # Ok(()) }
    /// ```
    pub fn keyspace_name(&self, id: u32) -> Option<(String, bool)> {
        let reg = self.inner.keyspaces();
        let s = reg.any(id)?;
        Some((s.name.clone(), reg.live(id).is_none()))
    }

    /// Sequence number of the last acknowledged write.
    pub fn last_sequence(&self) -> SeqNo {
        self.inner.latest_seq()
    }

    /// The write batches committed from sequence number `seq` on, read from the WAL, in commit
    /// order, each with its first sequence number (RocksDB's `GetUpdatesSince`): what a
    /// replica that holds every write before `seq` applies, batch by batch, to catch up.
    ///
    /// - The first batch is the one holding `seq` (it starts before `seq` if `seq` falls inside
    ///   it); the sequence numbers of the batches then follow on without a gap.
    /// - It ends with the last write visible when it was created ([`Db::last_sequence`] then);
    ///   `seq` beyond that gives an empty iterator.
    /// - Writers committed together share one WAL record: their batches come back as one, their
    ///   operations concatenated in commit order (as in RocksDB).
    /// - The WAL holds the writes not yet flushed, plus the last
    ///   [`Options::wal_retention_segments`] segments of flushed ones; the segments the
    ///   iterator still has to read are kept while it lives (drop it before [`Db::close`]).
    /// - Operations of every keyspace come back; [`WriteBatch::iter_with_keyspace`] gives each
    ///   one's keyspace id and [`Db::keyspace_name`] its name. A keyspace's drop comes back as
    ///   a range deletion with an empty start and end in that keyspace; its creation is not in
    ///   the WAL (create it on the replica before applying its writes).
    /// - Returned writes were acknowledged, not necessarily durable: without
    ///   [`WriteOptions::sync`] a power loss can still take them from the database.
    ///
    /// ```
    /// # fn main() -> matrixkv::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// use matrixkv::{BatchOp, Db, Options, WriteBatch};
    /// let mut opts = Options::new(dir.path());
    /// opts.wal_retention_segments = 4; // reach back past flushes
    /// let db = Db::open(opts)?;
    /// db.put("a", "1")?;
    /// let from = db.last_sequence().next();
    /// let mut batch = WriteBatch::new();
    /// batch.put("b", "2");
    /// batch.delete("a");
    /// db.write(batch)?;
    /// db.flush()?;
    /// let updates: Vec<_> = db.updates_since(from)?.collect::<matrixkv::Result<_>>()?;
    /// assert_eq!(updates.len(), 1);
    /// let (seq, batch) = &updates[0];
    /// assert_eq!(*seq, from);
    /// let ops: Vec<BatchOp<'_>> = batch.iter().collect();
    /// assert_eq!(ops, [BatchOp::Put { key: b"b", value: b"2" }, BatchOp::Delete { key: b"a" }]);
    /// # db.close()?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// `InvalidArgument` naming the oldest sequence number the WAL still holds if `seq` is
    /// older: the replica needs a full copy first ([`Db::checkpoint`], then follow from the
    /// checkpoint's sequence number + 1). The iterator's items report corruption or I/O errors
    /// reading the WAL, and `Closed` once the database shuts down.
    pub fn updates_since(&self, seq: SeqNo) -> Result<crate::UpdatesIter> {
        self.inner.updates_since(seq)
    }

    /// Makes every write acknowledged so far durable, as if the last of them had been a sync
    /// write (RocksDB's `SyncWAL`): for periodic durability points without syncing every write
    /// (the Redis server's `appendfsync everysec`). Waits for no flush or compaction.
    ///
    /// ```
    /// # fn main() -> matrixkv::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = matrixkv::Db::open(matrixkv::Options::new(dir.path()))?;
    /// db.put("a", "1")?; // acknowledged: survives a process crash, not yet a power loss
    /// db.put("b", "2")?;
    /// db.sync_wal()?; // both survive a power loss from here on
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// `NoSpace` if the slow tier cannot take the values written since the last sync (the
    /// writes stay acknowledged but not durable; a later call tries again); an I/O error of
    /// the sync, after which the database refuses writes; `ReadOnly` on a read-only handle.
    pub fn sync_wal(&self) -> Result<()> {
        self.inner.sync_wal()
    }

    /// Turns the active memtable into an L0 table and waits until every memtable is flushed.
    pub fn flush(&self) -> Result<()> {
        self.inner.check_writable("flush")?;
        flush_inner(&self.inner)
    }

    /// Compacts the user keys in `[begin, end]` of the default keyspace (`None`: unbounded on
    /// that side; both `None`: the whole database, every keyspace) down to the deepest level that holds data, as RocksDB's
    /// `CompactRange` does, and waits for it. Flushes the memtables first, then drains the
    /// matrix container (every row that existed at the call, whatever keys it holds) or the
    /// L0 tables into L1, then pushes the range's files down one level at a time. Versions a
    /// live snapshot needs are kept. Writes go on meanwhile; data written during the call may
    /// stay above. Runs even with `Options::compaction_enabled` off.
    ///
    /// ```
    /// # fn main() -> matrixkv::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = matrixkv::Db::open(matrixkv::Options::new(dir.path()))?;
    /// db.put("a", "1")?;
    /// db.compact_range(None, None)?; // everything down to the deepest level
    /// db.compact_range(Some(b"a"), Some(b"m"))?;
    /// assert_eq!(db.get_int_property("matrixkv.num-files-at-level0")?, 0);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// `InvalidArgument` if `begin > end`; the error of a failed flush or compaction step
    /// (for example `NoSpace`); `Closed` if the database shuts down meanwhile.
    pub fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.inner.check_writable("compact_range")?;
        if begin.is_none() && end.is_none() {
            return compact_engine_range(&self.inner, None, None);
        }
        let (b, e) = self
            .inner
            .compact_bounds(&self.inner.default_keyspace, begin, end)?;
        compact_engine_range(&self.inner, b.as_deref(), e.as_deref())
    }

    /// Waits until no flush is pending and the compaction picker has nothing left to do, blob
    /// GC included (the blob files are within `Options::blob_space_budget`).
    pub fn wait_for_compactions(&self) -> Result<()> {
        self.inner.check_writable("wait_for_compactions")?;
        let mut st = self.inner.state.lock();
        loop {
            engine::check_poison(&st)?;
            let idle = st.imm.is_empty()
                && !st.flushing
                && !st.compacting
                && (!self.inner.opts.compaction_enabled || !self.inner.has_compaction_work(&st));
            if idle {
                // The compaction thread announces a finished job before it deletes the files
                // the job made obsolete; the caller (a benchmark measuring space, a test
                // listing the directory) expects them gone. Passes are serialized, so this
                // one also waits for a pass in progress.
                drop(st);
                self.inner.delete_obsolete_files(false);
                return Ok(());
            }
            // Woken by the background threads after every job (finished or failed), a poison
            // and the shutdown; timed only by the no-space deadline.
            self.inner.wait_for_background(&mut st)?;
        }
    }

    /// Reads every table, RowTable and blob file of the current version completely and checks
    /// every checksum, the key order, forward pointers, the bloom filters, the table properties
    /// and the blob files' record counts. Returns the number of files and rows checked.
    ///
    /// # Errors
    /// The first corruption found, with its file and offset.
    pub fn verify(&self) -> Result<usize> {
        let view = self.inner.read_view();
        let mut checked = 0;
        if let Some(handle) = self.inner.levels.container() {
            let c = view.version.container();
            let rows: Vec<_> = c.receiver.iter().chain(c.compactor.iter()).collect();
            for m in &rows {
                let reader = handle.reader(m)?;
                reader.verify()?;
                // The hints are checked against the row they point into, while it exists.
                if let Some(prev) = rows.iter().find(|p| p.row == m.prev_row) {
                    let prev = handle.reader(prev)?;
                    reader.verify_forward_pointers(&prev)?;
                }
                checked += 1;
            }
        }
        for level in 0..self.inner.opts.num_levels {
            for f in view.version.files(level) {
                self.inner.tables.get(level, f)?.verify()?;
                checked += 1;
            }
        }
        for b in view.version.blob_files().values() {
            self.inner
                .blobs
                .verify_file(b.meta.number, b.meta.records, b.meta.record_bytes)?;
            checked += 1;
        }
        Ok(checked)
    }

    /// Writes an openable, consistent copy of the database to `dir`, laid out as
    /// [`Options::new`] lays out a database (`dir/fast` and `dir/slow`): open it with this
    /// database's options and `Options::new(dir)`'s directories. It holds every write
    /// acknowledged before the call (the memtables are flushed first) and none made after the
    /// flush. SSTables and blob files are hard-linked where the file system allows it, copied
    /// otherwise; the matrix container's live rows are exported into a new container file
    /// (a fast tier cannot be hard-linked). Writes go on meanwhile.
    ///
    /// ```
    /// # fn main() -> matrixkv::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let mut opts = matrixkv::Options::new(dir.path().join("db"));
    /// # opts.container_bytes = 8 << 20;
    /// # opts.write_buffer_bytes = 2 << 20; // the container holds at least 4 memtables
    /// let db = matrixkv::Db::open(opts.clone())?;
    /// db.put("k", "v")?;
    /// let info = db.checkpoint(dir.path().join("ckpt"))?;
    /// db.put("k", "newer")?;
    /// let mut copy_opts = opts.clone();
    /// copy_opts.fast_dir = dir.path().join("ckpt/fast");
    /// copy_opts.slow_dir = dir.path().join("ckpt/slow");
    /// let copy = matrixkv::Db::open(copy_opts)?;
    /// assert_eq!(copy.get("k")?.as_deref(), Some(&b"v"[..]));
    /// assert_eq!(copy.last_sequence(), info.sequence);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// `InvalidArgument` if a target directory exists and is not empty; the error of the flush
    /// (`NoSpace`, for one) or of the copy (a full target disk): the partial checkpoint is
    /// removed and the database is unchanged.
    pub fn checkpoint(&self, dir: impl AsRef<std::path::Path>) -> Result<crate::CheckpointInfo> {
        let paths = Options::new(dir);
        let mut target = Options::new("");
        target.fast_dir = paths.fast_dir;
        target.slow_dir = paths.slow_dir;
        self.checkpoint_to(target)
    }

    /// Like [`Db::checkpoint`], into `target`'s `fast_dir` and `slow_dir` on `target`'s
    /// `tiers` (the operating system's files when `None`); the other fields of `target` are
    /// ignored. Hard links are tried only between operating-system files.
    ///
    /// # Errors
    /// As [`Db::checkpoint`].
    pub fn checkpoint_to(&self, target: Options) -> Result<crate::CheckpointInfo> {
        self.inner.check_writable("checkpoint")?;
        let started = std::time::Instant::now();
        self.flush()?;
        self.inner.checkpoint(target, started)
    }

    /// Stops the background threads, persists the WAL (and first the blob files of values
    /// separated at write time that it points into), and releases the database lock. Handles
    /// that outlive the `Db` (a [`crate::Keyspace`], a [`Snapshot`]) answer every operation
    /// with [`Error::Closed`] from then on; dropping the `Db` does the same without the sync.
    ///
    /// # Errors
    /// The WAL or a blob file could not be persisted; or an earlier background failure
    /// poisoned the database (its error is returned so that it is not lost).
    pub fn close(mut self) -> Result<()> {
        self.shutdown();
        self.inner.discard_spare_value_file();
        let synced = {
            let mut w = self.inner.writer.lock();
            // The WAL's pointers lead to these values: durable before the pointers are.
            self.inner.sync_value_files(&mut w).and_then(|any| {
                if any {
                    self.inner.log_values_durable(&mut w)?;
                }
                w.wal.sync()
            })
        };
        self.inner.locks.lock().clear();
        synced?;
        match self.inner.state.lock().poison.clone() {
            Some(cause) => Err(Error::Poisoned { cause }),
            None => Ok(()),
        }
    }

    /// Marks the instance closed, stops its background threads, and waits for a commit leader
    /// that checked `closed` before it was set: no write reaches the WAL afterwards.
    fn shutdown(&mut self) {
        {
            let mut st = self.inner.state.lock();
            st.shutting_down = true;
            self.inner
                .closed
                .store(true, std::sync::atomic::Ordering::Release);
            self.inner.work_cv.notify_all();
            self.inner.bg_cv.notify_all();
        }
        drop(self.inner.writer.lock());
        for t in self.threads.drain(..) {
            if t.join().is_err() {
                log::error!("matrixkv: a background thread panicked");
            }
        }
        self.inner.wait_for_spare_value_file();
        if let Some(pool) = &self.inner.level_readers {
            pool.stop();
        }
    }
}

impl Drop for Db {
    /// Signals the background threads and waits for them to finish their current job, then
    /// releases the lock. Does no I/O of its own; call [`Db::close`] to also persist the WAL
    /// and see errors.
    fn drop(&mut self) {
        self.shutdown();
        self.inner.locks.lock().clear();
    }
}
