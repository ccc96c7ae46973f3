// The CUDA batch decoder against the CPU decoder, bit for bit (label gpu).
// Without a CUDA device every case is skipped (doctest reports it skipped, and
// the line "L3_GPU_SKIPPED" makes ctest report the test skipped, not passed).
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "l3/codec/codec.hpp"
#include "l3/codec/tile_constants.hpp"
#include "l3/cuda/batch_decoder.hpp"
#include "l3/imageio/image_io.hpp"
#include "test_coded_tiles.hpp"
#include "test_tile_pattern.hpp"

namespace {

using Pixels = std::vector<std::uint8_t>;
using l3::cuda::Layout;

bool no_gpu() {
  static const bool none = [] {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
      std::printf("L3_GPU_SKIPPED: no CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
      return true;
    }
    return false;
  }();
  return none;
}

void ok(cudaError_t e) { REQUIRE_MESSAGE(e == cudaSuccess, cudaGetErrorString(e)); }

struct Img {
  std::uint32_t w, h, ch;
  Pixels px;
};

Img make_image(std::mt19937& rng, std::uint32_t w, std::uint32_t h, std::uint32_t ch, int style) {
  Img im{w, h, ch, Pixels(std::size_t(w) * h * ch)};
  std::uniform_int_distribution<int> byte(0, 255);
  for (std::uint32_t y = 0; y < h; ++y)
    for (std::uint32_t x = 0; x < w; ++x)
      for (std::uint32_t c = 0; c < ch; ++c) {
        int v;
        switch (style % 4) {
          case 0: v = byte(rng); break;
          case 1: v = int((x * 3 + y * 5 + c * 40) & 255) + byte(rng) % 7 - 3; break;
          case 2: v = ((x / 8 + y / 6) % 3) * 100; break;  // flat areas: constant tiles, zero runs
          default: v = int((x ^ y) + c * 11) + byte(rng) % 3; break;
        }
        im.px[(std::size_t(y) * w + x) * ch + c] = std::uint8_t(std::clamp(v, 0, 255));
      }
  return im;
}

// Rows the encoder stores as zero rows (spec §4.3): a mid-gray row every 32,
// rows that repeat the row above (also every third row when `more`), each
// 32-row tile's last row among them.
Img with_zero_rows(Img im, bool more = false) {
  const std::size_t row = std::size_t(im.w) * im.ch;
  for (std::uint32_t y = 0; y < im.h; ++y) {
    std::uint8_t* p = &im.px[y * row];
    if (y % 32 == 0) std::fill(p, p + row, std::uint8_t(128));
    else if (y % 5 == 1 || y % 7 == 4 || (more && y % 3 == 2) || y % 32 == 31) std::copy(p - row, p, p);
  }
  return im;
}

std::vector<std::uint8_t> encode(const Img& im, std::uint32_t tw, std::uint32_t th) {
  l3::EncodeOptions o;
  o.tile_width = tw;
  o.tile_height = th;
  return l3::encode({im.px.data(), im.w, im.h, im.ch, 0}, o);
}

// The expected slot: l3::decode / decode_region, transposed for CHW.
Pixels expected(const std::vector<std::uint8_t>& enc, const std::optional<l3::Rect>& crop, Layout layout) {
  l3::ImageInfo info = l3::read_info(enc);
  const l3::Rect r = crop ? *crop : l3::Rect{0, 0, info.width, info.height};
  Pixels hwc(std::size_t(r.width) * r.height * info.channels);
  l3::decode_region(enc, r, {hwc.data(), r.width, r.height, info.channels, 0});
  if (layout == Layout::hwc) return hwc;
  Pixels chw(hwc.size());
  const std::size_t plane = std::size_t(r.width) * r.height;
  for (std::size_t p = 0; p < plane; ++p)
    for (std::uint32_t c = 0; c < info.channels; ++c) chw[c * plane + p] = hwc[p * info.channels + c];
  return chw;
}

Pixels to_host(const std::uint8_t* d, std::uint64_t n) {
  Pixels h(n);
  if (n) ok(cudaMemcpy(h.data(), d, n, cudaMemcpyDeviceToHost));
  return h;
}

std::vector<std::int32_t> statuses(const l3::cuda::BatchResult& r) {
  std::vector<std::int32_t> s(r.slots.size());
  if (!s.empty()) ok(cudaMemcpy(s.data(), r.d_status, s.size() * 4, cudaMemcpyDeviceToHost));
  return s;
}

// Checks every slot of a finished batch against the CPU decoder.
void check_batch(const std::vector<std::vector<std::uint8_t>>& streams, const std::vector<std::optional<l3::Rect>>& crops,
                 const l3::cuda::BatchResult& r, Layout layout, const std::uint8_t* d_out = nullptr) {
  const Pixels all = to_host(d_out ? d_out : r.d_output, r.output_bytes);
  const auto st = statuses(r);
  REQUIRE(r.slots.size() == streams.size());
  for (std::size_t i = 0; i < streams.size(); ++i) {
    INFO("image " << i);
    l3::errc want = l3::errc::ok;
    Pixels ref;
    try {
      ref = expected(streams[i], crops[i], layout);
    } catch (const l3::Error& e) {
      want = e.code();
    }
    CHECK(st[i] == static_cast<int>(want));
    if (want != l3::errc::ok) continue;
    REQUIRE(r.slots[i].size == ref.size());
    CHECK(Pixels(all.begin() + std::ptrdiff_t(r.slots[i].offset),
                 all.begin() + std::ptrdiff_t(r.slots[i].offset + r.slots[i].size)) == ref);
  }
}

// One batch with crops, decoded in both layouts on a fresh stream, each checked against l3::decode.
void decode_and_check_both_layouts(const std::vector<std::vector<std::uint8_t>>& streams,
                                   const std::vector<std::optional<l3::Rect>>& crops) {
  cudaStream_t stream;
  ok(cudaStreamCreate(&stream));
  l3::cuda::BatchDecoder dec;
  std::vector<l3::cuda::HostImage> batch;
  for (std::size_t i = 0; i < streams.size(); ++i) batch.push_back({streams[i], crops[i]});
  for (Layout layout : {Layout::hwc, Layout::chw}) {
    l3::cuda::BatchOptions opt;
    opt.layout = layout;
    const auto r = dec.decode(batch, opt, stream);
    ok(cudaStreamSynchronize(stream));
    check_batch(streams, crops, r, layout);
  }
  ok(cudaStreamDestroy(stream));
}

}  // namespace

