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
mod tests;
