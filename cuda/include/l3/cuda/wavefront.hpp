// The CUDA batch decoder's per-warp and per-job code, written once for two
// "warp" policies (spec/cuda.md):
//   CudaWarp  one CUDA warp: lane l is thread l of the warp, collectives are
//             __shfl_up_sync / __any_sync / __syncwarp (nvcc only);
//   CpuWarp   the same 32 lanes emulated on the CPU: every lane-parallel
//             section runs the 32 lanes in a loop, and a collective runs
//             between two such loops (lanes looped between barriers).
// The CPU emulation (l3_cuda_emu) is what CI runs bit for bit against the
// codec's CPU decoder; the kernel (cuda/src/batch_decoder.cu) instantiates the
// same templates with CudaWarp.
//
// Per-lane variables are `Warp::Lanes<T>`: one register per thread on the
// GPU, an array of 32 on the CPU; `v[l]` names lane l's copy (on the GPU, l
// is always the calling lane). Rules of tile_core.hpp apply: no allocation,
// no exceptions, no asserts on input; every read is bounded.
#pragma once

#include <cstddef>
#include <cstdint>

#include "l3/codec/symbols.hpp"
#include "l3/codec/tile_core.hpp"

#define L3_WF_HD L3_HD_INLINE  // l3/common/host_device.hpp (through l3/codec/tile_core.hpp)
#define L3_WF_HDI L3_HD

namespace l3::wavefront {

inline constexpr int kWarpSize = 32;
static_assert(core::kMaxTileHeight <= kWarpSize, "one lane per tile row");

// ---- Warp policies -----------------------------------------------------------

// The CPU emulation of one warp. Each lane-parallel section is a loop over the
// 32 lanes; collectives see every lane's state after the section.
struct CpuWarp {
  template <class T> struct Lanes {
    T v[kWarpSize];
    T& operator[](int lane) { return v[lane]; }
    const T& operator[](int lane) const { return v[lane]; }
  };
  // Runs f(lane) for every lane (a lane-parallel section).
  template <class F> void each(F&& f) {
    for (int l = 0; l < kWarpSize; ++l) f(l);
  }
  // Runs f() once, for the warp (lane 0 on the GPU), then a barrier.
  template <class F> void single(F&& f) { f(); }
  // dst[l] = src[l - 1] for l >= 1, dst[0] = src[0] (__shfl_up_sync(.., 1)).
  template <class T> void shfl_up(Lanes<T>& dst, const Lanes<T>& src) {
    for (int l = kWarpSize - 1; l >= 1; --l) dst.v[l] = src.v[l - 1];
    dst.v[0] = src.v[0];
  }
  // dst[l] = src[l - delta] for l >= delta, else src[l] (__shfl_up_sync(.., delta)).
  template <class T> void shfl_up_by(Lanes<T>& dst, const Lanes<T>& src, int delta) {
    for (int l = kWarpSize - 1; l >= 0; --l) dst.v[l] = l >= delta ? src.v[l - delta] : src.v[l];
  }
  bool any(const Lanes<int>& pred) const {
    int r = 0;
    for (int l = 0; l < kWarpSize; ++l) r |= pred.v[l];
    return r != 0;
  }
  void sync() {}
};

#if defined(__CUDACC__)
// One CUDA warp; all 32 threads of the warp must call every member together.
struct CudaWarp {
  int lane;  // threadIdx.x % 32
  template <class T> struct Lanes {
    T v;
    __host__ __device__ __forceinline__ T& operator[](int) { return v; }
    __host__ __device__ __forceinline__ const T& operator[](int) const { return v; }
  };
  template <class F> __host__ __device__ __forceinline__ void each(F&& f) { f(lane); }
  template <class F> __host__ __device__ __forceinline__ void single(F&& f) {
#if defined(__CUDA_ARCH__)
    if (lane == 0) f();
    __syncwarp();
#else
    f();
#endif
  }
  __host__ __device__ __forceinline__ void shfl_up(Lanes<int>& dst, const Lanes<int>& src) {
#if defined(__CUDA_ARCH__)
    dst.v = __shfl_up_sync(0xffffffffu, src.v, 1);
#else
    dst.v = src.v;
#endif
  }
  template <class T>
  __host__ __device__ __forceinline__ void shfl_up_by(Lanes<T>& dst, const Lanes<T>& src, int delta) {
#if defined(__CUDA_ARCH__)
    dst.v = __shfl_up_sync(0xffffffffu, src.v, delta);
#else
    dst.v = src.v;
    (void)delta;
#endif
  }
  __host__ __device__ __forceinline__ bool any(const Lanes<int>& pred) const {
#if defined(__CUDA_ARCH__)
    return __any_sync(0xffffffffu, pred.v) != 0;
#else
    return pred.v != 0;
#endif
  }
  __host__ __device__ __forceinline__ void sync() {
#if defined(__CUDA_ARCH__)
    __syncwarp();
#endif
  }
};
#endif

// ---- One tile ------------------------------------------------------------------

// Where a tile's decoded pixels go. Pixel (r, c) of the tile, for r in [y0, y1)
// and c in [x0, x1) (tile-local), plane p, is written at
//   base + (r - y0) * row_stride + (c - x0) * pixel_stride + p * plane_stride.
// Interleaved output (HWC): pixel_stride = channels, plane_stride = 1;
// planar (CHW): pixel_stride = 1, plane_stride = bytes of one plane.
// A mirrored tile (spec/codec.md §4.7) is decoded through a task whose
// rectangle is the mirrored one and whose pixel_stride is negative
// (mirrored_task): the same stores, right to left.
struct TileTask {
  const std::uint8_t* tile = nullptr;  // the tile's bytes (mode byte first)
  std::uint32_t size = 0;              // >= 1 (the tile table rejects size 0)
  int width = 0, height = 0;           // tile size, clipped at the image edge
  int channels = 0;                    // 1..4
  int version = 0;                     // the image header's format version (1..4)
  int x0 = 0, y0 = 0, x1 = 0, y1 = 0;  // tile-local rectangle to output, non-empty
  std::uint8_t* base = nullptr;
  std::int64_t row_stride = 0, pixel_stride = 0, plane_stride = 0;
};

// The task that decodes mirrored tile `t` (kind 3, spec/codec.md §4.7) as a
// coded tile: decoded column c is the tile's column W - 1 - c, so the decoded
// rectangle is [W - x1, W - x0) and its first column goes where t's last does.
L3_WF_HDI TileTask mirrored_task(const TileTask& t) {
  TileTask m = t;
  m.x0 = t.width - t.x1;
  m.x1 = t.width - t.x0;
  m.base = t.base + std::int64_t(t.x1 - t.x0 - 1) * t.pixel_stride;
  m.pixel_stride = -t.pixel_stride;
  return m;
}

// `planes` is t.channels; the wavefront passes its compile-time CH so that
// `px` stays in registers.
L3_WF_HDI void store_pixel(const TileTask& t, int r, int c, const std::uint8_t* px, int planes) {
  std::uint8_t* o = t.base + std::int64_t(r - t.y0) * t.row_stride + std::int64_t(c - t.x0) * t.pixel_stride;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int p = 0; p < planes; ++p) o[std::int64_t(p) * t.plane_stride] = px[p];
}

