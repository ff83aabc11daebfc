"""The matrixkv Python package: every API, its errors, and threads sharing one database."""
import threading

import pytest

import matrixkv


@pytest.fixture()
def db(tmp_path):
    with matrixkv.DB(str(tmp_path / "db"), write_buffer_bytes=1 << 20, container_bytes=16 << 20) as d:
        yield d


def test_get_put_delete_and_the_mapping_protocol(db):
    db.put(b"a", b"1")
    db[b"b"] = b"2"
    db[bytearray(b"c")] = memoryview(b"3")
    assert db.get(b"a") == b"1"
    assert db[b"b"] == b"2"
    assert db.get(memoryview(b"c")) == b"3"
    assert db.get(b"zz") is None
    assert db.get(b"zz", b"default") == b"default"
    assert b"a" in db and b"zz" not in db
    del db[b"a"]
    with pytest.raises(KeyError):
        db[b"a"]
    db.delete(b"never-there")
    with pytest.raises(TypeError):
        db.put(42, b"x")


def test_items_keys_values_with_bounds_and_reverse(db):
    for i in range(1000):
        db.put(b"k%04d" % i, b"v%d" % i)
    keys = list(db.keys())
    assert len(keys) == 1000 and keys == sorted(keys)
    assert list(db.items(b"k0010", b"k0013")) == [(b"k0010", b"v10"), (b"k0011", b"v11"), (b"k0012", b"v12")]
    assert list(db.keys(b"k0995", reverse=True)) == [b"k0999", b"k0998", b"k0997", b"k0996", b"k0995"]
    assert list(db.values(end=b"k0002")) == [b"v0", b"v1"]
    assert len(list(db)) == 1000
    assert list(db.items(reverse=True))[0] == (b"k0999", b"v999")


def test_a_write_batch_commits_on_exit_and_discards_on_an_exception(db):
    with db.write_batch() as b:
        b.put(b"x", b"1")
        b.put(b"y", b"2")
        b.delete(b"x")
        assert len(b) == 3
    assert db.get(b"x") is None and db.get(b"y") == b"2"
    with pytest.raises(RuntimeError):
        with db.write_batch() as b:
            b.put(b"z", b"1")
            raise RuntimeError("abort")
    assert db.get(b"z") is None
    b = db.write_batch()
    b.put(b"w", b"1")
    b.write()
    with pytest.raises(matrixkv.Error):
        b.write()


def test_a_snapshot_keeps_seeing_the_past(db):
    db.put(b"k", b"old")
    with db.snapshot() as s:
        db.put(b"k", b"new")
        db.put(b"k2", b"added")
        assert s.get(b"k") == b"old"
        assert s.get(b"k2") is None
        assert list(s.items()) == [(b"k", b"old")]
    assert db.get(b"k") == b"new"


def test_iterators_see_the_database_as_of_their_creation(db):
    for i in range(600):
        db.put(b"%04d" % i, b"x")
    it = db.keys()
    first = next(it)
    for i in range(600, 700):
        db.put(b"%04d" % i, b"x")
    assert 1 + len(list(it)) == 600 and first == b"0000"


def test_delete_range_merge_flush_compact_checkpoint_stats(tmp_path):
    with matrixkv.DB(str(tmp_path / "db"), merge_operator="u64add") as db:
        for i in range(100):
            db.put(b"r%03d" % i, b"v")
        db.delete_range(b"r010", b"r090")
        assert len(list(db.keys())) == 20
        for _ in range(5):
            db.merge(b"count", (1).to_bytes(8, "little"))
        assert int.from_bytes(db[b"count"], "little") == 5
        syncs = db.stats()["wal_syncs"]
        db.sync_wal()
        assert db.stats()["wal_syncs"] == syncs + 1
        db.flush()
        db.compact_range()
        db.checkpoint(str(tmp_path / "copy"))
        stats = db.stats()
        assert stats["user_ops"] >= 105
        assert "Level" in db.property("matrixkv.levelstats")
    with matrixkv.DB(str(tmp_path / "copy"), merge_operator="u64add") as copy:
        assert int.from_bytes(copy[b"count"], "little") == 5


