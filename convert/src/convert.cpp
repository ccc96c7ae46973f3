// l3pack convert: source -> planned order -> parallel encode -> ordered shards
// -> manifest (l3/convert/convert.hpp explains why the output is deterministic).

#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>

#include "l3/convert/convert.hpp"
#include "l3/format/dataset.hpp"
#include "l3/common/file_io.hpp"
#include "l3/imageio/image_io.hpp"
#include "l3/storage/storage.hpp"
#include "l3/common/text.hpp"
#include "convert_parts.hpp"
#include "ordered_pipeline.hpp"

namespace l3 {
namespace fs = std::filesystem;
using nlohmann::json;

// The plan and OUT of a run (convert_parts.hpp).
using convert_detail::Plan;
using convert_detail::make_plan;
using convert_detail::order_fingerprint;
using convert_detail::skipped_json;
using convert_detail::shard_name;
using convert_detail::OutputNames;
using convert_detail::output_names;
using convert_detail::written_by_run;
using convert_detail::OutputLock;
using convert_detail::Progress;
using convert_detail::file_size_or_zero;
using convert_detail::write_text;
using convert_detail::prepare_output;
using convert_detail::xxh3;

namespace {

// ---- converting ----

struct EncodedImage {
  std::vector<std::uint8_t> l3i;
  std::uint32_t width = 0, height = 0, channels = 0;
  std::uint64_t source_bytes = 0;
  errc error = errc::ok;
  std::string reason;  // Error::what() without the errc prefix
};

// What an l3::Error says after its "<errc name>: " prefix (the skip reason is the errc name).
std::string detail_of(const Error& e) {
  std::string text = e.what();
  const std::string prefix = std::string(errc_name(e.code())) + ": ";
  return text.starts_with(prefix) ? text.substr(prefix.size()) : text;
}

LoadOptions load_options(const ConvertOptions& options) {
  LoadOptions load;
  load.limits.max_pixels = options.max_pixels;
  load.strict_jpeg = options.strict_jpeg;
  load.convert_16bit = options.convert_16bit;
  return load;
}

EncodedImage encode_file(const SourceImage& source, const EncodeOptions& encode_options, const LoadOptions& load) {
  EncodedImage result;
  try {
    std::vector<std::uint8_t> bytes = read_file(source.file);
    result.source_bytes = bytes.size();
    Image image = decode_image_bytes(bytes, load);
    result.width = image.width;
    result.height = image.height;
    result.channels = image.channels;
    result.l3i = encode(image.view(), encode_options);
  } catch (const Error& e) {
    result.error = e.code();
    result.reason = detail_of(e);
  } catch (const std::bad_alloc&) {
    result.error = errc::out_of_memory;
    result.reason = "out of memory";
  } catch (const std::exception& e) {
    result.error = errc::io_error;
    result.reason = e.what();
  }
  return result;
}

unsigned worker_count(unsigned requested) {
  if (requested != 0) return requested;
  unsigned hardware = std::thread::hardware_concurrency();
  return hardware == 0 ? 1 : hardware;
}

std::string skipped_line(const SkippedInput& s) { return skipped_json(s).dump() + "\n"; }

// OUT/skipped.jsonl.partial: each skip appended (and flushed) as it happens, so
// --resume after a crash still knows why the inputs in the kept shards were skipped.
class SkipLog {
public:
  SkipLog(const fs::path& file, const std::vector<SkippedInput>& earlier) : file_(file) {
    std::string text;
    for (const SkippedInput& s : earlier) text += skipped_line(s);
    write_file_atomically(file_, {reinterpret_cast<const std::uint8_t*>(text.data()), text.size()});
    out_ = std::fopen(file_.c_str(), "ab");
    if (!out_) throw_error(errc::io_error, file_.string() + ": cannot open: " + std::strerror(errno));
  }
  ~SkipLog() {
    if (out_) std::fclose(out_);
  }
  SkipLog(const SkipLog&) = delete;
  SkipLog& operator=(const SkipLog&) = delete;
  void add(const SkippedInput& s) {
    const std::string line = skipped_line(s);
    if (std::fwrite(line.data(), 1, line.size(), out_) != line.size() || std::fflush(out_) != 0)
      throw_error(errc::io_error, file_.string() + ": cannot write: " + std::strerror(errno));
  }

private:
  fs::path file_;
  std::FILE* out_ = nullptr;
};

// Where finished shards and the manifest go besides the local folder: an
// object store (spec/format.md §8.5.5). Null for a local conversion.
class Publisher {
public:
  virtual ~Publisher() = default;
  virtual void upload(const fs::path& file) = 0;      // a finished file: a shard, or the skip list
  virtual void manifest(const std::string& name, const Manifest& manifest) = 0;  // last, once every shard is up
};

class Converter {
public:
  Converter(const fs::path& out, const Plan& plan, const ConvertOptions& options, const ConvertObserver& observer,
            Progress progress, Publisher* publisher = nullptr)
      : out_(out), plan_(plan), options_(options), observer_(observer), p_(std::move(progress)),
        names_(output_names(options)), log_(out / (names_.skipped + ".partial"), p_.skipped),
        publisher_(publisher) {}

