// Reader bindings: the streaming reader behind l3.Loader (l3::Reader with the
// Loader's options), and _drain, the C++-loop baseline of bench/bench_python.py.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "batch.hpp"
#include "ext.hpp"
#include "l3/error.hpp"
#include "l3/reader.hpp"
#include "l3/reader_backend_cuda.hpp"

namespace l3py {
namespace {

using namespace nb::literals;

// ---- the streaming reader -----------------------------------------------------------

// Plain fields set by the Python Loader from its keyword arguments.
struct LoaderConfig {
  std::uint32_t batch_size = 64, workers = 2, prefetch = 2, read_ahead = 0;
  std::uint64_t seed = 0, block_size = 0, epoch = 0;
  bool shuffle = true, drop_last = false;
  std::uint32_t world_size = 1, rank = 0;
  std::uint32_t echo = 1, echo_window = 0;
  std::uint64_t cache_bytes = 0;
  std::vector<std::string> peer_cache;  // memcached "host:port" of every node (spec/format.md §8.6)
  std::uint32_t peer_timeout_ms = 500;
  bool skip_errors = false;
  std::uint32_t max_replacements = 64;
  bool verify = true, verify_shard_hashes = false;
  std::uint32_t width = 224, height = 224, channels = 3;
  std::string crop = "random_resized";
  double scale_min = 0.08, scale_max = 1.0, ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;
  double center_fraction = 0.875, flip_probability = 0.5;
  bool antialias = true, normalize = true;
  std::string layout = "chw", dtype = "float32";
  std::vector<float> mean{0.485f, 0.456f, 0.406f}, std{0.229f, 0.224f, 0.225f};
  bool copy = true;
  // -1: the CPU pipeline; >= 0: CUDA device index: the CUDA batch backend
  // (decode and transforms on the GPU, batches in device memory).
  int device = -1;
  // Test/reference mode: the CUDA batch backend's decomposition run on the CPU
  // (make_emulated_gpu_batch_backend; host batches; slow but exact).
  bool emulated_gpu = false;
};

l3::ReaderOptions reader_options(const LoaderConfig& c) {
  l3::ReaderOptions o;
  o.batch_size = c.batch_size;
  o.workers = c.workers;
  o.prefetch = c.prefetch;
  o.read_ahead = c.read_ahead;
  o.seed = c.seed;
  o.shuffle = c.shuffle;
  o.block_size = c.block_size;
  o.world_size = c.world_size;
  o.rank = c.rank;
  o.remainder = c.drop_last ? l3::Remainder::drop : l3::Remainder::pad;
  o.epoch = c.epoch;
  o.echo = c.echo;
  o.echo_window = c.echo_window;
  o.cache_bytes = c.cache_bytes;
  o.peer_cache.servers = c.peer_cache;
  o.peer_cache.timeout_ms = c.peer_timeout_ms;
  o.on_error = c.skip_errors ? l3::ErrorPolicy::skip : l3::ErrorPolicy::raise;
  o.max_replacements = c.max_replacements;
  o.verify = c.verify ? l3::Verify::yes : l3::Verify::no;
  l3::TransformOptions& t = o.transform;
  t.width = c.width;
  t.height = c.height;
  t.channels = c.channels;
  if (c.crop == "random_resized") {
    t.crop = l3::CropMode::random_resized;
  } else if (c.crop == "center") {
    t.crop = l3::CropMode::center;
  } else if (c.crop == "full") {
    t.crop = l3::CropMode::full;
  } else {
    l3::throw_error(l3::errc::invalid_argument, "crop must be 'random_resized', 'center' or 'full', not '" + c.crop + "'");
  }
  t.scale_min = c.scale_min;
  t.scale_max = c.scale_max;
  t.ratio_min = c.ratio_min;
  t.ratio_max = c.ratio_max;
  t.center_fraction = c.center_fraction;
  t.antialias = c.antialias;
  t.flip_probability = c.flip_probability;
  if (const auto layout = l3::layout_from_name(c.layout)) {
    t.layout = *layout;
  } else {
    l3::throw_error(l3::errc::invalid_argument, "layout must be 'chw' or 'hwc', not '" + c.layout + "'");
  }
  if (c.dtype == "float32") {
    t.dtype = l3::DType::float32;
  } else if (c.dtype == "float16") {
    t.dtype = l3::DType::float16;
  } else if (c.dtype == "uint8") {
    t.dtype = l3::DType::uint8;
  } else {
    l3::throw_error(l3::errc::invalid_argument,
                    "dtype must be 'float32', 'float16' or 'uint8', not '" + c.dtype + "'");
  }
  t.normalize = c.normalize;
  if (c.mean.size() != 3 || c.std.size() != 3)
    l3::throw_error(l3::errc::invalid_argument, "mean and std must have 3 values");
  for (int k = 0; k < 3; ++k) {
    t.mean[k] = c.mean[static_cast<std::size_t>(k)];
    t.std[k] = c.std[static_cast<std::size_t>(k)];
  }
  if (c.emulated_gpu) {
    if (c.device >= 0)
      l3::throw_error(l3::errc::invalid_argument, "the emulated GPU backend runs on the CPU: use device='cpu'");
    o.batch_backend = l3::make_emulated_gpu_batch_backend(o.limits);
  }
  if (c.device >= 0) {
#ifdef L3_HAVE_CUDA
    // Decode and transform on the GPU (l3/reader_backend_cuda.hpp): whole
    // windows through the CUDA batch backend; batches in device memory.
    if (l3::cuda_device_count() == 0) l3::throw_error(l3::errc::device_error, "device='cuda': no CUDA device");
    o.batch_backend = l3::make_cuda_batch_backend(c.device, nullptr, o.limits);
#else
    l3::throw_error(l3::errc::invalid_argument, "device='cuda': this l3 extension was built without CUDA");
#endif
  }
  return o;
}


// One consumer at a time: l3::Reader wants a single consumer thread, so every
// call takes mu_ (after releasing the GIL, so a thread blocked in next() never
// holds the GIL). Each call holds its own reference to the reader, so close()
// from another thread cannot destroy it under a running call.
class PyReader {
public:
  PyReader(const std::string& path, const LoaderConfig& cfg) : copy_(cfg.copy) {
    l3::ReaderOptions opt = reader_options(cfg);
    l3::DatasetOptions dopt;
    dopt.verify_shard_hashes = cfg.verify_shard_hashes;
    reader_ = without_gil([&] { return std::make_shared<l3::Reader>(l3::Reader::open(path, opt, dopt)); });
    pool_ = std::make_shared<BufferPool>();
    pool_->bytes = l3::example_bytes(opt.transform) * opt.batch_size;
    pool_->max_free = opt.prefetch + 4;
  }

