// CPU decoder: validates the stream once (header.cpp), then decodes tiles,
// in parallel when asked, each tile row by row through the shared core
// (l3/tile_core.hpp). The CUDA decoder runs the same core as a wavefront.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "header.hpp"
#include "l3/codec.hpp"
#include "l3/tile_core.hpp"

namespace l3 {
namespace {

using core::CodedTileParams;
using core::LaneState;
using core::Neighbours;

// Where decoded pixels of one tile go: the pixels of tile-local rectangle
// [x0, x1) x [y0, y1) are written at `out` (which addresses tile pixel (x0, y0)).
struct TileOutput {
  std::uint8_t* out;
  std::size_t stride;
  int x0, y0, x1, y1;
};

// The decode loop is shift- and count-leading-zeros-heavy: on x86-64 a second
// copy built for x86-64-v3 (BMI2 shlx/shrx, lzcnt) is picked at load time when
// the CPU has them. The attribute goes on each row loop instantiation: a callee
// of a cloned function that is not inlined is built for the baseline only.
// Not under sanitizers: the ifunc resolver runs before their runtimes start.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define L3_DECODE_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define L3_DECODE_CLONES
#endif

// Helpers of the row loops are forced inline so that they get the clone's target.
#define L3_DECODE_INLINE inline __attribute__((always_inline))

// Converts decoded plane values of columns [x0, x1) to pixels (spec §5),
// reporting values that no 8-bit pixel maps to.
template <int CH, std::uint8_t kTransform>
L3_DECODE_INLINE bool planes_to_pixels(const int (*vals)[CH], int x0, int x1, std::uint8_t* out) {
  std::uint32_t bits = 0;
  for (int c = x0; c < x1; ++c, out += CH) bits |= core::inverse_transform_bits(kTransform, CH, vals[c], out);
  return bits <= 255u;
}

template <int CH>
L3_DECODE_INLINE bool row_to_pixels(std::uint8_t transform, const int (*vals)[CH], int x0, int x1, std::uint8_t* out) {
  switch (transform) {
    case core::kTransformSubtractGreen: return planes_to_pixels<CH, core::kTransformSubtractGreen>(vals, x0, x1, out);
    case core::kTransformYCoCgR: return planes_to_pixels<CH, core::kTransformYCoCgR>(vals, x0, x1, out);
    default: return planes_to_pixels<CH, core::kTransformNone>(vals, x0, x1, out);
  }
}

// Decodes a coded tile row by row (spec §6-§7). Rows below y1 and columns
// right of x1 are never needed by the rows above them, so a crop stops early;
// a full decode also checks that every row stream is consumed exactly.
template <int CH, std::uint8_t kPred>
L3_DECODE_CLONES int decode_coded_rows(const std::uint8_t* tile, const CodedTileParams& params, const TileOutput& o) {
  // A local copy: the compiler then knows the row stores below cannot alias
  // the parameters, and keeps them in registers.
  const CodedTileParams t = params;
  // Two row buffers of plane values and residual codes; column 0 is a padding
  // column standing for x = -1, which holds the edge rule's copy of N so that
  // no pixel needs a branch (spec §6.3).
  constexpr int kCols = (1 << core::kMaxTileWidthLog2) + 1;
  int val[2][kCols][CH], code[2][kCols][CH];
  const bool full = o.x1 == t.width && o.y1 == t.height;
  for (int r = 0; r < o.y1; ++r) {
    int(*cur)[CH] = val[r & 1] + 1;
    int(*cur_u)[CH] = code[r & 1] + 1;
    int(*up)[CH] = val[(r + 1) & 1] + 1;
    int(*up_u)[CH] = code[(r + 1) & 1] + 1;
    LaneState s;
    core::lane_begin(s, tile, t, r);
    if (r == 0) {
      for (int c = 0; c < o.x1; ++c) {
        Neighbours nb;
        for (int p = 0; p < CH; ++p) {
          nb.w[p] = c ? cur[c - 1][p] : 0;
          nb.uw[p] = c ? cur_u[c - 1][p] : 0;
        }
        core::apply_edges(t, 0, c, nb);
        core::decode_pixel<CH>(t, s, nb, c, cur[c], cur_u[c]);
      }
    } else {
      for (int p = 0; p < CH; ++p) {
        cur[-1][p] = up[-1][p] = up[0][p];
        cur_u[-1][p] = up_u[-1][p] = up_u[0][p];
      }
      for (int c = 0; c < o.x1; ++c)
        core::decode_pixel<CH, kPred>(t, s, cur[c - 1], up[c], up[c - 1], cur_u[c - 1], up_u[c], up_u[c - 1], c,
                                      cur[c], cur_u[c]);
    }
    if (r >= o.y0 && !row_to_pixels<CH>(t.transform, cur, o.x0, o.x1, o.out + std::size_t(r - o.y0) * o.stride))
      return core::kCorruptTile;
    if (full) {
      const int status = core::lane_end(s, t.row_length[r]);
      if (status != core::kOk) return status;
    } else if (s.error || s.br.past > 8) {
      return core::kCorruptTile;  // a valid stream never reads further past its end
    }
  }
  return core::kOk;
}

// Tiles whose planes share a predictor (most of them: the encoder prefers
// that) take a path with the predictor fixed at compile time.
template <int CH>
int decode_coded_tile(const std::uint8_t* tile, const CodedTileParams& t, const TileOutput& o) {
  switch (core::shared_predictor(t)) {
    case core::kPredMED: return decode_coded_rows<CH, core::kPredMED>(tile, t, o);
    case core::kPredW: return decode_coded_rows<CH, core::kPredW>(tile, t, o);
    case core::kPredN: return decode_coded_rows<CH, core::kPredN>(tile, t, o);
    case core::kPredAvg: return decode_coded_rows<CH, core::kPredAvg>(tile, t, o);
    case core::kPredGrad: return decode_coded_rows<CH, core::kPredGrad>(tile, t, o);
    default: return decode_coded_rows<CH, core::kPredPerPlane>(tile, t, o);
  }
}

int decode_constant(const std::uint8_t* tile, std::uint32_t size, int channels, const TileOutput& o) {
  if (tile[0] != core::kTileConstant) return core::kReservedBits;
  if (size != 1u + channels) return size < 1u + channels ? core::kTruncated : core::kCorruptTile;
  for (int y = o.y0; y < o.y1; ++y) {
    std::uint8_t* row = o.out + std::size_t(y - o.y0) * o.stride;
    for (int x = o.x0; x < o.x1; ++x) std::memcpy(row + std::size_t(x - o.x0) * channels, tile + 1, channels);
  }
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

int decode_tile(const std::uint8_t* tile, std::uint32_t size, int w, int h, int channels, const TileOutput& o) {
  switch (tile[0] & 3) {
    case core::kTileConstant: return decode_constant(tile, size, channels, o);
    case core::kTileRaw: return decode_raw(tile, size, w, h, channels, o);
    case core::kTileCoded: break;
    default: return core::kCorruptTile;
  }
  CodedTileParams t;
  const int status = core::parse_coded_tile(tile, size, w, h, channels, t);
  if (status != core::kOk) return status;
  switch (channels) {
    case 1: return decode_coded_tile<1>(tile, t, o);
    case 2: return decode_coded_tile<2>(tile, t, o);
    case 3: return decode_coded_tile<3>(tile, t, o);
    default: return decode_coded_tile<4>(tile, t, o);
  }
}

unsigned resolve_threads(unsigned requested, std::uint32_t jobs) {
  unsigned n = requested ? requested : std::max(1u, std::thread::hardware_concurrency());
  return std::max(1u, std::min<unsigned>(n, jobs));
}

// Runs job(i) for i in [0, count) on `threads` threads; returns the first
// failing job's (index, status), or (count, kOk).
template <class Job>
std::pair<std::uint32_t, int> run_parallel(std::uint32_t count, unsigned threads, const Job& job) {
  std::atomic<std::uint32_t> next{0};
  std::atomic<std::uint32_t> first_bad{count};
  auto worker = [&] {
    for (std::uint32_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < count;) {
      if (i > first_bad.load(std::memory_order_relaxed)) break;
      const int st = job(i);
      if (st != core::kOk) {
        std::uint32_t cur = first_bad.load();
        while (i < cur && !first_bad.compare_exchange_weak(cur, i)) {}
        break;
      }
    }
  };
  if (threads <= 1) {
    worker();
  } else {
    std::vector<std::jthread> pool;
    for (unsigned id = 1; id < threads; ++id) pool.emplace_back(worker);
    worker();
  }
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

// Decodes the tiles overlapping `region` into `out` (region-relative).
void decode_into(const detail::ParsedImage& img, const Rect& region, const MutableImageView& out,
                 const DecodeOptions& options) {
  const ImageInfo& info = img.info;
  const std::size_t stride = out.stride ? out.stride : std::size_t(out.width) * out.channels;
  const std::uint32_t tx0 = region.x / info.tile_width, tx1 = (region.x + region.width - 1) / info.tile_width;
  const std::uint32_t ty0 = region.y / info.tile_height, ty1 = (region.y + region.height - 1) / info.tile_height;
  const std::uint32_t cols = tx1 - tx0 + 1, count = cols * (ty1 - ty0 + 1);
  auto job = [&](std::uint32_t j) -> int {
    const std::uint32_t i = (ty0 + j / cols) * info.tiles_x + tx0 + j % cols;
    const Rect tr = img.tile_rect(i);
    // The part of the region inside this tile, in tile-local coordinates.
    const std::uint32_t x0 = std::max(region.x, tr.x), x1 = std::min(region.x + region.width, tr.x + tr.width);
    const std::uint32_t y0 = std::max(region.y, tr.y), y1 = std::min(region.y + region.height, tr.y + tr.height);
    TileOutput o{out.data + std::size_t(y0 - region.y) * stride + std::size_t(x0 - region.x) * info.channels, stride,
                 int(x0 - tr.x), int(y0 - tr.y), int(x1 - tr.x), int(y1 - tr.y)};
    return decode_tile(img.bytes.data() + img.tile_offset[i], img.tile_size(i), int(tr.width), int(tr.height),
                       int(info.channels), o);
  };
  const auto [bad, status] = run_parallel(count, resolve_threads(options.threads, count), job);
  if (status != core::kOk) throw_tile_error((ty0 + bad / cols) * info.tiles_x + tx0 + bad % cols, status);
}

}  // namespace

ImageInfo read_info(std::span<const std::uint8_t> encoded, const Limits& limits) {
  return detail::parse_image(encoded, limits, false).info;
}

namespace {
detail::ParsedImage parse_for_decode(std::span<const std::uint8_t> encoded, const DecodeOptions& options) {
  detail::ParsedImage img = detail::parse_image(encoded, options.limits, true);
  if (options.verify_checksum) detail::verify_checksum(encoded);
  return img;
}
}  // namespace

void decode(std::span<const std::uint8_t> encoded, const MutableImageView& out, const DecodeOptions& options) {
  const detail::ParsedImage img = parse_for_decode(encoded, options);
  check_output(out, img.info.width, img.info.height, img.info.channels);
  decode_into(img, Rect{0, 0, img.info.width, img.info.height}, out, options);
}

std::vector<std::uint8_t> decode(std::span<const std::uint8_t> encoded, ImageInfo* info, const DecodeOptions& options) {
  const detail::ParsedImage img = parse_for_decode(encoded, options);
  std::vector<std::uint8_t> pixels(img.info.decoded_size());
  MutableImageView out{pixels.data(), img.info.width, img.info.height, img.info.channels, 0};
  decode_into(img, Rect{0, 0, img.info.width, img.info.height}, out, options);
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
  decode_into(img, region, out, options);
}

}  // namespace l3
