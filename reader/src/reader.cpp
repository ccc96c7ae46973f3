// The reader's pipeline. One mutex (m_) guards the task queue, the batch ring
// and the run's bookkeeping; three condition variables wake the scheduler
// (space), the workers (work) and the consumer (ready). Stage work (fetching,
// decoding, resizing, assembling) runs outside the lock.
//
// Batch mode (ReaderOptions::batch_backend): the scheduler hands whole echo
// windows to one batch thread, which plans every record's copies on the host
// and has the backend decode and transform the window at once (in device
// memory for the CUDA backend); replacements of corrupt records (skip policy)
// go to the backend in further, smaller rounds.
#include "l3/reader.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

namespace l3 {
namespace {

using Clock = std::chrono::steady_clock;

std::uint64_t elapsed_ns(Clock::time_point t0) {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
}
double seconds(std::uint64_t ns) { return static_cast<double>(ns) * 1e-9; }

// RAM cache of compressed records: insert while the budget allows, never evict.
class RecordCache {
public:
  explicit RecordCache(std::uint64_t budget) : budget_(budget) {}
  bool lookup(std::uint64_t record, std::span<const std::uint8_t>& payload, std::int64_t& label) const {
    std::lock_guard lock(m_);
    auto it = map_.find(record);
    if (it == map_.end()) return false;
    payload = {it->second.data.get(), it->second.size};
    label = it->second.label;
    return true;
  }
  // Copies the record in if it fits; returns the cached copy's span, or the argument.
  std::span<const std::uint8_t> insert(std::uint64_t record, std::span<const std::uint8_t> payload, std::int64_t label) {
    std::lock_guard lock(m_);
    if (used_ + payload.size() > budget_ || map_.count(record)) return payload;
    Entry e;
    e.data = std::make_unique<std::uint8_t[]>(payload.size());
    std::copy(payload.begin(), payload.end(), e.data.get());
    e.size = payload.size();
    e.label = label;
    used_ += payload.size();
    auto& stored = map_.emplace(record, std::move(e)).first->second;
    return {stored.data.get(), stored.size};
  }
  std::uint64_t bytes() const {
    std::lock_guard lock(m_);
    return used_;
  }
  std::uint64_t records() const {
    std::lock_guard lock(m_);
    return map_.size();
  }

private:
  struct Entry {
    std::unique_ptr<std::uint8_t[]> data;
    std::size_t size = 0;
    std::int64_t label = kNoLabel;
  };
  mutable std::mutex m_;
  std::unordered_map<std::uint64_t, Entry> map_;
  std::uint64_t budget_ = 0, used_ = 0;
};

// Reads one byte per page so that the kernel maps (and reads) the pages now.
void prefault(std::span<const std::uint8_t> bytes) {
  std::uint8_t acc = 0;
  for (std::size_t i = 0; i < bytes.size(); i += 4096) acc = static_cast<std::uint8_t>(acc ^ bytes[i]);
  if (!bytes.empty()) acc = static_cast<std::uint8_t>(acc ^ bytes.back());
  static std::atomic<std::uint8_t> sink{0};
  sink.store(acc, std::memory_order_relaxed);
}

struct Counters {
  std::atomic<std::uint64_t> read_ns{0}, decode_ns{0}, transform_ns{0}, assemble_ns{0};
  std::atomic<std::uint64_t> bytes_read{0}, hits{0}, misses{0}, corrupt{0}, replaced{0};
};

}  // namespace

struct Reader::Impl {
  enum class SlotState { free, filling, ready, held };
  struct Slot {
    void* data = nullptr;
    std::vector<std::int64_t> labels;
    std::vector<std::uint64_t> records;
    SlotState state = SlotState::free;
    std::uint64_t seq = 0;
    std::uint32_t remaining = 0;
    std::uint32_t fresh = 0, echoed = 0;
    std::exception_ptr error;
    Batch batch;
  };
  struct Task {
    std::uint64_t window = 0;  // within the run
    std::uint32_t fresh = 0;   // index of the record in its window
    std::uint64_t record = 0;
    std::span<const std::uint8_t> payload;
    std::int64_t label = kNoLabel;
    std::exception_ptr read_error;
  };
  // What a run (an epoch, or its rest after restore) needs; written only while
  // no scheduler or task is alive.
  struct Run {
    std::uint64_t epoch = 0;
    EpochOrder order;
    RankPlan plan;
    std::uint64_t skip = 0;           // batches of window 0 already delivered (restore)
    std::uint64_t total_batches = 0;  // batches this run delivers
  };
  struct WorkerScratch {
    TransformScratch transform;
    std::vector<std::uint8_t> decoded;
    std::vector<std::uint8_t> hwc;
    std::vector<ExamplePlan> plans;
    std::vector<std::uint32_t> dest_seq, dest_slot;
    std::vector<bool> dest_live;
  };

