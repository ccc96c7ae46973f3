// Object storage for datasets (spec/format.md §8.5): s3:// URLs, AWS-style
// configuration, an S3 client over libcurl (SigV4 signing by CURLOPT_AWS_SIGV4,
// many ranged GETs in flight on one multi handle, retries with backoff), and
// the local disk cache of remote shards.
//
// Secrets (the secret key, the session token) never appear in an error
// message, a log line or anything this library returns other than S3Config.
// All functions throw l3::Error (l3/common/error.hpp): io_error for transport and
// HTTP failures, checksum_mismatch for downloaded bytes that are not the
// expected ones, invalid_argument for malformed URLs and options.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace l3::storage {

// ---- URLs -------------------------------------------------------------------

// True for "s3://...": the dataset lives in an object store.
bool is_s3_url(std::string_view text) noexcept;

// s3://bucket/prefix. The prefix has no leading or trailing '/' (may be empty).
struct S3Url {
  std::string bucket;
  std::string prefix;

  std::string key(std::string_view name) const;          // prefix + "/" + name
  std::string url(std::string_view name = {}) const;     // "s3://bucket/prefix[/name]"
};
S3Url parse_s3_url(std::string_view url);  // invalid_argument

// ---- configuration ----------------------------------------------------------

enum class Addressing { path, virtual_host };

struct S3Config {
  std::string access_key;
  std::string secret_key;     // never printed
  std::string session_token;  // never printed
  std::string region = "us-east-1";
  std::string endpoint;       // scheme://host[:port]; empty: https://s3.<region>.amazonaws.com
  Addressing addressing = Addressing::virtual_host;
  bool anonymous = false;     // unsigned requests (public buckets)
  bool verify_tls = true;     // certificate and host checks for https
  unsigned max_in_flight = 16;       // ranged GETs in flight per transfer (L3_S3_MAX_IN_FLIGHT, 1..256)
  unsigned max_attempts = 10;        // per request, with exponential backoff (L3_S3_MAX_ATTEMPTS)
  std::uint64_t part_size = std::uint64_t{64} << 20;  // multipart uploads (L3_S3_PART_SIZE, >= 5 MiB)
  std::uint64_t block_size = std::uint64_t{8} << 20;  // target bytes of a block of records (L3_S3_BLOCK_SIZE, >= 4 KiB)
  unsigned backoff_ms = 100;         // first retry's delay; doubles each attempt
  unsigned connect_timeout_s = 10;
  unsigned low_speed_timeout_s = 30; // a transfer under 1 KiB/s for this long is retried

  std::string endpoint_or_default() const;
  std::string describe() const;  // endpoint, region, key id and how it signs; no secret
};

// The configuration the AWS CLI and SDKs would use (spec/format.md §8.5.2):
//   AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN; else the
//   profile AWS_PROFILE (default "default") of AWS_SHARED_CREDENTIALS_FILE
//   (default ~/.aws/credentials); no credentials, or AWS_NO_SIGN_REQUEST=true:
//   anonymous. AWS_REGION, else AWS_DEFAULT_REGION, else us-east-1.
//   AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL (an endpoint other than AWS's
//   defaults to path-style addressing); L3_S3_ADDRESSING=path|virtual
//   overrides; L3_S3_VERIFY_TLS=0 turns certificate checks off;
//   L3_S3_MAX_ATTEMPTS (1..100) bounds the tries of one request;
//   L3_S3_PART_SIZE sets the upload part size (at least S3's 5 MiB);
//   L3_S3_BLOCK_SIZE the target size of a fetched block of records (4 KiB..1 GiB);
//   L3_S3_MAX_IN_FLIGHT the ranged GETs in flight at once (1..256).
// A non-empty endpoint_override wins over the environment (a per-call option).
S3Config s3_config_from_env(const std::string& endpoint_override = {});

// The URL of an object under `config` (path-style or virtual-host; the key
// URI-encoded, '/' kept); `query` is appended after '?' when not empty.
std::string object_url(const S3Config& config, const std::string& bucket, const std::string& key,
                       const std::string& query = {});

