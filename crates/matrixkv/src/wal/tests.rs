use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::mem_region::{Loss, MemRegion};
use super::*;
use crate::batch::WriteBatch;
use crate::error::{ArtifactKind, CorruptionReason, Error, IoOp, Result};
use crate::key::SeqNo;
use crate::layout::FileNum;
use crate::record;
use crate::tier::Region;

const NUMBER: FileNum = FileNum(7);

fn seg_path() -> PathBuf {
    PathBuf::from("/fast/000007.wal")
}

fn segment(len: usize) -> (Arc<MemRegion>, Writer) {
    let region = Arc::new(MemRegion::new(len));
    let w = Writer::create(region.clone(), NUMBER, seg_path()).unwrap();
    (region, w)
}

/// Appends 1..13 batches (sequences from `first_seq`, values under `max_value` bytes) while
/// they fit, syncing after some; returns the records written and how many were synced.
fn write_random_batches(
    w: &mut Writer,
    rng: &mut StdRng,
    first_seq: u64,
    max_value: usize,
) -> (Vec<Vec<u8>>, usize) {
    let mut written = Vec::new();
    let mut synced = 0;
    for i in 0..rng.gen_range(1..13) {
        let b = batch(first_seq + i, rng.gen_range(0..max_value));
        if !w.fits(b.size_bytes()) {
            break;
        }
        w.add_record(b.data()).unwrap();
        written.push(b.data().to_vec());
        if rng.gen_bool(0.3) {
            w.sync().unwrap();
            synced = written.len();
        }
    }
    (written, synced)
}

fn batch(seq: u64, value_len: usize) -> WriteBatch {
    let mut b = WriteBatch::new();
    b.put(format!("key{seq}"), vec![b'v'; value_len]);
    if seq.is_multiple_of(3) {
        b.delete(format!("gone{seq}"));
    }
    b.set_sequence(SeqNo(seq));
    b
}

fn read(
    region: &MemRegion,
    mode: WalRecovery,
    last: bool,
) -> Result<(Vec<Vec<u8>>, reader::SegmentEnd)> {
    let mut got = Vec::new();
    let end = read_segment(region, &seg_path(), NUMBER, mode, last, |p, _| {
        got.push(p.to_vec());
        Ok(())
    })?;
    Ok((got, end))
}

fn assert_corruption_at(
    r: Result<(Vec<Vec<u8>>, reader::SegmentEnd)>,
    offset: u64,
) -> CorruptionReason {
    match r {
        Err(Error::Corruption { site, reason }) => {
            assert_eq!(site.kind, ArtifactKind::Wal);
            assert_eq!(site.path, seg_path());
            assert_eq!(site.offset, offset, "{reason}");
            reason
        }
        other => panic!("expected corruption at {offset}, got {other:?}"),
    }
}

#[test]
fn records_round_trip() {
    let (region, mut w) = segment(4096);
    let batches: Vec<WriteBatch> = (1..=5).map(|i| batch(i, i as usize * 10)).collect();
    for b in &batches {
        w.add_record(b.data()).unwrap();
    }
    w.sync().unwrap();
    let (got, end) = read(&region, WalRecovery::Strict, true).unwrap();
    assert_eq!(got.len(), 5);
    for (g, b) in got.iter().zip(&batches) {
        assert_eq!(&WriteBatch::decode(g).unwrap(), b);
    }
    assert_eq!(end.records, 5);
    assert_eq!(end.end_offset, w.bytes_written());
    assert_eq!(end.torn_tail, None);
}

#[test]
fn empty_segment_reads_as_no_records() {
    let (region, w) = segment(256);
    assert_eq!(w.bytes_written(), format::HEADER_LEN as u64);
    assert_eq!(w.persisted_offset(), format::HEADER_LEN as u64);
    assert_eq!(w.number(), NUMBER);
    // The header was persisted by `create`: it survives a power loss right away.
    let image = region.power_loss(Loss::KeepOld, &mut StdRng::seed_from_u64(1));
    let (got, end) = read(&image, WalRecovery::Strict, false).unwrap();
    assert!(got.is_empty());
    assert_eq!(end.end_offset, format::HEADER_LEN as u64);
}

