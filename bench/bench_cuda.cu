// GPU batch decode throughput (issue 3). For a GPU machine: run through
// bench/run_cuda_bench.sh, which also runs the nvJPEG comparison
// (bench/bench_cuda_nvjpeg.py) and writes bench/results/cuda-<gpu>.md.
//
// For batch sizes 8, 64 and 256 of corpus images (cycled): the batch decoder
// with device-resident inputs (no host-to-device copy) and with host inputs
// (staging + copy included), timed with CUDA events after warm-up, after
// checking every image of the batch against l3::decode bit for bit. Beside
// it, on the same images: the l3 CPU decoder on all cores and PNG decode
// (libpng, through l3_imageio) on all cores.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "l3/codec.hpp"
#include "l3/cuda/batch_decoder.hpp"
#include "l3/image_io.hpp"

namespace fs = std::filesystem;

namespace {

void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(2);
  }
}

struct Item {
  std::string name;
  std::vector<std::uint8_t> png;  // the corpus file
  std::vector<std::uint8_t> l3;   // its l3 encoding
  std::uint64_t raw = 0;          // decoded bytes
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Runs job(i) for i in [0, n) on all hardware threads.
void parallel_for(std::size_t n, const std::function<void(std::size_t)>& job) {
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (std::size_t i; (i = next.fetch_add(1)) < n;) job(i);
    });
  for (auto& th : pool) th.join();
}

}  // namespace

