//! The merge loop of a compaction, [`DbInner::merge_into_level`], in named steps: start a user
//! key (splitting the output), decide whether an entry is dropped, fold or filter it, separate
//! or relocate its value, and add it to the current output table.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use super::fold::{Entries, Filtering};
use super::{
    MergeExtras, MergeOutput, Superseded, decode_pointer, input_site, parse_input, parse_key,
    unknown_input_site,
};
use crate::blob::writer::BlobWriter;
use crate::engine::DbInner;
use crate::engine::jobs::ReservedOutputs;
use crate::error::{ArtifactKind, Result};
use crate::iter::{BoxedIter, InternalIterator};
use crate::key::{self, SeqNo, ValueKind};
use crate::keyspace::registry::{Registry, Settings};
use crate::layout::{self, FileNum};
use crate::range_del::RangeDelIndex;
use crate::sst;
use crate::stats::Counters;
use crate::version::edit::BlobGarbage;
use crate::version::version::Version;

impl DbInner {
    /// Writes the entries of `it` (internal-key order) as new tables of `output_level` (slow
    /// tier), dropping versions no snapshot can see and tombstones that hide nothing. Output
    /// tables are split near `target_file_bytes`, never between two versions of one user key.
    ///
    /// Key-value separation: a value of at least `min_blob_bytes` goes to a blob file and the
    /// table keeps a pointer; a pointer into a blob file whose garbage share reached
    /// `blob_gc_ratio` is relocated (its value copied to this job's blob file). Dropped and
    /// relocated pointers are counted as garbage of their files in the output.
    ///
    /// `extras` (blob GC): more blob files whose pointers are relocated whatever their
    /// garbage share, and user keys at which a new output table must start.
    ///
    /// Each output table records the blob files its pointers reference (`FileMeta::blob_refs`).
    ///
    /// Output numbers are reserved in `reserved`, which the caller releases once the edit
    /// naming the outputs is installed; on error (here or later in the job) the caller's drop
    /// of `reserved` leaves the outputs orphans that obsolete-file deletion removes.
    pub(crate) fn merge_into_level(
        &self,
        version: &Version,
        mut it: BoxedIter,
        output_level: usize,
        smallest_snapshot: u64,
        extras: &MergeExtras,
        reserved: &mut ReservedOutputs<'_>,
    ) -> Result<MergeOutput> {
        it.seek_to_first()?;
        // Snapshots taken from here on see every input; the filter leaves the versions of
        // those taken before alone.
        let newest_snapshot: Option<u64> = self.state.lock().snapshots.keys().next_back().copied();
        // The settings of each key's keyspace: filter, TTL, merge operator, blob threshold.
        let keyspaces = self.keyspaces();
        let job = MergeJob {
            version,
            output_level,
            smallest_snapshot,
            extras,
        };
        let mut run = MergeRun::new(self, &keyspaces, newest_snapshot, job);
        // On error the partial outputs stay in `reserved` until the caller drops it.
        run.read_all(&mut it, reserved)?;
        run.finish()
    }
}

/// What a merge writes and under which rules (the arguments of `merge_into_level`).
struct MergeJob<'a> {
    version: &'a Version,
    output_level: usize,
    smallest_snapshot: u64,
    extras: &'a MergeExtras,
}

/// How an entry is written (`MergeRun::separate`).
enum Written {
    /// Key and value as read.
    AsRead,
    /// Its value moved to a blob file: the rewritten key and the pointer.
    Separated,
    /// Its pointer relocated: the key as read with the new pointer.
    Relocated,
}

/// One run of `merge_into_level`: the settings it reads with, the user key it is at and the
/// outputs it is writing.
struct MergeRun<'a> {
    db: &'a DbInner,
    job: MergeJob<'a>,
    keyspaces: &'a Arc<Registry>,
    filtering: bool,
    newest_snapshot: Option<u64>,
    now: u64,
    relocate: HashSet<u64>,
    slow_dir: PathBuf,
    /// The version's range tombstones: every input entry is older than any tombstone a
    /// later flush adds, so these are all that can cover one.
    range_dels: Arc<RangeDelIndex>,
    out: MergeOutput,
    builder: Option<(FileNum, sst::Builder)>,
    blob: Option<BlobWriter>,
    garbage: BTreeMap<u64, (u64, u64)>,
    /// Blob files the current output table references.
    refs: BTreeSet<u64>,
    next_split: usize,
    current_user: Vec<u8>,
    has_current: bool,
    last_seq_for_key: u64,
    split_pending: bool,
    rewritten_key: Vec<u8>,
    /// Blob bytes the current output table points to: tables are split by the data they
    /// stand for, so a level of pointers keeps as many key ranges as a level of values
    /// (column compaction picks its columns by L1 key ranges).
    referenced: u64,
    pointer: Vec<u8>,
}