TEST_CASE("GPU: odd sizes, all channel counts, both layouts" * doctest::skip(no_gpu())) {
  std::mt19937 rng(5);
  std::vector<std::vector<std::uint8_t>> streams;
  const std::pair<std::uint32_t, std::uint32_t> sizes[] = {{1, 1}, {1, 50}, {61, 1}, {17, 33}, {64, 32}, {255, 97}, {300, 70}};
  const std::uint32_t tws[] = {16, 32, 64, 128, 256};
  const std::uint32_t ths[] = {1, 7, 32};
  int k = 0;
  for (std::uint32_t ch = 1; ch <= 4; ++ch)
    for (auto [w, h] : sizes) {
      streams.push_back(encode(make_image(rng, w, h, ch, k), tws[k % 5], ths[k % 3]));
      ++k;
    }
  std::vector<l3::cuda::HostImage> batch;
  for (auto& s : streams) batch.push_back({s, std::nullopt});
  std::vector<std::optional<l3::Rect>> crops(streams.size());
  cudaStream_t stream;
  ok(cudaStreamCreate(&stream));
  l3::cuda::BatchDecoder dec;
  for (Layout layout : {Layout::hwc, Layout::chw}) {
    l3::cuda::BatchOptions opt;
    opt.layout = layout;
    const auto r = dec.decode(batch, opt, stream);
    const auto host_status = dec.status();
    CHECK(std::all_of(host_status.begin(), host_status.end(), [](l3::errc e) { return e == l3::errc::ok; }));
    check_batch(streams, crops, r, layout);
  }
  ok(cudaStreamDestroy(stream));
}

