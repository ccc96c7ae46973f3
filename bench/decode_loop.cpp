// decode_loop: single-thread l3::decode time of encoded streams, for A/B runs of two decoder builds
// on a loaded machine. Each stream is decoded ROUNDS times and its fastest decode by thread CPU time
// (CLOCK_THREAD_CPUTIME_ID: time the process waited for a core does not count, so two builds
// alternating on a shared machine compare better than by wall-clock time) is summed over the streams.
//
// Usage:
//   decode_loop encode [--rice-only | --entropy MODE] [--no-plane-contexts] [--no-corrections] [--no-compact-tables] [--no-bilevel] [--no-diagonals] [--no-bit-planes] [--no-ramps] [--no-symbols] [--effort N] DIR IMAGE...
//                                                   encode with l3::encode defaults (or Rice codes only,
//                                                   or l3pack's --entropy MODE; without version 7's
//                                                   plane contexts; without version 8's corrections;
//                                                   without version 9's compact tables),
//                                                   check each stream decodes to the image, write DIR/N.l3i
//   decode_loop decode ROUNDS STREAM...             print the summed fastest decode seconds, bytes and
//                                                   l3::cpu_decode_path() (L3_MAX_ISA picks another)
// Encode once with one build, then decode the same streams with each build, alternating, e.g.
//   cd bench/corpus && ../../build/bench/decode_loop encode /tmp/s photos/*.png jpeg_photos/*.png
//   for i in 1 2 3; do A/decode_loop decode 7 /tmp/s/*.l3i; B/decode_loop decode 7 /tmp/s/*.l3i; done
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <fstream>
#include <string>
#include <vector>

#include "bench_io.hpp"
#include "l3/codec/codec.hpp"
#include "l3/imageio/image_io.hpp"

namespace {

double thread_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

int encode_all(int argc, char** argv) {
  int first = 2;
  l3::EncodeOptions options;
  if (argc > first && std::string(argv[first]) == "--rice-only") {
    options.entropy_coding = false;
    ++first;
  } else if (argc > first + 1 && std::string(argv[first]) == "--entropy") {
    l3::set_entropy_mode(options, argv[first + 1]);
    first += 2;
  }
  if (argc > first && std::string(argv[first]) == "--no-plane-contexts") {
    options.plane_contexts = false;
    ++first;
  }
  if (argc > first && std::string(argv[first]) == "--no-corrections") {
    options.corrections = false;
    ++first;
  }
  if (argc > first && std::string(argv[first]) == "--no-compact-tables") {
    options.compact_tables = false;
    ++first;
  }
  if (argc > first && std::string(argv[first]) == "--no-bilevel") {
    options.bilevel = false;
    ++first;
  }
  if (argc > first && std::string(argv[first]) == "--no-diagonals") {
    options.diagonals = false;
    ++first;
  }
  if (argc > first && std::string(argv[first]) == "--no-bit-planes") {
    options.bilevel_templates = false;
    ++first;
  }
  if (argc > first && std::string(argv[first]) == "--no-ramps") {
    options.ramps = false;
    ++first;
  }
  if (argc > first && std::string(argv[first]) == "--no-symbols") {
    options.symbols = false;
    ++first;
  }
  if (argc > first + 1 && std::string(argv[first]) == "--effort") {
    options.effort = std::atoi(argv[first + 1]);
    first += 2;
  }
  if (argc < first + 2) return 2;
  const std::string dir = argv[first];
  for (int i = first + 1; i < argc; ++i) {
    const l3::Image img = l3::load_image(argv[i]);
    const std::vector<std::uint8_t> enc = l3::encode(img.view(), options);
    if (l3::decode(enc) != img.pixels) throw std::runtime_error(std::string(argv[i]) + ": decodes to other pixels");
    const std::string out = dir + "/" + std::to_string(i - first - 1) + ".l3i";
    std::ofstream(out, std::ios::binary).write(reinterpret_cast<const char*>(enc.data()), std::streamsize(enc.size()));
  }
  return 0;
}

int decode_all(int argc, char** argv) {
  if (argc < 4) return 2;
  const int rounds = std::max(1, std::atoi(argv[2]));
  double total = 0;
  std::size_t bytes = 0;
  for (int i = 3; i < argc; ++i) {
    const std::vector<std::uint8_t> enc = l3bench::read_file(argv[i]);
    bytes += enc.size();
    const l3::ImageInfo info = l3::read_info(enc);
    std::vector<std::uint8_t> out(info.decoded_size());
    const l3::MutableImageView view{out.data(), info.width, info.height, info.channels, 0};
    l3::DecodeOptions options;
    options.threads = 1;
    double best = 1e30;
    for (int r = 0; r < rounds; ++r) {
      const double start = thread_seconds();
      l3::decode(enc, view, options);
      best = std::min(best, thread_seconds() - start);
    }
    total += best;
  }
  std::printf("%.5f s  %zu bytes  %d streams  path %s\n", total, bytes, argc - 3, l3::cpu_decode_path());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    int status = 2;
    if (mode == "encode") status = encode_all(argc, argv);
    else if (mode == "decode") status = decode_all(argc, argv);
    if (status == 2)
      std::fprintf(stderr, "usage: decode_loop encode [--rice-only | --entropy MODE] [--no-plane-contexts] [--no-corrections] [--no-compact-tables] [--no-bilevel] [--no-diagonals] [--no-bit-planes] [--no-ramps] [--no-symbols] [--effort N] DIR IMAGE... | decode_loop decode ROUNDS STREAM...\n");
    return status;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "decode_loop: %s\n", e.what());
    return 1;
  }
}
