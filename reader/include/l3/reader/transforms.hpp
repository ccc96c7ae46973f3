// Host API of the reader's per-example transforms: crop (random resized or
// centre), resize (bilinear, antialiased when shrinking), horizontal flip, and
// assembly into a batch tensor (HWC or CHW; uint8, float32 or float16 with
// mean/std normalisation). The math lives in l3/reader/transform_core.hpp, shared
// with device code.
//
// A transform is split in two so that a crop decodes only what it needs:
//   1. plan_example(): draws the crop box and the flip from the example's RNG
//      (needs only the image size, from l3::read_info);
//   2. the caller decodes the box (l3::decode_region), then crop_resize() and
//      assemble() produce the example's slot of the batch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "l3/codec/codec.hpp"
#include "l3/common/pixel_layout.hpp"
#include "l3/reader/transform_core.hpp"

namespace l3 {

enum class DType { uint8, float32, float16 };
enum class CropMode {
  random_resized,  // torchvision RandomResizedCrop(scale, ratio), then resize to the output size
  center,          // centre crop (center_fraction), then resize to the output size
  full,            // the whole image, resized to the output size (aspect not kept)
};

struct TransformOptions {
  std::uint32_t width = 224, height = 224;  // output size
  std::uint32_t channels = 3;               // 3: gray is replicated, alpha dropped; 1: gray sources only
  CropMode crop = CropMode::random_resized;
  double scale_min = 0.08, scale_max = 1.0;              // area fraction (random_resized)
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;   // aspect w/h range (random_resized)
  double center_fraction = 0.875;  // center: fraction of the largest centred box; 0: exact crop, no scaling
  bool antialias = true;           // widen the bilinear filter by the scale when shrinking
  double flip_probability = 0.5;   // horizontal flip
  Layout layout = Layout::chw;
  DType dtype = DType::float32;
  bool normalize = true;  // float outputs: (v/255 - mean) / std; otherwise v/255
  float mean[3] = {0.485f, 0.456f, 0.406f};
  float std[3] = {0.229f, 0.224f, 0.225f};
};

std::size_t dtype_size(DType dtype) noexcept;
const char* dtype_name(DType dtype) noexcept;
// The one spelling of each crop mode: l3pack bench-read --mode, l3.Loader(crop=),
// the members of l3.CropMode ("random_resized", "center", "full").
const char* crop_mode_name(CropMode mode) noexcept;
// Bytes of one example in the batch tensor.
std::size_t example_bytes(const TransformOptions& options) noexcept;
// Throws invalid_argument for an option outside its range.
void validate(const TransformOptions& options);

struct ExamplePlan {
  xf::Box box;  // crop box in image coordinates
  bool flip = false;
};

// Draws the crop box, then the flip, from `rng` (in that order).
ExamplePlan plan_example(const TransformOptions& options, std::uint32_t width, std::uint32_t height, xf::Rng& rng);

// Scratch of one worker: buffers grow to the largest size seen and are reused
// (no allocation per example once warm). The weight tables of an axis are kept
// for the last (crop length, output length, antialias) and rebuilt only when
// that changes; the normalisation tables for the last output options.
struct AxisTable {
  std::vector<std::int32_t> w;        // `cap` fixed-point weights per output sample
  std::vector<std::int32_t> first, taps;
  int cap = 0, in_len = -1, out_len = -1;
  bool antialias = false;
};
struct TransformScratch {
  AxisTable x, y;
  std::vector<std::int32_t> acc;    // one row of vertical sums
  std::vector<std::uint16_t> mid;    // the vertical pass's rows (kMidBits fraction bits)
  std::vector<std::uint32_t> cols;   // the same, transposed for the horizontal pass
  std::vector<std::uint8_t> planes;  // output rows, one uint8 plane per channel, on their way to the slot
  // Per output channel: the normalisation (float outputs), and the value of
  // each uint8 as float16 bits.
  float affine_a[3] = {}, affine_b[3] = {};
  std::uint16_t lut16[3][256] = {};
  DType lut_dtype = DType::uint8;
  bool lut_normalize = false;
  float lut_mean[3] = {}, lut_std[3] = {};
  std::uint32_t lut_channels = 0;
};

// Crops plan.box out of `src` (a decoded region whose top-left pixel is image
// pixel (origin_x, origin_y); the box must lie inside it), resizes it to the
// output size and flips it: `out` receives height x width x channels uint8 (HWC).
void crop_resize(const ImageView& src, std::uint32_t origin_x, std::uint32_t origin_y, const ExamplePlan& plan,
                 const TransformOptions& options, TransformScratch& scratch, std::uint8_t* out);

// crop_resize() and assemble() in one: the last pass writes the example's batch
// slot `dst` (example_bytes(options) bytes) in the output layout and dtype.
// The same bytes as crop_resize() followed by assemble().
void crop_resize_assemble(const ImageView& src, std::uint32_t origin_x, std::uint32_t origin_y,
                          const ExamplePlan& plan, const TransformOptions& options, TransformScratch& scratch,
                          void* dst);

// The same result computed one output sample at a time with
// xf::resample_sample, the way a CUDA kernel thread does: the CPU emulation of
// the device path. Slow; for tests and as the kernels' reference.
void crop_resize_per_sample(const ImageView& src, std::uint32_t origin_x, std::uint32_t origin_y,
                            const ExamplePlan& plan, const TransformOptions& options, std::uint8_t* out);

// Writes one example (HWC uint8 from crop_resize) into its batch slot `dst`
// (example_bytes(options) bytes) in the output layout and dtype.
void assemble(const std::uint8_t* hwc, const TransformOptions& options, void* dst);

// The loader's channel rule (xf::source_channel), for whole images: 3 output
// channels replicate gray (1 or 2 channels, alpha dropped) and drop the alpha
// of RGBA, as PIL's convert("RGB") does; 1 output channel takes gray sources
// only (gray+alpha drops alpha). Throws errc::invalid_argument for `channels`
// other than 1 or 3 and errc::unsupported for 1 from a colour source.
void check_output_channels(std::uint32_t source_channels, std::uint32_t channels);
// `out` receives src.height x src.width x channels bytes (HWC).
void convert_channels(const ImageView& src, std::uint32_t channels, std::uint8_t* out);

}  // namespace l3
