#!/usr/bin/env python3
"""What two-colour images would take with binary contexts of neighbouring pixels (spec/codec.md §12,
"Binary contexts for two-colour tiles", measured before building).

Usage: python3 bench/bilevel_context_probe.py IMAGE...   (each image must have exactly two values)

Today a two-colour palette tile codes its index residuals in contexts of residual activity (spec §6.2,
§4.5). JBIG-style coders instead take the pattern of the neighbouring pixels themselves as the context.
For each image this prints the ideal code length of every pixel under static per-context counts
(-sum log2 p: what rANS with per-tile tables reaches, less its rounding) plus TABLE_BITS bits per
used context for its probability, with tables per 256 x 32 tile (tiles independent, as the format's
are) and with one table for the whole image. The neighbour sets use only pixels that the lag-1
wavefront of spec §8 has decoded before a pixel: W, WW, WWW of its row, N, NW, NWW, NWWW of the row
above (not NE: decoded in the same step) and NN, NNW, NNE two rows up. Outside the image (and, per
tile, this probe's only approximation of the tile edge: the image's neighbours are used) a pixel is 0.
"""
import sys

import numpy as np
from PIL import Image

TILE_W, TILE_H = 256, 32
TABLE_BITS = 5  # one quantised probability per used context (today's compact tables: about 16)

NEIGHBOURS = {  # (dy, dx)
    "W": (0, -1), "WW": (0, -2), "WWW": (0, -3),
    "N": (-1, 0), "NW": (-1, -1), "NWW": (-1, -2), "NWWW": (-1, -3),
    "NN": (-2, 0), "NNW": (-2, -1), "NNE": (-2, 1),
}
SETS = [
    ("W N NW", ["W", "N", "NW"]),
    ("W WW N NW NN", ["W", "WW", "N", "NW", "NN"]),
    ("W WW N NW NWW NN NNE", ["W", "WW", "N", "NW", "NWW", "NN", "NNE"]),
    ("8: + NNW", ["W", "WW", "N", "NW", "NWW", "NN", "NNE", "NNW"]),
    ("10: + WWW NWWW", ["W", "WW", "N", "NW", "NWW", "NN", "NNE", "NNW", "WWW", "NWWW"]),
]


def contexts(bits, names):
    h, w = bits.shape
    padded = np.pad(bits, ((2, 0), (3, 2)))
    ctx = np.zeros_like(bits)
    for i, name in enumerate(names):
        dy, dx = NEIGHBOURS[name]
        ctx |= padded[2 + dy:2 + dy + h, 3 + dx:3 + dx + w] << i
    return ctx


def code_bits(ctx, bits, n_contexts):
    counts = np.bincount((ctx * 2 + bits).ravel(), minlength=2 * n_contexts).reshape(n_contexts, 2).astype(float)
    totals = counts.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(counts > 0, -counts * np.log2(counts / np.maximum(totals, 1)), 0.0)
    return terms.sum() + TABLE_BITS * np.count_nonzero(totals)


def probe(path):
    pixels = np.asarray(Image.open(path).convert("L"))
    values = np.unique(pixels)
    if len(values) != 2:
        raise SystemExit(f"{path}: {len(values)} values, not two")
    bits = (pixels == values[1]).astype(np.int64)
    h, w = bits.shape
    print(f"{path}")
    for label, names in SETS:
        ctx, n = contexts(bits, names), 1 << len(names)
        per_tile = sum(code_bits(ctx[y:y + TILE_H, x:x + TILE_W], bits[y:y + TILE_H, x:x + TILE_W], n)
                       for y in range(0, h, TILE_H) for x in range(0, w, TILE_W))
        print(f"  {label:24s} per tile {per_tile / 8:9.0f} B   one table {code_bits(ctx, bits, n) / 8:9.0f} B")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    for p in sys.argv[1:]:
        probe(p)
