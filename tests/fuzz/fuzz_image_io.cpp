// fuzz_image_io: bytes -> decode_image_bytes (PNG, JPEG, PNM, WebP, TIFF, BMP) with small limits.
// Properties: only l3::Error escapes; a decoded image is within the limits,
// has 1-4 channels and exactly width * height * channels bytes.
#include "fuzz_common.hpp"
#include "l3/imageio/image_io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  l3fuzz::begin();
  l3::LoadOptions opt;
  opt.limits.max_width = 2048;
  opt.limits.max_height = 2048;
  opt.limits.max_pixels = std::uint64_t{1} << 20;
  opt.accept_jpeg_warnings = size > 0 && (data[size - 1] & 1);
  try {
    const l3::Image img = l3::decode_image_bytes({data, size}, opt);
    L3_FUZZ_CHECK(img.width >= 1 && img.width <= opt.limits.max_width);
    L3_FUZZ_CHECK(img.height >= 1 && img.height <= opt.limits.max_height);
    L3_FUZZ_CHECK(std::uint64_t{img.width} * img.height <= opt.limits.max_pixels);
    L3_FUZZ_CHECK(img.channels >= 1 && img.channels <= 4);
    L3_FUZZ_CHECK(img.pixels.size() == std::size_t(img.width) * img.height * img.channels);
    L3_FUZZ_CHECK(l3::detect_image_format({data, size}) != l3::ImageFormat::unknown);
  } catch (const l3::Error& e) {
    l3fuzz::caught(e);
  }
  return 0;
}
