//! [`VersionEdit`]: one change to the set of live files, and [`FileMeta`]: what the manifest
//! knows about one table. See docs/format/manifest.md for the byte layout.
//!
//! An edit is a list of tagged fields (`varint tag`, then the field's value). [`VersionEdit::encode`]
//! writes them in a fixed order; [`VersionEdit::decode`] reads untrusted bytes, accepts any
//! order, rejects unknown tags, out-of-range levels and malformed keys, and never panics or
//! allocates more than the input's length.
//!
//! Called by `VersionSet` (building edits, the snapshot edit) and by `manifest` (framing and
//! replay). Plain data: `Send + Sync`, no interior mutability.
#![deny(clippy::indexing_slicing)]

use std::collections::HashSet;

use crate::coding::{Decoder, put_length_prefixed, put_varint64};
use crate::error::CorruptionReason;
use crate::key::{self, SeqNo, compare_internal, parse_internal_key};
use crate::layout::FileNum;

use super::NUM_LEVELS;

/// Tag: database id (varint64). At most once per edit.
// FORMAT: never change; see docs/format/manifest.md
pub const TAG_DB_ID: u64 = 1;
/// Tag: one fixed option (length-prefixed UTF-8 name, length-prefixed UTF-8 value).
// FORMAT: never change; see docs/format/manifest.md
pub const TAG_FIXED_OPTION: u64 = 2;
/// Tag: WAL segments numbered below this are obsolete (varint64). At most once.
// FORMAT: never change; see docs/format/manifest.md
pub const TAG_LOG_NUMBER: u64 = 3;
/// Tag: the next unused file number (varint64). At most once.
// FORMAT: never change; see docs/format/manifest.md
pub const TAG_NEXT_FILE_NUMBER: u64 = 4;
/// Tag: the last used sequence number (varint64). At most once.
// FORMAT: never change; see docs/format/manifest.md
pub const TAG_LAST_SEQUENCE: u64 = 5;
/// Tag: a level's compaction pointer (varint level, length-prefixed internal key).
// FORMAT: never change; see docs/format/manifest.md
pub const TAG_COMPACT_POINTER: u64 = 6;
/// Tag: a file removed from a level (varint level, varint file number).
// FORMAT: never change; see docs/format/manifest.md
pub const TAG_DELETED_FILE: u64 = 7;
/// Tag: a file added to a level (varint level, then the [`FileMeta`] fields).
// FORMAT: never change; see docs/format/manifest.md
pub const TAG_NEW_FILE: u64 = 8;

/// What the manifest records about one table file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileMeta {
    /// The file's number (names `NNNNNN.sst` on the tier of its level).
    pub number: FileNum,
    /// File size in bytes.
    pub size: u64,
    /// Smallest internal key in the file.
    pub smallest: Vec<u8>,
    /// Largest internal key in the file.
    pub largest: Vec<u8>,
    /// Smallest sequence number of any entry in the file.
    pub smallest_seq: SeqNo,
    /// Largest sequence number of any entry in the file.
    pub largest_seq: SeqNo,
    /// Number of entries (values and tombstones).
    pub entries: u64,
}

impl FileMeta {
    /// The user key of [`FileMeta::smallest`].
    pub fn smallest_user(&self) -> &[u8] {
        key::user_key(&self.smallest)
    }

    /// The user key of [`FileMeta::largest`].
    pub fn largest_user(&self) -> &[u8] {
        key::user_key(&self.largest)
    }

    /// True if the file's user-key range `[smallest_user, largest_user]` contains `user_key`.
    pub fn contains_user_key(&self, user_key: &[u8]) -> bool {
        self.smallest_user() <= user_key && user_key <= self.largest_user()
    }

    /// True if the file's user-key range intersects `[smallest_user, largest_user]`.
    pub fn overlaps_user_range(&self, smallest_user: &[u8], largest_user: &[u8]) -> bool {
        !(self.largest_user() < smallest_user || self.smallest_user() > largest_user)
    }

    /// Checks the metadata's own consistency (keys parse, smallest ≤ largest, sequence range
    /// ordered and representable).
    pub fn validate(&self) -> Result<(), CorruptionReason> {
        parse_internal_key(&self.smallest)?;
        parse_internal_key(&self.largest)?;
        if compare_internal(&self.smallest, &self.largest).is_gt() {
            return Err(CorruptionReason::Invalid(
                "file's smallest key is above its largest",
            ));
        }
        if self.smallest_seq > self.largest_seq || self.largest_seq > SeqNo::MAX {
            return Err(CorruptionReason::Invalid(
                "file's sequence-number range is invalid",
            ));
        }
        Ok(())
    }

