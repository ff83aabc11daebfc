//! Column compaction of the matrix container: one column of the compactor's rows, gathered
//! by worker threads, merged with the L1 tables it overlaps into new L1 tables
//! ([`DbInner::run_column`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::time::Instant;

use super::drained_ranges;
use crate::compaction::column::{self, Column, ColumnConfig};
use crate::engine::DbInner;
use crate::engine::compact::MergeOutput;
use crate::engine::jobs::ReservedOutputs;
use crate::error::{Error, Result};
use crate::iter::exclude::{ExcludeRanges, KeyRange};
use crate::iter::merging::MergingIterator;
use crate::iter::{BoxedIter, InternalIterator};
use crate::key::{self, SeqNo};
use crate::matrix::meta::RowMeta;
use crate::matrix::row_table::RowReader as Row;
use crate::matrix::row_table::RowReader;
use crate::stats::Counters;
use crate::version::edit::VersionEdit;
use crate::version::version::Version;

/// Entries per batch a gathering worker sends to the merging thread.
const GATHER_BATCH_BYTES: usize = 1 << 20;

impl DbInner {
    /// Picks and runs one column compaction of the compactor into L1, then installs it.
    pub(super) fn run_column(&self, version: &Arc<Version>, smallest_snapshot: u64) -> Result<()> {
        let start = Instant::now();
        let handle = self.container()?;
        let c = version.container();
        let rows: Vec<(Arc<RowMeta>, Arc<RowReader>)> = c
            .compactor
            .iter()
            .map(|m| Ok((Arc::clone(m), handle.reader(m)?)))
            .collect::<Result<_>>()?;
        let Some(column) = self.choose_column(version, &rows)? else {
            return Ok(());
        };
        // Gather the column from the rows with k workers, merge with the L1 files, write L1.
        if column.is_empty() {
            // Nothing left to drain: record the column (and the drop) without merging.
            log::debug!("matrixkv: empty column completes the drain");
        }
        let l1_children: Vec<BoxedIter> = column
            .l1
            .iter()
            .map(|f| Ok(Box::new(self.tables.get(1, f)?.iter()) as BoxedIter))
            .collect::<Result<_>>()?;
        let l1_bytes: u64 = column.l1.iter().map(|f| f.size).sum();
        // Every path out of the job from here on releases the outputs: the install below, or
        // the drop on an error (a worker panic, a row read failing): they become orphans for
        // obsolete-file deletion. Declared before the state guard below, so dropped after it.
        let mut reserved = ReservedOutputs::new(self);
        let inputs = ColumnInputs {
            version,
            rows: &rows,
            column: &column,
            smallest_snapshot,
        };
        let outputs = self.merge_column(&inputs, l1_children, &mut reserved)?;
        #[cfg(any(test, feature = "testing"))]
        crate::engine::test_hooks::after_column_merge(self, reserved.numbers())?;
        let mut edit = VersionEdit::default();
        let freed = freed_pages(c.drain.as_ref(), &column, &rows)?;
        edit.deleted_files
            .extend(column.l1.iter().map(|f| (1, f.number)));
        let out_bytes = outputs.table_bytes() + outputs.blob_bytes();
        let _ = outputs.add_to(&mut edit, 1);
        edit.column = Some(column.done(freed));
        edit.drop_compactor = column.completes_drain;
        let manifest = self.manifest.lock();
        let mut st = self.state.lock();
        let before = st.versions.current();
        self.install_job_edit(manifest, &mut st, &mut edit, &mut reserved)?;
        let after = st.versions.current();
        self.refresh_view(&st);
        drop(st);
        // Every page the old version had and the new one lacks is released lazily: the
        // compaction loop returns it to the pool once no version (this job's included)
        // references it. The set difference runs without the state lock.
        let released = released_pages(&before, &after);
        self.state.lock().deferred_pages.extend(released);
        handle.retain(&after);
        self.count_column(start, column.l0_bytes, l1_bytes, out_bytes);
        Ok(())
    }

