// l3pack convert: determinism (threads, shuffle), --resume after SIGKILL,
// --part + merge, and the one-writer lock.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <thread>

#include "l3/convert/convert.hpp"
#include "test_dataset_cli_helpers.hpp"

using l3::test::l3pack;
using l3::test::quoted;
using l3::test::TempDir;
namespace fs = std::filesystem;

namespace {

// n noise images in 3 classes.
void make_noise_tree(const fs::path& src, int n, std::uint32_t size) {
  for (int i = 0; i < n; ++i) {
    std::string name = "class" + std::to_string(i % 3);
    name += "/img";
    name += std::to_string(1000 + i);
    name += ".png";
    l3::test::save_noise_png(src / name, size, size, static_cast<std::uint32_t>(i));
  }
}

std::string convert_args(const fs::path& src, const fs::path& out, const std::string& extra) {
  return "convert " + quoted(src) + " " + quoted(out) + " " + extra;
}

std::vector<std::vector<std::uint8_t>> shard_bytes(const fs::path& dir) {
  std::vector<std::vector<std::uint8_t>> all;
  for (const auto& name : l3::test::shard_files(dir)) all.push_back(l3::test::read_file(dir / name));
  return all;
}

std::vector<std::string> keys(const std::vector<l3::test::RecordDigest>& records) {
  std::vector<std::string> out;
  for (const auto& r : records) out.push_back(r.key);
  return out;
}

bool wait_for(const fs::path& file, std::chrono::seconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!fs::exists(file)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace

TEST_CASE("the output is byte-identical for --threads 1 and 2") {
  TempDir dir;
  make_noise_tree(dir / "src", 24, 40);
  REQUIRE(l3pack(dir, convert_args(dir / "src", dir / "t1", "--threads 1 --shard-size 10k")).exit_code == 0);
  REQUIRE(l3pack(dir, convert_args(dir / "src", dir / "t2", "--threads 2 --shard-size 10k")).exit_code == 0);
  CHECK(l3::read_manifest(dir / "t1").shards.size() > 2);
  CHECK(shard_bytes(dir / "t1") == shard_bytes(dir / "t2"));
  CHECK(l3::test::text_of(dir / "t1/manifest.json") == l3::test::text_of(dir / "t2/manifest.json"));
}

TEST_CASE("seeded_permutation is a fixed, documented permutation") {
  std::vector<std::size_t> p = l3::seeded_permutation(1000, 42);
  std::vector<std::size_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < sorted.size(); ++i) REQUIRE(sorted[i] == i);
  CHECK(p == l3::seeded_permutation(1000, 42));
  CHECK(p != l3::seeded_permutation(1000, 43));
  // The algorithm of l3/convert/convert.hpp, replayed independently with the standard engine
  // (mt19937_64 is specified exactly by the C++ standard, so this holds everywhere).
  std::vector<std::size_t> expected(10);
  for (std::size_t i = 0; i < 10; ++i) expected[i] = i;
  std::mt19937_64 rng(7);
  for (std::uint64_t i = 10; i > 1; --i) {
    std::uint64_t x = rng();
    while (x < (0 - i) % i) x = rng();
    std::swap(expected[i - 1], expected[x % i]);
  }
  CHECK(l3::seeded_permutation(10, 7) == expected);
  CHECK(l3::seeded_permutation(0, 1).empty());
  CHECK(l3::seeded_permutation(1, 1) == std::vector<std::size_t>{0});
}

TEST_CASE("--shuffle-seed stores a seeded permutation, the same for the same seed") {
  TempDir dir;
  make_noise_tree(dir / "src", 20, 8);
  REQUIRE(l3pack(dir, convert_args(dir / "src", dir / "plain", "")).exit_code == 0);
  REQUIRE(l3pack(dir, convert_args(dir / "src", dir / "s7a", "--shuffle-seed 7")).exit_code == 0);
  REQUIRE(l3pack(dir, convert_args(dir / "src", dir / "s7b", "--shuffle-seed 7 --threads 1")).exit_code == 0);
  REQUIRE(l3pack(dir, convert_args(dir / "src", dir / "s8", "--shuffle-seed 8")).exit_code == 0);
  auto plain = l3::test::record_digests(dir / "plain"), a = l3::test::record_digests(dir / "s7a");
  CHECK(a == l3::test::record_digests(dir / "s7b"));
  CHECK(keys(a) != keys(plain));
  CHECK(keys(l3::test::record_digests(dir / "s8")) != keys(a));
  // The stored order is exactly seeded_permutation of the sorted inputs.
  std::vector<std::size_t> order = l3::seeded_permutation(plain.size(), 7);
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == plain[order[i]]);
}

