//! [`Writer`]: a batch of writes on the tree, holding the writer mutex. It checks each write
//! (key length, room in the region) before changing its working tree, and its commit stores
//! the batch's pages and the new superblock, then publishes the new generation (the commit
//! point; docs/format/pbtree.md, "Persistence").

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::error::{Error, IoOp, Result};
use crate::lock_order::MutexGuard;

#[cfg(doc)]
use super::PBTree;
use super::batch::{Batch, assign, bug, count_nodes, insert_cost};
use super::format::{
    Committed, LOCATION_FLAGS, OFF_COMMITTED, PAGE_SIZE, SLOT_LEN, at, encode_slot, page_off,
    slot_off,
};
use super::{LastCommit, Location, MAX_KEY_LEN, Shared, WriterState};

/// An `InvalidArgument` error for a key longer than [`MAX_KEY_LEN`].
fn check_key(key: &[u8]) -> Result<()> {
    if key.len() > MAX_KEY_LEN {
        return Err(Error::invalid(format!(
            "a key of {} bytes is longer than the persistent index's limit of {MAX_KEY_LEN}",
            key.len()
        )));
    }
    Ok(())
}

/// A batch of writes on the tree: see [`PBTree::writer`]. It holds the writer mutex until it
/// is committed or dropped.
#[derive(Debug)]
pub struct Writer<'a> {
    pub(super) shared: &'a Arc<Shared>,
    pub(super) state: MutexGuard<'a, WriterState>,
    pub(super) batch: Batch,
}

