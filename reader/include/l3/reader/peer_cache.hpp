// The peer cache (spec/format.md §8.6): CoorDL's partitioned cache across
// nodes, on memcached. Every node runs one memcached (`memcached -M`: refuse
// rather than evict) and lists every node's server, the same list on every
// node; each record has one owner, picked by consistent hashing of its key;
// a reader looks for a record in its RAM cache, then the owner's memcached,
// then storage (the dataset's directory: for a cluster, a shared file
// system; for an s3:// dataset, a record already in the local shard cache
// comes before the owner, and a miss is one ranged GET of the record alone),
// and stores what it read from storage into the owner (§8.6).
//
// Nothing fetched from a peer is trusted: a value is used only when its size
// and XXH3-64 equal the record's index entry (spec/format.md §4.3, §5.2); any
// other value, a missing chunk, a timeout or a dead server makes the record a
// storage read. A server that failed is skipped for `retry_ms`, so a dead peer
// costs one bounded timeout, then nothing.
//
// Thread safety: PeerCache may be used from several threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "l3/format/dataset.hpp"

namespace l3 {

struct PeerCacheOptions {
  // "host:port" (or "[v6]:port") of every node's memcached; the port defaults
  // to 11211. Empty: no peer cache. Every node MUST give the same spellings
  // (the ring hashes them); their order does not matter.
  std::vector<std::string> servers;
  std::uint32_t timeout_ms = 500;   // bound on connecting, sending and each wait for a reply
  std::uint32_t retry_ms = 2000;    // a server that failed is not asked again for this long
  // Largest value stored as one memcached item; a longer record is stored as
  // ceil(size / item_bytes) items (memcached's default item limit, -I 1m,
  // holds 1 MiB including the item's header and key).
  std::uint32_t item_bytes = (1u << 20) - 1024;
};

// Counters of one PeerCache (all threads).
struct PeerCacheStats {
  std::uint64_t hits = 0;       // records the owner served with the right bytes
  std::uint64_t misses = 0;     // records the owner did not hold (whole)
  std::uint64_t bytes = 0;      // payload bytes of the hits
  std::uint64_t stores = 0;     // records stored into their owner
  std::uint64_t refused = 0;    // stores the owner refused (full under -M, or too large)
  std::uint64_t corrupt = 0;    // values of the wrong size or XXH3 (read again from storage, then replaced)
  std::uint64_t failures = 0;   // requests that failed (connection refused, timeout, broken reply)
  std::uint64_t skipped = 0;    // lookups not sent: the owner failed less than retry_ms ago
};

class PeerCache {
public:
  // invalid_argument for a malformed server or option; unsupported when this
  // build has no libmemcached. Connects lazily.
  explicit PeerCache(PeerCacheOptions options);
  ~PeerCache();
  PeerCache(const PeerCache&) = delete;
  PeerCache& operator=(const PeerCache&) = delete;

  const PeerCacheOptions& options() const noexcept;
  // Index in options().servers of the owner of `key` (the ring of §8.6.1).
  std::size_t owner(std::string_view key) const;

  // The value of `key` from its owner into `out`, when the owner holds all of
  // it and it is `size` bytes with XXH3-64 `xxh3`; false otherwise (counted).
  bool get(std::string_view key, std::uint64_t size, std::uint64_t xxh3, std::vector<std::uint8_t>& out);
  // Stores `value` under `key` on its owner (best effort, never throws for
  // the server's sake: refusals and failures are counted).
  void put(std::string_view key, std::span<const std::uint8_t> value);

  PeerCacheStats stats() const;
  void reset_stats();

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The key of record `index` of the shard whose manifest hash is `shard_hash`
// (spec/format.md §8.6.2): "l3r1:<16 hex digits>:<index in hex>".
std::string peer_record_key(std::uint64_t shard_hash, std::uint64_t index);

// Record `record` of `dataset` through the peer tier: from the local shard
// cache (a remote dataset's fetched block), else from its owner when the
// owner holds its exact bytes (copied into `owned`, which the returned view
// points into; checked against the index entry whatever `verify` says), else
// from the dataset (checked as `verify` says; a remote record alone, by one
// ranged GET into `owned`), then stored into the owner (replacing a wrong
// value). `from_storage` says whether storage was read.
RecordView fetch_through_peers(const Dataset& dataset, PeerCache& peers, std::uint64_t record, Verify verify,
                               std::vector<std::uint8_t>& owned, bool& from_storage);

}  // namespace l3
