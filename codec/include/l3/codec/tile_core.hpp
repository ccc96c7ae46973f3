// The shared per-tile core of the l3 codec: everything needed to decode one
// row ("lane") of one tile, written once for the CPU decoder and the CUDA
// kernels (spec/codec.md §5-§8).
//
// Rules for this header and the four it includes (tile_constants, tile_grid,
// bit_reader, tile_ans): each compiles as host C++ and as CUDA device code. No
// allocation, no exceptions, no STL containers, no asserts on input. Every
// function that reads untrusted bytes bounds its reads and reports failure
// through a status value; nothing here trusts a length it did not check.
#pragma once

#include <cstddef>
#include <cstdint>

#include "l3/codec/bit_reader.hpp"      // §7: row streams, Rice codes
#include "l3/codec/tile_ans.hpp"        // §4.5, §7.4: rANS frequency tables and token search
#include "l3/common/errc.hpp"
#include "l3/common/host_device.hpp"
#include "l3/codec/tile_constants.hpp"  // §2-§7: the bitstream's numbers, statuses, integer helpers
#include "l3/codec/tile_grid.hpp"       // §3: the tile grid

namespace l3::core {

// ---- Planes and colour transforms (spec §5) --------------------------------

// Value range of plane p under a transform: 8-bit planes [0,255], colour
// differences [-255,255]. `mid` predicts the first sample of a tile.
struct PlaneRange {
  int lo, hi, mid;
};

L3_HD PlaneRange plane_range(std::uint8_t transform, int plane) {
  if (transform != kTransformNone && (plane == 1 || plane == 2)) return {-255, 255, 0};
  return {0, 255, 128};
}

// Forward transform of one pixel (encoder). in: channels bytes; out: plane values.
L3_HD void forward_transform(std::uint8_t transform, int channels, const std::uint8_t* in, int* out) {
  for (int c = 0; c < channels; ++c) out[c] = in[c];
  if (channels < 3) return;
  const int r = in[0], g = in[1], b = in[2];
  if (transform == kTransformSubtractGreen) {
    out[0] = g;
    out[1] = r - g;
    out[2] = b - g;
  } else if (transform == kTransformYCoCgR) {
    const int co = r - b;
    const int t = b + (co >> 1);
    const int cg = g - t;
    out[0] = t + (cg >> 1);
    out[1] = co;
    out[2] = cg;
  }
}

// Inverse transform (decoder): writes the pixel's samples and returns the OR
// of them as integers, which exceeds 255 exactly when a sample is outside
// [0, 255] (negative values set the high bits): callers check a whole row at
// once. Only corrupt data produce such samples (spec §5.2).
L3_HD std::uint32_t inverse_transform_bits(std::uint8_t transform, int channels, const int* v, std::uint8_t* out) {
  int px[4] = {v[0], channels > 1 ? v[1] : 0, channels > 2 ? v[2] : 0, channels > 3 ? v[3] : 0};
  if (channels >= 3) {
    if (transform == kTransformSubtractGreen) {
      const int g = v[0];
      px[0] = v[1] + g;
      px[1] = g;
      px[2] = v[2] + g;
    } else if (transform == kTransformYCoCgR) {
      const int t = v[0] - (v[2] >> 1);
      const int g = v[2] + t;
      const int b = t - (v[1] >> 1);
      px[0] = b + v[1];
      px[1] = g;
      px[2] = b;
    }
  }
  std::uint32_t bits = 0;
  for (int c = 0; c < channels; ++c) {
    bits |= static_cast<std::uint32_t>(px[c]);
    out[c] = static_cast<std::uint8_t>(px[c]);
  }
  return bits;
}

// Returns false when the planes do not map to 8-bit samples.
L3_HD bool inverse_transform(std::uint8_t transform, int channels, const int* v, std::uint8_t* out) {
  return inverse_transform_bits(transform, channels, v, out) <= 255u;
}

// ---- Prediction (spec §6.1) -------------------------------------------------

// Every predictor is a selection from a few candidates computed without
// branches; the selection compiles to conditional moves, so the decode loop
// stays straight-line code whichever predictor a plane uses.
L3_HD int predict(std::uint8_t pred, int w, int n, int nw, int lo, int hi) {
  const int grad = w + n - nw;
  const int mn = imin(w, n), mx = imax(w, n);
  const int med = imin(mx, imax(mn, grad));       // MED (LOCO-I) = median(W, N, W + N - NW)
  const int clamped = imin(hi, imax(lo, grad));   // gradient, clamped to the plane's range
  int p = med;  // kPredMED
  p = pred == kPredW ? w : p;
  p = pred == kPredN ? n : p;
  p = pred == kPredAvg ? (w + n) >> 1 : p;
  p = pred == kPredGrad ? clamped : p;
  p = pred == kPredNW ? nw : p;
  return p;
}

// Whether plane byte bits 0-2 `pb` name a predictor of a coded plane in
// `version` (spec §4.3, §6.1): 0..4, and from version 12 also 6, NW.
L3_HD bool coded_predictor(std::uint8_t pb, int version) {
  return pb < kPredCount || (pb == kPredNW && version >= kVersionMirror);
}

// Predictor fixed at compile time (the decoder's fast paths for tiles whose
// planes share one predictor); kPredPerPlane falls back to predict().
template <std::uint8_t kPred>
L3_HD int predict_fixed(std::uint8_t pred, int w, int n, int nw, int lo, int hi) {
  if constexpr (kPred == kPredMED) return imin(imax(w, n), imax(imin(w, n), w + n - nw));
  else if constexpr (kPred == kPredW) return w;
  else if constexpr (kPred == kPredN) return n;
  else if constexpr (kPred == kPredAvg) return (w + n) >> 1;
  else if constexpr (kPred == kPredGrad) return imin(hi, imax(lo, w + n - nw));
  else if constexpr (kPred == kPredNW) return nw;
  else return predict(pred, w, n, nw, lo, hi);
}

// ---- Context (spec §6.2) ----------------------------------------------------

// Activity of a sample's neighbourhood from the residual codes u (zigzag of
// the residual, about twice its magnitude) of the same plane at W, N and NW.
// Version 7 lets a plane add the code of the plane before it at the same
// pixel (PlaneParams::previous_code, spec §6.2): 1-4% fewer bytes on photos
// and gradients, where the planes' errors go together, for a context that
// waits for the plane before; the encoder sets it per plane and tile.
L3_HD int activity(int u_w, int u_n, int u_nw) { return u_w + u_n + (u_nw >> 1); }

// Quantises activity into 16 buckets on a half-octave scale:
// 0, 1, 2, 3, 4-5, 6-7, 8-11, ..., 128-191, >=192.
L3_HD int bucket_of(int a) {
  if (a < 4) return a;
  const int l = 31 - clz32(static_cast<std::uint32_t>(a));  // floor(log2 a) >= 2
  const int b = 2 * l + ((a >> (l - 1)) & 1);
  return b < 15 ? b : 15;
}

// ---- Tile parameters (spec §4) ----------------------------------------------

struct PlaneParams {
  std::uint8_t pred;
  // A constant plane (spec §4.3): reads no bits, its residual codes are 0 and
  // range.mid holds its value, so that every predictor reproduces the value
  // from the tile's first pixel on (spec §6.3): decoders need no other case.
  bool constant;
  // The plane's activity adds the residual code of the plane before it at
  // the same pixel (plane byte bit 3, version 7, spec §6.2). Decoders test
  // it with a branch (the same way for the whole tile), not a select: the
  // planes of other tiles then do not wait for the plane before.
  bool previous_code;
  // Residual corrections (plane byte bit 4, version 8, spec §6.7): each
  // residual is corrected by the entry of its gradient class, kCorrectionBits
  // bits per class in `corrections` (0 when the plane has none). Decoders test
  // `corrected` with a branch, the same way for the whole tile.
  bool corrected;
  std::uint32_t corrections;
  // A ramp (plane byte bit 7, version 14, spec §6.9): ramp_at() is added to
  // each decoded value on the way to the pixel; prediction, contexts, runs
  // and the range of §6.1 (ramped_range) see the values without it.
  bool ramp;
  std::int32_t ramp_offset, ramp_dx, ramp_dy;
  std::uint8_t k[kBuckets];
  PlaneRange range;
  // k[bucket_of(a)] for every activity a < 256, expanded once per tile so the
  // per-sample context costs one load (activities >= 192 all map to bucket 15).
  std::uint8_t k_of_activity[kActivityTable];
};

// The activity `a` of §6.2 of plane pp plus, with PlaneParams::previous_code
// (version 7), `previous_code`: the residual code of the plane before at the
// same pixel. A branch the whole tile takes the same way, not a select (the
// empty asm keeps the host compiler from making one), so that the planes of
// tiles without the flag do not wait for the plane before.
L3_HD int with_previous_code(const PlaneParams& pp, int a, int previous_code) {
  if (pp.previous_code) {
#if !defined(__CUDA_ARCH__)
    asm("");
#endif
    a += previous_code;
  }
  return a;
}

// ---- Residual corrections (spec §6.7, version 8) ----------------------------

// The gradient class of a sample, 0..8, from the signs of N - NW and NW - W
// (plane values after the edge rules of §6.3): which side of the prediction
// a value tends to fall on, and by how much, depends on it (+-1 noise on
// ramps, anti-aliased edges), which the activity of residual codes cannot see.
L3_HD int sign3(int d) { return (d > 0) - (d < 0); }
L3_HD int correction_class(int w, int n, int nw) { return 3 * sign3(n - nw) + sign3(nw - w) + 4; }

// A correction entry's fields (spec §6.7): bit 2 flips the sign (1), bits
// 0-1 are the bias (1: +1, 2: -1).
L3_HD int correction_flip(std::uint32_t entry) { return int(entry >> 2); }
L3_HD int correction_bias(std::uint32_t entry) { return int(entry & 1u) - int((entry >> 1) & 1u); }
// The residual of a decoded residual `e` under a correction entry: its sign
// flipped, then the bias added.
L3_HD int corrected_residual(std::uint32_t entry, int e) {
  const int flip = correction_flip(entry);
  return ((e ^ -flip) + flip) + correction_bias(entry);
}

// The entry of gradient class g of plane pp.
L3_HD std::uint32_t correction_entry(const PlaneParams& pp, int g) {
  return (pp.corrections >> (kCorrectionBits * g)) & ((1u << kCorrectionBits) - 1);
}

// The residual of decoded residual e of plane pp at a sample with
// neighbours w, n, nw (spec §6.7): corrected_residual(correction_entry(pp,
// correction_class(w, n, nw)), e), written for the wavefront's step, its one
// caller (spec/cuda.md §2): the signs as clamps, the entry's shift (3 bits a
// class) as one sum, the bias of bits 0-1 (0, +1, -1, 0) as b - 3 (b >> 1).
L3_HD int correct_residual(const PlaneParams& pp, int e, int w, int n, int nw) {
  const int s1 = imin(imax(n - nw, -1), 1), s2 = imin(imax(nw - w, -1), 1);  // sign3
  const int shift = 9 * s1 + 3 * s2 + 12;  // kCorrectionBits * correction_class(w, n, nw)
  const std::uint32_t entry = (pp.corrections >> shift) & 7u;
  const int flip = int(entry >> 2), b = int(entry & 3u);
  return ((e ^ -flip) + flip) + b - 3 * (b >> 1);
}

// The first activity of bucket b (spec §6.2): 0, 1, 2, 3, 4, 6, 8, 12, ..., 128, 192.
L3_HD int bucket_start(int b) { return b < 4 ? b : (2 + (b & 1)) << (b / 2 - 1); }

// k_of_activity as runs of each bucket's k: bucket_of per activity took 8%
// of a wallpaper's CPU decode, tiles the AVX-512 lanes decode included.
L3_HD void expand_k_table(PlaneParams& pp) {
  int a = 0;
  constexpr int kLast = int(kBuckets) - 1;
  for (int b = 0; b <= kLast; ++b) {
    const int end = b < kLast ? bucket_start(b + 1) : kActivityTable;
    for (; a < end; ++a) pp.k_of_activity[a] = pp.k[b];
  }
}

// ---- Ramps (spec §6.9, version 14) -------------------------------------------

// The ramp of plane pp at pixel (r, c): floor((offset * 2^8 + dx * c + dy *
// r) / 2^24), in 64 bits (every i32 field valid; the result is below 2^17 in
// magnitude).
L3_HD int ramp_at(const PlaneParams& pp, int r, int c) {
  const std::int64_t x = std::int64_t(pp.ramp_offset) * (std::int64_t(1) << kRampOffsetShift) +
                         std::int64_t(pp.ramp_dx) * c + std::int64_t(pp.ramp_dy) * r;
  return int(x >> kRampFractionBits);  // arithmetic: floor
}

// The range of §6.1 (the gradient's clamp) and the midpoint of §6.3 of a
// ramped plane, whatever its transform: values differ from their ramp by
// little, and residuals inside this range keep codes <= 1023 (§7.2).
L3_HD PlaneRange ramped_range() { return {-255, 255, 0}; }

// Rice parameter for a sample of plane pp with neighbourhood activity a.
L3_HD int k_for_activity(const PlaneParams& pp, int a) { return pp.k_of_activity[a < kActivityTable - 1 ? a : kActivityTable - 1]; }

struct CodedTileParams {
  // channels: the coded planes (1 in a palette tile, whose one plane holds
  // palette indices; spec §4.4); out_channels: the image's channels.
  int width, height, channels, out_channels;
  std::uint32_t palette_size;      // 0: no palette; else 1..256 colours
  std::uint32_t palette_at;        // tile offset of colour 0's varying samples
  std::uint32_t palette_const_at;  // tile offset of the constant channels' values
  std::uint32_t palette_mask;      // bit k: channel k is the same in every colour
  std::uint32_t palette_stride;    // bytes per colour: the varying channels
  std::uint8_t transform;
  bool run_mode;
  std::uint8_t run_k;
  // Entropy-coded tile (version 3, spec §4.5): each plane's k[] holds the
  // context group of each bucket instead of a Rice parameter (so that
  // k_of_activity gives the group), and ans_cum the cumulative frequencies of
  // the contexts' tokens: context p * kAnsGroups + group, kAnsRunContext for
  // run lengths. Entries past a context's alphabet are kAnsTotal; an unused
  // context is all zeros (a symbol read in it fails, spec §7.4).
  bool ans;
  // Version 4 (spec §4.3): a row stream of length 0 is a zero row, every
  // residual code of the row 0 and no bits read (is_zero_row).
  bool zero_rows;
  // Version 6 (spec §4.6, §6.6): pixel copies, in entropy-coded tiles only,
  // with contexts kCopyLengthContext.. of ans_cum (unused without copies).
  bool copies;
  // Version 11 (spec §4.3, §6.8): a palette tile of two colours whose index
  // plane is bilevel: each pixel a binary symbol in the context of its
  // neighbours' indices, bilevel_one[x] the frequency of a 1 in context x (0:
  // unused). The plane's context tables (ans_cum) are then unused. Version
  // 13: of up to 16 colours, each index coded as bilevel_bits binary symbols
  // (bit j in the contexts of table bilevel_one[j]), the contexts' template
  // pixels at rows up template_dy[i], columns right template_dx[i].
  bool bilevel;
  int bilevel_bits;
  int template_dy[kTemplatePixels], template_dx[kTemplatePixels];
  std::uint16_t bilevel_one[kMaxBitPlanes][kBilevelContexts];
  std::uint16_t ans_cum[kAnsAllContexts][kAnsCumSize];
  // Version 14 (spec §6.9): a plane has a ramp (PlaneParams::ramp).
  bool ramps;
  PlaneParams plane[kMaxChannels];
  // Byte offset of each row's stream inside the tile, and its length.
  std::uint32_t row_offset[kMaxTileHeight];
  std::uint32_t row_length[kMaxTileHeight];
};

// Where the row-length table of a coded tile lies (spec §4.3), once its
// header is parsed: deltas of `nbits` bits, LSB-first, at tile + packed_at,
// one per row r < height - 1 that zero_mask leaves out (version 10: bit r
// set marks row r a zero row, 0 bytes long; 0 in earlier versions); row r
// is `base + delta` bytes long; the first row starts at rows_at.
// A pixel's plane values with their ramps added (spec §6.9), in place: what
// the inverse transform (§5) reads in a tile with ramps.
template <int CH>
L3_HD void add_ramps(const CodedTileParams& t, int r, int c, int* v) {
  for (int p = 0; p < CH; ++p)
    if (t.plane[p].ramp) v[p] += ramp_at(t.plane[p], r, c);
}

struct RowTable {
  std::uint32_t packed_at, rows_at, nbits;
  std::uint32_t zero_mask;
  std::uint64_t base;
};

// The template (with plane byte bit 6, version 13; else WW and NN) and the
// level tables of a bilevel plane (spec §4.3, §6.8), from byte `pos`: one
// table per bit of the palette's indices. pos advances past them.
L3_HD int parse_bilevel_entry(const std::uint8_t* tile, std::uint32_t size, bool templated, std::uint32_t& pos,
                              CodedTileParams& t) {
  int bits = 1;
  while ((1u << bits) < t.palette_size) ++bits;
  t.bilevel_bits = bits;
  for (int i = 0; i < kTemplatePixels; ++i) {
    t.template_dy[i] = default_template_dy(i);
    t.template_dx[i] = default_template_dx(i);
  }
  if (templated) {
    if (size - pos < 2 * kTemplatePixels) return kTruncated;
    for (int i = 0; i < kTemplatePixels; ++i) {
      const int dy = tile[pos + 2 * i], dx = int(std::int8_t(tile[pos + 2 * i + 1]));
      const bool same_row = dy == 0 && dx >= -kTemplateReach && dx <= -1;
      const bool above = dy >= 1 && dy <= kTemplateMaxUp && dx >= dy - kTemplateReach && dx <= 0;
      if (!same_row && !above) return kCorruptTile;
      t.template_dy[i] = dy;
      t.template_dx[i] = dx;
    }
    pos += 2 * kTemplatePixels;
  }
  for (int j = 0; j < bits; ++j) {
    const int st = parse_bilevel_table(tile, size, pos, t.bilevel_one[j]);
    if (st != kOk) return st;
  }
  return kOk;
}

// The little-endian u32 at q, byte by byte (tile header fields are not aligned).
L3_HD std::uint32_t load_le32(const std::uint8_t* q) {
  return std::uint32_t(q[0]) | std::uint32_t(q[1]) << 8 | std::uint32_t(q[2]) << 16 | std::uint32_t(q[3]) << 24;
}

// Reads the coded tile header (after the mode byte) up to the row-length
// table: every field validated, the table's bytes inside [0, size). With
// expand_k, also fills each plane's k_of_activity (the GPU fills it with
// the whole warp instead: cuda/include/l3/cuda/wavefront.hpp).
// `version` is the image header's (1..kVersion): constant planes and palettes
// are version 2's, entropy-coded tiles version 3's, zero rows version 4's,
// pixel copies version 6's, the plane context of the plane before version 7's,
// residual corrections version 8's, compact frequency tables version 9's, zero-row
// bitmaps version 10's, bilevel planes version 11's, the NW predictor version 12's (mirrored
// tiles, kind 3, are the callers': they decode as kind 0, §4.7), bilevel
// planes of more than two colours and templates version 13's.
L3_HD int parse_coded_header(const std::uint8_t* tile, std::uint32_t size, int width, int height, int channels,
                             int version, CodedTileParams& t, RowTable& rt, bool expand_k = true) {
  const std::uint8_t mode = tile[0];
  t.width = width;
  t.height = height;
  t.out_channels = channels;
  t.transform = static_cast<std::uint8_t>((mode >> 2) & 3);
  t.run_mode = (mode >> 4) & 1;
  const bool palette = (mode & kModePalette) != 0;
  t.ans = (mode & kModeAns) != 0;
  t.zero_rows = version >= kVersionZeroRows;
  t.copies = (mode & kModeCopies) != 0;
  t.bilevel = false;
  t.bilevel_bits = 0;
  t.ramps = false;
  const bool compact = version >= kVersionCompactTables;  // the frequency tables' form (§4.5)
  if ((t.copies && version < kVersionPixelCopies) || (palette && version < 2) || (t.ans && version < kVersionAns))
    return kReservedBits;
  if (t.copies && !t.ans) return kCorruptTile;  // copies are entropy-coded values (spec §4.6)
  if (t.transform == 3 || ((channels < 3 || palette) && t.transform != kTransformNone)) return kCorruptTile;
  std::uint32_t pos = 1;
  t.palette_size = 0;
  t.palette_at = 0;
  if (palette) {
    // u8 (colours - 1), then the colours, `channels` bytes each; the tile
    // codes one plane of indices into them (spec §4.4).
    if (size - pos < 2) return kTruncated;
    t.palette_size = std::uint32_t(tile[pos++]) + 1;
    t.palette_mask = tile[pos++];
    if (t.palette_mask >> channels) return kReservedBits;
    std::uint32_t constant = 0;
    for (int k = 0; k < channels; ++k) constant += (t.palette_mask >> k) & 1;
    t.palette_stride = std::uint32_t(channels) - constant;
    if (size - pos < constant) return kTruncated;
    t.palette_const_at = pos;
    pos += constant;
    if (size - pos < t.palette_size * t.palette_stride) return kTruncated;
    t.palette_at = pos;
    pos += t.palette_size * t.palette_stride;
    channels = 1;
  }
  t.channels = channels;
  for (int p = 0; p < channels; ++p) {
    PlaneParams& pp = t.plane[p];
    if (size - pos < 1) return kTruncated;
    std::uint8_t pb = tile[pos++];
    // Bit 3 (version 7): the context of the plane before (spec §4.3, §6.2),
    // for coded planes after the first only.
    const bool previous = (pb & kPlaneContextOfPrevious) != 0 && version >= kVersionPlaneContext;
    if (previous) pb = std::uint8_t(pb & ~kPlaneContextOfPrevious);
    // Bit 4 (version 8): residual corrections, a u32 of entries after the
    // plane byte (spec §4.3, §6.7), for coded planes only.
    const bool corrected = (pb & kPlaneCorrections) != 0 && version >= kVersionCorrections;
    if (corrected) pb = std::uint8_t(pb & ~kPlaneCorrections);
    // Bit 5 (version 11): a bilevel plane (spec §4.3, §6.8), the index plane
    // of an entropy-coded two-colour palette tile without copies.
    const bool bilevel = (pb & kPlaneBilevel) != 0 && version >= kVersionBilevel;
    if (bilevel) pb = std::uint8_t(pb & ~kPlaneBilevel);
    // Bit 6 (version 13): a bilevel plane's template follows its plane byte.
    const bool templated = (pb & kPlaneTemplate) != 0 && version >= kVersionBitPlanes;
    if (templated) pb = std::uint8_t(pb & ~kPlaneTemplate);
    // Bit 7 (version 14): a ramp, three i32 after the corrections (spec
    // §4.3, §6.9), for coded planes of tiles without palette and copies.
    const bool ramp = (pb & kPlaneRamp) != 0 && version >= kVersionRamps;
    if (ramp) pb = std::uint8_t(pb & ~kPlaneRamp);
    if (pb >> 3) return kReservedBits;
    if (ramp && (bilevel || t.palette_size || t.copies || pb == kPlaneConstant)) return kCorruptTile;
    if (templated && !bilevel) return kCorruptTile;
    const std::uint32_t max_colours = version >= kVersionBitPlanes ? 1u << kMaxBitPlanes : 2u;
    if (bilevel && (t.palette_size < 2 || t.palette_size > max_colours || !t.ans || t.copies || corrected ||
                    pb >= kPredCount))
      return kCorruptTile;
    if (previous && (p == 0 || pb == kPlaneConstant)) return kCorruptTile;
    if (corrected && pb == kPlaneConstant) return kCorruptTile;
    pp.previous_code = previous;
    pp.corrected = corrected;
    pp.corrections = 0;
    if (corrected) {
      if (size - pos < 4) return kTruncated;
      const std::uint32_t entries = load_le32(tile + pos);
      pos += 4;
      if (entries >> (kCorrectionBits * kCorrectionClasses)) return kReservedBits;
      for (int g = 0; g < kCorrectionClasses; ++g)
        if (((entries >> (kCorrectionBits * g)) & 3u) == 3u) return kCorruptTile;  // bias 3: not a bias
      pp.corrections = entries;
    }
    pp.ramp = ramp;
    pp.ramp_offset = pp.ramp_dx = pp.ramp_dy = 0;
    if (ramp) {
      if (size - pos < 12) return kTruncated;
      pp.ramp_offset = std::int32_t(load_le32(tile + pos));
      pp.ramp_dx = std::int32_t(load_le32(tile + pos + 4));
      pp.ramp_dy = std::int32_t(load_le32(tile + pos + 8));
      pos += 12;
      t.ramps = true;
    }
    pp.range = ramp ? ramped_range() : plane_range(t.transform, p);
    pp.constant = version >= 2 && pb == kPlaneConstant;
    if (bilevel) {
      // Bits of indices, each 0 or 1, the first pixel predicted 0; from
      // version 13 the template, then a table of levels per bit instead of
      // context tables (spec §4.3, §6.8).
      t.bilevel = true;
      pp.pred = pb;
      pp.range = {0, 1, 0};
      for (std::uint32_t b = 0; b < kBuckets; ++b) pp.k[b] = 0;
      const int st = parse_bilevel_entry(tile, size, templated, pos, t);
      if (st != kOk) return st;
    } else if (pp.constant) {
      // i16 LE value inside the plane's range (spec §4.3, §5.1).
      if (size - pos < 2) return kTruncated;
      const int value = int(std::int16_t(std::uint16_t(tile[pos] | tile[pos + 1] << 8)));
      pos += 2;
      if (value < pp.range.lo || value > pp.range.hi) return kCorruptTile;
      pp.pred = kPredMED;
      pp.range.mid = value;
      for (std::uint32_t b = 0; b < kBuckets; ++b) pp.k[b] = 0;
    } else if (t.ans) {
      // Entropy-coded: the plane's kAnsGroups frequency tables instead of a k table.
      if (!coded_predictor(pb, version)) return kCorruptTile;
      pp.pred = pb;
      for (std::uint32_t b = 0; b < kBuckets; ++b) pp.k[b] = std::uint8_t(ans_group_of_bucket(int(b)));
      const int st = parse_ans_tables(tile, size, pos, t.ans_cum + p * kAnsGroups, kAnsGroups, compact);
      if (st != kOk) return st;
    } else {
      if (!coded_predictor(pb, version)) return kCorruptTile;
      if (size - pos < kBuckets / 2) return kTruncated;
      pp.pred = pb;
      for (std::uint32_t b = 0; b < kBuckets; b += 2) {
        const std::uint8_t kk = tile[pos++];
        pp.k[b] = kk & 15;
        pp.k[b + 1] = kk >> 4;
        if ((kk & 15) > kMaxK || (kk >> 4) > kMaxK) return kCorruptTile;
      }
    }
    if (expand_k) expand_k_table(pp);
  }
  t.run_k = 0;
  if (t.ans) {
    // Contexts of absent and constant planes are unused (all zeros), and so is
    // the run lengths' without run mode.
    auto unused = [&](int x) {
      for (int i = 0; i < kAnsCumSize; ++i) t.ans_cum[x][i] = 0;
    };
    for (int x = channels * kAnsGroups; x < kAnsRunContext; ++x) unused(x);
    for (int x = kAnsContexts; x < kAnsAllContexts; ++x) unused(x);
    for (int p = 0; p < channels; ++p)
      if (t.plane[p].constant || t.bilevel)
        for (int x = p * kAnsGroups; x < (p + 1) * kAnsGroups; ++x) unused(x);
    if (t.run_mode) {
      const int st = parse_ans_tables(tile, size, pos, t.ans_cum + kAnsRunContext, 1, compact);
      if (st != kOk) return st;
    } else {
      unused(kAnsRunContext);
    }
    if (t.copies) {
      // The copies' contexts: length, rows up, columns back (spec §4.6).
      const int st = parse_ans_tables(tile, size, pos, t.ans_cum + kCopyLengthContext, kCopyContexts, compact);
      if (st != kOk) return st;
    }
  } else if (t.run_mode) {
    if (size - pos < 1) return kTruncated;
    t.run_k = tile[pos++];
    if (t.run_k > kMaxK) return kCorruptTile;
  }
  // Row-length table: LEB128 base, a width byte, in version 10 (width byte
  // bit 7) a bitmap of the zero rows, then a delta of `width` bits, LSB-first,
  // per row but the last (and but the zero rows), padded to a byte (spec §4.3).
  std::uint64_t base = 0;
  std::uint32_t nbits = 0, zero_mask = 0, deltas = height > 1 ? std::uint32_t(height - 1) : 0;
  if (height > 1) {
    for (int shift = 0;; shift += 7) {
      if (pos >= size) return kTruncated;
      if (shift > 28) return kCorruptTile;
      const std::uint8_t byte = tile[pos++];
      base |= std::uint64_t(byte & 0x7f) << shift;
      if (!(byte & 0x80)) break;
    }
    if (pos >= size) return kTruncated;
    const std::uint8_t width_byte = tile[pos++];
    const bool masked = (width_byte & kRowTableMasked) && version >= kVersionRowMasks;
    nbits = masked ? std::uint32_t(width_byte & 0x7f) : width_byte;
    if (nbits > kMaxRowLengthBits) return kCorruptTile;
    if (masked) {
      const std::uint32_t mask_bytes = (std::uint32_t(height - 1) + 7) / 8;
      if (size - pos < mask_bytes) return kTruncated;
      for (std::uint32_t i = 0; i < mask_bytes; ++i) zero_mask |= std::uint32_t(tile[pos++]) << (8 * i);
      if (zero_mask >> (height - 1)) return kCorruptTile;  // bits past the rows it marks
      deltas -= std::uint32_t(popc32(zero_mask));
    }
  }
  const std::uint32_t table_bytes = (deltas * nbits + 7) / 8;
  if (size - pos < table_bytes) return kTruncated;
  rt.packed_at = pos;
  rt.rows_at = pos + table_bytes;
  rt.nbits = nbits;
  rt.zero_mask = zero_mask;
  rt.base = base;
  return kOk;
}

// Length in bytes of row r < height - 1 (its delta read from the packed
// table: the deltas skip the zero rows of a version 10 bitmap).
L3_HD std::uint64_t row_length_of(const std::uint8_t* tile, const RowTable& rt, int r) {
  if ((rt.zero_mask >> r) & 1) return 0;
  const std::uint8_t* packed = tile + rt.packed_at;
  std::uint64_t delta = 0;
  const std::uint32_t index = std::uint32_t(r - popc32(rt.zero_mask & ((1u << r) - 1)));
  const std::uint32_t first = index * rt.nbits;
  for (std::uint32_t i = 0; i < rt.nbits; ++i) {
    const std::uint32_t bit = first + i;
    delta |= std::uint64_t((packed[bit >> 3] >> (bit & 7)) & 1) << i;
  }
  return rt.base + delta;
}

// Reads the coded tile header (after the mode byte) and the row-length table.
// Validates every field; on success all row streams lie inside [0, size).
L3_HD int parse_coded_tile(const std::uint8_t* tile, std::uint32_t size, int width, int height,
                           int channels, int version, CodedTileParams& t) {
  RowTable rt;
  const int st = parse_coded_header(tile, size, width, height, channels, version, t, rt);
  if (st != kOk) return st;
  std::uint64_t offset = rt.rows_at;
  for (int r = 0; r + 1 < height; ++r) {
    const std::uint64_t len = row_length_of(tile, rt, r);
    if (len > size || offset + len > size) return kTruncated;
    t.row_offset[r] = std::uint32_t(offset);
    t.row_length[r] = std::uint32_t(len);
    offset += len;
  }
  t.row_offset[height - 1] = std::uint32_t(offset);
  t.row_length[height - 1] = std::uint32_t(size - offset);
  return kOk;
}

// Palette tiles (spec §4.4): the colour of index v, its channels packed
// little-endian in a word (the wavefront's stage format; a word, not a byte
// array, so that the GPU keeps it in a register), or false when v is not an
// index of the palette.
L3_HD bool palette_word(const std::uint8_t* tile, const CodedTileParams& t, int v, std::uint32_t& word) {
  if (std::uint32_t(v) >= t.palette_size) return false;  // negative values wrap to large ones
  const std::uint8_t* cst = tile + t.palette_const_at;
  const std::uint8_t* var = tile + t.palette_at + std::uint32_t(v) * t.palette_stride;
  std::uint32_t w = 0;
  for (int k = 0; k < t.out_channels; ++k) {
    const std::uint32_t b = ((t.palette_mask >> k) & 1) ? *cst++ : *var++;
    w |= b << (8 * k);
  }
  word = w;
  return true;
}

// ---- One lane: the decode of one pixel of one row (spec §6-§7) --------------

// What a lane knows of its neighbourhood when it decodes pixel (r, c): the
// plane values and residual codes of W (its own previous pixel), and of N and
// NW (from the row above; on the GPU, from the lane above by shuffle).
struct Neighbours {
  int w[kMaxChannels], n[kMaxChannels], nw[kMaxChannels];
  int uw[kMaxChannels], un[kMaxChannels], unw[kMaxChannels];
};

// Applies the tile-edge rules of spec §6.3 in place: a missing row above
// copies W; a missing column to the left copies N; the first pixel of a tile
// sees plane midpoints and zero residual codes.
// `planes` is t.channels; the GPU wavefront passes it as a compile-time
// constant so that `nb` stays in registers (a runtime-bounded index would put
// it in local memory).
L3_HD void apply_edges(const CodedTileParams& t, int r, int c, Neighbours& nb, int planes) {
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int p = 0; p < planes; ++p) {
    if (r == 0 && c == 0) {
      nb.w[p] = nb.n[p] = nb.nw[p] = t.plane[p].range.mid;
      nb.uw[p] = nb.un[p] = nb.unw[p] = 0;
    } else if (r == 0) {
      nb.n[p] = nb.nw[p] = nb.w[p];
      nb.un[p] = nb.unw[p] = nb.uw[p];
    } else if (c == 0) {
      nb.w[p] = nb.nw[p] = nb.n[p];
      nb.uw[p] = nb.unw[p] = nb.un[p];
    }
  }
}
L3_HD void apply_edges(const CodedTileParams& t, int r, int c, Neighbours& nb) { apply_edges(t, r, c, nb, t.channels); }

