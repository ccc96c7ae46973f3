// The CPU decoder's row loops, part 1 (decoder.cpp, spec/codec.md §6-§7):
// what both passes share (a tile's output, the x86-64-v3 clones, the vector
// type) and pass 1, the residual codes of a row: Rice codes (§7.2) or rANS
// tokens (§7.4), zero runs (§6.4), rows of entropy-coded tiles in pairs.
// decode_rows.hpp is pass 2 and the tile loop. Included by the
// decode_coded_<N>.cpp files, each instantiating one plane count: the
// functions keep internal linkage (an unnamed namespace), as the
// target_clones of decode_rows.hpp want.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "l3/codec/tile_core.hpp"
#include "l3/common/target_clones.hpp"
#include "decode_coded.hpp"

namespace l3 {
namespace {  // internal linkage: see above

using core::CodedTileParams;
using core::LaneState;

using detail::AnsSlots;
using detail::ans_slots;
using detail::TileOutput;

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

// Loops over the planes of a pixel must unroll: the neighbour arrays then
// live in registers.
#if defined(__clang__)
#define L3_PLANES _Pragma("unroll")
#elif defined(__GNUC__)
#define L3_PLANES _Pragma("GCC unroll 4")
#else
#define L3_PLANES
#endif

// BitReader::refill for the CPU row loops: the 8-byte load whenever the 8
// bytes lie before `read_end` (the end of the tile's bytes), not only before
// the row stream's end, so that a row's last bytes do not take the byte
// loop (it was 2-3% of single-thread decode time on photos). Bytes past the
// row's end then enter the buffer instead of zeros; the bits of a valid
// stream never include them (its codes end inside the row), and
// consumed_bits still counts every bit taken, so the end checks (§7.3,
// core::lane_end, lane_end_partial) find an overrun exactly as before.
// kCheck = false: the caller knows that every load of the row lies before
// read_end (kRowReach), and no test is made.
template <bool kCheck = true>
L3_DECODE_INLINE void refill_cpu(core::BitReader& br, const std::uint8_t* read_end) {
  if (!kCheck || read_end - br.p >= core::kLoadBytes) [[likely]] {
    br.refill_load();
    return;
  }
  br.refill();
}

// Rice decode (spec §7.2) for the CPU row loop; the same values as
// core::read_rice, in fewer instructions on the common path.
template <bool kCheck>
L3_DECODE_INLINE std::uint32_t read_rice_cpu(core::BitReader& br, int k, const std::uint8_t* read_end) {
  if (br.avail < int(core::kEscapeZeros + core::kEscapeBits)) refill_cpu<kCheck>(br, read_end);  // a symbol is at most 30 bits
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

// The rANS rows of the pair loop below (ans_decode_codes) read their 16-bit
// units straight from the bytes through a pointer instead of a bit buffer:
// after its 32-bit initial state a row stream holds nothing but whole units
// (spec §7.4). The two units at q, big-endian (a value renormalises at most
// twice); near the stream's end (kCheck) the bytes up to read_end and zeros
// after them, as BitReader::refill gives them.
template <bool kCheck>
L3_DECODE_INLINE std::uint32_t ans_units(const std::uint8_t* q, const std::uint8_t* read_end) {
  if (!kCheck || read_end - q >= 4) [[likely]] {
    std::uint32_t w;
    std::memcpy(&w, q, 4);
    return __builtin_bswap32(w);
  }
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | (read_end - q > i ? q[i] : 0u);
  return v;
}

// core::ans_read's value in context x, for the CPU row loop, with the units
// read at q (advanced past those taken): the token from the slot table, and
// no data-dependent branch (whether a renormalisation happens, or raw bits
// follow, is close to random on photos).
template <bool kCheck>
L3_DECODE_INLINE std::uint32_t ans_read_units(LaneState& s, const std::uint8_t*& q, const CodedTileParams& t,
                                              const AnsSlots& slots, int x, const std::uint8_t* read_end) {
  const std::uint32_t units = ans_units<kCheck>(q, read_end);
  const std::uint16_t* cum = t.ans_cum[x];
  const std::uint32_t slot = s.ans & (core::kAnsTotal - 1);
  const int tok = slots.row[x][slot];
  const std::uint32_t lo = cum[tok], f = std::uint32_t(cum[tok + 1]) - lo;
  s.error |= f == 0;  // an unused context
  std::uint32_t a = f * (s.ans >> core::kAnsPrecisionBits) + slot - lo;
  const bool first = a < core::kAnsLow;
  a = first ? (a << 16) | (units >> 16) : a;
  const int raw_bits = core::ans_raw_bits(tok);
  const std::uint32_t raw = a & ((1u << raw_bits) - 1);
  a >>= raw_bits;
  const bool second = a < core::kAnsLow;
  a = second ? (a << 16) | (first ? units & 0xffffu : units >> 16) : a;
  q += 2 * (int(first) + int(second));
  s.ans = a;
  return core::ans_value(tok, raw);
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

// A zero row (version 4, spec §4.3): every code of columns [-1, x1) is 0,
// column -1 included (the row below reads it as NW at its column 0). Nothing
// is read: the row's stream is empty.
template <int CH>
L3_DECODE_INLINE void zero_row_codes(CodeRow<CH>& row, int x1) {
  zero_codes(row, -1, x1 + 1);
}

// Pass 1: the residual codes of columns [0, x1) of one row, the CPU
// counterpart of the code half of core::decode_pixel. kFirstRow: the tile's
// first row, where N = NW = W (spec §6.3), so the activity is
// u(W) + u(W) + (u(W) >> 1) and only W's codes decide a run. kRunMode: the
// tile has zero runs (t.run_mode); without, no pixel starts one and pix_or
// is not needed. Rice-coded tiles only: entropy-coded ones take the pair
// loop (ans_decode_codes).
template <int CH, bool kFirstRow, bool kConstantPlanes, bool kRunMode, bool kCheck>
L3_DECODE_INLINE void decode_row_codes(const CodedTileParams& t, LaneState& lane, const UpContext<CH>& up,
                                       CodeRow<CH>& row, int x1, const std::uint8_t* read_end) {
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
        [&](core::BitReader& br, int k) __attribute__((always_inline)) { return read_rice_cpu<kCheck>(br, k, read_end); });
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
      if (p % 2 == 0 && !zero) {
        refill_cpu<kCheck>(s.br, read_end);
        // refill() leaves at least 56 bits (avail | 56 on its fast path):
        // telling the compiler drops the next read's own check.
        if (s.br.avail < 56) __builtin_unreachable();
      }
      int a = kFirstRow ? uw[p] + uw[p] + (uw[p] >> 1) : uw[p] + up.ctx[c][p];
      if (p > 0) a = core::with_previous_code(t.plane[p], a, uw[p - 1]);  // uw[p - 1]: this pixel's by now
      std::uint32_t u = 0;
      // Constant planes read nothing (spec §4.3); tiles without any (most)
      // take a copy of the loop without the test: 1-2% faster on photos.
      if (!zero && (!kConstantPlanes || !t.plane[p].constant))
        u = read_rice_cpu<kCheck>(s.br, core::k_for_activity(t.plane[p], a), read_end);
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

// How far past the reader's position at its start a row's refills may load:
// at most a run length and CH values per pixel (spec §6.4), each at most
// 30 bits as a Rice code (§7.2) or 32 as a rANS value (two 16-bit
// renormalisations, §7.4), buffered at most 8 bytes ahead, plus the 8 loaded.
template <int CH>
inline constexpr std::ptrdiff_t kRowReach = (1 << core::kMaxTileWidthLog2) * (CH + 1) * 4 + 16;

// The variant of the code pass for a Rice-coded tile. Rows that start at
// least kRowReach bytes before read_end (all but the stream's last few KB)
// take a copy of the loop whose refills test nothing.
template <int CH, bool kFirstRow, bool kCheck>
L3_DECODE_INLINE void decode_rice_row_codes(const CodedTileParams& t, bool constant_planes, const std::uint8_t* read_end,
                                            LaneState& lane, const UpContext<CH>& up, CodeRow<CH>& row, int x1) {
  if (t.run_mode) {
    if (constant_planes) decode_row_codes<CH, kFirstRow, true, true, kCheck>(t, lane, up, row, x1, read_end);
    else decode_row_codes<CH, kFirstRow, false, true, kCheck>(t, lane, up, row, x1, read_end);
  } else {
    if (constant_planes) decode_row_codes<CH, kFirstRow, true, false, kCheck>(t, lane, up, row, x1, read_end);
    else decode_row_codes<CH, kFirstRow, false, false, kCheck>(t, lane, up, row, x1, read_end);
  }
}

template <int CH, bool kFirstRow>
L3_DECODE_INLINE void decode_row_codes(const CodedTileParams& t, bool constant_planes, const std::uint8_t* read_end,
                                       LaneState& lane, const UpContext<CH>& up, CodeRow<CH>& row, int x1) {
  if (read_end - lane.br.p >= kRowReach<CH>) {
    decode_rice_row_codes<CH, kFirstRow, false>(t, constant_planes, read_end, lane, up, row, x1);
  } else {
    decode_rice_row_codes<CH, kFirstRow, true>(t, constant_planes, read_end, lane, up, row, x1);
  }
}

template <int CH>
L3_DECODE_INLINE void decode_row_codes(const CodedTileParams& t, bool first_row, bool constant_planes,
                                       const std::uint8_t* read_end, LaneState& lane, const UpContext<CH>& up,
                                       CodeRow<CH>& row, int x1) {
  if (first_row) decode_row_codes<CH, true>(t, constant_planes, read_end, lane, up, row, x1);
  else decode_row_codes<CH, false>(t, constant_planes, read_end, lane, up, row, x1);
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
  LaneState s;  // its bit reader unused meanwhile: q reads the units
  const std::uint8_t* q;  // the row's next 16-bit unit (ans_read_units)
  int uw[CH];  // W's codes
  int or_w;    // their OR
};

// The codes of pixel c of one row of an entropy-coded tile (the code half of
// core::decode_pixel, as decode_row_codes).
template <int CH, bool kFirstRow, bool kRunMode, bool kCheck>
L3_DECODE_INLINE void ans_code_step(const CodedTileParams& t, const AnsSlots& slots, const std::uint8_t* read_end, AnsRowState<CH>& st,
                                    const CodeRow<CH>& up, CodeRow<CH>& row, int c) {
  LaneState& s = st.s;
  const bool zero = kRunMode && core::zero_run_step(
      t, s, c,
      [&]() __attribute__((always_inline)) {
        return (st.or_w | (kFirstRow ? 0 : up.pix_or[c + 1] | up.pix_or[c])) == 0;
      },
      [&](core::BitReader&, int) __attribute__((always_inline)) {
        return ans_read_units<kCheck>(s, st.q, t, slots, core::kAnsRunContext, read_end);
      });
  int or_c = 0;
  L3_PLANES for (int p = 0; p < CH; ++p) {
    // Activity u(W) + u(N) + (u(NW) >> 1) (spec §6.2).
    int a = kFirstRow ? st.uw[p] + st.uw[p] + (st.uw[p] >> 1) : st.uw[p] + up.code[c + 1][p] + (up.code[c][p] >> 1);
    if (p > 0) a = core::with_previous_code(t.plane[p], a, st.uw[p - 1]);
    std::uint32_t u = 0;
    if (!zero && !t.plane[p].constant)
      u = ans_read_units<kCheck>(s, st.q, t, slots, p * core::kAnsGroups + core::k_for_activity(t.plane[p], a), read_end);
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
template <int CH, bool kFirstPair, bool kRunMode, bool kCheck, int I>
L3_DECODE_INLINE void ans_code_step_checked(const CodedTileParams& t, const AnsSlots& slots, const std::uint8_t* read_end, AnsRowState<CH>* st,
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
  ans_code_step<CH, kFirstRow, kRunMode, kCheck>(t, slots, read_end, st[I], *rows[I], *rows[I + 1], c);
  if (c == 0) {
    for (int p = 0; p < CodeRow<CH>::CS; ++p) rows[I + 1]->code[0][p] = rows[I + 1]->code[1][p];
    rows[I + 1]->pix_or[0] = rows[I + 1]->pix_or[1];
  }
}

// The code pass of G <= 2 rows of an entropy-coded tile, columns [0, x1):
// rows[0] holds the codes of the row above (unused when kFirstPair: the
// tile's first row is row 0 of the pair), rows[1..G] receive the rows'.
template <int CH, int G, bool kFirstPair, bool kRunMode, bool kCheck>
L3_DECODE_CLONES void ans_decode_codes(const CodedTileParams& t, const AnsSlots& slots, const std::uint8_t* read_end, LaneState* lanes,
                                       CodeRow<CH>* const* rows, int x1) {
  AnsRowState<CH> st[G] = {};  // uw, or_w: set at each row's column 0
  for (int i = 0; i < G; ++i) {
    st[i].s = lanes[i];
    // The first unread byte: lane_begin read whole bytes (the 32-bit state).
    const core::BitReader& br = lanes[i].br;
    st[i].q = br.p + br.past - (br.avail >> 3);
  }
  int s = 0;
  for (; s < G; ++s) {  // the columns 0
    ans_code_step_checked<CH, kFirstPair, kRunMode, kCheck, 0>(t, slots, read_end, st, rows, s, x1);
    if constexpr (G == 2) ans_code_step_checked<CH, kFirstPair, kRunMode, kCheck, 1>(t, slots, read_end, st, rows, s, x1);
  }
  for (; s < x1; ++s) {  // both rows have a column in [1, x1)
    ans_code_step<CH, kFirstPair, kRunMode, kCheck>(t, slots, read_end, st[0], *rows[0], *rows[1], s);
    if constexpr (G == 2) ans_code_step<CH, false, kRunMode, kCheck>(t, slots, read_end, st[1], *rows[1], *rows[2], s - 1);
  }
  // The second row's last column (its column 0 was in the first loop when x1 = 1).
  if constexpr (G == 2)
    if (x1 >= 2) ans_code_step<CH, false, kRunMode, kCheck>(t, slots, read_end, st[1], *rows[1], *rows[2], x1 - 1);
  for (int i = 0; i < G; ++i) {
    // The bit reader where q stopped, empty: consumed_bits counts the units
    // read, past the stream's end too, for the end checks (spec §7.3).
    lanes[i] = st[i].s;
    lanes[i].br.init(st[i].q, lanes[i].br.end);
  }
}

template <int CH>
void ans_decode_codes(const CodedTileParams& t, const AnsSlots& slots, const std::uint8_t* read_end, int g, bool first, LaneState* lanes,
                      CodeRow<CH>* const* rows, int x1) {
  // Rows whose every load lies before read_end (kRowReach from where each
  // starts) refill without a bounds test, as Rice-coded rows do.
  bool far = true;
  for (int i = 0; i < g; ++i) far &= read_end - lanes[i].br.p >= kRowReach<CH>;
  const auto run = [&]<int G>() {
    const auto pick = [&]<bool kCheck>() {
      if (first) {
        if (t.run_mode) ans_decode_codes<CH, G, true, true, kCheck>(t, slots, read_end, lanes, rows, x1);
        else ans_decode_codes<CH, G, true, false, kCheck>(t, slots, read_end, lanes, rows, x1);
      } else {
        if (t.run_mode) ans_decode_codes<CH, G, false, true, kCheck>(t, slots, read_end, lanes, rows, x1);
        else ans_decode_codes<CH, G, false, false, kCheck>(t, slots, read_end, lanes, rows, x1);
      }
    };
    if (far) pick.template operator()<false>();
    else pick.template operator()<true>();
  };
  if (g == 2) run.template operator()<2>();
  else run.template operator()<1>();
}

// The code pass of rows r and r + 1 (g = 2) or of row r alone (g = 1) of an
// entropy-coded tile: in lockstep, or, when one of them is a zero row (spec
// §4.3), that one as zeros and the other alone. rows as for ans_decode_codes.
template <int CH>
void ans_decode_rows(const CodedTileParams& t, const AnsSlots& slots, const std::uint8_t* read_end, int g, int r, LaneState* lanes,
                     CodeRow<CH>* const* rows, int x1) {
  const bool zero0 = core::is_zero_row(t, r), zero1 = g == 2 && core::is_zero_row(t, r + 1);
  if (!zero0 && !zero1) return ans_decode_codes<CH>(t, slots, read_end, g, r == 0, lanes, rows, x1);
  if (zero0) zero_row_codes(*rows[1], x1);
  else ans_decode_codes<CH>(t, slots, read_end, 1, r == 0, lanes, rows, x1);
  if (g < 2) return;
  // The second row, below the first: rows + 1 = {the first row, its own}.
  if (zero1) zero_row_codes(*rows[2], x1);
  else ans_decode_codes<CH>(t, slots, read_end, 1, false, lanes + 1, rows + 1, x1);
}

// ---- Tiles with pixel copies (version 6, spec §6.6) ---------------------------

// The copies of a row, in column order: `count` spans of copied pixels.
struct CopySpans {
  struct Span {
    int c, n, dy, dx;  // columns [c, c + n), each from (r + dy, column + dx)
  };
  Span span[(1 << core::kMaxTileWidthLog2) / core::kMinCopy + 1];
  int count;
};

// Pass 1 of one row of a tile with copies: row by row (not in pairs), so that
// a copy's pixels are set at once (codes 0, no bits) and recorded as a span
// for pass 2; the other pixels as ans_code_step codes them. `up`: the codes
// of the row above (unused on the tile's first row).
template <int CH, bool kFirstRow, bool kRunMode>
L3_DECODE_CLONES void ans_copy_row_codes(const CodedTileParams& t, const AnsSlots& slots, const std::uint8_t* read_end,
                                         LaneState& lane, const CodeRow<CH>& up, CodeRow<CH>& row, CopySpans& spans,
                                         int r, int x1) {
  AnsRowState<CH> st = {};
  st.s = lane;
  const core::BitReader& br = lane.br;
  st.q = br.p + br.past - (br.avail >> 3);  // as ans_decode_codes
  // W's codes at column 0: a copy of N's (zero on the tile's first row).
  L3_PLANES for (int p = 0; p < CH; ++p) {
    st.uw[p] = kFirstRow ? 0 : up.code[1][p];
    st.or_w |= st.uw[p];
  }
  spans.count = 0;
  for (int c = 0; c < x1;) {
    const bool copied = core::copy_step(t, st.s, r, c, [&](int x) __attribute__((always_inline)) {
      return ans_read_units<true>(st.s, st.q, t, slots, x, read_end);
    });
    if (copied) {
      // The whole copy, or its part left of a crop's end (copy_step counts down the rest).
      const int n = std::min(st.s.copy_left + 1, x1 - c);
      st.s.copy_left -= n - 1;
      zero_codes(row, c, n);
      spans.span[spans.count++] = {c, n, st.s.copy_dy, st.s.copy_dx};
      L3_PLANES for (int p = 0; p < CH; ++p) st.uw[p] = 0;
      st.or_w = 0;
      c += n;
      continue;
    }
    ans_code_step<CH, kFirstRow, kRunMode, true>(t, slots, read_end, st, up, row, c);
    ++c;
  }
  for (int p = 0; p < CodeRow<CH>::CS; ++p) row.code[0][p] = row.code[1][p];  // column -1
  row.pix_or[0] = row.pix_or[1];
  lane = st.s;
  lane.br.init(st.q, lane.br.end);  // as ans_decode_codes: the end checks count the units read
}

// ans_copy_row_codes for row r, or a zero row (spec §4.3: no copies either).
template <int CH>
void ans_copy_rows(const CodedTileParams& t, const AnsSlots& slots, const std::uint8_t* read_end, LaneState& lane,
                   const CodeRow<CH>& up, CodeRow<CH>& row, CopySpans& spans, int r, int x1) {
  if (core::is_zero_row(t, r)) {
    zero_row_codes(row, x1);
    spans.count = 0;
  } else if (r == 0) {
    if (t.run_mode) ans_copy_row_codes<CH, true, true>(t, slots, read_end, lane, up, row, spans, r, x1);
    else ans_copy_row_codes<CH, true, false>(t, slots, read_end, lane, up, row, spans, r, x1);
  } else {
    if (t.run_mode) ans_copy_row_codes<CH, false, true>(t, slots, read_end, lane, up, row, spans, r, x1);
    else ans_copy_row_codes<CH, false, false>(t, slots, read_end, lane, up, row, spans, r, x1);
  }
}

}  // namespace
}  // namespace l3
