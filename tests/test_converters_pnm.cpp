// PNM (PGM/PPM/PAM) reading and writing, format detection, and file helpers.
#include <doctest/doctest.h>

#include <string>

#include "l3/common/file_io.hpp"
#include "l3/imageio/image_io.hpp"
#include "test_converters_helpers.hpp"

using l3::test::bytes_of;
using l3::test::load_error;

TEST_CASE("PNM round trip: P5 for gray, P6 for RGB, P7 (PAM) with alpha") {
  l3::test::TempDir dir;
  const char* expected_magic[] = {"P5", "P7", "P6", "P7"};
  for (std::uint32_t channels = 1; channels <= 4; ++channels) {
    CAPTURE(channels);
    auto pixels = l3::test::random_bytes(std::size_t{31} * 9 * channels, channels);
    l3::ImageView view{pixels.data(), 31, 9, channels, 0};
    auto encoded = l3::encode_pnm_bytes(view);
    CHECK(std::string(encoded.begin(), encoded.begin() + 2) == expected_magic[channels - 1]);
    auto path = dir / ("image" + std::to_string(channels) + ".pnm");
    l3::save_pnm(path, view);
    l3::Image image = l3::load_image(path);
    CHECK(image.width == 31);
    CHECK(image.height == 9);
    CHECK(image.channels == channels);
    CHECK(image.pixels == pixels);
  }
}

TEST_CASE("ASCII PGM/PPM with comments") {
  l3::Image gray = l3::decode_image_bytes(bytes_of("P2\n# a comment\n3 2 # another\n255\n0 1 2\n253 254 255\n"));
  CHECK(gray.channels == 1);
  CHECK(gray.pixels == std::vector<std::uint8_t>{0, 1, 2, 253, 254, 255});
  l3::Image rgb = l3::decode_image_bytes(bytes_of("P3 1 2 255\n10 20 30\n40 50 60"));
  CHECK(rgb.channels == 3);
  CHECK(rgb.pixels == std::vector<std::uint8_t>{10, 20, 30, 40, 50, 60});
}

TEST_CASE("binary PNM: comments in the header, one whitespace byte before the samples") {
  // The sample 0x0a after the header is data, not a second whitespace byte.
  auto bytes = bytes_of("P5 #c\n2 1\n255\n");
  bytes.insert(bytes.end(), {0x0a, 0x20});
  CHECK(l3::decode_image_bytes(bytes).pixels == std::vector<std::uint8_t>{0x0a, 0x20});
}

TEST_CASE("PNM that cannot be held losslessly in 8 bits is unsupported") {
  CHECK(load_error(bytes_of("P5 1 1 65535\n\x01\x02")) == l3::errc::unsupported);
  CHECK(load_error(bytes_of("P5 1 1 15\n\x01")) == l3::errc::unsupported);
  CHECK(load_error(bytes_of("P4 8 1\n\x01")) == l3::errc::unsupported);
  CHECK(load_error(bytes_of("P7\nWIDTH 1\nHEIGHT 1\nDEPTH 5\nMAXVAL 255\nENDHDR\n12345")) == l3::errc::unsupported);
}

TEST_CASE("malformed PNM is a data error") {
  CHECK(load_error(bytes_of("P5 0 1 255\n")) == l3::errc::corrupt_header);
  CHECK(load_error(bytes_of("P5 x 1 255\n")) == l3::errc::corrupt_header);
  CHECK(load_error(bytes_of("P5 1 1 0\n\x01")) == l3::errc::corrupt_header);
  CHECK(load_error(bytes_of("P5 99999999999 1 255\n")) == l3::errc::corrupt_header);
  CHECK(load_error(bytes_of("P2 2 1 255\n1 256")) == l3::errc::corrupt_header);
  CHECK(load_error(bytes_of("P2 2 1 255\n1")) == l3::errc::truncated);
  CHECK(load_error(bytes_of("P6 2 2 255\nabc")) == l3::errc::truncated);
  CHECK(load_error(bytes_of("P7\nWIDTH 1\nHEIGHT 1\nSIZE 3\nENDHDR\n")) == l3::errc::corrupt_header);
  CHECK(load_error(bytes_of("P7\nWIDTH 1\nHEIGHT 1\nDEPTH 1\nMAXVAL 255\n")) == l3::errc::truncated);
  CHECK(load_error(bytes_of("P9 1 1 255\n\x01")) == l3::errc::bad_magic);
}

