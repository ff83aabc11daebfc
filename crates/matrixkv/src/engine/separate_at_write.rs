//! Key-value separation at write time (`Options::separate_at_write`, decision 0028): the
//! commit leader appends each large value (at least `min_blob_bytes` and
//! `separate_at_write_min_bytes`) of a non-sync group to the active memtable's blob
//! file on the slow tier and hands it to the kernel before the group's WAL record is
//! written; the WAL record and the memtable hold blob pointers (kind `BlobIndex`). Each such
//! value is then written once in all, instead of once to the WAL and again to a blob file by
//! the flush.
//!
//! The life of a memtable's blob file ("value file"):
//!
//! 1. The writer creates it (a pending output, `write_buffer_bytes` and a little more reserved
//!    at once so a full slow tier shows before any record, written through a mapping:
//!    `FileSystem::create_mapped`) with the memtable's first separated value and appends to
//!    it; readers find its records through [`BlobFiles`]'s growing files, bounded
//!    by the bytes handed to the kernel. The memtable switches when the file reaches
//!    `write_buffer_bytes`.
//! 2. At the switch it is sealed under the memtable's WAL number.
//! 3. The memtable's flush finishes it (footer, fdatasync) and installs it in the same edit as
//!    the row, with the records of the versions the flush dropped counted as garbage; or, when
//!    at least `blob_gc_ratio` of its records are such garbage, copies the live values out in
//!    key order into blob files of its own and drops the file unfinished once it installs.
//!
//! Durability. A process crash loses nothing: a record is in the kernel before the pointer is
//! logged. A power loss may lose the unsynced tail of a value file; WAL replay then stops at
//! the first record whose value is missing and drops everything logged after it, in this
//! segment and in newer ones (contract C3: a prefix, never a hole). A sync group therefore
//! syncs every unfinished value file before its WAL record is persisted (contract C2), and
//! keeps its own values in the WAL; `Db::close` syncs them too. Both then log a
//! values-durable marker (docs/format/wal.md): a value missing before a marker was durable, so
//! recovery reports it as corruption instead of ending the history there.
//!
//! Recovery replays a pointer as the value it leads to (read and checked against its key), so
//! replayed memtables hold their values as if written without this option, and the flush
//! separates them again. The value files stay (pending outputs) until the flush of the
//! segment that names them installs; then obsolete-file deletion removes them.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::lock_order::{Mutex, Rank};

use super::{DbInner, WriterCtx};
use crate::batch::WriteBatch;
use crate::blob::BlobPointer;
use crate::blob::reader::BlobFiles;
use crate::blob::writer::{BlobSummary, BlobWriter};
use crate::error::{Error, Result};
use crate::key::ValueKind;
use crate::layout::{self, FileNum};
use crate::memtable::MemEntry;
use crate::version::edit::BlobGarbage;

/// Room reserved in a value file past `write_buffer_bytes` for the group that fills it and
/// the footer: a sixteenth of it, between 4 KiB and 1 MiB (what does not fit is written with
/// `write()`).
fn value_file_capacity(write_buffer_bytes: usize) -> u64 {
    let b = write_buffer_bytes as u64;
    b + (b / 16).clamp(4 << 10, 1 << 20)
}

/// Creates value file `number` in `dir` and writes its header (handed to the kernel, so
/// readers can open it). Its memtable switches when it reaches `write_buffer_bytes`: reserved
/// at once (with room for the group that passes it), so a full slow tier shows here, before
/// any value was appended. Appends are copies into a mapping (`create_mapped`).
fn make_value_file(
    fs: &dyn crate::tier::FileSystem,
    dir: &std::path::Path,
    number: FileNum,
    write_buffer_bytes: usize,
    bytes_per_sync: u64,
) -> Result<BlobWriter> {
    let path = layout::path(dir, &layout::blob_name(number));
    let capacity = value_file_capacity(write_buffer_bytes);
    fs.create_mapped(&path, capacity, bytes_per_sync)
        .and_then(|file| BlobWriter::new(number, file))
        .and_then(|mut w| w.flush().map(|()| w))
}

/// The active memtable's value file.
pub(crate) struct ValueFile {
    writer: BlobWriter,
    /// Bytes handed to the kernel: what readers may read.
    visible: Arc<AtomicU64>,
    /// An append failed for lack of space: part of a record may follow the last whole one,
    /// so nothing more is appended and the flush copies its values instead of installing it.
    broken: bool,
}

