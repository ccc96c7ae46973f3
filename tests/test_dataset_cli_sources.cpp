// l3pack convert on messy real-world sources (issue 15): every input converted,
// skipped with its reason, or hidden; odd names, links, loops, unreadable
// folders; list files with class names; options checked first; PIL parity for
// CMYK/YCCK JPEGs and JPEG warnings.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <zlib.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "l3/convert/convert.hpp"
#include "test_dataset_cli_helpers.hpp"

using l3::test::l3pack;
using l3::test::quoted;
using l3::test::TempDir;
namespace fs = std::filesystem;

namespace {

std::string convert_args(const fs::path& src, const fs::path& out, const std::string& extra = "") {
  return "convert " + quoted(src) + " " + quoted(out) + " " + extra;
}

// OUT/skipped.jsonl as path -> reason.
std::map<std::string, std::string> skip_list(const fs::path& out) {
  std::map<std::string, std::string> skips;
  std::ifstream in(out / l3::kSkippedName);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    skips[j["path"].get<std::string>()] = j["reason"].get<std::string>();
  }
  return skips;
}

std::vector<std::string> keys_of(const fs::path& out) {
  std::vector<std::string> keys;
  for (const auto& r : l3::test::record_digests(out)) keys.push_back(r.key);
  return keys;
}

void write_text(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  l3::test::write_file(file, {text.begin(), text.end()});
}

// /usr/bin/python3 has python3-pil (scripts/install-deps.sh --test).
int run_python(const std::string& script) {
  const char* python = fs::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  std::string command = python;
  command += " -c '" + script + "'";
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// 0 when PIL's Image.open(jpeg).convert("RGB") equals `rgb` byte for byte.
int compare_with_pil(const fs::path& jpeg, const l3::Image& image, const fs::path& scratch) {
  REQUIRE(image.channels == 3);
  l3::test::write_file(scratch, image.pixels);
  return run_python("import sys; from PIL import Image; im = Image.open(\"" + jpeg.string() +
                    "\").convert(\"RGB\"); sys.exit(0 if im.tobytes() == open(\"" + scratch.string() +
                    "\", \"rb\").read() and im.size == (" + std::to_string(image.width) + ", " +
                    std::to_string(image.height) + ") else 3)");
}

// zlib's CRC-32 is PNG's chunk CRC (libpng links zlib).
std::uint32_t chunk_crc(const std::uint8_t* p, std::size_t n) {
  return static_cast<std::uint32_t>(::crc32(0, p, static_cast<uInt>(n)));
}

void put_be32(std::vector<std::uint8_t>& out, std::uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<std::uint8_t>(v >> s));
}

// PNG signature, an IHDR (8-bit gray), an empty IDAT and IEND: no image data.
std::vector<std::uint8_t> png_header_only(std::uint32_t width, std::uint32_t height) {
  std::vector<std::uint8_t> out = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  std::vector<std::uint8_t> ihdr = {'I', 'H', 'D', 'R'};
  put_be32(ihdr, width);
  put_be32(ihdr, height);
  ihdr.insert(ihdr.end(), {8, 0, 0, 0, 0});
  put_be32(out, 13);
  out.insert(out.end(), ihdr.begin(), ihdr.end());
  put_be32(out, chunk_crc(ihdr.data(), ihdr.size()));
  const std::uint8_t idat[4] = {'I', 'D', 'A', 'T'};  // empty: libpng's header read stops at the first IDAT
  out.insert(out.end(), {0, 0, 0, 0, 'I', 'D', 'A', 'T'});
  put_be32(out, chunk_crc(idat, 4));
  out.insert(out.end(), {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xAE, 0x42, 0x60, 0x82});
  return out;
}

}  // namespace

