#!/usr/bin/env bash
# Cross-check with a tool we did not write: runs Debian's db_bench (rocksdb-tools, RocksDB
# 7.8.3, built with ASSERTIONS ENABLED, which slows it) and matrixkv on the same workload, and
# writes one report with both. Extra arguments go to `matrixkv bench` (e.g. --num=2000000
# --value_size=4096 for B1).
#
# Usage: scripts/bench-crosscheck.sh [bench flags...]
#        (default: --benchmarks=fillrandom,readrandom --num=100000 --value_size=1024)
# A saved db_bench log can also be converted: matrixkv bench parse-db-bench LOG --out DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v db_bench >/dev/null; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq rocksdb-tools
fi
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
cargo build --release -p matrixkv-cli
FAST=/dev/shm/matrixkv-crosscheck-$$
trap 'rm -rf "$FAST"' EXIT
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--benchmarks=fillrandom,readrandom --num=100000 --value_size=1024)
"$CARGO_TARGET_DIR/release/matrixkv" bench --engines=matrixkv,db_bench --fast_dir="$FAST" "${args[@]}"
