//! The matrix container, L0 of a database created with the matrix layout: [`Container`], its
//! rows split into the receiver and the compactor, and [`Drain`], how far column compaction has
//! drained the compactor; with the checks and edits that change them.
#![deny(clippy::indexing_slicing)]

use std::collections::HashSet;
use std::sync::Arc;

use crate::error::CorruptionReason;
use crate::matrix::meta::RowMeta;
use crate::version::edit::{ColumnDone, VersionEdit, check_row};

/// How far column compaction has drained the compactor.
///
/// The compactor is drained over the key space as a circle: from `start` up to the end of
/// the key space, then (after `wrapped` is set) from the empty key up to `start` again. The
/// user keys already drained form the circular range `[start, cursor)`; their data is in L1
/// and reads must not take them from the compactor.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Drain {
    /// The user key where draining this compactor began (the global cursor at the switch).
    pub start: Vec<u8>,
    /// The user key where the next column starts.
    pub cursor: Vec<u8>,
    /// The cursor went past the end of the key space and restarted at the empty key.
    pub wrapped: bool,
}

impl Drain {
    /// True if `user_key` lies in the drained circular range `[start, cursor)`.
    pub fn consumed(&self, user_key: &[u8]) -> bool {
        if self.wrapped {
            user_key >= self.start.as_slice() || user_key < self.cursor.as_slice()
        } else {
            self.start.as_slice() <= user_key && user_key < self.cursor.as_slice()
        }
    }

    #[cfg(test)]
    /// True if the whole key space was drained (the cursor came back around to `start`).
    pub fn is_complete(&self) -> bool {
        self.wrapped && self.cursor >= self.start
    }

    /// Checks that the cursor lies where a drain can put it: at or after `start` before the
    /// wrap, at or before it after.
    pub fn validate(&self) -> Result<(), CorruptionReason> {
        if self.wrapped && self.cursor > self.start {
            return Err(CorruptionReason::Invalid(
                "drain cursor is past its start after wrapping",
            ));
        }
        if !self.wrapped && self.cursor < self.start {
            return Err(CorruptionReason::Invalid(
                "drain cursor is before its start without wrapping",
            ));
        }
        Ok(())
    }

    /// Checks that moving the cursor to (`cursor`, `wrapped`) only drains forward: it never
    /// un-wraps, never moves back within a lap, and never passes `start` after the wrap.
    fn check_advance(&self, cursor: &[u8], wrapped: bool) -> Result<(), CorruptionReason> {
        let back = match (self.wrapped, wrapped) {
            (true, false) => true,
            (false, true) => false,
            _ => cursor < self.cursor.as_slice(),
        };
        if back {
            return Err(CorruptionReason::Invalid(
                "column moves the drain cursor back",
            ));
        }
        if wrapped && cursor > self.start.as_slice() {
            return Err(CorruptionReason::Invalid(
                "column drains past the start of the drain",
            ));
        }
        Ok(())
    }
}

/// The matrix container's rows: L0 of a matrix-layout database. Immutable once built (part
/// of a [`Version`]).
///
/// Row numbers strictly increase from the oldest compactor row to the newest receiver row.
/// The compactor is non-empty exactly when `drain` is set.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Container {
    /// Rows that receive flushes, oldest first.
    pub receiver: Vec<Arc<RowMeta>>,
    /// Rows being drained into L1 by column compaction, oldest first.
    pub compactor: Vec<Arc<RowMeta>>,
    /// Drain progress over the compactor (`Some` exactly when the compactor is non-empty).
    pub drain: Option<Drain>,
    /// Where the next compactor starts draining (rotation across compactors); the empty key
    /// at creation.
    pub cursor: Vec<u8>,
}

impl Container {
    /// True when the container holds no row.
    pub fn is_empty(&self) -> bool {
        self.receiver.is_empty() && self.compactor.is_empty()
    }

