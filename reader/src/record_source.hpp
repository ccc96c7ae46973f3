// The reader's read stage (internal): one record fetched from the RAM cache
// or the dataset (checksum verified unless Verify::no), with the counters
// every stage adds its time and bytes to.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "l3/format/dataset.hpp"
#include "l3/reader/peer_cache.hpp"

namespace l3::detail {

using Clock = std::chrono::steady_clock;

inline std::uint64_t elapsed_ns(Clock::time_point t0) {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
}
inline double seconds(std::uint64_t ns) { return static_cast<double>(ns) * 1e-9; }

// Busy time and event counts of all threads (Metrics).
struct Counters {
  std::atomic<std::uint64_t> read_ns{0}, decode_ns{0}, transform_ns{0}, assemble_ns{0};
  std::atomic<std::uint64_t> bytes_read{0}, records_read{0}, hits{0}, misses{0}, corrupt{0}, replaced{0};
  void reset();
};

// One record of a window as the read stage hands it on: its bytes (or the
// error reading them raised) and its place in the run.
struct Task {
  std::uint64_t window = 0;  // within the run
  std::uint32_t fresh = 0;   // index of the record in its window
  std::uint64_t record = 0;
  std::span<const std::uint8_t> payload;
  std::int64_t label = kNoLabel;
  std::exception_ptr read_error;
  std::vector<std::uint8_t> owned;  // payload fetched from a peer (payload points into it)
};

// RAM cache of compressed records: insert while the budget allows, never evict.
class RecordCache {
public:
  explicit RecordCache(std::uint64_t budget) : budget_(budget) {}
  bool lookup(std::uint64_t record, std::span<const std::uint8_t>& payload, std::int64_t& label) const;
  // Copies the record in if it fits; returns the cached copy's span, or the argument.
  std::span<const std::uint8_t> insert(std::uint64_t record, std::span<const std::uint8_t> payload, std::int64_t label);
  std::uint64_t bytes() const;
  std::uint64_t records() const;

private:
  struct Entry {
    std::unique_ptr<std::uint8_t[]> data;
    std::size_t size = 0;
    std::int64_t label = kNoLabel;
  };
  mutable std::mutex m_;
  std::unordered_map<std::uint64_t, Entry> map_;
  std::uint64_t budget_ = 0, used_ = 0;
};

class RecordSource {
public:
  // peer_cache.servers set: the peer cache between the RAM cache and storage
  // (spec/format.md §8.6; local datasets only, else unsupported).
  RecordSource(const Dataset& dataset, Verify verify, std::uint64_t cache_bytes, const PeerCacheOptions& peer_cache,
               Counters& counters);
  // Fills t.payload and t.label of `record`, or t.read_error; `fill_cache`:
  // a miss enters the cache if it fits (replacements do not).
  void fetch(std::uint64_t record, Task& t, bool fill_cache) const;
  const RecordCache* cache() const noexcept { return cache_.get(); }
  PeerCache* peers() const noexcept { return peers_.get(); }

private:
  const Dataset& dataset_;
  Verify verify_;
  Counters& counters_;
  std::unique_ptr<RecordCache> cache_;
  std::unique_ptr<PeerCache> peers_;
};

}  // namespace l3::detail
