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

// A file that cannot be read or written fails the test (FAIL: an assertion
// counted only when it fires, so helpers add none to a passing test's count).
inline Bytes read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) FAIL("cannot read " << p);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

inline void write_file(const std::filesystem::path& p, const Bytes& b) {
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  if (!out) FAIL("cannot write " << p);
}

// A fresh, empty directory under the build tree for one test, apart for each
// test program: two programs built from one source (test_reader_batch_emu and
// its _tsan twin) run at the same time under `ctest -j`.
inline std::filesystem::path fresh_dir(const std::string& name) {
  auto dir = std::filesystem::path(L3_BINARY_DIR) / "test_tmp" / L3_TEST_NAME / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
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
