#!/usr/bin/python3
"""Builds the codec benchmark corpus (bench/corpus/, git-ignored) from Debian packages.

Run with the system interpreter (/usr/bin/python3), which sees Debian's python3-pil,
python3-skimage and numpy. Deterministic: the same packages give the same files.

Classes (all written as lossless 8-bit PNG; a JPEG source is decoded first and its decoded
pixels are the lossless source). bench_codec reads photos/ and graphics/; bench/peers.py all five.

  photos/       the photographs among scikit-image's sample data and the photographic KDE Plasma
                wallpapers (JPEG sources, q75-q90, used at their largest stored size, 2560x1600).
  graphics/     scikit-image drawings, text pages and synthetic images, the rendered (non-photo)
                Plasma wallpapers stored as PNG at up to 2560x1600, seeded segmentation label masks
                and a smooth gradient.
  jpeg_photos/  camera photos shipped as JPEG (lomiri-wallpapers-16.04: q70-q99, 4:4:4, 4:2:2
                and 4:2:0), decoded by Pillow's libjpeg-turbo and never resampled: a centred crop of
                at most 2048x1536 (1536x2048 upright) and a 500x375 (375x500) ImageNet-size crop
                at a seeded position, both on the 16-pixel MCU grid.
  synthetic/    generated graphics (corpus_synthetic.py): gradients, chessboards, text pages,
                RGB label maps, dithered photos, screenshot-like UI renderings.
  rgba_opaque/  RGBA copies (alpha 255 everywhere) of five images of the classes above; the
                manifest names each one's RGB twin.

manifest.tsv (rewritten on every run) lists every file: class, size, channels, source, the
source's format and, for JPEG sources, the estimated IJG quality and chroma subsampling.

Channels are kept as stored: gray stays gray (1 channel), RGBA stays RGBA; palette and
bilevel images are expanded to gray or RGB(A); an opaque alpha plane is dropped outside
rgba_opaque/.

--sample writes bench/sample/ instead: the small committed set for the README's quick demo.

Usage: make_corpus.py [--out DIR] [--sample] [--force]
"""
import argparse
import hashlib
import os
import sys

import numpy as np
from PIL import Image

from corpus_synthetic import synthetic_items, voronoi_mask

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


# Camera photos shipped as JPEG by lomiri-wallpapers-16.04 (Ubuntu 16.04's wallpaper contest
# photos), judged by eye. Left out as rendered or heavily processed: analogpattern, umang.
BACKGROUNDS = "/usr/share/backgrounds"
JPEG_PHOTOS = {
    "bridge": "Bridge_by_Sander_Klootwijk.jpg", "dragonfly": "Dragonfly_by_Bolly.jpg",
    "picture0b": "Picture_0B_by_freespace.jpg", "picture1a": "Picture_1A_by_freespace.jpg",
    "wine": "Wine_by_Jakkub_Mede.jpg", "aitzgorri": "aitzgorri_by_Aitzol_Berasategi.jpg",
    "free": "free_by_Peter_Nerlich.jpg", "friends": "friends_by_Aitzol_Berasategi.jpg",
    "greentock": "greentock_by_Peter_Nerlich.jpg", "life": "life_by_Aitzol_Berasategi.jpg",
    "picosdeeuropa": "picosdeeuropa_by_Aitzol_Berasategi.jpg",
    "seeding": "seeding_by_Clements_Engelhardt.jpg", "sunset": "sunset_by_Aitzol_Berasategi.jpg",
}
JPEG_LARGE = (2048, 1536)  # the large crop, landscape; swapped for upright photos
JPEG_SMALL = (500, 375)  # ImageNet's typical size
MCU = 16  # crops start on the JPEG block grid (the largest MCU side, 4:2:0)
# rgba_opaque/: (class, file) of the RGB images copied with an opaque alpha plane.
RGBA_TWINS = [
    ("jpeg_photos", "jp_life_500x375.png"), ("jpeg_photos", "jp_dragonfly_500x375.png"),
    ("jpeg_photos", "jp_aitzgorri.png"), ("photos", "sk_astronaut.png"),
    ("synthetic", "syn_ui_light_1280x800.png"),
]
CLASSES = ("photos", "graphics", "jpeg_photos", "synthetic", "rgba_opaque")

# IJG's luminance quantisation table at quality 50 (ITU-T T.81 K.1).
IJG_LUMA = [16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55, 14, 13, 16, 24, 40, 57,
            69, 56, 14, 17, 22, 29, 51, 87, 80, 62, 18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64,
            81, 104, 113, 92, 49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99]


