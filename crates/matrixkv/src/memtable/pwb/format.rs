//! The byte layout of the LightKV write buffer, specified in docs/format/pwb.md: every
//! constant marked `FORMAT`, the header and record encoders and the record decoder.

use crate::checksum;
use crate::coding::{le_u32, le_u64};
use crate::key::{SeqNo, ValueKind};

/// Magic number at offset 0 of the region.
// FORMAT: never change; see docs/format/pwb.md
pub const MAGIC: [u8; 8] = *b"mxkv-pwb";
/// The format version this build writes and reads.
// FORMAT: never change; see docs/format/pwb.md
pub const FORMAT_VERSION: u32 = 1;

// Header fields (offsets from the start of the region).
// FORMAT: never change; see docs/format/pwb.md
pub(super) const OFF_VERSION: usize = 8;
pub(super) const OFF_ID: usize = 16;
pub(super) const OFF_REGION_LEN: usize = 24;
pub(super) const OFF_LOG_LEN: usize = 32;
/// The header checksum covers the bytes before it.
pub(super) const OFF_HEADER_CRC: usize = 40;
/// The committed tail (the commit word): the log offset where the first record after the
/// last committed batch starts.
pub(super) const OFF_COMMITTED: usize = 48;
/// Where the log area starts (the header takes the first page).
pub const LOG_START: usize = 4096;

// Record fields (offsets from the record's start).
// FORMAT: never change; see docs/format/pwb.md
/// crc u32, key length u32, value length u32, kind u8 and 3 zero bytes, seq u64, prev u64.
pub(super) const RECORD_HEADER_LEN: usize = 32;
const R_KEY_LEN: usize = 4;
const R_VALUE_LEN: usize = 8;
const R_KIND: usize = 12;
const R_SEQ: usize = 16;
const R_PREV: usize = 24;
/// `prev` of a record whose key has no older version in this buffer.
pub(super) const NO_PREV: u64 = u64::MAX;

/// Bytes of the record of a key and a value of these lengths (a multiple of 8).
pub(super) fn record_len(key_len: usize, value_len: usize) -> usize {
    (RECORD_HEADER_LEN + key_len + value_len).next_multiple_of(8)
}

/// The header of a buffer `id` in a region of `region_len` bytes whose log area has
/// `log_len` bytes (commit word 0).
pub(super) fn encode_header(id: u64, region_len: u64, log_len: u64) -> Vec<u8> {
    let mut b = vec![0u8; OFF_COMMITTED + 8];
    b[..8].copy_from_slice(&MAGIC);
    b[OFF_VERSION..OFF_VERSION + 4].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    b[OFF_ID..OFF_ID + 8].copy_from_slice(&id.to_le_bytes());
    b[OFF_REGION_LEN..OFF_REGION_LEN + 8].copy_from_slice(&region_len.to_le_bytes());
    b[OFF_LOG_LEN..OFF_LOG_LEN + 8].copy_from_slice(&log_len.to_le_bytes());
    let crc = checksum::checksum(&b[..OFF_HEADER_CRC]);
    b[OFF_HEADER_CRC..OFF_HEADER_CRC + 4].copy_from_slice(&crc.to_le_bytes());
    b
}

/// The seed of a record's checksum: the buffer's id and the record's log offset, so a
/// location that strays to another buffer's or another record's bytes is detected.
fn seed(id: u64, offset: u64) -> [u8; 16] {
    let mut s = [0u8; 16];
    s[..8].copy_from_slice(&id.to_le_bytes());
    s[8..].copy_from_slice(&offset.to_le_bytes());
    s
}

/// One version in the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Record {
    pub seq: SeqNo,
    pub kind: ValueKind,
    /// The log offset of the key's older version in this buffer, or [`NO_PREV`].
    pub prev: u64,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

