//! `Db::updates_since` (RocksDB's `GetUpdatesSince`): the write batches committed from a
//! sequence number on, read back from the WAL, for replication.
//!
//! Sources, oldest first: the obsolete segments still retained (`State::retired_wals`, see
//! `Options::wal_retention_segments`), the segments of the immutable memtables and the active
//! segment. Each knows where its sequence numbers start (`first_seq`, recorded at the memtable
//! switch or found at open), so the segment holding a sequence number is found without reading
//! anything; the iterator then reads records from there with a [`wal::BatchCursor`], skipping
//! those that end before the sequence number asked for.
//!
//! **Pinning.** The iterator pins the range of segment numbers it may read
//! (`State::wal_pins`): obsolete-file deletion neither recycles nor deletes a segment in a
//! pinned range (`wal_recycle::take_aged_wals`, `DbInner::delete_obsolete_files`). Holding the
//! mapping would not be enough: a recycled region is zeroed, renamed and filled with another
//! segment's records. The pin is narrowed each time the iterator moves to the next segment and
//! released when it ends or is dropped; a segment that aged out of retention while pinned is
//! recycled or deleted by the next pass of obsolete-file deletion (after the next flush or
//! compaction, or at the next open).
//!
//! **Visibility.** The iterator stops at the visible sequence number it read when it was created
//! (under `state`, so every segment holding a record up to it is published there: a memtable
//! switch publishes the new segment under `state` before the first record goes into it, and the
//! commit leader moves `visible_seq` only after the record is in the WAL and the memtable). It
//! never reads a record past that one, so it never reads the part of the active segment a writer
//! may be appending to. Visible writes are acknowledged, but not necessarily durable: a write
//! without `sync` can still be lost by a power loss (contract C1), after a replica received it.
//!
//! **Group commit.** A commit group's batches share one WAL record, one merged batch (their
//! operations concatenated in commit order); the WAL keeps no boundary between them. The
//! iterator returns that merged batch with its first sequence number, as RocksDB does: the
//! operations and their order are exactly those committed, and applying each returned batch
//! atomically keeps a replica consistent (its atomic units are unions of the primary's).
//!
//! Thread safety: [`UpdatesIter`] is `Send`; it takes `state` briefly at creation, at each
//! segment it moves to and when it is dropped, never during I/O.

use std::collections::VecDeque;
use std::sync::Arc;

use super::separate_at_write::LoggedValues;
use super::{DbInner, State};
use crate::batch::WriteBatch;
use crate::error::{ArtifactKind, CorruptionReason, CorruptionSite, Error, Result};
use crate::key::SeqNo;
use crate::layout::{self, FileNum};
use crate::tier::Region;
use crate::wal;

/// A WAL segment the iterator may read.
struct Source {
    number: FileNum,
    /// The segment's sequence numbers start here.
    first_seq: SeqNo,
    /// Its mapping if the engine holds one (else mapped by name when the iterator reaches it).
    region: Option<Arc<dyn Region>>,
}

/// An iterator over the write batches committed from a sequence number on, in commit order,
/// each with its first sequence number: see [`crate::Db::updates_since`].
///
/// Items are `Result<(SeqNo, WriteBatch)>`. After an error (corruption, an I/O error, or
/// [`Error::Closed`] once the database shuts down) the iterator ends. While it is alive, the WAL
/// segments it still has to read are kept (neither recycled nor deleted); drop it (or read it to
/// the end) to let them go, and before closing the database.
pub struct UpdatesIter {
    db: Arc<DbInner>,
    /// Segments still to read, oldest first (not the one being read).
    sources: VecDeque<Source>,
    /// The segment being read.
    cursor: Option<wal::BatchCursor>,
    /// The pinned range of segment numbers, while one is pinned.
    pin: Option<(FileNum, FileNum)>,
    /// The first sequence number asked for: batches ending before it are skipped.
    want: u64,
    /// The first sequence number of the next batch, once a batch was returned.
    expect: Option<u64>,
    /// The last sequence number returned: visible when the iterator was created.
    end: u64,
    /// Nothing more is returned.
    done: bool,
}

// The iterator is documented as `Send`: keep it so.
const _: () = {
    const fn send<T: Send>() {}
    send::<UpdatesIter>();
};