    /// The column to compact next from the compactor's `rows`, if any (a row whose sizes
    /// cannot be read fails the pick).
    fn choose_column(
        &self,
        version: &Version,
        rows: &[(Arc<RowMeta>, Arc<RowReader>)],
    ) -> Result<Option<Column>> {
        let (lower_bytes, upper_bytes) = self.opts.column_bounds();
        let cfg = ColumnConfig {
            lower_bytes,
            upper_bytes,
            all_to_all: !self.opts.column_compaction,
        };
        let mut failure: Option<Error> = None;
        let mut bytes_in = |lo: &[u8], hi: Option<&[u8]>| -> u64 {
            let mut total = 0u64;
            for (_, r) in rows {
                match bytes_between(r, lo, hi) {
                    Ok(b) => total += b,
                    Err(e) => {
                        failure.get_or_insert(e);
                    }
                }
            }
            total
        };
        let column = column::pick_column(version, &cfg, &mut bytes_in);
        if let Some(e) = failure {
            return Err(e);
        }
        let Some(column) = column else {
            return Ok(None);
        };
        log::debug!(
            "matrixkv: column [{:?}, {:?}) with {} L0 bytes and {} L1 tables",
            String::from_utf8_lossy(&column.lower),
            column.upper.as_deref().map(String::from_utf8_lossy),
            column.l0_bytes,
            column.l1.len()
        );
        Ok(Some(column))
    }

    /// Merges the column's part of the rows (gathered by `column_threads` workers) with its L1
    /// tables `l1_children` into new L1 tables.
    fn merge_column(
        &self,
        inputs: &ColumnInputs<'_>,
        l1_children: Vec<BoxedIter>,
        reserved: &mut ReservedOutputs<'_>,
    ) -> Result<MergeOutput> {
        let ColumnInputs {
            version,
            rows,
            column,
            smallest_snapshot,
        } = *inputs;
        let range = bounds_outside(column);
        std::thread::scope(|scope| -> Result<MergeOutput> {
            let k = self.opts.column_threads.min(rows.len()).max(1);
            let mut children = l1_children;
            let mut workers = Vec::new();
            if k <= 1 {
                for (_, r) in rows {
                    children.push(Box::new(ExcludeRanges::new(
                        Box::new(r.iter()),
                        range.clone(),
                    )));
                }
            } else {
                for w in 0..k {
                    let mine: Vec<BoxedIter> = rows
                        .iter()
                        .skip(w)
                        .step_by(k)
                        .map(|(_, r)| {
                            Box::new(ExcludeRanges::new(Box::new(r.iter()), range.clone()))
                                as BoxedIter
                        })
                        .collect();
                    let lower = column.lower.clone();
                    let (tx, rx) = sync_channel::<Result<Batch>>(4);
                    workers.push(scope.spawn(move || gather(mine, &lower, &tx)));
                    children.push(Box::new(ChannelIter::new(rx)));
                }
            }
            let merged = MergingIterator::new(children);
            let out = self.merge_into_level(
                version,
                Box::new(merged),
                1,
                smallest_snapshot,
                &crate::engine::compact::MergeExtras::default(),
                reserved,
            );
            for w in workers {
                if w.join().is_err() {
                    return Err(Error::invalid("a column gathering thread panicked"));
                }
            }
            out
        })
    }

    /// Counts a finished column compaction that started at `start`.
    fn count_column(&self, start: Instant, l0_bytes: u64, l1_bytes: u64, out_bytes: u64) {
        Counters::add(&self.counters.compactions, 1);
        Counters::add(&self.counters.l0_compactions, 1);
        Counters::add(&self.counters.l0_compaction_input_bytes, l0_bytes);
        Counters::add(&self.counters.compaction_input_bytes, l0_bytes + l1_bytes);
        Counters::add(&self.counters.compaction_output_bytes, out_bytes);
        Counters::add(&self.counters.slow_bytes_written, out_bytes);
        Counters::add(
            &self.counters.compaction_micros,
            u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX),
        );
    }
}