    fn encode_to(&self, dst: &mut Vec<u8>) {
        put_varint64(dst, self.number.0);
        put_varint64(dst, self.size);
        put_length_prefixed(dst, &self.smallest);
        put_length_prefixed(dst, &self.largest);
        put_varint64(dst, self.smallest_seq.0);
        put_varint64(dst, self.largest_seq.0);
        put_varint64(dst, self.entries);
    }

    fn decode_from(d: &mut Decoder<'_>) -> Result<FileMeta, CorruptionReason> {
        let number = FileNum(d.varint64()?);
        let size = d.varint64()?;
        let smallest = d.length_prefixed()?.to_vec();
        let largest = d.length_prefixed()?.to_vec();
        let smallest_seq = SeqNo(d.varint64()?);
        let largest_seq = SeqNo(d.varint64()?);
        let entries = d.varint64()?;
        let meta = FileMeta {
            number,
            size,
            smallest,
            largest,
            smallest_seq,
            largest_seq,
            entries,
        };
        meta.validate()?;
        Ok(meta)
    }
}

/// One change to the database's file set and counters, as logged in the manifest.
///
/// Every field is optional or a list; an empty edit is valid. The first record of a manifest
/// is a *snapshot* edit that states the whole state (see `VersionSet::snapshot_edit`).
#[derive(Default, Clone, Debug, PartialEq, Eq)]
pub struct VersionEdit {
    /// The database's random id (ties the tier directories together).
    pub db_id: Option<u64>,
    /// Parameters fixed when the database was created: `(name, value)`, names unique.
    pub fixed_options: Vec<(String, String)>,
    /// WAL segments numbered below this are obsolete (their data is in tables).
    pub log_number: Option<FileNum>,
    /// The next unused file number.
    pub next_file_number: Option<u64>,
    /// The last sequence number used by a write recorded in a table.
    pub last_sequence: Option<SeqNo>,
    /// New compaction pointers: `(level, internal key)`; the next compaction of that level
    /// starts after the key.
    pub compact_pointers: Vec<(usize, Vec<u8>)>,
    /// Files removed: `(level, number)`.
    pub deleted_files: Vec<(usize, FileNum)>,
    /// Files added: `(level, meta)`.
    pub new_files: Vec<(usize, FileMeta)>,
}

fn decode_level(d: &mut Decoder<'_>) -> Result<usize, CorruptionReason> {
    let level = d.varint64()?;
    match usize::try_from(level) {
        Ok(l) if l < NUM_LEVELS => Ok(l),
        _ => Err(CorruptionReason::Invalid("level number out of range")),
    }
}

fn decode_utf8(bytes: &[u8]) -> Result<String, CorruptionReason> {
    String::from_utf8(bytes.to_vec())
        .map_err(|_| CorruptionReason::Invalid("fixed option is not UTF-8"))
}

fn once<T>(slot: &mut Option<T>, v: T) -> Result<(), CorruptionReason> {
    if slot.is_some() {
        return Err(CorruptionReason::Invalid("field repeated in one edit"));
    }
    *slot = Some(v);
    Ok(())
}

impl VersionEdit {
    /// Records that `meta` is added to `level`.
    pub fn add_file(&mut self, level: usize, meta: FileMeta) {
        self.new_files.push((level, meta));
    }

    /// Records that file `number` is removed from `level`.
    pub fn delete_file(&mut self, level: usize, number: FileNum) {
        self.deleted_files.push((level, number));
    }

    #[cfg(test)]
    /// True if the edit changes nothing.
    pub fn is_empty(&self) -> bool {
        *self == VersionEdit::default()
    }

