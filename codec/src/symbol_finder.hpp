// The encoder's search for symbols (spec/codec.md §3.4, version 15): blocks
// of pixels that repeat exactly across the image (the glyphs and words of a
// text page, icons), found as the bounding boxes of connected components on
// the image's background colour. Host-only.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "l3/codec/codec.hpp"
#include "l3/codec/symbols.hpp"

namespace l3::encoder {

struct SymbolPlan {
  std::vector<std::uint8_t> dictionary;  // interleaved pixels, dict_width x dict_height
  std::uint32_t dict_width = 0, dict_height = 0;
  std::vector<core::SymbolRect> symbols;  // by descending use: the most used get the shortest varints
  std::vector<core::Patch> patches;       // in raster order of their top-left pixels
  // The image with every patch's rectangle filled with the background: its
  // tiles code the rest of the image (a patch's pixels are the patch's).
  std::vector<std::uint8_t> erased;
};

// The symbols worth trying, or nothing: an image without a background colour
// covering at least half its pixels, or without components that repeat.
std::optional<SymbolPlan> find_symbols(const ImageView& image);

// The section of §3.4 after the tiles: dictionary size and stream, symbol
// table, patch count and patches.
void append_symbol_section(std::vector<std::uint8_t>& out, const SymbolPlan& plan,
                           const std::vector<std::uint8_t>& dictionary_stream);

}  // namespace l3::encoder
