#!/usr/bin/env bash
# GPU benchmark (issues 3, 13), for a machine with a CUDA GPU: builds bench_cuda
# and test_cuda_gpu (Release, CMAKE_CUDA_ARCHITECTURES), runs the GPU test (a skip
# is a failure), then the benchmark and NVIDIA's decoders on the same images
# (bench/bench_gpu_peers.py: nvImageCodec HTJ2K/J2K, nvJPEG); the report goes
# to bench/results/cuda-<gpu>.md.
# Environment: BUILD_DIR (default <repo>/build-cuda-bench), JOBS (default all cores),
#   L3_BENCH_NO_BUILD=1 (use BUILD_DIR as it is: scripts/gpu-kit.sh built it),
#   L3_BENCH_CMAKE_ARGS (extra CMake arguments, e.g. -DL3_CUDA_FIXED_PREDICTORS=ON for
#   the other wavefront code shape, spec/cuda.md §2), RESULT_SUFFIX (appended to the
#   report's name: cuda-<gpu><suffix>.md), L3_BENCH_NO_PEERS=1 (leave NVIDIA's decoders out).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
build="${BUILD_DIR:-$root/build-cuda-bench}"

if [[ ! -d "$here/corpus/photos" ]]; then  # bench_cuda times the photos
  "$here/fetch_corpus.sh"
fi
read -ra extra_cmake <<<"${L3_BENCH_CMAKE_ARGS:-}"
if [[ "${L3_BENCH_NO_BUILD:-0}" != 1 ]]; then  # scripts/gpu-kit.sh has built them
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DL3_CUDA=ON -DL3_BUILD_BENCH=ON \
    "${extra_cmake[@]}" >/dev/null
  ninja -C "$build" -j"${JOBS:-$(nproc)}" bench_cuda test_cuda_gpu
fi
# Correctness first, on the GPU: a skipped test (no device) stops the benchmark.
log="$(cd "$build" && ctest -R '^test_cuda_gpu$' --no-tests=error --output-on-failure)" || { echo "$log"; exit 1; }
echo "$log"
if grep -qE 'Skipped|Not Run' <<<"$log"; then
  echo "run_cuda_bench: test_cuda_gpu was skipped (no usable device?)" >&2
  exit 1
fi

gpu="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' /' '--')"
out="$here/results/cuda-${gpu}${RESULT_SUFFIX:-}.md"
commit="${L3_COMMIT:-$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)}${L3_TREE_NOTE:-}"  # L3_TREE_NOTE: the GPU kit's check of the copy
images="$here/work/gpu-images"
rm -rf "$images"
"$build/bench/bench_cuda" --corpus "$here/corpus" --out "$out" --write-ppm "$images" "$@"
{
  echo
  echo "Commit $commit; host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)."
} >>"$out"
# NVIDIA's decoders on the same images; L3_PEERS_SITE: a folder holding
# nvImageCodec and nvJPEG2000 (scripts/gpu-kit.sh unpacks the carried ones).
if [[ "${L3_BENCH_NO_PEERS:-0}" != 1 ]]; then
  PYTHONPATH="${L3_PEERS_SITE:+$L3_PEERS_SITE:}${PYTHONPATH:-}" python3 "$here/bench_gpu_peers.py" --images "$images" --out "$out"
fi
echo "wrote $out"
