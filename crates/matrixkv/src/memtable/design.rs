//! The memtable designs of the engine's modes, behind one small trait.
//!
//! A design decides where the bytes of a memtable entry live and how the memtables are rebuilt
//! at open; the skiplist index ([`super::MemTable`]) is shared. The write path and WAL
//! recovery ask the design, never the mode:
//!
//! - [`super::dram::DramMemtable`] (MatrixKV, the default): every value is copied into the
//!   DRAM memtable, after the WAL record holding it was written;
//! - [`super::semi_persistent::SemiPersistentMemtable`] (X-Engine on NVM): the WAL record on
//!   the fast tier is the only copy; the DRAM index holds references into it;
//! - [`super::novelsm::NoveLsmMemtables`] (NoveLSM): DRAM memtables alternate with persistent
//!   ones ([`super::pskiplist`]) that take writes without a WAL;
//! - [`super::persistent_only::PersistentOnlyMemtables`] (SLM-DB): persistent skiplists only;
//! - [`super::lightkv::LightKvWriteBuffers`] (LightKV): write buffers only, logs indexed by
//!   an RH-tree ([`super::pwb`]).
//!
//! Who calls it: `engine::write` (group commit), `engine::recovery` (WAL replay),
//! `engine::wal_recycle` (a region is recycled only without live views).

use std::fmt::Debug;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::MemTable;
use super::pskiplist::PSkipList;
use crate::error::Result;
use crate::options::{Design, Options};
use crate::tier::Region;

/// What a memtable design decides. Implementations are stateless or hold their knobs only.
pub(crate) trait MemtableDesign: Send + Sync + Debug {
    /// The buffer backing the values of a batch whose WAL record payload was just written at
    /// `[offset, offset + len)` of `region` (or replayed from there at open), or `None` when
    /// the memtable copies the values (the default: every design but X-Engine's). The
    /// returned bytes equal the payload.
    fn record_backing(
        &self,
        _region: &dyn Region,
        _offset: usize,
        _len: usize,
    ) -> io::Result<Option<Bytes>> {
        Ok(None)
    }

    /// How many queued writers a commit leader waits for before it appends and persists
    /// their records together, and for at most how long (1: it never waits).
    fn commit_batch(&self) -> (usize, Duration) {
        (1, Duration::ZERO)
    }

    /// Threads that rebuild memtables from the WAL at open (1: the serial path).
    fn recovery_threads(&self) -> usize {
        1
    }

    /// Region bytes of the persistent memtable that follows a full DRAM memtable, or `None`
    /// when every memtable is a DRAM one (then every write is in the WAL).
    fn persistent_memtable_bytes(&self) -> Option<u64> {
        None
    }

    /// Bytes of the fast-tier region of a persistent memtable that takes
    /// [`Self::persistent_memtable_bytes`] of writes.
    fn persistent_region_len(&self, bytes: u64) -> u64 {
        bytes
    }

    /// The persistent memtable in `region`, new (of [`Self::persistent_region_len`] bytes),
    /// numbered `number`; `path` names the region in errors. A persistent skiplist unless the
    /// design says otherwise.
    fn create_persistent(
        &self,
        region: Arc<dyn Region>,
        path: &Path,
        number: u64,
    ) -> Result<MemTable> {
        MemTable::persistent(Arc::new(PSkipList::create(region, path, number)?))
    }

    /// The persistent memtable [`Self::create_persistent`] made in `region`, reopened after a
    /// restart or a crash (no log replay).
    fn open_persistent(&self, region: Arc<dyn Region>, path: &Path) -> Result<MemTable> {
        MemTable::persistent(Arc::new(PSkipList::open(region, path)?))
    }

    /// Every memtable is a persistent one (a full persistent memtable is followed by another,
    /// and the DRAM memtable an open starts with is replaced before the first write); only
    /// meaningful with [`Self::persistent_memtable_bytes`].
    fn only_persistent(&self) -> bool {
        false
    }

    /// Threads that search the levels of a point lookup in parallel once the memtables miss
    /// (0: the levels are searched one after the other). Not a memtable matter strictly, but
    /// part of the same design (NoveLSM's read parallelism).
    fn parallel_level_reads(&self) -> usize {
        0
    }
}

/// The design `opts` selects.
pub(crate) fn for_options(opts: &Options) -> Box<dyn MemtableDesign> {
    match opts.design {
        Design::MatrixKv => Box::new(super::dram::DramMemtable),
        Design::XEngine(x) => Box::new(super::semi_persistent::SemiPersistentMemtable::new(x)),
        Design::NoveLsm(n) => Box::new(super::novelsm::NoveLsmMemtables::new(n)),
        Design::SlmDb(d) => Box::new(super::persistent_only::PersistentOnlyMemtables::new(
            d.persistent_memtable_bytes,
        )),
        Design::LightKv(d) => Box::new(super::lightkv::LightKvWriteBuffers::new(
            d.write_buffer_bytes,
        )),
    }
}
