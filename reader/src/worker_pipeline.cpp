// The worker pipeline (reader_core.hpp): `workers` CPU threads take records
// from a bounded queue; each decodes its record once (the union of its
// copies' crop boxes, through the DecodeBackend) and writes every live copy,
// cropped, resized, flipped and assembled, into its batch slot.
#include <chrono>
#include <thread>
#include <vector>

#include "reader_core.hpp"

namespace l3::detail {
namespace {

struct WorkerScratch {
  Placement placement;
  TransformScratch transform;
  std::vector<std::uint8_t> decoded;
};

class WorkerPipeline final : public Pipeline {
public:
  explicit WorkerPipeline(ReaderCore& core) : core_(core), opt_(core.opt), queue_(core.opt.read_ahead) {
    try {
      for (std::uint32_t i = 0; i < opt_.workers; ++i) threads_.emplace_back([this] { worker_loop(); });
    } catch (...) {
      join();
      throw;
    }
  }
  ~WorkerPipeline() override { join(); }

  bool accept(Task&& t) override {
    std::unique_lock lock(core_.m);
    core_.cv_space.wait(lock, [&] { return core_.stopping || q_count_ < queue_.size(); });
    if (core_.stopping) return false;
    queue_[(q_head_ + q_count_) % queue_.size()] = std::move(t);
    ++q_count_;
    lock.unlock();
    core_.cv_work.notify_one();
    return true;
  }
  bool end_window() override { return true; }
  void drop_queued() override {
    q_head_ = q_count_ = 0;
    for (Task& t : queue_) t = Task{};
  }

private:
  void join() {
    core_.shut_down();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

  void worker_loop() {
    WorkerScratch ws;
    ws.placement.resize(opt_.echo);
    for (;;) {
      Task t;
      {
        std::unique_lock lock(core_.m);
        core_.cv_work.wait(lock, [&] { return core_.shutdown || q_count_ > 0; });
        if (q_count_ == 0) return;  // shutdown
        t = std::move(queue_[q_head_]);
        queue_[q_head_] = Task{};
        q_head_ = (q_head_ + 1) % queue_.size();
        --q_count_;
        ++core_.in_flight;
      }
      core_.cv_space.notify_all();
      process(std::move(t), ws);
      {
        std::lock_guard lock(core_.m);
        --core_.in_flight;
      }
      core_.cv_space.notify_all();
    }
  }

  // The record, or (skip policy) its replacements one after another, until
  // one fills the place's copies or the policy gives up.
  void process(Task&& t, WorkerScratch& ws) {
    if (!core_.destinations(t, ws.placement)) return;
    Place place;
    place.start(std::move(t));
    while (!place.done) {
      try {
        const Task& c = place.candidate;
        if (c.read_error) std::rethrow_exception(c.read_error);
        produce(place.task.record, c.record, c.payload, c.label, ws);
        place.succeed();
      } catch (const Error& e) {
        core_.candidate_failed(place, core_.about_record(e, place.candidate.record), e.code());
      } catch (...) {
        place.fail(std::current_exception());
      }
    }
    place.drop_read_errors();
    core_.settle(ws.placement, std::move(place.error), place.replaced);
  }

  // Decodes `payload` once and writes every live copy into its slot.
  void produce(std::uint64_t seed_record, std::uint64_t record, std::span<const std::uint8_t> payload,
               std::int64_t label, WorkerScratch& ws) {
    auto t0 = Clock::now();
    ImageInfo info;
    const Placement& p = ws.placement;
    const Rect region = core_.plan_record(seed_record, payload, ws.placement, info);
    const std::size_t stride = std::size_t{region.width} * info.channels;
    ws.decoded.resize(stride * region.height);
    const DecodeJob job{payload, region,
                        MutableImageView{ws.decoded.data(), region.width, region.height, info.channels, stride}};
    opt_.decoder->decode(std::span<const DecodeJob>(&job, 1));
    core_.counters.decode_ns.fetch_add(elapsed_ns(t0), std::memory_order_relaxed);

    const ImageView src{ws.decoded.data(), job.out.width, job.out.height, info.channels, stride};
    for (std::uint32_t c = 0; c < opt_.echo; ++c) {
      if (!p.live[c]) continue;
      // Crop, resize, flip and assembly are one pass (the last writes the slot in
      // the output dtype and layout): counted as transform; assemble stays 0.
      t0 = Clock::now();
      crop_resize_assemble(src, job.region.x, job.region.y, p.plans[c], opt_.transform, ws.transform,
                           core_.example_dst(p, c));
      core_.counters.transform_ns.fetch_add(elapsed_ns(t0), std::memory_order_relaxed);
    }
    core_.label_copies(p, record, label);
  }

  ReaderCore& core_;
  const ReaderOptions& opt_;
  std::vector<Task> queue_;  // ring of read_ahead records, under core_.m
  std::size_t q_head_ = 0, q_count_ = 0;
  std::vector<std::thread> threads_;
};

}  // namespace

std::unique_ptr<Pipeline> make_worker_pipeline(ReaderCore& core) { return std::make_unique<WorkerPipeline>(core); }

}  // namespace l3::detail
