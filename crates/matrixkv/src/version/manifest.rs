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
mod tests {
    use super::*;
    use crate::key::{SeqNo, ValueKind, make_internal_key};
    use crate::matrix::meta::{PageList, RowMeta};
    use crate::tier::StdFs;
    use crate::version::testutil::file;
    use crate::version::version::test_row;

    /// A manifest with a snapshot and three edits; returns the directory, the offsets of the
    /// records and the expected describe() after each record.
    fn write_manifest(dir: &Path) -> (Vec<u64>, Vec<String>) {
        let mut vs = VersionSet::new(5, vec![("page_bytes".into(), "4096".into())]);
        let mnum = vs.new_file_number();
        let mut w = ManifestWriter::create(&StdFs, dir, mnum, &vs.snapshot_edit()).unwrap();
        set_current(&StdFs, dir, mnum).unwrap();
        vs.set_manifest_number(mnum);
        let mut offsets = vec![0];
        let mut states = vec![vs.current().describe()];
        for i in 0..3u64 {
            let n = vs.new_file_number();
            vs.set_last_sequence(SeqNo(10 * (i + 1)));
            let mut e = VersionEdit::default();
            e.add_file(1, file(&format!("{}:{}-{}", n.0, i * 2, i * 2 + 1)));
            let v = vs.prepare(&mut e).unwrap();
            offsets.push(w.size_bytes());
            w.append(&e).unwrap();
            vs.install(&e, v);
            states.push(vs.current().describe());
        }
        (offsets, states)
    }

    fn manifest_path(dir: &Path) -> PathBuf {
        dir.join(manifest_name(read_current(&StdFs, dir).unwrap()))
    }

    fn rewrite(path: &Path, f: impl FnOnce(&mut Vec<u8>)) {
        let mut b = std::fs::read(path).unwrap();
        f(&mut b);
        std::fs::write(path, b).unwrap();
    }

    #[test]
    fn written_manifest_recovers_the_same_state() {
        let d = tempfile::tempdir().unwrap();
        let (_, states) = write_manifest(d.path());
        let vs = recover(&StdFs, d.path()).unwrap();
        assert_eq!(&vs.current().describe(), states.last().unwrap());
        assert_eq!(vs.db_id(), 5);
        assert_eq!(vs.last_sequence(), SeqNo(30));
        assert_eq!(vs.next_file_number(), 5);
        assert_eq!(vs.manifest_number(), FileNum(1));
        assert_eq!(vs.fixed_options(), &[("page_bytes".into(), "4096".into())]);
        vs.current().check_invariants().unwrap();
    }

    #[test]
    fn torn_last_record_is_dropped() {
        let d = tempfile::tempdir().unwrap();
        let (offsets, states) = write_manifest(d.path());
        let last = *offsets.last().unwrap() as usize;
        let full_len = std::fs::metadata(manifest_path(d.path())).unwrap().len() as usize;
        // Every cut inside the last record recovers the state before it.
        for cut in last + 1..full_len {
            rewrite(&manifest_path(d.path()), |b| b.truncate(cut));
            let vs = recover(&StdFs, d.path()).unwrap();
            assert_eq!(vs.current().describe(), states[2], "cut at {cut}");
        }
    }

    #[test]
    fn garbled_or_zeroed_last_record_is_dropped() {
        let d = tempfile::tempdir().unwrap();
        let (offsets, states) = write_manifest(d.path());
        let last = *offsets.last().unwrap() as usize;
        let p = manifest_path(d.path());
        let orig = std::fs::read(&p).unwrap();
        rewrite(&p, |b| {
            let n = b.len();
            b[n - 2] ^= 0x10;
        });
        assert_eq!(
            recover(&StdFs, d.path()).unwrap().current().describe(),
            states[2]
        );
        std::fs::write(&p, &orig).unwrap();
        rewrite(&p, |b| b[last..].iter_mut().for_each(|x| *x = 0));
        assert_eq!(
            recover(&StdFs, d.path()).unwrap().current().describe(),
            states[2]
        );
    }

