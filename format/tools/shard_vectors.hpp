// Shard test vectors (spec/vectors/shard/). The generator builds shards
// straight from spec/format.md, independently of ShardWriter, so the tests can
// also check that ShardWriter produces the same bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace l3::vectors {

struct ShardVector {
  std::string name;                 // file stem: <name>.l3s and <name>.txt
  std::vector<std::uint8_t> bytes;
  std::string expected;             // "ok" or an l3::errc name, e.g. "corrupt_index"
  std::string why;                  // one line: what is wrong with the file
};

// The records of the valid vectors, for the ShardWriter cross-check.
struct VectorRecord {
  std::vector<std::uint8_t> payload;
  std::int64_t label;
  std::string key;
  std::vector<std::uint8_t> metadata;
};
std::vector<VectorRecord> basic_records();

std::vector<ShardVector> make_shard_vectors();

}  // namespace l3::vectors
