#include "l3/common/error.hpp"

namespace l3 {

const char* errc_name(errc e) noexcept {
  switch (e) {
    case errc::ok: return "ok";
    case errc::invalid_argument: return "invalid argument";
    case errc::buffer_too_small: return "buffer too small";
    case errc::limit_exceeded: return "limit exceeded";
    case errc::unsupported: return "unsupported";
    case errc::out_of_range: return "out of range";
    case errc::bad_magic: return "bad magic";
    case errc::unsupported_version: return "unsupported version";
    case errc::corrupt_header: return "corrupt header";
    case errc::reserved_bits_set: return "reserved bits set";
    case errc::truncated: return "truncated";
    case errc::corrupt_tile_table: return "corrupt tile table";
    case errc::corrupt_tile: return "corrupt tile";
    case errc::checksum_mismatch: return "checksum mismatch";
    case errc::corrupt_index: return "corrupt index";
    case errc::corrupt_manifest: return "corrupt manifest";
    case errc::corrupt_symbols: return "corrupt symbols";
    case errc::io_error: return "I/O error";
    case errc::out_of_memory: return "out of memory";
    case errc::device_error: return "device error";
  }
  return "unknown error";
}

namespace {
class Category final : public std::error_category {
public:
  const char* name() const noexcept override { return "l3"; }
  std::string message(int v) const override { return errc_name(static_cast<errc>(v)); }
};
}  // namespace

const std::error_category& error_category() noexcept {
  static const Category category;
  return category;
}

void throw_error(errc e, const std::string& detail) {
  throw Error(e, detail);
}

Error with_context(const Error& e, const std::string& context) {
  // what() is "<errc name>: <detail>"; keep the detail, put the context first.
  std::string detail = e.what();
  const std::string prefix = std::string(errc_name(e.code())) + ": ";
  if (detail.rfind(prefix, 0) == 0) detail.erase(0, prefix.size());
  return Error(e.code(), context + ": " + detail);
}

}  // namespace l3
