// Lab 7, parts 2 and 3: what backward.cu (the CUDA-core kernels, the launches, the checked call
// of course/attention.hpp) and backward_tc.cu (the tensor-core kernel) share: the kernels'
// parameters, the atomic adds into the dQ accumulator, and the launch of the tensor-core kernel,
// which backward.cu calls between its kernel 1 (D and the zeroed dQ accumulator) and its kernel 3
// (dQ converted to the dtype).
#pragma once

#include <cuda_runtime.h>
#include <cuda_runtime_api.h>

#include "course/gpu.hpp"  // DType, AttentionShape

namespace course::lab7::detail {

struct Params {
  const void* q;
  const void* k;
  const void* v;
  const void* o;
  const void* dout;
  const float* lse;
  void* dk;
  void* dv;
  float* dq_accum;  // [B, H, Nq, d] fp32, in the workspace
  float* delta;     // [B, H, Nq] fp32: D_i, in the workspace
  int nq;
  int nk;
  bool causal;
  float scale;       // softmax scale tau
  float scale_log2;  // tau * log2(e)
};

// Algorithm 2's line 15 as atomic adds: a CTA's share of dQ_i into p.dq_accum, 4 adjacent floats
// at a time (part 2, dst 16-byte aligned) or 2 (part 3, dst 8-byte aligned). Hopper (sm_90) added
// atomicAdd overloads for float4 and float2: one vector atomic instead of 4 or 2 scalar ones, so
// fewer atomic transactions at L2 for the dQ accumulation, the one gradient that every K/V tile
// adds to. Before sm_90 they do not exist, and each component gets its own
// atomicAdd(float*, float). The two paths give the same sums up to the order of the float
// additions, and atomics never fix that order anyway: the vector forms, too, are atomic per
// float only, and the CTAs of the other K/V tiles add to the same elements in whatever order
// they get there.
__device__ __forceinline__ void atomic_add_4(float* dst, float4 v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float4*>(dst), v);
#else
  atomicAdd(dst, v.x);
  atomicAdd(dst + 1, v.y);
  atomicAdd(dst + 2, v.z);
  atomicAdd(dst + 3, v.w);
#endif
}

__device__ __forceinline__ void atomic_add_2(float* dst, float2 v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float2*>(dst), v);
#else
  atomicAdd(dst, v.x);
  atomicAdd(dst + 1, v.y);
#endif
}

// Kernel 2 on tensor cores (backward_tc.cu): dK and dV written, dQ's share of every K/V tile added
// into p.dq_accum. dtype bf16 or fp16, d = 64 or 128 (course::check_backward has checked both).
void launch_tensor_core_kernel(const Params& p, DType dtype, const AttentionShape& shape, cudaStream_t stream);

}  // namespace course::lab7::detail
