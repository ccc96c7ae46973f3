// simd_rows_probe: what decoding a tile's rANS rows across SIMD lanes would
// gain over the CPU decoder's pair loop, measured before building
// (spec/codec.md §12, "The CPU rANS pass is bound by its state chain").
//
// Both sides run the same value step as codec/src/decode_codes.hpp's
// ans_read_units (slot -> token -> cumulative frequencies -> state, two
// 16-bit renormalisations, raw bits for tokens >= 16) with the same context
// rule shape (activity u(W) + u(N) + u(NW) / 2 -> bucket group -> one of 4
// tables per plane), over 256 x 32 tiles of 3 planes:
//   scalar: two rows in lockstep, one column apart, as the decoder's pair loop;
//   simd:   the 32 rows in the lanes of two AVX-512 registers, row i one
//           column behind row i - 1 (spec §8's wavefront): N and NW are the
//           previous steps' codes shifted by one lane, the loads are gathers.
// The row streams are random bytes, so tokens follow the tables' frequencies
// and renormalisations happen as often as in real rows. It is not a decoder:
// no zero runs, no zero rows, no end checks (the real pass has them). Both
// sides must produce the same codes for every tile (checked before timing);
// the figure is the ratio of their times on one core.
//
// Usage: simd_rows_probe [TILES [ROUNDS [FLATNESS]]]   (default 64 tiles, 7 rounds, 0.35)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_epi32(), which
// -Wuninitialized reports inside them (a known false positive): off here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

