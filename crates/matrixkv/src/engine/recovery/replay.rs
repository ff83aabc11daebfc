//! WAL replay at open: the segments the manifest does not cover become immutable memtables,
//! still backed by their segments, and the persistent memtables (NoveLSM) are reopened among
//! them in number order.

use std::collections::{BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::super::ImmMem;
use super::super::separate_at_write::LoggedValues;
use super::super::wal_recycle::SegmentRegion;
use crate::batch::WriteBatch;
use crate::blob::reader::BlobFiles;
use crate::error::{ArtifactKind, CorruptionSite, Error, Result};
use crate::key::SeqNo;
use crate::layout::{self, FileKind, FileNum};
use crate::memtable::MemTable;
use crate::memtable::design::MemtableDesign;
use crate::options::{Options, Tiers};
use crate::tier::Region;
use crate::wal;

/// A WAL segment to replay: its number, path and mapped region (a private copy for a
/// read-only open).
pub(super) struct Segment {
    num: FileNum,
    path: PathBuf,
    region: Arc<dyn Region>,
}

/// The memtables recovered at open, oldest first, and what replaying them found.
pub(super) struct Replayed {
    pub(super) imm: VecDeque<ImmMem>,
    /// The newest sequence number replayed (or the manifest's, when larger).
    pub(super) max_seq: SeqNo,
    /// The value files each replayed segment's pointers led to (`separate_at_write`).
    pub(super) values: Vec<(FileNum, Vec<u64>)>,
}

/// The WAL segments the manifest does not cover (at or above `log_number`), oldest first.
pub(super) fn segments_to_replay(regions: &[String], log_number: FileNum) -> Vec<FileNum> {
    let mut wals: Vec<FileNum> = regions
        .iter()
        .filter_map(|n| match layout::parse(n) {
            Some(FileKind::Wal(num)) if num >= log_number => Some(num),
            _ => None,
        })
        .collect();
    wals.sort();
    wals
}

/// Maps the segments `wals` (a read-only open reads private copies, kept in `copies`).
///
/// A segment created but never written (a crash right after the file was made) cannot hold
/// an acknowledged write, because the header is persisted before any record. It is skipped,
/// not removed: obsolete-file deletion removes it once the new manifest's log number passes
/// it, so a crash during this open still finds the segment its manifest names.
pub(super) fn open_segments(
    tiers: &Tiers,
    fast_dir: &Path,
    wals: Vec<FileNum>,
    mut copies: Option<&mut super::super::read_only::PrivateCopies>,
) -> Result<Vec<Segment>> {
    let mut segments = Vec::with_capacity(wals.len());
    let newest_wal = wals.last().copied();
    for num in wals {
        let name = layout::wal_name(num);
        let path = layout::path(fast_dir, &name);
        let mut region = tiers.fast.open_region(&name)?;
        if let Some(c) = copies.as_deref_mut() {
            // A private copy: a writer may recycle the segment once it is flushed.
            region = c
                .wal_segment(num, region.as_ref(), Some(num) != newest_wal)
                .map_err(|e| Error::io(crate::error::IoOp::Read, &path, e))?;
        }
        if region_is_blank(region.as_ref(), &path)? {
            log::warn!("matrixkv: skipping blank WAL segment {}", path.display());
            continue;
        }
        segments.push(Segment { num, path, region });
    }
    Ok(segments)
}

/// Replays each WAL segment into its own memtable. They become immutable memtables still
/// backed by their segments (the log number does not move), and the flush thread writes
/// them to L0 in the background, so open never has to make room in L0. A writable open
/// (`read_only` false) zeroes what is not replayed: torn tails and what follows a missing
/// value.
pub(super) fn replay_segments(
    opts: &Options,
    tiers: &Tiers,
    segments: &[Segment],
    design: &dyn MemtableDesign,
    prefixed: bool,
    last_sequence: SeqNo,
    read_only: bool,
) -> Result<Replayed> {
    // Values logged as blob pointers (`separate_at_write`) are read from their value files,
    // which may lack a footer; the first missing one ends the recoverable history.
    let value_files = BlobFiles::footerless(Arc::clone(&tiers.slow_fs), opts.slow_dir.clone());
    // The design decides where the replayed values live and how many threads rebuild the
    // memtables (`memtable::design`).
    let replay = WalReplay {
        opts,
        design,
        threads: design.recovery_threads(),
        prefixed,
        read_only,
        value_files,
    };
    let mut history = History {
        max_seq: last_sequence,
        values_end: None,
    };
    let mut imm = VecDeque::new();
    let mut values = Vec::new();
    for (i, seg) in segments.iter().enumerate() {
        if let Some(why) = &history.values_end {
            replay.skip(seg, why)?;
            continue;
        }
        let (mem, files_read) = replay.segment(segments, i, &mut history)?;
        values.push((seg.num, files_read));
        imm.push_back(mem);
    }
    Ok(Replayed {
        imm,
        max_seq: history.max_seq,
        values,
    })
}

/// What the replay of every segment shares.
struct WalReplay<'a> {
    opts: &'a Options,
    design: &'a dyn MemtableDesign,
    threads: usize,
    prefixed: bool,
    read_only: bool,
    value_files: BlobFiles,
}