impl<'a> MergeRun<'a> {
    fn new(
        db: &'a DbInner,
        keyspaces: &'a Arc<Registry>,
        newest_snapshot: Option<u64>,
        job: MergeJob<'a>,
    ) -> Self {
        let filtering = keyspaces.any_filtering();
        let now = db.opts.clock.now_millis();
        let relocate: HashSet<u64> = job
            .version
            .blob_files()
            .values()
            .filter(|b| b.garbage_ratio() >= db.opts.blob_gc_ratio)
            .map(|b| b.meta.number.0)
            .chain(job.extras.relocate.iter().map(|n| n.0))
            .collect();
        let slow_dir = db.opts.slow_dir.clone();
        let range_dels = Arc::clone(job.version.range_dels());
        MergeRun {
            db,
            job,
            keyspaces,
            filtering,
            newest_snapshot,
            now,
            relocate,
            slow_dir,
            range_dels,
            out: MergeOutput::default(),
            builder: None,
            blob: None,
            garbage: BTreeMap::new(),
            refs: BTreeSet::new(),
            next_split: 0,
            current_user: Vec::new(),
            has_current: false,
            last_seq_for_key: u64::MAX,
            split_pending: false,
            rewritten_key: Vec::new(),
            referenced: 0,
            pointer: Vec::new(),
        }
    }

    /// Reads `it` to its end, writing what is kept; then finishes the open table and blob file.
    fn read_all(&mut self, it: &mut BoxedIter, reserved: &mut ReservedOutputs<'_>) -> Result<()> {
        while it.valid() {
            self.read_entry(it, reserved)?;
        }
        if let Some((number, b)) = self.builder.take() {
            self.out.finish_table(number, b, &mut self.refs)?;
        }
        if let Some(w) = self.blob.take() {
            self.out.finish_blob(w)?;
        }
        Ok(())
    }

    /// Reads the entry `it` is at (and, for a fold, the older ones it folds) and leaves `it`
    /// after them.
    fn read_entry(&mut self, it: &mut BoxedIter, reserved: &mut ReservedOutputs<'_>) -> Result<()> {
        let parsed = parse_input(it.as_ref())?;
        let new_user_key = !self.has_current || parsed.user_key != self.current_user.as_slice();
        if new_user_key {
            self.start_key(parsed.user_key)?;
        }
        let seq = parsed.seq.0;
        let kind = parsed.kind;
        // The settings of the key's keyspace (every entry written below is this key's).
        let keyspaces = self.keyspaces;
        let ks = keyspaces.for_key(parsed.user_key);
        let min_blob_bytes = ks.min_blob_bytes.or(self.db.opts.min_blob_bytes);
        let first_of_key = self.last_seq_for_key == u64::MAX;
        if first_of_key
            && let Some(Superseded(newer)) = &self.job.extras.superseded
            && let Some(bound) = newer(parsed.user_key)?
        {
            // A newer version outside the inputs (SLM-DB): where every snapshot sees
            // it, it stands for the newest version of the key here.
            self.last_seq_for_key = bound.0;
        }
        let drop_entry = self.is_dropped(&parsed);
        self.last_seq_for_key = seq;
        if drop_entry {
            if kind == ValueKind::BlobIndex {
                let p = decode_pointer(it.value(), || input_site(it.as_ref()))?;
                self.add_garbage(p.file.0, p.len);
            }
            return it.next();
        }
        let (folded, advanced) = self.fold_or_filter(it, kind, seq, first_of_key, ks)?;
        match &folded {
            Some(f) => {
                for (k, v) in f {
                    self.write_entry(k, v, min_blob_bytes, None, reserved)?;
                }
            }
            None => {
                let from = Some(it.as_ref());
                self.write_entry(it.key(), it.value(), min_blob_bytes, from, reserved)?;
            }
        }
        if !advanced {
            it.next()?;
        }
        Ok(())
    }

