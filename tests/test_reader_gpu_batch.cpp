// The CUDA batch backend (make_cuda_batch_backend: decode AND transform on
// the GPU, batches in device memory) against the reader's CPU pipeline and
// against its CPU emulation (label gpu): byte-identical batches for every
// transform configuration, the same statuses for bad records (host
// rejections and corrupt tiles found on the device), failed records' examples
// left unwritten, and release() honoured for a consumer's stream. Without a
// CUDA device every case is skipped (doctest reports it skipped, and the line
// "L3_GPU_SKIPPED" makes ctest report it skipped).
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>
#include <xxhash.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "l3/reader/reader_backend_cuda.hpp"
#include "test_reader_gpu_util.hpp"

using namespace l3;

namespace {

// A device batch's bytes, copied back to the host.
std::vector<std::uint8_t> device_bytes(const Batch& b) {
  REQUIRE(b.device == 0);
  std::vector<std::uint8_t> v(b.bytes);
  REQUIRE(cudaMemcpy(v.data(), b.data, b.bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
  return v;
}

// The CPU pipeline against batch mode with `gpu`, batch by batch.
void check_same_as_cpu(std::shared_ptr<const Dataset> ds, const ReaderOptions& o,
                       const std::shared_ptr<BatchBackend>& gpu, std::uint64_t epoch = 0) {
  const auto a = l3::test::run_epoch(ds, o, make_cpu_decode_backend(), epoch);
  const auto b = l3::test::run_epoch_batch(ds, o, gpu, epoch, device_bytes);
  l3::test::check_same(a, b);
}

// The stream's checksum recomputed (spec/codec.md §2), so that damage in the
// tile data reaches the tile decode instead of failing the checksum.
void rechecksum(std::vector<std::uint8_t>& e) {
  const std::uint64_t seed = XXH3_64bits(e.data(), 20);
  const std::uint64_t sum = XXH3_64bits_withSeed(e.data() + 28, e.size() - 28, seed);
  for (int i = 0; i < 8; ++i) e[20 + static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(sum >> (8 * i));
}

// A window of records and examples, with the examples' outputs in two
// buffers: host memory (the emulation's) and device memory (the GPU's).
struct Window {
  std::vector<std::vector<std::uint8_t>> bytes;
  std::vector<RecordJob> records;
  std::vector<ExampleJob> examples;  // dst: offsets into the buffers until bind()
  std::size_t example_size = 0;
};

// Two examples per record; even records decode the union of their boxes,
// odd ones (and `whole`) the whole image.
Window make_window(const Dataset& ds, std::uint64_t first, std::uint64_t count, const TransformOptions& o,
                   std::uint64_t seed) {
  Window w;
  w.example_size = example_bytes(o);
  for (std::uint64_t i = first; i < first + count; ++i) {
    const auto p = ds.record(i).payload;
    w.bytes.emplace_back(p.begin(), p.end());
  }
  for (std::uint32_t r = 0; r < count; ++r) {
    const ImageInfo info = read_info(w.bytes[r]);
    xf::Rng rng{seed * 1000 + r};
    xf::Box u{};
    for (int k = 0; k < 2; ++k) {
      ExampleJob x;
      x.record = r;
      x.plan = plan_example(o, info.width, info.height, rng);
      u = k == 0 ? x.plan.box : xf::union_box(u, x.plan.box);
      x.dst = reinterpret_cast<void*>(w.examples.size() * w.example_size);
      w.examples.push_back(x);
    }
    Rect region{static_cast<std::uint32_t>(u.x), static_cast<std::uint32_t>(u.y), static_cast<std::uint32_t>(u.w),
                static_cast<std::uint32_t>(u.h)};
    if (r % 2) region = Rect{0, 0, info.width, info.height};
    w.records.push_back({w.bytes[r], region});
  }
  return w;
}

std::vector<ExampleJob> bind(const Window& w, void* base) {
  std::vector<ExampleJob> v = w.examples;
  for (ExampleJob& x : v) x.dst = static_cast<std::uint8_t*>(base) + reinterpret_cast<std::uintptr_t>(x.dst);
  return v;
}

// Runs the window through the emulation (host) and `gpu` (device), both
// outputs prefilled with 0xCD; checks the same statuses and bytes (so failed
// records' examples are unwritten on both).
std::vector<errc> check_window(const Window& w, const TransformOptions& o, BatchBackend& gpu) {
  const std::size_t total = w.examples.size() * w.example_size;
  auto emu = make_emulated_gpu_batch_backend();
  std::vector<std::uint8_t> host(total, 0xCD);
  std::vector<errc> se(w.records.size()), sg(w.records.size());
  emu->run(w.records, bind(w, host.data()), o, se);
  void* d = gpu.allocate(total);
  REQUIRE(cudaMemset(d, 0xCD, total) == cudaSuccess);
  gpu.run(w.records, bind(w, d), o, sg);
  std::vector<std::uint8_t> back(total);
  REQUIRE(cudaMemcpy(back.data(), d, total, cudaMemcpyDeviceToHost) == cudaSuccess);
  gpu.deallocate(d, total);
  CHECK(sg == se);
  for (std::size_t k = 0; k < w.examples.size(); ++k) {
    CAPTURE(k);
    const std::size_t at = k * w.example_size;
    CHECK(std::memcmp(back.data() + at, host.data() + at, w.example_size) == 0);
  }
  return sg;
}

}  // namespace

TEST_CASE("without a device, make_cuda_batch_backend throws device_error" * doctest::skip(!l3::test::no_gpu())) {
  CHECK(l3::test::error_of([] { make_cuda_batch_backend(0); }) == errc::device_error);
}

TEST_CASE("GPU batch backend: device memory, a bad ordinal is a caller error" * doctest::skip(l3::test::no_gpu())) {
  auto gpu = make_cuda_batch_backend(0);
  CHECK(std::string(gpu->name()) == "cuda");
  CHECK(gpu->memory() == BatchMemory::device);
  CHECK(gpu->device() == 0);
  void* p = gpu->allocate(1000);
  REQUIRE(p);
  CHECK(reinterpret_cast<std::uintptr_t>(p) % 256 == 0);
  cudaPointerAttributes attr{};
  REQUIRE(cudaPointerGetAttributes(&attr, p) == cudaSuccess);
  CHECK(attr.type == cudaMemoryTypeDevice);
  CHECK(attr.device == 0);
  gpu->deallocate(p, 1000);
  CHECK(l3::test::error_of([] { make_cuda_batch_backend(cuda_device_count()); }) == errc::invalid_argument);
}

TEST_CASE("GPU batch mode: batches equal the CPU pipeline's byte for byte" * doctest::skip(l3::test::no_gpu())) {
  auto ds = l3::test::synth_dataset("gpu_batch_configs");
  auto gpu = make_cuda_batch_backend(0);  // one backend for all: its buffers are reused and grow
  for (const auto& [what, o] : l3::test::backend_configs()) {
    CAPTURE(what);
    for (std::uint64_t epoch : {0u, 1u}) {
      CAPTURE(epoch);
      const auto a = l3::test::run_epoch(ds, o, make_cpu_decode_backend(), epoch);
      const auto b = l3::test::run_epoch_batch(ds, o, gpu, epoch, device_bytes);
      CHECK(a.data.size() >= 10);
      l3::test::check_same(a, b);
    }
  }
}

TEST_CASE("GPU batch mode: more transform configurations" * doctest::skip(l3::test::no_gpu())) {
  auto ds = l3::test::synth_dataset("gpu_batch_more");
  auto gpu = make_cuda_batch_backend(0);
  const ReaderOptions base = l3::test::backend_configs()[0].second;
  SUBCASE("upscaling without antialias, hwc float32 unnormalised") {
    ReaderOptions o = base;
    o.transform.width = 130;
    o.transform.height = 97;
    o.transform.crop = CropMode::full;
    o.transform.antialias = false;
    o.transform.dtype = DType::float32;
    o.transform.normalize = false;
    check_same_as_cpu(ds, o, gpu);
  }
  SUBCASE("strong antialiased shrink, chw float16, flip always") {
    ReaderOptions o = base;
    o.transform.width = 7;
    o.transform.height = 5;
    o.transform.flip_probability = 1.0;
    o.transform.layout = Layout::chw;
    o.transform.dtype = DType::float16;
    check_same_as_cpu(ds, o, gpu);
  }
  SUBCASE("224x224 float32 chw, batch 16, echo 2 over windows of 2 batches") {
    ReaderOptions o = base;
    o.transform.width = o.transform.height = 224;
    o.transform.dtype = DType::float32;
    o.transform.layout = Layout::chw;
    o.batch_size = 16;
    o.echo = 2;
    o.echo_window = 2;
    check_same_as_cpu(ds, o, gpu, 1);
  }
  SUBCASE("one output channel: gray records decode, colour records fail, both policies") {
    ReaderOptions o = base;
    o.transform.channels = 1;
    for (const ErrorPolicy policy : {ErrorPolicy::raise, ErrorPolicy::skip}) {
      CAPTURE(policy == ErrorPolicy::skip);
      o.on_error = policy;
      check_same_as_cpu(ds, o, gpu);
    }
  }
}

TEST_CASE("GPU batch mode: corrupt records give the CPU pipeline's outcome under both policies" *
          doctest::skip(l3::test::no_gpu())) {
  auto ds = l3::test::corrupt_dataset("gpu_batch_corrupt", {13, 14, 27});
  auto gpu = make_cuda_batch_backend(0);
  // Verify::no: the bad bytes reach the backend (the stream's checksum,
  // checked on the host by the batch decoder, catches them).
  l3::test::for_each_error_config([&](const ReaderOptions& o) {
    const auto a = l3::test::run_epoch(ds, o, make_cpu_decode_backend());
    const auto b = l3::test::run_epoch_batch(ds, o, gpu, 0, device_bytes);
    l3::test::check_same(a, b);
    CHECK(a.raised + a.corrupt > 0);
  });
}

TEST_CASE("GPU batch backend: a window with bad records equals the emulation; failed examples are not written" *
          doctest::skip(l3::test::no_gpu())) {
  auto ds = l3::test::synth_dataset("gpu_batch_window");
  auto gpu = make_cuda_batch_backend(0);
  for (const auto& [what, ro] : l3::test::backend_configs()) {
    CAPTURE(what);
    const TransformOptions& o = ro.transform;
    Window w = make_window(*ds, 0, 12, o, 7);
    // Record 3 (whole image decoded): damaged tile data with a valid
    // checksum, so that only the device finds it (the first flip from the
    // end that the CPU decoder detects).
    const std::vector<std::uint8_t> good = w.bytes[3];
    const ImageInfo info = read_info(good);
    const Rect all{0, 0, info.width, info.height};
    std::vector<std::uint8_t> px(info.decoded_size());
    errc want = errc::ok;
    for (std::size_t at = good.size() - 1; at > good.size() / 2 && want == errc::ok; --at) {
      std::vector<std::uint8_t> e = good;
      e[at] ^= 0xFF;
      rechecksum(e);
      want = l3::test::error_of([&] {
        decode_region(e, all, MutableImageView{px.data(), info.width, info.height, info.channels, 0});
      });
      if (want != errc::ok) w.bytes[3] = e;
    }
    {
      std::vector<std::uint8_t> same = good;
      rechecksum(same);
      CHECK(same == good);  // rechecksum() is the encoder's checksum
    }
    REQUIRE(want != errc::ok);
    CHECK(want != errc::checksum_mismatch);
    w.records[3].encoded = w.bytes[3];
    w.bytes[5][w.bytes[5].size() - 3] ^= 0x40;  // checksum mismatch (host)
    w.bytes[7].resize(w.bytes[7].size() / 2);    // truncated (host)
    w.records[7].encoded = w.bytes[7];
    const ImageInfo i9 = read_info(w.bytes[9]);
    w.records[9].region = Rect{i9.width, 0, 4, 4};  // outside the image (host)
    for (ExampleJob& x : w.examples)
      if (x.record == 9) x.plan.box = xf::Box{static_cast<std::int32_t>(i9.width), 0, 4, 4};
    const std::vector<errc> st = check_window(w, o, *gpu);
    CHECK(st[3] == want);
    CHECK(st[5] == errc::checksum_mismatch);
    CHECK(st[7] != errc::ok);
    CHECK(st[9] == errc::out_of_range);
    for (const std::size_t r : {0u, 1u, 2u, 4u, 6u, 8u, 10u, 11u}) CHECK(st[r] == errc::ok);
  }
}

TEST_CASE("GPU batch backend: caller errors throw what the emulation throws" * doctest::skip(l3::test::no_gpu())) {
  auto ds = l3::test::synth_dataset("gpu_batch_caller");
  auto gpu = make_cuda_batch_backend(0);
  auto emu = make_emulated_gpu_batch_backend();
  const TransformOptions o = l3::test::backend_configs()[0].second.transform;
  const Window w = make_window(*ds, 0, 4, o, 3);
  void* d = gpu->allocate(w.examples.size() * w.example_size);
  std::vector<std::uint8_t> host(w.examples.size() * w.example_size);
  auto run_both = [&](auto&& edit) {
    std::vector<RecordJob> records = w.records;
    std::vector<ExampleJob> eh = bind(w, host.data()), ed = bind(w, d);
    TransformOptions to = o;
    std::size_t statuses = records.size();
    edit(records, eh, ed, to, statuses);
    std::vector<errc> s1(statuses), s2(statuses);
    const errc ee = l3::test::error_of([&] { emu->run(records, eh, to, s1); });
    const errc eg = l3::test::error_of([&] { gpu->run(records, ed, to, s2); });
    CHECK(ee != errc::ok);
    CHECK(eg == ee);
  };
  SUBCASE("status span of another size") {
    run_both([](auto&, auto&, auto&, auto&, std::size_t& n) { n -= 1; });
  }
  SUBCASE("example of no record") {
    run_both([](auto&, auto& eh, auto& ed, auto&, std::size_t&) { eh[1].record = ed[1].record = 99; });
  }
  SUBCASE("crop box outside its record's region") {
    run_both([](auto&, auto& eh, auto& ed, auto&, std::size_t&) {
      eh[0].plan.box.x = ed[0].plan.box.x = -1;
    });
  }
  SUBCASE("bad transform options") {
    run_both([](auto&, auto&, auto&, TransformOptions& to, std::size_t&) { to.width = 0; });
  }
  gpu->deallocate(d, w.examples.size() * w.example_size);
  // The backend still works after the errors.
  (void)check_window(w, o, *gpu);
}

namespace {

// Delays a stream by a host function that sleeps.
void CUDART_CB sleep_host(void* ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(*static_cast<int*>(ms)));
}

}  // namespace

TEST_CASE("GPU batch backend: run() does not overwrite a buffer before the released reads ran" *
          doctest::skip(l3::test::no_gpu())) {
  auto ds = l3::test::synth_dataset("gpu_batch_release");
  auto gpu = make_cuda_batch_backend(0);
  const TransformOptions o = l3::test::backend_configs()[0].second.transform;
  const Window w1 = make_window(*ds, 0, 4, o, 1), w2 = make_window(*ds, 4, 4, o, 2);
  const std::size_t total = w1.examples.size() * w1.example_size;
  REQUIRE(total == w2.examples.size() * w2.example_size);
  cudaStream_t user = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking) == cudaSuccess);
  void* d = gpu->allocate(total);
  std::uint8_t* pinned = nullptr;
  REQUIRE(cudaMallocHost(reinterpret_cast<void**>(&pinned), total) == cudaSuccess);
  int delay_ms = 200;
  for (const bool legacy : {false, true}) {
    CAPTURE(legacy);
    cudaStream_t consumer = legacy ? nullptr : user;  // nullptr: the legacy default stream
    std::vector<errc> s(w1.records.size());
    gpu->run(w1.records, bind(w1, d), o, s);
    std::vector<std::uint8_t> first(total), second(total);
    REQUIRE(cudaMemcpy(first.data(), d, total, cudaMemcpyDeviceToHost) == cudaSuccess);
    // The consumer's read of the batch, late on its stream; then released.
    std::memset(pinned, 0, total);
    REQUIRE(cudaLaunchHostFunc(consumer, sleep_host, &delay_ms) == cudaSuccess);
    REQUIRE(cudaMemcpyAsync(pinned, d, total, cudaMemcpyDeviceToHost, consumer) == cudaSuccess);
    gpu->release(d, consumer);
    gpu->run(w2.records, bind(w2, d), o, s);  // must wait for the read before writing
    REQUIRE(cudaStreamSynchronize(consumer) == cudaSuccess);
    REQUIRE(cudaMemcpy(second.data(), d, total, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(std::memcmp(pinned, first.data(), total) == 0);  // the consumer read the first window
    CHECK(first != second);                                  // and the second one was written after
  }
  cudaFreeHost(pinned);
  gpu->deallocate(d, total);
  cudaStreamDestroy(user);
}

TEST_CASE("GPU batch mode: a consumer stream, reads enqueued late, batches intact" *
          doctest::skip(l3::test::no_gpu())) {
  auto ds = l3::test::synth_dataset("gpu_batch_stream");
  cudaStream_t s = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  {
    // The backend on a caller's stream too.
    cudaStream_t backend_stream = nullptr;
    REQUIRE(cudaStreamCreate(&backend_stream) == cudaSuccess);
    auto gpu = make_cuda_batch_backend(0, backend_stream);
    const ReaderOptions o = l3::test::backend_configs()[1].second;
    const auto a = l3::test::run_epoch(ds, o, make_cpu_decode_backend());
    // Each batch is copied out on `s` behind a delay; the host only waits at
    // the end, so the reader refills buffers while the copies are pending.
    std::vector<std::uint8_t*> pinned;
    std::vector<std::size_t> sizes;
    int delay_ms = 20;
    auto late_copy = [&](const Batch& b) {
      REQUIRE(b.device == 0);
      std::uint8_t* p = nullptr;
      REQUIRE(cudaMallocHost(reinterpret_cast<void**>(&p), b.bytes) == cudaSuccess);
      REQUIRE(cudaLaunchHostFunc(s, sleep_host, &delay_ms) == cudaSuccess);
      REQUIRE(cudaMemcpyAsync(p, b.data, b.bytes, cudaMemcpyDeviceToHost, s) == cudaSuccess);
      pinned.push_back(p);
      sizes.push_back(b.bytes);
      return std::vector<std::uint8_t>{};
    };
    auto b = l3::test::run_epoch_batch(ds, o, gpu, 0, late_copy, s);
    REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
    std::size_t k = 0;
    for (std::size_t i = 0; i < b.data.size(); ++i) {
      if (b.errors[i] != errc::ok) continue;
      REQUIRE(k < pinned.size());
      b.data[i].assign(pinned[k], pinned[k] + sizes[k]);
      ++k;
    }
    CHECK(k == pinned.size());
    for (std::uint8_t* p : pinned) cudaFreeHost(p);
    l3::test::check_same(a, b);
    gpu.reset();
    cudaStreamDestroy(backend_stream);
  }
  cudaStreamDestroy(s);
}
