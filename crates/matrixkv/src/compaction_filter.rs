//! Compaction filters (RocksDB's `CompactionFilter`) and time-to-live on top of them.
//!
//! A [`CompactionFilter`] sees the newest version of each key that compaction rewrites (values
//! only: not tombstones, not merge operands) and decides to keep it, remove it, or replace its
//! value. It only ever sees versions that no snapshot taken before the compaction started can
//! read, so it never changes what such a snapshot sees (a snapshot taken later may see its
//! result, as in RocksDB). A removed version becomes a tombstone of the same sequence number
//! (dropped at the last level), so older versions never reappear.
//!
//! `Options::ttl` builds time-to-live on the same hook: every value is stored with its write
//! time (8 bytes appended), reads hide values older than the TTL at once, and compaction
//! removes them (a separated value's blob record becomes garbage that blob GC reclaims).
//!
//! A filter that panics keeps the entry (logged, counted in `Stats::filter_failures`): a
//! misbehaving callback never loses data.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

/// What a [`CompactionFilter`] decides for one value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Keep the value as it is.
    Keep,
    /// Remove the key (as if deleted at the value's sequence number).
    Remove,
    /// Keep the key with this value instead.
    ChangeValue(Vec<u8>),
}

/// Drops or rewrites values while compaction rewrites them. Called from the compaction
/// threads, concurrently; must be deterministic enough that applying it at any compaction is
/// acceptable (it may see a key several times, or never, depending on compaction timing).
///
/// ```
/// use matrixkv::{CompactionFilter, Decision};
///
/// /// Drops every key under `tmp/`.
/// struct DropTemporary;
///
/// impl CompactionFilter for DropTemporary {
///     fn name(&self) -> &str {
///         "drop-tmp"
///     }
///     fn filter(&self, _level: usize, key: &[u8], _value: &[u8]) -> Decision {
///         if key.starts_with(b"tmp/") { Decision::Remove } else { Decision::Keep }
///     }
/// }
/// # fn main() -> matrixkv::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// let mut opts = matrixkv::Options::new(dir.path());
/// # opts.container_bytes = 8 << 20;
/// # opts.write_buffer_bytes = 2 << 20;
/// opts.compaction_filter = Some(std::sync::Arc::new(DropTemporary));
/// let db = matrixkv::Db::open(opts)?;
/// db.put("tmp/scratch", "x")?;
/// db.put("kept", "y")?;
/// db.compact_range(None, None)?;
/// assert_eq!(db.get("tmp/scratch")?, None);
/// assert_eq!(db.get("kept")?.as_deref(), Some(&b"y"[..]));
/// # Ok(()) }
/// ```
pub trait CompactionFilter: Send + Sync {
    /// A name for logs.
    fn name(&self) -> &str;

    /// The decision for `key`'s value `value` (without its TTL write time), met by a
    /// compaction whose output goes to `level`.
    fn filter(&self, level: usize, key: &[u8], value: &[u8]) -> Decision;
}

impl std::fmt::Debug for dyn CompactionFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CompactionFilter({})", self.name())
    }
}

/// Calls `f.filter`; a panic keeps the value (`None`).
pub(crate) fn call(
    f: &Arc<dyn CompactionFilter>,
    level: usize,
    key: &[u8],
    value: &[u8],
) -> Option<Decision> {
    match catch_unwind(AssertUnwindSafe(|| f.filter(level, key, value))) {
        Ok(d) => Some(d),
        Err(_) => {
            log::warn!(
                "matrixkv: compaction filter {} panicked; the entry is kept",
                f.name()
            );
            None
        }
    }
}

/// Bytes of the write time appended to every value of a database with a TTL.
pub(crate) const WRITE_TIME_LEN: usize = 8;

/// The wall clock every TTL check reads: the write time stamped on a value of a database or
/// keyspace with a TTL, the expiry check of reads, and the one of compaction
/// ([`crate::Options::clock`]). Tests and stress harnesses substitute a clock they advance
/// without sleeping. A clock that goes backwards makes expired values visible again until
/// compaction removes them; it never loses a value that has not expired.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Milliseconds since the Unix epoch.
    fn now_millis(&self) -> u64;
}

/// The operating system's wall clock (`SystemTime`), the default [`Clock`].
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_millis(&self) -> u64 {
        now_millis()
    }
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub(crate) fn now_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// `value` with its write time `now` appended (u64 little-endian milliseconds since the Unix
/// epoch).
pub(crate) fn stamp(value: &[u8], now: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(value.len() + WRITE_TIME_LEN);
    v.extend_from_slice(value);
    v.extend_from_slice(&now.to_le_bytes());
    v
}

/// Splits a stored value of a TTL database into the user's value and its write time; `None`
/// if it is too short to hold one (damage: readers report it).
pub(crate) fn split(stored: &[u8]) -> Option<(&[u8], u64)> {
    let at = stored.len().checked_sub(WRITE_TIME_LEN)?;
    let (value, time) = stored.split_at(at);
    Some((value, u64::from_le_bytes(time.try_into().ok()?)))
}

/// How reads and compactions apply a TTL: values written `ttl_ms` or more before `now` (both
/// in milliseconds) are expired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TtlCheck {
    pub ttl_ms: u64,
    pub now: u64,
}

impl TtlCheck {
    /// The TTL check of a database with `ttl`, as of `clock`'s now.
    pub(crate) fn of(ttl: Option<std::time::Duration>, clock: &dyn Clock) -> Option<TtlCheck> {
        ttl.map(|t| TtlCheck::at(t, clock.now_millis()))
    }

    /// The TTL check of `ttl` as of `now` (milliseconds since the epoch).
    pub(crate) fn at(ttl: std::time::Duration, now: u64) -> TtlCheck {
        TtlCheck {
            ttl_ms: u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1),
            now,
        }
    }

    /// The user's value of `stored`, or `None` if it expired. An error for a value too short
    /// to hold a write time.
    pub(crate) fn visible<'a>(
        &self,
        key: &[u8],
        stored: &'a [u8],
    ) -> crate::Result<Option<&'a [u8]>> {
        let (value, written) = split(stored).ok_or_else(|| {
            crate::Error::invalid(format!(
                "the value of key {} is too short to hold its TTL write time: the database \
                 was written without a TTL",
                crate::error::render_key(key)
            ))
        })?;
        Ok((!self.expired(written)).then_some(value))
    }

    /// True for a value written at `written`.
    pub(crate) fn expired(&self, written: u64) -> bool {
        written.saturating_add(self.ttl_ms) <= self.now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamped_value_splits_back_and_expires_after_the_ttl() {
        let stored = stamp(b"hello", 1000);
        assert_eq!(split(&stored), Some((&b"hello"[..], 1000)));
        let live = TtlCheck {
            ttl_ms: 10,
            now: 1009,
        };
        assert_eq!(live.visible(b"k", &stored).unwrap(), Some(&b"hello"[..]));
        let dead = TtlCheck {
            ttl_ms: 10,
            now: 1010,
        };
        assert_eq!(dead.visible(b"k", &stored).unwrap(), None);
        assert!(live.visible(b"k", b"short").is_err());
        assert_eq!(split(b""), None);
    }

    struct Panics;
    impl CompactionFilter for Panics {
        fn name(&self) -> &str {
            "panics"
        }
        fn filter(&self, _level: usize, _key: &[u8], _value: &[u8]) -> Decision {
            panic!("boom")
        }
    }

    #[test]
    fn a_panicking_filter_keeps_the_entry() {
        let f: Arc<dyn CompactionFilter> = Arc::new(Panics);
        assert_eq!(call(&f, 1, b"k", b"v"), None);
    }
}
