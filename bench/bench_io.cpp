#include "bench_io.hpp"

#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <utility>

#include <jpeglib.h>
#include <png.h>
#include <spng.h>

namespace l3bench {
namespace {

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what); }

// libpng reports errors through longjmp; the message is kept here and thrown afterwards.
struct PngErr {
  char msg[256] = {};
};

void png_error_fn(png_structp png, png_const_charp msg) {
  auto* e = static_cast<PngErr*>(png_get_error_ptr(png));
  if (e != nullptr) std::snprintf(e->msg, sizeof e->msg, "%s", msg);
  png_longjmp(png, 1);
}
void png_warning_fn(png_structp, png_const_charp) {}

struct MemReader {
  const std::uint8_t* data;
  std::size_t size;
  std::size_t pos;
};

void png_mem_read(png_structp png, png_bytep out, png_size_t n) {
  auto* r = static_cast<MemReader*>(png_get_io_ptr(png));
  if (n > r->size - r->pos) png_error(png, "read past end of buffer");
  std::memcpy(out, r->data + r->pos, n);
  r->pos += n;
}

void png_mem_write(png_structp png, png_bytep in, png_size_t n) {
  auto* v = static_cast<std::vector<std::uint8_t>*>(png_get_io_ptr(png));
  v->insert(v->end(), in, in + n);
}
void png_mem_flush(png_structp) {}

int png_color_type_for(std::uint32_t channels) {
  switch (channels) {
    case 1: return PNG_COLOR_TYPE_GRAY;
    case 2: return PNG_COLOR_TYPE_GRAY_ALPHA;
    case 3: return PNG_COLOR_TYPE_RGB;
    case 4: return PNG_COLOR_TYPE_RGB_ALPHA;
    default: fail("png: unsupported channel count " + std::to_string(channels));
  }
}

// Shared libpng read path: `normalize` adds the expansion transforms used for corpus files.
// Returns false (with err.msg set) when libpng longjmps.
struct PngDest {
  std::uint8_t* out;  // caller's buffer, or null to grow `grow`
  std::size_t size;
  std::vector<std::uint8_t>* grow;
};

bool png_read_into(png_structp png, png_infop info, bool normalize, Pixels* meta, PngDest* dest) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_info(png, info);
  if (normalize) {
    png_set_expand(png);  // palette -> RGB, gray < 8 bits -> 8, tRNS -> alpha
    png_set_strip_16(png);
  }
  png_read_update_info(png, info);
  const png_uint_32 w = png_get_image_width(png, info);
  const png_uint_32 h = png_get_image_height(png, info);
  const png_byte ch = png_get_channels(png, info);
  const png_byte depth = png_get_bit_depth(png, info);
  if (depth != 8) png_error(png, "not an 8-bit image (bench reads 8-bit only)");
  meta->width = w;
  meta->height = h;
  meta->channels = ch;
  const std::size_t stride = std::size_t{w} * ch;
  if (dest->grow != nullptr) {
    dest->grow->resize(stride * h);
    dest->out = dest->grow->data();
    dest->size = dest->grow->size();
  }
  if (stride * h > dest->size) png_error(png, "output buffer too small");
  std::uint8_t* const out = dest->out;
  const int passes = png_set_interlace_handling(png);
  for (int p = 0; p < passes; ++p)
    for (png_uint_32 y = 0; y < h; ++y) png_read_row(png, out + stride * y, nullptr);
  png_read_end(png, nullptr);
  return true;
}

}  // namespace

std::vector<std::uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot open " + path);
  return std::vector<std::uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

namespace {
// One libpng decode from memory into `dest`; a libpng error fails with `what` before its message.
Pixels png_decode(std::span<const std::uint8_t> bytes, bool normalize, PngDest dest, const std::string& what) {
  PngErr err;
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &err, png_error_fn, png_warning_fn);
  if (png == nullptr) fail("png_create_read_struct failed");
  png_infop info = png_create_info_struct(png);
  MemReader r{bytes.data(), bytes.size(), 0};
  png_set_read_fn(png, &r, png_mem_read);
  Pixels meta;
  const bool ok = info != nullptr && png_read_into(png, info, normalize, &meta, &dest);
  png_destroy_read_struct(&png, &info, nullptr);
  if (!ok) fail(what + err.msg);
  return meta;
}
}  // namespace

Pixels read_png_file(const std::string& path) {
  std::vector<std::uint8_t> data;
  Pixels px = png_decode(read_file(path), true, {nullptr, 0, &data}, path + ": libpng: ");
  px.data = std::move(data);
  return px;
}

std::size_t decode_png_libpng(std::span<const std::uint8_t> bytes, std::uint8_t* out, std::size_t out_size) {
  return png_decode(bytes, false, {out, out_size, nullptr}, "libpng decode: ").size();
}

namespace {
bool png_write_all(png_structp png, png_infop info, const Pixels& im) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_IHDR(png, info, im.width, im.height, 8, png_color_type_for(im.channels), PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  const std::size_t stride = std::size_t{im.width} * im.channels;
  for (std::uint32_t y = 0; y < im.height; ++y) png_write_row(png, im.data.data() + stride * y);
  png_write_end(png, nullptr);
  return true;
}
}  // namespace

std::vector<std::uint8_t> encode_png(const Pixels& im) {
  PngErr err;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &err, png_error_fn, png_warning_fn);
  if (png == nullptr) fail("png_create_write_struct failed");
  png_infop info = png_create_info_struct(png);
  std::vector<std::uint8_t> out;
  png_set_write_fn(png, &out, png_mem_write, png_mem_flush);
  const bool ok = info != nullptr && png_write_all(png, info, im);
  png_destroy_write_struct(&png, &info);
  if (!ok) fail(std::string("libpng encode: ") + err.msg);
  return out;
}

