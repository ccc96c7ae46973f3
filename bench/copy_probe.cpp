// copy_probe: what pixel copies (LZ77-like matches) and colour caches inside a tile would save
// over today's streams, measured before anyone builds them (issue 12, spec/codec.md §12).
//
// Step 1, the bits of today's stream per pixel. Each image is encoded with l3::encode defaults;
// every coded tile is walked through the shared core (l3/codec/tile_core.hpp) as the decoder does
// (rows in order, §6-§7), its pixels rebuilt and compared with the source (a mismatch exits 1).
// Each pixel is charged the bits its codes took: Rice codes exactly (bits consumed); rANS tokens
// -log2(f / 4096) plus their raw bits; zero rows 0; a zero run's length is spread over the run's
// pixels. A row's fixed costs (padding to a byte; a rANS row's 32-bit state and whatever its final
// state holds) are charged to the row: row bytes * 8 - the row's pixel bits. Check: a Rice row's
// fixed part must be its padding (0-7 bits, exactly), a rANS row's between 0 and kAnsRowSlack
// bits (32 bits of state, up to 16 bits still in the final state, rounding); any other row exits 1.
//
// Step 2, a greedy parse of each row, left to right, with one family of sources at a time:
//   A(D)  the same row, c' = c - d, 1 <= d <= D (a ring of D pixels per lane);
//   B(R)  an earlier row of the tile, r - R <= r' < r, with the wavefront constraint of §8
//         r' + c' < r + c (the same for every pixel of the match, which thus decodes after its
//         source); R = 31: any earlier row; B4w: R = 4 and c - c' <= 16 (lane r' then needs
//         only its last 16 + (r - r') pixels: a ring per lane that the lanes below read);
//   Ring  every source the GPU's output ring already holds (see kRingColumns), Ring4 its rows
//         r - 4 .. r;
//   C(k)  a colour cache per row (WebP's: slot (0x1e35a7bd * colour) >> (32 - k)), updated with
//         every pixel of the row in order, a literal alternative to the coded pixel;
// and combinations. At (r, c) (a decision point: not inside a zero run or zero row) every source
// found through a hash chain of the Lmin pixels starting there (at most --chain candidates, most
// recent first) is extended to its longest match (all channels equal, L >= Lmin, inside the row);
// the one that saves the most bits is taken if it saves any, else a cache hit if that saves, else
// the pixel stays a literal. Cost model (per tile):
//   - match: length Elias-gamma(L - Lmin + 1) bits + distance bits, in one of two codes:
//       u: uniform, log2 of the number of sources the family allows at (r, c);
//       m: the empirical entropy of the tile's distance symbols (dy, dx) plus a table (per used
//          symbol: log2 of the family's largest choice count + Elias-gamma of its count);
//   - cache hit: k bits (the slot);
//   - decision per decision point (literal / match / cache): the tile's empirical entropy H(p);
//   - 1 bit per tile: copies used or not (a tile keeps today's bytes where they are smaller).
//   A matched or cached pixel saves the bits step 1 charged it. The parse runs twice per tile:
//   first with fixed guesses (decision 0.2 / 4 / 4 bits) and code u (-> the u projection), then
//   with the decision and distance costs measured on the first parse (-> the m projection);
//   "best" takes per tile the better of the two (1 bit more).
// Approximations, ignored: a match changes the zero runs (a run cut by a match, a match starting
// inside a run is not tried), the rANS tables and states, and the contexts of later pixels (their
// values are the same, so their predictions are; their codes could be recomputed from the values).
// Raw and constant tiles keep their bytes.
//
// Output: one tab-separated line per image (header line first: PNG level 6 and l3 bytes, step 1's
// totals and check, projected bytes per family in codes u, m and best, then T: the bytes left after
// whole-tile copies, and T + each family, best code), then markdown tables: today's bytes by part,
// and per class and per image (images above 1.05x PNG today, and the Plasma wallpapers) bytes /
// PNG, PNG level 6 by libpng through l3_imageio (as bench_inproc).
//
// Tile copies (version 5, spec §3.3) have no bytes and are not walked; --no-tile-copies encodes
// without them (version 4 streams, as the measurement in bench/results/codec-v2.md).
//
// Usage: copy_probe [--chain N] [--min-len L] [--no-tile-copies] IMAGE...
// (the class of an image is its directory)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "l3/codec/codec.hpp"
#include "l3/codec/tile_core.hpp"
#include "l3/codec/tile_grid.hpp"
#include "l3/imageio/image_io.hpp"
#include "probe_walk.hpp"