    #[test]
    fn corruption_before_the_last_record_reports_offset() {
        let d = tempfile::tempdir().unwrap();
        let (offsets, _) = write_manifest(d.path());
        let p = manifest_path(d.path());
        let orig = std::fs::read(&p).unwrap();
        // A flipped payload byte, a flipped length byte, and a zeroed header, in record 2.
        let at = offsets[2] as usize;
        for (what, pos, mask) in [
            ("payload", at + record::HEADER_LEN + 1, 0x01u8),
            ("length", at + 5, 0x40),
            ("checksum", at, 0xff),
        ] {
            std::fs::write(&p, &orig).unwrap();
            rewrite(&p, |b| b[pos] ^= mask);
            let err = recover(&StdFs, d.path()).unwrap_err();
            match &err {
                Error::Corruption { site, .. } => {
                    assert_eq!(site.kind, ArtifactKind::Manifest, "{what}");
                    assert_eq!(site.offset, at as u64, "{what}");
                    assert_eq!(site.path, p, "{what}");
                }
                other => panic!("{what}: expected corruption, got {other}"),
            }
            assert!(err.to_string().contains(&format!("offset {at}")), "{err}");
        }
        std::fs::write(&p, &orig).unwrap();
        rewrite(&p, |b| b[at..at + 8].iter_mut().for_each(|x| *x = 0));
        assert!(recover(&StdFs, d.path()).unwrap_err().is_corruption());
    }

    #[test]
    fn valid_record_with_undecodable_edit_is_corruption() {
        let d = tempfile::tempdir().unwrap();
        write_manifest(d.path());
        let p = manifest_path(d.path());
        let mut rec = Vec::new();
        record::encode(&mut rec, &[99, 1]);
        let start = std::fs::metadata(&p).unwrap().len();
        rewrite(&p, |b| b.extend_from_slice(&rec));
        match recover(&StdFs, d.path()).unwrap_err() {
            Error::Corruption { site, reason } => {
                assert_eq!(site.offset, start);
                assert_eq!(reason, CorruptionReason::UnknownType(99));
            }
            other => panic!("expected corruption, got {other}"),
        }
    }

    #[test]
    fn manifest_without_snapshot_fields_is_corruption() {
        let d = tempfile::tempdir().unwrap();
        let mut e = VersionEdit::default();
        e.add_file(1, file("3:a-b"));
        ManifestWriter::create(&StdFs, d.path(), FileNum(2), &e).unwrap();
        set_current(&StdFs, d.path(), FileNum(2)).unwrap();
        let err = recover(&StdFs, d.path()).unwrap_err();
        assert!(err.is_corruption(), "{err}");
        assert!(err.to_string().contains("never records"), "{err}");
    }

    #[test]
    fn edit_that_does_not_apply_is_corruption() {
        let d = tempfile::tempdir().unwrap();
        let vs = VersionSet::new(1, vec![]);
        let mut w =
            ManifestWriter::create(&StdFs, d.path(), FileNum(1), &vs.snapshot_edit()).unwrap();
        set_current(&StdFs, d.path(), FileNum(1)).unwrap();
        let at = w.size_bytes();
        let mut e = VersionEdit::default();
        e.delete_file(1, FileNum(77));
        w.append(&e).unwrap();
        match recover(&StdFs, d.path()).unwrap_err() {
            Error::Corruption { site, .. } => assert_eq!(site.offset, at),
            other => panic!("expected corruption, got {other}"),
        }
    }

    #[test]
    fn hostile_current_is_rejected() {
        let d = tempfile::tempdir().unwrap();
        write_manifest(d.path());
        let cur = d.path().join(CURRENT);
        for bad in [
            "../x\n",
            "MANIFEST-000001",
            "MANIFEST-000001\n\n",
            "/etc/passwd\n",
            "000001.sst\n",
            "MANIFEST-1\n",
            "",
        ] {
            std::fs::write(&cur, bad).unwrap();
            match recover(&StdFs, d.path()).unwrap_err() {
                Error::Corruption { site, .. } => {
                    assert_eq!(site.kind, ArtifactKind::Current, "{bad:?}");
                }
                other => panic!("{bad:?}: expected corruption, got {other}"),
            }
        }
        std::fs::write(&cur, vec![b'M'; 1 << 20]).unwrap();
        assert!(matches!(
            recover(&StdFs, d.path()),
            Err(Error::Corruption {
                reason: CorruptionReason::BadLength,
                ..
            })
        ));
        std::fs::write(&cur, [0xff, 0xfe, b'\n']).unwrap();
        assert!(recover(&StdFs, d.path()).unwrap_err().is_corruption());
    }

