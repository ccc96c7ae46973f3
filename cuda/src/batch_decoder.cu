// Device side of the batch decoder: the scans (Thrust, on the caller's
// stream, scratch from the decoder's arena), the gather kernel, the decode
// kernel (one warp per tile, the wavefront of l3/cuda/wavefront.hpp with the
// CudaWarp policy), the patch kernel (symbols, one warp per image) and the
// status finalize kernel. Built for sm_80 and sm_90:
// this translation unit is also the CI check that the shared tile core
// compiles as device code for both.
#include <cub/device/device_scan.cuh>
#include <thrust/execution_policy.h>
#include <thrust/scan.h>
#include <thrust/system/cuda/execution_policy.h>

#include <algorithm>
#include <cstddef>
#include <exception>
#include <new>

#include "kernels.hpp"
#include "l3/cuda/thrust_arena.hpp"
#include "l3/cuda/wavefront.hpp"
#include "occupancy_probe.hpp"

namespace l3::cuda::detail {
namespace {

using wavefront::AddCounts;
using wavefront::BatchView;
using wavefront::ImageCounts;

constexpr int kWarpsPerBlock = 4;
constexpr int kDecodeThreads = kWarpsPerBlock * wavefront::kWarpSize;
// The occupancy the decode kernel is built for (below): 6 blocks with the
// narrow ring (kernel variant narrow-ring-24, l3/cuda/wavefront.hpp).
constexpr int kDecodeBlocksPerSm = wavefront::kNarrowRing ? 6 : 5;

__global__ void gather_kernel(BatchView view, std::uint32_t* tile_size, std::uint32_t tiles) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < tiles) tile_size[i] = wavefront::gather_tile_size(view, i);
}

// 5 blocks (20 warps) per SM: up to 102 registers a thread. The warps'
// WarpScratch (11,392 bytes each, most of it the output ring; spec/cuda.md §2)
// lets 5 blocks of 4 warps share an sm_90 SM's 228 KiB (with the driver's
// 1 KiB a block), so a 6th block could not be resident anyway; with the
// 85-register cap of 6 blocks ptxas spilled (8 bytes of stack).
// tests/cuda_kernel_resources.sh fails on any spill, and when registers or
// shared memory leave fewer than 5 blocks resident. The narrow ring's 9,344
// bytes a warp fit 6 blocks: 80 registers, with the spills that variant's
// own bar allows (tests/cuda.cmake).
__global__ void __launch_bounds__(kDecodeThreads, kDecodeBlocksPerSm)
    decode_kernel(BatchView view, std::uint32_t jobs, std::uint64_t* keys) {
  __shared__ wavefront::WarpScratch scratch[kWarpsPerBlock];
  const int warp_in_block = int(threadIdx.x) / wavefront::kWarpSize;
  const std::uint32_t job = blockIdx.x * kWarpsPerBlock + std::uint32_t(warp_in_block);
  if (job >= jobs) return;  // whole warps only: jobs are per warp
  wavefront::CudaWarp warp{int(threadIdx.x) % wavefront::kWarpSize};
  auto atomic_min = [](std::uint64_t* p, std::uint64_t v) {
    atomicMin(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
  };
  wavefront::decode_job(warp, view, job, scratch[warp_in_block], keys, atomic_min);
}

// Occupancy probe builds (occupancy_probe.hpp): B blocks an SM; 0 otherwise.
#if defined(L3_WAVEFRONT_PROBE_BLOCKS)
constexpr int kProbeBlocks = L3_WAVEFRONT_PROBE_BLOCKS;
static_assert(kProbeBlocks >= 1 && kProbeBlocks < kDecodeBlocksPerSm, "a probe leaves fewer blocks than the default");
#else
constexpr int kProbeBlocks = 0;
#endif

struct DecodeLaunch {
  cudaError_t error;
  int dynamic_smem;  // bytes a block
};

// The decode kernel's dynamic shared memory: none, or in a probe build the
// padding that leaves kProbeBlocks blocks an SM on the device current at
// the first call (a probe is a benchmark's build: one device a process).
// Fails unless the occupancy API then says exactly kProbeBlocks, so that a
// probe never reports a figure for an occupancy it did not have.
DecodeLaunch decode_launch() {
  if constexpr (kProbeBlocks == 0) {
    return {cudaSuccess, 0};
  } else {
    static const DecodeLaunch once = [] {
      int device = 0, per_sm = 0, reserved = 0, blocks = 0;
      cudaFuncAttributes fa{};
      cudaError_t e = cudaGetDevice(&device);
      if (e == cudaSuccess) e = cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device);
      if (e == cudaSuccess) e = cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, device);
      if (e == cudaSuccess) e = cudaFuncGetAttributes(&fa, decode_kernel);
      if (e != cudaSuccess) return DecodeLaunch{e, 0};
      const int pad = probe_padding_bytes(per_sm, reserved, int(fa.sharedSizeBytes), kProbeBlocks);
      if (pad < 0) return DecodeLaunch{cudaErrorInvalidConfiguration, 0};
      e = cudaFuncSetAttribute(decode_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, pad);
      if (e == cudaSuccess)
        e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, decode_kernel, kDecodeThreads, std::size_t(pad));
      if (e == cudaSuccess && blocks != kProbeBlocks) e = cudaErrorInvalidConfiguration;
      return DecodeLaunch{e, pad};
    }();
    return once;
  }
}

