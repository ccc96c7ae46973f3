"""device="cuda": the Loader decodes and transforms on the GPU (the CUDA batch
backend); batches stay in device memory and reach torch by DLPack.

Without CUDA (a build without nvcc, or no device) the error names why. The
GPU tests (marked gpu) need a CUDA device; scripts/test_python.sh deselects
them on machines without one (reported as deselected, never passed). The same
Python path runs without a GPU in test_batch_mode.py (emulated backend).
"""
import numpy as np
import pytest
import torch
from torch import nn

import l3
import l3.torch
from l3 import _l3

HAVE_GPU = bool(l3.built_with_cuda) and int(_l3.cuda_device_count()) > 0 and torch.cuda.is_available()


def gpu(f):
    """A GPU test: marked gpu (deselected by scripts/test_python.sh without a device)."""
    f = pytest.mark.skipif(not HAVE_GPU, reason="needs a CUDA device (l3 built with CUDA, a GPU, CUDA torch)")(f)
    return pytest.mark.gpu(f)


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


def host(batch):
    """A device batch's bytes, copied to the host through torch."""
    return torch.from_dlpack(batch).cpu().numpy()


@gpu
@pytest.mark.parametrize("kw", [
    dict(),
    dict(layout="hwc", dtype="uint8", flip=0.5),
    dict(crop="center", dtype="float16", echo=2),
    dict(scale=(0.2, 1.0), normalize=False, echo=2, echo_window=4),
])
def test_cuda_batches_equal_cpu_batches(small_dataset, kw):
    d, _ = small_dataset
    for epoch in (0, 1):
        with loader(d, device="cpu", epoch=epoch, **kw) as a, loader(d, device="cuda", epoch=epoch, **kw) as b:
            n = 0
            for x, y in zip(a, b):
                assert y.device == 0 and isinstance(y.data, l3.DeviceArray)
                assert np.array_equal(np.asarray(x.labels), np.asarray(y.labels))
                assert np.array_equal(x.records, y.records) and (x.epoch, x.index) == (y.epoch, y.index)
                ya = host(y)
                assert x.data.dtype == ya.dtype and x.data.shape == ya.shape == y.data.shape
                assert x.data.tobytes() == ya.tobytes()
                n += 1
            assert n == len(a) == len(b) > 0


@gpu
def test_cuda_tensor_is_the_batch_memory(small_dataset):
    d, _ = small_dataset
    with loader(d, device="cuda", dtype="uint8", layout="hwc") as ld:
        b = ld.next()
        t = torch.from_dlpack(b)
        assert t.is_cuda and t.device == torch.device("cuda:0")
        assert t.dtype == torch.uint8 and t.shape == (8, 16, 16, 3)
        assert t.data_ptr() == b.data.data_ptr()  # zero copy
        assert torch.from_dlpack(b.data).data_ptr() == b.data.data_ptr()
        assert b.__dlpack_device__() == (2, 0)
        images, labels = l3.torch.to_tensors(b)
        assert images.data_ptr() == b.data.data_ptr() and labels.is_cuda
        assert torch.equal(labels.cpu(), torch.from_numpy(b.labels))
        with pytest.raises(TypeError, match="device memory"):
            np.asarray(b.data)
        # the tensor keeps the loader's buffers allocated after close()
        expect = t.cpu()
        ld.close()
        torch.cuda.synchronize()
        assert torch.equal(t.cpu(), expect)


@gpu
def test_cuda_batch_is_invalidated_by_next(small_dataset):
    d, _ = small_dataset
    with loader(d, device="cuda") as ld:
        b = ld.next()
        torch.from_dlpack(b)
        ld.next()
        assert not b.data.valid
        with pytest.raises(BufferError, match="handed back"):
            torch.from_dlpack(b)


@gpu
def test_cuda_refused_options(small_dataset):
    d, _ = small_dataset
    with pytest.raises(ValueError, match="never copied"):
        loader(d, device="cuda", copy=True)
    with pytest.raises(ValueError, match="device='cpu'"):
        loader(d, device="cuda", _emulated_gpu=True)


@gpu
@pytest.mark.parametrize("prefetch", [1, 2])
def test_cuda_refill_waits_for_the_consumer_stream(small_dataset, prefetch):
    # The consumer reads each batch on a non-default stream behind a long kernel; next()
    # is called at once. The loader must not refill the buffer before that read ran.
    d, _ = small_dataset
    kw = dict(dtype="uint8", layout="hwc", echo=2, echo_window=1)
    with loader(d, **kw) as a:
        expect = [x.data.copy() for x in a]
    side = torch.cuda.Stream()
    copies = []
    with loader(d, device="cuda", prefetch=prefetch, **kw) as ld, torch.cuda.stream(side):
        for b in ld:
            t = torch.from_dlpack(b)  # records `side` (torch's current stream)
            assert ld._handoff.streams == [side.cuda_stream]
            torch.cuda._sleep(50_000_000)  # ~tens of ms of GPU time before the read
            copies.append(t.clone())
    side.synchronize()
    assert len(copies) == len(expect)
    for c, e in zip(copies, expect):
        assert np.array_equal(c.cpu().numpy(), e)


@gpu
def test_cuda_state_restore(small_dataset):
    d, _ = small_dataset
    kw = dict(echo=2, echo_window=2)
    with loader(d, **kw) as a:
        everything = [x.data.copy() for x in a]
    with loader(d, device="cuda", **kw) as ld:
        for _ in range(3):
            torch.from_dlpack(ld.next())
        st = ld.state()
        rest = [host(b) for b in ld]
        ld.restore(st)
        again = [host(b) for b in ld]
    assert len(rest) == len(everything) - 3
    for x, y, z in zip(everything[3:], rest, again):
        assert np.array_equal(x, y) and np.array_equal(x, z)


def small_cnn(classes):  # as in test_train.py
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, classes))


@gpu
def test_cuda_training_steps(sample_dataset):
    d, files = sample_dataset
    torch.manual_seed(0)
    classes = len(files)
    ds = l3.torch.IterableDataset(d, batch_size=4 * classes, size=64, scale=(0.2, 1.0), echo=4, echo_window=1,
                                  seed=0, device="cuda")
    model = small_cnn(classes).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    losses = []
    with torch.cuda.stream(side):  # training on a non-default stream
        for epoch in range(30):
            ds.set_epoch(epoch)
            for images, labels in torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0):
                assert images.is_cuda and labels.is_cuda and images.shape == (4 * classes, 3, 64, 64)
                loss = nn.functional.cross_entropy(model(images), labels)
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
    assert len(losses) == 30 and all(np.isfinite(losses))
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    assert last < 0.7 * first, losses
