// parallel_for: the one way l3 spreads independent jobs over threads for the
// length of one call (a codec's tiles, l3pack's records, the GPU decoder's
// staging copies). Long-lived pipelines (the reader's workers, the
// converter's ordered encode) own their threads and are not this.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace l3 {

// Threads for `jobs` jobs when `requested` are asked for (0: every hardware
// thread): at least 1, at most jobs.
inline unsigned resolve_threads(unsigned requested, std::uint64_t jobs) {
  const unsigned n = requested ? requested : std::max(1u, std::thread::hardware_concurrency());
  return static_cast<unsigned>(std::max<std::uint64_t>(1, std::min<std::uint64_t>(n, jobs)));
}

// Runs body(i) for every i in [0, n), indices handed out one at a time, on
// resolve_threads(threads, n) threads, the calling thread among them. The
// first exception a body throws stops the hand-out (bodies running finish)
// and is rethrown here once every thread has joined. When no further thread
// can be started, the threads already running do all the work.
template <class Body>
void parallel_for(std::uint64_t n, unsigned threads, Body&& body) {
  std::atomic<std::uint64_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_m;
  auto worker = [&] {
    for (std::uint64_t i; !failed.load(std::memory_order_relaxed) && (i = next.fetch_add(1)) < n;) {
      try {
        body(i);
      } catch (...) {
        std::lock_guard lock(error_m);
        if (!error) error = std::current_exception();
        failed = true;
      }
    }
  };
  const unsigned count = resolve_threads(threads, n);
  {
    std::vector<std::jthread> pool;
    try {
      for (unsigned t = 1; t < count; ++t) pool.emplace_back(worker);
    } catch (const std::system_error&) {  // no thread to be had: those running share the work
    }
    worker();
  }  // joined
  if (error) std::rethrow_exception(error);
}

}  // namespace l3