namespace {

namespace core = l3::core;

// A rANS row's fixed bits: the 32-bit state, up to 16 bits left in the final state, the
// coder's rounding (a few hundredths of a bit per symbol at most): above this, step 1 is wrong.
constexpr double kAnsRowSlack = 48;

// ---- Step 1: bits per pixel -------------------------------------------------

struct TileBits {
  int w = 0, h = 0;
  std::uint32_t size = 0, header = 0;   // tile bytes; bytes before the row streams
  std::vector<std::uint32_t> colour;   // the source pixels, channels packed little-endian
  std::vector<double> bits;            // bits charged to each pixel
  std::vector<std::uint8_t> decision;  // a literal here is a decision point
  double pixel_bits = 0, fixed_bits = 0;
  double max_row_excess = 0;  // the largest |fixed part - its bound| of a row out of bounds, 0 if none
  int bad_rows = 0;
};

// The rANS read of core::ans_read, with its cost in bits (-log2(f / 4096) + raw bits).
std::uint32_t ans_read_cost(core::LaneState& s, const std::uint16_t* cum, double& bits) {
  const int t = core::ans_search(cum, s.ans & (core::kAnsTotal - 1));
  const std::uint32_t f = std::uint32_t(cum[t + 1]) - cum[t];
  bits = (f ? double(core::kAnsPrecisionBits) - std::log2(double(f)) : 0.0) + core::ans_raw_bits(t);
  return core::ans_decode_token(s, cum, t);
}

// Walks one coded tile row by row as the decoder does (spec §6-§7), charging bits to pixels;
// false if it does not parse or decode to the source pixels.
bool walk_tile(const std::uint8_t* tile, std::uint32_t size, const core::TileRect& rect, const l3::Image& img,
               int version, TileBits& tb) {
  const int w = int(rect.width), h = int(rect.height), ch_out = int(img.channels);
  core::CodedTileParams t;
  core::RowTable rt;
  if (core::parse_coded_header(tile, size, w, h, ch_out, version, t, rt) != core::kOk ||
      core::parse_coded_tile(tile, size, w, h, ch_out, version, t) != core::kOk)
    return false;
  tb.w = w;
  tb.h = h;
  tb.size = size;
  tb.header = rt.rows_at;
  const std::size_t n = std::size_t(w) * h;
  tb.colour.assign(n, 0);
  tb.bits.assign(n, 0.0);
  tb.decision.assign(n, 0);
  for (int r = 0; r < h; ++r)
    for (int c = 0; c < w; ++c)
      std::memcpy(&tb.colour[std::size_t(r) * w + c],
                  &img.pixels[((std::size_t(rect.y) + r) * img.width + rect.x + c) * img.channels], img.channels);
  const int ch = t.channels;
  std::vector<int> val(n * std::size_t(ch)), code(val.size());
  auto at = [&](int r, int c, int p) { return (std::size_t(r) * w + c) * ch + p; };
  for (int r = 0; r < h; ++r) {
    core::LaneState s;
    core::lane_begin(s, tile, t, r);
    const std::uint8_t* begin = tile + t.row_offset[r];
    double row_bits = 0, spread = 0;  // a zero run's length bits per pixel of the run
    int spread_left = 0;
    for (int c = 0; c < w; ++c) {
      const core::Neighbours nb = l3bench::neighbours_at(t, val, code, w, r, c);
      bool read_run = false;
      double run_bits = 0;
      const bool zero = core::zero_run_step(
          t, s, c,
          [&] { return l3bench::codes_zero(nb, ch); },
          [&](core::BitReader& br, int k) {
            read_run = true;
            if (t.ans) return ans_read_cost(s, t.ans_cum[core::kAnsRunContext], run_bits);
            const std::uint64_t b0 = br.consumed_bits(begin);
            const std::uint32_t v = core::read_rice(br, k);
            run_bits = double(br.consumed_bits(begin) - b0);
            return v;
          });
      double bits = 0;
      if (read_run && zero) {  // a run starts here: its length's bits spread over it
        spread_left = s.run_left + 1;
        spread = run_bits / spread_left;
      } else if (read_run) {
        bits += run_bits;  // a run of 0: the pixel's own
      }
      if (zero && spread_left > 0) bits += spread, --spread_left;
      // A decision point: where today's stream could code something else (not inside a run).
      tb.decision[std::size_t(r) * w + c] = !zero || read_run;
      for (int p = 0; p < ch; ++p) {
        const core::PlaneParams& pp = t.plane[p];
        const int pred = core::predict(pp.pred, nb.w[p], nb.n[p], nb.nw[p], pp.range.lo, pp.range.hi);
        std::uint32_t u = 0;
        if (!zero && !pp.constant) {
          const int k = core::k_for_activity(pp, core::activity(nb.uw[p], nb.un[p], nb.unw[p]));
          if (t.ans) {
            double b = 0;
            u = ans_read_cost(s, t.ans_cum[p * core::kAnsGroups + k], b);
            bits += b;
          } else {
            const std::uint64_t b0 = s.br.consumed_bits(begin);
            u = core::read_rice(s.br, k);
            bits += double(s.br.consumed_bits(begin) - b0);
          }
        }
        val[at(r, c, p)] = pred + core::unzigzag(u);
        code[at(r, c, p)] = int(u);
      }
      if (!zero) s.blocked = false;
      tb.bits[std::size_t(r) * w + c] = bits;
      row_bits += bits;
    }
    if (core::lane_end(s, t.row_length[r]) != core::kOk) return false;
    // The row's fixed part and its bound (see kAnsRowSlack).
    const double fixed = 8.0 * t.row_length[r] - row_bits;
    const bool zero_row = core::is_zero_row(t, r);
    const double lo = 0, hi = zero_row ? 0 : t.ans ? kAnsRowSlack : 7;
    if (fixed < lo - 1e-6 || fixed > hi + 1e-6) {
      ++tb.bad_rows;
      tb.max_row_excess = std::max(tb.max_row_excess, fixed < lo ? lo - fixed : fixed - hi);
    }
    if (!t.ans && !zero_row && std::fabs(fixed - double(8 * t.row_length[r] - s.br.consumed_bits(begin))) > 1e-6) {
      ++tb.bad_rows;  // Rice: the pixels' bits must be exactly the bits consumed
    }
    tb.pixel_bits += row_bits;
    tb.fixed_bits += fixed;
  }
  // The pixels, rebuilt from the plane values, must be the source's.
  for (int r = 0; r < h; ++r)
    for (int c = 0; c < w; ++c) {
      std::uint32_t word = 0;
      int v[core::kMaxChannels] = {};
      for (int p = 0; p < ch; ++p) v[p] = val[at(r, c, p)];
      if (t.palette_size) {
        if (!core::palette_word(tile, t, v[0], word)) return false;
      } else {
        std::uint8_t out[4] = {};
        if (!core::inverse_transform(t.transform, ch_out, v, out)) return false;
        std::memcpy(&word, out, std::size_t(ch_out));
      }
      if (ch_out < 4) word &= (1u << (8 * ch_out)) - 1;
      if (word != tb.colour[std::size_t(r) * w + c]) return false;
    }
  return true;
}

// ---- Step 2: the greedy parse -----------------------------------------------

struct Family {
  const char* name;
  int same_row;  // D: same-row distances 1..D (0: none)
  int above;     // R: rows r - R .. r - 1 (0: none; 31: all)
  int window;    // rows above: sources c' >= c - window only (0: any c'; kRingWindow: the ring's)
  int cache_k;   // colour cache of 2^k slots (0: none)
};
// The GPU's output ring (cuda/include/l3/cuda/wavefront.hpp, spec/cuda.md §2) keeps the last 64
// columns of every row of the tile; at step r + c, lane r' has written columns up to c + (r - r') - 1,
// so the ring still holds columns c + (r - r') - 64 .. c + (r - r') - 1 of row r' (and c - 63 ..
// c - 1 of row r itself): family "Ring" is every source the ring holds, no new shared memory;
// "Ring4" those of rows r - 4 .. r.
constexpr int kRingColumns = 64;
constexpr int kRingWindow = -1;
// Bw: rows above within a window of 16 columns: lane r' then needs only its last 16 + (r - r')
// pixels, a 20-pixel ring per lane that lanes below read (A16's ring, 4 more pixels).
const Family kFamilies[] = {
    {"A4", 4, 0, 0, 0},          {"A16", 16, 0, 0, 0},         {"A64", 64, 0, 0, 0},
    {"A256", 256, 0, 0, 0},      {"B", 0, 31, 0, 0},           {"A16+B4", 16, 4, 0, 0},
    {"A16+B4w", 16, 4, 16, 0},   {"A64+B4w", 64, 4, 64, 0},    {"C4", 0, 0, 0, 4},
    {"C6", 0, 0, 0, 6},          {"C8", 0, 0, 0, 8},           {"A16+B4w+C4", 16, 4, 16, 4},
    {"A64+B4w+C6", 64, 4, 64, 6}, {"A256+B+C8", 256, 31, 0, 8}, {"Ring", 63, 31, kRingWindow, 0},
    {"Ring4", 63, 4, kRingWindow, 0},   {"Ring+C4", 63, 31, kRingWindow, 4},
};
constexpr int kFamilyCount = int(sizeof kFamilies / sizeof kFamilies[0]);

// Sources of rows above lie at c - c' <= window_of(f, r - r') (0: anywhere left).
int window_of(const Family& f, int dr) { return f.window == kRingWindow ? kRingColumns - dr : f.window; }

double gamma_bits(std::uint32_t n) { return 2.0 * (31 - core::clz32(n)) + 1; }  // n >= 1

double entropy_bits(const std::vector<double>& counts) {  // total bits: n * H(p)
  double n = 0, bits = 0;
  for (double k : counts) n += k;
  for (double k : counts)
    if (k > 0) bits += k * std::log2(n / k);
  return bits;
}

// Distance symbol of a source (dy = r - r', dx = c' - c; dx in [-255, 30]).
int dist_symbol(int dy, int dx) { return dy * 512 + dx + 256; }

// Per-tile hash chains over the Lmin pixels starting at each position (row-major).
struct Chains {
  std::vector<int> prev;  // the previous position with the same hash, or -1
  void build(const TileBits& tb, int lmin) {
    constexpr int kHashBits = 14;
    std::vector<int> head(std::size_t(1) << kHashBits, -1);
    prev.assign(tb.colour.size(), -1);
    for (int r = 0; r < tb.h; ++r)
      for (int c = 0; c + lmin <= tb.w; ++c) {
        const int pos = r * tb.w + c;
        std::uint32_t hsh = 0;
        for (int i = 0; i < lmin; ++i) hsh = (hsh ^ tb.colour[std::size_t(pos + i)]) * 0x9E3779B1u;
        hsh >>= 32 - kHashBits;
        prev[std::size_t(pos)] = head[hsh];
        head[hsh] = pos;
      }
  }
};

// Decision and distance costs the parse assumes.
struct Model {
  double lit = 0.2, match = 4, cache = 4;
  const std::unordered_map<int, int>* dist = nullptr;  // measured symbols (code m), else uniform
  int dist_total = 0;
};

struct Parse {
  std::vector<double> decisions = {0, 0, 0};  // literal, match, cache hit
  double saved = 0, len_bits = 0, cache_bits = 0, uniform_dist_bits = 0;
  std::unordered_map<int, int> dist;  // symbol -> matches
};

// The number of sources family f allows at (r, c) of a tile w wide.
double choices(const Family& f, int w, int r, int c) {
  double n = std::min(f.same_row, c);
  for (int rr = std::max(0, r - f.above); rr < r && f.above; ++rr)
    n += std::min(w, c + r - rr) - (window_of(f, r - rr) ? std::max(0, c - window_of(f, r - rr)) : 0);
  return n;
}

double max_choices(const Family& f, int w, int h) {
  const int per_row = f.window == kRingWindow ? kRingColumns : f.window ? f.window + f.above : w;
  return double(f.same_row) + double(std::min(f.above, h - 1)) * std::min(w, per_row) + 1;
}

Parse parse_tile(const TileBits& tb, const Chains& chains, const Family& f, const Model& m, int lmin, int max_chain) {
  Parse out;
  const int w = tb.w;
  const bool copies = f.same_row || f.above;
  std::vector<double> pre(std::size_t(w) + 1);
  const std::uint32_t slots = f.cache_k ? 1u << f.cache_k : 0;
  std::vector<std::uint64_t> cache(slots);
  const double dist_max_bits = std::log2(max_choices(f, w, tb.h));
  auto dist_cost = [&](int sym, double uniform) {
    if (!m.dist) return uniform;
    const auto it = m.dist->find(sym);
    const double total = m.dist_total + 1.0;
    return it == m.dist->end() ? std::log2(total) + dist_max_bits : std::log2(total / it->second);
  };
  for (int r = 0; r < tb.h; ++r) {
    const std::size_t row = std::size_t(r) * w;
    pre[0] = 0;
    for (int c = 0; c < w; ++c) pre[std::size_t(c) + 1] = pre[std::size_t(c)] + tb.bits[row + c] + (tb.decision[row + c] ? m.lit : 0);
    std::fill(cache.begin(), cache.end(), ~std::uint64_t{0});
    auto slot = [&](std::uint32_t col) { return (0x1e35a7bdu * col) >> (32 - f.cache_k); };
    int c = 0;
    while (c < w) {
      const std::uint32_t col = tb.colour[row + c];
      if (!tb.decision[row + c]) {  // inside a run: stays as it is
        if (slots) cache[slot(col)] = col;
        ++c;
        continue;
      }
      double best = 0;
      int best_len = 0, best_sym = 0;
      double best_len_bits = 0, best_uniform = 0;
      // Nothing to save unless the rest of the row costs more than the cheapest match.
      if (copies && c + lmin <= w && pre[std::size_t(w)] - pre[std::size_t(c)] > 1 + m.match) {
        const double uniform = std::log2(std::max(1.0, choices(f, w, r, c)));
        int walked = 0;
        for (int cand = chains.prev[row + c]; cand >= 0 && walked < max_chain; cand = chains.prev[std::size_t(cand)]) {
          ++walked;
          const int rr = cand / w, cc = cand % w;
          if (rr == r) {
            if (c - cc > f.same_row) {
              if (!f.above) break;
              continue;
            }
          } else {
            if (r - rr > f.above) break;  // older candidates lie further up
            if (rr + cc >= r + c) continue;  // decoded after (r, c) on the wavefront (§8)
            if (window_of(f, r - rr) && c - cc > window_of(f, r - rr)) continue;
          }
          const std::size_t src = std::size_t(rr) * w + cc;
          int len = 0;
          while (c + len < w && cc + len < w && tb.colour[src + len] == tb.colour[row + c + len]) ++len;
          if (len < lmin) continue;
          const int sym = dist_symbol(r - rr, cc - c);
          const double lb = gamma_bits(std::uint32_t(len - lmin + 1));
          const double save = pre[std::size_t(c + len)] - pre[std::size_t(c)] - (lb + dist_cost(sym, uniform) + m.match);
          if (save > best) best = save, best_len = len, best_sym = sym, best_len_bits = lb, best_uniform = uniform;
          if (c + len == w) break;  // no longer match exists
        }
      }
      if (slots && cache[slot(col)] == col) {
        const double save = tb.bits[row + c] + m.lit - (f.cache_k + m.cache);
        if (save > best) best = save, best_len = -1;
      }
      if (best_len > 0) {
        out.decisions[1] += 1;
        out.len_bits += best_len_bits;
        out.uniform_dist_bits += best_uniform;
        ++out.dist[best_sym];
        for (int i = 0; i < best_len; ++i) {
          out.saved += tb.bits[row + c + i];
          if (slots) cache[slot(tb.colour[row + c + i])] = tb.colour[row + c + i];
        }
        c += best_len;
        continue;
      }
      if (best_len < 0) {
        out.decisions[2] += 1;
        out.cache_bits += f.cache_k;
        out.saved += tb.bits[row + c];
      } else {
        out.decisions[0] += 1;
      }
      if (slots) cache[slot(col)] = col;
      ++c;
    }
  }
  return out;
}

// Bits a tile saves with family f (>= 0): code u, and code m.
struct Saving {
  double u = 0, m = 0;
};

Saving tile_saving(const TileBits& tb, const Chains& chains, const Family& f, int lmin, int max_chain) {
  Saving s;
  Model m0;
  const Parse p0 = parse_tile(tb, chains, f, m0, lmin, max_chain);
  const double common0 = p0.len_bits + p0.cache_bits + entropy_bits(p0.decisions) + 1;
  s.u = std::max(0.0, p0.saved - common0 - p0.uniform_dist_bits);
  if (p0.decisions[1] + p0.decisions[2] == 0) return s;
  // Second parse: decision and distance costs measured on the first.
  Model m1;
  const double n = p0.decisions[0] + p0.decisions[1] + p0.decisions[2] + 1.5;
  m1.lit = std::log2(n / (p0.decisions[0] + 0.5));
  m1.match = std::log2(n / (p0.decisions[1] + 0.5));
  m1.cache = std::log2(n / (p0.decisions[2] + 0.5));
  m1.dist = &p0.dist;
  m1.dist_total = int(p0.decisions[1]);
  const Parse p1 = parse_tile(tb, chains, f, m1, lmin, max_chain);
  double dist_bits = 0;
  const double table_entry = std::log2(max_choices(f, tb.w, tb.h));
  for (const auto& [sym, count] : p1.dist)
    dist_bits += count * std::log2(p1.decisions[1] / count) + table_entry + gamma_bits(std::uint32_t(count));
  s.m = std::max(0.0, p1.saved - (p1.len_bits + p1.cache_bits + entropy_bits(p1.decisions) + 1) - dist_bits);
  return s;
}

// ---- Per image, per class, reports ------------------------------------------

struct Result {
  std::string file, cls;
  std::uint64_t png = 0, l3 = 0;
  double coded_bytes = 0, pixel_bits = 0, fixed_bits = 0;
  // Projected bytes per family: code u, code m, and per tile the better of the two (1 bit more).
  double proj[3][kFamilyCount] = {};
  // With whole-tile copies first (version 5, built elsewhere): the bytes of tiles equal to an
  // earlier tile of the image are gone, and the family's savings count in the other tiles only.
  double tile_copy_bytes = 0;
  double proj_t[kFamilyCount] = {};  // best of u and m per tile
};
constexpr const char* kCodeName[3] = {"u", "m", "best of u and m per tile"};

std::string class_of(const std::string& file) {
  const std::size_t slash = file.find_last_of('/');
  if (slash == std::string::npos) return "other";
  const std::size_t prev = file.find_last_of('/', slash - 1);
  return file.substr(prev == std::string::npos ? 0 : prev + 1, slash - (prev == std::string::npos ? 0 : prev + 1));
}

using Rows = std::vector<std::pair<std::string, std::vector<const Result*>>>;

// code 3: with whole-tile copies first (best code), and a column for tile copies alone.
void print_table(const char* title, const Rows& rows, int code) {
  const bool t = code == 3;
  std::printf("\n%s (distance code %s%s: bytes / PNG level 6)\n\n| %s | images | PNG 6 | l3 | l3 / PNG |%s", title,
              kCodeName[t ? 2 : code], t ? ", after whole-tile copies" : "", "set", t ? " T |" : "");
  for (const Family& f : kFamilies) std::printf(" %s%s |", t ? "T+" : "", f.name);
  std::printf("\n|---|---:|---:|---:|---:|%s", t ? "---:|" : "");
  for (int i = 0; i < kFamilyCount; ++i) std::printf("---:|");
  std::printf("\n");
  for (const auto& [name, rs] : rows) {
    double png = 0, l3b = 0, tile_copies = 0, proj[kFamilyCount] = {};
    for (const Result* r : rs) {
      png += double(r->png);
      l3b += double(r->l3);
      tile_copies += double(r->l3) - r->tile_copy_bytes;
      for (int i = 0; i < kFamilyCount; ++i) proj[i] += t ? r->proj_t[i] : r->proj[code][i];
    }
    if (rs.empty()) continue;
    std::printf("| %s | %zu | %.0f | %.0f | %.3f |", name.c_str(), rs.size(), png, l3b, l3b / png);
    if (t) std::printf(" %.3f |", tile_copies / png);
    for (double p : proj) std::printf(" %.3f |", p / png);
    std::printf("\n");
  }
}

// Where today's bytes are, per class: coded tiles' headers (everything before the row streams),
// their pixels' bits (step 1), their rows' fixed bits; the rest (image header, tile table,
// constant and raw tiles).
void print_split(const Rows& rows) {
  std::printf("\nToday's bytes by part (step 1)\n\n| set | l3 | coded tile headers | pixel bits / 8 | row fixed bits / 8 | "
              "other |\n|---|---:|---:|---:|---:|---:|\n");
  for (const auto& [name, rs] : rows) {
    double l3b = 0, coded = 0, pix = 0, fixed = 0;
    for (const Result* r : rs) l3b += double(r->l3), coded += r->coded_bytes, pix += r->pixel_bits / 8, fixed += r->fixed_bits / 8;
    if (rs.empty()) continue;
    std::printf("| %s | %.0f | %.0f | %.0f | %.0f | %.0f |\n", name.c_str(), l3b, coded - pix - fixed, pix, fixed,
                l3b - coded);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int max_chain = 128, lmin = 3;
  l3::EncodeOptions options;
  options.pixel_copies = false;  // the probe of version 6's copies walks the streams before them
  options.plane_contexts = options.corrections = false;  // and its contexts are version 6's (spec §6.2)
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--chain" && i + 1 < argc) max_chain = std::atoi(argv[++i]);
    else if (a == "--min-len" && i + 1 < argc) lmin = std::atoi(argv[++i]);
    else if (a == "--no-tile-copies") options.tile_copies = false;
    else if (!a.empty() && a[0] == '-') files.clear(), i = argc;
    else files.push_back(a);
  }
  if (files.empty() || max_chain < 1 || lmin < 1) {
    std::fprintf(stderr, "usage: copy_probe [--chain N] [--min-len L] [--no-tile-copies] IMAGE...\n");
    return 2;
  }
  std::printf("file\tclass\tpng6\tl3\tcoded_tiles\tcoded_bytes\tpixel_bits\trow_fixed_bits\tbad_rows\tmax_row_excess");
  for (const Family& f : kFamilies) std::printf("\t%s_u\t%s_m\t%s_best", f.name, f.name, f.name);
  std::printf("\tT");
  for (const Family& f : kFamilies) std::printf("\tT+%s", f.name);
  std::printf("\n");
  std::vector<Result> results;
  int failures = 0;
  for (const std::string& file : files) {
    try {
      const l3::Image img = l3::load_image(file);
      const std::vector<std::uint8_t> enc = l3::encode(img.view(), options);
      const l3::ImageInfo info = l3::read_info(enc);
      const core::TileGrid grid =
          core::TileGrid::make(info.width, info.height, std::uint32_t(31 - core::clz32(info.tile_width)), info.tile_height);
      Result res;
      res.file = file;
      res.cls = class_of(file);
      res.png = l3::encode_png_bytes(img.view(), 6).size();
      res.l3 = enc.size();
      double saved[3][kFamilyCount] = {}, saved_t[kFamilyCount] = {};
      std::unordered_map<std::string, int> tiles_seen;  // pixels of each tile (with its size)
      double pixel_bits = 0, fixed_bits = 0, max_excess = 0;
      std::uint64_t coded = 0, coded_bytes = 0;
      int bad_rows = 0;
      std::uint64_t at = core::kHeaderSize + 4 * grid.tile_count();
      Chains chains;
      for (std::uint64_t i = 0; i < grid.tile_count(); ++i) {
        std::uint32_t entry = 0;
        std::memcpy(&entry, enc.data() + core::kHeaderSize + 4 * i, 4);
        const std::uint32_t size = core::payload_size(entry, info.version);  // a tile copy: 0 (§3.3)
        const std::uint8_t* tile = enc.data() + at;
        at += size;
        const core::TileRect rect = grid.tile(std::uint32_t(i));
        std::string key = std::to_string(rect.width) + "x" + std::to_string(rect.height) + ":";
        for (std::uint32_t y = rect.y; y < rect.y + rect.height; ++y)
          key.append(reinterpret_cast<const char*>(&img.pixels[(std::size_t(y) * img.width + rect.x) * img.channels]),
                     std::size_t(rect.width) * img.channels);
        const bool repeat = !tiles_seen.emplace(std::move(key), 0).second;
        if (repeat) res.tile_copy_bytes += size;
        if (core::is_tile_copy(entry, info.version) || (tile[0] & 3) != core::kTileCoded) continue;
        TileBits tb;
        if (!walk_tile(tile, size, rect, img, int(info.version), tb))
          throw std::runtime_error("tile " + std::to_string(i) + " does not walk to its pixels");
        ++coded;
        coded_bytes += size;
        pixel_bits += tb.pixel_bits;
        fixed_bits += tb.fixed_bits;
        bad_rows += tb.bad_rows;
        max_excess = std::max(max_excess, tb.max_row_excess);
        chains.build(tb, lmin);
        for (int k = 0; k < kFamilyCount; ++k) {
          const Saving s = tile_saving(tb, chains, kFamilies[k], lmin, max_chain);
          saved[0][k] += s.u;
          saved[1][k] += s.m;
          saved[2][k] += std::max(0.0, std::max(s.u, s.m) - 1);
          if (!repeat) saved_t[k] += std::max(0.0, std::max(s.u, s.m) - 1);
        }
      }
      for (int code = 0; code < 3; ++code)
        for (int k = 0; k < kFamilyCount; ++k) res.proj[code][k] = double(enc.size()) - saved[code][k] / 8;
      for (int k = 0; k < kFamilyCount; ++k) res.proj_t[k] = double(enc.size()) - res.tile_copy_bytes - saved_t[k] / 8;
      res.coded_bytes = double(coded_bytes);
      res.pixel_bits = pixel_bits;
      res.fixed_bits = fixed_bits;
      std::printf("%s\t%s\t%llu\t%llu\t%llu\t%llu\t%.0f\t%.0f\t%d\t%.2f", file.c_str(), res.cls.c_str(),
                  (unsigned long long)res.png, (unsigned long long)res.l3, (unsigned long long)coded,
                  (unsigned long long)coded_bytes, pixel_bits, fixed_bits, bad_rows, max_excess);
      for (int k = 0; k < kFamilyCount; ++k)
        std::printf("\t%.0f\t%.0f\t%.0f", res.proj[0][k], res.proj[1][k], res.proj[2][k]);
      std::printf("\t%.0f", double(res.l3) - res.tile_copy_bytes);
      for (int k = 0; k < kFamilyCount; ++k) std::printf("\t%.0f", res.proj_t[k]);
      std::printf("\n");
      std::fflush(stdout);
      if (bad_rows) {
        std::fprintf(stderr, "%s: %d rows whose bits do not add up (worst by %.2f bits)\n", file.c_str(), bad_rows,
                     max_excess);
        ++failures;
      }
      results.push_back(std::move(res));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", file.c_str(), e.what());
      return 1;
    }
  }
  // Per class, and graphics (all) = graphics + synthetic.
  Rows classes;
  for (const char* cls : {"jpeg_photos", "photos", "graphics", "synthetic", "rgba_opaque"}) {
    std::vector<const Result*> rs;
    for (const Result& r : results)
      if (r.cls == cls) rs.push_back(&r);
    classes.emplace_back(cls, rs);
  }
  {
    std::vector<const Result*> rs;
    for (const Result& r : results)
      if (r.cls == "graphics" || r.cls == "synthetic") rs.push_back(&r);
    classes.emplace_back("graphics (all)", rs);
    std::vector<const Result*> all;
    for (const Result& r : results) all.push_back(&r);
    classes.emplace_back("all", all);
  }
  Rows images;
  for (const Result& r : results)
    if (double(r.l3) > 1.05 * double(r.png) || (r.cls == "graphics" && r.file.find("wall_") != std::string::npos))
      images.emplace_back(r.file, std::vector<const Result*>{&r});
  print_split(classes);
  for (int code : {3, 2, 1, 0}) {
    print_table("Per class", classes, code);
    print_table("Images above 1.05x PNG today, and the wallpapers", images, code);
    auto above = [&](auto bytes) {
      int n = 0;
      for (const Result& r : results) n += bytes(r) > 1.05 * double(r.png);
      return n;
    };
    std::printf("\nImages above 1.05x PNG after: ");
    if (code == 3) std::printf("T %d, ", above([](const Result& r) { return double(r.l3) - r.tile_copy_bytes; }));
    for (int k = 0; k < kFamilyCount; ++k)
      std::printf("%s%s%s %d", k ? ", " : "", code == 3 ? "T+" : "", kFamilies[k].name,
                  above([&](const Result& r) { return code == 3 ? r.proj_t[k] : r.proj[code][k]; }));
    std::printf(" (today %d)\n", above([](const Result& r) { return double(r.l3); }));
  }
  return failures ? 1 : 0;
}
