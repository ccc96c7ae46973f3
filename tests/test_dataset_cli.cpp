// l3pack convert / verify / info / ls / extract end to end, on generated sources.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "test_dataset_cli_helpers.hpp"

using l3::test::l3pack;
using l3::test::quoted;
using l3::test::TempDir;
namespace fs = std::filesystem;

namespace {

// cat/{a.png, sub/b.jpg, e.png (RGBA)}, dog/{c.png (gray), d.pgm, f.png (gray+alpha)}, and a README.
void make_class_tree(const fs::path& src) {
  l3::test::save_test_png(src / "cat/a.png", 37, 21, 3, 1);
  l3::test::save_test_jpeg(src / "cat/sub/b.jpg", 40, 24, 2);
  l3::test::save_test_png(src / "cat/e.png", 16, 70, 4, 3);
  l3::test::save_test_png(src / "dog/c.png", 64, 9, 1, 4);
  l3::test::save_test_png(src / "dog/f.png", 5, 5, 2, 6);
  l3::Image gray{12, 13, 1, l3::test::gradient(12, 13, 1, 5)};
  l3::save_pnm(src / "dog/d.pgm", gray.view());
  l3::test::write_file(src / "dog/README.txt", {'h', 'i'});
}

std::string convert_args(const fs::path& src, const fs::path& out, const std::string& extra = "") {
  return "convert " + quoted(src) + " " + quoted(out) + " " + extra;
}

// Flips one byte of a file in place.
void flip_byte(const fs::path& file, std::size_t offset) {
  std::vector<std::uint8_t> bytes = l3::test::read_file(file);
  bytes.at(offset) ^= 0x5a;
  l3::test::write_file(file, bytes);
}

}  // namespace

TEST_CASE("class folders: convert then extract gives back every source pixel") {
  TempDir dir;
  make_class_tree(dir / "src");
  auto run = l3pack(dir, convert_args(dir / "src", dir / "ds", "--shard-size 2k"));
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  CHECK(run.out.find("images:    6 in") != std::string::npos);
  CHECK(run.out.find("1 skipped") != std::string::npos);  // dog/README.txt
  CHECK(run.out.find("1 not an image") != std::string::npos);

  l3::Dataset dataset = l3::Dataset::open(dir / "ds");
  CHECK(dataset.class_names() == std::vector<std::string>{"cat", "dog"});
  CHECK(dataset.shard_count() > 1);  // 2 KiB shards
  const std::vector<std::pair<std::string, std::int64_t>> expected = {
      {"cat/a.png", 0}, {"cat/e.png", 0}, {"cat/sub/b.jpg", 0}, {"dog/c.png", 1}, {"dog/d.pgm", 1}, {"dog/f.png", 1}};
  REQUIRE(dataset.size() == expected.size());
  for (std::uint64_t i = 0; i < dataset.size(); ++i) {
    CHECK(dataset.record(i).key == expected[i].first);
    CHECK(dataset.record(i).label == expected[i].second);
  }
  const auto& stats = dataset.manifest().image_stats;
  CHECK(stats["images"] == 6);
  CHECK(stats["width"]["min"] == 5);
  CHECK(stats["width"]["max"] == 64);
  CHECK(stats["height"]["max"] == 70);
  CHECK(stats["channels"]["1"] == 2);
  CHECK(stats["channels"]["4"] == 1);
  CHECK(stats["total_pixels"] == 37 * 21 + 40 * 24 + 16 * 70 + 64 * 9 + 5 * 5 + 12 * 13);

  run = l3pack(dir, "extract " + quoted(dir / "ds") + " " + quoted(dir / "back"));
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  for (const auto& entry : expected) {
    const std::string& key = entry.first;  // a name, not a structured binding: clang 14 cannot capture those
    CAPTURE(key);
    fs::path back = dir / "back" / key;
    if (back.extension() != ".png") back += ".png";  // b.jpg -> b.jpg.png (extract keeps the key's extension)
    l3::Image original = l3::load_image(dir / "src" / key), restored = l3::load_image(back);
    CHECK(restored.width == original.width);
    CHECK(restored.channels == original.channels);
    CHECK(restored.pixels == original.pixels);
  }
  run = l3pack(dir, "extract " + quoted(dir / "ds") + " " + quoted(dir / "pnm") + " --format ppm");
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  CHECK(l3::load_image(dir / "pnm/cat/a.png.ppm").pixels == l3::load_image(dir / "src/cat/a.png").pixels);
  CHECK(l3::load_image(dir / "pnm/dog/c.png.pgm").pixels == l3::load_image(dir / "src/dog/c.png").pixels);
  CHECK(l3::load_image(dir / "pnm/cat/e.png.pam").pixels == l3::load_image(dir / "src/cat/e.png").pixels);
  CHECK(l3::load_image(dir / "pnm/dog/d.pgm").pixels == l3::load_image(dir / "src/dog/d.pgm").pixels);

  run = l3pack(dir, "verify " + quoted(dir / "ds") + " --source " + quoted(dir / "src"));
  CHECK_MESSAGE(run.exit_code == 0, run.err);
  CHECK(run.out.find("6 passed, 0 failed") != std::string::npos);
}

