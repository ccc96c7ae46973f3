"""The peer cache (spec/format.md §8.6) on an s3:// dataset, against moto and two
memcached servers started here on 127.0.0.1 (stopped by their PIDs). Node 1 reads
each record from S3 by one ranged GET and stores it into its owner; node 2, with
a shard cache of its own, reads the epoch from the peers and downloads only the
shards' tails; both give what a reader without peers gives. A dead peer turns
into storage reads, never into a wrong record."""
from __future__ import annotations

import json
import shutil

import pytest

from conftest import digest, run, s3_env
from memcached_fixture import memcached

pytestmark = pytest.mark.skipif(shutil.which("memcached") is None,
                                reason="needs Debian's memcached (scripts/install-deps.sh --test)")


def epoch(dataset, env, *extra) -> dict:
    """One epoch of bench-read (block shuffle) with --json: the reader's metrics and the storage counters."""
    r = run(["bench-read", dataset, "--json", "--epochs", "1", "--batch", "8", "--crop", "24", "--block", "4",
             "--seed", "7", "--workers", "2", *extra], env=env)
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_second_node_reads_the_epoch_from_the_peers(moto, remote_ds, local_ds, tmp_path):
    shards = json.loads((local_ds / "manifest.json").read_text())["shards"]
    dataset_bytes = sum(s["bytes"] for s in shards)
    records = sum(s["records"] for s in shards)
    want = digest(local_ds)
    with memcached() as (a, _), memcached() as (b, _):
        peers = ["--peer-cache", f"{a},{b}"]
        # Node 1: every record from S3 (one ranged GET each, no block prefetch),
        # stored into its owner; the batches are those of a reader without peers.
        assert digest(remote_ds, s3_env(moto.endpoint, moto.creds, tmp_path / "node1"), *peers) == want
        # Node 2, its own (empty) shard cache: the records come from the peers.
        node2 = epoch(remote_ds, s3_env(moto.endpoint, moto.creds, tmp_path / "node2"), *peers)
        assert node2["records_read"] == 0 and node2["bytes_read"] == 0
        # Every record read came from its owner (a short last batch repeats some).
        assert node2["peer_cache"]["hits"] >= records and node2["peer_cache"]["misses"] == 0
        assert node2["peer_cache"]["corrupt"] == 0
        # Node 3 alone (no peers, empty cache) downloads every block.
        alone = epoch(remote_ds, s3_env(moto.endpoint, moto.creds, tmp_path / "node3"))
        assert "peer_cache" not in alone and alone["storage"]["bytes_downloaded"] >= 0.9 * dataset_bytes
        # Node 2 downloaded the tails (indexes) alone: a small part of that.
        assert node2["storage"]["bytes_downloaded"] <= 0.55 * alone["storage"]["bytes_downloaded"]
        assert node2["storage"]["requests"] == len(shards) + 1  # a tail per shard, and the manifest


def test_a_dead_peer_gives_storage_reads_not_wrong_records(moto, remote_ds, local_ds, tmp_path):
    want = digest(local_ds)
    with memcached() as (a, _), memcached() as (b, proc_b):
        peers = ["--peer-cache", f"{a},{b}", "--peer-timeout-ms", "300"]
        assert digest(remote_ds, s3_env(moto.endpoint, moto.creds, tmp_path / "node1"), *peers) == want
        proc_b.kill()
        proc_b.wait(timeout=10)
        env = s3_env(moto.endpoint, moto.creds, tmp_path / "node2")
        assert digest(remote_ds, env, *peers) == want
        m = epoch(remote_ds, s3_env(moto.endpoint, moto.creds, tmp_path / "node3"), *peers)
        # b's records are storage reads now; a's still come from a.
        assert m["records_read"] > 0 and m["peer_cache"]["hits"] > 0
        assert m["peer_cache"]["failures"] + m["peer_cache"]["skipped"] > 0
