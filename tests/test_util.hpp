// Helpers every test suite shares: bytes, whole files, and the errc a call throws.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "l3/common/error.hpp"

namespace l3::test {

using Bytes = std::vector<std::uint8_t>;

inline Bytes bytes_of(const std::string& s) { return Bytes(s.begin(), s.end()); }

inline Bytes read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  REQUIRE_MESSAGE(in, "cannot read " << p);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

inline void write_file(const std::filesystem::path& p, const Bytes& b) {
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  REQUIRE_MESSAGE(out, "cannot write " << p);
}

// Runs f; returns the errc it threw, or errc::ok when it did not throw.
template <class F>
l3::errc error_of(F&& f) {
  try {
    f();
  } catch (const l3::Error& e) {
    return e.code();
  }
  return l3::errc::ok;
}

}  // namespace l3::test
