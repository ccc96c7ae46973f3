// Parsing and validation of the image header and tile table (spec/codec.md §2-§3).
// Host-only: runs once per image at the edge, before any tile is decoded.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "l3/codec/codec.hpp"
#include "l3/codec/symbols.hpp"
#include "l3/codec/tile_core.hpp"

namespace l3::detail {

struct ParsedImage {
  ImageInfo info;
  core::TileGrid grid{};  // spec §3
  std::uint32_t tile_width_log2 = 0;
  std::span<const std::uint8_t> bytes;        // the whole stream
  // With the table read: tile_count() + 1 byte offsets into `bytes`, tile i's
  // own bytes spanning [tile_offset[i], tile_offset[i + 1]) (none for a tile
  // copy, spec §3.3). The storage is the parsing thread's, reused from call to
  // call (no allocation in steady state), and stays valid until that thread
  // parses the next image.
  std::span<const std::uint64_t> tile_offset;
  // The symbol section (spec §3.4, version 15), validated; patch_count 0 when
  // the stream has none.
  core::SymbolSection symbols;
  bool has_symbols() const { return symbols.patch_count != 0; }

  // The bytes tile i decodes from: its own, or a copy's source's (§3.3).
  struct TileBytes {
    std::uint64_t offset;  // into `bytes`
    std::uint32_t size;
  };
  TileBytes tile_bytes(std::uint32_t i) const;
  // The tile whose bytes tile i decodes from: a copy's source, or i (§3.3).
  std::uint32_t bytes_tile(std::uint32_t i) const;

  std::uint32_t tile_count() const { return info.tiles_x * info.tiles_y; }
};

// Validates header and tile table; throws l3::Error. With `with_table` false
// only the header is read (and the table's presence checked).
ParsedImage parse_image(std::span<const std::uint8_t> bytes, const Limits& limits, bool with_table);

// Throws checksum_mismatch unless the stored checksum matches (spec §2).
void verify_checksum(std::span<const std::uint8_t> bytes);
// The stream's checksum, then its symbol dictionary's (§3.4) when `symbols`
// (parse_image's, for the same bytes) has patches.
void verify_checksums(std::span<const std::uint8_t> bytes, const core::SymbolSection& symbols);

// Appends the header with a zero checksum; seal() fills it in once the whole
// stream is written.
void write_header(std::vector<std::uint8_t>& out, const ImageInfo& info, std::uint32_t tile_width_log2);
void seal(std::vector<std::uint8_t>& stream);

}  // namespace l3::detail
