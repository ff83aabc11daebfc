//! Open a database, write, read, delete and scan.
//!
//! `cargo run -p matrixkv --example basic` (the database lives in a temporary directory).

fn main() -> matrixkv::Result<()> {
    let dir = tempfile::tempdir().map_err(|e| matrixkv::Error::invalid(e.to_string()))?;
    // Both tiers under one directory: <dir>/fast and <dir>/slow.
    let db = matrixkv::Db::open(matrixkv::Options::new(dir.path()))?;
    db.put(b"apple", b"red")?;
    db.put(b"banana", b"yellow")?;
    db.put(b"cherry", b"dark red")?;
    assert_eq!(db.get(b"banana")?, Some(b"yellow".to_vec()));
    db.delete(b"banana")?;
    assert_eq!(db.get(b"banana")?, None);
    let mut it = db.iter()?;
    it.seek_to_first()?;
    while it.valid() {
        println!(
            "{} = {}",
            String::from_utf8_lossy(it.key()),
            String::from_utf8_lossy(it.value())
        );
        it.next()?;
    }
    drop(it);
    db.close()
}
