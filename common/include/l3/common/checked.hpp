// Checked size arithmetic: every size computed from untrusted input goes
// through these, so an overflow becomes an error instead of a short buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace l3 {

template <class T> constexpr std::optional<T> checked_mul(T a, T b) noexcept {
  T r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}
template <class T> constexpr std::optional<T> checked_add(T a, T b) noexcept {
  T r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

}  // namespace l3
