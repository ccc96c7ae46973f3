// Reader bindings: the streaming reader behind l3.Loader (l3::Reader with an
// l3.ReaderOptions), and _drain, the C++-loop baseline of bench/bench_python.py.
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
#include "l3/common/error.hpp"
#include "l3/reader/reader.hpp"
#include "l3/reader/reader_backend_cuda.hpp"

namespace l3py {
namespace {

using namespace nb::literals;

// The batch backend for device >= 0 (the CUDA batch backend: decode and
// transforms on the GPU, batches in device memory) or for the emulated GPU
// backend (its decomposition run on the CPU; host batches; a reference mode).
void select_backend(l3::ReaderOptions& o, int device, bool emulated_gpu) {
  if (emulated_gpu) {
    if (device >= 0)
      l3::throw_error(l3::errc::invalid_argument, "the emulated GPU backend runs on the CPU: use device='cpu'");
    o.batch_backend = l3::make_emulated_gpu_batch_backend(o.limits);
  }
  if (device < 0) return;
#ifdef L3_HAVE_CUDA
  if (l3::cuda_device_count() == 0) l3::throw_error(l3::errc::device_error, "device='cuda': no CUDA device");
  o.batch_backend = l3::make_cuda_batch_backend(device, nullptr, o.limits);
#else
  l3::throw_error(l3::errc::invalid_argument, "device='cuda': this l3 extension was built without CUDA");
#endif
}

// How a Loader reads beyond its ReaderOptions.
struct ReaderSetup {
  bool verify_shard_hashes = false;
  bool copy = true;           // host batches owned by their arrays (handed over, or copied: PyReader)
  int device = -1;            // >= 0: the CUDA batch backend on that device
  bool emulated_gpu = false;  // the CUDA batch backend's decomposition on the CPU
};

// One consumer at a time: l3::Reader wants a single consumer thread, so every
// call takes mu_ (after releasing the GIL, so a thread blocked in next() never
// holds the GIL). Each call holds its own reference to the reader, so close()
// from another thread cannot destroy it under a running call.
class PyReader {
public:
  PyReader(const std::string& path, l3::ReaderOptions opt, const ReaderSetup& setup) : copy_(setup.copy) {
    select_backend(opt, setup.device, setup.emulated_gpu);
    pool_ = std::make_shared<BufferPool>();
    pool_->bytes = l3::example_bytes(opt.transform) * opt.batch_size;
    pool_->max_free = opt.prefetch + 4;
    // Host batches of the reader's own ring are handed over to their arrays
    // (Reader::detach, no copy); a batch backend's stay in its memory and
    // are copied.
    handover_ = !opt.batch_backend;
    if (handover_) opt.allocator = make_pool_allocator(pool_);
    l3::DatasetOptions dopt;
    dopt.verify_shard_hashes = setup.verify_shard_hashes;
    reader_ = without_gil([&] { return std::make_shared<l3::Reader>(l3::Reader::open(path, opt, dopt)); });
  }

  // The next l3.Batch, or None at the end of the epoch. Its data: a numpy array
  // for host batches (device -1), a _DeviceArray for device batches (device >= 0,
  // never copied).
  // streams: the consumer streams of the previous batch (recorded by its
  // DLPack exports); the reader refills a device batch's buffer only after
  // their work so far has run (Reader::next).
  nb::object next(const StreamList& streams) {
    const std::vector<void*> consumers = as_streams(streams);
    std::shared_ptr<l3::Reader> r = reader();
    PooledBuffer* buf = nullptr;
    const l3::Batch* b = nullptr;
    std::vector<std::int64_t> labels;
    std::vector<std::uint64_t> records;
    l3::Batch meta;
    {
      nb::gil_scoped_release release;
      std::lock_guard lock(mu_);
      b = r->next(consumers);
      if (b) {
        meta = *b;
        labels.assign(b->labels.begin(), b->labels.end());
        records.assign(b->records.begin(), b->records.end());
        if (copy_ && b->device < 0) buf = owned_buffer(*r, *b);
      }
    }
    if (!b) return nb::none();
    PyBatch out{batch_array(r, meta, buf), nb::cast(owned_vector<std::int64_t>(labels.data(), labels.size())),
                nb::cast(owned_vector<std::uint64_t>(records.data(), records.size())),
                meta.epoch, meta.index, meta.wait_seconds, meta.device};
    return nb::cast(std::move(out));
  }

