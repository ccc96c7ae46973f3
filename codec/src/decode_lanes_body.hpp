// The lanes' algorithm (decode_lanes.hpp), written once for both instruction
// sets: included by decode_lanes.hpp inside namespace lanes_avx512 and
// namespace lanes_avx2, after that set's operations (lanes_ops_<isa>.hpp:
// V, M, kLanes and the operations on them) and with L3_LANES_TARGET set. A
// tile's 32 rows are in kRegs registers of kLanes lanes. No include guard.

inline constexpr int kRegs = kLaneRows / kLanes;

// The contexts of the tile's planes and the run context (the others are never read).
L3_LANES_TARGET inline void fill_ans_entries(const CodedTileParams& t, AnsEntries& out) {
  for (int x = 0; x < core::kAnsContexts; ++x) {
    if (x >= t.channels * core::kAnsGroups && x != core::kAnsRunContext) continue;
    const std::uint16_t* cum = t.ans_cum[x];
    std::uint32_t* e = out.e[x];
    const std::uint32_t bit = 1u << x;
    if (cum[core::kAnsCumSize - 1] == 0) {
      // An unused context (the run context of most tiles without runs): its
      // 16 KB are cleared once, not per tile.
      if (!(out.zeroed & bit)) std::memset(e, 0, sizeof out.e[x]);
      out.zeroed |= bit;
      continue;
    }
    out.zeroed &= ~bit;
    for (int k = 0; k < core::kAnsTokens; ++k) {
      const std::uint32_t lo = cum[k], f = std::uint32_t(cum[k + 1]) - lo;
      // slot - F, f and k for the slots [lo, lo + f), kLanes at a time.
      V v = add(set1(int((f << 12) | (std::uint32_t(k) << 25))), iota());
      for (std::uint32_t j = 0; j < f; j += kLanes) {
        mask_store(e + lo + j, lanes_below(int(f - j)), v);
        v = add(v, set1(kLanes));
      }
    }
  }
}

// What the wavefront keeps of kLanes rows besides their coder's state.
template <class Coder, int CH>
struct LaneRows {
  typename Coder::State c;
  V run_left;  // zero runs (spec §6.4)
  M blocked, error;
  V w[CH];   // each row's last code (W) per plane
  V vw[CH];  // the same for plane values
};

// Each lane's row stream as a 32-bit window at bit `off` of the big-endian
// words hi:lo (hi at byte `word` from the tile), followed by n1 and n2. A
// value takes at most 32 bits, so the window moves on by at most one word
// per value; the words that move in are gathered once per pixel (refill)
// rather than once per value: a pixel's values take at most 96 bits, which
// the four words hold from any off < 32. The gathers were most of the
// lanes' time when each value gathered its own.
struct LaneWords {
  V hi, lo, n1, n2;
  V off, word;
  V moved;  // words moved in since the last refill: the last `moved` of hi, lo, n1, n2 are stale
};

L3_LANES_TARGET inline V load_words(const std::uint8_t* tile, M mask, V byte_at) {
  return bswap32(gather_bytes(tile, mask, byte_at));
}

// Lanes [0, n) at their readers' positions (core::lane_begin, and for
// entropy-coded tiles the initial state read).
L3_LANES_TARGET inline void words_begin(LaneWords& W, const std::uint8_t* tile, const LaneState* lanes, int n) {
  alignas(64) std::uint32_t word[kLanes] = {};
  alignas(64) std::uint32_t off[kLanes] = {};
  for (int i = 0; i < n; ++i) {
    const std::uint32_t bit = reader_bit(lanes[i].br, tile);
    word[i] = bit >> 3;
    off[i] = bit & 7u;
  }
  const M used = lanes_below(n);
  W.word = load(word);
  W.off = load(off);
  W.hi = load_words(tile, used, W.word);
  W.lo = load_words(tile, used, add(W.word, set1(4)));
  W.n1 = load_words(tile, used, add(W.word, set1(8)));
  W.n2 = load_words(tile, used, add(W.word, set1(12)));
  W.moved = zero();
}

L3_LANES_TARGET inline void words_end(const LaneWords& W, const std::uint8_t* tile, LaneState* lanes, int n) {
  alignas(64) std::uint32_t word[kLanes];
  alignas(64) std::uint32_t off[kLanes];
  store(word, W.word);
  store(off, W.off);
  for (int i = 0; i < n; ++i) reader_at(lanes[i].br, tile, word[i] * 8u + off[i]);
}