namespace {

constexpr int kRows = 32, kCols = 256, kPlanes = 3, kGroups = 4, kTokens = 28;
constexpr int kRunContext = kPlanes * kGroups, kContexts = kRunContext + 1;  // run lengths: the last context
constexpr int kActivity = 32;             // activities are clamped to kActivity - 1
constexpr int kSlotStride = 4096 + 64;    // a dword gather at the last slot reads 3 bytes past it
constexpr int kCumStride = 34;            // cum[t] and cum[t + 1] as one dword at t <= 32
constexpr int kStreamBytes = kCols * (kPlanes + 1) * 4 + 64;  // at most 4 bytes of units per value

struct Tables {
  alignas(64) std::uint8_t slot[kContexts][kSlotStride];
  alignas(64) std::uint16_t cum[kContexts][kCumStride];
  alignas(64) std::int32_t group_of[kPlanes][kActivity];  // activity -> bucket group
  alignas(64) std::int32_t raw_bits[32];
  alignas(64) std::int32_t base[32];
};

void make_tables(Tables& t, std::mt19937& rng, double flatness) {
  std::memset(&t, 0, sizeof t);
  for (int x = 0; x < kContexts; ++x) {
    // Geometric-like frequencies, flatter in higher groups, every token used.
    const double ratio = flatness + 0.12 * (x % kGroups) + 0.02 * std::uniform_real_distribution<>(0, 1)(rng);
    double w[kTokens], sum = 0;
    for (int i = 0; i < kTokens; ++i) sum += w[i] = std::max(1e-4, std::pow(ratio, i));
    int f[kTokens], total = 0;
    for (int i = 0; i < kTokens; ++i) total += f[i] = std::max(1, int(w[i] / sum * (4096 - kTokens)));
    f[0] += 4096 - total;
    int c = 0;
    for (int i = 0; i < kTokens; ++i) {
      t.cum[x][i] = std::uint16_t(c);
      std::memset(t.slot[x] + c, i, std::size_t(f[i]));
      c += f[i];
    }
    for (int i = kTokens; i < kCumStride; ++i) t.cum[x][i] = 4096;
  }
  for (int p = 0; p < kPlanes; ++p)
    for (int a = 0; a < kActivity; ++a) t.group_of[p][a] = a == 0 ? 0 : a < 4 ? 1 : a < 12 ? 2 : 3;
  for (int i = 0; i < 32; ++i) {
    t.raw_bits[i] = i < 16 ? 0 : 3 + ((i - 16) >> 1);
    t.base[i] = i < 16 ? i : (2 | (i & 1)) << t.raw_bits[i];
  }
}

// Codes of a tile: [row][column][plane], with a row -1 and a column -1 of
// zeros (the neighbours outside the tile) so that no pixel needs a branch.
constexpr std::size_t kTileCodes = std::size_t(kRows + 1) * (kCols + 1) * kPlanes;
inline std::size_t at(int r, int c, int p) {
  return (std::size_t(r + 1) * (kCols + 1) + std::size_t(c + 1)) * kPlanes + std::size_t(p);
}

std::uint32_t initial_state(const std::uint8_t* q) {
  std::uint32_t s;
  std::memcpy(&s, q, 4);
  return s | 0x80000000u;  // in [2^16, 2^32)
}

// ---- scalar: the decoder's value step, two rows in lockstep ----

struct Lane {
  std::uint32_t ans;
  const std::uint8_t* q;
  std::int32_t uw[kPlanes];
  int run_left = 0;
  bool blocked = false;
  int run_reads = 0;  // run lengths read (reported, not used)
};

inline std::uint32_t read_value(const Tables& t, Lane& s, int x) {
  std::uint32_t units;
  std::memcpy(&units, s.q, 4);
  const std::uint16_t* cum = t.cum[x];
  const std::uint32_t slot = s.ans & 4095u;
  const int tok = t.slot[x][slot];
  const std::uint32_t lo = cum[tok], f = std::uint32_t(cum[tok + 1]) - lo;
  std::uint32_t a = f * (s.ans >> 12) + slot - lo;
  const bool first = a < 65536u;
  a = first ? (a << 16) | (units & 0xffffu) : a;
  const int raw_bits = tok < 16 ? 0 : 3 + ((tok - 16) >> 1);
  const std::uint32_t raw = a & ((1u << raw_bits) - 1);
  a >>= raw_bits;
  const bool second = a < 65536u;
  a = second ? (a << 16) | (first ? units >> 16 : units & 0xffffu) : a;
  s.q += 2 * (int(first) + int(second));
  s.ans = a;
  return tok < 16 ? std::uint32_t(tok) : ((2u | std::uint32_t(tok & 1)) << raw_bits) | raw;
}

// Zero runs (kRunMode), as core::zero_run_step: a pixel continues a run,
// or, unless the lane is blocked, starts one (a run length read in the run
// context) when W's, N's and NW's codes are all zero; a run's pixels read
// nothing and have code 0.
inline bool scalar_run_step(const Tables& t, Lane& s, const std::int32_t* up, int c) {
  if (s.run_left > 0) {
    if (--s.run_left == 0) s.blocked = true;
    return true;
  }
  if (s.blocked) {
    s.blocked = false;
    return false;
  }
  int any = 0;
  for (int p = 0; p < kPlanes; ++p) any |= s.uw[p] | up[c * kPlanes + p] | up[(c - 1) * kPlanes + p];
  if (any != 0) return false;
  const int run = int(read_value(t, s, kRunContext));
  ++s.run_reads;
  if (run == 0) return false;
  s.run_left = run - 1;
  if (s.run_left == 0) s.blocked = true;
  return true;
}

// Pixel c of row r: W is the lane's own last code, N and NW the row above's
// (zeros above row 0 and left of column 0).
template <bool kRunMode>
inline void scalar_pixel(const Tables& t, Lane& s, const std::int32_t* up, std::int32_t* row, int c) {
  const bool zero = kRunMode && scalar_run_step(t, s, up, c);
  for (int p = 0; p < kPlanes; ++p) {
    const int un = up[c * kPlanes + p], unw = up[(c - 1) * kPlanes + p];
    const int a = std::min(s.uw[p] + un + (unw >> 1), kActivity - 1);
    const int x = p * kGroups + t.group_of[p][a];
    const std::int32_t u = zero ? 0 : std::int32_t(read_value(t, s, x));
    row[std::size_t(c) * kPlanes + std::size_t(p)] = u;
    s.uw[p] = u;
  }
  if (!zero) s.blocked = false;
}

// Returns the stream bytes the tile's rows consumed; adds the run lengths read to `run_reads`. Built for x86-64-v3 as
// the decoder's row loops are (their target_clones copy).
template <bool kRunMode>
__attribute__((noinline, target("arch=x86-64-v3"))) std::size_t scalar_tile(const Tables& t, const std::uint8_t* streams, std::int32_t* codes,
                                                                                   std::size_t& run_reads) {
  std::size_t consumed = 0;
  for (int r = 0; r < kRows; r += 2) {
    Lane a{initial_state(streams + std::size_t(r) * kStreamBytes), streams + std::size_t(r) * kStreamBytes + 4, {}};
    Lane b{initial_state(streams + std::size_t(r + 1) * kStreamBytes), streams + std::size_t(r + 1) * kStreamBytes + 4, {}};
    const std::int32_t* up = codes + at(r - 1, 0, 0);
    std::int32_t* row0 = codes + at(r, 0, 0);
    std::int32_t* row1 = codes + at(r + 1, 0, 0);
    scalar_pixel<kRunMode>(t, a, up, row0, 0);
    for (int c = 1; c < kCols; ++c) {
      scalar_pixel<kRunMode>(t, a, up, row0, c);
      scalar_pixel<kRunMode>(t, b, row0, row1, c - 1);
    }
    scalar_pixel<kRunMode>(t, b, row0, row1, kCols - 1);
    run_reads += std::size_t(a.run_reads + b.run_reads);
    consumed += std::size_t(a.q - (streams + std::size_t(r) * kStreamBytes)) +
                std::size_t(b.q - (streams + std::size_t(r + 1) * kStreamBytes));
  }
  return consumed;
}

// ---- simd: 16 rows across the lanes ----

#define L3_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512cd")))

// 16 rows' state: lane i is row r0 + i, one column behind lane i - 1.
struct SimdRows {
  __m512i ans, q;              // rANS states; next unit as a byte offset from the streams
  __m512i run_left;            // zero runs: pixels left
  __mmask16 blocked;
  __m512i w[kPlanes];          // each lane's last code (W)
  __m512i w_prev[kPlanes];     // the step before's (the lane below's NW)
};

struct SimdConsts {
  __m512i lo16, low_limit, clamp, one, two, slot_mask, raw_lo, raw_hi, base_lo, base_hi, group[kPlanes][2];
};

// Per context and slot, for the kEntries variant: slot - F (bits 0-11), the
// token's frequency (12-24) and the token (25-29): one gather instead of two.
struct Entries {
  alignas(64) std::uint32_t e[kContexts][4096];
};

// Filled per tile, as a decoder would (timed with the tile).
L3_AVX512 void fill_entries(const Tables& t, Entries& out) {
  for (int x = 0; x < kContexts; ++x)
    for (int i = 0; i < kTokens; ++i) {
      const std::uint32_t lo = t.cum[x][i], f = std::uint32_t(t.cum[x][i + 1]) - lo;
      const std::uint32_t tag = (f << 12) | (std::uint32_t(i) << 25);
      for (std::uint32_t j = 0; j < f; ++j) out.e[x][lo + j] = tag | j;
    }
}

// A value in context x (per lane) for the active lanes of `R` (others: 0).
template <bool kEntries>
L3_AVX512 inline __m512i simd_read(const Tables& t, const Entries& en, const SimdConsts& k, const std::uint8_t* streams,
                                   SimdRows& R, __mmask16 active, __m512i x) {
  const __m512i slot = _mm512_and_si512(R.ans, k.slot_mask);
  __m512i tok, st;
  if constexpr (kEntries) {
    const __m512i at = _mm512_add_epi32(_mm512_slli_epi32(x, 12), slot);
    const __m512i e = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), active, at, &en.e[0][0], 4);
    tok = _mm512_srli_epi32(e, 25);
    const __m512i f = _mm512_and_si512(_mm512_srli_epi32(e, 12), _mm512_set1_epi32(0x1fff));
    st = _mm512_add_epi32(_mm512_mullo_epi32(f, _mm512_srli_epi32(R.ans, 12)), _mm512_and_si512(e, k.slot_mask));
  } else {
    const __m512i slot_at = _mm512_add_epi32(_mm512_mullo_epi32(x, _mm512_set1_epi32(kSlotStride)), slot);
    tok = _mm512_and_si512(
        _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), active, slot_at, &t.slot[0][0], 1), _mm512_set1_epi32(0xff));
    const __m512i cum_at = _mm512_add_epi32(_mm512_mullo_epi32(x, _mm512_set1_epi32(kCumStride)), tok);
    const __m512i cum = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), active, cum_at, &t.cum[0][0], 2);
    const __m512i lo = _mm512_and_si512(cum, k.lo16);
    const __m512i f = _mm512_sub_epi32(_mm512_srli_epi32(cum, 16), lo);
    st = _mm512_add_epi32(_mm512_mullo_epi32(f, _mm512_srli_epi32(R.ans, 12)), _mm512_sub_epi32(slot, lo));
  }
  const __m512i units = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), active, R.q, streams, 1);
  const __mmask16 first = _mm512_mask_cmplt_epu32_mask(active, st, k.low_limit);
  st = _mm512_mask_or_epi32(st, first, _mm512_slli_epi32(st, 16), _mm512_and_si512(units, k.lo16));
  const __m512i raw_bits = _mm512_permutex2var_epi32(k.raw_lo, tok, k.raw_hi);
  const __m512i raw = _mm512_and_si512(st, _mm512_sub_epi32(_mm512_sllv_epi32(k.one, raw_bits), k.one));
  st = _mm512_srlv_epi32(st, raw_bits);
  const __mmask16 second = _mm512_mask_cmplt_epu32_mask(active, st, k.low_limit);
  const __m512i next = _mm512_mask_srli_epi32(_mm512_and_si512(units, k.lo16), first, units, 16);
  st = _mm512_mask_or_epi32(st, second, _mm512_slli_epi32(st, 16), next);
  R.q = _mm512_mask_add_epi32(R.q, first, R.q, k.two);
  R.q = _mm512_mask_add_epi32(R.q, second, R.q, k.two);
  R.ans = _mm512_mask_mov_epi32(R.ans, active, st);
  return _mm512_maskz_or_epi32(active, _mm512_permutex2var_epi32(k.base_lo, tok, k.base_hi), raw);
}

