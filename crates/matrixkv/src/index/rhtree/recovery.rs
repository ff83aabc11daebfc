//! `RhTree::open`: checks the header and the committed leaf directory, rebuilds the DRAM
//! prefix search tree and verifies every reachable record (docs/format/rhtree.md, "Recovery").

use std::collections::{BTreeSet, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use super::format::{
    self, BUCKET_SIZE, DIR_HEADER_LEN, FORMAT_VERSION, HEADER_LEN, LEAF_SIZE, MAGIC, OFF_COMMITTED,
    OFF_HEADER_CRC, PAGE_SIZE, decode_entries, decode_header, directory_crc, directory_fields,
    ptr_at, record_len, signature,
};
use super::route::{Inner, occupied, window};
use super::{RhTree, State};
use crate::error::{CorruptionReason, Error, IoOp, Result};
use crate::lock_order::{Rank, RwLock};
use crate::tier::Region;

impl RhTree {
    /// Opens the tree in `region`: checks the header (magic, version, leaf size, region length,
    /// layout, checksum), the directory the committed generation selects (generation, length,
    /// checksum, entries: blocks in range and distinct, leaves that cover every key exactly
    /// once), rebuilds the prefix search tree, then checks every occupied slot of every live
    /// leaf: its record lies in the log area and passes its checksum, its key is covered by the
    /// leaf, matches the slot's signature, lies in the key's probe window and occurs once.
    /// Records no slot points to are ignored; the log continues after the last reachable one.
    /// It writes nothing.
    ///
    /// # Errors
    ///
    /// [`Error::Corruption`] (kind `PersistentIndex`, `path`, the offset of the damaged header
    /// field, directory, slot or record); [`Error::NotSupported`] for another format version;
    /// [`Error::Io`] if the region cannot be read.
    pub fn open(region: Arc<dyn Region>, path: impl Into<PathBuf>) -> Result<RhTree> {
        let path = path.into();
        let mut h = [0u8; HEADER_LEN];
        region
            .read(0, &mut h)
            .map_err(|e| Error::io(IoOp::Read, &path, e))?;
        let header = decode_header(&h);
        let layout = header.layout;
        let mut t = RhTree {
            region,
            path,
            id: header.id,
            layout,
            state: RwLock::new(
                Rank::RhTreeState,
                State {
                    leaves: Vec::new(),
                    tree: Inner::default(),
                    generation: 0,
                    free_blocks: BTreeSet::new(),
                    log_tail: 0,
                    keys: 0,
                    poisoned: None,
                },
            ),
            written: std::sync::atomic::AtomicU64::new(0),
        };
        if h.get(..8) != Some(&MAGIC[..]) {
            return Err(t.corrupt(0, CorruptionReason::BadMagic));
        }
        if header.version != FORMAT_VERSION {
            return Err(Error::NotSupported {
                what: "RH-tree index",
                found_version: header.version,
            });
        }
        if header.crc_stored != header.crc_computed {
            return Err(t.corrupt(
                OFF_HEADER_CRC as u64,
                CorruptionReason::ChecksumMismatch {
                    stored: header.crc_stored,
                    computed: header.crc_computed,
                },
            ));
        }
        let len = t.region.len() as u64;
        let pages = len / PAGE_SIZE as u64;
        let used = 1 + 2 * u64::from(layout.dir_pages) + u64::from(layout.leaf_blocks);
        if header.leaf_size as usize != LEAF_SIZE
            || layout.region_len != len
            || layout.dir_pages == 0
            || layout.leaf_blocks == 0
            || used >= pages
        {
            return Err(t.corrupt(
                format::OFF_LEAF_SIZE as u64,
                CorruptionReason::Invalid("a header layout that does not fit the region"),
            ));
        }
        let g = t
            .region
            .read_u64(OFF_COMMITTED)
            .map_err(|e| Error::io(IoOp::Read, &t.path, e))?;
        let leaves = t.read_directory(g)?;
        let dir_at = layout.dir_off(g) as u64;
        let tree = Inner::build(&leaves)
            .map_err(|why| t.corrupt(dir_at, CorruptionReason::Invalid(why)))?;
        let mut seen = BTreeSet::new();
        for l in &leaves {
            if l.block >= layout.leaf_blocks || !seen.insert(l.block) {
                return Err(t.corrupt(
                    dir_at,
                    CorruptionReason::Invalid("a leaf block out of range or listed twice"),
                ));
            }
        }
        let mut keys = 0;
        let mut log_tail = layout.log_start();
        for l in &leaves {
            let base = layout.leaf_off(l.block);
            let mut in_leaf = HashSet::new();
            for (b, s, sig, ptr) in occupied(&t.read_leaf(l.block)?) {
                let at = (base + b * BUCKET_SIZE + ptr_at(s)) as u64;
                let (key, _) = t.read_record(ptr, at)?;
                let why = if !l.covers(&key) {
                    Some("a key in a leaf that does not cover it")
                } else if signature(&key) != sig {
                    Some("a slot signature that does not match its key")
                } else if !window(sig).any(|w| w == b) {
                    Some("a key outside its probe window")
                } else if !in_leaf.insert(key.clone()) {
                    Some("a key stored twice")
                } else {
                    None
                };
                if let Some(why) = why {
                    return Err(t.corrupt(at, CorruptionReason::Invalid(why)));
                }
                keys += 1;
                log_tail = log_tail.max(ptr + record_len(key.len()) as u64);
            }
        }
        let st = t.state.get_mut();
        st.free_blocks = (0..layout.leaf_blocks)
            .filter(|b| !seen.contains(b))
            .collect();
        st.leaves = leaves;
        st.tree = tree;
        st.generation = g;
        st.log_tail = log_tail;
        st.keys = keys;
        Ok(t)
    }

    /// The verified entries of the directory of generation `g`.
    fn read_directory(&self, g: u64) -> Result<Vec<format::LeafMeta>> {
        let at = self.layout.dir_off(g);
        let mut area = vec![0u8; self.layout.dir_bytes()];
        self.read(at, &mut area)?;
        let (generation, count, end, stored) = directory_fields(&area);
        if generation != g {
            return Err(self.corrupt(
                at as u64,
                CorruptionReason::Invalid("a directory of another generation than committed"),
            ));
        }
        let Some(b) = area
            .get(..end as usize)
            .filter(|_| end as usize >= DIR_HEADER_LEN)
        else {
            return Err(self.corrupt(at as u64 + 12, CorruptionReason::BadLength));
        };
        let computed = directory_crc(self.id, b);
        if stored != computed {
            return Err(self.corrupt(
                at as u64 + 16,
                CorruptionReason::ChecksumMismatch { stored, computed },
            ));
        }
        decode_entries(b, count).ok_or_else(|| {
            self.corrupt(
                at as u64 + 8,
                CorruptionReason::Invalid("directory entries that do not fill its length"),
            )
        })
    }
}
