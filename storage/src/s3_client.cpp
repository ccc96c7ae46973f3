// S3Client: libcurl requests signed by CURLOPT_AWS_SIGV4 (spec/format.md §8.5.1).
//
// Every request carries x-amz-content-sha256 (S3 requires it with SigV4; curl
// 7.88 signs the body's SHA-256 but does not send the header). Query strings
// are written already sorted and encoded, every parameter with '=' (curl 7.88
// signs the query as written). Failures that may pass (5xx, 429, SlowDown,
// Throttling, RequestTimeout, transport errors, a body shorter than announced)
// are retried with exponential backoff and jitter; a ranged GET resumes where
// the cut body ended. Other failures throw at once with the store's error code.
#include <curl/curl.h>
#include <openssl/evp.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <mutex>
#include <random>
#include <thread>

#include "l3/common/error.hpp"
#include "l3/storage/storage.hpp"
#include "s3_http.hpp"

namespace l3::storage {

// The HTTP pieces (s3_http.hpp).
using http::Clock;
using http::Request;
using http::where;
using http::http_problem;
using http::on_body;
using http::on_header;
using http::global_init;
using http::sha256_hex;
using http::uri_encode;
using http::xml_value;
using http::retryable_status;
using http::retryable_transport;

// libcurl's receive buffer (its default: 16 KiB). A block streams to its
// cache file in the pieces libcurl hands over: large pieces make few recv
// and write calls, and let the page cache take the block in large folios
// (spec/format.md §8.5.1).
constexpr long kReceiveBuffer = 1L << 20;

struct S3Client::Impl {
  S3Config config;
  mutable std::atomic<std::uint64_t> requests{0}, retries{0}, bytes_down{0}, bytes_up{0};

  std::string url_of(const Request& r) const { return object_url(config, r.bucket, r.key, r.query); }