/// A sealed value file (its memtable is immutable), as its flush finds it.
enum Sealed {
    Open(BlobWriter),
    /// Broken by a full slow tier (see [`ValueFile::broken`]).
    Broken(BlobWriter),
    /// Its footer could not be written for lack of space: its records are whole, and the
    /// flush copies its values out as for a broken file.
    Abandoned(FileNum),
    /// Finished by a flush that has not installed yet (a retried flush reuses it).
    Finished(BlobSummary),
    /// Finishing failed: whether its records are durable is unknown.
    Failed,
    /// At least `blob_gc_ratio` of its record bytes were garbage when its flush came (values
    /// overwritten within the memtable): the flush copies the live values out, in key order,
    /// instead of installing a file that blob GC would have to relocate, and the file is
    /// dropped unfinished once the flush installs. It stays open until then, so a sync write
    /// can still make the records its segment points to durable.
    Relocated(BlobWriter),
}

impl Sealed {
    /// The value file's number (none once finishing it failed).
    fn number(&self) -> Option<FileNum> {
        match self {
            Sealed::Open(w) | Sealed::Broken(w) | Sealed::Relocated(w) => Some(w.number()),
            Sealed::Abandoned(n) => Some(*n),
            Sealed::Finished(s) => Some(s.number),
            Sealed::Failed => None,
        }
    }
}

/// The next memtable's value file, made ready off the commit path (see
/// [`DbInner::prepare_spare_value_file`]).
#[derive(Default)]
struct SpareSlot {
    /// The file, or why it could not be made, with its number (a pending output).
    ready: Option<(FileNum, Result<BlobWriter>)>,
    /// The thread making it.
    making: Option<std::thread::JoinHandle<()>>,
}

/// The value files of the immutable memtables and those named by replayed WAL segments.
pub(crate) struct ValueFiles {
    /// The next memtable's value file.
    spare: Arc<Mutex<SpareSlot>>,
    /// By the WAL number of their memtable.
    sealed: Mutex<HashMap<u64, Arc<Mutex<Sealed>>>>,
    /// Value files that WAL segments replayed at open point into, by segment number: kept
    /// until the segment's flush installs.
    replayed: Mutex<HashMap<u64, Vec<u64>>>,
    /// A value file was created since the slow tier's directory was last synced by a sync
    /// write (set and cleared by the commit leader only).
    dir_unsynced: std::sync::atomic::AtomicBool,
    /// Each value file with the memtable whose pointers lead into it (a leaf lock). The file
    /// stays until no one holds the memtable: a read view, an iterator or a flush may still
    /// follow its pointers after the flush installed and the file left `pending_outputs`
    /// (dropped as copied out, or installed and later emptied by compaction or blob GC).
    memtable_pins: Mutex<Vec<(std::sync::Weak<crate::memtable::MemTable>, u64)>>,
}

impl Default for ValueFiles {
    fn default() -> ValueFiles {
        ValueFiles {
            spare: Arc::new(Mutex::new(Rank::SpareValueFile, SpareSlot::default())),
            sealed: Mutex::new(Rank::ValueFileMap, HashMap::new()),
            replayed: Mutex::new(Rank::LeafReplayedValueFiles, HashMap::new()),
            dir_unsynced: std::sync::atomic::AtomicBool::new(false),
            memtable_pins: Mutex::new(Rank::LeafMemtablePins, Vec::new()),
        }
    }
}

impl ValueFiles {
    /// Keeps value file `file` until `mem`, whose pointers lead into it, is dropped.
    fn pin_to_memtable(&self, mem: &Arc<crate::memtable::MemTable>, file: u64) {
        self.memtable_pins.lock().push((Arc::downgrade(mem), file));
    }

    /// The value files a memtable still held somewhere points into (obsolete-file deletion
    /// keeps them); forgets those whose memtable is gone.
    pub(crate) fn pinned_by_memtables(&self) -> Vec<u64> {
        let mut pins = self.memtable_pins.lock();
        pins.retain(|(mem, _)| mem.strong_count() > 0);
        pins.iter().map(|&(_, file)| file).collect()
    }

    /// Keeps `files` (pending outputs) until the flush of replayed segment `wal` installs.
    pub(crate) fn pin_replayed(&self, wal: FileNum, files: Vec<u64>) {
        if !files.is_empty() {
            self.replayed.lock().insert(wal.0, files);
        }
    }
}

