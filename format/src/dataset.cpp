// Dataset: manifest + lazily opened shards (spec/format.md §8.3).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "l3/format/dataset.hpp"
#include "l3/common/text.hpp"
#include "layout.hpp"
#include "remote.hpp"

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
    bool tail_pending = false;  // the prefetch fetches this shard's tail: open_slot waits for it
    std::atomic<bool> opened{false};  // reader is set (the fast path of open_slot)
  };
  std::filesystem::path dir;
  DatasetOptions options;
  Manifest manifest;
  std::vector<std::uint64_t> starts;  // starts[k] = first global index of shard k; back() = total
  std::unique_ptr<Slot[]> slots;
  std::mutex tails_m;  // guards Slot::tail_pending
  std::condition_variable tails_cv;

  // Background fetching of a remote dataset (prefetch_records()), per
  // process: a thread started by a parent before fork() does not exist in the
  // child, which starts its own.
  struct Prefetch {
    std::mutex m;
    std::condition_variable cv;
    std::vector<std::uint64_t> records;  // the next job's order
    std::vector<std::size_t> tails;      // its shards not yet open (tail_pending set), first touched first
    bool pending = false;
    std::atomic<std::uint64_t> generation{0};  // a new job (or stop) cancels the running one
    std::atomic<bool> stop{false};
    pid_t pid = 0;
    std::thread* thread = nullptr;  // leaked, never joined, in a forked child
  } pre;

  ~State() {
    if (!pre.thread) return;
    if (pre.pid != ::getpid()) return;  // a forked child: the thread is the parent's
    {
      std::lock_guard lock(pre.m);
      pre.stop = true;
    }
    pre.cv.notify_all();
    pre.thread->join();
    delete pre.thread;
  }
};

ShardCheck compare_with_manifest(const ShardReader& reader, const ManifestShard& m, std::size_t class_count,
                                 bool check_hash) {
  const auto says = [](std::uint64_t v) { return ", the manifest says " + std::to_string(v); };
  if (reader.size() != m.records)
    return {errc::corrupt_manifest, "holds " + std::to_string(reader.size()) + " records" + says(m.records)};
  if (reader.file_size() != m.bytes)
    return {errc::corrupt_manifest, "is " + std::to_string(reader.file_size()) + " bytes" + says(m.bytes)};
  if (class_count != 0 && reader.max_label() >= static_cast<std::int64_t>(class_count))
    return {errc::corrupt_manifest, "has label " + std::to_string(reader.max_label()) + " but the manifest names " +
                                        std::to_string(class_count) + " classes"};
  if (check_hash && l3::xxh3_64(reader.file_bytes()) != m.file_hash)
    return {errc::checksum_mismatch, "file hash differs from the manifest"};
  return {};
}

namespace {

std::unique_ptr<ShardReader> open_checked(const std::filesystem::path& dir, const ManifestShard& m,
                                          const Manifest& manifest, const DatasetOptions& opt) {
  // A remote shard is read by blocks, unless its whole-file hash is to be
  // checked: that needs all of it, downloaded into the cache at once.
  auto reader = is_remote(dir) && !opt.verify_shard_hashes ? remote::open_shard(dir, m, opt.limits)
                                                           : std::make_unique<ShardReader>(shard_file(dir, m), opt.limits);
  if (const ShardCheck c = compare_with_manifest(*reader, m, manifest.classes.size(), opt.verify_shard_hashes);
      c.code != errc::ok)
    throw_error(c.code, "shard \"" + m.file + "\" " + c.problem);
  return reader;
}

}  // namespace