#[test]
fn writer_framing_is_the_shared_record_framing() {
    let (region, mut w) = segment(256);
    let b = batch(9, 5);
    w.add_record(b.data()).unwrap();
    let mut framed = Vec::new();
    record::encode_seeded(&mut framed, record::Seed::Number(NUMBER.0), b.data());
    let live = region.live();
    assert_eq!(&live[64..64 + framed.len()], &framed[..]);
    assert!(live[64 + framed.len()..].iter().all(|&x| x == 0));
}

#[test]
fn sync_persists_exactly_the_bytes_written_since_the_last_sync() {
    let (region, mut w) = segment(4096);
    w.add_record(batch(1, 3).data()).unwrap();
    w.add_record(batch(2, 3).data()).unwrap();
    let mid = w.bytes_written();
    w.sync().unwrap();
    assert_eq!(w.persisted_offset(), mid);
    w.sync().unwrap(); // nothing new: no persist call
    w.add_record(batch(3, 3).data()).unwrap();
    w.sync().unwrap();
    let end = w.bytes_written();
    assert_eq!(
        region.persist_calls(),
        vec![
            (0, 72),
            (64, (mid - 64) as usize + 8),
            (mid as usize, (end - mid) as usize + 8)
        ]
    );
}

#[test]
fn synced_records_survive_power_loss_and_unsynced_never_half_apply() {
    let mut rng = StdRng::seed_from_u64(0x3a1_c0de);
    for round in 0..300 {
        let (region, mut w) = segment(2048);
        let (written, synced) = write_random_batches(&mut w, &mut rng, 1, 90);
        let loss = [Loss::KeepOld, Loss::Garble, Loss::AnySubset][round % 3];
        let image = region.power_loss(loss, &mut rng);
        let (got, end) = read(&image, WalRecovery::TolerateTornTail, true)
            .unwrap_or_else(|e| panic!("round {round} ({loss:?}): {e}"));
        assert!(got.len() >= synced, "round {round}: lost a synced record");
        // A prefix of what was written, each record whole: no holes, no half batches.
        assert_eq!(got[..], written[..got.len()], "round {round}");
        assert_eq!(end.records as usize, got.len());
        match loss {
            // Lost stores leave zeros: the log simply ends after the synced records.
            Loss::KeepOld => {
                assert_eq!(got.len(), synced);
                assert_eq!(end.torn_tail, None);
            }
            // Garbage after the synced records is a torn tail, dropped.
            Loss::Garble if synced < written.len() => {
                assert_eq!(got.len(), synced);
                assert!(end.torn_tail.is_some());
            }
            _ => {}
        }
    }
}

/// Three records, the last one damaged as a crash would leave it; returns its offset.
fn segment_with_torn_last_record() -> (Arc<MemRegion>, u64) {
    let (region, mut w) = segment(1024);
    w.add_record(batch(1, 20).data()).unwrap();
    w.add_record(batch(2, 20).data()).unwrap();
    w.sync().unwrap();
    let torn_at = w.bytes_written();
    w.add_record(batch(3, 20).data()).unwrap();
    // The header reached the media but part of the payload did not.
    region.damage(torn_at as usize + record::HEADER_LEN + 5, |b| b ^ 0xff);
    (region, torn_at)
}

#[test]
fn torn_tail_in_last_segment_is_truncated() {
    let (region, torn_at) = segment_with_torn_last_record();
    let (got, end) = read(&region, WalRecovery::TolerateTornTail, true).unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(end.end_offset, torn_at);
    let (offset, reason) = end.torn_tail.unwrap();
    assert_eq!(offset, torn_at);
    assert!(matches!(reason, CorruptionReason::ChecksumMismatch { .. }));
}

#[test]
fn torn_record_in_an_earlier_segment_is_corruption() {
    let (region, torn_at) = segment_with_torn_last_record();
    let r = read(&region, WalRecovery::TolerateTornTail, false);
    let reason = assert_corruption_at(r, torn_at);
    assert!(matches!(reason, CorruptionReason::ChecksumMismatch { .. }));
}

