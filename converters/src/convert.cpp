// l3pack convert: source -> planned order -> parallel encode -> ordered shards
// -> manifest (l3/convert.hpp explains why the output is deterministic).
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <optional>

#include "l3/convert.hpp"
#include "l3/dataset.hpp"
#include "l3/file_io.hpp"
#include "l3/image_io.hpp"
#include "l3/storage.hpp"
#include "l3/text.hpp"
#include "ordered_pipeline.hpp"

namespace l3 {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::uint64_t xxh3(std::span<const std::uint8_t> bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

// ---- the plan: what this run converts, in which order, into which shards ----

struct Plan {
  std::vector<SourceImage> items;  // this part, in record order
  std::vector<std::string> classes;
  std::vector<SkippedInput> scan_skipped;  // found by the scan (part 0 only: they belong to no part)
  std::uint64_t hidden = 0;
  json document;                   // stored as OUT/l3pack-plan.json; equal plans give equal outputs
};

const char* layout_name(SourceLayout layout) {
  switch (layout) {
    case SourceLayout::automatic: return "auto";
    case SourceLayout::classes: return "classes";
    case SourceLayout::flat: return "flat";
  }
  return "?";
}

const char* kind_name(SourceKind kind) {
  switch (kind) {
    case SourceKind::class_folders: return "class_folders";
    case SourceKind::list_file: return "list_file";
    case SourceKind::flat_folder: return "flat_folder";
  }
  return "?";
}

// XXH3 of the whole planned order (all parts): parts of one dataset share it.
std::uint64_t order_fingerprint(const std::vector<SourceImage>& order) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  for (const SourceImage& image : order) {
    std::string line = image.key;
    line += '\t';
    line += std::to_string(image.label);
    line += '\n';
    XXH3_64bits_update(state, line.data(), line.size());
  }
  std::uint64_t hash = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return hash;
}

json options_json(const ConvertOptions& o) {
  return {{"tile_width", o.encode.tile_width},
          {"tile_height", o.encode.tile_height},
          {"effort", o.encode.effort},
          {"shard_size", o.shard_size},
          {"shuffle_seed", o.shuffle_seed ? json(*o.shuffle_seed) : json()},
          {"part_index", o.part_index},
          {"part_count", o.part_count},
          {"layout", layout_name(o.scan.layout)},
          {"base", o.scan.list_base.empty() ? json() : json(escape_key(fs::absolute(o.scan.list_base).string()))},
          {"max_pixels", o.max_pixels},
          {"convert_16bit", o.convert_16bit},
          {"strict_jpeg", o.strict_jpeg}};
}

json skipped_json(const SkippedInput& s) { return {{"path", s.key}, {"reason", s.reason}, {"detail", s.detail}}; }

// --strict: an input the scan cannot convert stops the run before any work.
void refuse_scan_skips(const fs::path& src, const std::vector<SkippedInput>& skipped) {
  if (skipped.empty()) return;
  const SkippedInput& first = skipped.front();
  std::string reason = first.reason;
  if (!first.detail.empty()) reason += " (" + first.detail + ")";
  reason += "; " + std::to_string(skipped.size()) + " inputs under " + src.string() + " would be skipped";
  throw InputError(errc::invalid_argument, src / unescape_key(first.key), reason);
}

std::string count_by_reason(const std::vector<SkippedInput>& skipped) {
  std::map<std::string, std::uint64_t> counts;
  for (const SkippedInput& s : skipped) ++counts[s.reason];
  std::string text;
  for (const auto& [reason, n] : counts) text += (text.empty() ? "" : ", ") + std::to_string(n) + " " + reason;
  return text;
}

[[noreturn]] void no_images(const fs::path& src, const std::vector<SkippedInput>& skipped, std::uint64_t hidden) {
  std::string detail = src.string() + ": no images to convert";
  if (!skipped.empty()) detail += " (" + std::to_string(skipped.size()) + " skipped: " + count_by_reason(skipped) + ")";
  if (hidden != 0) detail += " (" + std::to_string(hidden) + " hidden entries excluded)";
  detail += "; --allow-empty writes an empty dataset";
  throw_error(errc::io_error, detail);
}

Plan make_plan(const fs::path& src, const ConvertOptions& options) {
  SourceSet source = scan_source(src, options.scan);
  if (options.strict) refuse_scan_skips(src, source.skipped);
  std::vector<SourceImage> order;
  if (options.shuffle_seed) {
    for (std::size_t i : seeded_permutation(source.images.size(), *options.shuffle_seed))
      order.push_back(source.images[i]);
  } else {
    order = std::move(source.images);
  }
  const std::size_t n = order.size(), parts = options.part_count;
  const std::size_t begin = n * options.part_index / parts, end = n * (options.part_index + 1) / parts;
  Plan plan;
  plan.classes = source.classes;
  plan.items.assign(order.begin() + static_cast<std::ptrdiff_t>(begin), order.begin() + static_cast<std::ptrdiff_t>(end));
  if (options.part_index == 0) {
    plan.scan_skipped = std::move(source.skipped);
    plan.hidden = source.hidden;
  }
  if (plan.items.empty() && !options.allow_empty) no_images(src, plan.scan_skipped, plan.hidden);
  // Keys, not file names: a name that is not UTF-8 cannot be JSON (its key is escaped).
  json items = json::array();
  for (const SourceImage& image : plan.items) items.push_back({image.key, image.label});
  json skipped = json::array();
  for (const SkippedInput& s : plan.scan_skipped) skipped.push_back(skipped_json(s));
  plan.document = {{"format", "l3pack-plan"},
                   {"version", 2},
                   {"source", escape_key(fs::absolute(src).lexically_normal().string())},
                   {"scan_skipped", skipped},
                   {"hidden", plan.hidden},
                   {"source_kind", kind_name(source.kind)},
                   {"classes", plan.classes},
                   {"options", options_json(options)},
                   {"order_fingerprint", hex16(order_fingerprint(order))},
                   {"order_records", n},
                   {"part_first_record", begin},
                   {"items", items}};
  return plan;
}

std::string shard_name(const ConvertOptions& o, std::uint64_t k) {
  char number[32];
  std::snprintf(number, sizeof number, "%05llu.l3s", static_cast<unsigned long long>(k));
  return (o.part_count > 1 ? part_tag(o.part_index, o.part_count) : std::string("shard")) + "-" + number;
}

// The files of one run in OUT besides its shards. A part converting into an OUT
// shared by all parts names each after itself (spec/format.md §8.4.1).
struct OutputNames {
  std::string plan, lock, skipped, manifest;
};

OutputNames output_names(const ConvertOptions& o) {
  if (!o.shared_output) return {kPlanName, kLockName, kSkippedName, kManifestName};
  const std::string tag = part_tag(o.part_index, o.part_count);
  return {part_plan_name(o.part_index, o.part_count), ".l3pack." + tag + ".lock",
          part_skipped_name(o.part_index, o.part_count), part_manifest_name(o.part_index, o.part_count)};
}

// A file this run wrote (or left after a crash) in OUT: its shards and their
// temporaries, its skip list and skip log. In a shared OUT, only this part's.
bool written_by_run(const std::string& name, const ConvertOptions& o) {
  if (o.shared_output)
    return name.starts_with(part_tag(o.part_index, o.part_count) + "-") ||
           name.starts_with(output_names(o).skipped);
  return name.ends_with(".l3s") || name.ends_with(".l3s.tmp") || name.starts_with(kSkippedName);
}

// ---- the lock: one conversion per OUT ----

bool process_alive(pid_t pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM); }

