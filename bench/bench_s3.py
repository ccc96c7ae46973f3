#!/usr/bin/env python3
"""The reader from an S3 server on loopback against the same dataset on local disk.

Builds a dataset (random crops of bench/sample's photos, converted with l3pack
into bench/work/s3/ds), starts moto's S3 server on 127.0.0.1 (signature checks
on, as tests/s3 does), uploads the dataset, then runs `l3pack bench-read` on
  local   the local folder (page cache warm: the best case for local disk)
  cold    s3://... with an empty shard cache (every shard downloaded)
  warm    s3://... again, with the cache the cold run filled
all with the reader's block shuffle sized to the 8 MiB fetch blocks (--block auto),
and reports images/s (the reader's own wall clock and the whole process's),
requests per image and bytes downloaded against the dataset's bytes. Every
run prints the same --digest: the bench checks the epochs are identical
before reporting any speed.

moto is a Python server: it is the bottleneck of the cold run here, not
representative of S3 or Ceph radosgw (spec/format.md §8.5, the issue's bar is
against radosgw). Needs moto[server] and Pillow in this Python.

Usage: bench/bench_s3.py [--radosgw] [--images N] [--shard-size 16MiB] [--workers 2] [--rounds 3] [--out FILE]
  --radosgw: Ceph radosgw (bench/radosgw_local.sh; Debian ceph-mon ceph-osd radosgw) instead of moto
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests" / "s3"))
import s3_fixture  # noqa: E402


class RadosGW:
    """Ceph radosgw on a one-OSD memory-backed cluster (bench/radosgw_local.sh)."""

    def __init__(self, folder: Path):
        self.folder, self.port = folder, s3_fixture.free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.keys = None

    def __enter__(self):
        out = subprocess.run(["bash", str(HERE / "radosgw_local.sh"), "start", str(self.folder), str(self.port)],
                             check=True, capture_output=True, text=True, timeout=300).stdout.split()
        self.keys = {"AWS_ACCESS_KEY_ID": out[-2], "AWS_SECRET_ACCESS_KEY": out[-1]}
        return self

    def __exit__(self, *exc):
        subprocess.run(["bash", str(HERE / "radosgw_local.sh"), "stop", str(self.folder)], timeout=60)

    def cpu_seconds(self) -> float:
        """CPU time used so far by the cluster's daemons (mon, osd, radosgw)."""
        total = 0.0
        for pid_file in (self.folder / "run").glob("*.pid"):
            fields = Path(f"/proc/{pid_file.read_text().strip()}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return total

    def client(self, creds):
        import boto3
        from botocore.config import Config
        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id=creds["AWS_ACCESS_KEY_ID"],
                            aws_secret_access_key=creds["AWS_SECRET_ACCESS_KEY"],
                            config=Config(s3={"addressing_style": "path"}))

    def setup(self, bucket):
        self.client(self.keys).create_bucket(Bucket=bucket)
        return self.keys


def make_source(src: Path, images: int) -> None:
    from PIL import Image
    if src.exists() and len(list(src.rglob("*.png"))) == images:
        return
    shutil.rmtree(src, ignore_errors=True)
    photos = [Image.open(p).convert("RGB") for p in sorted((HERE / "sample").iterdir())
              if p.suffix in (".png", ".jpg") and p.stem != "camera"]
    rng = random.Random(18)
    for i in range(images):
        photo = photos[i % len(photos)]
        w, h = rng.randint(160, 320), rng.randint(160, 320)
        w, h = min(w, photo.width), min(h, photo.height)
        x, y = rng.randint(0, photo.width - w), rng.randint(0, photo.height - h)
        out = src / f"c{i % len(photos)}" / f"{i:05d}.png"
        out.parent.mkdir(parents=True, exist_ok=True)
        photo.crop((x, y, x + w, y + h)).save(out, compress_level=1)


