// l3pack end to end: runs the built binary (L3PACK_PATH) through the shell.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "l3/imageio/image_io.hpp"
#include "test_converters_helpers.hpp"

namespace {

struct Run {
  int exit_code = -1;
  std::string out, err;
};

// Built by appending: GCC 12's -Wrestrict misfires on "'" + string + "'" at -O3.
std::string quoted(const std::filesystem::path& p) {
  std::string text = "'";
  text += p.string();
  text += "'";
  return text;
}

Run l3pack(const l3::test::TempDir& dir, const std::string& arguments) {
  const auto out = dir.path().parent_path() / (dir.path().filename().string() + ".stdout");
  const auto err = dir.path().parent_path() / (dir.path().filename().string() + ".stderr");
  std::string command = std::string("'") + L3PACK_PATH + "' " + arguments + " >" + quoted(out) + " 2>" + quoted(err);
  int status = std::system(command.c_str());
  Run run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  auto o = l3::test::read_file(out), e = l3::test::read_file(err);
  run.out.assign(o.begin(), o.end());
  run.err.assign(e.begin(), e.end());
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return run;
}

bool one_error_line(const Run& run, const std::string& subject) {
  const std::string prefix = "l3pack: error: " + subject;
  return run.err.rfind(prefix, 0) == 0 && run.err.find('\n') == run.err.size() - 1;
}

l3::Image saved_image(const l3::test::TempDir& dir, const std::string& name, std::uint32_t w, std::uint32_t h,
                      std::uint32_t c) {
  l3::Image image{w, h, c, l3::test::gradient(w, h, c, w + c)};
  l3::save_png(dir / name, image.view());
  return image;
}

}  // namespace

TEST_CASE("encode then decode is pixel-exact for every channel count") {
  l3::test::TempDir dir;
  for (std::uint32_t channels = 1; channels <= 4; ++channels) {
    CAPTURE(channels);
    l3::Image original = saved_image(dir, "in.png", 45, 33, channels);
    Run encode = l3pack(dir, "encode " + quoted(dir / "in.png") + " " + quoted(dir / "x.l3i"));
    REQUIRE(encode.exit_code == 0);
    CHECK(encode.err.empty());
    REQUIRE(l3pack(dir, "decode " + quoted(dir / "x.l3i") + " " + quoted(dir / "back.png")).exit_code == 0);
    CHECK(l3::load_image(dir / "back.png").pixels == original.pixels);
    REQUIRE(l3pack(dir, "decode " + quoted(dir / "x.l3i") + " " + quoted(dir / "back.pam")).exit_code == 0);
    CHECK(l3::load_image(dir / "back.pam").pixels == original.pixels);
  }
}

TEST_CASE("a JPEG's decoded pixels survive encode and decode to PPM") {
  l3::test::TempDir dir;
  l3::test::JpegSpec spec{40, 24, 3, JCS_RGB, 80, false};
  l3::test::write_file(dir / "in.jpg", l3::test::make_jpeg(spec, l3::test::gradient(40, 24, 3, 2)));
  REQUIRE(l3pack(dir, "encode " + quoted(dir / "in.jpg") + " " + quoted(dir / "x.l3i") + " --effort 0").exit_code == 0);
  REQUIRE(l3pack(dir, "decode " + quoted(dir / "x.l3i") + " " + quoted(dir / "out.ppm")).exit_code == 0);
  CHECK(l3::load_image(dir / "out.ppm").pixels == l3::load_image(dir / "in.jpg").pixels);
}

TEST_CASE("info reports the header, tiles and bits per pixel; --json agrees") {
  l3::test::TempDir dir;
  saved_image(dir, "in.png", 100, 70, 3);
  REQUIRE(l3pack(dir, "encode " + quoted(dir / "in.png") + " " + quoted(dir / "x.l3i") +
                          " --tile-width 32 --tile-height 16 --entropy off").exit_code == 0);
  Run text = l3pack(dir, "info " + quoted(dir / "x.l3i"));
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find("100 x 70") != std::string::npos);
  CHECK(text.out.find("32 x 16") != std::string::npos);
  CHECK(text.out.find("4 x 5 = 20") != std::string::npos);
  // --entropy off: Rice codes only, so never the rANS versions 3-6; the
  // encoder writes the oldest version the tiles need (spec/codec.md §11):
  // 2, 7 (a plane has the context of the plane before, §6.2), 8 (residual
  // corrections, §6.7), 9-11, 12 (mirrored tiles, §4.7); as the header says.
  const int version = int(l3::test::read_file(dir / "x.l3i")[4]);
  CHECK((version == 2 || (version >= 7 && version <= 12)));
  CHECK(text.out.find(".l3i version " + std::to_string(version)) != std::string::npos);
  Run json = l3pack(dir, "info --json " + quoted(dir / "x.l3i"));
  REQUIRE(json.exit_code == 0);
  auto info = nlohmann::json::parse(json.out);
  const auto bytes = std::filesystem::file_size(dir / "x.l3i");
  CHECK(info["version"] == version);
  CHECK(info["width"] == 100);
  CHECK(info["height"] == 70);
  CHECK(info["channels"] == 3);
  CHECK(info["tile_width"] == 32);
  CHECK(info["tile_height"] == 16);
  CHECK(info["tiles"] == 20);
  CHECK(info["tile_copies"] == 0);
  CHECK(info["symbol_patches"] == 0);
  CHECK(info["bytes"] == bytes);
  CHECK(info["bits_per_pixel"].get<double>() == doctest::Approx(static_cast<double>(bytes) * 8.0 / 7000.0));
  CHECK(info["bits_per_sample"].get<double>() == doctest::Approx(static_cast<double>(bytes) * 8.0 / 21000.0));
}

