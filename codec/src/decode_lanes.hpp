// The CPU decoder's passes 1 and 2 for 3-plane coded tiles across AVX-512
// lanes (spec/codec.md §6, §7.2, §7.4, §8; measured in §12 and
// bench/simd_rows_probe.cpp): the tile's 32 rows in the 16 lanes of two
// registers, row i one column behind row i - 1 (§8's wavefront), so that N
// and NW are the last two steps' codes and plane values shifted by one lane.
// Each step decodes a pixel's codes and predicts its values (the scalar
// loops' two passes in one); the values go to rows for row_to_pixels. Two
// coders plug into the one wavefront (lanes_values):
//   - AnsCoder, entropy-coded tiles (§7.4): each value is one gather of a
//     32-bit slot entry (slot - F, f and the token) and one of the row's
//     next two 16-bit units;
//   - RiceCoder, Rice-coded tiles (§7.2): each lane reads its row through a
//     32-bit window over four big-endian words of the stream (LaneWords),
//     gathering the words it moved past once per pixel, not per value.
// The same codes and values as the scalar loops of decode_codes.hpp and
// decode_rows.hpp, lane state included: the rows' end checks (§7.3) and
// errors stay the caller's. Included by decode_rows.hpp; used where
// lanes_eligible says, else the scalar loops run.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>

#include "decode_codes.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define L3_HAVE_DECODE_LANES 1
#include <immintrin.h>
#else
#define L3_HAVE_DECODE_LANES 0
#endif

namespace l3 {
namespace {  // internal linkage: see decode_codes.hpp

// The plane values of a row of a tile, by column, as row_to_pixels reads them.
struct ValueRow {
  V4 v[1 << core::kMaxTileWidthLog2];
};

#if L3_HAVE_DECODE_LANES

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_epi32(), which
// -Wuninitialized reports inside them (a known false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define L3_LANES_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512cd")))

inline constexpr int kLaneRows = 32;  // a tile's rows at most: two registers of 16

// Whether the lanes decode rows [0, rows) of a coded tile of CH planes: no
// zero row among them (the scalar loops skip them; tiles with zero rows
// were 6% slower on graphics across the lanes, spec §12), each starting
// kRowReach bytes before read_end (no load needs a bounds test), with
// detail::decode_lanes_enabled(). Other tiles take the scalar loops.
template <int CH>
inline bool lanes_eligible(const CodedTileParams& t, const LaneState* lanes, const std::uint8_t* read_end, int rows) {
  // Tiles with pixel copies (spec §6.6) take the scalar loops.
  if (!detail::decode_lanes_enabled() || t.copies) return false;
  for (int r = 0; r < rows; ++r)
    if (core::is_zero_row(t, r) || read_end - lanes[r].br.p < kRowReach<CH>) return false;
  return true;
}

// Per context and slot: slot - F[token] (bits 0-11), the token's frequency
// (12-24, 4096 at most) and the token (25-29); 0 in an unused context
// (frequency 0: an error, as in ans_read_units).
struct AnsEntries {
  alignas(64) std::uint32_t e[core::kAnsContexts][core::kAnsTotal];
  std::uint32_t zeroed = 0;  // bit x: e[x] is all 0 (fill_ans_entries)
};
static_assert(core::kAnsContexts <= 32);

// The contexts of the tile's planes and the run context (the others are never read).
L3_LANES_TARGET inline void fill_ans_entries(const CodedTileParams& t, AnsEntries& out) {
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (int x = 0; x < core::kAnsContexts; ++x) {
    if (x >= t.channels * core::kAnsGroups && x != core::kAnsRunContext) continue;
    const std::uint16_t* cum = t.ans_cum[x];
    std::uint32_t* e = out.e[x];
    const std::uint32_t bit = 1u << x;
    if (cum[core::kAnsCumSize - 1] == 0) {
      // An unused context (the run context of most tiles without runs): its
      // 16 KB are cleared once, not per tile.
      if (!(out.zeroed & bit)) std::memset(e, 0, sizeof out.e[x]);
      out.zeroed |= bit;
      continue;
    }
    out.zeroed &= ~bit;
    for (int k = 0; k < core::kAnsTokens; ++k) {
      const std::uint32_t lo = cum[k], f = std::uint32_t(cum[k + 1]) - lo;
      // slot - F, f and k for the slots [lo, lo + f), 16 at a time.
      __m512i v = _mm512_add_epi32(_mm512_set1_epi32(int((f << 12) | (std::uint32_t(k) << 25))), iota);
      for (std::uint32_t j = 0; j < f; j += 16) {
        const __mmask16 m = f - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (f - j)) - 1);
        _mm512_mask_storeu_epi32(e + lo + j, m, v);
        v = _mm512_add_epi32(v, _mm512_set1_epi32(16));
      }
    }
  }
}

// A thread's buffers for the lanes (about 440 KB, on the heap: they would
// swell every thread's static TLS block).
struct LaneScratch {
  AnsEntries entries;          // entropy-coded tiles only
  ValueRow rows[kLaneRows];    // the plane values by row, for row_to_pixels
};

inline LaneScratch& lane_scratch() {
  thread_local std::unique_ptr<LaneScratch> scratch;
  if (!scratch) scratch.reset(new LaneScratch);  // store_pixels writes every plane, padding included
  return *scratch;
}

// What the wavefront keeps of 16 rows besides their coder's state.
template <class Coder, int CH>
struct LaneRows {
  typename Coder::State c;
  __m512i run_left;  // zero runs (spec §6.4)
  __mmask16 blocked, error;
  __m512i w[CH];   // each row's last code (W) per plane
  __m512i vw[CH];  // the same for plane values
};

// The position of a lane's reader, in bits from the tile's first byte.
inline std::uint32_t reader_bit(const core::BitReader& br, const std::uint8_t* tile) {
  return std::uint32_t(br.p - tile + br.past) * 8u - std::uint32_t(br.avail);
}

