#!/usr/bin/env bash
# redis-benchmark against matrixkv-server and redis-server (AOF, appendfsync everysec: the
# durable comparable), one after the other on the same machine, and a table of ops/s, p50, p99
# and p99.9 (ms) per test. Loads: SET and GET of 4 KiB values (-P 16 -c 50), and a YCSB-A-like
# mix (50% GET, 50% SET on the same 100K keys, two concurrent redis-benchmark processes).
# A third run caps redis-server at 256 MiB (maxmemory, noeviction) and writes more than that:
# redis cannot follow (its SETs fail, counted), matrixkv keeps the data on disk.
#
#   scripts/server-bench.sh [requests]     (default 200000; deletes its data at the end)
#
# Fast tier under /dev/shm (benchmarks only), slow tier and redis's AOF under ./bench-data.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-200000}
VALUE=$(head -c 4096 /dev/zero | tr '\0' v)
for t in redis-benchmark redis-server; do
  command -v $t > /dev/null || { echo "needs $t: scripts/install-test-deps"; exit 2; }
done
cargo build --release -q -p matrixkv-server
WORK=$(pwd)/bench-data/server-bench; FAST=/dev/shm/matrixkv-server-bench
rm -rf "$WORK" "$FAST"; mkdir -p "$WORK/redis" "$WORK/mkv"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2> /dev/null || true; done; rm -rf "$WORK" "$FAST"; }
trap cleanup EXIT
wait_port() { for _ in $(seq 100); do redis-cli -p "$1" ping > /dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }

# One redis-benchmark run: prints "name ops/s p50 p99 p99.9".
bench() { # port name args...
  local port=$1 name=$2; shift 2
  redis-benchmark -p "$port" "$@" 2>/dev/null | python3 -c '
import re, sys
text = sys.stdin.read()
rps = re.findall(r"throughput summary: ([0-9.]+) requests per second", text)
dist = re.findall(r"^\s*([0-9.]+)% <= ([0-9.]+) milliseconds", text, re.M)
def at(q):
    for p, ms in dist:
        if float(p) >= q:
            return ms
    return "?"
print(sys.argv[1], rps[-1] if rps else "?", at(50), at(99), at(99.9))
' "$name"
}

run_all() { # port label
  local port=$1 label=$2
  bench "$port" "$label set-4k" -t set -n "$N" -P 16 -c 50 -d 4096 -r 100000
  bench "$port" "$label get-4k" -t get -n "$N" -P 16 -c 50 -d 4096 -r 100000
  # YCSB-A-like: reads and updates at once on the same keys.
  bench "$port" "$label mix-get" -n "$N" -c 25 -P 4 -r 100000 GET key:__rand_int__ > "$WORK/mixget" &
  # (redis-benchmark fills __data__ only for its built-in tests: the 4 KiB value is literal.)
  bench "$port" "$label mix-set" -n "$N" -c 25 -P 4 -r 100000 SET key:__rand_int__ "$VALUE" > "$WORK/mixset"
  wait
  cat "$WORK/mixget" "$WORK/mixset"
}

echo "== matrixkv-server"
target/release/matrixkv-server --port 16379 --dir "$WORK/mkv" --fast-dir "$FAST" > "$WORK/mkv.log" 2>&1 &
PIDS+=($!); wait_port 16379
R1=$(run_all 16379 matrixkv)
echo "$R1"
redis-cli -p 16379 shutdown > /dev/null 2>&1 || true

echo "== redis-server (appendonly yes, appendfsync everysec)"
redis-server --port 16380 --dir "$WORK/redis" --appendonly yes --appendfsync everysec --save "" \
  --daemonize no > "$WORK/redis.log" 2>&1 &
PIDS+=($!); wait_port 16380
R2=$(run_all 16380 redis)
echo "$R2"
echo "   redis memory: $(redis-cli -p 16380 info memory | grep -E '^used_memory_human' | tr -d '\r')"
redis-cli -p 16380 shutdown nosave > /dev/null 2>&1 || true

echo "== larger than the memory budget: 1 GiB of 4 KiB values, redis-server capped at 256 MiB"
redis-server --port 16381 --dir "$WORK/redis" --maxmemory 256mb --maxmemory-policy noeviction \
  --appendonly no --save "" --daemonize no > "$WORK/redis-cap.log" 2>&1 &
PIDS+=($!); wait_port 16381
redis-benchmark -p 16381 -t set -n 262144 -P 16 -c 50 -d 4096 -r 1000000000 -q > /dev/null 2>&1 || true
echo "   redis (256 MiB cap): keys stored $(redis-cli -p 16381 dbsize), memory $(redis-cli -p 16381 info memory | grep -E '^used_memory_human' | tr -d '\r')"
redis-cli -p 16381 shutdown nosave > /dev/null 2>&1 || true
target/release/matrixkv-server --port 16382 --dir "$WORK/mkv-big" --fast-dir "$FAST-big" > "$WORK/mkv-big.log" 2>&1 &
PIDS+=($!); wait_port 16382
redis-benchmark -p 16382 -t set -n 262144 -P 16 -c 50 -d 4096 -r 1000000000 -q > /dev/null 2>&1 || true
echo "   matrixkv-server: keys stored $(redis-cli -p 16382 dbsize), RSS $(ps -o rss= -p "${PIDS[-1]}" | awk '{printf "%.0f MiB", $1/1024}')"
redis-cli -p 16382 shutdown > /dev/null 2>&1 || true
rm -rf "$FAST-big"

echo
echo "| test | matrixkv ops/s | redis ops/s | ratio | matrixkv p50/p99/p99.9 ms | redis p50/p99/p99.9 ms |"
echo "|---|---|---|---|---|---|"
paste -d' ' <(echo "$R1") <(echo "$R2") | awk '{ printf "| %s | %s | %s | %.2fx | %s / %s / %s | %s / %s / %s |\n", $2, $3, $9, ($9>0?$3/$9:0), $4, $5, $6, $10, $11, $12 }'
