// Helpers shared by the reader tests: small synthetic datasets.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "l3/codec/codec.hpp"
#include "l3/format/dataset.hpp"
#include "l3/common/error.hpp"
#include "l3/reader/transform_core.hpp"
#include "test_util.hpp"

namespace l3::test {

// Pixels of synthetic image i: smooth gradients plus seeded noise, so crops
// and resizes have something to get wrong.
inline std::vector<std::uint8_t> synth_pixels(std::uint32_t w, std::uint32_t h, std::uint32_t c, std::uint64_t seed) {
  std::vector<std::uint8_t> px(std::size_t{w} * h * c);
  l3::xf::Rng rng{seed};
  for (std::uint32_t y = 0; y < h; ++y)
    for (std::uint32_t x = 0; x < w; ++x)
      for (std::uint32_t k = 0; k < c; ++k) {
        const std::uint64_t noise = rng.next() & 15u;
        px[(std::size_t{y} * w + x) * c + k] = static_cast<std::uint8_t>((x * 3 + y * 5 + k * 40 + noise + seed) & 255u);
      }
  return px;
}

struct SynthSpec {
  std::uint64_t records = 40;
  std::uint64_t per_shard = 7;
  std::uint32_t min_side = 40, max_side = 90;
  bool mixed_channels = true;  // every 5th image gray, every 7th RGBA
  std::uint32_t tile_width = 16, tile_height = 8;  // small tiles: crops decode part of an image
  // This record's image stream gets a wrong checksum field (spec/codec.md §2)
  // before it is written; its record checksum then covers the stream as written.
  std::uint64_t bad_stream_checksum = ~std::uint64_t{0};
};

inline std::uint32_t synth_channels(std::uint64_t i, bool mixed) {
  if (!mixed) return 3;
  if (i % 5 == 3) return 1;
  if (i % 7 == 5) return 4;
  return 3;
}

// Writes a dataset of synthetic images; record i has label i % 5, key "img<i>".
inline void write_synth_dataset(const std::filesystem::path& dir, const SynthSpec& spec = {}) {
  l3::Manifest manifest;
  manifest.classes = {"a", "b", "c", "d", "e"};
  std::uint64_t i = 0;
  for (std::uint64_t s = 0; i < spec.records; ++s) {
    std::string name = "shard-";
    name += std::to_string(s);
    name += ".l3s";
    l3::ShardWriter writer(dir / name);
    for (std::uint64_t k = 0; k < spec.per_shard && i < spec.records; ++k, ++i) {
      const std::uint32_t span = spec.max_side - spec.min_side + 1;
      const auto w = static_cast<std::uint32_t>(spec.min_side + (i * 37) % span);
      const auto h = static_cast<std::uint32_t>(spec.min_side + (i * 53 + 11) % span);
      const std::uint32_t c = synth_channels(i, spec.mixed_channels);
      const auto px = synth_pixels(w, h, c, i);
      l3::EncodeOptions eo;
      eo.tile_width = spec.tile_width;
      eo.tile_height = spec.tile_height;
      auto encoded = l3::encode(l3::ImageView{px.data(), w, h, c, 0}, eo);
      if (i == spec.bad_stream_checksum) encoded[20] ^= 0x01;  // the checksum field's first byte
      std::string key = "img";
      key += std::to_string(i);
      writer.append(encoded, static_cast<std::int64_t>(i % 5), key);
    }
    manifest.shards.push_back(l3::manifest_entry(writer.finalize()));
  }
  l3::write_manifest_atomic(dir, manifest);
}

// Flips one payload byte of `record` in place (its checksum then fails).
inline void corrupt_record(const std::filesystem::path& dir, std::uint64_t record, std::size_t byte = 40) {
  std::filesystem::path file;
  std::uint64_t offset = 0;
  {
    l3::Dataset ds = l3::Dataset::open(dir);
    const l3::RecordLocation loc = ds.locate(record);
    const l3::ShardReader& shard = ds.shard(loc.shard);
    const l3::RecordView rv = shard.record(loc.index, l3::Verify::no);
    REQUIRE(byte < rv.payload.size());
    offset = static_cast<std::uint64_t>(rv.payload.data() - shard.file_bytes().data()) + byte;
    file = dir / ds.manifest().shards[loc.shard].file;
  }
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  REQUIRE(f);
  f.seekg(static_cast<std::streamoff>(offset));
  char b = 0;
  f.read(&b, 1);
  b = static_cast<char>(b ^ 0x5a);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&b, 1);
}

}  // namespace l3::test
