#!/usr/bin/env bash
# End-to-end reader benchmark on a CUDA machine: `l3pack bench-read --device
# cuda` (decode and transforms on the GPU, batches in device memory) against
# the PyTorch DataLoader (ImageFolder of PNGs, PIL, torchvision transforms on
# CPU workers) and, for reference, the l3 reader on the CPU (`--device cpu`).
# Same photos, batch size and transforms (RandomResizedCrop 224 + flip p=0.5
# + normalise, float32 CHW); the pipelines alternate `--rounds` times in one
# run. Before timing, the GPU reader tests must pass (batches byte-identical
# to the CPU pipeline). Writes bench/results/reader-gpu-<gpu name>.md.
#
#   bench/run_reader_gpu_bench.sh [--build DIR] [--python PY] [--batch 64]
#                                 [--workers N] [--epochs 8] [--rounds 2] [--device 0] [--out FILE]
#                                 [--min-images N] [--cut WxH] [--prepare-only]
# --min-images N: the photos are linked as many times as it takes to reach N
# images (the carried corpus has a few dozen). --prepare-only: build the
# ImageFolder and convert the dataset, then stop (the CPU part, for the GPU
# kit's dry run). --cut WxH (e.g. 500x375, ImageNet's typical size): each
# photo is cut into as many WxH pieces as it holds (PIL, no resampling), so the
# images are distinct and of training size; they are then linked up to N. The
# CPU time of each l3 run (its process, all threads) is reported as cores busy.
# The raw timings (one JSON line per run) are kept in
# bench/work/reader-gpu-results.jsonl.
# PY should import torch, torchvision and PIL (without them the torch rows are
# left out, with a warning). --workers: the torch DataLoader's and the l3 CPU
# reader's worker count (default: all cores). Environment: BUILD_DIR (default
# <repo>/build-reader-gpu-bench), JOBS (default all cores), L3_BENCH_NO_BUILD=1
# (use BUILD_DIR as it is), as run_cuda_bench.sh.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
source "$here/reader_bench_common.sh"
build="${BUILD_DIR:-$root/build-reader-gpu-bench}"
py="${L3_TORCH_PYTHON:-python3}"
batch=64 workers="$(nproc)" epochs=8 rounds=2 device=0 out="" min_images=0 prepare_only=0 cut=""
while (($#)); do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --python) py="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    --workers) workers="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --device) device="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --min-images) min_images="$2"; shift 2 ;;
    --cut) cut="$2"; shift 2 ;;
    --prepare-only) prepare_only=1; shift ;;
    *) echo "run_reader_gpu_bench: unknown option $1" >&2; exit 2 ;;
  esac
done

[[ -d "$here/corpus/photos" ]] || "$here/fetch_corpus.sh"
if [[ "${L3_BENCH_NO_BUILD:-0}" != 1 ]]; then  # scripts/gpu-kit.sh has built them
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DL3_CUDA=ON -DL3_BUILD_BENCH=ON >/dev/null
  ninja -C "$build" -j"${JOBS:-$(nproc)}" l3pack test_reader_gpu_batch
fi

# ImageFolder: <class>/<file>, class = file-name prefix (as run_reader_bench.sh);
# the l3 dataset is converted from the same folder.
if [[ -n "$cut" ]]; then
  folder="$(imagefolder_cut "$here" "$min_images" "$cut" "$py")"
  dataset="$here/work/reader-gpu-dataset-$min_images-$cut"
else
  folder="$(imagefolder "$here" "$min_images")"
  dataset="$here/work/reader-gpu-dataset-$min_images"
fi
if [[ ! -f "$dataset/manifest.json" ]]; then
  rm -rf "$dataset"
  "$build/converters/l3pack" convert "$folder" "$dataset" --strict
fi
if ((prepare_only)); then
  echo "run_reader_gpu_bench: prepared $folder and $dataset (--prepare-only)" >&2
  exit 0
fi

