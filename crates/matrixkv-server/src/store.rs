//! How Redis data lives in matrixkv (docs/format/server-keys.md), and transactions over it.
//!
//! Each Redis database is a keyspace (`0` the default one, `N` the keyspace `redis-db<N>`).
//! In it, every Redis key has a *metadata* entry `M<key>` = `[type][expire-at ms, u64 LE]
//! [payload]`: a string's payload is its value, a hash's is `[version u64 LE][fields u64 LE]`.
//! A hash field is the entry `H<key length u32 LE><key><version u64 LE><field>` = its value;
//! a new hash gets a new version, and deleting a hash deletes the range of its version's
//! fields, so no field outlives its hash.
//!
//! Every command runs in a [`Txn`]: its writes go into one `WriteBatch` committed at the end
//! (a `MULTI`/`EXEC` block is one `Txn`), and its reads see its own writes first, over one
//! engine snapshot taken when the `Txn` starts (so MGET or HGETALL never see half of another
//! client's transaction; writers take the snapshot under the write lock, so it holds every
//! committed write).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use matrixkv::{
    CompactionFilter, Db, Decision, Keyspace, KeyspaceOptions, Options, ReadOptions, Snapshot,
    WriteBatch,
};

/// Type byte of a string's metadata.
pub const STRING: u8 = b's';
/// Type byte of a hash's metadata.
pub const HASH: u8 = b'h';
/// Length of the metadata header: type byte and expiry.
pub const META_HEADER: usize = 9;

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The metadata key of Redis key `key`.
pub fn meta_key(key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 1);
    k.push(b'M');
    k.extend_from_slice(key);
    k
}

/// The prefix of every field of hash `key` at `version`.
pub fn field_prefix(key: &[u8], version: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 13);
    k.push(b'H');
    k.extend_from_slice(&(key.len() as u32).to_le_bytes());
    k.extend_from_slice(key);
    k.extend_from_slice(&version.to_le_bytes());
    k
}

/// The smallest key after every key that starts with `prefix` (`None`: no such key).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// A decoded metadata entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    /// [`STRING`] or [`HASH`].
    pub kind: u8,
    /// Expiry in ms since the epoch; 0 for none.
    pub expire_at: u64,
    /// The string's value, or the hash's `[version][fields]`.
    pub payload: Vec<u8>,
}

impl Meta {
    /// Decodes a metadata value; `None` for bytes this layout never writes.
    pub fn decode(v: &[u8]) -> Option<Meta> {
        let (kind, expire_at) = Meta::decode_header(v)?;
        Some(Meta {
            kind,
            expire_at,
            payload: v.get(META_HEADER..)?.to_vec(),
        })
    }

    /// The kind and expiry of a metadata value, without copying its payload.
    pub fn decode_header(v: &[u8]) -> Option<(u8, u64)> {
        let (&kind, rest) = v.split_first()?;
        let exp = rest.get(..8)?;
        let mut e = [0u8; 8];
        e.copy_from_slice(exp);
        Some((kind, u64::from_le_bytes(e)))
    }

    /// Encodes it.
    pub fn encode(&self) -> Vec<u8> {
        Meta::encode_parts(self.kind, self.expire_at, &self.payload)
    }

    /// The encoding of a metadata entry of `kind`, `expire_at` and `payload`.
    pub fn encode_parts(kind: u8, expire_at: u64, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::with_capacity(META_HEADER + payload.len());
        v.push(kind);
        v.extend_from_slice(&expire_at.to_le_bytes());
        v.extend_from_slice(payload);
        v
    }

    /// True once its expiry has passed.
    pub fn expired(&self, now: u64) -> bool {
        self.expire_at != 0 && now >= self.expire_at
    }

    /// A hash's version and field count.
    pub fn hash_header(&self) -> (u64, u64) {
        let word = |i: usize| {
            let mut b = [0u8; 8];
            if let Some(s) = self.payload.get(i * 8..i * 8 + 8) {
                b.copy_from_slice(s);
            }
            u64::from_le_bytes(b)
        };
        (word(0), word(1))
    }

    /// A hash's metadata.
    pub fn hash(version: u64, fields: u64, expire_at: u64) -> Meta {
        let mut payload = version.to_le_bytes().to_vec();
        payload.extend_from_slice(&fields.to_le_bytes());
        Meta {
            kind: HASH,
            expire_at,
            payload,
        }
    }
}

/// Drops the metadata of strings whose expiry passed, in compaction (hashes are dropped
/// lazily, with their fields, when next touched).
struct ExpiredStrings;

impl CompactionFilter for ExpiredStrings {
    fn name(&self) -> &str {
        "matrixkv-server-expiry"
    }

