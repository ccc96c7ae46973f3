// What `l3pack convert` reads: class folders, a list file or a flat folder
// (l3/convert/convert.hpp), keys escaped as spec/format.md §8.4 says, and the
// platform-stable seeded permutation.
//
// The walk accounts for every entry under SRC: an image to convert, a skip
// with its reason, or a hidden name (a documented exclusion). Errors of the
// walk itself (a folder that cannot be listed, a broken link, a symlink loop)
// are skips too, never a silent truncation or an abort of the whole scan.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include "l3/convert/convert.hpp"

namespace l3 {
namespace fs = std::filesystem;

namespace {

std::string lower_extension(const std::string& name) {
  std::size_t dot = name.rfind('.');
  if (dot == std::string::npos || dot == 0) return {};
  std::string ext = name.substr(dot);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext;
}

bool is_image_name(const std::string& name) {
  static const std::set<std::string> kImage = {".png", ".jpg", ".jpeg", ".ppm", ".pgm", ".pnm", ".pam",
                                               ".webp", ".bmp", ".tif", ".tiff"};
  return kImage.contains(lower_extension(name));
}

// Image formats l3pack does not read: counted with their own reason, so that a
// folder of them is not mistaken for a folder of documents.
bool is_unsupported_image_name(const std::string& name) {
  static const std::set<std::string> kOther = {".gif", ".heic", ".heif", ".avif", ".jxl", ".jp2",
                                               ".ico", ".dng", ".cr2", ".nef"};
  return kOther.contains(lower_extension(name));
}

bool is_hidden(const std::string& name) { return name.starts_with('.'); }

std::string join_key(const std::string& dir_key, const std::string& escaped_name) {
  return dir_key.empty() ? escaped_name : dir_key + "/" + escaped_name;
}

// Length of the valid UTF-8 sequence at p[i] (RFC 3629, as the shard format's
// key check), or 0 when the bytes there are not one.
std::size_t utf8_sequence_length(const std::uint8_t* p, std::size_t n, std::size_t i) {
  const std::uint8_t c = p[i];
  const std::size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (len == 0 || i + len > n) return 0;
  std::uint32_t cp = len == 1 ? c : c & (0x7Fu >> len);
  for (std::size_t k = 1; k < len; ++k) {
    if ((p[i + k] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (p[i + k] & 0x3Fu);
  }
  static constexpr std::uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

bool is_valid_utf8_text(std::string_view text) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(text.data());
  for (std::size_t i = 0, len = 0; i < text.size(); i += len)
    if ((len = utf8_sequence_length(p, text.size(), i)) == 0) return false;
  return true;
}

void append_escaped_byte(std::string& out, std::uint8_t byte) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  out += '%';
  out += kHex[byte >> 4];
  out += kHex[byte & 15];
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// ---- folders ----

struct Entry {
  std::string name;  // raw bytes
  fs::path path;
  std::string key;   // escaped
  enum Type { file, folder, skip } type = skip;
  std::string reason, detail;  // for skip
  dev_t device = 0;
  ino_t inode = 0;
};

// Classifies one directory entry, following symbolic links (stat, not lstat).
Entry classify(const fs::path& path, std::string name, std::string key) {
  Entry e;
  e.name = std::move(name);
  e.path = path;
  e.key = std::move(key);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int error = errno;
    struct stat link {};
    const bool is_link = ::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode);
    if (is_link && error == ELOOP) e.reason = "symlink loop";
    else if (is_link) e.reason = "broken symbolic link";
    else e.reason = "cannot read";
    e.detail = std::strerror(error);
    return e;
  }
  e.device = st.st_dev;
  e.inode = st.st_ino;
  if (S_ISDIR(st.st_mode)) e.type = Entry::folder;
  else if (S_ISREG(st.st_mode)) e.type = Entry::file;
  else e.reason = "not a regular file";
  if (e.type == Entry::folder) e.key += '/';
  return e;
}

// The entries of `dir` (hidden ones counted and dropped), sorted by name. A
// folder that cannot be listed, or whose listing fails midway, is a skip.
class Walker {
public:
  Walker(SourceSet& set) : set_(set) {}

