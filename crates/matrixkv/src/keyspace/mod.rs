//! Keyspaces (RocksDB's column families): named, separately configured sets of keys in one
//! database, sharing its WAL, memtables, matrix container, levels and blob files.
//!
//! Every key of a database created with keyspaces starts with its keyspace's id
//! (`encoding.rs`, `docs/format/keyspaces.md`); the engine orders, stores and compacts these
//! engine keys without knowing about keyspaces, and the settings a keyspace was opened with
//! (merge operator, compaction filter, TTL, blob threshold, compression) are found from a
//! key's prefix (`registry.rs`). [`crate::Keyspace`] (in `db/`, above the engine) is the handle users
//! read and write through. Why keyspaces
//! are key prefixes and not separate trees: `docs/decisions/0016-keyspaces.md`.

pub(crate) mod encoding;
pub(crate) mod registry;

use std::sync::Arc;
use std::time::Duration;

use crate::compaction_filter::CompactionFilter;
use crate::error::{Error, Result};
use crate::merge::MergeOperator;

/// The name of the keyspace every database has, which [`crate::Db`]'s own reads and writes
/// use. It cannot be dropped.
pub const DEFAULT_KEYSPACE: &str = "default";

/// Longest keyspace name, in bytes.
pub const MAX_KEYSPACE_NAME_BYTES: usize = 255;

/// Checks a name for a new keyspace.
pub(crate) fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_KEYSPACE_NAME_BYTES {
        return Err(Error::invalid(format!(
            "a keyspace name has 1 to {MAX_KEYSPACE_NAME_BYTES} bytes, {name:?} has {}",
            name.len()
        )));
    }
    if name == DEFAULT_KEYSPACE {
        return Err(Error::invalid(
            "the default keyspace always exists and cannot be created",
        ));
    }
    Ok(())
}

/// The options of one keyspace: those of [`crate::Options`] that can differ between keyspaces.
/// The default keyspace takes them from [`crate::Options`]; another keyspace from the
/// `KeyspaceOptions` given to [`crate::Db::create_keyspace`] and, at every later open, from
/// [`crate::Options::keyspace_options`] (like RocksDB's column family options, they are not
/// stored: give the same merge operator each time).
///
/// The memtable, container and level parameters are the database's: the keyspaces share its
/// tables (a table's data blocks each take the compression of their keyspace).
#[derive(Clone, Default)]
pub struct KeyspaceOptions {
    /// Combines the keyspace's merge operands (see [`crate::MergeOperator`]); `None` refuses
    /// merges into it.
    pub merge_operator: Option<Arc<dyn MergeOperator>>,
    /// Drops or rewrites the keyspace's values during compaction.
    pub compaction_filter: Option<Arc<dyn CompactionFilter>>,
    /// Time to live of the keyspace's values (at least one second). Whether a keyspace has a
    /// TTL is fixed when it is created; the duration may change between opens. A keyspace
    /// with a TTL refuses merges.
    pub ttl: Option<Duration>,
    /// Values of at least this many bytes are moved to blob files when compaction writes them
    /// to L1 and below; `None` takes the database's [`crate::Options::min_blob_bytes`].
    pub min_blob_bytes: Option<usize>,
    /// How the keyspace's data blocks in SSTables are compressed; `None` takes the
    /// database's `Options::table.compression`. RowTables in the matrix container are never
    /// compressed.
    pub compression: Option<crate::Compression>,
}

impl std::fmt::Debug for KeyspaceOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyspaceOptions")
            .field(
                "merge_operator",
                &self.merge_operator.as_ref().map(|m| m.name().to_owned()),
            )
            .field("compaction_filter", &self.compaction_filter.is_some())
            .field("ttl", &self.ttl)
            .field("min_blob_bytes", &self.min_blob_bytes)
            .field("compression", &self.compression)
            .finish()
    }
}
