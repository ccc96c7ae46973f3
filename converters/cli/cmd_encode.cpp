// l3pack encode IN OUT: an image file to .l3i.
#include <CLI/CLI.hpp>
#include <memory>

#include "common.hpp"
#include "l3/codec/codec.hpp"
#include "l3/common/file_io.hpp"

namespace l3::cli {
namespace {

struct EncodeArguments {
  std::filesystem::path input;
  std::filesystem::path output;
  EncodeOptions options;
};

void run_encode(const EncodeArguments& args) {
  Image image = about_file(args.input, [&] { return load_image(args.input); });
  std::vector<std::uint8_t> encoded = about_file(args.input, [&] { return encode(image.view(), args.options); });
  about_file(args.output, [&] { write_file_atomically(args.output, encoded); });
}

// The codec accepts tile widths that are powers of two from 16 to 256.
const CLI::Validator tile_width_check(
    [](std::string& text) -> std::string {
      unsigned long value = std::stoul(text);
      bool power_of_two = value != 0 && (value & (value - 1)) == 0;
      return power_of_two && value >= 16 && value <= 256 ? "" : "must be a power of two from 16 to 256";
    },
    "POW2 in [16 - 256]");

}  // namespace

void add_encode_command(CLI::App& app) {
  auto args = std::make_shared<EncodeArguments>();
  CLI::App* command = app.add_subcommand("encode", "Encode a PNG, JPEG, PPM/PGM/PAM image to .l3i (lossless)");
  command->add_option("IN", args->input, "Input image (format detected from its bytes)")->required();
  command->add_option("OUT", args->output, "Output .l3i file")->required();
  command->add_option("--tile-width", args->options.tile_width, "Tile width (default: the codec's)")
      ->check(CLI::Number & tile_width_check);
  command->add_option("--tile-height", args->options.tile_height,
                      "Tile height, 1..32 (default: 32, or fitted to an image whose rows repeat across 32-row tiles)")
      ->check(CLI::Range(1, 32));
  command->add_option("--effort", args->options.effort,
                      "0: fixed transform and predictor; 1: chosen per tile (default); 2: smallest of every "
                      "transform (slower, denser)")
      ->check(CLI::Range(0, 2));
  add_entropy_option(*command, args->options);
  command->footer("Example:\n  l3pack encode photo.png photo.l3i --tile-width 64 --effort 1 --entropy off");
  command->callback([args] { run_encode(*args); });
}

}  // namespace l3::cli
