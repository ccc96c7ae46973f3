// Fault tests for `l3pack convert` (l3::convert_dataset): a full disk leaves
// no half-written shard and no manifest, and a second conversion into the
// same output refuses while the first is running.
#include <doctest/doctest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "l3/convert/convert.hpp"
#include "l3/format/dataset.hpp"
#include "l3/imageio/image_io.hpp"
#include "l3/format/shard.hpp"

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

namespace {

fs::path scratch(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("l3_test_fault_convert_" + std::to_string(getpid())) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// 24 noisy 64x48 RGB PNGs (about 9 KB each encoded), in two class folders.
fs::path make_source() {
  const fs::path src = scratch("src");
  std::uint32_t seed = 7;
  for (int i = 0; i < 24; ++i) {
    Bytes px(64 * 48 * 3);
    for (auto& v : px) v = std::uint8_t((seed = seed * 1103515245u + 12345u) >> 16);
    const fs::path dir = src / (i % 2 ? "cat" : "dog");
    fs::create_directories(dir);
    l3::save_png(dir / ("img" + std::to_string(i) + ".png"), l3::ImageView{px.data(), 64, 48, 3, 0});
  }
  return src;
}

// Every shard left in `out` is complete (opens and verifies); no temporary files.
void check_no_partial_shards(const fs::path& out) {
  for (const auto& e : fs::directory_iterator(out)) {
    const std::string name = e.path().filename().string();
    CAPTURE(name);
    CHECK(name.find(".tmp") == std::string::npos);
    if (e.path().extension() == ".l3s") {
      CHECK_NOTHROW(l3::ShardReader(e.path()).verify_all());
    }
  }
}

}  // namespace

TEST_CASE("fault: convert onto a full disk leaves no manifest and no half-written shard") {
  const fs::path src = make_source();
  const fs::path out = scratch("out");
  if (mount("tmpfs", out.c_str(), "tmpfs", 0, "size=64k") != 0) {
    MESSAGE("skipped: cannot mount a tmpfs here (needs root and a sandbox that allows mount)");
    return;
  }
  l3::ConvertOptions opt;
  opt.shard_size = 20 * 1024;  // several shards: some complete before the disk fills
  opt.threads = 1;
  opt.encode.effort = 0;
  bool threw = false;
  try {
    l3::convert_dataset(src, out, opt);
  } catch (const l3::Error& e) {
    threw = true;
    MESSAGE("convert on a 64 KiB tmpfs: " << std::string(e.what()));
    CHECK(e.code() == l3::errc::io_error);
  }
  CHECK(threw);
  CHECK(!fs::exists(out / l3::kManifestName));
  check_no_partial_shards(out);
  int shards = 0;
  for (const auto& e : fs::directory_iterator(out)) shards += e.path().extension() == ".l3s";
  MESSAGE(shards << " complete shard(s) left; no manifest names them");
  umount(out.c_str());
  fs::remove_all(src.parent_path());
}

TEST_CASE("fault: a second convert into the same output refuses while the first runs") {
  const fs::path src = make_source();
  const fs::path out = scratch("out2");
  fs::remove(out);  // convert creates it
  l3::ConvertOptions opt;
  opt.threads = 1;
  opt.encode.effort = 0;
  bool tried = false, refused = false;
  l3::ConvertObserver obs;
  obs.progress = [&](const l3::ConvertProgress&) {
    if (tried) return;
    tried = true;
    try {
      l3::ConvertOptions again = opt;
      again.resume = true;  // even a resume must not write alongside a running conversion
      l3::convert_dataset(src, out, again);
    } catch (const l3::Error&) {
      refused = true;
    }
  };
  const l3::ConvertReport r = l3::convert_dataset(src, out, opt, obs);
  CHECK(tried);
  CHECK(refused);
  CHECK(r.images == 24);
  const l3::Dataset ds = l3::Dataset::open(out);
  CHECK(ds.size() == 24);
  check_no_partial_shards(out);
  fs::remove_all(src.parent_path());
}
