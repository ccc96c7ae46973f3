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
// --contexts (spec §12, "Contexts from plane values, measured before building"): instead, the
// same values under other context sources, each with per-tile tables and with one table set per
// image: today's 4 groups of code activity (codes4); the activity of the neighbours' plane
// values |W - NW| + |N - NW| (values4) and + |NE - N| (values4_ne) in the same 4 groups; the
// signs (-, 0, +) of N - NW and NW - W (signs9), of NE - N, N - NW and NW - W (signs27), of N - NW
// (signs3_up) and of NE - N and N - NW (signs9_up), each times the 4 code groups; LOCO-I's
// gradient contexts (81 without NE, 729 with). Then per tile and plane the cheapest of its own
// codes4 tables and the image's tables of a source (one bit per plane to say which; the image's
// tables counted once), with every context a table (choice_tile_*) and with the image's contexts
// clustered greedily into 16 tables (_k16). NE is row r - 1, column c + 1 (on the first row W,
// in the last column N): a lag-2 wavefront's neighbour. Rows cost bits / 8 + state bytes + 0.5.
//
// --flips (spec §12, "Residual corrections"): the same values under today's contexts, corrected
// per gradient class first (see print_flips).
//
// Usage: entropy_probe [--state-bytes N] [--contexts | --flips] IMAGE...
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
  // Contexts from the neighbours' plane values instead of their codes (--contexts; a residual
  // code's, run lengths 0): the bucket of |W - NW| + |N - NW| (vbucket) and of that plus
  // |NE - N| (vbucket_ne), and LOCO-I's (JPEG-LS's) gradient context, the differences NE - N,
  // N - NW, NW - W each quantised to 9 levels by sign and the thresholds 1, 3, 7, 21
  // (gradients, 0..728; gradients_wn: the last two alone, 0..80).
  std::uint8_t vbucket = 0, vbucket_ne = 0;
  std::uint16_t gradients = 0, gradients_wn = 0;
};

struct TileRecord {
  std::vector<Sym> syms;
  int height = 0;
  std::uint64_t rice_row_bytes = 0;  // the row streams as coded today
  std::uint64_t rice_params = 0;     // k tables (8 bytes per coded plane) and run_k
};

// The NE neighbour's plane value (row r - 1, column c + 1) with the edge rules a lag-2 wavefront
// would have: on the tile's first row NE = W (as N and NW), in its last column NE = N.
int north_east(const core::CodedTileParams& t, const std::vector<int>& val, int width, int r, int c, int p,
               const core::Neighbours& nb) {
  if (r == 0) return nb.w[p];
  if (c + 1 >= width) return nb.n[p];
  return val[(std::size_t(r - 1) * width + std::size_t(c + 1)) * std::size_t(t.channels) + std::size_t(p)];
}

int gradient_level(int d) {
  const int a = d < 0 ? -d : d;
  const int q = (a >= 1) + (a >= 3) + (a >= 7) + (a >= 21);
  return 4 + (d < 0 ? -q : q);
}

void value_contexts(int w, int n, int nw, int ne, Sym& sym) {
  auto dist = [](int a, int b) { return a < b ? b - a : a - b; };
  const int a2 = dist(w, nw) + dist(n, nw), a3 = a2 + dist(ne, n);
  sym.vbucket = std::uint8_t(core::bucket_of(a2));
  sym.vbucket_ne = std::uint8_t(core::bucket_of(a3));
  sym.gradients_wn = std::uint16_t(gradient_level(n - nw) * 9 + gradient_level(nw - w));
  sym.gradients = std::uint16_t(gradient_level(ne - n) * 81 + sym.gradients_wn);
}

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
          Sym sym{std::uint16_t(p * 16 + core::bucket_of(a)), std::uint16_t(u), std::uint8_t(r)};
          value_contexts(nb.w[p], nb.n[p], nb.nw[p], north_east(t, val, w, r, c, p, nb), sym);
          rec.syms.push_back(sym);
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

// ---- --contexts: where a value's context comes from (spec §12, "Contexts from plane values") ----
//
// Each source maps a residual code to one of `per_plane` contexts of its plane; run lengths keep
// their one context in every source. Costs as above (tokens under 12-bit quantised tables, table
// bits), but a row's bytes are its bits / 8 plus state_bytes + 0.5 (the same for every source).
int group4(int bucket) { return core::ans_group_of_bucket(bucket); }  // version 3's 4 groups (kG4)
int sign_level(int gradient_level) { return gradient_level < 4 ? 0 : gradient_level == 4 ? 1 : 2; }

