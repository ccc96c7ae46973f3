// The reader's core (internal): validated options, the ring of batch slots,
// runs (an epoch, or its rest after restore), the read stage's scheduler
// thread, where a record's copies go in the ring, the one replacement policy
// for corrupt records (ErrorPolicy::skip), and the consumer side (next, state,
// metrics). What follows the read stage is a Pipeline:
//   worker pipeline (worker_pipeline.cpp): `workers` CPU threads take records
//     one at a time, decode each once through the DecodeBackend and write
//     every copy's crop into its slot;
//   window pipeline (window_pipeline.cpp): one thread hands whole echo windows
//     to the BatchBackend (decode and transforms at once, in device memory for
//     the CUDA backend), replacements of corrupt records in further rounds.
//
// Locking: one mutex (m) guards the pipelines' queues, the batch ring and the
// run's bookkeeping; three condition variables wake the scheduler (space),
// the pipeline's threads (work) and the consumer (ready). Stage work
// (fetching, decoding, resizing, assembling) runs outside the lock.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "l3/reader/reader.hpp"
#include "record_source.hpp"

namespace l3::detail {

// Where the copies of one record go in the ring, and their crop plans.
struct Placement {
  std::vector<ExamplePlan> plans;
  std::vector<std::uint32_t> seq, slot;  // per copy: ring sequence and example index in that batch
  std::vector<bool> live;                // false: restore skipped the batch of this copy
  void resize(std::uint32_t echo) {
    plans.resize(echo);
    seq.resize(echo);
    slot.resize(echo);
    live.resize(echo);
  }
};

// A record's place while a pipeline fills it: the state of the replacement
// policy. `candidate` fills the place's slots now: the scheduled record
// itself, or (skip policy) its attempt-th replacement.
struct Place {
  Task task;
  Task candidate;
  std::uint64_t attempt = 0;
  bool done = false, replaced = false;
  std::exception_ptr error;

  void start(Task&& t) {
    task = std::move(t);
    candidate = task;
    attempt = 0;
    done = replaced = false;
    error = nullptr;
  }
  // The candidate's copies are written.
  void succeed() {
    replaced = attempt > 0;
    error = nullptr;
    done = true;
  }
  // Not the record's fault, or no policy applies: the place ends with `e`.
  void fail(std::exception_ptr e) {
    error = std::move(e);
    done = true;
  }
  // Before the error is handed to the consumer (ReaderCore::settle): the
  // tasks drop their references to read errors.
  void drop_read_errors() { task.read_error = candidate.read_error = nullptr; }
};

class ReaderCore;

// The stage after read. The scheduler thread calls accept() for each record
// of a window and end_window() after its last; both return false when the
// run is stopping.
class Pipeline {
public:
  virtual ~Pipeline() = default;
  virtual bool accept(Task&& t) = 0;
  virtual bool end_window() = 0;
  // Under ReaderCore::m, the scheduler joined: queued work is dropped.
  virtual void drop_queued() = 0;
  // The consumer has enqueued its reads of the batch in `buffer` on `stream`
  // (device batches; see BatchBackend::release).
  virtual void release(void* buffer, void* stream) noexcept {
    (void)buffer;
    (void)stream;
  }
};

std::unique_ptr<Pipeline> make_worker_pipeline(ReaderCore& core);
std::unique_ptr<Pipeline> make_window_pipeline(ReaderCore& core);

class ReaderCore {
public:
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
  // What a run needs; written only while no scheduler or task is alive.
  struct Run {
    std::uint64_t epoch = 0;
    EpochOrder order;
    RankPlan plan;
    std::uint64_t skip = 0;           // batches of window 0 already delivered (restore)
    std::uint64_t total_batches = 0;  // batches this run delivers
  };

  ReaderCore(std::shared_ptr<const Dataset> dataset, ReaderOptions options);
  ~ReaderCore();
  ReaderCore(const ReaderCore&) = delete;
  ReaderCore& operator=(const ReaderCore&) = delete;

  // ---- runs (reader_core.cpp) ----
  void attach(Pipeline* pipeline) { pipeline_ = pipeline; }
  void start_run(std::uint64_t epoch, std::uint64_t start, std::uint64_t skip);
  void stop_run();
  // Wakes the pipeline's threads for good; they return once their queue is empty.
  void shut_down();

  // ---- consumer (reader_core.cpp) ----
  const Batch* next(std::span<void* const> consumer_streams);
  // Under m: the batch last handed out goes back to the ring once the work
  // enqueued on each stream has run (device batches); false when none is out.
  bool release_held(std::span<void* const> consumer_streams) noexcept;
  void* detach();  // Reader::detach
  ReaderState state();
  Metrics metrics();
  void reset_metrics();

  // ---- placement and replacement (placement.cpp), for the pipelines ----
  // Where copy c of `t` goes: p.seq/slot/live; false when no copy is live.
  bool destinations(const Task& t, Placement& p) const;
  // Reads the header and draws every copy's plan from the RNG of
  // `seed_record` (the record whose place this is, also when a replacement
  // fills it); returns the union of the live copies' boxes.
  Rect plan_record(std::uint64_t seed_record, std::span<const std::uint8_t> payload, Placement& p, ImageInfo& info) const;
  std::uint8_t* example_dst(const Placement& p, std::uint32_t c) const;
  void label_copies(const Placement& p, std::uint64_t record, std::int64_t label);
  // Counts the copies into their slots and wakes the consumer (see placement.cpp).
  void settle(const Placement& p, std::exception_ptr&& error, bool replaced);
  // The replacement policy: the candidate of `place` failed with `error`
  // (code `code`). Skip policy and a data error: the next replacement becomes
  // the candidate (fetched); otherwise, or when none is left, the place ends.
  void candidate_failed(Place& place, std::exception_ptr error, errc code);
  // A record's error naming its shard file, index and key.
  std::exception_ptr about_record(const Error& e, std::uint64_t record) const;

  std::shared_ptr<const Dataset> dataset;
  ReaderOptions opt;
  std::uint32_t window_batches = 1;  // batches per echo window
  std::uint64_t fresh_per_window = 1;
  std::size_t example_size = 0;
  Counters counters;
  RecordSource source;

  std::mutex m;
  std::condition_variable cv_space, cv_work, cv_ready;
  std::vector<Slot> ring;
  std::uint32_t in_flight = 0;  // tasks or windows a pipeline thread works on
  bool stopping = false, shutdown = false;
  Run run;

private:
  void allocate_ring();
  void free_ring() noexcept;
  std::vector<std::uint64_t> records_in_run_order() const;
  void scheduler_loop();
  bool claim_window(std::uint64_t w, std::uint64_t first_k);
  bool any_copy_live(std::uint64_t w, std::uint32_t fresh, std::uint64_t first_k) const;
  std::uint64_t example_offset(std::uint64_t window, std::uint32_t fresh, std::uint32_t copy) const;
  bool replacement(const Task& t, std::uint64_t a, std::uint64_t& record) const;

  Pipeline* pipeline_ = nullptr;
  std::exception_ptr fatal_;  // scheduler failure
  std::thread scheduler_;
  std::uint64_t next_seq_ = 0;
  Slot* held_ = nullptr;

  // Metrics kept by the consumer (under m).
  std::uint64_t m_batches_ = 0, m_examples_ = 0, m_fresh_ = 0, m_echoed_ = 0, m_raised_ = 0, m_stalled_ = 0;
  double m_wait_ = 0, m_max_wait_ = 0;
  bool timing_ = false;
  Clock::time_point t_first_{}, t_last_{};
};

}  // namespace l3::detail
