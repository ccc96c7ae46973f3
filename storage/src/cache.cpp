// ShardCache: remote shards on local disk, keyed by their XXH3 (spec/format.md §8.5.3).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "l3/common/error.hpp"
#include "l3/common/file_io.hpp"
#include "l3/storage/storage.hpp"
#include "l3/common/text.hpp"

namespace l3::storage {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view kSuffix = ".l3s";
constexpr std::string_view kBlockSuffix = ".l3b";
constexpr std::string_view kTempMark = ".tmp.";
constexpr std::size_t kBlockHashSize = 8;  // a block file ends with the XXH3-64 of its bytes

[[noreturn]] void io_fail(const std::string& what, const fs::path& path) {
  throw_error(errc::io_error, what + " '" + path.string() + "': " + std::strerror(errno));
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// <16 hex>-<size>.l3s (a whole shard) or <16 hex>-<size>.<offset>-<length>.l3b (a block).
bool is_cache_file(const fs::path& p) {
  const std::string name = p.filename().string();
  return (name.ends_with(kSuffix) || name.ends_with(kBlockSuffix)) && name.find(kTempMark) == std::string::npos &&
         name.size() > 17 && name[16] == '-';
}

bool is_temporary(const fs::path& p) { return p.filename().string().find(kTempMark) != std::string::npos; }

// Marks a file as just used (LRU order is by modification time; atime is
// often not kept, noatime/relatime).
void touch(const fs::path& p) { ::utimensat(AT_FDCWD, p.c_str(), nullptr, 0); }

}  // namespace

std::uint64_t file_xxh3(const fs::path& file) {
  Fd f;
  f.fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) io_fail("cannot open", file);
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) io_fail("cannot stat", file);
  const auto size = static_cast<std::size_t>(st.st_size);
  if (size == 0) return XXH3_64bits(nullptr, 0);
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, f.fd, 0);
  if (p == MAP_FAILED) io_fail("cannot mmap", file);
  const std::uint64_t h = XXH3_64bits(p, size);
  ::munmap(p, size);
  return h;
}

CacheOptions cache_options_from_env() {
  CacheOptions o;
  if (const char* d = std::getenv("L3_CACHE_DIR"); d && *d) {
    o.dir = d;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    o.dir = fs::path(x) / "l3" / "shards";
  } else if (const char* h = std::getenv("HOME"); h && *h) {
    o.dir = fs::path(h) / ".cache" / "l3" / "shards";
  } else {
    o.dir = fs::temp_directory_path() / "l3-shards";
  }
  if (const char* m = std::getenv("L3_CACHE_MAX_BYTES"); m && *m) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(m, &end, 10);
    if (errno != 0 || end == m || *end != 0)
      throw_error(errc::invalid_argument, "L3_CACHE_MAX_BYTES must be a number of bytes (0: never evict)");
    o.max_bytes = v;
  }
  return o;
}

ShardCache::ShardCache(CacheOptions options) : options_(std::move(options)) {
  if (options_.dir.empty()) options_.dir = cache_options_from_env().dir;
}

const fs::path& ShardCache::dir() const noexcept { return options_.dir; }

fs::path ShardCache::path_of(std::uint64_t hash, std::uint64_t size) const {
  return options_.dir / (hex16(hash) + "-" + std::to_string(size) + std::string(kSuffix));
}

std::optional<fs::path> ShardCache::lookup(std::uint64_t hash, std::uint64_t size) const {
  const fs::path p = path_of(hash, size);
  std::error_code ec;
  const auto bytes = fs::file_size(p, ec);
  if (ec) return std::nullopt;
  // A file whose bytes are not its name's hash (damaged on disk, or written by
  // something else) is dropped and fetched again.
  if (bytes != size || file_xxh3(p) != hash) {
    fs::remove(p, ec);
    return std::nullopt;
  }
  touch(p);
  return p;
}

