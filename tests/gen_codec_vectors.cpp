// Writes the codec test vectors of spec/vectors/codec/ (spec/codec.md §10).
//
//   gen_codec_vectors DIR
//
// Valid vectors: NAME.l3i with NAME.rgba (the expected pixels, raw
// interleaved bytes) and NAME.txt = "valid W H C". Must-reject vectors:
// NAME.l3i with NAME.txt = "error <errc name>", each made by changing a few
// bytes of a valid stream at a place the spec names. test_codec decodes every
// vector and checks the outcome; regenerating must give the same files.
#include <cstdio>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "l3/codec/codec.hpp"
#include "l3/codec/codec_layout.hpp"
#include "l3/codec/tile_core.hpp"
#include "test_tile_pattern.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

void write(const fs::path& p, const void* data, std::size_t n) {
  std::ofstream out(p, std::ios::binary);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
}
void write_text(const fs::path& p, const std::string& s) { write(p, s.data(), s.size()); }

struct Image {
  std::uint32_t w, h, c;
  Bytes px;
};

const int kColours[4][4] = {{200, 30, 40, 255}, {10, 220, 90, 255}, {60, 70, 250, 255}, {240, 240, 10, 255}};

// Deterministic pixels: a smooth gradient plus a little structure, so tiles
// are coded (not constant or raw) and use the run mode in flat parts.
Image make_image(std::uint32_t w, std::uint32_t h, std::uint32_t c, int pattern) {
  Image im{w, h, c, Bytes(std::size_t(w) * h * c)};
  std::uint32_t seed = 12345u + std::uint32_t(pattern);
  for (std::uint32_t y = 0; y < h; ++y)
    for (std::uint32_t x = 0; x < w; ++x)
      for (std::uint32_t k = 0; k < c; ++k) {
        seed = seed * 1664525u + 1013904223u;
        int v = 0;
        if (pattern == 0) v = int(x * 3 + y * 2 + k * 40) + int(seed >> 30);
        if (pattern == 1) v = (x / 8 + y / 4) % 2 ? 200 : 30;  // flat regions: runs
        if (pattern == 2) v = int(seed >> 24);                 // noise: raw tiles
        if (pattern == 3) v = 77 + int(k);                     // constant
        if (pattern == 4) v = k == 3 ? 255 : int(x * 3 + y * 2 + k * 40) + int(seed >> 30);  // opaque alpha
        if (pattern == 5) v = int(x * 5 + y * 3) + int(seed >> 31);  // gray stored as RGB: R = G = B
        if (pattern == 5 && k > 0) v = im.px[(std::size_t(y) * w + x) * c];
        if (pattern == 6) v = k == 3 ? 255 : int(((x / 5 + y / 3 + (x * y) % 7) % 5) * 50 + k * 17 + 3);  // 5 colours
        if (pattern == 7) v = (x + y) % 2 ? 255 : 0;                                        // 1-pixel chessboard
        if (pattern == 8) v = int(x / 2 + y / 3 + k * 30) + int(seed >> 31);                // smooth, a little noise
        if (pattern == 9) v = int(x / 3 + y / 5 + k * 30) + ((seed >> 27) == 0 ? 1 : 0);    // smooth, rare noise: runs
        if (pattern == 10) v = int(x / 3 + y / 5 + k * 30) + ((seed >> 28) == 0 ? 1 : 0);    // pattern 9, zero rows below
        if (pattern == 11) v = kColours[(x / 3 + y / 4) % 4][k];                             // 4 colours in row blocks
        if (pattern == 12) v = int(x * 3 + y * 2) + int(seed >> 30);                         // pattern 0, zero rows below
        if (pattern == 13) {  // periodic, 16 x 8: 16 x 8 tiles repeat (tile copies)
          const std::uint32_t px = x % 16, py = y % 8;
          v = int(px * 7 + py * 13 + k * 40 + (px * py) % 5);
        }
        if (pattern == 14) {  // glyphs: 3 bitmaps of 6 x 7 in a row, repeated (pixel copies, palette tiles)
          const std::uint32_t g = (x / 6 + y / 7) % 3, bits = 0x5a3c66u * (g + 3) + g;
          v = (bits >> ((x % 6) * 4 + (y % 7)) & 1) ? 20 + int(k) * 90 : 230;
        }
        if (pattern == 15) {  // periodic, 21 x 3, more than 256 colours a tile (pixel copies, a transform)
          const std::uint32_t px = x % 21, py = y % 3;
          v = int(px * 11 + py * 37 + k * 60 + (x / 21) * 5 + (y / 9) * 3);
        }
        if (pattern == 16)  // sparse noise, then flat: runs that pay in rANS too
          v = x < 40 && (seed >> 30) == 0 ? int(seed >> 24) : 90 + int(k) * 40;
        if (pattern == 17)  // bilevel: thin diagonal lines (a tile with runs, 64 x 16)
          v = (x * 7 + y * 3) % 11 < 2 ? 0 : 255;
        // Ramps whose steps the gradient predictor misses (slopes below 1):
        if (pattern == 18)  // R on x, G on y, B on x + y: NE predicts B (mirrored tiles), a little noise
          v = (k == 0 ? int(x * 3) : k == 1 ? int(y * 7) : int((x + y) * 3 / 7)) + ((seed >> 27) == 0 ? 1 : 0);
        if (pattern == 19)  // every plane on x - y: NW predicts them
          v = int(128 + (int(x) - int(y)) * 3 / 7 + int(k) * 50) + ((seed >> 28) == 0 ? 1 : 0);
        if (pattern == 20) {  // each channel a ramp dithered to 0 or 255 by an 8 x 8 Bayer matrix (8 colours)
          static const int kBayer[8][8] = {{0, 32, 8, 40, 2, 34, 10, 42},   {48, 16, 56, 24, 50, 18, 58, 26},
                                           {12, 44, 4, 36, 14, 46, 6, 38},  {60, 28, 52, 20, 62, 30, 54, 22},
                                           {3, 35, 11, 43, 1, 33, 9, 41},   {51, 19, 59, 27, 49, 17, 57, 25},
                                           {15, 47, 7, 39, 13, 45, 5, 37},  {63, 31, 55, 23, 61, 29, 53, 21}};
          const int kk = int(k), level = (int(x) * (kk + 1) / 3 + int(y) * (3 - kk) / 5 + 16 * kk) % 64;
          v = level > kBayer[y % 8][x % 8] ? 255 : 0;
        }
        if (pattern == 21)  // gray lines of period 8 along x + 3y (two colours)
          v = (x + 3 * y) % 8 < 3 ? 20 : 235;
        if (pattern == 22) {  // exact ramps of slopes below 1 (a synthetic gradient), a falling one among them
          const double slope_x[3] = {0.37, 0.0, -0.23}, slope_y[3] = {0.11, 2.0 / 7.0, 0.19};
          v = int(std::floor(40.5 + 60.0 * k + slope_x[k % 3] * x + slope_y[k % 3] * y + (k == 2 ? 30 : 0)));
        }
        im.px[(std::size_t(y) * w + x) * c + k] = std::uint8_t(v & 255);
      }
  if (pattern == 10 || pattern == 12) {
    // Zero rows (spec §4.3): rows that repeat the row above (at even and odd
    // positions of the decoder's row pairs, and each 8- or 32-row tile's last
    // row) and a mid-gray first row, which every predictor reproduces from
    // the tile's midpoints (pattern 10: the first tile row; 12: every other).
    const std::size_t row = std::size_t(w) * c;
    for (std::uint32_t y = 0; y < h; ++y) {
      std::uint8_t* p = &im.px[y * row];
      if (pattern == 10 ? y == 0 : y % 16 == 0) std::memset(p, 128, row);
      else if (y % 5 == 1 || y % 7 == 4 || y % 8 == 7) std::memcpy(p, p - row, row);
    }
  }
  return im;
}

// Rice-coded (version 2) streams unless `ans`, without zero rows unless
// `zero_rows`, without tile copies unless `copies`, without pixel copies
// unless `pixel_copies`, without plane contexts unless `plane_contexts`,
// without residual corrections unless `corrections`, with version 3-8 tables
// unless `compact` (§4.5), without zero-row bitmaps unless `row_masks`
// (§4.3, version 10), without bilevel planes unless `bilevel` (§6.8, version
// 11), without NW predictors and mirrored tiles unless `diagonals` (§4.7,
// version 12), with version 11's bilevel planes unless `templates` (§6.8,
// version 13), without ramps unless `ramps` (§6.9, version 14): the vectors of §4.3-§4.4 keep the byte layout their
// mutations assume.
Bytes encode(const Image& im, std::uint32_t tw = 16, std::uint32_t th = 8, bool ans = false, bool zero_rows = false,
             bool copies = false, bool pixel_copies = false, int effort = 1, bool plane_contexts = false,
             bool corrections = false, bool compact = false, bool row_masks = false, bool bilevel = false,
             bool diagonals = false, bool templates = false, bool ramps = false, bool symbols = false) {
  l3::EncodeOptions o;
  o.effort = effort;
  o.tile_width = tw;
  o.tile_height = th;
  o.entropy_coding = ans;
  o.zero_rows = zero_rows;
  o.tile_copies = copies;
  o.pixel_copies = pixel_copies;
  o.plane_contexts = plane_contexts;
  o.corrections = corrections;
  o.compact_tables = compact;
  o.row_masks = row_masks;
  o.bilevel = bilevel;
  o.diagonals = diagonals;
  o.bilevel_templates = templates;
  o.ramps = ramps;
  o.symbols = symbols;
  o.entropy_min_saving_percent = 0;  // rANS tiles wherever smaller: the vectors exercise them
  return l3::encode(l3::ImageView{im.px.data(), im.w, im.h, im.c, 0}, o);
}

