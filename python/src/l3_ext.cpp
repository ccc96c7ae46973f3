// l3._l3: the nanobind extension behind the `l3` Python package.
//
// Thin bindings over the C++ libraries: codec (encode / decode / info),
// dataset access, shard writing, image file loading and the streaming reader.
// The Python layer (python/l3/__init__.py) adds argument checking, keyword
// options and the Batch / Loader classes.
//
// Conventions:
//   - every long call (encode, decode, file I/O, Reader::next) runs with the
//     GIL released; arguments it reads stay referenced by the caller's frame;
//   - arrays are returned with an owner (a capsule) that frees their memory,
//     so numpy, torch (DLPack) and the caller share one buffer, no copies;
//   - l3::Error becomes a Python exception chosen by its errc (see translate()).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "l3/codec.hpp"
#include "l3/convert.hpp"
#include "l3/dataset.hpp"
#include "l3/error.hpp"
#include "l3/image_io.hpp"
#include "l3/reader.hpp"
#include "l3/reader_backend_cuda.hpp"
#ifdef L3_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif
#include "l3/shard.hpp"
#include "l3/version.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

PyObject* g_data_error = nullptr;  // l3.DataError (a ValueError)

// ---- errors --------------------------------------------------------------------

void set_python_error(const l3::Error& e) {
  const l3::errc c = e.code();
  PyObject* type = PyExc_RuntimeError;
  if (c == l3::errc::out_of_range) {
    type = PyExc_IndexError;
  } else if (l3::is_caller_error(c)) {
    type = PyExc_ValueError;
  } else if (l3::is_data_error(c)) {
    type = g_data_error ? g_data_error : PyExc_ValueError;
  } else if (c == l3::errc::io_error) {
    type = PyExc_OSError;
  } else if (c == l3::errc::out_of_memory) {
    type = PyExc_MemoryError;
  }
  PyErr_SetString(type, e.what());
}

// Runs f with the GIL released; an l3::Error thrown inside is rethrown with
// `context` prepended ("dataset /d record 7: corrupt tile: ...").
template <class F>
auto without_gil(F&& f) {
  nb::gil_scoped_release release;
  return f();
}

using l3::with_context;

// ---- buffers owned by Python objects -------------------------------------------

// A heap buffer (64-byte aligned) handed to Python through a capsule.
struct HostBuffer {
  void* data = nullptr;
  std::size_t bytes = 0;
};

void free_host_buffer(void* p) noexcept {
  auto* b = static_cast<HostBuffer*>(p);
  ::operator delete(b->data, std::align_val_t{64});
  delete b;
}

HostBuffer* new_host_buffer(std::size_t bytes) {
  auto* b = new HostBuffer;
  try {
    b->data = ::operator new(std::max<std::size_t>(bytes, 1), std::align_val_t{64});
  } catch (...) {
    delete b;
    throw;
  }
  b->bytes = bytes;
  return b;
}

// A pool of equal-size batch buffers: a buffer goes back to the pool when the
// last Python array using it is released, so steady-state iteration neither
// allocates nor page-faults. The pool is shared by the buffers (shared_ptr),
// so it outlives the Loader while arrays are alive.
struct BufferPool {
  std::mutex m;
  std::vector<void*> free;
  std::size_t bytes = 0;
  std::size_t max_free = 8;
  ~BufferPool() {
    for (void* p : free) ::operator delete(p, std::align_val_t{64});
  }
};

struct PooledBuffer {
  std::shared_ptr<BufferPool> pool;
  void* data = nullptr;
};

void free_pooled_buffer(void* p) noexcept {
  auto* b = static_cast<PooledBuffer*>(p);
  {
    std::lock_guard lock(b->pool->m);
    if (b->pool->free.size() < b->pool->max_free) {
      b->pool->free.push_back(b->data);
      b->data = nullptr;
    }
  }
  if (b->data) ::operator delete(b->data, std::align_val_t{64});
  delete b;
}