// A lane's reader after `bit` bits from the tile's first byte, as the scalar
// loops leave it as far as the end checks see (spec §7.3, consumed_bits).
inline void reader_at(core::BitReader& br, const std::uint8_t* tile, std::uint32_t bit) {
  br.init(tile + (bit >> 3), br.end);
  if (bit & 7u) {
    br.refill();
    br.consume(int(bit & 7u));
  }
}

// core::ans_raw_bits and core::ans_value(t, 0) per token, padded to 32 for
// two-register permutes.
struct TokenTables {
  alignas(64) std::int32_t raw[32];
  alignas(64) std::int32_t base[32];
};
inline constexpr TokenTables kTokenTables = [] {
  TokenTables m{};
  for (int i = 0; i < core::kAnsTokens; ++i) {
    m.raw[i] = core::ans_raw_bits(i);
    m.base[i] = std::int32_t(core::ans_value(i, 0));
  }
  return m;
}();

// Each lane's row stream as a 32-bit window at bit `off` of the big-endian
// words hi:lo (hi at byte `word` from the tile), followed by n1 and n2. A
// value takes at most 32 bits, so the window moves on by at most one word
// per value; the words that move in are gathered once per pixel (refill)
// rather than once per value: a pixel's values take at most 96 bits, which
// the four words hold from any off < 32. The gathers were most of the
// lanes' time when each value gathered its own.
struct LaneWords {
  __m512i hi, lo, n1, n2;
  __m512i off, word;
  __m512i moved;  // words moved in since the last refill: the last `moved` of hi, lo, n1, n2 are stale
};

L3_LANES_TARGET inline __m512i load_words(const std::uint8_t* tile, __mmask16 mask, __m512i byte_at) {
  const __m512i bswap = _mm512_set4_epi32(0x0c0d0e0f, 0x08090a0b, 0x04050607, 0x00010203);
  return _mm512_shuffle_epi8(_mm512_mask_i32gather_epi32(_mm512_setzero_si512(), mask, byte_at, tile, 1), bswap);
}

// Lanes [0, n) at their readers' positions (core::lane_begin, and for
// entropy-coded tiles the initial state read).
L3_LANES_TARGET inline void words_begin(LaneWords& W, const std::uint8_t* tile, const LaneState* lanes, int n) {
  alignas(64) std::uint32_t word[16] = {};
  alignas(64) std::uint32_t off[16] = {};
  for (int i = 0; i < n; ++i) {
    const std::uint32_t bit = reader_bit(lanes[i].br, tile);
    word[i] = bit >> 3;
    off[i] = bit & 7u;
  }
  const __mmask16 used = __mmask16((1u << n) - 1);
  W.word = _mm512_load_si512(word);
  W.off = _mm512_load_si512(off);
  W.hi = load_words(tile, used, W.word);
  W.lo = load_words(tile, used, _mm512_add_epi32(W.word, _mm512_set1_epi32(4)));
  W.n1 = load_words(tile, used, _mm512_add_epi32(W.word, _mm512_set1_epi32(8)));
  W.n2 = load_words(tile, used, _mm512_add_epi32(W.word, _mm512_set1_epi32(12)));
  W.moved = _mm512_setzero_si512();
}

L3_LANES_TARGET inline void words_end(const LaneWords& W, const std::uint8_t* tile, LaneState* lanes, int n) {
  alignas(64) std::uint32_t word[16];
  alignas(64) std::uint32_t off[16];
  _mm512_store_si512(word, W.word);
  _mm512_store_si512(off, W.off);
  for (int i = 0; i < n; ++i) reader_at(lanes[i].br, tile, word[i] * 8u + off[i]);
}

// The next 32 bits of each lane. srlv by 32 gives 0: off = 0 needs no case.
L3_LANES_TARGET inline __m512i words_window(const LaneWords& W) {
  return _mm512_or_si512(_mm512_sllv_epi32(W.hi, W.off),
                         _mm512_srlv_epi32(W.lo, _mm512_sub_epi32(_mm512_set1_epi32(32), W.off)));
}

// Takes `bits` (at most 32) in the lanes of `mask`.
L3_LANES_TARGET inline void words_consume(LaneWords& W, __mmask16 mask, __m512i bits) {
  const __m512i c32 = _mm512_set1_epi32(32);
  W.off = _mm512_mask_add_epi32(W.off, mask, W.off, bits);
  const __mmask16 moved = _mm512_mask_cmpge_epu32_mask(mask, W.off, c32);
  W.off = _mm512_mask_sub_epi32(W.off, moved, W.off, c32);
  W.hi = _mm512_mask_mov_epi32(W.hi, moved, W.lo);
  W.lo = _mm512_mask_mov_epi32(W.lo, moved, W.n1);
  W.n1 = _mm512_mask_mov_epi32(W.n1, moved, W.n2);
  const __m512i one = _mm512_set1_epi32(1);
  W.word = _mm512_mask_add_epi32(W.word, moved, W.word, _mm512_set1_epi32(4));
  W.moved = _mm512_mask_add_epi32(W.moved, moved, W.moved, one);
}

// Gathers the stale words (after at most three moves).
L3_LANES_TARGET inline void words_refill(LaneWords& W, const std::uint8_t* tile) {
  const __mmask16 m1 = _mm512_cmpge_epi32_mask(W.moved, _mm512_set1_epi32(1));
  if (!m1) return;
  W.n2 = _mm512_mask_mov_epi32(W.n2, m1, load_words(tile, m1, _mm512_add_epi32(W.word, _mm512_set1_epi32(12))));
  const __mmask16 m2 = _mm512_cmpge_epi32_mask(W.moved, _mm512_set1_epi32(2));
  if (m2) {
    W.n1 = _mm512_mask_mov_epi32(W.n1, m2, load_words(tile, m2, _mm512_add_epi32(W.word, _mm512_set1_epi32(8))));
    const __mmask16 m3 = _mm512_cmpge_epi32_mask(W.moved, _mm512_set1_epi32(3));
    if (m3) W.lo = _mm512_mask_mov_epi32(W.lo, m3, load_words(tile, m3, _mm512_add_epi32(W.word, _mm512_set1_epi32(4))));
  }
  W.moved = _mm512_setzero_si512();
}

