// Validated layout of an encoded image (spec/codec.md §2-§3), for decoders
// outside l3_codec (the CUDA batch decoder and its CPU emulation, cuda/).
//
// parse_layout() runs exactly the validation that l3::decode() runs before it
// decodes a tile (header fields, limits, every tile-table entry, payload size);
// it throws the same l3::Error for the same stream.
#pragma once

#include <cstdint>
#include <span>

#include "l3/codec/codec.hpp"
#include "l3/codec/symbols.hpp"
#include "l3/codec/tile_core.hpp"

namespace l3 {

struct ImageLayout {
  ImageInfo info;                     // encoded_size is the whole stream
  core::TileGrid grid{};              // the tiles (spec §3)
  std::uint32_t tile_width_log2 = 0;  // info.tile_width == 1 << tile_width_log2
  std::uint64_t table_offset = 0;     // byte offset of the tile-size table (u32 LE, raster order)
  std::uint64_t payload_offset = 0;   // byte offset of tile 0; tile i starts after tiles 0..i-1
  core::SymbolSection symbols;        // spec §3.4 (version 15), validated; patch_count 0: none

  std::uint32_t tile_count() const { return info.tiles_x * info.tiles_y; }
};

// Validates the header and the whole tile table; throws l3::Error.
ImageLayout parse_layout(std::span<const std::uint8_t> encoded, const Limits& limits = {});

// Checks the stream's XXH3-64 checksum, and its symbol dictionary's (§3.4),
// as l3::decode does with DecodeOptions::verify_checksum (spec §2); throws
// checksum_mismatch. `layout` is parse_layout()'s for the same bytes.
void verify_checksum(std::span<const std::uint8_t> encoded, const ImageLayout& layout);

}  // namespace l3
