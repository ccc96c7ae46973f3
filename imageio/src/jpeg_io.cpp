// JPEG through libjpeg(-turbo)'s classic API, default decode settings.
//
// Error handling: as for PNG (png_io.cpp), libjpeg's error_exit must not return
// and an exception must not cross its C frames, so error_exit longjmps back into
// small setjmp functions that own no destructible objects; they return false and
// the C++ caller throws. Warnings (corrupt or missing entropy-coded data, which
// libjpeg would silently fill with gray) are routed to error_exit too unless the
// caller accepts them: the same policy as TurboJPEG's TJFLAG_STOPONWARNING.
// Warnings about bytes outside the image data ("extraneous bytes before
// marker", a JFIF 2.x header, an unknown Adobe transform, a bad thumbnail size)
// leave the pixels as they are, and PIL decodes such files: they are accepted
// unless LoadOptions::strict_jpeg.
//
// CMYK and YCCK files are converted to RGB as PIL's Image.convert("RGB") does
// after JpegImagePlugin's "CMYK;I" read (Pillow: Adobe polarity assumed, so
// samples are inverted; then r = nk - nk*c/255 with nk = 255 - k, rounded
// as MULDIV255): see cmyk_to_rgb below; tests compare with PIL pixel for pixel.
#include <cstdio>  // jpeglib.h needs FILE and size_t first
// clang-format off
#include <jpeglib.h>
#include <jerror.h>
// clang-format on

#include <algorithm>
#include <csetjmp>
#include <string>
#include <vector>

#include "decoders.hpp"

namespace l3 {
namespace {

struct JpegErrors {
  jpeg_error_mgr manager;  // first member: libjpeg gives callbacks a pointer to it
  std::jmp_buf jump;
  bool accept_warnings = false;
  bool strict = false;  // even harmless warnings are errors
  errc code = errc::corrupt_header;
  char message[JMSG_LENGTH_MAX] = {};
};

JpegErrors* errors_of(j_common_ptr cinfo) { return reinterpret_cast<JpegErrors*>(cinfo->err); }

errc classify(int message_code) {
  switch (message_code) {
    case JWRN_JPEG_EOF:
    case JERR_INPUT_EOF: return errc::truncated;
    case JERR_BAD_PRECISION: return errc::unsupported;  // 12/16-bit JPEG
    case JERR_OUT_OF_MEMORY: return errc::out_of_memory;
    default: return errc::corrupt_header;
  }
}

void on_jpeg_error(j_common_ptr cinfo) {
  JpegErrors* errors = errors_of(cinfo);
  (*cinfo->err->format_message)(cinfo, errors->message);
  errors->code = classify(cinfo->err->msg_code);
  std::longjmp(errors->jump, 1);
}

// Warnings that say nothing about the decoded pixels.
bool is_harmless_warning(int message_code) {
  switch (message_code) {
    case JWRN_EXTRANEOUS_DATA:
    case JWRN_JFIF_MAJOR:
    case JWRN_ADOBE_XFORM: return true;
    default: return false;
  }
}

// level -1 is a warning; higher levels are trace messages.
void on_jpeg_message(j_common_ptr cinfo, int level) {
  if (level >= 0) return;
  const JpegErrors* errors = errors_of(cinfo);
  if (errors->accept_warnings || (!errors->strict && is_harmless_warning(cinfo->err->msg_code))) {
    cinfo->err->num_warnings++;
    return;
  }
  on_jpeg_error(cinfo);
}

class JpegReader {
public:
  explicit JpegReader(const LoadOptions& options) {
    cinfo.err = jpeg_std_error(&errors_.manager);
    errors_.manager.error_exit = on_jpeg_error;
    errors_.manager.emit_message = on_jpeg_message;
    errors_.accept_warnings = options.accept_jpeg_warnings;
    errors_.strict = options.strict_jpeg;
  }
  JpegReader(const JpegReader&) = delete;
  JpegReader& operator=(const JpegReader&) = delete;
  ~JpegReader() { jpeg_destroy_decompress(&cinfo); }  // safe on a struct never created (mem == NULL)

  [[noreturn]] void fail() const { throw_error(errors_.code, std::string("JPEG: ") + errors_.message); }
  std::jmp_buf& jump() { return errors_.jump; }
  bool set_failure(errc code, const char* message) {
    errors_.code = code;
    std::snprintf(errors_.message, sizeof errors_.message, "%s", message);
    return false;
  }

