// The MSB-first bit reader over one row stream and its Rice decode
// (spec/codec.md §7). Part of the shared per-tile core (l3/codec/tile_core.hpp
// includes it).
// Rules of l3/codec/tile_core.hpp apply: host C++ and CUDA device code alike, no
// allocation, no exceptions, no asserts on input.
#pragma once

#include <cstddef>
#include <cstdint>

#include "l3/common/host_device.hpp"
#include "l3/codec/tile_constants.hpp"

namespace l3::core {

// ---- Bit reader (spec §7.1) -------------------------------------------------

// MSB-first reader over one row stream. Never reads outside [p, end): bytes
// past the end read as zero, and `overrun` tells whether any were consumed.
// The 8 bytes at p as a big-endian integer, read as 3 aligned 32-bit words
// instead of 8 byte loads: the GPU's refill (spec/cuda.md §2). The same 3
// loads and 2 funnel shifts at every alignment of p, so that lanes whose
// streams start at different alignments do not diverge. It reads the aligned
// words that hold p[0..11] at p's alignment (from p - 3 to p + 11): the caller
// makes sure those lie in the same stream (refill: p is past the tile header,
// and p + 11 < end). The host decoder does not use it; tests check it against
// byte loads at every alignment.
L3_HD std::uint32_t load_le32_aligned(const std::uint8_t* q) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const std::uint32_t*>(q);
#else
  std::uint32_t w;
  __builtin_memcpy(&w, q, 4);
  return w;
#endif
}
L3_HD std::uint32_t bswap32(std::uint32_t w) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(w, 0, 0x0123);
#else
  return __builtin_bswap32(w);
#endif
}
// The low 32 bits of (hi:lo) >> shift, shift in [0, 31] (one SHF on the GPU).
L3_HD std::uint32_t funnel_right(std::uint32_t lo, std::uint32_t hi, unsigned shift) {
#if defined(__CUDA_ARCH__)
  return __funnelshift_r(lo, hi, shift);
#else
  return std::uint32_t(((std::uint64_t{hi} << 32) | lo) >> shift);
#endif
}
L3_HD std::uint64_t load_be64_words(const std::uint8_t* p) {
  const unsigned misalign = unsigned(reinterpret_cast<std::uintptr_t>(p)) & 3u;
  const std::uint8_t* a = p - misalign;
  const std::uint32_t w0 = load_le32_aligned(a), w1 = load_le32_aligned(a + 4), w2 = load_le32_aligned(a + 8);
  // Little-endian words of p[0..3] and p[4..7], then each byte-swapped.
  const std::uint32_t first = funnel_right(w0, w1, misalign * 8), second = funnel_right(w1, w2, misalign * 8);
  return (std::uint64_t{bswap32(first)} << 32) | bswap32(second);
}

// The 8 bytes at p, big-endian, and how many bytes from p to the stream's end
// that read needs. The GPU reads aligned words (load_be64_words), up to p + 11,
// which must lie inside the stream: a caller's device allocation may end with
// it. Nearer the end BitReader::refill's byte loop gives the same bits.
#if defined(__CUDA_ARCH__)
inline constexpr int kLoadBytes = 12;
L3_HD std::uint64_t load_be64(const std::uint8_t* p) { return load_be64_words(p); }
#else
inline constexpr int kLoadBytes = 8;
L3_HD std::uint64_t load_be64(const std::uint8_t* p) {
  std::uint64_t v;
  __builtin_memcpy(&v, p, 8);
  return __builtin_bswap64(v);
}
#endif

struct BitReader {
  const std::uint8_t* p;
  const std::uint8_t* end;
  std::uint64_t buf;   // next bits, MSB-aligned
  int avail;           // valid bits in buf
  std::uint32_t past;  // zero bytes supplied past the end

  L3_HD void init(const std::uint8_t* begin, const std::uint8_t* stop) {
    p = begin;
    end = stop;
    buf = 0;
    avail = 0;
    past = 0;
  }
  // Ensures avail >= 57 with one load of the kLoadBytes bytes at p, which
  // the caller knows are readable (refill: inside the stream; the CPU row
  // loops: inside the encoded image, decode_codes.hpp).
  L3_HD void refill_load() {
    buf |= load_be64(p) >> avail;
    p += (63 - avail) >> 3;
    avail |= 56;
  }
  // Ensures avail >= 57.
  L3_HD void refill() {
    if (end - p >= kLoadBytes) {
      refill_load();
      return;
    }
    while (avail <= 56) {
      std::uint64_t byte = 0;
      if (p < end) byte = *p++;
      else ++past;
      buf |= byte << (56 - avail);
      avail += 8;
    }
  }
  L3_HD void consume(int bits) {
    buf <<= bits;
    avail -= bits;
  }
  // Bits consumed since init.
  L3_HD std::uint64_t consumed_bits(const std::uint8_t* begin) const {
    return (static_cast<std::uint64_t>(p - begin) + past) * 8 - static_cast<std::uint64_t>(avail);
  }
};

// Decodes one Rice-coded value with parameter k (spec §7.2):
//   q = u >> k zeros, a one, then the k low bits of u;
//   or, when q >= 20, twenty zeros and u in 10 bits (escape).
L3_HD std::uint32_t read_rice(BitReader& br, int k) {
  if (br.avail < int(kEscapeZeros + kEscapeBits)) br.refill();  // a symbol is at most 30 bits
  const int q = clz64(br.buf);
  if (q < int(kEscapeZeros)) {
    // After the q zeros the top bit is the terminating one: clear it, then
    // the next k bits are the low bits of u (none when k = 0).
    const std::uint64_t after = (br.buf << q) & (~std::uint64_t{0} >> 1);
    const std::uint32_t low = std::uint32_t(after >> (63 - k));
    br.consume(q + 1 + k);
    return (std::uint32_t(q) << k) | low;
  }
  const std::uint32_t u = std::uint32_t((br.buf << kEscapeZeros) >> (64 - kEscapeBits));
  br.consume(int(kEscapeZeros + kEscapeBits));
  return u;
}

}  // namespace l3::core