TEST_CASE("GPU: crops, device-resident inputs, caller output" * doctest::skip(no_gpu())) {
  std::mt19937 rng(11);
  std::vector<std::vector<std::uint8_t>> streams;
  std::vector<std::optional<l3::Rect>> crops;
  for (int i = 0; i < 24; ++i) {
    const std::uint32_t w = 40 + std::uint32_t(i) * 13, h = 20 + std::uint32_t(i) * 7, ch = std::uint32_t(i % 4) + 1;
    streams.push_back(encode(make_image(rng, w, h, ch, i), 32, i % 2 ? 7 : 32));
    l3::Rect r;
    r.x = std::uniform_int_distribution<std::uint32_t>(0, w - 1)(rng);
    r.y = std::uniform_int_distribution<std::uint32_t>(0, h - 1)(rng);
    r.width = std::uniform_int_distribution<std::uint32_t>(1, w - r.x)(rng);
    r.height = std::uniform_int_distribution<std::uint32_t>(1, h - r.y)(rng);
    crops.push_back(i % 5 == 0 ? std::nullopt : std::optional<l3::Rect>(r));
  }
  cudaStream_t stream;
  ok(cudaStreamCreate(&stream));
  l3::cuda::BatchDecoder dec;
  // Host inputs with crops.
  std::vector<l3::cuda::HostImage> batch;
  for (std::size_t i = 0; i < streams.size(); ++i) batch.push_back({streams[i], crops[i]});
  auto r = dec.decode(batch, {}, stream);
  ok(cudaStreamSynchronize(stream));
  check_batch(streams, crops, r, Layout::hwc);
  // Device-resident inputs into a caller-provided buffer.
  std::vector<std::uint8_t*> d_in(streams.size());
  std::vector<l3::cuda::DeviceImage> dev;
  for (std::size_t i = 0; i < streams.size(); ++i) {
    ok(cudaMalloc(reinterpret_cast<void**>(&d_in[i]), streams[i].size()));
    ok(cudaMemcpy(d_in[i], streams[i].data(), streams[i].size(), cudaMemcpyHostToDevice));
    dev.push_back({d_in[i], streams[i], crops[i]});
  }
  std::uint64_t total = 0;
  for (const auto& s : l3::cuda::BatchDecoder::query(batch)) total += s.size;
  std::uint8_t* d_out = nullptr;
  ok(cudaMalloc(reinterpret_cast<void**>(&d_out), total));
  CHECK_THROWS_AS(dec.decode(dev, {}, stream, {d_out, total - 1}), l3::Error);
  r = dec.decode(dev, {}, stream, {d_out, total});
  CHECK(r.d_output == d_out);
  ok(cudaStreamSynchronize(stream));
  check_batch(streams, crops, r, Layout::hwc, d_out);
  for (auto* p : d_in) ok(cudaFree(p));
  ok(cudaFree(d_out));
  ok(cudaStreamDestroy(stream));
}

TEST_CASE("GPU: zero rows (spec/codec.md §4.3, version 4), whole images and crops" * doctest::skip(no_gpu())) {
  // Rows that repeat the row above and a mid-gray first row: empty row
  // streams in Rice-coded, entropy-coded (effort 2) and palette tiles.
  std::mt19937 rng(23);
  std::vector<std::vector<std::uint8_t>> streams;
  std::vector<std::optional<l3::Rect>> crops;
  int v4 = 0;
  for (int i = 0; i < 16; ++i) {
    const std::uint32_t w = 90 + std::uint32_t(i) * 11, h = 40 + std::uint32_t(i) * 5, ch = std::uint32_t(i % 4) + 1;
    const Img im = with_zero_rows(make_image(rng, w, h, ch, 1 + i % 3));
    l3::EncodeOptions o;
    o.tile_width = 64;
    o.effort = 1 + i % 2;
    o.tile_copies = false;  // version 4 exactly (copies, plane contexts: the next tests)
    o.pixel_copies = false;
    o.plane_contexts = o.corrections = false;
    o.compact_tables = false;  // version 9 (§4.5)
    streams.push_back(l3::encode({im.px.data(), im.w, im.h, im.ch, 0}, o));
    v4 += l3::read_info(streams.back()).version == 4;
    const l3::Rect r{std::uint32_t(i) % 7, std::uint32_t(i) % 5 + 3, w / 2 + std::uint32_t(i), h / 2};
    crops.push_back(i % 3 == 0 ? std::nullopt : std::optional<l3::Rect>(r));
  }
  CHECK(v4 >= 12);
  decode_and_check_both_layouts(streams, crops);
}

