//! Recomputes the checksums (and the few self-describing lengths) of a possibly mutated
//! artifact, so that the second pass of each fuzzing entry point reaches the parsing behind the
//! checksums. Each function walks the artifact only as far as its own structure can be found,
//! and returns the repaired copy, or `None` when nothing changed.
//!
//! Called only by the `fuzzing` entry points; pure functions. Never panics on any input.
#![deny(clippy::indexing_slicing)]

use std::sync::Arc;

use crate::blob;
use crate::checksum::{checksum, checksum2};
use crate::coding::{get_u32, get_u64};
use crate::matrix::row_table::format::{COMMIT_MAGIC, ENTRY_LEN, HEADER_CRC_OFFSET, HEADER_LEN};
use crate::record;
use crate::sst::block::{Block, BlockIter};
use crate::sst::format::{BLOCK_TRAILER_LEN, BLOCK_TYPE_NONE, BlockHandle, FOOTER_LEN};

fn changed(old: &[u8], new: Vec<u8>) -> Option<Vec<u8>> {
    (new != old).then_some(new)
}

fn put_u32_at(buf: &mut [u8], at: usize, v: u32) {
    if let Some(dst) = buf.get_mut(at..at.saturating_add(4)) {
        dst.copy_from_slice(&v.to_le_bytes());
    }
}

fn put_u64_at(buf: &mut [u8], at: usize, v: u64) {
    if let Some(dst) = buf.get_mut(at..at.saturating_add(8)) {
        dst.copy_from_slice(&v.to_le_bytes());
    }
}

fn usize_at(buf: &[u8], at: usize) -> Option<usize> {
    get_u64(buf, at).ok().and_then(|v| usize::try_from(v).ok())
}

/// Fixes the checksum of every framed record (docs/format/wal.md, "Record") from `start` on,
/// up to an all-zero header or a length beyond the buffer, under `seed`.
fn records(buf: &mut [u8], start: usize, seed: record::Seed) {
    let mut off = start;
    loop {
        let Some(header) = buf.get(off..off.saturating_add(record::HEADER_LEN)) else {
            return;
        };
        if header.iter().all(|&b| b == 0) {
            return;
        }
        let Ok(len) = get_u32(header, 4) else {
            return;
        };
        let begin = off + record::HEADER_LEN;
        let end = begin.saturating_add(len as usize);
        let Some(payload) = buf.get(begin..end) else {
            return;
        };
        let crc = record::record_checksum(seed, &len.to_le_bytes(), payload);
        put_u32_at(buf, off, crc);
        off = end;
    }
}

/// A WAL segment: the header's region length becomes the input's, its checksum and every
/// record's are recomputed (seeded with the header's segment number unless the header says
/// version 1).
pub(super) fn wal(data: &[u8]) -> Option<Vec<u8>> {
    let mut buf = data.to_vec();
    if buf.len() >= 64 {
        let len = buf.len() as u64;
        put_u64_at(&mut buf, 24, len);
        let crc = checksum(buf.get(..32).unwrap_or_default());
        put_u32_at(&mut buf, 32, crc);
        let seed = match (get_u32(&buf, 8), get_u64(&buf, 16)) {
            (Ok(1), _) | (_, Err(_)) => record::Seed::None,
            (_, Ok(number)) => record::Seed::Number(number),
        };
        records(&mut buf, 64, seed);
    }
    changed(data, buf)
}

/// A manifest: every record's checksum.
pub(super) fn manifest(data: &[u8]) -> Option<Vec<u8>> {
    let mut buf = data.to_vec();
    records(&mut buf, 0, record::Seed::None);
    changed(data, buf)
}

/// Fixes the trailer checksum of the block at `h` (which must end before `limit`) and returns
/// its contents if it is stored raw.
fn sst_block(buf: &mut [u8], h: BlockHandle, limit: usize) -> Option<Vec<u8>> {
    let start = usize::try_from(h.offset).ok()?;
    let end = start.checked_add(usize::try_from(h.size).ok()?)?;
    if end.checked_add(BLOCK_TRAILER_LEN)? > limit {
        return None;
    }
    let block_type = *buf.get(end)?;
    let stored = buf.get(start..end)?;
    let crc = checksum2(stored, &[block_type]);
    let contents = (block_type == BLOCK_TYPE_NONE).then(|| stored.to_vec());
    put_u32_at(buf, end + 1, crc);
    contents
}

