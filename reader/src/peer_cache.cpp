// The peer cache over memcached (l3/reader/peer_cache.hpp, spec/format.md §8.6).
//
// One libmemcached handle talks to one server: this file routes each key to
// its owner itself (the ring below), so that the owner of a key is a function
// of the server list alone (§8.6.1), and a failed server is taken out of use
// for retry_ms here rather than rehashed onto another node (which would move
// its keys and, under -M, fill the others). Handles are pooled per server and
// created per process (a forked child never uses its parent's sockets).
#include "l3/reader/peer_cache.hpp"

#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>

#include "l3/common/error.hpp"
#include "l3/common/text.hpp"

#if L3_HAVE_LIBMEMCACHED
#include <libmemcached/memcached.h>
#endif

namespace l3 {
namespace {

constexpr std::uint32_t kPointsPerServer = 160;  // ring points per server (§8.6.1)
constexpr std::size_t kMaxKey = 200;              // memcached allows 250 bytes with the chunk suffix

std::uint64_t hash_text(std::string_view s) { return XXH3_64bits(s.data(), s.size()); }

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Endpoint {
  std::string host;
  std::uint16_t port = 11211;
};

// "host:port", "[v6]:port", or a host alone (port 11211).
Endpoint parse_server(const std::string& text) {
  auto bad = [&](const char* why) -> Endpoint {
    throw_error(errc::invalid_argument, "peer cache server '" + escape_control(text) + "': " + why);
  };
  Endpoint e;
  std::string port;
  if (!text.empty() && text[0] == '[') {
    const std::size_t close = text.find(']');
    if (close == std::string::npos) return bad("no closing ']'");
    e.host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') return bad("expected ':' after ']'");
      port = text.substr(close + 2);
      if (port.empty()) return bad("empty port");
    }
  } else {
    const std::size_t colon = text.rfind(':');
    e.host = text.substr(0, colon);
    if (colon != std::string::npos) {
      port = text.substr(colon + 1);
      if (port.empty()) return bad("empty port");
    }
  }
  if (e.host.empty()) return bad("no host");
  for (char c : e.host)
    if (static_cast<unsigned char>(c) <= ' ' || c == '/') return bad("host has a space, control byte or '/'");
  if (!port.empty()) {
    if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) return bad("port is not 1..65535");
    const unsigned long p = std::stoul(port);
    if (p == 0 || p > 65535) return bad("port is not 1..65535");
    e.port = static_cast<std::uint16_t>(p);
  }
  return e;
}

void check_key(std::string_view key) {
  if (key.empty() || key.size() > kMaxKey)
    throw_error(errc::invalid_argument, "peer cache key must be 1.." + std::to_string(kMaxKey) + " bytes");
  for (char c : key)
    if (static_cast<unsigned char>(c) <= ' ' || static_cast<unsigned char>(c) == 0x7f)
      throw_error(errc::invalid_argument, "peer cache key has a space or control byte");
}

// Item c of a value split into items of `item` bytes: "<key>.<c>" (§8.6.2).
std::string item_key(std::string_view key, std::uint64_t c) {
  std::string k(key);
  k += '.';
  k += std::to_string(c);
  return k;
}

std::uint64_t item_count(std::uint64_t size, std::uint64_t item) { return size == 0 ? 1 : (size + item - 1) / item; }

}  // namespace

std::string peer_record_key(std::uint64_t shard_hash, std::uint64_t index) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(index));
  return "l3r1:" + hex16(shard_hash) + ":" + hex;
}

struct PeerCache::Impl {
  struct Server {
    Endpoint endpoint;
    std::string name;
    std::mutex m;
#if L3_HAVE_LIBMEMCACHED
    std::vector<memcached_st*> idle;
#endif
    pid_t pid = 0;                           // the process the idle handles belong to
    std::atomic<std::int64_t> down_until{0};  // now_ms() before which the server is skipped
  };
  struct Counters {
    std::atomic<std::uint64_t> hits{0}, misses{0}, bytes{0}, stores{0}, refused{0}, corrupt{0}, failures{0},
        skipped{0};
  };