  // A configured easy handle for r (owned by the caller, with its header list).
  CURL* make_handle(Request& r, curl_slist*& headers) const {
    CURL* h = curl_easy_init();
    if (!h) throw_error(errc::out_of_memory, "curl_easy_init failed");
    r.status = 0;
    r.etag.clear();
    r.curl_error[0] = 0;
    const std::string url = url_of(r);
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_BUFFERSIZE, kReceiveBuffer);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, r.curl_error);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, static_cast<long>(config.connect_timeout_s));
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1024L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, static_cast<long>(config.low_speed_timeout_s));
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, config.verify_tls ? 1L : 0L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, config.verify_tls ? 2L : 0L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &r);
    headers = nullptr;
    auto add = [&](const std::string& line) { headers = curl_slist_append(headers, line.c_str()); };
    for (const std::string& line : r.headers) add(line);
    if (r.range) {
      add("Range: bytes=" + std::to_string(r.range->offset + r.received) + "-" +
          std::to_string(r.range->offset + r.range->size - 1));
    }
    if (r.method == "GET") {
      curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    } else {
      curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, r.method.c_str());
      if (r.method != "DELETE") {
        // The body as POSTFIELDS: curl signs its SHA-256 (CURLOPT_AWS_SIGV4).
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(r.body.size()));
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, r.body.empty() ? "" : reinterpret_cast<const char*>(r.body.data()));
        add("Content-Type: application/octet-stream");
      }
    }
    add("x-amz-content-sha256: " + sha256_hex(r.body));
    if (!config.anonymous) {
      const std::string sigv4 = "aws:amz:" + config.region + ":s3";
      curl_easy_setopt(h, CURLOPT_AWS_SIGV4, sigv4.c_str());
      curl_easy_setopt(h, CURLOPT_USERNAME, config.access_key.c_str());
      curl_easy_setopt(h, CURLOPT_PASSWORD, config.secret_key.c_str());
      if (!config.session_token.empty()) add("x-amz-security-token: " + config.session_token);
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    requests.fetch_add(1, std::memory_order_relaxed);
    bytes_up.fetch_add(r.body.size(), std::memory_order_relaxed);
    return h;
  }

  std::chrono::milliseconds backoff(unsigned attempt) const {
    static thread_local std::mt19937 rng(std::random_device{}());
    const std::uint64_t base = std::min<std::uint64_t>(std::uint64_t{config.backoff_ms} << std::min(attempt, 16u), 10000);
    std::uniform_int_distribution<std::uint64_t> jitter(base / 2, base);
    return std::chrono::milliseconds(jitter(rng));
  }

  // What a finished transfer means: done, retry, or a failure message.
  enum class Outcome { done, retry, fail };
  Outcome judge(Request& r, CURLcode rc, std::string& problem) const {
    if (r.sink_error) std::rethrow_exception(r.sink_error);
    if (rc != CURLE_OK) {
      problem = std::string(curl_easy_strerror(rc));
      if (r.curl_error[0]) problem += std::string(" (") + r.curl_error + ")";
      return retryable_transport(rc) ? Outcome::retry : Outcome::fail;
    }
    if (r.status < 200 || r.status >= 300) {
      problem = http_problem(r);
      std::string_view body(reinterpret_cast<const char*>(r.response.data()), r.response.size());
      return retryable_status(r.status, xml_value(body, "Code")) ? Outcome::retry : Outcome::fail;
    }
    if (r.range && r.status != 206) {
      problem = "HTTP " + std::to_string(r.status) + " to a ranged GET: the server ignored the Range header";
      return Outcome::fail;
    }
    if (r.range && r.received < r.range->size) {
      problem = "body ended after " + std::to_string(r.received) + " of " + std::to_string(r.range->size) + " bytes";
      return Outcome::retry;
    }
    // A 200 that carries an S3 error (CompleteMultipartUpload may do so).
    if (r.method == "POST" && r.response.size() < 4096) {
      std::string_view body(reinterpret_cast<const char*>(r.response.data()), r.response.size());
      if (body.find("<Error>") != std::string_view::npos) {
        problem = "HTTP 200 with error " + xml_value(body, "Code") + ": " + xml_value(body, "Message");
        return Outcome::retry;  // S3 documents these as InternalError-like: retry the (idempotent) request
      }
    }
    return Outcome::done;
  }

  void reset_for_retry(Request& r) const {
    if (!r.range) r.received = 0;  // a ranged GET resumes; anything else starts over
    r.response.clear();
  }

  // One request to completion (retries included); throws on failure.
  void perform(Request& r) const {
    global_init();
    for (unsigned attempt = 0;; ++attempt) {
      curl_slist* headers = nullptr;
      CURL* h = make_handle(r, headers);
      const CURLcode rc = curl_easy_perform(h);
      curl_easy_cleanup(h);
      curl_slist_free_all(headers);
      bytes_down.fetch_add(r.received, std::memory_order_relaxed);
      std::string problem;
      const Outcome o = judge(r, rc, problem);
      if (o == Outcome::done) return;
      if (o == Outcome::fail || attempt + 1 >= config.max_attempts) fail(r, problem, attempt + 1);
      retries.fetch_add(1, std::memory_order_relaxed);
      std::this_thread::sleep_for(backoff(attempt));
      reset_for_retry(r);
    }
  }

  [[noreturn]] void fail(const Request& r, const std::string& problem, unsigned attempts) const {
    std::string msg = where(r) + ": " + r.method + " failed: " + problem;
    if (attempts > 1) msg += " (after " + std::to_string(attempts) + " attempts)";
    msg += " [endpoint " + config.endpoint_or_default() + "]";
    throw_error(errc::io_error, msg);
  }

  void get_many(const std::string& bucket, std::span<const RangeRequest> wanted, const RangeCallbacks& cb) const;
};

