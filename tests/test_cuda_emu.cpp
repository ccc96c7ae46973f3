// The GPU decomposition run on the CPU (l3_cuda_emu) against the codec's CPU
// decoder, bit for bit: random and structured images, the sample photos,
// crops, batches, and corrupted streams (same status as l3::decode, and no
// out-of-bounds access: the sanitizer build checks that).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "l3/codec/codec.hpp"
#include "l3/cuda/emulation.hpp"
#include "l3/cuda/wavefront.hpp"
#include "l3/imageio/image_io.hpp"
#include "l3/codec/symbols.hpp"
#include "l3/codec/tile_core.hpp"
#include "test_coded_tiles.hpp"
#include "test_tile_pattern.hpp"
#include "test_util.hpp"

namespace {

using Pixels = std::vector<std::uint8_t>;
namespace emu = l3::cuda::emu;

struct Img {
  std::uint32_t w, h, ch;
  Pixels px;
  l3::ImageView view() const { return {px.data(), w, h, ch, 0}; }
};

// A mix of smooth content and noise, so the encoder picks coded tiles with
// every predictor and transform, and some raw tiles.
Img random_image(std::mt19937& rng, std::uint32_t w, std::uint32_t h, std::uint32_t ch) {
  Img im{w, h, ch, Pixels(std::size_t(w) * h * ch)};
  std::uniform_int_distribution<int> byte(0, 255);
  const int style = std::uniform_int_distribution<int>(0, 3)(rng);
  const int noise = std::uniform_int_distribution<int>(0, 40)(rng);
  const int fx = byte(rng) % 7 + 1, fy = byte(rng) % 5 + 1;
  for (std::uint32_t y = 0; y < h; ++y)
    for (std::uint32_t x = 0; x < w; ++x)
      for (std::uint32_t c = 0; c < ch; ++c) {
        int v = 0;
        switch (style) {
          case 0: v = byte(rng); break;                                          // noise
          case 1: v = int((x * fx + y * fy + c * 40) & 255); break;              // ramps
          case 2: v = int(128 + 60 * ((x / 9 + y / 5 + c) % 3) - 60); break;     // blocks
          default: v = int((x * fx) ^ (y * fy)) + int(c * 13); break;            // texture
        }
        if (noise && style) v += std::uniform_int_distribution<int>(-noise, noise)(rng) / 4;
        im.px[(std::size_t(y) * w + x) * ch + c] = std::uint8_t(std::clamp(v, 0, 255));
      }
  return im;
}

// Flat, gradients, stripes, label masks: constant tiles and the zero-run mode.
Img structured_image(int kind, std::uint32_t w, std::uint32_t h, std::uint32_t ch) {
  Img im{w, h, ch, Pixels(std::size_t(w) * h * ch)};
  for (std::uint32_t y = 0; y < h; ++y)
    for (std::uint32_t x = 0; x < w; ++x)
      for (std::uint32_t c = 0; c < ch; ++c) {
        int v = 0;
        switch (kind) {
          case 0: v = 77 + int(c); break;                                    // flat
          case 1: v = int((x * 255) / std::max(1u, w - 1)); break;           // horizontal gradient
          case 2: v = int((y * 3 + x) & 255); break;                         // diagonal gradient
          case 3: v = ((x / 4) % 2) ? 255 : 0; break;                        // vertical stripes
          case 4: v = ((y / 3) % 2) ? 200 : 10; break;                       // horizontal stripes
          default: {                                                         // label mask: discs
            const int dx = int(x) - int(w) / 3, dy = int(y) - int(h) / 2;
            const int ex = int(x) - 2 * int(w) / 3;
            v = dx * dx + dy * dy < int(w * w / 25) ? 1 : (ex * ex + dy * dy < int(w * w / 30) ? 2 : 0);
            if (c == 3) v = 255;
          }
        }
        im.px[(std::size_t(y) * w + x) * ch + c] = std::uint8_t(v);
      }
  return im;
}

// Adds 1 to a sample where a seeded LCG's top bits above `shift` are zero
// (1 in 4 samples for 30, 1 in 8 for 29): rANS tiles pay on such images.
Img with_rare_noise(Img im, std::uint32_t seed, int shift) {
  for (auto& v : im.px) v = std::uint8_t(v + ((seed = seed * 1664525u + 1013904223u) >> shift == 0 ? 1 : 0));
  return im;
}

// Rows the encoder stores as zero rows (spec §4.3): a mid-gray row every 32,
// rows that repeat the row above (also every third row when `more`), each
// 32-row tile's last row among them.
Img with_zero_rows(Img im, bool more = false) {
  const std::size_t row = std::size_t(im.w) * im.ch;
  for (std::uint32_t y = 0; y < im.h; ++y) {
    std::uint8_t* p = &im.px[y * row];
    if (y % 32 == 0) std::memset(p, 128, row);
    else if (y % 5 == 1 || y % 7 == 4 || (more && y % 3 == 2) || y % 32 == 31) std::memcpy(p, p - row, row);
  }
  return im;
}

// Decodes with both decoders and checks pixels (or the error) are equal.
void check_same(const std::vector<std::uint8_t>& enc, const std::string& what) {
  INFO(what);
  l3::ImageInfo info;
  Pixels ref;
  l3::errc ref_err = l3::errc::ok;
  try {
    ref = l3::decode(enc, &info);
  } catch (const l3::Error& e) {
    ref_err = e.code();
  }
  if (ref_err != l3::errc::ok) {
    l3::errc got = l3::errc::ok;
    try {
      l3::ImageInfo i2 = l3::read_info(enc);
      Pixels out(i2.decoded_size());
      emu::decode_image_wavefront(enc, {out.data(), i2.width, i2.height, i2.channels, 0});
    } catch (const l3::Error& e) {
      got = e.code();
    }
    CHECK(static_cast<int>(got) == static_cast<int>(ref_err));
    return;
  }
  Pixels out(ref.size(), 0xAB);
  if (l3::wavefront::kNarrowRing && l3::test::has_ring_source_tiles(enc)) {
    // The narrow-ring variant (test_cuda_emu_narrow) cannot hold these tiles'
    // sources: it must say so, never decode other pixels.
    CHECK_THROWS_WITH_AS(emu::decode_image_wavefront(enc, {out.data(), info.width, info.height, info.channels, 0}),
                         doctest::Contains("unsupported"), l3::Error);
    return;
  }
  REQUIRE_NOTHROW(emu::decode_image_wavefront(enc, {out.data(), info.width, info.height, info.channels, 0}));
  CHECK(out == ref);
}

// check_same on every codec vector (spec/vectors/codec/) whose file name
// `wanted` accepts, valid or not; returns how many.
template <class Wanted> int check_vectors(Wanted&& wanted) {
  const std::filesystem::path dir = std::filesystem::path(L3_SOURCE_DIR) / "spec" / "vectors" / "codec";
  int vectors = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() != ".l3i" || !wanted(name)) continue;
    check_same(l3::test::read_file(entry.path()), name);
    ++vectors;
  }
  return vectors;
}

// newest: the newest version the stream may have (6: without version 7's
// plane contexts, version 8's residual corrections and so on), for the tests that
// count the streams of an older version by their version. In the narrow-ring
// build (test_cuda_emu_narrow) without pixel copies and bilevel planes, which
// it reports as unsupported ("the narrow ring ..." below): every other case
// then runs its copy-out.
std::vector<std::uint8_t> enc(const Img& im, std::uint32_t tw, std::uint32_t th, int effort = 1,
                              bool entropy_coding = true, int newest = l3::core::kVersion) {
  l3::EncodeOptions o;
  o.tile_width = tw;
  o.tile_height = th;
  o.effort = effort;
  o.entropy_coding = entropy_coding;
  o.plane_contexts = newest >= l3::core::kVersionPlaneContext;
  o.corrections = newest >= l3::core::kVersionCorrections;
  o.compact_tables = newest >= l3::core::kVersionCompactTables;
  o.row_masks = newest >= l3::core::kVersionRowMasks;
  o.pixel_copies = !l3::wavefront::kNarrowRing;
  o.bilevel = newest >= l3::core::kVersionBilevel && !l3::wavefront::kNarrowRing;
  o.diagonals = newest >= l3::core::kVersionMirror;
  o.bilevel_templates = newest >= l3::core::kVersionBitPlanes;
  o.ramps = newest >= l3::core::kVersionRamps;
  o.symbols = newest >= l3::core::kVersionSymbols;
  return l3::encode(im.view(), o);
}

std::string shape(const Img& im, std::uint32_t tw, std::uint32_t th) {
  return std::to_string(im.w) + "x" + std::to_string(im.h) + "x" + std::to_string(im.ch) + " tile " +
         std::to_string(tw) + "x" + std::to_string(th);
}

