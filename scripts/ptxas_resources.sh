# Sourced by tests/cuda_kernel_resources.sh and bench/cuda_static_report.sh:
# compiling one of our .cu files for one architecture with `ptxas -v`, reading
# a kernel's resources from that log, and the occupancy they allow. Needs $nvcc
# (the compiler).

# ptxas_compile ROOT SM OUT_BASE FILE [NVCC_FLAGS...]: OUT_BASE.o and OUT_BASE.log;
# on failure prints the log and returns 1. FILE is relative to ROOT.
ptxas_compile() {
  local root="$1" sm="$2" base="$3" file="$4" dir includes=()
  shift 4
  for dir in cuda/include cuda/src codec/include common/include format/include reader/include reader/src; do
    includes+=("-I$root/$dir")
  done
  "$nvcc" "${includes[@]}" -O3 -DNDEBUG -std=c++20 --generate-code=arch=compute_$sm,code=sm_$sm -Xptxas -v "$@" \
    -x cu -c "$root/$file" -o "$base.o" >"$base.log" 2>&1 || { cat "$base.log" >&2; return 1; }
}

# ptxas_kernel LOG KERNEL: prints "REGISTERS STACK SPILL_STORES SPILL_LOADS SMEM" (bytes)
# for the kernel whose mangled name contains KERNEL; returns 1 when the log has none.
# ptxas prints "Function properties for <mangled>" then the stack/spill line, and
# "Compiling entry function '<mangled>'" ... "Used N registers[, ... N bytes smem]".
ptxas_kernel() {
  local log="$1" kernel="$2" props usage smem
  props="$(grep -A1 -E "Function properties for .*$kernel" "$log" | sed -n 2p)"
  usage="$(grep -A3 -E "Compiling entry function '.*$kernel" "$log" | grep -m1 -E "Used [0-9]+ registers" || true)"
  [[ -n "$props" && -n "$usage" ]] || return 1
  smem="$(grep -oE '[0-9]+ bytes smem' <<<"$usage" | grep -oE '^[0-9]+' || echo 0)"
  echo "$(sed -E 's/.*Used ([0-9]+) registers.*/\1/' <<<"$usage")" \
    "$(sed -E 's/.* ([0-9]+) bytes stack frame.*/\1/' <<<"$props")" \
    "$(sed -E 's/.* ([0-9]+) bytes spill stores.*/\1/' <<<"$props")" \
    "$(sed -E 's/.* ([0-9]+) bytes spill loads.*/\1/' <<<"$props")" "$smem"
}

# ptxas_occupancy SM REGS THREADS_PER_BLOCK SMEM_BYTES: the theoretical resident
# warps per SM on sm_80/sm_90: 65536 registers, allocated per warp in units of
# 256; at most 64 warps and 32 blocks; shared memory per SM 228 KiB on sm_90,
# 164 on sm_80, and 1 KiB of it reserved by the driver per block.
ptxas_occupancy() {
  local sm="$1" regs="$2" threads="$3" smem="$4" warps_per_block per_warp by_regs by_smem blocks smem_kib
  warps_per_block=$(((threads + 31) / 32))
  per_warp=$((((regs * 32 + 255) / 256) * 256))
  by_regs=$((65536 / per_warp / warps_per_block))
  smem_kib=$([[ $sm == 90 ]] && echo 228 || echo 164)
  by_smem=$(( smem > 0 ? smem_kib * 1024 / (smem + 1024) : 32 ))
  blocks=$((by_regs < by_smem ? by_regs : by_smem)); blocks=$((blocks < 32 ? blocks : 32))
  blocks=$((blocks * warps_per_block > 64 ? 64 / warps_per_block : blocks))
  echo "$((blocks * warps_per_block))"
}
