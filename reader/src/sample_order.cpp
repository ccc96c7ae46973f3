#include "l3/reader/sample_order.hpp"

#include "l3/common/error.hpp"
#include "l3/reader/transform_core.hpp"

namespace l3 {

Permutation::Permutation(std::uint64_t n, std::uint64_t key) : n_(n) {
  unsigned bits = 2;
  while (bits < 64 && (std::uint64_t{1} << bits) < n) bits += 2;
  half_bits_ = bits / 2;
  for (int r = 0; r < 6; ++r) keys_[r] = xf::hash_words(key, static_cast<std::uint64_t>(r), 0x5eedULL);
}

std::uint64_t Permutation::feistel(std::uint64_t x, bool forward) const noexcept {
  const std::uint64_t mask = (std::uint64_t{1} << half_bits_) - 1;
  std::uint64_t left = x >> half_bits_, right = x & mask;
  if (forward) {
    for (int r = 0; r < 6; ++r) {
      const std::uint64_t next = left ^ (xf::mix64(right ^ keys_[r]) & mask);
      left = right;
      right = next;
    }
  } else {
    for (int r = 5; r >= 0; --r) {
      const std::uint64_t prev = right ^ (xf::mix64(left ^ keys_[r]) & mask);
      right = left;
      left = prev;
    }
  }
  return (left << half_bits_) | right;
}

// Cycle walking: apply the bijection of the power-of-two domain until the value
// lands in [0, n); the domain is < 4n, so few steps are expected.
std::uint64_t Permutation::operator()(std::uint64_t i) const noexcept {
  if (n_ <= 1) return i;
  std::uint64_t v = feistel(i, true);
  while (v >= n_) v = feistel(v, true);
  return v;
}

std::uint64_t Permutation::inverse(std::uint64_t v) const noexcept {
  if (n_ <= 1) return v;
  std::uint64_t i = feistel(v, false);
  while (i >= n_) i = feistel(i, false);
  return i;
}

EpochOrder::EpochOrder(std::uint64_t records, const OrderOptions& options, std::uint64_t epoch)
    : n_(records), shuffle_(options.shuffle) {
  if (!shuffle_ || n_ == 0) return;
  const std::uint64_t key = xf::hash_words(options.seed, epoch, 0x07de7ULL);
  if (options.block_size <= 1) {
    block_ = 1;
    blocks_ = n_;
  } else {
    block_ = options.block_size;
    blocks_ = (n_ + block_ - 1) / block_;
    if (n_ % block_ != 0) short_len_ = n_ % block_;
  }
  perm_ = Permutation(blocks_, key);
  if (short_len_ != 0) short_at_ = perm_.inverse(blocks_ - 1);
}

std::uint64_t EpochOrder::operator[](std::uint64_t position) const noexcept {
  if (!shuffle_) return position;
  if (block_ == 1) return perm_(position);
  // Blocks in permuted order; all full except the one at place short_at_.
  std::uint64_t place, offset;
  const std::uint64_t short_start = short_at_ * block_;
  if (short_len_ == 0 || position < short_start) {
    place = position / block_;
    offset = position % block_;
  } else if (position < short_start + short_len_) {
    place = short_at_;
    offset = position - short_start;
  } else {
    const std::uint64_t p = position - short_len_ + block_;  // as if the short block were full
    place = p / block_;
    offset = p % block_;
  }
  return perm_(place) * block_ + offset;
}

RankPlan::RankPlan(std::uint64_t n, std::uint64_t start, std::uint32_t world, std::uint32_t rank,
                   std::uint64_t chunk, Remainder remainder)
    : n_(n), start_(start), chunk_(chunk), world_(world), rank_(rank) {
  if (world == 0 || rank >= world) throw_error(errc::invalid_argument, "rank must be < world size");
  if (chunk == 0) throw_error(errc::invalid_argument, "chunk must be > 0");
  if (start > n) throw_error(errc::out_of_range, "start position past the end of the epoch");
  const std::uint64_t remaining = n - start;
  const std::uint64_t step = chunk * world;
  steps_ = remainder == Remainder::pad ? (remaining + step - 1) / step : remaining / step;
}

std::uint64_t RankPlan::position(std::uint64_t j) const noexcept {
  const std::uint64_t s = j / chunk_, o = j % chunk_;
  const std::uint64_t rel = s * chunk_ * world_ + std::uint64_t{rank_} * chunk_ + o;
  return start_ + rel % (n_ - start_);  // wraps only in pad mode, past the end
}

std::uint64_t RankPlan::consumed_after(std::uint64_t steps_done) const noexcept {
  const std::uint64_t c = start_ + steps_done * chunk_ * world_;
  return c < n_ ? c : n_;
}

}  // namespace l3
