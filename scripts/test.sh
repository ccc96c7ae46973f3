#!/usr/bin/env bash
# Every test: installs what the tests need, then
#   1. Release build with warnings as errors, all ctest suites;
#   2. the same suites under AddressSanitizer + UndefinedBehaviorSanitizer;
#   3. the reader's concurrency tests under ThreadSanitizer;
#   4. the CUDA targets compiled with nvcc for sm_80 and sm_90 (when nvcc exists);
#   5. the Python package: pip install . and pytest (scripts/test_python.sh);
#   6. each libFuzzer target for FUZZ_SECONDS (default 60);
# and prints one summary. Idempotent; run as root on Debian 12.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
jobs="${JOBS:-$(nproc)}"
fuzz_seconds="${FUZZ_SECONDS:-60}"
"$root/scripts/install-deps.sh" --test || exit 1
export PATH="$PATH:/usr/local/cuda/bin"

passed=0 failed=0 tests_passed=0 tests_failed=0
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
  local status=${PIPESTATUS[0]} line total bad
  line="$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -n 1)"
  if [[ -n "$line" ]]; then
    total="$(sed -E 's/.*out of ([0-9]+).*/\1/' <<<"$line")"
    bad="$(sed -E 's/.*passed, ([0-9]+) tests? failed.*/\1/' <<<"$line")"
    tests_passed=$((tests_passed + total - bad)); tests_failed=$((tests_failed + bad))
  fi
  return "$status"
}

stage "build (Release, -Werror)" build "$root/build-ci" -DCMAKE_BUILD_TYPE=Release -DL3_CUDA=OFF
stage "tests" run_ctest "$root/build-ci" -LE tsan
stage "build (ASan+UBSan)" build "$root/build-ci-asan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DL3_CUDA=OFF \
  -DL3_BUILD_BENCH=OFF -DL3_SANITIZE=address,undefined
stage "tests under ASan+UBSan" run_ctest "$root/build-ci-asan" -LE tsan
if grep -rqs "tsan" "$root/tests/reader.cmake"; then
  stage "build (TSan)" build "$root/build-ci-tsan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DL3_CUDA=OFF \
    -DL3_BUILD_BENCH=OFF -DL3_SANITIZE=thread
  stage "tests under TSan" run_ctest "$root/build-ci-tsan" -L tsan
fi
if command -v nvcc >/dev/null; then
  stage "CUDA targets with nvcc (sm_80, sm_90)" build "$root/build-ci-cuda" -DCMAKE_BUILD_TYPE=Release \
    -DL3_CUDA=ON -DL3_BUILD_BENCH=ON -DCMAKE_CUDA_ARCHITECTURES="80;90"
  stage "tests with the CUDA build (GPU tests skip without a GPU)" run_ctest "$root/build-ci-cuda" -LE tsan
else
  summary+=("SKIP  CUDA targets: nvcc not found")
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
  stage "fuzzers (${fuzz_seconds} s each)" "$root/tests/fuzz/run_fuzzers.sh" "$fuzz_seconds"
fi

echo; echo "==== summary"
printf '%s\n' "${summary[@]}"
echo "stages: $passed passed, $failed failed"
echo "tests: $tests_passed passed, $tests_failed failed"
[[ $failed -eq 0 ]]
