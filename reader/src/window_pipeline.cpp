// The window pipeline (reader_core.hpp, ReaderOptions::batch_backend): the
// scheduler hands whole echo windows to one thread, which plans every
// record's copies on the host and has the BatchBackend decode and transform
// the window at once (in device memory for the CUDA backend); replacements
// of corrupt records (skip policy) go to the backend in further, smaller
// rounds.
#include <deque>
#include <thread>
#include <vector>

#include "reader_core.hpp"

namespace l3::detail {
namespace {

// One record of a window on its way through the backend.
struct Pending {
  Placement placement;  // plans and destinations of the copies
  Place place;          // the replacement policy's state
  Rect region{};
};

// The window thread's buffers, reused from window to window.
struct WindowScratch {
  std::vector<Pending> pending;
  std::size_t count = 0;  // pending[0, count) are this window's
  std::vector<RecordJob> records;
  std::vector<ExampleJob> examples;
  std::vector<std::size_t> owner;  // pending index of each record job
  std::vector<errc> status;
};

class WindowPipeline final : public Pipeline {
public:
  explicit WindowPipeline(ReaderCore& core) : core_(core), opt_(core.opt), backend_(*core.opt.batch_backend) {
    thread_ = std::thread([this] { window_loop(); });
  }
  ~WindowPipeline() override {
    core_.shut_down();
    thread_.join();
  }

  bool accept(Task&& t) override {  // scheduler thread only
    filling_.push_back(std::move(t));
    return true;
  }
  bool end_window() override {  // the whole window to the window thread
    std::unique_lock lock(core_.m);
    core_.cv_space.wait(lock, [&] { return core_.stopping || windows_.empty(); });
    if (core_.stopping) return false;
    windows_.push_back(std::move(filling_));
    filling_ = std::move(spare_);
    lock.unlock();
    core_.cv_work.notify_one();
    return true;
  }
  void drop_queued() override {
    windows_.clear();
    filling_.clear();
  }
  void release(void* buffer, void* stream) noexcept override { backend_.release(buffer, stream); }

private:
  void window_loop() {
    WindowScratch ws;
    std::vector<Task> window;
    for (;;) {
      {
        std::unique_lock lock(core_.m);
        core_.cv_work.wait(lock, [&] { return core_.shutdown || !windows_.empty(); });
        if (windows_.empty()) return;  // shutdown
        window = std::move(windows_.front());
        windows_.pop_front();
        ++core_.in_flight;
      }
      core_.cv_space.notify_all();
      process_window(window, ws);
      {
        std::lock_guard lock(core_.m);
        --core_.in_flight;
        window.clear();
        spare_ = std::move(window);  // the scheduler fills it again
      }
      core_.cv_space.notify_all();
    }
  }

  // The window's records with a live copy enter pending[0, count).
  void start_window(std::vector<Task>& tasks, WindowScratch& ws) {
    if (ws.pending.size() < tasks.size()) ws.pending.resize(tasks.size());
    ws.count = 0;
    for (Task& t : tasks) {
      Pending& p = ws.pending[ws.count];
      p.placement.resize(opt_.echo);
      if (!core_.destinations(t, p.placement)) continue;
      p.place.start(std::move(t));
      ++ws.count;
    }
  }

  // Host checks of p's candidate (header, channels, plans); a failing
  // candidate moves on to the next. False when p is done.
  bool plan_candidate(Pending& p) {
    Place& place = p.place;
    while (!place.done) {
      try {
        if (place.candidate.read_error) std::rethrow_exception(place.candidate.read_error);
        ImageInfo info;
        p.region = core_.plan_record(place.task.record, place.candidate.payload, p.placement, info);
        return true;
      } catch (const Error& e) {
        core_.candidate_failed(place, core_.about_record(e, place.candidate.record), e.code());
      } catch (...) {
        place.fail(std::current_exception());
      }
    }
    return false;
  }

  // One backend run of every pending candidate; false when none is left.
  bool run_round(WindowScratch& ws) {
    const auto t0 = Clock::now();
    ws.records.clear();
    ws.examples.clear();
    ws.owner.clear();
    for (std::size_t i = 0; i < ws.count; ++i) {
      Pending& p = ws.pending[i];
      if (!plan_candidate(p)) continue;
      const auto r = static_cast<std::uint32_t>(ws.records.size());
      ws.records.push_back({p.place.candidate.payload, p.region});
      ws.owner.push_back(i);
      for (std::uint32_t c = 0; c < opt_.echo; ++c)
        if (p.placement.live[c]) ws.examples.push_back({r, p.placement.plans[c], core_.example_dst(p.placement, c)});
    }
    if (ws.records.empty()) return false;
    ws.status.assign(ws.records.size(), errc::ok);
    std::exception_ptr fatal_error;
    try {
      backend_.run(ws.records, ws.examples, opt_.transform, ws.status);
    } catch (...) {
      fatal_error = std::current_exception();
    }
    core_.counters.decode_ns.fetch_add(elapsed_ns(t0), std::memory_order_relaxed);
    for (std::size_t r = 0; r < ws.records.size(); ++r) settle_round(ws.pending[ws.owner[r]], ws.status[r], fatal_error);
    return true;
  }

  void settle_round(Pending& p, errc status, const std::exception_ptr& fatal_error) {
    Place& place = p.place;
    if (fatal_error) {  // not a record's fault: every record of the round raises it
      place.fail(fatal_error);
    } else if (status == errc::ok) {
      core_.label_copies(p.placement, place.candidate.record, place.candidate.label);
      place.succeed();
    } else {
      core_.candidate_failed(place, core_.about_record(Error(status, "batch decode"), place.candidate.record), status);
    }
  }

  void process_window(std::vector<Task>& tasks, WindowScratch& ws) {
    start_window(tasks, ws);
    while (run_round(ws)) {  // rounds: the window, then replacements of what failed
    }
    for (std::size_t i = 0; i < ws.count; ++i) {
      Pending& p = ws.pending[i];
      p.place.drop_read_errors();
      core_.settle(p.placement, std::move(p.place.error), p.place.replaced);
    }
  }

  ReaderCore& core_;
  const ReaderOptions& opt_;
  BatchBackend& backend_;
  std::deque<std::vector<Task>> windows_;  // whole windows, at most one queued (under core_.m)
  std::vector<Task> spare_;                // a processed window's vector, for reuse (under core_.m)
  std::vector<Task> filling_;              // the window the scheduler fills
  std::thread thread_;
};

}  // namespace

std::unique_ptr<Pipeline> make_window_pipeline(ReaderCore& core) { return std::make_unique<WindowPipeline>(core); }

}  // namespace l3::detail
