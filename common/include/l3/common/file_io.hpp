// File I/O of the l3 libraries, one home: whole-file reads, the one durable
// atomic whole-file write (write_file_atomically), and the POSIX steps that
// streaming writers (shards, the manifest) build the same guarantee from.
//
// Durability: a file written here is fsynced before it gets its name, and the
// directory is fsynced after the rename (or link), so after a crash the path
// holds the old content or the complete new one, never a partial file, and a
// completed write is not lost (spec/format.md, manifest written last).
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace l3 {

// The whole file. errc::io_error (with the system's reason) when it cannot be read.
std::vector<std::uint8_t> read_file(const std::filesystem::path& path);

// Whether write_file_atomically may replace a file already at its path.
enum class Overwrite : bool { no, yes };

// Writes `bytes` to a new temporary file in the same directory, fsyncs it, then
// renames it over `path` (Overwrite::yes), or links it there (Overwrite::no:
// fails with "<path> already exists" when a file is there, also one that
// appeared meanwhile), and fsyncs the directory. On any failure the temporary
// file is removed and `path` is untouched; throws errc::io_error.
void write_file_atomically(const std::filesystem::path& path, std::span<const std::uint8_t> bytes,
                           Overwrite overwrite = Overwrite::yes);

namespace file_io {

// open(2) for writing, create + truncate (mode 0644); throws io_error.
int create_for_write(const std::filesystem::path& path);
void write_all(int fd, std::span<const std::uint8_t> bytes, const std::filesystem::path& path);
void fsync_fd(int fd, const std::filesystem::path& path);
void close_fd(int fd, const std::filesystem::path& path);
// fsync of the directory that holds `path`, so a rename or link into it is durable.
void fsync_parent_directory(const std::filesystem::path& path);
// rename(2) then fsync_parent_directory(to).
void rename_durable(const std::filesystem::path& from, const std::filesystem::path& to);

// A read-only memory mapping of a whole file (empty files map to an empty span).
class MappedFile {
public:
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  std::span<const std::uint8_t> bytes() const noexcept { return {data_, size_}; }

private:
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace file_io
}  // namespace l3
