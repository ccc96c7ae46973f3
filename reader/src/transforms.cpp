#include "l3/reader/transforms.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "l3/common/cpu_features.hpp"
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

// The horizontal pass has a hand-written AVX2 twin (horizontal_pass_avx2),
// taken when the CPU has AVX2 and L3_MAX_ISA / L3_FORCE_SCALAR allow it (avx2_enabled()).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define L3_XF_HAVE_AVX2 1
#define L3_XF_AVX2 __attribute__((target("avx2")))
#else
#define L3_XF_HAVE_AVX2 0
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

// The channels the passes compute for a source of `sch` channels: the three
// colours (an alpha is dropped), or the gray that the output replicates
// (xf::source_channel).
constexpr int planes_of(int sch) { return sch >= 3 ? 3 : 1; }

// mid rows [r][j] (kRows rows, len values each) to columns [j][r] as uint32,
// so that the horizontal pass reads a column's rows as one vector. Rows the
// vertical pass did not write in a last, short group hold stale values: their
// lanes are computed and never emitted. (A uint32 whose high half is zero is
// also what the AVX2 pass's pmaddwd needs for an exact product.)
void transpose_rows(const std::uint16_t* mid, int len, std::uint32_t* __restrict cols) {
  int j = 0;
#if defined(__SSE2__)
  const __m128i zero = _mm_setzero_si128();
  for (; j + 8 <= len; j += 8) {
    __m128i r[kRows];
    for (int i = 0; i < kRows; ++i)
      r[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(mid + static_cast<std::size_t>(i) * len + j));
    // An 8 x 8 transpose of 16-bit values: column q ends in c[q].
    __m128i a[kRows], b[kRows], c[kRows];
    for (int i = 0; i < kRows; i += 2) {
      a[i / 2] = _mm_unpacklo_epi16(r[i], r[i + 1]);
      a[4 + i / 2] = _mm_unpackhi_epi16(r[i], r[i + 1]);
    }
    for (int h = 0; h < 2; ++h) {  // h: columns 0-3 or 4-7
      b[4 * h + 0] = _mm_unpacklo_epi32(a[4 * h + 0], a[4 * h + 1]);
      b[4 * h + 1] = _mm_unpackhi_epi32(a[4 * h + 0], a[4 * h + 1]);
      b[4 * h + 2] = _mm_unpacklo_epi32(a[4 * h + 2], a[4 * h + 3]);
      b[4 * h + 3] = _mm_unpackhi_epi32(a[4 * h + 2], a[4 * h + 3]);
      c[4 * h + 0] = _mm_unpacklo_epi64(b[4 * h + 0], b[4 * h + 2]);
      c[4 * h + 1] = _mm_unpackhi_epi64(b[4 * h + 0], b[4 * h + 2]);
      c[4 * h + 2] = _mm_unpacklo_epi64(b[4 * h + 1], b[4 * h + 3]);
      c[4 * h + 3] = _mm_unpackhi_epi64(b[4 * h + 1], b[4 * h + 3]);
    }
    for (int q = 0; q < kRows; ++q) {
      std::uint32_t* d = cols + static_cast<std::size_t>(j + q) * kRows;
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d), _mm_unpacklo_epi16(c[q], zero));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 4), _mm_unpackhi_epi16(c[q], zero));
    }
  }
#endif
  for (; j < len; ++j)
    for (int r = 0; r < kRows; ++r) cols[static_cast<std::size_t>(j) * kRows + r] = mid[static_cast<std::size_t>(r) * len + j];
}

// The output block of one group of kRows output rows: planes_of(sch) x kRows
// lines of `pitch` bytes (the output width rounded up to 8, so that the AVX2
// pass stores 8 columns at a time), line (c, r) at planes + (c * kRows + r) *
// pitch + offset. A flipped block is right-aligned in its lines (offset =
// pitch - width), where the AVX2 pass's reversed groups of 8 end.
struct Block {
  std::uint8_t* planes;
  std::size_t pitch, offset;
  Block(std::uint8_t* p, int width, bool flip)
      : planes(p),
        pitch((static_cast<std::size_t>(width) + 7) & ~std::size_t{7}),
        offset(flip ? pitch - static_cast<std::size_t>(width) : 0) {}
  std::uint8_t* line(int c, int r) const { return planes + static_cast<std::size_t>(c * kRows + r) * pitch + offset; }
};

