// The one pixel layout vocabulary: how an image's (or a batch example's)
// samples are ordered. Used by the reader's transforms and batches, the CUDA
// batch decoder's output slots and the device descriptors (its values are
// stored as uint32 in them), the CLI and the Python binding.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace l3 {

// hwc: interleaved, H x W x C (N x H x W x C stacked); chw: planar, C x H x W.
enum class Layout : std::uint32_t { hwc = 0, chw = 1 };

constexpr const char* layout_name(Layout l) noexcept { return l == Layout::chw ? "chw" : "hwc"; }

// "chw" or "hwc"; nothing for any other text.
constexpr std::optional<Layout> layout_from_name(std::string_view s) noexcept {
  if (s == "chw") return Layout::chw;
  if (s == "hwc") return Layout::hwc;
  return std::nullopt;
}

}  // namespace l3