struct Source {
  const char* name;
  int per_plane;
  int (*local)(const Sym&);  // the context within the plane
  // Its name in the choice_tile_ columns, when it is a candidate for one table set per image
  // (nullptr: not), and whether its contexts are clustered into 16 tables there too (_k16).
  const char* choice = nullptr;
  bool clustered = false;
};
const Source kSources[] = {
    {"codes4", 4, [](const Sym& s) { return group4(s.ctx % 16); }},
    {"values4", 4, [](const Sym& s) { return group4(s.vbucket); }},
    {"values4_ne", 4, [](const Sym& s) { return group4(s.vbucket_ne); }},
    {"signs9_codes4", 36,
     [](const Sym& s) { return (sign_level(s.gradients_wn / 9) * 3 + sign_level(s.gradients_wn % 9)) * 4 + group4(s.ctx % 16); },
     "signs9", true},
    {"signs27_codes4", 108,
     [](const Sym& s) {
       const int g = s.gradients;
       return ((sign_level(g / 81) * 3 + sign_level(g / 9 % 9)) * 3 + sign_level(g % 9)) * 4 + group4(s.ctx % 16);
     },
     "signs27", true},
    {"signs3_up_codes4", 12, [](const Sym& s) { return sign_level(s.gradients_wn / 9) * 4 + group4(s.ctx % 16); },
     "signs3_up", true},
    {"signs9_up_codes4", 36,
     [](const Sym& s) {
       return (sign_level(s.gradients / 81) * 3 + sign_level(s.gradients / 9 % 9)) * 4 + group4(s.ctx % 16);
     },
     "signs9_up", true},
    {"gradients81", 81, [](const Sym& s) { return int(s.gradients_wn); }},
    {"gradients729_ne", 729, [](const Sym& s) { return int(s.gradients); }, "gradients729"},  // too many to cluster
};
constexpr int kSourceCount = int(sizeof kSources / sizeof kSources[0]);

int source_ctx(const Source& src, const Sym& s) {
  return s.ctx == kRunContext ? 4 * src.per_plane : (s.ctx / 16) * src.per_plane + src.local(s);
}

Hist source_hist(const Source& src, const TileRecord& t) {
  Hist h(std::size_t(4 * src.per_plane + 1), std::array<std::uint32_t, kTokens>{});
  for (const Sym& s : t.syms) ++h[std::size_t(source_ctx(src, s))][std::size_t(tokenize(s.u).token)];
  return h;
}

// Bits per plane (index 4: run lengths) of a tile's values under cost tables `cost`, plus the
// table bits of `tables` (per plane, its contexts'), when given.
// `cluster`, when given, maps each context to the table that codes it.
std::array<double, 5> plane_bits(const Source& src, const TileRecord& t, const std::vector<std::array<double, kTokens>>& cost,
                                 const Hist* tables, const std::vector<int>* cluster = nullptr) {
  std::array<double, 5> bits{};
  for (const Sym& s : t.syms) {
    const Token k = tokenize(s.u);
    const int plane = s.ctx == kRunContext ? 4 : s.ctx / 16;
    int x = source_ctx(src, s);
    if (cluster) x = (*cluster)[std::size_t(x)];
    bits[std::size_t(plane)] += cost[std::size_t(x)][std::size_t(k.token)] + k.raw_bits;
  }
  if (tables)
    for (int plane = 0; plane <= 4; ++plane) {
      const int n = plane == 4 ? 1 : src.per_plane;
      const auto first = tables->begin() + plane * src.per_plane;
      bits[std::size_t(plane)] += table_bits(Hist(first, first + n));
    }
  return bits;
}

double entropy_bits(const std::array<std::uint64_t, kTokens>& h) {
  std::uint64_t n = 0;
  double sum = 0;
  for (auto v : h) {
    n += v;
    if (v) sum += double(v) * std::log2(double(v));
  }
  return n ? double(n) * std::log2(double(n)) - sum : 0.0;
}

