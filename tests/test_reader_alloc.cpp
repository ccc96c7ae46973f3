// No allocation per batch in steady state: global operator new is replaced by
// a counting one, and a whole epoch after warm-up must not call it from the
// reader's own code. Allocations inside the codec's decode_region (3 per call
// at the time of writing: its business, not the reader's) are counted apart,
// through a wrapping DecodeBackend.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "l3/reader/reader.hpp"
#include "test_reader_util.hpp"

namespace {
std::atomic<long> g_news{0}, g_codec_news{0};
thread_local bool t_in_codec = false;

class CodecFence final : public l3::DecodeBackend {
public:
  const char* name() const noexcept override { return "cpu (allocations counted apart)"; }
  void decode(std::span<const l3::DecodeJob> jobs) override {
    t_in_codec = true;
    try {
      inner->decode(jobs);
    } catch (...) {
      t_in_codec = false;
      throw;
    }
    t_in_codec = false;
  }
  std::shared_ptr<l3::DecodeBackend> inner = l3::make_cpu_decode_backend();
};
}  // namespace

// GCC 12 sees malloc/free inside replaced operator new/delete as mismatched
// when it inlines them into library code (sanitizer builds): a false positive.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n) {
  (t_in_codec ? g_codec_news : g_news).fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

// Runs a warm-up epoch, then counts the reader's own allocations over epoch 1
// (after its first batch: starting an epoch starts a scheduler thread).
long steady_allocations(const std::shared_ptr<const l3::Dataset>& ds, l3::ReaderOptions o, std::uint64_t warmup_epochs) {
  o.decoder = std::make_shared<CodecFence>();
  l3::Reader r(ds, o);
  for (std::uint64_t e = 0; e < warmup_epochs; ++e) {
    r.set_epoch(e);
    while (r.next()) {
    }
  }
  r.set_epoch(warmup_epochs);
  const l3::Batch* b = r.next();
  REQUIRE(b != nullptr);
  const long before = g_news.load(), codec_before = g_codec_news.load();
  std::uint64_t batches = 0;
  while ((b = r.next()) != nullptr) ++batches;
  const long after = g_news.load(), codec_after = g_codec_news.load();
  CHECK(batches == r.batches_in_epoch() - 1);
  MESSAGE(batches << " batches: reader allocations " << after - before
                  << ", allocations inside the codec's decode_region " << codec_after - codec_before);
  return after - before;
}

TEST_CASE("steady state: no allocation while batches flow") {
  const auto dir = l3::test::fresh_dir("alloc_steady");
  l3::test::write_synth_dataset(dir);
  auto ds = std::make_shared<const l3::Dataset>(l3::Dataset::open(dir));
  l3::ReaderOptions o;
  o.batch_size = 4;
  o.seed = 3;
  o.cache_bytes = 1u << 20;
  o.transform.width = o.transform.height = 24;
  for (std::uint32_t echo : {1u, 2u}) {
    CAPTURE(echo);
    o.echo = echo;
    // One worker and centre crops: after one epoch every buffer has reached its
    // final size, so the next epoch must not allocate at all.
    o.workers = 1;
    o.transform.crop = l3::CropMode::center;
    CHECK(steady_allocations(ds, o, 1) == 0);
    // Random crops over two workers: scratch buffers still grow now and then
    // when a worker meets a larger crop than before, never per batch.
    o.workers = 2;
    o.transform.crop = l3::CropMode::random_resized;
    CHECK(steady_allocations(ds, o, 3) < 8);
  }
}
