// The numbers of the .l3i bitstream (spec/codec.md §2-§7), the tile decode's
// status values, and the integer helpers the shared tile core is written
// with. Part of the shared per-tile core (l3/codec/tile_core.hpp includes it).
// Rules of l3/codec/tile_core.hpp apply: host C++ and CUDA device code alike, no
// allocation, no exceptions, no asserts on input.
#pragma once

#include <cstdint>

#include "l3/common/errc.hpp"
#include "l3/common/host_device.hpp"

namespace l3::core {

// ---- Constants of the bitstream (spec/codec.md §2, §6) ---------------------

inline constexpr std::uint32_t kHeaderSize = 28;   // spec §2, including the checksum
inline constexpr std::uint32_t kChecksumOffset = 20;
inline constexpr std::uint8_t kMagic[4] = {'L', '3', 'I', 0x1A};
inline constexpr std::uint8_t kVersion = 15;  // the newest version: decoders read versions 1..kVersion (spec §11)
inline constexpr std::uint8_t kOldestVersion = 1;
// The encoder writes the lowest version its stream needs (spec §11): 15 with
// symbols (§3.4, l3/codec/symbols.hpp), else 14 with a
// plane ramp, else 13 with a bilevel plane of more than two colours or with a template, else 12 with a
// mirrored tile or a plane predicted by NW, else 11 with a bilevel plane, else 10 with a
// row-length table that marks zero rows in a bitmap, else 9 with an
// entropy-coded tile whose tables are compact, else 8 with
// residual corrections, else 7 with a plane context of the plane before, else 6 with a pixel copy, else 5 with a
// tile copy, else 4 with a zero row, else 3 with an entropy-coded tile, else 2.
inline constexpr std::uint8_t kVersionAns = 3;
inline constexpr std::uint8_t kVersionZeroRows = 4;
inline constexpr std::uint8_t kVersionTileCopies = 5;
inline constexpr std::uint8_t kVersionPixelCopies = 6;
inline constexpr std::uint8_t kVersionPlaneContext = 7;
inline constexpr std::uint8_t kVersionCorrections = 8;
inline constexpr std::uint8_t kVersionCompactTables = 9;
inline constexpr std::uint8_t kVersionRowMasks = 10;
inline constexpr std::uint8_t kVersionBilevel = 11;
inline constexpr std::uint8_t kVersionMirror = 12;
inline constexpr std::uint8_t kVersionBitPlanes = 13;
inline constexpr std::uint8_t kVersionRamps = 14;
inline constexpr std::uint32_t kMaxChannels = 4;
inline constexpr std::uint32_t kMaxTileHeight = 32;     // one CUDA lane per row
inline constexpr std::uint32_t kMinTileWidthLog2 = 4;   // 16
inline constexpr std::uint32_t kMaxTileWidthLog2 = 8;   // 256
inline constexpr std::uint32_t kBuckets = 16;           // context buckets per plane
inline constexpr std::uint32_t kMaxK = 10;              // Rice parameter range 0..10
inline constexpr std::uint32_t kEscapeZeros = 20;       // unary length that means "escape"
inline constexpr std::uint32_t kEscapeBits = 10;        // raw value bits after an escape
inline constexpr std::uint32_t kMaxRowLengthBits = 24;  // width of packed row-length deltas
inline constexpr std::uint8_t kRowTableMasked = 0x80;    // width byte: a zero-row bitmap follows (version 10)
inline constexpr int kActivityTable = 256;              // activities >= 255 share one entry

// Tile kinds (tile mode byte, bits 0-1).
inline constexpr std::uint8_t kTileCoded = 0;
inline constexpr std::uint8_t kTileConstant = 1;
inline constexpr std::uint8_t kTileRaw = 2;
// Kind 3 (version 12, spec §4.7): a coded tile decoded as kind 0, whose
// decoded column c is the tile's column W - 1 - c (a mirrored tile).
inline constexpr std::uint8_t kTileMirrored = 3;

// Tile mode byte bit 5 (version 2, spec §4.4): a palette tile.
inline constexpr std::uint8_t kModePalette = 0x20;
inline constexpr std::uint32_t kMaxPalette = 256;

// Tile mode byte bit 6 (version 3, spec §4.5): an entropy-coded tile, whose
// residual codes and run lengths are rANS-coded tokens instead of Rice codes.
inline constexpr std::uint8_t kModeAns = 0x40;
inline constexpr int kAnsTokens = 28;          // hybrid-integer tokens (spec §7.4)
inline constexpr int kAnsDirect = 16;          // codes below this are their own token
inline constexpr int kAnsGroups = 4;           // contexts per plane: bucket groups (spec §4.5)
inline constexpr int kAnsRunContext = 16;      // context of run lengths: after kMaxChannels * kAnsGroups
inline constexpr int kAnsContexts = 17;        // kMaxChannels * kAnsGroups + 1
inline constexpr int kAnsMantissaBits = 2;     // compact tables (version 9): a frequency's mantissa bits at most
inline constexpr int kAnsCumSize = 33;         // cumulative frequencies per context, padded for the search
inline constexpr int kAnsPrecisionBits = 12;   // frequencies sum to 4096
inline constexpr std::uint32_t kAnsTotal = 1u << kAnsPrecisionBits;
inline constexpr std::uint32_t kAnsLow = 1u << 16;  // state interval [2^16, 2^32); 16-bit renormalisation
inline constexpr int kAnsMaxExponent = 13;     // frequency exponent field (f = 4096 has 13 bits)
// The context group of each bucket of spec §6.2 in an entropy-coded tile.
L3_HD int ans_group_of_bucket(int b) { return b == 0 ? 0 : b < 4 ? 1 : b < 8 ? 2 : 3; }

// Tile mode byte bit 7 (version 6, spec §4.6, §6.6): pixel copies in an
// entropy-coded tile. A copy repeats the pixels of an earlier place of the
// tile: the same row up to kCopyWindow - 1 pixels back, or one of the
// kCopyRows rows above at most at the same column. Its length, row offset
// and column offset are values of four contexts of their own.
inline constexpr std::uint8_t kModeCopies = 0x80;
// Their contexts follow the kAnsContexts of the planes and runs (context
// numbers of CodedTileParams::ans_cum).
inline constexpr int kCopyContexts = 4;
inline constexpr int kCopyLengthContext = 17;    // 0: no copy; m > 0: a copy of m + kMinCopy - 1 pixels
inline constexpr int kCopyRowContext = 18;       // rows up, 0..kCopyRows
inline constexpr int kCopyColumnContext = 19;    // columns back, same row: 0..kCopyWindow - 2 (1..63 back)
inline constexpr int kCopyColumnUpContext = 20;  // columns back, rows above: 0..kCopyWindow - 1 - rows up
inline constexpr int kAnsAllContexts = 21;       // kAnsContexts + kCopyContexts
inline constexpr int kMinCopy = 3;
inline constexpr int kCopyRows = 4;
inline constexpr int kCopyWindow = 64;

// Reversible colour transforms (tile mode byte, bits 2-3; spec §5).
inline constexpr std::uint8_t kTransformNone = 0;
inline constexpr std::uint8_t kTransformSubtractGreen = 1;
inline constexpr std::uint8_t kTransformYCoCgR = 2;

// Predictors (plane byte, bits 0-2; spec §6.1).
inline constexpr std::uint8_t kPredMED = 0;
inline constexpr std::uint8_t kPredW = 1;
inline constexpr std::uint8_t kPredN = 2;
inline constexpr std::uint8_t kPredAvg = 3;
inline constexpr std::uint8_t kPredGrad = 4;
inline constexpr std::uint8_t kPredCount = 5;  // ids 0..4 (every version; bilevel planes: these only)
// Plane byte 6 (version 12, spec §6.1): NW. In a mirrored tile (kTileMirrored)
// it is the image's north-east neighbour.
inline constexpr std::uint8_t kPredNW = 6;
inline constexpr std::uint8_t kPredIds = 7;  // predictor ids are < kPredIds
// Plane byte value of a constant plane (version 2, spec §4.3): no predictor,
// no k table, no bits; every sample is the stored value.
inline constexpr std::uint8_t kPlaneConstant = 5;
// Plane byte bit 3 (version 7, spec §4.3, §6.2): the activity of a coded
// plane p >= 1 adds the residual code of plane p - 1 at the same pixel.
inline constexpr std::uint8_t kPlaneContextOfPrevious = 0x08;
// Plane byte bit 4 (version 8, spec §4.3, §6.7): a coded plane's residuals
// are corrected per gradient class; a u32 of 9 three-bit entries follows the
// plane byte. Entry bits 0-1: the bias, 0 none, 1 +1, 2 -1 (3 invalid); bit 2:
// the residual's sign flipped.
inline constexpr std::uint8_t kPlaneCorrections = 0x10;
inline constexpr int kCorrectionClasses = 9;
inline constexpr int kCorrectionBits = 3;
// Plane byte bit 5 (version 11, spec §4.3, §6.8): a bilevel plane, the index
// plane of an entropy-coded two-colour palette tile whose pixels are read as
// binary symbols in the contexts of their neighbours' indices (W, N, NW, WW,
// NN: 32 contexts), each with one probability of kBilevelLevelBits bits.
inline constexpr std::uint8_t kPlaneBilevel = 0x20;
inline constexpr int kBilevelContexts = 32;
inline constexpr int kBilevelLevelBits = 5;
// Version 13 (spec §4.3, §6.8): a bilevel plane of a palette of up to
// 2^kMaxBitPlanes colours codes each index as that many bits, one level table
// per bit, in contexts of W, N, NW and two template pixels at offsets (dy
// rows up, dx columns right) of the tile's template: dy <= kTemplateMaxUp,
// and dy - kTemplateReach <= dx <= 0 (-kTemplateReach..-1 for dy = 0):
// pixels the wavefront has decoded, within the GPU's output ring, none right
// of the pixel's column (a crop decodes nothing right of its last column).
// Before version 13 the template is WW, NN.
inline constexpr int kMaxBitPlanes = 4;
// Plane byte bit 6 (version 13): a bilevel plane's template follows.
inline constexpr std::uint8_t kPlaneTemplate = 0x40;
// Plane byte bit 7 (version 14, spec §4.3, §6.9): a **ramp**, three i32
// after the plane byte (and its corrections), is added to the plane's
// decoded values: value + floor((offset * 2^8 + dx * c + dy * r) / 2^24),
// the plane's values then coded as differences from it (smooth synthetic
// gradients, whose first rows and columns no neighbour predicts).
inline constexpr std::uint8_t kPlaneRamp = 0x80;
inline constexpr int kRampFractionBits = 24;  // dx, dy: 2^-24 per pixel
inline constexpr int kRampOffsetShift = 8;    // offset: 2^-16
inline constexpr int kTemplatePixels = 2;
inline constexpr int kTemplateMaxUp = 31;
inline constexpr int kTemplateReach = 63;
// The template without plane byte bit 6 (and before version 13): WW, then NN.
// (Functions, not arrays: device code reads no host arrays.)
L3_HD int default_template_dy(int i) { return i == 0 ? 0 : 2; }
L3_HD int default_template_dx(int i) { return i == 0 ? -2 : 0; }
inline constexpr std::uint8_t kPredPerPlane = 255;  // template argument: read each plane's predictor

// Status of a tile decode: l3::errc values (l3/common/errc.hpp), so hosts convert 1:1.
enum Status : int { kOk = int(errc::ok), kTruncated = int(errc::truncated), kCorruptTile = int(errc::corrupt_tile), kReservedBits = int(errc::reserved_bits_set) };

// ---- Small helpers ----------------------------------------------------------

L3_HD int clz64(std::uint64_t v) {
#if defined(__CUDA_ARCH__)
  return __clzll(static_cast<long long>(v));
#else
  return v ? __builtin_clzll(v) : 64;
#endif
}
L3_HD int clz32(std::uint32_t v) {
#if defined(__CUDA_ARCH__)
  return __clz(static_cast<int>(v));
#else
  return v ? __builtin_clz(v) : 32;
#endif
}
L3_HD int popc32(std::uint32_t v) {
#if defined(__CUDA_ARCH__)
  return __popc(v);
#else
  return __builtin_popcount(v);
#endif
}
L3_HD int imin(int a, int b) { return a < b ? a : b; }
L3_HD int imax(int a, int b) { return a > b ? a : b; }
L3_HD int iabs(int a) { return a < 0 ? -a : a; }

L3_HD std::uint32_t zigzag(int e) { return e >= 0 ? std::uint32_t(e) << 1 : (std::uint32_t(-e) << 1) - 1; }
L3_HD int unzigzag(std::uint32_t u) { return int(u >> 1) ^ -int(u & 1); }

}  // namespace l3::core
