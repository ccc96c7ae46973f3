"""device="cuda": the Loader decodes through the CUDA batch decoder.

Without CUDA (a build without nvcc, or no device) the error names why; the
equality test with the CPU loader needs a GPU and is skipped (reported as
skipped, never passed) without one.
"""
import numpy as np
import pytest

import l3
from l3 import _l3

HAVE_GPU = bool(l3.built_with_cuda) and int(_l3.cuda_device_count()) > 0


def loader(d, **kw):
    args = dict(batch_size=8, size=16, workers=2, seed=3)
    args.update(kw)
    return l3.Loader(d, **args)


def test_cuda_device_count_is_consistent_with_the_build():
    n = int(_l3.cuda_device_count())
    assert n >= 0
    if not l3.built_with_cuda:
        assert n == 0


@pytest.mark.no_gpu
@pytest.mark.skipif(HAVE_GPU, reason="a CUDA device is present: the error path does not apply")
def test_cuda_without_a_usable_device_names_why(small_dataset):
    d, _ = small_dataset
    why = "no CUDA device" if l3.built_with_cuda else "built without CUDA"
    for device in ("cuda", "cuda:0"):
        with pytest.raises(ValueError, match=why):
            loader(d, device=device)
    with pytest.raises(ValueError, match="device"):
        loader(d, device="cuda:x")


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_GPU, reason="needs a CUDA device (l3 built with CUDA and a GPU present)")
@pytest.mark.parametrize("kw", [
    dict(),
    dict(layout="hwc", dtype="uint8", flip=0.5),
    dict(crop="center", dtype="float16", echo=2),
])
def test_cuda_batches_equal_cpu_batches(small_dataset, kw):
    d, _ = small_dataset
    for epoch in (0, 1):
        with loader(d, device="cpu", epoch=epoch, **kw) as a, loader(d, device="cuda", epoch=epoch, **kw) as b:
            n = 0
            for x, y in zip(a, b):
                assert np.array_equal(np.asarray(x.labels), np.asarray(y.labels))
                xa, ya = np.asarray(x.data), np.asarray(y.data)
                assert xa.dtype == ya.dtype and xa.shape == ya.shape
                assert xa.tobytes() == ya.tobytes()
                n += 1
            assert n == len(a) > 0
