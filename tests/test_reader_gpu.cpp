// The reader with the CUDA decode backend against the reader with the CPU
// backend (label gpu): byte-identical batches and the same outcome for a
// corrupt record. Without a CUDA device every case is skipped (doctest reports
// it skipped, and the line "L3_GPU_SKIPPED" makes ctest report it skipped).
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <cstdio>
#include <vector>

#include "l3/reader_backend_cuda.hpp"
#include "test_reader_gpu_util.hpp"

using namespace l3;

namespace {

}  // namespace

TEST_CASE("without a device, make_cuda_decode_backend throws device_error" * doctest::skip(!l3test::no_gpu())) {
  CHECK(l3test::error_of([] { make_cuda_decode_backend(0); }) == errc::device_error);
}

TEST_CASE("GPU reader: CUDA backend batches equal the CPU backend's byte for byte" * doctest::skip(l3test::no_gpu())) {
  auto ds = l3test::synth_dataset("gpu_reader");
  auto gpu = make_cuda_decode_backend(0);
  CHECK(std::string(gpu->name()) == "cuda");
  for (const auto& [what, o] : l3test::backend_configs()) {
    CAPTURE(what);
    for (std::uint64_t epoch : {0u, 1u}) {
      CAPTURE(epoch);
      const auto a = l3test::run_epoch(ds, o, make_cpu_decode_backend(), epoch);
      // The same backend across epochs and configurations: buffers reused.
      const auto b = l3test::run_epoch(ds, o, gpu, epoch, make_cuda_pinned_allocator());
      CHECK(a.data.size() >= 10);
      l3test::check_same(a, b);
    }
  }
}

TEST_CASE("GPU reader: a caller's stream; several workers share the backend" * doctest::skip(l3test::no_gpu())) {
  auto ds = l3test::synth_dataset("gpu_reader_stream");
  cudaStream_t s = nullptr;
  REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
  {
    auto gpu = make_cuda_decode_backend(0, s);
    ReaderOptions o = l3test::backend_configs()[1].second;
    o.workers = 4;
    const auto a = l3test::run_epoch(ds, o, make_cpu_decode_backend());
    const auto b = l3test::run_epoch(ds, o, gpu);
    l3test::check_same(a, b);
  }
  cudaStreamDestroy(s);
}

TEST_CASE("GPU reader: a corrupt record gives the CPU backend's outcome under both policies" * doctest::skip(l3test::no_gpu())) {
  auto ds = l3test::corrupt_dataset("gpu_reader_corrupt", {13});
  auto gpu = make_cuda_decode_backend(0);
  for (const Verify verify : {Verify::yes, Verify::no}) {
    for (const ErrorPolicy policy : {ErrorPolicy::raise, ErrorPolicy::skip}) {
      CAPTURE(verify == Verify::yes);
      CAPTURE(policy == ErrorPolicy::skip);
      ReaderOptions o = l3test::backend_configs()[1].second;
      o.verify = verify;
      o.on_error = policy;
      const auto a = l3test::run_epoch(ds, o, make_cpu_decode_backend());
      const auto b = l3test::run_epoch(ds, o, gpu);
      l3test::check_same(a, b);
      CHECK(a.raised + a.replaced == 1);
    }
  }
}
