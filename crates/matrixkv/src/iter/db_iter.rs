//! [`DbIterator`]: the user-facing iterator. It turns a merged stream of internal entries into
//! user keys and values as of one snapshot, within optional bounds.
//!
//! The DB builds it over a [`crate::iter::merging::MergingIterator`] of its memtables,
//! container rows and levels, together with a *keepalive* holding the `Arc`s of everything the
//! stream reads. For each user key it yields the newest version whose sequence number is ≤ the
//! snapshot and hides user keys whose newest visible version is a tombstone. A newest visible
//! version that is a merge operand is combined with the key's older operands and its newest
//! base value (or none, below a tombstone) through the merge operator.
//!
//! Algorithm (LevelDB `db/db_iter.cc`): moving forward, the inner iterator sits on the entry
//! being yielded, and `key()`/`value()` read through to it. Moving backward, the inner
//! iterator sits just before every entry of the current user key, and the key and value are
//! copies collected while walking back over that key's versions from oldest to newest.
//! Switching direction re-establishes the other invariant. A merged key read forward is the
//! exception: combining it walked the inner iterator past (some of) its entries, so its key and
//! value are copies too (`merged`).
//!
//! Thread safety: owned by one thread at a time (`Send`); the DB may hand it to another thread.

use std::any::Any;
use std::cmp::Ordering;
use std::sync::Arc;

use crate::blob::reader::BlobFiles;
use crate::error::{Error, Result};
use crate::iter::BoxedIter;
use crate::key::{self, KIND_FOR_SEEK, SeqNo, ValueKind};
use crate::merge::{self, MergeOperator};
use crate::range_del::RangeDelView;

/// What turns stored entries into user values: the blob files separated values are read
/// from, and the merge operator that combines merge operands.
#[derive(Clone, Default)]
pub(crate) struct Resolvers {
    /// `None`: the stream has no blob indexes.
    pub blobs: Option<Arc<BlobFiles>>,
    /// `None`: a merge operand met is an error.
    pub merge: Option<Arc<dyn MergeOperator>>,
    /// A database with a TTL: values carry their write time; expired ones read as deleted.
    pub ttl: Option<crate::compaction_filter::TtlCheck>,
    /// The range tombstones of the sources: a version they cover reads as a tombstone.
    pub range_dels: RangeDelView,
    /// The keyspace prefix every key of the stream within the bounds starts with: keys are
    /// handed to the user, seek targets taken from the user and keys passed to the merge
    /// operator without it. Empty for a database without keyspace ids.
    pub prefix: Vec<u8>,
}

/// The newest base value found for a key while walking its versions oldest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Base {
    /// No value: the key had none, or a tombstone hides the older ones.
    Absent,
    /// A value, in `saved_value`.
    Value,
    /// A blob pointer, in `saved_value`.
    Pointer,
}

/// Which invariant the iterator currently keeps (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    /// The inner iterator is at the current entry.
    Forward,
    /// The inner iterator is before all entries of the current user key, which is held in
    /// `saved_key` / `saved_value`.
    Reverse,
}

/// A cursor over the user keys of the database as of one snapshot, within optional bounds.
///
/// Positioning: `seek_to_first`, `seek_to_last`, `seek` (first key ≥ target) and
/// `seek_for_prev` (last key ≤ target); then `next` / `prev`, freely mixed. Movement methods
/// return an error when storage fails; the iterator is then invalid. `key()` and `value()`
/// return the current entry while `valid()` is true (and empty slices otherwise).
///
/// Bounds: `lower_bound` is inclusive, `upper_bound` exclusive; the iterator never yields a
/// key outside them, and seeks outside them clamp to them.
///
/// It is also a std [`Iterator`] of owned `(key, value)` pairs that starts at the current
/// entry (or at the first entry if nothing was positioned yet) and moves forward. Because the
/// inherent [`DbIterator::next`] (the cursor move) takes precedence in method-call syntax, use
/// it through `for` loops, adapters (`.take(10)`, `.collect()`), or `Iterator::next(&mut it)`.
///
/// ```
/// # fn main() -> matrixkv::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = matrixkv::Db::open(matrixkv::Options::new(dir.path()))?;
/// # for i in 0..300 { db.put(format!("user:{i:03}"), b"x")?; }
/// let mut it = db.iter()?;
/// it.seek(b"user:100")?;
/// let mut n = 0;
/// while it.valid() && it.key() < b"user:200".as_slice() {
///     n += 1;
///     it.next()?;
/// }
/// assert_eq!(n, 100);
/// // Or as a std iterator of owned pairs, from the first key:
/// let all: Vec<(Vec<u8>, Vec<u8>)> = db.iter()?.collect::<matrixkv::Result<_>>()?;
/// assert_eq!(all.len(), 300);
/// # Ok(()) }
/// ```
pub struct DbIterator {
    inner: BoxedIter,
    snapshot: SeqNo,
    lower_bound: Option<Vec<u8>>,
    upper_bound: Option<Vec<u8>>,
    direction: Direction,
    valid: bool,
    /// Reverse: the current user key. Forward: scratch (the key being skipped).
    saved_key: Vec<u8>,
    /// Reverse: the current value.
    saved_value: Vec<u8>,
    /// Some seek has been called (for the `Iterator` impl, which seeks to first otherwise).
    positioned: bool,
    /// An error from advancing after the `Iterator` impl returned an entry, reported on the
    /// following call.
    deferred_error: Option<Error>,
    /// Where separated values are read from, and how merge operands combine.
    resolvers: Resolvers,
    /// Forward: the current value when it is not the inner entry's bytes (read from a blob
    /// file, or merged).
    owned_value: Option<Vec<u8>>,
    /// Forward: the current key was merged; it is in `saved_key`, and the inner iterator is
    /// past the entries of it that the merge read.
    merged: bool,
    /// Forward: bytes at the end of the inner entry's value that are not the user's (the TTL
    /// write time).
    strip: usize,
    /// The memtables and version `inner` reads; only kept alive. Declared last, so it is
    /// dropped after `inner`.
    _keepalive: Box<dyn Any + Send + Sync>,
}

