#!/usr/bin/env python3
"""Training-loader benchmark: l3 against FFCV, MosaicML MDS, WebDataset, LitData, DALI and
ImageFolder on the same ImageNet-size lossless photos, the same transforms and worker count.

Dataset (`make`): COUNT (2,000) lossless RGB photos of 400-600 x 300-500 pixels made from the
corpus's JPEG-sourced photos (the 13 lomiri wallpapers that bench/make_corpus.py's jpeg_photos
class uses, decoded by Pillow): image i takes photo i % 13, a seeded crop of s x its size
(s ~ U(1, 2.5)) and a box-filtered shrink to its size, so every image is a different photo-like
view. Deterministic (seed 14; Pillow's decoder and resize). Labels: 10 classes, i % 10. Written as
an ImageFolder of PNG files (work/imagefolder/cNN/img_NNNNN.png) and packed for:

  l3              l3.convert (the .l3i codec)                  l3.Loader, l3.torch + DataLoader
  l3_fast         l3.convert(entropy="off"): Rice codes only   l3.Loader (l3_loader_fast)
  l3_t64          l3.convert(tile_width=64): narrower tiles,   l3.Loader (l3_loader_t64)
                  random crops decode less of each image
  l3_t64_fast     both of the above                            l3.Loader (l3_loader_t64_fast)
  ffcv_raw        FFCV RGBImageField(write_mode="raw")         RandomResizedCropRGBImageDecoder
  mds_png/mds_raw MosaicML MDS, PNG bytes and "pil" (raw) cols  StreamingDataset + DataLoader
  wds             WebDataset tar shards of the PNG files       WebDataset + DataLoader
  litdata         LitData chunks of the PNG files' bytes       StreamingDataset + StreamingDataLoader
  imagefolder     the PNG files                                torchvision ImageFolder + DataLoader,
                                                               DALI's CPU pipeline (readers.file)

`verify` checks, before any timing, that every packed copy holds the same records (SHA-256 of
the decoded HWC uint8 pixels) with the same labels as the ImageFolder (as a multiset: the
formats keep their own order).

`run`: transforms RandomResizedCrop(224, scale (0.08, 1), ratio (3/4, 4/3)) + horizontal flip
(p 0.5) + normalise (ImageNet mean/std) to float32 N x 3 x 224 x 224, batches of 64, 2 workers
(DataLoader processes, or the peer's own threads where it has no DataLoader: l3.Loader, FFCV,
DALI; l3.torch is measured both ways: DataLoader(num_workers=0) over the loader's 2 threads, and
DataLoader(num_workers=2) with one loader thread per process). Each trial is a fresh process: one warm-up epoch (JIT, page cache), then EPOCHS timed
epochs. Peers are interleaved in rounds (the order rotates each round); the report gives the
median and range over rounds of images/s and of images per CPU-second (CPU time of the peer's
process tree: user + system of the process, its live workers and reaped children), the bytes on
disk of each packed copy and the load average. A peer that is not installed is reported with
the import error.

Usage (from the repository root; the venv from bench/install_loader_peers.sh, l3 importable):
  loader_peers.py make   [--work bench/work/loaders] [--count 2000]
  loader_peers.py verify [--work ...]
  loader_peers.py run    [--work ...] [--rounds 3] [--epochs 2] [--peers a,b] [--out FILE.md]
  loader_peers.py one PEER [--work ...] [--epochs 2]      (one trial; prints one JSON line)
"""
import argparse
import hashlib
import io
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections import Counter

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BACKGROUNDS = "/usr/share/backgrounds"
CLASSES = 10
SIZE = 224
BATCH = 64
WORKERS = 2
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
SEED = 14

