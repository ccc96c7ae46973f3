// l3pack ls OUT: one line per record; and `l3pack info DIR`, the dataset summary.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>

#include "common.hpp"
#include "l3/codec/codec.hpp"
#include "l3/format/dataset.hpp"
#include "l3/common/text.hpp"

namespace l3::cli {
namespace {

struct LsArguments {
  std::filesystem::path dir;
  std::uint64_t limit = 0;  // 0: all
  bool json = false;        // JSON Lines: one object per record
};

std::string label_text(std::int64_t label, const std::vector<std::string>& classes) {
  if (label == kNoLabel) return "-";
  std::string text = std::to_string(label);
  if (label >= 0 && static_cast<std::uint64_t>(label) < classes.size()) {
    text += ":";
    text += classes[static_cast<std::size_t>(label)];
  }
  return text;
}

// The .l3i header, or nullopt when it is invalid (ls lists; verify checks).
std::optional<ImageInfo> header_of(std::span<const std::uint8_t> payload) {
  try {
    return read_info(payload);
  } catch (const Error&) {
    return std::nullopt;
  }
}

// "WxHxC", "?" when the header is invalid.
std::string shape_text(const std::optional<ImageInfo>& info) {
  if (!info) return "?";
  char text[48];
  std::snprintf(text, sizeof text, "%ux%ux%u", info->width, info->height, info->channels);
  return text;
}

// One record as a JSON object (ls --json): label -1 and class null when unlabeled;
// width, height and channels null when the header is invalid.
nlohmann::ordered_json record_json(const Dataset& dataset, std::uint64_t i) {
  const RecordLocation where = dataset.locate(i);
  const RecordView record = dataset.record(i, Verify::no);
  const std::optional<ImageInfo> info = header_of(record.payload);
  const auto& classes = dataset.class_names();
  const bool named = record.label >= 0 && static_cast<std::uint64_t>(record.label) < classes.size();
  nlohmann::ordered_json j = {{"index", i},
                              {"shard", dataset.manifest().shards[where.shard].file},
                              {"label", record.label},
                              {"class", named ? nlohmann::ordered_json(classes[static_cast<std::size_t>(record.label)])
                                              : nlohmann::ordered_json(nullptr)},
                              {"bytes", record.payload.size()}};
  j["width"] = info ? nlohmann::ordered_json(info->width) : nlohmann::ordered_json(nullptr);
  j["height"] = info ? nlohmann::ordered_json(info->height) : nlohmann::ordered_json(nullptr);
  j["channels"] = info ? nlohmann::ordered_json(info->channels) : nlohmann::ordered_json(nullptr);
  j["key"] = std::string(record.key);
  return j;
}

// One line per record; the key (any UTF-8, newlines too) escaped by escape_control.
void print_record_line(const Dataset& dataset, std::uint64_t i) {
  const RecordLocation where = dataset.locate(i);
  const RecordView record = dataset.record(i, Verify::no);
  std::printf("%-8llu %-22s %-16s %10zu %-16s %s\n", static_cast<unsigned long long>(i),
              escape_control(dataset.manifest().shards[where.shard].file).c_str(),
              escape_control(label_text(record.label, dataset.class_names())).c_str(), record.payload.size(),
              shape_text(header_of(record.payload)).c_str(), escape_control(record.key).c_str());
}

void run_ls(const LsArguments& args) {
  about_file(args.dir, [&] {
    Dataset dataset = Dataset::open(args.dir);
    const std::uint64_t n = args.limit == 0 ? dataset.size() : std::min(args.limit, dataset.size());
    if (!args.json)
      std::printf("%-8s %-22s %-16s %10s %-16s %s\n", "index", "shard", "label", "bytes", "WxHxC", "key");
    for (std::uint64_t i = 0; i < n; ++i) {
      if (args.json) std::printf("%s\n", record_json(dataset, i).dump().c_str());
      else print_record_line(dataset, i);
    }
  });
}

nlohmann::ordered_json class_counts(const Dataset& dataset, std::uint64_t& unlabeled) {
  std::vector<std::uint64_t> counts(dataset.class_names().size());
  for (std::uint64_t i = 0; i < dataset.size(); ++i) {
    const std::int64_t label = dataset.entry(i).label;  // the index alone: a remote shard's tail
    if (label >= 0 && static_cast<std::uint64_t>(label) < counts.size()) ++counts[static_cast<std::size_t>(label)];
    else ++unlabeled;
  }
  nlohmann::ordered_json classes = nlohmann::ordered_json::array();
  for (std::size_t k = 0; k < counts.size(); ++k)
    classes.push_back({{"label", k}, {"name", dataset.class_names()[k]}, {"records", counts[k]}});
  return classes;
}

nlohmann::ordered_json dataset_summary(const std::filesystem::path& dir) {
  Dataset dataset = Dataset::open(dir);
  const Manifest& manifest = dataset.manifest();
  std::uint64_t bytes = 0;
  for (const ManifestShard& shard : manifest.shards) bytes += shard.bytes;
  std::uint64_t unlabeled = 0;
  nlohmann::ordered_json classes = class_counts(dataset, unlabeled);
  const double pixels = manifest.image_stats.value("total_pixels", 0.0);
  return {{"dataset", dir.string()},
          {"records", dataset.size()},
          {"shards", dataset.shard_count()},
          {"bytes", bytes},
          {"bits_per_pixel", pixels > 0 ? static_cast<double>(bytes) * 8.0 / pixels : 0.0},
          {"classes", classes},
          {"unlabeled_records", unlabeled},
          {"image_stats", manifest.image_stats}};
}

void print_dataset_summary(const nlohmann::ordered_json& s) {
  std::printf("dataset:        %s\n", s["dataset"].get<std::string>().c_str());
  std::printf("records:        %llu\n", s["records"].get<unsigned long long>());
  std::printf("shards:         %llu\n", s["shards"].get<unsigned long long>());
  std::printf("bytes:          %llu\n", s["bytes"].get<unsigned long long>());
  std::printf("bits per pixel: %.3f\n", s["bits_per_pixel"].get<double>());
  std::printf("classes:        %zu\n", s["classes"].size());
  for (const auto& c : s["classes"])
    std::printf("  %4llu %-24s %llu records\n", c["label"].get<unsigned long long>(),
                c["name"].get<std::string>().c_str(), c["records"].get<unsigned long long>());
  std::printf("unlabeled:      %llu records\n", s["unlabeled_records"].get<unsigned long long>());
  std::printf("image stats:    %s\n", s["image_stats"].dump().c_str());
}

}  // namespace

void run_dataset_info(const std::filesystem::path& dir, bool json) {
  nlohmann::ordered_json summary = about_file(dir, [&] { return dataset_summary(dir); });
  if (json) std::printf("%s\n", summary.dump(2).c_str());
  else print_dataset_summary(summary);
}

void add_ls_command(CLI::App& app) {
  auto args = std::make_shared<LsArguments>();
  CLI::App* command = app.add_subcommand("ls", "List a dataset's records: index, shard, label, bytes, size, key");
  command->add_option("OUT", args->dir, "Dataset folder (holding manifest.json)")->required();
  command->add_option("--limit", args->limit, "Show only the first N records");
  command->add_flag("--json", args->json, "JSON Lines: one object per record (index, shard, label, class, ...)");
  command->footer(
      "One record per line. Keys are printed with control characters escaped (\\n, \\t, \\r,\n"
      "\\xNN; a backslash as \\\\); --json prints each key exactly, as a JSON string.\n"
      "Examples:\n"
      "  l3pack ls ds/ --limit 20\n"
      "  l3pack ls ds/ --json | jq -r 'select(.class == \"cat\") | .key'");
  command->callback([args] { run_ls(*args); });
}

}  // namespace l3::cli
