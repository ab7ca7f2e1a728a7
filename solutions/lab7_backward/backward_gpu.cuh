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

// Algorithm 2's line 15 is a CTA's share of dQ_i added into p.dq_accum with course::atomic_add_4
// (part 2, 4 adjacent floats, dst 16-byte aligned) or atomic_add_2 (part 3, 2 floats, dst 8-byte
// aligned), course/gpu.hpp: one vector atomic on Hopper, one atomic per float elsewhere.

// Kernel 2 on tensor cores (backward_tc.cu): dK and dV written, dQ's share of every K/V tile added
// into p.dq_accum. dtype bf16 or fp16, d = 64 or 128 (course::check_backward has checked both).
void launch_tensor_core_kernel(const Params& p, DType dtype, const AttentionShape& shape, cudaStream_t stream);

}  // namespace course::lab7::detail
