// Per-thread code of the batch transform kernels (spec/cuda.md §6 Batch
// transforms), written once for the CUDA kernels (reader/src/batch_backend_cuda.cu)
// and their CPU emulation (reader/src/batch_backend_emu.cpp).
//
// After the batch decoder has written every record's region into its slot
// (HWC, rows packed), two passes build every example of a window:
//   1. weights: one thread per (example, output column or row) fills that
//      column's / row's resampling weights (xf::resample_weights) into a
//      table. Each example's table holds width*xcap + height*ycap weights
//      (int32, fixed point: xf::kWeightBits); the
//      tables' offsets are an exclusive scan of those sizes (Thrust on the
//      device, std::exclusive_scan in the emulation).
//   2. resample: one thread per (example, output pixel) computes the pixel's
//      channels (xf::resample_sample with the tables), flips, normalises and
//      stores them in the output dtype and layout.
// The resampling is integer arithmetic (the CPU pipeline's), and the weights
// and normalisation are computed with the same floating-point operations in
// the same order as crop_resize() + assemble(), so the bytes are identical
// (device code needs --fmad=false for the weights and the normalisation).
//
// Rules as l3/reader/transform_core.hpp: host and device; no allocation, exceptions
// or STL containers. The host validates every descriptor before a launch.
#pragma once

#include <cstdint>

#include "l3/common/pixel_layout.hpp"
#include "l3/reader/transform_core.hpp"

