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


def encode(array: Any, tile_width: int = 0, tile_height: int = 0, effort: int = 1, threads: int = 1,
           entropy: str = "auto") -> bytes:
    """Encodes a uint8 image, (H, W) or (H, W, C) with C in 1..4, to .l3i bytes.

    tile_width: 0 (default) or a power of two 16..256; tile_height: 0 (32, or fitted to an
    image whose rows repeat) or 1..32;
    effort: 0 fixed transform/predictor, 1 chosen per tile, 2 smallest of every transform
    (slower, denser); threads: 0 = all cores. entropy: "auto" (rANS tiles where they save
    at least 7% of a tile's bytes and 0.06 bytes a pixel), "off" (Rice codes only: the fastest CPU decode, about
    7% larger), "max" (rANS wherever smaller) or a percentage "0".."100" (l3pack --entropy).
    The output does not depend on `threads`.
    """
    return _l3.encode(_image_array(array), tile_width, tile_height, effort, threads, str(entropy))


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
                 threads: int = 1, entropy: str = "auto"):
        self._path = os.fspath(path)
        self._w = _l3._ShardWriter(self._path)
        self._enc = dict(tile_width=tile_width, tile_height=tile_height, effort=effort, threads=threads,
                         entropy=str(entropy))
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
                 tile_width: int = 0, tile_height: int = 0, effort: int = 1, threads: int = 1,
                 entropy: str = "auto"):
        self._dir = os.fspath(directory)
        os.makedirs(self._dir, exist_ok=True)
        if os.path.exists(os.path.join(self._dir, "manifest.json")):
            raise FileExistsError(f"{self._dir} already holds a committed dataset (manifest.json)")
        self._classes = [str(c) for c in classes]
        self._shard_size = int(shard_size)
        self._enc = dict(tile_width=tile_width, tile_height=tile_height, effort=effort, threads=threads,
                         entropy=str(entropy))
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
            ray_address: Optional[str] = None, max_retries: int = 3, effort: int = 1, entropy: str = "auto",
            tile_width: int = 0, tile_height: int = 0) -> dict:
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
    127.0.0.1; threads is then per task. effort, entropy, tile_width and tile_height are the
    codec's (see encode(): entropy="off" gives the fastest decode, "max" the smallest shards;
    tile_width=64 makes random crops decode less of each image, for some 2-5% more bytes:
    bench/results/loaders-vm.md)."""
    options = dict(shard_size=shard_size, threads=threads, strict=strict, shuffle_seed=shuffle_seed,
                   max_pixels=max_pixels, layout=layout, base=base, allow_empty=allow_empty,
                   convert_16bit=convert_16bit, strict_jpeg=strict_jpeg, effort=effort, entropy=entropy,
                   tile_width=tile_width, tile_height=tile_height)
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
                       bool(strict_jpeg), index, count, bool(shared_output), int(effort), str(entropy),
                       int(tile_width), int(tile_height))


def commit_parts(out: PathLike) -> int:
    """`l3pack merge --in-place OUT`: commits the dataset that part=(i, n), shared_output=True
    conversions wrote into OUT (a folder or s3://): checks the n part manifests and that
    every shard they list is there with its size, joins the skip lists, writes
    manifest.json. Reads and moves no shard. Returns the record count."""
    return int(_l3.commit_parts(os.fspath(out)))


from .loader import Batch, DeviceArray, Loader  # noqa: E402  (the streaming loader; python/l3/loader.py)