PEERS = ["l3_loader", "l3_loader_nocopy", "l3_loader_fast", "l3_loader_t64", "l3_loader_t64_fast", "l3_torch", "l3_torch_w2", "ffcv_raw", "mds_raw", "mds_png", "wds", "litdata", "dali_cpu", "imagefolder"]
LABELS = {
    "l3_loader": "l3.Loader (C++ threads)",
    "l3_loader_nocopy": "l3.Loader (C++ threads), copy=False (borrowed: the ring's buffers stay in the ring, as FFCV hands out its own)",
    "l3_loader_fast": "l3.Loader (C++ threads), shards packed with entropy=\"off\" (Rice codes only)",
    "l3_loader_t64": "l3.Loader (C++ threads), shards packed with tile_width=64",
    "l3_loader_t64_fast": "l3.Loader (C++ threads), shards packed with tile_width=64, entropy=\"off\"",
    "l3_torch": "l3.torch.IterableDataset + DataLoader(num_workers=0), 2 loader threads",
    "l3_torch_w2": "l3.torch.IterableDataset + DataLoader(num_workers=2), 1 thread each",
    "ffcv_raw": "FFCV, raw pixels (RandomResizedCropRGBImageDecoder)",
    "mds_raw": "MosaicML MDS, raw pixels",
    "mds_png": "MosaicML MDS (PNG)",
    "wds": "WebDataset (PNG)",
    "litdata": "LitData (PNG)",
    "dali_cpu": "NVIDIA DALI, CPU pipeline (PNG)",
    "imagefolder": "torchvision ImageFolder + PIL + DataLoader",
}
# The packed copy each peer reads (bytes on disk).
STORE = {"l3_loader": "l3", "l3_loader_nocopy": "l3", "l3_loader_fast": "l3_fast", "l3_loader_t64": "l3_t64", "l3_loader_t64_fast": "l3_t64_fast",
         "l3_torch": "l3", "l3_torch_w2": "l3", "ffcv_raw": "ffcv", "mds_raw": "mds_raw", "mds_png": "mds_png",
         "wds": "wds", "litdata": "litdata", "dali_cpu": "imagefolder", "imagefolder": "imagefolder"}


def jpeg_photo_files():
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    try:
        from make_corpus import JPEG_PHOTOS  # the corpus's jpeg_photos sources
    finally:
        sys.path.pop(0)
    return [os.path.join(BACKGROUNDS, JPEG_PHOTOS[k]) for k in sorted(JPEG_PHOTOS)]


def image_plan(count):
    """(photo index, crop box, output size) per image, from one seeded generator."""
    rng = np.random.default_rng(SEED)
    plan = []
    for i in range(count):
        w, h = int(rng.integers(400, 601)), int(rng.integers(300, 501))
        s = float(rng.uniform(1.0, 2.5))
        fx, fy = float(rng.uniform()), float(rng.uniform())
        plan.append((i % 13, w, h, s, fx, fy))
    return plan


_PHOTOS = {}  # decoded source photos of this worker process


def _make_one(args):
    from PIL import Image
    i, (photo, w, h, s, fx, fy), path, src = args
    if src not in _PHOTOS:
        with Image.open(src) as im:
            _PHOTOS[src] = im.convert("RGB")
    im = _PHOTOS[src]
    cw, ch = min(im.width, round(w * s)), min(im.height, round(h * s))
    x, y = int(fx * (im.width - cw)), int(fy * (im.height - ch))
    im.crop((x, y, x + cw, y + ch)).resize((w, h), Image.Resampling.BOX).save(path, format="PNG")
    return i


def records(work):
    """[(key, path, label)] of the ImageFolder, in ImageFolder's order."""
    root = os.path.join(work, "imagefolder")
    out = []
    for c in sorted(os.listdir(root)):
        for f in sorted(os.listdir(os.path.join(root, c))):
            out.append((os.path.splitext(f)[0], os.path.join(root, c, f), int(c[1:])))
    return out


def pixels_hash(a):
    a = np.ascontiguousarray(a, dtype=np.uint8)
    return hashlib.sha256(a.tobytes() + repr(a.shape).encode()).hexdigest()


