//! The manifest (the log of [`VersionEdit`]s, on the slow tier) and the CURRENT file that
//! names it. Format: docs/format/manifest.md.
//!
//! - [`ManifestWriter`] creates a manifest whose first record is a snapshot edit, then appends
//!   one record per edit, each synced before it returns;
//! - [`set_current`] atomically switches CURRENT to a manifest (temp file, sync, rename,
//!   directory sync);
//! - [`recover`] reads CURRENT and replays the manifest into a `VersionSet`.
//!
//! Called by the DB at open, at every install (outside the state mutex, under the DB's
//! manifest mutex) and when it starts a new manifest. A `ManifestWriter` is used by one
//! thread at a time; the free functions are stateless.
#![deny(clippy::indexing_slicing)]

use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::{ArtifactKind, CorruptionReason, CorruptionSite, Error, Result};
use crate::layout::{self, CURRENT, FileKind, FileNum, manifest_name};
use crate::record::{self, Decoded};
use crate::tier::{FileSystem, WritableFile};

use super::edit::VersionEdit;
use super::set::{Replay, VersionSet};

/// Largest CURRENT file accepted (a manifest name plus newline is 16 bytes or a few more).
// FORMAT: see docs/format/manifest.md
pub const MAX_CURRENT_BYTES: u64 = 64;

/// How many payload bytes recovery may checksum while deciding whether a bad record is the
/// torn tail; past this it reports corruption rather than guess.
const TAIL_SCAN_BUDGET_BYTES: usize = 16 << 20;

/// Appends edits to one manifest file.
pub struct ManifestWriter {
    file: Box<dyn WritableFile>,
    path: PathBuf,
    /// Set by the first failed write or sync: the file's tail is then unknown, so no further
    /// record may follow it.
    failed: Option<String>,
}

impl fmt::Debug for ManifestWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManifestWriter")
            .field("path", &self.path)
            .field("size_bytes", &self.file.len())
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

impl ManifestWriter {
    /// Creates manifest `number` in `dir` (truncating any file of that name) and writes and
    /// syncs `first`, which must be a snapshot edit (`VersionSet::snapshot_edit`).
    ///
    /// The new manifest is not used at open until [`set_current`] names it; that call also
    /// syncs the directory, which makes this file's directory entry durable.
    pub fn create(
        fs: &dyn FileSystem,
        dir: &Path,
        number: FileNum,
        first: &VersionEdit,
    ) -> Result<ManifestWriter> {
        let path = layout::path(dir, &manifest_name(number));
        let file = fs.create(&path)?;
        let mut w = ManifestWriter {
            file,
            path,
            failed: None,
        };
        w.append(first)?;
        Ok(w)
    }

    /// A writer for a database opened read-only: it has no file, and every append fails with
    /// [`Error::ReadOnly`] (the read-only open refuses the operations that append first).
    pub fn detached(dir: &Path) -> ManifestWriter {
        ManifestWriter {
            file: Box::new(RefusingFile),
            path: dir.to_owned(),
            failed: None,
        }
    }

    /// Appends `edit` as one record and syncs it. The edit is durable when this returns `Ok`.
    ///
    /// After any error the writer refuses further appends ([`Error::Poisoned`]): the DB must
    /// stop installing edits and start a new manifest at its next open.
    pub fn append(&mut self, edit: &VersionEdit) -> Result<()> {
        if let Some(cause) = &self.failed {
            return Err(Error::Poisoned {
                cause: cause.clone(),
            });
        }
        let payload = edit.encode();
        if u32::try_from(payload.len()).is_err() {
            return Err(Error::invalid(format!(
                "version edit of {} bytes does not fit in a manifest record",
                payload.len()
            )));
        }
        let mut rec = Vec::with_capacity(record::framed_len(payload.len()));
        record::encode(&mut rec, &payload);
        let res = self.file.append(&rec).and_then(|()| self.file.sync());
        if let Err(e) = &res {
            self.failed = Some(format!(
                "manifest write to {} failed: {e}",
                self.path.display()
            ));
        }
        res
    }

    /// Bytes written to the manifest so far (the DB starts a new one past a size limit).
    pub fn size_bytes(&self) -> u64 {
        self.file.len()
    }

