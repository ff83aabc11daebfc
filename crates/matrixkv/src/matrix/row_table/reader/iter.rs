//! [`RowIter`]: an [`InternalIterator`] over one row.

use super::*;

impl RowReader {
    /// An iterator over the row, not yet positioned.
    pub fn iter(self: &Arc<Self>) -> RowIter {
        RowIter {
            reader: Arc::clone(self),
            pos: self.len(),
            entry: RowEntry::default(),
            key: Vec::new(),
            scratch: Vec::new(),
            value: OnceCell::new(),
            spare: Cell::new(Vec::new()),
            failed: OnceCell::new(),
        }
    }
}

/// An [`InternalIterator`] over one row. Positioning reads the entry and the key; the value
/// is read on the first `value()` at a position and cached until the iterator moves.
///
/// `value()` cannot return an error: if reading the value fails (a freed page, a checksum
/// mismatch), it logs the error, returns an empty slice and the iterator becomes invalid;
/// the next movement returns the error, and [`InternalIterator::value_status`] reports it.
/// Callers that must not see the empty slice check `value_status` after `value()` (the user
/// iterator does) or use [`RowIter::value_checked`].
pub struct RowIter {
    reader: Arc<RowReader>,
    /// Current index; `len` when not positioned.
    pos: usize,
    entry: RowEntry,
    key: Vec<u8>,
    scratch: Vec<u8>,
    /// The current value, once read.
    value: OnceCell<Vec<u8>>,
    /// A buffer kept from an earlier value, reused for the next one.
    spare: Cell<Vec<u8>>,
    /// The error of a failed `value()`.
    failed: OnceCell<Error>,
}

impl std::fmt::Debug for RowIter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowIter")
            .field("row", &self.reader.row())
            .field("pos", &self.pos)
            .field("value_loaded", &self.value.get().is_some())
            .field("failed", &self.failed.get().is_some())
            .finish_non_exhaustive()
    }
}

impl RowIter {
    /// The row this iterator reads.
    pub fn reader(&self) -> &Arc<RowReader> {
        &self.reader
    }

    #[cfg(test)]
    /// Index of the current entry (`None` when not positioned).
    pub fn position(&self) -> Option<usize> {
        self.valid().then_some(self.pos)
    }

    /// A seek that searches only the window `[lo, hi)` and returns the window for the previous
    /// row; with a window from the hint search it is exactly [`InternalIterator::seek`]
    /// (`for_prev` false: the first entry `>= target`) or [`InternalIterator::seek_for_prev`]
    /// (`for_prev` true: the last entry `<= target`, found as the one before the first entry
    /// above `target`). The argument of [`RowReader::prev_window`] holds for the strict search
    /// too: with `i` the first entry above `t`, `e_{i-1} <= t` gives `fwd(i-1) <= UB(t)`, and
    /// `t < e_i` gives `UB(t) <= fwd(i)`.
    pub fn seek_within(
        &mut self,
        target: &[u8],
        lo: usize,
        hi: usize,
        for_prev: bool,
    ) -> Result<(usize, usize)> {
        self.take_failure()?;
        self.reader.check_window(lo, hi)?;
        let i = self
            .reader
            .search(target, lo, hi, for_prev, &mut self.scratch)?;
        let prev = self.reader.prev_window(i)?;
        if for_prev {
            self.moved(i.checked_sub(1))?;
        } else {
            self.set_pos(i)?;
        }
        Ok(prev)
    }

    #[cfg(test)]
    /// The current value, or the error reading it.
    pub fn value_checked(&mut self) -> Result<&[u8]> {
        self.take_failure()?;
        if self.pos >= self.reader.len() {
            return Err(Error::invalid(
                "value() on an iterator that is not positioned",
            ));
        }
        self.load_value()
    }

    fn take_failure(&mut self) -> Result<()> {
        match self.failed.take() {
            Some(e) => {
                self.pos = self.reader.len();
                Err(e)
            }
            None => Ok(()),
        }
    }

    /// Moves to entry `i` (not positioned if `i >= len`).
    fn set_pos(&mut self, i: usize) -> Result<()> {
        if let Some(v) = self.value.take() {
            self.spare.set(v);
        }
        self.pos = self.reader.len();
        if i >= self.reader.len() {
            return Ok(());
        }
        self.entry = self.reader.entry(i)?;
        self.reader.key_of(&self.entry, &mut self.key)?;
        self.pos = i;
        Ok(())
    }

    fn load_value(&self) -> Result<&[u8]> {
        if let Some(v) = self.value.get() {
            return Ok(v);
        }
        let mut buf = self.spare.take();
        self.reader.value_of(&self.entry, &mut buf)?;
        Ok(self.value.get_or_init(|| buf))
    }

    fn moved(&mut self, i: Option<usize>) -> Result<()> {
        match i {
            Some(i) => self.set_pos(i),
            None => self.set_pos(usize::MAX),
        }
    }
}

impl InternalIterator for RowIter {
    fn valid(&self) -> bool {
        self.pos < self.reader.len() && self.failed.get().is_none()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.take_failure()?;
        self.moved(Some(0))
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.take_failure()?;
        let last = self.reader.len().checked_sub(1);
        self.moved(last)
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.take_failure()?;
        let n = self.reader.len();
        let i = self.reader.search(target, 0, n, false, &mut self.scratch)?;
        self.moved(Some(i))
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.take_failure()?;
        let n = self.reader.len();
        // The first entry > target; the one before it is the last entry <= target.
        let i = self.reader.search(target, 0, n, true, &mut self.scratch)?;
        self.moved(i.checked_sub(1))
    }

    fn next(&mut self) -> Result<()> {
        self.take_failure()?;
        let i = self.pos.saturating_add(1);
        self.moved(Some(i))
    }

    fn prev(&mut self) -> Result<()> {
        self.take_failure()?;
        let i = self.pos.checked_sub(1);
        self.moved(i)
    }

    fn key(&self) -> &[u8] {
        if self.valid() { &self.key } else { &[] }
    }

    fn value(&self) -> &[u8] {
        if !self.valid() {
            return &[];
        }
        match self.load_value() {
            Ok(v) => v,
            Err(e) => {
                log::error!("RowTable iterator: {e}");
                let _ = self.failed.set(e);
                &[]
            }
        }
    }

    fn value_status(&self) -> Result<()> {
        match self.failed.get() {
            Some(e) => Err(e.duplicate()),
            None => Ok(()),
        }
    }

    fn site(&self) -> Option<CorruptionSite> {
        // The key's offset in the row, as the row's other errors name it.
        self.valid().then(|| {
            let at = self.reader.header.keys_offset() + u64::from(self.entry.key_off);
            CorruptionSite::new(ArtifactKind::RowTable, &self.reader.src.path, at)
        })
    }
}
