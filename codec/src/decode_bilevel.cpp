// The CPU decoder of bilevel tiles (version 11, spec/codec.md §4.3, §6.8):
// two-colour palette tiles whose indices are binary symbols in the contexts of
// their neighbours' indices. The contexts read values, not codes, so the two
// passes of the other coded tiles (codes, then values: decode_codes.hpp,
// decode_rows.hpp) do not apply. Each pixel's symbol is on its row's chain
// (the previous pixel's value picks its context, the rANS state carries on),
// so the rows are decoded as the GPU's lanes decode them, in wavefront order
// (spec §8): at step s, pixel (r, s - r) of every row r, whose neighbours the
// steps before decoded. The rows' chains are independent within a step, and
// the core overlaps them (one row at a time took about twice as long).
#include <cstring>

#include "decode_coded.hpp"

namespace l3::detail {

namespace {

constexpr int kMaxWidth = 1 << core::kMaxTileWidthLog2;
constexpr int kMaxRows = int(core::kMaxTileHeight);

// The tile's indices and their residual codes (the symbols, spec §6.8),
// row r at index r + 1: row 0 of `value` mirrors the tile's first row, the
// NN of its second (§6.8: NN is N when r < 2), so that the interior's loop
// (bilevel_interior) reads NN without a case.
struct BilevelRows {
  std::uint8_t value[kMaxRows + 1][kMaxWidth];
  std::uint8_t code[kMaxRows + 1][kMaxWidth];
};

// Pixel (r, c) through the shared core's decode_pixel, its neighbours after
// the edge rules of §6.3 and §6.8 (the first pixel: midpoint 0, codes 0):
// the first row and the first two columns, and every pixel of a tile in run
// mode (whose run decisions read codes).
template <std::uint8_t kPred>
inline void bilevel_pixel(const core::CodedTileParams& t, core::LaneState& s, BilevelRows& b, int r, int c) {
  const std::uint8_t* row = b.value[r + 1];
  const std::uint8_t* codes = b.code[r + 1];
  int w, n, nw, uw, un, unw, ww, nn;
  if (r == 0) {
    w = c > 0 ? row[c - 1] : 0;
    uw = c > 0 ? codes[c - 1] : 0;
    n = nw = nn = w;
    un = unw = uw;
  } else {
    n = b.value[r][c];
    un = b.code[r][c];
    w = c > 0 ? row[c - 1] : n;
    nw = c > 0 ? b.value[r][c - 1] : n;
    uw = c > 0 ? codes[c - 1] : un;
    unw = c > 0 ? b.code[r][c - 1] : un;
    nn = b.value[r - 1][c];  // row 0's mirror when r = 1
  }
  ww = c >= 2 ? row[c - 2] : w;
  const int x = core::bilevel_context(r, c, w, n, nw, ww, nn);
  int value, code;
  core::decode_pixel<1, kPred>(t, s, &w, &n, &nw, &uw, &un, &unw, c, &value, &code, x);
  b.value[r + 1][c] = std::uint8_t(value);
  b.code[r + 1][c] = std::uint8_t(code);
  if (r == 0) b.value[0][c] = std::uint8_t(value);
}

// Pixel (r, c), r >= 1 and c >= 2, of a tile without run mode: every
// neighbour inside the tile (NN of row 1 is the mirror row), and the only
// pixels that read nothing are those of zero rows (spec §4.3). Codes are
// not kept: without runs nothing reads them.
template <std::uint8_t kPred>
inline void bilevel_interior(const core::CodedTileParams& t, core::LaneState& s, BilevelRows& b, int r, int c) {
  const std::uint8_t* up = b.value[r];
  std::uint8_t* row = b.value[r + 1];
  const int w = row[c - 1], ww = row[c - 2], n = up[c], nw = up[c - 1], nn = b.value[r - 1][c];
  const int pred = core::predict_fixed<kPred>(t.plane[0].pred, w, n, nw, 0, 1);
  int bit = 0;
  if (s.run_left == 0) bit = int(core::ans_read_bilevel(s, t.bilevel_one[core::bilevel_pattern(w, n, nw, ww, nn)]));
  row[c] = std::uint8_t(pred ^ bit);
}

template <std::uint8_t kPred>
void bilevel_wavefront(const core::CodedTileParams& t, core::LaneState* lanes, BilevelRows& b, int rows, int cols) {
  for (int step = 0; step < rows + cols - 1; ++step) {
    const int first = step - cols + 1 > 0 ? step - cols + 1 : 0, last = step < rows - 1 ? step : rows - 1;
    int r = first;
    if (t.run_mode) {
      for (; r <= last; ++r) bilevel_pixel<kPred>(t, lanes[r], b, r, step - r);
      continue;
    }
    // Row 0 and the columns 0 and 1 take the edge rules; the rest does not.
    for (; r <= last && (r == 0 || step - r < 2); ++r) bilevel_pixel<kPred>(t, lanes[r], b, r, step - r);
    const int interior_last = step - 2 < last ? step - 2 : last;
    for (; r <= interior_last; ++r) bilevel_interior<kPred>(t, lanes[r], b, r, step - r);
    for (; r <= last; ++r) bilevel_pixel<kPred>(t, lanes[r], b, r, step - r);
  }
}

// The output rectangle's pixels: each index's colour, `kChannels` bytes.
template <int kChannels>
void write_pixels(const BilevelRows& b, const std::uint32_t* words, const TileOutput& o) {
  for (int r = o.y0; r < o.y1; ++r) {
    std::uint8_t* out = o.out + std::size_t(r - o.y0) * o.stride;
    for (int c = o.x0; c < o.x1; ++c, out += kChannels) std::memcpy(out, &words[b.value[r + 1][c] & 1], kChannels);
  }
}

}  // namespace

int decode_bilevel_tile(const std::uint8_t* tile, const core::CodedTileParams& t, const TileOutput& o) {
  // Rows [0, y1) and columns [0, x1) are decoded (the crop rule, spec §9.2);
  // every stream is checked to its end when that is the whole tile.
  const int rows = o.y1, cols = o.x1;
  const bool full = rows == t.height && cols == t.width;
  thread_local BilevelRows b;
  core::LaneState lanes[kMaxRows];
  for (int r = 0; r < rows; ++r) core::lane_begin(lanes[r], tile, t, r);
  switch (t.plane[0].pred) {
    case core::kPredW: bilevel_wavefront<core::kPredW>(t, lanes, b, rows, cols); break;
    case core::kPredN: bilevel_wavefront<core::kPredN>(t, lanes, b, rows, cols); break;
    default: bilevel_wavefront<core::kPredPerPlane>(t, lanes, b, rows, cols); break;
  }
  for (int r = 0; r < rows; ++r) {
    const int status = full ? core::lane_end(lanes[r], t.row_length[r]) : core::lane_end_partial(lanes[r], t.row_length[r]);
    if (status != core::kOk) return status;
  }
  std::uint32_t words[2];
  for (int i = 0; i < 2; ++i) core::palette_word(tile, t, i, words[i]);  // two colours (parse_coded_header)
  switch (t.out_channels) {
    case 1: write_pixels<1>(b, words, o); break;
    case 2: write_pixels<2>(b, words, o); break;
    case 3: write_pixels<3>(b, words, o); break;
    default: write_pixels<4>(b, words, o); break;
  }
  return core::kOk;
}

}  // namespace l3::detail