namespace {

struct MultiGuard {
  CURLM* multi = curl_multi_init();
  ~MultiGuard() { curl_multi_cleanup(multi); }
};

// A ranged GET on the multi handle, with its retry state.
struct RangeTransfer {
  Request req;
  CURL* handle = nullptr;
  curl_slist* headers = nullptr;
  unsigned attempt = 0;
  std::uint64_t counted = 0;  // bytes of req.received already added to bytes_down
  Clock::time_point not_before{};
  bool done = false;
};

}  // namespace

void S3Client::Impl::get_many(const std::string& bucket, std::span<const RangeRequest> wanted,
                              const RangeCallbacks& cb) const {
  global_init();
  MultiGuard m;
  if (!m.multi) throw_error(errc::out_of_memory, "curl_multi_init failed");
  std::vector<RangeTransfer> t(wanted.size());
  for (std::size_t i = 0; i < wanted.size(); ++i) {
    t[i].req.bucket = bucket;
    t[i].req.key = wanted[i].key;
    t[i].req.range = wanted[i].range;
    t[i].req.sink = &cb.data;
    t[i].req.sink_index = i;
  }
  auto release = [&](RangeTransfer& x) {
    if (!x.handle) return;
    curl_multi_remove_handle(m.multi, x.handle);
    curl_easy_cleanup(x.handle);
    curl_slist_free_all(x.headers);
    x.handle = nullptr;
    x.headers = nullptr;
  };
  struct Cleanup {  // on an exception or a cancel: every handle leaves the multi before it is freed
    std::vector<RangeTransfer>& t;
    std::function<void(RangeTransfer&)> release;
    ~Cleanup() {
      for (auto& x : t) release(x);
    }
  } cleanup{t, release};
  std::size_t next = 0, active = 0, finished = 0;
  std::vector<std::size_t> waiting;  // transfers to retry
  while (finished < t.size()) {
    if (cb.cancelled && cb.cancelled()) return;
    const auto now = Clock::now();
    auto start = [&](std::size_t i) {
      t[i].handle = make_handle(t[i].req, t[i].headers);
      curl_easy_setopt(t[i].handle, CURLOPT_PRIVATE, reinterpret_cast<char*>(&t[i]));
      curl_multi_add_handle(m.multi, t[i].handle);
      ++active;
    };
    for (auto it = waiting.begin(); it != waiting.end() && active < config.max_in_flight;) {
      if (t[*it].not_before <= now) {
        start(*it);
        it = waiting.erase(it);
      } else {
        ++it;
      }
    }
    while (next < t.size() && active < config.max_in_flight) start(next++);
    int running = 0;
    curl_multi_perform(m.multi, &running);
    int queued = 0;
    while (CURLMsg* msg = curl_multi_info_read(m.multi, &queued)) {
      if (msg->msg != CURLMSG_DONE) continue;
      char* priv = nullptr;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv);
      auto& x = *reinterpret_cast<RangeTransfer*>(priv);
      const CURLcode rc = msg->data.result;
      release(x);
      --active;
      bytes_down.fetch_add(x.req.received - x.counted, std::memory_order_relaxed);
      x.counted = x.req.received;
      std::string problem;
      const Outcome o = judge(x.req, rc, problem);
      if (o == Outcome::done) {
        x.done = true;
        ++finished;
        if (cb.done) cb.done(x.req.sink_index);
        continue;
      }
      if (o == Outcome::fail || x.attempt + 1 >= config.max_attempts) fail(x.req, problem, x.attempt + 1);
      retries.fetch_add(1, std::memory_order_relaxed);
      x.not_before = Clock::now() + backoff(x.attempt++);
      reset_for_retry(x.req);
      waiting.push_back(static_cast<std::size_t>(&x - t.data()));
    }
    if (finished < t.size()) curl_multi_poll(m.multi, nullptr, 0, active ? 100 : 10, nullptr);
  }
}

