// Dataset bindings: random access to a converted dataset, shard and manifest
// writing, and l3pack's conversion (convert, commit_parts).
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ext.hpp"
#include "l3/convert/convert.hpp"
#include "l3/format/dataset.hpp"
#include "l3/common/error.hpp"
#include "l3/format/shard.hpp"

namespace l3py {
namespace {

using namespace nb::literals;
using l3::with_context;

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
                 bool strict_jpeg, std::uint32_t part_index, std::uint32_t part_count, bool shared_output,
                 int effort, const std::string& entropy, std::uint32_t tile_width, std::uint32_t tile_height) {
  l3::ConvertOptions opt;
  opt.encode = encode_options(tile_width, tile_height, effort, 1, entropy);  // encode.threads: unused by convert
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

}  // namespace

void bind_dataset(nb::module_& m) {
  m.def("write_manifest", &write_manifest, "dir"_a, "shards"_a, "classes"_a, "image_stats_json"_a = "{}",
        "extra_json"_a = "{}");
  m.def("convert", &convert, "src"_a, "out"_a, "shard_size"_a, "threads"_a, "strict"_a, "resume"_a,
        "shuffle_seed"_a, "max_pixels"_a, "layout"_a, "base"_a, "allow_empty"_a, "convert_16bit"_a,
        "strict_jpeg"_a, "part_index"_a = 0, "part_count"_a = 1, "shared_output"_a = false, "effort"_a = 1,
        "entropy"_a = "auto", "tile_width"_a = 0, "tile_height"_a = 0);
  m.def("commit_parts", [](const std::string& out) { return without_gil([&] { return l3::commit_parts(out); }); },
        "out"_a);

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
}

}  // namespace l3py
