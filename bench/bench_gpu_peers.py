#!/usr/bin/env python3
"""NVIDIA's own GPU decoders on the images bench_cuda measured (issue 13).

Reads the image sets bench_cuda wrote with --write-ppm DIR (DIR/<W>x<H>/*.ppm:
the same corpus photos, cut to the same sizes) and, per size, on batches of
the same decoded size (--batch-mb, as bench_cuda):

  nvImageCodec HTJ2K  lossless High-Throughput JPEG 2000 (nvJPEG2000), encoded
                      on the GPU by nvImageCodec, decoded by nvImageCodec;
  nvImageCodec J2K    lossless JPEG 2000 (part 1), likewise;
  nvJPEG q90 / q95    JPEG 4:2:0 encoded by torchvision (libjpeg, CPU),
                      decoded by torchvision.io.decode_jpeg(device="cuda")
                      (nvJPEG), the lossy reference.

Every lossless stream is first decoded once and compared with the source
pixels (exact, or the row says it is not); a JPEG row gives its PSNR. Rates:
wall clock of one batched decode call (encoded bytes on the host to decoded
images on the GPU, as bench_cuda's e2e column), after a warm-up, --iters
calls, torch.cuda.synchronize() at the end. Appends a markdown section to
--out. Needs torch (with CUDA) and, for the JPEG 2000 rows, nvImageCodec
(nvidia-nvimgcodec-cu13 + nvidia-nvjpeg2k-cu13: scripts/gpu-kit.sh carries
them); a missing decoder is reported as such in the table, not skipped
silently.
"""
import argparse
import pathlib
import sys
import time


def read_ppm(path):
    import numpy as np

    data = path.read_bytes()
    # Header: "P6\n<w> <h>\n255\n" as bench_cuda writes it.
    parts = data.split(b"\n", 3)
    if parts[0] != b"P6" or parts[2] != b"255":
        raise ValueError(f"{path}: not a binary 8-bit PPM")
    w, h = (int(v) for v in parts[1].split())
    return np.frombuffer(parts[3], dtype=np.uint8, count=w * h * 3).reshape(h, w, 3).copy()


def timed(fn, iters):
    import torch

    fn()  # warm-up
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / iters


def nvimgcodec_rows(images, batch, iters):
    """Rows for HTJ2K and J2K lossless through nvImageCodec."""
    import numpy as np
    import torch

    try:
        from nvidia import nvimgcodec
    except Exception as e:  # noqa: BLE001 - reported in the table
        return [("nvImageCodec HTJ2K", None, f"not measured: import failed ({e})"),
                ("nvImageCodec J2K", None, f"not measured: import failed ({e})")]
    try:
        enc = nvimgcodec.Encoder()
        dec = nvimgcodec.Decoder()
    except Exception as e:  # noqa: BLE001 - reported in the table
        return [(label, None, f"not measured: no encoder/decoder ({type(e).__name__}: {e})")
                for label in ("nvImageCodec HTJ2K", "nvImageCodec J2K")]
    rows = []
    for label, ht in (("nvImageCodec HTJ2K", True), ("nvImageCodec J2K", False)):
        try:
            params = nvimgcodec.EncodeParams(
                quality_type=nvimgcodec.QualityType.LOSSLESS,
                jpeg2k_encode_params=nvimgcodec.Jpeg2kEncodeParams(
                    ht=ht, bitstream_type=nvimgcodec.J2K, mct_mode=1))
            streams = []
            for img in images:
                cs = enc.encode(torch.from_numpy(np.ascontiguousarray(img)).cuda(), "jpeg2k", params=params)
                if cs is None:
                    raise RuntimeError("encode returned None")
                streams.append(nvimgcodec.CodeStream(bytes(cs)))
            exact = True
            for img, cs in zip(images, streams):
                out = dec.decode(cs)
                if out is None:
                    raise RuntimeError("decode returned None")
                got = torch.from_dlpack(out).cpu().numpy()
                exact = exact and got.shape == img.shape and bool((got == img).all())
            sel = [streams[i % len(streams)] for i in range(batch)]
            ratio = sum(len(bytes(s)) for s in streams) / sum(i.nbytes for i in images)

            def run():
                outs = dec.decode(sel)
                if any(o is None for o in outs):
                    raise RuntimeError("a batched decode returned None")

            s = timed(run, iters)
            rows.append((label, s, f"{'exact' if exact else 'NOT EXACT'}; {ratio:.3f} of raw"))
        except Exception as e:  # noqa: BLE001 - reported in the table
            rows.append((label, None, f"failed: {type(e).__name__}: {e}"))
    return rows


