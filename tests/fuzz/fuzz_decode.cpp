// fuzz_decode: arbitrary bytes -> read_info + decode, with a pixel cap.
// Properties: no crash, no allocation beyond the cap; read_info and decode
// agree (same info, or the same header/table error); decoding with 1 and 2
// threads gives the same pixels or the same error.
#include <cstring>
#include <optional>

#include "fuzz_common.hpp"
#include "l3/codec/codec.hpp"

namespace {

struct Outcome {
  l3::errc code = l3::errc::ok;
  std::vector<std::uint8_t> pixels;
  l3::ImageInfo info;
};

Outcome run_decode(std::span<const std::uint8_t> in, const l3::Limits& limits, unsigned threads) {
  Outcome o;
  l3::DecodeOptions opt;
  opt.limits = limits;
  opt.threads = threads;
  l3fuzz::skip_stream_checksum(opt);
  try {
    o.pixels = l3::decode(in, &o.info, opt);
  } catch (const l3::Error& e) {
    o.code = e.code();
  }
  return o;
}

bool same_info(const l3::ImageInfo& a, const l3::ImageInfo& b) {
  return a.width == b.width && a.height == b.height && a.channels == b.channels && a.bit_depth == b.bit_depth &&
         a.tile_width == b.tile_width && a.tile_height == b.tile_height && a.tiles_x == b.tiles_x &&
         a.tiles_y == b.tiles_y && a.encoded_size == b.encoded_size;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  l3fuzz::begin();
  const std::span<const std::uint8_t> in(data, size);
  l3::Limits limits;
  limits.max_width = 4096;
  limits.max_height = 4096;
  limits.max_pixels = std::uint64_t{1} << 22;

  std::optional<l3::ImageInfo> info;
  l3::errc info_error = l3::errc::ok;
  try {
    info = l3::read_info(in, limits);
  } catch (const l3::Error& e) {
    info_error = e.code();
  }
  if (info) {
    L3_FUZZ_CHECK(info->width >= 1 && info->width <= limits.max_width);
    L3_FUZZ_CHECK(info->height >= 1 && info->height <= limits.max_height);
    L3_FUZZ_CHECK(std::uint64_t{info->width} * info->height <= limits.max_pixels);
    L3_FUZZ_CHECK(info->channels >= 1 && info->channels <= 4);
    L3_FUZZ_CHECK(info->encoded_size == size);
  }

  const Outcome one = run_decode(in, limits, 1);
  if (!info) {
    // A stream read_info rejects is rejected by decode with the same error.
    L3_FUZZ_CHECK(one.code == info_error);
  } else if (one.code == l3::errc::ok) {
    L3_FUZZ_CHECK(same_info(one.info, *info));
    L3_FUZZ_CHECK(one.pixels.size() == info->decoded_size());
  } else {
    // Header and table were valid: only tile errors remain.
    L3_FUZZ_CHECK(l3::is_data_error(one.code));
  }
  if (info && info->tiles_x * info->tiles_y > 1) {
    const Outcome two = run_decode(in, limits, 2);
    L3_FUZZ_CHECK(two.code == one.code);
    L3_FUZZ_CHECK(two.pixels == one.pixels);
  }
  l3fuzz::last_error() = one.code;
  return 0;
}
