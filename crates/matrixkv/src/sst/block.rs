//! A decoded (verified, decompressed) data or index block and its cursor.
//!
//! [`Block::new`] validates the restart array once; [`BlockIter`] then walks the entries
//! with a reusable key buffer (no allocation per entry), binary-searches the restart points
//! on `seek`, and re-scans from the previous restart point on `prev`. Every entry read is
//! bounds-checked, so damaged bytes give a [`CorruptionReason`], never a panic; the caller
//! (`sst::reader`) adds the file and block offset. Keys are internal keys ordered by
//! [`compare_internal`]. Format: docs/format/sst.md, section "Data blocks".
//!
//! Thread safety: `Block` is immutable and shared through `Arc` (also by the block cache);
//! a `BlockIter` is used by one thread at a time.
#![deny(clippy::indexing_slicing)]

use std::cmp::Ordering;
use std::sync::Arc;

use crate::coding::{Decoder, get_u32};
use crate::error::CorruptionReason;
use crate::key::compare_internal;

/// A block's bytes with its parsed restart array.
pub struct Block {
    data: Vec<u8>,
    /// Offset of the restart array: entries occupy `data[..restarts_offset]`.
    restarts_offset: usize,
    restarts: Vec<u32>,
}

impl std::fmt::Debug for Block {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Block")
            .field("len", &self.data.len())
            .field("restarts", &self.restarts.len())
            .finish()
    }
}

impl Block {
    /// Parses the restart array of `data` (a whole block, without trailer): at least one
    /// restart point, the first at offset 0, strictly increasing, all inside the entry area.
    pub fn new(data: Vec<u8>) -> Result<Block, CorruptionReason> {
        let count_at = data
            .len()
            .checked_sub(4)
            .ok_or(CorruptionReason::Truncated)?;
        let n = get_u32(&data, count_at)? as usize;
        if n == 0 {
            return Err(CorruptionReason::Invalid("block has no restart points"));
        }
        let restarts_offset = n
            .checked_mul(4)
            .and_then(|b| count_at.checked_sub(b))
            .ok_or(CorruptionReason::BadLength)?;
        let mut restarts = Vec::with_capacity(n);
        let mut d = Decoder::new(data.get(restarts_offset..count_at).unwrap_or_default());
        for i in 0..n {
            let r = d.u32()?;
            let ok = if i == 0 {
                r == 0
            } else {
                restarts.last().is_some_and(|&prev| r > prev)
            };
            if !ok || r as usize >= restarts_offset {
                return Err(CorruptionReason::Invalid("bad restart point"));
            }
            restarts.push(r);
        }
        Ok(Block {
            data,
            restarts_offset,
            restarts,
        })
    }

    /// Bytes this block holds in memory, charged against the block cache.
    pub fn charge(&self) -> usize {
        self.data.capacity() + 4 * self.restarts.capacity() + std::mem::size_of::<Block>()
    }

    /// Checks what a forward scan does not see: every restart point starts an entry, and that
    /// entry stores its whole key (`shared = 0`). Seeks and backward steps start decoding at
    /// restart points, so one inside an entry would make them decode garbage. Walks every
    /// entry; called by `Table::verify` for data blocks and at open for the index.
    pub fn check_restarts(&self) -> Result<(), CorruptionReason> {
        let mut restarts = self.restarts.iter().map(|&r| r as usize).peekable();
        let mut p = 0usize;
        while p < self.restarts_offset {
            let (shared, non_shared, value_len, h) = self.header(p)?;
            if restarts.next_if_eq(&p).is_some() && shared != 0 {
                return Err(CorruptionReason::Invalid("restart entry shares a prefix"));
            }
            p = h
                .checked_add(non_shared)
                .and_then(|e| e.checked_add(value_len))
                .filter(|&e| e <= self.restarts_offset)
                .ok_or(CorruptionReason::BadLength)?;
            if restarts.peek().is_some_and(|&r| r < p) {
                return Err(CorruptionReason::Invalid("restart point inside an entry"));
            }
        }
        Ok(())
    }

    /// Decodes the entry header at `p`: `(shared, non_shared, value_len, header_end)`.
    fn header(&self, p: usize) -> Result<(usize, usize, usize, usize), CorruptionReason> {
        let s = self
            .data
            .get(p..self.restarts_offset)
            .ok_or(CorruptionReason::Truncated)?;
        // Fast path: all three varints fit in one byte each.
        if let [a, b, c, ..] = *s
            && (a | b | c) < 0x80
        {
            return Ok((a.into(), b.into(), c.into(), p + 3));
        }
        let mut d = Decoder::new(s);
        let shared = d.varint32()? as usize;
        let non_shared = d.varint32()? as usize;
        let value_len = d.varint32()? as usize;
        Ok((shared, non_shared, value_len, p + d.position()))
    }