  bool list(const fs::path& dir, const std::string& dir_key, std::vector<Entry>& out) {
    DIR* handle = ::opendir(dir.c_str());
    if (handle == nullptr) {
      skip(dir_key.empty() ? "" : dir_key + "/", "cannot read folder", std::strerror(errno));
      return false;
    }
    int error = 0;
    for (;;) {
      errno = 0;  // readdir returns NULL both at the end and on an error
      const dirent* d = ::readdir(handle);
      if (d == nullptr) {
        error = errno;
        break;
      }
      std::string name = d->d_name;
      if (name == "." || name == "..") continue;
      if (is_hidden(name)) {
        ++set_.hidden;
        continue;
      }
      out.push_back(classify(dir / name, name, join_key(dir_key, escape_key(name))));
    }
    ::closedir(handle);
    if (error != 0) skip(dir_key + "/", "cannot read folder", std::string("listing stopped: ") + std::strerror(error));
    std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) { return a.name < b.name; });
    return true;
  }

  // Images under the folder `e` (recursively), with `label`.
  void walk(const Entry& folder, std::int64_t label) {
    const auto id = std::make_pair(folder.device, folder.inode);
    if (ancestors_.contains(id)) return skip(folder.key, "symlink loop", "a link back to a folder above it");
    ancestors_.insert(id);
    std::vector<Entry> entries;
    std::string dir_key = folder.key;
    if (!dir_key.empty()) dir_key.pop_back();  // the trailing '/'
    list(folder.path, dir_key, entries);
    for (const Entry& e : entries) {
      if (e.type == Entry::folder) walk(e, label);
      else add_file(e, label);
    }
    ancestors_.erase(id);
  }

  // SRC itself, above the class folders: a link back to it is a loop too.
  void enter_root(const Entry& root) { ancestors_.insert({root.device, root.inode}); }

  void add_file(const Entry& e, std::int64_t label) {
    if (e.type == Entry::skip) return skip(e.key, e.reason, e.detail);
    if (is_image_name(e.name)) set_.images.push_back({e.path, e.key, label});
    else if (is_unsupported_image_name(e.name)) skip(e.key, "unsupported format", lower_extension(e.name));
    else skip(e.key, "not an image", lower_extension(e.name).empty() ? "no extension" : lower_extension(e.name));
  }

  void skip(std::string key, std::string reason, std::string detail) {
    set_.skipped.push_back({std::move(key), std::move(reason), std::move(detail)});
  }

private:
  SourceSet& set_;
  std::set<std::pair<dev_t, ino_t>> ancestors_;  // folders on the current path
};

void sort_by_key(std::vector<SourceImage>& images) {
  std::sort(images.begin(), images.end(), [](const SourceImage& a, const SourceImage& b) { return a.key < b.key; });
}

[[noreturn]] void mixed_top_level(const fs::path& src, const Entry& folder, const Entry& file) {
  std::string detail = src.string();
  detail += ": the top level mixes class folders (e.g. '";
  detail += folder.key;
  detail += "') with image files (e.g. '";
  detail += file.key;
  detail += "'); move the files into a class folder, or choose --layout classes (labels from the folders, "
            "loose files skipped) or --layout flat (every image, no labels)";
  throw_error(errc::invalid_argument, detail);
}

SourceLayout resolve_layout(const fs::path& src, const std::vector<Entry>& top, SourceLayout layout) {
  if (layout != SourceLayout::automatic) return layout;
  const Entry* folder = nullptr;
  const Entry* image = nullptr;
  for (const Entry& e : top) {
    if (e.type == Entry::folder && !folder) folder = &e;
    if (e.type == Entry::file && !image && (is_image_name(e.name) || is_unsupported_image_name(e.name))) image = &e;
  }
  if (folder && image) mixed_top_level(src, *folder, *image);
  return folder ? SourceLayout::classes : SourceLayout::flat;
}

