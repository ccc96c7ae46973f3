// fuzz_shard: bytes -> ShardReader (in-memory) -> every record read and verified.
//
// The first input byte is a mode, the rest is the shard. Checksums stop almost
// every mutation at the trailer or index hash, so with mode bit 0 set the
// target first repairs the index hash and trailer hash (and with bit 1 the
// record checksums of a raw index) before opening: the fuzzer then reaches the
// entry checks and the record reads.
// Properties: open either throws l3::Error or yields records whose spans lie
// inside the file and within the limits; record(i, yes) throws exactly when
// verify(i) does; verify_all throws exactly when some verify(i) does.
#include <vector>

#include "fuzz_common.hpp"
#include "l3/format/shard.hpp"
#include "layout.hpp"  // format/src: the byte layout, to repair checksums

namespace {
namespace L = l3::shard_layout;

void repair(std::vector<std::uint8_t>& f, bool records) {
  if (f.size() < L::kHeaderSize + L::kTrailerSize) return;
  std::uint8_t* t = f.data() + f.size() - L::kTrailerSize;
  const auto index_offset = L::load_le<std::uint64_t>(t + L::kTrIndexOffset);
  const auto stored = L::load_le<std::uint64_t>(t + L::kTrIndexStoredSize);
  const std::uint64_t end = f.size() - L::kTrailerSize;
  if (index_offset <= end && stored == end - index_offset) {
    if (records && L::load_le<std::uint16_t>(t + L::kTrEncoding) == 0) {
      const auto count = L::load_le<std::uint64_t>(t + L::kTrRecordCount);
      for (std::uint64_t i = 0; i < count && (i + 1) * L::kEntrySize <= stored; ++i) {
        std::uint8_t* e = f.data() + index_offset + i * L::kEntrySize;
        const auto off = L::load_le<std::uint64_t>(e + L::kEnOffset);
        const auto size = L::load_le<std::uint64_t>(e + L::kEnSize);
        if (off <= index_offset && size <= index_offset - off)
          L::store_le<std::uint64_t>(e + L::kEnChecksum, l3::xxh3_64({f.data() + off, size}));
      }
    }
    L::store_le<std::uint64_t>(t + L::kTrIndexHash, l3::xxh3_64({f.data() + index_offset, stored}));
  }
  L::store_le<std::uint64_t>(t + L::kTrHash, l3::xxh3_64({t, L::kTrHash}));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  l3fuzz::begin();
  if (size == 0) return 0;
  const std::uint8_t mode = data[0];
  std::vector<std::uint8_t> bytes(data + 1, data + size);
  if (mode & 1) repair(bytes, (mode & 2) != 0);
  l3::ShardLimits lim;
  lim.max_record_size = std::uint64_t{1} << 20;
  lim.max_records = 1 << 12;
  lim.max_index_size = std::uint64_t{1} << 20;
  lim.max_key_size = 256;
  lim.max_metadata_size = 1024;
  try {
    const l3::ShardReader reader(std::move(bytes), lim);
    const std::span<const std::uint8_t> file = reader.file_bytes();
    L3_FUZZ_CHECK(reader.size() <= lim.max_records);
    auto inside = [&](const std::uint8_t* p, std::size_t n) {
      return n == 0 || (p >= file.data() && n <= file.size() && p - file.data() <= std::ptrdiff_t(file.size() - n));
    };
    bool any_bad = false;
    for (std::uint64_t i = 0; i < reader.size(); ++i) {
      const l3::RecordView r = reader.record(i, l3::Verify::no);
      L3_FUZZ_CHECK(inside(r.payload.data(), r.payload.size()));
      L3_FUZZ_CHECK(r.payload.size() <= lim.max_record_size);
      L3_FUZZ_CHECK(r.key.size() <= lim.max_key_size);
      L3_FUZZ_CHECK(r.metadata.size() <= lim.max_metadata_size);
      L3_FUZZ_CHECK(r.label == l3::kNoLabel || (r.label >= 0 && r.label <= reader.max_label()));
      // Touch every byte so ASan sees any out-of-bounds span.
      unsigned sum = 0;
      for (std::uint8_t v : r.payload) sum += v;
      for (char c : r.key) sum += static_cast<unsigned char>(c);
      for (std::uint8_t v : r.metadata) sum += v;
      (void)sum;
      bool verify_failed = false, record_failed = false;
      try {
        reader.verify(i);
      } catch (const l3::Error& e) {
        L3_FUZZ_CHECK(e.code() == l3::errc::checksum_mismatch);
        verify_failed = true;
      }
      try {
        (void)reader.record(i, l3::Verify::yes);
      } catch (const l3::Error& e) {
        L3_FUZZ_CHECK(e.code() == l3::errc::checksum_mismatch);
        record_failed = true;
      }
      L3_FUZZ_CHECK(verify_failed == record_failed);
      any_bad |= verify_failed;
    }
    bool all_failed = false;
    try {
      reader.verify_all();
    } catch (const l3::Error& e) {
      L3_FUZZ_CHECK(e.code() == l3::errc::checksum_mismatch);
      all_failed = true;
    }
    L3_FUZZ_CHECK(all_failed == any_bad);
    try {
      (void)reader.record(reader.size());
      L3_FUZZ_CHECK(false && "record(size()) did not throw");
    } catch (const l3::Error& e) {
      L3_FUZZ_CHECK(e.code() == l3::errc::out_of_range);
    }
    if (any_bad) l3fuzz::last_error() = l3::errc::checksum_mismatch;
  } catch (const l3::Error& e) {
    L3_FUZZ_CHECK(l3::is_data_error(e.code()) || e.code() == l3::errc::limit_exceeded);
    l3fuzz::caught(e);
  }
  return 0;
}
