#!/usr/bin/env bash
# Proves l3's CUDA path on a lent GPU machine (the `device` tool): a bare
# machine whose image has nvcc, CMake, ninja, python3 with PyTorch, nanobind
# and scikit-build-core, but no package registry and none of our -dev packages.
#
# Here (Debian 12, with network):
#   scripts/gpu-kit.sh prepare
#     fills .gpukit (git-ignored; carry it in the device call): the Debian
#     packages the build needs and their runtime libraries' whole tree
#     (.gpukit/debs), a corpus subset (.gpukit/corpus), the commit
#     (.gpukit/commit, the reports name it; `scripts/gpu-kit.sh stamp`
#     refreshes it), and prints what would travel (at most 64 MiB).
#   scripts/gpu-kit.sh prebuild
#     builds the GPU targets in the dry root (below) for sm_90 (H100, H200),
#     both code shapes and the kernel variants' bench_cuda, and packs them
#     into .gpukit/prebuilt (about 4 MiB: the binaries and CTest files as one
#     xz archive, the manifest of the tree they were built from, the arch
#     and the path). On the device the build step
#     unpacks them instead of building when the copy is that tree, at that
#     path, for that arch, and the binaries' libraries resolve; otherwise it
#     builds (3-4 minutes of each command's device time on 16 cores). Run it
#     after the last commit, right before the device calls. Cost here: a
#     dry run of setup, build and build_fixed (4-8 min, ccache helps).
#   scripts/gpu-kit.sh dryrun [STEP...]
#     everything but kernel execution, without a GPU, in a bare Debian 12
#     root made with debootstrap (cached in .gpukit-dry/) that holds only a
#     compiler, CMake, ninja and python3 (no -dev packages of ours), with
#     /usr/local/cuda bind-mounted and .gpukit as the only source of our
#     libraries: the same steps as `device`, their GPU parts replaced by
#     checks that the programs load and run up to the device. Needs root.
#     The copy sits at this checkout's path inside the root (the device's
#     copy is at the same path), so the prebuilt programs' compiled-in
#     source paths hold there. L3KIT_NO_PREBUILT=1 makes the build step build
#     even where .gpukit/prebuilt would do.
#     Cost here (2 cores, shared): the root, once, 3.5 min (debootstrap) and
#     1.3 GB; a run 5-12 min (build 3-4 min cold, 15 s to 2 min with ccache;
#     the python step 2-7 min, pip rebuilding the libraries), 0.2 GB of copy
#     and builds, 0.1 GB of cached wheels. It fails on any unresolved library
#     of any built binary, as when LIBRARY_PATH is exported
#     (bench/results/gpukit-dryrun.md).
# There, two commands with the prebuilt programs, the bars' steps first: by
# session 11's step times (bench/README.md; the variant step estimated from
# its host side, bench/results/gpukit-dryrun.md, session 39)
# they take about 11-14 minutes with the machine's start, against a session's
# 15 of device time, so a command cut short loses the diagnostic steps at its
# end (the archive is written after each step):
#   1. run(carry=[".gpukit"], command="bash scripts/gpu-kit.sh device setup build test bench reader sanitize variant")
#   2. run(carry=[".gpukit"], command="bash scripts/gpu-kit.sh device setup build python profile shape reader_full")
#   Without prebuilt programs (another arch, another tree) each command builds
#   first: split them into three.
#   STEP:
#     setup    unpacks .gpukit/debs into /opt/l3kit, a pkg-config wrapper;
#     build    the prebuilt GPU targets unpacked (see prebuild), or a Release
#              build of the GPU targets only (GPU tests, bench_cuda, l3pack)
#              for this GPU's arch, warnings not fatal, -lineinfo (for
#              compute-sanitizer); either way every binary's RUNPATH is
#              checked (scripts/check_runpath.sh: all libraries resolve
#              without LD_LIBRARY_PATH) and each program must start;
#     build_fixed  the same for the other wavefront code shape
#              (-DL3_CUDA_FIXED_PREDICTORS=ON: bench_cuda, test_cuda_gpu),
#              which `shape` times (it runs this step itself when needed);
#     build_variant  bench_cuda for each kernel variant (cuda/kernel_variants.txt:
#              -DL3_CUDA_KERNEL_DEFINES, spec/cuda.md §2 "Kernel variants"),
#              which `variant` times (it runs this step itself when needed);
#     test     the GPU suites (ctest -L gpu); a skipped GPU test is a failure;
#     sanitize compute-sanitizer: memcheck over the two GPU test programs,
#              racecheck and synccheck over test_cuda_gpu;
#     bench    bench/run_cuda_bench.sh (kernel alone and host-to-device-tensor
#              throughput, CPU decoders, nvImageCodec, nvJPEG);
#     reader_full  bench/run_reader_gpu_bench.sh on >= 2048 whole photos;
#     profile  Nsight Compute (--set full) over one decode kernel launch;
#     python   pip install . with CUDA (RUNPATH to the kit), torch must see the
#              GPU, then the Python GPU tests (a skipped one is a failure);
#     reader   bench/run_reader_gpu_bench.sh on 2,048 ImageNet-size (500x375)
#              pieces of the photos (issue 13's reader bar);
#     shape    bench/run_cuda_bench.sh with the other wavefront code shape
#              (build_fixed's programs, spec/cuda.md §2);
#     variant  the kernel alone (bench_cuda --kernel-only) of the default and
#              of each kernel variant, 3 rounds in turn, at 500x375 and
#              2048x1024: bench/results/cuda-<gpu>-variants.md (medians and
#              ratios to the default, and each kernel's resident warps an
#              SM, bench/variant_table.py), 3 runs per entry of
#              kernel_variants.txt and of the default (each about 3-10 s,
#              not timed on a GPU yet: with 5 entries about 1-3 min).
# Each step runs in its own bash (set -euo pipefail), so any failing command
# fails the step; setup or build failing stops the command. $OUT (else
# .gpukit/out) receives two files: kit-<steps>.log (every step's log, one
# after the other) and results-<steps>.tar.gz (the reports the steps wrote to
# bench/results, the step logs, raw timings): unpack it here and commit the
# reports.
set -euo pipefail
shopt -s inherit_errexit  # a failure inside $(...) fails the step too
self="${BASH_SOURCE[0]}"
root="$(cd "$(dirname "$self")/.." && pwd)"
kit="${L3KIT_DIR:-$root/.gpukit}"  # L3KIT_DIR: for tests/gpu_kit_selftest.sh
dry_cache="$root/.gpukit-dry"
prefix="${L3KIT_PREFIX:-/opt/l3kit}"
libdir="$prefix/usr/lib/x86_64-linux-gnu"
build="${L3KIT_BUILD:-$root/build-gpukit}"
build_fixed="$root/build-gpukit-fixed"  # the other code shape (step build_fixed)
prebuilt="$kit/prebuilt"                # see prebuild
prebuilt_arch=90                        # H100 and H200
dry="${L3KIT_DRYRUN:-0}"  # 1 inside `dryrun`: no GPU, kernel execution left out
read -ra extra_cmake <<<"${L3KIT_CMAKE_ARGS:-}"