def png_array(path_or_bytes):
    from PIL import Image
    src = path_or_bytes if isinstance(path_or_bytes, str) else io.BytesIO(bytes(path_or_bytes))
    with Image.open(src) as im:
        return np.asarray(im.convert("RGB"))


def dir_bytes(path):
    total = 0
    for d, _, files in os.walk(path):
        for f in files:
            total += os.path.getsize(os.path.join(d, f))
    return total


# ---- packing ---------------------------------------------------------------------------

def make(a):
    from multiprocessing import Pool
    work = a.work
    folder = os.path.join(work, "imagefolder")
    files = jpeg_photo_files()
    if not os.path.isdir(folder) or len(records(work)) != a.count:
        shutil.rmtree(folder, ignore_errors=True)
        for c in range(CLASSES):
            os.makedirs(os.path.join(folder, f"c{c:02d}"))
        jobs = [(i, p, os.path.join(folder, f"c{i % CLASSES:02d}", f"img_{i:05d}.png"), files[p[0]])
                for i, p in enumerate(image_plan(a.count))]
        with Pool(2) as pool:
            for _ in pool.imap_unordered(_make_one, jobs, chunksize=16):
                pass
    recs = records(work)
    for name, fn in PACKERS.items():
        if a.packs and name not in a.packs.split(","):
            continue
        out = os.path.join(work, name)
        if os.path.exists(os.path.join(out, ".done")):
            continue
        shutil.rmtree(out, ignore_errors=True)
        t0 = time.perf_counter()
        try:
            fn(recs, out)
        except ImportError as e:
            print(f"{name}: not packed ({type(e).__name__}: {e})", flush=True)
            shutil.rmtree(out, ignore_errors=True)
            continue
        open(os.path.join(out, ".done"), "w").close()
        print(f"{name}: packed in {time.perf_counter() - t0:.1f} s, {dir_bytes(out) / 1e6:.1f} MB", flush=True)


def pack_l3(recs, out, entropy="auto", tile_width=0):
    import l3
    l3.convert(os.path.join(os.path.dirname(out), "imagefolder"), out, threads=2, entropy=entropy,
               tile_width=tile_width)


def pack_ffcv(recs, out):
    from ffcv.fields import IntField, RGBImageField
    from ffcv.writer import DatasetWriter

    class Folder:
        def __len__(self):
            return len(recs)

        def __getitem__(self, i):
            return png_array(recs[i][1]), recs[i][2]

    os.makedirs(out)
    w = DatasetWriter(os.path.join(out, "data.beton"),
                      {"image": RGBImageField(write_mode="raw"), "label": IntField()}, num_workers=2)
    w.from_indexed_dataset(Folder())


def _pack_mds(recs, out, raw):
    """raw: the "pil" column (mode, size and raw pixels); else the PNG files' bytes as they are
    (a "bytes" column, decoded by PIL in the dataset: MDS's "png" column would re-encode them)."""
    from PIL import Image
    from streaming import MDSWriter
    with MDSWriter(out=out, columns={"image": "pil" if raw else "bytes", "label": "int"}, size_limit=1 << 26) as w:
        for _, path, label in recs:
            if raw:
                with Image.open(path) as im:
                    w.write({"image": im.convert("RGB"), "label": label})
            else:
                with open(path, "rb") as f:
                    w.write({"image": f.read(), "label": label})


def pack_mds_png(recs, out):
    _pack_mds(recs, out, False)


def pack_mds_raw(recs, out):
    _pack_mds(recs, out, True)


def pack_wds(recs, out):
    import webdataset as wds
    os.makedirs(out)
    with wds.ShardWriter(os.path.join(out, "shard-%04d.tar"), maxsize=1 << 26, verbose=0) as w:
        for key, path, label in recs:
            with open(path, "rb") as f:
                w.write({"__key__": key, "png": f.read(), "cls": label})