SourceSet scan_folder(const fs::path& src, const ScanOptions& options) {
  SourceSet set;
  set.root = src;
  Walker walker(set);
  Entry root = classify(src, "", "");
  std::vector<Entry> top;
  if (!walker.list(src, "", top)) throw_error(errc::io_error, src.string() + ": cannot read the folder");
  if (top.empty() && set.hidden == 0) throw_error(errc::io_error, src.string() + ": the folder is empty");
  if (resolve_layout(src, top, options.layout) == SourceLayout::flat) {
    set.kind = SourceKind::flat_folder;
    set.skipped.clear();
    set.hidden = 0;
    walker.walk(root, kNoLabel);
  } else {
    set.kind = SourceKind::class_folders;
    walker.enter_root(root);
    for (const Entry& e : top) {
      if (e.type != Entry::folder) {
        if (e.type == Entry::skip) walker.skip(e.key, e.reason, e.detail);
        else if (options.layout == SourceLayout::classes) walker.skip(e.key, "outside the class folders", "");
        else walker.add_file(e, kNoLabel);  // automatic: only non-images are left at the top
        continue;
      }
      const auto label = static_cast<std::int64_t>(set.classes.size());
      set.classes.push_back(e.key.substr(0, e.key.size() - 1));
      walker.walk(e, label);
    }
  }
  sort_by_key(set.images);
  std::sort(set.skipped.begin(), set.skipped.end(),
            [](const SkippedInput& a, const SkippedInput& b) { return a.key < b.key; });
  return set;
}

// ---- list files ----

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
  if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return v;
}

struct ListRow {
  std::size_t line = 0;
  std::string path, label;
};

// "path<TAB>label" or "path,label"; the label is the last field, so a CSV path
// may contain commas. Blank lines and '#' comments are ignored.
std::vector<ListRow> read_rows(const fs::path& list) {
  std::ifstream in(list);
  if (!in) throw_error(errc::io_error, list.string() + ": cannot open the list file");
  std::vector<ListRow> rows;
  std::string text;
  for (std::size_t line = 1; std::getline(in, text); ++line) {
    std::string row = trim(text);
    if (row.empty() || row.starts_with('#')) continue;
    std::size_t cut = row.find('\t') != std::string::npos ? row.rfind('\t') : row.rfind(',');
    if (cut == std::string::npos) bad_line(list, line, "expected 'path,label' (CSV) or 'path<TAB>label' (TSV)");
    rows.push_back({line, unquote(trim(row.substr(0, cut))), unquote(trim(row.substr(cut + 1)))});
  }
  if (in.bad()) throw_error(errc::io_error, list.string() + ": cannot read the list file");
  return rows;
}

// The key of a list path: relative to base, inside it. Absolute paths only under an explicit base.
std::string list_key(const fs::path& list, const ListRow& row, const fs::path& base, bool explicit_base) {
  fs::path path(row.path);
  if (row.path.empty()) bad_line(list, row.line, "empty path");
  if (path.is_absolute()) {
    if (!explicit_base)
      bad_line(list, row.line, "absolute path '" + row.path + "': give --base FOLDER to read absolute paths under it");
    path = path.lexically_normal().lexically_relative(fs::absolute(base).lexically_normal());
    if (path.empty() || *path.begin() == "..")
      bad_line(list, row.line, "'" + row.path + "' is not under --base " + base.string());
  }
  fs::path relative = path.lexically_normal();
  if (relative.empty() || relative == "." || *relative.begin() == "..")
    bad_line(list, row.line, "the path must stay inside " + std::string(explicit_base ? "--base" : "the list file's folder"));
  return escape_key(relative.generic_string());
}

// Integer labels name themselves: classes "0".."max", so that a labelled
// dataset says it is labelled (info, the manifest's label check). Up to
// kMaxNumberedClasses; beyond that (sparse ids) classes stay empty.
constexpr std::int64_t kMaxNumberedClasses = 65536;

std::vector<std::string> numbered_classes(const std::vector<SourceImage>& images) {
  std::int64_t max = kNoLabel;
  for (const SourceImage& image : images) max = std::max(max, image.label);
  std::vector<std::string> classes;
  if (max >= kMaxNumberedClasses) return classes;
  for (std::int64_t k = 0; k <= max; ++k) classes.push_back(std::to_string(k));
  return classes;
}