// Per-lane state that persists along a row; `Reader` reads its stream
// (BitReader on the CPU, WordReader in the GPU wavefront: the same bits).
template <class Reader>
struct LaneStateOf {
  Reader br;
  int run_left;        // pixels still to emit from the current zero run
  bool blocked;        // the next pixel may not start a run (spec §6.4)
  bool error;          // a run longer than the rest of the row, or a bad rANS state or symbol
  std::uint32_t ans;   // rANS state of an entropy-coded tile's row (spec §7.4)
  // Pixel copies (version 6, spec §6.6): pixels still to copy after the
  // current one, and the offset of their source.
  int copy_left, copy_dy, copy_dx;
  // The smallest frequency a value of the row was decoded with by
  // ans_read_select (the GPU wavefront): 0 means an unused context, an error
  // like `error` (one min per value instead of a flag update). The CPU row
  // loop sets `error` instead and leaves this at kAnsTotal.
  std::uint32_t min_freq;
};
using LaneState = LaneStateOf<BitReader>;
using WavefrontLaneState = LaneStateOf<WordReader>;

// rANS renormalisation (spec §7.4): a state below 2^16 takes the next 16 bits.
L3_HD void ans_renorm(LaneState& s) {
  if (s.ans < kAnsLow) {
    if (s.br.avail < 16) s.br.refill();
    s.ans = (s.ans << 16) | std::uint32_t(s.br.buf >> 48);
    s.br.consume(16);
  }
}