TEST_CASE("a conversion killed with SIGKILL and resumed holds exactly the records of an uninterrupted run") {
  TempDir dir;
  make_noise_tree(dir / "src", 240, 48);
  for (int i = 0; i < 12; ++i)  // skipped inputs among the records: their reasons must survive the kill
    l3::test::write_file(dir / "src" / ("class" + std::to_string(i % 3)) / ("bad" + std::to_string(i) + ".png"),
                          {0x89, 'P', 'N', 'G', static_cast<std::uint8_t>(i)});
  const std::string options = "--shard-size 1 --threads 2 --shuffle-seed 3";  // one record per shard
  REQUIRE(l3pack(dir, convert_args(dir / "src", dir / "whole", options)).exit_code == 0);

  pid_t pid = l3::test::spawn_l3pack({"convert", (dir / "src").string(), (dir / "killed").string(), "--shard-size",
                                      "1", "--threads", "2", "--shuffle-seed", "3"});
  REQUIRE(pid > 0);
  const bool started = wait_for(dir / "killed/shard-00002.l3s", std::chrono::seconds(60));
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(started);
  REQUIRE(WIFSIGNALED(status));
  REQUIRE_FALSE(fs::exists(dir / "killed/manifest.json"));  // killed before the end
  CHECK(fs::exists(dir / "killed" / l3::kLockName));         // stale lock of the dead process

  auto run = l3pack(dir, convert_args(dir / "src", dir / "killed", options));
  CHECK(run.exit_code == 1);  // not empty: needs --resume
  CHECK(run.err.find("--resume") != std::string::npos);
  run = l3pack(dir, convert_args(dir / "src", dir / "killed", options + " --resume"));
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  CHECK(run.out.find(" kept from an earlier run") != std::string::npos);
  CHECK(run.out.find("(0 skipped, 0 kept") == std::string::npos);

  CHECK(l3::test::record_digests(dir / "killed") == l3::test::record_digests(dir / "whole"));
  CHECK(shard_bytes(dir / "killed") == shard_bytes(dir / "whole"));
  CHECK(l3::test::text_of(dir / "killed" / l3::kSkippedName) == l3::test::text_of(dir / "whole" / l3::kSkippedName));
  CHECK(l3::test::text_of(dir / "whole" / l3::kSkippedName).find("\"path\":\"class0/bad0.png\",\"reason\":\"bad magic\"") !=
        std::string::npos);
  CHECK_FALSE(fs::exists(dir / "killed" / (std::string(l3::kSkippedName) + ".partial")));
  CHECK_FALSE(fs::exists(dir / "killed" / l3::kLockName));
  CHECK_FALSE(fs::exists(dir / "killed" / l3::kPlanName));
  for (const auto& entry : fs::directory_iterator(dir / "killed"))
    CHECK(entry.path().extension() != ".tmp");

  run = l3pack(dir, convert_args(dir / "src", dir / "killed", options + " --resume"));
  CHECK(run.exit_code == 1);  // committed: nothing to do, nothing overwritten
  CHECK(run.err.find("already holds a committed dataset") != std::string::npos);
  run = l3pack(dir, convert_args(dir / "src", dir / "whole", "--shard-size 2 --resume"));
  CHECK(run.exit_code == 1);
}

TEST_CASE("--resume with other options than the interrupted run refuses") {
  TempDir dir;
  make_noise_tree(dir / "src", 6, 8);
  fs::create_directories(dir / "ds");
  // An interrupted run leaves its plan; emulate one by stopping a strict run on a bad input.
  l3::test::write_file(dir / "src/class2/zzz.png", {1, 2, 3});
  REQUIRE(l3pack(dir, convert_args(dir / "src", dir / "ds", "--strict --shard-size 1")).exit_code == 1);
  REQUIRE(fs::exists(dir / "ds" / l3::kPlanName));
  auto run = l3pack(dir, convert_args(dir / "src", dir / "ds", "--resume --shard-size 2"));
  CHECK(run.exit_code == 1);
  CHECK(run.err.find("different sources or options") != std::string::npos);
  run = l3pack(dir, convert_args(dir / "src", dir / "ds", "--resume --shard-size 1"));
  CHECK_MESSAGE(run.exit_code == 0, run.err);
  CHECK(l3::read_manifest(dir / "ds").total_records() == 6);
}

