// The occupancy probes' padding (cuda/src/occupancy_probe.hpp, spec/cuda.md
// §2 "Kernel variants"): on the GPU the probe also checks its occupancy with
// the CUDA occupancy API, and fails when it is not the one asked for; this
// checks the arithmetic on the devices' figures, no GPU needed.
#include <doctest/doctest.h>

#include <initializer_list>

#include "occupancy_probe.hpp"

namespace {

using l3::cuda::detail::kSharedAllocationUnit;
using l3::cuda::detail::probe_padding_bytes;

// Blocks resident per SM by shared memory, as the CUDA occupancy calculator
// counts them: each block's static and dynamic bytes in allocation units,
// plus the driver's reserved bytes.
int blocks_by_smem(int smem_per_sm, int reserved, int block_bytes) {
  const int units = (block_bytes + kSharedAllocationUnit - 1) / kSharedAllocationUnit;
  return smem_per_sm / (units * kSharedAllocationUnit + reserved);
}

}  // namespace

TEST_CASE("an occupancy probe's padding leaves exactly the blocks asked for") {
  struct Device {
    const char* name;
    int smem_per_sm, reserved;
  };
  // sm_90 (H100, H200): 228 KiB an SM; sm_80 (A100): 164 KiB; 1 KiB reserved a block.
  for (const Device d : {Device{"sm_90", 228 * 1024, 1024}, Device{"sm_80", 164 * 1024, 1024}})
    for (const int static_bytes : {45568, 4 * 11392 + 128, 1024, 0}) {
      const int unpadded = blocks_by_smem(d.smem_per_sm, d.reserved, static_bytes);
      for (int blocks = 1; blocks <= 8; ++blocks) {
        CAPTURE(d.name);
        CAPTURE(static_bytes);
        CAPTURE(blocks);
        const int pad = probe_padding_bytes(d.smem_per_sm, d.reserved, static_bytes, blocks);
        // Fewer blocks than the kernel's own: always a padding; more: never.
        if (blocks < unpadded) REQUIRE(pad >= 0);
        if (blocks > unpadded) CHECK(pad == -1);
        if (pad < 0) continue;
        CHECK(pad % kSharedAllocationUnit ==
              (kSharedAllocationUnit - static_bytes % kSharedAllocationUnit) % kSharedAllocationUnit);
        CHECK(blocks_by_smem(d.smem_per_sm, d.reserved, static_bytes + pad) == blocks);
        // One allocation unit of slack: a unit more still leaves as many.
        CHECK(blocks_by_smem(d.smem_per_sm, d.reserved, static_bytes + pad + kSharedAllocationUnit) == blocks);
      }
    }
  CHECK(probe_padding_bytes(228 * 1024, 1024, 45568, 0) == -1);
  // The decode kernel on sm_90 (45,568 bytes, 5 blocks): the probes of cuda/kernel_variants.txt.
  CHECK(probe_padding_bytes(228 * 1024, 1024, 45568, 4) == 11648);
  CHECK(probe_padding_bytes(228 * 1024, 1024, 45568, 3) == 31104);
}