PooledBuffer* take_pooled_buffer(const std::shared_ptr<BufferPool>& pool) {
  auto* b = new PooledBuffer{pool, nullptr};
  {
    std::lock_guard lock(pool->m);
    if (!pool->free.empty()) {
      b->data = pool->free.back();
      pool->free.pop_back();
    }
  }
  if (!b->data) {
    try {
      b->data = ::operator new(std::max<std::size_t>(pool->bytes, 1), std::align_val_t{64});
    } catch (...) {
      delete b;
      throw;
    }
  }
  return b;
}

using ByteArray = nb::ndarray<const std::uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using U8Array = nb::ndarray<nb::numpy, std::uint8_t>;

nb::ndarray<nb::numpy, std::uint8_t> owned_image(std::uint32_t h, std::uint32_t w, std::uint32_t c,
                                                 HostBuffer* buf) {
  nb::capsule owner(buf, free_host_buffer);
  const std::size_t shape[3] = {h, w, c};
  return nb::ndarray<nb::numpy, std::uint8_t>(buf->data, 3, shape, owner);
}

template <class T>
nb::ndarray<nb::numpy, T> owned_vector(const T* src, std::size_t n) {
  HostBuffer* buf = new_host_buffer(n * sizeof(T));
  if (n) std::memcpy(buf->data, src, n * sizeof(T));
  nb::capsule owner(buf, free_host_buffer);
  const std::size_t shape[1] = {n};
  return nb::ndarray<nb::numpy, T>(buf->data, 1, shape, owner);
}

std::span<const std::uint8_t> as_span(const nb::bytes& b) {
  return {reinterpret_cast<const std::uint8_t*>(b.c_str()), b.size()};
}

// ---- codec -----------------------------------------------------------------------

// image: a C-contiguous uint8 array (H, W, C) checked by the Python layer.
nb::bytes encode(nb::ndarray<const std::uint8_t, nb::ndim<3>, nb::c_contig, nb::device::cpu> image,
                 std::uint32_t tile_width, std::uint32_t tile_height, int effort, unsigned threads) {
  auto shape_u32 = [](std::size_t v, const char* what) {
    if (v > 0xffffffffu) l3::throw_error(l3::errc::limit_exceeded, std::string(what) + " too large");
    return static_cast<std::uint32_t>(v);
  };
  l3::ImageView view{image.data(), shape_u32(image.shape(1), "width"), shape_u32(image.shape(0), "height"),
                     shape_u32(image.shape(2), "channels"), 0};
  l3::EncodeOptions opt;
  opt.tile_width = tile_width;
  opt.tile_height = tile_height;
  opt.effort = effort;
  opt.threads = threads;
  std::vector<std::uint8_t> out = without_gil([&] { return l3::encode(view, opt); });
  return nb::bytes(reinterpret_cast<const char*>(out.data()), out.size());
}

nb::dict info_dict(const l3::ImageInfo& i) {
  nb::dict d;
  d["width"] = i.width;
  d["height"] = i.height;
  d["channels"] = i.channels;
  d["bit_depth"] = i.bit_depth;
  d["tile_width"] = i.tile_width;
  d["tile_height"] = i.tile_height;
  d["tiles_x"] = i.tiles_x;
  d["tiles_y"] = i.tiles_y;
  d["encoded_size"] = i.encoded_size;
  d["decoded_size"] = i.decoded_size();
  return d;
}

nb::dict info(nb::bytes data) { return info_dict(l3::read_info(as_span(data))); }

