#!/usr/bin/env bash
# bench-read --peer-cache: two runs stand for two nodes sharing one memcached
# (started here on 127.0.0.1, stopped by its PID); the second reads nothing
# from storage. A malformed server is a usage error. Dataset: made by
# test_reader_pipeline's first test case.
set -euo pipefail
bench="$1"; maker="$2"; bin="$3"
"$maker" --no-intro=true -tc="batches equal a reference*" >/dev/null
ds="$bin/test_tmp/$(basename "$maker")/reference"  # fresh_dir() in test_util.hpp
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
user=(); [[ $(id -u) -eq 0 ]] && user=(-u root)
memcached -l 127.0.0.1 -p "$port" -U 0 -M -m 16 -t 1 "${user[@]}" >/dev/null 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.05
done
first=$("$bench" bench-read "$ds" --batch 4 --crop 16 --seed 1 --peer-cache "127.0.0.1:$port")
echo "$first"
grep -q "peers:     1 memcached servers" <<<"$first"
grep -q "storage: 40 records read; peer cache: hits 0 .*, misses 40, stored 40" <<<"$first"
second=$("$bench" bench-read "$ds" --batch 4 --crop 16 --seed 2 --json --peer-cache "127.0.0.1:$port")
echo "$second"
grep -q '"bytes_read":0,' <<<"$second"
grep -q '"records_read":0,' <<<"$second"
grep -q '"hits":40,"misses":0,' <<<"$second"
set +e
"$bench" bench-read "$ds" --peer-cache "127.0.0.1:" 2>/dev/null; rc=$?
[[ $rc -eq 2 ]] || { echo "expected exit 2 for a malformed --peer-cache server, got $rc"; exit 1; }
echo "test_reader_peer_cli: ok"
