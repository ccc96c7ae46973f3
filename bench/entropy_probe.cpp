// entropy_probe: what a static-table entropy coder (rANS/tANS over hybrid-integer tokens) would
// save over the Rice codes of spec/codec.md §7, measured on l3's own residuals (issue 12,
// spec §12). For each image: encode as version 2 did (Rice codes only: no entropy-coded tiles,
// zero rows or tile copies, the streams this probe was built for), then walk every coded tile
// through the shared core (l3/codec/tile_core.hpp) as the decoder does, recording each Rice-coded
// value (residual codes with their plane and context bucket, run lengths) and the bits it took.
// Then cost the same values as tokens under several table layouts, table bytes and per-row
// state flushes included, and print one tab-separated line per image (header line first).
//
// Token (JPEG XL's hybrid integer, split 16, one mantissa bit in the token):
//   u < 16: token u, no raw bits; else n = floor(log2 u), token 16 + 2 (n - 4) + bit n-1 of u,
//   n - 1 raw bits. Residual codes are < 1024 (token < 28), run lengths <= 256.
// Probabilities: counts quantised to 12 bits (sum 4096, every used token >= 1); the cost of a
// token is -log2(f / 4096) with the quantised f (so quantisation loss counts), plus raw bits.
// Table cost: per context 1 bit (used or not); a used one 5 bits of alphabet size A, then per
// token below A a 4-bit exponent e (0 for f = 0, else floor(log2 f) + 1) and e - 1 mantissa
// bits. Row cost: ceil((token bits) / 8) + state bytes (4 for a 32-bit rANS state).
// Projected image bytes = l3 bytes - (Rice rows + k tables + run_k of coded tiles) + (ANS rows
// + tables); "min" variants keep Rice in tiles where it is smaller (tile tables only).
//
// Usage: entropy_probe [--state-bytes N] IMAGE...
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "l3/codec/codec.hpp"
#include "l3/imageio/image_io.hpp"
#include "probe_walk.hpp"
#include "l3/codec/tile_core.hpp"

