// The peer cache (l3/reader/peer_cache.hpp, spec/format.md §8.6): the ring, values
// in memcached, and reader "nodes" sharing two memcached servers on
// 127.0.0.1 (each started here, on a free port, stopped by its PID): after
// one node's epoch the other reads nothing from storage; a peer killed or
// hung mid-epoch, and a corrupted value in memcached, never change a batch.
#include <doctest/doctest.h>
#include <libmemcached/memcached.h>
#include <xxhash.h>

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "l3/reader/peer_cache.hpp"
#include "l3/reader/reader.hpp"
#include "test_peer_util.hpp"
#include "test_reader_util.hpp"

using namespace l3;

namespace {

struct Epoch {
  std::vector<std::uint64_t> records;
  std::vector<std::int64_t> labels;
  std::vector<std::uint8_t> bytes;  // every batch, back to back
  Metrics metrics;
};

// What `r` did since `before` (the counters these tests look at).
Metrics since(const Metrics& now, const Metrics& before) {
  Metrics m = now;
  m.records_read -= before.records_read;
  m.bytes_read -= before.bytes_read;
  m.cache_hits -= before.cache_hits;
  m.peer.hits -= before.peer.hits;
  m.peer.misses -= before.peer.misses;
  m.peer.bytes -= before.peer.bytes;
  m.peer.stores -= before.peer.stores;
  m.peer.refused -= before.peer.refused;
  m.peer.corrupt -= before.peer.corrupt;
  m.peer.failures -= before.peer.failures;
  m.peer.skipped -= before.peer.skipped;
  return m;
}

// Reads the rest of r's run; after `batches_before` batches calls `midway`.
Epoch read_run(Reader& r, const Metrics& before, std::uint64_t batches_before = 0,
               const std::function<void()>& midway = {}) {
  Epoch e;
  std::uint64_t n = 0;
  while (const Batch* b = r.next()) {
    e.records.insert(e.records.end(), b->records.begin(), b->records.end());
    e.labels.insert(e.labels.end(), b->labels.begin(), b->labels.end());
    const auto* p = static_cast<const std::uint8_t*>(b->data);
    e.bytes.insert(e.bytes.end(), p, p + b->bytes);
    if (++n == batches_before && midway) midway();
  }
  e.metrics = since(r.metrics(), before);
  return e;
}

// The next epoch of a reader that finished its previous one (its counters
// are still then: the read stage ended with the epoch).
Epoch read_epoch(Reader& r, std::uint64_t epoch) {
  const Metrics before = r.metrics();
  r.set_epoch(epoch);
  return read_run(r, before);
}

ReaderOptions node_options(std::uint64_t seed, std::vector<std::string> servers) {
  ReaderOptions o;
  o.batch_size = 4;
  o.workers = 2;
  o.prefetch = 1;
  o.read_ahead = 4;  // the read stage stays close to the consumer (a kill lands mid-epoch)
  o.seed = seed;
  o.transform.width = 24;
  o.transform.height = 20;
  o.transform.dtype = DType::uint8;
  o.peer_cache.servers = std::move(servers);
  o.peer_cache.timeout_ms = 200;
  o.peer_cache.retry_ms = 60000;  // a failed peer stays out for the rest of the test
  return o;
}

// Epoch `epoch` read by a new reader (a node started for it).
Epoch read_new(const std::shared_ptr<const Dataset>& ds, ReaderOptions o, std::uint64_t epoch,
               std::uint64_t batches_before = 0, const std::function<void()>& midway = {}) {
  o.epoch = epoch;
  Reader r(ds, o);
  return read_run(r, Metrics{}, batches_before, midway);
}

// The same epoch from storage alone: what every node must deliver.
Epoch reference(const std::shared_ptr<const Dataset>& ds, ReaderOptions o, std::uint64_t epoch) {
  o.peer_cache = {};
  return read_new(ds, o, epoch);
}

void check_same(const Epoch& got, const Epoch& want) {
  CHECK(got.records == want.records);
  CHECK(got.labels == want.labels);
  CHECK(got.bytes == want.bytes);  // pixel for pixel: no wrong record
}

std::uint64_t payload_bytes(const Dataset& ds) {
  std::uint64_t n = 0;
  for (std::uint64_t i = 0; i < ds.size(); ++i) n += ds.record(i).payload.size();
  return n;
}

std::string key_of(const Dataset& ds, std::uint64_t record) {
  const RecordLocation loc = ds.locate(record);
  return peer_record_key(ds.manifest().shards[loc.shard].file_hash, loc.index);
}

// Sets item `item` of `key` to `value` directly (what a faulty peer would hold).
void raw_set(const l3::test::Memcached& server, const std::string& item, const std::vector<std::uint8_t>& value) {
  memcached_st* mc = memcached_create(nullptr);
  REQUIRE(mc);
  REQUIRE(memcached_server_add(mc, "127.0.0.1", server.port()) == MEMCACHED_SUCCESS);
  const memcached_return_t rc = memcached_set(mc, item.data(), item.size(), reinterpret_cast<const char*>(value.data()),
                                              value.size(), time_t{0}, std::uint32_t{0});
  memcached_free(mc);
  REQUIRE(rc == MEMCACHED_SUCCESS);
}

std::shared_ptr<const Dataset> synth(const std::string& name, std::uint64_t records) {
  l3::test::SynthSpec spec;
  spec.records = records;
  spec.per_shard = 9;
  const auto dir = l3::test::fresh_dir(name);
  l3::test::write_synth_dataset(dir, spec);
  return std::make_shared<const Dataset>(Dataset::open(dir));
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_CASE("peer ring: owners depend on the server list only, are balanced, and move only to a new server") {
  PeerCacheOptions two;
  two.servers = {"node-a:11211", "node-b:11211"};
  PeerCacheOptions swapped;
  swapped.servers = {"node-b:11211", "node-a:11211"};
  PeerCacheOptions three;
  three.servers = {"node-a:11211", "node-b:11211", "node-c:11211"};
  PeerCache a(two), b(swapped), c(three);
  std::map<std::size_t, int> load;
  int moved = 0;
  const int keys = 20000;
  for (int i = 0; i < keys; ++i) {
    const std::string k = peer_record_key(0x1234abcdULL, static_cast<std::uint64_t>(i));
    const std::size_t o = a.owner(k);
    ++load[o];
    CHECK(two.servers[o] == swapped.servers[b.owner(k)]);  // the list's order does not matter
    const std::size_t o3 = c.owner(k);
    if (three.servers[o3] != two.servers[o]) {
      ++moved;
      CHECK(o3 == 2);  // a key changes owner only to the new server
    }
  }
  CHECK(load[0] > keys * 40 / 100);  // 160 points per server: within +-10% of half
  CHECK(load[1] > keys * 40 / 100);
  CHECK(moved > keys * 23 / 100);  // about a third moves to the new server
  CHECK(moved < keys * 43 / 100);
  CHECK(peer_record_key(0xfULL, 26) == "l3r1:000000000000000f:1a");
}

TEST_CASE("peer cache options are checked") {
  auto err = [](std::vector<std::string> servers) {
    return l3::test::error_of([&] {
      PeerCacheOptions o;
      o.servers = std::move(servers);
      PeerCache p(o);
    });
  };
  CHECK(err({}) == errc::invalid_argument);
  CHECK(err({"host:"}) == errc::invalid_argument);
  CHECK(err({":11211"}) == errc::invalid_argument);
  CHECK(err({"host:0"}) == errc::invalid_argument);
  CHECK(err({"host:65536"}) == errc::invalid_argument);
  CHECK(err({"host:12ab"}) == errc::invalid_argument);
  CHECK(err({"[::1"}) == errc::invalid_argument);
  CHECK(err({"a b:1"}) == errc::invalid_argument);
  CHECK(err({"h:1", "h:1"}) == errc::invalid_argument);
  CHECK(err({"h", "h:1", "[::1]:2", "[::1]"}) == errc::ok);
}

TEST_CASE("peer cache values: round trip, chunks, size and XXH3 checks, refusal when full") {
  l3::test::Memcached server(2);
  PeerCacheOptions o;
  o.servers = {server.address()};
  o.item_bytes = 1024;  // values above 1 KiB are chunked
  PeerCache p(o);
  std::vector<std::uint8_t> value(5000);
  for (std::size_t i = 0; i < value.size(); ++i) value[i] = static_cast<std::uint8_t>(i * 7 + 3);
  const std::uint64_t h = XXH3_64bits(value.data(), value.size());
  std::vector<std::uint8_t> out;
  CHECK_FALSE(p.get("k", value.size(), h, out));  // miss
  CHECK(p.stats().misses == 1);
  p.put("k", value);
  CHECK(p.stats().stores == 1);
  REQUIRE(p.get("k", value.size(), h, out));
  CHECK(out == value);
  CHECK(p.stats().hits == 1);
  CHECK(p.stats().bytes == value.size());
  CHECK_FALSE(p.get("k", value.size(), h ^ 1, out));  // the index says other bytes
  CHECK_FALSE(p.get("k", value.size() + 1, h, out));  // the index says another size
  CHECK(p.stats().corrupt == 2);
  // Damage inside one chunk: same length, other bytes.
  std::vector<std::uint8_t> piece(value.begin() + 2048, value.begin() + 3072);
  piece[5] ^= 1;
  raw_set(server, "k.2", piece);
  CHECK_FALSE(p.get("k", value.size(), h, out));
  CHECK(p.stats().corrupt == 3);
  p.put("k", value);  // replaced
  CHECK(p.get("k", value.size(), h, out));
  // An empty value is one empty item.
  p.put("e", {});
  CHECK(p.get("e", 0, XXH3_64bits(nullptr, 0), out));
  CHECK(out.empty());
  // -M with 2 MB: stores are refused once full, never evicted, never an error.
  std::vector<std::uint8_t> big(200000, 9);
  for (int i = 0; i < 40; ++i) p.put("big" + std::to_string(i), big);
  const PeerCacheStats s = p.stats();
  CHECK(s.refused > 0);
  CHECK(s.failures == 0);
  CHECK(p.get("k", value.size(), h, out));  // stored before it filled: still there
  CHECK(l3::test::error_of([&] { p.put("has space", value); }) == errc::invalid_argument);
}

TEST_CASE("two nodes: after one node's epoch, the other reads nothing from storage; batches unchanged") {
  auto ds = synth("peer_two_nodes", 40);
  l3::test::Memcached a, b;
  const std::vector<std::string> servers{a.address(), b.address()};
  const std::uint64_t n = ds->size(), bytes = payload_bytes(*ds);
  Reader node_a(ds, node_options(1, servers));
  const Epoch a0 = read_run(node_a, Metrics{});  // cold: everything from storage, stored into its owner
  check_same(a0, reference(ds, node_options(1, servers), 0));
  CHECK(a0.metrics.records_read == n);
  CHECK(a0.metrics.bytes_read == bytes);
  CHECK(a0.metrics.peer.misses == n);
  CHECK(a0.metrics.peer.stores == n);
  CHECK(a0.metrics.peer_cache);

  const Epoch b0 = read_new(ds, node_options(2, servers), 0);  // another node, another order: all from the owners
  check_same(b0, reference(ds, node_options(2, servers), 0));
  CHECK(b0.metrics.records_read == 0);
  CHECK(b0.metrics.bytes_read == 0);
  CHECK(b0.metrics.peer.hits == n);
  CHECK(b0.metrics.peer.bytes == bytes);

  const Epoch a1 = read_epoch(node_a, 1);
  check_same(a1, reference(ds, node_options(1, servers), 1));
  CHECK(a1.metrics.records_read == 0);

  // The records are partitioned: each server owns some, none owns all.
  PeerCacheOptions po;
  po.servers = servers;
  PeerCache ring(po);
  std::set<std::size_t> owners;
  for (std::uint64_t r = 0; r < n; ++r) owners.insert(ring.owner(key_of(*ds, r)));
  CHECK(owners.size() == 2);
}

TEST_CASE("a peer killed mid-epoch: no wrong record, the epoch completes from storage") {
  auto ds = synth("peer_killed", 80);
  auto a = std::make_unique<l3::test::Memcached>();
  auto b = std::make_unique<l3::test::Memcached>();
  const std::vector<std::string> servers{a->address(), b->address()};
  (void)read_new(ds, node_options(1, servers), 0);  // a node's first epoch fills the owners
  PeerCacheOptions po;
  po.servers = servers;
  PeerCache ring(po);
  std::uint64_t owned_by_b = 0;
  for (std::uint64_t r = 0; r < ds->size(); ++r) owned_by_b += ring.owner(key_of(*ds, r)) == 1;
  REQUIRE(owned_by_b > 0);

  const auto t0 = std::chrono::steady_clock::now();
  const Epoch e = read_new(ds, node_options(2, servers), 3, 2, [&] { b->stop(); });
  const double took = seconds_since(t0);
  check_same(e, reference(ds, node_options(2, servers), 3));
  const Metrics& m = e.metrics;
  CHECK(m.peer.failures >= 1);
  CHECK(m.peer.skipped >= 1);                      // after the failure, b is not asked again
  CHECK(m.records_read >= 1);                      // b's records came from storage
  CHECK(m.records_read < owned_by_b + 1);          // a's records still came from a
  CHECK(m.peer.hits + m.records_read == ds->size());
  CHECK(took < 20.0);
}

TEST_CASE("a hung peer (SIGSTOP): requests time out within the bound and the epoch completes") {
  auto ds = synth("peer_hung", 40);
  l3::test::Memcached a, b;
  const std::vector<std::string> servers{a.address(), b.address()};
  (void)read_new(ds, node_options(1, servers), 0);  // a node's first epoch fills the owners
  b.pause();
  const auto t0 = std::chrono::steady_clock::now();
  const Epoch e = read_new(ds, node_options(2, servers), 0);
  const double took = seconds_since(t0);
  b.resume();
  check_same(e, reference(ds, node_options(2, servers), 0));
  CHECK(e.metrics.peer.failures >= 1);
  CHECK(e.metrics.peer.failures <= 2);  // then skipped for retry_ms
  CHECK(e.metrics.records_read >= 1);
  CHECK(took < 10.0);  // one 200 ms timeout (a few polls), not one per record
}

TEST_CASE("a corrupted value in memcached is detected, read from storage and replaced") {
  auto ds = synth("peer_corrupt", 30);
  l3::test::Memcached a, b;
  const std::vector<std::string> servers{a.address(), b.address()};
  (void)read_new(ds, node_options(1, servers), 0);  // a node's first epoch fills the owners
  PeerCacheOptions po;
  po.servers = servers;
  PeerCache peers(po);
  const l3::test::Memcached* by_index[] = {&a, &b};
  // Record 4: same length, one byte flipped. Record 9: a value of another length.
  const RecordView r4 = ds->record(4), r9 = ds->record(9);
  std::vector<std::uint8_t> flipped(r4.payload.begin(), r4.payload.end());
  flipped[flipped.size() / 2] ^= 0x40;
  raw_set(*by_index[peers.owner(key_of(*ds, 4))], key_of(*ds, 4) + ".0", flipped);
  std::vector<std::uint8_t> shorter(r9.payload.begin(), r9.payload.end() - 1);
  raw_set(*by_index[peers.owner(key_of(*ds, 9))], key_of(*ds, 9) + ".0", shorter);

  Reader node(ds, node_options(2, servers));
  const Epoch e = read_run(node, Metrics{});
  check_same(e, reference(ds, node_options(2, servers), 0));
  CHECK(e.metrics.peer.corrupt == 2);
  CHECK(e.metrics.records_read == 2);
  CHECK(e.metrics.peer.stores == 2);  // the right bytes replaced the wrong ones
  std::vector<std::uint8_t> out;
  const RecordEntry e4 = ds->shard(ds->locate(4).shard).entry(ds->locate(4).index);
  CHECK(e4.size == r4.payload.size());
  CHECK(e4.checksum == XXH3_64bits(r4.payload.data(), r4.payload.size()));
  REQUIRE(peers.get(key_of(*ds, 4), e4.size, e4.checksum, out));
  CHECK(std::equal(out.begin(), out.end(), r4.payload.begin(), r4.payload.end()));
  const Epoch again = read_epoch(node, 1);
  CHECK(again.metrics.records_read == 0);
  CHECK(again.metrics.peer.corrupt == 0);
}

TEST_CASE("with a RAM cache, the peers serve only what it does not hold") {
  auto ds = synth("peer_ram", 32);  // a multiple of the batch: no padding repeats
  l3::test::Memcached a;
  ReaderOptions o = node_options(5, {a.address()});
  o.cache_bytes = 1ull << 30;
  Reader node(ds, o);
  const Epoch e0 = read_run(node, Metrics{});
  CHECK(e0.metrics.records_read == ds->size());
  const Epoch e1 = read_epoch(node, 1);
  CHECK(e1.metrics.cache_hits == ds->size());
  CHECK(e1.metrics.peer.hits + e1.metrics.peer.misses == 0);  // RAM first
  CHECK(e1.metrics.records_read == 0);
  const std::string json = e1.metrics.to_json();
  CHECK(json.find("\"peer_cache\"") != std::string::npos);
  CHECK(json.find("\"records_read\":0") != std::string::npos);
}

TEST_CASE("records larger than one item travel as several items, end to end") {
  auto ds = synth("peer_chunked", 24);
  std::uint64_t largest = 0;
  for (std::uint64_t r = 0; r < ds->size(); ++r) largest = std::max<std::uint64_t>(largest, ds->record(r).payload.size());
  l3::test::Memcached a, b;
  ReaderOptions o = node_options(3, {a.address(), b.address()});
  o.peer_cache.item_bytes = 1024;
  REQUIRE(largest > 3 * o.peer_cache.item_bytes);  // some records need 4+ items
  (void)read_new(ds, o, 0);
  o.seed = 4;
  const Epoch e = read_new(ds, o, 0);
  check_same(e, reference(ds, o, 0));
  CHECK(e.metrics.records_read == 0);
  CHECK(e.metrics.peer.hits == ds->size());
}
