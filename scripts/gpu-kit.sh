#!/usr/bin/env bash
# Everything a session needs to verify l3 on a lent GPU machine (the `device`
# tool), whose image has nvcc, CMake, ninja, PyTorch, nanobind and
# scikit-build-core but no package registry and none of our -dev packages.
#
# Here (Debian 12, with network):
#   scripts/gpu-kit.sh prepare
#     downloads the Debian packages the build needs into .gpukit/debs and
#     copies a corpus subset into .gpukit/corpus (both ignored by git; carry
#     ".gpukit" in the device call).
# There (one device call, run from the repository root; logs and results go
# to $OUT when it is set, else to .gpukit/out):
#   scripts/gpu-kit.sh device [STEP...]
#     STEP: setup build test sanitize bench python (default: all, in order).
#     setup    unpacks the packages into /opt/l3kit and points CMake and
#              pkg-config at it;
#     build    Release build of everything, CUDA for sm_90 (the H100/H200);
#     test     the whole ctest suite, GPU tests included (label gpu);
#     sanitize compute-sanitizer: memcheck over the three GPU test programs,
#              racecheck and synccheck over test_cuda_gpu;
#     bench    bench/run_cuda_bench.sh (decode throughput against the CPU
#              decoder, libpng and nvJPEG) and bench/run_reader_gpu_bench.sh
#              (the reader's GPU path against the PyTorch PNG pipeline);
#     python   pip install . with CUDA, then the Python GPU tests;
#     shape    (not in the default list) bench/run_cuda_bench.sh again with the
#              other wavefront code shape (-DL3_CUDA_FIXED_PREDICTORS=ON,
#              spec/cuda.md §2): report cuda-<gpu>-fixed-predictors.md.
# Each step's output is in $OUT/<step>.log; results land in bench/results/
# and are copied to $OUT. Commit them here after fetching.
# A device call runs at most 10 minutes and a machine stays warm only ~30 s
# between calls, so split the work and let each call rebuild incrementally:
#   run(carry=[".gpukit"], command="bash scripts/gpu-kit.sh device setup build test sanitize")
#   run(carry=[".gpukit"], command="bash scripts/gpu-kit.sh device setup build bench python")
#   run(carry=[".gpukit"], command="bash scripts/gpu-kit.sh device setup shape")
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
kit="$root/.gpukit"
prefix="${L3KIT_PREFIX:-/opt/l3kit}"
build="$root/build-gpukit"

debs=(libzstd-dev libzstd1 libpng-dev libpng16-16 zlib1g-dev libjpeg62-turbo-dev libjpeg62-turbo
  libspng-dev libspng0 libxxhash-dev libxxhash0 doctest-dev libcli11-dev nlohmann-json3-dev
  zlib1g pkgconf pkgconf-bin libpkgconf3)