TEST_CASE("every truncation of a binary PPM is a data error") {
  auto pixels = l3::test::random_bytes(5 * 4 * 3, 7);
  auto bytes = l3::encode_pnm_bytes(l3::ImageView{pixels.data(), 5, 4, 3, 0});
  for (std::size_t size = 0; size < bytes.size(); ++size) {
    CAPTURE(size);
    CHECK(l3::is_data_error(load_error({bytes.begin(), bytes.begin() + static_cast<long>(size)})));
  }
}

TEST_CASE("huge PNM dimensions hit the limits before any allocation") {
  CHECK(load_error(bytes_of("P5 4000000000 4000000000 255\n")) == l3::errc::limit_exceeded);
  CHECK(load_error(bytes_of("P6 60000 60000 255\n")) == l3::errc::limit_exceeded);  // 3.6e9 pixels > 2^30
  l3::LoadOptions wide;
  wide.limits.max_width = 100000;
  CHECK(load_error(bytes_of("P5 70000 1 255\n"), wide) == l3::errc::truncated);  // within limits, then short
}

TEST_CASE("format detection uses magic bytes") {
  CHECK(l3::detect_image_format(bytes_of("P6\n1 1 255\n")) == l3::ImageFormat::pnm);
  CHECK(l3::detect_image_format(bytes_of("P6x")) == l3::ImageFormat::unknown);
  CHECK(l3::detect_image_format({}) == l3::ImageFormat::unknown);
  CHECK(load_error({}) == l3::errc::bad_magic);
  CHECK(load_error(bytes_of("GIF89a")) == l3::errc::bad_magic);
}

TEST_CASE("file helpers: io_error with the reason, atomic replacement") {
  l3::test::TempDir dir;
  try {
    l3::load_image(dir / "absent.png");
    FAIL("no error");
  } catch (const l3::Error& e) {
    CHECK(e.code() == l3::errc::io_error);
    CHECK(std::string(e.what()).find("No such file") != std::string::npos);
  }
  const auto path = dir / "data.bin";
  l3::write_file_atomically(path, bytes_of("first version"));
  l3::write_file_atomically(path, bytes_of("second"));
  CHECK(l3::read_file(path) == bytes_of("second"));
  // A directory in the way: the rename fails, the temporary file is removed.
  std::filesystem::create_directory(dir / "blocker");
  std::filesystem::create_directory(dir / "blocker" / "inside");
  CHECK_THROWS_AS(l3::write_file_atomically(dir / "blocker", bytes_of("x")), l3::Error);
  CHECK(dir.file_count() == 2);  // data.bin and blocker
  // A 255-byte name (NAME_MAX) is legal: its temporary must not be longer.
  const auto longest = dir / std::string(251, 'n').append(".png");
  l3::write_file_atomically(longest, bytes_of("long"));
  CHECK(l3::read_file(longest) == bytes_of("long"));
  CHECK(dir.file_count() == 3);  // no temporary left behind
  // Overwrite::no links the file in place: an existing file is refused and kept.
  CHECK_THROWS_WITH_AS(l3::write_file_atomically(path, bytes_of("third"), l3::Overwrite::no),
                       doctest::Contains("already exists"), l3::Error);
  CHECK(l3::read_file(path) == bytes_of("second"));
  l3::write_file_atomically(dir / "new.bin", bytes_of("new"), l3::Overwrite::no);
  CHECK(l3::read_file(dir / "new.bin") == bytes_of("new"));
  CHECK(dir.file_count() == 4);  // no temporary left behind
}
