//! NoveLSM's memtables (Kannan et al., USENIX ATC 2018; `shared/papers/001`): a DRAM memtable
//! backed by the WAL, as in LevelDB, and a large persistent memtable on the fast tier
//! ([`super::pskiplist`]) that writes go to, with no log, while the full DRAM memtable is
//! flushed. Here the two alternate in the engine's memtable rotation: a full DRAM memtable is
//! followed by a persistent one, a full persistent one by a DRAM one, and both kinds are
//! flushed in order, so every memtable holds one contiguous range of sequence numbers
//! (docs/decisions/0023-novelsm-mode.md).
//!
//! What differs from the paper is recorded in decision 0023.

use super::design::MemtableDesign;
use crate::options::NoveLsmOptions;

/// NoveLSM's design: DRAM memtables (values copied, WAL-backed) alternating with persistent
/// ones of [`NoveLsmOptions::persistent_memtable_bytes`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct NoveLsmMemtables {
    knobs: NoveLsmOptions,
}

impl NoveLsmMemtables {
    /// The design with its knobs.
    pub(crate) fn new(knobs: NoveLsmOptions) -> NoveLsmMemtables {
        NoveLsmMemtables { knobs }
    }
}

impl MemtableDesign for NoveLsmMemtables {
    fn persistent_memtable_bytes(&self) -> Option<u64> {
        Some(self.knobs.persistent_memtable_bytes)
    }

    fn parallel_level_reads(&self) -> usize {
        // One thread per level below the one the lookup searches itself (L0 or L1).
        if self.knobs.parallel_reads {
            crate::version::NUM_LEVELS - 1
        } else {
            0
        }
    }
}
