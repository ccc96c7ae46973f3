// GPU batch decode throughput (issues 3, 13). For a GPU machine: run through
// bench/run_cuda_bench.sh (scripts/gpu-kit.sh step bench), which also runs the
// GPU peers (bench/bench_gpu_peers.py) and writes bench/results/cuda-<gpu>.md.
//
// Image sets: for each size (default 500x375 ImageNet, 1024x1024, 2048x1024
// Cityscapes), every RGB corpus photo cut (centre crop) or mirror-extended to
// that size, encoded with l3::encode; each stream is first decoded on the host
// and compared with its pixels. A batch cycles through the set until it holds
// --batch-mb of decoded pixels (thousands of tiles: enough warps to fill an
// H100's 132 SMs many times over). Per size:
//   kernel  the device work of one decode() with the inputs already on the
//           device (descriptor upload, scans, gather, decode kernel, status),
//           captured once in a CUDA graph and replayed: no host planning, no
//           checksum in the timing (CUDA events);
//   call    decode() with device inputs, host planning included, checksums off;
//   e2e     host bytes in pinned memory to the decoded device buffer: decode()
//           with host inputs (staging, upload, kernels), checksums off, two
//           decoders on two streams so that planning overlaps device work;
//           wall clock to the last stream's completion;
//   e2e+xxh the same with each image's XXH3 checksum verified on the host.
// Every kernel/e2e result is first compared with the source pixels bit for
// bit. Beside it: the l3 CPU decoder on all cores, same images.
// --host-only: everything that needs no GPU (loading, cutting, encoding, host
// verification, tile counts, CPU decoder): the GPU kit's dry run runs it.
// --write-ppm DIR: also writes each set's images as binary PPM
// (DIR/<W>x<H>/<name>.ppm) for the peers.
// --kernel-only: the kernel column alone (no call, e2e or CPU timing), for
// timing kernel variants one after the other (scripts/gpu-kit.sh variant).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "l3/codec/codec.hpp"
#include "l3/cuda/batch_decoder.hpp"
#include "l3/imageio/image_io.hpp"

namespace fs = std::filesystem;

namespace {

void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "bench_cuda: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(2);
  }
}

struct Size {
  std::uint32_t w = 0, h = 0;
};

struct Item {
  std::string name;
  std::vector<std::uint8_t> pixels;  // h rows of w * 3 bytes
  std::vector<std::uint8_t> l3;      // its l3 encoding
  std::uint32_t tiles = 0;
};

struct Args {
  fs::path corpus = "bench/corpus";
  fs::path out_file;
  fs::path ppm_dir;
  std::vector<Size> sizes{{500, 375}, {1024, 1024}, {2048, 1024}};
  double batch_mb = 512;
  int iters = 20;
  bool host_only = false;
  bool kernel_only = false;
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

bool parse_sizes(const std::string& s, std::vector<Size>& out) {
  out.clear();
  std::istringstream in(s);
  for (std::string tok; std::getline(in, tok, ',');) {
    Size z;
    if (std::sscanf(tok.c_str(), "%ux%u", &z.w, &z.h) != 2 || z.w == 0 || z.h == 0 || z.w > 16384 || z.h > 16384)
      return false;
    out.push_back(z);
  }
  return !out.empty();
}

// The usage line on stderr (exit 2); with --help, on stdout with what the
// options mean (exit 0).
int usage(bool help = false) {
  std::FILE* to = help ? stdout : stderr;
  std::fprintf(to,
               "usage: bench_cuda [--corpus DIR] [--out FILE.md] [--iters N] [--sizes WxH,...] [--batch-mb MB]\n"
               "                  [--host-only] [--kernel-only] [--write-ppm DIR]\n");
  if (!help) return 2;
  std::fprintf(to,
               "GPU batch decode of the corpus photos cut to each size: the decode kernels alone, decode() with\n"
               "device inputs, pinned host bytes to device pixels, and the CPU decoder; every batch is compared\n"
               "with the source pixels first (bench/README.md).\n"
               "  --corpus DIR     the corpus (its photos/ folder; default bench/corpus)\n"
               "  --out FILE.md    the Markdown report (default: on stdout)\n"
               "  --iters N        timed replays per measurement (default 20)\n"
               "  --sizes WxH,...  image sizes (default 500x375,1024x1024,2048x1024)\n"
               "  --batch-mb MB    decoded megabytes per batch (default 512)\n"
               "  --host-only      no GPU: cut, encode, verify on the host and plan only\n"
               "  --kernel-only    time the kernels alone (no call, e2e or CPU columns): kernel variants\n"
               "  --write-ppm DIR  the cut images as PPM files (for bench/bench_gpu_peers.py)\n");
  return 0;
}

// 0: parsed; -1: --help printed (exit 0); else the exit status.
int parse_args(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    const bool has_value = i + 1 < argc;
    if (s == "--corpus" && has_value) a.corpus = argv[++i];
    else if (s == "--out" && has_value) a.out_file = argv[++i];
    else if (s == "--write-ppm" && has_value) a.ppm_dir = argv[++i];
    else if (s == "--iters" && has_value) a.iters = std::max(1, std::atoi(argv[++i]));
    else if (s == "--batch-mb" && has_value) a.batch_mb = std::max(1.0, std::atof(argv[++i]));
    else if (s == "--sizes" && has_value) {
      if (!parse_sizes(argv[++i], a.sizes)) return usage();
    } else if (s == "--host-only") a.host_only = true;
    else if (s == "--kernel-only") a.kernel_only = true;
    else if (s == "--help" || s == "-h") return usage(true) - 1;  // -1: exit 0
    else return usage();
  }
  return 0;
}

