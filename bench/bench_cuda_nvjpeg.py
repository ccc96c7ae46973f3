#!/usr/bin/env python3
"""nvJPEG baseline for bench_cuda: torchvision.io.decode_jpeg(device="cuda").

Re-encodes the same corpus PNGs as JPEG at quality 90 and 95 (torchvision's
encode_jpeg, 4:2:0 as libjpeg defaults), then decodes batches of 8/64/256 on
the GPU (batched decode_jpeg on a list), timed with CUDA events after warm-up.
Appends a markdown section to --out. Needs torch + torchvision with CUDA.
"""
import argparse
import pathlib
import sys


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default="bench/corpus")
    ap.add_argument("--out", required=True)
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    try:
        import torch
        import torchvision
        from torchvision.io import ImageReadMode, decode_jpeg, encode_jpeg, read_image
    except ImportError as e:  # reported, not fatal: the rest of the report stands
        with open(args.out, "a") as f:
            f.write(f"\nnvJPEG: not measured (torchvision unavailable: {e})\n")
        return 0
    paths = sorted(pathlib.Path(args.corpus).rglob("*.png"))
    imgs = []
    for p in paths:
        t = read_image(str(p), ImageReadMode.RGB)  # nvJPEG decodes 3-channel output here
        imgs.append(t)
    lines = [f"\nnvJPEG (torchvision {torchvision.__version__}, decode_jpeg on a list, device='cuda'), "
             f"RGB output, same {len(imgs)} images re-encoded as JPEG:\n",
             "| quality | batch | decoded GB/s | images/s | JPEG bytes / raw |", "|---:|---:|---:|---:|---:|"]
    for q in (90, 95):
        jpegs = [encode_jpeg(t, quality=q) for t in imgs]
        raw_sizes = [t.numel() for t in imgs]
        ratio = sum(j.numel() for j in jpegs) / sum(raw_sizes)
        for batch in (8, 64, 256):
            sel = [jpegs[i % len(jpegs)] for i in range(batch)]
            raw = sum(raw_sizes[i % len(jpegs)] for i in range(batch))
            for _ in range(3):
                decode_jpeg(sel, device="cuda")
            torch.cuda.synchronize()
            t0 = torch.cuda.Event(enable_timing=True)
            t1 = torch.cuda.Event(enable_timing=True)
            t0.record()
            for _ in range(args.iters):
                decode_jpeg(sel, device="cuda")
            t1.record()
            torch.cuda.synchronize()
            s = t0.elapsed_time(t1) / 1e3 / args.iters
            lines.append(f"| {q} | {batch} | {raw / s / 1e9:.1f} | {batch / s:.0f} | {ratio:.3f} |")
    with open(args.out, "a") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
