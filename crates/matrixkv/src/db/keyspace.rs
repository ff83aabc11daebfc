//! [`Keyspace`]: the handle on one keyspace of an open database, and the
//! [`WriteBatch`] operations that name one. Above the engine (it holds the engine's
//! [`DbInner`]); the keyspaces themselves (encoding, settings) are `crate::keyspace`.

use std::sync::Arc;

use crate::batch::WriteBatch;
use crate::engine::DbInner;
use crate::error::{Error, Result};
use crate::iter::db_iter::DbIterator;
use crate::key::ValueKind;
use crate::keyspace::registry::Settings;
use crate::options::{ReadOptions, WriteOptions};

/// A handle on one keyspace of an open database, from [`crate::Db::create_keyspace`] or
/// [`crate::Db::keyspace`]. Cheap to clone; usable from any thread. Reads and writes through
/// it see only the keyspace's keys; snapshots of the database apply (pass
/// [`crate::Snapshot::read_options`]); [`crate::WriteBatch::put_cf`] and its siblings write to
/// several keyspaces atomically. Once the keyspace is dropped, every call returns
/// [`Error::KeyspaceDropped`].
///
/// ```
/// # fn main() -> matrixkv::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// use matrixkv::{Db, KeyspaceOptions, Options};
/// let db = Db::open(Options::new(dir.path()))?;
/// let users = db.create_keyspace("users", KeyspaceOptions::default())?;
/// users.put("alice", "1")?;
/// db.put("alice", "other keyspace")?;
/// let snap = db.snapshot();
/// users.delete("alice")?;
/// assert_eq!(users.get("alice")?, None);
/// assert_eq!(users.get_opt("alice", &snap.read_options())?.as_deref(), Some(&b"1"[..]));
/// assert_eq!(db.get("alice")?.as_deref(), Some(&b"other keyspace"[..]));
/// assert_eq!(db.list_keyspaces(), ["default", "users"]);
/// drop(snap);
/// db.drop_keyspace("users")?;
/// assert!(matches!(users.get("alice"), Err(matrixkv::Error::KeyspaceDropped { .. })));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Keyspace {
    inner: Arc<DbInner>,
    settings: Arc<Settings>,
}

impl std::fmt::Debug for Keyspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyspace")
            .field("name", &self.settings.name)
            .field("id", &self.settings.id)
            .finish()
    }
}

impl Keyspace {
    pub(crate) fn new(inner: Arc<DbInner>, settings: Arc<Settings>) -> Keyspace {
        Keyspace { inner, settings }
    }

    /// The keyspace's name.
    pub fn name(&self) -> &str {
        &self.settings.name
    }

    /// The keyspace's id: 0 for the default keyspace, never reused after a drop. Batches
    /// read back with [`crate::WriteBatch::iter_with_keyspace`] name keyspaces by it.
    pub fn id(&self) -> u32 {
        self.settings.id
    }

    /// `Err(KeyspaceDropped)` once the keyspace is dropped.
    fn live(&self) -> Result<()> {
        if self.inner.keyspaces().live(self.settings.id).is_some() {
            Ok(())
        } else {
            Err(Error::KeyspaceDropped {
                name: self.settings.name.clone(),
            })
        }
    }

    fn write_one(
        &self,
        kind: ValueKind,
        key: &[u8],
        value: &[u8],
        wo: &WriteOptions,
    ) -> Result<()> {
        let b = crate::engine::single(self.settings.id, kind, key, value);
        self.inner.write(b, wo.sync)
    }