# The -dev packages the GPU targets build against (the kit's only source of
# headers and link libraries); their runtime libraries, and the libraries
# those need in turn, are added by runtime_closure_debs.
dev_debs=(libzstd-dev libpng-dev zlib1g-dev libjpeg62-turbo-dev libspng-dev libxxhash-dev doctest-dev
  libcli11-dev nlohmann-json3-dev libtiff-dev libwebp-dev libcurl4-openssl-dev libssl-dev
  pkgconf pkgconf-bin libpkgconf3)
# The shared libraries our binaries name (readelf -d NEEDED of l3pack and the
# Python extension here), whose whole dependency tree travels.
linked_libs=(libzstd.so.1 libpng16.so.16 libjpeg.so.62 libspng.so.0 libxxhash.so.0 libtiff.so.6
  libwebp.so.7 libcurl.so.4 libssl.so.3 libcrypto.so.3 libpkgconf.so.3)
# DT_RPATH rather than DT_RUNPATH (see runtime_closure_debs).
rpath_flags=(-DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags -DCMAKE_SHARED_LINKER_FLAGS=-Wl,--disable-new-dtags
  -DCMAKE_MODULE_LINKER_FLAGS=-Wl,--disable-new-dtags)
# The targets the GPU steps run (nothing else is built there).
targets=(test_cuda_gpu test_reader_gpu_batch bench_cuda l3pack)
fixed_targets=(bench_cuda test_cuda_gpu)  # the other code shape: what `shape` runs
# Kernel variants (cuda/kernel_variants.txt: NAME=DEFINITIONS a line):
# bench_cuda built with each, in build-gpukit-variant-NAME, which `variant`
# times against the default.
mapfile -t kernel_variants < <(grep -E '^[^#].*=' "$root/cuda/kernel_variants.txt")
variant_dir() { echo "$root/build-gpukit-variant-$1"; }
variant_dirs() { local v; for v in "${kernel_variants[@]}"; do variant_dir "${v%%=*}"; done; }
gpu_tests=2  # ctest -L gpu: test_cuda_gpu, test_reader_gpu_batch