#[test]
fn torn_tail_is_corruption_in_strict_mode() {
    let (region, torn_at) = segment_with_torn_last_record();
    assert_corruption_at(read(&region, WalRecovery::Strict, true), torn_at);
}

/// Found by the corruption campaign (tests/corruption.rs): zeroing a record header made
/// every later record of the segment vanish, in Strict mode too.
#[test]
fn zeroed_record_header_with_records_behind_it_is_corruption_in_strict_mode() {
    let (region, mut w) = segment(1024);
    let mut starts = Vec::new();
    for seq in 1..=3 {
        starts.push(w.bytes_written());
        w.add_record(batch(seq, 20).data()).unwrap();
    }
    w.sync().unwrap();
    for &at in &starts {
        let damaged = MemRegion::from_bytes(region.live());
        for i in 0..record::HEADER_LEN {
            damaged.damage(at as usize + i, |_| 0);
        }
        let reason = assert_corruption_at(read(&damaged, WalRecovery::Strict, true), at);
        assert!(matches!(reason, CorruptionReason::Invalid(_)), "{reason}");
        // The tolerant mode still reads the prefix before it (a torn unsynced tail can
        // look the same).
        let (got, end) = read(&damaged, WalRecovery::TolerateTornTail, true).unwrap();
        assert_eq!(end.end_offset, at);
        assert_eq!(got.len(), starts.iter().filter(|&&s| s < at).count());
    }
    // Zeroing the last record entirely leaves a log that ends there: nothing to detect.
    let last = *starts.last().unwrap() as usize;
    let damaged = MemRegion::from_bytes(region.live());
    for i in last..w.bytes_written() as usize {
        damaged.damage(i, |_| 0);
    }
    let (got, _) = read(&damaged, WalRecovery::Strict, true).unwrap();
    assert_eq!(got.len(), 2);
}

#[test]
fn length_beyond_the_region_is_a_bad_record_not_an_allocation() {
    let (region, mut w) = segment(512);
    w.add_record(batch(1, 4).data()).unwrap();
    let at = w.bytes_written() as usize;
    // A record header claiming 4 GiB of payload.
    w.add_record(batch(2, 4).data()).unwrap();
    for (i, b) in [0xffu8; 4].iter().enumerate() {
        region.damage(at + 4 + i, |_| *b);
    }
    let (got, end) = read(&region, WalRecovery::TolerateTornTail, true).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(
        end.torn_tail,
        Some((at as u64, CorruptionReason::BadLength))
    );
    assert_corruption_at(read(&region, WalRecovery::Strict, true), at as u64);
}

#[test]
fn checksummed_record_that_is_not_a_batch_is_corruption_even_when_tolerant() {
    let (region, mut w) = segment(512);
    w.add_record(batch(1, 4).data()).unwrap();
    let at = w.bytes_written();
    w.add_record(b"not a batch").unwrap();
    let r = read(&region, WalRecovery::TolerateTornTail, true);
    assert_eq!(assert_corruption_at(r, at), CorruptionReason::Truncated);
}

#[test]
fn callback_error_stops_reading_and_is_returned() {
    let (region, mut w) = segment(512);
    w.add_record(batch(1, 4).data()).unwrap();
    w.add_record(batch(2, 4).data()).unwrap();
    let mut calls = 0;
    let r = read_segment(
        &*region,
        &seg_path(),
        NUMBER,
        WalRecovery::Strict,
        true,
        |_, _| {
            calls += 1;
            Err(Error::invalid("stop"))
        },
    );
    assert!(matches!(r, Err(Error::InvalidArgument(m)) if m == "stop"));
    assert_eq!(calls, 1);
}

#[test]
fn zero_tail_makes_a_torn_segment_read_cleanly_as_an_earlier_segment() {
    let (region, _) = segment_with_torn_last_record();
    let (_, end) = read(&region, WalRecovery::TolerateTornTail, true).unwrap();
    zero_tail(&*region, &seg_path(), end.end_offset).unwrap();
    // Persisted: it holds after a power loss, and in Strict mode as a non-last segment.
    let image = region.power_loss(Loss::Garble, &mut StdRng::seed_from_u64(2));
    let (got, again) = read(&image, WalRecovery::Strict, false).unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(again.end_offset, end.end_offset);
    assert!(zero_tail(&*region, &seg_path(), 10).is_err());
    assert!(zero_tail(&*region, &seg_path(), 2048).is_err());
}

