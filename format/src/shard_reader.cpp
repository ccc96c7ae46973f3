// ShardReader: validates a shard once on open (spec/format.md §6, in that
// order), then serves records from the mapping without further bounds checks.
#include <zstd.h>

#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "l3/common/file_io.hpp"
#include "l3/common/checked.hpp"
#include "l3/format/shard.hpp"
#include "layout.hpp"
#include "utf8.hpp"

namespace l3 {
namespace L = shard_layout;

struct ShardReader::State {
  std::variant<std::monostate, std::unique_ptr<file_io::MappedFile>, std::vector<std::uint8_t>> storage;
  std::span<const std::uint8_t> file;     // the whole shard (empty when read through a body)
  std::uint64_t file_size = 0;
  std::shared_ptr<const ShardBody> body;  // record bytes of a shard that is not mapped whole
  std::vector<std::uint8_t> decoded;      // the index, when stored with zstd
  std::span<const std::uint8_t> entries;  // count * kEntrySize bytes
  std::span<const std::uint8_t> heap;     // keys and metadata
  std::uint64_t count = 0;
  std::int64_t max_label = kNoLabel;
  IndexEncoding encoding = IndexEncoding::raw;
};

namespace {

[[noreturn]] void fail(errc e, const std::string& what) { throw_error(e, "shard: " + what); }

std::string num(std::uint64_t v) { return std::to_string(v); }

void check_size(std::uint64_t size) {
  if (size < L::kHeaderSize + L::kTrailerSize)
    fail(errc::truncated, "file of " + num(size) + " bytes is shorter than header + trailer (96)");
}

}  // namespace

void L::check_header_fields(std::span<const std::uint8_t> f) {
  if (f.size() < L::kHeaderSize) fail(errc::truncated, "header of " + num(f.size()) + " bytes (32 expected)");
  if (std::memcmp(f.data(), L::kHeaderMagic.data(), L::kHeaderMagic.size()) != 0)
    fail(errc::bad_magic, "header magic is not \"L3SHARD\\0\": not a shard file");
  auto version = L::load_le<std::uint16_t>(f.data() + L::kHeaderVersionAt);
  if (version != L::kVersion) fail(errc::unsupported_version, "format version " + num(version) + " (this build reads 1)");
  if (!L::all_zero(f.data() + L::kHeaderFlagsAt, L::kHeaderSize - L::kHeaderFlagsAt))
    fail(errc::reserved_bits_set, "header flags or reserved bytes are not zero");
}

namespace {

struct Trailer {
  std::uint64_t index_offset, stored_size, index_size, count, index_hash;
  std::uint16_t encoding;
};

// `tail`: the last bytes of a file of file_size bytes (the whole file, or at
// least trailer and index).
Trailer check_trailer(std::span<const std::uint8_t> tail, std::uint64_t file_size, const ShardLimits& lim) {
  const std::uint8_t* t = tail.data() + tail.size() - L::kTrailerSize;
  // §6 step 5: a valid header without a trailer magic at the end is a cut file.
  if (std::memcmp(t + L::kTrMagic, L::kTrailerMagic.data(), L::kTrailerMagic.size()) != 0)
    fail(errc::truncated, "no trailer magic at end of file: truncated or never finalized");
  if (L::load_le<std::uint64_t>(t + L::kTrHash) != l3::xxh3_64({t, L::kTrHash}))
    fail(errc::checksum_mismatch, "trailer checksum does not match");
  if (L::load_le<std::uint16_t>(t + L::kTrVersion) != L::kVersion)
    fail(errc::corrupt_index, "trailer version differs from header version");
  if (!L::all_zero(t + L::kTrReserved, L::kTrHash - L::kTrReserved))
    fail(errc::reserved_bits_set, "trailer reserved bytes are not zero");
  Trailer tr{L::load_le<std::uint64_t>(t + L::kTrIndexOffset), L::load_le<std::uint64_t>(t + L::kTrIndexStoredSize),
             L::load_le<std::uint64_t>(t + L::kTrIndexSize),   L::load_le<std::uint64_t>(t + L::kTrRecordCount),
             L::load_le<std::uint64_t>(t + L::kTrIndexHash),   L::load_le<std::uint16_t>(t + L::kTrEncoding)};
  if (tr.encoding > 1) fail(errc::corrupt_index, "unknown index encoding " + num(tr.encoding));
  auto index_end = checked_add<std::uint64_t>(tr.index_offset, tr.stored_size);
  if (tr.index_offset < L::kHeaderSize || !index_end || *index_end != file_size - L::kTrailerSize)
    fail(errc::corrupt_index, "index offset/size do not place the index right before the trailer");
  if (tr.count > lim.max_records) fail(errc::limit_exceeded, num(tr.count) + " records exceed max_records");
  if (tr.index_size > lim.max_index_size) fail(errc::limit_exceeded, "index of " + num(tr.index_size) + " bytes exceeds max_index_size");
  auto entries_size = checked_mul<std::uint64_t>(tr.count, L::kEntrySize);
  if (!entries_size || *entries_size > tr.index_size)
    fail(errc::corrupt_index, "index size " + num(tr.index_size) + " cannot hold " + num(tr.count) + " entries");
  if (tr.encoding == 0 && tr.stored_size != tr.index_size)
    fail(errc::corrupt_index, "raw index: stored size differs from index size");
  if (tr.encoding == 1 && tr.index_size == 0) fail(errc::corrupt_index, "empty index must be stored raw");
  return tr;
}

std::vector<std::uint8_t> zstd_decode(std::span<const std::uint8_t> stored, std::uint64_t size) {
  if (ZSTD_findFrameCompressedSize(stored.data(), stored.size()) != stored.size())
    fail(errc::corrupt_index, "zstd index is not exactly one zstd frame");
  // A frame that declares another size can never decode to `size` bytes:
  // reject it before allocating `size` (up to max_index_size) bytes.
  const unsigned long long declared = ZSTD_getFrameContentSize(stored.data(), stored.size());
  if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != size)
    fail(errc::corrupt_index, "zstd index frame declares " + num(declared) + " bytes, trailer says " + num(size));
  std::vector<std::uint8_t> out(static_cast<std::size_t>(size));
  std::size_t n = ZSTD_decompress(out.data(), out.size(), stored.data(), stored.size());
  if (ZSTD_isError(n)) fail(errc::corrupt_index, std::string("zstd index: ") + ZSTD_getErrorName(n));
  if (n != size) fail(errc::corrupt_index, "zstd index decodes to " + num(n) + " bytes, trailer says " + num(size));
  return out;
}

// §6 step 10: records are dense and in order, keys/metadata are dense in the heap.
std::int64_t check_entries(std::span<const std::uint8_t> entries, std::span<const std::uint8_t> heap,
                           std::uint64_t index_offset, const ShardLimits& lim) {
  std::uint64_t pos = L::kHeaderSize, heap_pos = 0;
  std::int64_t max_label = kNoLabel;
  for (std::size_t at = 0; at < entries.size(); at += L::kEntrySize) {
    const std::uint8_t* e = entries.data() + at;
    std::string rec = "record " + num(at / L::kEntrySize) + ": ";
    auto size = L::load_le<std::uint64_t>(e + L::kEnSize);
    auto label = L::load_le<std::int64_t>(e + L::kEnLabel);
    auto key_size = L::load_le<std::uint32_t>(e + L::kEnKeySize);
    auto meta_size = L::load_le<std::uint32_t>(e + L::kEnMetaSize);
    if (L::load_le<std::uint64_t>(e + L::kEnOffset) != pos) fail(errc::corrupt_index, rec + "offset is not the end of the previous record");
    if (size > lim.max_record_size) fail(errc::limit_exceeded, rec + "size " + num(size) + " exceeds max_record_size");
    if (size > index_offset - pos) fail(errc::corrupt_index, rec + "extends past the record area");
    if (label < kNoLabel) fail(errc::corrupt_index, rec + "label " + std::to_string(label) + " is negative but not -1");
    if (L::load_le<std::uint64_t>(e + L::kEnHeapOffset) != heap_pos) fail(errc::corrupt_index, rec + "key offset is not the end of the previous key/metadata");
    if (key_size > lim.max_key_size) fail(errc::limit_exceeded, rec + "key longer than max_key_size");
    if (meta_size > lim.max_metadata_size) fail(errc::limit_exceeded, rec + "metadata larger than max_metadata_size");
    if (std::uint64_t{key_size} + meta_size > heap.size() - heap_pos) fail(errc::corrupt_index, rec + "key/metadata extend past the index");
    std::string_view key(reinterpret_cast<const char*>(heap.data() + heap_pos), key_size);
    if (!is_valid_utf8(key)) fail(errc::corrupt_index, rec + "key is not valid UTF-8");
    pos += size;
    heap_pos += std::uint64_t{key_size} + meta_size;
    max_label = std::max(max_label, label);
  }
  if (pos != index_offset) fail(errc::corrupt_index, "records end at " + num(pos) + ", index starts at " + num(index_offset));
  if (heap_pos != heap.size()) fail(errc::corrupt_index, "index has " + num(heap.size() - heap_pos) + " unreferenced bytes");
  return max_label;
}

// Error's what() is "<errc name>: <detail>"; this recovers <detail>.
std::string detail_of(const Error& e) {
  return std::string(e.what()).substr(std::string(errc_name(e.code())).size() + 2);
}

}  // namespace