// channels 0: as stored; 1 or 3: by the loader's channel rule (l3::convert_channels).
U8Array decode_span(std::span<const std::uint8_t> data, unsigned threads, bool verify, std::uint32_t channels = 0) {
  l3::DecodeOptions opt;
  opt.threads = threads;
  opt.verify_checksum = verify;
  const l3::ImageInfo i = l3::read_info(data, opt.limits);
  if (channels == i.channels) channels = 0;
  if (channels != 0) l3::check_output_channels(i.channels, channels);
  const std::size_t out_bytes = channels == 0 ? i.decoded_size() : std::size_t{i.width} * i.height * channels;
  HostBuffer* buf = new_host_buffer(out_bytes);
  try {
    without_gil([&] {
      auto* out = static_cast<std::uint8_t*>(buf->data);
      if (channels == 0) {
        l3::decode(data, l3::MutableImageView{out, i.width, i.height, i.channels, 0}, opt);
        return;
      }
      std::vector<std::uint8_t> stored = l3::decode(data, nullptr, opt);
      l3::convert_channels(l3::ImageView{stored.data(), i.width, i.height, i.channels, 0}, channels, out);
    });
  } catch (...) {
    free_host_buffer(buf);
    throw;
  }
  return owned_image(i.height, i.width, channels == 0 ? i.channels : channels, buf);
}

U8Array decode(nb::bytes data, unsigned threads, bool verify) { return decode_span(as_span(data), threads, verify); }

U8Array decode_region(nb::bytes data, std::uint32_t x, std::uint32_t y, std::uint32_t w, std::uint32_t h,
                      unsigned threads, bool verify) {
  const auto span = as_span(data);
  l3::DecodeOptions opt;
  opt.threads = threads;
  opt.verify_checksum = verify;
  const l3::ImageInfo i = l3::read_info(span, opt.limits);
  HostBuffer* buf = new_host_buffer(std::size_t{w} * h * i.channels);
  try {
    without_gil([&] {
      l3::decode_region(span, l3::Rect{x, y, w, h},
                        l3::MutableImageView{static_cast<std::uint8_t*>(buf->data), w, h, i.channels, 0}, opt);
    });
  } catch (...) {
    free_host_buffer(buf);
    throw;
  }
  return owned_image(h, w, i.channels, buf);
}

// ---- image files -------------------------------------------------------------------

U8Array image_to_array(l3::Image&& img) {
  HostBuffer* buf = new_host_buffer(img.pixels.size());
  std::memcpy(buf->data, img.pixels.data(), img.pixels.size());
  return owned_image(img.height, img.width, img.channels, buf);
}

U8Array load_image(const std::string& path) {
  l3::Image img = without_gil([&] { return l3::load_image(path); });
  return image_to_array(std::move(img));
}

U8Array decode_image_bytes(nb::bytes data) {
  l3::Image img = without_gil([&] { return l3::decode_image_bytes(as_span(data)); });
  return image_to_array(std::move(img));
}

// PNG / JPEG / PNM file bytes -> .l3i bytes, without a round trip through Python.
nb::bytes encode_file(const std::string& path, std::uint32_t tile_width, std::uint32_t tile_height, int effort,
                      unsigned threads) {
  std::vector<std::uint8_t> out = without_gil([&] {
    l3::Image img = l3::load_image(path);
    l3::EncodeOptions opt;
    opt.tile_width = tile_width;
    opt.tile_height = tile_height;
    opt.effort = effort;
    opt.threads = threads;
    return l3::encode(img.view(), opt);
  });
  return nb::bytes(reinterpret_cast<const char*>(out.data()), out.size());
}

// ---- dataset -------------------------------------------------------------------------

class PyDataset {
public:
  PyDataset(const std::string& path, bool verify_shard_hashes) {
    l3::DatasetOptions opt;
    opt.verify_shard_hashes = verify_shard_hashes;
    ds_ = std::make_shared<const l3::Dataset>(without_gil([&] { return l3::Dataset::open(path, opt); }));
  }
  std::uint64_t size() const { return ds_->size(); }
  std::vector<std::string> classes() const { return ds_->class_names(); }
  std::string directory() const { return ds_->directory().string(); }
  std::size_t shard_count() const { return ds_->shard_count(); }

  std::string context(std::uint64_t i) const {
    return "dataset " + ds_->directory().string() + ", record " + std::to_string(i) + " (" + ds_->describe(i) + ")";
  }

  // verify: check the payload checksum (Verify::yes reads and hashes the payload).
  l3::RecordView record(std::uint64_t i, l3::Verify verify = l3::Verify::yes) const {
    try {
      return without_gil([&] { return ds_->record(i, verify); });
    } catch (const l3::Error& e) {
      throw with_context(e, context(i));
    }
  }