// Entropy-coded tiles (spec §7.4): ans_read_units across the lanes. Each
// value gathers its two units at q (the lanes' words, as Rice-coded tiles
// read them, measured 13% slower here: more operations per value, and the
// gather of the slot entries stays).
struct AnsCoder {
  struct State {
    __m512i ans, q;  // rANS states; the next unit, as a byte offset from the tile
  };
  const AnsEntries& en;
  const std::uint8_t* tile;
  __m512i raw_lo, raw_hi, base_lo, base_hi;

  L3_LANES_TARGET AnsCoder(const AnsEntries& entries, const std::uint8_t* tile_bytes) : en(entries), tile(tile_bytes) {
    raw_lo = _mm512_load_si512(kTokenTables.raw);
    raw_hi = _mm512_load_si512(kTokenTables.raw + 16);
    base_lo = _mm512_load_si512(kTokenTables.base);
    base_hi = _mm512_load_si512(kTokenTables.base + 16);
  }

  L3_LANES_TARGET void begin(State& S, const LaneState* lanes, int n) const {
    alignas(64) std::uint32_t ans[16] = {};
    alignas(64) std::uint32_t q[16] = {};
    for (int i = 0; i < n; ++i) {
      ans[i] = lanes[i].ans;
      // lane_begin read whole bytes (the 32-bit state).
      q[i] = reader_bit(lanes[i].br, tile) >> 3;
    }
    S.ans = _mm512_load_si512(ans);
    S.q = _mm512_load_si512(q);
  }

  L3_LANES_TARGET void end(const State& S, LaneState* lanes, int n) const {
    alignas(64) std::uint32_t ans[16];
    alignas(64) std::uint32_t q[16];
    _mm512_store_si512(ans, S.ans);
    _mm512_store_si512(q, S.q);
    for (int i = 0; i < n; ++i) {
      lanes[i].ans = ans[i];
      // The bit reader where q stopped, empty, as ans_decode_codes leaves it.
      reader_at(lanes[i].br, tile, q[i] * 8u);
    }
  }

  L3_LANES_TARGET void refill(State&) const {}

  // The value in context x (per lane) of the lanes in `read`; 0 in the others.
  L3_LANES_TARGET __m512i read(State& S, __mmask16& error, __mmask16 read, __m512i x) const {
    const __m512i low = _mm512_set1_epi32(int(core::kAnsLow)), one = _mm512_set1_epi32(1);
    const __m512i slot = _mm512_and_si512(S.ans, _mm512_set1_epi32(int(core::kAnsTotal - 1)));
    const __m512i at = _mm512_add_epi32(_mm512_slli_epi32(x, core::kAnsPrecisionBits), slot);
    const __m512i e = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), read, at, &en.e[0][0], 4);
    const __m512i tok = _mm512_srli_epi32(e, 25);
    const __m512i f = _mm512_and_si512(_mm512_srli_epi32(e, 12), _mm512_set1_epi32(0x1fff));
    error |= _mm512_mask_cmpeq_epi32_mask(read, f, _mm512_setzero_si512());
    __m512i a = _mm512_add_epi32(_mm512_mullo_epi32(f, _mm512_srli_epi32(S.ans, core::kAnsPrecisionBits)),
                                 _mm512_and_si512(e, _mm512_set1_epi32(0xfff)));
    // The two units at q, big-endian (ans_units): the first in the high half.
    const __m512i units = load_words(tile, read, S.q);
    const __mmask16 first = _mm512_mask_cmplt_epu32_mask(read, a, low);
    a = _mm512_mask_or_epi32(a, first, _mm512_slli_epi32(a, 16), _mm512_srli_epi32(units, 16));
    const __m512i raw_bits = _mm512_permutex2var_epi32(raw_lo, tok, raw_hi);
    const __m512i raw = _mm512_and_si512(a, _mm512_sub_epi32(_mm512_sllv_epi32(one, raw_bits), one));
    a = _mm512_srlv_epi32(a, raw_bits);
    const __mmask16 second = _mm512_mask_cmplt_epu32_mask(read, a, low);
    const __m512i next = _mm512_mask_and_epi32(_mm512_srli_epi32(units, 16), first, units, _mm512_set1_epi32(0xffff));
    a = _mm512_mask_or_epi32(a, second, _mm512_slli_epi32(a, 16), next);
    const __m512i two = _mm512_set1_epi32(2);
    S.q = _mm512_mask_add_epi32(S.q, first, S.q, two);
    S.q = _mm512_mask_add_epi32(S.q, second, S.q, two);
    S.ans = _mm512_mask_mov_epi32(S.ans, read, a);
    return _mm512_maskz_or_epi32(read, _mm512_permutex2var_epi32(base_lo, tok, base_hi), raw);
  }

  // Plane p's value, its context from the activity a: the plane's bucket
  // group (spec §4.5), (a >= 1) + (a >= 4) + (a >= 16).
  L3_LANES_TARGET __m512i read_plane(State& S, __mmask16& error, __mmask16 mask, int p, __m512i a) const {
    // With L a's bit length, the group is min(3, (L + 1) / 2); L + 1 = 33 - lzcnt(a).
    const __m512i g = _mm512_min_epi32(_mm512_srli_epi32(_mm512_sub_epi32(_mm512_set1_epi32(33), _mm512_lzcnt_epi32(a)), 1),
                                       _mm512_set1_epi32(3));
    return read(S, error, mask, _mm512_add_epi32(g, _mm512_set1_epi32(p * core::kAnsGroups)));
  }

  L3_LANES_TARGET __m512i read_run(State& S, __mmask16& error, __mmask16 mask) const {
    return read(S, error, mask, _mm512_set1_epi32(core::kAnsRunContext));
  }
};