    /// Starts user key `user_key`: records it, and starts a new output table where one is due
    /// (the current one reached its target size, or `extras.split_at` names a key passed).
    fn start_key(&mut self, user_key: &[u8]) -> Result<()> {
        self.current_user.clear();
        self.current_user.extend_from_slice(user_key);
        if self.job.extras.record_keys {
            self.out.input_keys.push(self.current_user.clone());
        }
        self.has_current = true;
        self.last_seq_for_key = u64::MAX;
        let mut forced = false;
        while self
            .job
            .extras
            .split_at
            .get(self.next_split)
            .is_some_and(|k| user_key >= k.as_slice())
        {
            self.next_split += 1;
            forced = true;
        }
        if self.split_pending || forced {
            if let Some((number, b)) = self.builder.take() {
                self.out.finish_table(number, b, &mut self.refs)?;
            }
            self.split_pending = false;
            self.referenced = 0;
        }
        Ok(())
    }

    /// Whether the entry is dropped: a newer version of its key, or a range tombstone, every
    /// snapshot sees hides it, or it is a tombstone no snapshot needs that hides nothing below.
    fn is_dropped(&self, parsed: &key::ParsedKey<'_>) -> bool {
        let smallest_snapshot = self.job.smallest_snapshot;
        if self.last_seq_for_key <= smallest_snapshot {
            // A newer version of this key is visible to every snapshot.
            true
        } else if !self.range_dels.is_empty()
            && self
                .range_dels
                .max_covering(parsed.user_key, SeqNo(smallest_snapshot))
                .is_some_and(|t| parsed.seq < t)
        {
            // A range tombstone every snapshot sees deletes it (and the key's older
            // versions, dropped here in turn).
            true
        } else {
            let MergeJob {
                version,
                output_level,
                extras,
                ..
            } = self.job;
            parsed.kind == ValueKind::Deletion
                && parsed.seq.0 <= smallest_snapshot
                && extras.bottommost(version, output_level, parsed.user_key)
        }
    }

    /// The entries written instead of the one `it` is at, if any, and whether `it` was moved
    /// past what they replace.
    fn fold_or_filter(
        &mut self,
        it: &mut BoxedIter,
        kind: ValueKind,
        seq: u64,
        first_of_key: bool,
        ks: &Settings,
    ) -> Result<(Option<Entries>, bool)> {
        let MergeJob {
            version,
            output_level,
            smallest_snapshot,
            extras,
        } = self.job;
        if kind == ValueKind::Merge && seq <= smallest_snapshot {
            // The newest operand no snapshot separates from the older versions: fold them
            // (this advances `it` past what it folds; older versions left are dropped above).
            let at = (version, output_level, extras);
            let folded = self.db.fold_merge(it, at, ks, &mut self.garbage)?;
            return Ok((Some(folded), true));
        }
        if self.filtering
            && first_of_key
            && matches!(kind, ValueKind::Value | ValueKind::BlobIndex)
            && self.newest_snapshot.is_none_or(|s| seq > s)
            && ks.filtering()
        {
            // The key's newest version here, which no snapshot can read: the
            // compaction filter and the TTL decide (`compaction_filter.rs`).
            let at = Filtering {
                version,
                extras,
                output_level,
                smallest_snapshot,
                keyspace: ks,
                now: self.now,
            };
            let filtered = self.db.filter_entry(it.as_ref(), &at, &mut self.garbage)?;
            return Ok((filtered, false));
        }
        Ok((None, false))
    }

    /// Writes one entry to the current output table (opening one if none is open), its value
    /// separated or relocated as due. `from` is the iterator the entry was read at, `None` for
    /// one a fold read.
    fn write_entry(
        &mut self,
        ikey: &[u8],
        value: &[u8],
        min_blob_bytes: Option<usize>,
        from: Option<&dyn InternalIterator>,
        reserved: &mut ReservedOutputs<'_>,
    ) -> Result<()> {
        let written = self.separate(ikey, value, min_blob_bytes, from, reserved)?;
        if self.builder.is_none() {
            self.builder = Some(self.open_table(reserved)?);
        }
        // The entry as written: unchanged, or with its value moved to a blob file.
        let (out_key, out_value): (&[u8], &[u8]) = match written {
            Written::AsRead => (ikey, value),
            Written::Separated => (&self.rewritten_key, &self.pointer),
            Written::Relocated => (ikey, &self.pointer),
        };
        if let Some((_, b)) = self.builder.as_mut() {
            b.add(out_key, out_value)?;
            let target = self.job.extras.target_bytes;
            if b.estimated_size() + self.referenced
                >= target.unwrap_or(self.db.opts.target_file_bytes)
            {
                self.split_pending = true;
            }
        }
        if self
            .blob
            .as_ref()
            .is_some_and(|w| w.len() >= self.db.opts.blob_file_bytes)
            && let Some(w) = self.blob.take()
        {
            self.out.finish_blob(w)?;
        }
        Ok(())
    }