// JPEG XL's context clustering, greedily: the residual contexts of `h` (all but the last, run
// lengths, which keeps a table of its own) merged pairwise, cheapest first (the merged counts'
// entropy minus the two parts'), until `k` tables remain. Returns context -> table (0..k).
std::vector<int> cluster_contexts(const Hist& h, int k) {
  const int n = int(h.size()) - 1;
  std::vector<std::array<std::uint64_t, kTokens>> c(static_cast<std::size_t>(n));
  std::vector<int> of(static_cast<std::size_t>(n));  // context -> cluster representative
  std::vector<int> alive;
  for (int i = 0; i < n; ++i) {
    for (int t = 0; t < kTokens; ++t) c[std::size_t(i)][std::size_t(t)] = h[std::size_t(i)][std::size_t(t)];
    of[std::size_t(i)] = i;
    bool used = false;
    for (auto v : h[std::size_t(i)]) used |= v != 0;
    if (used) alive.push_back(i);
  }
  auto merged_cost = [&](int a, int b) {
    std::array<std::uint64_t, kTokens> m{};
    for (int t = 0; t < kTokens; ++t) m[std::size_t(t)] = c[std::size_t(a)][std::size_t(t)] + c[std::size_t(b)][std::size_t(t)];
    return entropy_bits(m) - entropy_bits(c[std::size_t(a)]) - entropy_bits(c[std::size_t(b)]);
  };
  // Merge costs of every pair of live clusters, kept up to date: a merge changes only the
  // merged cluster's row.
  const std::size_t m = alive.size();
  std::vector<double> delta(m * m, 0.0);
  std::vector<char> live(m, 1);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = i + 1; j < m; ++j) delta[i * m + j] = merged_cost(alive[i], alive[j]);
  for (std::size_t left = m; int(left) > k; --left) {
    double best = 1e300;
    std::size_t ba = 0, bb = 1;
    for (std::size_t i = 0; i < m; ++i) {
      if (!live[i]) continue;
      for (std::size_t j = i + 1; j < m; ++j)
        if (live[j] && delta[i * m + j] < best) best = delta[i * m + j], ba = i, bb = j;
    }
    const int a = alive[ba], b = alive[bb];
    for (int t = 0; t < kTokens; ++t) c[std::size_t(a)][std::size_t(t)] += c[std::size_t(b)][std::size_t(t)];
    for (int& o : of)
      if (o == b) o = a;
    live[bb] = 0;
    for (std::size_t j = 0; j < m; ++j) {
      if (!live[j] || j == ba) continue;
      const double d = merged_cost(a, alive[j]);
      delta[std::min(ba, j) * m + std::max(ba, j)] = d;
    }
  }
  std::vector<int> kept;
  for (std::size_t i = 0; i < m; ++i)
    if (live[i]) kept.push_back(alive[i]);
  alive = kept;
  std::vector<int> table(static_cast<std::size_t>(n) + 1, 0);
  for (int i = 0; i < n; ++i) {
    const auto it = std::find(alive.begin(), alive.end(), of[std::size_t(i)]);
    table[std::size_t(i)] = it == alive.end() ? 0 : int(it - alive.begin());
  }
  table[std::size_t(n)] = k;  // run lengths
  return table;
}

