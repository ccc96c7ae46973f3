// Byte layout of a shard file (spec/format.md §3-§5). Internal to l3_format.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "l3/common/xxh3.hpp"  // l3::xxh3_64: every hash of a whole buffer

// The streaming hashes (a shard file as it is written, a remote record as
// it arrives) use XXH3_state_t directly.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace l3::shard_layout {

inline constexpr std::uint16_t kVersion = 1;

// spec/format.md §3: header.
inline constexpr std::size_t kHeaderSize = 32;
inline constexpr std::array<std::uint8_t, 8> kHeaderMagic = {'L', '3', 'S', 'H', 'A', 'R', 'D', 0};
inline constexpr std::size_t kHeaderVersionAt = 8;
inline constexpr std::size_t kHeaderFlagsAt = 10;
inline constexpr std::size_t kHeaderReservedAt = 12;

// spec/format.md §5.1: trailer, the last 64 bytes of the file.
inline constexpr std::size_t kTrailerSize = 64;
inline constexpr std::array<std::uint8_t, 8> kTrailerMagic = {'L', '3', 'T', 'R', 'A', 'I', 'L', 0};
inline constexpr std::size_t kTrIndexOffset = 0;
inline constexpr std::size_t kTrIndexStoredSize = 8;
inline constexpr std::size_t kTrIndexSize = 16;
inline constexpr std::size_t kTrRecordCount = 24;
inline constexpr std::size_t kTrIndexHash = 32;
inline constexpr std::size_t kTrEncoding = 40;
inline constexpr std::size_t kTrVersion = 42;
inline constexpr std::size_t kTrReserved = 44;
inline constexpr std::size_t kTrHash = 48;  // XXH3-64 of trailer bytes [0, 48)
inline constexpr std::size_t kTrMagic = 56;

// spec/format.md §5.2: one index entry.
inline constexpr std::size_t kEntrySize = 48;
inline constexpr std::size_t kEnOffset = 0;
inline constexpr std::size_t kEnSize = 8;
inline constexpr std::size_t kEnChecksum = 16;
inline constexpr std::size_t kEnLabel = 24;
inline constexpr std::size_t kEnHeapOffset = 32;
inline constexpr std::size_t kEnKeySize = 40;
inline constexpr std::size_t kEnMetaSize = 44;

// Little-endian loads and stores, independent of the host byte order.
template <class T> inline T load_le(const std::uint8_t* p) noexcept {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) v |= std::uint64_t{p[i]} << (8 * i);
  return static_cast<T>(v);
}
template <class T> inline void store_le(std::uint8_t* p, T value) noexcept {
  auto v = static_cast<std::uint64_t>(value);
  for (std::size_t i = 0; i < sizeof(T); ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}

// §6 steps 2-4 on the first kHeaderSize bytes of a shard (magic, version,
// flags and reserved bytes); throws l3::Error. Defined in shard_reader.cpp.
void check_header_fields(std::span<const std::uint8_t> first);

inline bool all_zero(const std::uint8_t* p, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i)
    if (p[i] != 0) return false;
  return true;
}

}  // namespace l3::shard_layout
