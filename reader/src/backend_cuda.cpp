// The CUDA decode backend and the pinned allocator (l3/reader_backend_cuda.hpp).
// Host code (no kernels here): the decode runs in l3::cuda::BatchDecoder's
// kernels; this file stages the jobs, copies the decoded crops back through
// pinned memory and hands them to the reader's CPU transforms.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "l3/cuda/batch_decoder.hpp"
#include "l3/reader_backend_cuda.hpp"
#include "cuda_scope.hpp"
#include "slot_copy.hpp"

namespace l3 {
namespace {

using detail::DeviceScope;
void check(cudaError_t e, const char* what) { detail::check_cuda(e, what); }

class CudaDecodeBackend final : public DecodeBackend {
public:
  CudaDecodeBackend(int device, cudaStream_t stream, Limits limits) : device_(device) {
    options_.limits = limits;
    const DeviceScope scope(device_);  // the constructing thread's device is left as it was
    check(scope.error(), "cudaSetDevice");
    if (stream) {
      stream_ = stream;
    } else {
      check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
      own_stream_ = true;
    }
    decoder_ = std::make_unique<cuda::BatchDecoder>();
  }
  ~CudaDecodeBackend() override {
    const DeviceScope scope(device_);  // the buffers and the stream are device_'s
    if (stream_) cudaStreamSynchronize(stream_);
    decoder_.reset();
    if (staging_) cudaFreeHost(staging_);
    if (own_stream_) cudaStreamDestroy(stream_);
  }
  CudaDecodeBackend(const CudaDecodeBackend&) = delete;
  CudaDecodeBackend& operator=(const CudaDecodeBackend&) = delete;

  const char* name() const noexcept override { return "cuda"; }

  void decode(std::span<const DecodeJob> jobs) override {
    if (jobs.empty()) return;
    std::lock_guard lock(m_);  // one BatchDecoder, one stream: calls take turns
    const DeviceScope scope(device_);  // the calling thread's current device, restored after
    check(scope.error(), "cudaSetDevice");
    images_.resize(jobs.size());
    for (std::size_t i = 0; i < jobs.size(); ++i) images_[i] = {jobs[i].encoded, jobs[i].region};
    const cuda::BatchResult r = decoder_->decode(std::span<const cuda::HostImage>(images_), options_, stream_);
    if (r.output_bytes > staging_cap_) {
      check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");  // no copy into the old buffer in flight
      const std::uint64_t cap = std::max<std::uint64_t>(r.output_bytes, staging_cap_ + staging_cap_ / 2);
      if (staging_) check(cudaFreeHost(staging_), "cudaFreeHost");
      staging_ = nullptr;
      staging_cap_ = 0;
      check(cudaMallocHost(reinterpret_cast<void**>(&staging_), cap), "cudaMallocHost");
      staging_cap_ = cap;
    }
    if (r.output_bytes)
      check(cudaMemcpyAsync(staging_, r.d_output, r.output_bytes, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync");
    // status() waits for the decoder's event (after the kernels); the copy is
    // after it on the same stream, so wait for the stream as well.
    const std::vector<errc> status = decoder_->status();
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      const cuda::ImageSlot& s = r.slots[i];
      // Host-side rejections are in the slot; tile errors in the device statuses.
      const errc e = s.status != errc::ok ? s.status : (i < status.size() ? status[i] : errc::ok);
      if (e != errc::ok) throw_error(e, "CUDA batch decode");
      detail::copy_slot(s, staging_ + s.offset, jobs[i].out);
    }
  }

private:
  int device_;
  cudaStream_t stream_ = nullptr;
  bool own_stream_ = false;
  cuda::BatchOptions options_;  // hwc, checksum verified (as the CPU backend)
  std::unique_ptr<cuda::BatchDecoder> decoder_;
  std::mutex m_;
  std::vector<cuda::HostImage> images_;
  std::uint8_t* staging_ = nullptr;  // pinned
  std::uint64_t staging_cap_ = 0;
};

class PinnedBatchAllocator final : public BatchAllocator {
public:
  const char* name() const noexcept override { return "cuda-pinned"; }
  void* allocate(std::size_t bytes, std::size_t alignment) override {
    // cudaHostAlloc returns page-aligned memory.
    if (alignment > 4096) throw_error(errc::invalid_argument, "pinned allocator: alignment above 4096");
    void* p = nullptr;
    check(cudaHostAlloc(&p, bytes == 0 ? 1 : bytes, cudaHostAllocPortable), "cudaHostAlloc");
    return p;
  }
  void deallocate(void* p, std::size_t, std::size_t) noexcept override {
    if (p) cudaFreeHost(p);
  }
};

}  // namespace

int cuda_device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error (no driver / no device)
    return 0;
  }
  return n;
}

std::shared_ptr<DecodeBackend> make_cuda_decode_backend(int device, CUstream_st* stream, Limits limits) {
  const int n = cuda_device_count();
  if (n == 0) throw_error(errc::device_error, "no CUDA device");
  if (device < 0 || device >= n)
    throw_error(errc::invalid_argument, "CUDA device " + std::to_string(device) + " out of range (" +
                                            std::to_string(n) + " devices)");
  return std::make_shared<CudaDecodeBackend>(device, stream, limits);
}

std::shared_ptr<BatchAllocator> make_cuda_pinned_allocator() { return std::make_shared<PinnedBatchAllocator>(); }

}  // namespace l3
