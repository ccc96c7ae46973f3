// l3pack verify OUT [--source SRC]: every shard against the manifest, every
// record checksum (spec/format.md §4.3), every decode, and optionally every
// pixel against the source image named by the record's key.

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <set>
#include <sstream>
#include <mutex>
#include <optional>

#include "common.hpp"
#include "l3/codec/codec.hpp"
#include "l3/convert/convert.hpp"
#include "l3/format/dataset.hpp"

namespace l3::cli {
namespace {

struct VerifyArguments {
  std::filesystem::path dir;
  std::optional<std::filesystem::path> source;
  unsigned threads = 0;
};

struct ShardSlot {
  std::optional<ShardReader> reader;  // empty when the shard cannot be opened
  std::uint64_t first_record = 0;
};

// Opens every shard and checks it against its manifest entry. Problems with a
// whole shard are printed at once; records of an unreadable shard count as failed.
std::vector<ShardSlot> open_shards(const std::filesystem::path& dir, const Manifest& manifest, std::uint64_t& bad_shards) {
  std::vector<ShardSlot> slots;
  std::uint64_t first = 0;
  for (const ManifestShard& entry : manifest.shards) {
    ShardSlot slot;
    slot.first_record = first;
    first += entry.records;
    const std::filesystem::path file = dir / entry.file;
    std::string problem;
    try {
      slot.reader.emplace(shard_file(dir, entry));  // a remote shard: its cached copy (spec/format.md §8.5)
      problem = compare_with_manifest(*slot.reader, entry, manifest.classes.size(), /*check_hash=*/true).problem;
    } catch (const Error& e) {
      problem = e.what();
      slot.reader.reset();
    }
    if (!problem.empty()) {
      ++bad_shards;
      std::fprintf(stderr, "shard %s: %s\n", file.c_str(), problem.c_str());
    }
    slots.push_back(std::move(slot));
  }
  return slots;
}

// How convert read the sources (manifest extra.l3pack, spec/format.md §8.4):
// the same layout, key escaping and decode options make the same images.
struct SourceRules {
  ScanOptions scan;
  LoadOptions load;
  bool escaped_keys = false;  // keys are escape_key() of the relative path
  bool one_part = false;      // one part of a --part run, not merged: it holds only some sources
};

SourceRules source_rules(const Manifest& manifest) {
  SourceRules rules;
  const nlohmann::json l3pack = manifest.extra.value("l3pack", nlohmann::json::object());
  const nlohmann::json options = l3pack.value("options", nlohmann::json::object());
  const std::string layout = options.value("layout", "auto");
  rules.scan.layout = layout == "classes" ? SourceLayout::classes
                      : layout == "flat"  ? SourceLayout::flat
                                          : SourceLayout::automatic;
  if (options.contains("base") && options["base"].is_string())
    rules.scan.list_base = unescape_key(options["base"].get<std::string>());
  rules.load.limits.max_pixels = options.value("max_pixels", rules.load.limits.max_pixels);
  rules.load.convert_16bit = options.value("convert_16bit", false);
  rules.load.strict_jpeg = options.value("strict_jpeg", false);
  rules.escaped_keys = l3pack.value("key_escape", "") == "percent";
  rules.one_part = options.value("part_count", 1) > 1 && !l3pack.contains("merged_parts");
  return rules;
}

// Empty when the record is sound; else why not.
std::string check_record(const ShardReader& reader, std::uint64_t i, const std::optional<std::filesystem::path>& root,
                         const SourceRules& rules, std::string& key) {
  try {
    RecordView record = reader.record(i, Verify::no);
    key = record.key;
    reader.verify(i);
    ImageInfo info;
    std::vector<std::uint8_t> pixels = decode(record.payload, &info);
    if (!root) return {};
    if (key.empty()) return "no key to find the source image by";
    const std::filesystem::path file = *root / (rules.escaped_keys ? unescape_key(key) : key);
    Image source;
    try {
      source = load_image(file, rules.load);
    } catch (const Error& e) {
      return "source file: " + std::string(e.what());  // the line names the key already
    }
    if (source.width != info.width || source.height != info.height || source.channels != info.channels)
      return "dimensions or channels differ from the source file";
    if (source.pixels != pixels) return "pixels differ from the source file";
    return {};
  } catch (const Error& e) {
    return e.what();
  } catch (const std::bad_alloc&) {
    return "out of memory";
  }
}

// Keys listed in OUT/skipped.jsonl (empty when the dataset has none). A remote
// dataset's list is fetched when its manifest records skips (spec/format.md §8.5.5).
std::set<std::string> skipped_keys(const std::filesystem::path& dir, const Manifest& manifest) {
  std::string text;
  if (is_remote(dir)) {
    const nlohmann::json l3pack = manifest.extra.value("l3pack", nlohmann::json::object());
    if (l3pack.value("skipped", nlohmann::json::object()).value("count", 0) > 0) text = read_remote_text(dir, kSkippedName);
  } else {
    std::ifstream in(dir / kSkippedName);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::set<std::string> keys;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("path") && j["path"].is_string()) keys.insert(j["path"].get<std::string>());
  }
  return keys;
}

// Every input under SRC must be a record or recorded as skipped at convert
// time; returns how many are neither (each printed), and counts the skipped.
std::uint64_t check_coverage(const std::filesystem::path& dir, const Manifest& manifest, const std::filesystem::path& src,
                             const SourceRules& rules,
                             const std::set<std::string>& keys, std::uint64_t& recorded_skips) {
  const SourceSet source = about_file(src, [&] { return scan_source(src, rules.scan); });
  const std::set<std::string> skipped = skipped_keys(dir, manifest);
  std::vector<std::string> missing;
  auto account = [&](const std::string& key) {
    if (keys.contains(key)) return;
    if (skipped.contains(key)) ++recorded_skips;
    else missing.push_back(key);
  };
  for (const SourceImage& image : source.images) account(image.key);
  for (const SkippedInput& s : source.skipped) account(s.key);
  const std::size_t shown = std::min<std::size_t>(10, missing.size());
  if (shown < missing.size()) std::fprintf(stderr, "first %zu of %zu sources not in the dataset:\n", shown, missing.size());
  for (std::size_t i = 0; i < shown; ++i)
    std::fprintf(stderr, "  source %s: not in the dataset, and not recorded as skipped by convert\n", missing[i].c_str());
  return missing.size();
}

void run_verify(const VerifyArguments& args) {
  const Manifest manifest = about_file(args.dir, [&] { return read_manifest(args.dir); });
  const SourceRules rules = source_rules(manifest);
  std::optional<std::filesystem::path> root;
  if (args.source) root = source_root(*args.source, rules.scan);
  std::uint64_t bad_shards = 0;
  std::vector<ShardSlot> shards = open_shards(args.dir, manifest, bad_shards);

  std::mutex mutex;
  std::vector<RecordFailure> failures;
  std::set<std::string> keys;
  auto verify_shard_record = [&](const ShardSlot& slot, const ManifestShard& entry, std::uint64_t i) {
    std::string key;
    std::string reason =
        slot.reader ? check_record(*slot.reader, i, root, rules, key) : "shard " + entry.file + " is unreadable";
    std::lock_guard lock(mutex);
    if (!key.empty()) keys.insert(key);
    if (!reason.empty()) failures.push_back({slot.first_record + i, key, reason});
  };
  // One flat index over all records, so the threads share the work evenly.
  std::vector<std::pair<std::size_t, std::uint64_t>> work;
  for (std::size_t k = 0; k < shards.size(); ++k) {
    std::uint64_t n = shards[k].reader ? shards[k].reader->size() : manifest.shards[k].records;
    for (std::uint64_t i = 0; i < n; ++i) work.emplace_back(k, i);
  }
  parallel_for(work.size(), args.threads, [&](std::uint64_t w) {
    verify_shard_record(shards[work[w].first], manifest.shards[work[w].first], work[w].second);
  });

  const std::uint64_t records = work.size();
  std::printf("records: %llu checked (%s), %llu passed, %zu failed\n", static_cast<unsigned long long>(records),
              root ? "checksum, decode, pixels vs source" : "checksum, decode",
              static_cast<unsigned long long>(records - failures.size()), failures.size());
  std::printf("shards:  %zu checked against the manifest, %llu failed\n", shards.size(),
              static_cast<unsigned long long>(bad_shards));
  print_failures(failures);
  std::uint64_t missing = 0, recorded_skips = 0;
  if (args.source && rules.one_part) {
    std::printf("sources: not checked for missing ones (one part of a --part run; merge the parts first)\n");
  } else if (args.source) {
    missing = check_coverage(args.dir, manifest, *args.source, rules, keys, recorded_skips);
    std::printf("sources: %llu not in the dataset: %llu recorded as skipped at convert time, %llu not accounted for\n",
                static_cast<unsigned long long>(missing + recorded_skips),
                static_cast<unsigned long long>(recorded_skips), static_cast<unsigned long long>(missing));
  }
  if (!failures.empty() || bad_shards != 0 || missing != 0) {
    std::string reason = "verification failed:";
    if (!failures.empty()) reason += " " + std::to_string(failures.size()) + " records";
    if (bad_shards != 0) reason += " " + std::to_string(bad_shards) + " shards";
    if (missing != 0) reason += " " + std::to_string(missing) + " sources not in the dataset";
    throw Failure{args.dir.string(), reason, exit_failure};
  }
}

}  // namespace

void add_verify_command(CLI::App& app) {
  auto args = std::make_shared<VerifyArguments>();
  CLI::App* command = app.add_subcommand(
      "verify", "Check every shard hash, record checksum and decode; with --source, pixels against the originals");
  command->add_option("OUT", args->dir, "Dataset folder (holding manifest.json)")->required();
  command->add_option("--source", args->source, "The folder or list file the dataset was converted from");
  command->add_option("--threads", args->threads, "Worker threads (0: all cores)");
  command->footer(
      "With --source, every file under SRC must also be a record or listed in OUT/skipped.jsonl (skipped at\n"
      "convert time); sources added since, or lost, fail the check.\n"
      "Exit status 0 only when everything passes.\nExample:\n  l3pack verify ds/ --source photos/");
  command->callback([args] { run_verify(*args); });
}

}  // namespace l3::cli