// The value of plane p for the active lanes of `R`, given their N and NW.
template <bool kEntries>
L3_AVX512 inline __m512i simd_value(const Tables& t, const Entries& en, const SimdConsts& k, const std::uint8_t* streams,
                                    SimdRows& R, __mmask16 active, int p, __m512i n, __m512i nw) {
  __m512i a = _mm512_add_epi32(_mm512_add_epi32(R.w[p], n), _mm512_srai_epi32(nw, 1));
  a = _mm512_min_epi32(a, k.clamp);
  const __m512i group = _mm512_permutex2var_epi32(k.group[p][0], a, k.group[p][1]);
  const __m512i x = _mm512_add_epi32(group, _mm512_set1_epi32(p * kGroups));
  return simd_read<kEntries>(t, en, k, streams, R, active, x);
}

// scalar_run_step for the active lanes of `R`: returns the lanes whose pixel
// is in a run. The run length read happens only when a lane needs one.
template <bool kEntries>
L3_AVX512 inline __mmask16 simd_run_step(const Tables& t, const Entries& en, const SimdConsts& k,
                                         const std::uint8_t* streams, SimdRows& R, __mmask16 active, const __m512i* n,
                                         const __m512i* nw) {
  const __m512i zero = _mm512_setzero_si512();
  const __mmask16 running = _mm512_mask_cmpgt_epi32_mask(active, R.run_left, zero);
  R.run_left = _mm512_mask_sub_epi32(R.run_left, running, R.run_left, k.one);
  const __mmask16 run_ends = _mm512_mask_cmpeq_epi32_mask(running, R.run_left, zero);
  const __mmask16 unblocked = active & ~running & R.blocked;
  R.blocked = (R.blocked & ~unblocked) | run_ends;
  __m512i any = zero;
  for (int p = 0; p < kPlanes; ++p) any = _mm512_or_si512(any, _mm512_or_si512(R.w[p], _mm512_or_si512(n[p], nw[p])));
  const __mmask16 starts = _mm512_mask_cmpeq_epi32_mask(active & ~running & ~unblocked, any, zero);
  __mmask16 in_run = running;
  if (starts) {
    const __m512i run = simd_read<kEntries>(t, en, k, streams, R, starts, _mm512_set1_epi32(kRunContext));
    const __mmask16 begun = _mm512_mask_cmpneq_epi32_mask(starts, run, zero);
    R.run_left = _mm512_mask_sub_epi32(R.run_left, begun, run, k.one);
    R.blocked |= _mm512_mask_cmpeq_epi32_mask(begun, R.run_left, zero);
    in_run |= begun;
  }
  return in_run;
}

