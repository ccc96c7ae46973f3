#include "plan.hpp"

#include <limits>
#include <string>

#include "l3/codec/codec_layout.hpp"

namespace l3::cuda::detail {

Plan make_plan(std::span<const PlanImage> images, const BatchOptions& options) {
  Plan plan;
  const std::size_t n = images.size();
  if (n > std::numeric_limits<std::uint32_t>::max()) throw_error(errc::limit_exceeded, "more than 2^32 - 1 images in one batch");
  plan.desc.resize(n);
  plan.counts.resize(n);
  plan.keys.assign(n, wavefront::kStatusOk);
  plan.slots.resize(n);
  std::uint64_t tiles = 0, jobs = 0, out = 0;
  for (std::size_t m = 0; m < n; ++m) {
    const PlanImage& im = images[m];
    wavefront::ImageDesc d{};
    wavefront::ImageCounts c{};
    ImageSlot slot;
    slot.offset = out;
    try {
      const ImageLayout lay = parse_layout(im.bytes, options.limits);
      if (options.verify_checksum) verify_checksum(im.bytes);
      const ImageInfo& info = lay.info;
      Rect crop{0, 0, info.width, info.height};
      if (im.crop) {
        crop = *im.crop;
        if (crop.width == 0 || crop.height == 0 || crop.x >= info.width || crop.y >= info.height ||
            crop.width > info.width - crop.x || crop.height > info.height - crop.y)
          throw_error(errc::out_of_range, "crop outside the image");
      }
      d.in = im.in;
      d.in_size = info.encoded_size;
      d.payload_offset = lay.payload_offset;
      d.grid = lay.grid;
      d.version = info.version;
      d.channels = info.channels;
      d.crop_x = crop.x;
      d.crop_y = crop.y;
      d.crop_w = crop.width;
      d.crop_h = crop.height;
      d.span = lay.grid.overlapped({crop.x, crop.y, crop.width, crop.height});
      d.layout = static_cast<std::uint32_t>(options.layout);
      c.tiles = lay.tile_count();
      c.jobs = d.span.cols * d.span.rows;
      c.out = std::uint64_t{crop.width} * crop.height * info.channels;
      slot.width = crop.width;
      slot.height = crop.height;
      slot.channels = info.channels;
      slot.size = c.out;
    } catch (const Error& e) {
      d = wavefront::ImageDesc{};
      c = wavefront::ImageCounts{};
      slot.status = e.code();
      plan.keys[m] = wavefront::status_key(0, static_cast<int>(e.code()));
    }
    tiles += c.tiles;
    jobs += c.jobs;
    out += c.out;
    plan.desc[m] = d;
    plan.counts[m] = c;
    plan.slots[m] = slot;
  }
  if (tiles > std::numeric_limits<std::uint32_t>::max() || jobs > std::numeric_limits<std::uint32_t>::max())
    throw_error(errc::limit_exceeded, std::to_string(tiles) + " tiles in one batch (at most 2^32 - 1)");
  plan.total_tiles = static_cast<std::uint32_t>(tiles);
  plan.total_jobs = static_cast<std::uint32_t>(jobs);
  plan.output_bytes = out;
  return plan;
}

}  // namespace l3::cuda::detail
