#include "shard_vectors.hpp"

#include <zstd.h>

#include <cstring>
#include <functional>

#include "l3/format/shard.hpp"
#include "layout.hpp"

namespace l3::vectors {
namespace L = shard_layout;
using Bytes = std::vector<std::uint8_t>;

namespace {

struct Entry {
  std::uint64_t offset, size, checksum;
  std::int64_t label;
  std::uint64_t heap_offset;
  std::uint32_t key_size, meta_size;
};

struct Parts {
  Bytes header = Bytes(L::kHeaderSize, 0);
  Bytes records;
  std::vector<Entry> entries;
  Bytes heap;
  std::uint16_t encoding = 0;
};

struct TrailerFields {
  std::uint64_t index_offset, stored_size, index_size, count, index_hash;
  std::uint16_t encoding, version;
  std::uint32_t reserved;
};

Bytes to_bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }

Parts from_records(const std::vector<VectorRecord>& recs) {
  Parts p;
  std::memcpy(p.header.data(), L::kHeaderMagic.data(), 8);
  L::store_le<std::uint16_t>(p.header.data() + L::kHeaderVersionAt, L::kVersion);
  for (const auto& r : recs) {
    p.entries.push_back({L::kHeaderSize + p.records.size(), r.payload.size(), l3::xxh3_64(r.payload), r.label,
                         p.heap.size(), static_cast<std::uint32_t>(r.key.size()),
                         static_cast<std::uint32_t>(r.metadata.size())});
    p.records.insert(p.records.end(), r.payload.begin(), r.payload.end());
    p.heap.insert(p.heap.end(), r.key.begin(), r.key.end());
    p.heap.insert(p.heap.end(), r.metadata.begin(), r.metadata.end());
  }
  return p;
}

Bytes raw_index(const Parts& p) {
  Bytes out(p.entries.size() * L::kEntrySize);
  for (std::size_t i = 0; i < p.entries.size(); ++i) {
    std::uint8_t* e = out.data() + i * L::kEntrySize;
    const Entry& en = p.entries[i];
    L::store_le(e + L::kEnOffset, en.offset);
    L::store_le(e + L::kEnSize, en.size);
    L::store_le(e + L::kEnChecksum, en.checksum);
    L::store_le(e + L::kEnLabel, en.label);
    L::store_le(e + L::kEnHeapOffset, en.heap_offset);
    L::store_le(e + L::kEnKeySize, en.key_size);
    L::store_le(e + L::kEnMetaSize, en.meta_size);
  }
  out.insert(out.end(), p.heap.begin(), p.heap.end());
  return out;
}

using StoredTweak = std::function<void(Bytes&)>;
using TrailerTweak = std::function<void(TrailerFields&)>;

// Lays out header, records, index, trailer (spec/format.md §2). stored_tweak
// runs after the index hash is taken (damage); trailer_tweak runs before the
// trailer hash is taken (a consistent but wrong trailer).
Bytes assemble(const Parts& p, const StoredTweak& stored_tweak = {}, const TrailerTweak& trailer_tweak = {}) {
  Bytes raw = raw_index(p);
  Bytes stored = raw;
  if (p.encoding == 1) {
    stored.resize(ZSTD_compressBound(raw.size()));
    stored.resize(ZSTD_compress(stored.data(), stored.size(), raw.data(), raw.size(), 3));
  }
  TrailerFields f{L::kHeaderSize + p.records.size(), stored.size(), raw.size(), p.entries.size(),
                  l3::xxh3_64(stored), p.encoding, L::kVersion, 0};
  if (stored_tweak) stored_tweak(stored);
  if (trailer_tweak) trailer_tweak(f);
  std::uint8_t t[L::kTrailerSize] = {};
  L::store_le(t + L::kTrIndexOffset, f.index_offset);
  L::store_le(t + L::kTrIndexStoredSize, f.stored_size);
  L::store_le(t + L::kTrIndexSize, f.index_size);
  L::store_le(t + L::kTrRecordCount, f.count);
  L::store_le(t + L::kTrIndexHash, f.index_hash);
  L::store_le(t + L::kTrEncoding, f.encoding);
  L::store_le(t + L::kTrVersion, f.version);
  L::store_le(t + L::kTrReserved, f.reserved);
  L::store_le(t + L::kTrHash, l3::xxh3_64({t, L::kTrHash}));
  std::memcpy(t + L::kTrMagic, L::kTrailerMagic.data(), 8);
  Bytes out = p.header;
  out.insert(out.end(), p.records.begin(), p.records.end());
  out.insert(out.end(), stored.begin(), stored.end());
  out.insert(out.end(), t, t + L::kTrailerSize);
  return out;
}

Bytes flipped(Bytes b, std::size_t at) {
  b[at] ^= 0x01;
  return b;
}

Bytes cut(Bytes b, std::size_t size) {
  b.resize(size);
  return b;
}

}  // namespace

std::vector<VectorRecord> basic_records() {
  return {{to_bytes("first payload"), 0, "train/cat/0001.png", to_bytes("{\"w\":4}")},
          {{}, kNoLabel, "", {}},
          {to_bytes("third"), 2, "train/dog/\xC3\xA9t\xC3\xA9.png", {}}};
}

