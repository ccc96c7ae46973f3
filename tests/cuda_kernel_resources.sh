#!/usr/bin/env bash
# Static check of kernels' resources on the H100's architecture (spec/cuda.md
# §2 "Registers and code size"): compiles one .cu for sm_90 with `ptxas -v`
# and fails when a named kernel has a stack frame or spills registers.
# Per-thread state indexed by a runtime bound (a loop to t.channels instead of
# the compile-time CH, o.norm[c] in a kernel parameter) lands in local memory
# and is read and written in the hot loop: the decode kernel had 392 bytes of
# stack, the reader's resample kernel 120, before this check existed. A
# kernel named as KERNEL:WARPS:THREADS must also leave at least WARPS warps
# resident per SM in blocks of THREADS (registers and shared memory,
# scripts/ptxas_resources.sh's ptxas_occupancy): from version 13 to 15 the
# decode kernel's 46,720 bytes of shared memory a block let 4 blocks (16
# warps) share an SM instead of 5, unnoticed without a GPU. A kernel named
# as KERNEL:WARPS:THREADS:LOCAL may use up to LOCAL bytes of local memory
# (stack frame, and spill stores and loads each): the narrow-ring variant,
# whose 24 warps leave 80 registers a thread (spec/cuda.md §2 "Kernel
# variants"). Prints each kernel's registers, stack, spills, shared memory
# and warps per SM.
#
# Usage: cuda_kernel_resources.sh NVCC SOURCE_DIR FILE KERNEL[:WARPS:THREADS[:LOCAL]][,...] [NVCC_FLAGS...]
#   FILE relative to SOURCE_DIR; KERNEL a substring of the kernel's mangled name.
set -euo pipefail
nvcc="$1" src="$2" file="$3" kernels="$4"; shift 4
source "$src/scripts/ptxas_resources.sh"
out="$(mktemp -d)"; trap 'rm -rf "$out"' EXIT
ptxas_compile "$src" 90 "$out/kernel" "$file" "$@" || { echo "FAIL: nvcc failed on $file"; exit 1; }
status=0
IFS=, read -ra names <<<"$kernels"
for spec in "${names[@]}"; do
  IFS=: read -r k min_warps threads local_max <<<"$spec"
  local_max="${local_max:-0}"
  if ! read -r regs stack spill_st spill_ld smem < <(ptxas_kernel "$out/kernel.log" "$k"); then
    echo "FAIL: no ptxas report for $k in $file"; status=1; continue
  fi
  line="$k sm_90: $regs registers, $stack bytes stack frame, $spill_st/$spill_ld bytes spill stores/loads, $smem bytes smem"
  if [[ -n "$min_warps" ]]; then
    warps="$(ptxas_occupancy 90 "$regs" "$threads" "$smem")"
    line="$line, $warps warps per SM in blocks of $threads"
  fi
  echo "$line"
  if [[ "$stack" -gt "$local_max" || "$spill_st" -gt "$local_max" || "$spill_ld" -gt "$local_max" ]]; then
    if [[ "$local_max" -eq 0 ]]; then
      echo "FAIL: $k uses local memory (stack frame or spills): its per-thread state must stay in registers"
    else
      echo "FAIL: $k uses more than $local_max bytes of local memory (stack frame, spill stores or loads)"
    fi
    status=1
  fi
  if [[ -n "$min_warps" && "$warps" -lt "$min_warps" ]]; then
    echo "FAIL: $k leaves $warps warps resident per SM, fewer than $min_warps (registers or shared memory grew)"
    status=1
  fi
done
[[ $status -eq 0 ]] && echo "PASS"
exit $status
