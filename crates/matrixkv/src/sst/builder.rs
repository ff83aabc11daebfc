//! [`Builder`]: writes one SSTable from entries given in internal-key order.
//!
//! Called by flush and compaction. Data blocks are cut when they reach `block_bytes`
//! (a block holding one large entry may exceed it), compressed per [`TableOptions`], and
//! appended whole with their trailer. `finish` then writes the filter, properties and index
//! blocks and the footer, and syncs the file. Layout: docs/format/sst.md.
//!
//! Thread safety: a `Builder` is used by one thread at a time (it is `Send`).
#![deny(clippy::indexing_slicing)]

use std::cmp::Ordering;
use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::key::{SeqNo, ValueKind, compare_internal, pack_tag, parse_internal_key, user_key};
use crate::tier::WritableFile;

use super::TableOptions;
use super::block_builder::BlockBuilder;
use super::compression::{BlockCompressor, Compression};
use super::filter::FilterBuilder;
use super::format::{
    BLOCK_TRAILER_LEN, BLOCK_TYPE_NONE, BlockHandle, Footer, INDEX_RESTART_INTERVAL,
    TableProperties, block_trailer,
};

/// Largest `key.len() + value.len()` of one entry, so every block stays far below the 4 GiB
/// that its u32 restart offsets can address.
pub const MAX_ENTRY_BYTES: usize = 1 << 30;

/// What a finished table holds, for the manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSummary {
    /// File size in bytes.
    pub size: u64,
    /// Number of entries.
    pub entries: u64,
    /// The smallest internal key.
    pub smallest: Vec<u8>,
    /// The largest internal key.
    pub largest: Vec<u8>,
    /// Smallest sequence number of any entry.
    pub smallest_seq: SeqNo,
    /// Largest sequence number of any entry.
    pub largest_seq: SeqNo,
    /// With [`Builder::recording_keys`]: every user key's first (newest) entry and the data
    /// block holding it, in key order; empty otherwise.
    pub keys: Vec<KeyBlock>,
}

/// A user key's first entry in a table and the data block holding it (what a global index
/// maps the key to), recorded while the table is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyBlock {
    /// The user key.
    pub user_key: Vec<u8>,
    /// The entry's kind.
    pub kind: ValueKind,
    /// The entry's sequence number.
    pub seq: SeqNo,
    /// Offset of the data block.
    pub offset: u64,
    /// Stored size of the data block.
    pub size: u64,
}

/// A recorded user key, its first entry's kind and sequence number, and the index of its data
/// block among those written (the block's handle is known once it is written).
type PendingKey = (Vec<u8>, ValueKind, SeqNo, usize);

/// Writes one SSTable.
pub struct Builder {
    file: Box<dyn WritableFile>,
    path: PathBuf,
    opts: TableOptions,
    /// Bytes written so far (the offset of the next block).
    offset: u64,
    data: BlockBuilder,
    index: BlockBuilder,
    filter: Option<FilterBuilder>,
    /// Handle of the last flushed data block, whose index entry waits for the next key
    /// (so the separator can be shortened).
    pending_handle: Option<BlockHandle>,
    last_key: Vec<u8>,
    smallest: Vec<u8>,
    props: TableProperties,
    compressor: BlockCompressor,
    /// Chooses each data block's codec (`None`: the table's for every block).
    codecs: Option<std::sync::Arc<dyn super::compression::BlockCodecs>>,
    /// Scratch buffers reused across blocks.
    compressed: Vec<u8>,
    separator: Vec<u8>,
    handle_buf: Vec<u8>,
    /// [`Builder::recording_keys`]: each user key's first entry with the index of its data
    /// block, and the handles of the data blocks written.
    recording: Option<(Vec<PendingKey>, Vec<BlockHandle>)>,
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("path", &self.path)
            .field("offset", &self.offset)
            .field("entries", &self.props.entries)
            .finish_non_exhaustive()
    }
}

