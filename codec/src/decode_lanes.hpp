// The CPU decoder's passes 1 and 2 for coded tiles across SIMD lanes
// (spec/codec.md §6, §7.2, §7.4, §8; measured in §12 and
// bench/simd_rows_probe.cpp): the tile's 32 rows in the lanes of two AVX-512
// registers of 16 lanes or four AVX2 registers of 8, row i one column behind
// row i - 1 (§8's wavefront), so that N and NW are the last two steps' codes
// and plane values shifted by one lane.
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
// errors stay the caller's. The algorithm is written once
// (decode_lanes_body.hpp) over each instruction set's operations
// (lanes_ops_avx512.hpp, lanes_ops_avx2.hpp) and compiled for both; the CPU
// picks one at run time (detail::decode_lanes()). Included by
// decode_rows.hpp; used where lanes_eligible says, else the scalar loops run.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>

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

inline constexpr int kLaneRows = 32;  // a tile's rows at most: the lanes of every register

// Whether the lanes decode rows [0, rows) of a coded tile of CH planes: no
// zero row among them (the scalar loops skip them; tiles with zero rows
// were 6% slower on graphics across the lanes, spec §12), each starting
// kRowReach bytes before read_end (no load needs a bounds test), on a CPU
// with lanes (detail::decode_lanes()); with AVX2 lanes, tiles of at least
// kAvx2LanePlanes planes (1-plane tiles measured 0.70-1.41x per image across
// AVX2 lanes, slower on masks and text, spec §12). Other tiles take the
// scalar loops.
inline constexpr int kAvx2LanePlanes = 3;
template <int CH>
inline bool lanes_eligible(const CodedTileParams& t, const LaneState* lanes, const std::uint8_t* read_end, int rows) {
  // Tiles with pixel copies (spec §6.6) take the scalar loops.
  const detail::DecodeLanes isa = detail::decode_lanes();
  if (isa == detail::DecodeLanes::none || (isa == detail::DecodeLanes::avx2 && CH < kAvx2LanePlanes) || t.copies)
    return false;
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

// The lanes for each instruction set: its operations, then the algorithm,
// every function built for its target.
namespace lanes_avx512 {
#define L3_LANES_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512cd")))
#define L3_LANES_LAMBDA __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx512dq,avx512cd")))
#include "lanes_ops_avx512.hpp"
#include "decode_lanes_body.hpp"
#undef L3_LANES_LAMBDA
#undef L3_LANES_TARGET
}  // namespace lanes_avx512

namespace lanes_avx2 {
#define L3_LANES_TARGET __attribute__((target("avx2")))
#define L3_LANES_LAMBDA __attribute__((always_inline, target("avx2")))
#include "lanes_ops_avx2.hpp"
#include "decode_lanes_body.hpp"
#undef L3_LANES_LAMBDA
#undef L3_LANES_TARGET
}  // namespace lanes_avx2

// Passes 1 and 2 of columns [0, cols) of rows [0, rows_used) of a coded
// tile of CH planes that lanes_eligible takes: the plane values into x.rows,
// across the CPU's lanes.
template <int CH>
inline void lanes_values(const std::uint8_t* tile, const CodedTileParams& t, LaneState* lanes, LaneScratch& x, int cols,
                         int rows_used) {
  if constexpr (CH >= kAvx2LanePlanes)  // no other tile reaches the AVX2 lanes (lanes_eligible)
    if (detail::decode_lanes() == detail::DecodeLanes::avx2)
      return lanes_avx2::lanes_values<CH>(tile, t, lanes, x, cols, rows_used);
  lanes_avx512::lanes_values<CH>(tile, t, lanes, x, cols, rows_used);
}

// The head of planes_to_pixels (decode_rows.hpp) for 3- and 4-plane rows
// from the lanes: returns the first column left to the caller's loop.
template <int CH, std::uint8_t kTransform>
inline int lanes_planes_to_pixels(const V4* vals, int x0, int x1, std::uint8_t* out, std::uint32_t& bits) {
  if (detail::decode_lanes() == detail::DecodeLanes::avx512)
    return lanes_avx512::planes_to_pixels<CH, kTransform>(vals, x0, x1, out, bits);
  return lanes_avx2::planes_to_pixels<CH, kTransform>(vals, x0, x1, out, bits);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#else  // no x86-64 build: the scalar loops only

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
