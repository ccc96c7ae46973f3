// One tile's encoder (spec/codec.md §4-§7): constant and raw tiles short-
// circuit; otherwise a colour transform and a predictor per plane, residuals
// and contexts computed exactly as the decoder will (the shared core's
// functions), the Rice parameter of each context bucket and whether the
// zero-run mode pays, by exact bit counts, one stream per row (an empty one
// for a row whose codes are all zero: a zero row, §4.3, version 4); a palette
// form (§4.4) and an entropy-coded form (§4.5) where they pay. encoder.cpp
// validates the image, runs this per tile and writes the stream.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
#include <type_traits>
#include <vector>

#include "encoder_bits.hpp"
#include "l3/codec/codec.hpp"
#include "l3/codec/tile_core.hpp"
#include "l3/common/target_clones.hpp"

// The encoder's per-sample loops (colour transforms, the predictors' cost
// estimates, residuals and contexts) vectorise; the baseline x86-64 has no
// 32-bit min/max or abs (SSE4.1/SSSE3), so a copy of each built for
// x86-64-v3 (AVX2) is picked at load time where the CPU has it
// (l3/common/target_clones.hpp). Same integers either way.
#if L3_HAVE_TARGET_CLONES
#define L3_ENCODE_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define L3_ENCODE_CLONES
#endif

namespace l3::encoder {

// core::bucket_of for every activity a tile can have: codes are at most
// zigzag(510) = 1020 (spec §5.1: planes within [-255, 255], predictions
// within the plane's range), so activities are at most 1020 + 1020 + 510.
struct BucketTable {
  static constexpr int kMaxActivity = 1020 + 1020 + 510;
  std::uint8_t bucket[kMaxActivity + 1];
  BucketTable() {
    for (int a = 0; a <= kMaxActivity; ++a) bucket[a] = std::uint8_t(core::bucket_of(a));
  }
  std::uint8_t of(int a) const { return bucket[a < kMaxActivity ? a : kMaxActivity]; }  // bucket_of saturates at 15
};

// The codes of one context bucket, as a count and a sum: enough to estimate
// their Rice bits with the best parameter k, n (k + 1) + sum / 2^k.
struct BucketSum {
  std::uint32_t n = 0, sum = 0;
  void add(std::uint32_t u) {
    ++n;
    sum += u;
  }
  std::uint64_t rice_bits() const {
    std::uint64_t best = std::uint64_t(n) + sum;
    for (std::uint32_t k = 1; k <= core::kMaxK; ++k) best = std::min(best, std::uint64_t(n) * (k + 1) + (sum >> k));
    return best;
  }
};

// The contexts of an entropy-coded form: the planes', the runs', the copies'.
inline constexpr int kPlanContexts = core::kAnsAllContexts;
// Token histograms per context of an entropy-coded form (spec §4.5).
using AnsHists = std::array<encoder::AnsHist, kPlanContexts>;

// A pixel copy (spec §6.6): `len` pixels (0: none) from `up` rows up and
// `back` columns back (in the same row, back + 1 columns).
struct CopyRef {
  std::uint16_t len = 0;
  std::uint8_t up = 0, back = 0;
};

// Estimated costs of a plane's predictors (plane_costs), by predictor id
// (spec §6.1); slot 5, no predictor's id (a constant plane's byte), holds
// NE's: NW of the mirrored tile (diagonal_costs, spec §4.7).
using PlaneCosts = std::array<std::uint64_t, core::kPredIds>;
using TileCosts = std::array<PlaneCosts, core::kMaxChannels>;
inline constexpr std::uint8_t kCostNE = 5;

// The pixels of one tile, and per-sample planes, residuals and contexts.
class TileEncoder {
public:
  TileEncoder(const ImageView& img, const Rect& r, const EncodeOptions& o)
      : options_(o), w_(int(r.width)), h_(int(r.height)), ch_(int(img.channels)), effort_(o.effort),
        ans_(o.entropy_coding && o.effort >= 1),
        ans_min_saving_percent_(o.effort >= 2 ? 0 : o.entropy_min_saving_percent), zero_rows_(o.zero_rows),
        pixel_copies_(o.pixel_copies && ans_), copy_min_saving_percent_(2 * ans_min_saving_percent_),
        plane_contexts_(o.plane_contexts && o.effort >= 1), corrections_(o.corrections && o.effort >= 1),
        compact_tables_(o.compact_tables), row_masks_(o.zero_rows && o.row_masks && o.compact_tables),
        bilevel_(o.bilevel && ans_ && o.compact_tables), templates_(bilevel_ && o.bilevel_templates),
        diagonals_(o.diagonals && o.effort >= 1 && o.compact_tables),
        ramps_(o.ramps && o.effort >= 1 && o.compact_tables) {
    const std::size_t stride = img.stride ? img.stride : std::size_t(img.width) * img.channels;
    pixels_.resize(std::size_t(w_) * h_ * ch_);
    for (int y = 0; y < h_; ++y)
      std::memcpy(&pixels_[std::size_t(y) * w_ * ch_], img.data + (r.y + y) * stride + std::size_t(r.x) * ch_,
                  std::size_t(w_) * ch_);
    const std::size_t n = std::size_t(w_) * h_ * ch_;
    plane_ = std::size_t(w_) * h_;
    value_.resize(n);
    sym_.resize(n);
    bucket_.resize(n);
  }

  std::vector<std::uint8_t> encode() {
    if (is_constant()) return constant_tile();
    if (!allow_mirror_ || !diagonals_) return encode_corrected_or_not();
    // The mirrored tile (kind 3, spec §4.7) where the estimate says NE
    // predicts better than this tile's predictors. At effort 2 both, the
    // smaller kept; at effort 1 the mirrored one instead: where the estimate
    // says so, it was the smaller of the two for 92% of the corpus's tiles
    // (spec §12), and coding both would cost the encoder a second tile.
    if (effort_ >= 2) {
      std::vector<std::uint8_t> coded = encode_corrected_or_not();
      if (!mirror_may_pay_) return coded;
      std::vector<std::uint8_t> m = mirrored_tile();
      return !m.empty() && m.size() < coded.size() ? m : coded;
    }
    choose_transform_and_predictors();
    predictors_chosen_ = true;
    if (mirror_may_pay_)
      if (std::vector<std::uint8_t> m = mirrored_tile(); !m.empty()) return m;
    return encode_corrected_or_not();
  }

private:
  // The mirrored tile's encoder (encode): the pixels of `o`, each row
  // reversed, and its options; it does not try mirroring again.
  struct Mirror {};
  TileEncoder(const TileEncoder& o, Mirror)
      : TileEncoder(ImageView{o.pixels_.data(), std::uint32_t(o.w_), std::uint32_t(o.h_), std::uint32_t(o.ch_), 0},
                    Rect{0, 0, std::uint32_t(o.w_), std::uint32_t(o.h_)}, o.options_) {
    for (int y = 0; y < h_; ++y)
      for (int a = 0, b = w_ - 1; a < b; ++a, --b)
        std::swap_ranges(&pixels_[(std::size_t(y) * w_ + a) * ch_], &pixels_[(std::size_t(y) * w_ + a + 1) * ch_],
                         &pixels_[(std::size_t(y) * w_ + b) * ch_]);
    allow_mirror_ = false;
  }

  // The mirrored encoder's tile as kind 3; empty when it is not a coded tile.
  std::vector<std::uint8_t> mirrored_tile() const {
    std::vector<std::uint8_t> m = TileEncoder(*this, Mirror{}).encode_corrected_or_not();
    if ((m[0] & 3) != core::kTileCoded) return {};
    m[0] = std::uint8_t(m[0] | core::kTileMirrored);
    return m;
  }

  std::vector<std::uint8_t> encode_corrected_or_not() {
    if (effort_ >= 2 && corrections_) {
      // Density: the tile with and without residual corrections (spec §6.7),
      // whose choice (choose_corrections) is an estimate; the smaller kept.
      corrections_ = false;
      std::vector<std::uint8_t> without = encode_coded();
      corrections_ = true;
      std::vector<std::uint8_t> with = encode_coded();
      return with.size() <= without.size() ? with : without;
    }
    return encode_coded();
  }

  // encode() of a tile that is not constant.
  std::vector<std::uint8_t> encode_coded() {
    params_.width = w_;
    params_.height = h_;
    params_.channels = ch_;
    if (std::vector<std::uint8_t> indexed = indexed_only_tile(); !indexed.empty()) return or_raw(std::move(indexed));
    std::vector<std::uint8_t> coded;
    if (effort_ >= 2 && ch_ >= 3) {
      // Density: code the tile under every transform (each with the
      // predictors its estimate prefers) and keep the smallest.
      for (std::uint8_t t : {core::kTransformYCoCgR, core::kTransformSubtractGreen, core::kTransformNone}) {
        transform_planes(t);
        params_.transform = t;
        set_predictors(predictors_for_transform(transform_costs(), diagonals_).second);
        compute_residuals();
        std::vector<std::uint8_t> candidate = coded_tile();
        if (coded.empty() || candidate.size() < coded.size()) coded = std::move(candidate);
      }
    } else {
      if (!predictors_chosen_) choose_transform_and_predictors();
      compute_residuals();
      coded = coded_tile();
      if (effort_ >= 2 && ch_ == 1) coded = smallest_over_predictors(std::move(coded));
    }
    if (bit_planes_ && bilevel_) {
      // At effort 1 by the share rANS tiles must save (ans_pays): a bilevel
      // tile decodes slower than the CPU's AVX-512 lanes decode other tiles
      // (spec §12).
      std::vector<std::uint8_t> bilevel = bilevel_tile();
      if (ans_pays(bilevel.size(), coded.size())) coded = std::move(bilevel);
    }
    const std::size_t unindexed = coded.size();
    if (effort_ >= 1 && allow_palette_) {
      std::vector<std::uint8_t> indexed = palette_tile();
      if (!indexed.empty() && indexed.size() < coded.size()) coded = std::move(indexed);
    }
    if (copies_after_palette()) {
      // Copies of the pixels (not of palette indices) where they beat both forms.
      std::vector<std::uint8_t> copied = copy_tile(unindexed, coded.size());
      if (!copied.empty() && copies_pay(copied.size(), unindexed) && copied.size() < coded.size()) coded = std::move(copied);
    }
    return or_raw(std::move(coded));
  }

  // `coded`, or the raw tile where that is no larger (spec §4.2).
  std::vector<std::uint8_t> or_raw(std::vector<std::uint8_t> coded) const {
    return coded.size() >= 1 + pixels_.size() ? raw_tile() : coded;
  }

  // Effort 1, a tile of at most kIndexedOnlyColours colours: its palette
  // form alone (encode_coded falls back to raw), without coding the unindexed form (nor seeking pixel
  // copies, which need it) to compare. On graphics (all) the unindexed form
  // was the smaller in 117 of 1,334 such tiles, by 684 bytes in all (0.012%
  // of the class; photos (all) 0.016%), and coding it was a third of the
  // encode time of the dithers, masks and bilevel text (spec §12, "The
  // palette form alone"). Empty where the tile has more colours or no
  // palette form (gray with dense values).
  std::vector<std::uint8_t> indexed_only_tile() {
    if (effort_ != 1 || !allow_palette_ || !few_colours() || colours_.size() > kIndexedOnlyColours) return {};
    return palette_tile();
  }
  static constexpr std::size_t kIndexedOnlyColours = 16;

  // Pixels are interleaved; plane values, residual codes and buckets are
  // planar (plane p's sample (r, c) at pat(p, r, c)) so that the per-plane
  // loops below run over contiguous memory and vectorise.
  std::size_t pat(int p, int r, int c) const { return std::size_t(p) * plane_ + std::size_t(r) * w_ + c; }

  bool is_constant() const {
    for (std::size_t i = ch_; i < pixels_.size(); i += ch_)
      if (std::memcmp(&pixels_[i], &pixels_[0], ch_) != 0) return false;
    return true;
  }
  // Kind byte, then bytes of the pixels (written with memcpy: GCC 12 warns
  // wrongly about vector::insert after an initializer-list vector here).
  std::vector<std::uint8_t> tile_of(std::uint8_t kind, std::size_t bytes) const {
    std::vector<std::uint8_t> out(1 + bytes);
    out[0] = kind;
    std::memcpy(out.data() + 1, pixels_.data(), bytes);
    return out;
  }
  std::vector<std::uint8_t> constant_tile() const { return tile_of(core::kTileConstant, std::size_t(ch_)); }
  // A tile of at most 256 colours as a palette and one plane of indices
  // (spec §4.4), the indices coded as a one-channel tile; empty when the tile
  // has more colours or its indices do not code (a raw index tile).
  std::vector<std::uint8_t> palette_tile() {
    if (!few_colours()) return {};
    ColourTable& table = *colour_table_;
    std::vector<std::uint32_t> colours = colours_;
    if (ch_ == 1) {
      // Gray: indices differ from the values only when the values are
      // sparse in their range; otherwise skip the second encode.
      const auto [lo, hi] = std::minmax_element(colours.begin(), colours.end());
      if (colours.size() * 2 > std::size_t(*hi - *lo + 1)) return {};
    }
    // Each pixel's colour as its position in `colours` (first seen first).
    for (std::size_t j = 0; j < colours.size(); ++j) table.index[table.slot(colours[j])] = std::uint8_t(j);
    std::vector<std::uint8_t> index(plane_);
    for (std::size_t i = 0; i < plane_; ++i) index[i] = table.index[table.slot(ColourTable::pack(&pixels_[i * ch_], ch_))];
    // The palette order (spec §4.4, §12): by brightness (sum of the
    // channels), so that neighbouring indices tend to be similar colours and
    // predictions of indices work (gradients, anti-aliased edges); or by
    // adjacency, so that colours often next to each other get neighbouring
    // indices (dithers, label masks, text on a background, where brightness
    // says little), whichever puts neighbouring pixels' indices closer.
    auto key = [&](std::uint32_t v) {
      std::uint32_t sum = 0;
      for (int k = 0; k < ch_; ++k) sum += (v >> (8 * k)) & 255;
      return (std::uint64_t{sum} << 32) | v;
    };
    std::vector<std::uint8_t> order(colours.size());  // order[i]: the colour with index i
    for (std::size_t j = 0; j < order.size(); ++j) order[j] = std::uint8_t(j);
    std::sort(order.begin(), order.end(), [&](std::uint8_t a, std::uint8_t b) { return key(colours[a]) < key(colours[b]); });
    const bool channel_bits = channel_bit_palette(colours, order);  // may add unused colours
    if (!channel_bits && colours.size() >= 3) {
      const Adjacency adj = adjacency(index, colours.size());
      std::vector<std::uint8_t> chain = adjacency_order(adj);
      if (adj.spread(chain) < adj.spread(order)) order = std::move(chain);
    }
    std::vector<std::uint8_t> rank(colours.size());
    std::vector<std::uint32_t> ordered(colours.size());
    for (std::size_t i = 0; i < order.size(); ++i) {
      rank[order[i]] = std::uint8_t(i);
      ordered[i] = colours[order[i]];
    }
    colours = std::move(ordered);
    for (std::uint8_t& v : index) v = rank[v];
    TileEncoder index_encoder(ImageView{index.data(), std::uint32_t(w_), std::uint32_t(h_), 1, 0},
                              Rect{0, 0, std::uint32_t(w_), std::uint32_t(h_)}, options_);
    index_encoder.allow_palette_ = false;  // indices are not indexed again
    index_encoder.ramps_ = false;          // nor ramped (spec §4.3)
    index_encoder.allow_mirror_ = false;   // the palette tile is mirrored as a whole, or not
    index_encoder.few_colours_ = 1;        // at most 256 indices
    // Bit planes of 3-16 colours at effort 1 only where each bit is a
    // channel (ordered dithers): on the corpus's other palettes they saved
    // 0.1-0.3% of a tile for 2-4x its encode time (label masks, spec §12).
    index_encoder.bit_planes_ =
        colours.size() == 2 || channel_bits || effort_ >= 2 ? bit_planes_for(colours.size()) : 0;
    const std::vector<std::uint8_t> inner = index_encoder.encode();
    if ((inner[0] & 3) != core::kTileCoded) return {};
    // Mode byte with the palette bit, u8 (colours - 1), the mask of channels
    // that are the same in every colour (an opaque alpha) and their values,
    // the colours' other channels, then the index tile's parameters, row
    // table and rows (spec §4.4).
    std::uint8_t mask = 0;
    for (int k = 0; k < ch_; ++k) {
      bool same = true;
      for (std::uint32_t v : colours) same = same && ((v ^ colours[0]) >> (8 * k) & 255) == 0;
      if (same) mask = std::uint8_t(mask | 1 << k);
    }
    std::vector<std::uint8_t> out{std::uint8_t(inner[0] | core::kModePalette), std::uint8_t(colours.size() - 1), mask};
    out.reserve(3 + colours.size() * std::size_t(ch_) + inner.size());
    for (int k = 0; k < ch_; ++k)
      if (mask >> k & 1) out.push_back(std::uint8_t(colours[0] >> (8 * k)));
    for (std::uint32_t v : colours)
      for (int k = 0; k < ch_; ++k)
        if (!(mask >> k & 1)) out.push_back(std::uint8_t(v >> (8 * k)));
    const std::size_t head = out.size();
    out.resize(head + inner.size() - 1);
    std::memcpy(out.data() + head, inner.data() + 1, inner.size() - 1);
    return out;
  }

