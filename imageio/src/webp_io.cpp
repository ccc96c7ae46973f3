// WebP through libwebp's simple decoding API (still images; an animation is
// unsupported). Pixels are libwebp's default decode, as PIL's WebP plugin gets
// them: RGB, or RGBA (not premultiplied) when the file has alpha.
#include <webp/decode.h>

#include <string>

#include "decoders.hpp"

namespace l3::detail {

Image decode_webp(std::span<const std::uint8_t> bytes, const LoadOptions& options) {
  WebPBitstreamFeatures features{};
  const VP8StatusCode status = WebPGetFeatures(bytes.data(), bytes.size(), &features);
  if (status == VP8_STATUS_NOT_ENOUGH_DATA) throw_error(errc::truncated, "WebP: the file ends in the header");
  if (status != VP8_STATUS_OK) throw_error(errc::corrupt_header, "WebP: bad header (libwebp status " +
                                                                     std::to_string(int{status}) + ")");
  if (features.has_animation) throw_error(errc::unsupported, "animated WebP");
  const std::uint32_t channels = features.has_alpha ? 4 : 3;
  Image image = allocate_image(static_cast<std::uint32_t>(features.width), static_cast<std::uint32_t>(features.height),
                               channels, options.limits, "WebP");
  const int stride = features.width * static_cast<int>(channels);
  const std::uint8_t* done =
      channels == 4 ? WebPDecodeRGBAInto(bytes.data(), bytes.size(), image.pixels.data(), image.pixels.size(), stride)
                    : WebPDecodeRGBInto(bytes.data(), bytes.size(), image.pixels.data(), image.pixels.size(), stride);
  if (done == nullptr) throw_error(errc::corrupt_header, "WebP: the image data cannot be decoded (corrupt or truncated)");
  return image;
}

}  // namespace l3::detail