/// The stored user key of `op` (with its keyspace prefix when keys are prefixed), as the
/// memtable and the blob record hold it.
fn stored_key(prefixed: bool, keyspace: u32, key: &[u8], out: &mut Vec<u8>) {
    out.clear();
    if prefixed {
        crate::keyspace::encoding::encode_id(keyspace, out);
    }
    out.extend_from_slice(key);
}

impl DbInner {
    /// The group `batch` with each value of at least its keyspace's `min_blob_bytes` (and
    /// `separate_at_write_min_bytes`) appended to the active memtable's value file (handed to
    /// the kernel) and replaced by a pointer, and the bytes of the keys and values the user
    /// wrote; `None` when it has no such value.
    pub(crate) fn separate_values(
        &self,
        ctx: &mut WriterCtx,
        batch: &WriteBatch,
    ) -> Result<Option<(WriteBatch, u64)>> {
        let reg = self.keyspaces();
        let least = reg
            .smallest_min_blob_bytes(self.opts.min_blob_bytes)
            .map(|m| self.at_write_threshold(m));
        if least.is_none_or(|m| batch.max_value_len() < m)
            || ctx.value_file.as_ref().is_some_and(|f| f.broken)
        {
            return Ok(None);
        }
        match self.append_values(ctx, batch, &reg) {
            Err(e) if e.is_no_space() => {
                // The slow tier is full: this group's values stay in the WAL, and so do the
                // rest of this memtable's (the file may end in part of a record).
                log::warn!(
                    "matrixkv: values stay in the WAL until the next memtable, the slow tier \
                     is full: {e}"
                );
                if let Some(f) = ctx.value_file.as_mut() {
                    f.broken = true;
                }
                Ok(None)
            }
            other => other,
        }
    }

    /// The least value size separated at write for a keyspace whose `min_blob_bytes` is
    /// `min`: `Options::separate_at_write_min_bytes` raises it (smaller values take the WAL
    /// and are separated by the flush).
    fn at_write_threshold(&self, min: usize) -> usize {
        self.opts
            .separate_at_write_min_bytes
            .map_or(min, |t| t.max(min))
    }

    /// [`DbInner::separate_values`]'s appends.
    fn append_values(
        &self,
        ctx: &mut WriterCtx,
        batch: &WriteBatch,
        reg: &crate::keyspace::registry::Registry,
    ) -> Result<Option<(WriteBatch, u64)>> {
        let mut out = WriteBatch::with_capacity(batch.size_bytes().min(4096));
        let mut pointer = Vec::with_capacity(24);
        let mut stored = Vec::with_capacity(64);
        let mut separated = false;
        let mut user_bytes = 0u64;
        for op in batch.ops() {
            user_bytes += (op.key.len() + op.value.len()) as u64;
            let min = reg
                .any(op.keyspace)
                .and_then(|ks| ks.min_blob_bytes)
                .or(self.opts.min_blob_bytes)
                .map(|m| self.at_write_threshold(m));
            if op.kind != ValueKind::Value || min.is_none_or(|m| op.value.len() < m) {
                out.push_op(&op, op.value);
                continue;
            }
            let file = match ctx.value_file.as_mut() {
                Some(f) => f,
                None => {
                    let f = self.create_value_file()?;
                    self.value_files
                        .pin_to_memtable(&ctx.mem, f.writer.number().0);
                    ctx.value_file.insert(f)
                }
            };
            stored_key(self.keyspaces_prefixed, op.keyspace, op.key, &mut stored);
            let p = file.writer.add(&stored, op.value)?;
            pointer.clear();
            p.encode_to(&mut pointer);
            out.put_blob_index_in(op.keyspace, op.key, &pointer);
            separated = true;
        }
        if !separated {
            return Ok(None);
        }
        if let Some(f) = ctx.value_file.as_mut() {
            f.writer.flush()?;
            // Release: a reader that sees the length sees the bytes.
            let before = f.visible.swap(f.writer.len(), Ordering::Release);
            crate::stats::Counters::add(
                &self.counters.blob_bytes_at_write,
                f.writer.len().saturating_sub(before),
            );
        }
        out.set_sequence(batch.sequence());
        Ok(Some((out, user_bytes)))
    }