// An image of a test_tile_pattern.hpp pattern (`fill`, seeded), with alpha
// 255 everywhere when `opaque_alpha` (a constant plane).
Image pattern_image(std::uint32_t w, std::uint32_t h, std::uint32_t c, bool opaque_alpha,
                    void (*fill)(std::uint8_t*, std::uint32_t, std::uint32_t, std::uint32_t, std::uint32_t),
                    std::uint32_t seed) {
  Image im{w, h, c, Bytes(std::size_t(w) * h * c)};
  fill(im.px.data(), w, h, c, seed);
  if (opaque_alpha)
    for (std::size_t i = 3; i < im.px.size(); i += 4) im.px[i] = 255;
  return im;
}

// The generator's own checks of the streams a group of vectors is cut from.
void expect_or_exit(bool ok, const char* group, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "%s: %s expected\n", group, what);
  std::exit(1);
}

std::uint32_t tile_count(const Bytes& b) {
  const l3::ImageInfo info = l3::read_info(b);
  return info.tiles_x * info.tiles_y;
}
// Byte offset of tile i's data.
std::size_t tile_offset(const Bytes& b, std::uint32_t i) {
  std::size_t off = l3::core::kHeaderSize + 4 * std::size_t(tile_count(b));
  for (std::uint32_t j = 0; j < i; ++j) {
    std::uint32_t s;
    std::memcpy(&s, &b[l3::core::kHeaderSize + 4 * j], 4);
    off += s;
  }
  return off;
}
std::uint32_t tile_size(const Bytes& b, std::uint32_t i) {
  std::uint32_t s;
  std::memcpy(&s, &b[l3::core::kHeaderSize + 4 * i], 4);
  return s;
}
void set_tile_size(Bytes& b, std::uint32_t i, std::uint32_t s) { std::memcpy(&b[l3::core::kHeaderSize + 4 * i], &s, 4); }

// First tile of the given kind (coded by default).
std::uint32_t first_tile(const Bytes& b, std::uint8_t kind = l3::core::kTileCoded) {
  for (std::uint32_t i = 0; i < tile_count(b); ++i)
    if ((b[tile_offset(b, i)] & 3) == kind) return i;
  std::fprintf(stderr, "no tile of kind %d\n", kind);
  std::exit(1);
}

// Offset of the row-length table's first byte in a coded tile (spec §4.3).
std::size_t row_table(const Bytes& b, std::uint32_t tile, std::uint32_t channels) {
  const std::size_t t = tile_offset(b, tile);
  std::size_t pos = t + 1 + channels * 9;
  if (b[t] & 0x10) ++pos;  // run parameter
  return pos;
}

// Tile i's clipped width and height (spec §3).
std::pair<int, int> tile_dims(const l3::ImageInfo& info, std::uint32_t i) {
  const std::uint32_t tx = i % info.tiles_x, ty = i / info.tiles_x;
  return {int(std::min(info.tile_width, info.width - tx * info.tile_width)),
          int(std::min(info.tile_height, info.height - ty * info.tile_height))};
}

// Calls f(i, t, w, h, info) for each coded tile i of `b` (t: its offset; w x
// h: its clipped size) until f returns true.
template <class F>
void each_coded_tile(const Bytes& b, F&& f) {
  const l3::ImageInfo info = l3::read_info(b);
  for (std::uint32_t i = 0; i < tile_count(b); ++i) {
    const std::size_t t = tile_offset(b, i);
    if ((b[t] & 3) != l3::core::kTileCoded) continue;
    const auto [w, h] = tile_dims(info, i);
    if (f(i, t, w, h, info)) return;
  }
}

// The zero rows (spec §4.3, version 4) of a stream's coded tiles, by kind of
// tile, and how many are a tile's first or last row.
struct ZeroRows {
  int rice = 0, ans = 0, palette = 0, first = 0, last = 0;
};
ZeroRows zero_rows_in(const Bytes& b) {
  ZeroRows z;
  each_coded_tile(b, [&](std::uint32_t i, std::size_t t, int w, int h, const l3::ImageInfo& info) {
    l3::core::CodedTileParams p;
    if (l3::core::parse_coded_tile(b.data() + t, tile_size(b, i), w, h, int(info.channels), int(info.version), p) !=
        l3::core::kOk) {
      std::fprintf(stderr, "tile %u does not parse\n", i);
      std::exit(1);
    }
    for (int r = 0; r < h; ++r) {
      if (!l3::core::is_zero_row(p, r)) continue;
      ++((b[t] & l3::core::kModePalette) ? z.palette : p.ans ? z.ans : z.rice);
      z.first += r == 0;
      z.last += r == h - 1;
    }
    return false;
  });
  return z;
}

// The first coded tile of `b` whose row-length table has a zero-row bitmap
// (version 10, spec §4.3): its index, and where its bitmap's last byte lies
// and which bit of it is the first past the rows it marks (8 if none is).
struct MaskedTile {
  std::uint32_t index = ~0u;
  std::size_t last_mask_byte = 0;
  int first_unused_bit = 8;
};
MaskedTile first_masked_tile(const Bytes& b) {
  MaskedTile found;
  each_coded_tile(b, [&](std::uint32_t i, std::size_t t, int w, int h, const l3::ImageInfo& info) {
    l3::core::CodedTileParams p;
    l3::core::RowTable rt;
    if (l3::core::parse_coded_header(b.data() + t, tile_size(b, i), w, h, int(info.channels), int(info.version), p,
                                     rt) != l3::core::kOk || !rt.zero_mask)
      return false;
    // The bitmap ends where the deltas start (packed_at).
    found = MaskedTile{i, t + rt.packed_at - 1, (h - 1) % 8 ? (h - 1) % 8 : 8};
    return true;
  });
  return found;
}

// The first tile of `b` with a bilevel plane (version 11, spec §6.8), with
// run mode when `runs` and at least `colours` colours: its index, the offset
// of its plane byte (the template or the level tables follow it), its
// palette's size and stride, a context bit 0 reads symbols in (a level not
// 0) and its template.
struct BilevelTile {
  std::uint32_t index = ~0u;
  std::size_t plane_byte = 0;
  std::uint32_t colours = 0, stride = 0;
  int used_context = -1;
  int dy[2] = {0, 0}, dx[2] = {0, 0};
};
BilevelTile first_bilevel_tile(const Bytes& b, bool runs, std::uint32_t colours = 2) {
  BilevelTile found;
  each_coded_tile(b, [&](std::uint32_t i, std::size_t t, int w, int h, const l3::ImageInfo& info) {
    l3::core::CodedTileParams p;
    if (l3::core::parse_coded_tile(b.data() + t, tile_size(b, i), w, h, int(info.channels), int(info.version), p) !=
            l3::core::kOk ||
        !p.bilevel || p.run_mode != runs || p.palette_size < colours)
      return false;
    // The plane byte follows the colours.
    found = BilevelTile{i, t + p.palette_at + p.palette_size * p.palette_stride, p.palette_size, p.palette_stride, -1,
                        {p.template_dy[0], p.template_dy[1]}, {p.template_dx[0], p.template_dx[1]}};
    for (int x = 0; x < l3::core::kBilevelContexts && found.used_context < 0; ++x)
      if (p.bilevel_one[0][x]) found.used_context = x;
    return true;
  });
  return found;
}

// Recomputes the header checksum after a mutation (spec §2, computed here from
// the spec rather than by the library), so that each vector exercises the
// structural check it is named after instead of the checksum.
void reseal(Bytes& b) {
  if (b.size() < l3::core::kHeaderSize) return;
  const std::uint64_t seed = XXH3_64bits(b.data(), l3::core::kChecksumOffset);
  const std::uint64_t sum = XXH3_64bits_withSeed(b.data() + l3::core::kHeaderSize, b.size() - l3::core::kHeaderSize, seed);
  for (int i = 0; i < 8; ++i) b[l3::core::kChecksumOffset + i] = std::uint8_t(sum >> (8 * i));
}

struct Vectors {
  fs::path dir;
  void valid(const std::string& name, const Image& im, const Bytes& bytes) {
    write(dir / (name + ".l3i"), bytes.data(), bytes.size());
    write(dir / (name + ".rgba"), im.px.data(), im.px.size());
    write_text(dir / (name + ".txt"),
               "valid " + std::to_string(im.w) + " " + std::to_string(im.h) + " " + std::to_string(im.c) + "\n");
  }
  // Writes a must-reject vector after checking that it fails as named.
  void reject(const std::string& name, const Bytes& bytes, l3::errc e) {
    l3::errc got = l3::errc::ok;
    try {
      (void)l3::decode(bytes);
    } catch (const l3::Error& err) {
      got = err.code();
    }
    if (got != e) {
      std::fprintf(stderr, "vector %s: expected %s, got %s\n", name.c_str(), l3::errc_name(e), l3::errc_name(got));
      std::exit(1);
    }
    write(dir / (name + ".l3i"), bytes.data(), bytes.size());
    write_text(dir / (name + ".txt"), std::string("error ") + l3::errc_name(e) + "\n");
  }
  void mutate(const std::string& name, const Bytes& base, l3::errc e, const std::function<void(Bytes&)>& f) {
    Bytes b = base;
    f(b);
    reseal(b);
    reject(name, b, e);
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: gen_codec_vectors DIR\n");
    return 2;
  }
  Vectors v{argv[1]};
  fs::create_directories(v.dir);
  using l3::errc;