    /// Found by the corruption campaign (tests/corruption.rs): a flipped digit in CURRENT was
    /// reported as an I/O error on a manifest that never existed, naming no damaged file.
    #[test]
    fn current_naming_a_missing_manifest_is_corruption_of_current() {
        let d = tempfile::tempdir().unwrap();
        write_manifest(d.path());
        let cur = d.path().join(CURRENT);
        std::fs::write(&cur, "MANIFEST-000011\n").unwrap();
        match recover(&StdFs, d.path()).unwrap_err() {
            Error::Corruption { site, .. } => {
                assert_eq!(site.kind, ArtifactKind::Current);
                assert_eq!(site.path, cur);
                assert_eq!(site.offset, 0);
            }
            other => panic!("expected corruption of CURRENT, got {other}"),
        }
    }

    #[test]
    fn set_current_switches_manifests_atomically() {
        let d = tempfile::tempdir().unwrap();
        write_manifest(d.path());
        let mut vs = recover(&StdFs, d.path()).unwrap();
        let n = vs.new_file_number();
        let mut e = vs.snapshot_edit();
        e.last_sequence = Some(SeqNo(1234));
        ManifestWriter::create(&StdFs, d.path(), n, &e).unwrap();
        // Until CURRENT moves, the old manifest is the truth.
        assert_eq!(
            recover(&StdFs, d.path()).unwrap().last_sequence(),
            SeqNo(30)
        );
        set_current(&StdFs, d.path(), n).unwrap();
        let back = recover(&StdFs, d.path()).unwrap();
        assert_eq!(back.last_sequence(), SeqNo(1234));
        assert_eq!(back.manifest_number(), n);
        assert_eq!(back.current().describe(), vs.current().describe());
        assert!(!d.path().join("CURRENT.tmp").exists());
    }

    #[test]
    fn missing_current_is_an_io_error() {
        let d = tempfile::tempdir().unwrap();
        assert!(matches!(recover(&StdFs, d.path()), Err(Error::Io { .. })));
    }

    #[test]
    fn read_edits_lists_every_record_with_its_offset() {
        let d = tempfile::tempdir().unwrap();
        let (offsets, _) = write_manifest(d.path());
        let edits = read_edits(&StdFs, &manifest_path(d.path())).unwrap();
        let got: Vec<u64> = edits.iter().map(|(o, _)| *o).collect();
        assert_eq!(got, offsets);
        assert!(edits[0].1.db_id.is_some());
    }

    /// The ```hex blocks of docs/format/manifest.md, in order.
    fn doc_hex_blocks() -> Vec<Vec<u8>> {
        crate::golden::hex_blocks(include_str!("../../../../docs/format/manifest.md"))
    }