    fn filter(&self, _level: usize, key: &[u8], value: &[u8]) -> Decision {
        if key.first() == Some(&b'M')
            && let Some(m) = Meta::decode(value)
            && m.kind == STRING
            && m.expired(now_ms())
        {
            return Decision::Remove;
        }
        Decision::Keep
    }
}

/// The engine and its Redis databases.
pub struct Store {
    db: Db,
    dbs: Vec<Keyspace>,
    /// Held by every command that writes, so a read-modify-write is atomic.
    pub write_lock: tokio::sync::Mutex<()>,
}

fn keyspace_name(n: usize) -> String {
    format!("redis-db{n}")
}

impl Store {
    /// Opens (creating) the database with `databases` Redis databases.
    ///
    /// # Errors
    /// The engine's errors.
    pub fn open(mut opts: Options, databases: usize) -> matrixkv::Result<Store> {
        let filter: Arc<dyn CompactionFilter> = Arc::new(ExpiredStrings);
        opts.compaction_filter = Some(Arc::clone(&filter));
        for n in 1..databases {
            opts.keyspace_options.insert(
                keyspace_name(n),
                KeyspaceOptions {
                    compaction_filter: Some(Arc::clone(&filter)),
                    ..KeyspaceOptions::default()
                },
            );
        }
        let db = Db::open(opts)?;
        let mut dbs = vec![db.keyspace(matrixkv::DEFAULT_KEYSPACE)?];
        for n in 1..databases {
            let name = keyspace_name(n);
            let ks = match db.keyspace(&name) {
                Ok(k) => k,
                Err(_) => db.create_keyspace(
                    &name,
                    KeyspaceOptions {
                        compaction_filter: Some(Arc::clone(&filter)),
                        ..KeyspaceOptions::default()
                    },
                )?,
            };
            dbs.push(ks);
        }
        Ok(Store {
            db,
            dbs,
            write_lock: tokio::sync::Mutex::new(()),
        })
    }

    /// Number of Redis databases.
    pub fn databases(&self) -> usize {
        self.dbs.len()
    }

    /// The engine.
    pub fn engine(&self) -> &Db {
        &self.db
    }

    /// Closes the engine (every acknowledged write is in the WAL).
    ///
    /// # Errors
    /// The engine's close errors.
    pub fn close(self) -> matrixkv::Result<()> {
        drop(self.dbs);
        self.db.close()
    }

    fn ks(&self, db: usize) -> matrixkv::Result<&Keyspace> {
        self.dbs
            .get(db)
            .ok_or_else(|| matrixkv::Error::invalid("DB index is out of range"))
    }
}

/// A transaction: reads see its own writes; [`Txn::commit`] applies them as one batch.
pub struct Txn<'a> {
    store: &'a Store,
    /// What every read sees (besides this transaction's own writes).
    read: ReadOptions,
    _snapshot: Snapshot,
    batch: WriteBatch,
    overlay: BTreeMap<(usize, Vec<u8>), Option<Vec<u8>>>,
    ranges: Vec<(usize, Vec<u8>, Vec<u8>)>,
}