/// The header of the record at log offset `offset` of buffer `id` holding `key` and `value`
/// (its checksum covers them: the writer stores the three pieces without joining them).
#[allow(clippy::too_many_arguments, reason = "the record's fields")]
pub(super) fn encode_record_header(
    id: u64,
    offset: u64,
    seq: SeqNo,
    kind: ValueKind,
    prev: u64,
    key: &[u8],
    value: &[u8],
) -> [u8; RECORD_HEADER_LEN] {
    let mut h = [0u8; RECORD_HEADER_LEN];
    h[R_KEY_LEN..R_KEY_LEN + 4].copy_from_slice(&(key.len() as u32).to_le_bytes());
    h[R_VALUE_LEN..R_VALUE_LEN + 4].copy_from_slice(&(value.len() as u32).to_le_bytes());
    h[R_KIND] = kind as u8;
    h[R_SEQ..R_SEQ + 8].copy_from_slice(&seq.0.to_le_bytes());
    h[R_PREV..R_PREV + 8].copy_from_slice(&prev.to_le_bytes());
    let mut crc = checksum::ChecksumStream::new();
    crc.update(&seed(id, offset));
    crc.update(&h[4..]);
    crc.update(key);
    crc.update(value);
    h[..4].copy_from_slice(&crc.finish().to_le_bytes());
    h
}

fn record_crc(id: u64, offset: u64, b: &[u8], payload: usize) -> u32 {
    checksum::checksum3(
        &seed(id, offset),
        b.get(4..RECORD_HEADER_LEN).unwrap_or_default(),
        b.get(RECORD_HEADER_LEN..RECORD_HEADER_LEN + payload)
            .unwrap_or_default(),
    )
}

/// The key and value lengths a record header claims.
pub(super) fn payload_lens(header: &[u8]) -> (usize, usize) {
    (
        le_u32(header, R_KEY_LEN) as usize,
        le_u32(header, R_VALUE_LEN) as usize,
    )
}

/// The sequence number and kind a record header holds (`None`: an unknown kind).
pub(super) fn seq_and_kind(header: &[u8]) -> Option<(SeqNo, ValueKind)> {
    let kind = header
        .get(R_KIND)
        .and_then(|&k| ValueKind::from_batch_u8(k).ok())?;
    Some((SeqNo(le_u64(header, R_SEQ)), kind))
}

/// Why a record's bytes are not a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Damage {
    Checksum { stored: u32, computed: u32 },
    Kind,
    Padding,
}

/// The record whose bytes (header, key, value, padding) are `b`, at log offset `offset` of
/// buffer `id`.
pub(super) fn decode_record(id: u64, offset: u64, b: &[u8]) -> Result<Record, Damage> {
    let (k, v) = payload_lens(b);
    let stored = le_u32(b, 0);
    let computed = record_crc(id, offset, b, k + v);
    if stored != computed {
        return Err(Damage::Checksum { stored, computed });
    }
    let kind = b
        .get(R_KIND)
        .and_then(|&k| ValueKind::from_batch_u8(k).ok())
        .filter(|k| {
            matches!(
                k,
                ValueKind::Value
                    | ValueKind::Deletion
                    | ValueKind::Merge
                    | ValueKind::RangeDeletion
            )
        })
        .ok_or(Damage::Kind)?;
    if b.get(R_KIND + 1..R_SEQ)
        .is_none_or(|p| p.iter().any(|&x| x != 0))
    {
        return Err(Damage::Padding);
    }
    let key = b
        .get(RECORD_HEADER_LEN..RECORD_HEADER_LEN + k)
        .unwrap_or_default();
    let value = b
        .get(RECORD_HEADER_LEN + k..RECORD_HEADER_LEN + k + v)
        .unwrap_or_default();
    Ok(Record {
        seq: SeqNo(le_u64(b, R_SEQ)),
        kind,
        prev: le_u64(b, R_PREV),
        key: key.to_vec(),
        value: value.to_vec(),
    })
}
