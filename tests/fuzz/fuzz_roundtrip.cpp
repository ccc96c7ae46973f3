// fuzz_roundtrip: bytes -> (width, height, channels, tile options, effort,
// pixels) -> encode -> decode. Properties: the decoded pixels equal the input;
// encoding twice (and with 2 threads) gives identical bytes; read_info agrees
// with the options; decoding with 1 and 2 threads gives identical pixels.
#include <algorithm>
#include <vector>

#include "fuzz_common.hpp"
#include "l3/codec/codec.hpp"
#include "../test_tile_pattern.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  l3fuzz::begin();
  l3fuzz::Bytes b(data, size);
  const std::uint32_t channels = 1 + b.u8() % 4;
  const std::uint32_t width = 1 + b.u16() % 600;
  std::uint32_t height = 1 + b.u8() % 80;
  // Work grows with the input: at most 4096 + 64 * size pixels (wide images
  // with several 256-wide tiles stay reachable, but short).
  const std::size_t max_pixels = 4096 + 64 * size;
  if (std::size_t(width) * height > max_pixels) height = std::max<std::uint32_t>(1, std::uint32_t(max_pixels / width));
  static constexpr std::uint32_t kTileWidths[] = {0, 16, 32, 64, 128, 256, 16, 256};
  l3::EncodeOptions opt;
  opt.tile_width = kTileWidths[b.u8() % 8];
  opt.tile_height = b.u8() % 33;  // 0: default
  const std::uint8_t mode = b.u8();
  opt.effort = mode & 1;
  const std::span<const std::uint8_t> src = b.rest();

  // Pixels from the rest of the input, in one of four shapes so that the
  // predictors, runs, constant and raw tiles all see data they like.
  const std::size_t n = std::size_t(width) * height * channels;
  std::vector<std::uint8_t> px(n);
  std::uint8_t acc = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint8_t s = src.empty() ? std::uint8_t(i * 7) : src[i % src.size()];
    switch ((mode >> 1) & 3) {
      case 0: px[i] = s; break;                                   // noise (raw tiles)
      case 1: acc = std::uint8_t(acc + (s & 7) - 3); px[i] = acc; break;  // smooth
      case 2: px[i] = (s & 0xF0) == 0 ? s : 0; break;             // sparse: zero runs
      default: px[i] = src.empty() ? 0 : src[(i / (channels * 37)) % src.size()]; break;  // flat blocks
    }
  }
  if (mode & 0x10) {
    // Along x + y: every sample equals its NE neighbour (mirrored tiles, spec/codec.md §4.7).
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t pixel = i / channels, x = pixel % width, y = pixel / width;
      px[i] = src.empty() ? std::uint8_t(x + y) : src[(x + y + i % channels) % src.size()];
    }
  }
  if (mode & 0x20) {
    // Each channel dithered to 0 or 255 by an 8 x 8 Bayer matrix: palettes of
    // up to 16 colours in bit planes, templates 8 to the left and 8 up
    // (version 13, spec/codec.md §6.8).
    const std::uint8_t seed = src.empty() ? 0 : src[0];
    l3::test::fill_ordered_dither(px.data(), width, height, channels, seed);
  }
  if (mode & 0x40) {
    // Rounded affine planes, a little noise: ramps (version 14, spec/codec.md §6.9).
    const std::uint8_t seed = src.empty() ? 0 : src[0];
    l3::test::fill_ramps(px.data(), width, height, channels, (mode & 0x80) != 0, seed);
  }
  if (mode & 0x08) {
    // Glyphs repeated on a background: symbols (version 15, spec/codec.md §3.4).
    const std::uint8_t seed = src.empty() ? 0 : src[0];
    l3::test::fill_symbol_page(px.data(), width, height, channels, seed);
  }
  const l3::ImageView view{px.data(), width, height, channels, 0};
  const std::vector<std::uint8_t> enc = l3::encode(view, opt);
  L3_FUZZ_CHECK(l3::encode(view, opt) == enc);
  l3::EncodeOptions opt2 = opt;
  opt2.threads = 2;
  L3_FUZZ_CHECK(l3::encode(view, opt2) == enc);

  const l3::ImageInfo info = l3::read_info(enc);
  L3_FUZZ_CHECK(info.width == width && info.height == height && info.channels == channels);
  L3_FUZZ_CHECK(info.encoded_size == enc.size());
  if (opt.tile_width) L3_FUZZ_CHECK(info.tile_width == opt.tile_width);
  if (opt.tile_height) L3_FUZZ_CHECK(info.tile_height == opt.tile_height);

  l3::DecodeOptions d1;
  const std::vector<std::uint8_t> dec = l3::decode(enc, nullptr, d1);
  L3_FUZZ_CHECK(dec == px);
  l3::DecodeOptions d2;
  d2.threads = 2;
  L3_FUZZ_CHECK(l3::decode(enc, nullptr, d2) == px);

  // Into a strided buffer: the padding is left untouched.
  const std::size_t stride = std::size_t(width) * channels + 3;
  std::vector<std::uint8_t> strided(stride * height, 0xA5);
  l3::decode(enc, l3::MutableImageView{strided.data(), width, height, channels, stride}, d1);
  for (std::uint32_t y = 0; y < height; ++y)
    for (std::size_t x = 0; x < stride; ++x) {
      const std::uint8_t want = x < std::size_t(width) * channels ? px[y * std::size_t(width) * channels + x] : 0xA5;
      L3_FUZZ_CHECK(strided[y * stride + x] == want);
    }
  return 0;
}