  // (data, labels, records, epoch, index, wait_seconds, device) or None at the
  // end of the epoch. data: a numpy array for host batches (device -1), a
  // _DeviceArray for device batches (device >= 0, never copied).
  // streams: the consumer streams of the previous batch when it was a device
  // batch (its buffer is refilled only after their work so far has run).
  nb::object next(const StreamList& streams) {
    std::shared_ptr<l3::Reader> r = reader();
    PooledBuffer* buf = nullptr;
    const l3::Batch* b = nullptr;
    std::vector<std::int64_t> labels;
    std::vector<std::uint64_t> records;
    l3::Batch meta;
    {
      nb::gil_scoped_release release;
      std::lock_guard lock(mu_);
      void* consumer = nullptr;
      if (held_device_ && !streams.empty()) {
        // Reader::next orders the refill after one stream: wait for the others here.
        sync_streams(StreamList(streams.begin(), streams.end() - 1));
        consumer = as_stream(streams.back());
      }
      held_device_ = false;
      b = r->next(consumer);
      if (b) {
        meta = *b;
        held_device_ = b->device >= 0;
        labels.assign(b->labels.begin(), b->labels.end());
        records.assign(b->records.begin(), b->records.end());
        if (copy_ && b->device < 0) {
          buf = take_pooled_buffer(pool_);
          std::memcpy(buf->data, b->data, b->bytes);
        }
      }
    }
    if (!b) return nb::none();
    auto labels_arr = owned_vector<std::int64_t>(labels.data(), labels.size());
    auto records_arr = owned_vector<std::uint64_t>(records.data(), records.size());
    nb::object data = batch_array(r, meta, buf);
    return nb::make_tuple(data, labels_arr, records_arr, meta.epoch, meta.index, meta.wait_seconds, meta.device);
  }