def test_reopen_keeps_the_data_and_read_only_refuses_writes(tmp_path):
    path = str(tmp_path / "db")
    with matrixkv.DB(path) as db:
        db.put(b"k", b"v")
    with matrixkv.DB(path, read_only=True) as ro:
        assert ro[b"k"] == b"v"
        with pytest.raises(matrixkv.ReadOnlyError):
            ro.put(b"k", b"w")


def test_errors_map_to_the_package_hierarchy(tmp_path):
    db = matrixkv.DB(str(tmp_path / "db"))
    db.close()
    db.close()  # twice is fine
    with pytest.raises(matrixkv.ClosedError):
        db.get(b"k")
    assert issubclass(matrixkv.ClosedError, matrixkv.Error)
    assert issubclass(matrixkv.CorruptionError, matrixkv.Error)
    with pytest.raises(TypeError):
        matrixkv.DB(str(tmp_path / "x"), no_such_option=1)  # type: ignore[call-arg]
    with pytest.raises(ValueError):
        matrixkv.DB(str(tmp_path / "y"), merge_operator="nope")
    with pytest.raises(matrixkv.InvalidArgumentError):
        matrixkv.DB(str(tmp_path / "z"), container_bytes=1)


def test_threads_share_one_database(db):
    def writer(t):
        for i in range(500):
            db.put(b"t%d-%03d" % (t, i), b"v")

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(list(db.keys())) == 2000


# Defects of issue 38, item 7: each of these four tests failed before its fix.


def test_a_snapshot_iterator_keeps_its_snapshot_after_release(tmp_path):
    # Seen: the iterator kept only the sequence number; once the snapshot was released and
    # every key overwritten and compacted, it returned 255 of 1,999 keys and stopped.
    with matrixkv.DB(str(tmp_path / "db"), write_buffer_bytes=1 << 20, container_bytes=16 << 20) as db:
        for i in range(2000):
            db.put(b"k%05d" % i, b"v0-%d" % i)
        with db.snapshot() as s:
            it = s.items()
            assert next(it) == (b"k00000", b"v0-0")
        for round in range(1, 6):
            for i in range(2000):
                db.put(b"k%05d" % i, b"v%d-%d" % (round, i))
            db.flush()
            db.compact_range()
        rest = list(it)
        assert len(rest) == 1999
        assert rest == [(b"k%05d" % i, b"v0-%d" % i) for i in range(1, 2000)]


def test_sync_true_syncs_merges_and_range_deletions(tmp_path):
    with matrixkv.DB(str(tmp_path / "db"), merge_operator="u64add", sync=True) as db:
        for op in (
            lambda: db.put(b"a", b"1"),
            lambda: db.merge(b"n", (1).to_bytes(8, "little")),
            lambda: db.delete_range(b"a", b"b"),
        ):
            before = db.stats()["wal_syncs"]
            op()
            assert db.stats()["wal_syncs"] > before


def test_close_closes_even_while_another_thread_is_in_a_call(tmp_path):
    # close() waits for calls in progress in other threads, then closes: the database can be
    # reopened as soon as it returns, and the other thread's later calls raise ClosedError.
    path = str(tmp_path / "db")

    def open_db():
        return matrixkv.DB(path, write_buffer_bytes=1 << 20, container_bytes=16 << 20)

    for attempt in range(5):
        db = open_db()
        started = threading.Event()
        errors = []

        def busy():
            i = 0
            try:
                while True:
                    db.put(b"busy%06d" % i, b"x" * 1000)
                    i += 1
                    if i % 50 == 0:
                        started.set()
                        db.flush()
            except matrixkv.ClosedError:
                pass
            except Exception as e:  # pragma: no cover - reported below
                errors.append(e)

        t = threading.Thread(target=busy)
        t.start()
        assert started.wait(30)
        db.close()
        again = open_db()  # raises if close() left the database open
        again.close()
        t.join()
        assert errors == []


def test_a_batch_written_to_a_closed_database_is_kept(tmp_path):
    db = matrixkv.DB(str(tmp_path / "db"))
    b = db.write_batch()
    b.put(b"k", b"v")
    db.close()
    with pytest.raises(matrixkv.ClosedError):
        b.write()
    assert len(b) == 1  # not lost: the batch can be written elsewhere or inspected