// Rice-coded tiles (spec §7.2): read_rice_cpu across the lanes.
struct RiceCoder {
  using State = LaneWords;
  const std::uint8_t* tile;
  __m512i k_table[core::kMaxChannels];  // each plane's Rice parameter per bucket (spec §4.3)
  __m512i run_k;

  L3_LANES_TARGET RiceCoder(const CodedTileParams& t, const std::uint8_t* tile_bytes) : tile(tile_bytes) {
    for (int p = 0; p < t.channels; ++p) {
      alignas(64) std::int32_t k[16];
      for (int b = 0; b < 16; ++b) k[b] = t.plane[p].k[b];
      k_table[p] = _mm512_load_si512(k);
    }
    run_k = _mm512_set1_epi32(t.run_k);
  }

  L3_LANES_TARGET void begin(State& S, const LaneState* lanes, int n) const { words_begin(S, tile, lanes, n); }
  L3_LANES_TARGET void end(const State& S, LaneState* lanes, int n) const { words_end(S, tile, lanes, n); }
  L3_LANES_TARGET void refill(State& S) const { words_refill(S, tile); }

  // A Rice value with parameter k (per lane) of the lanes in `read`; 0 in
  // the others. As read_rice_cpu: q zeros, a one and k low bits, or an
  // escape (q >= 20: twenty zeros and 10 bits); at most 30 bits, so the
  // window holds every value whole.
  L3_LANES_TARGET __m512i read_rice(State& S, __mmask16 read, __m512i k) const {
    const __m512i one = _mm512_set1_epi32(1);
    const __m512i window = words_window(S);
    // `| 1`: a window of zeros counts 31, an escape as any count >= 20.
    const __m512i q = _mm512_lzcnt_epi32(_mm512_or_si512(window, one));
    const __mmask16 escape = _mm512_cmpge_epi32_mask(q, _mm512_set1_epi32(int(core::kEscapeZeros)));
    // window << q starts with the terminating one: k + 1 bits of it are
    // (1 << k) + low, and adding (q - 1) << k (mod 2^32) gives (q << k) + low.
    __m512i u = _mm512_add_epi32(
        _mm512_srlv_epi32(_mm512_sllv_epi32(window, q), _mm512_sub_epi32(_mm512_set1_epi32(31), k)),
        _mm512_sllv_epi32(_mm512_sub_epi32(q, one), k));
    __m512i bits = _mm512_add_epi32(_mm512_add_epi32(q, one), k);
    u = _mm512_mask_mov_epi32(
        u, escape, _mm512_srli_epi32(_mm512_slli_epi32(window, int(core::kEscapeZeros)), 32 - int(core::kEscapeBits)));
    bits = _mm512_mask_mov_epi32(bits, escape, _mm512_set1_epi32(int(core::kEscapeZeros + core::kEscapeBits)));
    words_consume(S, read, bits);
    return _mm512_maskz_mov_epi32(read, u);
  }

  // Plane p's value, its Rice parameter from the activity a: the plane's
  // k of bucket_of(a) (spec §6.2): a below 4, else 2 log2(a) plus the bit
  // below the top one, at most 15.
  L3_LANES_TARGET __m512i read_plane(State& S, __mmask16&, __mmask16 mask, int p, __m512i a) const {
    // 2 log2(a) plus the bit below the top one is a float's biased exponent
    // and first mantissa bit, less 2 x 127: (bits >> 22) - 254 (exact below
    // 2^24; larger activities are bucket 15 anyway).
    const __m512i fb = _mm512_castps_si512(_mm512_cvtepi32_ps(a));
    __m512i b = _mm512_min_epi32(_mm512_sub_epi32(_mm512_srli_epi32(fb, 22), _mm512_set1_epi32(254)),
                                 _mm512_set1_epi32(15));
    b = _mm512_mask_mov_epi32(b, _mm512_cmplt_epi32_mask(a, _mm512_set1_epi32(4)), a);
    return read_rice(S, mask, _mm512_permutexvar_epi32(b, k_table[p]));
  }

  L3_LANES_TARGET __m512i read_run(State& S, __mmask16&, __mmask16 mask) const { return read_rice(S, mask, run_k); }
};

// core::zero_run_step for the active lanes: returns those whose pixel is in
// a run. w, n, nw: the neighbours' codes after the edge rules.
template <class Coder, int CH>
L3_LANES_TARGET inline __mmask16 lanes_run_step(const Coder& coder, int width, LaneRows<Coder, CH>& R, __mmask16 active,
                                                __m512i col, const __m512i* w, const __m512i* n, const __m512i* nw) {
  const __m512i zero = _mm512_setzero_si512(), one = _mm512_set1_epi32(1);
  const __mmask16 running = _mm512_mask_cmpgt_epi32_mask(active, R.run_left, zero);
  R.run_left = _mm512_mask_sub_epi32(R.run_left, running, R.run_left, one);
  const __mmask16 run_ends = _mm512_mask_cmpeq_epi32_mask(running, R.run_left, zero);
  const __mmask16 unblocked = __mmask16(active & ~running & R.blocked);
  R.blocked = __mmask16((R.blocked & ~unblocked) | run_ends);
  __m512i any = zero;
  for (int p = 0; p < CH; ++p) any = _mm512_or_si512(any, _mm512_or_si512(w[p], _mm512_or_si512(n[p], nw[p])));
  const __mmask16 starts = _mm512_mask_cmpeq_epi32_mask(__mmask16(active & ~running & ~unblocked), any, zero);
  __mmask16 in_run = running;
  if (starts) {
    const __m512i run = coder.read_run(R.c, R.error, starts);
    coder.refill(R.c);  // the pixel's values may need every word
    // A run longer than the rest of the row (spec §6.4).
    R.error |= _mm512_mask_cmpgt_epi32_mask(starts, run, _mm512_sub_epi32(_mm512_set1_epi32(width), col));
    const __mmask16 begun = _mm512_mask_cmpneq_epi32_mask(starts, run, zero);
    R.run_left = _mm512_mask_sub_epi32(R.run_left, begun, run, one);
    R.blocked |= _mm512_mask_cmpeq_epi32_mask(begun, R.run_left, zero);
    in_run |= begun;
  }
  return in_run;
}

