// Compile-only check that l3/transform_core.hpp builds as device code, and the
// shape of a resize kernel over it (one thread per output sample). Not wired
// into the reader yet: the CUDA decode backend (cuda/) is being written.
#include "l3/transform_core.hpp"

namespace l3::xf {

__global__ void resize_kernel_check(const std::uint8_t* src, std::size_t stride, int src_channels, Box box,
                                    int out_w, int out_h, int out_c, bool antialias, std::uint8_t* out) {
  const int x = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const int y = static_cast<int>(blockIdx.y * blockDim.y + threadIdx.y);
  if (x >= out_w || y >= out_h) return;
  float xw[64], yw[64];
  int xf0 = 0, yf0 = 0;
  const int xn = resample_weights(box.w, out_w, x, antialias, xw, 64, &xf0);
  const int yn = resample_weights(box.h, out_h, y, antialias, yw, 64, &yf0);
  for (int c = 0; c < out_c; ++c)
    out[(static_cast<std::size_t>(y) * out_w + x) * out_c + c] =
        round_to_u8(resample_sample(src, stride, src_channels, c, box.x, box.y, xw, xf0, xn, yw, yf0, yn));
}

}  // namespace l3::xf
