// A sample pattern periodic with 32 x 8 tiles: every full tile of an image
// cut into 32 x 8 tiles (and every clipped edge tile of the same size) has
// the same pixels, so the encoder stores them as tile copies (spec/codec.md
// §3.3, version 5). Shared by the tile-copy tests and the fuzz seeds.
#pragma once

#include <cstdint>

namespace l3::test {

inline std::uint8_t periodic_32x8(std::uint32_t x, std::uint32_t y, std::uint32_t channel) {
  const std::uint32_t px = x % 32, py = y % 8;
  return std::uint8_t(px * 5 + py * 19 + channel * 60 + px * py % 3);
}

}  // namespace l3::test
