//! [`BlobFiles`]: reads separated values back, keeping blob files open.
//!
//! Called by point lookups, user iterators and compaction (relocation). Every read checks the
//! record's checksum and that the record belongs to the key whose pointer led to it, so a
//! misdirected or damaged pointer is reported as corruption of the blob file (with its offset)
//! and never returns another key's value.
//!
//! Thread safety: `Send + Sync`; the open-file and growing-file maps are behind locks never
//! held across reads or opens (an evicted file may be closed under the open-file map's).
//! A value file is read as growing (up to the bytes its writer handed over) from its creation
//! until it is finished with a footer, or, if its values were copied out instead, until it is
//! deleted ([`BlobFiles::evict`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{BlobPointer, FOOTER_LEN, HEADER_LEN, check_header, decode_footer, decode_record};
use crate::error::{ArtifactKind, CorruptionReason, CorruptionSite, Error, Result};
use crate::layout::{self, FileNum};
use crate::lock_order::{Rank, RwLock};
use crate::tier::{FileSystem, RandomAccessFile};

/// Open blob files of one database (slow tier).
#[derive(Debug)]
pub struct BlobFiles {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    open: RwLock<HashMap<u64, Arc<dyn RandomAccessFile>>>,
    /// Files still being written (`Options::separate_at_write`), with how many of their bytes
    /// the kernel holds: they have no footer yet, and reads stop at that length.
    growing: RwLock<HashMap<u64, Arc<AtomicU64>>>,
    /// Every file may lack its footer, and reads go as far as the file does (recovery's
    /// reads of the value files a WAL points into, see [`BlobFiles::footerless`]).
    footerless: bool,
    /// Files are opened with [`FileSystem::open_mapped`] (`Options::mmap_blob_reads`).
    mapped: bool,
    reads: AtomicU64,
}

fn corrupt(path: &Path, offset: u64, reason: CorruptionReason) -> Error {
    Error::corruption(
        CorruptionSite::new(ArtifactKind::Blob, path, offset),
        reason,
    )
}

impl BlobFiles {
    /// Blob files in `dir` on `fs`.
    pub fn new(fs: Arc<dyn FileSystem>, dir: PathBuf) -> BlobFiles {
        BlobFiles {
            fs,
            dir,
            open: RwLock::new(Rank::LeafBlobOpen, HashMap::new()),
            growing: RwLock::new(Rank::LeafBlobGrowing, HashMap::new()),
            footerless: false,
            mapped: false,
            reads: AtomicU64::new(0),
        }
    }

    /// As [`BlobFiles::new`], reading files (finished or still being written) through
    /// read-only mappings ([`FileSystem::open_mapped`], `Options::mmap_blob_reads`).
    pub fn mapped(fs: Arc<dyn FileSystem>, dir: PathBuf) -> BlobFiles {
        BlobFiles {
            mapped: true,
            ..BlobFiles::new(fs, dir)
        }
    }

    /// Blob files in `dir` read as files still being written, footer or not: what a WAL
    /// replay finds of the files its pointers lead to (`Options::separate_at_write`), read
    /// up to where each file ends.
    pub fn footerless(fs: Arc<dyn FileSystem>, dir: PathBuf) -> BlobFiles {
        BlobFiles {
            footerless: true,
            ..BlobFiles::new(fs, dir)
        }
    }

    /// The open file `number`, opening it (and checking its header) on first use.
    fn file(&self, number: FileNum) -> Result<Arc<dyn RandomAccessFile>> {
        if let Some(f) = self.open.read().get(&number.0) {
            return Ok(Arc::clone(f));
        }
        let path = layout::path(&self.dir, &layout::blob_name(number));
        let growing = self.footerless || self.growing.read().contains_key(&number.0);
        // Mapped, finished or still being written: reads stay below the bytes its writer
        // handed over, which the file holds whatever it does meanwhile (a mapped value file
        // is shortened to them when it leaves the mapping, never below). The value files WAL replay
        // reads may end anywhere (a crash): a `footerless` set is never `mapped`, and
        // `pread` reports a short read as an error.
        let f = if self.mapped {
            self.fs.open_mapped(&path)?
        } else {
            self.fs.open(&path)?
        };
        let mut header = [0u8; HEADER_LEN];
        let least = if growing {
            HEADER_LEN
        } else {
            HEADER_LEN + FOOTER_LEN
        };
        if f.len() < least as u64 {
            return Err(corrupt(&path, 0, CorruptionReason::Truncated));
        }
        f.read_exact_at(0, &mut header)?;
        check_header(&header, number).map_err(|r| corrupt(&path, 0, r))?;
        self.open.write().insert(number.0, Arc::clone(&f));
        Ok(f)
    }

    /// Values read so far.
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    /// The value an encoded pointer (the value of a `BlobIndex` entry of `user_key`) leads
    /// to. A malformed pointer is corruption of the table that held it.
    pub fn read_pointer(&self, user_key: &[u8], pointer: &[u8]) -> Result<Vec<u8>> {
        let p = BlobPointer::decode(pointer).map_err(|reason| {
            Error::corruption(
                CorruptionSite::new(ArtifactKind::Sst, "blob pointer of a table entry", 0),
                reason,
            )
        })?;
        self.read(user_key, &p)
    }