// Whether row `row` of a parsed coded tile is a zero row (version 4, spec
// §4.3): its stream is empty, and every residual code of every plane of the
// row is 0. In versions 1-3 an empty stream is an ordinary row (which fails
// §7.3 unless it reads no bits at all).
L3_HD bool is_zero_row(const CodedTileParams& t, int row) { return t.zero_rows && t.row_length[row] == 0; }

// A zero row runs as one zero run longer than any row (spec §6.4 step 1:
// every pixel a run pixel, no bits read, run_left never reaches 0), so the
// per-pixel decode (decode_pixel, the GPU wavefront) needs no case of its
// own; lane_end then finds nothing read from an empty stream, as §7.3 asks.
inline constexpr int kZeroRowRun = 1 << 30;

template <class R>
L3_HD void lane_begin(LaneStateOf<R>& s, const std::uint8_t* tile, const CodedTileParams& t, int row) {
  s.br.init(tile + t.row_offset[row], tile + t.row_offset[row] + t.row_length[row]);
  s.run_left = 0;
  s.blocked = false;
  s.error = false;
  s.ans = 0;
  s.min_freq = kAnsTotal;
  s.copy_left = s.copy_dy = s.copy_dx = 0;
  if (is_zero_row(t, row)) {
    s.run_left = kZeroRowRun;  // no rANS state either: the stream is empty (spec §4.3)
    return;
  }
  if (t.ans) {
    // The row's initial state: its first 32 bits, at least 2^16 (spec §7.4).
    s.br.refill();
    s.ans = std::uint32_t(s.br.buf >> 32);
    s.br.consume(32);
    if (s.ans < kAnsLow) s.error = true;
  }
}