  // Label, key and metadata live in the shard index (checked on open): no payload read.
  std::int64_t label(std::uint64_t i) const { return record(i, l3::Verify::no).label; }
  std::string key(std::uint64_t i) const { return std::string(record(i, l3::Verify::no).key); }
  nb::bytes payload(std::uint64_t i) const {
    const l3::RecordView r = record(i);
    return nb::bytes(reinterpret_cast<const char*>(r.payload.data()), r.payload.size());
  }
  nb::bytes metadata(std::uint64_t i) const {
    const l3::RecordView r = record(i, l3::Verify::no);
    return nb::bytes(reinterpret_cast<const char*>(r.metadata.data()), r.metadata.size());
  }
  std::vector<std::string> keys() const {
    std::vector<std::string> out;
    out.reserve(ds_->size());
    for (std::uint64_t i = 0; i < ds_->size(); ++i) out.emplace_back(record(i, l3::Verify::no).key);
    return out;
  }
  std::vector<std::int64_t> labels() const {
    std::vector<std::int64_t> out;
    out.reserve(ds_->size());
    for (std::uint64_t i = 0; i < ds_->size(); ++i) out.push_back(record(i, l3::Verify::no).label);
    return out;
  }
  nb::tuple get(std::uint64_t i, unsigned threads, std::uint32_t channels) const {
    const l3::RecordView r = record(i);
    try {
      // The record's checksum was verified by record(); the stream's own is skipped.
      U8Array img = decode_span(r.payload, threads, false, channels);
      return nb::make_tuple(img, r.label);
    } catch (const l3::Error& e) {
      throw with_context(e, context(i));
    }
  }
  void verify_all() const {
    without_gil([&] {
      for (std::size_t k = 0; k < ds_->shard_count(); ++k) ds_->shard(k).verify_all();
    });
  }

private:
  std::shared_ptr<const l3::Dataset> ds_;
};

// ---- shard writing -------------------------------------------------------------------

class PyShardWriter {
public:
  explicit PyShardWriter(const std::string& path) : w_(std::make_unique<l3::ShardWriter>(path)) {}
  // Calls from several Python threads are serialised (mu_, taken without the GIL).
  std::uint64_t append(nb::bytes payload, std::int64_t label, const std::string& key, nb::bytes metadata) {
    nb::gil_scoped_release release;
    std::lock_guard lock(mu_);
    return writer().append(as_span(payload), label, key, as_span(metadata));
  }
  nb::dict finalize() {
    l3::ShardSummary s;
    {
      nb::gil_scoped_release release;
      std::lock_guard lock(mu_);
      s = writer().finalize();
      w_.reset();
    }
    nb::dict d;
    d["path"] = s.path.string();
    d["file"] = s.path.filename().string();
    d["records"] = s.records;
    d["bytes"] = s.bytes;
    d["file_hash"] = s.file_hash;
    return d;
  }
  void abort() {  // removes the temporary file
    nb::gil_scoped_release release;
    std::lock_guard lock(mu_);
    w_.reset();
  }
  std::uint64_t records() const { return w_ ? w_->records() : 0; }
  std::uint64_t bytes_written() const { return w_ ? w_->bytes_written() : 0; }
  bool closed() const { return !w_; }

private:
  l3::ShardWriter& writer() {
    if (!w_) l3::throw_error(l3::errc::invalid_argument, "shard writer is closed (finalized or aborted)");
    return *w_;
  }
  std::mutex mu_;
  std::unique_ptr<l3::ShardWriter> w_;
};