TEST_CASE("--part 0/2 and 1/2 merged hold the records of one run, in the same order") {
  TempDir dir;
  make_noise_tree(dir / "src", 15, 12);
  l3::test::write_file(dir / "src/class0/notes.txt", {'x'});                // a scan skip: part 0's list
  l3::test::write_file(dir / "src/class1/bad.png", {0x89, 'P', 'N', 'G'});  // a decode skip: its part's list
  l3::test::write_file(dir / "src/class2/bad.png", {0x89, 'P', 'N', 'G'});
  REQUIRE(l3pack(dir, convert_args(dir / "src", dir / "one", "--shuffle-seed 5 --shard-size 1k")).exit_code == 0);
  REQUIRE(l3pack(dir, convert_args(dir / "src", dir / "p0", "--shuffle-seed 5 --shard-size 1k --part 0/2")).exit_code == 0);
  REQUIRE(l3pack(dir, convert_args(dir / "src", dir / "p1", "--shuffle-seed 5 --shard-size 1k --part 1/2")).exit_code == 0);
  CHECK(l3::read_manifest(dir / "p0").total_records() + l3::read_manifest(dir / "p1").total_records() == 15);
  CHECK(l3::test::shard_files(dir / "p1").front() == "part-1-of-2-00000.l3s");

  auto run = l3pack(dir, "merge " + quoted(dir / "merged") + " " + quoted(dir / "p1") + " " + quoted(dir / "p0"));
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  CHECK(run.out.find("15 records") != std::string::npos);
  CHECK(l3::test::record_digests(dir / "merged") == l3::test::record_digests(dir / "one"));
  l3::Manifest merged = l3::read_manifest(dir / "merged");
  CHECK(merged.classes == l3::read_manifest(dir / "one").classes);
  CHECK(merged.image_stats == l3::read_manifest(dir / "one").image_stats);
  CHECK(l3pack(dir, "verify " + quoted(dir / "merged") + " --source " + quoted(dir / "src")).exit_code == 0);
  CHECK(l3::test::text_of(dir / "merged" / l3::kSkippedName) == l3::test::text_of(dir / "one" / l3::kSkippedName));
  CHECK(merged.extra["l3pack"]["skipped"]["count"] == 3);

  run = l3pack(dir, "merge " + quoted(dir / "half") + " " + quoted(dir / "p0"));
  CHECK(run.exit_code == 1);
  CHECK(run.err.find("2 parts; 1 were given") != std::string::npos);
  REQUIRE(l3pack(dir, convert_args(dir / "src", dir / "q1", "--shuffle-seed 6 --part 1/2")).exit_code == 0);
  run = l3pack(dir, "merge " + quoted(dir / "mixed") + " " + quoted(dir / "p0") + " " + quoted(dir / "q1"));
  CHECK(run.exit_code == 1);
  CHECK(run.err.find("other sources or another --shuffle-seed") != std::string::npos);
}

ino_t inode_of(const fs::path& file) {
  struct stat st {};
  REQUIRE(::stat(file.c_str(), &st) == 0);
  return st.st_ino;
}