    /// The value `ptr` points to, which must belong to `user_key`.
    pub fn read(&self, user_key: &[u8], ptr: &BlobPointer) -> Result<Vec<u8>> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        let end = ptr.offset.saturating_add(ptr.len);
        // Acquire: pairs with the writer's Release store after it handed the bytes over. Read
        // before the file is looked up: a file that stops growing meanwhile keeps its bytes.
        let growing = if self.footerless {
            Some(u64::MAX)
        } else {
            self.growing
                .read()
                .get(&ptr.file.0)
                .map(|len| len.load(Ordering::Acquire))
        };
        let mut f = self.file(ptr.file)?;
        let finished = |f: &Arc<dyn RandomAccessFile>| f.len().saturating_sub(FOOTER_LEN as u64);
        if growing.is_none() && end > finished(&f) {
            // Perhaps opened while it was growing, at a shorter length: open it again.
            self.open.write().remove(&ptr.file.0);
            f = self.file(ptr.file)?;
        }
        if end > growing.unwrap_or_else(|| finished(&f)) {
            return Err(corrupt(
                f.path(),
                ptr.offset,
                CorruptionReason::Invalid("blob pointer beyond the end of the file"),
            ));
        }
        let len = usize::try_from(ptr.len)
            .map_err(|_| corrupt(f.path(), ptr.offset, CorruptionReason::BadLength))?;
        let mut rec = vec![0u8; len];
        f.read_exact_at(ptr.offset, &mut rec)?;
        let (key, value) = decode_record(&rec).map_err(|r| corrupt(f.path(), ptr.offset, r))?;
        if key != user_key {
            return Err(corrupt(
                f.path(),
                ptr.offset,
                CorruptionReason::Invalid("blob record belongs to another key"),
            ));
        }
        // The value ends the record: keep it in the same buffer instead of copying it out.
        let value_at = rec.len() - value.len();
        rec.drain(..value_at);
        Ok(rec)
    }

    /// Reads blob file `number` whole and checks its header, every record and the footer,
    /// and that it holds `records` records of `record_bytes` bytes (the manifest's figures).
    pub fn verify_file(&self, number: FileNum, records: u64, record_bytes: u64) -> Result<()> {
        let path = layout::path(&self.dir, &layout::blob_name(number));
        verify_blob_copy(self.fs.as_ref(), &path, number, records, record_bytes)
    }

    /// Registers file `number` as being written: reads stop at `len`, which its writer
    /// raises as it hands records to the kernel.
    pub fn start_growing(&self, number: FileNum, len: Arc<AtomicU64>) {
        self.growing.write().insert(number.0, len);
    }

    /// File `number` is finished (its footer written): it is reopened at its final length.
    pub fn stop_growing(&self, number: FileNum) {
        self.growing.write().remove(&number.0);
        // Opened while growing, its length may be stale (a mapped file is shortened when it
        // is finished): the next read opens it again.
        self.open.write().remove(&number.0);
    }

    /// Forgets file `number` (after it was deleted), growing or not.
    pub fn evict(&self, number: u64) {
        self.growing.write().remove(&number);
        self.open.write().remove(&number);
    }
}

/// Reads blob file `number` at `path` whole (a live file, or a checkpoint's or a backup's
/// copy of it) and checks its header, every record and the footer, and that it holds
/// `records` records of `record_bytes` bytes (the manifest's figures).
pub(crate) fn verify_blob_copy(
    fs: &dyn FileSystem,
    path: &Path,
    number: FileNum,
    records: u64,
    record_bytes: u64,
) -> Result<()> {
    let path = path.to_path_buf();
    let data = fs.read_all(&path)?;
    let header = data
        .get(..HEADER_LEN)
        .ok_or_else(|| corrupt(&path, 0, CorruptionReason::Truncated))?;
    check_header(header, number).map_err(|r| corrupt(&path, 0, r))?;
    let footer_at = data
        .len()
        .checked_sub(FOOTER_LEN)
        .filter(|&at| at >= HEADER_LEN)
        .ok_or_else(|| corrupt(&path, 0, CorruptionReason::Truncated))?;
    let footer = data.get(footer_at..).unwrap_or_default();
    let (n, bytes) = decode_footer(footer).map_err(|r| corrupt(&path, footer_at as u64, r))?;
    let mut at = HEADER_LEN;
    let mut seen = 0u64;
    while at < footer_at {
        let rest = data.get(at..footer_at).unwrap_or_default();
        let len = super::record_len_at(rest).map_err(|r| corrupt(&path, at as u64, r))?;
        let rec = rest
            .get(..len)
            .ok_or_else(|| corrupt(&path, at as u64, CorruptionReason::Truncated))?;
        decode_record(rec).map_err(|r| corrupt(&path, at as u64, r))?;
        at += len;
        seen += 1;
    }
    let total = (footer_at - HEADER_LEN) as u64;
    if seen != n || total != bytes || n != records || bytes != record_bytes {
        return Err(corrupt(
            &path,
            footer_at as u64,
            CorruptionReason::Invalid("record count or bytes differ from the manifest"),
        ));
    }
    Ok(())
}
