// s3:// URLs and the AWS-style configuration (spec/format.md §8.5.1, §8.5.2).
#include <cstdlib>
#include <fstream>

#include "l3/common/error.hpp"
#include "l3/storage/storage.hpp"

namespace l3::storage {
namespace {

constexpr std::string_view kScheme = "s3://";

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

bool env_true(const char* name) {
  const std::string v = env(name);
  return v == "1" || v == "true" || v == "TRUE" || v == "True" || v == "yes";
}

std::string trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t\r");
  return std::string(s.substr(b, e - b + 1));
}

// Bucket names per the S3 rules that matter for URLs: 3..63 of [a-z0-9.-]
// (upper case and '_' too, which some S3-compatible stores accept).
bool valid_bucket(std::string_view b) {
  if (b.size() < 3 || b.size() > 63) return false;
  for (char c : b) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '-' || c == '_';
    if (!ok) return false;
  }
  return true;
}

// [profile] sections of an AWS credentials file: key = value lines.
struct Profile {
  std::string access_key, secret_key, session_token, region;
};

std::optional<Profile> read_profile(const std::filesystem::path& file, const std::string& name) {
  std::ifstream in(file);
  if (!in) return std::nullopt;
  std::string line, section;
  Profile p;
  bool found = false;
  while (std::getline(in, line)) {
    const std::string t = trim(line);
    if (t.empty() || t[0] == '#' || t[0] == ';') continue;
    if (t.front() == '[' && t.back() == ']') {
      section = trim(std::string_view(t).substr(1, t.size() - 2));
      if (section.starts_with("profile ")) section = trim(std::string_view(section).substr(8));
      continue;
    }
    if (section != name) continue;
    const auto eq = t.find('=');
    if (eq == std::string::npos) continue;
    const std::string k = trim(std::string_view(t).substr(0, eq)), v = trim(std::string_view(t).substr(eq + 1));
    found = true;
    if (k == "aws_access_key_id") p.access_key = v;
    else if (k == "aws_secret_access_key") p.secret_key = v;
    else if (k == "aws_session_token") p.session_token = v;
    else if (k == "region") p.region = v;
  }
  if (!found) return std::nullopt;
  return p;
}

std::filesystem::path home_file(const char* relative) {
  const std::string home = env("HOME");
  return home.empty() ? std::filesystem::path() : std::filesystem::path(home) / relative;
}

void validate_endpoint(const std::string& endpoint) {
  if (!endpoint.starts_with("http://") && !endpoint.starts_with("https://"))
    throw_error(errc::invalid_argument, "endpoint '" + endpoint + "' must start with http:// or https://");
}

}  // namespace

bool is_s3_url(std::string_view text) noexcept { return text.starts_with(kScheme); }

std::string S3Url::key(std::string_view name) const {
  if (prefix.empty()) return std::string(name);
  std::string k = prefix;
  k += '/';
  k += name;
  return k;
}

std::string S3Url::url(std::string_view name) const {
  std::string u(kScheme);
  u += bucket;
  for (std::string_view part : {std::string_view(prefix), name}) {
    if (part.empty()) continue;
    u += '/';
    u += part;
  }
  return u;
}

S3Url parse_s3_url(std::string_view url) {
  if (!is_s3_url(url)) throw_error(errc::invalid_argument, "'" + std::string(url) + "' is not an s3:// URL");
  std::string_view rest = url.substr(kScheme.size());
  const auto slash = rest.find('/');
  S3Url u;
  u.bucket = std::string(rest.substr(0, slash));
  const auto bad = [&](const char* why) { throw_error(errc::invalid_argument, "'" + std::string(url) + "': " + why); };
  if (!valid_bucket(u.bucket)) bad("bucket name must be 3-63 of a-z 0-9 . - _");
  std::string_view prefix = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
  while (!prefix.empty() && prefix.back() == '/') prefix.remove_suffix(1);
  if (prefix.find("//") != std::string_view::npos || prefix.starts_with('/')) bad("empty path segment");
  for (char c : prefix)
    if (static_cast<unsigned char>(c) < 0x20 || c == '?' || c == '#') bad("control character, '?' or '#' in the path");
  u.prefix = std::string(prefix);
  return u;
}

std::string S3Config::endpoint_or_default() const {
  return endpoint.empty() ? "https://s3." + region + ".amazonaws.com" : endpoint;
}

