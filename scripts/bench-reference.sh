#!/usr/bin/env bash
# The reference comparison of BENCHMARKS.md, end to end: installs what is needed (clang and
# libclang for the RocksDB build, Debian's rocksdb-tools for the db_bench cross-check), builds
# `matrixkv` with the `rocksdb` feature once (about 20 minutes on 2 cores), then runs
#   B1  fillrandom: matrixkv vs RocksDB-SSD vs RocksDB-L0-fast (same session),
#   B3  readrandom / readseq / seekrandom with 100-key scans on the settled database,
#   B4  YCSB load + A-F,
#   B5  YCSB-A open loop at a fixed arrival rate,
#   X   the db_bench cross-check of B1 (Debian's RocksDB 7.8.3, assertions enabled),
# and merges everything into one report (markdown + SVG/PNG plots).
#
# Usage: scripts/bench-reference.sh [smoke|full]      (default: full)
#   smoke: a few seconds per step, to check the pipeline;
#   full:  the paper's setup scaled by 1/10 (B1 writes 8 GiB per engine: about an hour).
# Environment: OUT (results root, default bench-results/reference-<UTC time>), STEPS (default
# "b1 b3 b4 b5 x"), ENGINES (default "matrixkv,rocksdb-ssd,rocksdb-l0-fast"), RATE (B5, 20000).
set -euo pipefail
cd "$(dirname "$0")/.."

SCALE=${1:-full}
STEPS=${STEPS:-"b1 b3 b4 b5 x"}
ENGINES=${ENGINES:-matrixkv,rocksdb-ssd,rocksdb-l0-fast}
RATE=${RATE:-20000}
OUT=${OUT:-bench-results/reference-$(date -u +%Y%m%d-%H%M%S)}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
FAST=/dev/shm/matrixkv-reference-$$
SLOW=${SLOW:-$PWD/bench-data/reference-$$}
trap 'rm -rf "$FAST" "$SLOW"; rmdir "$(dirname "$SLOW")" 2>/dev/null || true' EXIT

case "$SCALE" in
  full)  NUM=2000000; READS=1000000; YCSB_NUM=1000000; YCSB_OPS=1000000; VALUE=4096 ;;
  smoke) NUM=20000;   READS=10000;   YCSB_NUM=10000;   YCSB_OPS=10000;   VALUE=4096 ;;
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

echo "building matrixkv with the rocksdb feature (first time: ~20 minutes)..." >&2
nice -n 19 cargo build --release -p matrixkv-cli --features rocksdb
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
  # Steps other than B3 start from fresh databases.
  case "$name" in b1-*|b3-*|b5-*) ;; *) rm -rf "${FAST:?}"/* "${SLOW:?}"/* ;; esac
  echo "== $name: $BIN bench $*" >&2
  "$BIN" bench "${COMMON[@]}" "$@" --results_dir="$OUT/$name" | tee "$OUT/$name.log"
}

filled=""
for step in $STEPS; do
  case "$step" in
    # B1 keeps its databases (per-run directories) so that B3 reads them once settled.
    b1) run b1-fillrandom --engines="$ENGINES" --benchmarks=fillrandom --num=$NUM \
          --value_size=$VALUE --use_existing_db
        filled=yes ;;
    b3) reads=waitforcompaction,readrandom,readseq,seekrandom
        [ -n "$filled" ] || reads=fillrandom,$reads
        run b3-reads --engines="$ENGINES" --benchmarks=$reads --use_existing_db \
          --num=$NUM --reads=$READS --value_size=$VALUE --seek_nexts=100
        rm -rf "${FAST:?}"/* "${SLOW:?}"/*
        filled="" ;;
    b4) run b4-ycsb --engines="$ENGINES" \
          --benchmarks=ycsb_load,ycsba,ycsbb,ycsbc,ycsbf,ycsbd,ycsbe \
          --num=$YCSB_NUM --reads=$YCSB_OPS --value_size=1024 ;;
    # B5: load closed-loop and keep the databases, then YCSB-A at a fixed arrival rate.
    b5) "$BIN" bench "${COMMON[@]}" --engines="$ENGINES" --benchmarks=ycsb_load \
          --num=$YCSB_NUM --value_size=1024 --use_existing_db --no_results_dir > "$OUT/b5-load.log"
        run b5-open-loop --engines="$ENGINES" --benchmarks=ycsba --use_existing_db \
          --num=$YCSB_NUM --reads=$YCSB_OPS --value_size=1024 --rate="$RATE"
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
