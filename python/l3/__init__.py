"""l3: lossless tile-parallel image codec, sharded datasets and a streaming reader.

    import l3
    data = l3.encode(image)             # numpy uint8 (H, W) or (H, W, C) -> bytes
    image = l3.decode(data)             # -> numpy uint8 (H, W, C)
    ds = l3.Dataset("out/")             # ds[i] -> (image, label)
    for batch in l3.Loader("out/", batch_size=64, size=224):
        x = torch.from_dlpack(batch)    # zero copy; batch.labels: int64 numpy
    # device="cuda": decode and transforms on the GPU; torch.from_dlpack(batch) is a
    # CUDA tensor on the batch's device memory (no copy), valid until the next batch.

Errors: ValueError for bad arguments (IndexError for an index out of range),
l3.DataError (a ValueError) for invalid streams, shards or manifests, OSError
for files that cannot be read or written.
"""
from __future__ import annotations

import json
import operator
import os
from typing import Any, Iterable, Optional, Sequence, Tuple, Union

import numpy as np

from . import _l3
from ._l3 import CropMode, DataError, DType, ErrorPolicy, Layout, PeerCacheOptions, ReaderOptions, Remainder, \
    TransformOptions, Verify

__all__ = [
    "DataError", "encode", "decode", "decode_region", "info", "load_image", "Dataset", "Loader",
    "Batch", "DeviceArray", "ShardWriter", "DatasetWriter", "write_manifest", "convert", "commit_parts",
    "built_with_cuda", "ReaderOptions", "TransformOptions", "PeerCacheOptions", "CropMode", "Layout", "DType",
    "ErrorPolicy", "Remainder", "Verify",
]
__version__: str = _l3.version()  # l3::version(): project(l3 VERSION ...) in CMakeLists.txt

built_with_cuda: bool = bool(_l3.built_with_cuda)

PathLike = Union[str, os.PathLike]
BytesLike = Union[bytes, bytearray, memoryview]


def _bytes(data: BytesLike) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    if isinstance(data, np.ndarray) and data.dtype == np.uint8:
        return data.tobytes()
    raise TypeError(f"expected bytes, bytearray or memoryview, not {type(data).__name__}")


def _image_array(array: Any) -> np.ndarray:
    a = np.asarray(array)
    if a.dtype != np.uint8:
        raise ValueError(f"l3 images are uint8; got dtype {a.dtype}")
    if a.ndim == 2:
        a = a[:, :, None]
    if a.ndim != 3:
        raise ValueError(f"an image is (H, W) or (H, W, C); got shape {a.shape}")
    if a.shape[2] not in (1, 2, 3, 4):
        raise ValueError(f"channels must be 1, 2, 3 or 4; got {a.shape[2]}")
    if a.shape[0] == 0 or a.shape[1] == 0:
        raise ValueError(f"empty image: shape {a.shape}")
    return np.ascontiguousarray(a)


# ---- codec -------------------------------------------------------------------------


def encode(array: Any, tile_width: int = 0, tile_height: int = 0, effort: int = 1, threads: int = 1) -> bytes:
    """Encodes a uint8 image, (H, W) or (H, W, C) with C in 1..4, to .l3i bytes.

    tile_width: 0 (default) or a power of two 16..256; tile_height: 0 (32) or 1..32;
    effort: 0 fixed transform/predictor, 1 chosen per tile; threads: 0 = all cores.
    The output does not depend on `threads`.
    """
    return _l3.encode(_image_array(array), tile_width, tile_height, effort, threads)


def decode(data: BytesLike, threads: int = 1, verify_checksum: bool = True) -> np.ndarray:
    """Decodes .l3i bytes to a numpy uint8 array (H, W, C)."""
    return _l3.decode(_bytes(data), threads, verify_checksum)


def decode_region(data: BytesLike, x: int, y: int, width: int, height: int, threads: int = 1) -> np.ndarray:
    """Decodes only the rectangle (x, y, width, height), touching only the tiles it overlaps."""
    return _l3.decode_region(_bytes(data), x, y, width, height, threads, True)


def info(data: BytesLike) -> dict:
    """The header of .l3i bytes: width, height, channels, tiles, sizes (validated, nothing decoded)."""
    return _l3.info(_bytes(data))


def load_image(path: PathLike) -> np.ndarray:
    """Reads a PNG, JPEG or PNM file losslessly into a uint8 (H, W, C) array."""
    return _l3.load_image(os.fspath(path))