std::size_t decode_png_spng(std::span<const std::uint8_t> bytes, std::uint8_t* out, std::size_t out_size) {
  spng_ctx* ctx = spng_ctx_new(0);
  if (ctx == nullptr) fail("spng_ctx_new failed");
  std::size_t n = 0;
  int rc = spng_set_png_buffer(ctx, bytes.data(), bytes.size());
  if (rc == 0) rc = spng_decoded_image_size(ctx, SPNG_FMT_PNG, &n);
  if (rc == 0 && n > out_size) rc = SPNG_EOVERFLOW;
  if (rc == 0) rc = spng_decode_image(ctx, out, n, SPNG_FMT_PNG, 0);
  spng_ctx_free(ctx);
  if (rc != 0) fail(std::string("libspng decode: ") + spng_strerror(rc));
  return n;
}

namespace {
struct JpegErr {
  jpeg_error_mgr mgr;
  std::jmp_buf jmp;
  char msg[JMSG_LENGTH_MAX];
};

void jpeg_error_exit(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegErr*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->msg);
  std::longjmp(e->jmp, 1);
}

bool jpeg_encode_all(jpeg_compress_struct* c, const Pixels& im, const std::vector<std::uint8_t>& rgb,
                     std::uint32_t comps, int quality, unsigned char** buf, unsigned long* len) {
  JpegErr* e = reinterpret_cast<JpegErr*>(c->err);
  if (setjmp(e->jmp)) return false;
  jpeg_mem_dest(c, buf, len);
  c->image_width = im.width;
  c->image_height = im.height;
  c->input_components = static_cast<int>(comps);
  c->in_color_space = comps == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(c);
  jpeg_set_quality(c, quality, TRUE);
  jpeg_start_compress(c, TRUE);
  const std::size_t stride = std::size_t{im.width} * comps;
  while (c->next_scanline < c->image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(rgb.data() + stride * c->next_scanline);
    jpeg_write_scanlines(c, &row, 1);
  }
  jpeg_finish_compress(c);
  return true;
}

bool jpeg_decode_all(jpeg_decompress_struct* d, std::span<const std::uint8_t> bytes, std::uint8_t* out,
                     std::size_t out_size, std::size_t* written) {
  JpegErr* e = reinterpret_cast<JpegErr*>(d->err);
  if (setjmp(e->jmp)) return false;
  jpeg_mem_src(d, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(d, TRUE);
  jpeg_start_decompress(d);
  const std::size_t stride = std::size_t{d->output_width} * static_cast<std::size_t>(d->output_components);
  if (stride * d->output_height > out_size) {
    std::snprintf(e->msg, sizeof e->msg, "output buffer too small");
    return false;
  }
  while (d->output_scanline < d->output_height) {
    JSAMPROW row = out + stride * d->output_scanline;
    jpeg_read_scanlines(d, &row, 1);
  }
  jpeg_finish_decompress(d);
  *written = stride * d->output_height;
  return true;
}
}  // namespace

std::vector<std::uint8_t> encode_jpeg(const Pixels& im, int quality, std::uint32_t* jpeg_channels) {
  const std::uint32_t comps = im.channels <= 2 ? 1 : 3;
  std::vector<std::uint8_t> src;
  if (comps == im.channels) {
    src = im.data;
  } else {  // drop alpha
    const std::size_t n = std::size_t{im.width} * im.height;
    src.resize(n * comps);
    for (std::size_t i = 0; i < n; ++i)
      for (std::uint32_t c = 0; c < comps; ++c) src[i * comps + c] = im.data[i * im.channels + c];
  }
  jpeg_compress_struct c{};
  JpegErr err{};
  c.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_error_exit;
  jpeg_create_compress(&c);
  unsigned char* buf = nullptr;
  unsigned long len = 0;
  const bool ok = jpeg_encode_all(&c, im, src, comps, quality, &buf, &len);
  jpeg_destroy_compress(&c);
  std::vector<std::uint8_t> out;
  if (ok) out.assign(buf, buf + len);
  std::free(buf);
  if (!ok) fail(std::string("libjpeg encode: ") + err.msg);
  if (jpeg_channels != nullptr) *jpeg_channels = comps;
  return out;
}

std::size_t decode_jpeg(std::span<const std::uint8_t> bytes, std::uint8_t* out, std::size_t out_size) {
  jpeg_decompress_struct d{};
  JpegErr err{};
  d.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_error_exit;
  jpeg_create_decompress(&d);
  std::size_t written = 0;
  const bool ok = jpeg_decode_all(&d, bytes, out, out_size, &written);
  jpeg_destroy_decompress(&d);
  if (!ok) fail(std::string("libjpeg decode: ") + err.msg);
  return written;
}

std::string peer_versions() {
  std::string s = std::string("libpng ") + png_get_libpng_ver(nullptr) + ", libspng " + spng_version_string();
#ifdef LIBJPEG_TURBO_VERSION_NUMBER
  const int v = LIBJPEG_TURBO_VERSION_NUMBER;
  s += ", libjpeg-turbo " + std::to_string(v / 1000000) + "." + std::to_string(v / 1000 % 1000) + "." +
       std::to_string(v % 1000);
#else
  s += ", libjpeg (JPEG_LIB_VERSION " + std::to_string(JPEG_LIB_VERSION) + ")";
#endif
  return s;
}

}  // namespace l3bench
