// l3_storage without a server: URLs, AWS-style configuration, the shard cache,
// transport failures (spec/format.md §8.5). tests/s3/ runs against moto.
#include <doctest/doctest.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "l3/common/error.hpp"
#include "l3/storage/storage.hpp"
#include "l3/common/text.hpp"

namespace fs = std::filesystem;
using namespace l3;
using namespace l3::storage;

namespace {

// Sets (or unsets, with nullopt) environment variables for one scope; every
// AWS_* and L3_* variable the configuration reads starts unset.
class EnvScope {
public:
  explicit EnvScope(std::initializer_list<std::pair<const std::string, std::optional<std::string>>> list) {
    std::map<std::string, std::optional<std::string>> vars(list);
    for (const char* name : {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
                             "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE",
                             "AWS_SHARED_CREDENTIALS_FILE", "AWS_NO_SIGN_REQUEST", "L3_S3_ADDRESSING",
                             "L3_S3_VERIFY_TLS", "L3_S3_MAX_ATTEMPTS", "L3_S3_BLOCK_SIZE", "L3_S3_MAX_IN_FLIGHT", "L3_CACHE_DIR", "L3_CACHE_MAX_BYTES", "HOME"})
      vars.try_emplace(name, std::nullopt);
    for (const auto& [name, value] : vars) {
      const char* old = std::getenv(name.c_str());
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
      set(name, value);
    }
  }
  ~EnvScope() {
    for (const auto& [name, value] : saved_) set(name, value);
  }

private:
  static void set(const std::string& name, const std::optional<std::string>& value) {
    if (value) ::setenv(name.c_str(), value->c_str(), 1);
    else ::unsetenv(name.c_str());
  }
  std::map<std::string, std::optional<std::string>> saved_;
};

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("l3-test-storage-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::uint64_t hash_of(const std::string& s) { return XXH3_64bits(s.data(), s.size()); }

// A fill function for ShardCache::insert that writes `s` at offset 0.
std::function<void(int)> writes(const std::string& s) {
  return [s](int fd) { REQUIRE(::pwrite(fd, s.data(), s.size(), 0) == static_cast<ssize_t>(s.size())); };
}

}  // namespace

TEST_CASE("s3 URLs: bucket and prefix") {
  CHECK(is_s3_url("s3://b/x"));
  CHECK_FALSE(is_s3_url("/data/s3://b"));
  CHECK_FALSE(is_s3_url("S3://bkt"));
  S3Url u = parse_s3_url("s3://my-bucket/datasets/train/");
  CHECK(u.bucket == "my-bucket");
  CHECK(u.prefix == "datasets/train");
  CHECK(u.key("manifest.json") == "datasets/train/manifest.json");
  CHECK(u.url("shard-00000.l3s") == "s3://my-bucket/datasets/train/shard-00000.l3s");
  CHECK(u.url() == "s3://my-bucket/datasets/train");
  S3Url root = parse_s3_url("s3://bkt");
  CHECK(root.prefix.empty());
  CHECK(root.key("manifest.json") == "manifest.json");
  CHECK(root.url("a") == "s3://bkt/a");
  for (const char* bad : {"s3://", "s3://ab/x", "s3://a b/x", "s3://bkt//x", "s3://bkt/a?b", "/local/path"})
    CHECK_THROWS_AS(parse_s3_url(bad), Error);
}

TEST_CASE("configuration: keys, token and region from the environment; secrets never described") {
  EnvScope env({{"AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"}, {"AWS_SECRET_ACCESS_KEY", "s3cr3t-value"},
                {"AWS_SESSION_TOKEN", "t0ken-value"}, {"AWS_DEFAULT_REGION", "eu-west-3"}});
  S3Config c = s3_config_from_env();
  CHECK(c.access_key == "AKIDEXAMPLE");
  CHECK(c.secret_key == "s3cr3t-value");
  CHECK(c.session_token == "t0ken-value");
  CHECK(c.region == "eu-west-3");
  CHECK_FALSE(c.anonymous);
  CHECK(c.verify_tls);
  CHECK(c.addressing == Addressing::virtual_host);
  CHECK(c.endpoint_or_default() == "https://s3.eu-west-3.amazonaws.com");
  const std::string d = c.describe();
  CHECK(d.find("AKIDEXAMPLE") != std::string::npos);
  CHECK(d.find("s3cr3t") == std::string::npos);
  CHECK(d.find("t0ken") == std::string::npos);
}

TEST_CASE("configuration: AWS_REGION wins; an endpoint means path-style unless L3_S3_ADDRESSING says otherwise") {
  {
    EnvScope env({{"AWS_REGION", "ap-south-1"}, {"AWS_DEFAULT_REGION", "eu-west-3"},
                  {"AWS_ENDPOINT_URL", "http://127.0.0.1:9000/"}});
    S3Config c = s3_config_from_env();
    CHECK(c.region == "ap-south-1");
    CHECK(c.endpoint == "http://127.0.0.1:9000");
    CHECK(c.addressing == Addressing::path);
    CHECK(c.anonymous);  // no credentials anywhere
    CHECK(s3_config_from_env("https://storage.googleapis.com").endpoint == "https://storage.googleapis.com");
  }
  {
    EnvScope env({{"AWS_ENDPOINT_URL", "https://minio.example:9000"}, {"AWS_ENDPOINT_URL_S3", "https://s3.example"},
                  {"L3_S3_ADDRESSING", "virtual"}, {"L3_S3_VERIFY_TLS", "0"}, {"L3_S3_MAX_ATTEMPTS", "3"}});
    S3Config c = s3_config_from_env();
    CHECK(c.max_attempts == 3);
    CHECK(c.endpoint == "https://s3.example");
    CHECK(c.addressing == Addressing::virtual_host);
    CHECK_FALSE(c.verify_tls);
  }
  {
    EnvScope env({{"AWS_ENDPOINT_URL", "ftp://x"}});
    CHECK_THROWS_AS(s3_config_from_env(), Error);
  }
  {
    EnvScope env({{"L3_S3_ADDRESSING", "sideways"}});
    CHECK_THROWS_AS(s3_config_from_env(), Error);
  }
  {
    EnvScope env({{"L3_S3_MAX_ATTEMPTS", "0"}});
    CHECK_THROWS_AS(s3_config_from_env(), Error);
  }
  {
    EnvScope env({{"AWS_ACCESS_KEY_ID", "AKID"}, {"AWS_SECRET_ACCESS_KEY", "x"}, {"AWS_NO_SIGN_REQUEST", "true"}});
    CHECK(s3_config_from_env().anonymous);
  }
}

TEST_CASE("configuration: profiles of the shared credentials file") {
  const fs::path dir = temp_dir("profile");
  std::ofstream(dir / "credentials") << "[default]\naws_access_key_id = DEFAULTKEY\naws_secret_access_key = dsecret\n"
                                        "\n# comment\n[work]\naws_access_key_id=WORKKEY\n"
                                        "aws_secret_access_key = wsecret\naws_session_token = wtoken\nregion = us-west-2\n";
  {
    EnvScope env({{"AWS_SHARED_CREDENTIALS_FILE", (dir / "credentials").string()}});
    S3Config c = s3_config_from_env();
    CHECK(c.access_key == "DEFAULTKEY");
    CHECK(c.secret_key == "dsecret");
    CHECK(c.region == "us-east-1");
  }
  {
    EnvScope env({{"AWS_SHARED_CREDENTIALS_FILE", (dir / "credentials").string()}, {"AWS_PROFILE", "work"}});
    S3Config c = s3_config_from_env();
    CHECK(c.access_key == "WORKKEY");
    CHECK(c.session_token == "wtoken");
    CHECK(c.region == "us-west-2");
  }
  {  // the environment's keys win over the file
    EnvScope env({{"AWS_SHARED_CREDENTIALS_FILE", (dir / "credentials").string()},
                  {"AWS_ACCESS_KEY_ID", "ENVKEY"}, {"AWS_SECRET_ACCESS_KEY", "esecret"}});
    CHECK(s3_config_from_env().access_key == "ENVKEY");
  }
  {  // ~/.aws/credentials by default
    fs::create_directories(dir / ".aws");
    fs::copy_file(dir / "credentials", dir / ".aws" / "credentials");
    EnvScope env({{"HOME", dir.string()}, {"AWS_PROFILE", "work"}});
    CHECK(s3_config_from_env().access_key == "WORKKEY");
  }
  {
    EnvScope env({{"AWS_SHARED_CREDENTIALS_FILE", (dir / "credentials").string()}, {"AWS_PROFILE", "nope"}});
    CHECK_THROWS_AS(s3_config_from_env(), Error);
  }
  fs::remove_all(dir);
}

TEST_CASE("object URLs: AWS virtual-host, path-style endpoints, GCS's S3-compatible endpoint") {
  {
    EnvScope env({{"AWS_REGION", "eu-central-1"}});
    S3Config c = s3_config_from_env();
    CHECK(object_url(c, "my-bkt", "a b/c+d.l3s") == "https://my-bkt.s3.eu-central-1.amazonaws.com/a%20b/c%2Bd.l3s");
  }
  {
    EnvScope env({{"AWS_ENDPOINT_URL", "http://127.0.0.1:9000"}});
    CHECK(object_url(s3_config_from_env(), "bkt", "p/manifest.json", "list-type=2") ==
          "http://127.0.0.1:9000/bkt/p/manifest.json?list-type=2");
  }
  {  // Google Cloud Storage: HMAC key as AWS keys, region auto (spec/format.md §8.5.2)
    EnvScope env({{"AWS_ENDPOINT_URL", "https://storage.googleapis.com"}, {"AWS_REGION", "auto"},
                  {"AWS_ACCESS_KEY_ID", "GOOG1EXAMPLE"}, {"AWS_SECRET_ACCESS_KEY", "hmac-secret"}});
    S3Config c = s3_config_from_env();
    const S3Url u = parse_s3_url("s3://gcs-bucket/imagenet/train");
    CHECK(object_url(c, u.bucket, u.key("manifest.json")) ==
          "https://storage.googleapis.com/gcs-bucket/imagenet/train/manifest.json");
    CHECK(c.region == "auto");
    CHECK(c.verify_tls);
    CHECK_FALSE(c.anonymous);
  }
}

TEST_CASE("shard cache: keyed by hash, temporary then rename, damaged copies dropped") {
  const fs::path dir = temp_dir("cache");
  ShardCache cache({dir, 0});
  const std::string a = "shard bytes A", b = "other shard bytes";
  CHECK_FALSE(cache.lookup(hash_of(a), a.size()));
  const fs::path pa = cache.insert(hash_of(a), a.size(), "s3://bkt/a", writes(a));
  CHECK(pa == cache.path_of(hash_of(a), a.size()));
  CHECK(cache.lookup(hash_of(a), a.size()) == pa);
  // Bytes that are not the manifest's hash: refused, nothing left behind.
  try {
    cache.insert(hash_of(b), b.size(), "s3://bkt/b", writes(std::string(b.size(), 'x')));
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == errc::checksum_mismatch);
    CHECK(std::string(e.what()).find("s3://bkt/b") != std::string::npos);
  }
  CHECK(cache.summary().files == 1);
  CHECK(cache.summary().temporaries == 0);
  // A cached copy changed on disk: detected by its hash, dropped, fetched again.
  std::ofstream(pa, std::ios::binary | std::ios::in | std::ios::out) << "SHARD";
  CHECK_FALSE(cache.lookup(hash_of(a), a.size()));
  CHECK_FALSE(fs::exists(pa));
  cache.insert(hash_of(a), a.size(), "s3://bkt/a", writes(a));
  std::ofstream(dir / "unrelated.txt") << "keep me";
  CacheSummary s = cache.summary();
  CHECK(s.files == 1);
  CHECK(s.bytes == a.size());
  CHECK(cache.clear() == a.size());
  CHECK(cache.summary().files == 0);
  CHECK(fs::exists(dir / "unrelated.txt"));  // clear removes cache files only
  fs::remove_all(dir);
}