// Found by the `wal_segment` fuzz target (docs/results/fuzz/README.md): a record ending
// less than 8 bytes before the end of the region, followed by non-zero bytes, is a torn
// tail; zero_tail cleared it, but the cleared segment still did not read as an earlier
// segment, because a zero tail shorter than a record header was reported as truncated.
#[test]
fn zero_tail_shorter_than_a_record_header_ends_the_segment() {
    let (region, _) = segment(256);
    let mut bytes = region.live();
    bytes.truncate(64);
    let mut b = WriteBatch::new();
    b.put(b"k", vec![b'v'; 164]);
    b.set_sequence(SeqNo(1));
    record::encode_seeded(&mut bytes, record::Seed::Number(NUMBER.0), b.data());
    assert_eq!(
        bytes.len(),
        253,
        "the record ends 3 bytes before the region's end"
    );
    bytes.extend_from_slice(&[1, 2, 3]);
    let region = Arc::new(MemRegion::from_bytes(bytes));
    let (got, end) = read(&region, WalRecovery::TolerateTornTail, true).unwrap();
    assert_eq!((got.len(), end.end_offset), (1, 253));
    assert!(end.torn_tail.is_some());
    zero_tail(&*region, &seg_path(), end.end_offset).unwrap();
    let (got, again) = read(&region, WalRecovery::Strict, false).unwrap();
    assert_eq!(got, vec![b.data().to_vec()]);
    assert_eq!((again.end_offset, again.torn_tail), (253, None));
}

fn header_error(mutate: impl Fn(&MemRegion)) -> Error {
    let (region, mut w) = segment(256);
    w.add_record(batch(1, 1).data()).unwrap();
    mutate(&region);
    read(&region, WalRecovery::TolerateTornTail, true).unwrap_err()
}

#[test]
fn bad_header_magic_is_corruption_at_offset_zero() {
    let e = header_error(|r| r.damage(0, |b| b ^ 1));
    assert_eq!(assert_corruption_at(Err(e), 0), CorruptionReason::BadMagic);
}

#[test]
fn bad_header_checksum_is_corruption_at_offset_zero() {
    let e = header_error(|r| r.damage(17, |b| b ^ 0x10));
    let reason = assert_corruption_at(Err(e), 0);
    assert!(matches!(reason, CorruptionReason::ChecksumMismatch { .. }));
    // Reserved bytes (not under the checksum) must stay zero.
    let e = header_error(|r| r.damage(50, |_| 1));
    assert!(matches!(
        assert_corruption_at(Err(e), 0),
        CorruptionReason::Invalid(_)
    ));
}

#[test]
fn segment_number_mismatch_is_corruption() {
    let region = Arc::new(MemRegion::new(256));
    Writer::create(region.clone(), FileNum(8), seg_path()).unwrap();
    assert!(matches!(
        assert_corruption_at(read(&region, WalRecovery::Strict, true), 0),
        CorruptionReason::Invalid(_)
    ));
}

#[test]
fn region_length_differing_from_the_header_is_corruption() {
    let (region, _) = segment(256);
    let mut bytes = region.live();
    bytes.truncate(200);
    let shorter = MemRegion::from_bytes(bytes);
    assert_eq!(
        assert_corruption_at(read(&shorter, WalRecovery::Strict, true), 0),
        CorruptionReason::BadLength
    );
    let tiny = MemRegion::from_bytes(vec![0; 10]);
    assert_eq!(
        assert_corruption_at(read(&tiny, WalRecovery::Strict, true), 0),
        CorruptionReason::Truncated
    );
}

#[test]
fn unknown_format_version_is_not_supported() {
    let e = header_error(|r| r.damage(8, |_| 3));
    assert!(matches!(
        e,
        Error::NotSupported {
            found_version: 3,
            ..
        }
    ));
}