// The next 32 bits of each lane. srlv by 32 gives 0: off = 0 needs no case.
L3_LANES_TARGET inline V words_window(const LaneWords& W) {
  return or_(sllv(W.hi, W.off), srlv(W.lo, sub(set1(32), W.off)));
}

// Takes `bits` (at most 32) in the lanes of `mask`.
L3_LANES_TARGET inline void words_consume(LaneWords& W, M mask, V bits) {
  const V c32 = set1(32);
  W.off = mask_add(W.off, mask, W.off, bits);
  const M moved = cmpge_unsigned_in(mask, W.off, c32);
  W.off = mask_sub(W.off, moved, W.off, c32);
  W.hi = select(moved, W.lo, W.hi);
  W.lo = select(moved, W.n1, W.lo);
  W.n1 = select(moved, W.n2, W.n1);
  W.word = mask_add(W.word, moved, W.word, set1(4));
  W.moved = mask_add(W.moved, moved, W.moved, set1(1));
}

// Gathers the stale words (after at most three moves).
L3_LANES_TARGET inline void words_refill(LaneWords& W, const std::uint8_t* tile) {
  const M m1 = cmpge(W.moved, set1(1));
  if (!any(m1)) return;
  W.n2 = select(m1, load_words(tile, m1, add(W.word, set1(12))), W.n2);
  const M m2 = cmpge(W.moved, set1(2));
  if (any(m2)) {
    W.n1 = select(m2, load_words(tile, m2, add(W.word, set1(8))), W.n1);
    const M m3 = cmpge(W.moved, set1(3));
    if (any(m3)) W.lo = select(m3, load_words(tile, m3, add(W.word, set1(4))), W.lo);
  }
  W.moved = zero();
}

// Entropy-coded tiles (spec §7.4): ans_read_units across the lanes. Each
// value gathers its two units at q (the lanes' words, as Rice-coded tiles
// read them, measured 13% slower on AVX-512: more operations per value, and
// the gather of the slot entries stays).
// The rANS states of lanes [0, n) and where each reads its next unit, as a
// byte offset from the tile (AnsCoder, and the bilevel lanes of
// decode_bilevel_lanes.hpp).
struct AnsLanes {
  V ans, q;
};

L3_LANES_TARGET inline void ans_lanes_begin(AnsLanes& S, const std::uint8_t* tile, const LaneState* lanes, int n) {
  alignas(64) std::uint32_t ans[kLanes] = {};
  alignas(64) std::uint32_t q[kLanes] = {};
  for (int i = 0; i < n; ++i) {
    ans[i] = lanes[i].ans;
    // lane_begin read whole bytes (the 32-bit state).
    q[i] = reader_bit(lanes[i].br, tile) >> 3;
  }
  S.ans = load(ans);
  S.q = load(q);
}

L3_LANES_TARGET inline void ans_lanes_end(const AnsLanes& S, const std::uint8_t* tile, LaneState* lanes, int n) {
  alignas(64) std::uint32_t ans[kLanes];
  alignas(64) std::uint32_t q[kLanes];
  store(ans, S.ans);
  store(q, S.q);
  for (int i = 0; i < n; ++i) {
    lanes[i].ans = ans[i];
    // The bit reader where q stopped, empty, as the scalar rANS reads leave it.
    reader_at(lanes[i].br, tile, q[i] * 8u);
  }
}

struct AnsCoder {
  using State = AnsLanes;
  const AnsEntries& en;
  const std::uint8_t* tile;
  TokenLookup tokens;

  L3_LANES_TARGET AnsCoder(const AnsEntries& entries, const std::uint8_t* tile_bytes) : en(entries), tile(tile_bytes) {}

  L3_LANES_TARGET void begin(State& S, const LaneState* lanes, int n) const { ans_lanes_begin(S, tile, lanes, n); }
  L3_LANES_TARGET void end(const State& S, LaneState* lanes, int n) const { ans_lanes_end(S, tile, lanes, n); }

  L3_LANES_TARGET void refill(State&) const {}