    #[test]
    fn docs_worked_example_matches_the_encoder() {
        use crate::version::FileMeta;
        let meta = FileMeta {
            number: FileNum(5),
            size: 300,
            smallest: make_internal_key(b"a", SeqNo(8), ValueKind::Value),
            largest: make_internal_key(b"c", SeqNo(9), ValueKind::Value),
            smallest_seq: SeqNo(8),
            largest_seq: SeqNo(9),
            entries: 2,
            blob_refs: None,
        };
        let mut vs = VersionSet::new(42, vec![("page_bytes".into(), "4096".into())]);
        for _ in 0..5 {
            vs.new_file_number();
        }
        vs.set_last_sequence(SeqNo(9));
        let mut first = VersionEdit {
            log_number: Some(FileNum(3)),
            ..VersionEdit::default()
        };
        first.add_file(1, meta.clone());
        let v = vs.prepare(&mut first).unwrap();
        vs.install(&first, v);
        let snapshot = vs.snapshot_edit();
        let mut mv = VersionEdit::default();
        mv.compact_pointers.push((1, meta.largest.clone()));
        mv.delete_file(1, FileNum(5));
        mv.add_file(2, meta.clone());

        let v = vs.prepare(&mut mv).unwrap();
        vs.install(&mv, v);

        // Record 2: a flush into the container that also switches roles; record 3: a column
        // up to "b" that frees the row's first page.
        let n = vs.new_row_number();
        vs.set_last_sequence(SeqNo(11));
        let mut flush = VersionEdit {
            switch_roles: true,
            ..VersionEdit::default()
        };
        flush.new_rows.push(RowMeta {
            row: n,
            prev_row: 0,
            pages: std::sync::Arc::new(PageList::new(vec![0, 1])),
            entries: 2,
            bytes: 5000,
            smallest: make_internal_key(b"a", SeqNo(10), ValueKind::Value),
            largest: make_internal_key(b"c", SeqNo(11), ValueKind::Deletion),
            smallest_seq: SeqNo(10),
            largest_seq: SeqNo(11),
        });
        let v = vs.prepare(&mut flush).unwrap();
        vs.install(&flush, v);
        let mut column = VersionEdit {
            column: Some(crate::version::ColumnDone {
                cursor: b"b".to_vec(),
                wrapped: false,
                freed: vec![(1, 0, 1)],
            }),
            ..VersionEdit::default()
        };
        let v = vs.prepare(&mut column).unwrap();
        vs.install(&column, v);
        // Record 4: file 5 rewritten as file 7 whose pointers reference the new blob file 6
        // (tag 19, as a blob GC job or any compaction now writes it).
        vs.new_file_number();
        vs.new_file_number();
        let mut gc = VersionEdit::default();
        gc.delete_file(2, FileNum(5));
        gc.add_file(
            2,
            FileMeta {
                number: FileNum(7),
                blob_refs: Some(vec![FileNum(6)]),
                ..meta.clone()
            },
        );
        gc.new_blobs.push(crate::version::edit::BlobFileMeta {
            number: FileNum(6),
            records: 2,
            record_bytes: 8240,
        });
        let v = vs.prepare(&mut gc).unwrap();
        vs.install(&gc, v);

        let d = tempfile::tempdir().unwrap();
        let mut w = ManifestWriter::create(&StdFs, d.path(), FileNum(1), &snapshot).unwrap();
        for e in [&mv, &flush, &column, &gc] {
            w.append(e).unwrap();
        }
        set_current(&StdFs, d.path(), FileNum(1)).unwrap();

        let blocks = doc_hex_blocks();
        if std::env::var_os("MATRIXKV_PRINT_GOLDEN").is_some() {
            let bytes = std::fs::read(w.path()).unwrap();
            let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
            println!("{}", hex.join(" "));
        }
        assert_eq!(blocks.len(), 6);
        assert_eq!(std::fs::read(w.path()).unwrap(), blocks[0]);
        assert_eq!(std::fs::read(d.path().join(CURRENT)).unwrap(), blocks[1]);
        let back = recover(&StdFs, d.path()).unwrap();
        assert_eq!(
            back.current().describe().lines().nth(2).unwrap(),
            "L2: 7:a-c"
        );
        let v = back.current();
        assert_eq!(v.files(2)[0].blob_refs, Some(vec![FileNum(6)]));
        assert_eq!(v.blob_files().keys().copied().collect::<Vec<_>>(), vec![6]);
        assert_eq!(back.current().container(), vs.current().container());
        assert!(back.current().consumed(b"a") && !back.current().consumed(b"b"));
        assert_eq!(back.current().all_row_pages(), vec![1]);
    }

