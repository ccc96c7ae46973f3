#!/usr/bin/python3
"""Builds the codec benchmark corpus (bench/corpus/, git-ignored) from Debian packages.

Run with the system interpreter (/usr/bin/python3), which sees Debian's python3-pil,
python3-skimage and numpy. Deterministic: the same packages give the same files.

Classes (all written as lossless 8-bit PNG; a JPEG source is decoded first and its decoded
pixels are the lossless source):

  photos/    the photographs among scikit-image's sample data and the photographic KDE Plasma
             wallpapers (all JPEG sources, used at their largest stored size, 2560x1600).
  graphics/  scikit-image drawings, text pages and synthetic images, the rendered (non-photo)
             Plasma wallpapers stored as PNG at up to 2560x1600, seeded segmentation label masks
             and a smooth gradient.

Channels are kept as stored: gray stays gray (1 channel), RGBA stays RGBA; palette and
bilevel images are expanded to gray or RGB(A).

--sample writes bench/sample/ instead: the small committed set for the README's quick demo.

Usage: make_corpus.py [--out DIR] [--sample] [--force]
"""
import argparse
import hashlib
import os
import sys

import numpy as np
from PIL import Image

SKIMAGE_DATA = "/usr/lib/python3/dist-packages/skimage/data"
WALLPAPERS = "/usr/share/wallpapers"

# Photographs among scikit-image's sample data (real camera / microscope / telescope images).
SKIMAGE_PHOTOS = [
    "astronaut.png", "brick.png", "camera.png", "cell.png", "chelsea.png", "clock_motion.png",
    "coffee.png", "coins.png", "grass.png", "gravel.png", "hubble_deep_field.jpg", "ihc.png",
    "microaneurysms.png", "moon.png", "motorcycle_left.png", "motorcycle_right.png",
    "retina.jpg", "rocket.jpg",
]
# Drawings, text pages and synthetic images. Left out: block.png, palette_*.png,
# foo3x5x4indexed.png (10x10 and smaller test fixtures), the GIF and truncated.jpg.
SKIMAGE_GRAPHICS = [
    "bw_text.png", "checker_bilevel.png", "chessboard_GRAY.png", "chessboard_RGB.png",
    "color.png", "green_palette.png", "horse.png", "logo.png", "page.png", "phantom.png",
    "text.png",
]
# Photographic Plasma wallpapers (judged by eye; all stored as JPEG). 11 images at 2560x1600
# (the largest size stored; the smaller names in those folders are symlinks to it).
# Left out as non-photographic: Autumn (painted), and every rendered design below.
WALLPAPER_PHOTOS = [
    "BytheWater", "ColdRipple", "ColorfulCups", "DarkestHour", "EveningGlow", "FallenLeaf",
    "Grey", "Kite", "OneStandsOut", "Path", "summer_1am",
]
# Rendered wallpapers stored as PNG, at the largest size <= 2560x1600 (5120x2880 and
# 3840x2160 versions are skipped to bound the benchmark's run time).
WALLPAPER_GRAPHICS = ["Elarun", "FlyingKonqui", "Altai", "Kay", "Patak"]
MAX_WALLPAPER_PIXELS = 2560 * 1600

# The committed quick-demo sample: (source, output name, max side, format).
SAMPLE = [
    ("wall:EveningGlow", "eveningglow.jpg", 640, "JPEG"),
    ("wall:Path", "path.jpg", 640, "JPEG"),
    ("wall:FallenLeaf", "fallenleaf.jpg", 640, "JPEG"),
    ("sk:coffee.png", "coffee.png", 400, "PNG"),
    ("sk:chelsea.png", "chelsea.png", 451, "PNG"),
    ("sk:camera.png", "camera.png", 256, "PNG"),
]


