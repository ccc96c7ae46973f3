// Tests of the image codec (spec/codec.md): bit-exact round trips over seeded
// random and structured images of every layout and many sizes, real photos,
// region decode, threading, determinism, the spec's test vectors, caller
// errors, limits, and corrupt input (never a crash; ASan checks bounds in CI).
#include <cstdlib>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "l3/codec/codec.hpp"
#include "l3/codec/tile_core.hpp"
#include "test_coded_tiles.hpp"
#include "test_tile_pattern.hpp"
#include "test_util.hpp"
#include "l3/imageio/image_io.hpp"

namespace {

namespace fs = std::filesystem;
using l3::test::Bytes;
using l3::test::error_of;
using l3::test::read_file;

struct Image {
  std::uint32_t w = 0, h = 0, c = 0;
  Bytes px;
  l3::ImageView view() const { return {px.data(), w, h, c, 0}; }
};

enum class Pattern { noise, flat, gradient, stripes, labels, smooth_noise };

// Seeded images of the structures datasets hold: sensor noise, flat areas,
// smooth gradients, stripes, segmentation label masks, natural-ish texture.
Image make(std::uint32_t w, std::uint32_t h, std::uint32_t c, Pattern pattern, std::uint32_t seed) {
  Image im{w, h, c, Bytes(std::size_t(w) * h * c)};
  std::minstd_rand rng(seed);
  std::vector<int> centers;
  for (int i = 0; i < 8; ++i) centers.push_back(int(rng() % (w + 1))), centers.push_back(int(rng() % (h + 1)));
  for (std::uint32_t y = 0; y < h; ++y)
    for (std::uint32_t x = 0; x < w; ++x)
      for (std::uint32_t k = 0; k < c; ++k) {
        int v = 0;
        switch (pattern) {
          case Pattern::noise: v = int(rng() & 255); break;
          case Pattern::flat: v = 90 + int(k) * 17; break;
          case Pattern::gradient: v = int((x * 255) / std::max(1u, w - 1) + k * 30 + y); break;
          case Pattern::stripes: v = ((x / 3 + y / 5 + k) % 2) ? 240 : 10; break;
          case Pattern::labels: {  // nearest of 8 seeds: large uniform regions, few values
            int best = 0, bestd = 1 << 30;
            for (int i = 0; i < 8; ++i) {
              const int dx = int(x) - centers[2 * i], dy = int(y) - centers[2 * i + 1];
              if (dx * dx + dy * dy < bestd) bestd = dx * dx + dy * dy, best = i;
            }
            v = best * 30 + int(k);
            break;
          }
          case Pattern::smooth_noise: v = int(x + 2 * y + k * 50) + int(rng() % 7); break;
        }
        im.px[(std::size_t(y) * w + x) * c + k] = std::uint8_t(v & 255);
      }
  return im;
}

Bytes encode(const Image& im, std::uint32_t tw = 0, std::uint32_t th = 0, int effort = 1) {
  l3::EncodeOptions o;
  o.tile_width = tw;
  o.tile_height = th;
  o.effort = effort;
  return l3::encode(im.view(), o);
}

Bytes decode(const Bytes& enc, unsigned threads = 1) {
  l3::DecodeOptions o;
  o.threads = threads;
  return l3::decode(enc, nullptr, o);
}

Bytes crop(const Image& im, const l3::Rect& r) {
  Bytes out(std::size_t(r.width) * r.height * im.c);
  for (std::uint32_t y = 0; y < r.height; ++y)
    std::memcpy(&out[std::size_t(y) * r.width * im.c], &im.px[(std::size_t(r.y + y) * im.w + r.x) * im.c],
                std::size_t(r.width) * im.c);
  return out;
}

// decode_region of each rectangle equals the crop of the source pixels.
void check_crops(const Bytes& enc, const Image& im, std::initializer_list<l3::Rect> rects) {
  for (const l3::Rect& r : rects) {
    Bytes out(std::size_t(r.width) * r.height * im.c);
    l3::decode_region(enc, r, {out.data(), r.width, r.height, im.c, 0});
    CAPTURE(r.x);
    CAPTURE(r.y);
    CHECK(out == crop(im, r));
  }
}


const fs::path kSourceDir = L3_SOURCE_DIR;

// Rows the encoder can store as zero rows (spec §4.3, version 4): rows that
// repeat the row above, at even and odd positions of the CPU decoder's row
// pairs and groups, each 32-row tile's last row, and every 64th row mid-gray
// (a tile's first row: every predictor reproduces it from the midpoints).
Image with_zero_rows(Image im) {
  const std::size_t row = std::size_t(im.w) * im.c;
  for (std::uint32_t y = 0; y < im.h; ++y) {
    std::uint8_t* p = &im.px[y * row];
    if (y % 64 == 0) std::memset(p, 128, row);
    else if (y % 5 == 1 || y % 7 == 4 || y % 32 == 31) std::memcpy(p, p - row, row);
  }
  return im;
}

using l3::test::coded_tiles;

// The zero rows of a stream's coded tiles, by kind of tile.
struct ZeroRows {
  int rice = 0, ans = 0, palette = 0;
};
ZeroRows zero_rows_of(const Bytes& enc) {
  ZeroRows z;
  for (const auto& [tile, t] : coded_tiles(enc))
    for (int r = 0; r < t.height; ++r)
      if (l3::core::is_zero_row(t, r)) ++((tile[0] & l3::core::kModePalette) ? z.palette : t.ans ? z.ans : z.rice);
  return z;
}

}  // namespace

TEST_CASE("k_of_activity: each activity's entry is its bucket's (spec §6.2), expanded as runs per bucket") {
  l3::core::PlaneParams pp{};
  for (int b = 0; b < int(l3::core::kBuckets); ++b) pp.k[b] = std::uint8_t(b * 7 % 11);  // neighbours differ
  l3::core::expand_k_table(pp);
  for (int a = 0; a < l3::core::kActivityTable; ++a) {
    CAPTURE(a);
    CHECK(pp.k_of_activity[a] == pp.k[l3::core::bucket_of(a)]);
    CHECK(l3::core::bucket_start(l3::core::bucket_of(a)) <= a);
  }
  for (int b = 0; b < int(l3::core::kBuckets); ++b) CHECK(l3::core::bucket_of(l3::core::bucket_start(b)) == b);
  CHECK(l3::core::k_for_activity(pp, 100000) == pp.k[15]);
}

TEST_CASE("round trip: every layout, edge sizes and patterns, default tiles") {
  const std::uint32_t sizes[][2] = {{1, 1}, {1, 37}, {37, 1}, {127, 31}, {128, 32}, {255, 33}, {256, 64}, {257, 65}, {300, 70}};
  std::uint32_t seed = 1;
  for (std::uint32_t c = 1; c <= 4; ++c)
    for (const auto& s : sizes)
      for (Pattern p : {Pattern::noise, Pattern::flat, Pattern::gradient, Pattern::stripes, Pattern::labels,
                        Pattern::smooth_noise}) {
        const Image im = make(s[0], s[1], c, p, seed++);
        CAPTURE(c);
        CAPTURE(s[0]);
        CAPTURE(s[1]);
        CAPTURE(int(p));
        CHECK(decode(encode(im)) == im.px);
      }
}

TEST_CASE("round trip: every tile shape") {
  // Heights 5, 6 and 7 end in a partial group of the decoder's 4 rows.
  const std::uint32_t shapes[][2] = {{16, 1}, {16, 8}, {32, 7}, {64, 32}, {256, 32}, {256, 1}, {16, 32}, {16, 5}, {32, 6}};
  std::uint32_t seed = 100;
  for (const auto& t : shapes)
    for (std::uint32_t c : {1u, 3u, 4u})
      for (Pattern p : {Pattern::smooth_noise, Pattern::labels, Pattern::noise}) {
        const Image im = make(t[0] * 2 + 3, t[1] * 3 + 1, c, p, seed++);
        CAPTURE(t[0]);
        CAPTURE(t[1]);
        const Bytes enc = encode(im, t[0], t[1]);
        const l3::ImageInfo info = l3::read_info(enc);
        CHECK(info.tile_width == t[0]);
        CHECK(info.tile_height == t[1]);
        CHECK(decode(enc) == im.px);
      }
}

TEST_CASE("round trip: effort 0 (fixed transform and predictor)") {
  for (std::uint32_t c = 1; c <= 4; ++c) {
    const Image im = make(150, 40, c, Pattern::smooth_noise, 7 + c);
    CHECK(decode(encode(im, 0, 0, 0)) == im.px);
  }
}

TEST_CASE("effort 2 (every transform coded, the smallest kept): round trip, never larger than effort 1") {
  for (std::uint32_t c = 1; c <= 4; ++c)
    for (Pattern pattern : {Pattern::smooth_noise, Pattern::labels, Pattern::stripes, Pattern::noise}) {
      const Image im = make(300, 70, c, pattern, 21 + c);
      const Bytes e1 = encode(im, 0, 0, 1), e2 = encode(im, 0, 0, 2);
      CHECK(decode(e2) == im.px);
      CHECK(e2.size() <= e1.size());
    }
}

TEST_CASE("round trip: real photos from bench/sample") {
  int photos = 0;
  for (const auto& entry : fs::directory_iterator(kSourceDir / "bench" / "sample")) {
    const auto ext = entry.path().extension();
    if (ext != ".png" && ext != ".jpg") continue;
    const l3::Image src = l3::load_image(entry.path());
    Image im{src.width, src.height, src.channels, src.pixels};
    CAPTURE(entry.path().string());
    const Bytes enc = encode(im);
    CHECK(decode(enc, 1) == im.px);
    CHECK(decode(enc, 2) == im.px);
    CHECK(enc.size() < im.px.size());  // photos compress
    ++photos;
  }
  CHECK(photos >= 4);
}

TEST_CASE("region decode equals the crop of the full decode") {
  std::minstd_rand rng(42);
  for (std::uint32_t c = 1; c <= 4; ++c) {
    const Image im = make(301, 97, c, c % 2 ? Pattern::smooth_noise : Pattern::labels, 50 + c);
    const Bytes enc = encode(im, 64, 16);
    std::vector<l3::Rect> rects = {{0, 0, 301, 97}, {0, 0, 1, 1}, {300, 96, 1, 1}, {63, 15, 2, 2}, {64, 16, 64, 16}};
    for (int i = 0; i < 30; ++i) {
      l3::Rect r;
      r.x = std::uint32_t(rng() % 301);
      r.y = std::uint32_t(rng() % 97);
      r.width = 1 + std::uint32_t(rng() % (301 - r.x));
      r.height = 1 + std::uint32_t(rng() % (97 - r.y));
      rects.push_back(r);
    }
    for (const l3::Rect& r : rects) {
      Bytes out(std::size_t(r.width) * r.height * c);
      l3::decode_region(enc, r, l3::MutableImageView{out.data(), r.width, r.height, c, 0});
      CAPTURE(r.x);
      CAPTURE(r.y);
      CAPTURE(r.width);
      CAPTURE(r.height);
      CHECK(out == crop(im, r));
    }
  }
}

