"""The reader's batch mode from Python, without a GPU.

Loader(_emulated_gpu=True) drives the batch backend that device="cuda" uses
(decode and transforms of whole windows), with the CUDA kernels' decomposition
run on the CPU (host memory, numpy arrays): its batches must equal the CPU
loader's byte for byte. The device hand-off (l3.DeviceArray: DLPack stream
protocol, refill ordering, invalidation) is checked with a stand-in for the
extension's device batches; tests/python/test_gpu_loader.py runs it on a GPU.
"""
import shutil

import numpy as np
import pytest
import torch

import l3
import l3.torch

CONFIGS = [
    dict(layout="hwc", dtype="uint8"),                             # uint8 HWC
    dict(layout="chw", dtype="float32", normalize=True, flip=0.0,  # float32 CHW, normalised
         crop="center"),
    dict(crop="random_resized", scale=(0.2, 1.0), flip=0.5),       # random resized crop + flip
    dict(echo=2),                                                  # data echoing
    dict(dtype="float16", size=(12, 20), echo=2, echo_window=4),
]


def loader(d, **kw):
    args = dict(batch_size=8, size=16, workers=2, seed=3)
    args.update(kw)
    return l3.Loader(d, **args)


def batches(ld):
    return [(b.data.copy(), b.labels.copy(), b.records.copy(), b.epoch, b.index) for b in ld]


def assert_same(xs, ys, index=True):
    # index: the batch number counts from where the loader started (restore() restarts it)
    assert len(xs) == len(ys) > 0
    for x, y in zip(xs, ys):
        assert x[0].dtype == y[0].dtype and x[0].shape == y[0].shape
        assert np.array_equal(x[0], y[0]), f"batch {x[4]}: pixels differ"
        for k in range(1, 5 if index else 4):
            assert np.array_equal(x[k], y[k])


@pytest.mark.parametrize("kw", CONFIGS, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()))
def test_emulated_batches_equal_cpu_batches(small_dataset, kw):
    d, _ = small_dataset
    for epoch in (0, 1):
        with loader(d, epoch=epoch, **kw) as a, loader(d, epoch=epoch, _emulated_gpu=True, **kw) as b:
            xs, ys = batches(a), batches(b)
            assert len(ys) == len(b)
            assert all(y[0].shape[0] == 8 for y in ys)
            assert_same(xs, ys)


def test_emulated_batches_on_sample_photos(sample_dataset):
    # Real photos (larger than the crops: the resize filters run with antialiasing).
    d, _ = sample_dataset
    kw = dict(batch_size=3, size=48, seed=5, scale=(0.1, 0.6), drop_last=True)
    with l3.Loader(d, **kw) as a, l3.Loader(d, _emulated_gpu=True, **kw) as b:
        assert_same(batches(a), batches(b))


def test_emulated_copy_false_is_the_ring_buffer(small_dataset):
    d, _ = small_dataset
    with loader(d, _emulated_gpu=True, copy=False, prefetch=1) as b, loader(d, copy=True) as a:
        ptrs = set()
        for x, y in zip(a, b):
            assert b is not None and y.device == -1
            ptrs.add(y.data.__array_interface__["data"][0])
            assert np.array_equal(x.data, y.data)  # read before the next batch
        assert len(ptrs) <= 3  # a ring of prefetch + echo_window buffers: nothing allocated per batch


def test_emulated_state_restore(small_dataset):
    d, _ = small_dataset
    for kw in (dict(), dict(echo=2, echo_window=2)):
        with loader(d, _emulated_gpu=True, **kw) as full:
            everything = batches(full)
        with loader(d, _emulated_gpu=True, **kw) as ld:
            head = [ld.next() for _ in range(3)]
            assert all(h is not None for h in head)
            st = ld.state()
        # the rest, from a fresh emulated loader and from a CPU loader
        with loader(d, _emulated_gpu=True, **kw) as ld:
            ld.restore(st)
            rest = batches(ld)
        with loader(d, **kw) as cpu:
            cpu.restore(st)
            rest_cpu = batches(cpu)
        assert_same(rest, everything[3:], index=False)
        assert_same(rest_cpu, rest)
        # restore in the middle of iterating, then set_epoch
        with loader(d, _emulated_gpu=True, **kw) as ld:
            ld.next()
            ld.restore(st)
            assert_same(batches(ld), everything[3:], index=False)
            ld.set_epoch(0)
            assert_same(batches(ld), everything)


def test_emulated_dlpack_zero_copy(small_dataset):
    d, _ = small_dataset
    for copy in (True, False):
        with loader(d, _emulated_gpu=True, copy=copy, dtype="uint8", layout="hwc") as ld:
            b = ld.next()
            assert b.device == -1 and isinstance(b.data, np.ndarray)
            ptr = b.data.__array_interface__["data"][0]
            assert np.from_dlpack(b).__array_interface__["data"][0] == ptr
            t = torch.from_dlpack(b)
            assert t.data_ptr() == ptr and t.device.type == "cpu" and t.dtype == torch.uint8
            assert t.shape == (8, 16, 16, 3)
            images, labels = l3.torch.to_tensors(b)
            assert images.data_ptr() == ptr and labels.device.type == "cpu"
            assert labels.data_ptr() == b.labels.__array_interface__["data"][0]
            # the reader ignores consumer streams for host batches
            assert ld._r.next([12345, 2]) is not None