    /// A new value file for the active memtable: a pending output, written through the page
    /// cache (a direct write could not hand a partial block to the kernel), its header handed
    /// over at once so readers can open it. The spare made while the previous memtable
    /// filled if there is one, and the next spare is started.
    fn create_value_file(&self) -> Result<ValueFile> {
        let spare = self.take_spare_value_file();
        let writer = match spare {
            Some(w) => w,
            None => {
                let number = self.new_output_number();
                match make_value_file(
                    self.tiers.slow_fs.as_ref(),
                    &self.opts.slow_dir,
                    number,
                    self.opts.write_buffer_bytes,
                    self.opts.bytes_per_sync,
                ) {
                    Ok(w) => w,
                    Err(e) => {
                        self.forget_pending([number.0]);
                        return Err(e);
                    }
                }
            }
        };
        self.prepare_spare_value_file();
        let visible = Arc::new(AtomicU64::new(writer.len()));
        self.blobs
            .start_growing(writer.number(), Arc::clone(&visible));
        self.value_files.dir_unsynced.store(true, Ordering::Relaxed);
        Ok(ValueFile {
            writer,
            visible,
            broken: false,
        })
    }

    /// The spare value file, if one is ready. A spare that could not be made is forgotten
    /// (the caller makes a file itself, and meets the error itself).
    fn take_spare_value_file(&self) -> Option<BlobWriter> {
        let ready = self.value_files.spare.lock().ready.take();
        match ready? {
            (_, Ok(w)) => Some(w),
            (number, Err(e)) => {
                log::debug!("matrixkv: no spare value file: {e}");
                self.forget_pending([number.0]);
                None
            }
        }
    }

    /// Starts making the next memtable's value file on a thread of its own
    /// (`matrixkv:valuefile`), unless one is ready or being made: creating the file reserves
    /// its capacity (`fallocate`) and its helper faults its first 8 MiB in, both of which a
    /// memtable switch would otherwise pay for on the commit path (the writer's first stores
    /// into a fresh file fault in and zero a large folio of it; decision 0028, item 2, and
    /// its evidence). Costs one more reserved file on the slow tier; an unused spare is
    /// removed at close, or by the next open after a crash.
    fn prepare_spare_value_file(&self) {
        let mut slot = self.value_files.spare.lock();
        if slot.ready.is_some() || slot.making.as_ref().is_some_and(|t| !t.is_finished()) {
            return;
        }
        if let Some(t) = slot.making.take()
            && t.join().is_err()
        {
            log::warn!("matrixkv: the thread making a spare value file panicked");
        }
        let number = self.new_output_number();
        let fs = Arc::clone(&self.tiers.slow_fs);
        let dir = self.opts.slow_dir.clone();
        let (write_buffer_bytes, bytes_per_sync) =
            (self.opts.write_buffer_bytes, self.opts.bytes_per_sync);
        let cell = Arc::clone(&self.value_files.spare);
        let started = std::thread::Builder::new()
            .name("matrixkv:valuefile".into())
            .spawn(move || {
                let made = make_value_file(
                    fs.as_ref(),
                    &dir,
                    number,
                    write_buffer_bytes,
                    bytes_per_sync,
                );
                cell.lock().ready = Some((number, made));
            });
        match started {
            Ok(t) => slot.making = Some(t),
            Err(e) => {
                drop(slot);
                log::warn!("matrixkv: no thread to make a spare value file: {e}");
                self.forget_pending([number.0]);
            }
        }
    }

    /// Waits for the thread making a spare value file, if any (before the database's lock
    /// is released: it creates a file in the slow tier's directory).
    pub(crate) fn wait_for_spare_value_file(&self) {
        let making = self.value_files.spare.lock().making.take();
        if let Some(t) = making
            && t.join().is_err()
        {
            log::warn!("matrixkv: the thread making a spare value file panicked");
        }
    }

    /// Removes the spare value file (at close), once its maker is done.
    pub(crate) fn discard_spare_value_file(&self) {
        self.wait_for_spare_value_file();
        let Some((number, made)) = self.value_files.spare.lock().ready.take() else {
            return;
        };
        drop(made);
        let path = layout::path(&self.opts.slow_dir, &layout::blob_name(number));
        if let Err(e) = self.tiers.slow_fs.remove(&path) {
            // Made or not, a file left behind is an orphan the next open removes.
            log::debug!("matrixkv: could not remove the spare value file: {e}");
        }
        self.forget_pending([number.0]);
    }