def _litdata_item(rec):
    with open(rec[1], "rb") as f:
        return {"png": f.read(), "label": rec[2]}


def pack_litdata(recs, out):
    import litdata
    litdata.optimize(fn=_litdata_item, inputs=recs, output_dir=out, chunk_bytes="64MB", num_workers=1,
                     mode="overwrite")


PACKERS = {"l3": pack_l3, "l3_fast": lambda recs, out: pack_l3(recs, out, entropy="off"),
           "l3_t64": lambda recs, out: pack_l3(recs, out, tile_width=64),
           "l3_t64_fast": lambda recs, out: pack_l3(recs, out, entropy="off", tile_width=64), "ffcv": pack_ffcv, "mds_png": pack_mds_png, "mds_raw": pack_mds_raw, "wds": pack_wds,
           "litdata": pack_litdata}


# ---- verification: identical records and labels ------------------------------------------

def expected(work):
    return Counter((pixels_hash(png_array(p)), label) for _, p, label in records(work))


def stored_l3(work, name="l3"):
    import l3
    ds = l3.Dataset(os.path.join(work, name), channels=3)
    for i in range(len(ds)):
        img, label = ds[i]
        yield pixels_hash(img), int(label)


def stored_ffcv(work):
    from ffcv.fields.rgb_image import IMAGE_MODES
    from ffcv.reader import Reader
    path = os.path.join(work, "ffcv", "data.beton")
    r = Reader(path)
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    for m in r.metadata:
        img = m["f0"]  # RGBImageField: mode, width, height, data_ptr
        if int(img["mode"]) != IMAGE_MODES["raw"]:
            raise ValueError("ffcv image not stored raw")
        w, h, ptr = int(img["width"]), int(img["height"]), int(img["data_ptr"])
        yield pixels_hash(raw[ptr:ptr + w * h * 3].reshape(h, w, 3)), int(m["f1"])  # IntField: the value


def _mds_image(v):
    """An MDS sample's image: PNG bytes (mds_png) or a PIL image (mds_raw) -> RGB array."""
    return png_array(v) if isinstance(v, bytes) else np.asarray(v.convert("RGB"))


def _stored_mds(work, name):
    from streaming import StreamingDataset
    ds = StreamingDataset(local=os.path.join(work, name), shuffle=False, batch_size=1)
    for i in range(ds.num_samples):
        s = ds.get_item(i)
        yield pixels_hash(_mds_image(s["image"])), int(s["label"])


def stored_wds(work):
    import webdataset as wds
    urls = sorted(os.path.join(work, "wds", f) for f in os.listdir(os.path.join(work, "wds")) if f.endswith(".tar"))
    for s in wds.WebDataset(urls, shardshuffle=False, empty_check=False):
        yield pixels_hash(png_array(s["png"])), int(s["cls"])


def stored_litdata(work):
    from litdata import StreamingDataset
    ds = StreamingDataset(os.path.join(work, "litdata"))
    for i in range(len(ds)):
        s = ds[i]
        yield pixels_hash(png_array(s["png"])), int(s["label"])


STORED = {"l3": stored_l3, "l3_fast": lambda w: stored_l3(w, "l3_fast"), "l3_t64": lambda w: stored_l3(w, "l3_t64"),
          "l3_t64_fast": lambda w: stored_l3(w, "l3_t64_fast"), "ffcv": stored_ffcv, "mds_png": lambda w: _stored_mds(w, "mds_png"),
          "mds_raw": lambda w: _stored_mds(w, "mds_raw"), "wds": stored_wds, "litdata": stored_litdata}