TEST_CASE("list files (CSV with a header, TSV) keep their order, labels and relative keys") {
  TempDir dir;
  l3::test::save_test_png(dir / "data/imgs/x.png", 8, 8, 3, 1);
  l3::test::save_test_png(dir / "data/imgs/y, z.png", 9, 8, 1, 2);
  l3::test::save_test_png(dir / "data/w.png", 10, 8, 3, 3);
  std::string csv = "path,label\nimgs/y, z.png,7\n\n# a comment\nw.png,0\r\n./imgs/x.png,2\n";
  l3::test::write_file(dir / "data/list.csv", {csv.begin(), csv.end()});
  std::string tsv = "w.png\t5\nimgs/x.png\t-1\n";
  l3::test::write_file(dir / "data/list.tsv", {tsv.begin(), tsv.end()});

  auto run = l3pack(dir, convert_args(dir / "data/list.csv", dir / "csv"));
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  auto records = l3::test::record_digests(dir / "csv");
  REQUIRE(records.size() == 3);
  CHECK(records[0].key == "imgs/y, z.png");
  CHECK(records[0].label == 7);
  CHECK(records[1].key == "w.png");
  CHECK(records[2].key == "imgs/x.png");
  CHECK(records[2].label == 2);
  // Integer labels name themselves, so the dataset reads as labelled (issue 15: info said "unlabeled").
  CHECK(l3::read_manifest(dir / "csv").classes ==
        std::vector<std::string>{"0", "1", "2", "3", "4", "5", "6", "7"});
  run = l3pack(dir, "info " + quoted(dir / "csv"));
  CHECK(run.out.find("unlabeled:      0 records") != std::string::npos);
  run = l3pack(dir, "verify " + quoted(dir / "csv") + " --source " + quoted(dir / "data/list.csv"));
  CHECK_MESSAGE(run.exit_code == 0, run.err);

  run = l3pack(dir, convert_args(dir / "data/list.tsv", dir / "tsv"));
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  records = l3::test::record_digests(dir / "tsv");
  REQUIRE(records.size() == 2);
  CHECK(records[0].label == 5);
  CHECK(records[1].label == -1);

  std::string bad = "w.png,0\n../escape.png,1\n";
  l3::test::write_file(dir / "data/bad.csv", {bad.begin(), bad.end()});
  run = l3pack(dir, convert_args(dir / "data/bad.csv", dir / "bad"));
  CHECK(run.exit_code != 0);
  CHECK(run.err.find("bad.csv:2:") != std::string::npos);
}

TEST_CASE("a flat folder gives unlabeled records keyed by relative path") {
  TempDir dir;
  l3::test::save_test_png(dir / "flat/b.png", 8, 8, 3, 1);
  l3::test::save_test_png(dir / "flat/a.png", 8, 9, 3, 2);
  l3::test::save_test_png(dir / "flat/deeper/c.png", 8, 10, 1, 3);
  // Images next to a folder: class folders or not? The user says.
  auto run = l3pack(dir, convert_args(dir / "flat", dir / "mixed"));
  CHECK(run.exit_code == 1);
  CHECK(run.err.find("mixes class folders (e.g. 'deeper/') with image files (e.g. 'a.png')") != std::string::npos);
  CHECK(run.err.find("--layout flat") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "mixed"));
  run = l3pack(dir, convert_args(dir / "flat", dir / "ds", "--layout flat"));
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  auto records = l3::test::record_digests(dir / "ds");
  REQUIRE(records.size() == 3);
  CHECK(records[0].key == "a.png");
  CHECK(records[1].key == "b.png");
  CHECK(records[2].key == "deeper/c.png");
  for (const auto& r : records) CHECK(r.label == -1);
  CHECK(l3::read_manifest(dir / "ds").classes.empty());
}