L3_AVX512 void simd_rows_init(SimdRows& R, const std::uint8_t* streams, int r0) {
  alignas(64) std::int32_t q0[16];
  alignas(64) std::uint32_t s0[16];
  for (int i = 0; i < 16; ++i) {
    s0[i] = initial_state(streams + std::size_t(r0 + i) * kStreamBytes);
    q0[i] = std::int32_t(std::size_t(r0 + i) * kStreamBytes + 4);
  }
  R.ans = _mm512_load_si512(s0);
  R.q = _mm512_load_si512(q0);
  R.run_left = _mm512_setzero_si512();
  R.blocked = 0;
  for (int p = 0; p < kPlanes; ++p) R.w[p] = R.w_prev[p] = _mm512_setzero_si512();
}

// The tile's 32 rows in two registers, A (rows 0-15) and B (rows 16-31): row
// i decodes column s - i at step s, so the two are independent chains within
// a step, and every neighbour is in a register: A's lane 0 has zeros above
// (the tile's first row), B's lane 0 takes A's lane 15. `diag` receives the
// codes by step ([step][plane][32 rows]); they are then written by row.
template <bool kRunMode, bool kEntries>
L3_AVX512 __attribute__((noinline)) void simd_tile(const Tables& t, Entries& en, const std::uint8_t* streams,
                                                  std::int32_t* codes, std::int32_t* diag) {
  if constexpr (kEntries) fill_entries(t, en);
  SimdConsts k;
  k.lo16 = _mm512_set1_epi32(0xffff);
  k.low_limit = _mm512_set1_epi32(65536);
  k.clamp = _mm512_set1_epi32(kActivity - 1);
  k.one = _mm512_set1_epi32(1);
  k.two = _mm512_set1_epi32(2);
  k.slot_mask = _mm512_set1_epi32(4095);
  k.raw_lo = _mm512_load_si512(t.raw_bits);
  k.raw_hi = _mm512_load_si512(t.raw_bits + 16);
  k.base_lo = _mm512_load_si512(t.base);
  k.base_hi = _mm512_load_si512(t.base + 16);
  for (int p = 0; p < kPlanes; ++p) {
    k.group[p][0] = _mm512_load_si512(t.group_of[p]);
    k.group[p][1] = _mm512_load_si512(t.group_of[p] + 16);
  }
  const __m512i lane_ids = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  // Lane i takes lane i - 1 of the same register; lane 0 of B takes lane 15 of A.
  const __m512i shift_a = _mm512_setr_epi32(0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14);
  const __m512i shift_b = _mm512_setr_epi32(15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30);
  SimdRows A, B;
  simd_rows_init(A, streams, 0);
  simd_rows_init(B, streams, 16);
  constexpr int kSteps = kCols + kRows - 1;
  for (int s = 0; s < kSteps; ++s) {
    const __m512i col_a = _mm512_sub_epi32(_mm512_set1_epi32(s), lane_ids);
    const __m512i col_b = _mm512_sub_epi32(col_a, _mm512_set1_epi32(16));
    const __m512i zero = _mm512_setzero_si512(), cols = _mm512_set1_epi32(kCols);
    const __mmask16 active_a = _mm512_cmpge_epi32_mask(col_a, zero) & _mm512_cmplt_epi32_mask(col_a, cols);
    const __mmask16 active_b = _mm512_cmpge_epi32_mask(col_b, zero) & _mm512_cmplt_epi32_mask(col_b, cols);
    __m512i n_a[kPlanes], nw_a[kPlanes], n_b[kPlanes], nw_b[kPlanes];
    for (int p = 0; p < kPlanes; ++p) {
      n_a[p] = _mm512_maskz_permutexvar_epi32(0xfffe, shift_a, A.w[p]);
      nw_a[p] = _mm512_maskz_permutexvar_epi32(0xfffe, shift_a, A.w_prev[p]);
      n_b[p] = _mm512_permutex2var_epi32(A.w[p], shift_b, B.w[p]);
      nw_b[p] = _mm512_permutex2var_epi32(A.w_prev[p], shift_b, B.w_prev[p]);
    }
    __mmask16 read_a = active_a, read_b = active_b;  // lanes not in a zero run
    if constexpr (kRunMode) {
      read_a = __mmask16(read_a & ~simd_run_step<kEntries>(t, en, k, streams, A, active_a, n_a, nw_a));
      read_b = __mmask16(read_b & ~simd_run_step<kEntries>(t, en, k, streams, B, active_b, n_b, nw_b));
    }
    for (int p = 0; p < kPlanes; ++p) {
      const __m512i va = simd_value<kEntries>(t, en, k, streams, A, read_a, p, n_a[p], nw_a[p]);
      const __m512i vb = simd_value<kEntries>(t, en, k, streams, B, read_b, p, n_b[p], nw_b[p]);
      A.w_prev[p] = A.w[p];
      B.w_prev[p] = B.w[p];
      // Lanes before their column 0 keep 0 (W and NW there are 0).
      A.w[p] = _mm512_mask_mov_epi32(A.w[p], active_a, va);
      B.w[p] = _mm512_mask_mov_epi32(B.w[p], active_b, vb);
      std::int32_t* d = diag + (std::size_t(s) * kPlanes + std::size_t(p)) * 32;
      _mm512_store_si512(d, va);
      _mm512_store_si512(d + 16, vb);
    }
    if constexpr (kRunMode) {  // a pixel outside a run unblocks its lane
      A.blocked &= ~read_a;
      B.blocked &= ~read_b;
    }
  }
  // By row (a pass 2 across the lanes would read the diagonals as they are).
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < kCols; ++c)
      for (int p = 0; p < kPlanes; ++p)
        codes[at(r, c, p)] = diag[(std::size_t(c + r) * kPlanes + std::size_t(p)) * 32 + std::size_t(r)];
}