prepare() {
  mkdir -p "$kit/debs" "$kit/corpus"
  rm -f "$kit"/debs/*.deb
  local debs
  mapfile -t debs < <(runtime_closure_debs "${linked_libs[@]}")
  (cd "$kit/debs" && apt-get download "${dev_debs[@]}" "${debs[@]}")
  # The corpus (bench/fetch_corpus.sh) is over 100 MiB; the device call
  # carries at most 64 MiB with the tree and the prebuilt programs, so take
  # the photos that fit (the GPU steps time photos only).
  [[ -d "$root/bench/corpus/photos" ]] || "$root/bench/fetch_corpus.sh"
  rm -rf "$kit/corpus" && mkdir -p "$kit/corpus/photos"
  local budget=$((30 * 1024 * 1024)) used=0 f size
  for f in $(ls -S -r "$root"/bench/corpus/photos/*); do
    size=$(stat -c %s "$f")
    ((used + size > budget)) && continue
    cp "$f" "$kit/corpus/photos/"
    used=$((used + size))
  done
  prepare_peers
  stamp_commit
  carry_size
  echo "carry .gpukit in the device call; run: bash scripts/gpu-kit.sh device STEP..."
}

# The Debian packages holding LIB... and every library they load in turn
# (ldd here), less the C and C++ runtimes that every image has (newer there).
# The device image need not have libcurl's or libtiff's dependencies, and a
# binary's RUNPATH does not reach its libraries' own dependencies: the kit
# links with DT_RPATH (--disable-new-dtags, which glibc also searches for the
# dependencies of the libraries it loads) and carries the whole tree.
runtime_closure_debs() {
  local lib path
  for lib in "$@"; do
    path="/usr/lib/x86_64-linux-gnu/$lib"
    echo "$path"
    ldd "$path" | awk '$3 ~ /^\// {print $3}'
  done | sort -u | while read -r path; do
    path="$(realpath "$path")"
    dpkg -S "$path" 2>/dev/null || dpkg -S "${path#/usr}"  # usrmerge: /lib is /usr/lib
  done | cut -d: -f1 | sort -u | grep -vxE 'libc6|libgcc-s1|libstdc\+\+6'
}

# NVIDIA's decoders for bench/bench_gpu_peers.py, for the device's python
# (3.12) and CUDA (13): the nvImageCodec and nvJPEG2000 wheels, cut down to
# what decoding and encoding JPEG 2000 need (the full nvImageCodec wheel,
# 25 MB, holds one extension per Python version and codecs we do not use),
# packed as .gpukit/peers.tar.xz and unpacked on the device into /tmp/l3peers.
# nvJPEG itself comes with the image's torchvision (decode_jpeg on cuda).
peer_wheels=(nvidia-nvimgcodec-cu13==0.9.0.20 nvidia-nvjpeg2k-cu13==0.11.0.51)
prepare_peers() {
  local w="$dry_cache/peer-wheels" site="$dry_cache/peer-site" f
  mkdir -p "$w"
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d "$w" "${peer_wheels[@]}"
  rm -rf "$site" && mkdir -p "$site"
  for f in "$w"/*.whl; do
    python3 -m zipfile -e "$f" "$site/"
  done
  (cd "$site/nvidia/nvimgcodec" && rm -rf include tools .libs nvimgcodec_impl.cpython-3{9,10,11,13,14}*.so \
    nvimgcodec_impl.cpython-3{13,14}t*.so &&
    find extensions -type f ! -name 'libnvjpeg2k_ext.so*' -delete)
  rm -rf "$site/nvidia/nvjpeg2k/include"
  # Both wheels ship nvidia/__init__.py (the last one unpacked, empty, wins): keep
  # nvidia a namespace that extends to the image's nvidia.* packages (torch's CUDA).
  echo "__path__ = __import__('pkgutil').extend_path(__path__, __name__)" >"$site/nvidia/__init__.py"
  tar -C "$site" -cJf "$kit/peers.tar.xz" .
  echo "peers: $(du -sh "$site" | cut -f1) unpacked, $(du -h "$kit/peers.tar.xz" | cut -f1) carried"
}

# Unpacks the carried peers into /tmp/l3peers; prints that folder.
unpack_peers() {
  local d=/tmp/l3peers
  rm -rf "$d" && mkdir -p "$d"
  # python3's lzma: the device image (and the dry root) may have no xz program.
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$kit/peers.tar.xz" "$d"
  echo "$d"
}

# The device's copy cannot say what it was made from (its git metadata, if
# any, need not match its files): the reports name the commit written here
# (`scripts/gpu-kit.sh stamp` again after committing, before the device call),
# and the device checks its files against the manifest written with it
# (scripts/tree_manifest.py: every tracked file's blob id, as in this tree).
stamp_commit() {
  local c
  c="$(git -C "$root" rev-parse --short HEAD)"
  git -C "$root" diff --quiet HEAD || c="$c (with local changes)"
  echo "$c" >"$kit/commit"
  python3 "$root/scripts/tree_manifest.py" write "$root" "$kit/manifest"
  echo "commit stamped: $c"
}

# On the device: whether the copy's files are the stamped tree. Exports
# L3_TREE_NOTE, which the reports append to the commit ("" when they are).
check_tree() {
  local r
  if [[ ! -f "$kit/manifest" ]]; then
    r="no manifest (scripts/gpu-kit.sh stamp)"
  else
    r="$(python3 "$root/scripts/tree_manifest.py" check "$root" "$kit/manifest")"
  fi
  echo "tree check against the stamp ${L3_COMMIT:-?}: $r"
  case "$r" in
    same) export L3_TREE_NOTE="" ;;
    *) export L3_TREE_NOTE=" (the copy run: $r)" ;;
  esac
}

# What a device call carries: the tree (tracked and untracked-not-ignored
# files) plus .gpukit; the limit is 64 MiB.
carry_size() {
  local tree kitb
  tree="$(cd "$root" && git ls-files -co --exclude-standard -z | du -cb --files0-from=- | tail -1 | cut -f1)"
  kitb="$(du -sb --exclude=out "$kit" | cut -f1)"
  echo "carried: tree $((tree / 1024)) KiB + .gpukit $((kitb / 1024)) KiB = $(((tree + kitb) / 1048576)) MiB (limit 64 MiB)"
  ((tree + kitb <= 64 * 1048576)) || { echo "gpu-kit: over the 64 MiB carry limit" >&2; return 1; }
}

out_dir() { echo "${OUT:-$kit/out}"; }
work_dir() { echo "${L3KIT_WORK:-$root/bench/work/gpukit}"; }

# The kit's libraries reach our programs through their RUNPATH only: no
# LIBRARY_PATH (gcc would pass it as an implicit link folder and CMake would
# leave it out of every RUNPATH) and no global LD_LIBRARY_PATH (Debian's
# libraries must not replace the image's in PyTorch's process).
env_setup() {
  export PATH="$prefix/bin:/usr/local/cuda/bin:$PATH"
  export CMAKE_PREFIX_PATH="$prefix/usr"
  export PKG_CONFIG_PATH="$prefix/usr/lib/x86_64-linux-gnu/pkgconfig:$prefix/usr/share/pkgconfig"
  export PKG_CONFIG_SYSROOT_DIR="$prefix"
  # Multiarch headers (jconfig.h) live in include/x86_64-linux-gnu.
  export CPATH="$prefix/usr/include:$prefix/usr/include/x86_64-linux-gnu${CPATH:+:$CPATH}"
}

# The GPU's arch ("90" on an H100/H200); 90 in the dry run.
cuda_arch() {
  if ((dry)); then echo "$prebuilt_arch"; return; fi
  nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .'
}

gpu_present() {
  if ((dry)); then
    echo "dryrun: no GPU; kernel execution left out"
    return 1
  fi
  return 0
}

step_setup() {
  rm -rf "$prefix" && mkdir -p "$prefix/bin"
  local f
  for f in "$kit"/debs/*.deb; do dpkg -x "$f" "$prefix"; done
  # Some of Debian's packages still ship under /lib (zlib, liblzma, com_err,
  # keyutils): one library folder, the one in every RPATH.
  if [[ -d "$prefix/lib/x86_64-linux-gnu" ]]; then
    cp -a "$prefix/lib/x86_64-linux-gnu/." "$libdir/"
  fi
  # A -dev link to /lib (zlib1g-dev's libz.so) dangles outside Debian: CMake
  # then takes the static libz.a, which cannot go into a shared module.
  local link target
  for link in "$libdir"/*.so; do
    [[ -L "$link" ]] || continue
    target="$(readlink "$link")"
    if [[ "$target" == /* && -e "$libdir/$(basename "$target")" ]]; then
      ln -sfn "$(basename "$target")" "$link"
    fi
  done
  # pkgconf needs the kit's libpkgconf; extend the caller's library path.
  cat >"$prefix/bin/pkg-config" <<EOF
#!/bin/sh
LD_LIBRARY_PATH="$libdir\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$prefix/usr/bin/pkgconf" "\$@"
EOF
  chmod +x "$prefix/bin/pkg-config"
  # The corpus travels in .gpukit (bench/corpus is not part of the tree).
  if [[ ! -d "$root/bench/corpus/photos" ]]; then
    mkdir -p "$root/bench/corpus"
    cp -r "$kit/corpus/." "$root/bench/corpus/"
  fi
  env_setup
  if gpu_present; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv
    # The device tool lends Firecracker and gVisor machines; on gVisor
    # (kernel 4.4.0) neither compute-sanitizer nor ncu can reach the GPU
    # (../.library/device/KINDS.md): sanitize and profile then fail, saying so.
    if [[ "$(uname -r)" == 4.4.0* ]]; then echo "runtime: gVisor (kernel $(uname -r)): no compute-sanitizer, no ncu"
    else echo "runtime: kernel $(uname -r)"; fi
  fi
  nvcc --version | tail -2
  cmake --version | head -1
  ninja --version
  python3 --version
  pkg-config --modversion libxxhash spng libzstd
}

# The GPU programs of build folder $1 (targets $2...): every library resolves
# from its RUNPATH (the kit, CUDA, the C/C++ runtime) and each program starts
# (a binary made elsewhere might not run on this image).
check_built() {
  local dir="$1" t b bins=()
  shift
  for t in "$@"; do
    b="$(find "$dir" -name "$t" -type f -perm -u+x | head -1)"
    [[ -n "$b" ]] || { echo "build: $t missing in $dir"; return 1; }
    bins+=("$b")
  done
  bash "$root/scripts/check_runpath.sh" --kit "$libdir" "${bins[@]}" || return 1
  for b in "${bins[@]}"; do
    case "$(basename "$b")" in
      test_*) "$b" --list-test-cases >/dev/null || { echo "build: $b does not start"; return 1; } ;;
      l3pack) "$b" --help >/dev/null || { echo "build: $b does not start"; return 1; } ;;
      bench_cuda) "$b" --help >/dev/null || { echo "build: $b does not start"; return 1; } ;;
    esac
  done
}

# Whether .gpukit/prebuilt was built from this tree, at this path, for GPU
# arch $1 (see prebuild); says why not, and returns 1, when it was not.
# Explicit checks: this runs inside `if`, where `set -e` does not hold.
prebuilt_usable() {
  local arch="$1" info_arch info_root same
  [[ "${L3KIT_NO_PREBUILT:-0}" != 1 ]] || { echo "build: L3KIT_NO_PREBUILT=1: building"; return 1; }
  [[ -f "$prebuilt/info" && -f "$prebuilt/manifest" && -f "$prebuilt/programs.tar.xz" ]] ||
    { echo "build: no prebuilt programs (scripts/gpu-kit.sh prebuild): building"; return 1; }
  read -r info_arch info_root <"$prebuilt/info" || return 1
  [[ "$info_arch" == "$arch" ]] || { echo "build: prebuilt for sm_$info_arch, this GPU is sm_$arch: building"; return 1; }
  [[ "$info_root" == "$root" ]] || { echo "build: prebuilt at $info_root, this copy is at $root: building"; return 1; }
  same="$(python3 "$root/scripts/tree_manifest.py" check "$root" "$prebuilt/manifest")" || return 1
  [[ "$same" == same ]] || { echo "build: prebuilt from another tree ($same): building"; return 1; }
  echo "build: prebuilt programs match (sm_$arch, this tree, $root)"
}

# Unpacks .gpukit/prebuilt into the build folders when prebuilt_usable, and
# checks its programs as a build's; returns 1 (the caller builds) otherwise.
use_prebuilt() {
  prebuilt_usable "$1" || return 1
  local d
  rm -rf "$build" "$build_fixed" $(variant_dirs)
  python3 - "$prebuilt/programs.tar.xz" "$root" <<'PY' || return 1
import sys, tarfile
with tarfile.open(sys.argv[1]) as t:  # python's lzma: the image need not have xz
    t.extractall(sys.argv[2], **({"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}))
PY
  check_built "$build" "${targets[@]}" || return 1
  check_built "$build_fixed" "${fixed_targets[@]}" || return 1
  for d in $(variant_dirs); do
    check_built "$d" bench_cuda || return 1
    touch "$d/.l3-prebuilt"
  done
  touch "$build/.l3-prebuilt" "$build_fixed/.l3-prebuilt"
  echo "build: prebuilt programs unpacked; no compilation"
}

step_build() {
  env_setup
  local arch
  arch="$(cuda_arch)"
  [[ "$arch" =~ ^[0-9]+$ ]] || { echo "build: no CUDA arch from nvidia-smi: '$arch'"; return 1; }
  if use_prebuilt "$arch"; then return 0; fi
  # Unpacked programs that did not pass: not this build's (their CMake cache
  # names the dry root's compiler launcher).
  rm -rf "$build_fixed" $(variant_dirs)
  [[ -f "$build/build.ninja" ]] || rm -rf "$build"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DL3_CUDA=ON -DL3_WERROR=OFF \
    -DL3_BUILD_BENCH=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" -DCMAKE_CUDA_FLAGS=-lineinfo \
    -DPKG_CONFIG_EXECUTABLE="$prefix/bin/pkg-config" "${rpath_flags[@]}" "${extra_cmake[@]}"
  ninja -C "$build" -j"$(nproc)" "${targets[@]}"
  check_built "$build" "${targets[@]}"
}

# The other wavefront code shape (spec/cuda.md §2), for `shape`: unpacked by
# the build step with the prebuilt programs, else built here.
step_build_fixed() {
  env_setup
  if [[ -f "$build_fixed/.l3-prebuilt" ]]; then
    echo "build_fixed: prebuilt (unpacked by the build step)"
    return 0
  fi
  [[ -f "$build_fixed/build.ninja" ]] || rm -rf "$build_fixed"
  cmake -S "$root" -B "$build_fixed" -G Ninja -DCMAKE_BUILD_TYPE=Release -DL3_CUDA=ON -DL3_WERROR=OFF \
    -DL3_BUILD_BENCH=ON -DL3_CUDA_FIXED_PREDICTORS=ON -DCMAKE_CUDA_ARCHITECTURES="$(cuda_arch)" \
    -DPKG_CONFIG_EXECUTABLE="$prefix/bin/pkg-config" "${rpath_flags[@]}" "${extra_cmake[@]}"
  ninja -C "$build_fixed" -j"$(nproc)" "${fixed_targets[@]}"
  check_built "$build_fixed" "${fixed_targets[@]}"
}

# The kernel variants' bench_cuda, for `variant`: unpacked by the build step
# with the prebuilt programs, else built here (only the kernel's file differs
# from the default build).
step_build_variant() {
  env_setup
  local v name dir
  for v in "${kernel_variants[@]}"; do
    name="${v%%=*}"
    dir="$(variant_dir "$name")"
    if [[ -f "$dir/.l3-prebuilt" ]]; then
      echo "build_variant: $name prebuilt (unpacked by the build step)"
      continue
    fi
    [[ -f "$dir/build.ninja" ]] || rm -rf "$dir"
    cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DL3_CUDA=ON -DL3_WERROR=OFF \
      -DL3_BUILD_BENCH=ON "-DL3_CUDA_KERNEL_DEFINES=$(tr ' ' ';' <<<"${v#*=}")" \
      -DCMAKE_CUDA_ARCHITECTURES="$(cuda_arch)" \
      -DPKG_CONFIG_EXECUTABLE="$prefix/bin/pkg-config" "${rpath_flags[@]}" "${extra_cmake[@]}"
    ninja -C "$dir" -j"$(nproc)" bench_cuda
    check_built "$dir" bench_cuda
  done
}

# The GPU suites: all must run; one that skips (no device) is a failure here.
step_test() {
  env_setup
  local log t
  log="$(work_dir)/ctest-gpu.log"
  mkdir -p "$(work_dir)"
  if ! gpu_present; then
    # The CPU part: every GPU test program loads and runs up to the device check.
    for t in test_cuda_gpu test_reader_gpu_batch; do
      "$(find "$build" -name "$t" -type f | head -1)" | tee "$log"
      grep -q L3_GPU_SKIPPED "$log"
    done
    (cd "$build" && ctest -L gpu -N | tee "$log" && grep -q "Total Tests: $gpu_tests" "$log")
    return 0
  fi
  (cd "$build" && ctest -L gpu --no-tests=error --output-on-failure) | tee "$log"
  if grep -qE 'Skipped|Not Run' "$log"; then
    echo "test: a GPU test was skipped: that is a failure on the GPU machine"
    return 1
  fi
  grep -qE "100% tests passed(, 0 tests failed)? out of $gpu_tests" "$log"
}

step_sanitize() {
  env_setup
  grep -q 'CMAKE_CUDA_FLAGS:STRING=-lineinfo' "$build/CMakeCache.txt"
  gpu_present || return 0
  local t tool log cs
  cs="$(command -v compute-sanitizer || echo /usr/local/cuda/compute-sanitizer/compute-sanitizer)"
  log="$(work_dir)/sanitize.log"
  for t in test_cuda_gpu test_reader_gpu_batch; do
    for tool in memcheck racecheck synccheck; do
      [[ "$tool" != memcheck && "$t" != test_cuda_gpu ]] && continue
      echo "== compute-sanitizer --tool $tool $t"
      "$cs" --tool "$tool" --error-exitcode 99 "$build/tests/$t" 2>&1 | tee "$log" || {
        grep -q 'Device not supported' "$log" &&
          echo "sanitize: compute-sanitizer does not support this machine's runtime (gVisor?): not checked"
        return 1
      }
      if grep -q L3_GPU_SKIPPED "$log"; then echo "sanitize: $t skipped"; return 1; fi
    done
  done
}

step_bench() {
  env_setup
  local peers
  if ! gpu_present; then
    # The CPU parts: load and encode the images, verify on the host, plan.
    "$build/bench/bench_cuda" --corpus "$root/bench/corpus" --host-only --sizes 500x375,64x48 --batch-mb 8
    python3 -m py_compile "$root/bench/bench_gpu_peers.py" "$root/bench/bench_reader_torch.py"
    # The carried peers unpack and their libraries resolve here too.
    peers="$(unpack_peers)"
    bash "$root/scripts/check_runpath.sh" $(find "$peers" -name '*.so*' -type f)
    BUILD_DIR="$build" L3_BENCH_NO_BUILD=1 bash "$root/bench/run_reader_gpu_bench.sh" --min-images 64 --prepare-only
    return 0
  fi
  peers="$(unpack_peers)"
  BUILD_DIR="$build" L3_BENCH_NO_BUILD=1 L3_PEERS_SITE="$peers" bash "$root/bench/run_cuda_bench.sh"
}

# The reader on 2,048+ whole photos (1-4 Mpixel; the 500x375 bar is `reader`).
step_reader_full() {
  env_setup
  gpu_present || return 0
  BUILD_DIR="$build" L3_BENCH_NO_BUILD=1 bash "$root/bench/run_reader_gpu_bench.sh" --min-images 2048 --epochs 2
}

# Nsight Compute over one decode kernel launch (500x375 batch): the figures
# that say what bounds it (bench/work/ncu-decode.log, in the results archive).
step_profile() {
  env_setup
  gpu_present || return 0
  local ncu
  ncu="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)"
  mkdir -p "$root/bench/work"
  "$ncu" --kernel-name decode_kernel --launch-count 1 --set full --import-source no --page details \
    "$build/bench/bench_cuda" --corpus "$root/bench/corpus" --sizes 500x375 --iters 1 --out /tmp/ncu-bench.md \
    >"$root/bench/work/ncu-decode.log" 2>&1
  grep -E "Duration|Throughput|Registers|Achieved Occupancy|Theoretical Occupancy|Warp Cycles|Issued|Stall|Eligible" \
    "$root/bench/work/ncu-decode.log" | head -40
  # Per SASS instruction: executions, stall samples, divergence (where the
  # kernel's cycles go, for the next round of kernel work).
  "$ncu" --kernel-name decode_kernel --launch-count 1 --section SourceCounters --section WarpStateStats \
    --import-source no --page source --print-source sass --csv \
    "$build/bench/bench_cuda" --corpus "$root/bench/corpus" --sizes 500x375 --iters 1 --out /tmp/ncu-bench.md \
    >"$root/bench/work/ncu-decode-sass.log" 2>&1
  wc -l "$root/bench/work/ncu-decode-sass.log"
}

# The reader's bar (issue 13) at training size: 2,048+ ImageNet-size pieces
# (500x375) of the carried photos, 224 random resized crops, CPU cores busy.
step_reader() {
  env_setup
  gpu_present || return 0
  local gpu
  gpu="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' /' '--')"
  BUILD_DIR="$build" L3_BENCH_NO_BUILD=1 bash "$root/bench/run_reader_gpu_bench.sh" --min-images 2048 \
    --cut 500x375 --epochs 4 --out "$root/bench/results/reader-gpu-$gpu-500x375.md"
}

step_shape() {
  env_setup
  gpu_present || return 0
  [[ -x "$build_fixed/bench/bench_cuda" ]] || step_build_fixed
  BUILD_DIR="$build_fixed" RESULT_SUFFIX=-fixed-predictors L3_BENCH_NO_PEERS=1 L3_BENCH_NO_BUILD=1 \
    bash "$root/bench/run_cuda_bench.sh"
}

# Times each kernel variant against the default kernel (kernel column only,
# bench_cuda --kernel-only): rounds of default, variant..., so that drift hits
# all alike; the median of the rounds per size, and its ratio to the
# default's, in bench/results/cuda-<gpu>-variants.md. A variant whose run
# fails (not bit-exact, an error) fails the step after the others have run
# and the table of the rest is written (bench/variant_table.py); the
# default's stops the step.
step_variant() {
  env_setup
  local v dir round runs gpu rc=0 args=(--corpus "$root/bench/corpus" --kernel-only) table=()
  step_build_variant  # nothing to do when they are built or unpacked
  runs="$(work_dir)/variants" && rm -rf "$runs" && mkdir -p "$runs"
  if ! gpu_present; then  # every variant's program runs up to the device
    for dir in "$build" $(variant_dirs); do
      "$dir/bench/bench_cuda" "${args[@]}" --host-only --sizes 64x48 --batch-mb 1 --out "$runs/host-only.md"
    done
    python3 "$root/tests/variant_table_test.py" "$root"
    return 0
  fi
  args+=(--sizes 500x375,2048x1024)
  for round in 1 2 3; do
    "$build/bench/bench_cuda" "${args[@]}" --out "$runs/default.$round.md"
    for v in "${kernel_variants[@]}"; do
      "$(variant_dir "${v%%=*}")/bench/bench_cuda" "${args[@]}" --out "$runs/${v%%=*}.$round.md" ||
        echo "variant ${v%%=*}, round $round: bench_cuda failed (exit $?)"
    done
  done
  gpu="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' /' '--')"
  for v in "${kernel_variants[@]}"; do table+=(--variant "$v"); done
  python3 "$root/bench/variant_table.py" --runs "$runs" --gpu "$gpu" --commit "${L3_COMMIT:-unknown}" "${table[@]}" \
    >"$root/bench/results/cuda-$gpu-variants.md" || rc=$?
  cat "$root/bench/results/cuda-$gpu-variants.md"
  return "$rc"
}

step_python() {
  env_setup
  local py="${L3KIT_PYTHON:-python3}" arch ext log
  arch="$(cuda_arch)"
  # CMAKE_INSTALL_RPATH_USE_LINK_PATH: the installed extension keeps the kit's
  # folder in its RUNPATH (install would strip the build RPATH).
  "$py" -m pip install --no-build-isolation --no-deps -q "$root" \
    --config-settings=build-dir="$root/build-py-gpukit" \
    --config-settings=cmake.define.L3_CUDA=ON --config-settings=cmake.define.CMAKE_CUDA_ARCHITECTURES="$arch" \
    --config-settings=cmake.define.L3_WERROR=OFF \
    --config-settings=cmake.define.CMAKE_INSTALL_RPATH_USE_LINK_PATH=ON \
    --config-settings=cmake.define.PKG_CONFIG_EXECUTABLE="$prefix/bin/pkg-config" \
    --config-settings=cmake.define.CMAKE_SHARED_LINKER_FLAGS=-Wl,--disable-new-dtags \
    --config-settings=cmake.define.CMAKE_MODULE_LINKER_FLAGS=-Wl,--disable-new-dtags
  ext="$(cd / && "$py" -c 'import l3._l3 as m; print(m.__file__)')"
  bash "$root/scripts/check_runpath.sh" --kit "$libdir" "$ext"
  (cd / && "$py" -c 'import l3; print("l3 imported from", l3.__file__)')
  if ! gpu_present; then
    "$py" -m py_compile "$root"/tests/python/*.py
    return 0
  fi
  "$py" -c 'import torch, sys; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available()); sys.exit(0 if torch.cuda.is_available() else 1)'
  log="$(work_dir)/pytest-gpu.log"
  mkdir -p "$(work_dir)"
  (cd "$root" && "$py" -m pytest -q -rs -m gpu tests/python) | tee "$log"
  if grep -qiE '[0-9]+ skipped|no tests ran' "$log"; then
    echo "python: GPU tests skipped or none ran: that is a failure on the GPU machine"
    return 1
  fi
}

# For tests/gpu_kit_selftest.sh (not a device step): a failing command must
# fail the step and stop it.
step_selfcheck() {
  false
  echo "selfcheck: after the failing command"
}

# Runs the steps, each in its own bash; writes kit-<steps>.log and
# results-<steps>.tar.gz to $OUT. Both are written as the steps go (the log
# live, the archive after each step), so a command stopped at the device's
# time limit still hands back what it did.
device() {
  local steps=("$@") o s rc=0 tag logs stamp
  ((${#steps[@]})) || { echo "device: name the steps (see the header)" >&2; return 2; }
  o="$(out_dir)"
  tag="$(IFS=-; echo "${steps[*]}")"
  logs="$(work_dir)/logs"
  rm -rf "$logs" && mkdir -p "$o" "$logs" "$root/bench/results"
  : >"$o/kit-$tag.log"
  stamp="$(work_dir)/stamp" && touch "$stamp"
  [[ -f "$kit/commit" ]] && export L3_COMMIT="$(cat "$kit/commit")"
  check_tree >"$logs/tree-check.txt"  # not in a pipe: its export must stay here
  tee -a "$o/kit-$tag.log" <"$logs/tree-check.txt"
  for s in "${steps[@]}"; do
    declare -F "step_$s" >/dev/null || { echo "device: unknown step $s" >&2; return 2; }
    echo "== step $s ($(date -u +%H:%M:%S))"
    echo "===== step $s" >>"$o/kit-$tag.log"
    local t0=$SECONDS src=0
    L3KIT_DRYRUN="$dry" "$BASH" "$self" _step "$s" 2>&1 | tee "$logs/$s.log" >>"$o/kit-$tag.log" ||
      src=${PIPESTATUS[0]}
    if ((src)); then
      echo "   step $s FAILED (exit $src, $((SECONDS - t0)) s); tail of $s.log:"
      tail -20 "$logs/$s.log"
      rc=1
    else
      echo "   step $s ok ($((SECONDS - t0)) s)"
      tail -5 "$logs/$s.log"
    fi
    archive_results "$o/results-$tag.tar.gz" "$stamp"
    ((src)) && [[ "$s" == setup || "$s" == build ]] && break
  done
  echo "== $(date -u +%H:%M:%S) wrote $o/kit-$tag.log and $o/results-$tag.tar.gz; exit $rc"
  return $rc
}

# The reports and raw timings the steps wrote since STAMP, as one archive.
archive_results() {
  local dirs=() d
  for d in bench/results bench/work; do [[ -d "$root/$d" ]] && dirs+=("$d"); done
  (cd "$root" && find "${dirs[@]}" -maxdepth 2 -type f -newer "$2" \
      \( -name '*.md' -o -name '*.jsonl' -o -name '*.log' \) -print0 |
    tar --null -T - -czf "$1.tmp") && mv "$1.tmp" "$1"
}

# The dry run's root: Debian 12 with a compiler, CMake, ninja and python3
# only (plus ccache, so that a second dry run compiles quickly; it does not
# change what is linked). Made once, kept in .gpukit-dry/root.
dry_root() {
  local r="$dry_cache/root"
  [[ -f "$r/.l3-dryroot-ok" ]] && { echo "$r"; return; }
  command -v debootstrap >/dev/null || apt-get install -y -q debootstrap >&2
  rm -rf "$r.tmp" && mkdir -p "$dry_cache"
  debootstrap --variant=minbase --include=g++,make,cmake,ninja-build,python3,python3-dev,python3-venv,python3-pip,binutils,ccache \
    bookworm "$r.tmp" http://deb.debian.org/debian >&2
  rm -rf "$r" && mv "$r.tmp" "$r"
  touch "$r/.l3-dryroot-ok"
  echo "$r"
}

# Wheels the dry root's python needs to build and import the extension, and
# the build tools as the device image has them (pip's cmake and ninja, newer
# than Debian's 3.25, whose FindCUDAToolkit fails on CUDA 13); not carried.
dry_wheels() {
  local w="$dry_cache/wheels"
  if [[ ! -f "$w/.ok" ]]; then
    mkdir -p "$w"
    python3 -m pip download -q --only-binary=:all: --python-version 3.11 -d "$w" \
      nanobind scikit-build-core numpy cmake ninja >&2
    touch "$w/.ok"
  fi
  echo "$w"
}

dryrun() {
  local steps=("$@") r w t0=$SECONDS rc=0
  ((${#steps[@]})) || steps=(setup build test sanitize bench python)
  [[ "$(id -u)" == 0 ]] || { echo "dryrun: needs root (chroot, mount)" >&2; return 2; }
  [[ -d "$kit/debs" ]] || { echo "dryrun: run scripts/gpu-kit.sh prepare first" >&2; return 2; }
  r="$(dry_root)"
  w="$(dry_wheels)"
  # The device's copy: the tree as git would send it, plus .gpukit.
  # At this checkout's path, as on the device (see prebuild).
  rm -rf "$r/work" "$r$root" && mkdir -p "$r$root" "$r/work/out" "$r/usr/local/cuda" "$r/wheels" "$r/ccache"
  (cd "$root" && git ls-files -co --exclude-standard -z | tar --null -T - -c) | tar -x -C "$r$root"
  (cd "$root" && tar --exclude=./out -c .gpukit) | tar -x -C "$r$root"
  cp /etc/resolv.conf "$r/etc/resolv.conf"
  mount -t proc proc "$r/proc"
  mount --bind /dev "$r/dev"
  mount --bind -o ro /usr/local/cuda "$r/usr/local/cuda"
  mount --bind "$w" "$r/wheels"
  mount --bind "$dry_cache" "$r/ccache"
  # shellcheck disable=SC2064
  trap "umount '$r/ccache' '$r/wheels' '$r/usr/local/cuda' '$r/dev' '$r/proc' 2>/dev/null || true" EXIT
  # The image's python has nanobind, scikit-build-core and numpy: a venv with them here.
  chroot "$r" /bin/bash -c 'set -e; [ -x /opt/py/bin/python3 ] || python3 -m venv /opt/py;
    /opt/py/bin/python3 -m pip install -q --no-index --find-links /wheels nanobind scikit-build-core numpy cmake ninja'
  chroot "$r" /usr/bin/env -i HOME=/root PATH=/opt/py/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    OUT=/work/out L3KIT_DRYRUN=1 L3KIT_PYTHON=/opt/py/bin/python3 CCACHE_DIR=/ccache/ccache \
    L3KIT_CMAKE_ARGS="-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache" \
    L3KIT_NO_PREBUILT="${L3KIT_NO_PREBUILT:-0}" /bin/bash "$root/scripts/gpu-kit.sh" device "${steps[@]}" || rc=$?
  mkdir -p "$dry_cache/out" && cp "$r"/work/out/* "$dry_cache/out/"
  umount "$r/ccache" "$r/wheels" "$r/usr/local/cuda" "$r/dev" "$r/proc"
  trap - EXIT
  echo "dryrun: $((SECONDS - t0)) s; disk: root $(du -sxh "$r" | cut -f1) (of which the copy and its builds" \
    "$(du -sxh "$r$root" | cut -f1)), ccache $(du -sxh "$dry_cache/ccache" 2>/dev/null | cut -f1); exit $rc"
  echo "dryrun: outputs in $dry_cache/out"
  return $rc
}

# The GPU targets of both code shapes, built in the dry root (the device's
# libraries from .gpukit, its paths, this CUDA compiler) for sm_90, packed
# for the device's build step (use_prebuilt): .gpukit/prebuilt holds info
# (arch, path), manifest (the tree built, scripts/tree_manifest.py) and
# programs.tar.xz (the programs, the CTest files and the CMake caches of
# build-gpukit and build-gpukit-fixed: one solid archive, the programs share
# most of their code).
prebuild() {
  local r stage files
  [[ "$build" == "$root/build-gpukit" ]] || { echo "prebuild: L3KIT_BUILD must be unset" >&2; return 2; }
  rm -rf "$prebuilt"
  stage="$(mktemp -d)"
  python3 "$root/scripts/tree_manifest.py" write "$root" "$stage/manifest"
  L3KIT_NO_PREBUILT=1 dryrun setup build build_fixed build_variant
  r="$(dry_root)"
  [[ "$(python3 "$root/scripts/tree_manifest.py" check "$r$root" "$stage/manifest")" == same ]] ||
    { echo "prebuild: the tree changed while it was built; run it again" >&2; return 1; }
  files="$(cd "$r$root" && {
    for t in "${targets[@]}"; do find build-gpukit -name "$t" -type f -perm -u+x | head -1; done
    for t in "${fixed_targets[@]}"; do find build-gpukit-fixed -name "$t" -type f -perm -u+x | head -1; done
    for d in $(variant_dirs); do find "${d#"$root"/}" -name bench_cuda -type f -perm -u+x | head -1; done
    find build-gpukit build-gpukit-fixed $(variant_dirs | sed "s|^$root/||") \
      \( -name CTestTestfile.cmake -o -name CMakeCache.txt \) -type f
  })"
  mkdir -p "$prebuilt"
  (cd "$r$root" && tar -c $files) | xz -9e -T1 >"$stage/programs.tar.xz"
  echo "$prebuilt_arch $root" >"$stage/info"
  mv "$stage"/* "$prebuilt/" && rmdir "$stage"
  echo "prebuild: $(wc -l <<<"$files") files, $(du -h "$prebuilt/programs.tar.xz" | cut -f1) packed in $prebuilt"
  carry_size
}

case "${1:-}" in
  prepare) prepare ;;
  prebuild) prebuild ;;
  stamp) stamp_commit ;;
  device) shift; device "$@" ;;
  dryrun) shift; dryrun "$@" ;;
  _step) set -x; "step_$2" ;;
  _prebuilt_usable) prebuilt_usable "$2" ;;  # tests/gpu_kit_selftest.sh
  *) sed -n '2,/^set -euo/p' "$self" | sed '$d'; exit 2 ;;
esac
