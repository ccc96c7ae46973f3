// Small POSIX helpers shared by the shard writer, reader and manifest code.
// Internal to l3_format.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>

namespace l3::file_io {

// open(2) for writing, create + truncate; throws io_error.
int create_for_write(const std::filesystem::path& path);
void write_all(int fd, std::span<const std::uint8_t> bytes, const std::filesystem::path& path);
void fsync_fd(int fd, const std::filesystem::path& path);
void close_fd(int fd, const std::filesystem::path& path);
// rename(2) then fsync of the containing directory, so the rename is durable.
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

}  // namespace l3::file_io