TEST_CASE("a corrupt or 16-bit input is reported and skipped; --strict stops with exit 1") {
  TempDir dir;
  make_class_tree(dir / "src");
  l3::test::write_file(dir / "src/cat/broken.png", {0x89, 'P', 'N', 'G', 1, 2, 3});
  l3::test::PngSpec deep;
  deep.width = deep.height = 4;
  deep.bit_depth = 16;
  deep.samples.assign(16, 40000);
  l3::test::write_file(dir / "src/dog/deep.png", l3::test::make_png(deep));

  auto run = l3pack(dir, convert_args(dir / "src", dir / "ds"));
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  CHECK(run.out.find("images:    6 in") != std::string::npos);
  CHECK(run.out.find("3 skipped") != std::string::npos);  // and dog/README.txt
  CHECK(run.err.find("broken.png: ") != std::string::npos);
  CHECK(run.err.find("deep.png: unsupported") != std::string::npos);
  CHECK(run.err.find("(skipped)") != std::string::npos);
  CHECK(l3::read_manifest(dir / "ds").total_records() == 6);

  // --strict: the scan's skips stop it before any work, then the decode skips.
  run = l3pack(dir, convert_args(dir / "src", dir / "strict", "--strict"));
  CHECK(run.exit_code == 1);
  CHECK(run.err.find("l3pack: error: " + (dir / "src/dog/README.txt").string() + ": not an image") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "strict"));
  fs::remove(dir / "src/dog/README.txt");
  run = l3pack(dir, convert_args(dir / "src", dir / "strict", "--strict"));
  CHECK(run.exit_code == 1);
  CHECK(run.err.find("l3pack: error: " + (dir / "src/cat/broken.png").string()) != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "strict/manifest.json"));
}

TEST_CASE("verify reports a flipped byte anywhere in a record payload, with index and key") {
  TempDir dir;
  make_class_tree(dir / "src");
  REQUIRE(l3pack(dir, convert_args(dir / "src", dir / "ds")).exit_code == 0);
  const fs::path shard = dir / "ds" / l3::test::shard_files(dir / "ds").at(0);
  const std::vector<std::uint8_t> pristine = l3::test::read_file(shard);

  std::vector<std::pair<std::size_t, std::size_t>> payloads;  // (offset, size) of each record's payload
  {
    l3::ShardReader reader(shard);
    for (std::uint64_t i = 0; i < reader.size(); ++i) {
      auto p = reader.record(i).payload;
      payloads.emplace_back(static_cast<std::size_t>(p.data() - reader.file_bytes().data()), p.size());
    }
  }
  for (std::size_t record : {std::size_t{0}, std::size_t{2}, payloads.size() - 1}) {
    const auto [offset, size] = payloads[record];
    for (std::size_t at : {offset, offset + 7, offset + size / 2, offset + size - 1}) {
      CAPTURE(record);
      CAPTURE(at);
      flip_byte(shard, at);
      auto run = l3pack(dir, "verify " + quoted(dir / "ds"));
      CHECK(run.exit_code == 1);
      std::string line = "record " + std::to_string(record) + " (";
      CHECK(run.err.find(line) != std::string::npos);
      CHECK(run.err.find("checksum mismatch") != std::string::npos);
      CHECK(run.err.find("file hash differs from the manifest") != std::string::npos);
      CHECK(run.out.find("1 failed") != std::string::npos);
      l3::test::write_file(shard, pristine);
    }
  }
  CHECK(l3pack(dir, "verify " + quoted(dir / "ds")).exit_code == 0);
}

TEST_CASE("verify --source reports pixels that differ from the source file") {
  TempDir dir;
  make_class_tree(dir / "src");
  REQUIRE(l3pack(dir, convert_args(dir / "src", dir / "ds")).exit_code == 0);
  l3::test::save_test_png(dir / "src/dog/c.png", 64, 9, 1, 99);  // same size, other pixels
  auto run = l3pack(dir, "verify " + quoted(dir / "ds") + " --source " + quoted(dir / "src"));
  CHECK(run.exit_code == 1);
  CHECK(run.err.find("record 3 (dog/c.png): pixels differ") != std::string::npos);
  fs::remove(dir / "src/dog/d.pgm");
  run = l3pack(dir, "verify " + quoted(dir / "ds") + " --source " + quoted(dir / "src"));
  CHECK(run.err.find("record 4 (dog/d.pgm): source ") != std::string::npos);
}

