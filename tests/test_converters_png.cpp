// PNG loading and saving (l3_imageio), checked against images written directly with libpng.
#include <doctest/doctest.h>

#include "l3/imageio/image_io.hpp"
#include "test_converters_helpers.hpp"

using l3::test::PngSpec;
using l3::test::make_png;
using l3::test::load_error;

namespace {

std::vector<std::uint16_t> random_samples(std::size_t n, int bit_depth, std::uint32_t seed) {
  auto bytes = l3::test::random_bytes(n, seed, (1 << bit_depth) - 1);
  return {bytes.begin(), bytes.end()};
}

l3::Image decode(const std::vector<std::uint8_t>& bytes, const l3::LoadOptions& options = {}) {
  return l3::decode_image_bytes(bytes, options);
}

PngSpec spec(std::uint32_t w, std::uint32_t h, int color_type, int depth, std::uint32_t seed) {
  PngSpec s;
  s.width = w;
  s.height = h;
  s.color_type = color_type;
  s.bit_depth = depth;
  s.samples = random_samples(std::size_t{w} * h * l3::test::file_channels(color_type), depth, seed);
  return s;
}

std::vector<png_color> random_palette(std::size_t n) {
  auto bytes = l3::test::random_bytes(3 * n, 99);
  std::vector<png_color> palette(n);
  for (std::size_t i = 0; i < n; ++i) palette[i] = {bytes[3 * i], bytes[3 * i + 1], bytes[3 * i + 2]};
  return palette;
}

// What a palette image must decode to: RGB, or RGBA when tRNS is present
// (entries beyond the tRNS list are opaque).
std::vector<std::uint8_t> expand_palette(const PngSpec& s) {
  const bool alpha = !s.palette_alpha.empty();
  std::vector<std::uint8_t> out;
  for (std::uint16_t index : s.samples) {
    const png_color& c = s.palette[index];
    out.insert(out.end(), {c.red, c.green, c.blue});
    if (alpha) out.push_back(index < s.palette_alpha.size() ? s.palette_alpha[index] : 255);
  }
  return out;
}

void check_shape(const l3::Image& image, std::uint32_t w, std::uint32_t h, std::uint32_t c) {
  CHECK(image.width == w);
  CHECK(image.height == h);
  CHECK(image.channels == c);
  CHECK(image.pixels.size() == std::size_t{w} * h * c);
}


}  // namespace

TEST_CASE("PNG gray at 1, 2, 4 and 8 bits is scaled to 8 bits") {
  for (int depth : {1, 2, 4, 8}) {
    CAPTURE(depth);
    for (bool interlaced : {false, true}) {
      PngSpec s = spec(13, 7, PNG_COLOR_TYPE_GRAY, depth, static_cast<std::uint32_t>(depth));
      s.interlaced = interlaced;
      l3::Image image = decode(make_png(s));
      check_shape(image, 13, 7, 1);
      const int scale = 255 / ((1 << depth) - 1);  // 255, 85, 17, 1
      std::vector<std::uint8_t> expected;
      for (auto v : s.samples) expected.push_back(static_cast<std::uint8_t>(v * scale));
      CHECK(image.pixels == expected);
    }
  }
}

TEST_CASE("PNG gray with a tRNS colour key gains an alpha channel") {
  PngSpec s = spec(9, 4, PNG_COLOR_TYPE_GRAY, 8, 3);
  s.samples[5] = 7;
  png_color_16 key{};
  key.gray = 7;
  s.transparent = key;
  l3::Image image = decode(make_png(s));
  check_shape(image, 9, 4, 2);
  for (std::size_t i = 0; i < s.samples.size(); ++i) {
    CHECK(image.pixels[2 * i] == s.samples[i]);
    CHECK(image.pixels[2 * i + 1] == (s.samples[i] == 7 ? 0 : 255));
  }
}

TEST_CASE("PNG gray+alpha, RGB and RGBA decode exactly") {
  struct Case { int color_type; std::uint32_t channels; };
  for (Case c : {Case{PNG_COLOR_TYPE_GRAY_ALPHA, 2}, Case{PNG_COLOR_TYPE_RGB, 3}, Case{PNG_COLOR_TYPE_RGBA, 4}}) {
    for (bool interlaced : {false, true}) {
      CAPTURE(c.channels);
      CAPTURE(interlaced);
      PngSpec s = spec(17, 11, c.color_type, 8, c.channels);
      s.interlaced = interlaced;
      l3::Image image = decode(make_png(s));
      check_shape(image, 17, 11, c.channels);
      CHECK(image.pixels == std::vector<std::uint8_t>(s.samples.begin(), s.samples.end()));
    }
  }
}

