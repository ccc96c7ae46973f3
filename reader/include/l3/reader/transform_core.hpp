// The per-example transform math of the reader, written once for the CPU
// pipeline and for CUDA kernels (CCCL-style: L3_HD_INLINE is __host__ __device__
// under nvcc and plain inline otherwise).
//
// Rules for this header: it compiles as host C++ and as CUDA device code. No
// allocation, no exceptions, no STL containers. Callers pass sizes they have
// checked; every function here clamps its reads to the sizes it is given.
//
// Contents:
//   - a portable counter-based RNG (splitmix64 finaliser), seeded per
//     (seed, epoch, record, copy) so a resumed run draws the same crops;
//   - crop boxes: torchvision's RandomResizedCrop algorithm, centre crops;
//   - the resampling filter: bilinear (triangle), antialiased when shrinking
//     by widening the support by the scale factor (PIL's / torchvision's
//     antialias=True scheme), as per-axis weight lists;
//   - fixed-point weights (kWeightBits) and per-sample kernels: resample_sample
//     (what one CUDA thread computes) and
//     the normalise / float16 conversions of the assemble stage.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "l3/common/host_device.hpp"

namespace l3::xf {

// ---- RNG -------------------------------------------------------------------

L3_HD_INLINE std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Hash of a tuple of words; the order matters.
L3_HD_INLINE std::uint64_t hash_words(std::uint64_t a, std::uint64_t b, std::uint64_t c = 0, std::uint64_t d = 0) {
  std::uint64_t h = mix64(a + 0x9e3779b97f4a7c15ULL);
  h = mix64(h ^ (b + 0x632be59bd9b4e019ULL));
  h = mix64(h ^ (c + 0x8cb92ba72f3d8dd7ULL));
  return mix64(h ^ (d + 0x4f1bbcdcbfa53e0bULL));
}

// splitmix64 stream: portable, identical on every platform and on the device.
struct Rng {
  std::uint64_t state = 0;
  L3_HD_INLINE std::uint64_t next() {
    state += 0x9e3779b97f4a7c15ULL;
    return mix64(state);
  }
  // Uniform in [0, 1), 53 bits.
  L3_HD_INLINE double uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
  L3_HD_INLINE double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Uniform integer in [lo, hi) (hi > lo).
  L3_HD_INLINE std::int64_t range(std::int64_t lo, std::int64_t hi) {
    std::int64_t v = lo + static_cast<std::int64_t>(uniform() * static_cast<double>(hi - lo));
    return v < hi ? v : hi - 1;
  }
};

// The RNG of one example: a pure function of (seed, epoch, record, copy).
L3_HD_INLINE Rng example_rng(std::uint64_t seed, std::uint64_t epoch, std::uint64_t record, std::uint64_t copy) {
  return Rng{hash_words(seed, epoch, record, copy)};
}

// ---- Crop boxes --------------------------------------------------------------

struct Box {
  std::int32_t x = 0, y = 0, w = 0, h = 0;
};

L3_HD_INLINE std::int32_t round_half_even(double v) {
  double r = floor(v + 0.5);
  if (r - v == 0.5 && fmod(r, 2.0) != 0.0) r -= 1.0;  // Python's round(): ties to even
  return static_cast<std::int32_t>(r);
}

// torchvision.transforms.RandomResizedCrop.get_params, with this RNG: ten tries
// of (area fraction ~ U(scale), log aspect ~ U(log ratio)); then a fallback
// that takes the whole image clamped to the ratio range, centred.
L3_HD_INLINE Box random_resized_crop_box(std::int32_t width, std::int32_t height, double scale_min, double scale_max,
                                     double ratio_min, double ratio_max, Rng& rng) {
  const double area = static_cast<double>(width) * height;
  const double log_lo = log(ratio_min), log_hi = log(ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * rng.uniform(scale_min, scale_max);
    const double aspect = exp(rng.uniform(log_lo, log_hi));
    const std::int32_t w = round_half_even(sqrt(target * aspect));
    const std::int32_t h = round_half_even(sqrt(target / aspect));
    if (w > 0 && h > 0 && w <= width && h <= height) {
      const auto y = static_cast<std::int32_t>(rng.range(0, height - h + 1));
      const auto x = static_cast<std::int32_t>(rng.range(0, width - w + 1));
      return {x, y, w, h};
    }
  }
  const double in_ratio = static_cast<double>(width) / height;
  std::int32_t w = width, h = height;
  if (in_ratio < ratio_min) {
    h = round_half_even(w / ratio_min);
  } else if (in_ratio > ratio_max) {
    w = round_half_even(h * ratio_max);
  }
  if (w < 1) w = 1;
  if (h < 1) h = 1;
  if (w > width) w = width;
  if (h > height) h = height;
  return {(width - w) / 2, (height - h) / 2, w, h};
}

// Centre crop. fraction > 0: the largest centred box with the output's aspect
// ratio, scaled by `fraction` (0.875 is "resize 256, centre crop 224").
// fraction == 0: exactly out_w x out_h pixels (clamped to the image), no scaling.
L3_HD_INLINE Box center_crop_box(std::int32_t width, std::int32_t height, std::int32_t out_w, std::int32_t out_h,
                             double fraction) {
  std::int32_t w = out_w, h = out_h;
  if (fraction > 0) {
    const double aspect = static_cast<double>(out_w) / out_h;
    double bw = width, bh = width / aspect;
    if (bh > height) {
      bh = height;
      bw = height * aspect;
    }
    w = round_half_even(bw * fraction);
    h = round_half_even(bh * fraction);
  }
  if (w < 1) w = 1;
  if (h < 1) h = 1;
  if (w > width) w = width;
  if (h > height) h = height;
  return {(width - w) / 2, (height - h) / 2, w, h};
}

L3_HD_INLINE Box union_box(const Box& a, const Box& b) {
  const std::int32_t x0 = a.x < b.x ? a.x : b.x, y0 = a.y < b.y ? a.y : b.y;
  const std::int32_t x1 = a.x + a.w > b.x + b.w ? a.x + a.w : b.x + b.w;
  const std::int32_t y1 = a.y + a.h > b.y + b.h ? a.y + a.h : b.y + b.h;
  return {x0, y0, x1 - x0, y1 - y0};
}

// ---- Resampling --------------------------------------------------------------

// Most taps any output sample uses when `in_len` samples map onto `out_len`.
L3_HD_INLINE int max_taps(int in_len, int out_len, bool antialias) {
  double scale = static_cast<double>(in_len) / out_len;
  double support = (antialias && scale > 1.0) ? scale : 1.0;
  return static_cast<int>(ceil(support)) * 2 + 1;
}

L3_HD_INLINE double triangle(double x) {
  x = x < 0 ? -x : x;
  return x < 1.0 ? 1.0 - x : 0.0;
}

// Fixed-point resampling (spec/cuda.md §6 Batch transforms): weights are integers in units of
// 2^-kWeightBits summing to exactly 2^kWeightBits; the vertical pass runs first
// and rounds each column sum to kMidBits fraction bits (a uint16: at most
// 255 * 2^7); the horizontal pass sums those and rounds to uint8. Integer
// arithmetic is exact, so every order of the sums (the CPU's vectorised
// passes, one CUDA thread per sample) gives the same bytes. Against the
// double-precision filter the result is within 1 level, and rarely off
// (tests/test_reader_transforms.cpp states and checks the bound).
constexpr int kWeightBits = 14;
constexpr int kMidBits = 7;
constexpr std::int32_t kWeightOne = 1 << kWeightBits;

// Weights of output sample `i` when `in_len` input samples are resized to
// `out_len` (bilinear; support widened by the scale when shrinking and
// antialias is on), in fixed point (kWeightBits), summing to kWeightOne.
// Writes up to `capacity` weights to `w`, the first input index to *first,
// and returns the count (>= 1).
L3_HD_INLINE int resample_weights(int in_len, int out_len, int i, bool antialias, std::int32_t* w, int capacity,
                              int* first) {
  const double scale = static_cast<double>(in_len) / out_len;
  const double filterscale = (antialias && scale > 1.0) ? scale : 1.0;
  const double support = filterscale;  // the triangle's support is 1
  const double center = (i + 0.5) * scale;
  int lo = static_cast<int>(center - support + 0.5);
  int hi = static_cast<int>(center + support + 0.5);
  if (lo < 0) lo = 0;
  if (hi > in_len) hi = in_len;
  if (hi - lo > capacity) hi = lo + capacity;
  if (hi <= lo) hi = lo + 1;  // never empty (the weight below then takes all)
  double total = 0;
  for (int x = lo; x < hi; ++x) total += triangle((x - center + 0.5) / filterscale);
  // Each weight is the step of the rounded cumulative sum: none is negative
  // and they add up to exactly kWeightOne, whatever the number of taps.
  const double inv = total > 0 ? static_cast<double>(kWeightOne) / total : 0.0;
  double cum = 0;
  std::int32_t prev = 0;
  for (int x = lo; x < hi; ++x) {
    cum += triangle((x - center + 0.5) / filterscale);
    const std::int32_t next = x + 1 == hi ? kWeightOne : static_cast<std::int32_t>(floor(cum * inv + 0.5));
    w[x - lo] = next - prev;
    prev = next;
  }
  *first = lo;
  return hi - lo;
}

// A vertical-pass sum (pixels times weights) rounded to kMidBits fraction bits.
L3_HD_INLINE std::uint16_t round_mid(std::int32_t acc) {
  return static_cast<std::uint16_t>((acc + (1 << (kWeightBits - kMidBits - 1))) >> (kWeightBits - kMidBits));
}

// A horizontal-pass sum (mid values times weights) rounded to a uint8.
L3_HD_INLINE std::uint8_t round_out(std::int32_t acc) {
  std::int32_t v = (acc + (1 << (kWeightBits + kMidBits - 1))) >> (kWeightBits + kMidBits);
  return static_cast<std::uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
}

L3_HD_INLINE std::uint8_t round_to_u8(float v) {
  float r = floorf(v + 0.5f);
  if (r < 0.f) r = 0.f;
  if (r > 255.f) r = 255.f;
  return static_cast<std::uint8_t>(r);
}

// Source channel that feeds output channel `c`: gray (and gray+alpha) is
// replicated; alpha is dropped.
L3_HD_INLINE int source_channel(int c, int src_channels) { return src_channels >= 3 ? c : 0; }

// One output sample of a separable resize, as a CUDA thread computes it: for
// each horizontal tap, the vertical sum of its column rounded with round_mid
// (exactly what the CPU pipeline's vertical pass stores), then the horizontal
// sum rounded with round_out. Integer arithmetic: the same bytes as the CPU
// pipeline's vectorised passes (reader/src/transforms.cpp) on every device.
//   src: the decoded region (stride in bytes, src_channels interleaved);
//   box: the crop inside it; xw/yw: weight lists of this output column / row.
L3_HD_INLINE std::uint8_t resample_sample(const std::uint8_t* src, std::size_t stride, int src_channels, int c,
                                      int box_x, int box_y, const std::int32_t* xw, int x_first, int x_taps,
                                      const std::int32_t* yw, int y_first, int y_taps) {
  const int sc = source_channel(c, src_channels);
  std::int32_t acc = 0;
  for (int kx = 0; kx < x_taps; ++kx) {
    const std::uint8_t* col = src + static_cast<std::size_t>(box_x + x_first + kx) * src_channels + sc;
    std::int32_t v = 0;
    for (int ky = 0; ky < y_taps; ++ky)
      v += yw[ky] * static_cast<std::int32_t>(col[static_cast<std::size_t>(box_y + y_first + ky) * stride]);
    acc += xw[kx] * static_cast<std::int32_t>(round_mid(v));
  }
  return round_out(acc);
}

// ---- Assemble: normalisation and float16 --------------------------------------

// (v / 255 - mean) / std, as v * a + b with a = 1 / (255 std), b = -mean / std.
struct Affine {
  float a = 1.f, b = 0.f;
};
L3_HD_INLINE Affine normaliser(float mean, float stdv) { return {1.f / (255.f * stdv), -mean / stdv}; }
L3_HD_INLINE float normalise(std::uint8_t v, Affine n) { return static_cast<float>(v) * n.a + n.b; }

// IEEE binary16 bits of f, rounded to nearest even (overflow to infinity).
L3_HD_INLINE std::uint16_t float_to_half(float f) {
  std::uint32_t x;
  memcpy(&x, &f, 4);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t mag = x & 0x7fffffffu;
  if (mag >= 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7c00u | (mag > 0x7f800000u ? 0x200u : 0u));
  if (mag >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (mag < 0x38800000u) {                                                  // subnormal or zero in half
    if (mag < 0x33000000u) return static_cast<std::uint16_t>(sign);        // < 2^-25: rounds to 0
    const std::uint32_t e = mag >> 23;
    const std::uint32_t m = (mag & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126u - e;  // 14..24 (half subnormal: m * 2^(e-150) / 2^-24)
    std::uint32_t h = m >> shift;
    const std::uint32_t rem = m & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (h & 1u))) ++h;
    return static_cast<std::uint16_t>(sign | h);
  }
  std::uint32_t h = ((mag - 0x38000000u) >> 13);  // rebias exponent 127 -> 15
  const std::uint32_t rem = mag & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<std::uint16_t>(sign | h);
}

L3_HD_INLINE float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
  if (e == 0) {
    if (m == 0) {
      x = sign;
    } else {  // subnormal: normalise
      e = 113;
      while (!(m & 0x400u)) {
        m <<= 1;
        --e;
      }
      x = sign | (e << 23) | ((m & 0x3ffu) << 13);
    }
  } else if (e == 31) {
    x = sign | 0x7f800000u | (m << 13);
  } else {
    x = sign | ((e + 112u) << 23) | (m << 13);
  }
  float f;
  memcpy(&f, &x, 4);
  return f;
}

}  // namespace l3::xf
