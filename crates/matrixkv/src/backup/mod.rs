//! [`BackupEngine`]: incremental backups of a database into a directory, and their listing,
//! verification, restore and purge (RocksDB's `BackupEngine`).
//!
//! A backup directory holds (format in `docs/format/backup.md`):
//!
//! - `shared/`: SSTables and blob files, named by the database they come from, their name and
//!   their size (`<db id>-<name>-<size>`). These files never change once written, so a later
//!   backup that needs one already there refers to it instead of copying it: backups are
//!   incremental.
//! - `private/`: what belongs to one backup, named `<id>-<name>`: the manifest (one snapshot
//!   of the backed-up version), the IDENTITY, and `CONTAINER.pages`, the live pages of the
//!   matrix container (a fast tier cannot be shared, and a container file is as long as the
//!   container however little of it is live).
//! - `meta/<id>`: the backup's metadata: every file, where it is stored, its size and CRC32C.
//!   A backup exists exactly when its metadata file does: it is written (synced, renamed)
//!   last, and removed first when the backup is deleted. Files no metadata names (a backup
//!   interrupted by a crash or an error, a deleted backup) are removed when the engine opens,
//!   and after a delete or purge.
//!
//! A backup holds every write acknowledged before [`BackupEngine::create_backup`] (the
//! memtables are flushed first, as for a checkpoint). Files are copied, never hard-linked: a
//! backup must not share the database's inodes. A restore copies (and checks) every file
//! into empty target directories, rebuilds the container from its pages and names the
//! manifest in CURRENT last, so an interrupted restore is never opened as a database.
//!
//! Thread safety: one engine per directory (a `LOCK` file); its methods take `&self` and may
//! be called from any thread, one at a time per directory.

pub(crate) mod meta;
pub(crate) mod pages;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use crate::checksum::ChecksumStream;
use crate::db::Db;
use crate::engine::checkpoint::{PinnedCopy, Target};
use crate::error::{ArtifactKind, CorruptionReason, CorruptionSite, Error, Result};
use crate::key::SeqNo;
use crate::layout::{self, FileNum};
use crate::options::{L0Layout, Options};
use crate::tier::{FileLock, FileSystem, StdFs};
use crate::version::NUM_LEVELS;
use crate::version::manifest::{self, ManifestWriter};
use meta::{BackupFile, BackupMeta, Tier};

/// Name of the exported container pages in a backup (and only there).
pub(crate) const PAGES_FILE: &str = "CONTAINER.pages";

const COPY_CHUNK: usize = 1 << 20;

/// One backup, as [`BackupEngine::list`] shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupInfo {
    /// The backup's number (increasing).
    pub id: u64,
    /// When it was created, in milliseconds since the Unix epoch.
    pub created_unix_ms: u64,
    /// It holds exactly the writes up to this sequence number.
    pub sequence: SeqNo,
    /// Files it is made of.
    pub files: usize,
    /// Bytes of those files (shared ones included).
    pub bytes: u64,
    /// Bytes this backup added to the directory when it was created (0 when listed).
    pub new_bytes: u64,
    /// Wall time of its creation in microseconds (0 when listed).
    pub micros: u64,
}

/// Incremental backups in a directory. See the module documentation.
///
/// ```
/// # fn main() -> matrixkv::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let mut opts = matrixkv::Options::new(dir.path().join("db"));
/// # opts.container_bytes = 8 << 20;
/// # opts.write_buffer_bytes = 2 << 20;
/// use matrixkv::{BackupEngine, Db};
/// let db = Db::open(opts.clone())?;
/// db.put("k", "v1")?;
/// let backups = BackupEngine::open(dir.path().join("backups"))?;
/// let first = backups.create_backup(&db)?;
/// db.put("k", "v2")?;
/// backups.create_backup(&db)?; // copies only what is new
/// backups.verify(first.id)?;
/// let mut restored = opts.clone();
/// restored.fast_dir = dir.path().join("restored/fast");
/// restored.slow_dir = dir.path().join("restored/slow");
/// backups.restore(first.id, restored.clone())?;
/// assert_eq!(Db::open(restored)?.get("k")?.as_deref(), Some(&b"v1"[..]));
/// backups.purge_old_backups(1)?; // keeps the newest
/// assert_eq!(backups.list()?.len(), 1);
/// # Ok(()) }
/// ```
pub struct BackupEngine {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    _lock: Box<dyn FileLock>,
}

