//! Blob file format tests: pointer coding, write/read round trips, damage detection, and the
//! golden bytes of docs/format/blob.md.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::reader::BlobFiles;
use super::writer::{BlobSummary, BlobWriter};
use super::*;
use crate::error::Error;
use crate::tier::{FileSystem, MemFs};

fn dir() -> PathBuf {
    PathBuf::from("/db")
}

fn write(
    fs: &MemFs,
    number: u64,
    records: &[(Vec<u8>, Vec<u8>)],
) -> (Vec<BlobPointer>, BlobSummary) {
    fs.create_dir_all(&dir()).unwrap();
    let path = crate::layout::path(&dir(), &crate::layout::blob_name(FileNum(number)));
    let file = fs.create(&path).unwrap();
    let mut w = BlobWriter::new(FileNum(number), file).unwrap();
    let ptrs = records
        .iter()
        .map(|(k, v)| w.add(k, v).unwrap())
        .collect::<Vec<_>>();
    (ptrs, w.finish().unwrap())
}

fn blob_path(number: u64) -> PathBuf {
    crate::layout::path(&dir(), &crate::layout::blob_name(FileNum(number)))
}

fn files(fs: &MemFs) -> BlobFiles {
    BlobFiles::new(Arc::new(fs.clone()), dir())
}