TEST_CASE("shard cache: never evicts by default; LRU beyond max_bytes") {
  const fs::path dir = temp_dir("lru");
  std::vector<std::string> shards;
  for (int i = 0; i < 4; ++i) shards.push_back(std::string(100, static_cast<char>('a' + i)));
  {
    ShardCache keep({dir, 0});
    for (const auto& s : shards) keep.insert(hash_of(s), s.size(), "x", writes(s));
    CHECK(keep.summary().files == 4);
    keep.clear();
  }
  ShardCache lru({dir, 250});
  lru.insert(hash_of(shards[0]), 100, "x", writes(shards[0]));
  lru.insert(hash_of(shards[1]), 100, "x", writes(shards[1]));
  // Make shard 0 older than shard 1, then use it: shard 1 is now the least recent.
  const auto old = fs::file_time_type::clock::now() - std::chrono::hours(1);
  fs::last_write_time(lru.path_of(hash_of(shards[0]), 100), old);
  fs::last_write_time(lru.path_of(hash_of(shards[1]), 100), old + std::chrono::minutes(1));
  CHECK(lru.lookup(hash_of(shards[0]), 100));
  lru.insert(hash_of(shards[2]), 100, "x", writes(shards[2]));
  CHECK(lru.summary().files == 2);
  CHECK(lru.lookup(hash_of(shards[0]), 100));
  CHECK_FALSE(lru.lookup(hash_of(shards[1]), 100));
  CHECK(lru.lookup(hash_of(shards[2]), 100));
  fs::remove_all(dir);
}

