// Datasets in an object store (spec/format.md §8.5): the manifest by one GET;
// each shard opened from one suffix-range GET of its trailer and index; its
// records fetched by blocks of consecutive records (about S3Config::block_size), many
// in flight, kept in the shard cache at block granularity and mapped from
// there. A whole shard is downloaded only where all its bytes are needed
// (shard_file: l3pack verify, merge, DatasetOptions::verify_shard_hashes).
#include "remote.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>

#include "l3/common/file_io.hpp"
#include "l3/storage/storage.hpp"
#include "layout.hpp"

namespace l3 {
namespace L = shard_layout;
namespace {

// The ranged GET size of whole-shard downloads: large enough that request
// overhead is small, small enough that many are in flight (spec/format.md
// §8.5.1). Blocks of records are S3Config::block_size (the same 8 MiB by default).
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

// The suffix one GET asks for: trailer, index and keys of `records` records
// with room to spare (an index larger than this costs a second GET).
storage::ByteRange tail_range(const ManifestShard& m) {
  const std::uint64_t guess = L::kTrailerSize + m.records * (L::kEntrySize + 64) + 2048;
  const std::uint64_t n = std::min(m.bytes, guess);
  return {m.bytes - n, n};
}

std::vector<std::uint8_t> read_block_file(const std::filesystem::path& p, std::uint64_t size) {
  file_io::MappedFile f(p);
  const auto b = f.bytes();
  return {b.begin(), b.begin() + static_cast<std::ptrdiff_t>(std::min<std::uint64_t>(size, b.size()))};
}

// The bytes of `range` of object `key` by one ranged GET.
std::vector<std::uint8_t> get_range(const storage::S3Url& url, const std::string& key, storage::ByteRange range) {
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(range.size));
  if (range.size)
    storage::shared_s3_client()->get_ranges(url.bucket, url.key(key), std::span(&range, 1),
                                            [&](std::size_t, std::uint64_t at, std::span<const std::uint8_t> b) {
                                              std::memcpy(bytes.data() + (at - range.offset), b.data(), b.size());
                                            });
  return bytes;
}

// Record i of shard `what` does not match its index entry's XXH3.
[[noreturn]] void record_checksum_mismatch(const std::string& what, std::uint64_t i) {
  throw_error(errc::checksum_mismatch, what + ": record " + std::to_string(i) +
                                           " does not match its index checksum (the object changed in the "
                                           "store after its index was read, or the download is damaged)");
}

// The bytes of `range` of shard m: from the shard cache, else one GET (then cached).
std::vector<std::uint8_t> cached_range(const storage::S3Url& url, const ManifestShard& m, storage::ByteRange range) {
  const storage::ShardCache cache(storage::cache_options_from_env());
  if (auto hit = cache.lookup_block(m.file_hash, m.bytes, range)) return read_block_file(*hit, range.size);
  std::vector<std::uint8_t> bytes = get_range(url, m.file, range);
  cache.insert_block(m.file_hash, m.bytes, range, bytes);
  return bytes;
}

// The record bytes of one remote shard, by blocks. Each block is in one of
// three states: idle (not here), busy (a thread fetches it: others wait) or
// ready (mapped from its cache file until this body is destroyed).
class RemoteShard final : public ShardBody {
public:
  RemoteShard(storage::S3Url url, ManifestShard m) : url_(std::move(url)), m_(std::move(m)) {}

  // Cuts the record area into blocks of whole records (from byte 0, so the
  // first block carries the header too) of about block_bytes.
  void plan(const ShardReader& reader, std::uint64_t block_bytes) {
    std::uint64_t start = 0;
    for (std::uint64_t i = 0; i < reader.size(); ++i) {
      const RecordExtent e = reader.extent(i);
      extents_.push_back(e);
      const std::uint64_t end = e.offset + e.size;
      const bool last = i + 1 == reader.size();
      if (end - start >= block_bytes || last) {
        blocks_.push_back({start, end - start});
        block_end_record_.push_back(i + 1);
        start = end;
      }
    }
    state_.assign(blocks_.size(), State::idle);
    maps_.resize(blocks_.size());
  }

  std::span<const std::uint8_t> bytes(std::uint64_t offset, std::uint64_t size) const override {
    const std::size_t b = block_at(offset);
    const storage::ByteRange r = blocks_[b];
    if (offset + size > r.offset + r.size)
      throw_error(errc::corrupt_index, what() + ": bytes [" + std::to_string(offset) + ", " +
                                           std::to_string(offset + size) + ") cross a block's end");
    const std::uint8_t* base = acquire(b);
    return {base + (offset - r.offset), static_cast<std::size_t>(size)};
  }

