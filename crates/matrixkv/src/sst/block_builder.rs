//! [`BlockBuilder`]: encodes sorted entries into a data or index block with shared-prefix
//! compression and restart points (docs/format/sst.md, section "Data blocks").
//!
//! Entry: `varint shared | varint non_shared | varint value_len | key[shared..] | value`.
//! Every `restart_interval`-th entry is a restart point and stores its whole key
//! (`shared = 0`). The block ends with the restart offsets (u32 each) and their count (u32).
//!
//! Used by `sst::builder`. Thread safety: one thread at a time.
#![deny(clippy::indexing_slicing)]

use crate::coding::{put_u32, put_varint32, varint_len};

/// Accumulates one block.
#[derive(Debug)]
pub struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    restart_interval: usize,
    counter: usize,
    entries: usize,
    last_key: Vec<u8>,
}

impl BlockBuilder {
    /// An empty block with a restart point every `restart_interval` (≥ 1) entries.
    pub fn new(restart_interval: usize) -> BlockBuilder {
        BlockBuilder {
            buf: Vec::new(),
            restarts: vec![0],
            restart_interval: restart_interval.max(1),
            counter: 0,
            entries: 0,
            last_key: Vec::new(),
        }
    }

    /// True when no entry was added since the last reset.
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Size the finished block would have.
    pub fn size_estimate(&self) -> usize {
        self.buf.len() + 4 * self.restarts.len() + 4
    }

    /// Appends an entry.
    ///
    /// # Preconditions
    /// `key` sorts after the previous key; the block stays below 4 GiB (the caller bounds
    /// entry sizes).
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        let shared = if self.counter < self.restart_interval {
            self.last_key
                .iter()
                .zip(key)
                .take_while(|(a, b)| a == b)
                .count()
        } else {
            self.restarts.push(offset_u32(self.buf.len()));
            self.counter = 0;
            0
        };
        let non_shared = key.get(shared..).unwrap_or_default();
        self.buf.reserve(
            varint_len(shared as u64)
                + varint_len(non_shared.len() as u64)
                + varint_len(value.len() as u64)
                + non_shared.len()
                + value.len(),
        );
        put_varint32(&mut self.buf, offset_u32(shared));
        put_varint32(&mut self.buf, offset_u32(non_shared.len()));
        put_varint32(&mut self.buf, offset_u32(value.len()));
        self.buf.extend_from_slice(non_shared);
        self.buf.extend_from_slice(value);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(non_shared);
        self.counter += 1;
        self.entries += 1;
    }

    /// Appends the restart array and returns the finished block contents. Call
    /// [`BlockBuilder::reset`] before adding again.
    pub fn finish(&mut self) -> &[u8] {
        for r in &self.restarts {
            put_u32(&mut self.buf, *r);
        }
        put_u32(&mut self.buf, offset_u32(self.restarts.len()));
        &self.buf
    }

    /// Empties the builder, keeping its buffers.
    pub fn reset(&mut self) {
        self.buf.clear();
        self.restarts.clear();
        self.restarts.push(0);
        self.counter = 0;
        self.entries = 0;
        self.last_key.clear();
    }
}

/// Converts a block-internal size to u32; block sizes are bounded far below 4 GiB by the
/// builder's entry-size limit.
fn offset_u32(n: usize) -> u32 {
    debug_assert!(u32::try_from(n).is_ok(), "block offset {n} over 4 GiB");
    u32::try_from(n).unwrap_or(u32::MAX)
}