TEST_CASE("a truncated shard and a damaged manifest give clear errors") {
  TempDir dir;
  make_class_tree(dir / "src");
  REQUIRE(l3pack(dir, convert_args(dir / "src", dir / "ds")).exit_code == 0);
  const fs::path shard = dir / "ds" / l3::test::shard_files(dir / "ds").at(0);
  std::vector<std::uint8_t> bytes = l3::test::read_file(shard);
  bytes.resize(bytes.size() - 10);
  l3::test::write_file(shard, bytes);
  auto run = l3pack(dir, "verify " + quoted(dir / "ds"));
  CHECK(run.exit_code == 1);
  CHECK(run.err.find("shard " + shard.string() + ": ") != std::string::npos);
  CHECK(run.err.find("unreadable") != std::string::npos);
  run = l3pack(dir, "ls " + quoted(dir / "ds"));
  CHECK(run.exit_code == 1);
  CHECK(run.err.rfind("l3pack: error: ", 0) == 0);
  CHECK(run.err.find(shard.string()) != std::string::npos);  // the shard named, the folder not repeated
  CHECK(run.err.find((dir / "ds").string() + ": ") == std::string::npos);

  std::string manifest = l3::test::text_of(dir / "ds/manifest.json");
  manifest.replace(manifest.find("\"total_records\""), 15, "\"total_recordz\"");
  l3::test::write_file(dir / "ds/manifest.json", {manifest.begin(), manifest.end()});
  for (const char* command : {"verify ", "info ", "ls ", "extract "}) {
    CAPTURE(command);
    std::string arguments = command + quoted(dir / "ds");
    if (std::string(command) == "extract ") arguments += " " + quoted(dir / "out");
    run = l3pack(dir, arguments);
    CHECK(run.exit_code == 1);
    CHECK(run.err.find("corrupt manifest") != std::string::npos);
    CHECK(run.err.find("total_records") != std::string::npos);
  }
}

TEST_CASE("info and ls describe a dataset; info FILE still describes an .l3i") {
  TempDir dir;
  make_class_tree(dir / "src");
  REQUIRE(l3pack(dir, convert_args(dir / "src", dir / "ds")).exit_code == 0);
  auto run = l3pack(dir, "info " + quoted(dir / "ds") + " --json");
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  auto info = nlohmann::json::parse(run.out);
  CHECK(info["records"] == 6);
  CHECK(info["shards"] == 1);
  CHECK(info["classes"][1]["name"] == "dog");
  CHECK(info["classes"][1]["records"] == 3);
  CHECK(info["bits_per_pixel"].get<double>() > 0);
  run = l3pack(dir, "info " + quoted(dir / "ds"));
  CHECK(run.out.find("records:        6") != std::string::npos);

  run = l3pack(dir, "ls " + quoted(dir / "ds"));
  REQUIRE(run.exit_code == 0);
  CHECK(std::count(run.out.begin(), run.out.end(), '\n') == 7);  // header + 6
  CHECK(run.out.find("1:dog") != std::string::npos);
  CHECK(run.out.find("64x9x1") != std::string::npos);
  CHECK(run.out.find("cat/sub/b.jpg") != std::string::npos);
  run = l3pack(dir, "ls " + quoted(dir / "ds") + " --limit 2");
  CHECK(std::count(run.out.begin(), run.out.end(), '\n') == 3);

  REQUIRE(l3pack(dir, "encode " + quoted(dir / "src/cat/a.png") + " " + quoted(dir / "a.l3i")).exit_code == 0);
  run = l3pack(dir, "info " + quoted(dir / "a.l3i"));
  CHECK(run.out.find("37 x 21") != std::string::npos);
}

TEST_CASE("extract refuses keys that would escape the output folder") {
  TempDir dir;
  l3::Image image{4, 4, 3, l3::test::gradient(4, 4, 3, 1)};
  std::vector<std::uint8_t> l3i = l3::encode(image.view());
  fs::create_directories(dir / "ds");
  l3::Manifest manifest;
  {
    l3::ShardWriter writer(dir / "ds/shard-00000.l3s");
    writer.append(l3i, -1, "../escape.png");
    writer.append(l3i, -1, "/abs/olute.png");
    writer.append(l3i, -1, "ok/fine.png");
    writer.append(l3i, -1, "a/../../up.png");
    manifest.shards.push_back(l3::manifest_entry(writer.finalize()));
  }
  l3::write_manifest_atomic(dir / "ds", manifest);
  auto run = l3pack(dir, "extract " + quoted(dir / "ds") + " " + quoted(dir / "out/inner"));
  CHECK(run.exit_code == 1);
  CHECK(run.err.find("record 0 (../escape.png): key would write outside") != std::string::npos);
  CHECK(run.err.find("record 1 (/abs/olute.png): key would write outside") != std::string::npos);
  CHECK(run.err.find("record 3 (a/../../up.png): key would write outside") != std::string::npos);
  CHECK(fs::exists(dir / "out/inner/ok/fine.png"));
  CHECK_FALSE(fs::exists(dir / "out/escape.png"));
  CHECK_FALSE(fs::exists(dir / "out/up.png"));
  CHECK_FALSE(fs::exists("/abs/olute.png"));
}