// ---- Output staging (spec/cuda.md §2 "Coalesced stores") -------------------------
//
// At a wavefront step the 32 lanes decode pixels of 32 different rows: stored
// straight to the output, one step's stores touch ~32 cache lines. Instead each
// lane writes its pixel, packed in one 32-bit word, to a per-warp ring of
// kStageCols columns per row (shared memory on the GPU); whenever the last row
// has completed a block of kStageBlock (B) columns, the warp copies that block
// out, kWarpSize / B rows at a time, lane l taking column c0 + l % B:
// consecutive lanes, consecutive pixels. Block k is complete after step
// B k + B - 1 + (rows - 1); lane 0 is then at column <= B k + B + 30 and reaches
// block k's ring slots again only at column B k + kStageCols, so kStageCols >=
// B + 31 suffices: 64 columns for blocks of 32. Pixel copies and bilevel
// templates read the ring up to 63 columns back (spec/codec.md §6.6, §6.8),
// which 64 columns also hold. A row's 64 words are consecutive: a step's
// stores (row l, column s - l) fall on banks (s - l) mod 32, all different; a
// copy-out reads consecutive words of one row.
//
// L3_WAVEFRONT_NARROW_RING (kernel variant narrow-ring-24, spec/cuda.md §2
// "Kernel variants") builds the ring of 48 columns and blocks of 16, 2,048
// bytes a warp less, so that 6 blocks of 4 warps (24 warps) fit an sm_90 SM:
// it cannot hold a copy's or a template's source, and decodes tiles with
// copies or bilevel planes as errc::unsupported (kUnsupportedTile). A step's
// stores then meet at most 2 to a bank (row pitch 48 words).
#if defined(L3_WAVEFRONT_NARROW_RING)
inline constexpr bool kNarrowRing = true;
inline constexpr int kStageCols = 48;
inline constexpr int kStageBlock = 16;
#else
inline constexpr bool kNarrowRing = false;
inline constexpr int kStageCols = 64;
inline constexpr int kStageBlock = 32;
static_assert(kStageCols >= core::kCopyWindow && kStageCols > core::kTemplateReach, "copy and template sources");
#endif
inline constexpr int kStagePitch = kStageCols;
inline constexpr int kStageRowsPerCopy = kWarpSize / kStageBlock;  // rows a copy-out instruction covers
static_assert(kStageCols >= kStageBlock + kWarpSize - 1, "a block is copied out before lane 0 reuses its slots");
static_assert(kWarpSize % kStageBlock == 0, "whole rows per copy-out instruction");
inline constexpr int kUnsupportedTile = int(errc::unsupported);  // the narrow ring's copies and bilevel tiles

// Per-warp scratch (shared memory on the GPU): the coded tile's parameters,
// the parse status and the output ring. The row-length table's layout
// (core::RowTable, read only while the warp parses a tile) shares the ring's
// first words: the parse ends with a warp barrier before the tile's first
// ring store, and the ring holds nothing of the tile before. 11,392 bytes a
// warp: 5 blocks of 4 warps (20 warps) fit an sm_90 SM's 228 KiB with the
// driver's 1 KiB a block (at most 11,417; tests/cuda_kernel_resources.sh);
// with the narrow ring 9,344 bytes, 6 blocks (at most 9,472).
struct WarpScratch {
  core::CodedTileParams params;
  int status;
  union {
    core::RowTable rows;
    std::uint32_t stage[kWarpSize * kStagePitch];
  };
};

