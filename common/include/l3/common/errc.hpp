// The error codes of the l3 libraries (l3::errc), in a header that host C++
// and CUDA device code both compile: device code (the tile core, the
// wavefront) reports these values, never numbers of its own. The exception
// type and the error category are in l3/common/error.hpp.
//
// Values are stable: they are part of the ABI and of the spec's test vectors
// (spec/vectors/*.txt name the error a must-reject file produces).
//   1..99    caller errors: the arguments are wrong; the data may be fine.
//   100..199 data errors: the bytes are not a valid stream or file.
//   200..    environment errors: I/O, memory, device.
#pragma once

namespace l3 {

enum class errc : int {
  ok = 0,
  // caller errors
  invalid_argument = 1,   // a parameter is out of its documented range
  buffer_too_small = 2,   // the output buffer cannot hold the result
  limit_exceeded = 3,     // the input is valid but larger than the configured limits
  unsupported = 4,        // valid in principle, not implemented (e.g. 16-bit samples)
  out_of_range = 5,       // an index or rectangle outside the object
  // data errors
  bad_magic = 100,          // not a file of the expected kind
  unsupported_version = 101,// a version this build does not read
  corrupt_header = 102,     // a header field outside its valid range
  reserved_bits_set = 103,  // a reserved field is not zero
  truncated = 104,          // the data ends before a structure it declares
  corrupt_tile_table = 105, // tile sizes do not add up to the payload
  corrupt_tile = 106,       // a tile's coded data is invalid
  checksum_mismatch = 107,  // stored and computed hashes differ
  corrupt_index = 108,      // a shard index or trailer is inconsistent
  corrupt_manifest = 109,   // a dataset manifest is malformed
  corrupt_symbols = 110,    // an image's symbol section (spec/codec.md §3.4) is invalid
  // environment errors
  io_error = 200,
  out_of_memory = 201,
  device_error = 202,
};

constexpr bool is_caller_error(errc e) noexcept { int v = static_cast<int>(e); return v >= 1 && v < 100; }
constexpr bool is_data_error(errc e) noexcept { int v = static_cast<int>(e); return v >= 100 && v < 200; }

}  // namespace l3
