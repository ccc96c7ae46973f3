// Shard files: records of opaque bytes with a checksummed footer index.
//
// Format: spec/format.md. A shard is written in one streaming pass by
// ShardWriter (to "<path>.tmp", renamed at finalize) and read with O(1)
// random access by ShardReader, which validates the whole index on open.
// All functions throw l3::Error (l3/common/error.hpp) on failure.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "l3/common/error.hpp"

namespace l3 {

// The label of a record that has none (spec/format.md §4.1).
inline constexpr std::int64_t kNoLabel = -1;

// Reader (and writer) limits, checked on open before anything is allocated
// (spec/format.md §7). The defaults accept every shard the default writer makes.
struct ShardLimits {
  std::uint64_t max_record_size = std::uint64_t{1} << 30;  // payload bytes, 1 GiB
  std::uint64_t max_records = std::uint64_t{1} << 24;      // records per shard, 16 Mi
  std::uint64_t max_index_size = std::uint64_t{1} << 30;   // decoded index bytes, 1 GiB
  std::uint32_t max_key_size = 4096;                       // key bytes
  std::uint32_t max_metadata_size = 65536;                 // metadata bytes
};

// How the footer index is stored (spec/format.md §5.3).
enum class IndexEncoding : std::uint16_t { raw = 0, zstd = 1 };

struct ShardWriterOptions {
  IndexEncoding index_encoding = IndexEncoding::raw;  // default raw: see the measurement in spec/format.md §5.3
  int zstd_level = 3;      // used when index_encoding == zstd
  ShardLimits limits{};    // append() refuses records a reader with these limits would reject
};

// One record. The spans point into the reader's memory and stay valid while
// the reader (or Dataset) that returned them is alive.
struct RecordView {
  std::span<const std::uint8_t> payload;
  std::int64_t label = kNoLabel;
  std::string_view key;                    // UTF-8, may be empty
  std::span<const std::uint8_t> metadata;  // may be empty
};

// What finalize() wrote: the values a dataset manifest records for the shard.
struct ShardSummary {
  std::filesystem::path path;
  std::uint64_t records = 0;
  std::uint64_t bytes = 0;      // file size
  std::uint64_t file_hash = 0;  // XXH3-64 of the whole file (spec/format.md §8)
};

class ShardWriter {
public:
  // Creates "<path>.tmp" (truncating a stale one) and writes the header.
  explicit ShardWriter(std::filesystem::path path, ShardWriterOptions options = {});
  // Without finalize(), removes the temporary file: no partial shard survives.
  ~ShardWriter();
  ShardWriter(ShardWriter&&) noexcept;
  ShardWriter& operator=(ShardWriter&&) = delete;
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // Appends one record; returns its index in the shard. key must be UTF-8;
  // label must be kNoLabel or >= 0.
  std::uint64_t append(std::span<const std::uint8_t> payload, std::int64_t label = kNoLabel,
                       std::string_view key = {}, std::span<const std::uint8_t> metadata = {});
  // Writes index and trailer, fsyncs, renames "<path>.tmp" to path, fsyncs the
  // directory. The writer accepts no further calls.
  ShardSummary finalize();

  std::uint64_t records() const noexcept;
  std::uint64_t bytes_written() const noexcept;  // header + records so far (+ index, trailer once finalized)
  const std::filesystem::path& path() const noexcept;

private:
  struct State;
  std::unique_ptr<State> s_;
};

enum class Verify : bool { no = false, yes = true };

// Where a shard's record bytes come from when the file is not mapped whole: a
// remote shard fetched by blocks (spec/format.md §8.5.1).
class ShardBody {
public:
  virtual ~ShardBody() = default;
  // Bytes [offset, offset + size) of the shard file, valid while this body is
  // alive; throws l3::Error (io_error, checksum_mismatch) when they cannot be had.
  virtual std::span<const std::uint8_t> bytes(std::uint64_t offset, std::uint64_t size) const = 0;
};

// What the index says of a record (spec/format.md §5.2), read without touching
// its payload: what a copy of the payload from elsewhere is checked against
// (a remote shard answers it from the index, with no block fetched).
struct RecordEntry {
  std::uint64_t size = 0;
  std::uint64_t checksum = 0;  // XXH3-64 of the payload (§4.3)
  std::int64_t label = kNoLabel;
  std::string_view key;
  std::span<const std::uint8_t> metadata;
};

// Where record i's payload lies in the shard file, and its XXH3-64.
struct RecordExtent {
  std::uint64_t offset = 0, size = 0, xxh3 = 0;
};

class ShardReader {
public:
  // Maps the file and validates header, trailer and index (spec/format.md §6).
  explicit ShardReader(const std::filesystem::path& path, const ShardLimits& limits = {});
  // The same, over bytes held in memory (tests, fuzzing, network buffers).
  explicit ShardReader(std::vector<std::uint8_t> bytes, const ShardLimits& limits = {});
  // A shard of file_size bytes of which only `tail` (its last tail.size()
  // bytes: at least the index and trailer) is at hand; record payloads come
  // from `body`. Validates trailer and index as above; the header is the
  // body's to check (it arrives with the first block).
  ShardReader(std::uint64_t file_size, std::vector<std::uint8_t> tail, std::shared_ptr<const ShardBody> body,
              const ShardLimits& limits = {});
  ~ShardReader();
  ShardReader(ShardReader&&) noexcept;
  ShardReader& operator=(ShardReader&&) noexcept;

  std::uint64_t size() const noexcept;  // record count
  // O(1). With Verify::yes the payload checksum is checked (checksum_mismatch).
  // Safe to call concurrently from several threads.
  RecordView record(std::uint64_t i, Verify verify = Verify::yes) const;
  RecordEntry entry(std::uint64_t i) const;  // O(1); out_of_range; reads no payload
  void verify(std::uint64_t i) const;  // throws checksum_mismatch
  void verify_all() const;

  std::uint64_t file_size() const noexcept;
  IndexEncoding index_encoding() const noexcept;
  std::int64_t max_label() const noexcept;  // kNoLabel when no record has a label
  std::span<const std::uint8_t> file_bytes() const noexcept;  // the whole shard; empty when read through a body
  RecordExtent extent(std::uint64_t i) const;  // out_of_range
  const ShardBody* body() const noexcept;      // null for a mapped or in-memory shard

private:
  struct State;
  static void validate(State& s, const ShardLimits& limits);
  static void validate_index(State& s, std::span<const std::uint8_t> tail, const ShardLimits& limits);
  std::unique_ptr<State> s_;
};

}  // namespace l3
