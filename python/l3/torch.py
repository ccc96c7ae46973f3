"""PyTorch adapters for l3 datasets.

IterableDataset: whole batches from l3.Loader (decode, crop, resize, flip and
    normalisation in C++ threads). Work is split over DataLoader workers and
    distributed ranks: worker w of rank r reads partition r * num_workers + w of
    world_size * num_workers, so every sample of the epoch goes to exactly one
    (rank, worker). Use with DataLoader(ds, batch_size=None, num_workers=k) and
    call ds.set_epoch(e) before each epoch (like DistributedSampler); it reaches
    the workers also with persistent_workers=True (the epoch is shared memory).

    device="cuda": decode and transforms on the GPU; images come out as CUDA
    tensors on the batch's device memory (no copy) and labels are moved to the
    same device. Iterate in the training process (num_workers=0; CUDA does not
    survive fork, so DataLoader workers are refused with ValueError). A batch is
    valid until the next one is requested: use it (enqueue the step) before the
    next iteration, or clone it.

Dataset: map-style, ds[i] -> (uint8 tensor C x H x W, label), for torch samplers
    and your own transforms; 3 channels by default (channels=3, as ImageFolder).

    from torch.utils.data import DataLoader
    import l3.torch
    ds = l3.torch.IterableDataset("out/", batch_size=64, size=224, seed=0, workers=2)
    for images, labels in DataLoader(ds, batch_size=None, num_workers=0):
        ...

    The fast path is num_workers=0 with the loader's own C++ threads (workers=N):
    batches reach the training process without a copy (DLPack) and nothing is
    pickled. With num_workers=k > 0 each DataLoader process runs a loader of its
    own (one thread by default) and every float32 batch is copied into shared
    memory and sent through DataLoader's queue (bench/loader_peers.py measures
    both: bench/results/loaders-*.md).
"""
from __future__ import annotations

import os
from typing import Any, Callable, Optional, Tuple

import numpy as np
import torch
import torch.utils.data as tud

import l3 as _l3

__all__ = ["IterableDataset", "Dataset", "to_tensors"]

_CUDA_WORKERS = ("device='cuda' decodes on the GPU in the training process: use DataLoader(num_workers=0) "
                 "(CUDA cannot run in forked DataLoader workers, and the loader's own threads already "
                 "feed the GPU)")


def to_tensors(batch: "_l3.Batch") -> Tuple[torch.Tensor, torch.Tensor]:
    """(images, labels) torch tensors; images share the batch's memory (DLPack, no copy).

    A CUDA batch (Loader(device="cuda")) gives a CUDA tensor: torch.from_dlpack
    passes torch's current stream of the batch's device, which the loader records
    (the buffer is refilled only after the work enqueued on that stream before the
    next batch is requested). The labels are then copied to the same device
    (asynchronously, on that stream). Call it with the stream current on which you
    will use the batch.
    """
    images = torch.from_dlpack(batch.data)
    labels = torch.from_numpy(batch.labels)
    if images.is_cuda:
        labels = labels.to(images.device, non_blocking=True)
    return images, labels


def _is_cuda(device: Any) -> bool:
    return str(device) != "cpu"


def _distributed() -> Tuple[int, int]:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


