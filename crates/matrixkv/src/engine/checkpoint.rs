//! `Db::checkpoint`: an openable, consistent copy of the database in two other directories.
//!
//! The copy holds every write acknowledged before the call: the memtables are flushed first
//! (as RocksDB's `CreateCheckpoint` does by default), so the copy needs no WAL. Then, with the
//! current version pinned (its tables, blob files and container pages stay put while it is
//! held), the checkpoint:
//!
//! 1. locks the target directories and writes a new IDENTITY to both (a checkpoint is a new
//!    database: its tiers must not be mixed with the original's);
//! 2. hard-links every SSTable and blob file where the target file system allows it (same
//!    device), copying otherwise (L0 tables on a fast tier of another device, for example);
//! 3. exports the matrix container: a new `CONTAINER` region of the same size on the target's
//!    fast tier, with only the pages of live rows copied (at the same offsets, so the manifest's
//!    page lists stay valid; a fast tier cannot be hard-linked; the region is reserved whole,
//!    like the database's own);
//! 4. writes a manifest holding one snapshot edit of the pinned version under a new database
//!    id, and names it in `CURRENT` last.
//!
//! A checkpoint that fails part-way removes what it created; one interrupted by a crash has no
//! `CURRENT` and is refused at open (its fast tier has an IDENTITY and data), never opened as a
//! partial copy. Nothing here takes `state` during I/O (docs/concurrency.md).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use super::DbInner;
use super::recovery::{new_db_id, write_identity};
use crate::error::{Error, Result};
use crate::key::SeqNo;
use crate::layout::{self, FileNum};
use crate::options::{L0Layout, Options, Tiers};
use crate::tier::{FastTier, FileLock, FileSystem, Region};
use crate::version::NUM_LEVELS;
use crate::version::edit::{FileMeta, VersionEdit};
use crate::version::manifest::{self, ManifestWriter};
use crate::version::version::Version;

/// What [`crate::Db::checkpoint`] produced.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckpointInfo {
    /// The checkpoint holds exactly the writes up to this sequence number.
    pub sequence: SeqNo,
    /// Table and blob files shared with the database through hard links.
    pub linked_files: u64,
    /// Table and blob files copied (no hard link possible).
    pub copied_files: u64,
    /// Bytes of the copied files.
    pub copied_bytes: u64,
    /// Container pages exported (live rows only).
    pub container_pages: u64,
    /// Wall time of the whole call, flush included, in microseconds.
    pub micros: u64,
}

/// Where a checkpoint (or a restored backup) goes: its tiers and the directories on them.
pub(crate) struct Target {
    pub slow_fs: Arc<dyn FileSystem>,
    pub fast_fs: Arc<dyn FileSystem>,
    pub fast: Arc<dyn FastTier>,
    pub slow_dir: PathBuf,
    pub fast_dir: PathBuf,
    /// Hard links are tried only between operating-system files.
    pub may_link: bool,
}

const COPY_CHUNK: usize = 1 << 20;

/// The current version pinned for a copy (checkpoint or backup), with the first edit of the
/// copy's manifest: a snapshot of that version under a new database id.
pub(crate) struct PinnedCopy {
    /// Held while files and pages are copied: none of them is deleted or reused meanwhile.
    pub version: Arc<Version>,
    /// The snapshot edit, `db_id` and `next_file_number` already set for the copy.
    pub edit: VersionEdit,
    /// The copy's database id (IDENTITY).
    pub db_id: u64,
    /// The number of the copy's manifest.
    pub manifest_number: FileNum,
    /// The id of the database copied (its file numbers name its files' contents).
    pub source_db_id: u64,
}

impl DbInner {
    /// Pins the current version for a copy (the caller flushed first, so it holds every
    /// write acknowledged before the flush). See [`PinnedCopy`].
    pub(crate) fn pin_copy(&self) -> Result<PinnedCopy> {
        let (version, mut edit, source_db_id) = {
            let st = self.state.lock();
            super::check_poison(&st)?;
            (
                st.versions.current(),
                st.versions.snapshot_edit(),
                st.versions.db_id(),
            )
        };
        let db_id = new_db_id();
        edit.db_id = Some(db_id);
        let next = edit.next_file_number.unwrap_or(1);
        edit.next_file_number = Some(next + 1);
        Ok(PinnedCopy {
            version,
            edit,
            db_id,
            manifest_number: FileNum(next),
            source_db_id,
        })
    }

