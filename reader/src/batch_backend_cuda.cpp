// The CUDA batch backend (l3/reader/reader_backend_cuda.hpp, spec/cuda.md §6): a
// window's records decoded by one l3::cuda::BatchDecoder launch, then every
// example resized, flipped, normalised and stored into its batch slot in
// device memory by the transform kernels (batch_backend_cuda.cu). Host side:
// validation, descriptors, reusable buffers, release events.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include "batch_backend_cuda.hpp"
#include "batch_plan.hpp"
#include "cuda_scope.hpp"
#include "l3/cuda/batch_decoder.hpp"
#include "l3/reader/reader_backend_cuda.hpp"

namespace l3 {
namespace {

using detail::DeviceScope;
void check(cudaError_t e, const char* what) { detail::check_cuda(e, what); }

constexpr std::uint64_t kAlign = 256;
std::uint64_t align_up(std::uint64_t v) { return (v + kAlign - 1) & ~(kAlign - 1); }
std::uint64_t grown(std::uint64_t need, std::uint64_t cap) { return align_up(std::max(need, cap + cap / 2)); }

// Offsets of the parts of the per-window work buffer (device) and of its
// staged head (pinned host): descriptors and record indices are uploaded in
// one copy; the rest lives on the device only.
struct WorkLayout {
  std::uint64_t desc = 0, record = 0, staged = 0;                         // uploaded
  std::uint64_t offsets = 0, first = 0, taps = 0, weights = 0, scratch = 0, total = 0;  // device only
  WorkLayout(std::uint32_t examples, std::uint64_t entries, std::uint64_t weight_floats, std::size_t scratch_bytes) {
    std::uint64_t at = 0;
    desc = at;
    at = align_up(at + std::uint64_t{examples} * sizeof(xf::ExampleDesc));
    record = at;
    at = align_up(at + std::uint64_t{examples} * sizeof(std::uint32_t));
    staged = at;
    offsets = at;
    at = align_up(at + std::uint64_t{examples} * sizeof(std::uint64_t));
    first = at;
    at = align_up(at + entries * sizeof(std::int32_t));
    taps = at;
    at = align_up(at + entries * sizeof(std::int32_t));
    weights = at;
    at = align_up(at + weight_floats * sizeof(std::int32_t));
    scratch = at;
    total = at + scratch_bytes;
  }
};

class CudaBatchBackend final : public BatchBackend {
public:
  CudaBatchBackend(int device, cudaStream_t stream, Limits limits) : device_(device), limits_(limits) {
    options_.layout = cuda::Layout::hwc;
    options_.limits = limits;
    options_.verify_checksum = true;
    const DeviceScope scope(device_);
    check(scope.error(), "cudaSetDevice");
    try {
      if (stream) {
        stream_ = stream;
      } else {
        check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
        own_stream_ = true;
      }
      check(cudaEventCreateWithFlags(&staged_, cudaEventDisableTiming), "cudaEventCreate");
      check(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "cudaEventCreate");
      decoder_ = std::make_unique<cuda::BatchDecoder>();  // on the current device: device_
    } catch (...) {
      destroy();
      throw;
    }
  }
  ~CudaBatchBackend() override {
    const DeviceScope scope(device_);
    destroy();
  }
  CudaBatchBackend(const CudaBatchBackend&) = delete;
  CudaBatchBackend& operator=(const CudaBatchBackend&) = delete;

  const char* name() const noexcept override { return "cuda"; }
  BatchMemory memory() const noexcept override { return BatchMemory::device; }
  int device() const noexcept override { return device_; }

  void* allocate(std::size_t bytes) override {
    const DeviceScope scope(device_);
    check(scope.error(), "cudaSetDevice");
    void* p = nullptr;
    check(cudaMalloc(&p, bytes == 0 ? 1 : bytes), "cudaMalloc");  // 256-byte aligned
    return p;
  }
  void deallocate(void* p, std::size_t) noexcept override {
    if (!p) return;
    const DeviceScope scope(device_);
    // Consumers' reads of the buffer (release(): Reader::release before a
    // close) are done before it goes back to the driver.
    {
      std::lock_guard lock(events_m_);
      for (cudaEvent_t ev : pending_events_) cudaEventSynchronize(ev);
    }
    cudaGetLastError();
    cudaFree(p);
  }