impl Builder {
    /// A builder writing to `file` (created empty by the caller); `path` names the file in
    /// errors. Fails with [`Error::InvalidArgument`] if `opts` are invalid (for example zstd in
    /// a build without the `zstd` feature).
    pub fn new(file: Box<dyn WritableFile>, path: PathBuf, opts: &TableOptions) -> Result<Builder> {
        opts.validate()?;
        Ok(Builder {
            file,
            path,
            opts: opts.clone(),
            offset: 0,
            data: BlockBuilder::new(opts.restart_interval),
            index: BlockBuilder::new(INDEX_RESTART_INTERVAL),
            filter: (opts.bloom_bits_per_key > 0)
                .then(|| FilterBuilder::new(opts.bloom_bits_per_key)),
            pending_handle: None,
            last_key: Vec::new(),
            smallest: Vec::new(),
            props: TableProperties {
                smallest_seq: SeqNo::MAX,
                compression: opts.compression,
                bloom_bits_per_key: opts.bloom_bits_per_key,
                ..TableProperties::default()
            },
            compressor: BlockCompressor::new(opts.compression),
            codecs: None,
            compressed: Vec::new(),
            separator: Vec::new(),
            handle_buf: Vec::new(),
            recording: None,
        })
    }

    /// Records each user key's first entry and its data block, returned by
    /// [`Builder::finish`] in [`TableSummary::keys`] (a global index is filled from them
    /// without reading the table back).
    pub(crate) fn recording_keys(mut self) -> Builder {
        self.recording = Some((Vec::new(), Vec::new()));
        self
    }

    /// Lets `codecs` choose the codec of each data block (keyspaces with their own
    /// compression); the table's properties keep `TableOptions::compression`.
    pub(crate) fn with_codecs(
        mut self,
        codecs: Option<std::sync::Arc<dyn super::compression::BlockCodecs>>,
    ) -> Builder {
        self.codecs = codecs;
        self
    }

    /// Adds an entry.
    ///
    /// # Preconditions
    /// `ikey` is a valid internal key that sorts strictly after the previous one
    /// ([`compare_internal`]); a violation is a caller bug (it panics in debug builds and
    /// returns [`Error::InvalidArgument`] otherwise). `ikey.len() + value.len()` is at most
    /// [`MAX_ENTRY_BYTES`].
    ///
    /// After any error the table is incomplete: drop the builder and remove the file.
    pub fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        let parsed = parse_internal_key(ikey)
            .map_err(|r| Error::invalid(format!("SSTable key is not an internal key: {r}")))?;
        if self.props.entries > 0 {
            let ord = compare_internal(ikey, &self.last_key);
            debug_assert_eq!(
                ord,
                Ordering::Greater,
                "SSTable keys must strictly increase"
            );
            if ord != Ordering::Greater {
                return Err(Error::invalid(
                    "SSTable keys must be added in strictly increasing internal-key order",
                ));
            }
        }
        if ikey.len().saturating_add(value.len()) > MAX_ENTRY_BYTES {
            return Err(Error::invalid(format!(
                "SSTable entry of {} bytes exceeds the {MAX_ENTRY_BYTES} byte limit",
                ikey.len().saturating_add(value.len())
            )));
        }
        if let Some(h) = self.pending_handle.take() {
            shortest_separator(&self.last_key, ikey, &mut self.separator);
            self.handle_buf.clear();
            h.encode_varint(&mut self.handle_buf);
            self.index.add(&self.separator, &self.handle_buf);
        }
        let new_user_key = self.props.entries == 0 || user_key(&self.last_key) != parsed.user_key;
        if let Some(f) = &mut self.filter
            && new_user_key
        {
            f.add(parsed.user_key);
        }
        if let Some((keys, handles)) = &mut self.recording
            && new_user_key
        {
            keys.push((
                parsed.user_key.to_vec(),
                parsed.kind,
                parsed.seq,
                handles.len(),
            ));
        }
        self.data.add(ikey, value);

        if self.props.entries == 0 {
            self.smallest.clear();
            self.smallest.extend_from_slice(ikey);
        }
        self.last_key.clear();
        self.last_key.extend_from_slice(ikey);
        let p = &mut self.props;
        p.entries += 1;
        if parsed.kind == ValueKind::Deletion {
            p.deletions += 1;
        }
        p.raw_key_bytes += ikey.len() as u64;
        p.raw_value_bytes += value.len() as u64;
        p.smallest_seq = p.smallest_seq.min(parsed.seq);
        p.largest_seq = p.largest_seq.max(parsed.seq);