// The RGB photos of the corpus (gray replicated, alpha dropped), by name.
std::vector<l3::Image> load_photos(const fs::path& corpus, std::vector<std::string>& names) {
  fs::path dir = corpus / "photos";
  if (!fs::is_directory(dir)) dir = corpus;
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().extension() == ".png") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<l3::Image> photos;
  for (const auto& p : files) {
    std::ifstream f(p, std::ios::binary);
    const std::vector<std::uint8_t> bytes{std::istreambuf_iterator<char>(f), {}};
    l3::Image img = l3::decode_image_bytes(bytes);
    if (img.channels != 3) {
      l3::Image rgb;
      rgb.width = img.width, rgb.height = img.height, rgb.channels = 3;
      rgb.pixels.resize(std::size_t{img.width} * img.height * 3);
      for (std::size_t i = 0; i < std::size_t{img.width} * img.height; ++i)
        for (std::size_t c = 0; c < 3; ++c)
          rgb.pixels[i * 3 + c] = img.pixels[i * img.channels + (img.channels >= 3 ? c : 0)];
      img = std::move(rgb);
    }
    names.push_back(p.stem().string());
    photos.push_back(std::move(img));
  }
  return photos;
}

// Index into [0, n) of the mirror-extended coordinate v (v may be negative or >= n).
std::uint32_t mirror(std::int64_t v, std::uint32_t n) {
  const std::int64_t period = 2 * std::int64_t{n};
  std::int64_t m = ((v % period) + period) % period;
  return static_cast<std::uint32_t>(m < n ? m : period - 1 - m);
}

// The photo cut to w x h around its centre, mirrored where it is smaller.
std::vector<std::uint8_t> cut(const l3::Image& p, Size z) {
  std::vector<std::uint8_t> out(std::size_t{z.w} * z.h * 3);
  const std::int64_t ox = (std::int64_t{p.width} - z.w) / 2, oy = (std::int64_t{p.height} - z.h) / 2;
  for (std::uint32_t y = 0; y < z.h; ++y) {
    const std::uint32_t sy = mirror(oy + y, p.height);
    for (std::uint32_t x = 0; x < z.w; ++x) {
      const std::uint32_t sx = mirror(ox + x, p.width);
      const std::uint8_t* s = &p.pixels[(std::size_t{sy} * p.width + sx) * 3];
      std::copy(s, s + 3, &out[(std::size_t{y} * z.w + x) * 3]);
    }
  }
  return out;
}