    /// The manifest's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The file of a [`ManifestWriter::detached`] writer: refuses every byte.
struct RefusingFile;

impl WritableFile for RefusingFile {
    fn append(&mut self, _data: &[u8]) -> Result<()> {
        Err(Error::ReadOnly {
            op: "manifest write",
        })
    }

    fn sync(&mut self) -> Result<()> {
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        Ok(())
    }

    fn preallocate(&mut self, _bytes: u64) -> Result<()> {
        Ok(())
    }

    fn len(&self) -> u64 {
        0
    }
}

/// Points CURRENT at manifest `number`: writes `CURRENT.tmp` with `MANIFEST-NNNNNN\n`, syncs
/// it, renames it over `CURRENT` and syncs `dir`. After `Ok`, a reopen uses that manifest.
pub fn set_current(fs: &dyn FileSystem, dir: &Path, number: FileNum) -> Result<()> {
    let contents = format!("{}\n", manifest_name(number));
    // The temp name is the one `layout::parse` recognises as a temporary file.
    let tmp = layout::path(dir, &format!("{CURRENT}.tmp"));
    let mut f = fs.create(&tmp)?;
    f.append(contents.as_bytes())?;
    f.sync()?;
    drop(f);
    fs.rename(&tmp, &layout::path(dir, CURRENT))?;
    fs.sync_dir(dir)
}

/// Reads CURRENT in `dir` and returns the manifest number it names.
///
/// CURRENT must be at most [`MAX_CURRENT_BYTES`] and hold exactly a manifest name produced
/// by `layout::manifest_name` followed by a newline; anything else (a path such as `../x`,
/// another kind of file, a missing newline) is a corruption of the CURRENT file.
pub fn read_current(fs: &dyn FileSystem, dir: &Path) -> Result<FileNum> {
    let path = layout::path(dir, CURRENT);
    let bad =
        |reason| Error::corruption(CorruptionSite::new(ArtifactKind::Current, &path, 0), reason);
    let f = fs.open(&path)?;
    if f.len() > MAX_CURRENT_BYTES {
        return Err(bad(CorruptionReason::BadLength));
    }
    let bytes = fs.read_all(&path)?;
    let name = std::str::from_utf8(&bytes)
        .ok()
        .and_then(|s| s.strip_suffix('\n'))
        .ok_or_else(|| {
            bad(CorruptionReason::Invalid(
                "CURRENT is not a name and newline",
            ))
        })?;
    match layout::parse(name) {
        Some(FileKind::Manifest(n)) => Ok(n),
        _ => Err(bad(CorruptionReason::Invalid(
            "CURRENT does not name a manifest file",
        ))),
    }
}

fn corruption(path: &Path, offset: usize, reason: CorruptionReason) -> Error {
    Error::corruption(
        CorruptionSite::new(ArtifactKind::Manifest, path, offset as u64),
        reason,
    )
}

/// True if a record with a valid checksum starts anywhere after `off` (so the bad bytes at
/// `off` are not a torn tail), or if the scan budget ran out (so we cannot tell).
fn valid_record_after(buf: &[u8], off: usize) -> bool {
    let mut budget = TAIL_SCAN_BUDGET_BYTES;
    for p in off.saturating_add(1)..buf.len() {
        let Some(len_bytes) = buf.get(p + 4..p + record::HEADER_LEN) else {
            return false;
        };
        let mut len = [0u8; 4];
        len.copy_from_slice(len_bytes);
        let len = u32::from_le_bytes(len) as usize;
        if record::framed_len(len) > buf.len() - p {
            continue;
        }
        if len > budget {
            return true;
        }
        budget -= len;
        if matches!(record::decode(buf, p), Decoded::Record { .. }) {
            return true;
        }
    }
    false
}

/// Reads every edit of the manifest at `path`, with the offset of its record.
///
/// A bad last record (torn write: truncated, checksum mismatch, zero-filled tail) is dropped
/// with a warning: its append never returned, so the edit was not acknowledged. A bad record
/// followed by any valid record, or a valid record whose payload does not decode, is
/// [`Error::Corruption`] with the manifest's path and the record's offset.
#[cfg(any(test, feature = "fuzzing"))]
pub fn read_edits(fs: &dyn FileSystem, path: &Path) -> Result<Vec<(u64, VersionEdit)>> {
    read_manifest(fs, path).map(|(edits, _)| edits)
}

/// A last record that [`read_edits`] dropped as a torn write (bad bytes or a zero-filled tail
/// that no valid record follows). A crash during an append leaves one; so does media damage
/// to the last edit of a closed database, which the reader alone cannot tell apart. Recovery
/// tells them apart by the dropped edit's side effects (`engine::recovery`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DroppedRecord {
    /// The manifest file.
    pub path: PathBuf,
    /// Offset of the dropped record.
    pub offset: u64,
}

