// The vector operations of the CPU decoder's lanes (decode_lanes_body.hpp)
// on AVX2: 8 lanes of 32 bits, a mask is a vector whose lanes are all ones
// or all zeros (what compares return, what blends and gathers take). The
// operations AVX2 lacks are built from others: lzcnt from a float's
// exponent, 16-entry permutes from two 8-entry ones, unsigned compares from
// shifts, the tokens' raw bits and bases from their arithmetic (spec §7.4).
// Included by decode_lanes.hpp inside namespace lanes_avx2, with
// L3_LANES_TARGET set to the target. No include guard.

inline constexpr int kLanes = 8;
using V = __m256i;
using M = __m256i;

L3_LANES_TARGET inline V zero() { return _mm256_setzero_si256(); }
L3_LANES_TARGET inline V set1(int x) { return _mm256_set1_epi32(x); }
L3_LANES_TARGET inline V iota() { return _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7); }
L3_LANES_TARGET inline V load(const void* p) { return _mm256_load_si256(static_cast<const __m256i*>(p)); }
L3_LANES_TARGET inline void store(void* p, V v) { _mm256_store_si256(static_cast<__m256i*>(p), v); }

L3_LANES_TARGET inline V add(V a, V b) { return _mm256_add_epi32(a, b); }
L3_LANES_TARGET inline V sub(V a, V b) { return _mm256_sub_epi32(a, b); }
L3_LANES_TARGET inline V mullo(V a, V b) { return _mm256_mullo_epi32(a, b); }
L3_LANES_TARGET inline V and_(V a, V b) { return _mm256_and_si256(a, b); }
L3_LANES_TARGET inline V or_(V a, V b) { return _mm256_or_si256(a, b); }
L3_LANES_TARGET inline V xor_(V a, V b) { return _mm256_xor_si256(a, b); }
template <int N>
L3_LANES_TARGET inline V slli(V a) { return _mm256_slli_epi32(a, N); }
template <int N>
L3_LANES_TARGET inline V srli(V a) { return _mm256_srli_epi32(a, N); }
template <int N>
L3_LANES_TARGET inline V srai(V a) { return _mm256_srai_epi32(a, N); }
L3_LANES_TARGET inline V sllv(V a, V n) { return _mm256_sllv_epi32(a, n); }
L3_LANES_TARGET inline V srlv(V a, V n) { return _mm256_srlv_epi32(a, n); }
L3_LANES_TARGET inline V min(V a, V b) { return _mm256_min_epi32(a, b); }
L3_LANES_TARGET inline V max(V a, V b) { return _mm256_max_epi32(a, b); }
// The bits of each lane's value as a float (exact below 2^24).
L3_LANES_TARGET inline V float_bits(V a) { return _mm256_castps_si256(_mm256_cvtepi32_ps(a)); }
// Leading zeros of each lane (32 for 0). x & ~(x >> 1) keeps the leading
// one and has no two adjacent ones, so its conversion to float cannot round
// up to the next power of two: the exponent is the leading one's position.
// A lane with its top bit set (negative as an int) has none.
L3_LANES_TARGET inline V lzcnt(V x) {
  const V y = _mm256_andnot_si256(_mm256_srli_epi32(x, 1), x);
  const V e = _mm256_and_si256(_mm256_srli_epi32(float_bits(y), 23), _mm256_set1_epi32(0xff));
  const V lz = _mm256_min_epi32(_mm256_sub_epi32(_mm256_set1_epi32(127 + 31), e), _mm256_set1_epi32(32));
  return _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_setzero_si256(), x), lz);
}