def bench_read(l3pack: str, dataset: str, env: dict, args) -> dict:
    cmd = [l3pack, "bench-read", dataset, "--json", "--digest", "--batch", str(args.batch), "--workers",
           str(args.workers), "--crop", "224", "--seed", "1", "--block", str(args.block)]
    t0, cpu0 = time.monotonic(), children_cpu()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    wall, cpu = time.monotonic() - t0, children_cpu() - cpu0
    if r.returncode != 0:
        raise SystemExit(f"bench-read failed: {r.stderr.strip()}")
    lines = r.stdout.splitlines()
    digest = next(l.split()[1] for l in lines if l.startswith("digest: "))
    metrics = json.loads(next(l for l in lines if l.startswith("{")))
    return {"digest": digest, "metrics": metrics, "process_seconds": wall, "cpu_seconds": cpu, "command": " ".join(cmd)}


def children_cpu() -> float:
    """User + system CPU seconds of the finished child processes so far."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, default=3000)
    ap.add_argument("--shard-size", default="16MiB")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--radosgw", action="store_true", help="Ceph radosgw (bench/radosgw_local.sh) instead of moto")
    ap.add_argument("--l3pack", default=str(ROOT / "build" / "converters" / "l3pack"))
    ap.add_argument("--block", default="auto",
                    help="shuffle blocks of this many records (the same for every run); auto: the records of "
                         "about 8 MiB, the fetch block (spec/format.md §8.5.1); 0: shuffle records")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    server_name = "radosgw" if args.radosgw else "moto"
    args.out = args.out or str(HERE / "results" / f"s3-{server_name}-{socket.gethostname()}.md")
    work = HERE / "work" / "s3"
    src, ds, cache = work / "src", work / "ds", work / "cache"
    make_source(src, args.images)
    if not (ds / "manifest.json").exists():
        shutil.rmtree(ds, ignore_errors=True)
        subprocess.run([args.l3pack, "convert", src, ds, "--shard-size", args.shard_size], check=True,
                       capture_output=True)
    manifest = json.loads((ds / "manifest.json").read_text())
    dataset_bytes = sum(s["bytes"] for s in manifest["shards"])
    if args.block == "auto":  # the reader's block shuffle sized to the 8 MiB fetch blocks
        args.block = max(1, round((8 << 20) / (dataset_bytes / manifest["total_records"])))

    # Rounds of (local, cold, warm), interleaved so that load from other processes
    # on the host falls on all three alike; the median round of each is reported.
    runs = {"local": [], "cold": [], "warm": []}
    loads = []  # the host's 1-minute load average after each round
    bench_read(args.l3pack, str(ds), dict(os.environ), args)  # fills the page cache
    with (RadosGW(work / "ceph") if args.radosgw else s3_fixture.MotoServer()) as server:
        creds = server.setup("bench")
        s3_fixture.upload_dir(server.client(creds), "bench", "ds", str(ds))
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(creds, AWS_ENDPOINT_URL=server.endpoint, AWS_REGION="us-east-1", L3_CACHE_DIR=str(cache))
        for _ in range(args.rounds):
            runs["local"].append(bench_read(args.l3pack, str(ds), dict(os.environ), args))
            shutil.rmtree(cache, ignore_errors=True)
            cpu0 = server.cpu_seconds() if args.radosgw else 0.0
            runs["cold"].append(bench_read(args.l3pack, "s3://bench/ds", env, args))
            runs["cold"][-1]["server_cpu"] = server.cpu_seconds() - cpu0 if args.radosgw else None
            runs["warm"].append(bench_read(args.l3pack, "s3://bench/ds", env, args))
            loads.append(os.getloadavg()[0])

    def median_run(rs):
        return sorted(rs, key=lambda r: r["metrics"]["examples"] / r["metrics"]["wall_seconds"])[len(rs) // 2]

    results = {k: median_run(v) for k, v in runs.items()}

    def median(xs):
        return sorted(xs)[len(xs) // 2]

    def cpu(name):
        return median([r["cpu_seconds"] for r in runs[name]])

    def ratios(name):  # per round: this run's reader rate over the same round's local rate
        xs = [ips(a)[0] / ips(b)[0] for a, b in zip(runs[name], runs["local"])]
        return f"median {median(xs):.2f}x (range {min(xs):.2f}-{max(xs):.2f}x: " + ", ".join(f"{x:.2f}" for x in xs) + ")"
    all_digests = {r["digest"] for v in runs.values() for r in v}
    if len(all_digests) != 1:
        raise SystemExit(f"epochs differ: {all_digests}")

    server_desc = ("Ceph radosgw " + subprocess.run(["radosgw", "--version"], capture_output=True, text=True).stdout.split()[2]
                   + " (beast frontend, one memstore OSD, SigV4-signed requests)") if args.radosgw else (
        f"moto {__import__('moto').__version__} (Python) with signature checks")

    def ips(r):  # the reader's clock (first next() to last batch), and the whole process's
        m = r["metrics"]
        return m["examples"] / m["wall_seconds"], m["examples"] / r["process_seconds"]

    lrd, lproc = ips(results["local"])
    lbest = max(ips(x)[0] for x in runs["local"])
    rows = []
    for name in ("local", "cold", "warm"):
        r = results[name]
        rd, proc = ips(r)
        spread = ", ".join(f"{ips(x)[0]:,.0f}" for x in runs[name])
        best = max(ips(x)[0] for x in runs[name])
        st = r["metrics"].get("storage", {})
        req = st.get("requests", 0)
        down = st.get("bytes_downloaded", 0)
        rows.append(f"| {name} | {rd:,.0f} ({spread}) | {rd / lrd:.2f}x | {best / lbest:.2f}x | {proc:,.0f} | {proc / lproc:.2f}x | "
                    f"{req} | {req / r['metrics']['examples']:.4f} | {down:,} | {down / dataset_bytes:.3f}x |")
    report = f"""# Reader from S3 on loopback ({server_name}) vs local disk