// The ring word of tile pixel (r, c) (c >= 0).
L3_WF_HDI int stage_at(int r, int c) { return r * kStagePitch + int(unsigned(c) % unsigned(kStageCols)); }

template <int CH> L3_WF_HDI std::uint32_t pack_pixel(const std::uint8_t* px) {
  std::uint32_t w = 0;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int p = 0; p < CH; ++p) w |= std::uint32_t(px[p]) << (8 * p);
  return w;
}

// Copies columns [c0, c0 + kStageBlock) of the ring (those inside the output
// rectangle) to the output, lane l taking column c0 + l % kStageBlock of every
// kStageRowsPerCopy-th output row from row y0 + l / kStageBlock.
// `indices`: a palette tile with pixel copies, whose ring holds palette
// indices (spec/cuda.md §2), looked up in `params` here.
template <int CH, class Warp>
L3_WF_HD void flush_stage(Warp& warp, const TileTask& t, const std::uint32_t* stage, int c0,
                          const core::CodedTileParams* indices = nullptr) {
  warp.each([&](int l) {
    // Unsigned: a mask and a shift; lane l itself for blocks of 32 (nvcc does
    // not know that l < 32).
    const bool whole_rows = kStageBlock == kWarpSize;
    const int c = c0 + (whole_rows ? l : int(unsigned(l) % kStageBlock));
    if (c < t.x0 || c >= t.x1) return;
    for (int r = t.y0 + (whole_rows ? 0 : int(unsigned(l) / kStageBlock)); r < t.y1; r += kStageRowsPerCopy) {
      std::uint32_t w = stage[stage_at(r, c)];
      if (indices) core::palette_word(t.tile, *indices, int(w), w);  // checked when decoded
      std::uint8_t px[core::kMaxChannels];
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
      for (int p = 0; p < CH; ++p) px[p] = std::uint8_t(w >> (8 * p));
      store_pixel(t, r, c, px, CH);
    }
  });
}

// Constant and raw tiles: the warp's lanes stride over the output pixels.
// Status rules equal the CPU decoder's (codec/src/decoder.cpp).
template <class Warp> L3_WF_HD int copy_tile_warp(Warp& warp, const TileTask& t, int kind) {
  const std::uint32_t ch = std::uint32_t(t.channels);
  if (kind == core::kTileConstant) {
    if (t.tile[0] != core::kTileConstant) return core::kReservedBits;
    if (t.size != 1u + ch) return t.size < 1u + ch ? core::kTruncated : core::kCorruptTile;
  } else {
    if (t.tile[0] != core::kTileRaw) return core::kReservedBits;
    const std::uint32_t need = 1u + std::uint32_t(t.width) * std::uint32_t(t.height) * ch;
    if (t.size != need) return t.size < need ? core::kTruncated : core::kCorruptTile;
  }
  const int w = t.x1 - t.x0, count = w * (t.y1 - t.y0);
  warp.each([&](int l) {
    for (int i = l; i < count; i += kWarpSize) {
      const int r = t.y0 + i / w, c = t.x0 + i % w;
      const std::uint8_t* src =
          kind == core::kTileConstant ? t.tile + 1 : t.tile + 1 + (std::uint64_t(r) * std::uint32_t(t.width) + std::uint32_t(c)) * ch;
      store_pixel(t, r, c, src, t.channels);
    }
  });
  return core::kOk;
}

// The tile-edge rules of spec/codec.md §6.3 (core::apply_edges) as selects,
// for the wavefront: at every step lane 0 is in the first row and one lane
// may be in the first column, so the warp ran apply_edges' branches at every
// step. The first pixel's rule (plane midpoints, zero codes) needs no case:
// lane 0 starts with W = the planes' midpoints and zero codes (wavefront_coded),
// which the first row's rule then copies to N and NW.
template <int CH> L3_WF_HDI void apply_edges_select(int r, int c, core::Neighbours& nb) {
  const bool top = r == 0, left = c == 0 && r != 0;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int p = 0; p < CH; ++p) {
    const int w = nb.w[p], n = nb.n[p], uw = nb.uw[p], un = nb.un[p];
    nb.w[p] = left ? n : w;
    nb.uw[p] = left ? un : uw;
    nb.n[p] = top ? w : n;
    nb.un[p] = top ? uw : un;
    nb.nw[p] = top ? w : left ? n : nb.nw[p];
    nb.unw[p] = top ? uw : left ? un : nb.unw[p];
  }
}

// Pixel (r, c)'s samples from its plane values: their ramps added in a tile
// with ramps (spec/codec.md §6.9, version 14; `val` stays without them, as
// the next pixels' neighbours), then the inverse transform. False when no
// 8-bit pixel results.
template <int CH>
L3_WF_HDI bool ramped_pixel(const core::CodedTileParams& t, int r, int c, const int* val, std::uint8_t* px) {
  if (!t.ramps) return core::inverse_transform(t.transform, CH, val, px);
  int ramped[CH];
  for (int p = 0; p < CH; ++p) ramped[p] = val[p];
  core::add_ramps<CH>(t, r, c, ramped);
  return core::inverse_transform(t.transform, CH, ramped, px);
}

