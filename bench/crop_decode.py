#!/usr/bin/env python3
"""What decoding only the crop saves (issue 14 item 2): CPU time of l3.decode (whole image)
against l3.decode_region (the RandomResizedCrop box: the decoder skips the tiles outside it
and, inside a tile, the rows below and the columns right of the box; rows above it are decoded
because prediction runs top-down) over every record of an l3 dataset, one thread, alternating.

Usage: crop_decode.py DATASET [--rounds 3]
"""
import argparse
import math
import random
import statistics
import time

import l3


def rrc_box(w, h, rng, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    """torchvision's RandomResizedCrop.get_params."""
    area = w * h
    for _ in range(10):
        target = area * rng.uniform(*scale)
        aspect = math.exp(rng.uniform(math.log(ratio[0]), math.log(ratio[1])))
        cw, ch = round(math.sqrt(target * aspect)), round(math.sqrt(target / aspect))
        if 0 < cw <= w and 0 < ch <= h:
            return rng.randint(0, w - cw), rng.randint(0, h - ch), cw, ch
    return 0, 0, w, h


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dataset")
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    ds = l3.Dataset(a.dataset)
    payloads = [ds.payload(i) for i in range(len(ds))]
    rng = random.Random(14)
    boxes = []
    pixels_full = pixels_box = 0
    for b in payloads:
        info = l3.info(b)
        boxes.append(rrc_box(info["width"], info["height"], rng))
        pixels_full += info["width"] * info["height"]
        pixels_box += boxes[-1][2] * boxes[-1][3]
    full, crop = [], []
    for _ in range(a.rounds):
        t = time.process_time()
        for b in payloads:
            l3.decode(b)
        full.append(time.process_time() - t)
        t = time.process_time()
        for b, (x, y, w, h) in zip(payloads, boxes):
            l3.decode_region(b, x, y, w, h)
        crop.append(time.process_time() - t)
    n = len(payloads)
    f, c = statistics.median(full), statistics.median(crop)
    print(f"{n} records, crop boxes {pixels_box / pixels_full:.2f}x the pixels: whole decode {f / n * 1e3:.3f} ms CPU "
          f"per image, crop decode {c / n * 1e3:.3f} ms ({c / f:.2f}x; rounds {[round(v, 2) for v in full]} / "
          f"{[round(v, 2) for v in crop]} s)")


if __name__ == "__main__":
    main()
