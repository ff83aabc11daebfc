//! The write path of the persistent skiplist: [`PSkipList::insert`] (a version record, and a
//! node for a new key, stored, persisted and published in the order of
//! docs/format/pskiplist.md, "Persistence"), the stores and publishes that poison the list on
//! failure, and [`PSkipList::commit`], the commit point of a batch of inserts.

use crate::sync::atomic::Ordering;

use crate::error::{Error, IoOp, Result};
use crate::key::{SeqNo, ValueKind};

use super::format::{
    MAX_HEIGHT, NODE_VERSIONS, OFF_ALLOC_END, OFF_COMMITTED, at, encode_node, encode_version,
    node_len, version_len,
};
use super::{PSkipList, WriterState};

impl PSkipList {
    /// Adds version `seq` of `user_key` (`kind`, `value`) and persists it before returning.
    ///
    /// If the key is present, a version record is added in front of its chain (no new node:
    /// the in-place update); otherwise a node is added with the version. See
    /// docs/format/pskiplist.md, "Persistence", for the order of the stores.
    ///
    /// # Errors
    ///
    /// - [`Error::MemtableFull`] if the region has no room for the node and record: nothing
    ///   was stored;
    /// - [`Error::InvalidArgument`] if `seq` is not above every sequence number of the key
    ///   (or above [`SeqNo::MAX`]), or for a key or value of 4 GiB or more: nothing was
    ///   stored;
    /// - [`Error::Io`] if a write or persist fails: the list is poisoned (the insert is kept
    ///   or not by the next recovery) and every later insert returns [`Error::Poisoned`];
    /// - [`Error::Corruption`] if the search reads a damaged node or record.
    pub fn insert(&self, user_key: &[u8], seq: SeqNo, kind: ValueKind, value: &[u8]) -> Result<()> {
        if seq > SeqNo::MAX {
            return Err(Error::invalid(format!(
                "sequence number {seq} is above the largest one, {}",
                SeqNo::MAX
            )));
        }
        let mut w = self.writer.lock();
        if let Some(cause) = &w.poisoned {
            return Err(Error::Poisoned {
                cause: cause.clone(),
            });
        }
        let capacity = self.capacity();
        let pos = self.seek_node(Some(user_key))?;
        let mut buf = Vec::new();
        // The commit words to publish in order (the first is the commit point), and whether
        // a node is added.
        let (commit_words, new_key): (Vec<(u64, u64)>, bool) =
            match pos.after.filter(|n| n.key == user_key) {
                Some(node) => {
                    let mut chain = self.chain(&node)?;
                    let newest = chain.next;
                    if let Some(v) = self.chain_next(&mut chain, capacity)?
                        && v.seq >= seq
                    {
                        return Err(Error::invalid(format!(
                            "sequence number {seq} is not above {}, the newest one of the key",
                            v.seq
                        )));
                    }
                    let off = w.alloc_end;
                    let new_end = self.check_room(off, version_len(value.len()))?;
                    encode_version(&mut buf, self.id, node.off, seq, kind, newest, value)?;
                    self.store(&mut w, off, &buf, new_end)?;
                    // The commit point: the node's newest-version word.
                    (vec![(node.off + NODE_VERSIONS, off)], false)
                }
                None => {
                    let height = random_height(&mut w.rng);
                    let node_off = w.alloc_end;
                    let version_off = node_off + node_len(height, user_key.len());
                    let new_end = self
                        .check_room(node_off, version_off - node_off + version_len(value.len()))?;
                    let next = pos.succs.get(..height).unwrap_or_default();
                    encode_node(&mut buf, self.id, node_off, user_key, version_off, next)?;
                    encode_version(&mut buf, self.id, node_off, seq, kind, 0, value)?;
                    self.store(&mut w, node_off, &buf, new_end)?;
                    // The commit point is the level-0 link; the higher levels follow, bottom up.
                    let links = pos.links.get(..height).unwrap_or_default();
                    (links.iter().map(|&l| (l, node_off)).collect(), true)
                }
            };
        for (i, &(word, target)) in commit_words.iter().enumerate() {
            self.publish(&mut w, word, target)?;
            if i == 0 {
                // Relaxed statistics counters (see the type's fields).
                self.entries.fetch_add(1, Ordering::Relaxed);
                if new_key {
                    self.keys.fetch_add(1, Ordering::Relaxed);
                }
                self.max_seq.fetch_max(seq.0, Ordering::Relaxed);
            }
        }
        Ok(())
    }

