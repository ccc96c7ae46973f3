#include "l3/imageio/image_io.hpp"

#include <algorithm>
#include <array>

#include "decoders.hpp"
#include "l3/common/file_io.hpp"

namespace l3 {
namespace {

bool starts_with(std::span<const std::uint8_t> bytes, std::span<const std::uint8_t> magic) {
  return bytes.size() >= magic.size() && std::equal(magic.begin(), magic.end(), bytes.begin());
}

bool is_pnm_magic(std::span<const std::uint8_t> bytes) {
  if (bytes.size() < 3 || bytes[0] != 'P' || bytes[1] < '1' || bytes[1] > '7') return false;
  const std::uint8_t c = bytes[2];
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '#';
}

}  // namespace

ImageFormat detect_image_format(std::span<const std::uint8_t> bytes) noexcept {
  static constexpr std::array<std::uint8_t, 8> png_magic{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  static constexpr std::array<std::uint8_t, 3> jpeg_magic{0xff, 0xd8, 0xff};  // SOI + a marker
  if (starts_with(bytes, png_magic)) return ImageFormat::png;
  if (starts_with(bytes, jpeg_magic)) return ImageFormat::jpeg;
  if (is_pnm_magic(bytes)) return ImageFormat::pnm;
  static constexpr std::array<std::uint8_t, 4> riff{'R', 'I', 'F', 'F'}, webp{'W', 'E', 'B', 'P'};
  if (starts_with(bytes, riff) && bytes.size() >= 12 && starts_with(bytes.subspan(8), webp)) return ImageFormat::webp;
  static constexpr std::array<std::uint8_t, 4> tiff_le{'I', 'I', 42, 0}, tiff_be{'M', 'M', 0, 42};
  if (starts_with(bytes, tiff_le) || starts_with(bytes, tiff_be)) return ImageFormat::tiff;
  static constexpr std::array<std::uint8_t, 2> bmp{'B', 'M'};
  if (starts_with(bytes, bmp) && bytes.size() >= 18) return ImageFormat::bmp;
  return ImageFormat::unknown;
}

Image decode_image_bytes(std::span<const std::uint8_t> bytes, const LoadOptions& options) {
  switch (detect_image_format(bytes)) {
    case ImageFormat::png: return detail::decode_png(bytes, options);
    case ImageFormat::jpeg: return detail::decode_jpeg(bytes, options);
    case ImageFormat::pnm: return detail::decode_pnm(bytes, options);
    case ImageFormat::webp: return detail::decode_webp(bytes, options);
    case ImageFormat::tiff: return detail::decode_tiff(bytes, options);
    case ImageFormat::bmp: return detail::decode_bmp(bytes, options);
    case ImageFormat::unknown: break;
  }
  throw_error(errc::bad_magic, bytes.empty() ? "empty file" : "not a PNG, JPEG, PNM, WebP, TIFF or BMP file");
}

Image load_image(const std::filesystem::path& path, const LoadOptions& options) {
  return decode_image_bytes(read_file(path), options);
}

void save_png(const std::filesystem::path& path, const ImageView& image, int compression_level) {
  write_file_atomically(path, encode_png_bytes(image, compression_level));
}

void save_pnm(const std::filesystem::path& path, const ImageView& image) {
  write_file_atomically(path, encode_pnm_bytes(image));
}

}  // namespace l3
