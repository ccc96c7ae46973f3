// Encoder (spec/codec.md): validates the image, encodes its tiles in
// parallel (tile_encoder.hpp: one tile), then writes the header, the tile
// table and the tiles (§2, §3).
#include <algorithm>
#include <charconv>
#include <cstring>
#include <numeric>
#include <optional>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "header.hpp"
#include "l3/codec/codec.hpp"
#include "l3/codec/tile_core.hpp"
#include "l3/common/parallel.hpp"
#include "symbol_finder.hpp"
#include "tile_encoder.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace l3 {
namespace {

constexpr std::uint32_t kDefaultTileWidthLog2 = 8;  // 256 x 32 tiles (spec §3.1)
constexpr std::uint32_t kDefaultTileHeight = 32;
using encoder::TileEncoder;

std::uint32_t tile_width_log2(std::uint32_t tile_width) {
  if (tile_width == 0) return kDefaultTileWidthLog2;
  for (std::uint32_t l = core::kMinTileWidthLog2; l <= core::kMaxTileWidthLog2; ++l)
    if (tile_width == (1u << l)) return l;
  throw_error(errc::invalid_argument, "tile width " + std::to_string(tile_width) + " (must be a power of two in 16..256)");
}

void check_image(const ImageView& image) {
  if (!image.data) throw_error(errc::invalid_argument, "image data is null");
  if (image.channels < 1 || image.channels > 4)
    throw_error(errc::invalid_argument, "channels " + std::to_string(image.channels) + " (must be 1..4)");
  if (image.width == 0 || image.height == 0) throw_error(errc::invalid_argument, "empty image");
  // What the decoder accepts by default (spec/limits.md): the encoder writes nothing it would refuse.
  const Limits limits{};
  if (image.width > limits.max_width || image.height > limits.max_height ||
      std::uint64_t{image.width} * image.height > limits.max_pixels)
    throw_error(errc::limit_exceeded, "image larger than " + std::to_string(limits.max_width) + "x" +
                                          std::to_string(limits.max_height) + " or " +
                                          std::to_string(limits.max_pixels) + " pixels");
  if (image.stride && image.stride < std::size_t(image.width) * image.channels)
    throw_error(errc::invalid_argument, "stride smaller than a row");
}

// The lowest format version that has what an encoded tile uses (spec §11):
// 14 when a plane has a ramp (§6.9), else 13 when it has a bilevel plane of more than two colours or with a template
// (§6.8), else 12 when it is mirrored (kind 3, §4.7) or a plane is predicted
// by NW (§6.1), else 11 when it has a bilevel plane (§6.8), else 10 when its row-length table
// has a zero-row bitmap (§4.3), else 9 when it is entropy-coded with compact tables (`compact`, §4.5), else 8
// with residual corrections (plane byte bit 4, §6.7), else 7 with a plane
// context of the plane before (plane byte bit 3, §6.2), else 6 with pixel
// copies (mode bit 7, §4.6), else 4 with a zero row (an empty row stream,
// §4.3), else 3 when it is entropy-coded (mode bit 6, §4.5), else 2. The
// tile is parsed as the decoder will parse it, which finds its row lengths.
std::uint8_t tile_version(const std::vector<std::uint8_t>& tile, const core::TileRect& r, std::uint32_t channels,
                          bool compact) {
  if ((tile[0] & 3) != core::kTileCoded && (tile[0] & 3) != core::kTileMirrored) return 2;
  core::CodedTileParams t;
  // Every tile the encoder writes parses (the round-trip tests and fuzzer
  // decode them); were one not to, the newest version is the safe answer.
  const int parse_as = compact ? core::kVersionRamps : core::kVersionCorrections;
  core::RowTable rows;
  if (core::parse_coded_tile(tile.data(), std::uint32_t(tile.size()), int(r.width), int(r.height), int(channels),
                             parse_as, t) != core::kOk ||
      core::parse_coded_header(tile.data(), std::uint32_t(tile.size()), int(r.width), int(r.height), int(channels),
                               parse_as, t, rows) != core::kOk)
    return core::kVersion;
  if (t.ramps) return core::kVersionRamps;
  if (t.bilevel && (t.bilevel_bits > 1 || !core::default_template(t)))
    return core::kVersionBitPlanes;
  if ((tile[0] & 3) == core::kTileMirrored) return core::kVersionMirror;
  for (int p = 0; p < t.channels; ++p)
    if (!t.plane[p].constant && t.plane[p].pred == core::kPredNW) return core::kVersionMirror;
  if (t.bilevel) return core::kVersionBilevel;
  if (rows.zero_mask) return core::kVersionRowMasks;
  if (t.ans && compact) return core::kVersionCompactTables;
  for (int p = 0; p < t.channels; ++p)
    if (t.plane[p].corrected) return core::kVersionCorrections;
  for (int p = 0; p < t.channels; ++p)
    if (t.plane[p].previous_code) return core::kVersionPlaneContext;
  if (t.copies) return core::kVersionPixelCopies;
  for (std::uint32_t row = 0; row < r.height; ++row)
    if (core::is_zero_row(t, int(row))) return core::kVersionZeroRows;
  return t.ans ? core::kVersionAns : 2;
}

// Tile copies (spec §3.3): source[i] is the first tile with the same clipped
// size and the same pixels as tile i (i itself when there is none, or when
// copies are off). Tiles are hashed in parallel; candidates with equal hashes
// are compared pixel by pixel.
std::vector<std::uint32_t> find_tile_copies(const ImageView& image, const core::TileGrid& grid, bool enabled,
                                            unsigned threads) {
  const std::uint32_t count = std::uint32_t(grid.tile_count());
  std::vector<std::uint32_t> source(count);
  std::iota(source.begin(), source.end(), 0u);
  if (!enabled) return source;
  const std::size_t stride = image.stride ? image.stride : std::size_t(image.width) * image.channels;
  auto row_of = [&](const core::TileRect& t, std::uint32_t y) {
    return image.data + std::size_t(t.y + y) * stride + std::size_t(t.x) * image.channels;
  };
  std::vector<std::uint64_t> hash(count);
  parallel_for(count, threads, [&](std::uint64_t i) {
    const core::TileRect t = grid.tile(std::uint32_t(i));
    std::uint64_t h = std::uint64_t{t.width} << 32 | t.height;
    for (std::uint32_t y = 0; y < t.height; ++y) h = XXH3_64bits_withSeed(row_of(t, y), std::size_t(t.width) * image.channels, h);
    hash[i] = h;
  });
  auto same_pixels = [&](std::uint32_t i, std::uint32_t j) {
    if (!grid.same_shape(i, j)) return false;
    const core::TileRect a = grid.tile(i), b = grid.tile(j);
    for (std::uint32_t y = 0; y < a.height; ++y)
      if (std::memcmp(row_of(a, y), row_of(b, y), std::size_t(a.width) * image.channels) != 0) return false;
    return true;
  };
  std::unordered_map<std::uint64_t, std::uint32_t> first;  // hash -> first tile with it
  for (std::uint32_t i = 0; i < count; ++i) {
    const auto [it, inserted] = first.try_emplace(hash[i], i);
    if (!inserted && same_pixels(i, it->second)) source[i] = it->second;
  }
  return source;
}

// The tile height when the caller leaves it to the encoder (spec §3.1): 32,
// or, for an image whose rows repeat with a period that 32-row tiles cut
// across (a chessboard of 25-pixel squares: period 50), the height in 16..31
// that leaves the fewest rows to code, the other bands of rows being tile
// copies (§3.3). It must code fewer tiles than 32 rows do and at most three
// quarters of their rows: short tiles cost per-tile bytes and idle GPU lanes
// (§8). Bands are compared by their rows' hashes (find_tile_copies then
// compares pixels); photos and wallpapers repeat no rows, and images whose
// rows are all alike code one band at any height: both keep 32.
std::uint32_t tile_height_for(const ImageView& image, const EncodeOptions& options) {
  if (options.tile_height) return options.tile_height;
  constexpr std::uint32_t kShortest = 16;
  if (!options.tile_copies || options.effort < 1 || image.height < 2 * kShortest) return kDefaultTileHeight;
  const std::size_t stride = image.stride ? image.stride : std::size_t(image.width) * image.channels;
  std::vector<std::uint64_t> row(image.height);
  for (std::uint32_t y = 0; y < image.height; ++y)
    row[y] = XXH3_64bits(image.data + std::size_t(y) * stride, std::size_t(image.width) * image.channels);
  auto coded_bands = [&](std::uint32_t th) {  // whole bands only: a clipped last one is coded at any height
    std::unordered_set<std::uint64_t> seen;
    std::uint32_t coded = 0;
    for (std::uint32_t y = 0; y + th <= image.height; y += th)
      coded += seen.insert(XXH3_64bits(&row[y], th * sizeof row[0])).second;
    return coded;
  };
  const std::uint32_t bands_32 = coded_bands(kDefaultTileHeight), rows_32 = bands_32 * kDefaultTileHeight;
  std::uint32_t best = kDefaultTileHeight, best_rows = rows_32;
  for (std::uint32_t th = kDefaultTileHeight - 1; th >= kShortest; --th) {
    const std::uint32_t bands = coded_bands(th);
    if (bands < bands_32 && 4 * bands * th <= 3 * rows_32 && bands * th < best_rows) {
      best = th;
      best_rows = bands * th;
    }
  }
  return best;
}

// An image's coded tiles before assembly (spec §3), kept so that a second
// encode of almost the same pixels (symbols, §3.4) codes only the tiles
// whose pixels differ.
struct CodedTiles {
  std::uint32_t tw_log2 = 0;
  core::TileGrid grid{};
  std::vector<std::uint32_t> source;  // tile copies (§3.3): i itself for a coded tile
  std::vector<std::vector<std::uint8_t>> tiles;
  std::vector<std::uint8_t> versions;
};

// Tiles that an earlier encode of the same grid coded from the same pixels
// (unchanged[i] != 0): their bytes are taken as they are.
struct Reuse {
  const CodedTiles* earlier = nullptr;
  const std::vector<std::uint8_t>* unchanged = nullptr;
};

CodedTiles code_tiles(const ImageView& image, const EncodeOptions& options, const Reuse& reuse = {}) {
  check_image(image);
  const std::uint32_t tw_log2 = tile_width_log2(options.tile_width);
  const std::uint32_t th = tile_height_for(image, options);
  if (th > core::kMaxTileHeight) throw_error(errc::invalid_argument, "tile height " + std::to_string(th) + " (must be 1..32)");
  if (options.effort < 0 || options.effort > 2)
    throw_error(errc::invalid_argument, "effort " + std::to_string(options.effort) + " (must be 0, 1 or 2)");
  if (options.entropy_min_saving_percent > 100)
    throw_error(errc::invalid_argument, "entropy_min_saving_percent " + std::to_string(options.entropy_min_saving_percent) +
                                            " (must be 0..100)");
  CodedTiles c;
  c.tw_log2 = tw_log2;
  c.grid = core::TileGrid::make(image.width, image.height, tw_log2, th);
  const std::uint32_t count = std::uint32_t(c.grid.tile_count());  // < 2^30 pixels: no overflow
  c.source = find_tile_copies(image, c.grid, options.tile_copies, options.threads);
  c.tiles.resize(count);
  c.versions.assign(count, 0);
  const CodedTiles* earlier = reuse.earlier && reuse.earlier->tw_log2 == tw_log2 &&
                                      reuse.earlier->grid.tile_height == th ? reuse.earlier : nullptr;
  auto encode_tile = [&](std::uint32_t i) {
    if (c.source[i] != i) {
      c.versions[i] = core::kVersionTileCopies;
      return;
    }
    if (earlier && (*reuse.unchanged)[i] && earlier->source[i] == i) {
      c.tiles[i] = earlier->tiles[i];
      c.versions[i] = earlier->versions[i];
      return;
    }
    const core::TileRect t = c.grid.tile(i);
    const Rect r{t.x, t.y, t.width, t.height};
    c.tiles[i] = TileEncoder(image, r, options).encode();
    c.versions[i] = tile_version(c.tiles[i], t, image.channels, options.compact_tables);
  };
  parallel_for(count, options.threads, [&](std::uint64_t i) { encode_tile(static_cast<std::uint32_t>(i)); });
  return c;
}

// The header, tile table and tiles (spec §2, §3), at the lowest version the
// tiles need (§11).
std::vector<std::uint8_t> assemble(const ImageView& image, const CodedTiles& c) {
  ImageInfo info;
  info.width = image.width;
  info.height = image.height;
  info.channels = image.channels;
  info.tile_width = c.grid.tile_width();
  info.tile_height = c.grid.tile_height;
  info.tiles_x = c.grid.tiles_x;
  info.tiles_y = c.grid.tiles_y;
  info.version = *std::max_element(c.versions.begin(), c.versions.end());
  std::vector<std::uint8_t> out;
  detail::write_header(out, info, c.tw_log2);
  for (std::uint32_t i = 0; i < c.tiles.size(); ++i) {
    const auto entry = c.source[i] != i ? core::kTileCopyBit | c.source[i] : std::uint32_t(c.tiles[i].size());
    for (int b = 0; b < 4; ++b) out.push_back(std::uint8_t(entry >> (8 * b)));
  }
  for (const auto& t : c.tiles) out.insert(out.end(), t.begin(), t.end());
  detail::seal(out);
  return out;
}

// Which tiles of `grid` no patch of `plan` overlaps: their pixels are the
// same in the image and in the image with the patches erased.
std::vector<std::uint8_t> tiles_without_patches(const core::TileGrid& grid, const encoder::SymbolPlan& plan) {
  std::vector<std::uint8_t> unchanged(grid.tile_count(), 1);
  for (const core::Patch& p : plan.patches) {
    const core::SymbolRect& s = plan.symbols[p.symbol];
    const core::TileGrid::Span span =
        grid.overlapped({std::uint32_t(p.x), std::uint32_t(p.y), s.width, s.height});
    for (std::uint32_t ty = span.ty0; ty < span.ty0 + span.rows; ++ty)
      for (std::uint32_t tx = span.tx0; tx < span.tx0 + span.cols; ++tx) unchanged[grid.index(tx, ty)] = 0;
  }
  return unchanged;
}

// Symbols (spec §3.4): the image's repeated blocks in a dictionary, placed by
// patches, and the rest in tiles of the image with the patches erased (the
// tiles no patch touches as `plain_tiles` coded them); kept when smaller
// than `plain`, the stream without symbols.
std::vector<std::uint8_t> with_symbols(const ImageView& image, const EncodeOptions& options,
                                       const CodedTiles& plain_tiles, std::vector<std::uint8_t> plain) {
  const std::optional<encoder::SymbolPlan> plan = encoder::find_symbols(image);
  if (!plan || plan->patches.empty()) return plain;
  const ImageView erased{plan->erased.data(), image.width, image.height, image.channels, 0};
  const std::vector<std::uint8_t> unchanged = tiles_without_patches(plain_tiles.grid, *plan);
  std::vector<std::uint8_t> out = assemble(erased, code_tiles(erased, options, {&plain_tiles, &unchanged}));
  if (out.size() >= plain.size()) return plain;
  const ImageView dictionary{plan->dictionary.data(), plan->dict_width, plan->dict_height, image.channels, 0};
  const std::vector<std::uint8_t> dictionary_stream = assemble(dictionary, code_tiles(dictionary, options));
  out[4] = core::kVersionSymbols;
  out[7] |= core::kHeaderFlagSymbols;
  encoder::append_symbol_section(out, *plan, dictionary_stream);
  detail::seal(out);
  return out.size() < plain.size() ? out : plain;
}

}  // namespace