std::vector<ShardVector> make_shard_vectors() {
  const Parts base = from_records(basic_records());
  const Bytes good = assemble(base);
  const std::size_t trailer_at = good.size() - L::kTrailerSize;
  Parts zstd = base;
  zstd.encoding = 1;

  auto with = [&](const std::function<void(Parts&)>& edit) {
    Parts p = base;
    edit(p);
    return assemble(p);
  };
  auto trailer = [&](const TrailerTweak& tweak) { return assemble(base, {}, tweak); };

  std::vector<ShardVector> v = {
      {"valid_basic", good, "ok", "3 records: labels, keys, metadata, an empty payload"},
      {"valid_empty", assemble(from_records({})), "ok", "a shard with no records"},
      {"valid_zstd_index", assemble(zstd), "ok", "the basic shard with a zstd-compressed index"},
      {"empty_file", {}, "truncated", "0 bytes"},
      {"shorter_than_header_and_trailer", cut(good, 95), "truncated", "95 bytes: no room for header + trailer"},
      {"bad_header_magic", flipped(good, 0), "bad_magic", "first magic byte changed"},
      {"unsupported_version", with([](Parts& p) { p.header[L::kHeaderVersionAt] = 2; }), "unsupported_version", "header version 2"},
      {"header_flags_set", with([](Parts& p) { p.header[L::kHeaderFlagsAt] = 1; }), "reserved_bits_set", "header flags not zero"},
      {"header_reserved_set", with([](Parts& p) { p.header[31] = 0x80; }), "reserved_bits_set", "last reserved header byte not zero"},
      {"truncated_last_byte", cut(good, good.size() - 1), "truncated", "last trailer byte missing"},
      {"truncated_in_records", cut(good, L::kHeaderSize + 5), "truncated", "cut inside the first record"},
      {"trailer_bit_flip", flipped(good, trailer_at + L::kTrRecordCount), "checksum_mismatch", "record count changed, trailer hash not updated"},
      {"trailer_version_differs", trailer([](TrailerFields& f) { f.version = 2; }), "corrupt_index", "trailer version 2, header version 1"},
      {"trailer_reserved_set", trailer([](TrailerFields& f) { f.reserved = 1; }), "reserved_bits_set", "trailer reserved bytes not zero"},
      {"unknown_index_encoding", trailer([](TrailerFields& f) { f.encoding = 2; }), "corrupt_index", "index encoding 2"},
      {"index_offset_wrong", trailer([](TrailerFields& f) { f.index_offset -= 1; }), "corrupt_index", "index offset one byte early"},
      {"index_offset_in_header", trailer([](TrailerFields& f) { f.index_offset = 8; f.stored_size = 0; }), "corrupt_index", "index offset inside the header"},
      {"index_size_wraps", trailer([](TrailerFields& f) { f.stored_size = ~std::uint64_t{0}; }), "corrupt_index", "offset + stored size overflows 64 bits"},
      {"record_count_over_limit", trailer([](TrailerFields& f) { f.count = (std::uint64_t{1} << 24) + 1; }), "limit_exceeded", "more records than the default max_records"},
      {"record_count_too_large", trailer([](TrailerFields& f) { f.count += 10; }), "corrupt_index", "index too small for the record count"},
      {"record_count_overflows", trailer([](TrailerFields& f) { f.count = ~std::uint64_t{0} / 16; }), "limit_exceeded", "count * 48 would overflow"},
      {"raw_index_size_differs", trailer([](TrailerFields& f) { f.index_size -= 1; }), "corrupt_index", "raw index: stored size != index size"},
      {"index_bit_flip", assemble(base, [](Bytes& s) { s[3] ^= 1; }), "checksum_mismatch", "index byte changed, index hash not updated"},
      {"entry_offset_gap", with([](Parts& p) { p.entries[1].offset += 1; }), "corrupt_index", "record 1 starts one byte after record 0 ends"},
      {"entry_size_past_area", with([](Parts& p) { p.entries[2].size += 1; }), "corrupt_index", "last record extends into the index"},
      {"records_before_index", with([](Parts& p) { p.records.push_back(0); }), "corrupt_index", "a byte between the last record and the index"},
      {"entry_size_over_limit", with([](Parts& p) { p.entries[2].size = (std::uint64_t{1} << 30) + 1; }), "limit_exceeded", "record larger than the default max_record_size"},
      {"negative_label", with([](Parts& p) { p.entries[0].label = -2; }), "corrupt_index", "label -2"},
      {"heap_offset_wrong", with([](Parts& p) { p.entries[2].heap_offset += 1; }), "corrupt_index", "key offset not dense"},
      {"key_past_index", with([](Parts& p) { p.entries[2].key_size += 100; }), "corrupt_index", "key extends past the index"},
      {"key_over_limit", with([](Parts& p) { p.entries[2].key_size = 4097; }), "limit_exceeded", "key longer than the default max_key_size"},
      {"metadata_over_limit", with([](Parts& p) { p.entries[2].meta_size = 65537; }), "limit_exceeded", "metadata larger than the default max_metadata_size"},
      {"key_not_utf8", with([](Parts& p) { p.heap[0] = 0xFF; }), "corrupt_index", "key byte 0xFF"},
      {"heap_unreferenced_byte", with([](Parts& p) { p.heap.push_back('x'); }), "corrupt_index", "one index byte no entry refers to"},
      {"payload_bit_flip", flipped(good, L::kHeaderSize + 2), "checksum_mismatch", "payload byte changed: opens, fails on read/verify"},
      {"zstd_index_garbage", trailer([](TrailerFields& f) { f.encoding = 1; }), "corrupt_index", "raw index bytes marked zstd: not a zstd frame"},
      {"zstd_index_size_differs", assemble(zstd, {}, [](TrailerFields& f) { f.index_size += 1; }), "corrupt_index", "zstd index decodes to fewer bytes than the trailer says"},
      {"zstd_empty_index", assemble(from_records({}), {}, [](TrailerFields& f) { f.encoding = 1; }), "corrupt_index", "empty index marked zstd"},
  };
  return v;
}

}  // namespace l3::vectors
