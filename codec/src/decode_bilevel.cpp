// The CPU decoder of bilevel tiles (version 11, spec/codec.md §4.3, §6.8;
// version 13: bit planes and templates): palette tiles of up to 16 colours
// whose indices are binary symbols, bit by bit, in the contexts of their
// neighbours' and their template pixels' indices. The contexts read values, not codes, so the two
// passes of the other coded tiles (codes, then values: decode_codes.hpp,
// decode_rows.hpp) do not apply. Each pixel's symbol is on its row's chain
// (the previous pixel's value picks its context, the rANS state carries on),
// so the rows are decoded as the GPU's lanes decode them, in wavefront order
// (spec §8): at step s, pixel (r, s - r) of every row r, whose neighbours the
// steps before decoded. The rows' chains are independent within a step, and
// the core overlaps them (one row at a time took about twice as long).
#include <algorithm>
#include <cstring>

#include "decode_bilevel_lanes.hpp"
#include "decode_coded.hpp"

namespace l3::detail {

namespace {

constexpr int kMaxWidth = 1 << core::kMaxTileWidthLog2;
constexpr int kMaxRows = int(core::kMaxTileHeight);

// The tile's indices and their residual codes (the symbols as bits of one
// word, spec §6.8), row by row.
struct BilevelRows {
  std::uint8_t value[kMaxRows][kMaxWidth];
  std::uint8_t code[kMaxRows][kMaxWidth];
};

// Where the template pixels of every pixel (r, c) with r >= rows_from and
// c >= columns_from lie inside the tile, with N and NW: those pixels need no
// edge rule (bilevel_interior). (No template pixel lies right of its pixel.)
struct Interior {
  int rows_from, columns_from;
};
Interior interior_of(const core::CodedTileParams& t) {
  Interior in{1, 1};
  for (int i = 0; i < core::kTemplatePixels; ++i) {
    in.rows_from = t.template_dy[i] > in.rows_from ? t.template_dy[i] : in.rows_from;
    in.columns_from = -t.template_dx[i] > in.columns_from ? -t.template_dx[i] : in.columns_from;
  }
  return in;
}

// Pixel (r, c) through the shared core's decode_pixel, its neighbours after
// the edge rules of §6.3 (the first pixel: midpoint 0, codes 0) and its
// template pixels after §6.8's: the first row and column, the pixels whose
// template reaches out of the tile, and every pixel of a tile in run mode
// (whose run decisions read codes).
template <std::uint8_t kPred>
inline void bilevel_edge(const core::CodedTileParams& t, core::LaneState& s, BilevelRows& b, int r, int c) {
  int w = 0, n = 0, nw = 0, uw = 0, un = 0, unw = 0;
  if (r == 0) {
    if (c > 0) w = n = nw = b.value[0][c - 1], uw = un = unw = b.code[0][c - 1];
  } else {
    n = b.value[r - 1][c];
    un = b.code[r - 1][c];
    w = c > 0 ? b.value[r][c - 1] : n;
    nw = c > 0 ? b.value[r - 1][c - 1] : n;
    uw = c > 0 ? b.code[r][c - 1] : un;
    unw = c > 0 ? b.code[r - 1][c - 1] : un;
  }
  int tmpl[core::kTemplatePixels];
  core::template_indices(t, r, c, w, n, [&](int y, int x) { return b.value[y][x]; }, tmpl);
  int value, code;
  core::decode_pixel<1, kPred>(t, s, &w, &n, &nw, &uw, &un, &unw, c, &value, &code, tmpl[0], tmpl[1]);
  b.value[r][c] = std::uint8_t(value);
  b.code[r][c] = std::uint8_t(code);
}

// Pixel (r, c) of a tile without run mode whose neighbours and template
// pixels all lie inside the tile (Interior): the only pixels that read
// nothing are those of zero rows (spec §4.3). Codes are not kept: without
// runs nothing reads them. `v` is the tile's indices, row-major with stride
// kMaxWidth; `at_a`, `at_b` the template pixels' offsets in it; kBits, the
// bits per index, fixed at compile time (one table per bit, spec §6.8). An
// index past the palette is caught after the wavefront (indices_in_palette).
template <std::uint8_t kPred, int kBits>
inline void bilevel_interior(const core::CodedTileParams& t, core::LaneState& s, std::uint8_t* v, std::ptrdiff_t at_a,
                             std::ptrdiff_t at_b, int r, int c) {
  const std::ptrdiff_t i = std::ptrdiff_t(r) * kMaxWidth + c;
  int index, code;
  core::bilevel_pixel<kPred, kBits>(t, s, v[i - 1], v[i - kMaxWidth], v[i - kMaxWidth - 1], v[i + at_a], v[i + at_b],
                                    s.run_left != 0, index, code);
  v[i] = std::uint8_t(index);
}

template <std::uint8_t kPred, int kBits>
void bilevel_wavefront(const core::CodedTileParams& t, core::LaneState* lanes, BilevelRows& b, int rows, int cols) {
  const Interior in = interior_of(t);
  std::uint8_t* v = &b.value[0][0];
  const std::ptrdiff_t at_a = -std::ptrdiff_t(t.template_dy[0]) * kMaxWidth + t.template_dx[0];
  const std::ptrdiff_t at_b = -std::ptrdiff_t(t.template_dy[1]) * kMaxWidth + t.template_dx[1];
  for (int step = 0; step < rows + cols - 1; ++step) {
    const int first = step - cols + 1 > 0 ? step - cols + 1 : 0, last = step < rows - 1 ? step : rows - 1;
    int r = first;
    if (t.run_mode) {
      for (; r <= last; ++r) bilevel_edge<kPred>(t, lanes[r], b, r, step - r);
      continue;
    }
    // Rows above rows_from and columns left of columns_from (the rows below
    // in this step) take the edge rules; the rest does not.
    const int interior_first = std::max(first, in.rows_from), interior_last = std::min(last, step - in.columns_from);
    for (; r < interior_first && r <= last; ++r) bilevel_edge<kPred>(t, lanes[r], b, r, step - r);
    for (; r <= interior_last; ++r) bilevel_interior<kPred, kBits>(t, lanes[r], v, at_a, at_b, r, step - r);
    for (; r <= last; ++r) bilevel_edge<kPred>(t, lanes[r], b, r, step - r);
  }
}

// Every decoded index, rows [0, rows) and columns [0, cols), is below the
// palette's size (spec §6.8, [corrupt_tile]): the interior does not check
// them one by one (with 2^k colours every index is).
bool indices_in_palette(const core::CodedTileParams& t, const BilevelRows& b, int rows, int cols) {
  if (t.palette_size == 1u << t.bilevel_bits) return true;
  std::uint8_t top = 0;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) top = std::max(top, b.value[r][c]);
  return top < t.palette_size;
}

template <std::uint8_t kPred>
void bilevel_wavefront(const core::CodedTileParams& t, core::LaneState* lanes, BilevelRows& b, int rows, int cols) {
  switch (t.bilevel_bits) {
    case 1: bilevel_wavefront<kPred, 1>(t, lanes, b, rows, cols); break;
    case 2: bilevel_wavefront<kPred, 2>(t, lanes, b, rows, cols); break;
    case 3: bilevel_wavefront<kPred, 3>(t, lanes, b, rows, cols); break;
    default: bilevel_wavefront<kPred, 4>(t, lanes, b, rows, cols); break;
  }
}

// The output rectangle's pixels: each index's colour, `kChannels` bytes;
// index_at(r, c): the index of pixel (r, c).
template <int kChannels, class IndexAt>
void write_pixels(IndexAt&& index_at, const std::uint32_t* words, const TileOutput& o) {
  for (int r = o.y0; r < o.y1; ++r) {
    std::uint8_t* out = o.out + std::size_t(r - o.y0) * o.stride;
    for (int c = o.x0; c < o.x1; ++c, out += kChannels)
      std::memcpy(out, &words[index_at(r, c) & ((1 << core::kMaxBitPlanes) - 1)], kChannels);
  }
}

template <class IndexAt>
void write_pixels(IndexAt&& index_at, const std::uint8_t* tile, const core::CodedTileParams& t, const TileOutput& o) {
  std::uint32_t words[1 << core::kMaxBitPlanes] = {};
  for (std::uint32_t i = 0; i < t.palette_size; ++i) core::palette_word(tile, t, int(i), words[i]);
  switch (t.out_channels) {
    case 1: write_pixels<1>(index_at, words, o); break;
    case 2: write_pixels<2>(index_at, words, o); break;
    case 3: write_pixels<3>(index_at, words, o); break;
    default: write_pixels<4>(index_at, words, o); break;
  }
}

// Every row's end check (spec §7.3) after rows [0, rows) of the tile's
// columns [0, cols) are decoded: to its end when that is the whole tile.
int rows_end(const core::CodedTileParams& t, core::LaneState* lanes, int rows, int cols) {
  return rows_end_status(t, lanes, rows, rows == t.height && cols == t.width);
}

#if L3_HAVE_DECODE_LANES
// The wavefront across AVX-512 lanes (decode_bilevel_lanes.hpp): returns the largest index decoded.
template <std::uint8_t kPred>
int bilevel_lanes(const std::uint8_t* tile, const core::CodedTileParams& t, core::LaneState* lanes,
                  BilevelDiagonals& d, int rows, int cols) {
  switch (t.bilevel_bits) {
    case 1: return lanes_avx512::bilevel_lanes<kPred, 1>(tile, t, lanes, d, rows, cols);
    case 2: return lanes_avx512::bilevel_lanes<kPred, 2>(tile, t, lanes, d, rows, cols);
    case 3: return lanes_avx512::bilevel_lanes<kPred, 3>(tile, t, lanes, d, rows, cols);
    default: return lanes_avx512::bilevel_lanes<kPred, 4>(tile, t, lanes, d, rows, cols);
  }
}

int decode_bilevel_lanes(const std::uint8_t* tile, const core::CodedTileParams& t, core::LaneState* lanes,
                         const TileOutput& o) {
  const int rows = o.y1, cols = o.x1;
  thread_local BilevelDiagonals d;
  int top;
  switch (t.plane[0].pred) {
    case core::kPredW: top = bilevel_lanes<core::kPredW>(tile, t, lanes, d, rows, cols); break;
    case core::kPredN: top = bilevel_lanes<core::kPredN>(tile, t, lanes, d, rows, cols); break;
    default: top = bilevel_lanes<core::kPredPerPlane>(tile, t, lanes, d, rows, cols); break;
  }
  if (const int status = rows_end(t, lanes, rows, cols); status != core::kOk) return status;
  // An index past the palette (spec §6.8): corrupt_tile, as every lane's failure.
  if (std::uint32_t(top) >= t.palette_size) return core::kCorruptTile;
  write_pixels([&](int r, int c) { return d.at(r, c); }, tile, t, o);
  return core::kOk;
}
#endif

}  // namespace

