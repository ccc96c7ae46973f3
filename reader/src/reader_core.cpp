// The reader's core: options, the batch ring, runs, the scheduler (read
// stage) and the consumer side (reader_core.hpp).
#include "reader_core.hpp"

#include <algorithm>

namespace l3::detail {

namespace {

void validate_options(const ReaderOptions& o) {
  if (o.batch_size == 0) throw_error(errc::invalid_argument, "batch size must be > 0");
  if (o.workers == 0 || o.workers > 256) throw_error(errc::invalid_argument, "workers must be 1..256");
  if (o.prefetch == 0) throw_error(errc::invalid_argument, "prefetch must be >= 1");
  if (o.echo == 0) throw_error(errc::invalid_argument, "echo must be >= 1");
  if (o.world_size == 0 || o.rank >= o.world_size) throw_error(errc::invalid_argument, "rank must be < world size");
  validate(o.transform);
}

const Dataset& checked(const std::shared_ptr<const Dataset>& ds) {
  if (!ds) throw_error(errc::invalid_argument, "reader: no dataset");
  return *ds;
}

}  // namespace

ReaderCore::ReaderCore(std::shared_ptr<const Dataset> ds, ReaderOptions o)
    : dataset(std::move(ds)), opt(std::move(o)), source(checked(dataset), opt.verify, opt.cache_bytes, opt.peer_cache, counters) {
  validate_options(opt);
  window_batches = opt.echo_window ? opt.echo_window : opt.echo;
  const std::uint64_t window_examples = std::uint64_t{window_batches} * opt.batch_size;
  if (window_examples % opt.echo != 0)
    throw_error(errc::invalid_argument, "echo window * batch size must be a multiple of echo");
  fresh_per_window = window_examples / opt.echo;
  if (!opt.batch_backend) {
    // With Verify::yes every payload was checked against its record's XXH3
    // when read (or when it entered a cache): the stream's own checksum
    // covers the same bytes, so one pass over them is enough.
    if (!opt.decoder) opt.decoder = make_cpu_decode_backend(1, opt.limits, opt.verify == Verify::no);
    if (!opt.allocator) opt.allocator = make_cpu_batch_allocator();
  }
  if (opt.read_ahead == 0) opt.read_ahead = 2 * opt.batch_size;
  example_size = example_bytes(opt.transform);
  allocate_ring();
}

ReaderCore::~ReaderCore() { free_ring(); }

// A ring of prefetch + window batches, allocated once: by the batch backend
// (its memory) or the BatchAllocator.
void ReaderCore::allocate_ring() {
  const std::size_t bytes = example_size * opt.batch_size;
  const int device = opt.batch_backend && opt.batch_backend->memory() == BatchMemory::device
                         ? opt.batch_backend->device() : -1;
  ring.resize(std::size_t{window_batches} + opt.prefetch);
  try {
    for (Slot& s : ring) {
      s.data = opt.batch_backend ? opt.batch_backend->allocate(bytes) : opt.allocator->allocate(bytes, kBatchAlignment);
      s.labels.resize(opt.batch_size);
      s.records.resize(opt.batch_size);
      Batch& b = s.batch;
      b.data = s.data;
      b.bytes = bytes;
      b.size = opt.batch_size;
      b.channels = opt.transform.channels;
      b.height = opt.transform.height;
      b.width = opt.transform.width;
      b.layout = opt.transform.layout;
      b.dtype = opt.transform.dtype;
      b.device = device;
      b.labels = s.labels;
      b.records = s.records;
    }
  } catch (...) {
    free_ring();
    throw;
  }
}

void ReaderCore::free_ring() noexcept {
  const std::size_t bytes = example_size * opt.batch_size;
  for (Slot& s : ring) {
    if (!s.data) continue;
    if (opt.batch_backend) {
      opt.batch_backend->deallocate(s.data, bytes);
    } else {
      opt.allocator->deallocate(s.data, bytes, kBatchAlignment);
    }
    s.data = nullptr;
  }
}

// ---- runs -------------------------------------------------------------------

void ReaderCore::stop_run() {
  {
    std::lock_guard lock(m);
    stopping = true;
  }
  cv_space.notify_all();
  if (scheduler_.joinable()) scheduler_.join();
  std::unique_lock lock(m);
  if (pipeline_) pipeline_->drop_queued();
  cv_space.wait(lock, [&] { return in_flight == 0; });
  if (held_ && pipeline_) pipeline_->release(held_->data, nullptr);
  held_ = nullptr;
  for (Slot& s : ring) {
    s.state = SlotState::free;
    s.error = nullptr;
  }
}

void ReaderCore::shut_down() {
  {
    std::lock_guard lock(m);
    shutdown = true;
  }
  cv_work.notify_all();
}

void ReaderCore::start_run(std::uint64_t epoch, std::uint64_t start, std::uint64_t skip) {
  stop_run();
  const std::uint64_t n = dataset->size();
  std::lock_guard lock(m);
  run.epoch = epoch;
  run.order = EpochOrder(n, OrderOptions{opt.seed, opt.shuffle, opt.block_size}, epoch);
  run.plan = RankPlan(n, start, opt.world_size, opt.rank, fresh_per_window, opt.remainder);
  const std::uint64_t planned = run.plan.steps() * window_batches;
  run.skip = std::min(skip, planned);
  run.total_batches = planned - run.skip;
  next_seq_ = 0;
  fatal_ = nullptr;
  stopping = false;
  // With a peer cache only the tails: records come from their owner or one
  // ranged GET each (spec/format.md §8.6.3).
  if (is_remote(dataset->directory())) dataset->prefetch_records(records_in_run_order(), source.peers() == nullptr);
  scheduler_ = std::thread([this] { scheduler_loop(); });
}

// The records of this rank's run in the order it reads them: a remote
// dataset fetches their shards' tails and blocks in this order, ahead of the
// scheduler (spec/format.md §8.5.1).
std::vector<std::uint64_t> ReaderCore::records_in_run_order() const {
  const std::uint64_t positions = run.plan.steps() * fresh_per_window;
  std::vector<std::uint64_t> order(static_cast<std::size_t>(positions));
  for (std::uint64_t j = 0; j < positions; ++j) order[static_cast<std::size_t>(j)] = run.order[run.plan.position(j)];
  return order;
}

// ---- read stage (scheduler thread) ------------------------------------------

// Claims the batch slots of window w (from batch first_k on); false: stopping.
bool ReaderCore::claim_window(std::uint64_t w, std::uint64_t first_k) {
  std::unique_lock lock(m);
  for (std::uint64_t k = first_k; k < window_batches; ++k) {
    const std::uint64_t seq = w * window_batches + k - run.skip;
    Slot& s = ring[seq % ring.size()];
    cv_space.wait(lock, [&] { return stopping || s.state == SlotState::free; });
    if (stopping) return false;
    s.state = SlotState::filling;
    s.seq = seq;
    s.remaining = opt.batch_size;
    s.fresh = s.echoed = 0;
    s.error = nullptr;
  }
  return true;
}

// Restore inside a window: false for a record whose copies were all delivered.
bool ReaderCore::any_copy_live(std::uint64_t w, std::uint32_t fresh, std::uint64_t first_k) const {
  for (std::uint32_t c = 0; c < opt.echo; ++c)
    if (example_offset(w, fresh, c) / opt.batch_size >= first_k) return true;
  return false;
}

void ReaderCore::scheduler_loop() {
  try {
    const std::uint64_t steps = run.plan.steps();
    for (std::uint64_t w = 0; w < steps; ++w) {
      const std::uint64_t first_k = w == 0 ? run.skip : 0;
      if (!claim_window(w, first_k)) return;
      for (std::uint64_t f = 0; f < fresh_per_window; ++f) {
        const auto fi = static_cast<std::uint32_t>(f);
        if (first_k > 0 && !any_copy_live(w, fi, first_k)) continue;
        Task t;
        t.window = w;
        t.fresh = fi;
        t.record = run.order[run.plan.position(w * fresh_per_window + f)];
        source.fetch(t.record, t, true);
        if (!pipeline_->accept(std::move(t))) return;
      }
      if (!pipeline_->end_window()) return;
    }
  } catch (...) {
    std::lock_guard lock(m);
    fatal_ = std::current_exception();
  }
  cv_ready.notify_all();
}

// ---- consumer ---------------------------------------------------------------

bool ReaderCore::release_held(std::span<void* const> consumer_streams) noexcept {
  if (!held_) return false;
  // Before the slot can be claimed again: its next writes wait for the
  // consumers' work on it (device batches; an event per stream).
  if (pipeline_) {
    if (consumer_streams.empty()) pipeline_->release(held_->data, nullptr);
    for (void* s : consumer_streams) pipeline_->release(held_->data, s);
  }
  held_->state = SlotState::free;
  held_ = nullptr;
  return true;
}

const Batch* ReaderCore::next(std::span<void* const> consumer_streams) {
  std::unique_lock lock(m);
  if (release_held(consumer_streams)) {
    lock.unlock();
    cv_space.notify_all();
    lock.lock();
  }
  if (next_seq_ >= run.total_batches) return nullptr;
  const auto t0 = Clock::now();
  if (!timing_) {
    timing_ = true;
    t_first_ = t0;
  }
  Slot& s = ring[next_seq_ % ring.size()];
  cv_ready.wait(lock, [&] { return fatal_ || (s.state == SlotState::ready && s.seq == next_seq_); });
  if (!(s.state == SlotState::ready && s.seq == next_seq_)) std::rethrow_exception(fatal_);
  const auto t1 = Clock::now();
  const double waited = std::chrono::duration<double>(t1 - t0).count();
  m_wait_ += waited;
  m_max_wait_ = std::max(m_max_wait_, waited);
  if (waited > 1e-3) ++m_stalled_;
  t_last_ = t1;
  const std::uint64_t index = next_seq_ + run.skip;
  ++next_seq_;
  if (s.error) {
    ++m_raised_;
    std::exception_ptr e = s.error;
    s.error = nullptr;
    s.state = SlotState::free;
    lock.unlock();
    cv_space.notify_all();
    std::rethrow_exception(e);
  }
  ++m_batches_;
  m_examples_ += opt.batch_size;
  m_fresh_ += s.fresh;
  m_echoed_ += s.echoed;
  s.state = SlotState::held;
  held_ = &s;
  s.batch.epoch = run.epoch;
  s.batch.index = index;
  s.batch.wait_seconds = waited;
  return &s.batch;
}

// The slot is held, so no task writes it; the scheduler claims it again only
// after release_held, under m, and so sees the new buffer (example_dst).
// held_ changes only in the consumer's calls, so it holds across the unlocked
// allocation.
void* ReaderCore::detach() {
  if (opt.batch_backend) throw_error(errc::invalid_argument, "detach: batches of a batch backend stay in its memory");
  {
    std::lock_guard lock(m);
    if (!held_) throw_error(errc::invalid_argument, "detach: no batch handed out");
  }
  void* fresh = opt.allocator->allocate(example_size * opt.batch_size, kBatchAlignment);
  std::lock_guard lock(m);
  void* taken = held_->data;
  held_->data = fresh;
  held_->batch.data = fresh;
  return taken;
}

ReaderState ReaderCore::state() {
  std::lock_guard lock(m);
  ReaderState st;
  st.seed = opt.seed;
  st.epoch = run.epoch;
  st.dataset_size = dataset->size();
  st.world_size = opt.world_size;
  const std::uint64_t done = next_seq_ + run.skip;  // batches of the run's windows delivered
  st.consumed = run.plan.consumed_after(done / window_batches);
  st.window_batches = done % window_batches;
  return st;
}

Metrics ReaderCore::metrics() {
  Metrics mt;
  {
    std::lock_guard lock(m);
    mt.batches = m_batches_;
    mt.examples = m_examples_;
    mt.fresh = m_fresh_;
    mt.echoed = m_echoed_;
    mt.raised = m_raised_;
    mt.wait_seconds = m_wait_;
    mt.max_wait_seconds = m_max_wait_;
    mt.stalled_batches = m_stalled_;
    mt.wall_seconds = timing_ ? std::chrono::duration<double>(t_last_ - t_first_).count() : 0.0;
  }
  mt.workers = opt.workers;
  mt.busy.read = seconds(counters.read_ns.load());
  mt.busy.decode = seconds(counters.decode_ns.load());
  mt.busy.transform = seconds(counters.transform_ns.load());
  mt.busy.assemble = seconds(counters.assemble_ns.load());
  mt.bytes_read = counters.bytes_read.load();
  mt.records_read = counters.records_read.load();
  mt.peer_cache = source.peers() != nullptr;
  if (const PeerCache* peers = source.peers()) mt.peer = peers->stats();
  mt.cache_hits = counters.hits.load();
  mt.cache_misses = counters.misses.load();
  mt.corrupt = counters.corrupt.load();
  mt.replaced = counters.replaced.load();
  if (const RecordCache* cache = source.cache()) {
    mt.cache_bytes = cache->bytes();
    mt.cache_records = cache->records();
  }
  return mt;
}

void ReaderCore::reset_metrics() {
  std::lock_guard lock(m);
  m_batches_ = m_examples_ = m_fresh_ = m_echoed_ = m_raised_ = m_stalled_ = 0;
  m_wait_ = m_max_wait_ = 0;
  timing_ = false;
  counters.reset();
  if (PeerCache* peers = source.peers()) peers->reset_stats();
}

}  // namespace l3::detail