  // How often each pair of palette colours are horizontal or vertical
  // neighbours in the tile, and how often each colour occurs.
  struct Adjacency {
    std::size_t n = 0;
    std::vector<std::uint16_t> pairs;  // n x n; at most 2 * 256 * 32 per pair
    std::vector<std::uint32_t> count;
    // The sum over neighbouring pixels of the distance between their
    // indices, with order[i] the colour of index i.
    std::uint64_t spread(const std::vector<std::uint8_t>& order) const {
      std::vector<int> rank(n);
      for (std::size_t i = 0; i < n; ++i) rank[order[i]] = int(i);
      std::uint64_t sum = 0;
      for (std::size_t a = 0; a < n; ++a)
        for (std::size_t b = a + 1; b < n; ++b) sum += std::uint64_t(pairs[a * n + b]) * std::uint64_t(core::iabs(rank[a] - rank[b]));
      return sum;
    }
  };
  Adjacency adjacency(const std::vector<std::uint8_t>& index, std::size_t n) const {
    Adjacency adj;
    adj.n = n;
    adj.pairs.assign(n * n, 0);
    adj.count.assign(n, 0);
    auto link = [&](std::uint8_t a, std::uint8_t b) {
      if (a == b) return;
      ++adj.pairs[a * n + b];
      ++adj.pairs[b * n + a];
    };
    for (int r = 0; r < h_; ++r)
      for (int c = 0; c < w_; ++c) {
        const std::size_t i = std::size_t(r) * w_ + c;
        ++adj.count[index[i]];
        if (c > 0) link(index[i], index[i - 1]);
        if (r > 0) link(index[i], index[i - w_]);
      }
    return adj;
  }

  // The colours in a chain grown greedily at either end by the colour most
  // often next to that end (ties: the more frequent colour, then the lower
  // number), from the most frequent colour (Zeng's palette reordering).
  static std::vector<std::uint8_t> adjacency_order(const Adjacency& adj) {
    const std::size_t n = adj.n;
    std::size_t first = 0;
    for (std::size_t j = 1; j < n; ++j)
      if (adj.count[j] > adj.count[first]) first = j;
    std::vector<std::uint8_t> placed(n, 0);
    placed[first] = 1;
    std::vector<std::uint8_t> left_side, right_side{std::uint8_t(first)};  // left_side grows outwards
    std::size_t left = first, right = first;
    for (std::size_t step = 1; step < n; ++step) {
      std::size_t best = n;
      bool at_left = false;
      std::uint64_t best_score = 0;
      for (std::size_t j = 0; j < n; ++j) {
        if (placed[j]) continue;
        const std::uint64_t l = std::uint64_t(adj.pairs[j * n + left]) << 32 | adj.count[j];
        const std::uint64_t r = std::uint64_t(adj.pairs[j * n + right]) << 32 | adj.count[j];
        if (best == n || l > best_score) best = j, best_score = l, at_left = true;
        if (r > best_score) best = j, best_score = r, at_left = false;
      }
      placed[best] = 1;
      if (at_left) left_side.push_back(std::uint8_t(left = best));
      else right_side.push_back(std::uint8_t(right = best));
    }
    std::vector<std::uint8_t> chain(left_side.rbegin(), left_side.rend());
    chain.insert(chain.end(), right_side.begin(), right_side.end());
    return chain;
  }

  std::vector<std::uint8_t> raw_tile() const { return tile_of(core::kTileRaw, pixels_.size()); }

  void transform_planes(std::uint8_t transform) {
    // core::forward_transform with the transform and the channel count fixed,
    // so that its branches leave the per-pixel loop and the loop vectorises.
    switch (ch_ * 4 + transform) {
      case 1 * 4 + core::kTransformNone: transform_planes_as<core::kTransformNone, 1>(); break;
      case 2 * 4 + core::kTransformNone: transform_planes_as<core::kTransformNone, 2>(); break;
      case 3 * 4 + core::kTransformNone: transform_planes_as<core::kTransformNone, 3>(); break;
      case 3 * 4 + core::kTransformSubtractGreen: transform_planes_as<core::kTransformSubtractGreen, 3>(); break;
      case 3 * 4 + core::kTransformYCoCgR: transform_planes_as<core::kTransformYCoCgR, 3>(); break;
      case 4 * 4 + core::kTransformNone: transform_planes_as<core::kTransformNone, 4>(); break;
      case 4 * 4 + core::kTransformSubtractGreen: transform_planes_as<core::kTransformSubtractGreen, 4>(); break;
      case 4 * 4 + core::kTransformYCoCgR: transform_planes_as<core::kTransformYCoCgR, 4>(); break;
      default:  // a colour transform of fewer than 3 channels changes nothing (forward_transform)
        if (ch_ == 1) transform_planes_as<core::kTransformNone, 1>();
        else transform_planes_as<core::kTransformNone, 2>();
    }
    for (int p = 0; p < ch_; ++p) params_.plane[p].range = core::plane_range(transform, p);
    mark_constant_planes();
    for (int p = 0; p < ch_; ++p) params_.plane[p].ramp = false;
    // Ramps are sought in the untransformed planes only: a ramp's colour
    // differences are ramps too, and its planes under no transform code to
    // nothing (the transform estimate then takes that), while the
    // transforms' rounding (YCoCg-R's halves) would cost the fits exactness.
    if (ramps_ && transform == core::kTransformNone)
      for (int p = 0; p < ch_; ++p)
        if (!params_.plane[p].constant) apply_ramp(p);
  }

  // A plane's ramp, fitted once per tile (try_ramp) and applied again each
  // time the untransformed planes are made (transform_planes).
  struct RampChoice {
    bool tried = false, taken = false;
    std::int32_t offset = 0, dx = 0, dy = 0;
  };
  void apply_ramp(int p) {
    RampChoice& choice = ramp_choice_[std::size_t(p)];
    core::PlaneParams& pp = params_.plane[p];
    if (!choice.tried) {
      choice.tried = true;
      choice.taken = try_ramp(p);
      choice.offset = pp.ramp_offset;
      choice.dx = pp.ramp_dx;
      choice.dy = pp.ramp_dy;
      return;
    }
    if (!choice.taken) return;
    pp.ramp_offset = choice.offset;
    pp.ramp_dx = choice.dx;
    pp.ramp_dy = choice.dy;
    subtract_ramp(p);
    pp.ramp = true;
  }

  // Plane p's values minus its ramp, its range ramped_range's. Returns
  // whether every difference lies in that range (their residuals' codes then
  // stay <= 1023, spec §7.2).
  bool subtract_ramp(int p, int* off = nullptr) {
    int* v = &value_[pat(p, 0, 0)];
    core::PlaneParams& pp = params_.plane[p];
    bool inside = true;
    int differ = 0;  // differences other than the first pixel's
    for (int r = 0; r < h_; ++r) {
      int* row = v + std::size_t(r) * w_;
      for (int c = 0; c < w_; ++c) {
        row[c] -= core::ramp_at(pp, r, c);
        inside &= row[c] >= -255 && row[c] <= 255;
        differ += row[c] != v[0];
      }
    }
    pp.range = core::ramped_range();
    if (off) *off = differ;
    return inside;
  }

  // ---- Ramps (spec §6.9, version 14) ----------------------------------------

  // Whether plane p may be a rounded affine function of (r, c), as smooth
  // synthetic gradients are: such a plane's second differences are -1..1
  // (a sample off by one, noise, makes them 2 or 3 around it). Tested on
  // three rows and three columns, which photos fail at once.
  bool ramp_like(const int* v) const {
    int rough = (3 * (w_ + h_)) / 64;  // second differences of 2 or 3 allowed
    auto smooth = [&](std::size_t at, std::size_t step, int n) {
      for (int i = 2; i < n; ++i) {
        const int d2 = core::iabs(v[at + i * step] - 2 * v[at + (i - 1) * step] + v[at + (i - 2) * step]);
        if (d2 > 3 || (d2 > 1 && --rough < 0)) return false;
      }
      // A rounded line keeps within 1 of its chord; a curve (a radial
      // gradient, a photo's sky) leaves it.
      const long first = v[at], span = long(v[at + std::size_t(n - 1) * step]) - first;
      for (int i = 1; i + 1 < n; ++i)
        if (std::labs((long(v[at + i * step]) - first) * (n - 1) - span * i) > 2l * (n - 1)) return false;
      return true;
    };
    for (int r : {0, h_ / 2, h_ - 1})
      if (!smooth(std::size_t(r) * w_, 1, w_)) return false;
    for (int c : {0, w_ / 2, w_ - 1})
      if (!smooth(std::size_t(c), std::size_t(w_), h_)) return false;
    return true;
  }

  // Narrows [lo, hi] to the slopes b for which some a gives floor(a + b * i)
  // = s(i) for i < n (eliminating a, Fourier-Motzkin: for i < j,
  // s(j) - s(i) - 1 < b (j - i) < s(j) - s(i) + 1). The ends of the runs of
  // equal values bind; the pixels inside a run add nothing.
  template <class S>
  static void narrow_slope(S&& s, int n, double& lo, double& hi) {
    // The first and the last kEnds run ends: the pairs furthest apart bind
    // most (refine_ramp_slope makes the slope exact inside the interval).
    constexpr int kEnds = 6;
    int first[kEnds], last[kEnds], nf = 0, nl = 0;
    auto is_end = [&](int i) { return i == 0 || i == n - 1 || s(i) != s(i - 1) || s(i) != s(i + 1); };
    for (int i = 0; i < n && nf < kEnds; ++i)
      if (is_end(i)) first[nf++] = i;
    for (int i = n - 1; i >= 0 && nl < kEnds; --i)
      if (is_end(i)) last[nl++] = i;
    for (int a = 0; a < nf; ++a)
      for (int b = 0; b < nl; ++b) {
        const int i = first[a], j = last[b];
        if (j <= i) continue;
        const double d = double(s(j) - s(i)), len = double(j - i);
        lo = std::max(lo, (d - 1) / len);
        hi = std::min(hi, (d + 1) / len);
      }
  }

  // The ramp of plane p (fields of params_.plane[p]) that fits its values
  // best: the slopes inside the intervals that rows 0, h/2 and h - 1 and
  // every 8th column allow (each alone), refined, and the offset inside every pixel's interval
  // where one exists (an exact fit: every value minus its ramp is 0).
  bool fit_ramp(int p) {
    const int* v = &value_[pat(p, 0, 0)];
    double bx_lo = -128, bx_hi = 128, by_lo = -128, by_hi = 128;
    for (int r : {0, h_ / 2, h_ - 1}) narrow_slope([&](int i) { return v[std::size_t(r) * w_ + i]; }, w_, bx_lo, bx_hi);
    if (h_ > 1)
      for (int c = 0; c < w_; c += 8) narrow_slope([&](int i) { return v[std::size_t(i) * w_ + c]; }, h_, by_lo, by_hi);
    else
      by_lo = by_hi = 0;
    constexpr double kOne = double(1 << core::kRampFractionBits);
    auto fixed = [&](double x) { return std::int32_t(std::clamp(std::llround(x * kOne), -(1ll << 30), 1ll << 30)); };
    core::PlaneParams& pp = params_.plane[p];
    pp.ramp_dx = fixed((bx_lo + bx_hi) / 2);
    pp.ramp_dy = fixed((by_lo + by_hi) / 2);
    if (pp.ramp_dx == 0 && pp.ramp_dy == 0) return false;  // flat: a constant ramp only moves the values
    // Each row's (column's) intervals alone leave the slopes loose where the
    // tile is short: each slope is then moved, the other fixed, to where the
    // offset's interval is widest (or least empty), a convex function of it.
    refine_ramp_slope(v, pp.ramp_dy, pp.ramp_dx, fixed(by_lo) - 1024, fixed(by_hi) + 1024, true);
    refine_ramp_slope(v, pp.ramp_dx, pp.ramp_dy, fixed(bx_lo) - 1024, fixed(bx_hi) + 1024, false);
    refine_ramp_slope(v, pp.ramp_dy, pp.ramp_dx, fixed(by_lo) - 1024, fixed(by_hi) + 1024, true);
    // floor((A + s) / 2^24) = v for A in [v * 2^24 - s, (v + 1) * 2^24 - s).
    std::int64_t lo = std::numeric_limits<std::int64_t>::min(), hi = std::numeric_limits<std::int64_t>::max();
    for (int r = 0; r < h_; ++r)
      for (int c = 0; c < w_; ++c) {
        const std::int64_t s = std::int64_t(pp.ramp_dx) * c + std::int64_t(pp.ramp_dy) * r;
        const std::int64_t at = std::int64_t(v[std::size_t(r) * w_ + c]) * std::int64_t(kOne) - s;
        lo = std::max(lo, at);
        hi = std::min(hi, at + std::int64_t(kOne) - 1);
      }
    constexpr std::int64_t kUnit = std::int64_t(1) << core::kRampOffsetShift;
    std::int64_t offset = (lo + hi) / 2 / kUnit;  // the middle, where no exact fit exists
    if (lo <= hi && (lo + kUnit - 1) / kUnit * kUnit <= hi) offset = lo >= 0 ? (lo + kUnit - 1) / kUnit : -((-lo) / kUnit);
    pp.ramp_offset = std::int32_t(std::clamp<std::int64_t>(offset, INT32_MIN, INT32_MAX));
    return pp.ramp_dx != 0 || pp.ramp_dy != 0;
  }