// ---- Issue probe (spec/cuda.md §2 "Kernel variants") ---------------------------
//
// A build with L3_WAVEFRONT_PROBE_FILLER=K (kernel variant filler-K) adds K
// integer instructions to every wavefront step on the GPU: K chain steps
// spread over four independent chains, each a rotation and an add (which no
// compiler folds away; sm_90 does one in a single LEA.HI,
// bench/cuda_sass_breakdown.sh counts them), so that they take issue slots
// without one long wait. Timed against the default (same pixels), they give
// the cost of an instruction a step: what the static reductions of
// bench/results/cuda-static-sm90.md buy. The chains
// end in a volatile store to the output ring after its last copy-out (a warp
// decodes one job, and reads the ring no more), so that they are computed
// and change nothing: a test that is false at run time would not do, as the
// compiler proved the two tried false (an empty tile, a negative stride)
// and dropped the chains. The CPU emulation built with the definition
// (test_cuda_emu_probe) checks that nothing changes. A probe measures; it
// never becomes the default.
#if defined(L3_WAVEFRONT_PROBE_FILLER)
inline constexpr int kProbeFiller = L3_WAVEFRONT_PROBE_FILLER;
static_assert(kProbeFiller > 0 && kProbeFiller % 4 == 0, "whole rounds of the four chains");
#else
inline constexpr int kProbeFiller = 0;
#endif

struct ProbeFiller {
  std::uint32_t chain[4];
  std::uint32_t step;  // loop-invariant, unknown to the compiler
  L3_WF_HDI void issue() {
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int i = 0; i < kProbeFiller; ++i) {
      std::uint32_t& c = chain[i % 4];
      c = ((c << 13) | (c >> 19)) + step;
    }
  }
  L3_WF_HDI void sink(std::uint32_t* word) const {
    *static_cast<volatile std::uint32_t*>(word) = chain[0] ^ chain[1] ^ chain[2] ^ chain[3];
  }
};