// Lanes [0, n) from lanes[0..n); the others idle (never active).
template <class Coder, int CH>
L3_LANES_TARGET inline void lane_rows_begin(const Coder& coder, LaneRows<Coder, CH>& R, const LaneState* lanes, int n) {
  alignas(64) std::int32_t run_left[16] = {};
  __mmask16 blocked = 0, error = 0;
  for (int i = 0; i < n; ++i) {
    const LaneState& s = lanes[i];
    run_left[i] = s.run_left;
    blocked = __mmask16(blocked | (int(s.blocked) << i));
    error = __mmask16(error | (int(s.error) << i));
  }
  coder.begin(R.c, lanes, n);
  R.run_left = _mm512_load_si512(run_left);
  R.blocked = blocked;
  R.error = error;
  for (int p = 0; p < CH; ++p) R.w[p] = _mm512_setzero_si512();
}

template <class Coder, int CH>
L3_LANES_TARGET inline void lane_rows_end(const Coder& coder, const LaneRows<Coder, CH>& R, LaneState* lanes, int n) {
  alignas(64) std::int32_t run_left[16];
  _mm512_store_si512(run_left, R.run_left);
  coder.end(R.c, lanes, n);
  for (int i = 0; i < n; ++i) {
    LaneState& s = lanes[i];
    s.run_left = run_left[i];
    s.blocked = (R.blocked >> i) & 1;
    s.error = (R.error >> i) & 1;
  }
}

// Stores the plane values of 16 rows' pixels (one per lane, planes in
// v[0..CH-1]) to rows[lane].v[col], as row_to_pixels reads them (planes
// past CH: 0): the planes interleaved in registers, then one 16-byte store
// per lane.
template <int CH>
L3_LANES_TARGET inline void store_pixels(ValueRow* rows, int first_col, __mmask16 active, const __m512i* v) {
  const __m512i zero = _mm512_setzero_si512();
  const __m512i v1 = CH > 1 ? v[CH > 1 ? 1 : 0] : zero, v2 = CH > 2 ? v[CH > 2 ? 2 : 0] : zero;
  const __m512i v3 = CH > 3 ? v[CH > 3 ? 3 : 0] : zero;
  const __m512i t0 = _mm512_unpacklo_epi32(v[0], v1), t1 = _mm512_unpackhi_epi32(v[0], v1);
  const __m512i t2 = _mm512_unpacklo_epi32(v2, v3), t3 = _mm512_unpackhi_epi32(v2, v3);
  // Lane 4b + j's pixel is block b of px[j].
  const __m512i px[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2), _mm512_unpacklo_epi64(t1, t3),
                         _mm512_unpackhi_epi64(t1, t3)};
  alignas(64) __m128i blocks[16];
  for (int j = 0; j < 4; ++j) {
    blocks[j] = _mm512_castsi512_si128(px[j]);
    blocks[4 + j] = _mm512_extracti32x4_epi32(px[j], 1);
    blocks[8 + j] = _mm512_extracti32x4_epi32(px[j], 2);
    blocks[12 + j] = _mm512_extracti32x4_epi32(px[j], 3);
  }
  // Lane i's column is first_col - i.
  if (active == 0xffff) {
    for (int i = 0; i < 16; ++i) _mm_storeu_si128(reinterpret_cast<__m128i*>(&rows[i].v[first_col - i]), blocks[i]);
  } else {
    for (int i = 0; i < 16; ++i)
      if ((active >> i) & 1) _mm_storeu_si128(reinterpret_cast<__m128i*>(&rows[i].v[first_col - i]), blocks[i]);
  }
}

// Each plane's predictor and range (spec §6.1), as the lanes use them.
template <int CH>
struct LanePredict {
  std::uint8_t pred[CH];
  bool constant[CH];  // reads nothing: its codes are 0 (spec §6.5)
  bool previous_code[CH];  // its activity adds the code of the plane before (version 7, spec §6.2)
  bool corrected[CH];      // its residuals are corrected (version 8, spec §6.7)
  __m512i lo[CH], hi[CH], mid[CH];
  // Per gradient class (lanes 0-8; core::correct_residual): the residual's
  // correction as (e ^ flip_xor) + flip_add, flip_xor -1 where the sign
  // flips, flip_add the flip (1 or 0) plus the bias.
  __m512i flip_xor[CH], flip_add[CH];
};

template <int CH>
L3_LANES_TARGET inline LanePredict<CH> lane_predict(const CodedTileParams& t) {
  LanePredict<CH> k;
  for (int p = 0; p < CH; ++p) {
    k.pred[p] = t.plane[p].pred;
    k.constant[p] = t.plane[p].constant;
    k.previous_code[p] = t.plane[p].previous_code;
    k.corrected[p] = t.plane[p].corrected;
    alignas(64) int flip_xor[16] = {}, flip_add[16] = {};
    for (int g = 0; g < core::kCorrectionClasses; ++g) {
      const std::uint32_t entry = core::correction_entry(t.plane[p], g);
      flip_xor[g] = -core::correction_flip(entry);
      flip_add[g] = core::correction_bias(entry) + core::correction_flip(entry);
    }
    k.flip_xor[p] = _mm512_load_si512(flip_xor);
    k.flip_add[p] = _mm512_load_si512(flip_add);
    k.lo[p] = _mm512_set1_epi32(t.plane[p].range.lo);
    k.hi[p] = _mm512_set1_epi32(t.plane[p].range.hi);
    k.mid[p] = _mm512_set1_epi32(t.plane[p].range.mid);
  }
  return k;
}

