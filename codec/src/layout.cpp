// parse_layout(): the CPU decoder's own validation (header.cpp), exposed for cuda/.
#include "l3/codec/codec_layout.hpp"

#include "header.hpp"

namespace l3 {

ImageLayout parse_layout(std::span<const std::uint8_t> encoded, const Limits& limits) {
  const detail::ParsedImage img = detail::parse_image(encoded, limits, false);
  ImageLayout out;
  out.info = img.info;
  out.grid = img.grid;
  out.tile_width_log2 = img.tile_width_log2;
  out.table_offset = core::kHeaderSize;
  out.payload_offset = core::kHeaderSize + 4 * std::uint64_t{img.tile_count()};
  out.symbols = img.symbols;
  return out;
}

void verify_checksum(std::span<const std::uint8_t> encoded, const ImageLayout& layout) {
  detail::verify_checksums(encoded, layout.symbols);
}

}  // namespace l3