  // Sets `slope` (dy with `along_rows`, else dx) in [from, to] to where the
  // interval of offsets A with floor((A + dx c + dy r) / 2^24) = v for every
  // pixel is widest: with the other slope fixed, each row (column) bounds A
  // by its largest lower and smallest upper end, and the interval's
  // emptiness, the largest lower end minus the smallest upper one, is convex
  // in the slope (a ternary search on integers).
  void refine_ramp_slope(const int* v, std::int32_t& slope, std::int32_t other, std::int64_t from, std::int64_t to,
                         bool along_rows) const {
    constexpr std::int64_t kOne = std::int64_t(1) << core::kRampFractionBits;
    const int lines = along_rows ? h_ : w_;
    if (lines < 2) return;
    std::vector<std::int64_t> lower(std::size_t(lines), std::numeric_limits<std::int64_t>::min()),
        upper(std::size_t(lines), std::numeric_limits<std::int64_t>::max());
    for (int r = 0; r < h_; ++r)
      for (int c = 0; c < w_; ++c) {
        const int line = along_rows ? r : c;
        const std::int64_t at = std::int64_t(v[std::size_t(r) * w_ + c]) * kOne - std::int64_t(other) * (along_rows ? c : r);
        lower[line] = std::max(lower[line], at);
        upper[line] = std::min(upper[line], at + kOne - 1);
      }
    auto empty = [&](std::int64_t s) {
      std::int64_t lo = std::numeric_limits<std::int64_t>::min(), hi = std::numeric_limits<std::int64_t>::max();
      for (int i = 0; i < lines; ++i) {
        lo = std::max(lo, lower[i] - s * i);
        hi = std::min(hi, upper[i] - s * i);
      }
      return lo - hi;
    };
    std::int64_t a = std::max<std::int64_t>(from, -(1ll << 30)), b = std::min<std::int64_t>(to, 1ll << 30);
    while (b - a > 2) {
      const std::int64_t m1 = a + (b - a) / 3, m2 = b - (b - a) / 3;
      if (empty(m1) <= empty(m2)) b = m2;
      else a = m1;
    }
    std::int64_t best = a;
    for (std::int64_t x = a + 1; x <= b; ++x)
      if (empty(x) < empty(best)) best = x;
    slope = std::int32_t(best);
  }

  // Plane p with a ramp where it fits exactly or its estimate, with the
  // ramp's 12 bytes, is lower than without (spec §6.9): its values become the
  // differences from the ramp, its range ramped_range's. Returns whether
  // the ramp was taken.
  bool try_ramp(int p) {
    int* v = &value_[pat(p, 0, 0)];
    if (w_ < 4 || !ramp_like(v)) return false;
    core::PlaneParams& pp = params_.plane[p];
    if (!fit_ramp(p)) return false;
    // Only a near fit is weighed: at most one difference in 64 other than
    // the first (a ramp with a little noise); an exact one (every row a zero
    // row, which the estimate, blind to the first row's cost, undervalues)
    // is taken wherever the plane costs anything.
    const std::vector<int> kept(v, v + plane_);
    const core::PlaneRange range = pp.range;
    int off = 0;
    const bool near = subtract_ramp(p, &off) && std::size_t(off) * 64 <= plane_;
    PlaneCosts ramped{}, plain{};
    if (near && off > 0) plane_costs(p, core::kPredCount, ramped);
    std::copy(kept.begin(), kept.end(), v);  // the plane's own values again
    pp.range = range;
    if (!near) return false;
    plane_costs(p, core::kPredCount, plain);
    constexpr std::uint64_t kRampCost = 12 * 8 * 8;  // its bytes, in the estimate's eighths
    const auto best = [](const PlaneCosts& c) { return *std::min_element(c.begin(), c.begin() + core::kPredCount); };
    if (!((off == 0 && best(plain) > 0) || (off > 0 && best(ramped) + kRampCost < best(plain)))) return false;
    subtract_ramp(p);
    pp.ramp = true;
    return true;
  }

  template <std::uint8_t kTransform, int kCh>
  L3_ENCODE_CLONES void transform_planes_as() {
    int* v = value_.data();
    const std::uint8_t* in = pixels_.data();
    for (std::size_t i = 0; i < plane_; ++i) {
      int px[kCh];
      core::forward_transform(kTransform, kCh, in + i * kCh, px);
      for (int p = 0; p < kCh; ++p) v[std::size_t(p) * plane_ + i] = px[p];
    }
  }

  // A plane with one value in the whole tile is coded as that value alone
  // (spec §4.3): opaque alpha, the colour differences of gray stored as RGB.
  // Its midpoint becomes the value, so predictions and residuals computed
  // below come out as the decoder's (every prediction exact, codes 0).
  void mark_constant_planes() {
    for (int p = 0; p < ch_; ++p) {
      const int* v = &value_[std::size_t(p) * plane_];
      const int first = v[0];
      bool same = true;
      for (std::size_t i = 1; same && i < plane_; ++i) same = v[i] == first;
      core::PlaneParams& pp = params_.plane[p];
      pp.constant = same;
      if (same) pp.range.mid = first;
    }
  }

  // W, N and NW of sample (r, c) of one plane (`a`, row-major), with the
  // decoder's edge rules (spec §6.3); `mid` stands in at the tile's first
  // pixel (the plane's midpoint for values, 0 for residual codes).
  template <class T>
  void around(const T* a, int r, int c, T mid, T& w, T& n, T& nw) const {
    const std::size_t i = std::size_t(r) * w_ + c;
    if (r > 0 && c > 0) {
      w = a[i - 1];
      n = a[i - w_];
      nw = a[i - w_ - 1];
    } else if (r > 0) {
      n = w = nw = a[i - w_];
    } else if (c > 0) {
      w = n = nw = a[i - 1];
    } else {
      w = n = nw = mid;
    }
  }

  // A residual's cost in the estimates below, its magnitude cost: about
  // 8 log2(|e| + 1), the exponent and three mantissa bits of the float
  // |e| + 1 (Mitchell's piecewise-linear log2, which vectorises), here with
  // the exponent's bias left in (kMagnitudeBias; the per-sample loop sums
  // the biased costs and takes the bias off per row). A residual's coded
  // size grows with the log of its magnitude, not the magnitude: sums of |e| let a few
  // large residuals (edges, a transform's worse plane at a colour boundary)
  // outweigh many small ones and chose worse transforms on the wallpapers
  // (spec §12, "Estimates by log magnitude": graphics (all) 0.715 -> 0.708
  // of PNG, photos unchanged; offsets 2, 4, 8 and 1/4 in place of the + 1
  // measured worse).
  static std::uint32_t biased_magnitude_cost(int e) {
    const float f = float(core::iabs(e) + 1);
    std::uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    return bits >> 20;
  }
  static constexpr std::uint32_t kMagnitudeBias = 127u << 3;  // the float's exponent bias, in eighths

  // Sums of the magnitude costs of the residuals of plane p under each of the
  // first n_pred predictors, in one pass: a cheap proxy for the coded size,
  // used to choose transform and predictor.
  L3_ENCODE_CLONES void plane_costs(int p, std::uint8_t n_pred, PlaneCosts& cost) const {
    const core::PlaneRange range = params_.plane[p].range;
    const int* v = &value_[pat(p, 0, 0)];
    // Per row sums fit in 32 bits (256 * (1016 + 80)). Edge pixels (row 0,
    // column 0) go through around(); the interior is a branch-free loop.
    auto add = [&](std::uint32_t* acc, int x, int w, int n, int nw) __attribute__((always_inline)) {
      const int grad = w + n - nw;
      acc[core::kPredMED] += biased_magnitude_cost(x - core::imin(core::imax(w, n), core::imax(core::imin(w, n), grad)));
      acc[core::kPredW] += biased_magnitude_cost(x - w);
      acc[core::kPredN] += biased_magnitude_cost(x - n);
      acc[core::kPredAvg] += biased_magnitude_cost(x - ((w + n) >> 1));
      acc[core::kPredGrad] += biased_magnitude_cost(x - core::imin(range.hi, core::imax(range.lo, grad)));
    };
    const std::uint32_t row_bias = kMagnitudeBias * std::uint32_t(w_);
    for (int r = 0; r < h_; ++r) {
      std::uint32_t acc[core::kPredCount] = {};
      int w, n, nw;
      around(v, r, 0, range.mid, w, n, nw);
      add(acc, v[pat(0, r, 0)], w, n, nw);
      const int* row = v + std::size_t(r) * w_;
      if (r == 0) {
        for (int c = 1; c < w_; ++c) add(acc, row[c], row[c - 1], row[c - 1], row[c - 1]);
      } else {
        const int* up = row - w_;
        for (int c = 1; c < w_; ++c) add(acc, row[c], row[c - 1], up[c], up[c - 1]);
      }
      // A row a predictor reproduces exactly can become a zero row (spec
      // §4.3), which costs nothing; any other row costs its stream's
      // overhead on top (at least a byte, 4 in an entropy-coded tile):
      // kRowCost (with sums of |e|, 8 measured best on the corpus's
      // graphics; with magnitude costs 2, 8, 32 and 64 measure the same).
      const std::uint32_t row_cost = zero_rows_ ? kRowCost : 0;
      for (int k = 0; k < (n_pred == 1 ? 1 : int(core::kPredCount)); ++k) {
        const std::uint32_t row_sum = acc[k] - row_bias;
        cost[k] += row_sum + (row_sum ? row_cost : 0);
      }
    }
  }

  // Sums of the magnitude costs of plane p's residuals under NW
  // (cost[kPredNW]) and under NE (cost[kCostNE]: NW of the mirrored tile,
  // spec §4.7, with its edge rules), as plane_costs for the others. Computed
  // for the chosen transform only (diagonal structures are rare; their
  // planes' other predictors already pick the transform).
  L3_ENCODE_CLONES void diagonal_costs(int p, PlaneCosts& cost) const {
    const int* v = &value_[pat(p, 0, 0)];
    const int mid = params_.plane[p].range.mid;
    const std::uint32_t row_cost = zero_rows_ ? kRowCost : 0;
    const std::uint32_t row_bias = kMagnitudeBias * std::uint32_t(w_);
    for (int r = 0; r < h_; ++r) {
      const int* row = v + std::size_t(r) * w_;
      const int* up = r > 0 ? row - w_ : nullptr;
      // The edges of spec §6.3 in each frame: on row 0, NW is W (E in the
      // mirrored tile); in the first column (the last, mirrored), N.
      std::uint32_t nw = 0, ne = 0;
      if (r == 0) {
        nw += biased_magnitude_cost(row[0] - mid);
        ne += biased_magnitude_cost(row[w_ - 1] - mid);
        for (int c = 1; c < w_; ++c) nw += biased_magnitude_cost(row[c] - row[c - 1]);
        for (int c = 0; c + 1 < w_; ++c) ne += biased_magnitude_cost(row[c] - row[c + 1]);
      } else {
        nw += biased_magnitude_cost(row[0] - up[0]);
        ne += biased_magnitude_cost(row[w_ - 1] - up[w_ - 1]);
        for (int c = 1; c < w_; ++c) nw += biased_magnitude_cost(row[c] - up[c - 1]);
        for (int c = 0; c + 1 < w_; ++c) ne += biased_magnitude_cost(row[c] - up[c + 1]);
      }
      nw -= row_bias;
      ne -= row_bias;
      cost[core::kPredNW] += nw + (nw ? row_cost : 0);
      cost[kCostNE] += ne + (ne ? row_cost : 0);
    }
  }

  // The best predictor per plane among `ids`, unless one predictor shared by
  // all planes costs at most 1% more: the decoder has faster paths for
  // shared ones.
  std::pair<std::uint64_t, std::array<std::uint8_t, core::kMaxChannels>> choose_predictors(
      const TileCosts& cost, std::span<const std::uint8_t> ids) const {
    std::array<std::uint8_t, core::kMaxChannels> per_plane{};
    per_plane.fill(ids[0]);
    std::uint64_t per_plane_total = 0;
    for (int p = 0; p < ch_; ++p) {
      for (std::uint8_t k : ids)
        if (cost[p][k] < cost[p][per_plane[p]]) per_plane[p] = k;
      per_plane_total += cost[p][per_plane[p]];
    }
    std::uint64_t shared_total = std::numeric_limits<std::uint64_t>::max();
    std::uint8_t shared = ids[0];
    for (std::uint8_t k : ids) {
      std::uint64_t total = 0;
      for (int p = 0; p < ch_; ++p) total += cost[p][k];
      if (total < shared_total) { shared_total = total; shared = k; }
    }
    if (shared_total <= per_plane_total + per_plane_total / 100) {
      std::array<std::uint8_t, core::kMaxChannels> same{};
      same.fill(shared);
      return {shared_total, same};
    }
    return {per_plane_total, per_plane};
  }

  // The predictors of every version, with NW (version 12), and with NE in
  // its place (kCostNE: NW of the mirrored tile, whose other predictors'
  // costs are taken to be the same as here).
  static constexpr std::uint8_t kBasePredictors[] = {core::kPredMED, core::kPredW, core::kPredN, core::kPredAvg,
                                                     core::kPredGrad};
  static constexpr std::uint8_t kWithNW[] = {core::kPredMED, core::kPredW, core::kPredN, core::kPredAvg,
                                             core::kPredGrad, core::kPredNW};
  static constexpr std::uint8_t kWithNE[] = {core::kPredMED, core::kPredW, core::kPredN, core::kPredAvg,
                                             core::kPredGrad, kCostNE};

  // The estimated costs of the planes' predictors under the current transform.
  TileCosts transform_costs() const {
    TileCosts cost{};
    const std::uint8_t n_pred = effort_ <= 0 ? 1 : core::kPredCount;
    for (int p = 0; p < ch_; ++p)
      if (!params_.plane[p].constant) plane_costs(p, n_pred, cost[p]);
    return cost;
  }

  // The estimated cost and the predictors of the planes under the current
  // transform; with `diagonals`, NW among them, and mirror_may_pay_ set
  // where NE would predict the tile much better (encode).
  std::pair<std::uint64_t, std::array<std::uint8_t, core::kMaxChannels>> predictors_for_transform(TileCosts cost,
                                                                                                  bool diagonals) {
    if (effort_ <= 0) return choose_predictors(cost, std::span<const std::uint8_t>(kBasePredictors, 1));
    if (!diagonals) return choose_predictors(cost, kBasePredictors);
    for (int p = 0; p < ch_; ++p)
      if (!params_.plane[p].constant) diagonal_costs(p, cost[p]);
    const auto best = choose_predictors(cost, kWithNW);
    if (allow_mirror_ && choose_predictors(cost, kWithNE).first < best.first) mirror_may_pay_ = true;
    return best;
  }
  void set_predictors(const std::array<std::uint8_t, core::kMaxChannels>& pred) {
    for (int p = 0; p < ch_; ++p) params_.plane[p].pred = pred[p];
  }

