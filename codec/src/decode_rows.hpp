// The CPU decoder's row loops, part 2 (decoder.cpp, spec/codec.md §5-§6):
// pass 2, plane values from codes (prediction, rows in lockstep), pixels from
// plane values (inverse transforms, palettes), and the loop over a coded
// tile's row groups that runs both passes. Included by the
// decode_coded_<N>.cpp files (see decode_codes.hpp, decode_coded.hpp).
#pragma once

#include <cstdint>
#include <cstring>

#include "decode_lanes.hpp"
#include "decode_codes.hpp"

namespace l3 {
namespace {  // internal linkage: see decode_codes.hpp

// Converts decoded plane values of columns [x0, x1) to pixels (spec §5),
// reporting values that no 8-bit pixel maps to. kLanes (rows from the
// AVX-512 lanes, 3 or 4 planes): 16 columns at a time first
// (lanes_planes_to_pixels), the rest here.
template <int CH, std::uint8_t kTransform, bool kLanes>
L3_DECODE_INLINE bool planes_to_pixels(const V4* vals, int x0, int x1, std::uint8_t* out) {
  std::uint32_t bits = 0;
  int c = x0;
  if constexpr (kLanes) {
    c = lanes_planes_to_pixels<CH, kTransform>(vals, x0, x1, out, bits);
    out += std::size_t(c - x0) * CH;
  }
  for (; c < x1; ++c, out += CH) {
    int v[CH];
    for (int p = 0; p < CH; ++p) v[p] = vals[c][p];
    bits |= core::inverse_transform_bits(kTransform, CH, v, out);
  }
  return bits <= 255u;
}

template <int CH, bool kLanes = false>
L3_DECODE_INLINE bool row_to_pixels(std::uint8_t transform, const V4* vals, int x0, int x1, std::uint8_t* out) {
  switch (transform) {
    case core::kTransformSubtractGreen:
      return planes_to_pixels<CH, core::kTransformSubtractGreen, kLanes>(vals, x0, x1, out);
    case core::kTransformYCoCgR: return planes_to_pixels<CH, core::kTransformYCoCgR, kLanes>(vals, x0, x1, out);
    default: return planes_to_pixels<CH, core::kTransformNone, kLanes>(vals, x0, x1, out);
  }
}

// Palette tiles (spec §4.4): indices of columns [x0, x1) to colours, through
// the palette as words (`words`, filled once per tile); false when a value is
// not an index of the palette.
template <int N>
L3_DECODE_INLINE bool indices_to_pixels(const std::uint32_t* words, std::uint32_t size, const V4* vals, int x0, int x1,
                                        std::uint8_t* out) {
  std::uint32_t bad = 0;
  // 3 channels: a 4-byte store but for the last pixel (its 4th byte is the
  // next pixel's first, written next): one store instead of two.
  constexpr int kStore = N == 3 ? 4 : N;
  const int last = x1 - (N == 3 ? 1 : 0);
  int c = x0;
  for (; c < last; ++c, out += N) {
    const std::uint32_t i = std::uint32_t(vals[c][0]);  // negative values wrap to large ones
    bad |= i >= size;
    const std::uint32_t w = words[i < size ? i : 0];
    std::memcpy(out, &w, kStore);  // little-endian: channel k is byte k
  }
  for (; c < x1; ++c, out += N) {
    const std::uint32_t i = std::uint32_t(vals[c][0]);
    bad |= i >= size;
    const std::uint32_t w = words[i < size ? i : 0];
    std::memcpy(out, &w, N);
  }
  return bad == 0;
}
L3_DECODE_INLINE bool indices_to_pixels(const std::uint32_t* words, const CodedTileParams& t, const V4* vals, int x0,
                                        int x1, std::uint8_t* out) {
  switch (t.out_channels) {
    case 1: return indices_to_pixels<1>(words, t.palette_size, vals, x0, x1, out);
    case 2: return indices_to_pixels<2>(words, t.palette_size, vals, x0, x1, out);
    case 3: return indices_to_pixels<3>(words, t.palette_size, vals, x0, x1, out);
    default: return indices_to_pixels<4>(words, t.palette_size, vals, x0, x1, out);
  }
}

// A pixel's codes as a vector (lanes >= CH: don't care).
template <int CH>
L3_DECODE_INLINE V4 load_codes(const int* u) {
  V4 v = {0, 0, 0, 0};
  // 3 planes: stride 4 (kCodeStride), so 16 bytes are the pixel's own.
  __builtin_memcpy(&v, u, sizeof(int) * (CH == 3 ? 4 : CH));
  return v;
}

// Per-plane constants of the prediction step, as vectors.
struct PredictConsts {
  V4 lo, hi, mid;
  // kPredPerPlane: all lanes set where the plane uses that predictor.
  V4 is_w, is_n, is_avg, is_grad;
  V4 is_nw;  // NW (version 12): also in is_n, which then selects NW's value
  // Corrected passes (spec §6.7): per gradient class g, bit 3g of flip_bits
  // says whether the residual's sign flips, bits 3g..3g+1 of add_bits hold
  // the flip (1 or 0) plus the bias plus 1; 0 in a plane without corrections.
  V4 flip_bits, add_bits;
};

// The value pass of tiles with residual corrections (version 8, spec §6.7)
// is instantiated with kPred = a predictor (fixed or kPredPerPlane) plus
// kCorrected: the corrections' chain through W is short, the per-plane
// predictor's selects are not (fixed predictors with corrections decode the
// bilevel text page in about two thirds of the time).
inline constexpr std::uint8_t kCorrected = 0x40;
inline constexpr std::uint8_t kPredPerPlaneCorrected = 0x7f;
constexpr bool corrected_pass(std::uint8_t kPred) {
  return kPred == kPredPerPlaneCorrected || (kPred & 0xc0) == kCorrected;
}
constexpr std::uint8_t predictor_of(std::uint8_t kPred) {
  if (kPred == kPredPerPlaneCorrected) return core::kPredPerPlane;
  return corrected_pass(kPred) ? std::uint8_t(kPred & ~kCorrected) : kPred;
}

template <int CH>
L3_DECODE_INLINE PredictConsts predict_consts(const CodedTileParams& t) {
  PredictConsts k{};
  for (int p = 0; p < CH; ++p) {
    const core::PlaneParams& pp = t.plane[p];
    k.lo[p] = pp.range.lo;
    k.hi[p] = pp.range.hi;
    k.mid[p] = pp.range.mid;
    k.is_w[p] = pp.pred == core::kPredW ? -1 : 0;
    k.is_n[p] = pp.pred == core::kPredN || pp.pred == core::kPredNW ? -1 : 0;
    k.is_avg[p] = pp.pred == core::kPredAvg ? -1 : 0;
    k.is_grad[p] = pp.pred == core::kPredGrad ? -1 : 0;
    k.is_nw[p] = pp.pred == core::kPredNW ? -1 : 0;
    std::uint32_t flips = 0, adds = 0;
    for (int g = 0; g < core::kCorrectionClasses; ++g) {
      const std::uint32_t entry = pp.corrected ? core::correction_entry(pp, g) : 0u;
      const int flip = core::correction_flip(entry);
      flips |= std::uint32_t(flip) << (core::kCorrectionBits * g);
      adds |= std::uint32_t(core::correction_bias(entry) + flip + 1) << (core::kCorrectionBits * g);
    }
    k.flip_bits[p] = int(flips);
    k.add_bits[p] = int(adds);
  }
  return k;
}

// A pixel's residuals from its codes (spec §7.2), in a corrected pass
// corrected by their gradient classes: core::correct_residual on all planes
// at once, as (e ^ -flip) + (flip + bias) (a plane without corrections has
// flip 0 and bias 0). W is the previous pixel's value, so only the sign of
// NW - W is on the row's dependency chain: compares, masks and two shifts.
template <std::uint8_t kPred>
L3_DECODE_INLINE V4 residuals_v(const PredictConsts& k, V4 u, V4 w, V4 n, V4 nw) {
  const V4 e = (u >> 1) ^ -(u & 1);
  if constexpr (!corrected_pass(kPred)) {
    return e;
  } else {
    // Class g's entry starts at bit 3 g = 9 sign(N - NW) + 3 sign(NW - W) +
    // 12; vector comparisons are -1 where true.
    const V4 up = ((n > nw) & 9) - ((n < nw) & 9) + 12;
    const V4 at = up + ((nw > w) & 3) - ((nw < w) & 3);
    const V4 flip = (k.flip_bits >> at) & 1, add = ((k.add_bits >> at) & 3) - 1;
    return (e ^ -flip) + add;
  }
}

// core::predict / predict_fixed on all planes at once.
template <std::uint8_t kPredOrCorrected>
L3_DECODE_INLINE V4 predict_v(const PredictConsts& k, V4 w, V4 n, V4 nw) {
  constexpr std::uint8_t kPred = predictor_of(kPredOrCorrected);
  // W is the previous pixel's result, so each row is one dependency chain
  // through W: the gradient is written W + (N - NW) to take N - NW off it.
  if constexpr (kPred == core::kPredW) return w;
  else if constexpr (kPred == core::kPredN) return n;
  else if constexpr (kPred == core::kPredAvg) return (w + n) >> 1;
  else if constexpr (kPred == core::kPredGrad) return vmin(k.hi, vmax(k.lo, w + (n - nw)));
  else if constexpr (kPred == core::kPredNW) return nw;
  else {
    const V4 grad = w + (n - nw);
    const V4 med = vmin(vmax(w, n), vmax(vmin(w, n), grad));
    if constexpr (kPred == core::kPredMED) return med;
    // Per-plane choice as a shallow tree of selects (also for the chain).
    const V4 avg_or_grad = k.is_avg ? (w + n) >> 1 : vmin(k.hi, vmax(k.lo, grad));
    const V4 not_w_n = (k.is_avg | k.is_grad) ? avg_or_grad : med;
    // N and NW (version 12) share a select: NW's comes off the chain
    // through W (both are the row above's).
    const V4 n_or_nw = k.is_nw ? nw : n;
    return k.is_w ? w : (k.is_n ? n_or_nw : not_w_n);
  }
}

// Pass 2: plane values from codes (spec §6.1): value = prediction +
// unzigzag(code). Each row is one dependency chain through W (a few vector
// operations per pixel), so the rows of a group go in lockstep, row i one
// column behind row i - 1 (whose values at c - 1 and c it needs): the core
// overlaps their chains.
//
// Row state: W's values. Row I of the group at step s reconstructs column
// s - I from codes[I]; vals[I] holds the values of the row above it (with
// column -1 at index -1), vals[I + 1] receives its own. On the tile's first
// row N = NW = W.
template <int CH, std::uint8_t kPred, bool kFirstRow>
L3_DECODE_INLINE void reconstruct_step(const PredictConsts& k, const CodeRow<CH>& codes, const V4* up, V4* cur, V4& w,
                                       int c) {
  const V4 n = kFirstRow ? w : up[c];
  const V4 nw = kFirstRow ? w : up[c - 1];
  const V4 u = load_codes<CH>(codes.code[c + 1]);
  // No range check: see core::decode_pixel.
  w = predict_v<kPred>(k, w, n, nw) + residuals_v<kPred>(k, u, w, n, nw);
  cur[c] = w;
}

// Column 0 (W copies N; midpoints at the tile's first pixel), then column -1
// of the row for the row below.
template <int CH, std::uint8_t kPred, bool kFirstRow>
L3_DECODE_INLINE void reconstruct_first(const PredictConsts& k, const CodeRow<CH>& codes, const V4* up, V4* cur, V4& w) {
  w = kFirstRow ? k.mid : up[0];
  reconstruct_step<CH, kPred, kFirstRow>(k, codes, up, cur, w, 0);
  cur[-1] = cur[0];
}

template <int CH, std::uint8_t kPred, bool kFirstGroup, int I>
L3_DECODE_INLINE void reconstruct_step_checked(const PredictConsts& k, CodeRow<CH>* const* codes, V4* const* vals,
                                               V4* w, int s, int x1) {
  constexpr bool kFirstRow = kFirstGroup && I == 0;
  const int c = s - I;
  if (c == 0) reconstruct_first<CH, kPred, kFirstRow>(k, *codes[I], vals[I], vals[I + 1], w[I]);
  else if (c > 0 && c < x1) reconstruct_step<CH, kPred, kFirstRow>(k, *codes[I], vals[I], vals[I + 1], w[I], c);
}

template <int CH, std::uint8_t kPred, bool kFirstGroup, int... I>
L3_DECODE_INLINE void reconstruct_steps_checked(std::integer_sequence<int, I...>, const PredictConsts& k,
                                                CodeRow<CH>* const* codes, V4* const* vals, V4* w, int s, int x1) {
  (reconstruct_step_checked<CH, kPred, kFirstGroup, I>(k, codes, vals, w, s, x1), ...);
}

// Steps where every row has a column in [1, x1): no checks.
template <int CH, std::uint8_t kPred, bool kFirstGroup, int... I>
L3_DECODE_INLINE void reconstruct_steps(std::integer_sequence<int, I...>, const PredictConsts& k,
                                        CodeRow<CH>* const* codes, V4* const* vals, V4* w, int s) {
  (reconstruct_step<CH, kPred, kFirstGroup && I == 0>(k, *codes[I], vals[I], vals[I + 1], w[I], s - I), ...);
}

// Pass 2 for a group of G rows, columns [0, x1).
template <int CH, std::uint8_t kPred, int G, bool kFirstGroup>
L3_DECODE_INLINE void reconstruct_group(const PredictConsts& k, CodeRow<CH>* const* codes, V4* const* vals, int x1) {
  constexpr auto kRows = std::make_integer_sequence<int, G>{};
  V4 w[G] = {};  // set at each row's column 0
  int s = 0;
  for (; s < G; ++s) reconstruct_steps_checked<CH, kPred, kFirstGroup>(kRows, k, codes, vals, w, s, x1);
  for (; s < x1; ++s) reconstruct_steps<CH, kPred, kFirstGroup>(kRows, k, codes, vals, w, s);
  for (; s < x1 + G - 1; ++s) reconstruct_steps_checked<CH, kPred, kFirstGroup>(kRows, k, codes, vals, w, s, x1);
}

template <int CH, std::uint8_t kPred, int G>
L3_DECODE_INLINE void reconstruct_group(const PredictConsts& k, bool first, CodeRow<CH>* const* codes, V4* const* vals,
                                        int x1) {
  if (first) reconstruct_group<CH, kPred, G, true>(k, codes, vals, x1);
  else reconstruct_group<CH, kPred, G, false>(k, codes, vals, x1);
}

// A row's pixels, columns [x0, x1), from its plane values: through the
// palette (`palette`: its colours as words) in a palette tile, else the
// inverse transform. False when a value maps to no pixel. kLanes: the row
// comes from the AVX-512 lanes (planes_to_pixels).
// In a tile with ramps (version 14, spec §6.9) the values of row r get
// their ramps first (ramped_row), a copy: the prediction of the next row
// reads the values without them.
// The ramps are core::ramp_at's without its 64-bit products, every plane at
// once: with a the numerator of §6.9 at (r, x0) and dx = dq 2^24 + dr (0 <=
// dr < 2^24), the ramp at column x0 + i is floor(a / 2^24) + dq i + ((a mod
// 2^24 + dr i) >> 24), whose last sum stays below 2^32 for i < 256 (a
// tile's width at most): two additions a pixel instead of a product a
// sample (the gradient image's decode was 63% ramps).
template <int CH>
__attribute__((noinline)) const V4* ramped_row(const CodedTileParams& t, const V4* vals, int r, int x0, int x1, V4* ramped) {
  typedef unsigned U4 __attribute__((vector_size(16)));
  static_assert(core::kMaxTileWidthLog2 <= 8);
  V4 q = {}, dq = {};
  U4 rem = {}, dr = {};
  for (int p = 0; p < CH; ++p) {
    const core::PlaneParams& pp = t.plane[p];
    if (!pp.ramp) continue;
    const std::int64_t a = std::int64_t(pp.ramp_offset) * (std::int64_t(1) << core::kRampOffsetShift) +
                           std::int64_t(pp.ramp_dx) * x0 + std::int64_t(pp.ramp_dy) * r;
    q[p] = int(a >> core::kRampFractionBits);
    rem[p] = unsigned(a & ((1 << core::kRampFractionBits) - 1));
    dq[p] = pp.ramp_dx >> core::kRampFractionBits;
    dr[p] = unsigned(pp.ramp_dx) & ((1u << core::kRampFractionBits) - 1);
  }
  for (int c = x0; c < x1; ++c) {
    ramped[c] = vals[c] + q + V4(rem >> core::kRampFractionBits);
    q += dq;
    rem += dr;
  }
  return ramped;
}

template <int CH, bool kLanes = false>
L3_DECODE_INLINE bool row_pixels(const CodedTileParams& t, const std::uint32_t* palette, const V4* vals, int r, int x0,
                                 int x1, std::uint8_t* out) {
  if constexpr (CH == 1)
    if (t.palette_size) return indices_to_pixels(palette, t, vals, x0, x1, out);
  if (t.ramps) {
    V4 ramped[1 << core::kMaxTileWidthLog2];
    return row_to_pixels<CH, kLanes>(t.transform, ramped_row<CH>(t, vals, r, x0, x1, ramped), x0, x1, out);
  }
  return row_to_pixels<CH, kLanes>(t.transform, vals, x0, x1, out);
}

// Whether rows [0, rows) of the tile are all zero rows (spec §4.3) and no
// plane has residual corrections (§6.7): then every code is 0 and every
// plane value is the plane's midpoint (the tile's first pixel is predicted
// from it, §6.3, every other pixel from neighbours equal to it, and each
// predictor of §6.1 gives equal neighbours back), as for the synthetic
// gradients whose ramps (§6.9) leave nothing to code.
template <int CH>
bool flat_rows(const CodedTileParams& t, int rows) {
  for (int p = 0; p < CH; ++p)
    if (t.plane[p].corrected) return false;
  for (int r = 0; r < rows; ++r)
    if (!core::is_zero_row(t, r)) return false;
  return true;
}

// The pixels of rows [y0, y1) from their plane values, row r's at vals + r
// * row_stride (the lanes' rows, decode_lanes.hpp; a flat tile's one row,
// stride 0), then every row's end check. kLanes: the lanes' planes_to_pixels
// (CPUs with lanes only). Not inlined, as rice_group_codes.
template <int CH, bool kLanes>
L3_DECODE_CLONES int rows_to_pixels(const CodedTileParams& t, const std::uint32_t* palette, const V4* vals,
                                    std::size_t row_stride, LaneState* lanes, const TileOutput& o, bool full) {
  for (int r = o.y0; r < o.y1; ++r) {
    std::uint8_t* out = o.out + std::size_t(r - o.y0) * o.stride;
    if (!row_pixels<CH, kLanes>(t, palette, vals + std::size_t(r) * row_stride, r, o.x0, o.x1, out))
      return core::kCorruptTile;
  }
  return detail::rows_end_status(t, lanes, o.y1, full);
}

// A tile that flat_rows takes: every value its plane's midpoint. Not
// inlined, as rows_to_pixels.
template <int CH>
L3_DECODE_CLONES int flat_rows_to_pixels(const CodedTileParams& t, const std::uint32_t* palette, LaneState* lanes,
                                         const TileOutput& o, bool full) {
  V4 mid = {};
  for (int p = 0; p < CH; ++p) mid[p] = t.plane[p].range.mid;
  V4 row[1 << core::kMaxTileWidthLog2];
  for (int c = o.x0; c < o.x1; ++c) row[c] = mid;
  return rows_to_pixels<CH, false>(t, palette, row, 0, lanes, o, full);
}

// Pass 2 of a tile with pixel copies (version 6, spec §6.6), one row: as
// reconstruct_group, but row by row, and the copied pixels (`spans`, from
// pass 1) take their sources' plane values instead of a prediction. `val` is
// the ring of plane values (row y at val[(y + 1) % kRing] + 1, from column
// -1); sources lie in the kCopyRows rows above at most, still in the ring.
template <int CH, std::uint8_t kPred, int kRing, int kCols>
L3_DECODE_INLINE void reconstruct_copy_row(const PredictConsts& k, const CodeRow<CH>& codes, const CopySpans& spans,
                                           V4 (*val)[kCols], int r, int x1) {
  V4* cur = val[(r + 1) % kRing] + 1;
  const V4* up = val[r % kRing] + 1;
  const bool first = r == 0;
  V4 w = first ? k.mid : up[0];  // column 0: W copies N (the midpoints at the tile's first pixel)
  int c = 0;
  auto predict_to = [&](int end) __attribute__((always_inline)) {
    for (; c < end; ++c) {
      const V4 n = first ? w : up[c];
      const V4 nw = first ? w : up[c - 1];
      const V4 u = load_codes<CH>(codes.code[c + 1]);
      w = predict_v<kPred>(k, w, n, nw) + residuals_v<kPred>(k, u, w, n, nw);
      cur[c] = w;
    }
  };
  for (int i = 0; i < spans.count; ++i) {
    const CopySpans::Span& sp = spans.span[i];
    predict_to(sp.c);
    // In the same row, a source may be a pixel of this copy (an overlapping
    // copy repeats): pixel by pixel, in order.
    const V4* src = val[(r + sp.dy + 1 + kRing) % kRing] + 1 + sp.dx;
    for (const int end = c + sp.n; c < end; ++c) cur[c] = src[c];
    w = cur[c - 1];
  }
  predict_to(x1);
  cur[-1] = cur[0];
}

// The pixels of a group's rows r0 .. r0 + g - 1 from their plane values in
// the ring `val` (as reconstruct_copy_row), and the checks of each row's end.
// Not inlined, as rice_group_codes.
template <int CH, int kRing, int kCols>
L3_DECODE_CLONES int group_pixels(const CodedTileParams& t, const std::uint32_t* palette, V4 (*val)[kCols],
                                  LaneState* lane, int r0, int g, const TileOutput& o, bool full) {
  for (int i = 0; i < g; ++i) {
    const int r = r0 + i;
    const V4* vals = val[(r + 1) % kRing] + 1;
    if (r >= o.y0) {
      std::uint8_t* out = o.out + std::size_t(r - o.y0) * o.stride;
      if (!row_pixels<CH>(t, palette, vals, r, o.x0, o.x1, out)) return core::kCorruptTile;
    }
    if (t.copies) {
      // A tile with copies checks every pixel it decodes, also outside a
      // crop: a copy may carry one into it (spec §6.6).
      std::uint8_t scratch[(1 << core::kMaxTileWidthLog2) * core::kMaxChannels];
      const int x1 = r >= o.y0 ? o.x0 : o.x1;
      if (x1 > 0 && !row_pixels<CH>(t, palette, vals, r, 0, x1, scratch)) return core::kCorruptTile;
    }
    if (const int status = detail::row_end_status(lane[i], t.row_length[r], full); status != core::kOk) return status;
  }
  return core::kOk;
}

// Pass 1 of a group of a Rice-coded tile, rows r0 .. r0 + g - 1 of [0, y1):
// row by row; a zero row (version 4, spec §4.3) as zeros (its lane reads
// nothing). Its own cloned function, like the pixel passes (group_pixels,
// rows_to_pixels): none depends on the predictor, and inlined into
// decode_coded_rows they were compiled once per predictor and clone, 28
// times per channel count (the four decode_coded_<N>.cpp took 24 of the
// Release build's 47 CPU minutes, spec §12). One call per group of rows.
template <int CH>
L3_DECODE_CLONES void rice_group_codes(const CodedTileParams& t, bool constant_planes, const std::uint8_t* read_end,
                                       LaneState* __restrict lane, UpContext<CH>& __restrict up_context,
                                       CodeRow<CH>* __restrict code, int r0, int g, int y1, int x1) {
  for (int i = 0; i < g; ++i) {
    const int r = r0 + i;
    if (core::is_zero_row(t, r)) zero_row_codes(code[i], x1);
    else decode_row_codes<CH>(t, r == 0, constant_planes, read_end, lane[i], up_context, code[i], x1);
    if (r + 1 < y1) prepare_up_context<CH>(code[i], up_context, t.run_mode, x1);
  }
}

// Rows reconstructed in lockstep: 4 measured 5% faster than 1 on photos and
// graphics, 2 about as fast as 1 (single-thread decode of the corpus). Tiles
// are 32 rows high by default: groups are whole.
inline constexpr int kGroupRows = 4;

// Decodes a coded tile in groups of kGroupRows rows (spec §6-§7): the codes
// of each row of the group, then their values in lockstep, then their pixels.
// Rows below y1 and columns right of x1 are never needed by the rows above
// them, so a crop stops early; a full decode also checks that every row
// stream is consumed exactly.
template <int CH, std::uint8_t kPred>
L3_DECODE_CLONES int decode_coded_rows(const std::uint8_t* tile, const CodedTileParams& params, const TileOutput& o,
                                       const std::uint8_t* read_end) {
  // A local copy: the compiler then knows the row stores below cannot alias
  // the parameters, and keeps them in registers.
  const CodedTileParams t = params;
  const bool full = o.x1 == t.width && o.y1 == t.height;
  std::uint32_t palette[core::kMaxPalette];
  if constexpr (CH == 1)
    for (std::uint32_t i = 0; i < t.palette_size; ++i)
      core::palette_word(tile, t, int(i), palette[i]);
  // Passes 1 and 2 of the tile's rows [0, y1), columns [0, x1), across
  // AVX-512 lanes where they apply (decode_lanes.hpp): then only the pixels
  // and the rows' end checks remain. Every row's lane begins here
  // (tile_lanes), for the groups below too.
  LaneState tile_lanes[core::kMaxTileHeight];
  for (int r = 0; r < o.y1; ++r) core::lane_begin(tile_lanes[r], tile, t, r);
  if (flat_rows<CH>(t, o.y1)) return flat_rows_to_pixels<CH>(t, palette, tile_lanes, o, full);
  if (lanes_eligible<CH>(t, tile_lanes, read_end, o.y1)) {
    LaneScratch& scratch = lane_scratch();
    lanes_values<CH>(tile, t, tile_lanes, scratch, o.x1, o.y1);
    return rows_to_pixels<CH, (CH >= 3)>(t, palette, scratch.rows[0].v, std::size_t(1) << core::kMaxTileWidthLog2,
                                         tile_lanes, o, full);
  }
  // The scalar loops.
  const PredictConsts k = predict_consts<CH>(t);
  bool constant_planes = false;
  for (int p = 0; p < CH; ++p) constant_planes |= t.plane[p].constant;
  // Plane values of a group's rows and of the row above it, used in turn
  // (row r in val[(r + 1) % kRing]); index 0 stands for x = -1 and holds a
  // copy of column 0 (spec §6.3) so that no pixel needs a branch.
  constexpr int kCols = (1 << core::kMaxTileWidthLog2) + 1;
  // The group's rows and the kCopyRows rows above it, which pixel copies
  // (spec §6.6) may read; other tiles read only the row above the group.
  constexpr int kRing = kGroupRows + core::kCopyRows;
  V4 val[kRing][kCols];
  CodeRow<CH> code[kGroupRows];
  UpContext<CH> up_context;
  // The padding lane of 3-plane code rows is never written: keep it zero.
  if constexpr (CodeRow<CH>::CS != CH) __builtin_memset(code, 0, sizeof code);
  const AnsSlots* slots = t.ans ? &ans_slots(t) : nullptr;
  for (int r0 = 0; r0 < o.y1; r0 += kGroupRows) {
    const int g = std::min(kGroupRows, o.y1 - r0);
    // Pass 1: row by row, or by pairs in entropy-coded tiles; zero rows
    // (spec §4.3) as zeros.
    LaneState* lane = tile_lanes + r0;
    if (t.copies) {
      // Pixel copies (spec §6.6): both passes row by row, then the pixels.
      CopySpans spans[kGroupRows];
      for (int i = 0; i < g; ++i)
        ans_copy_rows<CH>(t, *slots, read_end, lane[i], code[(i + kGroupRows - 1) % kGroupRows], code[i], spans[i],
                          r0 + i, o.x1);
      for (int i = 0; i < g; ++i) reconstruct_copy_row<CH, kPred, kRing>(k, code[i], spans[i], val, r0 + i, o.x1);
      if (const int status = group_pixels<CH, kRing>(t, palette, val, lane, r0, g, o, full); status != core::kOk)
        return status;
      continue;
    }
    if (t.ans) {
      for (int i = 0; i < g; i += 2) {
        // rows: the row above the pair (the previous group's last row at i = 0), then the pair's.
        CodeRow<CH>* rows[3] = {&code[(i + kGroupRows - 1) % kGroupRows], &code[i], &code[i + 1 < g ? i + 1 : i]};
        ans_decode_rows<CH>(t, *slots, read_end, std::min(2, g - i), r0 + i, &lane[i], rows, o.x1);
      }

    } else {
      rice_group_codes<CH>(t, constant_planes, read_end, lane, up_context, code, r0, g, o.y1, o.x1);
    }
    // Pass 2, the group's rows in lockstep.
    CodeRow<CH>* codes[kGroupRows];
    V4* vals[kGroupRows + 1];  // vals[i]: row r0 + i - 1, from column -1
    for (int i = 0; i < g; ++i) codes[i] = &code[i];
    for (int i = 0; i <= g; ++i) vals[i] = val[(r0 + i) % kRing] + 1;
    const bool first = r0 == 0;
    if (kGroupRows >= 4 && g == 4) reconstruct_group<CH, kPred, 4>(k, first, codes, vals, o.x1);
    else if (kGroupRows >= 3 && g == 3) reconstruct_group<CH, kPred, 3>(k, first, codes, vals, o.x1);
    else if (kGroupRows >= 2 && g == 2) reconstruct_group<CH, kPred, 2>(k, first, codes, vals, o.x1);
    else reconstruct_group<CH, kPred, 1>(k, first, codes, vals, o.x1);
    if (const int status = group_pixels<CH, kRing>(t, palette, val, lane, r0, g, o, full); status != core::kOk)
      return status;
  }
  return core::kOk;
}

// Tiles whose planes share a predictor (most of them: the encoder prefers
// that) take a path with the predictor fixed at compile time; kFlags:
// kCorrected for tiles with residual corrections, else 0. Built with
// L3_CPU_FIXED_PREDICTORS=0 (CMake option), every tile takes the per-plane path.
#ifndef L3_CPU_FIXED_PREDICTORS
#define L3_CPU_FIXED_PREDICTORS 1
#endif
template <int CH, std::uint8_t kFlags>
int decode_coded_by_shared_predictor(const std::uint8_t* tile, const CodedTileParams& t, const TileOutput& o,
                              const std::uint8_t* read_end) {
#if !L3_CPU_FIXED_PREDICTORS
  return decode_coded_rows<CH, kFlags ? kPredPerPlaneCorrected : core::kPredPerPlane>(tile, t, o, read_end);
#else
  switch (core::shared_predictor(t)) {
    case core::kPredMED: return decode_coded_rows<CH, core::kPredMED | kFlags>(tile, t, o, read_end);
    case core::kPredW: return decode_coded_rows<CH, core::kPredW | kFlags>(tile, t, o, read_end);
    case core::kPredN: return decode_coded_rows<CH, core::kPredN | kFlags>(tile, t, o, read_end);
    case core::kPredAvg: return decode_coded_rows<CH, core::kPredAvg | kFlags>(tile, t, o, read_end);
    case core::kPredGrad: return decode_coded_rows<CH, core::kPredGrad | kFlags>(tile, t, o, read_end);
    case core::kPredNW: return decode_coded_rows<CH, core::kPredNW | kFlags>(tile, t, o, read_end);
    default:
      return decode_coded_rows<CH, kFlags ? kPredPerPlaneCorrected : core::kPredPerPlane>(tile, t, o, read_end);
  }
#endif
}

template <int CH>
int decode_coded_by_predictor(const std::uint8_t* tile, const CodedTileParams& t, const TileOutput& o,
                              const std::uint8_t* read_end) {
  for (int p = 0; p < CH; ++p)
    if (t.plane[p].corrected) return decode_coded_by_shared_predictor<CH, kCorrected>(tile, t, o, read_end);
  return decode_coded_by_shared_predictor<CH, 0>(tile, t, o, read_end);
}

}  // namespace

namespace detail {
template <int CH>
int decode_coded_tile(const std::uint8_t* tile, const core::CodedTileParams& t, const TileOutput& o,
                      const std::uint8_t* read_end) {
  return decode_coded_by_predictor<CH>(tile, t, o, read_end);
}
}  // namespace detail
}  // namespace l3
