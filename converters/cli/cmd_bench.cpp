// l3pack bench IMAGE|DIR...: the user-facing size and speed comparison with
// PNG on the user's own images. For every image: PNG bytes (libpng, default
// zlib level) against l3 bytes, and single-thread decode speed of each, after
// checking that both decode to the source pixels. bench/bench_codec is the
// full benchmark (more peers, the corpus, per-class bars).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

#include "common.hpp"
#include "l3/codec/codec.hpp"
#include "l3/imageio/image_io.hpp"

namespace l3::cli {
namespace {

namespace fs = std::filesystem;

struct BenchArguments {
  std::vector<fs::path> inputs;
  double min_seconds = 0.2;
  unsigned threads = 1;
};

struct Measurement {
  std::uint64_t raw = 0, png = 0, l3 = 0;
  double png_seconds = 0, l3_seconds = 0;  // per decode, fastest run
};

// Fastest of repeated runs of `decode`, repeated for at least `min_seconds`.
template <class Decode>
double fastest(double min_seconds, Decode&& decode) {
  using clock = std::chrono::steady_clock;
  double best = 1e30, total = 0;
  for (int run = 0; run < 3 || total < min_seconds; ++run) {
    const auto start = clock::now();
    decode();
    const double s = std::chrono::duration<double>(clock::now() - start).count();
    best = std::min(best, s);
    total += s;
  }
  return best;
}

Measurement measure(const fs::path& file, const BenchArguments& args) {
  return about_file(file, [&] {
    const Image image = load_image(file);
    Measurement m;
    m.raw = image.pixels.size();
    const std::vector<std::uint8_t> png = encode_png_bytes(image.view());
    const std::vector<std::uint8_t> l3 = encode(image.view());
    m.png = png.size();
    m.l3 = l3.size();
    DecodeOptions options;
    options.threads = args.threads;
    // Verify before timing: both must give back the source pixels exactly.
    if (decode_image_bytes(png).pixels != image.pixels) throw Failure{file.string(), "PNG round trip differs"};
    if (decode(l3, nullptr, options) != image.pixels) throw Failure{file.string(), "l3 round trip differs"};
    m.png_seconds = fastest(args.min_seconds, [&] { (void)decode_image_bytes(png); });
    m.l3_seconds = fastest(args.min_seconds, [&] { (void)decode(l3, nullptr, options); });
    return m;
  });
}

std::vector<fs::path> expand(const std::vector<fs::path>& inputs) {
  std::vector<fs::path> files;
  for (const fs::path& in : inputs) {
    if (!fs::is_directory(in)) {
      files.push_back(in);
      continue;
    }
    for (const auto& entry : fs::recursive_directory_iterator(in))
      if (entry.is_regular_file()) {
        std::string ext = entry.path().extension().string();
        std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
        if (ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".ppm" || ext == ".pgm")
          files.push_back(entry.path());
      }
  }
  std::sort(files.begin(), files.end());
  return files;
}

double mb_per_s(std::uint64_t bytes, double seconds) { return double(bytes) / seconds / 1e6; }

void print_row(const std::string& name, const Measurement& m) {
  std::printf("%-32.32s %10llu %10llu %6.3f %9.1f %9.1f %6.2f\n", name.c_str(), (unsigned long long)m.png,
              (unsigned long long)m.l3, double(m.l3) / double(m.png), mb_per_s(m.raw, m.png_seconds),
              mb_per_s(m.raw, m.l3_seconds), m.png_seconds / m.l3_seconds);
}

void run_bench(const BenchArguments& args) {
  const std::vector<fs::path> files = expand(args.inputs);
  if (files.empty()) throw Failure{"", "no images found (PNG, JPEG, PPM or PGM)", exit_usage};
  std::printf("%-32s %10s %10s %6s %9s %9s %6s\n", "image", "PNG bytes", "l3 bytes", "ratio", "PNG MB/s", "l3 MB/s",
              "speed");
  Measurement total;
  for (const fs::path& file : files) {
    const Measurement m = measure(file, args);
    print_row(file.filename().string(), m);
    total.raw += m.raw;
    total.png += m.png;
    total.l3 += m.l3;
    total.png_seconds += m.png_seconds;
    total.l3_seconds += m.l3_seconds;
  }
  print_row("total (" + std::to_string(files.size()) + " images)", total);
  std::printf("\nratio: l3 bytes / PNG bytes (lower is better). speed: l3 decode MB/s / PNG decode MB/s,\n"
              "decoded bytes per second on %u thread(s), fastest of repeated runs; every decode was\n"
              "checked against the source pixels first. PNG: libpng at its default zlib level.\n",
              args.threads);
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArguments>();
  CLI::App* command = app.add_subcommand(
      "bench", "Compare l3 with PNG on your images: bytes, and decode speed (pixels verified first)");
  command->add_option("IMAGES", args->inputs, "Image files or folders (PNG, JPEG, PPM, PGM)")->required();
  command->add_option("--threads", args->threads, "l3 decode threads (PNG decodes on one)")
      ->default_val(1)
      ->check(CLI::Range(0u, 1024u));
  command->add_option("--min-time", args->min_seconds, "Seconds to repeat each decode for (at least 3 runs)")
      ->default_val(0.2)
      ->check(CLI::Range(0.0, 60.0));
  command->footer("Examples:\n  l3pack bench bench/sample\n  l3pack bench photo.png --threads 0");
  command->callback([args] { run_bench(*args); });
}

}  // namespace l3::cli