namespace l3::xf {

// The output of every example of a launch (TransformOptions, flattened).
struct OutputSpec {
  std::int32_t width = 0, height = 0, channels = 0;
  Layout layout = Layout::hwc;
  std::int32_t dtype = 0;   // 0: uint8, 1: float32, 2: float16
  std::int32_t antialias = 1;
  Affine norm[3];           // per output channel: v * a + b (float dtypes)
};

// One example of a launch.
struct ExampleDesc {
  std::uint64_t src_offset = 0;  // its record's decoded slot in the decode output (bytes)
  std::uint32_t src_stride = 0;  // bytes per row of that slot
  std::int32_t src_channels = 0;
  std::int32_t box_x = 0, box_y = 0, box_w = 0, box_h = 0;  // the crop, relative to the slot
  std::int32_t flip = 0;
  std::int32_t xcap = 0, ycap = 0;     // max_taps() of each axis
  std::uint64_t weights_offset = 0;    // weights; exclusive scan of table_floats()
  std::uint8_t* dst = nullptr;         // example_bytes of output
};

// Weights (int32) of an example's weight table.
L3_HD_INLINE std::uint64_t table_floats(const ExampleDesc& d, const OutputSpec& o) {
  return static_cast<std::uint64_t>(o.width) * static_cast<std::uint64_t>(d.xcap) +
         static_cast<std::uint64_t>(o.height) * static_cast<std::uint64_t>(d.ycap);
}

// Entries (first, taps) per example: one per output column, then one per row.
L3_HD_INLINE std::int32_t axis_entries(const OutputSpec& o) { return o.width + o.height; }

// Pass 1, thread (example e, entry i): i < width is output column i, else
// output row i - width. `first` and `taps` hold axis_entries() ints per example.
L3_HD_INLINE void weights_thread(const ExampleDesc& d, const OutputSpec& o, std::uint32_t e, std::int32_t i,
                             std::int32_t* weights, std::int32_t* first, std::int32_t* taps) {
  const std::uint64_t entry = static_cast<std::uint64_t>(e) * static_cast<std::uint64_t>(axis_entries(o)) +
                              static_cast<std::uint64_t>(i);
  int f = 0, n = 0;
  if (i < o.width) {
    std::int32_t* w = weights + d.weights_offset + static_cast<std::uint64_t>(i) * static_cast<std::uint64_t>(d.xcap);
    n = resample_weights(d.box_w, o.width, i, o.antialias != 0, w, d.xcap, &f);
  } else {
    const std::int32_t r = i - o.width;
    std::int32_t* w = weights + d.weights_offset + static_cast<std::uint64_t>(o.width) * static_cast<std::uint64_t>(d.xcap) +
               static_cast<std::uint64_t>(r) * static_cast<std::uint64_t>(d.ycap);
    n = resample_weights(d.box_h, o.height, r, o.antialias != 0, w, d.ycap, &f);
  }
  first[entry] = f;
  taps[entry] = n;
}

// o.norm[c] by selection: a runtime index into the kernel parameter would
// copy the whole OutputSpec to local memory in every thread.
L3_HD_INLINE Affine channel_norm(const OutputSpec& o, std::int32_t c) {
  return c == 0 ? o.norm[0] : c == 1 ? o.norm[1] : o.norm[2];
}

// Stores channel c of output pixel (y, x) (already flipped) in the output dtype and layout.
L3_HD_INLINE void store_sample(const OutputSpec& o, std::uint8_t* dst, std::int32_t y, std::int32_t x, std::int32_t c,
                           std::uint8_t v) {
  const std::uint64_t hw = static_cast<std::uint64_t>(o.width) * static_cast<std::uint64_t>(o.height);
  const std::uint64_t pixel = static_cast<std::uint64_t>(y) * static_cast<std::uint64_t>(o.width) +
                              static_cast<std::uint64_t>(x);
  const std::uint64_t index = o.layout == Layout::chw ? static_cast<std::uint64_t>(c) * hw + pixel
                                            : pixel * static_cast<std::uint64_t>(o.channels) + static_cast<std::uint64_t>(c);
  if (o.dtype == 0) {
    dst[index] = v;
  } else if (o.dtype == 1) {
    const float f = normalise(v, channel_norm(o, c));
    memcpy(dst + index * 4, &f, 4);
  } else {
    const std::uint16_t h = float_to_half(normalise(v, channel_norm(o, c)));
    memcpy(dst + index * 2, &h, 2);
  }
}

// Pass 2, thread (example e, output pixel (y, x)). `decoded` is the decode
// output; weights/first/taps as filled by pass 1.
L3_HD_INLINE void resample_thread(const ExampleDesc& d, const OutputSpec& o, std::uint32_t e, std::int32_t y,
                              std::int32_t x, const std::uint8_t* decoded, const std::int32_t* weights,
                              const std::int32_t* first, const std::int32_t* taps) {
  const std::uint8_t* src = decoded + d.src_offset;
  const std::int32_t dx = d.flip ? o.width - 1 - x : x;
  if (d.box_w == o.width && d.box_h == o.height) {  // no scaling: a copy (crop_resize's fast path)
    const std::uint8_t* p = src + static_cast<std::uint64_t>(d.box_y + y) * d.src_stride +
                            static_cast<std::uint64_t>(d.box_x + x) * static_cast<std::uint64_t>(d.src_channels);
    for (std::int32_t c = 0; c < o.channels; ++c) store_sample(o, d.dst, y, dx, c, p[source_channel(c, d.src_channels)]);
    return;
  }
  const std::uint64_t base = static_cast<std::uint64_t>(e) * static_cast<std::uint64_t>(axis_entries(o));
  const std::uint64_t xe = base + static_cast<std::uint64_t>(x);
  const std::uint64_t ye = base + static_cast<std::uint64_t>(o.width) + static_cast<std::uint64_t>(y);
  const std::int32_t* xw = weights + d.weights_offset + static_cast<std::uint64_t>(x) * static_cast<std::uint64_t>(d.xcap);
  const std::int32_t* yw = weights + d.weights_offset + static_cast<std::uint64_t>(o.width) * static_cast<std::uint64_t>(d.xcap) +
                    static_cast<std::uint64_t>(y) * static_cast<std::uint64_t>(d.ycap);
  // A gray source is resampled once and replicated (as crop_resize does).
  const std::int32_t computed = d.src_channels >= 3 ? o.channels : 1;
  for (std::int32_t c = 0; c < computed; ++c) {
    const std::uint8_t v = resample_sample(src, d.src_stride, d.src_channels, c, d.box_x, d.box_y, xw, first[xe],
                                           taps[xe], yw, first[ye], taps[ye]);
    if (computed == o.channels) {
      store_sample(o, d.dst, y, dx, c, v);
    } else {
      for (std::int32_t k = 0; k < o.channels; ++k) store_sample(o, d.dst, y, dx, k, v);
    }
  }
}

}  // namespace l3::xf