/// The edits of a manifest, each with the offset of its record.
pub(crate) type Edits = Vec<(u64, VersionEdit)>;

/// [`read_edits`], also saying whether a last record was dropped.
pub(crate) fn read_manifest(
    fs: &dyn FileSystem,
    path: &Path,
) -> Result<(Edits, Option<DroppedRecord>)> {
    let buf = fs.read_all(path)?;
    let mut out = Vec::new();
    let mut off = 0usize;
    let dropped = |off: usize| DroppedRecord {
        path: path.to_owned(),
        offset: off as u64,
    };
    loop {
        let reason = match record::decode(&buf, off) {
            Decoded::Record { payload, next } => {
                let edit = VersionEdit::decode(payload).map_err(|r| corruption(path, off, r))?;
                out.push((off as u64, edit));
                off = next;
                continue;
            }
            Decoded::End if off >= buf.len() => break,
            Decoded::End => {
                if buf.get(off..).unwrap_or(&[]).iter().all(|&b| b == 0) {
                    log::warn!(
                        "manifest {}: ignoring {} zero bytes at the tail (offset {off})",
                        path.display(),
                        buf.len() - off
                    );
                    return Ok((out, Some(dropped(off))));
                }
                CorruptionReason::Invalid("zero record header followed by data")
            }
            Decoded::Bad(reason) => reason,
        };
        if valid_record_after(&buf, off) {
            return Err(corruption(path, off, reason));
        }
        log::warn!(
            "manifest {}: ignoring a torn last record at offset {off} ({reason}); its edit was \
             never acknowledged",
            path.display()
        );
        return Ok((out, Some(dropped(off))));
    }
    Ok((out, None))
}

/// Opens the state recorded in `dir`: reads CURRENT, replays the manifest it names and
/// returns the `VersionSet` (its manifest number is that manifest's).
///
/// The manifest may end in a dropped torn record, so the DB must not append to it: it
/// starts a new manifest (new number, [`ManifestWriter::create`] with the snapshot edit,
/// [`set_current`]) before installing any edit.
///
/// Errors: I/O errors as they come; a bad CURRENT, or one naming a manifest that does not
/// exist, is a corruption of [`ArtifactKind::Current`];
/// a bad record before the last one, an edit that does not apply, or a required field that no
/// edit sets is a corruption of [`ArtifactKind::Manifest`] with the record's offset.
#[cfg(any(test, feature = "fuzzing"))]
pub fn recover(fs: &dyn FileSystem, dir: &Path) -> Result<VersionSet> {
    recover_with_tail(fs, dir).map(|(vs, _)| vs)
}

/// [`recover`], also returning the last record it dropped as a torn write, if any.
pub fn recover_with_tail(
    fs: &dyn FileSystem,
    dir: &Path,
) -> Result<(VersionSet, Option<DroppedRecord>)> {
    let number = read_current(fs, dir)?;
    let path = layout::path(dir, &manifest_name(number));
    if !fs.exists(&path)? {
        // A damaged CURRENT (a flipped digit) names another number: report CURRENT, not an
        // I/O error about a file that never existed.
        log::error!("CURRENT names {}, which does not exist", path.display());
        return Err(Error::corruption(
            CorruptionSite::new(ArtifactKind::Current, layout::path(dir, CURRENT), 0),
            CorruptionReason::Invalid("CURRENT names a manifest that does not exist"),
        ));
    }
    let (edits, dropped) = read_manifest(fs, &path)?;
    let mut replay = Replay::new();
    let mut end = 0u64;
    for (off, edit) in &edits {
        replay
            .apply(edit)
            .map_err(|r| corruption(&path, *off as usize, r))?;
        end = *off;
    }
    let vs = replay
        .finish(number)
        .map_err(|r| corruption(&path, end as usize, r))?;
    Ok((vs, dropped))
}

#[cfg(test)]
mod tests;
