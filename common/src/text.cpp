#include "l3/common/text.hpp"

#include <cstdio>

namespace l3 {

std::string escape_control(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char hex[5];
          std::snprintf(hex, sizeof hex, "\\x%02x", c);
          out += hex;
        } else {
          out += ch;
        }
    }
  }
  return out;
}

std::string hex16(std::uint64_t v) {
  char text[17];
  for (int i = 15; i >= 0; --i, v >>= 4) text[i] = "0123456789abcdef"[v & 0xF];
  text[16] = 0;
  return text;
}

}  // namespace l3
