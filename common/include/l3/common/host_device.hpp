// The one annotation of functions compiled both as host C++ and as CUDA
// device code (the codec's tile core, the wavefront, the reader's transform
// math). Without nvcc they are plain (inline) host functions.
//   L3_HD         forced inline on both sides: the per-lane / per-thread hot path;
//   L3_HD_INLINE  an ordinary inline function on both sides.
#pragma once

#if defined(__CUDACC__)
#define L3_HD __host__ __device__ __forceinline__
#define L3_HD_INLINE __host__ __device__ inline
#else
#define L3_HD inline __attribute__((always_inline))
#define L3_HD_INLINE inline
#endif
