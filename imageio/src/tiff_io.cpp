// TIFF through libtiff, read from memory: the first image of the file, 8 bits
// per sample, samples interleaved (PLANARCONFIG_CONTIG), stripped or tiled,
// any compression libtiff decodes. Channels follow PIL's TiffImagePlugin modes:
//   MINISBLACK 1 sample -> 1 channel; MINISWHITE -> 1 channel, inverted ("L;I");
//   MINISBLACK + unassociated alpha -> 2; RGB -> 3; RGB + unassociated alpha -> 4;
//   RGB + an unspecified extra sample -> 3 (PIL's "RGBX" drops it);
//   PALETTE (8-bit) -> 3, each colormap entry >> 8 (PIL: b // 256).
// Anything else (16-bit, 1-bit, planar, associated alpha, YCbCr, CMYK, ...) is
// errc::unsupported. libtiff reports errors through per-file handlers
// (TIFFOpenOptions, libtiff >= 4.5), never through the process-wide ones.
#include <tiffio.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "decoders.hpp"

namespace l3 {
namespace {

struct MemoryFile {
  std::span<const std::uint8_t> bytes;
  toff_t position = 0;
  char message[256] = {};
};

tmsize_t read_proc(thandle_t handle, void* out, tmsize_t size) {
  auto* file = static_cast<MemoryFile*>(handle);
  if (size < 0 || file->position >= file->bytes.size()) return 0;
  const auto n = std::min<std::uint64_t>(static_cast<std::uint64_t>(size), file->bytes.size() - file->position);
  std::memcpy(out, file->bytes.data() + file->position, static_cast<std::size_t>(n));
  file->position += n;
  return static_cast<tmsize_t>(n);
}

tmsize_t write_proc(thandle_t, void*, tmsize_t) { return 0; }

toff_t seek_proc(thandle_t handle, toff_t offset, int whence) {
  auto* file = static_cast<MemoryFile*>(handle);
  if (whence == SEEK_CUR) offset += file->position;
  else if (whence == SEEK_END) offset += file->bytes.size();
  file->position = offset;
  return offset;
}

int close_proc(thandle_t) { return 0; }
toff_t size_proc(thandle_t handle) { return static_cast<MemoryFile*>(handle)->bytes.size(); }
int map_proc(thandle_t, void**, toff_t*) { return 0; }
void unmap_proc(thandle_t, void*, toff_t) {}

// The first error libtiff reports is the one we throw.
int on_tiff_error(TIFF*, void* user_data, const char*, const char* format, va_list args) {
  auto* file = static_cast<MemoryFile*>(user_data);
  if (file->message[0] == 0) std::vsnprintf(file->message, sizeof file->message, format, args);
  return 1;
}

// Warnings are about tags we do not use, except a short read, after which
// libtiff drops the tag and goes on (a palette image without its colormap
// would become gray): that one is an error.
int on_tiff_warning(TIFF*, void* user_data, const char*, const char* format, va_list args) {
  auto* file = static_cast<MemoryFile*>(user_data);
  char text[256];
  std::vsnprintf(text, sizeof text, format, args);
  if (file->message[0] == 0 && std::strstr(text, "IO error") != nullptr)
    std::snprintf(file->message, sizeof file->message, "%s", text);
  return 1;
}

struct TiffCloser {
  void operator()(TIFF* tiff) const { TIFFClose(tiff); }
};
struct OptionsFree {
  void operator()(TIFFOpenOptions* options) const { TIFFOpenOptionsFree(options); }
};

enum class Layout { gray, gray_inverted, gray_alpha, rgb, rgb_drop_extra, rgba, palette };

struct TiffShape {
  std::uint32_t width = 0, height = 0;
  std::uint16_t samples = 0;
  Layout layout = Layout::gray;
  std::uint32_t channels = 0;  // what l3 stores
};

[[noreturn]] void unsupported(const std::string& what) { throw_error(errc::unsupported, "TIFF: " + what); }

std::uint16_t tag16(TIFF* tiff, ttag_t tag, std::uint16_t fallback) {
  std::uint16_t value = fallback;
  TIFFGetFieldDefaulted(tiff, tag, &value);
  return value;
}

// One extra sample after the colour samples: its kind (EXTRASAMPLE_*), or -1 for none.
int extra_sample(TIFF* tiff, std::uint16_t samples, std::uint16_t colour) {
  if (samples == colour) return -1;
  std::uint16_t count = 0;
  std::uint16_t* kinds = nullptr;
  if (samples != colour + 1 || !TIFFGetField(tiff, TIFFTAG_EXTRASAMPLES, &count, &kinds) || count != 1)
    unsupported(std::to_string(samples) + " samples per pixel");
  return kinds[0];
}

TiffShape read_shape(TIFF* tiff) {
  TiffShape shape;
  if (!TIFFGetField(tiff, TIFFTAG_IMAGEWIDTH, &shape.width) || !TIFFGetField(tiff, TIFFTAG_IMAGELENGTH, &shape.height))
    throw_error(errc::corrupt_header, "TIFF: no image width or length");
  const std::uint16_t bits = tag16(tiff, TIFFTAG_BITSPERSAMPLE, 1);
  shape.samples = tag16(tiff, TIFFTAG_SAMPLESPERPIXEL, 1);
  std::uint16_t photometric = 0;
  if (!TIFFGetField(tiff, TIFFTAG_PHOTOMETRIC, &photometric)) throw_error(errc::corrupt_header, "TIFF: no photometric tag");
  if (bits != 8) unsupported(std::to_string(bits) + "-bit samples");
  if (shape.samples > 1 && tag16(tiff, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG) != PLANARCONFIG_CONTIG)
    unsupported("separate sample planes");
  switch (photometric) {
    case PHOTOMETRIC_MINISWHITE:
    case PHOTOMETRIC_MINISBLACK: {
      const int extra = extra_sample(tiff, shape.samples, 1);
      if (extra == -1) shape.layout = photometric == PHOTOMETRIC_MINISWHITE ? Layout::gray_inverted : Layout::gray;
      else if (extra == EXTRASAMPLE_UNASSALPHA && photometric == PHOTOMETRIC_MINISBLACK) shape.layout = Layout::gray_alpha;
      else unsupported("gray with this extra sample");
      break;
    }
    case PHOTOMETRIC_RGB: {
      const int extra = extra_sample(tiff, shape.samples, 3);
      if (extra == -1) shape.layout = Layout::rgb;
      else if (extra == EXTRASAMPLE_UNASSALPHA) shape.layout = Layout::rgba;
      else if (extra == EXTRASAMPLE_UNSPECIFIED) shape.layout = Layout::rgb_drop_extra;
      else unsupported("premultiplied (associated) alpha");
      break;
    }
    case PHOTOMETRIC_PALETTE:
      if (shape.samples != 1) unsupported("palette with extra samples");
      shape.layout = Layout::palette;
      break;
    default: unsupported("photometric interpretation " + std::to_string(photometric));
  }
  static constexpr std::uint32_t kChannels[] = {1, 1, 2, 3, 3, 4, 3};
  shape.channels = kChannels[static_cast<int>(shape.layout)];
  return shape;
}

bool is_direct(Layout layout) {
  return layout == Layout::gray || layout == Layout::gray_alpha || layout == Layout::rgb || layout == Layout::rgba;
}

// The file's samples (width x height x samples) into `samples`, from strips or tiles.
void read_samples(TIFF* tiff, const TiffShape& s, MemoryFile& file, std::uint8_t* samples) {
  const std::size_t row = std::size_t{s.width} * s.samples;
  auto fail = [&]() -> void {
    throw_error(file.position >= file.bytes.size() ? errc::truncated : errc::corrupt_header,
                std::string("TIFF: ") + (file.message[0] ? file.message : "cannot read the image data"));
  };
  if (!TIFFIsTiled(tiff)) {
    if (TIFFScanlineSize64(tiff) != row) fail();
    for (std::uint32_t y = 0; y < s.height; ++y)
      if (TIFFReadScanline(tiff, samples + y * row, y, 0) < 0) fail();
    return;
  }
  std::uint32_t tw = 0, th = 0;
  TIFFGetField(tiff, TIFFTAG_TILEWIDTH, &tw);
  TIFFGetField(tiff, TIFFTAG_TILELENGTH, &th);
  if (tw == 0 || th == 0 || TIFFTileSize64(tiff) != std::uint64_t{tw} * th * s.samples) fail();
  // A tile larger than the image rounded up to tiles of 16 (TIFF's unit) is
  // a hostile header: its buffer would be sized by it, not by the checked image.
  const auto round16 = [](std::uint32_t v) { return (std::uint64_t{v} + 15) / 16 * 16; };
  if (std::uint64_t{tw} * th > round16(s.width) * round16(s.height))
    throw_error(errc::corrupt_header, "TIFF: tile " + std::to_string(tw) + "x" + std::to_string(th) +
                                          " larger than the image");
  std::vector<std::uint8_t> tile(static_cast<std::size_t>(TIFFTileSize64(tiff)));
  for (std::uint32_t ty = 0; ty < s.height; ty += th)
    for (std::uint32_t tx = 0; tx < s.width; tx += tw) {
      if (TIFFReadTile(tiff, tile.data(), tx, ty, 0, 0) < 0) fail();
      const std::uint32_t w = std::min(tw, s.width - tx), h = std::min(th, s.height - ty);
      for (std::uint32_t y = 0; y < h; ++y)
        std::memcpy(samples + (ty + y) * row + std::size_t{tx} * s.samples,
                    tile.data() + std::size_t{y} * tw * s.samples, std::size_t{w} * s.samples);
    }
}

void to_pixels(TIFF* tiff, const TiffShape& s, const std::vector<std::uint8_t>& in, Image& image) {
  const std::size_t n = std::size_t{s.width} * s.height;
  std::uint8_t* out = image.pixels.data();
  switch (s.layout) {
    case Layout::gray:
    case Layout::gray_alpha:
    case Layout::rgb:
    case Layout::rgba: return;  // read in place
    case Layout::gray_inverted:
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::uint8_t>(255 - in[i]);
      return;
    case Layout::rgb_drop_extra:
      for (std::size_t i = 0; i < n; ++i) std::copy(&in[4 * i], &in[4 * i] + 3, out + 3 * i);
      return;
    case Layout::palette: {
      std::uint16_t *r = nullptr, *g = nullptr, *b = nullptr;
      if (!TIFFGetField(tiff, TIFFTAG_COLORMAP, &r, &g, &b)) throw_error(errc::corrupt_header, "TIFF: palette without colormap");
      for (std::size_t i = 0; i < n; ++i) {  // 8-bit: libtiff holds 256 entries
        out[3 * i] = static_cast<std::uint8_t>(r[in[i]] >> 8);
        out[3 * i + 1] = static_cast<std::uint8_t>(g[in[i]] >> 8);
        out[3 * i + 2] = static_cast<std::uint8_t>(b[in[i]] >> 8);
      }
      return;
    }
  }
}

}  // namespace

namespace detail {

Image decode_tiff(std::span<const std::uint8_t> bytes, const LoadOptions& options) {
  MemoryFile file{bytes};
  std::unique_ptr<TIFFOpenOptions, OptionsFree> open_options(TIFFOpenOptionsAlloc());
  if (!open_options) throw_error(errc::out_of_memory, "TIFF: cannot create a reader");
  TIFFOpenOptionsSetErrorHandlerExtR(open_options.get(), on_tiff_error, &file);
  TIFFOpenOptionsSetWarningHandlerExtR(open_options.get(), on_tiff_warning, &file);
  TIFFOpenOptionsSetMaxSingleMemAlloc(open_options.get(), tmsize_t{1} << 30);
  std::unique_ptr<TIFF, TiffCloser> tiff(TIFFClientOpenExt("memory", "rm", &file, read_proc, write_proc, seek_proc,
                                                           close_proc, size_proc, map_proc, unmap_proc,
                                                           open_options.get()));
  if (!tiff)
    throw_error(bytes.size() < 16 ? errc::truncated : errc::corrupt_header,
                std::string("TIFF: ") + (file.message[0] ? file.message : "cannot read the header"));
  // libtiff goes on after some errors (a colormap it cannot read becomes a gray
  // image); any error it reported makes the file a data error here.
  auto check_reported = [&] {
    if (file.message[0] != 0)
      throw_error(file.position >= bytes.size() ? errc::truncated : errc::corrupt_header,
                  std::string("TIFF: ") + file.message);
  };
  check_reported();
  const TiffShape shape = read_shape(tiff.get());
  Image image = allocate_image(shape.width, shape.height, shape.channels, options.limits, "TIFF");
  if (is_direct(shape.layout)) {
    read_samples(tiff.get(), shape, file, image.pixels.data());
  } else {
    std::vector<std::uint8_t> samples(std::size_t{shape.width} * shape.height * shape.samples);
    read_samples(tiff.get(), shape, file, samples.data());
    to_pixels(tiff.get(), shape, samples, image);
  }
  check_reported();
  return image;
}

}  // namespace detail
}  // namespace l3
