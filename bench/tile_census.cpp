// tile_census: where an image's encoded bytes go (issue 12's size bars, spec/codec.md §4-§7).
// Encodes each image with l3::encode (the effort and entropy setting given), parses every tile
// as the decoder does (the shared core, l3/codec/tile_core.hpp) and splits the stream's bytes
// into: the image header and tile table (§2, §3.2); constant and raw tiles (§4.1, §4.2); and,
// in coded tiles (§4.3), the mode byte, palettes (§4.4), plane entries with their k tables or
// frequency tables (§4.3, §4.5), the row-length tables and the row streams. It counts tiles by
// kind (Rice / rANS, palette or not), rows and zero rows, and for each coded tile the number of
// distinct colours and the rows that repeat an earlier row of their tile, then prints one tab-separated line per image (header line first).
// With --map, each image is followed by a text heat map, one cell per tile: the kind
// (C constant, R raw, r Rice, p Rice palette, a rANS, P rANS palette, = a copy of an earlier tile, spec §3.3) and a digit for its bits per pixel (0: < 0.05, 1: < 0.1, 2: < 0.25, 3: < 0.5, 4: < 1,
// 5: < 2, 6: < 4, 7: < 8, 8: < 16, 9: >= 16).
//
// With --decode, each stream is also decoded once (l3::decode, one thread) and compared with the
// source pixels (a failure exits 1): under `valgrind --tool=callgrind --toggle-collect='l3::decode(*'`
// that gives a deterministic instruction count of the decoder on the streams, and with
// --toggle-collect='l3::encode(*' one of the encoder.
//
// Usage: tile_census [--effort N] [--entropy auto|off|max|P] [--map] [--decode] IMAGE...
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <vector>

#include "l3/codec/codec.hpp"
#include "l3/codec/tile_core.hpp"
#include "l3/codec/tile_grid.hpp"
#include "l3/imageio/image_io.hpp"

namespace {

namespace core = l3::core;

enum Kind { kConst, kRaw, kRice, kRicePal, kAns, kAnsPal, kCopy, kKinds };
constexpr const char* kKindName[kKinds] = {"const", "raw", "rice", "rice_pal", "ans", "ans_pal", "copy"};
constexpr char kKindChar[kKinds] = {'C', 'R', 'r', 'p', 'a', 'P', '='};

struct Census {
  std::array<std::uint64_t, kKinds> tiles{}, bytes{};
  std::uint64_t fixed = 0;      // header + tile table
  std::uint64_t modes = 0;      // mode bytes of coded tiles
  std::uint64_t palettes = 0;   // count, mask, constant channels and colours
  std::uint64_t params = 0;     // plane entries: predictor, k tables or frequency tables, run_k or run table
  std::uint64_t row_table = 0;  // row-length tables
  std::uint64_t rows = 0;       // row streams
  std::uint64_t n_rows = 0, zero_rows = 0, run_tiles = 0;
  std::uint64_t few_colour_tiles = 0;  // coded tiles without a palette that have <= 256 colours
  // Rows of coded tiles that are not zero rows but repeat an earlier row of the same tile
  // (pixel for pixel, any distance): what a copy mechanism would make free (spec §12).
  std::uint64_t copy_rows = 0, copy_row_bytes = 0;
  // Palettes shared between tiles (spec §12, a version 6 question): bytes of palette sections
  // equal to an earlier tile's, byte for byte; the colours of the union of the image's tile
  // palettes; and what the palettes would take as one image-level palette (the union's words at
  // `channels` bytes each, if it has <= 256 colours) plus per tile its count byte and one index
  // byte per colour.
  std::uint64_t palette_repeat_bytes = 0, palette_union = 0, palette_image_level = 0;
  // A palette coded against the previous palette tile's (in tile order): a bit per colour of
  // that palette (kept or not), then the new colours' varying samples, plus the count and mask
  // bytes; a tile keeps its own section where that is smaller.
  std::uint64_t palette_delta = 0;
  std::uint64_t mirrored = 0;  // coded tiles of kind 3 (version 12, spec §4.7), counted with kind 0's
  // Tile features the GPU wavefront tests per pixel (spec/cuda.md §2): coded tiles with pixel
  // copies, ramps, bilevel planes; rANS tiles without a palette, run mode, copies or ramps
  // ("plain", a photo's usual tile); planes with residual corrections and with the plane context.
  std::uint64_t copy_tiles = 0, ramp_tiles = 0, bilevel_tiles = 0, plain_ans_tiles = 0;
  std::uint64_t corrected_planes = 0, previous_code_planes = 0, coded_planes = 0;
};

// LEB128 bytes of v, as the encoder writes it (spec §4.3).
std::uint32_t leb_bytes(std::uint64_t v) {
  std::uint32_t n = 1;
  while (v >= 0x80) v >>= 7, ++n;
  return n;
}

int bpp_digit(double bpp) {
  constexpr double kEdges[] = {0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16};
  int d = 0;
  while (d < 9 && bpp >= kEdges[d]) ++d;
  return d;
}

// Whether tile row `row` repeats one of the tile's earlier rows.
bool repeats_earlier_row(const l3::Image& img, const core::TileRect& r, std::uint32_t row) {
  const std::size_t bytes = std::size_t(r.width) * img.channels;
  auto at = [&](std::uint32_t y) { return &img.pixels[(std::size_t(r.y + y) * img.width + r.x) * img.channels]; };
  for (std::uint32_t k = 0; k < row; ++k)
    if (std::memcmp(at(row), at(k), bytes) == 0) return true;
  return false;
}

std::size_t distinct_colours(const l3::Image& img, const core::TileRect& r) {
  std::unordered_set<std::uint32_t> seen;
  for (std::uint32_t y = r.y; y < r.y + r.height; ++y)
    for (std::uint32_t x = r.x; x < r.x + r.width; ++x) {
      std::uint32_t v = 0;
      std::memcpy(&v, &img.pixels[(std::size_t(y) * img.width + x) * img.channels], img.channels);
      seen.insert(v);
      if (seen.size() > 256) return seen.size();
    }
  return seen.size();
}

}  // namespace

