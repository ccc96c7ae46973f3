// Types shared by the CUDA batch decoder (batch_decoder.hpp) and its CPU
// emulation (emulation.hpp). Host-only, no CUDA headers.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "l3/codec/codec.hpp"
#include "l3/common/error.hpp"
#include "l3/common/pixel_layout.hpp"

namespace l3::cuda {

// Output layout of each image's slot: interleaved (NHWC when the slots are
// stacked) or planar (CHW); l3/common/pixel_layout.hpp.
using l3::Layout;

// One encoded image in host memory, with an optional crop (the region must lie
// inside the image; only the tiles it overlaps are decoded).
struct HostImage {
  std::span<const std::uint8_t> bytes;
  std::optional<Rect> crop;
};

// Where one image went. status is the image's l3::errc: host-side rejections
// (header, tile table, limits, crop) are known when decode() returns; tile
// errors are known once the stream has run (BatchDecoder::status()).
struct ImageSlot {
  std::uint64_t offset = 0;  // byte offset of the slot in the output buffer
  std::uint64_t size = 0;    // width * height * channels; 0 for a rejected image
  std::uint32_t width = 0, height = 0, channels = 0;  // the crop's size, or the image's
  errc status = errc::ok;
};

struct BatchOptions {
  Layout layout = Layout::hwc;
  Limits limits{};
  // Verify each image's XXH3-64 checksum on the host before decoding, as
  // l3::decode does by default (status checksum_mismatch). Turn off when the
  // bytes were just verified by another checksum (a shard record's).
  bool verify_checksum = true;
  // Host threads that copy a HostImage batch's bytes into the pinned staging
  // buffer (spec/cuda.md §3): one thread copies ~10 GB/s, the upload and the
  // kernel go several times faster. 0: one per 4 MiB of input, at most 4.
  std::uint32_t staging_threads = 0;
};

}  // namespace l3::cuda
