// entropy_ab: what entropy-coded tiles (spec/codec.md §4.5, §7.4) cost and save, A/B in one
// process: each image is encoded with l3::encode defaults and with entropy_coding = false, each
// stream is checked to decode to the source pixels, then timed (fastest of 2 encodes and 5
// single-thread decodes, the two variants back to back, so machine load hits both alike).
// Prints a markdown table per corpus class (the image path's first folder): bytes against
// Rice-only bytes, decode and encode time ratios, and the extra decode ns per sample.
//
// Usage: cd bench/corpus && ../../build/bench/entropy_ab [--min-saving PERCENT] */*.png
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <exception>
#include <map>
#include <string>
#include <vector>

#include "l3/codec/codec.hpp"
#include "l3/imageio/image_io.hpp"

namespace {

template <class F>
double fastest(int runs, F&& f) {
  double best = 1e30;
  for (int k = 0; k < runs; ++k) {
    const auto a = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  return best;
}

struct Totals {
  double bytes[2] = {}, decode_s[2] = {}, encode_s[2] = {}, samples = 0;
};

}  // namespace

int main(int argc, char** argv) {
  // --min-saving P: EncodeOptions::entropy_min_saving_percent of the entropy-coded variant.
  unsigned min_saving = l3::EncodeOptions{}.entropy_min_saving_percent;
  int first = 1;
  if (argc > 2 && std::string(argv[1]) == "--min-saving") {
    min_saving = unsigned(std::atoi(argv[2]));
    first = 3;
  }
  if (argc <= first) {
    std::fprintf(stderr, "usage: entropy_ab [--min-saving PERCENT] IMAGE...\n");
    return 2;
  }
  std::map<std::string, Totals> classes;
  try {
    for (int i = first; i < argc; ++i) {
      const std::string file = argv[i];
      const l3::Image img = l3::load_image(file);
      Totals& t = classes[file.substr(0, file.find('/'))];
      t.samples += double(img.pixels.size());
      for (int v = 0; v < 2; ++v) {  // 0: Rice only, 1: defaults (entropy-coded tiles where smaller)
        l3::EncodeOptions o;
        o.entropy_coding = v == 1;
        o.entropy_min_saving_percent = min_saving;
        std::vector<std::uint8_t> enc;
        t.encode_s[v] += fastest(2, [&] { enc = l3::encode(img.view(), o); });
        std::vector<std::uint8_t> out(img.pixels.size());
        const l3::MutableImageView view{out.data(), img.width, img.height, img.channels, 0};
        l3::decode(enc, view);
        if (out != img.pixels) {
          std::fprintf(stderr, "%s: does not decode to its pixels\n", file.c_str());
          return 1;
        }
        t.decode_s[v] += fastest(5, [&] { l3::decode(enc, view); });
        t.bytes[v] += double(enc.size());
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  std::printf("entropy_min_saving_percent %u\n\n", min_saving);
  std::printf("| class | bytes / Rice-only bytes | decode time x | decode ns/sample more | encode time x |\n");
  std::printf("|---|---:|---:|---:|---:|\n");
  for (const auto& [name, t] : classes)
    std::printf("| %s | %.4f | %.2f | %.2f | %.2f |\n", name.c_str(), t.bytes[1] / t.bytes[0], t.decode_s[1] / t.decode_s[0],
                (t.decode_s[1] - t.decode_s[0]) / t.samples * 1e9, t.encode_s[1] / t.encode_s[0]);
  return 0;
}