TEST_CASE("every input is a record, a skip with its reason, or hidden; verify --source accounts for all") {
  TempDir dir;
  const fs::path src = dir / "src";
  l3::test::save_test_png(src / "cat/a.png", 9, 8, 3, 1);
  l3::test::save_test_jpeg(src / "cat/deep/b.JPEG", 16, 8, 2);
  l3::test::save_test_png(src / "dog/c.png", 7, 7, 1, 3);
  l3::test::save_test_png(src / "dog/.hidden.png", 7, 7, 1, 4);        // hidden: excluded by rule
  l3::test::save_test_png(src / ".thumbs/x.png", 7, 7, 1, 5);           // hidden folder
  write_text(src / "dog/notes.txt", "not a picture");                     // not an image
  write_text(src / "dog/fake.png", "text named .png");                    // bad magic
  write_text(src / "dog/anim.gif", "GIF89a");                             // unsupported format
  l3::test::write_file(src / "dog/empty.jpg", {});                      // zero bytes
  fs::create_symlink("missing.png", src / "cat/dangling.png");            // broken link
  fs::create_symlink("..", src / "cat/deep/up");                          // a loop
  fs::create_directory_symlink(src, src / "dog/root");                    // a loop through SRC itself
  fs::create_directories(dir / "elsewhere");
  l3::test::save_test_png(dir / "elsewhere/e.png", 5, 5, 3, 6);
  fs::create_directory_symlink(dir / "elsewhere", src / "dog/linked");    // followed
  const std::string odd_name = std::string("caf") + '\xe9' + "%.png";   // Latin-1 byte, and a '%'
  l3::test::save_test_png(src / "cat" / odd_name, 6, 6, 3, 7);

  auto run = l3pack(dir, convert_args(src, dir / "ds"));
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  CHECK(keys_of(dir / "ds") == std::vector<std::string>{"cat/a.png", "cat/caf%E9%25.png", "cat/deep/b.JPEG",
                                                        "dog/c.png", "dog/linked/e.png"});
  const std::map<std::string, std::string> expected = {
      {"cat/dangling.png", "broken symbolic link"}, {"cat/deep/up/", "symlink loop"}, {"dog/root/", "symlink loop"},
      {"dog/empty.jpg", "bad magic"},               {"dog/fake.png", "bad magic"},
      {"dog/notes.txt", "not an image"},            {"dog/anim.gif", "unsupported format"}};
  CHECK(skip_list(dir / "ds") == expected);
  CHECK(run.out.find("skipped:   7 inputs") != std::string::npos);
  CHECK(run.out.find("2 bad magic") != std::string::npos);
  CHECK(run.out.find("excluded:  2 hidden entries") != std::string::npos);
  const auto manifest = l3::read_manifest(dir / "ds");
  CHECK(manifest.extra["l3pack"]["skipped"]["count"] == 7);
  CHECK(manifest.extra["l3pack"]["key_escape"] == "percent");
  CHECK(l3::unescape_key("cat/caf%E9%25.png") == "cat/" + odd_name);
  // extract gives the file its source's name back (bytes that are not UTF-8).
  run = l3pack(dir, "extract " + quoted(dir / "ds") + " " + quoted(dir / "back"));
  CHECK_MESSAGE(run.exit_code == 0, run.err);
  CHECK(fs::exists(dir / "back" / "cat" / odd_name));
  CHECK(!fs::exists(dir / "back" / "cat" / "caf%E9%25.png"));

  run = l3pack(dir, "verify " + quoted(dir / "ds") + " --source " + quoted(src));
  CHECK_MESSAGE(run.exit_code == 0, run.err);
  CHECK(run.out.find("5 passed, 0 failed") != std::string::npos);
  CHECK(run.out.find("7 recorded as skipped at convert time, 0 not accounted for") != std::string::npos);

  // A source added after the conversion is reported, and fails verify.
  l3::test::save_test_png(src / "dog/late.png", 5, 5, 3, 8);
  run = l3pack(dir, "verify " + quoted(dir / "ds") + " --source " + quoted(src));
  CHECK(run.exit_code == 1);
  CHECK(run.err.find("source dog/late.png: not in the dataset, and not recorded as skipped") != std::string::npos);
  CHECK(run.err.find("1 sources not in the dataset") != std::string::npos);

  // --strict: the first skip stops the run before anything is written.
  run = l3pack(dir, convert_args(src, dir / "strict", "--strict"));
  CHECK(run.exit_code == 1);
  CHECK(run.err.find("broken symbolic link") != std::string::npos);
  CHECK(run.err.find("--strict") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "strict"));
}

