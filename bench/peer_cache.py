#!/usr/bin/env python3
"""Storage reads per epoch with 1, 2 and 4 simulated nodes sharing the peer cache
(CoorDL's partitioned cache on memcached, spec/format.md §8.6).

Each simulated node is its own process running l3.Loader over the whole dataset
(its own seed, so its own order) for --epochs epochs, with peer_cache set to the
memcached servers of all the nodes; the servers (one per node, `-M -m
--node-mb`) run on 127.0.0.1 and are started and stopped here. Nodes of one
configuration start together and run side by side. The dataset's directory
stands for the cluster's shared storage; "storage" bytes are the payload bytes
the readers read from it (Loader.stats()["bytes_read"]; peers and RAM excluded).

Every epoch of every node is checked against the same epoch read without the
peer cache (sha256 of the batches' pixels and record indices): a wrong record fails the run. With --kill, one more 2-node run kills
the second node's memcached in the middle of epoch 2.

  python3 bench/peer_cache.py [--records 600] [--side 160] [--node-fraction 0.6] [--epochs 3]
      [--nodes 1,2,4] [--kill] [--work DIR] [--markdown FILE]
"""
import argparse
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

import l3


def make_dataset(path, records, side):
    """Noise images (they do not compress): bytes per record about side*side*3."""
    rng = np.random.default_rng(1)
    with l3.DatasetWriter(path, classes=["x"], shard_size=16 << 20) as w:
        for i in range(records):
            w.add(rng.integers(0, 256, size=(side, side, 3), dtype=np.uint8), label=0, key=f"r{i:06d}")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_memcached(memory_mb):
    port = free_port()
    args = ["memcached", "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-M", "-m", str(memory_mb), "-t", "1"]
    if os.geteuid() == 0:
        args += ["-u", "root"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(400):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.025)
    proc.kill()
    raise RuntimeError("memcached did not start")


LOADER = dict(batch_size=16, size=32, crop="center", dtype="uint8", workers=1, prefetch=2)


def read_epochs(dataset, seed, epochs, servers, kill_pid=0, kill_epoch=-1):
    """One node: per epoch, storage bytes/records, peer counters and a digest."""
    out = []
    kw = dict(LOADER, seed=seed)
    if servers:
        kw.update(peer_cache=servers, peer_timeout_ms=500)
    with l3.Loader(dataset, **kw) as ld:
        for e in range(epochs):
            h = hashlib.sha256()
            for k, b in enumerate(ld):
                h.update(b.data.tobytes())
                h.update(b.records.tobytes())
                if e == kill_epoch and k == len(ld) // 2 and kill_pid:
                    os.kill(kill_pid, signal.SIGKILL)
            s = ld.stats()
            out.append(dict(bytes=s["bytes_read"], records=s["records_read"], peer=s.get("peer_cache", {}),
                            digest=h.hexdigest()))
            ld.reset_stats()
    return out