    /// Sets `key` to `value` (see [`crate::Db::put`]).
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
        self.write_one(ValueKind::Value, key.as_ref(), value.as_ref(), wo)
    }

    /// Deletes `key`.
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.delete_opt(key, &WriteOptions::default())
    }

    /// Deletes `key` with write options.
    pub fn delete_opt(&self, key: impl AsRef<[u8]>, wo: &WriteOptions) -> Result<()> {
        self.write_one(ValueKind::Deletion, key.as_ref(), &[], wo)
    }

    /// Deletes every key of the keyspace in `[start, end)` (see [`crate::Db::delete_range`]).
    pub fn delete_range(&self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> Result<()> {
        self.delete_range_opt(start, end, &WriteOptions::default())
    }

    /// [`Keyspace::delete_range`] with write options.
    pub fn delete_range_opt(
        &self,
        start: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
        wo: &WriteOptions,
    ) -> Result<()> {
        self.write_one(ValueKind::RangeDeletion, start.as_ref(), end.as_ref(), wo)
    }

    /// Merges `operand` into `key` with the keyspace's merge operator (see [`crate::Db::merge`]).
    pub fn merge(&self, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) -> Result<()> {
        self.merge_opt(key, operand, &WriteOptions::default())
    }

    /// [`Keyspace::merge`] with write options.
    pub fn merge_opt(
        &self,
        key: impl AsRef<[u8]>,
        operand: impl AsRef<[u8]>,
        wo: &WriteOptions,
    ) -> Result<()> {
        self.write_one(ValueKind::Merge, key.as_ref(), operand.as_ref(), wo)
    }

    /// The value of `key`, or `None`.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.get_opt(key, &ReadOptions::default())
    }

    /// The value of `key` with read options (a snapshot).
    pub fn get_opt(&self, key: impl AsRef<[u8]>, ro: &ReadOptions) -> Result<Option<Vec<u8>>> {
        self.live()?;
        self.inner.get(&self.settings, key.as_ref(), ro.snapshot)
    }

    /// The values of `keys` at one point in time (see [`crate::Db::multi_get`]).
    pub fn multi_get<K: AsRef<[u8]>>(
        &self,
        keys: impl IntoIterator<Item = K>,
    ) -> Vec<Result<Option<Vec<u8>>>> {
        self.multi_get_opt(keys, &ReadOptions::default())
    }

    /// [`Keyspace::multi_get`] with read options.
    pub fn multi_get_opt<K: AsRef<[u8]>>(
        &self,
        keys: impl IntoIterator<Item = K>,
        ro: &ReadOptions,
    ) -> Vec<Result<Option<Vec<u8>>>> {
        let keys: Vec<K> = keys.into_iter().collect();
        if let Err(e) = self.live() {
            return keys.iter().map(|_| Err(e.duplicate())).collect();
        }
        let refs: Vec<&[u8]> = keys.iter().map(AsRef::as_ref).collect();
        self.inner.multi_get(&self.settings, &refs, ro.snapshot)
    }

    /// An iterator over the keyspace's latest state; keys come without any prefix.
    pub fn iter(&self) -> Result<DbIterator> {
        self.iter_opt(&ReadOptions::default())
    }

    /// An iterator with read options (a snapshot, bounds within the keyspace).
    pub fn iter_opt(&self, ro: &ReadOptions) -> Result<DbIterator> {
        self.live()?;
        self.inner.iter(&self.settings, ro)
    }

    /// Compacts the keyspace's keys in `[begin, end]` (see [`crate::Db::compact_range`]).
    pub fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.live()?;
        let (b, e) = self.inner.compact_bounds(&self.settings, begin, end)?;
        super::compact_engine_range(&self.inner, b.as_deref(), e.as_deref())
    }
}

/// The operations of a batch on a keyspace other than the default one.
impl WriteBatch {
    /// Adds "set `key` to `value` in `keyspace`" (RocksDB's `Put` with a column family).
    ///
    /// ```
    /// # fn main() -> matrixkv::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = matrixkv::Db::open(matrixkv::Options::new(dir.path()))?;
    /// let users = db.create_keyspace("users", matrixkv::KeyspaceOptions::default())?;
    /// let mut batch = matrixkv::WriteBatch::new();
    /// batch.put("n", "2"); // the default keyspace
    /// batch.put_cf(&users, "alice", "admin");
    /// db.write(batch)?; // both or neither
    /// assert_eq!(users.get("alice")?.as_deref(), Some(&b"admin"[..]));
    /// assert_eq!(db.get("alice")?, None);
    /// # Ok(()) }
    /// ```
    pub fn put_cf(&mut self, keyspace: &Keyspace, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        self.put_in(keyspace.id(), key.as_ref(), value.as_ref());
    }

    /// Adds "delete `key` in `keyspace`".
    pub fn delete_cf(&mut self, keyspace: &Keyspace, key: impl AsRef<[u8]>) {
        self.delete_in(keyspace.id(), key.as_ref());
    }

    /// Adds "merge `operand` into `key` in `keyspace`" (with the keyspace's merge operator).
    pub fn merge_cf(
        &mut self,
        keyspace: &Keyspace,
        key: impl AsRef<[u8]>,
        operand: impl AsRef<[u8]>,
    ) {
        self.merge_in(keyspace.id(), key.as_ref(), operand.as_ref());
    }

    /// Adds "delete every key in `[start, end)` of `keyspace`".
    pub fn delete_range_cf(
        &mut self,
        keyspace: &Keyspace,
        start: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
    ) {
        self.delete_range_in(keyspace.id(), start.as_ref(), end.as_ref());
    }
}