TEST_CASE("decode into a strided buffer writes only the image columns") {
  const Image im = make(70, 20, 3, Pattern::smooth_noise, 9);
  const Bytes enc = encode(im);
  const std::size_t stride = 70 * 3 + 13;
  Bytes out(stride * 20, 0xAB);
  l3::decode(enc, l3::MutableImageView{out.data(), 70, 20, 3, stride});
  for (std::uint32_t y = 0; y < 20; ++y) {
    CHECK(std::memcmp(&out[y * stride], &im.px[y * 70 * 3], 70 * 3) == 0);
    CHECK(std::all_of(out.begin() + std::ptrdiff_t(y * stride + 210), out.begin() + std::ptrdiff_t((y + 1) * stride),
                      [](std::uint8_t b) { return b == 0xAB; }));
  }
}

TEST_CASE("multi-threaded decode equals single-threaded; encoding is deterministic") {
  const Image im = make(1000, 300, 3, Pattern::smooth_noise, 77);
  l3::EncodeOptions o1, o2;
  o2.threads = 2;
  const Bytes a = l3::encode(im.view(), o1), b = l3::encode(im.view(), o1), c = l3::encode(im.view(), o2);
  CHECK(a == b);
  CHECK(a == c);
  CHECK(decode(a, 1) == im.px);
  CHECK(decode(a, 2) == decode(a, 1));
  CHECK(decode(a, 0) == im.px);
}

TEST_CASE("low-entropy content stays far below one bit per sample") {
  // Label masks (gray, few values, large uniform regions) and flat images:
  // the zero-run mode and constant tiles must make them cheap (spec §6.4).
  const Image labels = make(512, 512, 1, Pattern::labels, 3);
  const double bpp = double(encode(labels).size()) * 8 / (512.0 * 512.0);
  MESSAGE("label mask: " << bpp << " bits per pixel");
  CHECK(bpp < 0.25);
  const Image flat = make(1024, 768, 3, Pattern::flat, 4);
  CHECK(encode(flat).size() < 2 * 1024);  // constant tiles: a few bytes each
  const Image gradient = make(512, 256, 3, Pattern::gradient, 5);
  CHECK(double(encode(gradient).size()) * 8 / (512.0 * 256 * 3) < 0.5);
}

TEST_CASE("constant planes (v2): opaque alpha and gray stored as RGB cost almost nothing") {
  // spec/codec.md §4.3: a plane with one value in a tile is stored as that
  // value (3 bytes per tile), so the alpha of an opaque image, or the colour
  // differences of gray pixels stored as RGB, add well under 1%.
  const Image rgb = make(700, 300, 3, Pattern::smooth_noise, 11);
  Image rgba{rgb.w, rgb.h, 4, Bytes(std::size_t(rgb.w) * rgb.h * 4)};
  for (std::size_t i = 0; i < std::size_t(rgb.w) * rgb.h; ++i) {
    std::memcpy(&rgba.px[4 * i], &rgb.px[3 * i], 3);
    rgba.px[4 * i + 3] = 255;
  }
  const Bytes e3 = encode(rgb), e4 = encode(rgba);
  MESSAGE("opaque RGBA / RGB bytes: " << double(e4.size()) / double(e3.size()));
  CHECK(double(e4.size()) <= 1.01 * double(e3.size()));
  CHECK(decode(e4) == rgba.px);

  const Image gray = make(700, 300, 1, Pattern::smooth_noise, 12);
  Image as_rgb{gray.w, gray.h, 3, Bytes(std::size_t(gray.w) * gray.h * 3)};
  for (std::size_t i = 0; i < gray.px.size(); ++i) std::memset(&as_rgb.px[3 * i], gray.px[i], 3);
  const Bytes eg = encode(gray), ergb = encode(as_rgb);
  MESSAGE("gray as RGB / gray bytes: " << double(ergb.size()) / double(eg.size()));
  CHECK(double(ergb.size()) <= 1.01 * double(eg.size()));
  CHECK(decode(ergb) == as_rgb.px);
  // Without entropy-coded tiles the stream is version 2; read_info reports it.
  l3::EncodeOptions rice;
  rice.entropy_coding = false;
  rice.plane_contexts = rice.corrections = false;  // versions of their own (v7, v8)
  rice.compact_tables = false;  // version 9 (§4.5)
  CHECK(l3::read_info(l3::encode(rgba.view(), rice)).version == 2);
}

TEST_CASE("entropy-coded tiles (v3): rANS tokens where smaller than Rice codes, exact, crops and threads") {
  // spec/codec.md §4.5, §7.4: a smooth gradient with a little noise (most
  // codes 0 or 1: Rice spends at least a bit on each) and a 1-pixel
  // chessboard (a palette tile whose indices are perfectly predictable from
  // the row above, yet cost at least a bit each as Rice codes).
  l3::EncodeOptions rice, every;
  rice.entropy_coding = false;
  every.entropy_min_saving_percent = 0;  // wherever smaller (the default asks for 7% less)
  rice.tile_copies = every.tile_copies = false;  // the chessboard's tiles are all alike (version 5)
  rice.plane_contexts = every.plane_contexts = rice.corrections = every.corrections = false;  // versions of their own (v7, v8)
  rice.compact_tables = every.compact_tables = false;  // version 9 (§4.5)
  Image chess{512, 64, 1, Bytes(512 * 64)};
  for (std::uint32_t y = 0; y < chess.h; ++y)
    for (std::uint32_t x = 0; x < chess.w; ++x) chess.px[y * chess.w + x] = (x + y) % 2 ? 255 : 0;
  for (const Image& im : {make(700, 300, 3, Pattern::smooth_noise, 21), make(640, 200, 4, Pattern::gradient, 22), chess}) {
    const Bytes ans = l3::encode(im.view(), every), plain = l3::encode(im.view(), rice);
    MESSAGE(im.c << " channels: " << ans.size() << " bytes with rANS tiles, " << plain.size() << " with Rice codes only");
    CHECK(l3::read_info(ans).version == 3);
    CHECK(l3::read_info(plain).version == 2);
    CHECK(ans.size() * 100 < plain.size() * 95);  // at least 5% smaller
    CHECK(decode(ans) == im.px);
    CHECK(decode(ans, 4) == im.px);
    // Effort 2 also tries rANS tiles with the other run mode.
    const Bytes dense = encode(im, 0, 0, 2);
    CHECK(dense.size() <= ans.size());
    CHECK(decode(dense) == im.px);
    // Crops ending 1 or 2 columns into a tile and 1-3 rows into a group of
    // 4 (the CPU decoder reads entropy-coded rows in pairs, one column apart).
    check_crops(ans, im, {{37, 11, 301, 50}, {0, 0, 1, 1}, {0, 0, 2, 2}, {250, 5, 7, 3}, {255, 2, 2, 5}, {100, 30, 157, 33}});
  }
  // Chosen per tile only where smaller: never larger than Rice codes alone,
  // on a real photo too; effort 0 writes no entropy-coded tile.
  const l3::Image photo = l3::load_image(kSourceDir / "bench" / "sample" / "coffee.png");
  const Image p{photo.width, photo.height, photo.channels, photo.pixels};
  const Bytes ans = encode(p), plain = l3::encode(p.view(), rice);
  MESSAGE("photo: " << ans.size() << " bytes with rANS tiles, " << plain.size() << " with Rice codes only");
  CHECK(ans.size() <= plain.size());
  CHECK(decode(ans) == p.px);
  CHECK(l3::read_info(encode(p, 0, 0, 0)).version == 2);
}

TEST_CASE("entropy_min_saving_percent: effort 1 spends rANS decode time only where it saves that share") {
  // codec.hpp, spec/codec.md §12: rANS rows take the CPU about twice as long
  // as Rice rows, so by default a tile is entropy-coded only when that saves
  // at least 7% of its bytes; 0 takes every saving, 100 none; effort 2
  // (density) takes every saving whatever the option says. The image's left
  // tile column is a gradient (rANS saves much), its right one smooth noise
  // (rANS saves a few percent).
  const Image gradient = make(256, 96, 3, Pattern::gradient, 41), noise = make(256, 96, 3, Pattern::smooth_noise, 42);
  Image p{512, 96, 3, Bytes(512 * 96 * 3)};
  for (std::uint32_t y = 0; y < p.h; ++y) {
    std::memcpy(&p.px[std::size_t(y) * 512 * 3], &gradient.px[std::size_t(y) * 256 * 3], 256 * 3);
    std::memcpy(&p.px[(std::size_t(y) * 512 + 256) * 3], &noise.px[std::size_t(y) * 256 * 3], 256 * 3);
  }
  auto with = [&](unsigned percent, int effort = 1) {
    l3::EncodeOptions o;
    o.entropy_min_saving_percent = percent;
    o.effort = effort;
    o.plane_contexts = o.corrections = false;  // versions of their own (v7, v8)
    o.compact_tables = false;  // version 9 (§4.5)
    return l3::encode(p.view(), o);
  };
  l3::EncodeOptions rice, by_default;
  rice.entropy_coding = false;
  rice.plane_contexts = by_default.plane_contexts = rice.corrections = by_default.corrections = false;
  rice.compact_tables = by_default.compact_tables = false;  // version 9 (§4.5)
  const Bytes plain = l3::encode(p.view(), rice), every = with(0), none = with(100), share = with(20),
              fallback = l3::encode(p.view(), by_default);
  MESSAGE("bytes: Rice only " << plain.size() << ", every saving " << every.size() << ", 20% share " << share.size()
                              << ", default share " << fallback.size());
  CHECK(l3::EncodeOptions{}.entropy_min_saving_percent == 7);
  CHECK(none == plain);
  CHECK(l3::read_info(none).version == 2);
  CHECK(l3::read_info(share).version == 3);  // the gradient's tiles
  CHECK(every.size() < share.size());       // the noise's tiles save under 20%
  CHECK(share.size() < plain.size());
  CHECK(every.size() <= fallback.size());
  CHECK(fallback.size() <= share.size());
  CHECK(decode(every) == p.px);
  CHECK(decode(share) == p.px);
  CHECK(decode(fallback) == p.px);
  CHECK(with(100, 2) == with(0, 2));
}