  // The transform and predictors by estimate; NW and the mirrored tile's NE
  // estimated under the chosen transform only.
  void choose_transform_and_predictors() {
    std::vector<std::uint8_t> transforms;
    if (ch_ < 3) transforms = {core::kTransformNone};
    else if (effort_ <= 0) transforms = {core::kTransformYCoCgR};
    else transforms = {core::kTransformYCoCgR, core::kTransformSubtractGreen, core::kTransformNone};
    std::uint64_t best_total = std::numeric_limits<std::uint64_t>::max();
    TileCosts best_cost{};
    for (std::uint8_t t : transforms) {
      transform_planes(t);
      const TileCosts cost = transform_costs();
      const std::uint64_t total = predictors_for_transform(cost, false).first;
      if (total < best_total) {
        best_total = total;
        params_.transform = t;
        best_cost = cost;
      }
    }
    transform_planes(params_.transform);
    set_predictors(predictors_for_transform(best_cost, diagonals_).second);
  }

  // Density (effort 2), one-plane tiles (gray, a palette's indices): the
  // tile coded with every predictor, the smallest kept. The estimate (sums
  // of absolute residuals) does not see zero rows, runs or rANS, nor that
  // palette indices are labels: measured, graphics (all) -0.7% at effort 2
  // (spec §12).
  std::vector<std::uint8_t> smallest_over_predictors(std::vector<std::uint8_t> best) {
    const std::uint8_t estimated = params_.plane[0].pred;
    if (params_.plane[0].constant) return best;
    for (std::uint8_t k : diagonals_ ? std::span<const std::uint8_t>(kWithNW) : std::span<const std::uint8_t>(kBasePredictors)) {
      if (k == estimated) continue;
      params_.plane[0].pred = k;
      compute_residuals();
      std::vector<std::uint8_t> candidate = coded_tile();
      if (candidate.size() < best.size()) best = std::move(candidate);
    }
    return best;
  }

  // Residuals, magnitudes and context buckets of every sample, in the
  // decoder's order so contexts see exactly what the decoder will see.
  void compute_residuals() {
    zero_.assign(plane_, 1);
    for (int p = 0; p < ch_; ++p) {
      switch (params_.plane[p].pred) {  // the predictor fixed, as the decoder's fast paths
        case core::kPredMED: plane_codes<core::kPredMED>(p); break;
        case core::kPredW: plane_codes<core::kPredW>(p); break;
        case core::kPredN: plane_codes<core::kPredN>(p); break;
        case core::kPredAvg: plane_codes<core::kPredAvg>(p); break;
        case core::kPredNW: plane_codes<core::kPredNW>(p); break;
        default: plane_codes<core::kPredGrad>(p); break;
      }
      params_.plane[p].corrected = false;
      params_.plane[p].corrections = 0;
      if (corrections_ && !params_.plane[p].constant) choose_corrections(p);
      const std::uint32_t* u = &sym_[pat(p, 0, 0)];
      std::uint8_t* __restrict zero = zero_.data();
      for (std::size_t i = 0, n = plane_; i < n; ++i) zero[i] &= std::uint8_t(u[i] == 0);
      if (plane_context_eligible(p)) {
        buckets_choosing_previous_code(p);
      } else {
        params_.plane[p].previous_code = false;
        plane_buckets(p);
      }
    }
    mark_zero_rows();
  }

  // zero_row_ from zero_: the rows whose every pixel's codes are zero, when
  // zero rows are written (spec §4.3).
  void mark_zero_rows() {
    zero_row_.assign(std::size_t(h_), 0);
    if (!zero_rows_) return;
    for (int r = 0; r < h_; ++r) {
      const std::uint8_t* z = &zero_[std::size_t(r) * w_];
      zero_row_[r] = std::uint8_t(std::all_of(z, z + w_, [](std::uint8_t b) { return b != 0; }));
    }
  }

  // Plane p's residual codes (spec §6.1, §6.3): they depend on plane values
  // only, so this loop has no dependency from one sample to the next and
  // vectorises; the contexts, which read the codes of W, follow in
  // plane_buckets.
  template <std::uint8_t kPred>
  L3_ENCODE_CLONES void plane_codes(int p) {
    const core::PlaneParams& pp = params_.plane[p];
    const int lo = pp.range.lo, hi = pp.range.hi;
    const int* v = &value_[pat(p, 0, 0)];
    std::uint32_t* __restrict u = &sym_[pat(p, 0, 0)];
    auto code = [&](std::size_t i, int w, int n, int nw) __attribute__((always_inline)) {
      u[i] = core::zigzag(v[i] - core::predict_fixed<kPred>(kPred, w, n, nw, lo, hi));
    };
    each_sample(v, pp.range.mid, code);
  }

  // Residual corrections of plane p (version 8, spec §6.7), whose codes
  // (sym_) are its uncorrected residuals' on entry: per gradient class, the
  // bias is the class's median residual clamped to -1..1, and the sign is
  // flipped where more of the residuals less the bias are positive than
  // negative (a negative residual has the smaller code, 2|e| - 1: smaller
  // Rice codes, and smaller activities in the contexts of §6.2). Kept where
  // the likely saving (the signs' entropy, the residuals the bias makes 0)
  // exceeds their 32 bits and kCorrectionMinBitsPerSample: +-1 noise on ramps
  // and anti-aliased edges fall on one side of the prediction by the signs
  // of the local gradients (spec §12).
  L3_ENCODE_CLONES void choose_corrections(int p) {
    core::PlaneParams& pp = params_.plane[p];
    const int* __restrict v = &value_[pat(p, 0, 0)];
    std::uint32_t* __restrict u = &sym_[pat(p, 0, 0)];
    class_.resize(plane_);
    std::uint8_t* __restrict cls = class_.data();
    // Each sample's class, and its bin: the class and the residual (<= -2,
    // -1, 0, 1, >= 2), in a loop that vectorises; then the bins counted in 4
    // sets by column, so that consecutive samples (mostly of one class and
    // bin) do not wait on each other's increment.
    bin_.resize(plane_);
    std::uint8_t* __restrict bin = bin_.data();
    each_sample(v, pp.range.mid, [&](std::size_t i, int w, int n, int nw) __attribute__((always_inline)) {
      const int g = core::correction_class(w, n, nw);
      cls[i] = std::uint8_t(g);
      bin[i] = std::uint8_t(5 * g + std::clamp(core::unzigzag(u[i]), -2, 2) + 2);
    });
    std::array<std::array<std::uint32_t, 5 * core::kCorrectionClasses>, 4> counts{};
    for (std::size_t i = 0; i < plane_; ++i) ++counts[i & 3][bin[i]];
    std::array<std::array<std::uint32_t, 5>, core::kCorrectionClasses> count{};
    for (const auto& set : counts)
      for (int x = 0; x < 5 * core::kCorrectionClasses; ++x)
        count[std::size_t(x / 5)][std::size_t(x % 5)] += set[std::size_t(x)];
    std::uint32_t entries = 0;
    double likely_gain = 0;
    for (int g = 0; g < core::kCorrectionClasses; ++g) {
      const auto& k = count[std::size_t(g)];
      const std::uint32_t total = k[0] + k[1] + k[2] + k[3] + k[4];
      int bias = 0;
      if (2 * (k[3] + k[4]) > total) bias = 1;
      else if (2 * (k[0] + k[1]) > total) bias = -1;
      // Residuals less the bias, positive and negative.
      const std::uint32_t pos = bias > 0 ? k[4] : bias < 0 ? k[2] + k[3] + k[4] : k[3] + k[4];
      const std::uint32_t neg = bias > 0 ? k[0] + k[1] + k[2] : bias < 0 ? k[0] : k[0] + k[1];
      const std::uint32_t entry = std::uint32_t(bias > 0 ? 1 : bias < 0 ? 2 : 0) | (pos > neg ? 4u : 0u);
      entries |= entry << (core::kCorrectionBits * g);
      // The signs' entropy among non-zero residuals, and a bit for each
      // residual the bias makes 0 beyond those it makes non-zero.
      const std::uint32_t nonzero = total - k[2];
      if (nonzero) {
        const double q = double(k[3] + k[4]) / double(nonzero);
        const double h = q <= 0 || q >= 1 ? 0 : -(q * std::log2(q) + (1 - q) * std::log2(1 - q));
        likely_gain += double(nonzero) * (1 - h);
      }
      if (bias) likely_gain += double(k[std::size_t(2 + bias)]) - double(k[2]);
    }
    const double need = 32 + (effort_ >= 2 ? 0 : kCorrectionMinBitsPerSample * double(plane_));
    if (entries == 0 || likely_gain < need) return;
    // A plane mostly of flat neighbourhoods (class 4) whose flat residuals
    // flip: the flips turn codes 2 into 1, which count half in the activity
    // of a neighbour's NW, so an entropy-coded tile's contexts may lose more
    // than the signs save (a 1024 x 768 gradient: +46%). There the codes
    // with all entries, without the flat class's flip and without
    // corrections are estimated (plane_code_bits) and the smallest kept.
    constexpr int kFlat = 4;
    const auto& flat = count[kFlat];
    const bool flat_flips = (entries >> (core::kCorrectionBits * kFlat + 2)) & 1u;
    if (flat_flips && 2 * std::size_t(flat[0] + flat[1] + flat[2] + flat[3] + flat[4]) > plane_) {
      const std::uint32_t no_flat_flip = entries & ~(4u << (core::kCorrectionBits * kFlat));
      corrected_codes(u, entries, alt_sym_);
      double best = plane_code_bits(alt_sym_.data());
      if (no_flat_flip) {
        corrected_codes(u, no_flat_flip, alt_sym2_);
        if (const double bits = plane_code_bits(alt_sym2_.data()); bits < best) {
          best = bits;
          entries = no_flat_flip;
          alt_sym_.swap(alt_sym2_);
        }
      }
      if (best > plane_code_bits(u) - need) return;
    } else {
      corrected_codes(u, entries, alt_sym_);
    }
    pp.corrected = true;
    pp.corrections = entries;
    std::memcpy(u, alt_sym_.data(), plane_ * sizeof *u);
  }

  // The codes of uncorrected codes `u` (the plane's, classes in class_) under
  // correction entries `entries`: the decoder adds core::corrected_residual(
  // entry, e) = (flip ? -e : e) + bias to the prediction, so a residual r is
  // coded as e = +-(r - bias).
  L3_ENCODE_CLONES void corrected_codes(const std::uint32_t* u, std::uint32_t entries,
                                        std::vector<std::uint32_t>& out) const {
    out.resize(plane_);
    // Per class: the bias, and -1 where the sign flips (tables: the loop vectorises).
    std::array<int, 16> bias{}, flip{};
    for (int g = 0; g < core::kCorrectionClasses; ++g) {
      const std::uint32_t entry = (entries >> (core::kCorrectionBits * g)) & 7u;
      bias[std::size_t(g)] = core::correction_bias(entry);
      flip[std::size_t(g)] = -core::correction_flip(entry);
    }
    const std::uint8_t* cls = class_.data();
    std::uint32_t* __restrict to = out.data();
    for (std::size_t i = 0; i < plane_; ++i) {
      const int f = flip[cls[i] & 15];
      const int e = ((core::unzigzag(u[i]) - bias[cls[i] & 15]) ^ f) - f;
      to[i] = core::zigzag(e);
    }
  }

  // The estimated bits of plane codes `u`: the smaller of their Rice bits (a
  // k per context bucket) and, with entropy-coded tiles on, their tokens'
  // entropy in the context groups of spec §4.5 (tables included); contexts
  // from the codes' own W, N and NW.
  L3_ENCODE_CLONES double plane_code_bits(const std::uint32_t* u) const {
    static const BucketTable table;
    std::array<BucketSum, core::kBuckets> rice{};
    std::array<std::array<std::uint32_t, core::kAnsTokens>, core::kAnsGroups> tokens{};
    std::uint64_t raw_bits = 0;
    each_sample(u, 0u, [&](std::size_t i, std::uint32_t uw, std::uint32_t un, std::uint32_t unw) __attribute__((always_inline)) {
      const int b = table.of(core::activity(int(uw), int(un), int(unw)));
      rice[std::size_t(b)].add(u[i]);
      const encoder::AnsToken t = encoder::ans_token(u[i]);
      ++tokens[std::size_t(core::ans_group_of_bucket(b))][std::size_t(t.token)];
      raw_bits += std::uint32_t(t.raw_bits);
    });
    double rice_bits = 0;
    for (const BucketSum& b : rice) rice_bits += double(b.rice_bits());
    if (!ans_) return rice_bits;
    double ans = double(raw_bits);
    for (const auto& h : tokens) {
      std::uint32_t n = 0;
      for (std::uint32_t c : h) n += c;
      if (!n) continue;
      ans += double(n) * std::log2(double(n));
      for (std::uint32_t c : h)
        if (c) ans += kTableBitsPerToken - double(c) * std::log2(double(c));
    }
    return std::min(rice_bits, ans);
  }

  // Plane p's context buckets (spec §6.2) from the codes of W, N and NW, and
  // with PlaneParams::previous_code (version 7) the code of plane p - 1.
  L3_ENCODE_CLONES void plane_buckets(int p) {
    const std::uint32_t* u = &sym_[pat(p, 0, 0)];
    std::uint8_t* __restrict bucket = &bucket_[pat(p, 0, 0)];
    static const BucketTable table;
    if (params_.plane[p].previous_code) {
      const std::uint32_t* before = &sym_[pat(p - 1, 0, 0)];
      each_sample(u, 0u, [&](std::size_t i, std::uint32_t uw, std::uint32_t un, std::uint32_t unw) __attribute__((always_inline)) {
        bucket[i] = table.of(core::activity(int(uw), int(un), int(unw)) + int(before[i]));
      });
      return;
    }
    each_sample(u, 0u, [&](std::size_t i, std::uint32_t uw, std::uint32_t un, std::uint32_t unw) __attribute__((always_inline)) {
      bucket[i] = table.of(core::activity(int(uw), int(un), int(unw)));
    });
  }

  // Whether plane p may take the context of the plane before (version 7,
  // spec §6.2): a coded plane after a coded one, at effort >= 1; at effort 1
  // only in tiles of more than a palette's colours (photos, noisy gradients:
  // where it pays; the estimate's pass costs the encoder time, spec §12).
  bool plane_context_eligible(int p) {
    return plane_contexts_ && p > 0 && !params_.plane[p].constant && !params_.plane[p - 1].constant &&
           (effort_ >= 2 || !few_colours());
  }

