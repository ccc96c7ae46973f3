// CPU decoder: validates the stream once (header.cpp), then decodes tiles,
// in parallel when asked, each tile row by row through the shared core
// (l3/codec/tile_core.hpp). The CUDA decoder runs the same core as a wavefront.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "header.hpp"
#include "l3/codec/codec.hpp"
#include "l3/common/parallel.hpp"
#include "l3/common/target_clones.hpp"
#include "l3/codec/tile_core.hpp"

namespace l3 {
namespace {

using core::CodedTileParams;
using core::LaneState;

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
// Where clones are not built (sanitizers, Clang: the fuzzers' build has the
// baseline loop alone): l3/common/target_clones.hpp.
#if L3_HAVE_TARGET_CLONES
#define L3_DECODE_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define L3_DECODE_CLONES
#endif

// Helpers of the row loops are forced inline so that they get the clone's target.
#define L3_DECODE_INLINE inline __attribute__((always_inline))

// The planes of one pixel as a 4-lane vector (lanes >= channels unused): the
// prediction step computes all planes at once (GCC/Clang vector extensions;
// SSE2 in the baseline build, AVX2-era min/max in the x86-64-v3 clone).
typedef int V4 __attribute__((vector_size(16)));

L3_DECODE_INLINE V4 vmin(V4 a, V4 b) { return a < b ? a : b; }
L3_DECODE_INLINE V4 vmax(V4 a, V4 b) { return a > b ? a : b; }

// Converts decoded plane values of columns [x0, x1) to pixels (spec §5),
// reporting values that no 8-bit pixel maps to.
template <int CH, std::uint8_t kTransform>
L3_DECODE_INLINE bool planes_to_pixels(const V4* vals, int x0, int x1, std::uint8_t* out) {
  std::uint32_t bits = 0;
  for (int c = x0; c < x1; ++c, out += CH) {
    int v[CH];
    for (int p = 0; p < CH; ++p) v[p] = vals[c][p];
    bits |= core::inverse_transform_bits(kTransform, CH, v, out);
  }
  return bits <= 255u;
}

template <int CH>
L3_DECODE_INLINE bool row_to_pixels(std::uint8_t transform, const V4* vals, int x0, int x1, std::uint8_t* out) {
  switch (transform) {
    case core::kTransformSubtractGreen: return planes_to_pixels<CH, core::kTransformSubtractGreen>(vals, x0, x1, out);
    case core::kTransformYCoCgR: return planes_to_pixels<CH, core::kTransformYCoCgR>(vals, x0, x1, out);
    default: return planes_to_pixels<CH, core::kTransformNone>(vals, x0, x1, out);
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

// Loops over the planes of a pixel must unroll: the neighbour arrays then
// live in registers.
#if defined(__clang__)
#define L3_PLANES _Pragma("unroll")
#elif defined(__GNUC__)
#define L3_PLANES _Pragma("GCC unroll 4")
#else
#define L3_PLANES
#endif

// Rice decode (spec §7.2) for the CPU row loop; the same values as
// core::read_rice, in fewer instructions on the common path.
L3_DECODE_INLINE std::uint32_t read_rice_cpu(core::BitReader& br, int k) {
  if (br.avail < int(core::kEscapeZeros + core::kEscapeBits)) br.refill();  // a symbol is at most 30 bits
  // `| 1` keeps the count defined (no zero test) and changes nothing: a count
  // of 63 or 64 is an escape either way.
  const int q = core::clz64(br.buf | 1);
  if (q < int(core::kEscapeZeros)) [[likely]] {
    // buf << q starts with the terminating one, then the k low bits: shifting
    // k + 1 bits down gives (1 << k) + low, and (q - 1) << k (mod 2^32)
    // turns that into (q << k) + low.
    const std::uint32_t u = std::uint32_t((br.buf << q) >> (63 - k)) + ((std::uint32_t(q) - 1u) << k);
    br.consume(q + 1 + k);
    return u;
  }
  const std::uint32_t u = std::uint32_t((br.buf << core::kEscapeZeros) >> (64 - core::kEscapeBits));
  br.consume(int(core::kEscapeZeros + core::kEscapeBits));
  return u;
}

// Entropy-coded tiles (spec §4.5, §7.4) on the CPU: the token of every
// 12-bit slot of every context, filled once per tile, so that finding a
// token is one load on the row's dependency chain instead of the five of
// core::ans_search. Unused contexts share a row of token 31, whose frequency
// is 0 there (core::ans_decode_token then flags the tile). Per thread: 70 KB.
struct AnsSlots {
  std::uint8_t token[core::kAnsContexts][core::kAnsTotal];
  const std::uint8_t* row[core::kAnsContexts];
};

struct UnusedSlots {
  std::uint8_t token[core::kAnsTotal];
  UnusedSlots() { std::memset(token, core::kAnsCumSize - 2, sizeof token); }
};

const AnsSlots& ans_slots(const CodedTileParams& t) {
  static const UnusedSlots unused;
  thread_local AnsSlots slots;
  for (int x = 0; x < core::kAnsContexts; ++x) {
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

// A 16-bit renormalisation without a branch (spec §7.4; the bits are there:
// ans_read_cpu refills first).
L3_DECODE_INLINE std::uint32_t ans_renorm_cpu(LaneState& s, std::uint32_t x) {
  const bool need = x < core::kAnsLow;
  const int n = need ? 16 : 0;
  x = need ? (x << 16) | std::uint32_t(s.br.buf >> 48) : x;
  s.br.buf <<= n;
  s.br.avail -= n;
  return x;
}

// core::ans_read's value in context x, for the CPU row loop: the token from
// the slot table, and no data-dependent branch (whether a renormalisation
// happens, or raw bits follow, is close to random on photos).
L3_DECODE_INLINE std::uint32_t ans_read_cpu(LaneState& s, const CodedTileParams& t, const AnsSlots& slots, int x) {
  s.br.refill();  // >= 56 bits: the two renormalisations below take at most 32
  const std::uint16_t* cum = t.ans_cum[x];
  std::uint32_t a = s.ans;
  const std::uint32_t slot = a & (core::kAnsTotal - 1);
  const int tok = slots.row[x][slot];
  const std::uint32_t lo = cum[tok], f = std::uint32_t(cum[tok + 1]) - lo;
  s.error |= f == 0;  // an unused context
  a = ans_renorm_cpu(s, f * (a >> core::kAnsPrecisionBits) + slot - lo);
  const int raw_bits = tok < core::kAnsDirect ? 0 : 3 + ((tok - core::kAnsDirect) >> 1);
  const std::uint32_t raw = a & ((1u << raw_bits) - 1);
  a = ans_renorm_cpu(s, a >> raw_bits);
  s.ans = a;
  return tok < core::kAnsDirect ? std::uint32_t(tok) : ((2u | std::uint32_t(tok & 1)) << raw_bits) | raw;
}

// The CPU decodes a row in two passes (the CUDA decoder and core::decode_pixel
// do it in one): residual codes depend only on the bit stream and on other
// codes (Rice parameters and zero runs, spec §6.2 and §6.4), never on plane
// values, so
//   1. decode_row_codes walks the row stream and writes the codes, a serial
//      scalar loop with few live values;
//   2. reconstruct_row turns codes into plane values (prediction, spec §6.1),
//      all planes of a pixel at once in vector lanes.
// Code rows have CS ints per pixel: 3 planes are padded to 4 so that a pixel's
// codes load as one vector.
template <int CH>
inline constexpr int kCodeStride = CH == 3 ? 4 : CH;

// The codes of one row. Column 0 of `code` and `pix_or` stands for x = -1
// and holds a copy of column 0 (the edge rule of spec §6.3); the others are
// indexed by column.
template <int CH>
struct CodeRow {
  static constexpr int kCols = 1 << core::kMaxTileWidthLog2;
  static constexpr int CS = kCodeStride<CH>;
  int code[kCols + 1][CS];  // this row's codes, at index c + 1
  int pix_or[kCols + 1];    // OR of the planes' codes of each pixel, at index c + 1
};

// What the row below needs of a row's codes (spec §6.2, §6.4), prepared in
// one vectorisable pass per row.
template <int CH>
struct UpContext {
  static constexpr int kCols = 1 << core::kMaxTileWidthLog2;
  static constexpr int CS = kCodeStride<CH>;
  int ctx[kCols][CS];  // u(N) + (u(NW) >> 1): the activity of the row below, less its W term
  int any[kCols];      // nonzero when a code of N or NW (any plane) is, for the row below
  int first[CS];       // the codes of column 0: W's of the row below at its column 0
};

// After a row is decoded: fills in its column -1 and prepares ctx / any for
// the row below (any: only in tiles with zero runs).
template <int CH>
L3_DECODE_INLINE void prepare_up_context(CodeRow<CH>& row, UpContext<CH>& up, bool run_mode, int x1) {
  constexpr int CS = CodeRow<CH>::CS;
  for (int p = 0; p < CS; ++p) row.code[0][p] = up.first[p] = row.code[1][p];
  row.pix_or[0] = row.pix_or[1];
  const int* u = &row.code[1][0];
  int* ctx = &up.ctx[0][0];
  for (int i = 0; i < x1 * CS; ++i) ctx[i] = u[i] + (u[i - CS] >> 1);
  if (!run_mode) return;
  for (int c = 0; c < x1; ++c) up.any[c] = row.pix_or[c + 1] | row.pix_or[c];
}

// Codes of pixels [c, c + n) of a row: zero (a zero run).
template <int CH>
L3_DECODE_INLINE void zero_codes(CodeRow<CH>& row, int c, int n) {
  __builtin_memset(&row.code[c + 1][0], 0, sizeof(int) * CodeRow<CH>::CS * std::size_t(n));
  __builtin_memset(&row.pix_or[c + 1], 0, sizeof(int) * std::size_t(n));
}

// Pass 1: the residual codes of columns [0, x1) of one row, the CPU
// counterpart of the code half of core::decode_pixel. kFirstRow: the tile's
// first row, where N = NW = W (spec §6.3), so the activity is
// u(W) + u(W) + (u(W) >> 1) and only W's codes decide a run. kRunMode: the
// tile has zero runs (t.run_mode); without, no pixel starts one and pix_or
// is not needed. kAns: an entropy-coded tile (spec §4.5, §7.4), whose values
// are rANS tokens read with core::ans_read in the context that
// k_for_activity names, instead of Rice codes: the second way of reading a
// residual, the rest of the loop shared.
template <int CH, bool kFirstRow, bool kConstantPlanes, bool kRunMode, bool kAns>
L3_DECODE_INLINE void decode_row_codes(const CodedTileParams& t, LaneState& lane, const UpContext<CH>& up,
                                       CodeRow<CH>& row, int x1, const AnsSlots* slots) {
  // A local copy of the lane: kept in registers through the loop (the
  // caller's lanes are an array in memory).
  LaneState s = lane;
  // W's codes at column 0: a copy of N's (zero at the tile's first pixel).
  int uw[CH];
  int or_w = 0;
  L3_PLANES for (int p = 0; p < CH; ++p) {
    uw[p] = kFirstRow ? 0 : up.first[p];
    or_w |= uw[p];
  }
  for (int c = 0; c < x1; ++c) {
    // Zero runs (spec §6.4). The sum of the neighbours' codes is zero
    // exactly when their OR is (codes are >= 0).
    const bool zero = kRunMode && core::zero_run_step(
        t, s, c, [&]() __attribute__((always_inline)) { return (or_w | (kFirstRow ? 0 : up.any[c])) == 0; },
        [&](core::BitReader& br, int k) __attribute__((always_inline)) {
          if constexpr (kAns) return ans_read_cpu(s, t, *slots, core::kAnsRunContext);
          else return read_rice_cpu(br, k);
        });
    if constexpr (kRunMode && CH == 1) {
      // Pixel c is in a zero run with more than 8 pixels to go: the rest of
      // the run (in the row) at once, as core::zero_run_step would do it
      // pixel by pixel (shorter runs: faster that way). One plane only
      // (palette tiles, gray): 8% slower on 3-plane photos.
      if (zero && s.run_left > 8) [[unlikely]] {
        const int n = std::min(s.run_left, x1 - 1 - c);
        zero_codes(row, c, n + 1);
        s.run_left -= n;
        if (s.run_left == 0) s.blocked = true;
        L3_PLANES for (int p = 0; p < CH; ++p) uw[p] = 0;
        or_w = 0;
        c += n;
        continue;
      }
    }
    int or_c = 0;
    L3_PLANES for (int p = 0; p < CH; ++p) {
      // Refills at fixed points, every second symbol: whether a symbol finds
      // fewer than 30 bits left depends on the data, and that branch was
      // mispredicted often; after these, read_rice_cpu rarely needs its own.
      if (!kAns && p % 2 == 0 && !zero) {
        s.br.refill();
        // refill() leaves at least 56 bits (avail | 56 on its fast path):
        // telling the compiler drops the next read's own check.
        if (s.br.avail < 56) __builtin_unreachable();
      }
      const int a = kFirstRow ? uw[p] + uw[p] + (uw[p] >> 1) : uw[p] + up.ctx[c][p];
      std::uint32_t u = 0;
      // Constant planes read nothing (spec §4.3); tiles without any (most)
      // take a copy of the loop without the test: 1-2% faster on photos.
      if (!zero && (!kConstantPlanes || !t.plane[p].constant)) {
        if constexpr (kAns) u = ans_read_cpu(s, t, *slots, p * core::kAnsGroups + core::k_for_activity(t.plane[p], a));
        else u = read_rice_cpu(s.br, core::k_for_activity(t.plane[p], a));
      }
      row.code[c + 1][p] = int(u);
      uw[p] = int(u);
      or_c |= int(u);
    }
    if constexpr (kRunMode) {
      row.pix_or[c + 1] = or_c;
      if (!zero) s.blocked = false;
      or_w = or_c;
    }
  }
  lane = s;
}

// The variant of the code pass for a tile (entropy-coded tiles: one, with
// the constant-plane test).
template <int CH, bool kFirstRow>
L3_DECODE_INLINE void decode_row_codes(const CodedTileParams& t, bool constant_planes, const AnsSlots* slots,
                                       LaneState& lane, const UpContext<CH>& up, CodeRow<CH>& row, int x1) {
  if (t.ans) {
    if (t.run_mode) decode_row_codes<CH, kFirstRow, true, true, true>(t, lane, up, row, x1, slots);
    else decode_row_codes<CH, kFirstRow, true, false, true>(t, lane, up, row, x1, slots);
  } else if (t.run_mode) {
    if (constant_planes) decode_row_codes<CH, kFirstRow, true, true, false>(t, lane, up, row, x1, slots);
    else decode_row_codes<CH, kFirstRow, false, true, false>(t, lane, up, row, x1, slots);
  } else {
    if (constant_planes) decode_row_codes<CH, kFirstRow, true, false, false>(t, lane, up, row, x1, slots);
    else decode_row_codes<CH, kFirstRow, false, false, false>(t, lane, up, row, x1, slots);
  }
}

template <int CH>
L3_DECODE_INLINE void decode_row_codes(const CodedTileParams& t, bool first_row, bool constant_planes,
                                       const AnsSlots* slots, LaneState& lane, const UpContext<CH>& up,
                                       CodeRow<CH>& row, int x1) {
  if (first_row) decode_row_codes<CH, true>(t, constant_planes, slots, lane, up, row, x1);
  else decode_row_codes<CH, false>(t, constant_planes, slots, lane, up, row, x1);
}

// Entropy-coded tiles: the code pass of two rows in lockstep, the second one
// column behind the first (spec §8's wavefront on one core). A rANS value is
// a long serial chain (slot -> token -> state -> renormalisation -> next
// context), so the core overlaps the two rows' chains: measured faster than
// row by row. (Rice codes are a short chain, and the two rows' state does not
// fit the registers: row by row is faster there.) The row above's codes are
// read directly (index 0: its column -1), not through UpContext.
template <int CH>
struct AnsRowState {
  LaneState s;
  int uw[CH];  // W's codes
  int or_w;    // their OR
};

// The codes of pixel c of one row of an entropy-coded tile (the code half of
// core::decode_pixel, as decode_row_codes).
template <int CH, bool kFirstRow, bool kRunMode>
L3_DECODE_INLINE void ans_code_step(const CodedTileParams& t, const AnsSlots& slots, AnsRowState<CH>& st,
                                    const CodeRow<CH>& up, CodeRow<CH>& row, int c) {
  LaneState& s = st.s;
  const bool zero = kRunMode && core::zero_run_step(
      t, s, c,
      [&]() __attribute__((always_inline)) {
        return (st.or_w | (kFirstRow ? 0 : up.pix_or[c + 1] | up.pix_or[c])) == 0;
      },
      [&](core::BitReader&, int) __attribute__((always_inline)) {
        return ans_read_cpu(s, t, slots, core::kAnsRunContext);
      });
  int or_c = 0;
  L3_PLANES for (int p = 0; p < CH; ++p) {
    // Activity u(W) + u(N) + (u(NW) >> 1) (spec §6.2).
    const int a = kFirstRow ? st.uw[p] + st.uw[p] + (st.uw[p] >> 1)
                            : st.uw[p] + up.code[c + 1][p] + (up.code[c][p] >> 1);
    std::uint32_t u = 0;
    if (!zero && !t.plane[p].constant)
      u = ans_read_cpu(s, t, slots, p * core::kAnsGroups + core::k_for_activity(t.plane[p], a));
    row.code[c + 1][p] = int(u);
    st.uw[p] = int(u);
    or_c |= int(u);
  }
  row.pix_or[c + 1] = or_c;
  if constexpr (kRunMode) {
    if (!zero) s.blocked = false;
    st.or_w = or_c;
  }
}

// Row I of the pair at step s decodes column s - I (when in [0, x1)):
// rows[I] is the row above it, rows[I + 1] its own.
template <int CH, bool kFirstPair, bool kRunMode, int I>
L3_DECODE_INLINE void ans_code_step_checked(const CodedTileParams& t, const AnsSlots& slots, AnsRowState<CH>* st,
                                            CodeRow<CH>* const* rows, int s, int x1) {
  constexpr bool kFirstRow = kFirstPair && I == 0;
  const int c = s - I;
  if (c < 0 || c >= x1) return;
  if (c == 0) {
    // W's codes at column 0: a copy of N's (zero on the tile's first row).
    st[I].or_w = 0;
    L3_PLANES for (int p = 0; p < CH; ++p) {
      st[I].uw[p] = kFirstRow ? 0 : rows[I]->code[1][p];
      st[I].or_w |= st[I].uw[p];
    }
  }
  ans_code_step<CH, kFirstRow, kRunMode>(t, slots, st[I], *rows[I], *rows[I + 1], c);
  if (c == 0) {
    for (int p = 0; p < CodeRow<CH>::CS; ++p) rows[I + 1]->code[0][p] = rows[I + 1]->code[1][p];
    rows[I + 1]->pix_or[0] = rows[I + 1]->pix_or[1];
  }
}

// The code pass of G <= 2 rows of an entropy-coded tile, columns [0, x1):
// rows[0] holds the codes of the row above (unused when kFirstPair: the
// tile's first row is row 0 of the pair), rows[1..G] receive the rows'.
template <int CH, int G, bool kFirstPair, bool kRunMode>
L3_DECODE_CLONES void ans_decode_codes(const CodedTileParams& t, const AnsSlots& slots, LaneState* lanes,
                                       CodeRow<CH>* const* rows, int x1) {
  AnsRowState<CH> st[G] = {};  // uw, or_w: set at each row's column 0
  for (int i = 0; i < G; ++i) st[i].s = lanes[i];
  int s = 0;
  for (; s < G; ++s) {  // the columns 0
    ans_code_step_checked<CH, kFirstPair, kRunMode, 0>(t, slots, st, rows, s, x1);
    if constexpr (G == 2) ans_code_step_checked<CH, kFirstPair, kRunMode, 1>(t, slots, st, rows, s, x1);
  }
  for (; s < x1; ++s) {  // both rows have a column in [1, x1)
    ans_code_step<CH, kFirstPair, kRunMode>(t, slots, st[0], *rows[0], *rows[1], s);
    if constexpr (G == 2) ans_code_step<CH, false, kRunMode>(t, slots, st[1], *rows[1], *rows[2], s - 1);
  }
  // The second row's last column (its column 0 was in the first loop when x1 = 1).
  if constexpr (G == 2)
    if (x1 >= 2) ans_code_step<CH, false, kRunMode>(t, slots, st[1], *rows[1], *rows[2], x1 - 1);
  for (int i = 0; i < G; ++i) lanes[i] = st[i].s;
}

template <int CH>
void ans_decode_codes(const CodedTileParams& t, const AnsSlots& slots, int g, bool first, LaneState* lanes,
                      CodeRow<CH>* const* rows, int x1) {
  const auto run = [&]<int G>() {
    if (first) {
      if (t.run_mode) ans_decode_codes<CH, G, true, true>(t, slots, lanes, rows, x1);
      else ans_decode_codes<CH, G, true, false>(t, slots, lanes, rows, x1);
    } else {
      if (t.run_mode) ans_decode_codes<CH, G, false, true>(t, slots, lanes, rows, x1);
      else ans_decode_codes<CH, G, false, false>(t, slots, lanes, rows, x1);
    }
  };
  if (g == 2) run.template operator()<2>();
  else run.template operator()<1>();
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
};

template <int CH>
L3_DECODE_INLINE PredictConsts predict_consts(const CodedTileParams& t) {
  PredictConsts k{};
  for (int p = 0; p < CH; ++p) {
    const core::PlaneParams& pp = t.plane[p];
    k.lo[p] = pp.range.lo;
    k.hi[p] = pp.range.hi;
    k.mid[p] = pp.range.mid;
    k.is_w[p] = pp.pred == core::kPredW ? -1 : 0;
    k.is_n[p] = pp.pred == core::kPredN ? -1 : 0;
    k.is_avg[p] = pp.pred == core::kPredAvg ? -1 : 0;
    k.is_grad[p] = pp.pred == core::kPredGrad ? -1 : 0;
  }
  return k;
}

// core::predict / predict_fixed on all planes at once.
template <std::uint8_t kPred>
L3_DECODE_INLINE V4 predict_v(const PredictConsts& k, V4 w, V4 n, V4 nw) {
  // W is the previous pixel's result, so each row is one dependency chain
  // through W: the gradient is written W + (N - NW) to take N - NW off it.
  if constexpr (kPred == core::kPredW) return w;
  else if constexpr (kPred == core::kPredN) return n;
  else if constexpr (kPred == core::kPredAvg) return (w + n) >> 1;
  else if constexpr (kPred == core::kPredGrad) return vmin(k.hi, vmax(k.lo, w + (n - nw)));
  else {
    const V4 grad = w + (n - nw);
    const V4 med = vmin(vmax(w, n), vmax(vmin(w, n), grad));
    if constexpr (kPred == core::kPredMED) return med;
    // Per-plane choice as a shallow tree of selects (also for the chain).
    const V4 avg_or_grad = k.is_avg ? (w + n) >> 1 : vmin(k.hi, vmax(k.lo, grad));
    const V4 not_w_n = (k.is_avg | k.is_grad) ? avg_or_grad : med;
    return k.is_w ? w : (k.is_n ? n : not_w_n);
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
  w = predict_v<kPred>(k, w, n, nw) + ((u >> 1) ^ -(u & 1));
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
L3_DECODE_CLONES int decode_coded_rows(const std::uint8_t* tile, const CodedTileParams& params, const TileOutput& o) {
  // A local copy: the compiler then knows the row stores below cannot alias
  // the parameters, and keeps them in registers.
  const CodedTileParams t = params;
  const PredictConsts k = predict_consts<CH>(t);
  // Plane values of a group's rows and of the row above it, used in turn
  // (row r in val[(r + 1) % kRing]); index 0 stands for x = -1 and holds a
  // copy of column 0 (spec §6.3) so that no pixel needs a branch.
  constexpr int kCols = (1 << core::kMaxTileWidthLog2) + 1;
  constexpr int kRing = kGroupRows + 1;
  V4 val[kRing][kCols];
  CodeRow<CH> code[kGroupRows];
  UpContext<CH> up_context;
  // The padding lane of 3-plane code rows is never written: keep it zero.
  if constexpr (CodeRow<CH>::CS != CH) __builtin_memset(code, 0, sizeof code);
  const bool full = o.x1 == t.width && o.y1 == t.height;
  bool constant_planes = false;
  for (int p = 0; p < CH; ++p) constant_planes |= t.plane[p].constant;
  const AnsSlots* slots = t.ans ? &ans_slots(t) : nullptr;
  std::uint32_t palette[core::kMaxPalette];
  if constexpr (CH == 1)
    for (std::uint32_t i = 0; i < t.palette_size; ++i)
      core::palette_word(tile, t, int(i), palette[i]);
  for (int r0 = 0; r0 < o.y1; r0 += kGroupRows) {
    const int g = std::min(kGroupRows, o.y1 - r0);
    // Pass 1: row by row, or by pairs in entropy-coded tiles.
    LaneState lane[kGroupRows];
    for (int i = 0; i < g; ++i) core::lane_begin(lane[i], tile, t, r0 + i);
    if (t.ans) {
      for (int i = 0; i < g; i += 2) {
        // rows: the row above the pair (the previous group's last row at i = 0), then the pair's.
        CodeRow<CH>* rows[3] = {&code[(i + kGroupRows - 1) % kGroupRows], &code[i], &code[i + 1 < g ? i + 1 : i]};
        ans_decode_codes<CH>(t, *slots, std::min(2, g - i), r0 + i == 0, &lane[i], rows, o.x1);
      }
    } else {
      for (int i = 0; i < g; ++i) {
        const int r = r0 + i;
        decode_row_codes<CH>(t, r == 0, constant_planes, slots, lane[i], up_context, code[i], o.x1);
        if (r + 1 < o.y1) prepare_up_context<CH>(code[i], up_context, t.run_mode, o.x1);
      }
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
    // Pixels, and the checks of each row's end.
    for (int i = 0; i < g; ++i) {
      const int r = r0 + i;
      const V4* cur = vals[i + 1];
      if (r >= o.y0) {
        std::uint8_t* out = o.out + std::size_t(r - o.y0) * o.stride;
        bool ok;
        if constexpr (CH == 1)
          ok = t.palette_size ? indices_to_pixels(palette, t, cur, o.x0, o.x1, out)
                              : row_to_pixels<CH>(t.transform, cur, o.x0, o.x1, out);
        else
          ok = row_to_pixels<CH>(t.transform, cur, o.x0, o.x1, out);
        if (!ok) return core::kCorruptTile;
      }
      LaneState& s = lane[i];
      if (full) {
        const int status = core::lane_end(s, t.row_length[r]);
        if (status != core::kOk) return status;
      } else if (s.error || s.br.past > 8) {
        return core::kCorruptTile;  // a valid stream never reads further past its end
      }
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

int decode_tile(const std::uint8_t* tile, std::uint32_t size, int w, int h, int channels, int version,
                const TileOutput& o) {
  switch (tile[0] & 3) {
    case core::kTileConstant: return decode_constant(tile, size, channels, o);
    case core::kTileRaw: return decode_raw(tile, size, w, h, channels, o);
    case core::kTileCoded: break;
    default: return core::kCorruptTile;
  }
  CodedTileParams t;
  const int status = core::parse_coded_tile(tile, size, w, h, channels, version, t);
  if (status != core::kOk) return status;
  switch (t.channels) {  // coded planes: 1 in a palette tile
    case 1: return decode_coded_tile<1>(tile, t, o);
    case 2: return decode_coded_tile<2>(tile, t, o);
    case 3: return decode_coded_tile<3>(tile, t, o);
    default: return decode_coded_tile<4>(tile, t, o);
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

// Decodes the tiles overlapping `region` into `out` (region-relative).
void decode_into(const detail::ParsedImage& img, const Rect& region, const MutableImageView& out,
                 const DecodeOptions& options) {
  const ImageInfo& info = img.info;
  const std::size_t stride = out.stride ? out.stride : std::size_t(out.width) * out.channels;
  const core::TileGrid::Span span = img.grid.overlapped({region.x, region.y, region.width, region.height});
  const std::uint32_t cols = span.cols, count = cols * span.rows;
  auto job = [&](std::uint32_t j) -> int {
    const std::uint32_t i = img.grid.index(span.tx0 + j % cols, span.ty0 + j / cols);
    const core::TileRect tr = img.grid.tile(i);
    // The part of the region inside this tile, in tile-local coordinates.
    const std::uint32_t x0 = std::max(region.x, tr.x), x1 = std::min(region.x + region.width, tr.x + tr.width);
    const std::uint32_t y0 = std::max(region.y, tr.y), y1 = std::min(region.y + region.height, tr.y + tr.height);
    TileOutput o{out.data + std::size_t(y0 - region.y) * stride + std::size_t(x0 - region.x) * info.channels, stride,
                 int(x0 - tr.x), int(y0 - tr.y), int(x1 - tr.x), int(y1 - tr.y)};
    return decode_tile(img.bytes.data() + img.tile_offset[i], img.tile_size(i), int(tr.width), int(tr.height),
                       int(info.channels), int(info.version), o);
  };
  const auto [bad, status] = run_parallel(count, options.threads, job);
  if (status != core::kOk) throw_tile_error(img.grid.index(span.tx0 + bad % cols, span.ty0 + bad / cols), status);
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
