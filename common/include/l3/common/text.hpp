// Text for one-line output: keys and file names shown in listings and error
// messages must not break the line (keys may hold any UTF-8, newlines too).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace l3 {

// `text` with C-style escapes: backslash as \\, newline \n, carriage return \r,
// tab \t, every other control byte (0x00..0x1f, 0x7f) as \xNN. Other bytes
// (printable ASCII, UTF-8 sequences) are kept, so the result is one line and the
// original can be recovered.
std::string escape_control(std::string_view text);

// 16 lowercase hex digits (a 64-bit hash as the manifest and the cache write it).
std::string hex16(std::uint64_t v);

}  // namespace l3