// One set: every photo at size z, encoded and checked on the host (the
// stream decodes, checksum verified, to the same pixels).
std::vector<Item> make_set(const std::vector<l3::Image>& photos, const std::vector<std::string>& names, Size z) {
  std::vector<Item> set(photos.size());
  parallel_for(photos.size(), [&](std::size_t i) {
    Item& it = set[i];
    it.name = names[i];
    it.pixels = cut(photos[i], z);
    it.l3 = l3::encode(l3::ImageView{it.pixels.data(), z.w, z.h, 3, 0});
    l3::ImageInfo info;
    const auto back = l3::decode(it.l3, &info);
    if (back != it.pixels) {
      std::fprintf(stderr, "bench_cuda: host round trip differs for %s at %ux%u\n", it.name.c_str(), z.w, z.h);
      std::exit(4);
    }
    it.tiles = info.tiles_x * info.tiles_y;
  });
  return set;
}

void write_ppm(const fs::path& dir, const std::vector<Item>& set, Size z) {
  const fs::path d = dir / (std::to_string(z.w) + "x" + std::to_string(z.h));
  fs::create_directories(d);
  for (const Item& it : set) {
    std::ofstream f(d / (it.name + ".ppm"), std::ios::binary);
    f << "P6\n" << z.w << " " << z.h << "\n255\n";
    f.write(reinterpret_cast<const char*>(it.pixels.data()), std::streamsize(it.pixels.size()));
    if (!f) {
      std::fprintf(stderr, "bench_cuda: cannot write %s\n", (d / (it.name + ".ppm")).string().c_str());
      std::exit(1);
    }
  }
}

// Decoded GB/s and images/s of the l3 CPU decoder on all cores over the set.
std::pair<double, double> cpu_rate(const std::vector<Item>& set) {
  auto job = [&](std::size_t i) { (void)l3::decode(set[i].l3); };
  parallel_for(set.size(), job);  // warm-up
  const int rounds = 3;
  const auto c0 = std::chrono::steady_clock::now();
  for (int k = 0; k < rounds; ++k) parallel_for(set.size(), job);
  const double s = seconds_since(c0) / rounds;
  double raw = 0;
  for (const Item& it : set) raw += double(it.pixels.size());
  return {raw / s / 1e9, double(set.size()) / s};
}

struct GpuRow {
  double kernel_s = 0, call_s = 0, e2e_s = 0, e2e_xxh_s = 0;
  bool exact = true;
};

