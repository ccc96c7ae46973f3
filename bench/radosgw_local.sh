#!/usr/bin/env bash
# A one-OSD, memory-backed Ceph cluster with radosgw on 127.0.0.1, for the
# object-storage benchmark (bench/bench_s3.py --radosgw). Needs Debian's
# ceph-mon, ceph-osd and radosgw (scripts are not run by CI). Authentication
# between the daemons is off; S3 requests to radosgw are signed (SigV4) with
# the user's keys printed by `start`.
#   radosgw_local.sh start DIR PORT [MONPORT] -> prints AK SK once radosgw
#                                     answers (the monitor on MONPORT, else PORT+1)
#   radosgw_local.sh stop DIR         -> stops the daemons by their pid files
set -euo pipefail
# A failing command names itself (the daemons log to DIR/log).
trap 'echo "radosgw_local.sh: line $LINENO failed (exit $?): $BASH_COMMAND" >&2' ERR
cmd="$1" dir="$2"
conf="$dir/ceph.conf"

stop() {
  for f in "$dir"/run/*.pid; do
    [[ -f "$f" ]] || continue
    pid="$(cat "$f")"; kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
}

if [[ "$cmd" == stop ]]; then stop; exit 0; fi
port="$3"
rm -rf "$dir"; mkdir -p "$dir"/{mon,osd0,run,log}
fsid="$(cat /proc/sys/kernel/random/uuid)"
monport="${4:-$((port + 1))}"
cat > "$conf" <<CONF
[global]
fsid = $fsid
mon host = v1:127.0.0.1:$monport
public addr = 127.0.0.1
ms bind ipv6 = false
auth cluster required = none
auth service required = none
auth client required = none
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
mon allow pool size one = true
mon warn on pool no redundancy = false
osd objectstore = memstore
memstore device bytes = 8589934592
osd crush chooseleaf type = 0
osd data = $dir/osd0
mon data = $dir/mon
run dir = $dir/run
log file = $dir/log/\$name.log
pid file = $dir/run/\$name.pid
admin socket = $dir/run/\$name.asok
[client.rgw]
rgw frontends = beast endpoint=127.0.0.1:$port
rgw thread pool size = 64
CONF
monmaptool --create --fsid "$fsid" --addv a "[v1:127.0.0.1:$monport]" "$dir/monmap" >/dev/null
ceph-mon -c "$conf" --mkfs -i a --monmap "$dir/monmap" >/dev/null
ceph-mon -c "$conf" -i a
uuid="$(cat /proc/sys/kernel/random/uuid)"
# The monitor may refuse commands for a moment after it starts ("EPERM:
# problem getting command descriptions"): bounded retries.
for attempt in 1 2 3 4 5 6 7 8 9 10; do
  if timeout 30 ceph -c "$conf" osd new "$uuid" >/dev/null 2>"$dir/log/osd-new.err"; then break; fi
  [[ $attempt == 10 ]] && { cat "$dir/log/osd-new.err" >&2; stop; exit 1; }
  sleep 1
done
ceph-osd -c "$conf" -i 0 --mkfs --osd-uuid "$uuid" >/dev/null 2>&1
# The OSD's first boot may be refused ("wrong fsid": its monitor session had
# no map yet); bounded retries.
for attempt in 1 2 3 4 5; do
  if ceph-osd -c "$conf" -i 0 2>"$dir/log/osd-start.err"; then break; fi
  [[ $attempt == 5 ]] && { cat "$dir/log/osd-start.err" >&2; stop; exit 1; }
  sleep 1
done
radosgw -c "$conf" -n client.rgw
for _ in $(seq 120); do  # bounded: 60 s
  if keys="$(timeout 10 radosgw-admin -c "$conf" user create --uid=bench --display-name=bench 2>/dev/null)"; then
    break
  fi
  sleep 0.5
done
ak="$(python3 -c 'import json,sys; k=json.load(sys.stdin)["keys"][0]; print(k["access_key"], k["secret_key"])' <<<"$keys")"
for _ in $(seq 120); do
  curl -s -o /dev/null "http://127.0.0.1:$port/" && { echo "$ak"; exit 0; }
  sleep 0.5
done
echo "radosgw did not answer on port $port" >&2; stop; exit 1
