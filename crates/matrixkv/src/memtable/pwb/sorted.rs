//! Key order over a write buffer: a sorted run of the committed records' internal keys and
//! log offsets, built by the first iterator and extended by later ones with the records
//! committed since (sorted on their own, then merged in), and the iterator over such a run.
//! The values stay in the region; an iterator reads the one it stands on.

use std::cmp::Ordering as CmpOrdering;
use std::sync::Arc;

use parking_lot::Mutex;

use super::Pwb;
use crate::error::Result;
use crate::key::{self, SeqNo, ValueKind};

/// One version in key order.
#[derive(Debug, Clone)]
pub(super) struct Sorted {
    /// User key and tag.
    ikey: Vec<u8>,
    /// The record's log offset.
    offset: u64,
}

/// The committed records below `tail` in internal-key order, range deletions left out.
#[derive(Debug, Default)]
pub(super) struct Run {
    tail: u64,
    entries: Vec<Sorted>,
}

/// The newest run, shared by the iterators that use it.
#[derive(Debug, Default)]
pub(super) struct SortedCache(Mutex<Arc<Run>>);

impl Pwb {
    /// The sorted run of every record committed so far.
    pub(super) fn sorted_run(&self) -> Result<Arc<Run>> {
        let mut cache = self.sorted.0.lock();
        let tail = self.used_bytes();
        if cache.tail >= tail {
            return Ok(Arc::clone(&cache));
        }
        let mut new = Vec::new();
        let mut at = cache.tail;
        while at < tail {
            let (rec, len) = self.record(at)?;
            if rec.kind != ValueKind::RangeDeletion {
                new.push(Sorted {
                    ikey: key::make_internal_key(&rec.key, rec.seq, rec.kind),
                    offset: at,
                });
            }
            at += len;
        }
        new.sort_by(|a, b| key::compare_internal(&a.ikey, &b.ikey));
        let entries = merge(&cache.entries, new);
        *cache = Arc::new(Run { tail, entries });
        Ok(Arc::clone(&cache))
    }

    /// Every committed version in internal-key order, range deletions left out, as
    /// `(user key, seq, kind, value)`.
    pub(crate) fn for_each(&self, mut f: impl FnMut(&[u8], SeqNo, ValueKind, &[u8])) -> Result<()> {
        let run = self.sorted_run()?;
        for e in &run.entries {
            let (rec, _) = self.record(e.offset)?;
            f(&rec.key, rec.seq, rec.kind, &rec.value);
        }
        Ok(())
    }

    /// An iterator over the versions committed when it is first positioned, range deletions
    /// left out.
    pub(crate) fn iter(self: &Arc<Self>) -> PwbIter {
        PwbIter {
            run: Arc::default(),
            built: false,
            pwb: Arc::clone(self),
            pos: None,
            value: Vec::new(),
        }
    }
}

/// `old` and `new` (each sorted) merged; equal keys cannot occur (sequence numbers differ).
fn merge(old: &[Sorted], new: Vec<Sorted>) -> Vec<Sorted> {
    if new.is_empty() {
        return old.to_vec();
    }
    let mut out = Vec::with_capacity(old.len() + new.len());
    let mut a = old.iter().peekable();
    let mut b = new.into_iter().peekable();
    loop {
        let take_old = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) => key::compare_internal(&x.ikey, &y.ikey) != CmpOrdering::Greater,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        if take_old {
            out.extend(a.next().cloned());
        } else {
            out.extend(b.next());
        }
    }
    out
}

/// A cursor over a sorted run of a write buffer (the records committed when it was made).
#[derive(Debug)]
pub(crate) struct PwbIter {
    pwb: Arc<Pwb>,
    run: Arc<Run>,
    /// Whether `run` was taken (at the first seek).
    built: bool,
    pos: Option<usize>,
    /// The value of the entry at `pos`.
    value: Vec<u8>,
}

impl PwbIter {
    /// Takes the sorted run at the first positioning.
    fn build(&mut self) -> Result<()> {
        if !self.built {
            self.run = self.pwb.sorted_run()?;
            self.built = true;
        }
        Ok(())
    }

    fn land(&mut self, pos: Option<usize>) -> Result<()> {
        self.pos = pos.filter(|&p| p < self.run.entries.len());
        self.value.clear();
        if let Some(e) = self.pos.and_then(|p| self.run.entries.get(p)) {
            self.value = self.pwb.record(e.offset)?.0.value;
        }
        Ok(())
    }

    /// Whether it stands on an entry.
    pub(crate) fn valid(&self) -> bool {
        self.pos.is_some()
    }

    pub(crate) fn seek_to_first(&mut self) -> Result<()> {
        self.build()?;
        self.land(Some(0))
    }

    pub(crate) fn seek_to_last(&mut self) -> Result<()> {
        self.build()?;
        self.land(self.run.entries.len().checked_sub(1))
    }

    /// The first entry at or after the internal key `target`.
    pub(crate) fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.build()?;
        let p = self
            .run
            .entries
            .partition_point(|e| key::compare_internal(&e.ikey, target) == CmpOrdering::Less);
        self.land(Some(p))
    }

    /// The last entry at or before the internal key `target`.
    pub(crate) fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.build()?;
        let p = self
            .run
            .entries
            .partition_point(|e| key::compare_internal(&e.ikey, target) != CmpOrdering::Greater);
        self.land(p.checked_sub(1))
    }

    pub(crate) fn next(&mut self) -> Result<()> {
        self.land(self.pos.map(|p| p + 1))
    }

    pub(crate) fn prev(&mut self) -> Result<()> {
        self.land(self.pos.and_then(|p| p.checked_sub(1)))
    }

    /// The internal key it stands on (empty when not valid).
    pub(crate) fn key(&self) -> &[u8] {
        self.pos
            .and_then(|p| self.run.entries.get(p))
            .map_or(&[], |e| &e.ikey)
    }

    /// The value it stands on (empty when not valid).
    pub(crate) fn value(&self) -> &[u8] {
        &self.value
    }
}