  // The value in context x (per lane) of the lanes in `read`; 0 in the others.
  L3_LANES_TARGET V read(State& S, M& error, M read, V x) const {
    const V one = set1(1);
    const V slot = and_(S.ans, set1(int(core::kAnsTotal - 1)));
    const V at = add(slli<core::kAnsPrecisionBits>(x), slot);
    const V e = gather_words(&en.e[0][0], read, at);
    const V tok = srli<25>(e);
    const V f = and_(srli<12>(e), set1(0x1fff));
    error = mask_or(error, cmpeq_in(read, f, zero()));
    V a = add(mullo(f, srli<core::kAnsPrecisionBits>(S.ans)), and_(e, set1(0xfff)));
    // The two units at q, big-endian (ans_units): the first in the high half.
    const V units = load_words(tile, read, S.q);
    const M first = below_2p16_in(read, a);
    a = mask_or(a, first, slli<16>(a), srli<16>(units));
    const V raw_bits = tokens.raw_bits(tok);
    const V raw = and_(a, sub(sllv(one, raw_bits), one));
    a = srlv(a, raw_bits);
    const M second = below_2p16_in(read, a);
    const V next = mask_and(srli<16>(units), first, units, set1(0xffff));
    a = mask_or(a, second, slli<16>(a), next);
    const V two = set1(2);
    S.q = mask_add(S.q, first, S.q, two);
    S.q = mask_add(S.q, second, S.q, two);
    S.ans = select(read, a, S.ans);
    return maskz_or(read, tokens.base(tok), raw);
  }

  // Plane p's value, its context from the activity a: the plane's bucket
  // group (spec §4.5), (a >= 1) + (a >= 4) + (a >= 16).
  L3_LANES_TARGET V read_plane(State& S, M& error, M mask, int p, V a) const {
    // With L a's bit length, the group is min(3, (L + 1) / 2); L + 1 = 33 - lzcnt(a).
    const V g = min(srli<1>(sub(set1(33), lzcnt(a))), set1(3));
    return read(S, error, mask, add(g, set1(p * core::kAnsGroups)));
  }

  L3_LANES_TARGET V read_run(State& S, M& error, M mask) const {
    return read(S, error, mask, set1(core::kAnsRunContext));
  }
};

// Rice-coded tiles (spec §7.2): read_rice_cpu across the lanes.
struct RiceCoder {
  using State = LaneWords;
  const std::uint8_t* tile;
  Table16 k_table[core::kMaxChannels];  // each plane's Rice parameter per bucket (spec §4.3)
  V run_k;

  L3_LANES_TARGET RiceCoder(const CodedTileParams& t, const std::uint8_t* tile_bytes) : tile(tile_bytes) {
    for (int p = 0; p < t.channels; ++p) {
      alignas(64) std::int32_t k[16];
      for (int b = 0; b < 16; ++b) k[b] = t.plane[p].k[b];
      k_table[p] = table16(k);
    }
    run_k = set1(t.run_k);
  }

  L3_LANES_TARGET void begin(State& S, const LaneState* lanes, int n) const { words_begin(S, tile, lanes, n); }
  L3_LANES_TARGET void end(const State& S, LaneState* lanes, int n) const { words_end(S, tile, lanes, n); }
  L3_LANES_TARGET void refill(State& S) const { words_refill(S, tile); }

  // A Rice value with parameter k (per lane) of the lanes in `read`; 0 in
  // the others. As read_rice_cpu: q zeros, a one and k low bits, or an
  // escape (q >= 20: twenty zeros and 10 bits); at most 30 bits, so the
  // window holds every value whole.
  L3_LANES_TARGET V read_rice(State& S, M read, V k) const {
    const V one = set1(1);
    const V window = words_window(S);
    // `| 1`: a window of zeros counts 31, an escape as any count >= 20.
    const V q = lzcnt(or_(window, one));
    const M escape = cmpge(q, set1(int(core::kEscapeZeros)));
    // window << q starts with the terminating one: k + 1 bits of it are
    // (1 << k) + low, and adding (q - 1) << k (mod 2^32) gives (q << k) + low.
    V u = add(srlv(sllv(window, q), sub(set1(31), k)), sllv(sub(q, one), k));
    V bits = add(add(q, one), k);
    u = select(escape, srli<32 - int(core::kEscapeBits)>(slli<int(core::kEscapeZeros)>(window)), u);
    bits = select(escape, set1(int(core::kEscapeZeros + core::kEscapeBits)), bits);
    words_consume(S, read, bits);
    return maskz(read, u);
  }