TEST_CASE("cache options from the environment") {
  EnvScope env({{"L3_CACHE_DIR", "/tmp/l3-cache-x"}, {"L3_CACHE_MAX_BYTES", "1000"}});
  CacheOptions o = cache_options_from_env();
  CHECK(o.dir == "/tmp/l3-cache-x");
  CHECK(o.max_bytes == 1000);
  EnvScope bad({{"L3_CACHE_MAX_BYTES", "lots"}});
  CHECK_THROWS_AS(cache_options_from_env(), Error);
  EnvScope xdg({{"XDG_CACHE_HOME", "/xdg"}});
  CHECK(cache_options_from_env().dir == "/xdg/l3/shards");
}

TEST_CASE("client: a server that is not there is an io_error naming the object, after the configured attempts") {
  // A port with nothing listening: bind, read the port, close.
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  socklen_t len = sizeof addr;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(s);
  S3Config c;
  c.endpoint = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  c.addressing = Addressing::path;
  c.access_key = "AKID";
  c.secret_key = "never-printed-secret";
  c.max_attempts = 3;
  c.backoff_ms = 1;
  S3Client client(c);
  try {
    client.get("bucket-x", "data/manifest.json");
    FAIL("no error");
  } catch (const Error& e) {
    const std::string what = e.what();
    CHECK(e.code() == errc::io_error);
    CHECK(what.find("s3://bucket-x/data/manifest.json") != std::string::npos);
    CHECK(what.find("after 3 attempts") != std::string::npos);
    CHECK(what.find("never-printed-secret") == std::string::npos);
  }
  CHECK(client.stats().requests == 3);
  CHECK(client.stats().retries == 2);
}