impl DbIterator {
    /// A user iterator over `inner` (a merged internal stream) as of `snapshot`, restricted to
    /// `[lower_bound, upper_bound)`. `keepalive` holds what `inner` reads from and is only
    /// stored. The iterator starts unpositioned.
    pub(crate) fn new(
        inner: BoxedIter,
        snapshot: SeqNo,
        lower_bound: Option<Vec<u8>>,
        upper_bound: Option<Vec<u8>>,
        resolvers: Resolvers,
        keepalive: Box<dyn Any + Send + Sync>,
    ) -> DbIterator {
        DbIterator {
            inner,
            snapshot,
            lower_bound,
            upper_bound,
            direction: Direction::Forward,
            valid: false,
            saved_key: Vec::new(),
            saved_value: Vec::new(),
            positioned: false,
            deferred_error: None,
            resolvers,
            owned_value: None,
            merged: false,
            strip: 0,
            _keepalive: keepalive,
        }
    }

    /// True when positioned at an entry.
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// The current user key (empty when not [`valid`](DbIterator::valid)).
    pub fn key(&self) -> &[u8] {
        if !self.valid {
            return &[];
        }
        let k = match self.direction {
            Direction::Forward if !self.merged => key::user_key(self.inner.key()),
            Direction::Forward | Direction::Reverse => &self.saved_key,
        };
        k.get(self.resolvers.prefix.len()..).unwrap_or_default()
    }

