#!/usr/bin/env bash
# Every test: installs what the tests need, then
#   1. Release build with warnings as errors, with the CUDA targets compiled by
#      nvcc for sm_90 when nvcc exists; all ctest suites (GPU tests
#      skip without a device and are reported as not run);
#   2. the suites under AddressSanitizer + UndefinedBehaviorSanitizer (clang,
#      with the libFuzzer targets);
#   3. the tests labelled tsan (the reader's pipeline) under ThreadSanitizer;
#   4. the Python package: pip install . and pytest (scripts/test_python.sh);
#   5. each libFuzzer target for FUZZ_SECONDS (default 30), from stage 2's build;
# and prints one summary. Idempotent; run as root on Debian 12.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
jobs="${JOBS:-$(nproc)}"
# 30 s: CI's run is a smoke test from the committed corpora (7 targets, 2
# at a time: 105 s); the long runs of each format change are in
# tests/fuzz/RESULTS.md. At 60 s the whole script took 1,590 s on a slow
# 2-core CI machine, above its 25-minute budget.
fuzz_seconds="${FUZZ_SECONDS:-30}"
"$root/scripts/install-deps.sh" --test || exit 1
export PATH="$PATH:/usr/local/cuda/bin"
# ccache under every build below (CMake reads these for new build directories,
# scikit-build-core's and the fuzzers' too): identical compiles are done once
# (the Python package's objects are the Release build's), and a machine that
# keeps ~/.cache/ccache runs the suite again in a fraction of the time.
if command -v ccache >/dev/null; then
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_CUDA_COMPILER_LAUNCHER=ccache
  export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1
  ccache --zero-stats >/dev/null 2>&1 || true
fi

passed=0 failed=0 tests_passed=0 tests_failed=0 tests_skipped=0
summary=()
log="$(mktemp)"
stage() {  # stage NAME COMMAND...: runs a stage, records its outcome
  local name="$1"; shift
  echo; echo "==== $name"
  local start=$SECONDS
  if "$@"; then
    summary+=("PASS  $name ($((SECONDS - start)) s)"); passed=$((passed + 1))
  else
    summary+=("FAIL  $name ($((SECONDS - start)) s)"); failed=$((failed + 1))
  fi
}
build() {  # build DIR CMAKE_ARGS...
  local dir="$1"; shift
  cmake -S "$root" -B "$dir" -G Ninja "$@" >/dev/null && ninja -C "$dir" -j"$jobs"
}
run_ctest() {  # run_ctest DIR CTEST_ARGS...: runs ctest and adds its counts to the totals
  local dir="$1"; shift
  ctest --test-dir "$dir" -j"$jobs" --output-on-failure "$@" 2>&1 | tee "$log"
  local status=${PIPESTATUS[0]} line total bad skipped
  line="$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -n 1)"
  if [[ -n "$line" ]]; then
    total="$(sed -E 's/.*out of ([0-9]+).*/\1/' <<<"$line")"
    bad="$(sed -E 's/.*passed, ([0-9]+) tests? failed.*/\1/' <<<"$line")"
    # ctest counts skipped tests (GPU tests without a GPU) among the passed.
    skipped="$(grep -cE '^\s+[0-9]+ - .* \(Skipped\)$' "$log")"
    tests_passed=$((tests_passed + total - bad - skipped)); tests_failed=$((tests_failed + bad))
    tests_skipped=$((tests_skipped + skipped))
  fi
  return "$status"
}

# One Release build holds everything, the CUDA targets too when nvcc exists
# (compiled for sm_90, the GPU the project is measured on and the target of
# the kernels' resource bar; their GPU tests skip without a device). A plain
# build compiles sm_80 too (CMakeLists.txt); CI leaves it out, as it does for
# the Python package's build (CUDAARCHS): each architecture is another nvcc
# pass over every kernel.
cuda=OFF
command -v nvcc >/dev/null && cuda=ON
export CUDAARCHS="${CUDAARCHS:-90}"
stage "build (Release, -Werror, CUDA $cuda)" build "$root/build-ci" -DCMAKE_BUILD_TYPE=Release -DL3_CUDA=$cuda \
  -DCMAKE_CUDA_ARCHITECTURES="$CUDAARCHS"
