// l3pack convert SRC OUT: a folder of images (or a list file) to a sharded dataset.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>

#include "common.hpp"
#include "l3/convert/convert.hpp"
#include "progress.hpp"

namespace l3::cli {
namespace {

struct ConvertArguments {
  std::filesystem::path src, out;
  std::string shard_size = "256MiB";
  std::string part;  // "i/n"
  std::optional<std::uint64_t> shuffle_seed;
  bool resume = false, strict = false, strict_jpeg = false, convert_16bit = false, allow_empty = false;
  bool shared_out = false;
  std::string engine = "local";
  unsigned parts = 0;       // --engine ray: tasks
  std::string ray_address;  // --engine ray: cluster to join (default: a local one)
  std::string layout = "auto";
  std::filesystem::path base;
  std::uint64_t max_pixels = kDefaultMaxPixels;
  unsigned threads = 0;
  EncodeOptions encode;  // --tile-width, --tile-height, --effort, --entropy
};

// Error::what() without its "<errc name>: " prefix: the CLI line names the subject itself.
std::string message_of(const Error& e) {
  std::string text = e.what();
  const std::string prefix = std::string(errc_name(e.code())) + ": ";
  return text.starts_with(prefix) ? text.substr(prefix.size()) : text;
}

// "1000", "64k", "256MiB", "1G": binary multiples (k = 1024).
std::uint64_t parse_size(const std::string& text) {
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  std::string suffix(end, text.data() + text.size());
  for (char& c : suffix) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  int shift = -1;
  if (suffix.empty() || suffix == "b") shift = 0;
  else if (suffix == "k" || suffix == "kib" || suffix == "kb") shift = 10;
  else if (suffix == "m" || suffix == "mib" || suffix == "mb") shift = 20;
  else if (suffix == "g" || suffix == "gib" || suffix == "gb") shift = 30;
  if (ec != std::errc{} || shift < 0 || value == 0 || value > (std::uint64_t{1} << (63 - shift)))
    throw Failure{"", "--shard-size: '" + text + "' is not a size (e.g. 268435456, 64MiB, 1GiB)", exit_usage};
  return value << shift;
}

void parse_part(const std::string& text, ConvertOptions& options) {
  if (text.empty()) return;
  unsigned i = 0, n = 0;
  char slash = 0, extra = 0;
  if (std::sscanf(text.c_str(), "%u%c%u%c", &i, &slash, &n, &extra) != 3 || slash != '/' || n == 0 || i >= n)
    throw Failure{"", "--part: '" + text + "' must be i/n with 0 <= i < n (e.g. 0/4)", exit_usage};
  options.part_index = i;
  options.part_count = n;
}

ConvertOptions to_options(const ConvertArguments& args) {
  ConvertOptions options;
  options.encode = args.encode;
  options.shard_size = parse_size(args.shard_size);
  options.shuffle_seed = args.shuffle_seed;
  parse_part(args.part, options);
  options.resume = args.resume;
  options.strict = args.strict;
  options.threads = args.threads;
  options.scan.layout = args.layout == "classes" ? SourceLayout::classes
                        : args.layout == "flat"  ? SourceLayout::flat
                                                 : SourceLayout::automatic;
  options.scan.list_base = args.base;
  options.max_pixels = args.max_pixels;
  options.strict_jpeg = args.strict_jpeg;
  options.convert_16bit = args.convert_16bit;
  options.allow_empty = args.allow_empty;
  options.shared_output = args.shared_out;
  try {
    validate_convert_options(options);
  } catch (const Error& e) {
    throw Failure{"", message_of(e), exit_usage};
  }
  if (!args.base.empty() && !std::filesystem::is_directory(args.base))
    throw Failure{args.base.string(), "--base must be an existing folder", exit_usage};
  return options;
}

// "skipped:   12 inputs (listed in OUT/skipped.jsonl)" and one line per reason.
void print_skips(const ConvertReport& r, const std::filesystem::path& out) {
  std::map<std::string, std::uint64_t> counts;
  for (const SkippedInput& s : r.skipped_inputs) ++counts[s.reason];
  std::printf("skipped:   %llu inputs (listed in %s)\n", static_cast<unsigned long long>(r.skipped),
              (out / kSkippedName).c_str());
  for (const auto& [reason, n] : counts) std::printf("  %8llu %s\n", static_cast<unsigned long long>(n), reason.c_str());
  if (r.hidden != 0)
    std::printf("excluded:  %llu hidden entries (names starting with '.')\n", static_cast<unsigned long long>(r.hidden));
}

void print_summary(const ConvertReport& r) {
  const double ratio = r.bytes_in == 0 ? 0 : static_cast<double>(r.bytes_out) / static_cast<double>(r.bytes_in);
  const double converted = static_cast<double>(r.images - r.resumed_records);
  std::printf("images:    %llu in %llu shards (%llu skipped, %llu kept from an earlier run)\n",
              static_cast<unsigned long long>(r.images), static_cast<unsigned long long>(r.shards),
              static_cast<unsigned long long>(r.skipped), static_cast<unsigned long long>(r.resumed_records));
  std::printf("bytes in:  %llu (%s, source files)\n", static_cast<unsigned long long>(r.bytes_in),
              human_bytes(static_cast<double>(r.bytes_in)).c_str());
  std::printf("bytes out: %llu (%s, shards), %.3fx the source\n", static_cast<unsigned long long>(r.bytes_out),
              human_bytes(static_cast<double>(r.bytes_out)).c_str(), ratio);
  std::printf("time:      %.2f s, %.2f images/s\n", r.seconds, r.seconds > 0 ? converted / r.seconds : 0.0);
}


// --engine ray: the Ray driver is Python (python/l3/ray_convert.py); l3pack checks
// the options, then becomes `$L3_PYTHON -m l3.ray_convert ...` (default python3),
// which runs one task per --part i/n --shared-out and commits (spec/format.md §8.4.1).
[[noreturn]] void exec_ray_driver(const ConvertArguments& args) {
  if (!args.part.empty() || args.shared_out || args.resume)
    throw Failure{"", "--engine ray runs the parts itself (each resumable): no --part, --shared-out or --resume",
                  exit_usage};
  if (args.parts < 1) throw Failure{"", "--engine ray needs --parts N (N >= 1)", exit_usage};
  to_options(args);  // the same checks as a local run, before any process starts
  const char* python = std::getenv("L3_PYTHON");
  std::vector<std::string> argv = {python && *python ? python : "python3", "-m", "l3.ray_convert",
                                   args.src.string(), args.out.string(), "--parts", std::to_string(args.parts),
                                   "--shard-size", std::to_string(parse_size(args.shard_size)),
                                   "--max-pixels", std::to_string(args.max_pixels), "--layout", args.layout,
                                   "--threads", std::to_string(args.threads), "--effort", std::to_string(args.encode.effort),
                                   "--entropy", entropy_mode(args.encode),
                                   "--tile-width", std::to_string(args.encode.tile_width),
                                   "--tile-height", std::to_string(args.encode.tile_height)};
  auto add = [&](bool on, const char* flag) { if (on) argv.emplace_back(flag); };
  if (args.shuffle_seed) argv.insert(argv.end(), {"--shuffle-seed", std::to_string(*args.shuffle_seed)});
  if (!args.base.empty()) argv.insert(argv.end(), {"--base", args.base.string()});
  if (!args.ray_address.empty()) argv.insert(argv.end(), {"--address", args.ray_address});
  add(args.strict, "--strict");
  add(args.strict_jpeg, "--strict-jpeg");
  add(args.convert_16bit, "--convert-16bit");
  add(args.allow_empty, "--allow-empty");
  std::vector<char*> c_argv;
  for (std::string& a : argv) c_argv.push_back(a.data());
  c_argv.push_back(nullptr);
  std::fflush(nullptr);
  ::execvp(c_argv[0], c_argv.data());
  throw Failure{argv[0], std::string("cannot run the Ray driver (set L3_PYTHON to a Python with the l3 package and "
                                     "ray): ") + std::strerror(errno), exit_failure};
}

void run_convert(const ConvertArguments& args) {
  if (args.engine == "ray") exec_ray_driver(args);
  if (args.parts != 0 || !args.ray_address.empty())
    throw Failure{"", "--parts and --ray-address go with --engine ray (locally: --part i/n)", exit_usage};
  ConvertOptions options = to_options(args);
  ProgressDisplay display("convert");
  ConvertObserver observer;
  observer.progress = [&](const ConvertProgress& p) {
    display.update({p.done, p.total, p.skipped, p.bytes_in, p.seconds});
  };
  observer.skipped = [&](const std::filesystem::path& file, const std::string& reason) {  // reason: "<why>: <detail>"
    std::string line = "l3pack: warning: ";
    line += file.string();
    line += ": ";
    line += reason;
    line += " (skipped)";  // under --strict the error line says it instead
    display.message(line);
  };
  try {
    ConvertReport report = convert_dataset(args.src, args.out, options, observer);
    display.finish();
    print_summary(report);
    print_skips(report, args.out);
  } catch (const InputError& e) {
    display.finish();
    // A scan skip says its reason itself; a decode skip's reason is its errc name.
    const std::string reason = e.code() == errc::invalid_argument ? message_of(e) : std::string(e.what());
    throw Failure{e.file().string(), reason + " (--strict: conversion stopped)", exit_failure};
  } catch (const Error& e) {
    display.finish();
    // Options were checked above; what is left is the state of SRC or OUT: exit 1.
    // The library's messages start with the file or folder they concern.
    throw Failure{"", message_of(e), exit_failure};
  }
}

}  // namespace

void add_convert_command(CLI::App& app) {
  auto args = std::make_shared<ConvertArguments>();
  CLI::App* command = app.add_subcommand("convert", "Pack a folder of images (or a list file) into a sharded dataset");
  command->add_option("SRC", args->src,
                      "Folder with one subfolder per class, flat folder of images, or list file (CSV/TSV: path,label)")
      ->required();
  command->add_option("OUT", args->out, "Dataset folder to create")->required();
  command->add_option("--shard-size", args->shard_size, "Close a shard once it holds this many bytes (256MiB)");
  command->add_option("--shuffle-seed", args->shuffle_seed, "Store records in this seed's shuffled order");
  command->add_option("--part", args->part, "Convert part i of n (i/n) for a later 'l3pack merge'");
  command->add_flag("--shared-out", args->shared_out,
                    "With --part: OUT is shared by all parts, each writes its shards there; then "
                    "'l3pack merge --in-place OUT' commits (no copy)");
  command->add_option("--engine", args->engine,
                      "local (default), or ray: one Ray task per part (--parts N), retried, then the commit "
                      "(runs $L3_PYTHON -m l3.ray_convert; needs Python with l3 and ray)")
      ->check(CLI::IsMember({"local", "ray"}));
  command->add_option("--parts", args->parts, "--engine ray: number of parts (tasks)");
  command->add_option("--ray-address", args->ray_address,
                      "--engine ray: the cluster to use (default: $RAY_ADDRESS, else a local one on 127.0.0.1)");
  command->add_flag("--resume", args->resume, "Continue an interrupted conversion into OUT");
  command->add_flag("--strict", args->strict,
                    "Stop at the first input that would be skipped (default: report, skip, list in OUT/skipped.jsonl)");
  command->add_option("--layout", args->layout,
                      "auto (default): class folders, or a flat folder; an error when both are at the top. "
                      "classes: top-level folders are classes, loose files skipped. flat: every image, no labels")
      ->check(CLI::IsMember({"auto", "classes", "flat"}));
  command->add_option("--base", args->base,
                      "List file: read relative paths from this folder, and accept absolute paths under it");
  command->add_option("--max-pixels", args->max_pixels,
                      "Skip images with more pixels, checked from the header before decoding (default 178956970, "
                      "PIL's limit; at most 1073741824)");
  command->add_flag("--convert-16bit", args->convert_16bit,
                    "Reduce 16-bit PNGs to 8 bits (the high byte, as PIL does for RGB) instead of skipping them");
  command->add_flag("--strict-jpeg", args->strict_jpeg,
                    "Skip JPEGs with any libjpeg warning (default: accept warnings about bytes outside the image "
                    "data, e.g. extraneous bytes before a marker)");
  command->add_flag("--allow-empty", args->allow_empty, "Commit a dataset even when no image was converted");
  command->add_option("--threads", args->threads, "Worker threads (0: all cores)");
  command->add_option("--tile-width", args->encode.tile_width,
                      "Codec tile width, a power of two 16..256 (0: default 256; 64 for random-crop training: crops "
                      "decode less of each image, for about 5% more bytes)");
  command->add_option("--tile-height", args->encode.tile_height, "Codec tile height (0: default)");
  command->add_option("--effort", args->encode.effort,
                      "Codec effort: 0 fixed transform and predictor, 1 chosen per tile (default), 2 smallest of "
                      "every transform (slower, denser)")
      ->check(CLI::Range(0, 2));
  add_entropy_option(*command, args->encode);
  command->footer(
      "Every file under SRC is converted, skipped with its reason (summary at the end, list in OUT/skipped.jsonl)\n"
      "or hidden (names starting with '.'). Symbolic links are followed; a link back to a folder being walked\n"
      "is skipped as a symlink loop. Images: PNG, JPEG (CMYK as PIL), PNM, WebP, TIFF, BMP, by extension.\n"
      "List files: 'path,label' with integer labels or class names.\n"
      "Examples:\n"
      "  l3pack convert imagenet/train train-l3 --shuffle-seed 1\n"
      "  l3pack convert messy/ out --layout classes    (class folders; loose top-level files skipped)\n"
      "  l3pack convert /data/list.csv out --base /data\n"
      "  l3pack convert list.csv out --part 3/8    (then: l3pack merge all out-part0 ... out-part7)\n"
      "  l3pack convert src/ out --part 3/8 --shared-out    (each part; then: l3pack merge --in-place out)\n"
      "  l3pack convert src/ s3://bucket/ds --engine ray --parts 64");
  command->callback([args] { run_convert(*args); });
}

}  // namespace l3::cli
