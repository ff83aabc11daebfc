//! The read-only open (`Db::open_read_only`, docs/decisions/0019-read-only-open.md): the
//! steps of the read-write open that read, none of those that write.

use std::sync::Arc;

use super::super::DbInner;
use super::super::read_only::{BytesRegion, PrivateCopies};
use super::super::wal_recycle::FreeRegions;
use super::build::Recovered;
use super::{Listing, checks};
use crate::error::{Error, Result};
use crate::layout::{self, FileNum};
use crate::lock_order::{Mutex, Rank};
use crate::options::{Options, Tiers};
use crate::stats::Counters;
use crate::tier::FileSystem;
use crate::version::manifest::{self, ManifestWriter};
use crate::version::set::VersionSet;
use crate::wal;

/// Opens the database read-only (`Db::open_read_only`, docs/decisions/0019-read-only-open.md):
/// the fixed options come from the manifest, nothing is written or created on either tier
/// (no lock, WAL segment, manifest, zeroed tail or deleted file), the WAL is replayed into
/// memtables in memory, and no background thread starts.
///
/// A writer may be running beside it: between reading the manifest and replaying the WAL, the
/// writer can flush a memtable, record that in the manifest and recycle the segment that held
/// it, and the open would then miss acknowledged writes or read a recycled file. So the open is
/// optimistic: it notes the manifest (CURRENT and the manifest's length) before and after, and
/// starts again when either moved. A writer deletes or recycles a file only after the manifest
/// edit that makes it obsolete, so an unchanged manifest means every file the open read was the
/// one the manifest meant.
pub(crate) fn open_read_only(opts: Options) -> Result<Arc<DbInner>> {
    const ATTEMPTS: u32 = 50;
    let tiers = opts
        .tiers
        .clone()
        .unwrap_or_else(|| Tiers::os(&opts.fast_dir));
    let fs = tiers.slow_fs.clone();
    let stamp = || manifest_stamp(fs.as_ref(), &opts.slow_dir);
    // Copies made by one attempt that later ones can keep (see `PrivateCopies`).
    let mut copies = PrivateCopies::default();
    for attempt in 0..ATTEMPTS {
        let before = stamp();
        let mut o = opts.clone();
        o.tiers = Some(tiers.clone());
        let result = open_once(&mut o, &mut copies);
        // Without a readable manifest the open's own error says what is wrong.
        let Ok(before) = before else { return result };
        if stamp().ok() == Some(before) {
            log::debug!(
                "matrixkv: read-only open after {} attempts, {} MiB copied from the fast tier",
                attempt + 1,
                copies.copied_bytes >> 20
            );
            return result;
        }
        log::debug!(
            "matrixkv: the manifest moved during read-only open attempt {attempt}; retrying"
        );
        drop(result);
        std::thread::sleep(std::time::Duration::from_millis(2 << attempt.min(6)));
    }
    Err(Error::invalid(format!(
        "{}: the manifest changed during each of {ATTEMPTS} read-only open attempts (a writer \
         is busy flushing and compacting); try again",
        opts.slow_dir.display()
    )))
}

/// What identifies the manifest's state: CURRENT's content and the named manifest's length.
fn manifest_stamp(fs: &dyn FileSystem, dir: &std::path::Path) -> Result<(FileNum, u64)> {
    let number = manifest::read_current(fs, dir)?;
    let len = fs
        .open(&layout::path(dir, &layout::manifest_name(number)))?
        .len();
    Ok((number, len))
}

/// One attempt of the read-only open, reading private copies of the fast tier (kept in
/// `copies` across attempts).
fn open_once(opts: &mut Options, copies: &mut PrivateCopies) -> Result<Arc<DbInner>> {
    let tiers = super::take_tiers(opts);
    let slow_dir = opts.slow_dir.clone();
    let fast_dir = tiers.fast.dir().to_owned();
    if !super::database_exists(&tiers, &slow_dir)? {
        return Err(Error::invalid(format!(
            "no database at {} (a read-only open creates nothing)",
            slow_dir.display()
        )));
    }
    let (mut versions, dropped) = super::read_manifest(opts, &tiers, &slow_dir)?;
    checks::adopt_fixed_options(opts, &versions)?;
    opts.validate()?;
    super::check_recovered(opts, &tiers, &versions, &slow_dir, &fast_dir)?;
    let listing = Listing::read(&tiers, &slow_dir, &fast_dir)?;
    listing.check_present(opts, &slow_dir, &fast_dir, &versions, dropped.as_ref())?;
    listing.reserve_file_numbers(&mut versions);
    let regions = listing.regions;
    let free_wal_regions = Mutex::new(Rank::LeafFreeWalRegions, FreeRegions::new(0));
    let (replayed, registry) = super::replay_memtables(
        opts,
        &tiers,
        &fast_dir,
        &regions,
        &versions,
        Some(&mut *copies),
    )?;
    let max_seq = replayed.max_seq;
    super::adopt_last_sequence(&mut versions, max_seq);
    let levels = super::open_levels(opts, &tiers, &versions, &regions, true, Some(copies))?;
    let counters = Counters::default();
    let (wal_number, wal_writer, manifest_writer) =
        placeholders(&mut versions, &fast_dir, &slow_dir)?;
    Ok(DbInner::build(
        opts.clone(),
        tiers,
        versions,
        Recovered {
            wal: wal_writer,
            wal_number,
            imm: replayed.imm,
            retained: std::collections::VecDeque::new(),
            regions: levels.regions,
            pool: levels.pool,
            free_wal_regions,
            counters,
            registry,
            read_only: true,
            replayed_values: replayed.values,
        },
        manifest_writer,
        max_seq,
        Vec::new(),
    ))
}

/// Placeholders: a WAL in DRAM that no write reaches (the read-only handle refuses writes
/// first) and a manifest writer without a file.
fn placeholders(
    versions: &mut VersionSet,
    fast_dir: &std::path::Path,
    slow_dir: &std::path::Path,
) -> Result<(FileNum, wal::Writer, ManifestWriter)> {
    let number = versions.new_file_number();
    let region: Arc<dyn crate::tier::Region> = Arc::new(BytesRegion::new(64 << 10));
    let wal = wal::Writer::create(region, number, fast_dir.join("<read-only>"))?;
    Ok((number, wal, ManifestWriter::detached(slow_dir)))
}
