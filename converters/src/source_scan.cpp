// What `l3pack convert` reads: class folders, a list file or a flat folder
// (l3/convert.hpp), and the platform-stable seeded permutation.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <map>
#include <random>

#include "l3/convert.hpp"

namespace l3 {
namespace fs = std::filesystem;

namespace {

bool is_image_name(const fs::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".ppm" || ext == ".pgm" || ext == ".pnm" ||
         ext == ".pam";
}

bool is_hidden(const fs::path& path) { return path.filename().string().starts_with('.'); }

std::string key_of(const fs::path& file, const fs::path& root) { return file.lexically_relative(root).generic_string(); }

// Image files under `dir` (recursively, hidden entries skipped), keys relative to root.
void collect_images(const fs::path& dir, const fs::path& root, std::int64_t label, std::vector<SourceImage>& out) {
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, ec), end;
  if (ec) throw_error(errc::io_error, dir.string() + ": cannot list: " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) throw_error(errc::io_error, dir.string() + ": cannot list: " + ec.message());
    if (is_hidden(it->path())) {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file() && is_image_name(it->path()))
      out.push_back({it->path(), key_of(it->path(), root), label});
  }
}

void sort_by_key(std::vector<SourceImage>& images) {
  std::sort(images.begin(), images.end(), [](const SourceImage& a, const SourceImage& b) { return a.key < b.key; });
}

SourceSet scan_folder(const fs::path& src) {
  SourceSet set;
  set.root = src;
  bool has_top_level_images = false;
  std::vector<std::string> subfolders;
  for (const auto& entry : fs::directory_iterator(src)) {
    if (is_hidden(entry.path())) continue;
    if (entry.is_directory()) subfolders.push_back(entry.path().filename().string());
    else if (entry.is_regular_file() && is_image_name(entry.path())) has_top_level_images = true;
  }
  if (has_top_level_images || subfolders.empty()) {
    set.kind = SourceKind::flat_folder;
    collect_images(src, src, kNoLabel, set.images);
  } else {
    set.kind = SourceKind::class_folders;
    std::sort(subfolders.begin(), subfolders.end());
    set.classes = subfolders;
    for (std::size_t label = 0; label < subfolders.size(); ++label)
      collect_images(src / subfolders[label], src, static_cast<std::int64_t>(label), set.images);
  }
  sort_by_key(set.images);
  return set;
}

std::string trim(std::string_view text) {
  const char* space = " \t\r\n";
  std::size_t begin = text.find_first_not_of(space);
  if (begin == std::string_view::npos) return {};
  std::size_t end = text.find_last_not_of(space);
  return std::string(text.substr(begin, end - begin + 1));
}

std::string unquote(std::string text) {
  if (text.size() >= 2 && text.front() == '"' && text.back() == '"') return text.substr(1, text.size() - 2);
  return text;
}

[[noreturn]] void bad_line(const fs::path& list, std::size_t line, const std::string& why) {
  std::string detail = list.string();
  detail += ":";
  detail += std::to_string(line);
  detail += ": ";
  detail += why;
  throw_error(errc::invalid_argument, detail);
}

std::optional<std::int64_t> parse_label(const std::string& text) {
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size() || v < kNoLabel) return std::nullopt;
  return v;
}

// "path<TAB>label" or "path,label"; the label is the last field, so a CSV path
// may contain commas. A first line whose label is not a number is a header.
SourceSet scan_list(const fs::path& list) {
  std::ifstream in(list);
  if (!in) throw_error(errc::io_error, list.string() + ": cannot open the list file");
  SourceSet set;
  set.kind = SourceKind::list_file;
  set.root = source_root(list);
  std::map<std::string, std::size_t> seen;  // key -> line
  std::string text;
  for (std::size_t line = 1; std::getline(in, text); ++line) {
    std::string row = trim(text);
    if (row.empty() || row.starts_with('#')) continue;
    std::size_t cut = row.find('\t') != std::string::npos ? row.rfind('\t') : row.rfind(',');
    if (cut == std::string::npos) bad_line(list, line, "expected 'path,label' (CSV) or 'path<TAB>label' (TSV)");
    std::string path_text = unquote(trim(row.substr(0, cut)));
    std::optional<std::int64_t> label = parse_label(unquote(trim(row.substr(cut + 1))));
    if (!label) {
      if (set.images.empty() && seen.empty()) continue;  // header line
      bad_line(list, line, "the label must be an integer >= -1");
    }
    fs::path relative = fs::path(path_text).lexically_normal();
    if (path_text.empty() || relative.is_absolute() || *relative.begin() == "..")
      bad_line(list, line, "the path must be relative to the list file's folder and stay inside it");
    std::string key = relative.generic_string();
    auto [it, inserted] = seen.emplace(key, line);
    if (!inserted) bad_line(list, line, "duplicate path '" + key + "' (also on line " + std::to_string(it->second) + ")");
    set.images.push_back({set.root / relative, key, *label});
  }
  if (in.bad()) throw_error(errc::io_error, list.string() + ": cannot read the list file");
  return set;
}

}  // namespace

fs::path source_root(const fs::path& src) {
  if (fs::is_directory(src)) return src;
  fs::path parent = src.parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

SourceSet scan_source(const fs::path& src) {
  std::error_code ec;
  fs::file_status status = fs::status(src, ec);
  if (ec || !fs::exists(status)) throw_error(errc::io_error, src.string() + ": no such file or folder");
  return fs::is_directory(status) ? scan_folder(src) : scan_list(src);
}

std::vector<std::size_t> seeded_permutation(std::size_t n, std::uint64_t seed) {
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  std::mt19937_64 rng(seed);
  for (std::size_t i = n; i > 1; --i) {
    const std::uint64_t range = i;  // partner of element i-1 is drawn from [0, i)
    const std::uint64_t reject_below = (0 - range) % range;  // 2^64 mod range
    std::uint64_t x = rng();
    while (x < reject_below) x = rng();
    std::swap(order[i - 1], order[static_cast<std::size_t>(x % range)]);
  }
  return order;
}

}  // namespace l3