TEST_CASE("an unreadable subfolder is a counted skip, not a truncation; --strict fails on it") {
  TempDir dir;
  const fs::path src = dir / "src";
  l3::test::save_test_png(src / "cat/a.png", 9, 8, 3, 1);
  l3::test::save_test_png(src / "cat/locked/b.png", 9, 8, 3, 2);
  l3::test::save_test_png(src / "cat/z.png", 9, 8, 3, 3);
  l3::test::save_test_png(src / "cat/secret.png", 9, 8, 3, 4);
  fs::permissions(src / "cat/secret.png", fs::perms::none);  // an unreadable file: a decode-time skip
  fs::permissions(src / "cat/locked", fs::perms::none);
  fs::permissions(dir.path(), fs::perms::all);  // the unprivileged run writes OUT here
  // Root reads any folder: run l3pack as nobody then (setpriv, util-linux).
  const std::string as_user = ::geteuid() == 0 ? "--reuid=65534 --regid=65534 --clear-groups " : "";
  auto convert = [&](const std::string& out, const std::string& extra) {
    if (as_user.empty()) return l3pack(dir, convert_args(src, dir / out, extra));
    const auto err = dir / "err.txt";
    l3::test::Run run;
    const std::string command = "setpriv " + as_user + "'" + L3PACK_PATH + "' " + convert_args(src, dir / out, extra) +
                                " >/dev/null 2>" + quoted(err);
    const int status = std::system(command.c_str());
    run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    run.err = l3::test::text_of(err);
    return run;
  };
  auto run = convert("ds", "");
  fs::permissions(src / "cat/locked", fs::perms::owner_all);
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  CHECK(keys_of(dir / "ds") == std::vector<std::string>{"cat/a.png", "cat/z.png"});
  CHECK(skip_list(dir / "ds") ==
        std::map<std::string, std::string>{{"cat/locked/", "cannot read folder"}, {"cat/secret.png", "I/O error"}});
  fs::permissions(src / "cat/locked", fs::perms::none);
  run = convert("strict", "--strict");
  fs::permissions(src / "cat/locked", fs::perms::owner_all);
  CHECK(run.exit_code == 1);
  CHECK(run.err.find("cat/locked/: cannot read folder (Permission denied)") != std::string::npos);
}

TEST_CASE("--layout classes skips loose files; an empty folder, bad options and all-skipped sources commit nothing") {
  TempDir dir;
  const fs::path src = dir / "src";
  l3::test::save_test_png(src / "b_class/a.png", 9, 8, 3, 1);
  l3::test::save_test_png(src / "a_class/a.png", 9, 8, 3, 2);
  l3::test::save_test_png(src / "stray.png", 9, 8, 3, 3);
  l3::test::save_test_png(src / (std::string("c_") + '\xff' + "class") / "x.png", 9, 8, 3, 4);  // not UTF-8
  auto run = l3pack(dir, convert_args(src, dir / "ds", "--layout classes"));
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  CHECK(l3::read_manifest(dir / "ds").classes == std::vector<std::string>{"a_class", "b_class", "c_%FFclass"});
  CHECK(keys_of(dir / "ds") == std::vector<std::string>{"a_class/a.png", "b_class/a.png", "c_%FFclass/x.png"});
  CHECK(skip_list(dir / "ds") == std::map<std::string, std::string>{{"stray.png", "outside the class folders"}});
  run = l3pack(dir, "verify " + quoted(dir / "ds") + " --source " + quoted(src));  // --layout classes is recorded
  CHECK_MESSAGE(run.exit_code == 0, run.err);

  // A bad tile width is a usage error before anything is scanned or written.
  run = l3pack(dir, convert_args(src, dir / "bad", "--tile-width 17"));
  CHECK(run.exit_code == 2);
  CHECK(run.err == "l3pack: error: --tile-width/--tile-height: tile width 17 (must be a power of two in 16..256)\n");
  CHECK_FALSE(fs::exists(dir / "bad"));
  run = l3pack(dir, convert_args(src, dir / "bad", "--max-pixels 0"));
  CHECK(run.exit_code == 2);

  fs::create_directories(dir / "empty");
  run = l3pack(dir, convert_args(dir / "empty", dir / "out-empty"));
  CHECK(run.exit_code == 1);
  CHECK(run.err == "l3pack: error: " + (dir / "empty").string() + ": the folder is empty\n");
  CHECK_FALSE(fs::exists(dir / "out-empty"));

  write_text(dir / "junk/a.txt", "x");
  write_text(dir / "junk/b.png", "not a png");
  run = l3pack(dir, convert_args(dir / "junk", dir / "out-junk"));
  CHECK(run.exit_code == 1);
  CHECK(run.err.find("no input could be converted (2 skipped") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "out-junk/manifest.json"));
  CHECK(skip_list(dir / "out-junk").size() == 2);
  run = l3pack(dir, convert_args(dir / "junk", dir / "out-junk2", "--allow-empty"));
  CHECK(run.exit_code == 0);
  CHECK(l3::read_manifest(dir / "out-junk2").total_records() == 0);
}