// Masks: lanes [0, n), lane 0, from and to bits (bit i: lane i).
L3_LANES_TARGET inline M lanes_below(int n) { return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), iota()); }
L3_LANES_TARGET inline M first_lane() { return _mm256_setr_epi32(-1, 0, 0, 0, 0, 0, 0, 0); }
L3_LANES_TARGET inline M no_lanes() { return _mm256_setzero_si256(); }
L3_LANES_TARGET inline M mask_from_bits(std::uint32_t bits) {
  const V bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(int(bits)), bit), bit);
}
L3_LANES_TARGET inline std::uint32_t mask_bits(M m) { return std::uint32_t(_mm256_movemask_ps(_mm256_castsi256_ps(m))); }
L3_LANES_TARGET inline bool any(M m) { return !_mm256_testz_si256(m, m); }
L3_LANES_TARGET inline M mask_and(M a, M b) { return _mm256_and_si256(a, b); }
L3_LANES_TARGET inline M mask_or(M a, M b) { return _mm256_or_si256(a, b); }
L3_LANES_TARGET inline M mask_and_not(M a, M b) { return _mm256_andnot_si256(b, a); }  // a and not b

// Compares; the _in forms only in the lanes of m (0 elsewhere).
L3_LANES_TARGET inline M cmpeq(V a, V b) { return _mm256_cmpeq_epi32(a, b); }
L3_LANES_TARGET inline M cmpgt(V a, V b) { return _mm256_cmpgt_epi32(a, b); }
L3_LANES_TARGET inline M cmplt(V a, V b) { return _mm256_cmpgt_epi32(b, a); }
L3_LANES_TARGET inline M cmpge(V a, V b) { return _mm256_xor_si256(_mm256_cmpgt_epi32(b, a), _mm256_set1_epi32(-1)); }
L3_LANES_TARGET inline M cmpeq_in(M m, V a, V b) { return _mm256_and_si256(m, _mm256_cmpeq_epi32(a, b)); }
L3_LANES_TARGET inline M cmpneq_in(M m, V a, V b) { return _mm256_andnot_si256(_mm256_cmpeq_epi32(a, b), m); }
L3_LANES_TARGET inline M cmpgt_in(M m, V a, V b) { return _mm256_and_si256(m, _mm256_cmpgt_epi32(a, b)); }
// Unsigned a >= b, for a and b below 2^31 (the lanes' bit offsets), and a < 2^16.
L3_LANES_TARGET inline M cmpge_unsigned_in(M m, V a, V b) { return _mm256_andnot_si256(_mm256_cmpgt_epi32(b, a), m); }
L3_LANES_TARGET inline M below_2p16_in(M m, V a) {
  return _mm256_and_si256(m, _mm256_cmpeq_epi32(_mm256_srli_epi32(a, 16), _mm256_setzero_si256()));
}

// Selects: where m, the operation's result; elsewhere src (or 0: maskz).
L3_LANES_TARGET inline V select(M m, V a, V src) { return _mm256_blendv_epi8(src, a, m); }
L3_LANES_TARGET inline V maskz(M m, V a) { return _mm256_and_si256(m, a); }
L3_LANES_TARGET inline V mask_add(V src, M m, V a, V b) { return select(m, add(a, b), src); }
L3_LANES_TARGET inline V mask_sub(V src, M m, V a, V b) { return select(m, sub(a, b), src); }
L3_LANES_TARGET inline V mask_or(V src, M m, V a, V b) { return select(m, or_(a, b), src); }
L3_LANES_TARGET inline V mask_and(V src, M m, V a, V b) { return select(m, and_(a, b), src); }
L3_LANES_TARGET inline V maskz_or(M m, V a, V b) { return _mm256_and_si256(m, or_(a, b)); }
L3_LANES_TARGET inline void mask_store(void* p, M m, V v) { _mm256_maskstore_epi32(static_cast<int*>(p), m, v); }

// The 32-bit words at byte offsets `at` from base, in the lanes of m (0
// elsewhere; those lanes load nothing).
L3_LANES_TARGET inline V gather_bytes(const void* base, M m, V at) {
  return _mm256_mask_i32gather_epi32(_mm256_setzero_si256(), static_cast<const int*>(base), at, m, 1);
}
// The 32-bit words base[at], in the lanes of m (0 elsewhere).
L3_LANES_TARGET inline V gather_words(const std::uint32_t* base, M m, V at) {
  return _mm256_mask_i32gather_epi32(_mm256_setzero_si256(), reinterpret_cast<const int*>(base), at, m, 4);
}
// Each 32-bit word byte-swapped (big-endian units, spec §7.1).
L3_LANES_TARGET inline V bswap32(V a) {
  return _mm256_shuffle_epi8(a, _mm256_setr_epi32(0x00010203, 0x04050607, 0x08090a0b, 0x0c0d0e0f, 0x00010203,
                                                  0x04050607, 0x08090a0b, 0x0c0d0e0f));
}

