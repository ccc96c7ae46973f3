"""Shared fixtures: small datasets built with l3's own writers."""
import os
import pathlib

import numpy as np
import pytest

import l3

REPO = pathlib.Path(__file__).resolve().parents[2]
SAMPLE = REPO / "bench" / "sample"


def random_image(rng, h, w, c):
    # Smooth gradients plus noise: compressible like a photo, but every pixel matters.
    y, x = np.mgrid[0:h, 0:w]
    base = (x * 3 + y * 5)[:, :, None] + np.arange(c)[None, None, :] * 40
    noise = rng.integers(0, 24, size=(h, w, c))
    return ((base + noise) % 256).astype(np.uint8)


@pytest.fixture(scope="session")
def small_dataset(tmp_path_factory):
    """40 labelled records (4 classes) of odd sizes and 1..4 channels, in 3 shards."""
    d = tmp_path_factory.mktemp("small") / "ds"
    rng = np.random.default_rng(7)
    images = []
    with l3.DatasetWriter(d, classes=["a", "b", "c", "d"], shard_size=20000) as w:
        for i in range(40):
            c = [3, 1, 3, 4, 2][i % 5]
            img = random_image(rng, 37 + (i * 7) % 50, 41 + (i * 11) % 60, c)
            images.append(img)
            w.add(img, label=i % 4, key=f"img{i:03d}")
    return d, images


@pytest.fixture(scope="session")
def sample_dataset(tmp_path_factory):
    """bench/sample photos: one class per file name (6 classes)."""
    files = sorted(p for p in SAMPLE.iterdir() if p.suffix in (".png", ".jpg"))
    assert len(files) >= 5, files
    d = tmp_path_factory.mktemp("sample") / "ds"
    classes = [p.stem for p in files]
    with l3.DatasetWriter(d, classes=classes) as w:
        for label, p in enumerate(files):
            w.add(p, label=label, key=p.name)
    return d, files
