// A dataset: a directory of shards plus manifest.json, the commit marker
// written last and atomically (spec/format.md §8). All functions throw
// l3::Error (l3/common/error.hpp) on failure.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "l3/format/shard.hpp"

namespace l3 {

inline constexpr const char* kManifestName = "manifest.json";

struct ManifestShard {
  std::string file;            // plain file name inside the dataset directory
  std::uint64_t records = 0;
  std::uint64_t bytes = 0;     // file size
  std::uint64_t file_hash = 0; // XXH3-64 of the whole file; "xxh3" in JSON, 16 hex digits
};

struct Manifest {
  std::vector<ManifestShard> shards;
  std::vector<std::string> classes;                       // class name of label i
  nlohmann::json image_stats = nlohmann::json::object();  // filled by the caller, stored as is
  nlohmann::json extra = nlohmann::json::object();        // free-form

  std::uint64_t total_records() const noexcept;
};

// ManifestShard for a finalized shard; file is summary.path's file name.
ManifestShard manifest_entry(const ShardSummary& summary);

// Parses and validates dir/manifest.json (corrupt_manifest, unsupported_version;
// io_error when it is missing: the dataset was never committed).
Manifest read_manifest(const std::filesystem::path& dir);
Manifest parse_manifest(const std::string& json_text);
std::string serialize_manifest(const Manifest& manifest);  // deterministic
// Validates, writes dir/manifest.json.tmp, fsyncs, renames, fsyncs dir.
void write_manifest_atomic(const std::filesystem::path& dir, const Manifest& manifest);

// Remote datasets (spec/format.md §8.5): `dir` may be s3://bucket/prefix
// wherever a dataset folder is taken (read_manifest, Dataset::open).
bool is_remote(const std::filesystem::path& dir);
// The local file holding shard m of the dataset at dir: dir/m.file, or for a
// remote dataset its copy in the shard cache (l3/storage/storage.hpp), downloaded on
// first use and checked against m.file_hash (checksum_mismatch).
std::filesystem::path shard_file(const std::filesystem::path& dir, const ManifestShard& m);
// A whole file of a remote dataset (manifest.json, skipped.jsonl), as text
// (io_error naming the bucket).
std::string read_remote_text(const std::filesystem::path& dir, const std::string& name);

// How an opened shard differs from its manifest entry (spec/format.md §8.3):
// its record count, file size and labels (each below class_count when the
// manifest names classes, class_count > 0), then, when check_hash, its
// XXH3-64 (which reads the whole file). code is ok when it matches, else
// corrupt_manifest (counts, size, labels) or checksum_mismatch (hash), with
// a phrase to follow the shard's name ("holds 3 records, the manifest says 4").
// The one check Dataset::open, l3pack verify and merge share.
struct ShardCheck {
  errc code = errc::ok;
  std::string problem;
};
ShardCheck compare_with_manifest(const ShardReader& reader, const ManifestShard& m, std::size_t class_count,
                                 bool check_hash);

struct DatasetOptions {
  ShardLimits limits{};
  bool verify_shard_hashes = false;  // hash each whole shard when first opened (reads it all)
};

struct RecordLocation {
  std::size_t shard = 0;
  std::uint64_t index = 0;  // within the shard
};

// Opens shards lazily, on first access; safe to use from several threads.
class Dataset {
public:
  static Dataset open(const std::filesystem::path& dir, DatasetOptions options = {});
  ~Dataset();
  Dataset(Dataset&&) noexcept;
  Dataset& operator=(Dataset&&) noexcept;

  std::uint64_t size() const noexcept;  // total records
  std::size_t shard_count() const noexcept;
  const Manifest& manifest() const noexcept;
  const std::vector<std::string>& class_names() const noexcept;
  const std::filesystem::path& directory() const noexcept;

  RecordLocation locate(std::uint64_t i) const;  // O(log shards); out_of_range
  RecordView record(std::uint64_t i, Verify verify = Verify::yes) const;
  RecordEntry entry(std::uint64_t i) const;  // the index entry alone: no payload read (or fetched)
  // Where record i lives, for error messages: "shard <dir>/<file>, index <k>,
  // key '<key>'" (the key escaped by escape_control; left out when the shard's
  // index cannot be read). Never throws l3::Error.
  std::string describe(std::uint64_t i) const;

  // A remote dataset fetches, in the background, what these records need in
  // the order they will be read (the epoch's known order): each shard's tail,
  // then the blocks of records, many in flight (spec/format.md §8.5.1). At
  // most one prefetch runs; a new call replaces (cancels) the previous one.
  // No-op for a local dataset.
  // blocks = false: the tails alone (a peer cache reads the records one by
  // one: §8.6.3; fetching their blocks would download every record on every node).
  void prefetch_records(std::vector<std::uint64_t> records, bool blocks = true) const;
  // Record i when this machine holds its bytes without a request: a remote
  // dataset's record whose block was fetched or is in the shard cache
  // (checked as `verify` says). Never fetches; nullopt otherwise, and always
  // for a local dataset, whose folder is the storage (spec/format.md §8.6).
  std::optional<RecordView> cached_record(std::uint64_t i, Verify verify) const;
  // Record i from storage, filling no cache: a local dataset's record (as
  // record()); a remote record's payload alone by one ranged GET into `owned`
  // (the view points into it), checked against its index XXH3 whatever
  // `verify` says (checksum_mismatch).
  RecordView record_uncached(std::uint64_t i, Verify verify, std::vector<std::uint8_t>& owned) const;
  // Opens (once) and returns shard k; checks it against the manifest
  // (corrupt_manifest on record count, size or label mismatch, checksum_mismatch on hash).
  const ShardReader& shard(std::size_t k) const;

private:
  struct State;
  explicit Dataset(std::unique_ptr<State> s);
  static const ShardReader& open_slot(State& s, std::size_t k);
  static void prefetch_loop(State& s);
  static void prefetch_run(State& s, const std::vector<std::uint64_t>& records, const std::vector<std::size_t>& tails,
                           const std::function<bool()>& cancelled);
  std::unique_ptr<State> s_;
};

}  // namespace l3