int decode_bilevel_tile(const std::uint8_t* tile, const core::CodedTileParams& t, const TileOutput& o,
                        const std::uint8_t* read_end) {
  // Rows [0, y1) and columns [0, x1) are decoded (the crop rule, spec §9.2).
  const int rows = o.y1, cols = o.x1;
  core::LaneState lanes[kMaxRows];
  for (int r = 0; r < rows; ++r) core::lane_begin(lanes[r], tile, t, r);
#if L3_HAVE_DECODE_LANES
  if (bilevel_lanes_eligible(t, lanes, read_end, rows)) return decode_bilevel_lanes(tile, t, lanes, o);
#else
  (void)read_end;
#endif
  thread_local BilevelRows b;
  switch (t.plane[0].pred) {
    case core::kPredW: bilevel_wavefront<core::kPredW>(t, lanes, b, rows, cols); break;
    case core::kPredN: bilevel_wavefront<core::kPredN>(t, lanes, b, rows, cols); break;
    default: bilevel_wavefront<core::kPredPerPlane>(t, lanes, b, rows, cols); break;
  }
  if (const int status = rows_end(t, lanes, rows, cols); status != core::kOk) return status;
  // Every lane's failure is corrupt_tile, so the order of the checks does not matter.
  if (!indices_in_palette(t, b, rows, cols)) return core::kCorruptTile;
  write_pixels([&](int r, int c) { return b.value[r][c]; }, tile, t, o);
  return core::kOk;
}

}  // namespace l3::detail