  // Plane p's context buckets with or without the code of plane p - 1 at the
  // same pixel (version 7, spec §6.2), whichever its Rice bits, estimated per
  // bucket from each bucket's count and sum of codes, say is smaller; sets
  // PlaneParams::previous_code. One pass for both. On photos and gradients a
  // pixel's planes err together; the context waits for the plane before,
  // which costs the decoder time (spec §12): every saving on photos, 1.2%
  // fewer bytes, at about 2% of their decode time.
  L3_ENCODE_CLONES void buckets_choosing_previous_code(int p) {
    const std::uint32_t* u = &sym_[pat(p, 0, 0)];
    const std::uint32_t* before = &sym_[pat(p - 1, 0, 0)];
    std::uint8_t* __restrict bucket = &bucket_[pat(p, 0, 0)];
    alt_bucket_.resize(plane_);
    std::uint8_t* __restrict alt = alt_bucket_.data();
    static const BucketTable table;
    std::array<BucketSum, core::kBuckets> own{}, with{};
    each_sample(u, 0u, [&](std::size_t i, std::uint32_t uw, std::uint32_t un, std::uint32_t unw) __attribute__((always_inline)) {
      const int a = core::activity(int(uw), int(un), int(unw));
      bucket[i] = table.of(a);
      alt[i] = table.of(a + int(before[i]));
      own[bucket[i]].add(u[i]);
      with[alt[i]].add(u[i]);
    });
    std::uint64_t own_bits = 0, with_bits = 0;
    for (std::uint32_t b = 0; b < core::kBuckets; ++b) {
      own_bits += own[b].rice_bits();
      with_bits += with[b].rice_bits();
    }
    params_.plane[p].previous_code = with_bits < own_bits;
    if (params_.plane[p].previous_code) std::memcpy(bucket, alt, plane_);
  }

  // Calls f(i, w, n, nw) for every sample i of a plane `a` (row-major), with
  // the neighbours after the edge rules (spec §6.3; `mid` at the tile's first
  // pixel): column 0 through around(), the interior without branches. Always
  // inline, so that it is built for the target of its caller's clone.
  template <class T, class F>
  __attribute__((always_inline)) void each_sample(const T* a, T mid, F&& f) const {
    // The sizes in locals: f's stores (bytes, or ints, which may alias the
    // members as far as the compiler knows) would otherwise make it reload
    // them, and the loops could not vectorise.
    const std::size_t width = std::size_t(w_);
    const int height = h_;
    for (int r = 0; r < height; ++r) {
      const std::size_t row = std::size_t(r) * width;
      T w, n, nw;
      around(a, r, 0, mid, w, n, nw);
      f(row, w, n, nw);
      if (r == 0) {
        for (std::size_t i = 1; i < width; ++i) f(i, a[i - 1], a[i - 1], a[i - 1]);
      } else {
        for (std::size_t i = row + 1; i < row + width; ++i) f(i, a[i - 1], a[i - width], a[i - width - 1]);
      }
    }
  }

  // A row whose codes are all zero in every plane is stored as an empty
  // stream, a zero row (spec §4.3, version 4): no run lengths, no codes, no
  // rANS state. Every size the encoder compares (run mode or not, Rice or
  // rANS, palette or not, transforms at effort 2) is counted without them.
  bool zero_row(int r) const { return zero_row_[r] != 0; }

  bool pixel_is_zero(int r, int c) const { return zero_[std::size_t(r) * w_ + c] != 0; }
  // Whether the codes of W, N and NW are all zero, after the edge rules
  // (spec §6.3, §6.4): the condition for reading a run length.
  bool run_context(int r, int c) const {
    if (r > 0 && c > 0) return pixel_is_zero(r, c - 1) && pixel_is_zero(r - 1, c) && pixel_is_zero(r - 1, c - 1);
    if (r > 0) return pixel_is_zero(r - 1, c);
    if (c > 0) return pixel_is_zero(r, c - 1);
    return true;
  }

  // Walks row r through the run state machine of spec §6.4, calling
  // run(len) (or run(c, len), the run's first column too) for each run
  // symbol and pixel(c) for each pixel coded normally;
  // with copies (copies_on_, spec §6.6), copy(ref) at each point where the
  // decoder reads a copy length (ref.len 0: no copy there). A zero run ends
  // where a copy starts.
  template <class OnRun, class OnPixel, class OnCopy>
  void walk_row(int r, bool run_mode, OnRun&& run, OnPixel&& pixel, OnCopy&& copy) const {
    bool blocked = false;
    const CopyRef* copies = copies_on_ ? &copy_at_[std::size_t(r) * w_] : nullptr;
    for (int c = 0; c < w_;) {
      if (copies) {
        copy(copies[c]);
        if (copies[c].len) {
          c += copies[c].len;
          blocked = false;
          continue;
        }
      }
      if (run_mode && !blocked && run_context(r, c)) {
        int len = 0;
        while (c + len < w_ && pixel_is_zero(r, c + len) && !(copies && copies[c + len].len)) ++len;
        if constexpr (std::is_invocable_v<OnRun, int, int>) run(c, len);
        else run(len);
        if (len > 0) {
          c += len;
          blocked = true;
          continue;
        }
      }
      pixel(c);
      blocked = false;
      ++c;
    }
  }
  template <class OnRun, class OnPixel>
  void walk_row(int r, bool run_mode, OnRun&& run, OnPixel&& pixel) const {
    walk_row(r, run_mode, run, pixel, [](const CopyRef&) {});
  }

  // The Rice plans of the tile without and with run mode (spec §6.4, §7.2):
  // each plane's k per bucket and the run lengths' k, and the bits of each.
  // One walk in run mode makes both: the pixels of a run have all codes 0,
  // so the plan without runs is the run plan's costs plus a zero code in
  // each run pixel's bucket of each coded plane. The entropy-coded forms'
  // token histograms in both modes follow from the same counts.
  struct RicePlans {
    std::array<std::array<std::uint8_t, core::kBuckets>, core::kMaxChannels> k_plain{}, k_run{};
    std::uint8_t run_k = 0;
    std::uint64_t plain_bits = 0, run_bits = 0;
    // With entropy-coded tiles (ans_) only:
    std::array<AnsHists, 2> ans_hist{};          // [run mode]: the entropy-coded form's tokens
    std::array<std::uint64_t, 2> ans_raw_bits{};  // [run mode]: and their raw bits
  };
  RicePlans rice_plans() const {
    std::array<KCosts, core::kMaxChannels> costs{}, run_pixels{};
    RunCosts run_costs;
    for (int r = 0; r < h_; ++r)
      if (!zero_row(r))
        walk_row(r, true,
                 [&](int c, int len) {
                   run_costs.add(std::uint32_t(len));
                   for (int p = 0; p < ch_; ++p)
                     if (!params_.plane[p].constant)
                       for (int j = c; j < c + len; ++j) run_pixels[p].add(bucket_[pat(p, r, j)], 0);
                 },
                 [&](int c) {
                   for (int p = 0; p < ch_; ++p)
                     if (!params_.plane[p].constant) costs[p].add(bucket_[pat(p, r, c)], sym_[pat(p, r, c)]);
                 });
    RicePlans plans;
    for (int p = 0; p < ch_; ++p) {
      if (params_.plane[p].constant) continue;
      plans.run_bits += costs[p].choose(plans.k_run[p].data());
      if (ans_) costs[p].ans_tokens(p * core::kAnsGroups, plans.ans_hist[1], plans.ans_raw_bits[1]);
      run_pixels[p].merge(costs[p]);
      plans.plain_bits += run_pixels[p].choose(plans.k_plain[p].data());
      if (ans_) run_pixels[p].ans_tokens(p * core::kAnsGroups, plans.ans_hist[0], plans.ans_raw_bits[0]);
    }
    if (ans_) {
      plans.ans_hist[1][core::kAnsRunContext] = run_costs.tokens;
      plans.ans_raw_bits[1] += run_costs.raw_bits;
    }
    plans.run_bits += run_costs.choose(plans.run_k) + 8;
    return plans;
  }

  std::vector<std::uint8_t> coded_tile() {
    const RicePlans plans = rice_plans();
    params_.run_mode = plans.run_bits < plans.plain_bits;
    params_.run_k = plans.run_k;
    const std::uint8_t run_k = plans.run_k;
    const auto& k = params_.run_mode ? plans.k_run : plans.k_plain;

    std::vector<std::vector<std::uint8_t>> rows(h_);
    for (int r = 0; r < h_; ++r) {
      if (zero_row(r)) continue;  // an empty stream
      BitWriter bw(std::size_t(w_) * std::size_t(ch_));  // a byte a sample: most rows fit
      walk_row(r, params_.run_mode, [&](int len) { write_rice(bw, std::uint32_t(len), run_k); },
               [&](int c) {
                 for (int p = 0; p < ch_; ++p)
                   if (!params_.plane[p].constant) write_rice(bw, sym_[pat(p, r, c)], k[p][bucket_[pat(p, r, c)]]);
               });
      rows[r] = std::move(bw.finish());
    }
    std::vector<std::uint8_t> best = assemble(k, rows);
    if (ans_) best = entropy_coded_choice(std::move(best), rows, plans);
    // At effort 1 only tiles of few colours (text, user interfaces, dithers,
    // masks: where copies pay, spec §12) spend the search, and those that
    // have a palette form try copies of their pixels after it (encode()).
    if (pixel_copies_ && (effort_ >= 2 || (few_colours() && !copies_after_palette()))) {
      std::vector<std::uint8_t> copied = copy_tile(best.size());
      if (!copied.empty() && copies_pay(copied.size(), best.size())) best = std::move(copied);
    }
    return best;
  }

  // ---- Bilevel planes (spec §4.3, §6.8, version 11; version 13) -------------

  // The bits of the indices of a palette of `colours` colours that bilevel
  // forms code (spec §6.8): 1 for two colours; with templates (version 13)
  // up to kMaxBitPlanes for up to 16; 0: none.
  int bit_planes_for(std::size_t colours) const {
    if (!bilevel_ || colours < 2) return 0;
    if (colours == 2) return 1;
    if (!templates_ || colours > (std::size_t(1) << core::kMaxBitPlanes)) return 0;
    int bits = 1;
    while ((std::size_t(1) << bits) < colours) ++bits;
    return bits;
  }

  // A palette for bit planes (version 13, spec §6.8, §12): where every
  // channel takes at most two values in the tile's colours (ordered dithers),
  // the palette becomes all 2^m combinations of the m channels that vary (the
  // missing ones are added, unused) and bit t of a colour's index is whether
  // its t-th varying channel takes the larger value: each bit plane is one
  // channel. `order[i]`: the colour (of the completed `colours`) with index
  // i. False, and nothing changed, otherwise.
  bool channel_bit_palette(std::vector<std::uint32_t>& colours, std::vector<std::uint8_t>& order) const {
    if (!templates_ || colours.size() < 3) return false;
    std::uint32_t lo[core::kMaxChannels], hi[core::kMaxChannels];
    for (int k = 0; k < ch_; ++k) lo[k] = hi[k] = (colours[0] >> (8 * k)) & 255;
    for (std::uint32_t v : colours)
      for (int k = 0; k < ch_; ++k) {
        const std::uint32_t x = (v >> (8 * k)) & 255;
        if (x != lo[k] && x != hi[k]) {
          if (lo[k] != hi[k]) return false;  // a third value
          (x < lo[k] ? lo[k] : hi[k]) = x;
        }
      }
    int varying = 0;
    for (int k = 0; k < ch_; ++k) varying += lo[k] != hi[k];
    const std::size_t combinations = std::size_t(1) << varying;
    if (combinations > (std::size_t(1) << core::kMaxBitPlanes)) return false;
    auto index_of = [&](std::uint32_t v) {
      std::uint32_t index = 0;
      for (int k = 0, t = 0; k < ch_; ++k)
        if (lo[k] != hi[k]) index |= std::uint32_t(((v >> (8 * k)) & 255) == hi[k]) << t++;
      return index;
    };
    std::vector<int> at(combinations, -1);  // at[index]: its colour in `colours`
    for (std::size_t j = 0; j < colours.size(); ++j) at[index_of(colours[j])] = int(j);  // distinct colours: distinct indices
    for (std::uint32_t index = 0; index < combinations; ++index) {
      if (at[index] >= 0) continue;
      std::uint32_t v = 0;
      for (int k = 0, t = 0; k < ch_; ++k) {
        const bool high = lo[k] != hi[k] && ((index >> t++) & 1);
        v |= (high ? hi[k] : lo[k]) << (8 * k);
      }
      at[index] = int(colours.size());
      colours.push_back(v);
    }
    order.resize(combinations);
    for (std::size_t i = 0; i < combinations; ++i) order[i] = std::uint8_t(at[i]);
    return true;
  }

  // Template candidates (version 13, spec §6.8): WW and NN (the only
  // template before), then pairs of the pixels d to the left and d up, which
  // catch periods of d (ordered dithers: 8; spec §12). Effort 1 tries the
  // first three.
  static constexpr int kTemplateCandidates = 6;
  static constexpr int kTemplateCandidatesEffort1 = 3;
  static constexpr int kTemplateDistance[kTemplateCandidates] = {2, 8, 4, 3, 6, 16};

  // WW and NN: no template bytes (spec §4.3, plane byte bit 6).
  bool default_template() const { return core::default_template(params_); }

  void set_template(int candidate) {
    const int d = kTemplateDistance[candidate];
    params_.template_dy[0] = 0;
    params_.template_dx[0] = -d;
    params_.template_dy[1] = d;
    params_.template_dx[1] = 0;
  }

  // The indices of the template pixels of pixel (r, c) of the index plane
  // v, whose W and N are w and n: the decoders' rule (spec §6.8).
  void template_pixels(const std::uint8_t* v, int r, int c, int w, int n, int* tmpl) const {
    core::template_indices(params_, r, c, w, n, [&](int y, int x) { return v[std::size_t(y) * w_ + x]; }, tmpl);
  }

  // The smallest bilevel form of a palette tile's index plane (the pixels
  // here are the indices): predicted by W or by N, and at effort 2 also with
  // zero runs (which rarely pay: a context certain of its value costs 1/4096
  // of a bit, spec §12); with templates (version 13), the template of the
  // candidates whose estimate is smallest. At effort 2 the forms are compared
  // by their estimated bits (bilevel_plan); at effort 1 the prediction is the
  // one with more zero rows, which is all that tells the two apart: in the
  // other rows a context holds W and N, so the symbols under one are those
  // under the other relabelled, and the levels mirror (spec §6.8). The chosen
  // form alone is coded: its rANS rows divide once per symbol. The symbols
  // depend on the prediction only, their contexts on the template too.
  std::vector<std::uint8_t> bilevel_tile() {
    std::uint8_t best_pred = core::kPredW;
    bool best_runs = false;
    int best_template = 0;
    if (effort_ >= 2) {
      const int candidates = templates_ ? kTemplateCandidates : 1;
      const std::uint8_t preds[2] = {core::kPredW, core::kPredN};
      double bits[kTemplateCandidates][2][2] = {};  // by template, prediction, run mode
      for (int q = 0; q < 2; ++q) {
        bilevel_symbols(preds[q]);
        for (int k = 0; k < candidates; ++k) {
          set_template(k);
          bilevel_contexts();
          for (int run_mode = 0; run_mode < 2; ++run_mode) bits[k][q][run_mode] = bilevel_plan(run_mode != 0).bits;
        }
      }
      double best_bits = 0;
      for (int k = 0; k < candidates; ++k)
        for (int q = 0; q < 2; ++q)
          for (int run_mode = 0; run_mode < 2; ++run_mode)
            if (best_bits == 0 || bits[k][q][run_mode] < best_bits)
              best_pred = preds[q], best_runs = run_mode != 0, best_template = k, best_bits = bits[k][q][run_mode];
    } else {
      if (bilevel_zero_rows(core::kPredN) > bilevel_zero_rows(core::kPredW)) best_pred = core::kPredN;
      if (templates_ && bit_planes_ > 1) {
        // The symbols do not depend on the template, only their contexts:
        // the candidates are compared by their contexts' counts alone. Two
        // colours keep WW and NN at effort 1: on the corpus's bilevel images
        // the other templates saved 3 and 8 bytes for 40-60% more encode
        // time (spec §12).
        bilevel_symbols(best_pred);
        set_template(0);
        double best_bits = template_bits();
        for (int k = 1; k < kTemplateCandidatesEffort1; ++k) {
          set_template(k);
          const double bits = template_bits();
          if (bits < best_bits) best_template = k, best_bits = bits;
        }
      }
    }
    bilevel_symbols(best_pred);
    set_template(best_template);
    bilevel_contexts();
    std::vector<std::uint8_t> best = bilevel_form(bilevel_plan(best_runs));
    bilevel_on_ = false;
    return best;
  }