Host {socket.gethostname()}, {os.cpu_count()} cores; dataset: {manifest['total_records']} images
(random crops of bench/sample, 160-320 px), {len(manifest['shards'])} shards, {dataset_bytes:,} bytes;
bench-read --batch {args.batch} --workers {args.workers} --crop 224 --block {args.block} (the records of ~8 MiB), one epoch per run; {args.rounds} rounds of
(local, cold, warm) interleaved, the median of each shown (load average {os.getloadavg()[0]:.1f} at the end:
the host is shared); every run gave digest
{all_digests.pop()} (identical epochs). Server: {server_desc}, on 127.0.0.1. Command: `python bench/bench_s3.py {'--radosgw ' if args.radosgw else ''}--images {args.images} --shard-size
{args.shard_size} --workers {args.workers} --rounds {args.rounds} --block auto`; each run: `{results['cold']['command']}`.

| run | images/s (reader: median; all rounds) | vs local | best vs best | images/s (process) | vs local | requests | per image | bytes downloaded | vs dataset |
|---|---|---|---|---|---|---|---|---|---|
""" + "\n".join(rows) + f"""

Per round (the same round's local run as the base; the host's load changes less within a
round than across rounds): cold/local {ratios('cold')}; warm/local {ratios('warm')}; load
average after each round {', '.join(f'{x:.1f}' for x in loads)}.

CPU seconds per run (user + system, whole process; median of the rounds): local {cpu('local'):.2f},
cold {cpu('cold'):.2f}, warm {cpu('warm'):.2f}""" + (f"""; the Ceph daemons during a cold run
{median([r['server_cpu'] for r in runs['cold']]):.2f}. When the decode workers keep the {os.cpu_count()} cores busy (as they
do locally), a cold epoch that shares them with its download and the server can reach at most
local / (cold + Ceph) = {cpu('local') / (cpu('cold') + median([r['server_cpu'] for r in runs['cold']])):.2f}x of the local rate (a bound that holds under load too).""" if args.radosgw else ".") + """

"reader" is the reader's own clock (first next() to last batch: includes waiting for the first
shard); "process" is the whole `l3pack bench-read` run (opening the dataset, the manifest GET).
""" + (f"""The host's cores are shared by the reader's decode workers and the server: the Ceph daemons
used {results['cold']['server_cpu']:.2f} CPU seconds during the median cold epoch
({results['cold']['process_seconds']:.2f} s of wall time on {os.cpu_count()} cores).
""" if args.radosgw else """moto serves the cold run from a single Python process: it, not l3, bounds the cold figure, which
is not representative of S3 or Ceph radosgw.
""")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(report)
    print(report)


if __name__ == "__main__":
    main()