TEST_CASE("--max-pixels skips an oversized image from its header, before decoding") {
  TempDir dir;
  l3::test::save_test_png(dir / "src/small.png", 100, 10, 3, 1);
  // A PNG whose IHDR says 30000 x 30000 and that holds no pixel data at all: if
  // anything were allocated or decoded before the check, the error would differ.
  l3::test::write_file(dir / "src/bomb.png", png_header_only(30000, 30000));
  auto run = l3pack(dir, convert_args(dir / "src", dir / "ds"));
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  CHECK(skip_list(dir / "ds") == std::map<std::string, std::string>{{"bomb.png", "limit exceeded"}});
  CHECK(run.err.find("bomb.png: limit exceeded: PNG: 30000x30000 exceeds the limit of 178956970 pixels") !=
        std::string::npos);
  run = l3pack(dir, convert_args(dir / "src", dir / "ds2", "--max-pixels 999 --allow-empty"));
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  CHECK(skip_list(dir / "ds2").size() == 2);  // small.png has 1000 pixels
}

TEST_CASE("list files: class names become sorted labels; absolute paths under --base; errors name the line") {
  TempDir dir;
  l3::test::save_test_png(dir / "data/x.png", 8, 8, 3, 1);
  l3::test::save_test_png(dir / "data/y.png", 8, 8, 3, 2);
  l3::test::save_test_png(dir / "data/z.png", 8, 8, 3, 3);
  write_text(dir / "data/names.csv", "x.png,dog\ny.png,cat\nz.png,dog\n");
  auto run = l3pack(dir, convert_args(dir / "data/names.csv", dir / "ds"));
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  auto records = l3::test::record_digests(dir / "ds");
  REQUIRE(records.size() == 3);
  CHECK(records[0].label == 1);  // dog
  CHECK(records[1].label == 0);  // cat
  CHECK(records[2].label == 1);
  CHECK(l3::read_manifest(dir / "ds").classes == std::vector<std::string>{"cat", "dog"});
  run = l3pack(dir, "info " + quoted(dir / "ds"));
  CHECK(run.out.find("unlabeled:      0 records") != std::string::npos);
  run = l3pack(dir, "verify " + quoted(dir / "ds") + " --source " + quoted(dir / "data/names.csv"));
  CHECK_MESSAGE(run.exit_code == 0, run.err);

  const std::string abs = (dir / "data/x.png").string();
  write_text(dir / "lists/abs.tsv", abs + "\t3\n" + (dir / "data/z.png").string() + "\t4\n");
  run = l3pack(dir, convert_args(dir / "lists/abs.tsv", dir / "abs-no-base"));
  CHECK(run.exit_code == 1);
  CHECK(run.err.find("abs.tsv:1: absolute path '" + abs + "': give --base FOLDER") != std::string::npos);
  run = l3pack(dir, convert_args(dir / "lists/abs.tsv", dir / "abs", "--base " + quoted(dir / "data")));
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  CHECK(keys_of(dir / "abs") == std::vector<std::string>{"x.png", "z.png"});
  run = l3pack(dir, convert_args(dir / "lists/abs.tsv", dir / "abs2", "--base " + quoted(dir / "lists")));
  CHECK(run.exit_code == 1);
  CHECK(run.err.find("abs.tsv:1: '" + abs + "' is not under --base") != std::string::npos);

  write_text(dir / "data/mixed.csv", "x.png,dog\ny.png,3\n");
  run = l3pack(dir, convert_args(dir / "data/mixed.csv", dir / "mixed"));
  CHECK(run.exit_code == 1);
  CHECK(run.err.find("mixed.csv:2: mixes integer labels (line 2) and class names (line 1)") != std::string::npos);
}