# The API of issue 38, item 7: what rocksdict and plyvel users reach for.


def test_str_keys_and_values_are_refused(db):
    for call in (
        lambda: db.put("k", b"v"),
        lambda: db.put(b"k", "v"),
        lambda: db.get("k"),
        lambda: "k" in db,
        lambda: db.multi_get([b"a", "k"]),
        lambda: db.items(prefix="k"),
        lambda: db.write_batch().put("k", b"v"),
    ):
        with pytest.raises(TypeError, match="encode"):
            call()
    assert list(db.keys()) == []


def test_sync_is_a_per_call_option(tmp_path):
    with matrixkv.DB(str(tmp_path / "db"), merge_operator="u64add") as db:

        def syncs(op):
            before = db.stats()["wal_syncs"]
            op()
            return db.stats()["wal_syncs"] - before

        one = (1).to_bytes(8, "little")
        assert syncs(lambda: db.put(b"a", b"1")) == 0
        assert syncs(lambda: db.put(b"a", b"1", sync=True)) >= 1
        assert syncs(lambda: db.delete(b"a", sync=True)) >= 1
        assert syncs(lambda: db.merge(b"n", one, sync=True)) >= 1
        assert syncs(lambda: db.delete_range(b"a", b"b", sync=True)) >= 1
        b = db.write_batch()
        b.put(b"x", b"1")
        assert syncs(lambda: b.write(sync=True)) >= 1
        with db.write_batch(sync=True) as b:
            b.put(b"y", b"1")
            before = db.stats()["wal_syncs"]
        assert db.stats()["wal_syncs"] > before
    with matrixkv.DB(str(tmp_path / "db"), merge_operator="u64add", sync=True) as db:
        before = db.stats()["wal_syncs"]
        db.put(b"b", b"2", sync=False)
        assert db.stats()["wal_syncs"] == before


def test_prefix_and_inclusive_or_exclusive_bounds(db):
    keys = [b"a", b"ab", b"abc", b"abd", b"ac", b"b", b"\xff", b"\xff\xff", b"\xff\xff\x01"]
    for k in keys:
        db.put(k, b"v" + k)
    assert list(db.keys(prefix=b"ab")) == [b"ab", b"abc", b"abd"]
    assert list(db.keys(prefix=b"ab", reverse=True)) == [b"abd", b"abc", b"ab"]
    assert list(db.items(prefix=b"abc")) == [(b"abc", b"vabc")]
    assert list(db.keys(prefix=b"\xff\xff")) == [b"\xff\xff", b"\xff\xff\x01"]
    assert list(db.keys(prefix=b"zz")) == []
    assert list(db.keys(b"ab", b"ac")) == [b"ab", b"abc", b"abd"]
    assert list(db.keys(b"ab", b"ac", include_start=False)) == [b"abc", b"abd"]
    assert list(db.keys(b"ab", b"ac", include_end=True)) == [b"ab", b"abc", b"abd", b"ac"]
    assert list(db.keys(b"ab", b"ac", reverse=True, include_start=False, include_end=True)) == [
        b"ac",
        b"abd",
        b"abc",
    ]
    assert list(db.values(end=b"ab", include_end=True)) == [b"va", b"vab"]
    # prefix= and bounds together: the keys that satisfy both
    assert list(db.keys(b"abc", prefix=b"ab")) == [b"abc", b"abd"]
    assert list(db.keys(b"b", b"a")) == []
    assert list(db.keys(b"ab", b"ab")) == []
    assert list(db.keys(b"ab", b"ab", include_end=True)) == [b"ab"]
    with db.snapshot() as s:
        db.put(b"abz", b"new")
        assert list(s.keys(prefix=b"ab")) == [b"ab", b"abc", b"abd"]
        assert list(s.values(prefix=b"ab", reverse=True)) == [b"vabd", b"vabc", b"vab"]


