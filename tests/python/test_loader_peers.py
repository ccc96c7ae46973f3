"""bench/loader_peers.py on a tiny dataset: the deterministic image plan, packing for l3,
the identical-records check (and that it fails when a record differs), and one timed
l3.Loader trial. The peers themselves (FFCV, MDS, ...) are not installed for CI; the
benchmark reports those it cannot import."""
import importlib.util
import json
import sys

import numpy as np
import pytest
from PIL import Image

from conftest import REPO, random_image

spec = importlib.util.spec_from_file_location("loader_peers", REPO / "bench" / "loader_peers.py")
lp = importlib.util.module_from_spec(spec)
sys.modules["loader_peers"] = lp  # its pool workers' function is pickled by module name
spec.loader.exec_module(lp)


class Args:
    def __init__(self, work, **kw):
        self.work = str(work)
        self.count = 24
        self.packs = "l3"
        self.__dict__.update(kw)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    root = tmp_path_factory.mktemp("loaders")
    rng = np.random.default_rng(3)
    photos = []
    for i in range(13):  # stand-ins for the 13 corpus photos (image i uses photo i % 13)
        p = root / f"photo{i}.png"
        Image.fromarray(random_image(rng, 620 + i, 700 + 3 * i, 3)).save(p)
        photos.append(str(p))
    mp = pytest.MonkeyPatch()
    mp.setattr(lp, "jpeg_photo_files", lambda: photos)
    w = root / "work"
    lp.make(Args(w))
    mp.undo()
    return w


def test_image_plan_is_deterministic_and_imagenet_sized():
    a, b = lp.image_plan(50), lp.image_plan(50)
    assert a == b
    for photo, w, h, s, fx, fy in a:
        assert 400 <= w <= 600 and 300 <= h <= 500 and 1.0 <= s <= 2.5 and 0 <= photo < 13


def test_make_verify_and_one_trial(work):
    recs = lp.records(str(work))
    assert len(recs) == 24 and {r[2] for r in recs} == set(range(lp.CLASSES))
    assert lp.verify(Args(work)) == 0
    assert json.load(open(work / "verified.json")) == {"ok": True, "records": 24}
    images, secs, cpu = lp.run_l3_loader(str(work), 1)
    assert images == 24 and secs > 0 and cpu > 0  # the padded batch counts the 24 records once


def test_verify_fails_when_a_record_differs(work, tmp_path):
    # Replace one ImageFolder image after packing: the l3 copy no longer matches.
    path = lp.records(str(work))[5][1]
    original = open(path, "rb").read()
    try:
        with Image.open(path) as im:
            a = np.asarray(im).copy()
        a[0, 0, 0] ^= 1
        Image.fromarray(a).save(path)
        assert lp.verify(Args(work)) == 1
        assert json.load(open(work / "verified.json"))["ok"] is False
    finally:
        open(path, "wb").write(original)
    assert lp.verify(Args(work)) == 0
