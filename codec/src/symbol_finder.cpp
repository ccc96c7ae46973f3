#include "symbol_finder.hpp"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace l3::encoder {
namespace {

// A component smaller than this many pixels of bounding box is left to the
// tiles: its patch (about 3 bytes) would cost more than its pixels do there.
constexpr std::uint32_t kMinSymbolArea = 16;
// An image with more than one run of non-background pixels a this many
// pixels is left to the tiles: too fragmented for repeats of blocks of 16
// pixels or more to pay, and its runs would outgrow the image.
constexpr std::uint32_t kMaxRunShare = 8;
constexpr std::uint32_t kDictionaryWidth = 256;  // one tile wide (spec §3.1)
constexpr std::uint32_t kMaxDictionaryHeight = 65535;  // u16 symbol fields

struct Pixels {
  const ImageView& image;
  std::size_t stride;
  int channels;

  const std::uint8_t* at(std::uint32_t x, std::uint32_t y) const {
    return image.data + std::size_t(y) * stride + std::size_t(x) * channels;
  }
  std::uint32_t value(std::uint32_t x, std::uint32_t y) const {
    std::uint32_t v = 0;
    std::memcpy(&v, at(x, y), std::size_t(channels));
    return v;
  }
};

// The most common of a few candidate pixels (corners, centre), counted on a
// sample of the image (every 7th pixel of every 3rd row) in one pass;
// nothing when it covers less than half of the sample.
std::optional<std::uint32_t> background(const Pixels& px) {
  const std::uint32_t w = px.image.width, h = px.image.height;
  const std::uint32_t candidates[] = {px.value(0, 0), px.value(w - 1, 0), px.value(0, h - 1), px.value(w - 1, h - 1),
                                      px.value(w / 2, h / 2)};
  std::uint64_t count[5] = {}, sampled = 0;
  for (std::uint32_t y = 0; y < h; y += 3)
    for (std::uint32_t x = y % 7; x < w; x += 7, ++sampled) {
      const std::uint32_t v = px.value(x, y);
      for (int c = 0; c < 5; ++c) count[c] += v == candidates[c];
    }
  const int best = int(std::max_element(count, count + 5) - count);
  if (2 * count[best] < sampled) return std::nullopt;
  return candidates[best];
}

struct Box {
  std::uint32_t x0, y0, x1, y1;  // inclusive
  std::uint32_t width() const { return x1 - x0 + 1; }
  std::uint32_t height() const { return y1 - y0 + 1; }
};

// A run of non-background pixels in one row, x0..x1 inclusive; `parent`
// links runs of one component (union-find over run indices).
struct Run {
  std::uint32_t y, x0, x1, parent;
};

std::uint32_t root(std::vector<Run>& runs, std::uint32_t i) {
  while (runs[i].parent != i) i = runs[i].parent = runs[runs[i].parent].parent;
  return i;
}

// The runs of non-background pixels of row y appended to `runs`.
template <int C> void row_runs(const Pixels& px, std::uint32_t bg, std::uint32_t y, std::vector<Run>& runs) {
  const std::uint8_t* row = px.at(0, y);
  const std::uint32_t w = px.image.width;
  std::uint8_t b[4];
  std::memcpy(b, &bg, 4);
  auto is_bg = [&](std::uint32_t x) { return std::memcmp(row + std::size_t(x) * C, b, C) == 0; };
  for (std::uint32_t x = 0; x < w;) {
    if (is_bg(x)) {
      ++x;
      continue;
    }
    const std::uint32_t x0 = x;
    while (x < w && !is_bg(x)) ++x;
    runs.push_back({y, x0, x - 1, std::uint32_t(runs.size())});
  }
}

// Bounding boxes of the 8-connected components of non-background pixels that
// fit a symbol (at most 256 x 256), in raster order of their first pixels;
// nothing when the image has more than one run a kMaxRunShare pixels.
// Labelled by runs: each row's runs join the runs above that touch them.
std::optional<std::vector<Box>> components(const Pixels& px, std::uint32_t bg) {
  const std::uint32_t w = px.image.width, h = px.image.height;
  const std::uint64_t max_runs = std::uint64_t{w} * h / kMaxRunShare;
  std::vector<Run> runs;
  std::size_t above = 0, row_start = 0;  // the previous row's runs: [above, row_start)
  for (std::uint32_t y = 0; y < h; ++y) {
    switch (px.channels) {
      case 1: row_runs<1>(px, bg, y, runs); break;
      case 2: row_runs<2>(px, bg, y, runs); break;
      case 3: row_runs<3>(px, bg, y, runs); break;
      default: row_runs<4>(px, bg, y, runs); break;
    }
    if (runs.size() > max_runs) return std::nullopt;
    // Runs touch when their columns overlap, one pixel of diagonal included.
    std::size_t a = above;
    for (std::size_t r = row_start; r < runs.size(); ++r) {
      while (a < row_start && runs[a].x1 + 1 < runs[r].x0) ++a;
      for (std::size_t k = a; k < row_start && runs[k].x0 <= runs[r].x1 + 1; ++k) {
        const std::uint32_t ra = root(runs, std::uint32_t(k)), rr = root(runs, std::uint32_t(r));
        if (ra != rr) runs[std::max(ra, rr)].parent = std::min(ra, rr);  // the raster-first run is the root
      }
    }
    above = row_start;
    row_start = runs.size();
  }
  std::vector<Box> boxes;
  std::vector<std::uint32_t> box_of(runs.size());
  for (std::uint32_t i = 0; i < runs.size(); ++i) {
    const Run& r = runs[i];
    const std::uint32_t top = root(runs, i);
    if (top == i) {
      box_of[i] = std::uint32_t(boxes.size());
      boxes.push_back({r.x0, r.y, r.x1, r.y});
      continue;
    }
    Box& b = boxes[box_of[top]];
    b.x0 = std::min(b.x0, r.x0), b.x1 = std::max(b.x1, r.x1), b.y1 = std::max(b.y1, r.y);
  }
  std::erase_if(boxes, [](const Box& b) {
    return b.width() > core::kMaxSymbolSide || b.height() > core::kMaxSymbolSide || b.width() * b.height() < kMinSymbolArea;
  });
  return boxes;
}

bool same_block(const Pixels& px, const Box& a, const Box& b) {
  const std::size_t row = std::size_t(a.width()) * px.channels;
  for (std::uint32_t r = 0; r < a.height(); ++r)
    if (std::memcmp(px.at(a.x0, a.y0 + r), px.at(b.x0, b.y0 + r), row) != 0) return false;
  return true;
}

// Shelf packing, tallest first, into kDictionaryWidth columns: each symbol's
// place in the dictionary. False when the dictionary would be too tall.
bool pack(std::vector<core::SymbolRect>& symbols, std::uint32_t& height) {
  std::vector<std::uint32_t> order(symbols.size());
  for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    return symbols[a].height != symbols[b].height ? symbols[a].height > symbols[b].height
                                                  : symbols[a].width > symbols[b].width;
  });
  std::uint32_t x = 0, y = 0, shelf = 0;
  for (const std::uint32_t i : order) {
    core::SymbolRect& s = symbols[i];
    if (x + s.width > kDictionaryWidth) y += shelf, x = 0, shelf = 0;
    s.x = x;
    s.y = y;
    x += s.width;
    shelf = std::max(shelf, s.height);
  }
  height = y + shelf;
  return height <= kMaxDictionaryHeight;
}

