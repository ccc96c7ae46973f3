#!/usr/bin/env python3
"""The PyTorch peer of bench_reader: ImageFolder of PNG files, PIL decode,
torchvision RandomResizedCrop(224) + RandomHorizontalFlip + ToTensor +
Normalize, DataLoader with the same batch size and number of workers.

Usage: bench_reader_torch.py IMAGEFOLDER --batch N --workers N --epochs N [--warmup N] [--crop N]
Prints one JSON line like bench_reader.
"""
import argparse
import json
import time

import torch
from torch.utils.data import DataLoader
from torchvision import datasets, transforms


def main():
    p = argparse.ArgumentParser()
    p.add_argument("root")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--crop", type=int, default=224)
    a = p.parse_args()
    torch.manual_seed(1)
    tf = transforms.Compose([
        transforms.RandomResizedCrop(a.crop),  # bilinear, antialias=True
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ])
    ds = datasets.ImageFolder(a.root, transform=tf)  # PIL open + convert("RGB")
    loader = DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.workers,
                        persistent_workers=a.workers > 0, drop_last=False)
    sink = 0.0
    for _ in range(a.warmup):
        for x, y in loader:
            sink += float(x[0, 0, 0, 0])
    images = 0
    t0 = time.perf_counter()
    for _ in range(a.epochs):
        for x, y in loader:
            assert x.shape[1:] == (3, a.crop, a.crop) and x.dtype == torch.float32
            sink += float(x[0, 0, 0, 0])
            images += x.shape[0]
    secs = time.perf_counter() - t0
    print(json.dumps({"pipeline": "torch", "images": images, "seconds": round(secs, 4),
                      "images_per_second": round(images / secs, 2), "batch": a.batch,
                      "workers": a.workers, "records": len(ds), "torch": torch.__version__,
                      "sink": sink}))


if __name__ == "__main__":
    main()