[[ $cuda == ON ]] || summary+=("NOTE  nvcc not found: CUDA targets not compiled")
stage "tests" run_ctest "$root/build-ci" -LE tsan
# The sanitizer build was the slowest stage (426 s at -O2 on 2 cores): -Og halves
# its code generation (CLI11 and nlohmann-json instantiations under ASan+UBSan)
# for ~6 s more test time; -g1 line tables are enough for reports.
# XXH_NO_INLINE_HINTS: at -Og a compiler may refuse xxhash.h's always_inline
# (XXH_INLINE_ALL).
# L3_CPU_FIXED_PREDICTORS=OFF here and under TSan: the CPU decoder's per-plane
# row loop alone (the Release build tests the per-predictor copies); the four
# decode_coded_<N>.cpp were 663 of the ASan build's 1,804 CPU seconds.
# clang with L3_FUZZ=ON: the same build holds the libFuzzer targets, which the
# fuzzer stage runs from it (L3_FUZZ_BUILD_DIR) instead of compiling the
# libraries a third time; the suites then also build clean under a second
# compiler's -Werror.
asan_dir="$root/build-ci-asan"
stage "build (ASan+UBSan, clang, with the fuzzers)" build "$asan_dir" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DL3_CUDA=OFF \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-Og -g1 -DNDEBUG -DXXH_NO_INLINE_HINTS" -DL3_BUILD_BENCH=OFF \
  -DL3_SANITIZE=address,undefined -DL3_CPU_FIXED_PREDICTORS=OFF -DL3_FUZZ=ON
stage "tests under ASan+UBSan" run_ctest "$asan_dir" -LE "tsan|gpu"
# ThreadSanitizer: only the tests labelled tsan (the reader's pipeline).
tsan_targets="$(grep -hoE 'l3_add_test\(([a-z_0-9]+)[^)]*LABELS "[^"]*tsan' "$root"/tests/*.cmake | sed -E 's/l3_add_test\(([a-z_0-9]+).*/\1/')"
if [[ -n "$tsan_targets" ]]; then
  stage "build (TSan: $(echo $tsan_targets))" bash -c "cmake -S '$root' -B '$root/build-ci-tsan' -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DL3_CUDA=OFF -DL3_BUILD_BENCH=OFF -DL3_SANITIZE=thread \
    -DL3_CPU_FIXED_PREDICTORS=OFF >/dev/null \
    && ninja -C '$root/build-ci-tsan' -j$jobs $(echo $tsan_targets)"
  stage "tests under TSan" run_ctest "$root/build-ci-tsan" -L tsan
fi
run_pytest() {  # the Python suite; adds pytest's counts to the totals
  bash "$root/scripts/test_python.sh" 2>&1 | tee "$log"
  local status=${PIPESTATUS[0]} line n
  line="$(grep -E '^== test_python: summary:' "$log" | tail -n 1)"
  n="$(grep -oE '[0-9]+ passed' <<<"$line" | grep -oE '[0-9]+')"; tests_passed=$((tests_passed + ${n:-0}))
  n="$(grep -oE '[0-9]+ failed' <<<"$line" | grep -oE '[0-9]+')"; tests_failed=$((tests_failed + ${n:-0}))
  return "$status"
}
stage "Python package (pip install ., pytest)" run_pytest
if [[ -x "$root/tests/fuzz/run_fuzzers.sh" && "$fuzz_seconds" -gt 0 ]]; then
  stage "fuzzers (${fuzz_seconds} s each)" env L3_FUZZ_BUILD_DIR="$asan_dir" "$root/tests/fuzz/run_fuzzers.sh" "$fuzz_seconds"
fi

echo; echo "==== summary"
printf '%s\n' "${summary[@]}"
command -v ccache >/dev/null && echo "ccache: $(ccache --print-stats 2>/dev/null | awk -F'\t' '$1 ~ /^(direct_cache_hit|preprocessed_cache_hit|cache_miss)$/ {printf "%s %s  ", $1, $2}')"
echo "stages: $passed passed, $failed failed"
echo "tests: $tests_passed passed, $tests_failed failed, $tests_skipped skipped"
[[ $failed -eq 0 ]]
