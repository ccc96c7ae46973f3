// Issue 3's bit-exactness bar on the whole corpus: every corpus image decoded
// by the CUDA kernels' decomposition run on the CPU (l3_cuda_emu: the same
// plan, scans and per-warp wavefront code as the GPU) must equal l3::decode
// and the source pixels, image by image and as one batch.
//   check_wavefront_corpus [CORPUS_DIR]   (default bench/corpus; exit 1 on any mismatch)
#include <algorithm>
#include <optional>
#include <span>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "l3/codec/codec.hpp"
#include "l3/cuda/emulation.hpp"
#include "l3/imageio/image_io.hpp"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  const fs::path corpus = argc > 1 ? fs::path(argv[1]) : fs::path(L3_BENCH_SOURCE_DIR) / "bench" / "corpus";
  std::vector<fs::path> files;
  for (const char* cls : {"photos", "jpeg_photos", "graphics", "synthetic", "rgba_opaque"})
    if (fs::is_directory(corpus / cls))
      for (const auto& e : fs::directory_iterator(corpus / cls))
        if (e.path().extension() == ".png") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "no corpus images under %s (run bench/fetch_corpus.sh)\n", corpus.c_str());
    return 2;
  }
  std::vector<std::vector<std::uint8_t>> encoded, sources;
  std::vector<l3::cuda::HostImage> batch;
  int bad = 0;
  std::uint64_t pixels = 0;
  for (const fs::path& f : files) {
    const l3::Image img = l3::load_image(f);
    encoded.push_back(l3::encode(img.view()));
    sources.push_back(img.pixels);
    const std::vector<std::uint8_t> cpu = l3::decode(encoded.back());
    std::vector<std::uint8_t> wave(img.pixels.size());
    l3::cuda::emu::decode_image_wavefront(encoded.back(),
                                          l3::MutableImageView{wave.data(), img.width, img.height, img.channels, 0});
    const bool ok = cpu == img.pixels && wave == cpu;
    bad += !ok;
    pixels += std::uint64_t{img.width} * img.height;
    std::printf("%-40s %5ux%-5u x%u  %s\n", f.filename().c_str(), img.width, img.height, img.channels,
                ok ? "wavefront == l3::decode == source" : "MISMATCH");
  }
  for (const auto& e : encoded) batch.push_back(l3::cuda::HostImage{std::span<const std::uint8_t>(e), std::nullopt});
  const l3::cuda::emu::BatchOutput out = l3::cuda::emu::decode_batch(batch);
  int batch_bad = 0;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const l3::cuda::ImageSlot& s = out.slots[i];
    const bool ok = s.status == l3::errc::ok && s.size == sources[i].size() &&
                    std::equal(sources[i].begin(), sources[i].end(), out.pixels.begin() + std::ptrdiff_t(s.offset));
    batch_bad += !ok;
  }
  std::printf("\n%zu images, %.1f Mpixels: %zu equal image by image, %zu equal in one batch of %zu\n", files.size(),
              double(pixels) / 1e6, files.size() - std::size_t(bad), batch.size() - std::size_t(batch_bad),
              batch.size());
  return bad || batch_bad ? 1 : 0;
}
