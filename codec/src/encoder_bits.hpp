// The encoder's bit-level tools (encoder.cpp): the row-stream bit writer, Rice
// code lengths and writing (spec/codec.md §7), the per-bucket cost tables
// that choose the Rice parameters and the run mode by exact bit counts, and
// the colour table that finds palette tiles (§4.4). Internal to l3_codec.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "l3/codec/tile_core.hpp"

namespace l3::encoder {

inline constexpr int kKs = core::kMaxK + 1;  // Rice parameters 0..kMaxK

// MSB-first bit writer for one row stream (spec §7.1), a code of up to 32
// bits a call (a Rice code is one: write_rice).
class BitWriter {
public:
  // `expected_bytes`: room reserved up front (a row's stream grew by
  // reallocation otherwise, about ten times a row).
  explicit BitWriter(std::size_t expected_bytes = 0) { bytes_.reserve(expected_bytes); }
  // The low `bits` (0..32) bits of value.
  void put(std::uint32_t value, int bits) {
    acc_ = (acc_ << bits) | (value & ((std::uint64_t{1} << bits) - 1));
    n_ += bits;
    while (n_ >= 8) {
      n_ -= 8;
      bytes_.push_back(std::uint8_t(acc_ >> n_));
    }
  }
  // Flushes with zero padding to a byte.
  std::vector<std::uint8_t>& finish() {
    if (n_) put(0, 8 - n_);
    return bytes_;
  }

private:
  std::uint64_t acc_ = 0;  // the low n_ bits are pending (the rest are stale)
  int n_ = 0;
  std::vector<std::uint8_t> bytes_;
};

inline int rice_length(std::uint32_t u, int k) {
  const std::uint32_t q = u >> k;
  return q < core::kEscapeZeros ? int(q) + 1 + k : int(core::kEscapeZeros + core::kEscapeBits);
}

inline void write_rice(BitWriter& bw, std::uint32_t u, int k) {
  const std::uint32_t q = u >> k;
  // q zeros, a one and the k low bits: one put of q + 1 + k <= 30 bits, the
  // zeros being its value's leading bits. An escape: 20 zeros and 10 bits.
  if (q < core::kEscapeZeros) bw.put((1u << k) | (u & ((1u << k) - 1)), int(q) + 1 + k);
  else bw.put(u & ((1u << core::kEscapeBits) - 1), int(core::kEscapeZeros + core::kEscapeBits));
}

// Hybrid-integer token of a value: u < 16 is its own token; else, with
// n = floor(log2 u), token 16 + 2 (n - 4) + bit n-1 of u and n - 1 raw bits.
struct AnsToken {
  int token, raw_bits;
  std::uint32_t raw;
};
inline AnsToken ans_token(std::uint32_t u) {
  if (u < std::uint32_t(core::kAnsDirect)) return {int(u), 0, 0};
  const int n = 31 - core::clz32(u);
  return {core::kAnsDirect + 2 * (n - 4) + int((u >> (n - 1)) & 1), n - 1, u & ((1u << (n - 1)) - 1)};
}

// Cost of each Rice parameter per context bucket, accumulated over samples.
// Small codes (most of them) are counted in a histogram, costed once per tile
// in choose(); larger ones add their exact lengths at once. 32-bit sums: a
// tile has at most 256 * 32 samples per plane of at most 30 bits.
// The larger codes' tokens (spec §7.4) are counted too, so that the
// entropy-coded form's histograms follow from these (ans_tokens).
struct KCosts {
  static constexpr std::uint32_t kSmall = 32;
  static constexpr int kSmallTokens = core::kAnsDirect + 2;  // the tokens of codes below kSmall: 0..17
  std::array<std::array<std::uint32_t, kSmall>, core::kBuckets> hist{};
  std::array<std::array<std::uint32_t, kKs>, core::kBuckets> large{};
  std::array<std::array<std::uint32_t, core::kAnsTokens>, core::kBuckets> large_tokens{};
  void add(int bucket, std::uint32_t u) {
    if (u < kSmall) {
      ++hist[bucket][u];
      return;
    }
    for (int k = 0; k < kKs; ++k) large[bucket][k] += std::uint32_t(rice_length(u, k));
    ++large_tokens[bucket][ans_token(u).token];
  }
  // Adds the codes' tokens to `tokens` (context `group_base` + the bucket's
  // group, spec §4.5) and their raw bits to `raw_bits`.
  template <class Hists>
  void ans_tokens(int group_base, Hists& tokens, std::uint64_t& raw_bits) const {
    for (int b = 0; b < int(core::kBuckets); ++b) {
      auto& h = tokens[std::size_t(group_base + core::ans_group_of_bucket(b))];
      for (std::uint32_t u = 0; u < kSmall; ++u) {
        if (!hist[b][u]) continue;
        const AnsToken t = ans_token(u);
        h[t.token] += hist[b][u];
        raw_bits += std::uint64_t(hist[b][u]) * std::uint32_t(t.raw_bits);
      }
      for (int t = kSmallTokens; t < core::kAnsTokens; ++t) {
        h[t] += large_tokens[b][t];
        raw_bits += std::uint64_t(large_tokens[b][t]) * std::uint32_t(core::ans_raw_bits(t));
      }
    }
  }
  // Adds another set of costs to these.
  void merge(const KCosts& o) {
    for (std::uint32_t b = 0; b < core::kBuckets; ++b) {
      for (std::uint32_t u = 0; u < kSmall; ++u) hist[b][u] += o.hist[b][u];
      for (int k = 0; k < kKs; ++k) large[b][k] += o.large[b][k];
      for (int t = 0; t < core::kAnsTokens; ++t) large_tokens[b][t] += o.large_tokens[b][t];
    }
  }
  // Best k per bucket and the total bits with it.
  std::uint64_t choose(std::uint8_t* k_out) const {
    std::uint64_t total = 0;
    for (std::uint32_t b = 0; b < core::kBuckets; ++b) {
      // An empty bucket (most of them in flat tiles): every k costs 0 bits,
      // and the first, k = 0, is chosen, as the loop below would.
      if (large[b][0] == 0 && std::all_of(hist[b].begin(), hist[b].end(), [](std::uint32_t n) { return n == 0; })) {
        k_out[b] = 0;
        continue;
      }
      std::array<std::uint64_t, kKs> bits{};
      for (int k = 0; k < kKs; ++k) {
        bits[k] = large[b][k];
        for (std::uint32_t u = 0; u < kSmall; ++u) bits[k] += std::uint64_t(hist[b][u]) * std::uint32_t(rice_length(u, k));
      }
      int best = 0;
      for (int k = 1; k < kKs; ++k)
        if (bits[k] < bits[best]) best = k;
      k_out[b] = std::uint8_t(best);
      total += bits[best];
    }
    return total;
  }
};

struct RunCosts {
  std::array<std::uint64_t, kKs> bits{};
  std::array<std::uint32_t, core::kAnsTokens> tokens{};  // spec §7.4
  std::uint64_t raw_bits = 0;                            // the tokens' raw bits
  void add(std::uint32_t run) {
    for (int k = 0; k < kKs; ++k) bits[k] += rice_length(run, k);
    const AnsToken t = ans_token(run);
    ++tokens[t.token];
    raw_bits += std::uint32_t(t.raw_bits);
  }
  std::uint64_t choose(std::uint8_t& k_out) const {
    int best = 0;
    for (int k = 1; k < kKs; ++k)
      if (bits[k] < bits[best]) best = k;
    k_out = std::uint8_t(best);
    return bits[best];
  }
};

// ---- Entropy-coded tiles (spec §4.5, §7.4) ----------------------------------

using AnsHist = std::array<std::uint32_t, core::kAnsTokens>;
using AnsFreqs = std::array<std::uint32_t, core::kAnsTokens>;

// Compact tables (version 9, spec §4.5): the mantissa bits a frequency
// with exponent e keeps, and whether f has that form.
inline int ans_compact_mantissa(int e) { return e > 1 ? std::min(e - 1, core::kAnsMantissaBits) : 0; }
inline bool ans_compact_exact(std::uint32_t f) {
  const int e = f ? 32 - core::clz32(f) : 0;
  return e <= 1 || (f & ((1u << (e - 1 - ans_compact_mantissa(e))) - 1)) == 0;
}
// The frequencies `f` (summing to about kAnsTotal, each used token >= 1) in a
// compact table's form: every token but `rest` rounded to the nearest
// frequency with at most kAnsMantissaBits mantissa bits (never to 0), and
// `rest`, the most frequent, takes what they leave. Should that leave less
// than 1 (many tokens rounded up), they are rounded down instead, which
// leaves `rest` at least its own share.
inline AnsFreqs ans_compact(AnsFreqs f, int rest) {
  for (int round_up = 1; round_up >= 0; --round_up) {
    AnsFreqs g = f;
    std::uint32_t others = 0;
    for (int i = 0; i < core::kAnsTokens; ++i) {
      if (!g[i] || i == rest) continue;
      const int e = 32 - core::clz32(g[i]);
      const int drop = e - 1 - ans_compact_mantissa(e);
      if (drop > 0) g[i] = ((g[i] + (round_up ? 1u << (drop - 1) : 0u)) >> drop) << drop;
      others += g[i];
    }
    if (others < core::kAnsTotal) {
      g[rest] = core::kAnsTotal - others;
      return g;
    }
  }
  return f;  // unreachable: rounded down, the others sum below kAnsTotal - f[rest]
}

// Token counts quantised to frequencies summing to kAnsTotal, every counted
// token at least 1 (all zero for an unused context).
inline AnsFreqs ans_quantise(const AnsHist& h, bool compact = false) {
  AnsFreqs f{};
  std::uint64_t n = 0;
  for (std::uint32_t v : h) n += v;
  if (!n) return f;
  std::int64_t sum = 0;
  int big = 0;
  for (int i = 0; i < core::kAnsTokens; ++i) {
    if (!h[i]) continue;
    const std::uint64_t q = (std::uint64_t(h[i]) * core::kAnsTotal + n / 2) / n;
    f[i] = q ? std::uint32_t(q) : 1u;
    sum += f[i];
    if (h[i] > h[big]) big = i;
  }
  if (compact) return ans_compact(f, big);
  // Fix the sum: add to the most frequent token, or take from the largest
  // frequencies (at most one token per unit; never below 1).
  if (sum < std::int64_t(core::kAnsTotal)) f[big] += std::uint32_t(std::int64_t(core::kAnsTotal) - sum);
  while (sum > std::int64_t(core::kAnsTotal)) {
    int j = 0;
    for (int i = 1; i < core::kAnsTokens; ++i)
      if (f[i] > f[j]) j = i;
    --f[j];
    --sum;
  }
  return f;
}

// LSB-first bit packer for the frequency tables (spec §4.5).
class LsbWriter {
public:
  explicit LsbWriter(std::vector<std::uint8_t>& out) : out_(out) {}
  void put(std::uint32_t v, int n) {
    for (int i = 0; i < n; ++i, ++bit_) {
      if ((bit_ & 7) == 0) out_.push_back(0);
      out_.back() |= std::uint8_t(((v >> i) & 1) << (bit_ & 7));
    }
  }

private:
  std::vector<std::uint8_t>& out_;
  std::uint64_t bit_ = 0;
};

// One context's table: 5 bits alphabet size, in a compact table (version 9)
// 5 bits of the remainder token, then per token a 4-bit exponent and its
// mantissa bits. Returns its size in bits when `out` is null. A compact
// table's frequencies come from ans_compact: every token but one has the
// compact form, and that one (or, if all have it, the most frequent) is the
// remainder.
inline std::uint64_t ans_write_table(const AnsFreqs& f, LsbWriter* out, bool compact = false) {
  int a = 0;
  for (int i = 0; i < core::kAnsTokens; ++i)
    if (f[i]) a = i + 1;
  std::uint64_t bits = 5;
  if (out) out->put(std::uint32_t(a), 5);
  int rest = -1;
  if (compact && a > 0) {
    rest = 0;
    for (int i = 1; i < a; ++i)
      if (f[i] > f[rest]) rest = i;
    for (int i = 0; i < a; ++i)
      if (!ans_compact_exact(f[i])) rest = i;
    bits += 5;
    if (out) out->put(std::uint32_t(rest), 5);
  }
  for (int i = 0; i < a; ++i) {
    if (i == rest) continue;
    const int e = f[i] ? 32 - core::clz32(f[i]) : 0;
    const int n = compact ? ans_compact_mantissa(e) : (e > 1 ? e - 1 : 0);
    bits += 4 + std::uint64_t(n);
    if (out) {
      out->put(std::uint32_t(e), 4);
      if (n) out->put((f[i] >> (e - 1 - n)) & ((1u << n) - 1), n);
    }
  }
  return bits;
}

// rANS encoder of one row stream (spec §7.4): values are pushed in reverse
// order; finish() writes the final state, then the emitted 16-bit words in
// the order the decoder reads them, all big-endian.
class AnsWriter {
public:
  // A token with frequency f at cumulative start `start`.
  void put_token(std::uint32_t start, std::uint32_t f) {
    if (x_ >= (std::uint64_t(f) << (32 - core::kAnsPrecisionBits))) emit();
    // The state is below f << 20 here, so 32-bit division (cheaper than 64-bit) is exact.
    const auto x = std::uint32_t(x_);
    x_ = (std::uint64_t(x / f) << core::kAnsPrecisionBits) + x % f + start;
  }
  // `bits` raw bits (1..8), taken from the state by the decoder.
  void put_raw(std::uint32_t value, int bits) {
    if (x_ >= (std::uint64_t{1} << (32 - bits))) emit();
    x_ = (x_ << bits) | value;
  }
  std::vector<std::uint8_t> finish() const {
    std::vector<std::uint8_t> out;
    out.reserve(4 + 2 * words_.size());
    for (int b = 3; b >= 0; --b) out.push_back(std::uint8_t(x_ >> (8 * b)));
    for (auto it = words_.rbegin(); it != words_.rend(); ++it) {
      out.push_back(std::uint8_t(*it >> 8));
      out.push_back(std::uint8_t(*it));
    }
    return out;
  }

private:
  void emit() {
    words_.push_back(std::uint16_t(x_));
    x_ >>= 16;
  }
  std::uint64_t x_ = core::kAnsLow;
  std::vector<std::uint16_t> words_;
};

// The distinct colours of a tile (at most a palette's 256) in an
// open-addressing hash table, at most a quarter full; after the palette is
// ordered, each slot also holds its colour's index.
struct ColourTable {
  static constexpr std::uint32_t kSlots = 1024;
  static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};
  std::array<std::uint64_t, kSlots> key;
  std::array<std::uint8_t, kSlots> index{};
  ColourTable() { key.fill(kEmpty); }

  static std::uint32_t pack(const std::uint8_t* px, int channels) {
    std::uint32_t v = 0;
    for (int k = 0; k < channels; ++k) v |= std::uint32_t(px[k]) << (8 * k);
    return v;
  }
  // The slot holding v, or the empty slot where it belongs.
  std::uint32_t slot(std::uint32_t v) const {
    std::uint32_t h = (v * 2654435761u) >> 22;
    while (key[h] != kEmpty && key[h] != v) h = (h + 1) & (kSlots - 1);
    return h;
  }
  // Adds every pixel's colour; false when there are more than 256.
  bool collect(const std::uint8_t* px, std::size_t count, int channels, std::vector<std::uint32_t>& colours) {
    for (std::size_t i = 0; i < count; ++i) {
      const std::uint32_t v = pack(px + i * std::size_t(channels), channels);
      const std::uint32_t h = slot(v);
      if (key[h] == v) continue;
      if (colours.size() == core::kMaxPalette) return false;
      key[h] = v;
      colours.push_back(v);
    }
    return true;
  }
};

}  // namespace l3::encoder
