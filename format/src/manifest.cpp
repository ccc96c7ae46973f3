// manifest.json (spec/format.md §8): parse + validate, serialize, atomic write.
#include <unistd.h>

#include <charconv>
#include <fstream>
#include <set>
#include <sstream>

#include "l3/common/file_io.hpp"
#include "l3/common/checked.hpp"
#include "l3/format/dataset.hpp"
#include "l3/common/text.hpp"

namespace l3 {
using nlohmann::json;

namespace {

constexpr const char* kFormatName = "l3-dataset";
constexpr int kManifestVersion = 1;

[[noreturn]] void bad(const std::string& what) { throw_error(errc::corrupt_manifest, "manifest: " + what); }

const json& member(const json& obj, const char* name, json::value_t type, const std::string& where) {
  auto it = obj.find(name);
  if (it == obj.end()) bad(where + "missing \"" + name + "\"");
  bool ok = it->type() == type || (type == json::value_t::number_unsigned && it->is_number_unsigned());
  if (!ok) bad(where + "\"" + name + "\" has the wrong type (" + it->type_name() + ")");
  return *it;
}

std::uint64_t parse_hex16(const std::string& s, const std::string& where) {
  std::uint64_t v = 0;
  bool lower_hex = s.size() == 16 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
  if (!lower_hex || std::from_chars(s.data(), s.data() + 16, v, 16).ec != std::errc{})
    bad(where + "\"xxh3\" must be 16 lowercase hex digits");
  return v;
}

// §8.2: a shard file name is a plain name inside the dataset directory.
bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\\') == std::string::npos && name.find('\0') == std::string::npos;
}

ManifestShard parse_shard(const json& j, std::size_t k) {
  std::string where = "shards[" + std::to_string(k) + "]: ";
  if (!j.is_object()) bad(where + "is not an object");
  ManifestShard s;
  s.file = member(j, "file", json::value_t::string, where).get<std::string>();
  s.records = member(j, "records", json::value_t::number_unsigned, where).get<std::uint64_t>();
  s.bytes = member(j, "bytes", json::value_t::number_unsigned, where).get<std::uint64_t>();
  s.file_hash = parse_hex16(member(j, "xxh3", json::value_t::string, where).get<std::string>(), where);
  return s;
}

void check_manifest(const Manifest& m) {
  std::set<std::string> names;
  std::uint64_t total = 0;
  for (std::size_t k = 0; k < m.shards.size(); ++k) {
    const auto& s = m.shards[k];
    std::string where = "shards[" + std::to_string(k) + "]: ";
    if (!is_plain_file_name(s.file)) bad(where + "\"file\" must be a plain file name, got \"" + s.file + "\"");
    if (!names.insert(s.file).second) bad(where + "file \"" + s.file + "\" is listed twice");
    auto sum = checked_add(total, s.records);
    if (!sum) bad("total record count overflows 64 bits");
    total = *sum;
  }
  if (!m.image_stats.is_object()) bad("\"image_stats\" must be an object");
  if (!m.extra.is_object()) bad("\"extra\" must be an object");
}

}  // namespace

std::uint64_t Manifest::total_records() const noexcept {
  std::uint64_t n = 0;
  for (const auto& s : shards) n += s.records;
  return n;
}

ManifestShard manifest_entry(const ShardSummary& summary) {
  return {summary.path.filename().string(), summary.records, summary.bytes, summary.file_hash};
}

Manifest parse_manifest(const std::string& text) {
  json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) bad("not valid JSON");
  if (!root.is_object()) bad("top level is not an object");
  if (member(root, "format", json::value_t::string, "") != kFormatName) bad("\"format\" is not \"l3-dataset\"");
  auto version = member(root, "version", json::value_t::number_unsigned, "").get<std::uint64_t>();
  if (version != kManifestVersion)
    throw_error(errc::unsupported_version, "manifest: version " + std::to_string(version) + " (this build reads 1)");
  Manifest m;
  const json& shards = member(root, "shards", json::value_t::array, "");
  for (std::size_t k = 0; k < shards.size(); ++k) m.shards.push_back(parse_shard(shards[k], k));
  for (const json& c : member(root, "classes", json::value_t::array, "")) {
    if (!c.is_string()) bad("\"classes\" must hold only strings");
    m.classes.push_back(c.get<std::string>());
  }
  m.image_stats = member(root, "image_stats", json::value_t::object, "");
  m.extra = member(root, "extra", json::value_t::object, "");
  check_manifest(m);
  auto total = member(root, "total_records", json::value_t::number_unsigned, "").get<std::uint64_t>();
  if (total != m.total_records())
    bad("\"total_records\" is " + std::to_string(total) + " but the shards hold " + std::to_string(m.total_records()));
  return m;
}

std::string serialize_manifest(const Manifest& m) {
  check_manifest(m);
  json shards = json::array();
  for (const auto& s : m.shards)
    shards.push_back({{"file", s.file}, {"records", s.records}, {"bytes", s.bytes}, {"xxh3", hex16(s.file_hash)}});
  json root = {{"format", kFormatName},      {"version", kManifestVersion},
               {"shards", shards},           {"classes", m.classes},
               {"total_records", m.total_records()},
               {"image_stats", m.image_stats}, {"extra", m.extra}};
  return root.dump(2) + "\n";  // keys sorted (std::map): deterministic output
}

Manifest read_manifest(const std::filesystem::path& dir) {
  if (is_remote(dir)) {
    try {
      return parse_manifest(read_remote_text(dir, kManifestName));
    } catch (const json::exception& e) {
      bad(e.what());
    }
  }
  auto path = dir / kManifestName;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error(errc::io_error, "no readable " + path.string() + " (dataset missing or never committed)");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw_error(errc::io_error, "cannot read " + path.string());
  try {
    return parse_manifest(text.str());
  } catch (const json::exception& e) {  // e.g. a number too large for uint64
    bad(e.what());
  }
}

void write_manifest_atomic(const std::filesystem::path& dir, const Manifest& m) {
  std::string text = serialize_manifest(m);
  auto final_path = dir / kManifestName;
  // A fixed temporary name (not write_file_atomically's unique one): the next
  // write replaces a stale one that a crash left behind.
  auto tmp = final_path;
  tmp += ".tmp";
  int fd = file_io::create_for_write(tmp);
  try {
    file_io::write_all(fd, {reinterpret_cast<const std::uint8_t*>(text.data()), text.size()}, tmp);
    file_io::fsync_fd(fd, tmp);
    file_io::close_fd(std::exchange(fd, -1), tmp);
    file_io::rename_durable(tmp, final_path);
  } catch (...) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
}

}  // namespace l3