def normalize(im):
    """Returns an 8-bit L, RGB or RGBA image with the source's pixels."""
    if im.mode == "P":
        im = im.convert("RGBA" if "transparency" in im.info else "RGB")
    if im.mode == "1":
        im = im.convert("L")
    if im.mode == "LA":
        return im
    if im.mode in ("I;16", "I", "F"):
        raise ValueError(f"unexpected high bit depth image mode {im.mode}")
    if im.mode not in ("L", "RGB", "RGBA"):
        im = im.convert("RGB")
    if im.mode == "RGBA" and np.asarray(im)[..., 3].min() == 255:
        im = im.convert("RGB")  # an opaque alpha plane is not part of the content
    return im


def wallpaper_images(name):
    """(pixels, path) of each distinct image file of a wallpaper package, by real size."""
    d = os.path.join(WALLPAPERS, name, "contents", "images")
    seen, out = set(), []
    for f in sorted(os.listdir(d)):
        p = os.path.realpath(os.path.join(d, f))
        if p in seen or not f.lower().endswith((".png", ".jpg", ".jpeg")):
            continue
        seen.add(p)
        with Image.open(p) as im:
            out.append((im.size[0] * im.size[1], p))
    return sorted(out)


def pick_wallpaper(name, max_pixels=MAX_WALLPAPER_PIXELS):
    cands = [c for c in wallpaper_images(name) if c[0] <= max_pixels]
    if not cands:
        raise FileNotFoundError(f"wallpaper {name}: no image of at most {max_pixels} pixels")
    return cands[-1][1]


def voronoi_mask(rng, w, h, n_seeds, n_labels):
    """Gray label mask: nearest-seed regions, a few label values."""
    sx = rng.integers(0, w, n_seeds)
    sy = rng.integers(0, h, n_seeds)
    labels = rng.integers(0, n_labels, n_seeds)
    yy, xx = np.mgrid[0:h, 0:w]
    best = np.full((h, w), np.inf)
    out = np.zeros((h, w), np.uint8)
    for i in range(n_seeds):
        d = (xx - sx[i]) ** 2 + (yy - sy[i]) ** 2
        m = d < best
        best[m] = d[m]
        out[m] = labels[i]
    return out


def ellipse_mask(rng, w, h, n, n_labels):
    """Gray label mask: background 0 and filled, overlapping ellipses."""
    yy, xx = np.mgrid[0:h, 0:w]
    out = np.zeros((h, w), np.uint8)
    for _ in range(n):
        cx, cy = rng.uniform(0, w), rng.uniform(0, h)
        ax, ay = rng.uniform(w * 0.04, w * 0.25), rng.uniform(h * 0.04, h * 0.25)
        t = rng.uniform(0, np.pi)
        x, y = xx - cx, yy - cy
        u = (x * np.cos(t) + y * np.sin(t)) / ax
        v = (-x * np.sin(t) + y * np.cos(t)) / ay
        out[u * u + v * v <= 1.0] = rng.integers(1, n_labels)
    return out


def generated_graphics():
    rng = np.random.default_rng(20240531)
    yield "mask_voronoi_512.png", Image.fromarray(voronoi_mask(rng, 512, 512, 40, 6), "L")
    yield "mask_voronoi_1024x768.png", Image.fromarray(voronoi_mask(rng, 1024, 768, 90, 19), "L")
    yield "mask_ellipses_640x480.png", Image.fromarray(ellipse_mask(rng, 640, 480, 25, 8), "L")
    yield "mask_ellipses_1024x768.png", Image.fromarray(ellipse_mask(rng, 1024, 768, 40, 21), "L")
    # A palette-coloured label map (RGB, few colours), as segmentation datasets often store.
    lab = voronoi_mask(rng, 800, 600, 60, 12)
    pal = rng.integers(0, 256, (12, 3), dtype=np.uint8)
    yield "mask_voronoi_rgb_800x600.png", Image.fromarray(pal[lab], "RGB")
    # Smooth gradient: 1024x768 RGB, each channel a different linear ramp.
    yy, xx = np.mgrid[0:768, 0:1024].astype(np.float64)
    g = np.stack([xx / 1023 * 255, yy / 767 * 255, (xx + yy) / (1023 + 767) * 255], -1)
    yield "gradient_1024x768.png", Image.fromarray(np.round(g).astype(np.uint8), "RGB")


