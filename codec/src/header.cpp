#include "header.hpp"

#include <string>

#include "l3/common/checked.hpp"
#include "l3/common/xxh3.hpp"

namespace l3::detail {
namespace {

std::uint32_t load_u32(const std::uint8_t* p) {
  return std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16 | std::uint32_t(p[3]) << 24;
}
void store_u32(std::vector<std::uint8_t>& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(std::uint8_t(v >> (8 * i)));
}

// spec §2: XXH3-64 of everything after the header, seeded with the XXH3-64
// of the header's first 20 bytes, so every byte but the checksum is covered.
std::uint64_t checksum_of(std::span<const std::uint8_t> b) {
  const std::uint64_t seed = xxh3_64(b.data(), core::kChecksumOffset);
  return xxh3_64(b.data() + core::kHeaderSize, b.size() - core::kHeaderSize, seed);
}

// spec §2: the fixed 28-byte header.
ImageInfo parse_header(std::span<const std::uint8_t> b, const Limits& limits, std::uint32_t& tw_log2) {
  if (b.size() < core::kHeaderSize) {
    if (b.size() >= 4 && !std::equal(b.begin(), b.begin() + 4, core::kMagic)) throw_error(errc::bad_magic, "not an l3 image");
    throw_error(errc::truncated, "stream shorter than the 28-byte header");
  }
  if (!std::equal(b.begin(), b.begin() + 4, core::kMagic)) throw_error(errc::bad_magic, "not an l3 image");
  if (b[4] < core::kOldestVersion || b[4] > core::kVersion)
    throw_error(errc::unsupported_version, "format version " + std::to_string(b[4]) + " (this build reads versions " +
                                               std::to_string(core::kOldestVersion) + " to " +
                                               std::to_string(core::kVersion) +
                                               "; decode it with a newer l3, or re-encode the source pixels)");
  ImageInfo info;
  info.version = b[4];
  info.channels = b[5];
  info.bit_depth = b[6];
  // Flags (spec §2): bit 0 symbols (§3.4) from version 15; the others reserved.
  const std::uint8_t known_flags = info.version >= core::kVersionSymbols ? core::kHeaderFlagSymbols : 0;
  if ((b[7] & ~known_flags) != 0 || b[18] != 0 || b[19] != 0)
    throw_error(errc::reserved_bits_set, "reserved header byte is not zero");
  info.symbol_patches = 0;
  if (info.channels < 1 || info.channels > core::kMaxChannels)
    throw_error(errc::corrupt_header, "channel count " + std::to_string(info.channels));
  if (info.bit_depth != 8) throw_error(errc::unsupported, "bit depth " + std::to_string(info.bit_depth) + " (only 8 is supported)");
  info.width = load_u32(&b[8]);
  info.height = load_u32(&b[12]);
  tw_log2 = b[16];
  info.tile_height = b[17];
  if (info.width == 0 || info.height == 0) throw_error(errc::corrupt_header, "zero width or height");
  if (tw_log2 < core::kMinTileWidthLog2 || tw_log2 > core::kMaxTileWidthLog2)
    throw_error(errc::corrupt_header, "tile width 2^" + std::to_string(tw_log2));
  if (info.tile_height < 1 || info.tile_height > core::kMaxTileHeight)
    throw_error(errc::corrupt_header, "tile height " + std::to_string(info.tile_height));
  if (info.width > limits.max_width || info.height > limits.max_height ||
      std::uint64_t{info.width} * info.height > limits.max_pixels)
    throw_error(errc::limit_exceeded, std::to_string(info.width) + "x" + std::to_string(info.height) +
                                          " exceeds the decoder limits");
  const core::TileGrid grid = core::TileGrid::make(info.width, info.height, tw_log2, info.tile_height);
  info.tile_width = grid.tile_width();
  info.tiles_x = grid.tiles_x;
  info.tiles_y = grid.tiles_y;
  return info;
}

// spec §3.3: tile i copies tile j, which must be an earlier tile of the same
// clipped size and not itself a copy.
void check_tile_copy(std::span<const std::uint8_t> bytes, const ParsedImage& img, std::uint32_t i,
                              std::uint32_t j) {
  auto fail = [&](const char* why) {
    throw_error(errc::corrupt_tile_table, "tile " + std::to_string(i) + " copies tile " + std::to_string(j) + why);
  };
  if (j >= i) fail(", not an earlier tile");
  if (core::is_tile_copy(load_u32(&bytes[core::kHeaderSize + 4 * std::uint64_t{j}]), img.info.version))
    fail(", itself a copy");
  if (!img.grid.same_shape(i, j)) fail(" of another size");
}

[[noreturn]] void fail_symbols(const std::string& why) { throw_error(errc::corrupt_symbols, "symbols: " + why); }

std::uint16_t load_u16(const std::uint8_t* p) { return std::uint16_t(p[0] | p[1] << 8); }

ParsedImage parse_image(std::span<const std::uint8_t> bytes, const Limits& limits, bool with_table, bool nested);

// spec §3.4: the symbol section from `at` (the end of the tiles) to the
// stream's end: the dictionary (a whole stream of the same channels, without
// symbols), the symbol table and every patch, each checked here once.
core::SymbolSection parse_symbols(std::span<const std::uint8_t> bytes, std::uint64_t at, const ImageInfo& info,
                                  const Limits& limits) {
  core::SymbolSection sec;
  auto need = [&](std::uint64_t n, const char* what) {
    if (bytes.size() - at < n) throw_error(errc::truncated, std::string("stream ends inside the symbols' ") + what);
  };
  need(4, "dictionary size");
  sec.dict_size = load_u32(&bytes[at]);
  sec.dict_offset = at + 4;
  need(4 + sec.dict_size, "dictionary");
  const std::span<const std::uint8_t> dict = bytes.subspan(sec.dict_offset, sec.dict_size);
  ParsedImage d;
  try {
    d = parse_image(dict, limits, false, true);
  } catch (const Error& e) {
    throw with_context(e, "symbol dictionary");
  }
  if (d.info.channels != info.channels) fail_symbols("dictionary of " + std::to_string(d.info.channels) + " channels");
  sec.dict_width = d.info.width;
  sec.dict_height = d.info.height;
  at = sec.dict_offset + sec.dict_size;
  need(2, "symbol count");
  sec.symbol_count = load_u16(&bytes[at]);
  if (sec.symbol_count == 0) fail_symbols("no symbols");
  sec.table_offset = at + 2;
  need(2 + std::uint64_t{core::kSymbolEntryBytes} * sec.symbol_count, "symbol table");
  for (std::uint32_t s = 0; s < sec.symbol_count; ++s) {
    const core::SymbolRect r = core::symbol_at(&bytes[sec.table_offset], s);
    if (!core::inside_dictionary(sec, r))
      fail_symbols("symbol " + std::to_string(s) + " outside the dictionary");
  }
  at = sec.table_offset + std::uint64_t{core::kSymbolEntryBytes} * sec.symbol_count;
  need(4, "patch count");
  sec.patch_count = load_u32(&bytes[at]);
  if (sec.patch_count == 0) fail_symbols("no patches");
  sec.patches_offset = at + 4;
  core::PatchReader reader{bytes.data() + sec.patches_offset, bytes.data() + bytes.size()};
  const std::uint64_t pixels = std::uint64_t{info.width} * info.height;
  std::uint64_t area = 0;
  for (std::uint32_t k = 0; k < sec.patch_count; ++k) {
    core::Patch p{};
    core::SymbolRect r{};
    const int st = reader.next(p);
    if (st == core::kTruncated) throw_error(errc::truncated, "stream ends inside patch " + std::to_string(k));
    if (st != core::kOk) fail_symbols("patch " + std::to_string(k) + ": a varint over 32 bits");
    if (core::check_patch(sec, &bytes[sec.table_offset], p, info.width, info.height, r) != core::kOk)
      fail_symbols("patch " + std::to_string(k) + " outside the image or its symbol table");
    area += std::uint64_t{r.width} * r.height;
    if (area > pixels) fail_symbols("patches cover more than the image's pixels");
  }
  if (reader.p != bytes.data() + bytes.size())
    fail_symbols(std::to_string(bytes.data() + bytes.size() - reader.p) + " bytes after the last patch");
  return sec;
}

ParsedImage parse_image(std::span<const std::uint8_t> bytes, const Limits& limits, bool with_table, bool nested) {
  ParsedImage img;
  img.info = parse_header(bytes, limits, img.tile_width_log2);
  img.bytes = bytes;
  img.grid = core::TileGrid::make(img.info.width, img.info.height, img.tile_width_log2, img.info.tile_height);
  const std::uint64_t tiles = img.grid.tile_count();
  if (tiles > 0xffffffffu) throw_error(errc::limit_exceeded, "more than 2^32-1 tiles");
  const std::uint64_t table_end = core::kHeaderSize + 4 * tiles;  // < 2^40: no overflow
  if (bytes.size() < table_end) throw_error(errc::truncated, "stream ends inside the tile table");
  // spec §3: tile sizes (or, from version 5, copies of earlier tiles), in
  // raster order; the payload is exactly the sum of the sizes.
  thread_local std::vector<std::uint64_t> offsets;
  if (with_table) offsets.resize(tiles + 1);
  std::uint64_t total = table_end;
  for (std::uint64_t i = 0; i < tiles; ++i) {
    const std::uint32_t entry = load_u32(&bytes[core::kHeaderSize + 4 * i]);
    if (with_table) offsets[i] = total;
    if (core::is_tile_copy(entry, img.info.version)) {
      check_tile_copy(bytes, img, std::uint32_t(i), core::copied_tile(entry));
      ++img.info.tile_copies;
      continue;
    }
    if (entry == 0) throw_error(errc::corrupt_tile_table, "tile " + std::to_string(i) + " has size 0");
    total += entry;
  }
  if (with_table) {
    offsets[tiles] = total;
    img.tile_offset = std::span<const std::uint64_t>(offsets.data(), tiles + 1);
  }
  if (total > bytes.size()) throw_error(errc::truncated, "stream ends inside tile data (" + std::to_string(bytes.size()) + " of " + std::to_string(total) + " bytes)");
  img.info.encoded_size = bytes.size();
  if (bytes[7] & core::kHeaderFlagSymbols) {
    // A dictionary's own symbols would nest dictionaries (spec §3.4).
    if (nested) fail_symbols("a dictionary with symbols of its own");
    img.symbols = parse_symbols(bytes, total, img.info, limits);
    img.info.symbol_patches = img.symbols.patch_count;
    return img;
  }
  if (total < bytes.size()) throw_error(errc::corrupt_tile_table, std::to_string(bytes.size() - total) + " bytes after the last tile");
  return img;
}

}  // namespace

ParsedImage parse_image(std::span<const std::uint8_t> bytes, const Limits& limits, bool with_table) {
  return parse_image(bytes, limits, with_table, false);
}

std::uint32_t ParsedImage::bytes_tile(std::uint32_t i) const {
  return core::bytes_tile(load_u32(&bytes[core::kHeaderSize + 4 * std::uint64_t{i}]), i, info.version);
}

ParsedImage::TileBytes ParsedImage::tile_bytes(std::uint32_t i) const {
  const std::uint32_t j = bytes_tile(i);
  return {tile_offset[j], std::uint32_t(tile_offset[j + 1] - tile_offset[j])};
}

void verify_checksum(std::span<const std::uint8_t> bytes) {
  std::uint64_t stored = 0;
  for (int i = 7; i >= 0; --i) stored = stored << 8 | bytes[core::kChecksumOffset + i];
  if (stored != checksum_of(bytes)) throw_error(errc::checksum_mismatch, "image checksum does not match its bytes");
}

void verify_checksums(std::span<const std::uint8_t> bytes, const core::SymbolSection& symbols) {
  verify_checksum(bytes);
  if (symbols.patch_count) verify_checksum(bytes.subspan(symbols.dict_offset, symbols.dict_size));
}

void seal(std::vector<std::uint8_t>& stream) {
  const std::uint64_t sum = checksum_of(stream);
  for (int i = 0; i < 8; ++i) stream[core::kChecksumOffset + i] = std::uint8_t(sum >> (8 * i));
}

void write_header(std::vector<std::uint8_t>& out, const ImageInfo& info, std::uint32_t tile_width_log2) {
  out.insert(out.end(), core::kMagic, core::kMagic + 4);
  out.push_back(std::uint8_t(info.version));  // the lowest version the tiles need (spec §11)
  out.push_back(std::uint8_t(info.channels));
  out.push_back(8);
  out.push_back(0);
  store_u32(out, info.width);
  store_u32(out, info.height);
  out.push_back(std::uint8_t(tile_width_log2));
  out.push_back(std::uint8_t(info.tile_height));
  out.push_back(0);
  out.push_back(0);
  out.insert(out.end(), 8, std::uint8_t{0});  // checksum, filled in by seal()
}

}  // namespace l3::detail
