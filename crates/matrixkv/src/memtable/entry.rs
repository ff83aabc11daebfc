//! The value backing of memtable entries: [`MemKey`], one shared buffer holding
//! `internal key ++ value` (or a key whose value is shared with a WAL record), carved out of
//! arena blocks; its order (a 16-byte user-key prefix compared before the buffer); and
//! [`MemEntry`], the handle a flush receives.

use bytes::{Bytes, BytesMut};

use crate::key::{self, SeqNo, TAG_LEN, ValueKind};
use crate::lock_order::Mutex;

/// Bytes of an arena block. The entries a writer adds are carved out of blocks this large, so
/// an insert makes no allocation of its own and a dropped memtable frees one block per this
/// many bytes instead of one allocation per entry. Per-entry buffers made the writer's `malloc`
/// wait for the arena lock of glibc while the flush thread freed the last memtable's entries
/// (decision 0011, update of 2026-11-25).
const ARENA_BLOCK: usize = 1 << 20;
/// Entries larger than this get an allocation of their own (a block holds at least four).
const ARENA_MAX_ENTRY: usize = ARENA_BLOCK / 4;

/// One skiplist key: `internal key ++ value` in one shared buffer, ordered by the internal key
/// ([`key::compare_internal`]). Cloning is a reference-count increment.
#[derive(Clone, Debug)]
pub(super) struct MemKey {
    pub(super) buf: Bytes,
    pub(super) key_len: usize,
    /// [`user_key_prefix`] of the internal key, compared before the buffer (whose bytes are
    /// another cache miss away during a skiplist search).
    pub(super) prefix: u128,
    /// The value when it lives outside `buf` (a slice of a WAL record on the fast tier, the
    /// semi-persistent design); empty when it follows the key in `buf`.
    pub(super) shared: Bytes,
}

impl MemKey {
    /// An entry for `user_key` at `seq`/`kind` holding `value`.
    pub(super) fn entry(user_key: &[u8], seq: SeqNo, kind: ValueKind, value: &[u8]) -> MemKey {
        MemKey::entry_in(None, &[], user_key, seq, kind, value)
    }

    /// An entry for the user key `prefix ++ user_key`, carved out of `arena` when given (and
    /// the entry is small enough).
    pub(super) fn entry_in(
        arena: Option<&Mutex<BytesMut>>,
        prefix: &[u8],
        user_key: &[u8],
        seq: SeqNo,
        kind: ValueKind,
        value: &[u8],
    ) -> MemKey {
        let tag = key::pack_tag(seq, kind).to_le_bytes();
        let key_len = prefix.len() + user_key.len();
        let len = key_len + TAG_LEN + value.len();
        let buf = match arena {
            Some(arena) if len <= ARENA_MAX_ENTRY => {
                let mut block = arena.lock();
                if block.capacity() - block.len() < len {
                    // The old block stays allocated while entries carved from it live.
                    *block = BytesMut::with_capacity(ARENA_BLOCK);
                }
                block.extend_from_slice(prefix);
                block.extend_from_slice(user_key);
                block.extend_from_slice(&tag);
                block.extend_from_slice(value);
                // The entry's bytes, sharing the block; the block keeps its spare capacity.
                block.split().freeze()
            }
            _ => {
                let mut buf = Vec::with_capacity(len);
                buf.extend_from_slice(prefix);
                buf.extend_from_slice(user_key);
                buf.extend_from_slice(&tag);
                buf.extend_from_slice(value);
                // Takes the vector's allocation over (its length equals its capacity).
                Bytes::from(buf)
            }
        };
        let fast = prefix_of(buf.get(..key_len).unwrap_or_default());
        MemKey {
            buf,
            key_len: key_len + TAG_LEN,
            prefix: fast,
            shared: Bytes::new(),
        }
    }

    /// An entry for the user key `prefix ++ user_key` whose value is `value`, shared rather
    /// than copied (the entry holds a reference).
    pub(super) fn entry_shared(
        arena: Option<&Mutex<BytesMut>>,
        prefix: &[u8],
        user_key: &[u8],
        seq: SeqNo,
        kind: ValueKind,
        value: Bytes,
    ) -> MemKey {
        let mut e = MemKey::entry_in(arena, prefix, user_key, seq, kind, &[]);
        e.shared = value;
        e
    }

    /// A search key holding only the internal key `ikey` (no value).
    pub(super) fn probe(ikey: &[u8]) -> MemKey {
        MemKey {
            buf: Bytes::copy_from_slice(ikey),
            key_len: ikey.len(),
            prefix: user_key_prefix(ikey),
            shared: Bytes::new(),
        }
    }

    /// The internal key.
    pub(super) fn ikey(&self) -> &[u8] {
        self.buf.get(..self.key_len).unwrap_or(&self.buf)
    }

    /// The value (empty for tombstones and probes).
    pub(super) fn value(&self) -> &[u8] {
        if self.shared.is_empty() {
            self.buf.get(self.key_len..).unwrap_or(&[])
        } else {
            &self.shared
        }
    }
}

/// The first 16 bytes of `user_key` as a big-endian integer, zero-padded. Order-preserving in
/// one direction: `prefix_of(a) < prefix_of(b)` implies `a < b` (at the first differing byte
/// either both bytes are the keys' own, or `a` has ended there and is a prefix of `b`); equal
/// integers say nothing. Sixteen bytes, not eight: keys often share their first eight (a
/// keyspace prefix, a table name, zero-padded numbers such as the benchmarks' 16-digit keys),
/// and then every comparison of a search loaded both entries' buffers.
#[allow(
    clippy::big_endian_bytes,
    reason = "an in-memory sort key, never stored: big-endian integers order like their bytes"
)]
pub(super) fn prefix_of(user_key: &[u8]) -> u128 {
    let mut b = [0u8; 16];
    let n = user_key.len().min(16);
    if let (Some(dst), Some(src)) = (b.get_mut(..n), user_key.get(..n)) {
        dst.copy_from_slice(src);
    }
    u128::from_be_bytes(b)
}

/// [`prefix_of`] the user key of internal key `ikey`, split as [`key::compare_internal`] does
/// (a key too short for a tag is all user key).
pub(super) fn user_key_prefix(ikey: &[u8]) -> u128 {
    prefix_of(key::split_internal(ikey).map_or(ikey, |(user, _)| user))
}

impl PartialEq for MemKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}

impl Eq for MemKey {}

impl PartialOrd for MemKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for MemKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.prefix
            .cmp(&other.prefix)
            .then_with(|| key::compare_internal(self.ikey(), other.ikey()))
    }
}

/// One entry of a memtable, shared with it (a reference count, no copy of the bytes).
#[derive(Clone, Debug)]
pub(crate) struct MemEntry(pub(super) MemKey);

impl MemEntry {
    /// The internal key.
    pub(crate) fn key(&self) -> &[u8] {
        self.0.ikey()
    }

    /// The value (empty for tombstones).
    pub(crate) fn value(&self) -> &[u8] {
        self.0.value()
    }

    /// An entry of `user_key` made outside a memtable (a flush's rewrite of one).
    pub(crate) fn new(user_key: &[u8], seq: SeqNo, kind: ValueKind, value: &[u8]) -> MemEntry {
        MemEntry(MemKey::entry(user_key, seq, kind, value))
    }
}
