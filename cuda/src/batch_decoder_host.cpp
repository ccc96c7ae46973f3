// Host side of the batch decoder (l3/cuda/batch_decoder.hpp): plans the batch
// (plan.cpp), stages inputs and descriptors through reusable pinned memory,
// and enqueues copies, scans and kernels (batch_decoder.cu) on the caller's
// stream. Buffers grow geometrically with stream-ordered allocation, so the
// steady state allocates nothing and nothing synchronises the device.
#include "l3/cuda/batch_decoder.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernels.hpp"
#include "l3/common/parallel.hpp"
#include "plan.hpp"

namespace l3::cuda {
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw_error(errc::device_error, std::string(what) + ": " + cudaGetErrorString(e));
}

constexpr std::uint64_t kAlign = 256;
std::uint64_t align_up(std::uint64_t v) { return (v + kAlign - 1) & ~(kAlign - 1); }
std::uint64_t grown(std::uint64_t need, std::uint64_t cap) { return align_up(std::max(need, cap + cap / 2)); }

// A device buffer, grown with stream-ordered allocation (no device-wide sync).
struct DeviceBuffer {
  void* p = nullptr;
  std::uint64_t cap = 0;
  // Grows to at least `need` bytes; returns false (and changes nothing) when
  // growing is not allowed (under graph capture).
  void ensure(std::uint64_t need, cudaStream_t stream, bool may_grow) {
    if (need <= cap) return;
    if (!may_grow)
      throw_error(errc::invalid_argument, "batch decoder buffers too small under graph capture: call reserve() or decode once before capturing");
    const std::uint64_t size = grown(need, cap);
    if (p) check(cudaFreeAsync(p, stream), "cudaFreeAsync");
    p = nullptr;
    cap = 0;
    check(cudaMallocAsync(&p, size, stream), "cudaMallocAsync");
    cap = size;
  }
  void release() noexcept {
    if (p) cudaFree(p);
    p = nullptr;
    cap = 0;
  }
  template <class T> T* at(std::uint64_t offset) const { return reinterpret_cast<T*>(static_cast<char*>(p) + offset); }
};

// Pinned host memory; the caller makes sure no copy from it is in flight.
struct PinnedBuffer {
  void* p = nullptr;
  std::uint64_t cap = 0;
  void ensure(std::uint64_t need, bool may_grow) {
    if (need <= cap) return;
    if (!may_grow)
      throw_error(errc::invalid_argument, "batch decoder buffers too small under graph capture: call reserve() or decode once before capturing");
    const std::uint64_t size = grown(need, cap);
    if (p) check(cudaFreeHost(p), "cudaFreeHost");
    p = nullptr;
    cap = 0;
    check(cudaMallocHost(&p, size), "cudaMallocHost");
    cap = size;
  }
  void release() noexcept {
    if (p) cudaFreeHost(p);
    p = nullptr;
    cap = 0;
  }
  char* bytes() const { return static_cast<char*>(p); }
};

// Offsets of the parts of the work buffer for a batch.
struct WorkLayout {
  std::uint64_t first = 0, tile_size = 0, tile_start = 0, keys = 0, status = 0, scratch = 0, total = 0;
  std::size_t scratch_bytes = 0;
  WorkLayout(std::uint32_t images, std::uint32_t tiles, std::size_t scratch_need) {
    std::uint64_t at = 0;
    first = at;
    at = align_up(at + std::uint64_t(images) * sizeof(wavefront::ImageCounts));
    tile_size = at;
    at = align_up(at + std::uint64_t(tiles) * sizeof(std::uint32_t));
    tile_start = at;
    at = align_up(at + std::uint64_t(tiles) * sizeof(std::uint64_t));
    keys = at;
    at = align_up(at + std::uint64_t(images) * sizeof(std::uint64_t));
    status = at;
    at = align_up(at + std::uint64_t(images) * sizeof(std::int32_t));
    scratch = at;
    scratch_bytes = scratch_need;
    total = at + scratch_need;
  }
};

// Offsets of the descriptor block (pinned staging and its device copy).
struct MetaLayout {
  std::uint64_t desc = 0, counts = 0, keys = 0, total = 0;
  explicit MetaLayout(std::uint32_t images) {
    desc = 0;
    counts = align_up(std::uint64_t(images) * sizeof(wavefront::ImageDesc));
    keys = align_up(counts + std::uint64_t(images) * sizeof(wavefront::ImageCounts));
    total = align_up(keys + std::uint64_t(images) * sizeof(std::uint64_t));
  }
};