    /// Makes every value written to a value file so far durable, before a sync group's WAL
    /// record is persisted: the active memtable's file and the sealed ones not yet finished
    /// (a flush finishing one meanwhile holds its lock until its footer is synced). True if
    /// there was any (the caller then logs [`WriteBatch::values_durable_marker`]).
    pub(crate) fn sync_value_files(&self, ctx: &mut WriterCtx) -> Result<bool> {
        let mut any = false;
        if let Some(f) = ctx.value_file.as_mut() {
            f.writer.sync()?;
            any = true;
        }
        let sealed: Vec<Arc<Mutex<Sealed>>> =
            self.value_files.sealed.lock().values().cloned().collect();
        for cell in sealed {
            match &mut *cell.lock() {
                Sealed::Open(w) | Sealed::Broken(w) | Sealed::Relocated(w) => {
                    w.sync()?;
                    any = true;
                }
                Sealed::Finished(_) => {}
                Sealed::Abandoned(n) => {
                    return Err(Error::io(
                        crate::error::IoOp::Sync,
                        layout::path(&self.opts.slow_dir, &layout::blob_name(*n)),
                        std::io::Error::from_raw_os_error(28),
                    ));
                }
                Sealed::Failed => {
                    return Err(Error::invalid(
                        "a blob file of values written before this sync write could not be \
                         finished; its values may not be durable",
                    ));
                }
            }
        }
        // A new file's name must survive a power loss too.
        if self.value_files.dir_unsynced.swap(false, Ordering::Relaxed)
            && let Err(e) = self.tiers.slow_fs.sync_dir(&self.opts.slow_dir)
        {
            self.value_files.dir_unsynced.store(true, Ordering::Relaxed);
            return Err(e);
        }
        Ok(any)
    }

    /// Logs [`WriteBatch::values_durable_marker`] after [`DbInner::sync_value_files`] made
    /// the values of every earlier record durable, so that recovery reports a value missing
    /// before it as corruption instead of ending the history there. Skipped where the
    /// segment has no room left for it (recovery then only tolerates more).
    pub(crate) fn log_values_durable(&self, ctx: &mut WriterCtx) -> Result<()> {
        let marker = WriteBatch::values_durable_marker();
        if ctx.wal.fits(marker.data().len()) {
            ctx.wal.add_record(marker.data())?;
        }
        Ok(())
    }

    /// Seals the active memtable's value file (if any) under `wal`, the number of the
    /// memtable becoming immutable.
    pub(crate) fn seal_value_file(&self, ctx: &mut WriterCtx, wal: FileNum) {
        if let Some(f) = ctx.value_file.take() {
            let sealed = if f.broken {
                Sealed::Broken(f.writer)
            } else {
                Sealed::Open(f.writer)
            };
            self.value_files
                .sealed
                .lock()
                .insert(wal.0, Arc::new(Mutex::new(Rank::ValueFile, sealed)));
        }
    }

    /// True when the active memtable's value file reached `write_buffer_bytes`.
    pub(crate) fn value_file_full(&self, ctx: &WriterCtx) -> bool {
        ctx.value_file
            .as_ref()
            .is_some_and(|f| !f.broken && f.writer.len() >= self.opts.write_buffer_bytes as u64)
    }