// OUT/.l3pack.lock, created with O_EXCL and holding the owner's pid. A lock
// whose owner is gone (SIGKILL, power loss on this host) is stale and taken over,
// so --resume after a crash needs no manual clean-up.
class OutputLock {
public:
  OutputLock(const fs::path& out, const std::string& name) : path_(out / name) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd >= 0) {
        std::string pid = std::to_string(::getpid()) + "\n";
        bool written = ::write(fd, pid.data(), pid.size()) == static_cast<ssize_t>(pid.size());
        ::close(fd);
        if (!written) break;
        return;
      }
      if (errno != EEXIST) break;
      pid_t owner = read_owner();
      if (process_alive(owner)) {
        std::string detail = out.string();
        detail += ": another l3pack convert (pid ";
        detail += std::to_string(owner);
        detail += ") is writing this folder (lock file ";
        detail += path_.filename().string();
        detail += ")";
        throw_error(errc::io_error, detail);
      }
      std::error_code ignored;
      fs::remove(path_, ignored);  // stale: its owner is gone
    }
    throw_error(errc::io_error, path_.string() + ": cannot create the lock file: " + std::strerror(errno));
  }
  ~OutputLock() {
    std::error_code ignored;
    fs::remove(path_, ignored);
  }
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

private:
  pid_t read_owner() const {
    std::ifstream in(path_);
    long pid = 0;
    in >> pid;
    return static_cast<pid_t>(pid);
  }
  fs::path path_;
};