  // Plane p's value, its Rice parameter from the activity a: the plane's
  // k of bucket_of(a) (spec §6.2): a below 4, else 2 log2(a) plus the bit
  // below the top one, at most 15.
  L3_LANES_TARGET V read_plane(State& S, M&, M mask, int p, V a) const {
    // 2 log2(a) plus the bit below the top one is a float's biased exponent
    // and first mantissa bit, less 2 x 127: (bits >> 22) - 254 (exact below
    // 2^24; larger activities are bucket 15 anyway).
    V b = min(sub(srli<22>(float_bits(a)), set1(254)), set1(15));
    b = select(cmplt(a, set1(4)), a, b);
    return read_rice(S, mask, lookup(k_table[p], b));
  }

  L3_LANES_TARGET V read_run(State& S, M&, M mask) const { return read_rice(S, mask, run_k); }
};

// core::zero_run_step for the active lanes: returns those whose pixel is in
// a run. w, n, nw: the neighbours' codes after the edge rules.
template <class Coder, int CH>
L3_LANES_TARGET inline M lanes_run_step(const Coder& coder, int width, LaneRows<Coder, CH>& R, M active, V col,
                                        const V* w, const V* n, const V* nw) {
  const V one = set1(1);
  const M running = cmpgt_in(active, R.run_left, zero());
  R.run_left = mask_sub(R.run_left, running, R.run_left, one);
  const M run_ends = cmpeq_in(running, R.run_left, zero());
  const M unblocked = mask_and(mask_and_not(active, running), R.blocked);
  R.blocked = mask_or(mask_and_not(R.blocked, unblocked), run_ends);
  V any_code = zero();
  for (int p = 0; p < CH; ++p) any_code = or_(any_code, or_(w[p], or_(n[p], nw[p])));
  const M starts = cmpeq_in(mask_and_not(mask_and_not(active, running), unblocked), any_code, zero());
  M in_run = running;
  if (any(starts)) {
    const V run = coder.read_run(R.c, R.error, starts);
    coder.refill(R.c);  // the pixel's values may need every word
    // A run longer than the rest of the row (spec §6.4).
    R.error = mask_or(R.error, cmpgt_in(starts, run, sub(set1(width), col)));
    const M begun = cmpneq_in(starts, run, zero());
    R.run_left = mask_sub(R.run_left, begun, run, one);
    R.blocked = mask_or(R.blocked, cmpeq_in(begun, R.run_left, zero()));
    in_run = mask_or(in_run, begun);
  }
  return in_run;
}

// Lanes [0, n) from lanes[0..n); the others idle (never active).
template <class Coder, int CH>
L3_LANES_TARGET inline void lane_rows_begin(const Coder& coder, LaneRows<Coder, CH>& R, const LaneState* lanes, int n) {
  alignas(64) std::int32_t run_left[kLanes] = {};
  std::uint32_t blocked = 0, error = 0;
  for (int i = 0; i < n; ++i) {
    const LaneState& s = lanes[i];
    run_left[i] = s.run_left;
    blocked |= std::uint32_t(s.blocked) << i;
    error |= std::uint32_t(s.error) << i;
  }
  coder.begin(R.c, lanes, n);
  R.run_left = load(run_left);
  R.blocked = mask_from_bits(blocked);
  R.error = mask_from_bits(error);
  for (int p = 0; p < CH; ++p) R.w[p] = zero();
}

template <class Coder, int CH>
L3_LANES_TARGET inline void lane_rows_end(const Coder& coder, const LaneRows<Coder, CH>& R, LaneState* lanes, int n) {
  alignas(64) std::int32_t run_left[kLanes];
  store(run_left, R.run_left);
  coder.end(R.c, lanes, n);
  const std::uint32_t blocked = mask_bits(R.blocked), error = mask_bits(R.error);
  for (int i = 0; i < n; ++i) {
    LaneState& s = lanes[i];
    s.run_left = run_left[i];
    s.blocked = (blocked >> i) & 1;
    s.error = (error >> i) & 1;
  }
}