// Horizontal pass of kRows output rows at once into a Block (`planes`: its
// line (0, 0)). `cols` (transpose_rows) starts at source column `col0`, SCH
// values of kRows rows per column. Vectorised across rows and channels:
// accumulator j = c * kRows + r is line (c, r) of the block.
template <int SCH>
L3_XF_CLONES void horizontal_pass(const std::uint32_t* cols, int col0, const AxisTable& x, int ow, bool flip,
                                  std::uint8_t* __restrict planes, std::size_t pitch) {
  constexpr int kLanes = SCH * kRows, kOut = planes_of(SCH) * kRows;
  for (int i = 0; i < ow; ++i) {
    const std::int32_t* w = &x.w[static_cast<std::size_t>(i) * x.cap];
    const int n = x.taps[i];
    const std::uint32_t* p = cols + static_cast<std::size_t>(x.first[i] - col0) * kLanes;
    std::int32_t acc[kOut] = {};
    for (int k = 0; k < n; ++k, p += kLanes) {
      const std::int32_t wk = w[k];
      for (int j = 0; j < kOut; ++j) acc[j] += wk * static_cast<std::int32_t>(p[j]);
    }
    const std::size_t dx = static_cast<std::size_t>(flip ? ow - 1 - i : i);
    for (int j = 0; j < kOut; ++j) planes[static_cast<std::size_t>(j) * pitch + dx] = xf::round_out(acc[j]);
  }
}

#if L3_XF_HAVE_AVX2
// r[i] (8 int32 each) becomes column i of the 8 x 8 matrix they form.
L3_XF_AVX2 inline void transpose8x8(__m256i r[8]) {
  __m256i t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int h = 0; h < 8; h += 4) {
    u[h + 0] = _mm256_unpacklo_epi64(t[h + 0], t[h + 2]);
    u[h + 1] = _mm256_unpackhi_epi64(t[h + 0], t[h + 2]);
    u[h + 2] = _mm256_unpacklo_epi64(t[h + 1], t[h + 3]);
    u[h + 3] = _mm256_unpackhi_epi64(t[h + 1], t[h + 3]);
  }
  for (int q = 0; q < 4; ++q) {
    r[q] = _mm256_permute2x128_si256(u[q], u[4 + q], 0x20);
    r[4 + q] = _mm256_permute2x128_si256(u[q], u[4 + q], 0x31);
  }
}

