//! Opening a tree and undoing its latest commit: [`PBTree::open_at_most`] (what
//! [`PBTree::open`] runs: the header and slot checks and the walk of the tree; for an index one
//! commit ahead of the engine's manifest, the return to the commit before) and
//! [`PBTree::rollback`] (the same return in the running process). docs/format/pbtree.md,
//! "Recovery", specifies both.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use crate::checksum;
use crate::error::{ArtifactKind, CorruptionReason, CorruptionSite, Error, IoOp, Result};
use crate::tier::Region;

use super::format::{
    Committed, HEADER_END, MAX_LEVEL, OFF_COMMITTED, OFF_HEADER_CRC, OFF_HEADER_PAD, OFF_ID,
    OFF_PAGE_SIZE, OFF_REGION_LEN, OFF_VERSION, SLOT_CRC, SLOT_HEIGHT, SLOT_KEYS, SLOT_LEN,
    SLOT_PAGES, SLOT_ROOT, SLOT_SPAN, at, le_u32, le_u64, seed, slot_off,
};
use super::{FORMAT_VERSION, MAGIC, PAGE_SIZE, PBTree, Snapshot};

impl PBTree {
    /// Opens the tree in `region` at a generation of at most `max_generation`: the one the
    /// engine's manifest last recorded (the engine commits the index before it records the
    /// commit's generation, so at most the newest commit is unrecorded). With the commit word
    /// at `g`:
    ///
    /// - `g == max_generation` (or `max_generation == u64::MAX`, no bound): as
    ///   [`PBTree::open`], which is this with `u64::MAX`. Writes nothing;
    /// - `g == max_generation + 1`: the other slot (`(g - 1) % 2`) must hold generation
    ///   `max_generation` (0: the empty tree [`PBTree::create`] writes in slot 0) with a valid
    ///   checksum, and its tree must pass every check of `open`; then the commit word is
    ///   published (and persisted) as `max_generation` and that tree opened: the pages only
    ///   generation `g` used are free, and the next commit writes generation `g` again. A crash
    ///   during this leaves the commit word at `g` or at `max_generation`: opening again with
    ///   the same bound gives the same tree.
    ///
    /// This undoes one commit only: the engine must not commit generation `g + 1` before it
    /// recorded `g` (the commit of `g + 1` overwrites the slot of `g - 1`).
    ///
    /// # Errors
    ///
    /// As [`PBTree::open`]; [`Error::Corruption`] at the offset of the commit word for an index
    /// more than one commit ahead of the manifest or behind it, or one commit ahead with a
    /// slot that holds another generation (at the slot's offset for a slot whose checksum
    /// fails); [`Error::Io`] if publishing the commit word fails (nothing else was written; the
    /// commit word holds either generation, and opening again decides).
    pub fn open_at_most(
        region: Arc<dyn Region>,
        path: impl Into<PathBuf>,
        max_generation: u64,
    ) -> Result<PBTree> {
        let path = path.into();
        let len = region.len();
        let corrupt = |offset: usize, reason| {
            Error::corruption(
                CorruptionSite::new(ArtifactKind::PersistentIndex, &path, offset as u64),
                reason,
            )
        };
        let invalid = |offset: usize, what| corrupt(offset, CorruptionReason::Invalid(what));
        if len < 2 * PAGE_SIZE {
            return Err(corrupt(0, CorruptionReason::Truncated));
        }
        let mut h = vec![0u8; HEADER_END];
        region
            .read(0, &mut h)
            .map_err(|e| Error::io(IoOp::Read, &path, e))?;
        if h.get(..8) != Some(&MAGIC[..]) {
            return Err(corrupt(0, CorruptionReason::BadMagic));
        }
        let version = le_u32(&h, OFF_VERSION);
        if version != FORMAT_VERSION {
            return Err(Error::NotSupported {
                what: "persistent index",
                found_version: version,
            });
        }
        let stored = le_u32(&h, OFF_HEADER_CRC);
        let computed = checksum::checksum(h.get(..OFF_HEADER_CRC).unwrap_or_default());
        if stored != computed {
            return Err(corrupt(
                0,
                CorruptionReason::ChecksumMismatch { stored, computed },
            ));
        }
        if le_u32(&h, OFF_PAGE_SIZE) as usize != PAGE_SIZE {
            return Err(invalid(OFF_PAGE_SIZE, "a page size other than format 1's"));
        }
        if le_u64(&h, OFF_REGION_LEN) != len as u64 || !len.is_multiple_of(PAGE_SIZE) {
            return Err(invalid(
                OFF_REGION_LEN,
                "the region's length differs from its header's",
            ));
        }
        if le_u32(&h, OFF_HEADER_PAD) != 0 {
            return Err(invalid(OFF_HEADER_PAD, "nonzero header padding"));
        }
        let id = le_u64(&h, OFF_ID);
        let generation = region
            .read_u64(OFF_COMMITTED)
            .map_err(|e| Error::io(IoOp::Read, &path, e))?;
        // The generation to open: the committed one, or the one before it.
        let target = if max_generation == u64::MAX || generation == max_generation {
            generation
        } else if generation < max_generation {
            return Err(invalid(OFF_COMMITTED, "the index is behind the manifest"));
        } else if generation - 1 == max_generation {
            max_generation
        } else {
            return Err(invalid(
                OFF_COMMITTED,
                "the index is more than one commit ahead of the manifest",
            ));
        };
        let off = slot_off(target);
        let slot = h.get(off..off + SLOT_LEN).unwrap_or_default();
        let stored = le_u32(slot, SLOT_CRC);
        let computed = checksum::checksum2(
            &seed(id, off as u64),
            slot.get(..SLOT_CRC).unwrap_or_default(),
        );
        if stored != computed {
            return Err(corrupt(
                off,
                CorruptionReason::ChecksumMismatch { stored, computed },
            ));
        }
        let committed = Committed {
            generation: le_u64(slot, 0),
            root: le_u64(slot, SLOT_ROOT),
            keys: le_u64(slot, SLOT_KEYS),
            pages: le_u64(slot, SLOT_PAGES),
            height: le_u32(slot, SLOT_HEIGHT),
        };
        if committed.generation != target {
            return Err(if target == generation {
                invalid(
                    off,
                    "the active slot holds another generation than the committed one",
                )
            } else {
                invalid(
                    OFF_COMMITTED,
                    "the index is one commit ahead of the manifest and its other slot does not \
                     hold the manifest's generation",
                )
            });
        }
        if h.get(off + SLOT_LEN..off + SLOT_SPAN)
            .is_none_or(|r| r.iter().any(|&b| b != 0))
        {
            return Err(invalid(off + SLOT_LEN, "nonzero reserved slot bytes"));
        }
        let empty = committed.root == 0;
        if empty != (committed.height == 0)
            || empty != (committed.keys == 0)
            || empty != (committed.pages == 0)
            || committed.height > u32::from(MAX_LEVEL) + 1
        {
            return Err(invalid(
                off + SLOT_ROOT,
                "a root, key count, page count and height that do not agree",
            ));
        }
        let total_pages = (len / PAGE_SIZE) as u64;
        let tree = PBTree::with_state(region, path, id, committed, BTreeSet::new());
        let used = tree.shared.verify(&committed)?;
        if target != generation {
            // The older tree passed every check: make it the committed one.
            tree.shared
                .region
                .publish_u64(OFF_COMMITTED, target)
                .map_err(|e| Error::io(IoOp::Persist, &tree.shared.path, e))?;
        }
        tree.writer.lock().free = (1..total_pages)
            .filter(|&p| !used.get(at(p)).copied().unwrap_or(true))
            .collect();
        Ok(tree)
    }