// The GPU measurements of one batch (see the header).
GpuRow measure_gpu(const std::vector<Item>& set, std::size_t batch, int iters, bool kernel_only) {
  GpuRow row;
  // Inputs: on the device, and in one pinned host buffer (the e2e source).
  std::uint64_t in_bytes = 0;
  for (std::size_t i = 0; i < batch; ++i) in_bytes += set[i % set.size()].l3.size();
  std::uint8_t *d_in = nullptr, *h_in = nullptr;
  ok(cudaMalloc(&d_in, in_bytes), "cudaMalloc inputs");
  ok(cudaMallocHost(&h_in, in_bytes), "cudaMallocHost inputs");
  std::vector<l3::cuda::DeviceImage> dev;
  std::vector<l3::cuda::HostImage> host;
  for (std::size_t i = 0, off = 0; i < batch; ++i) {
    const auto& b = set[i % set.size()].l3;
    std::copy(b.begin(), b.end(), h_in + off);
    dev.push_back({d_in + off, {h_in + off, b.size()}, std::nullopt});
    host.push_back({{h_in + off, b.size()}, std::nullopt});
    off += b.size();
  }
  ok(cudaMemcpy(d_in, h_in, in_bytes, cudaMemcpyHostToDevice), "cudaMemcpy inputs");

  cudaStream_t s[2];
  for (auto& st : s) ok(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cudaStreamCreate");
  cudaEvent_t t0, t1;
  ok(cudaEventCreate(&t0), "cudaEventCreate");
  ok(cudaEventCreate(&t1), "cudaEventCreate");
  l3::cuda::BatchDecoder dec[2];
  l3::cuda::BatchOptions fast;
  fast.verify_checksum = false;

  // Correctness first, on both input paths (this also sizes the buffers).
  auto check = [&](const l3::cuda::BatchResult& r, l3::cuda::BatchDecoder& d, cudaStream_t st) {
    ok(cudaStreamSynchronize(st), "cudaStreamSynchronize");
    const auto status = d.status();
    std::vector<std::uint8_t> got(r.output_bytes);
    ok(cudaMemcpy(got.data(), r.d_output, got.size(), cudaMemcpyDeviceToHost), "cudaMemcpy output");
    for (std::size_t i = 0; i < batch; ++i) {
      const auto& ref = set[i % set.size()].pixels;
      if (status[i] != l3::errc::ok ||
          !std::equal(ref.begin(), ref.end(), got.begin() + std::ptrdiff_t(r.slots[i].offset))) {
        std::fprintf(stderr, "bench_cuda: MISMATCH image %zu (%s)\n", i, set[i % set.size()].name.c_str());
        row.exact = false;
      }
    }
  };
  check(dec[0].decode(dev, fast, s[0]), dec[0], s[0]);
  check(dec[1].decode(host, {}, s[1]), dec[1], s[1]);
  (void)dec[0].decode(host, {}, s[0]);  // sizes dec[0]'s staging for the e2e runs
  ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");

  // kernel: graph replay of the device work of decode(dev).
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  ok(cudaStreamBeginCapture(s[0], cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture");
  (void)dec[0].decode(dev, fast, s[0]);
  ok(cudaStreamEndCapture(s[0], &graph), "cudaStreamEndCapture");
  ok(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  for (int w = 0; w < 3; ++w) ok(cudaGraphLaunch(exec, s[0]), "cudaGraphLaunch");
  ok(cudaEventRecord(t0, s[0]), "cudaEventRecord");
  for (int k = 0; k < iters; ++k) ok(cudaGraphLaunch(exec, s[0]), "cudaGraphLaunch");
  ok(cudaEventRecord(t1, s[0]), "cudaEventRecord");
  ok(cudaEventSynchronize(t1), "cudaEventSynchronize");
  float ms = 0;
  ok(cudaEventElapsedTime(&ms, t0, t1), "cudaEventElapsedTime");
  row.kernel_s = double(ms) / 1e3 / iters;
  ok(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
  ok(cudaGraphDestroy(graph), "cudaGraphDestroy");

  // Wall-clock rates over iters calls alternating two decoders and streams.
  auto wall = [&](auto&& call) {
    for (int w = 0; w < 2; ++w) call(w % 2);
    ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    const auto c0 = std::chrono::steady_clock::now();
    for (int k = 0; k < iters; ++k) call(k % 2);
    ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    return seconds_since(c0) / iters;
  };
  if (!kernel_only) {
    row.call_s = wall([&](int k) { (void)dec[k].decode(dev, fast, s[k]); });
    row.e2e_s = wall([&](int k) { (void)dec[k].decode(host, fast, s[k]); });
    row.e2e_xxh_s = wall([&](int k) { (void)dec[k].decode(host, {}, s[k]); });
  }

  ok(cudaEventDestroy(t0), "cudaEventDestroy");
  ok(cudaEventDestroy(t1), "cudaEventDestroy");
  for (auto& st : s) ok(cudaStreamDestroy(st), "cudaStreamDestroy");
  ok(cudaFree(d_in), "cudaFree");
  ok(cudaFreeHost(h_in), "cudaFreeHost");
  return row;
}

int run(int argc, char** argv) {
  Args a;
  if (const int rc = parse_args(argc, argv, a)) return rc < 0 ? 0 : rc;
  cudaDeviceProp prop{};
  if (!a.host_only) {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      std::fprintf(stderr, "bench_cuda: no CUDA device (--host-only runs the rest)\n");
      return 3;
    }
    ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  }
  std::vector<std::string> names;
  const std::vector<l3::Image> photos = load_photos(a.corpus, names);
  if (photos.empty()) {
    std::fprintf(stderr, "bench_cuda: no PNG photos under %s\n", a.corpus.string().c_str());
    return 1;
  }

  std::ostringstream md;
  md << "# GPU batch decode: " << (a.host_only ? "host only (no GPU)" : prop.name) << "\n\n";
  md << "Images: the " << photos.size() << " corpus photos (`" << a.corpus.string()
     << "`) as RGB, centre-cut or mirror-extended to each size, encoded with default options; a batch cycles "
        "through them up to "
     << a.batch_mb << " MB of decoded pixels. GB/s = decoded pixel bytes / s (1 GB = 1e9 B). "
     << "kernel: CUDA-graph replay of a decode's device work, inputs on the device (CUDA events, " << a.iters
     << " replays after 3); call: decode() with device inputs, host planning included; e2e: pinned host bytes to "
        "decoded device buffer (two decoders, two streams); checksums off except e2e+xxh (XXH3 verified on the "
        "host). Every batch was first compared with the source pixels bit for bit. CPU: l3 decoder, all "
     << std::max(1u, std::thread::hardware_concurrency()) << " threads, one image per thread.\n\n";
  // bench/variant_table.py reads this line: what a kernel variant or an
  // occupancy probe (spec/cuda.md §2 "Kernel variants") ran at.
  if (!a.host_only)
    md << "Decode kernel: " << l3::cuda::BatchDecoder::resident_decode_warps()
       << " warps resident per SM (CUDA occupancy API).\n\n";
  md << "| size | images/batch | tiles/batch | MB/batch | kernel GB/s | kernel img/s | call GB/s | e2e GB/s | "
        "e2e img/s | e2e+xxh GB/s | CPU GB/s | CPU img/s |\n";
  md << "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  bool exact = true;
  for (const Size z : a.sizes) {
    const std::vector<Item> set = make_set(photos, names, z);
    if (!a.ppm_dir.empty()) write_ppm(a.ppm_dir, set, z);
    const double img_bytes = double(z.w) * z.h * 3;
    const auto batch = static_cast<std::size_t>(std::max(1.0, a.batch_mb * 1e6 / img_bytes));
    std::uint64_t tiles = 0;
    for (std::size_t i = 0; i < batch; ++i) tiles += set[i % set.size()].tiles;
    const double raw = img_bytes * double(batch);
    const auto cpu = a.kernel_only ? std::pair<double, double>{0, 0} : cpu_rate(set);
    GpuRow g;
    if (!a.host_only) g = measure_gpu(set, batch, a.iters, a.kernel_only);
    exact = exact && g.exact;
    // "-" where nothing was measured (--host-only).
    auto num = [](double v, int prec) {
      char b[32];
      if (v > 0) std::snprintf(b, sizeof b, "%.*f", prec, v);
      else std::snprintf(b, sizeof b, "-");
      return std::string(b);
    };
    auto gbs = [&](double t) { return num(t > 0 ? raw / t / 1e9 : 0.0, 1); };
    auto ips = [&](double t) { return num(t > 0 ? double(batch) / t : 0.0, 0); };
    char line[512];
    std::snprintf(line, sizeof line, "| %ux%u | %zu | %llu | %.0f | %s | %s | %s | %s | %s | %s | %s | %s |\n", z.w,
                  z.h, batch, static_cast<unsigned long long>(tiles), raw / 1e6, gbs(g.kernel_s).c_str(),
                  ips(g.kernel_s).c_str(), gbs(g.call_s).c_str(), gbs(g.e2e_s).c_str(), ips(g.e2e_s).c_str(),
                  gbs(g.e2e_xxh_s).c_str(), num(cpu.first, 2).c_str(), num(cpu.second, 0).c_str());
    md << line;
    std::fputs(line, stdout);
    std::fflush(stdout);
  }
  if (a.host_only) {
    md << "\n--host-only: no GPU column measured (-); host round trips all exact.\n";
  } else {
    md << "\nBit-exact against the source pixels: " << (exact ? "yes, every image of every batch" : "NO (see stderr)")
       << "\n";
    // bench/variant_table.py reads the line above in --kernel-only reports too.
    if (a.kernel_only) md << "\n--kernel-only: the call, e2e and CPU columns not measured (-).\n";
  }
  if (!a.out_file.empty()) {
    std::ofstream f(a.out_file);
    f << md.str();
  } else {
    std::fputs(md.str().c_str(), stdout);
  }
  return exact ? 0 : 4;
}

}  // namespace

// A decoder's error (l3::Error: a CUDA error as device_error, an occupancy
// probe that did not get its occupancy) ends the run with its one line.
int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cuda: %s\n", e.what());
    return 1;
  }
}