impl DbInner {
    /// See [`crate::Db::updates_since`].
    pub(crate) fn updates_since(self: &Arc<Self>, seq: SeqNo) -> Result<UpdatesIter> {
        if self.memtable_design.persistent_memtable_bytes().is_some() {
            // The writes a persistent memtable takes have no WAL record to read back.
            return Err(Error::invalid(format!(
                "updates_since needs every write in the WAL; the {} design writes its \
                 persistent memtables without one",
                self.opts.design
            )));
        }
        // Sequence numbers start at 1: asking for 0 asks for everything.
        let want = seq.0.max(1);
        let mut st = self.state.lock();
        // Read under `state`: every segment holding a record up to `end` is in `st` (module doc).
        let end = self.latest_seq().0;
        let mut iter = UpdatesIter {
            db: Arc::clone(self),
            sources: VecDeque::new(),
            cursor: None,
            pin: None,
            want,
            expect: None,
            end,
            done: true,
        };
        if want > end {
            return Ok(iter);
        }
        let mut sources: VecDeque<Source> = st
            .retired_wals
            .iter()
            .filter(|w| w.number >= st.wal_history_from)
            .map(|w| Source {
                number: w.number,
                first_seq: w.first_seq,
                region: w.region.as_ref().map(|r| Arc::clone(&r.region)),
            })
            .chain(st.imm.iter().map(|m| Source {
                number: m.wal,
                first_seq: m.first_seq,
                region: m.region.as_ref().map(|r| Arc::clone(&r.region)),
            }))
            .chain(std::iter::once(Source {
                number: st.mem_wal,
                first_seq: st.mem_wal_first_seq,
                region: None,
            }))
            .collect();
        let oldest = sources.front().map_or(SeqNo(end + 1), |s| s.first_seq);
        if want < oldest.0 {
            return Err(Error::invalid(format!(
                "updates_since({seq}): the WAL no longer holds sequence number {want}; the oldest \
                 sequence number it holds is {oldest} (copy a checkpoint, Db::checkpoint, and \
                 follow from its sequence number, or retain more WAL segments: \
                 Options::wal_retention_segments)"
            )));
        }
        // The newest segment starting at or before `want` holds it (or it starts the segment
        // after: that one then starts at `want` too and is the newest).
        let start = sources
            .iter()
            .rposition(|s| s.first_seq.0 <= want)
            .unwrap_or(0);
        sources.drain(..start);
        if let (Some(lo), Some(hi)) = (sources.front(), sources.back()) {
            let range = (lo.number, hi.number);
            add_pin(&mut st, range);
            iter.pin = Some(range);
        }
        drop(st);
        iter.sources = sources;
        iter.done = false;
        Ok(iter)
    }
}

/// True if a live iterator pins WAL segment `number` (obsolete-file deletion keeps it).
pub(crate) fn is_pinned(st: &State, number: FileNum) -> bool {
    st.wal_pins
        .keys()
        .any(|&(lo, hi)| (lo..=hi).contains(&number))
}

fn add_pin(st: &mut State, range: (FileNum, FileNum)) {
    *st.wal_pins.entry(range).or_insert(0) += 1;
}

fn remove_pin(st: &mut State, range: (FileNum, FileNum)) {
    if let Some(n) = st.wal_pins.get_mut(&range) {
        *n -= 1;
        if *n == 0 {
            st.wal_pins.remove(&range);
        }
    }
}

