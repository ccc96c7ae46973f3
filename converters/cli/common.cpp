#include "common.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <thread>

#include "l3/common/text.hpp"

namespace l3::cli {

int exit_code_for(errc code) {
  // An invalid argument reaching the library means a bad option value.
  return code == errc::invalid_argument ? exit_usage : exit_failure;
}

ImageFileKind image_file_kind(const std::filesystem::path& output) {
  std::string extension = output.extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (extension == ".png") return ImageFileKind::png;
  if (extension == ".pgm") return ImageFileKind::pgm;
  if (extension == ".ppm") return ImageFileKind::ppm;
  if (extension == ".pam") return ImageFileKind::pam;
  if (extension == ".pnm") return ImageFileKind::pnm;
  throw Failure{output.string(), "unknown output extension '" + extension + "' (use .png, .ppm, .pgm, .pam or .pnm)",
                exit_usage};
}

void save_image(const std::filesystem::path& output, const ImageView& image, ImageFileKind kind) {
  if (kind == ImageFileKind::pgm && image.channels != 1)
    throw Failure{output.string(), "a .pgm file holds 1 channel, the image has " + std::to_string(image.channels) +
                                       " (write .png or .pam)"};
  if (kind == ImageFileKind::ppm && image.channels != 3)
    throw Failure{output.string(), "a .ppm file holds 3 channels, the image has " + std::to_string(image.channels) +
                                       " (write .png or .pam)"};
  about_file(output, [&] {
    if (kind == ImageFileKind::png) save_png(output, image);
    else save_pnm(output, image);  // P5, P6 or P7 (PAM) by channel count
  });
}

void print_failures(std::vector<RecordFailure> failures, std::size_t limit) {
  std::sort(failures.begin(), failures.end(),
            [](const RecordFailure& a, const RecordFailure& b) { return a.index < b.index; });
  const std::size_t shown = std::min(limit, failures.size());
  if (shown < failures.size()) std::fprintf(stderr, "first %zu of %zu failures:\n", shown, failures.size());
  for (std::size_t i = 0; i < shown; ++i)
    std::fprintf(stderr, "  record %llu (%s): %s\n", static_cast<unsigned long long>(failures[i].index),
                 failures[i].key.empty() ? "no key" : escape_control(failures[i].key).c_str(),
                 escape_control(failures[i].reason).c_str());
}

void add_entropy_option(CLI::App& command, EncodeOptions& options) {
  command
      .add_option_function<std::string>(
          "--entropy", [&options](const std::string& mode) { set_entropy_mode(options, mode); },
          "Entropy coding: auto (default: rANS tiles where they save >= 7% of a tile's bytes and 0.06 bytes a "
          "pixel), off (Rice codes only: a format v2 stream (v4 with zero rows), the fastest CPU decode, ~7% "
          "larger), max (rANS wherever smaller), or a percentage P (rANS where it saves >= P% and 0.06 bytes a "
          "pixel; 0 as max)")
      ->check([](const std::string& mode) -> std::string {
        EncodeOptions probe;
        try {
          set_entropy_mode(probe, mode);
          return "";
        } catch (const Error&) {
          return "must be auto, off, max or a percentage 0..100";
        }
      });
}

}  // namespace l3::cli

