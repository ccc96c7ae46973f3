// l3pack bench-read DATASET: the reader's throughput and stall metrics for a
// dataset and a configuration (l3/reader/reader.hpp).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <xxhash.h>

#include "common.hpp"
#include "l3/reader/reader.hpp"
#include "l3/storage/storage.hpp"
#ifdef L3_HAVE_CUDA
#include "l3/reader/reader_backend_cuda.hpp"
#endif

namespace l3::cli {
namespace {

struct BenchReadArguments {
  std::filesystem::path dataset;
  ReaderOptions options;
  std::uint32_t crop = 224;
  std::uint64_t epochs = 1;
  std::uint64_t max_batches = 0;  // 0: whole epochs
  double cache_mb = 0;
  bool no_verify = false;
  bool json = false;
  bool digest = false;
  std::string device = "cpu";  // cpu, cuda or cuda:N
  double step_ms = 0;           // > 0: the what-if for this GPU step time
};

// The CUDA device ordinal of --device: -1 for cpu; throws a usage Failure for
// anything but cpu, cuda, cuda:N.
int device_ordinal(const std::string& device) {
  if (device == "cpu") return -1;
  if (device == "cuda") return 0;
  const std::string prefix = "cuda:";
  const std::string n = device.substr(0, prefix.size()) == prefix ? device.substr(prefix.size()) : std::string{};
  if (n.empty() || n.size() > 4 || n.find_first_not_of("0123456789") != std::string::npos)
    throw Failure{"", "--device must be cpu, cuda or cuda:N (got '" + device + "')", exit_usage};
  return std::stoi(n);
}

// --device cuda[:N]: the CUDA batch backend (decode and transforms on the GPU,
// batches in device memory).
void use_device(ReaderOptions& o, int ordinal) {
  if (ordinal < 0) return;
#ifdef L3_HAVE_CUDA
  if (cuda_device_count() == 0) throw Failure{"", "--device cuda: no CUDA device found", exit_failure};
  try {
    o.batch_backend = make_cuda_batch_backend(ordinal, nullptr, o.limits);
  } catch (const Error& e) {
    throw Failure{"", "--device cuda:" + std::to_string(ordinal) + ": " + e.what(), exit_code_for(e.code())};
  }
#else
  (void)o;
  throw Failure{"", "--device cuda: this l3pack was built without CUDA (configure with nvcc available)", exit_usage};
#endif
}

void run_bench_read(BenchReadArguments& a) {
  ReaderOptions& o = a.options;
  o.transform.width = o.transform.height = a.crop;
  o.cache_bytes = static_cast<std::uint64_t>(a.cache_mb * 1e6);
  if (a.no_verify) o.verify = Verify::no;
  const int ordinal = device_ordinal(a.device);
  use_device(o, ordinal);
  std::unique_ptr<Reader> reader;
  about_file(a.dataset, [&] { reader = std::make_unique<Reader>(Reader::open(a.dataset, o)); });
  const Dataset& ds = reader->dataset();
  if (!a.json) {
    std::printf("dataset:   %s (%llu records, %zu shards)\n", a.dataset.c_str(),
                static_cast<unsigned long long>(ds.size()), ds.shard_count());
    std::printf("config:    batch %u, workers %u, prefetch %u, %ux%u %s %s, echo %u, cache %.0f MB, rank %u/%u\n",
                o.batch_size, o.workers, o.prefetch, o.transform.width, o.transform.height,
                o.transform.layout == Layout::chw ? "CHW" : "HWC", dtype_name(o.transform.dtype), o.echo, a.cache_mb,
                o.rank, o.world_size);
    if (!o.peer_cache.servers.empty())
      std::printf("peers:     %zu memcached servers (peer cache, timeout %u ms)\n", o.peer_cache.servers.size(),
                  o.peer_cache.timeout_ms);
    if (ordinal >= 0)
      std::printf("device:    cuda:%d (decode and transforms on the GPU, batches in device memory; --workers unused)\n",
                  ordinal);
  }
  std::uint64_t batches = 0;
  std::uint64_t checksum = 0;  // touches every batch so nothing is optimised away
  // --digest: every batch's bytes, labels and records, in order.
  const std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(), &XXH3_freeState);
  XXH3_state_t* digest = state.get();
  XXH3_64bits_reset(digest);
  for (std::uint64_t e = 0; e < a.epochs; ++e) {
    if (e > 0) reader->set_epoch(o.epoch + e);
    for (;;) {
      if (a.max_batches && batches >= a.max_batches) break;
      const Batch* b = about_file(a.dataset, [&] { return reader->next(); });
      if (!b) break;
      // A device batch is complete when next() returns it (the backend's
      // run() waited for its writes); its bytes are not read on the host.
      if (b->device < 0) checksum += static_cast<const std::uint8_t*>(b->data)[b->bytes / 2];
      if (a.digest && b->device < 0) {
        XXH3_64bits_update(digest, b->data, b->bytes);
        XXH3_64bits_update(digest, b->labels.data(), b->labels.size_bytes());
        XXH3_64bits_update(digest, b->records.data(), b->records.size_bytes());
      }
      ++batches;
    }
  }
  const Metrics m = reader->metrics();
  if (a.digest) std::printf("digest: %016llx\n", static_cast<unsigned long long>(XXH3_64bits_digest(digest)));
  // A remote dataset: what the store was asked for (spec/format.md §8.5.1).
  const bool remote = is_remote(a.dataset);
  const storage::TransferStats t = remote ? storage::shared_s3_client()->stats() : storage::TransferStats{};
  std::uint64_t dataset_bytes = 0;
  for (const ManifestShard& shard : ds.manifest().shards) dataset_bytes += shard.bytes;
  if (a.json) {
    nlohmann::json j = nlohmann::json::parse(a.step_ms > 0 ? m.to_json(a.step_ms / 1e3, o.batch_size) : m.to_json());
    if (remote)
      j["storage"] = {{"requests", t.requests}, {"retries", t.retries}, {"bytes_downloaded", t.bytes_down},
                      {"dataset_bytes", dataset_bytes}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%s", m.summary().c_str());
    if (a.step_ms > 0) std::printf("%s", m.feed_summary(a.step_ms / 1e3, o.batch_size).c_str());
    if (remote)
      std::printf("storage: %llu requests (%llu retries), %llu bytes downloaded = %.3fx the shards' %llu bytes, "
                  "%.4f requests per image\n",
                  static_cast<unsigned long long>(t.requests), static_cast<unsigned long long>(t.retries),
                  static_cast<unsigned long long>(t.bytes_down),
                  dataset_bytes ? static_cast<double>(t.bytes_down) / static_cast<double>(dataset_bytes) : 0.0,
                  static_cast<unsigned long long>(dataset_bytes),
                  m.examples ? static_cast<double>(t.requests) / static_cast<double>(m.examples) : 0.0);
  }
  (void)checksum;
}

}  // namespace

void add_bench_read_command(CLI::App& app) {
  auto args = std::make_shared<BenchReadArguments>();
  CLI::App* cmd = app.add_subcommand("bench-read", "Read a dataset with the training reader and print stall metrics");
  ReaderOptions& o = args->options;
  cmd->add_option("DATASET", args->dataset, "Dataset directory (with manifest.json)")->required();
  cmd->add_option("--batch", o.batch_size, "Batch size")->capture_default_str()->check(CLI::Range(1u, 1u << 20));
  cmd->add_option("--workers", o.workers, "Decode/transform threads")->capture_default_str()->check(CLI::Range(1u, 256u));
  cmd->add_option("--prefetch", o.prefetch, "Batches prepared ahead")->capture_default_str()->check(CLI::Range(1u, 64u));
  cmd->add_option("--crop", args->crop, "Output size (square)")->capture_default_str()->check(CLI::Range(1u, 16384u));
  // The crop modes' names are l3.Loader's (crop_mode_name); "random", this
  // option's spelling before, is still accepted for random_resized.
  std::map<std::string, CropMode> modes{{"random", CropMode::random_resized}};
  for (CropMode m : {CropMode::random_resized, CropMode::center, CropMode::full}) modes[crop_mode_name(m)] = m;
  cmd->add_option("--mode", o.transform.crop, "Crop: random_resized, center or full ('random' = random_resized)")
      ->transform(CLI::CheckedTransformer(modes, CLI::ignore_case))
      ->option_text("random_resized|center|full (default random_resized)");
  const std::map<std::string, DType> dtypes{
      {"uint8", DType::uint8}, {"float32", DType::float32}, {"float16", DType::float16}};
  cmd->add_option("--dtype", o.transform.dtype, "Output type")
      ->transform(CLI::CheckedTransformer(dtypes))
      ->option_text("uint8|float32|float16 (default float32)");
  const std::map<std::string, Layout> layouts{{layout_name(Layout::chw), Layout::chw},
                                             {layout_name(Layout::hwc), Layout::hwc}};
  cmd->add_option("--layout", o.transform.layout, "Output layout")
      ->transform(CLI::CheckedTransformer(layouts))
      ->option_text("chw|hwc (default chw)");
  cmd->add_option("--flip", o.transform.flip_probability, "Horizontal flip probability")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--epochs", args->epochs, "Epochs to read")->capture_default_str();
  cmd->add_option("--batches", args->max_batches, "Stop after this many batches (0: whole epochs)");
  cmd->add_option("--seed", o.seed, "Shuffle and transform seed");
  cmd->add_option("--block", o.block_size, "Shuffle blocks of this many consecutive records (0: records)");
  cmd->add_option("--world", o.world_size, "World size")->check(CLI::Range(1u, 1u << 16));
  cmd->add_option("--rank", o.rank, "This rank");
  cmd->add_option("--echo", o.echo, "Data echoing factor")->check(CLI::Range(1u, 64u));
  cmd->add_option("--cache-mb", args->cache_mb, "RAM cache budget for compressed records, MB");
  const std::map<std::string, ErrorPolicy> policies{{"raise", ErrorPolicy::raise}, {"skip", ErrorPolicy::skip}};
  cmd->add_option("--on-error", o.on_error, "Corrupt record policy: raise or skip")
      ->transform(CLI::CheckedTransformer(policies))
      ->option_text("raise|skip (default raise)");
  cmd->add_option("--peer-cache", o.peer_cache.servers,
                  "Every node's memcached (host:port, comma-separated, the same list on every node): records are "
                  "looked for in their owner's memcached before storage and stored there after a storage read "
                  "(spec/format.md §8.6)")
      ->delimiter(',');
  cmd->add_option("--peer-timeout-ms", o.peer_cache.timeout_ms, "Peer cache: bound on each request to a server, ms")
      ->capture_default_str()
      ->check(CLI::Range(1u, 600000u));
  cmd->add_flag("--no-verify", args->no_verify, "Do not check record checksums");
  cmd->add_flag("--json", args->json, "Print the metrics as one JSON object");
  cmd->add_flag("--digest", args->digest,
                "Print an XXH3 digest of every batch (pixels, labels, record indices, in order): equal digests, "
                "equal epochs (host batches only)");
  cmd->add_option("--device", args->device,
                  "cpu: decode and transforms on the CPU workers; cuda[:N]: both on CUDA device N, batches in device "
                  "memory (builds with CUDA only)")
      ->option_text("cpu|cuda[:N] (default cpu)");
  cmd->add_option("--step-ms", args->step_ms,
                  "What-if: the worker threads and read throughput that feed one batch every this many ms (a GPU's "
                  "step time), from the measured busy time per example")
      ->check(CLI::PositiveNumber);
  cmd->footer(
      "Examples:\n"
      "  l3pack bench-read ds/ --crop 224 --workers 8\n"
      "  l3pack bench-read ds/ --epochs 2 --cache-mb 4096 --json\n"
      "  l3pack bench-read ds/ --epochs 2 --peer-cache node1:11211,node2:11211\n"
      "  l3pack bench-read ds/ --step-ms 150   (can 2 workers feed a 150 ms step?)");
  cmd->callback([args] {
    if (args->options.rank >= args->options.world_size)
      throw Failure{"", "--rank must be < --world", exit_usage};
    run_bench_read(*args);
  });
}

}  // namespace l3::cli
