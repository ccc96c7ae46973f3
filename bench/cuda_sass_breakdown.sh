#!/usr/bin/env bash
# Where the decode kernel's instructions go per wavefront step, no GPU needed
# (bench/results/cuda-static-sm90.md, "Instructions per step"): compiles the
# batch decoder with -lineinfo for one architecture, disassembles it with
# line and inline information and prints bench/cuda_sass_breakdown.py's
# Markdown table for the CH=3 step loop. Extra arguments go to nvcc (e.g.
# -DL3_WAVEFRONT_FIXED_PREDICTORS).
#
# Usage: bench/cuda_sass_breakdown.sh [SM] [NVCC_FLAGS...]
# nvdisasm ships with the full CUDA toolkit; without it, `pip download
# nvidia-cuda-nvdisasm` (or the cuobjdump wheel, bench/cuda_static_report.sh)
# and put its bin/ on PATH.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sm="${1:-90}"; shift || true
nvcc="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
command -v nvdisasm >/dev/null || { echo "cuda_sass_breakdown: nvdisasm not on PATH" >&2; exit 2; }
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
includes=()
for dir in cuda/include cuda/src codec/include common/include format/include; do includes+=("-I$root/$dir"); done
"$nvcc" "${includes[@]}" -O3 -DNDEBUG -std=c++20 -lineinfo --generate-code=arch=compute_$sm,code=sm_$sm "$@" \
  -cubin -x cu "$root/cuda/src/batch_decoder.cu" -o "$work/decoder.cubin"
nvdisasm -gi -c "$work/decoder.cubin" >"$work/decoder.sass"
python3 "$root/bench/cuda_sass_breakdown.py" "$work/decoder.sass" "$root"