// Crop of a decoded image.
Pixels crop_of(const Pixels& full, std::uint32_t w, std::uint32_t ch, const l3::Rect& r) {
  Pixels out;
  for (std::uint32_t y = r.y; y < r.y + r.height; ++y) {
    const auto* row = full.data() + (std::size_t(y) * w + r.x) * ch;
    out.insert(out.end(), row, row + std::size_t(r.width) * ch);
  }
  return out;
}

// `count` random crops of the stream decoded by the emulation equal the crops of l3::decode's image.
void check_random_crops(const std::vector<std::uint8_t>& e, const Img& im, std::mt19937& rng, int count) {
  const Pixels full = l3::decode(e);
  for (int k = 0; k < count; ++k) {
    l3::Rect r;
    r.x = std::uniform_int_distribution<std::uint32_t>(0, im.w - 1)(rng);
    r.y = std::uniform_int_distribution<std::uint32_t>(0, im.h - 1)(rng);
    r.width = std::uniform_int_distribution<std::uint32_t>(1, im.w - r.x)(rng);
    r.height = std::uniform_int_distribution<std::uint32_t>(1, im.h - r.y)(rng);
    INFO("crop " << r.x << "," << r.y << " " << r.width << "x" << r.height << " ch " << im.ch);
    Pixels got(std::size_t(r.width) * r.height * im.ch, 0x33);
    emu::decode_region_wavefront(e, r, {got.data(), r.width, r.height, im.ch, 0});
    CHECK(got == crop_of(full, im.w, im.ch, r));
  }
}

// The streams decoded as one emulated batch, whole: every image ok and equal
// to l3::decode's, but those that `refused` names, which must be
// errc::unsupported (the narrow-ring build's, test_cuda_emu_narrow).
void check_whole_batch(const std::vector<std::vector<std::uint8_t>>& streams,
                       const std::function<bool(std::size_t)>& refused = nullptr) {
  std::vector<l3::cuda::HostImage> batch;
  for (const auto& s : streams) batch.push_back({s, std::nullopt});
  const emu::BatchOutput out = emu::decode_batch(batch, l3::cuda::BatchOptions{});
  REQUIRE(out.slots.size() == streams.size());
  for (std::size_t i = 0; i < streams.size(); ++i) {
    INFO("image " << i);
    const l3::cuda::ImageSlot& s = out.slots[i];
    if (refused && refused(i)) {
      CHECK(s.status == l3::errc::unsupported);
      continue;
    }
    CHECK(s.status == l3::errc::ok);
    CHECK(Pixels(out.pixels.begin() + std::ptrdiff_t(s.offset), out.pixels.begin() + std::ptrdiff_t(s.offset + s.size)) ==
          l3::decode(streams[i]));
  }
}

// The streams' crops `rects` decoded as one emulated batch in `layout`:
// every image ok and equal to l3::decode's crop (planes apart in CHW).
void check_batch_of_crops(const std::vector<std::vector<std::uint8_t>>& streams, const std::vector<Img>& images,
                          const std::vector<l3::Rect>& rects, l3::cuda::Layout layout) {
  std::vector<l3::cuda::HostImage> batch;
  for (std::size_t i = 0; i < streams.size(); ++i) batch.push_back({streams[i], rects[i]});
  l3::cuda::BatchOptions opt;
  opt.layout = layout;
  const emu::BatchOutput out = emu::decode_batch(batch, opt);
  REQUIRE(out.slots.size() == streams.size());
  for (std::size_t i = 0; i < streams.size(); ++i) {
    INFO("image " << i << (layout == l3::cuda::Layout::chw ? " chw" : " hwc"));
    const l3::Rect& r = rects[i];
    const std::uint32_t ch = images[i].ch;
    const Pixels hwc = crop_of(l3::decode(streams[i]), images[i].w, ch, r);
    Pixels expect = hwc;
    if (layout == l3::cuda::Layout::chw) {
      const std::size_t plane = std::size_t(r.width) * r.height;
      for (std::size_t p = 0; p < plane; ++p)
        for (std::uint32_t c = 0; c < ch; ++c) expect[c * plane + p] = hwc[p * ch + c];
    }
    const l3::cuda::ImageSlot& s = out.slots[i];
    CHECK(s.status == l3::errc::ok);
    REQUIRE(s.size == expect.size());
    CHECK(Pixels(out.pixels.begin() + std::ptrdiff_t(s.offset), out.pixels.begin() + std::ptrdiff_t(s.offset + s.size)) ==
          expect);
  }
}

}  // namespace

TEST_CASE("emulated wavefront equals l3::decode on random images") {
  std::mt19937 rng(1234);
  const std::uint32_t tws[] = {16, 32, 64, 128, 256};
  const std::uint32_t ths[] = {1, 7, 32};
  // Odd sizes: 1x1, 1xN, Nx1, around tile multiples.
  const std::pair<std::uint32_t, std::uint32_t> sizes[] = {
      {1, 1}, {1, 37}, {41, 1}, {15, 7}, {16, 32}, {17, 33}, {31, 8}, {33, 65}, {63, 31}, {64, 64}, {65, 97}, {129, 40}, {257, 33}};
  int n = 0;
  for (std::uint32_t ch = 1; ch <= 4; ++ch)
    for (auto [w, h] : sizes) {
      const Img im = random_image(rng, w, h, ch);
      const std::uint32_t tw = tws[n % 5], th = ths[(n / 5 + n) % 3];
      ++n;
      check_same(enc(im, tw, th), shape(im, tw, th));
      check_same(enc(im, tws[(n + 2) % 5], 32, 0), shape(im, tws[(n + 2) % 5], 32) + " effort 0");
    }
  // Every tile width and height on one size that is not a tile multiple.
  for (std::uint32_t tw : tws)
    for (std::uint32_t th : ths) {
      const Img im = random_image(rng, 300, 70, 3);
      check_same(enc(im, tw, th), shape(im, tw, th));
    }
}

TEST_CASE("emulated wavefront equals l3::decode on structured images") {
  for (int kind = 0; kind < 6; ++kind)
    for (std::uint32_t ch = 1; ch <= 4; ++ch) {
      const Img im = structured_image(kind, 200, 75, ch);
      for (std::uint32_t th : {1u, 7u, 32u}) check_same(enc(im, 64, th), "kind " + std::to_string(kind) + " " + shape(im, 64, th));
      check_same(enc(im, 256, 32), "kind " + std::to_string(kind) + " " + shape(im, 256, 32));
    }
}

TEST_CASE("emulated wavefront equals l3::decode on entropy-coded tiles (spec/codec.md §4.5, §7.4)") {
  // Images the encoder codes with rANS tiles (version 3), and every codec
  // vector of them, valid or not (same pixels or same error).
  int ans_streams = 0;
  for (int kind = 1; kind < 6; ++kind)
    for (std::uint32_t ch = 1; ch <= 4; ++ch) {
      const Img im = with_rare_noise(structured_image(kind, 300, 70, ch), 7, 30);
      for (std::uint32_t th : {5u, 32u}) {
        // Effort 2 entropy-codes every tile where that is smaller (effort 1
        // only where it saves 10%: EncodeOptions::entropy_min_saving_percent).
        const auto e = enc(im, 128, th, 2, true, 6);
        ans_streams += l3::read_info(e).version == 3;
        check_same(e, "kind " + std::to_string(kind) + " with noise " + shape(im, 128, th));
      }
    }
  MESSAGE(ans_streams << " of 40 streams have entropy-coded tiles");
  CHECK(ans_streams >= 20);
  CHECK(check_vectors([](const std::string& name) {
          return name.rfind("ans-", 0) == 0 || name.find("-ans-") != std::string::npos;
        }) >= 12);
}

TEST_CASE("emulated wavefront equals l3::decode on zero rows (spec/codec.md §4.3, version 4)") {
  // Rows that repeat the row above and mid-gray first rows: empty row streams
  // in Rice-coded, entropy-coded and palette tiles; whole images, crops, and
  // the zero-row vectors (valid, and version 3 streams that must fail).
  std::mt19937 rng(321);
  int v4 = 0;
  for (int kind = 1; kind < 6; ++kind)
    for (std::uint32_t ch = 1; ch <= 4; ++ch) {
      const Img im = with_zero_rows(with_rare_noise(structured_image(kind, 150, 70, ch), 11, 29));
      for (int effort : {1, 2}) {
        const auto e = enc(im, 64, 32, effort, true, 6);
        v4 += l3::read_info(e).version == 4;
        check_same(e, "kind " + std::to_string(kind) + " zero rows " + shape(im, 64, 32));
        check_random_crops(e, im, rng, 6);
      }
    }
  MESSAGE(v4 << " of 40 streams have zero rows");
  CHECK(v4 >= 30);
  CHECK(check_vectors([](const std::string& name) { return name.find("zero-") != std::string::npos; }) >= 6);
}