TEST_CASE("GPU: zero-row bitmaps (spec/codec.md §4.3, version 10), whole images and crops" * doctest::skip(no_gpu())) {
  // The zero-row images above with the encoder's defaults: each lane finds
  // its row's length through the bitmap (core::row_length_of).
  std::mt19937 rng(29);
  std::vector<std::vector<std::uint8_t>> streams;
  std::vector<std::optional<l3::Rect>> crops;
  int v10 = 0;
  for (int i = 0; i < 16; ++i) {
    const std::uint32_t w = 90 + std::uint32_t(i) * 11, h = 40 + std::uint32_t(i) * 5, ch = std::uint32_t(i % 4) + 1;
    const Img im = with_zero_rows(make_image(rng, w, h, ch, 1 + i % 3), true);
    l3::EncodeOptions o;
    o.tile_width = 64;
    o.effort = 1 + i % 2;
    o.bilevel = o.diagonals = false;  // version 10 exactly (versions 11, 12: the tests below)
    streams.push_back(l3::encode({im.px.data(), im.w, im.h, im.ch, 0}, o));
    v10 += l3::read_info(streams.back()).version == 10;
    const l3::Rect r{std::uint32_t(i) % 7, std::uint32_t(i) % 5 + 3, w / 2 + std::uint32_t(i), h / 2};
    crops.push_back(i % 3 == 0 ? std::nullopt : std::optional<l3::Rect>(r));
  }
  CHECK(v10 > 0);  // (test_cuda_emu counts bitmaps in streams it checks on the CPU)
  decode_and_check_both_layouts(streams, crops);
}

TEST_CASE("GPU: tile copies (spec/codec.md §3.3, version 5), whole images and crops" * doctest::skip(no_gpu())) {
  // Images periodic with the 32 x 8 tile (clipped edge tiles among the
  // copies), between images without copies, so that a copy's source is
  // found through its own image's first tile.
  std::mt19937 rng(29);
  std::vector<std::vector<std::uint8_t>> streams;
  std::vector<std::optional<l3::Rect>> crops;
  for (int i = 0; i < 8; ++i) {
    const std::uint32_t w = 100 + std::uint32_t(i) * 13, h = 30 + std::uint32_t(i) * 7, ch = std::uint32_t(i % 4) + 1;
    Img im = make_image(rng, w, h, ch, 1 + i % 3);
    if (i % 2 == 1)
      for (std::uint32_t y = 0; y < h; ++y)
        for (std::uint32_t x = 0; x < w; ++x)
          for (std::uint32_t c = 0; c < ch; ++c)
            im.px[(std::size_t(y) * w + x) * ch + c] = l3::test::periodic_32x8(x, y, c);
    l3::EncodeOptions o;
    o.tile_width = 32;
    o.tile_height = 8;
    o.pixel_copies = false;  // version 5 exactly (pixel copies, plane contexts: the next tests)
    o.plane_contexts = o.corrections = false;
    o.compact_tables = false;  // version 9 (§4.5)
    streams.push_back(l3::encode({im.px.data(), im.w, im.h, im.ch, 0}, o));
    if (i % 2 == 1) CHECK(l3::read_info(streams.back()).version == 5);
    const l3::Rect r{std::uint32_t(i) % 7 + 20, std::uint32_t(i) % 5 + 3, w / 2, h / 2};
    crops.push_back(i % 3 == 0 ? std::nullopt : std::optional<l3::Rect>(r));
  }
  decode_and_check_both_layouts(streams, crops);
}

