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
// past the end read as zero, and `past` counts those consumed. The CPU
// decoders' reader (8 bytes at a time); the GPU wavefront reads the same bits
// with WordReader, below.
L3_HD std::uint32_t load_le32_aligned(const std::uint8_t* q) {
#if defined(__CUDA_ARCH__)
  return __ldg(reinterpret_cast<const unsigned int*>(q));  // read-only during the kernel
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

// The 8 bytes at p, big-endian; p + 8 <= end (kLoadBytes before it).
inline constexpr int kLoadBytes = 8;
L3_HD std::uint64_t load_be64(const std::uint8_t* p) {
#if defined(__CUDA_ARCH__)
  std::uint64_t v = 0;  // no kernel reads with BitReader (WordReader); byte loads keep it correct there
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
#else
  std::uint64_t v;
  __builtin_memcpy(&v, p, 8);
  return __builtin_bswap64(v);
#endif
}

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

// The GPU wavefront's reader (spec/cuda.md §2): the bits of BitReader, taken
// from the stream one aligned 32-bit word at a time (one load and one byte
// swap a refill, the same instructions at every alignment of the stream, so
// that lanes whose streams start at different alignments do not diverge).
// Each refill loads the word after the one it takes (`next`): the load is in
// flight until the next refill, a pixel or more later, instead of stalling the
// warp at the refill (a lane refills at its own steps, and the whole warp
// waited for it). The first word may hold up to 3 bytes before the stream
// (inside the same image: a row stream follows its tile's header), dropped at
// init; a word that would reach past the end is read byte by byte, the bytes
// past the end as zero. So it reads nothing outside [begin - 3, end), and
// caller-owned device images need no padding.
struct WordReader {
  const std::uint8_t* end;  // the stream's end
  std::int32_t left;        // bytes from `next`'s word to `end`; <= 0 past it
  std::uint64_t buf;        // next bits, MSB-aligned
  int avail;                // valid bits in buf
  std::uint32_t next;       // the word after buf's as in memory (little-endian), loaded one refill ahead

  L3_HD void init(const std::uint8_t* begin, const std::uint8_t* stop) {
    const int skip = int(reinterpret_cast<std::uintptr_t>(begin) & 3u);
    end = stop;
    left = std::int32_t(stop - begin) + skip;  // from begin's aligned word
    buf = 0;
    avail = 0;
    next = fetch_word();
    load_word();
    consume(8 * skip);
  }
  // The word at end - left as a little-endian integer; a word that reaches
  // past the end byte by byte (tail_word).
  L3_HD std::uint32_t fetch_word() const {
    const std::uint8_t* q = end - left;
    return left >= 4 ? load_le32_aligned(q) : tail_word(q);
  }
  // `next` into buf and the word after it into `next`; needs avail <= 32.
  // The load's result is first used at the next refill, a pixel or more
  // later: the warp does not wait for it here.
  L3_HD void load_word() {
    buf |= std::uint64_t{bswap32(next)} << (32 - avail);
    avail += 32;
    left -= 4;
    next = fetch_word();
  }
  // The word at q, which reaches past the end: its bytes before the end,
  // zeros after (none read when q is past the end).
  L3_HD std::uint32_t tail_word(const std::uint8_t* q) const {
    std::uint32_t w = 0;
    for (int i = 0; i < 4; ++i) w |= (i < left ? std::uint32_t(q[i]) : 0u) << (8 * i);
    return w;
  }
  // Ensures avail >= 32.
  L3_HD void refill() {
    if (avail <= 32) load_word();
  }
  L3_HD void consume(int bits) {
    buf <<= bits;
    avail -= bits;
  }
  // Bits consumed since init(begin, ...).
  L3_HD std::uint64_t consumed_bits(const std::uint8_t* begin) const {
    return std::uint64_t(std::int64_t(end - begin) - left) * 8 - std::uint64_t(avail);
  }
};

// Decodes one Rice-coded value with parameter k <= kMaxK (spec §7.2):
//   q = u >> k zeros, a one, then the k low bits of u;
//   or, when q >= 20, twenty zeros and u in 10 bits (escape).
// A symbol is at most 30 bits (q + 1 + k with q < 20, k <= 10), so once at
// least 30 are buffered it lies in the buffer's top 32 bits: the reads are
// 32-bit (one count of leading zeros, not two, on the GPU, spec/cuda.md §2).
template <class Reader>
L3_HD std::uint32_t read_rice(Reader& br, int k) {
  if (br.avail < int(kEscapeZeros + kEscapeBits)) br.refill();  // a symbol is at most 30 bits
  const std::uint32_t top = std::uint32_t(br.buf >> 32);
  const int q = clz32(top);
  if (q < int(kEscapeZeros)) {
    // After the q zeros the top bit is the terminating one: clear it, then
    // the next k bits are the low bits of u (none when k = 0).
    const std::uint32_t after = (top << q) & 0x7fffffffu;
    const std::uint32_t low = after >> (31 - k);
    br.consume(q + 1 + k);
    return (std::uint32_t(q) << k) | low;
  }
  const std::uint32_t u = (top << kEscapeZeros) >> (32 - kEscapeBits);
  br.consume(int(kEscapeZeros + kEscapeBits));
  return u;
}

}  // namespace l3::core