TEST_CASE("emulated wavefront equals l3::decode on zero-row bitmaps (spec/codec.md §4.3, version 10)") {
  // The zero-row images above at the encoder's defaults: the lanes find
  // their rows' lengths through the bitmap (core::row_length_of).
  std::mt19937 rng(322);
  int v10 = 0;
  for (int kind = 1; kind < 6; ++kind)
    for (std::uint32_t ch = 1; ch <= 4; ++ch) {
      const Img im = with_zero_rows(with_rare_noise(structured_image(kind, 150, 70, ch), 11, 29), true);
      for (int effort : {1, 2}) {
        const auto e = enc(im, 64, 32, effort);
        v10 += l3::read_info(e).version == 10;
        check_same(e, "kind " + std::to_string(kind) + " zero-row bitmaps " + shape(im, 64, 32));
        check_random_crops(e, im, rng, 6);
      }
    }
  MESSAGE(v10 << " of 40 streams have zero-row bitmaps");
  CHECK(v10 >= 30);
}

// A two-colour image of test_tile_pattern.hpp (fill_two_colours).
static Img two_colour_image(int kind, std::uint32_t w, std::uint32_t h, std::uint32_t ch, std::uint32_t seed) {
  Img im{w, h, ch, Pixels(std::size_t(w) * h * ch)};
  l3::test::fill_two_colours(im.px.data(), w, h, ch, kind, seed);
  return im;
}

TEST_CASE("frequency tables (spec/codec.md §4.5) are read inside the tile only") {
  // An entropy-coded tile whose bytes end right after a token's exponent
  // e = 1 (a frequency without mantissa bits): table A = 2, e0 = 4 with 3
  // mantissa bits, e1 = 1, exactly 16 bits. The frequencies do not sum to
  // 4096: corrupt_tile, without reading the byte after the tile (the heap
  // buffer ends there: ASan checks it in CI).
  const std::vector<std::uint8_t> tile = {0x40, 0x00, 0x82, 0x10};
  l3::core::CodedTileParams t;
  CHECK(l3::core::parse_coded_tile(tile.data(), std::uint32_t(tile.size()), 16, 1, 1, 3, t) == l3::core::kCorruptTile);
  // In a version 2 stream the mode bit is reserved.
  CHECK(l3::core::parse_coded_tile(tile.data(), std::uint32_t(tile.size()), 16, 1, 1, 2, t) == l3::core::kReservedBits);
}

TEST_CASE("emulated wavefront equals l3::decode on the sample photos") {
  const std::filesystem::path dir = std::filesystem::path(L3_SOURCE_DIR) / "bench" / "sample";
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const auto ext = entry.path().extension().string();
    if (ext != ".png" && ext != ".jpg") continue;
    const l3::Image img = l3::load_image(entry.path());
    Img im{img.width, img.height, img.channels, img.pixels};
    check_same(enc(im, 0, 0), entry.path().filename().string());
    // The same pixels as opaque RGBA and as gray stored as RGB: constant
    // planes (spec/codec.md §4.3) in the wavefront.
    if (im.ch == 3) {
      Img rgba{im.w, im.h, 4, Pixels(std::size_t(im.w) * im.h * 4)}, gray3{im.w, im.h, 3, Pixels(im.px.size())};
      for (std::size_t i = 0; i < std::size_t(im.w) * im.h; ++i) {
        std::memcpy(&rgba.px[4 * i], &im.px[3 * i], 3);
        rgba.px[4 * i + 3] = 255;
        std::memset(&gray3.px[3 * i], im.px[3 * i + 1], 3);
      }
      check_same(enc(rgba, 0, 0), entry.path().filename().string() + " as opaque RGBA");
      check_same(enc(gray3, 0, 0), entry.path().filename().string() + " green as gray RGB");
    }
    // A crop of each photo against decode_region.
    const auto e = enc(im, 0, 0);
    const l3::Rect r{im.w / 5 + 3, im.h / 3 + 1, im.w / 2, im.h / 3};
    Pixels ref(std::size_t(r.width) * r.height * im.ch), got(ref.size(), 0x55);
    l3::decode_region(e, r, {ref.data(), r.width, r.height, im.ch, 0});
    emu::decode_region_wavefront(e, r, {got.data(), r.width, r.height, im.ch, 0});
    CHECK(got == ref);
    ++count;
  }
  CHECK(count >= 3);
}

TEST_CASE("emulated wavefront equals l3::decode on tile copies (spec/codec.md §3.3, version 5)") {
  // Periodic images whose tiles repeat (clipped edge tiles among them), alone
  // and as the later images of a batch (a copy's source is found by the
  // image's own tile index), whole and cropped; and the tile-copy vectors.
  std::mt19937 rng(555);
  std::vector<std::vector<std::uint8_t>> streams;
  std::vector<Img> imgs;
  for (std::uint32_t ch = 1; ch <= 4; ++ch) {
    Img im{150, 70, ch, Pixels(std::size_t(150) * 70 * ch)};
    for (std::uint32_t y = 0; y < im.h; ++y)
      for (std::uint32_t x = 0; x < im.w; ++x)
        for (std::uint32_t c = 0; c < ch; ++c)
          im.px[(std::size_t(y) * im.w + x) * ch + c] = l3::test::periodic_32x8(x, y, c);
    const auto e = enc(im, 32, 8, 1, true, 6);
    CHECK(l3::read_info(e).version == 5);
    check_same(e, "tile copies " + shape(im, 32, 8));
    check_random_crops(e, im, rng, 6);
    imgs.push_back(random_image(rng, 40, 30, ch));  // no copies, before each periodic image
    streams.push_back(enc(imgs.back(), 16, 8));
    imgs.push_back(im);
    streams.push_back(e);
  }
  check_whole_batch(streams);
  CHECK(check_vectors([](const std::string& name) { return name.find("tile-cop") != std::string::npos; }) >= 7);
}

TEST_CASE("emulated crops equal l3::decode_region") {
  std::mt19937 rng(99);
  for (std::uint32_t ch = 1; ch <= 4; ++ch) {
    const Img im = random_image(rng, 150, 90, ch);
    const Img st = structured_image(int(ch) + 1, 150, 90, ch);
    for (const Img* src : {&im, &st}) {
      const auto e = enc(*src, 32, 7);
      const Pixels full = l3::decode(e);
      for (int k = 0; k < 25; ++k) {
        l3::Rect r;
        r.x = std::uniform_int_distribution<std::uint32_t>(0, src->w - 1)(rng);
        r.y = std::uniform_int_distribution<std::uint32_t>(0, src->h - 1)(rng);
        r.width = std::uniform_int_distribution<std::uint32_t>(1, src->w - r.x)(rng);
        r.height = std::uniform_int_distribution<std::uint32_t>(1, src->h - r.y)(rng);
        if (k == 0) r = {0, 0, src->w, src->h};
        if (k == 1) r = {32, 7, 32, 7};  // exactly one tile
        if (k == 2) r = {src->w - 1, src->h - 1, 1, 1};
        INFO("crop " << r.x << "," << r.y << " " << r.width << "x" << r.height << " ch " << ch);
        Pixels got(std::size_t(r.width) * r.height * ch, 0x33);
        emu::decode_region_wavefront(e, r, {got.data(), r.width, r.height, ch, 0});
        CHECK(got == crop_of(full, src->w, ch, r));
      }
    }
  }
  // A crop outside the image is rejected like decode_region does.
  const Img im = random_image(rng, 40, 40, 3);
  const auto e = enc(im, 16, 8);
  Pixels buf(40 * 40 * 3);
  CHECK_THROWS_AS(emu::decode_region_wavefront(e, {30, 0, 11, 5}, {buf.data(), 11, 5, 3, 0}), l3::Error);
}