void ShardReader::validate(State& s, const ShardLimits& lim) {
  check_size(s.file.size());
  L::check_header_fields(s.file.first(L::kHeaderSize));
  validate_index(s, s.file, lim);
}

void ShardReader::validate_index(State& s, std::span<const std::uint8_t> tail, const ShardLimits& lim) {
  s.file_size = s.file.empty() ? s.file_size : s.file.size();
  if (tail.size() < L::kTrailerSize) fail(errc::truncated, "tail of " + num(tail.size()) + " bytes holds no trailer");
  Trailer tr = check_trailer(tail, s.file_size, lim);
  const std::uint64_t tail_at = s.file_size - tail.size();
  if (tr.index_offset < tail_at)  // only a caller's short tail does this; the file itself may be fine
    fail(errc::corrupt_index, "the index starts before the " + num(tail.size()) + " bytes read of the file's end");
  auto stored = tail.subspan(tr.index_offset - tail_at, tr.stored_size);
  if (l3::xxh3_64(stored) != tr.index_hash) fail(errc::checksum_mismatch, "index checksum does not match");
  std::span<const std::uint8_t> index = stored;
  if (tr.encoding == 1) {
    s.decoded = zstd_decode(stored, tr.index_size);
    index = s.decoded;
  }
  s.entries = index.first(tr.count * L::kEntrySize);
  s.heap = index.subspan(tr.count * L::kEntrySize);
  s.max_label = check_entries(s.entries, s.heap, tr.index_offset, lim);
  s.count = tr.count;
  s.encoding = static_cast<IndexEncoding>(tr.encoding);
}