  std::size_t block_of_record(std::uint64_t record) const {
    return static_cast<std::size_t>(std::upper_bound(block_end_record_.begin(), block_end_record_.end(), record) -
                                    block_end_record_.begin());
  }

  // Takes block b for fetching when nobody has it (idle -> busy).
  bool claim(std::size_t b) const {
    std::lock_guard lock(m_mutex_);
    if (state_[b] != State::idle) return false;
    state_[b] = State::busy;
    return true;
  }
  void release(std::size_t b) const {
    {
      std::lock_guard lock(m_mutex_);
      state_[b] = State::idle;
    }
    cv_.notify_all();
  }
  // The claimed block b from the shard cache (true), else false.
  bool load_cached(std::size_t b) const {
    const storage::ShardCache cache(storage::cache_options_from_env());
    auto hit = cache.lookup_block(m_.file_hash, m_.bytes, blocks_[b]);
    if (!hit) return false;
    publish(b, *hit);
    return true;
  }
  // A download of the claimed block b in progress (spec/format.md §8.5.1):
  // each piece goes straight into the block's cache file and through the
  // running XXH3 of the record it belongs to, while it is hot in the CPU's
  // cache. No copy of the whole block is made in memory, and the block's
  // bytes are read once on arrival (then by the decoders from the mapping).
  struct Download {
    std::size_t block = 0;
    std::uint64_t at = 0;           // offset in the shard of the next byte
    std::uint64_t record = 0;       // the record being hashed
    storage::ShardCache::BlockWriter file;
    std::array<std::uint8_t, L::kHeaderSize> header{};  // block 0: the shard's header, checked at the end
    XXH3_state_t hash{};                                  // of the bytes of `record` so far
  };
  Download begin_download(std::size_t b) const {
    const storage::ShardCache cache(storage::cache_options_from_env());
    Download d{b, blocks_[b].offset, b == 0 ? 0 : block_end_record_[b - 1],
               storage::ShardCache::BlockWriter(cache, m_.file_hash, m_.bytes, blocks_[b])};
    XXH3_64bits_reset(&d.hash);
    return d;
  }
  // The next bytes of d's block (at: their offset in the shard, as get_many
  // reports them, in order).
  void feed(Download& d, std::uint64_t at, std::span<const std::uint8_t> bytes) const {
    if (at != d.at) throw_error(errc::io_error, what() + ": a block's bytes arrived out of order");
    d.file.write(bytes);
    if (d.at < L::kHeaderSize) {
      const std::size_t n = std::min<std::size_t>(bytes.size(), L::kHeaderSize - static_cast<std::size_t>(d.at));
      std::memcpy(d.header.data() + d.at, bytes.data(), n);
    }
    hash_records(d, bytes);
  }
  // d's block complete: every record matched its index checksum (and the
  // header its fields, in block 0); then it is cached and mapped.
  void finish_download(Download& d) const {
    const storage::ByteRange r = blocks_[d.block];
    hash_records(d, {});  // records of no bytes at the block's end
    if (d.at != r.offset + r.size || d.record != block_end_record_[d.block])
      throw_error(errc::io_error, what() + ": a block's download ended early");
    if (r.offset == 0) {
      try {
        L::check_header_fields(std::span<const std::uint8_t>(d.header).first(std::min<std::size_t>(r.size, L::kHeaderSize)));
      } catch (const Error& e) {
        throw with_context(e, what());
      }
    }
    publish(d.block, d.file.commit());
  }
  // The claimed block b fetched by this thread alone: one ranged GET.
  void fetch_now(std::size_t b) const {
    Download d = begin_download(b);
    const storage::RangeRequest request{url_.key(m_.file), blocks_[b]};
    storage::RangeCallbacks cb;
    cb.data = [&](std::size_t, std::uint64_t at, std::span<const std::uint8_t> bytes) { feed(d, at, bytes); };
    storage::shared_s3_client()->get_many(url_.bucket, std::span(&request, 1), cb);
    finish_download(d);
  }
  // Whether block b is here: ready, or (when nobody is fetching it) loaded
  // from the shard cache now.
  bool at_hand(std::size_t b) const {
    {
      std::lock_guard lock(m_mutex_);
      if (state_[b] == State::ready) return true;
    }
    if (!claim(b)) return false;  // another thread fetches it
    try {
      if (load_cached(b)) return true;
    } catch (...) {
      release(b);
      throw;
    }
    release(b);
    return false;
  }
  // Record i's payload by one ranged GET, checked against the index.
  std::vector<std::uint8_t> fetch_record(std::uint64_t i) const {
    const RecordExtent& e = extents_.at(static_cast<std::size_t>(i));
    std::vector<std::uint8_t> buf = get_range(url_, m_.file, {e.offset, e.size});
    if (l3::xxh3_64(buf) != e.xxh3) record_checksum_mismatch(what(), i);
    return buf;
  }
  storage::ByteRange range(std::size_t b) const { return blocks_[b]; }
  const std::string& key_name() const { return m_.file; }
  std::string what() const { return url_.url(m_.file); }

private:
  enum class State : std::uint8_t { idle, busy, ready };