std::vector<std::uint8_t> encode(const ImageView& image, const EncodeOptions& options) {
  const CodedTiles tiles = code_tiles(image, options);
  std::vector<std::uint8_t> plain = assemble(image, tiles);
  // A stream's version sets its tiles' syntax (§11): the tiles must read as
  // version 15's, whose entropy-coded tiles have compact tables.
  if (!options.symbols || options.effort < 1 || !options.compact_tables) return plain;
  return with_symbols(image, options, tiles, std::move(plain));
}

void set_entropy_mode(EncodeOptions& options, std::string_view mode) {
  const unsigned default_share = EncodeOptions{}.entropy_min_saving_percent;
  unsigned share = 0;
  const auto [end, ec] = std::from_chars(mode.data(), mode.data() + mode.size(), share);
  const bool percentage = !mode.empty() && ec == std::errc{} && end == mode.data() + mode.size() && share <= 100;
  if (mode != "auto" && mode != "off" && mode != "max" && !percentage)
    throw_error(errc::invalid_argument,
                "entropy mode '" + std::string(mode) + "' (must be auto, off, max or a percentage 0..100)");
  options.entropy_coding = mode != "off";
  options.entropy_min_saving_percent = mode == "max" ? 0u : percentage ? share : default_share;
}

std::string entropy_mode(const EncodeOptions& options) {
  if (!options.entropy_coding) return "off";
  if (options.entropy_min_saving_percent == EncodeOptions{}.entropy_min_saving_percent) return "auto";
  if (options.entropy_min_saving_percent == 0) return "max";
  return std::to_string(options.entropy_min_saving_percent);
}

}  // namespace l3
