#!/usr/bin/env bash
# End-to-end reader benchmark: l3 reader (CPU decode) vs PyTorch DataLoader
# (ImageFolder of PNGs, PIL, torchvision transforms), same images, batch size,
# workers and transforms (RandomResizedCrop 224 + flip + normalise), in one run,
# alternating the two pipelines `--rounds` times. Writes bench/results/reader-<host>.md.
#
#   bench/run_reader_bench.sh [--build DIR] [--python PY] [--batch 16] [--workers 2]
#                             [--epochs 8] [--rounds 2] [--out FILE]
# PY must import torch, torchvision and PIL (e.g. a venv with
# `pip install torch torchvision pillow`).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
source "$here/reader_bench_common.sh"
build="$root/build-reader"
py="${L3_TORCH_PYTHON:-python3}"
batch=16 workers=2 epochs=8 rounds=2
out="$here/results/reader-$(hostname).md"
while (($#)); do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --python) py="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    --workers) workers="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "run_reader_bench: unknown option $1" >&2; exit 2 ;;
  esac
done

[[ -d "$here/corpus/photos" ]] || "$here/fetch_corpus.sh"
if [[ ! -x "$build/bench/bench_reader" ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DL3_CUDA=OFF -DL3_BUILD_BENCH=ON >/dev/null
  ninja -C "$build" bench_reader
fi

# ImageFolder: <class>/<file>, class = file-name prefix (the labels bench_reader uses).
folder="$(imagefolder "$here")"

results="$(mktemp)"
trap 'rm -f "$results"' EXIT
for ((r = 1; r <= rounds; r++)); do
  echo "round $r: torch" >&2
  "$py" "$here/bench_reader_torch.py" "$folder" --batch "$batch" --workers "$workers" --epochs "$epochs" >>"$results"
  echo "round $r: l3" >&2
  "$build/bench/bench_reader" --batch "$batch" --workers "$workers" --epochs "$epochs" >>"$results"
done

load="$(cut -d' ' -f1-3 /proc/loadavg)"
cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
commit="$(git -C "$root" rev-parse --short HEAD)"
dirty="$(uncommitted_note "$root" reader codec format common bench/bench_reader.cpp)"
"$py" - "$results" "$out" "$batch" "$workers" "$epochs" "$load" "$cpu" "$commit$dirty" <<'EOF'
import json, sys, statistics, datetime, os
res, out, batch, workers, epochs, load, cpu, commit = sys.argv[1:]
rows = [json.loads(l) for l in open(res) if l.startswith("{")]
by = {"l3": [], "torch": []}
for r in rows: by[r["pipeline"]].append(r)
l3 = [r["images_per_second"] for r in by["l3"]]
tv = [r["images_per_second"] for r in by["torch"]]
ratio = statistics.median(l3) / statistics.median(tv)
lines = []
lines.append(f"# Reader benchmark: l3 reader vs PyTorch DataLoader ({os.uname().nodename})\n")
lines.append(f"- date: {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC; commit {commit}")
lines.append(f"- CPU: {cpu}, {os.cpu_count()} hardware threads; load average at the end: {load}")
lines.append("- machine shared with other engineers building in parallel: absolute figures are noisy; "
             "the two pipelines ran alternately in one run, so the ratio is the figure to read.")
lines.append(f"- images: bench/corpus/photos ({by['l3'][0]['records']} photos, 2560x1600 wallpapers and scikit-image "
             "photos; 9 gray, converted to RGB by both pipelines)")
lines.append(f"- both: RandomResizedCrop 224 (scale 0.08-1, ratio 3/4-4/3, bilinear antialiased) + horizontal flip p=0.5 + "
             f"normalise (ImageNet mean/std), float32 CHW batches of {batch}, {workers} workers, {epochs} timed epochs after 1 warm-up epoch")
lines.append("- l3: `bench_reader` (CPU decode via decode_region of the crop box only, default codec options, prefetch 2, "
             "checksums verified, pad mode: 32 images per epoch for 29 records); output verified against full decodes before timing")
lines.append(f"- torch: `bench_reader_torch.py` (torch {by['torch'][0].get('torch','?')}, ImageFolder of the PNG files, PIL, "
             "DataLoader shuffle=True, persistent workers; 29 images per epoch)\n")
lines.append("| round | pipeline | images | seconds | images/s | bound by |")
lines.append("|---:|---|---:|---:|---:|---|")
n = 0
for r in rows:
    if r["pipeline"] == "torch": n += 1
    lines.append(f"| {n} | {r['pipeline']} | {r['images']} | {r['seconds']:.2f} | {r['images_per_second']:.1f} | "
                 f"{r.get('bottleneck', '-')} |")
lines.append("")
lines.append(f"Median images/s: l3 {statistics.median(l3):.1f}, torch {statistics.median(tv):.1f}: "
             f"**l3 / torch = {ratio:.2f}x**")
lines.append("")
status = "reached" if ratio >= 3 else "NOT reached"
lines.append(f"| bar | target | measured | status |\n|---|---|---|---|\n| end-to-end images/s vs PNG + PIL DataLoader | >= 3x | {ratio:.2f}x | {status} |")
m = by["l3"][-1]["metrics"]
b = m["busy_seconds"]
lines.append("")
lines.append(f"l3 stage busy seconds (last round, summed over threads): read {b['read']:.2f}, decode {b['decode']:.2f}, "
             f"transform {b['transform']:.2f}, assemble {b['assemble']:.2f}; consumer waited {m['wait_seconds']:.2f} s "
             f"of {m['wall_seconds']:.2f} s; bound by {m['bottleneck']}.")
open(out, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
echo "written: $out" >&2
