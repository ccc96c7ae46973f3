// l3pack decode IN OUT: .l3i to PNG, PPM, PGM or PAM.
#include <CLI/CLI.hpp>
#include <memory>

#include "common.hpp"
#include "l3/codec/codec.hpp"
#include "l3/common/file_io.hpp"

namespace l3::cli {
namespace {

struct DecodeArguments {
  std::filesystem::path input;
  std::filesystem::path output;
};

void run_decode(const DecodeArguments& args) {
  const ImageFileKind kind = image_file_kind(args.output);  // a usage error before any work
  std::vector<std::uint8_t> encoded = about_file(args.input, [&] { return read_file(args.input); });
  ImageInfo info;
  DecodeOptions options;
  options.threads = 0;  // all cores
  std::vector<std::uint8_t> pixels = about_file(args.input, [&] { return decode(encoded, &info, options); });
  save_image(args.output, ImageView{pixels.data(), info.width, info.height, info.channels, 0}, kind);
}

}  // namespace

void add_decode_command(CLI::App& app) {
  auto args = std::make_shared<DecodeArguments>();
  CLI::App* command = app.add_subcommand("decode", "Decode an .l3i image to PNG, PPM, PGM or PAM");
  command->add_option("IN", args->input, "Input .l3i file")->required();
  command->add_option("OUT", args->output,
                      "Output image; its extension picks the format: .png, .ppm (RGB), .pgm (gray), "
                      ".pam or .pnm (any channel count)")
      ->required();
  command->footer("Example:\n  l3pack decode photo.l3i photo.png");
  command->callback([args] { run_decode(*args); });
}

}  // namespace l3::cli
