// bench_codec: sizes and single-thread decode speed of the l3 codec against PNG (libpng,
// libspng), the L3 baseline (bench/l3_baseline.hpp), WebP lossless (cwebp, size only) and
// JPEG (libjpeg-turbo, lossy: size and speed only), over bench/corpus/{photos,graphics}.
//
// Every output is verified before anything is timed: l3 and both PNG decoders must return the
// source pixels exactly, the L3 baseline and WebP must round-trip; a mismatch aborts the run.
// Timing: each decode is repeated until at least min_runs runs and min_total seconds have
// passed (full: 3 runs and 0.2 s; --quick: 1 run and 0.02 s); the fastest run counts. A class's
// MB/s is its total decoded bytes over the sum of those fastest times. MB = 10^6 bytes.
//
// Usage: bench_codec [--corpus DIR] [--out FILE] [--quick] [--no-webp] [--l3b-zero-edges] [--commit REV]

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "bench_io.hpp"
#include "l3_baseline.hpp"

#ifdef L3_HAVE_CODEC
#include "l3/codec/codec.hpp"
#endif

#ifndef L3_BENCH_SOURCE_DIR
#define L3_BENCH_SOURCE_DIR "."
#endif
#ifndef L3_BENCH_BUILD_INFO
#define L3_BENCH_BUILD_INFO "unknown"
#endif

namespace fs = std::filesystem;
using namespace l3bench;

namespace {

constexpr bool kHaveCodec =
#ifdef L3_HAVE_CODEC
    true;
#else
    false;
#endif

struct Options {
  std::string corpus = std::string(L3_BENCH_SOURCE_DIR) + "/bench/corpus";
  std::string out;
  std::string commit;
  bool quick = false;
  bool webp = true;
  bool l3b_zero_edges = false;
};

struct TimeCfg {
  double min_total = 0.2;
  int min_runs = 3;
  int max_runs = 5000;
};

// One image's figures. Sizes in bytes, times in seconds per decode (fastest run); -1: not measured.
struct Row {
  std::string cls, name;
  std::uint32_t w = 0, h = 0, c = 0;
  std::uint64_t raw = 0, jpeg_raw = 0;
  std::int64_t ours = -1, png = 0, l3b = 0, webp = -1, jpg90 = 0, jpg95 = 0;
  double t_ours = -1, t_png = 0, t_spng = 0, t_jpg90 = 0, t_jpg95 = 0;
  double enc_ours = -1, enc_png = 0, enc_l3b = 0;  // one encode run, seconds
  std::uint64_t pixels() const { return std::uint64_t{w} * h; }
};

[[noreturn]] void die(const std::string& msg) {
  std::cerr << "bench_codec: FATAL: " << msg << "\n";
  std::exit(2);
}

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <class F>
double time_best(F&& f, const TimeCfg& cfg) {
  return fastest_run(f, cfg.min_runs, cfg.min_total, cfg.max_runs);
}

std::string run_capture(const std::string& cmd) {
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
    pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      const auto p = line.find(':');
      if (p != std::string::npos) return line.substr(line.find_first_not_of(" \t", p + 1));
    }
  return "unknown CPU";
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == 0) return "cpu";
  std::string h;
  for (const char* p = buf; *p != 0; ++p)
    h += (std::isalnum(static_cast<unsigned char>(*p)) || *p == '-' || *p == '_' || *p == '.') ? *p : '_';
  return h.empty() ? "cpu" : h;
}

std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  if (!(f >> a >> b >> c)) return "unknown";
  return a + " " + b + " " + c;
}

std::string utc_date() {
  const std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
  return buf;
}

std::string git_commit(const std::string& given) {
  if (!given.empty()) return given;
  const std::string src = shell_quote(L3_BENCH_SOURCE_DIR);
  std::string rev = run_capture("git -C " + src + " rev-parse --short HEAD 2>/dev/null");
  if (rev.empty()) return "unknown";
  const std::string dirty =
      run_capture("git -C " + src + " status --porcelain --untracked-files=no -- codec common bench 2>/dev/null");
  if (!dirty.empty()) rev += " (codec/, common/ or bench/ modified)";
  return rev;
}

// ---- WebP lossless, size only (cwebp/dwebp), verified through dwebp's PAM output ----

bool have_cwebp() { return std::system("command -v cwebp >/dev/null 2>&1 && command -v dwebp >/dev/null 2>&1") == 0; }

