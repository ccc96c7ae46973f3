#!/usr/bin/env python3
"""WebP, TIFF and BMP inputs decode to PIL's pixels (issue 15).

Usage: pil_parity.py L3PACK WORKDIR. Writes files of every PIL mode each format
plugin saves (WebP lossy/lossless, RGB/RGBA; TIFF L/LA/RGB/RGBA/P, raw, LZW and
deflate; BMP RGB/L/P/1/RGBA), converts them with `l3pack convert`, extracts each
record with `l3pack encode`/`decode` to PNG, and compares with
Image.open(f).convert(mode) for the channel count l3 stored, which must be the
PIL mode's own (P -> RGB, 1 -> L). Then `l3pack verify --source` must pass.
Exit 1 on any difference. Needs python3-pil.
"""
import os
import random
import shutil
import subprocess
import sys

from PIL import Image

CHANNELS_OF_MODE = {"L": 1, "1": 1, "LA": 2, "RGB": 3, "P": 3, "RGBA": 4}


def random_image(mode, w=19, h=13):
    im = Image.new(mode, (w, h))
    if mode == "1":
        im.putdata([random.choice([0, 255]) for _ in range(w * h)])
    elif mode == "P":
        im.putpalette([random.randrange(256) for _ in range(768)])
        im.putdata([random.randrange(256) for _ in range(w * h)])
    elif mode == "L":
        im.putdata([random.randrange(256) for _ in range(w * h)])
    else:  # alpha 0 included: libwebp must not lose the colour under it
        im.putdata([tuple(random.randrange(256) if k < 3 else random.choice([0, 77, 255]) for k in range(len(mode)))
                    for _ in range(w * h)])
    return im


def write_cases(src):
    os.makedirs(src)
    names = []
    def save(im, name, **kw):
        im.save(os.path.join(src, name), **kw)
        names.append(name)
    for mode in ("RGB", "RGBA"):
        save(random_image(mode), f"lossy_{mode}.webp", quality=80)
        save(random_image(mode), f"lossless_{mode}.webp", lossless=True)
    for mode in ("L", "LA", "RGB", "RGBA", "P"):
        for comp in ("raw", "tiff_lzw", "tiff_adobe_deflate"):
            save(random_image(mode), f"{mode}_{comp}.tif", compression=None if comp == "raw" else comp)
    for mode in ("RGB", "L", "P", "1", "RGBA"):
        save(random_image(mode), f"{mode}.bmp")
    return names


def main():
    l3pack, work = sys.argv[1], sys.argv[2]
    random.seed(15)
    shutil.rmtree(work, ignore_errors=True)
    src = os.path.join(work, "src")
    names = write_cases(src)
    run = subprocess.run([l3pack, "convert", src, os.path.join(work, "ds")], capture_output=True, text=True)
    if run.returncode != 0 or " 0 inputs" not in run.stdout:
        sys.exit(f"FAIL: convert: {run.stdout}{run.stderr}")
    failures = []
    os.makedirs(os.path.join(work, "back"))
    for name in names:
        f, back = os.path.join(src, name), os.path.join(work, "back", name)
        subprocess.run([l3pack, "encode", f, back + ".l3i"], check=True, capture_output=True)
        subprocess.run([l3pack, "decode", back + ".l3i", back + ".png"], check=True, capture_output=True)
        ours = Image.open(back + ".png")
        ours.load()
        pil = Image.open(f)
        mode = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}[len(ours.getbands())]
        # PIL reads a 32-bit BMP as RGB ("BGRX"), whatever mode it was saved from.
        expected_channels = 3 if pil.format == "BMP" and pil.mode == "RGB" else CHANNELS_OF_MODE[pil.mode]
        if len(ours.getbands()) != expected_channels:
            failures.append(f"{name}: {len(ours.getbands())} channels, PIL mode {pil.mode}")
        elif pil.convert(mode).tobytes() != ours.tobytes():
            failures.append(f"{name}: pixels differ from PIL's")
        else:
            print(f"{name}: PIL mode {pil.mode}, {mode}: equal")
    # Damaged copies: truncated anywhere, or a byte flipped, are one-line errors (exit 1) or,
    # for a flip the format does not check, a clean decode; never a crash.
    rng = random.Random(7)
    for name in names:
        data = open(os.path.join(src, name), "rb").read()
        damaged = [("cut", data[:rng.randrange(1, len(data))]) for _ in range(6)]
        for _ in range(6):
            flipped = bytearray(data)
            flipped[rng.randrange(len(data))] ^= 0xFF
            damaged.append(("flip", bytes(flipped)))
        for kind, blob in damaged:
            f = os.path.join(work, "damaged" + os.path.splitext(name)[1])
            open(f, "wb").write(blob)
            run = subprocess.run([l3pack, "encode", f, f + ".l3i"], capture_output=True, text=True)
            lines = run.stderr.strip().splitlines()
            if run.returncode not in ((1,) if kind == "cut" else (0, 1)) or (run.returncode and len(lines) != 1):
                failures.append(f"{name} ({kind} to {len(blob)} bytes): exit {run.returncode}: {run.stderr.strip()}")
    verify = subprocess.run([l3pack, "verify", os.path.join(work, "ds"), "--source", src], capture_output=True, text=True)
    if verify.returncode != 0:
        failures.append("verify --source: " + verify.stderr)
    for f in failures:
        print("FAIL:", f)
    if failures:
        sys.exit(1)
    print(f"PASS: {len(names)} WebP/TIFF/BMP files equal PIL's pixels")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
