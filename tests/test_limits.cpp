// Limits (spec/limits.md): every size an untrusted file declares is checked
// against the configured limits, and against the bytes actually present,
// before anything proportional to it is allocated. A replacement operator new
// records the largest single allocation made while a check runs.
#include <doctest/doctest.h>
#include <zstd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <new>
#include <string>
#include <vector>

#include "l3/codec/codec.hpp"
#include "l3/imageio/image_io.hpp"
#include "l3/format/shard.hpp"
#include "l3/codec/tile_core.hpp"
#include "test_util.hpp"
#include "layout.hpp"  // format/src: the shard byte layout, to craft trailers

namespace {
std::atomic<bool> g_tracking{false};
std::atomic<std::size_t> g_largest{0};
}  // namespace

void* operator new(std::size_t n) {
  if (g_tracking.load(std::memory_order_relaxed)) {
    std::size_t cur = g_largest.load();
    while (n > cur && !g_largest.compare_exchange_weak(cur, n)) {}
  }
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace {

using l3::test::Bytes;
using l3::test::read_file;
namespace L = l3::shard_layout;
constexpr std::size_t kMiB = std::size_t{1} << 20;

// Runs f, returns the errc it threw (ok when none) and the largest allocation.
template <class F> std::pair<l3::errc, std::size_t> measure(F&& f) {
  g_largest = 0;
  g_tracking = true;
  struct Stop {
    ~Stop() { g_tracking = false; }
  } stop;  // other exceptions propagate (and fail the test)
  l3::errc code = l3::errc::ok;
  try {
    f();
  } catch (const l3::Error& e) {
    code = e.code();
  } catch (const std::bad_alloc&) {
    code = l3::errc::out_of_memory;
  }
  return {code, g_largest.load()};
}

void put_u32(Bytes& b, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(std::uint8_t(v >> (8 * i)));
}

// An .l3i header (spec/codec.md §2), taken from a real encode so that it
// follows the format's current header layout, with the fields patched.
Bytes header(std::uint32_t w, std::uint32_t h, std::uint8_t channels, std::uint8_t tw_log2, std::uint8_t th) {
  const std::uint8_t px[4] = {};
  Bytes b = l3::encode(l3::ImageView{px, 1, 1, channels, 0});
  b.resize(l3::core::kHeaderSize);
  b[5] = channels;
  for (int i = 0; i < 4; ++i) {
    b[8 + i] = std::uint8_t(w >> (8 * i));
    b[12 + i] = std::uint8_t(h >> (8 * i));
  }
  b[16] = tw_log2;
  b[17] = th;
  return b;
}

// A valid stream of constant tiles: the largest expansion the format allows.
Bytes constant_image(std::uint32_t w, std::uint32_t h, std::uint8_t channels) {
  Bytes b = header(w, h, channels, 8, 32);
  const std::uint32_t tiles = ((w + 255) / 256) * ((h + 31) / 32);
  for (std::uint32_t i = 0; i < tiles; ++i) put_u32(b, 1u + channels);
  for (std::uint32_t i = 0; i < tiles; ++i) {
    b.push_back(1);
    for (std::uint8_t c = 0; c < channels; ++c) b.push_back(std::uint8_t(40 + c));
  }
  return b;
}

l3::Limits big_limits() {
  l3::Limits lim;
  lim.max_width = 0xFFFFFFFFu;
  lim.max_height = 0xFFFFFFFFu;
  lim.max_pixels = ~std::uint64_t{0};
  return lim;
}

}  // namespace

TEST_CASE("limits: a header-only stream claiming 65535x65535 is rejected without allocating") {
  const Bytes bomb = header(65535, 65535, 4, 8, 32);
  const auto t0 = std::chrono::steady_clock::now();
  // Default limits: 65535^2 pixels exceed max_pixels (2^30).
  auto [code, largest] = measure([&] { l3::decode(bomb); });
  CHECK(code == l3::errc::limit_exceeded);
  CHECK(largest < kMiB);
  // Limits raised to allow it: the tile table is missing, so it is truncated.
  l3::DecodeOptions opt;
  opt.limits = big_limits();
  std::tie(code, largest) = measure([&] { l3::decode(bomb, nullptr, opt); });
  CHECK(code == l3::errc::truncated);
  CHECK(largest < kMiB);
  std::tie(code, largest) = measure([&] { l3::read_info(bomb, opt.limits); });
  CHECK(code == l3::errc::truncated);
  CHECK(largest < kMiB);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));
}