def verify(a):
    want = expected(a.work)
    ok = True
    for name, fn in STORED.items():
        if not os.path.exists(os.path.join(a.work, name, ".done")):
            print(f"{name}: not packed")
            continue
        try:
            got = Counter(fn(a.work))
        except ImportError as e:
            print(f"{name}: cannot read ({type(e).__name__}: {e})")
            continue
        same = got == want
        ok &= same
        print(f"{name}: {sum(got.values())} records, {'identical' if same else 'DIFFERENT'} records and labels")
    with open(os.path.join(a.work, "verified.json"), "w") as f:
        json.dump({"ok": ok, "records": sum(want.values())}, f)
    return 0 if ok else 1


# ---- one timed trial ------------------------------------------------------------------

def tree_cpu_seconds(pid=None):
    """user + system CPU of `pid`'s process tree (live processes, plus the children each has reaped)."""
    pid = pid or os.getpid()
    tick = os.sysconf("SC_CLK_TCK")
    parent, cpu = {}, {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(d)] = int(fields[1])
        cpu[int(d)] = sum(int(v) for v in fields[11:15])  # utime stime cutime cstime
    total, stack = 0, [pid]
    while stack:
        p = stack.pop()
        total += cpu.get(p, 0)
        stack.extend(c for c, pp in parent.items() if pp == p)
    return total / tick


def torch_transform():
    from torchvision import transforms as T
    return T.Compose([T.RandomResizedCrop(SIZE), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)])


def epochs_of(make_iter, epochs, check, records):
    """Runs one warm-up epoch and `epochs` timed ones; returns images, seconds, CPU seconds.
    Images count at most `records` per epoch: a loader that pads its last batch (l3's
    drop_last=False wraps around) is not credited for the padding."""
    for batch in make_iter():
        check(batch)
    images, c0, t0 = 0, tree_cpu_seconds(), time.perf_counter()
    for _ in range(epochs):
        n = 0
        for batch in make_iter():
            n += check(batch)
        images += min(n, records)
    return images, time.perf_counter() - t0, tree_cpu_seconds() - c0


def check_torch(batch):
    x = batch[0]
    assert tuple(x.shape[1:]) == (3, SIZE, SIZE) and str(x.dtype) == "torch.float32", (x.shape, x.dtype)
    return int(x.shape[0])


def dataloader(ds, **kw):
    from torch.utils.data import DataLoader
    return DataLoader(ds, batch_size=BATCH, num_workers=WORKERS, persistent_workers=True, **kw)


def run_l3_loader(work, epochs, store="l3", copy=None):
    import l3
    loader = l3.Loader(os.path.join(work, store), BATCH, workers=WORKERS, size=SIZE, dtype="float32", layout="chw",
                       copy=copy)

    def check(b):
        assert b.data.shape[1:] == (3, SIZE, SIZE) and b.data.dtype == np.float32
        return int(b.data.shape[0])
    return epochs_of(lambda: loader, epochs, check, len(records(work)))


def run_l3_torch(work, epochs, num_workers=0):
    """num_workers=0: the loader's own threads (WORKERS) in the training process, batches
    handed over without a copy (DLPack); num_workers=WORKERS: DataLoader processes with one
    loader thread each, float32 batches through DataLoader's shared-memory queue."""
    import l3.torch
    from torch.utils.data import DataLoader
    ds = l3.torch.IterableDataset(os.path.join(work, "l3"), BATCH, size=SIZE, num_workers=num_workers,
                                  workers=WORKERS if num_workers == 0 else 1)
    dl = DataLoader(ds, batch_size=None, num_workers=num_workers, persistent_workers=num_workers > 0)
    ep = [0]

    def it():
        ds.set_epoch(ep[0])
        ep[0] += 1
        return dl
    return epochs_of(it, epochs, check_torch, len(records(work)))


def run_imagefolder(work, epochs):
    from torchvision import datasets
    dl = dataloader(datasets.ImageFolder(os.path.join(work, "imagefolder"), transform=torch_transform()), shuffle=True)
    return epochs_of(lambda: dl, epochs, check_torch, len(records(work)))


