// Reader: the core (reader_core.hpp: ring, runs, read stage, consumer) and
// the pipeline after read that the options choose: whole windows through a
// BatchBackend (window_pipeline.cpp) or per-record CPU workers
// (worker_pipeline.cpp).
#include "l3/reader/reader.hpp"

#include "reader_core.hpp"

namespace l3 {

struct Reader::Impl {
  detail::ReaderCore core;
  std::unique_ptr<detail::Pipeline> pipeline;  // destroyed first: joins its threads

  Impl(std::shared_ptr<const Dataset> dataset, ReaderOptions options) : core(std::move(dataset), std::move(options)) {
    pipeline = core.opt.batch_backend ? detail::make_window_pipeline(core) : detail::make_worker_pipeline(core);
    core.attach(pipeline.get());
    core.start_run(core.opt.epoch, 0, 0);
  }
  ~Impl() { core.stop_run(); }
};

Reader::Reader(std::shared_ptr<const Dataset> dataset, ReaderOptions options)
    : impl_(std::make_unique<Impl>(std::move(dataset), std::move(options))) {}

Reader Reader::open(const std::filesystem::path& dir, ReaderOptions options, DatasetOptions dataset_options) {
  return Reader(std::make_shared<const Dataset>(Dataset::open(dir, dataset_options)), std::move(options));
}

Reader::~Reader() = default;
Reader::Reader(Reader&&) noexcept = default;
Reader& Reader::operator=(Reader&&) noexcept = default;

const Batch* Reader::next(std::span<void* const> consumer_streams) { return impl_->core.next(consumer_streams); }

const Batch* Reader::next(void* consumer_stream) { return impl_->core.next({&consumer_stream, 1}); }

void Reader::release(std::span<void* const> consumer_streams) {
  detail::ReaderCore& core = impl_->core;
  bool released = false;
  {
    std::lock_guard lock(core.m);
    released = core.release_held(consumer_streams);
  }
  if (released) core.cv_space.notify_all();
}

void* Reader::detach() { return impl_->core.detach(); }

void Reader::set_epoch(std::uint64_t epoch) { impl_->core.start_run(epoch, 0, 0); }

std::uint64_t Reader::epoch() const noexcept { return impl_->core.run.epoch; }

std::uint64_t Reader::batches_in_epoch() const noexcept { return impl_->core.run.total_batches; }

ReaderState Reader::state() const { return impl_->core.state(); }

void Reader::restore(const ReaderState& st) {
  detail::ReaderCore& core = impl_->core;
  if (st.dataset_size != core.dataset->size()) throw_error(errc::invalid_argument, "reader state: dataset size differs");
  if (st.consumed > st.dataset_size) throw_error(errc::invalid_argument, "reader state: consumed > dataset size");
  core.stop_run();
  core.opt.seed = st.seed;
  const bool same_world = st.world_size == core.opt.world_size;
  core.start_run(st.epoch, st.consumed, same_world ? st.window_batches : 0);
}

Metrics Reader::metrics() const { return impl_->core.metrics(); }
void Reader::reset_metrics() { impl_->core.reset_metrics(); }
const ReaderOptions& Reader::options() const noexcept { return impl_->core.opt; }
const Dataset& Reader::dataset() const noexcept { return *impl_->core.dataset; }

}  // namespace l3
