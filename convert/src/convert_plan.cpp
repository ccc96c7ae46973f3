// The plan of a conversion and the names of its files (convert_parts.hpp).
#include <xxhash.h>

#include <cstdio>
#include <map>

#include "convert_parts.hpp"
#include "l3/common/text.hpp"

namespace l3::convert_detail {

std::uint64_t xxh3(std::span<const std::uint8_t> bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }


namespace {

const char* layout_name(SourceLayout layout) {
  switch (layout) {
    case SourceLayout::automatic: return "auto";
    case SourceLayout::classes: return "classes";
    case SourceLayout::flat: return "flat";
  }
  return "?";
}

const char* kind_name(SourceKind kind) {
  switch (kind) {
    case SourceKind::class_folders: return "class_folders";
    case SourceKind::list_file: return "list_file";
    case SourceKind::flat_folder: return "flat_folder";
  }
  return "?";
}


json options_json(const ConvertOptions& o) {
  return {{"tile_width", o.encode.tile_width},
          {"tile_height", o.encode.tile_height},
          {"effort", o.encode.effort},
          {"entropy", entropy_mode(o.encode)},
          {"shard_size", o.shard_size},
          {"shuffle_seed", o.shuffle_seed ? json(*o.shuffle_seed) : json()},
          {"part_index", o.part_index},
          {"part_count", o.part_count},
          {"layout", layout_name(o.scan.layout)},
          {"base", o.scan.list_base.empty() ? json() : json(escape_key(fs::absolute(o.scan.list_base).string()))},
          {"max_pixels", o.max_pixels},
          {"convert_16bit", o.convert_16bit},
          {"strict_jpeg", o.strict_jpeg}};
}

// --strict: an input the scan cannot convert stops the run before any work.
void refuse_scan_skips(const fs::path& src, const std::vector<SkippedInput>& skipped) {
  if (skipped.empty()) return;
  const SkippedInput& first = skipped.front();
  std::string reason = first.reason;
  if (!first.detail.empty()) reason += " (" + first.detail + ")";
  reason += "; " + std::to_string(skipped.size()) + " inputs under " + src.string() + " would be skipped";
  throw InputError(errc::invalid_argument, src / unescape_key(first.key), reason);
}

std::string count_by_reason(const std::vector<SkippedInput>& skipped) {
  std::map<std::string, std::uint64_t> counts;
  for (const SkippedInput& s : skipped) ++counts[s.reason];
  std::string text;
  for (const auto& [reason, n] : counts) text += (text.empty() ? "" : ", ") + std::to_string(n) + " " + reason;
  return text;
}

[[noreturn]] void no_images(const fs::path& src, const std::vector<SkippedInput>& skipped, std::uint64_t hidden) {
  std::string detail = src.string() + ": no images to convert";
  if (!skipped.empty()) detail += " (" + std::to_string(skipped.size()) + " skipped: " + count_by_reason(skipped) + ")";
  if (hidden != 0) detail += " (" + std::to_string(hidden) + " hidden entries excluded)";
  detail += "; --allow-empty writes an empty dataset";
  throw_error(errc::io_error, detail);
}

}  // namespace

json skipped_json(const SkippedInput& s) { return {{"path", s.key}, {"reason", s.reason}, {"detail", s.detail}}; }

std::uint64_t order_fingerprint(const std::vector<SourceImage>& order) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  for (const SourceImage& image : order) {
    std::string line = image.key;
    line += '\t';
    line += std::to_string(image.label);
    line += '\n';
    XXH3_64bits_update(state, line.data(), line.size());
  }
  std::uint64_t hash = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return hash;
}

Plan make_plan(const fs::path& src, const ConvertOptions& options) {
  SourceSet source = scan_source(src, options.scan);
  if (options.strict) refuse_scan_skips(src, source.skipped);
  std::vector<SourceImage> order;
  if (options.shuffle_seed) {
    for (std::size_t i : seeded_permutation(source.images.size(), *options.shuffle_seed))
      order.push_back(source.images[i]);
  } else {
    order = std::move(source.images);
  }
  const std::size_t n = order.size(), parts = options.part_count;
  const std::size_t begin = n * options.part_index / parts, end = n * (options.part_index + 1) / parts;
  Plan plan;
  plan.classes = source.classes;
  plan.items.assign(order.begin() + static_cast<std::ptrdiff_t>(begin), order.begin() + static_cast<std::ptrdiff_t>(end));
  if (options.part_index == 0) {
    plan.scan_skipped = std::move(source.skipped);
    plan.hidden = source.hidden;
  }
  if (plan.items.empty() && !options.allow_empty) no_images(src, plan.scan_skipped, plan.hidden);
  // Keys, not file names: a name that is not UTF-8 cannot be JSON (its key is escaped).
  json items = json::array();
  for (const SourceImage& image : plan.items) items.push_back({image.key, image.label});
  json skipped = json::array();
  for (const SkippedInput& s : plan.scan_skipped) skipped.push_back(skipped_json(s));
  plan.document = {{"format", "l3pack-plan"},
                   {"version", 2},
                   {"source", escape_key(fs::absolute(src).lexically_normal().string())},
                   {"scan_skipped", skipped},
                   {"hidden", plan.hidden},
                   {"source_kind", kind_name(source.kind)},
                   {"classes", plan.classes},
                   {"options", options_json(options)},
                   {"order_fingerprint", hex16(order_fingerprint(order))},
                   {"order_records", n},
                   {"part_first_record", begin},
                   {"items", items}};
  return plan;
}

std::string shard_name(const ConvertOptions& o, std::uint64_t k) {
  char number[32];
  std::snprintf(number, sizeof number, "%05llu.l3s", static_cast<unsigned long long>(k));
  return (o.part_count > 1 ? part_tag(o.part_index, o.part_count) : std::string("shard")) + "-" + number;
}

OutputNames output_names(const ConvertOptions& o) {
  if (!o.shared_output) return {kPlanName, kLockName, kSkippedName, kManifestName};
  const std::string tag = part_tag(o.part_index, o.part_count);
  return {part_plan_name(o.part_index, o.part_count), ".l3pack." + tag + ".lock",
          part_skipped_name(o.part_index, o.part_count), part_manifest_name(o.part_index, o.part_count)};
}

bool written_by_run(const std::string& name, const ConvertOptions& o) {
  if (o.shared_output)
    return name.starts_with(part_tag(o.part_index, o.part_count) + "-") ||
           name.starts_with(output_names(o).skipped);
  return name.ends_with(".l3s") || name.ends_with(".l3s.tmp") || name.starts_with(kSkippedName);
}

}  // namespace l3::convert_detail