  PeerCacheOptions opt;
  std::vector<std::unique_ptr<Server>> servers;
  std::vector<std::pair<std::uint64_t, std::uint32_t>> ring;  // (point, server), sorted
  Counters n;

  explicit Impl(PeerCacheOptions o) : opt(std::move(o)) {
#if !L3_HAVE_LIBMEMCACHED
    throw_error(errc::unsupported, "peer cache: this l3 was built without libmemcached (install libmemcached-dev)");
#endif
    if (opt.servers.empty()) throw_error(errc::invalid_argument, "peer cache: no servers");
    if (opt.servers.size() > 4096) throw_error(errc::invalid_argument, "peer cache: more than 4096 servers");
    if (opt.item_bytes < 1024 || opt.item_bytes > (1u << 30))
      throw_error(errc::invalid_argument, "peer cache: item_bytes must be 1 KiB..1 GiB");
    if (opt.timeout_ms == 0 || opt.timeout_ms > 600000)
      throw_error(errc::invalid_argument, "peer cache: timeout_ms must be 1..600000");
    for (const std::string& s : opt.servers) {
      auto srv = std::make_unique<Server>();
      srv->endpoint = parse_server(s);
      srv->name = s;
      srv->pid = getpid();
      for (const auto& other : servers)
        if (other->name == s) throw_error(errc::invalid_argument, "peer cache: server '" + s + "' listed twice");
      servers.push_back(std::move(srv));
    }
    build_ring();
  }

  ~Impl() {
#if L3_HAVE_LIBMEMCACHED
    for (auto& s : servers)
      if (s->pid == getpid())
        for (memcached_st* mc : s->idle) memcached_free(mc);
#endif
  }

  // §8.6.1: kPointsPerServer points per server at XXH3-64("<server>#<i>").
  void build_ring() {
    for (std::uint32_t k = 0; k < servers.size(); ++k)
      for (std::uint32_t i = 0; i < kPointsPerServer; ++i)
        ring.emplace_back(hash_text(servers[k]->name + "#" + std::to_string(i)), k);
    std::sort(ring.begin(), ring.end());
  }

  std::size_t owner(std::string_view key) const {
    const std::uint64_t h = hash_text(key);
    auto it = std::lower_bound(ring.begin(), ring.end(), std::make_pair(h, std::uint32_t{0}));
    if (it == ring.end()) it = ring.begin();
    return it->second;
  }

