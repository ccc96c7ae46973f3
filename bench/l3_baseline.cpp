#include "l3_baseline.hpp"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace l3bench {
namespace {

constexpr std::size_t kHeaderSize = 16;

// PNG's Paeth function on (a, b, c) = (upper-left, up, upper-right), as L3 applies it.
inline int paeth(int a, int b, int c) {
  const int p = a + b - c;
  const int pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  if (pa <= pb && pa <= pc) return a;
  if (pb <= pc) return b;
  return c;
}

// A residual mod 256 as the signed byte the reference code stores (char): -128..127.
inline int to_int8(int v) { return static_cast<int>(static_cast<std::int8_t>(static_cast<std::uint8_t>(v & 255))); }

// Neighbours outside the patch read as `up` (L3BaselineEdge::replicate) or 0 (zero).
inline int predict(const std::uint8_t* above, std::uint32_t x, std::uint32_t pw, std::size_t step, bool zero) {
  const int up = above[x * step];
  const int edge = zero ? 0 : up;
  const int ul = x > 0 ? above[(x - 1) * step] : edge;
  const int ur = x + 1 < pw ? above[(x + 1) * step] : edge;
  return paeth(ul, up, ur);
}

struct BitWriter {
  std::vector<std::uint8_t>& out;
  std::uint64_t acc = 0;
  unsigned n = 0;
  void put(std::uint32_t v, unsigned bits) {
    acc |= std::uint64_t{v} << n;
    n += bits;
    while (n >= 8) {
      out.push_back(static_cast<std::uint8_t>(acc));
      acc >>= 8;
      n -= 8;
    }
  }
  void align() {
    if (n > 0) put(0, 8 - n);
  }
};

struct BitReader {
  std::span<const std::uint8_t> in;
  std::size_t pos;
  std::uint64_t acc = 0;
  unsigned n = 0;
  std::uint32_t get(unsigned bits) {
    while (n < bits) {
      if (pos >= in.size()) throw std::runtime_error("l3 baseline: truncated patch");
      acc |= std::uint64_t{in[pos++]} << n;
      n += 8;
    }
    const std::uint32_t v = static_cast<std::uint32_t>(acc & ((std::uint64_t{1} << bits) - 1));
    acc >>= bits;
    n -= bits;
    return v;
  }
  void align() {
    acc = 0;
    n = 0;
  }
};

void put_u32(std::vector<std::uint8_t>& v, std::size_t at, std::uint32_t x) {
  for (int i = 0; i < 4; ++i) v[at + static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(x >> (8 * i));
}
std::uint32_t get_u32(std::span<const std::uint8_t> v, std::size_t at) {
  std::uint32_t x = 0;
  for (int i = 0; i < 4; ++i) x |= std::uint32_t{v[at + static_cast<std::size_t>(i)]} << (8 * i);
  return x;
}

struct Geometry {
  std::uint32_t w, h, c, p, px, py;
  std::size_t patches() const { return std::size_t{px} * py * c; }
};

Geometry geometry(std::uint32_t w, std::uint32_t h, std::uint32_t c, std::uint32_t p) {
  return {w, h, c, p, (w + p - 1) / p, (h + p - 1) / p};
}

// Encodes one patch of one plane. `src` points at the patch's first sample in the interleaved image.
void encode_patch(const std::uint8_t* src, std::size_t stride, std::size_t step, std::uint32_t pw,
                  std::uint32_t ph, bool zero, std::vector<std::uint8_t>& out) {
  BitWriter bw{out};
  for (std::uint32_t x = 0; x < pw; ++x) bw.put(src[x * step], 8);
  int res[64];
  for (std::uint32_t y = 1; y < ph; ++y) {
    const std::uint8_t* row = src + stride * y;
    const std::uint8_t* above = row - stride;
    int lo = 127, hi = -128;
    for (std::uint32_t x = 0; x < pw; ++x) {
      res[x] = to_int8(row[x * step] - predict(above, x, pw, step, zero));
      lo = std::min(lo, res[x]);
      hi = std::max(hi, res[x]);
    }
    const unsigned width = static_cast<unsigned>(std::bit_width(static_cast<unsigned>(hi - lo)));
    bw.put(width, 4);
    bw.put(static_cast<std::uint8_t>(lo), 8);
    if (width > 0)
      for (std::uint32_t x = 0; x < pw; ++x) bw.put(static_cast<std::uint32_t>(res[x] - lo), width);
    bw.align();  // one byte-aligned record per row
  }
  bw.align();
}

void decode_patch(BitReader& br, std::uint8_t* dst, std::size_t stride, std::size_t step, std::uint32_t pw,
                  std::uint32_t ph, bool zero) {
  for (std::uint32_t x = 0; x < pw; ++x) dst[x * step] = static_cast<std::uint8_t>(br.get(8));
  for (std::uint32_t y = 1; y < ph; ++y) {
    std::uint8_t* row = dst + stride * y;
    const std::uint8_t* above = row - stride;
    const unsigned width = br.get(4);
    if (width > 8) throw std::runtime_error("l3 baseline: bad row width");
    const int base = to_int8(static_cast<int>(br.get(8)));
    for (std::uint32_t x = 0; x < pw; ++x) {
      const int r = base + (width > 0 ? static_cast<int>(br.get(width)) : 0);
      row[x * step] = static_cast<std::uint8_t>(r + predict(above, x, pw, step, zero));
    }
    br.align();
  }
}

}  // namespace

std::uint32_t l3_baseline_patch_size(std::uint32_t width, std::uint32_t height) {
  return (width < 256 || height < 256) ? 32 : 64;
}

std::vector<std::uint8_t> l3_baseline_encode(const std::uint8_t* pixels, std::uint32_t width,
                                             std::uint32_t height, std::uint32_t channels, L3BaselineEdge edge) {
  const bool zero = edge == L3BaselineEdge::zero;
  if (channels < 1 || channels > 4 || width == 0 || height == 0)
    throw std::invalid_argument("l3 baseline: bad image shape");
  const Geometry g = geometry(width, height, channels, l3_baseline_patch_size(width, height));
  const std::size_t table = kHeaderSize;
  const std::size_t payload = table + 4 * g.patches();
  std::vector<std::uint8_t> out(payload, 0);
  out[0] = 'L', out[1] = '3', out[2] = 'B', out[3] = 'L';
  put_u32(out, 4, width);
  put_u32(out, 8, height);
  out[12] = static_cast<std::uint8_t>(channels);
  out[13] = zero ? 1 : 0;
  out[14] = static_cast<std::uint8_t>(g.p);
  const std::size_t stride = std::size_t{width} * channels;
  std::size_t k = 0;
  for (std::uint32_t c = 0; c < channels; ++c)
    for (std::uint32_t ty = 0; ty < g.py; ++ty)
      for (std::uint32_t tx = 0; tx < g.px; ++tx, ++k) {
        put_u32(out, table + 4 * k, static_cast<std::uint32_t>(out.size() - payload));
        const std::uint32_t x0 = tx * g.p, y0 = ty * g.p;
        const std::uint32_t pw = std::min(g.p, width - x0), ph = std::min(g.p, height - y0);
        encode_patch(pixels + stride * y0 + std::size_t{x0} * channels + c, stride, channels, pw, ph, zero, out);
      }
  return out;
}

std::vector<std::uint8_t> l3_baseline_decode(std::span<const std::uint8_t> in, std::uint32_t* width,
                                             std::uint32_t* height, std::uint32_t* channels) {
  if (in.size() < kHeaderSize || in[0] != 'L' || in[1] != '3' || in[2] != 'B' || in[3] != 'L')
    throw std::runtime_error("l3 baseline: bad header");
  const std::uint32_t w = get_u32(in, 4), h = get_u32(in, 8), ch = in[12], p = in[14];
  const bool zero = in[13] == 1;
  if (w == 0 || h == 0 || ch < 1 || ch > 4 || p != l3_baseline_patch_size(w, h) || w > 65535 || h > 65535 ||
      in[13] > 1 || in[15] != 0)
    throw std::runtime_error("l3 baseline: bad header fields");
  const Geometry g = geometry(w, h, ch, p);
  const std::size_t payload = kHeaderSize + 4 * g.patches();
  if (in.size() < payload) throw std::runtime_error("l3 baseline: truncated table");
  std::vector<std::uint8_t> px(std::size_t{w} * h * ch);
  const std::size_t stride = std::size_t{w} * ch;
  std::size_t k = 0;
  for (std::uint32_t c = 0; c < ch; ++c)
    for (std::uint32_t ty = 0; ty < g.py; ++ty)
      for (std::uint32_t tx = 0; tx < g.px; ++tx, ++k) {
        // Patches are located through the table only, as a parallel decoder would.
        BitReader br{in, payload + get_u32(in, kHeaderSize + 4 * k)};
        const std::uint32_t x0 = tx * p, y0 = ty * p;
        const std::uint32_t pw = std::min(p, w - x0), ph = std::min(p, h - y0);
        decode_patch(br, px.data() + stride * y0 + std::size_t{x0} * ch + c, stride, ch, pw, ph, zero);
      }
  *width = w;
  *height = h;
  *channels = ch;
  return px;
}

std::size_t l3_baseline_encoded_size(const std::uint8_t* pixels, std::uint32_t width, std::uint32_t height,
                                     std::uint32_t channels, L3BaselineEdge edge) {
  return l3_baseline_encode(pixels, width, height, channels, edge).size();
}

}  // namespace l3bench
