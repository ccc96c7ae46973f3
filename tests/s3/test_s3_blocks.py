"""Remote shards read by blocks (spec/format.md §8.5.1): one suffix-range GET per
shard for trailer and index, records fetched as ranged GETs of blocks of whole
records, cached block by block (§8.5.3). Checked through a recording proxy."""
from __future__ import annotations

import json
import os
import re

from conftest import BUCKET, digest, run, s3_env
from fault_proxy import FaultProxy


def manifest_of(local_ds) -> dict:
    return json.loads((local_ds / "manifest.json").read_text())


def ranges_by_object(proxy) -> dict:
    """{object file name: [(first, last) byte of each ranged GET]}."""
    out: dict = {}
    for path, rng in proxy.gets:
        if rng is None:
            continue
        m = re.fullmatch(r"bytes=(\d+)-(\d+)", rng)
        assert m, rng
        out.setdefault(path.rsplit("/", 1)[-1], []).append((int(m[1]), int(m[2])))
    return out


def test_info_reads_one_suffix_per_shard(moto, remote_ds, local_ds, tmp_path):
    """info (class counts from the index) and opening shards need trailer and index only."""
    proxy = FaultProxy(moto.port).start()
    try:
        env = s3_env(proxy.endpoint, moto.creds, tmp_path / "cache")
        strip = lambda text: [l for l in text.splitlines() if not l.startswith("dataset:")]
        assert strip(run(["info", remote_ds], env=env).stdout) == strip(run(["info", local_ds]).stdout)
        shards = {s["file"]: s for s in manifest_of(local_ds)["shards"]}
        got = ranges_by_object(proxy)
        assert sorted(got) == sorted(shards)
        for name, rs in got.items():
            assert len(rs) == 1, (name, rs)  # one GET: trailer and index together
            first, last = rs[0]
            size = shards[name]["bytes"]
            assert last == size - 1 and last - first + 1 < size // 2, (name, rs, size)
        # Nothing of any record area was fetched: no block at offset 0 is cached.
        assert not any(".0-" in n for n in os.listdir(tmp_path / "cache"))
        # Warm: info asks the store for the manifest only.
        before = len(proxy.gets)
        run(["info", remote_ds], env=env)
        assert [p for p, _ in proxy.gets[before:]] == [p for p, _ in proxy.gets[:1]]
    finally:
        proxy.stop()


def test_cold_epoch_fetches_each_block_once(moto, remote_ds, local_ds, tmp_path):
    """Blocks of 8 KiB (L3_S3_BLOCK_SIZE) so that each test shard has several."""
    proxy = FaultProxy(moto.port).start()
    try:
        env = s3_env(proxy.endpoint, moto.creds, tmp_path / "cache", L3_S3_BLOCK_SIZE=8192)
        local = digest(local_ds)
        assert digest(remote_ds, env) == local
        shards = {s["file"]: s for s in manifest_of(local_ds)["shards"]}
        got = ranges_by_object(proxy)
        blocks = 0
        for name, rs in got.items():
            size = shards[name]["bytes"]
            data = (local_ds / name).read_bytes()
            index_at = int.from_bytes(data[-64:-56], "little")
            tails = [r for r in rs if r[1] == size - 1]
            body = sorted(r for r in rs if r[1] != size - 1)
            assert len(tails) == 1, (name, rs)
            # The blocks tile the record area exactly once, from byte 0 to the index.
            assert body[0][0] == 0 and body[-1][1] == index_at - 1, (name, body)
            assert all(a[1] + 1 == b[0] for a, b in zip(body, body[1:])), (name, body)
            blocks += len(body)
        assert blocks > len(shards)  # several blocks per shard: the block path is what ran
        # bench-read's counters: manifest + one tail per shard + each block once.
        r = run(["bench-read", remote_ds, "--json", "--crop", "24", "--block", "4"], env=dict(env, L3_CACHE_DIR=str(tmp_path / "c2")))
        st = json.loads(r.stdout.strip().splitlines()[-1])["storage"]
        assert st["requests"] == 1 + len(shards) + blocks
        total = sum(s["bytes"] for s in shards.values())
        assert total <= st["bytes_downloaded"] <= total * 1.25  # tails overlap the last block a little
        warm = run(["bench-read", remote_ds, "--json", "--crop", "24"], env=dict(env, L3_CACHE_DIR=str(tmp_path / "c2")))
        assert json.loads(warm.stdout.strip().splitlines()[-1])["storage"]["requests"] == 1  # the manifest
    finally:
        proxy.stop()


def test_block_size_is_validated(moto, remote_ds, tmp_path):
    env = s3_env(moto.endpoint, moto.creds, tmp_path / "cache", L3_S3_BLOCK_SIZE=100)
    r = run(["ls", remote_ds], env=env, check=False)
    assert r.returncode != 0 and "L3_S3_BLOCK_SIZE" in r.stderr
