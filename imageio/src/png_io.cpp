// PNG through libpng.
//
// Error handling: libpng reports errors through a callback that must not return.
// Throwing a C++ exception from it would unwind through libpng's C frames, which
// are built without unwind tables: undefined, and std::terminate in practice. So
// we use libpng's documented setjmp/longjmp protocol, confined to small functions
// (read_png_header, read_png_pixels, write_png) that own no object with a
// destructor, so the longjmp skips nothing. They return false on error; their C++
// caller then throws l3::Error. All resources (png structs, buffers) are owned by
// RAII objects in the caller's frame, which the longjmp never crosses.
#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "decoders.hpp"

namespace l3 {
namespace {

// Callback state shared by reader and writer; plain data so longjmp may cross it.
struct PngContext {
  const std::uint8_t* input = nullptr;  // reader: the file bytes
  std::size_t input_size = 0;
  std::size_t position = 0;
  std::vector<std::uint8_t>* output = nullptr;  // writer: where the bytes go
  bool ran_out = false;        // the file ended early: truncated, not corrupt
  bool out_of_memory = false;
  char message[256] = {};
};

void on_png_error(png_structp png, png_const_charp message) {
  auto* context = static_cast<PngContext*>(png_get_error_ptr(png));
  std::snprintf(context->message, sizeof context->message, "%s", message);
  png_longjmp(png, 1);
}

// Warnings concern ancillary data we do not keep (bad tEXt, iCCP...); stay quiet.
void on_png_warning(png_structp, png_const_charp) {}

void read_from_memory(png_structp png, png_bytep out, png_size_t size) {
  auto* context = static_cast<PngContext*>(png_get_io_ptr(png));
  if (size > context->input_size - context->position) {
    context->ran_out = true;
    png_error(png, "the file ends early");
  }
  std::memcpy(out, context->input + context->position, size);
  context->position += size;
}

void write_to_vector(png_structp png, png_bytep data, png_size_t size) {
  auto* context = static_cast<PngContext*>(png_get_io_ptr(png));
  try {
    context->output->insert(context->output->end(), data, data + size);
  } catch (const std::bad_alloc&) {
    context->out_of_memory = true;
  }
  // Outside the catch block: longjmp must not leave a handler with a live exception.
  if (context->out_of_memory) png_error(png, "out of memory");
}

void flush_nothing(png_structp) {}

class PngReader {
public:
  explicit PngReader(std::span<const std::uint8_t> bytes) {
    context_.input = bytes.data();
    context_.input_size = bytes.size();
    png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &context_, on_png_error, on_png_warning);
    if (png != nullptr) info = png_create_info_struct(png);
    if (info == nullptr) {
      png_destroy_read_struct(&png, nullptr, nullptr);
      throw_error(errc::out_of_memory, "PNG: cannot create a reader");
    }
    png_set_read_fn(png, &context_, read_from_memory);
    // Our own limits (LoadOptions) apply after the header; libpng's 1e6 default
    // would otherwise reject a larger limit the caller asked for.
    png_set_user_limits(png, PNG_UINT_31_MAX, PNG_UINT_31_MAX);
  }
  PngReader(const PngReader&) = delete;
  PngReader& operator=(const PngReader&) = delete;
  ~PngReader() { png_destroy_read_struct(&png, &info, nullptr); }

  [[noreturn]] void fail() const {
    errc code = context_.ran_out ? errc::truncated : errc::corrupt_header;
    throw_error(code, std::string("PNG: ") + context_.message);
  }

  png_structp png = nullptr;
  png_infop info = nullptr;

private:
  PngContext context_;
};

struct PngHeader {
  png_uint_32 width = 0, height = 0;
  int bit_depth = 0, color_type = 0, interlace = 0;
  bool has_trns = false;
};

// setjmp region: no locals with destructors (see the top of the file).
bool read_png_header(png_structp png, png_infop info, PngHeader* header) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_info(png, info);
  png_get_IHDR(png, info, &header->width, &header->height, &header->bit_depth, &header->color_type,
               &header->interlace, nullptr, nullptr);
  header->has_trns = png_get_valid(png, info, PNG_INFO_tRNS) != 0;
  return true;
}

// Channels after our transforms: palette -> RGB, tRNS -> an alpha channel.
std::uint32_t output_channels(const PngHeader& header) {
  std::uint32_t alpha = header.has_trns ? 1 : 0;
  switch (header.color_type) {
    case PNG_COLOR_TYPE_GRAY: return 1 + alpha;
    case PNG_COLOR_TYPE_GRAY_ALPHA: return 2;
    case PNG_COLOR_TYPE_PALETTE: return 3 + alpha;
    case PNG_COLOR_TYPE_RGB: return 3 + alpha;
    default: return 4;  // RGBA; libpng has rejected any other colour type
  }
}