  std::shared_ptr<const Dataset> dataset;
  ReaderOptions opt;
  std::uint32_t window_batches = 1;  // m
  std::uint64_t fresh_per_window = 1;
  std::size_t example_size = 0;
  std::unique_ptr<RecordCache> cache;
  Counters counters;

  std::mutex m_;
  std::condition_variable cv_space_, cv_work_, cv_ready_;
  std::vector<Slot> ring;
  std::vector<Task> queue;
  std::size_t q_head = 0, q_count = 0;
  std::deque<std::vector<Task>> windows;  // batch mode: whole windows, at most one queued
  std::vector<Task> spare_window;         // batch mode: a processed window's vector, for reuse
  std::uint32_t in_flight = 0;
  bool stopping = false, shutdown = false;
  std::exception_ptr fatal;  // scheduler failure
  Run run;
  std::uint64_t next_seq = 0;
  Slot* held = nullptr;

  // Metrics kept by the consumer (under m_).
  std::uint64_t m_batches = 0, m_examples = 0, m_fresh = 0, m_echoed = 0, m_raised = 0, m_stalled = 0;
  double m_wait = 0, m_max_wait = 0;
  bool timing = false;
  Clock::time_point t_first{}, t_last{};

  std::thread scheduler;
  std::vector<std::thread> workers;

  Impl(std::shared_ptr<const Dataset> ds, ReaderOptions o) : dataset(std::move(ds)), opt(std::move(o)) {
    if (!dataset) throw_error(errc::invalid_argument, "reader: no dataset");
    if (opt.batch_size == 0) throw_error(errc::invalid_argument, "batch size must be > 0");
    if (opt.workers == 0 || opt.workers > 256) throw_error(errc::invalid_argument, "workers must be 1..256");
    if (opt.prefetch == 0) throw_error(errc::invalid_argument, "prefetch must be >= 1");
    if (opt.echo == 0) throw_error(errc::invalid_argument, "echo must be >= 1");
    if (opt.world_size == 0 || opt.rank >= opt.world_size) throw_error(errc::invalid_argument, "rank must be < world size");
    validate(opt.transform);
    window_batches = opt.echo_window ? opt.echo_window : opt.echo;
    const std::uint64_t window_examples = std::uint64_t{window_batches} * opt.batch_size;
    if (window_examples % opt.echo != 0)
      throw_error(errc::invalid_argument, "echo window * batch size must be a multiple of echo");
    fresh_per_window = window_examples / opt.echo;
    if (!opt.decoder && !opt.batch_backend) opt.decoder = make_cpu_decode_backend(1, opt.limits);
    if (!opt.allocator && !opt.batch_backend) opt.allocator = make_cpu_batch_allocator();
    if (opt.read_ahead == 0) opt.read_ahead = 2 * opt.batch_size;
    if (opt.cache_bytes) cache = std::make_unique<RecordCache>(opt.cache_bytes);
    example_size = example_bytes(opt.transform);

    ring.resize(std::size_t{window_batches} + opt.prefetch);
    try {
      for (Slot& s : ring) {
        s.data = opt.batch_backend ? opt.batch_backend->allocate(example_size * opt.batch_size)
                                   : opt.allocator->allocate(example_size * opt.batch_size, 64);
        s.labels.resize(opt.batch_size);
        s.records.resize(opt.batch_size);
        Batch& b = s.batch;
        b.data = s.data;
        b.bytes = example_size * opt.batch_size;
        b.size = opt.batch_size;
        b.channels = opt.transform.channels;
        b.height = opt.transform.height;
        b.width = opt.transform.width;
        b.layout = opt.transform.layout;
        b.dtype = opt.transform.dtype;
        b.device = opt.batch_backend && opt.batch_backend->memory() == BatchMemory::device
                       ? opt.batch_backend->device() : -1;
        b.labels = s.labels;
        b.records = s.records;
      }
    } catch (...) {
      free_ring();
      throw;
    }
    queue.resize(opt.read_ahead);
    if (opt.batch_backend) {
      workers.emplace_back([this] { batch_loop(); });
    } else {
      for (std::uint32_t i = 0; i < opt.workers; ++i) workers.emplace_back([this] { worker_loop(); });
    }
    start_run(opt.epoch, 0, 0);
  }

