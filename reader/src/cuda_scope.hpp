// Host helpers shared by the reader's CUDA backends (backend_cuda.cpp,
// batch_backend_cuda.cpp): CUDA errors as l3::Error, and a scope that makes a
// device current for the calling thread and restores the previous one (the
// backends are called from the reader's and the consumer's threads, whose
// current devices are theirs).
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "l3/common/error.hpp"

namespace l3::detail {

inline void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw_error(errc::device_error, std::string(what) + ": " + cudaGetErrorString(e));
}

class DeviceScope {
public:
  explicit DeviceScope(int device) noexcept {
    if (cudaGetDevice(&previous_) != cudaSuccess) {
      cudaGetLastError();
      previous_ = -1;
    }
    if (previous_ != device) {
      error_ = cudaSetDevice(device);
      changed_ = error_ == cudaSuccess && previous_ >= 0;
    }
  }
  ~DeviceScope() {
    if (changed_) cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
  cudaError_t error() const noexcept { return error_; }

private:
  int previous_ = -1;
  bool changed_ = false;
  cudaError_t error_ = cudaSuccess;
};

}  // namespace l3::detail
