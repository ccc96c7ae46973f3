// A user of the installed l3 package (tests/test_install.sh builds it against
// `cmake --install` output): images through the codec and PNG, a dataset
// converted from a folder, and that dataset read back by the reader on the
// CPU and through the emulated GPU batch backend. Exit 0 only when every
// check holds.
//
//   l3_consumer WORK_DIR    (an empty folder it may fill)
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "l3/codec/codec.hpp"
#include "l3/convert/convert.hpp"
#include "l3/imageio/image_io.hpp"
#include "l3/reader/reader.hpp"
#include "l3/reader/reader_backend_cuda.hpp"
#include "l3/common/version.hpp"

namespace {

int failures = 0;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "l3_consumer: FAILED: %s\n", what);
    ++failures;
  }
}

constexpr std::uint32_t kWidth = 40, kHeight = 24, kChannels = 3;
constexpr std::uint32_t kImages = 3;  // one per class folder: record i has label i

std::vector<std::uint8_t> pixels(std::uint32_t seed) {
  std::vector<std::uint8_t> px(std::size_t{kWidth} * kHeight * kChannels);
  for (std::size_t i = 0; i < px.size(); ++i)
    px[i] = static_cast<std::uint8_t>((i * 7 + seed * 61 + (i / 13) * (i % 5)) & 255u);
  return px;
}

l3::ImageView view(const std::vector<std::uint8_t>& px) { return {px.data(), kWidth, kHeight, kChannels, 0}; }

// Encode and decode in memory, with the codec and with PNG (l3::imageio).
void round_trips() {
  for (std::uint32_t seed = 0; seed < kImages; ++seed) {
    const auto px = pixels(seed);
    l3::EncodeOptions options;
    options.tile_width = 16;
    options.tile_height = 8;
    const auto encoded = l3::encode(view(px), options);
    l3::ImageInfo info;
    const auto decoded = l3::decode(encoded, &info);
    check(info.width == kWidth && info.height == kHeight && info.channels == kChannels, "l3i header");
    check(decoded == px, "l3i round trip");
    const l3::Image png = l3::decode_image_bytes(l3::encode_png_bytes(view(px)));
    check(png.width == kWidth && png.height == kHeight && png.pixels == px, "PNG round trip");
  }
}

// A folder of class folders c0/, c1/, ... each with one PNG.
void write_source(const std::filesystem::path& src) {
  for (std::uint32_t i = 0; i < kImages; ++i) {
    std::string name = "c";  // (not "c" + to_string: GCC 12 -Wrestrict false positive)
    name += std::to_string(i);
    const auto folder = src / name;
    std::filesystem::create_directories(folder);
    l3::save_png(folder / "image.png", view(pixels(i)));
  }
}

// One epoch in one batch, unscaled uint8 HWC: each example equals its source image.
void read_back(const std::filesystem::path& dataset, std::shared_ptr<l3::BatchBackend> backend, const char* what) {
  l3::ReaderOptions options;
  options.batch_size = kImages;
  options.workers = 1;
  options.shuffle = false;
  options.transform.width = kWidth;
  options.transform.height = kHeight;
  options.transform.crop = l3::CropMode::full;
  options.transform.flip_probability = 0;
  options.transform.layout = l3::Layout::hwc;
  options.transform.dtype = l3::DType::uint8;
  options.batch_backend = std::move(backend);
  l3::Reader reader = l3::Reader::open(dataset, options);
  check(reader.batches_in_epoch() == 1, what);
  const l3::Batch* batch = reader.next();
  check(batch != nullptr && batch->size == kImages && batch->device == -1, what);
  if (batch == nullptr || batch->size != kImages) return;
  const std::size_t example = std::size_t{kWidth} * kHeight * kChannels;
  for (std::uint32_t k = 0; k < kImages; ++k) {
    const auto label = batch->labels[k];
    check(label >= 0 && label < static_cast<std::int64_t>(kImages), what);
    if (label < 0 || label >= static_cast<std::int64_t>(kImages)) continue;
    const auto want = pixels(static_cast<std::uint32_t>(label));
    check(std::memcmp(static_cast<const std::uint8_t*>(batch->data) + k * example, want.data(), example) == 0, what);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: l3_consumer WORK_DIR\n");
    return 2;
  }
  try {
    const std::filesystem::path work = argv[1];
    check(std::string(l3::version()) == L3_EXPECTED_VERSION, "l3::version() is the package's version");
    round_trips();
    write_source(work / "src");
    l3::ConvertOptions convert;
    convert.threads = 1;
    const l3::ConvertReport report = l3::convert_dataset(work / "src", work / "dataset", convert);
    check(report.images == kImages && report.skipped == 0, "convert_dataset converted every image");
    read_back(work / "dataset", nullptr, "reader (CPU) gives the source pixels");
    read_back(work / "dataset", l3::make_emulated_gpu_batch_backend(), "reader (emulated GPU batch backend)");
#ifdef L3_HAVE_CUDA
    // l3::reader_cuda links: its device query runs (no device is fine).
    std::printf("l3_consumer: CUDA devices: %d\n", l3::cuda_device_count());
#endif
  } catch (const l3::Error& e) {
    std::fprintf(stderr, "l3_consumer: %s\n", e.what());
    return 1;
  }
  if (failures != 0) return 1;
  std::printf("l3_consumer: l3 %s: codec, PNG, convert and reader checks passed\n", l3::version());
  return 0;
}