// shards: list of dicts {file, records, bytes, file_hash}; image_stats/extra: JSON text.
void write_manifest(const std::string& dir, const nb::list& shards, const std::vector<std::string>& classes,
                    const std::string& image_stats_json, const std::string& extra_json) {
  l3::Manifest m;
  for (nb::handle h : shards) {
    nb::dict d = nb::cast<nb::dict>(h);
    l3::ManifestShard s;
    s.file = nb::cast<std::string>(d["file"]);
    s.records = nb::cast<std::uint64_t>(d["records"]);
    s.bytes = nb::cast<std::uint64_t>(d["bytes"]);
    s.file_hash = nb::cast<std::uint64_t>(d["file_hash"]);
    m.shards.push_back(std::move(s));
  }
  m.classes = classes;
  try {
    m.image_stats = nlohmann::json::parse(image_stats_json);
    m.extra = nlohmann::json::parse(extra_json);
  } catch (const nlohmann::json::exception& e) {
    l3::throw_error(l3::errc::invalid_argument, std::string("manifest JSON: ") + e.what());
  }
  without_gil([&] { l3::write_manifest_atomic(dir, m); });
}

l3::SourceLayout layout_of(const std::string& name) {
  if (name == "auto") return l3::SourceLayout::automatic;
  if (name == "classes") return l3::SourceLayout::classes;
  if (name == "flat") return l3::SourceLayout::flat;
  l3::throw_error(l3::errc::invalid_argument, "layout must be 'auto', 'classes' or 'flat', got '" + name + "'");
}

// Options past the first seven come from l3.convert's keyword arguments (python/l3/__init__.py).
nb::dict convert(const std::string& src, const std::string& out, std::uint64_t shard_size, unsigned threads,
                 bool strict, bool resume, std::int64_t shuffle_seed, std::uint64_t max_pixels,
                 const std::string& layout, const std::string& base, bool allow_empty, bool convert_16bit,
                 bool strict_jpeg, std::uint32_t part_index, std::uint32_t part_count, bool shared_output) {
  l3::ConvertOptions opt;
  opt.part_index = part_index;
  opt.part_count = part_count;
  opt.shared_output = shared_output;
  opt.shard_size = shard_size;
  opt.threads = threads;
  opt.strict = strict;
  opt.resume = resume;
  if (shuffle_seed >= 0) opt.shuffle_seed = static_cast<std::uint64_t>(shuffle_seed);
  opt.max_pixels = max_pixels;
  opt.scan.layout = layout_of(layout);
  opt.scan.list_base = base;
  opt.allow_empty = allow_empty;
  opt.convert_16bit = convert_16bit;
  opt.strict_jpeg = strict_jpeg;
  const l3::ConvertReport r = without_gil([&] { return l3::convert_dataset(src, out, opt); });
  nb::dict d;
  d["images"] = r.images;
  d["skipped"] = r.skipped;
  d["resumed_records"] = r.resumed_records;
  d["shards"] = r.shards;
  d["bytes_in"] = r.bytes_in;
  d["bytes_out"] = r.bytes_out;
  d["seconds"] = r.seconds;
  d["hidden"] = r.hidden;
  nb::list skipped;
  for (const l3::SkippedInput& s : r.skipped_inputs) {
    nb::dict entry;
    entry["path"] = s.key;
    entry["reason"] = s.reason;
    entry["detail"] = s.detail;
    skipped.append(entry);
  }
  d["skipped_inputs"] = skipped;
  return d;
}

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

nb::dlpack::dtype dl_dtype(l3::DType d) {
  switch (d) {
    case l3::DType::uint8: return nb::dtype<std::uint8_t>();
    case l3::DType::float16: return nb::dlpack::dtype{static_cast<std::uint8_t>(nb::dlpack::dtype_code::Float), 16, 1};
    case l3::DType::float32: break;
  }
  return nb::dtype<float>();
}

// Owner of a borrowed batch array (copy=False, and every device batch): keeps
// the reader (and so its ring of buffers, host or device memory) alive; the
// bytes are overwritten by a later batch.
struct ReaderRef {
  std::shared_ptr<l3::Reader> reader;
};
void free_reader_ref(void* p) noexcept { delete static_cast<ReaderRef*>(p); }

// Consumer streams of a device batch, as the Python layer collects them from
// __dlpack__(stream=...): cudaStream_t values, 0 for the legacy default stream.
using StreamList = std::vector<std::uintptr_t>;