// The AVX2 twin of horizontal_pass (the same bytes): one column's kRows rows
// per register, products by pmaddwd (mid values and weights are below 2^15,
// the weights' high halves zero), then each 8 x 8 block of a channel's
// results transposed so that every line takes 8 bytes per store.
template <int SCH>
L3_XF_AVX2 void horizontal_pass_avx2(const std::uint32_t* cols, int col0, const AxisTable& x, int ow, bool flip,
                                     std::uint8_t* planes, std::size_t pitch) {
  constexpr int kLanes = SCH * kRows, NP = planes_of(SCH);
  const __m256i half = _mm256_set1_epi32(1 << (xf::kWeightBits + xf::kMidBits - 1));
  const __m256i dword_order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const __m256i reverse = _mm256_setr_epi8(7, 6, 5, 4, 3, 2, 1, 0, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1,
                                           0, 15, 14, 13, 12, 11, 10, 9, 8);
  for (int i0 = 0; i0 < ow; i0 += 8) {
    __m256i block[NP][8];
    for (int b = 0; b < 8; ++b) {
      const int i = i0 + b;
      __m256i acc[NP];
      for (int c = 0; c < NP; ++c) acc[c] = _mm256_setzero_si256();
      if (i < ow) {
        const std::int32_t* w = &x.w[static_cast<std::size_t>(i) * x.cap];
        const std::uint32_t* p = cols + static_cast<std::size_t>(x.first[i] - col0) * kLanes;
        for (int k = 0, n = x.taps[i]; k < n; ++k, p += kLanes) {
          const __m256i wk = _mm256_set1_epi32(w[k]);
          for (int c = 0; c < NP; ++c)
            acc[c] = _mm256_add_epi32(
                acc[c], _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + c * kRows)), wk));
        }
      }
      // xf::round_out; the sums are never negative and at most 255.5 * 2^21.
      for (int c = 0; c < NP; ++c)
        block[c][b] = _mm256_srli_epi32(_mm256_add_epi32(acc[c], half), xf::kWeightBits + xf::kMidBits);
    }
    const std::size_t x0 = flip ? pitch - static_cast<std::size_t>(i0) - 8 : static_cast<std::size_t>(i0);
    for (int c = 0; c < NP; ++c) {
      __m256i* r = block[c];
      transpose8x8(r);  // r[row] = that row's 8 columns
      for (int h = 0; h < 2; ++h) {
        // Rows 4h..4h+3 as 8 bytes each, in order (packus: lanes interleave).
        __m256i bytes = _mm256_packus_epi16(_mm256_packs_epi32(r[4 * h], r[4 * h + 1]),
                                            _mm256_packs_epi32(r[4 * h + 2], r[4 * h + 3]));
        bytes = _mm256_permutevar8x32_epi32(bytes, dword_order);
        if (flip) bytes = _mm256_shuffle_epi8(bytes, reverse);
        alignas(32) std::uint64_t rows[4];
        _mm256_store_si256(reinterpret_cast<__m256i*>(rows), bytes);
        for (int q = 0; q < 4; ++q)
          std::memcpy(planes + static_cast<std::size_t>(c * kRows + 4 * h + q) * pitch + x0, &rows[q], 8);
      }
    }
  }
}
#endif

// Runs the horizontal pass for `sch` source channels into `b`.
void horizontal_pass(const std::uint32_t* cols, int col0, int sch, const AxisTable& x, int ow, bool flip, Block& b) {
#if L3_XF_HAVE_AVX2
  if (avx2_enabled()) {  // whole groups of 8 columns from the lines' start
    switch (sch) {
      case 1: return horizontal_pass_avx2<1>(cols, col0, x, ow, flip, b.planes, b.pitch);
      case 2: return horizontal_pass_avx2<2>(cols, col0, x, ow, flip, b.planes, b.pitch);
      case 3: return horizontal_pass_avx2<3>(cols, col0, x, ow, flip, b.planes, b.pitch);
      default: return horizontal_pass_avx2<4>(cols, col0, x, ow, flip, b.planes, b.pitch);
    }
  }
#endif
  switch (sch) {
    case 1: return horizontal_pass<1>(cols, col0, x, ow, flip, b.line(0, 0), b.pitch);
    case 2: return horizontal_pass<2>(cols, col0, x, ow, flip, b.line(0, 0), b.pitch);
    case 3: return horizontal_pass<3>(cols, col0, x, ow, flip, b.line(0, 0), b.pitch);
    default: return horizontal_pass<4>(cols, col0, x, ow, flip, b.line(0, 0), b.pitch);
  }
}

// One output row by copy (the box has the output size: the weights are
// exactly one), into row 0 of a Block.
void copy_row(const std::uint8_t* row, int sch, int ow, bool flip, Block& b) {
  for (int c = 0; c < planes_of(sch); ++c) {
    std::uint8_t* d = b.line(c, 0);
    for (int i = 0; i < ow; ++i) d[flip ? ow - 1 - i : i] = row[static_cast<std::size_t>(i) * sch + c];
  }
}

// Output row y as one uint8 line per output channel (a gray source's line
// stands for all three).
struct RowLines {
  const std::uint8_t* c[3];
};

RowLines row_lines(const Block& b, int r, int sch, int oc) {
  RowLines l{};
  for (int c = 0; c < oc; ++c) l.c[c] = b.line(xf::source_channel(c, sch), r);
  return l;
}