fn assert_corruption_at(e: Error, path: &Path, offset: u64) {
    match e {
        Error::Corruption { site, .. } => {
            assert_eq!(site.kind, crate::error::ArtifactKind::Blob);
            assert_eq!(site.path, path);
            assert_eq!(site.offset, offset);
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn pointer_round_trips_and_rejects_garbage() {
    let p = BlobPointer {
        file: FileNum(42),
        offset: 1 << 33,
        len: 4120,
    };
    assert_eq!(BlobPointer::decode(&p.encode()).unwrap(), p);
    let mut long = p.encode();
    long.push(0);
    assert!(BlobPointer::decode(&long).is_err());
    let bad = BlobPointer { offset: 3, ..p };
    assert!(BlobPointer::decode(&bad.encode()).is_err());
    let huge = BlobPointer {
        len: MAX_RECORD_BYTES + 1,
        ..p
    };
    assert!(BlobPointer::decode(&huge.encode()).is_err());
    assert!(BlobPointer::decode(&[0x80]).is_err());
}

#[test]
fn records_read_back_through_their_pointers() {
    let fs = MemFs::new();
    let records: Vec<(Vec<u8>, Vec<u8>)> = (0..200u32)
        .map(|i| {
            let len = match i % 4 {
                0 => 0,
                1 => 1,
                2 => 4096,
                _ => 70_000,
            };
            (
                format!("key{i:05}").into_bytes(),
                vec![(i % 251) as u8; len],
            )
        })
        .collect();
    let (ptrs, summary) = write(&fs, 7, &records);
    assert_eq!(summary.records, 200);
    let expect_bytes: u64 = records
        .iter()
        .map(|(k, v)| record_len(k.len(), v.len()))
        .sum();
    assert_eq!(summary.record_bytes, expect_bytes);
    assert_eq!(
        summary.file_bytes,
        expect_bytes + (HEADER_LEN + FOOTER_LEN) as u64
    );
    let bf = files(&fs);
    for ((k, v), p) in records.iter().zip(&ptrs) {
        assert_eq!(&bf.read(k, p).unwrap(), v);
    }
    bf.verify_file(FileNum(7), summary.records, summary.record_bytes)
        .unwrap();
}

#[test]
fn a_pointer_to_another_keys_record_is_corruption() {
    let fs = MemFs::new();
    let (ptrs, _) = write(&fs, 3, &[(b"a".to_vec(), b"1".to_vec())]);
    let e = files(&fs).read(b"b", &ptrs[0]).unwrap_err();
    assert_corruption_at(e, &blob_path(3), ptrs[0].offset);
}

#[test]
fn a_flipped_value_byte_is_reported_with_the_record_offset() {
    let fs = MemFs::new();
    let (ptrs, summary) = write(
        &fs,
        3,
        &[(b"a".to_vec(), vec![1; 100]), (b"b".to_vec(), vec![2; 100])],
    );
    fs.corrupt(&blob_path(3), ptrs[1].offset + 50, 0x40)
        .unwrap();
    let bf = files(&fs);
    assert_eq!(bf.read(b"a", &ptrs[0]).unwrap(), vec![1; 100]);
    assert_corruption_at(
        bf.read(b"b", &ptrs[1]).unwrap_err(),
        &blob_path(3),
        ptrs[1].offset,
    );
    let e = bf
        .verify_file(FileNum(3), summary.records, summary.record_bytes)
        .unwrap_err();
    assert_corruption_at(e, &blob_path(3), ptrs[1].offset);
}

#[test]
fn a_pointer_past_the_records_is_corruption() {
    let fs = MemFs::new();
    let (ptrs, _) = write(&fs, 3, &[(b"a".to_vec(), vec![1; 100])]);
    let beyond = BlobPointer {
        offset: ptrs[0].offset + 10,
        ..ptrs[0]
    };
    assert!(matches!(
        files(&fs).read(b"a", &beyond),
        Err(Error::Corruption { .. })
    ));
}

#[test]
fn header_naming_another_file_is_corruption() {
    let fs = MemFs::new();
    let (ptrs, _) = write(&fs, 3, &[(b"a".to_vec(), vec![1; 10])]);
    // The same bytes under another number.
    let data = fs.read_all(&blob_path(3)).unwrap();
    let mut f = fs.create(&blob_path(4)).unwrap();
    f.append(&data).unwrap();
    f.sync().unwrap();
    let p = BlobPointer {
        file: FileNum(4),
        ..ptrs[0]
    };
    assert_corruption_at(files(&fs).read(b"a", &p).unwrap_err(), &blob_path(4), 0);
}

#[test]
fn verify_detects_a_truncated_file_and_a_count_mismatch() {
    let fs = MemFs::new();
    let (_, summary) = write(
        &fs,
        5,
        &[(b"a".to_vec(), vec![1; 10]), (b"b".to_vec(), vec![2; 10])],
    );
    let bf = files(&fs);
    assert!(
        bf.verify_file(FileNum(5), summary.records + 1, summary.record_bytes)
            .is_err()
    );
    fs.truncate(&blob_path(5), summary.file_bytes - 3).unwrap();
    assert!(matches!(
        bf.verify_file(FileNum(5), summary.records, summary.record_bytes),
        Err(Error::Corruption { .. })
    ));
}

#[test]
fn record_length_prefix_is_bounded() {
    let mut rec = vec![0u8; 4];
    put_varint64(&mut rec, u64::MAX);
    put_varint64(&mut rec, 1);
    assert!(record_len_at(&rec).is_err());
    assert!(record_len_at(&[1, 2]).is_err());
    assert!(decode_record(&[0, 0, 0, 0, 5]).is_err());
}

#[test]
fn golden_blob_file_matches_the_format_doc() {
    let fs = MemFs::new();
    let (ptrs, _) = write(
        &fs,
        9,
        &[
            (b"apple".to_vec(), b"red".to_vec()),
            (b"kiwi".to_vec(), b"green".to_vec()),
        ],
    );
    let got = fs.read_all(&blob_path(9)).unwrap();
    let doc = include_str!("../../../../docs/format/blob.md");
    assert_eq!(
        got,
        crate::golden::hex_block(doc),
        "docs/format/blob.md is out of date; the writer now writes:\n{}",
        got.iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    // The pointers of the worked example.
    assert_eq!(ptrs[0].encode(), vec![0x09, 0x18, 0x0e]);
    assert_eq!(ptrs[1].encode(), vec![0x09, 0x26, 0x0f]);
}
