// The emulated wavefront backend (l3/reader_backend_cuda.hpp): the reader's
// decode jobs through l3::cuda::emu::decode_batch, the CPU run of the CUDA
// batch decoder's plan, scans, gather and per-warp tile decode.
#include <cstring>
#include <string>
#include <vector>

#include "l3/cuda/emulation.hpp"
#include "l3/reader_backend_cuda.hpp"

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
      const MutableImageView& out = jobs[i].out;
      if (!out.data) throw_error(errc::invalid_argument, "output buffer is null");
      if (out.width != s.width || out.height != s.height || out.channels != s.channels)
        throw_error(errc::invalid_argument, "output shape does not match the region");
      const std::size_t row = std::size_t{s.width} * s.channels;
      const std::size_t stride = out.stride ? out.stride : row;
      if (stride < row) throw_error(errc::invalid_argument, "output stride smaller than a row");
      for (std::uint32_t y = 0; y < s.height; ++y)
        std::memcpy(out.data + y * stride, b.pixels.data() + s.offset + y * row, row);
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