    /// Undoes the latest commit in the running process (the engine calls it when recording
    /// the commit's generation in its manifest failed): publishes (and persists) the commit
    /// word `previous.generation()`, whose slot still describes `previous`'s tree, and makes
    /// that tree the committed one again. Snapshots taken from then on read it; the next commit
    /// writes generation `previous.generation() + 1` again, in the same slot. The pages only
    /// the undone commit wrote are free once no snapshot of its tree is alive (such snapshots
    /// keep reading it); the pages it released are the committed tree's again.
    ///
    /// # Preconditions
    ///
    /// The caller holds no [`Writer`](super::Writer) of this tree (this waits for the writer
    /// mutex).
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidArgument`] unless `previous` is a snapshot of this tree, of the tree
    ///   the latest commit started from (so the committed generation is
    ///   `previous.generation() + 1`; a live snapshot keeps its pages from being reused).
    ///   Only the latest commit can be undone, once, and not one from before the tree was
    ///   opened: nothing is changed;
    /// - [`Error::Poisoned`] after a failed commit or rollback: nothing is changed;
    /// - [`Error::Io`] if publishing the commit word fails: the tree is poisoned (readers keep
    ///   the latest commit; the next recovery finds the commit word at either generation,
    ///   which [`PBTree::open_at_most`] with `previous.generation()` accepts).
    pub fn rollback(&self, previous: &Snapshot) -> Result<()> {
        let mut state = self.writer.lock();
        if let Some(cause) = &state.poisoned {
            return Err(Error::Poisoned {
                cause: cause.clone(),
            });
        }
        let committed = state.committed;
        let refuse = |why: &str| {
            Err(Error::invalid(format!(
                "persistent index {}: cannot roll generation {} back to a snapshot of \
                 generation {}: {why}",
                self.shared.path.display(),
                committed.generation,
                previous.generation()
            )))
        };
        if !Arc::ptr_eq(&previous.shared, &self.shared) {
            return refuse("the snapshot is of another tree");
        }
        if previous.generation().checked_add(1) != Some(committed.generation) {
            return refuse("the committed generation is not the one after the snapshot's");
        }
        if state.last.as_ref().map(|l| l.parent) != Some(previous.committed) {
            return refuse("the snapshot is not of the tree the latest commit started from");
        }
        // The pages the latest commit released wait in `pending` under its sequence number:
        // `previous`, older and alive, kept them from being reclaimed.
        let seq = state.seq;
        if previous.seq >= seq || !state.pending.contains_key(&seq) {
            return refuse("the pages of the snapshot's tree are no longer all held");
        }
        if let Err(e) = self
            .shared
            .region
            .publish_u64(OFF_COMMITTED, previous.committed.generation)
        {
            let e = Error::io(IoOp::Persist, &self.shared.path, e);
            state.poisoned.get_or_insert_with(|| e.to_string());
            return Err(e);
        }
        let state = &mut *state;
        let written = state.last.take().map(|l| l.written).unwrap_or_default();
        // The restored tree uses the pages its child released again; only snapshots of the
        // child (sequence number `seq`) read the pages the child wrote.
        state.pending.remove(&seq);
        state.rolled_back.push((seq, written));
        state.committed = previous.committed;
        state.seq = seq + 1;
        let mut readers = self.shared.readers.lock();
        readers.current = previous.committed;
        readers.seq = seq + 1;
        Ok(())
    }
}
