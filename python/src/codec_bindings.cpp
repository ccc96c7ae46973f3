// Codec bindings: encode / decode / decode_region / info, and image files
// (PNG / JPEG / PNM) read losslessly or encoded to .l3i without Python.
#include <nanobind/stl/string.h>

#include <string>

#include "ext.hpp"
#include "l3/codec/codec.hpp"
#include "l3/convert/convert.hpp"
#include "l3/common/error.hpp"
#include "l3/imageio/image_io.hpp"
#include "l3/reader/transforms.hpp"

namespace l3py {

using namespace nb::literals;

// channels 0: as stored; 1 or 3: by the loader's channel rule (l3::convert_channels).
U8Array decode_span(std::span<const std::uint8_t> data, unsigned threads, bool verify, std::uint32_t channels) {
  l3::DecodeOptions opt;
  opt.threads = threads;
  opt.verify_checksum = verify;
  const l3::ImageInfo i = l3::read_info(data, opt.limits);
  if (channels == i.channels) channels = 0;
  if (channels != 0) l3::check_output_channels(i.channels, channels);
  const std::size_t out_bytes = channels == 0 ? i.decoded_size() : std::size_t{i.width} * i.height * channels;
  HostBuffer* buf = new_host_buffer(out_bytes);
  try {
    without_gil([&] {
      auto* out = static_cast<std::uint8_t*>(buf->data);
      if (channels == 0) {
        l3::decode(data, l3::MutableImageView{out, i.width, i.height, i.channels, 0}, opt);
        return;
      }
      std::vector<std::uint8_t> stored = l3::decode(data, nullptr, opt);
      l3::convert_channels(l3::ImageView{stored.data(), i.width, i.height, i.channels, 0}, channels, out);
    });
  } catch (...) {
    free_host_buffer(buf);
    throw;
  }
  return owned_image(i.height, i.width, channels == 0 ? i.channels : channels, buf);
}

l3::EncodeOptions encode_options(std::uint32_t tile_width, std::uint32_t tile_height, int effort, unsigned threads,
                                 const std::string& entropy) {
  l3::EncodeOptions opt;
  opt.tile_width = tile_width;
  opt.tile_height = tile_height;
  opt.effort = effort;
  opt.threads = threads;
  l3::set_entropy_mode(opt, entropy);
  return opt;
}

namespace {

// image: a C-contiguous uint8 array (H, W, C) checked by the Python layer.
nb::bytes encode(nb::ndarray<const std::uint8_t, nb::ndim<3>, nb::c_contig, nb::device::cpu> image,
                 std::uint32_t tile_width, std::uint32_t tile_height, int effort, unsigned threads,
                 const std::string& entropy) {
  auto shape_u32 = [](std::size_t v, const char* what) {
    if (v > 0xffffffffu) l3::throw_error(l3::errc::limit_exceeded, std::string(what) + " too large");
    return static_cast<std::uint32_t>(v);
  };
  l3::ImageView view{image.data(), shape_u32(image.shape(1), "width"), shape_u32(image.shape(0), "height"),
                     shape_u32(image.shape(2), "channels"), 0};
  const l3::EncodeOptions opt = encode_options(tile_width, tile_height, effort, threads, entropy);
  std::vector<std::uint8_t> out = without_gil([&] { return l3::encode(view, opt); });
  return nb::bytes(reinterpret_cast<const char*>(out.data()), out.size());
}

nb::dict info_dict(const l3::ImageInfo& i) {
  nb::dict d;
  d["version"] = i.version;  // of the stream's format (spec/codec.md §11)
  d["width"] = i.width;
  d["height"] = i.height;
  d["channels"] = i.channels;
  d["bit_depth"] = i.bit_depth;
  d["tile_width"] = i.tile_width;
  d["tile_height"] = i.tile_height;
  d["tiles_x"] = i.tiles_x;
  d["tiles_y"] = i.tiles_y;
  d["tile_copies"] = i.tile_copies;  // tiles stored as copies of earlier ones (spec/codec.md §3.3)
  d["symbol_patches"] = i.symbol_patches;  // patches of the symbol section (spec/codec.md §3.4); 0: none
  d["encoded_size"] = i.encoded_size;
  d["decoded_size"] = i.decoded_size();
  return d;
}

nb::dict info(nb::bytes data) { return info_dict(l3::read_info(as_span(data))); }

U8Array decode(nb::bytes data, unsigned threads, bool verify) { return decode_span(as_span(data), threads, verify); }

U8Array decode_region(nb::bytes data, std::uint32_t x, std::uint32_t y, std::uint32_t w, std::uint32_t h,
                      unsigned threads, bool verify) {
  const auto span = as_span(data);
  l3::DecodeOptions opt;
  opt.threads = threads;
  opt.verify_checksum = verify;
  const l3::ImageInfo i = l3::read_info(span, opt.limits);
  HostBuffer* buf = new_host_buffer(std::size_t{w} * h * i.channels);
  try {
    without_gil([&] {
      l3::decode_region(span, l3::Rect{x, y, w, h},
                        l3::MutableImageView{static_cast<std::uint8_t*>(buf->data), w, h, i.channels, 0}, opt);
    });
  } catch (...) {
    free_host_buffer(buf);
    throw;
  }
  return owned_image(h, w, i.channels, buf);
}

// ---- image files -------------------------------------------------------------------

U8Array image_to_array(l3::Image&& img) {
  HostBuffer* buf = new_host_buffer(img.pixels.size());
  std::memcpy(buf->data, img.pixels.data(), img.pixels.size());
  return owned_image(img.height, img.width, img.channels, buf);
}

U8Array load_image(const std::string& path) {
  l3::Image img = without_gil([&] { return l3::load_image(path); });
  return image_to_array(std::move(img));
}

U8Array decode_image_bytes(nb::bytes data) {
  l3::Image img = without_gil([&] { return l3::decode_image_bytes(as_span(data)); });
  return image_to_array(std::move(img));
}

// PNG / JPEG / PNM file bytes -> .l3i bytes, without a round trip through Python.
nb::bytes encode_file(const std::string& path, std::uint32_t tile_width, std::uint32_t tile_height, int effort,
                      unsigned threads, const std::string& entropy) {
  const l3::EncodeOptions opt = encode_options(tile_width, tile_height, effort, threads, entropy);
  std::vector<std::uint8_t> out = without_gil([&] {
    l3::Image img = l3::load_image(path);
    return l3::encode(img.view(), opt);
  });
  return nb::bytes(reinterpret_cast<const char*>(out.data()), out.size());
}

}  // namespace

void bind_codec(nb::module_& m) {
  m.def("encode", &encode, "image"_a, "tile_width"_a = 0, "tile_height"_a = 0, "effort"_a = 1, "threads"_a = 1,
        "entropy"_a = "auto");
  m.def("decode", &decode, "data"_a, "threads"_a = 1, "verify_checksum"_a = true);
  m.def("decode_region", &decode_region, "data"_a, "x"_a, "y"_a, "width"_a, "height"_a, "threads"_a = 1,
        "verify_checksum"_a = true);
  m.def("info", &info, "data"_a);
  m.def("load_image", &load_image, "path"_a);
  m.def("decode_image_bytes", &decode_image_bytes, "data"_a);
  m.def("encode_file", &encode_file, "path"_a, "tile_width"_a = 0, "tile_height"_a = 0, "effort"_a = 1,
        "threads"_a = 1, "entropy"_a = "auto");
}

}  // namespace l3py
