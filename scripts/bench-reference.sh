#!/usr/bin/env bash
# The reference comparison of BENCHMARKS.md, end to end: installs what is needed (clang and
# libclang for the RocksDB build, Debian's rocksdb-tools for the db_bench cross-check), builds
# `matrixkv` with the `rocksdb` feature once (about 20 minutes on 2 cores), then runs
#   B1  fillrandom 4 KiB: every engine, --repeat runs with the engines interleaved,
#   B2  fillrandom at 256 B and 16 KiB values (same engines, same repeats),
#   B3  readrandom / readseq / seekrandom with 100-key scans on the settled database,
#   B4  YCSB load + A-F,
#   B5  YCSB load + A open loop at a fixed arrival rate (default: a third of matrixkv's median
#       B1 throughput when B1 ran, else 20000/s), --repeat runs,
#   X   the db_bench cross-check of B1 (Debian's RocksDB 7.8.3, assertions enabled),
# and merges everything into one report (markdown + SVG/PNG plots; ratios as the median and
# range over the runs).
#
# Usage: scripts/bench-reference.sh [smoke|full]      (default: full)
#   smoke: a few seconds per step, to check the pipeline;
#   full:  B1 writes 8 GiB per engine and run (16 KiB: 8 GiB; 256 B: 2 GiB); hours with 3 runs.
# Environment: OUT (results root, default bench-results/reference-<UTC time>), STEPS (default
# "b1 b2 b3 b4 b5 x"), ENGINES (default "matrixkv,rocksdb-ssd,rocksdb-blob,rocksdb-best"; add
# fjall with FEATURES="rocksdb fjall", and append-log, the plainest store, as a reference for
# B5's absolute tail: docs/bench.md), REPEAT (B1, B2, B5; default 3, smoke 1), RATE (B5),
# FEATURES (cargo features, default "rocksdb").
set -euo pipefail
cd "$(dirname "$0")/.."

SCALE=${1:-full}
STEPS=${STEPS:-"b1 b2 b3 b4 b5 x"}
ENGINES=${ENGINES:-matrixkv,rocksdb-ssd,rocksdb-blob,rocksdb-best}
FEATURES=${FEATURES:-rocksdb}
RATE=${RATE:-}
OUT=${OUT:-bench-results/reference-$(date -u +%Y%m%d-%H%M%S)}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
FAST=/dev/shm/matrixkv-reference-$$
SLOW=${SLOW:-$PWD/bench-data/reference-$$}
trap 'rm -rf "$FAST" "$SLOW"; rmdir "$(dirname "$SLOW")" 2>/dev/null || true' EXIT

case "$SCALE" in
  full)  NUM=2000000; READS=1000000; YCSB_NUM=1000000; YCSB_OPS=1000000; VALUE=4096
         NUM_256=8000000; NUM_16K=524288; REPEAT=${REPEAT:-3} ;;
  smoke) NUM=20000;   READS=10000;   YCSB_NUM=10000;   YCSB_OPS=10000;   VALUE=4096
         NUM_256=40000;   NUM_16K=5000;   REPEAT=${REPEAT:-1} ;;
  *) echo "usage: $0 [smoke|full]" >&2; exit 2 ;;
esac

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
need=()
dpkg -s clang >/dev/null 2>&1 || need+=(clang)
dpkg -s libclang-dev >/dev/null 2>&1 || need+=(libclang-dev)
dpkg -s rocksdb-tools >/dev/null 2>&1 || need+=(rocksdb-tools)
if [ ${#need[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
fi

echo "building matrixkv with features '$FEATURES' (first time: ~20 minutes)..." >&2
nice -n 19 cargo build --release -p matrixkv-cli --features "$FEATURES"
BIN="$CARGO_TARGET_DIR/release/matrixkv"

# Free space: the slow tier needs room for the largest database plus 20 GiB.
mkdir -p "$SLOW" "$FAST"
avail_gib=$(df -Pk "$SLOW" | awk 'NR==2 {print int($4/1048576)}')
if [ "$SCALE" = full ] && [ "$avail_gib" -lt 40 ]; then
  echo "only ${avail_gib} GiB free under $(dirname "$SLOW"): need about 40" >&2
  exit 1
fi

mkdir -p "$OUT"
COMMON=(--key_size=16 --seed=301 --write_buffer_size=67108864 --max_write_buffer_number=2
        --target_file_size_base=67108864 --max_bytes_for_level_multiplier=10
        --compression_type=none --max_background_jobs=2 --fast_dir="$FAST" --db="$SLOW")
run() { # name, then bench flags
  local name=$1; shift
  # Every step starts from fresh databases (B3 fills its own).
  rm -rf "${FAST:?}"/* "${SLOW:?}"/*
  echo "== $name: $BIN bench $*" >&2
  "$BIN" bench "${COMMON[@]}" "$@" --results_dir="$OUT/$name" | tee "$OUT/$name.log"
}

for step in $STEPS; do
  case "$step" in
    # B1 runs --repeat times on fresh databases; B3 then fills its own.
    b1) run b1-fillrandom --engines="$ENGINES" --benchmarks=fillrandom --num=$NUM \
          --value_size=$VALUE --repeat="$REPEAT" ;;
    b2) run b2-fillrandom-256 --engines="$ENGINES" --benchmarks=fillrandom --num=$NUM_256 \
          --value_size=256 --repeat="$REPEAT"
        run b2-fillrandom-16k --engines="$ENGINES" --benchmarks=fillrandom --num=$NUM_16K \
          --value_size=16384 --repeat="$REPEAT" ;;
    b3) run b3-reads --engines="$ENGINES" \
          --benchmarks=fillrandom,waitforcompaction,readrandom,readseq,seekrandom \
          --num=$NUM --reads=$READS --value_size=$VALUE --seek_nexts=100
        rm -rf "${FAST:?}"/* "${SLOW:?}"/* ;;
    b4) run b4-ycsb --engines="$ENGINES" \
          --benchmarks=ycsb_load,ycsba,ycsbb,ycsbc,ycsbf,ycsbd,ycsbe \
          --num=$YCSB_NUM --reads=$YCSB_OPS --value_size=1024 ;;
    # B5: the load and YCSB-A, both open loop at one arrival rate: a third of matrixkv's
    # median B1 throughput (the issue's bar), unless RATE is given or B1 did not run.
    b5) rate=$RATE
        if [ -z "$rate" ] && [ -f "$OUT/b1-fillrandom/summary.json" ]; then
          rate=$(python3 -c 'import json,sys,statistics
r=[x["ops_per_sec"] for x in json.load(open(sys.argv[1])) if x["engine"]=="matrixkv"]
print(int(statistics.median(r)/3))' "$OUT/b1-fillrandom/summary.json")
        fi
        run b5-open-loop --engines="$ENGINES" --benchmarks=ycsb_load,ycsba \
          --num=$YCSB_NUM --reads=$YCSB_OPS --value_size=1024 --rate="${rate:-20000}" \
          --repeat="$REPEAT"
        rm -rf "${FAST:?}"/* "${SLOW:?}"/* ;;
    x)  run x-db_bench --engines=matrixkv,db_bench --benchmarks=fillrandom,readrandom \
          --num=$NUM --reads=$READS --value_size=$VALUE ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done

rm -rf "${FAST:?}" "${SLOW:?}"
dirs=()
for d in "$OUT"/*/; do [ -f "$d/summary.json" ] && dirs+=("$d"); done
"$BIN" bench report "${dirs[@]}" --out "$OUT/report"
echo "report: $OUT/report/report.md"