TEST_CASE("GPU: pixel copies (spec/codec.md §6.6, version 6), whole images and crops" * doctest::skip(no_gpu())) {
  // Text-like images (test_tile_pattern.hpp): copies from the output ring,
  // in transformed tiles and in palette tiles (whose ring holds indices),
  // between images without copies.
  std::mt19937 rng(31);
  std::vector<std::vector<std::uint8_t>> streams;
  std::vector<std::optional<l3::Rect>> crops;
  int v6 = 0;
  for (int i = 0; i < 12; ++i) {
    const std::uint32_t w = 200 + std::uint32_t(i) * 17, h = 40 + std::uint32_t(i) * 9, ch = std::uint32_t(i % 4) + 1;
    Img im = make_image(rng, w, h, ch, 1 + i % 3);
    if (i % 3 != 2) l3::test::fill_glyph_text(im.px.data(), w, h, ch, std::uint32_t(i), i % 3 == 1);
    l3::EncodeOptions o;
    o.tile_width = 128;
    o.effort = 2;  // copies in every tile where they save
    o.plane_contexts = o.corrections = false;  // version 6 exactly (plane contexts: the next test)
    o.compact_tables = false;  // version 9 (§4.5)
    streams.push_back(l3::encode({im.px.data(), im.w, im.h, im.ch, 0}, o));
    v6 += l3::read_info(streams.back()).version == 6;
    const l3::Rect r{std::uint32_t(i) % 7 + 20, std::uint32_t(i) % 5 + 3, w / 2, h / 2};
    crops.push_back(i % 3 == 0 ? std::nullopt : std::optional<l3::Rect>(r));
  }
  CHECK(v6 >= 6);
  decode_and_check_both_layouts(streams, crops);
}

TEST_CASE("GPU: plane contexts (spec/codec.md §6.2, version 7), whole images and crops" * doctest::skip(no_gpu())) {
  // Planes that err together (test_tile_pattern.hpp), Rice- and entropy-coded
  // tiles, 2-4 channels, between images without plane contexts (one plane).
  std::mt19937 rng(37);
  std::vector<std::vector<std::uint8_t>> streams;
  std::vector<std::optional<l3::Rect>> crops;
  int v7 = 0;
  for (int i = 0; i < 12; ++i) {
    const std::uint32_t w = 220 + std::uint32_t(i) * 13, h = 40 + std::uint32_t(i) * 7, ch = std::uint32_t(i % 4) + 1;
    Img im = make_image(rng, w, h, ch, 1 + i % 3);
    if (ch > 1) l3::test::fill_shared_noise(im.px.data(), w, h, ch, std::uint32_t(i));
    l3::EncodeOptions o;
    o.tile_width = 128;
    o.entropy_coding = i % 2 == 0;
    o.corrections = false;  // version 7 exactly (corrections: the next test)
    o.compact_tables = false;  // version 9 (§4.5)
    streams.push_back(l3::encode({im.px.data(), im.w, im.h, im.ch, 0}, o));
    v7 += l3::read_info(streams.back()).version == 7;
    const l3::Rect r{std::uint32_t(i) % 7 + 20, std::uint32_t(i) % 5 + 3, w / 2, h / 2};
    crops.push_back(i % 3 == 0 ? std::nullopt : std::optional<l3::Rect>(r));
  }
  CHECK(v7 >= 7);  // of the 9 with 2-4 channels
  decode_and_check_both_layouts(streams, crops);
}