bool pam_matches(const std::string& path, const Pixels& src) {
  const std::vector<std::uint8_t> f = read_file(path);
  const std::string head(f.begin(), f.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(f.size(), 256)));
  const auto end = head.find("ENDHDR\n");
  if (head.rfind("P7\n", 0) != 0 || end == std::string::npos) return false;
  unsigned w = 0, h = 0, depth = 0;
  std::istringstream hs(head.substr(3, end - 3));
  std::string key;
  unsigned val = 0;
  while (hs >> key) {
    if (key == "TUPLTYPE") {
      hs >> key;
      continue;
    }
    hs >> val;
    if (key == "WIDTH") w = val;
    else if (key == "HEIGHT") h = val;
    else if (key == "DEPTH") depth = val;
  }
  if (w != src.width || h != src.height || (depth != 4 && depth != 3)) return false;
  const std::uint8_t* d = f.data() + end + 7;
  const std::size_t n = std::size_t{w} * h;
  if (f.size() < end + 7 + n * depth) return false;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint8_t* s = src.data.data() + i * src.channels;
    const std::uint8_t* q = d + i * depth;
    std::uint8_t rgba[4];
    switch (src.channels) {
      case 1: rgba[0] = rgba[1] = rgba[2] = s[0], rgba[3] = 255; break;
      case 2: rgba[0] = rgba[1] = rgba[2] = s[0], rgba[3] = s[1]; break;
      case 3: rgba[0] = s[0], rgba[1] = s[1], rgba[2] = s[2], rgba[3] = 255; break;
      default: std::memcpy(rgba, s, 4);
    }
    if (q[0] != rgba[0] || q[1] != rgba[1] || q[2] != rgba[2] || (depth == 4 && q[3] != rgba[3])) return false;
  }
  return true;
}

std::int64_t webp_lossless_size(const std::string& png_path, const Pixels& src, const fs::path& tmp) {
  const std::string webp = (tmp / "x.webp").string(), pam = (tmp / "x.pam").string();
  const std::string enc = "cwebp -quiet -lossless -exact -q 75 -m 4 " + shell_quote(png_path) + " -o " +
                          shell_quote(webp) + " >/dev/null 2>&1";
  if (std::system(enc.c_str()) != 0) die("cwebp failed on " + png_path);
  const std::string dec = "dwebp -quiet -pam " + shell_quote(webp) + " -o " + shell_quote(pam) + " >/dev/null 2>&1";
  if (std::system(dec.c_str()) != 0) die("dwebp failed on " + png_path);
  if (!pam_matches(pam, src)) die("WebP lossless round trip differs from the source: " + png_path);
  return static_cast<std::int64_t>(fs::file_size(webp));
}

// ---- per-image measurement ----