// Copies every image's bytes to dst + at[m] (the staging buffer), on up to
// `threads` host threads (0: one per 4 MiB of input, at most 4), each taking a
// contiguous run of images of about equal bytes.
void stage_inputs(std::span<const HostImage> images, const std::vector<std::uint64_t>& at, char* dst,
                  std::uint64_t input_bytes, std::uint32_t threads) {
  constexpr std::uint64_t kPerThread = 4ull << 20;
  if (threads == 0) threads = static_cast<std::uint32_t>(std::clamp<std::uint64_t>(input_bytes / kPerThread, 1, 4));
  threads = std::min<std::uint32_t>(threads, static_cast<std::uint32_t>(std::max<std::size_t>(images.size(), 1)));
  auto copy = [&](std::size_t begin, std::size_t end) {
    for (std::size_t m = begin; m < end; ++m)
      if (!images[m].bytes.empty()) std::memcpy(dst + at[m], images[m].bytes.data(), images[m].bytes.size());
  };
  if (threads <= 1) return copy(0, images.size());
  // Split points: the first image starting at or past each share of the bytes.
  std::vector<std::size_t> cut(threads + 1, images.size());
  cut[0] = 0;
  for (std::uint32_t k = 1; k < threads; ++k) {
    const std::uint64_t share = input_bytes / threads * k;
    cut[k] = static_cast<std::size_t>(std::lower_bound(at.begin(), at.end(), share) - at.begin());
  }
  parallel_for(threads, threads, [&](std::uint64_t k) { copy(cut[k], cut[k + 1]); });
}

}  // namespace

struct BatchDecoder::Impl {
  DeviceBuffer d_input, d_meta, d_work, d_output, d_dictionaries;
  PinnedBuffer h_stage, h_status;
  cudaEvent_t staged = nullptr;  // the last copies out of h_stage are done
  cudaEvent_t done = nullptr;    // the last decode (and its status copy) is done
  bool staged_pending = false, done_pending = false;
  Stream last_stream = nullptr;  // where `done` was recorded
  std::uint32_t last_images = 0;
  bool last_captured = false;

  Impl() {
    check(cudaEventCreateWithFlags(&staged, cudaEventDisableTiming), "cudaEventCreate");
    check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
  }
  ~Impl() {
    // Buffers may still be in use by enqueued work: wait for it (this
    // decoder's event only) before freeing. `done` is only ever recorded
    // outside capture, so it is the last uncaptured decode even when a
    // captured one came after it.
    if (done_pending) cudaEventSynchronize(done);
    d_input.release();
    d_meta.release();
    d_work.release();
    d_output.release();
    d_dictionaries.release();
    h_stage.release();
    h_status.release();
    cudaEventDestroy(staged);
    cudaEventDestroy(done);
  }

  static bool capturing(Stream stream) {
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    check(cudaStreamIsCapturing(stream, &st), "cudaStreamIsCapturing");
    return st != cudaStreamCaptureStatusNone;
  }

  // Orders this call after the previous one when the stream changes, and
  // makes the pinned staging buffer writable.
  void begin(Stream stream, bool captured) {
    if (done_pending && stream != last_stream && !captured) check(cudaStreamWaitEvent(stream, done, 0), "cudaStreamWaitEvent");
    if (staged_pending) {
      if (!captured) {
        check(cudaEventSynchronize(staged), "cudaEventSynchronize");
      } else {
        // The host is about to overwrite h_stage while the previous
        // (uncaptured) call's upload from it may still be in flight. `staged`
        // was recorded outside the capture, so waiting on it is legal, but in
        // global/thread-local capture mode an event wait would invalidate the
        // capture: wait in relaxed mode for this thread.
        cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
        check(cudaThreadExchangeStreamCaptureMode(&mode), "cudaThreadExchangeStreamCaptureMode");
        const cudaError_t e = cudaEventSynchronize(staged);
        check(cudaThreadExchangeStreamCaptureMode(&mode), "cudaThreadExchangeStreamCaptureMode");
        check(e, "cudaEventSynchronize");
      }
    }
    staged_pending = false;
  }

  // `entries`: the batch's images and their symbol dictionaries (plan.hpp);
  // `images`: the caller's.
  void grow(std::uint32_t entries, std::uint32_t images, std::uint64_t input_bytes, std::uint32_t tiles,
            std::uint64_t output_bytes, std::uint64_t dictionary_bytes, Stream stream, bool may_grow) {
    std::size_t scratch = 0;
    check(detail::scan_scratch_bytes(entries, tiles, scratch), "cub scan size");
    const MetaLayout meta(entries);
    const WorkLayout work(entries, tiles, scratch);
    if (may_grow && (h_status.cap < std::uint64_t(images) * 4) && done_pending)
      check(cudaEventSynchronize(done), "cudaEventSynchronize");  // h_status is the target of a pending copy
    h_stage.ensure(meta.total + input_bytes, may_grow);
    h_status.ensure(std::max<std::uint64_t>(1, std::uint64_t(images) * sizeof(std::int32_t)), may_grow);
    d_meta.ensure(meta.total, stream, may_grow);
    d_input.ensure(std::max<std::uint64_t>(1, input_bytes), stream, may_grow);
    d_work.ensure(work.total, stream, may_grow);
    if (output_bytes) d_output.ensure(output_bytes, stream, may_grow);
    if (dictionary_bytes) d_dictionaries.ensure(dictionary_bytes, stream, may_grow);
  }