std::string S3Config::describe() const {
  std::string d = endpoint_or_default() + " (region " + region + ", ";
  d += addressing == Addressing::path ? "path-style, " : "virtual-host, ";
  d += anonymous ? std::string("unsigned") : "key id " + access_key;
  if (!session_token.empty()) d += " with session token";
  return d + ")";
}

S3Config s3_config_from_env(const std::string& endpoint_override) {
  S3Config c;
  const std::string profile_name = env("AWS_PROFILE").empty() ? "default" : env("AWS_PROFILE");
  std::filesystem::path credentials = env("AWS_SHARED_CREDENTIALS_FILE");
  if (credentials.empty()) credentials = home_file(".aws/credentials");
  std::optional<Profile> profile;
  if (!credentials.empty()) profile = read_profile(credentials, profile_name);
  if (!env("AWS_ACCESS_KEY_ID").empty()) {
    c.access_key = env("AWS_ACCESS_KEY_ID");
    c.secret_key = env("AWS_SECRET_ACCESS_KEY");
    c.session_token = env("AWS_SESSION_TOKEN");
  } else if (profile) {
    c.access_key = profile->access_key;
    c.secret_key = profile->secret_key;
    c.session_token = profile->session_token;
  } else if (!env("AWS_PROFILE").empty()) {
    throw_error(errc::invalid_argument, "AWS_PROFILE '" + profile_name + "' not found in " + credentials.string());
  }
  c.anonymous = env_true("AWS_NO_SIGN_REQUEST") || c.access_key.empty();
  if (!c.anonymous && c.secret_key.empty())
    throw_error(errc::invalid_argument, "access key id '" + c.access_key + "' has no secret access key");
  if (!env("AWS_REGION").empty()) c.region = env("AWS_REGION");
  else if (!env("AWS_DEFAULT_REGION").empty()) c.region = env("AWS_DEFAULT_REGION");
  else if (profile && !profile->region.empty()) c.region = profile->region;
  c.endpoint = !endpoint_override.empty() ? endpoint_override
               : !env("AWS_ENDPOINT_URL_S3").empty() ? env("AWS_ENDPOINT_URL_S3")
                                                      : env("AWS_ENDPOINT_URL");
  while (!c.endpoint.empty() && c.endpoint.back() == '/') c.endpoint.pop_back();
  if (!c.endpoint.empty()) validate_endpoint(c.endpoint);
  // Custom endpoints (MinIO, Ceph, moto, GCS's XML API) are addressed by path;
  // AWS's own by virtual host (path-style is deprecated there).
  c.addressing = c.endpoint.empty() ? Addressing::virtual_host : Addressing::path;
  const std::string style = env("L3_S3_ADDRESSING");
  if (style == "path") c.addressing = Addressing::path;
  else if (style == "virtual") c.addressing = Addressing::virtual_host;
  else if (!style.empty()) throw_error(errc::invalid_argument, "L3_S3_ADDRESSING must be path or virtual");
  if (env("L3_S3_VERIFY_TLS") == "0") c.verify_tls = false;
  if (const std::string a = env("L3_S3_MAX_ATTEMPTS"); !a.empty()) {
    const long v = std::strtol(a.c_str(), nullptr, 10);
    if (v < 1 || v > 100) throw_error(errc::invalid_argument, "L3_S3_MAX_ATTEMPTS must be 1..100");
    c.max_attempts = static_cast<unsigned>(v);
  }
  if (const std::string p = env("L3_S3_PART_SIZE"); !p.empty()) {
    c.part_size = std::strtoull(p.c_str(), nullptr, 10);  // upload_file raises it to S3's 5 MiB minimum
  }
  if (const std::string b = env("L3_S3_BLOCK_SIZE"); !b.empty()) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(b.c_str(), &end, 10);
    if (end == b.c_str() || *end != 0 || v < 4096 || v > (1ull << 30))
      throw_error(errc::invalid_argument, "L3_S3_BLOCK_SIZE must be 4096..1073741824 bytes");
    c.block_size = v;
  }
  if (const std::string f = env("L3_S3_MAX_IN_FLIGHT"); !f.empty()) {
    char* end = nullptr;
    const unsigned long v = std::strtoul(f.c_str(), &end, 10);
    if (end == f.c_str() || *end != 0 || v < 1 || v > 256)
      throw_error(errc::invalid_argument, "L3_S3_MAX_IN_FLIGHT must be 1..256");
    c.max_in_flight = static_cast<unsigned>(v);
  }
  return c;
}

}  // namespace l3::storage