Row measure(const std::string& cls, const fs::path& file, const Options& opt, const TimeCfg& tc,
            const fs::path& tmp, bool webp) {
  Row r;
  r.cls = cls;
  r.name = file.stem().string();
  const Pixels src = read_png_file(file.string());
  r.w = src.width, r.h = src.height, r.c = src.channels;
  r.raw = src.size();
  std::vector<std::uint8_t> buf(src.size());
  const auto same = [&](std::size_t n) { return n == src.size() && std::memcmp(buf.data(), src.data.data(), n) == 0; };

  // PNG (libpng default level); both decoders must return the source.
  double t0 = now();
  const std::vector<std::uint8_t> png = encode_png(src);
  r.enc_png = now() - t0;
  r.png = static_cast<std::int64_t>(png.size());
  if (!same(decode_png_libpng(png, buf.data(), buf.size()))) die("libpng decode differs from source: " + r.name);
  std::fill(buf.begin(), buf.end(), 0);
  if (!same(decode_png_spng(png, buf.data(), buf.size()))) die("libspng decode differs from source: " + r.name);

  // L3 baseline: size counted only after a verified round trip.
  t0 = now();
  const std::vector<std::uint8_t> l3b = l3_baseline_encode(src.data.data(), src.width, src.height, src.channels,
                         opt.l3b_zero_edges ? L3BaselineEdge::zero : L3BaselineEdge::replicate);
  r.enc_l3b = now() - t0;
  {
    std::uint32_t w = 0, h = 0, c = 0;
    const std::vector<std::uint8_t> back = l3_baseline_decode(l3b, &w, &h, &c);
    if (w != src.width || h != src.height || c != src.channels || back != src.data)
      die("L3 baseline round trip differs from source: " + r.name);
  }
  r.l3b = static_cast<std::int64_t>(l3b.size());

#ifdef L3_HAVE_CODEC
  const l3::ImageView view{src.data.data(), src.width, src.height, src.channels, 0};
  const l3::MutableImageView outv{buf.data(), src.width, src.height, src.channels, 0};
  l3::DecodeOptions d1;
  d1.threads = 1;
  t0 = now();
  const std::vector<std::uint8_t> ours = l3::encode(view);
  r.enc_ours = now() - t0;
  r.ours = static_cast<std::int64_t>(ours.size());
  std::fill(buf.begin(), buf.end(), 0);
  try {
    l3::decode(ours, outv, d1);
  } catch (const std::exception& e) {
    die("l3::decode failed on " + r.name + ": " + e.what());
  }
  if (!same(src.size())) die("l3 decode (threads=1) differs from source: " + r.name);
#endif

  // JPEG (lossy, for size and speed only).
  std::uint32_t jc = 0;
  const std::vector<std::uint8_t> j90 = encode_jpeg(src, 90, &jc);
  const std::vector<std::uint8_t> j95 = encode_jpeg(src, 95, &jc);
  r.jpg90 = static_cast<std::int64_t>(j90.size());
  r.jpg95 = static_cast<std::int64_t>(j95.size());
  r.jpeg_raw = std::uint64_t{src.width} * src.height * jc;
  if (decode_jpeg(j90, buf.data(), buf.size()) != r.jpeg_raw || decode_jpeg(j95, buf.data(), buf.size()) != r.jpeg_raw)
    die("JPEG decode returned an unexpected size: " + r.name);

  if (webp) r.webp = webp_lossless_size(file.string(), src, tmp);

  // Timing (all outputs verified above).
  std::uint8_t* out = buf.data();
  const std::size_t cap = buf.size();
#ifdef L3_HAVE_CODEC
  r.t_ours = time_best([&] { l3::decode(ours, outv, d1); }, tc);
#endif
  r.t_png = time_best([&] { decode_png_libpng(png, out, cap); }, tc);
  r.t_spng = time_best([&] { decode_png_spng(png, out, cap); }, tc);
  r.t_jpg90 = time_best([&] { decode_jpeg(j90, out, cap); }, tc);
  r.t_jpg95 = time_best([&] { decode_jpeg(j95, out, cap); }, tc);
  (void)opt;
  return r;
}

// ---- aggregation and report ----

struct Agg {
  std::size_t n = 0;
  std::uint64_t px = 0, raw = 0, jraw = 0;
  std::int64_t ours = 0, png = 0, l3b = 0, webp = 0, j90 = 0, j95 = 0;
  double t_ours = 0, t_png = 0, t_spng = 0, t_j90 = 0, t_j95 = 0, e_ours = 0, e_png = 0, e_l3b = 0;
  bool webp_all = true;
  void add(const Row& r) {
    ++n;
    px += r.pixels(), raw += r.raw, jraw += r.jpeg_raw;
    ours += r.ours, png += r.png, l3b += r.l3b, j90 += r.jpg90, j95 += r.jpg95;
    if (r.webp < 0) webp_all = false;
    else webp += r.webp;
    t_ours += r.t_ours, t_png += r.t_png, t_spng += r.t_spng, t_j90 += r.t_jpg90, t_j95 += r.t_jpg95;
    e_ours += r.enc_ours, e_png += r.enc_png, e_l3b += r.enc_l3b;
  }
};

std::string fmt(double v, int prec = 2) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", prec, v);
  return b;
}
std::string bpp(std::int64_t bytes, std::uint64_t px) { return fmt(8.0 * static_cast<double>(bytes) / static_cast<double>(px)); }
std::string ratio(std::int64_t a, std::int64_t b) { return fmt(static_cast<double>(a) / static_cast<double>(b), 3); }
std::string mbs(std::uint64_t bytes, double secs) { return fmt(static_cast<double>(bytes) / secs / 1e6, 1); }

struct Threads {
  std::string name;
  std::uint64_t raw = 0;
  double t1 = -1, t2 = -1;
};

