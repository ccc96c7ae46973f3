// The parts of `l3pack convert` (convert.cpp) that plan a run and prepare its
// OUT: the plan (what this run converts, in which order, into which shards),
// the names of the run's files, the lock (one conversion per OUT) and the
// resume of an interrupted run. Internal to l3_convert.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "l3/convert/convert.hpp"
#include "l3/format/dataset.hpp"

namespace l3::convert_detail {

namespace fs = std::filesystem;
using nlohmann::json;

std::uint64_t xxh3(std::span<const std::uint8_t> bytes);

// ---- the plan (convert_plan.cpp) ----

struct Plan {
  std::vector<SourceImage> items;  // this part, in record order
  std::vector<std::string> classes;
  std::vector<SkippedInput> scan_skipped;  // found by the scan (part 0 only: they belong to no part)
  std::uint64_t hidden = 0;
  json document;                   // stored as OUT/l3pack-plan.json; equal plans give equal outputs
};

Plan make_plan(const fs::path& src, const ConvertOptions& options);
// XXH3 of the whole planned order (all parts): parts of one dataset share it.
std::uint64_t order_fingerprint(const std::vector<SourceImage>& order);
json skipped_json(const SkippedInput& s);
std::string shard_name(const ConvertOptions& o, std::uint64_t k);

// The files of one run in OUT besides its shards. A part converting into an OUT
// shared by all parts names each after itself (spec/format.md §8.4.1).
struct OutputNames {
  std::string plan, lock, skipped, manifest;
};
OutputNames output_names(const ConvertOptions& o);
// A file this run wrote (or left after a crash) in OUT: its shards and their
// temporaries, its skip list and skip log. In a shared OUT, only this part's.
bool written_by_run(const std::string& name, const ConvertOptions& o);

// ---- OUT: the lock, resume (convert_output.cpp) ----

// OUT/.l3pack.lock, created with O_EXCL and holding the owner's pid. A lock
// whose owner is gone (SIGKILL, power loss on this host) is stale and taken over,
// so --resume after a crash needs no manual clean-up.
class OutputLock {
public:
  OutputLock(const fs::path& out, const std::string& name);
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

private:
  pid_t read_owner() const;
  fs::path path_;
};

// What an interrupted run left that this one keeps.
struct Progress {
  std::size_t next_item = 0;  // first plan item not in a kept shard
  std::vector<SkippedInput> skipped;  // plan items before next_item that are not records
  std::vector<ManifestShard> shards;
  ImageStatsBuilder stats;
  std::uint64_t records = 0, bytes_in = 0, bytes_out = 0;
};

std::uint64_t file_size_or_zero(const fs::path& file);
void write_text(const fs::path& file, const std::string& text);
// Makes OUT ready for this run: fresh, or resumed (--resume) from what it holds.
Progress prepare_output(const fs::path& out, const Plan& plan, const ConvertOptions& options);

}  // namespace l3::convert_detail
