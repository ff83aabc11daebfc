//! Damaged persistent skiplists: a value, a key, a header or an allocation end changed on the
//! fast tier is reported at its record by open and by reads, or refused at open.

use super::*;

/// A list with keys `apple`, `banana`, `cherry` (one version each) and its region.
fn fruit() -> (Arc<SimulatedRegion>, Arc<PSkipList>) {
    let (region, list) = new_list(4096);
    committed_insert(&list, b"apple", SeqNo(1), ValueKind::Value, b"apple-value").unwrap();
    committed_insert(
        &list,
        b"banana",
        SeqNo(2),
        ValueKind::Value,
        b"banana-value",
    )
    .unwrap();
    committed_insert(
        &list,
        b"cherry",
        SeqNo(3),
        ValueKind::Value,
        b"cherry-value",
    )
    .unwrap();
    (region, list)
}

fn find(image: &[u8], needle: &[u8]) -> usize {
    image
        .windows(needle.len())
        .position(|w| w == needle)
        .unwrap()
}

fn assert_corruption_at(e: &Error, offset: u64, checksum: bool) {
    match e {
        Error::Corruption { site, reason } => {
            assert_eq!(site.kind, ArtifactKind::PersistentMemtable, "{e}");
            assert_eq!(site.path, Path::new(PATH), "{e}");
            assert_eq!(site.offset, offset, "{e}");
            assert_eq!(
                matches!(reason, CorruptionReason::ChecksumMismatch { .. }),
                checksum,
                "{e}"
            );
        }
        _ => panic!("not a corruption: {e}"),
    }
}

#[test]
fn a_damaged_value_is_reported_at_its_version_record_by_open_and_by_reads() {
    let (region, list) = fruit();
    let image = region.crash_image(CrashPolicy::KeepAll);
    let value_at = find(&image, b"banana-value");
    let record = (value_at - VERSION_HEADER_LEN) as u64;
    let mut bad = image.clone();
    bad[value_at + 3] ^= 0x20;
    let e = reopen(bad).unwrap_err();
    assert_corruption_at(&e, record, true);
    assert!(e.to_string().contains(PATH), "{e}");

    // The same damage under a running list: the read that uses the record reports it.
    region.write(value_at + 3, b"X").unwrap();
    assert_corruption_at(&list.get(b"banana", SeqNo::MAX).unwrap_err(), record, true);
    assert!(list.get(b"apple", SeqNo::MAX).unwrap().is_some());
    assert!(list.get(b"cherry", SeqNo::MAX).unwrap().is_some());
    let mut it = list.iter();
    it.seek_to_first().unwrap();
    assert_corruption_at(&it.next().unwrap_err(), record, true);
    assert!(!it.valid(), "an iterator is invalid after an error");
}

#[test]
fn a_damaged_key_is_reported_at_its_node_by_open_and_by_reads() {
    let (region, list) = fruit();
    let image = region.crash_image(CrashPolicy::KeepAll);
    // `apple` is the first node: the head's level-0 link points at it.
    let node = le_u64(&image, at(OFF_HEAD));
    let key_at = find(&image, b"apple\0");
    assert!(key_at as u64 > node && (key_at as u64) < node + NODE_NEXT + 8 * 12 + 8);
    let mut bad = image.clone();
    bad[key_at] = b'A';
    assert_corruption_at(&reopen(bad).unwrap_err(), node, true);

    region.write(key_at, b"A").unwrap();
    for k in [&b"apple"[..], b"banana", b"zzz"] {
        assert_corruption_at(&list.get(k, SeqNo::MAX).unwrap_err(), node, true);
    }
    assert_corruption_at(&list.iter().seek_to_first().unwrap_err(), node, true);
    let e = committed_insert(&list, b"apricot", SeqNo(9), ValueKind::Value, b"").unwrap_err();
    assert_corruption_at(&e, node, true);
}

#[test]
fn a_damaged_header_or_allocation_end_is_refused_at_open() {
    let (region, _list) = fruit();
    let image = region.crash_image(CrashPolicy::KeepAll);
    let damaged = |at: usize, byte: u8| {
        let mut b = image.clone();
        b[at] = byte;
        reopen(b).unwrap_err()
    };
    let e = damaged(0, b'X');
    assert_corruption_at(&e, 0, false);
    assert!(
        matches!(
            &e,
            Error::Corruption {
                reason: CorruptionReason::BadMagic,
                ..
            }
        ),
        "{e}"
    );
    assert_corruption_at(&damaged(OFF_ID, 8), 0, true);
    let e = damaged(OFF_VERSION, 2);
    assert!(
        matches!(
            e,
            Error::NotSupported {
                found_version: 2,
                ..
            }
        ),
        "{e}"
    );
    // The region is longer than the header says.
    let mut longer = image.clone();
    longer.extend_from_slice(&[0; 8]);
    assert_corruption_at(&reopen(longer).unwrap_err(), OFF_REGION_LEN as u64, false);
    assert_corruption_at(&reopen(image[..100].to_vec()).unwrap_err(), 0, false);
    // An allocation end below the nodes: the head's link points past it.
    let mut b = image.clone();
    b[at(OFF_ALLOC_END)..at(OFF_ALLOC_END) + 8].copy_from_slice(&DATA_START.to_le_bytes());
    assert_corruption_at(&reopen(b).unwrap_err(), OFF_HEAD, false);
    // An allocation end beyond the region.
    let mut b = image.clone();
    b[at(OFF_ALLOC_END)..at(OFF_ALLOC_END) + 8].copy_from_slice(&8192u64.to_le_bytes());
    assert_corruption_at(&reopen(b).unwrap_err(), OFF_ALLOC_END, false);
    // A region too small for a header cannot become a list.
    let small: Arc<dyn Region> = Arc::new(SimulatedRegion::new(100));
    let e = PSkipList::create(small, PATH, 1).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
}
