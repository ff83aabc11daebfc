//! The fast tier's structures besides the memtables that an open maps: the matrix
//! container, the global index (SLM-DB, LightKV) and the retained obsolete WAL segments.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;

use super::super::matrix::ContainerHandle;
use super::super::wal_recycle::{RetiredWal, SegmentRegion};
use crate::error::{ArtifactKind, CorruptionReason, CorruptionSite, Error, Result};
use crate::key::SeqNo;
use crate::layout::{self, FileKind, FileNum};
use crate::options::{Options, Tiers};
use crate::version::set::VersionSet;
use crate::wal;

/// The global index of the SLM-DB design (rolled back to the generation the manifest records
/// if it is one commit ahead) or of the LightKV design (rebuilt from the tables when its job
/// is not the manifest's); created with a new database (or one whose first open stopped
/// before it existed and that holds no table yet).
pub(super) fn open_global_index(
    opts: &Options,
    tiers: &Tiers,
    versions: &VersionSet,
    regions: &[String],
    read_only: bool,
) -> Result<Option<crate::index::global::GlobalIndex>> {
    use crate::engine::levels::Kind;
    use crate::index::global::{GlobalIndex, newest_keys, table_keys};
    let radix = match Kind::of(opts) {
        Kind::Selective => false,
        Kind::Partitioned => true,
        Kind::Matrix | Kind::L0Tables => return Ok(None),
    };
    let bytes = opts.design.index_bytes().unwrap_or(0);
    if read_only {
        return Err(Error::invalid(format!(
            "read-only handles of the {} design are not supported: open it read-write",
            opts.design
        )));
    }
    let present = regions.iter().any(|n| n == layout::INDEX);
    let v = versions.current();
    let generation = versions.index_generation();
    let missing = !present && (generation != 0 || v.num_files(0) != 0);
    if missing && !radix {
        return Err(Error::corruption(
            CorruptionSite::new(
                ArtifactKind::PersistentIndex,
                layout::path(tiers.fast.dir(), layout::INDEX),
                0,
            ),
            crate::error::CorruptionReason::Invalid("the global index is missing"),
        ));
    }
    let fast = tiers.fast.as_ref();
    if !radix {
        return GlobalIndex::open(fast, bytes, !present, generation, versions.db_id()).map(Some);
    }
    let mut ix = GlobalIndex::open_radix(
        Arc::clone(&tiers.fast),
        bytes,
        !present,
        generation,
        versions.db_id(),
    )?;
    if missing {
        log::warn!("the RH-tree index is missing: rebuilding it from the tables");
    }
    if ix.stale() || missing {
        // The index holds nothing the tables do not: each key's newest version among them.
        let mut all = Vec::new();
        for f in v.files(0) {
            let path = layout::path(&opts.slow_dir, &layout::table_name(f.number));
            let table = crate::sst::Table::open(tiers.slow_fs.open(&path)?, f.number.0, None)?;
            all.push(table_keys(&table, f.number)?);
        }
        ix.rebuild(&newest_keys(all), generation)?;
    }
    Ok(Some(ix))
}

/// The obsolete WAL segments (below `log_number`; `regions` is the fast tier's listing) that
/// stay retained after this open, oldest first: the newest `retention` of those holding
/// records, taken newest first as long as each one's records end right where the next newer
/// one's start (`next_start` for the newest: where the replayed segments or the new one
/// start), so that they form an unbroken history. Taking stops at the first that does not read
/// (a segment whose recycling a crash interrupted, zeroed; a damaged one) or leaves a gap (a
/// newer segment went while this one was pinned). Each is mapped, and its first record and
/// the header of every record are read. The others, and the empty ones, are left to
/// obsolete-file deletion. Failures are logged, not fatal: retained segments are never
/// replayed, recovery does not need them.
pub(super) fn retain_obsolete_wals(
    tiers: &Tiers,
    regions: &[String],
    log_number: FileNum,
    retention: usize,
    next_start: SeqNo,
) -> VecDeque<RetiredWal> {
    let mut obsolete: Vec<FileNum> = regions
        .iter()
        .filter_map(|n| match layout::parse(n) {
            Some(FileKind::Wal(num)) if num < log_number => Some(num),
            _ => None,
        })
        .collect();
    obsolete.sort();
    let mut kept = VecDeque::new();
    let mut next_start = next_start;
    for number in obsolete.into_iter().rev() {
        if kept.len() == retention {
            break;
        }
        let name = layout::wal_name(number);
        let path = layout::path(tiers.fast.dir(), &name);
        let read = tiers.fast.open_region(&name).and_then(|region| {
            let mut cursor = wal::BatchCursor::open(Arc::clone(&region), path.clone(), number)?;
            let Some(first) = cursor.next_batch()? else {
                return Ok(None);
            };
            let last = cursor.last_batch()?.unwrap_or_else(|| first.clone());
            let last_seq = last.sequence().0 + (last.len() as u64).saturating_sub(1);
            // Zeros follow the end marker (docs/format/wal.md, invariant 3): recycling clears
            // only what was written.
            let used = usize::try_from(cursor.offset())
                .unwrap_or(usize::MAX)
                .saturating_add(wal::format::END_MARKER_LEN)
                .min(region.len());
            Ok(Some((
                SegmentRegion { region, used },
                first.sequence(),
                SeqNo(last_seq),
            )))
        });
        let (region, first_seq, last_seq) = match read {
            Ok(Some(r)) => r,
            // No record, no history: deleted (or recycled) like any obsolete segment.
            Ok(None) => continue,
            Err(e) => {
                log::warn!(
                    "matrixkv: not retaining obsolete WAL segment {} or older ones: {e}",
                    path.display()
                );
                break;
            }
        };
        if last_seq.next() != next_start {
            log::warn!(
                "matrixkv: not retaining obsolete WAL segment {} or older ones: its last \
                 sequence number {last_seq} is not right before the next segment's first \
                 {next_start}",
                path.display()
            );
            break;
        }
        next_start = first_seq;
        kept.push_front(RetiredWal {
            number,
            first_seq,
            empty: false,
            region: Some(region),
        });
    }
    kept
}

/// The container rows of a version: row number and live physical pages.
pub(super) type RowPages = Vec<(u64, Vec<u32>)>;

/// Creates (new database) or maps (existing one) the matrix container's page region.
pub(super) fn open_container(
    opts: &Options,
    tiers: &Tiers,
    fast_dir: &Path,
    exists: bool,
    private: Option<(&mut super::super::read_only::PrivateCopies, RowPages)>,
) -> Result<ContainerHandle> {
    let path = layout::path(fast_dir, layout::CONTAINER);
    let len = usize::try_from(opts.container_bytes)
        .map_err(|_| Error::invalid("container_bytes does not fit in memory addresses"))?;
    let region = if exists {
        let r = tiers.fast.open_region(layout::CONTAINER)?;
        if r.len() != len {
            return Err(Error::corruption(
                CorruptionSite::new(ArtifactKind::RowTable, &path, 0),
                CorruptionReason::Invalid("the container file's size differs from container_bytes"),
            ));
        }
        r
    } else {
        tiers.fast.create_region(layout::CONTAINER, len)?
    };
    let region = match private {
        Some((copies, rows)) => copies
            .container(region.as_ref(), opts.page_bytes, rows)
            .map_err(|e| Error::io(crate::error::IoOp::Read, &path, e))?,
        None => region,
    };
    Ok(ContainerHandle::new(region, opts.page_bytes, path))
}
