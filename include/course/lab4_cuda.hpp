// Lab 4 API: a tiled FlashAttention forward kernel in CUDA (FA1 Algorithm 1, no tensor cores).
//
// Implemented by labs/lab4_cuda/flash_forward.cu (you) and solutions/lab4_cuda/flash_forward.cu.
// This header is plain C++ (no Eigen, no device code) so that graders and benchmarks compiled
// by the host compiler can call it. DType and AttentionShape come from course/gpu.hpp, with
// the rest of the GPU labs' toolkit (check_cuda, DeviceBuffer, kLog2e).
#pragma once

#include <cuda_runtime_api.h>

#include "course/gpu.hpp"

namespace course::lab4 {

struct ForwardOptions {
  bool causal = false;         // bottom-right aligned: query i sees keys j <= i + Nk - Nq
  float scale = 0.0f;          // softmax scale; 0 means 1/sqrt(d)
  cudaStream_t stream = nullptr;
};

// Q [B, H, Nq, d], K and V [B, H, Nk, d], O [B, H, Nq, d]: device pointers of `dtype`
// (DType::fp32 or DType::bf16: float or __nv_bfloat16), row-major; d = 32, 64 or 128.
// lse [B, H, Nq]: device floats. Arithmetic in fp32.
// A query row that sees no key gets O = 0 and lse = -inf. Launches on options.stream and
// returns without synchronising. Throws course::BadInput for bad shapes, an unsupported d or
// dtype, or null pointers, and std::runtime_error (naming the call) when a CUDA call fails.
void flash_attention_forward(const void* Q, const void* K, const void* V, void* O, float* lse,
                             DType dtype, const AttentionShape& shape,
                             const ForwardOptions& options);

}  // namespace course::lab4
