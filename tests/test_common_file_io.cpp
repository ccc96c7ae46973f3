// The one durable atomic write (l3/common/file_io.hpp): the file is fsynced before
// it gets its name and its directory after, for both Overwrite modes and for
// rename_durable. Replaces fsync(2) to observe it (the executable's
// definition wins over libc's), so it is its own executable.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "l3/common/file_io.hpp"
#include "test_util.hpp"

namespace {
std::vector<bool> g_synced_dirs;  // per fsync call: was the descriptor a directory
}

extern "C" int fsync(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return -1;
  g_synced_dirs.push_back(S_ISDIR(st.st_mode));
  return ::fdatasync(fd);
}

using l3::test::bytes_of;
using l3::test::fresh_dir;

TEST_CASE("write_file_atomically fsyncs the file, then its directory") {
  const auto dir = fresh_dir("atomic");
  for (const l3::Overwrite mode : {l3::Overwrite::yes, l3::Overwrite::no}) {
    CAPTURE(mode == l3::Overwrite::yes);
    g_synced_dirs.clear();
    const auto path = dir / (mode == l3::Overwrite::yes ? "a.bin" : "b.bin");
    l3::write_file_atomically(path, bytes_of("payload"), mode);
    CHECK(l3::read_file(path) == bytes_of("payload"));
    REQUIRE(g_synced_dirs.size() == 2);
    CHECK_FALSE(g_synced_dirs[0]);  // the temporary file
    CHECK(g_synced_dirs[1]);        // the directory, after the rename / link
  }
}

TEST_CASE("rename_durable fsyncs the target's directory") {
  const auto dir = fresh_dir("rename");
  l3::write_file_atomically(dir / "from", bytes_of("x"));
  g_synced_dirs.clear();
  l3::file_io::rename_durable(dir / "from", dir / "to");
  CHECK(std::filesystem::exists(dir / "to"));
  CHECK(g_synced_dirs == std::vector<bool>{true});
}
