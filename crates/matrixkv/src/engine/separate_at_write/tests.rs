use super::*;
use crate::key::SeqNo;

#[test]
fn a_blob_pointer_that_does_not_decode_is_corruption_not_garbage() {
    let good = {
        let mut v = Vec::new();
        BlobPointer {
            file: FileNum(5),
            offset: crate::blob::HEADER_LEN as u64,
            len: 10,
        }
        .encode_to(&mut v);
        v
    };
    let ok = [MemEntry::new(b"a", SeqNo(1), ValueKind::BlobIndex, &good)];
    assert_eq!(live_records(FileNum(5), &ok).unwrap(), (1, 10));
    let bad = [MemEntry::new(b"a", SeqNo(1), ValueKind::BlobIndex, b"\xff")];
    let got = live_records(FileNum(5), &bad);
    assert!(
        matches!(got, Err(Error::Corruption { .. })),
        "a damaged pointer was counted as garbage: {got:?}"
    );
}