void* as_stream(std::uintptr_t s) noexcept { return reinterpret_cast<void*>(s); }

// Blocks until the work enqueued so far on each stream has run (the GIL is
// released by the caller). Without CUDA there are no device batches, so no
// consumer streams either.
void sync_streams(const StreamList& streams) {
#ifdef L3_HAVE_CUDA
  for (std::uintptr_t s : streams) {
    const cudaError_t e = cudaStreamSynchronize(static_cast<cudaStream_t>(as_stream(s)));
    if (e != cudaSuccess)
      l3::throw_error(l3::errc::device_error, std::string("cudaStreamSynchronize: ") + cudaGetErrorString(e));
  }
#else
  (void)streams;
#endif
}

// A batch in device memory (l3.DeviceArray wraps it): capsule() returns a new
// DLPack capsule (kDLCUDA, the batch's device) on every call; each capsule
// keeps the reader, and so the device buffer, allocated until the consumer's
// tensor is freed. Zero copy: the capsule points at the reader's buffer.
class PyDeviceArray {
public:
  PyDeviceArray(nb::ndarray<> array, const l3::Batch& b, const std::size_t* shape)
      : array_(std::move(array)),
        ptr_(reinterpret_cast<std::uintptr_t>(b.data)),
        device_(b.device),
        dtype_(l3::dtype_name(b.dtype)),
        shape_(nb::make_tuple(shape[0], shape[1], shape[2], shape[3])),
        nbytes_(b.bytes) {}
  nb::ndarray<> capsule() const { return array_; }
  std::uintptr_t ptr() const { return ptr_; }
  int device() const { return device_; }
  std::string dtype() const { return dtype_; }
  nb::tuple shape() const { return shape_; }
  std::size_t nbytes() const { return nbytes_; }

private:
  nb::ndarray<> array_;
  std::uintptr_t ptr_ = 0;
  int device_ = 0;
  std::string dtype_;
  nb::tuple shape_;
  std::size_t nbytes_ = 0;
};

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
    std::size_t shape[4] = {meta.size, meta.channels, meta.height, meta.width};
    if (meta.layout == l3::Layout::hwc) {
      shape[1] = meta.height;
      shape[2] = meta.width;
      shape[3] = meta.channels;
    }
    auto labels_arr = owned_vector<std::int64_t>(labels.data(), labels.size());
    auto records_arr = owned_vector<std::uint64_t>(records.data(), records.size());
    nb::object data;
    if (meta.device >= 0) {
      nb::capsule owner(new ReaderRef{r}, free_reader_ref);
      nb::ndarray<> arr(meta.data, 4, shape, owner, nullptr, dl_dtype(meta.dtype), nb::device::cuda::value,
                        meta.device);
      data = nb::cast(PyDeviceArray(std::move(arr), meta, shape), nb::rv_policy::move);
    } else {
      nb::capsule owner;
      void* ptr = meta.data;
      if (copy_) {
        owner = nb::capsule(buf, free_pooled_buffer);
        ptr = buf->data;
      } else {
        owner = nb::capsule(new ReaderRef{r}, free_reader_ref);
      }
      nb::ndarray<nb::numpy> arr(ptr, 4, shape, owner, nullptr, dl_dtype(meta.dtype), nb::device::cpu::value);
      data = nb::cast(arr);
    }
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

bool cuda_available() {
#ifdef L3_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

}  // namespace