impl std::fmt::Debug for BackupEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackupEngine")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl BackupEngine {
    /// Opens (creating) the backup directory `dir` on the operating system's files, and
    /// removes what interrupted backups left.
    ///
    /// # Errors
    /// I/O errors; `Locked` if another engine has the directory open.
    pub fn open(dir: impl AsRef<Path>) -> Result<BackupEngine> {
        BackupEngine::open_on(Arc::new(StdFs), dir)
    }

    /// Like [`BackupEngine::open`], on `fs` (tests use simulated file systems).
    ///
    /// # Errors
    /// As [`BackupEngine::open`].
    pub fn open_on(fs: Arc<dyn FileSystem>, dir: impl AsRef<Path>) -> Result<BackupEngine> {
        let dir = dir.as_ref().to_owned();
        for sub in ["", "shared", "private", "meta"] {
            fs.create_dir_all(&dir.join(sub))?;
        }
        let lock = fs.lock(&dir.join(layout::LOCK))?;
        let engine = BackupEngine {
            fs,
            dir,
            _lock: lock,
        };
        engine.collect_garbage()?;
        Ok(engine)
    }

    /// Backs up `db`: every write acknowledged before the call. Copies the tables and blob
    /// files no earlier backup in the directory holds, the container's live pages and the
    /// manifest.
    ///
    /// # Errors
    /// The flush's errors; I/O errors of either side (a full backup disk: `NoSpace`), after
    /// which the directory holds no trace of this backup and the earlier ones are intact.
    pub fn create_backup(&self, db: &Db) -> Result<BackupInfo> {
        let started = Instant::now();
        // LightKV's RH-tree is not copied: a restored database rebuilds it from the tables at
        // its first open (the index holds nothing the tables do not).
        db.inner().levels.check_backup(&db.inner().opts.design)?;
        db.flush()?;
        let inner = db.inner();
        let pin = inner.pin_copy()?;
        let metas = self.read_metas()?;
        let id = metas.keys().next_back().map_or(1, |id| id + 1);
        // Checksums of the shared files already here, from the backups that refer to them.
        let known: BTreeMap<&str, (u64, u32)> = metas
            .values()
            .flat_map(|m| &m.files)
            .filter(|f| f.stored.starts_with("shared/"))
            .map(|f| (f.stored.as_str(), (f.size, f.crc)))
            .collect();
        let mut files = Vec::new();
        let mut new_bytes = 0u64;
        let created = self.write_backup(db, &pin, id, &known, &mut files, &mut new_bytes);
        let meta = created.and_then(|()| {
            let meta = BackupMeta {
                id,
                created_ms: crate::compaction_filter::now_millis(),
                sequence: pin.edit.last_sequence.unwrap_or_default().0,
                manifest: pin.manifest_number.0,
                files,
            };
            self.write_meta(&meta)?;
            Ok(meta)
        });
        drop(pin);
        let meta = match meta {
            Ok(m) => m,
            Err(e) => {
                // Whatever the failed backup wrote is named by no metadata file.
                if let Err(gc) = self.collect_garbage() {
                    log::warn!("matrixkv: cannot clean up a failed backup: {gc}");
                }
                return Err(e);
            }
        };
        let mut info = info_of(&meta);
        info.new_bytes = new_bytes;
        info.micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        log::info!(
            "matrixkv: backup {id} of sequence {}: {} files, {} bytes new",
            meta.sequence,
            meta.files.len(),
            new_bytes
        );
        Ok(info)
    }

    /// Copies the files of backup `id` of the pinned version into the directory.
    fn write_backup(
        &self,
        db: &Db,
        pin: &PinnedCopy,
        id: u64,
        known: &BTreeMap<&str, (u64, u32)>,
        files: &mut Vec<BackupFile>,
        new_bytes: &mut u64,
    ) -> Result<()> {
        let inner = db.inner();
        let tables_on_fast = inner.opts.l0_layout == L0Layout::Tables && inner.opts.l0_on_fast();
        let mut shared: Vec<(Tier, String, u64, CopyCheck)> = Vec::new();
        for level in 0..NUM_LEVELS {
            for f in pin.version.files(level) {
                let tier = if level == 0 && tables_on_fast {
                    Tier::Fast
                } else {
                    Tier::Slow
                };
                let check = CopyCheck::Table(f.as_ref().clone());
                shared.push((tier, layout::table_name(f.number), f.size, check));
            }
        }
        for (&n, b) in pin.version.blob_files() {
            let name = layout::blob_name(FileNum(n));
            let path = layout::path(&inner.opts.slow_dir, &name);
            let size = inner.tiers.slow_fs.open(&path)?.len();
            let check = CopyCheck::Blob {
                number: b.meta.number,
                records: b.meta.records,
                record_bytes: b.meta.record_bytes,
            };
            shared.push((Tier::Slow, name, size, check));
        }
        for (tier, name, size, check) in shared {
            let stored = format!("shared/{:016x}-{name}-{size}", pin.source_db_id);
            let crc = match known.get(stored.as_str()) {
                Some(&(s, crc)) if s == size => crc,
                _ => {
                    let (src_fs, src_dir) = match tier {
                        Tier::Fast => (&inner.tiers.fast_fs, inner.tiers.fast.dir()),
                        Tier::Slow => (&inner.tiers.slow_fs, inner.opts.slow_dir.as_path()),
                    };
                    let src = layout::path(src_dir, &name);
                    let crc = self.copy_in(src_fs.as_ref(), &src, &stored, size, &check)?;
                    *new_bytes += size;
                    crc
                }
            };
            files.push(BackupFile {
                tier,
                name,
                stored,
                size,
                crc,
            });
        }
        // Private files: the IDENTITY, the manifest, the container's pages.
        let private = |name: &str| format!("private/{id:06}-{name}");
        let identity = format!("matrixkv-id {:016x}\n", pin.db_id);
        let stored = private(layout::IDENTITY);
        let crc = self.write_small(&stored, identity.as_bytes())?;
        for tier in [Tier::Fast, Tier::Slow] {
            files.push(BackupFile {
                tier,
                name: layout::IDENTITY.to_owned(),
                stored: stored.clone(),
                size: identity.len() as u64,
                crc,
            });
        }
        // Written under its database name, then renamed to its backup name (a crash between
        // leaves a file no metadata names, removed at the next open).
        let manifest_name = layout::manifest_name(pin.manifest_number);
        let stored = private(&manifest_name);
        let path = self.dir.join(&stored);
        let private_dir = self.dir.join("private");
        drop(ManifestWriter::create(
            self.fs.as_ref(),
            &private_dir,
            pin.manifest_number,
            &pin.edit,
        )?);
        self.fs
            .rename(&layout::path(&private_dir, &manifest_name), &path)?;
        let bytes = self.fs.read_all(&path)?;
        files.push(BackupFile {
            tier: Tier::Slow,
            name: manifest_name,
            stored,
            size: bytes.len() as u64,
            crc: crate::checksum::checksum(&bytes),
        });
        *new_bytes += bytes.len() as u64;
        if let Some(c) = inner.levels.container() {
            let stored = private(PAGES_FILE);
            let path = self.dir.join(&stored);
            let pages = pin.version.container().all_row_pages();
            let size = pages::write(
                self.fs.as_ref(),
                &path,
                c.region.as_ref(),
                c.page_bytes,
                pages,
            )?;
            files.push(BackupFile {
                tier: Tier::Fast,
                name: PAGES_FILE.to_owned(),
                stored,
                size,
                crc: self.file_crc(&path, size)?,
            });
            *new_bytes += size;
        }
        for sub in ["shared", "private"] {
            self.fs.sync_dir(&self.dir.join(sub))?;
        }
        Ok(())
    }

    /// Copies `src` (`size` bytes, on `src_fs`) to `stored` under a temporary name, checks
    /// the copy is the file the manifest records (`check`: a damaged source is an error, not
    /// a backup of the damage with a matching checksum), syncs it and renames it into place.
    /// Returns its checksum.
    fn copy_in(
        &self,
        src_fs: &dyn FileSystem,
        src: &Path,
        stored: &str,
        size: u64,
        check: &CopyCheck,
    ) -> Result<u32> {
        let from = src_fs.open(src)?;
        if from.len() != size {
            return Err(Error::invalid(format!(
                "{} changed size while being backed up",
                src.display()
            )));
        }
        let dst = self.dir.join(stored);
        let tmp = self.dir.join(format!("{stored}.tmp"));
        let mut to = self.fs.create(&tmp)?;
        let crc = stream(from.as_ref(), size, Some(to.as_mut()))?;
        to.sync()?;
        drop(to);
        match check {
            CopyCheck::Table(f) => {
                crate::engine::checkpoint::verify_table_copy(self.fs.as_ref(), &tmp, f)?;
            }
            CopyCheck::Blob {
                number,
                records,
                record_bytes,
            } => crate::blob::reader::verify_blob_copy(
                self.fs.as_ref(),
                &tmp,
                *number,
                *records,
                *record_bytes,
            )?,
        }
        self.fs.rename(&tmp, &dst)?;
        Ok(crc)
    }

    /// Writes a small private file and syncs it; returns its checksum.
    fn write_small(&self, stored: &str, bytes: &[u8]) -> Result<u32> {
        let mut f = self.fs.create(&self.dir.join(stored))?;
        f.append(bytes)?;
        f.sync()?;
        Ok(crate::checksum::checksum(bytes))
    }

    /// The checksum of the stored file at `path`, which must be `size` bytes long.
    fn file_crc(&self, path: &Path, size: u64) -> Result<u32> {
        let f = self.fs.open(path)?;
        if f.len() != size {
            return Err(Error::corruption(
                CorruptionSite::new(ArtifactKind::Backup, path, f.len().min(size)),
                CorruptionReason::Invalid("the file's size differs from the backup's metadata"),
            ));
        }
        stream(f.as_ref(), size, None)
    }

    /// Writes `meta/<id>` atomically: a temporary file, synced, renamed, directory synced.
    fn write_meta(&self, meta: &BackupMeta) -> Result<()> {
        let dir = self.dir.join("meta");
        let tmp = dir.join(format!("{:06}.tmp", meta.id));
        let mut f = self.fs.create(&tmp)?;
        f.append(&meta.encode())?;
        f.sync()?;
        drop(f);
        self.fs.rename(&tmp, &dir.join(format!("{:06}", meta.id)))?;
        self.fs.sync_dir(&dir)
    }

    /// Every backup's metadata, by id.
    fn read_metas(&self) -> Result<BTreeMap<u64, BackupMeta>> {
        let dir = self.dir.join("meta");
        let mut out = BTreeMap::new();
        for name in self.fs.list(&dir)? {
            let Ok(id) = name.parse::<u64>() else {
                continue;
            };
            let path = dir.join(&name);
            let meta = BackupMeta::decode(&self.fs.read_all(&path)?, &path)?;
            if meta.id != id {
                return Err(Error::corruption(
                    CorruptionSite::new(ArtifactKind::Backup, &path, 0),
                    CorruptionReason::Invalid("the metadata file names another backup"),
                ));
            }
            out.insert(id, meta);
        }
        Ok(out)
    }

    fn meta(&self, id: u64) -> Result<BackupMeta> {
        self.read_metas()?
            .remove(&id)
            .ok_or_else(|| Error::invalid(format!("no backup {id} in {}", self.dir.display())))
    }

    /// The backups in the directory, oldest first.
    ///
    /// # Errors
    /// I/O errors; a damaged metadata file (`Corruption` naming it).
    pub fn list(&self) -> Result<Vec<BackupInfo>> {
        Ok(self.read_metas()?.values().map(info_of).collect())
    }

    /// Checks that every file of backup `id` is present, of its size, and matches its
    /// checksum.
    ///
    /// # Errors
    /// `InvalidArgument` for an unknown id; `Corruption` naming the first damaged file.
    pub fn verify(&self, id: u64) -> Result<()> {
        let meta = self.meta(id)?;
        for f in &meta.files {
            let path = self.dir.join(&f.stored);
            let crc = self.file_crc(&path, f.size)?;
            check_crc(f.crc, crc, &path)?;
        }
        Ok(())
    }

    /// Restores backup `id` into `target`'s `fast_dir` and `slow_dir` (on `target`'s tiers,
    /// the operating system's files when `None`; other fields are ignored), which must be
    /// absent or empty. Open the result with the backed-up database's options and those
    /// directories. Every file is checked against its checksum while it is copied.
    ///
    /// # Errors
    /// `InvalidArgument` for an unknown id or a target that is not empty; `Corruption`
    /// naming a damaged backup file; I/O errors. The target directories are emptied again.
    pub fn restore(&self, id: u64, target: Options) -> Result<()> {
        let meta = self.meta(id)?;
        let t = Target::of(target);
        t.require_empty()?;
        let locks = t.create_and_lock()?;
        let restored = self.restore_files(&meta, &t).and_then(|()| {
            t.fast_fs.sync_dir(&t.fast_dir)?;
            t.fast.sync_dir()?;
            t.slow_fs.sync_dir(&t.slow_dir)?;
            // CURRENT last: it makes the directories a database.
            manifest::set_current(t.slow_fs.as_ref(), &t.slow_dir, FileNum(meta.manifest))
        });
        if let Err(e) = restored {
            t.clear();
            return Err(e);
        }
        drop(locks);
        Ok(())
    }

    /// Restores the newest backup (see [`BackupEngine::restore`]).
    ///
    /// # Errors
    /// `InvalidArgument` if there is none; as [`BackupEngine::restore`].
    pub fn restore_latest(&self, target: Options) -> Result<u64> {
        let id = self
            .read_metas()?
            .keys()
            .next_back()
            .copied()
            .ok_or_else(|| Error::invalid(format!("no backup in {}", self.dir.display())))?;
        self.restore(id, target)?;
        Ok(id)
    }

    fn restore_files(&self, meta: &BackupMeta, t: &Target) -> Result<()> {
        for f in &meta.files {
            let src = self.dir.join(&f.stored);
            if f.name == PAGES_FILE {
                let crc = self.file_crc(&src, f.size)?;
                check_crc(f.crc, crc, &src)?;
                let file = self.fs.open(&src)?;
                let h = pages::read_header(file.as_ref(), &src)?;
                let len = usize::try_from(h.container_bytes).map_err(|_| {
                    Error::invalid("the backed-up container does not fit in memory addresses")
                })?;
                let region = t.fast.create_region(layout::CONTAINER, len)?;
                pages::restore(file.as_ref(), &src, region.as_ref())?;
                continue;
            }
            let (fs, dir) = match f.tier {
                Tier::Fast => (&t.fast_fs, &t.fast_dir),
                Tier::Slow => (&t.slow_fs, &t.slow_dir),
            };
            let from = self.fs.open(&src)?;
            if from.len() != f.size {
                return Err(Error::corruption(
                    CorruptionSite::new(ArtifactKind::Backup, &src, from.len().min(f.size)),
                    CorruptionReason::Invalid("the file's size differs from the backup's metadata"),
                ));
            }
            let mut to = fs.create(&layout::path(dir, &f.name))?;
            let crc = stream(from.as_ref(), f.size, Some(to.as_mut()))?;
            check_crc(f.crc, crc, &src)?;
            to.sync()?;
        }
        Ok(())
    }

    /// Deletes backup `id` and the files only it referred to.
    ///
    /// # Errors
    /// `InvalidArgument` for an unknown id; I/O errors.
    pub fn delete(&self, id: u64) -> Result<()> {
        self.meta(id)?;
        let dir = self.dir.join("meta");
        self.fs.remove(&dir.join(format!("{id:06}")))?;
        self.fs.sync_dir(&dir)?;
        self.collect_garbage()
    }

    /// Deletes every backup but the newest `keep`; returns the ids deleted.
    ///
    /// # Errors
    /// I/O errors.
    pub fn purge_old_backups(&self, keep: usize) -> Result<Vec<u64>> {
        let ids: Vec<u64> = self.read_metas()?.keys().copied().collect();
        let old = ids.len().saturating_sub(keep);
        let purged: Vec<u64> = ids.into_iter().take(old).collect();
        let dir = self.dir.join("meta");
        for id in &purged {
            self.fs.remove(&dir.join(format!("{id:06}")))?;
        }
        self.fs.sync_dir(&dir)?;
        self.collect_garbage()?;
        Ok(purged)
    }

    /// Removes every stored file no backup's metadata names, and temporary files.
    fn collect_garbage(&self) -> Result<()> {
        let metas = self.read_metas()?;
        let live: HashSet<&str> = metas
            .values()
            .flat_map(|m| &m.files)
            .map(|f| f.stored.as_str())
            .collect();
        for sub in ["shared", "private", "meta"] {
            let dir = self.dir.join(sub);
            for name in self.fs.list(&dir)? {
                let stored = format!("{sub}/{name}");
                let keep = match sub {
                    "meta" => name.parse::<u64>().is_ok(),
                    _ => live.contains(stored.as_str()),
                };
                if !keep {
                    self.fs.remove(&dir.join(&name))?;
                    log::debug!("matrixkv: removed unreferenced backup file {stored}");
                }
            }
        }
        Ok(())
    }
}