fs::path ShardCache::insert(std::uint64_t hash, std::uint64_t size, const std::string& what,
                            const std::function<void(int fd)>& fill) const {
  const fs::path final_path = path_of(hash, size);
  const fs::path temp = unique_temp_for(final_path);
  try {
    {
      Fd f;
      f.fd = ::open(temp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (f.fd < 0) io_fail("cannot create", temp);
      if (::ftruncate(f.fd, static_cast<off_t>(size)) != 0) io_fail("cannot size", temp);
      fill(f.fd);
    }
    if (file_xxh3(temp) != hash)
      throw_error(errc::checksum_mismatch, what + ": the downloaded bytes do not match the manifest's xxh3 " +
                                               hex16(hash) + " (the object changed after the manifest was written?)");
  } catch (...) {
    std::error_code ec;
    fs::remove(temp, ec);
    throw;
  }
  return publish(temp, final_path);
}

fs::path ShardCache::unique_temp_for(const fs::path& final_path) const {
  std::error_code ec;
  fs::create_directories(options_.dir, ec);
  if (ec) throw_error(errc::io_error, "cannot create the cache folder '" + options_.dir.string() + "': " + ec.message());
  static std::atomic<std::uint64_t> counter{0};
  // Unique per process and call: concurrent fillers never share a temporary.
  return final_path.string() + std::string(kTempMark) + std::to_string(::getpid()) + "." +
         std::to_string(counter.fetch_add(1));
}

fs::path ShardCache::publish(const fs::path& temp, const fs::path& final_path) const {
  if (::rename(temp.c_str(), final_path.c_str()) != 0) {
    const int err = errno;  // the message names the rename's error, not the cleanup's
    std::error_code ec;
    fs::remove(temp, ec);
    errno = err;
    io_fail("cannot rename to", final_path);
  }
  evict();
  return final_path;
}

fs::path ShardCache::block_path_of(std::uint64_t hash, std::uint64_t size, ByteRange range) const {
  return options_.dir / (hex16(hash) + "-" + std::to_string(size) + "." + std::to_string(range.offset) + "-" +
                         std::to_string(range.size) + std::string(kBlockSuffix));
}

namespace {

void store_le64(std::uint8_t* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}

std::uint64_t load_le64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= std::uint64_t{p[i]} << (8 * i);
  return v;
}

// True when the block file holds `length` bytes followed by their XXH3-64.
bool block_file_intact(const fs::path& p, std::uint64_t length) {
  Fd f;
  f.fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) return false;
  struct stat st {};
  if (::fstat(f.fd, &st) != 0 || static_cast<std::uint64_t>(st.st_size) != length + kBlockHashSize) return false;
  const auto total = static_cast<std::size_t>(st.st_size);
  void* m = ::mmap(nullptr, total, PROT_READ, MAP_SHARED, f.fd, 0);
  if (m == MAP_FAILED) return false;
  const auto* bytes = static_cast<const std::uint8_t*>(m);
  const bool ok = XXH3_64bits(bytes, static_cast<std::size_t>(length)) == load_le64(bytes + length);
  ::munmap(m, total);
  return ok;
}

}  // namespace

std::optional<fs::path> ShardCache::lookup_block(std::uint64_t hash, std::uint64_t size, ByteRange range) const {
  const fs::path p = block_path_of(hash, size, range);
  std::error_code ec;
  if (!fs::exists(p, ec)) return std::nullopt;
  if (!block_file_intact(p, range.size)) {  // damaged on disk: dropped and fetched again
    fs::remove(p, ec);
    return std::nullopt;
  }
  touch(p);
  return p;
}

fs::path ShardCache::insert_block(std::uint64_t hash, std::uint64_t size, ByteRange range,
                                  std::span<const std::uint8_t> bytes) const {
  if (bytes.size() != range.size) throw_error(errc::invalid_argument, "insert_block: the bytes are not the range's size");
  BlockWriter w(*this, hash, size, range);
  w.write(bytes);
  return w.commit();
}

// A download hands its bytes over in small pieces (libcurl: 16 KiB); they are
// gathered and written to the file in runs of this size: few write calls,
// and the page cache takes the block in large folios.
constexpr std::size_t kWriteRun = std::size_t{1} << 20;

struct ShardCache::BlockWriter::Impl {
  const ShardCache cache;  // a copy: the writer may outlive the caller's cache object
  fs::path final_path, temp;  // temp: empty until the first piece
  std::uint64_t length = 0, written = 0;
  XXH3_state_t state{};
  Fd f;
  std::unique_ptr<std::uint8_t[]> run;  // bytes not yet written (allocated with the temporary)
  std::size_t run_size = 0, run_used = 0;