def test_a_seekable_iterator_moves_both_ways(db):
    import random

    keys = [b"k%04d" % i for i in range(0, 2000, 2)]  # 1000 keys, the odd ones missing
    for k in keys:
        db.put(k, b"v" + k)
    it = db.iter()
    db.put(b"k9999", b"after")  # not seen: the iterator reads as of its creation
    assert not it.valid()
    with pytest.raises(matrixkv.InvalidArgumentError):
        it.key()
    with pytest.raises(matrixkv.InvalidArgumentError):
        it.next()
    it.seek_to_first()
    walked = []
    while it.valid():
        walked.append(it.key())
        it.next()
    assert walked == keys
    it.seek_to_last()
    walked = []
    while it.valid():
        walked.append(it.key())
        it.prev()
    assert walked == keys[::-1]
    it.seek(b"k0501")  # absent: the next key
    assert (it.key(), it.value()) == (b"k0502", b"vk0502")
    it.seek_for_prev(b"k0501")
    assert it.key() == b"k0500"
    it.seek(b"k9")
    assert not it.valid()
    it.seek_for_prev(b"a")
    assert not it.valid()
    # A random walk against a model, switching direction and crossing read-ahead batches.
    rng = random.Random(7)
    pos = 400
    it.seek(keys[pos])
    for _ in range(3000):
        if rng.random() < 0.02:
            pos = rng.randrange(len(keys))
            it.seek(keys[pos])
        forward = rng.random() < 0.5
        for _ in range(rng.choice([1, 1, 3, 40, 300])):
            if forward:
                it.next()
                pos += 1
            else:
                it.prev()
                pos -= 1
            if not 0 <= pos < len(keys):
                assert not it.valid()
                pos = min(max(pos, 0), len(keys) - 1)
                it.seek(keys[pos])
                break
            assert it.key() == keys[pos]
    # Bounds and prefixes clamp every movement.
    it = db.iter(prefix=b"k01")
    it.seek_to_first()
    assert it.key() == b"k0100"
    it.seek_to_last()
    assert it.key() == b"k0198"
    it.next()
    assert not it.valid()
    it.seek(b"k0000")
    assert it.key() == b"k0100"
    it = db.iter(b"k0100", b"k0104", include_start=False, include_end=True)
    it.seek_to_first()
    assert it.key() == b"k0102"
    it.seek_to_last()
    assert it.key() == b"k0104"
    it = db.iter(b"k2", b"k1")
    it.seek_to_first()
    assert not it.valid()


def test_a_seekable_iterator_of_a_snapshot_outlives_its_release(db):
    for i in range(600):
        db.put(b"k%04d" % i, b"old")
    with db.snapshot() as s:
        it = s.iter()
    for i in range(600):
        db.put(b"k%04d" % i, b"new")
    db.flush()
    db.compact_range()
    it.seek_to_last()
    n = 0
    while it.valid():
        assert it.value() == b"old"
        n += 1
        it.prev()
    assert n == 600


def test_multi_get(db):
    db.put(b"a", b"1")
    db.put(b"c", b"3")
    assert db.multi_get([b"c", b"b", b"a", b"c"]) == [b"3", None, b"1", b"3"]
    assert db.multi_get(k for k in (b"a",)) == [b"1"]
    assert db.multi_get([]) == []
    with db.snapshot() as s:
        db.put(b"b", b"2")
        assert s.multi_get([b"a", b"b"]) == [b"1", None]
    assert db.multi_get([b"b"]) == [b"2"]