// core::predict for plane p (its predictor the same for the whole tile:
// the branch is always taken the same way).
template <int CH>
L3_LANES_TARGET inline __m512i lanes_predict(const LanePredict<CH>& k, int p, __m512i w, __m512i n, __m512i nw) {
  switch (k.pred[p]) {
    case core::kPredW: return w;
    case core::kPredN: return n;
    case core::kPredAvg: return _mm512_srai_epi32(_mm512_add_epi32(w, n), 1);
    case core::kPredNW: return nw;
    default: break;
  }
  const __m512i grad = _mm512_sub_epi32(_mm512_add_epi32(w, n), nw);
  if (k.pred[p] == core::kPredGrad) return _mm512_min_epi32(k.hi[p], _mm512_max_epi32(k.lo[p], grad));
  return _mm512_min_epi32(_mm512_max_epi32(w, n), _mm512_max_epi32(_mm512_min_epi32(w, n), grad));  // MED
}

// core::correct_residual for plane p (version 8, spec §6.7): the gradient
// class 3 sign(N - NW) + sign(NW - W) + 4 of each lane, then its correction
// from the plane's two 9-entry tables by permutes.
template <int CH>
L3_LANES_TARGET inline __m512i lanes_correct(const LanePredict<CH>& k, int p, __m512i e, __m512i w, __m512i n,
                                             __m512i nw) {
  const __m512i three = _mm512_set1_epi32(3), one = _mm512_set1_epi32(1);
  __m512i g = _mm512_set1_epi32(4);
  g = _mm512_mask_add_epi32(g, _mm512_cmpgt_epi32_mask(n, nw), g, three);
  g = _mm512_mask_sub_epi32(g, _mm512_cmplt_epi32_mask(n, nw), g, three);
  g = _mm512_mask_add_epi32(g, _mm512_cmpgt_epi32_mask(nw, w), g, one);
  g = _mm512_mask_sub_epi32(g, _mm512_cmplt_epi32_mask(nw, w), g, one);
  const __m512i flipped = _mm512_xor_si512(e, _mm512_permutexvar_epi32(g, k.flip_xor[p]));
  return _mm512_add_epi32(flipped, _mm512_permutexvar_epi32(g, k.flip_add[p]));
}

// The neighbours of 16 lanes' pixels in the row above: N and NW, as codes
// and as plane values.
template <int CH>
struct LaneAbove {
  __m512i n[CH], nw[CH], vn[CH], vnw[CH];
};

// Applies spec §6.3's edge rules to a lane's neighbours (x = w, n, nw):
// on the tile's first row (first_row: lane 0) N = NW = W; at column 0 W and
// NW are N. first_row is a constant (0 in B); column 0 is in a register's
// lanes for its first 16 steps only, so the test skips four operations per
// plane in the others.
L3_LANES_TARGET inline void edge_rules(__m512i& w, __m512i& n, __m512i& nw, __mmask16 first_row, __mmask16 col0) {
  n = _mm512_mask_mov_epi32(n, first_row, w);
  nw = _mm512_mask_mov_epi32(nw, first_row, w);
  if (col0) {
    w = _mm512_mask_mov_epi32(w, col0, n);
    nw = _mm512_mask_mov_epi32(nw, col0, n);
  }
}

// One step of 16 rows (lane 0's column: first_col): the edge rules, the
// zero-run step and the planes' codes (pass 1), then their plane values
// (pass 2: prediction, spec §6.1), stored by store_pixels. Always inline:
// out of line, the step kept the rows' state in memory. kPlaneContexts: a
// plane of the tile has the context of the plane before (version 7); tiles
// without take a copy that does not keep that code (2.7% faster on photos).
// kCorrections: a plane of the tile has residual corrections (version 8).
template <class Coder, int CH, bool kPlaneContexts, bool kCorrections>
L3_LANES_TARGET __attribute__((always_inline)) inline void lanes_step(const Coder& coder, const LanePredict<CH>& pk,
                                                                      bool run_mode, LaneRows<Coder, CH>& R,
                                                                      __m512i col, const LaneAbove<CH>& up,
                                                                      bool first_rows, ValueRow* rows, int first_col,
                                                                      __m512i cols, __mmask16 lane_rows, int width) {
  const __m512i zero = _mm512_setzero_si512();
  const __mmask16 active =
      __mmask16(lane_rows & _mm512_cmpge_epi32_mask(col, zero) & _mm512_cmplt_epi32_mask(col, cols));
  const __mmask16 col0 = _mm512_cmpeq_epi32_mask(col, zero);
  // The tile's first row: A's lane 0.
  const __mmask16 first_row = first_rows ? 1 : 0;
  __m512i w[CH], n[CH], nw[CH];
  for (int p = 0; p < CH; ++p) {
    w[p] = R.w[p];
    n[p] = up.n[p];
    nw[p] = up.nw[p];
    edge_rules(w[p], n[p], nw[p], first_row, col0);
  }
  __mmask16 read = active;
  if (run_mode) read = __mmask16(read & ~lanes_run_step(coder, width, R, active, col, w, n, nw));
  __m512i v[CH];
  __m512i u_before = zero;  // the code of the plane before, this pixel's
  for (int p = 0; p < CH; ++p) {
    // Activity u(W) + u(N) + u(NW) / 2 (spec §6.2), and in version 7 the code
    // of the plane before: a branch, the same for the whole tile, so that the
    // other tiles' planes do not wait for it.
    __m512i a = _mm512_add_epi32(_mm512_add_epi32(w[p], n[p]), _mm512_srai_epi32(nw[p], 1));
    if constexpr (kPlaneContexts)
      if (p > 0 && pk.previous_code[p]) a = _mm512_add_epi32(a, u_before);
    // A pixel's values take at most 3 x 32 bits between refills (LaneWords).
    if (p == 3) coder.refill(R.c);
    const __m512i u = coder.read_plane(R.c, R.error, pk.constant[p] ? __mmask16(0) : read, p, a);
    u_before = u;
    // Lanes before their column 0 keep 0; after their last column, their last code.
    R.w[p] = _mm512_mask_mov_epi32(R.w[p], active, u);
    // The value: prediction + unzigzag(u). The tile's first pixel has W =
    // the plane's midpoint (R.vw's initial value).
    __m512i vw = R.vw[p], vn = up.vn[p], vnw = up.vnw[p];
    edge_rules(vw, vn, vnw, first_row, col0);
    const __m512i one = _mm512_set1_epi32(1);
    __m512i residual = _mm512_xor_si512(_mm512_srli_epi32(u, 1), _mm512_sub_epi32(zero, _mm512_and_si512(u, one)));
    if constexpr (kCorrections)
      if (pk.corrected[p]) residual = lanes_correct(pk, p, residual, vw, vn, vnw);
    v[p] = _mm512_add_epi32(lanes_predict(pk, p, vw, vn, vnw), residual);
    R.vw[p] = _mm512_mask_mov_epi32(R.vw[p], active, v[p]);
  }
  coder.refill(R.c);
  if (active) store_pixels<CH>(rows, first_col, active, v);
}

