#include "l3/transforms.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "l3/error.hpp"

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

// Weight tables of one axis: `cap` weights per output sample.
void axis_tables(int in_len, int out_len, bool antialias, std::vector<float>& w, std::vector<int>& first,
                 std::vector<int>& taps, int& cap) {
  cap = xf::max_taps(in_len, out_len, antialias);
  w.resize(static_cast<std::size_t>(out_len) * static_cast<std::size_t>(cap));
  first.resize(static_cast<std::size_t>(out_len));
  taps.resize(static_cast<std::size_t>(out_len));
  for (int i = 0; i < out_len; ++i)
    taps[i] = xf::resample_weights(in_len, out_len, i, antialias, &w[static_cast<std::size_t>(i) * cap], cap, &first[i]);
}

void check_source(const ImageView& src, std::uint32_t ox, std::uint32_t oy, const ExamplePlan& plan,
                  const TransformOptions& o) {
  const xf::Box& b = plan.box;
  if (b.w <= 0 || b.h <= 0 || b.x < static_cast<std::int64_t>(ox) || b.y < static_cast<std::int64_t>(oy) ||
      std::int64_t{b.x} + b.w > std::int64_t{ox} + src.width || std::int64_t{b.y} + b.h > std::int64_t{oy} + src.height)
    throw_error(errc::out_of_range, "crop box outside the decoded region");
  check_output_channels(src.channels, o.channels);
}

void flip_rows(std::uint8_t* out, std::uint32_t width, std::uint32_t height, std::uint32_t channels) {
  for (std::uint32_t y = 0; y < height; ++y) {
    std::uint8_t* row = out + std::size_t{y} * width * channels;
    for (std::uint32_t a = 0, b = width - 1; a < b; ++a, --b)
      for (std::uint32_t c = 0; c < channels; ++c) std::swap(row[a * channels + c], row[b * channels + c]);
  }
}

}  // namespace

void crop_resize(const ImageView& src, std::uint32_t origin_x, std::uint32_t origin_y, const ExamplePlan& plan,
                 const TransformOptions& o, TransformScratch& s, std::uint8_t* out) {
  check_source(src, origin_x, origin_y, plan, o);
  const std::size_t stride = src.stride ? src.stride : std::size_t{src.width} * src.channels;
  const int sch = static_cast<int>(src.channels);
  const int bx = plan.box.x - static_cast<int>(origin_x), by = plan.box.y - static_cast<int>(origin_y);
  const int ow = static_cast<int>(o.width), oh = static_cast<int>(o.height), oc = static_cast<int>(o.channels);
  // Channels actually computed: a gray source is resampled once and replicated.
  const int cc = sch >= 3 ? oc : 1;

  if (plan.box.w == ow && plan.box.h == oh) {  // no scaling: the weights are exactly {1}
    for (int y = 0; y < oh; ++y) {
      const std::uint8_t* row = src.data + static_cast<std::size_t>(by + y) * stride;
      std::uint8_t* dst = out + static_cast<std::size_t>(y) * ow * oc;
      for (int x = 0; x < ow; ++x)
        for (int c = 0; c < oc; ++c)
          dst[x * oc + c] = row[static_cast<std::size_t>(bx + x) * sch + xf::source_channel(c, sch)];
    }
  } else {
    axis_tables(plan.box.w, ow, o.antialias, s.xw, s.xfirst, s.xtaps, s.xcap);
    axis_tables(plan.box.h, oh, o.antialias, s.yw, s.yfirst, s.ytaps, s.ycap);
    // Rows of the box any output row reads.
    const int r0 = s.yfirst[0], r1 = s.yfirst[oh - 1] + s.ytaps[oh - 1];
    const std::size_t row_len = static_cast<std::size_t>(ow) * cc;
    s.rows.resize(static_cast<std::size_t>(r1 - r0) * row_len);
    // Horizontal pass (same operations, same order as xf::resample_sample).
    for (int r = r0; r < r1; ++r) {
      const std::uint8_t* row = src.data + static_cast<std::size_t>(by + r) * stride;
      float* dst = &s.rows[static_cast<std::size_t>(r - r0) * row_len];
      for (int x = 0; x < ow; ++x) {
        const float* w = &s.xw[static_cast<std::size_t>(x) * s.xcap];
        const int n = s.xtaps[x];
        const std::uint8_t* p = row + static_cast<std::size_t>(bx + s.xfirst[x]) * sch;
        for (int c = 0; c < cc; ++c) {
          const int sc = xf::source_channel(c, sch);
          float h = 0.f;
          for (int k = 0; k < n; ++k) h += w[k] * static_cast<float>(p[k * sch + sc]);
          dst[x * cc + c] = h;
        }
      }
    }
    // Vertical pass.
    for (int y = 0; y < oh; ++y) {
      const float* w = &s.yw[static_cast<std::size_t>(y) * s.ycap];
      const int n = s.ytaps[y];
      const float* base = &s.rows[static_cast<std::size_t>(s.yfirst[y] - r0) * row_len];
      std::uint8_t* dst = out + static_cast<std::size_t>(y) * ow * oc;
      for (int x = 0; x < ow; ++x) {
        for (int c = 0; c < cc; ++c) {
          float acc = 0.f;
          for (int k = 0; k < n; ++k) acc += w[k] * base[static_cast<std::size_t>(k) * row_len + x * cc + c];
          const std::uint8_t v = xf::round_to_u8(acc);
          if (cc == oc) {
            dst[x * oc + c] = v;
          } else {
            for (int d = 0; d < oc; ++d) dst[x * oc + d] = v;
          }
        }
      }
    }
  }
  if (plan.flip) flip_rows(out, o.width, o.height, o.channels);
}

void crop_resize_per_sample(const ImageView& src, std::uint32_t origin_x, std::uint32_t origin_y,
                            const ExamplePlan& plan, const TransformOptions& o, std::uint8_t* out) {
  check_source(src, origin_x, origin_y, plan, o);
  const std::size_t stride = src.stride ? src.stride : std::size_t{src.width} * src.channels;
  const int bx = plan.box.x - static_cast<int>(origin_x), by = plan.box.y - static_cast<int>(origin_y);
  const int ow = static_cast<int>(o.width), oh = static_cast<int>(o.height), oc = static_cast<int>(o.channels);
  const int xcap = xf::max_taps(plan.box.w, ow, o.antialias), ycap = xf::max_taps(plan.box.h, oh, o.antialias);
  std::vector<float> xw(static_cast<std::size_t>(xcap)), yw(static_cast<std::size_t>(ycap));
  // One "thread" per output sample (y, x, c), as in a kernel grid.
  for (int y = 0; y < oh; ++y)
    for (int x = 0; x < ow; ++x)
      for (int c = 0; c < oc; ++c) {
        int xf0 = 0, yf0 = 0;
        const int xn = xf::resample_weights(plan.box.w, ow, x, o.antialias, xw.data(), xcap, &xf0);
        const int yn = xf::resample_weights(plan.box.h, oh, y, o.antialias, yw.data(), ycap, &yf0);
        const float v = xf::resample_sample(src.data, stride, static_cast<int>(src.channels), c, bx, by, xw.data(),
                                            xf0, xn, yw.data(), yf0, yn);
        const int dx = plan.flip ? ow - 1 - x : x;
        out[(static_cast<std::size_t>(y) * ow + dx) * oc + c] = xf::round_to_u8(v);
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