int main(int argc, char** argv) {
  l3::EncodeOptions opt;
  opt.pixel_copies = false;  // the census walks version 5 tiles (pixel copies: spec §6.6, not walked)
  bool map = false, decode = false;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--effort" && i + 1 < argc) opt.effort = std::atoi(argv[++i]);
    else if (a == "--entropy" && i + 1 < argc) l3::set_entropy_mode(opt, argv[++i]);
    else if (a == "--map") map = true;
    else if (a == "--decode") decode = true;
    else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "usage: tile_census [--effort N] [--entropy auto|off|max|P] [--map] [--decode] IMAGE...\n");
      return 2;
    } else files.push_back(a);
  }
  std::printf("image\tbytes\tbpp\ttiles");
  for (const char* k : kKindName) std::printf("\tn_%s", k);
  for (const char* k : kKindName) std::printf("\tb_%s", k);
  std::printf("\tfixed\tmodes\tpalettes\tparams\trow_tables\trows\tn_rows\tzero_rows\trun_tiles\tfew_colour_unpal\tcopy_rows\tcopy_row_bytes"
              "\tpalette_repeat_bytes\tpalette_union\tpalette_image_level\tpalette_delta\tmirrored"
              "\tcopy_tiles\tramp_tiles\tbilevel_tiles\tplain_ans_tiles\tcoded_planes\tcorrected_planes\tprevious_code_planes\n");
  for (const std::string& file : files) {
    try {
      const l3::Image img = l3::load_image(file);
      const std::vector<std::uint8_t> enc = l3::encode(img.view(), opt);
      const l3::ImageInfo info = l3::read_info(enc);
      if (decode && l3::decode(enc) != img.pixels) throw std::runtime_error("does not decode to its pixels");
      const core::TileGrid grid =
          core::TileGrid::make(info.width, info.height, std::uint32_t(31 - core::clz32(info.tile_width)), info.tile_height);
      Census c;
      const std::uint64_t count = grid.tile_count();
      c.fixed = core::kHeaderSize + 4 * count;
      std::vector<std::string> cells(count);
      std::set<std::string> palette_sections;  // a palette section's bytes
      std::set<std::uint32_t> palette_colours;
      std::uint64_t palette_tiles = 0, palette_indices = 0;
      std::set<std::uint32_t> previous_palette;
      std::uint64_t at = c.fixed;
      for (std::uint64_t i = 0; i < count; ++i) {
        std::uint32_t size = 0;
        for (int b = 0; b < 4; ++b) size |= std::uint32_t(enc[core::kHeaderSize + 4 * i + b]) << (8 * b);
        const core::TileRect r = grid.tile(std::uint32_t(i));
        if (core::is_tile_copy(size, info.version)) {  // spec §3.3: no bytes of its own
          ++c.tiles[kCopy];
          cells[i] = std::string(1, kKindChar[kCopy]) + '0';
          continue;
        }
        const std::uint8_t* tile = enc.data() + at;
        at += size;
        Kind kind = kConst;
        if ((tile[0] & 3) == core::kTileRaw) kind = kRaw;
        else if ((tile[0] & 3) == core::kTileCoded || (tile[0] & 3) == core::kTileMirrored) {
          c.mirrored += (tile[0] & 3) == core::kTileMirrored;
          core::CodedTileParams t;
          core::RowTable rt;
          if (core::parse_coded_header(tile, size, int(r.width), int(r.height), int(info.channels), int(info.version), t,
                                       rt) != core::kOk ||
              core::parse_coded_tile(tile, size, int(r.width), int(r.height), int(info.channels), int(info.version), t) !=
                  core::kOk)
            throw std::runtime_error("tile " + std::to_string(i) + " does not parse");
          const bool pal = t.palette_size != 0;
          kind = t.ans ? (pal ? kAnsPal : kAns) : (pal ? kRicePal : kRice);
          const std::uint32_t params_at = pal ? t.palette_at + t.palette_size * t.palette_stride : 1;
          // The table: base, width byte, the zero-row bitmap if any (the
          // reference encoder writes one only with a zero row in it), deltas.
          const std::uint32_t bitmap = rt.zero_mask ? (r.height - 1 + 7) / 8 : 0;
          const std::uint32_t table_at =
              r.height > 1 ? rt.packed_at - bitmap - 1 - leb_bytes(rt.base) : rt.packed_at;
          c.modes += 1;
          c.palettes += params_at - 1;
          if (pal) {
            if (!palette_sections.insert(std::string(reinterpret_cast<const char*>(tile + 1), params_at - 1)).second)
              c.palette_repeat_bytes += params_at - 1;
            for (std::uint32_t v = 0; v < t.palette_size; ++v) {
              std::uint32_t w = 0;
              core::palette_word(tile, t, int(v), w);
              palette_colours.insert(w);
            }
            ++palette_tiles;
            palette_indices += t.palette_size;
            std::set<std::uint32_t> colours;
            std::uint64_t fresh = 0;
            for (std::uint32_t v = 0; v < t.palette_size; ++v) {
              std::uint32_t w = 0;
              core::palette_word(tile, t, int(v), w);
              colours.insert(w);
              fresh += previous_palette.count(w) ? 0 : 1;
            }
            const std::uint64_t delta = 2 + (previous_palette.size() + 7) / 8 + fresh * t.palette_stride;
            c.palette_delta += std::min<std::uint64_t>(delta, params_at - 1);
            previous_palette = std::move(colours);
          }
          c.params += table_at - params_at;
          c.row_table += rt.rows_at - table_at;
          c.rows += size - rt.rows_at;
          c.n_rows += r.height;
          for (std::uint32_t row = 0; row < r.height; ++row) {
            if (core::is_zero_row(t, int(row))) {
              ++c.zero_rows;
            } else if (repeats_earlier_row(img, r, row)) {
              ++c.copy_rows;
              c.copy_row_bytes += t.row_length[row];
            }
          }
          c.run_tiles += t.run_mode ? 1 : 0;
          c.copy_tiles += t.copies ? 1 : 0;
          c.ramp_tiles += t.ramps ? 1 : 0;
          c.bilevel_tiles += t.bilevel ? 1 : 0;
          c.plain_ans_tiles += t.ans && !pal && !t.run_mode && !t.copies && !t.ramps ? 1 : 0;
          for (int p = 0; p < t.channels; ++p) {
            if (t.plane[p].constant) continue;
            ++c.coded_planes;
            c.corrected_planes += t.plane[p].corrected ? 1 : 0;
            c.previous_code_planes += t.plane[p].previous_code ? 1 : 0;
          }
          if (!pal && distinct_colours(img, r) <= 256) ++c.few_colour_tiles;
        }
        ++c.tiles[kind];
        c.bytes[kind] += size;
        const double bpp = 8.0 * size / (double(r.width) * r.height);
        cells[i] = std::string(1, kKindChar[kind]) + char('0' + bpp_digit(bpp));
      }
      c.palette_union = palette_colours.size();
      if (palette_tiles)
        c.palette_image_level = c.palette_union <= 256 ? c.palette_union * info.channels + palette_tiles + palette_indices
                                                       : c.palettes;  // no one-byte indices: no gain
      const std::size_t slash = file.find_last_of('/');
      std::printf("%s\t%zu\t%.3f\t%llu", file.substr(slash == std::string::npos ? 0 : slash + 1).c_str(), enc.size(),
                  8.0 * double(enc.size()) / (double(info.width) * info.height), (unsigned long long)count);
      for (auto v : c.tiles) std::printf("\t%llu", (unsigned long long)v);
      for (auto v : c.bytes) std::printf("\t%llu", (unsigned long long)v);
      for (auto v : {c.fixed, c.modes, c.palettes, c.params, c.row_table, c.rows, c.n_rows, c.zero_rows, c.run_tiles,
                     c.few_colour_tiles, c.copy_rows, c.copy_row_bytes, c.palette_repeat_bytes, c.palette_union,
                     c.palette_image_level, c.palette_delta, c.mirrored, c.copy_tiles, c.ramp_tiles, c.bilevel_tiles,
                     c.plain_ans_tiles, c.coded_planes, c.corrected_planes, c.previous_code_planes})
        std::printf("\t%llu", (unsigned long long)v);
      std::printf("\n");
      if (map) {
        for (std::uint32_t ty = 0; ty < grid.tiles_y; ++ty) {
          std::printf("#");
          for (std::uint32_t tx = 0; tx < grid.tiles_x; ++tx) std::printf(" %s", cells[ty * grid.tiles_x + tx].c_str());
          std::printf("\n");
        }
      }
      std::fflush(stdout);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", file.c_str(), e.what());
      return 1;
    }
  }
  return 0;
}