    #[test]
    fn range_tombstone_tags_match_the_format_doc() {
        use crate::range_del::RangeTombstone;
        let edit = VersionEdit {
            deleted_range_dels: vec![SeqNo(7)],
            new_range_dels: vec![RangeTombstone {
                start: b"b".to_vec(),
                end: b"d".to_vec(),
                seq: SeqNo(12),
            }],
            ..VersionEdit::default()
        };
        let blocks = doc_hex_blocks();
        assert_eq!(
            edit.encode(),
            blocks[2],
            "docs/format/manifest.md is out of date"
        );
        assert_eq!(VersionEdit::decode(&blocks[2]).unwrap(), edit);
        // An empty range is corruption.
        assert!(VersionEdit::decode(&[0x14, 1, b'd', 1, b'b', 12]).is_err());
        assert!(VersionEdit::decode(&[0x14, 1, b'b', 1, b'b', 12]).is_err());
        // Replayed: the tombstone joins, a snapshot edit carries it, removing it works and
        // removing an absent one is corruption.
        let mut vs = VersionSet::new(1, vec![]);
        let mut add = VersionEdit {
            new_range_dels: edit.new_range_dels.clone(),
            ..VersionEdit::default()
        };
        let v = vs.prepare(&mut add).unwrap();
        vs.install(&add, v);
        assert_eq!(vs.current().range_dels().len(), 1);
        let snap = vs.snapshot_edit();
        assert_eq!(snap.new_range_dels, edit.new_range_dels);
        let mut twice = add.clone();
        assert!(
            vs.prepare(&mut twice).is_err(),
            "a live sequence number added again"
        );
        let mut gone = VersionEdit {
            deleted_range_dels: vec![SeqNo(12)],
            ..VersionEdit::default()
        };
        let v = vs.prepare(&mut gone).unwrap();
        vs.install(&gone, v);
        assert!(vs.current().range_dels().is_empty());
        let mut absent = gone.clone();
        assert!(
            vs.prepare(&mut absent).is_err(),
            "an absent tombstone removed"
        );
    }

    #[test]
    fn index_generation_tag_matches_the_format_doc() {
        let edit = VersionEdit {
            index_generation: Some(5),
            ..VersionEdit::default()
        };
        let blocks = doc_hex_blocks();
        assert_eq!(
            edit.encode(),
            blocks[4],
            "docs/format/manifest.md is out of date"
        );
        assert_eq!(VersionEdit::decode(&blocks[4]).unwrap(), edit);
        // Given twice in one edit: corruption.
        assert!(VersionEdit::decode(&[0x17, 5, 0x17, 6]).is_err());
        // Installed, replayed, and restated by a snapshot edit.
        let mut vs = VersionSet::new(1, vec![]);
        assert_eq!(vs.index_generation(), 0);
        let mut e = edit.clone();
        let v = vs.prepare(&mut e).unwrap();
        vs.install(&e, v);
        assert_eq!(vs.index_generation(), 5);
        let snapshot = vs.snapshot_edit();
        assert_eq!(snapshot.index_generation, Some(5));
        let mut r = crate::version::set::Replay::new();
        r.apply(&VersionEdit::decode(&snapshot.encode()).unwrap())
            .unwrap();
        r.apply(&VersionEdit::default()).unwrap();
        assert_eq!(r.finish(FileNum(9)).unwrap().index_generation(), 5);
    }

    #[test]
    fn partition_tags_match_the_format_doc() {
        let edit = VersionEdit {
            partition_bounds: Some(vec![b"m".to_vec()]),
            table_runs: vec![(FileNum(9), 2)],
            ..VersionEdit::default()
        };
        let blocks = doc_hex_blocks();
        let doc = blocks
            .iter()
            .find(|b| b.first() == Some(&0x18))
            .expect("the partition example");
        assert_eq!(
            &edit.encode(),
            doc,
            "docs/format/manifest.md is out of date"
        );
        assert_eq!(VersionEdit::decode(doc).unwrap(), edit);
        // Bounds out of order, empty, or given twice: corruption.
        assert!(VersionEdit::decode(&[0x18, 2, 1, b'm', 1, b'a']).is_err());
        assert!(VersionEdit::decode(&[0x18, 1, 0]).is_err());
        assert!(VersionEdit::decode(&[0x18, 0, 0x18, 0]).is_err());
        // Installed and restated by a snapshot edit.
        let mut vs = VersionSet::new(1, vec![]);
        let mut e = edit.clone();
        let v = vs.prepare(&mut e).unwrap();
        vs.install(&e, v);
        assert_eq!(vs.partitions().bounds, vec![b"m".to_vec()]);
        assert_eq!(vs.partitions().run(FileNum(9)), 2);
        let snapshot = vs.snapshot_edit();
        let mut r = crate::version::set::Replay::new();
        r.apply(&VersionEdit::decode(&snapshot.encode()).unwrap())
            .unwrap();
        let replayed = r.finish(FileNum(20)).unwrap();
        assert_eq!(replayed.partitions(), vs.partitions());
    }