  // ---- valid -------------------------------------------------------------
  const Image gray = make_image(37, 19, 1, 0), ga = make_image(20, 9, 2, 0);
  const Image rgb = make_image(33, 17, 3, 0), rgba = make_image(18, 10, 4, 0);
  const Image flat = make_image(40, 16, 3, 1), noise = make_image(16, 8, 3, 2);
  const Image constant = make_image(20, 10, 3, 3), one = make_image(1, 1, 3, 0);
  v.valid("valid-gray-37x19", gray, encode(gray));
  v.valid("valid-gray-alpha-20x9", ga, encode(ga));
  v.valid("valid-rgb-33x17", rgb, encode(rgb));
  v.valid("valid-rgba-18x10", rgba, encode(rgba));
  // flat has at most 16 colours a tile: at effort 1 its tiles would take
  // their palette form alone (spec §12); effort 2 keeps the unindexed RGB
  // tiles with runs these vectors are about.
  const Bytes flat_bytes = encode(flat, 16, 8, false, false, false, false, 2);
  v.valid("valid-rgb-runs-40x16", flat, flat_bytes);
  v.valid("valid-rgb-raw-16x8", noise, encode(noise));
  v.valid("valid-rgb-constant-20x10", constant, encode(constant));
  v.valid("valid-rgb-1x1", one, encode(one));
  {
    l3::EncodeOptions rice;
    rice.entropy_coding = false;
    rice.plane_contexts = rice.corrections = rice.diagonals = rice.ramps = false;  // its bytes as written in version 2
    v.valid("valid-rgb-default-tiles-33x17", rgb, l3::encode(l3::ImageView{rgb.px.data(), rgb.w, rgb.h, rgb.c, 0}, rice));
  }
  // Version 2's constant planes (spec §4.3): opaque alpha, gray stored as RGB.
  const Image opaque = make_image(24, 12, 4, 4), gray_rgb = make_image(24, 12, 3, 5);
  const Bytes opaque_bytes = encode(opaque), gray_rgb_bytes = encode(gray_rgb);
  v.valid("valid-rgba-opaque-24x12", opaque, opaque_bytes);
  v.valid("valid-gray-as-rgb-24x12", gray_rgb, gray_rgb_bytes);
  // Palette tiles (spec §4.4).
  const Image few = make_image(48, 16, 3, 6), chess = make_image(48, 16, 1, 7);
  const Bytes few_bytes = encode(few), chess_bytes = encode(chess);
  v.valid("valid-rgb-palette-48x16", few, few_bytes);
  v.valid("valid-gray-palette-48x16", chess, chess_bytes);
  const Image few_opaque = make_image(48, 16, 4, 6);  // the same colours, alpha 255: a constant palette channel
  v.valid("valid-rgba-palette-opaque-48x16", few_opaque, encode(few_opaque));

  // ---- header (spec §2) --------------------------------------------------
  const Bytes base = encode(rgb);
  v.mutate("bad-magic", base, errc::bad_magic, [](Bytes& b) { b[0] = 'X'; });
  v.mutate("version-0", base, errc::unsupported_version, [](Bytes& b) { b[4] = 0; });
  v.mutate("version-16", base, errc::unsupported_version, [](Bytes& b) { b[4] = l3::core::kVersion + 1; });
  {
    // A version 1 stream (spec §11): the same tiles without constant planes
    // decode as before; a constant plane in one is [corrupt_tile].
    Bytes v1 = base;
    v1[4] = 1;
    reseal(v1);
    v.valid("valid-v1-rgb-33x17", rgb, v1);
    v.mutate("v1-constant-plane", opaque_bytes, errc::corrupt_tile, [](Bytes& b) { b[4] = 1; });
  }
  v.mutate("channels-0", base, errc::corrupt_header, [](Bytes& b) { b[5] = 0; });
  v.mutate("channels-5", base, errc::corrupt_header, [](Bytes& b) { b[5] = 5; });
  v.mutate("bit-depth-16", base, errc::unsupported, [](Bytes& b) { b[6] = 16; });
  v.mutate("flags-set", base, errc::reserved_bits_set, [](Bytes& b) { b[7] = 1; });
  v.mutate("reserved-18-set", base, errc::reserved_bits_set, [](Bytes& b) { b[18] = 0x80; });
  v.mutate("width-0", base, errc::corrupt_header, [](Bytes& b) { std::memset(&b[8], 0, 4); });
  v.mutate("height-0", base, errc::corrupt_header, [](Bytes& b) { std::memset(&b[12], 0, 4); });
  v.mutate("tile-width-log2-3", base, errc::corrupt_header, [](Bytes& b) { b[16] = 3; });
  v.mutate("tile-width-log2-9", base, errc::corrupt_header, [](Bytes& b) { b[16] = 9; });
  v.mutate("tile-height-0", base, errc::corrupt_header, [](Bytes& b) { b[17] = 0; });
  v.mutate("tile-height-33", base, errc::corrupt_header, [](Bytes& b) { b[17] = 33; });
  v.mutate("huge-dimensions", base, errc::limit_exceeded, [](Bytes& b) {
    const std::uint32_t big = 0x7fffffff;
    std::memcpy(&b[8], &big, 4);
    std::memcpy(&b[12], &big, 4);
  });
  v.reject("short-header", Bytes(base.begin(), base.begin() + 12), errc::truncated);
  {
    Bytes stale = base;
    stale.back() ^= 0x10;  // a changed tile byte under the old checksum
    v.reject("checksum-mismatch", stale, errc::checksum_mismatch);
    stale = base;
    stale[l3::core::kChecksumOffset] ^= 1;
    v.reject("checksum-field-changed", stale, errc::checksum_mismatch);
  }
  v.reject("empty", Bytes{}, errc::truncated);

  // ---- tile table (spec §3) ----------------------------------------------
  v.reject("table-truncated", Bytes(base.begin(), base.begin() + l3::core::kHeaderSize + 6), errc::truncated);
  v.mutate("tile-size-0", base, errc::corrupt_tile_table, [](Bytes& b) { set_tile_size(b, 1, 0); });
  v.mutate("trailing-byte", base, errc::corrupt_tile_table, [](Bytes& b) { b.push_back(0); });
  v.reject("payload-truncated", Bytes(base.begin(), base.end() - 1), errc::truncated);

