use crate::error::Error;
use crate::layout::FileNum;
use crate::version::edit::VersionEdit;

#[test]
fn an_edit_that_does_not_apply_names_the_manifest_at_its_end() {
    let db = crate::engine::testutil::open_simulated(crate::Options::new("/db"));
    let inner = db.inner();
    let manifest = inner.manifest.lock();
    let (path, end) = (manifest.path().to_path_buf(), manifest.size_bytes());
    let mut st = inner.state.lock();
    assert!(st.versions.log_number().0 > 0);
    // Moves the log number back: refused by `prepare`.
    let mut edit = VersionEdit {
        log_number: Some(FileNum(0)),
        ..VersionEdit::default()
    };
    match inner.install_edit(manifest, &mut st, &mut edit) {
        Err(Error::Corruption { site, .. }) => {
            assert_eq!(site.path, path, "{site:?}");
            assert_eq!(site.offset, end, "{site:?}");
        }
        other => panic!("expected a corruption of {}, got {other:?}", path.display()),
    }
}