    /// Serializes the edit (the payload of one manifest record).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        if let Some(id) = self.db_id {
            put_varint64(&mut b, TAG_DB_ID);
            put_varint64(&mut b, id);
        }
        for (name, value) in &self.fixed_options {
            put_varint64(&mut b, TAG_FIXED_OPTION);
            put_length_prefixed(&mut b, name.as_bytes());
            put_length_prefixed(&mut b, value.as_bytes());
        }
        if let Some(n) = self.log_number {
            put_varint64(&mut b, TAG_LOG_NUMBER);
            put_varint64(&mut b, n.0);
        }
        if let Some(n) = self.next_file_number {
            put_varint64(&mut b, TAG_NEXT_FILE_NUMBER);
            put_varint64(&mut b, n);
        }
        if let Some(s) = self.last_sequence {
            put_varint64(&mut b, TAG_LAST_SEQUENCE);
            put_varint64(&mut b, s.0);
        }
        for (level, key) in &self.compact_pointers {
            put_varint64(&mut b, TAG_COMPACT_POINTER);
            put_varint64(&mut b, *level as u64);
            put_length_prefixed(&mut b, key);
        }
        for (level, number) in &self.deleted_files {
            put_varint64(&mut b, TAG_DELETED_FILE);
            put_varint64(&mut b, *level as u64);
            put_varint64(&mut b, number.0);
        }
        for (level, meta) in &self.new_files {
            put_varint64(&mut b, TAG_NEW_FILE);
            put_varint64(&mut b, *level as u64);
            meta.encode_to(&mut b);
        }
        b
    }

    /// Parses an edit from untrusted bytes.
    ///
    /// Rejects: unknown tags ([`CorruptionReason::UnknownType`], the tag saturated to a byte),
    /// truncated fields, lengths beyond the input, levels ≥ `NUM_LEVELS`, invalid file
    /// metadata, non-UTF-8 or duplicate option names, and single-valued fields given twice.
    pub fn decode(bytes: &[u8]) -> Result<VersionEdit, CorruptionReason> {
        let mut d = Decoder::new(bytes);
        let mut e = VersionEdit::default();
        let mut option_names = HashSet::new();
        while !d.is_empty() {
            let tag = d.varint64()?;
            match tag {
                TAG_DB_ID => once(&mut e.db_id, d.varint64()?)?,
                TAG_FIXED_OPTION => {
                    let name = decode_utf8(d.length_prefixed()?)?;
                    let value = decode_utf8(d.length_prefixed()?)?;
                    if !option_names.insert(name.clone()) {
                        return Err(CorruptionReason::Invalid("fixed option named twice"));
                    }
                    e.fixed_options.push((name, value));
                }
                TAG_LOG_NUMBER => once(&mut e.log_number, FileNum(d.varint64()?))?,
                TAG_NEXT_FILE_NUMBER => once(&mut e.next_file_number, d.varint64()?)?,
                TAG_LAST_SEQUENCE => {
                    let s = SeqNo(d.varint64()?);
                    if s > SeqNo::MAX {
                        return Err(CorruptionReason::Invalid(
                            "last sequence number out of range",
                        ));
                    }
                    once(&mut e.last_sequence, s)?;
                }
                TAG_COMPACT_POINTER => {
                    let level = decode_level(&mut d)?;
                    let key = d.length_prefixed()?;
                    parse_internal_key(key)?;
                    e.compact_pointers.push((level, key.to_vec()));
                }
                TAG_DELETED_FILE => {
                    let level = decode_level(&mut d)?;
                    e.deleted_files.push((level, FileNum(d.varint64()?)));
                }
                TAG_NEW_FILE => {
                    let level = decode_level(&mut d)?;
                    e.new_files.push((level, FileMeta::decode_from(&mut d)?));
                }
                other => {
                    return Err(CorruptionReason::UnknownType(
                        u8::try_from(other).unwrap_or(u8::MAX),
                    ));
                }
            }
        }
        Ok(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{ValueKind, make_internal_key};
    use proptest::prelude::*;

    fn meta(n: u64, a: &str, b: &str, seq: u64) -> FileMeta {
        FileMeta {
            number: FileNum(n),
            size: 1000 + n,
            smallest: make_internal_key(a.as_bytes(), SeqNo(seq), ValueKind::Value),
            largest: make_internal_key(b.as_bytes(), SeqNo(seq), ValueKind::Deletion),
            smallest_seq: SeqNo(seq),
            largest_seq: SeqNo(seq + 3),
            entries: 17,
        }
    }

    fn full_edit() -> VersionEdit {
        VersionEdit {
            db_id: Some(0xdead_beef),
            fixed_options: vec![("page_bytes".into(), "4096".into())],
            log_number: Some(FileNum(7)),
            next_file_number: Some(12),
            last_sequence: Some(SeqNo(999)),
            compact_pointers: vec![(2, make_internal_key(b"m", SeqNo(4), ValueKind::Value))],
            deleted_files: vec![(1, FileNum(3)), (0, FileNum(4))],
            new_files: vec![(0, meta(9, "a", "f", 10)), (6, meta(10, "g", "z", 1))],
        }
    }

    #[test]
    fn full_edit_round_trips() {
        let e = full_edit();
        assert_eq!(VersionEdit::decode(&e.encode()).unwrap(), e);
    }

    #[test]
    fn empty_edit_is_empty_bytes_and_decodes() {
        let e = VersionEdit::default();
        assert!(e.is_empty());
        assert!(e.encode().is_empty());
        assert_eq!(VersionEdit::decode(&[]).unwrap(), e);
    }

    #[test]
    fn truncated_edit_never_decodes_as_the_whole_edit() {
        let bytes = full_edit().encode();
        for cut in 1..bytes.len() {
            // A cut may fall exactly between two fields, which is a valid shorter edit.
            if let Ok(e) = VersionEdit::decode(&bytes[..cut]) {
                assert_ne!(e, full_edit(), "cut at {cut} decoded the full edit");
            }
        }
        // Cutting inside the last field is never valid.
        assert!(VersionEdit::decode(&bytes[..bytes.len() - 1]).is_err());
    }

    #[test]
    fn unknown_tag_is_rejected() {
        assert_eq!(
            VersionEdit::decode(&[9, 0]),
            Err(CorruptionReason::UnknownType(9))
        );
        assert_eq!(
            VersionEdit::decode(&[0]),
            Err(CorruptionReason::UnknownType(0))
        );
        let mut b = Vec::new();
        put_varint64(&mut b, 1 << 40);
        assert_eq!(
            VersionEdit::decode(&b),
            Err(CorruptionReason::UnknownType(255))
        );
    }

    #[test]
    fn level_out_of_range_is_rejected() {
        let mut b = Vec::new();
        put_varint64(&mut b, TAG_DELETED_FILE);
        put_varint64(&mut b, NUM_LEVELS as u64);
        put_varint64(&mut b, 5);
        assert_eq!(
            VersionEdit::decode(&b),
            Err(CorruptionReason::Invalid("level number out of range"))
        );
        let mut e = VersionEdit::default();
        e.add_file(NUM_LEVELS + 3, meta(1, "a", "b", 1));
        assert!(VersionEdit::decode(&e.encode()).is_err());
        let mut b = Vec::new();
        put_varint64(&mut b, TAG_COMPACT_POINTER);
        put_varint64(&mut b, u64::MAX);
        assert!(VersionEdit::decode(&b).is_err());
    }

    #[test]
    fn huge_key_length_is_rejected_before_allocating() {
        let mut b = Vec::new();
        put_varint64(&mut b, TAG_NEW_FILE);
        put_varint64(&mut b, 1);
        put_varint64(&mut b, 5); // number
        put_varint64(&mut b, 100); // size
        put_varint64(&mut b, u64::MAX >> 1); // smallest key length
        b.extend_from_slice(b"short");
        assert_eq!(VersionEdit::decode(&b), Err(CorruptionReason::BadLength));
    }

    #[test]
    fn repeated_single_field_is_rejected() {
        let mut b = Vec::new();
        for _ in 0..2 {
            put_varint64(&mut b, TAG_NEXT_FILE_NUMBER);
            put_varint64(&mut b, 5);
        }
        assert_eq!(
            VersionEdit::decode(&b),
            Err(CorruptionReason::Invalid("field repeated in one edit"))
        );
    }

    #[test]
    fn duplicate_or_non_utf8_option_is_rejected() {
        let e = VersionEdit {
            fixed_options: vec![("a".into(), "1".into()), ("a".into(), "2".into())],
            ..VersionEdit::default()
        };
        assert!(VersionEdit::decode(&e.encode()).is_err());
        let mut b = Vec::new();
        put_varint64(&mut b, TAG_FIXED_OPTION);
        put_length_prefixed(&mut b, &[0xff, 0xfe]);
        put_length_prefixed(&mut b, b"v");
        assert_eq!(
            VersionEdit::decode(&b),
            Err(CorruptionReason::Invalid("fixed option is not UTF-8"))
        );
    }

    #[test]
    fn malformed_file_meta_is_rejected() {
        // Key shorter than a tag.
        let mut m = meta(1, "a", "b", 1);
        m.smallest = b"abc".to_vec();
        let mut e = VersionEdit::default();
        e.add_file(1, m);
        assert_eq!(
            VersionEdit::decode(&e.encode()),
            Err(CorruptionReason::Truncated)
        );
        // Smallest above largest.
        let mut e = VersionEdit::default();
        e.add_file(1, meta(1, "z", "b", 1));
        assert!(matches!(
            VersionEdit::decode(&e.encode()),
            Err(CorruptionReason::Invalid(_))
        ));
        // Sequence range inverted.
        let mut m = meta(1, "a", "b", 1);
        m.smallest_seq = SeqNo(50);
        let mut e = VersionEdit::default();
        e.add_file(1, m);
        assert!(matches!(
            VersionEdit::decode(&e.encode()),
            Err(CorruptionReason::Invalid(_))
        ));
        // Unknown kind byte in a key.
        let mut m = meta(1, "a", "b", 1);
        let n = m.largest.len();
        m.largest[n - 8] = 9;
        let mut e = VersionEdit::default();
        e.add_file(1, m);
        assert_eq!(
            VersionEdit::decode(&e.encode()),
            Err(CorruptionReason::UnknownType(9))
        );
    }

    #[test]
    fn sequence_beyond_56_bits_is_rejected() {
        let mut b = Vec::new();
        put_varint64(&mut b, TAG_LAST_SEQUENCE);
        put_varint64(&mut b, SeqNo::MAX.0 + 1);
        assert!(matches!(
            VersionEdit::decode(&b),
            Err(CorruptionReason::Invalid(_))
        ));
    }

    #[test]
    fn bad_varint_is_rejected() {
        assert_eq!(
            VersionEdit::decode(&[0x80]),
            Err(CorruptionReason::BadVarint)
        );
        assert_eq!(
            VersionEdit::decode(&[TAG_LOG_NUMBER as u8, 0xff]),
            Err(CorruptionReason::BadVarint)
        );
    }

    fn arb_ikey() -> impl Strategy<Value = (Vec<u8>, u64)> {
        (
            proptest::collection::vec(any::<u8>(), 0..12),
            0..SeqNo::MAX.0,
        )
    }

    fn arb_meta() -> impl Strategy<Value = FileMeta> {
        (
            any::<u64>(),
            any::<u64>(),
            arb_ikey(),
            arb_ikey(),
            any::<u64>(),
        )
            .prop_map(|(n, size, (a, sa), (b, sb), entries)| {
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                let (s0, s1) = (sa.min(sb), sa.max(sb));
                FileMeta {
                    number: FileNum(n),
                    size,
                    smallest: make_internal_key(&lo, SeqNo(s1), ValueKind::Value),
                    largest: make_internal_key(&hi, SeqNo(s0), ValueKind::Deletion),
                    smallest_seq: SeqNo(s0),
                    largest_seq: SeqNo(s1),
                    entries,
                }
            })
    }

    fn arb_edit() -> impl Strategy<Value = VersionEdit> {
        let level = 0..NUM_LEVELS;
        (
            proptest::option::of(any::<u64>()),
            proptest::collection::btree_map("[a-z_]{1,8}", ".{0,8}", 0..3),
            proptest::option::of(any::<u64>()),
            proptest::option::of(any::<u64>()),
            proptest::option::of(0..=SeqNo::MAX.0),
            proptest::collection::vec((level.clone(), arb_ikey()), 0..3),
            proptest::collection::vec((level.clone(), any::<u64>()), 0..4),
            proptest::collection::vec((level, arb_meta()), 0..4),
        )
            .prop_map(|(id, opts, log, next, last, cps, dels, adds)| VersionEdit {
                db_id: id,
                fixed_options: opts.into_iter().collect(),
                log_number: log.map(FileNum),
                next_file_number: next,
                last_sequence: last.map(SeqNo),
                compact_pointers: cps
                    .into_iter()
                    .map(|(l, (k, s))| (l, make_internal_key(&k, SeqNo(s), ValueKind::Value)))
                    .collect(),
                deleted_files: dels.into_iter().map(|(l, n)| (l, FileNum(n))).collect(),
                new_files: adds,
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn random_edits_round_trip(e in arb_edit()) {
            prop_assert_eq!(VersionEdit::decode(&e.encode()).unwrap(), e);
        }

        #[test]
        fn hostile_bytes_fail_cleanly_or_round_trip(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            // The decoder must return (never panic); anything it accepts must be stable.
            if let Ok(d) = VersionEdit::decode(&bytes) {
                prop_assert_eq!(VersionEdit::decode(&d.encode()).unwrap(), d);
            }
        }

        #[test]
        fn flipped_byte_decodes_or_fails_cleanly(e in arb_edit(), pos in any::<usize>(), bit in 0u8..8) {
            let mut b = e.encode();
            if !b.is_empty() {
                let i = pos % b.len();
                b[i] ^= 1 << bit;
                if let Ok(d) = VersionEdit::decode(&b) {
                    // Whatever decoded must re-encode to something that decodes the same.
                    prop_assert_eq!(VersionEdit::decode(&d.encode()).unwrap(), d);
                }
            }
        }
    }
}
