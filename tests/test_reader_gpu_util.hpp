// Shared by test_reader_batch_emu.cpp and test_reader_gpu_batch.cpp: run a Reader under two backends and compare
// everything it yields.
#pragma once

#include <doctest/doctest.h>

#include <cstdio>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "l3/reader/reader.hpp"
#include "l3/reader/reader_backend_cuda.hpp"
#include "test_reader_util.hpp"

namespace l3::test {

// Everything one epoch yields, batch by batch: bytes, labels, records, or the
// error code of a batch that raised.
struct Outcome {
  std::vector<std::vector<std::uint8_t>> data;
  std::vector<std::vector<std::int64_t>> labels;
  std::vector<std::vector<std::uint64_t>> records;
  std::vector<l3::errc> errors;  // per batch; ok when it arrived
  std::uint64_t corrupt = 0, replaced = 0, raised = 0;
};

// A fresh synthetic dataset under the build tree.
inline std::shared_ptr<const l3::Dataset> synth_dataset(const std::string& name, const SynthSpec& spec = {}) {
  const auto dir = fresh_dir(name);
  write_synth_dataset(dir, spec);
  return std::make_shared<const l3::Dataset>(l3::Dataset::open(dir));
}

// A synthetic dataset whose records `bad` have a flipped byte in their last
// tile's data (past header and table): the stream's checksum catches it.
inline std::shared_ptr<const l3::Dataset> corrupt_dataset(const std::string& name,
                                                          std::initializer_list<std::uint64_t> bad) {
  const auto dir = fresh_dir(name);
  write_synth_dataset(dir);
  for (const std::uint64_t r : bad) {
    std::size_t tail = 0;
    {
      const l3::Dataset clean = l3::Dataset::open(dir);
      tail = clean.record(r).payload.size() - 5;
    }
    corrupt_record(dir, r, tail);
  }
  return std::make_shared<const l3::Dataset>(l3::Dataset::open(dir));
}

#ifdef L3_HAVE_CUDA
// True (and prints the line that makes ctest report the test skipped) when
// no CUDA device exists.
inline bool no_gpu() {
  static const bool none = [] {
    if (l3::cuda_device_count() == 0) {
      std::printf("L3_GPU_SKIPPED: no CUDA device\n");
      return true;
    }
    return false;
  }();
  return none;
}
#endif

// The bytes of a batch as host memory; device batches need a fetcher that
// copies them back (test_reader_gpu_batch.cpp).
using FetchBytes = std::function<std::vector<std::uint8_t>(const l3::Batch&)>;

inline std::vector<std::uint8_t> host_bytes(const l3::Batch& b) {
  REQUIRE(b.device < 0);
  const auto* p = static_cast<const std::uint8_t*>(b.data);
  return {p, p + b.bytes};
}

// One epoch of a reader configured by `o` (its backends already set).
inline Outcome run_reader(std::shared_ptr<const l3::Dataset> ds, l3::ReaderOptions o, std::uint64_t epoch,
                          const FetchBytes& fetch = host_bytes, void* consumer_stream = nullptr) {
  o.epoch = epoch;
  l3::Reader r(std::move(ds), o);
  Outcome out;
  for (;;) {
    try {
      const l3::Batch* b = r.next(consumer_stream);
      if (!b) break;
      out.data.push_back(fetch(*b));
      out.labels.emplace_back(b->labels.begin(), b->labels.end());
      out.records.emplace_back(b->records.begin(), b->records.end());
      out.errors.push_back(l3::errc::ok);
    } catch (const l3::Error& e) {
      out.data.emplace_back();
      out.labels.emplace_back();
      out.records.emplace_back();
      out.errors.push_back(e.code());
    }
  }
  const l3::Metrics m = r.metrics();
  out.corrupt = m.corrupt;
  out.replaced = m.replaced;
  out.raised = m.raised;
  return out;
}

inline Outcome run_epoch(std::shared_ptr<const l3::Dataset> ds, l3::ReaderOptions o,
                         std::shared_ptr<l3::DecodeBackend> backend, std::uint64_t epoch = 0,
                         std::shared_ptr<l3::BatchAllocator> allocator = nullptr) {
  o.decoder = std::move(backend);
  o.allocator = std::move(allocator);
  return run_reader(std::move(ds), std::move(o), epoch);
}

// The reader in batch mode: whole windows through `backend`.
inline Outcome run_epoch_batch(std::shared_ptr<const l3::Dataset> ds, l3::ReaderOptions o,
                               std::shared_ptr<l3::BatchBackend> backend, std::uint64_t epoch = 0,
                               const FetchBytes& fetch = host_bytes, void* consumer_stream = nullptr) {
  o.batch_backend = std::move(backend);
  return run_reader(std::move(ds), std::move(o), epoch, fetch, consumer_stream);
}

inline void check_same(const Outcome& a, const Outcome& b) {
  REQUIRE(a.data.size() == b.data.size());
  for (std::size_t i = 0; i < a.data.size(); ++i) {
    CAPTURE(i);
    CHECK(a.errors[i] == b.errors[i]);
    CHECK(a.records[i] == b.records[i]);
    CHECK(a.labels[i] == b.labels[i]);
    CHECK(a.data[i] == b.data[i]);  // byte-identical tensors
  }
  CHECK(a.corrupt == b.corrupt);
  CHECK(a.replaced == b.replaced);
  CHECK(a.raised == b.raised);
}

// Reader configurations covering crops, flips, layouts, dtypes, normalisation.
inline std::vector<std::pair<std::string, l3::ReaderOptions>> backend_configs() {
  std::vector<std::pair<std::string, l3::ReaderOptions>> v;
  l3::ReaderOptions o;
  o.batch_size = 4;
  o.workers = 2;
  o.prefetch = 2;
  o.seed = 23;
  o.transform.width = 20;
  o.transform.height = 16;
  o.transform.flip_probability = 0.5;
  o.transform.dtype = l3::DType::uint8;
  o.transform.layout = l3::Layout::hwc;
  v.emplace_back("random resized crop, flip, uint8 hwc", o);
  o.transform.dtype = l3::DType::float32;
  o.transform.layout = l3::Layout::chw;
  o.transform.normalize = true;
  o.transform.scale_min = 0.05;
  o.transform.scale_max = 0.3;  // small crops: few tiles decoded
  v.emplace_back("small crops, flip, float32 chw normalised", o);
  o.transform.crop = l3::CropMode::center;
  o.transform.center_fraction = 0;  // exact crop through the region decode
  o.transform.dtype = l3::DType::float16;
  o.echo = 2;
  v.emplace_back("centre crop, float16, echo 2", o);
  o = v[0].second;
  o.transform.crop = l3::CropMode::full;  // whole image decoded
  v.emplace_back("full image resize", o);
  return v;
}

// The error-handling configurations the batch-mode tests run over a
// corrupt_dataset whose bad records include 13 and 14: checksums verified on
// read or not, raise or skip, with and without replacements; unshuffled, so
// that 13's replacement (14) fails too. Calls f(options) with the settings
// captured for doctest.
template <class F>
void for_each_error_config(F&& f) {
  for (const l3::Verify verify : {l3::Verify::yes, l3::Verify::no}) {
    for (const l3::ErrorPolicy policy : {l3::ErrorPolicy::raise, l3::ErrorPolicy::skip}) {
      for (const std::uint32_t max_replacements : {64u, 0u}) {
        CAPTURE(verify == l3::Verify::yes);
        CAPTURE(policy == l3::ErrorPolicy::skip);
        CAPTURE(max_replacements);
        l3::ReaderOptions o = backend_configs()[1].second;
        o.verify = verify;
        o.on_error = policy;
        o.max_replacements = max_replacements;
        o.shuffle = false;
        f(o);
      }
    }
  }
}

}  // namespace l3::test