double thread_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

}  // namespace

// One mode's check and timing; 0 when every variant's codes equal the scalar side's.
template <bool kRunMode>
int measure(int tiles, int rounds, const std::vector<Tables>& tables, const std::vector<std::uint8_t>& streams) {
  const std::size_t tile_codes = kTileCodes;
  std::vector<std::int32_t> a(tile_codes * std::size_t(tiles)), b(a.size());
  std::vector<std::int32_t> diag_store(std::size_t(kCols + kRows) * kPlanes * 32 + 16);
  std::int32_t* diag = reinterpret_cast<std::int32_t*>((reinterpret_cast<std::uintptr_t>(diag_store.data()) + 63) & ~std::uintptr_t(63));
  std::size_t consumed = 0, run_reads = 0;
  auto run_scalar = [&] {
    consumed = 0;
    run_reads = 0;
    for (int i = 0; i < tiles; ++i)
      consumed += scalar_tile<kRunMode>(tables[std::size_t(i)], streams.data() + std::size_t(i) * kRows * kStreamBytes, a.data() + tile_codes * std::size_t(i), run_reads);
  };
  std::vector<Entries> entries(1);
  auto run_simd = [&](bool with_entries) {
    for (int i = 0; i < tiles; ++i) {
      const std::uint8_t* tile_streams = streams.data() + std::size_t(i) * kRows * kStreamBytes;
      std::int32_t* out = b.data() + tile_codes * std::size_t(i);
      if (with_entries) simd_tile<kRunMode, true>(tables[std::size_t(i)], entries[0], tile_streams, out, diag);
      else simd_tile<kRunMode, false>(tables[std::size_t(i)], entries[0], tile_streams, out, diag);
    }
  };
  run_scalar();
  for (bool with_entries : {false, true}) {
    std::fill(b.begin(), b.end(), 0);
    run_simd(with_entries);
    if (a == b) continue;
    std::size_t i = 0;
    while (a[i] == b[i]) ++i;
    std::fprintf(stderr, "simd_rows_probe: codes differ at tile %zu row %zu column %zu plane %zu: scalar %d, simd %d\n",
                 i / tile_codes, i % tile_codes / ((kCols + 1) * kPlanes) - 1, i % ((kCols + 1) * kPlanes) / kPlanes - 1,
                 i % kPlanes, a[i], b[i]);
    return 1;
  }
  std::uint64_t sum = 0;
  for (std::int32_t v : a) sum += std::uint32_t(v);
  double best_scalar = 1e30, best_simd = 1e30, best_entries = 1e30;
  for (int r = 0; r < rounds; ++r) {
    double t0 = thread_seconds();
    run_scalar();
    best_scalar = std::min(best_scalar, thread_seconds() - t0);
    t0 = thread_seconds();
    run_simd(false);
    best_simd = std::min(best_simd, thread_seconds() - t0);
    t0 = thread_seconds();
    run_simd(true);
    best_entries = std::min(best_entries, thread_seconds() - t0);
  }
  const double values = double(kRows) * kCols * kPlanes * tiles;
  std::size_t zeros = 0;
  for (std::int32_t v : a) zeros += v == 0;
  zeros -= kTileCodes - std::size_t(kRows) * kCols * kPlanes;  // the padding
  std::printf("%s: tiles %d (256x32, 3 planes), %.0f samples (%.1f%% zero), %.1f run lengths read per 1000 pixels, "
              "%.2f stream bits per sample, codes equal (sum %llu)\n",
              kRunMode ? "zero runs on" : "zero runs off", tiles, values, 100.0 * double(zeros) / values,
              1000.0 * double(run_reads) * kPlanes / values,
              double(consumed) * 8 / values, static_cast<unsigned long long>(sum));
  std::printf("scalar pair loop  %.3f ms  %.2f ns/sample\n", best_scalar * 1e3, best_scalar * 1e9 / values);
  std::printf("simd 32 lanes     %.3f ms  %.2f ns/sample\n", best_simd * 1e3, best_simd * 1e9 / values);
  std::printf("simd 32 lanes, one gather for token and frequency (tables filled per tile)  %.3f ms  %.2f ns/sample\n",
              best_entries * 1e3, best_entries * 1e9 / values);
  std::printf("simd / scalar speed: %.2fx; with the one-gather tables %.2fx\n", best_scalar / best_simd,
              best_scalar / best_entries);
  return 0;
}

