// The HTTP side of S3Client (s3_client.cpp): one request's state, libcurl's
// callbacks, SigV4's encodings and the store's error replies. Internal to
// l3_storage.
#pragma once

#include <curl/curl.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "l3/storage/storage.hpp"

namespace l3::storage::http {

using Clock = std::chrono::steady_clock;

void global_init();  // curl_global_init, once per process
std::string sha256_hex(std::span<const std::uint8_t> bytes);
// AWS URI encoding: unreserved characters stay, the rest is %XX; '/' stays in paths.
std::string uri_encode(std::string_view s, bool keep_slash);
// The text between <tag> and </tag>, XML entities decoded.
std::string xml_value(std::string_view xml, std::string_view tag);
// Failures that may pass: retried with backoff (spec/format.md §8.5.1).
bool retryable_status(long status, std::string_view code);
bool retryable_transport(CURLcode rc);

// One HTTP request: what to send and what came back.
struct Request {
  std::string method = "GET";
  std::string bucket, key, query;  // query: sorted, encoded, "a=b&c=d"
  std::vector<std::string> headers;
  std::span<const std::uint8_t> body;
  std::optional<ByteRange> range;  // GET bytes [offset, offset + size)

  // Filled by the transfer.
  long status = 0;
  std::vector<std::uint8_t> response;   // body (error bodies are kept here too)
  std::string etag;
  std::uint64_t received = 0;             // body bytes of a 2xx response
  const S3Client::RangeSink* sink = nullptr;
  std::exception_ptr sink_error;  // what the sink threw (the transfer was aborted)
  std::size_t sink_index = 0;
  char curl_error[CURL_ERROR_SIZE] = {};
};

std::string where(const Request& r);         // "s3://bucket/key"
std::string http_problem(const Request& r);  // "HTTP 403 AccessDenied: message", from an S3 error body
// libcurl's write and header callbacks; `user` is the Request.
size_t on_body(char* data, size_t size, size_t n, void* user);
size_t on_header(char* data, size_t size, size_t n, void* user);

}  // namespace l3::storage::http
