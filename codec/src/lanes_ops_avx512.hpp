// The vector operations of the CPU decoder's lanes (decode_lanes_body.hpp)
// on AVX-512 F/BW/VL/DQ/CD: 16 lanes of 32 bits, masks in mask registers.
// Included by decode_lanes.hpp inside namespace lanes_avx512, with
// L3_LANES_TARGET set to the target; every operation is one instruction or
// the few the lanes used before they were written for two instruction sets.
// No include guard: included once, into one namespace.

inline constexpr int kLanes = 16;
using V = __m512i;
using M = __mmask16;

L3_LANES_TARGET inline V zero() { return _mm512_setzero_si512(); }
L3_LANES_TARGET inline V set1(int x) { return _mm512_set1_epi32(x); }
L3_LANES_TARGET inline V iota() { return _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15); }
L3_LANES_TARGET inline V load(const void* p) { return _mm512_load_si512(p); }
L3_LANES_TARGET inline void store(void* p, V v) { _mm512_store_si512(p, v); }

L3_LANES_TARGET inline V add(V a, V b) { return _mm512_add_epi32(a, b); }
L3_LANES_TARGET inline V sub(V a, V b) { return _mm512_sub_epi32(a, b); }
L3_LANES_TARGET inline V mullo(V a, V b) { return _mm512_mullo_epi32(a, b); }
L3_LANES_TARGET inline V and_(V a, V b) { return _mm512_and_si512(a, b); }
L3_LANES_TARGET inline V or_(V a, V b) { return _mm512_or_si512(a, b); }
L3_LANES_TARGET inline V xor_(V a, V b) { return _mm512_xor_si512(a, b); }
template <int N>
L3_LANES_TARGET inline V slli(V a) { return _mm512_slli_epi32(a, N); }
template <int N>
L3_LANES_TARGET inline V srli(V a) { return _mm512_srli_epi32(a, N); }
template <int N>
L3_LANES_TARGET inline V srai(V a) { return _mm512_srai_epi32(a, N); }
L3_LANES_TARGET inline V sllv(V a, V n) { return _mm512_sllv_epi32(a, n); }
L3_LANES_TARGET inline V srlv(V a, V n) { return _mm512_srlv_epi32(a, n); }
L3_LANES_TARGET inline V min(V a, V b) { return _mm512_min_epi32(a, b); }
L3_LANES_TARGET inline V max(V a, V b) { return _mm512_max_epi32(a, b); }
L3_LANES_TARGET inline V lzcnt(V a) { return _mm512_lzcnt_epi32(a); }
// The bits of each lane's value as a float (exact below 2^24).
L3_LANES_TARGET inline V float_bits(V a) { return _mm512_castps_si512(_mm512_cvtepi32_ps(a)); }

// Masks: lanes [0, n), lane 0, from and to bits (bit i: lane i).
L3_LANES_TARGET inline M lanes_below(int n) { return n >= 16 ? M(0xffff) : M((1u << n) - 1); }
L3_LANES_TARGET inline M first_lane() { return M(1); }
L3_LANES_TARGET inline M no_lanes() { return M(0); }
L3_LANES_TARGET inline M mask_from_bits(std::uint32_t bits) { return M(bits); }
L3_LANES_TARGET inline std::uint32_t mask_bits(M m) { return m; }
L3_LANES_TARGET inline bool any(M m) { return m != 0; }
L3_LANES_TARGET inline M mask_and(M a, M b) { return M(a & b); }
L3_LANES_TARGET inline M mask_or(M a, M b) { return M(a | b); }
L3_LANES_TARGET inline M mask_and_not(M a, M b) { return M(a & ~b); }  // a and not b

// Compares; the _in forms only in the lanes of m (0 elsewhere).
L3_LANES_TARGET inline M cmpeq(V a, V b) { return _mm512_cmpeq_epi32_mask(a, b); }
L3_LANES_TARGET inline M cmpgt(V a, V b) { return _mm512_cmpgt_epi32_mask(a, b); }
L3_LANES_TARGET inline M cmplt(V a, V b) { return _mm512_cmplt_epi32_mask(a, b); }
L3_LANES_TARGET inline M cmpge(V a, V b) { return _mm512_cmpge_epi32_mask(a, b); }
L3_LANES_TARGET inline M cmpeq_in(M m, V a, V b) { return _mm512_mask_cmpeq_epi32_mask(m, a, b); }
L3_LANES_TARGET inline M cmpneq_in(M m, V a, V b) { return _mm512_mask_cmpneq_epi32_mask(m, a, b); }
L3_LANES_TARGET inline M cmpgt_in(M m, V a, V b) { return _mm512_mask_cmpgt_epi32_mask(m, a, b); }
// Unsigned: a >= b, and a < 2^16.
L3_LANES_TARGET inline M cmpge_unsigned_in(M m, V a, V b) { return _mm512_mask_cmpge_epu32_mask(m, a, b); }
L3_LANES_TARGET inline M below_2p16_in(M m, V a) { return _mm512_mask_cmplt_epu32_mask(m, a, _mm512_set1_epi32(1 << 16)); }

