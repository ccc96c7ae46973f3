// The device side of the CUDA batch backend (batch_backend_cuda.cu), as called
// by its host side (batch_backend_cuda.cpp). Every function enqueues on
// `stream` and returns the CUDA error of the enqueue (cudaSuccess when all
// went well). spec/cuda.md §6.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "l3/reader/batch_transform_core.hpp"

namespace l3::detail::batchxf {

// Everything the two transform kernels read and write (device pointers).
struct TransformLaunch {
  xf::OutputSpec spec;
  const xf::ExampleDesc* desc = nullptr;  // `examples` descriptors; their weights_offset is not read
  const std::uint64_t* offsets = nullptr; // per example: its weight table's offset (floats; the scan's output)
  const std::uint32_t* record = nullptr;  // per example: its record's index in the decode batch
  const std::int32_t* status = nullptr;   // per decode-batch image: its errc (BatchResult::d_status)
  const std::uint8_t* decoded = nullptr;  // the decode output (BatchResult::d_output)
  std::int32_t* weights = nullptr;        // sum of table_floats() int32 weights
  std::int32_t* first = nullptr;          // examples * axis_entries() each
  std::int32_t* taps = nullptr;
  std::uint32_t examples = 0;
};

// Bytes of Thrust scratch scan_table_offsets() needs for `examples` examples
// (an upper bound: CUB's figure with margin).
cudaError_t table_scan_scratch_bytes(std::uint32_t examples, std::size_t& bytes);

// d_offsets[e] = exclusive scan of xf::table_floats(d_desc[e], spec) (Thrust
// on `stream`, scratch carved from d_scratch).
cudaError_t scan_table_offsets(const xf::ExampleDesc* d_desc, const xf::OutputSpec& spec, std::uint32_t examples,
                               std::uint64_t* d_offsets, void* d_scratch, std::size_t scratch_bytes,
                               cudaStream_t stream);

// Pass 1: one thread per (example, output column or row): xf::weights_thread.
cudaError_t launch_weights(const TransformLaunch& launch, cudaStream_t stream);

// Pass 2: one thread per (example, output pixel): xf::resample_thread, for
// the examples whose record's device status is ok (the others are not written).
cudaError_t launch_resample(const TransformLaunch& launch, cudaStream_t stream);

}  // namespace l3::detail::batchxf
