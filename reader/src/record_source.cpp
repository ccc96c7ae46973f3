// The read stage: RAM cache and dataset reads (record_source.hpp).
#include "record_source.hpp"

#include <algorithm>

namespace l3::detail {
namespace {

// Reads one byte per page so that the kernel maps (and reads) the pages now.
void prefault(std::span<const std::uint8_t> bytes) {
  std::uint8_t acc = 0;
  for (std::size_t i = 0; i < bytes.size(); i += 4096) acc = static_cast<std::uint8_t>(acc ^ bytes[i]);
  if (!bytes.empty()) acc = static_cast<std::uint8_t>(acc ^ bytes.back());
  static std::atomic<std::uint8_t> sink{0};
  sink.store(acc, std::memory_order_relaxed);
}

}  // namespace

void Counters::reset() {
  for (auto* a : {&read_ns, &decode_ns, &transform_ns, &assemble_ns, &bytes_read, &records_read, &hits, &misses,
                  &corrupt, &replaced})
    a->store(0);
}

bool RecordCache::lookup(std::uint64_t record, std::span<const std::uint8_t>& payload, std::int64_t& label) const {
  std::lock_guard lock(m_);
  auto it = map_.find(record);
  if (it == map_.end()) return false;
  payload = {it->second.data.get(), it->second.size};
  label = it->second.label;
  return true;
}

std::span<const std::uint8_t> RecordCache::insert(std::uint64_t record, std::span<const std::uint8_t> payload,
                                                  std::int64_t label) {
  std::lock_guard lock(m_);
  if (used_ + payload.size() > budget_ || map_.count(record)) return payload;
  Entry e;
  e.data = std::make_unique<std::uint8_t[]>(payload.size());
  std::copy(payload.begin(), payload.end(), e.data.get());
  e.size = payload.size();
  e.label = label;
  used_ += payload.size();
  auto& stored = map_.emplace(record, std::move(e)).first->second;
  return {stored.data.get(), stored.size};
}

std::uint64_t RecordCache::bytes() const {
  std::lock_guard lock(m_);
  return used_;
}

std::uint64_t RecordCache::records() const {
  std::lock_guard lock(m_);
  return map_.size();
}

RecordSource::RecordSource(const Dataset& dataset, Verify verify, std::uint64_t cache_bytes,
                           const PeerCacheOptions& peer_cache, Counters& counters)
    : dataset_(dataset), verify_(verify), counters_(counters) {
  if (cache_bytes) cache_ = std::make_unique<RecordCache>(cache_bytes);
  if (!peer_cache.servers.empty()) peers_ = std::make_unique<PeerCache>(peer_cache);
}

void RecordSource::fetch(std::uint64_t record, Task& t, bool fill_cache) const {
  const auto t0 = Clock::now();
  try {
    if (cache_ && cache_->lookup(record, t.payload, t.label)) {
      counters_.hits.fetch_add(1, std::memory_order_relaxed);
    } else {
      if (cache_) counters_.misses.fetch_add(1, std::memory_order_relaxed);
      bool from_storage = true;
      RecordView rv = peers_ ? fetch_through_peers(dataset_, *peers_, record, verify_, t.owned, from_storage)
                             : dataset_.record(record, verify_);
      if (from_storage) {
        counters_.bytes_read.fetch_add(rv.payload.size(), std::memory_order_relaxed);
        counters_.records_read.fetch_add(1, std::memory_order_relaxed);
      }
      // Without the checksum pass nothing has touched the mapped pages yet:
      // fault them in here, so storage reads happen in the read stage, ahead of decode.
      if (verify_ == Verify::no) prefault(rv.payload);
      t.payload = rv.payload;
      t.label = rv.label;
      if (cache_ && fill_cache) t.payload = cache_->insert(record, rv.payload, rv.label);
    }
  } catch (...) {
    t.read_error = std::current_exception();
  }
  counters_.read_ns.fetch_add(elapsed_ns(t0), std::memory_order_relaxed);
}

}  // namespace l3::detail