    /// `target` with the keyspace prefix in front.
    fn engine_target<'a>(&self, target: &'a [u8]) -> std::borrow::Cow<'a, [u8]> {
        if self.resolvers.prefix.is_empty() {
            std::borrow::Cow::Borrowed(target)
        } else {
            std::borrow::Cow::Owned([self.resolvers.prefix.as_slice(), target].concat())
        }
    }

    /// The current value (empty when not [`valid`](DbIterator::valid)).
    pub fn value(&self) -> &[u8] {
        if !self.valid {
            return &[];
        }
        match (self.direction, &self.owned_value) {
            (Direction::Forward, Some(v)) => v,
            (Direction::Forward, None) => {
                let v = self.inner.value();
                v.get(..v.len().saturating_sub(self.strip)).unwrap_or(v)
            }
            (Direction::Reverse, _) => &self.saved_value,
        }
    }

    /// Positions at the first key (the lower bound, if any).
    pub fn seek_to_first(&mut self) -> Result<()> {
        self.start_positioning(Direction::Forward);
        let moved = match self.lower_bound.clone() {
            Some(lower) => self.inner.seek(&key::seek_key(&lower, self.snapshot)),
            None => self.inner.seek_to_first(),
        };
        self.guard(moved)?;
        let found = self.find_next_user_entry(false);
        self.guard(found)
    }

    /// Positions at the last key (below the upper bound, if any).
    pub fn seek_to_last(&mut self) -> Result<()> {
        match self.upper_bound.clone() {
            Some(upper) => self.seek_for_prev_internal(&upper, true),
            None => {
                self.start_positioning(Direction::Reverse);
                let moved = self.inner.seek_to_last();
                self.guard(moved)?;
                let found = self.find_prev_user_entry();
                self.guard(found)
            }
        }
    }

    /// Positions at the first key ≥ `target` (at least the lower bound).
    pub fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.start_positioning(Direction::Forward);
        let target = self.engine_target(target).into_owned();
        let target = target.as_slice();
        let target = match &self.lower_bound {
            Some(lower) if target < lower.as_slice() => lower.as_slice(),
            _ => target,
        };
        let moved = self.inner.seek(&key::seek_key(target, self.snapshot));
        self.guard(moved)?;
        let found = self.find_next_user_entry(false);
        self.guard(found)
    }

    /// Positions at the last key ≤ `target` (below the upper bound).
    pub fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        let target = self.engine_target(target).into_owned();
        let target = target.as_slice();
        match &self.upper_bound {
            Some(upper) if target >= upper.as_slice() => {
                let upper = upper.clone();
                self.seek_for_prev_internal(&upper, true)
            }
            _ => self.seek_for_prev_internal(target, false),
        }
    }

    /// Moves to the next key. Does nothing when not positioned.
    #[expect(
        clippy::should_implement_trait,
        reason = "the cursor verb of LevelDB/RocksDB iterators; the Iterator impl is separate"
    )]
    pub fn next(&mut self) -> Result<()> {
        if !self.valid {
            return Ok(());
        }
        let moved = self.next_inner();
        self.guard(moved)
    }

    /// Moves to the previous key. Does nothing when not positioned.
    pub fn prev(&mut self) -> Result<()> {
        if !self.valid {
            return Ok(());
        }
        let moved = self.prev_inner();
        self.guard(moved)
    }

    /// Resets the state for a new seek.
    fn start_positioning(&mut self, direction: Direction) {
        self.positioned = true;
        self.deferred_error = None;
        self.direction = direction;
        self.valid = false;
        self.saved_key.clear();
        self.saved_value.clear();
        self.owned_value = None;
        self.merged = false;
    }

    /// Leaves the iterator invalid if `r` is an error, and passes `r` on.
    fn guard(&mut self, r: Result<()>) -> Result<()> {
        if r.is_err() {
            self.valid = false;
            self.saved_key.clear();
            self.saved_value.clear();
        }
        r
    }

    /// Positions at the last key ≤ `target` (`exclusive`: < `target`).
    fn seek_for_prev_internal(&mut self, target: &[u8], exclusive: bool) -> Result<()> {
        self.start_positioning(Direction::Reverse);
        // The last internal entry of `target` is its oldest version, (seq 0, Deletion); for an
        // exclusive target start before its newest possible version instead. Entries at or
        // beyond the upper bound are skipped while walking back in any case.
        let ikey = if exclusive {
            key::make_internal_key(target, SeqNo::MAX, KIND_FOR_SEEK)
        } else {
            key::make_internal_key(target, SeqNo::ZERO, ValueKind::Deletion)
        };
        let moved = self.inner.seek_for_prev(&ikey);
        self.guard(moved)?;
        let found = self.find_prev_user_entry();
        self.guard(found)
    }

    fn next_inner(&mut self) -> Result<()> {
        if self.direction == Direction::Reverse {
            self.direction = Direction::Forward;
            // The inner iterator is just before the entries of the current key (or exhausted
            // because they start the stream): step into them; `saved_key` names the key to
            // skip past.
            if self.inner.valid() {
                self.inner.next()?;
            } else {
                self.inner.seek_to_first()?;
            }
            self.saved_value.clear();
        } else if self.merged {
            // The merge left the inner iterator past the entries it read; the key's older
            // entries, if any remain, are skipped as ≤ `saved_key`.
            self.merged = false;
        } else {
            // Skip the rest of the current key's versions below.
            self.saved_key.clear();
            self.saved_key
                .extend_from_slice(key::user_key(self.inner.key()));
            self.inner.next()?;
        }
        self.find_next_user_entry(true)
    }

    fn prev_inner(&mut self) -> Result<()> {
        if self.direction == Direction::Forward {
            // Walk back to before every entry of the current key; the inner iterator is at
            // one of them (the newest visible one), or past some of them after a merge.
            if self.merged {
                self.merged = false;
                self.inner.seek(&key::make_internal_key(
                    &self.saved_key,
                    SeqNo::MAX,
                    KIND_FOR_SEEK,
                ))?;
            } else {
                self.saved_key.clear();
                self.saved_key
                    .extend_from_slice(key::user_key(self.inner.key()));
            }
            loop {
                self.inner.prev()?;
                if !self.inner.valid() {
                    self.valid = false;
                    self.saved_key.clear();
                    self.saved_value.clear();
                    return Ok(());
                }
                if key::user_key(self.inner.key()) < self.saved_key.as_slice() {
                    break;
                }
            }
            self.direction = Direction::Reverse;
        }
        self.find_prev_user_entry()
    }

    /// Forward: from the inner position, finds the first entry that is the newest visible
    /// version of a user key whose newest visible version is a value. With `skipping`,
    /// user keys ≤ `saved_key` are passed over.
    fn find_next_user_entry(&mut self, mut skipping: bool) -> Result<()> {
        debug_assert_eq!(self.direction, Direction::Forward);
        self.owned_value = None;
        self.merged = false;
        self.strip = 0;
        while self.inner.valid() {
            let parsed =
                parse_visible(self.inner.key(), &self.resolvers.range_dels, self.snapshot)?;
            if let Some(upper) = &self.upper_bound
                && parsed.user_key >= upper.as_slice()
            {
                break;
            }
            if parsed.seq <= self.snapshot {
                match parsed.kind {
                    ValueKind::Deletion | ValueKind::RangeDeletion => {
                        // Hide this key's older versions.
                        self.saved_key.clear();
                        self.saved_key.extend_from_slice(parsed.user_key);
                        skipping = true;
                    }
                    ValueKind::Value | ValueKind::BlobIndex | ValueKind::Merge => {
                        let shadowed = skipping
                            && parsed.user_key.cmp(self.saved_key.as_slice()) != Ordering::Greater;
                        if !shadowed {
                            if parsed.kind == ValueKind::Merge {
                                let user = parsed.user_key.to_vec();
                                self.merge_forward(user)?;
                                self.valid = true;
                                return Ok(());
                            } else if parsed.kind == ValueKind::BlobIndex {
                                let v = self.resolve(parsed.user_key, self.inner.value())?;
                                self.owned_value = Some(v);
                            } else {
                                // Read the value now: a source that reads values lazily
                                // reports a damaged one here, from the movement, instead of
                                // handing out an empty value.
                                let _ = self.inner.value();
                                self.inner.value_status()?;
                            }
                            if let Some(ttl) = self.resolvers.ttl {
                                let stored = match &self.owned_value {
                                    Some(v) => v.as_slice(),
                                    None => self.inner.value(),
                                };
                                let stored_len = stored.len();
                                match ttl.visible(parsed.user_key, stored)?.map(<[u8]>::len) {
                                    Some(len) => match self.owned_value.as_mut() {
                                        Some(v) => v.truncate(len),
                                        None => self.strip = stored_len - len,
                                    },
                                    None => {
                                        // Expired: hides the key's older versions like a
                                        // tombstone.
                                        self.owned_value = None;
                                        self.saved_key.clear();
                                        self.saved_key.extend_from_slice(parsed.user_key);
                                        skipping = true;
                                        self.inner.next()?;
                                        continue;
                                    }
                                }
                            }
                            self.valid = true;
                            self.saved_key.clear();
                            return Ok(());
                        }
                    }
                }
            }
            self.inner.next()?;
        }
        self.valid = false;
        self.saved_key.clear();
        Ok(())
    }

    /// Forward: the inner iterator is at the newest visible version of `user`, a merge
    /// operand. Reads the older operands and the newest base value after it (every entry of
    /// `user` after a visible one is older, hence visible too), combines them, and leaves the
    /// key in `saved_key` and the value in `owned_value`.
    fn merge_forward(&mut self, user: Vec<u8>) -> Result<()> {
        let mut operands: Vec<Vec<u8>> = vec![self.inner.value().to_vec()];
        self.inner.value_status()?;
        let mut base: Option<Vec<u8>> = None;
        loop {
            self.inner.next()?;
            if !self.inner.valid() {
                break;
            }
            let parsed =
                parse_visible(self.inner.key(), &self.resolvers.range_dels, self.snapshot)?;
            if parsed.user_key != user.as_slice() {
                break;
            }
            match parsed.kind {
                ValueKind::Merge => {
                    operands.push(self.inner.value().to_vec());
                    self.inner.value_status()?;
                }
                ValueKind::Value => {
                    base = Some(self.inner.value().to_vec());
                    self.inner.value_status()?;
                    break;
                }
                ValueKind::BlobIndex => {
                    base = Some(self.resolve(&user, self.inner.value())?);
                    break;
                }
                ValueKind::Deletion | ValueKind::RangeDeletion => break,
            }
        }
        // Collected newest first; the operator takes them oldest first.
        let ops: Vec<&[u8]> = operands.iter().rev().map(Vec::as_slice).collect();
        let value = merge::full_merge(
            self.resolvers.merge.as_ref(),
            user.get(self.resolvers.prefix.len()..).unwrap_or_default(),
            base.as_deref(),
            &ops,
        )?;
        self.saved_key = user;
        self.owned_value = Some(value);
        self.merged = true;
        Ok(())
    }

    /// Reverse: walks back from the inner position collecting the versions of the previous
    /// user key (oldest first), until its newest visible version is known not to be a tombstone
    /// (the walk reached an older user key) or the stream or the lower bound ends; then
    /// resolves a blob pointer and combines merge operands.
    fn find_prev_user_entry(&mut self) -> Result<()> {
        debug_assert_eq!(self.direction, Direction::Reverse);
        self.owned_value = None;
        self.merged = false;
        // What the versions of `saved_key` visited so far make of it: the newest base, and
        // the merge operands newer than it (oldest first).
        let mut base = Base::Absent;
        let mut operands: Vec<Vec<u8>> = Vec::new();
        let mut have_key = false;
        while self.inner.valid() {
            let parsed =
                parse_visible(self.inner.key(), &self.resolvers.range_dels, self.snapshot)?;
            if let Some(lower) = &self.lower_bound
                && parsed.user_key < lower.as_slice()
            {
                break;
            }
            let above_upper = self
                .upper_bound
                .as_ref()
                .is_some_and(|upper| parsed.user_key >= upper.as_slice());
            if parsed.seq <= self.snapshot && !above_upper {
                if !have_key || parsed.user_key != self.saved_key.as_slice() {
                    if have_key && (base != Base::Absent || !operands.is_empty()) {
                        // The newest visible version of `saved_key` is not a tombstone: done.
                        break;
                    }
                    // The first key met, or the previous one is deleted: start over.
                    self.saved_key.clear();
                    self.saved_key.extend_from_slice(parsed.user_key);
                    have_key = true;
                    base = Base::Absent;
                    operands.clear();
                }
                match parsed.kind {
                    ValueKind::Deletion | ValueKind::RangeDeletion => {
                        base = Base::Absent;
                        operands.clear();
                    }
                    ValueKind::Value | ValueKind::BlobIndex => {
                        base = if parsed.kind == ValueKind::Value {
                            Base::Value
                        } else {
                            Base::Pointer
                        };
                        operands.clear();
                        self.saved_value.clear();
                        self.saved_value.extend_from_slice(self.inner.value());
                        self.inner.value_status()?;
                        if let Some(ttl) = self.resolvers.ttl {
                            // Resolved and checked now: an expired newest version hides the
                            // key like a tombstone.
                            if base == Base::Pointer {
                                self.saved_value =
                                    self.resolve(parsed.user_key, &self.saved_value)?;
                                base = Base::Value;
                            }
                            match ttl.visible(parsed.user_key, &self.saved_value)? {
                                Some(v) => {
                                    let len = v.len();
                                    self.saved_value.truncate(len);
                                }
                                None => base = Base::Absent,
                            }
                        }
                    }
                    ValueKind::Merge => {
                        operands.push(self.inner.value().to_vec());
                        self.inner.value_status()?;
                    }
                }
            }
            self.inner.prev()?;
        }
        if base == Base::Absent && operands.is_empty() {
            // Nothing visible before: the iterator is exhausted.
            self.valid = false;
            self.saved_key.clear();
            self.saved_value.clear();
            self.direction = Direction::Forward;
            return Ok(());
        }
        if base == Base::Pointer {
            // `saved_value` holds the pointer of the newest visible base.
            self.saved_value = self.resolve(&self.saved_key, &self.saved_value)?;
        }
        if !operands.is_empty() {
            let existing = (base != Base::Absent).then_some(self.saved_value.as_slice());
            let ops: Vec<&[u8]> = operands.iter().map(Vec::as_slice).collect();
            self.saved_value = merge::full_merge(
                self.resolvers.merge.as_ref(),
                self.saved_key
                    .get(self.resolvers.prefix.len()..)
                    .unwrap_or_default(),
                existing,
                &ops,
            )?;
        }
        self.valid = true;
        Ok(())
    }

    /// Reads the separated value a blob pointer of `user_key` leads to.
    fn resolve(&self, user_key: &[u8], pointer: &[u8]) -> Result<Vec<u8>> {
        match &self.resolvers.blobs {
            Some(b) => b.read_pointer(user_key, pointer),
            None => Err(Error::invalid(
                "iterator met a blob index but has no blob files to read it from",
            )),
        }
    }
}

