#!/usr/bin/env python3
"""Ideal code length of an image's channels as binary symbols in per-tile contexts of their
neighbours (spec/codec.md §12, "the two other images above 1.05x"): each channel of each 256 x 32
tile that holds two values, coded as bits in the contexts of a template of neighbour pixels, with
§6.8's level quantisation of the frequency of a 1, 5 bits a context in a table per channel and tile,
and a rANS state plus padding per row (5 bytes). Prints the bytes for each template.

  bench/bilevel_template_probe.py bench/corpus/synthetic/syn_dither_bayer8_1024x768.png

Also prints what deflate (zlib level 9) makes of each tile's bytes alone, against the whole image: what
tile independence leaves to an LZ77 coder.

Measured (2026-12-01): the Bayer dither 98,839 bytes with W N NW WW NN (today's bilevel contexts),
47,464 with W N NW W8 N8 (the pixels 8 to the left and 8 above: its dither's period), 51,244 adding the
channel before at the same pixel; deflate per tile: the gray text 68,660, the Bayer
dither 45,876, the gradient 373,552 (whole images, unfiltered: 35,902, 40,746 and 422,069). Needs numpy and Pillow (Debian: python3-numpy, python3-pil).
"""
import sys
import zlib

import numpy as np
from PIL import Image

TEMPLATES = {
    "W N NW WW NN": [(0, 1), (1, 0), (1, 1), (0, 2), (2, 0)],
    "W N NW W8 N8": [(0, 1), (1, 0), (1, 1), (0, 8), (8, 0)],
    "W N NW W8 N8 + channel before": [(0, 1), (1, 0), (1, 1), (0, 8), (8, 0), "c"],
}


def levels():
    """The frequencies of a 1 that §6.8's levels 1..31 give, as probabilities."""
    low = [1] + [(2 + q % 2) * 2 ** ((q + 6) // 2 - 1) for q in range(2, 17)]
    return np.array(sorted(set(low + [4096 - f for f in low[:-1]]))) / 4096.0


def shifted(plane, dy, dx):
    """plane[y - dy, x - dx], 0 outside the tile (the probe's edge rule)."""
    out = np.zeros_like(plane)
    h, w = plane.shape
    out[dy:, dx:] = plane[: h - dy, : w - dx]
    return out


def tile_bits(tile, template, probs):
    bits = 0.0
    for c in range(tile.shape[2]):
        plane = tile[..., c]
        ctx = np.zeros_like(plane)
        for i, offset in enumerate(template):
            ref = (tile[..., c - 1] if c else np.zeros_like(plane)) if offset == "c" else shifted(plane, *offset)
            ctx |= ref << i
        n = 1 << len(template)
        ones = np.bincount(ctx.ravel(), weights=plane.ravel(), minlength=n)
        zeros = np.bincount(ctx.ravel(), minlength=n) - ones
        for n0, n1 in zip(zeros, ones):
            if n0 + n1:
                bits += min(-(n1 * np.log2(p) + n0 * np.log2(1 - p)) for p in probs)
    return bits


def main():
    probs = levels()
    for path in sys.argv[1:]:
        img = np.asarray(Image.open(path))
        img = img[..., None] if img.ndim == 2 else img
        h, w, channels = img.shape
        per_tile = sum(len(zlib.compress(np.ascontiguousarray(img[y : y + 32, x : x + 256]).tobytes(), 9))
                       for y in range(0, h, 32) for x in range(0, w, 256))
        print(f"{path}\tdeflate per 256 x 32 tile\t{per_tile:,} bytes\twhole image {len(zlib.compress(img.tobytes(), 9)):,}")
        for name, template in TEMPLATES.items():
            total, tiles = 0.0, 0
            for y in range(0, h, 32):
                for x in range(0, w, 256):
                    tile = img[y : y + 32, x : x + 256]
                    if any(len(np.unique(tile[..., c])) > 2 for c in range(channels)):
                        continue  # not every channel two-valued: left out
                    binary = (tile == tile.reshape(-1, channels).max(0)).astype(np.int32)
                    total += tile_bits(binary, template, probs) / 8
                    total += channels * (1 << len(template)) * 5 / 8 + tile.shape[0] * 5
                    tiles += 1
            print(f"{path}\t{name}\t{tiles} tiles\t{total:,.0f} bytes")


if __name__ == "__main__":
    main()