/// What carries from one segment's replay to the next.
struct History {
    max_seq: SeqNo,
    /// Why the recoverable history ended (a missing value), once it did.
    values_end: Option<String>,
}

/// What reading one segment's records found.
struct SegmentRecords {
    mem: Arc<MemTable>,
    /// With several threads, the segment's records are read (and checked) in order first,
    /// noting where each payload lies, then decoded and inserted by all threads at once (the
    /// skiplist takes concurrent inserts, and each version's sequence number orders it,
    /// whatever the insertion order).
    pending: Vec<(usize, usize)>,
    /// Where the segment's sequence numbers start: its first record's, or (no record) right
    /// after everything older.
    first_seq: Option<SeqNo>,
    files_read: BTreeSet<u64>,
    /// Where this segment's history ends for lack of a value: the record's offset.
    cut: Option<usize>,
    /// A record after the cut says the values before it were durable.
    durable_after_cut: bool,
}

impl WalReplay<'_> {
    /// After a missing value: nothing of this segment is replayed, and a writer clears it so
    /// that it reads as blank from now on.
    fn skip(&self, seg: &Segment, why: &str) -> Result<()> {
        if !self.read_only {
            wal::zero_tail(
                seg.region.as_ref(),
                &seg.path,
                wal::format::HEADER_LEN as u64,
            )?;
        }
        log::warn!(
            "matrixkv: WAL {} not replayed: the history ended earlier ({why})",
            seg.path.display()
        );
        Ok(())
    }

    /// Replays `segments[i]` into a new memtable; returns it with the value files it read.
    fn segment(
        &self,
        segments: &[Segment],
        i: usize,
        history: &mut History,
    ) -> Result<(ImmMem, Vec<u64>)> {
        let seg = &segments[i];
        let is_last = i + 1 == segments.len();
        let after_older = history.max_seq.next();
        let mut found = SegmentRecords {
            mem: Arc::new(MemTable::with_filter(self.opts.memtable_filter_bytes())),
            pending: Vec::new(),
            first_seq: None,
            files_read: BTreeSet::new(),
            cut: None,
            durable_after_cut: false,
        };
        let end = wal::read_segment(
            seg.region.as_ref(),
            &seg.path,
            seg.num,
            self.opts.wal_recovery,
            is_last,
            |payload, at| self.record(seg, &mut found, history, payload, at),
        )?;
        let replay = Replay {
            mem: &found.mem,
            design: self.design,
            region: seg.region.as_ref(),
            path: &seg.path,
            prefixed: self.prefixed,
        };
        replay.in_parallel(&found.pending, self.threads)?;
        self.settle_cut(seg, &segments[i + 1..], &found, history)?;
        self.settle_torn_tail(seg, &end)?;
        let mem = ImmMem {
            mem: found.mem,
            wal: seg.num,
            first_seq: found.first_seq.unwrap_or(after_older),
            region: Some(SegmentRegion {
                used: seg.region.len(),
                region: Arc::clone(&seg.region),
            }),
        };
        Ok((mem, found.files_read.into_iter().collect()))
    }

    /// Applies the record `payload` at `at` of `seg` to the segment's memtable (or notes it
    /// for the parallel replay).
    fn record(
        &self,
        seg: &Segment,
        found: &mut SegmentRecords,
        history: &mut History,
        payload: &[u8],
        at: usize,
    ) -> Result<()> {
        let path = &seg.path;
        if found.cut.is_some() {
            found.durable_after_cut |= is_marker(payload);
            return Ok(());
        }
        let batch = decode_logged(payload, path, at)?;
        if batch.is_values_durable_marker() {
            return Ok(());
        }
        let resolved = match super::super::separate_at_write::resolve_logged(
            &self.value_files,
            &batch,
            self.prefixed,
        )? {
            LoggedValues::Inline => None,
            LoggedValues::Resolved(b, files) => {
                found.files_read.extend(files);
                Some(b)
            }
            LoggedValues::Missing(why) => {
                if self.opts.wal_recovery == wal::WalRecovery::Strict {
                    return Err(Error::corruption(
                        CorruptionSite::new(ArtifactKind::Wal, path, at as u64),
                        crate::error::CorruptionReason::Invalid(
                            "a logged write's value is missing from its blob file",
                        ),
                    ));
                }
                found.cut = Some(at);
                history.values_end = Some(why);
                return Ok(());
            }
        };
        found.first_seq.get_or_insert(batch.sequence());
        if !batch.is_empty() {
            let last = batch.sequence().0 + batch.len() as u64 - 1;
            history.max_seq = history.max_seq.max(SeqNo(last));
        }
        let mem = &found.mem;
        if let Some(b) = resolved {
            // Values read back, not slices of the record: applied here, in order.
            super::super::write::apply_batch(mem, &b, self.prefixed, None);
        } else if self.threads > 1 {
            found.pending.push((at, payload.len()));
        } else {
            let backing = self
                .design
                .record_backing(seg.region.as_ref(), at, payload.len())
                .map_err(|e| Error::io(crate::error::IoOp::Read, path, e))?;
            super::super::write::apply_batch(mem, &batch, self.prefixed, backing.as_ref());
        }
        Ok(())
    }

    /// Where `seg`'s history ended for lack of a value: refused when a later record (in `seg`
    /// or one of the `newer` segments) says the value was durable, else the rest is zeroed by
    /// a writer.
    fn settle_cut(
        &self,
        seg: &Segment,
        newer: &[Segment],
        found: &SegmentRecords,
        history: &History,
    ) -> Result<()> {
        let path = &seg.path;
        if let Some(at) = found.cut
            && (found.durable_after_cut
                || newer.iter().any(|s| {
                    holds_marker(s.region.as_ref(), &s.path, s.num, self.opts.wal_recovery)
                }))
        {
            // The value was made durable before a later record was logged: not a power
            // loss's torn tail, but a damaged blob file.
            return Err(Error::corruption(
                CorruptionSite::new(ArtifactKind::Wal, path, at as u64),
                crate::error::CorruptionReason::Invalid(
                    "a logged write's value is missing from its blob file, which a later \
                     record says was synced",
                ),
            ));
        }
        if let Some(at) = found.cut {
            let record = at.saturating_sub(crate::record::HEADER_LEN) as u64;
            if !self.read_only {
                wal::zero_tail(seg.region.as_ref(), path, record)?;
            }
            log::warn!(
                "matrixkv: WAL {} replayed up to offset {record}: {}",
                path.display(),
                history.values_end.as_deref().unwrap_or_default()
            );
        }
        Ok(())
    }

    /// Zeroes the torn bytes so this segment reads cleanly even once newer segments exist
    /// (only the last segment may end in a torn record). A read-only open leaves them: a
    /// writer may be appending there.
    fn settle_torn_tail(&self, seg: &Segment, end: &wal::SegmentEnd) -> Result<()> {
        if let Some((offset, reason)) = &end.torn_tail {
            if !self.read_only {
                wal::zero_tail(seg.region.as_ref(), &seg.path, end.end_offset)?;
            }
            log::warn!(
                "matrixkv: WAL {} ends with a torn record at offset {offset} ({reason}); \
                 recovered {} records before it",
                seg.path.display(),
                end.records
            );
        }
        Ok(())
    }
}

