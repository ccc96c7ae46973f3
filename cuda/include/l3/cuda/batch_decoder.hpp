// Batch decode of l3 images on a CUDA device (spec/cuda.md §4).
//
// One call decodes a whole batch: the host validates every image (the CPU
// decoder's checks) and builds per-image descriptors; the device computes
// per-image and per-tile offsets with Thrust scans, and ONE kernel launch
// decodes every tile of every image (one warp per tile, as a wavefront).
//
// Host-only header: no CUDA headers needed. A `Stream` is a cudaStream_t.
// Contract:
//   - Everything is enqueued on the caller's stream; nothing synchronises the
//     device. decode() returns once the work is enqueued; the output and the
//     statuses are valid when the stream reaches that point.
//   - A BatchDecoder owns reusable device and pinned buffers, grown
//     geometrically: after a warm-up call (or reserve()) a batch no larger
//     allocates nothing. Use one decoder per stream at a time (a call on a
//     different stream first waits, on the device, for the previous call).
//   - A bad image (header, tile table, limits, crop, or corrupt tile data)
//     gets a non-ok status; the other images decode normally.
//   - CUDA errors are thrown as l3::Error(errc::device_error); caller errors
//     (null pointers, a too-small output buffer) as invalid_argument /
//     buffer_too_small.
//   - CUDA graph capture: decode() may be captured once the buffers are large
//     enough (reserve() or a warm-up call, made outside the capture). The graph
//     replays the copies from this decoder's pinned staging buffer and the
//     kernels; status() is not available under capture (read d_status). The
//     one host wait under capture: a captured decode first waits (in relaxed
//     capture mode) for the previous uncaptured decode's upload out of the
//     staging buffer, which it is about to overwrite.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "l3/cuda/batch_types.hpp"

struct CUstream_st;

namespace l3::cuda {

using Stream = CUstream_st*;  // cudaStream_t

// An image already in device memory. host_bytes is a host copy of the same
// stream (at least identical in its header and tile table, and of the same
// size): the host validates it; nothing is copied. The kernel re-checks every
// tile's byte range against the validated size, so device bytes that differ
// from the host copy can give wrong pixels or a status, never an access
// outside [d_bytes, d_bytes + size).
struct DeviceImage {
  const std::uint8_t* d_bytes = nullptr;
  std::span<const std::uint8_t> host_bytes;
  std::optional<Rect> crop;
};

// A caller-provided output buffer (device memory). When d_data is null the
// decoder's own buffer is used (valid until the next call).
struct DeviceOutput {
  std::uint8_t* d_data = nullptr;
  std::uint64_t capacity = 0;
};

struct BatchResult {
  std::uint8_t* d_output = nullptr;        // the slots, back to back (no padding)
  std::uint64_t output_bytes = 0;
  const std::int32_t* d_status = nullptr;  // per image, an l3::errc value (device memory)
  std::vector<ImageSlot> slots;            // host view: offsets, shapes, host-side rejections
};

// Sizes for reserve(): a batch within them allocates nothing. An image with
// symbols (spec/codec.md §3.4) counts its dictionary as one more image, with
// its tiles, and the dictionary's pixels in dictionary_bytes.
struct Capacity {
  std::uint32_t images = 0;
  std::uint64_t input_bytes = 0;       // sum of the encoded sizes (host inputs)
  std::uint32_t tiles = 0;             // sum of the images' tile counts
  std::uint64_t output_bytes = 0;      // for the decoder-owned output
  std::uint64_t dictionary_bytes = 0;  // symbol dictionaries (width * height * channels)
};

class BatchDecoder {
public:
  BatchDecoder();  // uses the current device; allocates nothing yet
  ~BatchDecoder();
  BatchDecoder(const BatchDecoder&) = delete;
  BatchDecoder& operator=(const BatchDecoder&) = delete;
  BatchDecoder(BatchDecoder&&) noexcept;
  BatchDecoder& operator=(BatchDecoder&&) noexcept;

  // Two-phase use: the output layout (slot offsets, shapes, total via
  // slots.back()) without device work. The sum of the slots' sizes is the
  // output size decode() needs.
  static std::vector<ImageSlot> query(std::span<const HostImage> images, const BatchOptions& options = {});

  // Host inputs (pageable or pinned): staged through this decoder's pinned
  // buffer and copied to the device asynchronously on `stream`.
  BatchResult decode(std::span<const HostImage> images, const BatchOptions& options, Stream stream,
                     DeviceOutput output = {});
  // Device-resident inputs: no host-to-device copy of the streams.
  BatchResult decode(std::span<const DeviceImage> images, const BatchOptions& options, Stream stream,
                     DeviceOutput output = {});

  // Waits for the last decode's statuses (an event of this decoder, not the
  // device) and returns them; one per image.
  std::vector<errc> status();

  void reserve(const Capacity& capacity, Stream stream);

  // Warps of the decode kernel that one SM of the current device holds at
  // once (its occupancy, from its registers and shared memory; spec/cuda.md
  // §2). Benchmarks report it beside their timings: kernel variants and
  // occupancy probes change it.
  static int resident_decode_warps();

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace l3::cuda
