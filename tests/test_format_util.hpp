// Helpers shared by the format tests.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "l3/common/error.hpp"

namespace l3test {

using Bytes = std::vector<std::uint8_t>;

inline Bytes bytes_of(const std::string& s) { return Bytes(s.begin(), s.end()); }

inline Bytes read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  REQUIRE(in);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

inline void write_file(const std::filesystem::path& p, const Bytes& b) {
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

// A fresh, empty directory under the build tree for one test.
inline std::filesystem::path fresh_dir(const std::string& name) {
  auto dir = std::filesystem::path(L3_BINARY_DIR) / "test_format_tmp" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Runs f; returns the errc it threw, or errc::ok when it did not throw.
inline l3::errc error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const l3::Error& e) {
    return e.code();
  }
  return l3::errc::ok;
}

inline Bytes random_bytes(std::mt19937_64& rng, std::size_t n) {
  Bytes b(n);
  for (auto& x : b) x = static_cast<std::uint8_t>(rng());
  return b;
}

}  // namespace l3test