  ~Impl() {
    stop_run();
    {
      std::lock_guard lock(m_);
      shutdown = true;
    }
    cv_work_.notify_all();
    for (std::thread& t : workers) t.join();
    free_ring();
  }

  void free_ring() {
    for (Slot& s : ring) {
      if (!s.data) continue;
      if (opt.batch_backend) {
        opt.batch_backend->deallocate(s.data, example_size * opt.batch_size);
      } else {
        opt.allocator->deallocate(s.data, example_size * opt.batch_size, 64);
      }
    }
  }

  // ---- runs -------------------------------------------------------------------

  void stop_run() {
    {
      std::lock_guard lock(m_);
      stopping = true;
    }
    cv_space_.notify_all();
    if (scheduler.joinable()) scheduler.join();
    std::unique_lock lock(m_);
    q_head = q_count = 0;  // queued tasks are dropped
    for (Task& t : queue) t = Task{};
    windows.clear();
    cv_space_.wait(lock, [&] { return in_flight == 0; });
    if (held && opt.batch_backend) opt.batch_backend->release(held->data, nullptr);
    held = nullptr;
    for (Slot& s : ring) {
      s.state = SlotState::free;
      s.error = nullptr;
    }
  }

  void start_run(std::uint64_t epoch, std::uint64_t start, std::uint64_t skip) {
    stop_run();
    const std::uint64_t n = dataset->size();
    std::lock_guard lock(m_);
    run.epoch = epoch;
    run.order = EpochOrder(n, OrderOptions{opt.seed, opt.shuffle, opt.block_size}, epoch);
    run.plan = RankPlan(n, start, opt.world_size, opt.rank, fresh_per_window, opt.remainder);
    const std::uint64_t planned = run.plan.steps() * window_batches;
    run.skip = std::min(skip, planned);
    run.total_batches = planned - run.skip;
    next_seq = 0;
    fatal = nullptr;
    stopping = false;
    if (is_remote(dataset->directory())) dataset->prefetch(shards_in_run_order());
    scheduler = std::thread([this] { scheduler_loop(); });
  }

  // The shards of this rank's run in the order the run first reads them: a
  // remote dataset downloads them in this order, ahead of the scheduler
  // (spec/format.md §8.5.1). One pass over the run's positions.
  std::vector<std::size_t> shards_in_run_order() const {
    std::vector<std::size_t> order;
    std::vector<bool> seen(dataset->shard_count());
    const std::uint64_t positions = run.plan.steps() * fresh_per_window;
    for (std::uint64_t j = 0; j < positions && order.size() < seen.size(); ++j) {
      const std::size_t k = dataset->locate(run.order[run.plan.position(j)]).shard;
      if (!seen[k]) {
        seen[k] = true;
        order.push_back(k);
      }
    }
    return order;
  }

  // Example `copy` of window-record `fresh` lands at this offset of the window.
  std::uint64_t example_offset(std::uint64_t window, std::uint32_t fresh, std::uint32_t copy) const {
    if (opt.echo == 1 && window_batches == 1) return fresh;
    const std::uint64_t n = fresh_per_window * opt.echo;
    const std::uint64_t key = xf::hash_words(opt.seed, run.epoch, run.plan.position(window * fresh_per_window), 0xec40ULL);
    return Permutation(n, key).inverse(std::uint64_t{fresh} * opt.echo + copy);
  }

  // A record's error names its shard file, index and key, so the bad record
  // can be found (and dropped or re-converted).
  std::exception_ptr about_record(const Error& e, std::uint64_t record) const {
    const std::string where = "record " + std::to_string(record) + " (" + dataset->describe(record) + ")";
    return std::make_exception_ptr(with_context(e, where));
  }

  // ---- read stage (scheduler thread) ------------------------------------------

  void fetch(std::uint64_t record, Task& t, bool fill_cache) {
    const auto t0 = Clock::now();
    try {
      if (cache && cache->lookup(record, t.payload, t.label)) {
        counters.hits.fetch_add(1, std::memory_order_relaxed);
      } else {
        if (cache) counters.misses.fetch_add(1, std::memory_order_relaxed);
        RecordView rv = dataset->record(record, opt.verify);
        counters.bytes_read.fetch_add(rv.payload.size(), std::memory_order_relaxed);
        // Without the checksum pass nothing has touched the mapped pages yet:
        // fault them in here, so storage reads happen in the read stage, ahead of decode.
        if (opt.verify == Verify::no) prefault(rv.payload);
        t.payload = rv.payload;
        t.label = rv.label;
        if (cache && fill_cache) t.payload = cache->insert(record, rv.payload, rv.label);
      }
    } catch (...) {
      t.read_error = std::current_exception();
    }
    counters.read_ns.fetch_add(elapsed_ns(t0), std::memory_order_relaxed);
  }

