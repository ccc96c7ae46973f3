// Shared helpers for the libFuzzer targets in tests/fuzz/ and their replay
// driver (replay_main.cpp). A target returns 0 for every input; a property
// violation aborts (that is the finding), an l3::Error is an accepted outcome
// and is recorded in last_error() so the replay driver can check crashers
// against their expected error code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>

#include "l3/common/error.hpp"

namespace l3fuzz {

// The errc of the l3::Error the last input ended with; errc::ok when none.
inline l3::errc& last_error() {
  static l3::errc e = l3::errc::ok;
  return e;
}
inline void begin() { last_error() = l3::errc::ok; }
inline void caught(const l3::Error& e) { last_error() = e.code(); }

[[noreturn]] inline void fail(const char* what, const char* file, int line) {
  std::fprintf(stderr, "fuzz property violated: %s (%s:%d)\n", what, file, line);
  std::fflush(stderr);
  std::abort();  // test harness only: libFuzzer records the input as a crash
}

// Turns the codec's whole-stream checksum check off where DecodeOptions has
// one (spec/codec.md §2): random mutations would otherwise stop there, before
// the tile table and tiles the fuzzers are meant to reach.
template <class Options> void skip_stream_checksum(Options& o) {
  if constexpr (requires { o.verify_checksum; }) o.verify_checksum = false;
}

// Reads integers from the front of the input; zeros once it is used up.
class Bytes {
public:
  Bytes(const std::uint8_t* data, std::size_t size) : p_(data), n_(size) {}
  std::uint8_t u8() {
    if (!n_) return 0;
    --n_;
    return *p_++;
  }
  std::uint16_t u16() { return std::uint16_t(u8() | unsigned(u8()) << 8); }
  std::uint32_t u32() { return u16() | std::uint32_t(u16()) << 16; }
  std::span<const std::uint8_t> rest() const { return {p_, n_}; }

private:
  const std::uint8_t* p_;
  std::size_t n_;
};

}  // namespace l3fuzz

#define L3_FUZZ_CHECK(cond) \
  do {                      \
    if (!(cond)) ::l3fuzz::fail(#cond, __FILE__, __LINE__); \
  } while (0)
