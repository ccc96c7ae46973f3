// Image statistics for the manifest, and `l3pack merge` of --part outputs.
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>

#include "l3/convert/convert.hpp"
#include "l3/format/dataset.hpp"
#include "l3/common/file_io.hpp"
#include "l3/storage/storage.hpp"
#include "l3/common/text.hpp"

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

void ImageStatsBuilder::add_stats(const json& stats) {
  try {
    const std::uint64_t images = stats.at("images").get<std::uint64_t>();
    if (images == 0) return;
    const json& w = stats.at("width");
    const json& h = stats.at("height");
    auto sum = [&](const json& range) {
      return static_cast<std::uint64_t>(std::llround(range.at("mean").get<double>() * static_cast<double>(images)));
    };
    if (count_ == 0) {
      width_min_ = w.at("min").get<std::uint32_t>();
      width_max_ = w.at("max").get<std::uint32_t>();
      height_min_ = h.at("min").get<std::uint32_t>();
      height_max_ = h.at("max").get<std::uint32_t>();
    }
    width_min_ = std::min(width_min_, w.at("min").get<std::uint32_t>());
    width_max_ = std::max(width_max_, w.at("max").get<std::uint32_t>());
    height_min_ = std::min(height_min_, h.at("min").get<std::uint32_t>());
    height_max_ = std::max(height_max_, h.at("max").get<std::uint32_t>());
    width_sum_ += sum(w);
    height_sum_ += sum(h);
    pixels_ += stats.at("total_pixels").get<std::uint64_t>();
    for (const auto& [c, n] : stats.at("channels").items()) {
      const unsigned long channels = std::stoul(c);
      if (channels < 5) channels_[channels] += n.get<std::uint64_t>();
    }
    count_ += images;
  } catch (const std::exception&) {
    throw_error(errc::corrupt_manifest, "image_stats is not what l3pack convert writes");
  }
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

Part part_of(const fs::path& dir, Manifest manifest) {
  Part part;
  part.dir = dir;
  part.manifest = std::move(manifest);
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

Part read_part(const fs::path& dir) { return part_of(dir, read_manifest(dir)); }

void check_parts(std::vector<Part>& parts, const char* given = "were given") {
  std::sort(parts.begin(), parts.end(), [](const Part& a, const Part& b) { return a.index < b.index; });
  const Part& first = parts.front();
  if (first.count != parts.size()) {
    std::string why = "the parts say the dataset has " + std::to_string(first.count);
    why += " parts; ";
    why += std::to_string(parts.size());
    why += " ";
    why += given;
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
  // Count, size and hash (class_count 0: no label check here, as before).
  if (const ShardCheck c = compare_with_manifest(reader, entry, 0, /*check_hash=*/true); c.code != errc::ok)
    throw_error(c.code, file.string() + ": " + c.problem + " (its part's manifest)");
  for (std::uint64_t i = 0; i < reader.size(); ++i) stats.add_record(reader.record(i, Verify::no).payload);
}

// Hard link when possible (same file system, no copy), else copy.
void place_shard(const fs::path& from, const fs::path& to) {
  if (fs::exists(to)) throw_error(errc::invalid_argument, to.string() + ": already exists");
  std::error_code ec;
  fs::create_hard_link(from, to, ec);
  if (ec) fs::copy_file(from, to);
}

// The skip list of a part, as text ("" when it has none).
using ReadSkipList = std::function<std::string(const Part&)>;

// The parts' skip lists joined, sorted by path as one run writes it (part 0
// also holds the scan's skips).
std::string join_skip_lists(const std::vector<Part>& parts, const ReadSkipList& read_list, std::uint64_t& count) {
  std::vector<std::pair<std::string, std::string>> lines;  // (path, line)
  for (const Part& part : parts) {
    const std::string text = read_list(part);
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
  count = lines.size();
  return text;
}

// The dataset's manifest from its checked parts (classes, shards in part order,
// options without part_index), given the joined image statistics and skip count.
Manifest joined_manifest(const std::vector<Part>& parts, const ImageStatsBuilder& stats, std::uint64_t skipped) {
  Manifest merged;
  merged.classes = parts.front().manifest.classes;
  std::uint64_t source_bytes = 0;
  for (const Part& part : parts) {
    merged.shards.insert(merged.shards.end(), part.manifest.shards.begin(), part.manifest.shards.end());
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
                    {"skipped", {{"file", kSkippedName}, {"count", skipped}}}}}};
  return merged;
}

std::string as_text(const std::vector<std::uint8_t>& bytes) { return std::string(bytes.begin(), bytes.end()); }

std::span<const std::uint8_t> as_bytes(const std::string& text) {
  return {reinterpret_cast<const std::uint8_t*>(text.data()), text.size()};
}

// OUT of commit_parts: a local folder or an s3:// prefix, as a flat set of named files.
class Folder {
public:
  explicit Folder(const fs::path& out) : out_(out), remote_(is_remote(out)) {
    if (remote_) {
      url_ = storage::parse_s3_url(out.native());
      client_ = storage::shared_s3_client();
      const std::string prefix = url_.key("");
      for (const storage::ObjectInfo& o : client_->list(url_.bucket, prefix))
        if (o.key.find('/', prefix.size()) == std::string::npos) files_[o.key.substr(prefix.size())] = o.size;
      return;
    }
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(out, ec))
      if (entry.is_regular_file()) files_[entry.path().filename().string()] = entry.file_size();
    if (ec) throw_error(errc::io_error, out.string() + ": cannot list the folder: " + ec.message());
  }
  const std::map<std::string, std::uint64_t>& files() const { return files_; }
  fs::path path(const std::string& name) const { return remote_ ? fs::path(url_.url(name)) : out_ / name; }
  std::string read(const std::string& name) const {
    return remote_ ? as_text(client_->get(url_.bucket, url_.key(name))) : as_text(read_file(out_ / name));
  }
  // manifest.json is written last and never over another (spec/format.md §8.3, §8.5.5).
  void write(const std::string& name, const std::string& text) const {
    if (remote_) return client_->put(url_.bucket, url_.key(name), as_bytes(text), name == kManifestName);
    if (name == kManifestName) return write_manifest_atomic(out_, parse_manifest(text));
    write_file_atomically(out_ / name, as_bytes(text));
  }
  // The parts' own files, once the dataset is committed. Best effort: a file
  // left behind (a failed DELETE) is harmless, readers ignore it (§8.1), and
  // the dataset is already committed.
  void remove(const std::string& name) const {
    if (!remote_) {
      std::error_code ignored;
      fs::remove(out_ / name, ignored);
      return;
    }
    if (!files_.count(name)) return;
    try {
      client_->remove(url_.bucket, url_.key(name));
    } catch (const Error&) {
    }
  }

private:
  fs::path out_;
  bool remote_;
  storage::S3Url url_;
  std::shared_ptr<storage::S3Client> client_;
  std::map<std::string, std::uint64_t> files_;
};

// The part manifests in OUT (manifest.part-i-of-n.json), as parts.
std::vector<Part> read_part_manifests(const Folder& folder) {
  static const std::regex name_pattern(R"(manifest\.part-[0-9]+-of-[0-9]+\.json)");
  std::vector<Part> parts;
  for (const auto& [name, size] : folder.files())
    if (std::regex_match(name, name_pattern)) parts.push_back(part_of(folder.path(name), parse_manifest(folder.read(name))));
  return parts;
}

// Merging into an object store (spec/format.md §8.5.5): the parts are merged
// into a local staging folder (shards linked from the shard cache), then its
// shards and skip list are uploaded and manifest.json last, If-None-Match: *.
std::uint64_t merge_into_store(const fs::path& out, const std::vector<fs::path>& dirs) {
  const Folder target(out);
  if (target.files().contains(kManifestName))
    throw_error(errc::invalid_argument, out.string() + ": already holds a committed dataset (manifest.json)");
  const std::string name = out.native();
  const fs::path staging =
      storage::cache_options_from_env().dir / "merge" / hex16(XXH3_64bits(name.data(), name.size()));
  fs::remove_all(staging);
  const std::uint64_t records = merge_parts(staging, dirs);
  const storage::S3Url url = storage::parse_s3_url(out.native());
  const auto client = storage::shared_s3_client();
  for (const ManifestShard& shard : read_manifest(staging).shards)
    client->upload_file(url.bucket, url.key(shard.file), staging / shard.file);
  client->upload_file(url.bucket, url.key(kSkippedName), staging / kSkippedName);
  target.write(kManifestName, as_text(read_file(staging / kManifestName)));  // last, If-None-Match: *
  std::error_code ignored;
  fs::remove_all(staging, ignored);
  return records;
}

}  // namespace