class _MDS:
    def __init__(self, work, name):
        from streaming import StreamingDataset
        import torch.utils.data as tud

        class DS(StreamingDataset):
            def __init__(self, tf, **kw):
                super().__init__(**kw)
                self.tf = tf

            def __getitem__(self, i):
                s = super().__getitem__(i)
                v = s["image"]
                if isinstance(v, bytes):  # mds_png: the PNG file's bytes
                    from PIL import Image
                    with Image.open(io.BytesIO(v)) as im:
                        return self.tf(im.convert("RGB")), s["label"]
                return self.tf(v.convert("RGB")), s["label"]
        self.ds = DS(torch_transform(), local=os.path.join(work, name), shuffle=True, batch_size=BATCH,
                     shuffle_seed=SEED)
        self.tud = tud


def run_mds(work, epochs, name):
    m = _MDS(work, name)
    from streaming import StreamingDataLoader
    dl = StreamingDataLoader(m.ds, batch_size=BATCH, num_workers=WORKERS, persistent_workers=True)
    return epochs_of(lambda: dl, epochs, check_torch, len(records(work)))


def run_wds(work, epochs):
    import webdataset as wds
    from PIL import Image
    folder = os.path.join(work, "wds")
    urls = sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".tar"))
    tf = torch_transform()

    def sample(s):
        with Image.open(io.BytesIO(s["png"])) as im:
            return tf(im.convert("RGB")), int(s["cls"])
    # Shards are split over the workers (one shard each at least); the samples are shuffled
    # in a buffer, as WebDataset training pipelines do.
    ds = wds.WebDataset(urls, shardshuffle=len(urls), nodesplitter=None, empty_check=False).shuffle(500).map(sample)
    dl = dataloader(ds)
    return epochs_of(lambda: dl, epochs, check_torch, len(records(work)))


def run_litdata(work, epochs):
    import litdata
    from PIL import Image
    tf = torch_transform()

    class DS(litdata.StreamingDataset):
        def __getitem__(self, i):
            s = super().__getitem__(i)
            with Image.open(io.BytesIO(s["png"])) as im:
                return tf(im.convert("RGB")), int(s["label"])
    ds = DS(os.path.join(work, "litdata"), shuffle=True, seed=SEED)
    dl = litdata.StreamingDataLoader(ds, batch_size=BATCH, num_workers=WORKERS, persistent_workers=True)
    return epochs_of(lambda: dl, epochs, check_torch, len(records(work)))


def run_ffcv(work, epochs):
    from ffcv.fields.decoders import IntDecoder, RandomResizedCropRGBImageDecoder
    from ffcv.loader import Loader, OrderOption
    from ffcv.transforms import NormalizeImage, RandomHorizontalFlip, Squeeze, ToTensor, ToTorchImage
    mean = np.array(MEAN) * 255
    std = np.array(STD) * 255
    pipelines = {
        "image": [RandomResizedCropRGBImageDecoder((SIZE, SIZE)), RandomHorizontalFlip(),
                  NormalizeImage(mean, std, np.float32), ToTensor(), ToTorchImage()],
        "label": [IntDecoder(), ToTensor(), Squeeze()],
    }
    loader = Loader(os.path.join(work, "ffcv", "data.beton"), batch_size=BATCH, num_workers=WORKERS,
                    order=OrderOption.RANDOM, os_cache=True, drop_last=False, pipelines=pipelines, seed=SEED)
    return epochs_of(lambda: loader, epochs, check_torch, len(records(work)))


