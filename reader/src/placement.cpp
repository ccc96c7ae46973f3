// Where a record's copies go in the batch ring, and the one replacement
// policy for corrupt records, shared by both pipelines (reader_core.hpp).
#include <algorithm>
#include <string>

#include "reader_core.hpp"

namespace l3::detail {

// Example `copy` of window-record `fresh` lands at this offset of the window.
std::uint64_t ReaderCore::example_offset(std::uint64_t window, std::uint32_t fresh, std::uint32_t copy) const {
  if (opt.echo == 1 && window_batches == 1) return fresh;
  const std::uint64_t n = fresh_per_window * opt.echo;
  const std::uint64_t key = xf::hash_words(opt.seed, run.epoch, run.plan.position(window * fresh_per_window), 0xec40ULL);
  return Permutation(n, key).inverse(std::uint64_t{fresh} * opt.echo + copy);
}

bool ReaderCore::destinations(const Task& t, Placement& p) const {
  bool any = false;
  for (std::uint32_t c = 0; c < opt.echo; ++c) {
    const std::uint64_t off = example_offset(t.window, t.fresh, c);
    const std::uint64_t k = off / opt.batch_size;
    const bool live = !(t.window == 0 && k < run.skip);
    p.live[c] = live;
    any = any || live;
    if (live) {
      p.seq[c] = static_cast<std::uint32_t>((t.window * window_batches + k - run.skip) % ring.size());
      p.slot[c] = static_cast<std::uint32_t>(off % opt.batch_size);
    }
  }
  return any;
}

Rect ReaderCore::plan_record(std::uint64_t seed_record, std::span<const std::uint8_t> payload, Placement& p,
                             ImageInfo& info) const {
  info = read_info(payload, opt.limits);
  check_output_channels(info.channels, opt.transform.channels);
  xf::Box u{};
  bool any = false;
  for (std::uint32_t c = 0; c < opt.echo; ++c) {
    xf::Rng rng = xf::example_rng(opt.seed, run.epoch, seed_record, c);
    p.plans[c] = plan_example(opt.transform, info.width, info.height, rng);
    if (!p.live[c]) continue;
    u = any ? xf::union_box(u, p.plans[c].box) : p.plans[c].box;
    any = true;
  }
  return Rect{static_cast<std::uint32_t>(u.x), static_cast<std::uint32_t>(u.y), static_cast<std::uint32_t>(u.w),
              static_cast<std::uint32_t>(u.h)};
}

// Each (slot, offset) is written by exactly one task; the slot is not read
// before its count reaches zero under m.
std::uint8_t* ReaderCore::example_dst(const Placement& p, std::uint32_t c) const {
  const Slot& s = ring[p.seq[c] % ring.size()];
  return static_cast<std::uint8_t*>(s.data) + std::size_t{p.slot[c]} * example_size;
}

void ReaderCore::label_copies(const Placement& p, std::uint64_t record, std::int64_t label) {
  for (std::uint32_t c = 0; c < opt.echo; ++c) {
    if (!p.live[c]) continue;
    Slot& s = ring[p.seq[c] % ring.size()];
    s.labels[p.slot[c]] = label;
    s.records[p.slot[c]] = record;
  }
}

// Counts the live copies into their slots (under m) and wakes the consumer
// for a slot that is complete. `error` is handed over: the pipeline's
// reference is dropped under m, so the exception object is freed by the
// consumer (which reads it), never by a pipeline thread racing with that read.
// The caller has dropped its other references (Place::drop_read_errors).
void ReaderCore::settle(const Placement& p, std::exception_ptr&& error, bool replaced) {
  std::lock_guard lock(m);
  const std::exception_ptr handed = std::move(error);
  for (std::uint32_t c = 0; c < opt.echo; ++c) {
    if (!p.live[c]) continue;
    Slot& s = ring[p.seq[c] % ring.size()];
    if (handed && !s.error) s.error = handed;
    if (c == 0) ++s.fresh; else ++s.echoed;
    if (--s.remaining == 0) {
      s.state = SlotState::ready;
      cv_ready.notify_all();
    }
  }
  if (replaced) counters.replaced.fetch_add(1, std::memory_order_relaxed);
}

std::exception_ptr ReaderCore::about_record(const Error& e, std::uint64_t record) const {
  const std::string where = "record " + std::to_string(record) + " (" + dataset->describe(record) + ")";
  return std::make_exception_ptr(with_context(e, where));
}

// ---- the replacement policy (ErrorPolicy::skip) ------------------------------

// The record that stands in for `t` at attempt a >= 1: the a-th next record
// of this rank's sequence; none past the attempt limit.
bool ReaderCore::replacement(const Task& t, std::uint64_t a, std::uint64_t& record) const {
  const std::uint64_t length = run.plan.length();
  if (a > opt.max_replacements || a >= std::max<std::uint64_t>(length, 2)) return false;
  const std::uint64_t j = t.window * fresh_per_window + t.fresh;
  record = run.order[run.plan.position((j + a) % length)];
  return true;
}

void ReaderCore::candidate_failed(Place& place, std::exception_ptr error, errc code) {
  if (opt.on_error != ErrorPolicy::skip || !is_data_error(code)) {
    place.fail(std::move(error));
    return;
  }
  counters.corrupt.fetch_add(1, std::memory_order_relaxed);
  place.error = std::move(error);
  std::uint64_t record = 0;
  if (!replacement(place.task, ++place.attempt, record)) {
    if (place.attempt == 1)  // no replacement could be tried at all
      place.error = std::make_exception_ptr(Error(errc::corrupt_tile, "no valid replacement record"));
    place.done = true;
    return;
  }
  place.candidate = Task{};
  place.candidate.record = record;
  source.fetch(record, place.candidate, false);
}

}  // namespace l3::detail
