// l3pack ls and extract on keys that real folders produce (long names, one
// stem with several extensions, newlines), per-command help and the
// unknown-command message.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "l3/codec/codec.hpp"
#include "test_dataset_cli_helpers.hpp"

using l3::test::l3pack;
using l3::test::quoted;
using l3::test::TempDir;
namespace fs = std::filesystem;

namespace {

struct KeyedImage {
  std::string key;
  l3::Image image;
};

// A one-shard dataset holding `records` under their keys (unlabeled).
void write_keyed_dataset(const fs::path& dir, const std::vector<KeyedImage>& records) {
  fs::create_directories(dir);
  l3::Manifest manifest;
  l3::ShardWriter writer(dir / "shard-00000.l3s");
  for (const KeyedImage& r : records) writer.append(l3::encode(r.image.view()), -1, r.key);
  manifest.shards.push_back(l3::manifest_entry(writer.finalize()));
  l3::write_manifest_atomic(dir, manifest);
}

KeyedImage keyed(const std::string& key, std::uint32_t seed) {
  return {key, l3::Image{6, 5, 3, l3::test::gradient(6, 5, 3, seed)}};
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool one_error_line(const l3::test::Run& run, const std::string& text) {
  return run.err == "l3pack: error: " + text + "\n";
}

}  // namespace

TEST_CASE("extract: a 254-byte file name is extracted (the temporary name stays short)") {
  TempDir dir;
  const std::string long_png = std::string(250, 'p') + ".png";  // 254 bytes: legal (NAME_MAX 255)
  const std::string long_jpg = std::string(250, 'j') + ".jpg";  // + ".png" would be 258: the extension is replaced
  REQUIRE(long_png.size() == 254);
  write_keyed_dataset(dir / "ds", {keyed("cls/" + long_png, 1), keyed(long_jpg, 2)});
  auto run = l3pack(dir, "extract " + quoted(dir / "ds") + " " + quoted(dir / "out"));
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  CHECK(l3::load_image(dir / "out/cls" / long_png).pixels == keyed("", 1).image.pixels);
  CHECK(l3::load_image(dir / "out" / (std::string(250, 'j') + ".png")).pixels == keyed("", 2).image.pixels);
  for (const auto& entry : fs::recursive_directory_iterator(dir / "out"))  // no temporary left behind
    CHECK(entry.path().filename().string().rfind(".l3x-", 0) == std::string::npos);
}

TEST_CASE("extract: keys sharing a stem keep their own extension; --replace-extension reports collisions") {
  TempDir dir;
  write_keyed_dataset(dir / "ds", {keyed("a.jpg", 1), keyed("a.JPEG", 2), keyed("a.png", 3), keyed("noext", 4)});
  auto run = l3pack(dir, "extract " + quoted(dir / "ds") + " " + quoted(dir / "out"));
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  CHECK(run.out.find("extracted 4 of 4 records") != std::string::npos);
  CHECK(l3::load_image(dir / "out/a.jpg.png").pixels == keyed("", 1).image.pixels);
  CHECK(l3::load_image(dir / "out/a.JPEG.png").pixels == keyed("", 2).image.pixels);
  CHECK(l3::load_image(dir / "out/a.png").pixels == keyed("", 3).image.pixels);
  CHECK(l3::load_image(dir / "out/noext.png").pixels == keyed("", 4).image.pixels);
  run = l3pack(dir, "extract " + quoted(dir / "ds") + " " + quoted(dir / "ppm") + " --format ppm");
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  CHECK(fs::exists(dir / "ppm/a.jpg.ppm"));
  CHECK(fs::exists(dir / "ppm/a.png.ppm"));

  run = l3pack(dir, "extract " + quoted(dir / "ds") + " " + quoted(dir / "swapped") + " --replace-extension");
  CHECK(run.exit_code == 1);
  CHECK(run.out.find("extracted 2 of 4 records") != std::string::npos);
  CHECK(run.err.find("record 1 (a.JPEG): same output file as record 0; not extracted") != std::string::npos);
  CHECK(run.err.find("record 2 (a.png): same output file as record 0; not extracted") != std::string::npos);
  CHECK(l3::load_image(dir / "swapped/a.png").pixels == keyed("", 1).image.pixels);
}

TEST_CASE("extract refuses to overwrite an existing file unless --force") {
  TempDir dir;
  write_keyed_dataset(dir / "ds", {keyed("x/one.png", 1), keyed("x/two.png", 2)});
  fs::create_directories(dir / "out/x");
  l3::test::write_file(dir / "out/x/two.png", {'o', 'l', 'd'});
  auto run = l3pack(dir, "extract " + quoted(dir / "ds") + " " + quoted(dir / "out"));
  CHECK(run.exit_code == 1);
  CHECK_MESSAGE(one_error_line(run, (dir / "out/x/two.png").string() + ": already exists (use --force to overwrite)"),
                run.err);
  CHECK(run.out.empty());
  CHECK_FALSE(fs::exists(dir / "out/x/one.png"));  // checked before anything is written
  CHECK(l3::test::read_file(dir / "out/x/two.png") == std::vector<std::uint8_t>{'o', 'l', 'd'});

  run = l3pack(dir, "extract " + quoted(dir / "ds") + " " + quoted(dir / "out") + " --force");
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  CHECK(l3::load_image(dir / "out/x/two.png").pixels == keyed("", 2).image.pixels);
  CHECK(l3::load_image(dir / "out/x/one.png").pixels == keyed("", 1).image.pixels);
  run = l3pack(dir, "extract " + quoted(dir / "ds") + " " + quoted(dir / "out"));  // a second run refuses too
  CHECK(run.exit_code == 1);
  CHECK(one_error_line(run, (dir / "out/x/one.png").string() + ": already exists (use --force to overwrite)"));
}

TEST_CASE("ls prints one line per record with control characters escaped; --json gives the exact keys") {
  TempDir dir;
  const std::string odd = "two\nlines\tand\\back\x01slash.png";
  write_keyed_dataset(dir / "ds", {keyed("plain.png", 1), keyed(odd, 2), keyed("caf\xc3\xa9.png", 3)});
  auto run = l3pack(dir, "ls " + quoted(dir / "ds"));
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  const auto lines = lines_of(run.out);
  REQUIRE(lines.size() == 4);  // header + 3 records
  CHECK(lines[2].find("two\\nlines\\tand\\\\back\\x01slash.png") != std::string::npos);
  CHECK(lines[3].find("caf\xc3\xa9.png") != std::string::npos);  // UTF-8 kept as is
  CHECK(lines[1].find("6x5x3") != std::string::npos);

  run = l3pack(dir, "ls " + quoted(dir / "ds") + " --json");
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  const auto json_lines = lines_of(run.out);
  REQUIRE(json_lines.size() == 3);  // JSON Lines: one object per record, no header
  const auto second = nlohmann::json::parse(json_lines[1]);
  CHECK(second["key"] == odd);
  CHECK(second["index"] == 1);
  CHECK(second["shard"] == "shard-00000.l3s");
  CHECK(second["label"] == -1);
  CHECK(second["class"].is_null());
  CHECK(second["width"] == 6);
  CHECK(second["height"] == 5);
  CHECK(second["channels"] == 3);
  CHECK(second["bytes"].get<std::uint64_t>() > 0);
  run = l3pack(dir, "ls " + quoted(dir / "ds") + " --json --limit 1");
  CHECK(lines_of(run.out).size() == 1);
}

TEST_CASE("each command's --help shows its own examples, not the top-level ones") {
  TempDir dir;
  const std::string top_level = "l3pack encode photo.png photo.l3i     encode";
  REQUIRE(l3pack(dir, "--help").out.find(top_level) != std::string::npos);
  for (const char* command : {"encode", "decode", "info", "convert", "verify", "ls", "extract", "merge", "bench",
                              "bench-read"}) {
    CAPTURE(command);
    auto run = l3pack(dir, std::string(command) + " --help");
    CHECK(run.exit_code == 0);
    CHECK(run.out.find(top_level) == std::string::npos);
    CHECK(run.out.find(std::string("l3pack ") + command + " ") != std::string::npos);  // an example of its own
  }
  auto ls = l3pack(dir, "ls --help");
  CHECK(ls.out.find("l3pack ls ds/ --json") != std::string::npos);
  CHECK(ls.out.find("escaped") != std::string::npos);
}

TEST_CASE("an unknown command is named in one error line, exit 2") {
  TempDir dir;
  auto run = l3pack(dir, "foo bar");
  CHECK(run.exit_code == 2);
  CHECK_MESSAGE(one_error_line(run, "unknown command 'foo' (run 'l3pack --help')"), run.err);
  run = l3pack(dir, "--version-typo lss x");
  CHECK(run.exit_code == 2);
  CHECK(run.err.rfind("l3pack: error: ", 0) == 0);
  run = l3pack(dir, "");
  CHECK(run.exit_code == 2);
  CHECK(one_error_line(run, "A subcommand is required (run 'l3pack --help')"));
}

TEST_CASE("a dataset error names the missing file once, for every dataset command") {
  TempDir dir;
  const std::string missing = (dir / "nope").string();
  const std::string line = "I/O error: no readable " + missing + "/manifest.json (dataset missing or never committed)";
  for (const std::string& command : {"ls " + missing, "extract " + missing + " " + (dir / "out").string(),
                                     "merge " + (dir / "m").string() + " " + missing, "bench-read " + missing}) {
    CAPTURE(command);
    auto run = l3pack(dir, command);
    CHECK(run.exit_code == 1);
    CHECK_MESSAGE(one_error_line(run, line), run.err);
  }
  // a subject that the reason does not name is kept
  auto run = l3pack(dir, "decode " + (dir / "none.l3i").string() + " " + (dir / "x.png").string());
  CHECK(run.exit_code == 1);
  CHECK(one_error_line(run, (dir / "none.l3i").string() + ": I/O error: cannot open: No such file or directory"));
}