TEST_CASE("a corrupt .l3i: exit 1, one line on stderr, no output file") {
  l3::test::TempDir dir;
  saved_image(dir, "in.png", 64, 64, 3);
  REQUIRE(l3pack(dir, "encode " + quoted(dir / "in.png") + " " + quoted(dir / "x.l3i")).exit_code == 0);
  auto good = l3::test::read_file(dir / "x.l3i");
  auto truncated = std::vector<std::uint8_t>(good.begin(), good.begin() + static_cast<long>(good.size() / 2));
  auto bad_magic = good;
  bad_magic[0] ^= 0xff;
  for (const auto& damaged : {truncated, bad_magic}) {
    l3::test::write_file(dir / "bad.l3i", damaged);
    const std::size_t files_before = dir.file_count();
    for (const std::string command : {"decode", "info"}) {
      CAPTURE(command);
      std::string args = command + " " + quoted(dir / "bad.l3i");
      if (command == "decode") args += " " + quoted(dir / "out.png");
      Run run = l3pack(dir, args);
      CHECK(run.exit_code == 1);
      CHECK(one_error_line(run, (dir / "bad.l3i").string() + ": "));
      CHECK(!std::filesystem::exists(dir / "out.png"));
      CHECK(dir.file_count() == files_before);
    }
  }
}

TEST_CASE("bad input images and bad options") {
  l3::test::TempDir dir;
  l3::test::write_file(dir / "garbage.png", l3::test::random_bytes(300, 1));
  Run garbage = l3pack(dir, "encode " + quoted(dir / "garbage.png") + " " + quoted(dir / "x.l3i"));
  CHECK(garbage.exit_code == 1);
  CHECK(one_error_line(garbage, (dir / "garbage.png").string() + ": bad magic"));
  CHECK(!std::filesystem::exists(dir / "x.l3i"));

  l3::test::PngSpec deep{4, 4, 16, PNG_COLOR_TYPE_GRAY, false, {}, {}, {}, std::vector<std::uint16_t>(16, 1000)};
  l3::test::write_file(dir / "deep.png", l3::test::make_png(deep));
  Run sixteen = l3pack(dir, "encode " + quoted(dir / "deep.png") + " " + quoted(dir / "x.l3i"));
  CHECK(sixteen.exit_code == 1);
  CHECK(sixteen.err.find("16-bit PNG is not supported") != std::string::npos);

  Run missing = l3pack(dir, "encode " + quoted(dir / "absent.png") + " " + quoted(dir / "x.l3i"));
  CHECK(missing.exit_code == 1);
  CHECK(one_error_line(missing, (dir / "absent.png").string() + ": I/O error: cannot open"));

  saved_image(dir, "in.png", 8, 8, 4);
  Run tile = l3pack(dir, "encode " + quoted(dir / "in.png") + " " + quoted(dir / "x.l3i") + " --tile-width 17");
  CHECK(tile.exit_code == 2);
  CHECK(one_error_line(tile, ""));
  CHECK(l3pack(dir, "encode " + quoted(dir / "in.png")).exit_code == 2);
  Run entropy = l3pack(dir, "encode " + quoted(dir / "in.png") + " " + quoted(dir / "x.l3i") + " --entropy fast");
  CHECK(entropy.exit_code == 2);
  CHECK(one_error_line(entropy, "--entropy: must be auto, off, max or a percentage 0..100"));
  CHECK(!std::filesystem::exists(dir / "x.l3i"));
  CHECK(l3pack(dir, "frobnicate").exit_code == 2);
  CHECK(l3pack(dir, "").exit_code == 2);

  REQUIRE(l3pack(dir, "encode " + quoted(dir / "in.png") + " " + quoted(dir / "x.l3i")).exit_code == 0);
  Run extension = l3pack(dir, "decode " + quoted(dir / "x.l3i") + " " + quoted(dir / "out.bmp"));
  CHECK(extension.exit_code == 2);
  CHECK(one_error_line(extension, (dir / "out.bmp").string() + ": unknown output extension"));
  Run channels = l3pack(dir, "decode " + quoted(dir / "x.l3i") + " " + quoted(dir / "out.ppm"));
  CHECK(channels.exit_code == 1);
  CHECK(one_error_line(channels, (dir / "out.ppm").string() + ": a .ppm file holds 3 channels"));
  CHECK(!std::filesystem::exists(dir / "out.ppm"));
}

TEST_CASE("--help explains every subcommand; --version") {
  l3::test::TempDir dir;
  Run help = l3pack(dir, "--help");
  CHECK(help.exit_code == 0);
  for (const char* word : {"encode", "decode", "info", "Examples", "l3pack encode photo.png photo.l3i"})
    CHECK(help.out.find(word) != std::string::npos);
  Run encode_help = l3pack(dir, "encode --help");
  CHECK(encode_help.exit_code == 0);
  CHECK(encode_help.out.find("--tile-width") != std::string::npos);
  CHECK(encode_help.out.find("Example") != std::string::npos);
  Run version = l3pack(dir, "--version");
  CHECK(version.exit_code == 0);
  CHECK(version.out.rfind("l3pack ", 0) == 0);
}
