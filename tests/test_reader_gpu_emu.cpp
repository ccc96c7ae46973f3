// The reader with the emulated wavefront backend (the CUDA batch decoder's
// decomposition run on the CPU) against the reader with the CPU backend:
// byte-identical batches, and the same outcome for bad records under both
// error policies. Always built and run (no GPU needed).
#include <doctest/doctest.h>

#include <vector>

#include "l3/reader_backend_cuda.hpp"
#include "test_reader_gpu_util.hpp"

using namespace l3;

namespace {

}  // namespace

TEST_CASE("emulated wavefront backend: decode jobs equal the CPU backend's (whole images, regions, a batch)") {
  auto cpu = make_cpu_decode_backend();
  auto emu = make_emulated_wavefront_backend();
  CHECK(std::string(emu->name()) == "cuda-emulated");
  auto ds = l3test::synth_dataset("gpu_emu_jobs");
  std::vector<DecodeJob> jobs;
  std::vector<std::vector<std::uint8_t>> a, b;
  for (std::uint64_t i = 0; i < 12; ++i) {
    const auto payload = ds->record(i).payload;
    const ImageInfo info = read_info(payload);
    // Alternate whole images and odd regions that straddle tiles; rows padded.
    Rect r{0, 0, info.width, info.height};
    if (i % 2) r = Rect{info.width / 3 + 1, info.height / 4 + 1, info.width / 2, info.height / 2};
    const std::size_t stride = std::size_t{r.width} * info.channels + 5;
    a.emplace_back(stride * r.height, 0xAB);
    b.emplace_back(stride * r.height, 0xAB);
    jobs.push_back({payload, r, MutableImageView{nullptr, r.width, r.height, info.channels, stride}});
  }
  std::vector<DecodeJob> ja = jobs, jb = jobs;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    ja[i].out.data = a[i].data();
    jb[i].out.data = b[i].data();
  }
  cpu->decode(ja);
  emu->decode(jb);  // all twelve in one emulated batch
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    CAPTURE(i);
    CHECK(a[i] == b[i]);  // including the untouched padding bytes
  }
  // The CPU decoder is not trivially equal to a constant: the images differ.
  CHECK(a[0] != a[2]);
}

TEST_CASE("emulated wavefront backend: bad streams throw the CPU backend's error code") {
  auto cpu = make_cpu_decode_backend();
  auto emu = make_emulated_wavefront_backend();
  auto ds = l3test::synth_dataset("gpu_emu_bad");
  const auto good = ds->record(3).payload;
  const ImageInfo info = read_info(good);
  std::vector<std::uint8_t> px(info.decoded_size());
  const MutableImageView out{px.data(), info.width, info.height, info.channels, 0};
  const Rect all{0, 0, info.width, info.height};
  std::vector<std::vector<std::uint8_t>> bad;
  bad.emplace_back(good.begin(), good.end());
  bad.back()[bad.back().size() - 3] ^= 0x40;  // tile data: checksum
  bad.emplace_back(good.begin(), good.end());
  bad.back()[0] ^= 0xFF;  // magic
  bad.emplace_back(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(good.size() / 2));  // truncated
  for (std::size_t k = 0; k < bad.size(); ++k) {
    CAPTURE(k);
    const DecodeJob job{bad[k], all, out};
    const errc ce = l3test::error_of([&] { cpu->decode(std::span<const DecodeJob>(&job, 1)); });
    const errc ee = l3test::error_of([&] { emu->decode(std::span<const DecodeJob>(&job, 1)); });
    CHECK(ce != errc::ok);
    CHECK(ee == ce);
  }
  // A bad job among good ones fails the call with that job's code.
  std::vector<std::uint8_t> px2(info.decoded_size());
  const DecodeJob mixed[2] = {{good, all, out}, {bad[0], all, MutableImageView{px2.data(), info.width, info.height, info.channels, 0}}};
  CHECK(l3test::error_of([&] { emu->decode(mixed); }) == l3test::error_of([&] { cpu->decode(mixed); }));
  // A region outside the image: a caller error on both.
  const DecodeJob outside{good, Rect{info.width, 0, 1, 1}, MutableImageView{px.data(), 1, 1, info.channels, 0}};
  CHECK(l3test::error_of([&] { cpu->decode(std::span<const DecodeJob>(&outside, 1)); }) ==
        l3test::error_of([&] { emu->decode(std::span<const DecodeJob>(&outside, 1)); }));
}

TEST_CASE("reader: the emulated wavefront backend yields the CPU backend's batches byte for byte") {
  auto ds = l3test::synth_dataset("gpu_emu_reader");
  for (const auto& [what, o] : l3test::backend_configs()) {
    CAPTURE(what);
    for (std::uint64_t epoch : {0u, 1u}) {
      CAPTURE(epoch);
      const auto a = l3test::run_epoch(ds, o, make_cpu_decode_backend(), epoch);
      const auto b = l3test::run_epoch(ds, o, make_emulated_wavefront_backend(), epoch);
      CHECK(a.data.size() >= 10);
      l3test::check_same(a, b);
    }
  }
}

TEST_CASE("reader: a corrupt record gives the same outcome under both backends and both policies") {
  auto ds = l3test::corrupt_dataset("gpu_emu_corrupt", {13});
  for (const Verify verify : {Verify::yes, Verify::no}) {
    // Verify::no: the shard's record checksum is not checked, so the bad
    // bytes reach the decode backend (the stream's own checksum catches them).
    for (const ErrorPolicy policy : {ErrorPolicy::raise, ErrorPolicy::skip}) {
      CAPTURE(verify == Verify::yes);
      CAPTURE(policy == ErrorPolicy::skip);
      ReaderOptions o = l3test::backend_configs()[1].second;
      o.verify = verify;
      o.on_error = policy;
      const auto a = l3test::run_epoch(ds, o, make_cpu_decode_backend());
      const auto b = l3test::run_epoch(ds, o, make_emulated_wavefront_backend());
      l3test::check_same(a, b);
      // The record really was bad: one raise, or one replacement.
      if (policy == ErrorPolicy::raise) {
        CHECK(a.raised == 1);
        std::size_t failed = 0;
        for (errc e : b.errors) failed += e != errc::ok;
        CHECK(failed == 1);
      } else {
        CHECK(a.corrupt == 1);
        CHECK(a.replaced == 1);
      }
    }
  }
}