TEST_CASE("GPU: residual corrections (spec/codec.md §6.7, version 8), whole images and crops" * doctest::skip(no_gpu())) {
  // Stepped ramps (test_tile_pattern.hpp), Rice- and entropy-coded tiles,
  // 1-4 channels, between images of random pixels (no corrections).
  std::mt19937 rng(38);
  std::vector<std::vector<std::uint8_t>> streams;
  std::vector<std::optional<l3::Rect>> crops;
  int v8 = 0;
  for (int i = 0; i < 12; ++i) {
    const std::uint32_t w = 220 + std::uint32_t(i) * 13, h = 40 + std::uint32_t(i) * 7, ch = std::uint32_t(i % 4) + 1;
    Img im = make_image(rng, w, h, ch, 1 + i % 3);
    if (i % 3 != 2) l3::test::fill_stepped_ramps(im.px.data(), w, h, ch, std::uint32_t(i));
    l3::EncodeOptions o;
    o.tile_width = 128;
    o.entropy_coding = i % 2 == 0;
    o.compact_tables = false;  // version 8 exactly (version 9's tables, and what needs them, later)
    streams.push_back(l3::encode({im.px.data(), im.w, im.h, im.ch, 0}, o));
    v8 += l3::read_info(streams.back()).version == 8;
    const l3::Rect r{std::uint32_t(i) % 7 + 20, std::uint32_t(i) % 5 + 3, w / 2, h / 2};
    crops.push_back(i % 3 == 0 ? std::nullopt : std::optional<l3::Rect>(r));
  }
  CHECK(v8 >= 8);  // of the 8 stepped ramps
  decode_and_check_both_layouts(streams, crops);
}

TEST_CASE("GPU: mirrored tiles and NW planes (spec/codec.md §4.7, version 12), whole images and crops" *
          doctest::skip(no_gpu())) {
  // Diagonal ramps (test_tile_pattern.hpp): mirrored tiles store through a
  // negative pixel stride; Rice- and entropy-coded tiles, 1-4 channels,
  // between images of random pixels.
  std::mt19937 rng(39);
  std::vector<std::vector<std::uint8_t>> streams;
  std::vector<std::optional<l3::Rect>> crops;
  int v12 = 0;
  for (int i = 0; i < 12; ++i) {
    const std::uint32_t w = 230 + std::uint32_t(i) * 17, h = 40 + std::uint32_t(i) * 7, ch = std::uint32_t(i % 4) + 1;
    Img im = make_image(rng, w, h, ch, 1 + i % 3);
    if (i % 3 != 2) l3::test::fill_diagonal(im.px.data(), w, h, ch, i % 3 == 1, std::uint32_t(i));
    l3::EncodeOptions o;
    o.tile_width = 128;
    o.entropy_coding = i % 2 == 0;
    streams.push_back(l3::encode({im.px.data(), im.w, im.h, im.ch, 0}, o));
    v12 += l3::read_info(streams.back()).version == 12;
    const l3::Rect r{std::uint32_t(i) % 7 + 20, std::uint32_t(i) % 5 + 3, w / 2, h / 2};
    crops.push_back(i % 3 == 0 ? std::nullopt : std::optional<l3::Rect>(r));
  }
  CHECK(v12 >= 6);  // of the 8 ramps (test_cuda_emu counts mirrored tiles on the CPU)
  decode_and_check_both_layouts(streams, crops);
}

TEST_CASE("GPU: bit planes and templates (spec/codec.md §6.8, version 13), whole images and crops" *
          doctest::skip(no_gpu())) {
  // Ordered dithers (test_tile_pattern.hpp): up to 16 colours a tile coded
  // bit by bit, template pixels read from the output ring; 1-4 channels,
  // between images of random pixels.
  std::mt19937 rng(41);
  std::vector<std::vector<std::uint8_t>> streams;
  std::vector<std::optional<l3::Rect>> crops;
  int v13 = 0;
  for (int i = 0; i < 12; ++i) {
    const std::uint32_t w = 230 + std::uint32_t(i) * 17, h = 40 + std::uint32_t(i) * 7, ch = std::uint32_t(i % 4) + 1;
    Img im = make_image(rng, w, h, ch, 1 + i % 3);
    if (i % 3 != 2) l3::test::fill_ordered_dither(im.px.data(), w, h, ch, std::uint32_t(i));
    l3::EncodeOptions o;
    o.tile_width = 128;
    streams.push_back(l3::encode({im.px.data(), im.w, im.h, im.ch, 0}, o));
    v13 += l3::read_info(streams.back()).version == l3::core::kVersionBitPlanes;
    const l3::Rect r{std::uint32_t(i) % 7 + 20, std::uint32_t(i) % 5 + 3, w / 2, h / 2};
    crops.push_back(i % 3 == 0 ? std::nullopt : std::optional<l3::Rect>(r));
  }
  CHECK(v13 >= 6);  // of the 8 dithers (test_cuda_emu checks them on the CPU)
  decode_and_check_both_layouts(streams, crops);
}