  bool available(Server& s) {
    if (s.down_until.load(std::memory_order_relaxed) > now_ms()) {
      n.skipped.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    return true;
  }
  void mark_down(Server& s) {
    n.failures.fetch_add(1, std::memory_order_relaxed);
    s.down_until.store(now_ms() + opt.retry_ms, std::memory_order_relaxed);
  }

#if L3_HAVE_LIBMEMCACHED
  memcached_st* acquire(Server& s) {
    {
      std::lock_guard lock(s.m);
      if (s.pid != getpid()) {  // forked: the parent's handles (and sockets) are left alone
        s.idle.clear();
        s.pid = getpid();
      }
      if (!s.idle.empty()) {
        memcached_st* mc = s.idle.back();
        s.idle.pop_back();
        return mc;
      }
    }
    memcached_st* mc = memcached_create(nullptr);
    if (!mc) throw_error(errc::out_of_memory, "peer cache: memcached_create");
    const std::uint64_t ms = opt.timeout_ms;
    memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_NO_BLOCK, 1);  // so that the connect timeout applies
    memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_TCP_NODELAY, 1);
    memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT, ms);
    memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, ms);
    memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_SND_TIMEOUT, ms * 1000);
    memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_RCV_TIMEOUT, ms * 1000);
    if (memcached_server_add(mc, s.endpoint.host.c_str(), s.endpoint.port) != MEMCACHED_SUCCESS) {
      memcached_free(mc);
      throw_error(errc::invalid_argument, "peer cache: cannot use server '" + s.name + "'");
    }
    return mc;
  }
  // A handle goes back to the pool unless its connection failed (a fresh one
  // then starts with no state from the failure).
  void release(Server& s, memcached_st* mc, bool failed) {
    if (failed) {
      memcached_free(mc);
      return;
    }
    std::lock_guard lock(s.m);
    s.idle.push_back(mc);
  }

  enum class Got { whole, missing, wrong, failed };

  // Reads the items of `key` into out[0, size): whole when every item came
  // back with its exact length; wrong when one came with another length.
  Got read_items(memcached_st* mc, std::string_view key, std::uint64_t size, std::vector<std::uint8_t>& out) {
    const std::uint64_t item = opt.item_bytes, count = item_count(size, item);
    std::vector<std::string> keys;
    keys.reserve(count);
    for (std::uint64_t c = 0; c < count; ++c) keys.push_back(item_key(key, c));
    std::vector<const char*> ptrs;
    std::vector<std::size_t> lens;
    for (const std::string& k : keys) {
      ptrs.push_back(k.data());
      lens.push_back(k.size());
    }
    memcached_return_t rc = memcached_mget(mc, ptrs.data(), lens.data(), ptrs.size());
    if (rc != MEMCACHED_SUCCESS) return memcached_fatal(rc) ? Got::failed : Got::missing;
    out.resize(size);
    std::vector<bool> got(count);
    std::uint64_t received = 0;
    bool wrong_length = false;
    memcached_result_st* r = nullptr;
    while ((r = memcached_fetch_result(mc, nullptr, &rc)) != nullptr) {
      const std::string_view k(memcached_result_key_value(r), memcached_result_key_length(r));
      const auto at = std::find(keys.begin(), keys.end(), k);
      const auto c = static_cast<std::uint64_t>(at - keys.begin());
      const std::uint64_t want = c + 1 < count ? item : size - c * item;
      if (at != keys.end() && !got[c] && memcached_result_length(r) == want) {
        std::copy_n(reinterpret_cast<const std::uint8_t*>(memcached_result_value(r)), want,
                    out.data() + c * item);
        got[c] = true;
        ++received;
      } else {
        wrong_length = true;
      }
      memcached_result_free(r);
    }
    if (rc != MEMCACHED_END && rc != MEMCACHED_SUCCESS && rc != MEMCACHED_NOTFOUND && memcached_fatal(rc))
      return Got::failed;
    if (wrong_length) return Got::wrong;  // an item of another length: not our value
    return received == count ? Got::whole : Got::missing;
  }