// Selects: where m, the operation's result; elsewhere src (or 0: maskz).
L3_LANES_TARGET inline V select(M m, V a, V src) { return _mm512_mask_mov_epi32(src, m, a); }
L3_LANES_TARGET inline V maskz(M m, V a) { return _mm512_maskz_mov_epi32(m, a); }
L3_LANES_TARGET inline V mask_add(V src, M m, V a, V b) { return _mm512_mask_add_epi32(src, m, a, b); }
L3_LANES_TARGET inline V mask_sub(V src, M m, V a, V b) { return _mm512_mask_sub_epi32(src, m, a, b); }
L3_LANES_TARGET inline V mask_or(V src, M m, V a, V b) { return _mm512_mask_or_epi32(src, m, a, b); }
L3_LANES_TARGET inline V mask_and(V src, M m, V a, V b) { return _mm512_mask_and_epi32(src, m, a, b); }
L3_LANES_TARGET inline V maskz_or(M m, V a, V b) { return _mm512_maskz_or_epi32(m, a, b); }
L3_LANES_TARGET inline void mask_store(void* p, M m, V v) { _mm512_mask_storeu_epi32(p, m, v); }

// The 32-bit words at byte offsets `at` from base, in the lanes of m (0 elsewhere).
L3_LANES_TARGET inline V gather_bytes(const void* base, M m, V at) {
  return _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, at, base, 1);
}
// The 32-bit words base[at], in the lanes of m (0 elsewhere).
L3_LANES_TARGET inline V gather_words(const std::uint32_t* base, M m, V at) {
  return _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, at, base, 4);
}
// Each 32-bit word byte-swapped (big-endian units, spec §7.1).
L3_LANES_TARGET inline V bswap32(V a) {
  return _mm512_shuffle_epi8(a, _mm512_set4_epi32(0x0c0d0e0f, 0x08090a0b, 0x04050607, 0x00010203));
}

// A table of 16 32-bit entries, looked up per lane (indices 0-15).
struct Table16 {
  V t;
};
L3_LANES_TARGET inline Table16 table16(const std::int32_t* e) { return {_mm512_loadu_si512(e)}; }
L3_LANES_TARGET inline V lookup(const Table16& t, V i) { return _mm512_permutexvar_epi32(i, t.t); }

// core::ans_raw_bits and core::ans_value(t, 0) per token, padded to 32 for
// two-register permutes.
struct TokenTables {
  alignas(64) std::int32_t raw[32];
  alignas(64) std::int32_t base[32];
};
inline constexpr TokenTables kTokenTables = [] {
  TokenTables m{};
  for (int i = 0; i < core::kAnsTokens; ++i) {
    m.raw[i] = core::ans_raw_bits(i);
    m.base[i] = std::int32_t(core::ans_value(i, 0));
  }
  return m;
}();

// ans_raw_bits and ans_value(t, 0) of each lane's token (0-31), by permutes
// of kTokenTables.
struct TokenLookup {
  V raw_lo, raw_hi, base_lo, base_hi;
  L3_LANES_TARGET TokenLookup()
      : raw_lo(_mm512_load_si512(kTokenTables.raw)),
        raw_hi(_mm512_load_si512(kTokenTables.raw + 16)),
        base_lo(_mm512_load_si512(kTokenTables.base)),
        base_hi(_mm512_load_si512(kTokenTables.base + 16)) {}
  L3_LANES_TARGET V raw_bits(V tok) const { return _mm512_permutex2var_epi32(raw_lo, tok, raw_hi); }
  L3_LANES_TARGET V base(V tok) const { return _mm512_permutex2var_epi32(base_lo, tok, base_hi); }
};

// Lane i's x[i - 1]; lane 0: 0 (the register of the tile's first rows).
L3_LANES_TARGET inline V from_lane_above(V x) {
  const V shift = _mm512_setr_epi32(0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14);
  return _mm512_maskz_permutexvar_epi32(0xfffe, shift, x);
}
// Lane i's x[i - 1]; lane 0: the register above's last lane.
L3_LANES_TARGET inline V from_lane_above(V above, V x) {
  const V shift = _mm512_setr_epi32(15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30);
  return _mm512_permutex2var_epi32(above, shift, x);
}