  // The estimated bits of the symbols of bilevel_symbols' prediction (without
  // runs) in the contexts of the template at hand, and of its level tables
  // and template bytes: bilevel_plan's estimate less the parts that do not
  // depend on the template, from counts alone (effort 1).
  double template_bits() const {
    std::array<std::array<std::uint32_t, 2>, kBilevelRun> count{};
    const std::uint8_t* v = pixels_.data();
    for (int r = 0; r < h_; ++r) {
      if (zero_row(r)) continue;
      for (int c = 0; c < w_; ++c) {
        const std::size_t i = std::size_t(r) * w_ + c;
        std::uint8_t w, n, nw;
        around(v, r, c, std::uint8_t(0), w, n, nw);
        int tmpl[core::kTemplatePixels];
        template_pixels(v, r, c, w, n, tmpl);
        for (int j = 0; j < bit_planes_; ++j) {
          const int x = core::bilevel_pattern((w >> j) & 1, (n >> j) & 1, (nw >> j) & 1, (tmpl[0] >> j) & 1, (tmpl[1] >> j) & 1);
          ++count[std::size_t(j) * core::kBilevelContexts + std::size_t(x)][(sym_[i] >> j) & 1];
        }
      }
    }
    double bits = default_template() ? 0.0 : 8.0 * 2 * core::kTemplatePixels;
    for (const auto& n : count) {
      double b = 0;
      bilevel_level(n[0], n[1], b);
      bits += b;
    }
    return bits;
  }

  // How many rows are zero rows (spec §4.3) of the bilevel plane under
  // prediction W or N (bit by bit, the index's W or N): under W a row of one
  // value, the value above its first pixel; under N a repeat of the row
  // above; the first row under either a row of index 0 (the midpoint, §6.8).
  int bilevel_zero_rows(std::uint8_t pred) const {
    if (!zero_rows_) return 0;
    int rows = 0;
    for (int r = 0; r < h_; ++r) {
      const std::uint8_t* row = &pixels_[std::size_t(r) * w_];
      const std::uint8_t* up = r > 0 ? row - w_ : nullptr;
      if (pred == core::kPredN && up) {
        rows += std::memcmp(row, up, std::size_t(w_)) == 0;
        continue;
      }
      const std::uint8_t first = up ? up[0] : 0;
      rows += std::all_of(row, row + w_, [&](std::uint8_t v) { return v == first; });
    }
    return rows;
  }

  // Each pixel's symbols (bit j of its index xor bit j's prediction `pred`,
  // spec §6.8) as one word, its residual code, in sym_ and zero_, and the
  // zero rows.
  void bilevel_symbols(std::uint8_t pred) {
    core::PlaneParams& pp = params_.plane[0];
    pp = core::PlaneParams{};
    pp.pred = pred;
    pp.range = {0, 1, 0};
    zero_.assign(plane_, 1);
    each_index(pixels_.data(), [&](std::size_t i, int, int, int w, int n, int nw) {
      std::uint32_t symbols = 0;
      for (int j = 0; j < bit_planes_; ++j) {
        const int bit = ((pixels_[i] >> j) & 1) ^ core::predict(pred, (w >> j) & 1, (n >> j) & 1, (nw >> j) & 1, 0, 1);
        symbols |= std::uint32_t(bit) << j;
      }
      sym_[i] = symbols;
      zero_[i] = std::uint8_t(symbols == 0);
    });
    mark_zero_rows();
  }

  // Each bit's context (spec §6.8) under the template at hand, in bilevel_ctx_.
  void bilevel_contexts() {
    bilevel_ctx_.resize(plane_ * core::kMaxBitPlanes);
    const std::uint8_t* v = pixels_.data();
    each_index(v, [&](std::size_t i, int r, int c, int w, int n, int nw) {
      int tmpl[core::kTemplatePixels];
      template_pixels(v, r, c, w, n, tmpl);
      for (int j = 0; j < bit_planes_; ++j)
        bilevel_ctx_[i * core::kMaxBitPlanes + j] = std::uint8_t(
            core::bilevel_pattern((w >> j) & 1, (n >> j) & 1, (nw >> j) & 1, (tmpl[0] >> j) & 1, (tmpl[1] >> j) & 1));
    });
  }

  // f(i, r, c, w, n, nw) for each pixel of the index plane v, its W, N and
  // NW after the edge rules (index 0 for the first pixel, spec §6.8).
  template <class F>
  void each_index(const std::uint8_t* v, F&& f) const {
    for (int r = 0; r < h_; ++r)
      for (int c = 0; c < w_; ++c) {
        std::uint8_t w, n, nw;
        around(v, r, c, std::uint8_t(0), w, n, nw);
        f(std::size_t(r) * w_ + c, r, c, int(w), int(n), int(nw));
      }
  }

  // The level (spec §4.3) that codes n0 zeros and n1 ones in the fewest
  // bits, and those bits.
  static int bilevel_level(std::uint32_t n0, std::uint32_t n1, double& best_bits) {
    best_bits = 0;
    if (n0 + n1 == 0) return 0;  // unused
    int best = 1;
    for (int q = 1; q < core::kBilevelContexts; ++q) {
      const double one = double(core::bilevel_frequency(q)) / core::kAnsTotal;
      const double bits = -double(n0) * std::log2(1 - one) - double(n1) * std::log2(one);
      if (q == 1 || bits < best_bits) best = q, best_bits = bits;
    }
    return best;
  }

  // The values of a bilevel form (bilevel_symbols' symbols, bit by bit, and in
  // `run_mode` zero runs' lengths) row by row, each context's counts, the
  // level that codes them in the fewest bits, and the estimated bits of the
  // whole: symbols, run lengths, tables, template and each coded row's rANS
  // state.
  static constexpr std::uint32_t kBilevelRun = core::kMaxBitPlanes * core::kBilevelContexts;  // a value's context: a run length
  struct BilevelPlan {
    bool run_mode = false;
    std::vector<std::uint32_t> values;  // context << 16 | value; context: bit * 32 + bilevel context, or kBilevelRun
    std::array<std::uint32_t, core::kMaxTileHeight + 1> row_start{};
    std::array<std::array<int, core::kBilevelContexts>, core::kMaxBitPlanes> level{};
    encoder::AnsHist runs{};
    double bits = 0;
  };
  BilevelPlan bilevel_plan(bool run_mode) const {
    BilevelPlan plan;
    plan.run_mode = run_mode;
    plan.values.reserve(plane_ * std::size_t(bit_planes_));
    std::array<std::array<std::uint32_t, 2>, kBilevelRun> count{};
    std::uint64_t raw_bits = 0;
    for (int r = 0; r < h_; ++r) {
      plan.row_start[r] = std::uint32_t(plan.values.size());
      if (zero_row(r)) continue;
      walk_row(r, run_mode,
               [&](int len) {
                 plan.values.push_back(kBilevelRun << 16 | std::uint32_t(len));
                 const encoder::AnsToken t = encoder::ans_token(std::uint32_t(len));
                 ++plan.runs[t.token];
                 raw_bits += std::uint64_t(t.raw_bits);
               },
               [&](int c) {
                 const std::size_t i = std::size_t(r) * w_ + c;
                 for (int j = 0; j < bit_planes_; ++j) {
                   const std::uint32_t x = std::uint32_t(j) * core::kBilevelContexts + bilevel_ctx_[i * core::kMaxBitPlanes + j];
                   const std::uint32_t bit = (sym_[i] >> j) & 1;
                   plan.values.push_back(x << 16 | bit);
                   ++count[x][bit];
                 }
               });
    }
    plan.row_start[h_] = std::uint32_t(plan.values.size());
    plan.bits = bit_planes_ * core::kBilevelContexts * core::kBilevelLevelBits + 8.0 * kAnsRowBytes * coded_rows() +
                (default_template() ? 0.0 : 8.0 * 2 * core::kTemplatePixels);
    for (int j = 0; j < bit_planes_; ++j)
      for (int x = 0; x < core::kBilevelContexts; ++x) {
        double bits = 0;
        const std::size_t at = std::size_t(j) * core::kBilevelContexts + std::size_t(x);
        plan.level[j][x] = bilevel_level(count[at][0], count[at][1], bits);
        plan.bits += bits;
      }
    if (run_mode) {
      AnsHists hist{};
      hist[core::kAnsRunContext] = plan.runs;
      plan.bits += ans_bits(hist, raw_bits);
    }
    return plan;
  }

  // The bilevel tile of `plan` (of bilevel_symbols' symbols): binary symbols
  // in 32 contexts per bit, run lengths in the run context (spec §6.8); with
  // templates (version 13) the template before the level tables.
  std::vector<std::uint8_t> bilevel_form(const BilevelPlan& plan) {
    params_.run_mode = plan.run_mode;
    copies_on_ = false;
    bilevel_on_ = true;
    const encoder::AnsFreqs run_freq = encoder::ans_quantise(plan.runs, compact_tables_);
    std::array<std::uint32_t, core::kAnsTokens> run_start{};
    for (int t = 1; t < core::kAnsTokens; ++t) run_start[t] = run_start[t - 1] + run_freq[t - 1];
    std::vector<std::vector<std::uint8_t>> rows(h_);
    for (int r = 0; r < h_; ++r) {
      if (zero_row(r)) continue;
      encoder::AnsWriter aw;
      for (std::uint32_t i = plan.row_start[r + 1]; i-- > plan.row_start[r];) {
        const std::uint32_t x = plan.values[i] >> 16, u = plan.values[i] & 0xffff;
        if (x == kBilevelRun) {  // a run length
          const encoder::AnsToken t = encoder::ans_token(u);
          if (t.raw_bits) aw.put_raw(t.raw, t.raw_bits);
          aw.put_token(run_start[t.token], run_freq[t.token]);
        } else {
          const std::uint32_t one = core::bilevel_frequency(plan.level[x / core::kBilevelContexts][x % core::kBilevelContexts]);
          const std::uint32_t zeros = core::kAnsTotal - one;
          if (u) aw.put_token(zeros, one);
          else aw.put_token(0, zeros);
        }
      }
      rows[r] = aw.finish();
    }
    return assemble(
        core::kModeAns, rows,
        [&](std::vector<std::uint8_t>& out, int) {
          if (!default_template())
            for (int t = 0; t < core::kTemplatePixels; ++t) {
              out.push_back(std::uint8_t(params_.template_dy[t]));
              out.push_back(std::uint8_t(std::int8_t(params_.template_dx[t])));
            }
          for (int j = 0; j < bit_planes_; ++j) {
            encoder::LsbWriter bits(out);
            for (int q : plan.level[j]) bits.put(std::uint32_t(q), core::kBilevelLevelBits);
          }
        },
        [&](std::vector<std::uint8_t>& out) {
          encoder::LsbWriter bits(out);
          encoder::ans_write_table(run_freq, &bits, compact_tables_);
        },
        [](std::vector<std::uint8_t>&) {});
  }

  // ---- Pixel copies (spec §4.6, §6.6, version 6) ----------------------------

  // At effort 1, a tile of few colours that may be a palette tile tries
  // copies of its pixels once the palette form is known (encode()): most
  // such forms cannot beat it, and are not coded.
  bool copies_after_palette() { return pixel_copies_ && effort_ < 2 && allow_palette_ && few_colours(); }


  // Whether the tile has at most a palette's colours (computed once). Effort
  // 1 seeks copies only in such tiles (text, user interfaces, dithers,
  // masks; and every gray tile): photos and most wallpaper tiles have more,
  // and cost nothing. (A test of how often a tile's pixels repeat nearby,
  // tried as well, did not tell gray photos from gray text.)
  bool few_colours() {
    if (few_colours_ < 0) {
      colour_table_ = std::make_unique<ColourTable>();
      few_colours_ = colour_table_->collect(pixels_.data(), plane_, ch_, colours_) ? 1 : 0;
    }
    return few_colours_ != 0;
  }

  // Hash chains of the kMinCopy pixels starting at each place of the tile
  // (chain_[i]: the previous place with the same hash), built once per tile:
  // the copies found depend on the pixels only.
  void build_chains() {
    if (!px_.empty()) return;
    px_.resize(plane_);
    for (std::size_t i = 0; i < plane_; ++i) px_[i] = ColourTable::pack(&pixels_[i * ch_], ch_);
    constexpr int kHashBits = 14;
    std::vector<std::int32_t> head(std::size_t{1} << kHashBits, -1);
    chain_.assign(plane_, -1);
    for (int r = 0; r < h_; ++r) {
      for (int c = 0; c + core::kMinCopy <= w_; ++c) {
        const std::size_t i = std::size_t(r) * w_ + c;
        const std::uint32_t h = (px_[i] * 0x9E3779B1u ^ px_[i + 1] * 0x85EBCA77u ^ px_[i + 2] * 0xC2B2AE3Du) >> (32 - kHashBits);
        chain_[i] = head[h];
        head[h] = std::int32_t(i);
      }
    }
  }

  // The longest copy that could start at pixel (r, c) from the sources the
  // format allows there: in the same row, at most kCopyChain places of its
  // hash chain (the nearest first); in each row above, the same column and
  // kCopyUpBack columns to its left.
  CopyRef longest_at(int r, int c) {
    const std::size_t i = std::size_t(r) * w_ + c;
    CopyRef best;
    auto consider = [&](std::size_t j, int up, int back) {
      // A longer match than the best must also match at the best's length
      // (none is longer than the row's rest).
      if (best.len >= w_ - c || (best.len && px_[j + best.len] != px_[i + best.len])) return;
      int len = 0;
      while (len < w_ - c && px_[j + len] == px_[i + len]) ++len;
      if (len > best.len) best = CopyRef{std::uint16_t(len), std::uint8_t(up), std::uint8_t(back)};
    };
    // The same row: the chain's places from 1 to kCopyWindow - 1 columns back
    // (the chain descends: they come first).
    const std::int32_t nearest = std::int32_t(i) - (core::kCopyWindow - 1);
    const std::int32_t row_start = std::int32_t(std::size_t(r) * w_);
    int steps = 0;
    for (std::int32_t j = chain_[i]; j >= std::max(nearest, row_start) && steps < kCopyChain && best.len < w_ - c;
         j = chain_[j], ++steps)
      consider(std::size_t(j), 0, int(i) - j - 1);
    // The rows above: the same column and the next few to the left, where
    // repeats in the rows above (dithers, glyph strokes, patterns) mostly are.
    for (int up = 1; up <= std::min(r, core::kCopyRows) && best.len < w_ - c; ++up)
      for (int back = 0; back <= std::min(c, kCopyUpBack); ++back)
        consider(i - std::size_t(up) * w_ - std::size_t(back), up, back);
    return best.len >= core::kMinCopy ? best : CopyRef{};
  }