#endif

  bool get(std::string_view key, std::uint64_t size, std::uint64_t xxh3, std::vector<std::uint8_t>& out) {
    check_key(key);
    Server& s = *servers[owner(key)];
    if (!available(s)) return false;
#if L3_HAVE_LIBMEMCACHED
    memcached_st* mc = acquire(s);
    const Got got = read_items(mc, key, size, out);
    release(s, mc, got == Got::failed);
    if (got == Got::failed) {
      mark_down(s);
      return false;
    }
    if (got == Got::missing) n.misses.fetch_add(1, std::memory_order_relaxed);
    if (got == Got::wrong || (got == Got::whole && XXH3_64bits(out.data(), out.size()) != xxh3)) {
      n.corrupt.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    if (got != Got::whole) return false;
    n.hits.fetch_add(1, std::memory_order_relaxed);
    n.bytes.fetch_add(size, std::memory_order_relaxed);
    return true;
#else
    (void)size, (void)xxh3, (void)out;
    return false;
#endif
  }

  void put(std::string_view key, std::span<const std::uint8_t> value) {
    check_key(key);
    Server& s = *servers[owner(key)];
    if (!available(s)) return;
#if L3_HAVE_LIBMEMCACHED
    memcached_st* mc = acquire(s);
    const std::uint64_t item = opt.item_bytes, count = item_count(value.size(), item);
    bool failed = false, refused = false;
    std::uint64_t stored = 0;
    for (; stored < count; ++stored) {
      const std::string k = item_key(key, stored);
      const std::size_t len = static_cast<std::size_t>(std::min<std::uint64_t>(item, value.size() - stored * item));
      const memcached_return_t rc = memcached_set(mc, k.data(), k.size(),
                                                  reinterpret_cast<const char*>(value.data() + stored * item), len,
                                                  time_t{0}, std::uint32_t{0});
      if (rc == MEMCACHED_SUCCESS) continue;
      failed = memcached_fatal(rc) && rc != MEMCACHED_SERVER_ERROR;  // SERVER_ERROR: a refusal (out of memory)
      refused = !failed;
      break;
    }
    if (refused) {  // under -M the server is full: drop the items already stored (they are no value alone)
      for (std::uint64_t c = 0; c < stored; ++c) {
        const std::string k = item_key(key, c);
        (void)memcached_delete(mc, k.data(), k.size(), time_t{0});
      }
      n.refused.fetch_add(1, std::memory_order_relaxed);
    } else if (!failed) {
      n.stores.fetch_add(1, std::memory_order_relaxed);
    }
    release(s, mc, failed);
    if (failed) mark_down(s);
#else
    (void)value;
#endif
  }
};

PeerCache::PeerCache(PeerCacheOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
PeerCache::~PeerCache() = default;
const PeerCacheOptions& PeerCache::options() const noexcept { return impl_->opt; }
std::size_t PeerCache::owner(std::string_view key) const { return impl_->owner(key); }

bool PeerCache::get(std::string_view key, std::uint64_t size, std::uint64_t xxh3, std::vector<std::uint8_t>& out) {
  return impl_->get(key, size, xxh3, out);
}
void PeerCache::put(std::string_view key, std::span<const std::uint8_t> value) { impl_->put(key, value); }

PeerCacheStats PeerCache::stats() const {
  const Impl::Counters& c = impl_->n;
  return {c.hits.load(), c.misses.load(), c.bytes.load(), c.stores.load(),
          c.refused.load(), c.corrupt.load(), c.failures.load(), c.skipped.load()};
}

void PeerCache::reset_stats() {
  Impl::Counters& c = impl_->n;
  for (auto* a : {&c.hits, &c.misses, &c.bytes, &c.stores, &c.refused, &c.corrupt, &c.failures, &c.skipped})
    a->store(0);
}

RecordView fetch_through_peers(const Dataset& dataset, PeerCache& peers, std::uint64_t record, Verify verify,
                               std::vector<std::uint8_t>& owned, bool& from_storage) {
  // A remote record already on this machine (its block in the shard cache)
  // is read here: local disk comes before the peers (§8.6.3).
  if (auto here = dataset.cached_record(record, verify)) {
    from_storage = false;
    return *here;
  }
  const RecordLocation loc = dataset.locate(record);
  const RecordEntry entry = dataset.entry(record);  // the index alone: no payload read or fetched
  const std::string key = peer_record_key(dataset.manifest().shards[loc.shard].file_hash, loc.index);
  if (peers.get(key, entry.size, entry.checksum, owned)) {
    from_storage = false;
    return {owned, entry.label, entry.key, entry.metadata};
  }
  from_storage = true;
  RecordView rv = dataset.record_uncached(record, verify, owned);
  // Only bytes that match the index go to the owner (checked here when the
  // read did not check them; a remote record always is).
  const bool checked = verify == Verify::yes || is_remote(dataset.directory());
  if (checked || XXH3_64bits(rv.payload.data(), rv.payload.size()) == entry.checksum) peers.put(key, rv.payload);
  return rv;
}

}  // namespace l3
