// Occupancy probes (spec/cuda.md §2 "Kernel variants"): a build with
// L3_WAVEFRONT_PROBE_BLOCKS=B launches the decode kernel with dynamic shared
// memory that nothing reads, so that only B blocks of it fit an SM instead
// of the 5 (20 warps) its registers and static shared memory allow on sm_90.
// The same instructions and pixels at fewer resident warps: timed against
// the default, they say what each warp of occupancy is worth, beside the
// candidate that shrinks the output ring and the registers to gain four
// (narrow-ring-24: 24 warps need at most 80 registers and 9,472 bytes of
// shared memory a warp). A probe measures; it never becomes the default.
#pragma once

namespace l3::cuda::detail {

// Shared memory is allocated to blocks in units of this many bytes (sm_80,
// sm_90).
inline constexpr int kSharedAllocationUnit = 128;

// The dynamic shared memory that leaves exactly `blocks` blocks resident per
// SM by shared memory, for a kernel with `static_bytes` of static shared
// memory on a device with `smem_per_sm` bytes an SM and the driver's
// `reserved_per_block` bytes a block: one allocation unit below the largest
// such size, so that a rounding of the driver's cannot leave one block
// fewer (the caller checks the result with the occupancy API). -1 when the
// kernel's own shared memory leaves fewer blocks than that, or blocks < 1.
constexpr int probe_padding_bytes(int smem_per_sm, int reserved_per_block, int static_bytes, int blocks) {
  if (blocks < 1) return -1;
  const int units = (smem_per_sm / blocks - reserved_per_block) / kSharedAllocationUnit - 1;
  const int pad = units * kSharedAllocationUnit - static_bytes;
  return pad >= 0 ? pad : -1;
}

}  // namespace l3::cuda::detail