TEST_CASE("a batch: mixed sizes, layouts, crops and a corrupt image") {
  std::mt19937 rng(7);
  std::vector<std::vector<std::uint8_t>> streams;
  std::vector<Img> imgs;
  for (int i = 0; i < 9; ++i) {
    const std::uint32_t ch = std::uint32_t(i % 4) + 1;
    imgs.push_back(i % 3 ? random_image(rng, 20 + 17 * std::uint32_t(i), 9 + 11 * std::uint32_t(i), ch)
                         : structured_image(i, 70, 45, ch));
    streams.push_back(enc(imgs.back(), i % 2 ? 16 : 64, i % 2 ? 7 : 32));
  }
  // Image 4: damaged tile payload; image 6: truncated; image 7: not an image.
  streams[4][streams[4].size() - 3] ^= 0x5a;
  streams[6].resize(streams[6].size() - 1);
  streams[7] = {1, 2, 3};
  for (auto layout : {l3::cuda::Layout::hwc, l3::cuda::Layout::chw}) {
    std::vector<l3::cuda::HostImage> batch;
    for (std::size_t i = 0; i < streams.size(); ++i) {
      l3::cuda::HostImage h{streams[i], std::nullopt};
      if (i == 2) h.crop = l3::Rect{3, 2, imgs[i].w - 5, imgs[i].h - 4};
      if (i == 8) h.crop = l3::Rect{imgs[i].w, 0, 1, 1};  // outside: rejected
      batch.push_back(h);
    }
    l3::cuda::BatchOptions opt;
    opt.layout = layout;
    const emu::BatchOutput out = emu::decode_batch(batch, opt);
    REQUIRE(out.slots.size() == streams.size());
    std::uint64_t offset = 0;
    for (std::size_t i = 0; i < streams.size(); ++i) {
      INFO("image " << i << (layout == l3::cuda::Layout::chw ? " chw" : " hwc"));
      const l3::cuda::ImageSlot& s = out.slots[i];
      CHECK(s.offset == offset);
      offset += s.size;
      l3::errc want = l3::errc::ok;
      Pixels ref;
      try {
        ref = l3::decode(streams[i]);
      } catch (const l3::Error& e) {
        want = e.code();
      }
      if (i == 8) want = l3::errc::out_of_range;
      CHECK(static_cast<int>(s.status) == static_cast<int>(want));
      if (i == 4 || i == 6 || i == 7 || i == 8) CHECK(s.status != l3::errc::ok);
      if (want != l3::errc::ok) continue;
      l3::Rect r{0, 0, imgs[i].w, imgs[i].h};
      if (batch[i].crop) r = *batch[i].crop;
      Pixels hwc = crop_of(ref, imgs[i].w, imgs[i].ch, r);
      Pixels expect = hwc;
      if (layout == l3::cuda::Layout::chw) {
        const std::size_t plane = std::size_t(r.width) * r.height;
        for (std::size_t p = 0; p < plane; ++p)
          for (std::uint32_t c = 0; c < imgs[i].ch; ++c) expect[c * plane + p] = hwc[p * imgs[i].ch + c];
      }
      REQUIRE(s.size == expect.size());
      CHECK(Pixels(out.pixels.begin() + std::ptrdiff_t(s.offset), out.pixels.begin() + std::ptrdiff_t(s.offset + s.size)) ==
            expect);
    }
    CHECK(offset == out.pixels.size());
  }
}

// A (damaged) stream through l3::decode and the emulated batch: the same
// status, and the same pixels where it decodes. Returns l3::decode's status
// and whether the batch's differed.
struct StatusPair {
  l3::errc want;
  bool mismatch;
};
StatusPair same_status_as_decode(const std::vector<std::uint8_t>& e, const l3::DecodeOptions& dopt,
                                 const l3::cuda::BatchOptions& bopt) {
  l3::errc want = l3::errc::ok;
  Pixels ref;
  try {
    ref = l3::decode(e, nullptr, dopt);
  } catch (const l3::Error& ex) {
    want = ex.code();
  }
  // The batch path: the corrupt image's status, and no access outside it.
  l3::cuda::HostImage h{e, std::nullopt};
  const emu::BatchOutput out = emu::decode_batch(std::span<const l3::cuda::HostImage>(&h, 1), bopt);
  CHECK(static_cast<int>(out.slots[0].status) == static_cast<int>(want));
  if (want == l3::errc::ok) CHECK(out.pixels == ref);  // an undetected flip: the same pixels
  return {want, out.slots[0].status != want};
}

// `count` damaged copies of `streams` (taken in turn, 1-3 bit flips past
// the header and tile table's first bytes, checksums off so that every flip
// reaches the tile code) through same_status_as_decode; returns how many
// l3::decode rejected.
int damaged_same_status_as_decode(const std::vector<std::vector<std::uint8_t>>& streams, std::mt19937& rng, int count) {
  l3::DecodeOptions dopt;
  dopt.verify_checksum = false;
  l3::cuda::BatchOptions bopt;
  bopt.verify_checksum = false;
  int rejected = 0;
  for (int k = 0; k < count; ++k) {
    auto e = streams[std::size_t(k) % streams.size()];
    for (int f = 0; f < 1 + k % 3; ++f) {
      const std::size_t at = std::uniform_int_distribution<std::size_t>(60, e.size() - 1)(rng);
      e[at] ^= std::uint8_t(1u << std::uniform_int_distribution<int>(0, 7)(rng));
    }
    const auto [want, mismatch] = same_status_as_decode(e, dopt, bopt);
    CHECK(!mismatch);
    rejected += want != l3::errc::ok;
  }
  return rejected;
}

TEST_CASE("corrupted streams: same status as l3::decode, never out of bounds") {
  std::mt19937 rng(4242);
  std::vector<std::vector<std::uint8_t>> bases;
  for (std::uint32_t ch = 1; ch <= 4; ++ch) {
    bases.push_back(enc(random_image(rng, 97, 45, ch), 32, 7));
    bases.push_back(enc(structured_image(int(ch) + 1, 80, 40, ch), 16, 32));
  }
  // With the checksum verified almost every flip is caught before decoding;
  // without it the damaged tiles reach the wavefront code.
  for (const bool verify : {true, false}) {
    l3::DecodeOptions dopt;
    dopt.verify_checksum = verify;
    l3::cuda::BatchOptions bopt;
    bopt.verify_checksum = verify;
    int mismatches = 0, rejected = 0, total = 0, tile_errors = 0;
    for (const auto& base : bases) {
      for (int k = 0; k < 60; ++k) {
        auto e = base;
        const int flips = 1 + k % 3;
        for (int f = 0; f < flips; ++f) {
          // Mostly in the tile payload, sometimes in the header and table.
          const std::size_t lo = k % 5 == 0 ? 0 : std::min<std::size_t>(e.size() - 1, 40);
          const std::size_t at = std::uniform_int_distribution<std::size_t>(lo, e.size() - 1)(rng);
          e[at] ^= std::uint8_t(1u << std::uniform_int_distribution<int>(0, 7)(rng));
        }
        if (k % 7 == 3) e.resize(std::uniform_int_distribution<std::size_t>(0, e.size() - 1)(rng));
        ++total;
        const auto [want, mismatch] = same_status_as_decode(e, dopt, bopt);
        mismatches += mismatch;
        rejected += want != l3::errc::ok;
        tile_errors += want == l3::errc::corrupt_tile || want == l3::errc::truncated || want == l3::errc::reserved_bits_set;
        // A crop of the damaged stream against decode_region.
        l3::ImageInfo info;
        try {
          info = l3::read_info(e);
        } catch (const l3::Error&) {
          continue;  // header unreadable: covered above
        }
        const l3::Rect r{info.width / 3, info.height / 4, info.width / 2 + 1, info.height / 2 + 1};
        Pixels a(std::size_t(r.width) * r.height * info.channels), b(a.size());
        l3::errc wa = l3::errc::ok, wb = l3::errc::ok;
        try { l3::decode_region(e, r, {a.data(), r.width, r.height, info.channels, 0}, dopt); } catch (const l3::Error& ex) { wa = ex.code(); }
        try { emu::decode_region_wavefront(e, r, {b.data(), r.width, r.height, info.channels, 0}, dopt); } catch (const l3::Error& ex) { wb = ex.code(); }
        CHECK(static_cast<int>(wa) == static_cast<int>(wb));
        if (wa == l3::errc::ok) CHECK(a == b);
      }
    }
    MESSAGE(std::string(verify ? "checksum on: " : "checksum off: ") << rejected << " of " << total << " damaged streams rejected, "
                                                         << tile_errors << " by tile decoding");
    CHECK(rejected > total / 2);  // the damage is real
    if (!verify) CHECK(tile_errors > total / 4);  // and reaches the tile code
    CHECK(mismatches == 0);
  }
}

