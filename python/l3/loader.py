"""l3.Loader: the streaming loader (the C++ l3::Reader), l3.Batch and l3.DeviceArray.

Public names are re-exported by the package: use l3.Loader, l3.Batch, l3.DeviceArray.
"""
from __future__ import annotations

import json
import operator
import os
from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np

from . import _l3
from ._l3 import CropMode, DType, ErrorPolicy, Layout, ReaderOptions, Remainder, Verify

PathLike = Union[str, os.PathLike]
built_with_cuda: bool = bool(_l3.built_with_cuda)


# ---- the streaming loader ------------------------------------------------------------


_KDL_CUDA = 2  # DLPack device type of CUDA memory


def _consumer_stream(stream: Any) -> Optional[int]:
    """A DLPack consumer `stream` of a CUDA array -> the cudaStream_t value the loader
    orders the buffer's refill after (0: the legacy default stream), or None (nothing
    to record: stream=-1)."""
    if stream is None:
        return 0  # DLPack: None means the legacy default stream for CUDA
    if isinstance(stream, bool) or not isinstance(stream, int):
        try:
            stream = operator.index(stream)  # integer types (a numpy integer)
        except TypeError:
            raise TypeError(f"__dlpack__: stream must be None or an int; got {type(stream).__name__}") from None
    if stream == -1:
        return None  # the consumer asks for no synchronisation: nothing to record
    if stream == 1:
        return 0  # the legacy default stream
    if stream == 0:
        raise ValueError("__dlpack__: stream=0 is ambiguous for CUDA (DLPack); pass None or 1 (legacy default "
                         "stream), 2 (per-thread default stream) or a cudaStream_t")
    if stream < 0:
        raise ValueError(f"__dlpack__: invalid CUDA stream {stream}")
    return stream  # 2 (cudaStreamPerThread) or a cudaStream_t


class _Handoff:
    """The loader's side of the DLPack hand-off of device batches: which batch is out
    (serial) and the consumer streams its arrays were exported to (recorded by
    DeviceArray.__dlpack__, passed to the reader by the next next() or by release():
    the reader orders the buffer's refill after each of them, l3::Reader::next)."""

    __slots__ = ("serial", "streams")

    def __init__(self):
        self.serial = 0
        self.streams: list = []

    def record(self, serial: int, stream: Optional[int]) -> None:
        if serial != self.serial:
            raise BufferError("this CUDA batch was handed back to the loader (by a later next(), set_epoch(), "
                              "restore() or close()) and its memory is being refilled: export each batch "
                              "(torch.from_dlpack) before requesting the next one")
        if stream is not None and stream not in self.streams:
            self.streams.append(stream)

    def take(self) -> list:
        """Ends the current batch's hand-off; returns its consumer streams."""
        streams, self.streams = self.streams, []
        self.serial += 1
        return streams


class DeviceArray:
    """A batch tensor in CUDA device memory (Loader(device="cuda")), exposed through DLPack.

    torch.from_dlpack(array) (or of its l3.Batch) returns a CUDA tensor on this
    memory, no copy. The memory is the loader's: it is refilled by a later batch,
    so use the tensor (enqueue your work on it) before the next iteration, or
    clone it. The batch is complete when it is handed out (the loader waited for
    the GPU work that wrote it), so no synchronisation is needed before use.
    __dlpack__(stream=s) records the consumer's stream s (torch passes its
    current stream); the next iteration refills the buffer only after the work
    enqueued on s until then has run. DLPack stream values: None or 1 = the
    legacy default stream, 2 = the per-thread default stream, any other
    positive int = a cudaStream_t; -1 (no synchronisation) records nothing.
    """

    __slots__ = ("_a", "_handoff", "_serial")

    def __init__(self, handle, handoff: _Handoff, serial: int):
        self._a = handle
        self._handoff = handoff
        self._serial = serial

    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(self._a.shape)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self._a.dtype)

    @property
    def ndim(self) -> int:
        return len(self._a.shape)

    @property
    def nbytes(self) -> int:
        return int(self._a.nbytes)

    @property
    def device(self) -> str:
        return f"cuda:{self._a.device}"

    @property
    def device_id(self) -> int:
        return int(self._a.device)

    def data_ptr(self) -> int:
        """The device address of the first element."""
        return int(self._a.ptr)

    @property
    def valid(self) -> bool:
        """False once the loader moved on (the memory may be refilled): __dlpack__ then raises."""
        return self._serial == self._handoff.serial

    def __dlpack_device__(self) -> Tuple[int, int]:
        return (_KDL_CUDA, int(self._a.device))

    def __dlpack__(self, *, stream: Any = None, max_version: Optional[Tuple[int, int]] = None,
                   dl_device: Optional[Tuple[int, int]] = None, copy: Optional[bool] = None):
        if copy:
            raise BufferError("__dlpack__(copy=True): l3 hands out device batches without copying; "
                              "clone the tensor instead")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"__dlpack__: the batch is on {self.__dlpack_device__()}, not {tuple(dl_device)}")
        self._handoff.record(self._serial, _consumer_stream(stream))
        # An unversioned DLPack capsule (max_version is accepted; consumers take both kinds).
        return self._a.capsule()

    def __array__(self, *args, **kwargs):
        raise TypeError("an l3 CUDA batch lives in device memory: use torch.from_dlpack(batch) "
                        "(then .cpu() for a host copy)")

    def __len__(self) -> int:
        return int(self._a.shape[0])

    def __repr__(self) -> str:
        return f"l3.DeviceArray(shape={self.shape}, dtype={self.dtype}, device={self.device!r})"


