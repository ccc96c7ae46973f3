// The reader in batch mode (ReaderOptions::batch_backend) with the emulated
// GPU batch backend (the CUDA batch backend's decode and transform kernels run
// on the CPU) against the reader's CPU pipeline: byte-identical batches for
// every transform configuration, the same outcome for bad records under both
// error policies, exact resume, and the release of device buffers. Always
// built and run (no GPU needed).
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <utility>
#include <vector>

#include "l3/reader/reader_backend_cuda.hpp"
#include "test_reader_gpu_util.hpp"

using namespace l3;

namespace {

void check_same_as_cpu(std::shared_ptr<const Dataset> ds, const ReaderOptions& o, std::uint64_t epoch = 0) {
  const auto a = l3::test::run_epoch(ds, o, make_cpu_decode_backend(), epoch);
  const auto b = l3::test::run_epoch_batch(ds, o, make_emulated_gpu_batch_backend(), epoch);
  CHECK(a.data.size() >= 3);  // 40 records: 3 batches for one rank of 3
  l3::test::check_same(a, b);
}

// Forwards to the emulated backend and records release() calls.
class CountingBackend final : public BatchBackend {
public:
  std::shared_ptr<BatchBackend> inner = make_emulated_gpu_batch_backend();
  std::atomic<int> runs{0}, releases{0};
  std::atomic<void*> last_stream{nullptr};
  const char* name() const noexcept override { return "counting"; }
  BatchMemory memory() const noexcept override { return inner->memory(); }
  void* allocate(std::size_t bytes) override { return inner->allocate(bytes); }
  void deallocate(void* p, std::size_t bytes) noexcept override { inner->deallocate(p, bytes); }
  void run(std::span<const RecordJob> r, std::span<const ExampleJob> e, const TransformOptions& o,
           std::span<errc> s) override {
    ++runs;
    inner->run(r, e, o, s);
  }
  void release(void* buffer, void* stream) noexcept override {
    CHECK(buffer != nullptr);
    ++releases;
    last_stream = stream;
    std::lock_guard lock(m);
    streams.push_back(stream);
  }
  std::vector<void*> take_streams() {
    std::lock_guard lock(m);
    return std::exchange(streams, {});
  }

private:
  std::mutex m;
  std::vector<void*> streams;  // every release()'s stream, in order
};

}  // namespace

TEST_CASE("batch mode: the emulated GPU batch backend yields the CPU pipeline's batches byte for byte") {
  auto ds = l3::test::synth_dataset("batch_emu_configs");
  for (const auto& config : l3::test::backend_configs()) {
    const std::string& what = config.first;  // not a structured binding: clang 14 cannot capture those
    const l3::ReaderOptions& o = config.second;
    CAPTURE(what);
    for (std::uint64_t epoch : {0u, 1u}) {
      CAPTURE(epoch);
      check_same_as_cpu(ds, o, epoch);
    }
  }
}

TEST_CASE("batch mode: more transform configurations") {
  auto ds = l3::test::synth_dataset("batch_emu_more");
  ReaderOptions base = l3::test::backend_configs()[0].second;
  SUBCASE("upscaling without antialias, hwc float32 unnormalised") {
    ReaderOptions o = base;
    o.transform.width = 130;  // larger than every image (40..90)
    o.transform.height = 97;
    o.transform.crop = CropMode::full;
    o.transform.antialias = false;
    o.transform.dtype = DType::float32;
    o.transform.normalize = false;
    check_same_as_cpu(ds, o);
  }
  SUBCASE("strong antialiased shrink, chw float16, flip always") {
    ReaderOptions o = base;
    o.transform.width = 7;
    o.transform.height = 5;
    o.transform.flip_probability = 1.0;
    o.transform.layout = Layout::chw;
    o.transform.dtype = DType::float16;
    check_same_as_cpu(ds, o);
  }
  SUBCASE("echo 3 over windows of 2 batches (shuffle buffer), batch 6") {
    ReaderOptions o = base;
    o.batch_size = 6;
    o.echo = 3;
    o.echo_window = 2;
    check_same_as_cpu(ds, o, 1);
  }
  SUBCASE("rank 2 of 3, drop remainder, block shuffle") {
    ReaderOptions o = base;
    o.world_size = 3;
    o.rank = 2;
    o.remainder = Remainder::drop;
    o.block_size = 4;
    check_same_as_cpu(ds, o, 2);
  }
}

