"""The peer cache (spec/format.md §8.6) is refused for an s3:// dataset, with one
line saying why, before any shard is downloaded: a node needs a record's index
entry, and remote shards are downloaded whole today (§8.5.1)."""
from __future__ import annotations

import os

from conftest import run, s3_env


def test_peer_cache_refused_for_s3(moto, remote_ds, tmp_path):
    env = s3_env(moto.endpoint, moto.creds, tmp_path / "cache")
    r = run(["bench-read", remote_ds, "--peer-cache", "127.0.0.1:11211"], env=env, check=False)
    assert r.returncode == 1
    assert "peer cache: not with an s3:// dataset" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not os.path.exists(tmp_path / "cache") or not [f for f in os.listdir(tmp_path / "cache")
                                                          if f.endswith(".l3s")]
