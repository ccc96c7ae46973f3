// Sample order: permutations, block shuffle and the rank partition.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <vector>

#include "l3/common/error.hpp"
#include "l3/reader/sample_order.hpp"

using l3::EpochOrder;
using l3::OrderOptions;
using l3::Permutation;
using l3::RankPlan;
using l3::Remainder;

namespace {

std::vector<std::uint64_t> epoch_order(std::uint64_t n, const OrderOptions& o, std::uint64_t epoch) {
  EpochOrder order(n, o, epoch);
  std::vector<std::uint64_t> v(n);
  for (std::uint64_t i = 0; i < n; ++i) v[i] = order[i];
  return v;
}

bool is_permutation_of_range(std::vector<std::uint64_t> v) {
  std::sort(v.begin(), v.end());
  for (std::uint64_t i = 0; i < v.size(); ++i)
    if (v[i] != i) return false;
  return true;
}

}  // namespace

TEST_CASE("Permutation is a bijection with a working inverse") {
  for (std::uint64_t n : {1ull, 2ull, 3ull, 5ull, 16ull, 17ull, 100ull, 1000ull, 4097ull}) {
    Permutation p(n, 1234 + n);
    std::vector<std::uint64_t> v(n);
    for (std::uint64_t i = 0; i < n; ++i) {
      v[i] = p(i);
      CHECK(p.inverse(v[i]) == i);
    }
    CHECK(is_permutation_of_range(v));
  }
}

TEST_CASE("Epoch order: deterministic per (seed, epoch), different across epochs and seeds") {
  OrderOptions o;
  o.seed = 7;
  const auto a = epoch_order(1000, o, 0);
  CHECK(is_permutation_of_range(a));
  CHECK(a == epoch_order(1000, o, 0));
  CHECK(a != epoch_order(1000, o, 1));
  o.seed = 8;
  CHECK(a != epoch_order(1000, o, 0));
  // Not the identity, and not merely rotated.
  std::vector<std::uint64_t> id(1000);
  std::iota(id.begin(), id.end(), 0);
  CHECK(a != id);
  std::size_t fixed = 0;
  for (std::uint64_t i = 0; i < 1000; ++i) fixed += a[i] == i;
  CHECK(fixed < 20);
  // A frozen value: the order must not change between builds or platforms.
  o.seed = 7;
  const auto small = epoch_order(10, o, 3);
  CHECK(is_permutation_of_range(small));
  CHECK(small == std::vector<std::uint64_t>{8, 2, 9, 7, 1, 3, 0, 5, 6, 4});
}

TEST_CASE("Epoch order without shuffle is the identity") {
  OrderOptions o;
  o.shuffle = false;
  const auto a = epoch_order(50, o, 4);
  for (std::uint64_t i = 0; i < 50; ++i) CHECK(a[i] == i);
}

TEST_CASE("Block shuffle: a permutation made of whole blocks read in order") {
  for (std::uint64_t n : {100ull, 103ull, 7ull, 8ull}) {
    for (std::uint64_t b : {8ull, 10ull, 1000ull}) {
      OrderOptions o;
      o.seed = 3;
      o.block_size = b;
      const auto a = epoch_order(n, o, 2);
      CAPTURE(n);
      CAPTURE(b);
      REQUIRE(is_permutation_of_range(a));
      // Every run of consecutive records starts at a block boundary and stays in its block.
      std::uint64_t i = 0, runs = 0;
      while (i < n) {
        CHECK(a[i] % b == 0);
        std::uint64_t j = i + 1;
        while (j < n && a[j] == a[j - 1] + 1 && a[j] % b != 0) ++j;
        const std::uint64_t len = j - i;
        CHECK((len == b || a[i] / b == (n - 1) / b));  // only the last block may be short
        ++runs;
        i = j;
      }
      CHECK(runs == (n + b - 1) / b);
      if (n >= 100 && b == 10) CHECK(a != epoch_order(n, o, 3));
    }
  }
}

TEST_CASE("Partition: for world sizes 1..8, disjoint, complete and equal") {
  const std::uint64_t n = 103;
  for (std::uint32_t world = 1; world <= 8; ++world) {
    for (std::uint64_t chunk : {1ull, 4ull}) {
      CAPTURE(world);
      CAPTURE(chunk);
      // pad: every position covered; positions repeat only past the end (wrap).
      std::vector<std::uint64_t> seen(n, 0);
      std::uint64_t length = 0;
      for (std::uint32_t r = 0; r < world; ++r) {
        RankPlan p(n, 0, world, r, chunk, Remainder::pad);
        if (r == 0) length = p.length();
        CHECK(p.length() == length);
        for (std::uint64_t j = 0; j < p.length(); ++j) ++seen[p.position(j)];
      }
      const std::uint64_t step = world * chunk;
      CHECK(length == (n + step - 1) / step * chunk);
      std::uint64_t total = 0, repeated = 0;
      for (std::uint64_t v : seen) {
        CHECK(v >= 1);
        total += v;
        repeated += v - 1;
      }
      CHECK(total == length * world);
      CHECK(repeated < step);

      // drop: disjoint, equal, and at most step - 1 positions left out.
      std::vector<std::uint64_t> seen_drop(n, 0);
      for (std::uint32_t r = 0; r < world; ++r) {
        RankPlan p(n, 0, world, r, chunk, Remainder::drop);
        CHECK(p.length() == n / step * chunk);
        for (std::uint64_t j = 0; j < p.length(); ++j) ++seen_drop[p.position(j)];
      }
      std::uint64_t covered = 0;
      for (std::uint64_t v : seen_drop) {
        CHECK(v <= 1);
        covered += v;
      }
      CHECK(n - covered < step);
      CHECK(covered == n / step * step);
    }
  }
}

TEST_CASE("Partition of a remainder: a new world takes exactly the positions not consumed") {
  const std::uint64_t n = 200;
  // World 4, chunk 5: after 3 steps every rank took 15 samples; 60 consumed.
  RankPlan before(n, 0, 4, 0, 5, Remainder::pad);
  const std::uint64_t consumed = before.consumed_after(3);
  CHECK(consumed == 60);
  std::set<std::uint64_t> taken;
  for (std::uint32_t r = 0; r < 4; ++r) {
    RankPlan p(n, 0, 4, r, 5, Remainder::pad);
    for (std::uint64_t j = 0; j < 15; ++j) taken.insert(p.position(j));
  }
  CHECK(taken.size() == 60);
  CHECK(*taken.rbegin() == 59);
  // World 3 continues: positions [60, 200) exactly once each (drop mode: minus < 15 at the end).
  std::vector<int> seen(n, 0);
  for (std::uint32_t r = 0; r < 3; ++r) {
    RankPlan p(n, consumed, 3, r, 5, Remainder::drop);
    CHECK(p.length() == 140 / 15 * 5);
    for (std::uint64_t j = 0; j < p.length(); ++j) ++seen[p.position(j)];
  }
  for (std::uint64_t i = 0; i < 60; ++i) CHECK(seen[i] == 0);
  int covered = 0;
  for (std::uint64_t i = 60; i < n; ++i) {
    CHECK(seen[i] <= 1);
    covered += seen[i];
  }
  CHECK(covered == 135);
  CHECK(RankPlan(n, n, 3, 1, 5, Remainder::pad).length() == 0);
  CHECK_THROWS_AS(RankPlan(n, 0, 3, 3, 5, Remainder::pad), l3::Error);
}
