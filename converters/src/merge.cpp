// Image statistics for the manifest, and `l3pack merge` of --part outputs.
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>

#include "l3/convert.hpp"
#include "l3/dataset.hpp"
#include "l3/file_io.hpp"

namespace l3 {
namespace fs = std::filesystem;
using nlohmann::json;

void ImageStatsBuilder::add(std::uint32_t width, std::uint32_t height, std::uint32_t channels) {
  if (count_ == 0) {
    width_min_ = width_max_ = width;
    height_min_ = height_max_ = height;
  }
  width_min_ = std::min(width_min_, width);
  width_max_ = std::max(width_max_, width);
  height_min_ = std::min(height_min_, height);
  height_max_ = std::max(height_max_, height);
  width_sum_ += width;
  height_sum_ += height;
  pixels_ += std::uint64_t{width} * height;
  if (channels < 5) ++channels_[channels];
  ++count_;
}

void ImageStatsBuilder::add_record(std::span<const std::uint8_t> l3i) {
  ImageInfo info = read_info(l3i);
  add(info.width, info.height, info.channels);
}

json ImageStatsBuilder::to_json() const {
  auto range = [&](std::uint32_t lo, std::uint32_t hi, std::uint64_t sum) {
    double mean = count_ == 0 ? 0.0 : static_cast<double>(sum) / static_cast<double>(count_);
    return json{{"min", lo}, {"max", hi}, {"mean", mean}};
  };
  json channels = json::object();
  for (std::uint32_t c = 1; c < 5; ++c)
    if (channels_[c] != 0) channels[std::to_string(c)] = channels_[c];
  return {{"images", count_},
          {"total_pixels", pixels_},
          {"width", range(width_min_, width_max_, width_sum_)},
          {"height", range(height_min_, height_max_, height_sum_)},
          {"channels", channels}};
}

namespace {

struct Part {
  fs::path dir;
  Manifest manifest;
  std::uint32_t index = 0, count = 0;
  std::string fingerprint;
};

[[noreturn]] void bad_part(const fs::path& dir, const std::string& why) {
  throw_error(errc::invalid_argument, dir.string() + ": " + why);
}

Part read_part(const fs::path& dir) {
  Part part;
  part.dir = dir;
  part.manifest = read_manifest(dir);
  const json& extra = part.manifest.extra;
  if (!extra.contains("l3pack") || !extra["l3pack"].contains("options"))
    bad_part(dir, "not written by 'l3pack convert --part i/n'");
  const json& l3pack = extra["l3pack"];
  try {
    part.index = l3pack["options"].at("part_index").get<std::uint32_t>();
    part.count = l3pack["options"].at("part_count").get<std::uint32_t>();
    part.fingerprint = l3pack.at("order_fingerprint").get<std::string>();
  } catch (const json::exception&) {
    bad_part(dir, "manifest extra.l3pack lacks the part fields");
  }
  return part;
}

void check_parts(std::vector<Part>& parts) {
  std::sort(parts.begin(), parts.end(), [](const Part& a, const Part& b) { return a.index < b.index; });
  const Part& first = parts.front();
  if (first.count != parts.size()) {
    std::string why = "the parts say the dataset has " + std::to_string(first.count);
    why += " parts; ";
    why += std::to_string(parts.size());
    why += " were given";
    bad_part(first.dir, why);
  }
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const Part& p = parts[i];
    if (p.count != first.count || p.index != i) bad_part(p.dir, "parts must be 0..n-1 of one --part i/n run, each once");
    if (p.fingerprint != first.fingerprint)
      bad_part(p.dir, "converted from other sources or another --shuffle-seed than " + first.dir.string());
    if (p.manifest.classes != first.manifest.classes) bad_part(p.dir, "its classes differ from " + first.dir.string());
  }
}

// The shard must be what its part's manifest says before it joins the dataset.
void check_shard(const fs::path& file, const ManifestShard& entry, ImageStatsBuilder& stats) {
  ShardReader reader(file);
  if (reader.size() != entry.records || reader.file_size() != entry.bytes)
    throw_error(errc::corrupt_manifest, file.string() + ": record count or size differs from its part's manifest");
  auto bytes = reader.file_bytes();
  if (XXH3_64bits(bytes.data(), bytes.size()) != entry.file_hash)
    throw_error(errc::checksum_mismatch, file.string() + ": file hash differs from its part's manifest");
  for (std::uint64_t i = 0; i < reader.size(); ++i) stats.add_record(reader.record(i, Verify::no).payload);
}

// Hard link when possible (same file system, no copy), else copy.
void place_shard(const fs::path& from, const fs::path& to) {
  if (fs::exists(to)) throw_error(errc::invalid_argument, to.string() + ": already exists");
  std::error_code ec;
  fs::create_hard_link(from, to, ec);
  if (ec) fs::copy_file(from, to);
}

// OUT/skipped.jsonl: the parts' lists joined, sorted by path as one run writes
// it (part 0 also holds the scan's skips).
std::uint64_t merge_skip_lists(const fs::path& out, const std::vector<Part>& parts) {
  std::vector<std::pair<std::string, std::string>> lines;  // (path, line)
  for (const Part& part : parts) {
    if (!fs::exists(part.dir / kSkippedName)) continue;
    std::vector<std::uint8_t> bytes = read_file(part.dir / kSkippedName);
    std::string text(bytes.begin(), bytes.end());
    for (std::size_t at = 0, end; at < text.size(); at = end + 1) {
      end = text.find('\n', at);
      if (end == std::string::npos) end = text.size();
      std::string line = text.substr(at, end - at);
      json entry = json::parse(line, nullptr, false);
      if (entry.is_discarded() || !entry.is_object() || !entry.contains("path") || !entry["path"].is_string())
        bad_part(part.dir, std::string(kSkippedName) + " holds a line that is not a skip record");
      lines.emplace_back(entry["path"].get<std::string>(), line + "\n");
    }
  }
  std::stable_sort(lines.begin(), lines.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string text;
  for (const auto& [path, line] : lines) text += line;
  write_file_atomically(out / kSkippedName, {reinterpret_cast<const std::uint8_t*>(text.data()), text.size()});
  return lines.size();
}

}  // namespace

std::uint64_t merge_parts(const fs::path& out, const std::vector<fs::path>& dirs) {
  if (dirs.empty()) throw_error(errc::invalid_argument, "merge needs at least one part folder");
  std::vector<Part> parts;
  for (const fs::path& dir : dirs) parts.push_back(read_part(dir));
  check_parts(parts);
  fs::create_directories(out);
  if (fs::exists(out / kManifestName))
    throw_error(errc::invalid_argument, out.string() + ": already holds a committed dataset (manifest.json)");
  Manifest merged;
  merged.classes = parts.front().manifest.classes;
  ImageStatsBuilder stats;
  std::uint64_t source_bytes = 0;
  for (const Part& part : parts) {
    for (const ManifestShard& shard : part.manifest.shards) {
      check_shard(part.dir / shard.file, shard, stats);
      place_shard(part.dir / shard.file, out / shard.file);
      merged.shards.push_back(shard);
    }
    source_bytes += part.manifest.extra["l3pack"].value("source_bytes", std::uint64_t{0});
  }
  json options = parts.front().manifest.extra["l3pack"]["options"];
  options.erase("part_index");
  merged.image_stats = stats.to_json();
  const json& first = parts.front().manifest.extra["l3pack"];
  merged.extra = {{"l3pack",
                   {{"order_fingerprint", parts.front().fingerprint},
                    {"options", options},
                    {"merged_parts", parts.size()},
                    {"source_bytes", source_bytes},
                    {"key_escape", first.value("key_escape", "")},
                    {"hidden", first.value("hidden", std::uint64_t{0})},
                    {"skipped", {{"file", kSkippedName}, {"count", merge_skip_lists(out, parts)}}}}}};
  write_manifest_atomic(out, merged);
  return merged.total_records();
}

}  // namespace l3