        if self.data.size_estimate() >= self.opts.block_bytes {
            self.flush_data_block()?;
        }
        Ok(())
    }

    /// Approximate size of the file if finished now.
    pub fn estimated_size(&self) -> u64 {
        self.offset
            + self.data.size_estimate() as u64
            + self.index.size_estimate() as u64
            + self
                .filter
                .as_ref()
                .map_or(0, FilterBuilder::estimated_bytes)
    }

    fn flush_data_block(&mut self) -> Result<()> {
        if self.data.is_empty() {
            return Ok(());
        }
        if let Some(c) = &self.codecs {
            let user = crate::key::user_key(&self.last_key);
            let codec = c.codec_for(user).unwrap_or(self.opts.compression);
            self.compressor.set_codec(codec);
        }
        let raw = self.data.finish();
        let handle = write_block(
            &mut *self.file,
            &mut self.offset,
            &mut self.compressed,
            raw,
            Some(&mut self.compressor),
        )?;
        self.data.reset();
        if let Some((_, handles)) = &mut self.recording {
            handles.push(handle);
        }
        self.pending_handle = Some(handle);
        self.props.data_blocks += 1;
        Ok(())
    }

    /// Writes the remaining data block, the filter, properties and index blocks and the
    /// footer, then syncs the file.
    ///
    /// An empty table is rejected with [`Error::InvalidArgument`] (nothing is written then;
    /// the caller removes the file).
    pub fn finish(mut self) -> Result<TableSummary> {
        if self.props.entries == 0 {
            return Err(Error::invalid("an SSTable must hold at least one entry"));
        }
        self.flush_data_block()?;
        if let Some(h) = self.pending_handle.take() {
            shortest_successor(&self.last_key, &mut self.separator);
            self.handle_buf.clear();
            h.encode_varint(&mut self.handle_buf);
            self.index.add(&self.separator, &self.handle_buf);
        }
        let filter = match &self.filter {
            Some(f) => write_block(
                &mut *self.file,
                &mut self.offset,
                &mut self.compressed,
                &f.finish(),
                None,
            )?,
            None => BlockHandle::default(),
        };
        let properties = write_block(
            &mut *self.file,
            &mut self.offset,
            &mut self.compressed,
            &self.props.encode(),
            None,
        )?;
        let index = write_block(
            &mut *self.file,
            &mut self.offset,
            &mut self.compressed,
            self.index.finish(),
            None,
        )?;
        let footer = Footer {
            filter,
            properties,
            index,
        }
        .encode();
        self.file.append(&footer)?;
        self.offset += footer.len() as u64;
        self.file.sync()?;
        let keys = match self.recording.take() {
            Some((keys, handles)) => keys
                .into_iter()
                .map(|(user_key, kind, seq, block)| {
                    let h = handles.get(block).copied().unwrap_or_default();
                    KeyBlock {
                        user_key,
                        kind,
                        seq,
                        offset: h.offset,
                        size: h.size,
                    }
                })
                .collect(),
            None => Vec::new(),
        };
        Ok(TableSummary {
            size: self.offset,
            entries: self.props.entries,
            smallest: self.smallest,
            largest: self.last_key,
            smallest_seq: self.props.smallest_seq,
            largest_seq: self.props.largest_seq,
            keys,
        })
    }
}

/// Appends `raw` (compressed by `compressor`, if given, when that saves ≥ 12.5%) and its
/// trailer; returns the block's handle and advances `offset`.
fn write_block(
    file: &mut dyn WritableFile,
    offset: &mut u64,
    scratch: &mut Vec<u8>,
    raw: &[u8],
    compressor: Option<&mut BlockCompressor>,
) -> Result<BlockHandle> {
    let codec = compressor.as_ref().map_or(Compression::None, |c| c.codec());
    let compressed = compressor.is_some_and(|c| c.compress(raw, scratch));
    let (stored, block_type) = if compressed {
        (&scratch[..], codec.block_type())
    } else {
        (raw, BLOCK_TYPE_NONE)
    };
    file.append(stored)?;
    file.append(&block_trailer(stored, block_type))?;
    let handle = BlockHandle {
        offset: *offset,
        size: stored.len() as u64,
    };
    *offset += (stored.len() + BLOCK_TRAILER_LEN) as u64;
    Ok(handle)
}

