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
// sample of the image; nothing when it covers less than half of the sample.
std::optional<std::uint32_t> background(const Pixels& px) {
  const std::uint32_t w = px.image.width, h = px.image.height;
  const std::uint32_t candidates[] = {px.value(0, 0), px.value(w - 1, 0), px.value(0, h - 1), px.value(w - 1, h - 1),
                                      px.value(w / 2, h / 2)};
  std::uint32_t best = candidates[0];
  std::uint64_t best_count = 0, sampled = 0;
  for (const std::uint32_t c : candidates) {
    std::uint64_t count = 0;
    sampled = 0;
    for (std::uint32_t y = 0; y < h; y += 3)
      for (std::uint32_t x = y % 7; x < w; x += 7, ++sampled) count += px.value(x, y) == c;
    if (count > best_count) best = c, best_count = count;
  }
  if (2 * best_count < sampled) return std::nullopt;
  return best;
}

struct Box {
  std::uint32_t x0, y0, x1, y1;  // inclusive
  std::uint32_t width() const { return x1 - x0 + 1; }
  std::uint32_t height() const { return y1 - y0 + 1; }
};

// Bounding boxes of the 8-connected components of non-background pixels that
// fit a symbol (at most 256 x 256).
std::vector<Box> components(const Pixels& px, std::uint32_t bg) {
  const std::uint32_t w = px.image.width, h = px.image.height;
  std::vector<std::uint8_t> seen(std::size_t(w) * h, 0);
  std::vector<std::uint32_t> stack;
  std::vector<Box> boxes;
  for (std::uint32_t y = 0; y < h; ++y)
    for (std::uint32_t x = 0; x < w; ++x) {
      const std::size_t start = std::size_t(y) * w + x;
      if (seen[start] || px.value(x, y) == bg) continue;
      Box b{x, y, x, y};
      seen[start] = 1;
      stack.assign(1, std::uint32_t(start));
      while (!stack.empty()) {
        const std::uint32_t i = stack.back();
        stack.pop_back();
        const std::uint32_t cx = i % w, cy = i / w;
        b.x0 = std::min(b.x0, cx), b.x1 = std::max(b.x1, cx), b.y1 = std::max(b.y1, cy);
        for (int dy = -1; dy <= 1; ++dy)
          for (int dx = -1; dx <= 1; ++dx) {
            const std::int64_t nx = std::int64_t(cx) + dx, ny = std::int64_t(cy) + dy;
            if (nx < 0 || ny < 0 || nx >= w || ny >= h) continue;
            const std::size_t n = std::size_t(ny) * w + std::size_t(nx);
            if (seen[n] || px.value(std::uint32_t(nx), std::uint32_t(ny)) == bg) continue;
            seen[n] = 1;
            stack.push_back(std::uint32_t(n));
          }
      }
      if (b.width() <= core::kMaxSymbolSide && b.height() <= core::kMaxSymbolSide &&
          b.width() * b.height() >= kMinSymbolArea)
        boxes.push_back(b);
    }
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

std::uint32_t zigzag(std::int64_t v) { return std::uint32_t(v < 0 ? ((-v) << 1) - 1 : v << 1); }

void append_le(std::vector<std::uint8_t>& out, std::uint32_t v, int bytes) {
  for (int b = 0; b < bytes; ++b) out.push_back(std::uint8_t(v >> (8 * b)));
}

}  // namespace

std::optional<SymbolPlan> find_symbols(const ImageView& image) {
  const Pixels px{image, image.stride ? image.stride : std::size_t(image.width) * image.channels, int(image.channels)};
  const std::optional<std::uint32_t> bg = background(px);
  if (!bg) return std::nullopt;
  const std::vector<Box> boxes = components(px, *bg);

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
    append_varint(out, zigzag(p.y - y));
    append_varint(out, zigzag(p.x - x));
    x = p.x;
    y = p.y;
  }
}

}  // namespace l3::encoder