#[test]
fn fits_and_remaining_at_the_boundary() {
    let (region, mut w) = segment(256);
    let max = format::max_payload_len(256);
    assert_eq!(w.remaining(), 256 - 64);
    assert!(w.fits(max));
    assert!(!w.fits(max + 1));
    let too_big = vec![0xab; max + 1];
    assert!(matches!(
        w.add_record(&too_big),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(w.bytes_written(), 64);
    assert!(
        region.live()[64..].iter().all(|&b| b == 0),
        "nothing written"
    );
    w.add_record(&vec![0xab; max]).unwrap();
    assert_eq!(w.remaining(), format::END_MARKER_LEN);
    assert!(!w.fits(0));
    assert!(matches!(w.add_record(b""), Err(Error::InvalidArgument(_))));
}

#[test]
fn segment_filled_to_the_last_byte_reads_back() {
    let (region, mut w) = segment(256);
    let mut b = WriteBatch::new();
    b.put(b"k", vec![1u8; format::max_payload_len(256) - 12 - 5]);
    assert_eq!(b.size_bytes(), format::max_payload_len(256));
    w.add_record(b.data()).unwrap();
    w.sync().unwrap();
    let (got, end) = read(&region, WalRecovery::Strict, false).unwrap();
    assert_eq!(got, vec![b.data().to_vec()]);
    assert_eq!(end.end_offset, 248);
}

#[test]
fn too_small_region_is_refused() {
    let region: Arc<dyn Region> = Arc::new(MemRegion::new(format::MIN_REGION_LEN - 1));
    assert!(matches!(
        Writer::create(region, NUMBER, seg_path()),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn io_failures_name_the_operation_and_the_segment() {
    let (region, mut w) = segment(512);
    region.set_fail_write(true);
    let e = w.add_record(batch(1, 1).data()).unwrap_err();
    assert!(matches!(&e, Error::Io { op: IoOp::Write, path: Some(p), .. } if p == &seg_path()));
    region.set_fail_write(false);
    w.add_record(batch(1, 1).data()).unwrap();
    region.set_fail_persist(true);
    let e = w.sync().unwrap_err();
    assert!(matches!(&e, Error::Io { op: IoOp::Persist, path: Some(p), .. } if p == &seg_path()));
    assert_eq!(w.persisted_offset(), 64, "a failed sync persists nothing");
}

#[test]
fn hostile_bytes_never_panic_the_reader() {
    let mut rng = StdRng::seed_from_u64(0xbad_b17e5);
    let (region, mut w) = segment(512);
    for i in 1..6 {
        w.add_record(batch(i, 7).data()).unwrap();
    }
    let valid = region.live();
    for _ in 0..500 {
        let mut bytes = valid.clone();
        for _ in 0..rng.gen_range(1..6) {
            let i = rng.gen_range(0..bytes.len());
            bytes[i] = rng.r#gen();
        }
        let damaged = MemRegion::from_bytes(bytes);
        for mode in [WalRecovery::TolerateTornTail, WalRecovery::Strict] {
            if let Ok((got, _)) = read(&damaged, mode, true) {
                for p in got {
                    assert!(WriteBatch::decode(&p).is_ok());
                }
            }
        }
    }
    // Pure noise after a valid header.
    let mut bytes = valid[..64].to_vec();
    bytes.extend((64..512).map(|_| rng.r#gen::<u8>()));
    let _ = read(&MemRegion::from_bytes(bytes), WalRecovery::Strict, true);
}

#[test]
fn golden_bytes_match_the_format_doc() {
    let doc = include_str!("../../../../docs/format/wal.md");
    // Block 0 is the batch example of section "Batch" (checked in batch.rs).
    let expected = crate::golden::hex_blocks(doc).remove(3);

    let region = Arc::new(MemRegion::new(256));
    let mut w = Writer::create(region.clone(), NUMBER, seg_path()).unwrap();
    let mut b = WriteBatch::new();
    b.put(b"k1", b"v1");
    b.delete(b"k2");
    b.set_sequence(SeqNo(5));
    w.add_record(b.data()).unwrap();
    w.sync().unwrap();
    let live = region.live();
    let actual = &live[..w.bytes_written() as usize];
    if actual != &expected[..] {
        let dump: Vec<String> = actual
            .chunks(16)
            .map(|c| {
                c.iter()
                    .map(|x| format!("{x:02x}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        panic!(
            "docs/format/wal.md is out of date; the writer produces:\n{}",
            dump.join("\n")
        );
    }
    assert!(live[actual.len()..].iter().all(|&x| x == 0));
    let (got, _) = read(&region, WalRecovery::Strict, true).unwrap();
    assert_eq!(got, vec![b.data().to_vec()]);

    // The version-1 example of the doc still reads, in every mode.
    let mut v1 = crate::golden::hex_blocks(doc).remove(4);
    assert_eq!(
        &v1[8..12],
        &[1, 0, 0, 0],
        "the second block is the version-1 example"
    );
    v1.resize(256, 0);
    let v1 = MemRegion::from_bytes(v1);
    for mode in [WalRecovery::Strict, WalRecovery::TolerateTornTail] {
        let (got, end) = read(&v1, mode, false).unwrap();
        assert_eq!(got, vec![b.data().to_vec()]);
        assert_eq!(end.end_offset, actual.len() as u64);
    }
}

/// A version-1 segment as older builds wrote it: unseeded checksums, zeros after the end.
fn v1_segment(len: usize, batches: &[WriteBatch]) -> MemRegion {
    let mut bytes =
        format::encode_header_version(format::FORMAT_VERSION_1, NUMBER, len as u64).to_vec();
    for b in batches {
        record::encode(&mut bytes, b.data());
    }
    bytes.resize(len, 0);
    MemRegion::from_bytes(bytes)
}

#[test]
fn version_1_segments_read_as_before() {
    let batches: Vec<WriteBatch> = (1..=4).map(|i| batch(i, 30)).collect();
    let region = v1_segment(1024, &batches);
    let (got, end) = read(&region, WalRecovery::Strict, false).unwrap();
    let want: Vec<Vec<u8>> = batches.iter().map(|b| b.data().to_vec()).collect();
    assert_eq!(got, want);
    assert_eq!(end.records, 4);
    // Strict mode: in version 1, any non-zero byte after the end marker is a hole.
    region.damage(1000, |_| 1);
    let reason = assert_corruption_at(read(&region, WalRecovery::Strict, false), end.end_offset);
    assert!(matches!(reason, CorruptionReason::Invalid(_)));
    let (got, _) = read(&region, WalRecovery::TolerateTornTail, false).unwrap();
    assert_eq!(got.len(), 4);
    // A torn record is still a torn tail in the last segment, corruption elsewhere.
    let region = v1_segment(1024, &batches);
    let third = 64 + 2 * record::framed_len(batches[0].size_bytes());
    region.damage(third + 20, |b| b ^ 0x20);
    let (got, end) = read(&region, WalRecovery::TolerateTornTail, true).unwrap();
    assert_eq!((got.len(), end.torn_tail.is_some()), (2, true));
    assert_corruption_at(
        read(&region, WalRecovery::TolerateTornTail, false),
        third as u64,
    );
    // Records seeded as in version 2 do not verify in a version-1 segment.
    let mut bytes = format::encode_header_version(format::FORMAT_VERSION_1, NUMBER, 512).to_vec();
    record::encode_seeded(
        &mut bytes,
        record::Seed::Number(NUMBER.0),
        batch(1, 5).data(),
    );
    bytes.resize(512, 0);
    assert_corruption_at(
        read(
            &MemRegion::from_bytes(bytes),
            WalRecovery::TolerateTornTail,
            false,
        ),
        64,
    );
}

#[test]
fn batch_cursor_reads_the_batches_one_at_a_time_up_to_the_end_marker() {
    let (region, mut w) = segment(2048);
    let batches: Vec<WriteBatch> = (1..=4).map(|i| batch(i, 10 * i as usize)).collect();
    let mut offsets = Vec::new();
    for b in &batches {
        offsets.push(w.bytes_written());
        w.add_record(b.data()).unwrap();
    }
    let mut c = BatchCursor::open(region.clone(), seg_path(), NUMBER).unwrap();
    assert_eq!(c.path(), seg_path());
    for (b, &at) in batches.iter().zip(&offsets) {
        assert_eq!(c.offset(), at);
        assert_eq!(&c.next_batch().unwrap().unwrap(), b);
    }
    assert_eq!(c.offset(), w.bytes_written());
    assert_eq!(c.next_batch().unwrap(), None);
    assert_eq!(c.next_batch().unwrap(), None);
    // A record appended while a cursor is open is read once it is complete.
    let mut c = BatchCursor::open(region.clone(), seg_path(), NUMBER).unwrap();
    for _ in &batches {
        c.next_batch().unwrap().unwrap();
    }
    let more = batch(5, 7);
    w.add_record(more.data()).unwrap();
    assert_eq!(c.next_batch().unwrap(), Some(more));
}

#[test]
fn batch_cursor_reports_damage_as_corruption_at_the_record() {
    let (region, mut w) = segment(2048);
    w.add_record(batch(1, 20).data()).unwrap();
    let second = w.bytes_written();
    w.add_record(batch(2, 20).data()).unwrap();
    w.add_record(batch(3, 20).data()).unwrap();
    region.damage(second as usize + record::HEADER_LEN + 2, |b| b ^ 0x10);
    let mut c = BatchCursor::open(region.clone(), seg_path(), NUMBER).unwrap();
    assert!(c.next_batch().unwrap().is_some());
    match c.next_batch() {
        Err(Error::Corruption { site, .. }) => {
            assert_eq!((site.kind, site.offset), (ArtifactKind::Wal, second));
        }
        other => panic!("expected corruption, got {other:?}"),
    }
    assert_eq!(c.next_batch().unwrap(), None, "ended after the error");
    // The header is checked at open: another segment's number is refused.
    match BatchCursor::open(region.clone(), seg_path(), FileNum(8)) {
        Err(Error::Corruption { site, .. }) => assert_eq!(site.offset, 0),
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn last_batch_follows_the_record_headers_to_the_last_record() {
    let (region, mut w) = segment(4096);
    let open = || BatchCursor::open(region.clone(), seg_path(), NUMBER).unwrap();
    assert_eq!(open().last_batch().unwrap(), None, "no record");
    let batches: Vec<WriteBatch> = (1..=6).map(|i| batch(i, 7 * i as usize)).collect();
    for b in &batches {
        w.add_record(b.data()).unwrap();
    }
    assert_eq!(open().last_batch().unwrap().as_ref(), batches.last());
    // From after the last record there is none; the cursor is at the end afterwards.
    let mut c = open();
    for _ in &batches {
        c.next_batch().unwrap();
    }
    assert_eq!(c.last_batch().unwrap(), None);
    let mut c = open();
    c.last_batch().unwrap();
    assert_eq!(c.next_batch().unwrap(), None);
    // A damaged last record, or a length beyond the region, is corruption.
    let last_at = 64
        + batches[..5]
            .iter()
            .map(|b| record::framed_len(b.size_bytes()) as u64)
            .sum::<u64>();
    let damaged = Arc::new(MemRegion::from_bytes(region.live()));
    damaged.damage(last_at as usize + 10, |b| b ^ 0x40);
    let r = BatchCursor::open(damaged, seg_path(), NUMBER)
        .unwrap()
        .last_batch();
    assert!(matches!(r, Err(Error::Corruption { site, .. }) if site.offset == last_at));
    let damaged = Arc::new(MemRegion::from_bytes(region.live()));
    damaged.damage(last_at as usize + 6, |_| 0x7f);
    let r = BatchCursor::open(damaged, seg_path(), NUMBER)
        .unwrap()
        .last_batch();
    assert!(matches!(r, Err(Error::Corruption { site, .. }) if site.offset == last_at));
}

#[test]
fn segment_path_is_reported_by_the_writer() {
    let (_, w) = segment(256);
    assert_eq!(w.path(), Path::new("/fast/000007.wal"));
}

mod recycled;
