// The wavefront of bilevel tiles (spec/codec.md §6.8, §8) across AVX-512
// lanes: the tile's rows in the 16 lanes of two registers, row i one column
// behind row i - 1, as the GPU's warp decodes them and as the scalar
// wavefront of decode_bilevel.cpp orders them. Each step decodes every
// lane's pixel: W, N and NW are the registers' last values shifted by a
// lane; a template pixel (dy rows up, dx columns right) was decoded dy - dx
// steps before, dy lanes up, so the step's indices are stored as one row of
// BilevelDiagonals and a template pixel is one unaligned load of the row
// that step wrote. Each bit of an index is a binary rANS symbol
// (core::ans_read_bilevel): its context's frequency a permute of the bit's
// 32-entry table; the units renormalisations read come from gathers at each
// lane's byte offset (as AnsCoder's in decode_lanes_body.hpp), one or two per
// pixel. The same indices, and
// the same reader positions, states and errors as far as core::lane_end sees
// them, as the scalar wavefront; measured in spec §12. Included by
// decode_bilevel.cpp only; used where bilevel_lanes_eligible says.
#pragma once

#include <cstdint>
#include <cstring>

#include "decode_lanes.hpp"

namespace l3 {
namespace {

#if L3_HAVE_DECODE_LANES

// A tile's indices in wavefront order: pixel (r, c), decoded at step r + c,
// at d[r + c][kAbove + r]. The kAbove bytes before row 0 stand for the rows
// above the tile, which a template pixel's load of a step's row may cover
// (those lanes take W or N instead, spec §6.8).
struct BilevelDiagonals {
  static constexpr int kAbove = 32;  // > core::kTemplateMaxUp
  static constexpr int kSteps = int(core::kMaxTileHeight) + (1 << core::kMaxTileWidthLog2) - 1;
  alignas(64) std::uint8_t d[kSteps][kAbove + int(core::kMaxTileHeight)];