  void scheduler_loop() {
    try {
      const std::uint64_t steps = run.plan.steps();
      std::vector<Task> window;  // batch mode: the window's tasks
      for (std::uint64_t w = 0; w < steps; ++w) {
        const std::uint64_t first_k = w == 0 ? run.skip : 0;
        {  // claim the window's batch slots
          std::unique_lock lock(m_);
          for (std::uint64_t k = first_k; k < window_batches; ++k) {
            const std::uint64_t seq = w * window_batches + k - run.skip;
            Slot& s = ring[seq % ring.size()];
            cv_space_.wait(lock, [&] { return stopping || s.state == SlotState::free; });
            if (stopping) return;
            s.state = SlotState::filling;
            s.seq = seq;
            s.remaining = opt.batch_size;
            s.fresh = s.echoed = 0;
            s.error = nullptr;
          }
        }
        for (std::uint64_t f = 0; f < fresh_per_window; ++f) {
          const auto fi = static_cast<std::uint32_t>(f);
          if (first_k > 0) {  // restore inside a window: skip records whose copies were all delivered
            bool live = false;
            for (std::uint32_t c = 0; c < opt.echo && !live; ++c)
              live = example_offset(w, fi, c) / opt.batch_size >= first_k;
            if (!live) continue;
          }
          Task t;
          t.window = w;
          t.fresh = fi;
          t.record = run.order[run.plan.position(w * fresh_per_window + f)];
          fetch(t.record, t, true);
          if (opt.batch_backend) {
            window.push_back(std::move(t));
            continue;
          }
          std::unique_lock lock(m_);
          cv_space_.wait(lock, [&] { return stopping || q_count < queue.size(); });
          if (stopping) return;
          queue[(q_head + q_count) % queue.size()] = std::move(t);
          ++q_count;
          lock.unlock();
          cv_work_.notify_one();
        }
        if (opt.batch_backend) {  // the whole window to the batch thread
          std::unique_lock lock(m_);
          cv_space_.wait(lock, [&] { return stopping || windows.empty(); });
          if (stopping) return;
          windows.push_back(std::move(window));
          window = std::move(spare_window);
          lock.unlock();
          cv_work_.notify_one();
        }
      }
    } catch (...) {
      std::lock_guard lock(m_);
      fatal = std::current_exception();
    }
    cv_ready_.notify_all();
  }

  // ---- decode, transform, assemble (workers) ----------------------------------

  void worker_loop() {
    WorkerScratch ws;
    ws.plans.resize(opt.echo);
    ws.dest_seq.resize(opt.echo);
    ws.dest_slot.resize(opt.echo);
    ws.dest_live.resize(opt.echo);
    for (;;) {
      Task t;
      {
        std::unique_lock lock(m_);
        cv_work_.wait(lock, [&] { return shutdown || q_count > 0; });
        if (q_count == 0) return;  // shutdown
        t = std::move(queue[q_head]);
        queue[q_head] = Task{};
        q_head = (q_head + 1) % queue.size();
        --q_count;
        ++in_flight;
      }
      cv_space_.notify_all();
      process(t, ws);
      {
        std::lock_guard lock(m_);
        --in_flight;
      }
      cv_space_.notify_all();
    }
  }

  // Reads the header and draws every copy's plan from the RNG of
  // `seed_record` (the record whose place this is, also when a replacement
  // fills it); returns the union of the live copies' boxes.
  Rect plan_record(std::uint64_t seed_record, std::span<const std::uint8_t> payload, WorkerScratch& ws,
                   ImageInfo& info) {
    info = read_info(payload, opt.limits);
    check_output_channels(info.channels, opt.transform.channels);
    xf::Box u{};
    bool any = false;
    for (std::uint32_t c = 0; c < opt.echo; ++c) {
      xf::Rng rng = xf::example_rng(opt.seed, run.epoch, seed_record, c);
      ws.plans[c] = plan_example(opt.transform, info.width, info.height, rng);
      if (!ws.dest_live[c]) continue;
      u = any ? xf::union_box(u, ws.plans[c].box) : ws.plans[c].box;
      any = true;
    }
    return Rect{static_cast<std::uint32_t>(u.x), static_cast<std::uint32_t>(u.y), static_cast<std::uint32_t>(u.w),
                static_cast<std::uint32_t>(u.h)};
  }

