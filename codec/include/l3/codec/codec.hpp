// Public API of the l3 image codec (format: spec/codec.md).
//
// An .l3i image is a header, a tile table and independent tiles. Every tile
// decodes from the header and its own bytes, so tiles decode in parallel (CPU
// threads here, CUDA warps in cuda/) and a crop decodes only the tiles it
// overlaps. All functions throw l3::Error (l3/common/error.hpp) on failure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "l3/common/error.hpp"

namespace l3 {

// Pixels are 8-bit, interleaved (HWC). channels: 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA.
struct ImageView {
  const std::uint8_t* data = nullptr;
  std::uint32_t width = 0;
  std::uint32_t height = 0;
  std::uint32_t channels = 0;
  std::size_t stride = 0;  // bytes between rows; 0 means width * channels
};

struct MutableImageView {
  std::uint8_t* data = nullptr;
  std::uint32_t width = 0;
  std::uint32_t height = 0;
  std::uint32_t channels = 0;
  std::size_t stride = 0;  // bytes between rows; 0 means width * channels
};

// Decoder limits: checked from the header before anything is allocated.
struct Limits {
  std::uint32_t max_width = 65535;
  std::uint32_t max_height = 65535;
  std::uint64_t max_pixels = std::uint64_t{1} << 30;  // 1 Gi pixels
};

struct EncodeOptions {
  std::uint32_t tile_width = 0;   // 0: default (256, spec/codec.md §3.1); else 16..256, a power of two
  std::uint32_t tile_height = 0;  // 0: the encoder's (32, or fitted to rows that repeat, spec §3.1); else 1..32
  int effort = 1;                 // 0: fixed transform/predictor; 1 (default): chosen per tile by
                                  // estimate; 2: every transform (and, in one-plane tiles, every
                                  // predictor) coded, the smallest kept (density); others: invalid_argument
  unsigned threads = 1;           // tiles encoded in parallel; 0 means all hardware threads.
                                  // The output does not depend on it.
  // Entropy-coded tiles (spec/codec.md §4.5, version 3) where smaller than Rice
  // codes (effort >= 1: in the run mode estimated smaller; effort 2 codes both).
  // false: Rice codes only, a version 2 stream (4 with zero rows, see
  // zero_rows; 7 with plane contexts, see plane_contexts; 8 with corrections,
  // see corrections), which decoders
  // older than version 3 read (without those), and
  // about half the CPU decode time of rANS tiles (bench/results/codec-v2.md).
  bool entropy_coding = true;
  // At effort 1, a tile is entropy-coded only when that saves at least this
  // share of its Rice-coded bytes, in percent, and at least 0.06 bytes a
  // decoded pixel: rANS tiles cost the CPU decoder more time per sample, so
  // the default spends it where it buys the most bytes (spec/codec.md §12).
  // Effort 2 (density) entropy-codes every tile where it is smaller; 0 does
  // so at effort 1 too (neither floor).
  unsigned entropy_min_saving_percent = 7;
  // Zero rows (spec/codec.md §4.3, version 4): a tile row whose residual codes
  // are all zero (the row above repeated, a flat or horizontally constant
  // area) is stored as an empty stream. The stream is version 4 only when a
  // tile has one. false: no zero rows, a stream of version 3 or lower that
  // decoders older than version 4 read.
  bool zero_rows = true;
  // Tile copies (spec/codec.md §3.3, version 5): a tile whose pixels equal an
  // earlier tile's of the same size (chessboards, gradients, repeated
  // patterns) is stored as a reference to it in the tile table, with no bytes
  // of its own. The stream is version 5 only when it has a copy. false: no
  // copies, a stream that decoders older than version 5 read.
  bool tile_copies = true;
  // Pixel copies (spec/codec.md §4.6, §6.6, version 6): in an entropy-coded
  // tile, runs of pixels that repeat an earlier place of the same row (up to
  // 63 pixels back) or of the 4 rows above (text, user interfaces, dithers,
  // patterns) are coded as a length and an offset. Their tiles take the CPU
  // decoder's scalar loops, so at effort 1 they are sought only in tiles of
  // at most 256 colours and kept where they save at least twice
  // entropy_min_saving_percent of the tile's bytes (20% by default; any
  // saving at effort 2, which seeks them in every tile). The stream is
  // version 6 only when a tile has copies. false: none, a stream that
  // decoders older than version 6 read.
  bool pixel_copies = true;
  // Plane contexts (spec §6.2, version 7): in a tile of 2-4 coded planes, a
  // plane's context may add the residual code of the plane before it at the
  // same pixel (its errors go with the plane before's on photos and
  // gradients); the encoder sets it per plane and tile where its estimate
  // says it saves bits: at effort 1 in tiles of more than 256 colours (user
  // interfaces, text and masks rarely gain, and the estimate costs encode
  // time), at effort 2 in any tile.
  // The stream is version 7 only when a plane has it. false: none, a stream
  // that decoders older than version 7 read.
  bool plane_contexts = true;
  // Residual corrections (spec §6.7, version 8): a coded plane's residuals
  // corrected per gradient class (the signs of N - NW and NW - W) by a bias of
  // -1..1 and a sign, 4 bytes per plane, where the estimate says they save
  // more (+-1 noise on ramps, anti-aliased edges: graphics and photos).
  // The stream is version 8 only when a plane has them. false: none, a stream
  // that decoders older than version 8 read.
  bool corrections = true;
  // Compact frequency tables (spec §4.5, version 9): an entropy-coded tile's
  // tables keep at most 2 mantissa bits per frequency and leave the most
  // frequent token's to the others' remainder, a third fewer bits for a
  // loss in the rows of about 0.1% (spec §12). The stream is version 9 (or 10)
  // when it has an entropy-coded tile. false: full-precision tables, a
  // stream that decoders older than version 9 read.
  bool compact_tables = true;
  // Zero-row bitmaps (spec §4.3, version 10): a tile's row-length table marks
  // its zero rows in a bitmap and gives lengths for the other rows only,
  // where that is smaller (tiles of mostly zero rows: text, user interfaces,
  // chessboards). The stream is version 10 when a tile has one. false: none,
  // a stream that decoders older than version 10 read. Needs zero_rows and
  // compact_tables (a version 10 stream's tables are version 9's).
  bool row_masks = true;
  // Bilevel planes (spec §4.3, §6.8, version 11): a two-colour palette tile
  // codes each pixel as a binary symbol in the context of its neighbours'
  // indices (JBIG-style), where that is smaller (text, line art, dithers).
  // The stream is version 11 when a tile has one. false: none, a stream that
  // decoders older than version 11 read. Needs entropy coding and
  // compact_tables.
  bool bilevel = true;
  // Bit planes and templates of bilevel planes (spec §4.3, §6.8, version 13):
  // a bilevel plane codes palettes of up to 16 colours, bit by bit (ordered
  // dithers: a channel a bit), and its contexts' two template pixels are
  // chosen per tile by estimate (WW and NN, or the pixels d to the left and
  // d up: periodic patterns). The stream is version 13 when a tile has
  // either. false: version 11's bilevel planes only (two colours, WW and
  // NN). Needs bilevel.
  bool bilevel_templates = true;
  // Diagonal prediction (spec §4.7, §6.1, version 12): the NW predictor, and
  // mirrored tiles, decoded right to left, in which NW is the image's
  // north-east neighbour, where the estimate says NE predicts a tile much
  // better than the other predictors and the mirrored tile is smaller
  // (diagonal ramps and edges). Effort 1 and 2. The stream is version 12 when
  // a tile has either. false: neither, a stream that decoders older than
  // version 12 read. Needs compact_tables (a version 12 stream's tables are
  // version 9's).
  bool diagonals = true;
  // Ramps (spec/codec.md §6.9, version 14): a plane that is a rounded affine
  // function of the pixel's position (smooth synthetic gradients) is coded
  // as its differences from that ramp, where the estimate says so; effort 1
  // and 2, not in palette tiles nor with pixel copies. The stream is version
  // 14 when a tile has one. false: none, a stream that decoders older than
  // version 14 read. Needs compact_tables.
  bool ramps = true;
  // Symbols (spec/codec.md §3.4, version 15): blocks of pixels that repeat
  // exactly across the image's tiles (the glyphs and words of a text page,
  // icons), found as connected components on a background colour that covers
  // at least half the image, stored once in a dictionary and placed by
  // patches after the tiles decode, where that makes the stream smaller
  // (effort 1 and 2; such images are encoded twice). The stream is version
  // 15 when it has them. false: none, a stream that decoders older than
  // version 15 read.
  bool symbols = true;
};

// The one spelling of the entropy setting for users (l3pack --entropy, the
// Python `entropy=` argument): "auto" (the default: rANS tiles where they save
// at least 7%), "off" (Rice codes only: a version 2 stream, or 4 with zero
// rows, 7 with plane contexts, 8 with corrections; the fastest CPU decode), "max" (rANS wherever
// smaller) or a percentage "0".."100" (rANS where it saves at least that share
// of a tile's bytes; effort 2 ignores the share). Sets entropy_coding and
// entropy_min_saving_percent; anything else: invalid_argument naming the
// choices.
void set_entropy_mode(EncodeOptions& options, std::string_view mode);
// The inverse: "auto", "off", "max" or the percentage.
std::string entropy_mode(const EncodeOptions& options);

struct DecodeOptions {
  Limits limits{};
  unsigned threads = 1;  // tiles decoded in parallel; 0 means all hardware threads
  // Check the stream's XXH3-64 checksum before decoding (spec §2). Turn off
  // only when the same bytes were just verified by another checksum (a
  // shard record's); without it a damaged stream may decode to wrong pixels.
  bool verify_checksum = true;
};

struct ImageInfo {
  std::uint32_t version = 0;  // of the stream's format (spec/codec.md §2, §11): 1 to 15
  std::uint32_t width = 0;
  std::uint32_t height = 0;
  std::uint32_t channels = 0;
  std::uint32_t bit_depth = 8;
  std::uint32_t tile_width = 0;
  std::uint32_t tile_height = 0;
  std::uint32_t tiles_x = 0;
  std::uint32_t tiles_y = 0;
  std::uint32_t tile_copies = 0;   // tiles stored as copies of earlier ones (spec/codec.md §3.3, version 5)
  std::uint32_t symbol_patches = 0; // patches of the symbol section (spec/codec.md §3.4, version 15); 0: none
  std::uint64_t encoded_size = 0;  // bytes of the whole stream (header, table, tiles, symbols)
  std::uint64_t decoded_size() const { return std::uint64_t{width} * height * channels; }
};

struct Rect {
  std::uint32_t x = 0, y = 0, width = 0, height = 0;
};

// Encodes the image. Deterministic: the same pixels and options give the same bytes.
std::vector<std::uint8_t> encode(const ImageView& image, const EncodeOptions& options = {});

// Reads and validates the header and tile table without decoding pixels.
ImageInfo read_info(std::span<const std::uint8_t> encoded, const Limits& limits = {});

// Decodes the whole image into `out`, whose width, height and channels must match.
void decode(std::span<const std::uint8_t> encoded, const MutableImageView& out,
            const DecodeOptions& options = {});

// Convenience: decodes into a new buffer of width * height * channels bytes.
std::vector<std::uint8_t> decode(std::span<const std::uint8_t> encoded, ImageInfo* info = nullptr,
                                 const DecodeOptions& options = {});

// Decodes only `region` (which must lie inside the image), touching only the
// tiles it overlaps. `out` must be region.width x region.height with the image's channels.
void decode_region(std::span<const std::uint8_t> encoded, const Rect& region,
                   const MutableImageView& out, const DecodeOptions& options = {});

// The CPU decoder's path for coded tiles on this machine: "avx512" (their
// rows' codes and values across AVX-512 lanes), "avx2" (across AVX2 lanes,
// on a CPU without AVX-512 or with L3_MAX_ISA=avx2) or "scalar" (neither, a
// build for another CPU family, L3_MAX_ISA=scalar, or L3_FORCE_SCALAR set to
// a value other than "0"; the environment is read once). All decode the same
// pixels.
const char* cpu_decode_path();

}  // namespace l3