NB_MODULE(_l3, m) {
  m.doc() = "l3: lossless tile-parallel image codec, sharded datasets and a streaming reader (C++ bindings)";

  g_data_error = PyErr_NewExceptionWithDoc(
      "l3.DataError", "The bytes are not a valid l3 stream, shard or manifest (a ValueError).", PyExc_ValueError,
      nullptr);
  m.attr("DataError") = nb::handle(g_data_error);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const l3::Error& e) {
      set_python_error(e);
    } catch (const std::filesystem::filesystem_error& e) {
      PyErr_SetString(PyExc_OSError, e.what());
    }
  });

  m.attr("built_with_cuda") = cuda_available();
  m.def("version", [] { return std::string(l3::version()); }, "The l3 libraries' version (l3::version()).");
  m.def("cuda_device_count", [] {
#ifdef L3_HAVE_CUDA
    return l3::cuda_device_count();
#else
    return 0;
#endif
  }, "CUDA devices usable by the loader (0 when built without CUDA)");

  m.def("encode", &encode, "image"_a, "tile_width"_a = 0, "tile_height"_a = 0, "effort"_a = 1, "threads"_a = 1);
  m.def("decode", &decode, "data"_a, "threads"_a = 1, "verify_checksum"_a = true);
  m.def("decode_region", &decode_region, "data"_a, "x"_a, "y"_a, "width"_a, "height"_a, "threads"_a = 1,
        "verify_checksum"_a = true);
  m.def("info", &info, "data"_a);
  m.def("load_image", &load_image, "path"_a);
  m.def("decode_image_bytes", &decode_image_bytes, "data"_a);
  m.def("encode_file", &encode_file, "path"_a, "tile_width"_a = 0, "tile_height"_a = 0, "effort"_a = 1,
        "threads"_a = 1);
  m.def("write_manifest", &write_manifest, "dir"_a, "shards"_a, "classes"_a, "image_stats_json"_a = "{}",
        "extra_json"_a = "{}");
  m.def("convert", &convert, "src"_a, "out"_a, "shard_size"_a, "threads"_a, "strict"_a, "resume"_a,
        "shuffle_seed"_a, "max_pixels"_a, "layout"_a, "base"_a, "allow_empty"_a, "convert_16bit"_a,
        "strict_jpeg"_a, "part_index"_a = 0, "part_count"_a = 1, "shared_output"_a = false);
  m.def("commit_parts", [](const std::string& out) { return without_gil([&] { return l3::commit_parts(out); }); },
        "out"_a);

  m.def("_drain", &drain, "path"_a, "config"_a, "epochs"_a, "warmup"_a);

  nb::class_<PyDataset>(m, "_Dataset")
      .def(nb::init<const std::string&, bool>(), "path"_a, "verify_shard_hashes"_a = false)
      .def("__len__", &PyDataset::size)
      .def("get", &PyDataset::get, "i"_a, "threads"_a = 1, "channels"_a = 0)
      .def("label", &PyDataset::label)
      .def("key", &PyDataset::key)
      .def("payload", &PyDataset::payload)
      .def("metadata", &PyDataset::metadata)
      .def("keys", &PyDataset::keys)
      .def("labels", &PyDataset::labels)
      .def("verify_all", &PyDataset::verify_all)
      .def_prop_ro("classes", &PyDataset::classes)
      .def_prop_ro("directory", &PyDataset::directory)
      .def_prop_ro("shard_count", &PyDataset::shard_count);

  nb::class_<PyShardWriter>(m, "_ShardWriter")
      .def(nb::init<const std::string&>(), "path"_a)
      .def("append", &PyShardWriter::append, "payload"_a, "label"_a, "key"_a, "metadata"_a)
      .def("finalize", &PyShardWriter::finalize)
      .def("abort", &PyShardWriter::abort)
      .def_prop_ro("records", &PyShardWriter::records)
      .def_prop_ro("bytes_written", &PyShardWriter::bytes_written)
      .def_prop_ro("closed", &PyShardWriter::closed);

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

  nb::class_<PyDeviceArray>(m, "_DeviceArray")
      .def("capsule", &PyDeviceArray::capsule, "A new DLPack capsule of the batch (kDLCUDA; no copy)")
      .def_prop_ro("ptr", &PyDeviceArray::ptr)
      .def_prop_ro("device", &PyDeviceArray::device)
      .def_prop_ro("dtype", &PyDeviceArray::dtype)
      .def_prop_ro("shape", &PyDeviceArray::shape)
      .def_prop_ro("nbytes", &PyDeviceArray::nbytes);

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