// Each plane's predictor and range (spec §6.1), as the lanes use them.
template <int CH>
struct LanePredict {
  std::uint8_t pred[CH];
  bool constant[CH];       // reads nothing: its codes are 0 (spec §6.5)
  bool previous_code[CH];  // its activity adds the code of the plane before (version 7, spec §6.2)
  bool corrected[CH];      // its residuals are corrected (version 8, spec §6.7)
  V lo[CH], hi[CH], mid[CH];
  // Per gradient class (entries 0-8; core::correct_residual): the residual's
  // correction as (e ^ flip_xor) + flip_add, flip_xor -1 where the sign
  // flips, flip_add the flip (1 or 0) plus the bias.
  Table16 flip_xor[CH], flip_add[CH];
};

template <int CH>
L3_LANES_TARGET inline LanePredict<CH> lane_predict(const CodedTileParams& t) {
  LanePredict<CH> k;
  for (int p = 0; p < CH; ++p) {
    k.pred[p] = t.plane[p].pred;
    k.constant[p] = t.plane[p].constant;
    k.previous_code[p] = t.plane[p].previous_code;
    k.corrected[p] = t.plane[p].corrected;
    alignas(64) std::int32_t flip_xor[16] = {}, flip_add[16] = {};
    for (int g = 0; g < core::kCorrectionClasses; ++g) {
      const std::uint32_t entry = core::correction_entry(t.plane[p], g);
      flip_xor[g] = -core::correction_flip(entry);
      flip_add[g] = core::correction_bias(entry) + core::correction_flip(entry);
    }
    k.flip_xor[p] = table16(flip_xor);
    k.flip_add[p] = table16(flip_add);
    k.lo[p] = set1(t.plane[p].range.lo);
    k.hi[p] = set1(t.plane[p].range.hi);
    k.mid[p] = set1(t.plane[p].range.mid);
  }
  return k;
}

// core::predict of predictor `pred`, the same for every lane (the branch
// is always taken the same way in a tile), the gradient clamped to lo..hi.
L3_LANES_TARGET __attribute__((always_inline)) inline V predict_lanes(std::uint8_t pred, V w, V n, V nw, V lo, V hi) {
  switch (pred) {
    case core::kPredW: return w;
    case core::kPredN: return n;
    case core::kPredAvg: return srai<1>(add(w, n));
    case core::kPredNW: return nw;
    default: break;
  }
  const V grad = sub(add(w, n), nw);
  if (pred == core::kPredGrad) return min(hi, max(lo, grad));
  return min(max(w, n), max(min(w, n), grad));  // MED
}

// core::predict for plane p (its predictor the same for the whole tile).
template <int CH>
L3_LANES_TARGET inline V lanes_predict(const LanePredict<CH>& k, int p, V w, V n, V nw) {
  return predict_lanes(k.pred[p], w, n, nw, k.lo[p], k.hi[p]);
}

// core::correct_residual for plane p (version 8, spec §6.7): the gradient
// class 3 sign(N - NW) + sign(NW - W) + 4 of each lane, then its correction
// from the plane's two 9-entry tables by permutes.
template <int CH>
L3_LANES_TARGET inline V lanes_correct(const LanePredict<CH>& k, int p, V e, V w, V n, V nw) {
  const V three = set1(3), one = set1(1);
  V g = set1(4);
  g = mask_add(g, cmpgt(n, nw), g, three);
  g = mask_sub(g, cmplt(n, nw), g, three);
  g = mask_add(g, cmpgt(nw, w), g, one);
  g = mask_sub(g, cmplt(nw, w), g, one);
  return add(xor_(e, lookup(k.flip_xor[p], g)), lookup(k.flip_add[p], g));
}

// The neighbours of kLanes lanes' pixels in the row above: N and NW, as
// codes and as plane values.
template <int CH>
struct LaneAbove {
  V n[CH], nw[CH], vn[CH], vnw[CH];
};

// Applies spec §6.3's edge rules to a lane's neighbours (x = w, n, nw):
// on the tile's first row (first_row: lane 0 of the first register) N = NW
// = W; at column 0 W and NW are N. Column 0 is in a register's lanes for
// its first kLanes steps only, so the test skips four operations per plane
// in the others.
L3_LANES_TARGET inline void edge_rules(V& w, V& n, V& nw, M first_row, M col0) {
  n = select(first_row, w, n);
  nw = select(first_row, w, nw);
  if (any(col0)) {
    w = select(col0, n, w);
    nw = select(col0, n, nw);
  }
}