  void run(std::span<const RecordJob> records, std::span<const ExampleJob> examples, const TransformOptions& options,
           std::span<errc> status) override {
    if (status.size() != records.size()) throw_error(errc::invalid_argument, "batch backend: one status per record");
    if (records.size() > std::numeric_limits<std::uint32_t>::max() ||
        examples.size() > std::numeric_limits<std::uint32_t>::max())
      throw_error(errc::limit_exceeded, "batch backend: more than 2^32 - 1 records or examples in one window");
    const xf::OutputSpec spec = detail::output_spec(options);  // validates the options
    const DeviceScope scope(device_);
    check(scope.error(), "cudaSetDevice");

    // The staging buffer may still be read by an upload that a failed call
    // left behind.
    if (staged_pending_) check(cudaEventSynchronize(staged_), "cudaEventSynchronize");
    staged_pending_ = false;

    // ---- one decode of every record's region (decoder-owned output). The
    // slots carry the host-side rejections (header, tile table, limits,
    // region, checksum); d_status adds the corrupt tiles.
    const auto n_records = static_cast<std::uint32_t>(records.size());
    images_.resize(n_records);
    for (std::uint32_t i = 0; i < n_records; ++i) images_[i] = {records[i].encoded, records[i].region};
    cuda::BatchResult decoded;
    if (n_records) decoded = decoder_->decode(std::span<const cuda::HostImage>(images_), options_, stream_);
    host_status_.resize(n_records);
    for (std::uint32_t i = 0; i < n_records; ++i) host_status_[i] = status[i] = decoded.slots[i].status;

    // ---- descriptors of the examples of records still ok (the checks of
    // batch_plan.hpp, shared with the emulation: a colour record under one
    // output channel gets unsupported here).
    detail::build_descriptors(records, examples, decoded.slots, spec, status, descs_, desc_record_);
    const auto n = static_cast<std::uint32_t>(descs_.size());

    if (n > 0) {
      std::uint64_t weight_floats = 0;  // sizes the table buffer; the offsets come from the device's scan
      for (const xf::ExampleDesc& d : descs_) weight_floats += xf::table_floats(d, spec);
      std::size_t scratch = 0;
      check(detail::batchxf::table_scan_scratch_bytes(n, scratch), "cub scan size");
      const std::uint64_t entries = std::uint64_t{n} * static_cast<std::uint64_t>(xf::axis_entries(spec));
      const WorkLayout lay(n, entries, weight_floats, scratch);
      grow(lay);

      // Upload the descriptors and their record indices in one copy.
      char* h = static_cast<char*>(h_stage_);
      std::memcpy(h + lay.desc, descs_.data(), std::size_t{n} * sizeof(xf::ExampleDesc));
      std::memcpy(h + lay.record, desc_record_.data(), std::size_t{n} * sizeof(std::uint32_t));
      char* d = static_cast<char*>(d_work_);
      check(cudaMemcpyAsync(d, h, lay.staged, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync");
      check(cudaEventRecord(staged_, stream_), "cudaEventRecord");
      staged_pending_ = true;

      detail::batchxf::TransformLaunch launch;
      launch.spec = spec;
      launch.desc = reinterpret_cast<const xf::ExampleDesc*>(d + lay.desc);
      launch.record = reinterpret_cast<const std::uint32_t*>(d + lay.record);
      launch.offsets = reinterpret_cast<const std::uint64_t*>(d + lay.offsets);
      launch.status = decoded.d_status;
      launch.decoded = decoded.d_output;
      launch.weights = reinterpret_cast<std::int32_t*>(d + lay.weights);
      launch.first = reinterpret_cast<std::int32_t*>(d + lay.first);
      launch.taps = reinterpret_cast<std::int32_t*>(d + lay.taps);
      launch.examples = n;

      check(detail::batchxf::scan_table_offsets(launch.desc, spec, n, reinterpret_cast<std::uint64_t*>(d + lay.offsets),
                                                d + lay.scratch, lay.total - lay.scratch, stream_),
            "exclusive_scan (weight table offsets)");
      check(detail::batchxf::launch_weights(launch, stream_), "weights kernel");
      // No example is written before the consumers of the batch buffers
      // have finished reading them (release()).
      wait_for_releases();
      check(detail::batchxf::launch_resample(launch, stream_), "resample kernel");
    }

    // ---- wait for every write, then the statuses
    check(cudaEventRecord(done_, stream_), "cudaEventRecord");
    std::vector<errc> device_status;
    if (n_records) device_status = decoder_->status();
    check(cudaEventSynchronize(done_), "cudaEventSynchronize");
    staged_pending_ = false;
    if (device_status.size() != n_records) throw_error(errc::device_error, "batch decoder: missing statuses");
    // The CPU pipeline's order: the decode's error (host rejection, then a
    // corrupt tile) before the transform's (unsupported channels).
    for (std::uint32_t i = 0; i < n_records; ++i)
      if (host_status_[i] == errc::ok && device_status[i] != errc::ok) status[i] = device_status[i];
  }

  void release(void* buffer, void* stream) noexcept override {
    (void)buffer;  // run() waits for every release before writing any buffer
    const DeviceScope scope(device_);
    const cudaStream_t s = stream ? static_cast<cudaStream_t>(stream) : cudaStreamLegacy;
    cudaEvent_t ev = nullptr;
    if (scope.error() == cudaSuccess) {
      {
        std::lock_guard lock(events_m_);
        if (!free_events_.empty()) {
          ev = free_events_.back();
          free_events_.pop_back();
        }
      }
      if (!ev && cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess) ev = nullptr;
      if (ev && cudaEventRecord(ev, s) == cudaSuccess) {
        try {
          std::lock_guard lock(events_m_);
          pending_events_.push_back(ev);
          return;
        } catch (...) {  // no memory for the list: fall through to a host wait
        }
      }
    }
    // No event for run() to wait on (a stream of another device, a CUDA
    // error): wait here until the consumer's reads are done.
    cudaGetLastError();
    cudaStreamSynchronize(s);
    cudaGetLastError();
    if (ev) {
      try {
        std::lock_guard lock(events_m_);
        free_events_.push_back(ev);
      } catch (...) {
        cudaEventDestroy(ev);
      }
    }
  }

private:
  // Grows the work buffer (stream-ordered) and the pinned staging buffer; the
  // staging buffer is idle here (staged_ was waited for).
  void grow(const WorkLayout& lay) {
    if (lay.total > d_work_cap_) {
      const std::uint64_t size = grown(lay.total, d_work_cap_);
      if (d_work_) check(cudaFreeAsync(d_work_, stream_), "cudaFreeAsync");
      d_work_ = nullptr;
      d_work_cap_ = 0;
      check(cudaMallocAsync(&d_work_, size, stream_), "cudaMallocAsync");
      d_work_cap_ = size;
    }
    if (lay.staged > h_stage_cap_) {
      const std::uint64_t size = grown(lay.staged, h_stage_cap_);
      if (h_stage_) check(cudaFreeHost(h_stage_), "cudaFreeHost");
      h_stage_ = nullptr;
      h_stage_cap_ = 0;
      check(cudaMallocHost(&h_stage_, size), "cudaMallocHost");
      h_stage_cap_ = size;
    }
  }

  // Makes the stream wait (on the device) for every release() so far. An
  // event goes back to the pool once the wait is enqueued: a later record
  // does not change what an enqueued wait waits for.
  void wait_for_releases() {
    std::lock_guard lock(events_m_);
    for (cudaEvent_t ev : pending_events_) check(cudaStreamWaitEvent(stream_, ev, 0), "cudaStreamWaitEvent");
    free_events_.insert(free_events_.end(), pending_events_.begin(), pending_events_.end());
    pending_events_.clear();
  }

  void destroy() noexcept {
    if (stream_) cudaStreamSynchronize(stream_);
    decoder_.reset();
    if (d_work_) cudaFree(d_work_);
    d_work_ = nullptr;
    if (h_stage_) cudaFreeHost(h_stage_);
    h_stage_ = nullptr;
    for (cudaEvent_t ev : free_events_) cudaEventDestroy(ev);
    for (cudaEvent_t ev : pending_events_) cudaEventDestroy(ev);
    free_events_.clear();
    pending_events_.clear();
    if (staged_) cudaEventDestroy(staged_);
    if (done_) cudaEventDestroy(done_);
    staged_ = done_ = nullptr;
    if (own_stream_ && stream_) cudaStreamDestroy(stream_);
    stream_ = nullptr;
  }

  int device_;
  Limits limits_;
  cudaStream_t stream_ = nullptr;
  bool own_stream_ = false;
  cuda::BatchOptions options_;
  std::unique_ptr<cuda::BatchDecoder> decoder_;
  cudaEvent_t staged_ = nullptr;  // the last upload from h_stage_ is done
  cudaEvent_t done_ = nullptr;    // the last window's transforms are done
  bool staged_pending_ = false;

  void* d_work_ = nullptr;  // descriptors, record indices, offsets, first/taps, weights, scan scratch
  std::uint64_t d_work_cap_ = 0;
  void* h_stage_ = nullptr;  // pinned: the uploaded head of d_work_
  std::uint64_t h_stage_cap_ = 0;

  // Per-window host scratch, reused.
  std::vector<cuda::HostImage> images_;
  std::vector<errc> host_status_;
  std::vector<xf::ExampleDesc> descs_;
  std::vector<std::uint32_t> desc_record_;

  std::mutex events_m_;  // release() runs concurrently with run()
  std::vector<cudaEvent_t> pending_events_, free_events_;
};

}  // namespace

int cuda_device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the error state (no driver / no device)
    return 0;
  }
  return n;
}

std::shared_ptr<BatchBackend> make_cuda_batch_backend(int device, CUstream_st* stream, Limits limits) {
  const int n = cuda_device_count();
  if (n == 0) throw_error(errc::device_error, "no CUDA device");
  if (device < 0 || device >= n)
    throw_error(errc::invalid_argument,
                "CUDA device " + std::to_string(device) + " out of range (" + std::to_string(n) + " devices)");
  return std::make_shared<CudaBatchBackend>(device, stream, limits);
}

}  // namespace l3
