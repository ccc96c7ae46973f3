// Dataset: manifest + lazily opened shards (spec/format.md §8.3).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "l3/dataset.hpp"
#include "l3/text.hpp"
#include "layout.hpp"

namespace l3 {

struct Dataset::State {
  struct Slot {
    std::once_flag once;
    std::unique_ptr<ShardReader> reader;
    // A remote shard whose download failed (retries exhausted): the error is
    // given again for kRetryAfter instead of a new round of retries for every
    // record of the shard the reader has queued.
    std::mutex m;
    std::exception_ptr failed;
    std::chrono::steady_clock::time_point failed_at;
  };
  std::filesystem::path dir;
  DatasetOptions options;
  Manifest manifest;
  std::vector<std::uint64_t> starts;  // starts[k] = first global index of shard k; back() = total
  std::unique_ptr<Slot[]> slots;

  // Background opening of shards (prefetch()), per process: threads started by
  // a parent before fork() do not exist in the child, which starts its own.
  struct Prefetch {
    std::mutex m;
    std::condition_variable cv;
    std::vector<std::size_t> order;
    std::size_t next = 0;
    bool stop = false;
    pid_t pid = 0;
    std::vector<std::thread>* threads = nullptr;  // leaked, never joined, in a forked child
  } pre;

  ~State() {
    if (!pre.threads) return;
    if (pre.pid != ::getpid()) return;  // a forked child: the threads are the parent's
    {
      std::lock_guard lock(pre.m);
      pre.stop = true;
    }
    pre.cv.notify_all();
    for (std::thread& t : *pre.threads) t.join();
    delete pre.threads;
  }
};

namespace {

[[noreturn]] void mismatch(const ManifestShard& m, const std::string& what) {
  throw_error(errc::corrupt_manifest, "shard \"" + m.file + "\" " + what);
}

std::unique_ptr<ShardReader> open_checked(const std::filesystem::path& dir, const ManifestShard& m,
                                          const Manifest& manifest, const DatasetOptions& opt) {
  auto reader = std::make_unique<ShardReader>(shard_file(dir, m), opt.limits);
  if (reader->size() != m.records)
    mismatch(m, "holds " + std::to_string(reader->size()) + " records, manifest says " + std::to_string(m.records));
  if (reader->file_size() != m.bytes)
    mismatch(m, "is " + std::to_string(reader->file_size()) + " bytes, manifest says " + std::to_string(m.bytes));
  if (!manifest.classes.empty() && reader->max_label() >= static_cast<std::int64_t>(manifest.classes.size()))
    mismatch(m, "has label " + std::to_string(reader->max_label()) + " but the manifest names " +
                    std::to_string(manifest.classes.size()) + " classes");
  if (opt.verify_shard_hashes && shard_layout::xxh3(reader->file_bytes()) != m.file_hash)
    throw_error(errc::checksum_mismatch, "shard \"" + m.file + "\" does not match its manifest hash");
  return reader;
}

}  // namespace

const ShardReader& Dataset::open_slot(State& s, std::size_t k) {
  constexpr auto kRetryAfter = std::chrono::seconds(5);
  auto& slot = s.slots[k];
  const bool remote = is_remote(s.dir);
  if (remote) {
    std::lock_guard lock(slot.m);
    if (slot.failed && std::chrono::steady_clock::now() - slot.failed_at < kRetryAfter)
      std::rethrow_exception(slot.failed);
  }
  // A throwing open leaves the once_flag unset, so a later call retries.
  std::call_once(slot.once, [&] {
    try {
      slot.reader = open_checked(s.dir, s.manifest.shards[k], s.manifest, s.options);
    } catch (...) {
      if (remote) {
        std::lock_guard lock(slot.m);
        slot.failed = std::current_exception();
        slot.failed_at = std::chrono::steady_clock::now();
      }
      throw;
    }
  });
  return *slot.reader;
}

Dataset::Dataset(std::unique_ptr<State> s) : s_(std::move(s)) {}
Dataset::~Dataset() = default;
Dataset::Dataset(Dataset&&) noexcept = default;
Dataset& Dataset::operator=(Dataset&&) noexcept = default;

Dataset Dataset::open(const std::filesystem::path& dir, DatasetOptions options) {
  auto s = std::make_unique<State>();
  s->dir = dir;
  s->options = options;
  s->manifest = read_manifest(dir);
  s->starts.push_back(0);
  for (const auto& shard : s->manifest.shards) s->starts.push_back(s->starts.back() + shard.records);
  s->slots = std::make_unique<State::Slot[]>(s->manifest.shards.size());
  return Dataset(std::move(s));
}

std::uint64_t Dataset::size() const noexcept { return s_->starts.back(); }
std::size_t Dataset::shard_count() const noexcept { return s_->manifest.shards.size(); }
const Manifest& Dataset::manifest() const noexcept { return s_->manifest; }
const std::vector<std::string>& Dataset::class_names() const noexcept { return s_->manifest.classes; }
const std::filesystem::path& Dataset::directory() const noexcept { return s_->dir; }

RecordLocation Dataset::locate(std::uint64_t i) const {
  if (i >= size()) throw_error(errc::out_of_range, "record " + std::to_string(i) + " of a dataset with " + std::to_string(size()));
  // The last shard starting at or before i; empty shards are skipped by upper_bound.
  auto it = std::upper_bound(s_->starts.begin(), s_->starts.end(), i) - 1;
  auto k = static_cast<std::size_t>(it - s_->starts.begin());
  return {k, i - *it};
}

const ShardReader& Dataset::shard(std::size_t k) const {
  if (k >= shard_count()) throw_error(errc::out_of_range, "shard " + std::to_string(k) + " of " + std::to_string(shard_count()));
  return open_slot(*s_, k);
}

void Dataset::prefetch(std::vector<std::size_t> order) const {
  if (!is_remote(s_->dir)) return;  // local shards are mapped on first use, at no cost
  State::Prefetch& p = s_->pre;
  std::lock_guard lock(p.m);
  p.order = std::move(order);
  p.next = 0;
  if (p.threads && p.pid == ::getpid()) {
    p.cv.notify_all();
    return;
  }
  // Two shards download at once, each by many ranged GETs in flight.
  p.pid = ::getpid();
  p.stop = false;
  p.threads = new std::vector<std::thread>();
  for (int i = 0; i < 2; ++i) {
    p.threads->emplace_back([st = s_.get(), &p] {
      for (;;) {
        std::size_t k = 0;
        {
          std::unique_lock wait(p.m);
          p.cv.wait(wait, [&] { return p.stop || p.next < p.order.size(); });
          if (p.stop) return;
          k = p.order[p.next++];
        }
        try {
          (void)open_slot(*st, k);
        } catch (...) {
          // The reader's own shard(k) call tries again and reports the error;
          // prefetching stops here (the store is failing: no point in more requests).
          std::lock_guard stop(p.m);
          p.next = p.order.size();
        }
      }
    });
  }
}

RecordView Dataset::record(std::uint64_t i, Verify verify) const {
  auto loc = locate(i);
  return shard(loc.shard).record(loc.index, verify);
}

std::string Dataset::describe(std::uint64_t i) const {
  if (i >= size()) return "record " + std::to_string(i) + " of " + std::to_string(size());
  const RecordLocation loc = locate(i);
  std::string text = "shard " + (s_->dir / s_->manifest.shards[loc.shard].file).string() + ", index " +
                     std::to_string(loc.index);
  try {
    text += ", key '" + escape_control(record(i, Verify::no).key) + "'";
  } catch (const Error&) {
    // the shard or its index is what is broken: the caller's error says so
  }
  return text;
}

}  // namespace l3