// ---- resume: keep the finished shards that match the plan ----

struct Progress {
  std::size_t next_item = 0;  // first plan item not in a kept shard
  std::vector<SkippedInput> skipped;  // plan items before next_item that are not records
  std::vector<ManifestShard> shards;
  ImageStatsBuilder stats;
  std::uint64_t records = 0, bytes_in = 0, bytes_out = 0;
};

std::uint64_t file_size_or_zero(const fs::path& file) {
  std::error_code ec;
  std::uintmax_t size = fs::file_size(file, ec);
  return ec ? 0 : size;
}

// Checks shard `reader` continues the plan at progress.next_item: its keys and
// labels are the plan's items in order, with skipped (unreadable) inputs between.
bool shard_continues_plan(const ShardReader& reader, const Plan& plan, std::size_t& cursor) {
  for (std::uint64_t i = 0; i < reader.size(); ++i) {
    RecordView record = reader.record(i, Verify::no);
    while (cursor < plan.items.size() && plan.items[cursor].key != record.key) ++cursor;
    if (cursor == plan.items.size() || plan.items[cursor].label != record.label) return false;
    ++cursor;
  }
  return true;
}

bool keep_shard(const fs::path& file, const Plan& plan, Progress& progress) {
  try {
    ShardReader reader(file);
    reader.verify_all();
    std::size_t cursor = progress.next_item;
    const std::size_t first = cursor;
    if (reader.size() == 0 || !shard_continues_plan(reader, plan, cursor)) return false;
    std::set<std::string_view> stored;
    for (std::uint64_t i = 0; i < reader.size(); ++i) stored.insert(reader.record(i, Verify::no).key);
    for (std::size_t k = first; k < cursor; ++k)
      if (!stored.contains(plan.items[k].key)) progress.skipped.push_back({plan.items[k].key, "", ""});
    for (std::uint64_t i = 0; i < reader.size(); ++i) progress.stats.add_record(reader.record(i, Verify::no).payload);
    for (std::size_t k = first; k < cursor; ++k) progress.bytes_in += file_size_or_zero(plan.items[k].file);
    progress.shards.push_back({file.filename().string(), reader.size(), reader.file_size(), xxh3(reader.file_bytes())});
    progress.records += reader.size();
    progress.bytes_out += reader.file_size();
    progress.next_item = cursor;
    return true;
  } catch (const Error&) {
    return false;  // damaged or foreign: redone
  }
}

// The skip log of an interrupted run (OUT/skipped.jsonl.partial): key -> entry.
std::map<std::string, SkippedInput> read_skip_log(const fs::path& file) {
  std::map<std::string, SkippedInput> entries;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) continue;  // a line cut by the crash
    SkippedInput s{j.value("path", ""), j.value("reason", ""), j.value("detail", "")};
    entries[s.key] = s;
  }
  return entries;
}