TEST_CASE("PNG RGB with a tRNS colour key becomes RGBA") {
  PngSpec s = spec(6, 5, PNG_COLOR_TYPE_RGB, 8, 8);
  s.samples[0] = 1, s.samples[1] = 2, s.samples[2] = 3;
  png_color_16 key{};
  key.red = 1, key.green = 2, key.blue = 3;
  s.transparent = key;
  l3::Image image = decode(make_png(s));
  check_shape(image, 6, 5, 4);
  CHECK(image.pixels[3] == 0);
  CHECK(image.pixels[0] == 1);
  for (std::size_t p = 1; p < 30; ++p) {
    bool keyed = s.samples[3 * p] == 1 && s.samples[3 * p + 1] == 2 && s.samples[3 * p + 2] == 3;
    CHECK(image.pixels[4 * p + 3] == (keyed ? 0 : 255));
    CHECK(image.pixels[4 * p] == s.samples[3 * p]);
  }
}

TEST_CASE("PNG palette: RGB without tRNS, RGBA with tRNS, at every bit depth") {
  for (int depth : {1, 2, 4, 8}) {
    for (bool with_trns : {false, true}) {
      for (bool interlaced : {false, true}) {
        CAPTURE(depth);
        CAPTURE(with_trns);
        CAPTURE(interlaced);
        PngSpec s = spec(19, 9, PNG_COLOR_TYPE_PALETTE, depth, static_cast<std::uint32_t>(depth + 10));
        s.palette = random_palette(std::size_t{1} << depth);
        if (with_trns) s.palette_alpha = {0, 128};  // shorter than the palette: the rest is opaque
        s.interlaced = interlaced;
        l3::Image image = decode(make_png(s));
        check_shape(image, 19, 9, with_trns ? 4 : 3);
        CHECK(image.pixels == expand_palette(s));
      }
    }
  }
}

TEST_CASE("PNG of one pixel and of one row, interlaced") {
  for (auto [w, h] : {std::pair{1u, 1u}, std::pair{1u, 9u}, std::pair{9u, 1u}}) {
    PngSpec s = spec(w, h, PNG_COLOR_TYPE_RGB, 8, w * 31 + h);
    s.interlaced = true;
    l3::Image image = decode(make_png(s));
    check_shape(image, w, h, 3);
    CHECK(image.pixels == std::vector<std::uint8_t>(s.samples.begin(), s.samples.end()));
  }
}

TEST_CASE("16-bit PNG is rejected as unsupported, never reduced to 8 bits") {
  for (int color_type : {PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_RGB, PNG_COLOR_TYPE_RGBA}) {
    std::vector<std::uint8_t> bytes = make_png(spec(4, 3, color_type, 16, 5));
    try {
      decode(bytes);
      FAIL("16-bit PNG was accepted");
    } catch (const l3::Error& e) {
      CHECK(e.code() == l3::errc::unsupported);
      CHECK(std::string(e.what()).find("16-bit PNG is not supported") != std::string::npos);
    }
  }
}

TEST_CASE("PNG limits are checked before decoding") {
  std::vector<std::uint8_t> bytes = make_png(spec(100, 50, PNG_COLOR_TYPE_RGB, 8, 1));
  l3::LoadOptions narrow;
  narrow.limits.max_width = 99;
  CHECK_THROWS_WITH_AS(decode(bytes, narrow), doctest::Contains("exceeds"), l3::Error);
  l3::LoadOptions few_pixels;
  few_pixels.limits.max_pixels = 4999;
  try {
    decode(bytes, few_pixels);
    FAIL("limit not applied");
  } catch (const l3::Error& e) {
    CHECK(e.code() == l3::errc::limit_exceeded);
  }
  few_pixels.limits.max_pixels = 5000;
  CHECK(decode(bytes, few_pixels).width == 100);
}

TEST_CASE("every truncation of a PNG is a data error, except one that cuts only IEND") {
  PngSpec s = spec(12, 10, PNG_COLOR_TYPE_RGBA, 8, 21);
  s.interlaced = true;
  const std::vector<std::uint8_t> bytes = make_png(s);
  const l3::Image whole = decode(bytes);
  const std::size_t iend = bytes.size() - 12;  // the last chunk: 00000000 "IEND" CRC
  for (std::size_t size = 0; size < bytes.size(); ++size) {
    CAPTURE(size);
    std::vector<std::uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<long>(size));
    if (size >= iend) {
      CHECK(decode(cut).pixels == whole.pixels);  // all image data is there: as PIL, accept it
    } else {
      CHECK(l3::is_data_error(load_error(cut)));
    }
  }
  // A damaged IEND (not just missing) is still an error.
  std::vector<std::uint8_t> damaged = bytes;
  damaged[bytes.size() - 1] ^= 1;
  CHECK(l3::is_data_error(load_error(damaged)));
}