ShardReader::ShardReader(const std::filesystem::path& path, const ShardLimits& limits)
    : s_(std::make_unique<State>()) {
  auto mapped = std::make_unique<file_io::MappedFile>(path);
  s_->file = mapped->bytes();
  s_->storage = std::move(mapped);
  try {
    validate(*s_, limits);
  } catch (const Error& e) {
    throw Error(e.code(), detail_of(e) + " ('" + path.string() + "')");
  }
}

ShardReader::ShardReader(std::vector<std::uint8_t> bytes, const ShardLimits& limits)
    : s_(std::make_unique<State>()) {
  s_->storage = std::move(bytes);
  s_->file = std::get<std::vector<std::uint8_t>>(s_->storage);
  validate(*s_, limits);
}

ShardReader::ShardReader(std::uint64_t file_size, std::vector<std::uint8_t> tail,
                         std::shared_ptr<const ShardBody> body, const ShardLimits& limits)
    : s_(std::make_unique<State>()) {
  check_size(file_size);
  if (tail.size() > file_size) fail(errc::invalid_argument, "tail longer than the file");
  s_->file_size = file_size;
  s_->body = std::move(body);
  s_->storage = std::move(tail);
  validate_index(*s_, std::get<std::vector<std::uint8_t>>(s_->storage), limits);
}

