// Sample order: a global permutation per (seed, epoch) that does not depend on
// the world size, and an exact partition of it over ranks.
//
// The permutation is a keyed bijection of [0, N) (a 6-round Feistel network
// on the smallest even-bit power of two >= N, with cycle walking), so it needs
// O(1) memory and any position is computed directly. Keys come from the
// splitmix64 finaliser (l3/reader/transform_core.hpp) of (seed, epoch): the order is
// the same on every platform and build.
//
// Block shuffle (block_size = b > 0): the records are cut into blocks of b
// consecutive records (the last may be shorter); the blocks are permuted and
// each block is read in record order, so reads stay mostly sequential.
//
// Partition: the epoch's positions from `start` on are cut into steps of
// world * chunk positions; in step s, rank r takes the `chunk` consecutive
// positions start + s*world*chunk + r*chunk + [0, chunk). Every rank gets the
// same number of steps:
//   Remainder::pad  : ceil(remaining / (world*chunk)) steps; positions past the
//                     end wrap around to `start` (a few samples repeat);
//   Remainder::drop : floor(remaining / (world*chunk)) steps; up to
//                     world*chunk - 1 samples are left out of the epoch.
// After every rank has taken k steps, exactly the positions
// [start, start + k*world*chunk) (clamped to N) are consumed, whatever the
// world size: that count is what the reader's state stores.
#pragma once

#include <cstdint>

namespace l3 {

enum class Remainder { pad, drop };

struct OrderOptions {
  std::uint64_t seed = 0;
  bool shuffle = true;          // false: positions are record indices
  std::uint64_t block_size = 0; // 0: permute records; > 0: permute blocks of records
};

// A bijection of [0, n) keyed by a 64-bit key. O(1) memory.
class Permutation {
public:
  Permutation() = default;
  Permutation(std::uint64_t n, std::uint64_t key);
  std::uint64_t size() const noexcept { return n_; }
  std::uint64_t operator()(std::uint64_t i) const noexcept;  // i < size()
  std::uint64_t inverse(std::uint64_t v) const noexcept;     // v < size()

private:
  std::uint64_t feistel(std::uint64_t x, bool forward) const noexcept;
  std::uint64_t n_ = 0;
  unsigned half_bits_ = 0;
  std::uint64_t keys_[6] = {};
};

// The global order of one epoch: position -> record index.
class EpochOrder {
public:
  EpochOrder() = default;
  EpochOrder(std::uint64_t records, const OrderOptions& options, std::uint64_t epoch);
  std::uint64_t size() const noexcept { return n_; }
  std::uint64_t operator[](std::uint64_t position) const noexcept;  // position < size()

private:
  std::uint64_t n_ = 0;
  bool shuffle_ = false;
  std::uint64_t block_ = 0;     // records per block (block mode)
  std::uint64_t blocks_ = 0;    // block count
  std::uint64_t short_len_ = 0; // length of the last block when shorter than block_, else 0
  std::uint64_t short_at_ = 0;  // its place in the permuted block order
  Permutation perm_;
};

// One rank's share of an epoch's positions [start, n).
class RankPlan {
public:
  RankPlan() = default;
  RankPlan(std::uint64_t n, std::uint64_t start, std::uint32_t world, std::uint32_t rank, std::uint64_t chunk,
           Remainder remainder);
  std::uint64_t steps() const noexcept { return steps_; }
  std::uint64_t chunk() const noexcept { return chunk_; }
  std::uint64_t length() const noexcept { return steps_ * chunk_; }  // samples of this rank
  // Global position of this rank's j-th sample (j < length()).
  std::uint64_t position(std::uint64_t j) const noexcept;
  // Positions consumed globally once every rank has taken `steps_done` steps.
  std::uint64_t consumed_after(std::uint64_t steps_done) const noexcept;

private:
  std::uint64_t n_ = 0, start_ = 0, chunk_ = 1, steps_ = 0;
  std::uint32_t world_ = 1, rank_ = 0;
};

}  // namespace l3
