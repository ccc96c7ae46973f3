#!/usr/bin/env python3
"""The issue-15 bar: a folder of N mixed small images in class folders, exactly 1%
of them bad in various ways, converted by `l3pack convert`; checks that

  - OUT/skipped.jsonl lists exactly the bad inputs (and nothing else),
  - `l3pack verify OUT --source SRC` passes (every record against its source,
    every source a record or a recorded skip),
  - every record's label is the label torchvision's ImageFolder gives that file
    (torchvision when importable, else ImageFolder's rule replicated: classes =
    sorted folder names, files with its extensions), compared on the files both
    accept, and the classes are the same.

Usage: messy_folder.py L3PACK WORKDIR [N]   (N = 10000 by default; CI runs 700)
Bad kinds, in turn: truncated PNG, truncated JPEG, text named .jpg, notes .txt,
zero-byte .png, broken symbolic link, unreadable .png (mode 000; as root, l3pack
runs as nobody through setpriv so that the file is really unreadable).
Needs PIL (python3-pil). Prints counts and the conversion time; exit 1 on any mismatch.
"""
import json
import os
import random
import shutil
import subprocess
import sys
import time

from PIL import Image

IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")  # torchvision's


def make_image(rng, path, kind):
    w, h = rng.randint(8, 40), rng.randint(8, 40)
    mode = {"png": rng.choice(["RGB", "L", "RGBA", "LA"]), "jpg": rng.choice(["RGB", "L"]), "ppm": "RGB", "pgm": "L",
            "bmp": rng.choice(["RGB", "L"]), "webp": "RGB", "tif": rng.choice(["RGB", "L", "RGBA"])}[kind]
    im = Image.frombytes(mode, (w, h), bytes(rng.getrandbits(8) for _ in range(w * h * len(mode))))
    im.save(path, format={"png": "PNG", "jpg": "JPEG", "ppm": "PPM", "pgm": "PPM", "bmp": "BMP", "webp": "WEBP",
                          "tif": "TIFF"}[kind])


BAD_KINDS = ["truncated png", "truncated jpeg", "text named .jpg", "notes .txt", "zero-byte .png", "broken link",
             "unreadable .png"]

# Root reads any file: to have an unreadable one, l3pack runs as nobody (setpriv).
AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []


