//! Key-value separation at flush (`Options::separate_at_flush`): the values of a flushed
//! memtable that reach their keyspace's `min_blob_bytes` go to blob files on the slow tier,
//! and the RowTable receives the keys with blob pointers (kind `BlobIndex`), as column
//! compaction would have written them. Each such value is then written once to each tier (the
//! WAL, the blob file) instead of three times (WAL, RowTable, blob file), and column compaction
//! moves keys and pointers only (docs/decisions/0022-values-separated-at-flush.md).
//!
//! The blob files are synced before the flush's manifest edit names them, in the same edit as
//! the row; until then they are pending outputs, and a crash or an error leaves them orphans
//! that obsolete-file deletion removes.

use std::borrow::Cow;

use super::DbInner;
use super::compact::{MergeOutput, parse_key};
use super::jobs::ReservedOutputs;
use crate::blob::writer::BlobWriter;
use crate::error::{ArtifactKind, Result};
use crate::key::{self, ValueKind};
use crate::memtable::MemEntry;

/// A RowTable's entries: `(internal key, value)`, borrowed from the memtable or rewritten
/// into a pointer.
pub(crate) type RowEntries<'a> = Vec<(Cow<'a, [u8]>, Cow<'a, [u8]>)>;

/// The entries of a flushed memtable as the RowTable receives them.
pub(crate) struct FlushedEntries<'a> {
    /// The entries, in internal-key order.
    pub entries: RowEntries<'a>,
    /// The blob files written (empty without separation).
    pub blobs: MergeOutput,
}

impl FlushedEntries<'_> {
    /// Iterates the entries as the row writer takes them.
    pub(crate) fn pairs(&self) -> impl Iterator<Item = (&[u8], &[u8])> + Clone {
        self.entries.iter().map(|(k, v)| (&**k, &**v))
    }
}

impl DbInner {
    /// The entries of a flush: `entries` as they are, or with their values separated into
    /// blob files when `Options::separate_at_flush` is set, their numbers reserved in
    /// `outputs` (on error, the blob files written so far become orphans that obsolete-file
    /// deletion removes once the caller drops `outputs`).
    pub(crate) fn flushed_entries<'a>(
        &self,
        entries: &'a [MemEntry],
        outputs: &mut ReservedOutputs<'_>,
    ) -> Result<FlushedEntries<'a>> {
        let borrowed = |e: &'a MemEntry| (Cow::Borrowed(e.key()), Cow::Borrowed(e.value()));
        if !self.opts.separate_at_flush {
            return Ok(FlushedEntries {
                entries: entries.iter().map(borrowed).collect(),
                blobs: MergeOutput::default(),
            });
        }
        let keyspaces = self.keyspaces();
        let mut out = MergeOutput::default();
        let mut blob: Option<BlobWriter> = None;
        let mut rows: RowEntries<'a> = Vec::with_capacity(entries.len());
        let result: Result<()> = (|| {
            for e in entries {
                let parsed = parse_key(e.key(), ArtifactKind::Wal, "memtable being flushed")?;
                let ks = keyspaces.for_key(parsed.user_key);
                let min = ks.min_blob_bytes.or(self.opts.min_blob_bytes);
                if parsed.kind != ValueKind::Value || min.is_none_or(|m| e.value().len() < m) {
                    rows.push(borrowed(e));
                    continue;
                }
                let w = self.blob_writer(&mut blob, outputs)?;
                let p = w.add(parsed.user_key, e.value())?;
                let mut ikey = Vec::with_capacity(e.key().len());
                key::append_internal_key(
                    &mut ikey,
                    parsed.user_key,
                    parsed.seq,
                    ValueKind::BlobIndex,
                );
                let mut pointer = Vec::new();
                p.encode_to(&mut pointer);
                rows.push((Cow::Owned(ikey), Cow::Owned(pointer)));
                if w.len() >= self.opts.blob_file_bytes
                    && let Some(w) = blob.take()
                {
                    out.finish_blob(w)?;
                }
            }
            if let Some(w) = blob.take() {
                out.finish_blob(w)?;
            }
            if !out.blobs.is_empty() {
                self.tiers.slow_fs.sync_dir(&self.opts.slow_dir)?;
            }
            Ok(())
        })();
        result?;
        Ok(FlushedEntries {
            entries: rows,
            blobs: out,
        })
    }
}