ShardReader::~ShardReader() = default;
ShardReader::ShardReader(ShardReader&&) noexcept = default;
ShardReader& ShardReader::operator=(ShardReader&&) noexcept = default;

std::uint64_t ShardReader::size() const noexcept { return s_->count; }

RecordView ShardReader::record(std::uint64_t i, Verify verify) const {
  if (i >= s_->count) throw_error(errc::out_of_range, "record " + num(i) + " of a shard with " + num(s_->count));
  const std::uint8_t* e = s_->entries.data() + i * L::kEntrySize;
  RecordView r;
  const auto offset = L::load_le<std::uint64_t>(e + L::kEnOffset), size = L::load_le<std::uint64_t>(e + L::kEnSize);
  r.payload = s_->body ? s_->body->bytes(offset, size) : s_->file.subspan(offset, size);
  r.label = L::load_le<std::int64_t>(e + L::kEnLabel);
  auto heap_at = s_->heap.subspan(L::load_le<std::uint64_t>(e + L::kEnHeapOffset));
  auto key_size = L::load_le<std::uint32_t>(e + L::kEnKeySize);
  r.key = {reinterpret_cast<const char*>(heap_at.data()), key_size};
  r.metadata = heap_at.subspan(key_size, L::load_le<std::uint32_t>(e + L::kEnMetaSize));
  if (verify == Verify::yes && l3::xxh3_64(r.payload) != L::load_le<std::uint64_t>(e + L::kEnChecksum))
    fail(errc::checksum_mismatch, "record " + num(i) + " payload checksum does not match");
  return r;
}

void ShardReader::verify(std::uint64_t i) const { (void)record(i, Verify::yes); }

void ShardReader::verify_all() const {
  for (std::uint64_t i = 0; i < s_->count; ++i) verify(i);
}

std::uint64_t ShardReader::file_size() const noexcept { return s_->file_size; }
IndexEncoding ShardReader::index_encoding() const noexcept { return s_->encoding; }
std::int64_t ShardReader::max_label() const noexcept { return s_->max_label; }
std::span<const std::uint8_t> ShardReader::file_bytes() const noexcept { return s_->file; }
const ShardBody* ShardReader::body() const noexcept { return s_->body.get(); }

RecordEntry ShardReader::entry(std::uint64_t i) const {
  if (i >= s_->count) throw_error(errc::out_of_range, "record " + num(i) + " of a shard with " + num(s_->count));
  const std::uint8_t* e = s_->entries.data() + i * L::kEntrySize;
  RecordEntry r;
  r.size = L::load_le<std::uint64_t>(e + L::kEnSize);
  r.checksum = L::load_le<std::uint64_t>(e + L::kEnChecksum);
  r.label = L::load_le<std::int64_t>(e + L::kEnLabel);
  auto heap_at = s_->heap.subspan(L::load_le<std::uint64_t>(e + L::kEnHeapOffset));
  auto key_size = L::load_le<std::uint32_t>(e + L::kEnKeySize);
  r.key = {reinterpret_cast<const char*>(heap_at.data()), key_size};
  r.metadata = heap_at.subspan(key_size, L::load_le<std::uint32_t>(e + L::kEnMetaSize));
  return r;
}

RecordExtent ShardReader::extent(std::uint64_t i) const {
  if (i >= s_->count) throw_error(errc::out_of_range, "record " + num(i) + " of a shard with " + num(s_->count));
  const std::uint8_t* e = s_->entries.data() + i * L::kEntrySize;
  return {L::load_le<std::uint64_t>(e + L::kEnOffset), L::load_le<std::uint64_t>(e + L::kEnSize),
          L::load_le<std::uint64_t>(e + L::kEnChecksum)};
}

}  // namespace l3