// tests/crashers/FINDINGS.md F3: on f38be1e, with limits raised to 2^32 - 1,
// a width near 2^32 overflowed the u32 tile count (tiles_x = (width +
// tile_width - 1) >> log2), the header-only stream parsed as an image with no
// tiles and decode() threw std::length_error. Fixed in 8088ef3 (64-bit tile
// counts, more than 2^32 - 1 tiles is limit_exceeded).
TEST_CASE("limits: the largest u32 dimensions give an l3::Error") {
  l3::DecodeOptions opt;
  opt.limits = big_limits();
  for (std::uint8_t tw_log2 : {std::uint8_t{4}, std::uint8_t{8}})
    for (std::uint8_t th : {std::uint8_t{1}, std::uint8_t{32}}) {
      CAPTURE(int(tw_log2));
      CAPTURE(int(th));
      for (std::uint32_t h : {1u, 0xFFFFFFFFu}) {
        CAPTURE(h);
        const Bytes huge = header(0xFFFFFFFFu, h, 4, tw_log2, th);
        auto [code, largest] = measure([&] { l3::decode(huge, nullptr, opt); });
        CHECK((code == l3::errc::limit_exceeded || code == l3::errc::truncated));  // an l3::Error, no std:: one
        CHECK(largest < kMiB);
        std::tie(code, largest) = measure([&] {
          const l3::ImageInfo info = l3::read_info(huge, opt.limits);
          CHECK(std::uint64_t{info.tiles_x} * info.tile_width >= info.width);
        });
        CHECK((code == l3::errc::limit_exceeded || code == l3::errc::truncated));
      }
    }
}

TEST_CASE("limits: tile-table truncation and oversize tiles are found before pixels are allocated") {
  l3::DecodeOptions opt;
  opt.limits = big_limits();
  // 65535x65535 with 256x32 tiles: 256 x 2048 tiles, a 2 MiB table. Give half of it.
  Bytes partial = header(65535, 65535, 3, 8, 32);
  for (int i = 0; i < 256 * 1024; ++i) put_u32(partial, 4);
  auto [code, largest] = measure([&] { l3::decode(partial, nullptr, opt); });
  CHECK(code == l3::errc::truncated);
  CHECK(largest < 4 * kMiB);
  // A full table whose tiles claim 4 GiB each: the payload is missing.
  Bytes table = header(65535, 65535, 3, 8, 32);
  for (int i = 0; i < 256 * 2048; ++i) put_u32(table, 0xFFFFFFFFu);
  std::tie(code, largest) = measure([&] { l3::decode(table, nullptr, opt); });
  CHECK(code == l3::errc::truncated);
  CHECK(largest < 8 * kMiB);  // the table itself (offsets + sizes), never the 12 GiB of pixels
  std::tie(code, largest) = measure([&] {
    std::vector<std::uint8_t> out(16 * 16 * 3);
    l3::decode_region(table, l3::Rect{0, 0, 16, 16}, l3::MutableImageView{out.data(), 16, 16, 3, 0}, opt);
  });
  CHECK(code == l3::errc::truncated);
  CHECK(largest < 8 * kMiB);
}

TEST_CASE("limits: max_width, max_height and max_pixels are exact bounds") {
  const Bytes img = constant_image(300, 40, 2);
  l3::Limits lim;
  lim.max_width = 300;
  lim.max_height = 40;
  lim.max_pixels = 300 * 40;
  CHECK(l3::read_info(img, lim).width == 300);
  l3::DecodeOptions opt;
  opt.limits = lim;
  opt.verify_checksum = false;  // constant_image() leaves the stream checksum zero
  CHECK(l3::decode(img, nullptr, opt).size() == 300 * 40 * 2);
  auto rejects = [&](l3::Limits l) {
    opt.limits = l;
    auto [code, largest] = measure([&] { l3::decode(img, nullptr, opt); });
    CHECK(code == l3::errc::limit_exceeded);
    CHECK(largest < 4096);
    CHECK_THROWS_AS(l3::read_info(img, l), l3::Error);
  };
  l3::Limits l = lim;
  l.max_width = 299;
  rejects(l);
  l = lim;
  l.max_height = 39;
  rejects(l);
  l = lim;
  l.max_pixels = 300 * 40 - 1;
  rejects(l);
}

