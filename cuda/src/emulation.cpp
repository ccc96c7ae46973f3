// CPU emulation of the batch decode (see l3/cuda/emulation.hpp and spec/cuda.md).
#include "l3/cuda/emulation.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>

#include "l3/cuda/wavefront.hpp"
#include "plan.hpp"

namespace l3::cuda::emu {

BatchOutput decode_batch(std::span<const HostImage> images, const BatchOptions& options) {
  const std::vector<detail::PlanImage> in = detail::plan_images(images, detail::KernelsRead::host_bytes);
  detail::Plan plan = detail::make_plan(in, options);

  // The device's exclusive scans.
  std::vector<wavefront::ImageCounts> first(plan.counts.size());
  std::exclusive_scan(plan.counts.begin(), plan.counts.end(), first.begin(), wavefront::ImageCounts{0, 0, 0},
                      wavefront::AddCounts{});
  BatchOutput result;
  result.pixels.assign(plan.output_bytes, 0);
  std::vector<std::uint8_t> dictionaries(plan.scratch_bytes);
  wavefront::BatchView view{};
  view.output = result.pixels.data();
  view.output_bytes = plan.output_bytes;
  view.scratch = dictionaries.data();
  view.images = plan.desc.data();
  view.first = first.data();
  view.image_count = plan.entry_count();
  // Gather kernel: one thread per tile.
  std::vector<std::uint32_t> tile_size(plan.total_tiles);
  for (std::uint32_t i = 0; i < plan.total_tiles; ++i) tile_size[i] = wavefront::gather_tile_size(view, i);
  std::vector<std::uint64_t> tile_start(plan.total_tiles);
  std::exclusive_scan(tile_size.begin(), tile_size.end(), tile_start.begin(), std::uint64_t{0});
  view.tile_size = tile_size.data();
  view.tile_start = tile_start.data();
  // Decode kernel: one warp per job.
  std::vector<std::uint64_t> keys = plan.keys;
  // The warp's shared memory (a parse result and an output ring, ~10 KB).
  auto scratch = std::make_unique<wavefront::WarpScratch>();
  wavefront::CpuWarp warp;
  auto atomic_min = [](std::uint64_t* p, std::uint64_t v) { *p = std::min(*p, v); };
  for (std::uint32_t j = 0; j < plan.total_jobs; ++j)
    wavefront::decode_job(warp, view, j, *scratch, keys.data(), atomic_min);
  // Patch kernel: one warp per image, after every decode job.
  if (plan.has_symbols())
    for (std::uint32_t m = 0; m < plan.image_count(); ++m) wavefront::patch_image(warp, view, m, keys.data(), atomic_min);
  // Finalize kernel: keys to statuses.
  result.slots = std::move(plan.slots);
  for (std::size_t m = 0; m < result.slots.size(); ++m)
    result.slots[m].status = static_cast<errc>(wavefront::status_of_key(keys[m]));
  return result;
}

namespace {

void decode_one(std::span<const std::uint8_t> encoded, const Rect* region, const MutableImageView& out,
                const DecodeOptions& decode_options) {
  HostImage im{encoded, region ? std::optional<Rect>(*region) : std::nullopt};
  BatchOptions options;
  options.limits = decode_options.limits;
  options.verify_checksum = decode_options.verify_checksum;
  const BatchOutput b = decode_batch(std::span<const HostImage>(&im, 1), options);
  const ImageSlot& s = b.slots[0];
  if (s.status != errc::ok) throw_error(s.status, "wavefront decode");
  if (!out.data) throw_error(errc::invalid_argument, "output buffer is null");
  if (out.width != s.width || out.height != s.height || out.channels != s.channels)
    throw_error(errc::invalid_argument, "output shape does not match the image");
  const std::size_t row = std::size_t(s.width) * s.channels;
  const std::size_t stride = out.stride ? out.stride : row;
  if (stride < row) throw_error(errc::invalid_argument, "output stride smaller than a row");
  for (std::uint32_t y = 0; y < s.height; ++y) std::memcpy(out.data + y * stride, b.pixels.data() + y * row, row);
}

}  // namespace

void decode_image_wavefront(std::span<const std::uint8_t> encoded, const MutableImageView& out,
                            const DecodeOptions& options) {
  decode_one(encoded, nullptr, out, options);
}

void decode_region_wavefront(std::span<const std::uint8_t> encoded, const Rect& region, const MutableImageView& out,
                             const DecodeOptions& options) {
  decode_one(encoded, &region, out, options);
}

}  // namespace l3::cuda::emu
