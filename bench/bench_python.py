#!/usr/bin/env python3
"""Python loader throughput, in one run, against
  1. the C++ reader on the same configuration, driven by a C++ loop inside the
     extension (l3._l3._drain: no Python per batch) -- the bindings' overhead;
  2. the PNG + PIL DataLoader pipeline (torchvision ImageFolder of the same
     PNG files, RandomResizedCrop + flip + ToTensor + Normalize).

All pipelines: RandomResizedCrop to --crop (scale 0.08-1, ratio 3/4-4/3,
bilinear antialiased), horizontal flip p=0.5, ImageNet normalisation,
float32 CHW batches of --batch, --workers threads / processes. The pipelines
run in turns, --rounds times; the medians are compared.

Before timing, one batch of the Python loader (uint8, centre crop without
scaling, no flip) is checked against the images decoded with l3.load_image.

    python bench/bench_python.py [--corpus bench/corpus/photos] [--batch 16] [--workers 2]
        [--epochs 8] [--rounds 3] [--out bench/results/python-cpu.md]
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

import l3
from l3 import _l3

REPO = pathlib.Path(__file__).resolve().parents[1]


def class_of(name):
    return name.split("_", 1)[0] if "_" in name else "none"


def build_inputs(corpus, work):
    files = sorted(p for p in corpus.iterdir() if p.suffix.lower() == ".png")
    if not files:
        sys.exit(f"no PNG files in {corpus}")
    classes = sorted({class_of(p.name) for p in files})
    ds_dir = work / "python-l3"
    folder = work / "python-imagefolder"
    stamp = work / "python-inputs.json"
    want = {"files": [p.name for p in files], "sizes": [p.stat().st_size for p in files], "l3": l3.__version__}
    if not (stamp.exists() and json.loads(stamp.read_text()) == want and (ds_dir / "manifest.json").exists()):
        import shutil
        shutil.rmtree(ds_dir, ignore_errors=True)
        shutil.rmtree(folder, ignore_errors=True)
        with l3.DatasetWriter(ds_dir, classes=classes) as w:
            for p in files:
                w.add(p, label=classes.index(class_of(p.name)), key=p.name)
        for p in files:
            (folder / class_of(p.name)).mkdir(parents=True, exist_ok=True)
            os.symlink(p.resolve(), folder / class_of(p.name) / p.name)
        stamp.write_text(json.dumps(want))
    return ds_dir, folder, files


def verify(ds_dir, files, crop):
    with l3.Loader(ds_dir, batch_size=len(files), size=crop, crop="center", center_fraction=0, flip=0.0,
                   dtype="uint8", layout="hwc", shuffle=False, workers=2) as ld:
        b = ld.next()
        for k, r in enumerate(b.records.tolist()):
            img = l3.load_image(files[r])
            if img.shape[2] == 1:
                img = np.repeat(img, 3, axis=2)
            img = img[:, :, :3]
            h, w = img.shape[:2]
            y, x = (h - min(h, crop)) // 2, (w - min(w, crop)) // 2
            if h >= crop and w >= crop:
                assert np.array_equal(b.data[k], img[y:y + crop, x:x + crop]), f"mismatch on {files[r]}"


def loader_kwargs(a, copy=True):
    return dict(size=a.crop, workers=a.workers, seed=1, copy=copy)


def run_cpp(ds_dir, a):
    ld = l3.Loader(ds_dir, a.batch, **loader_kwargs(a))
    options, setup = ld._options, ld._setup
    ld.close()
    r = _l3._drain(str(ds_dir), options, setup, a.epochs, a.warmup)
    m = json.loads(r["metrics_json"])
    return r["images"], r["seconds"], m["bottleneck"]


def run_python(ds_dir, a, copy):
    sink = 0.0
    with l3.Loader(ds_dir, a.batch, **loader_kwargs(a, copy)) as ld:
        for _ in range(a.warmup):
            for b in ld:
                sink += float(b.data[0, 0, 0, 0])
        ld.reset_stats()
        images = 0
        t0 = time.perf_counter()
        for _ in range(a.epochs):
            for b in ld:
                sink += float(b.data[0, 0, 0, 0])
                images += len(b)
        secs = time.perf_counter() - t0
        return images, secs, ld.stats()["bottleneck"]


def run_torch(folder, a):
    peer = REPO / "bench" / "bench_reader_torch.py"  # the reader benchmark's PyTorch peer
    out = subprocess.run([sys.executable, str(peer), str(folder), "--batch", str(a.batch), "--workers",
                          str(a.workers), "--epochs", str(a.epochs), "--warmup", str(a.warmup), "--crop",
                          str(a.crop)], check=True, capture_output=True, text=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    return r["images"], r["seconds"], "-"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", type=pathlib.Path, default=REPO / "bench" / "corpus" / "photos")
    p.add_argument("--work", type=pathlib.Path, default=REPO / "bench" / "work")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--crop", type=int, default=224)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--no-torch", action="store_true", help="skip the PNG + PIL DataLoader peer")
    p.add_argument("--out", type=pathlib.Path, default=None, help="write a Markdown report here")
    a = p.parse_args()

    a.work.mkdir(parents=True, exist_ok=True)
    ds_dir, folder, files = build_inputs(a.corpus, a.work)
    verify(ds_dir, files, a.crop)
    print(f"dataset: {len(files)} images from {a.corpus}; output verified", flush=True)

    pipelines = [("C++ reader (C++ loop)", lambda: run_cpp(ds_dir, a)),
                 ("l3.Loader (Python, copy=True)", lambda: run_python(ds_dir, a, True)),
                 ("l3.Loader (Python, copy=False)", lambda: run_python(ds_dir, a, False))]
    if not a.no_torch:
        pipelines.append(("PNG + PIL DataLoader (torchvision)", lambda: run_torch(folder, a)))
    rows = []
    for rnd in range(1, a.rounds + 1):
        for name, fn in pipelines:
            images, secs, bound = fn()
            rows.append((rnd, name, images, secs, images / secs, bound))
            print(f"round {rnd}: {name}: {images} images in {secs:.2f} s = {images / secs:.1f} images/s "
                  f"(bound by {bound})", flush=True)
    med = {name: statistics.median(r[4] for r in rows if r[1] == name) for name, _ in pipelines}
    cpp = med["C++ reader (C++ loop)"]
    py = med["l3.Loader (Python, copy=True)"]
    print(f"median images/s: " + ", ".join(f"{k} {v:.1f}" for k, v in med.items()))
    print(f"Python loader / C++ reader = {py / cpp:.3f}x (bar >= 0.9x)")
    torch_name = "PNG + PIL DataLoader (torchvision)"
    if torch_name in med:
        print(f"Python loader / PNG + PIL DataLoader = {py / med[torch_name]:.2f}x")

    if a.out:
        write_report(a, files, rows, med)
        print(f"wrote {a.out}")


def write_report(a, files, rows, med):
    try:
        commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
    except OSError:
        commit = "?"
    try:
        import torch
        torch_v = torch.__version__
    except ImportError:
        torch_v = "not installed"
    cpu = "unknown"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = " ".join(f"{v:.2f}" for v in os.getloadavg())
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    cpp = med["C++ reader (C++ loop)"]
    py = med["l3.Loader (Python, copy=True)"]
    pyb = med["l3.Loader (Python, copy=False)"]
    lines = [
        f"# Python loader benchmark: l3.Loader vs the C++ reader and the PNG + PIL DataLoader ({platform.node()})",
        "",
        f"- date: {now}; commit {commit}; Python {platform.python_version()}, numpy {np.__version__}, torch {torch_v}",
        f"- CPU: {cpu}, {os.cpu_count()} hardware threads; load average at the end: {load}",
        "- machine shared with other engineers building in parallel: absolute figures are noisy; the pipelines ran "
        "in turns in one run, so the ratios are the figures to read.",
        f"- images: {a.corpus.relative_to(REPO) if a.corpus.is_relative_to(REPO) else a.corpus} ({len(files)} PNG "
        "files; gray ones are replicated to RGB by every pipeline)",
        f"- all: RandomResizedCrop {a.crop} (scale 0.08-1, ratio 3/4-4/3, bilinear antialiased) + horizontal flip "
        f"p=0.5 + ImageNet normalisation, float32 CHW batches of {a.batch}, {a.workers} workers, {a.epochs} timed "
        f"epochs after {a.warmup} warm-up epoch(s); the consumer reads one element per batch",
        "- C++ reader: l3::Reader driven by a C++ loop inside the extension (`l3._l3._drain`), same options",
        "- l3.Loader copy=True (the default): each batch's ring buffer is handed over to the numpy array "
        "(valid while held; the reader goes on in a pooled buffer, no copy); copy=False leaves it in the ring",
        "- PNG + PIL: `bench/bench_reader_torch.py` (torchvision ImageFolder of the same PNG files, PIL decode, "
        "DataLoader shuffle=True, persistent workers; the reader benchmark's peer)",
        "- l3 output checked before timing (uint8 centre crops against l3.load_image of the PNGs)",
        "",
        "| round | pipeline | images | seconds | images/s | bound by |",
        "|---:|---|---:|---:|---:|---|",
    ]
    for rnd, name, images, secs, ips, bound in rows:
        lines.append(f"| {rnd} | {name} | {images} | {secs:.2f} | {ips:.1f} | {bound} |")
    lines += ["", "Median images/s: " + ", ".join(f"{k} {v:.1f}" for k, v in med.items()), "",
              "| bar | target | measured | status |", "|---|---|---|---|",
              f"| Python loader (copy=True) / C++ reader | >= 0.9x | {py / cpp:.3f}x | "
              f"{'reached' if py / cpp >= 0.9 else 'NOT reached'} |",
              f"| Python loader (copy=False) / C++ reader | - | {pyb / cpp:.3f}x | - |"]
    torch_name = "PNG + PIL DataLoader (torchvision)"
    if torch_name in med:
        lines.append(f"| Python loader / PNG + PIL DataLoader | - | {py / med[torch_name]:.2f}x | - |")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
