// bench_inproc: the in-process (C++, single-thread) figures behind bench/peers.py. For each
// image: PNG through libpng at zlib level 6 (libpng's default, the denominator of every ratio)
// and level 9, both with libpng's default adaptive filters, and l3 (l3::encode defaults,
// l3::decode threads=1). Bytes, fastest encode and fastest decode, each output checked against
// the source pixels before it is timed. One tab-separated line per image on stdout.
//
// Timing: an encode repeats until >= 1 run and >= min_time/2 seconds, a decode until >= 3 runs
// and >= min_time seconds; the fastest run counts. Decodes write into a preallocated buffer.
// --cpu-time times every run by the thread's CPU time instead of wall-clock time (both codecs run
// on this one thread): on a shared or virtual machine, time the core was lent elsewhere drops out.
//
// Usage: bench_inproc [--min-time S] [--cpu-time] [--no-png9] [--rice-only] [--no-pixel-copies] [--no-plane-contexts]
//                     [--no-corrections] [--no-compact-tables] [--no-bilevel] [--no-diagonals] [--no-bit-planes] [--no-ramps] [--effort N] [--entropy MODE]
//                     IMAGE...
// --no-png9 skips PNG level 9 (its columns read 0): the slowest part, not a denominator.
// --rice-only encodes l3 without entropy-coded tiles (EncodeOptions::entropy_coding = false:
// version 2 streams, Rice codes only), to see what those tiles cost in decode time.
// --no-pixel-copies encodes without version 6's pixel copies (EncodeOptions::pixel_copies =
// false); --no-plane-contexts without version 7's plane contexts (EncodeOptions::plane_contexts =
// false); --no-corrections without version 8's residual corrections (EncodeOptions::corrections =
// false); --no-bit-planes without version 13's bit planes and templates (EncodeOptions::
// bilevel_templates = false); --no-ramps without version 14's ramps (EncodeOptions::ramps = false); --effort N encodes at effort N (EncodeOptions::effort, default 1); --entropy MODE sets
// the entropy setting as l3pack's --entropy does (auto, off, max or a percentage).
#include <algorithm>
#include <limits>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_io.hpp"
#include "l3/codec/codec.hpp"
#include "l3/imageio/image_io.hpp"

namespace {

using l3bench::fastest_run;
using l3bench::RunClock;
constexpr int kAnyRuns = std::numeric_limits<int>::max();  // fastest_run: no cap on the runs

struct Coded {
  std::size_t bytes = 0;
  double encode_s = 0, decode_s = 0;
};

void check_equal(const std::vector<std::uint8_t>& got, const l3::Image& src, const char* codec,
                 const std::string& file) {
  if (got.size() < src.pixels.size() || !std::equal(src.pixels.begin(), src.pixels.end(), got.begin()))
    throw std::runtime_error(file + ": " + codec + " does not decode to the source pixels");
}

Coded measure_png(const l3::Image& img, int level, double min_time, RunClock run_clock, const std::string& file) {
  std::vector<std::uint8_t> png = l3::encode_png_bytes(img.view(), level);
  Coded c;
  c.bytes = png.size();
  c.encode_s = fastest_run([&] { png = l3::encode_png_bytes(img.view(), level); }, 1, min_time / 2, kAnyRuns, run_clock);
  std::vector<std::uint8_t> out(img.pixels.size());
  l3bench::decode_png_libpng(png, out.data(), out.size());
  check_equal(out, img, level == 9 ? "PNG level 9" : "PNG level 6", file);
  c.decode_s = fastest_run([&] { l3bench::decode_png_libpng(png, out.data(), out.size()); }, 3, min_time, kAnyRuns, run_clock);
  return c;
}

Coded measure_l3(const l3::Image& img, const l3::EncodeOptions& eo, double min_time, RunClock run_clock,
                 const std::string& file) {
  std::vector<std::uint8_t> enc = l3::encode(img.view(), eo);
  Coded c;
  c.bytes = enc.size();
  c.encode_s = fastest_run([&] { enc = l3::encode(img.view(), eo); }, 1, min_time / 2, kAnyRuns, run_clock);
  std::vector<std::uint8_t> out(img.pixels.size());
  const l3::MutableImageView view{out.data(), img.width, img.height, img.channels, 0};
  l3::DecodeOptions options;
  options.threads = 1;
  l3::decode(enc, view, options);
  check_equal(out, img, "l3", file);
  c.decode_s = fastest_run([&] { l3::decode(enc, view, options); }, 3, min_time, kAnyRuns, run_clock);
  return c;
}

void print(const Coded& c) { std::printf("\t%zu\t%.6g\t%.6g", c.bytes, c.encode_s, c.decode_s); }

}  // namespace

