// Image I/O for the benchmarks: the peers the codec is compared with.
//
// PNG through libpng (read a file, encode to memory at libpng's default zlib level, decode from
// memory) and libspng (decode from memory), JPEG through libjpeg-turbo's classic jpeglib API.
// Pixels are 8-bit interleaved: 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA. Errors throw
// std::runtime_error with the file or codec named.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace l3bench {

struct Pixels {
  std::uint32_t width = 0;
  std::uint32_t height = 0;
  std::uint32_t channels = 0;
  std::vector<std::uint8_t> data;  // width * height * channels bytes
  std::size_t size() const { return std::size_t{width} * height * channels; }
};

// Reads a PNG file with libpng: palette expanded, 16-bit stripped, bit depths < 8 expanded,
// tRNS expanded to alpha. Result has 1..4 channels.
Pixels read_png_file(const std::string& path);

// Encodes with libpng at its defaults (zlib level 6 via Z_DEFAULT_COMPRESSION, libpng's
// adaptive filter choice), no ancillary chunks.
std::vector<std::uint8_t> encode_png(const Pixels& image);

// Decodes PNG bytes with libpng into `out` (caller-allocated, must hold width*height*channels of
// the stream's native 8-bit format). Returns the bytes written.
std::size_t decode_png_libpng(std::span<const std::uint8_t> png, std::uint8_t* out, std::size_t out_size);

// Decodes PNG bytes with libspng (SPNG_FMT_PNG: the stream's own 8-bit layout) into `out`.
std::size_t decode_png_spng(std::span<const std::uint8_t> png, std::uint8_t* out, std::size_t out_size);

// Encodes with libjpeg-turbo at `quality` (jpeg_set_defaults: 4:2:0 chroma subsampling for
// colour, baseline Huffman, islow DCT). Gray images stay gray; an alpha channel is dropped
// (JPEG has none). jpeg_channels receives the channel count coded (1 or 3).
std::vector<std::uint8_t> encode_jpeg(const Pixels& image, int quality, std::uint32_t* jpeg_channels);

// Decodes JPEG bytes into `out` (width*height*components bytes). Returns the bytes written.
std::size_t decode_jpeg(std::span<const std::uint8_t> jpeg, std::uint8_t* out, std::size_t out_size);

std::vector<std::uint8_t> read_file(const std::string& path);

// The clock a benchmark times single-thread runs by: wall-clock time, or the calling thread's
// CPU time (CLOCK_THREAD_CPUTIME_ID), which leaves out the time a shared or virtual machine
// gave the core to someone else, so two codecs timed alternately compare better there.
enum class RunClock { wall, thread_cpu };

inline double clock_seconds(RunClock clock) {
  if (clock == RunClock::wall)
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

// Seconds taken by the fastest of repeated runs of f, by `clock`: at least min_runs runs, then
// more until they add up to min_total seconds or max_runs runs are done.
template <class F>
double fastest_run(F&& f, int min_runs, double min_total, int max_runs = std::numeric_limits<int>::max(),
                   RunClock clock = RunClock::wall) {
  double best = std::numeric_limits<double>::infinity(), total = 0;
  for (int runs = 0; runs < min_runs || (total < min_total && runs < max_runs); ++runs) {
    const double t0 = clock_seconds(clock);
    f();
    const double dt = clock_seconds(clock) - t0;
    best = std::min(best, dt);
    total += dt;
  }
  return best;
}

// "libpng 1.6.39, libspng 0.7.3, libjpeg-turbo 2.1.5": the peers' run-time versions.
std::string peer_versions();

}  // namespace l3bench
