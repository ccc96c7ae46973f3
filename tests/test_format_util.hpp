// Helpers shared by the format tests.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "test_util.hpp"

namespace l3::test {

// A fresh, empty directory under the build tree for one test.
inline std::filesystem::path fresh_dir(const std::string& name) {
  auto dir = std::filesystem::path(L3_BINARY_DIR) / "test_format_tmp" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline Bytes random_bytes(std::mt19937_64& rng, std::size_t n) {
  Bytes b(n);
  for (auto& x : b) x = static_cast<std::uint8_t>(rng());
  return b;
}

}  // namespace l3::test
