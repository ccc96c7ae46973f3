// Host side of a batch decode, shared by the CUDA decoder and its CPU
// emulation: validates every image (the CPU decoder's own checks, through
// l3::parse_layout) and builds the checked per-image descriptors. Loops over
// images only; per-tile offsets come from scans (device or emulated).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "l3/cuda/batch_types.hpp"
#include "l3/cuda/wavefront.hpp"

namespace l3::cuda::detail {

struct PlanImage {
  std::span<const std::uint8_t> bytes;  // host view, validated here
  const std::uint8_t* in = nullptr;     // where the kernel reads the same bytes
  const Rect* crop = nullptr;           // null: the whole image
};

// Where the kernels read an image's stream: from the host bytes themselves (the
// emulation), or from a device copy that Plan::set_input names later.
enum class KernelsRead { host_bytes, device_copy };
std::vector<PlanImage> plan_images(std::span<const HostImage> images, KernelsRead read = KernelsRead::device_copy);

// Entries 0..slots.size()-1 of desc/counts/keys are the caller's images; one
// entry follows them for each image with symbols (spec/codec.md §3.4): its
// dictionary, decoded whole like an image, into the decoder's scratch
// (spec/cuda.md §4).
struct Plan {
  std::vector<wavefront::ImageDesc> desc;
  std::vector<wavefront::ImageCounts> counts;
  std::vector<std::uint64_t> keys;  // initial status keys: kStatusOk, or the host's rejection
  std::vector<ImageSlot> slots;     // host copy of the output layout
  std::uint32_t total_tiles = 0, total_jobs = 0;
  std::uint64_t output_bytes = 0;   // the caller's images' slots
  std::uint64_t scratch_bytes = 0;  // the dictionaries' slots, after them

  std::uint32_t image_count() const { return static_cast<std::uint32_t>(slots.size()); }
  std::uint32_t entry_count() const { return static_cast<std::uint32_t>(desc.size()); }
  // Whether an image has symbols (a dictionary entry): the patch kernel's work.
  bool has_symbols() const { return entry_count() > image_count(); }
  // Points image m (and its dictionary's entry) at `in`, where the kernels
  // read the image's stream.
  void set_input(std::uint32_t m, const std::uint8_t* in);
};

// Throws l3::Error(invalid_argument / limit_exceeded) only for batch-wide
// problems (too many tiles for 32-bit indices); a bad image gets a status.
Plan make_plan(std::span<const PlanImage> images, const BatchOptions& options);

}  // namespace l3::cuda::detail