// A coded tile as a wavefront (spec/cuda.md §2): lane r owns tile row r; at
// step s lane r decodes pixel (r, c = s - r) when 0 <= c < x1. N and NW come
// from lane r - 1 by shuffles (one per plane for values, one for codes): after
// step s every lane publishes the pixel it just decoded (plane values and
// residual codes), which is N for lane
// r + 1 at step s + 1; the N a lane received at the step before is its NW.
// Rows [0, y1) and columns [0, x1) are decoded (the CPU decoder's crop rule);
// when that is the whole tile, every row stream must be consumed exactly.
// A narrow-ring build never gets a tile with copies or bilevel planes
// (decode_tile_warp), so `!kNarrowRing &&` drops their code from it. It is
// written out at each use: as one helper it moved the default kernel's
// layout (563 -> 564 on the step's common path), and the figures of
// bench/results/cuda-static-sm90.md are of this form.
template <int CH, std::uint8_t kPred, class Warp>
L3_WF_HD int wavefront_coded(Warp& warp, const TileTask& task, const core::CodedTileParams& t, std::uint32_t* stage) {
  using LI = typename Warp::template Lanes<int>;
  typename Warp::template Lanes<core::WavefrontLaneState> st;
  LI wv[CH], wu[CH];    // W: the lane's own last pixel (plane values, residual codes)
  LI nv[CH], nu[CH];    // N: received from the lane above after the last step
  LI nwv[CH], nwu[CH];  // NW: the N received one step earlier
  LI bad;               // the lane's row failed
  const int rows = task.y1, cols = task.x1;
  // Every row stream is read to its end (and checked) when rows [0, height)
  // and columns [0, width) are decoded, whatever part of them is output.
  const bool full = task.x1 == t.width && task.y1 == t.height;
  warp.each([&](int l) {
    for (int p = 0; p < CH; ++p) {
      wu[p][l] = nv[p][l] = nu[p][l] = nwv[p][l] = nwu[p][l] = 0;
      wv[p][l] = t.plane[p].range.mid;  // W of the tile's first pixel (apply_edges_select)
    }
    bad[l] = 0;
    if (l < rows) core::lane_begin(st[l], task.tile, t, l);
  });
  const int steps = cols + rows - 1;
  ProbeFiller filler{{0u, 1u, 2u, 3u}, std::uint32_t(task.width)};
  for (int s = 0; s < steps; ++s) {
    if constexpr (kProbeFiller > 0) filler.issue();
    warp.each([&](int l) {
      const int c = s - l;
      if (l >= rows || c < 0 || c >= cols) return;
      core::Neighbours nb;
      for (int p = 0; p < CH; ++p) {
        nb.w[p] = wv[p][l];
        nb.uw[p] = wu[p][l];
        nb.n[p] = nv[p][l];
        nb.un[p] = nu[p][l];
        nb.nw[p] = nwv[p][l];
        nb.unw[p] = nwu[p][l];
      }
      apply_edges_select<CH>(l, c, nb);
      int val[CH], code[CH];
      std::uint32_t* slot = &stage[stage_at(l, c)];
      if (!kNarrowRing && core::pixel_copied(t, st[l], l, c)) {
        // A pixel copy (spec/codec.md §6.6): its source's stage word, still
        // in the ring (at most kCopyRows rows up, kCopyWindow columns back,
        // written at an earlier step); its planes from the word (an index in
        // a palette tile, else by the forward transform), its codes 0.
        const std::uint32_t word = stage[stage_at(l + st[l].copy_dy, c + st[l].copy_dx)];
        if (CH == 1 && t.palette_size) {
          val[0] = int(word);
        } else {
          std::uint8_t px[core::kMaxChannels];
          for (int p = 0; p < CH; ++p) px[p] = std::uint8_t(word >> (8 * p));
          core::forward_transform(t.transform, CH, px, val);
        }
        for (int p = 0; p < CH; ++p) code[p] = 0;
        *slot = word;
      } else {
        // A bilevel tile's template pixels (spec/codec.md §6.8): indices in
        // the ring (written at earlier steps), or W / N outside the tile.
        int tmpl[core::kTemplatePixels] = {0, 0};
        if (CH == 1 && !kNarrowRing && t.bilevel)
          core::template_indices(t, l, c, nb.w[0], nb.n[0], [&](int y, int x) { return stage[stage_at(y, x)]; }, tmpl);
        core::decode_pixel<CH, kPred>(t, st[l], nb.w, nb.n, nb.nw, nb.uw, nb.un, nb.unw, c, val, code, tmpl[0], tmpl[1]);
        // In a tile with copies or templates every pixel goes to the ring,
        // and is checked (a copy may carry it into the output), as the CPU
        // decoder does.
        const bool ring_indices = !kNarrowRing && (t.copies || t.bilevel);
        if (ring_indices || (l >= task.y0 && c >= task.x0)) {
          std::uint8_t px[core::kMaxChannels];
          bool ok;
          if constexpr (CH == 1) {
            // Palette tiles (spec/codec.md §4.4): the index's colour, all of
            // the image's channels packed in the stage word; with copies or
            // templates the index itself (flush_stage looks the colour up).
            if (t.palette_size) {
              std::uint32_t word = 0;
              ok = core::palette_word(task.tile, t, val[0], word);
              *slot = ring_indices ? std::uint32_t(val[0]) : word;
            } else {
              ok = ramped_pixel<CH>(t, l, c, val, px);
              *slot = pack_pixel<CH>(px);
            }
          } else {
            ok = ramped_pixel<CH>(t, l, c, val, px);
            *slot = pack_pixel<CH>(px);
          }
          if (!ok) bad[l] = 1;
        }
      }
      for (int p = 0; p < CH; ++p) {
        nwv[p][l] = nv[p][l];
        nwu[p][l] = nu[p][l];
        wv[p][l] = val[p];
        wu[p][l] = code[p];
      }
    });
    // Publish: lane l's newest pixel becomes lane l + 1's N.
    for (int p = 0; p < CH; ++p) {
      warp.shfl_up(nv[p], wv[p]);
      warp.shfl_up(nu[p], wu[p]);
    }
    // This step's ring words are visible to the next step's copies and templates.
    if (!kNarrowRing && (t.copies || t.bilevel)) warp.sync();
    // The last row has just completed column `done`: copy out a full block,
    // or the last, partial one (the same decision in every lane).
    const int done = s - (rows - 1);
    if (done >= 0 && ((done & (kStageBlock - 1)) == kStageBlock - 1 || s == steps - 1)) {
      warp.sync();  // the staged words are visible to the whole warp
      const int c0 = done & ~(kStageBlock - 1);
      if (CH == 1 && t.palette_size) {
        const core::CodedTileParams* indices = !kNarrowRing && (t.copies || t.bilevel) ? &t : nullptr;
        switch (task.channels) {
          case 2: flush_stage<2>(warp, task, stage, c0, indices); break;
          case 3: flush_stage<3>(warp, task, stage, c0, indices); break;
          case 4: flush_stage<4>(warp, task, stage, c0, indices); break;
          default: flush_stage<1>(warp, task, stage, c0, indices); break;
        }
      } else {
        flush_stage<CH>(warp, task, stage, c0);
      }
      warp.sync();  // copied out before lanes write these slots again
    }
  }
  warp.each([&](int l) {
    if constexpr (kProbeFiller > 0) filler.sink(stage + l);  // after the last copy-out's barrier
    if (l >= rows) return;
    if (full) {
      if (core::lane_end(st[l], t.row_length[l]) != core::kOk) bad[l] = 1;
    } else if (core::lane_end_partial(st[l], t.row_length[l]) != core::kOk) {
      bad[l] = 1;
    }
  });
  return warp.any(bad) ? core::kCorruptTile : core::kOk;
}

// With L3_WAVEFRONT_FIXED_PREDICTORS, tiles whose planes share a predictor
// take a path with it fixed at compile time, as the CPU decoder does; the
// result is the same either way. By default the GPU has one path per channel
// count (predict() selects with conditional moves): six loop bodies per
// channel count made the decode kernel ~52k instructions, and warps of one SM
// decoding tiles with different predictors would compete for the instruction
// cache (spec/cuda.md §2, "Code size").
template <int CH, class Warp>
L3_WF_HD int wavefront_by_predictor(Warp& warp, const TileTask& task, const core::CodedTileParams& t,
                                    std::uint32_t* stage) {
#if defined(L3_WAVEFRONT_FIXED_PREDICTORS)
  switch (core::shared_predictor(t)) {
    case core::kPredMED: return wavefront_coded<CH, core::kPredMED>(warp, task, t, stage);
    case core::kPredW: return wavefront_coded<CH, core::kPredW>(warp, task, t, stage);
    case core::kPredN: return wavefront_coded<CH, core::kPredN>(warp, task, t, stage);
    case core::kPredAvg: return wavefront_coded<CH, core::kPredAvg>(warp, task, t, stage);
    case core::kPredGrad: return wavefront_coded<CH, core::kPredGrad>(warp, task, t, stage);
    case core::kPredNW: return wavefront_coded<CH, core::kPredNW>(warp, task, t, stage);
    default: return wavefront_coded<CH, core::kPredPerPlane>(warp, task, t, stage);
  }
#else
  return wavefront_coded<CH, core::kPredPerPlane>(warp, task, t, stage);
#endif
}

