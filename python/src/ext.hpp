// Shared by the translation units of l3._l3 (the nanobind extension behind the
// `l3` Python package):
//   module.cpp           the module: errors, version, CUDA flags, registration
//   buffers.cpp          host buffers and the batch buffer pool owned by Python
//   codec_bindings.cpp   encode / decode / info, image files
//   dataset_bindings.cpp datasets, shard writing, manifests, conversion
//   options_bindings.cpp ReaderOptions, TransformOptions and their enums, bound as in C++
//   reader_bindings.cpp  the streaming reader (l3.Loader's engine)
//   batch_bindings.cpp   batches: DLPack arrays, device arrays, consumer streams
//
// Conventions:
//   - every long call (encode, decode, file I/O, Reader::next) runs with the
//     GIL released; arguments it reads stay referenced by the caller's frame;
//   - arrays are returned with an owner (a capsule) that frees their memory,
//     so numpy, torch (DLPack) and the caller share one buffer, no copies;
//   - l3::Error becomes a Python exception chosen by its errc (module.cpp).
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "l3/codec/codec.hpp"
#include "l3/reader/reader_backend.hpp"

namespace l3py {

namespace nb = nanobind;

// Runs f with the GIL released.
template <class F>
auto without_gil(F&& f) {
  nb::gil_scoped_release release;
  return f();
}

// ---- buffers owned by Python objects (buffers.cpp) ------------------------------

// A heap buffer (64-byte aligned) handed to Python through a capsule.
struct HostBuffer {
  void* data = nullptr;
  std::size_t bytes = 0;
};

HostBuffer* new_host_buffer(std::size_t bytes);
void free_host_buffer(void* p) noexcept;

// A pool of equal-size batch buffers: a buffer goes back to the pool when the
// last Python array using it is released, so steady-state iteration neither
// allocates nor page-faults. The pool is shared by the buffers (shared_ptr),
// so it outlives the Loader while arrays are alive. It is also the reader's
// BatchAllocator (PoolAllocator): the ring and the batches handed over to
// arrays (Reader::detach) draw on one set of buffers.
struct BufferPool {
  std::mutex m;
  std::vector<void*> free;
  std::size_t bytes = 0;
  std::size_t max_free = 8;
  void* take();                     // `bytes` bytes, l3::kBatchAlignment-aligned
  void give(void* data) noexcept;   // back to the free list, or freed beyond max_free
  ~BufferPool();
};

struct PooledBuffer {
  std::shared_ptr<BufferPool> pool;
  void* data = nullptr;
};

PooledBuffer* take_pooled_buffer(const std::shared_ptr<BufferPool>& pool);
std::shared_ptr<l3::BatchAllocator> make_pool_allocator(std::shared_ptr<BufferPool> pool);
void free_pooled_buffer(void* p) noexcept;

using U8Array = nb::ndarray<nb::numpy, std::uint8_t>;

// An (h, w, c) uint8 array owning `buf`.
U8Array owned_image(std::uint32_t h, std::uint32_t w, std::uint32_t c, HostBuffer* buf);

// A 1-D array holding a copy of src[0..n).
template <class T>
nb::ndarray<nb::numpy, T> owned_vector(const T* src, std::size_t n) {
  HostBuffer* buf = new_host_buffer(n * sizeof(T));
  if (n) std::memcpy(buf->data, src, n * sizeof(T));
  nb::capsule owner(buf, free_host_buffer);
  const std::size_t shape[1] = {n};
  return nb::ndarray<nb::numpy, T>(buf->data, 1, shape, owner);
}

inline std::span<const std::uint8_t> as_span(const nb::bytes& b) {
  return {reinterpret_cast<const std::uint8_t*>(b.c_str()), b.size()};
}

// ---- shared between binding units ------------------------------------------------

// Decodes .l3i bytes into a new array. channels 0: as stored; 1 or 3: by the
// loader's channel rule (l3::convert_channels). codec_bindings.cpp.
U8Array decode_span(std::span<const std::uint8_t> data, unsigned threads, bool verify, std::uint32_t channels = 0);

// The codec options of the Python keyword arguments tile_width, tile_height,
// effort, threads and entropy (l3::set_entropy_mode's spelling;
// invalid_argument -> ValueError): l3.encode, l3.encode_file, l3.convert.
// codec_bindings.cpp.
l3::EncodeOptions encode_options(std::uint32_t tile_width, std::uint32_t tile_height, int effort, unsigned threads,
                                 const std::string& entropy);

// Registration of each unit's functions and classes on the module.
void bind_codec(nb::module_& m);
void bind_dataset(nb::module_& m);
void bind_options(nb::module_& m);
void bind_batch(nb::module_& m);
void bind_reader(nb::module_& m);

}  // namespace l3py