TEST_CASE("limits: constant tiles expand at most 256*32*channels / (5 + channels) times, within max_pixels") {
  // 4096x4096 RGBA from about 20 KB: valid, so max_pixels is what bounds it.
  const Bytes img = constant_image(4096, 4096, 4);
  CHECK(img.size() < 32 * 1024);
  l3::DecodeOptions opt;
  opt.verify_checksum = false;  // constant_image() leaves the stream checksum zero
  opt.limits.max_pixels = std::uint64_t{1} << 20;
  auto [code, largest] = measure([&] { l3::decode(img, nullptr, opt); });
  CHECK(code == l3::errc::limit_exceeded);
  CHECK(largest < kMiB);
  opt.limits.max_pixels = std::uint64_t{1} << 24;
  std::tie(code, largest) = measure([&] { l3::decode(img, nullptr, opt); });
  CHECK(code == l3::errc::ok);
  CHECK(largest == std::size_t{4096} * 4096 * 4);  // exactly the output
}

namespace {

// A shard of 3 records: payload 100 bytes, key 5 bytes, metadata 7 bytes.
Bytes small_shard(l3::IndexEncoding enc) {
  const auto path = std::filesystem::temp_directory_path() / "l3_test_limits.l3s";
  l3::ShardWriterOptions o;
  o.index_encoding = enc;
  l3::ShardWriter w(path, o);
  const Bytes payload(100, 7), meta(7, 1);
  for (int i = 0; i < 3; ++i) w.append(payload, i, std::string("key-") + char('a' + i), meta);
  w.finalize();
  Bytes b = read_file(path);
  std::filesystem::remove(path);
  return b;
}

void rehash_trailer(Bytes& f) {
  std::uint8_t* t = f.data() + f.size() - L::kTrailerSize;
  L::store_le<std::uint64_t>(t + L::kTrHash, l3::xxh3_64({t, L::kTrHash}));
}

l3::errc open_error(const Bytes& f, const l3::ShardLimits& lim) {
  return l3::test::error_of([&] { l3::ShardReader(Bytes(f), lim).verify_all(); });
}

}  // namespace

TEST_CASE("limits: every ShardLimits field is an exact bound on open") {
  for (auto enc : {l3::IndexEncoding::raw, l3::IndexEncoding::zstd}) {
    const Bytes f = small_shard(enc);
    l3::ShardLimits at;
    at.max_record_size = 100;
    at.max_records = 3;
    at.max_index_size = 3 * 48 + 3 * (5 + 7);
    at.max_key_size = 5;
    at.max_metadata_size = 7;
    CHECK(open_error(f, at) == l3::errc::ok);
    l3::ShardLimits l = at;
    l.max_record_size = 99;
    CHECK(open_error(f, l) == l3::errc::limit_exceeded);
    l = at;
    l.max_records = 2;
    CHECK(open_error(f, l) == l3::errc::limit_exceeded);
    l = at;
    l.max_index_size = at.max_index_size - 1;
    CHECK(open_error(f, l) == l3::errc::limit_exceeded);
    l = at;
    l.max_key_size = 4;
    CHECK(open_error(f, l) == l3::errc::limit_exceeded);
    l = at;
    l.max_metadata_size = 6;
    CHECK(open_error(f, l) == l3::errc::limit_exceeded);
  }
}

TEST_CASE("limits: the writer refuses what its limits would make a reader reject") {
  const auto path = std::filesystem::temp_directory_path() / "l3_test_limits_w.l3s";
  l3::ShardWriterOptions o;
  o.limits.max_record_size = 10;
  o.limits.max_key_size = 3;
  o.limits.max_metadata_size = 2;
  o.limits.max_records = 1;
  l3::ShardWriter w(path, o);
  const Bytes eleven(11, 0), ten(10, 0), three(3, 0);
  CHECK_THROWS_AS(w.append(eleven), l3::Error);
  CHECK_THROWS_AS(w.append(ten, 0, "long"), l3::Error);
  CHECK_THROWS_AS(w.append(ten, 0, "", three), l3::Error);
  CHECK(w.append(ten, 0, "abc", Bytes(2, 0)) == 0);
  try {
    w.append(ten);
    FAIL("a second record passed max_records = 1");
  } catch (const l3::Error& e) {
    CHECK(e.code() == l3::errc::limit_exceeded);
  }
}