  // ---- tiles (spec §4-§7) --------------------------------------------------
  const std::uint32_t ct = first_tile(base);
  const std::size_t t0 = tile_offset(base, ct);
  v.mutate("tile-kind-3", base, errc::corrupt_tile, [&](Bytes& b) { b[t0] |= 3; });
  v.mutate("tile-mode-reserved-bit", base, errc::reserved_bits_set, [&](Bytes& b) { b[t0] |= 0x80; });
  v.mutate("transform-3", base, errc::corrupt_tile, [&](Bytes& b) { b[t0] |= 0x0c; });
  v.mutate("predictor-6", base, errc::corrupt_tile, [&](Bytes& b) { b[t0 + 1] = 6; });
  v.mutate("predictor-7", base, errc::corrupt_tile, [&](Bytes& b) { b[t0 + 1] = 7; });
  v.mutate("predictor-reserved-bits", base, errc::reserved_bits_set, [&](Bytes& b) { b[t0 + 1] |= 0x40; });
  v.mutate("k-11", base, errc::corrupt_tile, [&](Bytes& b) { b[t0 + 2] = 0xb0 | (b[t0 + 2] & 0x0f); });
  v.mutate("row-width-25", base, errc::corrupt_tile, [&](Bytes& b) {
    std::size_t p = row_table(b, ct, 3);
    while (b[p] & 0x80) ++p;  // skip the LEB128 base
    b[p + 1] = 25;
  });
  v.mutate("row-lengths-overrun", base, errc::truncated, [&](Bytes& b) {
    const std::size_t p = row_table(b, ct, 3);
    b[p] = 0x7f;  // base length larger than the tile
  });
  v.mutate("row-stream-extra-byte", base, errc::corrupt_tile, [&](Bytes& b) {
    // One more byte at the end of the tile's last row stream: the row's codes
    // no longer end in its last byte (spec §7.3).
    const std::size_t end = tile_offset(b, ct) + tile_size(b, ct);
    b.insert(b.begin() + std::ptrdiff_t(end), std::uint8_t{0});
    set_tile_size(b, ct, tile_size(b, ct) + 1);
  });
  v.mutate("tile-truncated-by-one", base, errc::corrupt_tile, [&](Bytes& b) {
    // Move the last byte of tile ct to the next tile: sizes still add up,
    // but the coded tile's last row stream is one byte short.
    set_tile_size(b, ct, tile_size(b, ct) - 1);
    set_tile_size(b, ct + 1, tile_size(b, ct + 1) + 1);
  });
  const std::uint32_t rt = first_tile(flat_bytes);
  v.mutate("run-k-11", flat_bytes, errc::corrupt_tile, [&](Bytes& b) {
    const std::size_t t = tile_offset(b, rt);
    if (!(b[t] & 0x10)) { std::fprintf(stderr, "run mode expected\n"); std::exit(1); }
    b[t + 1 + 3 * 9] = 11;
  });
  const Bytes gray_bytes = encode(gray);
  v.mutate("transform-on-gray", gray_bytes, errc::corrupt_tile,
           [&](Bytes& b) { b[tile_offset(b, first_tile(b))] |= 0x04; });
  const Bytes const_bytes = encode(constant);
  v.mutate("constant-tile-long", const_bytes, errc::corrupt_tile, [&](Bytes& b) {
    // Grow tile 0 by one byte taken from tile 1 (also constant: it shrinks to
    // a truncated constant tile, but tile 0 is decoded and reported first).
    set_tile_size(b, 0, tile_size(b, 0) + 1);
    set_tile_size(b, 1, tile_size(b, 1) - 1);
  });
  {
    // Constant planes (spec §4.3): the alpha plane of the opaque image's first
    // coded tile is `5, 0xFF, 0x00` after three 9-byte plane entries.
    const std::size_t t = tile_offset(opaque_bytes, first_tile(opaque_bytes));
    const std::size_t a = t + 1 + 3 * 9;
    if (opaque_bytes[a] != l3::core::kPlaneConstant || opaque_bytes[a + 1] != 0xff || opaque_bytes[a + 2] != 0) {
      std::fprintf(stderr, "constant alpha plane expected\n");
      std::exit(1);
    }
    v.mutate("constant-plane-256", opaque_bytes, errc::corrupt_tile, [&](Bytes& b) { b[a + 1] = 0; b[a + 2] = 1; });
    v.mutate("constant-plane-negative", opaque_bytes, errc::corrupt_tile, [&](Bytes& b) { b[a + 2] = 0xff; });
    v.mutate("constant-plane-reserved-bits", opaque_bytes, errc::reserved_bits_set, [&](Bytes& b) { b[a] |= 0x08; });
    // Gray stored as RGB: planes 1 and 2 (colour differences, [-255, 255])
    // are constant 0; -256 is outside.
    const std::size_t g = tile_offset(gray_rgb_bytes, first_tile(gray_rgb_bytes));
    const std::size_t q = g + 1 + 9;
    if ((gray_rgb_bytes[g] & 0x0c) == 0 || gray_rgb_bytes[q] != l3::core::kPlaneConstant) {
      std::fprintf(stderr, "transformed gray with constant planes expected\n");
      std::exit(1);
    }
    v.mutate("constant-plane-minus-256", gray_rgb_bytes, errc::corrupt_tile,
             [&](Bytes& b) { b[q + 1] = 0x00; b[q + 2] = 0xff; });
  }
  {
    // Palette tiles (spec §4.4): the first tile of the few-colour image.
    const std::uint32_t pt = 0;
    const std::size_t t = tile_offset(few_bytes, pt);
    if (!(few_bytes[t] & l3::core::kModePalette) || few_bytes[t + 1] != 4) {
      std::fprintf(stderr, "a palette tile of 5 colours expected\n");
      std::exit(1);
    }
    v.mutate("palette-with-transform", few_bytes, errc::corrupt_tile, [&](Bytes& b) { b[t] |= 0x04; });
    v.mutate("mode-bit-6", few_bytes, errc::reserved_bits_set, [&](Bytes& b) { b[t] |= 0x40; });
    v.mutate("v1-palette", few_bytes, errc::reserved_bits_set, [](Bytes& b) { b[4] = 1; });
    if (few_bytes[t + 2] != 0) {
      std::fprintf(stderr, "no constant palette channel expected\n");
      std::exit(1);
    }
    v.mutate("palette-mask-reserved", few_bytes, errc::reserved_bits_set, [&](Bytes& b) { b[t + 2] = 0x08; });
    v.mutate("palette-index-out-of-range", few_bytes, errc::corrupt_tile, [&](Bytes& b) {
      // Drop the last colour (3 bytes after the mode, count and mask bytes):
      // index 4 no longer names one.
      b[t + 1] = 3;
      b.erase(b.begin() + std::ptrdiff_t(t + 3 + 4 * 3), b.begin() + std::ptrdiff_t(t + 3 + 5 * 3));
      set_tile_size(b, pt, tile_size(b, pt) - 3);
    });
    v.mutate("palette-truncated", few_bytes, errc::truncated, [&](Bytes& b) {
      // A tile of 8 bytes: the mode byte, the count (5), the mask and 5 of 15 colour bytes.
      const std::uint32_t old_size = tile_size(b, pt);
      b.erase(b.begin() + std::ptrdiff_t(t + 8), b.begin() + std::ptrdiff_t(t + old_size));
      set_tile_size(b, pt, 8);
    });
  }
  {
    // Entropy-coded tiles (version 3, spec §4.5, §7.4): 64 x 32 tiles, where
    // the tables pay for themselves.
    const Image smooth = make_image(80, 40, 3, 8), smooth_opaque = make_image(64, 32, 4, 8);
    const Image runs = make_image(64, 32, 3, 16), chess_big = make_image(64, 32, 1, 7);
    const Bytes smooth_bytes = encode(smooth, 64, 32, true);
    const Bytes runs_bytes = encode(runs, 64, 32, true);
    auto first_ans = [](const Bytes& b, const char* what) {
      if (b[4] != l3::core::kVersionAns) { std::fprintf(stderr, "%s: version 3 expected\n", what); std::exit(1); }
      for (std::uint32_t i = 0; i < tile_count(b); ++i)
        if ((b[tile_offset(b, i)] & (3 | l3::core::kModeAns)) == l3::core::kModeAns) {
          if (std::strcmp(what, "runs") == 0 && !(b[tile_offset(b, i)] & 0x10)) continue;
          return i;
        }
      std::fprintf(stderr, "%s: an entropy-coded tile expected\n", what);
      std::exit(1);
    };
    first_ans(runs_bytes, "runs");
    v.valid("valid-rgb-ans-80x40", smooth, smooth_bytes);
    v.valid("valid-rgba-opaque-ans-64x32", smooth_opaque, encode(smooth_opaque, 64, 32, true));
    v.valid("valid-rgb-ans-runs-64x32", runs, runs_bytes);
    const Bytes chess_bytes_ans = encode(chess_big, 64, 32, true);
    first_ans(chess_bytes_ans, "chessboard");
    v.valid("valid-gray-palette-ans-64x32", chess_big, chess_bytes_ans);
    first_ans(encode(smooth_opaque, 64, 32, true), "opaque");
    const std::uint32_t at = first_ans(smooth_bytes, "smooth");
    const std::size_t t = tile_offset(smooth_bytes, at);
    v.mutate("ans-in-v2", smooth_bytes, errc::reserved_bits_set, [](Bytes& b) { b[4] = 2; });
    // The first plane's tables start at t + 2: 5 bits alphabet size, then
    // token 0's 4-bit exponent (LSB-first).
    v.mutate("ans-alphabet-29", smooth_bytes, errc::corrupt_tile, [&](Bytes& b) { b[t + 2] = std::uint8_t((b[t + 2] & 0xe0) | 29); });
    v.mutate("ans-exponent-14", smooth_bytes, errc::corrupt_tile, [&](Bytes& b) {
      const unsigned field = (b[t + 2] | b[t + 3] << 8) & ~(15u << 5);
      const unsigned with = field | 14u << 5;
      b[t + 2] = std::uint8_t(with);
      b[t + 3] = std::uint8_t(with >> 8);
    });
    v.mutate("ans-sum-not-4096", smooth_bytes, errc::corrupt_tile, [&](Bytes& b) {
      const unsigned e = (b[t + 2] >> 5 | b[t + 3] << 3) & 15;
      if (e < 2) { std::fprintf(stderr, "token 0 with a mantissa expected\n"); std::exit(1); }
      b[t + 3] ^= 0x02;  // bit 9 of the field: token 0's first mantissa bit
    });
    {
      // Compact tables (version 9, spec §4.5): the same images with them. The
      // first plane's tables start at t + 2 as above: 5 bits A, 5 bits z,
      // then the first token other than z: its 4-bit exponent at bit 10.
      auto expect = [](bool ok, const char* what) { expect_or_exit(ok, "compact tables", what); };
      const Bytes compact = encode(smooth, 64, 32, true, false, false, false, 1, false, false, true);
      expect(compact[4] == l3::core::kVersionCompactTables, "compact tables: version 9");
      expect(compact.size() < smooth_bytes.size(), "compact tables: smaller");
      v.valid("valid-rgb-compact-ans-80x40", smooth, compact);
      v.valid("valid-rgb-compact-ans-runs-64x32", runs,
              encode(runs, 64, 32, true, true, false, false, 1, false, false, true));
      v.valid("valid-gray-palette-compact-ans-64x32", chess_big,
              encode(chess_big, 64, 32, true, false, false, false, 1, false, false, true));
      const std::size_t c = tile_offset(compact, at);
      expect((compact[c] & (3 | l3::core::kModeAns)) == l3::core::kModeAns, "compact tables: the same tile entropy-coded");
      v.mutate("ans-remainder-index-A", compact, errc::corrupt_tile, [&](Bytes& b) {
        const unsigned field = b[c + 2] | b[c + 3] << 8;
        const unsigned with = (field & ~(31u << 5)) | (field & 31u) << 5;  // z := A
        b[c + 2] = std::uint8_t(with);
        b[c + 3] = std::uint8_t(with >> 8);
      });
      v.mutate("ans-remainder-0", compact, errc::corrupt_tile, [&](Bytes& b) {
        // The first explicit token's exponent 13: its frequency alone is at
        // least 4096, which leaves the remainder token nothing.
        const unsigned field = b[c + 3] | b[c + 4] << 8;  // bits 8..23 of the field
        const unsigned with = (field & ~(15u << 2)) | 13u << 2;
        b[c + 3] = std::uint8_t(with);
        b[c + 4] = std::uint8_t(with >> 8);
      });
      v.mutate("compact-table-in-v8", compact, errc::corrupt_tile, [](Bytes& b) { b[4] = 8; });
    }
    v.mutate("ans-table-truncated", smooth_bytes, errc::truncated, [&](Bytes& b) {
      // The tile shrunk to its mode byte, plane byte and one table byte, the
      // rest given to the next tile (tiles are reported in order).
      const std::uint32_t old_size = tile_size(b, at);
      set_tile_size(b, at, 3);
      set_tile_size(b, at + 1, tile_size(b, at + 1) + old_size - 3);
    });
    // Row streams: the last row of the tile (from the parsed row table).
    l3::core::CodedTileParams params;
    if (at + 1 >= tile_count(smooth_bytes) ||
        l3::core::parse_coded_tile(smooth_bytes.data() + t, tile_size(smooth_bytes, at), 64, 32, 3, 3, params) !=
            l3::core::kOk) {
      std::fprintf(stderr, "a parsable 64x32 entropy-coded tile expected\n");
      std::exit(1);
    }
    const std::size_t last = t + params.row_offset[31];
    v.mutate("ans-initial-state-small", smooth_bytes, errc::corrupt_tile, [&](Bytes& b) { b[last] = 0; b[last + 1] = 0; });
    v.mutate("ans-final-state", smooth_bytes, errc::corrupt_tile, [&](Bytes& b) { b[last + 3] ^= 1; });
    v.mutate("ans-row-byte-changed", smooth_bytes, errc::corrupt_tile,
             [&](Bytes& b) { b[t + params.row_offset[31] + params.row_length[31] - 1] ^= 0x10; });
  }
  {
    // Zero rows (version 4, spec §4.3): empty row streams in Rice-coded,
    // entropy-coded and palette tiles, a tile's first and last rows among them.
    auto expect = [](bool ok, const char* what) {
      if (!ok) { std::fprintf(stderr, "zero rows: %s expected\n", what); std::exit(1); }
    };
    // Effort 2 for flat and gray_zero: unindexed tiles (see flat above).
    const Bytes rice_bytes = encode(flat, 16, 8, false, true, false, false, 2);
    const ZeroRows rice = zero_rows_in(rice_bytes);
    expect(rice_bytes[4] == l3::core::kVersionZeroRows && rice.rice > 0 && rice.last > 0 && rice.ans + rice.palette == 0,
           "version 4, Rice tiles with zero last rows");
    v.valid("valid-rgb-zero-rows-40x16", flat, rice_bytes);
    const Image gray_zero = make_image(37, 19, 1, 12);
    const Bytes gray_zero_bytes = encode(gray_zero, 16, 8, false, true, false, false, 2);
    const ZeroRows g = zero_rows_in(gray_zero_bytes);
    expect(g.rice > 0 && g.first > 0 && g.last > 0, "gray Rice tiles with zero first and last rows");
    v.valid("valid-gray-zero-first-last-37x19", gray_zero, gray_zero_bytes);
    const Image smooth_zero = make_image(64, 64, 3, 10);
    const Bytes ans_bytes = encode(smooth_zero, 64, 32, true, true);
    const ZeroRows a = zero_rows_in(ans_bytes);
    expect(a.ans > 0 && a.first > 0 && a.last > 0 && a.rice == 0, "entropy-coded tiles with zero first and last rows");
    v.valid("valid-rgb-ans-zero-rows-64x64", smooth_zero, ans_bytes);
    const Image stripes = make_image(48, 16, 3, 11);
    const Bytes palette_bytes = encode(stripes, 16, 8, false, true);
    expect(zero_rows_in(palette_bytes).palette > 0, "palette tiles with zero rows");
    v.valid("valid-rgb-palette-zero-rows-48x16", stripes, palette_bytes);
    // In versions 1-3 an empty row stream is an ordinary row, which fails
    // the end check of §7.3.
    v.mutate("zero-row-in-v3", rice_bytes, errc::corrupt_tile, [](Bytes& b) { b[4] = 3; });
    v.mutate("zero-row-in-v3-ans", ans_bytes, errc::corrupt_tile, [](Bytes& b) { b[4] = 3; });

    // Zero-row bitmaps (version 10, spec §4.3): the same images with them
    // (and version 9's compact tables), where a bitmap is the smaller table.
    const Bytes rice_masked = encode(flat, 16, 8, false, true, false, false, 2, false, false, true, true);
    const MaskedTile m = first_masked_tile(rice_masked);
    expect(rice_masked[4] == l3::core::kVersionRowMasks && m.index != ~0u && rice_masked.size() < rice_bytes.size(),
           "version 10, a Rice tile with a zero-row bitmap, smaller");
    v.valid("valid-rgb-zero-row-mask-40x16", flat, rice_masked);
    const Bytes ans_masked = encode(smooth_zero, 64, 32, true, true, false, false, 1, false, false, true, true);
    expect(first_masked_tile(ans_masked).index != ~0u, "an entropy-coded tile with a zero-row bitmap");
    v.valid("valid-rgb-ans-zero-row-mask-64x64", smooth_zero, ans_masked);
    const Bytes palette_masked = encode(stripes, 16, 8, false, true, false, false, 1, false, false, true, true);
    v.valid("valid-rgb-palette-zero-row-mask-48x16", stripes, palette_masked);
    // Before version 10 the width byte's bit 7 makes a width above 24.
    v.mutate("zero-row-mask-in-v9", rice_masked, errc::corrupt_tile, [](Bytes& b) { b[4] = 9; });
    expect(m.first_unused_bit < 8, "a bitmap with unused bits (8-row tiles: 7 rows marked)");
    v.mutate("zero-row-mask-bit-past-rows", rice_masked, errc::corrupt_tile,
             [&](Bytes& b) { b[m.last_mask_byte] |= std::uint8_t(1u << m.first_unused_bit); });
  }
  {
    // Bilevel planes (version 11, spec §6.8): two-colour glyphs in RGB, with
    // zero rows, bitmaps and compact tables, in 64 x 32 tiles; gray lines in
    // 64 x 16 tiles at effort 2 (which tries runs), one of whose bilevel
    // tiles takes runs.
    auto expect = [](bool ok, const char* what) { expect_or_exit(ok, "bilevel planes", what); };
    const Image glyphs = make_image(96, 40, 3, 14);
    const Bytes glyph_bytes = encode(glyphs, 64, 32, true, true, false, false, 1, false, false, true, true, true);
    const BilevelTile g = first_bilevel_tile(glyph_bytes, false);
    expect(glyph_bytes[4] == l3::core::kVersionBilevel && g.index != ~0u &&
               glyph_bytes.size() < encode(glyphs, 64, 32, true, true, false, false, 1, false, false, true, true).size(),
           "version 11, a bilevel tile without runs, smaller");
    v.valid("valid-rgb-bilevel-96x40", glyphs, glyph_bytes);
    const Image text = make_image(64, 24, 1, 17);
    const Bytes text_bytes = encode(text, 64, 16, true, true, false, false, 2, false, false, true, true, true);
    expect(first_bilevel_tile(text_bytes, true).index != ~0u, "a bilevel tile with runs");
    v.valid("valid-gray-bilevel-runs-64x24", text, text_bytes);
    // Bit 5 of the plane byte is reserved before version 11.
    v.mutate("bilevel-in-v10", glyph_bytes, errc::reserved_bits_set, [](Bytes& b) { b[4] = 10; });
    v.mutate("bilevel-with-corrections", glyph_bytes, errc::corrupt_tile,
             [&](Bytes& b) { b[g.plane_byte] |= l3::core::kPlaneCorrections; });
    v.mutate("bilevel-predictor-5", glyph_bytes, errc::corrupt_tile,
             [&](Bytes& b) { b[g.plane_byte] = std::uint8_t(l3::core::kPlaneBilevel | 5); });
    // NW (version 12) is not a bilevel plane's predictor.
    v.mutate("nw-predictor-bilevel", glyph_bytes, errc::corrupt_tile, [&](Bytes& b) {
      b[4] = l3::core::kVersionMirror;
      b[g.plane_byte] = std::uint8_t(l3::core::kPlaneBilevel | l3::core::kPredNW);
    });
    // A context the rows read, its level set to 0 (unused).
    expect(g.used_context >= 0, "a used bilevel context");
    v.mutate("bilevel-unused-context-read", glyph_bytes, errc::corrupt_tile, [&](Bytes& b) {
      const std::size_t bit = std::size_t(g.used_context) * l3::core::kBilevelLevelBits;
      std::uint32_t field = b[g.plane_byte + 1 + bit / 8] | std::uint32_t(b[g.plane_byte + 2 + bit / 8]) << 8;
      field &= ~(((1u << l3::core::kBilevelLevelBits) - 1) << (bit % 8));
      b[g.plane_byte + 1 + bit / 8] = std::uint8_t(field);
      b[g.plane_byte + 2 + bit / 8] = std::uint8_t(field >> 8);
    });
  }
  {
    // Bit planes and templates (version 13, spec §6.8): an ordered dither of
    // each channel (8 colours a tile, a channel a bit plane; its period picks
    // a template other than WW and NN), and gray lines of period 8 (two
    // colours, at effort 2: effort 1 keeps WW and NN for two colours).
    auto expect = [](bool ok, const char* what) { expect_or_exit(ok, "bit planes", what); };
    const Image dither = make_image(96, 40, 3, 20);
    const Bytes planes = encode(dither, 64, 32, true, true, false, false, 1, false, false, true, true, true, false, true);
    const BilevelTile d = first_bilevel_tile(planes, false, 5);
    expect(planes[4] == l3::core::kVersionBitPlanes && d.index != ~0u && d.colours == 8 &&
               (d.dy[1] != 2 || d.dx[0] != -2) &&
               planes.size() < encode(dither, 64, 32, true, true, false, false, 1, false, false, true, true, true).size(),
           "version 13, a bilevel tile of 8 colours with a template other than WW, NN, smaller");
    v.valid("valid-rgb-bitplanes-dither-96x40", dither, planes);
    const Image lines = make_image(64, 24, 1, 21);
    const Bytes lined = encode(lines, 64, 16, true, true, false, false, 2, false, false, true, true, true, false, true);
    const BilevelTile g = first_bilevel_tile(lined, false);
    expect(g.index != ~0u && (g.dy[1] != 2 || g.dx[0] != -2), "a two-colour bilevel tile with a template other than WW, NN");
    v.valid("valid-gray-bilevel-template-64x24", lines, lined);
    // Before version 13 a bilevel plane has two colours and no template: here
    // the plane byte's bit 6 (the template) is reserved.
    v.mutate("bitplanes-in-v12", planes, errc::reserved_bits_set, [](Bytes& b) { b[4] = 12; });
    v.mutate("template-right-of-pixel", planes, errc::corrupt_tile, [&](Bytes& b) { b[d.plane_byte + 4] = 1; });
    v.mutate("template-same-row-dx-0", planes, errc::corrupt_tile, [&](Bytes& b) { b[d.plane_byte + 2] = 0; });
    v.mutate("template-dy-32", planes, errc::corrupt_tile, [&](Bytes& b) { b[d.plane_byte + 3] = 32; });
    // The palette one colour short (its last colour's bytes removed): the
    // bits decode index 7 where n is 7.
    v.mutate("bilevel-index-past-palette", planes, errc::corrupt_tile, [&](Bytes& b) {
      const std::size_t t = tile_offset(b, d.index), last = d.plane_byte - d.stride;
      b[t + 1] = std::uint8_t(d.colours - 2);  // count_minus_1
      b.erase(b.begin() + std::ptrdiff_t(last), b.begin() + std::ptrdiff_t(d.plane_byte));
      set_tile_size(b, d.index, tile_size(b, d.index) - d.stride);
    });
  }
  {
    // Mirrored tiles and the NW predictor (version 12, spec §4.7, §6.1): a
    // ramp along x + y in 32 x 8 tiles (clipped ones on the right and at the
    // bottom), whose blue plane only NE predicts; planes along x - y in
    // tiles of kind 0 predicted by NW.
    auto expect = [](bool ok, const char* what) { expect_or_exit(ok, "diagonals", what); };
    auto kinds = [](const Bytes& b, std::uint8_t kind, bool clipped_only) {
      const l3::ImageInfo info = l3::read_info(b);
      int n = 0;
      for (std::uint32_t i = 0; i < tile_count(b); ++i) {
        const auto [w, h] = tile_dims(info, i);
        const bool clipped = std::uint32_t(w) < info.tile_width || std::uint32_t(h) < info.tile_height;
        n += (b[tile_offset(b, i)] & 3) == kind && (clipped || !clipped_only);
      }
      return n;
    };
    const Image diagonal = make_image(80, 20, 3, 18);
    const Bytes mirrored = encode(diagonal, 32, 8, true, true, false, false, 1, true, true, true, true, true, true);
    expect(mirrored[4] == l3::core::kVersionMirror && kinds(mirrored, l3::core::kTileMirrored, true) > 0 &&
               mirrored.size() < encode(diagonal, 32, 8, true, true, false, false, 1, true, true, true, true, true).size(),
           "version 12, mirrored tiles (clipped ones among them), smaller");
    v.valid("valid-rgb-mirrored-diagonal-80x20", diagonal, mirrored);
    const Image anti = make_image(48, 16, 3, 19);
    const Bytes nw = encode(anti, 16, 8, false, true, false, false, 1, false, false, true, true, false, true);
    std::size_t nw_plane = 0;  // a plane byte 6 in a tile of kind 0
    each_coded_tile(nw, [&](std::uint32_t i, std::size_t t, int w, int h, const l3::ImageInfo& info) {
      l3::core::CodedTileParams p;
      if (l3::core::parse_coded_tile(nw.data() + t, tile_size(nw, i), w, h, int(info.channels), int(info.version), p) !=
              l3::core::kOk || (nw[t] & l3::core::kModePalette) || p.plane[0].pred != l3::core::kPredNW ||
          (nw[t + 1] & 7) != l3::core::kPredNW)
        return false;
      nw_plane = t + 1;
      return true;
    });
    expect(nw[4] == l3::core::kVersionMirror && kinds(nw, l3::core::kTileMirrored, false) == 0 && nw_plane != 0,
           "version 12, a Rice tile of kind 0 whose first plane NW predicts");
    v.valid("valid-rgb-nw-predictor-48x16", anti, nw);
    // Before version 12 kind 3 and plane byte 6 are [corrupt_tile]; 7 always.
    v.mutate("mirrored-in-v11", base, errc::corrupt_tile, [](Bytes& b) {
      b[4] = 11;
      b[tile_offset(b, 0)] |= l3::core::kTileMirrored;
    });
    v.mutate("nw-predictor-in-v11", nw, errc::corrupt_tile, [](Bytes& b) { b[4] = 11; });
    v.mutate("plane-byte-7", nw, errc::corrupt_tile, [&](Bytes& b) { b[nw_plane] = std::uint8_t(b[nw_plane] | 7); });
    // Plane byte bit 6 (version 13) belongs to bilevel planes.
    v.mutate("template-without-bilevel", nw, errc::corrupt_tile, [&](Bytes& b) {
      b[4] = l3::core::kVersionBitPlanes;
      b[nw_plane] = std::uint8_t(b[nw_plane] | l3::core::kPlaneTemplate);
    });
  }
  {
    // Ramps (version 14, spec §6.9): planes that are rounded affine functions
    // of the position, in 32 x 8 tiles (clipped ones on the right and at the
    // bottom): most planes ramped, whose rows are then zero rows.
    auto expect = [](bool ok, const char* what) { expect_or_exit(ok, "ramps", what); };
    const Image ramp = make_image(80, 20, 3, 22);
    const Bytes ramped = encode(ramp, 32, 8, true, true, false, false, 1, true, true, true, true, true, true, true, true);
    const Bytes plain = encode(ramp, 32, 8, true, true, false, false, 1, true, true, true, true, true, true, true, false);
    std::size_t ramp_plane = 0;  // tile 0's first plane byte, a ramp's
    std::uint32_t ramped_planes = 0;
    each_coded_tile(ramped, [&](std::uint32_t i, std::size_t t, int w, int h, const l3::ImageInfo& info) {
      l3::core::CodedTileParams p;
      if (l3::core::parse_coded_tile(ramped.data() + t, tile_size(ramped, i), w, h, int(info.channels),
                                     int(info.version), p) != l3::core::kOk)
        return false;
      for (int k = 0; k < p.channels; ++k) ramped_planes += p.plane[k].ramp;
      if (i == 0 && p.plane[0].ramp && (ramped[t] & 3) == l3::core::kTileCoded) ramp_plane = t + 1;
      return false;
    });
    expect(ramped[4] == l3::core::kVersionRamps && ramp_plane != 0 && ramped_planes >= 2 * tile_count(ramped) &&
               ramped.size() < plain.size() && plain[4] < l3::core::kVersionRamps,
           "version 14, most planes ramped, smaller; version 13 or lower without");
    v.valid("valid-rgb-ramps-80x20", ramp, ramped);
    // The ramp's fields: after the plane byte and its corrections, if any.
    const std::size_t ramp_fields = ramp_plane + 1 + ((ramped[ramp_plane] & l3::core::kPlaneCorrections) ? 4 : 0);
    const Image gray_ramp = make_image(40, 12, 1, 22);
    v.valid("valid-gray-ramps-40x12",
            gray_ramp, encode(gray_ramp, 16, 4, false, true, false, false, 1, true, true, true, true, true, true, true, true));
    // Before version 14 plane byte bit 7 is reserved.
    v.mutate("ramp-in-v13", ramped, errc::reserved_bits_set, [](Bytes& b) { b[4] = l3::core::kVersionBitPlanes; });
    // The ramp's 12 bytes cut short: the tile ends inside them.
    v.mutate("ramp-truncated", ramped, errc::truncated, [&](Bytes& b) {
      const std::size_t t = tile_offset(b, 0);
      b.erase(b.begin() + std::ptrdiff_t(ramp_fields + 5), b.begin() + std::ptrdiff_t(tile_offset(b, 1)));
      set_tile_size(b, 0, std::uint32_t(ramp_fields + 5 - t));
    });
    // A ramp whose offset moves the samples past 255 (spec §5.2).
    v.mutate("ramp-pixel-out-of-range", ramped, errc::corrupt_tile,
             [&](Bytes& b) { b[ramp_fields + 3] = std::uint8_t(b[ramp_fields + 3] + 0x80); });
    // Ramps belong to coded planes of tiles without palette and copies.
    v.mutate("ramp-on-constant-plane", ramped, errc::corrupt_tile, [&](Bytes& b) {
      b[ramp_plane] = std::uint8_t(l3::core::kPlaneConstant | l3::core::kPlaneRamp);
    });
    v.mutate("ramp-in-palette-tile", few_bytes, errc::corrupt_tile, [&](Bytes& b) {
      b[4] = l3::core::kVersionRamps;
      const std::size_t t = tile_offset(b, 0);  // 5 colours of 3 bytes, none constant (as checked above)
      const std::size_t plane_byte = t + 3 + 5 * 3;
      b[plane_byte] = std::uint8_t(b[plane_byte] | l3::core::kPlaneRamp);
    });
  }
  {
    // Symbols (version 15, spec §3.4): three 6 x 8 glyphs of noise-like
    // pixels, none of them the background, each placed four times on a white
    // page: the page's tiles keep only the background, a dictionary holds the
    // glyphs once and twelve patches place them.
    auto expect = [](bool ok, const char* what) { expect_or_exit(ok, "symbols", what); };
    auto page = [](std::uint32_t c) {
      Image im{96, 30, c, Bytes(std::size_t(96) * 30 * c, 255)};
      Bytes glyphs(std::size_t(18) * 8 * c);
      std::uint32_t state = 23;
      for (std::uint8_t& g : glyphs) g = std::uint8_t((state = state * 1103515245u + 12345u) >> 24);
      for (int k = 0; k < 12; ++k) {
        const std::uint32_t g = std::uint32_t(k % 3), x = 3 + std::uint32_t(k % 6) * 15 + g,
                            y = 2 + std::uint32_t(k / 6) * 14 + std::uint32_t(k % 2) * 3;
        for (std::uint32_t r = 0; r < 8; ++r)
          for (std::uint32_t i = 0; i < 6 * c; ++i)
            im.px[(std::size_t(y + r) * 96 + x) * c + i] =
                std::uint8_t(glyphs[(std::size_t(r) * 18 + g * 6) * c + i] % 200);
      }
      return im;
    };
    auto symbols = [](const Image& im, bool on) {
      return encode(im, 32, 8, true, true, true, true, 1, true, true, true, true, true, true, true, true, on);
    };
    const Image gray_page = page(1), rgb_page = page(3);
    const Bytes gray_symbols = symbols(gray_page, true), rgb_symbols = symbols(rgb_page, true);
    const Bytes gray_plain = symbols(gray_page, false);
    const l3::ImageLayout lay = l3::parse_layout(gray_symbols);
    const l3::core::SymbolSection& sec = lay.symbols;
    expect(gray_symbols[4] == l3::core::kVersionSymbols && rgb_symbols[4] == l3::core::kVersionSymbols &&
               sec.symbol_count == 3 && sec.patch_count == 12 && gray_symbols.size() < gray_plain.size() &&
               gray_plain[4] < l3::core::kVersionSymbols,
           "version 15 with 3 symbols and 12 patches, smaller; version 14 or lower without");
    v.valid("valid-gray-symbols-96x30", gray_page, gray_symbols);
    v.valid("valid-rgb-symbols-96x30", rgb_page, rgb_symbols);
    // The dictionary's own checksum (spec §2) covers its bytes: resealing the
    // image's alone leaves a flipped dictionary byte detected.
    auto reseal_dictionary = [&](Bytes& b) {
      Bytes d(b.begin() + std::ptrdiff_t(sec.dict_offset), b.begin() + std::ptrdiff_t(sec.dict_offset + sec.dict_size));
      reseal(d);
      std::copy(d.begin(), d.end(), b.begin() + std::ptrdiff_t(sec.dict_offset));
    };
    // Header flags bit 0 is reserved before version 15.
    v.mutate("symbols-in-v14", gray_symbols, errc::reserved_bits_set, [](Bytes& b) { b[4] = l3::core::kVersionRamps; });
    v.mutate("symbols-truncated", gray_symbols, errc::truncated, [](Bytes& b) { b.pop_back(); });
    v.mutate("bytes-after-patches", gray_symbols, errc::corrupt_symbols, [](Bytes& b) { b.push_back(0); });
    v.mutate("no-patches", gray_symbols, errc::corrupt_symbols, [&](Bytes& b) {
      const std::size_t count = sec.patches_offset - 4;
      b.resize(sec.patches_offset);
      std::fill(b.begin() + std::ptrdiff_t(count), b.end(), 0);
    });
    // Symbol 0 at x = 251: its 6 columns pass the dictionary's 256.
    v.mutate("symbol-outside-dictionary", gray_symbols, errc::corrupt_symbols,
             [&](Bytes& b) { b[sec.table_offset] = 251; });
    // The first patch's dx (its third varint, one byte here) made -1: the
    // glyph's first column left of the image.
    v.mutate("patch-outside-image", gray_symbols, errc::corrupt_symbols, [&](Bytes& b) {
      const std::size_t dx = sec.patches_offset + 2;
      expect(b[sec.patches_offset] < 0x80 && b[dx - 1] < 0x80 && b[dx] < 0x80, "one-byte varints in patch 0");
      b[dx] = 1;  // zigzag(-1)
    });
    v.mutate("dictionary-channels", gray_symbols, errc::corrupt_symbols,
             [&](Bytes& b) { b[sec.dict_offset + 5] = 3; reseal_dictionary(b); });
    // A dictionary with symbols of its own (flag and version 15).
    v.mutate("nested-symbols", gray_symbols, errc::corrupt_symbols, [&](Bytes& b) {
      b[sec.dict_offset + 4] = l3::core::kVersionSymbols;
      b[sec.dict_offset + 7] |= l3::core::kHeaderFlagSymbols;
      reseal_dictionary(b);
    });
    v.mutate("dictionary-checksum", gray_symbols, errc::checksum_mismatch,
             [&](Bytes& b) { b[sec.dict_offset + sec.dict_size - 1] ^= 1; });
  }
  {
    // Tile copies (version 5, spec §3.3): a 56 x 20 image, periodic with the
    // 16 x 8 tile, is 4 x 3 tiles of which 4 are coded (16 x 8, the clipped
    // 8 x 8 column, 16 x 4 row and 8 x 4 corner); the other 8 copy them.
    const Image tiled = make_image(56, 20, 3, 13);
    const Bytes copies = encode(tiled, 16, 8, false, false, true);
    std::uint32_t copied = 0;
    for (std::uint32_t i = 0; i < tile_count(copies); ++i) copied += tile_size(copies, i) >> 31;
    if (copies[4] != l3::core::kVersionTileCopies || copied != 8) {
      std::fprintf(stderr, "tile copies: version 5 with 8 copies expected, got version %d with %u\n", copies[4], copied);
      std::exit(1);
    }
    v.valid("valid-rgb-tile-copies-56x20", tiled, copies);
    const std::uint32_t kCopy = l3::core::kTileCopyBit;
    v.mutate("tile-copy-forward", copies, errc::corrupt_tile_table, [&](Bytes& b) { set_tile_size(b, 1, kCopy | 2); });
    v.mutate("tile-copy-self", copies, errc::corrupt_tile_table, [&](Bytes& b) { set_tile_size(b, 1, kCopy | 1); });
    v.mutate("tile-copy-out-of-range", copies, errc::corrupt_tile_table,
             [&](Bytes& b) { set_tile_size(b, 1, kCopy | 0x7fffffffu); });
    v.mutate("tile-copy-of-copy", copies, errc::corrupt_tile_table, [&](Bytes& b) { set_tile_size(b, 2, kCopy | 1); });
    // Tile 7 (8 x 8, the clipped column) copying tile 0 (16 x 8).
    v.mutate("tile-copy-other-size", copies, errc::corrupt_tile_table, [&](Bytes& b) { set_tile_size(b, 7, kCopy | 0); });
    // In versions 1-4 an entry is a size: 2^31 and more bytes that the stream does not hold.
    v.mutate("tile-copy-in-v4", copies, errc::truncated, [](Bytes& b) { b[4] = 4; });
  }
  {
    // Pixel copies (version 6, spec §4.6, §6.6). Encoded: glyphs in palette
    // tiles (copies from the same row), and an image of more colours than a
    // palette holds whose rows repeat 3 rows down (copies from the rows above).
    auto copy_tiles = [](const Bytes& b, std::uint8_t extra) {
      std::uint32_t n = 0;
      for (std::uint32_t i = 0; i < tile_count(b); ++i) {
        const std::uint8_t mode = b[tile_offset(b, i)];
        n += (mode & 3) == l3::core::kTileCoded && (mode & l3::core::kModeCopies) && (mode & extra) == extra;
      }
      return n;
    };
    auto expect = [](bool ok, const char* what) {
      if (!ok) { std::fprintf(stderr, "pixel copies: %s expected\n", what); std::exit(1); }
    };
    const Image glyphs = make_image(128, 32, 1, 14), glyphs_rgb = make_image(128, 32, 3, 14);
    const Image periodic = make_image(128, 32, 3, 15);
    // (Effort 2: tiles this small pay for copies only when every form is tried.)
    const Bytes glyph_bytes = encode(glyphs, 64, 32, true, true, false, true, 2);
    const Bytes glyph_rgb_bytes = encode(glyphs_rgb, 64, 32, true, true, false, true, 2);
    const Bytes periodic_bytes = encode(periodic, 64, 32, true, true, false, true);
    expect(glyph_bytes[4] == l3::core::kVersionPixelCopies && copy_tiles(glyph_bytes, 0) > 0, "version 6, gray tiles with copies");
    expect(copy_tiles(glyph_rgb_bytes, 0) > 0, "RGB glyph tiles with copies");
    expect(copy_tiles(glyph_bytes, l3::core::kModePalette) + copy_tiles(glyph_rgb_bytes, l3::core::kModePalette) > 0,
           "palette tiles with copies");
    expect(copy_tiles(periodic_bytes, 0) > copy_tiles(periodic_bytes, l3::core::kModePalette), "a 3-plane tile with copies");
    v.valid("valid-gray-pixel-copies-128x32", glyphs, glyph_bytes);
    v.valid("valid-rgb-palette-pixel-copies-128x32", glyphs_rgb, glyph_rgb_bytes);
    v.valid("valid-rgb-pixel-copies-128x32", periodic, periodic_bytes);
    v.mutate("pixel-copies-in-v5", glyph_bytes, errc::reserved_bits_set, [](Bytes& b) { b[4] = 5; });
    v.mutate("pixel-copies-without-ans", glyph_bytes, errc::corrupt_tile, [&](Bytes& b) {
      for (std::uint32_t i = 0; i < tile_count(b); ++i)
        if (b[tile_offset(b, i)] & l3::core::kModeCopies) {
          b[tile_offset(b, i)] &= std::uint8_t(~l3::core::kModeAns);
          return;
        }
    });
    // Made by hand: one gray tile of 16 x H whose rows are zero rows (every
    // pixel 128, spec §4.3) but the last, whose every value comes from a
    // context of one token (frequency 4096: the rANS state never changes, the
    // row is its 4-byte state): at column 0 a copy of `m` + 2 pixels from
    // `up` rows up, `back` columns back. The plane's contexts are unused.
    auto hand_made = [&](std::uint32_t h, unsigned m, unsigned up, unsigned back) {
      Bytes b = encode(make_image(16, h, 1, 3), 16, 8);
      Bytes tile{std::uint8_t(l3::core::kTileCoded | l3::core::kModeAns | l3::core::kModeCopies), 0};
      std::uint64_t bits = 0;
      int n = 0;
      auto put = [&](unsigned value, int count) {
        bits |= std::uint64_t(value) << n;
        n += count;
        while (n >= 8) { tile.push_back(std::uint8_t(bits)); bits >>= 8; n -= 8; }
      };
      auto flush = [&] { if (n) { tile.push_back(std::uint8_t(bits)); bits = 0; n = 0; } };
      for (int g = 0; g < l3::core::kAnsGroups; ++g) put(0, 5);  // unused contexts
      flush();
      auto one_token = [&](unsigned value) {  // a context of one token: `value` (< 16), frequency 4096
        put(value + 1, 5);
        for (unsigned i = 0; i < value; ++i) put(0, 4);
        put(13, 4);
        put(0, 12);
      };
      one_token(m);
      one_token(up);
      one_token(back);
      one_token(back);
      flush();
      tile.push_back(0);  // row lengths: base 0, 0 bits each (all zero rows but the last)
      tile.push_back(0);
      tile.insert(tile.end(), {0, 1, 0, 0});  // the last row: its state, 65536
      const std::size_t t = tile_offset(b, 0);
      b.resize(t);
      b.insert(b.end(), tile.begin(), tile.end());
      set_tile_size(b, 0, std::uint32_t(tile.size()));
      b[4] = l3::core::kVersionPixelCopies;
      reseal(b);
      return b;
    };
    Image flat_gray{16, 2, 1, Bytes(32, 128)};
    v.valid("valid-gray-pixel-copy-row-16x2", flat_gray, hand_made(2, 14, 1, 0));  // row 1 copies row 0
    v.reject("pixel-copy-past-row-end", hand_made(2, 15, 1, 0), errc::corrupt_tile);
    v.reject("pixel-copy-above-tile", hand_made(2, 1, 2, 0), errc::corrupt_tile);
    v.reject("pixel-copy-left-of-tile", hand_made(2, 1, 0, 0), errc::corrupt_tile);
    v.reject("pixel-copy-5-rows-up", hand_made(6, 1, 5, 0), errc::corrupt_tile);
    v.reject("pixel-copy-in-v5", [&] { Bytes b = hand_made(2, 14, 1, 0); b[4] = 5; reseal(b); return b; }(),
             errc::reserved_bits_set);
  }
  {
    // Plane contexts (version 7, spec §6.2): planes that err together
    // (test_tile_pattern.hpp) in Rice-coded and entropy-coded tiles, gray +
    // alpha, RGB and opaque RGBA (its alpha a constant plane).
    auto shared_noise = [](std::uint32_t w, std::uint32_t h, std::uint32_t c, bool opaque_alpha) {
      return pattern_image(w, h, c, opaque_alpha, l3::test::fill_shared_noise, 5);
    };
    // Where plane p's byte lies in Rice-coded tile i (not a palette tile):
    // after the mode byte, the entries of planes 0 .. p - 1 (a byte and a k
    // table, or a constant plane's byte and value); 0 for other tiles.
    auto plane_byte_at = [](const Bytes& b, std::uint32_t i, int p) {
      const l3::ImageInfo info = l3::read_info(b);
      const std::size_t t = tile_offset(b, i);
      l3::core::CodedTileParams params;
      if ((b[t] & 3) != l3::core::kTileCoded || (b[t] & l3::core::kModePalette)) return std::size_t(0);
      if (l3::core::parse_coded_tile(&b[t], tile_size(b, i), int(std::min(info.tile_width, info.width)),
                                     int(std::min(info.tile_height, info.height)), int(info.channels),
                                     int(info.version), params) != l3::core::kOk || (b[t] & l3::core::kModeAns))
        return std::size_t(0);
      std::size_t at = t + 1;
      for (int q = 0; q < p; ++q) at += params.plane[q].constant ? 3 : 1 + l3::core::kBuckets / 2;
      return at;
    };
    auto expect = [](bool ok, const char* what) { expect_or_exit(ok, "plane contexts", what); };
    const Image graya = shared_noise(64, 32, 2, false), rgb_noise = shared_noise(64, 32, 3, false),
                rgba_opaque = shared_noise(64, 32, 4, true);
    // (Effort 2: tiles this small have at most a palette's colours, where
    // effort 1 does not look for plane contexts.)
    const Bytes graya_rice = encode(graya, 32, 16, false, false, false, false, 2, true);
    const Bytes rgb_rice = encode(rgb_noise, 32, 16, false, false, false, false, 2, true);
    const Bytes rgb_ans = encode(rgb_noise, 32, 16, true, false, false, false, 2, true);
    const Bytes rgba_ans = encode(rgba_opaque, 32, 16, true, false, false, false, 2, true);
    for (const Bytes* b : {&graya_rice, &rgb_rice, &rgb_ans, &rgba_ans})
      expect((*b)[4] == l3::core::kVersionPlaneContext, "version 7 streams");
    const Bytes rgba_rice = encode(rgba_opaque, 32, 16, false, false, false, false, 2, true);
    v.valid("valid-graya-plane-context-rice-64x32", graya, graya_rice);
    v.valid("valid-rgb-plane-context-rice-64x32", rgb_noise, rgb_rice);
    v.valid("valid-rgb-plane-context-ans-64x32", rgb_noise, rgb_ans);
    v.valid("valid-rgba-opaque-plane-context-ans-64x32", rgba_opaque, rgba_ans);
    // The first tile whose plane 1 has the context (the encoder's choice).
    std::uint32_t tile = 0;
    while (tile + 1 < tile_count(rgb_rice) &&
           !(plane_byte_at(rgb_rice, tile, 1) && (rgb_rice[plane_byte_at(rgb_rice, tile, 1)] & l3::core::kPlaneContextOfPrevious)))
      ++tile;
    const std::size_t plane1 = plane_byte_at(rgb_rice, tile, 1);
    expect(plane1 && (rgb_rice[plane1] & l3::core::kPlaneContextOfPrevious), "a Rice tile's plane 1 with the context");
    v.mutate("plane-context-in-v6", rgb_rice, errc::reserved_bits_set, [](Bytes& b) { b[4] = 6; });
    v.mutate("plane-context-on-plane-0", rgb_rice, errc::corrupt_tile, [&](Bytes& b) {
      b[plane_byte_at(b, tile, 0)] |= l3::core::kPlaneContextOfPrevious;
    });
    const std::size_t alpha = plane_byte_at(rgba_rice, 0, 3);
    expect(alpha && rgba_rice[alpha] == l3::core::kPlaneConstant, "tile 0's alpha a constant plane");
    v.mutate("plane-context-on-constant-plane", rgba_rice, errc::corrupt_tile, [&](Bytes& b) {
      b[alpha] |= l3::core::kPlaneContextOfPrevious;
    });
    v.mutate("plane-byte-bit-4", rgb_rice, errc::reserved_bits_set, [&](Bytes& b) { b[plane1] |= 0x10; });
  }
  {
    // Residual corrections (version 8, spec §6.7): stepped ramps whose
    // residuals fall on one side of the prediction (test_tile_pattern.hpp),
    // gray and RGB, Rice-coded and entropy-coded tiles, and opaque RGBA (its
    // alpha a constant plane).
    auto ramps = [](std::uint32_t w, std::uint32_t h, std::uint32_t c, bool opaque_alpha) {
      return pattern_image(w, h, c, opaque_alpha, l3::test::fill_stepped_ramps, 3);
    };
    auto expect = [](bool ok, const char* what) { expect_or_exit(ok, "corrections", what); };
    const Image ramp_gray = ramps(64, 32, 1, false), ramp_rgb = ramps(64, 32, 3, false), ramp_rgba = ramps(64, 32, 4, true);
    const Bytes gray_rice = encode(ramp_gray, 32, 16, false, false, false, false, 1, false, true);
    const Bytes rgb_rice = encode(ramp_rgb, 32, 16, false, false, false, false, 1, false, true);
    const Bytes rgb_ans = encode(ramp_rgb, 32, 16, true, false, false, false, 1, false, true);
    const Bytes rgba_rice = encode(ramp_rgba, 32, 16, false, false, false, false, 1, false, true);
    for (const Bytes* b : {&gray_rice, &rgb_rice, &rgb_ans, &rgba_rice})
      expect((*b)[4] == l3::core::kVersionCorrections, "version 8 streams");
    v.valid("valid-gray-corrections-rice-64x32", ramp_gray, gray_rice);
    v.valid("valid-rgb-corrections-rice-64x32", ramp_rgb, rgb_rice);
    v.valid("valid-rgb-corrections-ans-64x32", ramp_rgb, rgb_ans);
    v.valid("valid-rgba-opaque-corrections-rice-64x32", ramp_rgba, rgba_rice);
    // Tile 0's plane 0 of the RGB Rice stream: its byte, then the entries.
    const std::size_t plane0 = tile_offset(rgb_rice, 0) + 1;
    expect((rgb_rice[tile_offset(rgb_rice, 0)] & 3) == l3::core::kTileCoded &&
               (rgb_rice[plane0] & l3::core::kPlaneCorrections),
           "tile 0's plane 0 with corrections");
    v.mutate("corrections-in-v7", rgb_rice, errc::reserved_bits_set, [](Bytes& b) { b[4] = 7; });
    v.mutate("corrections-bias-3", rgb_rice, errc::corrupt_tile, [&](Bytes& b) { b[plane0 + 1] |= 3; });
    v.mutate("corrections-entry-bit-27", rgb_rice, errc::reserved_bits_set, [&](Bytes& b) { b[plane0 + 4] |= 0x08; });
    v.mutate("corrections-truncated", rgb_rice, errc::truncated, [&](Bytes& b) {
      // Tile 0 cut right after plane 0's byte and two bytes of its entries.
      const std::size_t t = tile_offset(b, 0), size = tile_size(b, 0), keep = plane0 + 3 - t;
      b.erase(b.begin() + std::ptrdiff_t(t + keep), b.begin() + std::ptrdiff_t(t + size));
      set_tile_size(b, 0, std::uint32_t(keep));
    });
    // Tile 0's alpha in the RGBA stream: a constant plane (after three
    // coded planes' entries), which may not take corrections.
    const std::size_t rgba0 = tile_offset(rgba_rice, 0);
    l3::core::CodedTileParams t;
    expect((rgba_rice[rgba0] & 3) == l3::core::kTileCoded && !(rgba_rice[rgba0] & l3::core::kModePalette) &&
               l3::core::parse_coded_tile(&rgba_rice[rgba0], tile_size(rgba_rice, 0), 32, 16, 4,
                                          l3::core::kVersionCorrections, t) == l3::core::kOk &&
               t.plane[3].constant,
           "tile 0 of RGBA coded, its alpha constant");
    std::size_t alpha = rgba0 + 1;
    for (int q = 0; q < 3; ++q) alpha += 1 + (t.plane[q].corrected ? 4 : 0) + l3::core::kBuckets / 2;
    expect(rgba_rice[alpha] == l3::core::kPlaneConstant, "the alpha plane's byte");
    v.mutate("corrections-on-constant-plane", rgba_rice, errc::corrupt_tile,
             [&](Bytes& b) { b[alpha] |= l3::core::kPlaneCorrections; });
    v.mutate("plane-byte-bit-5", rgb_rice, errc::reserved_bits_set, [&](Bytes& b) { b[plane0] |= 0x20; });
  }
  const Bytes raw_bytes = encode(noise);
  v.mutate("raw-tile-short", raw_bytes, errc::truncated, [&](Bytes& b) {
    b.pop_back();
    set_tile_size(b, 0, tile_size(b, 0) - 1);
  });
  std::printf("wrote vectors to %s\n", v.dir.c_str());
  return 0;
}
