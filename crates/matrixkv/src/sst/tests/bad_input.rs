//! Bad input: every flipped byte, truncation, bad magic, unknown versions, lying lengths,
//! garbage behind valid checksums, and properties that do not match the contents. Every case
//! must give `Error::Corruption` naming the damaged block (or `NotSupported`), never a panic
//! or a wrong value.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::super::block::{Block, BlockIter};
use super::super::format::{self, BLOCK_TRAILER_LEN, BlockHandle, FOOTER_LEN, Footer};
use super::format::TableProperties;
use super::*;
use crate::checksum;
use crate::coding::put_varint64;
use crate::error::CorruptionReason;

/// `(start, end)` of every block with its trailer, and of the footer, of a valid table.
fn regions(bytes: &[u8]) -> Vec<(u64, u64)> {
    let size = bytes.len() as u64;
    let footer_at = bytes.len() - FOOTER_LEN;
    let footer = Footer::decode(&bytes[footer_at..], footer_at as u64).unwrap();
    let span = |h: BlockHandle| (h.offset, h.end_with_trailer().unwrap());
    let mut out = vec![
        span(footer.properties),
        span(footer.index),
        (footer_at as u64, size),
    ];
    if footer.filter.size > 0 {
        out.push(span(footer.filter));
    }
    let ix = footer.index;
    let raw = bytes[ix.offset as usize..(ix.offset + ix.size) as usize].to_vec();
    let mut it = BlockIter::new(Arc::new(Block::new(raw).unwrap()));
    it.seek_to_first().unwrap();
    while it.valid() {
        out.push(span(BlockHandle::decode_varint(it.value()).unwrap()));
        it.next().unwrap();
    }
    out.sort_unstable();
    out
}

fn corruption_site(e: &Error) -> (PathBuf, u64, CorruptionReason) {
    match e {
        Error::Corruption { site, reason } => (site.path.clone(), site.offset, reason.clone()),
        other => panic!("expected a corruption error, got {other}"),
    }
}

fn small_table(dir: &Path, opts: &TableOptions) -> (PathBuf, Model, Vec<u8>) {
    let path = dir.join("good.sst");
    let mut m = Model::new();
    for i in 0..40u32 {
        let kind = if i % 9 == 4 {
            ValueKind::Deletion
        } else {
            ValueKind::Value
        };
        let v = if kind == ValueKind::Value {
            format!("value-{i}-{}", "x".repeat(i as usize % 13)).into_bytes()
        } else {
            Vec::new()
        };
        m.insert(
            InternalKey::new(
                format!("key{i:03}").as_bytes(),
                SeqNo(u64::from(i) + 1),
                kind,
            ),
            v,
        );
    }
    build(&path, &m, opts);
    let bytes = std::fs::read(&path).unwrap();
    (path, m, bytes)
}

/// Overwrites one byte of a file in place.
fn poke(path: &Path, offset: usize, byte: u8) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(&[byte], offset as u64).unwrap();
}

/// Restores one byte of a file when dropped.
struct Repair<'a>(&'a Path, usize, u8);

impl Drop for Repair<'_> {
    fn drop(&mut self) {
        poke(self.0, self.1, self.2);
    }
}

