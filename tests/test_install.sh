#!/usr/bin/env bash
# The installed package works for a C++ user (issue 16 item 7):
#   1. `cmake --install BUILD --prefix TMP/prefix` (the already-built tree);
#   2. the installed tree holds the public headers but no internal one, and the
#      installed l3pack runs and prints the version;
#   3. tests/consumer (find_package(l3 REQUIRED)) configured against an empty
#      prefix fails: it finds no l3 elsewhere, so step 4 uses the installed one;
#   4. tests/consumer configured with -DCMAKE_PREFIX_PATH=TMP/prefix, built and
#      run: codec, PNG, convert and reader checks.
# Any failing step fails the test.
#
#   test_install.sh BUILD_DIR CMAKE GENERATOR CXX_COMPILER VERSION [CUDA_TOOLKIT_ROOT]
set -euo pipefail
if [[ $# -lt 5 ]]; then
  echo "usage: test_install.sh BUILD_DIR CMAKE GENERATOR CXX_COMPILER VERSION [CUDA_TOOLKIT_ROOT]" >&2
  exit 2
fi
build="$1" cmake="$2" generator="$3" cxx="$4" version="$5" cuda_root="${6:-}"
consumer="$(cd "$(dirname "${BASH_SOURCE[0]}")/consumer" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"

fail() { echo "test_install: FAILED: $*" >&2; exit 1; }
step() { echo "test_install: $* ($SECONDS s)"; }

step "install into $prefix"
"$cmake" --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log" >&2; fail "cmake --install"; }

for f in include/l3/codec/codec.hpp include/l3/reader/reader.hpp include/l3/cuda/batch_types.hpp \
         include/l3/common/version.hpp bin/l3pack; do
  [[ -e "$prefix/$f" ]] || fail "not installed: $f"
done
for f in l3Config.cmake l3ConfigVersion.cmake l3Targets.cmake; do
  [[ -n "$(find "$prefix" -path "*/cmake/l3/$f")" ]] || fail "not installed: lib*/cmake/l3/$f"
done
# Internal headers (src/, and the two under include/ that are not API) stay out.
internal="$(find "$prefix/include" -name 'bench_read_cli.hpp' -o -name 'thrust_arena.hpp' -o -name 'reader_core.hpp')"
[[ -z "$internal" ]] || fail "internal headers installed: $internal"
[[ "$("$prefix/bin/l3pack" --version)" == *"$version"* ]] || fail "installed l3pack --version does not say $version"

configure() {  # configure BUILD_DIR PREFIX_PATH
  local args=(-S "$consumer" -B "$1" -G "$generator" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release
              -DCMAKE_PREFIX_PATH="$2" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DL3_WANT_VERSION="$version")
  [[ -z "$cuda_root" ]] || args+=(-DCUDAToolkit_ROOT="$cuda_root")
  "$cmake" "${args[@]}"
}

step "consumer against an empty prefix (must fail)"
mkdir -p "$tmp/empty"
if configure "$tmp/build-empty" "$tmp/empty" >"$tmp/empty.log" 2>&1; then
  cat "$tmp/empty.log" >&2
  fail "find_package(l3) succeeded without the installed prefix"
fi
grep -q 'l3Config.cmake' "$tmp/empty.log" || { cat "$tmp/empty.log" >&2; fail "the empty-prefix configure failed for another reason"; }

step "consumer against $prefix: configure"
configure "$tmp/build" "$prefix" >"$tmp/configure.log" 2>&1 || { cat "$tmp/configure.log" >&2; fail "consumer configure"; }
step "consumer: build"
"$cmake" --build "$tmp/build" >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log" >&2; fail "consumer build"; }
step "consumer: run"
mkdir -p "$tmp/work"
"$tmp/build/l3_consumer" "$tmp/work" || fail "consumer run"
step "passed"
