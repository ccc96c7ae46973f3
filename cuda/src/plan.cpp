#include "plan.hpp"

#include <limits>
#include <string>

#include "l3/codec/codec_layout.hpp"

namespace l3::cuda::detail {
namespace {

// The descriptor and counts of an entry that decodes the stream `lay`
// describes (its input pointer set later, Plan::set_input): `crop` of it, in
// `layout`.
void describe(const ImageLayout& lay, const Rect& crop, std::uint32_t layout, wavefront::ImageDesc& d,
              wavefront::ImageCounts& c) {
  d.in_size = lay.info.encoded_size;
  d.payload_offset = lay.payload_offset;
  d.grid = lay.grid;
  d.version = lay.info.version;
  d.channels = lay.info.channels;
  d.crop_x = crop.x;
  d.crop_y = crop.y;
  d.crop_w = crop.width;
  d.crop_h = crop.height;
  d.span = lay.grid.overlapped({crop.x, crop.y, crop.width, crop.height});
  d.layout = layout;
  c.tiles = lay.tile_count();
  c.jobs = d.span.cols * d.span.rows;
  c.out = std::uint64_t{crop.width} * crop.height * lay.info.channels;
}

// Appends the entry that decodes image `d`'s symbol dictionary, a whole
// stream inside the image's (validated by parse_layout), as an HWC image
// without crop; its slot lies past the caller's images, in the scratch.
void add_dictionary(Plan& plan, std::span<const std::uint8_t> bytes, const ImageLayout& image, const BatchOptions& options,
                    wavefront::ImageDesc& d) {
  const core::SymbolSection& sec = image.symbols;
  const ImageLayout lay = parse_layout(bytes.subspan(sec.dict_offset, sec.dict_size), options.limits);
  wavefront::ImageDesc e{};
  wavefront::ImageCounts c{};
  describe(lay, {0, 0, lay.info.width, lay.info.height}, wavefront::kHWC, e, c);
  d.dictionary = plan.entry_count();
  d.symbols = sec;
  plan.desc.push_back(e);
  plan.counts.push_back(c);
  plan.keys.push_back(wavefront::kStatusOk);
}

}  // namespace

void Plan::set_input(std::uint32_t m, const std::uint8_t* in) {
  wavefront::ImageDesc& d = desc[m];
  d.in = in;
  if (d.dictionary != wavefront::kNoDictionary) desc[d.dictionary].in = in ? in + d.symbols.dict_offset : nullptr;
}

std::vector<PlanImage> plan_images(std::span<const HostImage> images, KernelsRead read) {
  std::vector<PlanImage> out(images.size());
  for (std::size_t m = 0; m < images.size(); ++m) {
    const std::uint8_t* in = read == KernelsRead::host_bytes ? images[m].bytes.data() : nullptr;
    out[m] = {images[m].bytes, in, images[m].crop ? &*images[m].crop : nullptr};
  }
  return out;
}

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
      if (options.verify_checksum) verify_checksum(im.bytes, lay);
      const ImageInfo& info = lay.info;
      Rect crop{0, 0, info.width, info.height};
      if (im.crop) {
        crop = *im.crop;
        if (crop.width == 0 || crop.height == 0 || crop.x >= info.width || crop.y >= info.height ||
            crop.width > info.width - crop.x || crop.height > info.height - crop.y)
          throw_error(errc::out_of_range, "crop outside the image");
      }
      describe(lay, crop, static_cast<std::uint32_t>(options.layout), d, c);
      slot.width = crop.width;
      slot.height = crop.height;
      slot.channels = info.channels;
      slot.size = c.out;
      if (lay.symbols.patch_count) add_dictionary(plan, im.bytes, lay, options, d);
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
    if (slot.status == errc::ok) plan.set_input(static_cast<std::uint32_t>(m), im.in);
  }
  for (std::uint32_t k = plan.image_count(); k < plan.entry_count(); ++k) {
    tiles += plan.counts[k].tiles;
    jobs += plan.counts[k].jobs;
    plan.scratch_bytes += plan.counts[k].out;
  }
  if (tiles > std::numeric_limits<std::uint32_t>::max() || jobs > std::numeric_limits<std::uint32_t>::max())
    throw_error(errc::limit_exceeded, std::to_string(tiles) + " tiles in one batch (at most 2^32 - 1)");
  plan.total_tiles = static_cast<std::uint32_t>(tiles);
  plan.total_jobs = static_cast<std::uint32_t>(jobs);
  plan.output_bytes = out;
  return plan;
}

}  // namespace l3::cuda::detail