    /// Finishes the value file of the memtable of segment `wal` for its flush: its blob file
    /// and the garbage of the records `entries` (what the flush keeps) no longer point to.
    pub(crate) fn finish_value_file(
        &self,
        wal: FileNum,
        entries: &[MemEntry],
    ) -> Result<FlushedValueFile> {
        let Some(cell) = self.value_files.sealed.lock().get(&wal.0).cloned() else {
            return Ok(FlushedValueFile::None);
        };
        // What the flush keeps of the file, counted without holding its lock (a sync write
        // may be waiting for it); only this thread changes the cell, never its file number.
        let number = cell.lock().number();
        let (live_records, live_bytes) = match number {
            Some(n) => live_records(n, entries)?,
            None => (0, 0),
        };
        let summary = {
            let mut sealed = cell.lock();
            match std::mem::replace(&mut *sealed, Sealed::Failed) {
                Sealed::Broken(w) => {
                    let number = w.number();
                    *sealed = Sealed::Broken(w);
                    return Ok(FlushedValueFile::Inline(number));
                }
                Sealed::Relocated(w) => {
                    let relocated = FlushedValueFile::relocate(&w, live_bytes);
                    *sealed = Sealed::Relocated(w);
                    return Ok(relocated);
                }
                Sealed::Abandoned(number) => {
                    *sealed = Sealed::Abandoned(number);
                    return Ok(FlushedValueFile::Inline(number));
                }
                Sealed::Open(w) => {
                    let number = w.number();
                    let garbage = w.record_bytes().saturating_sub(live_bytes);
                    if w.record_bytes() > 0
                        && garbage as f64 >= self.opts.blob_gc_ratio * w.record_bytes() as f64
                    {
                        let relocated = FlushedValueFile::relocate(&w, live_bytes);
                        *sealed = Sealed::Relocated(w);
                        return Ok(relocated);
                    }
                    match w.finish() {
                        Ok(s) => {
                            // Read as a complete file from now on.
                            self.blobs.stop_growing(number);
                            *sealed = Sealed::Finished(s);
                            s
                        }
                        Err(e) if e.is_no_space() => {
                            // Still read as a growing file; the retried flush copies its
                            // values out.
                            *sealed = Sealed::Abandoned(number);
                            return Err(e);
                        }
                        Err(e) => return Err(e),
                    }
                }
                Sealed::Finished(s) => {
                    *sealed = Sealed::Finished(s);
                    s
                }
                Sealed::Failed => {
                    return Err(Error::invalid(
                        "the blob file of a memtable's values could not be finished earlier",
                    ));
                }
            }
        };
        // The manifest edit will name it: its directory entry must be durable first.
        self.tiers.slow_fs.sync_dir(&self.opts.slow_dir)?;
        let garbage = BlobGarbage {
            number: summary.number,
            records: summary.records.saturating_sub(live_records),
            bytes: summary.record_bytes.saturating_sub(live_bytes),
        };
        Ok(FlushedValueFile::Install(summary, garbage))
    }

    /// `entries` with the values that point into broken value file `file` read back in
    /// place of their pointers (the flush separates them again into its own blob files).
    pub(crate) fn inline_values(
        &self,
        entries: &[MemEntry],
        file: FileNum,
    ) -> Result<Vec<MemEntry>> {
        entries
            .iter()
            .map(|e| {
                let parsed = super::compact::parse_key(
                    e.key(),
                    crate::error::ArtifactKind::Wal,
                    "memtable being flushed",
                )?;
                match BlobPointer::decode(e.value()) {
                    Ok(p) if parsed.kind == ValueKind::BlobIndex && p.file == file => {
                        let v = self.blobs.read(parsed.user_key, &p)?;
                        Ok(MemEntry::new(
                            parsed.user_key,
                            parsed.seq,
                            ValueKind::Value,
                            &v,
                        ))
                    }
                    _ => Ok(MemEntry::new(
                        parsed.user_key,
                        parsed.seq,
                        parsed.kind,
                        e.value(),
                    )),
                }
            })
            .collect()
    }

    /// After the flush of segment `wal` installed: its value file and the value files its
    /// replay pointed into are no longer pending (installed, or obsolete).
    pub(crate) fn release_value_files(&self, wal: FileNum) {
        let mut numbers = Vec::new();
        if let Some(cell) = self.value_files.sealed.lock().remove(&wal.0) {
            match &*cell.lock() {
                Sealed::Finished(s) => numbers.push(s.number.0),
                // Its values were copied out: obsolete now. It has no footer, so it stays
                // read as a growing file (up to the bytes its writer handed over) until it is
                // deleted: a view older than the flush still holds its memtable, whose
                // pointers reach its last record.
                Sealed::Broken(w) | Sealed::Relocated(w) => numbers.push(w.number().0),
                Sealed::Abandoned(n) => numbers.push(n.0),
                Sealed::Open(_) | Sealed::Failed => {}
            }
        }
        if let Some(files) = self.value_files.replayed.lock().remove(&wal.0) {
            numbers.extend(files);
        }
        self.forget_pending(numbers);
    }
}

/// The records of value file `file` that `entries` (what a flush keeps) point to, and their
/// bytes. A key or blob pointer that does not decode is corruption: skipped, its record
/// would count as garbage of the file.
fn live_records(file: FileNum, entries: &[MemEntry]) -> Result<(u64, u64)> {
    const WHERE: &str = "memtable being flushed";
    let (mut records, mut bytes) = (0u64, 0u64);
    for e in entries {
        let parsed = super::compact::parse_key(e.key(), crate::error::ArtifactKind::Wal, WHERE)?;
        if parsed.kind != ValueKind::BlobIndex {
            continue;
        }
        let p = BlobPointer::decode(e.value()).map_err(|reason| {
            Error::corruption(
                crate::error::CorruptionSite::new(crate::error::ArtifactKind::Wal, WHERE, 0),
                reason,
            )
        })?;
        if p.file == file {
            records += 1;
            bytes += p.len;
        }
    }
    Ok((records, bytes))
}

