// OUT of a conversion: the lock and the resume of an interrupted run
// (convert_parts.hpp).
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <set>

#include "convert_parts.hpp"
#include "l3/common/file_io.hpp"
#include "l3/common/text.hpp"

namespace l3::convert_detail {

bool process_alive(pid_t pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM); }

OutputLock::OutputLock(const fs::path& out, const std::string& name) : path_(out / name) {
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

OutputLock::~OutputLock() {
  std::error_code ignored;
  fs::remove(path_, ignored);
}

pid_t OutputLock::read_owner() const {
  std::ifstream in(path_);
  long pid = 0;
  in >> pid;
  return static_cast<pid_t>(pid);
}

// ---- resume: keep the finished shards that match the plan ----


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

}  // namespace l3::convert_detail
