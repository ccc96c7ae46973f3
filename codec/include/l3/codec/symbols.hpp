// Symbols (spec/codec.md §3.4, version 15): an image-level dictionary of
// pixel blocks (glyphs, words, icons) and a list of patches that place them,
// applied after the tiles are decoded. Shared by the CPU decoder, the CUDA
// patch kernel and its emulation; the host validates the whole section once
// (codec/src/header.cpp), device code re-checks every patch it applies.
//
// Rules of tile_core.hpp: host and device code, no allocation, no
// exceptions, every read bounded, failures as status values.
#pragma once

#include <cstdint>

#include "l3/codec/tile_constants.hpp"
#include "l3/common/errc.hpp"
#include "l3/common/host_device.hpp"

namespace l3::core {

inline constexpr std::uint8_t kVersionSymbols = 15;
inline constexpr std::uint8_t kHeaderFlagSymbols = 1;   // image header flags, bit 0 (§2)
inline constexpr std::uint32_t kSymbolEntryBytes = 6;   // u16 x, u16 y, u8 width - 1, u8 height - 1
inline constexpr std::uint32_t kMaxSymbolSide = 256;
inline constexpr int kCorruptSymbols = int(errc::corrupt_symbols);

// Where the section's parts lie in the image's stream (byte offsets), as the
// host validated them; the dictionary is itself a whole stream (§2-§3).
struct SymbolSection {
  std::uint64_t dict_offset = 0, dict_size = 0;
  std::uint32_t dict_width = 0, dict_height = 0;
  std::uint64_t table_offset = 0;  // symbol_count entries of kSymbolEntryBytes
  std::uint32_t symbol_count = 0;
  std::uint64_t patches_offset = 0;  // patch_count patches, up to the stream's end
  std::uint32_t patch_count = 0;
};

struct SymbolRect {
  std::uint32_t x, y, width, height;  // in the dictionary
};

// Entry s of the symbol table at `table` (s < symbol_count: the caller's check).
L3_HD SymbolRect symbol_at(const std::uint8_t* table, std::uint32_t s) {
  const std::uint8_t* e = table + std::uint64_t{s} * kSymbolEntryBytes;
  return {std::uint32_t(e[0]) | std::uint32_t(e[1]) << 8, std::uint32_t(e[2]) | std::uint32_t(e[3]) << 8,
          std::uint32_t(e[4]) + 1u, std::uint32_t(e[5]) + 1u};
}

// A patch: symbol `symbol` with its top-left pixel at (x, y) of the image.
struct Patch {
  std::uint32_t symbol;
  std::int64_t x, y;
};

// The patches in order from [p, end) (§3.4): each a varint symbol index and
// the zigzag varints dy, dx from the previous patch's position ((0, 0) before
// the first). A varint is LEB128, at most 5 bytes, below 2^32.
struct PatchReader {
  const std::uint8_t* p;
  const std::uint8_t* end;
  std::int64_t x = 0, y = 0;

  L3_HD int varint(std::uint32_t& v) {
    std::uint64_t acc = 0;
    for (int shift = 0; shift < 35; shift += 7) {
      if (p == end) return kTruncated;
      const std::uint8_t b = *p++;
      acc |= std::uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) {
        if (acc >> 32) return kCorruptSymbols;
        v = std::uint32_t(acc);
        return kOk;
      }
    }
    return kCorruptSymbols;
  }
  L3_HD int next(Patch& out) {
    std::uint32_t s = 0, dy = 0, dx = 0;
    int st = varint(s);
    if (st == kOk) st = varint(dy);
    if (st == kOk) st = varint(dx);
    if (st != kOk) return st;
    y += core::unzigzag(dy);  // tile_constants.hpp
    x += core::unzigzag(dx);
    out = {s, x, y};
    return kOk;
  }
};