int main(int argc, char** argv) {
  fs::path corpus = "bench/corpus";
  fs::path out_file;
  int iters = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--corpus" && i + 1 < argc) corpus = argv[++i];
    else if (a == "--out" && i + 1 < argc) out_file = argv[++i];
    else if (a == "--iters" && i + 1 < argc) iters = std::max(1, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: bench_cuda [--corpus DIR] [--out FILE.md] [--iters N]\n");
      return 1;
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "bench_cuda: no CUDA device\n");
    return 3;
  }
  cudaDeviceProp prop{};
  ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");

  std::vector<Item> items;
  for (const auto& e : fs::recursive_directory_iterator(corpus)) {
    if (e.path().extension() != ".png") continue;
    Item it;
    it.name = e.path().filename().string();
    std::ifstream f(e.path(), std::ios::binary);
    it.png.assign(std::istreambuf_iterator<char>(f), {});
    const l3::Image img = l3::decode_image_bytes(it.png);
    l3::EncodeOptions eo;
    eo.threads = 0;
    it.l3 = l3::encode(img.view(), eo);
    it.raw = img.pixels.size();
    items.push_back(std::move(it));
  }
  if (items.empty()) {
    std::fprintf(stderr, "bench_cuda: no PNG files under %s\n", corpus.string().c_str());
    return 1;
  }
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.name < b.name; });

  std::ostringstream md;
  md << "# GPU batch decode: " << prop.name << "\n\n";
  md << "Corpus: " << items.size() << " PNG images from `" << corpus.string() << "`, cycled to fill each batch. "
     << "Decoded GB/s counts output pixel bytes (1 GB = 1e9 B). GPU times: CUDA events, " << iters
     << " timed batches after 3 warm-up batches. Every batch was first checked against l3::decode bit for bit.\n\n";
  md << "| batch | decoded MB/batch | GPU, inputs on device: GB/s | images/s | GPU incl. H2D: GB/s | images/s |\n";
  md << "|---:|---:|---:|---:|---:|---:|\n";

  cudaStream_t stream;
  ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  cudaEvent_t t0, t1;
  ok(cudaEventCreate(&t0), "cudaEventCreate");
  ok(cudaEventCreate(&t1), "cudaEventCreate");
  l3::cuda::BatchDecoder dec;
  bool all_exact = true;
  for (const std::size_t batch : {std::size_t{8}, std::size_t{64}, std::size_t{256}}) {
    std::vector<l3::cuda::HostImage> host;
    std::vector<l3::cuda::DeviceImage> dev;
    std::vector<std::uint8_t*> d_in;
    std::uint64_t raw = 0;
    for (std::size_t i = 0; i < batch; ++i) {
      const Item& it = items[i % items.size()];
      host.push_back({it.l3, std::nullopt});
      std::uint8_t* p = nullptr;
      ok(cudaMalloc(&p, it.l3.size()), "cudaMalloc");
      ok(cudaMemcpy(p, it.l3.data(), it.l3.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
      d_in.push_back(p);
      dev.push_back({p, it.l3, std::nullopt});
      raw += it.raw;
    }
    // Check first.
    auto r = dec.decode(dev, {}, stream);
    const auto st = dec.status();
    std::vector<std::uint8_t> got(r.output_bytes);
    ok(cudaMemcpy(got.data(), r.d_output, got.size(), cudaMemcpyDeviceToHost), "cudaMemcpy");
    for (std::size_t i = 0; i < batch; ++i) {
      const auto ref = l3::decode(host[i].bytes);
      const bool same = st[i] == l3::errc::ok && std::equal(ref.begin(), ref.end(), got.begin() + std::ptrdiff_t(r.slots[i].offset));
      if (!same) {
        std::fprintf(stderr, "MISMATCH: batch %zu image %zu (%s)\n", batch, i, items[i % items.size()].name.c_str());
        all_exact = false;
      }
    }
    auto time = [&](auto&& run) {
      for (int w = 0; w < 3; ++w) run();
      ok(cudaEventRecord(t0, stream), "cudaEventRecord");
      for (int k = 0; k < iters; ++k) run();
      ok(cudaEventRecord(t1, stream), "cudaEventRecord");
      ok(cudaEventSynchronize(t1), "cudaEventSynchronize");
      float ms = 0;
      ok(cudaEventElapsedTime(&ms, t0, t1), "cudaEventElapsedTime");
      return double(ms) / 1e3 / iters;
    };
    const double t_dev = time([&] { (void)dec.decode(dev, {}, stream); });
    const double t_host = time([&] { (void)dec.decode(host, {}, stream); });
    char line[256];
    std::snprintf(line, sizeof line, "| %zu | %.1f | %.1f | %.0f | %.1f | %.0f |\n", batch, double(raw) / 1e6, raw / t_dev / 1e9,
                  batch / t_dev, raw / t_host / 1e9, batch / t_host);
    md << line;
    std::fputs(line, stdout);
    for (auto* p : d_in) ok(cudaFree(p), "cudaFree");
  }

  // CPU baselines on all cores, over the corpus once (several rounds).
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::uint64_t raw_all = 0;
  for (const Item& it : items) raw_all += it.raw;
  auto cpu_rate = [&](const std::function<void(std::size_t)>& job) {
    parallel_for(items.size(), job);  // warm-up
    const int rounds = 3;
    const auto c0 = std::chrono::steady_clock::now();
    for (int k = 0; k < rounds; ++k) parallel_for(items.size(), job);
    const double s = seconds_since(c0) / rounds;
    return std::pair<double, double>(raw_all / s / 1e9, items.size() / s);
  };
  const auto l3cpu = cpu_rate([&](std::size_t i) { (void)l3::decode(items[i].l3); });
  const auto png = cpu_rate([&](std::size_t i) { (void)l3::decode_image_bytes(items[i].png); });
  md << "\nCPU, " << cores << " threads, one image per thread:\n\n| decoder | GB/s | images/s |\n|---|---:|---:|\n";
  char line[256];
  std::snprintf(line, sizeof line, "| l3 CPU decoder | %.2f | %.0f |\n| PNG (libpng) | %.2f | %.0f |\n", l3cpu.first,
                l3cpu.second, png.first, png.second);
  md << line;
  std::fputs(line, stdout);
  md << "\nBit-exact against l3::decode: " << (all_exact ? "yes, every image of every batch" : "NO (see stderr)") << "\n";
  if (!out_file.empty()) {
    std::ofstream f(out_file);
    f << md.str();
  } else {
    std::fputs(md.str().c_str(), stdout);
  }
  return all_exact ? 0 : 4;
}