command -v nvidia-smi >/dev/null || { echo "run_reader_gpu_bench: nvidia-smi not found (needs a CUDA machine)" >&2; exit 1; }
gpu_name="$(nvidia-smi --query-gpu=name --format=csv,noheader -i "$device" | head -1)"
gpu_driver="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader -i "$device" | head -1)"
[[ -n "$out" ]] || out="$here/results/reader-gpu-$(echo "$gpu_name" | tr ' /' '--').md"

# Correctness first: the GPU batches must equal the CPU pipeline's, and the
# tests must have run (not skipped for want of a device).
mkdir -p "$here/work"
log="$here/work/reader-gpu-tests.log"
results="$here/work/reader-gpu-results.jsonl"
: >"$results"
(cd "$build" && CUDA_VISIBLE_DEVICES="$device" ctest -R '^test_reader_gpu_batch$' --no-tests=error --output-on-failure | tee "$log")
if grep -qE 'Skipped|Not Run' "$log"; then
  echo "run_reader_gpu_bench: GPU tests skipped (no usable device?)" >&2
  exit 1
fi

l3pack="$build/converters/l3pack"
common=(--batch "$batch" --crop 224 --mode random_resized --dtype float32 --layout chw --flip 0.5 --json)
l3_run() {  # pipeline name, then bench-read options; one JSON line on stdout
  local name="$1"; shift
  # One warm-up pass (CUDA context, page cache), then the timed epochs.
  "$l3pack" bench-read "$dataset" "${common[@]}" --epochs 1 "$@" >/dev/null
  # The process's CPU seconds (every thread) over its wall time: cores busy.
  "$py" - "$name" "$l3pack" bench-read "$dataset" "${common[@]}" --epochs "$epochs" "$@" <<'PY'
import json, resource, subprocess, sys, time
t0 = time.monotonic()
out = subprocess.run(sys.argv[2:], check=True, capture_output=True, text=True).stdout
wall = time.monotonic() - t0
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = ru.ru_utime + ru.ru_stime
m = json.loads(out.splitlines()[-1])
print(json.dumps({"pipeline": sys.argv[1], "images": m["examples"], "seconds": m["wall_seconds"],
                  "images_per_second": m["images_per_second"], "bottleneck": m["bottleneck"],
                  "cpu_seconds": cpu, "process_seconds": wall, "cores_busy": cpu / wall, "metrics": m}))
PY
}
torch=1
if ! "$py" -c 'import torch, torchvision, PIL' 2>/dev/null; then
  echo "run_reader_gpu_bench: WARNING: $py cannot import torch, torchvision and PIL: no torch rows" >&2
  torch=0
fi
for ((r = 1; r <= rounds; r++)); do
  echo "{\"round\": $r}" >>"$results"
  if ((torch)); then
    echo "round $r: torch" >&2
    "$py" "$here/bench_reader_torch.py" "$folder" --batch "$batch" --workers "$workers" --epochs "$epochs" >>"$results"
  fi
  echo "round $r: l3 gpu" >&2
  l3_run l3-gpu --device "cuda:$device" >>"$results"
  echo "round $r: l3 cpu" >&2
  l3_run l3-cpu --device cpu --workers "$workers" >>"$results"
done

load="$(cut -d' ' -f1-3 /proc/loadavg)"
cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
commit="${L3_COMMIT:-$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)}"
dirty="$(uncommitted_note "$root" reader cuda codec format common converters)"
L3_CUT="$cut" "$py" - "$results" "$out" "$batch" "$workers" "$epochs" "$load" "$cpu" "$commit$dirty" "$gpu_name" "$gpu_driver" "$folder" <<'EOF'
import json, sys, statistics, datetime, os
res, out, batch, workers, epochs, load, cpu, commit, gpu, driver, folder = sys.argv[1:]
photos = sum(1 for _, _, files in os.walk(folder, followlinks=True) for f in files if f.endswith(".png"))
distinct = len({os.path.realpath(os.path.join(d, f)) for d, _, files in os.walk(folder, followlinks=True) for f in files if f.endswith(".png")})
rows, n = [], 0
for l in open(res):
    if not l.startswith("{"): continue
    r = json.loads(l)
    if "round" in r: n = r["round"]
    else: rows.append(dict(r, round=n))
