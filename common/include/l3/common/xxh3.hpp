// XXH3-64, the checksum of the codec (spec/codec.md §2) and of the shard
// format (spec/format.md), for whole buffers. On x86-64 it runs through
// libxxhash's runtime dispatch, which takes the AVX-512 or AVX2 loop where
// the CPU has it: with XXH_INLINE_ALL the compiler's baseline flags leave
// XXH3 on its SSE2 loop, measured 2.3x slower here (170 KB records, the
// training loader's size: 16.4 us against 7.1 us). The reader hashes each
// record it reads, so this is per-example time. Streaming hashes of a file
// as it is written keep using <xxhash.h> directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace l3 {

std::uint64_t xxh3_64(const void* data, std::size_t size) noexcept;
std::uint64_t xxh3_64(const void* data, std::size_t size, std::uint64_t seed) noexcept;

inline std::uint64_t xxh3_64(std::span<const std::uint8_t> bytes) noexcept { return xxh3_64(bytes.data(), bytes.size()); }

}  // namespace l3
