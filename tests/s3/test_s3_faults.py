"""Faults between the reader and the store, injected by a proxy (fault_proxy.py):
503 SlowDown, bodies cut short, the endpoint going away mid-epoch and coming
back. Every epoch must still be byte-identical to the local one: nothing lost,
nothing read twice."""
from __future__ import annotations

import json
import time

from conftest import digest, run, s3_env
from fault_proxy import FaultProxy


def shard_count(local_ds) -> int:
    return len(json.loads((local_ds / "manifest.json").read_text())["shards"])


def test_slowdown_and_truncated_bodies_are_retried(moto, remote_ds, local_ds, tmp_path):
    proxy = FaultProxy(moto.port, slowdown_every=3, truncate_every=4).start()
    try:
        env = s3_env(proxy.endpoint, moto.creds, tmp_path / "cache")
        assert digest(remote_ds, env) == digest(local_ds)
        assert proxy.slowdowns >= 2 and proxy.truncations >= 1
        assert proxy.ranged_gets >= shard_count(local_ds) + proxy.slowdowns + proxy.truncations
    finally:
        proxy.stop()


def test_endpoint_down_mid_epoch_and_back(moto, remote_ds, local_ds, tmp_path):
    proxy = FaultProxy(moto.port, outage_at=max(2, shard_count(local_ds) // 2), outage_seconds=2.0).start()
    try:
        env = s3_env(proxy.endpoint, moto.creds, tmp_path / "cache")
        t0 = time.monotonic()
        assert digest(remote_ds, env) == digest(local_ds)
        assert proxy.outages == 1
        assert time.monotonic() - t0 >= 2.0  # it did wait for the endpoint to come back
    finally:
        proxy.stop()


def test_endpoint_down_for_good_fails_with_one_line(moto, remote_ds, local_ds, tmp_path):
    proxy = FaultProxy(moto.port, outage_at=1, outage_seconds=30.0).start()
    try:
        env = s3_env(proxy.endpoint, moto.creds, tmp_path / "cache", L3_S3_MAX_ATTEMPTS=2)
        r = run(["bench-read", remote_ds, "--crop", "24"], env=env, check=False, timeout=60)
        assert r.returncode == 1
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "s3://l3-test/datasets/ds/shard-" in lines[0] and "after 2 attempts" in lines[0]
    finally:
        proxy.stop()
