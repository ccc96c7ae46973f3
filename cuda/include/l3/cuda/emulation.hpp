// The CUDA batch decoder's decomposition run on the CPU (library l3_cuda_emu,
// plain C++, always built). It runs the same host plan, the same scans (here
// std::exclusive_scan), the same gather step and the same per-warp tile code
// (l3/cuda/wavefront.hpp) with the emulated warp, one job after another. CI
// checks it bit for bit against l3::decode; it is a reference, not a fast path.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "l3/codec/codec.hpp"
#include "l3/cuda/batch_types.hpp"

namespace l3::cuda::emu {

struct BatchOutput {
  std::vector<std::uint8_t> pixels;  // all slots, as the device buffer would hold them
  std::vector<ImageSlot> slots;      // per image: offset, size, shape and final status
};

// Decodes a batch as the kernel does. Never throws for a bad image (its slot
// gets a status); throws l3::Error only for batch-wide limits.
BatchOutput decode_batch(std::span<const HostImage> images, const BatchOptions& options = {});

// One image through the emulated warps; throws the l3::Error that
// l3::decode / l3::decode_region throws for the same stream.
// options.limits and options.verify_checksum apply as in l3::decode; threads is ignored.
void decode_image_wavefront(std::span<const std::uint8_t> encoded, const MutableImageView& out,
                            const DecodeOptions& options = {});
void decode_region_wavefront(std::span<const std::uint8_t> encoded, const Rect& region, const MutableImageView& out,
                             const DecodeOptions& options = {});

}  // namespace l3::cuda::emu