// A table of 16 32-bit entries, looked up per lane (indices 0-15): two
// 8-entry permutes and a blend on bit 3.
struct Table16 {
  V lo, hi;
};
L3_LANES_TARGET inline Table16 table16(const std::int32_t* e) {
  return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(e)),
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(e + 8))};
}
L3_LANES_TARGET inline V lookup(const Table16& t, V i) {
  return select(_mm256_cmpgt_epi32(i, _mm256_set1_epi32(7)), _mm256_permutevar8x32_epi32(t.hi, i),
                _mm256_permutevar8x32_epi32(t.lo, i));
}

// ans_raw_bits and ans_value(t, 0) of each lane's token, by arithmetic (as
// core::ans_read_select): a token t >= kAnsDirect has (t >> 1) - 5 raw bits
// below its top bits 2 | (t & 1); a direct token has none and is its value.
struct TokenLookup {
  L3_LANES_TARGET V raw_bits(V tok) const {
    const V direct = _mm256_cmpgt_epi32(_mm256_set1_epi32(core::kAnsDirect), tok);
    return _mm256_andnot_si256(direct, _mm256_sub_epi32(_mm256_srli_epi32(tok, 1), _mm256_set1_epi32(core::kAnsDirect / 2 - 3)));
  }
  L3_LANES_TARGET V base(V tok) const {
    const V direct = _mm256_cmpgt_epi32(_mm256_set1_epi32(core::kAnsDirect), tok);
    const V top = _mm256_or_si256(_mm256_set1_epi32(2), _mm256_and_si256(tok, _mm256_set1_epi32(1)));
    return select(direct, tok, _mm256_sllv_epi32(top, raw_bits(tok)));
  }
};

// Lane i's x[i - 1]; lane 0: the register above's last lane, or 0 (the
// register of the tile's first rows): [above.hi, x.lo] then an alignr.
L3_LANES_TARGET inline V from_lane_above(V above, V x) {
  return _mm256_alignr_epi8(x, _mm256_permute2x128_si256(above, x, 0x21), 12);
}
L3_LANES_TARGET inline V from_lane_above(V x) { return from_lane_above(_mm256_setzero_si256(), x); }

// Stores the plane values of 8 rows' pixels (one per lane, planes in
// v[0..CH-1]) to rows[lane].v[first_col - lane], as row_to_pixels reads them
// (planes past CH: 0): the planes interleaved in registers, then one 16-byte
// store per active lane.
template <int CH>
L3_LANES_TARGET inline void store_pixels(ValueRow* rows, int first_col, M active, const V* v) {
  const V z = _mm256_setzero_si256();
  const V v1 = CH > 1 ? v[CH > 1 ? 1 : 0] : z, v2 = CH > 2 ? v[CH > 2 ? 2 : 0] : z;
  const V v3 = CH > 3 ? v[CH > 3 ? 3 : 0] : z;
  const V t0 = _mm256_unpacklo_epi32(v[0], v1), t1 = _mm256_unpackhi_epi32(v[0], v1);
  const V t2 = _mm256_unpacklo_epi32(v2, v3), t3 = _mm256_unpackhi_epi32(v2, v3);
  // Lane 4b + j's pixel is half b of px[j].
  const V px[4] = {_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2), _mm256_unpacklo_epi64(t1, t3),
                   _mm256_unpackhi_epi64(t1, t3)};
  alignas(32) __m128i blocks[8];
  for (int j = 0; j < 4; ++j) {
    blocks[j] = _mm256_castsi256_si128(px[j]);
    blocks[4 + j] = _mm256_extracti128_si256(px[j], 1);
  }
  const std::uint32_t bits = mask_bits(active);
  if (bits == 0xff) {
    for (int i = 0; i < 8; ++i) _mm_storeu_si128(reinterpret_cast<__m128i*>(&rows[i].v[first_col - i]), blocks[i]);
  } else {
    for (int i = 0; i < 8; ++i)
      if ((bits >> i) & 1) _mm_storeu_si128(reinterpret_cast<__m128i*>(&rows[i].v[first_col - i]), blocks[i]);
  }
}