  std::size_t block_at(std::uint64_t offset) const {
    auto it = std::upper_bound(blocks_.begin(), blocks_.end(), offset,
                               [](std::uint64_t o, const storage::ByteRange& r) { return o < r.offset; });
    if (it == blocks_.begin()) throw_error(errc::corrupt_index, what() + ": no block holds byte " + std::to_string(offset));
    return static_cast<std::size_t>(it - blocks_.begin() - 1);
  }

  // Runs bytes (the next of d's block, from d.at on) through the records'
  // XXH3: each record is checked against its index entry as its last byte
  // passes (records are contiguous, §6; block 0 starts with the header).
  void hash_records(Download& d, std::span<const std::uint8_t> bytes) const {
    const std::uint64_t last = block_end_record_[d.block];
    while (d.record < last) {
      const RecordExtent& e = extents_[static_cast<std::size_t>(d.record)];
      if (d.at < e.offset) {  // the header, before the first record
        if (bytes.empty()) return;
        const auto skip = static_cast<std::size_t>(std::min<std::uint64_t>(e.offset - d.at, bytes.size()));
        bytes = bytes.subspan(skip);
        d.at += skip;
        continue;
      }
      const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(e.offset + e.size - d.at, bytes.size()));
      XXH3_64bits_update(&d.hash, bytes.data(), n);
      bytes = bytes.subspan(n);
      d.at += n;
      if (d.at != e.offset + e.size) return;  // the record goes on in the next piece
      if (XXH3_64bits_digest(&d.hash) != e.xxh3) record_checksum_mismatch(what(), d.record);
      XXH3_64bits_reset(&d.hash);
      ++d.record;
    }
    d.at += bytes.size();  // bytes after the block's last record: none in a well-formed plan
  }

  void publish(std::size_t b, const std::filesystem::path& file) const {
    auto map = std::make_unique<file_io::MappedFile>(file);
    if (map->bytes().size() < blocks_[b].size)
      throw_error(errc::io_error, what() + ": cached block '" + file.string() + "' is short");
    {
      std::lock_guard lock(m_mutex_);
      maps_[b] = std::move(map);
      state_[b] = State::ready;
    }
    cv_.notify_all();
  }

  // The mapped bytes of block b, fetched by this thread if nobody has it.
  const std::uint8_t* acquire(std::size_t b) const {
    {
      std::unique_lock lock(m_mutex_);
      for (;;) {
        if (state_[b] == State::ready) return maps_[b]->bytes().data();
        if (state_[b] == State::idle) break;
        cv_.wait(lock);
      }
      state_[b] = State::busy;
    }
    try {
      if (!load_cached(b)) fetch_now(b);
    } catch (...) {
      release(b);
      throw;
    }
    std::lock_guard lock(m_mutex_);
    return maps_[b]->bytes().data();
  }

  storage::S3Url url_;
  ManifestShard m_;
  std::vector<storage::ByteRange> blocks_;
  std::vector<std::uint64_t> block_end_record_;  // one past the last record of each block
  std::vector<RecordExtent> extents_;
  mutable std::mutex m_mutex_;
  mutable std::condition_variable cv_;
  mutable std::vector<State> state_;
  mutable std::vector<std::unique_ptr<file_io::MappedFile>> maps_;
};

const RemoteShard& body_of(const ShardReader& shard) {
  const auto* body = dynamic_cast<const RemoteShard*>(shard.body());
  if (!body) throw_error(errc::invalid_argument, "not a remote shard opened by blocks");
  return *body;
}