std::uint64_t merge_parts(const fs::path& out, const std::vector<fs::path>& dirs) {
  if (dirs.empty()) throw_error(errc::invalid_argument, "merge needs at least one part folder");
  if (is_remote(out)) return merge_into_store(out, dirs);
  std::vector<Part> parts;
  for (const fs::path& dir : dirs) parts.push_back(read_part(dir));
  check_parts(parts);
  fs::create_directories(out);
  if (fs::exists(out / kManifestName))
    throw_error(errc::invalid_argument, out.string() + ": already holds a committed dataset (manifest.json)");
  ImageStatsBuilder stats;
  for (const Part& part : parts) {
    for (const ManifestShard& shard : part.manifest.shards) {
      // A part in an object store: the shard's copy in the shard cache, downloaded whole.
      const fs::path file = shard_file(part.dir, shard);
      check_shard(file, shard, stats);
      place_shard(file, out / shard.file);
    }
  }
  std::uint64_t skipped = 0;
  const std::string skip_list = join_skip_lists(
      parts, [](const Part& part) {
        if (is_remote(part.dir)) {  // the list, when the part's manifest names one
          const json& l3pack = part.manifest.extra["l3pack"];
          return l3pack.value("skipped", json::object()).value("count", 0) > 0 ? read_remote_text(part.dir, kSkippedName)
                                                                                : std::string();
        }
        return fs::exists(part.dir / kSkippedName) ? as_text(read_file(part.dir / kSkippedName)) : std::string();
      },
      skipped);
  write_file_atomically(out / kSkippedName, as_bytes(skip_list));
  const Manifest merged = joined_manifest(parts, stats, skipped);
  write_manifest_atomic(out, merged);
  return merged.total_records();
}

