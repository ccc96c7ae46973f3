// Thrust on a caller's stream with no allocation of its own, for the .cu files
// of cuda/ and of the reader's CUDA backend (nvcc only).
//   - ArenaAllocator: Thrust's temporary storage carved from a caller's
//     reusable device buffer (no cudaMalloc per call, nothing that would break
//     graph capture); throws std::bad_alloc when the buffer is too small.
//   - thrust_call: runs a Thrust call and turns its exceptions into CUDA errors.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <exception>
#include <new>

namespace l3::cuda {

struct ArenaAllocator {
  using value_type = char;
  char* base;
  std::size_t size;
  std::size_t used = 0;
  char* allocate(std::ptrdiff_t n) {
    const std::size_t at = (used + 255) & ~std::size_t{255};
    if (n < 0 || at > size || std::size_t(n) > size - at) throw std::bad_alloc();
    used = at + std::size_t(n);
    return base + at;
  }
  void deallocate(char*, std::size_t) {}
};

template <class F> cudaError_t thrust_call(F&& f) {
  try {
    f();
  } catch (const std::bad_alloc&) {
    return cudaErrorMemoryAllocation;
  } catch (const std::exception&) {
    const cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? cudaErrorUnknown : e;
  }
  return cudaGetLastError();
}

}  // namespace l3::cuda
