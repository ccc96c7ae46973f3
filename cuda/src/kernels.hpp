// The device side of the batch decoder (batch_decoder.cu), as called by the
// host side (batch_decoder_host.cpp). Every function enqueues on `stream` and
// returns the CUDA error of the enqueue (cudaSuccess when all went well).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "l3/cuda/wavefront.hpp"

namespace l3::cuda::detail {

// Bytes of Thrust scratch the two scans of a batch of `images` images and
// `tiles` tiles need (an upper bound; queried from CUB, with margin).
cudaError_t scan_scratch_bytes(std::uint32_t images, std::uint32_t tiles, std::size_t& bytes);

// d_first = exclusive scan of d_counts (per-image output bytes, tiles, jobs).
cudaError_t scan_counts(const wavefront::ImageCounts* d_counts, wavefront::ImageCounts* d_first, std::uint32_t images,
                        void* d_scratch, std::size_t scratch_bytes, cudaStream_t stream);

// Gathers every image's tile sizes (view.tile_size, `tiles` entries) from the
// tile tables, then view.tile_start = their exclusive scan.
cudaError_t gather_tiles(const wavefront::BatchView& view, std::uint32_t* d_tile_size, std::uint64_t* d_tile_start,
                         std::uint32_t tiles, void* d_scratch, std::size_t scratch_bytes, cudaStream_t stream);

// The decode kernel: one warp per job, all jobs of the batch in one launch.
cudaError_t launch_decode(const wavefront::BatchView& view, std::uint32_t jobs, std::uint64_t* d_keys,
                          cudaStream_t stream);

// The decode kernel's warps resident per SM of the current device (the
// occupancy API; in an occupancy probe build, with its padding,
// occupancy_probe.hpp).
cudaError_t decode_warps_per_sm(int& warps);

// The patch kernel (spec/cuda.md §4): one warp per image of images
// [0, images), applying its symbols after the decode kernel.
cudaError_t launch_patch(const wavefront::BatchView& view, std::uint32_t images, std::uint64_t* d_keys,
                         cudaStream_t stream);

// status[m] = the l3::errc of keys[m].
cudaError_t launch_finalize(const std::uint64_t* d_keys, std::int32_t* d_status, std::uint32_t images,
                            cudaStream_t stream);

}  // namespace l3::cuda::detail
