//! Iterators over internal keys, and the user-facing iterator built from them.
//!
//! Every source (memtable, SSTable, level, merged view) implements [`InternalIterator`]. They
//! own what they read (`Arc`s to tables and memtables), so they carry no lifetimes.

use crate::error::{CorruptionSite, Result};

pub mod db_iter;
pub(crate) mod exclude;
pub(crate) mod merging;
#[cfg(test)]
pub(crate) mod vec_iter;

/// A positioned cursor over `(internal key, value)` pairs in internal-key order
/// ([`crate::key::compare_internal`]).
///
/// `key()` and `value()` may be called only while `valid()` is true. Movement methods return
/// an error when the underlying storage fails; the iterator is then invalid.
pub trait InternalIterator: Send {
    /// True when positioned at an entry.
    fn valid(&self) -> bool;
    /// Positions at the first entry.
    fn seek_to_first(&mut self) -> Result<()>;
    /// Positions at the last entry.
    fn seek_to_last(&mut self) -> Result<()>;
    /// Positions at the first entry whose internal key is ≥ `target`.
    fn seek(&mut self, target: &[u8]) -> Result<()>;
    /// Positions at the last entry whose internal key is ≤ `target`.
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()>;
    /// Moves to the next entry. Requires `valid()`.
    fn next(&mut self) -> Result<()>;
    /// Moves to the previous entry. Requires `valid()`.
    fn prev(&mut self) -> Result<()>;
    /// The current internal key.
    fn key(&self) -> &[u8];
    /// The current value (empty for tombstones).
    fn value(&self) -> &[u8];
    /// `Err` if the last `value()` at this position failed. A source that reads values
    /// lazily (a RowTable) cannot return the error from `value()`: it returns an empty slice,
    /// and the error here and from its next movement. Wrappers forward this to the source
    /// whose value they return; sources that read values eagerly keep the default.
    fn value_status(&self) -> Result<()> {
        Ok(())
    }
    /// Where the current entry was read from: the file and the offset of its block (or
    /// record), for a caller that finds the entry damaged (an internal key that does not
    /// parse) to report it there. `None` for sources in memory and when not positioned.
    /// Wrappers forward this to the source of the current entry.
    fn site(&self) -> Option<CorruptionSite> {
        None
    }
}

/// A boxed internal iterator.
pub type BoxedIter = Box<dyn InternalIterator>;