/// Decodes an internal key from the inner stream. Sources validate what they read from storage
/// and report damage with its location, so a malformed key here is a broken invariant; it is
/// reported as an error rather than skipped.
fn parse(ikey: &[u8]) -> Result<key::ParsedKey<'_>> {
    key::parse_internal_key(ikey).map_err(|reason| {
        log::error!("internal iterator yielded a malformed internal key: {reason}");
        Error::invalid(format!(
            "internal iterator yielded a malformed internal key ({reason})"
        ))
    })
}

/// [`parse`], with a version that a range tombstone visible at `snapshot` covers turned into
/// a tombstone ([`ValueKind::Deletion`]): it then hides itself and the key's older versions,
/// and ends a merge chain, exactly as a point tombstone at that place would. Free when there
/// is no range tombstone.
fn parse_visible<'k>(
    ikey: &'k [u8],
    range_dels: &RangeDelView,
    snapshot: SeqNo,
) -> Result<key::ParsedKey<'k>> {
    let mut parsed = parse(ikey)?;
    if parsed.kind == ValueKind::RangeDeletion {
        // Never stored in a table, row or memtable skiplist; read as a tombstone if it were.
        debug_assert!(false, "a range deletion in the merged stream");
        parsed.kind = ValueKind::Deletion;
    }
    if !range_dels.is_empty()
        && parsed.seq <= snapshot
        && range_dels.covers(parsed.user_key, parsed.seq, snapshot)
    {
        parsed.kind = ValueKind::Deletion;
    }
    Ok(parsed)
}