  ConvertReport run() {
    EncodeOptions encode_options = options_.encode;
    encode_options.threads = 1;  // parallel over images instead
    const LoadOptions load = load_options(options_);
    const std::size_t first = p_.next_item, end = plan_.items.size();
    ConvertReport report;
    report.resumed_records = p_.records;
    detail::OrderedPipeline<EncodedImage> pipeline(
        first, end, worker_count(options_.threads),
        [&](std::size_t i) { return encode_file(plan_.items[i], encode_options, load); });
    for (std::size_t i = first; i < end; ++i) {
      add(plan_.items[i], pipeline.take());
      report_progress(i + 1);
    }
    if (writer_) finish_shard();
    report.skipped_inputs = all_skipped();
    commit(report.skipped_inputs);
    report.images = p_.records;
    report.skipped = report.skipped_inputs.size();
    report.hidden = plan_.hidden;
    report.shards = p_.shards.size();
    report.bytes_in = p_.bytes_in;
    report.bytes_out = p_.bytes_out;
    report.seconds = elapsed();
    return report;
  }

private:
  void add(const SourceImage& source, EncodedImage encoded) {
    if (encoded.error == errc::ok) {
      if (!writer_) writer_.emplace(out_ / shard_name(options_, p_.shards.size()));
      try {
        writer_->append(encoded.l3i, source.label, source.key);
      } catch (const Error& e) {
        if (e.code() == errc::io_error) throw;
        encoded.error = e.code();  // a key the format cannot store (length)
        encoded.reason = "key: " + detail_of(e);
      }
    }
    bytes_in_now_ += encoded.source_bytes;
    if (encoded.error != errc::ok) return skip(source, encoded);
    p_.bytes_in += encoded.source_bytes;
    p_.stats.add(encoded.width, encoded.height, encoded.channels);
    ++p_.records;
    if (writer_->bytes_written() >= options_.shard_size) finish_shard();
  }

  void skip(const SourceImage& source, const EncodedImage& encoded) {
    SkippedInput entry{source.key, errc_name(encoded.error), encoded.reason};
    p_.skipped.push_back(entry);
    log_.add(entry);
    if (observer_.skipped && !options_.strict) observer_.skipped(source.file, entry.reason + ": " + entry.detail);
    // what() is "<errc name>: <detail>": the reason is the errc name, so it is not repeated.
    if (options_.strict) throw InputError(encoded.error, source.file, entry.detail);
  }

  // The scan's skips and the decode skips, in key order (plan order for a list file).
  std::vector<SkippedInput> all_skipped() const {
    std::vector<SkippedInput> all = plan_.scan_skipped;
    all.insert(all.end(), p_.skipped.begin(), p_.skipped.end());
    std::stable_sort(all.begin(), all.end(), [](const SkippedInput& a, const SkippedInput& b) { return a.key < b.key; });
    return all;
  }

  void finish_shard() {
    ShardSummary summary = writer_->finalize();
    writer_.reset();
    if (publisher_) publisher_->upload(summary.path);
    bytes_out_now_ += summary.bytes;
    p_.bytes_out += summary.bytes;
    p_.shards.push_back(manifest_entry(summary));
  }

  // OUT/skipped.jsonl, then the manifest (spec/format.md §8.4): nothing is
  // committed when no record was written, unless the caller allows it. A part
  // of a shared OUT writes its own skip list and part manifest (§8.4.1).
  void commit(const std::vector<SkippedInput>& skipped) {
    std::string text;
    for (const SkippedInput& s : skipped) text += skipped_line(s);
    write_text(out_ / names_.skipped, text);
    std::error_code ignored;
    fs::remove(out_ / (names_.skipped + ".partial"), ignored);
    if (publisher_) publisher_->upload(out_ / names_.skipped);  // before the manifest that names it
    // A part of a shared OUT may hold no record (more parts than images); the commit judges the whole.
    if (p_.records == 0 && !options_.allow_empty && !options_.shared_output)
      throw_error(errc::io_error, out_.string() + ": no input could be converted (" + std::to_string(skipped.size()) +
                                      " skipped, listed in " + kSkippedName +
                                      "); nothing committed (--allow-empty commits an empty dataset)");
    Manifest manifest;
    manifest.shards = p_.shards;
    manifest.classes = plan_.classes;
    manifest.image_stats = p_.stats.to_json();
    const json& doc = plan_.document;
    manifest.extra = {{"l3pack",
                       {{"order_fingerprint", doc["order_fingerprint"]},
                        {"order_records", doc["order_records"]},
                        {"part_first_record", doc["part_first_record"]},
                        {"options", doc["options"]},
                        {"source_kind", doc["source_kind"]},
                        {"source_bytes", p_.bytes_in},
                        {"key_escape", "percent"},
                        {"skipped", {{"file", names_.skipped}, {"count", skipped.size()}}},
                        {"hidden", plan_.hidden}}}};
    if (publisher_) publisher_->manifest(names_.manifest, manifest);
    if (options_.shared_output) {
      write_text(out_ / names_.manifest, serialize_manifest(manifest));
      return;  // the plan stays until commit_parts (a retried part resumes from it)
    }
    write_manifest_atomic(out_, manifest);
    fs::remove(out_ / kPlanName, ignored);  // the manifest is now the record of the run
  }

