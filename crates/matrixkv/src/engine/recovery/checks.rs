//! The checks of an open (the files the manifest names, the identity of both tier
//! directories, the parameters fixed at creation) and the creation of a new database.

use std::collections::BTreeSet;
use std::path::Path;

use crate::error::{ArtifactKind, CorruptionReason, CorruptionSite, Error, Result};
use crate::layout::{self, FileKind, FileNum};
use crate::options::{Options, Tiers};
use crate::tier::FileSystem;
use crate::version::manifest::{self, ManifestWriter};
use crate::version::set::VersionSet;

/// Checks that the files the recovered version names exist: every table (L0 in the fast-tier
/// directory, L1+ in the slow one), every blob file, and the WAL segment of the log number
/// (other than 0) whenever a newer segment exists (a flush deletes older segments only after its edit is
/// durable, and open moves the log number to a segment that exists).
///
/// A missing file means the version is not the one the database last installed. When the
/// manifest's last record was dropped as a torn write, that record was in fact durable (its
/// edit's obsolete files were deleted after it), so it was damaged rather than torn: the open
/// is refused naming the manifest and the record's offset (contract C5) instead of silently
/// rolling the database back. Otherwise the missing file itself is reported.
///
/// `names` are the listings of the slow-tier directory, the fast-tier directory and the fast
/// tier's regions; `dirs` the slow and fast directories.
pub(super) fn check_files_present(
    names: [&Vec<String>; 3],
    dirs: [&Path; 2],
    vs: &VersionSet,
    dropped: Option<&manifest::DroppedRecord>,
    l0_on_fast: bool,
) -> Result<()> {
    let [slow, fast, regions] =
        names.map(|n| n.iter().map(String::as_str).collect::<BTreeSet<_>>());
    let [slow_dir, fast_dir] = dirs;
    let v = vs.current();
    let mut missing: Option<(ArtifactKind, std::path::PathBuf)> = None;
    for level in 0..crate::version::NUM_LEVELS {
        for f in v.files(level) {
            let name = layout::table_name(f.number);
            let (names, dir) = if level == 0 && l0_on_fast {
                (&fast, fast_dir)
            } else {
                (&slow, slow_dir)
            };
            if missing.is_none() && !names.contains(name.as_str()) {
                missing = Some((ArtifactKind::Sst, layout::path(dir, &name)));
            }
        }
    }
    for &n in v.blob_files().keys() {
        let name = layout::blob_name(FileNum(n));
        if missing.is_none() && !slow.contains(name.as_str()) {
            missing = Some((ArtifactKind::Blob, layout::path(slow_dir, &name)));
        }
    }
    // Log number 0 names no segment: a database whose first open failed before its snapshot
    // with a real log number was written.
    let log = vs.log_number();
    let newer_wal = log.0 > 0
        && regions.iter().any(|n| {
            matches!(layout::parse(n),
                Some(FileKind::Wal(w) | FileKind::PersistentMemtable(w)) if w > log)
        });
    // The log number names a WAL segment, or a persistent memtable (NoveLSM).
    let named = regions.contains(layout::wal_name(log).as_str())
        || regions.contains(layout::pmt_name(log).as_str());
    if missing.is_none() && newer_wal && !named {
        missing = Some((
            ArtifactKind::Wal,
            layout::path(fast_dir, &layout::wal_name(log)),
        ));
    }
    let Some((kind, path)) = missing else {
        return Ok(());
    };
    log::error!(
        "matrixkv: the manifest names {}, which does not exist",
        path.display()
    );
    Err(match dropped {
        Some(d) => Error::corruption(
            CorruptionSite::new(ArtifactKind::Manifest, &d.path, d.offset),
            CorruptionReason::Invalid(
                "the last record is damaged, not torn: the state before it names files that \
                 were deleted after the record was written; refusing to roll the database back",
            ),
        ),
        None => Error::corruption(
            CorruptionSite::new(kind, &path, 0),
            CorruptionReason::Invalid("the manifest names this file, but it does not exist"),
        ),
    })
}

/// True when the fast tier holds an IDENTITY but no WAL segment, no table and no container:
/// a creation that failed (or crashed) before CURRENT was written. Its open never returned, so
/// no write was acknowledged, and the database is created again. A database that was ever
/// opened has a WAL segment in its fast tier from its first open on.
pub(super) fn interrupted_creation(tiers: &Tiers, fast_dir: &Path) -> Result<bool> {
    let data = |name: &String| {
        matches!(
            layout::parse(name),
            Some(FileKind::Wal(_) | FileKind::Table(_))
        ) || name == layout::CONTAINER
    };
    Ok(!tiers.fast_fs.list(fast_dir)?.iter().any(data) && !tiers.fast.list()?.iter().any(data))
}

/// Creates the files of a new database: IDENTITY in both directories and the first manifest.
pub(super) fn create_new(
    opts: &Options,
    tiers: &Tiers,
    slow_dir: &Path,
    fast_dir: &Path,
) -> Result<VersionSet> {
    let db_id = new_db_id();
    write_identity(tiers.fast_fs.as_ref(), fast_dir, db_id)?;
    write_identity(tiers.slow_fs.as_ref(), slow_dir, db_id)?;
    let mut vs = VersionSet::new(db_id, opts.fixed_options());
    let n = vs.new_file_number();
    vs.set_manifest_number(n);
    let first = vs.snapshot_edit();
    ManifestWriter::create(tiers.slow_fs.as_ref(), slow_dir, n, &first)?;
    manifest::set_current(tiers.slow_fs.as_ref(), slow_dir, n)?;
    Ok(vs)
}

