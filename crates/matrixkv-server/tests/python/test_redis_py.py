"""The Python `redis` package (redis-py, from PyPI) against matrixkv-server.

Run by tests/real_clients.rs, which starts a server and sets MATRIXKV_SERVER_PORT.
"""
import os
import time

import pytest
import redis


@pytest.fixture()
def r():
    port = int(os.environ["MATRIXKV_SERVER_PORT"])
    client = redis.Redis(host="127.0.0.1", port=port, db=0)
    client.flushall()
    yield client
    client.close()


def test_strings_round_trip_with_options(r):
    assert r.set("k", "v") is True
    assert r.get("k") == b"v"
    assert r.set("k", "w", nx=True) is None
    assert r.set("k", "w", xx=True, get=True) == b"v"
    assert r.incr("n") == 1
    assert r.incrby("n", 9) == 10
    assert r.incrbyfloat("f", 0.5) == 0.5
    assert r.mset({"a": "1", "b": "2"}) is True
    assert r.mget("a", "missing", "b") == [b"1", None, b"2"]
    assert r.delete("a", "b", "missing") == 2
    assert r.exists("k", "n") == 2
    assert r.append("k", "x") == 2
    assert r.getrange("k", 0, 0) == b"w"


def test_expiry(r):
    r.set("t", "v", px=80)
    assert 0 < r.pttl("t") <= 80
    time.sleep(0.15)
    assert r.get("t") is None
    r.set("p", "v", ex=100)
    assert r.persist("p") is True
    assert r.ttl("p") == -1


def test_hashes(r):
    assert r.hset("h", mapping={"a": "1", "b": "2"}) == 2
    assert r.hget("h", "a") == b"1"
    assert r.hgetall("h") == {b"a": b"1", b"b": b"2"}
    assert r.hincrby("h", "a", 5) == 6
    assert r.hdel("h", "b") == 1
    assert r.hlen("h") == 1
    assert dict(r.hscan_iter("h")) == {b"a": b"6"}
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.get("h")


def test_pipeline_transaction_is_atomic(r):
    pipe = r.pipeline(transaction=True)
    pipe.set("x", "1").incr("x").hset("hh", "f", "v").hgetall("hh")
    assert pipe.execute() == [True, 2, 1, {b"f": b"v"}]
    pipe = r.pipeline(transaction=False)
    for i in range(100):
        pipe.set(f"k{i}", i)
    assert all(pipe.execute())
    assert sorted(r.scan_iter(match="k9*")) == [b"k9", b"k90", b"k91", b"k92", b"k93", b"k94", b"k95", b"k96", b"k97", b"k98", b"k99"]


def test_databases_and_server_commands(r):
    port = int(os.environ["MATRIXKV_SERVER_PORT"])
    r.set("here", "0")
    other = redis.Redis(host="127.0.0.1", port=port, db=1)
    assert other.get("here") is None
    other.set("there", "1")
    assert other.dbsize() == 1
    other.close()
    assert r.ping() is True
    assert r.echo("hi") == b"hi"
    info = r.info()
    assert "connected_clients" in info
    r.client_setname("pytest")
    assert r.client_getname() == "pytest"
    assert r.config_get("maxclients")["maxclients"]


def test_resp3(r):
    port = int(os.environ["MATRIXKV_SERVER_PORT"])
    c = redis.Redis(host="127.0.0.1", port=port, protocol=3)
    c.hset("h3", "f", "v")
    assert c.hgetall("h3") == {b"f": b"v"}
    assert c.get("none") is None
    c.close()