// Parses a coded tile with the whole warp (spec/cuda.md §2 "Tile parsing"):
// lane 0 reads the header up to the row-length table (core::parse_coded_header,
// sequential by nature); then the lanes expand the k tables (lane l fills
// activities l, l + 32, ...), lane r reads row r's length, and an inclusive
// scan over the lanes (5 shuffles) gives every row's offset. Same checks and
// statuses as core::parse_coded_tile: a row running past the tile is
// kTruncated whichever row it is.
template <class Warp> L3_WF_HD int parse_tile_warp(Warp& warp, const TileTask& task, WarpScratch& ws) {
  core::CodedTileParams& t = ws.params;
  warp.single([&] {
    ws.status = core::parse_coded_header(task.tile, task.size, task.width, task.height, task.channels, task.version, t, ws.rows,
                                         /*expand_k=*/false);
  });
  if (ws.status != core::kOk) {
    const int st = ws.status;
    warp.sync();  // every lane has read the status before anyone reuses ws
    return st;
  }
  using LU = typename Warp::template Lanes<std::uint64_t>;
  LU len, sum, up;
  typename Warp::template Lanes<int> bad;
  const int h = task.height;
  warp.each([&](int l) {
    for (int p = 0; p < t.channels; ++p)  // coded planes (1 in a palette tile)
      for (int a = l; a < core::kActivityTable; a += kWarpSize)
        t.plane[p].k_of_activity[a] = t.plane[p].k[core::bucket_of(a)];
    len[l] = l + 1 < h ? core::row_length_of(task.tile, ws.rows, l) : 0;
    sum[l] = len[l];
  });
  for (int d = 1; d < kWarpSize; d <<= 1) {
    warp.shfl_up_by(up, sum, d);
    warp.each([&](int l) {
      if (l >= d) sum[l] += up[l];
    });
  }
  warp.each([&](int l) {
    const std::uint64_t offset = ws.rows.rows_at + (sum[l] - len[l]);
    bad[l] = l + 1 < h && (len[l] > task.size || offset + len[l] > task.size);
    if (l < h) {
      t.row_offset[l] = std::uint32_t(offset);
      // The last row takes the rest of the tile (offset <= size unless a row failed).
      t.row_length[l] = l + 1 < h ? std::uint32_t(len[l]) : std::uint32_t(task.size - offset);
    }
  });
  const bool failed = warp.any(bad);
  warp.sync();  // the row table is visible to every lane
  return failed ? core::kTruncated : core::kOk;
}

// Decodes one tile with one warp. `ws` is per-warp storage (shared memory on
// the GPU). Returns a core::Status (or, in a narrow-ring build, kUnsupportedTile
// for a tile its ring cannot decode), the same for every lane.
// A mirrored tile (kind 3, version 12) decodes as a coded one through its
// mirrored task.
template <class Warp> L3_WF_HD int decode_tile_warp(Warp& warp, const TileTask& tile_task, WarpScratch& ws) {
  const int kind = tile_task.tile[0] & 3;
  if (kind == core::kTileConstant || kind == core::kTileRaw) return copy_tile_warp(warp, tile_task, kind);
  if (kind == core::kTileMirrored && tile_task.version < core::kVersionMirror) return core::kCorruptTile;
  const TileTask task = kind == core::kTileMirrored ? mirrored_task(tile_task) : tile_task;
  if (const int st = parse_tile_warp(warp, task, ws); st != core::kOk) return st;
  if (kNarrowRing && (ws.params.copies || ws.params.bilevel)) return kUnsupportedTile;
  switch (ws.params.channels) {  // coded planes: 1 in a palette tile
    case 1: return wavefront_by_predictor<1>(warp, task, ws.params, ws.stage);
    case 2: return wavefront_by_predictor<2>(warp, task, ws.params, ws.stage);
    case 3: return wavefront_by_predictor<3>(warp, task, ws.params, ws.stage);
    default: return wavefront_by_predictor<4>(warp, task, ws.params, ws.stage);
  }
}

// ---- One batch --------------------------------------------------------------------

enum Layout : std::uint32_t { kHWC = 0, kCHW = 1 };
inline constexpr std::uint32_t kNoDictionary = ~std::uint32_t{0};

// One image of a batch, built and checked by the host (cuda/src/plan.cpp).
struct ImageDesc {
  const std::uint8_t* in;        // the image's stream (device memory on the GPU)
  std::uint64_t in_size;         // its validated size in bytes
  std::uint64_t payload_offset;  // tile 0, relative to the stream
  core::TileGrid grid;                           // spec/codec.md §3
  std::uint32_t version, channels;
  std::uint32_t crop_x, crop_y, crop_w, crop_h;  // the output region (whole image when no crop)
  core::TileGrid::Span span;                     // the tiles the crop overlaps (one job each)
  std::uint32_t layout;                          // Layout
  // Symbols (spec/codec.md §3.4): the index of the batch entry that decodes
  // this image's dictionary (an entry after the caller's images, whose slot
  // is in the decoder's scratch), or kNoDictionary; and the section, offsets
  // into `in`.
  std::uint32_t dictionary = kNoDictionary;
  core::SymbolSection symbols;
};

