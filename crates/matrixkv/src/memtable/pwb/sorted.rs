//! Key order over a write buffer, which its hash index does not give: the committed records'
//! internal keys and log offsets in two sorted runs, a *base* and a short *tail* of the
//! records committed since the base was built. An iterator sorts the records committed since
//! the last one into the tail (or, once the tail outgrows an eighth of the base, merges both
//! into a new base), then walks both runs as one sequence. So a scan after a few writes costs
//! sorting those writes and copying the tail, not the whole buffer. The values stay in the
//! region; an iterator reads the one it stands on.

use std::cmp::Ordering as CmpOrdering;
use std::sync::Arc;

use super::Pwb;
use crate::error::Result;
use crate::key::{self, SeqNo, ValueKind};
use crate::lock_order::{Mutex, Rank};

/// One version in key order.
#[derive(Debug, Clone)]
pub(super) struct Sorted {
    /// User key and tag.
    ikey: Vec<u8>,
    /// The record's log offset.
    offset: u64,
}

/// The committed records below `tail_end`, range deletions left out, as two sorted runs.
#[derive(Debug, Clone, Default)]
pub(super) struct Runs {
    base: Arc<Vec<Sorted>>,
    tail: Arc<Vec<Sorted>>,
    /// The log offset after the last record in the runs.
    tail_end: u64,
}

/// The newest runs, shared by the iterators that use them.
#[derive(Debug)]
pub(super) struct SortedCache(Mutex<Runs>);

impl Default for SortedCache {
    fn default() -> Self {
        SortedCache(Mutex::new(Rank::LeafPwbSorted, Runs::default()))
    }
}

/// The tail's largest size relative to the base's before both merge: an eighth of the base,
/// at least this many entries.
/// (Small under `cfg(test)`, so that the unit tests walk both runs.)
const MIN_TAIL_CAP: usize = if cfg!(test) { 16 } else { 4096 };

impl Pwb {
    /// The sorted runs of every record committed so far.
    pub(super) fn sorted_runs(&self) -> Result<Runs> {
        let mut cache = self.sorted.0.lock();
        let end = self.used_bytes();
        if cache.tail_end >= end {
            return Ok(cache.clone());
        }
        let mut new = Vec::new();
        let mut at = cache.tail_end;
        while at < end {
            let (seq, kind, mut ikey, len) = self.record_key(at)?;
            if kind != ValueKind::RangeDeletion {
                ikey.extend_from_slice(&key::pack_tag(seq, kind).to_le_bytes());
                new.push(Sorted { ikey, offset: at });
            }
            at += len;
        }
        new.sort_by(|a, b| key::compare_internal(&a.ikey, &b.ikey));
        let tail = merge(&cache.tail, new);
        *cache = if tail.len() > (cache.base.len() / 8).max(MIN_TAIL_CAP) {
            Runs {
                base: Arc::new(merge(&cache.base, tail)),
                tail: Arc::default(),
                tail_end: end,
            }
        } else {
            Runs {
                base: Arc::clone(&cache.base),
                tail: Arc::new(tail),
                tail_end: end,
            }
        };
        Ok(cache.clone())
    }

    /// Every committed version in internal-key order, range deletions left out, as
    /// `(user key, seq, kind, value)`.
    pub(crate) fn for_each(&self, mut f: impl FnMut(&[u8], SeqNo, ValueKind, &[u8])) -> Result<()> {
        let mut it = Cursor::new(self.sorted_runs()?);
        it.seek_to(0, 0);
        while let Some(e) = it.current() {
            let (rec, _) = self.record(e.offset)?;
            f(&rec.key, rec.seq, rec.kind, &rec.value);
            it.step_forward();
        }
        Ok(())
    }