by = {"l3-gpu": [], "l3-cpu": [], "torch": []}
for r in rows: by[r["pipeline"]].append(r)
med = {k: statistics.median(r["images_per_second"] for r in v) for k, v in by.items() if v}
has_torch = "torch" in med
lines = []
lines.append(f"# Reader benchmark on a GPU: l3 reader with --device cuda vs PyTorch DataLoader ({gpu})\n")
lines.append(f"- date: {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC; commit {commit}")
lines.append(f"- GPU: {gpu} (driver {driver}); CPU: {cpu}, {os.cpu_count()} hardware threads; load average at the end: {load}")
cut = os.environ.get("L3_CUT", "")
origin = f"pieces {cut} cut from bench/corpus/photos" if cut else "bench/corpus/photos"
lines.append(f"- images: {photos} images ({distinct} distinct {origin}, each linked {photos // max(distinct, 1)}+ times), "
             "converted with `l3pack convert` (default codec options)")
lines.append(f"- all: RandomResizedCrop 224 (scale 0.08-1, ratio 3/4-4/3, bilinear antialiased) + horizontal flip p=0.5 + "
             f"normalise (ImageNet mean/std), float32 CHW batches of {batch}, {epochs} timed epochs after a warm-up")
lines.append("- l3-gpu: `l3pack bench-read --device cuda` (one BatchDecoder launch per window, transform kernels; batches "
             "in device memory, never copied to the host; checksums verified); the GPU reader tests passed first "
             "(batches byte-identical to the CPU pipeline)")
lines.append(f"- l3-cpu: `l3pack bench-read --device cpu --workers {workers}` (decode of the crop box and transforms on CPU workers)")
if has_torch:
    lines.append(f"- torch: `bench_reader_torch.py` (torch {by['torch'][0].get('torch', '?')}, ImageFolder of the PNG files, PIL, "
                 f"DataLoader shuffle=True, {workers} persistent workers; batches stay in host memory, so a training loop "
                 "would add a host-to-device copy to torch's time)\n")
else:
    lines.append("- torch: not measured (torch, torchvision or PIL missing)\n")
lines.append("| round | pipeline | images | seconds | images/s | bound by | CPU cores busy |")
lines.append("|---:|---|---:|---:|---:|---|---:|")
for r in rows:
    busy = f"{r['cores_busy']:.2f}" if "cores_busy" in r else "-"
    lines.append(f"| {r['round']} | {r['pipeline']} | {r['images']} | {r['seconds']:.2f} | {r['images_per_second']:.1f} | "
                 f"{r.get('bottleneck', '-')} | {busy} |")
lines.append("")
lines.append("CPU cores busy: the l3 process's user + system CPU seconds (all threads) over its wall time, "
             "opening the dataset and the CUDA context included.")
lines.append("")
summary = f"Median images/s: l3-gpu {med['l3-gpu']:.1f}, l3-cpu {med['l3-cpu']:.1f}"
if has_torch:
    summary += f", torch {med['torch']:.1f}: **l3-gpu / torch = {med['l3-gpu'] / med['torch']:.2f}x**,"
else:
    summary += ":"
lines.append(summary + f" l3-gpu / l3-cpu = {med['l3-gpu'] / med['l3-cpu']:.2f}x")
m = by["l3-gpu"][-1]["metrics"]
b = m["busy_seconds"]
lines.append("")
lines.append(f"l3-gpu stage busy seconds (last round): read {b['read']:.2f}, decode {b['decode']:.2f}, "
             f"transform {b['transform']:.2f}, assemble {b['assemble']:.2f}; consumer waited {m['wait_seconds']:.2f} s "
             f"of {m['wall_seconds']:.2f} s; bound by {m['bottleneck']}.")
os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
open(out, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
echo "written: $out" >&2
