// l3::parallel_for (common/include/l3/common/parallel.hpp): every index once, on the
// threads asked for, and the first exception rethrown after every thread joined.
#include <doctest/doctest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "l3/common/parallel.hpp"

TEST_CASE("resolve_threads: 0 means the hardware's, never more than the jobs, at least 1") {
  CHECK(l3::resolve_threads(3, 10) == 3);
  CHECK(l3::resolve_threads(8, 2) == 2);
  CHECK(l3::resolve_threads(4, 0) == 1);
  CHECK(l3::resolve_threads(0, 1000000) == std::max(1u, std::thread::hardware_concurrency()));
}

TEST_CASE("parallel_for visits every index exactly once") {
  for (unsigned threads : {0u, 1u, 3u, 16u}) {
    const std::uint64_t n = 1000;
    std::vector<std::atomic<int>> seen(n);
    std::mutex m;
    std::set<std::thread::id> ids;
    l3::parallel_for(n, threads, [&](std::uint64_t i) {
      seen[i].fetch_add(1);
      std::lock_guard lock(m);
      ids.insert(std::this_thread::get_id());
    });
    for (std::uint64_t i = 0; i < n; ++i) CHECK(seen[i].load() == 1);
    CHECK(ids.size() <= l3::resolve_threads(threads, n));
    CHECK(ids.count(std::this_thread::get_id()) <= 1);  // the caller may take part
  }
  int calls = 0;
  l3::parallel_for(0, 4, [&](std::uint64_t) { ++calls; });
  CHECK(calls == 0);
}

TEST_CASE("parallel_for rethrows a body's exception after joining, and stops handing out work") {
  auto failing = [](std::atomic<std::uint64_t>& ran) {
    return [&ran](std::uint64_t i) {
      ran.fetch_add(1);
      if (i == 10) throw std::runtime_error("job 10 failed");
    };
  };
  std::atomic<std::uint64_t> ran{0};
  CHECK_THROWS_WITH_AS(l3::parallel_for(1000, 4, failing(ran)), "job 10 failed", std::runtime_error);
  ran = 0;  // on the calling thread alone the hand-out stops right after the failure
  CHECK_THROWS_WITH_AS(l3::parallel_for(1000, 1, failing(ran)), "job 10 failed", std::runtime_error);
  CHECK(ran.load() == 11);
}
