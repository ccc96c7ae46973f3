// Shared pieces of the l3pack subcommands: error reporting and output formats.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <new>
#include <string>
#include <vector>

#include "l3/codec/codec.hpp"
#include "l3/common/error.hpp"
#include "l3/imageio/image_io.hpp"
#include "l3/common/parallel.hpp"

namespace CLI {
class App;
}

namespace l3::cli {

inline constexpr int exit_failure = 1;  // bad data, I/O
inline constexpr int exit_usage = 2;    // bad command line

// What main() prints as "l3pack: error: <subject>: <reason>" before exiting with exit_code.
struct Failure {
  std::string subject;  // usually a file name; may be empty
  std::string reason;
  int exit_code = exit_failure;
};

int exit_code_for(errc code);

// Runs `action`; any error it throws becomes a Failure about `file`, so each
// message names the file it concerns.
template <class Action>
auto about_file(const std::filesystem::path& file, Action&& action) -> decltype(action()) {
  try {
    return action();
  } catch (const Error& e) {
    throw Failure{file.string(), e.what(), exit_code_for(e.code())};
  } catch (const std::bad_alloc&) {
    throw Failure{file.string(), "out of memory", exit_failure};
  }
}

// The image file formats l3pack writes, chosen by the output file's extension.
enum class ImageFileKind { png, pgm, ppm, pam, pnm };

// Throws a usage Failure for an extension it does not know.
ImageFileKind image_file_kind(const std::filesystem::path& output);

// Writes `image` as `kind` (atomically); throws a Failure if the kind cannot hold
// the image's channels (.pgm: 1, .ppm: 3).
void save_image(const std::filesystem::path& output, const ImageView& image, ImageFileKind kind);

// Records are spread over threads with l3::parallel_for (l3/common/parallel.hpp).
using l3::parallel_for;

// A record-level problem found by verify or extract, printed as
// "  record <index> (<key>): <reason>".
struct RecordFailure {
  std::uint64_t index = 0;
  std::string key;
  std::string reason;
};
// Prints the count and the first `limit` failures (by record index) to stderr.
void print_failures(std::vector<RecordFailure> failures, std::size_t limit = 10);

// `l3pack info DIR`: the dataset summary (records, shards, classes, bytes, bpp, image stats).
void run_dataset_info(const std::filesystem::path& dir, bool json);

// `--entropy MODE` of encode and convert: sets options.entropy_coding and
// entropy_min_saving_percent through l3::set_entropy_mode (its spelling, its
// one-line error as a usage error).
void add_entropy_option(CLI::App& command, EncodeOptions& options);

// Subcommands: each adds itself to the app with its options, help and callback.
void add_encode_command(CLI::App& app);
void add_decode_command(CLI::App& app);
void add_info_command(CLI::App& app);
void add_convert_command(CLI::App& app);
void add_verify_command(CLI::App& app);
void add_ls_command(CLI::App& app);
void add_extract_command(CLI::App& app);
void add_merge_command(CLI::App& app);
void add_cache_command(CLI::App& app);  // cmd_cache.cpp
void add_bench_command(CLI::App& app);
void add_bench_read_command(CLI::App& app);  // cmd_bench_read.cpp: the reader over a dataset, its stall metrics

}  // namespace l3::cli