  void report_progress(std::size_t done) {
    if (!observer_.progress) return;
    ConvertProgress progress;
    progress.done = done;
    progress.total = plan_.items.size();
    progress.skipped = p_.skipped.size();
    progress.bytes_in = bytes_in_now_;
    progress.bytes_out = bytes_out_now_ + (writer_ ? writer_->bytes_written() : 0);
    progress.seconds = elapsed();
    observer_.progress(progress);
  }

  double elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

  const fs::path& out_;
  const Plan& plan_;
  const ConvertOptions& options_;
  const ConvertObserver& observer_;
  Progress p_;
  OutputNames names_;
  SkipLog log_;
  Publisher* publisher_ = nullptr;
  std::optional<ShardWriter> writer_;
  std::uint64_t bytes_in_now_ = 0, bytes_out_now_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// ---- converting into an object store (spec/format.md §8.5.5) ----

// Shards are written into a local staging folder exactly as a local conversion
// (so --resume and --part behave the same), each uploaded as soon as it is
// finalized (a multipart upload: the object appears only once complete), and
// manifest.json is uploaded last with If-None-Match: * (a committed dataset is
// never overwritten). The staging folder is removed after the commit.
class StorePublisher : public Publisher {
public:
  StorePublisher(const fs::path& out, const ConvertOptions& options)
      : url_(storage::parse_s3_url(out.native())), client_(storage::shared_s3_client()), options_(options) {
    for (const storage::ObjectInfo& o : client_->list(url_.bucket, url_.key("")))
      stored_.emplace_back(o.key, o.size);
  }
  bool committed() const { return size_of(kManifestName).has_value(); }
  // Nothing of this run in the store (of this part, in a shared OUT).
  bool empty() const {
    const OutputNames names = output_names(options_);
    for (const auto& [key, size] : stored_) {
      if (!options_.shared_output) return false;
      const std::string name = key.substr(std::min(key.size(), url_.key("").size()));
      if (written_by_run(name, options_) || name == names.manifest) return false;
    }
    return true;
  }
  // A kept shard (--resume) that is not in the store yet, or not whole.
  void republish(const ManifestShard& shard, const fs::path& file) {
    if (size_of(shard.file) != shard.bytes) upload(file);
  }
  void upload(const fs::path& file) override {
    client_->upload_file(url_.bucket, url_.key(file.filename().string()), file);
  }
  // The run's plan travels with its shards (spec/format.md §8.5.5): a --resume
  // on another machine, or after the staging folder is lost, starts from what
  // the store holds. (A part of a shared OUT publishes its own files: §8.4.1.)
  void plan(const fs::path& file) {
    if (!options_.shared_output) upload(file);
  }
  void forget_plan() {
    if (!options_.shared_output) client_->remove(url_.bucket, url_.key(kPlanName));
  }
  // Fills an empty staging folder from the store: the interrupted run's plan
  // and its shards (downloaded whole: resume checks them as a local run's).
  // Without a plan in the store there is nothing to take over.
  void recover_into(const fs::path& staging) {
    if (options_.shared_output || !size_of(kPlanName)) return;
    fs::create_directories(staging);
    for (const auto& [key, size] : stored_) {
      const std::string name = key.substr(key.find_last_of('/') + 1);
      if (name != kPlanName && !name.ends_with(".l3s")) continue;
      if (name != kPlanName && file_size_or_zero(staging / name) == size) continue;
      const std::vector<std::uint8_t> bytes = client_->get(url_.bucket, key);
      write_file_atomically(staging / name, bytes);
    }
  }
  // manifest.json never overwrites one (If-None-Match: *); a part manifest is
  // written again, identical, when a part is redone.
  void manifest(const std::string& name, const Manifest& manifest) override {
    const std::string text = serialize_manifest(manifest);
    client_->put(url_.bucket, url_.key(name), {reinterpret_cast<const std::uint8_t*>(text.data()), text.size()},
                 name == kManifestName);
  }

private:
  std::optional<std::uint64_t> size_of(const std::string& name) const {
    for (const auto& [key, size] : stored_)
      if (key == url_.key(name)) return size;
    return std::nullopt;
  }
  storage::S3Url url_;
  std::shared_ptr<storage::S3Client> client_;
  const ConvertOptions& options_;
  std::vector<std::pair<std::string, std::uint64_t>> stored_;
};

// OUT's staging folder: under the shard cache, named by OUT's URL (and the
// part, for a part of a shared OUT: parts may run on one machine at once).
fs::path staging_folder(const fs::path& out, const ConvertOptions& options) {
  std::string url = out.native();
  if (options.shared_output) url += "#" + part_tag(options.part_index, options.part_count);
  return storage::cache_options_from_env().dir / "convert" / hex16(xxh3({reinterpret_cast<const std::uint8_t*>(url.data()), url.size()}));
}

ConvertReport convert_into(const fs::path& out, const Plan& plan, const ConvertOptions& options,
                           const ConvertObserver& observer, StorePublisher* publisher) {
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) throw_error(errc::io_error, out.string() + ": cannot create the folder: " + ec.message());
  OutputLock lock(out, output_names(options).lock);
  Progress progress = prepare_output(out, plan, options);
  if (publisher) {
    publisher->plan(out / kPlanName);
    for (const ManifestShard& shard : progress.shards) publisher->republish(shard, out / shard.file);
  }
  return Converter(out, plan, options, observer, std::move(progress), publisher).run();
}

ConvertReport convert_to_store(const fs::path& out, const Plan& plan, const ConvertOptions& options,
                               const ConvertObserver& observer) {
  StorePublisher publisher(out, options);
  if (publisher.committed())
    throw_error(errc::invalid_argument, out.string() + ": already holds a committed dataset (manifest.json)");
  const fs::path staging = staging_folder(out, options);
  if (!options.resume && !publisher.empty())
    throw_error(errc::invalid_argument,
                out.string() + ": prefix is not empty (use --resume to continue an interrupted conversion)");
  if (!options.resume) fs::remove_all(staging);  // a stale staging folder of a run whose objects are gone
  // Resume where this machine has no staging folder: the state is the store's.
  if (options.resume && !fs::exists(staging / kPlanName)) publisher.recover_into(staging);
  ConvertReport report = convert_into(staging, plan, options, observer, &publisher);
  publisher.forget_plan();  // the manifest is now the record of the run
  std::error_code ignored;
  fs::remove_all(staging, ignored);
  return report;
}

}  // namespace

std::string part_tag(std::uint32_t index, std::uint32_t count) {
  return "part-" + std::to_string(index) + "-of-" + std::to_string(count);
}
std::string part_manifest_name(std::uint32_t index, std::uint32_t count) {
  return "manifest." + part_tag(index, count) + ".json";
}
std::string part_skipped_name(std::uint32_t index, std::uint32_t count) {
  return "skipped." + part_tag(index, count) + ".jsonl";
}
std::string part_plan_name(std::uint32_t index, std::uint32_t count) {
  return "l3pack-plan." + part_tag(index, count) + ".json";
}

void validate_convert_options(const ConvertOptions& options) {
  if (options.part_count == 0 || options.part_index >= options.part_count)
    throw_error(errc::invalid_argument, "--part i/n needs 0 <= i < n");
  if (options.shared_output && options.part_count < 2)
    throw_error(errc::invalid_argument, "--shared-out needs --part i/n with n >= 2");
  if (options.shard_size == 0) throw_error(errc::invalid_argument, "--shard-size must be at least 1 byte");
  if (options.max_pixels == 0 || options.max_pixels > Limits{}.max_pixels)
    throw_error(errc::invalid_argument, "--max-pixels must be 1.." + std::to_string(Limits{}.max_pixels) +
                                            " (the codec's limit), got " + std::to_string(options.max_pixels));
  if (options.encode.effort < 0 || options.encode.effort > 2)
    throw_error(errc::invalid_argument, "--effort must be 0, 1 or 2, got " + std::to_string(options.encode.effort));
  // The codec is the one judge of tile sizes: encode one pixel with them.
  const std::uint8_t pixel = 0;
  try {
    encode(ImageView{&pixel, 1, 1, 1, 0}, options.encode);
  } catch (const Error& e) {
    throw_error(errc::invalid_argument, "--tile-width/--tile-height: " + detail_of(e));
  }
}

ConvertReport convert_dataset(const fs::path& src, const fs::path& out, const ConvertOptions& options,
                              const ConvertObserver& observer) {
  validate_convert_options(options);
  Plan plan = make_plan(src, options);
  if (is_remote(out)) return convert_to_store(out, plan, options, observer);
  return convert_into(out, plan, options, observer, nullptr);
}

}  // namespace l3