  // Everything after the descriptors are known: upload, scans, kernels.
  BatchResult run(detail::Plan& plan, std::uint64_t input_bytes, Stream stream, DeviceOutput output, bool captured) {
    const std::uint32_t n = plan.entry_count(), images = plan.image_count();
    std::uint8_t* out = output.d_data;
    if (out) {
      if (output.capacity < plan.output_bytes)
        throw_error(errc::buffer_too_small, "output buffer holds " + std::to_string(output.capacity) + " bytes, the batch needs " +
                                                std::to_string(plan.output_bytes));
    } else {
      out = static_cast<std::uint8_t*>(d_output.p);
    }
    const MetaLayout meta(n);
    char* h = h_stage.bytes();
    if (n) {
      std::memcpy(h + meta.desc, plan.desc.data(), n * sizeof(wavefront::ImageDesc));
      std::memcpy(h + meta.counts, plan.counts.data(), n * sizeof(wavefront::ImageCounts));
      std::memcpy(h + meta.keys, plan.keys.data(), n * sizeof(std::uint64_t));
      check(cudaMemcpyAsync(d_meta.p, h, meta.total, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync");
    }
    if (input_bytes)
      check(cudaMemcpyAsync(d_input.p, h + meta.total, input_bytes, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync");
    if (!captured) {
      check(cudaEventRecord(staged, stream), "cudaEventRecord");
      staged_pending = true;
    }
    std::size_t scratch = 0;
    check(detail::scan_scratch_bytes(n, plan.total_tiles, scratch), "cub scan size");
    const WorkLayout work(n, plan.total_tiles, scratch);
    auto* d_first = d_work.at<wavefront::ImageCounts>(work.first);
    auto* d_keys = d_work.at<std::uint64_t>(work.keys);
    auto* d_status = d_work.at<std::int32_t>(work.status);
    void* d_scratch = d_work.at<char>(work.scratch);
    BatchResult result;
    result.d_output = out;
    result.output_bytes = plan.output_bytes;
    result.d_status = d_status;
    result.slots = std::move(plan.slots);
    if (n == 0) {
      // Nothing enqueued; status() of this call is empty (not the previous
      // call's statuses). `done` still covers the previous call's work.
      last_images = 0;
      last_captured = false;
      return result;
    }
    check(cudaMemcpyAsync(d_keys, d_meta.at<char>(meta.keys), n * sizeof(std::uint64_t), cudaMemcpyDeviceToDevice, stream),
          "cudaMemcpyAsync");
    check(detail::scan_counts(d_meta.at<wavefront::ImageCounts>(meta.counts), d_first, n, d_scratch, work.scratch_bytes,
                              stream),
          "exclusive_scan (image counts)");
    wavefront::BatchView view{};
    view.output = out;
    view.output_bytes = plan.output_bytes;
    view.scratch = static_cast<std::uint8_t*>(d_dictionaries.p);
    view.images = d_meta.at<wavefront::ImageDesc>(meta.desc);
    view.first = d_first;
    view.image_count = n;
    view.tile_size = d_work.at<std::uint32_t>(work.tile_size);
    view.tile_start = d_work.at<std::uint64_t>(work.tile_start);
    check(detail::gather_tiles(view, d_work.at<std::uint32_t>(work.tile_size), d_work.at<std::uint64_t>(work.tile_start),
                               plan.total_tiles, d_scratch, work.scratch_bytes, stream),
          "tile gather and exclusive_scan");
    check(detail::launch_decode(view, plan.total_jobs, d_keys, stream), "decode kernel");
    if (plan.has_symbols()) check(detail::launch_patch(view, images, d_keys, stream), "patch kernel");
    check(detail::launch_finalize(d_keys, d_status, images, stream), "finalize kernel");
    check(cudaMemcpyAsync(h_status.p, d_status, images * sizeof(std::int32_t), cudaMemcpyDeviceToHost, stream),
          "cudaMemcpyAsync");
    // Under capture an event recorded here could not be waited on outside
    // the graph: the caller orders its replays itself.
    // `done` keeps covering the last uncaptured call (the destructor and a
    // later call on another stream must still wait for it).
    if (!captured) {
      check(cudaEventRecord(done, stream), "cudaEventRecord");
      done_pending = true;
      last_stream = stream;  // the stream `done` was recorded on
    }
    last_images = images;
    last_captured = captured;
    return result;
  }
};

BatchDecoder::BatchDecoder() : impl_(std::make_unique<Impl>()) {}
BatchDecoder::~BatchDecoder() = default;
BatchDecoder::BatchDecoder(BatchDecoder&&) noexcept = default;
BatchDecoder& BatchDecoder::operator=(BatchDecoder&&) noexcept = default;

std::vector<ImageSlot> BatchDecoder::query(std::span<const HostImage> images, const BatchOptions& options) {
  const std::vector<detail::PlanImage> in = detail::plan_images(images);
  return detail::make_plan(in, options).slots;
}

BatchResult BatchDecoder::decode(std::span<const HostImage> images, const BatchOptions& options, Stream stream,
                                 DeviceOutput output) {
  Impl& im = *impl_;
  const bool captured = Impl::capturing(stream);
  im.begin(stream, captured);
  // Inputs are packed into the staging buffer after the descriptors, each at
  // an aligned offset; the device copy has the same layout.
  std::vector<std::uint64_t> at(images.size());
  std::uint64_t input_bytes = 0;
  for (std::size_t m = 0; m < images.size(); ++m) {
    at[m] = input_bytes;
    input_bytes = align_up(input_bytes + images[m].bytes.size());
  }
  const std::vector<detail::PlanImage> in = detail::plan_images(images);
  detail::Plan plan = detail::make_plan(in, options);
  im.grow(plan.entry_count(), plan.image_count(), input_bytes, plan.total_tiles, output.d_data ? 0 : plan.output_bytes,
          plan.scratch_bytes, stream, !captured);
  // The descriptors point at the device copy, known once d_input has its size.
  const auto* d_in = static_cast<const std::uint8_t*>(im.d_input.p);
  for (std::uint32_t m = 0; m < plan.image_count(); ++m)
    if (plan.slots[m].status == errc::ok) plan.set_input(m, d_in + at[m]);
  const MetaLayout meta(plan.entry_count());
  stage_inputs(images, at, im.h_stage.bytes() + meta.total, input_bytes, options.staging_threads);
  return im.run(plan, input_bytes, stream, output, captured);
}

BatchResult BatchDecoder::decode(std::span<const DeviceImage> images, const BatchOptions& options, Stream stream,
                                 DeviceOutput output) {
  Impl& im = *impl_;
  const bool captured = Impl::capturing(stream);
  im.begin(stream, captured);
  std::vector<detail::PlanImage> in(images.size());
  for (std::size_t m = 0; m < images.size(); ++m) {
    if (!images[m].d_bytes && !images[m].host_bytes.empty())
      throw_error(errc::invalid_argument, "device image " + std::to_string(m) + " has no device pointer");
    in[m] = {images[m].host_bytes, images[m].d_bytes, images[m].crop ? &*images[m].crop : nullptr};
  }
  detail::Plan plan = detail::make_plan(in, options);
  im.grow(plan.entry_count(), plan.image_count(), 0, plan.total_tiles, output.d_data ? 0 : plan.output_bytes,
          plan.scratch_bytes, stream, !captured);
  return im.run(plan, 0, stream, output, captured);
}

std::vector<errc> BatchDecoder::status() {
  Impl& im = *impl_;
  std::vector<errc> out;
  if (im.last_captured) throw_error(errc::invalid_argument, "status() after a captured decode: read d_status");
  if (!im.done_pending) return out;
  check(cudaEventSynchronize(im.done), "cudaEventSynchronize");
  const auto* s = static_cast<const std::int32_t*>(im.h_status.p);
  out.reserve(im.last_images);
  for (std::uint32_t m = 0; m < im.last_images; ++m) out.push_back(static_cast<errc>(s[m]));
  return out;
}

int BatchDecoder::resident_decode_warps() {
  int warps = 0;
  check(detail::decode_warps_per_sm(warps), "decode kernel occupancy");
  return warps;
}

void BatchDecoder::reserve(const Capacity& capacity, Stream stream) {
  Impl& im = *impl_;
  const bool captured = Impl::capturing(stream);
  if (captured) throw_error(errc::invalid_argument, "reserve() under graph capture");
  im.begin(stream, false);
  im.grow(capacity.images, capacity.images, capacity.input_bytes + std::uint64_t(capacity.images) * kAlign, capacity.tiles,
          capacity.output_bytes, capacity.dictionary_bytes, stream, true);
}

}  // namespace l3::cuda