  std::uint8_t at(int r, int c) const { return d[r + c][kAbove + r]; }
};
static_assert(BilevelDiagonals::kAbove > core::kTemplateMaxUp);

// How far past a row's start its gathers may load: a 2-byte unit per bit of
// every pixel (core::ans_read_bilevel), and the 8 bytes a pixel's gathers read.
inline constexpr std::ptrdiff_t kBilevelRowReach =
    std::ptrdiff_t(1 << core::kMaxTileWidthLog2) * core::kMaxBitPlanes * 2 + 8;

// Whether the lanes decode rows [0, rows) of bilevel tile t: AVX-512 lanes
// (detail::decode_lanes()), no run mode (its run decisions read the pixels'
// codes, which the lanes do not keep), every row starting kBilevelRowReach
// bytes before read_end (no gather needs a bounds test).
inline bool bilevel_lanes_eligible(const core::CodedTileParams& t, const core::LaneState* lanes,
                                   const std::uint8_t* read_end, int rows) {
  if (detail::decode_lanes() != detail::DecodeLanes::avx512 || t.run_mode) return false;
  for (int r = 0; r < rows; ++r)
    if (read_end - lanes[r].br.p < kBilevelRowReach) return false;
  return true;
}

// GCC 12's AVX-512 intrinsics: the false positive of decode_lanes.hpp.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace lanes_avx512 {
#define L3_BILEVEL_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512cd")))
#define L3_BILEVEL_INLINE __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx512dq,avx512cd")))

// What a register of 16 rows keeps from step to step.
struct BilevelRegs {
  AnsLanes c;  // rANS states and units
  V value;     // each row's last index (W); 0 before its column 0
  V up;        // the indices above the last ones: the next step's NW
  V top;       // the largest index decoded (indices_in_palette)
  M error;     // a symbol read in an unused context (frequency 0)
  M reading;   // rows that read symbols: not zero rows (spec §4.3)
};

// core::predict_fixed on one bit of W, N and NW (range 0..1).
template <std::uint8_t kPred>
L3_BILEVEL_INLINE inline V bilevel_predict(std::uint8_t pred, V w, V n, V nw) {
  return predict_lanes(kPred == core::kPredPerPlane ? pred : kPred, w, n, nw, zero(), set1(1));
}

// One step of register G's 16 rows (rows[G * 16 + lane], lane i at column
// s - 16 G - i): the edge rules of §6.3, the template pixels of §6.8, then
// kBits binary symbols per pixel.
template <std::uint8_t kPred, int kBits>
L3_BILEVEL_INLINE inline V bilevel_step(const core::CodedTileParams& t, const std::uint8_t* tile,
                                         const V (&one_lo)[core::kMaxBitPlanes], const V (&one_hi)[core::kMaxBitPlanes],
                                         BilevelRegs& R, V above, bool first_reg, BilevelDiagonals& D, int s, int G,
                                         V row, V col, V cols, M lane_rows) {
  const M active = mask_and(mask_and(lane_rows, cmpge(col, zero())), cmplt(col, cols));
  const M col0 = cmpeq(col, zero());
  V w = R.value, n = first_reg ? from_lane_above(R.value) : from_lane_above(above, R.value), nw = R.up;
  R.up = n;  // before the edge rules: the next step's NW is this step's N
  edge_rules(w, n, nw, first_reg ? first_lane() : no_lanes(), col0);
  V tmpl[core::kTemplatePixels];
  for (int i = 0; i < core::kTemplatePixels; ++i) {
    const int dy = t.template_dy[i], dx = t.template_dx[i];
    // Pixel (r - dy, c + dx) was decoded at step s - dy + dx (none before step 0: outside for every lane).
    const int from = s - dy + dx;
    const V at = from < 0 ? zero()
                          : _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(
                                &D.d[from][BilevelDiagonals::kAbove + G * kLanes - dy])));
    const M inside = mask_and(cmpge(row, set1(dy)), cmpge(col, set1(-dx)));
    tmpl[i] = select(inside, at, dy == 0 ? w : n);
  }
  const M read = mask_and(active, R.reading);
  const V one = set1(1), total = set1(int(core::kAnsTotal)), low = set1(int(core::kAnsLow));
  // The pixel's units: at most one per bit, so with kBits >= 2 the next
  // four units at q (hi: the first two, lo: the others), gathered once per
  // pixel and shifted on as renormalisations take them; with one bit, the
  // unit is gathered when taken.
  V hi = zero(), lo = zero();
  if constexpr (kBits >= 2) hi = load_words(tile, read, R.c.q);
  if constexpr (kBits >= 3) lo = load_words(tile, read, add(R.c.q, set1(4)));
  V index = zero();
  for (int j = 0; j < kBits; ++j) {
    const V shift = set1(j);
    const V wj = and_(srlv(w, shift), one), nj = and_(srlv(n, shift), one), nwj = and_(srlv(nw, shift), one);
    const V aj = and_(srlv(tmpl[0], shift), one), bj = and_(srlv(tmpl[1], shift), one);
    const V x = or_(or_(or_(wj, slli<1>(nj)), or_(slli<2>(nwj), slli<3>(aj))), slli<4>(bj));
    // core::ans_read_bilevel in the lanes of `read`.
    const V f1 = _mm512_permutex2var_epi32(one_lo[j], x, one_hi[j]);
    R.error = mask_or(R.error, cmpeq_in(read, f1, zero()));
    const V slot = and_(R.c.ans, set1(int(core::kAnsTotal - 1)));
    const V zeros = sub(total, f1);
    const M bit = cmpge_unsigned_in(read, slot, zeros);
    const V f = select(bit, f1, zeros);
    const V a = sub(add(mullo(f, srli<core::kAnsPrecisionBits>(R.c.ans)), slot), maskz(bit, zeros));
    const M renorm = _mm512_mask_cmplt_epu32_mask(read, a, low);
    V unit;
    if constexpr (kBits == 1) {
      unit = srli<16>(load_words(tile, renorm, R.c.q));
    } else {
      unit = srli<16>(hi);
      hi = mask_or(hi, renorm, slli<16>(hi), srli<16>(lo));
      lo = select(renorm, slli<16>(lo), lo);
    }
    R.c.ans = select(read, mask_or(a, renorm, slli<16>(a), unit), R.c.ans);
    R.c.q = mask_add(R.c.q, renorm, R.c.q, set1(2));
    const V pred = bilevel_predict<kPred>(t.plane[0].pred, wj, nj, nwj);
    index = or_(index, sllv(xor_(pred, maskz(bit, one)), shift));
  }
  R.value = select(active, index, R.value);
  R.top = max(R.top, maskz(active, index));
  return R.value;
}

