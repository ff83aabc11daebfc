//! The visible sequence number: the newest write a read without a snapshot sees.
//!
//! The commit leader publishes a group's last sequence number ([`VisibleSeq::publish`],
//! `Release`) after inserting the whole group into the memtable (filter bits first, then the
//! skiplist entry, `MemTable::insert`), under the `writer` lock, so publications are in
//! sequence order. A reader loads it ([`VisibleSeq::load`], `Acquire`) when it takes a snapshot
//! and then finds, in the memtables of its read view, every version with a sequence number up
//! to the one it loaded, filter bits included, and none above it. The loom model
//! `loom_tests::loom_visible_seq_covers_every_applied_write` checks this over the real
//! `apply_batch`, `MemTable` and this type (docs/reliability.md, "T10").

use crate::key::SeqNo;
// Loom's atomics under `--cfg loom` (the `loom_` model tests).
use crate::sync::atomic::{AtomicU64, Ordering};

/// See the module documentation.
#[derive(Debug)]
pub(crate) struct VisibleSeq(AtomicU64);

impl VisibleSeq {
    /// `seq` visible (recovery: the last sequence number replayed).
    pub(crate) fn new(seq: SeqNo) -> VisibleSeq {
        VisibleSeq(AtomicU64::new(seq.0))
    }

    /// Makes every write up to `seq` visible. The caller inserted them all into the memtable
    /// and holds the `writer` lock (publications never go backwards).
    pub(crate) fn publish(&self, seq: SeqNo) {
        // Synchronizes with the Acquire load of readers taking a snapshot.
        self.0.store(seq.0, Ordering::Release);
    }

    /// The newest visible sequence number.
    pub(crate) fn load(&self) -> SeqNo {
        // Synchronizes with the Release store of the commit leader.
        SeqNo(self.0.load(Ordering::Acquire))
    }
}

/// Loom model of the publication of `visible_seq` with the memtable it covers. Run:
/// `scripts/test-loom` (all models), or `scripts/test-loom loom_visible_seq`.
#[cfg(all(test, loom))]
mod loom_tests {
    use std::sync::Arc;

    use loom::thread;

    use super::*;
    use crate::batch::WriteBatch;
    use crate::engine::write::apply_batch;
    use crate::key::ValueKind;
    use crate::lock_order::Rank;
    use crate::memtable::MemTable;
    use crate::sync::Mutex;

    /// Two commit leaders and a reader, over the real [`apply_batch`], [`MemTable`] (with
    /// its bloom filter, whose bits are loom atomics; the crossbeam skiplist is not modelled
    /// and acts as if each insert were one atomic step) and [`VisibleSeq`]. Each leader does
    /// what `DbInner::commit_group` does for a DRAM memtable: under the `writer` lock (a loom
    /// mutex holding the last sequence number, as `WriterCtx::last_seq`), take the next
    /// sequence number, apply a batch that puts it as the value of `x`, publish it. If
    /// `commit_group` changes the order of these steps, this model must follow it.
    ///
    /// The reader does what `DbInner::get` does: load `visible_seq` (`latest_seq`), then ask
    /// the memtable for the versions at that snapshot (`MemTable::versions`, filter first).
    /// It must see the write of the sequence number it loaded (no false negative from the
    /// filter: the second leader's add finds the first one's bits set and skips them) and
    /// none above it.
    ///
    /// The leaders are the model's main thread and the first spawned one, the reader is
    /// spawned last (loom's search misses races of an earlier load with a later store
    /// otherwise: see `memtable::pskiplist::loom_tests`). Fails if `publish` stores `Relaxed`.
    ///
    /// A few seconds at the default bound of 2 preemptions (`scripts/test-loom`'s build).
    #[test]
    fn loom_visible_seq_covers_every_applied_write() {
        crate::sync::model(2, || {
            // A one-block filter: the keys share filter words.
            let mem = Arc::new(MemTable::with_filter(64));
            let visible = Arc::new(VisibleSeq::new(SeqNo(0)));
            let writer = Arc::new(Mutex::new(Rank::Writer, 0u64));
            let lead = {
                let (mem, visible, writer) =
                    (Arc::clone(&mem), Arc::clone(&visible), Arc::clone(&writer));
                move || {
                    let mut last_seq = writer.lock();
                    let seq = *last_seq + 1;
                    let mut batch = WriteBatch::new();
                    batch.put(b"x", seq.to_string().as_bytes());
                    batch.set_sequence(SeqNo(seq));
                    apply_batch(&mem, &batch, false, None);
                    *last_seq = seq;
                    visible.publish(SeqNo(seq));
                }
            };
            let leader = thread::spawn(lead.clone());
            let reader = {
                let (mem, visible) = (Arc::clone(&mem), Arc::clone(&visible));
                thread::spawn(move || {
                    let s = visible.load();
                    let x = mem.versions(b"x", s).unwrap();
                    if s.0 == 0 {
                        assert!(x.is_empty(), "x above the snapshot: {x:?}");
                    } else {
                        let expect = vec![(ValueKind::Value, s.0.to_string().into_bytes())];
                        assert_eq!(x, expect, "x at snapshot {s}");
                    }
                })
            };
            lead();
            leader.join().unwrap();
            reader.join().unwrap();
            assert_eq!(visible.load(), SeqNo(2));
        });
    }
}
