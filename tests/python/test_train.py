"""A real training loop: a small CNN on the bench/sample photos (one class per
file name), 64x64 random crops from l3.torch, the loss must go down."""
import torch
from torch import nn
from torch.utils.data import DataLoader

import l3
import l3.torch


def small_cnn(classes):
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, classes))


def test_training_loss_decreases(sample_dataset):
    d, files = sample_dataset
    torch.manual_seed(0)
    classes = len(files)
    # echo=4: every decoded photo gives 4 random crops per batch; one batch per epoch.
    ds = l3.torch.IterableDataset(d, batch_size=4 * classes, size=64, scale=(0.2, 1.0), echo=4, echo_window=1,
                                  seed=0)
    model = small_cnn(classes)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for epoch in range(30):
        ds.set_epoch(epoch)
        for images, labels in DataLoader(ds, batch_size=None, num_workers=0):
            assert images.shape == (4 * classes, 3, 64, 64)
            loss = nn.functional.cross_entropy(model(images), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    print(f"loss: first 5 steps {first:.3f}, last 5 steps {last:.3f}")
    assert len(losses) == 30
    assert last < 0.6 * first, losses
