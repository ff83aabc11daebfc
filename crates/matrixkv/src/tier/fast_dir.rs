//! [`DirFastTier`]: the real [`FastTier`], a directory of region files mapped with
//! [`MmapRegion`] (DAX + `MAP_SYNC` with cache-line flushes where available, else `msync`).
//!
//! The engine opens one per database for its fast-tier directory and keeps the WAL segments and
//! the L0 matrix container in its regions. It does not create the directory itself (the caller
//! does, through its [`super::FileSystem`]), and removing or listing does not sync the directory:
//! call [`FastTier::sync_dir`] to make new or removed region files durable. A region is
//! created (space reserved with `posix_fallocate`, mapped) under a `.tmp` name and renamed when
//! complete, so a crash never leaves a partial region under its final name.
//!
//! Thread safety: stateless apart from the directory path; `Send + Sync`, `Clone`.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use matrixkv_pmem::MmapRegion;

use super::{FastTier, Region};
use crate::error::{Error, IoOp, Result};

/// A fast tier backed by a directory of mapped files.
#[derive(Debug, Clone)]
pub struct DirFastTier {
    dir: PathBuf,
}

impl DirFastTier {
    /// A fast tier over the (existing) directory `dir`. No I/O happens until a region is used.
    pub fn new(dir: impl Into<PathBuf>) -> DirFastTier {
        DirFastTier { dir: dir.into() }
    }
}

/// The path of region `name` in `dir`, after checking that `name` is a plain file name.
pub(super) fn region_path(dir: &Path, name: &str) -> Result<PathBuf> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(Error::invalid(format!(
            "`{name}` is not a valid fast-tier region name (it must be a plain file name)"
        )));
    }
    Ok(dir.join(name))
}

/// Rejects an empty region before any file is created.
pub(super) fn check_region_len(name: &str, len: usize) -> Result<()> {
    if len == 0 {
        return Err(Error::invalid(format!(
            "fast-tier region `{name}` must not be empty"
        )));
    }
    Ok(())
}

/// The operation to blame for a failed create/open-and-map: the open for name-level failures,
/// the mapping (sizing, fsync, mmap) otherwise.
fn map_op(e: &io::Error) -> IoOp {
    match e.kind() {
        io::ErrorKind::NotFound
        | io::ErrorKind::AlreadyExists
        | io::ErrorKind::PermissionDenied => IoOp::Open,
        _ => IoOp::Map,
    }
}

impl FastTier for DirFastTier {
    fn dir(&self) -> &Path {
        &self.dir
    }