// ---- the client -------------------------------------------------------------

struct ByteRange {
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
};

// One ranged GET of a multi-object transfer (S3Client::get_many).
struct RangeRequest {
  std::string key;
  ByteRange range;
};

// What get_many reports, all from the calling thread. data: bytes of request
// i at `offset` of its object, in order, possibly in several pieces (a retry
// resumes where a cut body ended). done (optional): request i is complete.
// cancelled (optional, polled between transfers): true stops the transfer
// early; get_many then returns normally with some requests not done.
struct RangeCallbacks {
  std::function<void(std::size_t, std::uint64_t, std::span<const std::uint8_t>)> data;
  std::function<void(std::size_t)> done;
  std::function<bool()> cancelled;
};

struct ObjectInfo {
  std::string key;
  std::uint64_t size = 0;
};

// Counters of one client (all threads).
struct TransferStats {
  std::uint64_t requests = 0;  // HTTP requests sent, retries included
  std::uint64_t retries = 0;
  std::uint64_t bytes_down = 0;
  std::uint64_t bytes_up = 0;
};

// Safe to use from several threads (each call uses its own curl handles).
// Handles are created per call in the calling process, so a client copied into
// a forked child works there (spec/format.md §8.5.4).
class S3Client {
public:
  explicit S3Client(S3Config config);
  ~S3Client();
  S3Client(const S3Client&) = delete;
  S3Client& operator=(const S3Client&) = delete;

  const S3Config& config() const noexcept;

  // The whole object; io_error "not found" (404) and every other failure.
  std::vector<std::uint8_t> get(const std::string& bucket, const std::string& key) const;
  // Ranged GETs of `ranges`, up to max_in_flight at once; each range's bytes go
  // to sink(range index, offset within the object, bytes), possibly in several
  // pieces, from the calling thread. A range is complete or the call throws.
  using RangeSink = std::function<void(std::size_t, std::uint64_t, std::span<const std::uint8_t>)>;
  void get_ranges(const std::string& bucket, const std::string& key, std::span<const ByteRange> ranges,
                  const RangeSink& sink) const;
  // Ranged GETs of several objects of one bucket on one multi handle, up to
  // max_in_flight at once, started in the order given (the order the data is
  // needed: spec/format.md §8.5.1). A request is complete or the call throws.
  void get_many(const std::string& bucket, std::span<const RangeRequest> requests, const RangeCallbacks& cb) const;
  std::vector<ObjectInfo> list(const std::string& bucket, const std::string& prefix) const;

  // PUT of one object. if_none_match: "If-None-Match: *" (fails with io_error
  // "already exists" when the key exists: the store refused the overwrite).
  void put(const std::string& bucket, const std::string& key, std::span<const std::uint8_t> bytes,
           bool if_none_match = false) const;
  // DELETE of one object (S3 answers 204 whether or not it existed).
  void remove(const std::string& bucket, const std::string& key) const;
  // Uploads a local file: a multipart upload of config().part_size parts (the object is
  // visible only once complete; aborted on failure), one PUT when smaller.
  void upload_file(const std::string& bucket, const std::string& key, const std::filesystem::path& file) const;

  TransferStats stats() const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The client for the current environment's configuration (s3_config_from_env,
// read on every call): one per distinct configuration in this process, made on
// first use, and afresh in a forked child (the parent's are never touched).
std::shared_ptr<S3Client> shared_s3_client(const std::string& endpoint_override = {});

// ---- the local cache of remote shards (spec/format.md §8.5.3) -------------------

struct CacheOptions {
  std::filesystem::path dir;   // empty: $L3_CACHE_DIR, else $XDG_CACHE_HOME/l3/shards, else ~/.cache/l3/shards
  std::uint64_t max_bytes = 0; // 0: never evict; else evict least recently used files beyond this
};
CacheOptions cache_options_from_env();  // L3_CACHE_DIR, L3_CACHE_MAX_BYTES

struct CacheSummary {
  std::filesystem::path dir;
  std::uint64_t files = 0, bytes = 0, temporaries = 0;
};

// Files named <xxh3 16 hex>-<size>.l3s: the content's hash is the key, so a
// changed shard (new hash in the manifest) is a different file, and a cached
// file is checked against its name's hash before use. Written as a temporary
// file then renamed; several processes may fill and read it at once (no
// locks, no shared memory: a rename is atomic, and an evicted file stays
// readable by a process that has it open).
class ShardCache {
public:
  explicit ShardCache(CacheOptions options);
  const std::filesystem::path& dir() const noexcept;
  std::filesystem::path path_of(std::uint64_t hash, std::uint64_t size) const;