// The data callback of one get_many: each request's pieces, as they arrive,
// copied into bufs[i] (sized to the request's range on its first piece).
decltype(storage::RangeCallbacks::data) collect_ranges(
    const std::vector<storage::RangeRequest>& requests, std::vector<std::vector<std::uint8_t>>& bufs) {
  return [&requests, &bufs](std::size_t i, std::uint64_t at, std::span<const std::uint8_t> bytes) {
    auto& buf = bufs[i];
    if (buf.empty()) buf.resize(static_cast<std::size_t>(requests[i].range.size));
    std::memcpy(buf.data() + (at - requests[i].range.offset), bytes.data(), bytes.size());
  };
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

namespace remote {

std::unique_ptr<ShardReader> open_shard(const std::filesystem::path& dir, const ManifestShard& m,
                                        const ShardLimits& limits) {
  const storage::S3Url url = storage::parse_s3_url(dir.native());
  const storage::ByteRange r = tail_range(m);
  std::vector<std::uint8_t> tail = cached_range(url, m, r);
  // An index longer than the guess: the rest of it by one more GET.
  if (tail.size() >= L::kTrailerSize) {
    const std::uint64_t index_at = L::load_le<std::uint64_t>(tail.data() + tail.size() - L::kTrailerSize + L::kTrIndexOffset);
    if (index_at >= L::kHeaderSize && index_at < r.offset) {
      std::vector<std::uint8_t> head = cached_range(url, m, {index_at, r.offset - index_at});
      head.insert(head.end(), tail.begin(), tail.end());
      tail = std::move(head);
    }
  }
  auto body = std::make_shared<RemoteShard>(url, m);
  try {
    auto reader = std::make_unique<ShardReader>(m.bytes, std::move(tail), body, limits);
    body->plan(*reader, storage::shared_s3_client()->config().block_size);
    return reader;
  } catch (const Error& e) {
    throw with_context(e, url.url(m.file));
  }
}

void fetch_tails(const std::filesystem::path& dir, std::span<const ManifestShard> shards,
                 const std::function<bool()>& cancelled, const std::function<void(std::size_t)>& done) {
  const storage::S3Url url = storage::parse_s3_url(dir.native());
  const storage::ShardCache cache(storage::cache_options_from_env());
  std::vector<storage::RangeRequest> requests;
  std::vector<std::size_t> of;  // requests[i] is the tail of shards[of[i]]
  for (std::size_t j = 0; j < shards.size(); ++j) {
    const ManifestShard& m = shards[j];
    const storage::ByteRange r = tail_range(m);
    if (std::filesystem::exists(cache.block_path_of(m.file_hash, m.bytes, r))) continue;
    requests.push_back({url.key(m.file), r});
    of.push_back(j);
  }
  std::vector<std::vector<std::uint8_t>> bufs(requests.size());
  storage::RangeCallbacks cb;
  cb.data = collect_ranges(requests, bufs);
  cb.done = [&](std::size_t i) {
    const ManifestShard& m = shards[of[i]];
    cache.insert_block(m.file_hash, m.bytes, requests[i].range, bufs[i]);
    std::vector<std::uint8_t>().swap(bufs[i]);
    done(of[i]);
  };
  cb.cancelled = cancelled;
  storage::shared_s3_client()->get_many(url.bucket, requests, cb);
}

std::size_t block_of(const ShardReader& shard, std::uint64_t record) { return body_of(shard).block_of_record(record); }

bool block_at_hand(const ShardReader& shard, std::uint64_t record) {
  const RemoteShard& body = body_of(shard);
  return body.at_hand(body.block_of_record(record));
}

std::vector<std::uint8_t> fetch_record(const ShardReader& shard, std::uint64_t record) {
  return body_of(shard).fetch_record(record);
}

void fetch_blocks(const std::filesystem::path& dir, std::span<const BlockRef> blocks,
                  const std::function<bool()>& cancelled) {
  const storage::S3Url url = storage::parse_s3_url(dir.native());
  std::vector<storage::RangeRequest> requests;
  std::vector<std::pair<const RemoteShard*, std::size_t>> claimed;  // claimed, not yet published
  for (const BlockRef& ref : blocks) {
    const RemoteShard& body = body_of(*ref.shard);
    if (!body.claim(ref.block)) continue;  // here already, or another thread has it
    try {
      if (body.load_cached(ref.block)) continue;  // another process fetched it
    } catch (...) {
      body.release(ref.block);
      for (auto& [s, b] : claimed) s->release(b);
      throw;
    }
    requests.push_back({url.key(body.key_name()), body.range(ref.block)});
    claimed.emplace_back(&body, ref.block);
  }
  std::vector<bool> published(requests.size());
  std::vector<RemoteShard::Download> downloads;
  downloads.reserve(claimed.size());
  storage::RangeCallbacks cb;
  cb.data = [&](std::size_t i, std::uint64_t at, std::span<const std::uint8_t> bytes) {
    claimed[i].first->feed(downloads[i], at, bytes);
  };
  cb.done = [&](std::size_t i) {
    claimed[i].first->finish_download(downloads[i]);
    published[i] = true;
  };
  cb.cancelled = cancelled;
  auto release_rest = [&] {
    for (std::size_t i = 0; i < claimed.size(); ++i)
      if (!published[i]) claimed[i].first->release(claimed[i].second);
  };
  try {
    for (const auto& [body, b] : claimed) downloads.push_back(body->begin_download(b));
    storage::shared_s3_client()->get_many(url.bucket, requests, cb);
  } catch (...) {
    release_rest();
    throw;
  }
  release_rest();  // cancelled: the rest is fetched on demand
}

}  // namespace remote
}  // namespace l3
