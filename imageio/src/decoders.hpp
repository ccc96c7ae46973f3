// Internal: one decoder per format, dispatched by decode_image_bytes().
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "l3/common/checked.hpp"
#include "l3/common/error.hpp"
#include "l3/imageio/image_io.hpp"

namespace l3::detail {

Image decode_png(std::span<const std::uint8_t> bytes, const LoadOptions& options);
Image decode_jpeg(std::span<const std::uint8_t> bytes, const LoadOptions& options);
Image decode_pnm(std::span<const std::uint8_t> bytes, const LoadOptions& options);
Image decode_webp(std::span<const std::uint8_t> bytes, const LoadOptions& options);
Image decode_tiff(std::span<const std::uint8_t> bytes, const LoadOptions& options);
Image decode_bmp(std::span<const std::uint8_t> bytes, const LoadOptions& options);

// An image of the given shape with its pixel buffer allocated, after checking the
// shape against the limits (so a forged header cannot make us allocate gigabytes).
inline Image allocate_image(std::uint64_t width, std::uint64_t height, std::uint32_t channels,
                            const Limits& limits, const char* format) {
  const std::string shape = std::to_string(width) + "x" + std::to_string(height);
  if (width == 0 || height == 0)
    throw_error(errc::corrupt_header, std::string(format) + ": empty image " + shape);
  if (channels < 1 || channels > 4)
    throw_error(errc::unsupported, std::string(format) + ": " + std::to_string(channels) + " channels");
  if (width > limits.max_width || height > limits.max_height)
    throw_error(errc::limit_exceeded, std::string(format) + ": " + shape + " exceeds the limit of " +
                std::to_string(limits.max_width) + "x" + std::to_string(limits.max_height));
  auto pixels = checked_mul<std::uint64_t>(width, height);
  if (!pixels || *pixels > limits.max_pixels)
    throw_error(errc::limit_exceeded, std::string(format) + ": " + shape + " exceeds the limit of " +
                std::to_string(limits.max_pixels) + " pixels");
  auto bytes = checked_mul<std::uint64_t>(*pixels, channels);
  if (!bytes || *bytes > SIZE_MAX) throw_error(errc::limit_exceeded, std::string(format) + ": image too large");
  Image image;
  image.width = static_cast<std::uint32_t>(width);
  image.height = static_cast<std::uint32_t>(height);
  image.channels = channels;
  image.pixels.resize(static_cast<std::size_t>(*bytes));
  return image;
}

// Checks a caller's view before an encoder reads it.
inline void check_view(const ImageView& image, const char* format) {
  if (image.data == nullptr || image.width == 0 || image.height == 0)
    throw_error(errc::invalid_argument, std::string(format) + ": empty image view");
  if (image.channels < 1 || image.channels > 4)
    throw_error(errc::invalid_argument, std::string(format) + ": channels must be 1..4, got " +
                std::to_string(image.channels));
  auto row = checked_mul<std::size_t>(image.width, image.channels);
  if (!row || (image.stride != 0 && image.stride < *row))
    throw_error(errc::invalid_argument, std::string(format) + ": stride smaller than a row");
}

inline std::size_t row_bytes(const ImageView& image) {
  return image.stride != 0 ? image.stride : std::size_t{image.width} * image.channels;
}

}  // namespace l3::detail