def run_nodes(args, dataset, n, node_mb, kill=False):
    servers = [start_memcached(node_mb) for _ in range(n)]
    addresses = [a for _, a in servers]
    try:
        procs = []
        for i in range(n):
            cmd = [sys.executable, __file__, "--node", dataset, "--seed", str(i), "--epochs", str(args.epochs),
                   "--servers", ",".join(addresses)]
            if kill and i == 0:
                cmd += ["--kill-pid", str(servers[-1][0].pid), "--kill-epoch", "1"]
            procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE))
        results = []
        for p in procs:
            stdout, _ = p.communicate(timeout=1800)
            if p.returncode != 0:
                raise RuntimeError(f"node exited with {p.returncode}")
            results.append(json.loads(stdout))
        return results
    finally:
        for proc, _ in servers:
            proc.kill()
            proc.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=600)
    ap.add_argument("--side", type=int, default=160)
    ap.add_argument("--node-fraction", type=float, default=0.6,
                    help="each node's memcached memory (-m) as a fraction of the dataset's payload bytes")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--nodes", default="1,2,4")
    ap.add_argument("--kill", action="store_true", help="also: 2 nodes, one memcached killed mid-epoch 2")
    ap.add_argument("--work", default="")
    ap.add_argument("--markdown", default="")
    # a node (internal)
    ap.add_argument("--node", default="")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--servers", default="")
    ap.add_argument("--kill-pid", type=int, default=0)
    ap.add_argument("--kill-epoch", type=int, default=-1)
    args = ap.parse_args()
    if args.node:
        servers = [s for s in args.servers.split(",") if s]
        print(json.dumps(read_epochs(args.node, args.seed, args.epochs, servers, args.kill_pid, args.kill_epoch)))
        return
    if shutil.which("memcached") is None:
        sys.exit("peer_cache.py: needs memcached (scripts/install-deps.sh --test)")

    work = args.work or tempfile.mkdtemp(prefix="l3-peer-bench-")
    dataset = os.path.join(work, "ds")
    shutil.rmtree(dataset, ignore_errors=True)
    make_dataset(dataset, args.records, args.side)
    shards = len([f for f in os.listdir(dataset) if f.endswith(".l3s")])
    payload = read_epochs(dataset, 0, 1, [])[0]["bytes"]  # one epoch without peers reads every payload once
    node_mb = max(2, int(args.node_fraction * payload / (1 << 20) + 0.5))
    counts = [int(c) for c in args.nodes.split(",")]
    seeds = max(counts)
    reference = {s: [r["digest"] for r in read_epochs(dataset, s, args.epochs, [])] for s in range(seeds)}

    lines = []
    say = lambda text="": (print(text), lines.append(text))  # noqa: E731
    say(f"dataset: {args.records} records of {args.side}x{args.side}x3 noise, {payload / 1e6:.1f} MB of payloads, "
        f"{shards} shards; memcached -M -m {node_mb} "
        f"per node ({node_mb * (1 << 20) / payload:.2f}x the payloads); loader {LOADER}")
    say()
    say("| nodes | epoch | storage MB per node (mean) | records per node | x one node alone | cluster MB | "
        "peer hits per node | refused | wrong records |")
    say("|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    alone = {}
    summary = {}
    for n in counts:
        res = run_nodes(args, dataset, n, node_mb)
        for e in range(args.epochs):
            per = [r[e] for r in res]
            wrong = sum(per[i]["digest"] != reference[i][e] for i in range(n))
            mean_bytes = sum(p["bytes"] for p in per) / n
            mean_records = sum(p["records"] for p in per) / n
            hits = sum(p["peer"].get("hits", 0) for p in per) / n
            refused = sum(p["peer"].get("refused", 0) for p in per)
            if n == 1:
                alone[e] = mean_bytes
            ratio = mean_bytes / alone[e] if alone.get(e) else float("nan")
            summary[(n, e)] = ratio
            say(f"| {n} | {e + 1} | {mean_bytes / 1e6:.2f} | {mean_records:.0f} | {ratio:.3f} | "
                f"{n * mean_bytes / 1e6:.2f} | {hits:.0f} | {refused} | {wrong} |")
            if wrong:
                say(f"WRONG RECORDS: {wrong} node epochs differ from the reference")
                sys.exit(1)
    if args.kill:
        res = run_nodes(args, dataset, 2, node_mb, kill=True)
        say()
        say("2 nodes, the second node's memcached killed (SIGKILL) half-way through epoch 2 by node 1:")
        say()
        say("| node | epoch | storage MB | records | peer hits | failures | skipped | wrong records |")
        say("|--:|--:|--:|--:|--:|--:|--:|--:|")
        wrong_total = 0
        for i, r in enumerate(res):
            for e, p in enumerate(r):
                wrong = int(p["digest"] != reference[i][e])
                wrong_total += wrong
                say(f"| {i + 1} | {e + 1} | {p['bytes'] / 1e6:.2f} | {p['records']} | {p['peer'].get('hits', 0)} | "
                    f"{p['peer'].get('failures', 0)} | {p['peer'].get('skipped', 0)} | {wrong} |")
        if wrong_total:
            sys.exit(1)
    if 2 in counts and args.epochs >= 2:
        say()
        say(f"bar: 2 nodes, epoch 2: {summary[(2, 1)]:.3f}x the storage bytes of one node alone (<= 0.55)")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(lines) + "\n")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
