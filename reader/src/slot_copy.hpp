// Copying a batch decoder's output slot into a reader job's output view: the
// step the GPU-decomposition backends (CUDA and its CPU emulation) share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "l3/codec.hpp"
#include "l3/cuda/batch_types.hpp"
#include "l3/error.hpp"

namespace l3::detail {

// Copies slot `s` (its pixels start at `slot_pixels`, rows packed) into `out`,
// which must have the slot's shape; `out.stride` may pad rows.
inline void copy_slot(const cuda::ImageSlot& s, const std::uint8_t* slot_pixels, const MutableImageView& out) {
  if (!out.data) throw_error(errc::invalid_argument, "output buffer is null");
  if (out.width != s.width || out.height != s.height || out.channels != s.channels)
    throw_error(errc::invalid_argument, "output shape does not match the region");
  const std::size_t row = std::size_t{s.width} * s.channels;
  const std::size_t stride = out.stride ? out.stride : row;
  if (stride < row) throw_error(errc::invalid_argument, "output stride smaller than a row");
  for (std::uint32_t y = 0; y < s.height; ++y) std::memcpy(out.data + y * stride, slot_pixels + y * row, row);
}

}  // namespace l3::detail
