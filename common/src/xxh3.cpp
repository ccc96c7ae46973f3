#include "l3/common/xxh3.hpp"

#include <xxhash.h>
#if defined(__x86_64__) || defined(_M_X64)
#include <xxh_x86dispatch.h>  // replaces XXH3_64bits* with libxxhash's *_dispatch entry points
#endif

namespace l3 {

std::uint64_t xxh3_64(const void* data, std::size_t size) noexcept { return XXH3_64bits(data, size); }

std::uint64_t xxh3_64(const void* data, std::size_t size, std::uint64_t seed) noexcept {
  return XXH3_64bits_withSeed(data, size, seed);
}

}  // namespace l3
