// decode_coded_tile<3>: the row loops for 3 coded planes (decode_coded.hpp).
#include "decode_rows.hpp"

template int l3::detail::decode_coded_tile<3>(const std::uint8_t*, const l3::core::CodedTileParams&,
                                               const l3::detail::TileOutput&, const std::uint8_t*);