TEST_CASE("zero rows (v4): rows whose codes are all zero cost no bytes; round trips, crops, threads") {
  // spec/codec.md §4.3: an empty row stream is a zero row in a version 4
  // stream, in Rice-coded, entropy-coded and palette tiles alike.
  l3::EncodeOptions plain, rice, every, dense;
  rice.entropy_coding = false;
  every.entropy_min_saving_percent = 0;  // rANS tiles wherever smaller
  dense.effort = 2;
  for (l3::EncodeOptions* o : {&plain, &rice, &every, &dense}) {
    o->pixel_copies = false;  // versions of their own (v6, v7)
    o->plane_contexts = o->corrections = false;
    o->compact_tables = false;  // version 9 (§4.5)
  }
  Image labels = make(300, 130, 1, Pattern::labels, 61);  // 8 RGB colours: palette tiles
  labels.c = 3;
  Bytes rgb(labels.px.size() * 3);
  for (std::size_t i = 0; i < labels.px.size(); ++i)
    for (int k = 0; k < 3; ++k) rgb[3 * i + std::size_t(k)] = std::uint8_t(labels.px[i] * 37 * (k + 1) + 11 * k);
  labels.px = std::move(rgb);
  std::vector<Image> images = {with_zero_rows(labels)};
  for (std::uint32_t c = 1; c <= 4; ++c) images.push_back(with_zero_rows(make(300, 130, c, Pattern::smooth_noise, 60 + c)));
  ZeroRows total;
  for (const Image& im : images)
    for (const l3::EncodeOptions& on : {plain, rice, every, dense}) {
      l3::EncodeOptions off = on;
      off.zero_rows = false;
      const Bytes with = l3::encode(im.view(), on), without = l3::encode(im.view(), off);
      CAPTURE(im.c);
      CAPTURE(on.entropy_coding);
      CAPTURE(on.effort);
      CHECK(l3::read_info(with).version == 4);
      CHECK(l3::read_info(without).version <= 3);  // readable by version 3 decoders
      CHECK(with.size() < without.size());
      CHECK(decode(with) == im.px);
      CHECK(decode(with, 4) == im.px);
      CHECK(decode(without) == im.px);
      const ZeroRows z = zero_rows_of(with);
      CHECK(z.rice + z.ans + z.palette > 0);
      CHECK(zero_rows_of(without).rice + zero_rows_of(without).ans + zero_rows_of(without).palette == 0);
      if (!on.entropy_coding) CHECK(z.ans == 0);
      total.rice += z.rice;
      total.ans += z.ans;
      total.palette += z.palette;
      // Crops that end inside row pairs and groups, above and below zero rows.
      check_crops(with, im, {{37, 11, 201, 50}, {0, 0, 1, 1}, {0, 0, 300, 2}, {250, 5, 7, 3}, {255, 30, 2, 5}, {100, 62, 157, 68}});
    }
  MESSAGE("zero rows: " << total.rice << " in Rice-coded tiles, " << total.ans << " in entropy-coded tiles, "
                        << total.palette << " in palette tiles");
  CHECK(total.rice > 0);
  CHECK(total.ans > 0);
  CHECK(total.palette > 0);
  // A smooth gradient stored as rows that repeat: one row in 32 costs bytes.
  Image ramp{512, 256, 1, Bytes(512 * 256)};
  for (std::uint32_t y = 0; y < ramp.h; ++y)
    for (std::uint32_t x = 0; x < ramp.w; ++x) ramp.px[y * ramp.w + x] = std::uint8_t(x / 2);
  l3::EncodeOptions no_zero_rows;
  no_zero_rows.zero_rows = false;
  const Bytes ramp_with = encode(ramp), ramp_without = l3::encode(ramp.view(), no_zero_rows);
  MESSAGE("horizontal ramp 512x256: " << ramp_with.size() << " bytes with zero rows, " << ramp_without.size() << " without");
  CHECK(ramp_with.size() * 2 < ramp_without.size());
  CHECK(decode(ramp_with) == ramp.px);
}

TEST_CASE("zero rows: an image without them is written as before, version 3 or 2") {
  // spec/codec.md §11: the lowest version the tiles need.
  const Image im = make(300, 130, 3, Pattern::smooth_noise, 70);
  l3::EncodeOptions every, rice;
  every.entropy_min_saving_percent = 0;  // rANS tiles wherever smaller
  rice.entropy_coding = false;
  every.plane_contexts = rice.plane_contexts = every.corrections = rice.corrections = false;  // versions of their own (v7, v8)
  every.compact_tables = rice.compact_tables = false;  // version 9 (§4.5)
  l3::EncodeOptions off = every, rice_off = rice;
  off.zero_rows = false;
  rice_off.zero_rows = false;
  const Bytes with = l3::encode(im.view(), every), plain = l3::encode(im.view(), rice);
  CHECK(l3::read_info(with).version == 3);
  CHECK(l3::read_info(plain).version == 2);
  CHECK(with == l3::encode(im.view(), off));
  CHECK(plain == l3::encode(im.view(), rice_off));
}

TEST_CASE("zero-row bitmaps (v10): a table of mostly zero rows marks them and sizes the others; round trips, crops, threads") {
  // spec/codec.md §4.3: the width byte's bit 7 and a bitmap of the zero rows.
  // Images whose tiles are mostly zero rows: the patterns above with rows
  // repeated, and a gray chessboard of 25-pixel squares (the scikit-image
  // test image's layout: its tiles hold two or three coded rows).
  Image chess{200, 200, 1, Bytes(200 * 200)};
  for (std::uint32_t y = 0; y < chess.h; ++y)
    for (std::uint32_t x = 0; x < chess.w; ++x) chess.px[y * chess.w + x] = ((x / 25 + y / 25) % 2) ? 255 : 0;
  std::vector<Image> images = {chess};
  for (std::uint32_t c = 1; c <= 4; ++c) images.push_back(with_zero_rows(make(300, 130, c, Pattern::smooth_noise, 80 + c)));
  l3::EncodeOptions rice, dense;
  rice.entropy_coding = false;
  dense.effort = 2;
  int masked = 0;
  for (const Image& im : images)
    for (const l3::EncodeOptions& on : {l3::EncodeOptions{}, rice, dense}) {
      l3::EncodeOptions off = on;
      off.row_masks = false;
      const Bytes with = l3::encode(im.view(), on), without = l3::encode(im.view(), off);
      CAPTURE(im.c);
      CAPTURE(on.entropy_coding);
      CAPTURE(on.effort);
      CHECK(l3::read_info(without).version <= 9);  // readable by version 9 decoders
      CHECK(with.size() <= without.size());        // a bitmap only where smaller
      if (with.size() < without.size()) {
        CHECK(l3::read_info(with).version == 10);
        ++masked;
      } else {
        CHECK(with == without);
      }
      CHECK(decode(with) == im.px);
      CHECK(decode(with, 4) == im.px);
      check_crops(with, im, {{37, 11, 101, 50}, {0, 0, 1, 1}, {0, 0, im.w, 2}, {150, 5, 7, 3}, {155, 30, 2, 5}, {100, 62, 57, 68}});
    }
  MESSAGE("zero-row bitmaps in " << masked << " of 15 streams");
  CHECK(masked >= 12);  // 15 when written
  CHECK(l3::read_info(encode(chess)).version == 10);
  // Tables need compact tables (version 10 reads version 9's): none without.
  l3::EncodeOptions old_tables;
  old_tables.compact_tables = false;
  CHECK(l3::read_info(l3::encode(chess.view(), old_tables)).version <= 8);
}

// A two-colour image of test_tile_pattern.hpp (fill_two_colours).
Image two_colours(std::uint32_t w, std::uint32_t h, std::uint32_t c, int kind, std::uint32_t seed) {
  Image im{w, h, c, Bytes(std::size_t(w) * h * c)};
  l3::test::fill_two_colours(im.px.data(), w, h, c, kind, seed);
  return im;
}

TEST_CASE("bilevel planes (v11): two-colour tiles as binary symbols in contexts of their neighbours; round trips, crops, threads") {
  // spec/codec.md §6.8: a two-colour palette tile's indices as binary
  // symbols in the contexts of W, N, NW, WW and NN.
  std::vector<Image> images;
  for (std::uint32_t c = 1; c <= 4; ++c) images.push_back(two_colours(300, 130, c, 0, 60 + c));
  images.push_back(two_colours(300, 130, 3, 1, 70));
  images.push_back(two_colours(300, 130, 1, 2, 71));
  l3::EncodeOptions dense, small_tiles, by_default;
  dense.effort = 2;
  small_tiles.tile_width = 32;
  small_tiles.tile_height = 8;
  // Without version 12's NW predictor and mirrored tiles and version 13's
  // bit planes and templates: the versions below are version 11's.
  by_default.diagonals = dense.diagonals = small_tiles.diagonals = false;
  by_default.bilevel_templates = dense.bilevel_templates = small_tiles.bilevel_templates = false;
  int bilevel_streams = 0, with_runs = 0;
  for (const Image& im : images)
    for (const l3::EncodeOptions& on : {by_default, dense, small_tiles}) {
      l3::EncodeOptions off = on;
      off.bilevel = false;
      const Bytes with = l3::encode(im.view(), on), without = l3::encode(im.view(), off);
      CAPTURE(im.c);
      CAPTURE(on.effort);
      CAPTURE(on.tile_width);
      CHECK(l3::read_info(without).version <= 10);  // readable by version 10 decoders
      CHECK(with.size() <= without.size());         // a bilevel plane only where smaller
      const l3::test::BilevelTiles b = l3::test::bilevel_tiles(with);
      if (b.tiles > 0) {
        CHECK(l3::read_info(with).version == 11);
        ++bilevel_streams;
        with_runs += b.with_runs > 0;
      } else {
        CHECK(with == without);
      }
      CHECK(decode(with) == im.px);
      CHECK(decode(with, 4) == im.px);
      check_crops(with, im, {{37, 11, 101, 50}, {0, 0, 1, 1}, {0, 0, im.w, 2}, {150, 5, 7, 3}, {255, 30, 2, 5}, {100, 62, 57, 68}});
    }
  MESSAGE("bilevel planes in " << bilevel_streams << " of 18 streams, " << with_runs << " with runs");
  CHECK(bilevel_streams >= 14);  // 16 when written
  CHECK(with_runs >= 1);
  // The text: a bilevel plane saves a tenth or more.
  const Image text = two_colours(600, 256, 3, 0, 99);
  l3::EncodeOptions off;
  off.bilevel = false;
  const Bytes with = l3::encode(text.view(), {}), without = l3::encode(text.view(), off);
  MESSAGE("text 600 x 256: " << with.size() << " bytes, " << without.size() << " without bilevel planes");
  CHECK(with.size() * 10 <= without.size() * 9);
  // Bilevel planes need rANS tiles with compact tables: none without.
  l3::EncodeOptions rice, old_tables;
  rice.entropy_coding = false;
  old_tables.compact_tables = false;
  CHECK(l3::test::bilevel_tiles(l3::encode(text.view(), rice)).tiles == 0);
  CHECK(l3::test::bilevel_tiles(l3::encode(text.view(), old_tables)).tiles == 0);
}

