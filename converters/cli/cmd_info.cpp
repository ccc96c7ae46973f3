// l3pack info FILE: what an .l3i header says, and how compact the file is
// (or, for a dataset folder, run_dataset_info in cmd_ls.cpp).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "common.hpp"
#include "l3/codec/codec.hpp"
#include "l3/format/dataset.hpp"
#include "l3/common/file_io.hpp"

namespace l3::cli {
namespace {

struct InfoArguments {
  std::filesystem::path file;
  bool json = false;
};

struct InfoReport {
  ImageInfo info;
  std::uint64_t bytes = 0;  // the file's size
  double bits_per_pixel() const { return static_cast<double>(bytes) * 8.0 / pixels(); }
  double bits_per_sample() const { return bits_per_pixel() / info.channels; }
  double pixels() const { return static_cast<double>(info.width) * info.height; }
};

nlohmann::ordered_json to_json(const std::filesystem::path& file, const InfoReport& report) {
  const ImageInfo& info = report.info;
  return {{"file", file.string()},
          {"version", info.version},
          {"width", info.width},
          {"height", info.height},
          {"channels", info.channels},
          {"bit_depth", info.bit_depth},
          {"tile_width", info.tile_width},
          {"tile_height", info.tile_height},
          {"tiles_x", info.tiles_x},
          {"tiles_y", info.tiles_y},
          {"tiles", std::uint64_t{info.tiles_x} * info.tiles_y},
          {"tile_copies", info.tile_copies},
          {"symbol_patches", info.symbol_patches},
          {"bytes", report.bytes},
          {"bits_per_pixel", report.bits_per_pixel()},
          {"bits_per_sample", report.bits_per_sample()}};
}

void print_text(const std::filesystem::path& file, const InfoReport& report) {
  const ImageInfo& info = report.info;
  std::printf("file:            %s\n", file.c_str());
  std::printf("format:          .l3i version %u\n", info.version);
  std::printf("dimensions:      %u x %u\n", info.width, info.height);
  std::printf("channels:        %u (%u-bit)\n", info.channels, info.bit_depth);
  std::printf("tile size:       %u x %u\n", info.tile_width, info.tile_height);
  std::printf("tiles:           %u x %u = %llu\n", info.tiles_x, info.tiles_y,
              static_cast<unsigned long long>(std::uint64_t{info.tiles_x} * info.tiles_y));
  if (info.tile_copies) std::printf("tile copies:     %u (stored as references to earlier tiles)\n", info.tile_copies);
  if (info.symbol_patches)
    std::printf("symbol patches:  %u (blocks placed from the image's symbol dictionary)\n", info.symbol_patches);
  std::printf("bytes:           %llu\n", static_cast<unsigned long long>(report.bytes));
  std::printf("bits per pixel:  %.3f\n", report.bits_per_pixel());
  std::printf("bits per sample: %.3f\n", report.bits_per_sample());
}

void run_info(const InfoArguments& args) {
  if (std::filesystem::is_directory(args.file) || is_remote(args.file)) return run_dataset_info(args.file, args.json);
  std::vector<std::uint8_t> encoded = about_file(args.file, [&] { return read_file(args.file); });
  InfoReport report;
  report.info = about_file(args.file, [&] { return read_info(encoded); });
  report.bytes = encoded.size();
  if (args.json) std::printf("%s\n", to_json(args.file, report).dump(2).c_str());
  else print_text(args.file, report);
}

}  // namespace

void add_info_command(CLI::App& app) {
  auto args = std::make_shared<InfoArguments>();
  CLI::App* command = app.add_subcommand(
      "info", "Show an .l3i file's header and bits per pixel, or a dataset folder's summary");
  command->add_option("FILE", args->file, "An .l3i file, or a dataset folder")->required();
  command->add_flag("--json", args->json, "Machine-readable output (one JSON object)");
  command->footer("Examples:\n  l3pack info photo.l3i --json\n  l3pack info dataset/");
  command->callback([args] { run_info(*args); });
}

}  // namespace l3::cli
