// Pluggable pieces of the reader: the decode backend and the allocator of
// batch buffers.
//
// DecodeBackend: the reader's decode stage calls it for every example (from
// several worker threads at once). The CPU backend wraps l3::decode_region;
// tests wrap it to observe the decode stage. GPU decoding goes through a
// BatchBackend instead (whole windows, below).
//
// BatchAllocator: the reader allocates its ring of batch buffers once, at
// construction, through this hook (tests count allocations with it). The
// default uses aligned operator new.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "l3/codec/codec.hpp"
#include "l3/common/error.hpp"
#include "l3/reader/transforms.hpp"

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
// verify_checksum: DecodeOptions::verify_checksum, the stream's own XXH3; the
// reader turns it off when it has already checked each record's checksum,
// which covers the same bytes (ReaderOptions::verify).
std::shared_ptr<DecodeBackend> make_cpu_decode_backend(unsigned threads_per_image = 1, Limits limits = {},
                                                       bool verify_checksum = true);

// The alignment the reader asks its BatchAllocator for (a cache line, and an
// AVX-512 vector).
inline constexpr std::size_t kBatchAlignment = 64;

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

// ---- Whole-window backends: decode AND transform on a device ------------------
//
// A BatchBackend takes over the reader's decode, transform and assemble stages
// for a whole echo window (one or more batches) at once: one decode of every
// record's region, then one transform pass that writes every example into its
// batch slot. The batch buffers are the backend's (memory()): device memory
// for the CUDA backend, so batches never pass through the host.
// Implementations: the CPU run of the kernels' decomposition
// (make_emulated_gpu_batch_backend, l3_reader_emu; CI checks its batches
// against the CPU pipeline byte for byte) and the CUDA backend
// (make_cuda_batch_backend, l3/reader/reader_backend_cuda.hpp).

enum class BatchMemory { host, device };

// One record of a window: its encoded bytes and the region to decode (the
// union of its examples' crop boxes).
struct RecordJob {
  std::span<const std::uint8_t> encoded;
  Rect region;
};

// One example: plan.box (image coordinates, inside records[record].region),
// resized, flipped and assembled into `dst` (example_bytes(options) bytes, in
// the backend's memory).
struct ExampleJob {
  std::uint32_t record = 0;
  ExamplePlan plan;
  void* dst = nullptr;
};

class BatchBackend {
public:
  virtual ~BatchBackend() = default;
  virtual const char* name() const noexcept = 0;
  virtual BatchMemory memory() const noexcept = 0;
  // CUDA device ordinal of memory() == device; -1 for host memory.
  virtual int device() const noexcept { return -1; }
  // A batch buffer of `bytes` bytes in memory() (aligned to at least 256).
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void deallocate(void* p, std::size_t bytes) noexcept = 0;

  // Decodes every record's region, then writes every example whose record
  // decoded: exactly the bytes of crop_resize() followed by assemble() on the
  // CPU. status[i] (status.size() == records.size()) receives record i's
  // errc: ok, or the data error l3::decode_region would throw for it; the
  // examples of a failed record are not written. Returns once every write is
  // complete and visible to any stream. Throws l3::Error for what is not a
  // record's fault (device_error, invalid_argument). One caller at a time;
  // release() may be called concurrently with run().
  virtual void run(std::span<const RecordJob> records, std::span<const ExampleJob> examples,
                   const TransformOptions& options, std::span<errc> status) = 0;

  // The consumer of the batch in `buffer` has enqueued all its reads of it on
  // `stream` (a cudaStream_t; nullptr: the legacy default stream). run() does
  // not write into `buffer` again before that work has completed. A no-op for
  // host memory.
  virtual void release(void* buffer, void* stream) noexcept {
    (void)buffer;
    (void)stream;
  }
};

}  // namespace l3
