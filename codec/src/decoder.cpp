// CPU decoder: validates the stream once (header.cpp), then decodes tiles,
// in parallel when asked, each tile row by row through the shared core
// (l3/codec/tile_core.hpp): its row loops are decode_codes.hpp (residual
// codes) and decode_rows.hpp (plane values, pixels, the tile loop), built in
// decode_coded_<N>.cpp, one file per coded-plane count (decode_coded.hpp). The CUDA
// decoder runs the same core as a wavefront.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "header.hpp"
#include "l3/codec/codec.hpp"
#include "l3/common/cpu_features.hpp"
#include "l3/common/parallel.hpp"
#include "l3/common/target_clones.hpp"
#include "l3/codec/tile_core.hpp"
#include "decode_coded.hpp"

namespace l3 {
namespace detail {

namespace {
struct UnusedSlots {
  std::uint8_t token[core::kAnsTotal];
  UnusedSlots() { std::memset(token, core::kAnsCumSize - 2, sizeof token); }
};
}  // namespace

DecodeLanes decode_lanes() {
  static const DecodeLanes lanes = avx512_enabled() ? DecodeLanes::avx512
                                   : avx2_enabled() ? DecodeLanes::avx2
                                                    : DecodeLanes::none;
  return lanes;
}

const AnsSlots& ans_slots(const core::CodedTileParams& t) {
  static const UnusedSlots unused;
  thread_local AnsSlots slots;
  for (int x = 0; x < core::kAnsAllContexts; ++x) {
    const std::uint16_t* cum = t.ans_cum[x];
    if (cum[core::kAnsCumSize - 1] == 0) {
      slots.row[x] = unused.token;
      continue;
    }
    for (int k = 0; k < core::kAnsTokens; ++k)
      std::memset(slots.token[x] + cum[k], k, std::size_t(cum[k + 1] - cum[k]));
    slots.row[x] = slots.token[x];
  }
  return slots;
}

}  // namespace detail

namespace {

using core::CodedTileParams;
using detail::decode_coded_tile;
using detail::TileOutput;

int decode_constant(const std::uint8_t* tile, std::uint32_t size, int channels, const TileOutput& o) {
  if (tile[0] != core::kTileConstant) return core::kReservedBits;
  if (size != 1u + channels) return size < 1u + channels ? core::kTruncated : core::kCorruptTile;
  if (o.x1 <= o.x0 || o.y1 <= o.y0) return core::kOk;
  // The first output row pixel by pixel, then copies of it.
  const std::size_t row_bytes = std::size_t(o.x1 - o.x0) * channels;
  std::uint8_t* first = o.out;
  for (std::size_t i = 0; i < row_bytes; i += std::size_t(channels)) std::memcpy(first + i, tile + 1, channels);
  for (int y = o.y0 + 1; y < o.y1; ++y) std::memcpy(o.out + std::size_t(y - o.y0) * o.stride, first, row_bytes);
  return core::kOk;
}

int decode_raw(const std::uint8_t* tile, std::uint32_t size, int w, int h, int channels, const TileOutput& o) {
  if (tile[0] != core::kTileRaw) return core::kReservedBits;
  const std::uint32_t need = 1u + std::uint32_t(w) * h * channels;
  if (size != need) return size < need ? core::kTruncated : core::kCorruptTile;
  for (int y = o.y0; y < o.y1; ++y)
    std::memcpy(o.out + std::size_t(y - o.y0) * o.stride, tile + 1 + (std::size_t(y) * w + o.x0) * channels,
                std::size_t(o.x1 - o.x0) * channels);
  return core::kOk;
}

// A coded tile (kind 0, or kind 3 decoded as kind 0) into `o`.
int decode_coded(const std::uint8_t* tile, std::uint32_t size, int w, int h, int channels, int version,
                 const TileOutput& o, const std::uint8_t* read_end) {
  CodedTileParams t;
  const int status = core::parse_coded_tile(tile, size, w, h, channels, version, t);
  if (status != core::kOk) return status;
  if (t.bilevel) return detail::decode_bilevel_tile(tile, t, o, read_end);
  switch (t.channels) {  // coded planes: 1 in a palette tile
    case 1: return decode_coded_tile<1>(tile, t, o, read_end);
    case 2: return decode_coded_tile<2>(tile, t, o, read_end);
    case 3: return decode_coded_tile<3>(tile, t, o, read_end);
    default: return decode_coded_tile<4>(tile, t, o, read_end);
  }
}

// Reverses the pixels of every output row of `o` in place (CH bytes a pixel).
template <int CH> void reverse_rows(const TileOutput& o) {
  const int n = o.x1 - o.x0;
  for (int y = o.y0; y < o.y1; ++y) {
    std::uint8_t* row = o.out + std::size_t(y - o.y0) * o.stride;
    for (int a = 0, b = n - 1; a < b; ++a, --b)
      for (int k = 0; k < CH; ++k) std::swap(row[a * CH + k], row[b * CH + k]);
  }
}

void reverse_rows(const TileOutput& o, int channels) {
  switch (channels) {
    case 1: return reverse_rows<1>(o);
    case 2: return reverse_rows<2>(o);
    case 3: return reverse_rows<3>(o);
    default: return reverse_rows<4>(o);
  }
}

// A mirrored tile (kind 3, version 12, spec §4.7): decoded as kind 0 over the
// mirrored rectangle, columns [W - x1, W - x0), into the same place; each
// output row then holds the tile's columns x1 - 1 down to x0, and is reversed.
int decode_mirrored(const std::uint8_t* tile, std::uint32_t size, int w, int h, int channels, int version,
                    const TileOutput& o, const std::uint8_t* read_end) {
  const TileOutput mirrored{o.out, o.stride, w - o.x1, o.y0, w - o.x0, o.y1};
  const int status = decode_coded(tile, size, w, h, channels, version, mirrored, read_end);
  if (status == core::kOk) reverse_rows(o, channels);
  return status;
}

// read_end: where the readable bytes around the tile end (the encoded
// stream's end): the row loops' refills may load up to there (refill_cpu).
int decode_tile(const std::uint8_t* tile, std::uint32_t size, int w, int h, int channels, int version,
                const TileOutput& o, const std::uint8_t* read_end) {
  switch (tile[0] & 3) {
    case core::kTileConstant: return decode_constant(tile, size, channels, o);
    case core::kTileRaw: return decode_raw(tile, size, w, h, channels, o);
    case core::kTileCoded: return decode_coded(tile, size, w, h, channels, version, o, read_end);
    default:  // kTileMirrored; before version 12 an invalid kind
      if (version < core::kVersionMirror) return core::kCorruptTile;
      return decode_mirrored(tile, size, w, h, channels, version, o, read_end);
  }
}

// Runs job(i) for i in [0, count) on `threads` threads (l3::parallel_for);
// returns the first failing job's (index, status), or (count, kOk). Jobs past
// a failure already found are skipped.
template <class Job>
std::pair<std::uint32_t, int> run_parallel(std::uint32_t count, unsigned threads, const Job& job) {
  std::atomic<std::uint32_t> first_bad{count};
  parallel_for(count, threads, [&](std::uint64_t index) {
    const auto i = static_cast<std::uint32_t>(index);
    if (i > first_bad.load(std::memory_order_relaxed)) return;
    if (job(i) == core::kOk) return;
    std::uint32_t cur = first_bad.load();
    while (i < cur && !first_bad.compare_exchange_weak(cur, i)) {}
  });
  const std::uint32_t bad = first_bad.load();
  if (bad == count) return {count, core::kOk};
  // Re-run the first failing job to report its own status deterministically.
  return {bad, job(bad)};
}

void check_output(const MutableImageView& out, std::uint32_t w, std::uint32_t h, std::uint32_t channels) {
  if (!out.data) throw_error(errc::invalid_argument, "output buffer is null");
  if (out.width != w || out.height != h || out.channels != channels)
    throw_error(errc::invalid_argument, "output is " + std::to_string(out.width) + "x" + std::to_string(out.height) +
                                            "x" + std::to_string(out.channels) + ", image is " + std::to_string(w) +
                                            "x" + std::to_string(h) + "x" + std::to_string(channels));
  if (out.stride && out.stride < std::size_t(w) * channels)
    throw_error(errc::invalid_argument, "output stride smaller than a row");
}

[[noreturn]] void throw_tile_error(std::uint32_t tile, int status) {
  throw_error(static_cast<errc>(status), "tile " + std::to_string(tile));
}

// The part of a region inside one tile: tile-local columns [x0, x1) and rows
// [y0, y1), and where its first pixel goes in the region's output.
struct TilePart {
  core::TileRect tile;
  std::uint32_t x0, y0, x1, y1;
  std::uint8_t* dst;
};

// Decodes the tiles overlapping `region` into `out` (region-relative). A tile
// copy whose source lies wholly inside the region takes its rows from the
// source's pixels, already in `out`, instead of decoding the same bytes again
// (spec §3.3: a tile's pixels depend only on its bytes and shape); chessboards,
// gradients and flat wallpaper areas are mostly copies. The sources are decoded
// first, then the copies: a copy of a tile that fails is never read, and the
// first failing tile is still the lowest (a source precedes its copies).
void decode_into(const detail::ParsedImage& img, const Rect& region, const MutableImageView& out,
                 const DecodeOptions& options) {
  const ImageInfo& info = img.info;
  const std::size_t stride = out.stride ? out.stride : std::size_t(out.width) * out.channels;
  const core::TileGrid::Span span = img.grid.overlapped({region.x, region.y, region.width, region.height});
  const std::uint32_t cols = span.cols, count = cols * span.rows;
  auto tile_at = [&](std::uint32_t j) { return img.grid.index(span.tx0 + j % cols, span.ty0 + j / cols); };
  auto part = [&](std::uint32_t i) {
    const core::TileRect tr = img.grid.tile(i);
    const std::uint32_t x0 = std::max(region.x, tr.x), x1 = std::min(region.x + region.width, tr.x + tr.width);
    const std::uint32_t y0 = std::max(region.y, tr.y), y1 = std::min(region.y + region.height, tr.y + tr.height);
    return TilePart{tr, x0 - tr.x, y0 - tr.y, x1 - tr.x, y1 - tr.y,
                    out.data + std::size_t(y0 - region.y) * stride + std::size_t(x0 - region.x) * info.channels};
  };
  auto decode_job = [&](std::uint32_t i) -> int {
    const TilePart p = part(i);
    TileOutput o{p.dst, stride, int(p.x0), int(p.y0), int(p.x1), int(p.y1)};
    const detail::ParsedImage::TileBytes tb = img.tile_bytes(i);  // a copy's are its source's (spec §3.3)
    return decode_tile(img.bytes.data() + tb.offset, tb.size, int(p.tile.width), int(p.tile.height),
                       int(info.channels), int(info.version), o, img.bytes.data() + img.bytes.size());
  };
  struct Copy {
    std::uint32_t tile, source;
  };
  auto copy_job = [&](Copy c) {
    const TilePart p = part(c.tile);
    const core::TileRect src = img.grid.tile(c.source);
    const std::size_t row_bytes = std::size_t(p.x1 - p.x0) * info.channels;
    const std::uint8_t* from = out.data + std::size_t(src.y + p.y0 - region.y) * stride +
                               std::size_t(src.x + p.x0 - region.x) * info.channels;
    for (std::uint32_t y = p.y0; y < p.y1; ++y, from += stride)
      std::memcpy(p.dst + std::size_t(y - p.y0) * stride, from, row_bytes);
    return core::kOk;
  };
  auto inside_region = [&](const core::TileRect& t) {
    return t.x >= region.x && t.y >= region.y && t.x + t.width <= region.x + region.width &&
           t.y + t.height <= region.y + region.height;
  };
  std::vector<std::uint32_t> decoded;  // tile indices, ascending
  std::vector<Copy> copied;
  decoded.reserve(count);
  for (std::uint32_t j = 0; j < count; ++j) {
    const std::uint32_t i = tile_at(j), source = img.bytes_tile(i);
    if (source != i && inside_region(img.grid.tile(source)))
      copied.push_back({i, source});
    else
      decoded.push_back(i);
  }
  const auto [bad, status] = run_parallel(std::uint32_t(decoded.size()), options.threads,
                                          [&](std::uint32_t k) { return decode_job(decoded[k]); });
  if (status != core::kOk) throw_tile_error(decoded[bad], status);
  run_parallel(std::uint32_t(copied.size()), options.threads, [&](std::uint32_t k) { return copy_job(copied[k]); });
}

// spec §3.4: after the tiles, the dictionary (decoded whole) and every patch,
// in order, clipped to `region` (whose pixels `out` holds).
void apply_symbols(const detail::ParsedImage& img, const Rect& region, const MutableImageView& out,
                   const DecodeOptions& options) {
  const core::SymbolSection& sec = img.symbols;
  const std::span<const std::uint8_t> dict_bytes = img.bytes.subspan(sec.dict_offset, sec.dict_size);
  std::vector<std::uint8_t> dict;
  try {
    // The image's tile offsets are no longer needed: the dictionary's replace them.
    const detail::ParsedImage d = detail::parse_image(dict_bytes, options.limits, true);
    dict.resize(d.info.decoded_size());
    const MutableImageView view{dict.data(), d.info.width, d.info.height, d.info.channels, 0};
    decode_into(d, Rect{0, 0, d.info.width, d.info.height}, view, options);
  } catch (const Error& e) {
    throw with_context(e, "symbol dictionary");
  }
  const int channels = int(img.info.channels);
  const std::size_t stride = out.stride ? out.stride : std::size_t(out.width) * out.channels;
  const std::uint8_t* table = img.bytes.data() + sec.table_offset;
  const std::uint64_t dict_stride = std::uint64_t{sec.dict_width} * channels;
  core::PatchReader reader{img.bytes.data() + sec.patches_offset, img.bytes.data() + img.bytes.size()};
  for (std::uint32_t k = 0; k < sec.patch_count; ++k) {
    core::Patch p{};
    reader.next(p);  // validated by parse_image
    const core::SymbolRect s = core::symbol_at(table, p.symbol);
    // core::copy_patch row by row: the CPU's output is interleaved, so each
    // row of the patch is one copy (a pixel at a time was half of a text
    // page's decode time).
    const core::PatchClip c = core::clip_patch(s, p, region.x, region.y, region.width, region.height);
    if (c.x0 >= c.x1 || c.y0 >= c.y1) continue;
    const std::size_t row_bytes = std::size_t(c.x1 - c.x0) * channels;
    for (std::int64_t y = c.y0; y < c.y1; ++y)
      std::memcpy(out.data + std::size_t(y - region.y) * stride + std::size_t(c.x0 - region.x) * channels,
                  core::patch_source(dict.data(), dict_stride, channels, s, p, c.x0, y), row_bytes);
  }
}

// The tiles, then the symbols (spec §3.4): a tile's error is reported before
// the dictionary's.
void decode_image(const detail::ParsedImage& img, const Rect& region, const MutableImageView& out,
                  const DecodeOptions& options) {
  decode_into(img, region, out, options);
  if (img.has_symbols()) apply_symbols(img, region, out, options);
}

}  // namespace

ImageInfo read_info(std::span<const std::uint8_t> encoded, const Limits& limits) {
  return detail::parse_image(encoded, limits, false).info;
}

namespace {
detail::ParsedImage parse_for_decode(std::span<const std::uint8_t> encoded, const DecodeOptions& options) {
  detail::ParsedImage img = detail::parse_image(encoded, options.limits, true);
  if (options.verify_checksum) detail::verify_checksums(encoded, img.symbols);
  return img;
}
}  // namespace

void decode(std::span<const std::uint8_t> encoded, const MutableImageView& out, const DecodeOptions& options) {
  const detail::ParsedImage img = parse_for_decode(encoded, options);
  check_output(out, img.info.width, img.info.height, img.info.channels);
  decode_image(img, Rect{0, 0, img.info.width, img.info.height}, out, options);
}

std::vector<std::uint8_t> decode(std::span<const std::uint8_t> encoded, ImageInfo* info, const DecodeOptions& options) {
  const detail::ParsedImage img = parse_for_decode(encoded, options);
  std::vector<std::uint8_t> pixels(img.info.decoded_size());
  MutableImageView out{pixels.data(), img.info.width, img.info.height, img.info.channels, 0};
  decode_image(img, Rect{0, 0, img.info.width, img.info.height}, out, options);
  if (info) *info = img.info;
  return pixels;
}

void decode_region(std::span<const std::uint8_t> encoded, const Rect& region, const MutableImageView& out,
                   const DecodeOptions& options) {
  const detail::ParsedImage img = parse_for_decode(encoded, options);
  if (region.width == 0 || region.height == 0 || region.x >= img.info.width || region.y >= img.info.height ||
      region.width > img.info.width - region.x || region.height > img.info.height - region.y)
    throw_error(errc::out_of_range, "region outside the image");
  check_output(out, region.width, region.height, img.info.channels);
  decode_image(img, region, out, options);
}

const char* cpu_decode_path() {
  switch (detail::decode_lanes()) {
    case detail::DecodeLanes::avx512: return "avx512";
    case detail::DecodeLanes::avx2: return "avx2";
    default: return "scalar";
  }
}

}  // namespace l3