TEST_CASE("shard cache: blocks keyed by shard hash and range, self-checked, counted and cleared") {
  const fs::path dir = temp_dir("blocks");
  ShardCache cache({dir, 0});
  const std::string shard = "0123456789abcdefghij";
  const std::uint64_t h = hash_of(shard);
  const ByteRange first{0, 8}, second{8, 12};
  const auto bytes = [&](ByteRange r) {
    return std::span(reinterpret_cast<const std::uint8_t*>(shard.data()) + r.offset, static_cast<std::size_t>(r.size));
  };
  CHECK_FALSE(cache.lookup_block(h, shard.size(), first));
  const fs::path p = cache.insert_block(h, shard.size(), first, bytes(first));
  CHECK(p == cache.block_path_of(h, shard.size(), first));
  CHECK(p.filename().string() == hex16(h) + "-20.0-8.l3b");
  CHECK(fs::file_size(p) == 8 + 8);  // the bytes, then their XXH3-64
  CHECK(cache.lookup_block(h, shard.size(), first) == p);
  CHECK_FALSE(cache.lookup_block(h, shard.size(), second));  // another range is another block
  CHECK_FALSE(cache.lookup_block(h + 1, shard.size(), first));  // another shard's hash too
  cache.insert_block(h, shard.size(), second, bytes(second));
  CHECK_THROWS_AS(cache.insert_block(h, shard.size(), second, bytes(first)), Error);  // size differs from range
  CacheSummary s = cache.summary();
  CHECK(s.files == 2);
  CHECK(s.bytes == 8 + 8 + 12 + 8);
  CHECK(s.temporaries == 0);
  // A block changed on disk: its own hash catches it; dropped, fetched again.
  std::ofstream(p, std::ios::binary | std::ios::in | std::ios::out) << "X";
  CHECK_FALSE(cache.lookup_block(h, shard.size(), first));
  CHECK_FALSE(fs::exists(p));
  cache.insert_block(h, shard.size(), first, bytes(first));
  // A block cut short (a crash cannot leave one: rename; a disk may).
  fs::resize_file(p, 10);
  CHECK_FALSE(cache.lookup_block(h, shard.size(), first));
  CHECK(cache.clear() == 12 + 8);
  CHECK(cache.summary().files == 0);
  fs::remove_all(dir);
}