// An ordered dither of test_tile_pattern.hpp (fill_ordered_dither).
Image ordered_dither(std::uint32_t w, std::uint32_t h, std::uint32_t c, std::uint32_t seed) {
  Image im{w, h, c, Bytes(std::size_t(w) * h * c)};
  l3::test::fill_ordered_dither(im.px.data(), w, h, c, seed);
  return im;
}

TEST_CASE("bit planes and templates (v13): bilevel palettes of up to 16 colours bit by bit, templates per tile; round trips, crops, threads") {
  // spec/codec.md §6.8: ordered dithers of 1-4 channels (2 to 16 colours a
  // tile, a channel a bit, period 8: the template 8 to the left and 8 up),
  // and the two-colour images of the bilevel test, whose templates may stay
  // WW and NN.
  std::vector<Image> images;
  for (std::uint32_t c = 1; c <= 4; ++c) images.push_back(ordered_dither(300, 130, c, 30 + c));
  images.push_back(two_colours(300, 130, 3, 0, 38));
  l3::EncodeOptions dense, small_tiles;
  dense.effort = 2;
  small_tiles.tile_width = 32;
  small_tiles.tile_height = 16;
  int v13_streams = 0, wide_palettes = 0, templated = 0;
  for (const Image& im : images)
    for (const l3::EncodeOptions& on : {l3::EncodeOptions{}, dense, small_tiles}) {
      l3::EncodeOptions off = on;
      off.bilevel_templates = false;
      const Bytes with = l3::encode(im.view(), on), without = l3::encode(im.view(), off);
      CAPTURE(im.c);
      CAPTURE(on.effort);
      CAPTURE(on.tile_width);
      CHECK(l3::read_info(without).version <= 12);  // readable by version 12 decoders
      int wide = 0, other = 0;
      for (const auto& [tile, t] : l3::test::coded_tiles(with)) {
        wide += t.bilevel && t.bilevel_bits > 1;
        other += t.bilevel && (t.template_dy[1] != l3::core::default_template_dy(1) ||
                               t.template_dx[0] != l3::core::default_template_dx(0));
      }
      if (wide + other > 0) {
        CHECK(l3::read_info(with).version == 13);
        ++v13_streams;
      } else {
        CHECK(with == without);
      }
      wide_palettes += wide > 0;
      templated += other > 0;
      CHECK(decode(with) == im.px);
      CHECK(decode(with, 4) == im.px);
      check_crops(with, im, {{37, 11, 101, 50}, {0, 0, 1, 1}, {0, 0, im.w, 2}, {150, 5, 7, 3}, {255, 30, 2, 5},
                             {100, 62, 57, 68}, {290, 100, 10, 30}});
    }
  MESSAGE("version 13 in " << v13_streams << " of 15 streams: " << wide_palettes << " with bit planes, " << templated
                           << " with templates");
  CHECK(v13_streams >= 9);
  CHECK(wide_palettes >= 6);
  CHECK(templated >= 6);
  // The RGB dither: at most 0.8 of the bytes without them.
  const Image dither = ordered_dither(1024, 256, 3, 9);
  l3::EncodeOptions off;
  off.bilevel_templates = false;
  const Bytes with = l3::encode(dither.view(), {}), without = l3::encode(dither.view(), off);
  MESSAGE("dither 1024 x 256: " << with.size() << " bytes, " << without.size() << " without bit planes and templates");
  CHECK(with.size() * 10 <= without.size() * 8);
}

// Diagonal ramps of test_tile_pattern.hpp (fill_diagonal).
Image diagonal(std::uint32_t w, std::uint32_t h, std::uint32_t c, bool anti, std::uint32_t seed) {
  Image im{w, h, c, Bytes(std::size_t(w) * h * c)};
  l3::test::fill_diagonal(im.px.data(), w, h, c, anti, seed);
  return im;
}

TEST_CASE("diagonals (v12): NW predictor and mirrored tiles; round trips, crops of mirrored tiles, threads") {
  // spec/codec.md §4.7: a mirrored tile decodes as a coded tile and lands
  // right to left, so its NW (§6.1) is the image's NE. Ramps along x + y
  // (NE predicts them: mirrored tiles) and x - y (NW: tiles of kind 0), in
  // 1-4 channels, 300 x 130 (clipped tiles at the right and bottom).
  std::vector<Image> images;
  for (std::uint32_t c = 1; c <= 4; ++c) images.push_back(diagonal(300, 130, c, false, 90 + c));
  images.push_back(diagonal(300, 130, 3, true, 95));
  l3::EncodeOptions rice, dense, small_tiles;
  rice.entropy_coding = false;
  dense.effort = 2;
  small_tiles.tile_width = 32;
  small_tiles.tile_height = 8;
  int mirrored_streams = 0, nw_streams = 0;
  for (const Image& im : images)
    for (l3::EncodeOptions on : {l3::EncodeOptions{}, rice, dense, small_tiles}) {
      on.ramps = false;  // diagonals alone (some of these tiles are ramps, spec §6.9)
      l3::EncodeOptions off = on;
      off.diagonals = false;
      const Bytes with = l3::encode(im.view(), on), without = l3::encode(im.view(), off);
      CAPTURE(im.c);
      CAPTURE(on.effort);
      CAPTURE(on.entropy_coding);
      CAPTURE(on.tile_width);
      CHECK(l3::read_info(without).version <= 11);  // readable by version 11 decoders
      const l3::test::DiagonalTiles d = l3::test::diagonal_tiles(with);
      CHECK(l3::test::diagonal_tiles(without).mirrored + l3::test::diagonal_tiles(without).nw_planes == 0);
      if (d.mirrored + d.nw_planes > 0) {
        CHECK(l3::read_info(with).version == 12);
        CHECK(with.size() < without.size());
        mirrored_streams += d.mirrored > 0;
        nw_streams += d.nw_planes > 0;
      }
      CHECK(decode(with) == im.px);
      CHECK(decode(with, 4) == im.px);
      // Crops inside a tile, across tiles, in clipped tiles, one column at
      // either edge of a tile (a mirrored tile decodes its columns right to left).
      check_crops(with, im, {{37, 11, 101, 50}, {0, 0, 1, 1}, {0, 0, im.w, 2}, {255, 30, 1, 5}, {256, 30, 1, 5},
                             {150, 5, 7, 3}, {290, 100, 10, 30}, {100, 62, 57, 68}, {31, 7, 2, 2}});
    }
  MESSAGE("mirrored tiles in " << mirrored_streams << " of 20 streams, NW planes in " << nw_streams);
  CHECK(mirrored_streams >= 12);  // 16 when written
  CHECK(nw_streams >= 16);        // 20 when written
  // The ramp along x + y (its samples wrap at 256): at most 0.6 of the bytes (0.56 when written).
  const Image ramp = diagonal(1024, 256, 3, false, 99);
  l3::EncodeOptions on, off;
  on.ramps = off.ramps = false;
  off.diagonals = false;
  const Bytes with = l3::encode(ramp.view(), on), without = l3::encode(ramp.view(), off);
  MESSAGE("ramp 1024 x 256: " << with.size() << " bytes, " << without.size() << " without diagonals");
  CHECK(with.size() * 10 <= without.size() * 6);
  // Effort 0 (one transform and predictor) writes neither.
  l3::EncodeOptions fast;
  fast.effort = 0;
  CHECK(l3::read_info(l3::encode(ramp.view(), fast)).version <= 11);
}

Image ramps(std::uint32_t w, std::uint32_t h, std::uint32_t c, bool noise, std::uint32_t seed) {
  Image im{w, h, c, Bytes(std::size_t(w) * h * c)};
  l3::test::fill_ramps(im.px.data(), w, h, c, noise, seed);
  return im;
}

TEST_CASE("ramps (v14): a plane that is a rounded affine function of the position costs its ramp; round trips, crops, threads") {
  std::vector<Image> images;
  for (std::uint32_t c = 1; c <= 4; ++c) images.push_back(ramps(300, 130, c, false, c));
  images.push_back(ramps(300, 130, 3, true, 7));
  l3::EncodeOptions rice, dense, small_tiles;
  rice.entropy_coding = false;
  dense.effort = 2;
  small_tiles.tile_width = 32;
  small_tiles.tile_height = 8;
  int ramped_streams = 0, smaller_streams = 0;
  for (const Image& im : images)
    for (const l3::EncodeOptions& on : {l3::EncodeOptions{}, rice, dense, small_tiles}) {
      l3::EncodeOptions off = on;
      off.ramps = false;
      const Bytes with = l3::encode(im.view(), on), without = l3::encode(im.view(), off);
      CAPTURE(im.c);
      CAPTURE(on.effort);
      CAPTURE(on.entropy_coding);
      CAPTURE(on.tile_width);
      CHECK(l3::read_info(without).version <= 13);  // readable by version 13 decoders
      CHECK(l3::test::planes_with_ramps(without) == 0);
      const int n = l3::test::planes_with_ramps(with);
      CHECK(n > 0);
      CHECK(l3::read_info(with).version == 14);
      CHECK(with.size() <= without.size());
      ramped_streams += n > 0;
      smaller_streams += with.size() < without.size();
      CHECK(decode(with) == im.px);
      CHECK(decode(with, 4) == im.px);
      check_crops(with, im, {{37, 11, 101, 50}, {0, 0, 1, 1}, {0, 0, im.w, 2}, {255, 30, 1, 5}, {256, 30, 1, 5},
                             {150, 5, 7, 3}, {290, 100, 10, 30}, {100, 62, 57, 68}, {31, 7, 2, 2}});
    }
  MESSAGE("ramps in " << ramped_streams << " of 20 streams, smaller in " << smaller_streams);
  CHECK(ramped_streams == 20);
  CHECK(smaller_streams >= 16);  // the exact ramps' 16 at least
  // The corpus's gradient (bench/make_corpus.py): every plane of every tile
  // ramped exactly, a quarter of the bytes without ramps (0.26 when written).
  Image gradient{1024, 768, 3, Bytes(std::size_t(1024) * 768 * 3)};
  for (std::uint32_t y = 0; y < 768; ++y)
    for (std::uint32_t x = 0; x < 1024; ++x) {
      std::uint8_t* px = &gradient.px[(std::size_t(y) * 1024 + x) * 3];
      px[0] = std::uint8_t(std::nearbyint(x / 1023.0 * 255));
      px[1] = std::uint8_t(std::nearbyint(y / 767.0 * 255));
      px[2] = std::uint8_t(std::nearbyint((x + y) / double(1023 + 767) * 255));
    }
  l3::EncodeOptions off;
  off.ramps = false;
  const Bytes with = l3::encode(gradient.view(), {}), without = l3::encode(gradient.view(), off);
  MESSAGE("gradient 1024 x 768: " << with.size() << " bytes, " << without.size() << " without ramps");
  CHECK(l3::test::planes_with_ramps(with) == 3 * 4 * 24);
  CHECK(with.size() * 10 <= without.size() * 3);
  CHECK(decode(with) == gradient.px);
  // Effort 0 (one transform and predictor) writes none; nor does a photo.
  l3::EncodeOptions fast;
  fast.effort = 0;
  CHECK(l3::test::planes_with_ramps(l3::encode(gradient.view(), fast)) == 0);
}