  // Waits for the consumer streams of the batch last returned when it is a
  // device batch: set_epoch(), restore() and close() hand its buffer back
  // without a stream to order the refill after.
  void wait_streams(const StreamList& streams) {
    if (streams.empty()) return;
    nb::gil_scoped_release release;
    std::lock_guard lock(mu_);
    if (held_device_) sync_streams(streams);
  }

  template <class F>
  auto locked(F&& f) {
    std::shared_ptr<l3::Reader> r = reader();
    nb::gil_scoped_release release;
    std::lock_guard lock(mu_);
    return f(*r);
  }

  void set_epoch(std::uint64_t e) {
    locked([&](l3::Reader& r) {
      held_device_ = false;
      r.set_epoch(e);
    });
  }
  std::uint64_t epoch() { return locked([](l3::Reader& r) { return r.epoch(); }); }
  std::uint64_t batches_in_epoch() { return locked([](l3::Reader& r) { return r.batches_in_epoch(); }); }
  std::string state() { return locked([](l3::Reader& r) { return r.state().to_json(); }); }
  void restore(const std::string& json) {
    const l3::ReaderState st = l3::ReaderState::from_json(json);
    locked([&](l3::Reader& r) {
      held_device_ = false;
      r.restore(st);
    });
  }
  std::string metrics_json(double step_seconds) {  // any thread; step_seconds > 0 adds the what-if
    const l3::Metrics m = reader()->metrics();
    return step_seconds > 0 ? m.to_json(step_seconds, reader()->options().batch_size) : m.to_json();
  }
  std::string metrics_summary() { return reader()->metrics().summary(); }
  void reset_metrics() { locked([](l3::Reader& r) { r.reset_metrics(); }); }
  std::uint64_t dataset_size() { return reader()->dataset().size(); }
  std::vector<std::string> classes() { return reader()->dataset().class_names(); }
  void close() {
    std::shared_ptr<l3::Reader> r = std::move(reader_);
    reader_.reset();
    nb::gil_scoped_release release;
    std::lock_guard lock(mu_);
    held_device_ = false;
    r.reset();  // joins the worker threads (unless a borrowed array still holds the reader)
  }
  bool closed() const { return !reader_; }

private:
  std::shared_ptr<l3::Reader> reader() {
    if (!reader_) l3::throw_error(l3::errc::invalid_argument, "the loader is closed");
    return reader_;
  }
  std::mutex mu_;
  std::shared_ptr<l3::Reader> reader_;
  std::shared_ptr<BufferPool> pool_;
  bool copy_ = true;
  bool held_device_ = false;  // the batch last returned lives in device memory
};

// The C++ reader driven by a C++ loop (no Python per batch): the baseline of
// bench/bench_python.py for the bindings' overhead. Same options as a Loader;
// touches one element per batch like the Python consumer does.
nb::dict drain(const std::string& path, const LoaderConfig& cfg, std::uint64_t epochs, std::uint64_t warmup) {
  std::uint64_t images = 0;
  double seconds = 0, sink = 0;
  std::string metrics;
  {
    nb::gil_scoped_release release;
    l3::Reader r = l3::Reader::open(path, reader_options(cfg));
    auto run_epoch = [&](std::uint64_t e, bool count) {
      r.set_epoch(e);
      while (const l3::Batch* b = r.next()) {
        // Device batches are not touched from the host (no consumer reads them).
        if (b->device < 0) sink += static_cast<double>(*static_cast<const std::uint8_t*>(b->data));
        if (count) images += b->size;
      }
    };
    for (std::uint64_t e = 0; e < warmup; ++e) run_epoch(e, false);
    r.reset_metrics();
    const auto t0 = std::chrono::steady_clock::now();
    for (std::uint64_t e = 0; e < epochs; ++e) run_epoch(warmup + e, true);
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    metrics = r.metrics().to_json();
  }
  nb::dict d;
  d["images"] = images;
  d["seconds"] = seconds;
  d["metrics_json"] = metrics;
  d["sink"] = sink;
  return d;
}

}  // namespace

void bind_reader(nb::module_& m) {
  m.def("_drain", &drain, "path"_a, "config"_a, "epochs"_a, "warmup"_a);

  nb::class_<LoaderConfig>(m, "_LoaderConfig")
      .def(nb::init<>())
      .def_rw("batch_size", &LoaderConfig::batch_size)
      .def_rw("workers", &LoaderConfig::workers)
      .def_rw("prefetch", &LoaderConfig::prefetch)
      .def_rw("read_ahead", &LoaderConfig::read_ahead)
      .def_rw("seed", &LoaderConfig::seed)
      .def_rw("block_size", &LoaderConfig::block_size)
      .def_rw("epoch", &LoaderConfig::epoch)
      .def_rw("shuffle", &LoaderConfig::shuffle)
      .def_rw("drop_last", &LoaderConfig::drop_last)
      .def_rw("world_size", &LoaderConfig::world_size)
      .def_rw("rank", &LoaderConfig::rank)
      .def_rw("echo", &LoaderConfig::echo)
      .def_rw("echo_window", &LoaderConfig::echo_window)
      .def_rw("cache_bytes", &LoaderConfig::cache_bytes)
      .def_rw("peer_cache", &LoaderConfig::peer_cache)
      .def_rw("peer_timeout_ms", &LoaderConfig::peer_timeout_ms)
      .def_rw("skip_errors", &LoaderConfig::skip_errors)
      .def_rw("max_replacements", &LoaderConfig::max_replacements)
      .def_rw("verify", &LoaderConfig::verify)
      .def_rw("verify_shard_hashes", &LoaderConfig::verify_shard_hashes)
      .def_rw("width", &LoaderConfig::width)
      .def_rw("height", &LoaderConfig::height)
      .def_rw("channels", &LoaderConfig::channels)
      .def_rw("crop", &LoaderConfig::crop)
      .def_rw("scale_min", &LoaderConfig::scale_min)
      .def_rw("scale_max", &LoaderConfig::scale_max)
      .def_rw("ratio_min", &LoaderConfig::ratio_min)
      .def_rw("ratio_max", &LoaderConfig::ratio_max)
      .def_rw("center_fraction", &LoaderConfig::center_fraction)
      .def_rw("flip_probability", &LoaderConfig::flip_probability)
      .def_rw("antialias", &LoaderConfig::antialias)
      .def_rw("normalize", &LoaderConfig::normalize)
      .def_rw("layout", &LoaderConfig::layout)
      .def_rw("dtype", &LoaderConfig::dtype)
      .def_rw("mean", &LoaderConfig::mean)
      .def_rw("std", &LoaderConfig::std)
      .def_rw("copy", &LoaderConfig::copy)
      .def_rw("device", &LoaderConfig::device)
      .def_rw("emulated_gpu", &LoaderConfig::emulated_gpu);

  nb::class_<PyReader>(m, "_Reader")
      .def(nb::init<const std::string&, const LoaderConfig&>(), "path"_a, "config"_a)
      .def("next", &PyReader::next, "streams"_a = StreamList{})
      .def("wait_streams", &PyReader::wait_streams, "streams"_a)
      .def("set_epoch", &PyReader::set_epoch)
      .def("epoch", &PyReader::epoch)
      .def("batches_in_epoch", &PyReader::batches_in_epoch)
      .def("state", &PyReader::state)
      .def("restore", &PyReader::restore)
      .def("metrics_json", &PyReader::metrics_json, "step_seconds"_a = 0.0)
      .def("metrics_summary", &PyReader::metrics_summary)
      .def("reset_metrics", &PyReader::reset_metrics)
      .def("dataset_size", &PyReader::dataset_size)
      .def("classes", &PyReader::classes)
      .def("close", &PyReader::close)
      .def_prop_ro("closed", &PyReader::closed);
}

}  // namespace l3py