TEST_CASE("--part i/3 --shared-out into one folder, merge --in-place: the records of one run, no shard moved") {
  TempDir dir;
  make_noise_tree(dir / "src", 15, 12);
  l3::test::write_file(dir / "src/class0/notes.txt", {'x'});                // a scan skip: part 0's list
  l3::test::write_file(dir / "src/class2/bad.png", {0x89, 'P', 'N', 'G'});  // a decode skip: its part's list
  const std::string opts = "--shuffle-seed 5 --shard-size 1k";
  REQUIRE(l3pack(dir, convert_args(dir / "src", dir / "one", opts)).exit_code == 0);
  for (const char* part : {"2/3", "0/3"})
    REQUIRE(l3pack(dir, convert_args(dir / "src", dir / "ds", opts + " --shared-out --part " + part)).exit_code == 0);
  auto run = l3pack(dir, "merge --in-place " + quoted(dir / "ds"));  // part 1 missing
  CHECK(run.exit_code == 1);
  CHECK(run.err.find("3 parts; 2 part manifests are in the folder") != std::string::npos);
  CHECK(!fs::exists(dir / "ds" / l3::kManifestName));
  run = l3pack(dir, convert_args(dir / "src", dir / "ds", opts + " --shared-out --part 0/3"));
  CHECK(run.exit_code == 1);  // a part is not converted twice without --resume
  CHECK(run.err.find("already holds files of part part-0-of-3") != std::string::npos);
  // A retried part (--resume after it finished) keeps its shards and writes the same part manifest.
  const std::string part0 = l3::test::text_of(dir / "ds" / l3::part_manifest_name(0, 3));
  REQUIRE(l3pack(dir, convert_args(dir / "src", dir / "ds", opts + " --shared-out --part 0/3 --resume")).exit_code == 0);
  CHECK(l3::test::text_of(dir / "ds" / l3::part_manifest_name(0, 3)) == part0);
  REQUIRE(l3pack(dir, convert_args(dir / "src", dir / "ds", opts + " --shared-out --part 1/3")).exit_code == 0);
  CHECK(!fs::exists(dir / "ds" / l3::kManifestName));  // no part commits the dataset
  const ino_t inode = inode_of(dir / "ds/part-1-of-3-00000.l3s");

  run = l3pack(dir, "merge --in-place " + quoted(dir / "ds"));
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  CHECK(run.out.find("15 records") != std::string::npos);
  CHECK(inode_of(dir / "ds/part-1-of-3-00000.l3s") == inode);  // committed where it was written
  CHECK(l3::test::record_digests(dir / "ds") == l3::test::record_digests(dir / "one"));
  const l3::Manifest merged = l3::read_manifest(dir / "ds"), one = l3::read_manifest(dir / "one");
  CHECK(merged.classes == one.classes);
  CHECK(merged.image_stats == one.image_stats);
  CHECK(merged.extra["l3pack"]["source_bytes"] == one.extra["l3pack"]["source_bytes"]);
  CHECK(l3::test::text_of(dir / "ds" / l3::kSkippedName) == l3::test::text_of(dir / "one" / l3::kSkippedName));
  CHECK(l3pack(dir, "verify " + quoted(dir / "ds") + " --source " + quoted(dir / "src")).exit_code == 0);
  for (std::uint32_t i = 0; i < 3; ++i) {  // the parts' own files are gone once committed
    CHECK(!fs::exists(dir / "ds" / l3::part_manifest_name(i, 3)));
    CHECK(!fs::exists(dir / "ds" / l3::part_skipped_name(i, 3)));
    CHECK(!fs::exists(dir / "ds" / l3::part_plan_name(i, 3)));
  }
  run = l3pack(dir, "merge --in-place " + quoted(dir / "ds"));
  CHECK(run.exit_code == 1);
  CHECK(run.err.find("already holds a committed dataset") != std::string::npos);
  CHECK(l3pack(dir, "merge --in-place " + quoted(dir / "ds") + " " + quoted(dir / "one")).exit_code == 2);
  CHECK(l3pack(dir, "merge " + quoted(dir / "x")).exit_code == 2);
  CHECK(l3pack(dir, convert_args(dir / "src", dir / "y", "--shared-out")).exit_code == 2);  // needs --part i/n
  CHECK(l3pack(dir, convert_args(dir / "src", dir / "y", "--parts 2")).exit_code == 2);     // needs --engine ray
}