  // Where copy c of `t` goes: ws.dest_*; false when no copy is live (restore
  // skipped all the batches they belong to).
  bool destinations(const Task& t, WorkerScratch& ws) {
    bool any = false;
    for (std::uint32_t c = 0; c < opt.echo; ++c) {
      const std::uint64_t off = example_offset(t.window, t.fresh, c);
      const std::uint64_t k = off / opt.batch_size;
      const bool live = !(t.window == 0 && k < run.skip);
      ws.dest_live[c] = live;
      any = any || live;
      if (live) {
        ws.dest_seq[c] = static_cast<std::uint32_t>((t.window * window_batches + k - run.skip) % ring.size());
        ws.dest_slot[c] = static_cast<std::uint32_t>(off % opt.batch_size);
      }
    }
    return any;
  }

  // Decodes `payload` once and writes every live copy into its slot.
  void produce(std::uint64_t seed_record, std::uint64_t record, std::span<const std::uint8_t> payload,
               std::int64_t label, WorkerScratch& ws) {
    auto t0 = Clock::now();
    ImageInfo info;
    const Rect region = plan_record(seed_record, payload, ws, info);
    const std::size_t stride = std::size_t{region.width} * info.channels;
    ws.decoded.resize(stride * region.height);
    const DecodeJob job{payload, region,
                        MutableImageView{ws.decoded.data(), region.width, region.height, info.channels, stride}};
    opt.decoder->decode(std::span<const DecodeJob>(&job, 1));
    counters.decode_ns.fetch_add(elapsed_ns(t0), std::memory_order_relaxed);

    const ImageView src{ws.decoded.data(), job.out.width, job.out.height, info.channels, stride};
    ws.hwc.resize(std::size_t{opt.transform.width} * opt.transform.height * opt.transform.channels);
    for (std::uint32_t c = 0; c < opt.echo; ++c) {
      if (!ws.dest_live[c]) continue;
      t0 = Clock::now();
      crop_resize(src, job.region.x, job.region.y, ws.plans[c], opt.transform, ws.transform, ws.hwc.data());
      const auto t1 = Clock::now();
      counters.transform_ns.fetch_add(
          static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()),
          std::memory_order_relaxed);
      assemble(ws.hwc.data(), opt.transform, example_dst(ws, c));
      counters.assemble_ns.fetch_add(elapsed_ns(t1), std::memory_order_relaxed);
    }
    label_copies(ws, record, label);
  }

  // Each (slot, offset) is written by exactly one task; the slot is not read
  // before its count reaches zero under m_.
  std::uint8_t* example_dst(const WorkerScratch& ws, std::uint32_t c) {
    Slot& s = ring[ws.dest_seq[c] % ring.size()];
    return static_cast<std::uint8_t*>(s.data) + std::size_t{ws.dest_slot[c]} * example_size;
  }
  void label_copies(const WorkerScratch& ws, std::uint64_t record, std::int64_t label) {
    for (std::uint32_t c = 0; c < opt.echo; ++c) {
      if (!ws.dest_live[c]) continue;
      Slot& s = ring[ws.dest_seq[c] % ring.size()];
      s.labels[ws.dest_slot[c]] = label;
      s.records[ws.dest_slot[c]] = record;
    }
  }

  // Counts the task's live copies into their slots (under m_) and wakes the
  // consumer for a slot that is complete. `error` is handed over: the worker's
  // reference is dropped under m_, so the exception object is freed by the
  // consumer (which reads it), never by a worker racing with that read. The
  // caller has dropped its other references (Task::read_error) before.
  void settle(const WorkerScratch& ws, std::exception_ptr&& error, bool replaced) {
    std::lock_guard lock(m_);
    const std::exception_ptr handed = std::move(error);
    for (std::uint32_t c = 0; c < opt.echo; ++c) {
      if (!ws.dest_live[c]) continue;
      Slot& s = ring[ws.dest_seq[c] % ring.size()];
      if (handed && !s.error) s.error = handed;
      if (c == 0) ++s.fresh; else ++s.echoed;
      if (--s.remaining == 0) {
        s.state = SlotState::ready;
        cv_ready_.notify_all();
      }
    }
    if (replaced) counters.replaced.fetch_add(1, std::memory_order_relaxed);
  }