Batch = _l3.Batch  # one batch (bound in C++, python/src/batch_bindings.cpp): named fields, DLPack


def _pair(v, name) -> Tuple[float, float]:
    if isinstance(v, (int, float)):
        return float(v), float(v)
    v = tuple(v)
    if len(v) != 2:
        raise ValueError(f"{name} must be a number or a pair; got {v!r}")
    return float(v[0]), float(v[1])


def _cuda_index(device: str) -> int:
    try:
        k = int(str(device)[len("cuda:"):])
    except ValueError:
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N'; got {device!r}") from None
    if k < 0:
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N'; got {device!r}")
    return k


_D = ReaderOptions()  # the C++ defaults (l3::ReaderOptions): the Loader's signature takes its defaults from here
_T = _D.transform


def _size_default() -> Union[int, Tuple[int, int]]:
    return _T.height if _T.height == _T.width else (_T.height, _T.width)


def _float32s(values) -> Tuple[float, ...]:
    # float[3] in C++: each value written as the shortest decimal of its float32 (0.485, not 0.48500001...)
    return tuple(float(str(np.float32(v))) for v in values)


def _count(name: str, v: Any) -> int:
    if int(v) < 0:
        raise ValueError(f"{name} must be >= 0; got {v}")
    return int(v)


def _enum(kind, value: Any, name: str):
    """`value` as a member of the bound enum `kind`: the member itself or its name (one spelling)."""
    if isinstance(value, kind):
        return value
    try:
        return kind[str(value)]
    except KeyError:
        names = " | ".join(repr(k) for k in kind.__members__)
        raise ValueError(f"{name} must be {names}; got {value!r}") from None


def _device_index(device: str, copy: Optional[bool], emulated_gpu: bool) -> int:
    """-1 for "cpu", else the CUDA device index, checked against what this process has."""
    if device not in ("cpu", "cuda") and not str(device).startswith("cuda:"):
        raise ValueError(f"device must be 'cpu' or 'cuda'; got {device!r}")
    if emulated_gpu and device != "cpu":
        raise ValueError("_emulated_gpu runs the GPU backend's decomposition on the CPU: use device='cpu'")
    if device == "cpu":
        return -1
    # device="cuda[:N]": decode and transforms by the CUDA batch backend; batches in device memory.
    if not built_with_cuda:
        raise ValueError("device='cuda': this l3 extension was built without CUDA (nvcc was not found "
                         "when it was built); use device='cpu' and move batches with tensor.to('cuda')")
    index = 0 if device == "cuda" else _cuda_index(device)
    n = int(_l3.cuda_device_count())
    if n == 0:
        raise ValueError("device='cuda': no CUDA device is available to this process (the extension "
                         "was built with CUDA); use device='cpu'")
    if index >= n:
        raise ValueError(f"device={device!r}: only {n} CUDA device(s)")
    if copy:
        raise ValueError("device='cuda': batches stay in the loader's device memory and are never copied "
                         "(copy=True); clone the tensor to keep a batch past the next iteration")
    return index