// Prints, per source, the image's bytes with per-tile tables, then with one table set per image;
// then per tile and plane the cheaper of codes4 and values4 (one bit per plane to say which),
// and of codes4, values4 and values4_ne; then, for each source marked `clustered`, per tile and
// plane its own codes4 tables or the image's clustered into 16 (a context -> table map of 4 bits
// per context); then the same with every context a table for each source with a `choice`. (The
// image's tables are counted once, though the tiles that keep their own would change the shared
// statistics: an estimate.)
void print_contexts(const std::vector<TileRecord>& tiles, double base, int state_bytes) {
  double rows = 0;
  for (const TileRecord& t : tiles) rows += t.height;
  const double row_bytes = rows * (state_bytes + 0.5);
  auto print_bytes = [&](double bits) { std::printf("\t%.0f", base + row_bytes + bits / 8); };
  std::vector<std::vector<std::array<double, 5>>> tile_bits(kSourceCount);   // [source][tile]
  std::vector<std::vector<std::array<double, 5>>> image_bits(kSourceCount);  // [source][tile], image tables
  std::vector<Hist> image(kSourceCount);                                     // [source]: the image's counts
  for (int i = 0; i < kSourceCount; ++i) {
    const Source& src = kSources[i];
    image[std::size_t(i)].assign(std::size_t(4 * src.per_plane + 1), std::array<std::uint32_t, kTokens>{});
    double tile_total = 0;
    for (const TileRecord& t : tiles) {
      const Hist h = source_hist(src, t);
      tile_bits[std::size_t(i)].push_back(plane_bits(src, t, costs_of(h), &h));
      for (double x : tile_bits[std::size_t(i)].back()) tile_total += x;
      for (std::size_t x = 0; x < h.size(); ++x)
        for (int k = 0; k < kTokens; ++k) image[std::size_t(i)][x][std::size_t(k)] += h[x][std::size_t(k)];
    }
    const auto cost = costs_of(image[std::size_t(i)]);
    double image_total = table_bits(image[std::size_t(i)]);
    for (const TileRecord& t : tiles) {
      image_bits[std::size_t(i)].push_back(plane_bits(src, t, cost, nullptr));
      for (double x : image_bits[std::size_t(i)].back()) image_total += x;
    }
    print_bytes(tile_total);
    print_bytes(image_total);
  }
  // Per tile and plane the cheapest of `bits[0 .. n)` (each [tile][plane]), one bit a plane to say which.
  auto choice_bits = [&](std::initializer_list<const std::vector<std::array<double, 5>>*> bits) {
    double total = 0;
    for (std::size_t t = 0; t < tiles.size(); ++t)
      for (int plane = 0; plane <= 4; ++plane) {
        double best = 1e300;
        for (const auto* b : bits) best = std::min(best, (*b)[t][std::size_t(plane)]);
        total += best + (plane < 4 ? 1 : 0);
      }
    return total;
  };
  print_bytes(choice_bits({&tile_bits[0], &tile_bits[1]}));
  print_bytes(choice_bits({&tile_bits[0], &tile_bits[1], &tile_bits[2]}));
  for (int i = 0; i < kSourceCount; ++i) {
    if (!kSources[i].clustered) continue;
    constexpr int kTables = 16;
    const Hist& counts = image[std::size_t(i)];
    const std::vector<int> cluster = cluster_contexts(counts, kTables);
    Hist clustered(kTables + 1, std::array<std::uint32_t, kTokens>{});
    for (std::size_t x = 0; x < counts.size(); ++x)
      for (int k = 0; k < kTokens; ++k) clustered[std::size_t(cluster[x])][std::size_t(k)] += counts[x][std::size_t(k)];
    const auto cost = costs_of(clustered);
    std::vector<std::array<double, 5>> bits;
    for (const TileRecord& t : tiles) bits.push_back(plane_bits(kSources[i], t, cost, nullptr, &cluster));
    print_bytes(table_bits(clustered) + 4.0 * double(counts.size()) + choice_bits({&tile_bits[0], &bits}));
  }
  for (int i = 0; i < kSourceCount; ++i)
    if (kSources[i].choice) print_bytes(table_bits(image[std::size_t(i)]) + choice_bits({&tile_bits[0], &image_bits[std::size_t(i)]}));
}


// ---- --flips: residual corrections by gradient class (spec §12, "Residual corrections") ----
//
// Today's contexts and per-tile tables (codes4), but each residual first corrected by the class of
// its neighbourhood: per tile (or per image, _img) and plane and class, its sign flipped where the
// class's residuals are more often negative than positive (flip_), and before that, with bias_,
// the class's median residual subtracted (clamped to -3..3, or to -1..1 with bias1_). Charged 1
// bit a class for a flip, 4 bits (3 with bias1_) for a bias and a flip; _choice: per tile and plane
// with or without (1 bit). Classes: the signs (-, 0, +) of N - NW (up3), of NW - W (w3), both
// (wn9); both with |d| <= 1 as 0 (t1); 5 levels each (l5: <= -3, -2..-1, 0, 1..2, >= 3); LOCO-I's
// 81 gradient classes (g81); the signs of NE - N, N - NW and NW - W (ne27, a lag-2 wavefront's).
int sign_up(const Sym& s) { return sign_level(s.gradients_wn / 9); }
int sign_w(const Sym& s) { return sign_level(s.gradients_wn % 9); }
int signs_wn9(const Sym& s) { return sign_up(s) * 3 + sign_w(s); }
int tsign(int g) { return g < 3 ? 0 : g > 5 ? 2 : 1; }  // |d| <= 1 counts as 0
int level5(int g) { return g < 3 ? 0 : g == 3 ? 1 : g == 4 ? 2 : g == 5 ? 3 : 4; }
int signs_ne27(const Sym& s) { return (sign_level(s.gradients / 81) * 3 + sign_up(s)) * 3 + sign_w(s); }