// Whether symbol rectangle `r` lies inside the section's dictionary (§3.4).
L3_HD bool inside_dictionary(const SymbolSection& sec, const SymbolRect& r) {
  return r.x + r.width <= sec.dict_width && r.y + r.height <= sec.dict_height;
}

// Checks one patch against the section and the image (§3.4); kOk or
// kCorruptSymbols. `rect` is the patch's symbol's, when kOk.
L3_HD int check_patch(const SymbolSection& sec, const std::uint8_t* table, const Patch& patch, std::uint32_t width,
                      std::uint32_t height, SymbolRect& rect) {
  if (patch.symbol >= sec.symbol_count) return kCorruptSymbols;
  rect = symbol_at(table, patch.symbol);
  if (!inside_dictionary(sec, rect)) return kCorruptSymbols;
  if (patch.x < 0 || patch.y < 0 || patch.x + rect.width > width || patch.y + rect.height > height)
    return kCorruptSymbols;
  return kOk;
}

// The image pixels [x0, x1) x [y0, y1) of a patch of symbol s inside the
// output region [rx, rx + rw) x [ry, ry + rh); empty when x0 >= x1 or y0 >= y1.
struct PatchClip {
  std::int64_t x0, y0, x1, y1;
};
L3_HD PatchClip clip_patch(const SymbolRect& s, const Patch& patch, std::uint32_t rx, std::uint32_t ry, std::uint32_t rw,
                           std::uint32_t rh) {
  const std::int64_t px1 = patch.x + s.width, py1 = patch.y + s.height;
  return {patch.x > rx ? patch.x : rx, patch.y > ry ? patch.y : ry,
          px1 < std::int64_t(rx) + rw ? px1 : std::int64_t(rx) + rw,
          py1 < std::int64_t(ry) + rh ? py1 : std::int64_t(ry) + rh};
}

// Where image pixel (x, y) of a patch of symbol s reads the dictionary
// (interleaved, dict_stride bytes a row).
L3_HD const std::uint8_t* patch_source(const std::uint8_t* dict, std::uint64_t dict_stride, int channels,
                                       const SymbolRect& s, const Patch& patch, std::int64_t x, std::int64_t y) {
  return dict + (s.y + std::uint64_t(y - patch.y)) * dict_stride + (s.x + std::uint64_t(x - patch.x)) * std::uint64_t(channels);
}

// Copies the part of a patch inside the output region [rx, rx + rw) x
// [ry, ry + rh) of the image: dictionary pixels (interleaved, dict_stride
// bytes a row) to `out`, where image pixel (x, y), channel k, goes at
// out + (y - ry) * row_stride + (x - rx) * pixel_stride + k * plane_stride.
// Pixel `first` to the patch's last in steps of `step` (a lane's share).
L3_HD void copy_patch(const std::uint8_t* dict, std::uint64_t dict_stride, int channels, const SymbolRect& s,
                      const Patch& patch, std::uint32_t rx, std::uint32_t ry, std::uint32_t rw, std::uint32_t rh,
                      std::uint8_t* out, std::int64_t row_stride, std::int64_t pixel_stride, std::int64_t plane_stride,
                      std::uint32_t first, std::uint32_t step) {
  const PatchClip c = clip_patch(s, patch, rx, ry, rw, rh);
  if (c.x0 >= c.x1 || c.y0 >= c.y1) return;
  const std::uint32_t w = std::uint32_t(c.x1 - c.x0), n = w * std::uint32_t(c.y1 - c.y0);
  for (std::uint32_t i = first; i < n; i += step) {
    const std::int64_t x = c.x0 + i % w, y = c.y0 + i / w;
    const std::uint8_t* from = patch_source(dict, dict_stride, channels, s, patch, x, y);
    std::uint8_t* to = out + (y - ry) * row_stride + (x - rx) * pixel_stride;
    for (int k = 0; k < channels; ++k) to[k * plane_stride] = from[k];
  }
}

}  // namespace l3::core
