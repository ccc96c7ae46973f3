#include <new>

#include "l3/reader/reader_backend.hpp"

namespace l3 {
namespace {

class CpuDecodeBackend final : public DecodeBackend {
public:
  CpuDecodeBackend(unsigned threads, Limits limits, bool verify_checksum) {
    options_.threads = threads;
    options_.limits = limits;
    options_.verify_checksum = verify_checksum;
  }
  const char* name() const noexcept override { return "cpu"; }
  void decode(std::span<const DecodeJob> jobs) override {
    for (const DecodeJob& job : jobs) decode_region(job.encoded, job.region, job.out, options_);
  }

private:
  DecodeOptions options_;
};

class CpuBatchAllocator final : public BatchAllocator {
public:
  const char* name() const noexcept override { return "cpu"; }
  void* allocate(std::size_t bytes, std::size_t alignment) override {
    return ::operator new(bytes == 0 ? 1 : bytes, std::align_val_t{alignment});
  }
  void deallocate(void* p, std::size_t, std::size_t alignment) noexcept override {
    ::operator delete(p, std::align_val_t{alignment});
  }
};

}  // namespace

std::shared_ptr<DecodeBackend> make_cpu_decode_backend(unsigned threads_per_image, Limits limits,
                                                       bool verify_checksum) {
  return std::make_shared<CpuDecodeBackend>(threads_per_image, limits, verify_checksum);
}

std::shared_ptr<BatchAllocator> make_cpu_batch_allocator() { return std::make_shared<CpuBatchAllocator>(); }

}  // namespace l3