// core::inverse_transform_bits (spec §5) of four pixels, one per 128-bit
// lane ([v0 v1 v2 v3] in, [R G B A] out): in-lane broadcasts and arithmetic.
template <std::uint8_t kTransform>
L3_LANES_TARGET inline __m512i inverse_transform_lanes(__m512i z) {
  if constexpr (kTransform == core::kTransformSubtractGreen) {
    // R = v1 + G, G = v0, B = v2 + G.
    const __m512i g = _mm512_shuffle_epi32(z, _MM_PERM_AAAA);
    const __m512i sh = _mm512_shuffle_epi32(z, _MM_PERM_DCAB);  // [v1 v0 v2 v3]
    return _mm512_mask_add_epi32(sh, 0x5555, sh, g);
  } else if constexpr (kTransform == core::kTransformYCoCgR) {
    const __m512i y = _mm512_shuffle_epi32(z, _MM_PERM_AAAA), co = _mm512_shuffle_epi32(z, _MM_PERM_BBBB);
    const __m512i cg = _mm512_shuffle_epi32(z, _MM_PERM_CCCC);
    const __m512i t = _mm512_sub_epi32(y, _mm512_srai_epi32(cg, 1));
    const __m512i g = _mm512_add_epi32(cg, t);
    const __m512i b = _mm512_sub_epi32(t, _mm512_srai_epi32(co, 1));
    __m512i px = _mm512_add_epi32(b, co);  // R
    px = _mm512_mask_mov_epi32(px, 0x2222, g);
    px = _mm512_mask_mov_epi32(px, 0x4444, b);
    return _mm512_mask_mov_epi32(px, 0x8888, z);  // alpha as stored
  } else {
    return z;
  }
}

// The head of planes_to_pixels (decode_rows.hpp) for 3- and 4-plane rows
// across AVX-512 lanes, the same bytes: 16 pixels per step from x0, made
// bytes by vpmovdb; 3 channels drop every 4th byte (a shuffle, a permute and
// a 48-byte store). Returns the first column left to the caller's loop (the
// last x1 - x0 mod 16); `bits` gains 256 where a value maps to no pixel.
template <int CH, std::uint8_t kTransform>
L3_LANES_TARGET inline int lanes_planes_to_pixels(const V4* vals, int x0, int x1, std::uint8_t* out,
                                                  std::uint32_t& bits) {
  static_assert(CH == 3 || CH == 4);
  constexpr __mmask16 kChannels = CH == 3 ? 0x7777 : 0xffff;
  const __m512i drop_4th = _mm512_set4_epi32(int(0x80808080), 0x0e0d0c0a, 0x09080605, 0x04020100);
  const __m512i pack_12 = _mm512_setr_epi32(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, 0, 0, 0, 0);
  __m512i any = _mm512_setzero_si512();
  int c = x0;
  for (; c + 16 <= x1; c += 16, out += 16 * CH) {
    __m128i b[4];
    for (int q = 0; q < 4; ++q) {
      const __m512i px = inverse_transform_lanes<kTransform>(_mm512_loadu_si512(vals + c + 4 * q));
      any = _mm512_mask_or_epi32(any, kChannels, any, px);
      b[q] = _mm512_cvtepi32_epi8(px);
    }
    __m512i bytes = _mm512_castsi128_si512(b[0]);
    bytes = _mm512_inserti32x4(bytes, b[1], 1);
    bytes = _mm512_inserti32x4(bytes, b[2], 2);
    bytes = _mm512_inserti32x4(bytes, b[3], 3);
    if constexpr (CH == 3) {
      bytes = _mm512_permutexvar_epi32(pack_12, _mm512_shuffle_epi8(bytes, drop_4th));
      _mm512_mask_storeu_epi32(out, 0x0fff, bytes);
    } else {
      _mm512_storeu_si512(out, bytes);
    }
  }
  if (_mm512_cmpgt_epu32_mask(any, _mm512_set1_epi32(255))) bits |= 256u;
  return c;
}

// Lane i's x[i - 1] (its register's lane 0: 0).
L3_LANES_TARGET inline __m512i from_lane_above(__m512i x) {
  const __m512i shift = _mm512_setr_epi32(0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14);
  return _mm512_maskz_permutexvar_epi32(0xfffe, shift, x);
}