def corpus_items():
    """(class, output name, loader) in a fixed order."""
    for f in SKIMAGE_PHOTOS:
        yield "photos", "sk_" + os.path.splitext(f)[0] + ".png", os.path.join(SKIMAGE_DATA, f)
    for n in WALLPAPER_PHOTOS:
        yield "photos", "wall_" + n + ".png", pick_wallpaper(n)
    for f in SKIMAGE_GRAPHICS:
        yield "graphics", "sk_" + os.path.splitext(f)[0] + ".png", os.path.join(SKIMAGE_DATA, f)
    for n in WALLPAPER_GRAPHICS:
        yield "graphics", "wall_" + n + ".png", pick_wallpaper(n)


def save_png(im, path):
    tmp = path + ".tmp"
    im.save(tmp, format="PNG", compress_level=6)
    os.replace(tmp, path)


def build_corpus(out, force):
    stats = {}
    for cls in ("photos", "graphics"):
        os.makedirs(os.path.join(out, cls), exist_ok=True)

    def record(cls, path, im):
        s = stats.setdefault(cls, [0, 0, 0, 0])
        s[0] += 1
        s[1] += im.size[0] * im.size[1]
        s[2] += os.path.getsize(path)
        s[3] += im.size[0] * im.size[1] * len(im.getbands())

    def emit(cls, name, make):
        path = os.path.join(out, cls, name)
        if force or not os.path.exists(path):
            save_png(make(), path)
        with Image.open(path) as im:
            im.load()
            record(cls, path, im)
            print(f"  {cls}/{name}: {im.size[0]}x{im.size[1]} {im.mode}", file=sys.stderr)

    for cls, name, src in corpus_items():
        def load(src=src):
            with Image.open(src) as im:
                im.load()
                return normalize(im)
        emit(cls, name, load)
    for name, im in generated_graphics():
        emit("graphics", name, lambda im=im: im)

    print(f"corpus: {out}")
    print(f"{'class':<10} {'images':>6} {'Mpixels':>9} {'raw MB':>9} {'PNG MB':>9}")
    tot = [0, 0, 0, 0]
    for cls in ("photos", "graphics"):
        s = stats[cls]
        tot = [a + b for a, b in zip(tot, s)]
        print(f"{cls:<10} {s[0]:>6} {s[1] / 1e6:>9.2f} {s[3] / 1e6:>9.2f} {s[2] / 1e6:>9.2f}")
    print(f"{'total':<10} {tot[0]:>6} {tot[1] / 1e6:>9.2f} {tot[3] / 1e6:>9.2f} {tot[2] / 1e6:>9.2f}")


def build_sample(out):
    os.makedirs(out, exist_ok=True)
    total = 0
    for src, name, side, fmt in SAMPLE:
        kind, what = src.split(":", 1)
        path = pick_wallpaper(what) if kind == "wall" else os.path.join(SKIMAGE_DATA, what)
        with Image.open(path) as im:
            im.load()
            im = normalize(im)
        if max(im.size) > side:
            s = side / max(im.size)
            im = im.resize((round(im.size[0] * s), round(im.size[1] * s)), Image.LANCZOS)
        dst = os.path.join(out, name)
        if fmt == "JPEG":
            im.save(dst, format="JPEG", quality=90)
        else:
            im.save(dst, format="PNG", compress_level=9)
        size = os.path.getsize(dst)
        total += size
        digest = hashlib.sha256(open(dst, "rb").read()).hexdigest()[:12]
        print(f"  {name}: {im.size[0]}x{im.size[1]} {im.mode} {size} bytes sha256:{digest}")
    print(f"sample: {len(SAMPLE)} files, {total} bytes in {out}")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", help="output folder (default bench/corpus or bench/sample)")
    ap.add_argument("--sample", action="store_true", help="write the small committed demo sample")
    ap.add_argument("--force", action="store_true", help="rewrite files that exist")
    a = ap.parse_args()
    if a.sample:
        build_sample(a.out or os.path.join(here, "sample"))
    else:
        build_corpus(a.out or os.path.join(here, "corpus"), a.force)


if __name__ == "__main__":
    main()