// One step of kLanes rows (lane 0's column: first_col): the edge rules, the
// zero-run step and the planes' codes (pass 1), then their plane values
// (pass 2: prediction, spec §6.1), stored by store_pixels. Always inline:
// out of line, the step kept the rows' state in memory. kPlaneContexts: a
// plane of the tile has the context of the plane before (version 7); tiles
// without take a copy that does not keep that code (2.7% faster on photos).
// kCorrections: a plane of the tile has residual corrections (version 8).
template <class Coder, int CH, bool kPlaneContexts, bool kCorrections>
L3_LANES_TARGET __attribute__((always_inline)) inline void lanes_step(const Coder& coder, const LanePredict<CH>& pk,
                                                                      bool run_mode, LaneRows<Coder, CH>& R, V col,
                                                                      const LaneAbove<CH>& up, bool first_rows,
                                                                      ValueRow* rows, int first_col, V cols,
                                                                      M lane_rows, int width) {
  const M active = mask_and(mask_and(lane_rows, cmpge(col, zero())), cmplt(col, cols));
  const M col0 = cmpeq(col, zero());
  // The tile's first row: the first register's lane 0.
  const M first_row = first_rows ? first_lane() : no_lanes();
  V w[CH], n[CH], nw[CH];
  for (int p = 0; p < CH; ++p) {
    w[p] = R.w[p];
    n[p] = up.n[p];
    nw[p] = up.nw[p];
    edge_rules(w[p], n[p], nw[p], first_row, col0);
  }
  M read = active;
  if (run_mode) read = mask_and_not(read, lanes_run_step(coder, width, R, active, col, w, n, nw));
  V v[CH];
  V u_before = zero();  // the code of the plane before, this pixel's
  for (int p = 0; p < CH; ++p) {
    // Activity u(W) + u(N) + u(NW) / 2 (spec §6.2), and in version 7 the code
    // of the plane before: a branch, the same for the whole tile, so that the
    // other tiles' planes do not wait for it.
    V a = add(add(w[p], n[p]), srai<1>(nw[p]));
    if constexpr (kPlaneContexts)
      if (p > 0 && pk.previous_code[p]) a = add(a, u_before);
    // A pixel's values take at most 3 x 32 bits between refills (LaneWords).
    if (p == 3) coder.refill(R.c);
    const V u = coder.read_plane(R.c, R.error, pk.constant[p] ? no_lanes() : read, p, a);
    u_before = u;
    // Lanes before their column 0 keep 0; after their last column, their last code.
    R.w[p] = select(active, u, R.w[p]);
    // The value: prediction + unzigzag(u). The tile's first pixel has W =
    // the plane's midpoint (R.vw's initial value).
    V vw = R.vw[p], vn = up.vn[p], vnw = up.vnw[p];
    edge_rules(vw, vn, vnw, first_row, col0);
    V residual = xor_(srli<1>(u), sub(zero(), and_(u, set1(1))));
    if constexpr (kCorrections)
      if (pk.corrected[p]) residual = lanes_correct(pk, p, residual, vw, vn, vnw);
    v[p] = add(lanes_predict(pk, p, vw, vn, vnw), residual);
    R.vw[p] = select(active, v[p], R.vw[p]);
  }
  coder.refill(R.c);
  if (any(active)) store_pixels<CH>(rows, first_col, active, v);
}

// f(G) for each register G = 0 .. kRegs - 1, G a compile-time constant: the
// registers' state is then held in arrays indexed by constants only, which
// the compiler keeps in registers as it did two named ones.
template <class F, int... G>
L3_LANES_TARGET __attribute__((always_inline)) inline void each_reg(F&& f, std::integer_sequence<int, G...>) {
  (f(std::integral_constant<int, G>{}), ...);
}
template <class F>
L3_LANES_TARGET __attribute__((always_inline)) inline void each_reg(F&& f) {
  each_reg(f, std::make_integer_sequence<int, kRegs>{});
}

// How many of a tile's rows [0, rows) register G holds (rows [G kLanes, (G + 1) kLanes)).
inline int rows_in_reg(int rows, int G) {
  const int left = rows - G * kLanes;
  return left < 0 ? 0 : left < kLanes ? left : kLanes;
}