    /// Writes a checkpoint into the directories (and tiers) of `target`; the memtables must
    /// have been flushed by the caller. See the module documentation.
    pub(crate) fn checkpoint(&self, target: Options, started: Instant) -> Result<CheckpointInfo> {
        let t = Target::of(target);
        t.require_empty()?;
        // The SLM-DB design: no job commits to the global index while it is copied, so the
        // copy is the generation the pinned version records.
        let _index = self.levels.global_index().map(|ix| ix.lock());
        let PinnedCopy {
            version,
            edit,
            db_id,
            manifest_number,
            ..
        } = self.pin_copy()?;
        let mut info = CheckpointInfo {
            sequence: edit.last_sequence.unwrap_or_default(),
            ..CheckpointInfo::default()
        };

        // Nobody opens the checkpoint while it is written.
        let _locks = t.create_and_lock()?;
        let written = self.write_checkpoint(&t, &version, db_id, &mut info);
        let written = written.and_then(|()| {
            ManifestWriter::create(t.slow_fs.as_ref(), &t.slow_dir, manifest_number, &edit)?;
            t.fast_fs.sync_dir(&t.fast_dir)?;
            t.fast.sync_dir()?;
            // CURRENT last: it makes the checkpoint a database (and syncs the directory).
            manifest::set_current(t.slow_fs.as_ref(), &t.slow_dir, manifest_number)
        });
        if let Err(e) = written {
            t.clear();
            return Err(e);
        }
        drop(version);
        info.micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        log::info!(
            "matrixkv: checkpoint at sequence {} in {}: {} files linked, {} copied ({} bytes), \
             {} container pages",
            info.sequence.0,
            t.slow_dir.display(),
            info.linked_files,
            info.copied_files,
            info.copied_bytes,
            info.container_pages
        );
        Ok(info)
    }

    /// Steps 1–3 of the module documentation, for the pinned `version`.
    fn write_checkpoint(
        &self,
        t: &Target,
        version: &Version,
        db_id: u64,
        info: &mut CheckpointInfo,
    ) -> Result<()> {
        write_identity(t.fast_fs.as_ref(), &t.fast_dir, db_id)?;
        write_identity(t.slow_fs.as_ref(), &t.slow_dir, db_id)?;
        let tables_on_fast = self.opts.l0_layout == L0Layout::Tables && self.opts.l0_on_fast();
        for level in 0..NUM_LEVELS {
            for f in version.files(level) {
                let name = layout::table_name(f.number);
                let on_fast = level == 0 && tables_on_fast;
                if self.share_file(t, &name, on_fast, info)? {
                    let (fs, dir) = t.side(on_fast);
                    verify_copied_table(fs, dir, f)?;
                }
            }
        }
        for (&n, b) in version.blob_files() {
            if self.share_file(t, &layout::blob_name(FileNum(n)), false, info)? {
                crate::blob::reader::BlobFiles::new(Arc::clone(&t.slow_fs), t.slow_dir.clone())
                    .verify_file(b.meta.number, b.meta.records, b.meta.record_bytes)?;
            }
        }
        if let Some(ix) = self.levels.global_index() {
            let region = t.fast.create_region(layout::INDEX, ix.region_len())?;
            info.copied_bytes += ix.copy_to(region.as_ref())?;
        }
        if let Some(c) = self.levels.container() {
            let region = t.fast.create_region(layout::CONTAINER, c.region.len())?;
            info.container_pages = export_pages(
                c.region.as_ref(),
                region.as_ref(),
                c.page_bytes,
                version.container().all_row_pages(),
            )?;
        }
        t.slow_fs.sync_dir(&t.slow_dir)
    }

    /// Puts the database's file `name` (on the fast tier's directory if `on_fast`) into the
    /// checkpoint: a hard link where possible, a synced copy otherwise. True for a copy, which
    /// the caller reads back and checks (a read of the source that returned other bytes than
    /// the file holds must fail the checkpoint, not leave a damaged copy behind).
    fn share_file(
        &self,
        t: &Target,
        name: &str,
        on_fast: bool,
        info: &mut CheckpointInfo,
    ) -> Result<bool> {
        let (src_fs, src_dir, dst_fs, dst_dir) = if on_fast {
            (
                &self.tiers.fast_fs,
                self.tiers.fast.dir(),
                &t.fast_fs,
                &t.fast_dir,
            )
        } else {
            (
                &self.tiers.slow_fs,
                self.opts.slow_dir.as_path(),
                &t.slow_fs,
                &t.slow_dir,
            )
        };
        let src = layout::path(src_dir, name);
        let dst = layout::path(dst_dir, name);
        if t.may_link && dst_fs.link(&src, &dst).is_ok() {
            info.linked_files += 1;
            return Ok(false);
        }
        let from = src_fs.open(&src)?;
        let mut to = dst_fs.create(&dst)?;
        let len = from.len();
        let mut buf = vec![0u8; COPY_CHUNK];
        let mut off = 0u64;
        while off < len {
            let n = usize::try_from(len - off).map_or(COPY_CHUNK, |r| r.min(COPY_CHUNK));
            let chunk = buf.get_mut(..n).unwrap_or_default();
            from.read_exact_at(off, chunk)?;
            to.append(chunk)?;
            off += n as u64;
        }
        to.sync()?;
        info.copied_files += 1;
        info.copied_bytes += len;
        Ok(true)
    }
}

impl Target {
    /// The file system and directory of the fast tier's files (`on_fast`) or the slow tier's.
    fn side(&self, on_fast: bool) -> (&Arc<dyn FileSystem>, &Path) {
        if on_fast {
            (&self.fast_fs, &self.fast_dir)
        } else {
            (&self.slow_fs, &self.slow_dir)
        }
    }
}