  // A greedy parse of each row: a copy where its pixels' estimated bits as
  // literals exceed a copy's. Returns whether the tile has one.
  bool choose_copies(std::size_t need_bytes) {
    copy_at_.assign(plane_, CopyRef{});
    bool any = false;
    std::uint64_t saved = 0;  // estimated, in quarter bits
    constexpr std::uint32_t kUnknown = ~0u;
    std::vector<std::uint32_t> literal(static_cast<std::size_t>(w_));  // a row's literal costs, found when needed
    auto cost = [&](int r, int c) {
      if (literal[c] == kUnknown) literal[c] = literal_quarter_bits(r, c);
      return literal[c];
    };
    for (int r = 0; r < h_; ++r) {
      std::fill(literal.begin(), literal.end(), kUnknown);
      const std::int32_t window = std::int32_t(std::max(0, r - core::kCopyRows)) * w_;
      for (int c = 0; c < w_;) {
        const std::size_t i = std::size_t(r) * w_ + c;
        // No earlier place of the window starts with the same pixels, or a
        // copy whose first kMinCopy pixels cost less than half a copy (one
        // starting later would do better): not searched.
        if (c + core::kMinCopy > w_ || chain_[i] < window ||
            cost(r, c) + cost(r, c + 1) + cost(r, c + 2) < kCopyQuarterBits / 2) {
          ++c;
          continue;
        }
        const CopyRef m = longest_at(r, c);
        std::uint32_t span = 0;
        for (int j = 0; j < m.len; ++j) span += cost(r, c + j);
        if (m.len && span > kCopyQuarterBits) {
          saved += span - kCopyQuarterBits;
          copy_at_[i] = m;
          c += m.len;
          any = true;
          continue;
        }
        ++c;
      }
    }
    if (saved < std::uint64_t(need_bytes) * 32) return false;
    return any;
  }

  // Whether a form with copies of `copied` bytes replaces `best` bytes: its
  // tiles take the CPU decoder's scalar loops, which read a copy length at
  // nearly every pixel, about twice the time per pixel of the AVX-512 lanes
  // (spec §12): at effort 1 it must save twice the share asked of rANS
  // tiles (20% by default); at effort 2 (density) or with every rANS
  // saving asked for (--entropy max), any saving.
  bool copies_pay(std::size_t copied, std::size_t best) const {
    return copied * 100 <= best * (100 - std::min(copy_min_saving_percent_, 99u)) && copied < best;
  }

  // The cost of each token of each context of the planes in an
  // entropy-coded form with histograms `hist`, in quarter bits (their
  // empirical entropy).
  void set_token_costs(const AnsHists& hist) {
    for (int x = 0; x < core::kAnsContexts; ++x) {
      std::uint64_t n = 0;
      for (std::uint32_t v : hist[x]) n += v;
      for (int t = 0; t < core::kAnsTokens; ++t)
        token_cost_[x][t] =
            std::uint16_t(hist[x][t] ? std::lround(4 * std::log2(double(n) / hist[x][t])) : 4 * core::kAnsPrecisionBits);
    }
  }

  // What pixel (r, c) costs as it is coded without copies, in quarter bits:
  // a zero pixel (a run's or a zero row's) next to nothing, else its codes'
  // tokens and raw bits in the entropy-coded form (set_token_costs).
  std::uint32_t literal_quarter_bits(int r, int c) const {
    if (pixel_is_zero(r, c)) return 1;
    std::uint32_t q = 0;
    for (int p = 0; p < ch_; ++p) {
      if (params_.plane[p].constant) continue;
      const encoder::AnsToken t = encoder::ans_token(sym_[pat(p, r, c)]);
      q += token_cost_[p * core::kAnsGroups + core::ans_group_of_bucket(bucket_[pat(p, r, c)])][t.token] +
           4 * std::uint32_t(t.raw_bits);
    }
    return q;
  }

  // The entropy-coded form with the copies choose_copies finds, or nothing
  // when it finds none. Copied pixels' residual codes are 0 (spec §6.6), which
  // changes the contexts and runs of the pixels after them; the tile's codes,
  // contexts and zero rows are restored afterwards.
  std::vector<std::uint8_t> copy_tile(std::size_t best_bytes, std::size_t beat = SIZE_MAX) {
    // A tile already below a quarter bit per pixel (flat masks, bilevel
    // text, chessboards) has few bytes for copies to save: not searched at
    // effort 1.
    if (effort_ < 2 && std::min(best_bytes, beat) * 32 < plane_) return {};
    // Copies repeat pixels; a ramped plane's values are not its pixels' (and
    // the format has no copies in a tile with ramps, spec §4.3).
    for (int p = 0; p < ch_; ++p)
      if (params_.plane[p].ramp) return {};
    build_chains();
    // The bytes the copies must save: their share of best_bytes (copies_pay),
    // and at least down to `beat` (another form's size).
    // (The estimate of choose_copies is low: it ignores that copied pixels'
    // zero codes make their neighbours' contexts cheaper. A form that must
    // beat another is coded when the estimate reaches kCopyBeatShare percent
    // of the difference.)
    const std::size_t need = std::max(best_bytes * copy_min_saving_percent_ / 100,
                                      best_bytes > beat ? (best_bytes - beat) * kCopyBeatShare / 100 : 0);
    if (!choose_copies(need)) return {};
    const std::vector<std::uint32_t> kept_sym = sym_;
    const std::vector<std::uint8_t> kept_bucket = bucket_, kept_zero = zero_, kept_zero_row = zero_row_;
    for (int r = 0; r < h_; ++r)
      for (int c = 0; c < w_; ++c) {
        const CopyRef& m = copy_at_[std::size_t(r) * w_ + c];
        if (!m.len) continue;
        zero_row_[r] = 0;  // a row with a copy reads its length: not a zero row
        for (int j = c; j < c + m.len; ++j) {
          zero_[std::size_t(r) * w_ + j] = 1;
          for (int p = 0; p < ch_; ++p) sym_[pat(p, r, j)] = 0;
        }
      }
    for (int p = 0; p < ch_; ++p) plane_buckets(p);
    copies_on_ = true;
    std::vector<std::uint8_t> best;
    const AnsPlan plan = ans_plan(params_.run_mode);
    // As entropy_coded_choice: a form whose estimate (its rows alone) cannot
    // pay is not coded at effort 1.
    if (effort_ >= 2 || rows_estimate(plan) * kAnsEstimateLow <= double(best_bytes - need)) best = ans_tile(plan);
    if (effort_ >= 2) {
      const bool run_mode = params_.run_mode;
      params_.run_mode = !run_mode;  // assemble() writes it in the mode byte
      std::vector<std::uint8_t> other = ans_tile(ans_plan(!run_mode));
      params_.run_mode = run_mode;
      if (other.size() < best.size()) best = std::move(other);
    }
    copies_on_ = false;
    sym_ = kept_sym;
    bucket_ = kept_bucket;
    zero_ = kept_zero;
    zero_row_ = kept_zero_row;
    return best;
  }

  // The entropy-coded forms (spec §4.5, §7.4) that may replace the Rice-coded
  // tile `rice` (its row streams `rice_rows`, its plans `plans`). rANS codes
  // zeros cheaply, so runs pay less often than in Rice codes: at effort 1
  // (speed) only the run mode whose form is estimated smaller (from the
  // histograms of RicePlans: the choice costs no walk of the tile) is coded,
  // and only where its low estimate (ans_low_estimate) can save the share
  // asked; at effort 2 (density) both are coded and every saving taken.
  std::vector<std::uint8_t> entropy_coded_choice(std::vector<std::uint8_t> best,
                                                 const std::vector<std::vector<std::uint8_t>>& rice_rows,
                                                 const RicePlans& plans) {
    const bool rice_runs = params_.run_mode;
    // What the entropy-coded form shares with the Rice-coded one: mode byte,
    // plane bytes and constant planes, row-length table (roughly).
    std::size_t shared = best.size() - (rice_runs ? 1 : 0);
    for (const auto& row : rice_rows) shared -= row.size();
    for (int p = 0; p < ch_; ++p) shared -= params_.plane[p].constant ? 0 : core::kBuckets / 2;
    const std::size_t rice_size = best.size();
    // The form in run mode `runs`; kept where it pays.
    auto try_form = [&](bool runs) {
      params_.run_mode = runs;  // assemble() writes it in the mode byte
      std::vector<std::uint8_t> ans = ans_tile(ans_plan(runs, &plans.ans_hist[runs]));
      params_.run_mode = rice_runs;
      if (ans.size() < best.size() &&
          (effort_ >= 2 || (ans_pays(ans.size(), rice_size) && ans_pays_per_pixel(ans.size(), rice_size))))
        best = std::move(ans);
    };
    if (pixel_copies_) set_token_costs(plans.ans_hist[rice_runs]);
    if (effort_ >= 2) {
      try_form(rice_runs);
      try_form(!rice_runs);
      return best;
    }
    // Only the run mode estimated smaller, where its low estimate can pay.
    const double need = double(rice_size) * (100 - ans_min_saving_percent_) / 100;
    const double with_runs = ans_bits(plans.ans_hist[1], plans.ans_raw_bits[1]);
    const double without = ans_bits(plans.ans_hist[0], plans.ans_raw_bits[0]);
    const bool runs = with_runs <= without;
    if (ans_low_estimate(runs ? with_runs : without, shared) <= need) try_form(runs);
    return best;
  }

  // The values of an entropy-coded form, row by row in decode order as
  // (context, value), their token histograms per context, and the estimated
  // bits of the rows and tables: each context's tokens at their empirical
  // entropy, the raw bits, the tables as written.
  struct AnsPlan {
    std::vector<std::uint32_t> values;  // context << 16 | value (values < 1024, spec §7.4)
    std::array<std::uint32_t, core::kMaxTileHeight + 1> row_start{};  // row r: values[row_start[r], row_start[r+1])
    AnsHists hist{};
    double bits = 0;  // ans_bits of hist and the raw bits
  };
  // `known`: the plan's histograms, when the caller has them (RicePlans):
  // then only the values are collected, and `bits` is left 0.
  AnsPlan ans_plan(bool run_mode, const AnsHists* known = nullptr) const {
    AnsPlan plan;
    int coded = 0;
    for (int p = 0; p < ch_; ++p) coded += params_.plane[p].constant ? 0 : 1;
    plan.values.reserve(plane_ * std::size_t(coded + (run_mode ? 1 : 0)));
    std::uint64_t raw_bits = 0;
    auto add = [&](int x, std::uint32_t u) {
      plan.values.push_back(std::uint32_t(x) << 16 | u);
      if (known) return;
      const encoder::AnsToken t = encoder::ans_token(u);
      ++plan.hist[x][t.token];
      raw_bits += std::uint64_t(t.raw_bits);
    };
    for (int r = 0; r < h_; ++r) {
      plan.row_start[r] = std::uint32_t(plan.values.size());
      if (zero_row(r)) continue;
      walk_row(r, run_mode, [&](int len) { add(core::kAnsRunContext, std::uint32_t(len)); },
               [&](int c) {
                 for (int p = 0; p < ch_; ++p)
                   if (!params_.plane[p].constant)
                     add(p * core::kAnsGroups + core::ans_group_of_bucket(bucket_[pat(p, r, c)]), sym_[pat(p, r, c)]);
               },
               [&](const CopyRef& m) {
                 // spec §6.6: the length (0: none), then rows up and columns back.
                 add(core::kCopyLengthContext, m.len ? std::uint32_t(m.len - core::kMinCopy + 1) : 0u);
                 if (!m.len) return;
                 add(core::kCopyRowContext, m.up);
                 add(m.up ? core::kCopyColumnUpContext : core::kCopyColumnContext, m.back);
               });
    }
    plan.row_start[h_] = std::uint32_t(plan.values.size());
    if (known) plan.hist = *known;
    else plan.bits = ans_bits(plan.hist, raw_bits);
    return plan;
  }

  // The estimated bits of tokens with histograms `hist` and of `raw_bits`
  // raw bits: each context's tokens at their empirical entropy, and the
  // tables as written.
  double ans_bits(const AnsHists& hist, std::uint64_t raw_bits) const {
    double bits = double(raw_bits);
    for (const encoder::AnsHist& h : hist) {
      std::uint64_t n = 0;
      for (std::uint32_t v : h) n += v;
      if (!n) continue;
      bits += double(n) * std::log2(double(n)) +
              double(encoder::ans_write_table(encoder::ans_quantise(h, compact_tables_), nullptr, compact_tables_));
      for (std::uint32_t v : h)
        if (v) bits -= double(v) * std::log2(double(v));
    }
    return bits;
  }

  // The estimated bytes of a plan's row streams: its tokens' entropy, raw
  // bits and tables, and each non-zero row's fixed part (kAnsRowBytes).
  double rows_estimate(const AnsPlan& plan) const { return plan.bits / 8 + kAnsRowBytes * double(coded_rows()); }

  // The rows that are not zero rows: each has a stream and, entropy-coded, a state.
  int coded_rows() const {
    int rows = 0;
    for (int r = 0; r < h_; ++r) rows += zero_row(r) ? 0 : 1;
    return rows;
  }

  // A low estimate of the bytes of an entropy-coded form whose values take
  // `bits` (ans_bits) and its other parts `shared` bytes: each row's fixed
  // part at kAnsRowFixedLow, the whole times kAnsEstimateSlack (spec §12,
  // "Encoder: run modes by estimate").
  double ans_low_estimate(double bits, std::size_t shared) const {
    return (double(shared) + bits / 8 + kAnsRowFixedLow * double(coded_rows())) * kAnsEstimateSlack;
  }

  // Whether an entropy-coded form of `ans` bytes saves enough per decoded
  // pixel (those of rows that are not zero rows) over the tile's Rice form of
  // `rice` bytes (at effort 1, with ans_pays; not with entropy "max"): rANS
  // decode costs more per pixel (wall_Elarun 35.6 ms against 24.4 ms
  // Rice-coded on the AVX-512 lanes), so in low-entropy tiles, where 7% is
  // few bytes, the time buys too little (spec §12, "Encoder: rANS by bytes a
  // pixel").
  bool ans_pays_per_pixel(std::size_t ans, std::size_t rice) const {
    if (ans_min_saving_percent_ == 0) return true;
    return double(rice) - double(ans) >= kAnsMinSavingPerPixel * double(w_) * double(coded_rows());
  }
  // Whether an entropy-coded form of `ans` bytes replaces `best` bytes: it
  // must be smaller, and at effort 1 by the share the options ask, since its
  // rows take the CPU about twice as long to decode (spec §12).
  bool ans_pays(std::size_t ans, std::size_t best) const {
    if (ans_min_saving_percent_ == 0) return ans < best;
    return ans * 100 <= best * (100 - std::min(ans_min_saving_percent_, 100u));
  }