// core::inverse_transform_bits (spec §5) of two pixels, one per 128-bit
// lane ([v0 v1 v2 v3] in, [R G B A] out): in-lane broadcasts and arithmetic.
template <std::uint8_t kTransform>
L3_LANES_TARGET inline V inverse_transform_lanes(V z) {
  if constexpr (kTransform == core::kTransformSubtractGreen) {
    // R = v1 + G, G = v0, B = v2 + G.
    const V g = _mm256_shuffle_epi32(z, 0x00);
    const V sh = _mm256_shuffle_epi32(z, 0xe1);  // [v1 v0 v2 v3]
    return _mm256_blend_epi32(sh, _mm256_add_epi32(sh, g), 0x55);
  } else if constexpr (kTransform == core::kTransformYCoCgR) {
    const V y = _mm256_shuffle_epi32(z, 0x00), co = _mm256_shuffle_epi32(z, 0x55);
    const V cg = _mm256_shuffle_epi32(z, 0xaa);
    const V t = _mm256_sub_epi32(y, _mm256_srai_epi32(cg, 1));
    const V g = _mm256_add_epi32(cg, t);
    const V b = _mm256_sub_epi32(t, _mm256_srai_epi32(co, 1));
    V px = _mm256_add_epi32(b, co);  // R
    px = _mm256_blend_epi32(px, g, 0x22);
    px = _mm256_blend_epi32(px, b, 0x44);
    return _mm256_blend_epi32(px, z, 0x88);  // alpha as stored
  } else {
    return z;
  }
}

// The head of planes_to_pixels (decode_rows.hpp) for 3- and 4-plane rows,
// the same bytes: 8 pixels per step from x0, made bytes by two saturating
// packs and a permute; 3 channels drop every 4th byte (a shuffle, a permute
// and a 24-byte store). Returns the first column left to the caller's loop
// (the last x1 - x0 mod 8); `bits` gains 256 where a value maps to no pixel.
template <int CH, std::uint8_t kTransform>
L3_LANES_TARGET inline int planes_to_pixels(const V4* vals, int x0, int x1, std::uint8_t* out, std::uint32_t& bits) {
  static_assert(CH == 3 || CH == 4);
  constexpr int kChannels = CH == 3 ? 0x77 : 0xff;
  const V in_order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);  // the packs leave pixels 0 2 4 6 1 3 5 7
  const V drop_4th = _mm256_setr_epi32(0x04020100, 0x09080605, 0x0e0d0c0a, int(0x80808080), 0x04020100, 0x09080605,
                                       0x0e0d0c0a, int(0x80808080));
  const V pack_6 = _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 7, 7);
  V any_value = _mm256_setzero_si256();
  int c = x0;
  for (; c + 8 <= x1; c += 8, out += 8 * CH) {
    V px[4];
    for (int q = 0; q < 4; ++q) {
      px[q] = inverse_transform_lanes<kTransform>(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(vals + c + 2 * q)));
      any_value = _mm256_or_si256(any_value, _mm256_blend_epi32(_mm256_setzero_si256(), px[q], kChannels));
    }
    const V words = _mm256_packus_epi16(_mm256_packus_epi32(px[0], px[1]), _mm256_packus_epi32(px[2], px[3]));
    V bytes = _mm256_permutevar8x32_epi32(words, in_order);
    if constexpr (CH == 3) {
      bytes = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(bytes, drop_4th), pack_6);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm256_castsi256_si128(bytes));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(out + 16), _mm256_extracti128_si256(bytes, 1));
    } else {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), bytes);
    }
  }
  // Any value above 255 or negative (unsigned above 255).
  const V top = _mm256_andnot_si256(_mm256_set1_epi32(255), any_value);
  if (!_mm256_testz_si256(top, top)) bits |= 256u;
  return c;
}