struct FlipRule {
  const char* name;
  int classes;
  int (*cls)(const Sym&);
  bool image;           // one set of corrections per image instead of per tile
  bool bias = false;    // also a per-class bias (the median residual)
  int most = 3;         // the bias's largest magnitude
  bool choice = false;  // per tile and plane: with or without (1 bit)
};
const FlipRule kFlips[] = {
    {"flip_up3", 3, sign_up, false},
    {"flip_w3", 3, sign_w, false},
    {"flip_wn9", 9, signs_wn9, false},
    {"flip_wn9_img", 9, signs_wn9, true},
    {"flip_g81", 81, [](const Sym& s) { return int(s.gradients_wn); }, false},
    {"flip_g81_img", 81, [](const Sym& s) { return int(s.gradients_wn); }, true},
    {"bias_wn9", 9, signs_wn9, false, true},
    {"bias_g81", 81, [](const Sym& s) { return int(s.gradients_wn); }, false, true},
    {"bias_g81_img", 81, [](const Sym& s) { return int(s.gradients_wn); }, true, true},
    {"bias1_wn9", 9, signs_wn9, false, true, 1},
    {"bias1_wn9_choice", 9, signs_wn9, false, true, 1, true},
    {"flip_wn9_choice", 9, signs_wn9, false, false, 1, true},
    {"bias1_t1_choice", 9, [](const Sym& s) { return tsign(s.gradients_wn / 9) * 3 + tsign(s.gradients_wn % 9); }, false,
     true, 1, true},
    {"bias1_l5_choice", 25, [](const Sym& s) { return level5(s.gradients_wn / 9) * 5 + level5(s.gradients_wn % 9); },
     false, true, 1, true},
    {"bias3_l5_choice", 25, [](const Sym& s) { return level5(s.gradients_wn / 9) * 5 + level5(s.gradients_wn % 9); },
     false, true, 3, true},
    {"bias1_ne27_choice", 27, signs_ne27, false, true, 1, true},
    {"flip_ne27", 27, signs_ne27, false},
};

