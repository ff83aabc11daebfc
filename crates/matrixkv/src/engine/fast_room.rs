//! The fast tier's room: how many bytes a database of some options keeps there, and the check
//! that refuses to create a database on a fast tier too small for it.
//!
//! The fast tier is usually a tmpfs (`/dev/shm`), whose size a container caps (Docker gives
//! 64 MiB by default). Without the check the open fails deep inside, mapping the matrix
//! container, with an `ENOSPC` that names a temporary file and none of the options that decide
//! its size. With it, the open refuses before writing anything, naming the directory, the
//! bytes needed and free, and the options to change.

use crate::error::{Error, Result};
use crate::options::{L0Layout, Options, Tiers};

use super::wal_recycle::wal_segment_bytes;

impl Options {
    /// Bytes of fast-tier space that creating a database with these options takes at once: the
    /// matrix container (`container_bytes`, with [`L0Layout::Matrix`]), the first WAL segment
    /// (`write_buffer_bytes` + ¼ + 1 MiB) and the global index of the SLM-DB and LightKV
    /// designs (`index_bytes`). [`crate::Db::open`] refuses to create a database on a fast
    /// tier with less room than this.
    pub fn fast_tier_bytes_at_open(&self) -> u64 {
        self.fast_tier_fixed_bytes()
            .saturating_add(wal_segment_bytes(self.write_buffer_bytes, 0) as u64)
    }

    /// Bytes of fast-tier space a database with these options holds while it takes writes
    /// (an estimate for sizing the tier): [`Options::fast_tier_bytes_at_open`] with a WAL
    /// segment for each memtable (`max_write_buffers`), each free segment kept for recycling
    /// (`wal_recycle_segments`) and each obsolete one retained (`wal_retention_segments`).
    pub fn fast_tier_bytes(&self) -> u64 {
        let segments = self
            .max_write_buffers
            .max(1)
            .saturating_add(self.wal_recycle_segments)
            .saturating_add(self.wal_retention_segments) as u64;
        let segment = wal_segment_bytes(self.write_buffer_bytes, 0) as u64;
        self.fast_tier_fixed_bytes()
            .saturating_add(segments.saturating_mul(segment))
    }

    /// The container and the global index: the regions whose size does not change.
    fn fast_tier_fixed_bytes(&self) -> u64 {
        let container = match self.l0_layout {
            L0Layout::Matrix => self.container_bytes,
            L0Layout::Tables => 0,
        };
        let index = self.design.index_bytes().unwrap_or(0);
        container.saturating_add(index)
    }
}

/// Refuses to create a database whose first regions do not fit in the fast tier's free space
/// (when the tier can tell, [`crate::tier::FastTier::free_bytes`]). Called by the open of a
/// new database before anything is written on either tier. Only logs a warning when the regions
/// fit but the steady need ([`Options::fast_tier_bytes`]) does not: writes will then meet
/// `Error::NoSpace` once the memtables fill.
pub(super) fn check_room_for_new_database(opts: &Options, tiers: &Tiers) -> Result<()> {
    let Some(free) = tiers.fast.free_bytes()? else {
        return Ok(());
    };
    let dir = tiers.fast.dir();
    let needed = opts.fast_tier_bytes_at_open();
    let mib = |b: u64| b as f64 / f64::from(1u32 << 20);
    if needed > free {
        let container = match opts.l0_layout {
            L0Layout::Matrix => format!(
                "the matrix container (Options::container_bytes = {}) and ",
                opts.container_bytes
            ),
            L0Layout::Tables => String::new(),
        };
        return Err(Error::invalid(format!(
            "the fast tier {} has {free} bytes free ({:.1} MiB), but creating this database \
             needs {needed} bytes ({:.1} MiB) there: {container}a WAL segment \
             (Options::write_buffer_bytes = {} plus a quarter and 1 MiB){}. Lower those options, \
             free space in {}, or set Options::fast_dir to a tier with more room",
            dir.display(),
            mib(free),
            mib(needed),
            opts.write_buffer_bytes,
            match opts.design.index_bytes() {
                Some(_) => " and the global index (index_bytes)",
                None => "",
            },
            dir.display(),
        )));
    }
    let steady = opts.fast_tier_bytes();
    if steady > free {
        log::warn!(
            "matrixkv: the fast tier {} has {:.1} MiB free; this database needs {:.1} MiB there \
             once its memtables fill (Options::fast_tier_bytes): writes will then fail with \
             NoSpace",
            dir.display(),
            mib(free),
            mib(steady)
        );
    }
    Ok(())
}

/// The error of an open of an existing database whose fast tier filled while the open made
/// its new regions (a WAL segment of `needed` bytes, or a persistent memtable): a sentence that
/// names the directory, the bytes needed and free, and what to change, instead of the device's
/// `ENOSPC`. Other errors pass unchanged. Nothing the open did is lost: the database opens
/// once there is room.
pub(super) fn explain_full_fast_tier_at_open(
    tiers: &Tiers,
    what: &str,
    needed: u64,
    e: Error,
) -> Error {
    // The regions an open makes are all on the fast tier.
    if !e.is_no_space() {
        return e;
    }
    let free = match tiers.fast.free_bytes() {
        Ok(Some(free)) => format!("{free} bytes free"),
        _ => "not enough room".to_owned(),
    };
    let dir = tiers.fast.dir();
    Error::invalid(format!(
        "the fast tier {} is full: opening this database needs {needed} more bytes there for \
         {what} ({free}; the database's existing regions are intact). Free space in {}, \
         lower Options::write_buffer_bytes, or move the fast tier's files to a directory with \
         more room and set Options::fast_dir ({e})",
        dir.display(),
        dir.display(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_container_and_one_segment_are_needed_at_open_and_a_segment_per_memtable_later() {
        let mut o = Options::new("/x");
        o.container_bytes = 64 << 20;
        o.write_buffer_bytes = 16 << 20;
        let segment = (16 << 20) + (4 << 20) + (1 << 20);
        assert_eq!(o.fast_tier_bytes_at_open(), (64 << 20) + segment);
        // 2 memtables, 2 recycled segments, none retained.
        assert_eq!(o.fast_tier_bytes(), (64 << 20) + 4 * segment);
        o.l0_layout = L0Layout::Tables;
        assert_eq!(o.fast_tier_bytes_at_open(), segment);
    }
}