  void process(Task& t, WorkerScratch& ws) {
    if (!destinations(t, ws)) return;
    std::exception_ptr error;
    bool replaced = false;
    try {
      if (t.read_error) std::rethrow_exception(t.read_error);
      produce(t.record, t.record, t.payload, t.label, ws);
    } catch (const Error& e) {
      if (opt.on_error == ErrorPolicy::skip && is_data_error(e.code())) {
        counters.corrupt.fetch_add(1, std::memory_order_relaxed);
        error = replace(t, ws, replaced);
      } else {
        error = about_record(e, t.record);
      }
    } catch (...) {
      error = std::current_exception();
    }
    t.read_error = nullptr;
    settle(ws, std::move(error), replaced);
  }

  // The record that stands in for `t` at attempt a >= 1 (skip policy): the
  // a-th next record of this rank's sequence; none past the attempt limit.
  bool replacement(const Task& t, std::uint64_t a, std::uint64_t& record) const {
    const std::uint64_t length = run.plan.length();
    if (a > opt.max_replacements || a >= std::max<std::uint64_t>(length, 2)) return false;
    const std::uint64_t j = t.window * fresh_per_window + t.fresh;
    record = run.order[run.plan.position((j + a) % length)];
    return true;
  }

  // Skip policy: the next valid record of this rank's sequence fills the slots.
  std::exception_ptr replace(const Task& t, WorkerScratch& ws, bool& replaced) {
    std::exception_ptr last;
    Task r;
    for (std::uint64_t a = 1; replacement(t, a, r.record); ++a) {
      r.read_error = nullptr;
      fetch(r.record, r, false);
      try {
        if (r.read_error) std::rethrow_exception(r.read_error);
        produce(t.record, r.record, r.payload, r.label, ws);
        replaced = true;
        return nullptr;
      } catch (const Error& e) {
        if (!is_data_error(e.code())) return about_record(e, r.record);
        counters.corrupt.fetch_add(1, std::memory_order_relaxed);
        last = about_record(e, r.record);
      } catch (...) {
        return std::current_exception();
      }
    }
    return last ? last : std::make_exception_ptr(Error(errc::corrupt_tile, "no valid replacement record"));
  }

  // ---- batch mode (one thread drives the BatchBackend) -------------------------

  // One record of a window on its way through the backend.
  struct Pending {
    WorkerScratch ws;             // plans and destinations of the copies
    Task task;                    // the scheduled record
    Task candidate;               // what fills its slots now: the record itself or a replacement
    std::uint64_t attempt = 0;    // replacements tried
    Rect region{};
    bool done = false, replaced = false;
    std::exception_ptr error;
  };

  // The batch thread's buffers, reused from window to window.
  struct BatchScratch {
    std::vector<Pending> pending;
    std::vector<RecordJob> records;
    std::vector<ExampleJob> examples;
    std::vector<std::size_t> owner;  // pending index of each record job
    std::vector<errc> status;
  };

  void batch_loop() {
    BatchScratch bs;
    std::vector<Task> window;
    for (;;) {
      {
        std::unique_lock lock(m_);
        cv_work_.wait(lock, [&] { return shutdown || !windows.empty(); });
        if (windows.empty()) return;  // shutdown
        window = std::move(windows.front());
        windows.pop_front();
        ++in_flight;
      }
      cv_space_.notify_all();
      process_window(window, bs);
      {
        std::lock_guard lock(m_);
        --in_flight;
        window.clear();
        spare_window = std::move(window);  // the scheduler fills it again
      }
      cv_space_.notify_all();
    }
  }

  // A failure of p's candidate: the skip policy moves on to the next
  // replacement record; otherwise (or when none is left) p ends with the error.
  void candidate_failed(Pending& p, std::exception_ptr error, errc code) {
    if (opt.on_error != ErrorPolicy::skip || !is_data_error(code)) {
      p.error = std::move(error);
      p.done = true;
      return;
    }
    counters.corrupt.fetch_add(1, std::memory_order_relaxed);
    p.error = std::move(error);
    std::uint64_t record = 0;
    if (!replacement(p.task, ++p.attempt, record)) {
      if (p.attempt == 1)  // no replacement was tried (as replace() says)
        p.error = std::make_exception_ptr(Error(errc::corrupt_tile, "no valid replacement record"));
      p.done = true;
      return;
    }
    p.candidate = Task{};
    p.candidate.record = record;
    fetch(record, p.candidate, false);
  }