// Runs crop + resize + flip kRows output rows at a time; emit(y, lines)
// receives each output row (RowLines, ow bytes per channel) while it is in
// the cache.
template <typename Emit>
void resize_rows(const ImageView& src, std::uint32_t origin_x, std::uint32_t origin_y, const ExamplePlan& plan,
                 const TransformOptions& o, TransformScratch& s, Emit&& emit) {
  check_source(src, origin_x, origin_y, plan, o);
  const std::size_t stride = src.stride ? src.stride : std::size_t{src.width} * src.channels;
  const int sch = static_cast<int>(src.channels);
  const int bx = plan.box.x - static_cast<int>(origin_x), by = plan.box.y - static_cast<int>(origin_y);
  const int ow = static_cast<int>(o.width), oh = static_cast<int>(o.height), oc = static_cast<int>(o.channels);
  Block block(nullptr, ow, plan.flip);
  s.planes.resize(static_cast<std::size_t>(planes_of(sch)) * kRows * block.pitch);
  block.planes = s.planes.data();
  if (plan.box.w == ow && plan.box.h == oh) {  // no scaling
    for (int y = 0; y < oh; ++y) {
      copy_row(src.data + static_cast<std::size_t>(by + y) * stride + static_cast<std::size_t>(bx) * sch, sch, ow,
               plan.flip, block);
      emit(y, row_lines(block, 0, sch, oc));
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
  const std::uint8_t* base = src.data + static_cast<std::size_t>(bx + col0) * sch;
  for (int y0 = 0; y0 < oh; y0 += kRows) {
    const int rows = std::min(kRows, oh - y0);
    for (int r = 0; r < rows; ++r) {
      const int y = y0 + r;
      vertical_pass(base + static_cast<std::size_t>(by + s.y.first[y]) * stride, stride,
                    &s.y.w[static_cast<std::size_t>(y) * s.y.cap], s.y.taps[y], len, s.acc.data(),
                    &s.mid[static_cast<std::size_t>(r) * len]);
    }
    transpose_rows(s.mid.data(), len, s.cols.data());
    horizontal_pass(s.cols.data(), col0, sch, s.x, ow, plan.flip, block);
    for (int r = 0; r < rows; ++r) emit(y0 + r, row_lines(block, r, sch, oc));
  }
}

// The normalisation of each output channel, and the float16 value of each
// uint8, as assemble() computes them.
void prepare_normalisation(const TransformOptions& o, TransformScratch& s) {
  bool same = s.lut_dtype == o.dtype && s.lut_normalize == o.normalize && s.lut_channels == o.channels;
  for (int c = 0; c < 3 && same; ++c) same = s.lut_mean[c] == o.mean[c] && s.lut_std[c] == o.std[c];
  if (same || o.dtype == DType::uint8) return;
  for (std::uint32_t c = 0; c < o.channels; ++c) {
    const xf::Affine n = o.normalize ? xf::normaliser(o.mean[c], o.std[c]) : xf::Affine{1.f / 255.f, 0.f};
    s.affine_a[c] = n.a;
    s.affine_b[c] = n.b;
    for (int v = 0; v < 256; ++v) s.lut16[c][v] = xf::float_to_half(xf::normalise(static_cast<std::uint8_t>(v), n));
  }
  s.lut_dtype = o.dtype;
  s.lut_normalize = o.normalize;
  s.lut_channels = o.channels;
  for (int c = 0; c < 3; ++c) {
    s.lut_mean[c] = o.mean[c];
    s.lut_std[c] = o.std[c];
  }
}

// d[x] = xf::normalise(line[x]) for one plane row. Built with
// -ffp-contract=off (reader/CMakeLists.txt): a multiply, then an add, as
// assemble() and the CUDA kernels (--fmad=false) compute it.
L3_XF_CLONES void normalise_line(const std::uint8_t* __restrict line, std::size_t n, float a, float b,
                                 float* __restrict d) {
  for (std::size_t x = 0; x < n; ++x) d[x] = static_cast<float>(line[x]) * a + b;
}

#if L3_XF_HAVE_AVX2
// normalise_line with streaming stores, for lines of whole groups of 8 at a
// 32-byte boundary: a float32 batch (38.5 MB at 64 x 3 x 224 x 224) is far
// larger than the caches and read by its consumer later, so its lines skip
// the caches (no read for ownership). The same multiply, then add; the
// caller fences (stream_fence) before the slot is handed over.
L3_XF_AVX2 void normalise_line_stream(const std::uint8_t* __restrict line, std::size_t n, float a, float b,
                                      float* __restrict d) {
  const __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
  for (std::size_t x = 0; x < n; x += 8) {
    const __m128i px = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(line + x));
    const __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(px));
    _mm256_stream_ps(d + x, _mm256_add_ps(_mm256_mul_ps(f, va), vb));
  }
}
#endif