    #[test]
    fn keyspace_tag_matches_the_format_doc() {
        use crate::keyspace::registry::KeyspaceRecord;
        let record = KeyspaceRecord {
            id: 3,
            name: "users".into(),
            ttl: true,
            dropped: false,
        };
        let edit = VersionEdit {
            keyspaces: vec![record.clone()],
            ..VersionEdit::default()
        };
        let blocks = doc_hex_blocks();
        assert_eq!(
            edit.encode(),
            blocks[3],
            "docs/format/manifest.md is out of date"
        );
        assert_eq!(VersionEdit::decode(&blocks[3]).unwrap(), edit);
        // Id 0, an empty name and unknown flags are corruption.
        assert!(VersionEdit::decode(&[0x16, 0, 1, b'a', 0]).is_err());
        assert!(VersionEdit::decode(&[0x16, 3, 0, 0]).is_err());
        assert!(VersionEdit::decode(&[0x16, 3, 1, b'a', 4]).is_err());
        // Replayed and restated by a snapshot; a drop replaces the record.
        let mut vs = VersionSet::new(1, vec![]);
        let mut e = edit.clone();
        let v = vs.prepare(&mut e).unwrap();
        vs.install(&e, v);
        let dropped = KeyspaceRecord {
            dropped: true,
            ..record.clone()
        };
        let mut e = VersionEdit {
            keyspaces: vec![dropped.clone()],
            ..VersionEdit::default()
        };
        let v = vs.prepare(&mut e).unwrap();
        vs.install(&e, v);
        assert_eq!(vs.keyspaces(), std::slice::from_ref(&dropped));
        let mut r = crate::version::set::Replay::new();
        r.apply(&VersionEdit::decode(&vs.snapshot_edit().encode()).unwrap())
            .unwrap();
        assert_eq!(r.finish(FileNum(9)).unwrap().keyspaces(), [dropped]);
        // Two live keyspaces may not share a name.
        let mut r = crate::version::set::Replay::new();
        let other = KeyspaceRecord { id: 4, ..record };
        r.apply(&edit).unwrap();
        let clash = VersionEdit {
            keyspaces: vec![other],
            ..VersionEdit::default()
        };
        assert!(r.apply(&clash).is_err());
    }

    #[test]
    fn manifest_with_rows_recovers_the_container() {
        let d = tempfile::tempdir().unwrap();
        let mut vs = VersionSet::new(5, vec![]);
        let mnum = vs.new_file_number();
        let mut w = ManifestWriter::create(&StdFs, d.path(), mnum, &vs.snapshot_edit()).unwrap();
        set_current(&StdFs, d.path(), mnum).unwrap();
        vs.set_manifest_number(mnum);
        let mut commit = |vs: &mut VersionSet, mut e: VersionEdit| {
            let v = vs.prepare(&mut e).unwrap();
            w.append(&e).unwrap();
            vs.install(&e, v);
        };
        for i in 0..4u32 {
            let n = vs.new_row_number();
            let mut e = VersionEdit::default();
            e.new_rows
                .push(test_row(n, "a", "z", (10 * i..10 * i + 4).collect()));
            e.switch_roles = i == 1;
            commit(&mut vs, e);
        }
        let column = |cursor: &str, wrapped, freed| VersionEdit {
            column: Some(crate::version::ColumnDone {
                cursor: cursor.into(),
                wrapped,
                freed,
            }),
            ..VersionEdit::default()
        };
        commit(&mut vs, column("g", false, vec![(1, 0, 2), (2, 0, 1)]));
        commit(&mut vs, column("", true, vec![(1, 2, 1)]));
        let expect = vs.current().container().clone();
        assert!(expect.drain.as_ref().unwrap().wrapped);
        let back = recover(&StdFs, d.path()).unwrap();
        assert_eq!(back.current().container(), &expect);
        assert_eq!(back.next_row_number(), 5);
        back.current().check_invariants().unwrap();

        // A new manifest started from the recovered state's snapshot recovers it again.
        let mut back = back;
        let n = back.new_file_number();
        ManifestWriter::create(&StdFs, d.path(), n, &back.snapshot_edit()).unwrap();
        set_current(&StdFs, d.path(), n).unwrap();
        let again = recover(&StdFs, d.path()).unwrap();
        assert_eq!(again.current().container(), &expect);
        assert_eq!(again.next_row_number(), 5);
    }