TEST_CASE("emulated wavefront equals l3::decode on bilevel planes (spec/codec.md §6.8, version 11)") {
  // The lanes read WW from their own registers and NN by a shuffle
  // (wavefront_coded); damaged bilevel streams fail as l3::decode fails.
  std::mt19937 rng(611);
  int v11 = 0;
  std::vector<std::vector<std::uint8_t>> streams;
  for (int kind = 0; kind < 3; ++kind)
    for (std::uint32_t ch = 1; ch <= 4; ++ch) {
      const Img im = two_colour_image(kind, 170, 75, ch, 40 + ch);
      for (const auto& [tw, th, effort] : {std::tuple{64u, 32u, 1}, std::tuple{256u, 32u, 2}, std::tuple{32u, 7u, 1}}) {
        const auto e = enc(im, tw, th, effort, true, l3::core::kVersionBilevel);
        v11 += l3::read_info(e).version == 11;
        check_same(e, "kind " + std::to_string(kind) + " bilevel " + shape(im, tw, th));
        check_random_crops(e, im, rng, 4);
        if (l3::read_info(e).version == 11) streams.push_back(e);
      }
    }
  MESSAGE(v11 << " of 36 streams have bilevel planes");
  CHECK(v11 >= 24);  // 27 when written
  const int rejected = damaged_same_status_as_decode(streams, rng, 150);
  MESSAGE(rejected << " of 150 damaged bilevel streams rejected");
  CHECK(rejected > 50);
}

TEST_CASE("emulated wavefront equals l3::decode on mirrored tiles and NW planes (spec/codec.md §4.7, version 12)") {
  // A mirrored tile decodes as a coded one through a task whose pixel stride
  // is negative (mirrored_task): whole, cropped (its columns decode right to
  // left), in an HWC and a CHW batch, and damaged (the same status as
  // l3::decode).
  std::mt19937 rng(612);
  int mirrored = 0, nw = 0;
  std::vector<std::vector<std::uint8_t>> streams;
  std::vector<Img> images;
  for (const bool anti : {false, true})
    for (std::uint32_t ch = 1; ch <= 4; ++ch) {
      Img im{170, 75, ch, Pixels(std::size_t(170) * 75 * ch)};
      l3::test::fill_diagonal(im.px.data(), im.w, im.h, ch, anti, 50 + ch);
      for (const auto& [tw, th, effort] : {std::tuple{64u, 32u, 1}, std::tuple{256u, 32u, 2}, std::tuple{32u, 7u, 1}}) {
        const auto e = enc(im, tw, th, effort);
        const l3::test::DiagonalTiles d = l3::test::diagonal_tiles(e);
        mirrored += d.mirrored > 0;
        nw += d.nw_planes > 0;
        check_same(e, std::string(anti ? "x - y " : "x + y ") + shape(im, tw, th));
        check_random_crops(e, im, rng, 6);
        if (d.mirrored + d.nw_planes > 0) streams.push_back(e), images.push_back(im);
      }
    }
  MESSAGE(mirrored << " of 24 streams have mirrored tiles, " << nw << " NW planes");
  CHECK(mirrored >= 9);  // 12 when written
  CHECK(nw >= 18);       // 24 when written
  std::vector<l3::Rect> rects;
  for (std::size_t i = 0; i < streams.size(); ++i)
    rects.push_back({std::uint32_t(i * 7 % 60), std::uint32_t(i % 5), 100 - std::uint32_t(i % 9), 60});
  for (auto layout : {l3::cuda::Layout::hwc, l3::cuda::Layout::chw}) check_batch_of_crops(streams, images, rects, layout);
  CHECK(check_vectors([](const std::string& name) {
          return name.find("mirrored") != std::string::npos || name.find("nw-predictor") != std::string::npos ||
                 name == "plane-byte-7.l3i";
        }) >= 6);
  const int rejected = damaged_same_status_as_decode(streams, rng, 150);
  MESSAGE(rejected << " of 150 damaged streams with mirrored tiles or NW planes rejected");
  CHECK(rejected > 50);
}

TEST_CASE("emulated wavefront equals l3::decode on ramps (spec/codec.md §6.9, version 14)") {
  // A lane adds its pixel's ramps on the way to the inverse transform
  // (ramped_pixel): whole, cropped, mirrored (the decoded tile's columns),
  // in an HWC and a CHW batch, and damaged (the same status as l3::decode).
  std::mt19937 rng(714);
  int ramped = 0;
  std::vector<std::vector<std::uint8_t>> streams;
  std::vector<Img> images;
  for (const bool noise : {false, true})
    for (std::uint32_t ch = 1; ch <= 4; ++ch) {
      Img im{170, 75, ch, Pixels(std::size_t(170) * 75 * ch)};
      l3::test::fill_ramps(im.px.data(), im.w, im.h, ch, noise, 60 + ch);
      for (const auto& [tw, th, effort] : {std::tuple{64u, 32u, 1}, std::tuple{256u, 32u, 2}, std::tuple{32u, 7u, 1}}) {
        const auto e = enc(im, tw, th, effort);
        const int n = l3::test::planes_with_ramps(e);
        ramped += n > 0;
        check_same(e, std::string(noise ? "noisy ramps " : "ramps ") + shape(im, tw, th));
        check_random_crops(e, im, rng, 6);
        if (n > 0) streams.push_back(e), images.push_back(im);
      }
    }
  MESSAGE(ramped << " of 24 streams have ramps");
  CHECK(ramped >= 14);  // 16 when written
  std::vector<l3::Rect> rects;
  for (std::size_t i = 0; i < streams.size(); ++i)
    rects.push_back({std::uint32_t(i * 7 % 60), std::uint32_t(i % 5), 100 - std::uint32_t(i % 9), 60});
  for (auto layout : {l3::cuda::Layout::hwc, l3::cuda::Layout::chw}) check_batch_of_crops(streams, images, rects, layout);
  CHECK(check_vectors([](const std::string& name) { return name.find("ramp") != std::string::npos; }) >= 7);
  const int rejected = damaged_same_status_as_decode(streams, rng, 150);
  MESSAGE(rejected << " of 150 damaged streams with ramps rejected");
  CHECK(rejected > 30);
}

TEST_CASE("emulated wavefront equals l3::decode on symbols (spec/codec.md §3.4, version 15)") {
  // The dictionary decodes as one more image of the batch and a warp a
  // page places its patches (patch_image) after the tiles: whole, cropped,
  // in HWC and CHW batches beside images without symbols, and damaged
  // anywhere or in the section itself (the same status as l3::decode).
  std::mt19937 rng(715);
  int with_symbols = 0;
  std::vector<std::vector<std::uint8_t>> streams;
  std::vector<Img> images;
  for (std::uint32_t ch = 1; ch <= 4; ++ch) {
    Img im{300, 140, ch, Pixels(std::size_t(300) * 140 * ch)};
    l3::test::fill_symbol_page(im.px.data(), im.w, im.h, ch, 70 + ch);
    for (const auto& [tw, th, effort] : {std::tuple{64u, 32u, 1}, std::tuple{256u, 32u, 2}, std::tuple{32u, 7u, 1}}) {
      const auto e = enc(im, tw, th, effort);
      const bool has = l3::read_info(e).symbol_patches > 0;
      with_symbols += has;
      check_same(e, "symbol page " + shape(im, tw, th));
      check_random_crops(e, im, rng, 6);
      if (has) streams.push_back(e), images.push_back(im);
    }
    // Without symbols, in the same batch.
    Img other{97, 45, ch, Pixels(std::size_t(97) * 45 * ch)};
    l3::test::fill_ramps(other.px.data(), other.w, other.h, ch, true, ch);
    streams.push_back(enc(other, 32, 7)), images.push_back(other);
  }
  MESSAGE(with_symbols << " of 12 streams have symbols");
  CHECK(with_symbols >= 10);  // 12 when written
  check_whole_batch(streams);
  std::vector<l3::Rect> rects;
  for (std::size_t i = 0; i < streams.size(); ++i)
    rects.push_back({std::uint32_t(i * 7 % 40), std::uint32_t(i % 5), images[i].w - 40, images[i].h - 5});
  for (auto layout : {l3::cuda::Layout::hwc, l3::cuda::Layout::chw}) check_batch_of_crops(streams, images, rects, layout);
  CHECK(check_vectors([](const std::string& name) {
          return name.find("symbol") != std::string::npos || name.find("patch") != std::string::npos ||
                 name.find("dictionary") != std::string::npos;
        }) >= 11);
  const int rejected = damaged_same_status_as_decode(streams, rng, 150);
  MESSAGE(rejected << " of 150 damaged streams with symbols rejected");
  CHECK(rejected > 30);
  l3::DecodeOptions dopt;
  dopt.verify_checksum = false;
  l3::cuda::BatchOptions bopt;
  bopt.verify_checksum = false;
  int section_rejected = 0, section_total = 0;
  for (const auto& e : streams) {
    const std::size_t from = l3::test::tiles_end(e);
    for (std::size_t at = from; at < e.size(); at += 1 + (e.size() - from) / 64, ++section_total) {
      auto damaged = e;
      damaged[at] ^= std::uint8_t(1u << (at % 8));
      const auto [want, mismatch] = same_status_as_decode(damaged, dopt, bopt);
      CHECK(!mismatch);
      section_rejected += want != l3::errc::ok;
    }
  }
  MESSAGE(section_rejected << " of " << section_total << " flips in the symbol section rejected");
  CHECK(section_rejected > section_total / 4);
}

