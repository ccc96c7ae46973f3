#include "l3/reader/transforms.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "l3/common/error.hpp"
#include "l3/common/target_clones.hpp"

namespace l3 {

std::size_t dtype_size(DType dtype) noexcept {
  switch (dtype) {
    case DType::uint8: return 1;
    case DType::float16: return 2;
    case DType::float32: return 4;
  }
  return 1;
}

const char* dtype_name(DType dtype) noexcept {
  switch (dtype) {
    case DType::uint8: return "uint8";
    case DType::float16: return "float16";
    case DType::float32: return "float32";
  }
  return "?";
}

const char* crop_mode_name(CropMode mode) noexcept {
  switch (mode) {
    case CropMode::random_resized: return "random_resized";
    case CropMode::center: return "center";
    case CropMode::full: return "full";
  }
  return "?";
}

std::size_t example_bytes(const TransformOptions& o) noexcept {
  return std::size_t{o.width} * o.height * o.channels * dtype_size(o.dtype);
}

void validate(const TransformOptions& o) {
  if (o.width == 0 || o.height == 0 || o.width > 16384 || o.height > 16384)
    throw_error(errc::invalid_argument, "output size must be 1..16384");
  if (o.channels != 1 && o.channels != 3) throw_error(errc::invalid_argument, "output channels must be 1 or 3");
  if (!(o.scale_min > 0 && o.scale_min <= o.scale_max && o.scale_max <= 1.0))
    throw_error(errc::invalid_argument, "scale range must satisfy 0 < min <= max <= 1");
  if (!(o.ratio_min > 0 && o.ratio_min <= o.ratio_max)) throw_error(errc::invalid_argument, "bad ratio range");
  if (!(o.center_fraction >= 0 && o.center_fraction <= 1)) throw_error(errc::invalid_argument, "center fraction must be 0..1");
  if (!(o.flip_probability >= 0 && o.flip_probability <= 1)) throw_error(errc::invalid_argument, "flip probability must be 0..1");
  for (int c = 0; c < 3; ++c)
    if (!(o.std[c] > 0)) throw_error(errc::invalid_argument, "std must be > 0");
}

ExamplePlan plan_example(const TransformOptions& o, std::uint32_t width, std::uint32_t height, xf::Rng& rng) {
  ExamplePlan plan;
  const auto w = static_cast<std::int32_t>(width), h = static_cast<std::int32_t>(height);
  switch (o.crop) {
    case CropMode::random_resized:
      plan.box = xf::random_resized_crop_box(w, h, o.scale_min, o.scale_max, o.ratio_min, o.ratio_max, rng);
      break;
    case CropMode::center:
      plan.box = xf::center_crop_box(w, h, static_cast<std::int32_t>(o.width), static_cast<std::int32_t>(o.height),
                                     o.center_fraction);
      break;
    case CropMode::full: plan.box = {0, 0, w, h}; break;
  }
  plan.flip = o.flip_probability > 0 && rng.uniform() < o.flip_probability;
  return plan;
}

namespace {

// The hot loops are built twice on x86-64 GCC/Clang: for the baseline (SSE2)
// and for AVX2, chosen at load time (ifunc). Integer arithmetic: both give the
// same bytes. Where clones are not built: l3/common/target_clones.hpp.
#if L3_HAVE_TARGET_CLONES
#define L3_XF_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define L3_XF_CLONES
#endif

// The weight table of one axis, rebuilt only when (in_len, out_len, antialias) changes.
void axis_table(AxisTable& t, int in_len, int out_len, bool antialias) {
  if (t.in_len == in_len && t.out_len == out_len && t.antialias == antialias) return;
  t.cap = xf::max_taps(in_len, out_len, antialias);
  t.w.resize(static_cast<std::size_t>(out_len) * static_cast<std::size_t>(t.cap));
  t.first.resize(static_cast<std::size_t>(out_len));
  t.taps.resize(static_cast<std::size_t>(out_len));
  for (int i = 0; i < out_len; ++i)
    t.taps[i] = xf::resample_weights(in_len, out_len, i, antialias, &t.w[static_cast<std::size_t>(i) * t.cap], t.cap,
                                     &t.first[i]);
  t.in_len = in_len;
  t.out_len = out_len;
  t.antialias = antialias;
}

void check_source(const ImageView& src, std::uint32_t ox, std::uint32_t oy, const ExamplePlan& plan,
                  const TransformOptions& o) {
  const xf::Box& b = plan.box;
  if (b.w <= 0 || b.h <= 0 || b.x < static_cast<std::int64_t>(ox) || b.y < static_cast<std::int64_t>(oy) ||
      std::int64_t{b.x} + b.w > std::int64_t{ox} + src.width || std::int64_t{b.y} + b.h > std::int64_t{oy} + src.height)
    throw_error(errc::out_of_range, "crop box outside the decoded region");
  check_output_channels(src.channels, o.channels);
}

// Vertical pass of one output row: `taps` source rows (`stride` apart) times
// their weights, `len` bytes each, rounded to mid values. Vectorised.
L3_XF_CLONES void vertical_pass(const std::uint8_t* src, std::size_t stride, const std::int32_t* w, int taps, int len,
                                std::int32_t* __restrict acc, std::uint16_t* __restrict mid) {
  const std::int32_t w0 = w[0];
  for (int j = 0; j < len; ++j) acc[j] = w0 * static_cast<std::int32_t>(src[j]);
  for (int k = 1; k < taps; ++k) {
    const std::uint8_t* __restrict p = src + static_cast<std::size_t>(k) * stride;
    const std::int32_t wk = w[k];
    for (int j = 0; j < len; ++j) acc[j] += wk * static_cast<std::int32_t>(p[j]);
  }
  for (int j = 0; j < len; ++j) mid[j] = xf::round_mid(acc[j]);
}

// Output rows resampled together by the horizontal pass: one int32 lane each
// (a vector register of AVX2).
constexpr int kRows = 8;

// mid rows [r][j] (r < rows, len values each) to columns [j][r] (kRows lanes;
// lanes past `rows` are zero), so the horizontal pass reads contiguous lanes.
void transpose_rows(const std::uint16_t* mid, int rows, int len, std::uint16_t* __restrict cols) {
  for (int j = 0; j < len; ++j) {
    std::uint16_t* d = cols + static_cast<std::size_t>(j) * kRows;
    for (int r = 0; r < kRows; ++r) d[r] = r < rows ? mid[static_cast<std::size_t>(r) * len + j] : 0;
  }
}

// Horizontal pass of kRows output rows at once: `lines` receives kRows rows of
// ow x oc uint8 (HWC, flipped when asked). `cols` (transpose_rows) starts at
// source column `col0`, SCH values per column. Vectorised across the rows and
// channels: the accumulators are laid out as a column of `cols`.
template <int SCH>
L3_XF_CLONES void horizontal_pass(const std::uint16_t* cols, int col0, const AxisTable& x, int ow, int oc, bool flip,
                                  std::uint8_t* __restrict lines) {
  constexpr int kLanes = SCH * kRows;
  const std::size_t line = static_cast<std::size_t>(ow) * oc;
  for (int i = 0; i < ow; ++i) {
    const std::int32_t* w = &x.w[static_cast<std::size_t>(i) * x.cap];
    const int n = x.taps[i];
    const std::uint16_t* p = cols + static_cast<std::size_t>(x.first[i] - col0) * kLanes;
    std::int32_t acc[kLanes] = {};
    for (int k = 0; k < n; ++k, p += kLanes) {
      const std::int32_t wk = w[k];
      for (int j = 0; j < kLanes; ++j) acc[j] += wk * static_cast<std::int32_t>(p[j]);
    }
    std::uint8_t* d = lines + static_cast<std::size_t>(flip ? ow - 1 - i : i) * oc;
    for (int r = 0; r < kRows; ++r)
      for (int c = 0; c < oc; ++c)  // a gray source (SCH < 3) is replicated
        d[r * line + static_cast<std::size_t>(c)] = xf::round_out(acc[(SCH >= 3 ? c : 0) * kRows + r]);
  }
}

void horizontal_pass(const std::uint16_t* cols, int col0, int sch, const AxisTable& x, int ow, int oc, bool flip,
                     std::uint8_t* lines) {
  switch (sch) {
    case 1: return horizontal_pass<1>(cols, col0, x, ow, oc, flip, lines);
    case 2: return horizontal_pass<2>(cols, col0, x, ow, oc, flip, lines);
    case 3: return horizontal_pass<3>(cols, col0, x, ow, oc, flip, lines);
    default: return horizontal_pass<4>(cols, col0, x, ow, oc, flip, lines);
  }
}

// One output row by copy (the box has the output size: the weights are exactly one).
void copy_row(const std::uint8_t* row, int sch, int ow, int oc, bool flip, std::uint8_t* line) {
  for (int i = 0; i < ow; ++i) {
    std::uint8_t* d = line + static_cast<std::size_t>(flip ? ow - 1 - i : i) * oc;
    for (int c = 0; c < oc; ++c) d[c] = row[static_cast<std::size_t>(i) * sch + xf::source_channel(c, sch)];
  }
}

// Runs crop + resize + flip row by row; emit(y, line) receives each output row
// (ow x oc uint8, HWC) while it is in the cache.
template <typename Emit>
void resize_rows(const ImageView& src, std::uint32_t origin_x, std::uint32_t origin_y, const ExamplePlan& plan,
                 const TransformOptions& o, TransformScratch& s, Emit&& emit) {
  check_source(src, origin_x, origin_y, plan, o);
  const std::size_t stride = src.stride ? src.stride : std::size_t{src.width} * src.channels;
  const int sch = static_cast<int>(src.channels);
  const int bx = plan.box.x - static_cast<int>(origin_x), by = plan.box.y - static_cast<int>(origin_y);
  const int ow = static_cast<int>(o.width), oh = static_cast<int>(o.height), oc = static_cast<int>(o.channels);
  s.hwc.resize(static_cast<std::size_t>(ow) * oc);
  std::uint8_t* line = s.hwc.data();
  if (plan.box.w == ow && plan.box.h == oh) {  // no scaling
    for (int y = 0; y < oh; ++y) {
      copy_row(src.data + static_cast<std::size_t>(by + y) * stride + static_cast<std::size_t>(bx) * sch, sch, ow, oc,
               plan.flip, line);
      emit(y, line);
    }
    return;
  }
  axis_table(s.x, plan.box.w, ow, o.antialias);
  axis_table(s.y, plan.box.h, oh, o.antialias);
  // Columns of the box any output column reads.
  int col0 = s.x.first[0], col1 = 0;
  for (int i = 0; i < ow; ++i) {
    col0 = std::min(col0, s.x.first[i]);
    col1 = std::max(col1, s.x.first[i] + s.x.taps[i]);
  }
  const int len = (col1 - col0) * sch;
  s.acc.resize(static_cast<std::size_t>(len));
  s.mid.resize(static_cast<std::size_t>(len) * kRows);
  s.cols.resize(static_cast<std::size_t>(len) * kRows);
  s.lines.resize(static_cast<std::size_t>(ow) * oc * kRows);
  const std::size_t line_bytes = static_cast<std::size_t>(ow) * oc;
  const std::uint8_t* base = src.data + static_cast<std::size_t>(bx + col0) * sch;
  for (int y0 = 0; y0 < oh; y0 += kRows) {
    const int rows = std::min(kRows, oh - y0);
    for (int r = 0; r < rows; ++r) {
      const int y = y0 + r;
      vertical_pass(base + static_cast<std::size_t>(by + s.y.first[y]) * stride, stride,
                    &s.y.w[static_cast<std::size_t>(y) * s.y.cap], s.y.taps[y], len, s.acc.data(),
                    &s.mid[static_cast<std::size_t>(r) * len]);
    }
    transpose_rows(s.mid.data(), rows, len, s.cols.data());
    horizontal_pass(s.cols.data(), col0, sch, s.x, ow, oc, plan.flip, s.lines.data());
    for (int r = 0; r < rows; ++r) emit(y0 + r, &s.lines[static_cast<std::size_t>(r) * line_bytes]);
  }
}

// The output value of each uint8 per channel, as assemble() computes it.
void prepare_lut(const TransformOptions& o, TransformScratch& s) {
  bool same = s.lut_dtype == o.dtype && s.lut_normalize == o.normalize && s.lut_channels == o.channels;
  for (int c = 0; c < 3 && same; ++c) same = s.lut_mean[c] == o.mean[c] && s.lut_std[c] == o.std[c];
  if (same || o.dtype == DType::uint8) return;
  for (std::uint32_t c = 0; c < o.channels; ++c) {
    const xf::Affine n = o.normalize ? xf::normaliser(o.mean[c], o.std[c]) : xf::Affine{1.f / 255.f, 0.f};
    for (int v = 0; v < 256; ++v) {
      s.lut32[c][v] = xf::normalise(static_cast<std::uint8_t>(v), n);
      s.lut16[c][v] = xf::float_to_half(s.lut32[c][v]);
    }
  }
  s.lut_dtype = o.dtype;
  s.lut_normalize = o.normalize;
  s.lut_channels = o.channels;
  for (int c = 0; c < 3; ++c) {
    s.lut_mean[c] = o.mean[c];
    s.lut_std[c] = o.std[c];
  }
}

// Stores output row y (ow x oc uint8, HWC) in the batch slot's layout and dtype.
template <typename T>
void store_row(const std::uint8_t* line, std::size_t y, std::size_t ow, std::size_t hw, std::size_t oc, bool chw,
               const T (*lut)[256], T* d) {
  if (chw) {
    for (std::size_t c = 0; c < oc; ++c) {
      T* plane = d + c * hw + y * ow;
      for (std::size_t x = 0; x < ow; ++x) plane[x] = lut[c][line[x * oc + c]];
    }
  } else {
    T* row = d + y * ow * oc;
    for (std::size_t i = 0; i < ow * oc; ++i) row[i] = lut[i % oc][line[i]];
  }
}

void emit_row(const std::uint8_t* line, int y, const TransformOptions& o, const TransformScratch& s, void* dst) {
  const std::size_t ow = o.width, hw = std::size_t{o.width} * o.height, oc = o.channels;
  const bool chw = o.layout == Layout::chw && oc > 1;
  if (o.dtype == DType::uint8) {
    auto* d = static_cast<std::uint8_t*>(dst);
    if (!chw) {
      std::memcpy(d + static_cast<std::size_t>(y) * ow * oc, line, ow * oc);
    } else {
      for (std::size_t c = 0; c < oc; ++c)
        for (std::size_t x = 0; x < ow; ++x) d[c * hw + y * ow + x] = line[x * oc + c];
    }
  } else if (o.dtype == DType::float32) {
    store_row(line, static_cast<std::size_t>(y), ow, hw, oc, chw, s.lut32, static_cast<float*>(dst));
  } else {
    store_row(line, static_cast<std::size_t>(y), ow, hw, oc, chw, s.lut16, static_cast<std::uint16_t*>(dst));
  }
}

}  // namespace

void crop_resize(const ImageView& src, std::uint32_t origin_x, std::uint32_t origin_y, const ExamplePlan& plan,
                 const TransformOptions& o, TransformScratch& s, std::uint8_t* out) {
  const std::size_t row = std::size_t{o.width} * o.channels;
  resize_rows(src, origin_x, origin_y, plan, o, s, [&](int y, const std::uint8_t* line) {
    std::memcpy(out + static_cast<std::size_t>(y) * row, line, row);
  });
}

void crop_resize_assemble(const ImageView& src, std::uint32_t origin_x, std::uint32_t origin_y,
                          const ExamplePlan& plan, const TransformOptions& o, TransformScratch& s, void* dst) {
  prepare_lut(o, s);
  resize_rows(src, origin_x, origin_y, plan, o, s,
              [&](int y, const std::uint8_t* line) { emit_row(line, y, o, s, dst); });
}

void crop_resize_per_sample(const ImageView& src, std::uint32_t origin_x, std::uint32_t origin_y,
                            const ExamplePlan& plan, const TransformOptions& o, std::uint8_t* out) {
  check_source(src, origin_x, origin_y, plan, o);
  const std::size_t stride = src.stride ? src.stride : std::size_t{src.width} * src.channels;
  const int bx = plan.box.x - static_cast<int>(origin_x), by = plan.box.y - static_cast<int>(origin_y);
  const int ow = static_cast<int>(o.width), oh = static_cast<int>(o.height), oc = static_cast<int>(o.channels);
  const int xcap = xf::max_taps(plan.box.w, ow, o.antialias), ycap = xf::max_taps(plan.box.h, oh, o.antialias);
  std::vector<std::int32_t> xw(static_cast<std::size_t>(xcap)), yw(static_cast<std::size_t>(ycap));
  // One "thread" per output sample (y, x, c), as in a kernel grid.
  for (int y = 0; y < oh; ++y)
    for (int x = 0; x < ow; ++x)
      for (int c = 0; c < oc; ++c) {
        int xf0 = 0, yf0 = 0;
        const int xn = xf::resample_weights(plan.box.w, ow, x, o.antialias, xw.data(), xcap, &xf0);
        const int yn = xf::resample_weights(plan.box.h, oh, y, o.antialias, yw.data(), ycap, &yf0);
        const int dx = plan.flip ? ow - 1 - x : x;
        out[(static_cast<std::size_t>(y) * ow + dx) * oc + c] = xf::resample_sample(
            src.data, stride, static_cast<int>(src.channels), c, bx, by, xw.data(), xf0, xn, yw.data(), yf0, yn);
      }
}

void assemble(const std::uint8_t* hwc, const TransformOptions& o, void* dst) {
  const std::size_t hw = std::size_t{o.width} * o.height, ch = o.channels;
  if (o.dtype == DType::uint8) {
    auto* d = static_cast<std::uint8_t*>(dst);
    if (o.layout == Layout::hwc || ch == 1) {
      std::memcpy(d, hwc, hw * ch);
    } else {
      for (std::size_t c = 0; c < ch; ++c)
        for (std::size_t i = 0; i < hw; ++i) d[c * hw + i] = hwc[i * ch + c];
    }
    return;
  }
  xf::Affine n[3];
  for (std::size_t c = 0; c < ch; ++c)
    n[c] = o.normalize ? xf::normaliser(o.mean[c], o.std[c]) : xf::Affine{1.f / 255.f, 0.f};
  const bool chw = o.layout == Layout::chw;
  if (o.dtype == DType::float32) {
    auto* d = static_cast<float*>(dst);
    for (std::size_t i = 0; i < hw; ++i)
      for (std::size_t c = 0; c < ch; ++c) d[chw ? c * hw + i : i * ch + c] = xf::normalise(hwc[i * ch + c], n[c]);
  } else {
    auto* d = static_cast<std::uint16_t*>(dst);
    for (std::size_t i = 0; i < hw; ++i)
      for (std::size_t c = 0; c < ch; ++c)
        d[chw ? c * hw + i : i * ch + c] = xf::float_to_half(xf::normalise(hwc[i * ch + c], n[c]));
  }
}

void check_output_channels(std::uint32_t source_channels, std::uint32_t channels) {
  if (channels != 1 && channels != 3) throw_error(errc::invalid_argument, "output channels must be 1 or 3");
  if (channels == 1 && source_channels > 2)
    throw_error(errc::unsupported, "one output channel needs a gray image; this one has " +
                                       std::to_string(source_channels) + " channels");
}

void convert_channels(const ImageView& src, std::uint32_t channels, std::uint8_t* out) {
  check_output_channels(src.channels, channels);
  const std::size_t stride = src.stride ? src.stride : std::size_t{src.width} * src.channels;
  const int sch = static_cast<int>(src.channels);
  for (std::uint32_t y = 0; y < src.height; ++y) {
    const std::uint8_t* row = src.data + std::size_t{y} * stride;
    for (std::uint32_t x = 0; x < src.width; ++x)
      for (std::uint32_t c = 0; c < channels; ++c)
        *out++ = row[std::size_t{x} * src.channels + static_cast<std::size_t>(xf::source_channel(static_cast<int>(c), sch))];
  }
}

}  // namespace l3