void append_varint(std::vector<std::uint8_t>& out, std::uint32_t v) {
  while (v >= 0x80) {
    out.push_back(std::uint8_t(v | 0x80));
    v >>= 7;
  }
  out.push_back(std::uint8_t(v));
}

void append_le(std::vector<std::uint8_t>& out, std::uint32_t v, int bytes) {
  for (int b = 0; b < bytes; ++b) out.push_back(std::uint8_t(v >> (8 * b)));
}

}  // namespace

std::optional<SymbolPlan> find_symbols(const ImageView& image) {
  const Pixels px{image, image.stride ? image.stride : std::size_t(image.width) * image.channels, int(image.channels)};
  const std::optional<std::uint32_t> bg = background(px);
  if (!bg) return std::nullopt;
  const std::optional<std::vector<Box>> found = components(px, *bg);
  if (!found) return std::nullopt;
  const std::vector<Box>& boxes = *found;

  // Groups of identical blocks (same size, hash, then pixels).
  struct Group {
    std::vector<std::uint32_t> members;  // indices into boxes
  };
  std::vector<Group> groups;
  std::unordered_map<std::uint64_t, std::uint32_t> by_hash;
  for (std::uint32_t i = 0; i < boxes.size(); ++i) {
    const Box& b = boxes[i];
    std::uint64_t hsh = std::uint64_t{b.width()} << 32 | b.height();
    for (std::uint32_t r = 0; r < b.height(); ++r)
      hsh = XXH3_64bits_withSeed(px.at(b.x0, b.y0 + r), std::size_t(b.width()) * px.channels, hsh);
    const auto [it, inserted] = by_hash.try_emplace(hsh, std::uint32_t(groups.size()));
    if (inserted) groups.push_back({});
    Group& g = groups[it->second];
    if (!g.members.empty() && !same_block(px, boxes[g.members[0]], b)) continue;  // a collision: left to the tiles
    g.members.push_back(i);
  }
  std::vector<std::uint32_t> used;  // groups of two or more, most used first
  for (std::uint32_t k = 0; k < groups.size(); ++k)
    if (groups[k].members.size() >= 2) used.push_back(k);
  if (used.empty()) return std::nullopt;
  std::stable_sort(used.begin(), used.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return groups[a].members.size() > groups[b].members.size(); });
  if (used.size() > 0xffff) used.resize(0xffff);

  SymbolPlan plan;
  for (const std::uint32_t k : used) {
    const Box& b = boxes[groups[k].members[0]];
    plan.symbols.push_back({0, 0, b.width(), b.height()});
  }
  if (!pack(plan.symbols, plan.dict_height)) return std::nullopt;
  plan.dict_width = kDictionaryWidth;
  plan.dictionary.resize(std::size_t(plan.dict_width) * plan.dict_height * px.channels);
  for (std::size_t i = 0; i < plan.dictionary.size(); i += std::size_t(px.channels))
    std::memcpy(&plan.dictionary[i], &*bg, std::size_t(px.channels));
  for (std::uint32_t s = 0; s < used.size(); ++s) {
    const Box& b = boxes[groups[used[s]].members[0]];
    const core::SymbolRect& r = plan.symbols[s];
    for (std::uint32_t row = 0; row < r.height; ++row)
      std::memcpy(&plan.dictionary[(std::size_t(r.y + row) * plan.dict_width + r.x) * px.channels],
                  px.at(b.x0, b.y0 + row), std::size_t(r.width) * px.channels);
    for (const std::uint32_t i : groups[used[s]].members) plan.patches.push_back({s, boxes[i].x0, boxes[i].y0});
  }
  std::sort(plan.patches.begin(), plan.patches.end(),
            [](const core::Patch& a, const core::Patch& b) { return a.y != b.y ? a.y < b.y : a.x < b.x; });
  // spec §3.4: the patches' areas sum to at most the image's pixels (boxes
  // of nested components could exceed it).
  const std::uint64_t pixels = std::uint64_t{image.width} * image.height;
  std::uint64_t area = 0;
  std::size_t kept = 0;
  for (; kept < plan.patches.size(); ++kept) {
    const core::SymbolRect& r = plan.symbols[plan.patches[kept].symbol];
    if ((area += std::uint64_t{r.width} * r.height) > pixels) break;
  }
  plan.patches.resize(kept);

  plan.erased.resize(std::size_t(image.width) * image.height * px.channels);
  const std::size_t row = std::size_t(image.width) * px.channels;
  for (std::uint32_t y = 0; y < image.height; ++y) std::memcpy(&plan.erased[y * row], px.at(0, y), row);
  for (const core::Patch& p : plan.patches) {
    const core::SymbolRect& r = plan.symbols[p.symbol];
    for (std::uint32_t y = 0; y < r.height; ++y)
      for (std::uint32_t x = 0; x < r.width; ++x)
        std::memcpy(&plan.erased[(std::size_t(p.y) + y) * row + (std::size_t(p.x) + x) * px.channels], &*bg,
                    std::size_t(px.channels));
  }
  return plan;
}

void append_symbol_section(std::vector<std::uint8_t>& out, const SymbolPlan& plan,
                           const std::vector<std::uint8_t>& dictionary_stream) {
  append_le(out, std::uint32_t(dictionary_stream.size()), 4);
  out.insert(out.end(), dictionary_stream.begin(), dictionary_stream.end());
  append_le(out, std::uint32_t(plan.symbols.size()), 2);
  for (const core::SymbolRect& s : plan.symbols) {
    append_le(out, s.x, 2);
    append_le(out, s.y, 2);
    out.push_back(std::uint8_t(s.width - 1));
    out.push_back(std::uint8_t(s.height - 1));
  }
  append_le(out, std::uint32_t(plan.patches.size()), 4);
  std::int64_t x = 0, y = 0;
  for (const core::Patch& p : plan.patches) {
    append_varint(out, p.symbol);
    // Differences of positions inside one image (at most 65535 apart) fit an int.
    append_varint(out, core::zigzag(int(p.y - y)));
    append_varint(out, core::zigzag(int(p.x - x)));
    x = p.x;
    y = p.y;
  }
}

}  // namespace l3::encoder