/// What a column compaction merges: the compactor's rows and the column picked in them.
#[derive(Clone, Copy)]
struct ColumnInputs<'a> {
    version: &'a Version,
    rows: &'a [(Arc<RowMeta>, Arc<RowReader>)],
    column: &'a Column,
    smallest_snapshot: u64,
}

/// Page releases of a column compaction: value pages of each row fully inside its consumed
/// part, as (row, first page, page count).
fn freed_pages(
    drain: Option<&crate::version::version::Drain>,
    column: &Column,
    rows: &[(Arc<RowMeta>, Arc<RowReader>)],
) -> Result<Vec<(u64, u32, u32)>> {
    let mut freed = Vec::new();
    let consumed = consumed_after(drain, column);
    for (meta, r) in rows {
        for range in &consumed {
            let (lo, hi) = entry_range(r, range)?;
            let pages = r.freeable_pages(lo, hi)?;
            if !pages.is_empty() {
                let first = u32::try_from(pages.start).unwrap_or(u32::MAX);
                let count = u32::try_from(pages.len()).unwrap_or(u32::MAX);
                freed.push((meta.row, first, count));
            }
        }
    }
    Ok(freed)
}

/// The user-key ranges outside a column, to restrict row iterators to the column.
fn bounds_outside(column: &Column) -> Vec<KeyRange> {
    let mut r = Vec::new();
    if !column.lower.is_empty() {
        r.push(KeyRange {
            lower: Vec::new(),
            upper: Some(column.lower.clone()),
        });
    }
    if let Some(u) = &column.upper {
        r.push(KeyRange {
            lower: u.clone(),
            upper: None,
        });
    }
    r
}

/// The consumed ranges once `column` is installed, adjacent ranges merged (a page straddling
/// the boundary of two consumed columns is freeable only when both are seen as one range).
fn consumed_after(
    drain: Option<&crate::version::version::Drain>,
    column: &Column,
) -> Vec<KeyRange> {
    let mut ranges = drained_ranges(drain);
    ranges.push(KeyRange {
        lower: column.lower.clone(),
        upper: column.upper.clone(),
    });
    ranges.sort_by(|a, b| a.lower.cmp(&b.lower));
    let mut merged: Vec<KeyRange> = Vec::new();
    for r in ranges {
        match merged.last_mut() {
            Some(last) if last.upper.as_ref().is_none_or(|u| *u >= r.lower) => {
                last.upper = match (&last.upper, &r.upper) {
                    (None, _) | (_, None) => None,
                    (Some(a), Some(b)) => Some(a.max(b).clone()),
                };
            }
            _ => merged.push(r),
        }
    }
    merged
}

/// Entry indices `[lo, hi)` of a row whose user keys lie in `range`.
fn entry_range(r: &Row, range: &KeyRange) -> Result<(usize, usize)> {
    let lo = r.lower_bound(&key::seek_key(&range.lower, SeqNo::MAX), 0, r.len())?;
    let hi = match &range.upper {
        Some(u) => r.lower_bound(&key::seek_key(u, SeqNo::MAX), lo, r.len())?,
        None => r.len(),
    };
    Ok((lo, hi))
}

/// Bytes (entries, keys, values) a row holds for user keys in `[lo, hi)`.
fn bytes_between(r: &Row, lo: &[u8], hi: Option<&[u8]>) -> Result<u64> {
    let range = KeyRange {
        lower: lo.to_vec(),
        upper: hi.map(<[u8]>::to_vec),
    };
    let (a, b) = entry_range(r, &range)?;
    if a == b {
        return Ok(0);
    }
    let (first, last) = (r.entry(a)?, r.entry(b - 1)?);
    let values = last.value_off + u64::from(last.value_len) - first.value_off;
    let keys = u64::from(last.key_off) + u64::from(last.key_len) - u64::from(first.key_off);
    Ok(values + keys + 32 * (b - a) as u64)
}

