// Image file I/O for l3: PNG, JPEG, PNM (PGM/PPM/PAM), WebP, TIFF and BMP in
// (WebP through libwebp, TIFF through libtiff, BMP by hand; channels as PIL's
// modes: webp_io.cpp, tiff_io.cpp, bmp_io.cpp say which files), PNG and PNM out.
//
// Everything is 8-bit interleaved (channels: 1 gray, 2 gray+alpha, 3 RGB,
// 4 RGBA), the pixel model of the codec (l3/codec/codec.hpp). Loading is lossless
// or it fails: 16-bit PNG and PNM maxval other than 255 are rejected with
// errc::unsupported rather than reduced to 8 bits.
//
// Errors are l3::Error (l3/common/error.hpp):
//   bad_magic       not a PNG, JPEG, PNM, WebP, TIFF or BMP file (magic bytes, never the name)
//   truncated       the file ends early
//   corrupt_header  any other malformed byte (bad header, CRC, zlib or entropy-coded data)
//   unsupported     valid but not representable losslessly here (16-bit, maxval != 255)
//   limit_exceeded  larger than LoadOptions::limits (checked before allocating)
//   io_error        the file cannot be read or written
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "l3/codec/codec.hpp"  // ImageView, Limits (header-only types)

namespace l3 {

struct Image {
  std::uint32_t width = 0;
  std::uint32_t height = 0;
  std::uint32_t channels = 0;
  std::vector<std::uint8_t> pixels;  // height rows of width * channels bytes, no padding

  ImageView view() const { return {pixels.data(), width, height, channels, 0}; }
};

enum class ImageFormat { unknown, png, jpeg, pnm, webp, tiff, bmp };

// The format named by the first bytes, or unknown.
ImageFormat detect_image_format(std::span<const std::uint8_t> bytes) noexcept;

struct LoadOptions {
  Limits limits{};  // width, height and pixel count caps, checked before allocating
  // libjpeg-turbo "warnings" mean corrupt or truncated entropy-coded data that it
  // would paper over with gray. They are errors unless this is set.
  bool accept_jpeg_warnings = false;
  // Warnings about bytes outside the image data (extraneous bytes before a
  // marker, a JFIF 2.x header, ...) are accepted unless this is set.
  bool strict_jpeg = false;
  // 16-bit PNG samples are reduced to 8 bits (the high byte, v >> 8, as PIL's
  // RGB;16B / RGBA;16B unpackers do) instead of being refused as unsupported.
  bool convert_16bit = false;
};

// Decodes a PNG, JPEG or PNM file held in memory. JPEG pixels are exactly those of
// libjpeg-turbo's default decode (islow IDCT, fancy upsampling); CMYK and YCCK
// are then converted to RGB as PIL does (jpeg_io.cpp). PNG: palette becomes
// RGB, or RGBA when the file has tRNS; a tRNS colour key on gray/RGB becomes an alpha
// channel; 1/2/4-bit gray is scaled to 8 bits (v * 255 / (2^depth - 1)); interlacing
// is undone. PNM: P2, P3, P5, P6 and P7 (PAM, depth 1-4), maxval 255 only.
Image decode_image_bytes(std::span<const std::uint8_t> bytes, const LoadOptions& options = {});

// Reads a file and decodes it as above.
Image load_image(const std::filesystem::path& path, const LoadOptions& options = {});

// zlib level for PNG output: -1 is zlib's default (6), 0 stores, 9 is smallest.
inline constexpr int png_default_compression = -1;

// PNG of the image (colour type from channels, 8-bit, no interlace, libpng's default filters).
std::vector<std::uint8_t> encode_png_bytes(const ImageView& image,
                                           int compression_level = png_default_compression);

// Binary PNM: P5 (PGM) for 1 channel, P6 (PPM) for 3, P7 (PAM, TUPLTYPE GRAYSCALE_ALPHA
// or RGB_ALPHA) for 2 and 4, since PGM/PPM cannot hold alpha. maxval 255.
std::vector<std::uint8_t> encode_pnm_bytes(const ImageView& image);

// Write to a temporary file next to `path`, then rename: a failure never leaves a
// partial output file, and an existing file is replaced only by a complete one.
void save_png(const std::filesystem::path& path, const ImageView& image,
              int compression_level = png_default_compression);
void save_pnm(const std::filesystem::path& path, const ImageView& image);

}  // namespace l3
