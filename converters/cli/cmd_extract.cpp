// l3pack extract OUT DIR: every record back to an image file under its key.

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "common.hpp"
#include "l3/codec/codec.hpp"
#include "l3/convert/convert.hpp"
#include "l3/format/dataset.hpp"
#include "l3/common/file_io.hpp"

namespace l3::cli {
namespace {

struct ExtractArguments {
  std::filesystem::path dataset, dir;
  std::string format = "png";
  unsigned threads = 0;
  bool replace_extension = false;  // a.jpg -> a.png (may collide) instead of a.jpg.png
  bool force = false;              // overwrite existing files
};

// The output path for a key, or empty when the key would leave DIR
// (absolute, or with a '..' component): keys come from the file, so they are untrusted.
std::filesystem::path relative_output(const std::string& key, std::uint64_t index) {
  if (key.empty()) {
    char name[40];
    std::snprintf(name, sizeof name, "record-%08llu", static_cast<unsigned long long>(index));
    return name;
  }
  std::filesystem::path path(key);
  if (path.has_root_path() || key.find('\0') != std::string::npos) return {};
  for (const auto& part : path)
    if (part == "..") return {};
  return path.lexically_normal();
}

std::string extension_for(const std::string& format, std::uint32_t channels) {
  if (format == "png") return ".png";
  return channels == 1 ? ".pgm" : channels == 3 ? ".ppm" : ".pam";  // PNM cannot hold alpha: PAM
}

bool same_extension(const std::filesystem::path& path, const std::string& extension) {
  const std::string have = path.extension().string();
  return have.size() == extension.size() &&
         std::equal(have.begin(), have.end(), extension.begin(),
                    [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; });
}

// The output name rule (README, "l3pack extract"): a key that already ends in the
// output extension keeps its name; any other key keeps its own extension and gets
// the output one appended (a.jpg -> a.jpg.png), so a.jpg, a.JPEG and a.png stay
// three files. --replace-extension swaps it instead (a.jpg -> a.png), and so does a
// name that appending would make longer than NAME_MAX (255 bytes).
void apply_extension(std::filesystem::path& relative, const std::string& extension, bool replace) {
  constexpr std::size_t name_max = 255;
  if (same_extension(relative, extension)) return;
  if (replace || relative.filename().string().size() + extension.size() > name_max)
    relative.replace_extension(extension);
  else relative += extension;
}

// Output paths, checked for escapes and collisions before anything is written.
std::vector<std::filesystem::path> plan_outputs(const Dataset& dataset, const ExtractArguments& args,
                                                std::vector<RecordFailure>& failures) {
  std::vector<std::filesystem::path> outputs(dataset.size());
  std::map<std::filesystem::path, std::uint64_t> taken;
  // Keys of names that were not UTF-8 are percent-escaped (spec/format.md §8.4):
  // the file gets its source's name back.
  const bool escaped = dataset.manifest().extra.value("l3pack", nlohmann::json::object()).value("key_escape", "") ==
                       "percent";
  for (std::uint64_t i = 0; i < dataset.size(); ++i) {
    RecordView record = dataset.record(i, Verify::no);
    std::string key(record.key);
    std::filesystem::path relative = relative_output(escaped ? unescape_key(key) : key, i);
    if (relative.empty()) {
      failures.push_back({i, key, "key would write outside " + args.dir.string() + "; not extracted"});
      continue;
    }
    std::uint32_t channels = 0;
    try {
      channels = read_info(record.payload).channels;
    } catch (const Error& e) {
      failures.push_back({i, key, e.what()});
      continue;
    }
    apply_extension(relative, extension_for(args.format, channels), args.replace_extension);
    auto [it, fresh] = taken.emplace(relative, i);
    if (!fresh) {
      failures.push_back({i, key, "same output file as record " + std::to_string(it->second) + "; not extracted"});
      continue;
    }
    outputs[i] = args.dir / relative;
  }
  return outputs;
}

// Without --force, an output file that exists stops extract before anything is
// written: one error line naming the file.
void refuse_existing(const std::vector<std::filesystem::path>& outputs, bool force) {
  if (force) return;
  for (const std::filesystem::path& output : outputs) {
    std::error_code ec;
    if (!output.empty() && std::filesystem::exists(std::filesystem::symlink_status(output, ec)))
      throw Failure{output.string(), "already exists (use --force to overwrite)", exit_failure};
  }
}

std::string extract_record(const Dataset& dataset, std::uint64_t i, const std::filesystem::path& output,
                           const ExtractArguments& args) {
  try {
    RecordView record = dataset.record(i);  // checksum checked
    ImageInfo info;
    std::vector<std::uint8_t> pixels = decode(record.payload, &info);
    ImageView view{pixels.data(), info.width, info.height, info.channels, 0};
    std::filesystem::create_directories(output.parent_path());
    // Without --force, link() refuses a file that appeared after planning too.
    const std::vector<std::uint8_t> bytes = args.format == "png" ? encode_png_bytes(view) : encode_pnm_bytes(view);
    try {
      write_file_atomically(output, bytes, args.force ? Overwrite::yes : Overwrite::no);
    } catch (const Error&) {
      std::error_code ec;
      if (!args.force && std::filesystem::exists(std::filesystem::symlink_status(output, ec)))
        throw Error(errc::io_error, output.string() + " already exists (use --force to overwrite)");
      throw;
    }
    return {};
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return e.what();
  }
}

void run_extract(const ExtractArguments& args) {
  about_file(args.dataset, [&] {
    Dataset dataset = Dataset::open(args.dataset);
    std::vector<RecordFailure> failures;
    std::vector<std::filesystem::path> outputs = plan_outputs(dataset, args, failures);
    refuse_existing(outputs, args.force);
    std::mutex mutex;
    parallel_for(dataset.size(), args.threads, [&](std::uint64_t i) {
      if (outputs[i].empty()) return;
      std::string reason = extract_record(dataset, i, outputs[i], args);
      if (reason.empty()) return;
      std::lock_guard lock(mutex);
      failures.push_back({i, std::string(dataset.record(i, Verify::no).key), reason});
    });
    std::printf("extracted %llu of %llu records to %s\n",
                static_cast<unsigned long long>(dataset.size() - failures.size()),
                static_cast<unsigned long long>(dataset.size()), args.dir.c_str());
    print_failures(failures);
    if (!failures.empty())
      throw Failure{args.dataset.string(), std::to_string(failures.size()) + " records not extracted", exit_failure};
  });
}

}  // namespace

void add_extract_command(CLI::App& app) {
  auto args = std::make_shared<ExtractArguments>();
  CLI::App* command = app.add_subcommand("extract", "Write every record back as an image under its key in DIR");
  command->add_option("OUT", args->dataset, "Dataset folder (holding manifest.json)")->required();
  command->add_option("DIR", args->dir, "Folder to write the images into")->required();
  command->add_option("--format", args->format, "png (default) or ppm (.pgm/.ppm/.pam by channels)")
      ->check(CLI::IsMember({"png", "ppm"}));
  command->add_option("--threads", args->threads, "Worker threads (0: all cores)");
  command->add_flag("--replace-extension", args->replace_extension,
                    "Replace each key's extension (a.jpg -> a.png); keys that then collide are not extracted");
  command->add_flag("--force", args->force, "Overwrite files that already exist in DIR");
  command->footer(
      "Output names: a key ending in the output extension (.png; .pgm/.ppm/.pam by channels with\n"
      "--format ppm) keeps its name; any other key keeps its extension and gets the output one\n"
      "appended (cat/a.jpg -> cat/a.jpg.png), so a.jpg, a.JPEG and a.png give three files; a name\n"
      "that appending would make longer than 255 bytes has its extension replaced instead.\n"
      "Existing files are never overwritten without --force.\n"
      "Examples:\n"
      "  l3pack extract ds/ images/\n"
      "  l3pack extract ds/ images/ --replace-extension --force");
  command->callback([args] { run_extract(*args); });
}

}  // namespace l3::cli
