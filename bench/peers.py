#!/usr/bin/env python3
"""Peer-codec benchmark: l3 against the lossless codecs it must beat, on the same pixels.

For every image of the corpus (bench/corpus/<class>/*.png, classes as in make_corpus.py) and
every codec: the encoded bytes, and a decode checked exactly against the source pixels. A codec
whose output does not decode to the source is reported as failed for that image and never
counted in a total. Ratios are to PNG at libpng's default zlib level 6.

Codecs:
  PNG level 6 / 9  libpng with its default adaptive filters, and l3 (l3::encode defaults):
                   bench_inproc (C++, this repository's Debian libpng and l3), timed in-process
                   on one thread. l3 is also run through the CLI: `l3pack encode` then
                   `l3pack decode` to PAM, compared here; its bytes must equal bench_inproc's.
  the peers        PyPI imagecodecs (bundled CharLS, OpenJPH, OpenJPEG, libwebp, libjxl, QOI,
                   libavif + aom): JPEG-LS lossless, HTJ2K reversible, JPEG 2000 reversible 5/3
                   (RCT), WebP lossless at cwebp's -z 6 and -z 9 presets, JPEG XL lossless at
                   effort 1/3/7, QOI, AVIF lossless (speed 6). Timed through the Python wrapper
                   on one thread (numthreads=1 where the wrapper has it).
Gray images go to WebP and QOI, which have no gray mode, as RGB with three equal channels
(the check compares with that); an opaque alpha plane that WebP or AVIF leave implicit is
restored as 255 before the check (the note column says so).

Timing: an encode repeats until >= 1 run and >= min_time/2 seconds, a decode until >= 3 runs
and >= min_time seconds; the fastest run counts. MB/s = raw (decoded) bytes / s, MB = 10^6.

Usage: peers.py [--corpus DIR | --images FILE...] [--codecs LIST] [--l3pack BIN]
                [--bench-inproc BIN] [--out REPORT.md] [--tsv FILE] [--min-time S]
Run it through bench/run_peers.sh, which builds the binaries and a venv with imagecodecs.
"""
import argparse
import dataclasses
import datetime
import hashlib
import multiprocessing
import os
import pickle
import platform
import subprocess
import sys
import tempfile
import time
import zlib

import numpy as np
from PIL import Image

CLASSES = ("jpeg_photos", "photos", "graphics", "synthetic", "rgba_opaque")
# Groups of classes the issue 12 bars are stated for.
PHOTO_CLASSES = ("jpeg_photos", "photos")
GRAPHIC_CLASSES = ("graphics", "synthetic")


@dataclasses.dataclass
class Codec:
    key: str
    label: str
    encode: object = None  # array -> bytes (Python peers)
    decode: object = None  # bytes -> array
    gray: bool = True  # takes a 2-D gray array
    alpha_hint: bool = False  # decode(data, alpha=True) restores an opaque alpha plane
    where: str = "Python wrapper"


@dataclasses.dataclass
class Result:
    bytes: int = 0
    enc_s: float = float("nan")
    dec_s: float = float("nan")
    error: str = ""  # non-empty: failed, never counted
    note: str = ""
    skipped: bool = False  # not measured (--cached-only and not in the cache)

    @property
    def ok(self):
        return not self.error and not self.skipped


def fastest(f, min_runs, min_total):
    best, total, runs = float("inf"), 0.0, 0
    while runs < min_runs or total < min_total:
        t0 = time.perf_counter()
        f()
        dt = time.perf_counter() - t0
        best, total, runs = min(best, dt), total + dt, runs + 1
    return best


