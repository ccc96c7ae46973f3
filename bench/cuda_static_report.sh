#!/usr/bin/env bash
# Static resources of the GPU kernels, no GPU needed: compiles the batch
# decoder (both wavefront code shapes, spec/cuda.md §2 "Registers and code
# size") and the reader's transform kernels for one architecture with
# `ptxas -v`, and prints a Markdown report: registers, stack frame, spills,
# shared memory, the theoretical occupancy that follows, and (when cuobjdump
# is on PATH) each kernel's SASS instruction count.
#
# Usage: bench/cuda_static_report.sh [SM] > bench/results/cuda-static-sm90.md
#   SM: 90 (H100/H200, default) or 80 (A100).
# cuobjdump ships with the full CUDA toolkit; without it, `pip download
# nvidia-cuda-cuobjdump` and unzip the wheel (its bin/ holds cuobjdump).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sm="${1:-90}"
nvcc="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
source "$root/scripts/ptxas_resources.sh"

compile() {  # compile NAME FILE FLAGS...: object and ptxas log in $work
  local name="$1" file="$2"; shift 2
  ptxas_compile "$root" "$sm" "$work/$name" "$file" "$@" || exit 1
}
sass_count() {  # sass_count NAME KERNEL: SASS instructions of the kernel, or "n/a"
  command -v cuobjdump >/dev/null || { echo "n/a"; return; }
  cuobjdump -sass "$work/$1.o" | awk -v k="$2" '/Function : /{f = index($0, k) > 0; next} f' |
    grep -cE '^\s+/\*[0-9a-f]+\*/' || true
}
row() {  # row NAME KERNEL LABEL THREADS_PER_BLOCK
  local name="$1" kernel="$2" label="$3" threads="$4" regs stack st ld smem warps
  read -r regs stack st ld smem < <(ptxas_kernel "$work/$name.log" "$kernel") || { echo "no ptxas report for $kernel" >&2; exit 1; }
  warps="$(ptxas_occupancy "$sm" "$regs" "$threads" "$smem")"
  echo "| $label | $regs | $stack | $st / $ld | $smem | $threads | $warps ($((warps * 100 / 64))%) | $(sass_count "$name" "$kernel") |"
}

compile decoder cuda/src/batch_decoder.cu
compile decoder_fixed cuda/src/batch_decoder.cu -DL3_WAVEFRONT_FIXED_PREDICTORS
compile reader reader/src/batch_backend_cuda.cu --fmad=false -DL3_HAVE_CUDA=1

echo "# GPU kernels: static resources (sm_$sm)"
echo
echo "- Compiler: $("$nvcc" --version | grep -oE 'release [0-9.]+, V[0-9.]+' | head -n 1)"
echo "- Commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet 2>/dev/null || echo ' (with local changes)')"
echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "- Command: bench/cuda_static_report.sh $sm"
echo
echo "From \`ptxas -v\`; no GPU ran. Warps per SM: the theoretical occupancy those"
echo "registers and that shared memory allow (65536 registers per SM, 64 warps)."
echo "SASS: instructions in the kernel (cuobjdump), a measure of code size."
echo
echo "| kernel | registers | stack (B) | spill stores / loads (B) | smem (B) | threads/block | warps per SM | SASS instructions |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
row decoder decode_kernel "decode_kernel (default: one loop body per channel count)" 128
row decoder_fixed decode_kernel "decode_kernel (L3_CUDA_FIXED_PREDICTORS)" 128
row decoder gather_kernel "gather_kernel" 256
row reader weights_kernel "reader weights_kernel" 256
row reader resample_kernel "reader resample_kernel" 256
