// The CPU decoder's entry to a coded tile (spec/codec.md §4-§7), declared
// apart from its row loops (decode_codes.hpp, decode_rows.hpp): those are
// instantiated once per coded-plane count, each count in its own translation
// unit (decode_coded_<N>.cpp), so that a build compiles the four in parallel.
// (In one file they were the codec's longest compile by far: 84 s of the
// 100 s of l3_codec on one core here, and the critical path of every build.)
#pragma once

#include <cstddef>
#include <cstdint>

#include "l3/codec/tile_core.hpp"

namespace l3::detail {

// Where decoded pixels of one tile go: the pixels of tile-local rectangle
// [x0, x1) x [y0, y1) are written at `out` (which addresses tile pixel (x0, y0)).
struct TileOutput {
  std::uint8_t* out;
  std::size_t stride;
  int x0, y0, x1, y1;
};

// A row's end check after its last pixel (spec §7.3), or, where a crop
// stopped before the tile's end (not `full`), lane_end_partial's.
inline int row_end_status(core::LaneState& s, std::uint32_t row_length, bool full) {
  return full ? core::lane_end(s, row_length) : core::lane_end_partial(s, row_length);
}

// The end checks of rows [0, rows) of tile t, the first failure's status or kOk.
inline int rows_end_status(const core::CodedTileParams& t, core::LaneState* lanes, int rows, bool full) {
  for (int r = 0; r < rows; ++r)
    if (const int status = row_end_status(lanes[r], t.row_length[r], full); status != core::kOk) return status;
  return core::kOk;
}

// Entropy-coded tiles (spec §4.5, §7.4) on the CPU: the token of every
// 12-bit slot of every context, filled once per tile, so that finding a
// token is one load on the row's dependency chain instead of the five of
// core::ans_search. Unused contexts share a row of token 31, whose frequency
// is 0 there (core::ans_decode_token then flags the tile). Per thread: 86 KB,
// one table for the four plane counts (defined in decoder.cpp). The copies'
// contexts (version 6, spec §4.6) are filled only in tiles with copies.
struct AnsSlots {
  std::uint8_t token[core::kAnsAllContexts][core::kAnsTotal];
  const std::uint8_t* row[core::kAnsAllContexts];
};

// This thread's table, filled for tile `t`.
const AnsSlots& ans_slots(const core::CodedTileParams& t);

// Which lanes coded tiles decode their passes 1 and 2 across
// (decode_lanes.hpp): AVX-512 where the CPU has F/BW/VL/DQ/CD, else AVX2,
// else none (the scalar loops), capped by L3_MAX_ISA and L3_FORCE_SCALAR
// (l3/common/cpu_features.hpp). Decided once.
enum class DecodeLanes { none, avx2, avx512 };
DecodeLanes decode_lanes();

// Decodes parsed coded tile `t` (CH coded planes: 1 in a palette tile) into
// `o`; returns a core::Status. read_end: where the readable bytes around the
// tile end (the encoded stream's end): the row loops' refills may load up to
// there. Defined in decode_rows.hpp; instantiated in decode_coded_<CH>.cpp only.
template <int CH>
int decode_coded_tile(const std::uint8_t* tile, const core::CodedTileParams& t, const TileOutput& o,
                      const std::uint8_t* read_end);
extern template int decode_coded_tile<1>(const std::uint8_t*, const core::CodedTileParams&, const TileOutput&,
                                         const std::uint8_t*);
extern template int decode_coded_tile<2>(const std::uint8_t*, const core::CodedTileParams&, const TileOutput&,
                                         const std::uint8_t*);
extern template int decode_coded_tile<3>(const std::uint8_t*, const core::CodedTileParams&, const TileOutput&,
                                         const std::uint8_t*);
extern template int decode_coded_tile<4>(const std::uint8_t*, const core::CodedTileParams&, const TileOutput&,
                                         const std::uint8_t*);

// Decodes parsed coded tile `t` with a bilevel plane (version 11, spec §6.8;
// t.bilevel) into `o`; returns a core::Status. read_end as for
// decode_coded_tile (the lanes' gathers). Defined in decode_bilevel.cpp.
int decode_bilevel_tile(const std::uint8_t* tile, const core::CodedTileParams& t, const TileOutput& o,
                        const std::uint8_t* read_end);

}  // namespace l3::detail
