// fuzz_region: the first 8 bytes pick a rectangle, the rest is an .l3i stream.
// Properties: decode_region never crashes; when the stream decodes fully, the
// region equals the crop of the full decode; a region that fails to decode
// means the full decode fails too; 1 and 2 threads agree.
#include <vector>

#include "fuzz_common.hpp"
#include "l3/codec/codec.hpp"

namespace {

struct Outcome {
  l3::errc code = l3::errc::ok;
  std::vector<std::uint8_t> pixels;
};

Outcome region(std::span<const std::uint8_t> in, const l3::Rect& r, std::uint32_t channels,
               const l3::DecodeOptions& opt) {
  Outcome o;
  o.pixels.assign(std::size_t(r.width) * r.height * channels, 0);
  try {
    l3::decode_region(in, r, l3::MutableImageView{o.pixels.data(), r.width, r.height, channels, 0}, opt);
  } catch (const l3::Error& e) {
    o.code = e.code();
  }
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  l3fuzz::begin();
  l3fuzz::Bytes b(data, size);
  const std::uint16_t rx = b.u16(), ry = b.u16(), rw = b.u16(), rh = b.u16();
  const std::span<const std::uint8_t> in = b.rest();
  l3::DecodeOptions opt;
  opt.limits.max_width = 4096;
  opt.limits.max_height = 4096;
  opt.limits.max_pixels = std::uint64_t{1} << 22;
  l3fuzz::skip_stream_checksum(opt);

  l3::ImageInfo info;
  try {
    info = l3::read_info(in, opt.limits);
  } catch (const l3::Error& e) {
    // Any rectangle: the stream error (or an argument error) must come out.
    std::vector<std::uint8_t> out(64);
    try {
      l3::decode_region(in, l3::Rect{rx, ry, 1, 1}, l3::MutableImageView{out.data(), 1, 1, 4, 0}, opt);
      L3_FUZZ_CHECK(false && "decode_region accepted a stream read_info rejects");
    } catch (const l3::Error& e2) {
      L3_FUZZ_CHECK(e2.code() == e.code());
    }
    l3fuzz::caught(e);
    return 0;
  }
  // Out-of-range rectangles are refused (the high bit of rx asks for one).
  if (rx & 0x8000) {
    const l3::Rect bad{info.width - (rx & 1u), 0, 1 + (rx & 1u), 1};
    std::vector<std::uint8_t> out(std::size_t(bad.width) * info.channels);
    try {
      l3::decode_region(in, bad, l3::MutableImageView{out.data(), bad.width, 1, info.channels, 0}, opt);
      L3_FUZZ_CHECK(false && "decode_region accepted a rectangle outside the image");
    } catch (const l3::Error& e) {
      L3_FUZZ_CHECK(e.code() == l3::errc::out_of_range);
    }
  }
  l3::Rect r;
  r.x = rx % info.width;
  r.y = ry % info.height;
  r.width = 1 + rw % (info.width - r.x);
  r.height = 1 + rh % (info.height - r.y);
  const Outcome one = region(in, r, info.channels, opt);
  Outcome full;
  try {
    full.pixels = l3::decode(in, nullptr, opt);
  } catch (const l3::Error& e) {
    full.code = e.code();
  }
  if (one.code != l3::errc::ok) {
    L3_FUZZ_CHECK(l3::is_data_error(one.code));
    L3_FUZZ_CHECK(full.code != l3::errc::ok);
  }
  if (one.code == l3::errc::ok && full.code == l3::errc::ok) {
    const std::size_t row = std::size_t(r.width) * info.channels;
    for (std::uint32_t y = 0; y < r.height; ++y)
      L3_FUZZ_CHECK(std::equal(one.pixels.begin() + std::ptrdiff_t(y * row), one.pixels.begin() + std::ptrdiff_t((y + 1) * row),
                               full.pixels.begin() + std::ptrdiff_t(((r.y + y) * std::size_t(info.width) + r.x) * info.channels)));
  }
  if (info.tiles_x * info.tiles_y > 1) {
    l3::DecodeOptions opt2 = opt;
    opt2.threads = 2;
    const Outcome two = region(in, r, info.channels, opt2);
    L3_FUZZ_CHECK(two.code == one.code);
    if (one.code == l3::errc::ok) L3_FUZZ_CHECK(two.pixels == one.pixels);
  }
  l3fuzz::last_error() = one.code != l3::errc::ok ? one.code : full.code;
  return 0;
}