    fn create_region(&self, name: &str, len: usize) -> Result<Arc<dyn Region>> {
        let path = region_path(&self.dir, name)?;
        check_region_len(name, len)?;
        // Created (space reserved, mapped) under a temporary name and renamed when complete: a
        // crash during the reservation, which takes tens of milliseconds for a WAL segment,
        // leaves a `.tmp` file that open deletes, never an empty region under the final name.
        let tmp_name = match name
            .strip_suffix(".wal")
            .or_else(|| name.strip_suffix(".pmt"))
        {
            Some(stem) => format!("{stem}.tmp"),
            None => format!("{name}.tmp"),
        };
        if path.exists() {
            return Err(Error::io(
                IoOp::Open,
                &path,
                std::io::Error::from(std::io::ErrorKind::AlreadyExists),
            ));
        }
        let tmp = region_path(&self.dir, &tmp_name)?;
        // A leftover of a creation a crash interrupted (its number may be handed out again).
        match fs::remove_file(&tmp) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                return Err(Error::io(IoOp::Remove, &tmp, e));
            }
            _ => {}
        }
        let region = MmapRegion::create(&tmp, len).map_err(|e| Error::io(map_op(&e), &tmp, e))?;
        fs::rename(&tmp, &path).map_err(|e| Error::io(IoOp::Rename, &tmp, e))?;
        Ok(Arc::new(region))
    }

    fn open_region(&self, name: &str) -> Result<Arc<dyn Region>> {
        let path = region_path(&self.dir, name)?;
        let region = MmapRegion::open(&path).map_err(|e| Error::io(map_op(&e), &path, e))?;
        Ok(Arc::new(region))
    }

    fn remove(&self, name: &str) -> Result<()> {
        let path = region_path(&self.dir, name)?;
        fs::remove_file(&path).map_err(|e| Error::io(IoOp::Remove, &path, e))
    }

    fn rename(&self, from: &str, to: &str) -> Result<()> {
        let src = region_path(&self.dir, from)?;
        let dst = region_path(&self.dir, to)?;
        fs::rename(&src, &dst).map_err(|e| Error::io(IoOp::Rename, &src, e))
    }

    fn list(&self) -> Result<Vec<String>> {
        let mut names = Vec::new();
        let entries = fs::read_dir(&self.dir).map_err(|e| Error::io(IoOp::List, &self.dir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| Error::io(IoOp::List, &self.dir, e))?;
            match entry.file_name().into_string() {
                Ok(name) => names.push(name),
                Err(raw) => log::warn!(
                    "ignoring fast-tier entry with a non-UTF-8 name {raw:?} in {}",
                    self.dir.display()
                ),
            }
        }
        names.sort();
        Ok(names)
    }

    fn sync_dir(&self) -> Result<()> {
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| Error::io(IoOp::Sync, &self.dir, e))
    }

    fn free_bytes(&self) -> Result<Option<u64>> {
        let s = nix::sys::statvfs::statvfs(&self.dir)
            .map_err(|e| Error::io(IoOp::Open, &self.dir, io::Error::from(e)))?;
        // Blocks available to an unprivileged process, in fragment-size units (POSIX).
        // (`fsblkcnt_t` and `c_ulong` are both 64 bits on the platforms matrixkv builds on.)
        let (blocks, unit) = (s.blocks_available() as u64, s.fragment_size() as u64);
        Ok(Some(blocks.saturating_mul(unit)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tier::PersistMode;

    #[test]
    fn region_written_and_persisted_is_read_back_after_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let tier = DirFastTier::new(dir.path());
        assert_eq!(tier.dir(), dir.path());
        let r = tier.create_region("000001.wal", 8192).unwrap();
        r.write(100, b"record").unwrap();
        r.persist(100, 6).unwrap();
        r.publish_u64(0, 106).unwrap();
        drop(r);
        tier.sync_dir().unwrap();
        let r = tier.open_region("000001.wal").unwrap();
        assert_eq!(r.len(), 8192);
        assert_eq!(r.read_u64(0).unwrap(), 106);
        let mut b = [0u8; 6];
        r.read(100, &mut b).unwrap();
        assert_eq!(&b, b"record");
        assert_ne!(r.persist_mode(), PersistMode::Simulated);
    }

    #[test]
    fn a_partial_region_left_by_a_crash_neither_shows_nor_blocks_a_new_creation() {
        let dir = tempfile::tempdir().unwrap();
        let tier = DirFastTier::new(dir.path());
        std::fs::write(dir.path().join("000007.tmp"), b"half").unwrap();
        assert!(tier.open_region("000007.wal").is_err());
        let r = tier.create_region("000007.wal", 64).unwrap();
        assert_eq!(r.len(), 64);
        assert!(!dir.path().join("000007.tmp").exists());
    }

    #[test]
    fn creating_an_existing_region_fails_with_open_error() {
        let dir = tempfile::tempdir().unwrap();
        let tier = DirFastTier::new(dir.path());
        let _r = tier.create_region("a", 64).unwrap();
        match tier.create_region("a", 64) {
            Err(Error::Io {
                op: IoOp::Open,
                path: Some(p),
                source,
            }) => {
                assert_eq!(p, dir.path().join("a"));
                assert_eq!(source.kind(), io::ErrorKind::AlreadyExists);
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn a_renamed_region_keeps_its_bytes_and_its_mapping() {
        let dir = tempfile::tempdir().unwrap();
        let tier = DirFastTier::new(dir.path());
        let r = tier.create_region("000003.wal", 4096).unwrap();
        r.write(10, b"old").unwrap();
        tier.rename("000003.wal", "000003.walfree").unwrap();
        // The mapping still maps the renamed file.
        r.write(20, b"new").unwrap();
        r.persist(0, 4096).unwrap();
        assert_eq!(tier.list().unwrap(), vec!["000003.walfree".to_string()]);
        let again = tier.open_region("000003.walfree").unwrap();
        let mut b = [0u8; 3];
        again.read(20, &mut b).unwrap();
        assert_eq!(&b, b"new");
        again.read(10, &mut b).unwrap();
        assert_eq!(&b, b"old");
        let e = tier.rename("000003.wal", "x").unwrap_err();
        assert!(
            matches!(
                e,
                Error::Io {
                    op: IoOp::Rename,
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(matches!(
            tier.rename("000003.walfree", "../x"),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn opening_a_missing_region_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let tier = DirFastTier::new(dir.path());
        let e = tier.open_region("missing").unwrap_err();
        assert!(matches!(e, Error::Io { op: IoOp::Open, .. }), "{e:?}");
        assert!(e.to_string().contains("missing"), "{e}");
    }

    #[test]
    fn list_and_remove_track_region_files() {
        let dir = tempfile::tempdir().unwrap();
        let tier = DirFastTier::new(dir.path());
        drop(tier.create_region("b", 64).unwrap());
        drop(tier.create_region("a", 64).unwrap());
        assert_eq!(tier.list().unwrap(), vec!["a".to_string(), "b".to_string()]);
        tier.remove("a").unwrap();
        assert_eq!(tier.list().unwrap(), vec!["b".to_string()]);
        let e = tier.remove("a").unwrap_err();
        assert!(
            matches!(
                e,
                Error::Io {
                    op: IoOp::Remove,
                    ..
                }
            ),
            "{e:?}"
        );
        tier.sync_dir().unwrap();
    }

    #[test]
    fn bad_names_and_empty_regions_are_invalid_arguments() {
        let dir = tempfile::tempdir().unwrap();
        let tier = DirFastTier::new(dir.path());
        for name in ["", ".", "..", "../x", "a/b"] {
            let e = tier.create_region(name, 64).unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(_)), "{name}: {e:?}");
        }
        let e = tier.create_region("empty", 0).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
        assert!(tier.list().unwrap().is_empty());
    }

    #[test]
    fn free_bytes_are_known_for_a_directory_and_an_error_without_one() {
        let dir = tempfile::tempdir().unwrap();
        let tier = DirFastTier::new(dir.path());
        assert!(tier.free_bytes().unwrap().is_some_and(|b| b > 0));
        let gone = DirFastTier::new(dir.path().join("gone"));
        let e = gone.free_bytes().unwrap_err();
        assert!(e.to_string().contains("gone"), "{e}");
    }

    #[test]
    fn missing_directory_fails_to_list_and_sync() {
        let dir = tempfile::tempdir().unwrap();
        let tier = DirFastTier::new(dir.path().join("gone"));
        assert!(matches!(tier.list(), Err(Error::Io { op: IoOp::List, .. })));
        assert!(matches!(
            tier.sync_dir(),
            Err(Error::Io { op: IoOp::Sync, .. })
        ));
    }
}
