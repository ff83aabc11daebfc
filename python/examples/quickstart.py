"""matrixkv from Python in a minute: `pip install ./python`, then `python python/examples/quickstart.py`."""
import tempfile

import matrixkv

with tempfile.TemporaryDirectory() as tmp:
    # Slow tier under <path>/slow, fast tier under <path>/fast (pass fast_dir= for pmem).
    with matrixkv.DB(tmp + "/db") as db:
        db[b"user:1"] = b"ada"
        db["user:2".encode()] = "grace".encode()  # keys and values are bytes; str is refused
        with db.write_batch() as batch:  # atomic
            batch.put(b"user:3", b"linus")
            batch.delete(b"user:2")
        for key, value in db.items(b"user:", b"user;"):
            print(key.decode(), value.decode())
        with db.snapshot() as snap:
            db[b"user:1"] = b"ada lovelace"
            print("snapshot still sees", snap.get(b"user:1"))
        print("user_ops:", db.stats()["user_ops"])