def imagecodecs_codecs():
    """The Python peers, or [] and the reason when imagecodecs cannot be imported."""
    try:
        import imagecodecs as ic
    except ImportError as e:
        return [], f"imagecodecs not importable ({e}): peers not run"
    lossless = ic.AVIF.QUALITY.LOSSLESS

    def webp(level, method):
        return dict(encode=lambda a: ic.webp_encode(a, lossless=True, level=level, method=method, numthreads=1),
                    decode=lambda b, alpha=False: ic.webp_decode(b, hasalpha=True if alpha else None))

    def jxl(effort):
        return dict(encode=lambda a: ic.jpegxl_encode(a, lossless=True, effort=effort, numthreads=1),
                    decode=lambda b: ic.jpegxl_decode(b, numthreads=1))

    codecs = [
        Codec("webp_z6", "WebP z6", gray=False, alpha_hint=True, **webp(75, 4)),
        Codec("webp_z9", "WebP z9", gray=False, alpha_hint=True, **webp(100, 6)),
        Codec("jxl_e1", "JXL e1", **jxl(1)),
        Codec("jxl_e3", "JXL e3", **jxl(3)),
        Codec("jxl_e7", "JXL e7", **jxl(7)),
        Codec("jpegls", "JPEG-LS", encode=lambda a: ic.jpegls_encode(a, level=0), decode=ic.jpegls_decode),
        Codec("j2k", "J2K 5/3", encode=lambda a: ic.jpeg2k_encode(a, level=0, reversible=True, numthreads=1),
              decode=lambda b: ic.jpeg2k_decode(b, numthreads=1)),
        Codec("htj2k", "HTJ2K", encode=lambda a: ic.htj2k_encode(a, reversible=True), decode=ic.htj2k_decode),
        Codec("qoi", "QOI", encode=ic.qoi_encode, decode=ic.qoi_decode, gray=False),
        Codec("avif", "AVIF s6", encode=lambda a: ic.avif_encode(a, level=lossless, speed=6, numthreads=1),
              decode=lambda b: ic.avif_decode(b, numthreads=1)),
    ]
    v = ic.version(dict)
    libs = ["charls", "openjph", "openjpeg", "libwebp", "libjxl", "qoi", "libavif"]
    return codecs, "imagecodecs " + ic.__version__ + " (" + ", ".join(f"{k} {v.get(k, '?')}" for k in libs) + ")"


