// Whole-file reads and crash-safe whole-file writes, shared by the converters and l3pack.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace l3 {

// The whole file. errc::io_error (with the system's reason) when it cannot be read.
std::vector<std::uint8_t> read_file(const std::filesystem::path& path);

// Writes `bytes` to a new temporary file in the same directory, flushes it, then
// renames it over `path`. On any failure the temporary file is removed and `path`
// is untouched; throws errc::io_error.
void write_file_atomically(const std::filesystem::path& path, std::span<const std::uint8_t> bytes);

}  // namespace l3