def nvjpeg_rows(images, batch, iters):
    """Rows for JPEG q90/q95 through torchvision.io.decode_jpeg on the GPU."""
    import numpy as np
    import torch

    try:
        from torchvision.io import decode_jpeg, encode_jpeg
    except Exception as e:  # noqa: BLE001
        return [(f"nvJPEG q{q}", None, f"not measured: torchvision ({e})") for q in (90, 95)]
    rows = []
    tensors = [torch.from_numpy(np.ascontiguousarray(i)).permute(2, 0, 1).contiguous() for i in images]
    for q in (90, 95):
        try:
            jpegs = [encode_jpeg(t, quality=q) for t in tensors]
            mse = 0.0
            for t, j in zip(tensors, jpegs):
                d = decode_jpeg(j, device="cuda").cpu().float()
                mse += float(((d - t.float()) ** 2).mean())
            mse /= len(tensors)
            psnr = 10 * np.log10(255.0 ** 2 / mse) if mse > 0 else float("inf")
            sel = [jpegs[i % len(jpegs)] for i in range(batch)]
            ratio = sum(j.numel() for j in jpegs) / sum(t.numel() for t in tensors)
            s = timed(lambda: decode_jpeg(sel, device="cuda"), iters)
            rows.append((f"nvJPEG q{q}", s, f"lossy, PSNR {psnr:.1f} dB; {ratio:.3f} of raw"))
        except Exception as e:  # noqa: BLE001
            rows.append((f"nvJPEG q{q}", None, f"failed: {type(e).__name__}: {e}"))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--images", required=True, help="bench_cuda --write-ppm folder")
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch-mb", type=float, default=512)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--max-images", type=int, default=0,
                    help="distinct images per size to encode, 0: all (as bench_cuda; the batch cycles through them)")
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("bench_gpu_peers: torch sees no CUDA device", file=sys.stderr)
        return 1
    lines = ["", f"GPU peers on the same images ({torch.cuda.get_device_name()}, torch {torch.__version__}): "
             "one batched decode call per batch, encoded bytes on the host to images on the GPU, wall clock "
             f"over {args.iters} calls after one warm-up; the batch cycles through "
             f"{'the first %d' % args.max_images if args.max_images > 0 else 'all the'} images of each size "
             "in bench_cuda's order.", "",
             "| size | decoder | images/batch | GB/s | images/s | check |", "|---|---|---:|---:|---:|---|"]
    for d in sorted(pathlib.Path(args.images).iterdir()):
        if not d.is_dir():
            continue
        files = sorted(d.glob("*.ppm"))
        images = [read_ppm(p) for p in (files[: args.max_images] if args.max_images > 0 else files)]
        if not images:
            continue
        h, w, _ = images[0].shape
        batch = max(1, int(args.batch_mb * 1e6 / (w * h * 3)))
        raw = batch * w * h * 3
        for label, s, note in nvimgcodec_rows(images, batch, args.iters) + nvjpeg_rows(images, batch, args.iters):
            rate = f"{raw / s / 1e9:.1f} | {batch / s:.0f}" if s else "- | -"
            lines.append(f"| {w}x{h} | {label} | {batch} | {rate} | {note} |")
            print(lines[-1], flush=True)
    with open(args.out, "a") as f:
        f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