def test_codecs():
    """Two stand-ins that exercise the check (--test-codecs, used by the smoke test): 'test zlib'
    is exact; 'test lossy' flips one bit of one sample and must be reported as failed."""
    def enc(a):
        head = np.array([a.ndim, *a.shape, 0, 0, 0][:4], "<i4").tobytes()
        return head + zlib.compress(a.tobytes(), 1)

    def unpack(b):
        h = np.frombuffer(b[:16], "<i4")
        return np.frombuffer(zlib.decompress(b[16:]), np.uint8).reshape(tuple(h[1:1 + h[0]])).copy()

    def lossy(b):
        a = unpack(b)
        a.flat[a.size // 2] ^= 1
        return a

    return [Codec("test_zlib", "test zlib", encode=enc, decode=unpack),
            Codec("test_lossy", "test lossy", encode=enc, decode=lossy)]


def load(path):
    with Image.open(path) as im:
        if im.mode not in ("L", "RGB", "RGBA"):
            raise ValueError(f"{path}: mode {im.mode}; the corpus holds L, RGB and RGBA")
        return np.asarray(im).copy()


def run_codec(codec, src, min_time):
    """Encodes, decodes and checks; times only what passed the check."""
    img, note = src, ""
    if src.ndim == 2 and not codec.gray:
        img, note = np.repeat(src[..., None], 3, axis=2), "gray stored as RGB"
    alpha = img.ndim == 3 and img.shape[2] == 4
    dec = (lambda b: codec.decode(b, alpha=True)) if alpha and codec.alpha_hint else codec.decode
    try:
        t0 = time.perf_counter()
        data = codec.encode(img)
        enc_s = time.perf_counter() - t0
        out = np.asarray(dec(data))
        if alpha and out.shape == img.shape[:2] + (3,) and (img[..., 3] == 255).all():
            out = np.concatenate([out, np.full(img.shape[:2] + (1,), 255, np.uint8)], axis=2)
            note = "opaque alpha implied"
        if out.shape != img.shape or out.dtype != img.dtype:
            return Result(len(data), error=f"decodes to {out.shape} {out.dtype}, source {img.shape} {img.dtype}")
        if not np.array_equal(out, img):
            return Result(len(data), error=f"{int(np.count_nonzero(out != img))} samples differ")
    except Exception as e:  # a peer that cannot code this image is a failure, reported as such
        return Result(0, error=f"{type(e).__name__}: {e}")
    if min_time / 2 > enc_s:
        enc_s = min(enc_s, fastest(lambda: codec.encode(img), 1, min_time / 2 - enc_s))
    dec_s = fastest(lambda: dec(data), 3, min_time)
    return Result(len(data), enc_s, dec_s, note=note)


def run_inproc(binary, files, min_time):
    """bench_inproc's rows by file: bytes and seconds of PNG 6, PNG 9 and l3 (C++)."""
    proc = subprocess.run([binary, "--min-time", str(min_time)] + files, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"peers: bench_inproc failed: {proc.stderr.strip()}")
    lines = proc.stdout.splitlines()
    head = lines[0].split("\t")
    rows = {}
    for line in lines[1:]:
        rec = dict(zip(head, line.split("\t")))
        out = {}
        for key in ("png6", "png9", "l3"):
            out[key] = Result(int(rec[key]), float(rec[key + "_enc_s"]), float(rec[key + "_dec_s"]),
                              note="C++ in-process")
        rows[rec["file"]] = (int(rec["raw"]), out)
    return rows


def read_pnm(path):
    """Binary PGM (P5), PPM (P6) or PAM (P7), maxval 255: what `l3pack decode` writes."""
    with open(path, "rb") as f:
        data = f.read()
    magic = data[:2]
    fields, pos = {}, 2
    if magic == b"P7":
        end = data.index(b"ENDHDR\n") + len(b"ENDHDR\n")
        for line in data[3:end].decode().splitlines():
            parts = line.split()
            if len(parts) == 2:
                fields[parts[0]] = parts[1]
        w, h, c, body = int(fields["WIDTH"]), int(fields["HEIGHT"]), int(fields["DEPTH"]), data[end:]
    elif magic in (b"P5", b"P6"):
        toks = []
        while len(toks) < 3:
            while data[pos:pos + 1].isspace():
                pos += 1
            start = pos
            while not data[pos:pos + 1].isspace():
                pos += 1
            toks.append(int(data[start:pos]))
        w, h, c, body = toks[0], toks[1], 1 if magic == b"P5" else 3, data[pos + 1:]
    else:
        raise ValueError(f"{path}: not a binary PNM")
    a = np.frombuffer(body, np.uint8, w * h * c)
    return a.reshape((h, w) if c == 1 else (h, w, c))


def run_l3pack(l3pack, path, src, tmp):
    """`l3pack encode` then `l3pack decode`, compared with the source (wall seconds of the CLI)."""
    enc = os.path.join(tmp, "x.l3i")
    ext = ".pgm" if src.ndim == 2 else ".ppm" if src.shape[2] == 3 else ".pam"
    dec = os.path.join(tmp, "x" + ext)
    t0 = time.perf_counter()
    subprocess.run([l3pack, "encode", path, enc], check=True)
    t1 = time.perf_counter()
    subprocess.run([l3pack, "decode", enc, dec], check=True)
    t2 = time.perf_counter()
    n = os.path.getsize(enc)
    out = read_pnm(dec)
    if out.shape != src.shape or not np.array_equal(out, src):
        return Result(n, error="l3pack decode differs from the source")
    return Result(n, t1 - t0, t2 - t1, note="CLI wall time, all cores")


def list_images(args):
    """(class, name, path) in class order; --images takes the class from the parent folder."""
    if args.images:
        return [(os.path.basename(os.path.dirname(os.path.abspath(p))) or "images",
                 os.path.splitext(os.path.basename(p))[0], p) for p in args.images]
    out = []
    for cls in args.classes.split(","):
        d = os.path.join(args.corpus, cls)
        if not os.path.isdir(d):
            raise SystemExit(f"peers: no folder {d} (run bench/fetch_corpus.sh)")
        for f in sorted(os.listdir(d)):
            if f.endswith(".png"):
                out.append((cls, os.path.splitext(f)[0], os.path.join(d, f)))
    return out


def read_manifest(corpus):
    """{(class, name): (source_format, source)} from manifest.tsv, if there is one."""
    path = os.path.join(corpus, "manifest.tsv")
    if not os.path.exists(path):
        return {}
    rows = {}
    with open(path) as f:
        head = f.readline().rstrip("\n").split("\t")
        for line in f:
            r = dict(zip(head, line.rstrip("\n").split("\t")))
            rows[(r["class"], os.path.splitext(r["file"])[0])] = (r["source_format"], r["source"])
    return rows


IN_PROCESS = [Codec("png6", "PNG 6", where="C++ in-process"), Codec("png9", "PNG 9", where="C++ in-process"),
              Codec("l3", "l3", where="C++ in-process")]


_WORK = {}  # args, images, codecs and manifest for measure_one (shared with forked workers)


def cache_path(args, path, l3_binaries):
    """Per-image cache file: results survive an interrupted run and merge runs of other codecs.
    Keyed by the image's path, size and mtime and --min-time; the l3 rows (png6, png9, l3, l3_cli:
    bench_inproc and l3pack) also by the binaries' mtimes, so that a rebuilt l3 remeasures l3 and
    PNG but reuses the peers' rows, which do not depend on it."""
    st = os.stat(path)
    key = f"{os.path.abspath(path)}|{st.st_size}|{st.st_mtime_ns}|{args.min_time}"
    if l3_binaries:
        key += f"|{os.stat(args.l3pack).st_mtime_ns}|{os.stat(args.bench_inproc).st_mtime_ns}|l3"
    return os.path.join(args.cache, hashlib.sha256(key.encode()).hexdigest()[:24] + ".pickle")


L3_KEYS = ("png6", "png9", "l3", "l3_cli")


def load_cache(cfile):
    if not os.path.exists(cfile):
        return {}
    with open(cfile, "rb") as f:
        return pickle.load(f)


def store_cache(cfile, res):
    """Merges `res` into cfile (another run may have added codecs meanwhile: keep them)."""
    merged = {**load_cache(cfile), **res}
    with open(cfile + f".{os.getpid()}.tmp", "wb") as f:
        pickle.dump(merged, f)
    os.replace(cfile + f".{os.getpid()}.tmp", cfile)


def measure_one(i):
    """Row of image i: its Results by codec key (bench_inproc, l3pack CLI, then the peers),
    reusing what --cache already holds for this image."""
    args, (cls, name, path) = _WORK["args"], _WORK["images"][i]
    cached = {}
    if args.cache:
        l3_file, peer_file = cache_path(args, path, True), cache_path(args, path, False)
        cached = {**{k: v for k, v in load_cache(peer_file).items() if k not in L3_KEYS},
                  **{k: v for k, v in load_cache(l3_file).items() if k in L3_KEYS}}
    src = load(path)
    res = {k: v for k, v in cached.items() if k in L3_KEYS}
    if len(res) < len(L3_KEYS):
        raw, res = run_inproc(args.bench_inproc, [path], args.min_time)[path]
        if raw != src.size:
            raise SystemExit(f"peers: {path}: bench_inproc read {raw} bytes, Pillow {src.size}")
        with tempfile.TemporaryDirectory(prefix="l3peers-") as tmp:
            cli = run_l3pack(args.l3pack, path, src, tmp)
        res["l3_cli"] = cli
        if cli.ok and cli.bytes != res["l3"].bytes:
            cli.error = f"l3pack wrote {cli.bytes} bytes, l3::encode {res['l3'].bytes}"
        if not cli.ok:
            res["l3"].error = "CLI: " + cli.error
    for c in _WORK["codecs"]:
        if c.key in cached:
            res[c.key] = cached[c.key]
        elif args.cached_only:
            res[c.key] = Result(skipped=True)
        else:
            res[c.key] = run_codec(c, src, args.min_time)
    if args.cache:
        os.makedirs(args.cache, exist_ok=True)
        kept = {k: v for k, v in res.items() if not v.skipped}
        store_cache(l3_file, {k: v for k, v in kept.items() if k in L3_KEYS})
        store_cache(peer_file, {k: v for k, v in kept.items() if k not in L3_KEYS})
    shape = "x".join(map(str, src.shape[1::-1] + ((src.shape[2],) if src.ndim == 3 else (1,))))
    fmt = _WORK["manifest"].get((cls, name), ("", ""))[0]
    return dict(cls=cls, name=name, path=path, shape=shape, raw=src.size, source=fmt, res=res)


def measure(args, images, codecs, log):
    """Rows in image order; --jobs > 1 measures images in forked worker processes (sizes are
    unaffected; the timings then share the cores)."""
    _WORK.update(args=args, images=images, codecs=codecs,
                 manifest=read_manifest(args.corpus) if not args.images else {})
    rows = []
    pool = multiprocessing.get_context("fork").Pool(args.jobs) if args.jobs > 1 else None
    try:
        it = pool.imap(measure_one, range(len(images))) if pool else map(measure_one, range(len(images)))
        for i, row in enumerate(it):
            res = row["res"]
            bad = [k for k, r in res.items() if not r.ok and not r.skipped]
            log(f"[{i + 1}/{len(images)}] {row['cls']}/{row['name']} {row['shape']}: l3 "
                f"{res['l3'].bytes / res['png6'].bytes:.3f}x PNG" + (f"; failed: {', '.join(bad)}" if bad else ""))
            rows.append(row)
    finally:
        if pool:
            pool.close()
            pool.join()
    return rows


def total(rows, key, classes):
    """Sums over the images of `classes` where `key` passed: bytes, PNG 6 bytes, raw, seconds."""
    t = dict(n=0, ok=0, skipped=0, bytes=0, png=0, raw=0, enc=0.0, dec=0.0)
    for r in rows:
        if r["cls"] not in classes:
            continue
        t["n"] += 1
        res = r["res"].get(key)
        t["skipped"] += res is None or res.skipped
        if res is None or not res.ok:
            continue
        t["ok"] += 1
        t["bytes"] += res.bytes
        t["png"] += r["res"]["png6"].bytes
        t["raw"] += r["raw"]
        t["enc"] += res.enc_s
        t["dec"] += res.dec_s
    return t


def ratio_cell(t):
    if t["ok"] == 0:
        return "not measured" if t["skipped"] == t["n"] else "failed" if t["n"] else "-"
    cell = f"{t['bytes'] / t['png']:.3f}"
    if t["skipped"]:
        return f"{cell} ({t['n'] - t['skipped']}/{t['n']} measured)"
    return cell if t["ok"] == t["n"] else f"{cell} ({t['ok']}/{t['n']})"


def mbps(raw, s):
    if not s > 0:
        return "-"
    v = raw / s / 1e6
    return f"{v:.1f}" if v >= 10 else f"{v:.2f}" if v >= 0.1 else f"{v:.3f}"


def git_commit(root):
    try:
        rev = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no", "--",
                                "codec", "common", "bench", "converters"], capture_output=True, text=True).stdout
        return rev + (" (codec/, common/, converters/ or bench/ modified)" if dirty.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def class_groups(rows):
    present = [c for c in CLASSES if any(r["cls"] == c for r in rows)]
    present += sorted({r["cls"] for r in rows} - set(CLASSES))
    groups = [(c, (c,)) for c in present]
    if all(any(r["cls"] == c for r in rows) for c in GRAPHIC_CLASSES):
        groups.insert(present.index(GRAPHIC_CLASSES[1]) + 1, ("graphics+synthetic", GRAPHIC_CLASSES))
    return groups


def size_section(rows, codecs, groups):
    out = ["## Size: total bytes / PNG level 6 bytes, per class", "",
           "Each class total counts only the images a codec decoded exactly; (k/n) marks a codec that "
           "failed on some (see Failures). Lower is better.", ""]
    out.append("| codec | " + " | ".join(g for g, _ in groups) + " |")
    out.append("|---|" + "---:|" * len(groups))
    png = [total(rows, "png6", cls) for _, cls in groups]
    out.append("| images | " + " | ".join(str(t["n"]) for t in png) + " |")
    out.append("| PNG 6 bytes | " + " | ".join(str(t["png"]) for t in png) + " |")
    for c in codecs:
        out.append(f"| {c.label} | " + " | ".join(ratio_cell(total(rows, c.key, cls)) for _, cls in groups) + " |")
    return out + [""]


def speed_section(rows, codecs):
    groups = [("photos (jpeg_photos + photos)", PHOTO_CLASSES), ("graphics (graphics + synthetic)", GRAPHIC_CLASSES)]
    groups = [g for g in groups if any(r["cls"] in g[1] for r in rows)] or [("all", tuple({r["cls"] for r in rows}))]
    out = ["## Single-thread speed (MB/s of raw bytes)", "",
           "C++ in-process: bench_inproc (libpng, l3). Python wrapper: imagecodecs calls timed from "
           "Python, output allocation included; read them as indications, not as the libraries' best. "
           "x libpng = decode MB/s / libpng level-6 decode MB/s of the same images.", ""]
    head = "| codec | timed in | " + " | ".join(f"{g} encode | {g} decode | {g} decode x libpng" for g, _ in groups)
    out += [head + " |", "|---|---|" + "---:|" * (3 * len(groups))]
    for c in codecs:
        cells = []
        for _, cls in groups:
            t, p = total(rows, c.key, cls), total(rows, "png6", cls)
            ok = [r for r in rows if r["cls"] in cls and r["res"][c.key].ok]
            p_dec = sum(r["res"]["png6"].dec_s for r in ok)
            x = (p_dec / t["dec"]) if t["dec"] > 0 else float("nan")
            cells += [mbps(t["raw"], t["enc"]), mbps(t["raw"], t["dec"]), f"{x:.2f}" if t["ok"] else "-"]
        out.append(f"| {c.label} | {c.where} | " + " | ".join(cells) + " |")
    return out + [""]


def rgba_section(rows, codecs, manifest):
    pairs = []
    by_name = {(r["cls"], r["name"]): r for r in rows}
    for r in rows:
        if r["cls"] != "rgba_opaque":
            continue
        src = manifest.get(("rgba_opaque", r["name"]), ("", ""))[1].split(" ")[0]
        twin = by_name.get((os.path.dirname(src), os.path.splitext(os.path.basename(src))[0]))
        if twin:
            pairs.append((r, twin))
    if not pairs:
        return []
    out = ["## Opaque RGBA: bytes of the RGBA copy / bytes of the same RGB pixels", "",
           "| image | " + " | ".join(c.label for c in codecs) + " |", "|---|" + "---:|" * len(codecs)]
    for a, b in pairs:
        cells = []
        for c in codecs:
            ra, rb = a["res"][c.key], b["res"][c.key]
            cells.append(f"{ra.bytes / rb.bytes:.3f}" if ra.ok and rb.ok else
                         "-" if ra.skipped or rb.skipped else "failed")
        out.append(f"| {a['name']} | " + " | ".join(cells) + " |")
    return out + [""]


def bar_section(rows, manifest):
    """Issue 12's bars, measured for today's l3 (and where the strongest peers stand)."""
    def ratio(key, cls):
        t = total(rows, key, cls)
        return t["bytes"] / t["png"] if t["ok"] == t["n"] and t["n"] else float("nan")

    def status(v, target):
        return "reached" if v <= target else f"NOT reached (+{v - target:.3f})"

    out = ["## Issue 12 bars against today's l3 (default encoder)", "",
           "| bar | target | l3 | status | WebP z6 | JXL e7 | HTJ2K |", "|---|---|---:|---|---:|---:|---:|"]
    for label, cls, target in (("JPEG-sourced photos (jpeg_photos)", ("jpeg_photos",), 0.72),
                               ("other photos (photos)", ("photos",), 0.70),
                               ("graphics (graphics + synthetic)", GRAPHIC_CLASSES, 0.70)):
        if not any(r["cls"] in cls for r in rows):
            continue
        v = ratio("l3", cls)
        out.append(f"| {label}: total bytes / PNG | <= {target:.2f}x | {v:.3f} | {status(v, target)} | "
                   + " | ".join(f"{ratio(k, cls):.3f}".replace("nan", "-") for k in ("webp_z6", "jxl_e7", "htj2k"))
                   + " |")
    worst = sorted((r for r in rows if r["res"]["l3"].ok),
                   key=lambda r: -r["res"]["l3"].bytes / r["res"]["png6"].bytes)
    over = [r for r in worst if r["res"]["l3"].bytes / r["res"]["png6"].bytes > 1.05]
    top = worst[0]["res"]["l3"].bytes / worst[0]["res"]["png6"].bytes if worst else float("nan")
    out.append(f"| no single image above 1.05x PNG | <= 1.05x | max {top:.3f} | "
               + ("reached" if not over else f"NOT reached ({len(over)} of {len(worst)} images above)")
               + " | | | |")
    rgba = rgba_pairs_l3(rows, manifest)
    if rgba:
        top = max(rgba)
        out.append(f"| opaque RGBA within 1% of RGB | <= 1.01x | max {top:.3f} | "
                   + ("reached" if top <= 1.01 else f"NOT reached (+{top - 1.01:.3f})") + " | | | |")
    for label, cls in (("photos", PHOTO_CLASSES), ("graphics", GRAPHIC_CLASSES)):
        t, p = total(rows, "l3", cls), total(rows, "png6", cls)
        if t["n"] and t["ok"] == t["n"]:
            dec, enc = p["dec"] / t["dec"], p["enc"] / t["enc"]
            out.append(f"| single-thread decode vs libpng, {label} | >= 2.0x | {dec:.2f} | "
                       + ("reached" if dec >= 2 else f"NOT reached (-{2 - dec:.2f})") + " | | | |")
            out.append(f"| default-effort encode vs libpng level 6, {label} | >= 1.0x | {enc:.2f} | "
                       + ("reached" if enc >= 1 else f"NOT reached (-{1 - enc:.2f})") + " | | | |")
    out += ["", "Speed bars: bench_inproc's single-thread timings on this run's machine (header); "
            "the machine may be shared, see the load average.", ""]
    if over:
        out += [f"### Images where l3 is above 1.05x PNG ({len(over)})", "",
                "| image | size | l3 bytes | PNG 6 bytes | l3 x PNG | WebP z6 x PNG |", "|---|---|---:|---:|---:|---:|"]
        for r in over:
            l3, png, wp = r["res"]["l3"].bytes, r["res"]["png6"].bytes, r["res"].get("webp_z6")
            out.append(f"| {r['cls']}/{r['name']} | {r['shape']} | {l3} | {png} | {l3 / png:.3f} | "
                       + (f"{wp.bytes / png:.3f}" if wp and wp.ok else "-") + " |")
        out.append("")
    return out


def rgba_pairs_l3(rows, manifest):
    by_name = {(r["cls"], r["name"]): r for r in rows}
    out = []
    for r in rows:
        if r["cls"] != "rgba_opaque":
            continue
        src = manifest.get(("rgba_opaque", r["name"]), ("", ""))[1].split(" ")[0]
        twin = by_name.get((os.path.dirname(src), os.path.splitext(os.path.basename(src))[0]))
        if twin and r["res"]["l3"].ok and twin["res"]["l3"].ok:
            out.append(r["res"]["l3"].bytes / twin["res"]["l3"].bytes)
    return out


def image_section(rows, codecs):
    marks = {"gray stored as RGB": "g", "opaque alpha implied": "a"}
    out = ["## Per image: bytes / PNG level 6 bytes", "",
           "Marks: g = gray stored as RGB (the codec has no gray mode), a = the decoder left the opaque "
           "alpha implicit (restored as 255 before the check). FAIL: not exact, see Failures. "
           "-: not measured.", "",
           "| class | image | size | source | PNG 6 bytes | " + " | ".join(c.label for c in codecs[1:]) + " |",
           "|---|---|---|---|---:|" + "---:|" * (len(codecs) - 1)]
    for r in rows:
        png = r["res"]["png6"].bytes
        cells = []
        for c in codecs[1:]:
            res = r["res"][c.key]
            cells.append("-" if res.skipped else "FAIL" if not res.ok else
                         f"{res.bytes / png:.3f}" + marks.get(res.note, ""))
        out.append(f"| {r['cls']} | {r['name']} | {r['shape']} | {r['source']} | {png} | " + " | ".join(cells) + " |")
    return out + [""]


def failure_section(rows, codecs):
    fails = [(r, c, r["res"][c.key]) for r in rows for c in codecs
             if not r["res"][c.key].ok and not r["res"][c.key].skipped]
    out = ["## Failures", ""]
    if not fails:
        return out + ["None: every codec decoded every image exactly.", ""]
    out += ["| image | codec | why |", "|---|---|---|"]
    out += [f"| {r['cls']}/{r['name']} | {c.label} | {res.error.replace('|', '/')} |" for r, c, res in fails]
    return out + [""]


def write_tsv(path, rows, codecs):
    with open(path + ".tmp", "w") as f:
        f.write("class\timage\tsize\tsource\traw\tcodec\tbytes\tx_png6\tencode_s\tdecode_s\tstatus\tnote\n")
        for r in rows:
            png = r["res"]["png6"].bytes
            for key in [c.key for c in codecs] + ["l3_cli"]:
                res = r["res"][key]
                if res.skipped:
                    continue
                f.write(f"{r['cls']}\t{r['name']}\t{r['shape']}\t{r['source']}\t{r['raw']}\t{key}\t{res.bytes}\t"
                        f"{res.bytes / png:.4f}\t{res.enc_s:.6g}\t{res.dec_s:.6g}\t"
                        f"{'ok' if res.ok else 'FAIL: ' + res.error}\t{res.note}\n")
    os.replace(path + ".tmp", path)


def report(args, rows, codecs, versions, wall):
    manifest = read_manifest(args.corpus) if not args.images else {}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    groups = class_groups(rows)
    load_avg = " ".join(open("/proc/loadavg").read().split()[:3]) if os.path.exists("/proc/loadavg") else "?"
    lines = ["# Lossless codecs side by side: l3 and its peers", "",
             f"- Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
             f"- Commit: {args.commit or git_commit(root)}",
             f"- Command: `{os.environ.get('L3_PEERS_COMMAND') or ' '.join(sys.argv)}`",
             f"- Host: {platform.node()}, {cpu_model()}, {os.cpu_count()} hardware threads; load average at "
             f"the end {load_avg}; wall time {wall:.0f} s",
             f"- Python {platform.python_version()}, numpy {np.__version__}, Pillow {Image.__version__}; {versions}",
             "- PNG (the denominator): libpng at zlib level 6 (its default), default adaptive filters, "
             "through bench_inproc (this repository's build against Debian's libpng and zlib; the same "
             "bytes as bench_codec's PNG column). PNG 9: the same at zlib level 9.",
             "- l3: l3::encode defaults (the stream version the default encoder writes); bytes and the exactness check also through "
             "`l3pack encode` + `l3pack decode` (CLI), which must agree with the in-process bytes.",
             f"- Corpus: {args.corpus if not args.images else 'files given with --images'} "
             f"({len(rows)} images; bench/make_corpus.py; manifest.tsv has every source)", ""]
    lines += size_section(rows, codecs, groups)
    lines += bar_section(rows, manifest)
    lines += rgba_section(rows, codecs, manifest)
    lines += speed_section(rows, codecs)
    lines += failure_section(rows, codecs)
    lines += image_section(rows, codecs)
    return "\n".join(lines)


def parse_args(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=os.path.join(here, "corpus"))
    ap.add_argument("--classes", default=",".join(CLASSES), help="comma-separated corpus classes")
    ap.add_argument("--images", nargs="+", help="these PNG files instead of the corpus")
    ap.add_argument("--codecs", help="comma-separated peer keys to run (default all); PNG and l3 always run")
    ap.add_argument("--test-codecs", action="store_true", help="add two stand-in codecs that test the check")
    ap.add_argument("--no-peers", action="store_true", help="PNG and l3 only")
    ap.add_argument("--l3pack", required=True)
    ap.add_argument("--bench-inproc", required=True)
    ap.add_argument("--cache", help="folder of per-image results to reuse (resume, or add codecs to a run)")
    ap.add_argument("--cached-only", action="store_true",
                    help="report the peers from --cache only; what it lacks is marked not measured")
    ap.add_argument("--jobs", type=int, default=1, help="images measured in parallel (default 1)")
    ap.add_argument("--min-time", type=float, default=0.1, help="seconds each decode repeats for (default 0.1)")
    ap.add_argument("--out", help="write the Markdown report here (default: print it)")
    ap.add_argument("--tsv", help="write every figure here, one line per image and codec")
    ap.add_argument("--commit", help="commit to name in the report (default: git rev-parse --short HEAD)")
    return ap.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    peers, versions = ([], "peers not run (--no-peers)") if args.no_peers else imagecodecs_codecs()
    if args.codecs:
        keys = args.codecs.split(",")
        unknown = set(keys) - {c.key for c in peers}
        if unknown and peers:
            raise SystemExit(f"peers: unknown codec(s) {', '.join(sorted(unknown))}; "
                             f"known: {', '.join(c.key for c in peers)}")
        peers = [c for c in peers if c.key in keys]
    if args.test_codecs:
        peers += test_codecs()
    images = list_images(args)
    if not images:
        raise SystemExit("peers: no images")
    start = time.perf_counter()
    rows = measure(args, images, peers, lambda m: print(m, file=sys.stderr, flush=True))
    codecs = IN_PROCESS + peers
    text = report(args, rows, codecs, versions, time.perf_counter() - start)
    if args.tsv:
        write_tsv(args.tsv, rows, codecs)
    if args.out:
        with open(args.out + ".tmp", "w") as f:
            f.write(text + "\n")
        os.replace(args.out + ".tmp", args.out)
        print(f"peers: report written to {args.out}", file=sys.stderr)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
