// Damaged shards: every flipped byte and every truncation is caught
// (spec/format.md §6, §9), with the error the spec names, never a crash.
#include "l3/format/shard.hpp"
#include "test_format_util.hpp"

using namespace l3;
using namespace l3::test;

namespace {

constexpr std::size_t kHeader = 32, kTrailer = 64;

// A small shard with labels, keys, metadata and an empty payload.
Bytes small_shard(IndexEncoding enc) {
  auto path = fresh_dir("damage_src") / "s.l3s";
  ShardWriter w(path, {enc});
  w.append(bytes_of("alpha payload"), 3, "a/one.png", bytes_of("m1"));
  w.append({}, kNoLabel, "b/two.png");
  w.append(bytes_of("gamma"), 0, "", bytes_of("meta"));
  w.finalize();
  return read_file(path);
}

errc open_error(const Bytes& b) {
  return error_of([&] { ShardReader r(b); });
}

std::size_t index_offset(const Bytes& b) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | b[b.size() - kTrailer + static_cast<std::size_t>(i)];
  return static_cast<std::size_t>(v);
}

}  // namespace

TEST_CASE("a flipped payload byte is caught on read and by verify, not on open") {
  for (auto enc : {IndexEncoding::raw, IndexEncoding::zstd}) {
    Bytes good = small_shard(enc);
    ShardReader clean(good);
    for (std::size_t at = kHeader; at < index_offset(good); ++at) {
      CAPTURE(at);
      Bytes bad = good;
      bad[at] ^= 0x40;
      ShardReader r(bad);  // the index is intact: open succeeds
      std::uint64_t hit = 0;
      while (hit < r.size() && error_of([&] { (void)r.record(hit); }) == errc::ok) ++hit;
      REQUIRE(hit < r.size());
      CHECK(error_of([&] { r.verify(hit); }) == errc::checksum_mismatch);
      CHECK(error_of([&] { r.verify_all(); }) == errc::checksum_mismatch);
      CHECK(error_of([&] { (void)r.record(hit, Verify::no); }) == errc::ok);  // the cheap path skips the check
      CHECK(r.record(hit, Verify::no).payload.size() == clean.record(hit).payload.size());
    }
  }
}

TEST_CASE("a flipped byte in the header, index or trailer is rejected on open") {
  for (auto enc : {IndexEncoding::raw, IndexEncoding::zstd}) {
    Bytes good = small_shard(enc);
    const std::size_t index_at = index_offset(good), trailer_at = good.size() - kTrailer;
    for (std::size_t at = 0; at < good.size(); ++at) {
      if (at >= kHeader && at < index_at) continue;  // payloads: previous test
      CAPTURE(at);
      Bytes bad = good;
      bad[at] ^= 0x01;
      errc want = at < 8                 ? errc::bad_magic
                  : at < 10              ? errc::unsupported_version
                  : at < kHeader         ? errc::reserved_bits_set
                  : at < trailer_at      ? errc::checksum_mismatch  // index hash
                  : at < trailer_at + 56 ? errc::checksum_mismatch  // trailer hash
                                         : errc::truncated;         // trailer magic gone
      CHECK(open_error(bad) == want);
    }
  }
}

TEST_CASE("a shard truncated at every byte position is rejected as truncated") {
  for (auto enc : {IndexEncoding::raw, IndexEncoding::zstd}) {
    Bytes good = small_shard(enc);
    for (std::size_t size = 0; size < good.size(); ++size) {
      CAPTURE(size);
      Bytes cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(size));
      CHECK(open_error(cut) == errc::truncated);
    }
    CHECK(open_error(good) == errc::ok);
  }
}

TEST_CASE("error messages name what is wrong and the file") {
  auto path = fresh_dir("messages") / "cut.l3s";
  Bytes good = small_shard(IndexEncoding::raw);
  write_file(path, Bytes(good.begin(), good.end() - 1));
  try {
    ShardReader r(path);
    FAIL("a truncated shard opened");
  } catch (const Error& e) {
    std::string what = e.what();
    CHECK(what.find("truncated") == 0);
    CHECK(what.find("trailer") != std::string::npos);
    CHECK(what.find("cut.l3s") != std::string::npos);
  }
}