TEST_CASE("emulated wavefront equals l3::decode on bit planes and templates (spec/codec.md §6.8, version 13)") {
  // A lane reads its template pixels' indices from the output ring, written
  // at earlier steps (wavefront_coded): ordered dithers of 1-4 channels (2
  // to 16 colours a tile, the template 8 to the left and 8 up) and
  // two-colour images whose estimate picks another template; whole, cropped,
  // in a CHW batch, and damaged (the same status as l3::decode).
  std::mt19937 rng(613);
  int v13 = 0;
  std::vector<std::vector<std::uint8_t>> streams;
  std::vector<Img> images;
  for (int kind = 0; kind < 2; ++kind)
    for (std::uint32_t ch = 1; ch <= 4; ++ch) {
      Img im = two_colour_image(kind, 170, 75, ch, 60 + ch);
      if (kind == 1) l3::test::fill_ordered_dither(im.px.data(), im.w, im.h, ch, 70 + ch);
      for (const auto& [tw, th, effort] : {std::tuple{64u, 32u, 1}, std::tuple{256u, 32u, 2}, std::tuple{32u, 7u, 1}}) {
        const auto e = enc(im, tw, th, effort);
        const bool is_v13 = l3::read_info(e).version == l3::core::kVersionBitPlanes;
        v13 += is_v13;
        check_same(e, std::string(kind ? "dither " : "two colours ") + shape(im, tw, th));
        check_random_crops(e, im, rng, 6);
        if (is_v13) streams.push_back(e), images.push_back(im);
      }
    }
  MESSAGE(v13 << " of 24 streams have bit planes or templates");
  CHECK(v13 >= 12);
  std::vector<l3::Rect> rects;
  for (std::size_t i = 0; i < streams.size(); ++i)
    rects.push_back({std::uint32_t(i * 11 % 70), std::uint32_t(i % 7), 90 - std::uint32_t(i % 13), 60});
  check_batch_of_crops(streams, images, rects, l3::cuda::Layout::chw);
  CHECK(check_vectors([](const std::string& name) {
          return name.find("bitplanes") != std::string::npos || name.find("template") != std::string::npos ||
                 name == "bilevel-index-past-palette.l3i";
        }) >= 8);
  const int rejected = damaged_same_status_as_decode(streams, rng, 150);
  MESSAGE(rejected << " of 150 damaged streams with bit planes or templates rejected");
  CHECK(rejected > 50);
}

TEST_CASE("emulated wavefront equals l3::decode on pixel copies (spec/codec.md §6.6, version 6)") {
  // Text-like images (copies from the ring: the same row and the rows above),
  // palette tiles (whose ring holds indices) and transformed ones, whole,
  // cropped (a copy may carry a pixel from outside the crop), in a batch, and
  // damaged (the same status as l3::decode); and the pixel-copy vectors.
  std::mt19937 rng(606);
  std::vector<std::vector<std::uint8_t>> streams;
  int with_copies = 0, palette_copies = 0;
  // Palette tiles with copies in a stream (their ring holds indices).
  auto palette_copy_tiles = [](const std::vector<std::uint8_t>& e) {
    const l3::ImageInfo info = l3::read_info(e);
    const std::uint32_t tiles = info.tiles_x * info.tiles_y;
    std::size_t at = l3::core::kHeaderSize + 4 * std::size_t(tiles);
    int n = 0;
    for (std::uint32_t i = 0; i < tiles; ++i) {
      std::uint32_t entry;
      std::memcpy(&entry, &e[l3::core::kHeaderSize + 4 * std::size_t(i)], 4);
      if (l3::core::is_tile_copy(entry, info.version)) continue;
      const std::uint8_t mode = e[at];
      n += (mode & 3) == l3::core::kTileCoded && (mode & l3::core::kModeCopies) && (mode & l3::core::kModePalette);
      at += entry;
    }
    return n;
  };
  for (std::uint32_t ch = 1; ch <= 4; ++ch)
    for (const bool colourful : {false, true}) {
      Img im{300, 70, ch, Pixels(std::size_t(300) * 70 * ch)};
      l3::test::fill_glyph_text(im.px.data(), im.w, im.h, ch, ch + 7, colourful);
      for (int effort : {1, 2}) {
        const auto e = enc(im, 128, 32, effort, true, 6);
        with_copies += l3::read_info(e).version == 6;
        palette_copies += palette_copy_tiles(e);
        check_same(e, "pixel copies " + shape(im, 128, 32) + (colourful ? " varied" : " flat"));
        check_random_crops(e, im, rng, 6);
        streams.push_back(e);
      }
    }
  MESSAGE(with_copies << " of 16 streams have pixel copies, " << palette_copies << " palette tiles with copies");
  CHECK(with_copies >= 8);
  CHECK(palette_copies > 0);
  check_whole_batch(streams);
  // Damaged tiles with copies: every flip reaches the tile code (no checksum).
  const int rejected = damaged_same_status_as_decode(streams, rng, 240);
  MESSAGE(rejected << " of 240 damaged streams with pixel copies rejected");
  CHECK(rejected > 120);
  CHECK(check_vectors([](const std::string& name) { return name.find("pixel-cop") != std::string::npos; }) >= 11);
}

TEST_CASE("tiles with pixel copies or bilevel planes: decoded, or unsupported in the narrow-ring build") {
  // Their sources lie up to 63 columns back in the output ring (spec/cuda.md
  // §2): the narrow-ring build (kernel variant narrow-ring-24, 48 columns)
  // must reject such an image, alone in its batch, and never write other
  // pixels; every other build decodes it as l3::decode does.
  Img text{300, 70, 3, Pixels(std::size_t(300) * 70 * 3)};
  l3::test::fill_glyph_text(text.px.data(), text.w, text.h, text.ch, 9, true);
  l3::EncodeOptions o;  // the defaults: copies and bilevel planes allowed whatever the build
  o.tile_width = 128;
  o.tile_height = 32;
  const std::vector<std::vector<std::uint8_t>> streams = {
      l3::encode(text.view(), o), enc(structured_image(2, 300, 70, 3), 128, 32),
      l3::encode(two_colour_image(0, 170, 75, 1, 41).view(), o)};
  int copies = 0;
  for (const auto& [tile, t] : l3::test::coded_tiles(streams[0])) copies += t.copies;
  REQUIRE(copies > 0);
  REQUIRE(!l3::test::has_ring_source_tiles(streams[1]));
  REQUIRE(l3::test::bilevel_tiles(streams[2]).tiles > 0);
  check_whole_batch(streams, [](std::size_t i) { return l3::wavefront::kNarrowRing && i != 1; });
  for (std::size_t i = 0; i < streams.size(); ++i) check_same(streams[i], "image " + std::to_string(i));
}

TEST_CASE("emulated wavefront equals l3::decode on plane contexts (spec/codec.md §6.2, version 7)") {
  // Planes that err together (test_tile_pattern.hpp), 2-4 channels, Rice-
  // and entropy-coded tiles, whole, cropped, in a batch and damaged (the same
  // status as l3::decode); and the plane-context vectors.
  std::mt19937 rng(707);
  std::vector<std::vector<std::uint8_t>> streams;
  int v7 = 0, planes_with_context = 0;
  for (std::uint32_t ch = 2; ch <= 4; ++ch) {
    Img im{300, 70, ch, Pixels(std::size_t(300) * 70 * ch)};
    l3::test::fill_shared_noise(im.px.data(), im.w, im.h, ch, ch);
    for (const bool entropy_coding : {true, false})
      for (int effort : {1, 2}) {
        const auto e = enc(im, 128, 32, effort, entropy_coding, l3::core::kVersionPlaneContext);
        v7 += l3::read_info(e).version == 7;
        planes_with_context += l3::test::planes_with_previous_code(e);
        check_same(e, "plane contexts " + shape(im, 128, 32) + (entropy_coding ? " rANS" : " Rice"));
        check_random_crops(e, im, rng, 6);
        streams.push_back(e);
      }
  }
  MESSAGE(v7 << " of 12 streams have plane contexts, " << planes_with_context << " tile planes");
  CHECK(v7 == 12);
  check_whole_batch(streams);
  const int rejected = damaged_same_status_as_decode(streams, rng, 240);
  MESSAGE(rejected << " of 240 damaged streams with plane contexts rejected");
  CHECK(rejected > 120);
  CHECK(check_vectors([](const std::string& name) { return name.find("plane-context") != std::string::npos; }) >= 4);
}