#[test]
fn a_flipped_byte_anywhere_is_reported_with_its_block_offset() {
    let dir = tempfile::tempdir().unwrap();
    for c in [Compression::None, Compression::Lz4] {
        let opts = TableOptions {
            block_bytes: 128,
            compression: c,
            ..TableOptions::default()
        };
        let (_, m, good) = small_table(dir.path(), &opts);
        let regions = regions(&good);
        // The regions tile the file exactly.
        assert_eq!(regions.first().unwrap().0, 0);
        assert!(regions.windows(2).all(|w| w[0].1 == w[1].0));
        assert_eq!(regions.last().unwrap().1, good.len() as u64);
        assert!(regions.len() >= 6, "several data blocks expected");

        let bad_path = dir.path().join("bad.sst");
        std::fs::write(&bad_path, &good).unwrap();
        // Every byte of the raw table; every third byte of the compressed one (the blocks
        // differ only in their bytes, not in how damage is found).
        let stride = if c == Compression::None { 1 } else { 2 };
        for i in (0..good.len()).step_by(stride) {
            // Damage one byte in place (rewriting the whole file each time is much slower),
            // and repair it before the next round.
            poke(&bad_path, i, good[i] ^ 0x20);
            let _repair = Repair(&bad_path, i, good[i]);
            let want = regions
                .iter()
                .find(|r| r.0 <= i as u64 && (i as u64) < r.1)
                .unwrap()
                .0;
            let t = match open(&bad_path, None) {
                Err(e) => {
                    let (p, off, _) = corruption_site(&e);
                    assert_eq!(
                        (p.as_path(), off),
                        (bad_path.as_path(), want),
                        "byte {i}: {e}"
                    );
                    continue;
                }
                Ok(t) => t,
            };
            // The damage is in a data block: a scan must report it, and point lookups give
            // either the right answer or the error, never a wrong value.
            let e = scan_forward(&t).unwrap_err();
            assert_eq!(corruption_site(&e).1, want, "byte {i}: {e}");
            for k in m.keys().step_by(3) {
                match t.get(k.user_key(), SeqNo::MAX) {
                    Ok(got) => assert_eq!(got, model_get(&m, k.user_key(), SeqNo::MAX)),
                    Err(e) => assert_eq!(corruption_site(&e).1, want, "byte {i}: {e}"),
                }
            }
        }
    }
}

#[test]
fn truncated_files_are_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let (_, _, good) = small_table(dir.path(), &TableOptions::default());
    let bad_path = dir.path().join("bad.sst");
    for len in [0, 1, 19, 20, 67, 68, good.len() / 2, good.len() - 1] {
        std::fs::write(&bad_path, &good[..len]).unwrap();
        let e = open(&bad_path, None).unwrap_err();
        let (_, _, reason) = corruption_site(&e);
        if len < 20 {
            assert_eq!(reason, CorruptionReason::Truncated, "len {len}");
        } else {
            assert_eq!(reason, CorruptionReason::BadMagic, "len {len}");
        }
    }
}

#[test]
fn bad_magic_is_corruption_at_the_footer() {
    let dir = tempfile::tempdir().unwrap();
    let (_, _, mut bytes) = small_table(dir.path(), &TableOptions::default());
    let n = bytes.len();
    bytes[n - 1] ^= 0xff;
    let path = dir.path().join("bad.sst");
    std::fs::write(&path, &bytes).unwrap();
    let (_, off, reason) = corruption_site(&open(&path, None).unwrap_err());
    assert_eq!(
        (off, reason),
        ((n - FOOTER_LEN) as u64, CorruptionReason::BadMagic)
    );
}

#[test]
fn unknown_format_version_is_not_supported() {
    let dir = tempfile::tempdir().unwrap();
    let (_, _, mut bytes) = small_table(dir.path(), &TableOptions::default());
    let f = bytes.len() - FOOTER_LEN;
    bytes[f + 52..f + 56].copy_from_slice(&2u32.to_le_bytes());
    let crc = checksum::checksum(&bytes[f..f + 56]);
    bytes[f + 56..f + 60].copy_from_slice(&crc.to_le_bytes());
    let path = dir.path().join("v2.sst");
    std::fs::write(&path, &bytes).unwrap();
    match open(&path, None) {
        Err(Error::NotSupported { found_version, .. }) => assert_eq!(found_version, 2),
        other => panic!("expected NotSupported, got {other:?}"),
    }
}