class IterableDataset(tud.IterableDataset):
    """Batches of (images, labels) tensors from an l3 dataset.

    path, batch_size and every l3.Loader keyword (size, crop, dtype, layout, seed,
    echo, cache_bytes, on_error, ...). rank / world_size default to
    torch.distributed's when it is initialised, else 0 / 1.

    Each (rank, worker) yields the same number of batches (the reader pads the
    epoch's tail by wrapping around, or drops it with drop_last=True), as DDP
    needs. With drop_padding=True the padded examples are removed instead, so
    every record appears exactly once per epoch over all ranks and workers (the
    last batches may then be smaller).
    num_workers: the DataLoader's num_workers (used by len() only).
    workers: decode threads per DataLoader worker (default 1 in a worker, 2 without).
    return_records=True yields (images, labels, records): records are the dataset
    indices of the examples.
    In each process that iterates it, the loader of one epoch (its threads and ring
    buffers) is kept for the next, as l3.Loader keeps itself across epochs; close()
    releases it.
    """

    def __init__(self, path: os.PathLike | str, batch_size: int = 64, *, rank: Optional[int] = None,
                 world_size: Optional[int] = None, epoch: int = 0, drop_padding: bool = False,
                 workers: Optional[int] = None, num_workers: int = 0, return_records: bool = False, **loader_kwargs: Any):
        super().__init__()
        for k in ("copy",):
            if k in loader_kwargs:
                raise ValueError(f"{k!r} is chosen by the adapter")
        self.cuda = _is_cuda(loader_kwargs.get("device", "cpu"))
        if self.cuda and int(num_workers) > 0:
            raise ValueError(_CUDA_WORKERS)
        self.path = os.fspath(path)
        self.batch_size = int(batch_size)
        self.rank = rank
        self.world_size = world_size
        # The epoch lives in shared memory: DataLoader workers (persistent ones too)
        # read it at each __iter__, so set_epoch() in the training process reaches them.
        self._epoch = torch.tensor([int(epoch)], dtype=torch.int64).share_memory_()
        self.drop_padding = bool(drop_padding)
        self.workers = workers
        self.return_records = bool(return_records)
        self.num_workers = int(num_workers)
        self.loader_kwargs = dict(loader_kwargs)
        if self.drop_padding and (int(self.loader_kwargs.get("echo", 1)) != 1
                                  or int(self.loader_kwargs.get("echo_window", 0)) > 1):
            raise ValueError("drop_padding needs echo=1 and echo_window 0 or 1")
        if self.drop_padding and self.loader_kwargs.get("drop_last", False):
            raise ValueError("drop_padding and drop_last exclude each other")
        self._size = len(_l3.Dataset(self.path))
        self._kept: Optional[Tuple[Tuple[int, int, int], _l3.Loader]] = None  # (partition, loader) between epochs

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next iteration reads (its order and augmentation). Reaches
        DataLoader workers, persistent_workers=True included: they share this value
        and read it when the DataLoader starts the next epoch."""
        self._epoch[0] = int(epoch)

    @property
    def epoch(self) -> int:
        return int(self._epoch[0])

    def _partition(self, for_len: bool = False) -> Tuple[int, int, int]:
        rank, world = _distributed()
        if self.rank is not None:
            rank = self.rank
        if self.world_size is not None:
            world = self.world_size
        info = tud.get_worker_info()
        if info is not None:
            wid, nw = info.id, info.num_workers
        elif for_len:  # the main process: len() uses the DataLoader's num_workers given to the adapter
            wid, nw = 0, max(1, self.num_workers)
        else:  # iterated in the main process (num_workers=0): this rank reads its whole share
            wid, nw = 0, 1
        return rank * nw + wid, world * nw, nw

    def __len__(self) -> int:
        """Batches this rank yields per epoch: its workers' partitions together. Pass the
        DataLoader's num_workers to the adapter (num_workers=...) for this to be exact."""
        _, parts, nw = self._partition(for_len=True)
        per_step = parts * self.batch_size
        if self.loader_kwargs.get("drop_last", False):
            steps = self._size // per_step
        else:
            steps = -(-self._size // per_step)
        return steps * nw

    def __iter__(self):
        if self.cuda and tud.get_worker_info() is not None:
            raise ValueError(_CUDA_WORKERS)
        part, parts, _ = self._partition()
        workers = self.workers if self.workers is not None else (1 if tud.get_worker_info() else 2)
        loader = self._loader_for(part, parts, workers)
        try:
            n = self._size
            step_span = parts * self.batch_size
            for batch in loader:
                images, labels = to_tensors(batch)
                records = torch.from_numpy(batch.records.astype(np.int64))
                if self.drop_padding:
                    # This partition's example i of batch b sits at global position
                    # b * parts * batch + part * batch + i; positions >= n wrapped around.
                    first = batch.index * step_span + part * self.batch_size
                    keep = max(0, min(self.batch_size, n - first))
                    if keep == 0:
                        continue
                    if keep < self.batch_size:
                        images, labels, records = images[:keep], labels[:keep], records[:keep]
                yield (images, labels, records) if self.return_records else (images, labels)
        finally:
            self._done_with(loader, (part, parts, workers))

    def _loader_for(self, part: int, parts: int, workers: int) -> "_l3.Loader":
        """This epoch's loader: the one the last epoch in this process used, when it read
        the same partition with host batches, started again at this epoch (the batches a
        new loader would give); else a new one. A new loader per epoch opened the dataset,
        allocated its ring and filled its pipeline every time: 7-9% of a 2,000-image epoch's
        time in bench/loader_peers.py."""
        kept, self._kept = self._kept, None
        if kept is not None:
            key, loader = kept
            if key == (part, parts, workers):
                loader.set_epoch(self.epoch)
                return loader
            loader.close()
        # Host batches are handed over from the reader's ring (each stays valid while held);
        # CUDA batches are the loader's device buffers (valid until the next one).
        return _l3.Loader(self.path, self.batch_size, rank=part, world_size=parts, epoch=self.epoch,
                          workers=workers, copy=not self.cuda, **self.loader_kwargs)

    def _done_with(self, loader: "_l3.Loader", key: Tuple[int, int, int]) -> None:
        # Kept for the next epoch (host batches; one loader per dataset object), else closed.
        if self.cuda or self._kept is not None:
            loader.close()
        else:
            self._kept = (key, loader)

    def close(self) -> None:
        """Closes the loader kept between epochs (its threads and ring buffers)."""
        kept, self._kept = self._kept, None
        if kept is not None:
            kept[1].close()

    def __getstate__(self) -> dict:
        # DataLoader workers get the dataset without the main process's loader.
        state = self.__dict__.copy()
        state["_kept"] = None
        return state


class Dataset(tud.Dataset):
    """Map-style access: ds[i] -> (image, label). The image is a uint8 tensor C x H x W
    (layout="chw", torchvision's convention) or H x W x C (layout="hwc"), passed
    through `transform` when given; the label through `target_transform`.
    Opened lazily in each DataLoader worker.

    channels=3 (the default) gives every image 3 channels, as torchvision's
    ImageFolder (PIL convert("RGB")) does: gray and gray+alpha are replicated,
    RGBA drops alpha. channels=1: gray (colour records raise ValueError);
    channels=None: as stored (1, 2, 3 or 4). Same rule as l3.Loader(channels=)."""

    def __init__(self, path: os.PathLike | str, transform: Optional[Callable] = None,
                 target_transform: Optional[Callable] = None, layout: str = "chw", channels: Optional[int] = 3):
        if layout not in ("chw", "hwc"):
            raise ValueError(f"layout must be 'chw' or 'hwc'; got {layout!r}")
        self.path = os.fspath(path)
        self.transform = transform
        self.target_transform = target_transform
        self.layout = layout
        self._ds: Optional[_l3.Dataset] = _l3.Dataset(self.path, channels=channels)
        self.channels = self._ds.channels

    def _dataset(self) -> "_l3.Dataset":
        if self._ds is None:
            self._ds = _l3.Dataset(self.path, channels=self.channels)
        return self._ds

    def __getstate__(self):
        s = self.__dict__.copy()
        s["_ds"] = None  # reopened (and memory-mapped) in the worker process
        return s

    def __len__(self) -> int:
        return len(self._dataset())

    @property
    def classes(self) -> list:
        return self._dataset().classes

    @property
    def targets(self) -> list:
        return [int(v) for v in self._dataset().labels]

    def __getitem__(self, i: int):
        image, label = self._dataset()[i]
        t = torch.from_numpy(image)
        if self.layout == "chw":
            t = t.permute(2, 0, 1)
        if self.transform is not None:
            t = self.transform(t)
        if self.target_transform is not None:
            label = self.target_transform(label)
        return t, label
