// Whole-window batch backends (l3/reader/reader_backend.hpp, BatchBackend) that go
// through the CUDA batch decoder's decomposition (spec/cuda.md) and the
// reader's transform kernels (l3/reader/batch_transform_core.hpp).
//
// make_emulated_gpu_batch_backend() (library l3_reader_emu, always built): the
//   kernels' decomposition run on the CPU; CI checks its batches against the
//   CPU pipeline byte for byte.
// make_cuda_batch_backend(device, stream) (library l3_reader_cuda, only when
//   CUDA is available; L3_HAVE_CUDA is then defined for its users):
//   decode and transforms on the GPU, batches in device memory.
#pragma once

#include <memory>
#include <string>

#include "l3/reader/reader_backend.hpp"

struct CUstream_st;

namespace l3 {

// The CUDA batch backend's decomposition on the CPU (l3_reader_emu, always
// built): records through l3::cuda::emu::decode_batch (the decode kernel's
// plan, scans and per-warp code), then the transform kernels' per-thread code
// (l3/reader/batch_transform_core.hpp: one weight-table thread per output column and
// row, one resample thread per output pixel) looped on the CPU, with the
// table offsets from an exclusive scan as on the device. Host memory; slow; a
// reference for the kernels, run by CI.
std::shared_ptr<BatchBackend> make_emulated_gpu_batch_backend(Limits limits = {});

#ifdef L3_HAVE_CUDA
// CUDA devices usable by this process; 0 when the driver finds none (or fails).
int cuda_device_count() noexcept;
// Decode and transform on the GPU (one BatchDecoder launch for the window's
// records, then the transform kernels of l3/reader/batch_transform_core.hpp);
// batches in device memory of `device`, written on `stream` (null: a
// non-blocking stream the backend owns). Byte-identical to the CPU pipeline
// (the transform kernels are built with --fmad=false).
std::shared_ptr<BatchBackend> make_cuda_batch_backend(int device = 0, CUstream_st* stream = nullptr,
                                                      Limits limits = {});
#endif

}  // namespace l3
