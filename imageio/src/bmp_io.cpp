// BMP, written by hand (the format is a header and rows; no library among the
// dependencies reads it). Read as PIL's BmpImagePlugin reads it:
//   24-bit BI_RGB -> RGB; 32-bit BI_RGB -> RGB (PIL's "BGRX": the fourth byte
//   is ignored); 32-bit BI_BITFIELDS with masks B,G,R(,A) = 0xff, 0xff00,
//   0xff0000 (, 0xff000000) -> RGB (RGBA with the alpha mask);
//   1/4/8-bit BI_RGB with a palette -> RGB, or 1 channel when the palette is
//   PIL's greyscale ramp (entry i = (i,i,i); 2 colours: black, white), whose
//   value is then the index (2 colours: 0 or 255).
// Rows are padded to 4 bytes and stored bottom-up unless the height is negative.
// RLE and 16-bit files are errc::unsupported.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "decoders.hpp"

namespace l3 {
namespace {

std::uint32_t le32(std::span<const std::uint8_t> b, std::size_t at) {
  return std::uint32_t{b[at]} | std::uint32_t{b[at + 1]} << 8 | std::uint32_t{b[at + 2]} << 16 |
         std::uint32_t{b[at + 3]} << 24;
}
std::uint16_t le16(std::span<const std::uint8_t> b, std::size_t at) {
  return static_cast<std::uint16_t>(b[at] | b[at + 1] << 8);
}

struct BmpHeader {
  std::uint32_t data_offset = 0, header_size = 0, width = 0, height = 0, compression = 0, colors = 0;
  bool top_down = false;
  std::uint16_t bits = 0;
  std::uint32_t masks[4] = {};  // R, G, B, A for BI_BITFIELDS
};

constexpr std::uint32_t kBiRgb = 0, kBiBitfields = 3, kBiAlphaBitfields = 6;

BmpHeader read_header(std::span<const std::uint8_t> b) {
  if (b.size() < 26) throw_error(errc::truncated, "BMP: the file ends in the header");
  BmpHeader h;
  h.data_offset = le32(b, 10);
  h.header_size = le32(b, 14);
  if (h.header_size == 12) {  // OS/2 1.x BITMAPCOREHEADER
    h.width = le16(b, 18);
    h.height = le16(b, 20);
    h.bits = le16(b, 24);
    return h;
  }
  if (h.header_size < 40) throw_error(errc::corrupt_header, "BMP: header size " + std::to_string(h.header_size));
  if (b.size() < 14 + std::size_t{h.header_size} || b.size() < 54) throw_error(errc::truncated, "BMP: the file ends in the header");
  const auto height = static_cast<std::int32_t>(le32(b, 22));
  const auto width = static_cast<std::int32_t>(le32(b, 18));
  if (width <= 0 || height == 0 || height == INT32_MIN) throw_error(errc::corrupt_header, "BMP: bad dimensions");
  h.width = static_cast<std::uint32_t>(width);
  h.top_down = height < 0;
  h.height = static_cast<std::uint32_t>(height < 0 ? -height : height);
  h.bits = le16(b, 28);
  h.compression = le32(b, 30);
  h.colors = le32(b, 46);
  if (h.compression == kBiBitfields || h.compression == kBiAlphaBitfields) {
    // Masks follow a 40-byte header (3 or 4 of them) or are part of a V2+ header.
    const std::size_t at = 54;
    const std::size_t count = h.header_size >= 56 || h.compression == kBiAlphaBitfields ? 4 : 3;
    if (b.size() < at + 4 * count) throw_error(errc::truncated, "BMP: the file ends in the colour masks");
    for (std::size_t k = 0; k < count; ++k) h.masks[k] = le32(b, at + 4 * k);
  }
  return h;
}

// Channels l3 stores, and whether the palette is PIL's greyscale ramp.
struct BmpLayout {
  std::uint32_t channels = 3;
  bool greyscale = false;
  std::uint32_t colors = 0;
  std::vector<std::uint8_t> palette;  // RGB triples
};

BmpLayout layout_of(std::span<const std::uint8_t> b, const BmpHeader& h) {
  BmpLayout layout;
  if (h.compression == kBiBitfields || h.compression == kBiAlphaBitfields) {
    const bool bgr = h.masks[0] == 0xff0000 && h.masks[1] == 0xff00 && h.masks[2] == 0xff;
    if (h.bits != 32 || !bgr || (h.masks[3] != 0 && h.masks[3] != 0xff000000u))
      throw_error(errc::unsupported, "BMP: " + std::to_string(h.bits) + "-bit colour masks other than BGR(A)");
    layout.channels = h.masks[3] ? 4 : 3;
    return layout;
  }
  if (h.compression != kBiRgb) throw_error(errc::unsupported, "BMP: compression " + std::to_string(h.compression) + " (RLE)");
  if (h.bits == 24 || h.bits == 32) return layout;
  if (h.bits != 1 && h.bits != 4 && h.bits != 8) throw_error(errc::unsupported, "BMP: " + std::to_string(h.bits) + "-bit pixels");
  const std::uint32_t max_colors = 1u << h.bits;
  const std::uint32_t colors = h.colors == 0 || h.colors > max_colors ? max_colors : h.colors;
  const std::size_t entry = h.header_size == 12 ? 3 : 4, at = 14 + std::size_t{h.header_size};
  if (b.size() < at + entry * colors) throw_error(errc::truncated, "BMP: the file ends in the palette");
  layout.colors = colors;
  layout.palette.assign(std::size_t{max_colors} * 3, 0);
  layout.greyscale = true;
  for (std::uint32_t i = 0; i < colors; ++i) {
    const std::uint8_t blue = b[at + entry * i], green = b[at + entry * i + 1], red = b[at + entry * i + 2];
    layout.palette[3 * i] = red;
    layout.palette[3 * i + 1] = green;
    layout.palette[3 * i + 2] = blue;
    const std::uint32_t grey = colors == 2 ? i * 255 : i;
    layout.greyscale = layout.greyscale && red == grey && green == grey && blue == grey;
  }
  layout.channels = layout.greyscale ? 1 : 3;
  return layout;
}

void decode_row(const std::uint8_t* in, const BmpHeader& h, const BmpLayout& layout, std::uint8_t* out) {
  for (std::uint32_t x = 0; x < h.width; ++x) {
    if (h.bits >= 24) {
      const std::uint8_t* p = in + std::size_t{x} * (h.bits / 8);
      std::uint8_t* q = out + std::size_t{x} * layout.channels;
      q[0] = p[2];
      q[1] = p[1];
      q[2] = p[0];
      if (layout.channels == 4) q[3] = p[3];
      continue;
    }
    const std::size_t bit = std::size_t{x} * h.bits;
    const std::uint32_t index = (in[bit / 8] >> (8 - h.bits - bit % 8)) & ((1u << h.bits) - 1);
    if (layout.greyscale) {
      out[x] = static_cast<std::uint8_t>(layout.colors == 2 ? index * 255 : index);
    } else {
      std::memcpy(out + 3 * std::size_t{x}, &layout.palette[3 * std::size_t{index}], 3);
    }
  }
}

}  // namespace

namespace detail {

Image decode_bmp(std::span<const std::uint8_t> bytes, const LoadOptions& options) {
  const BmpHeader h = read_header(bytes);
  const BmpLayout layout = layout_of(bytes, h);
  // The rows must be in the file before anything proportional to them is allocated.
  const std::uint64_t stride = (std::uint64_t{h.width} * h.bits + 31) / 32 * 4;
  if (h.data_offset > bytes.size() || stride * h.height > bytes.size() - h.data_offset)
    throw_error(errc::truncated, "BMP: the file ends in the pixel data");
  Image image = allocate_image(h.width, h.height, layout.channels, options.limits, "BMP");
  const std::size_t out_row = std::size_t{h.width} * layout.channels;
  for (std::uint32_t y = 0; y < h.height; ++y) {
    const std::uint32_t file_row = h.top_down ? y : h.height - 1 - y;
    decode_row(bytes.data() + h.data_offset + stride * file_row, h, layout, image.pixels.data() + y * out_row);
  }
  return image;
}

}  // namespace detail
}  // namespace l3