// A damaged symbol section may read as damaged data, as a limit beyond the
// decoder's (a flipped dictionary size) or as a feature it lacks (a flipped
// flag byte of the dictionary): each an error with its own code.
bool rejected_cleanly(l3::errc e) {
  return l3::is_data_error(e) || e == l3::errc::limit_exceeded || e == l3::errc::unsupported;
}

Image symbol_page(std::uint32_t w, std::uint32_t h, std::uint32_t c, std::uint32_t seed) {
  Image im{w, h, c, Bytes(std::size_t(w) * h * c)};
  l3::test::fill_symbol_page(im.px.data(), w, h, c, seed);
  return im;
}

TEST_CASE("symbols (v15): blocks that repeat are stored once in a dictionary and placed by patches; round trips, crops, threads") {
  l3::EncodeOptions rice, dense, small_tiles;
  rice.entropy_coding = false;
  dense.effort = 2;
  small_tiles.tile_width = 32;
  small_tiles.tile_height = 8;
  std::size_t total_with = 0, total_without = 0;
  for (std::uint32_t c = 1; c <= 4; ++c) {
    const Image im = symbol_page(300, 140, c, c);
    for (const l3::EncodeOptions& on : {l3::EncodeOptions{}, rice, dense, small_tiles}) {
      l3::EncodeOptions off = on;
      off.symbols = false;
      const Bytes with = l3::encode(im.view(), on), without = l3::encode(im.view(), off);
      CAPTURE(c);
      CAPTURE(on.effort);
      CAPTURE(on.entropy_coding);
      CAPTURE(on.tile_width);
      const l3::ImageInfo info = l3::read_info(with), plain = l3::read_info(without);
      CHECK(plain.version <= 14);  // readable by version 14 decoders
      CHECK(plain.symbol_patches == 0);
      CHECK(info.version == 15);
      CHECK(info.symbol_patches > 20);
      CHECK(info.encoded_size == with.size());
      CHECK(with.size() < without.size());
      total_with += with.size();
      total_without += without.size();
      CHECK(decode(with) == im.px);
      CHECK(decode(with, 4) == im.px);
      check_crops(with, im, {{37, 11, 101, 50}, {0, 0, 1, 1}, {0, 0, im.w, 2}, {255, 30, 1, 5}, {256, 30, 1, 5},
                             {150, 5, 7, 3}, {290, 100, 10, 40}, {100, 62, 57, 68}, {31, 7, 2, 2}});
    }
  }
  MESSAGE("all 16: " << total_with << " bytes with symbols, " << total_without << " without");
  CHECK(total_with * 10 < total_without * 7);  // at least 30% smaller in all (44% when written)
  // None at effort 0, without compact tables (version 15's tables are
  // version 9's), or on an image without a background (noise) or repeats.
  const Image page = symbol_page(300, 140, 3, 9);
  l3::EncodeOptions fast, loose;
  fast.effort = 0;
  loose.compact_tables = false;
  CHECK(l3::read_info(l3::encode(page.view(), fast)).symbol_patches == 0);
  CHECK(l3::read_info(l3::encode(page.view(), loose)).symbol_patches == 0);
  CHECK(l3::read_info(encode(make(300, 140, 3, Pattern::noise, 1))).symbol_patches == 0);
  CHECK(l3::read_info(encode(make(300, 140, 1, Pattern::stripes, 1))).symbol_patches == 0);
  // A damaged section is an error, never a crash or wrong pixels silently:
  // every truncation and a flip of every byte after the tiles.
  const Bytes with = encode(page);
  const l3::ImageInfo info = l3::read_info(with);
  REQUIRE(info.symbol_patches > 0);
  const std::size_t tiles_end = l3::test::tiles_end(with);
  for (std::size_t n = tiles_end; n < with.size(); ++n) {
    const Bytes cut(with.begin(), with.begin() + std::ptrdiff_t(n));
    CHECK(l3::is_data_error(error_of([&] { (void)decode(cut); })));
  }
  l3::DecodeOptions unchecked;
  unchecked.verify_checksum = false;
  int rejected = 0, decoded_other = 0;
  for (std::size_t i = tiles_end; i < with.size(); ++i) {
    Bytes flipped = with;
    flipped[i] ^= 0x10;
    // Structure is checked before the checksum (§9): a flip is either.
    const l3::errc checked = error_of([&] { (void)decode(flipped); });
    CHECK(rejected_cleanly(checked));
    const l3::errc e = error_of([&] { (void)l3::decode(flipped, nullptr, unchecked); });
    CHECK((e == l3::errc::ok || rejected_cleanly(e)));
    rejected += e != l3::errc::ok;
    decoded_other += e == l3::errc::ok;
  }
  MESSAGE("section bytes flipped, without the checksum: " << rejected << " rejected, " << decoded_other << " decoded");
  CHECK(rejected > 0);
}

TEST_CASE("tile copies (v5): a tile equal to an earlier one costs its table entry; round trips, crops, threads") {
  // spec/codec.md §3.3. A horizontal gradient (every tile column repeats down
  // the image), a 2-pixel chessboard whose period divides the tile, and the
  // same with clipped edge tiles: clipped tiles copy only tiles of their size.
  Image ramp = make(700, 300, 3, Pattern::gradient, 80);
  for (std::uint32_t y = 0; y < ramp.h; ++y)  // rows all alike: tiles repeat down each column
    std::memcpy(&ramp.px[std::size_t(y) * ramp.w * 3], &ramp.px[0], std::size_t(ramp.w) * 3);
  Image chess{600, 250, 1, Bytes(600 * 250)};
  for (std::uint32_t y = 0; y < chess.h; ++y)
    for (std::uint32_t x = 0; x < chess.w; ++x) chess.px[y * chess.w + x] = (x / 2 + y / 2) % 2 ? 200 : 20;
  l3::EncodeOptions no_copies;
  no_copies.tile_copies = false;
  no_copies.pixel_copies = false;  // versions of their own (v6, v7)
  no_copies.plane_contexts = no_copies.corrections = false;
  no_copies.compact_tables = false;  // version 9 (§4.5)
  for (const Image& im : {ramp, chess}) {
    for (std::uint32_t tw : {0u, 64u}) {
      l3::EncodeOptions on;
      on.pixel_copies = false;
      on.plane_contexts = on.corrections = false;
      on.compact_tables = false;  // version 9 (§4.5)
      on.tile_width = no_copies.tile_width = tw;
      const Bytes with = l3::encode(im.view(), on), without = l3::encode(im.view(), no_copies);
      const l3::ImageInfo info = l3::read_info(with);
      std::uint32_t copies = 0;
      for (std::uint32_t i = 0; i < info.tiles_x * info.tiles_y; ++i) {
        std::uint32_t entry;
        std::memcpy(&entry, &with[l3::core::kHeaderSize + 4 * i], 4);
        copies += entry >> 31;
      }
      CAPTURE(im.c);
      CAPTURE(tw);
      MESSAGE(im.w << "x" << im.h << "x" << im.c << ", tiles " << info.tile_width << " wide: " << with.size()
                   << " bytes with " << copies << " tile copies, " << without.size() << " without");
      // All but the first tile row's tiles (and the bottom row's clipped ones) are copies.
      CHECK(copies >= (info.tiles_y - 2) * info.tiles_x);
      CHECK(info.tile_copies == copies);  // read_info counts the copies it validated
      CHECK(l3::read_info(without).tile_copies == 0);
      CHECK(info.version == 5);
      CHECK(l3::read_info(without).version <= 4);  // readable by version 4 decoders
      CHECK(with.size() * 3 < without.size());
      CHECK(decode(with) == im.px);
      CHECK(decode(with, 4) == im.px);
      CHECK(decode(without) == im.px);
      // Crops that hold whole source tiles, whose copies the decoder takes
      // from the source's decoded rows, beside copies it decodes itself.
      check_crops(with, im, {{37, 11, 201, 50}, {0, 0, 1, 1}, {0, 200, 600, 50}, {590, 240, 10, 10}, {255, 30, 2, 5},
                             {0, 0, 600, 100}, {0, 0, 512, 250}, {0, 10, 256, 150}});
    }
  }
  // Into a padded output, and with the source of every copy damaged: the
  // error names the source tile, whatever the number of threads.
  {
    const Bytes enc = encode(chess);
    const std::size_t stride = std::size_t(chess.w) + 13;
    Bytes padded(stride * chess.h, 0x5a);
    l3::decode(enc, {padded.data(), chess.w, chess.h, 1, stride});
    for (std::uint32_t y = 0; y < chess.h; ++y)
      CHECK(std::memcmp(&padded[y * stride], &chess.px[std::size_t(y) * chess.w], chess.w) == 0);
    const l3::ImageInfo info = l3::read_info(enc);
    Bytes damaged = enc;
    damaged[l3::core::kHeaderSize + 4 * std::size_t(info.tiles_x) * info.tiles_y] = 0x03;  // tile 0: kind 3
    for (unsigned threads : {1u, 4u}) {
      l3::DecodeOptions unchecked;
      unchecked.verify_checksum = false;
      unchecked.threads = threads;
      std::string message;
      try {
        l3::decode(damaged, nullptr, unchecked);
      } catch (const l3::Error& e) {
        CHECK(e.code() == l3::errc::corrupt_tile);
        message = e.what();
      }
      CAPTURE(message);
      CHECK(message.find("tile 0") != std::string::npos);
    }
  }
  // A tile that differs from an earlier one in a single sample is coded, not copied.
  Image almost = chess;
  almost.px[std::size_t(40) * almost.w + 300] ^= 1;
  const Bytes enc = encode(almost), exact = encode(chess);
  CHECK(enc.size() > exact.size());
  CHECK(decode(enc) == almost.px);
}