    #[cfg(test)]
    /// Every row, newest first: the receiver newest to oldest, then the compactor newest to
    /// oldest (the order a read searches them in).
    pub fn rows_newest_first(&self) -> impl Iterator<Item = &Arc<RowMeta>> + '_ {
        self.receiver
            .iter()
            .rev()
            .chain(self.compactor.iter().rev())
    }

    #[cfg(test)]
    /// The row numbered `row`, in either role.
    pub fn find_row(&self, row: u64) -> Option<&Arc<RowMeta>> {
        [&self.compactor, &self.receiver]
            .into_iter()
            .find_map(|rows| {
                rows.binary_search_by_key(&row, |r| r.row)
                    .ok()
                    .and_then(|i| rows.get(i))
            })
    }

    /// The largest row number in the container.
    pub fn max_row(&self) -> Option<u64> {
        self.receiver
            .last()
            .or(self.compactor.last())
            .map(|r| r.row)
    }

    /// True if `user_key` was already drained from the compactor into L1 (see
    /// [`Drain::consumed`]): reads must skip the compactor's rows for it. False when there is
    /// no compactor.
    pub fn consumed(&self, user_key: &[u8]) -> bool {
        self.drain.as_ref().is_some_and(|d| d.consumed(user_key))
    }

    #[cfg(test)]
    /// Sum of the logical sizes (`RowMeta::bytes`) of the receiver's rows.
    pub fn receiver_bytes(&self) -> u64 {
        self.receiver.iter().map(|r| r.bytes).sum()
    }

    #[cfg(test)]
    /// Sum of the logical sizes (`RowMeta::bytes`) of the compactor's rows (drained parts
    /// included: see [`Container::compactor_pages`] for what they still occupy).
    pub fn compactor_bytes(&self) -> u64 {
        self.compactor.iter().map(|r| r.bytes).sum()
    }

    /// Physical pages held by the receiver's rows.
    pub fn receiver_pages(&self) -> usize {
        self.receiver.iter().map(|r| r.pages.live_count()).sum()
    }

    /// Physical pages still held by the compactor's rows (freed pages excluded).
    pub fn compactor_pages(&self) -> usize {
        self.compactor.iter().map(|r| r.pages.live_count()).sum()
    }

    /// Physical pages held by all rows.
    pub fn live_pages(&self) -> usize {
        self.receiver_pages() + self.compactor_pages()
    }

    /// Every physical page referenced by a row (freed pages excluded), receiver rows first.
    pub fn all_row_pages(&self) -> Vec<u32> {
        self.receiver
            .iter()
            .chain(&self.compactor)
            .flat_map(|r| r.pages.live())
            .collect()
    }

    /// The first physical page referenced twice (by two rows or twice by one row).
    pub fn duplicate_page(&self) -> Option<u32> {
        let mut seen = HashSet::new();
        self.all_row_pages().into_iter().find(|&p| !seen.insert(p))
    }

    /// Checks the container's invariants (see [`Version::check_invariants`]).
    pub(super) fn check(&self) -> Result<(), String> {
        for r in self.receiver.iter().chain(&self.compactor) {
            check_row(r).map_err(|e| format!("row {}: {e}", r.row))?;
        }
        for rows in [&self.compactor, &self.receiver] {
            for pair in rows.windows(2) {
                if let [a, b] = pair
                    && a.row >= b.row
                {
                    return Err(format!("rows {} and {} are not oldest first", a.row, b.row));
                }
            }
        }
        if let (Some(c), Some(r)) = (self.compactor.last(), self.receiver.first())
            && c.row >= r.row
        {
            return Err(format!(
                "compactor row {} is not older than receiver row {}",
                c.row, r.row
            ));
        }
        if let Some(r) = self
            .receiver
            .iter()
            .find(|r| r.pages.live_count() != r.pages.len())
        {
            return Err(format!("receiver row {} has freed pages", r.row));
        }
        match &self.drain {
            None if !self.compactor.is_empty() => {
                return Err("the compactor has rows but no drain state".into());
            }
            Some(_) if self.compactor.is_empty() => {
                return Err("drain state without compactor rows".into());
            }
            Some(d) => d.validate().map_err(|e| e.to_string())?,
            None => {}
        }
        if let Some(p) = self.duplicate_page() {
            return Err(format!("page {p} is referenced twice"));
        }
        Ok(())
    }

    /// Applies the container fields of `edit`, in this order: restored compactor (snapshot),
    /// new rows, role switch, column, compactor drop, global cursor.
    pub(super) fn apply(&mut self, edit: &VersionEdit) -> Result<(), CorruptionReason> {
        if !edit.compactor_rows.is_empty() || edit.drain.is_some() {
            self.restore_compactor(edit)?;
        }
        let mut last = self.max_row();
        for r in &edit.new_rows {
            check_row(r)?;
            if r.pages.live_count() != r.pages.len() {
                return Err(CorruptionReason::Invalid("a new row has freed pages"));
            }
            if last.is_some_and(|l| r.row <= l) {
                return Err(CorruptionReason::Invalid(
                    "a new row's number is not above every row's",
                ));
            }
            last = Some(r.row);
            self.receiver.push(Arc::new(r.clone()));
        }
        if edit.switch_roles {
            if !self.compactor.is_empty() {
                return Err(CorruptionReason::Invalid(
                    "role switch while the compactor is not empty",
                ));
            }
            if self.receiver.is_empty() {
                return Err(CorruptionReason::Invalid(
                    "role switch with an empty receiver",
                ));
            }
            self.compactor = std::mem::take(&mut self.receiver);
            self.drain = Some(Drain {
                start: self.cursor.clone(),
                cursor: self.cursor.clone(),
                wrapped: false,
            });
        }
        if let Some(col) = &edit.column {
            self.apply_column(col)?;
        }
        if edit.drop_compactor {
            let d = self.drain.take().ok_or(CorruptionReason::Invalid(
                "compactor dropped while it is empty",
            ))?;
            self.compactor.clear();
            self.cursor = d.cursor;
        }
        if let Some(k) = &edit.global_cursor {
            self.cursor.clone_from(k);
        }
        Ok(())
    }

    fn restore_compactor(&mut self, edit: &VersionEdit) -> Result<(), CorruptionReason> {
        if !self.is_empty() || self.drain.is_some() {
            return Err(CorruptionReason::Invalid(
                "edit restores a compactor into a non-empty container",
            ));
        }
        let drain = edit.drain.clone().ok_or(CorruptionReason::Invalid(
            "compactor rows restored without drain state",
        ))?;
        if edit.compactor_rows.is_empty() {
            return Err(CorruptionReason::Invalid(
                "drain state restored without compactor rows",
            ));
        }
        drain.validate()?;
        let mut last = None;
        for r in &edit.compactor_rows {
            check_row(r)?;
            if last.is_some_and(|l| r.row <= l) {
                return Err(CorruptionReason::Invalid(
                    "restored compactor rows are not oldest first",
                ));
            }
            last = Some(r.row);
            self.compactor.push(Arc::new(r.clone()));
        }
        self.drain = Some(drain);
        Ok(())
    }

    fn apply_column(&mut self, col: &ColumnDone) -> Result<(), CorruptionReason> {
        let drain = self.drain.as_mut().ok_or(CorruptionReason::Invalid(
            "column compaction without a compactor",
        ))?;
        drain.check_advance(&col.cursor, col.wrapped)?;
        for &(row, first, count) in &col.freed {
            let slot = self
                .compactor
                .binary_search_by_key(&row, |r| r.row)
                .ok()
                .and_then(|i| self.compactor.get_mut(i))
                .ok_or(CorruptionReason::Invalid(
                    "freed pages of a row that is not in the compactor",
                ))?;
            let first = first as usize;
            let end = first.saturating_add(count as usize);
            if count == 0 || end > slot.pages.len() {
                return Err(CorruptionReason::Invalid(
                    "freed page range is empty or outside its row",
                ));
            }
            // Freeing a page freed before is a no-op (`with_freed` skips it).
            let (pages, _released) = slot.pages.with_freed(first..end);
            let mut meta = RowMeta::clone(slot);
            meta.pages = Arc::new(pages);
            *slot = Arc::new(meta);
        }
        drain.cursor.clone_from(&col.cursor);
        drain.wrapped = col.wrapped;
        Ok(())
    }
}