TEST_CASE("shard cache: a block written piece by piece as it arrives (BlockWriter)") {
  const fs::path dir = temp_dir("block-writer");
  ShardCache cache({dir, 0});
  // Larger than the writer's 1 MiB write run, so pieces cross runs.
  std::vector<std::uint8_t> shard((3u << 20) + 12345);
  for (std::size_t i = 0; i < shard.size(); ++i) shard[i] = static_cast<std::uint8_t>(i * 2654435761u >> 13);
  const std::uint64_t h = 0x1234;
  const ByteRange range{100, shard.size() - 100};
  const auto piece = [&](std::uint64_t at, std::uint64_t n) {
    return std::span<const std::uint8_t>(shard.data() + at, static_cast<std::size_t>(n));
  };
  const auto temporaries = [&] { return cache.summary().temporaries; };
  {
    ShardCache::BlockWriter w(cache, h, shard.size(), range);
    CHECK(temporaries() == 0);  // nothing is created before the first bytes
    std::uint64_t at = range.offset;
    for (std::uint64_t n : {1ull, 16384ull, 700000ull, 1048576ull, 3ull}) {
      w.write(piece(at, n));
      at += n;
    }
    CHECK(w.written() == at - range.offset);
    CHECK(temporaries() == 1);
    CHECK_THROWS_AS(w.commit(), Error);  // not all bytes yet
    w.write(piece(at, range.offset + range.size - at));
    CHECK_THROWS_AS(w.write(piece(0, 1)), Error);  // past the range
    const fs::path p = w.commit();
    CHECK(p == cache.block_path_of(h, shard.size(), range));
    CHECK(temporaries() == 0);
  }
  // The same file insert_block writes from the whole block at once: the
  // bytes, then their XXH3-64 (found intact by lookup_block).
  const auto read = [](const fs::path& f) {
    std::ifstream in(f, std::ios::binary);
    return std::vector<char>(std::istreambuf_iterator<char>(in), {});
  };
  const auto streamed = read(cache.block_path_of(h, shard.size(), range));
  CHECK(streamed.size() == range.size + 8);
  CHECK(cache.lookup_block(h, shard.size(), range));
  const ShardCache other({dir / "other", 0});
  CHECK(read(other.insert_block(h, shard.size(), range, piece(range.offset, range.size))) == streamed);
  // A download that fails or is cancelled part way leaves nothing behind.
  const ByteRange second{0, 4096};
  {
    ShardCache::BlockWriter w(cache, h, shard.size(), second);
    w.write(piece(0, 100));
    CHECK(temporaries() == 1);
  }
  CHECK(temporaries() == 0);
  CHECK_FALSE(cache.lookup_block(h, shard.size(), second));
  fs::remove_all(dir);
}

TEST_CASE("L3_S3_MAX_IN_FLIGHT: ranged GETs in flight at once, validated, part of the shared client's key") {
  {
    EnvScope env({});
    CHECK(s3_config_from_env().max_in_flight == 16);
  }
  std::shared_ptr<S3Client> four;
  {
    EnvScope env({{"L3_S3_MAX_IN_FLIGHT", "4"}});
    CHECK(s3_config_from_env().max_in_flight == 4);
    four = shared_s3_client();
    CHECK(four->config().max_in_flight == 4);
  }
  {
    EnvScope env({{"L3_S3_MAX_IN_FLIGHT", "1"}});
    CHECK(shared_s3_client()->config().max_in_flight == 1);  // a changed variable: another client
    CHECK(shared_s3_client() != four);
  }
  for (const char* bad : {"0", "257", "abc", "4x", "-1"}) {
    EnvScope env({{"L3_S3_MAX_IN_FLIGHT", bad}});
    CHECK_THROWS_AS(s3_config_from_env(), Error);
  }
}

TEST_CASE("L3_S3_BLOCK_SIZE: the block size of remote reads, validated") {
  {
    EnvScope env({});
    CHECK(s3_config_from_env().block_size == std::uint64_t{8} << 20);
  }
  {
    EnvScope env({{"L3_S3_BLOCK_SIZE", "65536"}});
    CHECK(s3_config_from_env().block_size == 65536);
  }
  for (const char* bad : {"100", "abc", "2147483648", "64k"}) {
    EnvScope env({{"L3_S3_BLOCK_SIZE", bad}});
    CHECK_THROWS_AS(s3_config_from_env(), Error);
  }
}
