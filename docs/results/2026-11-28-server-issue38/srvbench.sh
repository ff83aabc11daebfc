#!/usr/bin/env bash
# usage: srvbench.sh BIN PORT LABEL
set -u
BIN=$1; PORT=$2; LABEL=$3
D=/tmp/srvb-$PORT; F=/dev/shm/srvb-$PORT
rm -rf $D $F; mkdir -p $D
$BIN --dir $D --fast-dir $F --port $PORT > $D.log 2>&1 &
PID=$!
for i in $(seq 100); do redis-cli -p $PORT ping >/dev/null 2>&1 && break; sleep 0.1; done
V=$(head -c 4096 /dev/zero | tr '\0' v)
set_out=$(redis-benchmark -p $PORT -t set -n 200000 -r 100000 -d 4096 -P 16 -c 50 -q 2>/dev/null | tr '\r' '\n' | grep -a "requests per second" | tail -1)
get_out=$(redis-benchmark -p $PORT -t get -n 400000 -r 100000 -P 16 -c 50 -q 2>/dev/null | tr '\r' '\n' | grep -a "requests per second" | tail -1)
echo "$LABEL SET: $set_out"
echo "$LABEL GET: $get_out"
redis-cli -p $PORT shutdown >/dev/null 2>&1; wait $PID 2>/dev/null
rm -rf $D $F $D.log