    /// The end of an allocation of `len` bytes at `off`, or [`Error::MemtableFull`].
    fn check_room(&self, off: u64, len: u64) -> Result<u64> {
        let capacity = self.capacity();
        match off.checked_add(len) {
            Some(end) if end <= capacity => Ok(end),
            _ => Err(Error::MemtableFull {
                path: self.path.clone(),
                needed: len,
                free: capacity.saturating_sub(off),
            }),
        }
    }

    /// Writes `buf` at `off` (the allocation end), persists it and publishes `new_end` as the
    /// allocation end. A failure poisons the list.
    fn store(&self, w: &mut WriterState, off: u64, buf: &[u8], new_end: u64) -> Result<()> {
        let r = self
            .region
            .write(at(off), buf)
            .map_err(|e| Error::io(IoOp::Write, &self.path, e))
            .and_then(|()| {
                self.region
                    .persist(at(off), buf.len())
                    .map_err(|e| Error::io(IoOp::Persist, &self.path, e))
            });
        self.poison_on_error(w, r)?;
        self.publish(w, OFF_ALLOC_END, new_end)?;
        w.alloc_end = new_end;
        // Relaxed statistics counter.
        self.used.store(new_end, Ordering::Relaxed);
        Ok(())
    }

    /// Publishes `value` at the commit word `word`. A failure poisons the list.
    fn publish(&self, w: &mut WriterState, word: u64, value: u64) -> Result<()> {
        let r = self
            .region
            .publish_u64(at(word), value)
            .map_err(|e| Error::io(IoOp::Persist, &self.path, e));
        self.poison_on_error(w, r)
    }

    fn poison_on_error(&self, w: &mut WriterState, r: Result<()>) -> Result<()> {
        if let Err(e) = &r {
            w.poisoned.get_or_insert_with(|| e.to_string());
        }
        r
    }

    /// Publishes `seq` as the committed sequence number: the versions inserted so far with
    /// sequence numbers up to `seq` become visible to readers and survive a crash; versions
    /// above it (a batch whose commit was not published) are ignored by readers, by iterators
    /// and after recovery. This is the commit point of a batch of several inserts.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] if `seq` is below the committed sequence number or above
    /// [`SeqNo::MAX`]; [`Error::Poisoned`] after a failed insert; [`Error::Io`] if publishing
    /// fails (the list is then poisoned).
    pub fn commit(&self, seq: SeqNo) -> Result<()> {
        let mut w = self.writer.lock();
        if let Some(cause) = &w.poisoned {
            return Err(Error::Poisoned {
                cause: cause.clone(),
            });
        }
        let committed = self.committed();
        if seq < committed || seq > SeqNo::MAX {
            return Err(Error::invalid(format!(
                "cannot commit sequence number {seq}: the list committed {committed}"
            )));
        }
        if seq == committed {
            return Ok(());
        }
        self.publish(&mut w, OFF_COMMITTED, seq.0)?;
        self.committed.store(seq.0, Ordering::Release);
        Ok(())
    }
}

/// A random height: 1, then one more with probability 1/4 each time, up to [`MAX_HEIGHT`]
/// (xorshift64, Marsaglia 2003).
fn random_height(state: &mut u64) -> usize {
    let mut x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    let mut height = 1;
    while height < MAX_HEIGHT && (x >> (2 * height)) & 3 == 0 {
        height += 1;
    }
    height
}