  // Hands the batch last returned back, its refill ordered after `streams`
  // (Reader::release): before set_epoch(), restore() and close(), which have no
  // consumer streams to order it after. A no-op once closed.
  void release(const StreamList& streams) {
    const std::vector<void*> consumers = as_streams(streams);
    std::shared_ptr<l3::Reader> r = reader_;
    if (!r) return;
    nb::gil_scoped_release release;
    std::lock_guard lock(mu_);
    r->release(consumers);
  }

  template <class F>
  auto locked(F&& f) {
    std::shared_ptr<l3::Reader> r = reader();
    nb::gil_scoped_release release;
    std::lock_guard lock(mu_);
    return f(*r);
  }

  void set_epoch(std::uint64_t e) {
    locked([&](l3::Reader& r) { r.set_epoch(e); });
  }
  std::uint64_t epoch() { return locked([](l3::Reader& r) { return r.epoch(); }); }
  std::uint64_t batches_in_epoch() { return locked([](l3::Reader& r) { return r.batches_in_epoch(); }); }
  std::string state() { return locked([](l3::Reader& r) { return r.state().to_json(); }); }
  void restore(const std::string& json) {
    const l3::ReaderState st = l3::ReaderState::from_json(json);
    locked([&](l3::Reader& r) { r.restore(st); });
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
    r.reset();  // joins the worker threads (unless a borrowed array still holds the reader)
  }
  bool closed() const { return !reader_; }

private:
  // The batch's memory, owned by the array about to wrap it: the ring buffer
  // itself, the reader going on in a pooled one, or a pooled copy.
  PooledBuffer* owned_buffer(l3::Reader& r, const l3::Batch& b) {
    if (handover_) return new PooledBuffer{pool_, r.detach()};
    PooledBuffer* buf = take_pooled_buffer(pool_);
    std::memcpy(buf->data, b.data, b.bytes);
    return buf;
  }
  std::shared_ptr<l3::Reader> reader() {
    if (!reader_) l3::throw_error(l3::errc::invalid_argument, "the loader is closed");
    return reader_;
  }
  std::mutex mu_;
  std::shared_ptr<l3::Reader> reader_;
  std::shared_ptr<BufferPool> pool_;
  bool copy_ = true;
  bool handover_ = false;
};

// The C++ reader driven by a C++ loop (no Python per batch): the baseline of
// bench/bench_python.py for the bindings' overhead. Same options as a Loader;
// touches one element per batch like the Python consumer does.
nb::dict drain(const std::string& path, l3::ReaderOptions opt, const ReaderSetup& setup, std::uint64_t epochs,
               std::uint64_t warmup) {
  select_backend(opt, setup.device, setup.emulated_gpu);
  std::uint64_t images = 0;
  double seconds = 0, sink = 0;
  std::string metrics;
  {
    nb::gil_scoped_release release;
    l3::DatasetOptions dopt;
    dopt.verify_shard_hashes = setup.verify_shard_hashes;
    l3::Reader r = l3::Reader::open(path, std::move(opt), dopt);
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
  m.def("_drain", &drain, "path"_a, "options"_a, "setup"_a, "epochs"_a, "warmup"_a);

  nb::class_<ReaderSetup>(m, "_ReaderSetup")
      .def(nb::init<>())
      .def_rw("verify_shard_hashes", &ReaderSetup::verify_shard_hashes)
      .def_rw("copy", &ReaderSetup::copy)
      .def_rw("device", &ReaderSetup::device)
      .def_rw("emulated_gpu", &ReaderSetup::emulated_gpu);

  nb::class_<PyReader>(m, "_Reader")
      .def(nb::init<const std::string&, l3::ReaderOptions, const ReaderSetup&>(), "path"_a, "options"_a, "setup"_a)
      .def("next", &PyReader::next, "streams"_a = StreamList{})
      .def("release", &PyReader::release, "streams"_a)
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
