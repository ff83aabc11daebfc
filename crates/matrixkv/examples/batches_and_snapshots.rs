//! Atomic write batches across keyspaces, and snapshots that keep seeing the past.
//!
//! `cargo run -p matrixkv --example batches_and_snapshots`

use matrixkv::{Db, KeyspaceOptions, Options, WriteBatch, WriteOptions};

fn main() -> matrixkv::Result<()> {
    let dir = tempfile::tempdir().map_err(|e| matrixkv::Error::invalid(e.to_string()))?;
    let db = Db::open(Options::new(dir.path()))?;
    let accounts = db.create_keyspace("accounts", KeyspaceOptions::default())?;
    accounts.put(b"alice", b"100")?;
    accounts.put(b"bob", b"50")?;

    // A snapshot sees the database as it is now, whatever is written later.
    let before = db.snapshot();

    // A transfer: both balances and a journal entry change together or not at all; `sync`
    // makes the batch survive a power loss once `write_opt` returns.
    let mut transfer = WriteBatch::new();
    transfer.put_cf(&accounts, b"alice", b"70");
    transfer.put_cf(&accounts, b"bob", b"80");
    transfer.put(b"journal/1", b"alice->bob 30");
    db.write_opt(transfer, &WriteOptions { sync: true })?;

    assert_eq!(accounts.get(b"alice")?, Some(b"70".to_vec()));
    let old = accounts.get_opt(b"alice", &before.read_options())?;
    assert_eq!(old, Some(b"100".to_vec()));
    println!("alice now 70, and 100 in the snapshot taken before the transfer");
    drop(before);
    drop(accounts);
    db.close()
}