def jpeg_quality(im):
    """The IJG quality whose scaled luminance table is nearest the file's (order ignored),
    with '~' when no quality reproduces it exactly."""
    table = sorted(im.quantization[0])
    best = None
    for q in range(1, 101):
        scale = 5000 / q if q < 50 else 200 - 2 * q
        ref = sorted(min(255, max(1, int((v * scale + 50) // 100))) for v in IJG_LUMA)
        dist = sum(abs(x - y) for x, y in zip(ref, table))
        if best is None or dist < best[0]:
            best = (dist, q)
    return f"q{best[1]}" if best[0] == 0 else f"~q{best[1]}"


def jpeg_source_info(path):
    from PIL import JpegImagePlugin
    with Image.open(path) as im:
        sampling = {0: "4:4:4", 1: "4:2:2", 2: "4:2:0"}.get(JpegImagePlugin.get_sampling(im), "gray")
        return f"jpeg {jpeg_quality(im)} {sampling}"


def source_info(path):
    if path.lower().endswith((".jpg", ".jpeg")):
        return jpeg_source_info(path)
    return "png"


def mcu_crop(im, w, h, rng=None):
    """A w x h crop (clamped to the image) starting on the MCU grid: centred, or at a position
    drawn from rng. Crops only; the pixels are the decoded JPEG's."""
    if im.size[1] > im.size[0]:
        w, h = h, w
    w, h = min(w, im.size[0]), min(h, im.size[1])
    span_x, span_y = (im.size[0] - w) // MCU, (im.size[1] - h) // MCU
    if rng is None:
        x, y = span_x // 2 * MCU, span_y // 2 * MCU
    else:
        x, y = int(rng.integers(0, span_x + 1)) * MCU, int(rng.integers(0, span_y + 1)) * MCU
    return im.crop((x, y, x + w, y + h))


def load_jpeg_photo(key):
    with Image.open(os.path.join(BACKGROUNDS, JPEG_PHOTOS[key])) as im:
        im.load()
        return normalize(im)


def jpeg_photo_items():
    """(name, make, source path) of the jpeg_photos class."""
    for key in sorted(JPEG_PHOTOS):
        src = os.path.join(BACKGROUNDS, JPEG_PHOTOS[key])
        yield f"jp_{key}.png", lambda key=key: mcu_crop(load_jpeg_photo(key), *JPEG_LARGE), src
        seed = int(hashlib.sha256(key.encode()).hexdigest()[:8], 16)
        small = "x".join(map(str, JPEG_SMALL))
        yield (f"jp_{key}_{small}.png",
               lambda key=key, seed=seed: mcu_crop(load_jpeg_photo(key), *JPEG_SMALL, np.random.default_rng(seed)),
               src)


def centre_photo(key, w, h):
    """An RGB centred crop of a JPEG photo: the start of the dithered synthetic images."""
    return mcu_crop(load_jpeg_photo(key), w, h)


def corpus_items(out):
    """(class, output name, make, source) in a fixed order; make() returns the image."""
    def loader(path):
        def load():
            with Image.open(path) as im:
                im.load()
                return normalize(im)
        return load

    for f in SKIMAGE_PHOTOS:
        p = os.path.join(SKIMAGE_DATA, f)
        yield "photos", "sk_" + os.path.splitext(f)[0] + ".png", loader(p), p
    for n in WALLPAPER_PHOTOS:
        p = pick_wallpaper(n)
        yield "photos", "wall_" + n + ".png", loader(p), p
    for f in SKIMAGE_GRAPHICS:
        p = os.path.join(SKIMAGE_DATA, f)
        yield "graphics", "sk_" + os.path.splitext(f)[0] + ".png", loader(p), p
    for n in WALLPAPER_GRAPHICS:
        p = pick_wallpaper(n)
        yield "graphics", "wall_" + n + ".png", loader(p), p
    for name, im in generated_graphics():
        yield "graphics", name, lambda im=im: im, "generated (make_corpus.py)"
    for name, make, src in jpeg_photo_items():
        yield "jpeg_photos", name, make, src
    for name, make in synthetic_items(centre_photo):
        yield "synthetic", name, make, "generated (corpus_synthetic.py)"
    for cls, name in RGBA_TWINS:
        def opaque(path=os.path.join(out, cls, name)):
            with Image.open(path) as im:
                return im.convert("RGBA")  # alpha 255 everywhere, RGB unchanged
        yield "rgba_opaque", "rgba_" + name, opaque, f"{cls}/{name} + alpha 255"


def save_png(im, path):
    tmp = path + ".tmp"
    im.save(tmp, format="PNG", compress_level=6)
    os.replace(tmp, path)


def write_manifest(out, rows):
    tmp = os.path.join(out, "manifest.tsv.tmp")
    with open(tmp, "w") as f:
        f.write("class\tfile\twidth\theight\tchannels\tsource_format\tsource\n")
        for r in rows:
            f.write("\t".join(map(str, r)) + "\n")
    os.replace(tmp, os.path.join(out, "manifest.tsv"))


def build_corpus(out, force):
    stats, rows = {}, []
    for cls in CLASSES:
        os.makedirs(os.path.join(out, cls), exist_ok=True)
    source_formats = {}

    for cls, name, make, src in corpus_items(out):
        path = os.path.join(out, cls, name)
        if force or not os.path.exists(path):
            save_png(make(), path)
        with Image.open(path) as im:
            w, h, c = im.size[0], im.size[1], len(im.getbands())
        s = stats.setdefault(cls, [0, 0, 0, 0])
        s[0] += 1
        s[1] += w * h
        s[2] += os.path.getsize(path)
        s[3] += w * h * c
        if src not in source_formats:
            source_formats[src] = (source_info(src) if os.path.isfile(src) else
                                   "generated" if src.startswith("generated") else "opaque RGBA copy")
        rows.append((cls, name, w, h, c, source_formats[src], src))
        print(f"  {cls}/{name}: {w}x{h}x{c}", file=sys.stderr)
    write_manifest(out, rows)

    print(f"corpus: {out} (manifest.tsv: source of every file)")
    print(f"{'class':<12} {'images':>6} {'Mpixels':>9} {'raw MB':>9} {'PNG MB':>9}")
    tot = [0, 0, 0, 0]
    for cls in CLASSES:
        s = stats[cls]
        tot = [a + b for a, b in zip(tot, s)]
        print(f"{cls:<12} {s[0]:>6} {s[1] / 1e6:>9.2f} {s[3] / 1e6:>9.2f} {s[2] / 1e6:>9.2f}")
    print(f"{'total':<12} {tot[0]:>6} {tot[1] / 1e6:>9.2f} {tot[3] / 1e6:>9.2f} {tot[2] / 1e6:>9.2f}")


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
