//! Creating and dropping keyspaces (`crate::keyspace`): a manifest edit records each, and a
//! drop deletes the keyspace's keys with one range deletion through the write path.
//!
//! Lock order: `keyspace_ddl` (one creation or drop at a time), then `manifest`, then `state`;
//! `keyspace_gate` and `keyspaces` are leaves.

use std::sync::Arc;

use super::DbInner;
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::keyspace::KeyspaceOptions;
use crate::keyspace::registry::{Bounds, KeyspaceRecord, Registry, Settings};
use crate::version::edit::VersionEdit;

impl DbInner {
    /// Records `record` in the manifest, then publishes `next`.
    fn install_keyspace(&self, record: KeyspaceRecord, next: Registry) -> Result<()> {
        let manifest = self.manifest.lock();
        let mut st = self.state.lock();
        let mut edit = VersionEdit {
            keyspaces: vec![record],
            ..VersionEdit::default()
        };
        self.install_edit(manifest, &mut st, &mut edit)?;
        self.refresh_view(&st);
        *self.keyspaces.write() = Arc::new(next);
        Ok(())
    }

    /// Creates keyspace `name` (see `Db::create_keyspace`).
    pub(crate) fn create_keyspace(
        &self,
        name: &str,
        opts: &KeyspaceOptions,
    ) -> Result<Arc<Settings>> {
        let _ddl = self.keyspace_ddl.lock();
        let (record, next) = self.keyspaces().with_created(name, opts)?;
        let id = record.id;
        self.install_keyspace(record, next)?;
        self.keyspaces()
            .live(id)
            .cloned()
            .ok_or_else(|| Error::invalid("the keyspace just created is missing"))
    }

    /// Drops keyspace `name` (see `Db::drop_keyspace`).
    pub(crate) fn drop_keyspace(self: &Arc<Self>, name: &str) -> Result<()> {
        if name == crate::keyspace::DEFAULT_KEYSPACE {
            return Err(Error::invalid("the default keyspace cannot be dropped"));
        }
        let _ddl = self.keyspace_ddl.lock();
        let before = self.keyspaces();
        let ks = before
            .by_name(name)
            .cloned()
            .ok_or_else(|| self.no_such_keyspace(name))?;
        {
            // Writes to the keyspace that passed their check are queued by now; later ones
            // fail it.
            let _gate = self.keyspace_gate.write();
            *self.keyspaces.write() = Arc::new(before.with_dropped(ks.id, true));
        }
        let mut batch = WriteBatch::new();
        batch.delete_keyspace(ks.id);
        let deleted = self.write(batch, true);
        let recorded = deleted.and_then(|()| {
            let record = KeyspaceRecord {
                id: ks.id,
                name: ks.name.clone(),
                ttl: ks.ttl.is_some(),
                dropped: true,
            };
            self.install_keyspace(record, self.keyspaces().as_ref().clone())
        });
        if recorded.is_err() {
            // Not dropped on disk: it stays usable (its keys may be deleted already).
            let current = self.keyspaces();
            *self.keyspaces.write() = Arc::new(current.with_dropped(ks.id, false));
        }
        recorded
    }

    /// The error for a keyspace name that names no live keyspace.
    pub(crate) fn no_such_keyspace(&self, name: &str) -> Error {
        Error::invalid(format!(
            "no keyspace named {name:?}; the database has {:?}",
            self.keyspaces().names()
        ))
    }

    /// Engine-key bounds for `compact_range` over the user keys `[begin, end]` of `ks` (the
    /// whole keyspace for `None`, `None`).
    ///
    /// # Errors
    /// `InvalidArgument` if `begin > end`.
    pub(crate) fn compact_bounds(
        &self,
        ks: &Settings,
        begin: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Result<Bounds> {
        if let (Some(b), Some(e)) = (begin, end)
            && b > e
        {
            return Err(Error::invalid(format!(
                "compact_range: begin {} is after end {}",
                b.escape_ascii(),
                e.escape_ascii()
            )));
        }
        if ks.prefix.is_empty() {
            return Ok((begin.map(<[u8]>::to_vec), end.map(<[u8]>::to_vec)));
        }
        let b = ks.engine_key(begin.unwrap_or_default()).into_owned();
        // `end` is inclusive: the first key after the keyspace stands for "its last key".
        let e = match end {
            Some(e) => Some(ks.engine_key(e).into_owned()),
            None => ks.end.clone(),
        };
        Ok((Some(b), e))
    }
}
