// Remote shards read by blocks (spec/format.md §8.5.1). Internal to l3_format:
// Dataset opens remote shards and prefetches their blocks through these.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "l3/format/dataset.hpp"

namespace l3::remote {

// Shard m of the remote dataset at dir, opened from its tail alone (one
// suffix-range GET for trailer and index, or the shard cache): records are
// fetched by blocks of consecutive records on first use, each block checked
// record by record against the index before it is cached and used.
std::unique_ptr<ShardReader> open_shard(const std::filesystem::path& dir, const ManifestShard& m,
                                        const ShardLimits& limits);

// Fetches the tails of these shards of dir into the shard cache, all in flight
// at once on one multi handle (what open_shard will read); done(j) when
// shards[j]'s is cached. Stops early, not an error, when cancelled() turns true.
void fetch_tails(const std::filesystem::path& dir, std::span<const ManifestShard> shards,
                 const std::function<bool()>& cancelled, const std::function<void(std::size_t)>& done);

// A block of a shard opened by open_shard.
struct BlockRef {
  const ShardReader* shard = nullptr;
  std::size_t block = 0;
};
// The block holding record i of `shard` (opened by open_shard).
std::size_t block_of(const ShardReader& shard, std::uint64_t record);
// Fetches these blocks (those not yet at hand, here or in the shard cache), in
// this order, many in flight on one multi handle. Stops early when cancelled().
void fetch_blocks(const std::filesystem::path& dir, std::span<const BlockRef> blocks,
                  const std::function<bool()>& cancelled);

// Whether record i's block of `shard` (opened by open_shard) is at hand:
// fetched, or in the shard cache (then mapped). Never fetches.
bool block_at_hand(const ShardReader& shard, std::uint64_t record);
// Record i's payload alone by one ranged GET, caching nothing; checked
// against its index XXH3 (checksum_mismatch).
std::vector<std::uint8_t> fetch_record(const ShardReader& shard, std::uint64_t record);

}  // namespace l3::remote
