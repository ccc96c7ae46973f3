// Pluggable pieces of the reader: the decode backend and the allocator of
// batch buffers.
//
// DecodeBackend: the reader's decode stage calls it for every example (from
// several worker threads at once). The CPU backend wraps l3::decode_region.
// A CUDA backend (cuda/, not wired yet) would implement the same interface;
// jobs come as a span so that a backend can take a whole batch in one call.
//
// BatchAllocator: the reader allocates its ring of batch buffers once, at
// construction, through this hook; a GPU feeder passes an allocator of pinned
// (page-locked) host memory (cudaHostAlloc / cudaFreeHost) so that copies to
// the device run asynchronously. The default uses aligned operator new.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "l3/codec.hpp"

namespace l3 {

struct DecodeJob {
  std::span<const std::uint8_t> encoded;  // one .l3i stream
  Rect region;                            // inside the image; the whole image is fine
  MutableImageView out;                   // region.width x region.height x the image's channels
};

class DecodeBackend {
public:
  virtual ~DecodeBackend() = default;
  virtual const char* name() const noexcept = 0;
  // Decodes every job; throws l3::Error (the first failure) like l3::decode_region.
  // Must be safe to call concurrently from several threads.
  virtual void decode(std::span<const DecodeJob> jobs) = 0;
};

// l3::decode_region on the calling thread; `threads_per_image` tiles in
// parallel inside one image (1 when the reader already runs one worker per core).
std::shared_ptr<DecodeBackend> make_cpu_decode_backend(unsigned threads_per_image = 1, Limits limits = {});

class BatchAllocator {
public:
  virtual ~BatchAllocator() = default;
  virtual const char* name() const noexcept = 0;
  // Returns `bytes` bytes aligned to `alignment` (a power of two); throws on failure.
  virtual void* allocate(std::size_t bytes, std::size_t alignment) = 0;
  virtual void deallocate(void* p, std::size_t bytes, std::size_t alignment) noexcept = 0;
};

// Aligned operator new / delete.
std::shared_ptr<BatchAllocator> make_cpu_batch_allocator();

}  // namespace l3