  void process_window(std::vector<Task>& tasks, BatchScratch& bs) {
    std::vector<Pending>& pending = bs.pending;
    std::vector<RecordJob>& records = bs.records;
    std::vector<ExampleJob>& examples = bs.examples;
    std::vector<std::size_t>& owner = bs.owner;
    std::vector<errc>& status = bs.status;
    if (pending.size() < tasks.size()) pending.resize(tasks.size());
    std::size_t n = 0;
    for (Task& t : tasks) {
      Pending& p = pending[n];
      p.ws.plans.resize(opt.echo);
      p.ws.dest_seq.resize(opt.echo);
      p.ws.dest_slot.resize(opt.echo);
      p.ws.dest_live.resize(opt.echo);
      if (!destinations(t, p.ws)) continue;
      p.task = std::move(t);
      p.candidate = p.task;
      p.attempt = 0;
      p.done = p.replaced = false;
      p.error = nullptr;
      ++n;
    }
    for (;;) {  // rounds: the window, then replacements of what failed
      const auto t0 = Clock::now();
      records.clear();
      examples.clear();
      owner.clear();
      for (std::size_t i = 0; i < n; ++i) {
        Pending& p = pending[i];
        while (!p.done) {  // host checks; a failing candidate moves on to the next
          try {
            if (p.candidate.read_error) std::rethrow_exception(p.candidate.read_error);
            ImageInfo info;
            p.region = plan_record(p.task.record, p.candidate.payload, p.ws, info);
            break;
          } catch (const Error& e) {
            candidate_failed(p, about_record(e, p.candidate.record), e.code());
          } catch (...) {
            p.error = std::current_exception();
            p.done = true;
          }
        }
        if (p.done) continue;
        const auto r = static_cast<std::uint32_t>(records.size());
        records.push_back({p.candidate.payload, p.region});
        owner.push_back(i);
        for (std::uint32_t c = 0; c < opt.echo; ++c)
          if (p.ws.dest_live[c]) examples.push_back({r, p.ws.plans[c], example_dst(p.ws, c)});
      }
      if (records.empty()) break;
      status.assign(records.size(), errc::ok);
      std::exception_ptr fatal_error;
      try {
        opt.batch_backend->run(records, examples, opt.transform, status);
      } catch (...) {
        fatal_error = std::current_exception();
      }
      counters.decode_ns.fetch_add(elapsed_ns(t0), std::memory_order_relaxed);
      for (std::size_t r = 0; r < records.size(); ++r) {
        Pending& p = pending[owner[r]];
        if (fatal_error) {  // not a record's fault: every record of the round raises it
          p.error = fatal_error;
          p.done = true;
        } else if (status[r] == errc::ok) {
          label_copies(p.ws, p.candidate.record, p.candidate.label);
          p.replaced = p.attempt > 0;
          p.error = nullptr;
          p.done = true;
        } else {
          candidate_failed(p, about_record(Error(status[r], "batch decode"), p.candidate.record), status[r]);
        }
      }
    }
    for (std::size_t i = 0; i < n; ++i) {
      Pending& p = pending[i];
      p.task.read_error = p.candidate.read_error = nullptr;
      settle(p.ws, std::move(p.error), p.replaced);
    }
  }

  // ---- consumer ---------------------------------------------------------------

  const Batch* next(void* consumer_stream) {
    std::unique_lock lock(m_);
    if (held) {
      // Before the slot can be claimed again: its next writes wait for the
      // consumer's work on it (device batches).
      if (opt.batch_backend) opt.batch_backend->release(held->data, consumer_stream);
      held->state = SlotState::free;
      held = nullptr;
      lock.unlock();
      cv_space_.notify_all();
      lock.lock();
    }
    if (next_seq >= run.total_batches) return nullptr;
    const auto t0 = Clock::now();
    if (!timing) {
      timing = true;
      t_first = t0;
    }
    Slot& s = ring[next_seq % ring.size()];
    cv_ready_.wait(lock, [&] { return fatal || (s.state == SlotState::ready && s.seq == next_seq); });
    if (!(s.state == SlotState::ready && s.seq == next_seq)) std::rethrow_exception(fatal);
    const auto t1 = Clock::now();
    const double waited = std::chrono::duration<double>(t1 - t0).count();
    m_wait += waited;
    m_max_wait = std::max(m_max_wait, waited);
    if (waited > 1e-3) ++m_stalled;
    t_last = t1;
    const std::uint64_t index = next_seq + run.skip;
    ++next_seq;
    if (s.error) {
      ++m_raised;
      std::exception_ptr e = s.error;
      s.error = nullptr;
      s.state = SlotState::free;
      lock.unlock();
      cv_space_.notify_all();
      std::rethrow_exception(e);
    }
    ++m_batches;
    m_examples += opt.batch_size;
    m_fresh += s.fresh;
    m_echoed += s.echoed;
    s.state = SlotState::held;
    held = &s;
    s.batch.epoch = run.epoch;
    s.batch.index = index;
    s.batch.wait_seconds = waited;
    return &s.batch;
  }