class Loader:
    """Streams fixed-size training batches from a dataset (the C++ l3::Reader).

    Every reader option is a keyword argument; together they fill an l3.ReaderOptions
    (the C++ struct, bound as it is), whose defaults are this signature's. An enum option
    takes the member or its name: crop=l3.CropMode.center or crop="center" (the names are
    the one spelling, also l3pack bench-read's --mode); layout l3.Layout, dtype l3.DType,
    on_error l3.ErrorPolicy:
      order:      shuffle=True, seed=0, epoch=0 (first epoch), block_size=0 (0: shuffle
                  records; b: shuffle blocks of b consecutive records)
      partition:  rank=0, world_size=1, drop_last=False (False: pad by wrapping so every
                  rank gets the same batch count; True: drop the remainder)
      pipeline:   workers=2 (decode threads), prefetch=2 (batches ahead), read_ahead=0
      transform:  size=224 or (height, width), channels=3, crop="random_resized" |
                  "center" | "full", scale=(0.08, 1.0), ratio=(3/4, 4/3),
                  center_fraction=0.875, antialias=True, flip=0.5 (probability)
      output:     layout="chw" | "hwc", dtype="float32" | "float16" | "uint8",
                  normalize=True, mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225)
      device:     "cpu", or "cuda" / "cuda:N": decode and transform on that GPU (the CUDA batch
                  backend); batches stay in device memory (batch.data is an l3.DeviceArray;
                  torch.from_dlpack(batch) is a CUDA tensor, no copy, valid until the next batch:
                  see DeviceArray for the stream semantics), byte-identical to "cpu" batches.
                  ValueError naming why otherwise: "built without CUDA" or "no CUDA device"
      echo=1, echo_window=0 (data echoing), cache_bytes=0 (RAM cache of compressed records)
      peer_cache=["host:port", ...]: every node's memcached, the same list on every node
                  (CoorDL's partitioned cache: a record missing from the RAM cache comes from
                  its owner's memcached, checked against its XXH3, before storage; spec/format.md
                  §8.6), peer_timeout_ms=500; stats()["records_read"] counts storage reads
      errors:     on_error="raise" | "skip", max_replacements=64, verify=True
                  (record checksums; the image's own checksum, over the same bytes, is then
                  not checked again; verify=False checks that one instead), verify_shard_hashes=False
      copy:       host batches (default True): each batch's arrays own its memory, so a batch
                  stays valid as long as you hold it. Not copied: the reader's ring buffer is
                  handed over to the arrays and the reader goes on in a pooled buffer (recycled
                  once the arrays are released); the name is kept from versions that copied.
                  copy=False leaves the buffer in the ring: the arrays are overwritten by a later
                  batch (use only when each batch is consumed before the next is requested).
                  Device batches are never copied (copy=True is refused).
      _emulated_gpu=True (testing/reference, with device="cpu"): batches made by the CUDA
                  batch backend's decomposition run on the CPU (host memory, numpy; exact but
                  slow), so the batch mode's Python side runs without a GPU.

    Iterating yields l3.Batch objects for one epoch; iterating again after the epoch
    ended continues with the next epoch (or call set_epoch()). The GIL is released
    while waiting for a batch.
    """

    def __init__(self, path: PathLike, batch_size: int = _D.batch_size, *, shuffle: bool = _D.shuffle,
                 seed: int = _D.seed, epoch: int = _D.epoch, block_size: int = _D.block_size, rank: int = _D.rank,
                 world_size: int = _D.world_size, drop_last: bool = _D.remainder == Remainder.drop,
                 workers: int = _D.workers, prefetch: int = _D.prefetch, read_ahead: int = _D.read_ahead,
                 size: Union[int, Tuple[int, int]] = _size_default(), channels: int = _T.channels,
                 crop: Union[str, CropMode] = _T.crop.name, scale: Tuple[float, float] = (_T.scale_min, _T.scale_max),
                 ratio: Tuple[float, float] = (_T.ratio_min, _T.ratio_max),
                 center_fraction: float = _T.center_fraction, antialias: bool = _T.antialias,
                 flip: float = _T.flip_probability, layout: Union[str, Layout] = _T.layout.name,
                 dtype: Union[str, DType] = _T.dtype.name, normalize: bool = _T.normalize,
                 mean: Sequence[float] = _float32s(_T.mean), std: Sequence[float] = _float32s(_T.std),
                 device: str = "cpu", echo: int = _D.echo, echo_window: int = _D.echo_window,
                 cache_bytes: int = _D.cache_bytes, peer_cache: Sequence[str] = tuple(_D.peer_cache.servers),
                 peer_timeout_ms: int = _D.peer_cache.timeout_ms, on_error: Union[str, ErrorPolicy] = _D.on_error.name,
                 max_replacements: int = _D.max_replacements, verify: bool = _D.verify == Verify.yes,
                 verify_shard_hashes: bool = False, copy: Optional[bool] = None, _emulated_gpu: bool = False):
        device_index = _device_index(device, copy, _emulated_gpu)
        if copy is None:
            copy = device_index < 0  # host batches are copied by default; device batches never
        if isinstance(size, int):
            height = width = size
        else:
            height, width = (int(v) for v in size)
        if isinstance(peer_cache, (str, bytes)):
            raise ValueError("peer_cache is a list of 'host:port' strings, not one string")
        o = ReaderOptions()
        for k, v in dict(batch_size=batch_size, workers=workers, prefetch=prefetch, read_ahead=read_ahead,
                         seed=seed, block_size=block_size, epoch=epoch, world_size=world_size, rank=rank,
                         echo=echo, echo_window=echo_window, cache_bytes=cache_bytes,
                         max_replacements=max_replacements).items():
            setattr(o, k, _count(k, v))
        o.shuffle = bool(shuffle)
        o.remainder = Remainder.drop if drop_last else Remainder.pad
        o.peer_cache.servers = [str(s) for s in peer_cache]
        o.peer_cache.timeout_ms = _count("peer_timeout_ms", peer_timeout_ms)
        o.on_error = _enum(ErrorPolicy, on_error, "on_error")
        o.verify = Verify.yes if verify else Verify.no
        t = o.transform
        t.width, t.height = _count("width", width), _count("height", height)
        t.channels = _count("channels", channels)
        t.crop = _enum(CropMode, crop, "crop")
        t.scale_min, t.scale_max = _pair(scale, "scale")
        t.ratio_min, t.ratio_max = _pair(ratio, "ratio")
        t.center_fraction = float(center_fraction)
        t.antialias = bool(antialias)
        t.flip_probability = float(flip)
        t.layout = _enum(Layout, layout, "layout")
        t.dtype = _enum(DType, dtype, "dtype")
        t.normalize = bool(normalize)
        t.mean = [float(v) for v in mean]
        t.std = [float(v) for v in std]
        setup = _l3._ReaderSetup()
        setup.verify_shard_hashes = bool(verify_shard_hashes)
        setup.copy = bool(copy)
        setup.device = device_index
        setup.emulated_gpu = bool(_emulated_gpu)
        self._path = os.fspath(path)
        self._options = o
        self._setup = setup
        self._handoff = _Handoff()
        self._r = _l3._Reader(self._path, o, setup)
        self._ended = False
        self.batch_size = int(batch_size)
        self.device = device

    # iteration
    def __iter__(self):
        if self._ended:
            self.set_epoch(self.epoch + 1)
        return self

    def __next__(self) -> Batch:
        b = self.next()
        if b is None:
            raise StopIteration
        return b

    def next(self) -> Optional[Batch]:
        """The next batch of this rank's epoch, or None at its end. A device batch handed
        out before is handed back: its buffer is refilled once the work its consumers
        enqueued on their streams (recorded by __dlpack__) has run."""
        b = self._r.next(self._handoff.take())
        if b is None:
            self._ended = True
            return None
        if b.device >= 0:
            b.data = DeviceArray(b.data, self._handoff, self._handoff.serial)
        return b

    def _hand_back(self) -> None:
        # set_epoch / restore / close hand the current batch back first: the reader orders
        # a device batch's refill (or frees it) after the work its consumers enqueued.
        self._r.release(self._handoff.take())

    def __len__(self) -> int:
        """Batches of this rank in the current epoch."""
        return int(self._r.batches_in_epoch())

    def set_epoch(self, epoch: int) -> None:
        """Starts epoch `epoch` from its first batch."""
        self._hand_back()
        self._r.set_epoch(int(epoch))
        self._ended = False

    @property
    def epoch(self) -> int:
        return int(self._r.epoch())

    # resume
    def state(self) -> dict:
        """Where the epoch stands (JSON-serialisable). restore(state) continues with exactly
        the remaining samples, under any world size."""
        return json.loads(self._r.state())

    def restore(self, state: Union[dict, str]) -> None:
        self._hand_back()
        self._r.restore(state if isinstance(state, str) else json.dumps(state))
        self._ended = False

    # metrics
    def stats(self, step_seconds: Optional[float] = None) -> dict:
        """The reader's stall metrics: batches, examples, wait_seconds, max_wait_seconds,
        stalled_batches, busy seconds per stage, cache and error counts, images_per_second,
        bottleneck.

        step_seconds (a GPU's time per training step) adds "what_if" (DS-Analyzer's): the
        worker threads needed to feed one batch per step (workers_needed, from the busy
        time per example), the worker and read seconds per batch, images_per_second_needed,
        max_images_per_second of this configuration and limit: "none" (fed), "workers" or
        "read"."""
        if step_seconds is not None and not step_seconds > 0:
            raise ValueError(f"step_seconds must be > 0; got {step_seconds!r}")
        return json.loads(self._r.metrics_json(float(step_seconds or 0.0)))

    def stats_summary(self) -> str:
        return self._r.metrics_summary()

    def reset_stats(self) -> None:
        self._r.reset_metrics()

    @property
    def classes(self) -> list:
        return self._r.classes()

    @property
    def dataset_size(self) -> int:
        return int(self._r.dataset_size())

    def close(self) -> None:
        """Stops the worker threads (host batches already returned stay valid; a device
        batch stays allocated while a tensor uses it)."""
        self._hand_back()
        self._r.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self) -> str:
        return f"l3.Loader({self._path!r}, batch_size={self.batch_size}, epoch={self.epoch})"