TEST_CASE("GPU: symbols (spec/codec.md §3.4, version 15), whole images, crops and damaged sections" *
          doctest::skip(no_gpu())) {
  // Pages of repeated glyphs (test_tile_pattern.hpp): each dictionary
  // decodes as one more entry into the decoder's scratch, the patch kernel
  // places the patches; 1-4 channels, between images without symbols.
  std::mt19937 rng(43);
  std::vector<std::vector<std::uint8_t>> streams;
  std::vector<std::optional<l3::Rect>> crops;
  int v15 = 0;
  for (int i = 0; i < 12; ++i) {
    const std::uint32_t w = 300 + std::uint32_t(i) * 17, h = 140 + std::uint32_t(i) * 7, ch = std::uint32_t(i % 4) + 1;
    Img im = make_image(rng, w, h, ch, 1 + i % 3);
    if (i % 3 != 2) l3::test::fill_symbol_page(im.px.data(), w, h, ch, std::uint32_t(i));
    streams.push_back(encode(im, 0, 0));
    v15 += l3::read_info(streams.back()).symbol_patches > 0;
    const l3::Rect r{std::uint32_t(i) % 7 + 20, std::uint32_t(i) % 5 + 3, w / 2, h / 2};
    crops.push_back(i % 3 == 0 ? std::nullopt : std::optional<l3::Rect>(r));
  }
  CHECK(v15 >= 7);  // of the 8 pages (test_cuda_emu checks them on the CPU)
  decode_and_check_both_layouts(streams, crops);
  // Damaged sections without the checksum: a flip in every 16th byte after
  // the tiles of each page (the dictionary's tiles, its table, patches);
  // each image's status and pixels as l3::decode's.
  std::vector<std::vector<std::uint8_t>> damaged;
  for (const auto& e : streams) {
    if (l3::read_info(e).symbol_patches == 0) continue;
    for (std::size_t at = l3::test::tiles_end(e); at < e.size(); at += 16) {
      damaged.push_back(e);
      damaged.back()[at] ^= std::uint8_t(1u << (at % 8));
    }
  }
  std::vector<l3::cuda::HostImage> batch;
  for (const auto& s : damaged) batch.push_back({s, std::nullopt});
  l3::cuda::BatchOptions unchecked;
  unchecked.verify_checksum = false;
  l3::DecodeOptions dopt;
  dopt.verify_checksum = false;
  l3::cuda::BatchDecoder dec;
  const auto r = dec.decode(batch, unchecked, nullptr);
  ok(cudaDeviceSynchronize());
  const Pixels all = to_host(r.d_output, r.output_bytes);
  const auto st = statuses(r);
  int rejected = 0;
  for (std::size_t i = 0; i < damaged.size(); ++i) {
    INFO("damaged image " << i);
    l3::errc want = l3::errc::ok;
    Pixels ref;
    try {
      ref = l3::decode(damaged[i], nullptr, dopt);
    } catch (const l3::Error& e) {
      want = e.code();
    }
    CHECK(st[i] == static_cast<int>(want));
    rejected += want != l3::errc::ok;
    if (want == l3::errc::ok)
      CHECK(Pixels(all.begin() + std::ptrdiff_t(r.slots[i].offset),
                   all.begin() + std::ptrdiff_t(r.slots[i].offset + r.slots[i].size)) == ref);
  }
  MESSAGE(rejected << " of " << damaged.size() << " damaged sections rejected");
  CHECK(rejected > 0);
}