// Lines of float32 CHW output: streamed when they can be (normalise_line_stream).
bool normalise_line_any(const std::uint8_t* line, std::size_t n, float a, float b, float* d) {
#if L3_XF_HAVE_AVX2
  if (n % 8 == 0 && reinterpret_cast<std::uintptr_t>(d) % 32 == 0 && avx2_enabled()) {
    normalise_line_stream(line, n, a, b, d);
    return true;
  }
#endif
  normalise_line(line, n, a, b, d);
  return false;
}

// Orders streaming stores before the stores that hand the slot over.
void stream_fence() {
#if L3_XF_HAVE_AVX2
  _mm_sfence();
#endif
}

// Stores output row y in the batch slot's layout and dtype.
void emit_row(const RowLines& l, int y, const TransformOptions& o, const TransformScratch& s, void* dst) {
  const std::size_t ow = o.width, hw = std::size_t{o.width} * o.height, oc = o.channels;
  const std::size_t row = static_cast<std::size_t>(y) * ow;
  const bool chw = o.layout == Layout::chw || oc == 1;
  if (o.dtype == DType::uint8) {
    auto* d = static_cast<std::uint8_t*>(dst);
    for (std::size_t c = 0; c < oc; ++c) {
      if (chw) {
        std::memcpy(d + c * hw + row, l.c[c], ow);
      } else {
        for (std::size_t x = 0; x < ow; ++x) d[(row + x) * oc + c] = l.c[c][x];
      }
    }
  } else if (o.dtype == DType::float32) {
    auto* d = static_cast<float*>(dst);
    for (std::size_t c = 0; c < oc; ++c) {
      if (chw) {
        normalise_line_any(l.c[c], ow, s.affine_a[c], s.affine_b[c], d + c * hw + row);
      } else {
        const xf::Affine n{s.affine_a[c], s.affine_b[c]};
        for (std::size_t x = 0; x < ow; ++x) d[(row + x) * oc + c] = xf::normalise(l.c[c][x], n);
      }
    }
  } else {
    auto* d = static_cast<std::uint16_t*>(dst);
    for (std::size_t c = 0; c < oc; ++c)
      for (std::size_t x = 0; x < ow; ++x) d[chw ? c * hw + row + x : (row + x) * oc + c] = s.lut16[c][l.c[c][x]];
  }
}

}  // namespace

void crop_resize(const ImageView& src, std::uint32_t origin_x, std::uint32_t origin_y, const ExamplePlan& plan,
                 const TransformOptions& o, TransformScratch& s, std::uint8_t* out) {
  TransformOptions hwc = o;  // emit_row's uint8 HWC layout
  hwc.dtype = DType::uint8;
  hwc.layout = Layout::hwc;
  resize_rows(src, origin_x, origin_y, plan, o, s,
              [&](int y, const RowLines& l) { emit_row(l, y, hwc, s, out); });
}

void crop_resize_assemble(const ImageView& src, std::uint32_t origin_x, std::uint32_t origin_y,
                          const ExamplePlan& plan, const TransformOptions& o, TransformScratch& s, void* dst) {
  prepare_normalisation(o, s);
  resize_rows(src, origin_x, origin_y, plan, o, s, [&](int y, const RowLines& l) { emit_row(l, y, o, s, dst); });
  if (o.dtype == DType::float32) stream_fence();
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
