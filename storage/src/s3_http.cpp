// The HTTP side of S3Client (s3_http.hpp).
#include "s3_http.hpp"

#include <openssl/evp.h>

#include <cctype>
#include <cstdlib>
#include <mutex>
#include <utility>

#include "l3/common/error.hpp"

namespace l3::storage::http {


void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

namespace {

std::string hex(const unsigned char* p, std::size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (std::size_t i = 0; i < n; ++i) {
    s += digits[p[i] >> 4];
    s += digits[p[i] & 15];
  }
  return s;
}

}  // namespace

std::string sha256_hex(std::span<const std::uint8_t> bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), md, &n, EVP_sha256(), nullptr) != 1)
    throw_error(errc::io_error, "SHA-256 of a request body failed");
  return hex(md, n);
}

std::string uri_encode(std::string_view s, bool keep_slash) {
  static const char* digits = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                            c == '-' || c == '_' || c == '.' || c == '~';
    if (unreserved || (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += digits[c >> 4];
      out += digits[c & 15];
    }
  }
  return out;
}

std::string xml_value(std::string_view xml, std::string_view tag) {
  // Appended piece by piece: GCC 12's -Wrestrict misfires on "<" + std::string(tag).
  std::string open = "<", close = "</";
  open.append(tag).append(">");
  close.append(tag).append(">");
  const auto b = xml.find(open);
  if (b == std::string_view::npos) return {};
  const auto e = xml.find(close, b + open.size());
  if (e == std::string_view::npos) return {};
  std::string raw(xml.substr(b + open.size(), e - b - open.size())), out;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    static const std::pair<std::string_view, char> entities[] = {
        {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
    bool replaced = false;
    for (const auto& [name, ch] : entities) {
      if (std::string_view(raw).substr(i, name.size()) == name) {
        out += ch;
        i += name.size() - 1;
        replaced = true;
        break;
      }
    }
    if (!replaced) out += raw[i];
  }
  return out;
}

bool retryable_status(long status, std::string_view code) {
  return status >= 500 || status == 429 || code == "SlowDown" || code == "Throttling" ||
         code == "ThrottlingException" || code == "RequestTimeout" || code == "RequestTimeTooSkewed";
}

bool retryable_transport(CURLcode rc) {
  switch (rc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR: return true;
    default: return false;
  }
}

std::string where(const Request& r) {
  std::string w = "s3://" + r.bucket;
  if (!r.key.empty()) w += "/" + r.key;
  return w;
}

// "HTTP 403 AccessDenied: message", from an S3 error body.
std::string http_problem(const Request& r) {
  std::string_view body(reinterpret_cast<const char*>(r.response.data()), r.response.size());
  std::string code = xml_value(body, "Code"), message = xml_value(body, "Message");
  std::string p = "HTTP " + std::to_string(r.status);
  if (!code.empty()) p += " " + code;
  if (!message.empty()) p += ": " + message;
  if (r.status == 403) p += " (check the access key, secret and region for this bucket)";
  if (r.status == 404 && code.empty()) p += " not found";
  return p;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto& r = *static_cast<Request*>(user);
  const std::size_t bytes = size * n;
  // A ranged GET must answer 206: a 200 carries the object from byte 0 (the
  // server ignored Range) and is refused in judge().
  const bool ok = r.range ? r.status == 206 : r.status >= 200 && r.status < 300;
  if (ok && r.sink) {
    const std::uint64_t at = r.range->offset + r.received;
    if (r.received + bytes > r.range->size) return 0;  // more than asked for: abort the transfer
    try {  // no exception may cross libcurl's C frames: kept, rethrown by judge()
      (*r.sink)(r.sink_index, at, {reinterpret_cast<const std::uint8_t*>(data), bytes});
    } catch (...) {
      r.sink_error = std::current_exception();
      return 0;
    }
  } else if (ok || r.response.size() < (64u << 10)) {  // error bodies: keep the start
    r.response.insert(r.response.end(), data, data + bytes);
  }
  if (ok) r.received += bytes;
  return bytes;
}

namespace {
std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto& r = *static_cast<Request*>(user);
  std::string line(data, size * n);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  if (line.starts_with("HTTP/")) {  // a new response (after a 100 Continue too)
    const auto sp = line.find(' ');
    r.status = sp == std::string::npos ? 0 : std::strtol(line.c_str() + sp + 1, nullptr, 10);
    return size * n;
  }
  const auto colon = line.find(':');
  if (colon == std::string::npos) return size * n;
  const std::string name = lower(line.substr(0, colon));
  std::string value = line.substr(colon + 1);
  value.erase(0, value.find_first_not_of(' '));
  if (name == "etag") r.etag = value;
  return size * n;
}

}  // namespace l3::storage::http