TEST_CASE("GPU: a corrupt image among good ones" * doctest::skip(no_gpu())) {
  std::mt19937 rng(17);
  std::vector<std::vector<std::uint8_t>> streams;
  for (int i = 0; i < 12; ++i) streams.push_back(encode(make_image(rng, 100 + std::uint32_t(i), 60, 3, i), 64, 32));
  streams[3][streams[3].size() - 5] ^= 0x40;        // damaged tile data
  streams[5].resize(10);                            // truncated header
  streams[8][25] ^= 0xff;                           // damaged tile table
  std::vector<l3::cuda::HostImage> batch;
  for (auto& s : streams) batch.push_back({s, std::nullopt});
  std::vector<std::optional<l3::Rect>> crops(streams.size());
  l3::cuda::BatchDecoder dec;
  const auto r = dec.decode(batch, {}, nullptr);
  const auto host_status = dec.status();
  CHECK(host_status[5] != l3::errc::ok);
  CHECK(host_status[8] != l3::errc::ok);
  check_batch(streams, crops, r, Layout::hwc);  // statuses equal l3::decode's errors, good images exact
}

TEST_CASE("GPU: decode under CUDA graph capture" * doctest::skip(no_gpu())) {
  std::mt19937 rng(23);
  std::vector<std::vector<std::uint8_t>> streams;
  for (int i = 0; i < 16; ++i)
    streams.push_back(encode(make_image(rng, 64 + std::uint32_t(i) * 9, 48, std::uint32_t(i % 4) + 1, i), 64, 16));
  std::vector<l3::cuda::HostImage> batch;
  for (auto& s : streams) batch.push_back({s, std::nullopt});
  std::vector<std::optional<l3::Rect>> crops(streams.size());
  cudaStream_t stream;
  ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  l3::cuda::BatchDecoder dec;
  (void)dec.decode(batch, {}, stream);  // warm-up: grows the buffers
  ok(cudaStreamSynchronize(stream));
  cudaGraph_t graph;
  ok(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  l3::cuda::BatchResult r;
  bool threw = false;
  try {
    r = dec.decode(batch, {}, stream);
  } catch (const l3::Error& e) {
    threw = true;
    MESSAGE(e.what());
  }
  ok(cudaStreamEndCapture(stream, &graph));
  REQUIRE_FALSE(threw);
  cudaGraphExec_t exec;
  ok(cudaGraphInstantiate(&exec, graph, 0));
  ok(cudaMemsetAsync(r.d_output, 0, r.output_bytes, stream));
  ok(cudaGraphLaunch(exec, stream));
  ok(cudaStreamSynchronize(stream));
  check_batch(streams, crops, r, Layout::hwc);
  ok(cudaGraphExecDestroy(exec));
  ok(cudaGraphDestroy(graph));
  ok(cudaStreamDestroy(stream));
}

TEST_CASE("GPU: the sample photos and 1024x768 images in one batch" * doctest::skip(no_gpu())) {
  std::vector<std::vector<std::uint8_t>> streams;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(L3_SOURCE_DIR) / "bench" / "sample")) {
    const auto ext = e.path().extension().string();
    if (ext != ".png" && ext != ".jpg") continue;
    const l3::Image img = l3::load_image(e.path());
    streams.push_back(l3::encode(img.view()));
  }
  CHECK(streams.size() >= 3);
  std::mt19937 rng(31);
  for (int i = 0; i < 8; ++i) streams.push_back(encode(make_image(rng, 1024, 768, 3, 1 + i % 3), 0, 0));
  std::vector<l3::cuda::HostImage> batch;
  for (auto& s : streams) batch.push_back({s, std::nullopt});
  std::vector<std::optional<l3::Rect>> crops(streams.size());
  l3::cuda::BatchDecoder dec;
  const auto r = dec.decode(batch, {}, nullptr);
  ok(cudaStreamSynchronize(nullptr));
  check_batch(streams, crops, r, Layout::hwc);
}