/// A database id from the clock and the process id (unique enough to tell databases apart).
pub(in crate::engine) fn new_db_id() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut z = nanos ^ (u64::from(std::process::id()) << 32) ^ 0x9e37_79b9_7f4a_7c15;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// IDENTITY file: `matrixkv-id <16 hex digits>\n`, written atomically (tmp + sync + rename).
pub(in crate::engine) fn write_identity(fs: &dyn FileSystem, dir: &Path, id: u64) -> Result<()> {
    let tmp = layout::path(dir, "IDENTITY.tmp");
    let mut f = fs.create(&tmp)?;
    f.append(format!("matrixkv-id {id:016x}\n").as_bytes())?;
    f.sync()?;
    fs.rename(&tmp, &layout::path(dir, layout::IDENTITY))?;
    fs.sync_dir(dir)
}

pub(super) fn check_identity(fs: &dyn FileSystem, dir: &Path, expected: u64) -> Result<()> {
    let path = layout::path(dir, layout::IDENTITY);
    let site = || CorruptionSite::new(ArtifactKind::Identity, &path, 0);
    if !fs.exists(&path)? {
        return Err(Error::corruption(
            site(),
            CorruptionReason::Invalid(
                "IDENTITY is missing: this tier directory lost its contents (a fast tier on \
                 tmpfs does not survive a reboot) or belongs to no database; refusing to open \
                 rather than silently losing acknowledged writes",
            ),
        ));
    }
    let bytes = fs.read_all(&path)?;
    let text = std::str::from_utf8(&bytes).unwrap_or("");
    let id = text
        .strip_prefix("matrixkv-id ")
        .and_then(|s| u64::from_str_radix(s.trim_end(), 16).ok())
        .ok_or_else(|| {
            Error::corruption(site(), CorruptionReason::Invalid("malformed IDENTITY"))
        })?;
    if id != expected {
        return Err(Error::invalid(format!(
            "{} belongs to database {id:016x}, but the manifest is of database {expected:016x}: \
             fast_dir and slow_dir do not belong together",
            path.display()
        )));
    }
    Ok(())
}

/// Takes the parameters fixed at creation from the manifest into `opts` (a read-only open
/// needs no knowledge of how the database was created). A database with a TTL gets one of a
/// hundred years unless `opts` gives one: reads through the handle then see values whose TTL
/// passed but that no compaction dropped yet.
pub(super) fn adopt_fixed_options(opts: &mut Options, vs: &VersionSet) -> Result<()> {
    let bad = |name: &str, value: &str| {
        Error::invalid(format!(
            "the manifest's fixed option {name} = {value:?} is not understood by this build"
        ))
    };
    for (name, value) in vs.fixed_options() {
        match name.as_str() {
            "num_levels" => opts.num_levels = value.parse().map_err(|_| bad(name, value))?,
            "l0_layout" => opts.l0_layout = value.parse().map_err(|_| bad(name, value))?,
            "page_bytes" => opts.page_bytes = value.parse().map_err(|_| bad(name, value))?,
            "container_bytes" => {
                opts.container_bytes = value.parse().map_err(|_| bad(name, value))?;
            }
            "ttl" if value == "true" && opts.ttl.is_none() => {
                opts.ttl = Some(std::time::Duration::from_secs(100 * 365 * 86_400));
            }
            "ttl" if value == "false" => opts.ttl = None,
            // The design's knobs are the caller's when it names the same design.
            crate::options::DESIGN if opts.design.name() != value => {
                opts.design = value.parse().map_err(|_| bad(name, value))?;
            }
            _ => {}
        }
    }
    // The container must hold four memtables: a smaller write buffer if need be (it only sizes
    // the placeholder structures of a read-only handle).
    opts.write_buffer_bytes = opts
        .write_buffer_bytes
        .min(usize::try_from(opts.container_bytes / 4).unwrap_or(usize::MAX));
    Ok(())
}

pub(super) fn check_fixed_options(opts: &Options, vs: &VersionSet) -> Result<()> {
    for (name, given) in opts.fixed_options() {
        let stored = vs
            .fixed_options()
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.clone())
            // Databases created before the TTL option existed have no TTL, and those created
            // before designs were selectable are MatrixKV's.
            .or_else(|| (name == "ttl").then(|| "false".to_owned()))
            .or_else(|| (name == crate::options::DESIGN).then(|| "matrixkv".to_owned()));
        if let Some(stored) = stored
            && stored != given
        {
            let option: &'static str = match name.as_str() {
                "num_levels" => "num_levels",
                "l0_layout" => "l0_layout",
                "page_bytes" => "page_bytes",
                "container_bytes" => "container_bytes",
                "ttl" => "ttl",
                crate::options::DESIGN => "design",
                _ => "fixed option",
            };
            return Err(Error::OptionMismatch {
                option,
                stored,
                given,
            });
        }
    }
    Ok(())
}
