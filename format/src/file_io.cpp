#include "file_io.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "l3/error.hpp"

namespace l3::file_io {
namespace {

[[noreturn]] void throw_io(const std::string& what, const std::filesystem::path& path) {
  throw_error(errc::io_error, what + " '" + path.string() + "': " + std::strerror(errno));
}

}  // namespace

int create_for_write(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw_io("cannot create", path);
  return fd;
}

void write_all(int fd, std::span<const std::uint8_t> bytes, const std::filesystem::path& path) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw_io("cannot write", path);
    bytes = bytes.subspan(static_cast<std::size_t>(n));
  }
}

void fsync_fd(int fd, const std::filesystem::path& path) {
  if (::fsync(fd) != 0) throw_io("cannot fsync", path);
}

void close_fd(int fd, const std::filesystem::path& path) {
  if (::close(fd) != 0) throw_io("cannot close", path);
}

void rename_durable(const std::filesystem::path& from, const std::filesystem::path& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) throw_io("cannot rename to", to);
  auto dir = to.parent_path();
  if (dir.empty()) dir = ".";
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) throw_io("cannot open directory", dir);
  int rc = ::fsync(dfd);
  ::close(dfd);
  if (rc != 0) throw_io("cannot fsync directory", dir);
}

MappedFile::MappedFile(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_io("cannot open", path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw_io("cannot stat", path);
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      throw_io("cannot mmap", path);
    }
    data_ = static_cast<const std::uint8_t*>(p);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<std::uint8_t*>(data_), size_);
}

}  // namespace l3::file_io