prepare() {
  mkdir -p "$kit/debs" "$kit/corpus"
  (cd "$kit/debs" && apt-get download "${debs[@]}")
  # The corpus (bench/fetch_corpus.sh) is 54 MiB; the device call carries at
  # most 64 MiB with the tree, so take every graphic and the photos that fit.
  [[ -d "$root/bench/corpus/photos" ]] || "$root/bench/fetch_corpus.sh"
  rm -rf "$kit/corpus" && mkdir -p "$kit/corpus/photos" "$kit/corpus/graphics"
  cp "$root"/bench/corpus/graphics/* "$kit/corpus/graphics/"
  local budget=$((30 * 1024 * 1024)) used=0 f size
  for f in $(ls -S -r "$root"/bench/corpus/photos/*); do
    size=$(stat -c %s "$f")
    ((used + size > budget)) && continue
    cp "$f" "$kit/corpus/photos/"
    used=$((used + size))
  done
  du -sh "$kit"
  echo "carry .gpukit in the device call; run: bash scripts/gpu-kit.sh device"
}

out_dir() { echo "${OUT:-$kit/out}"; }

# No global LD_LIBRARY_PATH: Debian's libraries must not replace the image's
# in PyTorch's process. Our executables find the kit's libraries through the
# build RPATH CMake gives them; pkg-config and Python get the path themselves.
env_setup() {
  export PATH="$prefix/bin:$PATH"
  export CMAKE_PREFIX_PATH="$prefix/usr"
  export PKG_CONFIG_PATH="$prefix/usr/lib/x86_64-linux-gnu/pkgconfig:$prefix/usr/share/pkgconfig"
  export PKG_CONFIG_SYSROOT_DIR="$prefix"
  export CPATH="$prefix/usr/include${CPATH:+:$CPATH}"
  export LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu${LIBRARY_PATH:+:$LIBRARY_PATH}"
}

step_setup() {
  mkdir -p "$prefix"
  for f in "$kit"/debs/*.deb; do dpkg -x "$f" "$prefix"; done
  mkdir -p "$prefix/bin"
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$prefix/usr/lib/x86_64-linux-gnu" \
    "$prefix/usr/bin/pkgconf" >"$prefix/bin/pkg-config"
  chmod +x "$prefix/bin/pkg-config"
  # The corpus travels in .gpukit (bench/corpus is not part of the tree).
  if [[ ! -d "$root/bench/corpus/photos" ]]; then
    mkdir -p "$root/bench/corpus"
    cp -r "$kit/corpus/." "$root/bench/corpus/"
  fi
  env_setup
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || echo "nvidia-smi failed: no GPU?"
  nvcc --version | tail -2
  cmake --version | head -1
  pkg-config --modversion libxxhash spng libzstd
}

step_build() {
  env_setup
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DL3_CUDA=ON -DL3_WERROR=ON \
    -DL3_BUILD_BENCH=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DPKG_CONFIG_EXECUTABLE="$prefix/bin/pkg-config"
  ninja -C "$build" -j"$(nproc)"
}

step_test() {
  env_setup
  (cd "$build" && ctest -j"$(nproc)" --output-on-failure)
}

step_sanitize() {
  env_setup
  local t tool
  for t in tests/test_cuda_gpu tests/test_reader_gpu tests/test_reader_gpu_batch; do
    [[ -x "$build/$t" ]] || continue
    for tool in memcheck racecheck synccheck; do
      [[ "$tool" != memcheck && "$t" != tests/test_cuda_gpu ]] && continue
      echo "== compute-sanitizer --tool $tool $t"
      compute-sanitizer --tool "$tool" --error-exitcode 99 "$build/$t"
    done
  done
}

step_bench() {
  env_setup
  BUILD_DIR="$build" JOBS="$(nproc)" bash "$root/bench/run_cuda_bench.sh"
  if [[ -f "$root/bench/run_reader_gpu_bench.sh" ]]; then
    BUILD_DIR="$build" JOBS="$(nproc)" bash "$root/bench/run_reader_gpu_bench.sh"
  fi
  cp "$root"/bench/results/*.md "$(out_dir)/" 2>/dev/null || true
}

step_shape() {
  env_setup
  BUILD_DIR="$root/build-gpukit-fixed" JOBS="$(nproc)" RESULT_SUFFIX=-fixed-predictors \
    L3_BENCH_CMAKE_ARGS="-DL3_CUDA_FIXED_PREDICTORS=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DPKG_CONFIG_EXECUTABLE=$prefix/bin/pkg-config" \
    bash "$root/bench/run_cuda_bench.sh"
  cp "$root"/bench/results/*.md "$(out_dir)/" 2>/dev/null || true
}

step_python() {
  env_setup
  python3 -m pip install --no-build-isolation --no-deps -q "$root" \
    --config-settings=cmake.define.L3_CUDA=ON --config-settings=cmake.define.CMAKE_CUDA_ARCHITECTURES=90 \
    --config-settings=cmake.define.PKG_CONFIG_EXECUTABLE="$prefix/bin/pkg-config"
  # The extension links the kit's libxxhash and libjpeg.so.62 (install strips the build RPATH).
  (cd "$root" && LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu" python3 -m pytest -q -m gpu tests/python)
}

device() {
  local steps=("$@") o s rc=0
  ((${#steps[@]})) || steps=(setup build test sanitize bench python)
  o="$(out_dir)"
  mkdir -p "$o"
  for s in "${steps[@]}"; do
    echo "== step $s"
    if ! "step_$s" >"$o/$s.log" 2>&1; then
      echo "   step $s FAILED (see $s.log); tail:"
      tail -20 "$o/$s.log"
      rc=1
      [[ "$s" == setup || "$s" == build ]] && break
    else
      tail -5 "$o/$s.log"
    fi
  done
  return $rc
}

case "${1:-}" in
  prepare) prepare ;;
  device) shift; device "$@" ;;
  *) sed -n '2,34p' "${BASH_SOURCE[0]}"; exit 2 ;;
esac
