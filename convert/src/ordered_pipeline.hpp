// Runs a function over items 0..n-1 in worker threads and hands the results
// back in index order, holding at most `window` finished results in memory.
// Workers claim indices in increasing order, so the consumer never waits long
// for a result that no worker has started. The work function must not throw.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace l3::detail {

template <class Result>
class OrderedPipeline {
public:
  OrderedPipeline(std::size_t begin, std::size_t end, unsigned threads, std::function<Result(std::size_t)> work)
      : next_claim_(begin), next_take_(begin), end_(end), window_(2 * std::size_t{threads} + 2), work_(std::move(work)) {
    for (unsigned t = 0; t < threads; ++t) workers_.emplace_back([this] { run_worker(); });
  }
  // Stops the workers (after their current item) and joins them.
  ~OrderedPipeline() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    space_.notify_all();
    workers_.clear();  // jthread joins
  }
  OrderedPipeline(const OrderedPipeline&) = delete;
  OrderedPipeline& operator=(const OrderedPipeline&) = delete;

  // The result for the next index in order; call once per index, begin..end-1.
  Result take() {
    std::unique_lock lock(mutex_);
    ready_.wait(lock, [&] { return done_.count(next_take_) != 0; });
    auto it = done_.find(next_take_);
    Result result = std::move(it->second);
    done_.erase(it);
    ++next_take_;
    lock.unlock();
    space_.notify_all();
    return result;
  }

private:
  void run_worker() {
    for (;;) {
      std::size_t index = 0;
      {
        std::unique_lock lock(mutex_);
        space_.wait(lock, [&] { return stopping_ || next_claim_ >= end_ || next_claim_ < next_take_ + window_; });
        if (stopping_ || next_claim_ >= end_) return;
        index = next_claim_++;
      }
      Result result = work_(index);
      {
        std::lock_guard lock(mutex_);
        done_.emplace(index, std::move(result));
      }
      ready_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable ready_, space_;
  std::map<std::size_t, Result> done_;
  std::size_t next_claim_, next_take_, end_, window_;
  bool stopping_ = false;
  std::function<Result(std::size_t)> work_;
  std::vector<std::jthread> workers_;  // last: joined before the members above go
};

}  // namespace l3::detail