# ---- datasets ------------------------------------------------------------------------


def _check_channels(channels: Optional[int]) -> Optional[int]:
    if channels is None:
        return None
    if isinstance(channels, bool) or not isinstance(channels, (int, np.integer)) or int(channels) not in (1, 3):
        raise ValueError(f"channels must be None (as stored), 1 (gray) or 3 (RGB); got {channels!r}")
    return int(channels)


class Dataset:
    """Random access to a converted dataset (a directory with manifest.json and shards).

    ds[i] -> (image uint8 (H, W, C), label int; -1 when unlabelled). Shards are
    memory-mapped and opened on first access; record checksums are verified.

    channels=None gives each image as stored (1, 2, 3 or 4 channels); 3 gives RGB
    as PIL's convert("RGB") does (gray and gray+alpha replicated, alpha dropped),
    1 gives gray (gray+alpha drops alpha; a colour record raises ValueError). The
    rule is the Loader's (its channels=), implemented once in C++.
    """

    def __init__(self, path: PathLike, verify_shard_hashes: bool = False, channels: Optional[int] = None):
        self._path = os.fspath(path)
        self._channels = _check_channels(channels)
        self._ds = _l3._Dataset(self._path, verify_shard_hashes)

    def __len__(self) -> int:
        return len(self._ds)

    def _index(self, i: int) -> int:
        i = int(i)
        n = len(self._ds)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"record {i} out of range for a dataset of {n} records")
        return i

    def __getitem__(self, i: int) -> Tuple[np.ndarray, int]:
        return self._ds.get(self._index(i), channels=self._channels or 0)

    @property
    def channels(self) -> Optional[int]:
        """Channels of the images it returns (None: as stored)."""
        return self._channels

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def label(self, i: int) -> int:
        return self._ds.label(self._index(i))

    def key(self, i: int) -> str:
        return self._ds.key(self._index(i))

    def payload(self, i: int) -> bytes:
        """The record's raw .l3i bytes."""
        return self._ds.payload(self._index(i))

    def metadata(self, i: int) -> bytes:
        return self._ds.metadata(self._index(i))

    @property
    def keys(self) -> list:
        """Every record's key (for example its source file's relative path)."""
        return self._ds.keys()

    @property
    def labels(self) -> np.ndarray:
        return np.asarray(self._ds.labels(), dtype=np.int64)

    @property
    def classes(self) -> list:
        """Class names: label i is classes[i] (empty when the dataset has none)."""
        return self._ds.classes

    @property
    def path(self) -> str:
        return self._path

    @property
    def shard_count(self) -> int:
        return self._ds.shard_count

    def verify(self) -> None:
        """Checks every record's checksum (raises l3.DataError naming the problem)."""
        self._ds.verify_all()

    def __repr__(self) -> str:
        if not hasattr(self, "_ds"):
            return "l3.Dataset(<not opened>)"
        return f"l3.Dataset({self._path!r}, records={len(self)}, classes={len(self.classes)})"


# ---- writing datasets ----------------------------------------------------------------


class ShardWriter:
    """Writes one shard file. Records are .l3i images: pass an array, an image file
    path (PNG/JPEG/PNM, encoded losslessly) or ready .l3i bytes.

        with l3.ShardWriter("out/shard-00000.l3s") as w:
            w.add(array, label=3, key="cat/001.png")
        summary = w.summary        # what write_manifest() needs

    The shard is written to "<path>.tmp" and renamed by finalize() (called by
    `with` on success); without finalize() no partial shard is left behind.
    """

    def __init__(self, path: PathLike, tile_width: int = 0, tile_height: int = 0, effort: int = 1,
                 threads: int = 1):
        self._path = os.fspath(path)
        self._w = _l3._ShardWriter(self._path)
        self._enc = dict(tile_width=tile_width, tile_height=tile_height, effort=effort, threads=threads)
        self.summary: Optional[dict] = None
        self.image_shapes: list = []  # (H, W, C) of each record, for the manifest's image_stats

    def add(self, image: Any, label: int = -1, key: str = "", metadata: BytesLike = b"") -> int:
        """Appends one image (array, file path or .l3i bytes); returns its index in the shard."""
        if isinstance(image, (str, os.PathLike)):
            data = _l3.encode_file(os.fspath(image), **self._enc)
        elif isinstance(image, (bytes, bytearray, memoryview)):
            data = _bytes(image)
        else:
            data = encode(image, **self._enc)
        return self.add_encoded(data, label, key, metadata)

    def add_encoded(self, data: BytesLike, label: int = -1, key: str = "", metadata: BytesLike = b"") -> int:
        """Appends .l3i bytes as they are (their header is validated)."""
        data = _bytes(data)
        hdr = info(data)
        label = int(label)
        if label < -1:
            raise ValueError(f"label must be -1 (none) or >= 0; got {label}")
        index = self._w.append(data, label, str(key), _bytes(metadata))
        self.image_shapes.append((hdr["height"], hdr["width"], hdr["channels"]))
        return index

    def finalize(self) -> dict:
        """Writes the index, renames the file into place; returns {file, records, bytes, file_hash, path}."""
        self.summary = self._w.finalize()
        return self.summary

    def abort(self) -> None:
        self._w.abort()

    @property
    def records(self) -> int:
        return self._w.records

    @property
    def bytes_written(self) -> int:
        return self._w.bytes_written

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if self._w.closed:
            return
        if exc_type is None:
            self.finalize()
        else:
            self.abort()


