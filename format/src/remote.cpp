// Datasets in an object store (spec/format.md §8.5): the manifest by one GET,
// each shard downloaded once into the local shard cache by ranged GETs of
// kFetchBlock bytes, many in flight, then read like a local file (one code
// path for local and remote shards from there on).
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "l3/dataset.hpp"
#include "l3/storage.hpp"

namespace l3 {
namespace {

// The ranged GET size: large enough that request overhead is small, small
// enough that many are in flight on one shard (spec/format.md §8.5.1).
constexpr std::uint64_t kFetchBlock = std::uint64_t{8} << 20;

void pwrite_all(int fd, std::uint64_t offset, std::span<const std::uint8_t> bytes, const std::string& what) {
  while (!bytes.empty()) {
    const ssize_t n = ::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw_error(errc::io_error, "cannot write the cached copy of " + what + ": " + std::strerror(errno));
    bytes = bytes.subspan(static_cast<std::size_t>(n));
    offset += static_cast<std::uint64_t>(n);
  }
}

}  // namespace

bool is_remote(const std::filesystem::path& dir) { return storage::is_s3_url(dir.native()); }

std::string read_remote_text(const std::filesystem::path& dir, const std::string& name) {
  const storage::S3Url url = storage::parse_s3_url(dir.native());
  const auto bytes = storage::shared_s3_client()->get(url.bucket, url.key(name));
  return {bytes.begin(), bytes.end()};
}

std::filesystem::path shard_file(const std::filesystem::path& dir, const ManifestShard& m) {
  if (!is_remote(dir)) return dir / m.file;
  const storage::S3Url url = storage::parse_s3_url(dir.native());
  const storage::ShardCache cache(storage::cache_options_from_env());
  if (auto hit = cache.lookup(m.file_hash, m.bytes)) return *hit;
  const std::string what = url.url(m.file);
  return cache.insert(m.file_hash, m.bytes, what, [&](int fd) {
    std::vector<storage::ByteRange> ranges;
    for (std::uint64_t at = 0; at < m.bytes; at += kFetchBlock) ranges.push_back({at, std::min(kFetchBlock, m.bytes - at)});
    storage::shared_s3_client()->get_ranges(url.bucket, url.key(m.file), ranges,
                                            [&](std::size_t, std::uint64_t offset, std::span<const std::uint8_t> bytes) {
                                              pwrite_all(fd, offset, bytes, what);
                                            });
  });
}

}  // namespace l3