/// An SSTable: every block the footer and the index lead to, then the footer.
pub(super) fn sst(data: &[u8]) -> Option<Vec<u8>> {
    let mut buf = data.to_vec();
    let footer_at = buf.len().checked_sub(FOOTER_LEN)?;
    let handle = |i: usize| {
        Some(BlockHandle {
            offset: get_u64(data, footer_at + 16 * i).ok()?,
            size: get_u64(data, footer_at + 16 * i + 8).ok()?,
        })
    };
    let (filter, properties, index) = (handle(0), handle(1), handle(2));
    for h in [filter, properties].into_iter().flatten() {
        sst_block(&mut buf, h, footer_at);
    }
    if let Some(raw) = index.and_then(|h| sst_block(&mut buf, h, footer_at))
        && let Ok(block) = Block::new(raw)
    {
        let mut it = BlockIter::new(Arc::new(block));
        let mut ok = it.seek_to_first().is_ok();
        while ok && it.valid() {
            if let Ok(h) = BlockHandle::decode_varint(it.value()) {
                sst_block(&mut buf, h, footer_at);
            }
            ok = it.next().is_ok();
        }
    }
    let crc = checksum(buf.get(footer_at..footer_at + 56).unwrap_or_default());
    put_u32_at(&mut buf, footer_at + 56, crc);
    changed(data, buf)
}

/// One RowTable's logical bytes: value checksums, metadata and filter checksums, header
/// checksum and commit word, each as far as the bytes reach.
fn row(buf: &mut [u8]) {
    if buf.len() < HEADER_LEN {
        return;
    }
    let field = |buf: &[u8], at| usize_at(buf, at).unwrap_or(usize::MAX);
    let n = field(buf, 40);
    let keys = n
        .checked_mul(ENTRY_LEN)
        .and_then(|e| e.checked_add(HEADER_LEN));
    let filter_at = keys.and_then(|k| k.checked_add(field(buf, 48)));
    let values_at = filter_at.and_then(|f| f.checked_add(field(buf, 84)));
    if let Some(values_at) = values_at {
        for i in 0..n.min(buf.len() / ENTRY_LEN) {
            let e = HEADER_LEN + i * ENTRY_LEN;
            let (Some(off), Ok(len)) = (usize_at(buf, e), get_u32(buf, e + 8)) else {
                break;
            };
            let Some(start) = values_at.checked_add(off) else {
                continue;
            };
            if let Some(value) = buf.get(start..start.saturating_add(len as usize)) {
                let crc = checksum(value);
                put_u32_at(buf, e + 24, crc);
            }
        }
    }
    if let Some(meta) = keys
        .zip(filter_at)
        .and_then(|(_, f)| buf.get(HEADER_LEN..f))
    {
        let crc = checksum(meta);
        put_u32_at(buf, 80, crc);
    }
    if let Some(filter) = filter_at.zip(values_at).and_then(|(f, v)| buf.get(f..v)) {
        let crc = if filter.is_empty() {
            0
        } else {
            checksum(filter)
        };
        put_u32_at(buf, 92, crc);
    }
    let crc = checksum(buf.get(..HEADER_CRC_OFFSET).unwrap_or_default());
    put_u32_at(buf, HEADER_CRC_OFFSET, crc);
    let row = get_u64(buf, 16).unwrap_or(0);
    put_u64_at(buf, 120, COMMIT_MAGIC ^ row);
}

/// A RowTable, and its previous row if one follows it (see `row_table`).
pub(super) fn rows(data: &[u8]) -> Option<Vec<u8>> {
    let (newer, older) = super::split_rows(data);
    let mut a = newer.to_vec();
    row(&mut a);
    if let Some(older) = older {
        let mut b = older.to_vec();
        row(&mut b);
        a.extend_from_slice(&b);
    }
    changed(data, a)
}

/// A blob file: header, every record up to the footer, then the footer, whose figures are
/// set to the records found when they tile the space between header and footer.
pub(super) fn blob(data: &[u8]) -> Option<Vec<u8>> {
    let mut buf = data.to_vec();
    let footer_at = buf.len().checked_sub(blob::FOOTER_LEN)?;
    if footer_at < blob::HEADER_LEN {
        return None;
    }
    let crc = checksum(buf.get(..20).unwrap_or_default());
    put_u32_at(&mut buf, 20, crc);
    let mut at = blob::HEADER_LEN;
    let mut count = 0u64;
    while at < footer_at {
        let Some(rest) = buf.get(at..footer_at) else {
            break;
        };
        let Some(len) = blob::record_len_at(rest).ok().filter(|&l| l <= rest.len()) else {
            break;
        };
        let crc = checksum(rest.get(4..len).unwrap_or_default());
        put_u32_at(&mut buf, at, crc);
        at += len.max(1);
        count += 1;
    }
    if at == footer_at {
        put_u64_at(&mut buf, footer_at, count);
        put_u64_at(
            &mut buf,
            footer_at + 8,
            (footer_at - blob::HEADER_LEN) as u64,
        );
    }
    let crc = checksum(buf.get(footer_at..footer_at + 16).unwrap_or_default());
    put_u32_at(&mut buf, footer_at + 16, crc);
    changed(data, buf)
}
