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
source "$src/scripts/ptxas_resources.sh"
out="$(mktemp -d)"; trap 'rm -rf "$out"' EXIT
ptxas_compile "$src" 90 "$out/kernel" "$file" "$@" || { echo "FAIL: nvcc failed on $file"; exit 1; }
status=0
IFS=, read -ra names <<<"$kernels"
for k in "${names[@]}"; do
  if ! read -r regs stack spill_st spill_ld smem < <(ptxas_kernel "$out/kernel.log" "$k"); then
    echo "FAIL: no ptxas report for $k in $file"; status=1; continue
  fi
  echo "$k sm_90: $regs registers, $stack bytes stack frame, $spill_st/$spill_ld bytes spill stores/loads, $smem bytes smem"
  if [[ "$stack" -ne 0 || "$spill_st" -ne 0 || "$spill_ld" -ne 0 ]]; then
    echo "FAIL: $k uses local memory (stack frame or spills): its per-thread state must stay in registers"
    status=1
  fi
done
[[ $status -eq 0 ]] && echo "PASS"
exit $status
