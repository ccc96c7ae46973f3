// Manifests and datasets (spec/format.md §8).
#include "l3/format/dataset.hpp"
#include "test_format_util.hpp"

using namespace l3;
using namespace l3::test;
using nlohmann::json;

namespace {

// Built with += : GCC 12 warns falsely (-Wrestrict) on key_of(i).
std::string key_of(std::size_t i) {
  std::string k = "k";
  k += std::to_string(i);
  return k;
}

// Writes shards of the given sizes (labels i % 3, key "k<global index>") and the manifest.
Manifest make_dataset(const std::filesystem::path& dir, const std::vector<std::size_t>& sizes) {
  Manifest m;
  m.classes = {"cat", "dog", "bird"};
  m.image_stats = {{"width", {{"min", 4}, {"max", 9}, {"mean", 6.5}}}};
  m.extra = {{"source", "unit test"}};
  std::size_t global = 0;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    ShardWriter w(dir / ("shard-" + std::to_string(k) + ".l3s"));
    for (std::size_t i = 0; i < sizes[k]; ++i, ++global)
      w.append(bytes_of("payload " + std::to_string(global)), static_cast<std::int64_t>(global % 3), key_of(global));
    m.shards.push_back(manifest_entry(w.finalize()));
  }
  write_manifest_atomic(dir, m);
  return m;
}

json manifest_json(const std::filesystem::path& dir) {
  return json::parse(std::ifstream(dir / kManifestName));
}

errc read_error_after(const std::filesystem::path& dir, const std::function<void(json&)>& edit) {
  json j = manifest_json(dir);
  edit(j);
  std::ofstream(dir / kManifestName, std::ios::trunc) << j.dump();
  return error_of([&] { (void)read_manifest(dir); });
}

}  // namespace

TEST_CASE("dataset: global index -> (shard, local), records, class names") {
  auto dir = fresh_dir("dataset");
  Manifest written = make_dataset(dir, {5, 0, 3, 1, 0});
  auto ds = Dataset::open(dir);
  CHECK(ds.size() == 9);
  CHECK(ds.shard_count() == 5);
  CHECK(ds.class_names() == std::vector<std::string>{"cat", "dog", "bird"});
  CHECK(ds.manifest().image_stats == written.image_stats);
  CHECK(ds.manifest().extra == written.extra);
  std::vector<std::pair<std::size_t, std::uint64_t>> want = {{0, 0}, {0, 1}, {0, 2}, {0, 3}, {0, 4}, {2, 0}, {2, 1}, {2, 2}, {3, 0}};
  for (std::uint64_t i = 0; i < ds.size(); ++i) {
    CAPTURE(i);
    auto loc = ds.locate(i);
    CHECK(std::make_pair(loc.shard, loc.index) == want[i]);
    auto r = ds.record(i);
    CHECK(std::string(r.payload.begin(), r.payload.end()) == "payload " + std::to_string(i));
    CHECK(r.label == static_cast<std::int64_t>(i % 3));
    CHECK(r.key == key_of(i));
  }
  CHECK(error_of([&] { (void)ds.locate(9); }) == errc::out_of_range);
  CHECK(error_of([&] { (void)ds.shard(5); }) == errc::out_of_range);
}

TEST_CASE("manifest: serialize and parse round trip, deterministic") {
  auto dir = fresh_dir("manifest_round_trip");
  Manifest m = make_dataset(dir, {2, 3});
  Manifest back = read_manifest(dir);
  CHECK(serialize_manifest(back) == serialize_manifest(m));
  CHECK(back.total_records() == 5);
  CHECK(back.shards.size() == 2);
  CHECK(back.shards[1].file == "shard-1.l3s");
  CHECK(back.shards[1].file_hash == m.shards[1].file_hash);
  CHECK(back.shards[1].bytes == std::filesystem::file_size(dir / "shard-1.l3s"));
  CHECK(manifest_json(dir)["shards"][0]["xxh3"].get<std::string>().size() == 16);
}

