//! What the manifest records about a RowTable: its page list and summary. Shared by the
//! page pool, the RowTable reader/builder and the version set.
#![deny(clippy::indexing_slicing)]

use std::sync::Arc;

use crate::coding::{Decoder, put_length_prefixed, put_varint64};
use crate::error::CorruptionReason;
use crate::key::SeqNo;

/// Marks a logical page whose physical page was returned to the pool (its contents were
/// consumed by column compaction).
pub const FREED: u32 = u32::MAX;

/// The physical pages of a row, in logical order: logical byte `o` of the row lives in
/// physical page `pages[o / page_bytes]` at offset `o % page_bytes`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PageList {
    pages: Vec<u32>,
}

impl PageList {
    /// A page list from physical page numbers.
    pub fn new(pages: Vec<u32>) -> PageList {
        PageList { pages }
    }

    /// Number of logical pages (freed ones included).
    pub fn len(&self) -> usize {
        self.pages.len()
    }

    /// Physical page of logical page `i` (`None` past the end or when freed).
    pub fn physical(&self, i: usize) -> Option<u32> {
        self.pages.get(i).copied().filter(|&p| p != FREED)
    }

    /// Physical pages still held (not freed).
    pub fn live(&self) -> impl Iterator<Item = u32> + '_ {
        self.pages.iter().copied().filter(|&p| p != FREED)
    }

    /// Number of physical pages still held.
    pub fn live_count(&self) -> usize {
        self.live().count()
    }

    /// A copy with logical pages `range` marked freed; returns the physical pages released.
    pub fn with_freed(&self, range: std::ops::Range<usize>) -> (PageList, Vec<u32>) {
        let mut pages = self.pages.clone();
        let mut released = Vec::new();
        for p in pages.iter_mut().take(range.end).skip(range.start) {
            if *p != FREED {
                released.push(*p);
                *p = FREED;
            }
        }
        (PageList { pages }, released)
    }

    /// Contiguous runs `(first physical page, count)`, logical order; freed pages form runs
    /// with first = FREED. Used for persistence and for per-run persists.
    pub fn runs(&self) -> Vec<(u32, u32)> {
        let mut runs: Vec<(u32, u32)> = Vec::new();
        for &p in &self.pages {
            match runs.last_mut() {
                Some((start, n))
                    if (*start == FREED && p == FREED)
                        || (*start != FREED && p != FREED && start.checked_add(*n) == Some(p)) =>
                {
                    *n += 1;
                }
                _ => runs.push((p, 1)),
            }
        }
        runs
    }

    /// Encodes as a varint run count then `(start, count)` varint pairs.
    pub fn encode(&self, dst: &mut Vec<u8>) {
        let runs = self.runs();
        put_varint64(dst, runs.len() as u64);
        for (start, n) in runs {
            put_varint64(dst, u64::from(start));
            put_varint64(dst, u64::from(n));
        }
    }

    /// Decodes [`PageList::encode`]; rejects lists longer than `max_pages`.
    pub fn decode(d: &mut Decoder<'_>, max_pages: usize) -> Result<PageList, CorruptionReason> {
        let runs = d.varint64()?;
        let mut pages = Vec::new();
        for _ in 0..runs {
            let start = d.varint32()?;
            let n = d.varint32()? as usize;
            if n == 0 || pages.len() + n > max_pages {
                return Err(CorruptionReason::BadLength);
            }
            if start == FREED {
                pages.extend(std::iter::repeat_n(FREED, n));
            } else {
                let end = start
                    .checked_add(n as u32)
                    .ok_or(CorruptionReason::BadLength)?;
                pages.extend(start..end);
            }
        }
        Ok(PageList { pages })
    }
}

