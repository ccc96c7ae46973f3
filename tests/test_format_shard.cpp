// ShardWriter / ShardReader round trips (spec/format.md §2-§6).
#include <algorithm>
#include <thread>

#include "l3/format/shard.hpp"
#include "test_format_util.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

using namespace l3;
using namespace l3::test;

namespace {

struct Rec {
  Bytes payload;
  std::int64_t label;
  std::string key;
  Bytes meta;
};

std::vector<Rec> make_records(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Rec> recs;
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t size = i % 7 == 0 ? 0 : rng() % 3000;  // some empty payloads
    std::int64_t label = i % 5 == 0 ? kNoLabel : static_cast<std::int64_t>(rng() % 1000);
    std::string key = i % 3 == 0 ? "" : "train/class_" + std::to_string(label) + "/img_" + std::to_string(i) + ".png";
    recs.push_back({random_bytes(rng, size), label, key, random_bytes(rng, i % 4 == 0 ? 0 : rng() % 40)});
  }
  return recs;
}

ShardSummary write_shard(const std::filesystem::path& path, const std::vector<Rec>& recs, ShardWriterOptions opt = {}) {
  ShardWriter w(path, opt);
  for (std::size_t i = 0; i < recs.size(); ++i) {
    CHECK(w.append(recs[i].payload, recs[i].label, recs[i].key, recs[i].meta) == i);
  }
  CHECK(w.records() == recs.size());
  return w.finalize();
}

void check_record(const RecordView& r, const Rec& want) {
  CHECK(Bytes(r.payload.begin(), r.payload.end()) == want.payload);
  CHECK(r.label == want.label);
  CHECK(r.key == want.key);
  CHECK(Bytes(r.metadata.begin(), r.metadata.end()) == want.meta);
}

}  // namespace

TEST_CASE("round trip: labels, keys, metadata, empty payloads, many records, both index encodings") {
  auto dir = fresh_dir("round_trip");
  auto recs = make_records(3000, 1);
  for (auto enc : {IndexEncoding::raw, IndexEncoding::zstd}) {
    CAPTURE(static_cast<int>(enc));
    auto path = dir / (enc == IndexEncoding::raw ? "raw.l3s" : "zstd.l3s");
    auto summary = write_shard(path, recs, {enc});
    CHECK(summary.path == path);
    CHECK(summary.records == recs.size());
    CHECK(summary.bytes == std::filesystem::file_size(path));
    Bytes file = read_file(path);
    CHECK(summary.file_hash == XXH3_64bits(file.data(), file.size()));

    ShardReader r(path);
    CHECK(r.size() == recs.size());
    CHECK(r.index_encoding() == enc);
    CHECK(r.file_size() == file.size());
    CHECK(r.max_label() == 999);
    // Random access in a shuffled order.
    std::vector<std::size_t> order(recs.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), std::mt19937_64(7));
    for (auto i : order) check_record(r.record(i), recs[i]);
    r.verify_all();
    CHECK(error_of([&] { (void)r.record(recs.size()); }) == errc::out_of_range);
  }
}

TEST_CASE("an empty shard is valid") {
  auto path = fresh_dir("empty") / "empty.l3s";
  auto s = ShardWriter(path).finalize();
  CHECK(s.records == 0);
  CHECK(s.bytes == 96);
  ShardReader r(path);
  CHECK(r.size() == 0);
  CHECK(r.max_label() == kNoLabel);
  r.verify_all();
}

TEST_CASE("deterministic: the same appends give byte-identical shards") {
  auto dir = fresh_dir("deterministic");
  auto recs = make_records(200, 2);
  for (auto enc : {IndexEncoding::raw, IndexEncoding::zstd}) {
    write_shard(dir / "a.l3s", recs, {enc});
    write_shard(dir / "b.l3s", recs, {enc});
    CHECK(read_file(dir / "a.l3s") == read_file(dir / "b.l3s"));
  }
}

TEST_CASE("the writer uses a temporary file; without finalize no shard is left") {
  auto dir = fresh_dir("no_finalize");
  auto path = dir / "s.l3s";
  {
    ShardWriter w(path);
    w.append(bytes_of("payload"), 1, "k");
    CHECK(std::filesystem::exists(dir / "s.l3s.tmp"));
    CHECK_FALSE(std::filesystem::exists(path));
    CHECK(w.bytes_written() == 32 + 7);
  }
  CHECK(std::filesystem::is_empty(dir));
  {
    ShardWriter w(path);
    w.append(bytes_of("x"));
    ShardWriter moved(std::move(w));  // the moved-from writer must not delete anything
    moved.finalize();
  }
  CHECK(std::filesystem::exists(path));
  CHECK_FALSE(std::filesystem::exists(dir / "s.l3s.tmp"));
}

TEST_CASE("the writer refuses records a reader would reject") {
  auto dir = fresh_dir("writer_refuses");
  ShardWriterOptions opt;
  opt.limits.max_key_size = 8;
  opt.limits.max_metadata_size = 4;
  opt.limits.max_record_size = 16;
  opt.limits.max_records = 2;
  ShardWriter w(dir / "s.l3s", opt);
  CHECK(error_of([&] { w.append(bytes_of("p"), -2); }) == errc::invalid_argument);
  CHECK(error_of([&] { w.append(bytes_of("p"), 0, "\xC0\xAF"); }) == errc::invalid_argument);  // overlong '/'
  CHECK(error_of([&] { w.append(bytes_of("p"), 0, "123456789"); }) == errc::limit_exceeded);
  CHECK(error_of([&] { w.append(bytes_of("p"), 0, "", bytes_of("12345")); }) == errc::limit_exceeded);
  CHECK(error_of([&] { w.append(Bytes(17)); }) == errc::limit_exceeded);
  w.append(bytes_of("a"));
  w.append(bytes_of("b"));
  CHECK(error_of([&] { w.append(bytes_of("c")); }) == errc::limit_exceeded);
  w.finalize();
  CHECK(error_of([&] { w.append(bytes_of("d")); }) == errc::invalid_argument);
  CHECK(error_of([&] { w.finalize(); }) == errc::invalid_argument);
  CHECK(ShardReader(dir / "s.l3s").size() == 2);
}