    /// The whole key stored at restart point `i` (which has `shared == 0`).
    fn restart_key(&self, i: usize) -> Result<&[u8], CorruptionReason> {
        let p = *self.restarts.get(i).ok_or(CorruptionReason::BadLength)? as usize;
        let (shared, non_shared, value_len, h) = self.header(p)?;
        if shared != 0 {
            return Err(CorruptionReason::Invalid("restart entry shares a prefix"));
        }
        let key_end = h
            .checked_add(non_shared)
            .ok_or(CorruptionReason::BadLength)?;
        if key_end
            .checked_add(value_len)
            .is_none_or(|e| e > self.restarts_offset)
        {
            return Err(CorruptionReason::BadLength);
        }
        self.data.get(h..key_end).ok_or(CorruptionReason::BadLength)
    }
}

/// A cursor over one block's entries.
#[derive(Debug)]
pub struct BlockIter {
    block: Arc<Block>,
    /// Offset of the current entry; `block.restarts_offset` when not positioned.
    current: usize,
    /// Offset just past the current entry.
    next: usize,
    /// Index of the restart point at or before `current`.
    restart_index: usize,
    key: Vec<u8>,
    value_start: usize,
    value_end: usize,
}

impl BlockIter {
    /// An unpositioned cursor over `block`.
    pub fn new(block: Arc<Block>) -> BlockIter {
        let end = block.restarts_offset;
        BlockIter {
            block,
            current: end,
            next: end,
            restart_index: 0,
            key: Vec::new(),
            value_start: 0,
            value_end: 0,
        }
    }

    /// Switches to another block, keeping the key buffer; the cursor is unpositioned.
    pub fn reset(&mut self, block: Arc<Block>) {
        self.block = block;
        self.invalidate();
    }

    /// Makes the cursor unpositioned.
    pub fn invalidate(&mut self) {
        self.current = self.block.restarts_offset;
        self.next = self.current;
        self.restart_index = 0;
        self.key.clear();
    }

    /// True when positioned at an entry.
    pub fn valid(&self) -> bool {
        self.current < self.block.restarts_offset
    }

    /// The current key. Requires `valid()`.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The current value. Requires `valid()`.
    pub fn value(&self) -> &[u8] {
        self.block
            .data
            .get(self.value_start..self.value_end)
            .unwrap_or_default()
    }

    fn seek_to_restart(&mut self, i: usize) {
        self.key.clear();
        self.restart_index = i;
        self.next = self.block.restarts.get(i).map_or(0, |&r| r as usize);
    }

    /// Decodes the entry at `self.next`, or becomes unpositioned at the end of the block.
    fn parse_next(&mut self) -> Result<(), CorruptionReason> {
        let r = self.parse_next_inner();
        if r.is_err() {
            self.invalidate();
        }
        r
    }

    fn parse_next_inner(&mut self) -> Result<(), CorruptionReason> {
        let block = &*self.block;
        self.current = self.next;
        if self.current >= block.restarts_offset {
            self.current = block.restarts_offset;
            return Ok(());
        }
        let (shared, non_shared, value_len, h) = block.header(self.current)?;
        if shared > self.key.len() {
            return Err(CorruptionReason::Invalid(
                "entry shares more than the previous key",
            ));
        }
        let key_end = h
            .checked_add(non_shared)
            .ok_or(CorruptionReason::BadLength)?;
        let value_end = key_end
            .checked_add(value_len)
            .filter(|&e| e <= block.restarts_offset)
            .ok_or(CorruptionReason::BadLength)?;
        let delta = block
            .data
            .get(h..key_end)
            .ok_or(CorruptionReason::BadLength)?;
        self.key.truncate(shared);
        self.key.extend_from_slice(delta);
        self.value_start = key_end;
        self.value_end = value_end;
        self.next = value_end;
        while self
            .block
            .restarts
            .get(self.restart_index + 1)
            .is_some_and(|&r| (r as usize) <= self.current)
        {
            self.restart_index += 1;
        }
        Ok(())
    }

    /// Positions at the first entry.
    pub fn seek_to_first(&mut self) -> Result<(), CorruptionReason> {
        self.seek_to_restart(0);
        self.parse_next()
    }

    /// Positions at the last entry.
    pub fn seek_to_last(&mut self) -> Result<(), CorruptionReason> {
        self.seek_to_restart(self.block.restarts.len().saturating_sub(1));
        self.parse_next()?;
        while self.valid() && self.next < self.block.restarts_offset {
            self.parse_next()?;
        }
        Ok(())
    }

    /// Moves to the next entry (unpositioned after the last). Requires `valid()`.
    pub fn next(&mut self) -> Result<(), CorruptionReason> {
        debug_assert!(self.valid());
        self.parse_next()
    }

