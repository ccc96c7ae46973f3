"""Bad paths and corrupt files raise clean Python exceptions (never a crash)."""
import json
import shutil

import numpy as np
import pytest

import l3


def corrupt_copy(src, dst, offset):
    shutil.copytree(src, dst)
    shard = dst / "shard-00000.l3s"
    data = bytearray(shard.read_bytes())
    data[offset] ^= 0xFF
    shard.write_bytes(bytes(data))
    return dst


def test_missing_dataset_is_oserror(tmp_path):
    with pytest.raises(OSError, match="manifest"):
        l3.Dataset(tmp_path / "nope")
    with pytest.raises(OSError):
        l3.Loader(tmp_path / "nope", batch_size=4)


def test_missing_and_garbage_image_files(tmp_path):
    with pytest.raises(OSError):
        l3.load_image(tmp_path / "missing.png")
    (tmp_path / "x.png").write_bytes(b"this is not an image at all")
    with pytest.raises(l3.DataError):
        l3.load_image(tmp_path / "x.png")
    with pytest.raises(OSError):
        with l3.ShardWriter(tmp_path / "s.l3s") as w:
            w.add(tmp_path / "missing.png")


def test_corrupt_manifest_is_data_error(tmp_path, small_dataset):
    d, _ = small_dataset
    dst = tmp_path / "ds"
    shutil.copytree(d, dst)
    (dst / "manifest.json").write_text("{not json")
    with pytest.raises(l3.DataError, match="manifest"):
        l3.Dataset(dst)
    m = json.loads((d / "manifest.json").read_text())
    m["shards"][0]["records"] += 1
    m["total_records"] += 1
    (dst / "manifest.json").write_text(json.dumps(m))
    ds = l3.Dataset(dst)
    with pytest.raises(l3.DataError, match="shard-00000"):
        ds[0]


def test_corrupt_record_in_dataset_names_the_record(tmp_path, small_dataset):
    d, _ = small_dataset
    dst = corrupt_copy(d, tmp_path / "ds", 32 + 100)  # inside record 0's payload
    ds = l3.Dataset(dst)
    with pytest.raises(l3.DataError, match=r"checksum.*|record 0") as e:
        ds[0]
    assert "record 0" in str(e.value) and "shard-00000" in str(e.value) and "key 'img000'" in str(e.value)
    assert isinstance(e.value, ValueError)
    ds[1]  # other records are fine
    with pytest.raises(l3.DataError):
        ds.verify()


def test_truncated_shard(tmp_path, small_dataset):
    d, _ = small_dataset
    dst = tmp_path / "ds"
    shutil.copytree(d, dst)
    shard = dst / "shard-00000.l3s"
    shard.write_bytes(shard.read_bytes()[:-50])
    ds = l3.Dataset(dst)
    with pytest.raises(l3.DataError):
        ds[0]


def test_corrupt_record_in_loader_raise_and_skip(tmp_path, small_dataset):
    d, _ = small_dataset
    dst = corrupt_copy(d, tmp_path / "ds", 32 + 100)
    kw = dict(batch_size=8, size=16, shuffle=False)
    with l3.Loader(dst, **kw) as ld:
        with pytest.raises(l3.DataError, match="checksum") as e:
            ld.next()
        # the message names the record, its shard file and its key
        shard = str(dst / "shard-00000.l3s")
        assert f"record 0 (shard {shard}, index 0, key 'img000')" in str(e.value), str(e.value)
        # the failed batch counts as consumed; the loader goes on
        rest = [b for b in ld]
        assert len(rest) == 4
        assert ld.stats()["errors"]["raised"] == 1
    with l3.Loader(dst, on_error="skip", **kw) as ld:
        batches = [b for b in ld]
        assert len(batches) == 5 and all(len(b) == 8 for b in batches)
        recs = [r for b in batches for r in b.records.tolist()]
        assert 0 not in recs
        s = ld.stats()
        assert s["errors"]["corrupt"] >= 1 and s["errors"]["replaced"] >= 1


def test_bad_restore_state(small_dataset):
    d, _ = small_dataset
    with l3.Loader(d, batch_size=8, size=16) as ld:
        st = ld.state()
        with pytest.raises(ValueError, match="dataset size"):
            ld.restore(dict(st, dataset_size=41))
        with pytest.raises(l3.DataError):
            ld.restore("{garbage")


def test_decode_garbage_never_crashes():
    rng = np.random.default_rng(0)
    good = l3.encode(rng.integers(0, 255, (40, 50, 3), dtype=np.uint8))
    for trial in range(200):
        data = bytearray(good)
        for _ in range(1 + trial % 4):
            data[rng.integers(0, len(data))] = rng.integers(0, 256)
        data = bytes(data[: rng.integers(1, len(data) + 1)]) if trial % 3 == 0 else bytes(data)
        try:
            l3.decode(data)
        except ValueError:
            pass