std::string object_url(const S3Config& config, const std::string& bucket, const std::string& key,
                       const std::string& query) {
  const std::string endpoint = config.endpoint_or_default();
  const std::string path = uri_encode(key, true);
  std::string url;
  if (config.addressing == Addressing::path) {
    url = endpoint + "/" + bucket + "/" + path;
  } else {
    const auto scheme_end = endpoint.find("://") + 3;
    url = endpoint.substr(0, scheme_end) + bucket + "." + endpoint.substr(scheme_end) + "/" + path;
  }
  if (!query.empty()) url += "?" + query;
  return url;
}

S3Client::S3Client(S3Config config) : impl_(std::make_unique<Impl>()) { impl_->config = std::move(config); }
S3Client::~S3Client() = default;
const S3Config& S3Client::config() const noexcept { return impl_->config; }

std::vector<std::uint8_t> S3Client::get(const std::string& bucket, const std::string& key) const {
  Request r;
  r.bucket = bucket;
  r.key = key;
  impl_->perform(r);
  return std::move(r.response);
}

void S3Client::get_ranges(const std::string& bucket, const std::string& key, std::span<const ByteRange> ranges,
                          const RangeSink& sink) const {
  std::vector<RangeRequest> requests;
  requests.reserve(ranges.size());
  for (const ByteRange& r : ranges) requests.push_back({key, r});
  impl_->get_many(bucket, requests, RangeCallbacks{sink, {}, {}});
}

void S3Client::get_many(const std::string& bucket, std::span<const RangeRequest> requests,
                        const RangeCallbacks& cb) const {
  impl_->get_many(bucket, requests, cb);
}

std::vector<ObjectInfo> S3Client::list(const std::string& bucket, const std::string& prefix) const {
  std::vector<ObjectInfo> out;
  std::string token;
  for (;;) {
    Request r;
    r.bucket = bucket;
    // Sorted by parameter name (curl 7.88 signs the query as written).
    if (!token.empty()) r.query = "continuation-token=" + uri_encode(token, false) + "&";
    r.query += "list-type=2&prefix=" + uri_encode(prefix, false);
    impl_->perform(r);
    std::string_view xml(reinterpret_cast<const char*>(r.response.data()), r.response.size());
    std::size_t at = 0;
    while ((at = xml.find("<Contents>", at)) != std::string_view::npos) {
      const auto close = xml.find("</Contents>", at);
      if (close == std::string_view::npos) break;
      std::string_view item = xml.substr(at, close - at);
      out.push_back({xml_value(item, "Key"), std::strtoull(xml_value(item, "Size").c_str(), nullptr, 10)});
      at = close;
    }
    if (xml_value(xml, "IsTruncated") != "true") break;
    token = xml_value(xml, "NextContinuationToken");
    if (token.empty()) break;
  }
  return out;
}

void S3Client::put(const std::string& bucket, const std::string& key, std::span<const std::uint8_t> bytes,
                   bool if_none_match) const {
  Request r;
  r.method = "PUT";
  r.bucket = bucket;
  r.key = key;
  r.body = bytes;
  if (if_none_match) r.headers.push_back("If-None-Match: *");
  try {
    impl_->perform(r);
  } catch (const Error& e) {
    if (if_none_match && r.status == 412)
      throw_error(errc::io_error, where(r) + " already exists (If-None-Match: * refused the overwrite)");
    throw;
  }
}

void S3Client::remove(const std::string& bucket, const std::string& key) const {
  Request r;
  r.method = "DELETE";
  r.bucket = bucket;
  r.key = key;
  impl_->perform(r);
}

