#!/usr/bin/env bash
# GPU benchmark (issue 3), for a machine with a CUDA GPU: builds bench_cuda and
# the GPU tests (Release, sm_80/sm_90), runs the GPU tests, then the benchmark
# and the nvJPEG comparison; the report goes to bench/results/cuda-<gpu>.md.
# Environment: BUILD_DIR (default <repo>/build-cuda-bench), JOBS (default all cores),
#   L3_BENCH_CMAKE_ARGS (extra CMake arguments, e.g. -DL3_CUDA_FIXED_PREDICTORS=ON for
#   the other wavefront code shape, spec/cuda.md §2), RESULT_SUFFIX (appended to the
#   report's name: cuda-<gpu><suffix>.md).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
build="${BUILD_DIR:-$root/build-cuda-bench}"

if [[ ! -d "$here/corpus/photos" || ! -d "$here/corpus/graphics" ]]; then
  "$here/fetch_corpus.sh"
fi
read -ra extra_cmake <<<"${L3_BENCH_CMAKE_ARGS:-}"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DL3_CUDA=ON -DL3_BUILD_BENCH=ON \
  "${extra_cmake[@]}" >/dev/null
ninja -C "$build" -j"${JOBS:-$(nproc)}" bench_cuda test_cuda_gpu test_cuda_emu
(cd "$build" && ctest -L 'gpu|cuda' --output-on-failure)

gpu="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' /' '--')"
out="$here/results/cuda-${gpu}${RESULT_SUFFIX:-}.md"
commit="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
"$build/cuda/bench_cuda" --corpus "$here/corpus" --out "$out" "$@"
{
  echo
  echo "Commit $commit; host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)."
} >>"$out"
python3 "$here/bench_cuda_nvjpeg.py" --corpus "$here/corpus" --out "$out"
echo "wrote $out"
