// bench_reader: end-to-end images/s of the l3 reader (CPU decode) on the
// corpus photos with random resized crop 224 + flip + normalise (float32 CHW).
// The PyTorch peer (bench/bench_reader_torch.py) runs the same transforms on
// the same images as PNG files; bench/run_reader_bench.sh runs both, in turns,
// and writes bench/results/reader-<host>.md.
//
//   bench_reader [--corpus DIR] [--dataset DIR] [--batch N] [--workers N]
//                [--epochs N] [--warmup N] [--crop N] [--echo N] [--json]
//
// Builds the dataset from the corpus PNGs once (labels: the file-name prefix
// before '_', sorted, as an ImageFolder of <prefix>/<file> would number them).
// Before timing it checks one epoch's examples against a reference made from
// full decodes (uint8 output), so the timed pipeline is known to be right.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "l3/codec/codec.hpp"
#include "l3/format/dataset.hpp"
#include "l3/imageio/image_io.hpp"
#include "l3/reader/reader.hpp"

namespace fs = std::filesystem;

namespace {

struct Args {
  fs::path corpus = fs::path(L3_BENCH_SOURCE_DIR) / "bench/corpus/photos";
  fs::path dataset = fs::path(L3_BENCH_SOURCE_DIR) / "bench/work/reader-photos";
  std::uint32_t batch = 16, workers = 2, crop = 224, echo = 1;
  std::uint64_t epochs = 8, warmup = 1;
  bool json = false;
};

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "bench_reader: FATAL: %s\n", msg.c_str());
  std::exit(2);
}

std::string class_of(const fs::path& file) {
  const std::string name = file.filename().string();
  const auto cut = name.find('_');
  return cut == std::string::npos ? std::string("none") : name.substr(0, cut);
}

// A dataset written by an older codec version is rebuilt.
bool dataset_usable(const fs::path& dir) {
  try {
    l3::Dataset ds = l3::Dataset::open(dir);
    for (std::uint64_t i = 0; i < ds.size(); ++i) (void)l3::read_info(ds.record(i).payload);
    return ds.size() > 0;
  } catch (const l3::Error& e) {
    std::fprintf(stderr, "bench_reader: rebuilding %s (%s)\n", dir.c_str(), e.what());
    return false;
  }
}

void build_dataset(const Args& a) {
  if (fs::exists(a.dataset / l3::kManifestName) && dataset_usable(a.dataset)) return;
  fs::remove_all(a.dataset);
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(a.corpus))
    if (e.path().extension() == ".png") files.push_back(e.path());
  if (files.empty()) die("no PNG files in " + a.corpus.string() + " (run bench/fetch_corpus.sh)");
  std::sort(files.begin(), files.end());
  std::map<std::string, std::int64_t> classes;
  for (const auto& f : files) classes[class_of(f)] = 0;
  l3::Manifest manifest;
  for (auto& [name, label] : classes) {
    label = static_cast<std::int64_t>(manifest.classes.size());
    manifest.classes.push_back(name);
  }
  fs::create_directories(a.dataset);
  std::fprintf(stderr, "bench_reader: encoding %zu images into %s ...\n", files.size(), a.dataset.c_str());
  l3::ShardWriter writer(a.dataset / "photos-00000.l3s");
  l3::EncodeOptions eo;
  eo.threads = 0;
  for (const auto& f : files) {
    const l3::Image img = l3::load_image(f);
    const auto encoded = l3::encode(img.view(), eo);
    writer.append(encoded, classes[class_of(f)], f.filename().string());
  }
  manifest.shards.push_back(l3::manifest_entry(writer.finalize()));
  l3::write_manifest_atomic(a.dataset, manifest);
}

l3::ReaderOptions options_for(const Args& a) {
  l3::ReaderOptions o;
  o.batch_size = a.batch;
  o.workers = a.workers;
  o.prefetch = 2;
  o.seed = 1;
  o.echo = a.echo;
  o.transform.width = o.transform.height = a.crop;
  o.transform.crop = l3::CropMode::random_resized;
  o.transform.flip_probability = 0.5;
  o.transform.dtype = l3::DType::float32;
  o.transform.layout = l3::Layout::chw;
  o.transform.normalize = true;
  return o;
}

