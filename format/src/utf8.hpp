// UTF-8 validation (RFC 3629: no overlongs, no surrogates, at most U+10FFFF).
// Internal to l3_format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace l3 {

inline bool is_valid_utf8(std::string_view s) noexcept {
  const auto* p = reinterpret_cast<const std::uint8_t*>(s.data());
  std::size_t n = s.size(), i = 0;
  while (i < n) {
    std::uint8_t c = p[i];
    std::size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > n) return false;
    std::uint32_t cp = len == 1 ? c : c & (0x7Fu >> len);
    for (std::size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3Fu);
    }
    static constexpr std::uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

}  // namespace l3