TEST_CASE("emulated wavefront equals l3::decode on residual corrections (spec/codec.md §6.7, version 8)") {
  // Stepped ramps (test_tile_pattern.hpp), 1-4 channels, Rice- and
  // entropy-coded tiles, effort 1 and 2, whole, cropped, in a batch and
  // damaged (the same status as l3::decode); and the corrections' vectors.
  std::mt19937 rng(808);
  std::vector<std::vector<std::uint8_t>> streams;
  int v8 = 0, corrected_planes = 0;
  for (std::uint32_t ch = 1; ch <= 4; ++ch) {
    Img im{300, 70, ch, Pixels(std::size_t(300) * 70 * ch)};
    l3::test::fill_stepped_ramps(im.px.data(), im.w, im.h, ch, ch);
    for (const bool entropy_coding : {true, false})
      for (int effort : {1, 2}) {
        const auto e = enc(im, 128, 32, effort, entropy_coding, l3::core::kVersionCorrections);
        v8 += l3::read_info(e).version == 8;
        corrected_planes += l3::test::planes_with_corrections(e);
        check_same(e, "corrections " + shape(im, 128, 32) + (entropy_coding ? " rANS" : " Rice"));
        check_random_crops(e, im, rng, 6);
        streams.push_back(e);
      }
  }
  MESSAGE(v8 << " of 16 streams have residual corrections, " << corrected_planes << " tile planes");
  CHECK(v8 == 16);
  check_whole_batch(streams);
  const int rejected = damaged_same_status_as_decode(streams, rng, 240);
  MESSAGE(rejected << " of 240 damaged streams with residual corrections rejected");
  CHECK(rejected > 120);
  CHECK(check_vectors([](const std::string& name) { return name.find("corrections") != std::string::npos; }) >= 9);
}

TEST_CASE("tiles up to 256x32 of 1-4 planes, Rice- and entropy-coded (the CPU decoder's lanes): same pixels and status as the emulation") {
  // l3::decode takes decode_lanes.hpp's passes 1 and 2 for the coded tiles
  // of these images where l3::cpu_decode_path() is "avx512" or "avx2" (ctest
  // runs this suite again with L3_MAX_ISA=avx2 for the AVX2 lanes on an
  // AVX-512 machine, and with L3_FORCE_SCALAR=1 for the scalar loops): whole
  // tiles and the partial ones at the right and bottom; gray, gray + alpha,
  // RGB and RGBA planes, palette tiles (the stripes and discs), constant
  // planes (opaque alpha).
  MESSAGE("cpu_decode_path: " << std::string(l3::cpu_decode_path()));
  struct Base {
    std::vector<std::uint8_t> bytes;
    int damage_rounds;
  };
  std::vector<Base> bases;
  int ans_streams = 0;
  for (const std::uint32_t ch : {3u, 1u, 2u, 4u})
    for (const bool entropy_coding : {true, false})
      for (int kind = 1; kind < 6; ++kind) {
        Img im = with_rare_noise(structured_image(kind, 520, 70, ch), 7, 30);
        const bool opaque = ch == 4 && kind % 2 == 0;
        if (opaque)
          for (std::size_t i = 3; i < im.px.size(); i += 4) im.px[i] = 255;
        const auto e = enc(im, 256, 32, 2, entropy_coding);
        ans_streams += l3::read_info(e).version >= 3 && entropy_coding;
        check_same(e, std::string(entropy_coding ? "rANS" : "Rice") + " kind " + std::to_string(kind) +
                          (opaque ? " opaque" : "") + " with noise " + shape(im, 256, 32));
        bases.push_back({e, ch == 3 ? 40 : 10});
      }
  CHECK(ans_streams >= 16);
  std::mt19937 rng(77);
  l3::DecodeOptions dopt;
  dopt.verify_checksum = false;  // let the damage reach the tiles
  l3::cuda::BatchOptions bopt;
  bopt.verify_checksum = false;
  int rejected = 0, total = 0;
  for (const auto& base : bases)
    for (int k = 0; k < base.damage_rounds; ++k) {
      auto e = base.bytes;
      for (int f = 0; f < 1 + k % 3; ++f) {
        const std::size_t at = std::uniform_int_distribution<std::size_t>(std::min<std::size_t>(e.size() - 1, 200), e.size() - 1)(rng);
        e[at] ^= std::uint8_t(1u << std::uniform_int_distribution<int>(0, 7)(rng));
      }
      ++total;
      rejected += same_status_as_decode(e, dopt, bopt).want != l3::errc::ok;
    }
  MESSAGE(rejected << " of " << total << " damaged streams rejected");
  CHECK(rejected > total / 2);
}

// The wavefront's reader (core::WordReader: aligned words, the tail byte by
// byte) against the CPU decoders' (core::BitReader): the same bits and bits
// consumed at every alignment and stream length, with reads of 0-32 bits
// (after a refill, as ans_read_select and read_rice do) up to 12 bytes past
// the end (zeros), and lane_end's refill at any point. Each stream ends its
// own heap block and starts 3 to 6 bytes into it (every alignment), so
// AddressSanitizer sees any read outside [begin - 3, end).
TEST_CASE("WordReader reads BitReader's bits at every alignment, never outside the stream") {
  namespace core = l3::core;
  std::mt19937 rng(5);
  for (int trial = 0; trial < 3000; ++trial) {
    const std::size_t skip = 3 + std::size_t(trial % 4), len = std::size_t(rng() % 40);
    std::vector<std::uint8_t> block(skip + len);
    for (auto& b : block) b = static_cast<std::uint8_t>(rng());
    const std::uint8_t* begin = block.data() + skip;
    core::BitReader want;
    core::WordReader got;
    want.init(begin, begin + len);
    got.init(begin, begin + len);
    CAPTURE(trial);
    CAPTURE(len);
    for (std::uint64_t used = 0; used < 8 * (len + 12);) {
      const int bits = int(rng() % 33);
      if (want.avail < 32) want.refill();
      if (got.avail < 32) got.refill();
      REQUIRE(got.avail >= 32);
      const std::uint64_t mask = bits ? ~std::uint64_t{0} << (64 - bits) : 0;
      CHECK((got.buf & mask) == (want.buf & mask));
      want.consume(bits);
      got.consume(bits);
      used += std::uint64_t(bits);
      REQUIRE(got.consumed_bits(begin) == used);
      REQUIRE(want.consumed_bits(begin) == used);
      if (rng() % 8 == 0) {  // lane_end's refill: no bits consumed, the next 8 visible
        want.refill();
        got.refill();
        REQUIRE(got.consumed_bits(begin) == used);
        CHECK((got.buf >> 56) == (want.buf >> 56));
      }
    }
  }
}

// core::read_rice (32-bit reads of the buffer's top) against spec/codec.md
// §7.2's symbols written bit by bit here: every k in 0..kMaxK, values of
// 0..1023 (escapes among them), through both readers, ending at the
// stream's end so that the last symbols are read with zeros supplied past it.
TEST_CASE("read_rice decodes the symbols of spec section 7.2 through both readers") {
  namespace core = l3::core;
  std::mt19937 rng(17);
  int escapes = 0;
  for (int trial = 0; trial < 600; ++trial) {
    std::vector<std::uint8_t> bytes;
    std::uint64_t nbits = 0;
    auto put = [&](std::uint32_t v, int n) {  // n bits of v, MSB first
      for (int i = n - 1; i >= 0; --i, ++nbits) {
        if (nbits % 8 == 0) bytes.push_back(0);
        bytes.back() |= std::uint8_t(((v >> i) & 1u) << (7 - nbits % 8));
      }
    };
    std::vector<std::pair<std::uint32_t, int>> symbols(1 + rng() % 40);
    for (auto& symbol : symbols) {
      const int k = int(rng() % (core::kMaxK + 1));
      const std::uint32_t u = rng() % 4 == 0 ? std::uint32_t(rng() % 1024) : std::uint32_t(rng() % (8u << k));
      symbol = {u, k};
      const std::uint32_t q = u >> k;
      if (q >= core::kEscapeZeros) {
        put(0, int(core::kEscapeZeros));
        put(u, int(core::kEscapeBits));
        ++escapes;
      } else {
        put(0, int(q));
        put(1, 1);
        put(u & ((1u << k) - 1), k);
      }
    }
    alignas(4) std::uint8_t block[8 + 512] = {};
    std::uint8_t* begin = block + 4 + trial % 4;  // every alignment; WordReader may read 3 bytes before it
    std::copy(bytes.begin(), bytes.end(), begin);
    core::BitReader byte_reader;
    core::WordReader word_reader;
    byte_reader.init(begin, begin + bytes.size());
    word_reader.init(begin, begin + bytes.size());
    std::uint64_t used = 0;
    for (const auto& symbol : symbols) {
      const std::uint32_t u = symbol.first;
      const int k = symbol.second;
      CAPTURE(trial);
      CAPTURE(u);
      CAPTURE(k);
      REQUIRE(core::read_rice(byte_reader, k) == u);
      REQUIRE(core::read_rice(word_reader, k) == u);
      used += (u >> k) >= core::kEscapeZeros ? core::kEscapeZeros + core::kEscapeBits : (u >> k) + 1 + std::uint64_t(k);
      REQUIRE(byte_reader.consumed_bits(begin) == used);
      REQUIRE(word_reader.consumed_bits(begin) == used);
    }
    CHECK(used == nbits);
  }
  CHECK(escapes > 50);
}

