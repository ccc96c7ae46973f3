#pragma once
// Which vector paths the hot loops may take, decided once per process. Every
// vector path has a portable twin that gives the same bytes; L3_FORCE_SCALAR
// selects the twins so that the tests run both on one machine.
#include <cstdlib>
#include <cstring>

namespace l3 {

// True when L3_FORCE_SCALAR is set to anything but "0".
inline bool force_scalar() {
  static const bool forced = [] {
    const char* v = std::getenv("L3_FORCE_SCALAR");
    return v != nullptr && std::strcmp(v, "0") != 0;
  }();
  return forced;
}

// Whether the CPU runs AVX2 code (and L3_FORCE_SCALAR is unset).
inline bool avx2_enabled() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static const bool enabled = !force_scalar() && __builtin_cpu_supports("avx2");
  return enabled;
#else
  return false;
#endif
}

}  // namespace l3