  jpeg_decompress_struct cinfo{};

private:
  JpegErrors errors_;
};

// setjmp region: no locals with destructors (see the top of the file).
bool read_jpeg_header(JpegReader* reader, std::span<const std::uint8_t> bytes) {
  if (setjmp(reader->jump())) return false;
  jpeg_create_decompress(&reader->cinfo);
  jpeg_mem_src(&reader->cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&reader->cinfo, TRUE);
  return true;
}

// setjmp region. Reads to the end of the file (EOI), so truncation anywhere shows.
bool read_jpeg_pixels(JpegReader* reader, JSAMPARRAY rows, JDIMENSION width, JDIMENSION height, int channels) {
  if (setjmp(reader->jump())) return false;
  jpeg_decompress_struct* cinfo = &reader->cinfo;
  if (channels == 4) cinfo->out_color_space = JCS_CMYK;  // YCCK too: libjpeg converts it to CMYK
  jpeg_start_decompress(cinfo);
  if (cinfo->output_width != width || cinfo->output_height != height || cinfo->output_components != channels)
    return reader->set_failure(errc::corrupt_header, "decoded shape differs from the header");
  while (cinfo->output_scanline < height)
    jpeg_read_scanlines(cinfo, rows + cinfo->output_scanline, height - cinfo->output_scanline);
  jpeg_finish_decompress(cinfo);
  return true;
}

// Channels libjpeg decodes to: 4 (CMYK) for CMYK and YCCK files, which
// cmyk_to_rgb then reduces to 3.
std::uint32_t decoded_channels(J_COLOR_SPACE space) {
  switch (space) {
    case JCS_GRAYSCALE: return 1;
    case JCS_YCbCr:
    case JCS_RGB: return 3;  // libjpeg's default output for both is RGB
    case JCS_CMYK:
    case JCS_YCCK: return 4;
    default: throw_error(errc::unsupported, "JPEG colour space " + std::to_string(int{space}));
  }
}

// PIL's rounding of a * b / 255 (Imaging.h MULDIV255).
std::uint32_t muldiv255(std::uint32_t a, std::uint32_t b) {
  const std::uint32_t t = a * b + 128;
  return ((t >> 8) + t) >> 8;
}

// In place, 4 samples per pixel in, 3 out. libjpeg's CMYK samples are PIL's
// inverted ("CMYK;I"): with C = 255 - c and K = 255 - k, PIL's cmyk2rgb gives
// nk - MULDIV255(C, nk) where nk = 255 - K = k.
void cmyk_to_rgb(std::uint8_t* pixels, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint8_t* in = pixels + 4 * i;
    const std::uint32_t nk = in[3];
    std::uint8_t rgb[3];
    for (int k = 0; k < 3; ++k) rgb[k] = static_cast<std::uint8_t>(nk - muldiv255(255u - in[k], nk));
    std::copy(rgb, rgb + 3, pixels + 3 * i);
  }
}

}  // namespace

namespace detail {

static_assert(sizeof(unsigned long) >= sizeof(std::size_t), "jpeg_mem_src takes the size as unsigned long");

Image decode_jpeg(std::span<const std::uint8_t> bytes, const LoadOptions& options) {
  JpegReader reader(options);
  if (!read_jpeg_header(&reader, bytes)) reader.fail();
  const std::uint32_t channels = decoded_channels(reader.cinfo.jpeg_color_space);
  Image image = allocate_image(reader.cinfo.image_width, reader.cinfo.image_height, channels,
                               options.limits, "JPEG");
  const std::size_t stride = std::size_t{image.width} * channels;
  std::vector<JSAMPROW> rows(image.height);
  for (std::uint32_t y = 0; y < image.height; ++y) rows[y] = image.pixels.data() + y * stride;
  if (!read_jpeg_pixels(&reader, rows.data(), image.width, image.height, static_cast<int>(channels))) reader.fail();
  if (channels == 4) {
    cmyk_to_rgb(image.pixels.data(), std::size_t{image.width} * image.height);
    image.channels = 3;
    image.pixels.resize(std::size_t{image.width} * image.height * 3);
  }
  return image;
}

}  // namespace detail
}  // namespace l3