  // The entropy-coded form of the tile (spec §4.5, §7.4): the values of
  // `plan` (residual codes and, in params_.run_mode, run lengths) as tokens
  // with frequency tables per plane and bucket group, rANS-coded row by row.
  std::vector<std::uint8_t> ans_tile(const AnsPlan& plan) const {
    using encoder::AnsFreqs;
    using encoder::ans_token;
    const auto& values = plan.values;
    const auto& hist = plan.hist;
    std::array<AnsFreqs, kPlanContexts> freq;
    std::array<std::array<std::uint32_t, core::kAnsTokens>, kPlanContexts> start{};
    for (int x = 0; x < kPlanContexts; ++x) {
      freq[x] = encoder::ans_quantise(hist[x], compact_tables_);
      for (int t = 1; t < core::kAnsTokens; ++t) start[x][t] = start[x][t - 1] + freq[x][t - 1];
    }
    std::vector<std::vector<std::uint8_t>> rows(h_);
    for (int r = 0; r < h_; ++r) {
      if (zero_row(r)) continue;  // an empty stream, without even the rANS state
      encoder::AnsWriter w;
      for (std::uint32_t i = plan.row_start[r + 1]; i-- > plan.row_start[r];) {
        const std::uint32_t x = values[i] >> 16;
        const encoder::AnsToken t = ans_token(values[i] & 0xffff);
        if (t.raw_bits) w.put_raw(t.raw, t.raw_bits);
        w.put_token(start[x][t.token], freq[x][t.token]);
      }
      rows[r] = w.finish();
    }
    // Each coded plane's tables after its predictor, the run lengths' table
    // instead of run_k (spec §4.5).
    return assemble(
        std::uint8_t(core::kModeAns | (copies_on_ ? core::kModeCopies : 0)), rows,
        [&](std::vector<std::uint8_t>& out, int p) {
          encoder::LsbWriter bits(out);
          for (int g = 0; g < core::kAnsGroups; ++g) encoder::ans_write_table(freq[p * core::kAnsGroups + g], &bits, compact_tables_);
        },
        [&](std::vector<std::uint8_t>& out) {
          encoder::LsbWriter bits(out);
          encoder::ans_write_table(freq[core::kAnsRunContext], &bits, compact_tables_);
        },
        [&](std::vector<std::uint8_t>& out) {
          // The copies' tables, one bit field (spec §4.6).
          encoder::LsbWriter bits(out);
          for (int x = core::kCopyLengthContext; x < core::kAnsAllContexts; ++x) encoder::ans_write_table(freq[x], &bits, compact_tables_);
        });
  }

  // A Rice-coded tile: each coded plane's k table, then run_k.
  std::vector<std::uint8_t> assemble(const std::array<std::array<std::uint8_t, core::kBuckets>, core::kMaxChannels>& k,
                                     const std::vector<std::vector<std::uint8_t>>& rows) const {
    return assemble(
        0, rows,
        [&](std::vector<std::uint8_t>& out, int p) {
          for (std::uint32_t b = 0; b < core::kBuckets; b += 2) out.push_back(std::uint8_t(k[p][b] | k[p][b + 1] << 4));
        },
        [&](std::vector<std::uint8_t>& out) { out.push_back(params_.run_k); }, [](std::vector<std::uint8_t>&) {});
  }

  // spec §4.3: mode byte (with `mode_bits`), plane entries (a constant
  // plane's value, or the predictor and what plane_params appends), what
  // run_params appends in run mode, the row-length table and the rows.
  template <class PlaneParams, class RunParams, class CopyParams>
  std::vector<std::uint8_t> assemble(std::uint8_t mode_bits, const std::vector<std::vector<std::uint8_t>>& rows,
                                     PlaneParams&& plane_params, RunParams&& run_params, CopyParams&& copy_params) const {
    std::vector<std::uint8_t> out;
    out.push_back(std::uint8_t(core::kTileCoded | params_.transform << 2 | (params_.run_mode ? 1 : 0) << 4 | mode_bits));
    for (int p = 0; p < ch_; ++p) {
      const core::PlaneParams& pp = params_.plane[p];
      if (pp.constant) {
        const auto v = std::uint16_t(std::int16_t(pp.range.mid));  // i16 LE
        out.insert(out.end(), {core::kPlaneConstant, std::uint8_t(v), std::uint8_t(v >> 8)});
        continue;
      }
      out.push_back(std::uint8_t(pp.pred | (pp.previous_code ? core::kPlaneContextOfPrevious : 0) |
                                 (pp.corrected ? core::kPlaneCorrections : 0) | (bilevel_on_ ? core::kPlaneBilevel : 0) |
                                 (pp.ramp ? core::kPlaneRamp : 0) |
                                 (bilevel_on_ && !default_template() ? core::kPlaneTemplate : 0)));
      auto append_le32 = [&](std::uint32_t x) {
        for (int b = 0; b < 32; b += 8) out.push_back(std::uint8_t(x >> b));
      };
      if (pp.corrected) append_le32(pp.corrections);  // u32 LE (spec §4.3)
      if (pp.ramp)  // three i32 LE (spec §4.3, §6.9)
        for (const std::int32_t f : {pp.ramp_offset, pp.ramp_dx, pp.ramp_dy}) append_le32(std::uint32_t(f));
      plane_params(out, p);
    }
    if (params_.run_mode) run_params(out);
    if (mode_bits & core::kModeCopies) copy_params(out);
    append_rows(out, rows);
    return out;
  }

  // The row-length table and the row streams (spec §4.3 items 3-4).
  void append_rows(std::vector<std::uint8_t>& out, const std::vector<std::vector<std::uint8_t>>& rows) const {
    if (h_ > 1) {
      // With a zero-row bitmap where that table is smaller (version 10).
      std::vector<std::uint8_t> table = row_table(rows, false);
      if (row_masks_) {
        std::vector<std::uint8_t> masked = row_table(rows, true);
        if (masked.size() < table.size()) table = std::move(masked);
      }
      out.insert(out.end(), table.begin(), table.end());
    }
    for (const auto& row : rows) out.insert(out.end(), row.begin(), row.end());
  }

  // The row-length table of `rows` (spec §4.3): the LEB128 base, the width
  // byte and the deltas of every row but the last, from the smallest; with
  // `masked` (version 10), the zero rows in a bitmap after the width byte and
  // the deltas of the other rows only.
  std::vector<std::uint8_t> row_table(const std::vector<std::vector<std::uint8_t>>& rows, bool masked) const {
    std::uint32_t zero_mask = 0;
    if (masked)
      for (int r = 0; r + 1 < h_; ++r) zero_mask |= (rows[r].empty() ? 1u : 0u) << r;
    const auto coded = [&](int r) { return !((zero_mask >> r) & 1); };
    std::size_t base = SIZE_MAX, top = 0;
    for (int r = 0; r + 1 < h_; ++r)
      if (coded(r)) base = std::min(base, rows[r].size());
    if (base == SIZE_MAX) base = 0;  // every row but the last is a zero row
    for (int r = 0; r + 1 < h_; ++r)
      if (coded(r)) top = std::max(top, rows[r].size() - base);
    std::vector<std::uint8_t> out;
    for (std::size_t v = base;; v >>= 7) {
      out.push_back(std::uint8_t((v & 0x7f) | (v >= 0x80 ? 0x80 : 0)));
      if (v < 0x80) break;
    }
    const int nbits = top ? 32 - core::clz32(std::uint32_t(top)) : 0;
    out.push_back(std::uint8_t(nbits | (masked ? core::kRowTableMasked : 0)));
    if (masked)
      for (int i = 0; i < h_ - 1; i += 8) out.push_back(std::uint8_t(zero_mask >> i));
    std::vector<std::uint8_t> packed((std::size_t(h_ - 1) * nbits + 7) / 8, 0);
    std::size_t bit = 0;
    for (int r = 0; r + 1 < h_; ++r) {
      if (!coded(r)) continue;
      const std::size_t delta = rows[r].size() - base;
      for (int i = 0; i < nbits; ++i, ++bit) packed[bit >> 3] |= std::uint8_t(((delta >> i) & 1) << (bit & 7));
    }
    out.insert(out.end(), packed.begin(), packed.begin() + std::ptrdiff_t((bit + 7) / 8));
    return out;
  }

  // Candidates tried per pixel by longest_at, and the estimated cost of a
  // copy (its length, offset and the decisions around it) in quarter bits.
  static constexpr int kCopyChain = 8;
  // Sources tried in each of the rows above: the same column and this many
  // to its left (more found 1-4% more bytes in dithers, for 5-10% more
  // encode time on graphics).
  static constexpr int kCopyUpBack = 1;
  // choose_copies' estimate needed to code a form that must beat another.
  static constexpr std::size_t kCopyBeatShare = 40;
  static constexpr std::uint32_t kCopyQuarterBits = 4 * 14;

  // The estimated cost of a row's stream in plane_costs' units (eighths of
  // log2 magnitudes: about a bit), charged to rows that cannot be zero rows.
  static constexpr std::uint32_t kRowCost = 8;
  // An entropy-coded row's bytes besides its tokens' entropy: the 4-byte
  // state and the last 16-bit unit's padding, on average (spec §7.4).
  static constexpr double kAnsRowBytes = 4.5;
  // The lowest ratio of coded size to estimate measured on the corpus is
  // 0.71: a form whose estimate times this cannot pay is not coded.
  static constexpr double kAnsEstimateLow = 0.8;
  // An entropy-coded row's fixed part, measured on the corpus's tiles in
  // session 19: 2.8 to 3.3 bytes (5th to 95th percentile; the state's first
  // 16 bits carry nothing, the last 16-bit unit is half padding on average).
  // With 2.5 the coded size was at least 0.952 times the estimate on the
  // 17,980 tiles whose entropy-coded form the default encoder then coded: a
  // tile whose estimate times 0.95 cannot pay is not coded.
  static constexpr double kAnsRowFixedLow = 2.5;
  // Residual corrections (choose_corrections) cost the decoder time per
  // sample: at effort 1 a plane takes them where they save at least this
  // many bits a sample besides their 32 (graphics (all): 0.02 keeps 94% of
  // the bytes they save at 38% of the decode time they add); effort 2 takes
  // any saving.
  static constexpr double kCorrectionMinBitsPerSample = 0.02;
  // plane_code_bits: a table's bits per used token, roughly (spec §4.5: a
  // 4-bit exponent and its mantissa).
  static constexpr double kTableBitsPerToken = 8;
  // ans_pays_per_pixel's floor: 0.06 bytes (0.48 bits) a decoded pixel
  // (graphics (all) 0.652 -> 0.668 of PNG and decode 1.86 -> 2.03x libpng,
  // photos (all) 0.642 -> 0.644: their rANS tiles save far more a pixel).
  static constexpr double kAnsMinSavingPerPixel = 0.06;
  static constexpr double kAnsEstimateSlack = 0.95;

  EncodeOptions options_;  // as given: a palette tile's index encoder takes the same
  int w_, h_, ch_, effort_;
  bool ans_;  // try entropy-coded tiles (spec §4.5)
  unsigned ans_min_saving_percent_;  // EncodeOptions::entropy_min_saving_percent; 0 at effort 2
  bool zero_rows_;  // EncodeOptions::zero_rows: write zero rows (spec §4.3, version 4)
  bool pixel_copies_;  // EncodeOptions::pixel_copies (spec §4.6, version 6), with ans_
  unsigned copy_min_saving_percent_;  // copies_pay
  bool plane_contexts_;  // EncodeOptions::plane_contexts (spec §6.2, version 7), at effort >= 1
  bool corrections_;  // EncodeOptions::corrections (spec §6.7, version 8), at effort >= 1
  bool compact_tables_;  // EncodeOptions::compact_tables (spec §4.5, version 9)
  bool row_masks_;       // EncodeOptions::row_masks (spec §4.3, version 10)
  bool bilevel_;         // EncodeOptions::bilevel (spec §6.8, version 11), with ans_ and compact tables
  bool templates_;       // EncodeOptions::bilevel_templates (spec §6.8, version 13), with bilevel_
  bool diagonals_;       // EncodeOptions::diagonals (spec §4.7, §6.1, version 12), at effort >= 1, with compact tables
  std::array<RampChoice, core::kMaxChannels> ramp_choice_{};  // apply_ramp
  bool ramps_;           // EncodeOptions::ramps (spec §6.9, version 14), at effort >= 1, with compact tables; off in palette tiles
  bool allow_mirror_ = true;    // this tile may be mirrored (not a mirrored or an index tile's encoder)
  bool mirror_may_pay_ = false; // choose_transform_and_predictors: NE predicts better (encode)
  bool predictors_chosen_ = false;  // encode chose them before encode_coded
  int bit_planes_ = 0;  // a palette tile's index plane that bilevel forms apply to: the bits of its indices (1 for two colours)
  std::vector<std::uint8_t> bilevel_ctx_;  // bilevel_contexts: each pixel's context per bit (pixel * kMaxBitPlanes + bit)
  bool bilevel_on_ = false;   // the coded form at hand is bilevel (assemble)
  bool copies_on_ = false;  // the coded form at hand has the copies of copy_at_
  std::vector<CopyRef> copy_at_;  // per pixel: the copy that starts there (len 0: none)
  std::vector<std::uint32_t> px_;  // the pixels as words (build_chains)
  std::vector<std::int32_t> chain_;  // per pixel: the previous place with the same hash of kMinCopy pixels
  int few_colours_ = -1;  // few_colours(): unknown
  std::unique_ptr<ColourTable> colour_table_;  // the tile's colours (few_colours), with palette_tile's indices
  std::vector<std::uint32_t> colours_;
  std::vector<std::uint8_t> alt_bucket_;  // buckets_choosing_previous_code
  std::vector<std::uint32_t> alt_sym_, alt_sym2_;  // choose_corrections
  std::vector<std::uint8_t> class_;  // choose_corrections: each sample's gradient class
  std::vector<std::uint8_t> bin_;    // choose_corrections: class and residual bin
  std::array<std::array<std::uint16_t, core::kAnsTokens>, core::kAnsContexts> token_cost_{};  // set_token_costs
  bool allow_palette_ = true;
  std::size_t plane_ = 0;  // samples per plane
  std::vector<std::uint8_t> pixels_;
  std::vector<int> value_;
  std::vector<std::uint32_t> sym_;
  std::vector<std::uint8_t> bucket_;
  std::vector<std::uint8_t> zero_;  // per pixel: every plane's residual code is 0
  std::vector<std::uint8_t> zero_row_;  // per row: a zero row (every pixel zero, zero_rows_ set)
  core::CodedTileParams params_{};
};

}  // namespace l3::encoder