// Prints codes4_tile's bytes, then each rule's.
void print_flips(const std::vector<TileRecord>& tiles, double base, int state_bytes) {
  double rows = 0;
  for (const TileRecord& t : tiles) rows += t.height;
  const double row_bytes = rows * (state_bytes + 0.5);
  const Source& codes4 = kSources[0];
  auto tile_cost = [&](const TileRecord& t) {
    const Hist h = source_hist(codes4, t);
    double b = 0;
    for (double x : plane_bits(codes4, t, costs_of(h), &h)) b += x;
    return b;
  };
  double plain = 0;
  for (const TileRecord& t : tiles) plain += tile_cost(t);
  std::printf("\t%.0f", base + row_bytes + plain / 8);
  for (const FlipRule& f : kFlips) {
    // Per class: the median residual (bias rules), then the sign of the majority.
    auto decide = [&](const std::vector<const TileRecord*>& set, std::vector<int>& shift, std::vector<long>& sign) {
      const std::size_t n = std::size_t(4 * f.classes);
      shift.assign(n, 0);
      sign.assign(n, 0);
      if (f.bias) {
        std::vector<std::array<long, 7>> hist(n, std::array<long, 7>{});
        std::vector<long> count(n, 0);
        for (const TileRecord* t : set)
          for (const Sym& s : t->syms)
            if (s.ctx != kRunContext) {
              const std::size_t x = std::size_t(s.ctx / 16 * f.classes + f.cls(s));
              ++count[x];
              ++hist[x][std::size_t(std::clamp(core::unzigzag(s.u), -3, 3) + 3)];
            }
        for (std::size_t x = 0; x < n; ++x) {
          long acc = 0;
          for (int b = 0; b < 7; ++b) {
            acc += hist[x][std::size_t(b)];
            if (2 * acc >= count[x]) { shift[x] = std::clamp(b - 3, -f.most, f.most); break; }
          }
        }
      }
      for (const TileRecord* t : set)
        for (const Sym& s : t->syms)
          if (s.ctx != kRunContext) {
            const std::size_t x = std::size_t(s.ctx / 16 * f.classes + f.cls(s));
            const int e = core::unzigzag(s.u) - shift[x];
            sign[x] += e < 0 ? 1 : e > 0 ? -1 : 0;
          }
    };
    std::vector<int> img_shift;
    std::vector<long> img_sign;
    if (f.image) {
      std::vector<const TileRecord*> all;
      for (const TileRecord& t : tiles) all.push_back(&t);
      decide(all, img_shift, img_sign);
    }
    double total = 0;
    for (const TileRecord& t : tiles) {
      std::vector<int> shift = img_shift;
      std::vector<long> sign = img_sign;
      if (!f.image) decide({&t}, shift, sign);
      TileRecord m = t;
      int planes = 0;
      for (Sym& s : m.syms)
        if (s.ctx != kRunContext) {
          planes = std::max(planes, s.ctx / 16 + 1);
          const std::size_t x = std::size_t(s.ctx / 16 * f.classes + f.cls(s));
          int e = core::unzigzag(s.u) - shift[x];
          if (sign[x] > 0) e = -e;
          s.u = std::uint16_t(core::zigzag(e));
        }
      const double class_bits = f.bias ? (f.most == 1 ? 3 : 4) : 1;
      if (f.choice) {
        const Hist h0 = source_hist(codes4, t), h1 = source_hist(codes4, m);
        const auto b0 = plane_bits(codes4, t, costs_of(h0), &h0), b1 = plane_bits(codes4, m, costs_of(h1), &h1);
        for (int p = 0; p < 5; ++p)
          total += p < planes ? std::min(b0[std::size_t(p)], b1[std::size_t(p)] + f.classes * class_bits) + 1 : b0[std::size_t(p)];
        continue;
      }
      total += tile_cost(m) + (f.image ? 0 : planes * f.classes * class_bits);
    }
    if (f.image) total += 4 * f.classes * (f.bias ? 4 : 1);
    std::printf("\t%.0f", base + row_bytes + total / 8);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int state_bytes = 4;
  bool contexts = false, flips = false;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--state-bytes" && i + 1 < argc) state_bytes = std::atoi(argv[++i]);
    else if (a == "--contexts") contexts = true;
    else if (a == "--flips") flips = true;
    else files.push_back(a);
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: entropy_probe [--state-bytes N] [--contexts | --flips] IMAGE...\n");
    return 2;
  }
  std::printf("file\tpixels\tl3_bytes\trice_rows\trice_params\tsamples\tzero_samples");
  if (flips) {
    std::printf("\tcodes4_tile");
    for (const FlipRule& f : kFlips) std::printf("\t%s", f.name);
    std::printf("\n");
  } else if (contexts) {
    for (const Source& src : kSources) std::printf("\t%s_tile\t%s_image", src.name, src.name);
    std::printf("\tchoice_codes_values\tchoice_codes_values_ne");
    for (const Source& src : kSources)
      if (src.clustered) std::printf("\tchoice_tile_%s_k16", src.choice);
    for (const Source& src : kSources)
      if (src.choice) std::printf("\tchoice_tile_%s", src.choice);
    std::printf("\n");
  } else {
    for (const Variant& v : kVariants) std::printf("\t%s\t%s_min", v.name, v.name);
    std::printf("\ttile_any_min\n");
  }
  for (const std::string& file : files) {
    try {
      const l3::Image img = l3::load_image(file);
      l3::EncodeOptions rice_v2;  // the walk parses version 2 tiles
      rice_v2.entropy_coding = rice_v2.zero_rows = rice_v2.tile_copies = rice_v2.plane_contexts = rice_v2.corrections = false;
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
      if (flips) {
        print_flips(tiles, base, state_bytes);
        std::printf("\n");
        std::fflush(stdout);
        continue;
      }
      if (contexts) {
        print_contexts(tiles, base, state_bytes);
        std::printf("\n");
        std::fflush(stdout);
        continue;
      }
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
