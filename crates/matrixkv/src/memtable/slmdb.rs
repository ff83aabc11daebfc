//! SLM-DB's memtables (Kaiyrakhmet et al., FAST 2019; `shared/papers/003`): every memtable is
//! a persistent skiplist on the fast tier ([`super::pskiplist`]), so no write goes through a
//! WAL; a full one becomes immutable and the next one is a new persistent skiplist. Only the
//! empty DRAM memtable an open starts with is replaced at once (docs/decisions/0025-slmdb-mode.md).

use super::design::MemtableDesign;
use crate::options::SlmDbOptions;

/// SLM-DB's design: persistent memtables of [`SlmDbOptions::persistent_memtable_bytes`] only.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SlmDbMemtables {
    knobs: SlmDbOptions,
}

impl SlmDbMemtables {
    /// The design with its knobs.
    pub(crate) fn new(knobs: SlmDbOptions) -> SlmDbMemtables {
        SlmDbMemtables { knobs }
    }
}

impl MemtableDesign for SlmDbMemtables {
    fn persistent_memtable_bytes(&self) -> Option<u64> {
        Some(self.knobs.persistent_memtable_bytes)
    }

    fn only_persistent(&self) -> bool {
        true
    }
}
