"""The reader's options bound from C++ (l3.ReaderOptions and its enums) and l3.Batch."""
import inspect

import numpy as np
import pytest

import l3


def loader(d, **kw):
    args = dict(batch_size=8, size=16, workers=2, seed=3, shuffle=False)
    args.update(kw)
    return l3.Loader(d, **args)


def test_loader_signature_shows_the_cpp_defaults():
    o = l3.ReaderOptions()
    t = o.transform
    p = inspect.signature(l3.Loader).parameters
    d = {k: v.default for k, v in p.items()}
    assert d["batch_size"] == o.batch_size == 64 and d["workers"] == o.workers and d["prefetch"] == o.prefetch
    assert d["shuffle"] is o.shuffle and d["seed"] == o.seed and d["echo"] == o.echo
    assert d["drop_last"] is (o.remainder == l3.Remainder.drop) and o.remainder == l3.Remainder.pad
    assert d["crop"] == t.crop.name == "random_resized" and t.crop == l3.CropMode.random_resized
    assert d["layout"] == t.layout.name == "chw" and d["dtype"] == t.dtype.name == "float32"
    assert d["on_error"] == o.on_error.name == "raise" and d["verify"] is (o.verify == l3.Verify.yes)
    assert d["size"] == t.width == t.height == 224 and d["channels"] == t.channels
    assert d["scale"] == (t.scale_min, t.scale_max) and d["ratio"] == (t.ratio_min, t.ratio_max)
    assert d["flip"] == t.flip_probability and d["center_fraction"] == t.center_fraction
    assert d["mean"] == (0.485, 0.456, 0.406) and d["std"] == (0.229, 0.224, 0.225)
    assert np.array_equal(np.float32(d["mean"]), np.float32(t.mean))
    assert d["peer_timeout_ms"] == o.peer_cache.timeout_ms and d["max_replacements"] == o.max_replacements
    assert "crop: 'Union[str, CropMode]' = 'random_resized'" in str(inspect.signature(l3.Loader))


def test_enum_spellings_are_the_members_names():
    assert list(l3.CropMode.__members__) == ["random_resized", "center", "full"]
    assert set(l3.Layout.__members__) == {"chw", "hwc"}
    assert set(l3.DType.__members__) == {"float32", "float16", "uint8"}
    assert list(l3.ErrorPolicy.__members__) == ["raise", "skip"]


def test_enum_or_its_name_give_the_same_batches(small_dataset):
    d, _ = small_dataset
    kw = dict(flip=0.0, dtype="uint8", layout="hwc")
    with loader(d, crop="center", **kw) as a, \
            loader(d, crop=l3.CropMode.center, **dict(kw, dtype=l3.DType.uint8, layout=l3.Layout.hwc)) as b:
        for x, y in zip(a, b):
            assert x.data.shape == (8, 16, 16, 3) and np.array_equal(x.data, y.data)
    with loader(d, on_error=l3.ErrorPolicy.skip) as ld:
        assert ld.next() is not None


@pytest.mark.parametrize("kw,match", [(dict(crop="random"), "crop must be 'random_resized' | 'center' | 'full'"),
                                      (dict(layout="nchw"), "layout must be"),
                                      (dict(dtype="float64"), "dtype must be"),
                                      (dict(on_error="ignore"), "on_error must be 'raise' | 'skip'"),
                                      (dict(mean=(0.5, 0.5)), "mean must have 3 values"),
                                      (dict(workers=-1), "workers must be >= 0")])
def test_bad_options_name_the_choices(small_dataset, kw, match):
    d, _ = small_dataset
    with pytest.raises(ValueError, match=match.replace("|", r"\|")):
        loader(d, **kw)


def test_reader_options_fields_round_trip():
    o = l3.ReaderOptions()
    o.transform.crop = l3.CropMode.full
    o.transform.mean = [0.5, 0.25, 0.125]
    o.peer_cache.servers = ["127.0.0.1:1"]
    o.on_error = l3.ErrorPolicy["skip"]
    assert o.transform.crop == l3.CropMode.full and o.transform.mean == [0.5, 0.25, 0.125]
    assert o.peer_cache.servers == ["127.0.0.1:1"] and o.on_error == l3.ErrorPolicy.skip
    with pytest.raises(ValueError, match="3 values"):
        o.transform.std = [1.0]


def test_batch_is_the_bound_type_with_named_fields(small_dataset):
    d, _ = small_dataset
    with loader(d) as ld:
        b = ld.next()
    assert type(b) is l3.Batch and l3.Batch.__module__.startswith("l3")
    assert b.data.shape == (8, 3, 16, 16) and b.labels.dtype == np.int64 and b.records.dtype == np.uint64
    assert (b.epoch, b.index, b.device) == (0, 0, -1) and b.wait_seconds >= 0 and len(b) == 8
    images, labels = b
    assert images is b.data and labels is b.labels
    assert repr(b) == "l3.Batch(shape=(8, 3, 16, 16), dtype=float32, epoch=0, index=0)"
    assert np.from_dlpack(b).__array_interface__["data"][0] == b.data.__array_interface__["data"][0]
    made = l3.Batch(b.data, b.labels, b.records, 3, 4, 0.5)
    assert made.device == -1 and made.epoch == 3 and made.index == 4 and l3.Batch.__doc__.startswith("One batch")