/// Rewrites the first data block of an LZ4 table so it declares `declared` uncompressed
/// bytes (keeping its stored size and fixing its checksum), and returns the lookup error.
fn lookup_with_declared_length(declared: u64) -> Error {
    let dir = tempfile::tempdir().unwrap();
    let opts = TableOptions {
        compression: Compression::Lz4,
        ..TableOptions::default()
    };
    let path = dir.path().join("t.sst");
    let mut m = Model::new();
    for i in 0..200u32 {
        m.insert(
            InternalKey::new(format!("key{i:05}").as_bytes(), SeqNo(1), ValueKind::Value),
            vec![b'z'; 64],
        );
    }
    build(&path, &m, &opts);
    let mut bytes = std::fs::read(&path).unwrap();
    let first = regions(&bytes)[0];
    let size = (first.1 - first.0) as usize - BLOCK_TRAILER_LEN;
    assert_eq!(
        bytes[size],
        format::BLOCK_TYPE_LZ4,
        "first block should be compressed"
    );
    let mut prefix = Vec::new();
    put_varint64(&mut prefix, declared);
    bytes[..prefix.len()].copy_from_slice(&prefix);
    let trailer = format::block_trailer(&bytes[..size], format::BLOCK_TYPE_LZ4);
    bytes[size..size + BLOCK_TRAILER_LEN].copy_from_slice(&trailer);
    std::fs::write(&path, &bytes).unwrap();
    let t = open(&path, None).unwrap();
    t.get(b"key00000", SeqNo::MAX).unwrap_err()
}

#[test]
fn compressed_block_declaring_a_terabyte_is_rejected_without_allocating() {
    let e = lookup_with_declared_length(1 << 40);
    assert_eq!(corruption_site(&e).1, 0);
    assert_eq!(corruption_site(&e).2, CorruptionReason::BadLength);
}

#[test]
fn compressed_block_declaring_the_wrong_length_is_rejected() {
    let e = lookup_with_declared_length(100);
    assert_eq!(corruption_site(&e).1, 0);
}

/// Replaces the contents of the block at `region` (with trailer) by `rng` bytes and gives it
/// a valid trailer, so only the block parsers stand between the garbage and the reader.
fn plant_garbage(bytes: &mut [u8], region: (u64, u64), rng: &mut StdRng) {
    let start = region.0 as usize;
    let size = (region.1 - region.0) as usize - BLOCK_TRAILER_LEN;
    let keep_some = rng.gen_bool(0.5);
    for (i, b) in bytes[start..start + size].iter_mut().enumerate() {
        // Sometimes keep a valid-looking prefix so the damage sits deeper in the block.
        if !(keep_some && i < size / 2) || rng.gen_ratio(1, 8) {
            *b = rng.r#gen();
        }
    }
    let block_type = bytes[start + size];
    let trailer = format::block_trailer(&bytes[start..start + size], block_type);
    bytes[start + size..start + size + BLOCK_TRAILER_LEN].copy_from_slice(&trailer);
}

#[test]
fn garbage_blocks_with_valid_checksums_give_errors_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let opts = TableOptions {
        block_bytes: 256,
        restart_interval: 3,
        ..TableOptions::default()
    };
    let (_, m, good) = small_table(dir.path(), &opts);
    let regions = regions(&good);
    let footer_at = (good.len() - FOOTER_LEN) as u64;
    let bad_path = dir.path().join("bad.sst");
    let mut rng = StdRng::seed_from_u64(0x5eed_0006);
    let mut errors = 0;
    for round in 0..400 {
        let mut bad = good.clone();
        let blocks: Vec<_> = regions.iter().filter(|r| r.0 != footer_at).collect();
        plant_garbage(&mut bad, *blocks[round % blocks.len()], &mut rng);
        std::fs::write(&bad_path, &bad).unwrap();
        let t = match open(&bad_path, None) {
            Ok(t) => t,
            Err(e) => {
                corruption_site(&e);
                errors += 1;
                continue;
            }
        };
        match scan_forward(&t) {
            Ok(_) => {}
            Err(e) => {
                corruption_site(&e);
                errors += 1;
            }
        }
        if let Err(e) = t.verify() {
            corruption_site(&e);
        }
        let mut it = t.iter();
        if it.seek_to_last().is_ok() {
            for _ in 0..50 {
                if !it.valid() || it.prev().is_err() {
                    break;
                }
            }
        }
        for k in m.keys().step_by(5) {
            if let Err(e) = t.get(k.user_key(), SeqNo::MAX) {
                corruption_site(&e);
            }
            if let Err(e) = it.seek_for_prev(k.as_bytes()) {
                corruption_site(&e);
            }
        }
    }
    assert!(
        errors > 200,
        "most garbage should be detected, got {errors} errors"
    );
}

