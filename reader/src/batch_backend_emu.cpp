// The emulated GPU batch backend (l3/reader/reader_backend_cuda.hpp): the CUDA batch
// backend's decomposition run on the CPU. Records go through
// l3::cuda::emu::decode_batch (the decode kernel's plan, scans and per-warp
// code); examples through the transform kernels' per-thread code
// (l3/reader/batch_transform_core.hpp), one "thread" after another, with the weight
// tables placed by an exclusive scan as on the device. Host memory.
#include <algorithm>
#include <numeric>
#include <new>
#include <vector>

#include "batch_plan.hpp"
#include "l3/reader/batch_transform_core.hpp"
#include "l3/cuda/emulation.hpp"
#include "l3/reader/reader_backend_cuda.hpp"

namespace l3 {
namespace {

class EmulatedGpuBatchBackend final : public BatchBackend {
public:
  explicit EmulatedGpuBatchBackend(Limits limits) { options_.limits = limits; }
  const char* name() const noexcept override { return "cuda-emulated"; }
  BatchMemory memory() const noexcept override { return BatchMemory::host; }
  void* allocate(std::size_t bytes) override { return ::operator new(bytes ? bytes : 1, std::align_val_t{256}); }
  void deallocate(void* p, std::size_t) noexcept override { ::operator delete(p, std::align_val_t{256}); }

  void run(std::span<const RecordJob> records, std::span<const ExampleJob> examples, const TransformOptions& options,
           std::span<errc> status) override {
    if (status.size() != records.size()) throw_error(errc::invalid_argument, "batch backend: one status per record");
    // Decode: the records' regions as one emulated batch.
    images_.resize(records.size());
    for (std::size_t i = 0; i < records.size(); ++i) images_[i] = {records[i].encoded, records[i].region};
    const cuda::emu::BatchOutput decoded = cuda::emu::decode_batch(images_, options_);
    for (std::size_t i = 0; i < records.size(); ++i) status[i] = decoded.slots[i].status;

    // Transform: descriptors of the examples whose record decoded.
    const xf::OutputSpec spec = detail::output_spec(options);
    detail::build_descriptors(records, examples, decoded.slots, spec, status, descs_, desc_record_);
    if (descs_.empty()) return;
    sizes_.resize(descs_.size());
    for (std::size_t e = 0; e < descs_.size(); ++e) sizes_[e] = xf::table_floats(descs_[e], spec);
    std::exclusive_scan(sizes_.begin(), sizes_.end(), sizes_.begin(), std::uint64_t{0});  // thrust on the device
    std::uint64_t total = 0;
    for (std::size_t e = 0; e < descs_.size(); ++e) {
      descs_[e].weights_offset = sizes_[e];
      total = sizes_[e] + xf::table_floats(descs_[e], spec);
    }
    weights_.resize(total);
    const std::size_t entries = static_cast<std::size_t>(xf::axis_entries(spec));
    first_.resize(descs_.size() * entries);
    taps_.resize(descs_.size() * entries);
    // Pass 1: one thread per (example, output column or row).
    for (std::uint32_t e = 0; e < descs_.size(); ++e)
      for (std::int32_t i = 0; i < xf::axis_entries(spec); ++i)
        xf::weights_thread(descs_[e], spec, e, i, weights_.data(), first_.data(), taps_.data());
    // Pass 2: one thread per (example, output pixel).
    for (std::uint32_t e = 0; e < descs_.size(); ++e)
      for (std::int32_t y = 0; y < spec.height; ++y)
        for (std::int32_t x = 0; x < spec.width; ++x)
          xf::resample_thread(descs_[e], spec, e, y, x, decoded.pixels.data(), weights_.data(), first_.data(),
                              taps_.data());
  }

private:
  cuda::BatchOptions options_;  // hwc, checksum verified (as the CPU backend's l3::decode_region)
  std::vector<cuda::HostImage> images_;
  std::vector<xf::ExampleDesc> descs_;
  std::vector<std::uint32_t> desc_record_;
  std::vector<std::uint64_t> sizes_;
  std::vector<std::int32_t> weights_;
  std::vector<std::int32_t> first_, taps_;
};

}  // namespace

std::shared_ptr<BatchBackend> make_emulated_gpu_batch_backend(Limits limits) {
  return std::make_shared<EmulatedGpuBatchBackend>(limits);
}

}  // namespace l3