/// Reads the copy of table `f` in `dir` back whole: its size and entry count are the
/// manifest's and every block's checksum holds.
fn verify_copied_table(fs: &Arc<dyn FileSystem>, dir: &Path, f: &FileMeta) -> Result<()> {
    verify_table_copy(
        fs.as_ref(),
        &layout::path(dir, &layout::table_name(f.number)),
        f,
    )
}

/// Checks that the copy at `path` of table `f` (a checkpoint's or a backup's) is the table
/// the manifest records: its size and entry count, and every block's checksum. A source
/// damaged on disk is reported here, instead of being stored with a checksum of its damage.
pub(crate) fn verify_table_copy(fs: &dyn FileSystem, path: &Path, f: &FileMeta) -> Result<()> {
    let path = path.to_path_buf();
    let table = crate::sst::Table::open(fs.open(&path)?, f.number.0, None)?;
    if table.size() != f.size || table.properties().entries != f.entries {
        return Err(Error::corruption(
            crate::error::CorruptionSite::new(crate::error::ArtifactKind::Sst, path, 0),
            crate::error::CorruptionReason::Invalid(
                "the checkpoint's copy differs from the table the manifest records",
            ),
        ));
    }
    table.verify()
}

/// Copies `pages` of `from` into `to` at the same offsets and persists them, in runs of
/// consecutive pages. Returns the number of pages copied.
fn export_pages(
    from: &dyn Region,
    to: &dyn Region,
    page_bytes: usize,
    mut pages: Vec<u32>,
) -> Result<u64> {
    pages.sort_unstable();
    pages.dedup();
    let io = |e: std::io::Error| Error::io(crate::error::IoOp::Write, layout::CONTAINER, e);
    let mut buf = Vec::new();
    let mut i = 0;
    while let Some(&first) = pages.get(i) {
        let mut run = 1;
        while pages.get(i + run) == Some(&(first + run as u32)) && run * page_bytes < COPY_CHUNK {
            run += 1;
        }
        let off = first as usize * page_bytes;
        buf.resize(run * page_bytes, 0);
        from.read(off, &mut buf).map_err(io)?;
        to.write(off, &buf).map_err(io)?;
        to.persist(off, buf.len()).map_err(io)?;
        i += run;
    }
    Ok(pages.len() as u64)
}

impl Target {
    /// The directories and tiers of `target` (the operating system's files when it has no
    /// tiers; hard links are tried only then).
    pub(crate) fn of(target: Options) -> Target {
        let may_link = target.tiers.is_none();
        let tiers = target.tiers.unwrap_or_else(|| Tiers::os(&target.fast_dir));
        Target {
            fast_dir: tiers.fast.dir().to_owned(),
            slow_dir: target.slow_dir,
            slow_fs: tiers.slow_fs,
            fast_fs: tiers.fast_fs,
            fast: tiers.fast,
            may_link,
        }
    }

    /// Both directories must not exist or be empty: a copy never overwrites anything.
    pub(crate) fn require_empty(&self) -> Result<()> {
        for (fs, dir) in [
            (&self.slow_fs, &self.slow_dir),
            (&self.fast_fs, &self.fast_dir),
        ] {
            if fs.exists(dir)? && !fs.list(dir)?.is_empty() {
                return Err(Error::invalid(format!(
                    "target directory {} exists and is not empty",
                    dir.display()
                )));
            }
        }
        Ok(())
    }

    /// Creates both directories and locks them (nobody opens a half-written copy).
    pub(crate) fn create_and_lock(&self) -> Result<[Box<dyn FileLock>; 2]> {
        self.slow_fs.create_dir_all(&self.slow_dir)?;
        self.fast_fs.create_dir_all(&self.fast_dir)?;
        Ok([
            self.slow_fs
                .lock(&layout::path(&self.slow_dir, layout::LOCK))?,
            self.fast_fs
                .lock(&layout::path(&self.fast_dir, layout::LOCK))?,
        ])
    }

    /// Best-effort removal of everything in the target directories after a failed copy:
    /// they were empty before it and locked during it, so all of it is the copy's (the
    /// error already reported is the one that matters; a file left behind only makes the
    /// next copy into these directories refuse).
    pub(crate) fn clear(&self) {
        let warn = |name: &str, e: Error| {
            log::warn!("matrixkv: cannot remove {name} of a failed checkpoint: {e}");
        };
        for name in self.fast.list().unwrap_or_default() {
            if let Err(e) = self.fast.remove(&name) {
                warn(&name, e);
            }
        }
        for (fs, dir) in [
            (&self.fast_fs, &self.fast_dir),
            (&self.slow_fs, &self.slow_dir),
        ] {
            for name in fs.list(dir).unwrap_or_default() {
                if let Err(e) = fs.remove(&layout::path(dir, &name)) {
                    warn(&name, e);
                }
            }
        }
    }
}
