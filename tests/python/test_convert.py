"""l3.convert's options from issue 15: max_pixels, layout, allow_empty, the skip list."""
import json
import os

import numpy as np
import pytest

import l3

from conftest import SAMPLE


def _class_tree(tmp_path):
    files = sorted(p for p in SAMPLE.iterdir() if p.suffix in (".png", ".jpg"))
    src = tmp_path / "src"
    for cls in ("a", "b"):
        (src / cls).mkdir(parents=True)
    for i, p in enumerate(files):
        os.symlink(p, src / ("a" if i % 2 else "b") / p.name)
    (src / "a" / "notes.txt").write_text("not an image")
    return src, files


def test_convert_max_pixels_skips_from_the_header(tmp_path):
    src, files = _class_tree(tmp_path)
    report = l3.convert(src, tmp_path / "all", threads=1)
    assert report["images"] == len(files)
    assert report["skipped_inputs"] == [{"path": "a/notes.txt", "reason": "not an image", "detail": ".txt"}]
    assert l3.MAX_PIXELS == 178956970
    smallest = min(l3.load_image(p).shape[0] * l3.load_image(p).shape[1] for p in files)
    report = l3.convert(src, tmp_path / "small", threads=1, max_pixels=smallest)
    big = [s for s in report["skipped_inputs"] if s["reason"] == "limit exceeded"]
    assert report["images"] >= 1 and len(big) == len(files) - report["images"]
    assert all(f"exceeds the limit of {smallest} pixels" in s["detail"] for s in big)
    listed = [json.loads(line) for line in open(tmp_path / "small" / "skipped.jsonl")]
    assert listed == report["skipped_inputs"]


def test_convert_options_are_checked_and_empty_is_refused(tmp_path):
    src, _ = _class_tree(tmp_path)
    with pytest.raises(ValueError, match="--max-pixels"):
        l3.convert(src, tmp_path / "bad", max_pixels=0)
    assert not (tmp_path / "bad").exists()
    with pytest.raises(ValueError, match="layout"):
        l3.convert(src, tmp_path / "bad", layout="sideways")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "a.txt").write_text("x")
    with pytest.raises(OSError, match="no images to convert"):
        l3.convert(tmp_path / "junk", tmp_path / "none")
    report = l3.convert(tmp_path / "junk", tmp_path / "empty", allow_empty=True)
    assert report["images"] == 0 and len(l3.Dataset(tmp_path / "empty")) == 0


def test_convert_effort_and_entropy(tmp_path):
    """entropy="off" writes Rice-only (format version 2, or 7 with plane contexts, 8 with residual corrections,
    10 with zero-row bitmaps)
    records, the fastest to decode;
    "max" is never larger; the manifest records the codec options; a bad spelling is a
    ValueError naming the choices, before anything is written."""
    src, files = _class_tree(tmp_path)
    sizes = {}
    for entropy in ("off", "auto", "max"):
        out = tmp_path / entropy
        l3.convert(src, out, threads=1, entropy=entropy, effort=2 if entropy == "max" else 1)
        ds = l3.Dataset(out)
        versions = {l3.info(ds.payload(i))["version"] for i in range(len(ds))}
        # off: never v3, v6, v9, v11 or v13 (rANS, pixel copies, compact rANS tables, bilevel planes); v7, v8,
        # v10, v12, v14, v15: plane contexts, corrections, zero-row bitmaps, NW predictors and mirrored tiles,
        # ramps, symbols, in Rice tiles too
        assert versions <= ({2, 4, 5, 7, 8, 10, 12, 14, 15} if entropy == "off" else set(range(2, 16)))
        for i in range(len(ds)):
            np.testing.assert_array_equal(ds[i][0], l3.load_image(SAMPLE / os.path.basename(ds.key(i))))
        options = json.load(open(out / "manifest.json"))["extra"]["l3pack"]["options"]
        assert options["entropy"] == entropy and options["effort"] == (2 if entropy == "max" else 1)
        sizes[entropy] = sum(len(ds.payload(i)) for i in range(len(ds)))
    assert sizes["max"] <= sizes["auto"] < sizes["off"]
    with pytest.raises(ValueError, match="must be auto, off, max or a percentage"):
        l3.convert(src, tmp_path / "bad", entropy="fast")
    assert not (tmp_path / "bad").exists()


def test_convert_tile_size(tmp_path):
    """tile_width/tile_height reach every record (smaller tiles: random crops decode less) and
    the manifest; a tile width that is not a power of two in 16..256 is a ValueError before
    anything is written."""
    src, _ = _class_tree(tmp_path)
    out = tmp_path / "t64"
    l3.convert(src, out, threads=1, tile_width=64, tile_height=16)
    ds = l3.Dataset(out)
    assert len(ds) > 0
    for i in range(len(ds)):
        info = l3.info(ds.payload(i))
        assert (info["tile_width"], info["tile_height"]) == (64, 16)
        np.testing.assert_array_equal(ds[i][0], l3.load_image(SAMPLE / os.path.basename(ds.key(i))))
    options = json.load(open(out / "manifest.json"))["extra"]["l3pack"]["options"]
    assert (options["tile_width"], options["tile_height"]) == (64, 16)
    with pytest.raises(ValueError, match="tile width 17"):
        l3.convert(src, tmp_path / "bad", tile_width=17)
    assert not (tmp_path / "bad").exists()