std::string report(const std::vector<Row>& rows, const Options& opt, const Threads& th, bool webp,
                   double wall) {
  std::map<std::string, Agg> agg;
  Agg total;
  for (const Row& r : rows) {
    agg[r.cls].add(r);
    total.add(r);
  }
  const std::vector<std::pair<std::string, const Agg*>> classes = {
      {"photos", &agg["photos"]}, {"graphics", &agg["graphics"]}, {"total", &total}};
  std::ostringstream o;
  o << "# Codec benchmark\n\n";
  o << "- CPU: " << cpu_model() << " (" << std::thread::hardware_concurrency() << " hardware threads)\n";
  o << "- Host: " << host_name() << " (load average at the end: " << load_average() << ")\n- Date: " << utc_date() << "\n- Commit: " << git_commit(opt.commit) << "\n";
  o << "- Build: " << L3_BENCH_BUILD_INFO << "\n";
  o << "- Mode: " << (opt.quick ? "--quick (fewer repetitions: min 1 run, 0.02 s per image per codec)"
                                 : "full (fastest of >= 3 runs and >= 0.2 s per image per codec)")
    << "; benchmark wall time " << fmt(wall, 1) << " s\n";
  o << "- l3 codec: " << (kHaveCodec ? "built (l3::encode defaults, l3::decode threads=1)" : "NOT BUILT (l3_codec target missing): columns pending")
    << "\n- Corpus: " << opt.corpus << "\n\n";
  o << "Units: bytes; bpp = bits per pixel (whatever the channel count); MB/s = decoded raw bytes / s, "
       "MB = 10^6 bytes; x PNG = bytes / libpng's bytes. All lossless outputs verified bit-exact before timing.\n\n";

  o << "## Sizes\n\n| class | images | Mpixels | raw MB | l3 bytes | l3 bpp | l3 x PNG | PNG bytes | PNG bpp | "
       "L3 baseline bytes | L3b bpp | L3b x PNG |"
    << (webp ? " WebP-LL bytes | WebP bpp | WebP x PNG |" : "") << " JPEG q90 bytes | JPEG q95 bytes |\n";
  o << "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|" << (webp ? "---:|---:|---:|" : "") << "---:|---:|\n";
  for (const auto& [name, a] : classes) {
    o << "| " << name << " | " << a->n << " | " << fmt(static_cast<double>(a->px) / 1e6) << " | "
      << fmt(static_cast<double>(a->raw) / 1e6) << " | ";
    if (kHaveCodec) o << a->ours << " | " << bpp(a->ours, a->px) << " | " << ratio(a->ours, a->png) << " | ";
    else o << "pending | pending | pending | ";
    o << a->png << " | " << bpp(a->png, a->px) << " | " << a->l3b << " | " << bpp(a->l3b, a->px) << " | "
      << ratio(a->l3b, a->png) << " | ";
    if (webp) o << a->webp << " | " << bpp(a->webp, a->px) << " | " << ratio(a->webp, a->png) << " | ";
    o << a->j90 << " | " << a->j95 << " |\n";
  }

  o << "\n## Single-thread decode (MB/s of decoded raw bytes)\n\n| class | l3 | libpng | libspng | JPEG q90 | "
       "JPEG q95 | l3 x libpng | libspng x libpng | JPEG q90 x libpng |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& [name, a] : classes) {
    const double png = static_cast<double>(a->raw) / a->t_png;
    o << "| " << name << " | " << (kHaveCodec ? mbs(a->raw, a->t_ours) : "pending") << " | " << mbs(a->raw, a->t_png)
      << " | " << mbs(a->raw, a->t_spng) << " | " << mbs(a->jraw, a->t_j90) << " | " << mbs(a->jraw, a->t_j95)
      << " | " << (kHaveCodec ? fmt(static_cast<double>(a->raw) / a->t_ours / png) : "pending") << " | "
      << fmt(static_cast<double>(a->raw) / a->t_spng / png) << " | "
      << fmt(static_cast<double>(a->jraw) / a->t_j90 / png) << " |\n";
  }
  o << "\nJPEG: libjpeg-turbo, jpeg_set_defaults (4:2:0, islow DCT) at quality 90/95; lossy, shown for size and "
       "speed only; its MB/s counts the bytes it outputs (alpha dropped).\n";

  o << "\n## Encode (one run per image, MB/s of raw bytes)\n\n| class | l3 | libpng (level 6) | L3 baseline |\n"
       "|---|---:|---:|---:|\n";
  for (const auto& [name, a] : classes)
    o << "| " << name << " | " << (kHaveCodec ? mbs(a->raw, a->e_ours) : "pending") << " | " << mbs(a->raw, a->e_png)
      << " | " << mbs(a->raw, a->e_l3b) << " |\n";

  o << "\n## Multi-threaded decode of the largest photo\n\n";
  if (th.t1 > 0)
    o << "| image | raw MB | 1 thread MB/s | 2 threads MB/s | speed-up |\n|---|---:|---:|---:|---:|\n| " << th.name
      << " | " << fmt(static_cast<double>(th.raw) / 1e6) << " | " << mbs(th.raw, th.t1) << " | " << mbs(th.raw, th.t2)
      << " | " << fmt(th.t1 / th.t2) << " |\n";
  else
    o << "pending: needs the l3 codec.\n";

  // Bars.
  o << "\n## Bars\n\n| bar | target | measured | status |\n|---|---|---|---|\n";
  const auto bar = [&](const std::string& what, const std::string& target, std::optional<double> v, double lim,
                       bool at_most) {
    o << "| " << what << " | " << target << " | ";
    if (!v) {
      o << "- | pending (codec not built) |\n";
      return;
    }
    const bool ok = at_most ? *v <= lim : *v >= lim;
    o << fmt(*v, 3) << " | " << (ok ? "reached" : "NOT reached") << " |\n";
  };
  const Agg& ph = agg["photos"];
  const Agg& gr = agg["graphics"];
  std::optional<double> v1, v2, v3, v4;
  if (kHaveCodec) {
    v1 = static_cast<double>(ph.ours) / static_cast<double>(ph.png);
    v2 = static_cast<double>(gr.ours) / static_cast<double>(gr.png);
    v3 = total.t_png / total.t_ours;  // same bytes: ratio of MB/s = inverse ratio of times
  }
  if (th.t1 > 0) v4 = th.t1 / th.t2;
  bar("photos: total bytes vs PNG", "<= 0.85x", v1, 0.85, true);
  bar("graphics: total bytes vs PNG", "<= 1.00x", v2, 1.0, true);
  bar("single-thread decode vs libpng (all images)", ">= 1.5x", v3, 1.5, false);
  bar("2-thread speed-up (largest photo)", ">= 1.7x", v4, 1.7, false);

  o << "\n## Per image\n\n| class | image | size | l3 | PNG | L3b | " << (webp ? "WebP-LL | " : "")
    << "l3 x PNG | L3b x PNG | l3 MB/s | libpng MB/s | libspng MB/s | JPEG q90 MB/s |\n|---|---|---|---:|---:|---:|"
    << (webp ? "---:|" : "") << "---:|---:|---:|---:|---:|---:|\n";
  for (const Row& r : rows) {
    o << "| " << r.cls << " | " << r.name << " | " << r.w << "x" << r.h << "x" << r.c << " | "
      << (kHaveCodec ? std::to_string(r.ours) : "-") << " | " << r.png << " | " << r.l3b << " | ";
    if (webp) o << r.webp << " | ";
    o << (kHaveCodec ? ratio(r.ours, r.png) : "-") << " | " << ratio(r.l3b, r.png) << " | "
      << (kHaveCodec ? mbs(r.raw, r.t_ours) : "-") << " | " << mbs(r.raw, r.t_png) << " | " << mbs(r.raw, r.t_spng)
      << " | " << mbs(r.jpeg_raw, r.t_jpg90) << " |\n";
  }
  o << "\nPeers (" << peer_versions() << "): libpng encodes at its defaults (zlib level 6, adaptive filters) "
       "and decodes from memory; libspng decodes the same bytes (SPNG_FMT_PNG). L3 baseline: bench/l3_baseline.hpp "
       "(planes, 64x64 patches or 32x32 when a side < 256, row-only Paeth over UL/U/UR, 4+8+64w-bit rows; "
    << (opt.l3b_zero_edges ? "neighbours outside a patch read as 0, as the reference code" : "neighbours outside a patch read as U")
    << "). "
    << (webp ? "WebP lossless: cwebp -lossless -exact -q 75 -m 4, verified with dwebp; size only. " : "") << "\n";
  return o.str();
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) die("missing value after " + a);
      return argv[++i];
    };
    if (a == "--corpus") o.corpus = value();
    else if (a == "--out") o.out = value();
    else if (a == "--commit") o.commit = value();
    else if (a == "--quick") o.quick = true;
    else if (a == "--no-webp") o.webp = false;
    else if (a == "--l3b-zero-edges") o.l3b_zero_edges = true;
    else if (a == "-h" || a == "--help") {
      std::cout << "usage: bench_codec [--corpus DIR] [--out FILE] [--quick] [--no-webp] [--commit REV]\n"
                   "  --corpus DIR  folder with photos/ and graphics/ PNG files (default bench/corpus)\n"
                   "  --out FILE    markdown report (default bench/results/codec-<host>.md)\n"
                   "  --quick       fewer repetitions, no WebP column (CI smoke run)\n"
                   "  --no-webp     skip the cwebp size column\n"
                   "  --l3b-zero-edges  L3 baseline reads 0 outside a patch, as the reference CUDA code\n"
                   "  --commit REV  commit to name in the report (default: git rev-parse --short HEAD)\n";
      std::exit(0);
    } else die("unknown argument " + a + " (see --help)");
  }
  if (o.quick) o.webp = false;
  if (o.out.empty()) o.out = std::string(L3_BENCH_SOURCE_DIR) + "/bench/results/codec-" + host_name() + ".md";
  return o;
}

