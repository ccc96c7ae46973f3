#!/usr/bin/env python3
"""Issue 17's Ray bar on a corpus: converts SRC on one machine (`l3pack convert`) and with
Ray in N parts (`l3pack convert --engine ray --parts N`, a loopback Ray instance), runs
`l3pack verify --source` on the Ray dataset, and compares the two datasets record for
record (key, label, encoded bytes, decoded pixels), their classes, image statistics and
skip lists. Prints the times and one line per check; exits 1 if any differs.

    python bench/ray_convert.py build/converters/l3pack bench/corpus --parts 4 --work /tmp/ray-bar
(needs the l3 package and ray in this Python; l3pack runs it as $L3_PYTHON)
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

import l3


def timed(cmd, env=None) -> float:
    start = time.monotonic()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()[-2000:]}")
    return time.monotonic() - start


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("l3pack")
    p.add_argument("src")
    p.add_argument("--parts", type=int, default=4)
    p.add_argument("--work", default="/tmp/l3-ray-bar")
    p.add_argument("--shard-size", default="16MiB")
    a = p.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    single, ray_out = os.path.join(a.work, "single"), os.path.join(a.work, "ray")
    env = dict(os.environ, L3_PYTHON=sys.executable, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    t1 = timed([a.l3pack, "convert", a.src, single, "--shard-size", a.shard_size])
    tr = timed([a.l3pack, "convert", a.src, ray_out, "--engine", "ray", "--parts", str(a.parts),
                "--shard-size", a.shard_size], env=env)
    verify = subprocess.run([a.l3pack, "verify", ray_out, "--source", a.src], capture_output=True, text=True)
    print(f"load average {os.getloadavg()[0]:.1f}; one machine {t1:.1f} s, Ray {a.parts} parts {tr:.1f} s "
          f"(startup included)")
    print("verify --source:", verify.stdout.strip().replace("\n", " | "), f"(exit {verify.returncode})")
    x, y = l3.Dataset(single), l3.Dataset(ray_out)
    checks = {"records": len(x) == len(y)}
    checks["keys"] = x.keys == y.keys
    checks["labels"] = np.array_equal(x.labels, y.labels)
    checks["encoded bytes"] = all(x.payload(i) == y.payload(i) for i in range(len(x)))
    checks["pixels"] = all(np.array_equal(x[i][0], y[i][0]) for i in range(len(x)))
    mx = json.load(open(os.path.join(single, "manifest.json")))
    my = json.load(open(os.path.join(ray_out, "manifest.json")))
    checks["classes"] = mx["classes"] == my["classes"]
    checks["image_stats"] = mx["image_stats"] == my["image_stats"]
    checks["skipped.jsonl"] = open(os.path.join(single, "skipped.jsonl")).read() == \
        open(os.path.join(ray_out, "skipped.jsonl")).read()
    checks["verify --source exit 0"] = verify.returncode == 0
    print(f"{len(x)} records, {len(mx['shards'])} vs {len(my['shards'])} shards")
    for name, ok in checks.items():
        print(f"  {name}: {'equal' if ok else 'DIFFERENT'}" if name != "verify --source exit 0"
              else f"  {name}: {ok}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