    /// Moves a large value to this job's blob file, and a pointer into a file being collected
    /// to it; counts the blob bytes the current table references.
    fn separate(
        &mut self,
        ikey: &[u8],
        value: &[u8],
        min_blob_bytes: Option<usize>,
        from: Option<&dyn InternalIterator>,
        reserved: &mut ReservedOutputs<'_>,
    ) -> Result<Written> {
        let parsed = parse_key(ikey, ArtifactKind::Sst, "compaction input")?;
        match parsed.kind {
            ValueKind::Value if min_blob_bytes.is_some_and(|min| value.len() >= min) => {
                let w = self.db.blob_writer(&mut self.blob, reserved)?;
                let p = w.add(parsed.user_key, value)?;
                self.rewritten_key.clear();
                key::append_internal_key(
                    &mut self.rewritten_key,
                    parsed.user_key,
                    parsed.seq,
                    ValueKind::BlobIndex,
                );
                self.pointer.clear();
                p.encode_to(&mut self.pointer);
                self.referenced += p.len;
                self.refs.insert(p.file.0);
                Ok(Written::Separated)
            }
            ValueKind::BlobIndex => {
                // The entry `it` is at, or one a fold read (and `it` passed).
                let p = decode_pointer(value, || from.map_or_else(unknown_input_site, input_site))?;
                if !self.relocate.contains(&p.file.0) {
                    self.referenced += p.len;
                    self.refs.insert(p.file.0);
                    return Ok(Written::AsRead);
                }
                let value = self.db.blobs.read(parsed.user_key, &p)?;
                let w = self.db.blob_writer(&mut self.blob, reserved)?;
                let moved = w.add(parsed.user_key, &value)?;
                self.out.relocated_bytes += moved.len;
                self.add_garbage(p.file.0, p.len);
                self.pointer.clear();
                moved.encode_to(&mut self.pointer);
                self.referenced += moved.len;
                self.refs.insert(moved.file.0);
                Ok(Written::Relocated)
            }
            _ => Ok(Written::AsRead),
        }
    }

    /// Opens the next output table, numbered in `reserved`.
    fn open_table(&self, reserved: &mut ReservedOutputs<'_>) -> Result<(FileNum, sst::Builder)> {
        let number = reserved.reserve();
        let path = layout::path(&self.slow_dir, &layout::table_name(number));
        let file = self.db.create_output(&path)?;
        let mut b = sst::Builder::new(file, path, &self.db.opts.table)?
            .with_codecs(self.keyspaces.block_codecs());
        if self.job.extras.record_keys {
            b = b.recording_keys();
        }
        Ok((number, b))
    }

    /// Counts one record of `len` bytes in blob file `file` as garbage.
    fn add_garbage(&mut self, file: u64, len: u64) {
        let g = self.garbage.entry(file).or_default();
        g.0 += 1;
        g.1 += len;
    }

    /// The run's output, its garbage counted, once its files are synced into the directory.
    fn finish(self) -> Result<MergeOutput> {
        let mut out = self.out;
        out.garbage = self
            .garbage
            .into_iter()
            .map(|(n, (records, bytes))| BlobGarbage {
                number: FileNum(n),
                records,
                bytes,
            })
            .collect();
        if !out.tables.is_empty() || !out.blobs.is_empty() {
            self.db.tiers.slow_fs.sync_dir(&self.slow_dir)?;
        }
        Counters::add(&self.db.counters.blob_bytes_written, out.blob_bytes());
        Counters::add(&self.db.counters.blob_relocated_bytes, out.relocated_bytes);
        Ok(out)
    }
}