std::vector<fs::path> list_pngs(const fs::path& dir) {
  std::vector<fs::path> v;
  if (!fs::is_directory(dir)) return v;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".png") v.push_back(e.path());
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  TimeCfg tc;
  if (opt.quick) tc = TimeCfg{0.02, 1, 50};
  const bool webp = opt.webp && have_cwebp();
  if (opt.webp && !webp) std::cerr << "bench_codec: cwebp/dwebp not found: no WebP column\n";
  if (!kHaveCodec) std::cerr << "bench_codec: built without the l3 codec: l3 columns are pending\n";

  const fs::path tmp = fs::temp_directory_path() / ("l3bench-" + std::to_string(getpid()));
  fs::create_directories(tmp);
  const double start = now();
  std::vector<Row> rows;
  for (const std::string cls : {"photos", "graphics"}) {
    const std::vector<fs::path> files = list_pngs(fs::path(opt.corpus) / cls);
    if (files.empty()) die("no PNG files in " + (fs::path(opt.corpus) / cls).string() + " (run bench/fetch_corpus.sh)");
    for (const fs::path& f : files) {
      try {
        rows.push_back(measure(cls, f, opt, tc, tmp, webp));
      } catch (const std::exception& e) {
        die(f.string() + ": " + e.what());
      }
      const Row& r = rows.back();
      std::cerr << "  " << cls << "/" << r.name << " " << r.w << "x" << r.h << "x" << r.c << "  PNG " << r.png
                << "  L3b " << r.l3b << (kHaveCodec ? "  l3 " + std::to_string(r.ours) : std::string()) << "\n";
    }
  }

  Threads th;