impl Iterator for DbIterator {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    /// Yields the current entry and moves forward. If no seek was called yet, it first seeks
    /// to the first entry. An error ends the iteration after it is yielded.
    fn next(&mut self) -> Option<Self::Item> {
        if let Some(e) = self.deferred_error.take() {
            return Some(Err(e));
        }
        if !self.positioned
            && let Err(e) = self.seek_to_first()
        {
            return Some(Err(e));
        }
        if !self.valid {
            return None;
        }
        let item = (self.key().to_vec(), self.value().to_vec());
        if let Err(e) = DbIterator::next(self) {
            self.deferred_error = Some(e);
        }
        Some(Ok(item))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use super::*;
    use crate::iter::merging::MergingIterator;
    use crate::iter::vec_iter::VecIter;
    use crate::iter::vec_iter::testutil::{FailAfter, test_seed};
    use crate::key::make_internal_key;
    use crate::memtable::MemTable;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// One write of the model history.
    #[derive(Debug, Clone)]
    struct Write {
        user: Vec<u8>,
        seq: u64,
        kind: ValueKind,
        value: Vec<u8>,
    }

    fn ikey_entry(w: &Write) -> (Vec<u8>, Vec<u8>) {
        (
            make_internal_key(&w.user, SeqNo(w.seq), w.kind),
            w.value.clone(),
        )
    }

    /// The user-visible state at `snapshot` within bounds: the writes ≤ snapshot applied in
    /// sequence order (merge operands appended with ",", as `AppendOperator::new(",")` does),
    /// tombstones removed.
    fn visible(
        writes: &[Write],
        snapshot: u64,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
    ) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut ordered: Vec<&Write> = writes.iter().filter(|w| w.seq <= snapshot).collect();
        ordered.sort_by_key(|w| w.seq);
        let mut state: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for w in ordered {
            match w.kind {
                ValueKind::Value | ValueKind::BlobIndex => {
                    state.insert(w.user.clone(), w.value.clone());
                }
                ValueKind::Deletion | ValueKind::RangeDeletion => {
                    state.remove(&w.user);
                }
                ValueKind::Merge => {
                    let v = state.entry(w.user.clone()).or_default();
                    let fresh = v.is_empty() && !writes_before_have_value(writes, w);
                    if !fresh {
                        v.push(b',');
                    }
                    v.extend_from_slice(&w.value);
                }
            }
        }
        state
            .into_iter()
            .filter(|(k, _)| lower.is_none_or(|l| k.as_slice() >= l))
            .filter(|(k, _)| upper.is_none_or(|u| k.as_slice() < u))
            .collect()
    }