Progress recover(const fs::path& out, const Plan& plan, const ConvertOptions& options) {
  Progress progress;
  std::uint64_t k = 0;
  while (fs::exists(out / shard_name(options, k)) && keep_shard(out / shard_name(options, k), plan, progress)) ++k;
  // Reasons for the skips inside the kept shards, from the interrupted run's log.
  const std::map<std::string, SkippedInput> log = read_skip_log(out / (output_names(options).skipped + ".partial"));
  for (SkippedInput& s : progress.skipped) {
    auto it = log.find(s.key);
    s = it != log.end() ? it->second : SkippedInput{s.key, "skipped", "by the interrupted run (reason not recorded)"};
  }
  // Everything after the kept prefix is redone: remove it (and stale temporaries).
  for (const auto& entry : fs::directory_iterator(out)) {
    const std::string name = entry.path().filename().string();
    bool ours = written_by_run(name, options);
    bool kept = false;
    for (const ManifestShard& shard : progress.shards) kept = kept || shard.file == name;
    if (ours && !kept) fs::remove(entry.path());
  }
  return progress;
}

// ---- preparing OUT ----

void write_text(const fs::path& file, const std::string& text) {
  write_file_atomically(file, {reinterpret_cast<const std::uint8_t*>(text.data()), text.size()});
}

json read_plan(const fs::path& file) {
  std::vector<std::uint8_t> bytes = read_file(file);
  json document = json::parse(bytes.begin(), bytes.end(), nullptr, false);
  if (document.is_discarded()) throw_error(errc::corrupt_manifest, file.string() + ": not valid JSON");
  return document;
}

// Nothing of this run in OUT yet: OUT holds only its lock (in a shared OUT:
// no file of this part, whatever the other parts wrote).
bool fresh_output(const fs::path& out, const ConvertOptions& options) {
  const OutputNames names = output_names(options);
  for (const auto& entry : fs::directory_iterator(out)) {
    const std::string name = entry.path().filename().string();
    if (name == names.lock) continue;
    if (!options.shared_output || written_by_run(name, options) || name == names.plan || name == names.manifest)
      return false;
  }
  return true;
}

// Fresh run: OUT must be empty (shared OUT: of this part). Resume: OUT must hold
// this very plan, uncommitted. A part of a shared OUT keeps its plan after its
// part manifest (commit_parts removes it), so resuming a finished part redoes
// nothing and writes the same part manifest again: a retried task is harmless.
Progress prepare_output(const fs::path& out, const Plan& plan, const ConvertOptions& options) {
  const OutputNames names = output_names(options);
  if (fs::exists(out / kManifestName))
    throw_error(errc::invalid_argument, out.string() + ": already holds a committed dataset (manifest.json)");
  const bool fresh = fresh_output(out, options);
  if (!options.resume || fresh) {  // --resume of a run that never started starts it
    if (!fresh && options.shared_output)
      throw_error(errc::invalid_argument, out.string() + ": already holds files of part " +
                                              part_tag(options.part_index, options.part_count) +
                                              " (use --resume to continue or redo it)");
    if (!fresh)
      throw_error(errc::invalid_argument,
                  out.string() + ": folder is not empty (use --resume to continue an interrupted conversion)");
    write_text(out / names.plan, plan.document.dump(1) + "\n");
    return {};
  }
  if (!fs::exists(out / names.plan))
    throw_error(errc::invalid_argument, out.string() + ": nothing to resume (no " + names.plan + ")");
  if (read_plan(out / names.plan) != plan.document)
    throw_error(errc::invalid_argument, out.string() +
                                            ": --resume with different sources or options than the interrupted "
                                            "conversion (see " + names.plan + ")");
  return recover(out, plan, options);
}

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
  if (options.encode.effort < 0 || options.encode.effort > 1)
    throw_error(errc::invalid_argument, "--effort must be 0 or 1, got " + std::to_string(options.encode.effort));
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
