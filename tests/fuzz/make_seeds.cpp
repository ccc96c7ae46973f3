// Writes seed inputs for the fuzz targets: l3_fuzz_make_seeds SOURCE_DIR OUT_DIR
// creates OUT_DIR/<target>/ files. The committed corpora (tests/fuzz/corpus/)
// are these seeds plus JPEG/PNG variants (gen_seeds.sh), minimised with
// libFuzzer's -merge=1.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <cstdio>
#include <jpeglib.h>
#include <xxhash.h>

#include "l3/codec/codec.hpp"
#include "l3/format/dataset.hpp"
#include "l3/imageio/image_io.hpp"
#include "l3/format/shard.hpp"
#include "../test_tile_pattern.hpp"

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

namespace {

fs::path g_out;

// Concatenation by += (GCC 12 -O3 reports a bogus -Wrestrict on "lit" + std::string).
template <class... A> std::string cat(const A&... a) {
  std::string s;
  ((s += a), ...);
  return s;
}
std::string num(std::uint64_t v) { return std::to_string(v); }

void put(const std::string& target, const std::string& name, const Bytes& b) {
  fs::create_directories(g_out / target);
  std::ofstream(g_out / target / name, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

// pattern 0: smooth, 1: noise, 2: constant, 3: half flat half smooth,
// 4: smooth with opaque alpha (4 channels) or gray stored as RGB (3):
// version 2's constant planes (spec/codec.md §4.3); 5: few colours (palette
// tiles, §4.4); 6: smooth with a little noise (version 3 entropy-coded tiles,
// §4.5); 7: pattern 6 with rows that repeat the row above and a mid-gray
// first row (version 4 zero rows, §4.3); 8: periodic with 32 x 8 tiles
// (version 5 tile copies, §3.3); 9, 10: text (version 6 pixel copies, §6.6);
// 11: planes that err together (version 7 plane contexts, §6.2); 12:
// stepped ramps (version 8 residual corrections, §6.7); 13: ramps along x + y
// (version 12 mirrored tiles, §4.7); 14: ordered dithers (version 13 bit
// planes and templates, §6.8); 15: rounded affine planes, a little noise
// (version 14 ramps, §6.9); 16: a page of repeated glyphs (version 15
// symbols, §3.4).
Bytes pixels(std::uint32_t w, std::uint32_t h, std::uint32_t c, int pattern) {
  if (pattern == 7) {
    Bytes px = pixels(w, h, c, 6);
    const std::size_t row = std::size_t(w) * c;
    for (std::uint32_t y = 0; y < h; ++y) {
      if (y == 0) std::fill(px.begin(), px.begin() + std::ptrdiff_t(row), std::uint8_t(128));
      else if (y % 3 != 2) std::copy_n(px.begin() + std::ptrdiff_t((y - 1) * row), row, px.begin() + std::ptrdiff_t(y * row));
    }
    return px;
  }
  if (pattern == 11) {
    Bytes px(std::size_t(w) * h * c);
    l3::test::fill_shared_noise(px.data(), w, h, c, c);
    return px;
  }
  if (pattern == 12) {
    Bytes px(std::size_t(w) * h * c);
    l3::test::fill_stepped_ramps(px.data(), w, h, c, c);
    return px;
  }
  if (pattern == 13) {
    Bytes px(std::size_t(w) * h * c);
    l3::test::fill_diagonal(px.data(), w, h, c, false, c);
    return px;
  }
  if (pattern == 15) {
    Bytes px(std::size_t(w) * h * c);
    l3::test::fill_ramps(px.data(), w, h, c, true, c);
    return px;
  }
  if (pattern == 16) {
    Bytes px(std::size_t(w) * h * c);
    l3::test::fill_symbol_page(px.data(), w, h, c, c);
    return px;
  }
  if (pattern == 14) {
    Bytes px(std::size_t(w) * h * c);
    l3::test::fill_ordered_dither(px.data(), w, h, c, c);
    return px;
  }
  Bytes px(std::size_t(w) * h * c);
  std::uint32_t seed = 12345 + w * 7 + h * 13 + c;
  for (std::uint32_t y = 0; y < h; ++y)
    for (std::uint32_t x = 0; x < w; ++x)
      for (std::uint32_t k = 0; k < c; ++k) {
        seed = seed * 1103515245u + 12345u;
        std::uint8_t v = 0;
        switch (pattern) {
          case 0: v = std::uint8_t(x * 3 + y * 2 + k * 40 + ((seed >> 16) & 3)); break;
          case 1: v = std::uint8_t(seed >> 16); break;
          case 2: v = std::uint8_t(17 * (k + 1)); break;
          case 5: v = std::uint8_t(((x / 3 + y / 2 + (x * y) % 5) % 6) * 40 + k * 9); break;  // 6 colours: palette
          case 6: v = std::uint8_t(x / 2 + y / 3 + k * 30 + (seed >> 31)); break;
          case 8: v = l3::test::periodic_32x8(x, y, k); break;
          case 9: v = l3::test::glyph_text(x, y, k, c, true); break;   // pixel copies, transformed tiles
          case 10: v = l3::test::glyph_text(x, y, k, c, false); break;  // pixel copies, palette tiles
          case 4:
            v = std::uint8_t(x * 3 + y * 2 + ((seed >> 16) & 3));
            if (c == 4 && k == 3) v = 255;
            if (c == 3 && k > 0) v = px[(std::size_t(y) * w + x) * c];
            break;
          default: v = x < w / 2 ? std::uint8_t(200) : std::uint8_t(x + y * k); break;
        }
        px[(std::size_t(y) * w + x) * c + k] = v;
      }
  return px;
}

Bytes encode(std::uint32_t w, std::uint32_t h, std::uint32_t c, int pattern, std::uint32_t tw, std::uint32_t th, int effort = 1) {
  const Bytes px = pixels(w, h, c, pattern);
  l3::EncodeOptions o;
  o.tile_width = tw;
  o.tile_height = th;
  o.effort = effort;
  return l3::encode(l3::ImageView{px.data(), w, h, c, 0}, o);
}

Bytes read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void codec_seeds() {
  int n = 0;
  for (std::uint32_t c = 1; c <= 4; ++c)
    for (std::uint32_t tw : {16u, 32u, 64u, 128u, 256u})
      for (std::uint32_t th : {1u, 7u, 32u}) {
        const int pattern = int((c + tw / 16 + th) % 4);
        const std::uint32_t w = tw == 256 ? 260 : tw + 5, h = th == 32 ? 34 : th * 2 + 1;
        const Bytes enc = encode(w, h, c, pattern, tw, th);
        const std::string name = cat("c", num(c), "_tw", num(tw), "_th", num(th));
        put("decode", name, enc);
        Bytes region = {std::uint8_t(n * 3), 0, std::uint8_t(n), 0, std::uint8_t(5 + n), 0, std::uint8_t(3 + n), 0};
        region.insert(region.end(), enc.begin(), enc.end());
        put("region", name, region);
        ++n;
      }
  put("decode", "1x1", encode(1, 1, 3, 1, 0, 0));
  put("decode", "effort0", encode(40, 9, 4, 0, 16, 4, 0));
  put("decode", "v2_opaque_rgba", encode(70, 20, 4, 4, 32, 8));
  put("decode", "v2_gray_as_rgb", encode(70, 20, 3, 4, 32, 8));
  put("decode", "v2_palette_rgb", encode(70, 20, 3, 5, 32, 8));
  put("decode", "v2_palette_gray", encode(70, 20, 1, 5, 32, 8));
  put("decode", "v3_ans_rgb", encode(80, 40, 3, 6, 64, 32));
  put("decode", "v3_ans_rgba", encode(96, 40, 4, 6, 64, 32));
  put("decode", "v4_zero_rows_rgb", encode(80, 40, 3, 7, 64, 32, 2));
  put("decode", "v4_zero_rows_gray", encode(70, 20, 1, 7, 32, 8));
  put("decode", "v5_tile_copies_rgb", encode(150, 70, 3, 8, 32, 8));
  put("decode", "v5_tile_copies_gray", encode(100, 20, 1, 8, 32, 8));
  put("decode", "v6_pixel_copies_rgb", encode(200, 40, 3, 9, 128, 32));
  put("decode", "v6_pixel_copies_gray", encode(200, 40, 1, 9, 128, 32));
  put("decode", "v6_pixel_copies_palette", encode(300, 70, 1, 10, 128, 32, 2));
  put("decode", "v7_plane_contexts_rgb", encode(160, 40, 3, 11, 64, 32));
  put("decode", "v7_plane_contexts_rgba", encode(100, 40, 4, 11, 64, 16));
  put("decode", "v7_plane_contexts_gray_alpha", encode(100, 30, 2, 11, 32, 8));
  put("decode", "v8_corrections_rgb", encode(160, 40, 3, 12, 64, 32));
  put("decode", "v8_corrections_gray", encode(100, 30, 1, 12, 32, 8));
  put("decode", "v8_corrections_rgba_rice", [] {
    const Bytes px = pixels(100, 40, 4, 12);
    l3::EncodeOptions o;
    o.tile_width = 64;
    o.tile_height = 16;
    o.entropy_coding = false;
    return l3::encode(l3::ImageView{px.data(), 100, 40, 4, 0}, o);
  }());
  put("decode", "v12_mirrored_rgb", encode(170, 40, 3, 13, 64, 16));
  put("decode", "v13_bitplanes_rgb", encode(170, 40, 3, 14, 64, 32));
  put("decode", "v13_bitplanes_gray_alpha", encode(100, 30, 2, 14, 64, 16, 2));
  put("decode", "v14_ramps_rgb", encode(170, 40, 3, 15, 64, 32));
  put("decode", "v14_ramps_rgba", encode(100, 40, 4, 15, 32, 8));
  put("decode", "v15_symbols_gray", encode(160, 60, 1, 16, 64, 32));
  put("decode", "v15_symbols_rgb", encode(120, 50, 3, 16, 32, 8));
  put("region", "v15_symbols_gray", [] {
    Bytes r = {50, 0, 10, 0, 61, 0, 30, 0};  // columns 50..110, rows 10..39: patches cut by the crop
    const Bytes e = encode(160, 60, 1, 16, 64, 32);
    r.insert(r.end(), e.begin(), e.end());
    return r;
  }());
  put("region", "v14_ramps_rgb", [] {
    Bytes r = {70, 0, 3, 0, 61, 0, 30, 0};  // columns 70..130, across a tile edge
    const Bytes e = encode(170, 40, 3, 15, 64, 32);
    r.insert(r.end(), e.begin(), e.end());
    return r;
  }());
  put("region", "v13_bitplanes_rgb", [] {
    Bytes r = {70, 0, 3, 0, 61, 0, 30, 0};  // columns 70..130, across a tile edge
    const Bytes e = encode(170, 40, 3, 14, 64, 32);
    r.insert(r.end(), e.begin(), e.end());
    return r;
  }());
  put("region", "v12_mirrored_rgb", [] {
    Bytes r = {70, 0, 3, 0, 61, 0, 30, 0};  // columns 70..130: inside mirrored tiles, across one's edge
    const Bytes e = encode(170, 40, 3, 13, 64, 16);
    r.insert(r.end(), e.begin(), e.end());
    return r;
  }());
  put("region", "v8_corrections_rgb", [] {
    Bytes r = {10, 0, 3, 0, 100, 0, 30, 0};
    const Bytes e = encode(160, 40, 3, 12, 64, 32);
    r.insert(r.end(), e.begin(), e.end());
    return r;
  }());
  put("region", "v7_plane_contexts_rgb", [] {
    Bytes r = {20, 0, 5, 0, 90, 0, 30, 0};
    const Bytes e = encode(160, 40, 3, 11, 64, 32);
    r.insert(r.end(), e.begin(), e.end());
    return r;
  }());
  put("region", "v6_pixel_copies_rgb", [] {
    Bytes r = {30, 0, 7, 0, 100, 0, 20, 0};
    const Bytes e = encode(200, 40, 3, 9, 128, 32);
    r.insert(r.end(), e.begin(), e.end());
    return r;
  }());
  put("region", "v5_tile_copies_rgb", [] {
    Bytes r = {40, 0, 9, 0, 70, 0, 30, 0};
    const Bytes e = encode(150, 70, 3, 8, 32, 8);
    r.insert(r.end(), e.begin(), e.end());
    return r;
  }());
  put("region", "v4_zero_rows_rgb", [] {
    Bytes r = {3, 0, 5, 0, 40, 0, 20, 0};
    const Bytes e = encode(80, 40, 3, 7, 64, 32, 2);
    r.insert(r.end(), e.begin(), e.end());
    return r;
  }());
  put("region", "v3_ans_rgb", [] {
    Bytes r = {3, 0, 5, 0, 40, 0, 20, 0};
    const Bytes e = encode(80, 40, 3, 6, 64, 32);
    r.insert(r.end(), e.begin(), e.end());
    return r;
  }());
}

void roundtrip_seeds() {
  int n = 0;
  for (std::uint8_t c = 0; c < 4; ++c)
    for (std::uint8_t mode = 0; mode < 8; ++mode) {
      const std::uint16_t w = std::uint16_t(1 + (n * 37) % 300);
      Bytes b = {c, std::uint8_t(w), std::uint8_t(w >> 8), std::uint8_t((n * 11) % 40), std::uint8_t(n % 8),
                 std::uint8_t((n * 5) % 33), mode};
      for (int i = 0; i < 64; ++i) b.push_back(std::uint8_t(i * i + n));
      put("roundtrip", cat("s", num(std::uint64_t(n++))), b);
    }
}

void shard_seeds(const fs::path& src) {
  for (const auto& e : fs::directory_iterator(src / "spec/vectors/shard")) {
    if (e.path().extension() != ".l3s") continue;
    const Bytes f = read_file(e.path());
    const std::string stem = e.path().stem().string();
    for (int mode : {0, 1, 3}) {
      if (mode && stem.rfind("valid", 0) != 0) continue;  // repairs only on valid shards
      Bytes b = {std::uint8_t(mode)};
      b.insert(b.end(), f.begin(), f.end());
      put("shard", cat(stem, "_m", num(std::uint64_t(mode))), b);
    }
  }
  // Shards of real encoded images, raw and zstd index.
  const fs::path tmp = fs::temp_directory_path() / "l3_fuzz_seed.l3s";
  for (int enc = 0; enc < 2; ++enc) {
    l3::ShardWriterOptions o;
    o.index_encoding = enc ? l3::IndexEncoding::zstd : l3::IndexEncoding::raw;
    {
      l3::ShardWriter w(tmp, o);
      const std::uint8_t meta[] = {1, 2, 3};
      w.append(encode(20, 10, 3, 0, 16, 4), 0, "img/a.png", meta);
      w.append(encode(9, 5, 1, 2, 16, 2), 7, "", {});
      w.append(encode(33, 3, 4, 3, 32, 1), l3::kNoLabel, "k\xc3\xa9y", {});
      w.finalize();
    }
    Bytes b = {std::uint8_t(enc ? 0 : 3)};
    const Bytes f = read_file(tmp);
    b.insert(b.end(), f.begin(), f.end());
    put("shard", cat("images_", enc ? "zstd" : "raw"), b);
    fs::remove(tmp);
  }
}

// tests/crashers/shard/zstd_index_size_claim (FINDINGS.md F1): a zstd index
// whose trailer claims 1 MiB decoded, with the trailer hash repaired.
void shard_crashers() {
  const fs::path tmp = fs::temp_directory_path() / "l3_fuzz_crasher.l3s";
  l3::ShardWriterOptions o;
  o.index_encoding = l3::IndexEncoding::zstd;
  {
    l3::ShardWriter w(tmp, o);
    w.append(Bytes(100, 7), 0, "key-a");
    w.finalize();
  }
  Bytes f = read_file(tmp);
  fs::remove(tmp);
  std::uint8_t* t = f.data() + f.size() - 64;
  const std::uint64_t claim = std::uint64_t{1} << 20;
  for (int i = 0; i < 8; ++i) t[16 + i] = std::uint8_t(claim >> (8 * i));  // index_size
  const std::uint64_t h = XXH3_64bits(t, 48);
  for (int i = 0; i < 8; ++i) t[48 + i] = std::uint8_t(h >> (8 * i));  // trailer_hash
  Bytes b = {0};
  b.insert(b.end(), f.begin(), f.end());
  put("crashers/shard", "zstd_index_size_claim", b);
}

void manifest_seeds() {
  l3::Manifest m;
  m.shards.push_back({"shard-00000.l3s", 3, 4096, 0x0123456789abcdefull});
  m.shards.push_back({"shard-00001.l3s", 0, 96, 0xfedcba9876543210ull});
  m.classes = {"cat", "dog", "\xc3\xa9"};
  m.image_stats = {{"mean", {1.5, 2, 3}}};
  m.extra = {{"source", "fuzz"}};
  const std::string s = l3::serialize_manifest(m);
  put("manifest", "valid", Bytes(s.begin(), s.end()));
  const std::string e = l3::serialize_manifest(l3::Manifest{});
  put("manifest", "empty", Bytes(e.begin(), e.end()));
  const std::string bad = "{\"format\":\"l3-dataset\",\"version\":2,\"shards\":[]}";
  put("manifest", "bad_version", Bytes(bad.begin(), bad.end()));
}

// A small JPEG through libjpeg (channels 1 or 3).
Bytes write_jpeg(const Bytes& px, std::uint32_t w, std::uint32_t h, int channels, bool progressive,
                 unsigned restart, bool subsample) {
  jpeg_compress_struct c{};
  jpeg_error_mgr err{};
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buf, &size);
  c.image_width = w;
  c.image_height = h;
  c.input_components = channels;
  c.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 80, TRUE);
  if (progressive) jpeg_simple_progression(&c);
  c.restart_interval = restart;
  if (channels == 3 && !subsample)
    for (int i = 0; i < 3; ++i) c.comp_info[i].h_samp_factor = c.comp_info[i].v_samp_factor = 1;
  jpeg_start_compress(&c, TRUE);
  for (std::uint32_t y = 0; y < h; ++y) {
    JSAMPROW row = const_cast<JSAMPROW>(px.data() + std::size_t(y) * w * std::uint32_t(channels));
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  Bytes out(buf, buf + size);
  jpeg_destroy_compress(&c);
  std::free(buf);
  return out;
}

void image_io_seeds(const fs::path& src) {
  const l3::Image camera = l3::load_image(src / "bench/sample/camera.png");
  const l3::Image coffee = l3::load_image(src / "bench/sample/coffee.png");
  for (std::uint32_t c = 1; c <= 4; ++c) {
    const l3::Image& from = c <= 2 ? camera : coffee;
    const std::uint32_t w = 13, h = 9;
    Bytes px(std::size_t(w) * h * c);
    for (std::uint32_t y = 0; y < h; ++y)
      for (std::uint32_t x = 0; x < w; ++x)
        for (std::uint32_t k = 0; k < c; ++k) {
          const std::uint32_t fk = (k == c - 1 && (c == 2 || c == 4)) ? 0 : k;  // alpha from channel 0
          px[(std::size_t(y) * w + x) * c + k] =
              from.pixels[(std::size_t(y + 200) * from.width + x + 200) * from.channels + fk % from.channels];
        }
    const l3::ImageView v{px.data(), w, h, c, 0};
    put("image_io", cat("c", num(c), ".png"), l3::encode_png_bytes(v, 9));
    put("image_io", cat("c", num(c), ".pnm"), l3::encode_pnm_bytes(v));
  }
  {
    const Bytes gray = pixels(17, 9, 1, 0), rgb = pixels(24, 16, 3, 0);
    put("image_io", "gray.jpg", write_jpeg(gray, 17, 9, 1, false, 0, false));
    put("image_io", "rgb420.jpg", write_jpeg(rgb, 24, 16, 3, false, 0, true));
    put("image_io", "rgb444_restart.jpg", write_jpeg(rgb, 24, 16, 3, false, 1, false));
    put("image_io", "progressive.jpg", write_jpeg(rgb, 24, 16, 3, true, 0, true));
  }
  const std::string p2 = "P2\n# comment\n3 2\n255\n0 1 2\n3 4 255\n";
  put("image_io", "p2.pgm", Bytes(p2.begin(), p2.end()));
  const std::string p3 = "P3\n2 1\n255\n1 2 3 4 5 6\n";
  put("image_io", "p3.ppm", Bytes(p3.begin(), p3.end()));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s SOURCE_DIR OUT_DIR\n", argv[0]);
    return 2;
  }
  const fs::path src = argv[1];
  g_out = argv[2];
  try {
    codec_seeds();
    roundtrip_seeds();
    shard_seeds(src);
    shard_crashers();
    manifest_seeds();
    image_io_seeds(src);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