    /// True when `w.user` has a value just before `w` (its newest older write is a value or a
    /// merge operand): distinguishes an empty existing value from none.
    fn writes_before_have_value(writes: &[Write], w: &Write) -> bool {
        writes
            .iter()
            .filter(|o| o.user == w.user && o.seq < w.seq)
            .max_by_key(|o| o.seq)
            .is_some_and(|o| o.kind != ValueKind::Deletion)
    }

    fn random_user_key(rng: &mut StdRng) -> Vec<u8> {
        // Short keys from a small alphabet: many versions per key, prefixes of each other.
        let len = rng.gen_range(0..4);
        (0..len).map(|_| b"abcd"[rng.gen_range(0..4)]).collect()
    }

    fn random_history(rng: &mut StdRng, n: usize) -> Vec<Write> {
        (0..n)
            .map(|i| {
                let kind = match rng.gen_range(0..10) {
                    0..=2 => ValueKind::Deletion,
                    3..=5 => ValueKind::Merge,
                    _ => ValueKind::Value,
                };
                let value = match kind {
                    ValueKind::Value | ValueKind::BlobIndex => format!("v{}", i + 1).into_bytes(),
                    ValueKind::Merge => format!("m{}", i + 1).into_bytes(),
                    ValueKind::Deletion | ValueKind::RangeDeletion => Vec::new(),
                };
                Write {
                    user: random_user_key(rng),
                    seq: i as u64 + 1,
                    kind,
                    value,
                }
            })
            .collect()
    }

    /// An inner stream over `writes`: a memtable, a single vector, or a merge of a memtable
    /// and several vectors holding a random partition of the writes.
    fn build_inner(rng: &mut StdRng, writes: &[Write]) -> BoxedIter {
        match rng.gen_range(0..3) {
            0 => {
                let mem = Arc::new(MemTable::new());
                for w in writes {
                    mem.add(SeqNo(w.seq), w.kind, &w.user, &w.value);
                }
                Box::new(mem.iter())
            }
            1 => Box::new(VecIter::new(writes.iter().map(ikey_entry).collect())),
            _ => {
                let n = rng.gen_range(1..5);
                let mem = Arc::new(MemTable::new());
                let mut parts = vec![Vec::new(); n];
                for w in writes {
                    let c = rng.gen_range(0..=n);
                    match parts.get_mut(c) {
                        Some(p) => p.push(ikey_entry(w)),
                        None => mem.add(SeqNo(w.seq), w.kind, &w.user, &w.value),
                    }
                }
                let mut children: Vec<BoxedIter> = vec![Box::new(mem.iter())];
                children.extend(
                    parts
                        .into_iter()
                        .map(|p| Box::new(VecIter::new(p)) as BoxedIter),
                );
                Box::new(MergingIterator::new(children))
            }
        }
    }

