// What the codec probes (entropy_probe, copy_probe) share when they walk a coded tile pixel by
// pixel through the shared core, as core::decode_pixel does (spec/codec.md §6): a tile's plane
// values and residual codes kept row-major, `channels` planes a pixel.
#pragma once

#include <cstddef>
#include <vector>

#include "l3/codec/tile_core.hpp"

namespace l3bench {

// The plane values and codes of (r, c)'s W, N and NW in a tile `width` pixels wide, with the
// tile-edge rules applied (spec §6.3).
inline l3::core::Neighbours neighbours_at(const l3::core::CodedTileParams& t, const std::vector<int>& val,
                                          const std::vector<int>& code, int width, int r, int c) {
  const int ch = t.channels;
  auto at = [&](int rr, int cc, int p) { return (std::size_t(rr) * width + cc) * ch + p; };
  l3::core::Neighbours nb{};
  for (int p = 0; p < ch; ++p) {
    if (c > 0) nb.w[p] = val[at(r, c - 1, p)], nb.uw[p] = code[at(r, c - 1, p)];
    if (r > 0) nb.n[p] = val[at(r - 1, c, p)], nb.un[p] = code[at(r - 1, c, p)];
    if (r > 0 && c > 0) nb.nw[p] = val[at(r - 1, c - 1, p)], nb.unw[p] = code[at(r - 1, c - 1, p)];
  }
  l3::core::apply_edges(t, r, c, nb);
  return nb;
}

// Whether the W, N and NW codes of every plane are 0: where a zero run may start (spec §6.4).
inline bool codes_zero(const l3::core::Neighbours& nb, int channels) {
  int total = 0;
  for (int p = 0; p < channels; ++p) total += nb.uw[p] + nb.un[p] + nb.unw[p];
  return total == 0;
}

}  // namespace l3bench
