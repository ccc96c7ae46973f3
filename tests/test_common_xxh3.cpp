// l3::xxh3_64 (libxxhash's runtime-dispatched XXH3, l3/common/xxh3.hpp) gives
// the bytes' XXH3-64 of xxHash's portable code, whichever vector loop the CPU
// takes: every stored checksum (spec/codec.md §2, spec/format.md) depends on it.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#define XXH_INLINE_ALL
#define XXH_VECTOR XXH_SCALAR  // the reference: xxHash's scalar loop
#include <xxhash.h>

#include "l3/common/xxh3.hpp"

namespace {

std::vector<std::uint8_t> pattern(std::size_t n, std::uint32_t seed) {
  std::vector<std::uint8_t> v(n);
  std::uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = static_cast<std::uint8_t>(x);
  }
  return v;
}

}  // namespace

TEST_CASE("xxh3_64 equals xxHash's scalar XXH3 at every length class") {
  // 0-16, 17-128, 129-240 bytes and the long loop (stripes, blocks of 1 KiB,
  // a shard record's size), with and without a seed.
  std::vector<std::size_t> sizes;
  for (std::size_t n = 0; n <= 300; ++n) sizes.push_back(n);
  for (std::size_t n : {1023u, 1024u, 1025u, 4096u, 65537u, 170000u}) sizes.push_back(n);
  for (std::size_t n : sizes) {
    const auto v = pattern(n, static_cast<std::uint32_t>(n));
    CAPTURE(n);
    CHECK(l3::xxh3_64(v.data(), v.size()) == XXH3_64bits(v.data(), v.size()));
    CHECK(l3::xxh3_64(std::span<const std::uint8_t>(v)) == XXH3_64bits(v.data(), v.size()));
    const std::uint64_t seed = 0x9e3779b97f4a7c15ull ^ n;
    CHECK(l3::xxh3_64(v.data(), v.size(), seed) == XXH3_64bits_withSeed(v.data(), v.size(), seed));
  }
}
