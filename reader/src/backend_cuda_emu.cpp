// The emulated wavefront backend (l3/reader_backend_cuda.hpp): the reader's
// decode jobs through l3::cuda::emu::decode_batch, the CPU run of the CUDA
// batch decoder's plan, scans, gather and per-warp tile decode.
#include <cstring>
#include <string>
#include <vector>

#include "l3/cuda/emulation.hpp"
#include "l3/reader_backend_cuda.hpp"
#include "slot_copy.hpp"

namespace l3 {
namespace {

class EmulatedWavefrontBackend final : public DecodeBackend {
public:
  explicit EmulatedWavefrontBackend(Limits limits) { options_.limits = limits; }
  const char* name() const noexcept override { return "cuda-emulated"; }

  // One emulated batch per call; stateless, so concurrent calls are safe.
  void decode(std::span<const DecodeJob> jobs) override {
    if (jobs.empty()) return;
    std::vector<cuda::HostImage> images(jobs.size());
    for (std::size_t i = 0; i < jobs.size(); ++i) images[i] = {jobs[i].encoded, jobs[i].region};
    const cuda::emu::BatchOutput b = cuda::emu::decode_batch(images, options_);
    // The first bad job decides the error, as the CPU backend's loop does.
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      const cuda::ImageSlot& s = b.slots[i];
      if (s.status != errc::ok) throw_error(s.status, "wavefront decode (emulated)");
      detail::copy_slot(s, b.pixels.data() + s.offset, jobs[i].out);
    }
  }

private:
  cuda::BatchOptions options_;  // hwc, checksum verified (as the CPU backend's l3::decode_region)
};

}  // namespace

std::shared_ptr<DecodeBackend> make_emulated_wavefront_backend(Limits limits) {
  return std::make_shared<EmulatedWavefrontBackend>(limits);
}

}  // namespace l3