TEST_CASE("tile height: an image whose rows repeat across 32-row tiles gets the height that makes them copies") {
  // spec §3.1, §3.3: a chessboard of 25-pixel squares with soft edges (the
  // scikit-image chessboard: period 50 rows, the first square's top edge not
  // softened) codes 4 of 8 tiles 25 rows high, 7 of 7 at 32.
  const std::uint32_t side = 200, square = 25;
  auto chessboard = [&](std::uint32_t c) {
    Image im{side, side, c, Bytes(std::size_t(side) * side * c)};
    auto level = [&](std::uint32_t x, std::uint32_t y) {
      const bool dark = (x / square + y / square) % 2;
      const bool edge_x = x % square == 0 && x > 0, edge_y = y % square == 0 && y > 0;
      return std::uint8_t(dark ? (edge_x || edge_y ? 50 : 0) : (edge_x || edge_y ? 205 : 255));
    };
    for (std::uint32_t y = 0; y < side; ++y)
      for (std::uint32_t x = 0; x < side; ++x)
        for (std::uint32_t k = 0; k < c; ++k) im.px[(std::size_t(y) * side + x) * c + k] = std::uint8_t(level(x, y) ^ (k * 7));
    return im;
  };
  for (std::uint32_t c : {1u, 3u}) {
    const Image im = chessboard(c);
    l3::EncodeOptions fixed;
    fixed.tile_height = 32;
    const Bytes chosen = encode(im), at_32 = l3::encode(im.view(), fixed);
    CAPTURE(c);
    CHECK(l3::read_info(chosen).tile_height == 25);
    CHECK(l3::read_info(chosen).tile_copies >= 4);
    CHECK(l3::read_info(at_32).tile_height == 32);
    MESSAGE(c << " channels: " << chosen.size() << " bytes in 25-row tiles, " << at_32.size() << " in 32-row tiles");
    CHECK(chosen.size() * 3 < at_32.size() * 2);
    CHECK(decode(chosen) == im.px);
    check_crops(chosen, im, {{0, 0, 200, 60}, {13, 40, 100, 100}});
  }
  // Kept at 32: rows that do not repeat, rows all alike (any height codes one
  // band), effort 0, and a height the caller chose.
  const Image noise = make(300, 200, 3, Pattern::noise, 5);
  Image ramp = make(300, 200, 3, Pattern::gradient, 5);
  for (std::uint32_t y = 1; y < ramp.h; ++y) std::memcpy(&ramp.px[std::size_t(y) * ramp.w * 3], &ramp.px[0], ramp.w * 3);
  CHECK(l3::read_info(encode(noise)).tile_height == 32);
  CHECK(l3::read_info(encode(ramp)).tile_height == 32);
  l3::EncodeOptions effort0, chosen_height;
  effort0.effort = 0;
  chosen_height.tile_height = 20;
  CHECK(l3::read_info(l3::encode(chessboard(1).view(), effort0)).tile_height == 32);
  CHECK(l3::read_info(l3::encode(chessboard(1).view(), chosen_height)).tile_height == 20);
}

TEST_CASE("pixel copies (v6): a repeat in the row or the 4 rows above costs a length and an offset; round trips, crops, threads") {
  // spec/codec.md §4.6, §6.6. Text-like images (test_tile_pattern.hpp) in 1-4
  // channels, on a flat background (palette tiles) or a varied one (more
  // colours than a palette: transformed tiles), the default tiles and 64 x 16.
  l3::EncodeOptions no_copies;
  no_copies.pixel_copies = false;
  no_copies.plane_contexts = no_copies.corrections = false;  // versions of their own (v7, v8)
  no_copies.compact_tables = false;  // version 9 (§4.5)
  std::size_t total_with = 0, total_without = 0;
  int copy_tiles = 0, palette_copy_tiles = 0, images_with_copies = 0;
  for (std::uint32_t c = 1; c <= 4; ++c)
    for (const bool colourful : {false, true}) {
      Image im{520, 150, c, Bytes(std::size_t(520) * 150 * c)};
      l3::test::fill_glyph_text(im.px.data(), im.w, im.h, c, c, colourful);
      for (std::uint32_t tw : {0u, 64u}) {
        l3::EncodeOptions on;
        on.plane_contexts = on.corrections = false;
        on.compact_tables = false;  // version 9 (§4.5)
        on.tile_width = no_copies.tile_width = tw;
        on.tile_height = no_copies.tile_height = tw ? 16 : 0;
        const Bytes with = l3::encode(im.view(), on), without = l3::encode(im.view(), no_copies);
        int tiles = 0;
        for (const auto& [tile, t] : coded_tiles(with)) {
          tiles += t.copies;
          palette_copy_tiles += t.copies && t.palette_size;
          CHECK((!t.copies || t.ans));  // copies are entropy-coded values (§4.6)
        }
        CAPTURE(c);
        CAPTURE(colourful);
        CAPTURE(tw);
        MESSAGE(im.w << "x" << im.h << "x" << c << std::string(colourful ? " varied" : " flat") << ", tiles "
                     << (tw ? tw : 256) << " wide: " << with.size() << " bytes with pixel copies (" << tiles
                     << " tiles), " << without.size() << " without");
        copy_tiles += tiles;
        images_with_copies += tiles > 0;
        total_with += with.size();
        total_without += without.size();
        CHECK(l3::read_info(with).version == (tiles ? 6 : l3::read_info(without).version));
        CHECK(l3::read_info(without).version <= 5);  // readable by version 5 decoders
        CHECK(with.size() <= without.size());
        CHECK(decode(with) == im.px);
        CHECK(decode(with, 4) == im.px);
        CHECK(decode(without) == im.px);
        check_crops(with, im, {{37, 11, 201, 50}, {0, 0, 1, 1}, {0, 100, 520, 50}, {519, 149, 1, 1}, {255, 30, 2, 5},
                               {300, 17, 64, 3}});
        const Bytes dense = encode(im, tw, tw ? 16 : 0, 2);
        CHECK(dense.size() <= with.size());
        CHECK(decode(dense) == im.px);
      }
    }
  MESSAGE("all 16: " << total_with << " bytes with pixel copies, " << total_without << " without; " << copy_tiles
                     << " tiles with copies, " << palette_copy_tiles << " of them palette tiles");
  CHECK(images_with_copies >= 8);  // the varied ones (flat bilevel text codes cheaply as runs already)
  CHECK(palette_copy_tiles > 0);
  CHECK(copy_tiles > palette_copy_tiles);  // transformed tiles too
  CHECK(total_with * 10 < total_without * 8);  // at least 20% smaller in all
}

// The cases of a coding feature tested on and off (versions 7 and 8):
// images of `first`..4 channels and opaque RGBA (a constant alpha plane)
// filled by `fill(px, w, h, channels, seed)`, Rice- and entropy-coded tiles,
// effort 1 and 2, the default tiles and 64 x 16. `switch_off(on, off)` sets
// the options that differ; `check(with, without, effort)` checks one case,
// then its round trips (1 and 4 threads, crops). Returns the bytes of all
// `with` and all `without` streams.
template <class Fill, class SwitchOff, class Check>
std::pair<std::size_t, std::size_t> feature_on_off(std::uint32_t first, Fill&& fill, SwitchOff&& switch_off,
                                                   Check&& check) {
  std::size_t total_with = 0, total_without = 0;
  for (std::uint32_t c = first; c <= 4; ++c)
    for (const bool opaque : {false, true}) {
      if (opaque && c != 4) continue;
      Image im{400, 120, c, Bytes(std::size_t(400) * 120 * c)};
      fill(im.px.data(), im.w, im.h, c, c);
      if (opaque)
        for (std::size_t i = 3; i < im.px.size(); i += 4) im.px[i] = 255;
      for (const bool entropy_coding : {true, false})
        for (int effort : {1, 2})
          for (std::uint32_t tw : {0u, 64u}) {
            l3::EncodeOptions on, off;
            on.entropy_coding = off.entropy_coding = entropy_coding;
            on.effort = off.effort = effort;
            on.tile_width = off.tile_width = tw;
            on.tile_height = off.tile_height = tw ? 16 : 0;
            switch_off(on, off);
            const Bytes with = l3::encode(im.view(), on), without = l3::encode(im.view(), off);
            CAPTURE(c);
            CAPTURE(opaque);
            CAPTURE(entropy_coding);
            CAPTURE(effort);
            CAPTURE(tw);
            total_with += with.size();
            total_without += without.size();
            check(with, without, effort);
            CHECK(decode(with) == im.px);
            CHECK(decode(with, 4) == im.px);
            check_crops(with, im, {{37, 11, 301, 50}, {0, 0, 1, 1}, {255, 2, 2, 5}, {100, 30, 157, 33}});
          }
    }
  return {total_with, total_without};
}

TEST_CASE("plane contexts (v7): a plane's context may add the code of the plane before; round trips, crops, threads") {
  // spec/codec.md §6.2. Planes that err together (test_tile_pattern.hpp),
  // 2-4 channels, opaque RGBA (a constant alpha plane: never with the
  // context), Rice-coded and entropy-coded tiles, effort 1 and 2, the
  // default tiles and 64 x 16.
  int planes = 0;
  const auto [total_with, total_without] = feature_on_off(
      2, l3::test::fill_shared_noise,
      [](l3::EncodeOptions& on, l3::EncodeOptions& off) {
        off.plane_contexts = off.corrections = on.corrections = false;  // version 7 alone
        off.compact_tables = on.compact_tables = false;                 // version 9 (§4.5)
      },
      [&](const Bytes& with, const Bytes& without, int) {
        int n = 0;
        for (const auto& [tile, t] : coded_tiles(with))
          for (int p = 0; p < t.channels; ++p) {
            n += t.plane[p].previous_code;
            CHECK((!t.plane[p].previous_code || (p > 0 && !t.plane[p].constant && !t.plane[p - 1].constant)));
          }
        planes += n;
        CHECK(n > 0);
        CHECK(l3::read_info(with).version == 7);
        CHECK(l3::read_info(without).version <= 6);  // readable by version 6 decoders
      });
  MESSAGE("all: " << total_with << " bytes with plane contexts (" << planes << " tile planes), " << total_without
                  << " without");
  CHECK(total_with * 1000 < total_without * 990);  // at least 1% smaller in all (2.0% when written, 1.3% with the
                                                   // transform chosen by log magnitudes)
  l3::EncodeOptions fixed;
  fixed.effort = 0;  // effort 0 (fixed choices) writes none
  Image im{200, 64, 3, Bytes(std::size_t(200) * 64 * 3)};
  l3::test::fill_shared_noise(im.px.data(), im.w, im.h, 3, 9);
  CHECK(l3::test::planes_with_previous_code(l3::encode(im.view(), fixed)) == 0);
}

