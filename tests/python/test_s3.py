"""l3.Dataset, l3.Loader, l3.torch and l3.convert on s3:// URLs, against moto's
S3 server with signature checks (tests/s3/s3_fixture.py; spec/format.md §8.5)."""
import hashlib
import os
import sys

import numpy as np
import pytest

import l3

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "s3"))
import s3_fixture  # noqa: E402

BUCKET = "l3-py"


@pytest.fixture(scope="module")
def store(small_dataset, tmp_path_factory):
    """moto with the small dataset at s3://l3-py/small; the environment points l3 at it."""
    d, _ = small_dataset
    cache = tmp_path_factory.mktemp("s3cache")
    with s3_fixture.MotoServer() as server:
        creds = server.setup(BUCKET)
        s3_fixture.upload_dir(server.client(creds), BUCKET, "small", str(d))
        saved = dict(os.environ)
        os.environ.update(creds, AWS_ENDPOINT_URL=server.endpoint, AWS_REGION="us-east-1", L3_CACHE_DIR=str(cache))
        try:
            yield server, creds
        finally:
            os.environ.clear()
            os.environ.update(saved)


def test_dataset_from_s3_equals_local(store, small_dataset):
    d, images = small_dataset
    remote = l3.Dataset(f"s3://{BUCKET}/small")
    local = l3.Dataset(d)
    assert len(remote) == len(local) == 40 and remote.classes == local.classes
    for i in range(len(local)):
        img, label = remote[i]
        np.testing.assert_array_equal(img.reshape(images[i].shape), images[i])
        assert label == local.label(i) and remote.key(i) == local.key(i)


def batches_digest(path, **kw):
    h = hashlib.sha256()
    kw.setdefault("seed", 3)
    for b in l3.Loader(path, batch_size=8, size=16, **kw):
        h.update(np.ascontiguousarray(b.data).tobytes())
        h.update(np.asarray(b.labels).tobytes())
    return h.hexdigest()


def test_loader_epoch_from_s3_is_byte_identical(store, small_dataset):
    d, _ = small_dataset
    local = batches_digest(d, block_size=4)
    assert batches_digest(d, block_size=4, seed=4) != local  # the digest sees a change
    assert batches_digest(f"s3://{BUCKET}/small", block_size=4) == local


def test_wrong_secret_raises_naming_the_bucket(store):
    _, creds = store
    os.environ["AWS_SECRET_ACCESS_KEY"] = "not-the-secret-77"
    try:
        with pytest.raises(Exception) as e:
            l3.Dataset(f"s3://{BUCKET}/small")
        assert f"s3://{BUCKET}/small" in str(e.value) and "403" in str(e.value)
        assert "not-the-secret-77" not in str(e.value)
    finally:
        os.environ["AWS_SECRET_ACCESS_KEY"] = creds["AWS_SECRET_ACCESS_KEY"]


def test_torch_dataloader_workers_read_s3(store, small_dataset, tmp_path):
    torch = pytest.importorskip("torch")
    import l3.torch
    from torch.utils.data import DataLoader
    # A fresh cache: the forked workers download (each with its own connections).
    os.environ["L3_CACHE_DIR"] = str(tmp_path / "cache")
    ds = l3.torch.IterableDataset(f"s3://{BUCKET}/small", batch_size=4, size=16, seed=11, drop_padding=True,
                                  return_records=True)
    seen = []
    for images, labels, records in DataLoader(ds, batch_size=None, num_workers=2):
        np.testing.assert_array_equal(labels.numpy(), records.numpy() % 4)
        seen.extend(records.tolist())
    assert sorted(seen) == list(range(40))
    # Blocks of every shard (named <shard xxh3>-<bytes>.<offset>-<length>.l3b), nothing else.
    names = os.listdir(tmp_path / "cache")
    assert all(n.endswith(".l3b") for n in names)
    assert len({n.split("-")[0] for n in names}) == l3.Dataset(small_dataset[0]).shard_count


def test_convert_into_s3(store, tmp_path):
    src = tmp_path / "src"
    rng = np.random.default_rng(2)
    from PIL import Image
    for c in ("x", "y"):
        (src / c).mkdir(parents=True)
        for i in range(5):
            Image.fromarray(rng.integers(0, 256, (20 + i, 30, 3), dtype=np.uint8)).save(src / c / f"{i}.png")
    l3.convert(src, f"s3://{BUCKET}/converted")
    ds = l3.Dataset(f"s3://{BUCKET}/converted")
    assert len(ds) == 10 and ds.classes == ["x", "y"]
    img, label = ds[0]
    assert img.shape[2] == 3


def test_resume_after_the_store_restarts_mid_epoch(store, small_dataset, tmp_path, monkeypatch):
    """The store goes away mid-epoch (spec/format.md §8.5.1): a reader on another
    machine (a fresh cache) fails with one clear error, never wrong data; once the
    store is back, a loader restored from the saved state finishes the epoch. The
    batches before and after are the local epoch: nothing lost, nothing repeated."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "s3"))
    from fault_proxy import FaultProxy
    server, _ = store
    d, _ = small_dataset
    kw = dict(batch_size=8, size=16, block_size=4, seed=3)
    expected = [(np.array(b.data).copy(), np.array(b.labels).copy()) for b in l3.Loader(d, **kw)]
    proxy = FaultProxy(server.port).start()
    port = proxy.port
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        monkeypatch.setenv("L3_S3_BLOCK_SIZE", "4096")  # several blocks per shard
        monkeypatch.setenv("L3_S3_MAX_ATTEMPTS", "2")
        monkeypatch.setenv("L3_CACHE_DIR", str(tmp_path / "a"))
        url = f"s3://{BUCKET}/small"
        loader = l3.Loader(url, **kw)
        got = []
        for _ in range(2):
            b = loader.next()
            got.append((np.array(b.data).copy(), np.array(b.labels).copy()))
        state = loader.state()
        del loader
        proxy.stop()  # the store goes away
        monkeypatch.setenv("L3_CACHE_DIR", str(tmp_path / "b"))
        with pytest.raises(Exception) as e:
            down = l3.Loader(url, **kw)
            down.restore(state)
            down.next()
        assert url in str(e.value)
        proxy.start(port)  # back, on the same port
        resumed = l3.Loader(url, **kw)
        resumed.restore(state)
        while (b := resumed.next()) is not None:
            got.append((np.array(b.data).copy(), np.array(b.labels).copy()))
        assert len(got) == len(expected)
        for (data, labels), (want, want_labels) in zip(got, expected):
            np.testing.assert_array_equal(data, want)
            np.testing.assert_array_equal(labels, want_labels)
    finally:
        proxy.stop()