__global__ void __launch_bounds__(kDecodeThreads) patch_kernel(BatchView view, std::uint32_t images,
                                                             std::uint64_t* keys) {
  const std::uint32_t m = blockIdx.x * kWarpsPerBlock + threadIdx.x / wavefront::kWarpSize;
  if (m >= images) return;  // whole warps only
  wavefront::CudaWarp warp{int(threadIdx.x) % wavefront::kWarpSize};
  auto atomic_min = [](std::uint64_t* p, std::uint64_t v) {
    atomicMin(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
  };
  wavefront::patch_image(warp, view, m, keys, atomic_min);
}

__global__ void finalize_kernel(const std::uint64_t* keys, std::int32_t* status, std::uint32_t images) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < images) status[i] = wavefront::status_of_key(keys[i]);
}

}  // namespace

cudaError_t scan_scratch_bytes(std::uint32_t images, std::uint32_t tiles, std::size_t& bytes) {
  std::size_t a = 0, b = 0;
  cudaError_t e = cub::DeviceScan::ExclusiveScan(nullptr, a, static_cast<const ImageCounts*>(nullptr),
                                                 static_cast<ImageCounts*>(nullptr), AddCounts{}, ImageCounts{0, 0, 0},
                                                 std::max<std::uint32_t>(images, 1));
  if (e != cudaSuccess) return e;
  e = cub::DeviceScan::ExclusiveScan(nullptr, b, static_cast<const std::uint32_t*>(nullptr),
                                     static_cast<std::uint64_t*>(nullptr), ::cuda::std::plus<>{}, std::uint64_t{0},
                                     std::max<std::uint32_t>(tiles, 1));
  if (e != cudaSuccess) return e;
  // Thrust dispatches to the same CUB scans; the margin covers its own
  // bookkeeping and alignment.
  bytes = 2 * std::max(a, b) + (std::size_t{64} << 10);
  return cudaSuccess;
}

cudaError_t scan_counts(const ImageCounts* d_counts, ImageCounts* d_first, std::uint32_t images, void* d_scratch,
                        std::size_t scratch_bytes, cudaStream_t stream) {
  if (images == 0) return cudaSuccess;
  ArenaAllocator alloc{static_cast<char*>(d_scratch), scratch_bytes};
  return thrust_call([&] {
    thrust::exclusive_scan(thrust::cuda::par_nosync(alloc).on(stream), d_counts, d_counts + images, d_first,
                           ImageCounts{0, 0, 0}, AddCounts{});
  });
}

cudaError_t gather_tiles(const BatchView& view, std::uint32_t* d_tile_size, std::uint64_t* d_tile_start,
                         std::uint32_t tiles, void* d_scratch, std::size_t scratch_bytes, cudaStream_t stream) {
  if (tiles == 0) return cudaSuccess;
  constexpr unsigned kThreads = 256;
  // Block counts in 64 bits: tiles + kThreads - 1 wraps for tiles near 2^32.
  const auto blocks = static_cast<unsigned>((std::uint64_t{tiles} + kThreads - 1) / kThreads);
  gather_kernel<<<blocks, kThreads, 0, stream>>>(view, d_tile_size, tiles);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  ArenaAllocator alloc{static_cast<char*>(d_scratch), scratch_bytes};
  return thrust_call([&] {
    thrust::exclusive_scan(thrust::cuda::par_nosync(alloc).on(stream), d_tile_size, d_tile_size + tiles, d_tile_start,
                           std::uint64_t{0});
  });
}

cudaError_t launch_decode(const BatchView& view, std::uint32_t jobs, std::uint64_t* d_keys, cudaStream_t stream) {
  if (jobs == 0) return cudaSuccess;
  const DecodeLaunch launch = decode_launch();
  if (launch.error != cudaSuccess) return launch.error;
  const auto blocks = static_cast<std::uint32_t>((std::uint64_t{jobs} + kWarpsPerBlock - 1) / kWarpsPerBlock);
  decode_kernel<<<blocks, kDecodeThreads, std::size_t(launch.dynamic_smem), stream>>>(view, jobs, d_keys);
  return cudaGetLastError();
}

cudaError_t decode_warps_per_sm(int& warps) {
  warps = 0;
  const DecodeLaunch launch = decode_launch();
  if (launch.error != cudaSuccess) return launch.error;
  int blocks = 0;
  const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, decode_kernel, kDecodeThreads,
                                                                      std::size_t(launch.dynamic_smem));
  warps = blocks * kWarpsPerBlock;
  return e;
}

cudaError_t launch_patch(const BatchView& view, std::uint32_t images, std::uint64_t* d_keys, cudaStream_t stream) {
  if (images == 0) return cudaSuccess;
  const auto blocks = static_cast<std::uint32_t>((std::uint64_t{images} + kWarpsPerBlock - 1) / kWarpsPerBlock);
  patch_kernel<<<blocks, kDecodeThreads, 0, stream>>>(view, images, d_keys);
  return cudaGetLastError();
}

cudaError_t launch_finalize(const std::uint64_t* d_keys, std::int32_t* d_status, std::uint32_t images,
                            cudaStream_t stream) {
  if (images == 0) return cudaSuccess;
  constexpr unsigned kThreads = 256;
  const auto blocks = static_cast<unsigned>((std::uint64_t{images} + kThreads - 1) / kThreads);
  finalize_kernel<<<blocks, kThreads, 0, stream>>>(d_keys, d_status, images);
  return cudaGetLastError();
}

}  // namespace l3::cuda::detail
