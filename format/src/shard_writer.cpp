// ShardWriter: one streaming pass (spec/format.md §2): header, records as they
// come, then index and trailer at finalize. Everything goes to "<path>.tmp"
// and is renamed into place only once complete and fsynced.
#include <unistd.h>

#include <zstd.h>

#include <string>
#include <utility>

#include "l3/common/file_io.hpp"
#include "l3/common/checked.hpp"
#include "l3/format/shard.hpp"
#include "layout.hpp"
#include "utf8.hpp"

namespace l3 {
namespace L = shard_layout;

namespace {
constexpr std::size_t kBufferSize = std::size_t{1} << 20;

std::filesystem::path temp_path_for(const std::filesystem::path& path) {
  auto tmp = path;
  tmp += ".tmp";
  return tmp;
}
}  // namespace

struct ShardWriter::State {
  std::filesystem::path path, tmp_path;
  ShardWriterOptions options;
  int fd = -1;
  bool finalized = false;
  std::uint64_t offset = 0;          // bytes handed to write() or buffered
  std::vector<std::uint8_t> buffer;  // pending bytes, flushed at kBufferSize
  std::vector<std::uint8_t> entries; // raw index entries (spec/format.md §5.2)
  std::vector<std::uint8_t> heap;    // keys and metadata
  std::uint64_t count = 0;
  XXH3_state_t file_hash{};          // of every byte of the file, for the manifest