TEST_CASE("convert_16bit keeps the high byte of 16-bit samples (as PIL's RGB;16B)") {
  for (int color_type : {PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_RGB, PNG_COLOR_TYPE_RGBA}) {
    PngSpec s = spec(4, 3, color_type, 16, 5);
    l3::LoadOptions options;
    options.convert_16bit = true;
    const l3::Image image = decode(make_png(s), options);
    REQUIRE(image.pixels.size() == s.samples.size());
    for (std::size_t i = 0; i < s.samples.size(); ++i) CHECK(image.pixels[i] == s.samples[i] >> 8);
  }
}

TEST_CASE("every single-byte change to a PNG is caught (CRC, signature, lengths)") {
  const std::vector<std::uint8_t> bytes = make_png(spec(8, 6, PNG_COLOR_TYPE_RGB, 8, 22));
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    CAPTURE(i);
    std::vector<std::uint8_t> damaged = bytes;
    damaged[i] ^= 0x5a;
    l3::errc code = load_error(damaged);
    CHECK(l3::is_data_error(code));
  }
}

TEST_CASE("garbage after a PNG signature is a data error") {
  for (std::uint32_t seed = 0; seed < 50; ++seed) {
    std::vector<std::uint8_t> bytes = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    auto tail = l3::test::random_bytes(seed * 7, seed);
    bytes.insert(bytes.end(), tail.begin(), tail.end());
    CHECK(l3::is_data_error(load_error(bytes)));
  }
}

TEST_CASE("save_png and encode_png_bytes round trip every channel count, with a stride") {
  l3::test::TempDir dir;
  for (std::uint32_t channels = 1; channels <= 4; ++channels) {
    for (int level : {l3::png_default_compression, 0, 9}) {
      CAPTURE(channels);
      CAPTURE(level);
      const std::uint32_t w = 23, h = 7;
      const std::size_t stride = w * channels + 5;  // padding bytes must not leak into the PNG
      std::vector<std::uint8_t> padded = l3::test::random_bytes(stride * h, channels);
      l3::ImageView view{padded.data(), w, h, channels, stride};
      const auto path = dir / ("out" + std::to_string(channels) + ".png");
      l3::save_png(path, view, level);
      l3::Image image = l3::load_image(path);
      check_shape(image, w, h, channels);
      for (std::uint32_t y = 0; y < h; ++y)
        CHECK(std::equal(image.pixels.begin() + y * w * channels, image.pixels.begin() + (y + 1) * w * channels,
                         padded.begin() + static_cast<long>(y * stride)));
      CHECK(l3::encode_png_bytes(view, level) == l3::test::read_file(path));
    }
  }
  CHECK(dir.file_count() == 4);  // no temporary files left behind
}

TEST_CASE("higher zlib levels give smaller PNGs of a smooth image") {
  auto pixels = l3::test::gradient(64, 64, 3, 1);
  l3::ImageView view{pixels.data(), 64, 64, 3, 0};
  CHECK(l3::encode_png_bytes(view, 9).size() < l3::encode_png_bytes(view, 0).size());
}

TEST_CASE("invalid PNG output arguments are caller errors and leave no file") {
  l3::test::TempDir dir;
  std::vector<std::uint8_t> pixels(12);
  auto expect = [](auto&& f, l3::errc code) {
    try {
      f();
      FAIL("accepted");
    } catch (const l3::Error& e) {
      CHECK(e.code() == code);
    }
  };
  expect([&] { l3::save_png(dir / "a.png", l3::ImageView{pixels.data(), 2, 2, 5, 0}); }, l3::errc::invalid_argument);
  expect([&] { l3::save_png(dir / "a.png", l3::ImageView{nullptr, 2, 2, 3, 0}); }, l3::errc::invalid_argument);
  expect([&] { l3::save_png(dir / "a.png", l3::ImageView{pixels.data(), 2, 2, 3, 5}); }, l3::errc::invalid_argument);
  expect([&] { l3::save_png(dir / "a.png", l3::ImageView{pixels.data(), 2, 2, 3, 0}, 10); }, l3::errc::invalid_argument);
  expect([&] { l3::save_png(dir / "missing" / "a.png", l3::ImageView{pixels.data(), 2, 2, 3, 0}); }, l3::errc::io_error);
  CHECK(dir.file_count() == 0);
}
