#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan+UBSan) and runs each for
# SECONDS seconds, L3_FUZZ_JOBS targets at a time (one process each), starting
# from its committed seed corpus plus the crashers. The CPU decoder's per-plane
# row loop alone (L3_CPU_FIXED_PREDICTORS=OFF: the same pixels and statuses,
# a third of the codec's compile time). Fails on any finding (crash, sanitizer report, leak, timeout,
# out-of-memory); prints the executions per target.
#
#   tests/fuzz/run_fuzzers.sh SECONDS [TARGET...]
#
# Environment: L3_FUZZ_BUILD_DIR (default build-fuzz-ci, relative to the
# repository root), L3_FUZZ_JOBS (build parallelism and fuzzers run at once,
# default 2),
# CXX (default clang++), L3_FUZZ_ARTIFACTS (where crashing inputs go, default
# <build>/fuzz-artifacts).
set -euo pipefail

if [[ $# -lt 1 || ! $1 =~ ^[0-9]+$ ]]; then
  echo "usage: $0 SECONDS [TARGET...]" >&2
  exit 2
fi
seconds=$1
shift
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${L3_FUZZ_BUILD_DIR:-build-fuzz-ci}
[[ $build = /* ]] || build=$root/$build
jobs=${L3_FUZZ_JOBS:-2}
artifacts=${L3_FUZZ_ARTIFACTS:-$build/fuzz-artifacts}
all=(decode roundtrip region wavefront shard manifest image_io list_file)
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=("${all[@]}")

cmake -S "$root" -B "$build" -DCMAKE_CXX_COMPILER="${CXX:-clang++}" -DCMAKE_C_COMPILER="${CC:-clang}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DL3_FUZZ=ON -DL3_SANITIZE=address,undefined \
  -DL3_BUILD_BENCH=OFF -DL3_CUDA=OFF -DL3_CPU_FIXED_PREDICTORS=OFF >/dev/null
cmake --build "$build" -j "$jobs" --target "${targets[@]/#/fuzz_}"

mkdir -p "$artifacts"
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# One fuzzer; its exit status goes to $build/fuzz-$t.rc.
fuzz_one() {
  local t=$1 work=$build/fuzz-work/$1 log=$build/fuzz-$1.log rc
  rm -rf "$work"
  mkdir -p "$work"
  local dict=() seeds=("$root/tests/fuzz/corpus/$t")
  [[ -f $root/tests/fuzz/$t.dict ]] && dict=(-dict="$root/tests/fuzz/$t.dict")
  [[ -d $root/tests/crashers/$t ]] && seeds+=("$root/tests/crashers/$t")
  [[ $t == decode && -d $root/spec/vectors/codec ]] && seeds+=("$root/spec/vectors/codec")
  set +e
  # New inputs go to $work (first folder); the committed corpus is only read.
  "$build/tests/fuzz_$t" "$work" "${seeds[@]}" "${dict[@]}" -max_total_time="$seconds" \
    -rss_limit_mb=2048 -timeout=20 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$artifacts/$t-" >"$log" 2>&1
  rc=$?
  set -e
  echo "$rc" >"$build/fuzz-$t.rc"
}

# L3_FUZZ_JOBS fuzzers at a time.
running=0
for t in "${targets[@]}"; do
  echo "== fuzz_$t for ${seconds}s"
  fuzz_one "$t" &
  running=$((running + 1))
  if ((running >= jobs)); then
    wait -n || true
    running=$((running - 1))
  fi
done
wait

status=0
summary=""
for t in "${targets[@]}"; do
  log=$build/fuzz-$t.log
  rc=$(cat "$build/fuzz-$t.rc" 2>/dev/null || echo 1)
  execs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}' | tail -1 || true)
  line="fuzz_$t: ${execs:-?} executions in ${seconds}s, exit $rc"
  summary+="$line"$'\n'
  if [[ $rc -ne 0 ]]; then
    status=1
    echo "!! fuzz_$t found a problem; log: $log; input(s):" >&2
    ls "$artifacts"/"$t"-* 2>/dev/null >&2 || true
    tail -n 60 "$log" >&2
  fi
done
echo "== summary"
printf '%s' "$summary"
exit $status
