// JPEG loading (l3_imageio): pixels must equal libjpeg's own default decode.
#include <doctest/doctest.h>

#include "l3/imageio/image_io.hpp"
#include "test_converters_helpers.hpp"

using l3::test::JpegSpec;
using l3::test::load_error;

namespace {

std::vector<std::uint8_t> sample_jpeg(bool progressive = false) {
  JpegSpec s{37, 23, 3, JCS_RGB, 90, progressive};
  return l3::test::make_jpeg(s, l3::test::gradient(37, 23, 3, 4));
}

}  // namespace

TEST_CASE("JPEG colour and gray decode exactly as libjpeg does by default") {
  struct Case { int components; J_COLOR_SPACE space; bool progressive; };
  for (Case c : {Case{3, JCS_RGB, false}, Case{3, JCS_RGB, true}, Case{1, JCS_GRAYSCALE, false}}) {
    CAPTURE(c.components);
    CAPTURE(c.progressive);
    JpegSpec s{37, 23, c.components, c.space, 85, c.progressive};
    auto bytes = l3::test::make_jpeg(s, l3::test::gradient(37, 23, static_cast<std::uint32_t>(c.components), 9));
    int reference_channels = 0;
    auto reference = l3::test::reference_jpeg_decode(bytes, &reference_channels);
    l3::Image image = l3::decode_image_bytes(bytes);
    CHECK(image.width == 37);
    CHECK(image.height == 23);
    CHECK(image.channels == static_cast<std::uint32_t>(reference_channels));
    CHECK(image.pixels == reference);
  }
}

TEST_CASE("JPEG loads from a file, found by its bytes and not its name") {
  l3::test::TempDir dir;
  auto bytes = sample_jpeg();
  l3::test::write_file(dir / "misnamed.png", bytes);
  int channels = 0;
  CHECK(l3::load_image(dir / "misnamed.png").pixels == l3::test::reference_jpeg_decode(bytes, &channels));
  CHECK(l3::detect_image_format(bytes) == l3::ImageFormat::jpeg);
}

TEST_CASE("CMYK JPEG decodes to RGB (tests/test_convert_pil.sh compares the pixels with PIL's)") {
  JpegSpec s{8, 8, 4, JCS_CMYK, 90, false};
  auto bytes = l3::test::make_jpeg(s, l3::test::gradient(8, 8, 4, 1));
  const l3::Image image = l3::decode_image_bytes(bytes);
  CHECK(image.channels == 3);
  CHECK(image.pixels.size() == 8 * 8 * 3);
}

TEST_CASE("harmless JPEG warnings are accepted unless strict_jpeg; data-loss warnings are not") {
  JpegSpec s{16, 16, 3, JCS_RGB, 90, false};
  const auto clean = l3::test::make_jpeg(s, l3::test::gradient(16, 16, 3, 2));
  // Junk before the DQT marker that follows SOI+APP0: libjpeg's "extraneous bytes before marker".
  std::vector<std::uint8_t> junk = clean;
  const std::size_t app0_end = 4 + (std::size_t{clean[4]} << 8 | clean[5]);
  junk.insert(junk.begin() + static_cast<long>(app0_end), {0x00, 0x11, 0x22});
  CHECK(l3::decode_image_bytes(junk).pixels == l3::decode_image_bytes(clean).pixels);
  l3::LoadOptions strict;
  strict.strict_jpeg = true;
  CHECK(load_error(junk, strict) == l3::errc::corrupt_header);
  // A JFIF 2.01 header (ImageNet has some): "unknown JFIF revision", same pixels.
  std::vector<std::uint8_t> jfif2 = clean;
  REQUIRE(std::string(jfif2.begin() + 6, jfif2.begin() + 10) == "JFIF");
  jfif2[11] = 2;
  jfif2[12] = 1;
  CHECK(l3::decode_image_bytes(jfif2).pixels == l3::decode_image_bytes(clean).pixels);
  CHECK(load_error(jfif2, strict) == l3::errc::corrupt_header);
  // Truncated entropy data stays an error by default.
  std::vector<std::uint8_t> cut(clean.begin(), clean.begin() + static_cast<long>(clean.size() / 2));
  CHECK(l3::is_data_error(load_error(cut)));
}

TEST_CASE("JPEG limits are checked before decoding") {
  l3::LoadOptions options;
  options.limits.max_height = 22;
  CHECK(load_error(sample_jpeg(), options) == l3::errc::limit_exceeded);
}

TEST_CASE("every truncation of a JPEG is a data error") {
  for (bool progressive : {false, true}) {
    const auto bytes = sample_jpeg(progressive);
    CHECK(load_error(bytes) == l3::errc::ok);
    for (std::size_t size = 0; size < bytes.size(); ++size) {
      CAPTURE(size);
      CHECK(l3::is_data_error(load_error({bytes.begin(), bytes.begin() + static_cast<long>(size)})));
    }
  }
}

TEST_CASE("a truncated JPEG decodes, padded by libjpeg, only when warnings are accepted") {
  auto bytes = sample_jpeg();
  bytes.resize(bytes.size() * 2 / 3);
  CHECK(load_error(bytes) == l3::errc::truncated);
  l3::LoadOptions lenient;
  lenient.accept_jpeg_warnings = true;
  l3::Image image = l3::decode_image_bytes(bytes, lenient);
  CHECK(image.width == 37);
  CHECK(image.pixels.size() == 37u * 23u * 3u);
}

TEST_CASE("damaged and random JPEG bytes never crash") {
  const auto bytes = sample_jpeg();
  std::size_t rejected = 0;
  for (std::size_t i = 2; i < bytes.size(); ++i) {
    std::vector<std::uint8_t> damaged = bytes;
    damaged[i] ^= 0xa5;
    l3::errc code = load_error(damaged);
    // Damage inside entropy-coded data may still decode (JPEG has no checksum);
    // what must never happen is a crash or a caller-error code.
    CHECK((code == l3::errc::ok || l3::is_data_error(code) || code == l3::errc::unsupported));
    rejected += code != l3::errc::ok;
  }
  CHECK(rejected > 0);
  for (std::uint32_t seed = 0; seed < 50; ++seed) {
    std::vector<std::uint8_t> garbage = {0xff, 0xd8, 0xff};
    auto tail = l3::test::random_bytes(seed * 13, seed);
    garbage.insert(garbage.end(), tail.begin(), tail.end());
    CHECK(l3::is_data_error(load_error(garbage)));
  }
}
