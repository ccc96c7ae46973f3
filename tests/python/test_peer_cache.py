"""The loader's peer_cache keyword (spec/format.md §8.6) against a memcached
started here on 127.0.0.1 (stopped by its PID): a second "node" reads the
whole epoch from the peer, the same batches, and nothing from storage."""
import os
import shutil
import sys

import numpy as np
import pytest

import l3

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "s3"))
import memcached_fixture  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("memcached") is None,
                                reason="needs Debian's memcached (scripts/install-deps.sh --test)")


@pytest.fixture
def memcached():
    with memcached_fixture.memcached() as (server, _):
        yield server


def epoch(d, **kw):
    with l3.Loader(d, batch_size=8, size=16, workers=2, seed=3, dtype="uint8", **kw) as ld:
        data = [(b.data.copy(), b.records.copy()) for b in ld]
        return data, ld.stats()


def test_second_node_reads_from_the_peer(small_dataset, memcached):
    d, _ = small_dataset
    want, _ = epoch(d)
    first, s1 = epoch(d, peer_cache=[memcached])
    second, s2 = epoch(d, peer_cache=[memcached], peer_timeout_ms=300)
    assert s1["records_read"] == 40 and s1["peer_cache"]["stores"] == 40
    assert s2["records_read"] == 0 and s2["bytes_read"] == 0 and s2["peer_cache"]["hits"] == 40
    for (a, ra), (b, rb), (c, rc) in zip(want, first, second):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
        assert (ra == rb).all() and (ra == rc).all()
    _, s0 = epoch(d)
    assert "peer_cache" not in s0 and s0["records_read"] == 40


def test_peer_cache_arguments(small_dataset):
    d, _ = small_dataset
    with pytest.raises(ValueError):
        l3.Loader(d, peer_cache="127.0.0.1:11211")  # a list, not a string
    with pytest.raises(ValueError):
        l3.Loader(d, peer_cache=["127.0.0.1:"])
