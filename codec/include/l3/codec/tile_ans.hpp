// The frequency tables of an entropy-coded tile and the token search of its
// rANS decode (spec/codec.md §4.5, §7.4). Part of the shared per-tile core
// (l3/codec/tile_core.hpp includes it and runs the per-lane decode with it).
// Rules of l3/codec/tile_core.hpp apply: host C++ and CUDA device code alike, no
// allocation, no exceptions, no asserts on input.
#pragma once

#include <cstdint>

#include "l3/common/host_device.hpp"
#include "l3/codec/tile_constants.hpp"

namespace l3::core {

// Frequency tables of an entropy-coded tile (spec §4.5): `count` contexts
// from byte `pos`, bits LSB-first, padded to a byte; pos advances past them.
// Each context: 5 bits alphabet size A (0: unused, at most kAnsTokens); in a
// compact table (version 9, `compact`) 5 bits z < A, the remainder token;
// then per token below A (but z) a 4-bit exponent e (at most
// kAnsMaxExponent) and, when e >= 2, n = e - 1 mantissa bits m (compact: n =
// min(e - 1, kAnsMantissaBits)): frequency 0 for e = 0, else (2^n + m) <<
// (e - 1 - n). A used context's frequencies sum to kAnsTotal; in a compact
// table token z's frequency is what the others leave, at least 1.
L3_HD int parse_ans_tables(const std::uint8_t* tile, std::uint32_t size, std::uint32_t& pos,
                           std::uint16_t (*cum)[kAnsCumSize], int count, bool compact) {
  const std::uint32_t bytes = size - pos;
  const std::uint8_t* q = tile + pos;
  std::uint64_t bit = 0;
  bool over = false;
  // The next n <= 13 bits, LSB-first: they lie in the 3 bytes from bit / 8.
  auto get = [&](int n) {
    if (n == 0) return 0u;  // reads nothing (a mantissa of e = 1), not even at the end
    if (bit + std::uint64_t(n) > std::uint64_t(bytes) * 8) {
      over = true;
      return 0u;
    }
    const std::uint32_t at = std::uint32_t(bit >> 3);
    std::uint32_t w = q[at];
    if (at + 1 < bytes) w |= std::uint32_t(q[at + 1]) << 8;
    if (at + 2 < bytes) w |= std::uint32_t(q[at + 2]) << 16;
    const std::uint32_t v = (w >> (bit & 7)) & ((1u << n) - 1);
    bit += std::uint64_t(n);
    return v;
  };
  for (int x = 0; x < count; ++x) {
    std::uint16_t* c = cum[x];
    const int a = int(get(5));
    if (over) return kTruncated;
    if (a > kAnsTokens) return kCorruptTile;
    const int z = compact && a > 0 ? int(get(5)) : -1;
    if (over) return kTruncated;
    if (z >= a) return kCorruptTile;
    const int most_mantissa = compact ? kAnsMantissaBits : kAnsMaxExponent;
    std::uint32_t total = 0;
    c[0] = 0;
    for (int t = 0; t < a; ++t) {
      if (t != z) {
        const int e = int(get(4));
        if (e > kAnsMaxExponent) return kCorruptTile;
        const int n = e > 1 ? (e - 1 < most_mantissa ? e - 1 : most_mantissa) : 0;
        const std::uint32_t f = e == 0 ? 0u : ((1u << n) | get(n)) << (e - 1 - n);
        if (over) return kTruncated;
        total += f;
        if (total > kAnsTotal) return kCorruptTile;
      }
      c[t + 1] = std::uint16_t(total);
    }
    if (z >= 0) {
      // The remainder token: at least 1, and the sums from it on include it.
      if (total >= kAnsTotal) return kCorruptTile;
      const std::uint32_t rest = kAnsTotal - total;
      for (int t = z; t < a; ++t) c[t + 1] = std::uint16_t(c[t + 1] + rest);
      total = kAnsTotal;
    }
    if (a > 0 && total != kAnsTotal) return kCorruptTile;
    for (int t = a + 1; t < kAnsCumSize; ++t) c[t] = std::uint16_t(total);  // 0 for an unused context
  }
  pos += std::uint32_t((bit + 7) >> 3);
  return kOk;
}

// Bilevel planes (version 11, spec §6.8): the frequency of a 1 for a
// context's level q (kBilevelLevelBits bits). 0 marks an unused context; 1..16
// rise from 1 by half octaves (1, 16, 24, 32, 48, ..., 1536, 2048: bucket
// starts of §6.2, times 16 from 16 on), 17..31 mirror them (4096 - level(32 - q)),
// so that a context certain of either value costs 1/4096 of its pixels.
L3_HD constexpr std::uint32_t bilevel_low_frequency(int q) {
  return q <= 1 ? std::uint32_t(q) : (2u + std::uint32_t((q + 6) & 1)) << ((q + 6) / 2 - 1);
}
L3_HD constexpr std::uint32_t bilevel_frequency(int q) {
  return q <= 16 ? bilevel_low_frequency(q) : kAnsTotal - bilevel_low_frequency(32 - q);
}

// A bilevel plane's table (spec §4.3): kBilevelContexts levels of
// kBilevelLevelBits bits, LSB-first from byte `pos`, padded to a byte; `one`
// receives each context's frequency of a 1 (0: unused). pos advances past it.
L3_HD int parse_bilevel_table(const std::uint8_t* tile, std::uint32_t size, std::uint32_t& pos, std::uint16_t* one) {
  constexpr std::uint32_t kBytes = (kBilevelContexts * kBilevelLevelBits + 7) / 8;
  if (size - pos < kBytes) return kTruncated;
  const std::uint8_t* q = tile + pos;
  for (int x = 0; x < kBilevelContexts; ++x) {
    const int bit = x * kBilevelLevelBits;
    const std::uint32_t at = std::uint32_t(bit >> 3);
    const std::uint32_t w = std::uint32_t(q[at]) | (at + 1 < kBytes ? std::uint32_t(q[at + 1]) << 8 : 0u);
    one[x] = std::uint16_t(bilevel_frequency(int((w >> (bit & 7)) & ((1u << kBilevelLevelBits) - 1))));
  }
  pos += kBytes;
  return kOk;
}

// Hybrid-integer tokens (spec §7.4): a token below kAnsDirect is its value;
// a larger token t carries its value's top two bits, and ans_raw_bits(t) low
// bits follow it raw. The decoders' one definition of the mapping (the
// encoder's inverse is encoder::ans_token).
L3_HD constexpr int ans_raw_bits(int t) { return t < kAnsDirect ? 0 : 3 + ((t - kAnsDirect) >> 1); }
L3_HD constexpr std::uint32_t ans_value(int t, std::uint32_t raw) {
  return t < kAnsDirect ? std::uint32_t(t) : ((2u | std::uint32_t(t & 1)) << ans_raw_bits(t)) | raw;
}

// The token whose interval of cumulative frequencies `cum` holds `slot`
// (spec §7.4), as a pointer to its entry: a branch-free binary search over
// the 32 padded entries, each step one load at a constant offset, a compare
// and a conditional add (the CPU reference; the GPU wavefront searches with
// ans_search_wide).
L3_HD const std::uint16_t* ans_search_at(const std::uint16_t* cum, std::uint32_t slot) {
  const std::uint16_t* c = cum;
  c += c[16] <= slot ? 16 : 0;
  c += c[8] <= slot ? 8 : 0;
  c += c[4] <= slot ? 4 : 0;
  c += c[2] <= slot ? 2 : 0;
  c += c[1] <= slot ? 1 : 0;
  return c;
}

// The same search, as the token.
L3_HD int ans_search(const std::uint16_t* cum, std::uint32_t slot) { return int(ans_search_at(cum, slot) - cum); }

// A token found by ans_search_wide: t, and its interval [lo, hi) of
// cumulative frequencies (hi - lo its frequency, 0 in an unused context).
struct AnsToken {
  int t;
  std::uint32_t lo, hi;
};

// ans_search in three levels of independent loads, for the GPU wavefront
// (spec/cuda.md §2, "Token search"): entries 8, 16 and 24 pick the quarter,
// entries 2, 4 and 6 of the quarter its pair, then entries 0-2 of the pair
// the token and its interval. The same token as ans_search on the
// non-decreasing rows that parse_ans_tables writes (the largest t with
// cum[t] <= slot); 9 loads instead of 7, but 3 shared-memory latencies in a
// row instead of 6 (5 for the search, 1 for the interval): at a wavefront
// step the warp waits for each lane's three searches one after the other.
L3_HD AnsToken ans_search_wide(const std::uint16_t* cum, std::uint32_t slot) {
  // Non-decreasing entries: each level's three tests hold for a prefix of
  // them, so the last one that holds names the part (selects, not a sum).
  const std::uint32_t a8 = cum[8], a16 = cum[16], a24 = cum[24];
  int q = 0;
  q = a8 <= slot ? 8 : q;
  q = a16 <= slot ? 16 : q;
  q = a24 <= slot ? 24 : q;
  const std::uint16_t* part = cum + q;
  const std::uint32_t b2 = part[2], b4 = part[4], b6 = part[6];
  int i = q;
  i = b2 <= slot ? q + 2 : i;
  i = b4 <= slot ? q + 4 : i;
  i = b6 <= slot ? q + 6 : i;
  const std::uint16_t* pair = cum + i;
  const std::uint32_t c0 = pair[0], c1 = pair[1], c2 = pair[2];  // i + 2 <= 32 = kAnsCumSize - 1
  const bool second = c1 <= slot;
  // lo and hi as the larger or the smaller of two entries (c0 <= c1 <= c2),
  // so that all three are read whichever the token: as `second ? c1 : c0`,
  // ptxas loads c0 after the test, only where taken, a fourth wait in a row.
  const int a = int(c0), b = int(c1), c = int(c2);
  const int lo = second ? imax(a, b) : imin(a, b), hi = second ? imax(b, c) : imin(b, c);
  return {second ? i + 1 : i, std::uint32_t(lo), std::uint32_t(hi)};
}

// ans_search_at's token and its interval (the binary search's form of
// ans_search_wide's result: the interval loaded after the search).
L3_HD AnsToken ans_token_at(const std::uint16_t* cum, std::uint32_t slot) {
  const std::uint16_t* at = ans_search_at(cum, slot);
  return {int(at - cum), at[0], at[1]};
}

}  // namespace l3::core
