// Test helpers for the converters suites: temporary directories, PNG/JPEG
// files written directly with libpng/libjpeg (independently of l3_imageio),
// and the errc that loading bytes with l3_imageio throws.
#pragma once

#include <jpeglib.h>
#include <png.h>

#include <csetjmp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "l3/imageio/image_io.hpp"
#include "test_util.hpp"

namespace l3::test {

// The errc that loading these bytes throws, or errc::ok.
inline l3::errc load_error(const std::vector<std::uint8_t>& bytes, const l3::LoadOptions& options = {}) {
  return error_of([&] { (void)l3::decode_image_bytes(bytes, options); });
}

// A fresh directory, removed with its contents when the object goes.
class TempDir {
public:
  TempDir() {
    std::random_device seed;
    path_ = std::filesystem::temp_directory_path() / ("l3-conv-test-" + std::to_string(seed()) + std::to_string(seed()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }
  const std::filesystem::path& path() const { return path_; }
  std::size_t file_count() const {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(path_)) ++n;
    return n;
  }

private:
  std::filesystem::path path_;
};

inline std::vector<std::uint8_t> random_bytes(std::size_t n, std::uint32_t seed, int max_value = 255) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(0, max_value);
  std::vector<std::uint8_t> v(n);
  for (auto& b : v) b = static_cast<std::uint8_t>(dist(rng));
  return v;
}

// A smooth gradient with a little noise: photo-like, so JPEG has real work to do.
inline std::vector<std::uint8_t> gradient(std::uint32_t w, std::uint32_t h, std::uint32_t c, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint8_t> v(std::size_t{w} * h * c);
  for (std::uint32_t y = 0; y < h; ++y)
    for (std::uint32_t x = 0; x < w; ++x)
      for (std::uint32_t k = 0; k < c; ++k)
        v[(std::size_t{y} * w + x) * c + k] = static_cast<std::uint8_t>((x * 5 + y * 3 + k * 60 + rng() % 9) & 0xff);
  return v;
}

// A PNG as stored: samples are in the file's own colour type and bit depth.
struct PngSpec {
  std::uint32_t width = 0, height = 0;
  int bit_depth = 8;
  int color_type = PNG_COLOR_TYPE_GRAY;
  bool interlaced = false;
  std::vector<png_color> palette;               // PNG_COLOR_TYPE_PALETTE
  std::vector<std::uint8_t> palette_alpha;      // tRNS for a palette
  std::optional<png_color_16> transparent;      // tRNS colour key for gray / RGB
  std::vector<std::uint16_t> samples;           // width * height * file channels
};

inline int file_channels(int color_type) {
  switch (color_type) {
    case PNG_COLOR_TYPE_GRAY: case PNG_COLOR_TYPE_PALETTE: return 1;
    case PNG_COLOR_TYPE_GRAY_ALPHA: return 2;
    case PNG_COLOR_TYPE_RGB: return 3;
    default: return 4;
  }
}

// Packs one row of samples MSB-first (depth < 8) or big-endian (depth 16).
inline std::vector<std::uint8_t> pack_row(const std::uint16_t* samples, std::size_t count, int depth) {
  std::vector<std::uint8_t> row((count * static_cast<std::size_t>(depth) + 7) / 8, 0);
  for (std::size_t i = 0; i < count; ++i) {
    if (depth == 16) {
      row[2 * i] = static_cast<std::uint8_t>(samples[i] >> 8);
      row[2 * i + 1] = static_cast<std::uint8_t>(samples[i] & 0xff);
    } else {
      std::size_t bit = i * static_cast<std::size_t>(depth);
      row[bit / 8] = static_cast<std::uint8_t>(row[bit / 8] | (samples[i] << (8 - depth - bit % 8)));
    }
  }
  return row;
}

inline void append_to_vector(png_structp png, png_bytep data, png_size_t n) {
  auto* out = static_cast<std::vector<std::uint8_t>*>(png_get_io_ptr(png));
  out->insert(out->end(), data, data + n);
}

// Plain libpng writer; returns false if libpng reported an error.
inline bool write_png(png_structp png, png_infop info, const PngSpec& s, std::vector<png_bytep>& rows) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_IHDR(png, info, s.width, s.height, s.bit_depth, s.color_type,
               s.interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  if (!s.palette.empty()) png_set_PLTE(png, info, s.palette.data(), static_cast<int>(s.palette.size()));
  if (!s.palette_alpha.empty())
    png_set_tRNS(png, info, s.palette_alpha.data(), static_cast<int>(s.palette_alpha.size()), nullptr);
  if (s.transparent) png_set_tRNS(png, info, nullptr, 0, &*s.transparent);
  png_write_info(png, info);
  if (s.interlaced) png_set_interlace_handling(png);
  png_write_image(png, rows.data());
  png_write_end(png, nullptr);
  return true;
}

inline std::vector<std::uint8_t> make_png(const PngSpec& s) {
  const std::size_t per_row = std::size_t{s.width} * file_channels(s.color_type);
  std::vector<std::vector<std::uint8_t>> packed;
  for (std::uint32_t y = 0; y < s.height; ++y) packed.push_back(pack_row(&s.samples[y * per_row], per_row, s.bit_depth));
  std::vector<png_bytep> rows;
  for (auto& r : packed) rows.push_back(r.data());
  std::vector<std::uint8_t> out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  png_set_write_fn(png, &out, append_to_vector, nullptr);
  bool ok = write_png(png, info, s, rows);
  png_destroy_write_struct(&png, &info);
  if (!ok) throw std::runtime_error("test helper: libpng could not write the PNG");
  return out;
}

struct JpegSpec {
  std::uint32_t width = 0, height = 0;
  int components = 3;
  J_COLOR_SPACE color_space = JCS_RGB;
  int quality = 90;
  bool progressive = false;
  J_COLOR_SPACE stored_space = JCS_UNKNOWN;  // e.g. JCS_YCCK for CMYK input; JCS_UNKNOWN: libjpeg's default
};

// libjpeg's default error handler calls exit(); the helpers only see valid data.
inline std::vector<std::uint8_t> make_jpeg(const JpegSpec& s, const std::vector<std::uint8_t>& pixels) {
  jpeg_compress_struct cinfo{};
  jpeg_error_mgr err{};
  cinfo.err = jpeg_std_error(&err);
  jpeg_create_compress(&cinfo);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &buffer, &size);
  cinfo.image_width = s.width;
  cinfo.image_height = s.height;
  cinfo.input_components = s.components;
  cinfo.in_color_space = s.color_space;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, s.quality, TRUE);
  if (s.stored_space != JCS_UNKNOWN) jpeg_set_colorspace(&cinfo, s.stored_space);
  if (s.progressive) jpeg_simple_progression(&cinfo);
  jpeg_start_compress(&cinfo, TRUE);
  const std::size_t stride = std::size_t{s.width} * static_cast<std::size_t>(s.components);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(&pixels[cinfo.next_scanline * stride]);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::vector<std::uint8_t> out(buffer, buffer + size);
  std::free(buffer);
  return out;
}

// The reference: libjpeg's decode with every setting left at its default.
inline std::vector<std::uint8_t> reference_jpeg_decode(const std::vector<std::uint8_t>& bytes, int* channels) {
  jpeg_decompress_struct cinfo{};
  jpeg_error_mgr err{};
  cinfo.err = jpeg_std_error(&err);
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, bytes.data(), bytes.size());
  jpeg_read_header(&cinfo, TRUE);
  jpeg_start_decompress(&cinfo);
  *channels = cinfo.output_components;
  const std::size_t stride = std::size_t{cinfo.output_width} * static_cast<std::size_t>(cinfo.output_components);
  std::vector<std::uint8_t> out(stride * cinfo.output_height);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = &out[cinfo.output_scanline * stride];
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return out;
}

}  // namespace l3::test
