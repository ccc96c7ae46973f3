// fuzz_wavefront: arbitrary bytes -> the CUDA batch decoder's decomposition
// on the CPU (l3_cuda_emu: the host plan, the gather and scans, the per-warp
// wavefront of l3/cuda/wavefront.hpp that the kernels run) against l3::decode.
// Properties: no crash and no access outside the stream or the slots (under
// ASan: the kernels never assert on input, they write a status per image,
// spec/cuda.md); the batch's status of the image equals the error l3::decode
// throws (errc::ok when none), and when it decodes, the same pixels; the
// same for a crop of the image's lower right part against l3::decode_region.
// Checksums off (as in fuzz_decode), so that mutations reach the tiles.
#include <optional>
#include <vector>

#include "fuzz_common.hpp"
#include "l3/codec/codec.hpp"
#include "l3/cuda/emulation.hpp"

namespace {

struct Outcome {
  l3::errc code = l3::errc::ok;
  std::vector<std::uint8_t> pixels;
};

// The emulated batch of one image (optionally cropped): its slot's status and pixels.
Outcome run_batch(std::span<const std::uint8_t> in, const std::optional<l3::Rect>& crop, const l3::Limits& limits) {
  l3::cuda::BatchOptions opt;
  opt.limits = limits;
  opt.verify_checksum = false;
  const l3::cuda::HostImage image{in, crop};
  const l3::cuda::emu::BatchOutput out = l3::cuda::emu::decode_batch(std::span<const l3::cuda::HostImage>(&image, 1), opt);
  L3_FUZZ_CHECK(out.slots.size() == 1);
  const l3::cuda::ImageSlot& s = out.slots[0];
  Outcome o;
  o.code = s.status;
  if (s.status == l3::errc::ok) {
    L3_FUZZ_CHECK(s.offset + s.size <= out.pixels.size());
    o.pixels.assign(out.pixels.begin() + std::ptrdiff_t(s.offset), out.pixels.begin() + std::ptrdiff_t(s.offset + s.size));
  }
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  l3fuzz::begin();
  const std::span<const std::uint8_t> in(data, size);
  // The emulation runs 32 lanes in loops: a smaller cap than fuzz_decode's.
  l3::Limits limits;
  limits.max_width = 2048;
  limits.max_height = 2048;
  limits.max_pixels = std::uint64_t{1} << 18;
  l3::DecodeOptions dopt;
  dopt.limits = limits;
  dopt.threads = 1;
  dopt.verify_checksum = false;

  Outcome want;
  l3::ImageInfo info{};
  try {
    want.pixels = l3::decode(in, &info, dopt);
  } catch (const l3::Error& e) {
    want.code = e.code();
  }
  const Outcome whole = run_batch(in, std::nullopt, limits);
  L3_FUZZ_CHECK(whole.code == want.code);
  if (want.code == l3::errc::ok) L3_FUZZ_CHECK(whole.pixels == want.pixels);
  l3fuzz::last_error() = want.code;

  // A crop from a third of the way in to the lower right corner (crossing
  // tile edges in both directions on most images), when the header is valid.
  if (want.code != l3::errc::ok && !l3::is_data_error(want.code)) return 0;
  if (info.width == 0) {  // a tile error: the header still holds
    try {
      info = l3::read_info(in, limits);
    } catch (const l3::Error&) {
      return 0;
    }
  }
  const l3::Rect crop{info.width / 3, info.height / 3, info.width - info.width / 3, info.height - info.height / 3};
  Outcome region;
  region.pixels.resize(std::size_t(crop.width) * crop.height * info.channels);
  try {
    l3::decode_region(in, crop, l3::MutableImageView{region.pixels.data(), crop.width, crop.height, info.channels, 0},
                      dopt);
  } catch (const l3::Error& e) {
    region.code = e.code();
    region.pixels.clear();
  }
  const Outcome cropped = run_batch(in, crop, limits);
  L3_FUZZ_CHECK(cropped.code == region.code);
  if (region.code == l3::errc::ok) L3_FUZZ_CHECK(cropped.pixels == region.pixels);
  return 0;
}