// Decodes one value of an entropy-coded tile (spec §7.4) whose token t
// (the one of the state's low 12 bits in the context's cumulative
// frequencies `cum`) is known: the rANS update, then for tokens >= 16 the raw
// low bits, taken from the state as well.
L3_HD std::uint32_t ans_decode_token(LaneState& s, const std::uint16_t* cum, int t) {
  const std::uint32_t slot = s.ans & (kAnsTotal - 1);
  const std::uint32_t lo = cum[t], f = std::uint32_t(cum[t + 1]) - lo;
  if (f == 0) s.error = true;  // an unused context (its entries are all 0)
  s.ans = f * (s.ans >> kAnsPrecisionBits) + slot - lo;
  ans_renorm(s);
  if (t < kAnsDirect) return std::uint32_t(t);
  // Token 16 + 2 (n - 4) + b: the value has n + 1 bits, 1 b then n - 1 raw bits.
  const int raw_bits = ans_raw_bits(t);
  const std::uint32_t raw = s.ans & ((1u << raw_bits) - 1);
  s.ans >>= raw_bits;
  ans_renorm(s);
  return ans_value(t, raw);
}

// Decodes one value in the context of cumulative frequencies `cum`.
L3_HD std::uint32_t ans_read(LaneState& s, const std::uint16_t* cum) {
  return ans_decode_token(s, cum, ans_search(cum, s.ans & (kAnsTotal - 1)));
}