    /// An iterator over the versions committed when it is first positioned, range deletions
    /// left out.
    pub(crate) fn iter(self: &Arc<Self>) -> PwbIter {
        PwbIter {
            cursor: None,
            pwb: Arc::clone(self),
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

/// A position in two sorted runs walked as one sequence: `i` entries of the base and `j` of
/// the tail lie before the current entry, which is the smaller of `base[i]` and `tail[j]`.
#[derive(Debug)]
struct Cursor {
    runs: Runs,
    i: usize,
    j: usize,
}

impl Cursor {
    fn new(runs: Runs) -> Cursor {
        Cursor { runs, i: 0, j: 0 }
    }

    fn seek_to(&mut self, i: usize, j: usize) {
        self.i = i;
        self.j = j;
    }

    /// Whether the current entry is the base's (else the tail's); `None` past the end.
    fn in_base(&self) -> Option<bool> {
        match (self.runs.base.get(self.i), self.runs.tail.get(self.j)) {
            (Some(a), Some(b)) => {
                Some(key::compare_internal(&a.ikey, &b.ikey) == CmpOrdering::Less)
            }
            (Some(_), None) => Some(true),
            (None, Some(_)) => Some(false),
            (None, None) => None,
        }
    }

    fn current(&self) -> Option<&Sorted> {
        match self.in_base()? {
            true => self.runs.base.get(self.i),
            false => self.runs.tail.get(self.j),
        }
    }

    fn step_forward(&mut self) {
        match self.in_base() {
            Some(true) => self.i += 1,
            Some(false) => self.j += 1,
            None => {}
        }
    }

    /// Moves to the last entry before the current one (past the end: the last entry);
    /// false if there is none.
    fn step_back(&mut self) -> bool {
        let a = self.i.checked_sub(1).and_then(|i| self.runs.base.get(i));
        let b = self.j.checked_sub(1).and_then(|j| self.runs.tail.get(j));
        match (a, b) {
            (Some(x), Some(y))
                if key::compare_internal(&x.ikey, &y.ikey) == CmpOrdering::Greater =>
            {
                self.i -= 1;
            }
            (Some(_), None) => self.i -= 1,
            (_, Some(_)) => self.j -= 1,
            (None, None) => return false,
        }
        true
    }

    /// The counts of entries of each run below `target` (`or_equal`: at or below it).
    fn counts(&self, target: &[u8], or_equal: bool) -> (usize, usize) {
        let below = |e: &Sorted| match key::compare_internal(&e.ikey, target) {
            CmpOrdering::Less => true,
            CmpOrdering::Equal => or_equal,
            CmpOrdering::Greater => false,
        };
        (
            self.runs.base.partition_point(below),
            self.runs.tail.partition_point(below),
        )
    }
}

/// A cursor over the sorted runs of a write buffer (the records committed when it was first
/// positioned).
#[derive(Debug)]
pub(crate) struct PwbIter {
    pwb: Arc<Pwb>,
    /// Taken at the first positioning.
    cursor: Option<Cursor>,
    /// The value of the current entry.
    value: Vec<u8>,
}

impl PwbIter {
    fn cursor(&mut self) -> Result<&mut Cursor> {
        if self.cursor.is_none() {
            self.cursor = Some(Cursor::new(self.pwb.sorted_runs()?));
        }
        Ok(self
            .cursor
            .get_or_insert_with(|| Cursor::new(Runs::default())))
    }

    /// Reads the current entry's value (or clears it past the end).
    fn load(&mut self) -> Result<()> {
        self.value.clear();
        let offset = self
            .cursor
            .as_ref()
            .and_then(|c| c.current())
            .map(|e| e.offset);
        if let Some(offset) = offset {
            self.value = self.pwb.record(offset)?.0.value;
        }
        Ok(())
    }

    /// Whether it stands on an entry.
    pub(crate) fn valid(&self) -> bool {
        self.cursor.as_ref().is_some_and(|c| c.current().is_some())
    }

    pub(crate) fn seek_to_first(&mut self) -> Result<()> {
        self.cursor()?.seek_to(0, 0);
        self.load()
    }

    pub(crate) fn seek_to_last(&mut self) -> Result<()> {
        let c = self.cursor()?;
        c.seek_to(c.runs.base.len(), c.runs.tail.len());
        c.step_back();
        self.load()
    }

    /// The first entry at or after the internal key `target`.
    pub(crate) fn seek(&mut self, target: &[u8]) -> Result<()> {
        let c = self.cursor()?;
        let (i, j) = c.counts(target, false);
        c.seek_to(i, j);
        self.load()
    }

    /// The last entry at or before the internal key `target`.
    pub(crate) fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        let c = self.cursor()?;
        let (i, j) = c.counts(target, true);
        c.seek_to(i, j);
        if !c.step_back() {
            // Nothing at or before `target`: invalid (past the end).
            c.seek_to(c.runs.base.len(), c.runs.tail.len());
        }
        self.load()
    }

    pub(crate) fn next(&mut self) -> Result<()> {
        if let Some(c) = self.cursor.as_mut() {
            c.step_forward();
        }
        self.load()
    }

    pub(crate) fn prev(&mut self) -> Result<()> {
        if let Some(c) = self.cursor.as_mut()
            && c.current().is_some()
            && !c.step_back()
        {
            c.seek_to(c.runs.base.len(), c.runs.tail.len());
        }
        self.load()
    }

    /// The internal key it stands on (empty when not valid).
    pub(crate) fn key(&self) -> &[u8] {
        self.cursor
            .as_ref()
            .and_then(|c| c.current())
            .map_or(&[], |e| &e.ikey)
    }

    /// The value it stands on (empty when not valid).
    pub(crate) fn value(&self) -> &[u8] {
        &self.value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(keys: &[(&str, u64)]) -> Arc<Vec<Sorted>> {
        Arc::new(
            keys.iter()
                .map(|&(k, s)| Sorted {
                    ikey: key::make_internal_key(k.as_bytes(), SeqNo(s), ValueKind::Value),
                    offset: s,
                })
                .collect(),
        )
    }

    /// The offsets (= sequence numbers here) a cursor meets walking forward, then backward.
    fn walk(c: &mut Cursor) -> (Vec<u64>, Vec<u64>) {
        let mut fwd = Vec::new();
        c.seek_to(0, 0);
        while let Some(e) = c.current() {
            fwd.push(e.offset);
            c.step_forward();
        }
        let mut back = Vec::new();
        while c.step_back() {
            back.push(c.current().map_or(0, |e| e.offset));
        }
        (fwd, back)
    }

    #[test]
    fn two_runs_walk_as_one_sequence_both_ways_and_seek_from_either() {
        let mut c = Cursor::new(Runs {
            base: run(&[("a", 1), ("c", 3), ("e", 5), ("e", 2)]),
            tail: run(&[("b", 7), ("c", 8), ("f", 9)]),
            tail_end: 0,
        });
        let (fwd, back) = walk(&mut c);
        assert_eq!(fwd, [1, 7, 8, 3, 5, 2, 9]);
        assert_eq!(back, [9, 2, 5, 3, 8, 7, 1]);
        let target = key::seek_key(b"c", SeqNo(5));
        let (i, j) = c.counts(&target, false);
        c.seek_to(i, j);
        assert_eq!(c.current().map(|e| e.offset), Some(3));
        let (i, j) = c.counts(&key::seek_key(b"d", SeqNo(9)), true);
        c.seek_to(i, j);
        assert!(c.step_back());
        assert_eq!(c.current().map(|e| e.offset), Some(3));
    }
}
