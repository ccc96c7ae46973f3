// How an image is cut into tiles (spec/codec.md §3). Part of the shared
// per-tile core (l3/codec/tile_core.hpp includes it).
// Rules of l3/codec/tile_core.hpp apply: host C++ and CUDA device code alike, no
// allocation, no exceptions, no asserts on input.
#pragma once

#include <cstdint>

#include "l3/codec/tile_constants.hpp"
#include "l3/common/host_device.hpp"

namespace l3::core {

// ---- The tile grid (spec §3) -------------------------------------------------

// A rectangle of pixels: a tile's, clipped to the image, or a crop.
struct TileRect {
  std::uint32_t x, y, width, height;
};

// How an image is cut into tiles (spec §3): the one definition the encoder,
// the CPU decoder, the CUDA plan and the wavefront share.
struct TileGrid {
  std::uint32_t width, height;     // the image, >= 1
  std::uint32_t tile_width_log2;   // kMinTileWidthLog2..kMaxTileWidthLog2
  std::uint32_t tile_height;       // 1..kMaxTileHeight
  std::uint32_t tiles_x, tiles_y;  // ceil(width / tile width), ceil(height / tile_height)

  // The caller has validated the fields (header parse or encoder options).
  // 64-bit sums: width + tile width - 1 overflows 32 bits near 2^32.
  L3_HD static TileGrid make(std::uint32_t width, std::uint32_t height, std::uint32_t tw_log2, std::uint32_t th) {
    TileGrid g{width, height, tw_log2, th, 0, 0};
    g.tiles_x = std::uint32_t((std::uint64_t{width} + (std::uint64_t{1} << tw_log2) - 1) >> tw_log2);
    g.tiles_y = std::uint32_t((std::uint64_t{height} + th - 1) / th);
    return g;
  }
  L3_HD std::uint32_t tile_width() const { return 1u << tile_width_log2; }
  // May exceed 2^32 - 1 in a hostile header: callers check it (spec §9.1).
  L3_HD std::uint64_t tile_count() const { return std::uint64_t{tiles_x} * tiles_y; }
  // Tile (tx, ty), clipped at the image's right and bottom edges.
  L3_HD TileRect tile(std::uint32_t tx, std::uint32_t ty) const {
    const std::uint32_t x = tx << tile_width_log2, y = ty * tile_height;
    const std::uint32_t w = width - x < tile_width() ? width - x : tile_width();
    const std::uint32_t h = height - y < tile_height ? height - y : tile_height;
    return {x, y, w, h};
  }
  // Tile i in raster order.
  L3_HD TileRect tile(std::uint32_t i) const { return tile(i % tiles_x, i / tiles_x); }
  L3_HD std::uint32_t index(std::uint32_t tx, std::uint32_t ty) const { return ty * tiles_x + tx; }

  // The tiles a non-empty rectangle inside the image overlaps: columns
  // tx0 .. tx0 + cols - 1 and rows ty0 .. ty0 + rows - 1 (spec §9.2).
  struct Span {
    std::uint32_t tx0, ty0, cols, rows;
  };
  L3_HD Span overlapped(const TileRect& r) const {
    const std::uint32_t tx0 = r.x >> tile_width_log2, ty0 = r.y / tile_height;
    const std::uint32_t tx1 = (r.x + r.width - 1) >> tile_width_log2, ty1 = (r.y + r.height - 1) / tile_height;
    return {tx0, ty0, tx1 - tx0 + 1, ty1 - ty0 + 1};
  }
  // Whether tiles i and j have the same clipped width and height (a tile
  // copy's condition, spec §3.3).
  L3_HD bool same_shape(std::uint32_t i, std::uint32_t j) const {
    const TileRect a = tile(i), b = tile(j);
    return a.width == b.width && a.height == b.height;
  }
};

// ---- Tile copies (spec §3.3, version 5) ---------------------------------------

// A tile-table entry with bit 31 set is a copy of the earlier tile its low 31
// bits name: no bytes of its own, it decodes from that tile's bytes. In
// versions 1-4 every entry is a size.
inline constexpr std::uint32_t kTileCopyBit = 0x80000000u;
L3_HD bool is_tile_copy(std::uint32_t entry, std::uint32_t version) {
  return version >= kVersionTileCopies && (entry & kTileCopyBit) != 0;
}
L3_HD std::uint32_t copied_tile(std::uint32_t entry) { return entry & ~kTileCopyBit; }
// The tile whose bytes tile `tile` (table entry `entry`) decodes from: its
// copy's source, or itself.
L3_HD std::uint32_t bytes_tile(std::uint32_t entry, std::uint32_t tile, std::uint32_t version) {
  return is_tile_copy(entry, version) ? copied_tile(entry) : tile;
}
// The entry's payload bytes: its size, or 0 for a copy.
L3_HD std::uint32_t payload_size(std::uint32_t entry, std::uint32_t version) {
  return is_tile_copy(entry, version) ? 0u : entry;
}

}  // namespace l3::core
