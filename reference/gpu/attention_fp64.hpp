// fp64 reference attention on the GPU: naive and obviously correct, for grading and checking
// the course's CUDA kernels at sizes where the CPU reference would be slow.
//
// Plain C++ header (no Eigen, no CUDA device code): host code compiled by any C++ compiler can
// call it. Nothing here calls lab or solution code.
#pragma once

#include <cuda_runtime_api.h>

#include "course/gpu.hpp"  // DType

namespace course::reference::gpu {

// Exact-as-fp64 attention: O = softmax(scale * Q K^T) V and lse = logsumexp(scale * Q K^T),
// per row, in double arithmetic on inputs upcast to double (bf16 and fp32 upcast exactly).
//
// Q [B, H, Nq, d], K and V [B, H, Nk, d]: device pointers, row-major, of `type` (DType::fp32
// or DType::bf16: float or __nv_bfloat16).
// O [B, H, Nq, d] and lse [B, H, Nq]: device pointers to double.
// causal: bottom-right aligned, query i sees keys j <= i + Nk - Nq.
// scale: the softmax scale; 0 means 1 / sqrt(d).
// A row that sees no key gets O = 0 and lse = -inf.
// d may be 1..1024. Launches on `stream` and returns without synchronising.
// Throws course::BadInput for bad arguments and std::runtime_error when a CUDA call fails.
void attention_fp64(const void* Q, const void* K, const void* V, DType type, int B, int H,
                    int Nq, int Nk, int d, bool causal, double scale, double* O, double* lse,
                    cudaStream_t stream = nullptr);

}  // namespace course::reference::gpu