  void flush() {
    file_io::write_all(fd, buffer, tmp_path);
    buffer.clear();
  }
  void write(std::span<const std::uint8_t> bytes) {
    XXH3_64bits_update(&file_hash, bytes.data(), bytes.size());
    offset += bytes.size();
    if (buffer.size() + bytes.size() > kBufferSize) flush();
    if (bytes.size() >= kBufferSize) {
      file_io::write_all(fd, bytes, tmp_path);
    } else {
      buffer.insert(buffer.end(), bytes.begin(), bytes.end());
    }
  }
  void discard() noexcept {
    if (fd >= 0) ::close(fd);
    fd = -1;
    ::unlink(tmp_path.c_str());
  }
};

ShardWriter::ShardWriter(std::filesystem::path path, ShardWriterOptions options)
    : s_(std::make_unique<State>()) {
  if (options.index_encoding != IndexEncoding::raw && options.index_encoding != IndexEncoding::zstd)
    throw_error(errc::invalid_argument, "unknown index encoding");
  s_->path = std::move(path);
  s_->tmp_path = temp_path_for(s_->path);
  s_->options = options;
  s_->buffer.reserve(kBufferSize);
  XXH3_64bits_reset(&s_->file_hash);
  s_->fd = file_io::create_for_write(s_->tmp_path);
  // spec/format.md §3: magic, version, flags = 0, reserved = 0.
  std::uint8_t header[L::kHeaderSize] = {};
  std::memcpy(header, L::kHeaderMagic.data(), L::kHeaderMagic.size());
  L::store_le<std::uint16_t>(header + L::kHeaderVersionAt, L::kVersion);
  s_->write(header);
}

ShardWriter::~ShardWriter() {
  if (s_ && !s_->finalized) s_->discard();
}

ShardWriter::ShardWriter(ShardWriter&&) noexcept = default;

namespace {
void check_record(const ShardLimits& lim, std::uint64_t count, std::size_t payload,
                  std::int64_t label, std::string_view key, std::size_t meta) {
  if (count >= lim.max_records) throw_error(errc::limit_exceeded, "shard already holds max_records records");
  if (payload > lim.max_record_size) throw_error(errc::limit_exceeded, "payload larger than max_record_size");
  if (key.size() > lim.max_key_size) throw_error(errc::limit_exceeded, "key longer than max_key_size");
  if (meta > lim.max_metadata_size) throw_error(errc::limit_exceeded, "metadata larger than max_metadata_size");
  if (label < kNoLabel) throw_error(errc::invalid_argument, "label must be -1 (no label) or >= 0");
  if (!is_valid_utf8(key)) throw_error(errc::invalid_argument, "key is not valid UTF-8");
}
}  // namespace

std::uint64_t ShardWriter::append(std::span<const std::uint8_t> payload, std::int64_t label,
                                  std::string_view key, std::span<const std::uint8_t> metadata) {
  if (!s_ || s_->finalized || s_->fd < 0) throw_error(errc::invalid_argument, "append on a closed ShardWriter");
  check_record(s_->options.limits, s_->count, payload.size(), label, key, metadata.size());
  auto index_size = checked_add<std::uint64_t>((s_->count + 1) * L::kEntrySize,
                                               s_->heap.size() + key.size() + metadata.size());
  if (!index_size || *index_size > s_->options.limits.max_index_size)
    throw_error(errc::limit_exceeded, "index would exceed max_index_size");

  std::uint8_t e[L::kEntrySize];
  L::store_le<std::uint64_t>(e + L::kEnOffset, s_->offset);
  L::store_le<std::uint64_t>(e + L::kEnSize, payload.size());
  L::store_le<std::uint64_t>(e + L::kEnChecksum, l3::xxh3_64(payload));
  L::store_le<std::int64_t>(e + L::kEnLabel, label);
  L::store_le<std::uint64_t>(e + L::kEnHeapOffset, s_->heap.size());
  L::store_le<std::uint32_t>(e + L::kEnKeySize, static_cast<std::uint32_t>(key.size()));
  L::store_le<std::uint32_t>(e + L::kEnMetaSize, static_cast<std::uint32_t>(metadata.size()));
  try {
    s_->write(payload);
  } catch (...) {
    s_->discard();  // a failed write leaves the file in an unknown state
    throw;
  }
  s_->entries.insert(s_->entries.end(), e, e + L::kEntrySize);
  s_->heap.insert(s_->heap.end(), key.begin(), key.end());
  s_->heap.insert(s_->heap.end(), metadata.begin(), metadata.end());
  return s_->count++;
}

namespace {
std::vector<std::uint8_t> zstd_compress(std::span<const std::uint8_t> raw, int level) {
  std::vector<std::uint8_t> out(ZSTD_compressBound(raw.size()));
  std::size_t n = ZSTD_compress(out.data(), out.size(), raw.data(), raw.size(), level);
  if (ZSTD_isError(n)) throw_error(errc::invalid_argument, std::string("zstd: ") + ZSTD_getErrorName(n));
  out.resize(n);
  return out;
}
}  // namespace

ShardSummary ShardWriter::finalize() {
  if (!s_ || s_->finalized || s_->fd < 0) throw_error(errc::invalid_argument, "finalize on a closed ShardWriter");
  State& s = *s_;
  try {
    std::vector<std::uint8_t> index = std::move(s.entries);
    index.insert(index.end(), s.heap.begin(), s.heap.end());
    // An empty index is always stored raw (spec/format.md §5.3).
    bool use_zstd = s.options.index_encoding == IndexEncoding::zstd && !index.empty();
    std::vector<std::uint8_t> stored = use_zstd ? zstd_compress(index, s.options.zstd_level) : index;

    std::uint8_t t[L::kTrailerSize] = {};
    L::store_le<std::uint64_t>(t + L::kTrIndexOffset, s.offset);
    L::store_le<std::uint64_t>(t + L::kTrIndexStoredSize, stored.size());
    L::store_le<std::uint64_t>(t + L::kTrIndexSize, index.size());
    L::store_le<std::uint64_t>(t + L::kTrRecordCount, s.count);
    L::store_le<std::uint64_t>(t + L::kTrIndexHash, l3::xxh3_64(stored));
    L::store_le<std::uint16_t>(t + L::kTrEncoding, static_cast<std::uint16_t>(use_zstd ? 1 : 0));
    L::store_le<std::uint16_t>(t + L::kTrVersion, L::kVersion);
    L::store_le<std::uint64_t>(t + L::kTrHash, l3::xxh3_64({t, L::kTrHash}));
    std::memcpy(t + L::kTrMagic, L::kTrailerMagic.data(), L::kTrailerMagic.size());

    s.write(stored);
    s.write(t);
    s.flush();
    file_io::fsync_fd(s.fd, s.tmp_path);
    int fd = std::exchange(s.fd, -1);
    file_io::close_fd(fd, s.tmp_path);
    file_io::rename_durable(s.tmp_path, s.path);
  } catch (...) {
    s.discard();
    throw;
  }
  s.finalized = true;
  return ShardSummary{s.path, s.count, s.offset, XXH3_64bits_digest(&s.file_hash)};
}

std::uint64_t ShardWriter::records() const noexcept { return s_ ? s_->count : 0; }
std::uint64_t ShardWriter::bytes_written() const noexcept { return s_ ? s_->offset : 0; }
const std::filesystem::path& ShardWriter::path() const noexcept {
  static const std::filesystem::path kEmpty;
  return s_ ? s_->path : kEmpty;
}

}  // namespace l3