/// What the manifest records about one RowTable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowMeta {
    /// Row number: increases with every flush; newer rows have larger numbers.
    pub row: u64,
    /// The row whose entries this row's forward pointers index (0 = none).
    pub prev_row: u64,
    /// Where the row's bytes are.
    pub pages: Arc<PageList>,
    /// Number of entries.
    pub entries: u64,
    /// Logical length of the row in bytes (header, entries, keys, values).
    pub bytes: u64,
    /// Smallest internal key.
    pub smallest: Vec<u8>,
    /// Largest internal key.
    pub largest: Vec<u8>,
    /// Smallest sequence number.
    pub smallest_seq: SeqNo,
    /// Largest sequence number.
    pub largest_seq: SeqNo,
}

impl RowMeta {
    /// Encodes for the manifest.
    pub fn encode(&self, dst: &mut Vec<u8>) {
        put_varint64(dst, self.row);
        put_varint64(dst, self.prev_row);
        self.pages.encode(dst);
        put_varint64(dst, self.entries);
        put_varint64(dst, self.bytes);
        put_length_prefixed(dst, &self.smallest);
        put_length_prefixed(dst, &self.largest);
        put_varint64(dst, self.smallest_seq.0);
        put_varint64(dst, self.largest_seq.0);
    }

    /// Decodes [`RowMeta::encode`].
    pub fn decode(d: &mut Decoder<'_>, max_pages: usize) -> Result<RowMeta, CorruptionReason> {
        let row = d.varint64()?;
        let prev_row = d.varint64()?;
        let pages = Arc::new(PageList::decode(d, max_pages)?);
        let entries = d.varint64()?;
        let bytes = d.varint64()?;
        let smallest = d.length_prefixed()?.to_vec();
        let largest = d.length_prefixed()?.to_vec();
        let smallest_seq = SeqNo(d.varint64()?);
        let largest_seq = SeqNo(d.varint64()?);
        if row == 0 || prev_row >= row || smallest_seq > largest_seq {
            return Err(CorruptionReason::Invalid("row metadata out of range"));
        }
        Ok(RowMeta {
            row,
            prev_row,
            pages,
            entries,
            bytes,
            smallest,
            largest,
            smallest_seq,
            largest_seq,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_list_round_trips_through_runs_with_freed_pages() {
        let (pl, released) = PageList::new(vec![5, 6, 7, 20, 21, 3]).with_freed(1..4);
        assert_eq!(released, vec![6, 7, 20]);
        assert_eq!(pl.runs(), vec![(5, 1), (FREED, 3), (21, 1), (3, 1)]);
        let mut b = Vec::new();
        pl.encode(&mut b);
        let back = PageList::decode(&mut Decoder::new(&b), 100).unwrap();
        assert_eq!(back, pl);
        assert_eq!(back.physical(1), None);
        assert_eq!(back.physical(4), Some(21));
        assert_eq!(back.live_count(), 3);
    }

    #[test]
    fn hostile_page_lists_are_rejected() {
        let mut b = Vec::new();
        put_varint64(&mut b, 1);
        put_varint64(&mut b, 0);
        put_varint64(&mut b, 1 << 30);
        assert_eq!(
            PageList::decode(&mut Decoder::new(&b), 1000),
            Err(CorruptionReason::BadLength)
        );
        let mut b = Vec::new();
        put_varint64(&mut b, 1);
        put_varint64(&mut b, u64::from(u32::MAX - 1));
        put_varint64(&mut b, 5);
        assert!(PageList::decode(&mut Decoder::new(&b), 1000).is_err());
    }

    #[test]
    fn row_meta_round_trips() {
        let m = RowMeta {
            row: 9,
            prev_row: 8,
            pages: Arc::new(PageList::new(vec![1, 2, 3])),
            entries: 10,
            bytes: 9000,
            smallest: b"a\x01\x00\x00\x00\x00\x00\x00\x00".to_vec(),
            largest: b"z\x01\x00\x00\x00\x00\x00\x00\x00".to_vec(),
            smallest_seq: SeqNo(1),
            largest_seq: SeqNo(10),
        };
        let mut b = Vec::new();
        m.encode(&mut b);
        assert_eq!(RowMeta::decode(&mut Decoder::new(&b), 10).unwrap(), m);
    }
}
