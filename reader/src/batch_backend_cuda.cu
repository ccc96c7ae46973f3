// Device side of the CUDA batch backend (spec/cuda.md §6): the scan of the
// weight tables' offsets (Thrust on the caller's stream, scratch from the
// backend's reusable buffer) and the two transform kernels, thin shells over
// the per-thread code of l3/reader/batch_transform_core.hpp.
//
// Built with --fmad=false (reader/CMakeLists.txt): no multiply-add
// contraction, so the floats are those of the CPU pipeline. Kernels never
// assert or trap: the host validated every descriptor before the launch.
#include <cub/device/device_scan.cuh>
#include <thrust/execution_policy.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/scan.h>
#include <thrust/system/cuda/execution_policy.h>

#include <algorithm>
#include <cstddef>
#include <exception>
#include <new>

#include "batch_backend_cuda.hpp"
#include "l3/cuda/thrust_arena.hpp"

namespace l3::detail::batchxf {
namespace {

using cuda::ArenaAllocator;
using cuda::thrust_call;

constexpr unsigned kWeightsThreads = 128;
constexpr unsigned kResampleX = 32, kResampleY = 8;
constexpr std::uint32_t kMaxGridYZ = 65535;  // examples beyond it loop inside the kernels

// An example's weight-table size (floats), the scan's input.
struct TableFloats {
  xf::OutputSpec spec;
  __host__ __device__ std::uint64_t operator()(const xf::ExampleDesc& d) const { return xf::table_floats(d, spec); }
};

using TableIterator = thrust::transform_iterator<TableFloats, const xf::ExampleDesc*>;

// The descriptor of example e with its table offset from the scan.
__device__ inline xf::ExampleDesc load_desc(const TransformLaunch& launch, std::uint32_t e) {
  xf::ExampleDesc d = launch.desc[e];
  d.weights_offset = launch.offsets[e];
  return d;
}

// Grid: x over the axis entries (output columns, then rows), y over examples.
__global__ void __launch_bounds__(kWeightsThreads) weights_kernel(TransformLaunch launch) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= static_cast<std::uint32_t>(xf::axis_entries(launch.spec))) return;
  for (std::uint32_t e = blockIdx.y; e < launch.examples; e += gridDim.y) {
    const xf::ExampleDesc d = load_desc(launch, e);
    xf::weights_thread(d, launch.spec, e, static_cast<std::int32_t>(i), launch.weights, launch.first, launch.taps);
  }
}

// Grid: x, y over the output pixels, z over examples. An example whose
// record failed on the device (a corrupt tile) is not written.
__global__ void __launch_bounds__(kResampleX * kResampleY) resample_kernel(TransformLaunch launch) {
  const std::uint32_t x = blockIdx.x * blockDim.x + threadIdx.x;
  const std::uint32_t y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= static_cast<std::uint32_t>(launch.spec.width) || y >= static_cast<std::uint32_t>(launch.spec.height)) return;
  for (std::uint32_t e = blockIdx.z; e < launch.examples; e += gridDim.z) {
    if (launch.status[launch.record[e]] != 0) continue;
    const xf::ExampleDesc d = load_desc(launch, e);
    xf::resample_thread(d, launch.spec, e, static_cast<std::int32_t>(y), static_cast<std::int32_t>(x), launch.decoded,
                        launch.weights, launch.first, launch.taps);
  }
}

}  // namespace

cudaError_t table_scan_scratch_bytes(std::uint32_t examples, std::size_t& bytes) {
  std::size_t need = 0;
  const TableIterator in(static_cast<const xf::ExampleDesc*>(nullptr), TableFloats{});
  const cudaError_t e = cub::DeviceScan::ExclusiveScan(nullptr, need, in, static_cast<std::uint64_t*>(nullptr),
                                                       ::cuda::std::plus<>{}, std::uint64_t{0},
                                                       std::max<std::uint32_t>(examples, 1));
  if (e != cudaSuccess) return e;
  // Thrust dispatches to the same CUB scan; the margin covers its own
  // bookkeeping and alignment (as the batch decoder does).
  bytes = 2 * need + (std::size_t{64} << 10);
  return cudaSuccess;
}

cudaError_t scan_table_offsets(const xf::ExampleDesc* d_desc, const xf::OutputSpec& spec, std::uint32_t examples,
                               std::uint64_t* d_offsets, void* d_scratch, std::size_t scratch_bytes,
                               cudaStream_t stream) {
  if (examples == 0) return cudaSuccess;
  ArenaAllocator alloc{static_cast<char*>(d_scratch), scratch_bytes};
  const TableIterator in(d_desc, TableFloats{spec});
  return thrust_call([&] {
    thrust::exclusive_scan(thrust::cuda::par_nosync(alloc).on(stream), in, in + examples, d_offsets, std::uint64_t{0});
  });
}

cudaError_t launch_weights(const TransformLaunch& launch, cudaStream_t stream) {
  if (launch.examples == 0) return cudaSuccess;
  const auto entries = static_cast<std::uint32_t>(xf::axis_entries(launch.spec));
  const dim3 grid((entries + kWeightsThreads - 1) / kWeightsThreads, std::min(launch.examples, kMaxGridYZ));
  weights_kernel<<<grid, kWeightsThreads, 0, stream>>>(launch);
  return cudaGetLastError();
}

cudaError_t launch_resample(const TransformLaunch& launch, cudaStream_t stream) {
  if (launch.examples == 0) return cudaSuccess;
  const auto w = static_cast<std::uint32_t>(launch.spec.width), h = static_cast<std::uint32_t>(launch.spec.height);
  const dim3 block(kResampleX, kResampleY);
  const dim3 grid((w + kResampleX - 1) / kResampleX, (h + kResampleY - 1) / kResampleY,
                  std::min(launch.examples, kMaxGridYZ));
  resample_kernel<<<grid, block, 0, stream>>>(launch);
  return cudaGetLastError();
}

}  // namespace l3::detail::batchxf