TEST_CASE("reader limits are enforced on open") {
  auto path = fresh_dir("reader_limits") / "s.l3s";
  write_shard(path, make_records(50, 3));
  ShardLimits lim;
  lim.max_records = 49;
  CHECK(error_of([&] { ShardReader r(path, lim); }) == errc::limit_exceeded);
  lim = {};
  lim.max_record_size = 100;
  CHECK(error_of([&] { ShardReader r(path, lim); }) == errc::limit_exceeded);
  lim = {};
  lim.max_key_size = 5;
  CHECK(error_of([&] { ShardReader r(path, lim); }) == errc::limit_exceeded);
  lim = {};
  lim.max_index_size = 1000;
  CHECK(error_of([&] { ShardReader r(path, lim); }) == errc::limit_exceeded);
  CHECK(error_of([&] { ShardReader r(fresh_dir("missing") / "nope.l3s"); }) == errc::io_error);
}

TEST_CASE("a reader over bytes in memory reads the same records") {
  auto path = fresh_dir("in_memory") / "s.l3s";
  auto recs = make_records(20, 4);
  write_shard(path, recs);
  ShardReader r(read_file(path));
  for (std::size_t i = 0; i < recs.size(); ++i) check_record(r.record(i), recs[i]);
}

TEST_CASE("concurrent reads of different records") {
  auto path = fresh_dir("concurrent") / "s.l3s";
  auto recs = make_records(400, 5);
  write_shard(path, recs, {IndexEncoding::zstd});
  ShardReader r(path);
  std::vector<int> bad(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (std::size_t i = static_cast<std::size_t>(t); i < recs.size(); i += 4) {
        auto v = r.record(i);
        if (Bytes(v.payload.begin(), v.payload.end()) != recs[i].payload || v.key != recs[i].key) ++bad[static_cast<std::size_t>(t)];
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(bad == std::vector<int>(4, 0));
}

namespace {

// Serves a shard's bytes from memory and counts the calls (a stand-in for a
// remote shard's blocks).
struct MemoryBody : ShardBody {
  Bytes file;
  mutable std::size_t calls = 0;
  std::span<const std::uint8_t> bytes(std::uint64_t offset, std::uint64_t size) const override {
    ++calls;
    if (offset + size > file.size()) throw_error(errc::io_error, "past the end");
    return std::span<const std::uint8_t>(file).subspan(offset, size);
  }
};

}  // namespace

TEST_CASE("a shard opened from its tail: index from the tail, payloads from the body (spec/format.md §8.5.1)") {
  auto dir = fresh_dir("tail_open");
  auto recs = make_records(200, 9);
  for (auto enc : {IndexEncoding::raw, IndexEncoding::zstd}) {
    CAPTURE(static_cast<int>(enc));
    const auto path = dir / "s.l3s";
    write_shard(path, recs, {enc});
    auto body = std::make_shared<MemoryBody>();
    body->file = read_file(path);
    const ShardReader whole(path);
    const std::uint64_t index_at = whole.extent(recs.size() - 1).offset + whole.extent(recs.size() - 1).size;
    const std::size_t tail_size = body->file.size() - static_cast<std::size_t>(index_at) + 100;  // index, trailer, some records
    Bytes tail(body->file.end() - static_cast<std::ptrdiff_t>(tail_size), body->file.end());
    const ShardReader r(body->file.size(), tail, body);
    CHECK(body->calls == 0);  // opening reads no payload
    CHECK(r.size() == recs.size());
    CHECK(r.file_size() == body->file.size());
    CHECK(r.file_bytes().empty());
    CHECK(r.body() == body.get());
    for (std::size_t i = 0; i < recs.size(); ++i) {
      const RecordEntry e = r.entry(i);
      CHECK(e.size == recs[i].payload.size());
      CHECK(e.label == recs[i].label);
      CHECK(e.key == recs[i].key);
      const RecordExtent x = r.extent(i);
      CHECK(x.offset == whole.extent(i).offset);
      CHECK(x.xxh3 == XXH3_64bits(recs[i].payload.data(), recs[i].payload.size()));
    }
    CHECK(body->calls == 0);  // entries and extents come from the index alone
    for (std::size_t i = 0; i < recs.size(); ++i) check_record(r.record(i), recs[i]);
    CHECK(body->calls == recs.size());
    // A payload changed in the body fails its checksum as a mapped one would.
    body->file[static_cast<std::size_t>(r.extent(1).offset)] ^= 1;
    CHECK_THROWS_WITH_AS(r.record(1), doctest::Contains("checksum"), Error);
    // A tail that does not reach the index start is refused, not misread.
    Bytes short_tail(tail.begin() + 150, tail.end());
    CHECK_THROWS_AS(ShardReader(body->file.size(), short_tail, body), Error);
    // A trailer that lies about the file size is refused.
    CHECK_THROWS_AS(ShardReader(body->file.size() + 1, tail, body), Error);
    CHECK_THROWS_AS(ShardReader(50, Bytes(tail.end() - 50, tail.end()), body), Error);
  }
}