TEST_CASE("manifest: damaged or incomplete manifests are rejected with corrupt_manifest") {
  auto dir = fresh_dir("manifest_damage");
  make_dataset(dir, {2, 1});
  std::string good = serialize_manifest(read_manifest(dir));
  auto restore = [&] { std::ofstream(dir / kManifestName, std::ios::trunc) << good; };

  for (const char* field : {"format", "version", "shards", "classes", "total_records", "image_stats", "extra"}) {
    CAPTURE(field);
    CHECK(read_error_after(dir, [&](json& j) { j.erase(field); }) == errc::corrupt_manifest);
    restore();
  }
  for (const char* field : {"file", "records", "bytes", "xxh3"}) {
    CAPTURE(field);
    CHECK(read_error_after(dir, [&](json& j) { j["shards"][1].erase(field); }) == errc::corrupt_manifest);
    restore();
  }
  std::vector<std::function<void(json&)>> edits = {
      [](json& j) { j["format"] = "something-else"; },
      [](json& j) { j["total_records"] = 4; },
      [](json& j) { j["total_records"] = -3; },
      [](json& j) { j["total_records"] = 3.0; },
      [](json& j) { j["shards"] = json::object(); },
      [](json& j) { j["shards"][0] = 7; },
      [](json& j) { j["shards"][0]["records"] = "2"; },
      [](json& j) { j["shards"][0]["xxh3"] = "0123"; },
      [](json& j) { j["shards"][0]["xxh3"] = "0123456789ABCDEF"; },
      [](json& j) { j["shards"][0]["file"] = "../escape.l3s"; },
      [](json& j) { j["shards"][0]["file"] = "sub/shard.l3s"; },
      [](json& j) { j["shards"][0]["file"] = ""; },
      [](json& j) { j["shards"][1]["file"] = j["shards"][0]["file"]; },
      [](json& j) { j["classes"] = {"a", 1}; },
      [](json& j) { j["image_stats"] = json::array(); },
      [](json& j) { j["extra"] = "text"; },
      [](json& j) { j = json::array(); },
  };
  for (std::size_t k = 0; k < edits.size(); ++k) {
    CAPTURE(k);
    CHECK(read_error_after(dir, edits[k]) == errc::corrupt_manifest);
    restore();
  }
  CHECK(read_error_after(dir, [](json& j) { j["version"] = 2; }) == errc::unsupported_version);
  restore();
  std::ofstream(dir / kManifestName, std::ios::trunc) << good.substr(0, good.size() / 2);  // torn write
  CHECK(error_of([&] { (void)read_manifest(dir); }) == errc::corrupt_manifest);
  std::ofstream(dir / kManifestName, std::ios::trunc) << "{\"total_records\": 99999999999999999999999}";
  CHECK(error_of([&] { (void)read_manifest(dir); }) == errc::corrupt_manifest);
  restore();
  CHECK(error_of([&] { (void)read_manifest(dir); }) == errc::ok);
}

TEST_CASE("manifest: written atomically; a leftover temporary file is not a manifest") {
  auto dir = fresh_dir("manifest_atomic");
  Manifest m = make_dataset(dir, {1});
  CHECK_FALSE(std::filesystem::exists(dir / "manifest.json.tmp"));
  // A crash before the rename leaves only the temporary file: no dataset.
  std::filesystem::rename(dir / kManifestName, dir / "manifest.json.tmp");
  CHECK(error_of([&] { (void)read_manifest(dir); }) == errc::io_error);
  CHECK(error_of([&] { (void)Dataset::open(dir); }) == errc::io_error);
  // The next write replaces the stale temporary file and commits.
  m.extra = {{"second", true}};
  write_manifest_atomic(dir, m);
  CHECK_FALSE(std::filesystem::exists(dir / "manifest.json.tmp"));
  CHECK(read_manifest(dir).extra == m.extra);
  // write refuses an invalid manifest and leaves the committed one alone.
  Manifest bad = m;
  bad.shards.push_back(bad.shards[0]);
  CHECK(error_of([&] { write_manifest_atomic(dir, bad); }) == errc::corrupt_manifest);
  CHECK(read_manifest(dir).shards.size() == 1);
}

TEST_CASE("dataset: shards that disagree with the manifest are rejected when opened") {
  auto dir = fresh_dir("dataset_mismatch");
  Manifest m = make_dataset(dir, {3, 2});

  Manifest wrong_count = m;
  wrong_count.shards[1].records = 3;
  write_manifest_atomic(dir, wrong_count);
  auto ds = Dataset::open(dir);
  CHECK(ds.record(0).label == 0);  // shard 0 is fine: shards open lazily
  CHECK(error_of([&] { (void)ds.record(3); }) == errc::corrupt_manifest);
  CHECK(error_of([&] { (void)ds.record(3); }) == errc::corrupt_manifest);  // still refused, no crash

  Manifest few_classes = m;
  few_classes.classes = {"cat"};
  write_manifest_atomic(dir, few_classes);
  CHECK(error_of([&] { (void)Dataset::open(dir).record(0); }) == errc::corrupt_manifest);

  // A payload byte changed on disk: caught by the record checksum, and by the
  // whole-file hash when verify_shard_hashes is set.
  write_manifest_atomic(dir, m);
  Bytes shard = read_file(dir / "shard-0.l3s");
  shard[32] ^= 1;
  write_file(dir / "shard-0.l3s", shard);
  CHECK(error_of([&] { (void)Dataset::open(dir).record(0); }) == errc::checksum_mismatch);
  CHECK(error_of([&] { (void)Dataset::open(dir).record(1); }) == errc::ok);
  DatasetOptions verify;
  verify.verify_shard_hashes = true;
  CHECK(error_of([&] { (void)Dataset::open(dir, verify).record(1); }) == errc::checksum_mismatch);
  CHECK(error_of([&] { (void)Dataset::open(dir, verify).record(3); }) == errc::ok);

  std::filesystem::remove(dir / "shard-1.l3s");
  CHECK(error_of([&] { (void)Dataset::open(dir).record(3); }) == errc::io_error);
}