/// The tag appended to a shortened user key: the largest sequence number sorts first among
/// all versions of that user key. The kind byte is fixed by the format (docs/format/sst.md)
/// at `Value` (1); which kind it is does not matter, because no stored key has the shortened
/// user key.
fn separator_tag() -> [u8; 8] {
    pack_tag(SeqNo::MAX, ValueKind::Value).to_le_bytes()
}

/// Sets `out` to an internal key `s` with `a <= s < b` that is as short as cheaply possible
/// (LevelDB `FindShortestSeparator`): if the user keys differ at byte `n` and `a[n] + 1 <
/// b[n]`, `s` is `a[..n] ++ (a[n] + 1)` with the largest tag; otherwise `s = a`.
///
/// # Preconditions
/// `a < b` in internal-key order.
pub fn shortest_separator(a: &[u8], b: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let (ua, ub) = (user_key(a), user_key(b));
    let n = ua.iter().zip(ub).take_while(|(x, y)| x == y).count();
    if let (Some(&x), Some(&y)) = (ua.get(n), ub.get(n))
        && x < 0xff
        && x + 1 < y
        && n + 1 < ua.len()
    {
        out.extend_from_slice(ua.get(..n).unwrap_or_default());
        out.push(x + 1);
        out.extend_from_slice(&separator_tag());
        debug_assert_eq!(compare_internal(a, out), Ordering::Less);
        debug_assert_eq!(compare_internal(out, b), Ordering::Less);
        return;
    }
    out.extend_from_slice(a);
}

/// Sets `out` to a short internal key `s >= a` (LevelDB `FindShortSuccessor`): the user key
/// cut after its first byte that is not 0xff, that byte incremented, with the largest tag;
/// `s = a` when that would not be shorter.
pub fn shortest_successor(a: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let ua = user_key(a);
    if let Some(n) = ua.iter().position(|&x| x != 0xff)
        && n + 1 < ua.len()
    {
        out.extend_from_slice(ua.get(..n).unwrap_or_default());
        out.push(ua.get(n).map_or(0, |x| x + 1));
        out.extend_from_slice(&separator_tag());
        debug_assert_eq!(compare_internal(a, out), Ordering::Less);
        return;
    }
    out.extend_from_slice(a);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::make_internal_key;

    fn ik(u: &[u8], seq: u64) -> Vec<u8> {
        make_internal_key(u, SeqNo(seq), ValueKind::Value)
    }

    #[test]
    fn separator_is_shortened_between_distant_user_keys() {
        let mut out = Vec::new();
        shortest_separator(&ik(b"abcdefg", 5), &ik(b"abzzz", 9), &mut out);
        assert_eq!(user_key(&out), b"abd");
        // Adjacent bytes, a prefix, or equal user keys leave the key unchanged.
        for (a, b) in [
            (ik(b"abc1", 5), ik(b"abc2", 5)),
            (ik(b"ab", 5), ik(b"abc", 5)),
            (ik(b"same", 9), ik(b"same", 3)),
        ] {
            shortest_separator(&a, &b, &mut out);
            assert_eq!(out, a);
        }
    }

    #[test]
    fn successor_is_shortened_after_the_first_non_ff_byte() {
        let mut out = Vec::new();
        shortest_successor(&ik(b"\xff\x10rest", 1), &mut out);
        assert_eq!(user_key(&out), b"\xff\x11");
        assert_eq!(
            compare_internal(&ik(b"\xff\x10rest", 1), &out),
            Ordering::Less
        );
        shortest_successor(&ik(b"\xff\xff", 1), &mut out);
        assert_eq!(out, ik(b"\xff\xff", 1));
    }
}
