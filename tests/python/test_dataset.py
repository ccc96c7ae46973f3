import json
import os

import numpy as np
import pytest

import l3


def test_dataset_access(small_dataset):
    d, images = small_dataset
    ds = l3.Dataset(d)
    assert len(ds) == 40
    assert ds.classes == ["a", "b", "c", "d"]
    assert ds.shard_count >= 2
    assert ds.keys == [f"img{i:03d}" for i in range(40)]
    np.testing.assert_array_equal(ds.labels, np.arange(40) % 4)
    for i in (0, 1, 3, 39, -1):
        img, label = ds[i]
        np.testing.assert_array_equal(img, images[i])
        assert label == (i % 40) % 4
    assert ds.key(5) == "img005" and ds.label(5) == 1
    np.testing.assert_array_equal(l3.decode(ds.payload(7)), images[7])
    ds.verify()
    with pytest.raises(IndexError, match="out of range"):
        ds[40]
    with pytest.raises(IndexError):
        ds[-41]


def test_manifest_written_by_dataset_writer(small_dataset):
    d, _ = small_dataset
    m = json.loads((d / "manifest.json").read_text())
    assert m["classes"] == ["a", "b", "c", "d"]
    assert sum(s["records"] for s in m["shards"]) == 40
    assert m["image_stats"]["images"] == 40


def test_shard_writer_low_level(tmp_path):
    rng = np.random.default_rng(0)
    imgs = [rng.integers(0, 255, (9, 13, 3), dtype=np.uint8) for _ in range(3)]
    with l3.ShardWriter(tmp_path / "s0.l3s") as w:
        for i, im in enumerate(imgs):
            assert w.add(im, label=i, key=f"k{i}", metadata=b"m") == i
    with l3.ShardWriter(tmp_path / "s1.l3s") as w2:
        w2.add_encoded(l3.encode(imgs[0]), label=-1, key="raw")
    assert not os.path.exists(tmp_path / "s0.l3s.tmp")
    l3.write_manifest(tmp_path, [w.summary, w2.summary], classes=["x", "y", "z"])
    ds = l3.Dataset(tmp_path)
    assert len(ds) == 4 and ds.classes == ["x", "y", "z"]
    assert ds.metadata(1) == b"m" and ds.key(3) == "raw" and ds.label(3) == -1
    np.testing.assert_array_equal(ds[2][0], imgs[2])


def test_shard_writer_abort_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError):
        with l3.ShardWriter(tmp_path / "s.l3s") as w:
            w.add(np.zeros((4, 4, 3), np.uint8))
            raise RuntimeError("boom")
    assert os.listdir(tmp_path) == []


def test_writer_from_image_files_matches_load_image(sample_dataset):
    d, files = sample_dataset
    ds = l3.Dataset(d)
    assert len(ds) == len(files)
    assert ds.classes == [p.stem for p in files]
    for i, p in enumerate(files):
        img, label = ds[i]
        np.testing.assert_array_equal(img, l3.load_image(p))
        assert label == i and ds.key(i) == p.name


def test_convert_like_l3pack(tmp_path, sample_dataset):
    _, files = sample_dataset
    src = tmp_path / "src"
    for cls in ("left", "right"):
        (src / cls).mkdir(parents=True)
    for i, p in enumerate(files):
        os.symlink(p, src / ("left" if i % 2 else "right") / p.name)
    report = l3.convert(src, tmp_path / "out", threads=1)
    assert report["images"] == len(files)
    ds = l3.Dataset(tmp_path / "out")
    assert ds.classes == ["left", "right"] and len(ds) == len(files)