    fn db_iter(
        inner: BoxedIter,
        snapshot: u64,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
    ) -> DbIterator {
        DbIterator::new(
            inner,
            SeqNo(snapshot),
            lower.map(<[u8]>::to_vec),
            upper.map(<[u8]>::to_vec),
            Resolvers {
                blobs: None,
                merge: Some(Arc::new(crate::merge::AppendOperator::new(","))),
                ttl: None,
                range_dels: Default::default(),
                prefix: Vec::new(),
            },
            Box::new(()),
        )
    }

    #[test]
    fn iterator_matches_model_under_random_snapshots_bounds_and_moves() {
        let seed = test_seed();
        let mut rng = StdRng::seed_from_u64(seed);
        for round in 0..60 {
            let n = rng.gen_range(0..120);
            let writes = random_history(&mut rng, n);
            let snapshot = rng.gen_range(0..=n as u64 + 1);
            let lower = rng.gen_bool(0.4).then(|| random_user_key(&mut rng));
            let upper = rng.gen_bool(0.4).then(|| random_user_key(&mut rng));
            let model = visible(&writes, snapshot, lower.as_deref(), upper.as_deref());
            let inner = build_inner(&mut rng, &writes);
            let mut it = db_iter(inner, snapshot, lower.as_deref(), upper.as_deref());
            let ctx = format!(
                "seed {seed} round {round} snapshot {snapshot} lower {lower:?} upper {upper:?}"
            );
            let mut pos: Option<usize> = None;
            for step in 0..150 {
                let op: String;
                match rng.gen_range(0..10) {
                    0 => {
                        op = "seek_to_first".into();
                        it.seek_to_first().unwrap();
                        pos = (!model.is_empty()).then_some(0);
                    }
                    1 => {
                        op = "seek_to_last".into();
                        it.seek_to_last().unwrap();
                        pos = model.len().checked_sub(1);
                    }
                    2 => {
                        let t = random_user_key(&mut rng);
                        op = format!("seek({t:?})");
                        it.seek(&t).unwrap();
                        let i = model.partition_point(|(k, _)| k.as_slice() < t.as_slice());
                        pos = (i < model.len()).then_some(i);
                    }
                    3 => {
                        let t = random_user_key(&mut rng);
                        op = format!("seek_for_prev({t:?})");
                        it.seek_for_prev(&t).unwrap();
                        let i = model.partition_point(|(k, _)| k.as_slice() <= t.as_slice());
                        pos = i.checked_sub(1);
                    }
                    4..=6 => {
                        op = "next".into();
                        it.next().unwrap();
                        pos = pos.map(|p| p + 1).filter(|&p| p < model.len());
                    }
                    _ => {
                        op = "prev".into();
                        it.prev().unwrap();
                        pos = pos.and_then(|p| p.checked_sub(1));
                    }
                }
                assert_eq!(
                    it.valid(),
                    pos.is_some(),
                    "{ctx} step {step} after {op}: valid"
                );
                if let Some(p) = pos {
                    let (k, v) = &model[p];
                    assert_eq!(it.key(), k.as_slice(), "{ctx} step {step} after {op}: key");
                    assert_eq!(
                        it.value(),
                        v.as_slice(),
                        "{ctx} step {step} after {op}: value"
                    );
                }
            }
        }
    }

    #[test]
    fn newest_visible_version_wins_and_tombstones_hide_keys() {
        let writes = [
            (b"a", 1, ValueKind::Value, &b"a1"[..]),
            (b"a", 3, ValueKind::Value, b"a3"),
            (b"b", 2, ValueKind::Value, b"b2"),
            (b"b", 4, ValueKind::Deletion, b""),
            (b"c", 5, ValueKind::Value, b"c5"),
        ];
        let entries = writes
            .iter()
            .map(|(u, s, k, v)| (make_internal_key(*u, SeqNo(*s), *k), v.to_vec()))
            .collect();
        let collect = |snapshot: u64| -> Vec<(Vec<u8>, Vec<u8>)> {
            let inner = Box::new(VecIter::new(Vec::clone(&entries)));
            db_iter(inner, snapshot, None, None)
                .collect::<Result<Vec<_>>>()
                .unwrap()
        };
        let pair = |k: &[u8], v: &[u8]| (k.to_vec(), v.to_vec());
        assert_eq!(collect(2), [pair(b"a", b"a1"), pair(b"b", b"b2")]);
        assert_eq!(collect(3), [pair(b"a", b"a3"), pair(b"b", b"b2")]);
        assert_eq!(collect(4), [pair(b"a", b"a3")]);
        assert_eq!(collect(9), [pair(b"a", b"a3"), pair(b"c", b"c5")]);
        assert!(collect(0).is_empty());
    }

