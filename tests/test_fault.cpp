// Fault tests (spec/limits.md, "Faults"): damage to shards of real encoded
// images is always reported, and a write that fails (disk full, file size
// limit, read-only file system) leaves no shard, no temporary file and no
// manifest behind. Truncation at every byte of a shard and single flips in its
// header/index/trailer are covered by tests/test_format_damage.cpp.
#include <doctest/doctest.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "l3/codec/codec.hpp"
#include "l3/format/dataset.hpp"
#include "l3/imageio/image_io.hpp"
#include "l3/format/shard.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using l3::test::Bytes;
using l3::test::read_file;

namespace {

struct Sample {
  l3::Image image;
  Bytes encoded;
};

// 12 crops of the committed sample photos, 1-4 channels, several tile sizes.
std::vector<Sample> samples() {
  const fs::path dir = fs::path(L3_SOURCE_DIR) / "bench/sample";
  const l3::Image camera = l3::load_image(dir / "camera.png"), coffee = l3::load_image(dir / "coffee.png");
  std::vector<Sample> out;
  for (std::uint32_t i = 0; i < 12; ++i) {
    const std::uint32_t c = 1 + i % 4, w = 40 + 5 * i, h = 24 + 4 * i, x0 = 12 * i, y0 = 10 * i;  // inside 256x256
    const l3::Image& from = c <= 2 ? camera : coffee;
    l3::Image img{w, h, c, Bytes(std::size_t(w) * h * c)};
    for (std::uint32_t y = 0; y < h; ++y)
      for (std::uint32_t x = 0; x < w; ++x)
        for (std::uint32_t k = 0; k < c; ++k) {
          const bool alpha = (c == 2 || c == 4) && k == c - 1;
          const std::uint8_t v = from.pixels[(std::size_t(y0 + y) * from.width + x0 + x) * from.channels +
                                             (alpha ? 0 : k % from.channels)];
          img.pixels[(std::size_t(y) * w + x) * c + k] = alpha ? std::uint8_t(255 - v / 4) : v;
        }
    l3::EncodeOptions o;
    o.tile_width = 16u << (i % 3);
    o.tile_height = 1 + (i * 7) % 32;
    out.push_back({img, l3::encode(img.view(), o)});
  }
  return out;
}

fs::path scratch(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("l3_test_fault_" + std::to_string(getpid())) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

}  // namespace

TEST_CASE("fault: 1000 random byte flips in a shard of real images never give silent wrong pixels") {
  const std::vector<Sample> s = samples();
  const fs::path dir = scratch("flips");
  {
    l3::ShardWriter w(dir / "a.l3s");
    for (std::size_t i = 0; i < s.size(); ++i) w.append(s[i].encoded, std::int64_t(i), "img" + std::to_string(i));
    w.finalize();
  }
  const Bytes good = read_file(dir / "a.l3s");
  std::mt19937_64 rng(20240607);
  int open_rejected = 0, checksum_caught = 0, payload_flips = 0, unverified_wrong = 0, unverified_caught = 0;
  for (int trial = 0; trial < 1000; ++trial) {
    Bytes bad = good;
    const std::size_t at = rng() % bad.size();
    bad[at] ^= std::uint8_t(1 + rng() % 255);
    CAPTURE(trial);
    CAPTURE(at);
    std::optional<l3::ShardReader> r;
    try {
      r.emplace(std::move(bad));
    } catch (const l3::Error&) {
      ++open_rejected;  // header, index or trailer damage
      continue;
    }
    REQUIRE(r->size() == s.size());
    bool damaged_seen = false;
    for (std::uint64_t i = 0; i < r->size(); ++i) {
      // Verified read: either the checksum or the decoder reports it, or the pixels are right.
      try {
        const l3::RecordView rec = r->record(i, l3::Verify::yes);
        try {
          const Bytes px = l3::decode(rec.payload);
          CHECK(px == s[i].image.pixels);
        } catch (const l3::Error&) {
          FAIL("a payload that passed its checksum did not decode");
        }
      } catch (const l3::Error& e) {
        CHECK(e.code() == l3::errc::checksum_mismatch);
        ++checksum_caught;
        damaged_seen = true;
      }
      // Unverified read (Verify::no): what the decoder alone catches, for the record.
      const l3::RecordView raw = r->record(i, l3::Verify::no);
      if (!std::equal(raw.payload.begin(), raw.payload.end(), s[i].encoded.begin(), s[i].encoded.end())) {
        try {
          if (l3::decode(raw.payload) != s[i].image.pixels) ++unverified_wrong;
        } catch (const l3::Error&) {
          ++unverified_caught;
        }
      }
    }
    CHECK(damaged_seen);  // a flip that open accepted is in a payload, and its checksum sees it
    if (damaged_seen) ++payload_flips;
  }
  MESSAGE("flips: " << open_rejected << " rejected on open, " << payload_flips << " in payloads caught by the record checksum ("
                    << checksum_caught << " records); without the checksum the decoder caught " << unverified_caught
                    << " and " << unverified_wrong << " decoded to wrong pixels");
  CHECK(open_rejected + payload_flips == 1000);
  CHECK(payload_flips > 500);  // records are most of the file
  fs::remove_all(dir.parent_path());
}

namespace {

// Runs f in a child process with RLIMIT_FSIZE = limit and SIGXFSZ ignored, so
// that a write past `limit` bytes fails with EFBIG as on a full disk. Returns
// the child's exit status: 0 when f threw an l3::Error, 1 when it did not,
// 2 for any other exception.
template <class F> int with_file_size_limit(rlim_t limit, F&& f) {
  const pid_t pid = fork();
  if (pid == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    rlimit rl{limit, limit};
    setrlimit(RLIMIT_FSIZE, &rl);
    int code = 1;
    try {
      f();
    } catch (const l3::Error&) {
      code = 0;
    } catch (...) {
      code = 2;
    }
    _exit(code);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Appends records until the writer fails, then finalizes.
void write_shard(const fs::path& path, const std::vector<Sample>& s, int copies) {
  l3::ShardWriter w(path);
  for (int k = 0; k < copies; ++k)
    for (const Sample& x : s) w.append(x.encoded, 1, "key");
  w.finalize();
}

bool empty_dir(const fs::path& d) { return fs::is_empty(d); }

}  // namespace

TEST_CASE("fault: a file size limit (EFBIG, like ENOSPC) in the writer leaves no shard and no temporary file") {
  const std::vector<Sample> s = samples();
  std::uint64_t one_copy = 0;
  for (const Sample& x : s) one_copy += x.encoded.size();
  const fs::path dir = scratch("fsize");
  // The full shard is 32 + 3 * one_copy + index + trailer bytes; limits before
  // the header, inside the records, inside the index and inside the trailer.
  const std::uint64_t full = 32 + 3 * one_copy + 36 * (48 + 3) + 64;
  for (rlim_t limit : {rlim_t{0}, rlim_t{16}, rlim_t{100}, rlim_t(one_copy), rlim_t(full - 64 - 100),
                       rlim_t(full - 30), rlim_t(full - 1)}) {
    CAPTURE(limit);
    CHECK(with_file_size_limit(limit, [&] { write_shard(dir / "a.l3s", s, 3); }) == 0);
    CHECK(empty_dir(dir));
  }
  // The limit at the exact size: the write succeeds.
  CHECK(with_file_size_limit(rlim_t(full), [&] { write_shard(dir / "a.l3s", s, 3); }) == 1);
  CHECK(fs::file_size(dir / "a.l3s") == full);
  fs::remove(dir / "a.l3s");

  // The manifest: no manifest.json and no temporary file after a failed write.
  l3::Manifest m;
  for (int i = 0; i < 200; ++i) m.shards.push_back({"shard-" + std::to_string(i) + ".l3s", 1, 96, 0});
  CHECK(with_file_size_limit(100, [&] { l3::write_manifest_atomic(dir, m); }) == 0);
  CHECK(empty_dir(dir));
  // save_png / save_pnm (write_file_atomically).
  CHECK(with_file_size_limit(100, [&] { l3::save_png(dir / "x.png", s[2].image.view()); }) == 0);
  CHECK(with_file_size_limit(100, [&] { l3::save_pnm(dir / "x.pnm", s[3].image.view()); }) == 0);
  CHECK(empty_dir(dir));
  fs::remove_all(dir.parent_path());
}

namespace {

// A tmpfs of `size` bytes at dir, when this process may mount (root in a
// sandbox that allows it); unmounted on destruction.
struct Tmpfs {
  fs::path dir;
  bool ok = false;
  Tmpfs(fs::path d, const std::string& size) : dir(std::move(d)) {
    ok = mount("tmpfs", dir.c_str(), "tmpfs", 0, ("size=" + size).c_str()) == 0;
  }
  bool read_only() { return mount(nullptr, dir.c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr) == 0; }
  ~Tmpfs() {
    if (ok) umount(dir.c_str());
  }
};

}  // namespace

TEST_CASE("fault: a full disk (64 KiB tmpfs) and a read-only file system leave no shard, temporary file or manifest") {
  const std::vector<Sample> s = samples();
  const fs::path dir = scratch("tmpfs");
  Tmpfs t(dir, "64k");
  if (!t.ok) {
    MESSAGE("skipped: cannot mount a tmpfs here (needs root and a sandbox that allows mount)");
    return;
  }
  // ENOSPC: the shard does not fit (about 3 x 12 images, well over 64 KiB).
  try {
    write_shard(dir / "a.l3s", s, 8);
    FAIL("a shard larger than the file system was written");
  } catch (const l3::Error& e) {
    CHECK(e.code() == l3::errc::io_error);
  }
  CHECK(empty_dir(dir));
  // A shard that fits, then a manifest that does not: the shard stays, no manifest appears.
  write_shard(dir / "a.l3s", s, 1);
  const std::uint64_t used = fs::file_size(dir / "a.l3s");
  {
    const Bytes filler(std::size_t(64 * 1024 - used - 2048), 0);  // leave about 2 KiB
    std::ofstream(dir / "filler", std::ios::binary).write(reinterpret_cast<const char*>(filler.data()), std::streamsize(filler.size()));
  }
  l3::Manifest m;
  for (int i = 0; i < 400; ++i) m.shards.push_back({"shard-" + std::to_string(i) + ".l3s", 1, 96, 0});
  CHECK_THROWS_AS(l3::write_manifest_atomic(dir, m), l3::Error);
  CHECK(!fs::exists(dir / "manifest.json"));
  CHECK(!fs::exists(dir / "manifest.json.tmp"));
  fs::remove(dir / "filler");
  // EROFS: root bypasses chmod, not a read-only mount.
  REQUIRE(t.read_only());
  try {
    write_shard(dir / "b.l3s", s, 1);
    FAIL("a shard was written to a read-only file system");
  } catch (const l3::Error& e) {
    CHECK(e.code() == l3::errc::io_error);
  }
  CHECK_THROWS_AS(l3::write_manifest_atomic(dir, m), l3::Error);
  CHECK_THROWS_AS(l3::save_png(dir / "x.png", s[0].image.view()), l3::Error);
  CHECK(!fs::exists(dir / "b.l3s"));
  CHECK(!fs::exists(dir / "b.l3s.tmp"));
  CHECK(!fs::exists(dir / "manifest.json"));
  CHECK(!fs::exists(dir / "x.png"));
}