  // The cached file for (hash, size), checked by hash (a file that fails the
  // check is removed); nullopt when absent. A hit marks the file recently used.
  std::optional<std::filesystem::path> lookup(std::uint64_t hash, std::uint64_t size) const;
  // Fills a temporary file with fill(fd) (which must write `size` bytes at
  // their offsets), checks the hash (checksum_mismatch, naming `what`), renames
  // it into place, then evicts beyond max_bytes.
  std::filesystem::path insert(std::uint64_t hash, std::uint64_t size, const std::string& what,
                               const std::function<void(int fd)>& fill) const;

  // Blocks: byte range [offset, offset + length) of the shard (hash, size), in
  // files named <xxh3>-<size>.<offset>-<length>.l3b that hold the bytes and
  // their own XXH3-64 (8 bytes, little-endian) after them, so a block damaged
  // on disk is detected when looked up, removed and fetched again. Same
  // temporary-then-rename discipline and eviction as whole shards.
  std::filesystem::path block_path_of(std::uint64_t hash, std::uint64_t size, ByteRange range) const;
  // The block's file (checked; a hit marks it recently used) or nullopt.
  std::optional<std::filesystem::path> lookup_block(std::uint64_t hash, std::uint64_t size, ByteRange range) const;
  // Writes `bytes` (range.size of them) as that block; returns its path.
  std::filesystem::path insert_block(std::uint64_t hash, std::uint64_t size, ByteRange range,
                                     std::span<const std::uint8_t> bytes) const;

  // A block written as its bytes arrive (a download's pieces, in order), with
  // no copy of the whole block in memory: each piece goes straight to the
  // temporary file and into the running XXH3 of the block (spec/format.md
  // §8.5.3). commit() checks all range.size bytes came, appends the hash and
  // renames the file into place; destroyed uncommitted (a failed or cancelled
  // download), the temporary is removed. The temporary is created on the
  // first piece, so writers waiting for their first bytes hold no descriptor.
  class BlockWriter {
  public:
    BlockWriter(const ShardCache& cache, std::uint64_t hash, std::uint64_t size, ByteRange range);
    ~BlockWriter();
    BlockWriter(BlockWriter&&) noexcept;
    BlockWriter& operator=(BlockWriter&&) = delete;
    BlockWriter(const BlockWriter&) = delete;
    BlockWriter& operator=(const BlockWriter&) = delete;
    void write(std::span<const std::uint8_t> bytes);  // the next bytes of the range
    std::uint64_t written() const noexcept;
    std::filesystem::path commit();  // the block's path in the cache

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
  };

  CacheSummary summary() const;
  std::uint64_t clear() const;  // removes every cache file (shards and blocks); returns the bytes freed

private:
  // The cache folder (created if missing) and a temporary name beside
  // final_path that no other process or call uses.
  std::filesystem::path unique_temp_for(const std::filesystem::path& final_path) const;
  // Renames temp onto final_path (removing temp if that fails), then evicts.
  std::filesystem::path publish(const std::filesystem::path& temp, const std::filesystem::path& final_path) const;
  void evict() const;
  CacheOptions options_;
};

// XXH3-64 of a whole file (the manifest's shard hash).
std::uint64_t file_xxh3(const std::filesystem::path& file);

}  // namespace l3::storage