  Impl(const ShardCache& c, fs::path final) : cache(c), final_path(std::move(final)) { XXH3_64bits_reset(&state); }
  ~Impl() {
    if (temp.empty()) return;
    std::error_code ec;
    fs::remove(temp, ec);  // not committed: a failed or cancelled download leaves nothing
  }
  void open_temp() {
    temp = cache.unique_temp_for(final_path);
    f.fd = file_io::create_for_write(temp);
    run_size = static_cast<std::size_t>(std::min<std::uint64_t>(kWriteRun, length));
    run.reset(new std::uint8_t[run_size]);  // not zeroed: only written bytes are read
  }
  // bytes into the run, writing it out each time it fills.
  void gather(std::span<const std::uint8_t> bytes) {
    while (!bytes.empty()) {
      const std::size_t n = std::min(bytes.size(), run_size - run_used);
      std::memcpy(run.get() + run_used, bytes.data(), n);
      run_used += n;
      bytes = bytes.subspan(n);
      if (run_used == run_size) flush();
    }
  }
  void flush() {
    file_io::write_all(f.fd, {run.get(), run_used}, temp);
    run_used = 0;
  }
};

ShardCache::BlockWriter::BlockWriter(const ShardCache& cache, std::uint64_t hash, std::uint64_t size, ByteRange range)
    : impl_(std::make_unique<Impl>(cache, cache.block_path_of(hash, size, range))) {
  impl_->length = range.size;
}
ShardCache::BlockWriter::~BlockWriter() = default;
ShardCache::BlockWriter::BlockWriter(BlockWriter&&) noexcept = default;

std::uint64_t ShardCache::BlockWriter::written() const noexcept { return impl_->written; }

void ShardCache::BlockWriter::write(std::span<const std::uint8_t> bytes) {
  Impl& w = *impl_;
  if (bytes.size() > w.length - w.written)
    throw_error(errc::invalid_argument, "BlockWriter: more bytes than the block's range");
  if (w.temp.empty()) w.open_temp();
  w.gather(bytes);
  XXH3_64bits_update(&w.state, bytes.data(), bytes.size());
  w.written += bytes.size();
}

fs::path ShardCache::BlockWriter::commit() {
  Impl& w = *impl_;
  if (w.written != w.length)
    throw_error(errc::invalid_argument, "BlockWriter: " + std::to_string(w.written) + " of the block's " +
                                            std::to_string(w.length) + " bytes written");
  if (w.temp.empty()) w.open_temp();  // an empty block
  w.flush();
  w.run.reset();
  std::uint8_t tail[kBlockHashSize];
  store_le64(tail, XXH3_64bits_digest(&w.state));
  file_io::write_all(w.f.fd, tail, w.temp);
  const int fd = std::exchange(w.f.fd, -1);
  if (::close(fd) != 0) io_fail("cannot write", w.temp);
  fs::path temp = std::move(w.temp);
  w.temp.clear();  // publish() removes it if the rename fails
  return w.cache.publish(temp, w.final_path);
}

void ShardCache::evict() const {
  if (options_.max_bytes == 0) return;  // the default: never evict (random access makes LRU thrash)
  struct Entry {
    fs::path path;
    std::uint64_t size;
    fs::file_time_type used;
  };
  std::vector<Entry> entries;
  std::uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(options_.dir, ec)) {
    if (!is_cache_file(e.path())) continue;
    std::error_code ec2;
    const auto size = e.file_size(ec2);
    const auto used = e.last_write_time(ec2);
    if (ec2) continue;  // removed meanwhile by another process
    entries.push_back({e.path(), size, used});
    total += size;
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.used < b.used; });
  // Removing a file another process has open or mapped is safe: its data stays
  // until that process closes it.
  for (const Entry& e : entries) {
    if (total <= options_.max_bytes) break;
    if (fs::remove(e.path, ec)) total -= e.size;
  }
}

CacheSummary ShardCache::summary() const {
  CacheSummary s;
  s.dir = options_.dir;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(options_.dir, ec)) {
    std::error_code ec2;
    if (is_cache_file(e.path())) {
      ++s.files;
      s.bytes += e.file_size(ec2);
    } else if (is_temporary(e.path())) {
      ++s.temporaries;
    }
  }
  return s;
}

std::uint64_t ShardCache::clear() const {
  std::uint64_t freed = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(options_.dir, ec)) {
    if (!is_cache_file(e.path()) && !is_temporary(e.path())) continue;  // never anything else
    std::error_code ec2;
    const auto size = e.file_size(ec2);
    if (fs::remove(e.path(), ec2) && !ec2) freed += size;
  }
  return freed;
}

}  // namespace l3::storage