// Rows [0, rows) and columns [0, cols) of bilevel tile t that
// bilevel_lanes_eligible takes: their indices into D, their lanes' state as
// the scalar wavefront leaves it. Returns the largest index decoded.
template <std::uint8_t kPred, int kBits>
L3_BILEVEL_TARGET __attribute__((noinline)) int bilevel_lanes(const std::uint8_t* tile, const core::CodedTileParams& t,
                                                              core::LaneState* lanes, BilevelDiagonals& D, int rows,
                                                              int cols) {
  V one_lo[core::kMaxBitPlanes], one_hi[core::kMaxBitPlanes];
  for (int j = 0; j < core::kMaxBitPlanes; ++j) {
    alignas(64) std::int32_t one[core::kBilevelContexts];
    for (int x = 0; x < core::kBilevelContexts; ++x) one[x] = t.bilevel_one[j][x];
    one_lo[j] = load(one);
    one_hi[j] = load(one + 16);
  }
  static_assert(core::kBilevelContexts == 32 && kLaneRows == 2 * kLanes);
  BilevelRegs R[2];
  M lane_rows[2];
  int rows_in[2];
  for (int G = 0; G < 2; ++G) {
    rows_in[G] = rows_in_reg(rows, G);
    lane_rows[G] = lanes_below(rows_in[G]);
    std::uint32_t reading = 0;
    for (int i = 0; i < rows_in[G]; ++i)
      reading |= std::uint32_t(lanes[G * kLanes + i].run_left == 0) << i;  // run_left: a zero row's (no run mode here)
    ans_lanes_begin(R[G].c, tile, lanes + G * kLanes, rows_in[G]);
    R[G].value = R[G].up = R[G].top = zero();
    R[G].error = no_lanes();
    R[G].reading = mask_from_bits(reading);
  }
  const V cols_v = set1(cols), lane_ids = iota();
  const V row1 = add(lane_ids, set1(kLanes));
  V last0 = zero();  // register 0's values of the step before, for register 1's N
  const int steps = rows + cols - 1;
  for (int s = 0; s < steps; ++s) {
    const V col0 = sub(set1(s), lane_ids);
    const V v0 = bilevel_step<kPred, kBits>(t, tile, one_lo, one_hi, R[0], zero(), true, D, s, 0, lane_ids, col0,
                                            cols_v, lane_rows[0]);
    _mm_store_si128(reinterpret_cast<__m128i*>(&D.d[s][BilevelDiagonals::kAbove]), _mm512_cvtepi32_epi8(v0));
    if (rows_in[1] > 0) {
      const V v1 = bilevel_step<kPred, kBits>(t, tile, one_lo, one_hi, R[1], last0, false, D, s, 1, row1,
                                              sub(col0, set1(kLanes)), cols_v, lane_rows[1]);
      _mm_store_si128(reinterpret_cast<__m128i*>(&D.d[s][BilevelDiagonals::kAbove + kLanes]),
                      _mm512_cvtepi32_epi8(v1));
    }
    last0 = v0;
  }
  int top = 0;
  for (int G = 0; G < 2; ++G) {
    ans_lanes_end(R[G].c, tile, lanes + G * kLanes, rows_in[G]);
    const std::uint32_t error = mask_bits(R[G].error);
    for (int i = 0; i < rows_in[G]; ++i)
      if ((error >> i) & 1) lanes[G * kLanes + i].min_freq = 0;  // as ans_read_bilevel records an unused context
    top = std::max(top, _mm512_reduce_max_epi32(R[G].top));
  }
  return top;
}

#undef L3_BILEVEL_INLINE
#undef L3_BILEVEL_TARGET
}  // namespace lanes_avx512

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#endif  // L3_HAVE_DECODE_LANES

}  // namespace
}  // namespace l3