/// What a copied table or blob file must be, from the manifest.
enum CopyCheck {
    /// A table: its size, entry count and block checksums.
    Table(crate::version::FileMeta),
    /// A blob file: its records and footer, and the manifest's counts.
    Blob {
        number: FileNum,
        records: u64,
        record_bytes: u64,
    },
}

/// Reads the first `size` bytes of `from` in chunks, appending them to `to` if given, and
/// returns their masked CRC32C (the one loop behind copying in, verifying and restoring).
fn stream(
    from: &dyn crate::tier::RandomAccessFile,
    size: u64,
    mut to: Option<&mut dyn crate::tier::WritableFile>,
) -> Result<u32> {
    let mut crc = ChecksumStream::new();
    let mut buf = vec![0u8; COPY_CHUNK];
    let mut off = 0u64;
    while off < size {
        let n = usize::try_from(size - off).map_or(COPY_CHUNK, |r| r.min(COPY_CHUNK));
        let chunk = buf.get_mut(..n).unwrap_or_default();
        from.read_exact_at(off, chunk)?;
        crc.update(chunk);
        if let Some(t) = to.as_mut() {
            t.append(chunk)?;
        }
        off += n as u64;
    }
    Ok(crc.finish())
}

/// A stored file whose checksum is not the one its backup recorded is corrupt.
fn check_crc(stored: u32, computed: u32, path: &Path) -> Result<()> {
    if stored == computed {
        return Ok(());
    }
    Err(Error::corruption(
        CorruptionSite::new(ArtifactKind::Backup, path, 0),
        CorruptionReason::ChecksumMismatch { stored, computed },
    ))
}

fn info_of(m: &BackupMeta) -> BackupInfo {
    BackupInfo {
        id: m.id,
        created_unix_ms: m.created_ms,
        sequence: SeqNo(m.sequence),
        files: m.files.len(),
        bytes: m.files.iter().map(|f| f.size).sum(),
        new_bytes: 0,
        micros: 0,
    }
}