    /// A file system whose files fail `sync` while `fail` is set.
    #[derive(Debug, Default)]
    struct SyncFailFs {
        fail: std::sync::Arc<std::sync::atomic::AtomicBool>,
    }

    struct SyncFailFile {
        inner: Box<dyn WritableFile>,
        fail: std::sync::Arc<std::sync::atomic::AtomicBool>,
    }

    impl WritableFile for SyncFailFile {
        fn append(&mut self, data: &[u8]) -> Result<()> {
            self.inner.append(data)
        }
        fn sync(&mut self) -> Result<()> {
            // Relaxed: the flag is set and read by the same test thread.
            if self.fail.load(std::sync::atomic::Ordering::Relaxed) {
                return Err(Error::io(
                    crate::error::IoOp::Sync,
                    "manifest",
                    std::io::Error::from_raw_os_error(5),
                ));
            }
            self.inner.sync()
        }
        fn flush(&mut self) -> Result<()> {
            self.inner.flush()
        }
        fn preallocate(&mut self, bytes: u64) -> Result<()> {
            self.inner.preallocate(bytes)
        }
        fn len(&self) -> u64 {
            self.inner.len()
        }
    }

    impl FileSystem for SyncFailFs {
        fn create_dir_all(&self, dir: &Path) -> Result<()> {
            StdFs.create_dir_all(dir)
        }
        fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
            Ok(Box::new(SyncFailFile {
                inner: StdFs.create(path)?,
                fail: std::sync::Arc::clone(&self.fail),
            }))
        }
        fn open(&self, path: &Path) -> Result<std::sync::Arc<dyn crate::tier::RandomAccessFile>> {
            StdFs.open(path)
        }
        fn rename(&self, from: &Path, to: &Path) -> Result<()> {
            StdFs.rename(from, to)
        }
        fn remove(&self, path: &Path) -> Result<()> {
            StdFs.remove(path)
        }
        fn list(&self, dir: &Path) -> Result<Vec<String>> {
            StdFs.list(dir)
        }
        fn exists(&self, path: &Path) -> Result<bool> {
            StdFs.exists(path)
        }
        fn sync_dir(&self, dir: &Path) -> Result<()> {
            StdFs.sync_dir(dir)
        }
        fn sync_file(&self, path: &Path) -> Result<()> {
            StdFs.sync_file(path)
        }
        fn lock(&self, path: &Path) -> Result<Box<dyn crate::tier::FileLock>> {
            StdFs.lock(path)
        }
    }

    #[test]
    fn failed_sync_poisons_the_writer() {
        let d = tempfile::tempdir().unwrap();
        let fs = SyncFailFs::default();
        let vs = VersionSet::new(1, vec![]);
        let mut w = ManifestWriter::create(&fs, d.path(), FileNum(1), &vs.snapshot_edit()).unwrap();
        fs.fail.store(true, std::sync::atomic::Ordering::Relaxed);
        let e = VersionEdit {
            last_sequence: Some(SeqNo(5)),
            ..VersionEdit::default()
        };
        assert!(matches!(w.append(&e), Err(Error::Io { .. })));
        fs.fail.store(false, std::sync::atomic::Ordering::Relaxed);
        // Even though the device recovered, the tail is unknown: no further record.
        assert!(matches!(w.append(&e), Err(Error::Poisoned { .. })));
        // set_current propagates the same failure instead of renaming an unsynced file.
        fs.fail.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(set_current(&fs, d.path(), FileNum(1)).is_err());
        assert!(!d.path().join(CURRENT).exists());
    }
}