TEST_CASE("residual corrections (v8): a bias and a sign flip per gradient class; round trips, crops, threads") {
  // spec/codec.md §6.7. Stepped ramps (test_tile_pattern.hpp), 1-4 channels
  // and opaque RGBA (a constant alpha plane: never corrected), Rice-coded and
  // entropy-coded tiles, effort 1 and 2, the default tiles and 64 x 16.
  int planes = 0;
  const auto [total_with, total_without] = feature_on_off(
      1, l3::test::fill_stepped_ramps,
      [](l3::EncodeOptions& on, l3::EncodeOptions& off) {
        off.corrections = false;
        on.compact_tables = off.compact_tables = false;  // version 8 exactly (compact tables: version 9)
      },
      [&](const Bytes& with, const Bytes& without, int effort) {
        const int n = l3::test::planes_with_corrections(with);
        for (const auto& [tile, t] : coded_tiles(with))
          for (int p = 0; p < t.channels; ++p) CHECK((!t.plane[p].corrected || !t.plane[p].constant));
        planes += n;
        // Effort 1 takes them by estimate; effort 2 codes each tile with
        // and without and keeps the smaller (which may be none of them).
        if (effort == 1) CHECK(n > 0);
        else CHECK(with.size() <= without.size());
        CHECK(l3::read_info(with).version == (n ? 8 : l3::read_info(without).version));
        CHECK(l3::read_info(without).version <= 7);  // readable by version 7 decoders
      });
  MESSAGE("all: " << total_with << " bytes with residual corrections (" << planes << " tile planes), "
                  << total_without << " without");
  CHECK(total_with * 100 < total_without * 95);  // at least 5% smaller in all
  l3::EncodeOptions fixed;
  fixed.effort = 0;  // effort 0 (fixed choices) writes none
  Image im{200, 64, 3, Bytes(std::size_t(200) * 64 * 3)};
  l3::test::fill_stepped_ramps(im.px.data(), im.w, im.h, 3, 9);
  CHECK(l3::test::planes_with_corrections(l3::encode(im.view(), fixed)) == 0);
}

TEST_CASE("set_entropy_mode: the users' spelling of the entropy setting (l3pack --entropy, Python entropy=)") {
  const Image p = make(256, 64, 3, Pattern::gradient, 43);
  auto encode_with = [&](const char* mode) {
    l3::EncodeOptions o;
    l3::set_entropy_mode(o, mode);
    const std::string name = mode;
    CHECK(l3::entropy_mode(o) == (name == "7" ? "auto" : name == "0" ? "max" : name));
    return l3::encode(p.view(), o);
  };
  l3::EncodeOptions rice, every;
  rice.entropy_coding = false;
  every.entropy_min_saving_percent = 0;
  CHECK(encode_with("auto") == encode(p));
  CHECK(encode_with("off") == l3::encode(p.view(), rice));
  for (const auto& [tile, t] : coded_tiles(encode_with("off"))) CHECK(!t.ans);  // no entropy-coded tile
  CHECK(encode_with("max") == l3::encode(p.view(), every));
  CHECK(encode_with("0") == encode_with("max"));
  CHECK(encode_with("7") == encode_with("auto"));
  l3::EncodeOptions o;
  l3::set_entropy_mode(o, "25");
  CHECK(o.entropy_coding);
  CHECK(o.entropy_min_saving_percent == 25);
  CHECK(l3::entropy_mode(o) == "25");
  for (const char* bad : {"", "on", "101", "-1", "10%", " 5", "1e1"}) {
    CAPTURE(bad);
    l3::EncodeOptions untouched;
    CHECK_THROWS_WITH_AS(l3::set_entropy_mode(untouched, bad),
                         doctest::Contains("must be auto, off, max or a percentage 0..100"), l3::Error);
    CHECK(l3::entropy_mode(untouched) == "auto");
  }
  l3::EncodeOptions too_much;
  too_much.entropy_min_saving_percent = 101;
  CHECK_THROWS_AS(l3::encode(p.view(), too_much), l3::Error);
}

TEST_CASE("palette tiles (v2): few-colour images code as indices") {
  // spec/codec.md §4.4. An RGB label mask of 8 colours: one plane of indices
  // instead of three planes of colour jumps at every boundary.
  Image labels = make(600, 300, 1, Pattern::labels, 31);
  labels.c = 3;
  Bytes rgb(labels.px.size() * 3);
  for (std::size_t i = 0; i < labels.px.size(); ++i)
    for (int k = 0; k < 3; ++k) rgb[3 * i + std::size_t(k)] = std::uint8_t(labels.px[i] * 37 * (k + 1) + 11 * k);
  labels.px = std::move(rgb);
  const Bytes e1 = encode(labels), e0 = encode(labels, 0, 0, 0);
  MESSAGE("labels RGB: " << e1.size() << " bytes with palettes, " << e0.size() << " at effort 0");
  CHECK(decode(e1) == labels.px);
  CHECK(e1.size() * 3 < e0.size() * 2);
  // A 1-pixel chessboard of 0 and 255: indices 0 and 1 instead of jumps of
  // 255 (version 1 stored it raw, 8 bits per pixel; no predictor of §6.1
  // predicts it, so about 2 bits per pixel remain).
  Image chess{512, 64, 1, Bytes(512 * 64)};
  for (std::uint32_t y = 0; y < chess.h; ++y)
    for (std::uint32_t x = 0; x < chess.w; ++x) chess.px[y * chess.w + x] = (x + y) % 2 ? 255 : 0;
  const Bytes ec = encode(chess);
  MESSAGE("1-pixel chessboard: " << double(ec.size()) * 8 / (512.0 * 64) << " bits per pixel");
  CHECK(decode(ec) == chess.px);
  CHECK(double(ec.size()) * 8 / (512.0 * 64) < 3);
  // Crops of palette tiles.
  const l3::Rect r{37, 11, 301, 150};
  Bytes out(std::size_t(r.width) * r.height * 3);
  l3::decode_region(e1, r, {out.data(), r.width, r.height, 3, 0});
  CHECK(out == crop(labels, r));
}

TEST_CASE("palette order: colours that touch get neighbouring indices where brightness order would not") {
  // spec/codec.md §4.4, §12. Left half a 1-pixel chessboard of black and
  // white, right half one of two mid grays: by brightness the palette is
  // black, gray 1, gray 2, white, which puts black and white 3 indices
  // apart; by adjacency each chessboard's two colours are neighbours.
  const std::uint8_t colour[4] = {0, 255, 120, 135};  // black, white, gray 1, gray 2
  Image im{128, 32, 3, Bytes(128 * 32 * 3)};
  for (std::uint32_t y = 0; y < im.h; ++y)
    for (std::uint32_t x = 0; x < im.w; ++x)
      for (int k = 0; k < 3; ++k) im.px[(std::size_t(y) * im.w + x) * 3 + std::size_t(k)] = colour[(x >= 64 ? 2 : 0) + (x + y) % 2];
  const Bytes enc = encode(im);
  CHECK(decode(enc) == im.px);
  const auto tiles = coded_tiles(enc);
  REQUIRE(tiles.size() == 1);
  const auto& [tile, t] = tiles[0];
  REQUIRE(t.palette_size == 4);
  REQUIRE(t.palette_mask == 0);  // every channel stored per colour
  int index_of[256];
  for (std::uint32_t i = 0; i < 4; ++i) index_of[tile[t.palette_at + 3 * i]] = int(i);
  CHECK(std::abs(index_of[0] - index_of[255]) == 1);
  CHECK(std::abs(index_of[120] - index_of[135]) == 1);
  // Where brightness order keeps touching colours together (a gradient of
  // 40 levels, each next to the next), the stream decodes as well.
  Image ramp{256, 32, 3, Bytes(256 * 32 * 3)};
  for (std::uint32_t y = 0; y < ramp.h; ++y)
    for (std::uint32_t x = 0; x < ramp.w; ++x)
      for (int k = 0; k < 3; ++k) ramp.px[(std::size_t(y) * ramp.w + x) * 3 + std::size_t(k)] = std::uint8_t(((x + y) / 7) * 5 + k);
  const Bytes r = encode(ramp);
  CHECK(decode(r) == ramp.px);
}

TEST_CASE("effort 2: one-plane tiles (gray, palette indices) keep the predictor that codes smallest") {
  // spec/codec.md §12. With Rice codes only, effort 2 differs from effort 1
  // on a gray image only in trying every predictor of §6.1 by coded size
  // (effort 1 takes the estimate's, sums of absolute residuals): never
  // larger, and smaller on the sample photo.
  l3::EncodeOptions rice1, rice2;
  rice1.entropy_coding = rice2.entropy_coding = false;
  rice2.effort = 2;
  const l3::Image photo = l3::load_image(kSourceDir / "bench" / "sample" / "camera.png");
  REQUIRE(photo.channels == 1);
  const Image camera{photo.width, photo.height, photo.channels, photo.pixels};
  for (const Image& im : {camera, make(600, 200, 1, Pattern::smooth_noise, 71), make(300, 100, 1, Pattern::labels, 72)}) {
    const Bytes e1 = l3::encode(im.view(), rice1), e2 = l3::encode(im.view(), rice2);
    MESSAGE("gray " << im.w << "x" << im.h << ": effort 1 " << e1.size() << " bytes, effort 2 " << e2.size());
    CHECK(e2.size() <= e1.size());
    CHECK(decode(e2) == im.px);
  }
  CHECK(l3::encode(camera.view(), rice2).size() < l3::encode(camera.view(), rice1).size());
}

TEST_CASE("spec/vectors/codec: valid vectors decode to their pixels, invalid ones give their error") {
  int valid = 0, invalid = 0;
  for (const auto& entry : fs::directory_iterator(kSourceDir / "spec" / "vectors" / "codec")) {
    if (entry.path().extension() != ".l3i") continue;
    fs::path txt = entry.path();
    txt.replace_extension(".txt");
    std::ifstream t(txt);
    std::string kind;
    t >> kind;
    const Bytes enc = read_file(entry.path());
    CAPTURE(entry.path().filename().string());
    if (kind == "valid") {
      std::uint32_t w, h, c;
      t >> w >> h >> c;
      fs::path px = entry.path();
      px.replace_extension(".rgba");
      const l3::ImageInfo info = l3::read_info(enc);
      CHECK(info.width == w);
      CHECK(info.height == h);
      CHECK(info.channels == c);
      CHECK(decode(enc) == read_file(px));
      ++valid;
    } else {
      REQUIRE(kind == "error");
      std::string name;
      std::getline(t >> std::ws, name);
      const l3::errc got = error_of([&] { (void)decode(enc); });
      CHECK(std::string(l3::errc_name(got)) == name);
      CHECK(l3::is_data_error(got) == (name != "limit exceeded" && name != "unsupported"));
      ++invalid;
    }
  }
  CHECK(valid >= 8);
  CHECK(invalid >= 30);
}