// Stores the plane values of 16 rows' pixels (one per lane, planes in
// v[0..CH-1]) to rows[lane].v[first_col - lane], as row_to_pixels reads them
// (planes past CH: 0): the planes interleaved in registers, then one 16-byte
// store per active lane.
template <int CH>
L3_LANES_TARGET inline void store_pixels(ValueRow* rows, int first_col, M active, const V* v) {
  const V z = _mm512_setzero_si512();
  const V v1 = CH > 1 ? v[CH > 1 ? 1 : 0] : z, v2 = CH > 2 ? v[CH > 2 ? 2 : 0] : z;
  const V v3 = CH > 3 ? v[CH > 3 ? 3 : 0] : z;
  const V t0 = _mm512_unpacklo_epi32(v[0], v1), t1 = _mm512_unpackhi_epi32(v[0], v1);
  const V t2 = _mm512_unpacklo_epi32(v2, v3), t3 = _mm512_unpackhi_epi32(v2, v3);
  // Lane 4b + j's pixel is block b of px[j].
  const V px[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2), _mm512_unpacklo_epi64(t1, t3),
                   _mm512_unpackhi_epi64(t1, t3)};
  alignas(64) __m128i blocks[16];
  for (int j = 0; j < 4; ++j) {
    blocks[j] = _mm512_castsi512_si128(px[j]);
    blocks[4 + j] = _mm512_extracti32x4_epi32(px[j], 1);
    blocks[8 + j] = _mm512_extracti32x4_epi32(px[j], 2);
    blocks[12 + j] = _mm512_extracti32x4_epi32(px[j], 3);
  }
  if (active == 0xffff) {
    for (int i = 0; i < 16; ++i) _mm_storeu_si128(reinterpret_cast<__m128i*>(&rows[i].v[first_col - i]), blocks[i]);
  } else {
    for (int i = 0; i < 16; ++i)
      if ((active >> i) & 1) _mm_storeu_si128(reinterpret_cast<__m128i*>(&rows[i].v[first_col - i]), blocks[i]);
  }
}

// core::inverse_transform_bits (spec §5) of four pixels, one per 128-bit
// lane ([v0 v1 v2 v3] in, [R G B A] out): in-lane broadcasts and arithmetic.
template <std::uint8_t kTransform>
L3_LANES_TARGET inline V inverse_transform_lanes(V z) {
  if constexpr (kTransform == core::kTransformSubtractGreen) {
    // R = v1 + G, G = v0, B = v2 + G.
    const V g = _mm512_shuffle_epi32(z, _MM_PERM_AAAA);
    const V sh = _mm512_shuffle_epi32(z, _MM_PERM_DCAB);  // [v1 v0 v2 v3]
    return _mm512_mask_add_epi32(sh, 0x5555, sh, g);
  } else if constexpr (kTransform == core::kTransformYCoCgR) {
    const V y = _mm512_shuffle_epi32(z, _MM_PERM_AAAA), co = _mm512_shuffle_epi32(z, _MM_PERM_BBBB);
    const V cg = _mm512_shuffle_epi32(z, _MM_PERM_CCCC);
    const V t = _mm512_sub_epi32(y, _mm512_srai_epi32(cg, 1));
    const V g = _mm512_add_epi32(cg, t);
    const V b = _mm512_sub_epi32(t, _mm512_srai_epi32(co, 1));
    V px = _mm512_add_epi32(b, co);  // R
    px = _mm512_mask_mov_epi32(px, 0x2222, g);
    px = _mm512_mask_mov_epi32(px, 0x4444, b);
    return _mm512_mask_mov_epi32(px, 0x8888, z);  // alpha as stored
  } else {
    return z;
  }
}

// The head of planes_to_pixels (decode_rows.hpp) for 3- and 4-plane rows,
// the same bytes: 16 pixels per step from x0, made bytes by vpmovdb; 3
// channels drop every 4th byte (a shuffle, a permute and a 48-byte store).
// Returns the first column left to the caller's loop (the last x1 - x0 mod
// 16); `bits` gains 256 where a value maps to no pixel.
template <int CH, std::uint8_t kTransform>
L3_LANES_TARGET inline int planes_to_pixels(const V4* vals, int x0, int x1, std::uint8_t* out, std::uint32_t& bits) {
  static_assert(CH == 3 || CH == 4);
  constexpr __mmask16 kChannels = CH == 3 ? 0x7777 : 0xffff;
  const V drop_4th = _mm512_set4_epi32(int(0x80808080), 0x0e0d0c0a, 0x09080605, 0x04020100);
  const V pack_12 = _mm512_setr_epi32(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, 0, 0, 0, 0);
  V any_value = _mm512_setzero_si512();
  int c = x0;
  for (; c + 16 <= x1; c += 16, out += 16 * CH) {
    __m128i b[4];
    for (int q = 0; q < 4; ++q) {
      const V px = inverse_transform_lanes<kTransform>(_mm512_loadu_si512(vals + c + 4 * q));
      any_value = _mm512_mask_or_epi32(any_value, kChannels, any_value, px);
      b[q] = _mm512_cvtepi32_epi8(px);
    }
    V bytes = _mm512_castsi128_si512(b[0]);
    bytes = _mm512_inserti32x4(bytes, b[1], 1);
    bytes = _mm512_inserti32x4(bytes, b[2], 2);
    bytes = _mm512_inserti32x4(bytes, b[3], 3);
    if constexpr (CH == 3) {
      bytes = _mm512_permutexvar_epi32(pack_12, _mm512_shuffle_epi8(bytes, drop_4th));
      _mm512_mask_storeu_epi32(out, 0x0fff, bytes);
    } else {
      _mm512_storeu_si512(out, bytes);
    }
  }
  if (_mm512_cmpgt_epu32_mask(any_value, _mm512_set1_epi32(255))) bits |= 256u;
  return c;
}
