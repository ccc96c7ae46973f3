#!/usr/bin/env python3
"""Trains a small CNN for a few iterations on a converted l3 dataset.

    l3pack convert IMAGES/ out/          # or: python -c "import l3; l3.convert('IMAGES/', 'out/')"
    python examples/train.py out/ --steps 50 --size 64

IMAGES/ holds one folder per class (ImageFolder layout), so the dataset has
labels and class names. Batches come from l3.torch.IterableDataset (decode,
random resized crop, flip and normalisation in l3's C++ threads) through a
torch DataLoader with --loader-workers processes; each process reads its own
share of every epoch. Use --loader-workers 0 to decode in the training process.
--device cuda decodes and transforms on the GPU (l3 built with CUDA): batches
arrive as CUDA tensors without a copy, and the model trains there (needs
--loader-workers 0). Prints the mean loss and the images/s every --log-every
steps.
"""
import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader

import l3
import l3.torch


def small_cnn(classes: int) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, classes))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset", help="a converted dataset directory (l3pack convert output)")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--size", type=int, default=64, help="crop size")
    p.add_argument("--echo", type=int, default=1, help="data echoing: crops per decoded image")
    p.add_argument("--loader-workers", type=int, default=0, help="DataLoader worker processes")
    p.add_argument("--device", default="cpu", help="cpu, or cuda / cuda:N: decode, transform and train on the GPU")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()

    info = l3.Dataset(a.dataset)
    classes = max(len(info.classes), int(info.labels.max()) + 1)
    if classes < 2:
        raise SystemExit(f"{a.dataset}: needs labels of at least 2 classes (convert a folder of class folders)")
    print(f"{a.dataset}: {len(info)} images, {classes} classes: {info.classes[:8]}")

    if a.device != "cpu" and a.loader_workers:
        raise SystemExit("--device cuda feeds the GPU from the training process: use --loader-workers 0")
    torch.manual_seed(a.seed)
    ds = l3.torch.IterableDataset(a.dataset, batch_size=a.batch, size=a.size, scale=(0.2, 1.0), echo=a.echo,
                                  echo_window=1 if a.echo > 1 else 0, seed=a.seed, num_workers=a.loader_workers,
                                  device=a.device)
    loader = DataLoader(ds, batch_size=None, num_workers=a.loader_workers)
    model = small_cnn(classes).to(a.device)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)

    step, epoch, t0, window = 0, 0, time.perf_counter(), []
    while step < a.steps:
        ds.set_epoch(epoch)
        for images, labels in loader:  # with --device cuda: CUDA tensors (on torch's current stream)
            loss = nn.functional.cross_entropy(model(images), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            window.append(loss.item())
            step += 1
            if step % a.log_every == 0 or step == a.steps:
                print(f"step {step:4d}  epoch {epoch}  loss {sum(window) / len(window):.4f}  "
                      f"{step * a.batch / (time.perf_counter() - t0):.1f} images/s")
                window = []
            if step == a.steps:
                break
        epoch += 1


if __name__ == "__main__":
    main()