#ifdef L3_HAVE_CODEC
  {
    const Row* big = nullptr;
    for (const Row& r : rows)
      if (r.cls == "photos" && (big == nullptr || r.pixels() > big->pixels())) big = &r;
    const Pixels src = read_png_file((fs::path(opt.corpus) / "photos" / (big->name + ".png")).string());
    const std::vector<std::uint8_t> enc = l3::encode({src.data.data(), src.width, src.height, src.channels, 0});
    std::vector<std::uint8_t> buf(src.size());
    const l3::MutableImageView outv{buf.data(), src.width, src.height, src.channels, 0};
    l3::DecodeOptions o1, o2;
    o1.threads = 1;
    o2.threads = 2;
    l3::decode(enc, outv, o2);
    if (buf != src.data) die("l3 decode (threads=2) differs from source: " + big->name);
    TimeCfg tt = tc;
    tt.min_total = opt.quick ? 0.05 : 1.0;
    tt.min_runs = opt.quick ? 2 : 5;
    th.name = big->name;
    th.raw = src.size();
    th.t1 = time_best([&] { l3::decode(enc, outv, o1); }, tt);
    th.t2 = time_best([&] { l3::decode(enc, outv, o2); }, tt);
  }
#endif
  std::error_code ec;
  fs::remove_all(tmp, ec);

  const std::string md = report(rows, opt, th, webp, now() - start);
  std::cout << md;
  fs::create_directories(fs::path(opt.out).parent_path().empty() ? fs::path(".") : fs::path(opt.out).parent_path());
  std::ofstream f(opt.out);
  f << md;
  if (!f) die("cannot write " + opt.out);
  std::cerr << "bench_codec: wrote " << opt.out << "\n";
  return 0;
}
