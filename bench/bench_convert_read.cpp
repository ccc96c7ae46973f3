// bench_convert_read DATASET SCRATCH [--scales 1,4,16] [--reads N] [--decodes N]
// bench_convert_read --jpeg-sizes DATASET
//
// --jpeg-sizes: the bytes of a JPEG folder holding the dataset's images, each
// record decoded and encoded with libjpeg-turbo at q90 and q95 (bench_io's
// encode_jpeg: jpeg_set_defaults, 4:2:0; alpha dropped). Prints "q90 N" and "q95 N".
//
// Time per random record read as a dataset grows: builds datasets of s times
// DATASET's records (each record repeated s times, 64 MiB shards) under
// SCRATCH, checks every record of each against the original (bytes equal),
// then times uniform random reads of three kinds, warm (page cache, shards open):
//   lookup:   Dataset::record(i, Verify::no)   (locate + index entry)
//   checksum: Dataset::record(i, Verify::yes)  (+ XXH3 of the payload)
//   decode:   checksum + l3::decode of the .l3i
// Prints one markdown table. Run by bench/bench_convert.sh.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench_io.hpp"
#include "l3/codec/codec.hpp"
#include "l3/format/dataset.hpp"

namespace fs = std::filesystem;

namespace {

struct Options {
  fs::path dataset, scratch;
  std::vector<unsigned> scales{1, 4, 16};
  std::size_t reads = 20000, decodes = 300;
};

Options parse(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_convert_read DATASET SCRATCH [--scales 1,4,16] [--reads N] [--decodes N]\n");
    std::exit(2);
  }
  Options o;
  o.dataset = argv[1];
  o.scratch = argv[2];
  for (int i = 3; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--reads") o.reads = std::stoul(value);
    else if (flag == "--decodes") o.decodes = std::stoul(value);
    else if (flag == "--scales") {
      o.scales.clear();
      for (std::size_t at = 0; at < value.size();) {
        std::size_t comma = value.find(',', at);
        if (comma == std::string::npos) comma = value.size();
        o.scales.push_back(static_cast<unsigned>(std::stoul(value.substr(at, comma - at))));
        at = comma + 1;
      }
    }
  }
  return o;
}

// s copies of every record, in the order r0 r1 .. rn-1 r0 r1 ..
fs::path build_scaled(const l3::Dataset& base, const fs::path& scratch, unsigned s) {
  std::string folder = "x";
  folder += std::to_string(s);
  const fs::path dir = scratch / folder;
  fs::remove_all(dir);
  fs::create_directories(dir);
  l3::Manifest manifest;
  manifest.classes = base.class_names();
  manifest.image_stats = base.manifest().image_stats;
  constexpr std::uint64_t kShardBytes = std::uint64_t{64} << 20;
  std::optional<l3::ShardWriter> writer;
  auto close = [&] {
    manifest.shards.push_back(l3::manifest_entry(writer->finalize()));
    writer.reset();
  };
  for (unsigned copy = 0; copy < s; ++copy) {
    for (std::uint64_t i = 0; i < base.size(); ++i) {
      if (!writer) {
        char name[32];
        std::snprintf(name, sizeof name, "shard-%05zu.l3s", manifest.shards.size());
        writer.emplace(dir / name);
      }
      l3::RecordView r = base.record(i);
      std::string key(r.key);
      key += "#";
      key += std::to_string(copy);
      writer->append(r.payload, r.label, key);
      if (writer->bytes_written() >= kShardBytes) close();
    }
  }
  if (writer) close();
  l3::write_manifest_atomic(dir, manifest);
  return dir;
}

// Verified before timing: record g holds the bytes of base record g mod n.
bool same_records(const l3::Dataset& base, const l3::Dataset& scaled) {
  if (scaled.size() % base.size() != 0) return false;
  for (std::uint64_t g = 0; g < scaled.size(); ++g) {
    auto a = base.record(g % base.size(), l3::Verify::no).payload;
    auto b = scaled.record(g).payload;
    if (a.size() != b.size() || std::memcmp(a.data(), b.data(), a.size()) != 0) return false;
  }
  return true;
}

template <class Read>
double microseconds_per_read(const l3::Dataset& dataset, std::size_t reads, std::uint64_t seed, Read&& read) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::uint64_t> pick(0, dataset.size() - 1);
  std::vector<std::uint64_t> order(reads);
  for (auto& i : order) i = pick(rng);
  std::uint64_t sink = 0;
  for (std::uint64_t i : order) sink += read(i);  // warm: page cache, open shards
  auto start = std::chrono::steady_clock::now();
  for (std::uint64_t i : order) sink += read(i);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (sink == 42) std::printf(" ");  // keeps the reads
  return seconds * 1e6 / static_cast<double>(reads);
}

int print_jpeg_sizes(const fs::path& dir) {
  l3::Dataset dataset = l3::Dataset::open(dir);
  for (int quality : {90, 95}) {
    std::uint64_t bytes = 0;
    for (std::uint64_t i = 0; i < dataset.size(); ++i) {
      l3bench::Pixels pixels;
      l3::ImageInfo info;
      pixels.data = l3::decode(dataset.record(i).payload, &info);
      pixels.width = info.width;
      pixels.height = info.height;
      pixels.channels = info.channels;
      std::uint32_t coded_channels = 0;
      bytes += l3bench::encode_jpeg(pixels, quality, &coded_channels).size();
    }
    std::printf("q%d %llu\n", quality, static_cast<unsigned long long>(bytes));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 3 && std::string(argv[1]) == "--jpeg-sizes") return print_jpeg_sizes(argv[2]);
    Options o = parse(argc, argv);
    l3::Dataset base = l3::Dataset::open(o.dataset);
    std::printf("| dataset | records | shards | bytes | lookup us/read | checksum us/read | checksum+decode us/read |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|\n");
    for (unsigned s : o.scales) {
      l3::Dataset scaled = l3::Dataset::open(build_scaled(base, o.scratch, s));
      if (!same_records(base, scaled)) {
        std::fprintf(stderr, "bench_convert_read: scaled dataset x%u does not hold the original records\n", s);
        return 1;
      }
      std::uint64_t bytes = 0;
      for (const auto& shard : scaled.manifest().shards) bytes += shard.bytes;
      double lookup = microseconds_per_read(scaled, o.reads, 1, [&](std::uint64_t i) {
        return scaled.record(i, l3::Verify::no).payload.size();
      });
      double checksum = microseconds_per_read(scaled, o.reads, 2, [&](std::uint64_t i) {
        return scaled.record(i, l3::Verify::yes).payload.size();
      });
      double decode = microseconds_per_read(scaled, o.decodes, 3, [&](std::uint64_t i) {
        return l3::decode(scaled.record(i, l3::Verify::yes).payload).size();
      });
      std::printf("| %ux corpus | %llu | %zu | %llu | %.3f | %.1f | %.0f |\n", s,
                  static_cast<unsigned long long>(scaled.size()), scaled.shard_count(),
                  static_cast<unsigned long long>(bytes), lookup, checksum, decode);
      std::fflush(stdout);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_convert_read: %s\n", e.what());
    return 1;
  }
}