// The wavefront's token search (spec/cuda.md §2 "Token search"): three
// levels of independent loads (ans_search_wide), or, in a build with
// L3_WAVEFRONT_BINARY_SEARCH, the five dependent loads of ans_search_at
// (session 34's kernel): a kernel variant, so that a GPU times one against
// the other (scripts/gpu-kit.sh step `variant`). Both read the same tokens.
#if defined(L3_WAVEFRONT_BINARY_SEARCH)
inline constexpr bool kWavefrontWideSearch = false;
#else
inline constexpr bool kWavefrontWideSearch = true;
#endif

// ans_read for the GPU wavefront (and its CPU emulation), the same value,
// state, error flag and bits consumed, with fewer instructions per value and
// fewer divergent branches: the search in three waits (ans_search_wide), the
// error of an unused context as a minimum (LaneState::min_freq), one refill check per value instead of one per
// renormalisation (a value takes at most 32 bits: two 16-bit
// renormalisations), and both renormalisations and the raw bits as selects.
// Whether a lane renormalises is close to random on photos, so at a wavefront
// step some lanes of the warp take each branch and the warp ran all of them
// (spec/cuda.md §2). A token below kAnsDirect has 0 raw bits, and its state is
// then >= 2^16 after the first renormalisation (f >= 1 and ans >= 2^16 before
// the update make the update >= 16, then << 16), so the second renormalises
// nothing, as in ans_decode_token (and always a second check, as in the CPU
// row loop's ans_read_units); a zero frequency only occurs in an unused
// context, whose search ends at token kAnsCumSize - 2 >= kAnsDirect. After an
// error (a state below 2^16) the row fails whatever it reads next.
template <class R, bool kWide = kWavefrontWideSearch>
L3_HD std::uint32_t ans_read_select(LaneStateOf<R>& s, const std::uint16_t* cum) {
  if (s.br.avail < 32) s.br.refill();
  const std::uint32_t slot = s.ans & (kAnsTotal - 1);
  const AnsToken found = kWide ? ans_search_wide(cum, slot) : ans_token_at(cum, slot);
  const int t = found.t;
  const std::uint32_t lo = found.lo, f = found.hi - lo;
  s.min_freq = f < s.min_freq ? f : s.min_freq;  // 0: an unused context (its entries are all 0)
  std::uint32_t a = f * (s.ans >> kAnsPrecisionBits) + slot - lo;
  // The next two 16-bit units are the top 32 bits of the buffer (avail >= 32):
  // renormalisations take them from a 32-bit register, and the buffer shifts
  // once, by the bits taken (0, 16 or 32).
  const std::uint32_t units = std::uint32_t(s.br.buf >> 32);
  const bool first = a < kAnsLow;
  a = first ? (a << 16) | (units >> 16) : a;
  // ans_raw_bits and ans_value as selects: a token t >= kAnsDirect has
  // (t >> 1) - 5 raw bits below its top bits 2 | (t & 1); a direct token has
  // none, and is its value.
  const bool direct = t < kAnsDirect;
  const int raw_bits = direct ? 0 : (t >> 1) - (kAnsDirect / 2 - 3);
  const std::uint32_t top = direct ? std::uint32_t(t) : 2u | (std::uint32_t(t) & 1u);
  // The raw bits as a - (high << raw_bits), sharing the shift for the
  // state's high part (a mask ~(~0u << raw_bits) took one more instruction a
  // value on sm_90), and `taken` as two selects (16 * (first + second): one
  // more too).
  const std::uint32_t high = a >> raw_bits;
  const std::uint32_t raw = a - (high << raw_bits);
  a = high;
  const bool second = a < kAnsLow;
  a = second ? (a << 16) | (first ? units & 0xffffu : units >> 16) : a;
  const int taken = (first ? 16 : 0) + (second ? 16 : 0);
  s.br.buf <<= taken;
  s.br.avail -= taken;
  s.ans = a;
  return (top << raw_bits) | raw;
}