// Passes 1 and 2 of columns [0, cols) of rows [0, rows_used) of a tile that
// lanes_eligible takes (the rest of the tile is never needed by them, as in
// a crop): their plane values into rows, their lanes' state as the scalar
// loops leave it. lanes: from core::lane_begin. Register G holds rows
// [G kLanes, (G + 1) kLanes), one column behind the register before.
template <int CH, bool kPlaneContexts, bool kCorrections, class Coder>
L3_LANES_TARGET __attribute__((noinline)) inline void lanes_values(const Coder& coder, const CodedTileParams& t,
                                                                   LaneState* lanes, ValueRow* rows, int cols,
                                                                   int rows_used) {
  const V lane_ids = iota();
  const V cols_v = set1(cols);
  const LanePredict<CH> pk = lane_predict<CH>(t);
  int rows_in[kRegs];
  M lane_rows[kRegs];
  LaneRows<Coder, CH> R[kRegs];
  each_reg([&](auto G) L3_LANES_LAMBDA {
    rows_in[G] = rows_in_reg(rows_used, G);
    lane_rows[G] = lanes_below(rows_in[G]);
    lane_rows_begin(coder, R[G], lanes + G * kLanes, rows_in[G]);
    for (int p = 0; p < CH; ++p) R[G].vw[p] = pk.mid[p];
  });
  // A pixel's NW is the N of the pixel to its left, the previous step's N
  // (before the edge rules, which lanes_step applies to its copies); before
  // the first step, the rows' initial W.
  LaneAbove<CH> up[kRegs] = {};
  const auto above = [&](auto G) L3_LANES_LAMBDA {
    if (G > 0 && rows_in[G] == 0) return;
    for (int p = 0; p < CH; ++p) {
      up[G].nw[p] = up[G].n[p];
      up[G].vnw[p] = up[G].vn[p];
      if constexpr (G == 0) {
        up[G].n[p] = from_lane_above(R[G].w[p]);
        up[G].vn[p] = from_lane_above(R[G].vw[p]);
      } else {
        up[G].n[p] = from_lane_above(R[G - 1].w[p], R[G].w[p]);
        up[G].vn[p] = from_lane_above(R[G - 1].vw[p], R[G].vw[p]);
      }
    }
  };
  each_reg(above);
  const int steps = cols + rows_used - 1;
  for (int s = 0; s < steps; ++s) {
    // Every register's neighbours from the step before, then the steps.
    each_reg(above);
    const V col_0 = sub(set1(s), lane_ids);
    each_reg([&](auto G) L3_LANES_LAMBDA {
      if (G > 0 && rows_in[G] == 0) return;
      const V col = G == 0 ? col_0 : sub(col_0, set1(G * kLanes));
      lanes_step<Coder, CH, kPlaneContexts, kCorrections>(coder, pk, t.run_mode, R[G], col, up[G], G == 0,
                                                          rows + G * kLanes, s - G * kLanes, cols_v, lane_rows[G],
                                                          t.width);
    });
  }
  each_reg([&](auto G) L3_LANES_LAMBDA { lane_rows_end(coder, R[G], lanes + G * kLanes, rows_in[G]); });
}

// Passes 1 and 2 of columns [0, cols) of rows [0, rows_used) of a coded
// tile of CH planes that lanes_eligible takes, its coder picked by the
// tile's kind: the plane values into x.rows.
template <int CH>
L3_LANES_TARGET __attribute__((noinline)) inline void lanes_values(const std::uint8_t* tile, const CodedTileParams& t,
                                                                   LaneState* lanes, LaneScratch& x, int cols,
                                                                   int rows_used) {
  bool plane_contexts = false, corrections = false;
  for (int p = 1; p < CH; ++p) plane_contexts |= t.plane[p].previous_code;
  for (int p = 0; p < CH; ++p) corrections |= t.plane[p].corrected;
  const auto run = [&]<bool kPlaneContexts, bool kCorrections>() {
    if (t.ans) {
      fill_ans_entries(t, x.entries);
      lanes_values<CH, kPlaneContexts, kCorrections>(AnsCoder(x.entries, tile), t, lanes, x.rows, cols, rows_used);
    } else {
      lanes_values<CH, kPlaneContexts, kCorrections>(RiceCoder(t, tile), t, lanes, x.rows, cols, rows_used);
    }
  };
  if constexpr (CH > 1)
    if (plane_contexts) {
      if (corrections) return run.template operator()<true, true>();
      return run.template operator()<true, false>();
    }
  if (corrections) return run.template operator()<false, true>();
  run.template operator()<false, false>();
}