/// Reopens the persistent memtables (NoveLSM) the manifest does not cover where they are,
/// with no replay, and places them among the replayed segments in number order.
pub(super) fn reopen_persistent_memtables(
    tiers: &Tiers,
    fast_dir: &Path,
    regions: &[String],
    log_number: FileNum,
    design: &dyn MemtableDesign,
    replayed: &mut Replayed,
) -> Result<()> {
    let mut pmts: Vec<FileNum> = regions
        .iter()
        .filter_map(|n| match layout::parse(n) {
            Some(FileKind::PersistentMemtable(num)) if num >= log_number => Some(num),
            _ => None,
        })
        .collect();
    pmts.sort();
    for num in pmts {
        let name = layout::pmt_name(num);
        let path = layout::path(fast_dir, &name);
        let region = tiers.fast.open_region(&name)?;
        if region_is_blank(region.as_ref(), &path)? {
            // Created, and the process died before its header was written: it never held a
            // write (the switch to it had not returned), and it is obsolete like an empty one.
            log::warn!(
                "matrixkv: skipping persistent memtable {} that was never started",
                path.display()
            );
            continue;
        }
        let mem = design.open_persistent(region, &path)?;
        let (min_seq, committed) = mem.persistent_seqs().unwrap_or_default();
        let Some(first_seq) = min_seq else {
            // Nothing committed (created, or its first batch interrupted by a crash): obsolete
            // once the new log number passes it.
            log::info!(
                "matrixkv: skipping empty persistent memtable {}",
                path.display()
            );
            continue;
        };
        replayed.max_seq = replayed.max_seq.max(committed);
        let imm = &mut replayed.imm;
        let at = imm.partition_point(|m: &ImmMem| m.wal < num);
        imm.insert(
            at,
            ImmMem {
                mem: Arc::new(mem),
                wal: num,
                first_seq,
                region: None,
            },
        );
    }
    Ok(())
}

