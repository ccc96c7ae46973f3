// The one error vocabulary of the l3 libraries (codec, format, reader, CUDA):
// the codes (l3::errc, l3/common/errc.hpp, also compiled as device code), their
// names and error category, and the exception l3::Error.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <system_error>

#include "l3/common/errc.hpp"

namespace l3 {

// A short, stable description ("corrupt tile table").
const char* errc_name(errc e) noexcept;

const std::error_category& error_category() noexcept;
inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), error_category()}; }

// The exception thrown by the C++ API. what() is "<errc name>: <detail>".
class Error : public std::runtime_error {
public:
  Error(errc e, const std::string& detail)
      : std::runtime_error(std::string(errc_name(e)) + ": " + detail), code_(e) {}
  errc code() const noexcept { return code_; }
  std::error_code error_code() const noexcept { return make_error_code(code_); }
private:
  errc code_;
};

[[noreturn]] void throw_error(errc e, const std::string& detail);

// `e` with `context` (what failed: a file, a record) put before its detail:
// "<errc name>: <context>: <detail>"; the code is kept.
Error with_context(const Error& e, const std::string& context);

}  // namespace l3

template <> struct std::is_error_code_enum<l3::errc> : std::true_type {};
