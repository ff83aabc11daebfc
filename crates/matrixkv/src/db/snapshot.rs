//! [`Snapshot`]: a point-in-time view of a database.

use std::sync::Arc;

#[cfg(doc)]
use super::Db;
use crate::engine::DbInner;
use crate::error::Result;
use crate::iter::db_iter::DbIterator;
use crate::key::SeqNo;
use crate::options::ReadOptions;

/// A point-in-time view of a database. Reads through it see exactly the writes acknowledged
/// before it was taken. Dropping it lets compaction discard the versions it kept alive.
pub struct Snapshot {
    pub(super) inner: Arc<DbInner>,
    pub(super) seq: SeqNo,
}

impl Snapshot {
    /// The sequence number of this snapshot.
    pub fn sequence(&self) -> SeqNo {
        self.seq
    }

    /// Read options reading at this snapshot (valid while the snapshot is alive).
    pub fn read_options(&self) -> ReadOptions {
        ReadOptions {
            snapshot: Some(self.seq),
            ..ReadOptions::default()
        }
    }

    /// The value of `key` at this snapshot.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.inner
            .get(&self.inner.default_keyspace, key.as_ref(), Some(self.seq))
    }

    /// The values of `keys` at this snapshot (see [`Db::multi_get`]).
    pub fn multi_get<K: AsRef<[u8]>>(
        &self,
        keys: impl IntoIterator<Item = K>,
    ) -> Vec<Result<Option<Vec<u8>>>> {
        let keys: Vec<K> = keys.into_iter().collect();
        let refs: Vec<&[u8]> = keys.iter().map(AsRef::as_ref).collect();
        self.inner
            .multi_get(&self.inner.default_keyspace, &refs, Some(self.seq))
    }

    /// An iterator at this snapshot.
    pub fn iter(&self) -> Result<DbIterator> {
        self.inner
            .iter(&self.inner.default_keyspace, &self.read_options())
    }
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot").field("seq", &self.seq).finish()
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        let mut st = self.inner.state.lock();
        if let Some(n) = st.snapshots.get_mut(&self.seq.0) {
            *n -= 1;
            if *n == 0 {
                st.snapshots.remove(&self.seq.0);
            }
        }
    }
}
