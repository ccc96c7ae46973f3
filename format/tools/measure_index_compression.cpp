// Measures raw vs zstd size of a realistic footer index (spec/format.md §5.3):
// 10,000 records, ImageNet-style keys, labels 0..999, 40-240 KB payloads.
// Usage: l3_measure_index_compression [metadata_bytes_per_record]
#include <zstd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "layout.hpp"

namespace L = l3::shard_layout;
using Clock = std::chrono::steady_clock;

static std::vector<std::uint8_t> realistic_index(std::size_t n, std::uint32_t meta_size) {
  std::mt19937_64 rng(1);
  std::vector<std::uint8_t> entries(n * L::kEntrySize), heap;
  std::uint64_t offset = L::kHeaderSize;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t size = 40000 + rng() % 200000;
    auto label = static_cast<std::int64_t>(rng() % 1000);
    char buf[80];
    auto wnid = static_cast<long long>(1440764 + label * 37);
    std::snprintf(buf, sizeof buf, "train/n%08lld/n%08lld_%llu.JPEG", wnid, wnid, static_cast<unsigned long long>(rng() % 50000));
    std::string key = buf;
    std::uint8_t* e = entries.data() + i * L::kEntrySize;
    L::store_le(e + L::kEnOffset, offset);
    L::store_le(e + L::kEnSize, size);
    L::store_le(e + L::kEnChecksum, static_cast<std::uint64_t>(rng()));
    L::store_le(e + L::kEnLabel, label);
    L::store_le(e + L::kEnHeapOffset, static_cast<std::uint64_t>(heap.size()));
    L::store_le(e + L::kEnKeySize, static_cast<std::uint32_t>(key.size()));
    L::store_le(e + L::kEnMetaSize, meta_size);
    heap.insert(heap.end(), key.begin(), key.end());
    for (std::uint32_t m = 0; m < meta_size; ++m) heap.push_back(static_cast<std::uint8_t>(m < 4 ? rng() : 0));
    offset += size;
  }
  entries.insert(entries.end(), heap.begin(), heap.end());
  return entries;
}

int main(int argc, char** argv) {
  auto meta = static_cast<std::uint32_t>(argc > 1 ? std::atoi(argv[1]) : 0);
  auto index = realistic_index(10000, meta);
  std::printf("10000 records, %u metadata bytes each: raw index %zu bytes\n", meta, index.size());
  for (int level : {1, 3, 9, 19}) {
    std::vector<std::uint8_t> packed(ZSTD_compressBound(index.size())), back(index.size());
    std::size_t n = ZSTD_compress(packed.data(), packed.size(), index.data(), index.size(), level);
    auto t0 = Clock::now();
    ZSTD_decompress(back.data(), back.size(), packed.data(), n);
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    std::printf("zstd -%d: %zu bytes (%.2fx), decompress %.2f ms, round trip %s\n", level, n,
                static_cast<double>(index.size()) / static_cast<double>(n), ms, back == index ? "ok" : "FAILED");
  }
  return 0;
}