// setjmp region. Reads every row (all Adam7 passes) and the chunks after IDAT,
// so truncation or a bad CRC anywhere in the file is noticed.
bool read_png_pixels(png_structp png, png_infop info, const PngHeader& header, png_bytepp rows,
                     std::size_t expected_row_bytes) {
  if (setjmp(png_jmpbuf(png))) return false;
  if (header.bit_depth == 16) png_set_strip_16(png);  // only with LoadOptions::convert_16bit: the high byte
  if (header.color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (header.color_type == PNG_COLOR_TYPE_GRAY && header.bit_depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (header.has_trns) png_set_tRNS_to_alpha(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (png_get_rowbytes(png, info) != expected_row_bytes) png_error(png, "unexpected row size");
  png_read_image(png, rows);
  png_read_end(png, nullptr);
  return true;
}

std::vector<png_bytep> row_pointers(std::uint8_t* data, std::uint32_t height, std::size_t stride) {
  std::vector<png_bytep> rows(height);
  for (std::uint32_t y = 0; y < height; ++y) rows[y] = data + y * stride;
  return rows;
}

int png_color_type(std::uint32_t channels) {
  switch (channels) {
    case 1: return PNG_COLOR_TYPE_GRAY;
    case 2: return PNG_COLOR_TYPE_GRAY_ALPHA;
    case 3: return PNG_COLOR_TYPE_RGB;
    default: return PNG_COLOR_TYPE_RGBA;
  }
}

class PngWriter {
public:
  explicit PngWriter(std::vector<std::uint8_t>* output) {
    context_.output = output;
    png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &context_, on_png_error, on_png_warning);
    if (png != nullptr) info = png_create_info_struct(png);
    if (info == nullptr) {
      png_destroy_write_struct(&png, nullptr);
      throw_error(errc::out_of_memory, "PNG: cannot create a writer");
    }
    png_set_write_fn(png, &context_, write_to_vector, flush_nothing);
  }
  PngWriter(const PngWriter&) = delete;
  PngWriter& operator=(const PngWriter&) = delete;
  ~PngWriter() { png_destroy_write_struct(&png, &info); }

  [[noreturn]] void fail() const {
    throw_error(context_.out_of_memory ? errc::out_of_memory : errc::invalid_argument,
                std::string("PNG: ") + context_.message);
  }

  png_structp png = nullptr;
  png_infop info = nullptr;

private:
  PngContext context_;
};

// setjmp region.
bool write_png(png_structp png, png_infop info, const ImageView& image, png_bytepp rows, int level) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_IHDR(png, info, image.width, image.height, 8, png_color_type(image.channels), PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (level != png_default_compression) png_set_compression_level(png, level);
  png_write_info(png, info);
  png_write_image(png, rows);
  png_write_end(png, nullptr);
  return true;
}

std::uint32_t be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | p[3];
}

// The 12 bytes of an IEND chunk: length 0, type, CRC.
constexpr std::uint8_t kIend[12] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xAE, 0x42, 0x60, 0x82};

// A file that holds whole chunks, IDAT among them, and ends without IEND (or
// inside it): the same bytes with IEND completed, which libpng then reads like
// any PNG (so the pixel data must still be complete). Empty for any other file.
std::vector<std::uint8_t> with_iend_completed(std::span<const std::uint8_t> bytes) {
  std::size_t at = 8;  // after the signature
  bool idat = false;
  while (bytes.size() - at >= 12) {
    const std::uint64_t length = be32(&bytes[at]);
    if (std::memcmp(&bytes[at + 4], "IEND", 4) == 0) return {};
    idat = idat || std::memcmp(&bytes[at + 4], "IDAT", 4) == 0;
    if (length + 12 > bytes.size() - at) return {};  // a chunk cut short: truly truncated
    at += 12 + static_cast<std::size_t>(length);
  }
  const std::size_t tail = bytes.size() - at;
  if (!idat || std::memcmp(&bytes[at], kIend, tail) != 0) return {};
  std::vector<std::uint8_t> fixed(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(at));
  fixed.insert(fixed.end(), kIend, kIend + 12);
  return fixed;
}

}  // namespace

namespace detail {

Image decode_png(std::span<const std::uint8_t> bytes, const LoadOptions& options) {
  if (bytes.size() > 8) {
    std::vector<std::uint8_t> fixed = with_iend_completed(bytes);
    if (!fixed.empty()) return decode_png(fixed, options);
  }
  PngReader reader(bytes);
  PngHeader header;
  if (!read_png_header(reader.png, reader.info, &header)) reader.fail();
  if (header.bit_depth == 16 && !options.convert_16bit)
    throw_error(errc::unsupported, "16-bit PNG is not supported (l3 stores 8-bit samples; "
                                   "--convert-16bit keeps the high byte)");
  Image image = allocate_image(header.width, header.height, output_channels(header), options.limits, "PNG");
  const std::size_t stride = std::size_t{image.width} * image.channels;
  std::vector<png_bytep> rows = row_pointers(image.pixels.data(), image.height, stride);
  if (!read_png_pixels(reader.png, reader.info, header, rows.data(), stride)) reader.fail();
  return image;
}

}  // namespace detail

std::vector<std::uint8_t> encode_png_bytes(const ImageView& image, int compression_level) {
  detail::check_view(image, "PNG");
  if (compression_level < -1 || compression_level > 9)
    throw_error(errc::invalid_argument, "PNG: compression level must be -1..9, got " +
                std::to_string(compression_level));
  std::vector<std::uint8_t> output;
  PngWriter writer(&output);
  // libpng takes non-const row pointers but only reads them when writing.
  auto* data = const_cast<std::uint8_t*>(image.data);
  std::vector<png_bytep> rows = row_pointers(data, image.height, detail::row_bytes(image));
  if (!write_png(writer.png, writer.info, image, rows.data(), compression_level)) writer.fail();
  return output;
}

}  // namespace l3