def make_bad(rng, folder, i, kind):
    """Writes one bad input; returns its path."""
    if kind == "truncated png":
        p = os.path.join(folder, f"bad{i}.png")
        make_image(rng, p, "png")
        data = open(p, "rb").read()
        open(p, "wb").write(data[: len(data) // 2])
    elif kind == "truncated jpeg":
        p = os.path.join(folder, f"bad{i}.jpg")
        make_image(rng, p, "jpg")
        data = open(p, "rb").read()
        open(p, "wb").write(data[: len(data) // 2])
    elif kind == "text named .jpg":
        p = os.path.join(folder, f"bad{i}.jpg")
        open(p, "w").write("this is not a JPEG\n")
    elif kind == "notes .txt":
        p = os.path.join(folder, f"notes{i}.txt")
        open(p, "w").write("some notes\n")
    elif kind == "zero-byte .png":
        p = os.path.join(folder, f"bad{i}.png")
        open(p, "wb").close()
    elif kind == "broken link":
        p = os.path.join(folder, f"bad{i}.png")
        os.symlink(f"missing{i}.png", p)
    else:
        p = os.path.join(folder, f"bad{i}.png")
        make_image(rng, p, "png")
        os.chmod(p, 0)
    return p


def build(src, n, seed=15):
    rng = random.Random(seed)
    classes = [f"n{k:04d}" + ("_x" if k % 3 == 0 else "") for k in range(20)]
    bad_count = n // 100
    bad_at = set(rng.sample(range(n), bad_count))
    bad = set()
    for i in range(n):
        folder = os.path.join(src, classes[i % len(classes)])
        if i % 7 == 0:
            folder = os.path.join(folder, "sub")
        os.makedirs(folder, exist_ok=True)
        if i in bad_at:
            bad.add(os.path.relpath(make_bad(rng, folder, i, BAD_KINDS[len(bad) % len(BAD_KINDS)]), src))
        else:
            kind = rng.choice(["png", "png", "png", "jpg", "jpg", "jpg", "ppm", "pgm", "bmp", "webp", "tif"])
            ext = {"jpg": rng.choice([".jpg", ".JPEG"]), "png": ".png", "ppm": ".ppm", "pgm": ".pgm", "bmp": ".bmp",
                   "webp": ".webp", "tif": rng.choice([".tif", ".TIFF"])}[kind]
            make_image(rng, os.path.join(folder, f"img{i}{ext}"), kind)
    return bad


def imagefolder_labels(src):
    """path relative to src -> label, and the classes, as torchvision's ImageFolder assigns them."""
    try:
        from torchvision.datasets import ImageFolder
        ds = ImageFolder(src, loader=lambda p: None)
        return {os.path.relpath(p, src): label for p, label in ds.samples}, ds.classes, "torchvision"
    except ImportError:
        classes = sorted(e.name for e in os.scandir(src) if e.is_dir())
        labels = {}
        for label, c in enumerate(classes):
            for root, _, files in os.walk(os.path.join(src, c), followlinks=True):
                for f in files:
                    if f.lower().endswith(IMG_EXTENSIONS):
                        labels[os.path.relpath(os.path.join(root, f), src)] = label
        return labels, classes, "ImageFolder's rule (torchvision not importable)"


def records(l3pack, out):
    """key -> label of every record, from `l3pack ls` (label column 'k:name' or '-')."""
    lines = subprocess.run(AS_NOBODY + [l3pack, "ls", out], check=True, capture_output=True, text=True).stdout.splitlines()[1:]
    result = {}
    for line in lines:
        fields = line.split()
        result[fields[-1]] = int(fields[2].split(":")[0])
    return result


def main():
    l3pack, work = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 10000
    src, out = os.path.join(work, "src"), os.path.join(work, "out")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    os.chmod(work, 0o777)  # l3pack (as nobody when we are root) writes OUT here
    t0 = time.time()
    bad = build(src, n)
    print(f"built {n} inputs ({len(bad)} bad) in {time.time() - t0:.1f} s")
    t0 = time.time()
    run = subprocess.run(AS_NOBODY + [l3pack, "convert", src, out], capture_output=True, text=True)
    seconds = time.time() - t0
    print(run.stdout, end="")
    if run.returncode != 0:
        print(run.stderr, end="")
        sys.exit("FAIL: convert exited %d" % run.returncode)
    print(f"convert: {seconds:.2f} s wall")
    skipped = {json.loads(line)["path"]: json.loads(line)["reason"] for line in open(os.path.join(out, "skipped.jsonl"))}
    failures = []
    if set(skipped) != bad:
        failures.append(f"skip list differs: not skipped {sorted(bad - set(skipped))[:5]}, "
                        f"skipped but good {sorted(set(skipped) - bad)[:5]}")
    reasons = {}
    for r in skipped.values():
        reasons[r] = reasons.get(r, 0) + 1
    print(f"skipped: {len(skipped)} by reason {reasons}")
    t0 = time.time()
    verify = subprocess.run(AS_NOBODY + [l3pack, "verify", out, "--source", src], capture_output=True, text=True)
    print(verify.stdout, end="")
    print(f"verify --source: {time.time() - t0:.2f} s wall, exit {verify.returncode}")
    if verify.returncode != 0:
        failures.append("verify --source failed: " + verify.stderr.strip()[:500])
    ours = records(l3pack, out)
    theirs, classes, how = imagefolder_labels(src)
    manifest = json.load(open(os.path.join(out, "manifest.json")))
    if manifest["classes"] != classes:
        failures.append("classes differ from ImageFolder's")
    common = set(ours) & set(theirs)
    wrong = [k for k in common if ours[k] != theirs[k]]
    only_theirs = set(theirs) - set(ours)
    print(f"labels vs {how}: {len(common)} files in both, {len(wrong)} differ; "
          f"{len(only_theirs)} ImageFolder files not records (all in the skip list: {only_theirs <= set(skipped)}); "
          f"{len(set(ours) - set(theirs))} records ImageFolder lacks")
    if wrong or not only_theirs <= set(skipped) or set(ours) - set(theirs) or len(ours) != n - len(bad):
        failures.append("labels or record set differ from ImageFolder's")
    for f in failures:
        print("FAIL:", f)
    if failures:
        sys.exit(1)
    print(f"PASS: {len(ours)} records, {len(skipped)} skipped = exactly the {len(bad)} bad inputs")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