// B's lane i: B's x[i - 1]; its lane 0: A's lane 15.
L3_LANES_TARGET inline __m512i from_lane_above(__m512i a, __m512i b) {
  const __m512i shift = _mm512_setr_epi32(15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30);
  return _mm512_permutex2var_epi32(a, shift, b);
}

// Passes 1 and 2 of columns [0, cols) of rows [0, rows_used) of a tile that
// lanes_eligible takes (the rest of the tile is never needed by them, as in
// a crop): their plane values into rows, their lanes' state as the scalar
// loops leave it. lanes: from core::lane_begin.
template <int CH, bool kPlaneContexts, bool kCorrections, class Coder>
L3_LANES_TARGET __attribute__((noinline)) inline void lanes_values(const Coder& coder, const CodedTileParams& t,
                                                                   LaneState* lanes, ValueRow* rows, int cols,
                                                                   int rows_used) {
  const __m512i lane_ids = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i g16 = _mm512_set1_epi32(16);
  const __m512i cols_v = _mm512_set1_epi32(cols);
  const LanePredict<CH> pk = lane_predict<CH>(t);
  const int rows_a = rows_used < 16 ? rows_used : 16, rows_b = rows_used - rows_a;
  const __mmask16 lanes_a = __mmask16((1u << rows_a) - 1), lanes_b = __mmask16((1u << rows_b) - 1);
  LaneRows<Coder, CH> A, B;
  lane_rows_begin(coder, A, lanes, rows_a);
  lane_rows_begin(coder, B, lanes + 16, rows_b);
  for (int p = 0; p < CH; ++p) A.vw[p] = B.vw[p] = pk.mid[p];
  // A pixel's NW is the N of the pixel to its left, the previous step's N
  // (before the edge rules, which lanes_step applies to its copies); before
  // the first step, the rows' initial W.
  LaneAbove<CH> up_a, up_b;
  for (int p = 0; p < CH; ++p) {
    up_a.n[p] = from_lane_above(A.w[p]);
    up_a.vn[p] = from_lane_above(A.vw[p]);
    up_b.n[p] = from_lane_above(A.w[p], B.w[p]);
    up_b.vn[p] = from_lane_above(A.vw[p], B.vw[p]);
  }
  const int steps = cols + rows_used - 1;
  for (int s = 0; s < steps; ++s) {
    const __m512i col_a = _mm512_sub_epi32(_mm512_set1_epi32(s), lane_ids);
    for (int p = 0; p < CH; ++p) {
      up_a.nw[p] = up_a.n[p];
      up_a.vnw[p] = up_a.vn[p];
      up_a.n[p] = from_lane_above(A.w[p]);
      up_a.vn[p] = from_lane_above(A.vw[p]);
      if (rows_b > 0) {
        up_b.nw[p] = up_b.n[p];
        up_b.vnw[p] = up_b.vn[p];
        up_b.n[p] = from_lane_above(A.w[p], B.w[p]);
        up_b.vn[p] = from_lane_above(A.vw[p], B.vw[p]);
      }
    }
    lanes_step<Coder, CH, kPlaneContexts, kCorrections>(coder, pk, t.run_mode, A, col_a, up_a, true, rows, s, cols_v,
                                                        lanes_a, t.width);
    if (rows_b > 0)
      lanes_step<Coder, CH, kPlaneContexts, kCorrections>(coder, pk, t.run_mode, B, _mm512_sub_epi32(col_a, g16),
                                                          up_b, false, rows + 16, s - 16, cols_v, lanes_b, t.width);
  }
  lane_rows_end(coder, A, lanes, rows_a);
  lane_rows_end(coder, B, lanes + 16, rows_b);
}

// Passes 1 and 2 of columns [0, cols) of rows [0, rows_used) of a coded
// tile of CH planes that lanes_eligible takes, its coder picked by the
// tile's kind: the plane values into x.rows.
template <int CH>
L3_LANES_TARGET __attribute__((noinline)) inline void lanes_values(const std::uint8_t* tile, const CodedTileParams& t,
                                                                   LaneState* lanes, LaneScratch& x, int cols,
                                                                   int rows_used) {
  bool plane_contexts = false, corrections = false;
  for (int p = 1; p < CH; ++p) plane_contexts |= t.plane[p].previous_code;
  for (int p = 0; p < CH; ++p) corrections |= t.plane[p].corrected;
  const auto run = [&]<bool kPlaneContexts, bool kCorrections>() {
    if (t.ans) {
      fill_ans_entries(t, x.entries);
      lanes_values<CH, kPlaneContexts, kCorrections>(AnsCoder(x.entries, tile), t, lanes, x.rows, cols, rows_used);
    } else {
      lanes_values<CH, kPlaneContexts, kCorrections>(RiceCoder(t, tile), t, lanes, x.rows, cols, rows_used);
    }
  };
  if constexpr (CH > 1)
    if (plane_contexts) {
      if (corrections) return run.template operator()<true, true>();
      return run.template operator()<true, false>();
    }
  if (corrections) return run.template operator()<false, true>();
  run.template operator()<false, false>();
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#else  // no AVX-512 build: the scalar loops only

struct LaneScratch {
  ValueRow rows[32];
};
inline LaneScratch& lane_scratch() { __builtin_unreachable(); }
template <int CH>
inline bool lanes_eligible(const CodedTileParams&, const LaneState*, const std::uint8_t*, int) { return false; }
template <int CH>
inline void lanes_values(const std::uint8_t*, const CodedTileParams&, LaneState*, LaneScratch&, int, int) {}
template <int CH, std::uint8_t kTransform>
inline int lanes_planes_to_pixels(const V4*, int x0, int, std::uint8_t*, std::uint32_t&) { return x0; }

#endif

}  // namespace
}  // namespace l3