std::uint64_t commit_parts(const fs::path& out) {
  const Folder folder(out);
  if (folder.files().contains(kManifestName))
    throw_error(errc::invalid_argument, out.string() + ": already holds a committed dataset (manifest.json)");
  std::vector<Part> parts = read_part_manifests(folder);
  if (parts.empty())
    throw_error(errc::invalid_argument, out.string() + ": no part manifests (manifest.part-i-of-n.json) to commit: "
                                                       "convert into it with --part i/n --shared-out first");
  check_parts(parts, "part manifests are in the folder");
  ImageStatsBuilder stats;
  for (const Part& part : parts) {
    for (const ManifestShard& shard : part.manifest.shards) {
      auto it = folder.files().find(shard.file);
      if (it == folder.files().end())
        throw_error(errc::io_error, folder.path(shard.file).string() + ": missing (listed by " + part.dir.string() + ")");
      if (it->second != shard.bytes)
        throw_error(errc::corrupt_manifest, folder.path(shard.file).string() + ": " + std::to_string(it->second) +
                                                " bytes, " + part.dir.string() + " says " + std::to_string(shard.bytes));
    }
    stats.add_stats(part.manifest.image_stats);
  }
  std::uint64_t skipped = 0;
  const std::string skip_list = join_skip_lists(
      parts, [&](const Part& part) { return folder.read(part_skipped_name(part.index, part.count)); }, skipped);
  folder.write(kSkippedName, skip_list);  // before the manifest that names it (§8.4)
  const Manifest merged = joined_manifest(parts, stats, skipped);
  folder.write(kManifestName, serialize_manifest(merged));
  for (const Part& part : parts) {
    folder.remove(part_manifest_name(part.index, part.count));
    folder.remove(part_skipped_name(part.index, part.count));
    folder.remove(part_plan_name(part.index, part.count));
  }
  return merged.total_records();
}

}  // namespace l3