def test_emulated_corrupt_record_both_policies(tmp_path, small_dataset):
    d, _ = small_dataset
    dst = tmp_path / "ds"
    shutil.copytree(d, dst)
    shard = dst / "shard-00000.l3s"
    data = bytearray(shard.read_bytes())
    data[32 + 100] ^= 0xFF  # inside record 0's tile data
    shard.write_bytes(bytes(data))

    def outcomes(ld):
        out = []
        while True:
            try:
                b = ld.next()
            except l3.DataError as e:
                out.append(("error", str(e).split(":")[0]))
                continue
            if b is None:
                return out
            out.append((b.data.tobytes(), b.records.tolist()))

    # verify=False: the bad record reaches the decoder (the backend reports it per record).
    for on_error in ("raise", "skip"):
        kw = dict(shuffle=False, verify=False, on_error=on_error)
        with loader(dst, **kw) as a, loader(dst, _emulated_gpu=True, **kw) as b:
            xs, ys = outcomes(a), outcomes(b)
        assert xs == ys
        assert len(xs) == 5


def test_emulated_gpu_needs_device_cpu(small_dataset):
    d, _ = small_dataset
    with pytest.raises(ValueError, match="device='cpu'"):
        loader(d, _emulated_gpu=True, device="cuda")


# ---- the device hand-off, with a stand-in for the extension's device batches ----------------


class FakeDeviceHandle:
    """What _l3._Reader.next() returns for a device batch (an _l3._DeviceArray)."""

    def __init__(self, host, device=0):
        self.host = host
        self.shape = host.shape
        self.dtype = str(host.dtype)
        self.nbytes = host.nbytes
        self.device = device
        self.ptr = host.__array_interface__["data"][0]

    def capsule(self):
        return self.host.__dlpack__()


class FakeDeviceReader:
    """Wraps the real _l3._Reader; its batches come out as device batches, and the
    consumer streams passed to next() / release() are recorded."""

    def __init__(self, r):
        self._r = r
        self.next_streams = []
        self.waited = []

    def next(self, streams=()):
        self.next_streams.append(list(streams))
        b = self._r.next(list(streams))
        if b is None:
            return None
        b.data, b.device = FakeDeviceHandle(b.data), 0
        return b

    def release(self, streams):
        self.waited.append(list(streams))

    def __getattr__(self, name):
        return getattr(self._r, name)


def test_device_handoff_records_consumer_streams(small_dataset):
    d, _ = small_dataset
    ld = loader(d, _emulated_gpu=True, copy=False)
    fake = ld._r = FakeDeviceReader(ld._r)
    b = ld.next()
    a = b.data
    assert isinstance(a, l3.DeviceArray) and b.device == 0
    assert a.shape == (8, 3, 16, 16) and a.dtype == np.float32 and a.device == "cuda:0" and len(a) == 8
    assert b.__dlpack_device__() == (2, 0) and a.__dlpack_device__() == (2, 0)
    assert a.data_ptr() == a._a.ptr and a.valid
    assert "cuda:0" in repr(b) and "cuda:0" in repr(a)
    with pytest.raises(TypeError, match="device memory"):
        np.asarray(a)
    # DLPack stream values: None / 1 = legacy default (recorded as 0), 2 = per-thread default,
    # other = a cudaStream_t, -1 = no synchronisation (nothing recorded); 0 is ambiguous.
    a.__dlpack__(stream=None)
    b.__dlpack__(stream=1)
    a.__dlpack__(stream=0x7F00, max_version=(1, 0), dl_device=(2, 0), copy=False)
    b.__dlpack__(stream=-1)
    a.__dlpack__(stream=np.int64(2))
    for bad, err in ((0, ValueError), (-5, ValueError), ("s", TypeError)):
        with pytest.raises(err):
            a.__dlpack__(stream=bad)
    with pytest.raises(BufferError, match="copy"):
        a.__dlpack__(copy=True)
    with pytest.raises(BufferError):
        a.__dlpack__(dl_device=(2, 1))
    ld.next()
    assert fake.next_streams[-1] == [0, 0x7F00, 2]
    # the previous batch was handed back: exporting it now would read a refilled buffer
    assert not a.valid
    with pytest.raises(BufferError, match="handed back"):
        b.__dlpack__(stream=1)
    # a batch nobody exported: the refill is ordered after the legacy default stream (no streams)
    ld.next()
    assert fake.next_streams[-1] == []
    # set_epoch / restore / close wait for the current batch's consumer streams
    b = ld.next()
    b.__dlpack__(stream=0x1234)
    st = ld.state()
    ld.set_epoch(0)
    assert fake.waited[-1] == [0x1234] and not b.data.valid
    b = ld.next()
    b.__dlpack__(stream=2)
    ld.restore(st)
    assert fake.waited[-1] == [2]
    b = ld.next()
    b.__dlpack__()
    ld.close()
    assert fake.waited[-1] == [0]


def test_torch_adapter_refuses_workers_with_cuda(small_dataset):
    d, _ = small_dataset
    with pytest.raises(ValueError, match="num_workers=0"):
        l3.torch.IterableDataset(d, batch_size=8, size=16, device="cuda", num_workers=2)