TEST_CASE("limits: a zstd index that claims a huge decoded size is rejected before allocating it") {
  // tests/crashers/FINDINGS.md F1: the reader allocated index_size bytes (up to
  // max_index_size, 1 GiB by default) before decompressing a frame that
  // declares far fewer.
  Bytes f = small_shard(l3::IndexEncoding::zstd);
  std::uint8_t* t = f.data() + f.size() - L::kTrailerSize;
  L::store_le<std::uint64_t>(t + L::kTrIndexSize, std::uint64_t{1} << 30);
  rehash_trailer(f);
  auto [code, largest] = measure([&] { l3::ShardReader r{Bytes(f)}; });
  CHECK(code == l3::errc::corrupt_index);
  CHECK(largest < 2 * f.size() + kMiB);
}

TEST_CASE("limits: shard record counts and index sizes are checked before allocation") {
  // Every committed must-reject shard vector opens (fails) without any large allocation.
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(L3_SOURCE_DIR) / "spec/vectors/shard")) {
    if (e.path().extension() != ".l3s") continue;
    CAPTURE(e.path().filename().string());
    auto [code, largest] = measure([&] { l3::ShardReader r(e.path()); });
    CHECK(largest < kMiB);
  }
}

namespace {

std::uint32_t crc32(const std::uint8_t* p, std::size_t n) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1)));
  }
  return ~c;
}

void put_u32be(Bytes& b, std::uint32_t v) {
  for (int i = 3; i >= 0; --i) b.push_back(std::uint8_t(v >> (8 * i)));
}

Bytes png_header_only(std::uint32_t w, std::uint32_t h) {
  Bytes b = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
  Bytes ihdr = {'I', 'H', 'D', 'R'};
  put_u32be(ihdr, w);
  put_u32be(ihdr, h);
  ihdr.insert(ihdr.end(), {8, 6, 0, 0, 0});  // 8-bit RGBA
  put_u32be(b, 13);
  b.insert(b.end(), ihdr.begin(), ihdr.end());
  put_u32be(b, crc32(ihdr.data(), ihdr.size()));
  // An empty IDAT: libpng stops reading the header there.
  const std::uint8_t idat[] = {'I', 'D', 'A', 'T'};
  put_u32be(b, 0);
  b.insert(b.end(), idat, idat + 4);
  put_u32be(b, crc32(idat, 4));
  return b;
}

}  // namespace

TEST_CASE("limits: image files claiming huge dimensions are rejected by LoadOptions limits before allocating") {
  l3::LoadOptions opt;
  opt.limits.max_pixels = std::uint64_t{1} << 20;
  const Bytes png = png_header_only(65535, 65535);
  auto [code, largest] = measure([&] { l3::decode_image_bytes(png, opt); });
  CHECK(code == l3::errc::limit_exceeded);
  CHECK(largest < kMiB);
  const std::string pnm = "P6\n65535 65535\n255\n";
  std::tie(code, largest) = measure([&] { l3::decode_image_bytes({reinterpret_cast<const std::uint8_t*>(pnm.data()), pnm.size()}, opt); });
  CHECK(code == l3::errc::limit_exceeded);
  CHECK(largest < kMiB);
}

TEST_CASE("limits: a binary PNM header without its samples is truncated, not a large allocation") {
  // tests/crashers/FINDINGS.md F2: within the limits, a 20-byte P6 header made
  // the loader allocate width*height*3 bytes before checking the data is there.
  l3::LoadOptions opt;
  opt.limits.max_width = 8192;
  opt.limits.max_height = 8192;
  opt.limits.max_pixels = std::uint64_t{1} << 26;
  const std::string pnm = "P6\n8192 8192\n255\n";
  auto [code, largest] = measure([&] { l3::decode_image_bytes({reinterpret_cast<const std::uint8_t*>(pnm.data()), pnm.size()}, opt); });
  CHECK(code == l3::errc::truncated);
  CHECK(largest < kMiB);
}