namespace {

namespace core = l3::core;

constexpr int kTokens = 32;
constexpr int kRunContext = 64;  // contexts 0..63: plane * 16 + bucket; 64: run lengths
constexpr int kContexts = 65;

struct Token {
  int token, raw_bits;
};
Token tokenize(std::uint32_t u) {
  if (u < 16) return {int(u), 0};
  const int n = 31 - core::clz32(u);
  return {16 + 2 * (n - 4) + int((u >> (n - 1)) & 1), n - 1};
}

struct Sym {
  std::uint16_t ctx;  // plane * 16 + bucket, or kRunContext
  std::uint16_t u;
  std::uint8_t row;
};

struct TileRecord {
  std::vector<Sym> syms;
  int height = 0;
  std::uint64_t rice_row_bytes = 0;  // the row streams as coded today
  std::uint64_t rice_params = 0;     // k tables (8 bytes per coded plane) and run_k
};

// Walks one coded tile as the CPU decoder does (rows in order, §6), recording every Rice value.
bool walk_tile(const std::uint8_t* tile, std::uint32_t size, int w, int h, int channels, TileRecord& rec) {
  core::CodedTileParams t;
  if (core::parse_coded_tile(tile, size, w, h, channels, 2, t) != core::kOk) return false;
  rec.height = h;
  for (int p = 0; p < t.channels; ++p) rec.rice_params += t.plane[p].constant ? 0 : 8;
  rec.rice_params += t.run_mode ? 1 : 0;
  const int ch = t.channels;
  std::vector<int> val(std::size_t(w) * h * ch), code(val.size());
  auto at = [&](int r, int c, int p) { return (std::size_t(r) * w + c) * ch + p; };
  for (int r = 0; r < h; ++r) {
    rec.rice_row_bytes += t.row_length[r];
    core::LaneState s;
    core::lane_begin(s, tile, t, r);
    for (int c = 0; c < w; ++c) {
      const core::Neighbours nb = l3bench::neighbours_at(t, val, code, w, r, c);
      const bool zero = core::zero_run_step(
          t, s, c,
          [&] { return l3bench::codes_zero(nb, ch); },
          [&](core::BitReader& br, int k) {
            const std::uint32_t run = core::read_rice(br, k);
            rec.syms.push_back({std::uint16_t(kRunContext), std::uint16_t(run), std::uint8_t(r)});
            return run;
          });
      for (int p = 0; p < ch; ++p) {
        const core::PlaneParams& pp = t.plane[p];
        const int pred = core::predict(pp.pred, nb.w[p], nb.n[p], nb.nw[p], pp.range.lo, pp.range.hi);
        std::uint32_t u = 0;
        if (!zero && !pp.constant) {
          const int a = core::activity(nb.uw[p], nb.un[p], nb.unw[p]);
          u = core::read_rice(s.br, core::k_for_activity(pp, a));
          rec.syms.push_back({std::uint16_t(p * 16 + core::bucket_of(a)), std::uint16_t(u), std::uint8_t(r)});
        }
        val[at(r, c, p)] = pred + core::unzigzag(u);
        code[at(r, c, p)] = int(u);
      }
      if (!zero) s.blocked = false;
    }
    if (core::lane_end(s, t.row_length[r]) != core::kOk) return false;
  }
  return true;
}

// Context maps: the buckets of a plane merged into groups (run lengths keep their own context).
using Grouping = std::array<int, 16>;
const Grouping kG16 = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
const Grouping kG8 = {0, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 7, 7};
const Grouping kG4 = {0, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
const Grouping kG2 = {0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
const Grouping kG1 = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
int map_ctx(int ctx, const Grouping& g) { return ctx == kRunContext ? kRunContext : (ctx / 16) * 16 + g[ctx % 16]; }

using Hist = std::vector<std::array<std::uint32_t, kTokens>>;  // [context][token]

// Counts quantised to 12 bits: sum 4096, each used token >= 1.
std::array<std::uint32_t, kTokens> quantise(const std::array<std::uint32_t, kTokens>& h) {
  std::array<std::uint32_t, kTokens> f{};
  std::uint64_t n = 0;
  for (auto v : h) n += v;
  if (!n) return f;
  std::int64_t sum = 0;
  int big = 0;
  for (int i = 0; i < kTokens; ++i) {
    if (!h[i]) continue;
    f[i] = std::max<std::uint32_t>(1, std::uint32_t(std::llround(double(h[i]) * 4096.0 / double(n))));
    sum += f[i];
    if (h[i] > h[big]) big = i;
  }
  // Fix the sum on the largest entries (never below 1).
  while (sum != 4096) {
    int j = big;
    if (sum > 4096) {
      for (int i = 0; i < kTokens; ++i)
        if (f[i] > f[j]) j = i;
      if (f[j] <= 1) break;
      --f[j];
      --sum;
    } else {
      ++f[j];
      ++sum;
    }
  }
  return f;
}

double table_bits(const Hist& hist) {
  double bits = 0;
  for (const auto& h : hist) {
    bits += 1;
    const auto f = quantise(h);
    int a = 0;
    for (int i = 0; i < kTokens; ++i)
      if (f[i]) a = i + 1;
    if (!a) continue;
    bits += 5;
    for (int i = 0; i < a; ++i) {
      const int e = f[i] ? 32 - core::clz32(f[i]) : 0;
      bits += 4 + (e > 1 ? e - 1 : 0);
    }
  }
  return bits;
}

// Cost tables (-log2 of quantised probability) per context.
std::vector<std::array<double, kTokens>> costs_of(const Hist& hist) {
  std::vector<std::array<double, kTokens>> c(hist.size());
  for (std::size_t x = 0; x < hist.size(); ++x) {
    const auto f = quantise(hist[x]);
    for (int i = 0; i < kTokens; ++i) c[x][i] = f[i] ? 12.0 - std::log2(double(f[i])) : 1e9;
  }
  return c;
}

void add_hist(Hist& h, const TileRecord& t, const Grouping& g) {
  for (const Sym& s : t.syms) ++h[std::size_t(map_ctx(s.ctx, g))][std::size_t(tokenize(s.u).token)];
}

// Bytes of a tile's rows coded with the given cost tables and its table bytes (0: shared).
double ans_rows_bytes(const TileRecord& t, const std::vector<std::array<double, kTokens>>& cost, const Grouping& g,
                      int state_bytes) {
  std::vector<double> row_bits(std::size_t(t.height), 0.0);
  for (const Sym& s : t.syms) {
    const Token k = tokenize(s.u);
    row_bits[s.row] += cost[std::size_t(map_ctx(s.ctx, g))][std::size_t(k.token)] + k.raw_bits;
  }
  double bytes = 0;
  for (double b : row_bits) bytes += std::ceil(b * 1.001 / 8) + state_bytes;
  return bytes;
}

struct Variant {
  const char* name;
  const Grouping* g;
  bool image_tables;
};
const Variant kVariants[] = {
    {"tile16", &kG16, false}, {"tile8", &kG8, false}, {"tile4", &kG4, false}, {"tile2", &kG2, false}, {"tile1", &kG1, false},
    {"img16", &kG16, true},   {"img8", &kG8, true},   {"img4", &kG4, true},
};

}  // namespace

int main(int argc, char** argv) {
  int state_bytes = 4;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--state-bytes" && i + 1 < argc) state_bytes = std::atoi(argv[++i]);
    else files.push_back(a);
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: entropy_probe [--state-bytes N] IMAGE...\n");
    return 2;
  }
  std::printf("file\tpixels\tl3_bytes\trice_rows\trice_params\tsamples\tzero_samples");
  for (const Variant& v : kVariants) std::printf("\t%s\t%s_min", v.name, v.name);
  std::printf("\ttile_any_min");
  std::printf("\n");
  for (const std::string& file : files) {
    try {
      const l3::Image img = l3::load_image(file);
      l3::EncodeOptions rice_v2;  // the walk parses version 2 tiles
      rice_v2.entropy_coding = rice_v2.zero_rows = rice_v2.tile_copies = rice_v2.plane_contexts = false;
      const std::vector<std::uint8_t> enc = l3::encode(img.view(), rice_v2);
      const std::uint8_t* s = enc.data();
      const std::uint32_t tw = 1u << s[16], th = s[17];
      const std::uint32_t tx = (img.width + tw - 1) / tw, ty = (img.height + th - 1) / th;
      std::size_t off = core::kHeaderSize + 4 * std::size_t(tx) * ty;
      std::vector<TileRecord> tiles;
      std::uint64_t rice_rows = 0, rice_params = 0, samples = 0, zeros = 0;
      for (std::uint32_t i = 0; i < tx * ty; ++i) {
        std::uint32_t size;
        std::memcpy(&size, s + core::kHeaderSize + 4 * i, 4);
        const std::uint32_t x = (i % tx) * tw, y = (i / tx) * th;
        const int w = int(std::min(tw, img.width - x)), h = int(std::min(th, img.height - y));
        if ((s[off] & 3) == core::kTileCoded) {
          TileRecord rec;
          if (!walk_tile(s + off, size, w, h, int(img.channels), rec)) throw std::runtime_error("walk failed");
          rice_rows += rec.rice_row_bytes;
          rice_params += rec.rice_params;
          for (const Sym& sy : rec.syms) {
            samples += sy.ctx != kRunContext;
            zeros += sy.ctx != kRunContext && sy.u == 0;
          }
          tiles.push_back(std::move(rec));
        }
        off += size;
      }
      std::printf("%s\t%llu\t%zu\t%llu\t%llu\t%llu\t%llu", file.c_str(),
                  (unsigned long long)(std::uint64_t(img.width) * img.height), enc.size(),
                  (unsigned long long)rice_rows, (unsigned long long)rice_params, (unsigned long long)samples,
                  (unsigned long long)zeros);
      const double base = double(enc.size()) - double(rice_rows) - double(rice_params);
      for (const Variant& v : kVariants) {
        double all = base, best = base;
        if (v.image_tables) {
          Hist h(kContexts, std::array<std::uint32_t, kTokens>{});
          for (const TileRecord& t : tiles) add_hist(h, t, *v.g);
          const auto cost = costs_of(h);
          const double table = std::ceil(table_bits(h) / 8);
          all += table;
          best += table;
          for (const TileRecord& t : tiles) {
            const double ans = ans_rows_bytes(t, cost, *v.g, state_bytes);
            all += ans;
            best += std::min(ans, double(t.rice_row_bytes + t.rice_params));
          }
        } else {
          for (const TileRecord& t : tiles) {
            Hist h(kContexts, std::array<std::uint32_t, kTokens>{});
            add_hist(h, t, *v.g);
            const double ans = ans_rows_bytes(t, costs_of(h), *v.g, state_bytes) + std::ceil(table_bits(h) / 8);
            all += ans;
            best += std::min(ans, double(t.rice_row_bytes + t.rice_params));
          }
        }
        std::printf("\t%.0f\t%.0f", all, best);
      }
      // Per tile, the cheapest of Rice and every grouping with tile tables.
      double any = base;
      for (const TileRecord& t : tiles) {
        double best = double(t.rice_row_bytes + t.rice_params);
        for (const Variant& v : kVariants) {
          if (v.image_tables) continue;
          Hist h(kContexts, std::array<std::uint32_t, kTokens>{});
          add_hist(h, t, *v.g);
          best = std::min(best, ans_rows_bytes(t, costs_of(h), *v.g, state_bytes) + std::ceil(table_bits(h) / 8) + 1);
        }
        any += best;
      }
      std::printf("\t%.0f\n", any);
      std::fflush(stdout);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", file.c_str(), e.what());
      return 1;
    }
  }
  return 0;
}