def run_dali(work, epochs):
    from nvidia.dali import fn, pipeline_def, types
    folder = os.path.join(work, "imagefolder")
    n = len(records(work))

    @pipeline_def(batch_size=BATCH, num_threads=WORKERS, device_id=None, seed=SEED, prefetch_queue_depth=2)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=folder, random_shuffle=True, name="reader")
        images = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
        images = fn.random_resized_crop(images, size=(SIZE, SIZE))
        images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW",
                                          mean=[m * 255 for m in MEAN], std=[s * 255 for s in STD],
                                          mirror=fn.random.coin_flip(probability=0.5))
        return images, labels
    p = pipe()
    p.build()
    batches = -(-n // BATCH)

    def it():
        for _ in range(batches):
            images, labels = p.run()
            yield np.asarray(images.as_tensor()), labels

    def check(b):
        assert b[0].shape[1:] == (3, SIZE, SIZE) and b[0].dtype == np.float32
        return int(b[0].shape[0])
    return epochs_of(it, epochs, check, len(records(work)))


RUNNERS = {"l3_loader": run_l3_loader, "l3_loader_nocopy": lambda w, e: run_l3_loader(w, e, copy=False),
           "l3_loader_fast": lambda w, e: run_l3_loader(w, e, "l3_fast"),
           "l3_loader_t64": lambda w, e: run_l3_loader(w, e, "l3_t64"),
           "l3_loader_t64_fast": lambda w, e: run_l3_loader(w, e, "l3_t64_fast"), "l3_torch": run_l3_torch,
           "l3_torch_w2": lambda w, e: run_l3_torch(w, e, WORKERS), "ffcv_raw": run_ffcv,
           "mds_raw": lambda w, e: run_mds(w, e, "mds_raw"), "mds_png": lambda w, e: run_mds(w, e, "mds_png"),
           "wds": run_wds, "litdata": run_litdata, "dali_cpu": run_dali, "imagefolder": run_imagefolder}


def one(a):
    import torch
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    images, secs, cpu = RUNNERS[a.peer](a.work, a.epochs)
    print(json.dumps({"peer": a.peer, "images": images, "seconds": round(secs, 4), "cpu_seconds": round(cpu, 4),
                      "images_per_second": round(images / secs, 2),
                      "images_per_cpu_second": round(images / cpu, 2) if cpu > 0 else None}), flush=True)
    os._exit(0)  # skip slow teardown of worker pools (not timed either way)


# ---- interleaved rounds and the report --------------------------------------------------

def trial(a, peer):
    cmd = [sys.executable, os.path.abspath(__file__), "one", peer, "--work", a.work, "--epochs", str(a.epochs)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line), None
    err = (p.stderr.strip().splitlines() or ["no output"])[-1]
    return None, f"exit {p.returncode}: {err}"


def run(a):
    verified = os.path.join(a.work, "verified.json")
    if not os.path.exists(verified) or not json.load(open(verified))["ok"]:
        print("run `loader_peers.py verify` first (records and labels must be identical)", file=sys.stderr)
        return 1
    peers = a.peers.split(",") if a.peers else PEERS
    results = {p: [] for p in peers}
    failed = {}
    loads = [os.getloadavg()[0]]
    for r in range(a.rounds):
        order = peers[r % len(peers):] + peers[:r % len(peers)]
        for peer in order:
            if peer in failed:
                continue
            res, err = trial(a, peer)
            if res is None:
                failed[peer] = err
                print(f"round {r + 1} {peer}: FAILED {err}", flush=True)
                continue
            results[peer].append(res)
            loads.append(os.getloadavg()[0])
            print(f"round {r + 1} {peer}: {res['images_per_second']} images/s, "
                  f"{res['images_per_cpu_second']} images/CPU-s (load {loads[-1]:.2f})", flush=True)
        if a.out:  # the rounds so far (a long run stopped early keeps them)
            with open(a.out, "w") as f:
                f.write(render(a, peers, results, failed, loads, rounds_done=r + 1))
    report = render(a, peers, results, failed, loads)
    print(report)
    if a.out:
        with open(a.out, "w") as f:
            f.write(report)
    return 0


def med_range(v):
    return statistics.median(v), min(v), max(v)


def render(a, peers, results, failed, loads, rounds_done=None):
    host = socket.gethostname()
    ffcv = results.get("ffcv_raw") or []
    l3l = results.get("l3_loader") or []
    lines = [f"# Training loaders on {host}", "",
             f"`{' '.join(sys.argv)}`", "",
             f"{len(records(a.work))} lossless photos 400-600 x 300-500 (loader_peers.py make), "
             f"RandomResizedCrop {SIZE} + flip + normalise to float32 NCHW, batches of {BATCH}, {WORKERS} workers, "
             f"{a.rounds if rounds_done is None else f'{rounds_done} of {a.rounds}'} interleaved rounds of 1 warm-up + "
             f"{a.epochs} timed epochs per trial, data in the page cache. "
             f"{os.cpu_count()} CPUs; load average (1 min) during the run: median {statistics.median(loads):.2f}, "
             f"{min(loads):.2f}-{max(loads):.2f} (the machine is shared: compare ratios within this run).", "",
             "| loader | bytes on disk | images/s (median, range) | images per CPU-second (median, range) |"
             " vs FFCV images/s | vs l3.Loader images/s | vs FFCV images per CPU-second |",
             "|---|--:|--:|--:|--:|--:|--:|"]
    by_round = {}
    for p in peers:
        rs = results.get(p) or []
        size = dir_bytes(os.path.join(a.work, STORE[p]))
        if not rs:
            lines.append(f"| {LABELS[p]} | {size / 1e6:.0f} MB | not run: {failed.get(p, 'no result')} | | | | |")
            continue
        ips = [r["images_per_second"] for r in rs]
        cps = [r["images_per_cpu_second"] for r in rs]
        by_round[p] = ips
        m, lo, hi = med_range(ips)
        cm, clo, chi = med_range(cps)

        def ratio(ref, key="images_per_second"):
            if not ref or len(ref) != len(rs):
                return ""
            rr = [x[key] / y[key] for x, y in zip(rs, ref)]
            return f"{statistics.median(rr):.2f}x ({min(rr):.2f}-{max(rr):.2f})"
        lines.append(f"| {LABELS[p]} | {size / 1e6:.0f} MB | {m:.0f} ({lo:.0f}-{hi:.0f}) | {cm:.0f} ({clo:.0f}-{chi:.0f}) | "
                     f"{ratio(ffcv)} | {ratio(l3l)} | {ratio(ffcv, 'images_per_cpu_second')} |")
    lines += ["", "Ratios are medians of the per-round ratios (each round runs every loader once, back to back). "
              "Images per CPU-second is the steadier figure on a loaded machine: every loader here runs with "
              f"{WORKERS} workers, so images/s tracks it when the machine is idle.",
              "Bytes on disk: the packed copy each loader reads (DALI and ImageFolder read the PNG files)."]
    if ffcv and l3l:
        fsize = dir_bytes(os.path.join(a.work, "ffcv"))
        lsize = dir_bytes(os.path.join(a.work, "l3"))
        lines.append(f"l3 bytes / FFCV bytes: {lsize / fsize:.3f}.")
    lines.append("")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("make", "verify", "run", "one"):
        s = sub.add_parser(name)
        s.add_argument("--work", default=os.path.join(ROOT, "bench", "work", "loaders"))
        if name == "make":
            s.add_argument("--count", type=int, default=2000)
            s.add_argument("--packs", default="", help="comma-separated packed copies to make (default: all)")
        if name == "one":
            s.add_argument("peer", choices=PEERS)
        if name in ("run", "one"):
            s.add_argument("--epochs", type=int, default=2)
        if name == "run":
            s.add_argument("--rounds", type=int, default=3)
            s.add_argument("--peers", default="")
            s.add_argument("--out", default="")
            s.add_argument("--timeout", type=int, default=900)
    a = p.parse_args()
    a.work = os.path.abspath(a.work)
    return {"make": make, "verify": verify, "run": run, "one": one}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main() or 0)