/// Physical pages referenced by `before`'s container and not by `after`'s.
fn released_pages(before: &Version, after: &Version) -> Vec<u32> {
    // Rows never change pages except by freeing logical positions, so a row's release is the
    // positions live before and not after (or all its pages if it left). Comparing positions
    // costs a pass over the changed rows only, not a hash set of every page of the container.
    let (a, b) = (after.container(), before.container());
    let after_rows: HashMap<u64, &Arc<RowMeta>> = a
        .receiver
        .iter()
        .chain(a.compactor.iter())
        .map(|m| (m.row, m))
        .collect();
    let mut released = Vec::new();
    for m in b.receiver.iter().chain(b.compactor.iter()) {
        match after_rows.get(&m.row) {
            None => released.extend(m.pages.live()),
            Some(a) if Arc::ptr_eq(&a.pages, &m.pages) => {}
            Some(a) => {
                for i in 0..m.pages.len() {
                    if let Some(p) = m.pages.physical(i)
                        && a.pages.physical(i) != Some(p)
                    {
                        released.push(p);
                    }
                }
            }
        }
    }
    released
}

/// Entries a gathering worker sends at once.
type Batch = Vec<(Vec<u8>, Vec<u8>)>;

/// A gathering worker: merges its rows' entries of the column and sends them in batches.
fn gather(rows: Vec<BoxedIter>, lower: &[u8], tx: &SyncSender<Result<Batch>>) {
    let run = || -> Result<()> {
        let mut it = MergingIterator::new(rows);
        it.seek(&key::seek_key(lower, SeqNo::MAX))?;
        let mut batch = Vec::new();
        let mut bytes = 0;
        while it.valid() {
            bytes += it.key().len() + it.value().len();
            batch.push((it.key().to_vec(), it.value().to_vec()));
            if bytes >= GATHER_BATCH_BYTES {
                if tx.send(Ok(std::mem::take(&mut batch))).is_err() {
                    return Ok(());
                }
                bytes = 0;
            }
            it.next()?;
        }
        if !batch.is_empty() {
            let _ = tx.send(Ok(batch));
        }
        Ok(())
    };
    if let Err(e) = run() {
        let _ = tx.send(Err(e));
    }
}

/// A forward-only iterator over the batches a gathering worker sends (the receiver needs no
/// lock: an iterator is `Send`, not shared, and its calls take `&mut self`).
struct ChannelIter {
    rx: Receiver<Result<Batch>>,
    batch: std::vec::IntoIter<(Vec<u8>, Vec<u8>)>,
    current: Option<(Vec<u8>, Vec<u8>)>,
}

impl ChannelIter {
    fn new(rx: Receiver<Result<Batch>>) -> Self {
        ChannelIter {
            rx,
            batch: Vec::new().into_iter(),
            current: None,
        }
    }

    fn advance(&mut self) -> Result<()> {
        loop {
            if let Some(e) = self.batch.next() {
                self.current = Some(e);
                return Ok(());
            }
            match self.rx.recv() {
                Ok(Ok(b)) => self.batch = b.into_iter(),
                Ok(Err(e)) => {
                    self.current = None;
                    return Err(e);
                }
                Err(_) => {
                    self.current = None;
                    return Ok(());
                }
            }
        }
    }

    fn unsupported() -> Error {
        Error::invalid("a column stream can only be read forward from its start")
    }
}

impl InternalIterator for ChannelIter {
    fn valid(&self) -> bool {
        self.current.is_some()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        if self.current.is_none() {
            self.advance()
        } else {
            Ok(())
        }
    }
    fn seek_to_last(&mut self) -> Result<()> {
        Err(Self::unsupported())
    }
    fn seek(&mut self, _target: &[u8]) -> Result<()> {
        Err(Self::unsupported())
    }
    fn seek_for_prev(&mut self, _target: &[u8]) -> Result<()> {
        Err(Self::unsupported())
    }
    fn next(&mut self) -> Result<()> {
        self.advance()
    }
    fn prev(&mut self) -> Result<()> {
        Err(Self::unsupported())
    }
    fn key(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |(k, _)| k)
    }
    fn value(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |(_, v)| v)
    }
}
