// spec/vectors/shard/: every vector gives the error its .txt names, the
// committed files are what the generator produces, and ShardWriter writes the
// same bytes as the generator (which follows spec/format.md independently).
#include <map>
#include <set>

#include "l3/format/shard.hpp"
#include "shard_vectors.hpp"
#include "test_format_util.hpp"

using namespace l3;
using namespace l3::test;

namespace {

const std::filesystem::path kVectorDir = std::filesystem::path(L3_SOURCE_DIR) / "spec/vectors/shard";

const std::map<std::string, errc>& errc_by_name() {
  static const std::map<std::string, errc> m = {
      {"ok", errc::ok},
      {"limit_exceeded", errc::limit_exceeded},
      {"bad_magic", errc::bad_magic},
      {"unsupported_version", errc::unsupported_version},
      {"reserved_bits_set", errc::reserved_bits_set},
      {"truncated", errc::truncated},
      {"checksum_mismatch", errc::checksum_mismatch},
      {"corrupt_index", errc::corrupt_index},
  };
  return m;
}

std::string expected_of(const std::filesystem::path& txt) {
  std::ifstream in(txt);
  std::string first;
  std::getline(in, first);
  return first;
}

}  // namespace

TEST_CASE("every shard vector is rejected with the error its .txt names") {
  std::size_t count = 0, rejects = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kVectorDir)) {
    if (entry.path().extension() != ".l3s") continue;
    CAPTURE(entry.path().filename().string());
    auto txt = entry.path();
    txt.replace_extension(".txt");
    REQUIRE(std::filesystem::exists(txt));
    std::string name = expected_of(txt);
    REQUIRE(errc_by_name().count(name) == 1);
    errc got = error_of([&] {
      ShardReader r(entry.path());
      r.verify_all();
    });
    CHECK(errc_name(got) == std::string(errc_name(errc_by_name().at(name))));
    ++count;
    rejects += name != "ok";
  }
  CHECK(count >= 30);
  CHECK(rejects >= 27);
}

TEST_CASE("the committed vectors are what the generator produces") {
  std::set<std::string> generated;
  for (const auto& v : vectors::make_shard_vectors()) {
    CAPTURE(v.name);
    generated.insert(v.name);
    auto path = kVectorDir / (v.name + ".l3s");
    REQUIRE(std::filesystem::exists(path));
    CHECK(expected_of(kVectorDir / (v.name + ".txt")) == v.expected);
    // zstd output may differ between zstd releases; those files are checked by content above.
    if (v.name.find("zstd") == std::string::npos) CHECK(read_file(path) == v.bytes);
  }
  for (const auto& entry : std::filesystem::directory_iterator(kVectorDir))
    CHECK(generated.count(entry.path().stem().string()) == 1);
}

TEST_CASE("ShardWriter writes the generator's valid vectors byte for byte") {
  auto dir = fresh_dir("writer_vs_generator");
  ShardWriter w(dir / "basic.l3s");
  for (const auto& r : vectors::basic_records()) w.append(r.payload, r.label, r.key, r.metadata);
  w.finalize();
  CHECK(read_file(dir / "basic.l3s") == read_file(kVectorDir / "valid_basic.l3s"));
  ShardWriter(dir / "empty.l3s").finalize();
  CHECK(read_file(dir / "empty.l3s") == read_file(kVectorDir / "valid_empty.l3s"));
}