// Reads a bilevel plane's binary symbol (spec §6.8, §7.4) in a context whose
// frequency of a 1 is `one` (0 in an unused context: an error, recorded as
// ans_read_select records it, in LaneState::min_freq): the 0s take slots
// [0, 4096 - one), the 1s the rest. One renormalisation suffices (as for a
// token without raw bits, ans_read_select), taken as a select: on dithers
// whether a symbol renormalises is close to random.
template <class R>
L3_HD std::uint32_t ans_read_bilevel(LaneStateOf<R>& s, std::uint32_t one) {
  if (s.br.avail < 16) s.br.refill();
  const std::uint32_t slot = s.ans & (kAnsTotal - 1);
  const std::uint32_t zeros = kAnsTotal - one;
  const bool bit = slot >= zeros;
  const std::uint32_t f = bit ? one : zeros;  // an unused context: 4096 (the state stays), flagged below
  s.min_freq = one < s.min_freq ? one : s.min_freq;  // 0 only in an unused context
  const std::uint32_t a = f * (s.ans >> kAnsPrecisionBits) + slot - (bit ? zeros : 0u);
  const bool renorm = a < kAnsLow;
  s.ans = renorm ? (a << 16) | std::uint32_t(s.br.buf >> 48) : a;
  const int taken = renorm ? 16 : 0;
  s.br.buf <<= taken;
  s.br.avail -= taken;
  return bit ? 1u : 0u;
}

