// File I/O (l3/common/file_io.hpp).
#include "l3/common/file_io.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "l3/common/error.hpp"

namespace l3 {
namespace {

[[noreturn]] void throw_io(const std::string& what, int err) {
  throw_error(errc::io_error, what + ": " + std::strerror(err));
}

// Closes the descriptor on every path out of a function.
class FileDescriptor {
public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() { if (fd_ >= 0) ::close(fd_); }
  int get() const { return fd_; }
  // close() reports deferred write errors (NFS, quotas), so writers check it.
  int close_checked() { int r = ::close(fd_); fd_ = -1; return r; }
private:
  int fd_;
};

void write_fully(int fd, std::span<const std::uint8_t> bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_io("cannot write", errno);
    bytes = bytes.subspan(static_cast<std::size_t>(n));
  }
}

// O_EXCL on a unique name instead of mkstemp: mkstemp creates mode 0600, while
// open(0666) lets the umask give the final file the usual permissions.
// The temporary is "<target>.tmp<pid>-<n>" (convert's resume recognises its own
// by the target's prefix), or ".l3tmp<pid>-<n>" in the same folder when that name
// would pass NAME_MAX: a legal 255-byte target must not fail for its temporary.
int create_unique_temporary(const std::filesystem::path& target, std::filesystem::path& temporary) {
  static std::atomic<unsigned> counter{0};
  constexpr std::size_t kNameMax = 255;
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::string suffix = ".tmp" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    if (target.filename().native().size() + suffix.size() <= kNameMax) {
      temporary = target;
      temporary += suffix;
    } else {
      temporary = target.parent_path() / (".l3" + suffix);
    }
    int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  errno = EEXIST;
  return -1;
}

}  // namespace

std::vector<std::uint8_t> read_file(const std::filesystem::path& path) {
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) throw_io("cannot open", errno);
  std::vector<std::uint8_t> bytes;
  struct stat st{};
  if (::fstat(fd.get(), &st) == 0 && S_ISREG(st.st_mode)) bytes.reserve(static_cast<std::size_t>(st.st_size));
  std::uint8_t chunk[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd.get(), chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_io("cannot read", errno);
    if (n == 0) return bytes;
    bytes.insert(bytes.end(), chunk, chunk + n);
  }
}

void write_file_atomically(const std::filesystem::path& path, std::span<const std::uint8_t> bytes,
                           Overwrite overwrite) {
  std::filesystem::path temporary;
  FileDescriptor fd(create_unique_temporary(path, temporary));
  if (fd.get() < 0) throw_io("cannot create a file next to " + path.string(), errno);
  try {
    write_fully(fd.get(), bytes);
    if (::fsync(fd.get()) != 0) throw_io("cannot flush", errno);
    if (fd.close_checked() != 0) throw_io("cannot write", errno);
    if (overwrite == Overwrite::yes) {
      if (::rename(temporary.c_str(), path.c_str()) != 0) throw_io("cannot rename onto it", errno);
      file_io::fsync_parent_directory(path);
      return;
    }
    if (::link(temporary.c_str(), path.c_str()) != 0) {
      if (errno == EEXIST) throw_error(errc::io_error, path.string() + " already exists");
      throw_io("cannot create " + path.string(), errno);
    }
    ::unlink(temporary.c_str());  // the data now lives at `path`
    file_io::fsync_parent_directory(path);
  } catch (...) {
    ::unlink(temporary.c_str());
    throw;
  }
}

namespace file_io {
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
  fsync_parent_directory(to);
}

void fsync_parent_directory(const std::filesystem::path& path) {
  auto dir = path.parent_path();
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

}  // namespace file_io
}  // namespace l3
