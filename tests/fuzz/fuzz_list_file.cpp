// fuzz_list_file: bytes -> a list file (CSV/TSV "path,label") -> l3::scan_source.
// The list-file parser reads a path, not bytes, so each input is written to a
// per-process temporary file first.
// Properties: only l3::Error escapes (invalid_argument for a bad line); every
// listed image has a non-empty relative key that stays inside the list's
// folder, keys are unique, labels are >= -1, keys are escaped (spec/format.md
// §8.4: escape_key(unescape_key(key)) == key) and file == root / unescape_key(key);
// when there are classes (class names, or "0".."max" for integer labels),
// every label < classes.size().
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <set>
#include <string>

#include "fuzz_common.hpp"
#include "l3/convert/convert.hpp"

namespace fs = std::filesystem;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  l3fuzz::begin();
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("l3_fuzz_list_" + std::to_string(getpid()));
    fs::create_directories(d);
    return d;
  }();
  const fs::path list = dir / "list.csv";
  if (std::FILE* f = std::fopen(list.c_str(), "wb")) {
    if (size) std::fwrite(data, 1, size, f);
    std::fclose(f);
  } else {
    return 0;
  }
  try {
    const l3::SourceSet set = l3::scan_source(list);
    L3_FUZZ_CHECK(set.kind == l3::SourceKind::list_file);
    std::set<std::string> keys;
    for (const l3::SourceImage& img : set.images) {
      L3_FUZZ_CHECK(!img.key.empty());
      const fs::path key(img.key);
      L3_FUZZ_CHECK(!key.is_absolute());
      for (const fs::path& part : key) L3_FUZZ_CHECK(part != "..");
      L3_FUZZ_CHECK(keys.insert(img.key).second);
      L3_FUZZ_CHECK(img.label >= l3::kNoLabel);
      L3_FUZZ_CHECK(set.classes.empty() || img.label < static_cast<std::int64_t>(set.classes.size()));
      L3_FUZZ_CHECK(l3::escape_key(l3::unescape_key(img.key)) == img.key);
      L3_FUZZ_CHECK(img.file == set.root / l3::unescape_key(img.key));
    }
  } catch (const l3::Error& e) {
    L3_FUZZ_CHECK(e.code() == l3::errc::invalid_argument || e.code() == l3::errc::io_error);
    l3fuzz::caught(e);
  }
  return 0;
}