// The bilevel context x = W + 2 N + 4 NW + 8 A + 16 B (spec §6.8) of one
// bit of the neighbours' indices (after the edge rules) and of the template
// pixels A and B. All are 0 or 1; the mask keeps a corrupt neighbourhood
// inside the table anyway.
L3_HD int bilevel_pattern(int w, int n, int nw, int a, int b) {
  return (w | n << 1 | nw << 2 | a << 3 | b << 4) & (kBilevelContexts - 1);
}

// Whether template pixel i of pixel (r, c) of a bilevel tile lies inside the
// tile (spec §6.8); outside, template_index takes W or N for it.
L3_HD bool template_inside(const CodedTileParams& t, int i, int r, int c) {
  const int x = c + t.template_dx[i];
  return r >= t.template_dy[i] && x >= 0 && x < t.width;
}
// Template pixel i's index: `at`, the index there, when inside the tile;
// outside, W when the pixel is in the same row (dy = 0), else N. (Before
// version 13, A = WW and B = NN: outside, WW is W and NN is N.)
L3_HD int template_index(const CodedTileParams& t, int i, bool inside, int at, int w, int n) {
  return inside ? at : t.template_dy[i] == 0 ? w : n;
}
// The indices of pixel (r, c)'s template pixels into tmpl (spec §6.8), whose
// W and N are w and n. index_at(y, x) reads the index plane at row y, column
// x of the tile; it is called only inside the tile and only for indices
// already decoded (dy > 0, or dx < 0 in the same row), so each decoder and
// the encoder pass their own storage (a plane, rows, a ring).
template <class IndexAt>
L3_HD void template_indices(const CodedTileParams& t, int r, int c, int w, int n, IndexAt index_at, int* tmpl) {
  for (int i = 0; i < kTemplatePixels; ++i) {
    const bool inside = template_inside(t, i, r, c);
    tmpl[i] = template_index(t, i, inside, inside ? int(index_at(r - t.template_dy[i], c + t.template_dx[i])) : 0, w, n);
  }
}

// Whether a bilevel plane's template is WW and NN, which plane byte bit 6
// leaves out (spec §4.3): only another template needs its bytes.
L3_HD bool default_template(const CodedTileParams& t) {
  for (int i = 0; i < kTemplatePixels; ++i)
    if (t.template_dy[i] != default_template_dy(i) || t.template_dx[i] != default_template_dx(i)) return false;
  return true;
}

// A bilevel plane's pixel (spec §6.8): bit j of its index is the prediction
// from bit j of W, N, NW, xor the symbol read in the context of bit j of W,
// N, NW and the template pixels' indices a and b; no symbol is read in a run
// (`zero`). The symbols as bits of one word are the pixel's residual code
// (§6.4). kBits: the bits per index where the caller fixes them at compile
// time, 0 for t.bilevel_bits. An index past the palette is not checked here:
// every decoder checks the indices it keeps (§6.8; the CPU once per tile,
// the GPU as it looks up each index's colour).
template <std::uint8_t kPred, int kBits = 0, class R>
L3_HD void bilevel_pixel(const CodedTileParams& t, LaneStateOf<R>& s, int w, int n, int nw, int a, int b, bool zero,
                         int& index, int& code) {
  const std::uint8_t pred_id = t.plane[0].pred;
  const int bits = kBits ? kBits : t.bilevel_bits;
  index = 0;
  code = 0;
  for (int j = 0; j < bits; ++j) {
    const int wj = (w >> j) & 1, nj = (n >> j) & 1, nwj = (nw >> j) & 1;
    const int pred = predict_fixed<kPred>(pred_id, wj, nj, nwj, 0, 1);
    const int x = bilevel_pattern(wj, nj, nwj, (a >> j) & 1, (b >> j) & 1);
    const int bit = zero ? 0 : int(ans_read_bilevel(s, t.bilevel_one[j][x]));
    index |= (pred ^ bit) << j;
    code |= bit << j;
  }
}

// Zero runs (spec §6.4), before the samples of pixel c: returns whether the
// pixel's codes are all zero (inside a run, or the first pixel of one).
// `context_zero()` says whether the W, N and NW codes of every plane are zero
// (asked only when a run may start); `read(br, k)` decodes one Rice value (the
// CPU row loop passes its faster equivalent of read_rice).
template <class R, class ContextZero, class ReadRice>
L3_HD bool zero_run_step(const CodedTileParams& t, LaneStateOf<R>& s, int c, ContextZero&& context_zero, ReadRice&& read) {
  if (s.run_left > 0) {
    if (--s.run_left == 0) s.blocked = true;
    return true;
  }
  if (!t.run_mode || s.blocked) {
    s.blocked = false;
    return false;
  }
  if (!context_zero()) return false;
  const int run = int(read(s.br, t.run_k));
  if (run > t.width - c) s.error = true;
  if (run == 0) return false;
  s.run_left = run - 1;
  if (s.run_left == 0) s.blocked = true;
  return true;
}