// Labels: all integers >= -1, or all class names (mapped to sorted indices).
// The first row is a header when its label is not an integer and its path is
// not a file (e.g. "path,label" or "file,class").
SourceSet scan_list(const fs::path& list, const ScanOptions& options) {
  SourceSet set;
  set.kind = SourceKind::list_file;
  set.root = source_root(list, options);
  std::vector<ListRow> rows = read_rows(list);
  // A path the system refuses (too long, ...) is no file: never a filesystem_error.
  auto is_file = [](const fs::path& path) {
    std::error_code ec;
    return fs::is_regular_file(path, ec);
  };
  if (!rows.empty() && !parse_label(rows.front().label) && !is_file(set.root / rows.front().path) &&
      !is_file(fs::path(rows.front().path)))
    rows.erase(rows.begin());
  const ListRow* named = nullptr;
  const ListRow* numbered = nullptr;
  std::set<std::string> names;
  for (const ListRow& row : rows) {
    if (row.label.empty()) bad_line(list, row.line, "empty label");
    std::optional<std::int64_t> number = parse_label(row.label);
    if (number && *number < kNoLabel) bad_line(list, row.line, "the label must be an integer >= -1 or a class name");
    (number ? numbered : named) = &row;
    if (!number) names.insert(row.label);
  }
  if (named && numbered)
    bad_line(list, std::max(named->line, numbered->line),
             "mixes integer labels (line " + std::to_string(numbered->line) + ") and class names (line " +
                 std::to_string(named->line) + "); use one or the other");
  set.classes.assign(names.begin(), names.end());
  std::map<std::string, std::size_t> seen;  // key -> line
  for (const ListRow& row : rows) {
    std::string key = list_key(list, row, set.root, !options.list_base.empty());
    auto [it, inserted] = seen.emplace(key, row.line);
    if (!inserted)
      bad_line(list, row.line, "duplicate path '" + key + "' (also on line " + std::to_string(it->second) + ")");
    std::int64_t label = named ? static_cast<std::int64_t>(std::lower_bound(set.classes.begin(), set.classes.end(),
                                                                            row.label) - set.classes.begin())
                               : *parse_label(row.label);
    set.images.push_back({set.root / fs::path(unescape_key(key)), key, label});
  }
  for (std::string& name : set.classes)  // the manifest is UTF-8 (spec/format.md §8.2)
    if (!is_valid_utf8_text(name)) name = escape_key(name);
  if (!named) set.classes = numbered_classes(set.images);
  return set;
}

}  // namespace

std::string escape_key(std::string_view raw) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(raw.data());
  std::string out;
  out.reserve(raw.size());
  for (std::size_t i = 0; i < raw.size();) {
    const std::size_t len = utf8_sequence_length(p, raw.size(), i);
    if (len == 0 || p[i] == '%') {
      append_escaped_byte(out, p[i]);
      ++i;
    } else {
      out.append(raw.substr(i, len));
      i += len;
    }
  }
  return out;
}

std::string unescape_key(std::string_view key) {
  std::string out;
  out.reserve(key.size());
  for (std::size_t i = 0; i < key.size(); ++i) {
    if (key[i] != '%') {
      out += key[i];
      continue;
    }
    const int hi = i + 2 < key.size() ? hex_value(key[i + 1]) : -1;
    const int lo = i + 2 < key.size() ? hex_value(key[i + 2]) : -1;
    if (hi < 0 || lo < 0) throw_error(errc::invalid_argument, "key '" + std::string(key) + "': '%' without two hex digits");
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

fs::path source_root(const fs::path& src, const ScanOptions& options) {
  std::error_code ec;
  if (fs::is_directory(src, ec)) return src;
  if (!options.list_base.empty()) return options.list_base;
  fs::path parent = src.parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

SourceSet scan_source(const fs::path& src, const ScanOptions& options) {
  std::error_code ec;
  fs::file_status status = fs::status(src, ec);
  if (ec || !fs::exists(status)) throw_error(errc::io_error, src.string() + ": no such file or folder");
  if (fs::is_directory(status)) {
    if (!options.list_base.empty())
      throw_error(errc::invalid_argument, "--base applies to a list file; " + src.string() + " is a folder");
    return scan_folder(src, options);
  }
  if (options.layout != SourceLayout::automatic)
    throw_error(errc::invalid_argument, "--layout applies to a folder; " + src.string() + " is a list file");
  return scan_list(src, options);
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