def _image_stats(shapes: Iterable[Tuple[int, int, int]]) -> dict:
    shapes = list(shapes)
    if not shapes:
        return {}
    hs = [s[0] for s in shapes]
    ws = [s[1] for s in shapes]
    channels: dict = {}
    for s in shapes:
        channels[str(s[2])] = channels.get(str(s[2]), 0) + 1
    return {
        "images": len(shapes),
        "total_pixels": int(sum(h * w for h, w in zip(hs, ws))),
        "width": {"min": min(ws), "max": max(ws), "mean": sum(ws) / len(ws)},
        "height": {"min": min(hs), "max": max(hs), "mean": sum(hs) / len(hs)},
        "channels": channels,
    }


def write_manifest(directory: PathLike, shards: Sequence[dict], classes: Sequence[str] = (),
                   image_stats: Optional[dict] = None, extra: Optional[dict] = None) -> None:
    """Commits a dataset: writes directory/manifest.json atomically, listing `shards`
    (ShardWriter.finalize() results, in order) and the class names (label i = classes[i])."""
    _l3.write_manifest(os.fspath(directory), list(shards), [str(c) for c in classes],
                       json.dumps(image_stats or {}), json.dumps(extra or {}))


class DatasetWriter:
    """Builds a whole dataset directory: rolls shards at `shard_size` bytes and writes
    the manifest on close().

        with l3.DatasetWriter("out/", classes=["cat", "dog"]) as w:
            w.add(image, label=0, key="cat/1.png")
        l3.Dataset("out/")
    """

    def __init__(self, directory: PathLike, classes: Sequence[str] = (), shard_size: int = 256 << 20,
                 tile_width: int = 0, tile_height: int = 0, effort: int = 1, threads: int = 1):
        self._dir = os.fspath(directory)
        os.makedirs(self._dir, exist_ok=True)
        if os.path.exists(os.path.join(self._dir, "manifest.json")):
            raise FileExistsError(f"{self._dir} already holds a committed dataset (manifest.json)")
        self._classes = [str(c) for c in classes]
        self._shard_size = int(shard_size)
        self._enc = dict(tile_width=tile_width, tile_height=tile_height, effort=effort, threads=threads)
        self._writer: Optional[ShardWriter] = None
        self._shards: list = []
        self._shapes: list = []
        self._closed = False

    def _open(self) -> ShardWriter:
        if self._closed:
            raise ValueError("the dataset writer is closed")
        if self._writer is None:
            name = f"shard-{len(self._shards):05d}.l3s"
            self._writer = ShardWriter(os.path.join(self._dir, name), **self._enc)
        return self._writer

    def _roll(self) -> None:
        if self._writer is not None:
            self._shards.append(self._writer.finalize())
            self._shapes.extend(self._writer.image_shapes)
            self._writer = None

    def add(self, image: Any, label: int = -1, key: str = "", metadata: BytesLike = b"") -> None:
        if self._classes and label >= len(self._classes):
            raise ValueError(f"label {label} has no class name ({len(self._classes)} classes)")
        w = self._open()
        w.add(image, label, key, metadata)
        if w.bytes_written >= self._shard_size:
            self._roll()

    def close(self) -> str:
        """Finalizes the last shard and writes the manifest; returns the directory."""
        if self._closed:
            return self._dir
        self._roll()
        write_manifest(self._dir, self._shards, self._classes, _image_stats(self._shapes))
        self._closed = True
        return self._dir

    def abort(self) -> None:
        if self._writer is not None:
            self._writer.abort()
            self._writer = None
        self._closed = True

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.abort()