// Pixel copies (version 6, spec §6.6), asked at pixel (r, c) before its
// codes are read: whether the pixel is copied, inside a copy or as the first
// pixel of one whose length and source are read here with `read(context)`
// (a value of that context of ans_cum). Its planes are then those of its
// source, pixel (r + s.copy_dy, c + s.copy_dx), decoded before it on every
// schedule (an earlier column of the row, or a row above at most at the same
// column: the wavefront of §8 has decoded it at an earlier step, and a crop
// of §9.2 needs nothing to the right of its last column); its residual codes
// are 0 and nothing else is read for it. Inside a zero run (§6.4) or a zero
// row nothing is read and the pixel is not copied. A copy that leaves the
// row, the tile or the window of kCopyRows rows and kCopyWindow columns sets
// s.error (the row then fails its end check) and the pixel decodes as not
// copied, so that no decoder reads outside the tile.
template <class R, class Read>
L3_HD bool copy_step(const CodedTileParams& t, LaneStateOf<R>& s, int r, int c, Read&& read) {
  if (!t.copies || s.run_left > 0) return false;
  if (s.copy_left > 0) {
    --s.copy_left;
    return true;
  }
  const std::uint32_t m = read(kCopyLengthContext);
  if (m == 0) return false;
  const std::uint32_t up = read(kCopyRowContext);
  const std::uint32_t back = read(up == 0 ? kCopyColumnContext : kCopyColumnUpContext);
  // Same row: 1..kCopyWindow - 1 columns back; `up` rows up: 0..kCopyWindow
  // - 1 - up back (the GPU's output ring still holds those, spec/cuda.md §2).
  const std::uint32_t most_back = up == 0 ? std::uint32_t(kCopyWindow - 2) : std::uint32_t(kCopyWindow - 1) - up;
  const int dx = up == 0 ? -int(back) - 1 : -int(back);
  if (up > std::uint32_t(kCopyRows) || back > most_back || int(up) > r || c + dx < 0 ||
      int(m) > t.width - c - (kMinCopy - 1)) {  // m <= 1023 (§7.4)
    s.error = true;
    return false;
  }
  s.copy_left = int(m) + kMinCopy - 2;  // the copy's other pixels
  s.copy_dy = -int(up);
  s.copy_dx = dx;
  s.blocked = false;
  return true;
}

// copy_step with the wavefront's reads (ans_read_select).
template <class R>
L3_HD bool pixel_copied(const CodedTileParams& t, LaneStateOf<R>& s, int r, int c) {
  return copy_step(t, s, r, c, [&](int x) { return ans_read_select(s, t.ans_cum[x]); });
}

// Decodes the planes of pixel (r, c) into value[] and code[], given the plane
// values (w, n, nw) and residual codes (uw, un, unw) of its neighbours after
// the edge rules. `CH` is the channel count; `kPred` a predictor shared by all
// planes, or kPredPerPlane. In a bilevel tile (CH 1), `tmpl_a` and `tmpl_b`
// are the indices of the pixel's template pixels (template_index); elsewhere
// they are not read.
template <int CH, std::uint8_t kPred = kPredPerPlane, class R>
L3_HD void decode_pixel(const CodedTileParams& t, LaneStateOf<R>& s, const int* w, const int* n, const int* nw,
                        const int* uw, const int* un, const int* unw, int c, int* value, int* code,
                        int tmpl_a = 0, int tmpl_b = 0) {
  const bool zero = zero_run_step(
      t, s, c,
      [&] {
        int total = 0;
        for (int p = 0; p < CH; ++p) total += uw[p] + un[p] + unw[p];
        return total == 0;
      },
      [&](R& br, int k) { return t.ans ? ans_read_select(s, t.ans_cum[kAnsRunContext]) : read_rice(br, k); });
  if constexpr (CH == 1) {
    if (t.bilevel) {
      bilevel_pixel<kPred>(t, s, w[0], n[0], nw[0], tmpl_a, tmpl_b, zero, value[0], code[0]);
      if (!zero) s.blocked = false;
      return;
    }
  }
#if defined(__CUDA_ARCH__)
#pragma unroll
#elif defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#pragma GCC unroll 4
#endif
  for (int p = 0; p < CH; ++p) {
    const PlaneParams& pp = t.plane[p];
    const int pred = predict_fixed<kPred>(pp.pred, w[p], n[p], nw[p], pp.range.lo, pp.range.hi);
    std::uint32_t u = 0;
    if (!zero && !pp.constant) {
      // Rice parameter, or in an entropy-coded tile the context group (spec
      // §4.5); the activity of §6.2 plus, with bit 3 of the plane byte, the
      // code of the plane before (version 7).
      int a = activity(uw[p], un[p], unw[p]);
      if (p > 0) a = with_previous_code(pp, a, code[p - 1]);
      const int k = k_for_activity(pp, a);
      u = t.ans ? ans_read_select(s, t.ans_cum[p * kAnsGroups + k]) : read_rice(s.br, k);
    }
    // No range check here: the colour transforms are integer bijections, so a
    // plane value outside its range always yields a pixel outside [0, 255],
    // which inverse_transform() reports (spec §5.2). Values stay bounded by
    // (width + height) * 512 meanwhile, far inside int.
    int e = unzigzag(u);
    if (pp.corrected) e = correct_residual(pp, e, w[p], n[p], nw[p]);  // version 8, spec §6.7
    value[p] = pred + e;
    code[p] = int(u);
  }
  if (!zero) s.blocked = false;
}

template <int CH, class R>
L3_HD void decode_pixel(const CodedTileParams& t, LaneStateOf<R>& s, const Neighbours& nb, int c, int* value, int* code) {
  decode_pixel<CH>(t, s, nb.w, nb.n, nb.nw, nb.uw, nb.un, nb.unw, c, value, code);
}

// The predictor all planes of a tile share, or kPredPerPlane.
// Constant planes do not count: every predictor reproduces them.
L3_HD std::uint8_t shared_predictor(const CodedTileParams& t) {
  int shared = -1;
  for (int p = 0; p < t.channels; ++p) {
    if (t.plane[p].constant) continue;
    if (shared >= 0 && t.plane[p].pred != shared) return kPredPerPlane;
    shared = t.plane[p].pred;
  }
  return shared >= 0 ? std::uint8_t(shared) : kPredMED;
}

// After the last pixel of a row: the stream must end exactly in its last byte,
// with zero padding bits (spec §7.3). Returns kOk or kCorruptTile.
// An entropy-coded row also ends with the encoder's initial state, 2^16 (spec
// §7.4); s.ans is 0 only in a Rice-coded tile (a valid rANS state never is)
// or a zero row, which reads nothing from its empty stream and so passes
// (spec §4.3: no end check for it).
template <class R>
L3_HD int lane_end(LaneStateOf<R>& s, std::uint32_t row_length) {
  if (s.error || s.min_freq == 0 || (s.ans != 0 && s.ans != kAnsLow)) return kCorruptTile;
  s.br.refill();  // makes the padding bits visible; does not change consumed_bits
  const std::uint64_t used = s.br.consumed_bits(s.br.end - row_length);
  if (used > std::uint64_t(row_length) * 8 || (used + 7) / 8 != row_length) return kCorruptTile;
  const int pad = int((8 - used % 8) % 8);
  if (pad && (s.br.buf >> (64 - pad)) != 0) return kCorruptTile;
  return kOk;
}

// After the last pixel a crop needs of a row (spec §9.2), whose end §7.3
// cannot check: a valid stream has not been read past its end, so a row that
// was is corrupt. Counted in bits consumed, which every decoder of this core
// agrees on (how many bytes a refill fetched past the end depends on when it
// refills: the CPU row loop refills earlier than the wavefront).
template <class R>
L3_HD int lane_end_partial(const LaneStateOf<R>& s, std::uint32_t row_length) {
  if (s.error || s.min_freq == 0 || s.br.consumed_bits(s.br.end - row_length) > std::uint64_t(row_length) * 8) return kCorruptTile;
  return kOk;
}

}  // namespace l3::core