TEST_CASE("batch mode: one output channel: gray sources decode, colour sources fail as on the CPU") {
  auto ds = l3::test::synth_dataset("batch_emu_channels");  // mixed: gray, RGB, RGBA
  ReaderOptions o = l3::test::backend_configs()[0].second;
  o.transform.channels = 1;
  for (const ErrorPolicy policy : {ErrorPolicy::raise, ErrorPolicy::skip}) {
    CAPTURE(policy == ErrorPolicy::skip);
    o.on_error = policy;
    const auto a = l3::test::run_epoch(ds, o, make_cpu_decode_backend());
    const auto b = l3::test::run_epoch_batch(ds, o, make_emulated_gpu_batch_backend());
    l3::test::check_same(a, b);
    std::size_t failed = 0;
    for (errc e : a.errors) failed += e != errc::ok;
    CHECK(failed > 0);  // colour records are refused (unsupported is a caller error: it raises)
  }
}

TEST_CASE("batch mode: corrupt records give the CPU pipeline's outcome under both policies") {
  auto ds = l3::test::corrupt_dataset("batch_emu_corrupt", {13, 14, 27});  // 13 and 14: a run of bad records for skip
  l3::test::for_each_error_config([&](const ReaderOptions& o) {
    const auto a = l3::test::run_epoch(ds, o, make_cpu_decode_backend());
    const auto b = l3::test::run_epoch_batch(ds, o, make_emulated_gpu_batch_backend());
    l3::test::check_same(a, b);
    if (o.on_error == ErrorPolicy::skip && o.max_replacements > 0) {
      CHECK(b.corrupt == 4);  // 13, 14 (also as 13's first replacement), 27
      CHECK(b.replaced == 3);
      CHECK(b.raised == 0);
    } else {
      CHECK(b.raised > 0);
    }
  });
}

TEST_CASE("batch mode: a corrupt record's error names its shard file and key") {
  auto ds = l3::test::corrupt_dataset("batch_emu_corrupt_names", {13});
  for (const Verify verify : {Verify::yes, Verify::no}) {  // caught on read, or by the batch decode
    CAPTURE(verify == Verify::yes);
    ReaderOptions o = l3::test::backend_configs()[3].second;  // the whole image decoded: the damage is seen
    o.on_error = ErrorPolicy::raise;
    o.verify = verify;
    o.batch_backend = make_emulated_gpu_batch_backend();
    Reader r(ds, o);
    std::string message;
    for (;;) {
      try {
        if (!r.next()) break;
      } catch (const Error& e) {
        message = e.what();
      }
    }
    const std::string where = "record 13 (shard " + (ds->directory() / "shard-1.l3s").string() + ", index 6, key 'img13')";
    CHECK_MESSAGE(message.find(where) != std::string::npos, message);
  }
}