#[test]
fn verify_reports_properties_that_do_not_match_the_contents() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _, mut bytes) = small_table(dir.path(), &TableOptions::default());
    open(&path, None).unwrap().verify().unwrap();
    // Rewrite the properties block to claim one more tombstone, with a valid checksum.
    let f = bytes.len() - FOOTER_LEN;
    let footer = Footer::decode(&bytes[f..], f as u64).unwrap();
    let h = footer.properties;
    let (start, end) = (h.offset as usize, (h.offset + h.size) as usize);
    let mut props = TableProperties::decode(&bytes[start..end]).unwrap();
    props.deletions += 1;
    let encoded = props.encode();
    assert_eq!(encoded.len(), end - start, "same-size rewrite");
    bytes[start..end].copy_from_slice(&encoded);
    let trailer = format::block_trailer(&bytes[start..end], format::BLOCK_TYPE_NONE);
    bytes[end..end + BLOCK_TRAILER_LEN].copy_from_slice(&trailer);
    let bad_path = dir.path().join("bad.sst");
    std::fs::write(&bad_path, &bytes).unwrap();
    let t = open(&bad_path, None).unwrap();
    let e = t.verify().unwrap_err();
    assert_eq!(corruption_site(&e).1, h.offset, "{e}");
}

/// Moves restart point 1 of the block at `h` one byte forward, into an entry, and fixes the
/// block's checksum (the bytes a buggy writer or a crafted file could hold).
fn move_restart_into_an_entry(bytes: &mut [u8], h: BlockHandle) {
    let (start, end) = (h.offset as usize, (h.offset + h.size) as usize);
    let count = u32::from_le_bytes(bytes[end - 4..end].try_into().unwrap()) as usize;
    assert!(count >= 2, "the block needs two restart points");
    let at = end - 4 - 4 * count + 4;
    let r = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    bytes[at..at + 4].copy_from_slice(&(r + 1).to_le_bytes());
    let trailer = format::block_trailer(&bytes[start..end], format::BLOCK_TYPE_NONE);
    bytes[end..end + BLOCK_TRAILER_LEN].copy_from_slice(&trailer);
}

// Found by the `sst` fuzz target (seed mutation, docs/results/fuzz/README.md): `verify`
// walked each block forward from offset 0 only, so it passed a block whose second restart
// point lay inside an entry, which backward scans and seeks then decoded as garbage.
#[test]
fn verify_reports_a_data_block_restart_point_inside_an_entry() {
    let dir = tempfile::tempdir().unwrap();
    let opts = TableOptions {
        restart_interval: 2,
        ..TableOptions::default()
    };
    let (path, _, mut bytes) = small_table(dir.path(), &opts);
    open(&path, None).unwrap().verify().unwrap();
    let first_block = regions(&bytes)[0];
    let h = BlockHandle {
        offset: first_block.0,
        size: first_block.1 - first_block.0 - BLOCK_TRAILER_LEN as u64,
    };
    move_restart_into_an_entry(&mut bytes, h);
    let bad_path = dir.path().join("bad.sst");
    std::fs::write(&bad_path, &bytes).unwrap();
    let t = open(&bad_path, None).unwrap();
    let e = t.verify().unwrap_err();
    let (_, offset, reason) = corruption_site(&e);
    assert_eq!(offset, h.offset, "{e}");
    assert_eq!(
        reason,
        CorruptionReason::Invalid("restart point inside an entry")
    );
}

// Same finding for the index block, whose restart points every lookup binary-searches: the
// open now checks them.
#[test]
fn open_refuses_an_index_restart_point_inside_an_entry() {
    let dir = tempfile::tempdir().unwrap();
    let opts = TableOptions {
        block_bytes: 128,
        ..TableOptions::default()
    };
    let (path, _, mut bytes) = small_table(dir.path(), &opts);
    open(&path, None).unwrap();
    let f = bytes.len() - FOOTER_LEN;
    let index = Footer::decode(&bytes[f..], f as u64).unwrap().index;
    move_restart_into_an_entry(&mut bytes, index);
    let bad_path = dir.path().join("bad.sst");
    std::fs::write(&bad_path, &bytes).unwrap();
    let e = open(&bad_path, None).unwrap_err();
    assert_eq!(corruption_site(&e).1, index.offset, "{e}");
}