/// What a memtable's flush does with its value file.
pub(crate) enum FlushedValueFile {
    /// The memtable has none.
    None,
    /// Installed with the row: the finished file and the garbage of the versions dropped.
    Install(BlobSummary, BlobGarbage),
    /// Broken: the values pointing into it are copied out (see [`DbInner::inline_values`]).
    Inline(FileNum),
    /// Mostly garbage ([`Sealed::Relocated`]): the values pointing into it are copied out as
    /// for a broken file. `file_bytes` were written to it (counted as written once the flush
    /// installs), `live_bytes` of them are copied out.
    Relocate {
        file: FileNum,
        file_bytes: u64,
        live_bytes: u64,
    },
}

impl FlushedValueFile {
    /// The flush of a [`Sealed::Relocated`] file `w`: copies out the `live_bytes` of it that
    /// the flush keeps.
    fn relocate(w: &BlobWriter, live_bytes: u64) -> FlushedValueFile {
        FlushedValueFile::Relocate {
            file: w.number(),
            file_bytes: w.len(),
            live_bytes,
        }
    }

    /// The file whose values the flush copies out, if any.
    pub(crate) fn inlined(&self) -> Option<FileNum> {
        match self {
            FlushedValueFile::Inline(file) | FlushedValueFile::Relocate { file, .. } => Some(*file),
            FlushedValueFile::None | FlushedValueFile::Install(..) => None,
        }
    }
}

/// What replaying a logged batch found of the values it points to.
pub(crate) enum LoggedValues {
    /// No pointer: the batch as it is.
    Inline,
    /// Every pointer led to its value: the batch with the values in place, and the value
    /// files read.
    Resolved(WriteBatch, Vec<u64>),
    /// A value is missing (its file is shorter, absent or damaged there: it was not synced
    /// before a power loss): the recoverable history ends before this batch.
    Missing(String),
}

/// The values of the pointers in `batch` (a WAL record's), read from the value files in
/// `blobs` (at open a [`BlobFiles::footerless`] one; the live database's knows which of its
/// files are still growing).
pub(crate) fn resolve_logged(
    blobs: &BlobFiles,
    batch: &WriteBatch,
    prefixed: bool,
) -> Result<LoggedValues> {
    if !batch.ops().any(|op| op.kind == ValueKind::BlobIndex) {
        return Ok(LoggedValues::Inline);
    }
    let mut out = WriteBatch::with_capacity(batch.size_bytes());
    let mut files = Vec::new();
    let mut stored = Vec::with_capacity(64);
    for op in batch.ops() {
        if op.kind != ValueKind::BlobIndex {
            out.push_op(&op, op.value);
            continue;
        }
        let p = match BlobPointer::decode(op.value) {
            Ok(p) => p,
            Err(reason) => {
                return Err(Error::corruption(
                    crate::error::CorruptionSite::new(
                        crate::error::ArtifactKind::Wal,
                        "blob pointer of a logged write",
                        0,
                    ),
                    reason,
                ));
            }
        };
        stored_key(prefixed, op.keyspace, op.key, &mut stored);
        match blobs.read(&stored, &p) {
            Ok(v) => {
                out.put_in(op.keyspace, op.key, &v);
                if !files.contains(&p.file.0) {
                    files.push(p.file.0);
                }
            }
            Err(e) if value_absent(&e) => {
                return Ok(LoggedValues::Missing(format!(
                    "the value of a logged write is missing from blob file {} at offset {}: {e}",
                    p.file.0, p.offset
                )));
            }
            Err(e) => return Err(e),
        }
    }
    out.set_sequence(batch.sequence());
    Ok(LoggedValues::Resolved(out, files))
}

/// True for the errors a value file shows where a power loss cut its unsynced tail: the file
/// is absent, shorter than the pointer, or holds other bytes there.
fn value_absent(e: &Error) -> bool {
    match e {
        Error::Corruption { .. } => true,
        Error::Io { source, .. } => matches!(
            source.kind(),
            std::io::ErrorKind::NotFound | std::io::ErrorKind::UnexpectedEof
        ),
        _ => false,
    }
}

#[cfg(test)]
mod tests;
