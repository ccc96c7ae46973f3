#pragma once
// Which vector paths the hot loops may take, decided once per process. Every
// vector path has a portable twin that gives the same bytes; L3_FORCE_SCALAR
// selects the twins, and L3_MAX_ISA caps the instruction set, so that the
// tests run every path one machine has (an AVX-512 machine runs its AVX2
// paths too).
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace l3 {

// The widest instruction set the vector paths may use, before the CPU's own
// limits: L3_MAX_ISA = "avx512" (the default), "avx2" or "scalar";
// L3_FORCE_SCALAR set to anything but "0" is "scalar". Any other L3_MAX_ISA
// is ignored with one line on stderr.
enum class IsaCap { scalar, avx2, avx512 };
inline IsaCap isa_cap() {
  static const IsaCap cap = [] {
    const char* forced = std::getenv("L3_FORCE_SCALAR");
    if (forced != nullptr && std::strcmp(forced, "0") != 0) return IsaCap::scalar;
    const char* v = std::getenv("L3_MAX_ISA");
    if (v == nullptr || std::strcmp(v, "avx512") == 0) return IsaCap::avx512;
    if (std::strcmp(v, "avx2") == 0) return IsaCap::avx2;
    if (std::strcmp(v, "scalar") == 0) return IsaCap::scalar;
    std::fprintf(stderr, "l3: L3_MAX_ISA=%s is not avx512, avx2 or scalar; ignored\n", v);
    return IsaCap::avx512;
  }();
  return cap;
}

// Whether the CPU runs AVX2 code and the cap allows it.
inline bool avx2_enabled() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static const bool enabled = isa_cap() >= IsaCap::avx2 && __builtin_cpu_supports("avx2");
  return enabled;
#else
  return false;
#endif
}

// Whether the CPU runs the AVX-512 code (F, BW, VL, DQ and CD) and the cap
// allows it.
inline bool avx512_enabled() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static const bool enabled = isa_cap() >= IsaCap::avx512 && __builtin_cpu_supports("avx512f") &&
                              __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                              __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512cd");
  return enabled;
#else
  return false;
#endif
}

}  // namespace l3