    #[test]
    fn seeks_outside_bounds_clamp_to_them() {
        let entries: Vec<_> = [b"a", b"b", b"c", b"d", b"e"]
            .iter()
            .map(|u| {
                (
                    make_internal_key(*u, SeqNo(1), ValueKind::Value),
                    u.to_vec(),
                )
            })
            .collect();
        let mut it = db_iter(Box::new(VecIter::new(entries)), 1, Some(b"b"), Some(b"d"));
        it.seek(b"a").unwrap();
        assert_eq!(it.key(), b"b");
        it.prev().unwrap();
        assert!(!it.valid());
        it.seek_for_prev(b"z").unwrap();
        assert_eq!(it.key(), b"c");
        it.next().unwrap();
        assert!(!it.valid());
        it.seek_to_first().unwrap();
        assert_eq!(it.key(), b"b");
        it.seek_to_last().unwrap();
        assert_eq!(it.key(), b"c");
        it.seek(b"d").unwrap();
        assert!(!it.valid());
        it.seek_for_prev(b"a").unwrap();
        assert!(!it.valid());
    }

    #[test]
    fn upper_bound_excludes_even_the_newest_possible_version_of_the_bound() {
        let entries = vec![
            (
                make_internal_key(b"a", SeqNo(1), ValueKind::Value),
                b"a".to_vec(),
            ),
            (
                make_internal_key(b"b", SeqNo::MAX, ValueKind::Value),
                b"b".to_vec(),
            ),
        ];
        let mut it = db_iter(
            Box::new(VecIter::new(entries)),
            SeqNo::MAX.0,
            None,
            Some(b"b"),
        );
        it.seek_to_last().unwrap();
        assert_eq!(it.key(), b"a");
        it.seek_for_prev(b"c").unwrap();
        assert_eq!(it.key(), b"a");
        it.next().unwrap();
        assert!(!it.valid());
    }

    #[test]
    fn iterator_can_be_handed_to_another_thread() {
        let mem = Arc::new(MemTable::new());
        mem.add(SeqNo(1), ValueKind::Value, b"k", b"v");
        let keepalive = Box::new(Arc::clone(&mem));
        let it = DbIterator::new(
            Box::new(mem.iter()),
            SeqNo(1),
            None,
            None,
            Resolvers::default(),
            keepalive,
        );
        drop(mem);
        let items = std::thread::spawn(move || it.collect::<Result<Vec<_>>>())
            .join()
            .unwrap()
            .unwrap();
        assert_eq!(items, [(b"k".to_vec(), b"v".to_vec())]);
    }

    #[test]
    fn std_iterator_starts_at_first_or_at_the_current_seek() {
        let entries: Vec<_> = [b"a", b"b", b"c"]
            .iter()
            .map(|u| {
                (
                    make_internal_key(*u, SeqNo(1), ValueKind::Value),
                    u.to_vec(),
                )
            })
            .collect();
        let it = db_iter(Box::new(VecIter::new(entries.clone())), 1, None, None);
        let keys: Vec<Vec<u8>> = it.map(|e| e.unwrap().0).collect();
        assert_eq!(keys, [b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);

        let mut it = db_iter(Box::new(VecIter::new(entries)), 1, None, None);
        it.seek_to_last().unwrap();
        it.prev().unwrap(); // reverse direction, at "b"
        let keys: Vec<Vec<u8>> = it.map(|e| e.unwrap().0).collect();
        assert_eq!(keys, [b"b".to_vec(), b"c".to_vec()]);
    }

    #[test]
    fn storage_error_is_yielded_once_then_iteration_ends() {
        let entries: Vec<_> = [b"a", b"b", b"c", b"d"]
            .iter()
            .map(|u| {
                (
                    make_internal_key(*u, SeqNo(1), ValueKind::Value),
                    u.to_vec(),
                )
            })
            .collect();
        let inner = FailAfter {
            inner: VecIter::new(entries),
            moves_left: 2,
        };
        let it = db_iter(Box::new(inner), 1, None, None);
        let items: Vec<_> = it.collect();
        assert_eq!(items.len(), 3, "two entries, then the error: {items:?}");
        assert_eq!(items[0].as_ref().unwrap().0, b"a");
        assert_eq!(items[1].as_ref().unwrap().0, b"b");
        assert!(items[2].is_err());
    }

    #[test]
    fn malformed_internal_key_is_an_error_not_a_skip() {
        let entries = vec![(b"abc".to_vec(), b"v".to_vec())];
        let mut it = db_iter(Box::new(VecIter::new(entries)), 1, None, None);
        assert!(it.seek_to_first().is_err());
        assert!(!it.valid());
    }
}
