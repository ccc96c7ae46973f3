// l3pack extract OUT DIR: every record back to an image file under its key.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>

#include "common.hpp"
#include "l3/codec.hpp"
#include "l3/dataset.hpp"

namespace l3::cli {
namespace {

struct ExtractArguments {
  std::filesystem::path dataset, dir;
  std::string format = "png";
  unsigned threads = 0;
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

// Output paths, checked for escapes and collisions before anything is written.
std::vector<std::filesystem::path> plan_outputs(const Dataset& dataset, const ExtractArguments& args,
                                                std::vector<RecordFailure>& failures) {
  std::vector<std::filesystem::path> outputs(dataset.size());
  std::map<std::filesystem::path, std::uint64_t> taken;
  for (std::uint64_t i = 0; i < dataset.size(); ++i) {
    RecordView record = dataset.record(i, Verify::no);
    std::string key(record.key);
    std::filesystem::path relative = relative_output(key, i);
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
    relative.replace_extension(extension_for(args.format, channels));
    auto [it, fresh] = taken.emplace(relative, i);
    if (!fresh) {
      failures.push_back({i, key, "same output file as record " + std::to_string(it->second) + "; not extracted"});
      continue;
    }
    outputs[i] = args.dir / relative;
  }
  return outputs;
}

std::string extract_record(const Dataset& dataset, std::uint64_t i, const std::filesystem::path& output,
                           const std::string& format) {
  try {
    RecordView record = dataset.record(i);  // checksum checked
    ImageInfo info;
    std::vector<std::uint8_t> pixels = decode(record.payload, &info);
    ImageView view{pixels.data(), info.width, info.height, info.channels, 0};
    std::filesystem::create_directories(output.parent_path());
    if (format == "png") save_png(output, view);
    else save_pnm(output, view);
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
    std::mutex mutex;
    parallel_for(dataset.size(), args.threads, [&](std::uint64_t i) {
      if (outputs[i].empty()) return;
      std::string reason = extract_record(dataset, i, outputs[i], args.format);
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
  command->footer("The extension of each key becomes .png (or .pgm/.ppm/.pam).\nExample:\n  l3pack extract ds/ images/");
  command->callback([args] { run_extract(*args); });
}

}  // namespace l3::cli
