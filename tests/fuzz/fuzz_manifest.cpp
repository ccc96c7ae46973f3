// fuzz_manifest: bytes -> parse_manifest. Properties: only l3::Error escapes
// (no nlohmann exception); a parsed manifest serializes, re-parses to the same
// manifest, and serializing is idempotent.
#include <string>

#include "fuzz_common.hpp"
#include "l3/format/dataset.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  l3fuzz::begin();
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const l3::Manifest m = l3::parse_manifest(text);
    std::uint64_t total = 0;
    for (const auto& s : m.shards) total += s.records;
    L3_FUZZ_CHECK(m.total_records() == total);
    const std::string once = l3::serialize_manifest(m);
    const l3::Manifest again = l3::parse_manifest(once);
    L3_FUZZ_CHECK(l3::serialize_manifest(again) == once);
    L3_FUZZ_CHECK(again.shards.size() == m.shards.size() && again.classes == m.classes);
  } catch (const l3::Error& e) {
    L3_FUZZ_CHECK(e.code() == l3::errc::corrupt_manifest || e.code() == l3::errc::unsupported_version ||
                  e.code() == l3::errc::limit_exceeded);
    l3fuzz::caught(e);
  }
  return 0;
}
