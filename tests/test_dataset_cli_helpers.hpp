// Helpers for the dataset CLI suites: run the built l3pack (L3PACK_PATH), make
// source trees, and read a dataset's records back as (key, label, payload hash).
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "l3/format/dataset.hpp"
#include "l3/imageio/image_io.hpp"
#include "test_converters_helpers.hpp"

namespace l3::test {

struct Run {
  int exit_code = -1;
  std::string out, err;
};

// Built by appending: GCC 12's -Wrestrict misfires on "'" + string + "'" at -O3.
inline std::string quoted(const std::filesystem::path& p) {
  std::string text = "'";
  text += p.string();
  text += "'";
  return text;
}

inline std::string text_of(const std::filesystem::path& file) {
  auto bytes = read_file(file);
  return {bytes.begin(), bytes.end()};
}

// Runs "l3pack <arguments>" through the shell, capturing stdout and stderr.
inline Run l3pack(const TempDir& scratch, const std::string& arguments) {
  const auto out = scratch / "run.stdout", err = scratch / "run.stderr";
  std::string command = "'";
  command += L3PACK_PATH;
  command += "' ";
  command += arguments;
  command += " >" + quoted(out) + " 2>" + quoted(err);
  const int status = std::system(command.c_str());
  Run run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = text_of(out);
  run.err = text_of(err);
  return run;
}

// Starts l3pack with argv (no shell), output discarded; returns its pid.
inline pid_t spawn_l3pack(const std::vector<std::string>& arguments) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::dup2(null, 2);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(L3PACK_PATH));
    for (const auto& a : arguments) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(L3PACK_PATH, argv.data());
    ::_exit(127);
  }
  return pid;
}

inline Image save_test_png(const std::filesystem::path& file, std::uint32_t w, std::uint32_t h, std::uint32_t c,
                           std::uint32_t seed) {
  std::filesystem::create_directories(file.parent_path());
  Image image{w, h, c, gradient(w, h, c, seed)};
  save_png(file, image.view());
  return image;
}

// Noise: slow to encode, so a conversion of many of them takes a while.
inline void save_noise_png(const std::filesystem::path& file, std::uint32_t w, std::uint32_t h, std::uint32_t seed) {
  std::filesystem::create_directories(file.parent_path());
  Image image{w, h, 3, random_bytes(std::size_t{w} * h * 3, seed)};
  save_png(file, image.view());
}

inline void save_test_jpeg(const std::filesystem::path& file, std::uint32_t w, std::uint32_t h, std::uint32_t seed) {
  std::filesystem::create_directories(file.parent_path());
  JpegSpec spec{w, h, 3, JCS_RGB, 85, false};
  write_file(file, make_jpeg(spec, gradient(w, h, 3, seed)));
}

struct RecordDigest {
  std::string key;
  std::int64_t label = -1;
  std::uint64_t payload_hash = 0;
  bool operator==(const RecordDigest&) const = default;
};

inline std::vector<RecordDigest> record_digests(const std::filesystem::path& dir) {
  Dataset dataset = Dataset::open(dir);
  std::vector<RecordDigest> out;
  for (std::uint64_t i = 0; i < dataset.size(); ++i) {
    RecordView r = dataset.record(i);
    out.push_back({std::string(r.key), r.label, XXH3_64bits(r.payload.data(), r.payload.size())});
  }
  return out;
}

inline std::vector<std::string> shard_files(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& shard : read_manifest(dir).shards) names.push_back(shard.file);
  return names;
}

}  // namespace l3::test