MAX_PIXELS = 178956970  # l3pack convert's default --max-pixels (PIL's DecompressionBombError threshold)


def convert(src: PathLike, out: PathLike, shard_size: int = 256 << 20, threads: int = 0, strict: bool = False,
            resume: bool = False, shuffle_seed: Optional[int] = None, max_pixels: int = MAX_PIXELS,
            layout: str = "auto", base: Optional[PathLike] = None, allow_empty: bool = False,
            convert_16bit: bool = False, strict_jpeg: bool = False, part: Optional[Tuple[int, int]] = None,
            shared_output: bool = False, engine: str = "local", parts: Optional[int] = None,
            ray_address: Optional[str] = None, max_retries: int = 3) -> dict:
    """`l3pack convert SRC OUT`: a folder of class folders, a flat folder or a list file
    (path,label lines; integer labels or class names) becomes a dataset directory.

    The keyword arguments are l3pack's options: images with more than `max_pixels`
    pixels are skipped (checked from the header, before decoding); `layout` is
    "auto", "classes" or "flat"; `base` is the folder a list file's paths are read
    from. Returns the conversion report; its "skipped_inputs" (also OUT/skipped.jsonl)
    holds {"path", "reason", "detail"} for every input not converted.

    part=(i, n) converts part i of n (`--part i/n`); with shared_output=True the n parts
    write into the same OUT and commit_parts(OUT) commits it (spec/format.md §8.4.1).
    engine="ray" runs parts=n such parts as Ray tasks (retried up to max_retries times),
    then commits (l3.ray_convert); ray_address joins a cluster, else one is started on
    127.0.0.1; threads is then per task."""
    options = dict(shard_size=shard_size, threads=threads, strict=strict, shuffle_seed=shuffle_seed,
                   max_pixels=max_pixels, layout=layout, base=base, allow_empty=allow_empty,
                   convert_16bit=convert_16bit, strict_jpeg=strict_jpeg)
    if engine == "ray":
        if part is not None or shared_output or resume:
            raise ValueError("engine='ray' runs the parts itself (each resumable): no part, shared_output or resume")
        if parts is None:
            raise ValueError("engine='ray' needs parts=n")
        from . import ray_convert
        return ray_convert.convert(src, out, int(parts), address=ray_address, max_retries=max_retries, **options)
    if engine != "local":
        raise ValueError(f"engine must be 'local' or 'ray'; got {engine!r}")
    if parts is not None or ray_address is not None:
        raise ValueError("parts and ray_address go with engine='ray' (locally: part=(i, n))")
    index, count = (0, 1) if part is None else (int(part[0]), int(part[1]))
    return _l3.convert(os.fspath(src), os.fspath(out), int(shard_size), int(threads), bool(strict), bool(resume),
                       -1 if shuffle_seed is None else int(shuffle_seed), int(max_pixels), str(layout),
                       "" if base is None else os.fspath(base), bool(allow_empty), bool(convert_16bit),
                       bool(strict_jpeg), index, count, bool(shared_output))


def commit_parts(out: PathLike) -> int:
    """`l3pack merge --in-place OUT`: commits the dataset that part=(i, n), shared_output=True
    conversions wrote into OUT (a folder or s3://): checks the n part manifests and that
    every shard they list is there with its size, joins the skip lists, writes
    manifest.json. Reads and moves no shard. Returns the record count."""
    return int(_l3.commit_parts(os.fspath(out)))


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
                  (record checksums), verify_shard_hashes=False
      copy:       host batches (default True): each batch is copied out of the reader's ring
                  of buffers into a buffer owned by the returned arrays (recycled once they
                  are released), so a batch stays valid as long as you hold it. copy=False
                  hands out the ring buffer itself: no copy, but the arrays are overwritten
                  by a later batch (use only when each batch is consumed before the next is
                  requested). Device batches are never copied (copy=True is refused).
      _emulated_gpu=True (testing/reference, with device="cpu"): batches made by the CUDA
                  batch backend's decomposition run on the CPU (host memory, numpy; exact but
                  slow), so the batch mode's Python side runs without a GPU.

    Iterating yields l3.Batch objects for one epoch; iterating again after the epoch
    ended continues with the next epoch (or call set_epoch()). The GIL is released
    while waiting for and copying a batch.
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