TEST_CASE("convert --engine ray checks the options, then runs $L3_PYTHON -m l3.ray_convert with them") {
  TempDir dir;
  make_noise_tree(dir / "src", 3, 8);
  const fs::path fake = dir / "fake-python.sh";  // stands for Python: prints what it was given
  {
    std::ofstream script(fake);
    script << "#!/bin/sh\necho \"argv: $*\"\n";
  }
  fs::permissions(fake, fs::perms::owner_all);
  ::setenv("L3_PYTHON", fake.c_str(), 1);
  auto run = l3pack(dir, convert_args(dir / "src", dir / "out",
                                      "--engine ray --parts 4 --shard-size 64k --shuffle-seed 9 --strict --threads 1"));
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  const std::string want = "argv: -m l3.ray_convert " + (dir / "src").string() + " " + (dir / "out").string() +
                           " --parts 4 --shard-size 65536 --max-pixels 178956970 --layout auto --threads 1 "
                           "--effort 1 --entropy auto --tile-width 0 --tile-height 0 --shuffle-seed 9 --strict\n";
  CHECK(run.out == want);
  // The codec options travel with the tasks (l3.convert's effort=, entropy=, tile_width=, tile_height=).
  run = l3pack(dir, convert_args(dir / "src", dir / "out",
                                 "--engine ray --parts 2 --effort 2 --entropy 25 --tile-width 64 --tile-height 16"));
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  CHECK(run.out.find(" --effort 2 --entropy 25 --tile-width 64 --tile-height 16\n") != std::string::npos);
  CHECK(l3pack(dir, convert_args(dir / "src", dir / "out", "--engine ray")).exit_code == 2);  // no --parts
  CHECK(l3pack(dir, convert_args(dir / "src", dir / "out", "--engine ray --parts 2 --part 0/2")).exit_code == 2);
  CHECK(l3pack(dir, convert_args(dir / "src", dir / "out", "--engine ray --parts 2 --tile-width 17")).exit_code == 2);
  CHECK(l3pack(dir, convert_args(dir / "src", dir / "out", "--engine ray --parts 2 --entropy fast")).exit_code == 2);
  CHECK(l3pack(dir, convert_args(dir / "src", dir / "out", "--engine ray --parts 2 --shard-size 0")).exit_code == 2);
  ::setenv("L3_PYTHON", "/nonexistent/python", 1);
  run = l3pack(dir, convert_args(dir / "src", dir / "out", "--engine ray --parts 2"));
  ::unsetenv("L3_PYTHON");
  CHECK(run.exit_code == 1);
  CHECK(run.err.find("cannot run the Ray driver") != std::string::npos);
  CHECK(!fs::exists(dir / "out"));
}

TEST_CASE("merge --in-place refuses a part manifest whose shard is missing or of another size") {
  TempDir dir;
  make_noise_tree(dir / "src", 6, 8);
  for (const char* part : {"0/2", "1/2"})
    REQUIRE(l3pack(dir, convert_args(dir / "src", dir / "ds", std::string("--shared-out --part ") + part)).exit_code == 0);
  const fs::path shard = dir / "ds/part-1-of-2-00000.l3s";
  fs::rename(shard, dir / "kept.l3s");
  auto run = l3pack(dir, "merge --in-place " + quoted(dir / "ds"));
  CHECK(run.exit_code == 1);
  CHECK(run.err.find("part-1-of-2-00000.l3s: missing") != std::string::npos);
  fs::copy_file(dir / "kept.l3s", shard);
  fs::resize_file(shard, fs::file_size(shard) - 1);
  run = l3pack(dir, "merge --in-place " + quoted(dir / "ds"));
  CHECK(run.exit_code == 1);
  CHECK(run.err.find("bytes, ") != std::string::npos);
  CHECK(!fs::exists(dir / "ds" / l3::kManifestName));
  fs::remove(shard);
  fs::rename(dir / "kept.l3s", shard);
  CHECK(l3pack(dir, "merge --in-place " + quoted(dir / "ds")).exit_code == 0);
  CHECK(l3::read_manifest(dir / "ds").total_records() == 6);
}

TEST_CASE("a second convert into the same folder refuses while the first runs") {
  TempDir dir;
  make_noise_tree(dir / "src", 120, 48);
  pid_t pid = l3::test::spawn_l3pack({"convert", (dir / "src").string(), (dir / "ds").string(), "--shard-size", "1"});
  REQUIRE(pid > 0);
  const bool locked = wait_for(dir / "ds" / l3::kLockName, std::chrono::seconds(60));
  auto run = l3pack(dir, convert_args(dir / "src", dir / "ds", "--resume"));
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(locked);
  CHECK(run.exit_code == 1);
  CHECK(run.err.find("another l3pack convert (pid " + std::to_string(pid) + ")") != std::string::npos);
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(l3::read_manifest(dir / "ds").total_records() == 120);  // the first run was not disturbed
  CHECK_FALSE(fs::exists(dir / "ds" / l3::kLockName));

  // A lock held by a live process (this test) also refuses; one left by a dead one does not.
  fs::create_directories(dir / "locked");
  std::ofstream(dir / "locked" / l3::kLockName) << ::getpid() << "\n";
  run = l3pack(dir, convert_args(dir / "src", dir / "locked", ""));
  CHECK(run.exit_code == 1);
  CHECK(run.err.find("another l3pack convert") != std::string::npos);
}
