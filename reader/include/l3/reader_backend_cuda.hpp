// Decode backends of the reader that go through the CUDA batch decoder's
// decomposition (spec/cuda.md), and a pinned-memory batch allocator.
//
// make_emulated_wavefront_backend() (library l3_reader_emu, always built):
//   each decode() call is one batch of l3::cuda::emu::decode_batch: the same
//   host plan, scans, gather step and per-warp wavefront tile code as the
//   kernels, run on the CPU. Its output is bit-identical to the CPU backend's
//   and a bad record throws the same l3::Error code. A reference that lets CI
//   run the GPU decomposition inside the reader; it is slow.
//
// make_cuda_decode_backend(device, stream) (library l3_reader_cuda, only when
//   CUDA is available; L3_READER_HAVE_CUDA is then defined for its users):
//   each decode() call is one l3::cuda::BatchDecoder::decode of all its jobs
//   (crops decoded on the device, one launch), then the decoded crops are
//   copied back into a pinned staging buffer and on into the jobs' host
//   outputs; the reader's CPU transforms (crop/resize/flip/normalise) run on
//   them as for the CPU backend. So the batches are byte-identical to the CPU
//   backend's, and they live in host memory (use make_cuda_pinned_allocator()
//   so that the copy of a batch to the device can be asynchronous).
//   First version: GPU work is serialised by a mutex (one BatchDecoder on one
//   stream); the reader's workers overlap their transforms with it. `stream`
//   null: the backend creates (and owns) a non-blocking stream on `device`.
//   Errors: a bad record throws l3::Error with the record's errc (as the CPU
//   backend); CUDA failures throw l3::Error(errc::device_error).
#pragma once

#include <memory>
#include <string>

#include "l3/reader_backend.hpp"

struct CUstream_st;

namespace l3 {

std::shared_ptr<DecodeBackend> make_emulated_wavefront_backend(Limits limits = {});

// The CUDA batch backend's decomposition on the CPU (l3_reader_emu, always
// built): records through l3::cuda::emu::decode_batch (the decode kernel's
// plan, scans and per-warp code), then the transform kernels' per-thread code
// (l3/batch_transform_core.hpp: one weight-table thread per output column and
// row, one resample thread per output pixel) looped on the CPU, with the
// table offsets from an exclusive scan as on the device. Host memory; slow; a
// reference for the kernels, run by CI.
std::shared_ptr<BatchBackend> make_emulated_gpu_batch_backend(Limits limits = {});

#ifdef L3_READER_HAVE_CUDA
// CUDA devices usable by this process; 0 when the driver finds none (or fails).
int cuda_device_count() noexcept;
std::shared_ptr<DecodeBackend> make_cuda_decode_backend(int device = 0, CUstream_st* stream = nullptr,
                                                        Limits limits = {});
// Decode and transform on the GPU (one BatchDecoder launch for the window's
// records, then the transform kernels of l3/batch_transform_core.hpp);
// batches in device memory of `device`, written on `stream` (null: a
// non-blocking stream the backend owns). Byte-identical to the CPU pipeline
// (the transform kernels are built with --fmad=false).
std::shared_ptr<BatchBackend> make_cuda_batch_backend(int device = 0, CUstream_st* stream = nullptr,
                                                      Limits limits = {});
// cudaHostAlloc / cudaFreeHost (portable pinned memory).
std::shared_ptr<BatchAllocator> make_cuda_pinned_allocator();
#endif

}  // namespace l3