impl UpdatesIter {
    /// The next batch to return, or `None` once the last visible one was returned.
    fn step(&mut self) -> Result<Option<(SeqNo, WriteBatch)>> {
        loop {
            if self.expect.is_some_and(|e| e > self.end) {
                return Ok(None);
            }
            let Some(cursor) = self.cursor.as_mut() else {
                self.cursor = Some(self.open_next()?);
                continue;
            };
            let at = cursor.offset();
            let Some(batch) = cursor.next_batch()? else {
                if self.sources.is_empty() {
                    return Err(self.corrupt(
                        at,
                        "the WAL ends before the last sequence number visible when the \
                         iterator was created",
                    ));
                }
                self.cursor = None;
                continue;
            };
            if batch.is_values_durable_marker() {
                // Not a write (`separate_at_write`'s note that earlier values are durable).
                continue;
            }
            let first = batch.sequence().0;
            let Some(last) = (batch.len() as u64)
                .checked_sub(1)
                .map(|n| first.saturating_add(n))
            else {
                return Err(self.corrupt(at, "an empty batch in the WAL"));
            };
            match self.expect {
                // Still looking for the batch holding `want`.
                None if last < self.want => continue,
                None if first > self.want => {
                    return Err(self.corrupt(
                        at,
                        "the batch holding the sequence number asked for is missing from the WAL",
                    ));
                }
                Some(e) if first != e => {
                    return Err(self.corrupt(
                        at,
                        "sequence numbers do not follow on from the previous WAL record",
                    ));
                }
                _ => {}
            }
            if last > self.end {
                return Err(self.corrupt(at, "a WAL record spans the last visible sequence number"));
            }
            self.expect = Some(last + 1);
            // Values separated at write time (`separate_at_write`) are read back.
            let batch = match super::separate_at_write::resolve_logged(
                &self.db.blobs,
                &batch,
                self.db.keyspaces_prefixed,
            )? {
                LoggedValues::Inline => batch,
                LoggedValues::Resolved(b, _) => b,
                LoggedValues::Missing(why) => {
                    return Err(Error::invalid(format!(
                        "updates_since: {why} (garbage collection relocated it after its \
                         memtable was flushed)"
                    )));
                }
            };
            // With a TTL the log holds values with their write time: hand back what the
            // user wrote (a replica stamps its own).
            let reg = self.db.keyspaces();
            let batch = super::write::strip_write_time(batch, &reg)
                .map_err(|what| self.corrupt(at, what))?;
            return Ok(Some((SeqNo(first), batch)));
        }
    }

    /// Moves to the next segment: narrows the pin to it (the older ones are let go), then
    /// opens it (mapping it by name if the engine holds no mapping).
    fn open_next(&mut self) -> Result<wal::BatchCursor> {
        let Some(src) = self.sources.pop_front() else {
            return Err(Error::invalid("updates_since: no WAL segment to read"));
        };
        {
            let mut st = self.db.state.lock();
            if st.shutting_down {
                return Err(Error::Closed);
            }
            if let Some((lo, hi)) = self.pin
                && lo < src.number
            {
                remove_pin(&mut st, (lo, hi));
                add_pin(&mut st, (src.number, hi));
                self.pin = Some((src.number, hi));
            }
        }
        let name = layout::wal_name(src.number);
        let region = match src.region {
            Some(r) => r,
            None => self.db.tiers.fast.open_region(&name)?,
        };
        let path = layout::path(self.db.tiers.fast.dir(), &name);
        wal::BatchCursor::open(region, path, src.number)
    }

    /// Corruption at `offset` of the segment being read.
    fn corrupt(&self, offset: u64, why: &'static str) -> Error {
        let path = self
            .cursor
            .as_ref()
            .map(|c| c.path().to_owned())
            .unwrap_or_default();
        Error::corruption(
            CorruptionSite::new(ArtifactKind::Wal, path, offset),
            CorruptionReason::Invalid(why),
        )
    }

    /// Ends the iteration: lets go of the segments.
    fn finish(&mut self) {
        self.done = true;
        self.cursor = None;
        self.sources.clear();
        if let Some(range) = self.pin.take() {
            remove_pin(&mut self.db.state.lock(), range);
        }
    }
}

impl Iterator for UpdatesIter {
    type Item = Result<(SeqNo, WriteBatch)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.step() {
            Ok(Some(item)) => Some(Ok(item)),
            Ok(None) => {
                self.finish();
                None
            }
            Err(e) => {
                self.finish();
                Some(Err(e))
            }
        }
    }
}

impl std::iter::FusedIterator for UpdatesIter {}

impl Drop for UpdatesIter {
    /// Releases the pin (takes `state` briefly; no I/O).
    fn drop(&mut self) {
        if let Some(range) = self.pin.take() {
            remove_pin(&mut self.db.state.lock(), range);
        }
    }
}

impl std::fmt::Debug for UpdatesIter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpdatesIter")
            .field("want", &self.want)
            .field("next", &self.expect)
            .field("end", &self.end)
            .field("pin", &self.pin)
            .field("done", &self.done)
            .finish()
    }
}