def test_keyspaces(tmp_path):
    path = str(tmp_path / "db")
    with matrixkv.DB(path) as db:
        assert isinstance(db, matrixkv.Keyspace) and db.name == "default"
        users = db.create_keyspace("users")
        counts = db.create_keyspace("counts", merge_operator="u64add")
        assert db.list_keyspaces() == ["default", "users", "counts"]
        assert users.name == "users"
        users[b"alice"] = b"1"
        db[b"alice"] = b"other keyspace"
        assert users[b"alice"] == b"1" and db[b"alice"] == b"other keyspace"
        assert db.keyspace("users").get(b"alice") == b"1"
        assert db.keyspace("default")[b"alice"] == b"other keyspace"
        counts.merge(b"hits", (2).to_bytes(8, "little"), sync=True)
        with pytest.raises(matrixkv.InvalidArgumentError):
            users.merge(b"x", b"1")  # no merge operator in this keyspace
        with db.write_batch() as b:
            b.put(b"bob", b"2", keyspace=users)
            b.delete(b"alice", keyspace=db)
            b.merge(b"hits", (3).to_bytes(8, "little"), keyspace=counts)
        assert list(users.items()) == [(b"alice", b"1"), (b"bob", b"2")]
        assert list(db.keys()) == []
        s = db.snapshot()
        users.delete_range(b"a", b"c")
        assert users.multi_get([b"alice", b"bob"]) == [None, None]
        assert s.get(b"bob", keyspace=users) == b"2"
        assert list(s.keys(keyspace=users)) == [b"alice", b"bob"]
        it = s.iter(keyspace=users)
        it.seek_to_last()
        assert it.key() == b"bob"
        s.release()
        users.compact_range()
        with pytest.raises(matrixkv.InvalidArgumentError):
            db.keyspace("nope")
        with pytest.raises(matrixkv.InvalidArgumentError):
            db.create_keyspace("users")
        with matrixkv.DB(str(tmp_path / "other")) as other:
            with pytest.raises(matrixkv.InvalidArgumentError):
                other.write_batch().put(b"k", b"v", keyspace=users)
    with matrixkv.DB(path, keyspace_options={"counts": {"merge_operator": "u64add"}}) as db:
        counts = db.keyspace("counts")
        counts.merge(b"hits", (1).to_bytes(8, "little"))
        assert int.from_bytes(counts[b"hits"], "little") == 6
        db.drop_keyspace("users")
        assert db.list_keyspaces() == ["default", "counts"]
    with pytest.raises(TypeError):
        matrixkv.DB(path, keyspace_options={"counts": {"nope": 1}})


def test_a_dropped_keyspace_refuses_calls(db):
    ks = db.create_keyspace("gone")
    ks.put(b"k", b"v")
    db.drop_keyspace("gone")
    with pytest.raises(matrixkv.Error, match="dropped"):
        ks.get(b"k")


def test_closed_and_what_a_closed_database_answers(tmp_path):
    db = matrixkv.DB(str(tmp_path / "db"))
    ks = db.create_keyspace("ks")
    for i in range(300):
        db.put(b"k%03d" % i, b"v")
    items, raw, snap = db.items(), db.iter(), db.snapshot()
    assert next(items) == (b"k000", b"v")
    assert not db.closed and not ks.closed
    db.close()
    assert db.closed and ks.closed
    for call in (
        lambda: db.get(b"k"),
        lambda: db.put(b"k", b"v"),
        lambda: ks.get(b"k"),
        lambda: db.snapshot(),
        lambda: db.items(),
        lambda: raw.seek_to_first(),
        lambda: snap.get(b"k000"),
        lambda: db.list_keyspaces(),
        lambda: db.stats(),
    ):
        with pytest.raises(matrixkv.ClosedError):
            call()
    # The first batch was read ahead before the close; the next read raises.
    with pytest.raises(matrixkv.ClosedError):
        list(items)


def test_close_amid_calls_of_every_kind_in_other_threads(tmp_path):
    # Every call in another thread either completes or raises ClosedError; none fails otherwise.
    db = matrixkv.DB(str(tmp_path / "db"), write_buffer_bytes=1 << 20, container_bytes=16 << 20)
    ks = db.create_keyspace("ks")
    for i in range(500):
        db.put(b"k%04d" % i, b"v" * 100)
    snap = db.snapshot()
    running = threading.Barrier(5)
    errors = []

    def loop(op):
        running.wait()
        try:
            while True:
                op()
        except matrixkv.ClosedError:
            pass
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    def batch():
        with db.write_batch() as b:
            b.put(b"b", b"1")
            b.put(b"b", b"2", keyspace=ks)

    def raw():
        it = snap.iter()
        it.seek(b"k0100")
        for _ in range(50):
            it.next()

    ops = [
        lambda: db.put(b"x", b"y" * 1000),
        lambda: sum(1 for _ in db.items(prefix=b"k0")),
        batch,
        raw,
    ]
    threads = [threading.Thread(target=loop, args=(op,)) for op in ops]
    for t in threads:
        t.start()
    running.wait()
    db.close()
    for t in threads:
        t.join()
    assert errors == [] and db.closed