namespace {

std::vector<std::uint8_t> read_part(int fd, std::uint64_t offset, std::uint64_t size, const std::filesystem::path& file) {
  std::vector<std::uint8_t> buf(static_cast<std::size_t>(size));
  std::size_t got = 0;
  while (got < buf.size()) {
    const ssize_t n = ::pread(fd, buf.data() + got, buf.size() - got, static_cast<off_t>(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw_error(errc::io_error, "cannot read '" + file.string() + "': " + std::strerror(errno));
    got += static_cast<std::size_t>(n);
  }
  return buf;
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

void S3Client::upload_file(const std::string& bucket, const std::string& key, const std::filesystem::path& file) const {
  Fd f;
  f.fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) throw_error(errc::io_error, "cannot open '" + file.string() + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) throw_error(errc::io_error, "cannot stat '" + file.string() + "'");
  const auto size = static_cast<std::uint64_t>(st.st_size);
  const std::uint64_t part_size = std::max<std::uint64_t>(config().part_size, std::uint64_t{5} << 20);  // S3's minimum
  if (size <= part_size) {
    put(bucket, key, read_part(f.fd, 0, size, file));
    return;
  }
  Request init;
  init.method = "POST";
  init.bucket = bucket;
  init.key = key;
  init.query = "uploads=";
  impl_->perform(init);
  const std::string upload_id =
      xml_value({reinterpret_cast<const char*>(init.response.data()), init.response.size()}, "UploadId");
  if (upload_id.empty()) throw_error(errc::io_error, where(init) + ": multipart upload started without an UploadId");
  const std::string id_query = "uploadId=" + uri_encode(upload_id, false);
  try {
    std::string complete = "<CompleteMultipartUpload>";
    unsigned part = 1;
    for (std::uint64_t at = 0; at < size; at += part_size, ++part) {
      std::vector<std::uint8_t> bytes = read_part(f.fd, at, std::min(part_size, size - at), file);
      Request p;
      p.method = "PUT";
      p.bucket = bucket;
      p.key = key;
      p.query = "partNumber=" + std::to_string(part) + "&" + id_query;
      p.body = bytes;
      impl_->perform(p);
      complete += "<Part><PartNumber>" + std::to_string(part) + "</PartNumber><ETag>" + p.etag + "</ETag></Part>";
    }
    complete += "</CompleteMultipartUpload>";
    Request c;
    c.method = "POST";
    c.bucket = bucket;
    c.key = key;
    c.query = id_query;
    c.body = {reinterpret_cast<const std::uint8_t*>(complete.data()), complete.size()};
    impl_->perform(c);
  } catch (...) {
    Request abort;
    abort.method = "DELETE";
    abort.bucket = bucket;
    abort.key = key;
    abort.query = id_query;
    try {
      impl_->perform(abort);
    } catch (const Error&) {  // the first failure is the one to report
    }
    throw;
  }
}

TransferStats S3Client::stats() const {
  return {impl_->requests.load(), impl_->retries.load(), impl_->bytes_down.load(), impl_->bytes_up.load()};
}

std::shared_ptr<S3Client> shared_s3_client(const std::string& endpoint_override) {
  // Keyed by the whole configuration, read from the environment on each call:
  // a changed variable (new keys, another endpoint) takes effect at the next
  // dataset opened, as with a new boto3 session. The key holds secrets: it
  // stays in this table and is never printed.
  S3Config c = s3_config_from_env(endpoint_override);
  std::string key = c.access_key + '\n' + c.secret_key + '\n' + c.session_token + '\n' + c.region + '\n' +
                    c.endpoint + '\n' + std::to_string(static_cast<int>(c.addressing)) + std::to_string(c.anonymous) +
                    std::to_string(c.verify_tls) + '\n' + std::to_string(c.max_attempts) + '\n' +
                    std::to_string(c.part_size) + '\n' + std::to_string(c.block_size) + '\n' + std::to_string(c.max_in_flight);
  using Table = std::vector<std::pair<std::string, std::shared_ptr<S3Client>>>;
  static std::mutex m;
  static pid_t owner = 0;
  static Table* clients = nullptr;
  std::lock_guard lock(m);
  if (owner != ::getpid()) {  // first use, or a forked child: start afresh (the parent's are left alone)
    clients = new Table();    // never freed: a child must not destroy its parent's clients
    owner = ::getpid();
  }
  for (auto& [k, client] : *clients)
    if (k == key) return client;
  clients->emplace_back(std::move(key), std::make_shared<S3Client>(std::move(c)));
  return clients->back().second;
}

}  // namespace l3::storage