int main(int argc, char** argv) {
  const int tiles = argc > 1 ? std::atoi(argv[1]) : 64;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 7;
  // Token frequencies fall by this ratio per token in group 0 (0.12 more per
  // group): lower is more skewed, fewer stream bits per value.
  const double flatness = argc > 3 ? std::atof(argv[3]) : 0.35;
  if (tiles < 1 || rounds < 1 || !(flatness > 0.05 && flatness < 0.6)) {
    std::fprintf(stderr, "usage: simd_rows_probe [TILES [ROUNDS [FLATNESS in (0.05, 0.6)]]]\n");
    return 2;
  }
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
      !__builtin_cpu_supports("avx512vl") || !__builtin_cpu_supports("avx512dq")) {
    std::fprintf(stderr, "simd_rows_probe: this CPU has no AVX-512 (F, BW, VL, DQ): nothing measured\n");
    return 1;
  }
  std::mt19937 rng(12);
  std::vector<Tables> tables(static_cast<std::size_t>(tiles));
  std::vector<std::uint8_t> streams(std::size_t(tiles) * kRows * kStreamBytes);
  for (auto& t : tables) make_tables(t, rng, flatness);
  for (auto& b : streams) b = std::uint8_t(rng());
  const int status = measure<false>(tiles, rounds, tables, streams);
  return status != 0 ? status : measure<true>(tiles, rounds, tables, streams);
}