  ReaderState state() {
    std::lock_guard lock(m_);
    ReaderState st;
    st.seed = opt.seed;
    st.epoch = run.epoch;
    st.dataset_size = dataset->size();
    st.world_size = opt.world_size;
    const std::uint64_t done = next_seq + run.skip;  // batches of the run's windows delivered
    st.consumed = run.plan.consumed_after(done / window_batches);
    st.window_batches = done % window_batches;
    return st;
  }

  Metrics metrics() {
    Metrics m;
    {
      std::lock_guard lock(m_);
      m.batches = m_batches;
      m.examples = m_examples;
      m.fresh = m_fresh;
      m.echoed = m_echoed;
      m.raised = m_raised;
      m.wait_seconds = m_wait;
      m.max_wait_seconds = m_max_wait;
      m.stalled_batches = m_stalled;
      m.wall_seconds = timing ? std::chrono::duration<double>(t_last - t_first).count() : 0.0;
    }
    m.workers = opt.workers;
    m.busy.read = seconds(counters.read_ns.load());
    m.busy.decode = seconds(counters.decode_ns.load());
    m.busy.transform = seconds(counters.transform_ns.load());
    m.busy.assemble = seconds(counters.assemble_ns.load());
    m.bytes_read = counters.bytes_read.load();
    m.cache_hits = counters.hits.load();
    m.cache_misses = counters.misses.load();
    m.corrupt = counters.corrupt.load();
    m.replaced = counters.replaced.load();
    if (cache) {
      m.cache_bytes = cache->bytes();
      m.cache_records = cache->records();
    }
    return m;
  }

  void reset_metrics() {
    std::lock_guard lock(m_);
    m_batches = m_examples = m_fresh = m_echoed = m_raised = m_stalled = 0;
    m_wait = m_max_wait = 0;
    timing = false;
    for (auto* a : {&counters.read_ns, &counters.decode_ns, &counters.transform_ns, &counters.assemble_ns,
                    &counters.bytes_read, &counters.hits, &counters.misses, &counters.corrupt, &counters.replaced})
      a->store(0);
  }
};

Reader::Reader(std::shared_ptr<const Dataset> dataset, ReaderOptions options)
    : impl_(std::make_unique<Impl>(std::move(dataset), std::move(options))) {}

Reader Reader::open(const std::filesystem::path& dir, ReaderOptions options, DatasetOptions dataset_options) {
  return Reader(std::make_shared<const Dataset>(Dataset::open(dir, dataset_options)), std::move(options));
}

Reader::~Reader() = default;
Reader::Reader(Reader&&) noexcept = default;
Reader& Reader::operator=(Reader&&) noexcept = default;

const Batch* Reader::next(void* consumer_stream) { return impl_->next(consumer_stream); }

void Reader::set_epoch(std::uint64_t epoch) { impl_->start_run(epoch, 0, 0); }

std::uint64_t Reader::epoch() const noexcept { return impl_->run.epoch; }

std::uint64_t Reader::batches_in_epoch() const noexcept { return impl_->run.total_batches; }

ReaderState Reader::state() const { return impl_->state(); }

void Reader::restore(const ReaderState& st) {
  if (st.dataset_size != impl_->dataset->size())
    throw_error(errc::invalid_argument, "reader state: dataset size differs");
  if (st.consumed > st.dataset_size) throw_error(errc::invalid_argument, "reader state: consumed > dataset size");
  impl_->stop_run();
  impl_->opt.seed = st.seed;
  const bool same_world = st.world_size == impl_->opt.world_size;
  impl_->start_run(st.epoch, st.consumed, same_world ? st.window_batches : 0);
}

Metrics Reader::metrics() const { return impl_->metrics(); }
void Reader::reset_metrics() { impl_->reset_metrics(); }
const ReaderOptions& Reader::options() const noexcept { return impl_->opt; }
const Dataset& Reader::dataset() const noexcept { return *impl_->dataset; }

}  // namespace l3
