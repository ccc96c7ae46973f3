#!/usr/bin/env bash
# Static check of kernels' resources on the H100's architecture (spec/cuda.md
# §2 "Registers and code size"): compiles one .cu for sm_90 with `ptxas -v`
# and fails when a named kernel has a stack frame or spills registers.
# Per-thread state indexed by a runtime bound (a loop to t.channels instead of
# the compile-time CH, o.norm[c] in a kernel parameter) lands in local memory
# and is read and written in the hot loop: the decode kernel had 392 bytes of
# stack, the reader's resample kernel 120, before this check existed. Prints
# each kernel's registers, stack, spills and shared memory.
#
# Usage: cuda_kernel_resources.sh NVCC SOURCE_DIR FILE KERNEL[,KERNEL...] [NVCC_FLAGS...]
#   FILE relative to SOURCE_DIR; KERNEL a substring of the kernel's mangled name.
set -euo pipefail
nvcc="$1" src="$2" file="$3" kernels="$4"; shift 4
out="$(mktemp -d)"; trap 'rm -rf "$out"' EXIT
includes=()
for dir in cuda/include cuda/src codec/include common/include format/include reader/include reader/src; do
  includes+=("-I$src/$dir")
done
"$nvcc" "${includes[@]}" -O3 -DNDEBUG -std=c++20 --generate-code=arch=compute_90,code=sm_90 -Xptxas -v "$@" \
  -x cu -c "$src/$file" -o "$out/kernel.o" >"$out/log" 2>&1 \
  || { cat "$out/log"; echo "FAIL: nvcc failed on $file"; exit 1; }
status=0
IFS=, read -ra names <<<"$kernels"
for k in "${names[@]}"; do
  # ptxas prints "Function properties for <mangled>" then the stack/spill line,
  # and "Compiling entry function '<mangled>'" ... "Used N registers".
  props="$(grep -A1 -E "Function properties for .*$k" "$out/log" | sed -n 2p)"
  usage="$(grep -A3 -E "Compiling entry function '.*$k" "$out/log" | grep -m1 -E "Used [0-9]+ registers" || true)"
  if [[ -z "$props" || -z "$usage" ]]; then
    echo "FAIL: no ptxas report for $k in $file"; status=1; continue
  fi
  stack="$(sed -E 's/.* ([0-9]+) bytes stack frame.*/\1/' <<<"$props")"
  spill_st="$(sed -E 's/.* ([0-9]+) bytes spill stores.*/\1/' <<<"$props")"
  spill_ld="$(sed -E 's/.* ([0-9]+) bytes spill loads.*/\1/' <<<"$props")"
  regs="$(sed -E 's/.*Used ([0-9]+) registers.*/\1/' <<<"$usage")"
  smem="$(grep -oE '[0-9]+ bytes smem' <<<"$usage" || echo "0 bytes smem")"
  echo "$k sm_90: $regs registers, $stack bytes stack frame, $spill_st/$spill_ld bytes spill stores/loads, $smem"
  if [[ "$stack" -ne 0 || "$spill_st" -ne 0 || "$spill_ld" -ne 0 ]]; then
    echo "FAIL: $k uses local memory (stack frame or spills): its per-thread state must stay in registers"
    status=1
  fi
done
[[ $status -eq 0 ]] && echo "PASS"
exit $status
