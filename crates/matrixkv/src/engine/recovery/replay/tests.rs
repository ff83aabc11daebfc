use super::*;

#[test]
fn a_logged_batch_that_does_not_decode_names_its_segment_and_record() {
    let path = Path::new("/db/fast/000003.wal");
    match decode_logged(&[1, 2, 3], path, 4096) {
        Err(Error::Corruption { site, .. }) => {
            assert_eq!(site.kind, ArtifactKind::Wal);
            assert_eq!(site.path, path);
            assert_eq!(site.offset, 4096);
        }
        other => panic!("expected a corruption, got {other:?}"),
    }
}