// One epoch in uint8 against full decode + the same transforms.
void verify(const std::shared_ptr<const l3::Dataset>& ds, const Args& a) {
  l3::ReaderOptions o = options_for(a);
  o.echo = 1;
  o.transform.dtype = l3::DType::uint8;
  o.transform.layout = l3::Layout::hwc;
  l3::Reader r(ds, o);
  std::size_t checked = 0;
  l3::TransformScratch scratch;
  std::vector<std::uint8_t> hwc(l3::example_bytes(o.transform));
  while (const l3::Batch* b = r.next()) {
    for (std::uint32_t k = 0; k < b->size; ++k) {
      const std::uint64_t rec = b->records[k];
      l3::ImageInfo info;
      const auto px = l3::decode(ds->record(rec).payload, &info);
      l3::xf::Rng rng = l3::xf::example_rng(o.seed, b->epoch, rec, 0);
      const l3::ExamplePlan plan = l3::plan_example(o.transform, info.width, info.height, rng);
      l3::crop_resize(l3::ImageView{px.data(), info.width, info.height, info.channels, 0}, 0, 0, plan, o.transform,
                      scratch, hwc.data());
      if (std::memcmp(hwc.data(), static_cast<const std::uint8_t*>(b->data) + k * hwc.size(), hwc.size()) != 0)
        die("reader output differs from the reference for record " + std::to_string(rec));
      if (b->labels[k] != ds->record(rec).label) die("label mismatch");
      ++checked;
    }
  }
  if (checked < ds->size()) die("verification saw too few examples");
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) die("missing value for " + k);
      return argv[++i];
    };
    if (k == "--corpus") a.corpus = val();
    else if (k == "--dataset") a.dataset = val();
    else if (k == "--batch") a.batch = static_cast<std::uint32_t>(std::stoul(val()));
    else if (k == "--workers") a.workers = static_cast<std::uint32_t>(std::stoul(val()));
    else if (k == "--crop") a.crop = static_cast<std::uint32_t>(std::stoul(val()));
    else if (k == "--echo") a.echo = static_cast<std::uint32_t>(std::stoul(val()));
    else if (k == "--epochs") a.epochs = std::stoull(val());
    else if (k == "--warmup") a.warmup = std::stoull(val());
    else if (k == "--json") a.json = true;
    else die("unknown option " + k);
  }
  try {
    build_dataset(a);
    auto ds = std::make_shared<const l3::Dataset>(l3::Dataset::open(a.dataset));
    verify(ds, a);
    l3::Reader r(ds, options_for(a));
    double sink = 0;
    for (std::uint64_t e = 0; e < a.warmup; ++e) {
      r.set_epoch(e);
      while (const l3::Batch* b = r.next()) sink += static_cast<const float*>(b->data)[0];
    }
    r.reset_metrics();
    std::uint64_t images = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (std::uint64_t e = 0; e < a.epochs; ++e) {
      r.set_epoch(a.warmup + e);
      while (const l3::Batch* b = r.next()) {
        sink += static_cast<const float*>(b->data)[b->bytes / 8];
        images += b->size;
      }
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const l3::Metrics m = r.metrics();
    std::fprintf(stderr, "%s", m.summary().c_str());
    std::printf(
        "{\"pipeline\":\"l3\",\"images\":%llu,\"seconds\":%.4f,\"images_per_second\":%.2f,\"batch\":%u,"
        "\"workers\":%u,\"records\":%llu,\"bottleneck\":\"%s\",\"metrics\":%s,\"sink\":%.3g}\n",
        static_cast<unsigned long long>(images), secs, static_cast<double>(images) / secs, a.batch, a.workers,
        static_cast<unsigned long long>(ds->size()), m.bottleneck().c_str(), m.to_json().c_str(), sink);
  } catch (const std::exception& e) {
    die(e.what());
  }
  return 0;
}