int main(int argc, char** argv) {
  double min_time = 0.2;
  RunClock run_clock = RunClock::wall;
  bool png9 = true;
  l3::EncodeOptions eo;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--min-time" && i + 1 < argc) {
      min_time = std::atof(argv[++i]);
    } else if (a == "--cpu-time") {
      run_clock = RunClock::thread_cpu;
    } else if (a == "--no-png9") {
      png9 = false;
    } else if (a == "--rice-only") {
      eo.entropy_coding = false;
    } else if (a == "--no-pixel-copies") {
      eo.pixel_copies = false;
    } else if (a == "--no-plane-contexts") {
      eo.plane_contexts = false;
    } else if (a == "--no-corrections") {
      eo.corrections = false;
    } else if (a == "--no-compact-tables") {
      eo.compact_tables = false;
    } else if (a == "--no-bilevel") {
      eo.bilevel = false;
    } else if (a == "--no-diagonals") {
      eo.diagonals = false;
    } else if (a == "--no-bit-planes") {
      eo.bilevel_templates = false;
    } else if (a == "--no-ramps") {
      eo.ramps = false;
    } else if (a == "--effort" && i + 1 < argc) {
      eo.effort = std::atoi(argv[++i]);
    } else if (a == "--entropy" && i + 1 < argc) {
      try {
        l3::set_entropy_mode(eo, argv[++i]);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_inproc: %s\n", e.what());
        return 2;
      }
    } else if (a == "-h" || a == "--help") {
      std::printf("usage: bench_inproc [--min-time S] [--cpu-time] [--no-png9] [--rice-only] [--no-pixel-copies] [--no-plane-contexts] [--no-corrections] [--no-compact-tables] [--no-bilevel] [--no-diagonals] [--no-bit-planes] [--no-ramps] [--effort N] [--entropy MODE] IMAGE...\n");
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "bench_inproc: unknown option %s\n", a.c_str());
      return 2;
    } else {
      files.push_back(a);
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "bench_inproc: no images (usage: bench_inproc [--min-time S] [--cpu-time] [--no-png9] [--rice-only] "
                         "[--no-pixel-copies] [--no-plane-contexts] [--no-corrections] [--no-compact-tables] [--no-bilevel] [--no-diagonals] [--no-bit-planes] [--no-ramps] [--effort N] [--entropy MODE] IMAGE...)\n");
    return 2;
  }
  std::printf("file\traw\tpng6\tpng6_enc_s\tpng6_dec_s\tpng9\tpng9_enc_s\tpng9_dec_s\tl3\tl3_enc_s\tl3_dec_s\n");
  try {
    for (const std::string& f : files) {
      const l3::Image img = l3::load_image(f);
      std::printf("%s\t%zu", f.c_str(), img.pixels.size());
      print(measure_png(img, 6, min_time, run_clock, f));
      print(png9 ? measure_png(img, 9, min_time, run_clock, f) : Coded{});
      print(measure_l3(img, eo, min_time, run_clock, f));
      std::printf("\n");
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_inproc: %s\n", e.what());
    return 1;
  }
  return 0;
}
