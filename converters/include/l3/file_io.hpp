// Whole-file reads and crash-safe whole-file writes, shared by the converters and l3pack.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace l3 {

// The whole file. errc::io_error (with the system's reason) when it cannot be read.
std::vector<std::uint8_t> read_file(const std::filesystem::path& path);

// Whether write_file_atomically may replace a file already at its path.
enum class Overwrite : bool { no, yes };

// Writes `bytes` to a new temporary file in the same directory, flushes it, then
// renames it over `path` (Overwrite::yes), or links it there (Overwrite::no:
// fails with "<path> already exists" when a file is there, also one that
// appeared meanwhile). On any failure the temporary file is removed and `path`
// is untouched; throws errc::io_error.
void write_file_atomically(const std::filesystem::path& path, std::span<const std::uint8_t> bytes,
                           Overwrite overwrite = Overwrite::yes);

}  // namespace l3