// Per-image counts (built by the host), and their exclusive scan over the
// batch (computed on the device): where each image's output slot, tiles and
// jobs start. A rejected image counts zero of each.
struct ImageCounts {
  std::uint64_t out;    // output bytes: crop_w * crop_h * channels
  std::uint32_t tiles;  // tiles of the whole image
  std::uint32_t jobs;   // tiles the crop overlaps (one warp each)
};
struct AddCounts {
  L3_WF_HDI ImageCounts operator()(const ImageCounts& a, const ImageCounts& b) const {
    return {a.out + b.out, a.tiles + b.tiles, a.jobs + b.jobs};
  }
};

// Status of an image, before the finalize step: the smallest (tile << 32 | status)
// over its failing tiles, so the reported error is that of the first failing
// tile in raster order (what l3::decode reports); kStatusOk when none failed.
inline constexpr std::uint64_t kStatusOk = ~std::uint64_t{0};
inline constexpr int kCorruptTileTable = int(errc::corrupt_tile_table);
L3_WF_HDI std::uint64_t status_key(std::uint32_t tile, int status) {
  return (std::uint64_t{tile} << 32) | std::uint32_t(status);
}
L3_WF_HDI int status_of_key(std::uint64_t key) { return key == kStatusOk ? 0 : int(key & 0xffffffffu); }

struct BatchView {
  std::uint8_t* output;            // the caller's images' slots: output_bytes
  std::uint64_t output_bytes;
  std::uint8_t* scratch;           // the slots after them (symbol dictionaries), spec/cuda.md §4
  const ImageDesc* images;
  const ImageCounts* first;        // exclusive scan of the images' counts
  std::uint32_t image_count;
  const std::uint32_t* tile_size;  // tile sizes of all images (gathered from the tile tables)
  const std::uint64_t* tile_start; // exclusive scan of tile_size over the whole batch
};

// The per-element bodies of the gather step: element i of the flat tile array.
// Finds the image owning flat index `i` among `count` images whose first
// index (an exclusive scan) is first(m); images with no elements are skipped.
template <class First>
L3_WF_HDI std::uint32_t owner_of(std::uint32_t i, std::uint32_t count, const First& first) {
  std::uint32_t lo = 0, hi = count;  // first(lo) <= i < first(hi) (first(count) = infinity)
  while (hi - lo > 1) {
    const std::uint32_t mid = lo + (hi - lo) / 2;
    if (first(mid) <= i) lo = mid;
    else hi = mid;
  }
  return lo;
}

// Tile `tile`'s entry in its image's tile table (spec §3.2): a size, or from
// version 5 a copy of an earlier tile (§3.3).
L3_WF_HDI std::uint32_t table_entry(const ImageDesc& d, std::uint32_t tile) {
  const std::uint8_t* p = d.in + core::kHeaderSize + 4 * std::uint64_t(tile);
  return std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16 | std::uint32_t(p[3]) << 24;
}

// Gather: tile_size[i] for flat tile i, its payload bytes (0 for a copy,
// whose bytes are its source's), so that the scan gives every tile's start.
L3_WF_HDI std::uint32_t gather_tile_size(const BatchView& b, std::uint32_t i) {
  const std::uint32_t m = owner_of(i, b.image_count, [&](std::uint32_t k) { return b.first[k].tiles; });
  const ImageDesc& d = b.images[m];
  return core::payload_size(table_entry(d, i - b.first[m].tiles), d.version);
}

// Where entry m's slot starts: in the output, or for a symbol dictionary
// (whose slots follow the caller's images) in the scratch.
L3_WF_HDI std::uint8_t* slot_of(const BatchView& b, std::uint32_t m) {
  const std::uint64_t at = b.first[m].out;
  return at < b.output_bytes ? b.output + at : b.scratch + (at - b.output_bytes);
}

// The strides of image d's output slot: row, pixel and plane, in bytes
// (interleaved HWC or planar CHW, TileTask's convention).
struct SlotStrides {
  std::int64_t row, pixel, plane;
};
L3_WF_HDI SlotStrides slot_strides(const ImageDesc& d) {
  if (d.layout == kCHW) return {d.crop_w, 1, std::int64_t(d.crop_w) * d.crop_h};
  return {std::int64_t(d.crop_w) * d.channels, d.channels, 1};
}

