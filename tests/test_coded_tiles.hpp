// The coded tiles of an encoded stream, parsed as the decoder parses them
// (spec/codec.md §3-§4): what tests count and check per tile (zero rows,
// pixel copies, plane contexts). For doctest suites.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "l3/codec/codec.hpp"
#include "l3/codec/tile_core.hpp"

namespace l3::test {

// Each coded tile's first byte and parameters, mirrored tiles (kind 3,
// version 12, §4.7) among them; tile copies (§3.3, no bytes of their own),
// constant and raw tiles are left out.
inline std::vector<std::pair<const std::uint8_t*, l3::core::CodedTileParams>> coded_tiles(
    const std::vector<std::uint8_t>& enc) {
  const l3::ImageInfo info = l3::read_info(enc);
  std::vector<std::pair<const std::uint8_t*, l3::core::CodedTileParams>> out;
  std::size_t at = l3::core::kHeaderSize + 4 * std::size_t(info.tiles_x) * info.tiles_y;
  for (std::uint32_t i = 0; i < info.tiles_x * info.tiles_y; ++i) {
    std::uint32_t size;
    std::memcpy(&size, &enc[l3::core::kHeaderSize + 4 * std::size_t(i)], 4);
    if (l3::core::is_tile_copy(size, info.version)) continue;
    const std::uint8_t* tile = &enc[at];
    at += size;
    if ((tile[0] & 3) != l3::core::kTileCoded && (tile[0] & 3) != l3::core::kTileMirrored) continue;
    const std::uint32_t tx = i % info.tiles_x, ty = i / info.tiles_x;
    const int w = int(std::min(info.tile_width, info.width - tx * info.tile_width));
    const int h = int(std::min(info.tile_height, info.height - ty * info.tile_height));
    l3::core::CodedTileParams t;
    REQUIRE(l3::core::parse_coded_tile(tile, size, w, h, int(info.channels), int(info.version), t) == l3::core::kOk);
    out.emplace_back(tile, t);
  }
  return out;
}

// Where the stream's tiles end: its symbol section's first byte (§3.4,
// version 15), or its size where it has none.
inline std::size_t tiles_end(const std::vector<std::uint8_t>& enc) {
  const l3::ImageInfo info = l3::read_info(enc);
  std::size_t at = l3::core::kHeaderSize + 4 * std::size_t(info.tiles_x) * info.tiles_y;
  for (std::uint32_t i = 0; i < info.tiles_x * info.tiles_y; ++i) {
    std::uint32_t entry;
    std::memcpy(&entry, &enc[l3::core::kHeaderSize + 4 * std::size_t(i)], 4);
    at += l3::core::payload_size(entry, info.version);
  }
  return at;
}

// How many coded planes of a stream's tiles have the plane context of the
// plane before (version 7, spec §6.2).
inline int planes_with_previous_code(const std::vector<std::uint8_t>& enc) {
  int n = 0;
  for (const auto& [tile, t] : coded_tiles(enc))
    for (int p = 0; p < t.channels; ++p) n += t.plane[p].previous_code;
  return n;
}

// How many coded planes of a stream's tiles have residual corrections
// (version 8, spec §6.7).
inline int planes_with_corrections(const std::vector<std::uint8_t>& enc) {
  int n = 0;
  for (const auto& [tile, t] : coded_tiles(enc))
    for (int p = 0; p < t.channels; ++p) n += t.plane[p].corrected;
  return n;
}

// How many coded planes of a stream's tiles have a ramp (version 14, spec
// §6.9).
inline int planes_with_ramps(const std::vector<std::uint8_t>& enc) {
  int n = 0;
  for (const auto& [tile, t] : coded_tiles(enc))
    for (int p = 0; p < t.channels; ++p) n += t.plane[p].ramp;
  return n;
}

// How many coded tiles of a stream have a bilevel plane (version 11, spec
// §6.8), and how many of those run in run mode.
struct BilevelTiles {
  int tiles = 0, with_runs = 0;
};
inline BilevelTiles bilevel_tiles(const std::vector<std::uint8_t>& enc) {
  BilevelTiles n;
  for (const auto& [tile, t] : coded_tiles(enc)) {
    n.tiles += t.bilevel;
    n.with_runs += t.bilevel && t.run_mode;
  }
  return n;
}

// How many coded tiles of a stream are mirrored (kind 3), and how many coded
// planes are predicted by NW (version 12, spec §4.7, §6.1).
struct DiagonalTiles {
  int mirrored = 0, nw_planes = 0;
};
inline DiagonalTiles diagonal_tiles(const std::vector<std::uint8_t>& enc) {
  DiagonalTiles n;
  for (const auto& [tile, t] : coded_tiles(enc)) {
    n.mirrored += (tile[0] & 3) == l3::core::kTileMirrored;
    for (int p = 0; p < t.channels; ++p) n.nw_planes += !t.plane[p].constant && t.plane[p].pred == l3::core::kPredNW;
  }
  return n;
}

// Whether a stream, or its symbol dictionary (§3.4, a whole stream after
// dict_size), has a coded tile with pixel copies or a bilevel plane: the
// tiles whose sources the GPU's output ring must hold 63 columns back
// (spec/cuda.md §2), which its narrow-ring variant reports as unsupported.
inline bool has_ring_source_tiles(const std::vector<std::uint8_t>& enc) {
  for (const auto& [tile, t] : coded_tiles(enc))
    if (t.copies || t.bilevel) return true;
  const std::size_t at = tiles_end(enc);
  if (at + 4 > enc.size()) return false;
  std::uint32_t dict_size;
  std::memcpy(&dict_size, &enc[at], 4);
  REQUIRE(dict_size <= enc.size() - at - 4);
  return has_ring_source_tiles(std::vector<std::uint8_t>(enc.begin() + std::ptrdiff_t(at + 4),
                                                         enc.begin() + std::ptrdiff_t(at + 4 + dict_size)));
}

}  // namespace l3::test
