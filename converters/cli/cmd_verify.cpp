// l3pack verify OUT [--source SRC]: every shard against the manifest, every
// record checksum (spec/format.md §4.3), every decode, and optionally every
// pixel against the source image named by the record's key.
#include <xxhash.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>

#include "common.hpp"
#include "l3/codec.hpp"
#include "l3/convert.hpp"
#include "l3/dataset.hpp"

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
      slot.reader.emplace(shard_file(dir, entry));  // a remote shard: its cached copy (spec/format.md §8.4)
      auto bytes = slot.reader->file_bytes();
      if (slot.reader->size() != entry.records) problem = "record count differs from the manifest";
      else if (slot.reader->file_size() != entry.bytes) problem = "file size differs from the manifest";
      else if (XXH3_64bits(bytes.data(), bytes.size()) != entry.file_hash) problem = "file hash differs from the manifest";
      else if (!manifest.classes.empty() && slot.reader->max_label() >= static_cast<std::int64_t>(manifest.classes.size()))
        problem = "a label has no class in the manifest";
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

// Empty when the record is sound; else why not.
std::string check_record(const ShardReader& reader, std::uint64_t i, const std::optional<std::filesystem::path>& root,
                         std::string& key) {
  try {
    RecordView record = reader.record(i, Verify::no);
    key = record.key;
    reader.verify(i);
    ImageInfo info;
    std::vector<std::uint8_t> pixels = decode(record.payload, &info);
    if (!root) return {};
    if (key.empty()) return "no key to find the source image by";
    const std::filesystem::path file = *root / key;
    Image source;
    try {
      source = load_image(file);
    } catch (const Error& e) {
      return "source " + file.string() + ": " + e.what();
    }
    if (source.width != info.width || source.height != info.height || source.channels != info.channels)
      return "dimensions or channels differ from " + file.string();
    if (source.pixels != pixels) return "pixels differ from " + file.string();
    return {};
  } catch (const Error& e) {
    return e.what();
  } catch (const std::bad_alloc&) {
    return "out of memory";
  }
}

void run_verify(const VerifyArguments& args) {
  const Manifest manifest = about_file(args.dir, [&] { return read_manifest(args.dir); });
  std::optional<std::filesystem::path> root;
  if (args.source) root = source_root(*args.source);
  std::uint64_t bad_shards = 0;
  std::vector<ShardSlot> shards = open_shards(args.dir, manifest, bad_shards);

  std::mutex mutex;
  std::vector<RecordFailure> failures;
  auto verify_shard_record = [&](const ShardSlot& slot, const ManifestShard& entry, std::uint64_t i) {
    std::string key;
    std::string reason = slot.reader ? check_record(*slot.reader, i, root, key) : "shard " + entry.file + " is unreadable";
    if (reason.empty()) return;
    std::lock_guard lock(mutex);
    failures.push_back({slot.first_record + i, key, reason});
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
  if (!failures.empty() || bad_shards != 0) {
    std::string reason = std::to_string(failures.size());
    reason += " records and ";
    reason += std::to_string(bad_shards);
    reason += " shards failed verification";
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
  command->footer("Exit status 0 only when everything passes.\nExample:\n  l3pack verify ds/ --source photos/");
  command->callback([args] { run_verify(*args); });
}

}  // namespace l3::cli