/// Makes the history replayed durable before anything newer is written or the new manifest
/// records its sequence numbers: the value files it read may hold bytes that only reached the
/// page cache (a process crash, or a clean close, before this open).
pub(super) fn sync_replayed_values(
    tiers: &Tiers,
    slow_dir: &Path,
    values: &[(FileNum, Vec<u64>)],
) -> Result<()> {
    let read: BTreeSet<u64> = values.iter().flat_map(|(_, f)| f.iter().copied()).collect();
    for n in &read {
        tiers
            .slow_fs
            .sync_file(&layout::path(slow_dir, &layout::blob_name(FileNum(*n))))?;
    }
    if !read.is_empty() {
        tiers.slow_fs.sync_dir(slow_dir)?;
    }
    Ok(())
}

/// Decodes the batch of a WAL record whose payload is at `at` in segment `path`: one that does
/// not decode is corruption of that record.
fn decode_logged(payload: &[u8], path: &Path, at: usize) -> Result<WriteBatch> {
    WriteBatch::decode(payload).map_err(|reason| {
        Error::corruption(
            CorruptionSite::new(ArtifactKind::Wal, path, at as u64),
            reason,
        )
    })
}

/// True if every byte of the region is zero.
fn region_is_blank(region: &dyn Region, path: &Path) -> Result<bool> {
    let mut buf = vec![0u8; 1 << 20];
    let mut off = 0;
    while off < region.len() {
        let n = buf.len().min(region.len() - off);
        let chunk = buf.get_mut(..n).unwrap_or_default();
        region
            .read(off, chunk)
            .map_err(|e| Error::io(crate::error::IoOp::Read, path, e))?;
        if chunk.iter().any(|&b| b != 0) {
            return Ok(false);
        }
        off += n;
    }
    Ok(true)
}

/// What the threads of a parallel WAL replay share.
struct Replay<'a> {
    mem: &'a MemTable,
    design: &'a dyn MemtableDesign,
    region: &'a dyn Region,
    path: &'a Path,
    prefixed: bool,
}

impl Replay<'_> {
    /// Decodes the records at `payloads` (offset and length of each, already checked by
    /// `read_segment`) and inserts them into the memtable with `threads` threads, each taking
    /// a contiguous share.
    fn in_parallel(&self, payloads: &[(usize, usize)], threads: usize) -> Result<()> {
        if payloads.is_empty() {
            return Ok(());
        }
        let share = payloads.len().div_ceil(threads.max(1));
        std::thread::scope(|s| {
            let workers: Vec<_> = payloads
                .chunks(share)
                .map(|part| s.spawn(move || self.insert_all(part)))
                .collect();
            workers.into_iter().try_for_each(|w| {
                w.join()
                    .map_err(|_| Error::invalid("a WAL replay thread panicked"))?
            })
        })
    }

    /// Decodes and inserts the records at `payloads`, one at a time.
    fn insert_all(&self, payloads: &[(usize, usize)]) -> Result<()> {
        let io = |e| Error::io(crate::error::IoOp::Read, self.path, e);
        let mut buf = Vec::new();
        for &(at, len) in payloads {
            let backing = self
                .design
                .record_backing(self.region, at, len)
                .map_err(io)?;
            let bytes: &[u8] = match &backing {
                Some(b) => b,
                None => {
                    buf.resize(len, 0);
                    self.region.read(at, &mut buf).map_err(io)?;
                    &buf
                }
            };
            let batch = decode_logged(bytes, self.path, at)?;
            super::super::write::apply_batch(self.mem, &batch, self.prefixed, backing.as_ref());
        }
        Ok(())
    }
}

/// True if the record `payload` is [`WriteBatch::values_durable_marker`].
fn is_marker(payload: &[u8]) -> bool {
    WriteBatch::decode(payload).is_ok_and(|b| b.is_values_durable_marker())
}

/// True if WAL segment `num` holds [`WriteBatch::values_durable_marker`]; a segment that
/// cannot be read to its end counts up to where it can.
fn holds_marker(region: &dyn Region, path: &Path, num: FileNum, mode: wal::WalRecovery) -> bool {
    let mut found = false;
    let _ = wal::read_segment(region, path, num, mode, true, |payload, _| {
        found |= is_marker(payload);
        Ok(())
    });
    found
}

#[cfg(test)]
mod tests;
