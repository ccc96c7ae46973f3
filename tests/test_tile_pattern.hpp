// Sample patterns of the codec's copy mechanisms and contexts, shared by
// their tests and the fuzz seeds.
#pragma once

#include <cstdint>

namespace l3::test {

// splitmix64's finaliser: the patterns' seeded noise.
inline std::uint64_t mix64(std::uint64_t v) {
  v = (v ^ (v >> 30)) * 0xbf58476d1ce4e5b9ull;
  v = (v ^ (v >> 27)) * 0x94d049bb133111ebull;
  return v ^ (v >> 31);
}

// Periodic with 32 x 8 tiles: every full tile of an image cut into 32 x 8
// tiles (and every clipped edge tile of the same size) has the same pixels,
// so the encoder stores them as tile copies (spec/codec.md §3.3, version 5).
inline std::uint8_t periodic_32x8(std::uint32_t x, std::uint32_t y, std::uint32_t channel) {
  const std::uint32_t px = x % 32, py = y % 8;
  return std::uint8_t(px * 5 + py * 19 + channel * 60 + px * py % 3);
}

// Text-like pixels, what pixel copies (spec/codec.md §6.6, version 6) are
// for: lines of glyphs, one of 8 seeded 6 x 9 bitmaps in each 8 x 12 cell, so
// that a glyph recurs some multiple of 8 columns back in its row. On a flat
// background (few colours: palette tiles), or with `colourful` on one that
// varies with x mod 8 and with y (more colours than a palette holds, and
// still the same in every cell of a row: copies in transformed tiles).
inline std::uint8_t glyph_text(std::uint32_t x, std::uint32_t y, std::uint32_t channel, std::uint32_t seed,
                               bool colourful) {
  const std::uint32_t gx = x % 8, gy = y % 12;
  const std::uint64_t glyph = mix64((std::uint64_t(x / 8) << 32 | y / 12) ^ seed) % 8;
  const bool ink = gx < 6 && gy < 9 && ((mix64(glyph + 0x9e3779b97f4a7c15ull * (seed + 1)) >> (gy * 6 + gx)) & 1);
  if (ink) return std::uint8_t(20 + channel * 70);
  return std::uint8_t(colourful ? 40 + gx * 11 + y * 3 + channel * 50 : 235 - channel * 10);
}

// An interleaved w x h x ch buffer of glyph_text.
inline void fill_glyph_text(std::uint8_t* px, std::uint32_t w, std::uint32_t h, std::uint32_t ch, std::uint32_t seed,
                            bool colourful) {
  for (std::uint32_t y = 0; y < h; ++y)
    for (std::uint32_t x = 0; x < w; ++x)
      for (std::uint32_t c = 0; c < ch; ++c) *px++ = glyph_text(x, y, c, seed, colourful);
}

// Planes that err together, what plane contexts (spec/codec.md §6.2,
// version 7) are for: a smooth ramp per channel plus one noise value per
// pixel, scaled differently in each channel (2/3, 1, 4/3, 5/3: so that no
// colour transform cancels it), whose amplitude (0 to 31) changes with the
// region. The noise is seeded from the pixel's position.
inline void fill_shared_noise(std::uint8_t* px, std::uint32_t w, std::uint32_t h, std::uint32_t ch,
                              std::uint32_t seed) {
  for (std::uint32_t y = 0; y < h; ++y)
    for (std::uint32_t x = 0; x < w; ++x) {
      const std::uint64_t r = mix64((std::uint64_t(y) << 32 | x) ^ (std::uint64_t(seed) << 20));
      const int amplitude = int(((x / 48 + y / 20) * 7) % 32);
      const int noise = amplitude ? int(r % std::uint64_t(2 * amplitude + 1)) - amplitude : 0;
      for (std::uint32_t c = 0; c < ch; ++c) {
        const int v = 40 + int(c) * 50 + int(x) / 5 + int(y) / 3 + noise * int(2 + c) / 3;
        *px++ = std::uint8_t(v < 0 ? 0 : v > 255 ? 255 : v);
      }
    }
}

// Ramps that rise in steps, with noise of one sign, what residual
// corrections (spec/codec.md §6.7, version 8) are for: each channel a
// staircase in x and y (a different slope per channel) plus 1 at about a
// quarter of the pixels (seeded from the position), so that the residuals
// of the predictors fall on one side of the prediction, by how the
// neighbours rise.
inline void fill_stepped_ramps(std::uint8_t* px, std::uint32_t w, std::uint32_t h, std::uint32_t ch,
                               std::uint32_t seed) {
  for (std::uint32_t y = 0; y < h; ++y)
    for (std::uint32_t x = 0; x < w; ++x) {
      const int bump = mix64((std::uint64_t(y) << 32 | x) ^ (std::uint64_t(seed) << 20)) % 4 == 0 ? 1 : 0;
      for (std::uint32_t c = 0; c < ch; ++c) {
        const int v = 20 + int(c) * 40 + (int(x) * int(3 + c) + int(y) * int(2 + 2 * c)) / 7 + bump;
        *px++ = std::uint8_t(v > 255 ? 255 : v);
      }
    }
}

// Two colours, what bilevel planes (spec/codec.md §6.8, version 11) are for,
// differing in every channel: kind 0, text-like strokes in lines of 11 rows
// with blank rows and margins between them (zero rows); 1, a sparse dither
// (ink at a fifth of the pixels); 2, a chessboard of 3-pixel squares. The
// noise is seeded from the pixel's position.
inline void fill_two_colours(std::uint8_t* px, std::uint32_t w, std::uint32_t h, std::uint32_t ch, int kind,
                             std::uint32_t seed) {
  for (std::uint32_t y = 0; y < h; ++y)
    for (std::uint32_t x = 0; x < w; ++x) {
      const std::uint64_t r = mix64((std::uint64_t(y) << 32 | x) ^ (std::uint64_t(seed) << 20));
      const std::uint32_t line = y % 20;
      bool ink = (x / 3 + y / 3) % 2 == 1;
      if (kind == 0) ink = line >= 4 && line < 15 && (x % 9 < 2 || line == 9 || r % 13 == 0) && x % 90 < 70;
      if (kind == 1) ink = r % 5 == 0;
      for (std::uint32_t c = 0; c < ch; ++c) *px++ = ink ? std::uint8_t(10 + 40 * c) : 250;
    }
}

// Diagonal ramps, what mirrored tiles and the NW predictor (spec/codec.md
// §4.7, §6.1, version 12) are for: channel c rises along x + y (with `anti`,
// along x - y) at slope (2c + 1) / 9, rounded down, plus 1 at about one pixel
// in 32 (seeded from the position). NE predicts every sample along x + y (a
// mirrored tile's NW), NW along x - y; the gradient predictor misses the
// steps of slopes below 1.
inline void fill_diagonal(std::uint8_t* px, std::uint32_t w, std::uint32_t h, std::uint32_t ch, bool anti,
                          std::uint32_t seed) {
  for (std::uint32_t y = 0; y < h; ++y)
    for (std::uint32_t x = 0; x < w; ++x) {
      const int bump = mix64((std::uint64_t(y) << 32 | x) ^ (std::uint64_t(seed) << 20)) % 32 == 0 ? 1 : 0;
      const int along = anti ? int(x) - int(y) : int(x + y);
      for (std::uint32_t c = 0; c < ch; ++c) *px++ = std::uint8_t((along + 600) * int(2 * c + 1) / 9 + 40 * int(c) + bump);
    }
}

// Rounded affine planes, what ramps (spec/codec.md §6.9, version 14) are
// for: channel c rises or falls along x and y at slopes below 1 (one of them
// flat along x), as synthetic gradients do, rounded to the nearest integer
// in integer arithmetic (slopes in 1/4096); with `noise`, about one sample in
// 200 (seeded from the position) off by one.
inline void fill_ramps(std::uint8_t* px, std::uint32_t w, std::uint32_t h, std::uint32_t ch, bool noise,
                       std::uint32_t seed) {
  const int sx[4] = {1021, 0, -583, 127}, sy[4] = {0, 1362, 583, -1679};  // slopes * 4096
  for (std::uint32_t y = 0; y < h; ++y)
    for (std::uint32_t x = 0; x < w; ++x)
      for (std::uint32_t c = 0; c < ch; ++c) {
        const long long start = (20 + 40 * long(c)) * 4096ll + (sx[c] < 0 ? -sx[c] * long(w) : 0) +
                                (sy[c] < 0 ? -sy[c] * long(h) : 0);
        const long long v = (start + sx[c] * long(x) + sy[c] * long(y) + 2048) / 4096;
        const bool bump = noise && mix64((std::uint64_t(y) << 32 | x) ^ (std::uint64_t(seed) << 20) ^ c) % 200 == 0;
        const long long s = v + (bump ? 1 : 0);
        *px++ = std::uint8_t(s < 0 ? 0 : s > 255 ? 255 : s);
      }
}

// Ordered dithers, what bit planes and templates (spec/codec.md §6.8,
// version 13) are for: each channel a slow ramp (a different slope per
// channel, shifted by `seed`) dithered to 0 or 255 by the 8 x 8 Bayer
// matrix, so that a tile holds up to 2^ch colours, a channel a bit of their
// indices, and repeats with a period of 8 across and down.
inline void fill_ordered_dither(std::uint8_t* px, std::uint32_t w, std::uint32_t h, std::uint32_t ch,
                                std::uint32_t seed) {
  int bayer[8][8] = {{0}};
  for (int size = 1; size < 8; size *= 2)  // b(2s) = [[4b, 4b + 2], [4b + 3, 4b + 1]]
    for (int y = 0; y < size; ++y)
      for (int x = 0; x < size; ++x) {
        const int v = 4 * bayer[y][x];
        bayer[y][x] = v;
        bayer[y][x + size] = v + 2;
        bayer[y + size][x] = v + 3;
        bayer[y + size][x + size] = v + 1;
      }
  for (std::uint32_t y = 0; y < h; ++y)
    for (std::uint32_t x = 0; x < w; ++x)
      for (std::uint32_t c = 0; c < ch; ++c) {
        const int level = (int(x) * int(c + 1) / 3 + int(y) * int(4 - c) / 5 + int(seed) * 7) % 64;
        *px++ = level > bayer[y % 8][x % 8] ? 255 : 0;
      }
}

// A page of symbols, what symbols (spec/codec.md §3.4, version 15) are for: a
// background colour (per channel 230 + channel) and 12 seeded glyphs (4 to 14
// x 6 to 16 pixels of values below 200, each one solid block) placed at about
// one per 1000 pixels of the page, at seeded positions (rarely where pixel
// copies reach); a glyph placed over another leaves a union of its own.
inline void fill_symbol_page(std::uint8_t* px, std::uint32_t w, std::uint32_t h, std::uint32_t ch,
                             std::uint32_t seed) {
  for (std::uint64_t i = 0; i < std::uint64_t{w} * h * ch; ++i) px[i] = std::uint8_t(230 + i % ch);
  const std::uint64_t placements = std::uint64_t{w} * h / 1000;
  for (std::uint64_t i = 0; i < placements; ++i) {
    const std::uint64_t r = mix64(i * 0x9e3779b97f4a7c15ull + seed);
    const std::uint32_t g = std::uint32_t(r % 12), gw = 4 + std::uint32_t(mix64(g + seed) % 11),
                        gh = 6 + std::uint32_t(mix64(g + 100 + seed) % 11);
    if (gw > w || gh > h) continue;
    const std::uint32_t x0 = std::uint32_t((r >> 8) % (w - gw + 1)), y0 = std::uint32_t((r >> 32) % (h - gh + 1));
    for (std::uint32_t y = 0; y < gh; ++y)
      for (std::uint32_t x = 0; x < gw; ++x)
        for (std::uint32_t c = 0; c < ch; ++c)
          px[((std::uint64_t{y0} + y) * w + x0 + x) * ch + c] =
              std::uint8_t(mix64((std::uint64_t{g} << 40) + (y << 20) + (x << 4) + c + seed) % 200);
  }
}

}  // namespace l3::test