impl<'a> Txn<'a> {
    /// An empty transaction.
    pub fn new(store: &'a Store) -> Txn<'a> {
        let snapshot = store.db.snapshot();
        Txn {
            store,
            read: snapshot.read_options(),
            _snapshot: snapshot,
            batch: WriteBatch::new(),
            overlay: BTreeMap::new(),
            ranges: Vec::new(),
        }
    }

    fn deleted_by_range(&self, db: usize, key: &[u8]) -> bool {
        self.ranges
            .iter()
            .any(|(d, s, e)| *d == db && key >= s.as_slice() && key < e.as_slice())
    }

    /// The value of engine key `key` in database `db`.
    ///
    /// # Errors
    /// The engine's read errors.
    pub fn get(&self, db: usize, key: &[u8]) -> matrixkv::Result<Option<Vec<u8>>> {
        if let Some(v) = self.overlay.get(&(db, key.to_vec())) {
            return Ok(v.clone());
        }
        if self.deleted_by_range(db, key) {
            return Ok(None);
        }
        self.store.ks(db)?.get_opt(key, &self.read)
    }

    /// The live metadata of Redis key `key` (expired metadata reads as absent).
    ///
    /// # Errors
    /// The engine's read errors.
    pub fn meta(&self, db: usize, key: &[u8]) -> matrixkv::Result<Option<Meta>> {
        Ok(self
            .get(db, &meta_key(key))?
            .and_then(|v| Meta::decode(&v))
            .filter(|m| !m.expired(now_ms())))
    }

    /// Sets engine key `key`.
    pub fn put(&mut self, db: usize, key: Vec<u8>, value: Vec<u8>) -> matrixkv::Result<()> {
        self.batch.put_cf(self.store.ks(db)?, &key, &value);
        self.overlay.insert((db, key), Some(value));
        Ok(())
    }

    /// Deletes engine key `key`.
    pub fn delete(&mut self, db: usize, key: Vec<u8>) -> matrixkv::Result<()> {
        self.batch.delete_cf(self.store.ks(db)?, &key);
        self.overlay.insert((db, key), None);
        Ok(())
    }

    /// Deletes the engine keys in `[start, end)`.
    pub fn delete_range(
        &mut self,
        db: usize,
        start: Vec<u8>,
        end: Vec<u8>,
    ) -> matrixkv::Result<()> {
        self.batch.delete_range_cf(self.store.ks(db)?, &start, &end);
        self.overlay
            .retain(|(d, k), _| !(*d == db && k.as_slice() >= start.as_slice() && k < &end));
        self.ranges.push((db, start, end));
        Ok(())
    }

    /// Deletes Redis key `key` whatever its type (a hash with its fields). True if it existed.
    ///
    /// # Errors
    /// The engine's errors.
    pub fn delete_key(&mut self, db: usize, key: &[u8]) -> matrixkv::Result<bool> {
        let Some(raw) = self.get(db, &meta_key(key))? else {
            return Ok(false);
        };
        let live = Meta::decode(&raw).filter(|m| !m.expired(now_ms()));
        if let Some(m) = Meta::decode(&raw)
            && m.kind == HASH
        {
            let prefix = field_prefix(key, m.hash_header().0);
            if let Some(end) = prefix_end(&prefix) {
                self.delete_range(db, prefix, end)?;
            }
        }
        self.delete(db, meta_key(key))?;
        Ok(live.is_some())
    }

    /// Every engine entry of database `db` whose key starts with `prefix`, in order, with this
    /// transaction's writes applied; at most `limit` entries from `from` on.
    ///
    /// # Errors
    /// The engine's read errors.
    pub fn scan(
        &self,
        db: usize,
        prefix: &[u8],
        from: &[u8],
        limit: usize,
    ) -> matrixkv::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let start = if from > prefix { from } else { prefix };
        let mut merged: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
        let mut it = self.store.ks(db)?.iter_opt(&self.read)?;
        it.seek(start)?;
        // Read past `limit` by the overlay's size, so deletions in it still leave enough.
        let want = limit.saturating_add(self.overlay.len());
        let mut n = 0usize;
        while it.valid() && it.key().starts_with(prefix) && n < want {
            if !self.deleted_by_range(db, it.key()) {
                merged.insert(it.key().to_vec(), Some(it.value().to_vec()));
                n += 1;
            }
            it.next()?;
        }
        let complete = !(it.valid() && it.key().starts_with(prefix));
        for ((d, k), v) in &self.overlay {
            if *d == db && k.starts_with(prefix) && k.as_slice() >= start {
                // Past the engine's last key read, only if the engine's scan was complete.
                if complete || merged.keys().next_back().is_some_and(|last| k <= last) {
                    merged.insert(k.clone(), v.clone());
                }
            }
        }
        Ok(merged
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .take(limit)
            .collect())
    }

    /// Applies every write as one atomic batch, a sync write if `sync` (`appendfsync always`).
    ///
    /// # Errors
    /// The engine's write errors (nothing is applied then).
    pub fn commit(self, sync: bool) -> matrixkv::Result<()> {
        if self.batch.is_empty() {
            return Ok(());
        }
        self.store
            .db
            .write_opt(self.batch, &matrixkv::WriteOptions { sync })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_the_key_layout_matches_the_format_doc() {
        let doc = include_str!("../../../docs/format/server-keys.md");
        let m = Meta {
            kind: STRING,
            expire_at: 0x0102,
            payload: b"v".to_vec(),
        };
        let hex = |b: &[u8]| {
            b.iter()
                .map(|x| format!("{x:02x}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        for (what, bytes) in [
            ("meta key", meta_key(b"k")),
            ("string meta", m.encode()),
            ("hash meta", Meta::hash(7, 2, 0).encode()),
            ("field key", [field_prefix(b"k", 7), b"f".to_vec()].concat()),
        ] {
            let line = format!("{what}: {}", hex(&bytes));
            assert!(
                doc.contains(&line),
                "docs/format/server-keys.md lacks `{line}`"
            );
        }
        assert_eq!(Meta::decode(&m.encode()), Some(m));
        assert_eq!(Meta::hash(7, 2, 9).hash_header(), (7, 2));
        assert_eq!(prefix_end(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff\xff"), None);
    }
}