// The wavefront's residual correction (core::correct_residual: clamps, one
// shift sum, the bias as b - 3 (b >> 1)) against the spec's steps
// (correction_class, correction_entry, corrected_residual, which the encoder
// and the CPU decoder's tables use): every class with every entry value
// (bias field 3 included), residuals of both signs and large magnitudes.
TEST_CASE("correct_residual equals corrected_residual of the class's entry") {
  std::mt19937 rng(11);
  const int neighbours[] = {-300, -2, -1, 0, 1, 2, 300};
  const int residuals[] = {0, 1, -1, 7, -8, 511, -512, 100000, -100000};
  for (int trial = 0; trial < 72; ++trial) {
    l3::core::PlaneParams pp{};
    // Trials 0-7: every class has entry `trial`; then random tables.
    for (int g = 0; g < 9; ++g) pp.corrections |= std::uint32_t(trial & 7) << (l3::core::kCorrectionBits * g);
    if (trial >= 8) pp.corrections = static_cast<std::uint32_t>(rng()) & ((1u << (9 * l3::core::kCorrectionBits)) - 1);
    for (int w : neighbours)
      for (int n : neighbours)
        for (int nw : neighbours)
          for (int e : residuals) {
            const int g = l3::core::correction_class(w, n, nw);
            const int want = l3::core::corrected_residual(l3::core::correction_entry(pp, g), e);
            CAPTURE(pp.corrections);
            CAPTURE(g);
            CAPTURE(e);
            REQUIRE(l3::core::correct_residual(pp, e, w, n, nw) == want);
          }
  }
}

// The wavefront's token search (core::ans_search_wide) against the binary
// search, at every slot: tables as parse_ans_tables writes them (alphabets of
// 1..28 tokens, zero frequencies, among them runs across the search's quarter
// and pair boundaries; entries past the alphabet the total) and an unused
// context (all zeros, token 31 of frequency 0).
TEST_CASE("ans_search_wide finds ans_search's token and interval at every slot") {
  namespace core = l3::core;
  std::mt19937 rng(29);
  std::uint16_t cum[core::kAnsCumSize];
  int checked = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const bool unused = trial % 50 == 0;
    const int a = 1 + trial % core::kAnsTokens;
    std::vector<std::uint32_t> f(std::size_t(a), 0);
    const std::uint32_t most = trial % 3 == 0 ? 40 : 900;  // small steps: many tokens of frequency 1..40
    for (std::uint32_t left = unused ? 0 : core::kAnsTotal; left > 0;) {
      const std::uint32_t step = std::min<std::uint32_t>(left, 1 + std::uint32_t(rng() % most));
      // Every fourth table keeps tokens 6..17 at frequency 0 (a run over a quarter's end).
      std::size_t t = rng() % std::size_t(a);
      if (trial % 4 == 1 && t >= 6 && t <= 17) t = 0;
      f[t] += step;
      left -= step;
    }
    cum[0] = 0;
    for (int t = 0; t < core::kAnsCumSize - 1; ++t)
      cum[t + 1] = std::uint16_t(cum[t] + (t < a ? f[std::size_t(t)] : 0));
    for (std::uint32_t slot = 0; slot < core::kAnsTotal; ++slot) {
      const int want = core::ans_search(cum, slot);
      const core::AnsToken got = core::ans_search_wide(cum, slot);
      if (got.t != want || got.lo != cum[want] || got.hi != cum[want + 1]) {
        CAPTURE(trial);
        CAPTURE(slot);
        CHECK(got.t == want);
        CHECK(got.lo == cum[want]);
        CHECK(got.hi == cum[want + 1]);
      }
      ++checked;
    }
  }
  MESSAGE(checked << " slots");
}

// The wavefront's rANS read (core::ans_read_select) against the reference
// core::ans_read, value by value: random frequency tables (zero frequencies
// included), unused contexts (all zeros: an error either way), random states
// and row streams of every length (so refills run near and past the end),
// up to the first error.
// The whole-image tests rarely reach an unused context; this does. Both
// token searches (the wide one, and the binary one of the kernel variant
// L3_WAVEFRONT_BINARY_SEARCH) are checked, whichever this build uses.
TEST_CASE("ans_read_select equals ans_read: values, states, bits consumed, errors") {
  namespace core = l3::core;
  std::mt19937 rng(13);
  auto random_table = [&](std::uint16_t* cum) {
    const int a = 1 + int(rng() % core::kAnsTokens);
    std::vector<std::uint32_t> f(std::size_t(a), 0);
    for (std::uint32_t left = core::kAnsTotal; left > 0;) {  // sums to 4096, some tokens 0
      const std::uint32_t step = std::min<std::uint32_t>(left, 1 + std::uint32_t(rng() % 700));
      f[rng() % std::size_t(a)] += step;
      left -= step;
    }
    cum[0] = 0;
    for (int t = 0; t < core::kAnsCumSize - 1; ++t)
      cum[t + 1] = std::uint16_t(cum[t] + (t < a ? f[std::size_t(t)] : 0));
  };
  std::uint16_t cum[4][core::kAnsCumSize];
  int errors = 0, values = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    for (int x = 0; x < 3; ++x) random_table(cum[x]);
    std::fill(std::begin(cum[3]), std::end(cum[3]), std::uint16_t{0});  // an unused context
    alignas(4) std::uint8_t bytes[67];
    for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
    const std::uint32_t len = rng() % 64;
    // The wavefront reads with WordReader, the reference with BitReader.
    core::LaneState ref{};
    core::WavefrontLaneState sel{}, bin{};
    const std::uint8_t* begin = bytes + trial % 4;
    ref.br.init(begin, begin + len);
    sel.br.init(begin, begin + len);
    ref.ans = core::kAnsLow + std::uint32_t(rng() % (0xffffffffu - core::kAnsLow));
    ref.min_freq = core::kAnsTotal;
    sel.ans = ref.ans;
    sel.min_freq = ref.min_freq;
    bin = sel;
    const int reads = 1 + int(rng() % 24);
    for (int i = 0; i < reads; ++i) {
      // Contexts 0-2 mostly; the unused one now and then.
      const int x = rng() % 16 == 0 ? 3 : int(rng() % 3);
      CAPTURE(trial);
      CAPTURE(i);
      const std::uint32_t want = core::ans_read(ref, cum[x]);
      const std::uint32_t got = core::ans_read_select<core::WordReader, true>(sel, cum[x]);
      const std::uint32_t got_binary = core::ans_read_select<core::WordReader, false>(bin, cum[x]);
      CHECK(got == want);
      CHECK(sel.ans == ref.ans);
      CHECK(sel.br.consumed_bits(begin) == ref.br.consumed_bits(begin));
      CHECK((sel.error || sel.min_freq == 0) == ref.error);
      CHECK(got_binary == want);
      CHECK(bin.ans == ref.ans);
      CHECK(bin.br.consumed_bits(begin) == ref.br.consumed_bits(begin));
      CHECK(bin.min_freq == sel.min_freq);
      ++values;
      // After an error the row fails whatever it reads next, and the two
      // may read differently (a state below 2^16 renormalises twice in
      // ans_read_select, as in the CPU row loop, once in ans_read).
      if (ref.error) break;
    }
    errors += ref.error;
    // Both row ends see the same error.
    CHECK(core::lane_end_partial(sel, len) == core::lane_end_partial(ref, len));
    CHECK(core::lane_end(sel, len) == core::lane_end(ref, len));
    CHECK(core::lane_end(bin, len) == core::lane_end(ref, len));
  }
  MESSAGE(values << " values, " << errors << " rows through an unused context");
  CHECK(errors > 100);
}