TEST_CASE("cpu_decode_path: avx512 on a CPU with AVX-512, else avx2 on one with AVX2, capped by L3_MAX_ISA and L3_FORCE_SCALAR, else scalar") {
  const std::string path = l3::cpu_decode_path();
  bool avx512 = false, avx2 = false;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512cd");
  avx2 = __builtin_cpu_supports("avx2");
#endif
  const char* force = std::getenv("L3_FORCE_SCALAR");
  const char* cap = std::getenv("L3_MAX_ISA");
  if ((force != nullptr && std::string(force) != "0") || (cap != nullptr && std::string(cap) == "scalar"))
    avx512 = avx2 = false;
  if (cap != nullptr && std::string(cap) == "avx2") avx512 = false;
  MESSAGE("cpu_decode_path: " << path);
  CHECK(path == (avx512 ? "avx512" : avx2 ? "avx2" : "scalar"));
}

TEST_CASE("caller errors") {
  const Image im = make(20, 10, 3, Pattern::gradient, 1);
  using l3::errc;
  CHECK(error_of([&] { l3::encode(l3::ImageView{nullptr, 20, 10, 3, 0}); }) == errc::invalid_argument);
  CHECK(error_of([&] { l3::encode(l3::ImageView{im.px.data(), 20, 10, 0, 0}); }) == errc::invalid_argument);
  CHECK(error_of([&] { l3::encode(l3::ImageView{im.px.data(), 20, 10, 5, 0}); }) == errc::invalid_argument);
  CHECK(error_of([&] { l3::encode(l3::ImageView{im.px.data(), 0, 10, 3, 0}); }) == errc::invalid_argument);
  CHECK(error_of([&] { l3::encode(l3::ImageView{im.px.data(), 20, 10, 3, 59}); }) == errc::invalid_argument);
  CHECK(error_of([&] { encode(im, 24, 0); }) == errc::invalid_argument);
  CHECK(error_of([&] { encode(im, 512, 0); }) == errc::invalid_argument);
  CHECK(error_of([&] { encode(im, 0, 33); }) == errc::invalid_argument);
  CHECK(error_of([&] { encode(im, 0, 0, 3); }) == errc::invalid_argument);
  CHECK(error_of([&] { encode(im, 0, 0, -1); }) == errc::invalid_argument);
  const Bytes enc = encode(im);
  Bytes out(20 * 10 * 3);
  CHECK(error_of([&] { l3::decode(enc, l3::MutableImageView{out.data(), 19, 10, 3, 0}); }) == errc::invalid_argument);
  CHECK(error_of([&] { l3::decode(enc, l3::MutableImageView{out.data(), 20, 10, 4, 0}); }) == errc::invalid_argument);
  CHECK(error_of([&] { l3::decode(enc, l3::MutableImageView{nullptr, 20, 10, 3, 0}); }) == errc::invalid_argument);
  CHECK(error_of([&] {
          l3::decode_region(enc, l3::Rect{15, 0, 6, 1}, l3::MutableImageView{out.data(), 6, 1, 3, 0});
        }) == errc::out_of_range);
  CHECK(error_of([&] {
          l3::decode_region(enc, l3::Rect{0, 0, 0, 1}, l3::MutableImageView{out.data(), 0, 1, 3, 0});
        }) == errc::out_of_range);
  CHECK(l3::is_caller_error(errc::invalid_argument));
  CHECK_FALSE(l3::is_data_error(errc::invalid_argument));
}

TEST_CASE("decoder limits are checked from the header before decoding") {
  const Image im = make(300, 200, 1, Pattern::smooth_noise, 2);
  const Bytes enc = encode(im);
  l3::Limits small;
  small.max_width = 299;
  CHECK(error_of([&] { l3::read_info(enc, small); }) == l3::errc::limit_exceeded);
  small = {};
  small.max_pixels = 300 * 200 - 1;
  CHECK(error_of([&] { l3::read_info(enc, small); }) == l3::errc::limit_exceeded);
  l3::DecodeOptions o;
  o.limits.max_height = 100;
  CHECK(error_of([&] { l3::decode(enc, nullptr, o); }) == l3::errc::limit_exceeded);
  CHECK(l3::read_info(enc).encoded_size == enc.size());
}

TEST_CASE("corrupt input: truncations, bit flips and random bytes never crash") {
  std::minstd_rand rng(2024);
  l3::DecodeOptions unchecked;
  unchecked.verify_checksum = false;
  for (std::uint32_t c : {1u, 3u, 4u}) {
    // Labels: palette tiles (spec §4.4) among the corrupted streams.
    const Image im = make(90, 40, c, c >= 3 ? Pattern::labels : Pattern::smooth_noise, 11 + c);
    const Bytes enc = encode(im, 32, 16);
    // Every truncation: an error, never pixels.
    for (std::size_t n = 0; n < enc.size(); ++n) {
      const Bytes cut(enc.begin(), enc.begin() + std::ptrdiff_t(n));
      CHECK(l3::is_data_error(error_of([&] { (void)decode(cut); })));
    }
    // Bit flips anywhere: always reported (the checksum covers every byte,
    // spec §2). Without the checksum the decoder still reports most, and
    // never reads or writes out of bounds (ASan in CI).
    int detected_without_checksum = 0;
    for (int i = 0; i < 400; ++i) {
      Bytes bad = enc;
      const std::size_t at = rng() % bad.size();
      bad[at] ^= std::uint8_t(1u << (rng() % 8));
      CHECK(error_of([&] { (void)decode(bad); }) != l3::errc::ok);
      Bytes out;
      const l3::errc e = error_of([&] { out = l3::decode(bad, nullptr, unchecked); });
      // (A flipped width or height that keeps the tile grid may decode: a
      // constant tile's bytes do not depend on its size, spec §4.1.)
      const bool size_flipped = at >= 8 && at < 16;
      if (e == l3::errc::ok && !size_flipped) CHECK(out.size() == im.px.size());
      detected_without_checksum += e != l3::errc::ok;
    }
    MESSAGE("bit flips detected without the checksum: " << detected_without_checksum << "/400");
    // Random tile bytes behind a valid header and table.
    for (int i = 0; i < 100; ++i) {
      Bytes bad = enc;
      for (std::size_t j = 28 + 4 * 9; j < bad.size(); ++j) bad[j] = std::uint8_t(rng());
      CHECK(error_of([&] { (void)decode(bad); }) == l3::errc::checksum_mismatch);
      (void)error_of([&] { (void)l3::decode(bad, nullptr, unchecked); });
      // Region decode of random bytes must be as safe as a full decode.
      Bytes out(10 * 10 * c);
      (void)error_of([&] {
        l3::decode_region(bad, l3::Rect{40, 20, 10, 10}, l3::MutableImageView{out.data(), 10, 10, c, 0}, unchecked);
      });
    }
  }
}

// The CPU decoder's refills load 8 bytes at a time up to the end of the
// encoded stream, so a row stream that is read past its end sees the next
// rows' bytes, not zeros (spec §7.3). A row whose bytes are zeroed (its rANS
// state kept) fails its end check: each such tile must still be rejected by
// a full decode, and by a crop of its first rows where the row reads past
// its end (every Rice row does), and never read outside the stream (ASan),
// also in the stream's last row.
TEST_CASE("a row stream read past its end is rejected whatever bytes follow it") {
  l3::DecodeOptions unchecked;
  unchecked.verify_checksum = false;
  for (bool ans : {false, true})
    for (std::uint32_t c : {1u, 3u}) {
      const Image im = make(300, 70, c, Pattern::smooth_noise, 40 + c);
      l3::EncodeOptions eo;
      eo.entropy_coding = ans;
      eo.entropy_min_saving_percent = 0;
      const Bytes enc = l3::encode(im.view(), eo);
      const l3::ImageInfo info = l3::read_info(enc);
      std::size_t at = l3::core::kHeaderSize + 4 * std::size_t(info.tiles_x) * info.tiles_y;
      int rows_tested = 0, ans_rows = 0;
      for (std::uint32_t i = 0; i < info.tiles_x * info.tiles_y; ++i) {
        std::uint32_t size;
        std::memcpy(&size, &enc[l3::core::kHeaderSize + 4 * std::size_t(i)], 4);
        const std::size_t tile_at = at;
        at += size;
        if ((enc[tile_at] & 3) != l3::core::kTileCoded) continue;
        const std::uint32_t tx = i % info.tiles_x, ty = i / info.tiles_x;
        const std::uint32_t w = std::min(info.tile_width, info.width - tx * info.tile_width);
        const std::uint32_t h = std::min(info.tile_height, info.height - ty * info.tile_height);
        l3::core::CodedTileParams t;
        REQUIRE(l3::core::parse_coded_tile(&enc[tile_at], size, int(w), int(h), int(info.channels),
                                           int(info.version), t) == l3::core::kOk);
        for (std::uint32_t r : {0u, h / 2, h - 1}) {
          if (t.row_length[r] < 8) continue;  // too short to be sure it overruns
          Bytes bad = enc;
          const std::size_t keep = t.ans ? 4 : 0;  // the row's initial rANS state (spec §7.4)
          std::memset(&bad[tile_at + t.row_offset[r] + keep], 0, t.row_length[r] - keep);
          CAPTURE(ans);
          CAPTURE(c);
          CAPTURE(i);
          CAPTURE(r);
          CAPTURE(t.row_length[r]);
          CHECK(error_of([&] { (void)l3::decode(bad, nullptr, unchecked); }) == l3::errc::corrupt_tile);
          // A crop down to that row, the tile's full width. A crop cannot
          // check the row's end (spec §7.3), only that it read no more than
          // its stream: a zeroed Rice row always does (each code an escape,
          // 30 bits a sample), a zeroed rANS row only where its tables make
          // zero bits decode to rare tokens (a frequent token takes a
          // fraction of a bit), so there the crop may decode wrong pixels,
          // and must fail cleanly where it does not.
          const l3::Rect region{tx * info.tile_width, ty * info.tile_height, w, r + 1};
          Bytes out(std::size_t(region.width) * region.height * c);
          const l3::errc crop = error_of([&] {
            l3::decode_region(bad, region, {out.data(), region.width, region.height, c, 0}, unchecked);
          });
          if (t.ans) CHECK((crop == l3::errc::corrupt_tile || crop == l3::errc::ok));
          else CHECK(crop == l3::errc::corrupt_tile);
          ++rows_tested;
          ans_rows += t.ans;
        }
      }
      CAPTURE(ans);
      CHECK(rows_tested >= 6);
      CHECK((ans_rows > 0) == ans);
    }
}