    /// Moves to the previous entry (unpositioned before the first). Requires `valid()`.
    pub fn prev(&mut self) -> Result<(), CorruptionReason> {
        debug_assert!(self.valid());
        let original = self.current;
        let mut ri = self.restart_index;
        // Find the last restart point strictly before the current entry.
        while self
            .block
            .restarts
            .get(ri)
            .is_none_or(|&r| r as usize >= original)
        {
            if ri == 0 {
                self.invalidate();
                return Ok(());
            }
            ri -= 1;
        }
        self.seek_to_restart(ri);
        loop {
            self.parse_next()?;
            if !self.valid() || self.next >= original {
                return Ok(());
            }
        }
    }

    /// Positions at the first entry whose key is ≥ `target` (unpositioned if none).
    pub fn seek(&mut self, target: &[u8]) -> Result<(), CorruptionReason> {
        // Binary search for the last restart point whose key is < target.
        let mut left = 0usize;
        let mut right = self.block.restarts.len().saturating_sub(1);
        while left < right {
            let mid = left + (right - left).div_ceil(2);
            let k = match self.block.restart_key(mid) {
                Ok(k) => k,
                Err(e) => {
                    self.invalidate();
                    return Err(e);
                }
            };
            if compare_internal(k, target) == Ordering::Less {
                left = mid;
            } else {
                right = mid - 1;
            }
        }
        self.seek_to_restart(left);
        loop {
            self.parse_next()?;
            if !self.valid() || compare_internal(&self.key, target) != Ordering::Less {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::block_builder::BlockBuilder;
    use super::*;
    use crate::key::{SeqNo, ValueKind, make_internal_key};

    fn ikey(i: u32) -> Vec<u8> {
        make_internal_key(format!("key{i:05}").as_bytes(), SeqNo(7), ValueKind::Value)
    }

    fn build(n: u32, interval: usize) -> Arc<Block> {
        let mut b = BlockBuilder::new(interval);
        for i in 0..n {
            b.add(&ikey(i * 2), format!("v{i}").as_bytes());
        }
        Arc::new(Block::new(b.finish().to_vec()).unwrap())
    }

    #[test]
    fn forward_and_backward_walks_visit_every_entry() {
        for interval in [1, 2, 16] {
            let block = build(50, interval);
            let mut it = BlockIter::new(block);
            it.seek_to_first().unwrap();
            let mut seen = 0;
            while it.valid() {
                assert_eq!(it.key(), ikey(seen * 2));
                assert_eq!(it.value(), format!("v{seen}").as_bytes());
                seen += 1;
                it.next().unwrap();
            }
            assert_eq!(seen, 50);
            it.seek_to_last().unwrap();
            let mut i = 50;
            while it.valid() {
                i -= 1;
                assert_eq!(it.key(), ikey(i * 2));
                it.prev().unwrap();
            }
            assert_eq!(i, 0);
        }
    }

    #[test]
    fn seek_lands_on_the_first_key_not_less_than_the_target() {
        let block = build(40, 4);
        let mut it = BlockIter::new(block);
        for t in 0..82 {
            it.seek(&ikey(t)).unwrap();
            if t >= 79 {
                assert!(!it.valid(), "{t}");
            } else {
                assert_eq!(it.key(), ikey(t.div_ceil(2) * 2), "{t}");
            }
        }
    }

    #[test]
    fn damaged_restart_arrays_are_rejected() {
        assert!(Block::new(vec![]).is_err());
        assert!(Block::new(vec![0, 0, 0, 0]).is_err()); // zero restarts
        assert!(Block::new(vec![0, 0, 0, 0, 1, 0, 0, 0]).is_err()); // no entry area
        assert!(Block::new(vec![9, 0xff, 0xff, 0xff, 0x7f]).is_err()); // huge count
        let mut ok = build(3, 1).data.clone();
        let n = ok.len();
        ok[n - 8] = 0xee; // last restart point beyond the entries
        assert!(Block::new(ok).is_err());
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        let mut x = 0x9e37_79b9_u64;
        let mut entries_read = 0;
        for round in 0..2000u32 {
            let len = (round % 64) as usize + 8;
            let mut data: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            // Make the restart count plausible so parsing gets past the header often.
            let n = data.len();
            data[n - 4..].copy_from_slice(&1u32.to_le_bytes());
            data[n - 8..n - 4].copy_from_slice(&0u32.to_le_bytes());
            // ...and the first entry header too, so the entry decoder sees garbage after it.
            data[0] = 0;
            data[1] %= 6;
            data[2] %= 6;
            if let Ok(b) = Block::new(data) {
                let mut it = BlockIter::new(Arc::new(b));
                let _ = it.seek(&ikey(3));
                if it.seek_to_first().is_ok() {
                    for _ in 0..8 {
                        if !it.valid() {
                            break;
                        }
                        entries_read += 1;
                        if it.next().is_err() {
                            break;
                        }
                    }
                }
                if it.seek_to_last().is_ok() && it.valid() {
                    let _ = it.prev();
                }
            }
        }
        // The garbage must have reached the entry decoder, not only the header checks.
        assert!(entries_read > 100, "only {entries_read} entries decoded");
    }
}
