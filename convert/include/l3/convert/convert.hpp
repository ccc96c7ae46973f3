// Dataset conversion: a folder of images (or a list file) becomes a sharded
// l3 dataset (spec/format.md §8) of .l3i records (spec/codec.md).
//
// The conversion is a pure function of (source listing, options): the input
// order is planned up front (sorted keys, optional seeded shuffle, optional
// part range), images are decoded and encoded in worker threads, and records
// are appended in plan order. A shard is closed as soon as its size reaches
// shard_size, so the shard boundaries depend only on the plan and the encoded
// sizes, never on the thread count or on timing. That is what makes the output
// byte-identical for any thread count, and --resume exact: the plan is stored
// in OUT/l3pack-plan.json before the first shard, finished shards are checked
// against it and kept, and the rest is redone.
//
// Errors are l3::Error (l3/common/error.hpp); a bad input under `strict` is an
// InputError naming the file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "l3/codec/codec.hpp"
#include "l3/common/error.hpp"
#include "l3/format/shard.hpp"

namespace l3 {

inline constexpr const char* kPlanName = "l3pack-plan.json";
inline constexpr const char* kLockName = ".l3pack.lock";

// One input image.
struct SourceImage {
  std::filesystem::path file;  // where to read it
  std::string key;             // path relative to the source root, '/'-separated, escaped (escape_key)
  std::int64_t label = kNoLabel;
};

// An input that is not converted, and why (spec/format.md §8.4). Reasons are a
// short fixed vocabulary ("not an image", "broken symbolic link", "truncated",
// ...) so that a summary can count them; detail says more and may be empty.
struct SkippedInput {
  std::string key;     // escaped path relative to the source root; a folder ends with '/'
  std::string reason;
  std::string detail;
};

enum class SourceKind { class_folders, list_file, flat_folder };

// How a source folder is read. automatic: only subfolders at the top level (plus
// files that are not images) means class folders, only files means a flat
// folder, and subfolders next to image files is an error that names both.
enum class SourceLayout { automatic, classes, flat };

struct ScanOptions {
  SourceLayout layout = SourceLayout::automatic;
  // List files: the folder relative paths are read from, and the only place
  // absolute paths may point into (keys are relative to it). Empty: the list
  // file's folder, and absolute paths are refused.
  std::filesystem::path list_base;
};

struct SourceSet {
  SourceKind kind = SourceKind::flat_folder;
  std::filesystem::path root;        // the folder keys are relative to
  std::vector<SourceImage> images;   // folders: sorted by key; list file: file order
  std::vector<std::string> classes;  // label i = classes[i]: sorted class folder names or list class names
  std::vector<SkippedInput> skipped; // found while scanning, sorted by key
  std::uint64_t hidden = 0;          // entries excluded because their name starts with '.'
};

// Reads SRC: a list file (CSV or TSV lines "path,label"; the label an integer
// >= -1 or a class name), a folder of class folders, or a folder of images
// (searched recursively; no labels). Folders are walked following symbolic
// links (a link back to a folder being walked is a "symlink loop" skip); every
// entry is an image, a skip with its reason, or hidden. Images are recognised
// by extension (.png .jpg .jpeg .ppm .pgm .pnm .pam .webp .bmp .tif .tiff, any
// case); files are read by their bytes. Throws invalid_argument for a mixed top level or a bad list
// line, io_error when SRC cannot be read at all.
SourceSet scan_source(const std::filesystem::path& src, const ScanOptions& options = {});

// The folder a key is relative to, for SRC as given to scan_source.
std::filesystem::path source_root(const std::filesystem::path& src, const ScanOptions& options = {});

// Keys from file names (spec/format.md §8.4): the bytes of a valid UTF-8 name
// are kept, except '%', written "%25"; every byte of an invalid sequence is
// written "%XX" (two uppercase hex digits). unescape_key is the inverse; it
// throws invalid_argument for a '%' not followed by two hex digits.
std::string escape_key(std::string_view raw_path);
std::string unescape_key(std::string_view key);

// A permutation of 0..n-1, stable across platforms and standard libraries:
// Fisher-Yates from the last element down, where the swap partner of i is
// x mod (i+1) for the first output x of std::mt19937_64(seed) not below
// 2^64 mod (i+1) (rejection sampling keeps it unbiased).
std::vector<std::size_t> seeded_permutation(std::size_t n, std::uint64_t seed);

// PIL's DecompressionBombError threshold (2 x Image.MAX_IMAGE_PIXELS): an image
// PIL refuses to open, l3pack skips; spec/limits.md §4 explains the choice.
inline constexpr std::uint64_t kDefaultMaxPixels = 178956970;

struct ConvertOptions {
  EncodeOptions encode{};                          // encode.threads is ignored: images run in parallel
  std::uint64_t shard_size = std::uint64_t{256} << 20;  // a shard closes once it holds this many bytes
  std::optional<std::uint64_t> shuffle_seed;       // records in seeded_permutation order
  std::uint32_t part_index = 0;                    // this run converts the contiguous range
  std::uint32_t part_count = 1;                    //   [N*i/n, N*(i+1)/n) of the planned order
  bool resume = false;                             // continue an interrupted conversion into OUT
  bool strict = false;                             // a skipped input stops the run (InputError)
  unsigned threads = 0;                            // workers; 0: all hardware threads
  ScanOptions scan{};                              // layout of a folder, base of a list file
  // Images with more pixels are skipped ("limit exceeded"), checked from the file's
  // header before any pixel buffer is allocated: a worker holds at most
  // max_pixels x 4 bytes of pixels (plus the encoded record). At most 2^30 (the codec's limit).
  std::uint64_t max_pixels = kDefaultMaxPixels;
  bool convert_16bit = false;                      // 16-bit PNG samples reduced to 8 bits (LoadOptions)
  bool strict_jpeg = false;                        // any libjpeg warning makes a JPEG a skip
  bool allow_empty = false;                        // commit a dataset of 0 records instead of failing
  // With part_count > 1: OUT is shared by all n parts (spec/format.md §8.4.1). This part writes
  // its shards and its own plan, lock, skip list and manifest.part-i-of-n.json there, never
  // manifest.json; commit_parts(OUT) commits the dataset once every part is done.
  bool shared_output = false;
};

// The names part i of n uses in a shared OUT (spec/format.md §8.4.1): "part-i-of-n" is the
// prefix of its shards, and the tag of its plan, lock, skip list and part manifest.
std::string part_tag(std::uint32_t index, std::uint32_t count);
std::string part_manifest_name(std::uint32_t index, std::uint32_t count);  // manifest.part-i-of-n.json
std::string part_skipped_name(std::uint32_t index, std::uint32_t count);   // skipped.part-i-of-n.jsonl
std::string part_plan_name(std::uint32_t index, std::uint32_t count);      // l3pack-plan.part-i-of-n.json

// Throws invalid_argument, naming the option, for any value convert_dataset would
// refuse (tile size, effort, shard size, part, max_pixels); called first, before
// anything is read or written.
void validate_convert_options(const ConvertOptions& options);

struct ConvertProgress {
  std::uint64_t done = 0;       // inputs handled (converted or skipped), resumed ones included
  std::uint64_t total = 0;      // inputs of this run (this part)
  std::uint64_t skipped = 0;
  std::uint64_t bytes_in = 0;   // source file bytes handled in this process
  std::uint64_t bytes_out = 0;  // record bytes written in this process
  double seconds = 0;           // since this process started converting
};

struct ConvertObserver {
  std::function<void(const ConvertProgress&)> progress;  // after each input, from the calling thread
  std::function<void(const std::filesystem::path& file, const std::string& reason)> skipped;
};

struct ConvertReport {
  std::uint64_t images = 0;          // records in the dataset
  std::uint64_t skipped = 0;         // inputs not converted (scan and decode), = skipped_inputs.size()
  std::uint64_t resumed_records = 0; // records found in kept shards (--resume)
  std::uint64_t shards = 0;
  std::uint64_t bytes_in = 0;        // source file bytes of every record in the dataset
  std::uint64_t bytes_out = 0;       // shard file bytes
  std::uint64_t hidden = 0;          // entries excluded by name ('.' first)
  std::vector<SkippedInput> skipped_inputs;  // also in OUT/skipped.jsonl (spec/format.md §8.4)
  double seconds = 0;
};

inline constexpr const char* kSkippedName = "skipped.jsonl";

// A bad input under ConvertOptions::strict.
class InputError : public Error {
public:
  InputError(errc code, std::filesystem::path file, const std::string& reason)
      : Error(code, reason), file_(std::move(file)) {}
  const std::filesystem::path& file() const noexcept { return file_; }
private:
  std::filesystem::path file_;
};

// Converts SRC into the dataset directory OUT (created if missing). Refuses an
// OUT that holds a committed dataset, a non-empty OUT without `resume`, and an
// OUT another conversion is writing (lock file OUT/.l3pack.lock, O_EXCL).
ConvertReport convert_dataset(const std::filesystem::path& src, const std::filesystem::path& out,
                              const ConvertOptions& options, const ConvertObserver& observer = {});

// image_stats of a manifest (spec/format.md §8.2, written by l3pack):
// {"images", "total_pixels", "width"/"height": {"min","max","mean"}, "channels": {"1": n, ...}}.
class ImageStatsBuilder {
public:
  void add(std::uint32_t width, std::uint32_t height, std::uint32_t channels);
  void add_record(std::span<const std::uint8_t> l3i);  // from the .l3i header
  // The images an earlier to_json() described (a part's image_stats): counts, ranges and
  // channels exactly, the sums as mean x images rounded (exact while a sum is below 2^51).
  // corrupt_manifest when `stats` is not such an object.
  void add_stats(const nlohmann::json& stats);
  nlohmann::json to_json() const;
private:
  std::uint64_t count_ = 0, pixels_ = 0;
  std::uint64_t width_sum_ = 0, height_sum_ = 0;
  std::uint32_t width_min_ = 0, width_max_ = 0, height_min_ = 0, height_max_ = 0;
  std::uint64_t channels_[5] = {};
};


// Joins the datasets written by `--part i/n` runs (all n parts, any order) into
// OUT: shards are hard-linked (copied across file systems) in part order, the
// classes must agree, and the manifest lists every part's shards. Returns the
// record count.
std::uint64_t merge_parts(const std::filesystem::path& out, const std::vector<std::filesystem::path>& parts);

// Commits the dataset that `--part i/n` runs with shared_output wrote into OUT (a folder or
// s3://bucket/prefix; spec/format.md §8.4.1): reads the n part manifests, checks that they
// are parts 0..n-1 of one run and that every shard they list is there with its size, joins
// the skip lists into skipped.jsonl and writes manifest.json. Reads no shard and moves none.
// Returns the record count.
std::uint64_t commit_parts(const std::filesystem::path& out);

}  // namespace l3