TEST_CASE("CMYK and YCCK JPEGs, and JPEGs with extraneous bytes, decode to PIL's RGB exactly") {
  TempDir dir;
  const std::vector<std::uint8_t> cmyk = l3::test::gradient(33, 17, 4, 9);
  for (J_COLOR_SPACE stored : {JCS_CMYK, JCS_YCCK}) {
    CAPTURE(int{stored});
    l3::test::JpegSpec spec{33, 17, 4, JCS_CMYK, 90, false, stored};
    const fs::path file = dir / (stored == JCS_CMYK ? "cmyk.jpg" : "ycck.jpg");
    l3::test::write_file(file, l3::test::make_jpeg(spec, cmyk));
    CHECK(compare_with_pil(file, l3::load_image(file), dir / "ours.rgb") == 0);
  }
  // PIL's own CMYK JPEG (Adobe marker, inverted samples).
  REQUIRE(run_python("from PIL import Image; import random; random.seed(3); im = Image.new(\"CMYK\", (21, 13)); "
                     "im.putdata([tuple(random.randrange(256) for _ in range(4)) for _ in range(21 * 13)]); "
                     "im.save(\"" + (dir / "pil.jpg").string() + "\", quality=92)") == 0);
  CHECK(compare_with_pil(dir / "pil.jpg", l3::load_image(dir / "pil.jpg"), dir / "ours.rgb") == 0);

  // Extraneous bytes before a marker: a libjpeg warning; PIL decodes the same pixels.
  l3::test::JpegSpec rgb{24, 16, 3, JCS_RGB, 90, false};
  std::vector<std::uint8_t> bytes = l3::test::make_jpeg(rgb, l3::test::gradient(24, 16, 3, 4));
  fs::create_directories(dir / "src");
  const std::size_t app0_end = 4 + (std::size_t{bytes[4]} << 8 | bytes[5]);
  bytes.insert(bytes.begin() + static_cast<long>(app0_end), {0x12, 0x34});
  l3::test::write_file(dir / "src/junk.jpg", bytes);
  CHECK(compare_with_pil(dir / "src/junk.jpg", l3::load_image(dir / "src/junk.jpg"), dir / "ours.rgb") == 0);
  auto run = l3pack(dir, convert_args(dir / "src", dir / "ds"));
  CHECK_MESSAGE(run.exit_code == 0, run.err);
  run = l3pack(dir, convert_args(dir / "src", dir / "strict", "--strict-jpeg --allow-empty"));
  CHECK(run.exit_code == 0);
  CHECK(skip_list(dir / "strict") ==
        std::map<std::string, std::string>{{"junk.jpg", "corrupt header"}});
  run = l3pack(dir, "verify " + quoted(dir / "strict") + " --source " + quoted(dir / "src"));
  CHECK_MESSAGE(run.exit_code == 0, run.err);  // the strict run's choice is the one verify applies
}

TEST_CASE("--convert-16bit keeps 16-bit PNGs as their high byte; without it they are skipped") {
  TempDir dir;
  l3::test::PngSpec deep;
  deep.width = 3;
  deep.height = 2;
  deep.color_type = PNG_COLOR_TYPE_RGB;
  deep.bit_depth = 16;
  for (int i = 0; i < 18; ++i) deep.samples.push_back(static_cast<std::uint16_t>(i * 3001));
  fs::create_directories(dir / "src");
  l3::test::write_file(dir / "src/deep.png", l3::test::make_png(deep));
  l3::test::save_test_png(dir / "src/plain.png", 4, 4, 3, 1);
  auto run = l3pack(dir, convert_args(dir / "src", dir / "ds"));
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  CHECK(skip_list(dir / "ds") == std::map<std::string, std::string>{{"deep.png", "unsupported"}});
  CHECK(run.err.find("unsupported: unsupported") == std::string::npos);
  run = l3pack(dir, convert_args(dir / "src", dir / "strict", "--strict"));
  CHECK(run.exit_code == 1);  // one wording, the file named once
  CHECK(run.err == "l3pack: error: " + (dir / "src/deep.png").string() +
                       ": unsupported: 16-bit PNG is not supported (l3 stores 8-bit samples; --convert-16bit keeps "
                       "the high byte) (--strict: conversion stopped)\n");
  run = l3pack(dir, convert_args(dir / "src", dir / "ds16", "--convert-16bit"));
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  CHECK(skip_list(dir / "ds16").empty());
  run = l3pack(dir, "verify " + quoted(dir / "ds16") + " --source " + quoted(dir / "src"));
  CHECK_MESSAGE(run.exit_code == 0, run.err);
  l3::Dataset dataset = l3::Dataset::open(dir / "ds16");
  std::vector<std::uint8_t> pixels = l3::decode(dataset.record(0).payload);
  REQUIRE(pixels.size() == 18);
  for (int i = 0; i < 18; ++i) CHECK(pixels[static_cast<std::size_t>(i)] == (i * 3001) >> 8);
}