TEST_CASE("batch mode: a run resumed from state() yields exactly the rest, also under another world size") {
  auto ds = l3::test::synth_dataset("batch_emu_resume");
  ReaderOptions o = l3::test::backend_configs()[1].second;
  o.world_size = 1;
  const auto full = l3::test::run_epoch(ds, o, make_cpu_decode_backend(), 1);
  REQUIRE(full.data.size() >= 8);
  ReaderOptions ob = o;
  ob.batch_backend = make_emulated_gpu_batch_backend();
  ob.epoch = 1;
  ReaderState st;
  {
    Reader r(ds, ob);
    for (int i = 0; i < 3; ++i) REQUIRE(r.next() != nullptr);
    // A batch backend's batches stay in its memory: no hand-over (Reader::detach).
    CHECK(l3::test::error_of([&] { r.detach(); }) == errc::invalid_argument);
    st = r.state();
  }
  Reader resumed(ds, ob);
  resumed.restore(st);
  std::size_t k = 3;
  while (const Batch* b = resumed.next()) {
    REQUIRE(k < full.data.size());
    CHECK(l3::test::host_bytes(*b) == full.data[k]);
    CHECK(std::vector<std::uint64_t>(b->records.begin(), b->records.end()) == full.records[k]);
    ++k;
  }
  CHECK(k == full.data.size());

  // The same state under world size 2: the two ranks together deliver every
  // remaining record exactly once (pad may repeat a few at the very end).
  std::vector<std::uint64_t> rest, seen;
  for (std::size_t i = 3; i < full.records.size(); ++i) rest.insert(rest.end(), full.records[i].begin(), full.records[i].end());
  for (std::uint32_t rank = 0; rank < 2; ++rank) {
    ReaderOptions o2 = ob;
    o2.world_size = 2;
    o2.rank = rank;
    o2.remainder = Remainder::drop;
    Reader r(ds, o2);
    r.restore(st);
    while (const Batch* b = r.next()) seen.insert(seen.end(), b->records.begin(), b->records.end());
  }
  std::sort(rest.begin(), rest.end());
  std::sort(seen.begin(), seen.end());
  CHECK(std::includes(rest.begin(), rest.end(), seen.begin(), seen.end()));
  CHECK(seen.size() + 2 * o.batch_size > rest.size());  // drop loses less than one batch per rank
}

TEST_CASE("batch mode: every batch buffer handed out is released with the consumer's stream") {
  auto ds = l3::test::synth_dataset("batch_emu_release");
  auto counting = std::make_shared<CountingBackend>();
  ReaderOptions o = l3::test::backend_configs()[0].second;
  int token = 0;  // stands in for a cudaStream_t
  const auto out = l3::test::run_epoch_batch(ds, o, counting, 0, l3::test::host_bytes, &token);
  const std::size_t n = out.data.size();
  REQUIRE(n >= 5);
  CHECK(counting->runs.load() > 0);
  // next() releases the previous batch: n batches, then the call that returns
  // nullptr releases the last one.
  CHECK(counting->releases.load() == static_cast<int>(n));
  CHECK(counting->last_stream.load() == &token);
  // The batches say where they live.
  Reader r(ds, [&] {
    ReaderOptions x = o;
    x.batch_backend = counting;
    return x;
  }());
  const Batch* b = r.next();
  REQUIRE(b);
  CHECK(b->device == -1);
  CHECK(r.metrics().busy.decode >= 0);
}

TEST_CASE("batch mode: the consumer-stream hand-off is the reader's (every stream, release before set_epoch)") {
  auto ds = l3::test::synth_dataset("batch_emu_handoff");
  auto counting = std::make_shared<CountingBackend>();
  ReaderOptions o = l3::test::backend_configs()[0].second;
  o.batch_backend = counting;
  Reader r(ds, o);
  int tokens[3] = {};  // stand in for cudaStream_t values
  void* const streams[3] = {&tokens[0], &tokens[1], &tokens[2]};
  REQUIRE(r.next(std::span<void* const>{}));
  CHECK(counting->take_streams().empty());  // nothing was out before the first batch
  // Every consumer stream orders the refill of the batch handed back (one
  // release each, in order); none: the legacy default stream (nullptr).
  REQUIRE(r.next(streams));
  CHECK(counting->take_streams() == std::vector<void*>(streams, streams + 3));
  REQUIRE(r.next(std::span<void* const>{}));
  CHECK(counting->take_streams() == std::vector<void*>{nullptr});
  // release() hands the batch back now, after its streams; set_epoch() then has
  // no batch to hand back, and a second release() is a no-op.
  r.release(std::span<void* const>(streams + 1, 1));
  CHECK(counting->take_streams() == std::vector<void*>{streams[1]});
  r.release(streams);
  r.set_epoch(1);
  CHECK(counting->take_streams().empty());
  // Without release(), set_epoch() hands the batch out back after the legacy default stream.
  REQUIRE(r.next());
  r.set_epoch(2);
  CHECK(counting->take_streams() == std::vector<void*>{nullptr});
  // The epoch after a release() reads the same batches as a fresh reader.
  const Batch* b = r.next();
  REQUIRE(b);
  CHECK(b->epoch == 2);
  CHECK(b->index == 0);
}