// Decodes job j (one tile overlapped by one image's crop) with one warp, and
// folds a failure into status_key[image]. `atomic_min(ptr, value)` is the
// policy's 64-bit atomic minimum.
template <class Warp, class AtomicMin>
L3_WF_HD void decode_job(Warp& warp, const BatchView& b, std::uint32_t j, WarpScratch& ws,
                         std::uint64_t* status_keys, AtomicMin&& atomic_min) {
  const std::uint32_t m = owner_of(j, b.image_count, [&](std::uint32_t k) { return b.first[k].jobs; });
  const ImageDesc& d = b.images[m];
  const ImageCounts& f = b.first[m];
  const std::uint32_t local = j - f.jobs;
  const std::uint32_t tx = d.span.tx0 + local % d.span.cols, ty = d.span.ty0 + local / d.span.cols;
  const std::uint32_t tile = d.grid.index(tx, ty);
  // The tile's rectangle, clipped to the image, and the crop's part of it.
  const core::TileRect tr = d.grid.tile(tx, ty);
  const std::uint32_t rx = tr.x, ry = tr.y, rw = tr.width, rh = tr.height;
  const std::uint32_t x0 = d.crop_x > rx ? d.crop_x : rx, y0 = d.crop_y > ry ? d.crop_y : ry;
  const std::uint32_t cx1 = d.crop_x + d.crop_w, cy1 = d.crop_y + d.crop_h;
  const std::uint32_t x1 = cx1 < rx + rw ? cx1 : rx + rw, y1 = cy1 < ry + rh ? cy1 : ry + rh;
  TileTask task;
  // A tile copy decodes from its source's bytes, at its own place (spec §3.3).
  const std::uint32_t source = core::bytes_tile(table_entry(d, tile), tile, d.version);
  const std::uint64_t flat = std::uint64_t(f.tiles) + source;
  const std::uint64_t at = d.payload_offset + (b.tile_start[flat] - b.tile_start[f.tiles]);
  task.size = b.tile_size[flat];
  // The host checked the tile table; this re-check keeps every read inside the
  // stream even if its bytes changed since (e.g. a replayed CUDA graph): a
  // copy's source is an earlier tile of the image, and not a copy (size 0).
  if (source > tile || task.size == 0 || at > d.in_size || task.size > d.in_size - at) {
    warp.single([&] { atomic_min(&status_keys[m], status_key(tile, kCorruptTileTable)); });
    return;
  }
  task.tile = d.in + at;
  task.width = int(rw);
  task.height = int(rh);
  task.channels = int(d.channels);
  task.version = int(d.version);
  task.x0 = int(x0 - rx);
  task.y0 = int(y0 - ry);
  task.x1 = int(x1 - rx);
  task.y1 = int(y1 - ry);
  std::uint8_t* slot = slot_of(b, m);
  const SlotStrides strides = slot_strides(d);
  task.row_stride = strides.row;
  task.pixel_stride = strides.pixel;
  task.plane_stride = strides.plane;
  task.base = slot + std::int64_t(y0 - d.crop_y) * task.row_stride + std::int64_t(x0 - d.crop_x) * task.pixel_stride;
  const int st = decode_tile_warp(warp, task, ws);
  if (st != core::kOk) {
    warp.single([&] { atomic_min(&status_keys[m], status_key(tile, st)); });
  }
}

// The tile index in a status key for an error of the symbol section: after
// every tile, as l3::decode reports tile errors before the dictionary's.
inline constexpr std::uint32_t kSymbolsKeyTile = ~std::uint32_t{0};

// Applies image m's patches (spec/codec.md §3.4) with one warp, after the
// decode kernel: the dictionary's status (its entry's key) folds into the
// image's; an image that failed gets no patches. Every lane parses the same
// patch (uniform control flow), then the lanes share its pixels; a barrier
// between patches orders overlapping ones (the later wins). Each patch is
// re-checked against the section: device bytes may differ from the host's.
template <class Warp, class AtomicMin>
L3_WF_HD void patch_image(Warp& warp, const BatchView& b, std::uint32_t m, std::uint64_t* status_keys,
                          AtomicMin&& atomic_min) {
  const ImageDesc& d = b.images[m];
  if (d.dictionary == kNoDictionary) return;
  auto fail = [&](int st) {
    warp.single([&] { atomic_min(&status_keys[m], status_key(kSymbolsKeyTile, st)); });
  };
  const std::uint64_t dict_key = status_keys[d.dictionary];
  if (dict_key != kStatusOk) return fail(status_of_key(dict_key));
  if (status_keys[m] != kStatusOk) return;
  const core::SymbolSection& sec = d.symbols;
  if (sec.table_offset > d.in_size || sec.patches_offset > d.in_size ||
      std::uint64_t{sec.symbol_count} * core::kSymbolEntryBytes > d.in_size - sec.table_offset)
    return fail(core::kCorruptSymbols);
  const std::uint8_t* dict = slot_of(b, d.dictionary);
  const std::uint64_t dict_stride = std::uint64_t(sec.dict_width) * d.channels;
  const SlotStrides strides = slot_strides(d);
  std::uint8_t* out = slot_of(b, m);
  core::PatchReader reader{d.in + sec.patches_offset, d.in + d.in_size};
  for (std::uint32_t k = 0; k < sec.patch_count; ++k) {
    core::Patch p{};
    core::SymbolRect r{};
    int st = reader.next(p);
    if (st == core::kOk) st = core::check_patch(sec, d.in + sec.table_offset, p, d.grid.width, d.grid.height, r);
    if (st != core::kOk) return fail(st);
    warp.each([&](int lane) {
      core::copy_patch(dict, dict_stride, int(d.channels), r, p, d.crop_x, d.crop_y, d.crop_w, d.crop_h, out,
                       strides.row, strides.pixel, strides.plane, std::uint32_t(lane), kWarpSize);
    });
    warp.sync();
  }
}

}  // namespace l3::wavefront