impl Writer<'_> {
    /// Refuses writes on a poisoned tree or a failed batch.
    fn check_usable(&self) -> Result<()> {
        if let Some(cause) = &self.state.poisoned {
            return Err(Error::Poisoned {
                cause: cause.clone(),
            });
        }
        if let Some(e) = &self.batch.failed {
            return Err(e.duplicate());
        }
        Ok(())
    }

    /// [`Error::IndexFull`] unless the free pages can hold the batch's nodes and `worst` more.
    fn ensure_room(&mut self, worst: u64) -> Result<()> {
        self.state.reclaim(self.shared);
        let needed = self.batch.nodes + worst;
        let free = self.state.free.len() as u64;
        if needed > free {
            return Err(Error::IndexFull {
                path: self.shared.path.clone(),
                needed,
                free,
            });
        }
        Ok(())
    }

    /// Records a failure of an operation that may have changed the working tree halfway.
    fn fail_on_error<T>(&mut self, r: Result<T>) -> Result<T> {
        if let Err(e) = &r {
            self.batch.failed.get_or_insert_with(|| e.duplicate());
        }
        r
    }

    /// Maps `key` to `loc` in the batch (adding the key or replacing its location).
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidArgument`] for a key longer than [`MAX_KEY_LEN`] or a flag of
    ///   `loc` other than [`LOCATION_MERGE`](super::LOCATION_MERGE): the batch is unchanged;
    /// - [`Error::IndexFull`] if the free pages might not hold the batch with this insert (a
    ///   copy of every committed page on the key's path, and the splits the insert may cause
    ///   up to a new root, assuming that each separator moving up is the longest key of its
    ///   node): the batch is unchanged and can still be committed;
    /// - [`Error::Poisoned`] after a failed commit; the error of an earlier failed operation of
    ///   this batch;
    /// - [`Error::Corruption`] if a page it reads is damaged: the batch can no longer be
    ///   committed.
    pub fn insert(&mut self, key: &[u8], loc: Location) -> Result<()> {
        self.check_usable()?;
        check_key(key)?;
        if loc.flags & !LOCATION_FLAGS != 0 {
            return Err(Error::invalid(format!(
                "location flags {:#x}: only bit 0 (a merge operand) is defined, the others are \
                 reserved and must be 0",
                loc.flags
            )));
        }
        let path = self.batch.path(self.shared, key)?;
        self.ensure_room(insert_cost(&path, key.len()))?;
        let r = self.batch.insert(self.shared, key, loc);
        self.fail_on_error(r)
    }

    /// Removes `key` from the batch's tree; returns whether it was there.
    ///
    /// # Errors
    ///
    /// As [`Writer::insert`]; [`Error::IndexFull`] if the free pages might not hold copies of
    /// the pages on the key's path.
    pub fn remove(&mut self, key: &[u8]) -> Result<bool> {
        self.check_usable()?;
        check_key(key)?;
        let path = self.batch.path(self.shared, key)?;
        if !path.last().is_some_and(|leaf| leaf.has_key) {
            return Ok(false);
        }
        // Copies of the clean nodes on the path; merges and dropped nodes only take nodes away.
        self.ensure_room(path.iter().filter(|s| s.clean).count() as u64)?;
        let r = self.batch.remove(self.shared, key);
        self.fail_on_error(r)
    }

    /// The location of `key` in the batch's tree (the committed tree with the batch's writes).
    ///
    /// # Errors
    ///
    /// As [`PBTree::get`].
    pub fn get(&self, key: &[u8]) -> Result<Option<Location>> {
        self.batch.get(self.shared, key)
    }

    /// Commits the batch: writes every node it changed to a free page and persists them,
    /// writes and persists the superblock of the new tree in the slot the committed tree does
    /// not use, then publishes the new generation (the commit point; see
    /// docs/format/pbtree.md, "Persistence"). Returns the new generation (the committed one,
    /// unchanged, for a batch that changed nothing). Snapshots taken from then on read the new
    /// tree; the pages the old tree used and the new one does not are reused once no older
    /// snapshot is alive. [`PBTree::rollback`] undoes the commit while a snapshot of the old
    /// tree is alive and no later commit was made.
    ///
    /// # Errors
    ///
    /// - [`Error::IndexFull`] if the free pages cannot hold the batch's nodes: nothing was
    ///   stored;
    /// - [`Error::Io`] if a write or persist fails: the tree is poisoned (the batch is kept or
    ///   not by the next recovery; readers keep the last committed tree) and every later write
    ///   returns [`Error::Poisoned`];
    /// - [`Error::Poisoned`]; the error of a failed operation of this batch.
    pub fn commit(mut self) -> Result<u64> {
        self.check_usable()?;
        let committed = self.state.committed;
        if !self.batch.changed {
            return Ok(committed.generation);
        }
        self.state.reclaim(self.shared);
        let needed = count_nodes(self.batch.root.as_ref());
        debug_assert_eq!(needed, self.batch.nodes, "the batch's running node count");
        let free = self.state.free.len() as u64;
        if needed > free {
            return Err(Error::IndexFull {
                path: self.shared.path.clone(),
                needed,
                free,
            });
        }
        let generation = committed.generation + 1;
        let mut pages = Vec::new();
        let root = match self.batch.root.take() {
            None => 0,
            Some(ptr) => assign(
                self.shared.id,
                ptr,
                generation,
                &mut self.state.free,
                &mut pages,
            )?,
        };
        let new = Committed {
            generation,
            root,
            keys: self.batch.keys,
            pages: (committed.pages + needed)
                .checked_sub(self.batch.released.len() as u64)
                .ok_or_else(|| bug("more pages released than the tree had"))?,
            height: self.batch.height,
        };
        if let Err(e) = self.store(&pages, &new) {
            self.state.poisoned.get_or_insert_with(|| e.to_string());
            return Err(e);
        }
        let written: Vec<u64> = pages.iter().map(|(no, _)| *no).collect();
        let highest = written.iter().copied().max().unwrap_or(0);
        let state = &mut *self.state;
        state.highest_written = state.highest_written.max(highest);
        self.shared
            .pages_written
            .fetch_add(written.len() as u64, Ordering::Relaxed);
        state.committed = new;
        state.seq += 1;
        state
            .pending
            .insert(state.seq, std::mem::take(&mut self.batch.released));
        state.last = Some(LastCommit {
            parent: committed,
            written,
        });
        // Snapshots registered from now on read the new tree (the mutex orders this after
        // the stores above for them).
        let mut readers = self.shared.readers.lock();
        readers.current = new;
        readers.seq = state.seq;
        Ok(generation)
    }

    /// The stores of a commit: the pages, their persists (one per run of adjacent pages), the
    /// slot and its persist, then the commit word.
    fn store(&self, pages: &[(u64, Vec<u8>)], new: &Committed) -> Result<()> {
        let region = &self.shared.region;
        let path = &self.shared.path;
        {
            // Free pages about to be written may still be cached from the tree that used
            // them last.
            let mut cache = self.shared.cache.lock();
            for (no, _) in pages {
                cache.remove(no);
            }
        }
        for (no, bytes) in pages {
            region
                .write(at(page_off(*no)), bytes)
                .map_err(|e| Error::io(IoOp::Write, path, e))?;
        }
        let mut nos: Vec<u64> = pages.iter().map(|(no, _)| *no).collect();
        nos.sort_unstable();
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for no in nos {
            match runs.last_mut() {
                Some((first, n)) if *first + *n == no => *n += 1,
                _ => runs.push((no, 1)),
            }
        }
        for (first, n) in runs {
            region
                .persist(at(page_off(first)), at(n) * PAGE_SIZE)
                .map_err(|e| Error::io(IoOp::Persist, path, e))?;
        }
        let off = slot_off(new.generation);
        region
            .write(off, &encode_slot(self.shared.id, off, new))
            .map_err(|e| Error::io(IoOp::Write, path, e))?;
        region
            .persist(off, SLOT_LEN)
            .map_err(|e| Error::io(IoOp::Persist, path, e))?;
        // The commit point.
        region
            .publish_u64(OFF_COMMITTED, new.generation)
            .map_err(|e| Error::io(IoOp::Persist, path, e))
    }
}