const ShardReader& Dataset::open_slot(State& s, std::size_t k) {
  constexpr auto kRetryAfter = std::chrono::seconds(5);
  auto& slot = s.slots[k];
  if (slot.opened.load(std::memory_order_acquire)) return *slot.reader;
  const bool remote = is_remote(s.dir);
  if (remote) {
    {
      // One request per tail: wait for the prefetch's, in flight (bounded by its
      // transfer: the flag is cleared when the prefetch is done or fails).
      std::unique_lock lock(s.tails_m);
      s.tails_cv.wait(lock, [&] { return !slot.tail_pending; });
    }
    std::lock_guard lock(slot.m);
    if (slot.failed && std::chrono::steady_clock::now() - slot.failed_at < kRetryAfter)
      std::rethrow_exception(slot.failed);
  }
  // A throwing open leaves the once_flag unset, so a later call retries.
  std::call_once(slot.once, [&] {
    try {
      slot.reader = open_checked(s.dir, s.manifest.shards[k], s.manifest, s.options);
      slot.opened.store(true, std::memory_order_release);
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

namespace {

std::size_t shard_of(const std::vector<std::uint64_t>& starts, std::uint64_t i) {
  return static_cast<std::size_t>(std::upper_bound(starts.begin(), starts.end(), i) - starts.begin() - 1);
}

}  // namespace

void Dataset::prefetch_records(std::vector<std::uint64_t> records, bool blocks) const {
  if (!is_remote(s_->dir)) return;  // local shards are mapped on first use, at no cost
  State& s = *s_;
  State::Prefetch& p = s.pre;
  // The shards whose tails the job fetches are marked here, before the reader
  // can open any: open_slot then waits for the job's request instead of
  // sending its own (spec/format.md §8.5.1: one request per tail).
  std::vector<std::size_t> tails;
  if (!s.options.verify_shard_hashes) {
    std::vector<char> touched(s.manifest.shards.size());
    for (std::uint64_t i : records) {
      if (i >= s.starts.back()) continue;
      const std::size_t k = shard_of(s.starts, i);
      if (touched[k]) continue;
      touched[k] = 1;
      if (!s.slots[k].opened.load(std::memory_order_acquire)) tails.push_back(k);
    }
  }
  std::vector<std::size_t> dropped;  // the tails of a job replaced before it started
  {
    std::lock_guard lock(p.m);
    if (p.pending) dropped = std::move(p.tails);
    if (!blocks) records.clear();  // the job fetches `tails`, worked out above
    p.records = std::move(records);
    p.tails = tails;
    p.pending = true;
    ++p.generation;
  }
  {
    std::lock_guard lock(s.tails_m);
    for (std::size_t k : dropped) s.slots[k].tail_pending = false;
    for (std::size_t k : tails) s.slots[k].tail_pending = true;
  }
  s.tails_cv.notify_all();
  p.cv.notify_all();
  std::lock_guard lock(p.m);
  if (p.thread && p.pid == ::getpid()) return;
  p.pid = ::getpid();
  p.stop = false;
  p.thread = new std::thread([st = s_.get()] { prefetch_loop(*st); });
}

void Dataset::prefetch_loop(State& s) {
  State::Prefetch& p = s.pre;
  for (;;) {
    std::vector<std::uint64_t> records;
    std::vector<std::size_t> tails;
    std::uint64_t generation = 0;
    {
      std::unique_lock wait(p.m);
      p.cv.wait(wait, [&] { return p.stop || p.pending; });
      if (p.stop) return;
      records = std::move(p.records);
      tails = std::move(p.tails);
      p.pending = false;
      generation = p.generation;
    }
    const auto cancelled = [&] { return p.stop.load() || p.generation.load() != generation; };
    try {
      prefetch_run(s, records, tails, cancelled);
    } catch (...) {
      // The reader's own record() call fetches again and reports the error;
      // prefetching stops here (the store is failing: no point in more requests).
    }
  }
}

// One prefetch job (spec/format.md §8.5.1): the tails of the shards the
// records touch, all in flight at once; then the blocks in the order the
// records first touch them, in chunks (a block stays claimed only while its
// chunk is in flight, so a reader that overtakes the prefetch fetches it).
void Dataset::prefetch_run(State& s, const std::vector<std::uint64_t>& records, const std::vector<std::size_t>& tails,
                           const std::function<bool()>& cancelled) {
  constexpr std::size_t kChunk = 64;
  const auto settle = [&](std::size_t from, std::size_t to) {  // these tails are cached (or given up)
    {
      std::lock_guard lock(s.tails_m);
      for (std::size_t j = from; j < to; ++j) s.slots[tails[j]].tail_pending = false;
    }
    s.tails_cv.notify_all();
  };
  if (!tails.empty()) {
    std::vector<ManifestShard> shards;
    for (std::size_t k : tails) shards.push_back(s.manifest.shards[k]);
    try {
      remote::fetch_tails(s.dir, shards, cancelled, [&](std::size_t j) { settle(j, j + 1); });
    } catch (...) {
      settle(0, tails.size());
      throw;
    }
    settle(0, tails.size());  // those cancelled, and those already cached
  }
  std::vector<std::vector<char>> seen(s.manifest.shards.size());
  std::vector<remote::BlockRef> chunk;
  for (std::uint64_t i : records) {
    if (cancelled()) return;
    if (i >= s.starts.back()) continue;
    const std::size_t k = shard_of(s.starts, i);
    const ShardReader& shard = open_slot(s, k);
    if (!shard.body()) continue;  // a whole-file copy (verify_shard_hashes): nothing more to fetch
    const std::size_t b = remote::block_of(shard, i - s.starts[k]);
    if (seen[k].size() <= b) seen[k].resize(b + 1);
    if (seen[k][b]) continue;
    seen[k][b] = 1;
    chunk.push_back({&shard, b});
    if (chunk.size() == kChunk) {
      remote::fetch_blocks(s.dir, chunk, cancelled);
      chunk.clear();
    }
  }
  if (!chunk.empty()) remote::fetch_blocks(s.dir, chunk, cancelled);
}

RecordView Dataset::record(std::uint64_t i, Verify verify) const {
  auto loc = locate(i);
  return shard(loc.shard).record(loc.index, verify);
}

std::optional<RecordView> Dataset::cached_record(std::uint64_t i, Verify verify) const {
  if (!is_remote(s_->dir)) return std::nullopt;
  const RecordLocation loc = locate(i);
  const ShardReader& sh = shard(loc.shard);
  // A whole-file copy (verify_shard_hashes) is all here.
  if (sh.body() && !remote::block_at_hand(sh, loc.index)) return std::nullopt;
  return sh.record(loc.index, verify);
}

RecordView Dataset::record_uncached(std::uint64_t i, Verify verify, std::vector<std::uint8_t>& owned) const {
  const RecordLocation loc = locate(i);
  const ShardReader& sh = shard(loc.shard);
  if (!is_remote(s_->dir) || !sh.body()) return sh.record(loc.index, verify);
  owned = remote::fetch_record(sh, loc.index);
  const RecordEntry e = sh.entry(loc.index);
  return {owned, e.label, e.key, e.metadata};
}

RecordEntry Dataset::entry(std::uint64_t i) const {
  auto loc = locate(i);
  return shard(loc.shard).entry(loc.index);
}

std::string Dataset::describe(std::uint64_t i) const {
  if (i >= size()) return "record " + std::to_string(i) + " of " + std::to_string(size());
  const RecordLocation loc = locate(i);
  std::string text = "shard " + (s_->dir / s_->manifest.shards[loc.shard].file).string() + ", index " +
                     std::to_string(loc.index);
  try {
    text += ", key '" + escape_control(entry(i).key) + "'";
  } catch (const Error&) {
    // the shard or its index is what is broken: the caller's error says so
  }
  return text;
}

}  // namespace l3
